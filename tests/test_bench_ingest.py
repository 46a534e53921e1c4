"""benchmarks/bench_ingest.py measures what it says: its "without run_totals" line really runs ingest without
the run-level table, and its stage breakdown (``--stages``) times ingest's own functions on the files.

Experimental unit: one ingest of three real fio 3.33 multi-job json+ outputs (benchmarks/data/fio_multijob).
No time is asserted (timings belong to the benchmark, not to tests): only which code each measurement runs.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pandas as pd
import pytest

import storagebench.ingest as ing
import storagebench.ingest._collector as collector

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_ingest", ROOT / "benchmarks" / "bench_ingest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture()
def files(tmp_path: Path) -> list[Path]:
    out = []
    for src in sorted((ROOT / "benchmarks" / "data" / "fio_multijob").glob("*.json"))[:3]:
        shutil.copyfile(src, tmp_path / src.name)
        out.append(tmp_path / src.name)
    return out


def _counting(monkeypatch) -> list[int]:
    """Wrap the run_totals that ingest calls; the list holds how often it ran."""
    calls = [0]
    real = collector.run_totals

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(collector, "run_totals", counted)
    return calls


def test_without_run_totals_never_runs_it_and_puts_it_back(bench, files, monkeypatch):
    calls = _counting(monkeypatch)
    wrapped = collector.run_totals
    full = bench.bench_storagebench(files)
    assert calls[0] == 1  # the full ingest builds the run-level table once
    assert bench.bench_storagebench_without_run_totals(files) == full  # same runs + histograms rows
    assert calls[0] == 1  # ... and the line without it did not build it
    assert collector.run_totals is wrapped  # restored afterwards
    assert len(ing.ingest_paths(files).run_totals) > 0


def test_stages_are_ingests_own_functions_on_the_files(bench, files):
    stages = dict(bench._stages(files))
    assert list(stages)[-1] == "ingest_paths, all of it"
    res = ing.ingest_paths(files)
    assert res.ok
    # the tables the stages build are ingest's tables of these files
    pd.testing.assert_frame_equal(stages["run_totals"](), res.run_totals, check_exact=True)
    assert stages["table gate (check_rows of every table)"]() == {}  # the gate refuses none of them
    hist = stages["histograms table (+ bins vs N check, validate)"]()
    pd.testing.assert_frame_equal(hist, res.histograms, check_exact=True)
    runs = stages["runs table (runs_frame + validate)"]()
    pd.testing.assert_frame_equal(runs, res.runs, check_exact=True)
    ids = stages["run_id: XXH3-128 of each loose file"]()
    assert ids == list(res.runs["run_id"].drop_duplicates())
    parsed = stages["json+ bins text -> int64 arrays"]()
    assert sum(len(keys) for keys, _, _ in parsed) == len(res.histograms)

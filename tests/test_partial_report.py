"""A running study is not reported as finished (issue 18, item 8).

A real sweep (fio, 1 s runs, a file target under /tmp) measures the missing runs of a study; it is stopped
(SIGSTOP) while it holds the study's lock, after fio has finished a run in its staging directory
(``raw/.tmp-<run_id>-<pid>/``, the state in which the issue's write-up said 6 runs in its provenance line and 7 in
its captions). Then ``report`` and ``ingest`` refuse, naming the pid; ``--partial`` publishes under a banner with
the runs done and planned, and every count of the page agrees; once the sweep has finished, ``report`` publishes
without a banner.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pandas as pd
import pytest
from typer.testing import CliRunner

from storagebench._store import StudyStore
from storagebench.cli import app

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "study_demo"


def _drop_first_repetition_of_three_points(study: Path) -> list[str]:
    """Delete 3 completed runs (repetition 1 of three points) so that a sweep has 3 runs left to measure."""
    dropped, points = [], set()
    for d in sorted((study / "raw").iterdir()):
        p = orjson.loads((d / "point.json").read_bytes())
        key = tuple(sorted(p["factors"].items()))
        if p["repetition"] == 1 and key not in points and len(dropped) < 3:
            points.add(key)
            dropped.append(d.name)
            shutil.rmtree(d)
    return dropped


def _counts(html: str) -> tuple[set[str], set[str]]:
    """The run counts of a write-up's figure captions ("study demo, N runs: ..."), and of its provenance line
    ("Data: N fio runs on ...") together with its findings ("(N fio runs in a seeded random order)")."""
    return (set(re.findall(r"study demo, (\d+) runs", html)),
            set(re.findall(r"Data: (\d+) fio runs", html)) | set(re.findall(r"\((\d+) fio runs in a", html)))


def test_report_and_ingest_of_a_running_sweep(tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (make test installs it as root)")
    results = tmp_path / "results"
    study = results / "demo"
    shutil.copytree(FIXTURE, study)
    dropped = _drop_first_repetition_of_three_points(study)
    spec = tmp_path / "demo.yaml"
    shutil.copy(FIXTURE / "study.yaml", spec)
    target = Path("/tmp") / f"sb-partial-{os.getpid()}-{time.monotonic_ns()}.dat"
    log = (tmp_path / "sweep.log").open("w")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sweep = subprocess.Popen([sys.executable, "-m", "storagebench", "run", str(spec), "--target", str(target),
                              "--out", str(results), "--no-progress"], env=env, stdout=log, stderr=subprocess.STDOUT)
    store = StudyStore(study)
    stopped = False
    try:
        # wait until the sweep holds the lock and a run is staged (its job file written: fio about to run or
        # running); waiting for fio's output there too raced the commit, which now follows fio's exit at once
        # (the quiet window is handed on between runs), so a sweep could end before one was seen
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sweep.poll() is None:
            staged = [p for p in (study / "raw").glob(".tmp-*") if (p / "job.fio").is_file()]
            if store.sweep_holder() is not None and staged:
                break
            time.sleep(0.02)
        assert sweep.poll() is None, (tmp_path / "sweep.log").read_text()
        os.kill(sweep.pid, signal.SIGSTOP)
        stopped = True
        time.sleep(1.5)  # fio (not stopped) finishes its run into the staging directory
        holder = store.sweep_holder()
        assert holder is not None and holder["pid"] == sweep.pid
        done = len(store.completed_run_ids())
        assert 9 <= done < 12 and any((study / "raw").glob(".tmp-*"))

        runner = CliRunner()
        refused = runner.invoke(app, ["report", str(study), "--out", str(tmp_path / "r.html")])
        assert refused.exit_code == 1 and not (tmp_path / "r.html").exists(), refused.output
        for words in ("still being measured", f"pid {sweep.pid}", f"{done} of 12 planned runs done", "--partial"):
            assert words in refused.stderr, (words, refused.stderr)
        assert refused.stderr.count("\n") == 1
        for path in (study, study / "raw", results):
            no = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "tidy")])
            assert no.exit_code == 1 and f"pid {sweep.pid}" in no.stderr and "still being measured" in no.stderr, \
                no.output
            assert not (tmp_path / "tidy" / "runs.parquet").exists()

        part = runner.invoke(app, ["report", str(study), "--partial", "--out", str(tmp_path / "partial.html")])
        assert part.exit_code == 0, part.output
        html = (tmp_path / "partial.html").read_text()
        assert 'class="sb-partial"' in html and f"{done} of 12 planned runs done" in html
        assert "Partial results" in html
        captions, provenance = _counts(html)
        assert captions == {str(done)} and provenance == {str(done)}, (captions, provenance)  # one set of runs
        sidecar = orjson.loads((tmp_path / "partial.json").read_bytes())
        assert sidecar["provenance"]["runs"] == done and f"{done} of 12" in sidecar["partial"]
        assert not (study / "tidy").exists()  # tidy tables are not written from a partial study
        # the site index lists the partial write-up as partial, with the banner's numbers
        site = runner.invoke(app, ["site", str(tmp_path), "--out", str(tmp_path / "index.html")])
        assert site.exit_code == 0, site.output
        index = (tmp_path / "index.html").read_text()
        entry = index[index.index('href="partial.html"'):]
        entry = entry[:entry.index("</article>")]
        assert 'class="sb-partial"' in entry and f"{done} of 12 planned runs done" in entry, entry

        ing = runner.invoke(app, ["ingest", str(study), "--partial", "--out", str(tmp_path / "tidy")])
        assert ing.exit_code == 0 and f"{done} of 12 planned runs done" in ing.stderr, ing.output
        assert pd.read_parquet(tmp_path / "tidy" / "runs.parquet")["run_id"].nunique() == done

        os.kill(sweep.pid, signal.SIGCONT)
        stopped = False
        assert sweep.wait(timeout=180) == 0, (tmp_path / "sweep.log").read_text()
        assert store.sweep_holder() is None and len(store.completed_run_ids()) == 12
        assert set(dropped) <= store.completed_run_ids()

        final = runner.invoke(app, ["report", str(study), "--out", str(tmp_path / "final.html")])
        assert final.exit_code == 0, final.output
        html = (tmp_path / "final.html").read_text()
        assert 'class="sb-partial"' not in html and "Partial results" not in html
        assert _counts(html) == ({"12"}, {"12"})
        assert "partial" not in orjson.loads((tmp_path / "final.json").read_bytes())
    finally:
        if stopped:
            os.kill(sweep.pid, signal.SIGCONT)
        if sweep.poll() is None:
            sweep.terminate()
            sweep.wait(timeout=60)
        log.close()
        target.unlink(missing_ok=True)

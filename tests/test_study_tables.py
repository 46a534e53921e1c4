"""A study's tidy/ tables: written once by ``storagebench report`` (``ingest.write_study_tables``), read by the
notebooks (``ingest.read_study_tables``), and never trusted once ``raw/`` holds other runs than those read.

Real inputs: the committed demo study (12 fio json+ runs), copied per test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import storagebench.ingest as ingest_mod
from storagebench import ingest, runlevel
from storagebench.ingest import INGEST_RECORD, read_study_tables, write_study_tables

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = ("runs", "histograms", "all_clients", "timeseries", "run_totals")


@pytest.fixture
def study(tmp_path):
    dst = tmp_path / "demo"
    shutil.copytree(FIXTURES / "study_demo", dst, ignore=shutil.ignore_patterns("tidy", "notebooks", "report.*"))
    return dst


def _same(a, b):
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    assert (a.files, [str(e) for e in a.errors], a.spec_hashes) == (b.files, [str(e) for e in b.errors], b.spec_hashes)


def test_written_tables_read_back_equal_without_ingesting_or_recomputing(study, monkeypatch):
    written = write_study_tables(study)
    record = json.loads((study / "tidy" / INGEST_RECORD).read_text())
    assert record["files"] == written.files == 12 and record["errors"] == []
    assert record["runs"] == sorted(p.name for p in (study / "raw").iterdir())
    calls = []
    monkeypatch.setattr(ingest_mod, "ingest_study", lambda *a, **k: calls.append("ingest"))
    monkeypatch.setattr(ingest_mod, "run_totals", lambda *a, **k: calls.append("run_totals"))
    read = read_study_tables(study)
    assert calls == []  # read from tidy/: neither ingested nor the run-level table recomputed
    _same(written, read)
    pd.testing.assert_frame_equal(read.run_totals, runlevel.read_run_totals(study / "tidy"))


def test_files_not_ingested_are_kept_in_the_record(study, monkeypatch):
    bad = study / "raw" / sorted(p.name for p in (study / "raw").iterdir())[0] / "output.json"
    bad.write_text('{"fio version": "fio-3.33", "jobs": [')  # truncated
    written = write_study_tables(study)
    assert written.files == 11 and len(written.errors) == 1 and written.errors[0].path == str(bad)
    monkeypatch.setattr(ingest_mod, "ingest_study", lambda *a, **k: pytest.fail("raw/ ingested"))
    read = read_study_tables(study)
    _same(written, read)  # the same files count, and each error with its path and reason
    assert read.errors[0].reason == written.errors[0].reason


def test_a_run_added_or_set_aside_makes_the_tables_stale(study):
    write_study_tables(study)
    runs = sorted(p.name for p in (study / "raw").iterdir())
    aside = study / "aside"
    aside.mkdir()
    shutil.move(study / "raw" / runs[0], aside / runs[0])
    assert read_study_tables(study).run_totals["run_id"].nunique() == 11  # raw/ ingested again
    shutil.move(aside / runs[0], study / "raw" / runs[0])
    assert read_study_tables(study).run_totals["run_id"].nunique() == 12


@pytest.mark.parametrize("record", [
    "{not json", "[]", '{"format_version": 1}', json.dumps({"format_version": 2, "files": 12, "errors": [], "runs": [],
                                                             "spec_hashes": []}),
    json.dumps({"format_version": 1, "files": "12", "errors": [], "runs": [], "spec_hashes": []}),
    json.dumps({"format_version": 1, "files": -1, "errors": [], "runs": [], "spec_hashes": []}),
    json.dumps({"format_version": 1, "files": 12, "errors": [{"path": 1, "reason": "x"}], "runs": [],
                "spec_hashes": [], "extra": "<script>"}),
])
def test_a_record_that_does_not_vouch_for_the_tables_makes_them_read_from_raw(study, record):
    write_study_tables(study)
    truth = ingest.ingest_study(study)
    runs = sorted(p.name for p in (study / "raw").iterdir())
    try:  # keep the runs list right where the record parses, so that only the bad field is tested
        obj = json.loads(record)
        if isinstance(obj, dict) and "runs" in obj:
            obj["runs"] = runs
            record = json.dumps(obj)
    except json.JSONDecodeError:
        pass
    (study / "tidy" / INGEST_RECORD).write_text(record)
    (study / "tidy" / "runs.parquet").unlink()  # tables that would fail if they were trusted
    _same(truth, read_study_tables(study))


def test_a_record_that_is_a_fifo_or_a_symlink_out_is_not_read(study, tmp_path):
    import os

    write_study_tables(study)
    rec = study / "tidy" / INGEST_RECORD
    good = rec.read_text()
    rec.unlink()
    os.mkfifo(rec)  # never opened for reading (it would block)
    assert read_study_tables(study).files == 12
    rec.unlink()
    (tmp_path / "elsewhere.json").write_text(good)
    rec.symlink_to(tmp_path / "elsewhere.json")
    (study / "tidy" / "runs.parquet").unlink()
    assert read_study_tables(study).runs["run_id"].nunique() == 12  # ingested, not read through the link


def test_other_writers_of_tidy_drop_the_record(study):
    write_study_tables(study)
    ingest.ingest_study(study).write_parquet(study / "tidy")
    assert not (study / "tidy" / INGEST_RECORD).exists()
    write_study_tables(study)
    ingest.ingest_to_parquet(study / "raw" / sorted(p.name for p in (study / "raw").iterdir())[0], study / "tidy")
    assert not (study / "tidy" / INGEST_RECORD).exists()  # one run's tables: not the study's any more
    assert read_study_tables(study).runs["run_id"].nunique() == 12


def test_a_current_record_beside_a_missing_or_broken_table_reads_raw(study):
    write_study_tables(study)
    (study / "tidy" / "histograms.parquet").unlink()
    (study / "tidy" / "runs.parquet").write_bytes(b"PAR1 not parquet")
    read = read_study_tables(study)
    assert read.runs["run_id"].nunique() == 12 and len(read.histograms) > 0

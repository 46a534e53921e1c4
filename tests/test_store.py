"""Study store: atomic run directories, resume bookkeeping, failures, spec guard."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from storagebench._store import StudyStore
from storagebench._study import load_study
from storagebench.errors import FioError, StudyError

SPEC = {"name": "st", "factors": {"iodepth": [1, 2]}, "fixed": {"rw": "randread"}, "runtime": 1, "size": "16m"}


def test_write_run_is_complete_or_absent(tmp_path):
    store = StudyStore(tmp_path / "st")
    out = store.write_run("aaaaaaaaaaaa", {"job.fio": "[a]\nrw=read\n", "output.json": b"{}"})
    assert out == store.raw_dir / "aaaaaaaaaaaa"
    assert (out / "job.fio").read_text() == "[a]\nrw=read\n" and (out / "output.json").read_bytes() == b"{}"
    assert store.completed_run_ids() == {"aaaaaaaaaaaa"}
    assert [p.name for p in store.raw_dir.iterdir()] == ["aaaaaaaaaaaa"]  # no staging left

    # a write that fails half way leaves nothing: no run, no staging dir
    with pytest.raises(FileNotFoundError):
        store.write_run("bbbbbbbbbbbb", {"job.fio": "x", "output.json": tmp_path / "does-not-exist"})
    assert store.completed_run_ids() == {"aaaaaaaaaaaa"}
    assert sorted(p.name for p in store.raw_dir.iterdir()) == ["aaaaaaaaaaaa"]


def test_a_complete_run_is_never_overwritten(tmp_path):
    store = StudyStore(tmp_path / "st")
    store.write_run("aaaaaaaaaaaa", {"output.json": "first"})
    with pytest.raises(StudyError, match="already complete"):
        store.write_run("aaaaaaaaaaaa", {"output.json": "second"})
    assert (store.run_dir("aaaaaaaaaaaa") / "output.json").read_text() == "first"
    assert not [p for p in store.raw_dir.iterdir() if p.name.startswith(".tmp-")]


def test_cleanup_removes_only_dead_sweeps_staging(tmp_path):
    store = StudyStore(tmp_path / "st")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        store.raw_dir.mkdir(parents=True)
        stale = store.raw_dir / f".tmp-cccccccccccc-{dead_pid}"
        busy = store.raw_dir / f".tmp-dddddddddddd-{live.pid}"
        for d in (stale, busy):
            d.mkdir()
            (d / "output.json").write_text("partial")
        removed = store.cleanup_stale()
        assert removed == [stale]
        assert not stale.exists() and busy.exists()
        assert store.completed_run_ids() == set()  # staging dirs never count as complete
    finally:
        live.kill()
        live.wait()


def test_record_failure_keeps_every_attempt(tmp_path):
    store = StudyStore(tmp_path / "st")
    staging = store.staging_dir("eeeeeeeeeeee")
    (staging / "stderr.txt").write_text("fio: pid=0, err=20/file:filesetup.c:455, func=fstat, error=Not a directory")
    err = FioError("fio exited with status 1: Not a directory", returncode=1)
    first = store.record_failure("eeeeeeeeeeee", error=err, staging=staging)
    second = store.record_failure("eeeeeeeeeeee", {"stderr.txt": "again"}, error="timeout")
    assert not staging.exists()
    assert first.parent == second.parent == store.failed_dir / "eeeeeeeeeeee" and first != second
    info = json.loads((first / "error.json").read_text())
    assert info["type"] == "FioError" and info["returncode"] == 1 and "Not a directory" in info["message"]
    assert "err=20" in (first / "stderr.txt").read_text()
    assert store.failed_attempts() == {"eeeeeeeeeeee": [first, second]}
    assert store.completed_run_ids() == set()  # a failed run is tried again by a rerun


def test_spec_guard(tmp_path):
    study = load_study(SPEC)
    store = StudyStore.for_study(tmp_path, study)
    assert store.root == tmp_path / "st"
    store.ensure_spec(study)
    assert load_study(store.spec_path).spec_hash == study.spec_hash
    store.ensure_spec(load_study(dict(SPEC, description="same runs, new words")))  # same spec: fine
    store.write_run("aaaaaaaaaaaa", {"output.json": "{}"})

    other = load_study(dict(SPEC, runtime=2))
    with pytest.raises(StudyError, match=r"different spec of study 'st'.*--out.*--overwrite"):
        store.ensure_spec(other)
    assert store.completed_run_ids() == {"aaaaaaaaaaaa"}

    store.ensure_spec(other, overwrite=True)  # old results moved aside, never deleted
    assert load_study(store.spec_path).spec_hash == other.spec_hash
    assert store.completed_run_ids() == set()
    aside = [p for p in Path(tmp_path).iterdir() if p.name.startswith("st.superseded-")]
    assert len(aside) == 1 and (aside[0] / "raw" / "aaaaaaaaaaaa" / "output.json").exists()

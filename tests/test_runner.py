"""The runner with real fio: resume after Ctrl-C and SIGKILL, failures, timeouts, provenance."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from storagebench._runner import run_study
from storagebench._store import StudyStore
from storagebench._study import load_study
from storagebench.errors import FioError, FioNotFoundError, StudyError, UnsafeTargetError

ROOT = Path(__file__).resolve().parents[1]


def _spec(name: str, **extra) -> dict:
    spec = {
        "name": name,
        "factors": {"iodepth": [1, 4], "numjobs": [1, 2]},
        "fixed": {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": 1},
        "runtime": 1,
        "size": "16m",
        "seed": 3,
    }
    spec.update(extra)
    return spec


def _fio_pids(marker: str) -> list[int]:
    """Running fio processes whose command line mentions ``marker`` (our tmp dir)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            status = (d / "status").read_text()
        except OSError:
            continue
        if "State:\tZ" in status:
            continue
        if cmd and os.path.basename(cmd[0].decode(errors="replace")) == "fio" and marker.encode() in b" ".join(cmd):
            pids.append(int(d.name))
    return pids


def _wait_gone(marker: str, timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = _fio_pids(marker)
        if not left:
            return []
        time.sleep(0.05)
    return _fio_pids(marker)


def _snapshot(raw: Path) -> dict[str, tuple[int, str]]:
    """run id -> (inode of the run dir, sha256 of output.json) for every complete run."""
    out = {}
    for d in raw.iterdir():
        if d.name.startswith("."):
            continue
        out[d.name] = (d.stat().st_ino, hashlib.sha256((d / "output.json").read_bytes()).hexdigest())
    return out


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "storagebench.cli", "run", *args, "--no-progress"]


def test_sweep_stores_every_run_and_resumes(tmp_path, fio_bin, capsys):
    study = load_study(_spec("basic", factors={"numjobs": [1, 2]}))
    target = tmp_path / "data"
    res = run_study(study, target=target, out_dir=tmp_path / "results", fio_bin=fio_bin, progress=True)
    err = capsys.readouterr().err
    assert "2/2 runs" in err and "ETA 00:02" in err  # 2 runs x (1 s runtime + 0 s ramp) before the first ends
    plan = study.expand()
    assert res.ok and set(res.completed) == set(plan.run_ids) and res.skipped == ()
    assert res.root == tmp_path / "results" / "basic"
    assert sorted(p.name for p in res.raw_dir.iterdir()) == sorted(plan.run_ids)
    assert (res.root / "study.yaml").exists()
    for point in plan:
        d = res.raw_dir / point.run_id
        assert sorted(p.name for p in d.iterdir()) == ["job.fio", "output.json", "point.json", "provenance.json",
                                                         "stderr.txt"]
        pj = json.loads((d / "point.json").read_text())
        assert pj == {"study": "basic", "run_id": point.run_id, "repetition": 1, "run_order": point.run_order,
                      "factors": point.factors, "options": json.loads(json.dumps(point.options))}
        out = json.loads((d / "output.json").read_text())
        assert len(out["jobs"]) == 1  # group_reporting merges the numjobs clones
        assert out["jobs"][0]["error"] == 0 and out["jobs"][0]["read"]["io_bytes"] > 0
        assert out["global options"]["filename"] == str(target)
        prov = json.loads((d / "provenance.json").read_text())
        for key in ("fio_version", "kernel", "hostname", "cpu_model", "target", "device", "filesystem",
                    "spec_hash", "git_rev", "started_at", "finished_at", "duration_s"):
            assert key in prov, key
        assert prov["fio_version"] == out["fio version"]
        assert prov["spec_hash"] == study.spec_hash and prov["target"] == str(target)
        assert prov["filesystem"]["fstype"] and (prov["device"] is not None or prov["device_note"])
        assert prov["duration_s"] >= 1.0
    again = run_study(study, target=target, out_dir=tmp_path / "results", fio_bin=fio_bin, progress=False)
    assert again.completed == () and set(again.skipped) == set(plan.run_ids)
    assert [p.name for p in again.run_dirs()] == list(plan.run_ids)


def _start_sweep(tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path, Path, Path]:
    spec_path = tmp_path / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(_spec(name, factors={"iodepth": [1, 2, 4], "numjobs": [1, 2]})))
    out = tmp_path / "results"
    raw = out / name / "raw"
    proc = subprocess.Popen(_cli(str(spec_path), "--target", str(tmp_path / "data"), "--out", str(out)),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, spec_path, out, raw


def _wait_for(cond, proc: subprocess.Popen, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            pytest.fail(f"sweep ended early: {proc.returncode} {proc.stderr.read()}")
        time.sleep(0.02)
    proc.kill()
    pytest.fail("sweep made no progress")


def _complete(raw: Path) -> list[str]:
    return [p.name for p in raw.iterdir() if not p.name.startswith(".")] if raw.is_dir() else []


def _staging(raw: Path) -> list[Path]:
    return [p for p in raw.iterdir() if p.name.startswith(".tmp-")] if raw.is_dir() else []


def test_ctrl_c_keeps_completed_runs_and_rerun_finishes(tmp_path, fio_bin):
    proc, spec_path, out, raw = _start_sweep(tmp_path, "sigint")
    _wait_for(lambda: len(_complete(raw)) >= 2 and _staging(raw), proc)  # a third run is being measured
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "resume" in err
    assert _wait_gone(str(tmp_path)) == []  # fio was ended with the sweep
    assert _staging(raw) == []  # the interrupted run left nothing behind
    before = _snapshot(raw)
    assert 2 <= len(before) < 6

    study = load_study(spec_path)
    res = run_study(study, target=tmp_path / "data", out_dir=out, fio_bin=fio_bin, progress=False)
    plan = set(study.expand().run_ids)
    assert set(res.skipped) == set(before)
    assert set(res.completed) == plan - set(before)
    assert sorted(_complete(raw)) == sorted(plan)  # exactly the plan's runs, each once
    after = _snapshot(raw)
    assert {k: after[k] for k in before} == before  # completed runs untouched


def test_sigkill_mid_run_then_rerun_finishes(tmp_path, fio_bin):
    proc, spec_path, out, raw = _start_sweep(tmp_path, "sigkill")
    _wait_for(lambda: len(_complete(raw)) >= 2 and _staging(raw), proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert _wait_gone(str(tmp_path)) == []  # PR_SET_PDEATHSIG: fio dies with the sweep
    left = _staging(raw)
    assert left  # a SIGKILL cannot clean up: the staging dir of the run in progress stays ...
    before = _snapshot(raw)

    rerun = subprocess.run(_cli(str(spec_path), "--target", str(tmp_path / "data"), "--out", str(out)),
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    plan = set(load_study(spec_path).expand().run_ids)
    assert f"{6 - len(before)} run(s) measured, {len(before)} already complete, 0 failed" in rerun.stdout
    assert _staging(raw) == []  # ... and the next sweep removes it
    assert sorted(_complete(raw)) == sorted(plan)
    after = _snapshot(raw)
    assert {k: after[k] for k in before} == before


def test_failing_run_is_recorded_with_fios_message(tmp_path, fio_bin):
    (tmp_path / "afile").write_text("a regular file, not a directory")
    targets = {"good": tmp_path / "data", "bad": tmp_path / "afile" / "data"}
    study = load_study(_spec("failing", factors={"target": ["good", "bad"]}))
    plan = {p.factors["target"]: p.run_id for p in study.expand()}
    out = tmp_path / "results"
    # create_dirs: the missing-directory refusal (issue 20) is not what this test is about; fio's own failure is
    res = run_study(study, targets=targets, out_dir=out, fio_bin=fio_bin, progress=False, create_dirs=True)
    assert res.completed == (plan["good"],) and res.failed == (plan["bad"],) and not res.ok
    msg = res.errors[plan["bad"]]
    assert "Not a directory" in msg and "err=20" in msg
    store = StudyStore(out / "failing")
    assert store.completed_run_ids() == {plan["good"]}
    (attempt,) = store.failed_attempts()[plan["bad"]]
    assert sorted(p.name for p in attempt.iterdir()) == ["error.json", "job.fio", "output.json", "point.json",
                                                         "provenance.json", "stderr.txt"]
    info = json.loads((attempt / "error.json").read_text())
    assert info["type"] == "FioError" and info["returncode"] == 1 and "Not a directory" in info["message"]
    assert f"filename={targets['bad']}" in (attempt / "job.fio").read_text()

    # a rerun keeps the good run and tries the failed one again
    again = run_study(study, targets=targets, out_dir=out, fio_bin=fio_bin, progress=False, create_dirs=True)
    assert again.skipped == (plan["good"],) and again.failed == (plan["bad"],)
    assert len(store.failed_attempts()[plan["bad"]]) == 2

    # stop_on_error raises fio's error, after recording it; measured runs stay
    with pytest.raises(FioError, match="Not a directory"):
        run_study(study, targets=targets, out_dir=tmp_path / "stop", fio_bin=fio_bin, progress=False,
                  stop_on_error=True, create_dirs=True)
    stop = StudyStore(tmp_path / "stop" / "failing")
    assert stop.completed_run_ids() <= {plan["good"]} and plan["bad"] in stop.failed_attempts()


def test_unknown_target_name_and_no_target(tmp_path, fio_bin):
    study = load_study(_spec("names", factors={"target": ["a"]}))
    with pytest.raises(StudyError, match=r"must be one of \['b'\], got 'a'"):
        run_study(study, targets={"b": tmp_path / "b"}, out_dir=tmp_path, fio_bin=fio_bin, progress=False)
    with pytest.raises(StudyError, match="no target"):
        run_study(load_study(_spec("none")), out_dir=tmp_path, fio_bin=fio_bin, progress=False)


def test_timeout_kills_fio_and_records_it(tmp_path, fio_bin):
    study = load_study(_spec("slow", factors={"iodepth": [1]}, runtime=30))
    res = run_study(study, target=tmp_path / "data", out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False,
                    timeout_s=1.5)
    (run_id,) = res.failed
    assert "did not finish within 1.5 s" in res.errors[run_id]
    assert _wait_gone(str(tmp_path)) == []
    (attempt,) = StudyStore(tmp_path / "r" / "slow").failed_attempts()[run_id]
    assert json.loads((attempt / "error.json").read_text())["returncode"] is None


def test_missing_fio(tmp_path):
    with pytest.raises(FioNotFoundError, match="apt-get install fio"):
        run_study(load_study(_spec("nofio")), target=tmp_path / "data", out_dir=tmp_path / "r",
                  fio_bin="/nonexistent/fio", progress=False)
    assert not (tmp_path / "r").exists()  # nothing written before fio is found


def test_unsafe_device_is_refused_before_anything_runs(tmp_path, fio_bin, loop_dev):
    spec = _spec("unsafe", factors={"iodepth": [1]}, fixed={"rw": "randwrite", "bs": "4k"})
    spec.pop("size")  # a write with no size would cover the whole device
    with pytest.raises(UnsafeTargetError, match="size"):
        run_study(load_study(spec), target=loop_dev.path, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
    store = StudyStore(tmp_path / "r" / "unsafe")
    assert store.completed_run_ids() == set() and _staging(store.raw_dir) == []


def test_fio_dies_with_a_killed_sweep(tmp_path, fio_bin):
    job = tmp_path / "long.fio"
    job.write_text(f"[global]\nfilename={tmp_path / 'data'}\nsize=16m\ntime_based\nruntime=60\n[j]\nrw=randread\n")
    code = ("import sys; from storagebench._runner import run_fio; "
            "run_fio(sys.argv[1], sys.argv[2], sys.argv[3], fio_bin=sys.argv[4], timeout_s=120)")
    child = subprocess.Popen([sys.executable, "-c", code, str(job), str(tmp_path / "out.json"),
                              str(tmp_path / "err.txt"), fio_bin], cwd=ROOT)
    try:
        _wait_for(lambda: _fio_pids(str(tmp_path)), child, timeout_s=30)
    finally:
        child.kill()
        child.wait()
    # fio runs for 60 s in its own session; only PR_SET_PDEATHSIG ends it with its parent
    assert _wait_gone(str(tmp_path), timeout_s=20) == []


def test_cli_run_reports_bad_spec_and_failed_runs(tmp_path, fio_bin):
    from typer.testing import CliRunner

    from storagebench.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_spec("bad", factors={"rw": ["randwite"]})))
    res = CliRunner().invoke(app, ["run", str(bad), "--target", str(tmp_path / "data"), "--out", str(tmp_path)])
    assert res.exit_code == 1
    assert "factors.rw: must be one of" in res.output and "'randwite'" in res.output
    assert not (tmp_path / "bad").exists()

    (tmp_path / "afile").write_text("x")
    failing = tmp_path / "failing.yaml"
    failing.write_text(yaml.safe_dump(_spec("clifail", factors={"iodepth": [1]})))
    res = CliRunner().invoke(app, ["run", str(failing), "--target", str(tmp_path / "afile" / "data"),
                                   "--out", str(tmp_path), "--no-progress"])
    assert res.exit_code == 1 and "its directory" in res.output and "--create-dirs" in res.output
    res = CliRunner().invoke(app, ["run", str(failing), "--target", str(tmp_path / "afile" / "data"),
                                   "--out", str(tmp_path), "--no-progress", "--create-dirs"])
    assert res.exit_code == 1
    assert "0 run(s) measured, 0 already complete, 1 failed" in res.output and "Not a directory" in res.output


def test_run_point_concurrently_for_concurrent_workloads(tmp_path, fio_bin):
    from concurrent.futures import ThreadPoolExecutor

    from storagebench._runner import run_point

    study = load_study(_spec("together", factors={"target": ["a", "b"]}))
    store = StudyStore.for_study(tmp_path / "r", study)
    store.ensure_spec(study)
    targets = {"a": tmp_path / "a", "b": tmp_path / "b"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run_point, p, study, store, target=None, targets=targets, fio_exe=fio_bin,
                               allow_devices=(), timeout_s=60) for p in study.expand()]
        durations = [f.result() for f in futures]
    assert all(d >= 1.0 for d in durations)
    assert store.completed_run_ids() == set(study.expand().run_ids)
    for p in study.expand():
        job = (store.run_dir(p.run_id) / "job.fio").read_text()
        assert f"filename={targets[p.factors['target']]}" in job
    assert not _staging(store.raw_dir)


def test_relative_out_dir_works(fio_bin, tmp_path, monkeypatch):
    """Regression: a relative --out (the CLI default 'results') must not break fio's --output path,
    because fio runs with the run's staging directory as its working directory."""
    from storagebench._runner import run_study
    from storagebench._study import load_study

    monkeypatch.chdir(tmp_path)
    study = load_study({
        "name": "relout", "factors": {"iodepth": [1]},
        "fixed": {"rw": "randread", "bs": "4k", "ioengine": "psync"},
        "runtime": 1, "ramp_time": 0, "size": "4m", "repetitions": 1,
    })
    result = run_study(study, target=str(tmp_path / "t.dat"), out_dir="results", progress=False)
    assert not result.failed and len(result.completed) == 1
    (run_dir,) = (tmp_path / "results" / "relout" / "raw").iterdir()
    assert (run_dir / "output.json").stat().st_size > 0

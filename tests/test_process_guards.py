"""Runs nothing contaminates (issue 8 item 6), with real fio and real processes.

fio's workers, the lock of a study's results directory, the quiet-host check, full and
read-only filesystems, runs that measured nothing. Every "no fio left" check is scoped to the
processes whose command line names this test's tmp directory: other sessions run fio on this
machine at the same time.
"""

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

from storagebench._runner import quiet_window_for, run_study
from storagebench._store import StudyStore
from storagebench._study import load_study
from storagebench.errors import FioError, FioNotFoundError
from storagebench.fio import process

ROOT = Path(__file__).resolve().parents[1]


def _spec(name: str, **extra) -> dict:
    spec = {
        "name": name,
        "factors": {"iodepth": [1, 2, 4]},
        "fixed": {"rw": "randread", "bs": "4k", "ioengine": "psync", "numjobs": 4},
        "runtime": 2,
        "size": "16m",
        "seed": 5,
    }
    spec.update(extra)
    return spec


def _procs_of(marker: Path) -> list[dict]:
    """Live fio processes whose command line mentions ``marker`` (read from /proc here, not
    through the code under test): pid, ppid, pgid, sid."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if not argv or os.path.basename(argv[0].decode(errors="replace")) != "fio" or fields[0] == "Z":
            continue
        if str(marker).encode() in b" ".join(argv):
            out.append({"pid": int(d.name), "ppid": int(fields[1]), "pgid": int(fields[2]), "sid": int(fields[3])})
    return out


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "storagebench.cli", "run", *args, "--no-progress"]


def _wait_for(cond, proc: subprocess.Popen | None = None, timeout_s: float = 90.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"process ended early: {proc.returncode} {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.02)
    if proc is not None:
        proc.kill()
    pytest.fail("condition not reached")


def _complete(raw: Path) -> list[str]:
    return sorted(p.name for p in raw.iterdir() if not p.name.startswith(".")) if raw.is_dir() else []


def _staging(raw: Path) -> list[Path]:
    return [p for p in raw.iterdir() if p.name.startswith(".tmp-")] if raw.is_dir() else []


def _snapshot(raw: Path) -> dict[str, tuple[int, str]]:
    return {d: ((raw / d).stat().st_ino, hashlib.sha256((raw / d / "output.json").read_bytes()).hexdigest())
            for d in _complete(raw)}


def _start(tmp_path: Path, name: str, **extra) -> tuple[subprocess.Popen, list[str], Path]:
    spec_path = tmp_path / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(_spec(name, **extra)))
    cmd = _cli(str(spec_path), "--target", str(tmp_path / "data"), "--out", str(tmp_path / "results"))
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, cmd, tmp_path / "results" / name / "raw"


# ---- fio's workers die with storagebench ---------------------------------------------------


def test_sigkill_during_a_numjobs_4_run_leaves_no_fio_and_resume_runs_the_plan(tmp_path, fio_bin):
    proc, cmd, raw = _start(tmp_path, "kill4")
    running = _wait_for(lambda: len(_procs_of(tmp_path)) >= 5 and _staging(raw) and _procs_of(tmp_path), proc)
    main = [p for p in running if p["ppid"] != 1 and p["pid"] == p["pgid"] and p["ppid"] not in
            {q["pid"] for q in running}]
    workers = [p for p in running if p not in main]
    assert len(workers) >= 4
    # why a group kill never sufficed: every worker is the leader of a session of its own
    assert all(w["sid"] == w["pid"] != main[0]["pgid"] for w in workers)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 2.0
    while _procs_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _procs_of(tmp_path) == []  # within 2 s of the SIGKILL
    before = _snapshot(raw)
    assert _staging(raw)  # the run in progress: its staging dir stays until the next sweep

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "stopped" not in again.stderr  # nothing stale: the watchdog had killed it all
    plan = load_study(tmp_path / "kill4.yaml").expand().run_ids
    assert f"{len(plan) - len(before)} run(s) measured, {len(before)} already complete, 0 failed" in again.stdout
    assert _complete(raw) == sorted(plan) and _staging(raw) == []
    after = _snapshot(raw)
    assert {k: after[k] for k in before} == before


def test_resume_stops_workers_a_killed_sweep_left_when_its_watchdog_died_too(tmp_path, fio_bin):
    proc, cmd, raw = _start(tmp_path, "orphans", runtime=8, factors={"iodepth": [1]})
    _wait_for(lambda: len(_procs_of(tmp_path)) >= 5, proc)
    watchdogs = []
    for d in Path("/proc").iterdir():  # the sweep's own watchdog: its child running _watchdog.py
        try:
            if (d.name.isdigit() and f"PPid:\t{proc.pid}\n" in (d / "status").read_text()
                    and b"_watchdog.py" in (d / "cmdline").read_bytes()):
                watchdogs.append(int(d.name))
        except OSError:
            continue
    assert len(watchdogs) == 1
    os.kill(watchdogs[0], signal.SIGKILL)
    time.sleep(0.2)
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    left = _procs_of(tmp_path)
    # the parent-death signal ended fio's main process only: its 4 workers go on doing I/O
    assert len(left) == 4 and all(p["ppid"] != proc.pid for p in left)
    record = json.loads(next(iter(_staging(raw))).joinpath(process.RECORD_NAME).read_text())
    assert record["parent_pid"] == proc.pid and record["marker"].endswith("/job.fio")

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"stopped 4 fio process(es) (pid {', '.join(str(p['pid']) for p in sorted(left, key=lambda p: p['pid']))})" \
        in again.stderr or "stopped 4 fio process(es)" in again.stderr
    assert f"(pid {proc.pid})" in again.stderr and record["marker"] in again.stderr
    assert all(p["pid"] not in {q["pid"] for q in _procs_of(tmp_path)} for p in left)
    assert _complete(raw) == sorted(load_study(tmp_path / "orphans.yaml").expand().run_ids)


def test_stop_ends_every_process_of_a_run_and_waits_for_them(tmp_path, fio_bin):
    job = tmp_path / "long.fio"
    job.write_text(f"[global]\nfilename={tmp_path / 'data'}\nsize=16m\ntime_based\nruntime=60\nnumjobs=4\n"
                   "[j]\nrw=randread\n")
    with open(tmp_path / "err.txt", "wb") as err:
        fp = process.spawn([process.find_fio(fio_bin), f"--output={tmp_path / 'out.json'}", str(job)],
                           stdout=err, stderr=err, record_path=tmp_path / process.RECORD_NAME)
    try:
        _wait_for(lambda: len(fp.processes()) >= 5)
        assert json.loads((tmp_path / process.RECORD_NAME).read_text())["pid"] == fp.pid
        assert {p.pid for p in fp.processes()} == {p["pid"] for p in _procs_of(tmp_path)}
    finally:
        fp.stop(grace_s=5.0)
    assert _procs_of(tmp_path) == [] and fp.popen.returncode is not None
    assert not (tmp_path / process.RECORD_NAME).exists()  # the record lives as long as the run


def test_a_killed_watchdog_is_replaced(tmp_path, fio_bin):
    first = process.run([process.find_fio(fio_bin), "--version"], timeout_s=30)
    assert first.returncode == 0 and first.stdout.startswith("fio-")
    pid = process.watchdog_pid()
    assert pid is not None and b"_watchdog.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    again = process.run([process.find_fio(fio_bin), "--version"], timeout_s=30)
    assert again.stdout == first.stdout
    assert process.watchdog_pid() not in (None, pid)


def test_find_fio_and_fio_version_have_one_contract(fio_bin, tmp_path):
    assert process.find_fio("fio") == fio_bin
    want = subprocess.run([fio_bin, "--version"], capture_output=True, text=True).stdout.strip()
    assert process.fio_version(fio_bin) == want and want.startswith("fio-")
    with pytest.raises(FioNotFoundError, match="apt-get install fio"):
        process.fio_version(str(tmp_path / "nofio"))
    with pytest.raises(FioError, match="gave no fio version"):
        process.fio_version("/bin/true")  # runs, prints nothing


# ---- one sweep per results directory --------------------------------------------------------


def test_a_second_run_on_the_same_out_is_refused_naming_the_first(tmp_path, fio_bin):
    from storagebench.ingest import ingest_study

    # runs of 3 s: once the first is complete the sweep has ~6 s of fio left, more than a second CLI takes to
    # start on a loaded 2-core host (at 2 s it sometimes finished first, and the second just resumed: exit 0)
    first, cmd, raw = _start(tmp_path, "locked", runtime=3)
    _wait_for(lambda: _complete(raw) and _staging(raw), first)
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert second.returncode == 1
    assert f"is being measured by another storagebench run (pid {first.pid}" in second.stderr
    assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
    lock = json.loads((raw.parent / ".sweep.lock").read_text())
    assert lock["pid"] == first.pid
    # reading a study being measured is allowed: complete runs only
    tables = ingest_study(raw.parent)
    assert 1 <= len(tables.runs) <= 3 and set(tables.runs["run_id"]) <= set(_complete(raw))
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    plan = load_study(tmp_path / "locked.yaml").expand().run_ids
    assert "3 run(s) measured, 0 already complete, 0 failed" in out and _complete(raw) == sorted(plan)
    # the kernel released the lock with the process: the same command now just resumes
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "0 run(s) measured, 3 already complete" in again.stdout


def test_overwrite_moves_the_study_aside_and_locks_the_new_directory(tmp_path, fio_bin):
    spec = {"name": "over", "factors": {"iodepth": [1]}, "runtime": 1, "size": "4m",
            "fixed": {"rw": "randread", "bs": "4k", "ioengine": "psync"}}
    out = tmp_path / "r"
    first = run_study(load_study(spec), target=tmp_path / "t.dat", out_dir=out, progress=False)
    changed = load_study({**spec, "runtime": 2})
    second = run_study(changed, target=tmp_path / "t.dat", out_dir=out, progress=False, overwrite=True)
    (aside,) = [p for p in out.iterdir() if p.name.startswith("over.superseded-")]
    assert _complete(aside / "raw") == list(first.planned) and len(second.completed) == 1
    store = StudyStore(out / "over")
    with store.lock():  # released by the sweep that moved the old directory aside and locked the new one
        assert json.loads((out / "over" / ".sweep.lock").read_text())["pid"] == os.getpid()
        from storagebench.errors import ResultsBusyError

        with pytest.raises(ResultsBusyError, match=f"pid {os.getpid()}"):
            StudyStore(out / "over").lock()


# ---- quiet host -----------------------------------------------------------------------------


def test_quiet_host_check_flags_a_concurrent_fio_and_can_wait_it_out(tmp_path, fio_bin):
    busy_file = tmp_path / "busy.dat"
    busy_file.write_bytes(os.urandom(1 << 20) * 16)
    busy = subprocess.Popen([fio_bin, "--name=busy", f"--filename={busy_file}", "--rw=randread", "--bs=4k",
                             "--direct=1", "--ioengine=psync", "--size=16m", "--time_based", "--runtime=4",
                             "--output=/dev/null"], start_new_session=True)
    try:
        _wait_for(lambda: any(p["pid"] == busy.pid for p in _procs_of(busy_file)))
        time.sleep(0.3)  # its I/O has started
        spec = {"name": "quiet", "factors": {"iodepth": [1]}, "runtime": 1, "size": "4m",
                "fixed": {"rw": "randread", "bs": "4k", "ioengine": "psync"}}
        res = run_study(load_study(spec), target=tmp_path / "t.dat", out_dir=tmp_path / "r", progress=False)
        (run_dir,) = res.run_dirs()
        q = json.loads((run_dir / "provenance.json").read_text())["quiet_host"]
        assert q["quiet"] is False and res.not_quiet == {run_dir.name: q["reasons"]}
        assert busy.pid in [p["pid"] for p in q["other_fio"]]
        assert any(r.startswith("1 other fio") or "other fio process(es) running" in r for r in q["reasons"])
        dev = q["device"]
        assert dev["name"] and dev["ios"] > 0 and dev["bytes"] > 0 and dev["iops"] > 0  # its direct reads
        assert q["window_s"] >= quiet_window_for(load_study(spec)) == 0.02  # 1 % of 1 s, at least 0.02 s
        assert q["thresholds"]["max_in_flight"] == 0 and q["waited_s"] == 0.0
        assert 0 < q["check_cost_s"] < q["window_s"]

        spec["name"] = "waits"
        res = run_study(load_study(spec), target=tmp_path / "t.dat", out_dir=tmp_path / "r", progress=False,
                        wait_quiet_s=15)
        (run_dir,) = res.run_dirs()
        q = json.loads((run_dir / "provenance.json").read_text())["quiet_host"]
        # waited until our busy fio ended (others' fio on this shared host may still be there)
        assert q["waited_s"] > 0 and busy.pid not in [p["pid"] for p in q["other_fio"]]
        assert busy.poll() is not None
    finally:
        if busy.poll() is None:
            busy.kill()
        busy.wait()


# ---- full and read-only filesystems ---------------------------------------------------------


def _mount_tmpfs(path: Path, size: str, *opts: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *opts]), "tmpfs", str(path)],
                   check=True)


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=True)


def _pages(d: Path) -> int:
    return sum((f.stat().st_size + 4095) // 4096 for f in d.iterdir())


def test_full_results_directory_gives_a_message_and_keeps_completed_runs(tmp_path, fio_bin, require_root):
    spec = _spec("full", factors={"iodepth": [1, 2, 4, 8]}, runtime=1)
    spec["fixed"]["numjobs"] = 1
    spec_path = tmp_path / "full.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    probe = run_study(load_study(spec_path), target=tmp_path / "probe.dat", out_dir=tmp_path / "probe",
                      progress=False)
    run_pages = max(_pages(d) for d in probe.run_dirs())  # one run's files, in tmpfs pages
    small = tmp_path / "small"
    _mount_tmpfs(small, "4m")
    try:
        free = os.statvfs(small).f_bavail
        room = 3 + run_pages + run_pages // 2  # study.yaml, .sweep.lock, created_targets.json + 1.5 runs
        (small / "filler").write_bytes(b"\0" * ((free - room) * 4096))
        cmd = _cli(str(spec_path), "--target", str(tmp_path / "data"), "--out", str(small))
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 1, out.stdout + out.stderr
        err = out.stderr.strip()
        assert "Traceback" not in err and len(err.splitlines()) == 1, err
        assert err.startswith("storagebench: error: cannot write the results: ") and str(small) in err
        assert "ENOSPC" in err and "free space on the filesystem holding" in err and "are kept" in err, err
        raw = small / "full" / "raw"
        done = _complete(raw)
        assert 1 <= len(done) < 4 and _staging(raw) == []  # the run in progress left nothing
        for run_id in done:
            d = raw / run_id
            assert sorted(p.name for p in d.iterdir()) == ["job.fio", "output.json", "point.json",
                                                             "provenance.json", "stderr.txt"]
            assert json.loads((d / "output.json").read_text())["jobs"][0]["read"]["total_ios"] > 0
        assert f"the {len(done)} complete run(s)" in err
        before = _snapshot(raw)

        (small / "filler").unlink()  # space again: the same command resumes
        again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert f"{4 - len(done)} run(s) measured, {len(done)} already complete, 0 failed" in again.stdout
        assert _complete(raw) == sorted(load_study(spec_path).expand().run_ids)
        after = _snapshot(raw)
        assert {k: after[k] for k in before} == before
    finally:
        _umount(small)


def test_read_only_results_directory_and_target_give_messages(tmp_path, fio_bin, require_root):
    ro = tmp_path / "ro"
    _mount_tmpfs(ro, "1m", "ro")
    try:
        spec_path = tmp_path / "ro.yaml"
        spec = _spec("ro", factors={"iodepth": [1, 2]}, runtime=1)
        spec_path.write_text(yaml.safe_dump(spec))
        out = subprocess.run(_cli(str(spec_path), "--target", str(tmp_path / "data"), "--out", str(ro / "res")),
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        err = out.stderr.strip()
        assert out.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert f"cannot write the results: {ro / 'res'}" in err and "(EROFS)" in err and "read-only" in err

        spec = _spec("rotarget", factors={"iodepth": [1, 2]}, runtime=1,
                     fixed={"rw": "randwrite", "bs": "4k", "ioengine": "psync"})
        spec_path.write_text(yaml.safe_dump(spec))
        out = subprocess.run(_cli(str(spec_path), "--target", str(ro / "t.dat"), "--out", str(tmp_path / "res")),
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        err = out.stderr.strip()
        # the target is on tmpfs: one error line, and the warning that a run there would measure memory
        memory = [x for x in err.splitlines() if x.startswith("storagebench: warning: this measured memory")]
        assert len(memory) == 1 and "is a file on tmpfs" in memory[0], err
        assert out.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 2, err
        assert f"fio cannot write the target {ro / 't.dat'}: Read-only file system (EROFS)" in err
        assert "--target" in err
        store = StudyStore(tmp_path / "res" / "rotarget")
        assert store.completed_run_ids() == set() and len(store.failed_attempts()) == 1  # kept, then stopped
    finally:
        _umount(ro)


def test_results_directory_not_writable_for_the_user_gives_a_message(fio_bin, require_root):
    import pwd
    import shutil
    import tempfile

    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    pw = pwd.getpwnam("nobody")
    pub = Path(tempfile.mkdtemp(prefix="sb-acc-"))  # tmp_path's parents are 0700: nobody could not read the spec
    try:
        pub.chmod(0o755)
        spec_path = pub / "acc.yaml"
        spec_path.write_text(yaml.safe_dump(_spec("acc", factors={"iodepth": [1]}, runtime=1)))
        spec_path.chmod(0o644)
        out = subprocess.run(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
                              *_cli(str(spec_path), "--target", str(pub / "t.dat"), "--out", str(pub / "res"))],
                             cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "HOME": str(pub)})
        err = out.stderr.strip()
        assert out.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert f"cannot write the results: {pub / 'res'}" in err and "(EACCES)" in err
        assert f"writable for uid {pw.pw_uid}" in err and not (pub / "res").exists()
    finally:
        shutil.rmtree(pub)


# ---- runs that measured nothing -------------------------------------------------------------


def test_a_run_with_0_ios_and_failed_allocating_is_a_failed_run(tmp_path, fio_bin):
    # fio 3.33 cannot allocate the random map of 1 PiB of 4 KiB blocks: it says so, completes
    # no I/O, and exits 0 with error 0 in its JSON (the null engine touches no file)
    spec = {"name": "nothing", "factors": {"iodepth": [1]}, "runtime": 1, "size": "1p",
            "fixed": {"rw": "randread", "bs": "4k", "ioengine": "null"}}
    out = tmp_path / "r"
    res = run_study(load_study(spec), target=tmp_path / "t.dat", out_dir=out, progress=False)
    (run_id,) = res.failed
    msg = res.errors[run_id]
    assert msg.startswith("run measured nothing: fio completed 0 I/Os in every job")
    assert "fio: failed allocating random map" in msg
    store = StudyStore(out / "nothing")
    assert store.completed_run_ids() == set()
    (attempt,) = store.failed_attempts()[run_id]
    info = json.loads((attempt / "error.json").read_text())
    assert info["returncode"] == 0 and info["message"] == msg
    doc_text = (attempt / "output.json").read_text()
    doc = json.loads(doc_text[doc_text.index("{"):])
    assert doc["jobs"][0]["error"] == 0 and process.zero_io_jobs(doc) == [run_id]
    assert process.fatal_lines((attempt / "stderr.txt").read_text(), doc_text[:doc_text.index("{")])
    # retried on the next sweep, as every failed run
    again = run_study(load_study(spec), target=tmp_path / "t.dat", out_dir=out, progress=False)
    assert again.failed == (run_id,) and len(store.failed_attempts()[run_id]) == 2

    ok = run_study(load_study({**spec, "name": "something", "size": "4m"}), target=tmp_path / "t.dat",
                   out_dir=out, progress=False)
    (good,) = ok.run_dirs()
    doc = json.loads((good / "output.json").read_text())
    assert process.zero_io_jobs(doc) is None and process.fatal_lines((good / "stderr.txt").read_text()) == []

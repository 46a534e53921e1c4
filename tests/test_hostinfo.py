"""Provenance: device and filesystem behind a target, checked against util-linux and git."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from storagebench._hostinfo import block_device_info, collect_provenance, filesystem_of, git_revision

ROOT = Path(__file__).resolve().parents[1]


def _findmnt(path: Path, col: str) -> str:
    if shutil.which("findmnt") is None:
        pytest.skip("findmnt (util-linux) not installed")
    return subprocess.run(["findmnt", "-n", "-o", col, "--target", str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_provenance_of_a_file(tmp_path, fio_bin):
    target = tmp_path / "data"
    target.write_bytes(b"\0" * 4096)
    prov = collect_provenance(target, spec_hash="abc", fio_bin=fio_bin)
    version = subprocess.run([fio_bin, "--version"], capture_output=True, text=True).stdout.strip()
    assert prov.fio_version == version and version.startswith("fio-")
    assert prov.kernel == os.uname().release and prov.hostname == os.uname().nodename
    assert prov.cpu_model and prov.cpu_count == os.cpu_count()
    assert prov.target == str(target) and prov.target_kind == "file"
    assert prov.spec_hash == "abc"
    assert prov.started_at.endswith("Z")
    assert prov.filesystem.fstype == _findmnt(target, "FSTYPE")
    assert prov.filesystem.mountpoint == _findmnt(target, "TARGET")
    st = os.stat(target)
    dev = prov.device
    if dev is None:  # tmpfs/overlay: no block device, and it says so
        assert "no block device" in prov.device_note
    else:
        if os.major(st.st_dev) != 0:
            assert dev.devno == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        assert Path(dev.path).exists()
        assert isinstance(dev.rotational, bool) and dev.size_bytes > 0
        sysfs = Path(os.path.realpath(f"/sys/dev/block/{dev.devno}"))
        disk = sysfs.parent if (sysfs / "partition").exists() else sysfs
        assert dev.scheduler in (disk / "queue" / "scheduler").read_text()
        assert (dev.model is not None) != (dev.model_note is not None)


def test_git_revision_of_checkout_and_of_a_plain_dir(tmp_path):
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    def head():
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()

    git_revision.cache_clear()  # cached per process: a sweep records the code it started with
    before = head()
    rev = git_revision()
    after = head()  # others may commit meanwhile
    assert rev["rev"] in (before, after) and isinstance(rev["dirty"], bool)
    assert git_revision(str(tmp_path)) is None
    assert collect_provenance(tmp_path).git_rev == rev["rev"]


def test_missing_target_is_described_by_its_parent(tmp_path):
    prov = collect_provenance(tmp_path / "not" / "yet")
    assert prov.target_kind == "missing"
    assert prov.filesystem.fstype == _findmnt(tmp_path, "FSTYPE")


def test_tmpfs_has_no_block_device():
    shm = Path("/dev/shm")
    if not shm.is_dir() or (filesystem_of(shm) or {}).get("fstype") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    prov = collect_provenance(shm / "storagebench-provenance-probe")
    assert prov.device is None and "no block device" in prov.device_note and "tmpfs" in prov.device_note


def test_loop_device_has_no_model(loop_dev):
    loop = loop_dev.path
    prov = collect_provenance(loop)
    info = prov.device
    assert prov.target_kind == "block" and prov.filesystem is None
    assert info.path == loop and info.model is None and "loop device" in info.model_note
    assert info.backing_file == loop_dev.backing_file
    assert info.size_bytes == 8 << 20
    st = os.stat(loop)
    assert block_device_info(os.major(st.st_rdev), os.minor(st.st_rdev)).name == Path(loop).name


# ---- the quiet-host probe's window (issue 21 item 4) -----------------------------------------------------


def _write_direct(dev: str, n_blocks: int = 16) -> None:
    """``n_blocks`` 4 KiB O_DIRECT writes to the test's own loop device, then fsync: I/O it must count."""
    import mmap

    fd = os.open(dev, os.O_WRONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, 4096)
        for i in range(n_blocks):
            os.pwrite(fd, buf, i * 4096)
        os.fsync(fd)
    finally:
        os.close(fd)


def _device_reasons(rec: dict) -> list[str]:
    return [r for r in rec["reasons"] if r.startswith("device ")]


def test_quiet_probe_counts_io_inside_its_window(loop_dev):
    """I/O on the sampled device inside the window makes the host busy (the check's meaning)."""
    from storagebench._hostinfo import QuietProbe

    probe = QuietProbe(loop_dev.path)
    _write_direct(loop_dev.path)
    rec = probe.finish(0.02)
    assert rec["quiet"] is False and rec["device"]["ios"] >= 16 and rec["paused_s"] == 0.0
    assert _device_reasons(rec) and " I/Os and " in _device_reasons(rec)[0]
    assert rec["window_s"] >= 0.02


def test_quiet_probe_leaves_a_pause_out_and_still_sees_io_after_it(loop_dev):
    """What happens while the probe is paused (storagebench's own fsyncs) counts neither as I/O nor as window
    time; I/O after :meth:`resume` counts again; the window is still at least ``window_s`` of observed time."""
    import time

    from storagebench._hostinfo import QuietProbe

    probe = QuietProbe(loop_dev.path)
    probe.pause()
    _write_direct(loop_dev.path)
    time.sleep(0.3)
    probe.resume()
    rec = probe.finish(0.02)
    # (other fio processes of a shared test machine may make the host busy; the device reason is ours to check)
    assert rec["device"]["ios"] == 0 and _device_reasons(rec) == []
    assert rec["paused_s"] >= 0.3 and 0.02 <= rec["window_s"] < 0.25  # the pause is not window time

    probe = QuietProbe(loop_dev.path)
    probe.pause()
    _write_direct(loop_dev.path)
    probe.resume()
    _write_direct(loop_dev.path, 4)
    rec = probe.finish(0.02)
    assert rec["quiet"] is False and 4 <= rec["device"]["ios"] < 16 and _device_reasons(rec)


def test_consecutive_runs_hand_the_window_on(tmp_path, fio_bin):
    """In a sweep, a run's window opens when the previous run's fio exits and leaves out that run's commit
    fsyncs (``paused_s`` > 0 from the second run on); the first run's window starts with its own preparation."""
    import json

    from storagebench._runner import run_study
    from storagebench._study import load_study

    study = load_study({"name": "hand", "factors": {"iodepth": [1, 2]}, "runtime": 1, "size": "4m",
                        "fixed": {"rw": "randread", "bs": "4k"}})
    res = run_study(study, target=tmp_path / "data", out_dir=tmp_path / "out", fio_bin=fio_bin, progress=False)
    assert res.ok, res.errors
    recs = sorted((json.loads(p.read_text()) for p in (tmp_path / "out" / "hand" / "raw").glob("*/provenance.json")),
                  key=lambda d: d["started_at"])
    first, second = (r["quiet_host"] for r in recs)
    assert first["paused_s"] == 0.0 and second["paused_s"] > 0.0
    for q in (first, second):
        assert q["window_s"] is None or q["window_s"] >= 0.02
        # buffered I/O: the page cache stands between fio's I/O and the device's, so the run's own time is not
        # told apart from others' and not carried to the next window (which waits as before)
        assert q["during_run"]["attributed"] is False and "buffered" in q["during_run"]["note"]
        assert q["carried_s"] == 0.0


def test_a_pause_in_which_the_device_did_nothing_counts_as_quiet_time(loop_dev):
    """storagebench's own writes going to another device leave the sampled device idle: that pause is an
    observation of a quiet device, so its time counts toward the window (no wait for it)."""
    import time

    from storagebench._hostinfo import QuietProbe

    probe = QuietProbe(loop_dev.path)
    probe.pause()
    time.sleep(0.3)  # nothing written to the loop device
    probe.resume()
    rec = probe.finish(0.02)
    assert rec["paused_s"] == 0.0 and rec["window_s"] >= 0.3 and rec["device"]["ios"] == 0


# ---- the run's own watch: its device's I/O beyond fio's own (issue 21 item 4) --------------------------------
#: Direct 4 KiB random reads of the first 4 MiB of the test's loop device, two 1-s runs.
_DIRECT_READS = {"factors": {"iodepth": [1, 2]}, "runtime": 1, "size": "4m",
                 "fixed": {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": 1}}
#: Another process's I/O: a 4 KiB O_DIRECT write every 2 ms (about 400 IOPS, eight times the threshold; or every
#: ``argv[2]`` s) to the last 4 MiB of the device (fio reads the first 4), for at most 20 s; prints "go" after its
#: first write.
_WRITER = """
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
buf, end, i = mmap.mmap(-1, 4096), time.monotonic() + 20, 0
while time.monotonic() < end:
    os.pwrite(fd, buf, (4 << 20) + (i % 1024) * 4096)
    if i == 0:
        print("go", flush=True)
    i += 1
    time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.002)
"""


def _sweep_records(tmp_path: Path, fio_bin: str, target: str, name: str,
                   spec: dict | None = None) -> tuple[object, list[dict]]:
    import json

    from storagebench._runner import run_study
    from storagebench._study import load_study

    res = run_study(load_study({"name": name, **(spec or _DIRECT_READS)}), target=target, out_dir=tmp_path / "out",
                    fio_bin=fio_bin, progress=False)
    assert res.ok, res.errors
    recs = sorted((json.loads(p.read_text()) for p in (tmp_path / "out" / name / "raw").glob("*/provenance.json")),
                  key=lambda d: d["started_at"])
    return res, [r["quiet_host"] for r in recs]


def test_a_run_s_own_io_is_told_apart_and_its_time_carried_to_the_next_window(loop_dev, fio_bin, tmp_path):
    """Direct I/O on a device only the test uses: the device did exactly fio's I/O (``excess`` 0 of
    thousands), and the first run's fio life counts as window time of the second run, which then waits for
    nothing (its window is longer than the run's default 0.02 s without a sleep)."""
    _res, (first, second) = _sweep_records(tmp_path, fio_bin, loop_dev.path, "own")
    name = Path(loop_dev.path).name
    for q in (first, second):
        run = q["during_run"]
        assert run["attributed"] is True and run["quiet"] is True, run
        assert run["fio_ios"] > 500 and run["device_ios"] == run["fio_ios"] and run["excess_ios"] == 0
        assert run["device_bytes"] == run["fio_bytes"] == 4096 * run["fio_ios"] and run["excess_bytes"] == 0
        assert not [r for r in q["reasons"] if name in r]  # (other helpers' fio may run on a shared host)
    assert first["carried_s"] == 0.0 and second["carried_s"] == first["during_run"]["window_s"] > 0.9
    assert second["window_s"] >= second["carried_s"] and second["device"]["ios"] == 0
    assert second["check_cost_s"] < 0.02  # no sleep: the window was full before the run


def test_fio_s_measured_window_is_its_report_time_and_its_longest_runtime():
    """fio's captured output (tests/fixtures/fio): the window ends at ``timestamp_ms`` and lasts the longest
    per-direction ``runtime`` -- with ``group_reporting`` the longest member's (153 ms), not ``job_runtime``, which
    sums the members (602 ms); none without a ``timestamp_ms`` (client/server output, fio 2.1)."""
    import json

    from storagebench.fio.process import measured_window

    def doc(name: str) -> dict:
        text = (ROOT / "tests" / "fixtures" / "fio" / f"{name}.json").read_text()
        return json.loads(text[text.index("{"):])

    group = doc("numjobs4_group")
    assert group["jobs"][0]["job_runtime"] == 602
    assert measured_window(group) == (group["timestamp_ms"] / 1000, 0.153)
    nogroup = doc("numjobs4_nogroup")
    assert measured_window(nogroup) == (nogroup["timestamp_ms"] / 1000, 0.175)
    both = doc("randrw_both")
    assert measured_window(both) == (both["timestamp_ms"] / 1000, 1.0)
    assert measured_window(doc("clientserver")) is None and measured_window(doc("fio2_perfkitbenchmarker")) is None
    assert measured_window({**both, "timestamp_ms": "1"}) is None and measured_window({"timestamp_ms": 5}) is None


#: A ramped sweep: 1 s of ramp before each 1 s window, one job and two (group_reporting merges them).
_RAMPED = {**_DIRECT_READS, "factors": {"numjobs": [1, 2]}, "fixed": {**_DIRECT_READS["fixed"], "iodepth": 2},
           "ramp_time": 1}


def test_a_ramped_run_s_own_io_is_told_apart_from_its_ramp_s_end(loop_dev, fio_bin, tmp_path):
    """fio resets its counts when ramp_time ends, so the device also did the ramp's I/O that fio's total_ios
    leaves out (a direct randread of 1 s + 2 s counted 140,705 I/Os where the device did 210,485): the watch
    places the ramp's end on its samples of the device, and on a device only the test uses the device's I/O
    from there is fio's, to within the recorded tolerance; only that measured part is credited to the next window
    (less than the fio life: the ramp is no quiet observation)."""
    _res, recs = _sweep_records(tmp_path, fio_bin, loop_dev.path, "ramped", _RAMPED)
    name = Path(loop_dev.path).name
    for q in recs:
        run = q["during_run"]
        assert run["attributed"] is True and run["quiet"] is True, run
        assert run["fio_ios"] > 500 and 0 <= run["tolerance_ios"] < 0.05 * run["fio_ios"], run
        # fio's own I/O to within the samples around the ramp's end: a few tens of 10,000s (the ramp's I/O, which fio
        # leaves out, is as many as a second of the window's)
        assert abs(run["excess_ios"]) <= max(run["tolerance_ios"], 0.01 * run["fio_ios"]), run
        assert abs(run["excess_bytes"]) <= max(run["tolerance_bytes"], 0.01 * run["fio_bytes"]), run
        assert 0.95 < run["window_s"] < 1.5 and 1.0 < run["ramp_end_s"] < 2.5  # 1 s window; fio starts, ramps 1 s
        assert not [r for r in q["reasons"] if name in r]  # (other helpers' fio may run on a shared host)
    first, second = recs
    assert first["carried_s"] == 0.0 and second["carried_s"] == first["during_run"]["window_s"]
    assert second["check_cost_s"] < 0.02  # no sleep: the window was full before the run


def test_a_ramp_s_end_that_cannot_be_placed_is_said_and_not_called_quiet(loop_dev):
    """Where the samples cannot place the ramp's end -- fio's output without ``timestamp_ms``, or no I/O of fio's
    on the device before its report (here: real samples of an idle loop device) -- the record is not made and the
    reason is given, so the run stays unattributed rather than quiet."""
    import time

    from storagebench._hostinfo import device_stat_path
    from storagebench._runwatch import IoSampler, ramp_io_record

    device = device_stat_path(loop_dev.path)
    sampler = IoSampler(device[1], ramp_s=0.05, runtime_s=0.1).start()
    time.sleep(0.2)
    sampler.stop()
    assert len(sampler.t_s) > 10 and sampler.ios[-1] == sampler.ios[0]  # 1 ms samples where the ends are expected
    fio_io = ((2000, 2000 * 4096), (0, 0), (0, 0))
    assert ramp_io_record(sampler, None, fio_io, device) == (
        None, "fio's output gives no timestamp_ms or runtime: the ramp's end cannot be placed")
    reported = sampler.t_s[-1] + sampler.wall_offset - 0.01
    rec, note = ramp_io_record(sampler, (reported, 0.1), fio_io, device)
    assert rec is None and note == "fio's I/O is not seen on the device's samples: the ramp's end cannot be placed"


@pytest.mark.parametrize("ramped", [False, True], ids=["no-ramp", "ramp"])
def test_a_foreign_writer_on_the_device_is_found_during_the_runs(loop_dev, fio_bin, tmp_path, ramped):
    """Another process writing to the run's device while fio runs is found by the run's own watch (its I/O
    beyond fio's own: ``during_run``, beyond the tolerance of a ramped run's window), flags the run as not quiet
    (``SweepResult.not_quiet``, the record's ``reasons``), and makes the next run's window, which is credited with
    that time, busy as well -- with a ramp too, where the device's I/O is counted from the ramp's end."""
    import subprocess
    import sys

    from storagebench._hostinfo import QUIET_MAX_IOPS

    # a ramped run's window is known to the samples around the ramp's end (its tolerance: 50 to 350 I/Os at 15,000
    # IOPS on a loaded 2-core VM): beyond that, over a 1 s window, a writer of about 1,500 IOPS
    pace = ["0.0005"] if ramped else []
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, loop_dev.path, *pace], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "go"
        res, recs = _sweep_records(tmp_path, fio_bin, loop_dev.path, "foreign", _RAMPED if ramped else None)
    finally:
        writer.kill()
        writer.wait()
    name = Path(loop_dev.path).name
    assert len(res.not_quiet) == 2
    for q in recs:
        run = q["during_run"]
        assert run["attributed"] is True and run["quiet"] is False, run
        assert run["excess_ios"] - run["tolerance_ios"] > QUIET_MAX_IOPS * run["window_s"], run
        # (a ramped run's I/Os and bytes are each read on the line between the samples around the ramp's end)
        assert run["excess_bytes"] >= 4096 * (run["excess_ios"] - run["tolerance_ios"])
        assert run["ramp_end_s" if ramped else "window_s"] > 0.9
        assert (run["tolerance_ios"] > 0) == ramped
        found = [r for r in q["reasons"] if r.startswith(f"during the run, device {name}: ")]
        assert len(found) == 1 and "beyond fio's own" in found[0] and q["quiet"] is False
        assert found[0] in next(v for v in res.not_quiet.values() if v == q["reasons"])
    second = recs[1]
    assert second["carried_s"] > 0.9 and [r for r in second["reasons"] if r.startswith(f"device {name}: ")]


def test_runs_of_ours_at_the_same_time_are_not_told_apart(loop_dev, fio_bin, tmp_path):
    """Two runs of this process on one device at once (a concurrency group): each one's device I/O holds the
    other's, so neither is judged by it nor carried to a next window (``attributed`` false, with the reason)."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from storagebench._runner import run_point
    from storagebench._store import StudyStore
    from storagebench._study import load_study

    study = load_study({"name": "both", **_DIRECT_READS})
    store = StudyStore.for_study(tmp_path / "r", study)
    store.ensure_spec(study)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run_point, p, study, store, target=loop_dev.path, targets=None, fio_exe=fio_bin,
                               allow_devices=(), timeout_s=60) for p in study.expand()]
        assert all(f.result() >= 1.0 for f in futures)
    for p in study.expand():
        q = json.loads((store.run_dir(p.run_id) / "provenance.json").read_text())["quiet_host"]
        assert q["during_run"] == {"attributed": False, "quiet": None,
                                   "note": "another run of this sweep ran at the same time"}
        assert not [r for r in q["reasons"] if r.startswith("during the run")]

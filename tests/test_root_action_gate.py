"""The root-action gate (issue 18 item 4): a file in a results directory is data, never an instruction.

Planted host-steps journals, fio process records and created-target lists name other devices, other
processes and other paths, with bad owners, bad modes and symlinks. 0 actions on anything this user's
runs did not create: the planted-on processes are still alive, the files still exist unchanged, the
schedulers unchanged. And what a real run did is still undone: a real killed run's fio workers are
stopped, a real scheduler change is put back.

Every check reads /proc and sysfs here, not through the code under test. /dev/vda's scheduler file is
only read, never written.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from storagebench import _recorded
from storagebench._recorded import RecordRefusedError, read_recorded
from storagebench._store import StudyStore
from storagebench.errors import StorageBenchWarning
from storagebench.fio import process
from storagebench.hoststeps import HostSteps, restore_journal

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534
JOB = "[global]\nfilename={data}\nsize=1m\ntime_based\nruntime={runtime}\nioengine=psync\nrw=read\n" \
      "numjobs={numjobs}\n[j]\n"


# ---- helpers that read /proc and sysfs themselves --------------------------------------------


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2] not in "ZX"


def _ticks(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[19])


def _argv(pid: int) -> list[str]:
    return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]


def _children_named(pid: int, name: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if f"PPid:\t{pid}\n" in (d / "status").read_text() and (d / "comm").read_text().strip() == name:
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _wait(cond, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    pytest.fail("condition not reached in time")


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _refusals(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, StorageBenchWarning)]


# ---- the gate itself -------------------------------------------------------------------------


def _good(tmp_path: Path) -> Path:
    d = tmp_path / "tree" / "sub"
    d.mkdir(parents=True)
    (tmp_path / "tree").chmod(0o755)
    d.chmod(0o755)
    f = d / "rec.json"
    f.write_bytes(b'{"ok": 1}')
    f.chmod(0o600)
    return f


def test_the_gate_reads_a_private_regular_file_of_yours(tmp_path):
    f = _good(tmp_path)
    assert read_recorded(f, tree=tmp_path / "tree") == b'{"ok": 1}'
    f.chmod(0o644)
    assert read_recorded(f, tree=tmp_path / "tree") == b'{"ok": 1}'
    assert read_recorded(f.with_name("absent.json"), tree=tmp_path / "tree") is None
    assert read_recorded(tmp_path / "tree" / "nodir" / "x.json", tree=tmp_path / "tree") is None


def _plant_symlink(f: Path) -> str:
    real = f.with_name("real.json")
    os.replace(f, real)
    f.symlink_to(real)
    return "is a symlink"


def _plant_fifo(f: Path) -> str:
    f.unlink()
    os.mkfifo(f, 0o600)
    return "not a regular file"


def _plant_mode(mode: int, words: str):
    def plant(f: Path) -> str:
        f.chmod(mode)
        return words
    return plant


def _plant_hardlink(f: Path) -> str:
    os.link(f, f.with_name("other-name"))
    return "2 hard links"


def _plant_big(f: Path) -> str:
    f.write_bytes(b" " * (_recorded.MAX_RECORD_BYTES + 1))
    return "bytes"


def _plant_dir_mode(f: Path) -> str:
    f.parent.chmod(0o777)
    return "writable by group and others (mode 0777)"


def _plant_dir_sticky(f: Path) -> str:
    f.parent.chmod(0o1777)
    return "writable by group and others"


def _plant_dir_symlink(f: Path) -> str:
    sub = f.parent
    real = sub.with_name("real-sub")
    os.rename(sub, real)
    sub.symlink_to(real)
    return "symlink or not a directory"


def _plant_outside(f: Path) -> str:
    return "not inside"


PLANTS = {
    "symlink": _plant_symlink, "fifo": _plant_fifo, "mode 0666": _plant_mode(0o666, "writable by group and others"),
    "mode 0620": _plant_mode(0o620, "writable by group"), "mode 0602": _plant_mode(0o602, "writable by others"),
    "hard link": _plant_hardlink, "too big": _plant_big, "dir 0777": _plant_dir_mode,
    "dir 1777": _plant_dir_sticky, "dir symlink": _plant_dir_symlink,
}


@pytest.mark.parametrize("plant", list(PLANTS))
def test_the_gate_refuses_what_others_could_have_written(tmp_path, plant):
    f = _good(tmp_path)
    words = PLANTS[plant](f)
    t0 = time.monotonic()
    with pytest.raises(RecordRefusedError) as err:
        read_recorded(f, tree=tmp_path / "tree", what="test record")
    assert time.monotonic() - t0 < 2  # a FIFO does not block the gate
    assert words in str(err.value) and str(f) in str(err.value) and "was not acted on" in str(err.value)


def test_the_gate_refuses_a_path_outside_the_tree(tmp_path):
    f = _good(tmp_path)
    with pytest.raises(RecordRefusedError, match="not inside"):
        read_recorded(f, tree=tmp_path / "elsewhere")
    with pytest.raises(RecordRefusedError, match="not inside"):
        read_recorded(tmp_path / "tree" / ".." / "x", tree=tmp_path / "tree")


@pytest.mark.root
@pytest.mark.parametrize("what", ["file", "directory"])
def test_the_gate_refuses_another_users_file_or_directory(require_root, tmp_path, what):
    f = _good(tmp_path)
    os.chown(f if what == "file" else f.parent, NOBODY, NOBODY)
    with pytest.raises(RecordRefusedError, match=r"owned by uid 65534.*not by root or by you"):
        read_recorded(f, tree=tmp_path / "tree")


def test_records_and_results_directories_ignore_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        _recorded.write_recorded(tmp_path / "r.json", b"{}")
        store = StudyStore(tmp_path / "out" / "study")
        with store.lock():
            staging = store.staging_dir("abc")
            (staging / "job.fio").write_text("[j]\n")  # as the runner writes it: 0666 under umask 0
            assert stat.S_IMODE(staging.stat().st_mode) == 0o700  # nobody else reaches a job file fio will read
            run = store.commit_run("abc", staging)
            store.record_failure("def", error="x")
            store.note_created([str(tmp_path / "r.json")])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(store.created_path.stat().st_mode) == 0o600
    assert stat.S_IMODE((store.root / ".sweep.lock").stat().st_mode) == 0o600
    assert stat.S_IMODE((run / "job.fio").stat().st_mode) == 0o644
    for d, dirs, files in os.walk(tmp_path / "out"):
        for name in [d, *(os.path.join(d, x) for x in dirs + files)]:
            assert not os.lstat(name).st_mode & 0o022, f"{name} is group- or world-writable"


def test_a_sweep_refuses_a_study_directory_others_can_write(tmp_path):
    root = tmp_path / "study"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(RecordRefusedError, match=r"study directory .*writable by group and others.*chmod go-w"):
        StudyStore(root).lock()
    assert not (root / ".sweep.lock").exists()


def test_a_symlinked_raw_directory_makes_root_remove_and_write_nothing_outside_the_tree(tmp_path):
    # a copied tree holds raw -> a directory elsewhere with a ".tmp-*" directory in it: cleanup_stale would have
    # removed it (rmtree) and staging_dir would have written the run's job file there
    outside = tmp_path / "elsewhere"
    (outside / ".tmp-keep-notapid" / "sub").mkdir(parents=True)
    (outside / ".tmp-keep-notapid" / "sub" / "data").write_text("precious\n")
    root = tmp_path / "study"
    root.mkdir()
    (root / "raw").symlink_to(outside)
    store = StudyStore(root)
    with store.lock():
        with pytest.raises(RecordRefusedError, match=r"runs directory .*raw was not acted on: it is a symlink"):
            store.cleanup_stale()
        with pytest.raises(RecordRefusedError, match=r"raw was not acted on: it is a symlink"):
            store.staging_dir("abc")
    (root / "failed").symlink_to(outside)
    (root / "aside").symlink_to(outside)
    with pytest.raises(RecordRefusedError, match=r"failed was not acted on: it is a symlink"):
        store.record_failure("def", error="x")
    assert (outside / ".tmp-keep-notapid" / "sub" / "data").read_text() == "precious\n"
    assert sorted(p.name for p in outside.iterdir()) == [".tmp-keep-notapid"]


@pytest.mark.root
@pytest.mark.parametrize("plant", ["other-users-parent", "group-writable-parent", "other-users-symlink"])
def test_a_study_directory_another_user_can_replace_is_refused(require_root, tmp_path, plant):
    # --out /tmp/shared/results where /tmp/shared is another user's (or 0777 without the sticky bit): they could
    # rename results/<study> away between the check and the sweep's writes and put their own in its place
    tmp_path.chmod(0o755)
    shared = tmp_path / "shared"
    shared.mkdir()
    out = shared / "results"
    if plant == "other-users-parent":
        os.chown(shared, NOBODY, NOBODY)
    elif plant == "group-writable-parent":
        shared.chmod(0o777)
    else:  # a symlink another user owns, in a sticky directory of root's: they can point it anywhere later
        shared.chmod(0o1777)
        real = tmp_path / "real"
        real.mkdir()
        out.symlink_to(real)
        os.lchown(out, NOBODY, NOBODY)
    with pytest.raises(RecordRefusedError, match=r"study directory .*(above it|symlink .*owned by uid 65534)"):
        StudyStore(out / "demo").lock()
    assert not list((tmp_path / "real" if plant == "other-users-symlink" else out).rglob(".sweep.lock"))
    # the same under a sticky world-writable directory with directories of one's own is fine (/tmp itself)
    shared.chmod(0o1777)
    os.chown(shared, 0, 0)
    mine = shared / "mine"
    mine.mkdir(mode=0o755)
    with StudyStore(mine / "demo").lock():
        pass


def test_a_planted_lock_symlink_is_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    root = tmp_path / "study"
    root.mkdir()
    (root / ".sweep.lock").symlink_to(victim)
    with pytest.raises(OSError):
        StudyStore(root).lock()
    assert victim.read_text() == "precious\n"


# ---- fio process records ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def victims(tmp_path_factory, fio_bin):
    """Processes no storagebench run created, each with a staging directory whose job file its argv names:
    a python process named fio (argv[0], no symlink), one run through a symlink called ``fio``, a bash named
    fio with a ``sleep`` child, and a real fio started outside storagebench."""
    fio = fio_bin
    base = tmp_path_factory.mktemp("victims")
    raw = base / "results" / "study" / "raw"
    out: dict[str, dict] = {}
    procs = []

    def staging(name: str) -> Path:
        d = raw / f".tmp-{name}-{_dead_pid()}"
        d.mkdir(parents=True)
        (d / "job.fio").write_text(JOB.format(data=base / f"{name}.dat", runtime=120, numjobs=1))
        return d

    link = base / "bin" / "fio"
    link.parent.mkdir()
    link.symlink_to(sys.executable)
    specs = {
        "python-named-fio": lambda job: subprocess.Popen(
            ["fio", "-c", "import time; time.sleep(600)", str(job)], executable=sys.executable),
        "python-via-fio-symlink": lambda job: subprocess.Popen(
            [str(link), "-c", "import time; time.sleep(600)", str(job)]),
        "bash-sleep-named-fio": lambda job: subprocess.Popen(
            ["fio", "-c", "sleep 600; :", "fio", str(job)], executable="/bin/bash"),
        "real-fio": lambda job: subprocess.Popen(
            [fio, f"--output={job.parent / 'out.json'}", str(job)], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=job.parent, start_new_session=True),
    }
    try:
        for name, start in specs.items():
            d = staging(name)
            p = start(d / "job.fio")
            procs.append(p)
            out[name] = {"proc": p, "staging": d, "job": str(d / "job.fio")}
        _wait(lambda: all(_alive(v["proc"].pid) and str(v["job"]) in _argv(v["proc"].pid) for v in out.values()))
        real = out["real-fio"]["proc"].pid
        _wait(lambda: _children_named(real, "fio"))  # its worker, forked
        out["bash-sleep-named-fio"]["sleep"] = _wait(lambda: _children_named(out["bash-sleep-named-fio"]["proc"].pid,
                                                                              "sleep"))[0]
        yield {"fio": os.path.realpath(fio), "root": base / "results" / "study", "by_name": out}
    finally:
        for p in procs:
            with_children = [p.pid, *_children_named(p.pid, "fio"), *_children_named(p.pid, "sleep")]
            for pid in with_children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(timeout=30)


def _record(v: dict, fio: str, **override) -> dict:
    """A record as spawn writes it, about the victim's process (what a planter can read from /proc)."""
    pid = v["proc"].pid
    st = os.stat(fio)
    rec = {"format": process.RECORD_FORMAT, "pid": pid, "pgid": pid, "start_ticks": _ticks(pid), "boot_id": _boot(),
           "exe": fio, "exe_id": [st.st_dev, st.st_ino], "uid": os.geteuid(), "argv": _argv(pid), "marker": v["job"],
           "exe_name": "fio", "parent_pid": _dead_pid(), "parent_start_ticks": 1, "started_at_unix_s": time.time()}
    rec.update(override)
    return {k: val for k, val in rec.items() if val is not _DROP}


_DROP = object()


def _plant_record(v: dict, rec: dict, mode: int = 0o600) -> Path:
    path = v["staging"] / process.RECORD_NAME
    path.unlink(missing_ok=True)
    path.write_text(json.dumps(rec))
    path.chmod(mode)
    return path


def _stale_stop(root: Path, fio: str):
    store = StudyStore(root)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with store.lock():
            stopped = store.stop_stale_runs(fio_bin=fio)
    return stopped, _refusals(caught)


def _all_alive(victims) -> None:
    for name, v in victims["by_name"].items():
        assert _alive(v["proc"].pid), f"{name} was killed"
    assert _alive(victims["by_name"]["bash-sleep-named-fio"]["sleep"])
    assert _children_named(victims["by_name"]["real-fio"]["proc"].pid, "fio"), "the real fio's worker was killed"


# (victim, record overrides, words of the refusal or None when the record passes the gate but no process is
# the recorded run's)
CASES = [
    ("python-named-fio", {}, None),  # every claim right but the binary: /proc/PID/exe is python
    ("python-via-fio-symlink", {}, None),
    ("bash-sleep-named-fio", {}, None),
    ("python-named-fio", {"exe": sys.executable}, "not the fio binary"),
    ("real-fio", {"start_ticks": "+1"}, None),  # a real fio, started outside storagebench: another start time
    ("real-fio", {"start_ticks": "-1"}, None),  # earlier: its worker is not the recorded run's either
    ("real-fio", {"start_ticks": "-1", "pid": 1}, None),  # the record's fio is gone; this one is another's
    ("real-fio", {"argv": "other"}, None),
    ("real-fio", {"marker": "/tmp/elsewhere/job.fio", "argv": "+marker"}, "not a file of the record's own directory"),
    ("real-fio", {"boot_id": "0" * 36}, "another boot"),
    ("real-fio", {"uid": NOBODY}, "not yours"),
    ("real-fio", {"format": _DROP, "start_ticks": _DROP, "boot_id": _DROP, "exe": _DROP, "exe_id": _DROP,
                  "uid": _DROP, "parent_start_ticks": _DROP}, "older storagebench"),  # the old format
    ("real-fio", {"format": 1}, "older storagebench"),
    ("real-fio", {"parent_pid": os.getpid(), "parent_start_ticks": "self"}, "still running"),
    ("real-fio", {"exe_id": [0, 0]}, "not the fio binary"),
    ("real-fio", {"pid": True}, "wrong type"),
    ("real-fio", {"mode": 0o666}, "writable by group and others"),
    ("real-fio", {"mode": 0o622}, "writable by group and others"),
]


@pytest.mark.parametrize("victim, override, words", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_planted_process_record_kills_nothing(victims, victim, override, words):
    v = victims["by_name"][victim]
    override = dict(override)
    mode = override.pop("mode", 0o600)
    if override.get("start_ticks") in ("+1", "-1"):
        override["start_ticks"] = _ticks(v["proc"].pid) + int(override["start_ticks"])
    if override.get("argv") == "other":
        override["argv"] = [*_argv(v["proc"].pid), "--eta=never"]
    if override.get("argv") == "+marker":
        override["argv"] = [*_argv(v["proc"].pid), override["marker"]]
    if override.get("parent_start_ticks") == "self":
        override["parent_start_ticks"] = _ticks(os.getpid())
    path = _plant_record(v, _record(v, victims["fio"], **override), mode)
    try:
        stopped, refused = _stale_stop(victims["root"], victims["fio"])
    finally:
        path.unlink(missing_ok=True)
    _all_alive(victims)
    assert stopped == []
    mine = [m for m in refused if str(path) in m]
    if words is None:
        assert mine == []
    else:
        assert len(mine) == 1 and words in mine[0] and "was not acted on" in mine[0], refused


@pytest.mark.root
@pytest.mark.parametrize("plant", ["nobody", "symlink", "staging-symlink"])
def test_a_process_record_of_another_user_or_through_a_link_kills_nothing(require_root, victims, tmp_path, plant):
    v = victims["by_name"]["real-fio"]
    rec = _record(v, victims["fio"])
    path = v["staging"] / process.RECORD_NAME
    planted = []
    if plant == "nobody":
        _plant_record(v, rec)
        os.chown(path, NOBODY, NOBODY)
        planted.append(path)
    elif plant == "symlink":
        real = tmp_path / "rec.json"
        real.write_text(json.dumps(rec))
        real.chmod(0o600)
        path.symlink_to(real)
        planted.append(path)
    else:  # a staging directory that is a symlink to a directory outside the tree: never followed
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / process.RECORD_NAME).write_text(json.dumps(rec))
        (outside / process.RECORD_NAME).chmod(0o600)
        link = victims["root"] / "raw" / f".tmp-linked-{_dead_pid()}"
        link.symlink_to(outside)
        planted.append(link)
    try:
        stopped, refused = _stale_stop(victims["root"], victims["fio"])
    finally:
        for p in planted:
            p.unlink(missing_ok=True)
    _all_alive(victims)
    assert stopped == []
    if plant != "staging-symlink":
        assert any(str(path) in m and ("owned by uid 65534" in m or "symlink" in m) for m in refused), refused


_SPAWN = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from storagebench.fio import process
    staging = Path(sys.argv[1])
    fp = process.spawn([process.find_fio(sys.argv[2]), str(staging / "job.fio")], cwd=staging,
                       stdout=open(os.devnull, "wb"), stderr=open(os.devnull, "wb"),
                       record_path=staging / process.RECORD_NAME)
    print(fp.pid, process.watchdog_pid(), flush=True)
    time.sleep(600)
""")


def test_a_real_killed_runs_workers_are_still_stopped(victims, tmp_path):
    """The positive case beside the planted ones: a fio started by storagebench's spawn, whose storagebench
    and watchdog were SIGKILLed, leaves workers doing I/O; the next sweep's stale check stops exactly them."""
    root = tmp_path / "results" / "study"
    staging = root / "raw" / f".tmp-realrun-{os.getpid() + 1000000}"  # a pid that cannot be alive
    staging.mkdir(parents=True)
    (staging / "job.fio").write_text(JOB.format(data=tmp_path / "data", runtime=60, numjobs=2))
    child = subprocess.Popen([sys.executable, "-c", _SPAWN, str(staging), victims["fio"]], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    fio_pid, watchdog = (int(x) for x in child.stdout.readline().split())
    workers = _wait(lambda: len(_children_named(fio_pid, "fio")) == 2 and _children_named(fio_pid, "fio"))
    os.kill(watchdog, signal.SIGKILL)
    time.sleep(0.2)
    child.kill()
    child.wait()
    _wait(lambda: not _alive(fio_pid))  # the parent-death signal ends fio's main process only
    assert all(_alive(w) for w in workers)
    rec = json.loads((staging / process.RECORD_NAME).read_text())
    assert rec["format"] == process.RECORD_FORMAT and rec["pid"] == fio_pid and rec["boot_id"] == _boot()
    assert stat.S_IMODE((staging / process.RECORD_NAME).stat().st_mode) == 0o600
    try:
        stopped, refused = _stale_stop(root, victims["fio"])
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    assert refused == []
    (s,) = stopped
    assert sorted(p["pid"] for p in s["processes"]) == sorted(workers)
    assert not any(_alive(w) for w in workers)
    _all_alive(victims)  # the planted-on processes, alive all along beside it


# ---- host-steps journals ---------------------------------------------------------------------


def _sched(name: str) -> str:
    return Path(f"/sys/block/{name}/queue/scheduler").read_text()


def _current(name: str) -> str:
    text = _sched(name)
    return text[text.index("[") + 1:text.index("]")] if "[" in text else text.strip()


@pytest.fixture
def loop_sched(loop_dev):
    text = _sched(loop_dev.name)
    offered = text.replace("[", " ").replace("]", " ").split()
    other = next((s for s in ("none", "mq-deadline", "kyber", "bfq") if s in offered and s != _current(loop_dev.name)),
                 None)
    if other is None:
        pytest.skip(f"{loop_dev.path} offers one scheduler only: {offered}")
    return loop_dev, _current(loop_dev.name), other


def _facts(device: str) -> dict:
    rdev = os.stat(device).st_rdev
    devno = f"{os.major(rdev)}:{os.minor(rdev)}"
    sysfs = os.path.realpath(f"/sys/dev/block/{devno}")
    kind = "loop" if os.path.isdir(os.path.join(sysfs, "loop")) else os.path.basename(sysfs).rstrip("0123456789")
    return {"devno": devno, "sysfs": sysfs, "kind": kind}


def _entry(device: str, set_: str, previous: str, journal: Path, **extra) -> dict:
    return {"format": 2, "nonce": secrets.token_hex(16), "device": device, **_facts(device), "backing": None,
            "set": set_, "previous": previous, "boot_id": _boot(), "uid": os.geteuid(), "journal": str(journal),
            **extra}


def _restore(journal: Path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = restore_journal(journal)
    return out, _refusals(caught)


@pytest.mark.root
def test_a_planted_journal_changes_no_scheduler(require_root, loop_sched, tmp_path):
    """Journals naming a loop device no run changed, and /dev/vda (read only here), in every shape a
    planter can write: well-formed (no state record of a run of ours), old format, copied from elsewhere."""
    dev, original, other = loop_sched
    disks = {dev.name: _sched(dev.name)}
    planted = [
        _entry(dev.path, original, other, tmp_path / "j.json"),
        {"device": dev.path, "devno": _facts(dev.path)["devno"], "set": original, "previous": other},  # old format
        _entry(dev.path, original, other, tmp_path / "j.json", nonce="../../etc/passwd"),
    ]
    if os.path.exists("/sys/block/vda/queue/scheduler"):
        disks["vda"] = _sched("vda")
        cur = _current("vda")
        planted += [_entry("/dev/vda", cur, "none" if cur != "none" else "mq-deadline", tmp_path / "j.json"),
                    {"device": "/dev/vda", "devno": _facts("/dev/vda")["devno"], "set": cur, "previous": "none"}]
    journal = tmp_path / "j.json"
    journal.write_text(json.dumps(planted))
    journal.chmod(0o600)
    out, refused = _restore(journal)
    assert len(out) == len(planted) and not any(r["restored"] for r in out)
    assert all("left alone" in r["note"] for r in out)
    assert sum("no sweep of yours recorded this change" in r["note"] for r in out) == len(planted) - 2 - \
        ("vda" in disks)
    assert {name: _sched(name) for name in disks} == disks  # 0 scheduler changes
    assert not journal.exists()


def _real_journal(dev, other, journal: Path) -> HostSteps:
    """A real scheduler change by the runs' HostSteps, with its journal, left as a killed sweep leaves it."""
    steps = HostSteps([{"scheduler": other}], [dev.path], allow_devices=[dev.path], journal=journal)
    steps.__enter__()
    assert _current(dev.name) == other
    return steps


JOURNAL_PLANTS = ["copied-to-another-tree", "mode-0666", "nobody", "symlink", "dir-0777", "not-json"]


@pytest.mark.root
@pytest.mark.parametrize("plant", JOURNAL_PLANTS)
def test_a_real_journal_tampered_with_or_copied_is_not_acted_on(require_root, loop_sched, tmp_path, plant):
    dev, original, other = loop_sched
    study = tmp_path / "study"
    study.mkdir()
    journal = study / "host_steps_journal.json"
    steps = _real_journal(dev, other, journal)
    try:
        target = journal
        if plant == "copied-to-another-tree":
            (tmp_path / "copy").mkdir()
            target = tmp_path / "copy" / journal.name
            shutil.copy(journal, target)
        elif plant == "mode-0666":
            journal.chmod(0o666)
        elif plant == "nobody":
            os.chown(journal, NOBODY, NOBODY)
        elif plant == "symlink":
            real = tmp_path / "elsewhere.json"
            os.replace(journal, real)
            journal.symlink_to(real)
        elif plant == "dir-0777":
            study.chmod(0o777)
        else:
            journal.write_text("[{")
            journal.chmod(0o600)
        out, refused = _restore(target)
        assert _current(dev.name) == other  # nothing put back on the word of a tampered journal
        assert not any(r["restored"] for r in out)
        if plant == "copied-to-another-tree":
            (r,) = out
            assert "recorded for another results directory" in r["note"]
        else:
            assert out == [] and any(str(journal) in m and "was not acted on" in m for m in refused), refused
            assert any("renamed to" in m for m in refused)  # kept aside, never read again
    finally:
        study.chmod(0o755)
        steps.__exit__(None, None, None)
    assert _current(dev.name) == original


@pytest.mark.root
def test_a_real_journal_is_still_restored_and_only_once(require_root, loop_sched, tmp_path):
    dev, original, other = loop_sched
    journal = tmp_path / "host_steps_journal.json"
    steps = _real_journal(dev, other, journal)
    try:
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
        (entry,) = json.loads(journal.read_text())
        state = _recorded.state_dir("schedulers") / f"{entry['nonce']}.json"
        assert state.exists() and stat.S_IMODE(state.parent.stat().st_mode) == 0o700
        saved = journal.read_bytes()
        (r,) = restore_journal(journal)
        assert r["restored"] and _current(dev.name) == original and not journal.exists() and not state.exists()
        # the same journal planted back: its state record is spent, so it changes nothing any more
        _real_journal(dev, other, tmp_path / "second.json").__exit__(None, None, None)
        os.system(f"echo {other} > /sys/block/{dev.name}/queue/scheduler")  # someone sets it by hand
        journal.write_bytes(saved)
        journal.chmod(0o600)
        (r,) = restore_journal(journal)
        assert not r["restored"] and "no sweep of yours" in r["note"] and _current(dev.name) == other
    finally:
        steps.__exit__(None, None, None)
        Path(f"/sys/block/{dev.name}/queue/scheduler").write_text(original)
    assert _current(dev.name) == original


@pytest.mark.root
def test_a_killed_sweeps_scheduler_change_is_restored_by_the_next(require_root, loop_sched, tmp_path, fio_bin):
    """The whole route: a real sweep sets the scheduler, is SIGKILLed mid-run, the next sweep puts it back."""
    from storagebench._runner import run_study
    from storagebench._study import load_study

    dev, original, other = loop_sched
    spec = {"name": "ra-kill", "factors": {"bs": ["4k"]}, "runtime": 3, "size": "4m", "seed": 1,
            "host_steps": [{"scheduler": other}], "fixed": {"rw": "randread", "ioengine": "psync", "direct": 1}}
    out = tmp_path / "results"
    script = (f"from storagebench._runner import run_study\nfrom storagebench._study import load_study\n"
              f"run_study(load_study({spec!r}), target={dev.path!r}, out_dir={str(out)!r}, fio_bin={fio_bin!r}, "
              "progress=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)})
    journal = out / "ra-kill" / "host_steps_journal.json"
    _wait(lambda: journal.exists() and _current(dev.name) == other, timeout=60)
    proc.kill()
    proc.wait()
    assert _current(dev.name) == other
    res = run_study(load_study(spec), target=dev.path, out_dir=out, fio_bin=fio_bin, progress=False)
    (r,) = res.schedulers_restored
    assert r["restored"] and r["device"] == dev.path and _current(dev.name) == original


# ---- the list of created targets -------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ident(path: Path) -> list[int]:
    st = os.stat(path)
    return [os.major(st.st_dev), os.minor(st.st_dev), st.st_ino]


def test_a_planted_created_targets_list_grants_nothing(tmp_path):
    other = tmp_path / "someone-elses.dat"
    other.write_bytes(b"x" * 4096)
    decoy = tmp_path / "decoy.dat"
    decoy.write_bytes(b"y")
    store = StudyStore(tmp_path / "results" / "study")
    store.root.mkdir(parents=True)
    lst = store.created_path

    def plant(entries, mode=0o600):
        lst.unlink(missing_ok=True)
        lst.write_text(json.dumps(entries))
        lst.chmod(mode)

    # an entry whose identity is another file's than its path's, and entries of the wrong shape
    plant([{"path": str(decoy), "identity": _ident(other)}, {"path": "relative.dat", "identity": _ident(other)},
           {"path": str(other), "identity": [*_ident(other)[:2], True]}, {"identity": _ident(other)}, "x"])
    assert store.own_files() == set()
    # a list others could write, or a link to a list: refused as a whole, with a warning
    plant([{"path": str(other), "identity": _ident(other)}], mode=0o666)
    with pytest.warns(StorageBenchWarning, match=r"list of created targets .* was not acted on: .*writable by"):
        assert store.own_files() == set()
    real = tmp_path / "list.json"
    real.write_text(json.dumps([{"path": str(other), "identity": _ident(other)}]))
    real.chmod(0o600)
    lst.unlink()
    lst.symlink_to(real)
    with pytest.warns(StorageBenchWarning, match="symlink"):
        assert store.own_files() == set()
    # what this user's runs did create is still known (written 0600 by note_created, replacing the link)
    mine = tmp_path / "mine.dat"
    mine.write_bytes(b"z")
    with pytest.warns(StorageBenchWarning):
        store.note_created([str(mine)])
    assert not lst.is_symlink() and store.own_files() == {tuple(_ident(mine))}
    assert other.exists() and decoy.exists() and real.exists()


@pytest.mark.root
def test_a_created_targets_entry_for_another_users_file_grants_nothing(require_root, tmp_path):
    other = tmp_path / "nobodys.dat"
    other.write_bytes(b"x" * 4096)
    os.chown(other, NOBODY, NOBODY)
    store = StudyStore(tmp_path / "results" / "study")
    store.root.mkdir(parents=True)
    store.created_path.write_text(json.dumps([{"path": str(other), "identity": _ident(other)}]))
    store.created_path.chmod(0o600)
    assert store.own_files() == set()


def test_a_run_does_not_lay_out_a_short_file_a_planted_list_names(tmp_path, fio_bin):
    """End to end: a short existing file outside the results tree, named in a world-writable planted list with
    its true identity. The run is refused (fio would lay the file out again); the file is unchanged."""
    from storagebench._runner import run_study
    from storagebench._study import load_study

    short = tmp_path / "short.dat"
    short.write_bytes(os.urandom(64 << 10))
    before = _sha(short)
    spec = {"name": "ra-created", "factors": {"bs": ["4k"]}, "runtime": 1, "size": "1m", "seed": 1,
            "fixed": {"rw": "randread", "ioengine": "psync"}}
    root = tmp_path / "results" / "ra-created"
    root.mkdir(parents=True)
    (root / "created_targets.json").write_text(json.dumps([{"path": str(short), "identity": _ident(short)}]))
    (root / "created_targets.json").chmod(0o666)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = run_study(load_study(spec), target=short, out_dir=tmp_path / "results", fio_bin=fio_bin,
                            progress=False)
        except Exception as exc:  # the refusal may leave run_study as an error
            assert "lay it out again" in str(exc)
        else:
            assert not res.completed and res.failed
            assert any("lay it out again" in str(e) for e in res.errors.values()), res.errors
    assert any("created_targets.json was not acted on" in m for m in _refusals(caught))
    assert short.exists() and _sha(short) == before

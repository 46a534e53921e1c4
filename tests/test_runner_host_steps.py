"""host_steps through the runner, on real fio runs: what each step did is in the run's provenance.json,
a scheduler is set on a loop device we create and put back after the sweep (a failing run and a killed
sweep included), and bad steps are refused before anything runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from storagebench._hostinfo import device_behind
from storagebench._runner import run_study
from storagebench._study import load_study
from storagebench.errors import FioError, StudyError, UnsafeTargetError
from storagebench.hoststeps import SCHEDULERS, restore_journal
from storagebench.records import Provenance

ROOT = Path(__file__).resolve().parents[1]


def _spec(name: str, **extra) -> dict:
    spec = {"name": name, "factors": {"bs": ["4k", "8k"]},
            "fixed": {"rw": "randread", "ioengine": "psync", "direct": 0}, "runtime": 1, "size": "4m", "seed": 5}
    spec.update(extra)
    return spec


def _provs(res) -> list[Provenance]:
    return [Provenance.read(d / "provenance.json") for d in res.run_dirs()]


def _scheduler(dev) -> tuple[str, list[str]]:
    text = Path(f"/sys/block/{dev.name}/queue/scheduler").read_text()
    names = text.replace("[", " ").replace("]", " ").split()
    return text[text.index("[") + 1:text.index("]")], names


@pytest.fixture
def other_scheduler(loop_dev):
    """The loop device, its scheduler now, and another one it offers."""
    current, offered = _scheduler(loop_dev)
    other = next((s for s in ("none", "mq-deadline", "kyber", "bfq") if s in offered and s != current), None)
    if other is None:
        pytest.skip(f"{loop_dev.path} offers one scheduler only: {offered}")
    return loop_dev, current, other


@pytest.mark.root
def test_drop_page_cache_and_drop_file_cache_are_in_each_runs_provenance(require_root, tmp_path, fio_bin):
    if device_behind(tmp_path) is None:
        pytest.skip(f"{tmp_path} is on tmpfs: its pages cannot be dropped")
    target = tmp_path / "data"
    study = load_study(_spec("hs-drop", host_steps=["drop_file_cache", "drop_page_cache"]))
    res = run_study(study, target=target, out_dir=tmp_path / "results", fio_bin=fio_bin, progress=False)
    assert res.ok and len(res.completed) == 2
    first, second = _provs(res)  # in run order
    for prov in (first, second):
        steps = {s["step"]: s for s in prov.host_steps}
        assert [s["step"] for s in prov.host_steps] == ["drop_file_cache", "drop_page_cache"]  # the spec's order
        drop = steps["drop_page_cache"]
        assert drop["level"] == 3 and drop["cached_before_bytes"] >= 0 and drop["cached_after_bytes"] >= 0
        assert drop["applied_at"].endswith("Z")
        assert datetime.fromisoformat(drop["applied_at"]) <= datetime.fromisoformat(prov.started_at)  # before the run
    # before the first run fio had not laid the file out: nothing of it was cached
    assert first.host_steps[0]["paths"] == [] and "no target file" in first.host_steps[0]["note"]
    # before the second, the file the first run read (buffered) was cached, and was evicted
    fc = second.host_steps[0]
    assert fc["paths"] == [str(target)]
    assert fc["resident_before_bytes"][str(target)] > 0 and fc["resident_after_bytes"][str(target)] == 0
    # the spec hash holds the steps: the same grid without them is another study
    assert load_study(_spec("hs-drop")).spec_hash != study.spec_hash


@pytest.mark.root
def test_scheduler_on_a_loop_device_is_set_for_each_run_and_put_back(require_root, other_scheduler, tmp_path,
                                                                    fio_bin):
    dev, original, other = other_scheduler
    study = load_study(_spec("hs-sched", host_steps=[{"scheduler": other}], fixed={
        "rw": "randread", "ioengine": "psync", "direct": 1}))
    res = run_study(study, target=dev.path, out_dir=tmp_path / "results", fio_bin=fio_bin, progress=False)
    assert res.ok and len(res.completed) == 2
    for prov in _provs(res):
        (step,) = prov.host_steps
        assert step["step"] == "set_scheduler" and step["device"] == dev.path
        assert (step["previous"], step["name"], step["current"]) == (original, other, other)
        assert prov.device.scheduler == other  # sysfs while fio ran
    assert _scheduler(dev)[0] == original  # put back after the sweep
    assert not (res.root / "host_steps_journal.json").exists()


@pytest.mark.root
def test_scheduler_is_put_back_after_a_failing_run(require_root, other_scheduler, tmp_path, fio_bin):
    dev, original, other = other_scheduler
    # bs=1000 with direct=1 on a 512-byte-sector device: fio's I/O fails with EINVAL
    spec = _spec("hs-fail", factors={"bs": [1000]}, host_steps=[{"scheduler": other}],
                 fixed={"rw": "randread", "ioengine": "psync", "direct": 1})
    res = run_study(load_study(spec), target=dev.path, out_dir=tmp_path / "results", fio_bin=fio_bin,
                    progress=False)
    assert len(res.failed) == 1 and res.completed == ()
    assert _scheduler(dev)[0] == original
    (attempt,) = (res.root / "failed" / res.failed[0]).iterdir()
    (step,) = Provenance.read(attempt / "provenance.json").host_steps  # the failed attempt says what was done
    assert (step["previous"], step["current"]) == (original, other)
    # stop_on_error: the error leaves run_study, the scheduler is back all the same
    with pytest.raises(FioError):
        run_study(load_study({**spec, "name": "hs-fail2"}), target=dev.path, out_dir=tmp_path / "results",
                  fio_bin=fio_bin, progress=False, stop_on_error=True)
    assert _scheduler(dev)[0] == original


@pytest.mark.root
def test_a_killed_sweeps_scheduler_is_put_back_by_the_next_sweep(require_root, other_scheduler, tmp_path, fio_bin):
    dev, original, other = other_scheduler
    spec = _spec("hs-kill", factors={"bs": ["4k"]}, runtime=4, host_steps=[{"scheduler": other}],
                 fixed={"rw": "randread", "ioengine": "psync", "direct": 1})
    out = tmp_path / "results"
    script = textwrap.dedent(f"""
        from storagebench._runner import run_study
        from storagebench._study import load_study
        run_study(load_study({spec!r}), target={dev.path!r}, out_dir={str(out)!r}, fio_bin={fio_bin!r},
                  progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    journal = out / "hs-kill" / "host_steps_journal.json"
    deadline = time.monotonic() + 60
    while not (journal.exists() and _scheduler(dev)[0] == other):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the sweep never set the scheduler: {proc.returncode} {proc.stderr.read()}")
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # the sweep we started, mid-run
    proc.wait(timeout=30)
    assert _scheduler(dev)[0] == other  # nobody put it back ...
    entry = json.loads(journal.read_text())[0]
    assert (entry["device"], entry["previous"], entry["set"]) == (dev.path, original, other)
    # the rerun, through the CLI: it puts the scheduler back first and says so, then measures the run
    spec_path = tmp_path / "hs-kill.yaml"
    spec_path.write_text(json.dumps(spec))  # JSON is YAML
    again = subprocess.run([sys.executable, "-m", "storagebench.cli", "run", str(spec_path), "--target", dev.path,
                            "--out", str(out), "--no-progress"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"had set it to {other} (host_steps); put the I/O scheduler of {dev.path} back to {original}" in \
        again.stderr
    assert len(list((out / "hs-kill" / "raw").iterdir())) == 1 and _scheduler(dev)[0] == original
    assert not journal.exists()
    # the journal's rule: a device whose scheduler someone changed since is left alone
    journal.write_text(json.dumps([{"device": dev.path, "devno": entry["devno"], "set": "kyber-not-set",
                                    "previous": original}]))
    (rec,) = restore_journal(journal)
    assert not rec["restored"] and "left alone" in rec["note"] and not journal.exists()


def test_bad_host_steps_are_refused_before_anything_runs(tmp_path, fio_bin, loop_dev):
    with pytest.raises(StudyError, match=r"host_steps\[0\]: unknown step 'drop_caches'; must be one of "
                                         r"\[drop_page_cache, drop_file_cache, scheduler\]"):
        load_study(_spec("hs-bad", host_steps=["drop_caches"]))
    with pytest.raises(StudyError, match=r"host_steps\[1\]\.scheduler: must be one of \[none, mq-deadline, kyber, "
                                         r"bfq\], got 'cfq'"):
        load_study(_spec("hs-bad", host_steps=["drop_page_cache", {"scheduler": "cfq"}]))
    with pytest.raises(StudyError, match="host_steps: are applied on this machine"):
        load_study(_spec("hs-bad", host_steps=["drop_page_cache"], hosts=["sock:/tmp/x.sock"]))
    # a scheduler the loop device does not offer: named with what it offers, before any run
    _, offered = _scheduler(loop_dev)
    missing = [s for s in SCHEDULERS if s not in offered]
    if missing:
        with pytest.raises(StudyError, match=rf"host_steps scheduler: scheduler for {loop_dev.path} must be one of "
                                             rf".*got '{missing[0]}'"):
            run_study(load_study(_spec("hs-bad", host_steps=[{"scheduler": missing[0]}])), target=loop_dev.path,
                      out_dir=tmp_path / "results", fio_bin=fio_bin, progress=False)
        assert not (tmp_path / "results").exists()
    # a file on a disk storagebench did not create: its scheduler is the host's, refused with the ways to allow it
    disk = device_behind(tmp_path)
    if disk is not None and not disk.is_loop:
        before = Path(f"/sys/block/{disk.partition_of or disk.name}/queue/scheduler").read_text()
        with pytest.raises(UnsafeTargetError, match=r"would change the I/O scheduler of .*allow_devices.*"
                                                    r"allow: \[ioscheduler\]"):
            run_study(load_study(_spec("hs-bad", host_steps=[{"scheduler": "none"}])), target=tmp_path / "d",
                      out_dir=tmp_path / "results", fio_bin=fio_bin, progress=False)
        assert Path(f"/sys/block/{disk.partition_of or disk.name}/queue/scheduler").read_text() == before
        assert not (tmp_path / "results").exists()
    # no block device at all (tmpfs)
    shm = Path("/dev/shm")
    if shm.is_dir() and device_behind(shm) is None:
        with pytest.raises(UnsafeTargetError, match="no block device is behind"):
            run_study(load_study(_spec("hs-bad", host_steps=[{"scheduler": "none"}])),
                      target=shm / f"sb-hs-{os.getpid()}", out_dir=tmp_path / "results", fio_bin=fio_bin,
                      progress=False)


@pytest.mark.root
def test_a_device_without_the_scheduler_is_refused_naming_it(testbed_ready, tmp_path, fio_bin):
    """A zram device we hot-add has no I/O scheduler at all (bio-based): allowed by name, the scheduler
    step is still refused before any run, naming the device and its sysfs file."""
    from storagebench.errors import TestbedError

    try:
        cm = testbed_ready.zram_device("8M")
        z = cm.__enter__()
    except TestbedError as exc:
        pytest.skip(str(exc))
    try:
        spec = _spec("hs-zram", host_steps=[{"scheduler": "none"}], fixed={"rw": "randread", "ioengine": "psync"})
        with pytest.raises(StudyError, match=rf"host_steps scheduler: .*{z.path}.* has no I/O scheduler .*"
                                             rf"\(the device behind {z.path}\)"):
            run_study(load_study(spec), target=z.path, allow_devices=[z.path], out_dir=tmp_path / "results",
                      fio_bin=fio_bin, progress=False)
        # not named in allow_devices: refused by the safety rule first
        with pytest.raises(UnsafeTargetError, match=rf"would change the I/O scheduler of {z.path}"):
            run_study(load_study(spec), target=z.path, out_dir=tmp_path / "results", fio_bin=fio_bin,
                      progress=False)
        assert not (tmp_path / "results").exists()
    finally:
        cm.__exit__(None, None, None)

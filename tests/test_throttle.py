"""Devices of a known capacity (issue 20): the block-I/O throttle on loop devices we made, fio inside its cgroup,
the caps in the spec and in provenance, and a known-answer study whose check covers the truth.

Estimand of the real runs: a capped device's read IOPS (4 KiB random reads, iodepth 8, direct=1); unit: one fio
run of 2 s after 1 s of ramp (the throttle's first slice lets a burst through, which the ramp leaves out).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from storagebench import _caps, _throttle, studies
from storagebench import testbed as tb
from storagebench._study import load_study
from storagebench.errors import SchemaError, StudyError, TestbedError
from storagebench.fio import process
from storagebench.records import SetUpInfo


def _randread_iops(fio_bin: str, device: str, cgroup: str | None, runtime: int = 2, ramp: int = 1) -> float:
    cmd = [fio_bin, "--name=cap", f"--filename={device}", "--rw=randread", "--bs=4k", "--iodepth=8",
           "--ioengine=libaio", "--direct=1", f"--runtime={runtime}", f"--ramp_time={ramp}", "--time_based",
           "--size=16m", "--output-format=json"]
    fp = process.spawn(cmd, marker=f"--filename={device}", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cgroup=cgroup)
    out, err = fp.popen.communicate(timeout=60)
    fp.close()
    assert fp.popen.returncode == 0, err
    return float(json.loads(out)["jobs"][0]["read"]["iops"])


@pytest.fixture(scope="module")
def loop(require_root):
    """One 32 MiB loop device of ours, written once (reads hit data, not holes)."""
    tb.require_testbed()
    with tb.loop_device("32M") as dev:
        subprocess.run(["dd", "if=/dev/zero", f"of={dev.path}", "bs=1M", "count=32", "oflag=direct"],
                       check=True, capture_output=True)
        yield dev


def test_a_cap_holds_for_fio_and_its_workers_and_is_gone_by_its_exact_path(loop, fio_bin):
    free = _randread_iops(fio_bin, loop.path, None, runtime=1, ramp=0)
    with tb.throttle({loop: {"riops": 200}}) as th:
        cg = Path(th.path)
        assert cg.is_dir() and cg.parent == _throttle.hierarchy()[1]
        assert cg.name.startswith(f"storagebench-{os.getpid()}-")
        assert th.to_dict()["caps"] == {loop.path: {"riops": 200}}
        assert {"kind": "cgroup", "path": th.path} in [{k: r[k] for k in ("kind", "path")} for r in tb.leftovers()]
        capped = _randread_iops(fio_bin, loop.path, th.path)
        assert _throttle._procs(cg) == []  # fio and its workers have left
    assert 194 <= capped <= 210, capped  # the cap, within a few %
    assert free > 5 * capped, (free, capped)  # unthrottled: far above it
    assert not cg.exists()
    assert not [r for r in tb.leftovers() if r["kind"] == "cgroup"]


def test_fio_is_not_started_outside_a_cgroup_it_cannot_enter(loop, fio_bin, tmp_path):
    with pytest.raises(Exception, match="cgroup"):
        _randread_iops(fio_bin, loop.path, str(tmp_path / "no-such-cgroup"))


def test_throttle_refuses_what_we_did_not_make_and_bad_caps(loop, tmp_path):
    with pytest.raises(TestbedError, match="refusing to cap /dev/null"):
        with tb.throttle({"/dev/null": {"riops": 200}}):
            pass
    with pytest.raises(TestbedError, match=r"unknown cap 'riop' \(did you mean 'riops'"):
        with tb.throttle({loop: {"riop": 200}}):
            pass
    # teardown by exact path only: never a directory that is not a throttle's cgroup
    root = _throttle.hierarchy()[1]
    for path in (root, root / "storagebench-x", tmp_path):
        with pytest.raises(TestbedError, match="refusing to remove"):
            _throttle.remove_cgroup(path)
    assert root.is_dir()


@pytest.mark.parametrize("caps,message", [
    ({"riop": 200}, r"unknown cap 'riop' \(did you mean 'riops'"),
    ({"riops": 0}, r"riops: must be an integer number of read IOPS from 1 to 10,000,000, got 0"),
    ({"riops": True}, "got True"),
    ({"wiops": 2.5}, "got 2.5"),
    ({"rbps": "1m"}, "got '1m'"),
    ({"wbps": 100}, r"wbps: must be an integer number of write B/s from 4,096"),
    ({"riops": 10**12}, "got 1000000000000"),
    ({}, "must be a mapping of one or more"),
    ([200], "must be a mapping"),
])
def test_bad_caps_are_refused_by_name(caps, message):
    with pytest.raises(ValueError, match=message):
        _caps.check_caps(caps, "throttle.device")
    spec = {"name": "x", "target": "/tmp/x", "fixed": {"rw": "read"}, "throttle": {"device": caps}}
    with pytest.raises(StudyError, match=message):
        load_study(spec)


def test_caps_in_the_spec_count_in_its_hash_and_unknown_roles_are_refused(tmp_path):
    base = {"name": "ka_caps", "target": "/tmp/x", "fixed": {"rw": "read"}}
    assert load_study(base).spec_hash != load_study({**base, "throttle": {"low": {"riops": 200}}}).spec_hash
    assert load_study({**base, "throttle": {}}).spec_hash == load_study(base).spec_hash  # old specs keep theirs
    ts = studies.get("ka_caps")
    text = Path(ts.spec_path).read_text().replace("  high: {riops: 400}", "  hihg: {riops: 400}")
    (tmp_path / "ka_caps.yaml").write_text(text)
    bad = studies.TestbedStudy(name="ka_caps", module=ts.module, spec_path=tmp_path / "ka_caps.yaml",
                               source="package", known_answer=True)
    with pytest.raises(StudyError, match=r"unknown device role 'hihg' \(did you mean 'high'\?\)"):
        bad.spec()


def test_known_answer_registry():
    names = studies.known_answer_names()
    assert names == ["ka_caps", "ka_consolidation", "ka_fast_vs_slow", "ka_rdm_vs_vmfs", "ka_stripe_width"]
    total = 0.0
    for n in names:
        ts = studies.get(n)
        assert ts.known_answer and ts.spec().throttle and ts.spec(quick=True).throttle
        q = ts.spec(quick=True)
        plan = q.expand()
        # fio processes one after the other (a concurrent group runs together). Quick is about a minute of fio:
        # 36 s at most, but ka_consolidation's pair runs 10 s (a ~100 ms offset of the two processes' windows
        # biases a shared total by d/2T: +1.8% at 3 s, docs/testbed.md), so it may take 66 s; all five <= 3 min.
        groups = {(p.setup, tuple(sorted((k, str(v)) for k, v in p.factors.items()
                                         if k not in (*q.concurrent, "target")))) for p in plan.points}
        seconds = (q.runtime + q.ramp_time) * len(groups)
        assert seconds <= (66 if n == "ka_consolidation" else 36), (n, len(groups), seconds)
        total += seconds
    assert total <= 180, total
    assert not any(studies.get(n).known_answer for n in ("stripe_width", "rdm_vs_vmfs"))


def test_provenance_carries_the_caps_and_refuses_hostile_ones():
    info = SetUpInfo(setup=1, build_id="abc", caps={"/dev/loop7": {"riops": 200, "wbps": 1 << 20}})
    back = SetUpInfo.from_json(json.loads(json.dumps(info.to_json())))
    assert back.caps == info.caps
    assert "caps" not in SetUpInfo(setup=1).to_json()  # files without caps are as before
    for caps in ({"/dev/loop7": {"riops": "<script>"}}, {"<img src=x>": {"riops": 1}}, {"/dev/loop7": {"x": 1}},
                 ["/dev/loop7"], {f"/dev/loop{i}": {"riops": 1} for i in range(100)}):
        with pytest.raises(SchemaError, match="set_up.caps"):
            SetUpInfo.from_json({"setup": 1, "caps": caps})


def test_cgroup_v2_io_max_and_no_throttle_here_is_said(tmp_path, monkeypatch):
    """cgroup v2 cannot be made on this host (v1 blkio holds the io controller): its rule format, and what is said
    when neither hierarchy can throttle."""
    _throttle._set_rules(tmp_path, 2, "7:3", {"riops": 200, "wbps": 1 << 20})
    assert (tmp_path / "io.max").read_text() == "7:3 riops=200 wiops=max rbps=max wbps=1048576\n"
    monkeypatch.setattr(_throttle, "_V1_ROOT", tmp_path / "no-blkio")
    monkeypatch.setattr(_throttle, "_v2_root", lambda: None)
    with pytest.raises(TestbedError, match=r"no block-I/O throttle: .*echo \+io > /sys/fs/cgroup/cgroup.subtree_control"):
        _throttle.hierarchy()
    assert _throttle.leftovers() == []
    monkeypatch.setattr(_throttle, "_v2_root", lambda: tmp_path)
    assert _throttle.hierarchy() == (2, tmp_path)


_CHILD = """
import time
from storagebench import testbed as tb
with tb.loop_device("16M") as dev, tb.throttle({dev: {"riops": 100}}) as th:
    print(dev.path, dev.backing_file, th.path, flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("kill", ["SIGTERM", "SIGKILL"])
def test_a_killed_process_leaves_a_cgroup_testbed_leftovers_finds_and_removes(require_root, kill):
    import signal
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    loop_path, backing, cgroup = proc.stdout.readline().split()
    assert Path(cgroup).is_dir()
    proc.send_signal(getattr(signal, kill))
    proc.wait(timeout=60)
    if kill == "SIGTERM":  # its own teardown ran: nothing left
        assert not Path(cgroup).exists()
        assert not [r for r in tb.leftovers(all_processes=True) if r["pid"] == proc.pid]
        return
    mine = {r["kind"]: r for r in tb.leftovers(all_processes=True) if r["pid"] == proc.pid}
    assert set(mine) == {"cgroup", "loop"} and mine["cgroup"]["path"] == cgroup and not mine["cgroup"]["alive"]
    removed = tb.cleanup_stale()
    assert {cgroup, loop_path} <= {r["path"] for r in removed}
    assert not Path(cgroup).exists() and not Path(backing).exists()


def test_a_plain_sweep_refuses_a_throttle_it_cannot_apply(tmp_path):
    from storagebench import run_study

    spec = {"name": "x", "target": str(tmp_path / "f"), "fixed": {"rw": "read"}, "size": "1m", "runtime": 1,
            "throttle": {"device": {"riops": 200}}}
    with pytest.raises(StudyError, match="throttle: caps devices a testbed builds"):
        run_study(load_study(spec), out_dir=tmp_path)
    assert not (tmp_path / "x").exists()  # refused before anything was written

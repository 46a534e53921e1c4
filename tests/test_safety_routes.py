"""Every route to protected data that issue 8 found, tried for real through the runner, on real loop devices.

Each test builds a loop device that holds data (a mounted ext4 with a canary file, or a loop
device's backing file), then tries one route the way a careless user or a hostile study author
would, through :func:`storagebench._runner.run_study` (so fio really would run if nothing refused
it), and checks three things: the attempt is refused, the message names the object and the
reason, and the canary (the device's or the file's sha256) is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from storagebench import testbed as tb
from storagebench._runner import run_study
from storagebench._safety import check_run
from storagebench._study import load_study
from storagebench.errors import StudyError, TestbedError, UnsafeTargetError

pytestmark = pytest.mark.root

CANARY = b"storagebench canary: this data must survive\n" * 20000  # ~880 KiB


def _sha(path: str | Path, limit: int | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        left = limit
        while True:
            chunk = fh.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
                if left <= 0:
                    break
    return h.hexdigest()


@pytest.fixture(autouse=True)
def _nothing_left_behind():
    yield
    assert tb.leftovers() == []


@pytest.fixture
def mounted(require_root, fio_bin, tmp_path):
    """A 64 MiB loop device with ext4 mounted, holding canary.bin (its sha256 known)."""
    try:
        dev_cm = tb.loop_device("64M", dir=tmp_path)
        dev = dev_cm.__enter__()
    except TestbedError as exc:
        pytest.skip(f"no loop devices: {exc}")
    try:
        with tb.filesystem(dev, "ext4") as fs:
            canary = Path(fs.mountpoint, "canary.bin")
            canary.write_bytes(CANARY)
            os.sync()
            yield dev, fs, canary, hashlib.sha256(CANARY).hexdigest()
            assert _sha(canary) == hashlib.sha256(CANARY).hexdigest(), "the canary changed"
    finally:
        dev_cm.__exit__(None, None, None)


def _spec(name: str, **extra) -> dict:
    spec = {"name": name, "factors": {"iodepth": [1]}, "fixed": {"rw": "randwrite", "bs": "4k", "direct": 1,
                                                                  "ioengine": "psync"},
            "runtime": 1, "size": "1m", "seed": 1}
    for key, value in extra.items():
        if key == "fixed":
            spec["fixed"] = {**spec["fixed"], **value}
        else:
            spec[key] = value
    return spec


def _no_runs(out: Path) -> bool:
    return not any(p.is_dir() and not p.name.startswith(".") for p in out.rglob("raw/*"))


def test_injection_through_a_level_value_is_refused(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    payload = f"x\n[inject]\nfilename={dev.path}\nrw=write\nsize=1m"
    spec = _spec("inject", factors={"pattern": [{"name": "p", "rw": "randread", "description": payload}]})
    spec["fixed"].pop("rw")
    with pytest.raises(StudyError, match=r"factors\.pattern\[0\]\.description: value may not hold control characters"):
        load_study(spec)


def test_injection_through_a_label_reaches_only_a_comment(mounted, tmp_path, fio_bin):
    """A hostile pattern ``name:`` (a label, copied into the job file's comment) cannot add a job."""
    dev, fs, canary, sha = mounted
    dev_sha = _sha(dev.path, 8 << 20)
    payload = f"x\n[inject]\nfilename={dev.path}\nrw=write\nsize=1m\nexec_prerun=touch {tmp_path}/pwned"
    spec = _spec("label", factors={"pattern": [{"name": payload, "rw": "randread"}]})
    spec["fixed"].pop("rw")
    try:
        study = load_study(spec)
    except StudyError as exc:  # the label itself is refused: also fine, and said clearly
        assert "pattern" in str(exc) and "name" in str(exc)
        return
    res = run_study(study, target=str(tmp_path / "plain.dat"), out_dir=tmp_path / "out", progress=False)
    job = (res.run_dirs()[0] / "job.fio").read_text()
    assert job.count("\n[") == 2 and "[inject]" not in job.replace("?[inject]?", "")
    assert not (tmp_path / "pwned").exists()
    assert _sha(dev.path, 8 << 20) == dev_sha


def test_alias_cannot_hide_a_write(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    spec = _spec("alias", factors={"readwrite": ["write"]}, fixed={"rw": "randread"})
    with pytest.raises(StudyError, match=r"factors\.rw: also set by fixed"):
        load_study(spec)
    # and if such options reach the check by another way, it reads fio's canonical name
    with pytest.raises(UnsafeTargetError, match=r"same fio option"):
        check_run(dev.path, {"rw": "randread", "readwrite": "write", "size": "1m"})
    with pytest.raises(UnsafeTargetError, match=rf"refusing write on {dev.path}.*it is mounted"):
        check_run(dev.path, {"readwrite": "write", "size": "1m"})


def test_iologs_naming_the_device(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    log = tmp_path / "replay.log"
    log.write_text(f"fio version 2 iolog\n{dev.path} add\n{dev.path} open\n{dev.path} write 0 4096\n"
                   f"{dev.path} close\n")
    spec = _spec("iolog", fixed={"rw": "randread", "read_iolog": str(log)})
    with pytest.raises(StudyError, match=r"read_iolog.*allow: \[iolog\]"):
        load_study(spec)
    study = load_study({**spec, "allow": ["iolog"]})
    with pytest.raises(UnsafeTargetError, match=rf"read_iolog replay on {dev.path}.*it is mounted"):
        run_study(study, target=str(tmp_path / "plain.dat"), out_dir=tmp_path / "out", progress=False)
    study = load_study({**_spec("redirect", fixed={"rw": "randread", "read_iolog": str(log),
                                                    "replay_redirect": dev.path}), "allow": ["iolog"]})
    with pytest.raises(UnsafeTargetError, match=rf"{dev.path}.*it is mounted"):
        run_study(study, target=str(tmp_path / "plain.dat"), out_dir=tmp_path / "out2", progress=False)
    assert _no_runs(tmp_path)


def test_relative_target_is_resolved_where_fio_resolves_it(mounted, tmp_path, monkeypatch):
    dev, fs, canary, sha = mounted
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    rel = os.path.relpath(dev.path, work)  # ../../..../dev/loopN from here
    study = load_study(_spec("relative"))
    with pytest.raises(UnsafeTargetError, match=rf"refusing randwrite on {rel}.*{dev.path}.*mounted"):
        run_study(study, target=rel, out_dir=tmp_path / "out", progress=False)
    # a harmless relative target is written where the user meant it, not inside the results
    study = load_study(_spec("relative-ok", fixed={"rw": "randread"}))
    res = run_study(study, target="data.bin", out_dir=tmp_path / "out", progress=False)
    job = (res.run_dirs()[0] / "job.fio").read_text()
    assert f"filename={work / 'data.bin'}" in job and (work / "data.bin").exists()
    with pytest.raises(UnsafeTargetError, match="inside the study's results directory"):
        run_study(load_study(_spec("inside", fixed={"rw": "randread"})), target=str(tmp_path / "out" / "inside" / "x"),
                  out_dir=tmp_path / "out", progress=False)


def test_opendir_needs_an_opt_in_and_checks_every_file(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    tree = tmp_path / "tree"
    tree.mkdir()
    spec = _spec("opendir", fixed={"opendir": str(tree)})
    with pytest.raises(StudyError, match=r"opendir.*allow: \[other_files\]"):
        load_study(spec)
    os.link(dev.backing_file, tree / "image.img")  # a loop device's backing file inside the tree
    study = load_study({**spec, "allow": ["other_files"]})
    with pytest.raises(UnsafeTargetError, match=r"image\.img.*hard links|image\.img.*backing file"):
        run_study(study, target=str(tmp_path / "plain.dat"), out_dir=tmp_path / "out", progress=False)
    os.unlink(tree / "image.img")


def test_hard_link_to_a_backing_file(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    link = tmp_path / "innocent.img"
    os.link(dev.backing_file, link)
    try:
        for rw in ("randwrite", "randread"):
            study = load_study(_spec(f"hardlink-{rw}", fixed={"rw": rw}))
            with pytest.raises(UnsafeTargetError, match=rf"{link}.*2 hard links"):
                run_study(study, target=str(link), out_dir=tmp_path / "out", progress=False)
        # identified by inode, not by path: even with one name the backing file is found
        os.unlink(dev.backing_file)
        with pytest.raises(UnsafeTargetError, match=rf"backing file of {dev.path}, found by inode.*mounted"):
            check_run(str(link), {"rw": "randwrite", "size": "1m"})
    finally:
        if not os.path.exists(dev.backing_file):
            os.link(link, dev.backing_file)  # let the fixture tear down by its exact path
        link.unlink()
    assert _no_runs(tmp_path)


def test_second_loop_device_on_a_mounted_image(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    second = subprocess.run(["losetup", "--find", "--show", dev.backing_file], capture_output=True, text=True,
                            check=True).stdout.strip()
    try:
        study = load_study(_spec("second-loop"))
        with pytest.raises(UnsafeTargetError,
                           match=rf"refusing randwrite on {second}.*it is mounted \({dev.path} on {fs.mountpoint}"):
            run_study(study, target=second, allow_devices=[second], out_dir=tmp_path / "out", progress=False)
    finally:
        if Path(f"/sys/block/{os.path.basename(second)}/loop/backing_file").read_text().strip() == dev.backing_file:
            subprocess.run(["losetup", "-d", second], check=True)
    assert _no_runs(tmp_path)


def test_local_fio_server_gets_the_local_checks(mounted, tmp_path, fio_bin):
    from storagebench.servers import fio_servers

    dev, fs, canary, sha = mounted
    dev_sha = _sha(dev.path, 8 << 20)
    with fio_servers(1, workdir=tmp_path / "srv") as servers:
        study = load_study(_spec("via-server", hosts=[servers[0].host.fio_arg]))
        with pytest.raises(UnsafeTargetError, match=rf"refusing randwrite on {dev.path}.*it is mounted"):
            run_study(study, target=dev.path, out_dir=tmp_path / "out", progress=False)
        with pytest.raises(UnsafeTargetError, match=rf"refusing randwrite on {dev.path}.*it is mounted"):
            run_study(study, target=dev.path, allow_devices=[dev.path], out_dir=tmp_path / "out", progress=False)
    assert _sha(dev.path, 8 << 20) == dev_sha
    assert _no_runs(tmp_path)


@pytest.mark.parametrize("where", ["backing file", "file in the mounted filesystem"])
def test_read_with_oversize(mounted, tmp_path, where):
    dev, fs, canary, sha = mounted
    if where == "backing file":
        # an idle (unmounted) image: a read of it is harmless unless fio would lay it out again
        with tb.loop_device("8M", dir=tmp_path) as idle:
            before = _sha(idle.backing_file)
            size = os.path.getsize(idle.backing_file)
            study = load_study(_spec("oversize-backing", fixed={"rw": "randread"}, size=f"{2 * size // 1024}k"))
            with pytest.raises(UnsafeTargetError, match=r"holds 8,388,608 bytes but the job needs 16,777,216"):
                run_study(study, target=idle.backing_file, out_dir=tmp_path / "out", progress=False)
            assert _sha(idle.backing_file) == before
            # the mounted image's backing file: in use, refused even to read with a region too large
            with pytest.raises(UnsafeTargetError, match=rf"backing file of {dev.path}.*mounted"):
                run_study(load_study(_spec("oversize-mounted", fixed={"rw": "randread"}, size="128m")),
                          target=dev.backing_file, out_dir=tmp_path / "out", progress=False)
    else:
        study = load_study(_spec("oversize-file", fixed={"rw": "randread"}, size="4m"))
        with pytest.raises(UnsafeTargetError, match=rf"{canary}.*holds 880,000 bytes but the job needs 4,194,304"):
            run_study(study, target=str(canary), out_dir=tmp_path / "out", progress=False)
    assert _no_runs(tmp_path)


def test_unlink_needs_an_opt_in(mounted, tmp_path):
    dev, fs, canary, sha = mounted
    with pytest.raises(StudyError, match=r"unlink=1.*deletes files.*allow: \[unlink\]"):
        load_study(_spec("unlink", fixed={"rw": "randread", "unlink": 1}))
    with pytest.raises(UnsafeTargetError, match=r"refusing unlink=1"):
        check_run(str(canary), {"rw": "randread", "unlink": 1})


@pytest.mark.parametrize("fixed, gate", [
    ({"write_lat_log": "/tmp/sb-lat"}, "log_paths"),
    ({"cgroup": "sbtest"}, "cgroup"),
    ({"ioscheduler": "none"}, "ioscheduler"),
    ({"ioengine": "net", "hostname": "127.0.0.1", "port": 9}, "net"),
    ({"exec_prerun": "id"}, "exec"),
])
def test_host_effects_need_an_opt_in(fixed, gate):
    with pytest.raises(StudyError, match=rf"allow: \[{gate}\]"):
        load_study(_spec("gated", fixed=fixed))

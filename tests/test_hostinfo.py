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

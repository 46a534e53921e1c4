"""testbed: real loop devices, filesystems, raid0 and zram, always torn down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storagebench import testbed as tb
from storagebench.errors import TestbedError

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _root_and_nothing_left(testbed_ready):
    yield


def _findmnt(mountpoint: str) -> str:
    return subprocess.run(["findmnt", "-n", "-o", "FSTYPE", mountpoint], capture_output=True,
                          text=True).stdout.strip()


def test_loop_device_is_direct_io_and_gone_afterwards():
    with tb.loop_device("48M") as dev:
        assert Path(dev.path).is_block_device()
        assert dev.direct_io is True
        name = dev.name
        assert Path(f"/sys/block/{name}/loop/dio").read_text().strip() == "1"
        assert int(Path(f"/sys/block/{name}/size").read_text()) * 512 == 48 << 20
        assert Path(dev.backing_file).stat().st_blocks * 512 < 1 << 20  # sparse
        assert tb.leftovers()[0]["path"] == dev.path
        backing = dev.backing_file
    assert not Path(backing).exists()
    assert Path(f"/sys/block/{name}/loop/backing_file").exists() is False or \
        Path(f"/sys/block/{name}/loop/backing_file").read_text().strip() != backing


def test_torn_down_on_error():
    with pytest.raises(RuntimeError, match="boom"):
        with tb.loop_device("16M") as dev, tb.filesystem(dev, "ext4") as fs:
            mnt = fs.mountpoint
            raise RuntimeError("boom")
    assert not os.path.ismount(mnt) and not os.path.exists(mnt)


@pytest.mark.parametrize("fstype,size", [("ext4", "64M"), ("xfs", "320M"), ("btrfs", "128M")])
def test_filesystem_mounted(fstype, size):
    with tb.loop_device(size) as dev, tb.filesystem(dev, fstype) as fs:
        assert _findmnt(fs.mountpoint) == fstype
        Path(fs.mountpoint, "f").write_bytes(b"x" * 8192)
    assert not os.path.exists(fs.mountpoint)


def test_btrfs_raid0_stripes_over_four_devices():
    with tb.loop_devices(4, "128M") as devs, tb.btrfs_raid0(devs) as fs:
        df = subprocess.run(["btrfs", "filesystem", "df", fs.mountpoint], capture_output=True, text=True,
                            check=True).stdout
        assert "Data, RAID0" in df and "Metadata, RAID0" in df
        show = subprocess.run(["btrfs", "filesystem", "show", fs.mountpoint], capture_output=True,
                              text=True, check=True).stdout
        for d in devs:
            assert d.path in show


def test_refuses_devices_it_did_not_create(tmp_path):
    with pytest.raises(TestbedError, match="not a loop or zram device this testbed created"):
        with tb.filesystem("/dev/vda", "ext4"):
            pass
    # a loop device somebody else set up over their own file is not ours either
    img = tmp_path / "theirs.img"
    img.write_bytes(b"\0" * (8 << 20))
    path = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True,
                          check=True).stdout.strip()
    try:
        with pytest.raises(TestbedError, match="not a loop or zram device"):
            with tb.filesystem(path, "ext4"):
                pass
    finally:
        subprocess.run(["losetup", "-d", path], check=True)


def test_bad_inputs():
    with pytest.raises(TestbedError, match="size must be"):
        with tb.loop_device("lots"):
            pass
    with pytest.raises(TestbedError, match="size must be positive"):
        with tb.loop_device(0):
            pass
    with tb.loop_device("16M") as dev:
        with pytest.raises(TestbedError, match=r"fstype must be one of \['ext4', 'xfs', 'btrfs'\], got 'ntfs'"):
            with tb.filesystem(dev, "ntfs"):
                pass
        with pytest.raises(TestbedError, match="at least 2 devices"):
            with tb.btrfs_raid0([dev]):
                pass
    with pytest.raises(TestbedError, match="existing directory"):
        with tb.loop_device("16M", dir="/nonexistent-dir"):
            pass


def test_zram_device():
    try:
        cm = tb.zram_device("64M")
        z = cm.__enter__()
    except TestbedError as exc:
        pytest.skip(f"no zram here: {exc}")
    try:
        assert Path(z.path).is_block_device()
        assert int(Path(f"/sys/block/zram{z.id}/disksize").read_text()) == 64 << 20
        assert tb.leftovers() == [{"kind": "zram", "path": z.path, "pid": os.getpid(), "alive": True}]
    finally:
        cm.__exit__(None, None, None)
    assert not Path(f"/sys/block/zram{z.id}").exists()


def test_ram_loop_device_is_on_tmpfs():
    with tb.ram_loop_device("16M") as dev:
        assert dev.backing_fs == "tmpfs"
        assert dev.backing_file.startswith("/dev/shm/")


_CHILD = textwrap.dedent(
    """
    import sys, time
    from storagebench import testbed as tb
    with tb.loop_device("16M") as dev, tb.filesystem(dev, "ext4") as fs:
        print(dev.path, dev.backing_file, fs.mountpoint, flush=True)
        time.sleep(60)
    """
)


def _spawn_child():
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    assert len(line) == 3, "child did not set up its testbed"
    return proc, line


def _gone(loop: str, backing: str, mnt: str) -> bool:
    name = os.path.basename(loop)
    bf = Path(f"/sys/block/{name}/loop/backing_file")
    still_bound = bf.exists() and bf.read_text().strip() == backing
    return not still_bound and not os.path.exists(backing) and not os.path.ismount(mnt)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_tears_down(sig):
    proc, (loop, backing, mnt) = _spawn_child()
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert _gone(loop, backing, mnt)
    assert tb.leftovers(all_processes=True) == [] or all(
        r["pid"] != proc.pid for r in tb.leftovers(all_processes=True))


def test_cleanup_stale_after_sigkill():
    proc, (loop, backing, mnt) = _spawn_child()
    proc.kill()
    proc.wait(timeout=30)
    mine = [r for r in tb.leftovers(all_processes=True) if r["pid"] == proc.pid]
    assert {r["kind"] for r in mine} == {"loop", "mount"}
    assert not any(r["alive"] for r in mine)
    removed = tb.cleanup_stale()
    assert {r["path"] for r in removed} >= {loop, mnt}
    for _ in range(20):
        if _gone(loop, backing, mnt):
            break
        time.sleep(0.1)
    assert _gone(loop, backing, mnt)


def test_without_root_a_clear_error(monkeypatch):
    """As a non-root user (euid faked: the venv is not readable by nobody here) nothing is created."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    before = sorted(Path("/sys/block").glob("loop*"))
    with pytest.raises(TestbedError, match="testbeds need root"):
        with tb.loop_device("16M"):
            pass
    with pytest.raises(TestbedError, match="zram_device needs root"):
        with tb.zram_device("16M"):
            pass
    assert sorted(Path("/sys/block").glob("loop*")) == before


def test_precondition_writes_the_region_twice_and_never_over_data(fio_bin, tmp_path):
    """SNIA PTS preconditioning: the loop device's own write counter (sysfs stat, 512-byte sectors) grows by
    twice the region; a device that holds a mounted filesystem is refused before anything is written."""
    from storagebench.errors import UnsafeTargetError

    with tb.loop_device("48M", dir=tmp_path) as dev:
        stat = Path(f"/sys/block/{dev.name}/stat")
        before = int(stat.read_text().split()[6])
        tb.precondition([dev.path], "8m", allow_devices=[dev.path], fio_bin=fio_bin)
        written = (int(stat.read_text().split()[6]) - before) * 512
        assert written == 2 * (8 << 20)
        with open(dev.path, "rb") as fh:  # reads now hit written blocks, not holes
            assert fh.read(4096) != bytes(4096)
        with tb.filesystem(dev, "ext4"), pytest.raises(UnsafeTargetError):  # checked before fio starts
            tb.precondition([dev.path], "8m", fio_bin=fio_bin)
    f = tmp_path / "file.dat"  # a file is created and filled (its blocks allocated: not sparse)
    tb.precondition([str(f)], 1 << 20, fio_bin=fio_bin, loops=1)
    assert f.stat().st_size == 1 << 20 and f.stat().st_blocks * 512 >= 1 << 20

"""Linux testbeds: loop devices, filesystems, btrfs raid0, zram, RAM-backed loops.

Every resource is created by a context manager that tears it down by its exact path or id on
normal exit, on an exception and on Ctrl-C (``KeyboardInterrupt``). A ``SIGTERM`` is turned into
``SystemExit`` (only when no other handler is installed) so the same ``finally`` blocks run, and an
``atexit`` hook removes anything still registered when the interpreter exits. Nothing is torn
down that this process did not create: loop devices are detached only while their backing file
is still the sparse file we made, filesystems are made only on devices we created, and zram
devices are only ones we hot-added through ``/sys/class/zram-control``.

Names carry the creating process id (``storagebench-tb-<pid>-...``), so :func:`leftovers` can
list what any storagebench process left behind, and :func:`cleanup_stale` can remove the
leftovers of processes that no longer exist.

All of it needs root and the kernel's loop driver (``/dev/loop-control``); without them a
:class:`~storagebench.errors.TestbedError` says which is missing.

The cleanup registry, the state records, running a tool and sizes are :mod:`storagebench._testbedbase`'s.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import _throttle
from ._safety import check_run
from ._store import pid_alive  # one liveness rule for stale staging dirs and stale testbeds
from ._testbedbase import (
    PREFIX,
    parse_size,
    register_cleanup,
    require_testbed,
    run_tool,
    state_records,
    state_remove,
    state_write,
    unregister_cleanup,
)
from .errors import FioError, TestbedError
from .fio import process

__all__ = [
    "LoopDevice",
    "Filesystem",
    "ZramDevice",
    "FSTYPES",
    "require_testbed",
    "loop_device",
    "loop_devices",
    "ram_loop_device",
    "filesystem",
    "btrfs_raid0",
    "zram_device",
    "leftovers",
    "cleanup_stale",
    "parse_size",
    "precondition",
    "PRECONDITION_LOOPS",
    "throttle",
    "Throttle",
]
Throttle = _throttle.Throttle

#: filesystems :func:`filesystem` can make
FSTYPES = ("ext4", "xfs", "btrfs")
_ZRAM_CONTROL = Path("/sys/class/zram-control")

# ---------------------------------------------------------------------------------------------
# loop devices


@dataclass(frozen=True)
class LoopDevice:
    """A loop device over a sparse file we created.

    Attributes
    ----------
    path : str
        ``/dev/loopN``.
    backing_file : str
        The sparse file behind it.
    size_bytes : int
        Its size in bytes.
    direct_io : bool
        What ``/sys/block/loopN/loop/dio`` reports after set-up: with ``True`` the loop driver
        reads and writes the backing file with O_DIRECT (no second page cache); with ``False``
        I/O goes through the backing filesystem's page cache.
    backing_fs : str
        Filesystem type holding the backing file (``ext4``, ``tmpfs`` ...).
    """

    path: str
    backing_file: str
    size_bytes: int
    direct_io: bool
    backing_fs: str = ""

    @property
    def name(self) -> str:
        """Kernel name, ``loopN``."""
        return os.path.basename(self.path)

    def to_dict(self) -> dict:
        """Provenance record."""
        return {"kind": "loop", **asdict(self)}


def _fstype_of(path: str) -> str:
    try:
        out = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", path], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _loop_backing(name: str) -> str:
    try:
        return Path(f"/sys/block/{name}/loop/backing_file").read_text().strip().removesuffix(" (deleted)")
    except OSError:
        return ""


def _detach_loop(path: str, backing: str) -> None:
    name = os.path.basename(path)
    for attempt in range(20):
        current = _loop_backing(name)
        if current != backing:  # already gone, or re-used by someone else: not ours to touch
            return
        proc = subprocess.run(["losetup", "-d", path], capture_output=True, text=True, timeout=30)
        if proc.returncode == 0:
            # detach is asynchronous while the device is open (udev probing); wait for it
            for _ in range(50):
                if _loop_backing(name) != backing:
                    return
                time.sleep(0.05)
            return
        time.sleep(0.1 * (attempt + 1))
    raise TestbedError(f"cannot detach {path} (backing file {backing}): still busy")


@contextlib.contextmanager
def loop_device(size: int | str, *, dir: str | os.PathLike[str] | None = None,
                direct_io: bool = True) -> Iterator[LoopDevice]:
    """Create a sparse file and a loop device over it; detach and delete both afterwards.

    Parameters
    ----------
    size : int or str
        Size in bytes, or ``"64M"``/``"1G"`` (binary multiples).
    dir : path, optional
        Directory for the backing file (default: ``/var/tmp``, i.e. the local disk; use
        ``/dev/shm`` for a RAM-backed one, see :func:`ram_loop_device`).
    direct_io : bool
        ``losetup --direct-io=on``: the loop driver does O_DIRECT I/O on the backing file, so
        the device measures the disk under it, not the page cache. If the backing filesystem
        cannot do O_DIRECT (tmpfs) the kernel keeps buffered I/O; ``LoopDevice.direct_io``
        says what it really is.

    Yields
    ------
    LoopDevice

    Raises
    ------
    TestbedError
        Not root, no loop support, ``losetup`` failed, or bad ``size``.
    """
    require_testbed()
    nbytes = parse_size(size)
    base = Path(dir) if dir is not None else Path("/var/tmp")
    if not base.is_dir():
        raise TestbedError(f"dir must be an existing directory, got {str(base)!r}")
    fd, backing = tempfile.mkstemp(prefix=f"{PREFIX}-{os.getpid()}-", suffix=".img", dir=base)
    key = f"loop-{os.getpid()}-{os.path.basename(backing)}"
    path = None
    try:
        os.ftruncate(fd, nbytes)  # sparse
        os.close(fd)
        fd = -1
        cmd = ["losetup", "--find", "--show"]
        if direct_io:
            cmd.append("--direct-io=on")
        cmd.append(backing)
        path = run_tool(cmd, what="loop_device").strip()
        if not path.startswith("/dev/loop"):
            raise TestbedError(f"loop_device: losetup printed {path!r}, not a loop device")
        # registered before anything else can fail: teardown by this exact path + backing file
        register_cleanup(key, f"loop {path} over {backing}", lambda: _detach_loop(path, backing))
        state_write(key, {"kind": "loop", "pid": os.getpid(), "path": path, "backing_file": backing})
        dio = Path(f"/sys/block/{os.path.basename(path)}/loop/dio").read_text().strip() == "1"
        yield LoopDevice(path=path, backing_file=backing, size_bytes=nbytes, direct_io=dio,
                         backing_fs=_fstype_of(str(base)))
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            if path is not None:
                _detach_loop(path, backing)
        finally:
            unregister_cleanup(key)
            state_remove(key)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(backing)


@contextlib.contextmanager
def loop_devices(n: int, size: int | str, *, dir=None, direct_io: bool = True) -> Iterator[list[LoopDevice]]:
    """``n`` loop devices of ``size`` each (see :func:`loop_device`), torn down together."""
    if not isinstance(n, int) or n < 1:
        raise TestbedError(f"n must be a positive integer, got {n!r}")
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(loop_device(size, dir=dir, direct_io=direct_io)) for _ in range(n)]


@contextlib.contextmanager
def ram_loop_device(size: int | str) -> Iterator[LoopDevice]:
    """A RAM-backed block device: a loop device over a file on tmpfs (``/dev/shm``).

    The fallback when no zram device can be had. tmpfs cannot do O_DIRECT, so the loop driver
    copies to and from tmpfs pages (memory); with fio ``direct=1`` the loop device's own page
    cache is bypassed, so each I/O is one memory copy through the block layer.
    """
    shm = Path("/dev/shm")
    if not shm.is_dir():
        raise TestbedError("ram_loop_device: /dev/shm (tmpfs) is not there")
    with loop_device(size, dir=shm, direct_io=False) as dev:
        yield dev


# ---------------------------------------------------------------------------------------------
# filesystems


@dataclass(frozen=True)
class Filesystem:
    """A filesystem we made and mounted.

    Attributes
    ----------
    devices : tuple of str
        The block devices it spans.
    fstype : str
        ``ext4``, ``xfs`` or ``btrfs``.
    mountpoint : str
        The temporary directory it is mounted on.
    profile : str
        ``"single"``, or ``"raid0"`` for :func:`btrfs_raid0`.
    """

    devices: tuple[str, ...]
    fstype: str
    mountpoint: str
    profile: str = "single"

    def to_dict(self) -> dict:
        """Provenance record."""
        return {"kind": "filesystem", **asdict(self)}


def _ours(device: str) -> bool:
    """True for a loop device over one of our backing files, or a zram device we added."""
    name = os.path.basename(os.path.realpath(device))
    if name.startswith("loop"):
        return os.path.basename(_loop_backing(name)).startswith(f"{PREFIX}-")
    if name.startswith("zram"):
        return any(
            r.get("kind") == "zram" and r.get("path") == f"/dev/{name}" for r in state_records()
        )
    return False


def _require_ours(devices: Sequence[str], what: str, act: str = "make a filesystem on") -> None:
    for d in devices:
        if not _ours(d):
            raise TestbedError(f"{what}: refusing to {act} {d}: it is not a loop or zram device this testbed created")


def _umount(mountpoint: str) -> None:
    for attempt in range(20):
        if not os.path.ismount(mountpoint):
            return
        proc = subprocess.run(["umount", mountpoint], capture_output=True, text=True, timeout=60)
        if proc.returncode == 0:
            return
        time.sleep(0.1 * (attempt + 1))
    raise TestbedError(f"cannot unmount {mountpoint}: {proc.stderr.strip()}")


def _mkfs_cmd(fstype: str, devices: Sequence[str], profile: str) -> list[str]:
    if fstype == "ext4":
        # no lazy init: a background ext4lazyinit thread would write during the measurements
        return ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", *devices]
    if fstype == "xfs":
        return ["mkfs.xfs", "-q", "-f", *devices]
    if profile == "raid0":
        return ["mkfs.btrfs", "-q", "-f", "-d", "raid0", "-m", "raid0", *devices]
    return ["mkfs.btrfs", "-q", "-f", *devices]


@contextlib.contextmanager
def _mounted(devices: Sequence[str], fstype: str, profile: str,
             mount_options: str | None, mkfs: bool = True) -> Iterator[Filesystem]:
    require_testbed()
    if fstype not in FSTYPES:
        raise TestbedError(f"fstype must be one of {list(FSTYPES)}, got {fstype!r}")
    _require_ours(devices, "filesystem")
    if mkfs:
        run_tool(_mkfs_cmd(fstype, devices, profile), what=f"mkfs {fstype}", timeout=300)
    mnt = tempfile.mkdtemp(prefix=f"{PREFIX}-{os.getpid()}-mnt-")
    key = f"mount-{os.getpid()}-{os.path.basename(mnt)}"

    def teardown():
        try:
            _umount(mnt)
        finally:
            if fstype == "btrfs" and shutil.which("btrfs"):
                for d in devices:  # drop the kernel's registration so the loop device can go
                    subprocess.run(["btrfs", "device", "scan", "--forget", d], capture_output=True, timeout=30)
            with contextlib.suppress(OSError):
                os.rmdir(mnt)

    register_cleanup(key, f"mount {mnt}", teardown)
    state_write(key, {"kind": "mount", "pid": os.getpid(), "path": mnt, "devices": list(devices)})
    try:
        opts = []
        if fstype == "btrfs" and len(devices) > 1:
            opts += [f"device={d}" for d in devices]
        if mount_options:
            opts.append(mount_options)
        cmd = ["mount", "-t", fstype]
        if opts:
            cmd += ["-o", ",".join(opts)]
        run_tool([*cmd, devices[0], mnt], what=f"mount {fstype}")
        yield Filesystem(devices=tuple(devices), fstype=fstype, mountpoint=mnt, profile=profile)
    finally:
        try:
            teardown()
        finally:
            unregister_cleanup(key)
            state_remove(key)


def filesystem(device: str | LoopDevice, fstype: str = "ext4", *,
               mount_options: str | None = None, mkfs: bool = True):
    """Make ``fstype`` on a device we created and mount it on a temporary directory.

    Parameters
    ----------
    device : str or LoopDevice
        A loop or zram device this module created (anything else is refused).
    fstype : {"ext4", "xfs", "btrfs"}
        ext4 is made without lazy inode-table init, so no background writer runs later.
    mount_options : str, optional
        Passed to ``mount -o``.
    mkfs : bool
        ``False`` mounts the filesystem already on the device (made by an earlier call).

    Returns
    -------
    context manager yielding Filesystem
        Unmounted and its directory removed on exit.

    Raises
    ------
    TestbedError
        Bad ``fstype``, a device we did not create, ``mkfs`` or ``mount`` failed.
    """
    path = device.path if isinstance(device, LoopDevice) else str(device)
    return _mounted([path], fstype, "single", mount_options, mkfs)


def btrfs_raid0(devices: Sequence[str | LoopDevice], *, mount_options: str | None = None):
    """btrfs with data and metadata striped over ``devices`` (``mkfs.btrfs -d raid0 -m raid0``).

    Parameters
    ----------
    devices : sequence of str or LoopDevice
        At least two loop/zram devices this module created.
    mount_options : str, optional
        Passed to ``mount -o`` (after the ``device=`` list).

    Returns
    -------
    context manager yielding Filesystem
        with ``profile == "raid0"``; on exit unmounted and the devices ``btrfs device scan
        --forget``-ed.

    Raises
    ------
    TestbedError
        Fewer than two devices, a device we did not create, ``mkfs.btrfs``/``mount`` failed.
    """
    paths = [d.path if isinstance(d, LoopDevice) else str(d) for d in devices]
    if len(paths) < 2:
        raise TestbedError(f"btrfs_raid0 needs at least 2 devices, got {len(paths)}")
    return _mounted(paths, "btrfs", "raid0", mount_options)


def throttle(caps_by_device):
    """Cap devices this testbed created (loop, zram) with the block-I/O throttle: a context manager yielding a
    :class:`storagebench._throttle.Throttle`, whose cgroup fio must run in (``SetUp(cgroup=...)``); removed on exit.

    ``caps_by_device``: device path or :class:`LoopDevice`/:class:`ZramDevice` -> caps (``{"riops": 200}``). Raises
    :class:`TestbedError` for a device we did not create, bad caps or no throttle here (:mod:`storagebench._throttle`).
    """
    paths = {getattr(d, "path", d): c for d, c in caps_by_device.items()}
    _require_ours(list(paths), "throttle", "cap")
    return _throttle.throttle(paths)


# ---------------------------------------------------------------------------------------------
# zram


@dataclass(frozen=True)
class ZramDevice:
    """A zram device we hot-added (compressed RAM block device).

    Attributes
    ----------
    path : str
        ``/dev/zramN``.
    id : int
        N.
    size_bytes : int
        ``disksize``.
    comp_algorithm : str
        The compression algorithm in use.
    """

    path: str
    id: int
    size_bytes: int
    comp_algorithm: str

    def to_dict(self) -> dict:
        """Provenance record."""
        return {"kind": "zram", **asdict(self)}


def _zram_remove(zid: int) -> None:
    sysdir = Path(f"/sys/block/zram{zid}")
    if not sysdir.exists():
        return
    with contextlib.suppress(OSError):
        (sysdir / "reset").write_text("1")
    for attempt in range(20):
        try:
            (_ZRAM_CONTROL / "hot_remove").write_text(str(zid))
            return
        except FileNotFoundError:
            return
        except OSError:
            if not sysdir.exists():
                return
            time.sleep(0.1 * (attempt + 1))
    raise TestbedError(f"cannot hot_remove zram{zid}")


@contextlib.contextmanager
def zram_device(size: int | str, *, comp_algorithm: str | None = None) -> Iterator[ZramDevice]:
    """Hot-add a zram device of ``size``; reset and hot-remove it afterwards.

    Only a device added through ``/sys/class/zram-control/hot_add`` is used (never an existing
    ``zram0``, which may be someone's swap).

    Parameters
    ----------
    size : int or str
        ``disksize`` in bytes or ``"256M"``.
    comp_algorithm : str, optional
        Written to ``comp_algorithm`` before ``disksize`` (e.g. ``"lz4"``); must be one the
        kernel lists.

    Raises
    ------
    TestbedError
        Not root, the zram module is not loaded (``/sys/class/zram-control`` missing and
        ``modprobe zram`` failed), or the kernel refused.
    """
    if os.geteuid() != 0:
        raise TestbedError("zram_device needs root")
    nbytes = parse_size(size)
    if not _ZRAM_CONTROL.exists():
        subprocess.run(["modprobe", "zram", "num_devices=0"], capture_output=True, timeout=30)
        if not _ZRAM_CONTROL.exists():
            raise TestbedError(
                "no zram: /sys/class/zram-control is missing and 'modprobe zram' failed; use "
                "ram_loop_device() (a loop device over tmpfs) instead"
            )
    try:
        zid = int((_ZRAM_CONTROL / "hot_add").read_text().strip())
    except (OSError, ValueError) as exc:
        raise TestbedError(f"zram hot_add failed: {exc}") from exc
    key = f"zram-{os.getpid()}-{zid}"
    register_cleanup(key, f"zram{zid}", lambda: _zram_remove(zid))
    state_write(key, {"kind": "zram", "pid": os.getpid(), "path": f"/dev/zram{zid}", "id": zid})
    try:
        sysdir = Path(f"/sys/block/zram{zid}")
        if comp_algorithm is not None:
            avail = (sysdir / "comp_algorithm").read_text()
            names = avail.replace("[", "").replace("]", "").split()
            if comp_algorithm not in names:
                raise TestbedError(f"comp_algorithm must be one of {names}, got {comp_algorithm!r}")
            (sysdir / "comp_algorithm").write_text(comp_algorithm)
        try:
            (sysdir / "disksize").write_text(str(nbytes))
        except OSError as exc:
            raise TestbedError(f"zram{zid}: cannot set disksize {nbytes}: {exc}") from exc
        current = re.search(r"\[([^\]]+)\]", (sysdir / "comp_algorithm").read_text())
        for _ in range(50):  # the node appears via devtmpfs
            if os.path.exists(f"/dev/zram{zid}"):
                break
            time.sleep(0.05)
        else:
            raise TestbedError(f"/dev/zram{zid} did not appear")
        yield ZramDevice(path=f"/dev/zram{zid}", id=zid, size_bytes=nbytes,
                         comp_algorithm=current.group(1) if current else "")
    finally:
        try:
            _zram_remove(zid)
        finally:
            unregister_cleanup(key)
            state_remove(key)


# ---------------------------------------------------------------------------------------------
# leftovers


_PID_RE = re.compile(rf"{PREFIX}-(\d+)-")


def leftovers(*, all_processes: bool = False) -> list[dict]:
    """Loop devices, mounts, zram devices and throttle cgroups of ours that are still present.

    Parameters
    ----------
    all_processes : bool
        ``False`` (default): only those created by this process. ``True``: by any storagebench
        process, with ``alive`` saying whether the creating process still runs.

    Returns
    -------
    list of dict
        ``{"kind": "loop"|"mount"|"zram"|"cgroup", "path": ..., "pid": ..., "alive": ...}``; an empty
        list means nothing is left.
    """
    found: dict[tuple[str, str], dict] = {}
    me = os.getpid()

    def add(kind: str, path: str, pid: int, **extra) -> None:
        if not all_processes and pid != me:
            return
        found[(kind, path)] = {"kind": kind, "path": path, "pid": pid, "alive": pid_alive(pid), **extra}

    for d in Path("/sys/block").glob("loop*"):
        backing = _loop_backing(d.name)
        m = _PID_RE.search(os.path.basename(backing))
        if m:
            add("loop", f"/dev/{d.name}", int(m.group(1)), backing_file=backing)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            mnt = line.split()[4]
            m = _PID_RE.search(os.path.basename(mnt))
            if m:
                add("mount", mnt, int(m.group(1)))
    for rec in state_records():
        if (rec.get("kind") == "zram" and re.fullmatch(r"/dev/zram\d+", rec["path"])
                and rec["path"] == f"/dev/zram{rec.get('id')}" and Path(f"/sys/block/zram{rec.get('id')}").exists()):
            add("zram", rec["path"], int(rec.get("pid", -1)))
    for rec in _throttle.leftovers():
        add(rec["kind"], rec["path"], rec["pid"])
    return sorted(found.values(), key=lambda r: (r["kind"], r["path"]))


def cleanup_stale() -> list[dict]:
    """Tear down leftovers of storagebench processes that no longer run; return what was removed.

    Mounts first, then zram, then loop devices (a loop device cannot go while it is mounted).
    Resources of live processes are never touched.
    """
    removed = []
    stale = [r for r in leftovers(all_processes=True) if not r["alive"]]
    for r in (x for x in stale if x["kind"] == "mount"):
        _umount(r["path"])
        with contextlib.suppress(OSError):
            os.rmdir(r["path"])
        removed.append(r)
    for r in (x for x in stale if x["kind"] == "cgroup"):  # before the devices its rules name
        _throttle.remove_cgroup(r["path"])
        removed.append(r)
    for r in (x for x in stale if x["kind"] == "zram"):
        _zram_remove(int(r["path"].removeprefix("/dev/zram")))
        removed.append(r)
    for r in (x for x in stale if x["kind"] == "loop"):
        _detach_loop(r["path"], r["backing_file"])
        with contextlib.suppress(FileNotFoundError):
            os.unlink(r["backing_file"])
        removed.append(r)
    for rec in state_records():
        if not pid_alive(int(rec.get("pid", -1))):
            state_remove(rec["_key"])
    return removed


# ---------------------------------------------------------------------------------------------
# preconditioning

#: Times :func:`precondition` writes the region (SNIA PTS workload-independent preconditioning:
#: twice the user capacity in sequential writes).
PRECONDITION_LOOPS = 2


def precondition(paths: Sequence[str], size: int | str, *, allow_devices: Sequence[str] = (), loops: int = PRECONDITION_LOOPS,
                 fio_bin: str = "fio", timeout_s: float = 600.0) -> float:
    """Write the region of each target sequentially ``loops`` times before it is measured.

    fio ``rw=write bs=1m direct=1 ioengine=libaio iodepth=8 size=<size> loops=<loops>`` on each path,
    one after the other, each checked first by :func:`storagebench._safety.check_run` (a block device
    must be in ``allow_devices``) and run by :func:`storagebench.fio.process.run` (its own session,
    stopped on timeout or Ctrl-C). Reads then hit written blocks (no holes of a sparse file or a fresh
    device, which read back without touching the medium), and writes start from a device state that is
    the same for every set-up.

    Parameters
    ----------
    paths : sequence of str
        Files (created as needed) or block devices this testbed made.
    size : int or str
        The region each run touches (the study's ``size``), bytes or an fio size such as ``256m``.
    allow_devices : sequence of str
        Block devices that may be written.
    loops : int
        Passes over the region (SNIA PTS: 2, i.e. twice the capacity under test).
    fio_bin : str
        fio executable.
    timeout_s : float
        Limit per path, s.

    Returns
    -------
    float
        Wall time, s.

    Raises
    ------
    UnsafeTargetError
        A path the safety check refuses.
    FioError
        fio failed or did not finish within ``timeout_s``.

    Notes
    -----
    SNIA Solid State Storage Performance Test Specification (PTS) 2.0, sec. 3 (purge, then
    workload-independent preconditioning: sequential 128 KiB writes of twice the user capacity).
    A loop device over a file cannot be purged; a fresh sparse file is its purge.
    """
    nbytes = parse_size(size)
    exe = process.find_fio(fio_bin)
    t0 = time.monotonic()
    for path in paths:
        opts = {"rw": "write", "bs": "1m", "size": str(nbytes), "direct": 1, "ioengine": "libaio", "iodepth": 8,
                "loops": int(loops)}
        check_run(path, opts, allow_devices=allow_devices)
        cmd = [exe, "--name=precondition", f"--filename={path}", "--rw=write", "--bs=1m", f"--size={nbytes}",
               f"--loops={int(loops)}", "--direct=1", "--ioengine=libaio", "--iodepth=8", "--output-format=terse"]
        try:
            proc = process.run(cmd, timeout_s=timeout_s, marker=f"--filename={path}")
        except subprocess.TimeoutExpired:
            raise FioError(f"preconditioning {path} did not finish within {timeout_s:g} s and was killed",
                           returncode=None) from None
        if proc.returncode != 0:
            raise FioError(f"preconditioning {path} failed: {proc.stderr.strip()[-500:]}", returncode=proc.returncode,
                           stderr=proc.stderr)
    return time.monotonic() - t0

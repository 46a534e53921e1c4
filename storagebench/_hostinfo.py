"""Provenance of a run: fio, kernel, host, CPU, the device and filesystem under the target, git.

Every run directory gets a ``provenance.json`` built from :func:`collect_provenance` (a typed
:class:`~storagebench.records.Provenance`), so that any number in a report can be traced to the
machine, device and code that produced it.
Device facts come from sysfs (``/sys/dev/block/MAJ:MIN``: ``device/model``,
``queue/rotational``, ``queue/scheduler``, ``size`` in 512-byte sectors; Linux
``Documentation/ABI/stable/sysfs-block``); the filesystem from ``/proc/self/mountinfo``
(``proc(5)``).
"""

from __future__ import annotations

import functools
import os
import platform
import re
import socket
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ._version import __version__
from .errors import display_path
from .fio.process import fio_version, other_fio_processes
from .records import DeviceInfo, FilesystemInfo, Provenance

__all__ = [
    "collect_provenance", "block_device_info", "device_behind", "sysfs_block_dir", "filesystem_of", "git_revision",
    "device_stat_path", "read_io_counters", "QuietProbe", "QUIET_MAX_IOPS", "QUIET_MAX_BYTES_PER_S", "mountinfo",
    "unescape_mount", "MEMORY_FSTYPES", "memory_note", "add_other_fio", "run_io_record", "max_io_bytes",
]

#: File systems whose files live in memory: a run on one of them measures RAM and the page cache, not storage.
MEMORY_FSTYPES: tuple[str, ...] = ("tmpfs", "devtmpfs", "ramfs")

_PROJECT_DIR = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=4)
def git_revision(path: str | None = None) -> dict[str, Any] | None:
    """``{"rev": <sha>, "dirty": bool}`` of the git checkout at ``path``; ``None`` if not one.

    Parameters
    ----------
    path : str, optional
        Default: the directory holding the ``storagebench`` package.
    """
    where = path or str(_PROJECT_DIR)
    if not (Path(where) / ".git").exists():
        return None
    try:
        rev = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", where, "status", "--porcelain", "--untracked-files=no", "--", "storagebench"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"rev": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def unescape_mount(text: str) -> str:
    """A field of ``/proc/self/mountinfo`` or ``/proc/swaps`` as written: the kernel escapes blanks and
    backslashes as ``\\NNN`` (octal)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def mountinfo() -> list[dict[str, str]]:
    """The mounts of this process's namespace (``/proc/self/mountinfo``): ``devno`` (``major:minor``),
    ``mountpoint``, ``fstype``, ``source`` and ``options``, one dict per mount; empty when unreadable."""
    rows = []
    text = _read(Path("/proc/self/mountinfo")) or ""
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) < 5 or len(r) < 2:
            continue
        rows.append({"devno": f[2], "mountpoint": unescape_mount(f[4]), "fstype": r[0], "source": unescape_mount(r[1]),
                     "options": f[5] if len(f) > 5 else ""})
    return rows


def _existing(path: str) -> str:
    """``path`` or its nearest existing parent (a target fio has not created yet)."""
    p = os.path.abspath(path)
    while not os.path.exists(p) and p != os.path.dirname(p):
        p = os.path.dirname(p)
    return p


def filesystem_of(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The mount holding ``path`` (longest mount-point prefix of its real path).

    Returns
    -------
    dict or None
        ``fstype``, ``mountpoint``, ``source`` (e.g. ``/dev/vda``), ``devno``, ``options``.
    """
    real = os.path.realpath(_existing(os.fspath(path)))
    best = None
    for m in mountinfo():
        mp = m["mountpoint"]
        if real == mp or real.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) >= len(best["mountpoint"]):
                best = m
    return best


def sysfs_block_dir(major: int, minor: int, *, whole_disk: bool = False) -> Path:
    """The sysfs directory of block device ``major:minor`` (``/sys/dev/block/MAJ:MIN``, resolved).

    Parameters
    ----------
    major, minor : int
        Device number (``os.major(st.st_rdev)``, ``os.minor(st.st_rdev)``).
    whole_disk : bool
        For a partition, return its disk's directory instead (where ``queue/`` lives).

    Returns
    -------
    pathlib.Path
        May not exist when sysfs has no such device; callers check.
    """
    real = Path(os.path.realpath(f"/sys/dev/block/{major}:{minor}"))
    if whole_disk and (real / "partition").exists():
        return real.parent
    return real


def block_device_info(major: int, minor: int) -> DeviceInfo | None:
    """sysfs facts of block device ``major:minor``; ``None`` when sysfs has no such device.

    Returns
    -------
    DeviceInfo or None
        ``name``, ``path`` (``/dev/<name>``), ``devno``, ``partition_of`` (the whole disk when
        it is a partition), ``model`` (``None`` for loop, device-mapper, zram ... with
        ``model_note`` saying why), ``vendor``, ``rotational`` (bool), ``scheduler`` (the
        active one), ``size_bytes`` (bytes), ``logical_block_size_bytes`` (bytes),
        ``backing_file`` (loop).
    """
    real = sysfs_block_dir(major, minor)
    if not real.exists():
        return None
    name = real.name
    disk = sysfs_block_dir(major, minor, whole_disk=True)
    sectors = _read(real / "size")
    sched_text = _read(disk / "queue" / "scheduler")
    sched = None
    if sched_text:
        m = re.search(r"\[([^\]]+)\]", sched_text)
        sched = m.group(1) if m else sched_text.split()[0]
    rot = _read(disk / "queue" / "rotational")
    info: dict[str, Any] = {
        "name": name,
        "path": f"/dev/{name}",
        "devno": f"{major}:{minor}",
        "partition_of": disk.name if disk != real else None,
        "model": _read(disk / "device" / "model") or None,
        "vendor": _read(disk / "device" / "vendor") or None,
        "rotational": None if rot is None else rot == "1",
        "scheduler": sched,
        "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None,
        "logical_block_size_bytes": int(v) if (v := _read(disk / "queue" / "logical_block_size")) and v.isdigit()
        else None,
    }
    if info["model"] is None:
        kind = re.match(r"[a-z]+", disk.name)
        kind_name = kind.group(0) if kind else disk.name
        notes = {"loop": "loop device: no model (a file stands in for a disk)", "dm": "device-mapper: no model",
                 "md": "md RAID: no model", "zram": "zram: no model (compressed RAM)",
                 "nbd": "network block device: no model"}
        info["model_note"] = notes.get(kind_name, f"{disk.name}: sysfs has no device/model")
    info["backing_file"] = _read(disk / "loop" / "backing_file") or None
    return DeviceInfo(**info)


def _device_of(target: str, fs: dict[str, Any] | None) -> DeviceInfo | None:
    path = _existing(target)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISBLK(st.st_mode):
        return block_device_info(os.major(st.st_rdev), os.minor(st.st_rdev))
    info = block_device_info(os.major(st.st_dev), os.minor(st.st_dev))
    if info is not None:
        return info
    # btrfs and others report an anonymous st_dev (major 0): ask the mount's source device
    if fs is not None and fs.get("source", "").startswith("/dev/"):
        try:
            sst = os.stat(fs["source"])
        except OSError:
            return None
        if stat.S_ISBLK(sst.st_mode):
            return block_device_info(os.major(sst.st_rdev), os.minor(sst.st_rdev))
    return None


def device_behind(target: str | os.PathLike[str]) -> DeviceInfo | None:
    """The block device under ``target``: itself for a block device, its filesystem's device for a file.

    Parameters
    ----------
    target : str or path-like
        A block device, or a file (one fio has not created yet is looked up by its nearest existing
        parent).

    Returns
    -------
    DeviceInfo or None
        ``None`` when no block device is behind it (tmpfs, overlay without a block source ...).
    """
    real = os.path.realpath(_existing(os.fspath(target)))
    try:
        st = os.stat(real)
    except OSError:
        return None
    return _device_of(real, None if stat.S_ISBLK(st.st_mode) else filesystem_of(real))


def memory_note(target: str | os.PathLike[str], fstype: str | None) -> str | None:
    """The warning for a target on a file system in memory, or ``None``.

    Parameters
    ----------
    target : str or path-like
        fio ``filename`` as given (shown with :func:`storagebench.errors.shown`, control characters escaped).
    fstype : str or None
        Its file system type (:func:`filesystem_of`); ``None`` (a block device, or unknown) gives ``None``.

    Returns
    -------
    str or None
        e.g. ``"this measured memory: the target '/dev/shm/x' is a file on tmpfs, ..."``.
    """
    if fstype not in MEMORY_FSTYPES:
        return None
    return (f"this measured memory: the target {display_path(os.fspath(target))!r} is a file on {fstype}, which keeps its "
            "data in RAM, so its IOPS and latency are those of memory and the page cache, not of a storage device")


def collect_provenance(
    target: str | os.PathLike[str] | None,
    *,
    spec_hash: str | None = None,
    fio_bin: str = "fio",
    started_at: datetime | None = None,
) -> Provenance:
    """Facts about where and how a run is measured, known before it runs.

    Parameters
    ----------
    target : str, path-like or None
        fio ``filename`` of the run (file or block device; ``None`` for client/server runs
        whose target lives on the servers).
    spec_hash : str, optional
        :attr:`storagebench._study.Study.spec_hash`.
    fio_bin : str
        fio executable, asked for ``--version`` (:func:`storagebench.fio.process.fio_version`).
    started_at : datetime, optional
        Start time; default now (UTC).

    Returns
    -------
    Provenance
        ``fio_version``, ``kernel`` (``uname -r``), ``kernel_version`` (``uname -v``),
        ``hostname``, ``os``, ``cpu_model``, ``cpu_count``, ``python``,
        ``storagebench_version``, ``target``, ``target_realpath``, ``target_kind``
        (``file``/``block``/``missing``/...), ``device`` (:class:`~storagebench.records.DeviceInfo`
        from :func:`block_device_info`, or ``None`` with ``device_note``), ``filesystem``
        (:class:`~storagebench.records.FilesystemInfo`: ``fstype``, ``mountpoint``, ``source``;
        ``None`` for a raw block device), ``spec_hash``, ``git_rev``, ``git_dirty`` (``None``
        when not a git checkout), ``memory_note`` (a file on tmpfs, devtmpfs or ramfs:
        :func:`memory_note`), ``started_at`` (UTC, ISO 8601). What is known only after the
        run (``finished_at``, ``duration_s``, the safety and quiet-host records ...) the runner
        adds when it makes the run's one record (:meth:`~storagebench.records.Provenance.replace`).

    Raises
    ------
    FioNotFoundError, FioError
        fio is not installed or gives no version.
    """

    started = (started_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    uname = platform.uname()
    git = git_revision()
    host = dict(
        fio_version=fio_version(fio_bin), kernel=uname.release, kernel_version=uname.version,
        hostname=socket.gethostname(), os=f"{uname.system} {uname.machine}", cpu_model=_cpu_model(),
        cpu_count=os.cpu_count(), python=sys.version.split()[0], storagebench_version=__version__,
        spec_hash=spec_hash, git_rev=git["rev"] if git else None, git_dirty=git["dirty"] if git else None,
        started_at=started.isoformat().replace("+00:00", "Z"),
    )
    if target is None:
        return Provenance(**host, device_note="no local target (client/server run: the target is on the fio servers)")
    tgt = os.fspath(target)
    real = os.path.realpath(tgt)
    try:
        st = os.stat(real)
        kind = ("block" if stat.S_ISBLK(st.st_mode) else "file" if stat.S_ISREG(st.st_mode)
                else "directory" if stat.S_ISDIR(st.st_mode) else "char" if stat.S_ISCHR(st.st_mode) else "other")
    except OSError:
        kind = "missing"
    fs = None if kind == "block" else filesystem_of(real)
    dev = _device_of(real, fs)
    note = None
    memory = None if kind == "block" or fs is None else memory_note(tgt, fs["fstype"])
    if dev is None:
        note = f"no block device behind {tgt}" + (f" (filesystem {fs['fstype']} from {fs['source']})" if fs else "")
    return Provenance(
        **host, target=tgt, target_realpath=real, target_kind=kind, device=dev, device_note=note, memory_note=memory,
        filesystem=None if fs is None else FilesystemInfo(fstype=fs["fstype"], mountpoint=fs["mountpoint"],
                                                          source=fs["source"]),
    )


# ---------------------------------------------------------------------------------------------
# is the host quiet before a run?

#: A device is busy when, in the sample window, it completed more I/Os than this per second ...
QUIET_MAX_IOPS = 50.0
#: ... or moved more than this many bytes per second (reads + writes + discards) ...
QUIET_MAX_BYTES_PER_S = float(1 << 20)
#: ... or had more I/Os than this in flight at the end of the window.
QUIET_MAX_IN_FLIGHT = 0


def device_stat_path(target: str | os.PathLike[str]) -> tuple[str, Path] | None:
    """The block device that holds ``target`` and its I/O counters file.

    For a block device, itself; for a file (or a file fio will create), the device of its
    filesystem (the mount's source device when ``st_dev`` is anonymous, as on btrfs).

    Returns
    -------
    (str, Path) or None
        Device name (``vda``, ``loop3``, ``vda1``) and ``/sys/dev/block/MAJ:MIN/stat`` resolved
        (Linux ``Documentation/block/stat.rst``); ``None`` when no block device is behind
        ``target`` (tmpfs, overlay without a block source ...).
    """
    real = os.path.realpath(_existing(os.fspath(target)))
    try:
        st = os.stat(real)
    except OSError:
        return None
    key = (real, st.st_dev, st.st_rdev if stat.S_ISBLK(st.st_mode) else -1)
    return _device_stat_path(key)


@functools.lru_cache(maxsize=64)
def _device_stat_path(key: tuple[str, int, int]) -> tuple[str, Path] | None:
    real, _dev, rdev = key
    fs = None if rdev >= 0 else filesystem_of(real)
    info = _device_of(real, fs)
    if info is None or info.devno is None or info.name is None:
        return None
    major, minor = (int(x) for x in info.devno.split(":"))
    path = sysfs_block_dir(major, minor) / "stat"
    return (info.name, path) if path.exists() else None


def read_io_counters(path: str | os.PathLike[str], fd: int | None = None) -> dict[str, float] | None:
    """One reading of a block device's ``stat`` file (Linux ``Documentation/block/stat.rst``).

    ``fd``, when given, is the file opened once and read again from offset 0 (sysfs makes the text anew at
    each read from 0; a sampler's 3 us a reading rather than 10).

    Returns
    -------
    dict or None
        ``t_s`` (monotonic clock, s), ``ios`` (read + write + discard I/Os completed),
        ``sectors`` (512-byte sectors read + written + discarded), ``in_flight`` (I/Os in flight),
        ``io_ticks_ms`` (ms the device had I/O in flight); ``None`` when it cannot be read.
    """
    try:
        if fd is not None:
            f = [int(x) for x in os.pread(fd, 4096, 0).split()]
        else:
            with open(path, "rb") as fh:
                f = [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return None
    if len(f) < 11:
        return None
    disc_ios, disc_sectors = (f[11], f[13]) if len(f) >= 15 else (0, 0)
    return {"t_s": time.monotonic(), "ios": f[0] + f[4] + disc_ios, "sectors": f[2] + f[6] + disc_sectors,
            "in_flight": f[8], "io_ticks_ms": f[9]}


class QuietProbe:
    """Is the host quiet before a run? Another fio, or I/O on the target's device.

    :meth:`__init__` takes the first reading of the device's counters; :meth:`finish`, called
    just before fio starts, waits until ``window_s`` of observed time has passed, takes the last
    reading and lists the fio processes on this host that are not this process's runs
    (:func:`storagebench.fio.process.other_fio_processes`; while the window still has time to wait,
    the list is made during that wait, in a helper thread, so its cost hides in the window). Whatever the caller does in between
    (the job file, the safety check) is inside the window, so the window costs only what it
    exceeds that.

    The window may be paused (:meth:`pause`, :meth:`resume`) while storagebench itself writes to
    the device (the fsyncs that commit a run): the time and the I/O of a pause are not counted, so
    they neither lengthen the window nor make the host look busy -- unless the device did nothing at
    all in the pause (no I/O completed, none in flight at either end: the results are on another
    device), whose time then counts as quiet window time. The runner opens the next run's
    probe when the previous run's fio exits and pauses it around that run's commit
    (:mod:`storagebench._runone`): the window then covers the time between the two fio runs except
    storagebench's own fsyncs, and waits only for what that falls short of ``window_s``.

    The previous run's fio life is watched too: when its I/O can be told apart from others' (direct I/O on
    files that exist, no other run of ours at the same time: ``_runone._attribution_problem``), the device's
    I/O beyond fio's own (:func:`run_io_record`) is others' I/O in that time, and :meth:`credit` counts that
    time and that I/O into the window -- so in a sweep of such runs the window is full before the next run
    and nothing is waited for, while any other I/O on the device, during a run or between runs, still makes
    the window busy.

    Parameters
    ----------
    target : str, path-like or None
        The run's fio ``filename`` (its device is sampled); ``None``: no device (client/server).
    """

    def __init__(self, target: str | os.PathLike[str] | None):
        self.target = None if target is None else os.fspath(target)
        self.device = None if target is None else device_stat_path(target)
        self.before = None if self.device is None else read_io_counters(self.device[1])
        self.t0 = time.monotonic()
        self.in_flight_start = None if self.before is None else int(self.before["in_flight"])
        self._seen = {"s": 0.0, "ios": 0.0, "sectors": 0.0, "ticks_ms": 0.0, "readable": self.before is not None}
        self._paused_at: float | None = None
        self._pause_reading: dict[str, float] | None = None
        self.paused_s = 0.0
        self.credited_s = 0.0
        self.last: dict[str, float] | None = None  # the reading :meth:`finish` ended the window with

    def same_device(self, target: str | os.PathLike[str] | None) -> bool:
        """Whether ``target`` is on the device this probe samples (so the probe can serve its run)."""
        return target is not None and self.device is not None and device_stat_path(target) == self.device

    def _close_segment(self) -> dict[str, float] | None:
        now = time.monotonic()
        after = None if self.device is None else read_io_counters(self.device[1])
        self._seen["s"] += now - self.t0
        if self.before is not None and after is not None:
            for key, field in (("ios", "ios"), ("sectors", "sectors"), ("ticks_ms", "io_ticks_ms")):
                self._seen[key] += after[field] - self.before[field]
        elif self.device is not None:
            self._seen["readable"] = False
        return after

    def pause(self) -> None:
        """Stop counting time and I/O (storagebench's own writes follow) until :meth:`resume`.

        A pause in which the device completed no I/O and had none in flight (the writes went to another
        device, or had nothing to write) is a quiet observation like any other: :meth:`resume` then
        counts its time as window time after all."""
        if self._paused_at is None:
            self._pause_reading = self._close_segment()
            self._paused_at = time.monotonic()

    def paused_for(self) -> float:
        """How long the probe has been paused, s (0 when it is counting)."""
        return 0.0 if self._paused_at is None else time.monotonic() - self._paused_at

    def resume(self) -> None:
        """Count again from now (a new reading of the counters)."""
        if self._paused_at is not None:
            now = time.monotonic()
            start = self._pause_reading
            self.before = None if self.device is None else read_io_counters(self.device[1])
            if (start is not None and self.before is not None and self.before["ios"] == start["ios"]
                    and self.before["in_flight"] == 0 and start["in_flight"] == 0):
                self._seen["s"] += now - self._paused_at  # nothing happened on the device: quiet time
            else:
                self.paused_s += now - self._paused_at
            self._paused_at = None
            self.t0 = time.monotonic()

    def credit(self, observed_s: float, ios: float, nbytes: float) -> None:
        """Count time in which the device was watched while this sweep's own fio ran as window time.

        Parameters
        ----------
        observed_s : float
            The run's fio life, s (from the reading before fio started to the one at its exit).
        ios, nbytes : float
            The I/Os and bytes of others found in it: the device's beyond fio's own
            (:func:`run_io_record`, ``excess_ios``, ``excess_bytes``; negative values count as 0).

        Only a run whose I/O could be told apart from others' (:func:`run_io_record` ``attributed``) may be
        credited; the window's rates (``iops``, ``bytes_per_s``) are then over the credited time and the
        time watched since, and ``busy_pct`` over the time watched since only.
        """
        self._seen["s"] += observed_s
        self._seen["ios"] += max(0.0, ios)
        self._seen["sectors"] += max(0.0, nbytes) / 512.0
        self.credited_s += observed_s

    def finish(self, window_s: float = 0.05, *, defer_scan: bool = False) -> dict[str, Any]:
        """Last reading and verdict.

        Parameters
        ----------
        window_s : float
            Shortest sample window, s: observed time, pauses excluded (credited time included: :meth:`credit`).
        defer_scan : bool
            When the window has no time left to wait, leave the scan for other fio processes (4 ms on a host
            with 100 processes) to the caller, who makes it as fio starts, off the critical path, and adds it
            with :func:`add_other_fio` (``other_fio`` is ``None`` until then).

        Returns
        -------
        dict
            The ``quiet_host`` record of ``provenance.json``: ``quiet`` (bool), ``reasons`` (list of
            str), ``window_s`` (s observed), ``carried_s`` (s of it credited from the previous run's fio life,
            :meth:`credit`), ``paused_s`` (s of storagebench's own fsyncs left out of
            the window), ``other_fio`` (``pid``, ``pgid``, ``state``, ``cmdline`` of each
            other fio process), ``other_fio_at`` (when they were looked for: ``"before fio"`` or
            ``"as fio started"``), ``device`` (``name``, ``stat_path``, ``ios``, ``bytes``, ``iops``
            (1/s), ``bytes_per_s``, ``in_flight_start``, ``in_flight_end``, ``busy_pct`` (% of the
            window with I/O in flight)) or ``None`` with ``device_note``, ``thresholds``
            (``max_iops``, ``max_bytes_per_s``, ``max_in_flight``), ``check_cost_s`` (s spent reading
            /proc and sysfs after the window's wait: the scan of /proc made during the wait is not counted).
        """
        self.resume()
        left = window_s - (self._seen["s"] + time.monotonic() - self.t0)
        c0 = time.perf_counter()
        others: list[Any] | None
        if left > 0:  # the /proc scan for other fio runs in the window's remaining wait, not after it
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-quiet") as scan:
                found = scan.submit(other_fio_processes)
                time.sleep(left)
                others = found.result()
            c0 = time.perf_counter()
        else:
            others = None if defer_scan else other_fio_processes()
        after = self._close_segment()
        self.last = after
        rec: dict[str, Any] = {"quiet": True, "reasons": [], "window_s": None, "carried_s": round(self.credited_s, 6),
                               "other_fio": [], "other_fio_at": "before fio", "device": None,
                               "paused_s": round(self.paused_s, 6),
                               "thresholds": {"max_iops": QUIET_MAX_IOPS, "max_bytes_per_s": QUIET_MAX_BYTES_PER_S,
                                              "max_in_flight": QUIET_MAX_IN_FLIGHT}}
        if self._seen["readable"] and after is not None:
            self._device_verdict(rec, after)
        else:
            rec["device_note"] = ("no local target (client/server run)" if self.target is None
                                  else f"no block device behind {self.target} (tmpfs, overlay ...)"
                                  if self.device is None else f"cannot read {self.device[1]}")
        if others is None:
            rec.update(other_fio=None, other_fio_at="as fio started")
        else:
            add_other_fio(rec, others)
        rec["quiet"] = not rec["reasons"]
        rec["check_cost_s"] = round(time.perf_counter() - c0, 6)
        return rec

    def _device_verdict(self, rec: dict[str, Any], after: dict[str, float]) -> None:
        """The ``device`` part of :meth:`finish`'s record, and its reason when the device was busy."""
        seen = self._seen
        dt = max(seen["s"], 1e-9)
        watched = max(dt - self.credited_s, 1e-9)
        ios = int(seen["ios"])
        nbytes = int(seen["sectors"]) * 512
        dev = {"name": self.device[0], "stat_path": str(self.device[1]), "ios": ios, "bytes": nbytes,
               "iops": round(ios / dt, 1), "bytes_per_s": round(nbytes / dt, 1),
               "in_flight_start": self.in_flight_start, "in_flight_end": int(after["in_flight"]),
               "busy_pct": round(min(100.0, 100.0 * seen["ticks_ms"] / (watched * 1000.0)), 1)}
        rec["device"] = dev
        rec["window_s"] = round(dt, 6)
        if (dev["iops"] > QUIET_MAX_IOPS or dev["bytes_per_s"] > QUIET_MAX_BYTES_PER_S
                or dev["in_flight_end"] > QUIET_MAX_IN_FLIGHT):
            rec["reasons"].append(f"device {dev['name']}: {ios} I/Os and {nbytes} bytes in {dt:.3f} s "
                                  f"({dev['iops']:g} IOPS, {dev['bytes_per_s'] / 1048576:.2f} MiB/s), "
                                  f"{dev['in_flight_end']} in flight, busy {dev['busy_pct']:g} %")


def add_other_fio(rec: dict[str, Any], others: list[Any]) -> dict[str, Any]:
    """Put the fio processes found running (:func:`storagebench.fio.process.other_fio_processes`) into a
    ``quiet_host`` record (:meth:`QuietProbe.finish`): ``other_fio``, a reason when there are any, ``quiet``.
    Returns ``rec``, changed in place."""
    rec["other_fio"] = [{k: v for k, v in p.to_json().items() if k in ("pid", "pgid", "state", "cmdline")}
                        for p in others]
    if others:
        rec["reasons"].insert(0, f"{len(others)} other fio process(es) running: "
                              + ", ".join(f"pid {p.pid} ({' '.join(p.argv)[:80]})" for p in others[:3]))
    rec["quiet"] = not rec["reasons"]
    return rec


@functools.lru_cache(maxsize=64)
def max_io_bytes(stat_path: str) -> int | None:
    """The largest request the block layer sends the device whose ``stat`` file is ``stat_path``, bytes
    (``queue/max_sectors_kb``, of the whole disk for a partition; Linux ``Documentation/block/queue-sysfs.rst``):
    a larger I/O of fio's reaches the device as several. ``None`` when sysfs does not say."""
    base = Path(stat_path).parent
    for queue in (base / "queue", base.parent / "queue"):
        text = _read(queue / "max_sectors_kb")
        if text and text.isdigit() and int(text) > 0:
            return int(text) * 1024
    return None


def run_io_record(before: dict[str, float], after: dict[str, float], fio_io: tuple[tuple[int, int], ...],
                  device: tuple[str, Path], tolerance: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """Others' I/O on the target's device while a run's fio ran: the device's I/O beyond fio's own.

    fio counts each I/O it completed and the bytes it moved in its measured window (``total_ios``,
    ``io_bytes``; fio resets them when ``ramp_time`` ends, so a ramped run's ``before`` is the reading at the
    ramp's end, :func:`storagebench._runwatch.ramp_io_record`); with direct I/O on files that exist (no layout), each reaches the device as one request,
    or several when larger than ``queue/max_sectors_kb`` (:func:`max_io_bytes`), so what the device did beyond
    that is others' I/O -- plus a few I/Os of storagebench's own (it fsyncs the run's job file while fio
    starts), far below the thresholds. The caller decides whether the run's I/O can be told apart so
    (``_runone._attribution_problem``).

    Parameters
    ----------
    before, after : dict
        :func:`read_io_counters` readings just before fio started and at its exit.
    fio_io : tuple of (int, int)
        ``(total_ios, io_bytes)`` per data direction (:attr:`storagebench._runfio.FioRun.io_counts`).
    device : (str, Path)
        Device name and stat path (:func:`device_stat_path`).
    tolerance : (int, int)
        How many I/Os and bytes of the device's the readings may hold or miss by when they were taken (a ramped
        run's ``before`` is known only to the samples around its ramp's end): the run is called busy only when
        its excess is beyond them.

    Returns
    -------
    dict
        ``attributed`` (True), ``quiet`` (bool), ``window_s`` (s of fio's life watched), ``device_ios``,
        ``device_bytes``, ``fio_ios`` (the device requests fio's I/O makes), ``fio_bytes``, ``excess_ios``,
        ``excess_bytes`` (the rest: others'; may be negative when the block layer merged fio's requests),
        ``excess_iops`` (1/s), ``excess_bytes_per_s``, ``tolerance_ios``, ``tolerance_bytes``, ``reason`` (when
        not quiet: the excess less the tolerance is beyond the thresholds of the window before the run,
        :data:`QUIET_MAX_IOPS`, :data:`QUIET_MAX_BYTES_PER_S`).
    """
    dt = max(after["t_s"] - before["t_s"], 1e-9)
    largest = max_io_bytes(str(device[1]))
    fio_ios = sum(ios * (max(1, -(-(nbytes // ios) // largest)) if ios and largest else 1) for ios, nbytes in fio_io)
    fio_bytes = sum(nbytes for _ios, nbytes in fio_io)
    dev_ios, dev_bytes = int(after["ios"] - before["ios"]), int(after["sectors"] - before["sectors"]) * 512
    extra_ios, extra_bytes = dev_ios - fio_ios, dev_bytes - fio_bytes
    rec: dict[str, Any] = {
        "attributed": True, "quiet": True, "window_s": round(dt, 6), "device_ios": dev_ios, "device_bytes": dev_bytes,
        "fio_ios": fio_ios, "fio_bytes": fio_bytes, "excess_ios": extra_ios, "excess_bytes": extra_bytes,
        "excess_iops": round(max(0, extra_ios) / dt, 1), "excess_bytes_per_s": round(max(0, extra_bytes) / dt, 1),
        "tolerance_ios": int(tolerance[0]), "tolerance_bytes": int(tolerance[1])}
    if (extra_ios - tolerance[0]) / dt > QUIET_MAX_IOPS or (extra_bytes - tolerance[1]) / dt > QUIET_MAX_BYTES_PER_S:
        rec["quiet"] = False
        within = f", +/- {tolerance[0]} I/Os and {tolerance[1]} bytes" if any(tolerance) else ""
        rec["reason"] = (f"during the run, device {device[0]}: {max(0, extra_ios)} I/Os and {max(0, extra_bytes)} "
                         f"bytes beyond fio's own in {dt:.3f} s ({rec['excess_iops']:g} IOPS, "
                         f"{rec['excess_bytes_per_s'] / 1048576:.2f} MiB/s{within})")
    return rec

"""Host-changing steps run between fio runs: drop the page cache, set the I/O scheduler.

Each step is an object with ``show()`` (the state now, changes nothing), ``apply()`` (makes the
change, returns what it did) and ``to_dict()`` (the record kept in a run's provenance). Each is
tested for its *effect*: pages really leave the page cache, sysfs really shows the scheduler.

Page-cache residency is measured with ``mincore(2)`` over a read-only ``mmap`` of the file
(the same call util-linux ``fincore`` makes): :func:`resident_bytes`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import re
import stat as _stat
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import HostError
from .hostinfo import sysfs_block_dir

__all__ = ["DropPageCache", "DropFileCache", "SetScheduler", "resident_bytes", "meminfo_bytes"]

_DROP_CACHES = "/proc/sys/vm/drop_caches"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


_libc = None


def _libc_handle():
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_long]
        lib.mmap.restype = ctypes.c_void_p
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.munmap.restype = ctypes.c_int
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        lib.mincore.restype = ctypes.c_int
        _libc = lib
    return _libc


def resident_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of a file that are in the page cache now.

    Parameters
    ----------
    path : path
        A regular file.

    Returns
    -------
    int
        Resident pages x page size (bytes), as ``fincore``'s ``RES`` column; capped at the file size.

    Raises
    ------
    HostError
        The file cannot be opened or ``mincore(2)`` fails.

    Notes
    -----
    Method: ``mmap(2)`` (``PROT_READ``, ``MAP_SHARED``) + ``mincore(2)``; mapping does not read the file,
    so the measurement does not change what it measures.
    """
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise HostError(f"resident_bytes: cannot open {path!r}: {exc.strerror}") from exc
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        page = mmap.PAGESIZE
        npages = (size + page - 1) // page
        libc = _libc_handle()
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise HostError(f"resident_bytes: mmap failed on {path!r}: {os.strerror(err)}")
        try:
            buf = (ctypes.c_ubyte * npages)()
            if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), buf) != 0:
                err = ctypes.get_errno()
                raise HostError(f"resident_bytes: mincore failed on {path!r}: {os.strerror(err)}")
            resident = sum(1 for b in buf if b & 1)
        finally:
            libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))
        return min(resident * page, size)
    finally:
        os.close(fd)


def meminfo_bytes(field: str = "Cached") -> int:
    """A ``/proc/meminfo`` field in bytes (``Cached``, ``Dirty``, ``MemFree`` ...).

    Raises
    ------
    HostError
        The field is not in ``/proc/meminfo``.
    """
    text = Path("/proc/meminfo").read_text()
    m = re.search(rf"^{re.escape(field)}:\s+(\d+)\s*kB", text, re.MULTILINE)
    if m is None:
        raise HostError(f"meminfo field {field!r} is not in /proc/meminfo")
    return int(m.group(1)) * 1024


class DropPageCache:
    """``sync`` then write ``level`` to ``/proc/sys/vm/drop_caches`` (Linux ``Documentation/admin-guide/sysctl/vm.rst``).

    Parameters
    ----------
    level : {1, 2, 3}
        1 = page cache, 2 = dentries and inodes, 3 = both.

    Notes
    -----
    Drops clean pages only; the ``sync`` first makes dirty pages clean. It affects the whole
    host (every process's cache), which is the point before a cold-cache read run.
    """

    name = "drop_page_cache"

    def __init__(self, level: int = 3):
        if level not in (1, 2, 3):
            raise HostError(f"level must be one of [1, 2, 3], got {level!r}")
        self.level = level
        self._record: dict[str, Any] = {}

    def show(self) -> dict[str, Any]:
        """Page-cache state now: ``{"cached_bytes", "dirty_bytes", "writable"}``."""
        return {
            "cached_bytes": meminfo_bytes("Cached"),
            "dirty_bytes": meminfo_bytes("Dirty"),
            "writable": os.access(_DROP_CACHES, os.W_OK),
        }

    def apply(self) -> dict[str, Any]:
        """Sync and drop; return the record (also kept for :meth:`to_dict`).

        Raises
        ------
        HostError
            ``/proc/sys/vm/drop_caches`` cannot be written (not root, read-only /proc in a container).
        """
        before = meminfo_bytes("Cached")
        t0 = time.monotonic()
        os.sync()
        try:
            with open(_DROP_CACHES, "w") as fh:
                fh.write(str(self.level))
        except OSError as exc:
            raise HostError(
                f"cannot drop the page cache: writing {self.level} to {_DROP_CACHES} failed "
                f"({exc.strerror}); it needs root and a writable /proc/sys"
            ) from exc
        self._record = {
            "step": self.name, "level": self.level, "applied_at": _now(),
            "cached_before_bytes": before, "cached_after_bytes": meminfo_bytes("Cached"),
            "duration_s": round(time.monotonic() - t0, 3),
        }
        return dict(self._record)

    def to_dict(self) -> dict[str, Any]:
        """Provenance record: the step, its parameters and, once applied, what it did."""
        return {"step": self.name, "level": self.level, **self._record}

    def __repr__(self) -> str:
        return f"DropPageCache(level={self.level})"


class DropFileCache:
    """Evict given files from the page cache: ``fdatasync`` + ``posix_fadvise(POSIX_FADV_DONTNEED)``.

    Unlike :class:`DropPageCache` it touches only these files, so other processes' caches stay.

    Parameters
    ----------
    paths : sequence of path
        Regular files (a block device works too: its page cache is dropped).
    """

    name = "drop_file_cache"

    def __init__(self, paths: Sequence[str | os.PathLike[str]]):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.paths = [os.fspath(p) for p in paths]
        if not self.paths:
            raise HostError("DropFileCache needs at least one path, got none")
        self._record: dict[str, Any] = {}

    def show(self) -> dict[str, int]:
        """Resident bytes of each regular file (``{path: bytes}``)."""
        return {p: resident_bytes(p) for p in self.paths if os.path.isfile(p)}

    def apply(self) -> dict[str, Any]:
        """Evict; return ``{"step", "applied_at", "resident_before_bytes", "resident_after_bytes"}``.

        Raises
        ------
        HostError
            A path cannot be opened.
        """
        before = self.show()
        for p in self.paths:
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError as exc:
                raise HostError(f"DropFileCache: cannot open {p!r}: {exc.strerror}") from exc
            try:
                try:
                    os.fdatasync(fd)
                except OSError:
                    pass  # read-only file systems: nothing dirty to write
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        self._record = {"applied_at": _now(), "resident_before_bytes": before,
                        "resident_after_bytes": self.show()}
        return {"step": self.name, **self._record}

    def to_dict(self) -> dict[str, Any]:
        """Provenance record."""
        return {"step": self.name, "paths": list(self.paths), **self._record}


def _queue_dir(device: str) -> Path:
    """``/sys/block/<disk>/queue`` of a device node (a partition maps to its disk)."""
    real = os.path.realpath(device)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise HostError(f"SetScheduler: cannot stat {device!r}: {exc.strerror}") from exc
    if not _stat.S_ISBLK(st.st_mode):
        raise HostError(f"SetScheduler: {device!r} is not a block device")
    sysdir = sysfs_block_dir(os.major(st.st_rdev), os.minor(st.st_rdev), whole_disk=True)
    q = sysdir / "queue" / "scheduler"
    if not q.exists():
        raise HostError(f"SetScheduler: {device!r} has no I/O scheduler ({q} is missing)")
    return sysdir / "queue"


def _parse_scheduler(text: str) -> tuple[str, list[str]]:
    names = text.replace("[", " ").replace("]", " ").split()
    m = re.search(r"\[([^\]]+)\]", text)
    current = m.group(1) if m else (names[0] if len(names) == 1 else "")
    return current, names


class SetScheduler:
    """Set a block device's I/O scheduler (``/sys/block/<dev>/queue/scheduler``); restorable.

    Parameters
    ----------
    device : str
        Block device node (``/dev/loop3``; a partition maps to its disk).
    name : str
        One of the schedulers the kernel lists for it (``none``, ``mq-deadline``, ``kyber``, ``bfq``).

    Examples
    --------
    >>> with SetScheduler("/dev/loop3", "mq-deadline"):  # doctest: +SKIP
    ...     run_fio()  # restored to the previous scheduler afterwards
    """

    step = "set_scheduler"

    def __init__(self, device: str, name: str):
        self.device = os.fspath(device)
        self.name = str(name)
        self._queue = _queue_dir(self.device)
        _, available = self.show_parsed()
        if self.name not in available:
            raise HostError(f"scheduler for {self.device} must be one of {available}, got {self.name!r}")
        self.previous: str | None = None
        self._record: dict[str, Any] = {}

    def show_parsed(self) -> tuple[str, list[str]]:
        """``(current, available)`` from sysfs."""
        return _parse_scheduler((self._queue / "scheduler").read_text())

    def show(self) -> dict[str, Any]:
        """``{"device", "current", "available"}`` now."""
        current, available = self.show_parsed()
        return {"device": self.device, "current": current, "available": available}

    def apply(self) -> dict[str, Any]:
        """Write the scheduler and read it back.

        Raises
        ------
        HostError
            The write fails or sysfs does not show the new scheduler afterwards.
        """
        self.previous, _ = self.show_parsed()
        self._write(self.name)
        self._record = {"previous": self.previous, "applied_at": _now(), "current": self.show_parsed()[0]}
        return {"step": self.step, "device": self.device, "name": self.name, **self._record}

    def restore(self) -> None:
        """Put back the scheduler that was set before :meth:`apply`."""
        if self.previous is not None:
            self._write(self.previous)
            self._record["restored_at"] = _now()

    def _write(self, name: str) -> None:
        path = self._queue / "scheduler"
        try:
            path.write_text(name)
        except OSError as exc:
            raise HostError(f"cannot set scheduler {name!r} on {self.device}: {exc.strerror}") from exc
        current, _ = self.show_parsed()
        if current != name:
            raise HostError(f"scheduler of {self.device} is {current!r} after writing {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """Provenance record."""
        return {"step": self.step, "device": self.device, "name": self.name, **self._record}

    def __enter__(self) -> SetScheduler:
        self.apply()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def __repr__(self) -> str:
        return f"SetScheduler({self.device!r}, {self.name!r})"

"""The results tree's file primitives: atomic writes with fsync, the sweep lock (flock on ``.sweep.lock``)
and its holder (part of :mod:`storagebench._store`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Union

from ._recorded import (
    RecordRefusedError,
)
from .errors import ResultsBusyError

FileContent = Union[str, bytes, Path]


def utc_stamp() -> str:
    """UTC time as ``20261122T054610.123456Z`` (sortable, safe in a path)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, content: FileContent) -> None:
    if isinstance(content, Path):
        if content.resolve() != path.resolve():
            shutil.copyfile(content, path, follow_symlinks=True)
        return
    data = content.encode() if isinstance(content, str) else content
    # never through a symlink planted at the name (a copied tree may hold one at a temp file's name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with open(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _publishable(staging: Path) -> None:
    """A measured run's directory as it is kept: 0755, its files without group or world write (fio and the
    runner create them under whatever umask the user has)."""
    for f in staging.iterdir():
        st = f.lstat()
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o022:
            os.chmod(f, stat.S_IMODE(st.st_mode) & ~0o022)
    os.chmod(staging, 0o755)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (``kill(pid, 0)``; one owned by another user counts as alive).

    The one liveness rule of stale staging directories, sweep locks and testbeds.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StudyLock:
    """An exclusive ``flock`` on ``<root>/.sweep.lock``, held by one sweep (see :meth:`StudyStore.lock`).

    The kernel releases it when the holder exits, however it exits, so a killed sweep never
    leaves a stale lock. The file holds the holder's pid, host and start time (JSON) for the
    message another sweep gets.
    """

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> StudyLock:
        """Take the lock (without waiting).

        Raises
        ------
        ResultsBusyError
            Another process holds it; the message names its pid.
        OSError
            The lock file cannot be created (read-only, full ...).
        """
        # O_NOFOLLOW: the lock file is truncated and written below, never through a planted symlink
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid not in (0, os.geteuid()):
                raise RecordRefusedError(
                    f"lock file {self.path} was not used: it is not a regular file of yours with one link; "
                    "remove it if no sweep runs", path=str(self.path), reason="not a regular file of yours")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            pid = holder.get("pid")
            who = (f"pid {pid}" + (f" on {holder['host']}" if holder.get("host") else "")
                   + (f", since {holder['since']}" if holder.get("since") else "")) if pid else "another process"
            stop = f", stop it (kill {pid})" if pid else ""
            raise ResultsBusyError(
                f"{self.path.parent} is being measured by another storagebench run ({who}): two sweeps on one "
                f"--out would measure the same points at the same time and disturb each other; wait for it to "
                f"finish{stop}, or pass another --out", path=str(self.path), pid=pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": utc_stamp()}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except OSError:
            pass  # the lock holds without the note (a full disk): the message then names no pid
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (the file stays; it is empty of meaning without the flock)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the open file releases the flock
            self._fd = None

    def __enter__(self) -> StudyLock:
        return self if self.held else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _flock_held(st: os.stat_result) -> bool | None:
    """Whether a ``flock`` is held on the file of ``st`` (``/proc/locks``); ``None`` when that cannot be read."""
    try:
        with open("/proc/locks", "rb") as fh:
            text = fh.read(1 << 22).decode("ascii", "replace")
    except OSError:
        return None
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in text.splitlines():
        fields = line.split()
        if "->" not in fields and "FLOCK" in fields and want in fields:
            return True
    return False


def _lock_holder(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    pid = data.get("pid")
    return {**data, "pid": pid if isinstance(pid, int) and not isinstance(pid, bool) else None}

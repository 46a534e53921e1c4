"""fio on this host: its binary (``PATH``) and its processes (``/proc``), and stopping every process of a run.

Part of :mod:`storagebench.fio.process`, which re-exports its public names (see that module's doc for what a
fio run is made of and the guards around it). The processes of a run are the live processes whose ``argv[0]``
is fio's and whose argv holds the run's *marker* (:func:`run_processes`); nothing else is ever signalled.

This module imports nothing from storagebench but :mod:`storagebench.errors`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from ..errors import FioError, FioNotFoundError

#: What to install when fio is missing.
INSTALL_HINT = ("install it: 'apt-get install fio' on Debian/Ubuntu, 'dnf install fio' on Fedora, or run "
                "'make test' / 'make demo' as root, which installs it")
#: Seconds :meth:`FioProcess.stop` waits for the last process of a run to disappear after SIGKILL
#: (a process in uninterruptible I/O dies when that I/O completes).
GONE_WITHIN_S = 30.0


# ---------------------------------------------------------------------------------------------
# find fio, its version


def find_fio(fio_bin: str = "fio") -> str:
    """Absolute path of the fio executable.

    Parameters
    ----------
    fio_bin : str
        A name looked up on ``PATH`` or a path.

    Returns
    -------
    str

    Raises
    ------
    FioNotFoundError
        Not installed, or not executable, with what to install.
    """
    path = shutil.which(fio_bin)
    if path is None:
        raise FioNotFoundError(f"fio executable not found: {fio_bin!r} ({INSTALL_HINT})")
    return os.path.abspath(path)


@functools.lru_cache(maxsize=8)
def _version_of(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FioError(f"{exe} --version failed: {exc}") from None
    text = out.stdout.strip()
    if out.returncode != 0 or not text.startswith("fio-"):
        raise FioError(f"{exe} --version gave no fio version (exit status {out.returncode}): "
                       f"{(text or out.stderr.strip())[:200]!r}", returncode=out.returncode, stderr=out.stderr)
    return text.splitlines()[0]


def fio_version(fio_bin: str = "fio") -> str:
    """fio's version as ``fio --version`` prints it, e.g. ``"fio-3.33"`` (cached per executable).

    Parameters
    ----------
    fio_bin : str
        A name looked up on ``PATH`` or a path.

    Returns
    -------
    str

    Raises
    ------
    FioNotFoundError
        fio is not installed.
    FioError
        fio cannot be run, or printed no ``fio-`` version.
    """
    return _version_of(find_fio(fio_bin))


# ---------------------------------------------------------------------------------------------
# /proc


@dataclass(frozen=True)
class ProcInfo:
    """One process as ``/proc`` shows it.

    Attributes
    ----------
    pid, ppid, pgid, sid : int
        Process, parent, process group and session ids.
    state : str
        ``R``, ``S``, ``D`` (uninterruptible I/O) ... (``proc(5)``, ``/proc/PID/stat`` field 3).
    argv : tuple of str
        ``/proc/PID/cmdline``.
    """

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    argv: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``pid``, ``ppid``, ``pgid``, ``sid``, ``state``, ``cmdline`` (argv joined by spaces, at most 300 characters)."""
        return {"pid": self.pid, "ppid": self.ppid, "pgid": self.pgid, "sid": self.sid, "state": self.state,
                "cmdline": " ".join(self.argv)[:300]}


def _stat(pid: str) -> tuple[str, str, int, int, int] | None:
    """``(comm, state, ppid, pgrp, session)`` of ``/proc/PID/stat``; ``None`` when it is gone.

    Read with ``os.open``/``os.read`` rather than a buffered file object: a third of the cost, and every scan of
    ``/proc`` (:func:`fio_procs`: the quiet-host check, the end of each run) reads this file of every process."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    close = text.rfind(b")")
    comm = text[text.find(b"(") + 1:close].decode(errors="replace")
    f = text[close + 2:].split()
    try:
        return comm, f[0].decode(), int(f[1]), int(f[2]), int(f[3])
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int | str) -> int | None:
    """When process ``pid`` started: ``/proc/PID/stat`` field 22, clock ticks since boot (``None``: gone).

    With the boot id (:func:`storagebench._recorded.boot_id`) it names one process for good: a pid is
    reused, a (boot, pid, start time) is not.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
    f = text[text.rfind(b")") + 2:].split()
    try:
        return int(f[19])  # field 22 of proc(5); f[0] is field 3 (state)
    except (IndexError, ValueError):
        return None


def exe_identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of an executable (``/proc/PID/exe`` works: it is followed to the binary, even a
    deleted one); ``None`` when it cannot be read (gone, or another user's process without root)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def proc_uid(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid  # the process's effective uid
    except OSError:
        return None


def argv_of(pid: str) -> tuple[str, ...]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return ()
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts = parts[:-1]
    return tuple(p.decode(errors="surrogateescape") for p in parts)


def fio_procs(exe_name: str | None = None) -> list[ProcInfo]:
    """Live (not zombie) processes whose ``argv[0]`` is named ``exe_name`` (default: any name starting with ``fio``)."""
    me = os.getpid()
    out = []
    for entry in os.scandir("/proc"):
        name = entry.name
        if not name.isdigit() or int(name) == me:
            continue
        st = _stat(name)
        if st is None:
            continue
        comm, state, ppid, pgrp, sid = st
        # comm is argv[0]'s name cut to 15 characters: a cheap filter before reading cmdline
        if state in ("Z", "X") or not (comm.startswith("fio") if exe_name is None else exe_name.startswith(comm)):
            continue
        argv = argv_of(name)
        if not argv:
            continue
        base = os.path.basename(argv[0])
        if (base.startswith("fio") if exe_name is None else base == exe_name):
            out.append(ProcInfo(int(name), ppid, pgrp, sid, state, argv))
    return out


def _alive(pid: int) -> bool:
    """Some thread of ``pid`` has not exited yet.

    A zombie thread-group leader can outlive nothing in ``/proc/PID/stat`` while its other
    threads still exit and still hold its files (its listening socket, its open target): the
    leader shows ``Z`` and an empty cmdline until the last thread is gone
    (``proc(5)``, ``/proc/PID/task``).
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        if text[text.rfind(b")") + 2:text.rfind(b")") + 3] not in (b"Z", b"X"):
            return True
    return False


def run_processes(marker: str, exe_name: str = "fio", exe_id: tuple[int, int] | None = None) -> list[ProcInfo]:
    """The live processes of one fio run: ``argv[0]`` named ``exe_name`` and ``marker`` one of its arguments.

    Parameters
    ----------
    marker : str
        An argument unique to the run (its job file's path, ``--output=PATH``, ``--server=ADDR``).
    exe_name : str
        Name of fio's executable (``os.path.basename`` of its path).
    exe_id : (int, int), optional
        :func:`exe_identity` of fio's binary: a process whose ``/proc/PID/exe`` is another program
        (a symlink named ``fio``, an interpreter) is not the run's.

    Returns
    -------
    list of ProcInfo
        fio's main process and its workers (zombies excluded).
    """
    return [p for p in fio_procs(exe_name) if marker in p.argv
            and (exe_id is None or exe_identity(f"/proc/{p.pid}/exe") == exe_id)]


def stop_processes(marker: str, exe_name: str = "fio", *, root_pid: int | None = None, grace_s: float = 0.0,
                   gone_within_s: float = GONE_WITHIN_S, exe_id: tuple[int, int] | None = None) -> list[int]:
    """Stop every process of a run (see :func:`run_processes`) and wait until none is left.

    Parameters
    ----------
    marker, exe_name, exe_id
        As in :func:`run_processes`.
    root_pid : int, optional
        Only ``root_pid``, the processes of its session or process group (``root_pid`` is a
        session leader), and their descendants (followed through ``ppid`` from one scan to the
        next, so that workers orphaned meanwhile stay known): for a marker that is not unique to
        this host, such as a fio server's TCP address that a server in another network
        namespace may share. Signal nothing before calling this: the first scan must still see
        the tree.
    grace_s : float
        SIGTERM first and wait this long, s (fio ends its workers on SIGTERM); 0 goes straight
        to SIGKILL.
    gone_within_s : float
        Give up waiting after this long, s.

    Returns
    -------
    list of int
        The pids signalled.

    Raises
    ------
    FioError
        Some process of the run is still alive after ``gone_within_s`` (its pids in the message).
    """
    known: set[int] = set() if root_pid is None else {root_pid}

    def scan() -> list[ProcInfo]:
        procs = run_processes(marker, exe_name, exe_id)
        if root_pid is None:
            return procs
        grew = True
        while grew:  # a worker's parent may be a worker: follow ppid until nothing new
            grew = False
            for p in procs:
                if p.pid not in known and (p.ppid in known or root_pid in (p.sid, p.pgid)):
                    known.add(p.pid)
                    grew = True
        return [p for p in procs if p.pid in known]

    signalled: list[int] = []
    seen: set[int] = set()

    def left() -> list[ProcInfo]:
        procs = scan()
        seen.update(p.pid for p in procs)
        return procs

    def gone() -> bool:  # nothing of the run left: no live process, no thread still exiting
        return not left() and not any(_alive(pid) for pid in seen)

    procs = left()
    if not procs:
        return signalled
    if grace_s > 0:
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGTERM)
                signalled.append(p.pid)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not gone():
            time.sleep(0.02)
    deadline = time.monotonic() + gone_within_s
    while True:
        procs = left()
        if not procs and not any(_alive(pid) for pid in seen):
            return signalled
        if time.monotonic() > deadline:
            stuck = [p.pid for p in procs] or sorted(pid for pid in seen if _alive(pid))
            raise FioError(f"fio processes {stuck} of {marker} are still alive {gone_within_s:g} s after SIGKILL "
                           f"(state {[p.state for p in procs]})")
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGKILL)
                if p.pid not in signalled:
                    signalled.append(p.pid)
        time.sleep(0.01)


# ---------------------------------------------------------------------------------------------
# SysV shared memory (how a recorded run's workers are told)


def shm_creators() -> dict[int, int]:
    """SysV shared-memory segments of this IPC namespace: shmid -> pid of the process that created it
    (``/proc/sysvipc/shm``; a segment outlives its creator while others have it attached)."""
    out = {}
    try:
        with open("/proc/sysvipc/shm") as fh:
            next(fh, None)
            for line in fh:
                f = line.split()
                with contextlib.suppress(IndexError, ValueError):
                    out[int(f[1])] = int(f[4])
    except OSError:
        pass
    return out


def shm_ids(pid: int) -> set[int]:
    """The SysV segments process ``pid`` has attached (``/SYSV...`` lines of ``/proc/PID/maps``: the inode is the shmid)."""
    out = set()
    try:
        with open(f"/proc/{pid}/maps") as fh:
            for line in fh:
                if "/SYSV" in line:
                    with contextlib.suppress(IndexError, ValueError):
                        out.add(int(line.split()[4]))
    except OSError:
        pass
    return out

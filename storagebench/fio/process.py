"""fio's process: find fio, read its version, start it so that nothing it forks outlives storagebench, wait, stop.

The one owner of fio processes in storagebench: the runner (``fio job.fio``), client/server runs
(``fio --client``), test servers (``fio --server``), testbed prefills and version probes all start
fio here.

**What a fio run is made of.** fio's main process forks one process per job (``numjobs``
clones included), and each of them calls ``setsid()`` (fio ``backend.c``, ``thread_main``:
``if (!o->use_thread) setsid();``). So fio's workers belong to neither fio's process group nor
its session: a signal to the group does not reach them, and neither does the parent-death
signal, which the kernel sets on one process and clears in its forked children
(``prctl(2)``, ``PR_SET_PDEATHSIG``). A killed storagebench therefore used to leave the workers
of a ``numjobs > 1`` run doing I/O into the next measurement. What the workers do keep is fio's
command line (a fork without exec): it names a file unique to the run, the *marker* (the job
file in the run's staging directory, ``--output=...`` of a client run, ``--server=sock:...`` of a
server). The processes of a run are the processes whose ``argv[0]`` is fio's and whose argv
holds the marker (:func:`run_processes`); nothing else is ever signalled.

**Four guards** (:func:`spawn`):

1. fio's main process runs in a session of its own (a terminal's Ctrl-C reaches storagebench
   only, which then stops fio in order), with ``PR_SET_PDEATHSIG = SIGKILL`` (``setpriv
   --pdeathsig KILL``, util-linux >= 2.33, so that Python can spawn with vfork; else ``prctl``
   between fork and exec).
2. :meth:`FioProcess.stop`: SIGTERM to fio's main process and group (fio then ends its workers
   and writes its output), SIGKILL after a grace period to every process of the run, and a wait
   until none is left. After a normal exit, :meth:`FioProcess.close` checks that none is left.
3. A watchdog (``storagebench/fio/_watchdog.py``, one per storagebench process, started on first
   use; about 15 ms once) holds the read end of a pipe whose write end only storagebench holds.
   Each run is registered before fio starts. When storagebench dies, even by SIGKILL, the kernel
   closes the pipe; the watchdog reads EOF and SIGKILLs the processes of every run still
   registered. It runs in a session of its own, so a terminal's signals do not reach it.
4. With ``record_path`` a record of the run (fio's pid, start time and boot, the fio binary, argv,
   marker, uid) is written next to its output while it runs (mode 0600); a later sweep that finds
   it left by a killed sweep stops what is still running (:func:`stop_recorded`), for the case
   where the watchdog was killed too. The record is data, never an instruction: it is read through
   the root-action gate (:func:`storagebench._recorded.read_recorded`), and a process is killed only
   when live state confirms it is that run's fio (its ``/proc/PID/exe`` is the fio binary, its start
   time and boot match, its argv is the recorded one, it runs as the recorded user).

Every kill here and in the watchdog also checks ``/proc/PID/exe`` against fio's binary when it is
known, so a process merely *named* fio (a symlink called ``fio`` to another program) is left alone.

Also here: what fio said on stderr (:func:`fio_message`), the fatal messages fio prints without
an error status (:func:`fatal_lines`), runs that completed no I/O (:func:`zero_io_jobs`), and the
fio processes of others on this host (:func:`other_fio_processes`, for the quiet-host check).

This module imports nothing from storagebench but :mod:`storagebench.errors` and
:mod:`storagebench._recorded` (the root-action gate).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .._recorded import RecordRefusedError, boot_id, read_recorded, write_recorded
from ..errors import FioError, FioNotFoundError

__all__ = [
    "FioProcess",
    "ProcInfo",
    "find_fio",
    "fio_version",
    "spawn",
    "run",
    "run_processes",
    "stop_processes",
    "stop_recorded",
    "other_fio_processes",
    "live_markers",
    "fio_message",
    "fatal_lines",
    "zero_io_jobs",
    "RECORD_NAME",
    "RECORD_FORMAT",
    "start_ticks",
    "exe_identity",
    "read_record",
]

#: What to install when fio is missing.
INSTALL_HINT = ("install it: 'apt-get install fio' on Debian/Ubuntu, 'dnf install fio' on Fedora, or run "
                "'make test' / 'make demo' as root, which installs it")
#: Seconds fio gets to end its workers and write its output after SIGTERM, before SIGKILL.
KILL_GRACE_S = 5.0
#: Seconds :meth:`FioProcess.stop` waits for the last process of a run to disappear after SIGKILL
#: (a process in uninterruptible I/O dies when that I/O completes).
GONE_WITHIN_S = 30.0
#: File name of a run's record (see :func:`spawn`'s ``record_path``).
RECORD_NAME = ".fio-process.json"
#: Format of that record; records without ``format`` (older storagebench) are refused, never acted on.
RECORD_FORMAT = 2

_WATCHDOG_PY = Path(__file__).with_name("_watchdog.py")


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
# the parent-death signal


_PRCTL: Any = None


def _prctl():
    """libc ``prctl``, resolved in the parent: the forked child must not import or dlopen anything."""
    global _PRCTL
    if _PRCTL is None:
        try:
            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _PRCTL = False
    return _PRCTL


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if _PRCTL:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9


_SETPRIV: list[str] | None = None


def _pdeathsig_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL`` (util-linux >= 2.33) when available, else ``[]``.

    Setting PR_SET_PDEATHSIG through ``setpriv`` lets Python spawn fio with vfork (about
    1.5 ms) instead of fork + ``preexec_fn`` (about 30 ms in a large process), per run.
    """
    global _SETPRIV
    if _SETPRIV is None:
        exe = shutil.which("setpriv")
        ok = False
        if exe and sys.platform.startswith("linux"):
            try:
                out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
                ok = "--pdeathsig" in out.stdout
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        _SETPRIV = [exe, "--pdeathsig", "KILL"] if ok and exe else []
    return _SETPRIV


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
    """``(comm, state, ppid, pgrp, session)`` of ``/proc/PID/stat``; ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
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


def _proc_uid(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid  # the process's effective uid
    except OSError:
        return None


def _argv(pid: str) -> tuple[str, ...]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return ()
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts = parts[:-1]
    return tuple(p.decode(errors="surrogateescape") for p in parts)


def _fio_procs(exe_name: str | None = None) -> list[ProcInfo]:
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
        argv = _argv(name)
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
    return [p for p in _fio_procs(exe_name) if marker in p.argv
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
# the watchdog


class _Watchdog:
    """The per-process watchdog (see the module's doc): started on first use, restarted if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid: int | None = None
        self._next = 0
        self._live: dict[int, tuple[str, str, list[int] | None]] = {}

    def _start(self) -> None:
        r, w = os.pipe()  # both close-on-exec: no fio, no other child inherits the write end
        try:
            file_actions = [(os.POSIX_SPAWN_DUP2, r, 0)]
            devnull = os.open(os.devnull, os.O_RDWR)
            try:
                file_actions += [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
                self._pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-S", str(_WATCHDOG_PY)],
                                           {"PATH": os.defpath}, file_actions=file_actions, setsid=True)
            finally:
                os.close(devnull)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self._fd = w

    def _send(self, msg: Mapping[str, Any]) -> None:
        data = (json.dumps(msg) + "\n").encode()
        for attempt in (0, 1):
            if self._fd is None:
                self._start()
                replay = b"".join((json.dumps({"op": "add", "id": k, "marker": m, "exe": e, "exe_id": i})
                                   + "\n").encode() for k, (m, e, i) in self._live.items() if msg.get("id") != k)
                if replay:
                    os.write(self._fd, replay)  # type: ignore[arg-type]
            try:
                os.write(self._fd, data)  # type: ignore[arg-type]
                return
            except OSError:  # the watchdog died (EPIPE): start another one
                with contextlib.suppress(OSError):
                    os.close(self._fd)  # type: ignore[arg-type]
                self._fd = None
                self._reap()
                if attempt:
                    raise

    def _reap(self) -> None:
        if self._pid is not None:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(self._pid, os.WNOHANG)
            self._pid = None

    def register(self, marker: str, exe_name: str, exe_id: tuple[int, int] | None = None) -> int:
        with self._lock:
            self._next += 1
            token = self._next
            ident = None if exe_id is None else list(exe_id)
            self._live[token] = (marker, exe_name, ident)
            self._send({"op": "add", "id": token, "marker": marker, "exe": exe_name, "exe_id": ident})
            return token

    def unregister(self, token: int) -> None:
        with self._lock:
            if self._live.pop(token, None) is not None and self._fd is not None:
                with contextlib.suppress(OSError):
                    os.write(self._fd, (json.dumps({"op": "del", "id": token}) + "\n").encode())

    def markers(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(m, e) for m, e, _ in self._live.values()]

    @property
    def pid(self) -> int | None:
        return self._pid

    def _after_fork_in_child(self) -> None:
        # a forked child (multiprocessing) must not keep the watchdog's pipe open: EOF must come
        # when *this* storagebench process dies
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self.__init__()


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHDOG._after_fork_in_child)


def watchdog_pid() -> int | None:
    """Pid of this process's watchdog (``None`` before the first fio run)."""
    return _WATCHDOG.pid


def live_markers() -> list[tuple[str, str]]:
    """``(marker, exe_name)`` of the fio runs this process has running now."""
    return _WATCHDOG.markers()


# ---------------------------------------------------------------------------------------------
# one fio process


def _write_record(path: Path, rec: Mapping[str, Any]) -> None:
    write_recorded(path, json.dumps(rec, indent=1).encode(), mode=0o600)


class FioProcess:
    """A fio process started by :func:`spawn`; see the module's doc.

    Attributes
    ----------
    popen : subprocess.Popen
    argv : list of str
        fio's command line (without the ``setpriv`` prefix).
    marker : str
        The argument unique to the run.
    exe_name : str
    record_path : Path or None
    """

    def __init__(self, popen: subprocess.Popen, argv: list[str], marker: str, exe_name: str,
                 token: int | None, record_path: Path | None, exe_id: tuple[int, int] | None = None):
        self.popen = popen
        self.argv = argv
        self.marker = marker
        self.exe_name = exe_name
        self.exe_id = exe_id
        self.record_path = record_path
        self._token = token
        self._closed = False

    @property
    def pid(self) -> int:
        """fio's main process (leader of its own session and process group)."""
        return self.popen.pid

    def processes(self) -> list[ProcInfo]:
        """The live processes of this run (fio's main process and its workers)."""
        return run_processes(self.marker, self.exe_name, self.exe_id)

    def wait(self, timeout_s: float | None = None) -> int:
        """Block until fio's main process exits; its exit status.

        ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms, which a sweep would pay on
        every run; a pidfd (Linux >= 5.3) wakes up the moment fio exits.

        Raises
        ------
        subprocess.TimeoutExpired
            After ``timeout_s`` (s); fio is still running.
        """
        proc = self.popen
        if timeout_s is None:
            return proc.wait()
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            return proc.wait(timeout=timeout_s)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            deadline = time.monotonic() + timeout_s
            while proc.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(proc.args, timeout_s)
                poller.poll(max(1.0, left * 1000.0))  # readable when fio has exited
            return proc.returncode
        finally:
            os.close(fd)

    def stop(self, grace_s: float = KILL_GRACE_S) -> list[int]:
        """End the run: SIGTERM to fio's main process and its group, SIGKILL after ``grace_s`` to
        every process of the run, and wait until none is left; then :meth:`close`.

        Returns
        -------
        list of int
            Pids that were still alive and got SIGKILL (empty when fio ended on SIGTERM).

        Raises
        ------
        FioError
            A process of the run is still alive :data:`GONE_WITHIN_S` s after SIGKILL.
        """
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGTERM)  # fio's main process leads its group
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(grace_s)
        killed = []
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        try:
            killed = stop_processes(self.marker, self.exe_name, exe_id=self.exe_id)
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=GONE_WITHIN_S)
        self.close()
        return killed

    def close(self) -> list[int]:
        """After fio's main process exited: make sure no worker is left (SIGKILL any, and wait),
        then unregister the run from the watchdog and remove its record. Idempotent.

        Returns
        -------
        list of int
            Leftover pids that had to be killed (fio reaps its workers before it exits, so this
            is normally empty).
        """
        if self._closed:
            return []
        left = stop_processes(self.marker, self.exe_name, exe_id=self.exe_id) if self.popen.poll() is not None else []
        if self.popen.poll() is None:  # close() before fio ended: stop it
            return self.stop()
        if self._token is not None:
            _WATCHDOG.unregister(self._token)
        if self.record_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.record_path.unlink()
        self._closed = True
        return left

    def __enter__(self) -> FioProcess:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.popen.poll() is None:
            self.stop()  # KeyboardInterrupt, SystemExit, a timeout: never leave fio running
        else:
            self.close()


def spawn(
    cmd: Sequence[str],
    *,
    marker: str | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    record_path: str | os.PathLike[str] | None = None,
    die_with_parent: bool = True,
    exe_name: str | None = None,
) -> FioProcess:
    """Start fio in a session (and process group) of its own, tied to this process.

    Parameters
    ----------
    cmd : sequence of str
        fio's command line; ``cmd[0]`` from :func:`find_fio`.
    marker : str, optional
        An element of ``cmd`` unique to this run (default ``cmd[-1]``, the job file): how the
        run's processes are told from every other process (see the module's doc).
    stdout, stderr
        As for :class:`subprocess.Popen`; stdin is ``/dev/null``.
    cwd : path, optional
        fio's working directory.
    record_path : path, optional
        Write the run's record there while it runs (JSON, mode 0600, :data:`RECORD_FORMAT`:
        ``pid``, ``pgid``, ``start_ticks`` and ``boot_id`` (who fio is for good), ``exe`` and
        ``exe_id`` (fio's binary: real path, ``[st_dev, st_ino]``), ``uid``, ``argv``, ``marker``,
        ``exe_name``, ``parent_pid`` and ``parent_start_ticks`` (this process),
        ``started_at_unix_s``); removed by :meth:`FioProcess.close`. See :func:`stop_recorded`.
    die_with_parent : bool
        Tie fio to this process: the parent-death signal and the watchdog (guards 1 and 3 of the
        module's doc). ``False`` for test servers that must outlive the command that started them.
    exe_name : str, optional
        Name of fio's executable when ``cmd[0]`` is a wrapper that execs it (``ip netns exec``);
        default ``os.path.basename(cmd[0])``.

    Returns
    -------
    FioProcess

    Raises
    ------
    FioNotFoundError
        ``cmd[0]`` cannot be executed.
    OSError
        ``record_path`` cannot be written (fio has been stopped).
    """
    argv = [os.fspath(c) for c in cmd]
    marker = argv[-1] if marker is None else marker
    if marker not in argv:
        raise ValueError(f"marker {marker!r} must be one of the arguments {argv}")
    exe_name = exe_name or os.path.basename(argv[0])
    # fio's binary, when argv[0] is fio itself (not a wrapper such as ``ip netns exec``): what every kill checks
    exe_path = shutil.which(argv[0]) if os.path.basename(argv[0]) == exe_name else None
    exe_id = None if exe_path is None else exe_identity(exe_path)
    token = _WATCHDOG.register(marker, exe_name, exe_id) if die_with_parent else None  # before fio exists: no gap
    prefix = _pdeathsig_prefix() if die_with_parent else []
    preexec = _die_with_parent if die_with_parent and not prefix and _prctl() else None
    try:
        popen = subprocess.Popen([*prefix, *argv], stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                 cwd=cwd, start_new_session=True, preexec_fn=preexec)
    except FileNotFoundError as exc:
        if token is not None:
            _WATCHDOG.unregister(token)
        raise FioNotFoundError(f"cannot run fio {argv[0]!r}: {exc.strerror}; {INSTALL_HINT}") from exc
    except BaseException:
        if token is not None:
            _WATCHDOG.unregister(token)
        raise
    rec_path = None if record_path is None else Path(record_path)
    fp = FioProcess(popen, argv, marker, exe_name, token, rec_path, exe_id)
    if rec_path is not None:
        try:
            _write_record(rec_path, {
                "format": RECORD_FORMAT, "pid": popen.pid, "pgid": popen.pid, "start_ticks": start_ticks(popen.pid),
                "boot_id": boot_id(), "exe": None if exe_path is None else os.path.realpath(exe_path),
                "exe_id": None if exe_id is None else list(exe_id), "uid": os.geteuid(), "argv": argv,
                "marker": marker, "exe_name": exe_name, "parent_pid": os.getpid(),
                "parent_start_ticks": start_ticks(os.getpid()), "started_at_unix_s": round(time.time(), 6)})
        except BaseException:
            fp.stop(grace_s=0.0)
            raise
    return fp


def run(cmd: Sequence[str], *, timeout_s: float | None, marker: str | None = None,
        cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess:
    """Run fio to its end with its output captured (for short fio commands: probes, prefills).

    Parameters
    ----------
    cmd : sequence of str
    timeout_s : float or None
        Wall-clock limit, s; the run's processes are stopped when it is reached.
    marker, cwd
        As in :func:`spawn`.

    Returns
    -------
    subprocess.CompletedProcess
        ``stdout`` and ``stderr`` as text.

    Raises
    ------
    FioNotFoundError
        fio cannot be executed.
    subprocess.TimeoutExpired
        After ``timeout_s``; fio has been stopped.
    """
    fp = spawn(cmd, marker=marker, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    try:
        out, err = fp.popen.communicate(timeout=timeout_s)
    except BaseException:
        fp.stop()
        raise
    fp.close()
    return subprocess.CompletedProcess(fp.popen.args, fp.popen.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


# ---------------------------------------------------------------------------------------------
# records left by a killed sweep


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_record(path: str | os.PathLike[str], *, tree: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """A run's record written by :func:`spawn`, read through the root-action gate.

    Parameters
    ----------
    path : path
    tree : path, optional
        The results tree it lies in (every directory from there down is checked); default its directory.

    Returns
    -------
    dict or None
        ``None`` when there is no record.

    Raises
    ------
    RecordRefusedError
        The file fails the gate (:func:`storagebench._recorded.read_recorded`: a symlink, another user's,
        writable by others ...), is not JSON, or is not a record of :data:`RECORD_FORMAT` with every field
        :func:`stop_recorded` checks (a record of an older storagebench holds no start time, so what it names
        cannot be told from a process that reused its pid).
    """
    data = read_recorded(path, tree=tree, what="fio process record")
    if data is None:
        return None
    where = str(path)

    def refuse(reason: str) -> RecordRefusedError:
        return RecordRefusedError(f"fio process record {where} was not acted on: {reason}", path=where, reason=reason)

    try:
        rec = json.loads(data)
    except ValueError:
        raise refuse("it is not JSON") from None
    if not isinstance(rec, dict):
        raise refuse("it is not a JSON object")
    if rec.get("format") != RECORD_FORMAT:
        raise refuse(f"it is of format {rec.get('format', 'none')!r}, not {RECORD_FORMAT}: written by an older "
                     "storagebench, it holds no start time, binary or boot of fio, so its processes cannot be told "
                     "from others; nothing was stopped (stop a leftover fio yourself if one runs)")
    argv = rec.get("argv")
    ident = rec.get("exe_id")
    fields_ok = (_int(rec.get("pid")) and rec["pid"] > 0 and _int(rec.get("start_ticks")) and _int(rec.get("uid"))
                 and isinstance(rec.get("boot_id"), str) and isinstance(rec.get("exe"), str)
                 and isinstance(ident, list) and len(ident) == 2 and all(_int(x) for x in ident)
                 and isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
                 and isinstance(rec.get("marker"), str) and rec["marker"] in argv
                 and isinstance(rec.get("exe_name"), str) and _int(rec.get("parent_pid")))
    if not fields_ok:
        raise refuse("it lacks a field or holds a value of the wrong type (pid, start_ticks, boot_id, exe, exe_id, "
                     "uid, argv, marker in argv, exe_name, parent_pid)")
    return rec


def _marker_file(marker: str) -> str:
    """The path a marker names (``--output=PATH`` -> PATH)."""
    return marker.split("=", 1)[1] if marker.startswith("--") and "=" in marker else marker


def _verified(rec: Mapping[str, Any], pid: int) -> bool:
    """Process ``pid`` is the recorded run's: its binary, argv, user, boot and start time (see :func:`stop_recorded`)."""
    ticks = start_ticks(pid)
    if ticks is None:
        return False
    if pid == rec["pid"]:
        if ticks != rec["start_ticks"]:
            return False  # the pid was reused
    elif ticks < rec["start_ticks"]:
        return False  # older than the run's fio: not one of its workers
    return (exe_identity(f"/proc/{pid}/exe") == tuple(rec["exe_id"]) and _proc_uid(pid) == rec["uid"]
            and _argv(str(pid)) == tuple(rec["argv"]))


def stop_recorded(path: str | os.PathLike[str], *, tree: str | os.PathLike[str] | None = None,
                  fio_bin: str = "fio") -> dict[str, Any] | None:
    """Stop what is left of a run whose record is at ``path`` (a killed sweep's), if anything.

    The record is data: it is read through the root-action gate (:func:`read_record`), and it is acted on
    only when it is about this host, this boot and this user, and about a stale run of the record's own
    directory:

    * its ``boot_id`` is this boot's, its ``uid`` is yours, its ``exe`` is the fio binary
      (``os.path.realpath`` of :func:`find_fio` ``(fio_bin)``) and the binary is still that file;
    * its marker (the run's job file, or ``--output=`` of a client run) is a file in the record's own
      directory;
    * the sweep that wrote it (``parent_pid`` with ``parent_start_ticks``) is gone.

    A process is then stopped only when live state says it is the run's: its ``/proc/PID/exe`` is that fio
    binary, it runs as the recorded user, its argv is the recorded argv (which names the job file), and its
    start time (``/proc/PID/stat`` field 22) is the recorded one (fio's main process) or later (a worker
    fio forked; a worker's start time is never earlier than its parent's). Each is checked again on a pidfd
    just before SIGKILL, so a pid reused in between is not signalled; then a wait until none is left.

    Parameters
    ----------
    path : path
        The record (:data:`RECORD_NAME`).
    tree : path, optional
        The results tree it lies in (see :func:`read_record`).
    fio_bin : str
        The fio the sweep runs (a name on ``PATH`` or a path).

    Returns
    -------
    dict or None
        ``None`` when nothing of the run was running; else ``marker``, ``recorded_pid``, ``parent_pid`` (the
        sweep that started it) and ``processes`` (:meth:`ProcInfo.to_json` of each process stopped).

    Raises
    ------
    RecordRefusedError
        The record fails the gate or names something that is not a stale run of this user's (the message
        names the file and why; nothing was signalled).
    FioError
        A process of the run survived SIGKILL for :data:`GONE_WITHIN_S` s.
    """
    rec = read_record(path, tree=tree)
    if rec is None:
        return None
    where = str(path)

    def refuse(reason: str) -> RecordRefusedError:
        return RecordRefusedError(f"fio process record {where} was not acted on: {reason}", path=where, reason=reason)

    if rec["boot_id"] != boot_id():
        raise refuse("it was written during another boot or on another host (its boot_id is not this boot's): "
                     "nothing it names runs here")
    if rec["uid"] != os.geteuid():
        raise refuse(f"it names a run of uid {rec['uid']}, not yours ({os.geteuid()})")
    try:
        fio = os.path.realpath(find_fio(fio_bin))
    except FioNotFoundError:
        raise refuse(f"there is no fio binary ({fio_bin!r}) to compare its exe with") from None
    if rec["exe"] != fio or exe_identity(fio) != tuple(rec["exe_id"]):
        raise refuse(f"it names the program {rec['exe']!r}, not the fio binary {fio}")
    if os.path.dirname(os.path.abspath(_marker_file(rec["marker"]))) != os.path.dirname(os.path.abspath(path)):
        raise refuse(f"its marker {rec['marker']!r} is not a file of the record's own directory")
    if _int(rec.get("parent_start_ticks")) and start_ticks(rec["parent_pid"]) == rec["parent_start_ticks"]:
        raise refuse(f"the sweep that wrote it (pid {rec['parent_pid']}) is still running: its run is not stale")
    found: dict[int, ProcInfo] = {}
    deadline = None
    while True:
        procs = _run_of_record(rec)
        for p in procs:
            found.setdefault(p.pid, p)
            _kill_verified(rec, p.pid)
        if not procs:
            break
        if deadline is None:
            deadline = time.monotonic() + GONE_WITHIN_S
        elif time.monotonic() > deadline:
            raise FioError(f"fio processes {[p.pid for p in procs]} of {rec['marker']} are still alive "
                           f"{GONE_WITHIN_S:g} s after SIGKILL (state {[p.state for p in procs]})")
        time.sleep(0.01)
    if not found:
        return None
    return {"marker": rec["marker"], "recorded_pid": rec["pid"], "parent_pid": rec["parent_pid"],
            "processes": [p.to_json() for p in found.values()]}


def _shm_creators() -> dict[int, int]:
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


def _shm_ids(pid: int) -> set[int]:
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


def _run_of_record(rec: Mapping[str, Any]) -> list[ProcInfo]:
    """The live processes of a recorded run: fio's main process (the recorded pid and start time), and the
    workers it forked.

    A worker is told by what fio's main process made: fio keeps its jobs' state in a SysV shared-memory
    segment that the main process creates and every worker it forks has attached, and the kernel keeps the
    creator's pid with the segment (``/proc/sysvipc/shm`` ``cpid``) after that process died. So a worker is a
    process with the recorded binary, user and argv, started no earlier than the main process, that has a
    segment created by the recorded pid attached. When that pid is alive now but is not the recorded process
    (reused), only processes older than the reuser count (the reuser's own workers are younger)."""
    pid = rec["pid"]
    same = [p for p in _fio_procs(os.path.basename(rec["argv"][0])) if p.argv == tuple(rec["argv"])]
    main_ok = _verified(rec, pid)
    now = start_ticks(pid)  # the recorded main process as a zombie keeps its start time: not a reuser
    reuser = now if not main_ok and now is not None and now != rec["start_ticks"] else None
    out = []
    creators = None
    for p in same:
        if p.pid == pid:
            if main_ok:
                out.append(p)
            continue
        if not _verified(rec, p.pid):
            continue
        if creators is None:
            creators = _shm_creators()
        if not any(creators.get(i) == pid for i in _shm_ids(p.pid)):
            continue
        ticks = start_ticks(p.pid)
        if reuser is not None and (ticks is None or ticks >= reuser):
            continue
        out.append(p)
    return out


def _kill_verified(rec: Mapping[str, Any], pid: int) -> None:
    """SIGKILL ``pid`` through a pidfd after checking it once more (a pid reused in between is left alone)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return  # gone (or no pidfd: Linux < 5.3, where a verified pid is not signalled blind)
    try:
        if _verified(rec, pid):
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)


def other_fio_processes(exclude_markers: Iterable[str] = ()) -> list[ProcInfo]:
    """fio processes on this host that are not this process's runs (see :func:`live_markers`).

    Parameters
    ----------
    exclude_markers : iterable of str
        More markers to leave out.

    Returns
    -------
    list of ProcInfo
        Every live process whose ``argv[0]``'s name starts with ``fio``, except this process's runs.
    """
    ours = {m for m, _ in live_markers()} | set(exclude_markers)
    return [p for p in _fio_procs() if not ours.intersection(p.argv)]


# ---------------------------------------------------------------------------------------------
# what fio said


def fio_message(stderr: str, output: str = "") -> str:
    """fio's own error lines: ``fio: ...``, ``err=``, ``error=`` and job lines before them.

    Parameters
    ----------
    stderr : str
        fio's stderr.
    output : str
        The ``--output`` file (fio writes some errors before the JSON).

    Returns
    -------
    str
        At most 8 lines joined by ``"; "`` (all lines when none looks like an error).
    """
    lines: list[str] = []
    for text in (stderr, output.split("{", 1)[0] if output else ""):
        for line in text.splitlines():
            line = line.strip()
            if line and line not in lines:
                lines.append(line)
    keep = [ln for ln in lines if ln.startswith("fio:") or "err=" in ln or "error" in ln.lower()]
    picked = keep or lines
    return "; ".join(picked[:8])


#: fio messages that mean the run did not measure what its job file asks, printed while fio still
#: exits 0 with ``error`` 0 in its JSON (fio 3.33 sources in parentheses).
FATAL_PATTERNS: tuple[str, ...] = (
    "failed allocating",  # random map: "fio: failed allocating random map ...", "file ... failed allocating random map. Running job without." (filesetup.c)
    "smalloc: oom",  # the shared-memory pool ran out (smalloc.c)
    "realloc oom",  # "fio: realloc OOM" (parse.c)
    "disappeared",  # "fio: pid=N disappeared N": a worker vanished (backend.c reap_threads)
    "got signal=",  # "fio: pid=N, got signal=N": a worker was killed (backend.c reap_threads)
    "appears to be stuck",  # "fio: job ... hasn't exited in N seconds, it appears to be stuck" (backend.c)
    "seems to be stuck",  # "fio seems to be stuck grabbing stat_sem, forcibly exiting" (backend.c)
)


def fatal_lines(*texts: str) -> list[str]:
    """Lines of fio's stderr / output that report a broken run (see :data:`FATAL_PATTERNS`).

    Parameters
    ----------
    *texts : str
        fio's stderr, and the part of its ``--output`` before the JSON.

    Returns
    -------
    list of str
        The matching lines, stripped, in order, each once.
    """
    out: list[str] = []
    for text in texts:
        for line in text.splitlines():
            low = line.lower()
            if any(p in low for p in FATAL_PATTERNS):
                s = line.strip()
                if s not in out:
                    out.append(s)
    return out


def _ios(entry: Mapping[str, Any]) -> int:
    total = 0
    for ddir in ("read", "write", "trim"):
        d = entry.get(ddir)
        if isinstance(d, Mapping):
            n = d.get("total_ios")
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                total += n
    return total


def zero_io_jobs(doc: Mapping[str, Any]) -> list[str] | None:
    """Whether a fio JSON document completed no I/O at all.

    Parameters
    ----------
    doc : mapping
        fio's ``--output-format=json``/``json+`` document (``jobs``, or ``client_stats`` of a
        client/server run, whose ``"All clients"`` entry is left out).

    Returns
    -------
    list of str or None
        The job names when *every* job completed 0 I/Os (``total_ios`` of read, write and trim
        all 0 or missing); ``None`` when some job did I/O or there is no job.
    """
    jobs = doc.get("client_stats") if "client_stats" in doc else doc.get("jobs")
    if not isinstance(jobs, list):
        return None
    entries = [j for j in jobs if isinstance(j, Mapping) and j.get("jobname") != "All clients"]
    if not entries or any(_ios(j) for j in entries):
        return None
    return [str(j.get("jobname")) for j in entries]

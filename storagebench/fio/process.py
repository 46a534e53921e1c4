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

Also here: the fio processes of others on this host (:func:`other_fio_processes`, for the quiet-host
check). This module is the public face of three private parts, one concept each, whose public names it
re-exports: :mod:`~storagebench.fio._proc` (fio's binary and processes as ``/proc`` shows them, stopping
every process of a run), :mod:`~storagebench.fio._records` (a run's record and :func:`stop_recorded`) and
:mod:`~storagebench.fio._output` (what fio said on stderr, :func:`fio_message`; the fatal messages fio prints
without an error status, :func:`fatal_lines`; runs that completed no I/O, :func:`zero_io_jobs`).

This module and its parts import nothing from storagebench but :mod:`storagebench.errors` and
:mod:`storagebench._recorded` (the root-action gate).
"""


from __future__ import annotations

import contextlib
import ctypes
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .._recorded import boot_id
from ..errors import FioError, FioNotFoundError
from ._output import FATAL_PATTERNS as FATAL_PATTERNS  # reached here too, as before
from ._output import fatal_lines, fio_message, measured_window, zero_io_jobs
from ._proc import (
    GONE_WITHIN_S,
    INSTALL_HINT,
    ProcInfo,
    exe_identity,
    find_fio,
    fio_procs,
    fio_version,
    run_processes,
    start_ticks,
    stop_processes,
)
from ._records import RECORD_FORMAT, RECORD_NAME, read_record, stop_recorded, write_record

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
    "measured_window",
    "RECORD_NAME",
    "RECORD_FORMAT",
    "start_ticks",
    "exe_identity",
    "read_record",
]
#: Seconds fio gets to end its workers and write its output after SIGTERM, before SIGKILL.
KILL_GRACE_S = 5.0

_WATCHDOG_PY = Path(__file__).with_name("_watchdog.py")


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


def _enter_cgroup(procs: str, then: Any):
    """The pre-exec step that moves the child into the cgroup whose ``cgroup.procs`` is ``procs``, then runs
    ``then`` (the parent-death signal) if given; an error there makes :class:`subprocess.Popen` raise."""
    if not os.path.isfile(procs):
        raise FioError(f"cannot run fio in the cgroup of {procs}: it is not there")
    # a throttle's cgroup sits directly under its hierarchy's root: /proc/self/cgroup names it "/<name>"
    member = f"/{os.path.basename(os.path.dirname(procs))}\n".encode()

    def enter() -> None:  # pragma: no cover - runs in the child between fork and exec
        with open("/proc/self/cgroup", "rb") as f:
            if member in f.read():
                return then() if then is not None else None  # born inside (the runner is in it): no migration
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
        if then is not None:
            then()

    return enter


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


@dataclass(eq=False)
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
    token : int or None
        The run's registration with the watchdog (``None``: not tied to this process).
    record_path : Path or None
    exe_id : (int, int) or None
        :func:`exe_identity` of fio's binary, when ``argv[0]`` is fio itself.
    """

    popen: subprocess.Popen
    argv: list[str]
    marker: str
    exe_name: str
    _token: int | None
    record_path: Path | None
    exe_id: tuple[int, int] | None = None
    _closed: bool = field(default=False, init=False, repr=False)

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
    cgroup: str | os.PathLike[str] | None = None,
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
    cgroup : path, optional
        A cgroup directory (a throttle's, :func:`storagebench.testbed.throttle`): fio enters it between fork and
        exec (writes ``0`` to its ``cgroup.procs``), so fio and every worker it forks run inside it from their
        first I/O. If it cannot be entered, fio is not started.

    Returns
    -------
    FioProcess

    Raises
    ------
    FioNotFoundError
        ``cmd[0]`` cannot be executed.
    FioError
        ``cgroup`` has no ``cgroup.procs`` (nothing was started).
    subprocess.SubprocessError
        The child could not enter ``cgroup`` (fio was not executed).
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
    prefix = _pdeathsig_prefix() if die_with_parent else []
    preexec = _die_with_parent if die_with_parent and not prefix and _prctl() else None
    if cgroup is not None:
        preexec = _enter_cgroup(os.path.join(os.fspath(cgroup), "cgroup.procs"), preexec)
    token = _WATCHDOG.register(marker, exe_name, exe_id) if die_with_parent else None  # before fio exists: no gap
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
            write_record(rec_path, {
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
    return [p for p in fio_procs() if not ours.intersection(p.argv)]

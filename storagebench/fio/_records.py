"""Records of running fio runs, and stopping what a killed sweep left running.

Part of :mod:`storagebench.fio.process`, which re-exports its public names. :func:`~storagebench.fio.process.spawn`
writes a run's record (:data:`RECORD_NAME`, :func:`write_record`) next to its output while it runs; a later sweep
that finds one left by a killed sweep stops what is still running (:func:`stop_recorded`). The record is data,
never an instruction: it is read through the root-action gate (:func:`storagebench._recorded.read_recorded`),
and a process is killed only when live state confirms it is that run's fio.

This module imports nothing from storagebench but :mod:`storagebench.errors`, :mod:`storagebench._recorded`
(the root-action gate) and :mod:`storagebench.fio._proc`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._recorded import RecordRefusedError, boot_id, read_recorded, write_recorded
from ..errors import FioError, FioNotFoundError
from ._proc import (
    GONE_WITHIN_S,
    ProcInfo,
    argv_of,
    exe_identity,
    find_fio,
    fio_procs,
    proc_uid,
    shm_creators,
    shm_ids,
    start_ticks,
)

#: File name of a run's record (see :func:`~storagebench.fio.process.spawn`'s ``record_path``).
RECORD_NAME = ".fio-process.json"
#: Format of that record; records without ``format`` (older storagebench) are refused, never acted on.
RECORD_FORMAT = 2


def write_record(path: Path, rec: Mapping[str, Any]) -> None:
    """Write a run's record ``rec`` to ``path`` (JSON, mode 0600, never over an existing file)."""
    write_recorded(path, json.dumps(rec, indent=1).encode(), mode=0o600)


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
    return (exe_identity(f"/proc/{pid}/exe") == tuple(rec["exe_id"]) and proc_uid(pid) == rec["uid"]
            and argv_of(str(pid)) == tuple(rec["argv"]))


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
    same = [p for p in fio_procs(os.path.basename(rec["argv"][0])) if p.argv == tuple(rec["argv"])]
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
            creators = shm_creators()
        if not any(creators.get(i) == pid for i in shm_ids(p.pid)):
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

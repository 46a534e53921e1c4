"""The watchdog of one storagebench process: when storagebench dies, kill the fio processes it started.

Started by :mod:`storagebench.fio.process` as ``python -I -S _watchdog.py`` in a session of its
own (a terminal's Ctrl-C does not reach it), with the read end of a pipe as stdin; only the
storagebench process holds the write end. storagebench writes one JSON line per fio run it
starts (``{"op": "add", "id": N, "marker": M, "exe": "fio"}``) and one when the run's processes
are gone (``{"op": "del", "id": N}``). When storagebench exits, however it exits (SIGKILL and
the OOM killer included), the kernel closes the write end and this process reads EOF: it then
SIGKILLs every process whose command line is a registered run's (``argv[0]`` named ``exe`` and
``marker`` one of its arguments), that runs as this user and whose ``/proc/PID/exe`` is fio's binary
(``exe_id``: ``[st_dev, st_ino]``, when storagebench knew it), until none is left, and exits.

Why the command line: fio forks one process per job and each calls ``setsid()`` (fio
``backend.c``, ``thread_main``: ``if (!o->use_thread) setsid();``), so fio's workers are in
neither fio's process group nor its session; a fork without exec keeps fio's argv, which names
a file unique to the run (its job file in the run's staging directory). A process is killed only
when every check holds, so a pid reused by anything else, a program merely named ``fio`` (a symlink
called fio to another binary) and another user's process are left alone.

Standard library only: this file must run without storagebench's dependencies (``-S``) and
fast (about 15 ms to start).
"""

import json
import os
import signal
import sys
import time

#: Seconds spent killing after EOF before giving up (processes in uninterruptible I/O, state D,
#: die when their I/O completes).
KILL_FOR_S = 30.0


def _argv(pid: str) -> list:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return raw.split(b"\0")[:-1] if raw.endswith(b"\0") else raw.split(b"\0")


def _state(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return "X"
    return text[text.rfind(b")") + 2:text.rfind(b")") + 3].decode()


def _identity(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _ours(pid: str, exe_id) -> bool:
    """The process runs as this user and, when fio's binary is known, is that binary."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.geteuid():
            return False
    except OSError:
        return False
    return exe_id is None or _identity(f"/proc/{pid}/exe") == list(exe_id)


def _marked(entries: list) -> list:
    wanted = [(e["marker"].encode(), e["exe"].encode(), e.get("exe_id")) for e in entries]
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        argv = _argv(pid)
        if not argv:
            continue
        name = os.path.basename(argv[0])
        if (any(name == exe and marker in argv and _ours(pid, ident) for marker, exe, ident in wanted)
                and _state(pid) not in ("Z", "X")):
            found.append(int(pid))
    return found


def kill_marked(entries: list, for_s: float = KILL_FOR_S) -> list:
    """SIGKILL every live process of ``entries`` until none is left (or ``for_s`` passed); the pids killed."""
    killed: list = []
    if not entries:
        return killed
    deadline = time.monotonic() + for_s
    while True:
        found = _marked(entries)
        if not found:
            return killed
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            if pid not in killed:
                killed.append(pid)
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.01)


def main() -> int:
    os.chdir("/")  # never keep a mount busy
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP):
        signal.signal(sig, signal.SIG_IGN)
    entries: dict = {}
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
            if msg["op"] == "add":
                ident = msg.get("exe_id")
                ok = isinstance(ident, list) and len(ident) == 2 and all(type(x) is int for x in ident)
                entries[msg["id"]] = {"marker": str(msg["marker"]), "exe": str(msg["exe"]),
                                      "exe_id": ident if ok else None}
            elif msg["op"] == "del":
                entries.pop(msg["id"], None)
        except (ValueError, KeyError, TypeError):
            continue
    kill_marked(list(entries.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What every testbed resource shares (part of :mod:`storagebench.testbed`): the cleanup registry, the state records.

Every resource :mod:`storagebench.testbed` creates registers its teardown here (:func:`register_cleanup`) while it
exists: an ``atexit`` hook runs what is still registered when the interpreter exits, and a ``SIGTERM`` is turned
into ``SystemExit`` (only when no other handler is installed) so that every context manager's ``finally`` runs. A
resource that outlives a killed process (a zram device) is written down in a state record
(:func:`state_write`, mode 0600 in a 0700 directory), read back through the root-action gate
(:func:`state_records`). Also: running a tool (:func:`run_tool`), sizes (:func:`parse_size`) and the check that
a testbed can be made here (:func:`require_testbed`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from ._recorded import RecordRefusedError, make_dirs, read_recorded, warn_refused, write_recorded
from .errors import TestbedError
from .fio import options as fo

#: prefix of every backing file, mount point and state file we create
PREFIX = "storagebench-tb"
_STATE_DIR = Path(os.environ.get("STORAGEBENCH_TESTBED_STATE", "/run/storagebench-testbed"))

# ---------------------------------------------------------------------------------------------
# cleanup registry

_lock = threading.RLock()
_cleanups: dict[str, tuple[str, callable]] = {}  # key -> (description, teardown)
_hooks_installed = False


def _install_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_run_all_cleanups)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _sigterm)
        except (ValueError, OSError):  # not settable here
            pass


def _sigterm(signum, frame):  # pragma: no cover - exercised by a subprocess test
    # do no work in the handler: unwind the stack so every context manager's finally runs
    raise SystemExit(128 + signum)


def register_cleanup(key: str, description: str, teardown) -> None:
    """Run ``teardown`` at exit (or on SIGTERM) unless :func:`unregister_cleanup` ``(key)`` is called first."""
    _install_hooks()
    with _lock:
        _cleanups[key] = (description, teardown)


def unregister_cleanup(key: str) -> None:
    """The resource ``key`` is gone: nothing to tear down at exit."""
    with _lock:
        _cleanups.pop(key, None)


def _run_all_cleanups() -> None:
    with _lock:
        items = list(_cleanups.items())[::-1]
    for key, (_, teardown) in items:
        with contextlib.suppress(Exception):
            teardown()
        unregister_cleanup(key)


# ---------------------------------------------------------------------------------------------
# helpers


def run_tool(cmd: Sequence[str], *, what: str, timeout: float = 120) -> str:
    """Run a tool (``losetup``, ``mkfs`` ...); its stdout, or a :class:`TestbedError` naming ``what`` failed and why."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise TestbedError(f"{what}: {cmd[0]} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"{what}: {' '.join(cmd)} did not finish in {timeout:.0f} s") from exc
    if proc.returncode != 0:
        err = "\n".join(proc.stderr.strip().splitlines()[:3])  # not a whole usage text
        raise TestbedError(f"{what}: {' '.join(cmd)} failed ({proc.returncode}): {err}")
    return proc.stdout


def parse_size(size: int | str) -> int:
    """Bytes in a size, read as fio reads it (:func:`storagebench.fio.options.parse_size`: ``64M`` is 64 MiB).

    Raises
    ------
    TestbedError
        Not a positive size, or a spelling fio would read differently from what it says
        (:func:`storagebench.fio.options.size_spelling_problem`).
    """
    problem = fo.size_spelling_problem(size)
    if problem:
        raise TestbedError(f"size {problem}")
    value = fo.parse_size(size)
    if value <= 0:
        raise TestbedError(f"size must be positive, got {size!r}")
    return value


def require_testbed() -> None:
    """Raise :class:`TestbedError` unless we are root and the loop driver is there."""
    if os.geteuid() != 0:
        raise TestbedError("testbeds need root (loop devices, mkfs, mount); run as root")
    if not os.path.exists("/dev/loop-control"):
        raise TestbedError("no loop device support: /dev/loop-control is missing (modprobe loop)")
    if shutil.which("losetup") is None:
        raise TestbedError("losetup (util-linux) is not installed")


def state_write(key: str, record: dict) -> None:
    """Write the state record ``key`` (mode 0600, in a 0700 directory)."""
    make_dirs(_STATE_DIR, mode=0o700)
    write_recorded(_STATE_DIR / f"{key}.json", json.dumps(record).encode(), mode=0o600)


def state_remove(key: str) -> None:
    """Remove the state record ``key`` if it is there."""
    with contextlib.suppress(FileNotFoundError):
        (_STATE_DIR / f"{key}.json").unlink()


def state_records() -> list[dict]:
    """Every state record that passes the root-action gate and names a ``path`` and a ``pid`` (``_key``: its name)."""
    out = []
    if not _STATE_DIR.is_dir():
        return out
    for f in _STATE_DIR.glob("*.json"):
        # a record names a device cleanup_stale removes: the root-action gate first (never a symlink,
        # another user's file or one others can write), then the device it names is checked live
        try:
            data = read_recorded(f, tree=_STATE_DIR, what="testbed state record")
            rec = json.loads(data) if data is not None else None
        except RecordRefusedError as exc:
            warn_refused(exc)
            continue
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("path"), str) and type(rec.get("pid")) is int:
            rec["_key"] = f.stem
            out.append(rec)
    return out

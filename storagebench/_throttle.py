"""Devices of a known capacity: the kernel's block-I/O throttle on devices a testbed made (part of
:mod:`storagebench.testbed`).

A throttle is one cgroup, ``storagebench-<pid>-<hex>``, made for it under the block-I/O hierarchy: cgroup v1's
``blkio`` (``blkio.throttle.{read,write}_{iops,bps}_device``, what these machines have) or, where there is no v1
``blkio``, cgroup v2 (``io.max``, when the ``io`` controller is enabled for the root's children). Its rules cap
each device for the processes in the cgroup; fio enters it before it executes
(:func:`storagebench.fio.process.spawn` ``cgroup=``) and its workers, forked by fio, are born in it.

A cap is a token bucket in the block layer (``blk-throttle``), not a disk: see ``docs/testbed.md`` for what it
models and what it does not.

The cgroup is registered for teardown (:func:`storagebench._testbedbase.register_cleanup`) and written down in a
state record while it exists; it is removed by its exact path (``rmdir`` once no process is left in it), and its
name carries the creating process's id, so :func:`leftovers` finds what a killed process left. Only
:func:`storagebench.testbed.throttle` calls :func:`throttle`, after checking that every device is one the testbed
created.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ._caps import CAP_KEYS, check_caps
from ._testbedbase import register_cleanup, state_remove, state_write, unregister_cleanup
from .errors import TestbedError

__all__ = ["Throttle", "hierarchy", "throttle", "inside", "leftovers", "remove_cgroup", "CGROUP_PREFIX"]

#: Name of every cgroup a throttle makes: ``storagebench-<pid>-<8 hex>``.
CGROUP_PREFIX = "storagebench"
_NAME_RE = re.compile(rf"{CGROUP_PREFIX}-(\d+)-[0-9a-f]{{8}}")
_V1_ROOT = Path(os.environ.get("STORAGEBENCH_BLKIO_ROOT", "/sys/fs/cgroup/blkio"))
_V1_FILES = {"riops": "blkio.throttle.read_iops_device", "wiops": "blkio.throttle.write_iops_device",
             "rbps": "blkio.throttle.read_bps_device", "wbps": "blkio.throttle.write_bps_device"}
#: How long teardown waits for the processes of a cgroup to leave it, s.
EMPTY_WAIT_S = 10.0


@dataclass(frozen=True)
class Throttle:
    """A cgroup whose block-I/O rules cap some devices.

    Attributes
    ----------
    path : str
        The cgroup's directory (``/sys/fs/cgroup/blkio/storagebench-<pid>-<hex>``).
    version : int
        1 (``blkio``) or 2 (``io.max``).
    caps : dict
        Device path -> its caps (``{"riops": 200}``, :func:`storagebench._caps.check_caps`).
    devnos : dict
        Device path -> ``major:minor``.
    """

    path: str
    version: int
    caps: dict[str, dict[str, int]] = field(default_factory=dict)
    devnos: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Provenance record: ``kind: throttle``, the cgroup, its version and the caps per device."""
        return {"kind": "throttle", "cgroup": self.path, "cgroup_version": self.version,
                "caps": {d: dict(c) for d, c in self.caps.items()}, "devnos": dict(self.devnos)}


def _v2_root() -> Path | None:
    """The cgroup v2 mount whose root hands the ``io`` controller to its children, or ``None``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                root = Path(left.split()[4])
                with contextlib.suppress(OSError):
                    if "io" in (root / "cgroup.subtree_control").read_text().split():
                        return root
    return None


def hierarchy() -> tuple[int, Path]:
    """The block-I/O cgroup hierarchy of this host: ``(1, /sys/fs/cgroup/blkio)`` or ``(2, <cgroup2 mount>)``.

    Raises
    ------
    TestbedError
        Neither v1 ``blkio`` with its throttle files nor a cgroup v2 root with ``io`` in ``cgroup.subtree_control``
        (enabling a controller host-wide is the administrator's step, not ours: the message says how).
    """
    if (_V1_ROOT / _V1_FILES["riops"]).exists():
        return 1, _V1_ROOT
    root = _v2_root()
    if root is not None:
        return 2, root
    raise TestbedError("no block-I/O throttle: neither cgroup v1 blkio (/sys/fs/cgroup/blkio/blkio.throttle.*) nor "
                       "a cgroup v2 root with the io controller enabled for its children (as root: "
                       "echo +io > /sys/fs/cgroup/cgroup.subtree_control)")


def _devno(device: str) -> str:
    try:
        st = os.stat(device)
    except OSError as exc:
        raise TestbedError(f"throttle: cannot stat {device}: {exc.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise TestbedError(f"throttle: {device} is not a block device")
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise TestbedError(f"throttle: writing {text.strip()!r} to {path} failed: {exc.strerror}") from None


def _set_rules(cg: Path, version: int, devno: str, caps: Mapping[str, int]) -> None:
    if version == 1:
        for key, value in caps.items():
            _write(cg / _V1_FILES[key], f"{devno} {value}\n")
    else:
        _write(cg / "io.max", f"{devno} " + " ".join(f"{k}={caps.get(k, 'max')}" for k in CAP_KEYS) + "\n")


def _procs(cg: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return (cg / "cgroup.procs").read_text().split()
    return []


def remove_cgroup(path: str | os.PathLike[str], wait_s: float = EMPTY_WAIT_S) -> None:
    """Remove a throttle's cgroup by its exact path, once the processes in it have left (ended).

    Only a directory named ``storagebench-<pid>-<hex>`` directly under the block-I/O hierarchy's root is ever
    removed; anything else is refused. An absent one is no error.

    Raises
    ------
    TestbedError
        Not a throttle's cgroup, or processes still in it after ``wait_s``.
    """
    cg = Path(path)
    _, root = hierarchy()
    if cg.parent != root or not _NAME_RE.fullmatch(cg.name):
        raise TestbedError(f"refusing to remove {cg}: not a storagebench throttle cgroup under {root}")
    deadline = time.monotonic() + wait_s
    while cg.is_dir():
        if not _procs(cg):
            try:
                os.rmdir(cg)
                return
            except FileNotFoundError:
                return
            except OSError:
                pass  # a process just left: the kernel frees the cgroup a moment later
        if time.monotonic() > deadline:
            raise TestbedError(f"cannot remove the throttle cgroup {cg}: processes {_procs(cg)} are still in it")
        time.sleep(0.05)


@contextlib.contextmanager
def throttle(caps_by_device: Mapping[str, Mapping[str, int]]) -> Iterator[Throttle]:
    """Make a cgroup whose rules cap each device; remove it (by its exact path) on exit.

    Call it through :func:`storagebench.testbed.throttle`, which refuses devices the testbed did not create.

    Parameters
    ----------
    caps_by_device : mapping
        Block device path -> caps (``{"riops": 200}``; :func:`storagebench._caps.check_caps`).

    Yields
    ------
    Throttle
        Pass its ``path`` as ``cgroup`` to :func:`storagebench.fio.process.spawn` (the runner does, for a
        :class:`storagebench._runner.SetUp` with ``cgroup``).

    Raises
    ------
    TestbedError
        No block-I/O hierarchy (:func:`hierarchy`), a path that is not a block device, bad caps, or the kernel
        refused a rule.
    """
    if not caps_by_device:
        raise TestbedError("throttle: no device to cap")
    try:
        caps = {str(d): check_caps(c, f"throttle of {d}") for d, c in caps_by_device.items()}
    except ValueError as exc:
        raise TestbedError(str(exc)) from None
    devnos = {d: _devno(d) for d in caps}
    version, root = hierarchy()
    cg = root / f"{CGROUP_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    key = f"cgroup-{cg.name}"
    try:
        os.mkdir(cg)
    except OSError as exc:
        raise TestbedError(f"throttle: cannot make the cgroup {cg}: {exc.strerror}") from None
    register_cleanup(key, f"throttle cgroup {cg}", lambda: remove_cgroup(cg))
    state_write(key, {"kind": "cgroup", "pid": os.getpid(), "path": str(cg)})
    try:
        for d, c in caps.items():
            _set_rules(cg, version, devnos[d], c)
        yield Throttle(path=str(cg), version=version, caps=caps, devnos=devnos)
    finally:
        try:
            remove_cgroup(cg)
        finally:
            unregister_cleanup(key)
            state_remove(key)


def _own_cgroup(version: int, root: Path) -> Path:
    """The directory of the cgroup this process is in, in the block-I/O hierarchy at ``root``."""
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, rel = line.rstrip("\n").split(":", 2)
            if (version == 1 and "blkio" in controllers.split(",")) or (version == 2 and controllers == ""):
                return root / rel.lstrip("/")
    raise TestbedError(f"this process is in no cgroup of the block-I/O hierarchy {root} (/proc/self/cgroup)")


@contextlib.contextmanager
def inside(cgroup: str | os.PathLike[str]) -> Iterator[None]:
    """Move this whole process (every thread) into a throttle's cgroup, and back to its own cgroup on exit.

    Why: a cgroup migration can wait for the kernel's RCU grace period. When each fio process entered on its own,
    between fork and exec, the two fio processes of a ka_consolidation group started ~95 ms apart in every group
    on this VM, so their measured windows were offset and two workloads sharing one capped device counted more
    than its cap between them (+1.8%). Forked from a process already inside, fio is born in the cgroup
    (:func:`storagebench.fio.process.spawn` skips the move then): measured here, 4 of 6 groups then started
    3-10 ms apart (602 I/Os shared against 600), while 2 of 6 still started ~100 ms apart for a reason not found
    yet (606-608 I/Os; docs/testbed.md, "Concurrent workloads on one bucket"). The caps bind only the capped
    devices, which storagebench itself does not read or write while measuring (preconditioning is done before,
    teardown after).

    Raises
    ------
    TestbedError
        ``cgroup`` is not a throttle's cgroup of this host's hierarchy, or the kernel refused the move.
    """
    version, root = hierarchy()
    cg = Path(cgroup)
    if cg.parent != root or not _NAME_RE.fullmatch(cg.name):
        raise TestbedError(f"refusing to enter {cg}: not a storagebench throttle cgroup under {root}")
    home = _own_cgroup(version, root)
    _write(cg / "cgroup.procs", str(os.getpid()))
    try:
        yield
    finally:
        _write(home / "cgroup.procs", str(os.getpid()))


def leftovers() -> list[dict]:
    """Every throttle cgroup of a storagebench process still present: ``{"kind": "cgroup", "path", "pid"}``."""
    try:
        _, root = hierarchy()
    except TestbedError:
        return []
    out = []
    with contextlib.suppress(OSError):
        for d in root.iterdir():
            m = _NAME_RE.fullmatch(d.name)
            if m and d.is_dir():
                out.append({"kind": "cgroup", "path": str(d), "pid": int(m.group(1))})
    return out

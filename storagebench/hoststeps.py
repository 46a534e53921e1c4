"""Host-changing steps run between fio runs: drop the page cache, set the I/O scheduler.

Each step is an object with ``show()`` (the state now, changes nothing), ``apply()`` (makes the
change, returns what it did) and ``to_dict()`` (the record kept in a run's provenance). Each is
tested for its *effect*: pages really leave the page cache, sysfs really shows the scheduler.

A study asks for them with ``host_steps`` (:data:`storagebench._specvalues.HOST_STEPS`, read by
:func:`storagebench._specvalues.parse_host_steps`: the spec's grammar is the study's, re-exported here);
the runner applies them before each run (each concurrency group) with :class:`HostSteps`, records
what they did in the run's ``provenance.json`` (``host_steps``) and puts a changed scheduler back
after the run, when it fails too. A sweep killed before it could put a scheduler back leaves a
journal that the next sweep of the study reads first (:func:`restore_journal`).

The journal lies in the results tree, which is shared and copied: it is data, never an instruction.
Each change is recorded twice: in the journal, and in a state record of its own in this user's
private state directory outside any results tree (:func:`storagebench._recorded.state_dir`,
``/run/storagebench/schedulers/<nonce>.json`` for root, 0700; ``/run`` is emptied at boot). A
scheduler is put back only for a journal entry that passes the root-action gate, whose state record
exists and says the same (device, ``major:minor``, kind, sysfs directory, loop backing file, the
scheduler set and the one before, boot, user, this journal), and whose device is, live, still that
device showing the scheduler the run set. A copied or planted journal names no state record, so it
changes nothing.

Page-cache residency is measured with ``mincore(2)`` over a read-only ``mmap`` of the file
(the same call util-linux ``fincore`` makes): :func:`resident_bytes`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import re
import secrets
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ._devices import loop_devices
from ._hostinfo import sysfs_block_dir
from ._recorded import RecordRefusedError, boot_id, read_recorded, state_dir, warn_refused, write_recorded
from ._safety import check_scheduler_device
from ._study import HOST_STEPS, SCHEDULERS, parse_host_steps  # the study key's grammar (re-exported)
from .errors import HostError, StudyError, shown

__all__ = ["DropPageCache", "DropFileCache", "SetScheduler", "resident_bytes", "meminfo_bytes", "HOST_STEPS",
           "SCHEDULERS", "parse_host_steps", "HostSteps", "restore_journal"]

_DROP_CACHES = "/proc/sys/vm/drop_caches"


def _now() -> str:
    """ISO 8601 UTC with a ``Z``, as every time in ``provenance.json``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
    if not stat.S_ISBLK(st.st_mode):
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
        self._state: Path | None = None  # its state record while the change is journalled (HostSteps)

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


# ---------------------------------------------------------------------------------------------
# a study's host steps, around each run


class HostSteps:
    """A study's ``host_steps`` for the runs on some targets: checked when made, applied around the runs.

    Made (and so checked) before the runs, applied with ``with``: entering applies the steps in the
    spec's order and gives their records (the ``host_steps`` of each run's ``provenance.json``);
    leaving puts every scheduler it changed back (in reverse order), whether the runs succeeded,
    failed or were interrupted.

    Parameters
    ----------
    spec : sequence
        The study's ``host_steps`` (:func:`parse_host_steps` form).
    targets : sequence of str
        The fio ``filename`` entries of the runs (absolute paths; ``a:b`` already split).
    allow_devices : sequence of str
        As :func:`storagebench._safety.check_run`'s.
    allow : iterable of str
        The study's ``allow``.
    journal : path, optional
        Where to keep the schedulers to put back while they are changed (removed once they are), so
        that a sweep killed in between can be repaired by the next (:func:`restore_journal`).

    Raises
    ------
    UnsafeTargetError
        A scheduler step on a device it may not change (:func:`storagebench._safety.check_scheduler_device`).
    StudyError
        The device does not offer the scheduler (the message names the device and what it offers).
    HostError
        ``drop_page_cache`` without a writable ``/proc/sys/vm/drop_caches`` (not root, or a container's
        read-only ``/proc/sys``).

    Examples
    --------
    >>> steps = HostSteps(["drop_page_cache", {"scheduler": "none"}], ["/dev/loop3"])  # doctest: +SKIP
    >>> with steps as records:  # doctest: +SKIP
    ...     run_fio()  # records: what each step did; the scheduler is put back afterwards
    """

    def __init__(self, spec: Sequence[str | Mapping[str, Any]], targets: Sequence[str], *,
                 allow_devices: Sequence[str] = (), allow: Iterable[str] = (),
                 journal: str | os.PathLike[str] | None = None):
        self.spec = list(spec)
        self.targets = [os.fspath(t) for t in targets]
        self.journal = None if journal is None else Path(journal)
        self._steps: list[Any] = []
        self._changed: list[SetScheduler] = []
        for entry in self.spec:
            name, arg = (entry, None) if isinstance(entry, str) else next(iter(entry.items()))
            if name == "drop_page_cache":
                step = DropPageCache(3 if arg is None else int(arg))
                if not step.show()["writable"]:
                    raise HostError(f"host_steps drop_page_cache: {_DROP_CACHES} is not writable (it needs root "
                                    "and a writable /proc/sys); run as root or remove the step")
                self._steps.append(step)
            elif name == "drop_file_cache":
                self._steps.append(name)  # the files are looked up when it is applied: fio may create them
            elif name == "scheduler":
                self._steps.extend(self._schedulers(str(arg), allow_devices, allow))
            else:
                raise StudyError(f"host_steps: unknown step {shown(name)}; must be one of [{', '.join(HOST_STEPS)}]")

    def _schedulers(self, name: str, allow_devices: Sequence[str], allow: Iterable[str]) -> list[SetScheduler]:
        out: dict[str, SetScheduler] = {}
        for target in self.targets:
            dev = check_scheduler_device(target, allow_devices=allow_devices, allow=allow)
            disk = dev.disk_path or dev.path
            if disk is None or disk in out:
                continue
            try:
                out[disk] = SetScheduler(disk, name)
            except HostError as exc:
                raise StudyError(f"host_steps scheduler: {exc} (the device behind {target})") from None
        return list(out.values())

    def __enter__(self) -> tuple[dict[str, Any], ...]:
        records: list[dict[str, Any]] = []
        try:
            for step in self._steps:
                if step == "drop_file_cache":
                    files = [t for t in self.targets if _cacheable(t)]
                    if files:
                        records.append(DropFileCache(files).apply() | {"paths": files})
                    else:
                        records.append({"step": "drop_file_cache", "applied_at": _now(), "paths": [],
                                        "note": "no target file existed yet: nothing of it was cached"})
                    continue
                if isinstance(step, SetScheduler):
                    self._journal_add(step)
                    self._changed.append(step)
                records.append(step.apply())
        except BaseException:
            self._restore()
            raise
        return tuple(records)

    def __exit__(self, *exc: Any) -> None:
        self._restore()

    def _restore(self) -> None:
        errors = []
        while self._changed:
            step = self._changed.pop()
            try:
                step.restore()
            except HostError as exc:
                errors.append(str(exc))
                continue
            if step._state is not None:
                step._state.unlink(missing_ok=True)
                step._state = None
        if self.journal is not None and not errors:
            self.journal.unlink(missing_ok=True)
        if errors:
            raise HostError("host_steps: could not put the scheduler back: " + "; ".join(errors))

    def _journal_add(self, step: SetScheduler) -> None:
        if self.journal is None:
            return
        current, _ = step.show_parsed()
        facts = _device_facts(step.device)
        if facts is None:
            raise HostError(f"host_steps scheduler: {step.device} is not a block device with a sysfs directory")
        nonce = secrets.token_hex(16)
        journal = Path(os.path.abspath(self.journal))
        entry = {"format": JOURNAL_FORMAT, "nonce": nonce, "device": step.device, **facts, "set": step.name,
                 "previous": current, "boot_id": boot_id(), "uid": os.geteuid(), "journal": str(journal)}
        state = state_dir(_STATE_NAME) / f"{nonce}.json"
        write_recorded(state, orjson.dumps(entry), mode=0o600)  # first: a journal entry never lacks its record
        step._state = state
        write_recorded(journal, orjson.dumps([*_journal_entries(journal), entry], option=orjson.OPT_INDENT_2),
                       mode=0o600)


def _cacheable(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode)


def _devno(device: str) -> str | None:
    try:
        st = os.stat(device)
    except OSError:
        return None
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if stat.S_ISBLK(st.st_mode) else None


#: Format of a journal entry; entries without ``format`` (an older storagebench's) are never acted on.
JOURNAL_FORMAT = 2
_STATE_NAME = "schedulers"
_NONCE = re.compile(r"[0-9a-f]{32}")


def _device_facts(device: str) -> dict[str, Any] | None:
    """What identifies a block device for good, now: ``devno`` of the node, ``sysfs`` (the whole disk's
    resolved sysfs directory, where ``queue/`` is), ``kind`` (``loop``, ``nvme``, ``vd`` ... from the sysfs
    name) and ``backing`` (a loop device's backing file as ``[major, minor, inode]``, else ``None``)."""
    devno = _devno(device)
    if devno is None:
        return None
    major, minor = (int(x) for x in devno.split(":"))
    sysdir = sysfs_block_dir(major, minor, whole_disk=True)
    if not (sysdir / "queue").is_dir():
        return None
    m = re.match(r"[a-z]+", sysdir.name)
    kind = "loop" if (sysdir / "loop").is_dir() else (m.group(0) if m else sysdir.name)
    backing = None
    if kind == "loop":
        disk_devno = (sysdir / "dev").read_text().strip() if (sysdir / "dev").exists() else ""
        for loop in loop_devices():
            if loop.devno == disk_devno and loop.backing is not None:
                backing = list(loop.backing)
    return {"devno": devno, "kind": kind, "sysfs": str(sysdir), "backing": backing}


def _journal_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a journal this user's sweeps wrote (through the gate; refused or not JSON: none)."""
    try:
        data = read_recorded(path, what="host-steps journal")
        doc = [] if data is None else orjson.loads(data)
    except (RecordRefusedError, orjson.JSONDecodeError):
        return []
    return [e for e in doc if isinstance(e, dict)] if isinstance(doc, list) else []


def _set_aside(path: Path, why: str) -> None:
    """Rename a refused journal out of the way (kept, never read again): ``<name>.refused-<time>``."""
    dest = path.with_name(f"{path.name}.refused-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')}")
    try:
        os.rename(path, dest)
    except OSError:
        return
    warn_refused(RecordRefusedError(f"the refused host-steps journal was renamed to {dest} ({why})",
                                    path=str(path), reason=why), stacklevel=3)


def _restore_entry(entry: Mapping[str, Any], journal: Path) -> tuple[bool, str]:
    """Put back one journalled scheduler when the run's own record and live state confirm it; ``(restored, note)``."""
    nonce = entry.get("nonce")
    if entry.get("format") != JOURNAL_FORMAT or not (isinstance(nonce, str) and _NONCE.fullmatch(nonce)):
        return False, ("an entry without a state record of the run that made the change (written by an older "
                       "storagebench, or not by a sweep): left alone; put the scheduler back by hand if needed")
    try:
        sdir = state_dir(_STATE_NAME)
        state_path = sdir / f"{nonce}.json"
        data = read_recorded(state_path, tree=sdir, what="scheduler state record")
    except RecordRefusedError as exc:
        return False, f"{exc}: left alone"
    if data is None:
        return False, (f"no sweep of yours recorded this change ({state_path} does not exist: a copied or planted "
                       "journal, or the host restarted since): left alone")
    try:
        state = orjson.loads(data)
    except orjson.JSONDecodeError:
        state = None
    keys = ("device", "devno", "kind", "sysfs", "backing", "set", "previous", "boot_id", "uid", "journal")
    if not isinstance(state, dict):
        return False, f"its state record {state_path} is not a JSON object: left alone"
    differs = [k for k in keys if state.get(k) != entry.get(k)]
    if differs:
        return False, (f"the journal entry does not say what the run's own record {state_path} says "
                       f"({', '.join(differs)}): left alone")
    if state["journal"] != str(journal) or state["uid"] != os.geteuid():
        return False, "the change was recorded for another results directory or user: left alone"
    state_path.unlink(missing_ok=True)  # from here on the entry is settled, whatever the device says
    if state["boot_id"] != boot_id():
        return False, "the change was made before the host restarted (another boot id): left alone"
    device, previous = state["device"], state["previous"]
    if not isinstance(device, str) or not isinstance(previous, str):
        return False, "not a journal entry: left alone"
    live = _device_facts(device)
    recorded = {k: state.get(k) for k in ("devno", "kind", "sysfs", "backing")}
    if live != recorded:
        return False, "the device is gone or is another device now (device number, sysfs or backing file): left alone"
    try:
        step = SetScheduler(device, previous)
        current, _ = step.show_parsed()
        if current != state["set"]:
            return False, f"its scheduler is {current} now, not what the sweep set: left alone"
        step._write(previous)
    except HostError as exc:
        return False, f"{exc}: left alone"
    return True, ""


def _said(value: Any) -> Any:
    """A journal's value for a message: a short printable string as it is, anything else as a bounded repr."""
    return value if isinstance(value, str) and value.isprintable() and len(value) <= 200 else shown(value)


def restore_journal(path: str | os.PathLike[str], *, tree: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Put back the schedulers a killed sweep changed and could not restore (its :class:`HostSteps` journal).

    The journal is data (see the module's doc): it is read through the root-action gate
    (:func:`storagebench._recorded.read_recorded`: a regular file owned by root or you, not writable by
    others, in directories likewise). An entry is acted on only when its state record (written by the
    sweep that made the change, in this user's private state directory) exists and says the same, the
    change was made during this boot, and the device is live still the same device (``major:minor``, the
    sysfs directory, the kind, a loop device's backing file) showing the scheduler the sweep set; anything
    else is left alone with a note. The journal is removed afterwards; a refused one is renamed to
    ``<name>.refused-<time>`` (kept, never read again) and named in a warning.

    Parameters
    ----------
    path : path
        The journal (absent: nothing to do).
    tree : path, optional
        The results tree it lies in (every directory from there down is checked); default its directory.

    Returns
    -------
    list of dict
        One record per entry: ``device``, ``previous``, ``set``, ``restored`` (bool) and ``note``.
    """
    path = Path(os.path.abspath(path))
    try:
        data = read_recorded(path, tree=tree, what="host-steps journal")
    except RecordRefusedError as exc:
        warn_refused(exc)
        _set_aside(path, exc.reason)
        return []
    if data is None:
        return []
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, list):
        warn_refused(RecordRefusedError(f"host-steps journal {path} was not acted on: it is not a JSON list",
                                        path=str(path), reason="not a JSON list"))
        _set_aside(path, "not a JSON list")
        return []
    out = []
    for entry in reversed([e for e in doc if isinstance(e, dict)]):
        restored, note = _restore_entry(entry, path)
        out.append({"device": _said(entry.get("device")), "previous": _said(entry.get("previous")),
                    "set": _said(entry.get("set")), "restored": restored, "note": note})
    path.unlink(missing_ok=True)
    return out

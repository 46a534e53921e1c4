"""Refuse fio workloads that would destroy data, judged on what fio will actually touch.

The runner calls :func:`check_run` before every run with the run's target and fio options, in
fio's own working directory; client/server runs go through :func:`check_point_hosts`. Job files
from elsewhere go through :func:`lint_jobfile`.

What a workload touches
-----------------------
Options are read under fio's canonical names first (:func:`storagebench.fio.options.canonical_options`:
``readwrite`` is ``rw``, ``fill_fs`` is ``fill_device``), so a check cannot read one spelling
while fio obeys another. The objects a run touches are its ``filename`` entries (``a:b`` is two
files; ``\\:`` escapes a colon), and, where a study opted in, ``directory``/``opendir`` trees,
``replay_redirect`` and the files a ``read_iolog`` names. Every path is resolved in fio's working
directory (relative paths are relative to *it*, not to storagebench's) and followed through
symlinks. Objects are identified by what they are, never by a path string: a regular file by
``(st_dev, st_ino)``, a device by ``major:minor``. So a hard link or a symlink to a loop device's
backing file, and a second loop device over the same image, are the same object as the first.

What is refused
---------------
Options that touch more than the target (run programs, other paths, the host's configuration, the
network) are refused unless the study names them under ``allow`` (:data:`storagebench.fio.options.GATES`).

A workload *modifies* its target when :func:`storagebench.fio.options.modifying_reason` says so
(``rw`` writes or trims, a modifying engine, an I/O-log replay, zone resets, ``unlink``).

Any workload, reads included, is refused on a **regular file** that

* has more than one hard link (another name may be the backing file of a loop device, or a file
  elsewhere that someone needs; storagebench cannot tell which object that name is),
* is shorter than the region the job needs (``offset + size``, plus ``offset_increment`` for each
  further clone) and was not created by storagebench: fio would lay the file out again, writing
  it from the start, even for a read benchmark,
* is the backing file of a loop device that is in use, or an active swap file.

A modifying workload on a **block device** (or a file backing one) is refused when the device, one
of its partitions, a device stacked on it, a loop device over it, or another loop device over the
same backing file

* is mounted, is active swap, backs ``/``, or is held by device-mapper/md (*in use*: never
  overridden: unmount or swapoff first);
* holds a partition table or a signature ``wipefs --no-act --json`` finds, or the job has no
  explicit ``size`` or asks for ``fill_device`` (*at rest*: overridden by naming that exact device
  in ``allow_devices``, compared by ``major:minor``).

Character devices are refused for modifying workloads (``/dev/sg*`` writes reach a disk) except
``/dev/null`` and ``/dev/zero``, unless named in ``allow_devices``. FIFOs, sockets and directories
given as a ``filename`` are refused. A target inside the study's own results directory is refused.

Remote fio servers cannot be inspected: a block-device target (``/dev/...``) or a modifying
workload there is refused unless the study names that host and path under ``allow_remote``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._devices import (
    DeviceReport,
    LoopInfo,
    device_report,
    file_identity,
    loop_devices,
    loops_backed_by,
    rdev_of,
    swap_entries,
)
from ._hostinfo import device_behind
from ._jobfile import parse_jobfile
from .errors import HostError, JobFileError, UnsafeJobFileError, UnsafeTargetError
from .fio import hosts as fio_hosts
from .fio import options as fo
from .records import DeviceInfo

__all__ = [
    "WRITE_RW",
    "READ_RW",
    "DeviceReport",
    "check_run",
    "check_point_hosts",
    "check_scheduler_device",
    "device_report",
    "loop_devices",
    "lint_jobfile",
    "modifying_reason",
]

WRITE_RW = fo.WRITE_RW
READ_RW = fo.READ_RW
#: character devices that hold no data.
_HARMLESS_CHR = {(1, 3), (1, 5)}  # /dev/null, /dev/zero
#: Most files an ``opendir`` tree may hold before storagebench refuses to vouch for it.
MAX_OPENDIR_FILES = 100_000


# ---------------------------------------------------------------------------------------------
# options


def _canonical(options: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    try:
        return fo.canonical_options(options, where=where)
    except JobFileError as exc:
        raise UnsafeJobFileError(str(exc)) from None


def modifying_reason(options: Mapping[str, Any]) -> str | None:
    """Why a workload changes the data of its target, or ``None``: :func:`storagebench.fio.options.modifying_reason`
    on the canonical names of ``options`` (aliases accepted).

    Raises
    ------
    UnsafeTargetError
        An unknown option, an option given twice, or an ``rw`` fio does not know.
    """
    opts = _canonical(options)
    try:
        return fo.modifying_reason(opts)
    except JobFileError as exc:
        raise UnsafeTargetError(str(exc)) from None


def _check_gates(options: Mapping[str, Any], allow: frozenset[str], where: str) -> dict[str, list[str]]:
    """Refuse gated options that are not allowed; return the gates used (for provenance)."""
    used = fo.required_gates(options)
    for gate, entries in used.items():
        names = {e.split("=", 1)[0] for e in entries}
        if gate in allow or names <= allow:
            continue
        why = fo.GATES[gate][0] if gate in fo.GATES else "is not known to storagebench to be harmless for a measurement"
        raise UnsafeJobFileError(
            f"{where + ': ' if where else ''}refusing {', '.join(entries)}: it {why}; allow it by name in the "
            f"study ('allow: [{gate}]') only if you trust it"
        )
    return used


def _kb_base(options: Mapping[str, Any]) -> int:
    try:
        kb = int(str(options.get("kb_base", 1024)).strip())
    except ValueError:
        return 1024
    return kb if kb in (1000, 1024) else 1024


def _size_of(value: Any, kb: int) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    first = re.split(r"[-:]", text, maxsplit=1)[0] if not text.startswith("-") else text
    last = re.split(r"[-:]", text)[-1]
    try:
        a, _ = fo.parse_size_or_percent(first, kb)
        b, _ = fo.parse_size_or_percent(last, kb) if last != first else (a, None)
    except ValueError:
        return None
    vals = [v for v in (a, b) if v is not None]
    return max(vals) if vals else None


def needed_bytes(options: Mapping[str, Any]) -> int | None:
    """Bytes a job needs in an existing file: ``offset + size`` (+ ``offset_increment`` per further clone).

    ``None`` when ``size`` is not given (fio then uses the file's own size and lays nothing out) or
    is a percentage of the file. Sizes are read by :func:`storagebench.fio.options.parse_size` with
    the job's ``kb_base``.
    """
    opts = _canonical(options)
    kb = _kb_base(opts)
    size = _size_of(opts.get("size"), kb)
    filesize = _size_of(opts.get("filesize"), kb)
    region = max(v for v in (size, filesize, 0) if v is not None)
    if size is None and filesize is None:
        return None
    offset = _size_of(opts.get("offset"), kb) or 0
    inc = _size_of(opts.get("offset_increment"), kb) or 0
    try:
        numjobs = max(1, int(str(opts.get("numjobs", 1))))
    except ValueError:
        numjobs = 1
    return offset + region + inc * (numjobs - 1)


def _explicit_size(options: Mapping[str, Any]) -> bool:
    """True when ``size``/``filesize`` bounds the region (missing or 0 means the whole device)."""
    opts = options
    kb = _kb_base(opts)
    for key in ("size", "filesize"):
        text = opts.get(key)
        if text is None or str(text).strip() == "":
            continue
        try:
            size, percent = fo.parse_size_or_percent(re.split(r"[-:]", str(text).strip())[0], kb)
        except ValueError:
            continue
        if (size or 0) > 0 or (percent is not None and 0 < percent < 100):
            return True
    return False


def _allowed_devnos(allow_devices: Sequence[str]) -> set[str]:
    out = set()
    if isinstance(allow_devices, (str, bytes)):
        allow_devices = [allow_devices]  # a single path, not its characters
    for entry in allow_devices:
        entry = os.fspath(entry)
        if re.fullmatch(r"\d+:\d+", entry):
            out.add(entry)
            continue
        try:
            st = os.stat(os.path.realpath(entry))
        except OSError as exc:
            raise UnsafeTargetError(
                f"allow_devices entry {entry!r} does not exist ({exc.strerror}); name a block device "
                "path or 'major:minor'"
            ) from exc
        if not (stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise UnsafeTargetError(
                f"allow_devices entry {entry!r} is not a device; name a block device path or 'major:minor'"
            )
        out.add(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    return out



# ---------------------------------------------------------------------------------------------
# the check


@dataclass
class _Ctx:
    reason: str | None
    options: dict[str, Any]
    allowed: set[str]
    cwd: str
    own_files: set[tuple[int, int, int]]
    forbidden: list[str]
    loops: list[LoopInfo]
    record: list[dict] = field(default_factory=list)


def _resolve(path: str, cwd: str) -> str:
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def check_run(
    target: str | os.PathLike[str] | None,
    options: Mapping[str, Any],
    *,
    allow_devices: Sequence[str] = (),
    allow: Iterable[str] = (),
    allow_exec: bool = False,
    cwd: str | os.PathLike[str] | None = None,
    own_files: Iterable[tuple[int, int, int]] = (),
    forbidden_roots: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """Refuse a run that would destroy data; return what was checked when it is safe.

    Parameters
    ----------
    target : str, path-like or None
        fio ``filename`` (a file, a block device, or several joined by ``:``). ``None`` uses
        ``options["filename"]``.
    options : mapping
        fio options of the run, any spelling (``rw`` or ``readwrite`` ...).
    allow_devices : sequence of str
        Devices the user named to override the *at rest* checks (signatures, partition table,
        missing ``size``), as paths or ``"major:minor"``. Devices in use are never overridden.
    allow : iterable of str
        Opt-ins for gated options (:data:`storagebench.fio.options.GATES`), as a study's ``allow``.
    allow_exec : bool
        Same as ``"exec"`` in ``allow``.
    cwd : path, optional
        fio's working directory: relative paths are resolved in it. Default the current directory.
    own_files : iterable of (major, minor, inode)
        Regular files storagebench itself created for this study (fio may grow them).
    forbidden_roots : sequence of path
        Directories no target may lie in (the study's results directory).

    Returns
    -------
    dict
        ``{"modifying": reason or None, "gates": {gate: [option=value ...]}, "targets": [{"path",
        "resolved", "kind", "identity"}]}``: what the runner records in ``provenance.json``.

    Raises
    ------
    UnsafeJobFileError
        A gated option that is not allowed, an unknown option, or one given twice.
    UnsafeTargetError
        With a message naming the object, the workload and the reason.
    """
    opts = _canonical(options)
    allowed = set(allow) | ({"exec"} if allow_exec else set())
    gates = _check_gates(opts, frozenset(allowed), "")
    try:
        reason = fo.modifying_reason(opts)
    except JobFileError as exc:
        raise UnsafeTargetError(str(exc)) from None
    ctx = _Ctx(reason, opts, allowed, os.fspath(cwd) if cwd is not None else os.getcwd(), set(own_files),
               [os.path.realpath(os.fspath(r)) for r in forbidden_roots], loop_devices())
    names: list[str] = []
    if target is not None:
        names.extend(fo.split_filenames(os.fspath(target)))
    fn = opts.get("filename")
    if fn is not None and (target is None or str(fn) != os.fspath(target)):
        names.extend(fo.split_filenames(str(fn)))
    devnos = _allowed_devnos(allow_devices)
    for name in names:
        _check_one(name, ctx, devnos, role="filename")
    for key in ("directory", "opendir"):
        if opts.get(key) not in (None, ""):
            for d in fo.split_filenames(str(opts[key])):
                _check_tree(d, ctx, devnos, walk=(key == "opendir"), role=key)
    if opts.get("replay_redirect") not in (None, ""):
        _check_one(str(opts["replay_redirect"]), ctx, devnos, role="replay_redirect",
                   reason="replay_redirect (every replayed I/O, writes included, goes to it)")
    for key in ("read_iolog", "read_iolog_chunked"):
        if key == "read_iolog" and opts.get(key) not in (None, ""):
            for f in _iolog_files(_resolve(str(opts[key]), ctx.cwd)):
                _check_one(f, ctx, devnos, role="read_iolog entry", reason="read_iolog replay")
    return {"modifying": reason, "gates": gates, "targets": ctx.record}


def check_scheduler_device(
    target: str | os.PathLike[str],
    *,
    allow_devices: Sequence[str] = (),
    allow: Iterable[str] = (),
) -> DeviceInfo:
    """The block device whose I/O scheduler a study's ``host_steps: [{scheduler: NAME}]`` may set for ``target``.

    A scheduler is a setting of the whole device, for every process of the host, so it is changed
    only on the device behind the run's own target (the target itself when it is a block device,
    else the device of the filesystem holding the file; a partition's whole disk), and only when

    * it is a loop device (a file stands in for a disk: the testbeds' devices), or
    * the user named it in ``allow_devices`` (``--allow-device``; the partition or its disk, by
      ``major:minor``), or
    * the study allows ``ioscheduler``: the opt-in fio's own ``ioscheduler`` option needs, which
      makes the same change (:data:`storagebench.fio.options.GATES`).

    Parameters
    ----------
    target : str or path-like
        One fio ``filename`` of the run (a file, possibly not created yet, or a block device).
    allow_devices : sequence of str
        As in :func:`check_run`.
    allow : iterable of str
        The study's ``allow``.

    Returns
    -------
    storagebench.records.DeviceInfo
        The device (its whole disk's node is :attr:`~storagebench.records.DeviceInfo.disk_path`).

    Raises
    ------
    UnsafeTargetError
        No block device is behind ``target`` (tmpfs, overlay ...), or it is none of the above; the
        message names the target, the device and the three ways to allow it.
    """
    tgt = os.fspath(target)
    dev = device_behind(tgt)
    if dev is None or dev.devno is None:
        raise UnsafeTargetError(
            f"host_steps scheduler: no block device is behind {tgt} (tmpfs, overlay ...), so there is no I/O "
            "scheduler to set; remove the scheduler step or put the target on a block device")
    if dev.is_loop or "ioscheduler" in set(allow):
        return dev
    allowed = _allowed_devnos(allow_devices)
    disk = dev.disk_path or dev.path or dev.name
    disk_devno = rdev_of(disk) if disk else None
    if dev.devno in allowed or (disk_devno is not None and disk_devno in allowed):
        return dev
    raise UnsafeTargetError(
        f"host_steps scheduler: would change the I/O scheduler of {disk} ({dev.devno}, behind {tgt}) for the whole "
        "host; a scheduler is set only on a loop device, on a device named in allow_devices "
        f"(--allow-device {disk}), or with allow: [ioscheduler] in the study (the opt-in of fio's own "
        "ioscheduler option)")


def _iolog_files(path: str) -> list[str]:
    """Files an fio I/O log (version 2 or 3) opens: ``FILE add|open`` lines (fio ``iolog.c``)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64 << 20)
    except OSError as exc:
        raise UnsafeTargetError(
            f"refusing read_iolog {path}: cannot read it to see what it replays ({exc.strerror})") from exc
    lines = head.decode("utf-8", "replace").splitlines()
    if not lines or not lines[0].startswith("fio version"):
        return []  # version 1: offsets only, on the job's own files
    out = []
    for line in lines[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("add", "open") and parts[0] not in out:
            out.append(parts[0])
    return out


def _check_tree(path: str, ctx: _Ctx, devnos: set[str], *, walk: bool, role: str) -> None:
    resolved = os.path.realpath(_resolve(path, ctx.cwd))
    _check_forbidden(path, resolved, ctx)
    if not os.path.isdir(resolved):
        raise UnsafeTargetError(f"refusing {role}={path}: {resolved} is not a directory")
    ctx.record.append({"path": path, "resolved": resolved, "kind": "directory", "role": role})
    if not walk:
        return
    count = 0
    for root, dirs, files in os.walk(resolved):
        dirs.sort()
        for f in sorted(files):
            count += 1
            if count > MAX_OPENDIR_FILES:
                raise UnsafeTargetError(f"refusing opendir={path}: more than {MAX_OPENDIR_FILES:,} files to check")
            _check_one(os.path.join(root, f), ctx, devnos, role="opendir file")


def _check_forbidden(name: str, resolved: str, ctx: _Ctx) -> None:
    for root in ctx.forbidden:
        if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
            raise UnsafeTargetError(
                f"refusing {name}: it resolves to {resolved}, inside the study's results directory {root}; "
                "give a target outside it"
            )


def _check_one(name: str, ctx: _Ctx, devnos: set[str], *, role: str, reason: str | None = None) -> None:
    reason = reason or ctx.reason
    what = reason or "a read workload"
    absolute = _resolve(name, ctx.cwd)
    resolved = os.path.realpath(absolute)
    via = f" (which resolves to {resolved})" if resolved != name else ""
    label = f"{name}{via}"
    _check_forbidden(name, resolved, ctx)
    try:
        st = os.stat(resolved)
    except (FileNotFoundError, NotADirectoryError):
        ctx.record.append({"path": name, "resolved": resolved, "kind": "new", "role": role})
        return  # fio will create a new regular file (or fail to, and say why)
    except OSError as exc:
        raise UnsafeTargetError(f"refusing {what} on {label}: cannot stat it ({exc.strerror})") from exc
    if stat.S_ISREG(st.st_mode):
        ident = file_identity(st)
        ctx.record.append({"path": name, "resolved": resolved, "kind": "file",
                           "identity": "{}:{}:{}".format(*ident), "size_bytes": st.st_size, "role": role})
        if st.st_nlink > 1:
            raise UnsafeTargetError(
                f"refusing {what} on {label}: it has {st.st_nlink} hard links, so another name may be the backing "
                "file of a loop device or a file someone needs; storagebench will not guess which: use a file "
                "with one link"
            )
        for s in swap_entries():
            try:
                sst = os.stat(s)
            except OSError:
                continue
            if stat.S_ISREG(sst.st_mode) and file_identity(sst) == ident:
                raise UnsafeTargetError(f"refusing {what} on {label}: it is an active swap file ({s})")
        for loop in loops_backed_by(st, ctx.loops):
            _check_device(f"/dev/{loop}", reason or "a read workload that may lay the file out", ctx, devnos,
                          label=f"{label} (the backing file of /dev/{loop}, found by inode {st.st_ino})",
                          whole_device_ok=True, reads_too=True)
        need = needed_bytes(ctx.options)
        if need is not None and st.st_size < need and ident not in ctx.own_files:
            raise UnsafeTargetError(
                f"refusing {what} on {label}: the file holds {st.st_size:,} bytes but the job needs {need:,} "
                "(offset + size), so fio would lay it out again, writing it from the start, even to read it; "
                "use a file at least that large, a new path, or a smaller size"
            )
        return
    if stat.S_ISCHR(st.st_mode):
        devno = (os.major(st.st_rdev), os.minor(st.st_rdev))
        ctx.record.append({"path": name, "resolved": resolved, "kind": "char device",
                           "identity": f"{devno[0]}:{devno[1]}", "role": role})
        if reason is None or devno in _HARMLESS_CHR or f"{devno[0]}:{devno[1]}" in devnos:
            return
        raise UnsafeTargetError(
            f"refusing {what} on {label}: it is a character device ({devno[0]}:{devno[1]}), which "
            f"may pass writes to a disk; pass --allow-device {name} to override"
        )
    if stat.S_ISBLK(st.st_mode):
        ctx.record.append({"path": name, "resolved": resolved, "kind": "block device",
                           "identity": f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", "role": role})
        if reason is not None:
            _check_device(resolved, reason, ctx, devnos, label=label)
        return
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else (
        "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file or device")
    raise UnsafeTargetError(f"refusing {what} on {label}: it is {kind}; fio's filename must be a file or a device")


def _check_device(name: str, reason: str, ctx: _Ctx, devnos: set[str], *, label: str,
                  whole_device_ok: bool = False, reads_too: bool = False) -> None:
    rep = device_report(name, probe=False, loops=ctx.loops)  # in-use checks first: they need no probing
    in_use = rep.in_use_reasons()
    if in_use:
        raise UnsafeTargetError(
            f"refusing {reason} on {label}: " + "; ".join(in_use)
            + f" (related devices: {', '.join(rep.related)}; a device in use is never overridden: unmount / "
            "swapoff it first)"
        )
    if reads_too and ctx.reason is None:
        return  # reading a backing file of an idle loop device harms nothing
    if rep.devno in devnos:
        return
    rep = device_report(name, probe=True, loops=ctx.loops)
    problems = rep.data_reasons()
    if not whole_device_ok:
        if not _explicit_size(ctx.options):
            problems.append(
                f"no explicit size (size={ctx.options.get('size')!r}) would {reason} the whole device"
            )
        if "fill_device" in ctx.options and fo.truthy(ctx.options["fill_device"]):
            problems.append("fill_device would write the whole device")
    if problems:
        raise UnsafeTargetError(
            f"refusing {reason} on {label}: " + "; ".join(problems)
            + f"; pass --allow-device {rep.resolved} to override"
        )


# ---------------------------------------------------------------------------------------------
# client/server


def is_local_host(host: str) -> bool:
    """True when fio server ``host`` runs on this machine: :func:`storagebench.fio.hosts.is_local`."""
    return fio_hosts.is_local(host)


def _server_spec_matches(arg: str, host: str) -> bool:
    try:
        a, b = fio_hosts.parse_host(arg), fio_hosts.parse_host(host)
    except HostError:
        return False
    if a.family == "sock" or b.family == "sock":
        return a.family == b.family and os.path.realpath(a.address) == os.path.realpath(b.address)
    return a.address == b.address and a.port == b.port


def server_cwd(host: str) -> str | None:
    """Working directory of the fio server process serving ``host`` on this machine, or ``None``.

    Found by scanning ``/proc/*/cmdline`` for ``fio --server=SPEC`` with the same address and port
    (or socket path) and reading ``/proc/PID/cwd``.
    """
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or os.path.basename(argv[0].decode(errors="replace")) != "fio":
            continue
        for a in argv:
            text = a.decode(errors="replace")
            if text.startswith("--server=") and _server_spec_matches(text[len("--server="):], host):
                try:
                    return os.readlink(d / "cwd")
                except OSError:
                    return None
    return None


def _same_host(a: str, b: str) -> bool:
    try:
        return fio_hosts.parse_host(a).label == fio_hosts.parse_host(b).label
    except HostError:
        return False


def check_remote(
    target: str,
    options: Mapping[str, Any],
    host: str,
    *,
    allow_remote: Mapping[str, Sequence[str]] | None = None,
    allow: Iterable[str] = (),
) -> dict[str, Any]:
    """Refuse what cannot be checked on a remote fio server unless the study names it.

    A block-device target (a path under ``/dev/``) or a modifying workload on a remote server is
    refused unless ``allow_remote`` lists that path for that host (or for ``"*"``).

    Parameters
    ----------
    target : str
        fio ``filename`` on the server.
    options : mapping
        The run's fio options.
    host : str
        The server (``host[,port]``, ``ip:host,port``, label ``host:port``).
    allow_remote : mapping, optional
        Host (as written in the study's ``hosts``, or ``"*"``) -> paths the user vouches for.
    allow : iterable of str
        The study's opt-ins (gates are checked for remote runs too).

    Returns
    -------
    dict
        ``{"host", "modifying", "targets", "overridden"}`` for ``provenance.json``.

    Raises
    ------
    UnsafeTargetError, UnsafeJobFileError
    """
    opts = _canonical(options)
    _check_gates(opts, frozenset(allow), f"server {host}")
    try:
        reason = fo.modifying_reason(opts)
    except JobFileError as exc:
        raise UnsafeTargetError(str(exc)) from None
    named: set[str] = set()
    for key, paths in (allow_remote or {}).items():
        if key == "*" or key == host or _same_host(key, host):
            named.update(paths)
    overridden = []
    for path in fo.split_filenames(target):
        if path in named:
            overridden.append(path)
            continue
        if path.startswith("/dev/"):
            raise UnsafeTargetError(
                f"refusing {reason or 'a workload'} on {path} on remote fio server {host}: a block device there cannot "
                f"be inspected from here; if it holds no data you need, name it in the study: "
                f"allow_remote: {{{host!r}: [{path!r}]}}"
            )
        if reason is not None:
            raise UnsafeTargetError(
                f"refusing {reason} on {path} on remote fio server {host}: storagebench cannot check what that path "
                f"is on the server; if it holds no data you need, name it in the study: "
                f"allow_remote: {{{host!r}: [{path!r}]}}"
            )
    return {"host": host, "modifying": reason, "targets": fo.split_filenames(target), "overridden": overridden}


def check_point_hosts(
    target: str,
    options: Mapping[str, Any],
    hosts: Sequence[str],
    *,
    allow_devices: Sequence[str] = (),
    allow: Iterable[str] = (),
    allow_remote: Mapping[str, Sequence[str]] | None = None,
    forbidden_roots: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """The checks of one client/server point: :func:`check_run` for servers on this machine,
    :func:`check_remote` for the others.

    A server on this machine resolves a relative path in its own working directory, which is not
    known here: relative targets are refused for client/server runs.

    Returns
    -------
    dict
        ``{"hosts": {host: record}}`` for ``provenance.json``.
    """
    records: dict[str, Any] = {}
    allow = list(allow)
    for host in hosts:
        if is_local_host(host):
            cwd = "/"
            if any(not os.path.isabs(p) for p in fo.split_filenames(target)):
                found = server_cwd(host)
                if found is None:
                    raise HostError(
                        f"fio server {host} is not running on this machine (no 'fio --server' process for that "
                        f"address), so the relative target {target!r}, which fio resolves in the server's working "
                        "directory, cannot be checked; start the server, or give an absolute path"
                    )
                cwd = found
            rec = check_run(target, options, allow_devices=allow_devices, allow=allow, cwd=cwd,
                            forbidden_roots=forbidden_roots)
            records[host] = {"local": True, "server_cwd": cwd, **rec}
        else:
            records[host] = {"local": False, **check_remote(target, options, host, allow_remote=allow_remote,
                                                            allow=allow)}
    return {"hosts": records}


# ---------------------------------------------------------------------------------------------
# job files from elsewhere


def lint_jobfile(
    text: str,
    *,
    allow: Iterable[str] = (),
    allow_exec: bool = False,
    allow_devices: Sequence[str] = (),
    check_targets: bool = True,
    base_dir: str | os.PathLike[str] | None = None,
) -> None:
    """Refuse a fio job file from elsewhere that runs programs, touches other paths, or writes data.

    Parameters
    ----------
    text : str
        The job file, read by :func:`storagebench._jobfile.parse_jobfile` as fio reads it (``include``
        files too; values cut at ``;``/``#``).
    allow : iterable of str
        Opt-ins for gated options, as a study's ``allow``.
    allow_exec : bool
        Same as ``"exec"`` in ``allow``.
    allow_devices : sequence of str
        As in :func:`check_run`.
    check_targets : bool
        Also apply :func:`check_run` to each job's ``filename`` (relative to ``base_dir``).
    base_dir : path, optional
        Directory relative ``include`` paths and targets are read from.

    Raises
    ------
    UnsafeJobFileError
        A refused option (the message names the section and the option), an unknown option, or a
        value fio would substitute (``$``).
    UnsafeTargetError
        A job would harm a target.
    JobFileError
        The text cannot be parsed.
    """
    allowed = set(allow) | ({"exec"} if allow_exec else set())
    parsed = parse_jobfile(text, base_dir=base_dir)
    for name, raw in parsed.sections:  # [global] sections too: an exec option there is refused
        where = f"job file section [{name}]"
        for key, value in raw.items():
            if value is not None and "$" in value:
                raise UnsafeJobFileError(
                    f"{where}: {key}={value!r}: fio substitutes '${{VAR}}' and '$keyword' at run time, so what is "
                    "checked here is not what fio would run; write the value out"
                )
        _check_gates(_canonical(raw, where), frozenset(allowed), where)
    for name, raw in parsed.jobs:
        where = f"job file section [{name}]"
        opts = _canonical(raw, where)
        if check_targets and opts.get("filename"):
            try:
                check_run(None, opts, allow_devices=allow_devices, allow=allowed,
                          cwd=base_dir if base_dir is not None else os.getcwd())
            except JobFileError:
                raise
            except UnsafeTargetError as exc:
                raise UnsafeTargetError(f"{where}: {exc}") from exc

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

Which bytes a job touches is worked out once, as fio 3.33 works it out, by
:func:`storagebench.fio.region.job_region` (``size`` and ``offset`` as percentages of the real
file or device, a percentage above 100 being a byte count near 2**64 to fio, ``offset_increment``
per ``numjobs`` clone, ``filesize`` ranges, ``size`` split among the files of ``filename``,
``fill_device``, ``file_append``; ``io_size`` bounds the I/O, not the region).

Any workload, reads included, is refused on a **regular file** that

* has more than one hard link (another name may be the backing file of a loop device, or a file
  elsewhere that someone needs; storagebench cannot tell which object that name is),
* would be laid out again: a region ends past the file's end, so fio unlinks the file and writes it
  from the start, even for a read benchmark (the message names the file, its size, the region's end
  and the option values that put it there). A file storagebench created for the study may grow; a
  loop device's backing file never,
* is the backing file of a loop device that is in use, or an active swap file.

A modifying workload on the backing file of an attached loop device is refused unless that loop
device is named in ``allow_devices`` (and then gets the device's checks below).

A modifying workload on a **block device** (or a file backing one) is refused when the device, one
of its partitions, a device stacked on it, a loop device over it, or another loop device over the
same backing file (at any offset)

* is mounted, is active swap, backs ``/``, or is held by device-mapper/md (*in use*: never
  overridden: unmount or swapoff first);
* holds a partition table or a signature ``wipefs --no-act --json`` finds, or the job's region is
  the whole device (no explicit ``size``, ``size=100%``, ``fill_device``) (*at rest*). A loop
  device's backing file is probed too, from its byte 0, when no loop device starts there. Each such
  problem is lifted only by naming, in ``allow_devices``, the object that holds it (compared by
  ``major:minor``, a backing file by inode): naming a whole disk does not lift its partition's
  filesystem, naming one loop device does not lift another's.

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
from pathlib import Path
from typing import Any

from ._devices import (
    DeviceReport,
    device_report,
    file_owner,
    loop_devices,
    rdev_of,
)
from ._hostinfo import device_behind
from ._jobfile import parse_jobfile
from ._objectchecks import MAX_OPENDIR_FILES as MAX_OPENDIR_FILES  # reached here too, as before
from ._objectchecks import RunChecks, check_object, check_tree, iolog_files, job_regions, resolve
from .errors import HostError, JobFileError, UnsafeJobFileError, UnsafeTargetError
from .fio import hosts as fio_hosts
from .fio import options as fo
from .fio.region import job_region
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


def needed_bytes(options: Mapping[str, Any], real_size: int | None = None, *, path: str | None = None,
                 kind: str = "file") -> int | None:
    """Bytes a job needs in one file: the largest end of its regions there (:func:`storagebench.fio.region.job_region`).

    Parameters
    ----------
    options : mapping
        The job's fio options (any spelling).
    real_size : int, optional
        The file's (or device's) size in bytes; ``None`` for a file that does not exist.
        Percentages (``size=50%``, ``offset=10%``) are taken of it, as fio takes them.
    path : str, optional
        The file, one of the job's ``filename`` entries (default: the first, or the only one).
    kind : {"file", "block", "char"}

    Returns
    -------
    int or None
        ``(offset + io_size) mod 2**64`` as fio 3.33 compares it with the real size, for the
        clone that ends last; ``None`` when the job does not size that file (I/O-log replay).

    Raises
    ------
    UnsafeTargetError
        A size or offset fio could not read.
    """
    opts = _canonical(options)
    names = fo.split_filenames(str(opts["filename"])) if opts.get("filename") not in (None, "") else []
    path = path if path is not None else (names[0] if names else "file")
    if path not in names:
        opts = {**opts, "filename": fo.join_filenames([path])}
    try:
        regions = job_region(opts, {path: real_size}, kinds={path: kind})
    except ValueError as exc:
        raise UnsafeTargetError(f"cannot work out the job's region in {path}: {exc}") from None
    ends = [r.fio_end for r in regions if r.path == path]
    return max(ends) if ends else None


def _allowed_devnos(allow_devices: Sequence[str]) -> set[str]:
    """``major:minor`` of each named device, and ``file:major:minor:inode`` of each named regular file
    (a loop device's backing file holding a signature that no loop device shows)."""
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
        if stat.S_ISREG(st.st_mode):
            out.add(file_owner(st))
            continue
        if not (stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise UnsafeTargetError(
                f"allow_devices entry {entry!r} is not a device; name a block device path or 'major:minor'"
            )
        out.add(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    return out


# ---------------------------------------------------------------------------------------------
# the check


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
    create_dirs: bool = True,
) -> dict[str, Any]:
    """Refuse a run that would destroy data or measure the wrong thing; return what was checked when it is safe.

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
    create_dirs : bool
        A new file's missing directories may be created by fio; false refuses them (the runner's default,
        ``run_study(create_dirs=...)``). A new file under ``/dev`` (not ``/dev/shm``) is always refused.

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
    ctx = RunChecks(reason, opts, allowed, os.fspath(cwd) if cwd is not None else os.getcwd(), set(own_files),
               [os.path.realpath(os.fspath(r)) for r in forbidden_roots], loop_devices())
    names: list[str] = []
    if target is not None:
        names.extend(fo.split_filenames(os.fspath(target)))
    fn = opts.get("filename")
    if fn is not None and (target is None or str(fn) != os.fspath(target)):
        names.extend(fo.split_filenames(str(fn)))
    ctx.devnos = _allowed_devnos(allow_devices)
    ctx.create_dirs = create_dirs
    # the regions fio computes: the target's files are one job's files (size is split among them)
    main = fo.split_filenames(os.fspath(target)) if target is not None else names
    ctx.regions = job_regions(main, opts, ctx.cwd)
    extra = [n for n in names if n not in main]
    for n, rs in job_regions(extra, opts, ctx.cwd).items():
        ctx.regions.setdefault(n, rs)
    for name in names:
        check_object(name, ctx, role="filename")
    for key in ("directory", "opendir"):
        if opts.get(key) not in (None, ""):
            for d in fo.split_filenames(str(opts[key])):
                check_tree(d, ctx, walk=(key == "opendir"), role=key)
    if opts.get("replay_redirect") not in (None, ""):
        check_object(str(opts["replay_redirect"]), ctx, role="replay_redirect",
                   reason="replay_redirect (every replayed I/O, writes included, goes to it)")
    for key in ("read_iolog", "read_iolog_chunked"):
        if key == "read_iolog" and opts.get(key) not in (None, ""):
            for f in iolog_files(resolve(str(opts[key]), ctx.cwd)):
                check_object(f, ctx, role="read_iolog entry", reason="read_iolog replay")
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

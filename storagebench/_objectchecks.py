"""The checks of one object a fio run touches: a file, a device, a directory tree (part of :mod:`storagebench._safety`).

:func:`storagebench._safety.check_run` reads the run's options and targets into a :class:`RunChecks`
and calls :func:`check_object` for each ``filename`` entry, ``replay_redirect`` and the files a ``read_iolog``
names, and :func:`check_tree` for ``directory``/``opendir``. What is refused and why is in
:mod:`storagebench._safety`'s docstring; the facts come from :mod:`storagebench._devices` and the regions from
:func:`storagebench.fio.region.job_region`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._devices import (
    DeviceReport,
    LoopInfo,
    block_size_bytes,
    device_report,
    file_identity,
    loops_backed_by,
    swap_entries,
)
from .errors import UnsafeTargetError, display_path
from .fio import options as fo
from .fio.region import FileRegion, job_region

#: character devices that hold no data.
_HARMLESS_CHR = {(1, 3), (1, 5)}  # /dev/null, /dev/zero
#: Most files an ``opendir`` tree may hold before storagebench refuses to vouch for it.
MAX_OPENDIR_FILES = 100_000


@dataclass
class RunChecks:
    """What the checks of one run share, and what they found.

    Attributes
    ----------
    reason : str or None
        Why the workload modifies its target (``None``: it only reads).
    options : dict
        The run's fio options under canonical names.
    allowed : set of str
        The study's opt-ins (gates).
    cwd : str
        fio's working directory (relative paths are resolved in it).
    own_files : set of (int, int, int)
        Regular files storagebench created for the study (fio may grow them).
    forbidden : list of str
        Directories no target may lie in.
    loops : list of LoopInfo
        The loop devices of this machine.
    devnos : set of str
        The devices and files named in ``allow_devices`` (``major:minor``, ``file:major:minor:inode``).
    record : list of dict
        One entry per object checked, for ``provenance.json``.
    regions : dict
        fio's regions of the job, by file name.
    create_dirs : bool
        A new file's missing parent directories may be created (fio makes them silently); when false, a
        ``filename`` whose directory does not exist is refused.
    """

    reason: str | None
    options: dict[str, Any]
    allowed: set[str]
    cwd: str
    own_files: set[tuple[int, int, int]]
    forbidden: list[str]
    loops: list[LoopInfo]
    devnos: set[str] = field(default_factory=set)
    record: list[dict] = field(default_factory=list)
    regions: dict[str, list[FileRegion]] = field(default_factory=dict)
    create_dirs: bool = True


def _what_is(path: str, cwd: str) -> tuple[int | None, str]:
    """``(real size, kind)`` of one fio filename as fio's ``get_file_sizes`` sees it (size ``None``: missing)."""
    try:
        st = os.stat(os.path.realpath(resolve(path, cwd)))
    except OSError:
        return None, "file"
    if stat.S_ISREG(st.st_mode):
        return st.st_size, "file"
    if stat.S_ISBLK(st.st_mode):
        return block_size_bytes(st), "block"
    return -1, "char"


def job_regions(names: Sequence[str], opts: Mapping[str, Any], cwd: str) -> dict[str, list[FileRegion]]:
    """:func:`storagebench.fio.region.job_region` of the job on ``names``, by name."""
    if not names:
        return {}
    sizes, kinds = {}, {}
    for n in names:
        sizes[n], kinds[n] = _what_is(n, cwd)
    try:
        regions = job_region({**opts, "filename": fo.join_filenames(list(names))}, sizes, kinds=kinds)
    except ValueError as exc:
        raise UnsafeTargetError(f"cannot work out which bytes of {', '.join(names)} the job touches: {exc}") from None
    out: dict[str, list[FileRegion]] = {}
    for r in regions:
        out.setdefault(r.path, []).append(r)
    return out


def resolve(path: str, cwd: str) -> str:
    """``path`` as fio resolves it in its working directory ``cwd`` (not followed through symlinks)."""
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def iolog_files(path: str) -> list[str]:
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


def check_tree(path: str, ctx: RunChecks, *, walk: bool, role: str) -> None:
    """``directory``/``opendir`` ``path``: a directory outside the results; with ``walk``, each file in it checked."""
    resolved = os.path.realpath(resolve(path, ctx.cwd))
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
            check_object(os.path.join(root, f), ctx, role="opendir file")


def _check_forbidden(name: str, resolved: str, ctx: RunChecks) -> None:
    for root in ctx.forbidden:
        if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
            raise UnsafeTargetError(
                f"refusing {name}: it resolves to {resolved}, inside the study's results directory {root}; "
                "give a target outside it"
            )


def _region_text(r: FileRegion) -> str:
    clone = f" for clone {r.subjob}" if r.subjob else ""
    end = f"{r.end:,}" + (" (wrapping past 2**64 to " + f"{r.fio_end:,})" if r.end != r.fio_end else "")
    bound = "up to " if not r.exact else ""
    return f"fio's region{clone}: bytes {r.start:,}-{bound}{end}, from {r.basis}"


def _layout_refusal(what: str, label: str, size: int, r: FileRegion, why: str) -> UnsafeTargetError:
    return UnsafeTargetError(
        f"refusing {what} on {label}: the file holds {size:,} bytes but the job needs {r.fio_end:,} "
        f"({_region_text(r)}), so fio would lay it out again: it unlinks the file and writes it from the start, "
        f"even for a read-only job{why}; use a file at least that large, a new path, or a size/offset inside "
        "the file" + (" (a percentage above 100 is not a percentage to fio 3.33)"
                      if "percentage above 100" in r.basis else "")
    )


def _check_new(name: str, resolved: str, ctx: RunChecks, role: str) -> None:
    """A path that does not exist yet: never under ``/dev`` (but ``/dev/shm``, tmpfs, where a RAM baseline is meant
    and warned about as memory), and in an existing directory unless ``create_dirs``.

    fio creates a missing file (and its directories) without a word: ``/dev/sdz`` misspelt becomes a
    file on devtmpfs, whose "device" answers from memory; ``/mnt/tset/x`` a directory on the root file
    system instead of the mount meant.
    """
    shown_name = repr(display_path(name))
    if (resolved == "/dev" or resolved.startswith("/dev/")) and not resolved.startswith("/dev/shm/"):
        raise UnsafeTargetError(
            f"refusing {role} {shown_name}: it does not exist, and fio would create it as a file in /dev, which is "
            "memory (devtmpfs), so the run would measure RAM, not a device; name an existing block device (see lsblk or "
            "/dev/disk/by-id) or a file on the file system you mean to measure")
    parent = os.path.dirname(resolved)
    if not ctx.create_dirs and parent and not os.path.isdir(parent):
        raise UnsafeTargetError(
            f"refusing {role} {shown_name}: its directory {display_path(parent)!r} does not exist, and fio would create it "
            "silently (perhaps on another file system than the one meant); create the directory, fix the path, "
            "or allow it with --create-dirs (run_study(..., create_dirs=True))")


def check_object(name: str, ctx: RunChecks, *, role: str, reason: str | None = None) -> None:
    """Refuse what a workload (``reason``, default the run's) must not do to ``name``; record what it is."""
    reason = reason or ctx.reason
    what = reason or "a read workload"
    absolute = resolve(name, ctx.cwd)
    resolved = os.path.realpath(absolute)
    via = f" (which resolves to {resolved})" if resolved != name else ""
    label = f"{name}{via}"
    _check_forbidden(name, resolved, ctx)
    try:
        st = os.stat(resolved)
    except (FileNotFoundError, NotADirectoryError):
        _check_new(name, resolved, ctx, role)
        ctx.record.append({"path": name, "resolved": resolved, "kind": "new", "role": role})
        return  # fio will create a new regular file (or fail to, and say why)
    except OSError as exc:
        raise UnsafeTargetError(f"refusing {what} on {label}: cannot stat it ({exc.strerror})") from exc
    regions = ctx.regions.get(name, [])
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
        backed = loops_backed_by(st, ctx.loops)
        for loop in backed:  # in use: refused for any workload, reads included
            _check_in_use(f"/dev/{loop}", reason or "a read workload that may lay the file out", ctx,
                          label=f"{label} (the backing file of /dev/{loop}, found by inode {st.st_ino})")
        lay = next((r for r in regions if r.lays_out), None)
        if lay is not None and (ident not in ctx.own_files or backed):
            why = (f"; it is the backing file of {', '.join('/dev/' + b for b in backed)}, whose data that destroys"
                   if backed else "")
            raise _layout_refusal(what, label, st.st_size, lay, why)
        if reason is not None and backed:
            devs = {lp.name: lp.devno for lp in ctx.loops}
            unnamed = [f"/dev/{b}" for b in backed if devs.get(b, "") not in ctx.devnos]
            if unnamed:
                names = ", ".join(f"/dev/{b}" for b in backed)
                raise UnsafeTargetError(
                    f"refusing {reason} on {label}: it is the backing file of {names}, so writing it changes what "
                    f"{'they hold' if len(backed) > 1 else 'that device holds'} behind the device's back; write the "
                    "device itself, detach it (losetup -d) if nothing needs it, or pass "
                    + " ".join(f"--allow-device {d}" for d in unnamed) + " to override"
                )
            for loop in backed:
                _check_device(f"/dev/{loop}", reason, ctx,
                              label=f"{label} (the backing file of /dev/{loop}, found by inode {st.st_ino})",
                              whole_device_ok=True)
        return
    if stat.S_ISCHR(st.st_mode):
        devno = (os.major(st.st_rdev), os.minor(st.st_rdev))
        ctx.record.append({"path": name, "resolved": resolved, "kind": "char device",
                           "identity": f"{devno[0]}:{devno[1]}", "role": role})
        if reason is None or devno in _HARMLESS_CHR or f"{devno[0]}:{devno[1]}" in ctx.devnos:
            return
        raise UnsafeTargetError(
            f"refusing {what} on {label}: it is a character device ({devno[0]}:{devno[1]}), which "
            f"may pass writes to a disk; pass --allow-device {name} to override"
        )
    if stat.S_ISBLK(st.st_mode):
        ctx.record.append({"path": name, "resolved": resolved, "kind": "block device",
                           "identity": f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", "role": role})
        if reason is not None:
            _check_device(resolved, reason, ctx, label=label, regions=regions)
        return
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else (
        "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file or device")
    raise UnsafeTargetError(f"refusing {what} on {label}: it is {kind}; fio's filename must be a file or a device")


def _whole_device(ctx: RunChecks, regions: Sequence[FileRegion]) -> str | None:
    """Why the job's region is the whole device, or ``None`` (fio ``fill_device``, or a region from byte 0 to the end)."""
    if "fill_device" in ctx.options and fo.truthy(ctx.options["fill_device"]):
        return "fill_device would write the whole device"
    if not regions:
        # no region known (the job replays a log, or no size): judge by size alone
        size = ctx.options.get("size")
        return None if size not in (None, "") else f"no explicit size (size={size!r}) would cover the whole device"
    for r in regions:
        if r.start == 0 and r.fio_end >= r.real_size:
            size = ctx.options.get("size")
            if size in (None, "") or str(size).strip() in ("0",):
                return (f"no explicit size (size={size!r}): the job's region is the whole device "
                        f"(bytes 0-{r.real_size:,})")
            return f"the job's region is the whole device ({_region_text(r)}; the device has {r.real_size:,} bytes)"
    return None


def _check_in_use(name: str, reason: str, ctx: RunChecks, *, label: str) -> DeviceReport:
    """Refuse a device that is in use (mounted, swap, ``/``, held): never overridden; its report (not probed)."""
    rep = device_report(name, probe=False, loops=ctx.loops)  # in-use checks first: they need no probing
    in_use = rep.in_use_reasons()
    if in_use:
        raise UnsafeTargetError(
            f"refusing {reason} on {label}: " + "; ".join(in_use)
            + f" (related devices: {', '.join(rep.related)}; a device in use is never overridden: unmount / "
            "swapoff it first)"
        )
    return rep


def _check_device(name: str, reason: str, ctx: RunChecks, *, label: str, whole_device_ok: bool = False,
                  regions: Sequence[FileRegion] = ()) -> None:
    """Refuse a modifying workload on a device in use, or holding data not named in ``allow_devices``."""
    rep = _check_in_use(name, reason, ctx, label=label)
    problems: list[tuple[str, str, str]] = []
    if not whole_device_ok:
        whole = _whole_device(ctx, regions)
        if whole is not None and rep.devno not in ctx.devnos:
            problems.append((rep.devno, rep.resolved, whole))
    # every related device is probed (its partitions, loop devices over it, other loop devices over the same
    # image at any offset, and the image itself where no loop device starts at its byte 0); each problem is
    # lifted only by naming the object that holds it
    rep = device_report(name, probe=True, loops=ctx.loops)
    problems.extend(rep.data_problems(ctx.devnos))
    if problems:
        owners = list(dict.fromkeys(path for _, path, _ in problems))
        raise UnsafeTargetError(
            f"refusing {reason} on {label}: " + "; ".join(text for _, _, text in problems)
            + "; if that data is not needed, pass " + " ".join(f"--allow-device {o}" for o in owners)
            + " to override (each object that holds it must be named: naming a whole disk or another loop "
            "device does not lift a partition's or another device's data)"
        )

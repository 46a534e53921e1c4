"""What is on this machine's devices: loop devices and what backs them, what is on and above a block device.

Read from the kernel, never from a path string: a loop device's backing file by the
``LOOP_GET_STATUS64`` ioctl (``lo_device``, ``lo_inode``), a regular file by ``(st_dev, st_ino)``, a
device by ``major:minor``; mounts from ``/proc/self/mountinfo``, swap from ``/proc/swaps``, holders and
partitions from ``/sys/class/block``, signatures from ``wipefs --no-act --json`` (else ``blkid -p``).
:mod:`storagebench._safety` judges a run on these facts; this module only gathers them.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import shutil
import stat
import struct
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._hostinfo import mountinfo, sysfs_block_dir, unescape_mount
from .errors import UnsafeTargetError

__all__ = [
    "LoopInfo",
    "loop_devices",
    "loops_backed_by",
    "file_identity",
    "DeviceReport",
    "device_report",
    "rdev_of",
    "swap_entries",
]

_SWAPS = "/proc/swaps"


# ---------------------------------------------------------------------------------------------
# loop devices, by what backs them


@dataclass(frozen=True)
class LoopInfo:
    """One attached loop device and what backs it.

    Attributes
    ----------
    name : str
        ``loop3``.
    devno : str
        ``"7:3"``.
    backing_file : str
        Path as the kernel records it (``/sys/block/loopN/loop/backing_file``), ``" (deleted)"`` removed.
    backing : tuple of (int, int, int) or None
        ``(major, minor, inode)`` of the backing file: the filesystem's device and the inode, from
        the ``LOOP_GET_STATUS64`` ioctl (``lo_device``, ``lo_inode``; needs read access to the
        device, i.e. root) or else from ``stat`` of the recorded path.
    """

    name: str
    devno: str
    backing_file: str
    backing: tuple[int, int, int] | None


_LOOP_GET_STATUS64 = 0x4C05
_LOOP_INFO64 = struct.Struct("=QQQQQIIII64s64s32sQQ")


def _decode_dev(dev: int) -> tuple[int, int]:
    """Linux ``new_decode_dev`` of a 64-bit ``huge_encode_dev`` value (``lo_device``)."""
    return (dev & 0xFFF00) >> 8, (dev & 0xFF) | ((dev >> 12) & 0xFFF00)


def _loop_status(name: str) -> tuple[int, int, int] | None:
    try:
        fd = os.open(f"/dev/{name}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        buf = array.array("B", bytes(_LOOP_INFO64.size))
        fcntl.ioctl(fd, _LOOP_GET_STATUS64, buf, True)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = _LOOP_INFO64.unpack(buf.tobytes())
    major, minor = _decode_dev(fields[0])
    return major, minor, fields[1]


def _read(path: Path | str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def loop_devices() -> list[LoopInfo]:
    """Every attached loop device with its backing file's identity (see :class:`LoopInfo`)."""
    out = []
    for d in sorted(Path("/sys/block").glob("loop*")):
        backing = _read(d / "loop" / "backing_file")
        if not backing:
            continue
        path = backing.removesuffix(" (deleted)")
        ident = _loop_status(d.name)
        if ident is None:
            try:
                st = os.stat(path)
                ident = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
            except OSError:
                ident = None
        out.append(LoopInfo(d.name, _read(d / "dev"), path, ident))
    return out


def file_identity(st: os.stat_result) -> tuple[int, int, int]:
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


def loops_backed_by(st: os.stat_result, loops: Sequence[LoopInfo] | None = None) -> list[str]:
    """Loop devices backed by the object ``st`` describes: a file (by inode) or a block device (by number)."""
    loops = loop_devices() if loops is None else loops
    out = []
    if stat.S_ISREG(st.st_mode):
        ident = file_identity(st)
        out = [lp.name for lp in loops if lp.backing == ident]
    elif stat.S_ISBLK(st.st_mode):
        want = (os.major(st.st_rdev), os.minor(st.st_rdev))
        for lp in loops:
            try:
                bst = os.stat(lp.backing_file)
            except OSError:
                continue
            if stat.S_ISBLK(bst.st_mode) and (os.major(bst.st_rdev), os.minor(bst.st_rdev)) == want:
                out.append(lp.name)
    return sorted(out)


def _sibling_loops(name: str, loops: Sequence[LoopInfo]) -> list[str]:
    """Other loop devices over the same backing file as loop device ``name``."""
    me = next((lp for lp in loops if lp.name == name), None)
    if me is None or me.backing is None:
        return []
    return sorted(lp.name for lp in loops if lp.backing == me.backing and lp.name != name)


# ---------------------------------------------------------------------------------------------
# block devices


@dataclass(frozen=True)
class DeviceReport:
    """What is on and above one block device.

    Attributes
    ----------
    path, resolved : str
        The path as given, and ``os.path.realpath`` of it.
    devno : str
        ``"major:minor"``.
    name : str
        Kernel name (``loop3``, ``vda1``).
    related : tuple of str
        Kernel names of the device, its partitions, holders, loop devices backed by it, and other
        loop devices over the same backing file.
    mounts, swaps : tuple of str
        Mounts / active swap areas on related devices.
    root : bool
        A related device backs ``/``.
    holders, partitions : tuple of str
    signatures : tuple of dict
        ``wipefs --no-act --json`` entries (``device``, ``offset``, ``type``, ``uuid``, ``label``).
    """

    path: str
    resolved: str
    devno: str
    name: str
    related: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()
    swaps: tuple[str, ...] = ()
    root: bool = False
    holders: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    signatures: tuple[dict, ...] = field(default_factory=tuple)

    def in_use_reasons(self) -> list[str]:
        """Reasons that no override lifts (mounted, swap, root, held)."""
        out = []
        if self.root:
            out.append("it backs the root filesystem")
        if self.mounts:
            out.append("it is mounted (" + "; ".join(self.mounts) + ")")
        if self.swaps:
            out.append("it is in use as swap (" + "; ".join(self.swaps) + ")")
        if self.holders:
            out.append("it is held by " + ", ".join(self.holders) + " (device-mapper/LVM/md on top)")
        return out

    def data_reasons(self) -> list[str]:
        """Reasons that ``allow_devices`` lifts (partition table, signatures)."""
        out = []
        if self.partitions:
            out.append("it holds a partition table (partitions " + ", ".join(self.partitions) + ")")
        for sig in self.signatures:
            kind = sig.get("type") or "unknown"
            extra = []
            if sig.get("uuid"):
                extra.append(f"UUID {sig['uuid']}")
            if sig.get("label"):
                extra.append(f"label {sig['label']!r}")
            where = sig.get("device") or self.name
            text = f"{where} holds a {kind} signature at offset {sig.get('offset', '?')}"
            if kind in ("dos", "gpt", "PMBR", "atari", "sun", "sgi", "bsd", "mac"):
                text = f"{where} holds a {kind} partition table"
            elif kind in _KINDS:
                text = f"{where} holds {_article(kind)} {kind} {_KINDS[kind]}"
            elif kind != "unknown":
                text = f"{where} holds {_article(kind)} {kind} filesystem signature"
            if extra:
                text += " (" + ", ".join(extra) + ")"
            out.append(text)
        return out


_KINDS = {
    "LVM2_member": "signature (an LVM physical volume)",
    "linux_raid_member": "signature (an md RAID member)",
    "swap": "area",
    "crypto_LUKS": "signature (an encrypted volume)",
    "zfs_member": "signature (a ZFS pool member)",
}


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _devno_of_name(name: str) -> str:
    return _read(f"/sys/class/block/{name}/dev")


def _partitions(sysdir: Path) -> list[str]:
    out = []
    try:
        for child in sysdir.iterdir():
            if (child / "partition").exists():
                out.append(child.name)
    except OSError:
        pass
    return sorted(out)


def _holders(name: str) -> list[str]:
    try:
        return sorted(p.name for p in Path(f"/sys/class/block/{name}/holders").iterdir())
    except OSError:
        return []


def rdev_of(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def swap_entries() -> list[str]:
    lines = _read(_SWAPS).splitlines()[1:]
    return [unescape_mount(line.split()[0]) for line in lines if line.split()]


def _signatures(path: str) -> list[dict]:
    """Signatures on a block device: ``wipefs --no-act --json``, else ``blkid -p``."""
    wipefs = shutil.which("wipefs") or ("/usr/sbin/wipefs" if os.path.exists("/usr/sbin/wipefs") else None)
    if wipefs:
        proc = subprocess.run([wipefs, "--no-act", "--json", path], capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise UnsafeTargetError(
                f"refusing to write {path}: cannot probe it for signatures (wipefs: "
                f"{proc.stderr.strip() or proc.returncode})"
            )
        if not proc.stdout.strip():
            return []
        try:
            return list(json.loads(proc.stdout).get("signatures", []))
        except ValueError as exc:
            raise UnsafeTargetError(f"refusing to write {path}: unreadable wipefs output ({exc})") from exc
    blkid = shutil.which("blkid") or ("/usr/sbin/blkid" if os.path.exists("/usr/sbin/blkid") else None)
    if blkid is None:
        raise UnsafeTargetError(
            f"refusing to write {path}: neither wipefs nor blkid (util-linux) is installed to probe it"
        )
    proc = subprocess.run([blkid, "-p", "-o", "export", path], capture_output=True, text=True, timeout=30)
    if proc.returncode == 2:  # nothing found
        return []
    if proc.returncode != 0:
        raise UnsafeTargetError(f"refusing to write {path}: blkid -p failed: {proc.stderr.strip()}")
    kv = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    kind = kv.get("TYPE") or kv.get("PTTYPE") or "unknown"
    return [{"device": os.path.basename(path), "offset": "?", "type": kind, "uuid": kv.get("UUID"),
             "label": kv.get("LABEL")}]


def device_report(path: str | os.PathLike[str], *, probe: bool = True,
                  loops: Sequence[LoopInfo] | None = None) -> DeviceReport:
    """Collect what is on and above a block device.

    Parameters
    ----------
    path : str or path-like
        A block device node or a symlink to one.
    probe : bool
        Run ``wipefs`` on the device and its partitions (needs read access, i.e. root).
    loops : sequence of LoopInfo, optional
        :func:`loop_devices`, when the caller has it already.

    Returns
    -------
    DeviceReport

    Raises
    ------
    UnsafeTargetError
        ``path`` is not a block device, or probing failed.
    """
    path = os.fspath(path)
    resolved = os.path.realpath(path)
    try:
        st = os.stat(resolved)
    except OSError as exc:
        raise UnsafeTargetError(f"{path}: cannot stat ({exc.strerror})") from exc
    if not stat.S_ISBLK(st.st_mode):
        raise UnsafeTargetError(f"{path} is not a block device")
    loops = loop_devices() if loops is None else loops
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    sysdir = sysfs_block_dir(major, minor)
    name = sysdir.name

    related: list[str] = []
    holders: list[str] = []
    todo = [name]
    while todo:
        n = todo.pop()
        if n in related:
            continue
        related.append(n)
        todo.extend(_partitions(Path(os.path.realpath(f"/sys/class/block/{n}"))))
        for h in _holders(n):
            holders.append(h)
            todo.append(h)
        todo.extend(_sibling_loops(n, loops))  # a second loop device over the same image
        node = f"/dev/{n}"
        try:
            nst = os.stat(node)
        except OSError:
            devno = _devno_of_name(n)
            nst = None
            if devno:
                want = tuple(int(x) for x in devno.split(":"))
                todo.extend(lp.name for lp in loops if lp.backing_file
                            and rdev_of(lp.backing_file) == f"{want[0]}:{want[1]}")
        if nst is not None:
            todo.extend(loops_backed_by(nst, loops))
    devnos = {n: _devno_of_name(n) for n in related}
    by_devno = {v: k for k, v in devnos.items() if v}

    mounts, root = [], False
    for m in mountinfo():
        hit = by_devno.get(m["devno"])
        if hit is None and m["source"].startswith("/"):
            hit = by_devno.get(rdev_of(m["source"]) or "")
        if hit is not None:
            mounts.append(f"/dev/{hit} on {m['mountpoint']} ({m['fstype']})")
            if m["mountpoint"] == "/":
                root = True
    swaps = [s for s in swap_entries() if by_devno.get(rdev_of(s) or "") is not None]
    partitions = tuple(_partitions(sysdir))
    signatures: list[dict] = []
    if probe:
        signatures.extend(_signatures(resolved))
        for p in partitions:
            signatures.extend(_signatures(f"/dev/{p}"))
    return DeviceReport(
        path=path, resolved=resolved, devno=f"{major}:{minor}", name=name, related=tuple(related),
        mounts=tuple(mounts), swaps=tuple(swaps), root=root, holders=tuple(sorted(set(holders))),
        partitions=partitions, signatures=tuple(signatures),
    )

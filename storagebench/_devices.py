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
    "file_owner",
    "block_size_bytes",
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
    offset : int
        Where the device starts in its backing file, in bytes (``/sys/block/loopN/loop/offset``).
    size_bytes : int or None
        The device's size in bytes (``/sys/block/loopN/size`` × 512): its window in the backing
        file is ``[offset, offset + size_bytes)``.
    """

    name: str
    devno: str
    backing_file: str
    backing: tuple[int, int, int] | None
    offset: int = 0
    size_bytes: int | None = None


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
        try:
            offset = int(_read(d / "loop" / "offset") or 0)
        except ValueError:
            offset = 0
        try:
            size_bytes: int | None = int(_read(d / "size")) * 512
        except ValueError:
            size_bytes = None
        out.append(LoopInfo(d.name, _read(d / "dev"), path, ident, offset, size_bytes))
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
        loop devices over the same backing file (at any offset).
    mounts, swaps : tuple of str
        Mounts / active swap areas on related devices.
    root : bool
        A related device backs ``/``.
    holders, partitions : tuple of str
    signatures : tuple of dict
        ``wipefs --no-act --json`` entries (``device``, ``offset``, ``type``, ``uuid``, ``label``) of
        every related device and of the backing file of a related loop device where no loop device
        starts at its byte 0, each with ``owner`` (``"major:minor"``, or ``"file:major:minor:inode"``
        for a backing file: what ``allow_devices`` must name to lift it), ``owner_path`` (the node
        or file to name) and ``where`` (how it relates to the device: ``"another loop device over
        /x.img (bytes 0-67,108,864 of it; /dev/loop4 covers bytes 1,048,576-...)"``).
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

    def data_problems(self, allowed: set[str] | frozenset[str] = frozenset()) -> list[tuple[str, str, str]]:
        """Data at rest that ``allow_devices`` has not lifted: ``(owner, owner_path, text)`` each.

        A problem is lifted only by naming the object that holds it (``owner``): the device's own
        partition table by the device, a partition's filesystem by that partition (naming its whole
        disk is not enough), another loop device's filesystem by that loop device, a signature in a
        backing file by that file.
        """
        out = []
        if self.partitions and self.devno not in allowed:
            out.append((self.devno, self.resolved,
                        "it holds a partition table (partitions " + ", ".join(self.partitions) + ")"))
        for sig in self.signatures:
            owner = sig.get("owner") or self.devno
            if owner in allowed:
                continue
            out.append((owner, sig.get("owner_path") or self.resolved, _signature_text(sig, self.name)))
        return out



def _signature_text(sig: dict, default: str) -> str:
    kind = sig.get("type") or "unknown"
    extra = []
    if sig.get("uuid"):
        extra.append(f"UUID {sig['uuid']}")
    if sig.get("label"):
        extra.append(f"label {sig['label']!r}")
    where = sig.get("device") or default
    if sig.get("where"):
        where = f"{where}, {sig['where']},"
    text = f"{where} holds a {kind} signature at offset {sig.get('offset', '?')}"
    if kind in ("dos", "gpt", "PMBR", "atari", "sun", "sgi", "bsd", "mac"):
        text = f"{where} holds a {kind} partition table"
    elif kind in _KINDS:
        text = f"{where} holds {_article(kind)} {kind} {_KINDS[kind]}"
    elif kind != "unknown":
        text = f"{where} holds {_article(kind)} {kind} filesystem signature"
    if extra:
        text += " (" + ", ".join(extra) + ")"
    return text


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


def block_size_bytes(st: os.stat_result) -> int | None:
    """Size in bytes of the block device ``st`` describes (``/sys/dev/block/MAJ:MIN/size`` × 512), or ``None``."""
    try:
        return int(_read(sysfs_block_dir(os.major(st.st_rdev), os.minor(st.st_rdev)) / "size")) * 512
    except (ValueError, OSError):
        return None


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


def _window(lp: LoopInfo) -> str:
    end = f"{lp.offset + lp.size_bytes:,}" if lp.size_bytes is not None else "its end"
    return f"bytes {lp.offset:,}-{end}"


def _overlaps(a: LoopInfo, b: LoopInfo) -> bool:
    a_end = a.offset + a.size_bytes if a.size_bytes is not None else float("inf")
    b_end = b.offset + b.size_bytes if b.size_bytes is not None else float("inf")
    return a.offset < b_end and b.offset < a_end


def _loops_over(n: str, loops: Sequence[LoopInfo]) -> list[str]:
    """The loop devices whose backing file is block device ``n`` (its node ``/dev/<n>``, or by device number
    when there is no node)."""
    node = f"/dev/{n}"
    over: list[str] = []
    try:
        nst = os.stat(node)
    except OSError:
        devno = _devno_of_name(n)
        nst = None
        if devno:
            want = tuple(int(x) for x in devno.split(":"))
            over = [lp.name for lp in loops if lp.backing_file
                    and rdev_of(lp.backing_file) == f"{want[0]}:{want[1]}"]
    if nst is not None:
        over = loops_backed_by(nst, loops)
    return over


def device_report(path: str | os.PathLike[str], *, probe: bool = True,
                  loops: Sequence[LoopInfo] | None = None) -> DeviceReport:
    """Collect what is on and above a block device.

    Parameters
    ----------
    path : str or path-like
        A block device node or a symlink to one.
    probe : bool
        Run ``wipefs`` on every related device (the device, its partitions, loop devices over it,
        other loop devices over the same backing file at any offset, and their partitions) and on
        the backing file of a related loop device when no loop device starts at its byte 0 (needs
        read access, i.e. root).
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
    by_name = {lp.name: lp for lp in loops}
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    sysdir = sysfs_block_dir(major, minor)
    name = sysdir.name

    related: list[str] = []
    holders: list[str] = []
    notes: dict[str, str] = {}
    todo = [name]
    while todo:
        n = todo.pop()
        if n in related:
            continue
        related.append(n)
        for p in _partitions(Path(os.path.realpath(f"/sys/class/block/{n}"))):
            notes.setdefault(p, f"a partition of /dev/{n}")
            todo.append(p)
        for h in _holders(n):
            holders.append(h)
            notes.setdefault(h, f"stacked on /dev/{n}")
            todo.append(h)
        for sib in _sibling_loops(n, loops):  # a second loop device over the same image, at any offset
            me, other = by_name[n], by_name[sib]
            notes.setdefault(sib, f"another loop device over {other.backing_file} ({_window(other)} of it; "
                                  f"/dev/{n} covers {_window(me)}"
                                  f"{', overlapping' if _overlaps(me, other) else ''})")
            todo.append(sib)
        for lp in _loops_over(n, loops):
            notes.setdefault(lp, f"a loop device over /dev/{n}")
            todo.append(lp)
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
        for n in related:
            if n in holders:
                continue  # in use: refused before anything is probed
            for sig in _signatures(f"/dev/{n}"):
                signatures.append({**sig, "device": f"/dev/{n}", "owner": devnos.get(n) or f"/dev/{n}",
                                   "owner_path": f"/dev/{n}", "where": notes.get(n, "")})
        signatures.extend(_backing_file_signatures([by_name[n] for n in related if n in by_name], loops))
    return DeviceReport(
        path=path, resolved=resolved, devno=f"{major}:{minor}", name=name, related=tuple(related),
        mounts=tuple(mounts), swaps=tuple(swaps), root=root, holders=tuple(sorted(set(holders))),
        partitions=partitions, signatures=tuple(signatures),
    )


def file_owner(st: os.stat_result) -> str:
    """The ``allow_devices`` token of a regular file (a loop device's backing file): ``"file:major:minor:inode"``."""
    return "file:{}:{}:{}".format(*file_identity(st))


def _backing_file_signatures(related_loops: Sequence[LoopInfo], loops: Sequence[LoopInfo]) -> list[dict]:
    """Signatures at byte 0 of the backing files of ``related_loops`` that no loop device shows.

    A loop device at an offset sees only its window of the image; a partition table or a filesystem
    that starts at the image's byte 0 is seen by no loop device unless one starts there. It is
    probed in the file itself (``wipefs`` reads regular files too).
    """
    out: list[dict] = []
    seen: set[tuple[int, int, int]] = set()
    for lp in related_loops:
        if lp.backing is None or lp.backing in seen:
            continue
        seen.add(lp.backing)
        if any(other.backing == lp.backing and other.offset == 0 for other in loops):
            continue  # that loop device is related too and was probed itself
        try:
            st = os.stat(lp.backing_file)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or file_identity(st) != lp.backing:
            continue
        windows = ", ".join(f"/dev/{o.name} {_window(o)}" for o in loops if o.backing == lp.backing)
        for sig in _signatures(lp.backing_file):
            out.append({**sig, "device": lp.backing_file, "owner": file_owner(st), "owner_path": lp.backing_file,
                        "where": f"the backing file itself, from its byte 0 (loop devices over it: {windows})"})
    return out

"""Recorded files that root acts on: data, never instructions (the root-action gate).

storagebench runs as root and keeps some records of what it did in the results tree: the host-steps
journal (schedulers to put back), the process record of a running fio (what a later sweep stops),
the list of files the study's runs created (what a later run may lay out again). A results tree is
shared and copied, so what such a file says is only a claim. Every read of a file that root then
acts on goes through :func:`read_recorded`, the one gate:

* the file is opened with ``O_NOFOLLOW`` (a symlink is refused), ``O_NONBLOCK`` (a FIFO never
  blocks) and checked on the descriptor (``fstat``): a regular file with one link, owned by root or
  by the user running storagebench (the effective uid), writable by its owner only (no group or
  world write), of bounded size;
* every directory from the tree's root down to the file is opened one component at a time with
  ``O_NOFOLLOW`` (no symlinked directory inside the tree) and passes the same owner and mode
  check: a directory others can write lets them swap the file after it was checked.

A refused file is never parsed: the caller gets :class:`RecordRefusedError` naming the file and
why, takes no action on it, and says so (:func:`warn_refused`). What a record claims is then
checked again against live state by the code that acts (same device number, same process start
time, same boot ...): passing the gate means "written by root or by you", not "true now".

Writes of such files (:func:`write_recorded`) and the directories of a results tree
(:func:`make_dirs`) get explicit modes, whatever the umask: 0600 files, 0755 directories.

This module imports nothing from storagebench but :mod:`storagebench.errors`.
"""

from __future__ import annotations

import errno
import os
import pwd
import secrets
import stat
import warnings
from pathlib import Path

from .errors import StorageBenchError, StorageBenchWarning, display_path

__all__ = ["RecordRefusedError", "read_recorded", "write_recorded", "make_dirs", "check_dir", "check_in_tree", "boot_id",
           "state_dir", "warn_refused", "MAX_RECORD_BYTES"]

#: Largest recorded file read, bytes (the biggest real one, a long sweep's created-targets list, is a few KiB).
MAX_RECORD_BYTES = 4 << 20

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class RecordRefusedError(StorageBenchError):
    """A recorded file (or a directory holding it) that root will not act on.

    Attributes
    ----------
    path : str
        The file or directory refused.
    reason : str
        Why, in words (without the path).
    """

    def __init__(self, message: str, *, path: str, reason: str):
        super().__init__(message)
        self.path = path
        self.reason = reason


def _user(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _problem(st: os.stat_result) -> str | None:
    """Why a file or directory with this status may not steer root (``None``: it may)."""
    me = os.geteuid()
    if st.st_uid not in (0, me):
        return (f"it is owned by {_user(st.st_uid)}, not by root or by you ({_user(me)}): another user "
                "could have written it")
    writable = [w for w, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if st.st_mode & bit]
    if writable:
        return (f"it is writable by {' and '.join(writable)} (mode {stat.S_IMODE(st.st_mode):04o}): "
                "someone else could have written or replaced it")
    return None


def _refuse(what: str, path: str, reason: str, fix: str = "") -> RecordRefusedError:
    shown = display_path(path)
    return RecordRefusedError(f"{what} {shown} was not acted on: {reason}" + (f"; {fix}" if fix else ""),
                              path=shown, reason=reason)


def _dir_fix(path: str) -> str:
    return f"check who wrote it; if it is yours, 'chmod go-w {display_path(path)}'"


def read_recorded(path: str | os.PathLike[str], *, tree: str | os.PathLike[str] | None = None,
                  what: str = "recorded file", max_bytes: int = MAX_RECORD_BYTES) -> bytes | None:
    """The bytes of a recorded file, when root may act on what it says (the gate; see the module's doc).

    Parameters
    ----------
    path : path
        The file.
    tree : path, optional
        The root of the tree it belongs to (the study's results directory). Every directory from
        ``tree`` down to the file is checked; ``path`` must lie inside ``tree`` (lexically). Default:
        the file's own directory only.
    what : str
        The file's name in messages (``"host-steps journal"``, ``"fio process record"`` ...).
    max_bytes : int
        Larger files are refused.

    Returns
    -------
    bytes or None
        ``None`` when the file (or a directory on its way) does not exist.

    Raises
    ------
    RecordRefusedError
        The file is a symlink, not a regular file, has more than one link, is too large, is owned by
        another user or writable by group or others, or a directory on its way is a symlink, owned
        by another user or writable by group or others. The message names the file and the reason.
    """
    p = Path(os.path.abspath(os.fspath(path)))
    base = p.parent if tree is None else Path(os.path.abspath(os.fspath(tree)))
    try:
        parts = p.relative_to(base).parts
    except ValueError:
        raise _refuse(what, str(p), f"it is not inside {display_path(base)}") from None
    if not parts or any(x in ("..", ".") for x in parts):
        raise _refuse(what, str(p), f"it does not name a file inside {display_path(base)}")
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the tree itself: as named
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise _refuse(what, str(p), f"{display_path(base)} is not a directory") from None
    try:
        where = base
        problem = _problem(os.fstat(fd))
        if problem:
            raise _refuse(what, str(p), f"its directory {display_path(where)}: {problem}", _dir_fix(str(where)))
        for name in parts[:-1]:
            where = where / name
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(what, str(p), f"{display_path(where)} on its way is a symlink or not a "
                                  "directory") from None
                raise
            os.close(fd)
            fd = nfd
            problem = _problem(os.fstat(fd))
            if problem:
                raise _refuse(what, str(p), f"its directory {display_path(where)}: {problem}", _dir_fix(str(where)))
        try:
            ffd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(what, str(p), "it is a symlink (a record is a regular file storagebench wrote "
                              "itself)") from None
            raise
    finally:
        os.close(fd)
    try:
        st = os.fstat(ffd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(what, str(p), "it is not a regular file")
        if st.st_nlink != 1:
            raise _refuse(what, str(p), f"it has {st.st_nlink} hard links (another name may belong to "
                          "someone else)")
        problem = _problem(st)
        if problem:
            raise _refuse(what, str(p), problem, "remove it if you do not know where it comes from")
        if st.st_size > max_bytes:
            raise _refuse(what, str(p), f"it holds {st.st_size:,} bytes, more than the {max_bytes:,} a record "
                          "can hold")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(ffd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise _refuse(what, str(p), f"it holds more than the {max_bytes:,} bytes a record can hold")
        return data
    finally:
        os.close(ffd)


def write_recorded(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> None:
    """Write a recorded file atomically with an explicit mode (temp file + ``rename(2)``).

    The temp file is created with ``O_EXCL | O_NOFOLLOW`` (never through a planted symlink) and
    ``fchmod`` to ``mode`` whatever the umask, so :func:`read_recorded` accepts what was written.

    Parameters
    ----------
    path : path
    data : bytes
    mode : int
        Permission bits; group or world write is refused (``ValueError``).

    Raises
    ------
    OSError
        The directory cannot be written.
    """
    if mode & 0o022:
        raise ValueError(f"a recorded file must not be group- or world-writable, got mode {mode:04o}")
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _ancestor_problem(st: os.stat_result) -> str | None:
    """Why a directory above a results directory lets others replace it (``None``: it does not).

    Owned by root or by you, and not writable by group or others unless its sticky bit is set (``/tmp``:
    others may add entries but not rename or remove yours)."""
    me = os.geteuid()
    if st.st_uid not in (0, me):
        return f"it is owned by {_user(st.st_uid)}, not by root or by you ({_user(me)})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return (f"it is writable by group or others without the sticky bit (mode {stat.S_IMODE(st.st_mode):04o}): "
                "they could rename the directory below it away and put their own in its place")
    return None


def check_dir(path: str | os.PathLike[str], *, what: str = "results directory") -> None:
    """Refuse a directory that records root acts on may not live in: a symlink is followed, but the
    directory must be owned by root or by you and not writable by group or others, and nobody else may be
    able to replace it: every directory above it (by its real path) is owned by root or by you and not
    writable by group or others unless sticky (``/tmp``), and every symlink on the way as named is owned by
    root or by you.

    A directory another user can rename (``/tmp/results/<study>`` where ``/tmp/results`` is theirs) could
    be swapped for theirs between the check and the sweep's writes: the job files fio reads as root, the
    records a later sweep acts on.

    Raises
    ------
    RecordRefusedError
        The message names the directory (or the directory or symlink above it), the reason and the fix.
    """
    p = os.fspath(path)
    st = os.stat(p)
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(what, p, "it is not a directory")
    problem = _problem(st)
    if problem:
        raise RecordRefusedError(
            f"{what} {display_path(p)}: {problem}; storagebench keeps records there that root acts on "
            f"(journals, process records), so it must be yours and not writable by others: "
            f"{_dir_fix(p)}, or pass another --out", path=display_path(p), reason=problem)
    named = Path(os.path.abspath(p))
    checked: set[str] = set()
    for prefix in [*reversed(named.parents), named]:
        try:
            lst = os.lstat(prefix)
        except OSError:
            continue
        if stat.S_ISLNK(lst.st_mode) and lst.st_uid not in (0, os.geteuid()):
            reason = f"the symlink {display_path(prefix)} on its way is owned by {_user(lst.st_uid)}"
            raise RecordRefusedError(f"{what} {display_path(p)}: {reason}, who can point it elsewhere at any time; "
                                     "pass an --out reached without it", path=display_path(p), reason=reason)
        real = Path(os.path.realpath(prefix))
        for above in (real.parents if prefix == named else [*real.parents, real]):
            if str(above) in checked:
                continue
            checked.add(str(above))
            problem = _ancestor_problem(os.stat(above))
            if problem:
                reason = f"the directory {display_path(above)} above it: {problem}"
                raise RecordRefusedError(
                    f"{what} {display_path(p)}: {reason}; storagebench keeps records there that root acts on, so "
                    f"nobody else may be able to replace it: pass an --out whose every directory is yours or "
                    f"root's ('chmod go-w' or 'chmod +t' {display_path(above)} if it is yours)",
                    path=display_path(p), reason=reason)


def check_in_tree(path: str | os.PathLike[str], tree: str | os.PathLike[str], *,
                  what: str = "results directory") -> bool:
    """Whether ``path``, a directory inside the results directory ``tree``, exists, after checking every
    directory from ``tree`` (exclusive) down to it that exists: a real directory, never a symlink (a copied
    tree may hold ``raw -> /var/tmp``: root would write its runs there and remove what it takes for stale
    runs), owned by root or by you and not writable by group or others.

    Raises
    ------
    RecordRefusedError
        Naming the directory and why.
    """
    base = Path(os.path.abspath(os.fspath(tree)))
    p = Path(os.path.abspath(os.fspath(path)))
    try:
        parts = p.relative_to(base).parts
    except ValueError:
        raise _refuse(what, str(p), f"it is not inside {display_path(base)}") from None
    if any(x in ("..", ".") for x in parts):
        raise _refuse(what, str(p), f"it does not name a directory inside {display_path(base)}")
    where = base
    for name in parts:
        where = where / name
        try:
            st = os.lstat(where)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise _refuse(what, str(where), "it is a symlink or not a directory: storagebench makes the "
                          f"directories of {display_path(base)} itself and follows no link out of it",
                          "remove it if you do not know where it comes from")
        problem = _problem(st)
        if problem:
            raise _refuse(what, str(where), problem, _dir_fix(str(where)))
    return True


def make_dirs(path: str | os.PathLike[str], *, mode: int = 0o755, tree: str | os.PathLike[str] | None = None) -> Path:
    """``mkdir -p`` with an explicit mode on every directory it creates, whatever the umask.

    Directories that exist already are left as they are (see :func:`check_dir`); with ``tree`` (the
    results directory ``path`` lies in), those between ``tree`` and ``path`` are first checked by
    :func:`check_in_tree` (no symlink, yours, not writable by others).

    Returns
    -------
    Path

    Raises
    ------
    RecordRefusedError
        With ``tree``: a directory on the way is a symlink, another user's, or writable by others.
    """
    p = Path(path)
    if tree is not None:
        check_in_tree(p, tree)
    missing = []
    q = p
    while not q.exists() and q != q.parent:
        missing.append(q)
        q = q.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue
        os.chmod(d, mode)
    return p


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``; ``""`` when it cannot be read).

    A record of a process or a device change made during another boot, or on another host, is
    about nothing that exists here.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def state_dir(name: str) -> Path:
    """A private directory of this user's storagebench state outside any results tree, created 0700.

    ``$STORAGEBENCH_STATE_DIR/<name>`` when set, else ``/run/storagebench/<name>`` for root and
    ``$XDG_RUNTIME_DIR/storagebench/<name>`` (or ``/tmp/storagebench-<uid>/<name>``) for others.
    ``/run`` is emptied at boot, so what is kept there describes this boot only.

    Raises
    ------
    RecordRefusedError
        The directory (or its parent) exists and is a symlink, owned by another user or open to
        group or others.
    """
    env = os.environ.get("STORAGEBENCH_STATE_DIR")
    uid = os.geteuid()
    if env:
        base = Path(env)
    elif uid == 0:
        base = Path("/run/storagebench")
    elif os.environ.get("XDG_RUNTIME_DIR"):
        base = Path(os.environ["XDG_RUNTIME_DIR"]) / "storagebench"
    else:
        base = Path(f"/tmp/storagebench-{uid}")
    for d in (base, base / name):
        try:
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
            reason = ("it is not a directory (a symlink?)" if not stat.S_ISDIR(st.st_mode) else
                      f"it is owned by {_user(st.st_uid)}" if st.st_uid != uid else
                      f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700")
            raise RecordRefusedError(
                f"storagebench's state directory {d}: {reason}; it must be a directory of yours that only "
                "you can read and write (remove it, or set STORAGEBENCH_STATE_DIR)", path=str(d), reason=reason)
    return base / name


def warn_refused(exc: RecordRefusedError, stacklevel: int = 2) -> None:
    """Say that a refused record was not acted on (a :class:`StorageBenchWarning`; the CLI prints it)."""
    warnings.warn(str(exc), StorageBenchWarning, stacklevel=stacklevel + 1)

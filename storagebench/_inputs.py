"""The one gate of what storagebench reads from the filesystem: regular files of bounded size, walks that stay inside
their tree.

Every command reads files that someone else may have written or named: a study spec, a parameter file, a notebook,
a results tree copied from a colleague, a table named with ``-p table=...``. A FIFO there blocks ``open(2)`` for ever
(until a writer comes), ``/dev/zero`` or ``/dev/urandom`` never ends, a symlink in a shared results tree can point at
``/etc/shadow`` (read as root) or at a file of terabytes. This module is the only reader of such inputs:

* :func:`open_input` opens with ``O_NONBLOCK`` (a FIFO cannot block the open) and ``O_NOCTTY``, checks the *open*
  descriptor with ``fstat`` (what is read is what was checked: no race with a file swapped in after a ``stat``),
  refuses anything but a regular file, and refuses a file larger than the caller's cap before a byte is read;
  :func:`read_input` and :func:`read_text` read at most the cap (a file growing while read is refused too).
  With ``root``, the file's real path must lie inside ``root`` and its last component is opened with ``O_NOFOLLOW``.
* :func:`walk` / :func:`scan` list a directory tree without following symlinks that leave it: a symlink counts only
  when its target is a regular file inside the tree; FIFOs, sockets, devices, broken symlinks and symlinks leaving
  the tree are reported as :class:`Refused` (path and why), never opened.
* :func:`completed_runs` is the one owner of "the completed runs of a study": the real (not symlinked) directories
  of ``raw/`` whose names do not start with ``.`` (``raw/.tmp-<run_id>-<pid>/`` is a run being measured).

Nothing here imports the rest of storagebench except :mod:`storagebench.errors`.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

from .errors import IngestError, StorageBenchError, display_path

__all__ = [
    "MAX_TOOL_OUTPUT_BYTES",
    "Refused",
    "STAGING_PREFIX",
    "completed_runs",
    "file_kind",
    "inside",
    "open_input",
    "read_input",
    "read_text",
    "scan",
    "walk",
]

#: Default size cap of one tool output (fio JSON, a fio log, DiskSPD XML/text, Iometer CSV), bytes.
MAX_TOOL_OUTPUT_BYTES = 512 * 2**20

#: Name prefix of a run being measured (``raw/.tmp-<run_id>-<pid>/``): not a completed run.
STAGING_PREFIX = ".tmp-"

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"))


class Refused(NamedTuple):
    """A directory entry a walk did not list, and why (one line, no path in ``reason``)."""

    path: str
    reason: str


def file_kind(mode: int) -> str:
    """``"a FIFO"``, ``"a character device"``, ``"a directory"`` ... for an ``st_mode`` that is not a regular file."""
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def inside(target: str, root: str) -> bool:
    """Whether the real path ``target`` is ``root`` or below it (both as :func:`os.path.realpath` gives them)."""
    return target == root or target.startswith(root if root.endswith(os.sep) else root + os.sep)


def _error(error: type[StorageBenchError], reason: str, path: str) -> StorageBenchError:
    """``error`` naming ``path``: an :class:`IngestError` keeps path and reason apart, the others say ``path: reason``."""
    if issubclass(error, IngestError):
        return error(reason, path=path)
    return error(f"{display_path(path)}: {reason}")


def _open(path: str, *, max_bytes: int, what: str, error: type[StorageBenchError], root: str | None,
          hint: str) -> tuple[int, os.stat_result]:
    flags = _FLAGS
    if root is not None:
        real = os.path.realpath(path)
        root_real = os.path.realpath(root)
        if not inside(real, root_real):
            raise _error(error, f"{what} is a symlink to {display_path(real)}, outside {display_path(root_real)}: "
                                "not followed", path)
        path, flags = real, flags | os.O_NOFOLLOW  # the last component cannot be swapped for a symlink now
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise _error(error, f"{what} does not exist", path) from None
    except OSError as exc:
        raise _error(error, f"cannot read {what} ({exc.strerror or exc})", path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _error(error, f"{what} is not a regular file ({file_kind(st.st_mode)}): not read "
                                "(only regular files are read)", path)
        if st.st_size > max_bytes:
            raise _error(error, f"{what} of {st.st_size:,} bytes, more than the size cap of {max_bytes:,} bytes: "
                                f"not read{hint}", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_input(path: str | os.PathLike, *, max_bytes: int, what: str = "file",
               error: type[StorageBenchError] = StorageBenchError, root: str | os.PathLike | None = None,
               hint: str = "") -> io.BufferedReader:
    """Open a regular file of at most ``max_bytes`` bytes for reading (binary), or refuse it.

    For readers that need a file object (pyarrow, pandas): the checks are made on the open descriptor that the
    returned object reads, so nothing can be swapped in between. :func:`read_input` reads the bytes instead.

    Parameters
    ----------
    path : str or path-like
        The file. A symlink named here is followed (the caller chose the path) unless ``root`` is given.
    max_bytes : int
        Size cap, bytes: a larger file is refused before a byte is read.
    what : str
        What the file is, for the message (``"study spec"``, ``"notebook"``, ``"table"`` ...).
    error : type
        The :class:`~storagebench.errors.StorageBenchError` subclass raised (an ``IngestError`` gets ``path=``).
    root : str or path-like, optional
        The tree the file must lie in (after every symlink is resolved); its last component is then opened with
        ``O_NOFOLLOW``.
    hint : str
        Appended to the size-cap message (how to raise the cap, e.g. ``" (raise --max-file-size)"``).

    Returns
    -------
    io.BufferedReader
        Binary file object at offset 0; close it (``with``).

    Raises
    ------
    error
        Missing or unreadable, not a regular file (a FIFO, a device, a socket, a directory: named), larger than
        ``max_bytes``, or outside ``root``.
    """
    fd, _ = _open(os.fspath(path), max_bytes=max_bytes, what=what, error=error,
                  root=None if root is None else os.fspath(root), hint=hint)
    return os.fdopen(fd, "rb")


def read_input(path: str | os.PathLike, *, max_bytes: int, what: str = "file",
               error: type[StorageBenchError] = StorageBenchError, root: str | os.PathLike | None = None,
               head: int | None = None, hint: str = "") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes (``head``: only its first ``head`` bytes).

    Checked as :func:`open_input` (``O_NONBLOCK``, ``fstat`` of the open descriptor, the size cap); read with at
    most ``max_bytes + 1`` bytes kept, so a file that grows past the cap while read is refused too. Bare
    ``os.open``/``os.read``: ingest reads thousands of files with it (half the cost of ``open().read()``).

    Parameters
    ----------
    path, max_bytes, what, error, root, hint
        As in :func:`open_input`.
    head : int, optional
        Read only this many bytes from the start (content sniffing); the size cap is not applied.

    Returns
    -------
    bytes

    Raises
    ------
    error
        As :func:`open_input`; also a file that grew past the cap while read, or a read error.
    """
    p = os.fspath(path)
    fd, st = _open(p, max_bytes=max_bytes if head is None else float("inf"), what=what, error=error,  # type: ignore[arg-type]
                   root=None if root is None else os.fspath(root), hint=hint)
    try:
        if head is not None:
            return os.read(fd, head)
        data = os.read(fd, st.st_size + 1)
        if len(data) > st.st_size:  # the file grew since fstat: read on, up to the cap
            parts, size = [data], len(data)
            while size <= max_bytes and (chunk := os.read(fd, 1 << 20)):
                parts.append(chunk)
                size += len(chunk)
            if size > max_bytes:
                raise _error(error, f"{what} grew past the size cap of {max_bytes:,} bytes while read: not read", p)
            data = b"".join(parts)
        return data
    except OSError as exc:
        raise _error(error, f"cannot read {what} ({exc.strerror or exc})", p) from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, *, max_bytes: int, what: str = "file",
              error: type[StorageBenchError] = StorageBenchError, root: str | os.PathLike | None = None,
              hint: str = "") -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` bytes (a leading BOM dropped).

    Parameters
    ----------
    path, max_bytes, what, error, root, hint
        As in :func:`open_input`.

    Returns
    -------
    str

    Raises
    ------
    error
        As :func:`read_input`, or the bytes are not UTF-8 (the message gives the first bad byte's offset).
    """
    data = read_input(path, max_bytes=max_bytes, what=what, error=error, root=root, hint=hint)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _error(error, f"a {what} must be UTF-8 text; byte {exc.start} is not ({exc.reason})",
                     os.fspath(path)) from None


def scan(d: str, root: str) -> tuple[list[str], list[str], list[Refused]]:
    """(subdirectories, regular files, refused entries) of directory ``d`` in the tree whose real path is ``root``.

    File types come from ``scandir`` (no ``stat`` per file). Only regular files are listed; a symlink counts when
    its target is a regular file inside the tree (a symlink to a directory is not followed: one inside the tree is
    walked under its real path). FIFOs, devices, sockets, broken symlinks and symlinks leaving the tree are
    refused, never opened.

    Parameters
    ----------
    d : str
        The directory.
    root : str
        :func:`os.path.realpath` of the tree's top.

    Returns
    -------
    (list of str, list of str, list of Refused)
        Names of subdirectories (sorted) and of files (in directory order), and what was left out and why.
    """
    dirs: list[str] = []
    files: list[str] = []
    bad: list[Refused] = []
    prefix = d if d.endswith(os.sep) else d + os.sep
    try:
        entries = list(os.scandir(d))
    except OSError as exc:
        return dirs, files, [Refused(d, f"cannot list the directory: {exc.strerror or exc}")]
    for e in entries:
        path = prefix + e.name
        try:
            if e.is_dir(follow_symlinks=False):
                dirs.append(e.name)
            elif e.is_file(follow_symlinks=False):
                files.append(e.name)
            elif e.is_symlink():
                target = os.path.realpath(path)
                try:
                    st = os.stat(path)
                except OSError:
                    bad.append(Refused(path, f"broken symlink (to {display_path(target)}): not read"))
                    continue
                within = inside(target, root)
                if stat.S_ISDIR(st.st_mode):
                    if not within:
                        bad.append(Refused(path, f"symlink to a directory outside the tree ({display_path(target)}):"
                                                 " not followed"))
                elif not within:
                    bad.append(Refused(path, f"symlink to a file outside the tree ({display_path(target)}): "
                                             "not read"))
                elif not stat.S_ISREG(st.st_mode):
                    bad.append(Refused(path, f"not a regular file ({file_kind(st.st_mode)}): not read"))
                else:
                    files.append(e.name)
            else:
                bad.append(Refused(path, f"not a regular file ({file_kind(e.stat(follow_symlinks=False).st_mode)}): "
                                         "not read"))
        except OSError as exc:
            bad.append(Refused(path, f"cannot read: {exc.strerror or exc}"))
    dirs.sort()
    return dirs, files, bad


def walk(top: str | os.PathLike, *, max_depth: int | None = None) -> Iterator[tuple[str, list[str], list[str],
                                                                                      list[Refused]]]:
    """``os.walk`` top-down over :func:`scan`: regular files only, never leaving the tree of ``top``.

    Directories are visited in sorted order; the caller may prune ``dirs`` in place (as with ``os.walk``).

    Parameters
    ----------
    top : str or path-like
        The tree (its real path is the root every symlink is judged against).
    max_depth : int, optional
        Deepest level listed (``top`` is 0).

    Yields
    ------
    (str, list of str, list of str, list of Refused)
        A directory, its subdirectory names, its file names, and its refused entries.
    """
    top = os.fspath(top)
    root = os.path.realpath(top)
    stack = [(top, 0)]
    while stack:
        d, depth = stack.pop()
        dirs, files, bad = scan(d, root)
        yield d, dirs, files, bad
        if max_depth is None or depth < max_depth:
            stack.extend((os.path.join(d, s), depth + 1) for s in reversed(dirs))


def completed_runs(raw_dir: str | os.PathLike) -> list[str]:
    """The run ids of the completed runs under a study's ``raw/``: the one rule of what counts as a run.

    A run is complete when ``raw/<run_id>/`` exists (it appears in one ``rename(2)``). Names starting with ``.``
    (``raw/.tmp-<run_id>-<pid>/``, a run being measured) and symlinks are not runs.

    Parameters
    ----------
    raw_dir : str or path-like
        ``results/<study>/raw``.

    Returns
    -------
    list of str
        Sorted run ids; empty when ``raw_dir`` does not exist or is not a directory.
    """
    try:
        entries = list(os.scandir(raw_dir))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))

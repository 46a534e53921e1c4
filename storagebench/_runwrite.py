"""Results or a target that cannot be written: the one-line :class:`NotWritableError` of a sweep.

A full, read-only or forbidden results directory (``ENOSPC``, ``EDQUOT``, ``EROFS``, ``EACCES``,
``EPERM``), a fio output cut short on a full disk, and fio's own ``err=N`` on a local target each
become one message that names the path and what to do.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

from ._store import StudyStore
from .errors import FioError, NotWritableError

#: errno values that mean "this path cannot be written": full, over quota, read-only, not permitted.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})

#: Below this many free bytes on the results filesystem, a fio output that is missing or cut
#: short is put down to the full disk (fio exits 0 when it cannot write its --output).
_MIN_FREE_BYTES = 256 * 1024

_FIO_ERR_RE = re.compile(r"\berr(?:or)?\s*=\s*(\d+)")


def errno_hint(err: int | None, where: str, what: str) -> str:
    """What to do about ``err`` on ``where`` (the results directory or the target)."""
    if err in (errno.ENOSPC, errno.EDQUOT):
        return f"free space on the filesystem holding {where} (df -h {where}) or choose another {what}"
    if err == errno.EROFS:
        return f"the filesystem holding {where} is read-only: remount it read-write or choose another {what}"
    if err in (errno.EACCES, errno.EPERM):
        return f"make {where} writable for uid {os.geteuid()} or choose another {what}"
    return f"choose another {what}"


def inside(path: Any, root: Path) -> bool:
    """``path`` (a path-like; anything else is not) is ``root`` or below it."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = Path(os.fspath(path)).absolute()
    return p == root or root in p.parents


def not_writable(exc: OSError, store: StudyStore, suffix: str = "") -> NotWritableError:
    """A results-directory :class:`OSError` (ENOSPC, EROFS, EACCES, ENOTDIR ...) as a one-line message."""
    path = os.fspath(exc.filename) if isinstance(exc.filename, (str, os.PathLike)) else str(store.root)
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return NotWritableError(
        f"cannot write the results: {path}: {exc.strerror or os.strerror(exc.errno or 0)} ({name}); "
        f"{errno_hint(exc.errno, _where(path, store), '--out')}{suffix}", path=path, errno=exc.errno)


def _where(path: str, store: StudyStore) -> str:
    """The directory to act on: the study's directory for a path inside it (a staging directory is
    gone by the time the message is read), and the nearest existing directory above one that
    could not be created."""
    p = store.root if inside(path, store.root) else Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    while p != p.parent and not p.is_dir():
        p = p.parent
    return str(p)


def results_full(store: StudyStore) -> bool:
    """The results filesystem has (almost) no space left: fio's output was cut there."""
    try:
        st = os.statvfs(store.root)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _MIN_FREE_BYTES


def output_cut_short(output: Path, store: StudyStore) -> NotWritableError:
    """fio exits 0 when it cannot write its ``--output``: a cut or missing output on a full disk."""
    return NotWritableError(
        f"cannot write the results: {output}: {os.strerror(errno.ENOSPC)} (ENOSPC: fio's output is missing "
        f"or cut short); {errno_hint(errno.ENOSPC, str(store.root), '--out')}", path=str(output),
        errno=errno.ENOSPC)


def target_not_writable(exc: FioError, target: str, kept_in: Path) -> NotWritableError | None:
    """fio's ``err=N`` on a local ``target`` that cannot be written (the attempt is kept in ``kept_in``);
    ``None`` for any other failure."""
    err = _fio_errno(exc)
    if err not in WRITE_ERRNOS:
        return None
    return NotWritableError(
        f"fio cannot write the target {target}: {os.strerror(err)} ({errno.errorcode.get(err, err)}); "
        f"{errno_hint(err, target, '--target')}; the attempt is kept in {kept_in}", path=target, errno=err)


def _fio_errno(exc: FioError) -> int | None:
    """The errno of a failed fio run: the first ``err=N`` of its message or stderr."""
    for text in (exc.message, exc.stderr):
        m = _FIO_ERR_RE.search(text or "")
        if m:
            return int(m.group(1))
    return None

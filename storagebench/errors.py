"""One exception hierarchy for the whole library.

Library code raises these and never prints or exits; the CLI turns them into messages
and exit codes. Every message names the input that was wrong and what is allowed.
"""

from __future__ import annotations

import os
import reprlib
from typing import Any

__all__ = [
    "shown",
    "StorageBenchError",
    "StudyError",
    "JobFileError",
    "FioError",
    "FioNotFoundError",
    "IngestError",
    "SchemaError",
    "UnsafeTargetError",
    "UnsafeJobFileError",
    "TestbedError",
    "StatsError",
    "PublishError",
    "HostError",
    "NotWritableError",
    "ResultsBusyError",
    "display_path",
    "StorageBenchWarning",
]


def display_path(path: object) -> str:
    """A path as text that is always valid UTF-8 (messages, the ``source_file`` column).

    A file name that is not UTF-8 reaches Python with its bad bytes as surrogate escapes
    (:func:`os.fsdecode`); they are written as ``\\xNN`` here, the rest of the name as it is.
    """
    text = path if isinstance(path, str) else os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


class StorageBenchError(Exception):
    """Base class of every error storagebench raises on purpose."""


class StorageBenchWarning(UserWarning):
    """A result was computed, but the caller should know something about it (e.g. which factors
    ``compare`` pooled). The CLI prints these as ``storagebench: warning: ...``."""


class StudyError(StorageBenchError, ValueError):
    """A study spec (YAML or object) is invalid: unknown key, bad value, empty grid."""


class JobFileError(StorageBenchError, ValueError):
    """A fio job file cannot be parsed, or holds an option that is refused (``exec_prerun`` ...)."""


class FioError(StorageBenchError):
    """fio failed: non-zero exit, a job ``error`` != 0, a timeout, or no usable output.

    Attributes
    ----------
    message : str
        fio's own message (stderr / ``err=`` line) when there is one.
    returncode : int or None
        fio's exit status, ``None`` when it was killed by our timeout.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = ""):
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.stderr = stderr


class FioNotFoundError(FioError):
    """The ``fio`` executable is not installed or not on ``PATH``."""


class IngestError(StorageBenchError, ValueError):
    """A file cannot be ingested: not fio output, truncated JSON, empty, unknown format.

    Attributes
    ----------
    path : str or None
        The file, as given (a non-UTF-8 name keeps its surrogate escapes, so it can be opened);
        the message shows it with :func:`display_path`.
    reason : str
        The message without the path.
    """

    def __init__(self, message: str, *, path: str | None = None):
        super().__init__(message if path is None else f"{display_path(path)}: {message}")
        self.path = path
        self.reason = message


class SchemaError(StorageBenchError, ValueError):
    """A table does not follow the tidy schema (missing column, wrong dtype, bad unit)."""


class UnsafeTargetError(StorageBenchError):
    """A write/trim workload was pointed at a device that holds data, or a job file runs programs."""


class UnsafeJobFileError(UnsafeTargetError, JobFileError):
    """A job file holds an option that is refused (runs programs, touches other paths ...).

    Both an :class:`UnsafeTargetError` and a
    :class:`JobFileError`, so either ``except`` catches it.
    """


class TestbedError(StorageBenchError):
    """A testbed (loop device, filesystem, zram, namespace) could not be set up or torn down."""

    __test__ = False  # not a pytest test class


class StatsError(StorageBenchError, ValueError):
    """A statistical comparison cannot be estimated from the data it was given."""


class PublishError(StorageBenchError):
    """A notebook failed to execute or the write-up could not be published."""


class HostError(StorageBenchError):
    """A fio server / remote host problem: unreachable, version mismatch, died mid-run."""


class _ShortRepr(reprlib.Repr):
    """``reprlib.Repr`` that never converts a huge integer to text (CPython refuses > 4300 digits)."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:
            return f"<an integer of {x.bit_length():,} bits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 6


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` short enough for an error message, whatever ``value`` is.

    Strings keep their start and end (``'aaaa...zzzz'``), containers their first items and three
    levels (a self-containing list or a billion-laughs structure prints in bounded time), integers
    beyond 200 bits their size only. Control characters are escaped, as ``repr`` does.

    Parameters
    ----------
    value : object
    limit : int
        Longest result, characters.

    Returns
    -------
    str
    """
    try:
        text = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class NotWritableError(StorageBenchError):
    """A path storagebench or fio must write is full (ENOSPC, EDQUOT), read-only (EROFS) or not
    permitted (EACCES, EPERM): the results directory or the target.

    Attributes
    ----------
    path : str
        The path that could not be written.
    errno : int or None
        The error number (``errno.ENOSPC`` ...).
    """

    def __init__(self, message: str, *, path: str = "", errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class ResultsBusyError(StorageBenchError):
    """Another storagebench run holds the lock of a study's results directory.

    Attributes
    ----------
    path : str
        The lock file.
    pid : int or None
        The holder's pid, as it wrote it in the lock file.
    """

    def __init__(self, message: str, *, path: str = "", pid: int | None = None):
        super().__init__(message)
        self.path = path
        self.pid = pid

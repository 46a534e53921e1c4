"""The command line's shared parts: the app and its help formatter, the one error decorator
(:func:`cli_errors`), the ``--out`` checks and the ``-p`` parsing (part of :mod:`storagebench.cli`).
"""

from __future__ import annotations

import errno
import functools
import inspect
import re
import warnings
from pathlib import Path
from typing import Annotated, Callable, List, Optional

import typer
from typer.core import TyperCommand, TyperGroup

# Only light modules are imported here, so that `--version`, `-h` and a mistyped option answer at once:
# the library's public names are reached through the package (`sb.run_study`: `storagebench/__init__.py`
# loads each on first use), and the heavy internals (pandas, pyarrow, scipy, statsmodels, matplotlib) in the
# commands that use them.
from ._version import __version__
from .errors import (
    PublishError,
    StorageBenchError,
    StorageBenchWarning,
    shown,
)


def _plain_type(self, ctx) -> str | None:
    """Help shows ``PATH``, ``INTEGER``, ``TEXT`` (click's metavars), never ``<list[str]>`` or ``<bool>``."""
    if not hasattr(self, "is_flag"):
        return None  # an argument: its name is already its metavar
    if self.is_flag or self.count:
        return None
    if self.metavar:
        return self.metavar
    label = str(self.display_type(ctx)).strip("<>")
    many = label.startswith("list[")
    label = label[5:-1] if many else label
    return _METAVARS.get(label.lower(), label.upper()) + ("..." if many else "")


_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "bool": "BOOLEAN"}


#: What rich reads as a markup tag (``[a, b]``, ``[numjobs]``): rich.markup's rule, which hides such text.
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def _literal_help(text: str | None, *, paragraphs: bool = False) -> str | None:
    """Help text shown as written: brackets escaped for rich (``VALUE is YAML: [a, b]`` kept, not taken for a
    tag), and with ``paragraphs``, the prose paragraphs of a docstring joined into one line each so the
    terminal wraps them (an indented paragraph, an example command, keeps its lines)."""
    if not text:
        return text
    if paragraphs:
        parts = inspect.cleandoc(text).split("\n\n")
        text = "\n\n".join(part if part.startswith(("\b", " ")) or "\n " in part else " ".join(part.split("\n"))
                             for part in parts)
    return _MARKUP_TAG.sub(lambda m: m.group(1) * 2 + "\\" + m.group(2), text)


class _Command(TyperCommand):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.help = _literal_help(self.help, paragraphs=True)
        for p in self.params:
            if getattr(p, "help", None):
                p.help = _literal_help(p.help)

    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for p in params:
            p.display_type_rich = _plain_type.__get__(p)
        return params


class _Group(TyperGroup):
    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for p in params:
            p.display_type_rich = _plain_type.__get__(p)
        return params


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.",
)


def _command(name: str | None = None, **kw):
    """``@app.command`` with the plain help formatter."""
    return app.command(name, cls=_Command, **kw)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"storagebench {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="print the version and exit")] = False) -> None:
    """storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.

    Run `storagebench COMMAND -h` for a command's options and examples.
    """


_RESUME = "completed runs are kept; rerun the same command to resume"


_OS_WORDS = {errno.ENOSPC: "no space left on the device", errno.EACCES: "permission denied",
             errno.EPERM: "operation not permitted", errno.EROFS: "read-only file system",
             errno.EDQUOT: "disk quota exceeded", errno.EEXIST: "exists and is not a directory",
             errno.ENOTDIR: "a part of the path is not a directory", errno.EISDIR: "is a directory, not a file",
             errno.ELOOP: "too many levels of symbolic links", errno.ENAMETOOLONG: "file name too long"}


def _kind_of(path: Path) -> str | None:
    """What ``path`` is when it is not a directory or a regular file (``None`` when it is either or absent)."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return next((w for t, w in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")) if t(mode)), "special")


def _out_dir(out: Path, option: str = "--out") -> Path:
    """An ``--out`` that names a directory (created later when missing): refuse a file, a FIFO or a device there,
    or a parent that is a file, in one line (:func:`cli_errors`), before anything runs."""
    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            raise StorageBenchError(f"{option} {out}: {p} is {_kind_of(p) or 'a file'}, not a directory; {option} "
                                    "names a directory (created when missing)")
        if p.exists():
            break
    return out


def _out_file(out: Path, option: str = "--out", example: str = "report.html") -> Path:
    """An ``--out`` that names a file to write: refuse a directory, a FIFO or a device there, or a parent that is
    a file, in one line (:func:`cli_errors`), before anything runs."""
    if out.is_dir():
        raise StorageBenchError(f"{option} {out} is a directory; {option} names the file to write "
                                f"(e.g. {out / example})")
    kind = _kind_of(out)
    if kind is not None:
        raise StorageBenchError(f"{option} {out} is {kind}, not a regular file; {option} names the file to write")
    _out_dir(out.parent, option=f"{option} {out}: the directory")
    return out


def _error(text: str, code: int = 1):
    typer.secho(f"storagebench: error: {text}", err=True, fg="red")
    raise typer.Exit(code)


def cli_errors(*, interrupted: str = _RESUME, error_code: int = 1) -> Callable:
    """Decorator of every command: the one place errors become messages and exit codes.

    Parameters
    ----------
    interrupted : str
        What Ctrl-C leaves behind and how to go on (printed with exit status 130).
    error_code : int
        Exit status of a :class:`StorageBenchError` (1; 2 where bad input means nothing ran).

    The command's :class:`StorageBenchWarning` warnings are printed as ``storagebench: warning: ...``
    lines on stderr; other warnings keep Python's own display.
    """
    def wrap(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args, **kwargs):
            caught: list = []
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", StorageBenchWarning)
                    try:
                        return func(*args, **kwargs)
                    except StorageBenchError as exc:
                        _error(str(exc), error_code)
                    except KeyboardInterrupt:
                        typer.secho(f"storagebench: interrupted; {interrupted}", err=True, fg="yellow")
                        raise typer.Exit(130) from None
                    except OSError as exc:
                        if exc.errno not in _OS_WORDS:
                            raise
                        where = exc.filename or "?"
                        _error(f"{_OS_WORDS[exc.errno]}: {where}" + (f" -> {exc.filename2}" if exc.filename2 else ""))
            finally:
                # shown after the recording ends: inside it, showwarning appends to the list being shown
                for w in caught:
                    if issubclass(w.category, StorageBenchWarning):
                        typer.secho(f"storagebench: warning: {w.message}", err=True, fg="yellow")
                    else:
                        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return run
    return wrap


def _parse_params(items: List[str]) -> dict:
    """``-p name=value`` pairs; values are plain YAML data (``4`` -> int, ``[a, b]`` -> list), never a tag.

    Each value goes through the parameter gate's reader (:func:`storagebench._params.parse_value`): a YAML
    tag (``!!binary``, ``!!python/...``, ``!x``) is refused, a date stays text, the value is plain JSON-typed
    data within bounds; its type is checked against the notebook's parameters cell when the notebook runs.
    A string value naming an existing file or directory relative to the current directory is passed as an
    absolute path: the notebook runs in its own directory, where the relative path would mean another file.
    """
    from ._params import parse_value

    params = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise PublishError(f"-p must be NAME=VALUE with NAME a notebook parameter, got {shown(item)}")
        if name in params:
            raise PublishError(f"-p {name}= is given twice; give each parameter once")
        value = parse_value(text, name=name, where="-p")
        if isinstance(value, str) and value and not Path(value).is_absolute() and _exists(value):
            value = str(Path(value).resolve())
        params[name] = value
    return params


def _exists(text: str) -> bool:
    """``Path(text).exists()`` that is False, not an error, for a name the OS cannot take (too long, NUL)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def _params(items: Optional[List[str]]) -> dict:
    """``KEY=VALUE`` pairs; values are plain YAML data (5, 0.5, true, text), read by the parameter gate.

    They become the testbed notebook's ``params`` parameter: :func:`storagebench._params.parse_value`
    refuses a YAML tag and anything that is not plain JSON-typed data.
    """
    from ._params import parse_value

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"must be KEY=VALUE with KEY a name, got {shown(item)}", param_hint="-p/--param")
        out[key] = parse_value(value, name=key, where="-p")  # a refused value: PublishError, exit 1 as for publish -p
    return out

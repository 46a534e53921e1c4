"""fio job files: render one run's job file so that nothing can be smuggled into it, and read job files as fio does.

The format is fio's own (fio HOWTO, "Job file format"): ini-like sections ``[name]``, ``[global]``
sections whose options apply to the jobs after them, ``key=value`` lines, bare flags
(``time_based``), whole-line comments starting with ``;`` or ``#``, and ``include <file>``.
fio also cuts every value at its first ``;`` or ``#`` (``parse.c`` ``strip_blank_end``) and
substitutes ``${VAR}`` and keywords such as ``$ncpus`` (``init.c``); :func:`parse_jobfile` does
the cutting, and :func:`storagebench.fio.options.check_job_value` refuses both in what we render.

A rendered job file is checked twice before fio runs it:

1. :func:`render_jobfile` writes only canonical option names and values that passed
   :func:`~storagebench.fio.options.check_job_value`; comments carry printable text only.
2. :func:`verify_rendered` reads the text back with :func:`parse_jobfile` and requires exactly one
   job whose options equal what was checked; :func:`fio_parsed_options` gets fio's own reading of a
   file (``fio --debug=parse --parse-only``) for :func:`verify_fio_parse`, which the runner calls
   once per distinct option set.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._inputs import read_text
from ._study import RunPoint, Study
from .errors import JobFileError
from .fio.options import (
    canonical_name,
    canonical_options,
    check_job_name,
    check_job_value,
    join_filenames,
    render_time,
)

__all__ = [
    "JobFile",
    "render_jobfile",
    "parse_jobfile",
    "verify_fio_parse",
]

#: Largest job file an ``include`` line reads, bytes.
MAX_INCLUDE_BYTES = 2**20


_RUNNER_FIRST = ("time_based", "runtime", "ramp_time", "size", "group_reporting")
_TIME_OPTIONS = ("runtime", "ramp_time")


_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def _comment(text: str) -> str:
    """One comment line: printable ASCII only, so that no text can end the comment or the line."""
    return "; " + _UNPRINTABLE.sub("?", text)


def _value_text(name: str, value: Any) -> str | None:
    if name in _TIME_OPTIONS and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return render_time(float(value))
        except ValueError as exc:
            raise JobFileError(f"option {name}: {exc}") from None
    return check_job_value(name, value)


def _line(name: str, value: Any) -> str:
    text = _value_text(name, value)
    return name if text is None else f"{name}={text}"


def rendered_options(point: RunPoint, target: str | os.PathLike[str] | None) -> dict[str, str | None]:
    """The options a rendered job file gives its one job: canonical name -> value text (``None`` = flag).

    This is what :func:`verify_rendered` and :func:`verify_fio_parse` compare fio's reading with.
    """
    opts = canonical_options(point.options, where=f"run {point.run_id}")
    out: dict[str, str | None] = {}
    if target is not None:
        out["filename"] = join_filenames([os.fspath(target)])
    for key, value in opts.items():
        if key == "filename" and target is not None:
            continue
        out[key] = _value_text(key, value) if key != "filename" else check_job_value(key, value)
    return out


def render_jobfile(
    point: RunPoint,
    study: Study | None = None,
    target: str | os.PathLike[str] | None = None,
    *,
    job_name: str | None = None,
) -> str:
    """The fio job file of one run: a ``[global]`` section and one job section.

    ``[global]`` holds what the runner always sets (``filename``, ``time_based``, ``runtime``,
    ``ramp_time``, ``size``, ``group_reporting=1`` so that the ``numjobs`` clones are reported as
    one job) and the study's ``fixed`` options; the job section holds the options its factors set.
    Every name is fio's canonical one and every value passed
    :func:`storagebench.fio.options.check_job_value`; times are written so fio reads them exactly
    (``1500ms``, not ``1.5``, which fio reads as 1 s). The file is read back with
    :func:`verify_rendered` before it is returned.

    Parameters
    ----------
    point : RunPoint
        One point of a :class:`~storagebench._plan.RunPlan`.
    study : Study, optional
        Names the file in its header comment and tells fixed options from factor options.
    target : str or path-like, optional
        fio ``filename`` (file or block device); absolute, because fio runs in the run's staging
        directory. Required unless ``point.options`` already has a ``filename``.
    job_name : str, optional
        Job section name; default the run id.

    Returns
    -------
    str
        The job file text, ending in a newline.

    Raises
    ------
    JobFileError
        No target, an unknown option, an option given twice under two names, a value that could
        change the file's structure or meaning, a bad job name, or a read-back that differs.
    """
    opts = canonical_options(point.options, where=f"run {point.run_id}")
    if target is None and "filename" not in opts:
        raise JobFileError(f"run {point.run_id}: no target (filename) to render a job file for")
    fixed = {canonical_name(k) for k in study.fixed} if study is not None else set()
    name = check_job_name(job_name or point.run_id)
    head = [
        _comment(f"storagebench run {point.run_id}" + (f" of study {study.name}" if study is not None else "")
                 + f", repetition {point.repetition}, run order {point.run_order}"),
        _comment("factors: " + ", ".join(f"{k}={v}" for k, v in point.factors.items())),
        "[global]",
    ]
    global_lines: list[str] = []
    job_lines: list[str] = []
    if target is not None:
        global_lines.append("filename=" + check_job_value("filename", join_filenames([os.fspath(target)])))
    for key in _RUNNER_FIRST:
        if key in opts:
            global_lines.append(_line(key, opts[key]))
    for key, value in opts.items():
        if key in _RUNNER_FIRST or (key == "filename" and target is not None):
            continue
        (global_lines if key in fixed or key == "filename" else job_lines).append(_line(key, value))
    text = "\n".join(head + global_lines + [f"[{name}]"] + job_lines) + "\n"
    verify_rendered(text, rendered_options(point, target), job_name=name)
    return text


def verify_rendered(text: str, expected: Mapping[str, str | None], *, job_name: str | None = None) -> None:
    """Read a rendered job file back as fio would and require exactly ``expected``.

    Parameters
    ----------
    text : str
        The job file.
    expected : mapping
        Canonical option name -> value text (``None`` for a bare flag), as checked.
    job_name : str, optional
        The one job's section name.

    Raises
    ------
    JobFileError
        Not exactly one job, another job name, or options that differ from ``expected`` (an option
        more, one less, or another value), named in the message.
    """
    jobs = parse_jobfile(text, base_dir="/nonexistent-include-dir").jobs
    if len(jobs) != 1:
        raise JobFileError(f"rendered job file has {len(jobs)} jobs ({[n for n, _ in jobs]}); expected exactly 1")
    name, raw = jobs[0]
    if job_name is not None and name != job_name:
        raise JobFileError(f"rendered job file names its job {name!r}; expected {job_name!r}")
    got = canonical_options(raw, where="rendered job file")
    _compare(got, expected, "read back")


def _compare(got: Mapping[str, str | None], expected: Mapping[str, str | None], how: str) -> None:
    diff = []
    for key in sorted(set(got) | set(expected)):
        g, e = got.get(key, "<absent>"), expected.get(key, "<absent>")
        if g != e:
            diff.append(f"{key}: checked {e!r}, {how} {g!r}")
    if diff:
        raise JobFileError("the job file does not say what was checked: " + "; ".join(diff))


_HANDLE = re.compile(r"\s__handle_option=([^,]+), type=\S+, ptr=(.*)$")


def fio_parsed_options(jobfile: str | os.PathLike[str], fio_bin: str = "fio", *,
                       timeout_s: float = 60.0) -> list[tuple[str, str | None]]:
    """fio's own reading of a job file: (canonical name, value) for every option fio handled, in order.

    Runs ``fio --debug=parse --parse-only JOBFILE``: fio prints each option it handles under its
    canonical name (``__handle_option=rw ... ptr=randread`` for ``readwrite=randread``), after
    cutting comments and substituting variables, and starts no I/O. About 0.15 s.

    Raises
    ------
    JobFileError
        fio could not parse the file (its message is quoted).
    """
    proc = subprocess.run([fio_bin, "--debug=parse", "--parse-only", os.fspath(jobfile)], capture_output=True,
                          text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, env={"PATH": os.defpath})
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if not ln.startswith("parse ")]
        raise JobFileError(f"fio cannot parse {jobfile}: {' / '.join(lines[-3:]) or proc.returncode}")
    out: list[tuple[str, str | None]] = []
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        m = _HANDLE.search(line)
        if m:
            value = m.group(2)
            out.append((m.group(1), None if value == "(null)" else value))
    return out


def verify_fio_parse(jobfile: str | os.PathLike[str], expected: Mapping[str, str | None],
                     fio_bin: str = "fio") -> None:
    """Require that fio itself reads ``jobfile`` as exactly the options in ``expected``.

    Parameters
    ----------
    jobfile : path
        A job file rendered by :func:`render_jobfile` (one ``[global]``, one job).
    expected : mapping
        :func:`rendered_options` of the run.
    fio_bin : str
        fio executable.

    Raises
    ------
    JobFileError
        fio handled an option that was not checked, missed one, or read another value.
    """
    handled = fio_parsed_options(jobfile, fio_bin)
    got: dict[str, str | None] = {}
    for key, value in handled:
        if key in got and got[key] != value:
            raise JobFileError(f"fio read option {key} twice, as {got[key]!r} and {value!r}")
        got[key] = value
    want = {k: v for k, v in expected.items()}
    # fio prints a bare flag with the value it implies; the flag itself is what was rendered
    for key, value in list(got.items()):
        if want.get(key, "<absent>") is None and value in (None, "1", ""):
            got[key] = None
    _compare(got, want, "fio read")


# ---------------------------------------------------------------------------------------------
# parse


@dataclass(frozen=True)
class JobFile:
    """A parsed fio job file.

    Attributes
    ----------
    sections : tuple of (str, dict)
        Every section in file order, ``[global]`` ones included, with their own options
        (value ``None`` for a bare flag such as ``time_based``).
    """

    sections: tuple[tuple[str, dict[str, str | None]], ...] = field(default_factory=tuple)

    @property
    def global_options(self) -> dict[str, str | None]:
        """All ``[global]`` options merged in file order."""
        out: dict[str, str | None] = {}
        for name, opts in self.sections:
            if name == "global":
                out.update(opts)
        return out

    @property
    def jobs(self) -> list[tuple[str, dict[str, str | None]]]:
        """Each job with the ``[global]`` options that precede it applied (fio's rule)."""
        out = []
        current: dict[str, str | None] = {}
        for name, opts in self.sections:
            if name == "global":
                current = {**current, **opts}
            else:
                out.append((name, {**current, **opts}))
        return out


def _strip_value(text: str) -> str:
    """fio ``strip_blank_end``: cut at the first ``;`` or ``#``, then trailing blanks and control characters."""
    for ch in ";#":
        cut = text.find(ch)
        if cut >= 0:
            text = text[:cut]
    return text.rstrip(" \t\r\n\v\f\x00")


def parse_jobfile(
    text: str,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    _depth: int = 0,
    _seen: tuple[str, ...] = (),
) -> JobFile:
    """Parse a fio job file the way fio's ini parser does.

    Lines are stripped of leading blanks; empty lines and lines starting with ``;`` or ``#`` are
    comments; a value is cut at its first ``;`` or ``#`` (fio ``strip_blank_end``); ``include FILE``
    reads another job file (relative to ``base_dir``). ``${VAR}`` and ``$keyword`` are NOT
    substituted here (fio does it from its own environment at run time): :func:`storagebench._safety.lint_jobfile`
    refuses them.

    Parameters
    ----------
    text : str
        Job file text (fio HOWTO, "Job file format").
    base_dir : str or path-like, optional
        Directory that relative ``include`` paths are read from; default the current directory.

    Returns
    -------
    JobFile

    Raises
    ------
    JobFileError
        An option before any section, an empty section name, an ``include`` that cannot be read
        or includes itself; the message names the line number.
    """
    if _depth > 16:
        raise JobFileError("include nested more than 16 deep (an include loop?)")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    sections: list[tuple[str, dict[str, str | None]]] = []
    current: dict[str, str | None] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\r\n\v\f")
        if not line or line[0] in ";#":
            continue
        line = _strip_value(line)
        if not line:
            continue
        if line.startswith("include ") or line.startswith("include\t"):
            inc = line.split(None, 1)[1].strip()
            path = (base / inc) if not os.path.isabs(inc) else Path(inc)
            key = os.path.realpath(path)
            if key in _seen:
                raise JobFileError(f"line {lineno}: include {inc!r} includes itself")
            try:
                inc_text = read_text(path, max_bytes=MAX_INCLUDE_BYTES, what="included job file", error=JobFileError)
            except OSError as exc:
                raise JobFileError(f"line {lineno}: cannot read include {inc!r}: {exc.strerror}") from exc
            except JobFileError as exc:
                raise JobFileError(f"line {lineno}: cannot read include {inc!r}: {exc}") from None
            sub = parse_jobfile(inc_text, base_dir=path.parent, _depth=_depth + 1, _seen=_seen + (key,))
            for name, opts in sub.sections:
                current = dict(opts)
                sections.append((name, current))
            continue
        if line.startswith("["):
            if not line.endswith("]") or not line[1:-1].strip():
                raise JobFileError(f"line {lineno}: bad section header {line!r}; expected [name]")
            current = {}
            sections.append((line[1:-1].strip(), current))
            continue
        if current is None:
            raise JobFileError(f"line {lineno}: option {line!r} before any [section]")
        if "=" in line:
            key, value = line.split("=", 1)
            current[key.strip()] = value.strip()
        else:
            current[line] = None
    return JobFile(tuple(sections))

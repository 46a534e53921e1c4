"""Shared plumbing of the non-fio load-generator parsers (:mod:`.diskspd`, :mod:`.iometer`).

* :func:`decode_text` — bytes → text by byte-order-mark sniffing, never assuming UTF-8;
* :data:`FORMATS` / :func:`register` / :class:`Format` — the registry of ingest formats: each format module
  registers its name, its detection, its parser and its test fixtures together (a new format is one
  module plus its import in :mod:`storagebench.ingest`);
* :func:`detect_format` — which tool wrote a file, from its content (never from its name), asking the registry;
* :func:`run_row` — one ``runs`` row as a dict with every schema column, unknowns as the schema's
  "unknown" values (``""``, ``-1``, NaN, ``False``, ``None``);
* :class:`LoadgenRows` — what a parser hands to :func:`storagebench.ingest.ingest_paths`;
* :func:`refuse_format` — why a DiskSPD/Iometer file of another kind is not ingested.

This module sits below the parsers and imports none of them: :mod:`.diskspd` and :mod:`.iometer` register
their formats here when :mod:`storagebench.ingest` imports them, and the ingest reads a file with the
parser its format registered (:func:`format_of`).

Where the rows of these tools go (the rule is the one of fio's "All clients" entry: a total and its
parts are never both in ``runs``):

* ``runs`` holds the *run total* the tool itself reports or defines — DiskSPD's totals over every
  thread and target of a timespan, Iometer's ``ALL`` row — one row per direction that did I/O;
* the parts (DiskSPD's per-thread x per-target rows, Iometer's ``MANAGER``/``WORKER``/``DISK``/``PROCESSOR``
  rows) are **not** ingested into any table; they are in the parser's result object
  (:class:`~storagebench.ingest.diskspd.DiskSpdResult` ``.targets``,
  :class:`~storagebench.ingest.iometer.IometerResult` ``.parts``) for whoever needs them;
* ``timeseries`` holds only run-level series (DiskSPD's ``TimeSpan/Iops``), never the per-target ones.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from charset_normalizer import from_bytes

from .. import schema
from ..errors import IngestError

__all__ = [
    "FIO",
    "FORMATS",
    "Format",
    "register",
    "format_of",
    "ingestible",
    "LoadgenRows",
    "decode_text",
    "detect_format",
    "run_row",
    "refuse_format",
    "check_row",
    "unexplained_nan",
    "never_crash",
    "MIB",
    "NS_PER_MS",
]

#: bytes in one MiB: DiskSPD's and Iometer's "MB/s" / "MiBps (Binary)" unit (2**20).
MIB = 1048576
#: ns in one ms (DiskSPD and Iometer print latencies in ms).
NS_PER_MS = 1e6

#: The name of fio's JSON output in :data:`FORMATS`: read by the ingest's own fio reader (its fast path into
#: the tables, :mod:`storagebench.ingest.fio`), not through a :attr:`Format.parse`.
FIO = "fio"


@dataclass(frozen=True)
class Format:
    """One ingest format: how it is recognised, how it is read, where its test fixtures are.

    Attributes
    ----------
    name : str
        What :func:`detect_format` returns for it (``"diskspd-xml"``).
    detect : callable
        ``detect(text) -> bool``: whether a file is of this format, from the head of its content (its first
        64 KiB decoded leniently by byte-order mark, leading white space stripped, never empty; never its name).
    parse : callable or None
        ``parse(data, path) -> LoadgenRows``: the file's rows (raising :class:`IngestError` for a bad file).
        ``None`` for a format recognised only to be refused (:attr:`refusal` says why), and for fio's JSON
        (:data:`FIO`), which the fio reader reads.
    refusal : str or None
        Why a file of this format is not ingested (the error's message), for a format without a parser.
    fixtures : str or None
        Directory of sample files of this format, relative to ``tests/fixtures/`` of the source tree; the
        tests ingest every registered format's samples (``tests/test_ingest_formats.py``).
    priority : int
        Formats are asked in increasing priority (then in order of registration), the first that recognises
        a file names it: a format whose test is looser than another's comes after it.
    """

    name: str
    detect: Callable[[str], bool]
    parse: Callable[[bytes, str], LoadgenRows] | None = None
    refusal: str | None = None
    fixtures: str | None = None
    priority: int = 100

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", self.name):
            raise ValueError(f"an ingest format's name must be lower-case words joined by '-', got {self.name!r}")
        if (self.parse is None) == (self.refusal is None) and self.name != FIO:
            raise ValueError(f"ingest format {self.name!r} needs a parse function or a refusal (exactly one)")


#: The registry of ingest formats, by name, in the order :func:`detect_format` asks them.
FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add ``fmt`` to :data:`FORMATS` (a format module calls it once, at import) and return it.

    Raises
    ------
    ValueError
        A format of that name is registered already.
    """
    if fmt.name in FORMATS:
        raise ValueError(f"ingest format {fmt.name!r} is registered twice")
    ordered = sorted([*FORMATS.values(), fmt], key=lambda f: f.priority)  # stable: registration order within one
    FORMATS.clear()
    FORMATS.update((f.name, f) for f in ordered)
    return fmt


def ingestible() -> tuple[str, ...]:
    """The formats whose rows go into the tidy tables: fio's JSON and every format with a parser."""
    return tuple(name for name, f in FORMATS.items() if f.parse is not None or name == FIO)


def format_of(name: str, path: str) -> Format:
    """The registered format called ``name``.

    Raises
    ------
    IngestError
        No format of that name: the message names it and the formats known.
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise IngestError(f"unknown ingest format {name!r}; the formats known are {list(FORMATS)}", path=path)
    return fmt

_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
#: Single-byte code pages a file without a BOM that is not UTF-8 may be in (Windows consoles of
#: Western, Cyrillic, Central European, Greek, Turkish and Baltic locales; DOS code pages).
SINGLE_BYTE_CANDIDATES: tuple[str, ...] = (
    "cp1252", "cp1251", "cp1250", "cp1253", "cp1254", "cp1257", "cp866", "cp437",
)


def decode_text(data: bytes, path: str = "<bytes>") -> tuple[str, str]:
    """Decode a text result file by byte-order-mark sniffing.

    Order: a BOM (UTF-32, UTF-8, UTF-16; a PowerShell 5 ``>`` redirect writes UTF-16LE with a BOM);
    without one, strict UTF-8 (pure ASCII is UTF-8); else the best single-byte code page among
    :data:`SINGLE_BYTE_CANDIDATES` (cp1251 is seen in the wild) as judged by ``charset_normalizer``.
    Numbers and keywords in these files are ASCII, so the code page only decides how non-ASCII
    names (paths, computer names) read.

    Parameters
    ----------
    data : bytes
        The file's bytes.
    path : str
        Name used in error messages.

    Returns
    -------
    (str, str)
        The text (BOM removed) and the encoding used.

    Raises
    ------
    IngestError
        Empty file; bytes that do not decode under their BOM; NUL bytes without a BOM (UTF-16
        without a byte-order mark is refused: its byte order would be a guess; a binary file).
    """
    if not data.strip():
        raise IngestError("empty file", path=path)
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(enc), enc
            except UnicodeDecodeError as exc:
                raise IngestError(f"starts with a {enc} byte-order mark but does not decode as {enc}: {exc}",
                                  path=path) from None
    if b"\x00" in data:
        head = data[:4096]
        odd, even = head[1::2].count(0), head[0::2].count(0)
        if max(odd, even) > len(head) // 4:
            order = "little-endian" if odd > even else "big-endian"
            raise IngestError(
                f"looks like UTF-16 ({order}, NUL bytes in every other position) but has no byte-order mark; "
                "the byte order would be a guess: re-save it with a BOM (PowerShell: Out-File -Encoding unicode) "
                "or as UTF-8", path=path)
        raise IngestError("binary file (NUL bytes), not a text result", path=path)
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    return _single_byte(data), _single_byte_name(data)


def _best_single_byte(data: bytes) -> str:
    best = from_bytes(data[:65536], cp_isolation=list(SINGLE_BYTE_CANDIDATES)).best()
    return best.encoding if best is not None else "cp1252"


def _single_byte_name(data: bytes) -> str:
    return _best_single_byte(data)


def _single_byte(data: bytes) -> str:
    enc = _best_single_byte(data)
    try:
        return data.decode(enc)
    except (UnicodeDecodeError, LookupError):
        return data.decode("latin-1")  # every byte maps to a character: nothing is lost


def _sniff_text(data: bytes) -> str:
    """A lenient decode of the head of a file, for :func:`detect_format` only."""
    head = data[:65536]
    for bom, enc in _BOMS:
        if head.startswith(bom):
            return head[len(bom):].decode(enc, "replace")
    if b"\x00" in head:
        odd, even = head[1::2].count(0), head[0::2].count(0)
        if max(odd, even) > len(head) // 4:
            return head.decode("utf-16-le" if odd > even else "utf-16-be", "replace")
        return ""
    return head.decode("latin-1")


def detect_format(data: bytes) -> str | None:
    """Which tool wrote ``data``, from its content: the first of :data:`FORMATS` that recognises it.

    Returns
    -------
    str or None
        A name of :data:`FORMATS`, or ``None`` when the content is none of them. The built-in ones:

        ``"fio"``
            fio JSON (a ``{`` first, or ``"fio version"``/``"jobs"`` keys in the head);
        ``"diskspd-xml"``
            a ``<Results>`` XML document (DiskSPD ``-Rxml``);
        ``"diskspd-text"``
            DiskSPD for Windows text (``Input parameters:`` / ``Results for timespan`` / ``actual test time:``);
        ``"diskspd-linux"``
            DiskSPD for Linux text (``Results for job``), recognised to be refused;
        ``"iometer"``
            an Iometer results CSV (``'Test Type,Test Description`` or ``'Results`` with its header);
        ``"iometer-instantaneous"``
            Iometer's "last update" file (header starting ``TimeStamp,``): its final ``ALL`` row is the run,
            its update intervals a time series;
        ``"iometer-icf"``
            an Iometer configuration file (``'TEST SETUP``), not results.
    """
    text = _sniff_text(data).lstrip()
    if not text:
        return None
    return next((name for name, fmt in FORMATS.items() if fmt.detect(text)), None)


def _is_fio(text: str) -> bool:
    return text[0] == "{" or '"fio version"' in text[:4096] or ('"jobs"' in text[:4096] and '"jobname"' in text)


register(Format(FIO, _is_fio, fixtures="fio", priority=0))


#: every ``runs`` column at its unknown value (:attr:`storagebench.schema.Column.unknown`)
_UNKNOWN_ROW: dict[str, Any] = {c.name: c.unknown for c in schema.RUNS}


def run_row(**fields: Any) -> dict:
    """A ``runs`` row with every column of :data:`storagebench.schema.RUNS`.

    Columns not given get the schema's "unknown" (:attr:`storagebench.schema.Column.unknown`): ``""``
    (strings), ``-1`` (ints; 0 for ``repetition``, ``job_index``, ``error``), NaN (floats), ``False``
    (bools), ``None`` (times).
    Keys that are not ``runs`` columns are kept as they are (``note``, when the schema has it,
    is a column; when it has not, the ingest drops it).

    Raises
    ------
    IngestError
        Never; unknown keys are kept.
    """
    row = {**_UNKNOWN_ROW}
    row.update(fields)
    return row


@dataclass
class LoadgenRows:
    """Rows of one DiskSPD or Iometer file, ready for the ingest's tables.

    Attributes
    ----------
    runs : list of dict
        ``runs`` rows (:func:`run_row`), run totals only.
    histograms : list of (tuple, dict)
        ``((run_id, host, job, job_index, direction), {bin_ns: count})`` blocks.
    timeseries : dict of str to list, or None
        ``timeseries`` rows as columns (``run_id, host, job, direction, t_s, metric, value, log_index``),
        each a list of equal length; the ingest builds one DataFrame from a batch's files (a DataFrame per
        file cost about a sixth of a DiskSPD XML ingest: ``benchmarks/bench_ingest_diskspd.py``).
    problems : list of str
        What was dropped (only with ``strict=False``; with ``strict=True`` a problem raises).
    """

    runs: list[dict] = field(default_factory=list)
    histograms: list[tuple[tuple, dict]] = field(default_factory=list)
    timeseries: Any = None
    problems: list[str] = field(default_factory=list)


def refuse_format(fmt: str, path: str) -> NoReturn:
    """Raise why a file of format ``fmt`` is not ingested (its registered :attr:`Format.refusal`).

    Parameters
    ----------
    fmt : str
        :func:`detect_format` of the file, one without a parser (DiskSPD for Linux, an Iometer ``.icf``).
    path : str
        The file's path (named in the error).

    Raises
    ------
    IngestError
        Always: the format's refusal; for a name that is not registered, that name and the formats known;
        for an ingestible format, the ingestible ones.
    """
    refusal = format_of(fmt, path).refusal
    if refusal:
        raise IngestError(refusal, path=path)
    raise IngestError(f"format must be one of {list(ingestible())} here, got {fmt!r}", path=path)


_RUN_COLUMNS = {c.name: c for c in schema.RUNS}


#: the metric columns of ``runs`` (a NaN in one must be named by the row's note), with the pattern a note
#: names it by (:func:`storagebench.schema.note_pattern`), made once
_METRIC_NOTE = tuple((name, schema.NoteNames(col)) for name, col in _RUN_COLUMNS.items()
                     if col.valid is not None and col.valid.metric)


@functools.lru_cache(maxsize=4096)
def _names(names: schema.NoteNames, note: str) -> bool:
    """Whether ``note`` names a column (``names``, :class:`storagebench.schema.NoteNames`; files of one tool
    repeat a few notes many times)."""
    return names(note)


def unexplained_nan(row: dict) -> list[str]:
    """The metric columns of a ``runs`` row that are NaN and that its ``note`` does not name yet
    (the table gate's rule: every NaN says why, :func:`storagebench.schema.check_rows`)."""
    note = row.get("note") or ""
    out = []
    for name, pattern in _METRIC_NOTE:
        v = row.get(name)
        if isinstance(v, float) and v != v and not _names(pattern, note):
            out.append(name)
    return out


def check_row(row: dict, path: str) -> dict:
    """One DiskSPD/Iometer ``runs`` row against the schema's declared ranges, fio's rule applied.

    A value outside its column's :class:`storagebench.schema.Valid` range refuses the file when the
    column is core (``on_bad="error"``: IOPS, bandwidth, bytes, I/Os, runtime, factors) and becomes NaN
    with a note naming the column and the value otherwise (latencies, percentiles, CPU), as fio's
    reader does. An integer that no int64 column can hold (>= 2**63) refuses the file: it would
    otherwise overflow when the batch's tables are built.

    Returns
    -------
    dict
        ``row``, changed in place.

    Raises
    ------
    IngestError
        A core value out of range, or an integer beyond int64.
    """
    notes = []
    for name, col in _RUN_COLUMNS.items():
        v = row.get(name)
        if col.dtype == "int64":
            if isinstance(v, bool) or not isinstance(v, int):
                raise IngestError(f"{name} = {v!r}: must be an integer", path=path)
            if not -(2**63) <= v <= schema.MAX_INT:
                raise IngestError(f"{name} = {v}: beyond a 64-bit integer (allowed "
                                  f"{col.valid.describe() if col.valid else 'int64'})", path=path)
        valid = col.valid
        if valid is None or col.dtype not in ("int64", "float64"):
            continue
        if col.dtype == "float64":
            try:
                v = float(v)
            except (TypeError, ValueError, OverflowError):
                raise IngestError(f"{name} = {v!r}: not a number", path=path) from None
            row[name] = v
        if valid.allows(v):
            continue
        if valid.on_bad == "nan":
            row[name] = math.nan
            notes.append(f"{name} = {v!r}: impossible (allowed {valid.describe()}); stored NaN")
        else:
            raise IngestError(f"{name} = {v!r}: impossible (allowed {valid.describe()})", path=path)
    if notes:
        row["note"] = "; ".join([row["note"], *notes] if row.get("note") else notes)
    return row


def never_crash(what: str):
    """Decorator: a parser's ValueError, ArithmeticError (an int of 1e309), KeyError, IndexError or
    TypeError becomes an IngestError naming the file (its ``path`` argument, or ``self.path``), so the
    public parsers refuse bad bytes with a message, never a traceback."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except IngestError:
                raise
            except (ValueError, ArithmeticError, KeyError, IndexError, TypeError) as exc:
                path = kwargs.get("path") or (args[1] if len(args) > 1 and isinstance(args[1], str) else
                                              getattr(args[0], "path", "<bytes>"))
                raise IngestError(f"could not be read as {what}: {type(exc).__name__}: {exc}", path=path) from None
        return inner
    return wrap

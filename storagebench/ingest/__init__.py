"""Raw fio output → the tidy tables of :mod:`storagebench.schema`.

Entry points:

* :func:`ingest_paths` — files and directories (recursive) → :class:`IngestResult` in memory;
* :func:`ingest_study` — the runner's layout ``results/<study>/raw/<run_id>/`` → :class:`IngestResult`;
* :func:`ingest_to_parquet` — the same as :func:`ingest_paths` but streamed to parquet in batches of
  files (pyarrow ``ParquetWriter``), so memory stays bounded for tens of thousands of files;
* :func:`write_study_tables` / :func:`read_study_tables` — a study's ``tidy/`` written with the record of
  its ingest (``storagebench report``), and read back by the notebooks (or ``raw/`` ingested when ``tidy/``
  does not hold the runs now in ``raw/``).

Every good file is ingested; every bad one becomes an :class:`~storagebench.errors.IngestError`
(``.path``, ``.reason``) in ``errors`` — one bad file never stops the others.

What is read in a directory: ``*.json`` files (fio ``--output-format=json``/``json+``), fio logs
(``<prefix>_<iops|bw|lat|clat|slat>.<n>.log``), and every other file whose *content* is DiskSPD XML
or text or an Iometer results CSV (:func:`_loadgen_format`; other content is skipped; a file named
explicitly must be one of these formats or fio output). The formats are a registry
(:data:`storagebench.ingest.loadgen.FORMATS`): each format module registers its detection, its parser
and its test fixtures together, and is imported below (a new format: one module and its import here). A directory holding ``point.json`` is a run
directory of the runner: ``output.json`` is its fio output, ``point.json`` its identity and study factors,
``provenance.json`` its provenance, ``*.log`` its fio logs. In a study directory (``raw/`` beside
``failed/`` or ``study.yaml``) only ``raw/`` is read: not the failed attempts under ``failed/``, nor ``aside/``,
``tidy/``, ``notebooks/`` or the study's own records. Runs being measured (``raw/.tmp-*``) are never read.
"""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .. import schema
from .._inputs import (
    MAX_TOOL_OUTPUT_BYTES,
    STAGING_PREFIX,
    Refused,
    completed_runs,
    file_kind,
    read_input,
    scan,
    walk,
)
from ..errors import IngestError, SchemaError, StorageBenchError, display_path
from ..runlevel import read_run_totals, run_totals
from . import _fiorows
from . import diskspd as _diskspd  # noqa: F401 - registers the DiskSPD formats
from . import iometer as _iometer  # noqa: F401 - registers the Iometer formats
from . import loadgen as _loadgen
from .fio import (
    RUN_FIELDS,
    RowSink,
    check_point,
    check_provenance,
    emit_rows,
    empty_frame,
    file_run_id,
    runs_frame,
)
from .fiolog import is_fio_log, parse_fio_log

__all__ = [
    "IngestResult",
    "IngestSummary",
    "MAX_FILE_BYTES",
    "ingest_paths",
    "ingest_study",
    "ingest_to_parquet",
    "read_study_tables",
    "write_study_tables",
]

TABLES = ("runs", "histograms", "all_clients", "timeseries", "run_totals")
#: Tables written even when they have no rows (the others only when they have some).
_ALWAYS = ("runs", "histograms", "run_totals")
_SKIP_IN_RUN_DIR = {"point.json", "provenance.json", "error.json"}


@dataclass
class IngestResult:
    """Tidy tables from one ingest, and the files that could not be ingested.

    Attributes
    ----------
    runs, histograms, all_clients, timeseries : pandas.DataFrame
        Tables of :mod:`storagebench.schema` (validated, schema dtypes; ``runs`` may carry study
        factor columns, ``timeseries`` a ``log_index`` column).
    errors : list of IngestError
        One per bad input, each with ``.path`` and ``.reason``.
    files : int
        Number of files ingested successfully.
    run_totals : pandas.DataFrame
        The run-level table (:func:`storagebench.runlevel.run_totals` of ``runs`` and ``histograms``);
        computed from them when not given.
    spec_hashes : list of str
        The study spec hashes in the runs' ``provenance.json`` (one for a study directory; empty for
        loose files).
    """

    runs: pd.DataFrame
    histograms: pd.DataFrame
    all_clients: pd.DataFrame
    timeseries: pd.DataFrame
    errors: list[IngestError] = field(default_factory=list)
    files: int = 0
    run_totals: pd.DataFrame | None = None
    spec_hashes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.run_totals is None:
            self.run_totals = run_totals(self.runs, self.histograms)

    @property
    def ok(self) -> bool:
        """True when every input was ingested."""
        return not self.errors

    @property
    def spec_hash(self) -> str | None:
        """The spec hash of the study the runs belong to (``None`` for none, or for several)."""
        return self.spec_hashes[0] if len(self.spec_hashes) == 1 else None

    def write_parquet(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``runs``, ``histograms`` and ``run_totals`` (always) and ``all_clients`` /
        ``timeseries`` (when not empty) as ``<table>.parquet`` into ``out_dir`` (created if needed).

        Each file carries the table format version and the spec hash in its metadata
        (:func:`storagebench.schema.write_table`) and replaces the previous one atomically.

        Returns
        -------
        dict
            table name → path written.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / INGEST_RECORD).unlink(missing_ok=True)  # only write_study_tables vouches for the tables it wrote
        written = {}
        for name in TABLES:
            df = getattr(self, name)
            if name not in _ALWAYS and df.empty:
                continue
            written[name] = schema.write_table(df, out / f"{name}.parquet", name, spec_hash=self.spec_hash,
                                               spec_hashes=self.spec_hashes)
        return written


@dataclass
class IngestSummary:
    """What :func:`ingest_to_parquet` wrote.

    Attributes
    ----------
    rows : dict
        table name → rows written.
    paths : dict
        table name → parquet path (tables with no rows except ``runs``/``histograms``/``run_totals`` are
        not written).
    errors : list of IngestError
    files : int
        Files ingested successfully.
    spec_hashes : list of str
        The study spec hashes met (in the metadata of every table written).
    """

    rows: dict[str, int]
    paths: dict[str, Path]
    errors: list[IngestError]
    files: int
    spec_hashes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


# ---- discovery ---------------------------------------------------------------------------------

#: Default size cap of one input file (bytes): a file above it is reported, not read.
MAX_FILE_BYTES = MAX_TOOL_OUTPUT_BYTES


@dataclass
class _Item:
    kind: str  # "fio", "log" or "other" (a file found in a directory: read if its content is DiskSPD/Iometer)
    path: str
    identity: Any = None  # checked point.json (storagebench.ingest.fio.check_point)
    provenance: Any = None  # checked provenance.json
    run_id: str | None = None  # for logs
    host: str = "local"


def _not_regular(path: str, mode: int) -> IngestError:
    return IngestError(f"not a regular file ({file_kind(mode)}): not read (only regular files are ingested)", path=path)


_CAP_HINT = " (raise max_file_bytes / --max-file-size to ingest it)"


def _read_file(path: str, max_bytes: int, head: int | None = None) -> bytes:
    """The bytes of a regular file, at most ``max_bytes`` (``head``: only the first ``head`` bytes), through
    the one reader of inputs (:func:`storagebench._inputs.read_input`: ``O_NONBLOCK``, ``fstat`` of the open
    descriptor, the size cap, a file growing past it while read refused)."""
    return read_input(path, max_bytes=max_bytes, what="file", error=IngestError, head=head, hint=_CAP_HINT)


def _refused(bad: list[Refused]) -> list[IngestError]:
    return [IngestError(r.reason, path=r.path) for r in bad]


def _scan(d: str, root: str) -> tuple[list[str], list[str], list[IngestError]]:
    """:func:`storagebench._inputs.scan` with its refusals as per-file :class:`IngestError`."""
    dirs, files, bad = scan(d, root)
    return dirs, files, _refused(bad)


def _walk(top: str) -> Iterator[tuple[str, list[str], list[str], list[IngestError]]]:
    """:func:`storagebench._inputs.walk` (regular files only, never leaving the tree; staging directories of a
    run being measured, ``.tmp-*``, are not entered) with its refusals as per-file :class:`IngestError`."""
    for d, dirs, files, bad in walk(top):
        dirs[:] = [n for n in dirs if not n.startswith(STAGING_PREFIX)]
        yield d, dirs, files, _refused(bad)


def _read_meta(path: str, files: list[str] | None, max_bytes: int) -> bytes | None:
    """The bytes of ``point.json``/``provenance.json`` (None when not in ``files``), for
    :func:`~storagebench.ingest.fio.check_point` / ``check_provenance`` to decode typed."""
    name = os.path.basename(path)
    if files is not None and name not in files:
        return None
    return _read_file(path, max_bytes)


def _run_dir_items(d: str, files: list[str], max_bytes: int) -> Iterator[_Item | IngestError]:
    prefix = d if d.endswith(os.sep) else d + os.sep
    try:
        if "point.json" not in files:
            raise IngestError("missing file (or not a regular file)", path=prefix + "point.json")
        point = check_point(_read_meta(prefix + "point.json", files, max_bytes), prefix + "point.json")
        prov = check_provenance(_read_meta(prefix + "provenance.json", files, max_bytes), prefix + "provenance.json")
    except IngestError as exc:
        yield exc
        return
    except OSError as exc:
        yield IngestError(f"cannot read: {exc.strerror or exc}", path=prefix + "point.json")
        return
    if not point.run_id:
        yield IngestError("point.json is missing ['run_id']", path=prefix + "point.json")
        return
    if "output.json" not in files:
        yield IngestError("run directory has no output.json", path=d)
        return
    yield _Item("fio", prefix + "output.json", identity=point, provenance=prov)
    for f in sorted(files):
        if is_fio_log(f):
            yield _Item("log", prefix + f, run_id=point.run_id, provenance=prov)


def _plain_dir_items(d: str, files: list[str], max_bytes: int) -> Iterator[_Item]:
    jsons = sorted(f for f in files if f.endswith(".json") and f not in _SKIP_IN_RUN_DIR)
    logs = sorted(f for f in files if is_fio_log(f))
    prefix = d if d.endswith(os.sep) else d + os.sep  # = os.path.join(d, f) for a plain name, cheaper
    for f in jsons:
        yield _Item("fio", prefix + f)  # str, not Path: pathlib costs ~20 us a file
    log_run_id = None
    if logs and len(jsons) == 1:  # logs beside one fio output belong to that run
        try:
            log_run_id = file_run_id(_read_file(prefix + jsons[0], max_bytes))
        except (OSError, IngestError):
            log_run_id = None
    for f in logs:
        yield _Item("log", prefix + f, run_id=log_run_id)
    for f in sorted(files):  # DiskSPD / Iometer results are recognised by content, whatever their name
        if not f.endswith(".json") and not is_fio_log(f) and not f.startswith("."):
            yield _Item("other", prefix + f)


def _discover(paths: Iterable[str | os.PathLike], max_bytes: int) -> Iterator[_Item | IngestError]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    for p in paths:
        p = os.fsdecode(p)  # str; a non-UTF-8 name keeps its bytes as surrogate escapes
        try:
            st = os.stat(p)  # a path named explicitly may be a symlink: the user chose it
        except FileNotFoundError:
            yield IngestError("no such file or directory", path=p)
            continue
        except OSError as exc:
            yield IngestError(f"cannot read: {exc.strerror or exc}", path=p)
            continue
        if stat.S_ISDIR(st.st_mode):
            for root, dirs, files, bad in _walk(p):
                yield from bad
                if "raw" in dirs and ("failed" in dirs or "study.yaml" in files):
                    # a study directory: only raw/ holds runs (not failed/ attempts, aside/, tidy/, notebooks/,
                    # nor its records: created_targets.json, testbed.json, report.json ...)
                    dirs[:] = ["raw"]
                    continue
                if "point.json" in files:
                    yield from _run_dir_items(root, files, max_bytes)
                else:
                    yield from _plain_dir_items(root, files, max_bytes)
        elif not stat.S_ISREG(st.st_mode):
            yield _not_regular(p, st.st_mode)
        elif os.path.basename(p) == "point.json":
            parent = os.path.dirname(p) or "."
            _, files, bad = _scan(parent, os.path.realpath(parent))
            yield from bad
            yield from _run_dir_items(parent, files, max_bytes)
        elif is_fio_log(p):
            yield _Item("log", p)
        else:
            yield _Item("fio", p)


# ---- collecting rows -----------------------------------------------------------------------------


def _factor_kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list"


class _Collector(RowSink):
    """Rows of many files, appended as tuples and turned into DataFrames once (:meth:`frames`).

    ``factor_kinds`` (shared by the batches of one ingest) holds the kind of each study factor's
    levels (number, string, boolean, list) and the file it was first seen in: a run whose factor
    has another kind is refused, so that a factor column has one type (parquet needs it).
    """

    def __init__(self, max_bytes: int = MAX_FILE_BYTES, factor_kinds: dict | None = None,
                 raw_bins: bool = False) -> None:
        super().__init__(raw_bins)
        self.ts: list[pd.DataFrame | dict[str, list]] = []  # fio logs: frames; DiskSPD/Iometer: columns
        self.files = 0
        self.max_bytes = max_bytes
        self.spec_hashes: dict[str, None] = {}
        self.factor_kinds: dict[str, tuple[str, str]] = {} if factor_kinds is None else factor_kinds
        #: (path, :meth:`mark` before its rows) of every file added: which file a row came from
        self.file_marks: list[tuple[str, tuple[int, int, int, int]]] = []

    def _check_factors(self, identity: Any, path: str) -> list[tuple[str, str]]:
        new = []
        for name, value in (identity.factors.items() if identity is not None else ()):
            kind = _factor_kind(value)
            if kind is None:
                continue
            seen = self.factor_kinds.get(name)
            if seen is None:
                new.append((name, kind))
            elif seen[0] != kind:
                raise IngestError(f"point.json factor {name!r} = {value!r} is {kind}, but {seen[0]} in "
                                  f"{display_path(seen[1])}: the levels of one factor must be of one type",
                                  path=path)
        return new

    def add(self, item: _Item, data: bytes | None = None, file_id: str | None = None) -> None:
        """Add one file's rows. ``data`` (its bytes) and ``file_id`` (:func:`file_run_id` of them) may
        have been read already; a directory entry of unknown kind is sniffed here."""
        path = item.path
        if self._pending >= _fiorows.BINS_STEP:  # the raw bins of the files before this one
            self.parse_step()
        new_factors = self._check_factors(item.identity, path) if item.identity is not None else ()
        if item.kind == "other":
            data = _read_file(path, self.max_bytes, head=1 << 16)
            fmt = _loadgen_format(data)
            if fmt is None or fmt == "iometer-icf":
                return  # not a result file: skipped, not an error
            data = _read_file(path, self.max_bytes)
        else:
            if data is None:
                data = _read_file(path, self.max_bytes)
            fmt = _loadgen_format(data) if item.kind == "fio" else None
        if fmt is not None:
            _add_loadgen(self, fmt, data, path, item.identity)
        elif item.kind == "fio":
            try:
                emit_rows(self, data, path, item.identity, item.provenance, file_id)
            except IngestError as exc:  # a file named explicitly that is not fio's JSON: is it anything?
                if path.lower().endswith(".json") or not data.strip() or _loadgen.detect_format(data) is not None:
                    raise
                raise IngestError(f"{exc.reason}; nor is it any other format storagebench reads "
                                  f"(known: {', '.join(_loadgen.FORMATS)})", path=path) from None
        else:
            prov = item.provenance
            run_id = item.run_id or file_id or file_run_id(data)
            self.ts.append(parse_fio_log(path, run_id=run_id, host=item.host,
                                         fio_version=(prov.fio_version or "") if prov is not None else "",
                                         data=data))
        for name, kind in new_factors:
            self.factor_kinds.setdefault(name, (kind, path))
        if item.provenance is not None and item.provenance.spec_hash:
            self.spec_hashes[item.provenance.spec_hash] = None
        self.files += 1

    def mark(self) -> tuple[int, int, int, int]:
        """The length of the row lists before a file is added (see :meth:`rollback`)."""
        return len(self.runs), len(self.all_clients), len(self.hist_blocks), len(self.ts)

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        """Drop whatever a failed file appended after :meth:`mark` (all or nothing, even for a bug):
        each list goes back to the length of the list it runs beside."""
        runs, all_clients, blocks, ts = mark
        for rows, n in ((self.runs, runs), (self.runs_extra, runs), (self.all_clients, all_clients),
                        (self.all_extra, all_clients), (self.hist_blocks, blocks), (self.hist_keys, blocks),
                        (self.hist_counts, blocks), (self.hist_raw, blocks),
                        (self.hist_n, blocks), (self.hist_checks, blocks), (self.ts, ts)):
            del rows[n:]
        # the dropped blocks were never parsed: parse_step runs between files only
        self._pending = sum(len(r) for r in self.hist_raw[self._parsed:] if r is not None)

    def _blocks(self) -> tuple | None:
        """(runs row, length) of every json+ block when all are fio's (DiskSPD/Iometer blocks carry no
        row: run_totals then finds them by key)."""
        checks = self.hist_checks
        if not checks or any(c is None for c in checks):
            return None
        rows = np.fromiter((c[0] for c in checks), dtype=np.int64, count=len(checks))
        return rows, np.fromiter((b[5] for b in self.hist_blocks), dtype=np.int64, count=len(self.hist_blocks))

    def frames(self) -> dict[str, pd.DataFrame]:
        ts = [t for t in _merge_columns(self.ts) if len(t)]
        hist = schema.validate(self.histograms(), "histograms") if self.hist_blocks else empty_frame("histograms")
        runs = schema.validate(runs_frame(self.runs, self.runs_extra, "runs"), "runs") \
            if self.runs else empty_frame("runs")  # after histograms: its bins check may add notes to runs rows
        return {
            "runs": runs,
            "all_clients": schema.validate(runs_frame(self.all_clients, self.all_extra, "all_clients"), "all_clients")
            if self.all_clients else empty_frame("all_clients"),
            "histograms": hist,
            "timeseries": schema.validate(pd.concat(ts, ignore_index=True), "timeseries")
            if ts else empty_frame("timeseries"),
            # one output file holds all the rows of a run, and a file is never split across batches
            "run_totals": run_totals(runs, hist, _blocks=self._blocks()),
        }

    def gate(self, frames: dict[str, pd.DataFrame]) -> dict[str, IngestError]:
        """The table gate (:func:`storagebench.schema.check_rows`) on every table of the batch: the
        files whose rows break a declared range or relation, each with an IngestError naming the
        field, the value and the rule ({} when every row passes)."""
        bad: dict[str, IngestError] = {}
        if not self.file_marks:
            return bad
        marks = np.array([m for _, m in self.file_marks], dtype=np.int64).reshape(-1, 4)
        paths = [p for p, _ in self.file_marks]

        def owner(kind: int, pos: int) -> str:
            return paths[int(np.searchsorted(marks[:, kind], pos, side="right")) - 1]

        def refuse(path: str, v: schema.Violation) -> None:
            if path not in bad:
                bad[path] = IngestError(f"refused by the table gate: {v.message()}; none of the file's rows are "
                                        "written", path=path)

        runs = frames["runs"]
        for v in schema.check_rows(runs, "runs"):
            refuse(owner(0, v.row), v)
        for v in schema.check_rows(frames["all_clients"], "all_clients"):
            refuse(owner(1, v.row), v)
        hist = frames["histograms"]
        if len(hist):
            n_bins = np.fromiter((b[5] for b in self.hist_blocks), dtype=np.int64, count=len(self.hist_blocks))
            starts = np.zeros(len(n_bins), dtype=np.int64)
            np.cumsum(n_bins[:-1], out=starts[1:])
            rows = np.fromiter((c[0] if c is not None else -1 for c in self.hist_checks), dtype=np.int64,
                               count=len(self.hist_checks))
            nonempty = n_bins > 0
            for v in schema.check_rows(hist, "histograms", runs=runs, block_starts=starts[nonempty],
                                       block_rows=rows[nonempty]):
                block = int(np.searchsorted(starts, v.row, side="right")) - 1
                refuse(owner(2, block), v)
        ts = frames["timeseries"]
        if len(ts):
            lengths = np.array([len(t["t_s"]) if isinstance(t, dict) else len(t) for t in self.ts], dtype=np.int64)
            ends = np.cumsum(lengths)
            for v in schema.check_rows(ts, "timeseries"):
                part = int(np.searchsorted(ends, v.row, side="right"))
                refuse(owner(3, part), v)
        totals = frames["run_totals"]
        violations = schema.check_rows(totals, "run_totals")
        if violations:
            run_file = {}
            ids = runs["run_id"].to_numpy(dtype=object)
            for i in range(len(runs)):
                run_file.setdefault(ids[i], owner(0, i))
            tid = totals["run_id"].to_numpy(dtype=object)
            for v in violations:
                refuse(run_file.get(tid[v.row], paths[0]), v)
        return bad


def _merge_columns(parts: list) -> list[pd.DataFrame]:
    """The ``timeseries`` parts in order, each run of column dicts (DiskSPD/Iometer files) as one DataFrame."""
    out: list[pd.DataFrame] = []
    cols: dict[str, list] | None = None
    for part in parts:
        if isinstance(part, dict):
            if cols is None:
                cols = {k: [] for k in part}
            for k, v in part.items():
                cols[k] += v
            continue
        if cols is not None:
            out.append(pd.DataFrame(cols))
            cols = None
        out.append(part)
    if cols is not None:
        out.append(pd.DataFrame(cols))
    return out


# ---- formats other than fio's JSON: content sniffing and dispatch (storagebench.ingest.loadgen.FORMATS) ----


def _loadgen_format(data: bytes) -> str | None:
    """The registered format of ``data`` (:func:`storagebench.ingest.loadgen.detect_format`), or ``None``
    for fio JSON and for content that is none of them. A leading ``{`` is fio's fast path."""
    if data[:1] == b"{":
        return None
    fmt = _loadgen.detect_format(data)
    return None if fmt == _loadgen.FIO else fmt


def _parse_loadgen(fmt: str, data: bytes, path: str, identity: Mapping[str, Any] | None) -> _loadgen.LoadgenRows:
    """Parse one file of the registered format ``fmt`` (:func:`~storagebench.ingest.loadgen.detect_format`)
    with the parser it registered, ``study``/``repetition``/``run_order`` of a runner's ``point.json``
    stamped on its rows.

    Raises IngestError: ``fmt`` is not registered (the message names it and the formats known), is
    recognised only to be refused (its :attr:`~storagebench.ingest.loadgen.Format.refusal` says why), or the
    parser refuses the file; a parser's ValueError & co. become IngestError, never a crash.
    """
    parse = _loadgen.format_of(fmt, path).parse
    if parse is None:
        _loadgen.refuse_format(fmt, path)
    try:
        rows = parse(data, path)
    except IngestError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, ArithmeticError) as exc:  # never a crash
        raise IngestError(f"could not be read as {fmt}: {type(exc).__name__}: {exc}", path=path) from None
    if identity:  # a runner's point.json: its identity columns (study factors are the caller's business)
        stamp = {k: identity[k] for k in ("study", "repetition", "run_order") if k in identity}
        for r in rows.runs:
            r.update(stamp)
    return rows


def _add_loadgen(sink: _Collector, fmt: str, data: bytes, path: str, identity: Any) -> None:
    """Parse a DiskSPD/Iometer file (:func:`_parse_loadgen`, which raises IngestError for a bad one)
    and append its rows to the sink, all or nothing."""
    ident = msgspec.structs.asdict(identity) if identity is not None else None
    rows = _parse_loadgen(fmt, data, path, ident)
    factors = identity.factors if identity is not None else {}
    extra = {k: v for k, v in factors.items() if k not in RUN_FIELDS}
    default = _loadgen.run_row()
    runs = [tuple(r.get(f, default.get(f)) for f in RUN_FIELDS)
            for r in (_loadgen.check_row({**default, **r}, path) for r in rows.runs)]
    blocks, keys, counts = [], [], []
    for key, hist in rows.histograms:
        bad = next(((b, c) for b, c in hist.items() if not (0 <= b <= schema.MAX_INT and 0 <= c <= schema.MAX_INT)),
                   None)
        if bad is not None:
            raise IngestError(f"histograms: bin {bad[0]} ns holds {bad[1]} I/Os (allowed 0 to 2**63-1 each)", path=path)
        if hist:
            blocks.append((*key, len(hist)))
            keys.append(np.array([int(b) for b in hist], dtype=np.int64))
            counts.append(np.array([int(c) for c in hist.values()], dtype=np.int64))
    sink.runs.extend(runs)
    sink.runs_extra.extend([extra] * len(runs))
    sink.hist_blocks.extend(blocks)
    sink.hist_keys.extend(keys)
    sink.hist_counts.extend(counts)
    sink.hist_raw.extend([None] * len(blocks))
    sink.hist_n.extend([-1] * len(blocks))  # DiskSPD/Iometer: no N to check the bins against
    sink.hist_checks.extend([None] * len(blocks))
    if rows.timeseries is not None and len(rows.timeseries["t_s"]):
        sink.ts.append(rows.timeseries)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while files are parsed and their tables built, back on
    (if it was) after.

    The decoder allocates many small objects per fio output, none of them in a cycle; the
    collections they trigger (each one also walks everything pandas and pyarrow keep alive) cost
    ~10% of the ingest time, and building the tables of a batch (row tuples, columns, the run-level
    table) triggered ~15 more (~5% of it). Nothing is leaked: reference counting frees the parsed
    documents as usual, and the collector runs again once the batch is done.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _run(items: Iterable[_Item | IngestError], collector: _Collector, errors: list[IngestError]) -> None:
    """Add every item to ``collector``; every failure becomes an IngestError of its file in ``errors``.

    Nothing a file holds can stop the others: an unexpected exception (a storagebench bug) is
    reported for its file as ``internal error``, not raised, and the file's rows are not kept.
    """
    add, mark = collector.add, collector.mark
    with _gc_paused():
        max_bytes = collector.max_bytes
        for item in items:
            if isinstance(item, IngestError):
                errors.append(item)
                continue
            before = mark()
            try:
                add(item, None if item.kind == "other" else _read_file(item.path, max_bytes))
                collector.file_marks.append((item.path, before))
            except IngestError as exc:
                collector.rollback(before)
                errors.append(exc)
            except OSError as exc:
                collector.rollback(before)
                errors.append(IngestError(f"cannot read: {exc.strerror or exc}", path=item.path))
            except Exception as exc:  # noqa: BLE001 - one file never loses the batch
                collector.rollback(before)
                errors.append(IngestError(f"internal error (a storagebench bug; please report it): "
                                          f"{type(exc).__name__}: {exc}", path=item.path))


def _collect_once(items: list, max_bytes: int, factor_kinds: dict | None) -> tuple[_Collector, list[IngestError]]:
    """Every item into a new :class:`_Collector` (:func:`_run`), and the errors.

    The json+ bins are decoded raw and parsed for the whole batch at once
    (:meth:`storagebench.ingest.fio.RowSink.parse_bins`). When some block is not the plain text fio
    writes (an edited or corrupted file), the batch is read again with the bins decoded into dicts, as
    every file was before: the tables and errors are then exactly those of that reading.
    """
    kinds = dict(factor_kinds) if factor_kinds is not None else None
    col, errors = _Collector(max_bytes, factor_kinds, raw_bins=True), []
    _run(items, col, errors)
    if col.parse_bins():
        return col, errors
    if factor_kinds is not None:  # as before the first reading
        factor_kinds.clear()
        factor_kinds.update(kinds)
    col, errors = _Collector(max_bytes, factor_kinds), []
    _run(items, col, errors)
    return col, errors


def _tables(col: _Collector) -> tuple[dict[str, pd.DataFrame] | None, dict[str, IngestError]]:
    """The batch's tables and the files the table gate refuses; ``(None, {})`` when building the tables
    raised (a value no column can hold: :func:`_collect` then finds the file)."""
    try:
        frames = col.frames()
        return frames, col.gate(frames)
    except Exception:  # noqa: BLE001 - found file by file below: one bad file never loses the batch
        return None, {}


def _collect(items: Iterable[_Item | IngestError], max_bytes: int,
             factor_kinds: dict | None = None) -> tuple[_Collector, list[IngestError], dict[str, pd.DataFrame]]:
    """Every item into a :class:`_Collector`, its tables, and the errors: the table gate's too.

    The tables of the batch are built and checked once (:meth:`_Collector.gate`, the declarations of
    :mod:`storagebench.schema`); when the gate refuses some files, or building the tables raises (an
    int above 2**63-1 ...: the file is then found by building each file's tables alone), the batch is
    read again without them, so their rows are never written and every other file's are, unchanged.
    """
    items = list(items)
    kinds = dict(factor_kinds) if factor_kinds is not None else None
    refused: list[IngestError] = []
    skip: set[str] = set()
    while True:
        if factor_kinds is not None:
            factor_kinds.clear()
            factor_kinds.update(kinds)
        todo = [it for it in items if isinstance(it, IngestError) or it.path not in skip]
        col, errors = _collect_once(todo, max_bytes, factor_kinds)
        frames, bad = _tables(col)
        if frames is None:
            bad = {}
            for path, _ in col.file_marks:
                alone, _ = _collect_once([it for it in todo if not isinstance(it, IngestError) and it.path == path],
                                         max_bytes, dict(kinds) if kinds is not None else None)
                one, why = _tables(alone)
                if one is None:
                    try:
                        alone.frames()
                        reason = "the table gate failed"
                    except Exception as exc:  # noqa: BLE001 - reported for its file
                        reason = f"{type(exc).__name__}: {exc}"
                    bad[path] = IngestError(f"its values cannot be stored in the tables ({reason}); none of "
                                            "the file's rows are written", path=path)
                else:
                    bad.update(why)
            if not bad:  # every file alone is fine, the batch is not: a storagebench bug, raised
                col.frames()
        if not bad:
            return col, errors + refused, frames
        skip.update(bad)
        refused.extend(bad.values())


def _result(collector: _Collector, errors: list[IngestError],
            frames: dict[str, pd.DataFrame] | None = None) -> IngestResult:
    return IngestResult(**(collector.frames() if frames is None else frames), errors=errors, files=collector.files,
                        spec_hashes=list(collector.spec_hashes))


def ingest_paths(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> IngestResult:
    """Ingest fio outputs and logs from files and directories (recursive) into tidy tables.

    Parameters
    ----------
    paths : path or iterable of paths
        Files (any name: fio JSON/JSON+ output, or a fio log named ``*_<type>.<n>.log``) and
        directories (``*.json`` and fio logs inside, recursively; run directories of the runner with
        ``point.json`` are read with their identity and provenance). Names need not be UTF-8.
    max_file_bytes : int
        Size cap of one file (bytes, default :data:`MAX_FILE_BYTES` = 512 MiB): a larger file is
        reported in ``errors`` and not read.

    Returns
    -------
    IngestResult
        ``runs``, ``histograms``, ``all_clients``, ``timeseries`` and ``errors``. For a loose fio
        output (no ``point.json``): ``run_id`` = first 12 hex digits of the SHA-256 of the file,
        ``study=""``, ``repetition=0``, ``run_order=-1``.

    Notes
    -----
    Never raises for a bad input file: it is reported in ``errors`` with its reason. Only regular
    files are read: FIFOs, devices, sockets, broken symlinks and symlinks that leave the directory
    tree being ingested are reported, never opened (a named path may be a symlink). What is refused
    in fio's JSON, and what becomes NaN with a ``note``: :mod:`storagebench.ingest.fio`.
    """
    max_bytes = _cap(max_file_bytes)
    with _gc_paused():
        return _result(*_collect(_discover(paths, max_bytes), max_bytes))


def _cap(max_file_bytes: int) -> int:
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes < 1:
        raise SchemaError(f"max_file_bytes must be a positive number of bytes, got {max_file_bytes!r}")
    return max_file_bytes


def ingest_study(study_dir: str | os.PathLike, *, max_file_bytes: int = MAX_FILE_BYTES) -> IngestResult:
    """Ingest a study written by the runner: ``<study_dir>/raw/<run_id>/{output.json, point.json, provenance.json, *.log}``.

    Parameters
    ----------
    study_dir : path
        ``results/<study>`` (the directory holding ``raw/``).
    max_file_bytes : int
        Size cap of one file (bytes), as in :func:`ingest_paths`.

    Returns
    -------
    IngestResult
        Rows carry ``study``, ``run_id``, ``repetition``, ``run_order``, the study factors and, when the
        design has them, ``setup`` and ``block`` (extra columns of ``runs``) from ``point.json``, and
        ``fio_version``/``kernel``/``hostname``/``started_at`` from ``provenance.json``. ``failed/``
        attempts and runs moved to ``aside/`` are not read.

    Raises
    ------
    IngestError
        ``study_dir`` has no ``raw/`` directory. A bad run directory is reported in ``errors``.
    """
    raw = os.path.join(os.fsdecode(study_dir), "raw")
    if not os.path.isdir(raw):
        raise IngestError("not a study directory: it has no raw/ (expected results/<study>/raw/<run_id>/)",
                          path=os.fsdecode(study_dir))
    max_bytes = _cap(max_file_bytes)

    def items() -> Iterator[_Item | IngestError]:
        root = os.path.realpath(raw)
        _, _, bad = _scan(raw, root)
        yield from bad
        for name in completed_runs(raw):  # the one rule of a completed run: not raw/.tmp-* (being measured)
            d = os.path.join(raw, name)
            _, files, bad = _scan(d, root)
            yield from bad
            if "point.json" not in files:
                yield IngestError("run directory has no point.json", path=d)
                continue
            yield from _run_dir_items(d, files, max_bytes)

    with _gc_paused():
        return _result(*_collect(items(), max_bytes))


#: The record of the ingest that wrote a study's ``tidy/`` (:func:`write_study_tables`): the files it read, the
#: files it could not read, and the completed runs then in ``raw/``. :func:`read_study_tables` trusts the tables
#: only while ``raw/`` still holds exactly those runs.
INGEST_RECORD = "ingest.json"
_RECORD_VERSION = 1
_RECORD_MAX_BYTES = 64 * 2**20


class _NotIngested(msgspec.Struct, forbid_unknown_fields=True):
    path: str | None
    reason: str


class _IngestRecord(msgspec.Struct, forbid_unknown_fields=True):
    format_version: int
    files: int
    errors: list[_NotIngested]
    runs: list[str]
    spec_hashes: list[str]


def write_study_tables(study_dir: str | os.PathLike, *, max_file_bytes: int = MAX_FILE_BYTES) -> IngestResult:
    """Ingest a study and write its tables into ``<study_dir>/tidy/``, with the record of that ingest.

    What ``storagebench report`` does before it runs a write-up's notebooks (:func:`storagebench.publish.publish_report`
    with ``write_tidy=True``), so that the notebooks only read (:func:`read_study_tables`).

    Parameters
    ----------
    study_dir : path
        ``results/<study>`` (the directory holding ``raw/``).
    max_file_bytes : int
        Size cap of one file (bytes), as in :func:`ingest_paths`.

    Returns
    -------
    IngestResult
        The tables written (:func:`ingest_study`).

    Raises
    ------
    IngestError
        ``study_dir`` has no ``raw/``.
    OSError
        ``tidy/`` cannot be written.

    Notes
    -----
    The tables are written by :meth:`IngestResult.write_parquet`; ``tidy/ingest.json`` (:data:`INGEST_RECORD`:
    the number of files read, each file not read with its reason, the completed runs then in ``raw/`` and the
    spec hashes) is removed first and written last, so no record ever vouches for tables of another ingest.
    The runs are listed before the ingest: a run completed meanwhile leaves the record out of date, which
    only makes a reader ingest again.
    """
    runs = completed_runs(os.path.join(os.fsdecode(study_dir), "raw"))
    result = ingest_study(study_dir, max_file_bytes=max_file_bytes)
    tidy = Path(study_dir) / "tidy"
    tidy.mkdir(parents=True, exist_ok=True)
    (tidy / INGEST_RECORD).unlink(missing_ok=True)
    result.write_parquet(tidy)
    record = _IngestRecord(format_version=_RECORD_VERSION, files=result.files, runs=runs,
                           errors=[_NotIngested(path=e.path, reason=e.reason) for e in result.errors],
                           spec_hashes=list(result.spec_hashes))
    try:
        data = msgspec.json.encode(record)
    except (msgspec.EncodeError, UnicodeEncodeError):  # a name that is not UTF-8: no record, readers ingest again
        return result
    tmp = tidy / f".{INGEST_RECORD}.tmp-{os.getpid()}"
    tmp.write_bytes(data)
    os.replace(tmp, tidy / INGEST_RECORD)
    return result


def _ingest_record(tidy: Path, runs: list[str]) -> _IngestRecord | None:
    """The record of ``tidy/`` when it is this version's and names exactly ``runs``; else ``None``."""
    try:
        data = read_input(tidy / INGEST_RECORD, max_bytes=_RECORD_MAX_BYTES, what="ingest record", root=tidy)
        record = msgspec.json.decode(data, type=_IngestRecord)
    except (OSError, StorageBenchError, msgspec.DecodeError):
        return None
    if record.format_version != _RECORD_VERSION or record.runs != runs or record.files < 0:
        return None
    return record


def read_study_tables(study_dir: str | os.PathLike, *, max_file_bytes: int = MAX_FILE_BYTES) -> IngestResult:
    """The tables of a study: ``tidy/`` as :func:`write_study_tables` left it, or ``raw/`` ingested now.

    A notebook reads its study with this and writes nothing. The tables of ``tidy/`` are read (the run-level
    table once, :func:`storagebench.runlevel.read_run_totals`) when its record (:data:`INGEST_RECORD`) names
    exactly the completed runs now in ``raw/``; otherwise (no ``tidy/``, tables written by ``storagebench
    ingest``, runs added or set aside since, a partial write-up, a record or a table that cannot be read)
    ``raw/`` is ingested in memory (:func:`ingest_study`): the result is the same either way, only slower.

    Parameters
    ----------
    study_dir : path
        ``results/<study>`` (the directory holding ``raw/``).
    max_file_bytes : int
        Size cap of one file (bytes) when ``raw/`` is ingested, as in :func:`ingest_paths`.

    Returns
    -------
    IngestResult
        ``runs``, ``histograms``, ``all_clients``, ``timeseries`` and ``run_totals`` (never recomputed when
        read), ``errors`` and ``files`` as the ingest recorded them.

    Raises
    ------
    IngestError
        ``study_dir`` has no ``raw/`` (and ``tidy/`` is not current).
    """
    tidy = Path(study_dir) / "tidy"
    record = _ingest_record(tidy, completed_runs(os.path.join(os.fsdecode(study_dir), "raw")))
    if record is None:
        return ingest_study(study_dir, max_file_bytes=max_file_bytes)
    try:
        frames = {name: (schema.read_table(tidy / f"{name}.parquet", name)  # a missing runs table: SchemaError
                         if name in _ALWAYS or (tidy / f"{name}.parquet").is_file() else schema.empty(name))
                  for name in TABLES if name != "run_totals"}
        totals = read_run_totals(tidy)
    except (OSError, StorageBenchError):
        return ingest_study(study_dir, max_file_bytes=max_file_bytes)
    return IngestResult(**frames, run_totals=totals, files=record.files, spec_hashes=record.spec_hashes,
                        errors=[IngestError(e.reason, path=e.path) for e in record.errors])


def ingest_to_parquet(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    batch_files: int = 500,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> IngestSummary:
    """Like :func:`ingest_paths`, but stream the tables to ``out_dir/<table>.parquet`` in batches.

    Memory holds at most ``batch_files`` files' rows at a time (pyarrow ``ParquetWriter``, one row
    group per batch and table). The tables are written to a temporary directory inside ``out_dir``
    and moved over the previous ones (``os.replace``, after ``fsync``) only once every batch has
    been written: an exception or a kill part-way leaves the previous tables as they were.

    Parameters
    ----------
    paths : path or iterable of paths
        As in :func:`ingest_paths`.
    out_dir : path
        Created if needed; ``runs.parquet``, ``histograms.parquet`` and ``run_totals.parquet`` are
        always written, ``all_clients.parquet`` and ``timeseries.parquet`` only when they have rows (an
        old one is removed). Every file carries the table format version and the spec hash in its
        metadata (:data:`storagebench.schema.FORMAT_VERSION`, :func:`storagebench.schema.read_table`).
        ``run_totals`` is built batch by batch: a run's rows come from one output file.
    batch_files : int
        Files per batch (>= 1).
    max_file_bytes : int
        Size cap of one file (bytes), as in :func:`ingest_paths`.

    Returns
    -------
    IngestSummary

    Raises
    ------
    SchemaError
        A later batch brings a study factor column the first batch did not have, or one whose
        type cannot be stored in the first batch's column (ingest such studies separately), or
        ``batch_files < 1``. The previous tables are then left untouched.

    Notes
    -----
    Each table is replaced by its own atomic rename, one after the other at the very end; only a
    kill between those (at most five) renames can leave some tables of the new ingest beside
    some of the old one.
    """
    if isinstance(batch_files, bool) or int(batch_files) < 1:
        raise SchemaError(f"batch_files must be >= 1, got {batch_files}")
    max_bytes = _cap(max_file_bytes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ingest-", dir=out))
    writers: dict[str, Any] = {}
    rows = dict.fromkeys(TABLES, 0)
    errors: list[IngestError] = []
    files = 0
    factor_kinds: dict = {}

    def flush(frames: dict[str, pd.DataFrame]) -> None:
        for name, df in frames.items():
            if df.empty:
                continue
            table = pa.Table.from_pandas(df, preserve_index=False)
            if name not in writers:
                writers[name] = pq.ParquetWriter(tmp / f"{name}.parquet", table.schema)
            else:
                wschema = writers[name].schema
                new = [c for c in table.column_names if c not in wschema.names]
                if new:
                    raise SchemaError(f"{name}: columns {new} appear after the first batch; "
                                      "ingest studies with different factors separately")
                table = pa.table({f.name: (table[f.name] if f.name in table.column_names
                                           else pa.nulls(len(table), f.type)) for f in wschema})
                try:
                    table = table.cast(wschema)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(f"{name}: a later batch has values the first batch's column types cannot "
                                      f"hold ({exc}); ingest studies with different factors separately") from None
            writers[name].write_table(table)
            rows[name] += len(df)

    spec_hashes: dict[str, None] = {}
    try:
        try:
            items = _discover(paths, max_bytes)
            while chunk := list(itertools.islice(items, int(batch_files))):
                with _gc_paused():
                    batch, batch_errors, frames = _collect(chunk, max_bytes, factor_kinds)
                    errors.extend(batch_errors)
                    files += batch.files
                    spec_hashes.update(batch.spec_hashes)
                    flush(frames)
            hashes = list(spec_hashes)
            spec_hash = hashes[0] if len(hashes) == 1 else None
            for name, w in writers.items():  # known only now: the format version and the study's spec hash
                w.add_key_value_metadata(schema.table_metadata(name, spec_hash=spec_hash, spec_hashes=hashes))
        finally:
            for w in writers.values():
                w.close()
        for name in _ALWAYS:
            if name not in writers:
                schema.write_table(schema.empty(name), tmp / f"{name}.parquet", name, spec_hash=spec_hash,
                                   spec_hashes=hashes)
                writers[name] = None
        for name in writers:  # on disk before the renames make them the tables
            fd = os.open(tmp / f"{name}.parquet", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        (out / INGEST_RECORD).unlink(missing_ok=True)  # a study's record no longer describes these tables
        for name in TABLES:
            path = out / f"{name}.parquet"
            if name in writers:
                os.replace(tmp / f"{name}.parquet", path)
            elif path.exists():
                path.unlink()  # a stale table from an earlier ingest into the same directory
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    paths_written = {name: out / f"{name}.parquet" for name in writers}
    return IngestSummary(rows=rows, paths=paths_written, errors=errors, files=files, spec_hashes=hashes)

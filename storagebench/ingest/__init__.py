"""Raw fio output → the tidy tables of :mod:`storagebench.schema`.

Entry points:

* :func:`ingest_paths` — files and directories (recursive) → :class:`IngestResult` in memory;
* :func:`ingest_study` — the runner's layout ``results/<study>/raw/<run_id>/`` → :class:`IngestResult`;
* :func:`ingest_to_parquet` — the same as :func:`ingest_paths` but streamed to parquet in batches of
  files (pyarrow ``ParquetWriter``), so memory stays bounded for tens of thousands of files.

Every good file is ingested; every bad one becomes an :class:`~storagebench.errors.IngestError`
(``.path``, ``.reason``) in ``errors`` — one bad file never stops the others.

What is read in a directory: ``*.json`` files (fio ``--output-format=json``/``json+``), fio logs
(``<prefix>_<iops|bw|lat|clat|slat>.<n>.log``), and every other file whose *content* is DiskSPD XML
or text or an Iometer results CSV (:func:`_loadgen_format`; other content is skipped; a file named
explicitly must be one of these formats or fio output). A directory holding ``point.json`` is a run
directory of the runner: ``output.json`` is its fio output, ``point.json`` its identity and study factors,
``provenance.json`` its provenance, ``*.log`` its fio logs. In a study directory (``raw/`` beside
``failed/``) the failed attempts under ``failed/`` are not read.
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from .. import schema
from ..errors import IngestError, SchemaError
from . import loadgen as _loadgen
from .fio import _emit_rows, _RowSink, empty_frame, file_run_id, histogram_frame, parse_fio_output, runs_frame
from .fiolog import is_fio_log, parse_fio_log

__all__ = [
    "IngestResult",
    "IngestSummary",
    "ingest_paths",
    "ingest_study",
    "ingest_to_parquet",
    "parse_fio_output",
    "parse_fio_log",
]

TABLES = ("runs", "histograms", "all_clients", "timeseries")
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
    """

    runs: pd.DataFrame
    histograms: pd.DataFrame
    all_clients: pd.DataFrame
    timeseries: pd.DataFrame
    errors: list[IngestError] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        """True when every input was ingested."""
        return not self.errors

    def write_parquet(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``runs.parquet`` and ``histograms.parquet`` (always) and ``all_clients.parquet`` /
        ``timeseries.parquet`` (when not empty) into ``out_dir`` (created if needed).

        Returns
        -------
        dict
            table name → path written.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for name in TABLES:
            df = getattr(self, name)
            if name in ("all_clients", "timeseries") and df.empty:
                continue
            path = out / f"{name}.parquet"
            df.to_parquet(path, index=False)
            written[name] = path
        return written


@dataclass
class IngestSummary:
    """What :func:`ingest_to_parquet` wrote.

    Attributes
    ----------
    rows : dict
        table name → rows written.
    paths : dict
        table name → parquet path (tables with no rows except ``runs``/``histograms`` are not written).
    errors : list of IngestError
    files : int
        Files ingested successfully.
    """

    rows: dict[str, int]
    paths: dict[str, Path]
    errors: list[IngestError]
    files: int

    @property
    def ok(self) -> bool:
        return not self.errors


# ---- discovery ---------------------------------------------------------------------------------


@dataclass
class _Item:
    kind: str  # "fio", "log" or "other" (a file found in a directory: read if its content is DiskSPD/Iometer)
    path: str | Path
    identity: dict | None = None
    provenance: dict | None = None
    run_id: str | None = None  # for logs
    host: str = "local"


def _read_meta(path: Path, required: bool) -> dict | None:
    if not path.exists():
        if required:
            raise IngestError("missing file", path=str(path))
        return None
    try:
        meta = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise IngestError(f"invalid JSON: {exc}", path=str(path)) from None
    if not isinstance(meta, dict):
        raise IngestError(f"must be a JSON object, got {type(meta).__name__}", path=str(path))
    return meta


def _run_dir_items(d: Path, files: list[str]) -> Iterator[_Item | IngestError]:
    try:
        point = _read_meta(d / "point.json", required=True)
        prov = _read_meta(d / "provenance.json", required=False) or {}
    except IngestError as exc:
        yield exc
        return
    missing = [k for k in ("run_id",) if k not in point]
    if missing:
        yield IngestError(f"point.json is missing {missing}", path=str(d / "point.json"))
        return
    out = d / "output.json"
    if not out.exists():
        yield IngestError("run directory has no output.json", path=str(d))
        return
    yield _Item("fio", out, identity=point, provenance=prov)
    for f in sorted(files):
        if is_fio_log(f):
            yield _Item("log", d / f, run_id=str(point["run_id"]), provenance=prov)


def _plain_dir_items(d: str, files: list[str]) -> Iterator[_Item]:
    jsons = sorted(f for f in files if f.endswith(".json") and f not in _SKIP_IN_RUN_DIR)
    logs = sorted(f for f in files if is_fio_log(f))
    prefix = d if d.endswith(os.sep) else d + os.sep  # = os.path.join(d, f) for a plain name, cheaper
    for f in jsons:
        yield _Item("fio", prefix + f)  # str, not Path: pathlib costs ~20 us a file
    log_run_id = None
    if logs and len(jsons) == 1:  # logs beside one fio output belong to that run
        try:
            log_run_id = file_run_id(Path(d, jsons[0]).read_bytes())
        except OSError:
            log_run_id = None
    for f in logs:
        yield _Item("log", os.path.join(d, f), run_id=log_run_id)
    for f in sorted(files):  # DiskSPD / Iometer results are recognised by content, whatever their name
        if not f.endswith(".json") and not is_fio_log(f) and not f.startswith("."):
            yield _Item("other", prefix + f)


def _discover(paths: Iterable[str | os.PathLike]) -> Iterator[_Item | IngestError]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs.sort()
                if "raw" in dirs and "failed" in dirs:  # a study directory: failed attempts are not runs
                    dirs.remove("failed")
                if "point.json" in files:
                    yield from _run_dir_items(Path(root), files)
                else:
                    yield from _plain_dir_items(root, files)
        elif p.is_file():
            if p.name == "point.json":
                yield from _run_dir_items(p.parent, os.listdir(p.parent))
            elif is_fio_log(p):
                yield _Item("log", p)
            else:
                yield _Item("fio", p)
        else:
            yield IngestError("no such file or directory", path=str(p))


# ---- collecting rows -----------------------------------------------------------------------------


def _read_bytes(path: str | os.PathLike) -> bytes:
    """The whole file, with bare ``os.open``/``os.read`` (half the cost of ``open().read()``, which
    builds a buffered file object: ~5 us a file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 1 << 16)
        if data:
            parts = [data]
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
            if len(parts) > 1:
                data = b"".join(parts)
        return data
    finally:
        os.close(fd)


class _Collector(_RowSink):
    """Rows of many files, appended as tuples and turned into DataFrames once (:meth:`frames`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ts: list[pd.DataFrame] = []
        self.files = 0

    def add(self, item: _Item) -> None:
        path = item.path
        if item.kind == "other":
            data = _read_head(path)
            fmt = _loadgen_format(data)
            if fmt is None or fmt == "iometer-icf":
                return  # not a result file: skipped, not an error
            data = _read_bytes(path)
        else:
            data = _read_bytes(path)
            fmt = _loadgen_format(data) if item.kind == "fio" else None
        if fmt is not None:
            _add_loadgen(self, fmt, data, path if type(path) is str else str(path), item.identity)
            self.files += 1
            return
        if item.kind == "fio":
            _emit_rows(self, data, path if type(path) is str else str(path), item.identity, item.provenance)
        else:
            prov = item.provenance or {}
            run_id = item.run_id or file_run_id(data)
            self.ts.append(parse_fio_log(item.path, run_id=run_id, host=item.host,
                                         fio_version=str(prov.get("fio_version", "")), data=data))
        self.files += 1

    def frames(self) -> dict[str, pd.DataFrame]:
        ts = [t for t in self.ts if len(t)]
        return {
            "runs": schema.validate(runs_frame(self.runs, self.runs_extra, "runs"), "runs")
            if self.runs else empty_frame("runs"),
            "all_clients": schema.validate(runs_frame(self.all_clients, self.all_extra, "all_clients"), "all_clients")
            if self.all_clients else empty_frame("all_clients"),
            "histograms": schema.validate(histogram_frame(self.hist_blocks, self.hist_bins, self.hist_counts),
                                          "histograms")
            if self.hist_bins else empty_frame("histograms"),
            "timeseries": schema.validate(pd.concat(ts, ignore_index=True), "timeseries")
            if ts else empty_frame("timeseries"),
        }


# ---- DiskSPD / Iometer: content sniffing and dispatch (storagebench.ingest.loadgen) ----------------


def _read_head(path: str | os.PathLike, n: int = 1 << 16) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


def _loadgen_format(data: bytes) -> str | None:
    """The DiskSPD/Iometer format of ``data`` (:func:`storagebench.ingest.loadgen.detect_format`), or
    ``None`` for fio JSON and for content that is none of them. A leading ``{`` is fio's fast path."""
    if data[:1] == b"{":
        return None
    fmt = _loadgen.detect_format(data)
    return None if fmt == "fio" else fmt


def _add_loadgen(sink: _Collector, fmt: str, data: bytes, path: str, identity: dict | None) -> None:
    """Parse a DiskSPD/Iometer file (:func:`storagebench.ingest.loadgen.parse_loadgen`, which raises
    IngestError for a bad one) and append its rows to the sink, all or nothing."""
    from .fio import RUN_FIELDS  # the row-tuple order of the sink

    rows = _loadgen.parse_loadgen(fmt, data, path, identity=identity)
    factors = (identity or {}).get("factors") or {}
    extra = {k: v for k, v in factors.items() if k not in RUN_FIELDS}
    default = _loadgen.run_row()
    sink.runs.extend(tuple(r.get(f, default.get(f)) for f in RUN_FIELDS) for r in rows.runs)
    sink.runs_extra.extend([extra] * len(rows.runs))
    for key, bins in rows.histograms:
        sink.hist_blocks.append((*key, len(bins)))
        sink.hist_bins.extend(str(int(b)) for b in bins)
        sink.hist_counts.extend(bins.values())
    if rows.timeseries is not None and len(rows.timeseries):
        sink.ts.append(rows.timeseries)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while files are parsed, back on (if it was) after.

    orjson allocates hundreds of dicts and lists per fio output, none of them in a cycle; the
    collections they trigger (each one also walks everything pandas and pyarrow keep alive) cost
    ~10% of the ingest time. Nothing is leaked: reference counting frees the parsed documents as
    usual, and the collector runs again once the batch is done.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _run(items: Iterable[_Item | IngestError], collector: _Collector, errors: list[IngestError]) -> None:
    add = collector.add
    with _gc_paused():
        for item in items:
            if isinstance(item, IngestError):
                errors.append(item)
                continue
            try:
                add(item)
            except IngestError as exc:
                errors.append(exc)
            except OSError as exc:
                errors.append(IngestError(f"cannot read: {exc.strerror or exc}", path=str(item.path)))


def _result(collector: _Collector, errors: list[IngestError]) -> IngestResult:
    return IngestResult(**collector.frames(), errors=errors, files=collector.files)


def ingest_paths(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> IngestResult:
    """Ingest fio outputs and logs from files and directories (recursive) into tidy tables.

    Parameters
    ----------
    paths : path or iterable of paths
        Files (any name: fio JSON/JSON+ output, or a fio log named ``*_<type>.<n>.log``) and
        directories (``*.json`` and fio logs inside, recursively; run directories of the runner with
        ``point.json`` are read with their identity and provenance).

    Returns
    -------
    IngestResult
        ``runs``, ``histograms``, ``all_clients``, ``timeseries`` and ``errors``. For a loose fio
        output (no ``point.json``): ``run_id`` = first 12 hex digits of the SHA-256 of the file,
        ``study=""``, ``repetition=0``, ``run_order=-1``.

    Notes
    -----
    Never raises for a bad input file: it is reported in ``errors`` with its reason.
    """
    col, errors = _Collector(), []
    _run(_discover(paths), col, errors)
    return _result(col, errors)


def ingest_study(study_dir: str | os.PathLike) -> IngestResult:
    """Ingest a study written by the runner: ``<study_dir>/raw/<run_id>/{output.json, point.json, provenance.json, *.log}``.

    Parameters
    ----------
    study_dir : path
        ``results/<study>`` (the directory holding ``raw/``).

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
    raw = Path(study_dir) / "raw"
    if not raw.is_dir():
        raise IngestError("not a study directory: it has no raw/ (expected results/<study>/raw/<run_id>/)",
                          path=str(study_dir))
    col, errors = _Collector(), []

    def items() -> Iterator[_Item | IngestError]:
        for d in sorted(p for p in raw.iterdir() if p.is_dir()):
            files = os.listdir(d)
            if "point.json" not in files:
                yield IngestError("run directory has no point.json", path=str(d))
                continue
            yield from _run_dir_items(d, files)

    _run(items(), col, errors)
    return _result(col, errors)


def ingest_to_parquet(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    batch_files: int = 500,
) -> IngestSummary:
    """Like :func:`ingest_paths`, but stream the tables to ``out_dir/<table>.parquet`` in batches.

    Memory holds at most ``batch_files`` files' rows at a time (pyarrow ``ParquetWriter``, one row
    group per batch and table).

    Parameters
    ----------
    paths : path or iterable of paths
        As in :func:`ingest_paths`.
    out_dir : path
        Created if needed; ``runs.parquet`` and ``histograms.parquet`` are always written,
        ``all_clients.parquet`` and ``timeseries.parquet`` only when they have rows.
    batch_files : int
        Files per batch (>= 1).

    Returns
    -------
    IngestSummary

    Raises
    ------
    SchemaError
        A later batch brings a study factor column the first batch did not have (ingest such
        studies separately), or ``batch_files < 1``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if int(batch_files) < 1:
        raise SchemaError(f"batch_files must be >= 1, got {batch_files}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    writers: dict[str, Any] = {}
    rows = dict.fromkeys(TABLES, 0)
    errors: list[IngestError] = []
    files = 0

    def flush(col: _Collector) -> None:
        for name, df in col.frames().items():
            if df.empty:
                continue
            table = pa.Table.from_pandas(df, preserve_index=False)
            if name not in writers:
                writers[name] = pq.ParquetWriter(out / f"{name}.parquet", table.schema)
            else:
                wschema = writers[name].schema
                new = [c for c in table.column_names if c not in wschema.names]
                if new:
                    raise SchemaError(f"{name}: columns {new} appear after the first batch; "
                                      "ingest studies with different factors separately")
                table = pa.table({f.name: (table[f.name] if f.name in table.column_names
                                           else pa.nulls(len(table), f.type)) for f in wschema})
                table = table.cast(wschema)
            writers[name].write_table(table)
            rows[name] += len(df)

    try:
        items = _discover(paths)
        while chunk := list(itertools.islice(items, int(batch_files))):
            batch = _Collector()
            _run(chunk, batch, errors)
            files += batch.files
            flush(batch)
    finally:
        for w in writers.values():
            w.close()
    for name in TABLES:
        path = out / f"{name}.parquet"
        if name in writers:
            continue
        if name in ("runs", "histograms"):
            schema.empty(name).to_parquet(path, index=False)
            writers[name] = None
        elif path.exists():
            path.unlink()  # a stale table from an earlier ingest into the same directory
    paths_written = {name: out / f"{name}.parquet" for name in writers}
    return IngestSummary(rows=rows, paths=paths_written, errors=errors, files=files)

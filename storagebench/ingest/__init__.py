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

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .. import schema
from .._inputs import (
    completed_runs,
    read_input,
)
from ..errors import IngestError, SchemaError, StorageBenchError, display_path, shown
from ..runlevel import read_run_totals, run_totals
from . import diskspd as _diskspd  # noqa: F401 - registers the DiskSPD formats
from . import iometer as _iometer  # noqa: F401 - registers the Iometer formats
from ._collector import _collect, _Collector, _gc_paused, _parse_loadgen, _run  # noqa: F401 - tests reach these here
from ._walk import MAX_FILE_BYTES, _discover, _Item, _run_dir_items, _scan

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
    seen : dict
        What the walk found, whether read or not: ``counts`` (extension, e.g. ``".json"``, ``".txt"``,
        ``"(none)"`` -> number of files) and ``first`` (the first :data:`SEEN_NAMES` paths), for the message
        when nothing was recognised (:meth:`seen_text`).
    """

    rows: dict[str, int]
    paths: dict[str, Path]
    errors: list[IngestError]
    files: int
    spec_hashes: list[str] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)

    def seen_text(self) -> str:
        """One line on what was found: ``"saw 3 files (2 .txt, 1 .png), e.g. 'a/b.txt', ..."``; names through
        ``repr`` (control characters escaped)."""
        return _seen_text(self.seen)

    @property
    def ok(self) -> bool:
        return not self.errors


def _seen_text(seen: dict[str, Any]) -> str:
    counts = seen.get("counts", {})
    total = sum(counts.values())
    if not total:
        return "saw no files at all"
    kinds = ", ".join(f"{n} {shown(ext, 20)}" for ext, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8])
    more = ", ..." if len(counts) > 8 else ""
    names = ", ".join(repr(display_path(p)) for p in seen.get("first", []))
    return f"saw {total} file{'s' if total != 1 else ''} ({kinds}{more}), e.g. {names}"


#: What ``ingest`` recognises, for the message when it recognised nothing.
_RECOGNISED = ("fio JSON/JSON+ output (fio --output-format=json+), fio logs (*_iops.N.log, *_lat.N.log ...), "
               "DiskSPD XML or text, Iometer CSV, and storagebench run directories (point.json beside output.json)")


def _nothing_recognised(paths: Any, seen: dict[str, Any], errors: list[IngestError]) -> IngestError:
    listed = [paths] if isinstance(paths, (str, bytes, os.PathLike)) else list(paths)
    named = ", ".join(repr(display_path(os.fsdecode(p))) for p in listed[:3]) + (", ..." if len(listed) > 3 else "")
    why = ""
    if errors:
        first = "; ".join(f"{display_path(e.path or '?')!r}: {e.reason}" for e in errors[:3])
        why = f"; {len(errors)} not ingested, e.g. {first}"
    return IngestError(f"nothing recognised in {named or '[]'}: {_seen_text(seen)}{why}; storagebench ingests "
                       f"{_RECOGNISED}. No table was written (tables already in the output directory are left "
                       "as they were)")


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
        output (no ``point.json``): ``run_id`` = first 12 hex digits of the XXH3-128 hash of the file,
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
    require_files: bool = False,
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
    require_files : bool
        Refuse an ingest that recognised no file (``storagebench ingest``): an :class:`IngestError` says what
        was seen (counts of files by extension, the first names) and what is recognised, and no table is
        replaced. Default: empty tables are written.

    Returns
    -------
    IngestSummary

    Raises
    ------
    SchemaError
        A later batch brings a study factor column the first batch did not have, or one whose
        type cannot be stored in the first batch's column (ingest such studies separately), or
        ``batch_files < 1``. The previous tables are then left untouched.
    IngestError
        ``require_files`` and no file was recognised (the previous tables are left untouched).

    Notes
    -----
    Each table is replaced by its own atomic rename, one after the other at the very end; only a
    kill between those (at most five) renames can leave some tables of the new ingest beside
    some of the old one.
    """
    if isinstance(batch_files, bool) or int(batch_files) < 1:
        raise SchemaError(f"batch_files must be >= 1, got {batch_files}")
    max_bytes = _cap(max_file_bytes)
    if not isinstance(paths, (str, bytes, os.PathLike)):
        paths = list(paths)  # walked once, and named again when nothing in them is recognised
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ingest-", dir=out))
    writers: dict[str, Any] = {}
    rows = dict.fromkeys(TABLES, 0)
    errors: list[IngestError] = []
    files = 0
    factor_kinds: dict = {}

    spec_hashes: dict[str, None] = {}
    seen: dict[str, Any] = {"counts": {}, "first": []}
    try:
        try:
            items = _tallied(_discover(paths, max_bytes), seen)
            while chunk := list(itertools.islice(items, int(batch_files))):
                with _gc_paused():
                    batch, batch_errors, frames = _collect(chunk, max_bytes, factor_kinds)
                    errors.extend(batch_errors)
                    files += batch.files
                    spec_hashes.update(batch.spec_hashes)
                    _append(writers, rows, tmp, frames)
            hashes = list(spec_hashes)
            spec_hash = hashes[0] if len(hashes) == 1 else None
            for name, w in writers.items():  # known only now: the format version and the study's spec hash
                w.add_key_value_metadata(schema.table_metadata(name, spec_hash=spec_hash, spec_hashes=hashes))
        finally:
            for w in writers.values():
                w.close()
        if require_files and files == 0:
            raise _nothing_recognised(paths, seen, errors)
        for name in _ALWAYS:
            if name not in writers:
                schema.write_table(schema.empty(name), tmp / f"{name}.parquet", name, spec_hash=spec_hash,
                                   spec_hashes=hashes)
                writers[name] = None
        _replace_tables(out, tmp, writers)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    paths_written = {name: out / f"{name}.parquet" for name in writers}
    return IngestSummary(rows=rows, paths=paths_written, errors=errors, files=files, spec_hashes=hashes, seen=seen)


#: How many paths :attr:`IngestSummary.seen` keeps.
SEEN_NAMES = 5


def _tallied(items: Iterator[Any], seen: dict[str, Any]) -> Iterator[Any]:
    """``items`` unchanged, counting each file found (by extension) into ``seen``."""
    for item in items:
        path = item.path if isinstance(item, _Item) else None
        if path is not None:
            ext = os.path.splitext(os.fsdecode(path))[1].lower() or "(none)"
            seen["counts"][ext] = seen["counts"].get(ext, 0) + 1
            if len(seen["first"]) < SEEN_NAMES:
                seen["first"].append(os.fsdecode(path))
        yield item


def _append(writers: dict[str, Any], rows: dict[str, int], tmp: Path, frames: dict[str, pd.DataFrame]) -> None:
    """Append one batch's ``frames`` to their tables' writers in ``tmp`` (a writer opened by the first batch with
    rows), counting the rows; a later batch's new or incompatible factor column is a SchemaError."""
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


def _replace_tables(out: Path, tmp: Path, writers: dict[str, Any]) -> None:
    """Make the tables written in ``tmp`` the tables of ``out``: each on disk (``fsync``) before its atomic rename,
    a stale table of an earlier ingest removed, ``out``'s record of a study's ingest removed."""
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

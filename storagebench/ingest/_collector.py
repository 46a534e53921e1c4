"""Collecting rows (private part of :mod:`storagebench.ingest`): the collector of a batch's rows, the dispatch to
the formats other than fio's JSON, and the batch read once, checked by the table gate, and read again without
the files it refuses."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..errors import IngestError, display_path
from ..runlevel import run_totals
from . import _fiorows
from . import diskspd as _diskspd  # noqa: F401 - registers the DiskSPD formats
from . import iometer as _iometer  # noqa: F401 - registers the Iometer formats
from . import loadgen as _loadgen
from ._walk import MAX_FILE_BYTES, _Item, _read_file
from .fio import (
    RUN_FIELDS,
    RowSink,
    emit_rows,
    empty_frame,
    file_run_id,
    runs_frame,
)
from .fiolog import parse_fio_log

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
                        (self.hist_n, blocks), (self.hist_checks, blocks), (self.hist_rows, blocks), (self.ts, ts)):
            del rows[n:]
        # the dropped blocks were never parsed: parse_step runs between files only
        self._pending = sum(len(r) for r in self.hist_raw[self._parsed:] if r is not None)

    def _blocks(self) -> tuple | None:
        """(runs row, length) of every json+ block when all are fio's (DiskSPD/Iometer blocks carry no
        row: run_totals then finds them by key)."""
        if not self.hist_rows:
            return None
        rows = self.block_rows()
        if rows.min() < 0:
            return None
        return rows, self.n_bins()

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
            n_bins = self.n_bins()
            starts = np.zeros(len(n_bins), dtype=np.int64)
            np.cumsum(n_bins[:-1], out=starts[1:])
            rows = self.block_rows()
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
            out.append(_columns_frame(cols))
            cols = None
        out.append(part)
    if cols is not None:
        out.append(_columns_frame(cols))
    return out


#: the ``timeseries`` columns stored as strings (``"string"``: pandas' ArrowStringArray)
_TS_STRINGS = frozenset(c.name for c in schema.TIMESERIES if c.dtype == "string")


def _columns_frame(cols: dict[str, list]) -> pd.DataFrame:
    """``pandas.DataFrame(cols)`` then :func:`storagebench.schema.validate`'s cast, for the usual columns
    made directly (pandas' inference over a list of Python objects was a tenth of DiskSPD XML ingest): a
    list of floats only is the float64 array pandas infers from it, and a list of strings only, in a
    ``timeseries`` string column, the ``large_string`` ArrowStringArray ``validate`` casts it to, and a list
    of ints only that int64 holds the int64 array. Any other list (None, a mix, huge ints) is left to
    pandas, as before."""
    data = {}
    for name, values in cols.items():
        kinds = set(map(type, values))
        if kinds == {float}:
            data[name] = np.array(values, dtype=np.float64)
        elif kinds == {str} and name in _TS_STRINGS:
            data[name] = pd.arrays.ArrowStringArray(pa.array(values, type=pa.large_string()))
        elif kinds == {int}:
            try:  # pandas infers int64 when every int fits, else uint64 or object: left to it
                data[name] = np.array(values, dtype=np.int64)
            except OverflowError:
                data[name] = values
        else:
            data[name] = values
    return pd.DataFrame(data)


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
    sink.hist_rows.extend([-1] * len(blocks))
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



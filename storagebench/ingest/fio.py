"""fio ``--output-format=json`` / ``json+`` output → rows of the ``runs``, ``all_clients`` and ``histograms`` tables.

What real fio writes, and how each case is handled (fio 3.33 fixtures in ``tests/fixtures/fio``):

* text before or between the JSON (``note: ...`` lines, ``fio: pid=..., err=28/...`` lines, warnings,
  ``fio: terminating on signal 2``) is kept aside; a ``terminating on signal`` line flags the run ``partial``;
* several JSON documents in one file (``--status-interval``): the last complete one is used; a
  truncated last document, or a last document whose jobs neither reached ``runtime`` nor moved
  ``size`` bytes, flags ``partial`` (the final report is missing);
* ``jobs`` (local) and ``client_stats`` (``--client``): per-client entries get ``host = "hostname:port"``;
  the ``"All clients"`` entry goes to ``all_clients`` only, never to ``runs``;
* fio 2.x units: ``clat``/``slat``/``lat`` blocks in µs (×1000 → ns), ``bw`` in KiB/s (×1024 → bytes/s),
  ``io_bytes`` in KiB (×1024) when there is no ``io_kbytes`` field; fio 3.x: ``*_ns`` blocks in ns,
  ``bw_bytes`` in bytes/s (fio 3.0–3.3 print only ``bw`` in KiB/s: ×1024, with a ``note``);
* ``runtime`` is ms; percentile keys are ``"99.900000"``.

Factor columns (``rw``, ``bs_bytes`` ...) come from the output's ``global options`` merged with each
job's ``job options``, with fio's defaults (HOWTO) for options that were not given; for a runner run the
options of its ``point.json`` win (in client/server output fio's ``global options`` hold each host's keys
again and the last host's value wins, so per-host job files would otherwise be mislabelled). Option
values are read with fio's own grammar (:mod:`storagebench.fio.options`: ``parse_size`` with the job's
``kb_base``, ``parse_time_us``).

**Validation: no crash, no invented number.** The JSON is decoded by ``msgspec`` into typed structs
(:mod:`storagebench.ingest._fiodoc`), so every value ingest reads is type-checked while it is decoded,
and values that fio cannot print are refused. The rule, per value read:

========================================================  ==============================================
what                                                      when it is wrong
========================================================  ==============================================
the structure: a JSON object with ``jobs`` or             :class:`~storagebench.errors.IngestError` for
``client_stats``, a non-empty array of job objects with   the file (nothing of it is kept)
a string ``jobname`` and an integer ``error``; direction
blocks (``read``/``write``/``trim``/``mixed``) that are
objects, at least one per job, and the block of the
row's direction
any value of the wrong JSON type (a number given as a     IngestError: fio never prints it, so the file
string, ``true``, ``null``, an object ...)                was edited or corrupted
the core metrics of a direction: ``iops``, ``runtime``,   IngestError when missing, negative, above
``io_bytes``, ``bw_bytes`` (or fio < 3.4's ``bw``),       2**63-1 or not finite
``total_ios`` (fio ≥ 3; fio 2.1 has none: ``-1``)
json+ ``bins``: keys decimal integers, counts integers,   IngestError
both from 0 to 2**63-1
the latency statistics (``lat``/``clat``/``slat``         NaN in the column, and the ``note`` column says
``mean``/``stddev``/``min``/``max``), the ten clat        which value (JSON path) and why
percentiles, ``usr_cpu``/``sys_cpu``: missing, negative
or above 2**63-1
``timestamp``/``elapsed`` (start time), job options       ``started_at`` NaT / the factor unknown (``-1``,
fio could not have read (``iodepth=abc``)                 NaN, ``""``) and a ``note``
========================================================  ==============================================

A percentile block fio leaves out because the direction completed no I/O (``clat_ns.N == 0``) gives
NaN without a note. Every error names the file, the JSON path (``jobs[0].read.iops``), the value and
what is allowed. JSON itself cannot hold NaN or ±Infinity (``NaN``, ``Infinity`` are refused as
invalid JSON, ``1e309`` as out of range).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema as _schema
from ..schema import RUNS
from ._fiodoc import MAX_VALUE as MAX_VALUE
from ._fiodoc import FioDocument as FioDocument
from ._fiodoc import read_fio_json as read_fio_json
from ._fiorows import RUN_FIELDS, RowSink, emit_rows, file_run_id, histogram_frame
from ._runmeta import check_point, check_provenance, datetime_us, us_datetime

# The reader's parts are private modules, one concept each: the typed document, read_fio_json and the
# messages for refused values (_fiodoc), the factor columns from job options (_fiofactors), point.json
# and provenance.json (_runmeta), the rows, metrics and json+ bins (_fiorows). Their public names are
# reached here: __all__, and as before outside it read_fio_json, FioDocument, histogram_frame, MAX_VALUE.
__all__ = [
    "FioRows",
    "RUN_FIELDS",
    "RowSink",
    "emit_rows",
    "empty_frame",
    "runs_frame",
    "parse_fio_output",
    "check_point",
    "check_provenance",
    "file_run_id",
]

_UTC = timezone.utc


@dataclass
class FioRows:
    """Rows parsed from one fio output, before they become DataFrames.

    Attributes
    ----------
    runs, all_clients : list of dict
        One dict per row, keys = ``runs`` columns (+ study factors).
    hist_blocks, hist_bins, hist_counts : lists
        The ``histograms`` rows in compact form; :meth:`histograms` makes the DataFrame.
    """

    runs: list[dict] = field(default_factory=list)
    all_clients: list[dict] = field(default_factory=list)
    hist_blocks: list[tuple] = field(default_factory=list)
    hist_bins: list[int] = field(default_factory=list)  # json+ bin keys (ns)
    hist_counts: list[int] = field(default_factory=list)

    def histograms(self):
        """The ``histograms`` rows as a DataFrame (not yet validated)."""
        return histogram_frame(self.hist_blocks, self.hist_bins, self.hist_counts)


def parse_fio_output(
    data: bytes,
    path: str,
    *,
    identity: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> FioRows:
    """Parse one fio JSON/JSON+ output into rows of ``runs``, ``all_clients`` and ``histograms``.

    Parameters
    ----------
    data : bytes
        The file's bytes.
    path : str
        Its path (``source_file`` column, error messages).
    identity : mapping, optional
        The runner's ``point.json``: ``study``, ``run_id``, ``repetition``, ``run_order`` and
        ``factors`` (study factors, added as extra columns). Without it: ``run_id`` is
        :func:`file_run_id` of the bytes, ``study=""``, ``repetition=0``, ``run_order=-1``.
        Checked by :func:`check_point`.
    provenance : mapping, optional
        The runner's ``provenance.json``: ``fio_version``, ``kernel``, ``hostname``, ``started_at`` (ISO UTC).
        Without it ``started_at`` is fio's ``timestamp`` minus the longest job ``elapsed`` (s).
        Checked by :func:`check_provenance`.

    Returns
    -------
    FioRows
        ``runs``: one row per job entry x direction that did I/O (``total_ios > 0`` or
        ``io_bytes > 0``); a job entry without any I/O (an error) gets one row for the main
        direction of its ``rw``. ``job_index`` numbers entries of the same name (per host).
        ``all_clients``: fio's ``"All clients"`` entries. With ``unified_rw_reporting=1`` the one row
        per entry has ``direction="mixed"`` (fio's ``mixed`` block). ``histograms``: json+ ``clat_ns.bins``
        of the emitted directions, one row per non-empty bin (``bin_ns`` in ns). Study factors
        whose name is a ``runs`` column are dropped (fio's own output wins). ``note`` says which
        values were missing or impossible and stored as NaN (module docstring); ``""`` otherwise.

    Raises
    ------
    IngestError
        See :func:`read_fio_json`; also a missing or impossible core metric, a job entry without
        direction blocks, a bad json+ bin, and a bad ``identity``/``provenance``. The message names
        the JSON path, the value and what is allowed.

    Notes
    -----
    :func:`storagebench.ingest.ingest_paths` does not go through the row dicts: it appends row tuples
    of many files to one sink and builds each table once (:func:`runs_frame`, :func:`histogram_frame`).
    """
    sink = RowSink()
    emit_rows(sink, data, path, identity, provenance)
    if sink.hist_blocks:
        counts = np.concatenate(sink.hist_counts)
        sink.check_bins(counts, np.array([len(k) for k in sink.hist_keys], dtype=np.int64))
        bins, counts = np.concatenate(sink.hist_keys).tolist(), counts.tolist()
    else:
        bins, counts = [], []
    out = FioRows(hist_blocks=sink.hist_blocks, hist_bins=bins, hist_counts=counts)
    out.runs = [_row_dict(r, x) for r, x in zip(sink.runs, sink.runs_extra, strict=True)]
    out.all_clients = [_row_dict(r, x) for r, x in zip(sink.all_clients, sink.all_extra, strict=True)]
    return out


def _row_dict(row: tuple, extra: dict) -> dict[str, Any]:
    """A row tuple as :func:`parse_fio_output` gives it: a dict of every ``runs`` column, times as UTC datetimes."""
    d = {**_UNKNOWN_ROW, **dict(zip(RUN_FIELDS, row, strict=True)), **extra}
    for name in ("started_at", "reported_at"):
        if type(d[name]) is int:
            d[name] = us_datetime(d[name])
    return d


_RUN_DTYPES: dict[str, str] = {c.name: c.dtype for c in RUNS}
#: every ``runs`` column at its unknown value (the columns no part of a fio row fills keep it)
_UNKNOWN_ROW: dict[str, Any] = {c.name: c.unknown for c in RUNS}


def runs_frame(rows: list[tuple], extras: list[dict] | None = None, table: str = "runs"):
    """Build the ``runs`` (or ``all_clients``) DataFrame from row tuples whose fields :data:`RUN_FIELDS` names.

    Each column is made once, directly in its schema dtype (numpy for numbers and bools, pyarrow
    strings, ``datetime64[ns, UTC]``), which is several times faster than a DataFrame of row dicts.

    Parameters
    ----------
    rows : list of tuple
        Row tuples built by :func:`parse_fio_output`'s row emitter.
    extras : list of dict, optional
        Study factors of each row (same length as ``rows``); they become extra columns after the
        schema columns, in order of first appearance, with pandas' dtype inference (as
        ``pandas.DataFrame(list_of_dicts)``); a row without a factor gets NaN.
    table : {"runs", "all_clients"}
        Schema used when ``rows`` is empty.

    Returns
    -------
    pandas.DataFrame
        Schema columns in schema order and dtypes (a column the rows do not carry at its unknown value,
        :attr:`storagebench.schema.Column.unknown`), then the factor columns; not yet validated.
    """
    if not rows:
        return empty_frame(table)
    by_name = dict(zip(RUN_FIELDS, zip(*rows, strict=True), strict=True))
    data = {}
    for c in RUNS:  # by name, in schema order
        name, dtype = c.name, c.dtype
        col = by_name.get(name)
        if col is None:
            col = (c.unknown,) * len(rows)
        if dtype == "string":
            data[name] = pd.arrays.ArrowStringArray(pa.array(col, type=pa.large_string()))  # pandas' type: no cast
        elif dtype.startswith("datetime64"):
            data[name] = _datetime_column(col, dtype)
        else:
            data[name] = np.array(col, dtype=dtype)
    df = pd.DataFrame(data, copy=False)  # no consolidation of same-dtype columns into blocks (copies)
    if extras and any(extras):
        df = pd.concat([df, _design_filled(pd.DataFrame(extras), extras)], axis=1)
    return df


def _design_filled(extra, extras: list[dict]):
    """The extra columns with the set-up of a study's run whose ``point.json`` has none filled in as 1: the plan
    writes ``setup`` only when it is not 1 (:meth:`storagebench._plan.RunPoint.to_dict`), so in a study with
    set-ups the runs of set-up 1 carry none (a loose file, with no factors, is left without one)."""
    if "setup" not in extra.columns or not extra["setup"].isna().any():
        return extra
    studied = np.fromiter(map(bool, extras), dtype=bool, count=len(extras))
    extra.loc[extra["setup"].isna().to_numpy() & studied, "setup"] = 1
    if not extra["setup"].isna().any():
        extra["setup"] = extra["setup"].astype("int64")
    return extra


_NAT = np.iinfo(np.int64).min
_DATETIME_OR_NONE = frozenset({datetime, type(None)})
_INT_OR_NONE = frozenset({int, type(None)})


def _datetime_column(values: tuple, dtype: str):
    """``pandas.to_datetime(list(values), utc=True).astype(dtype)`` for a row's times: µs since the epoch (ints,
    what :func:`~storagebench.ingest._runmeta.fio_times` gives), datetimes (naive ones are UTC) and None (NaT),
    from each one's microseconds since the epoch: ~20x faster than pandas' object parsing."""
    kinds = set(map(type, values))
    if kinds <= _INT_OR_NONE:
        us = np.fromiter((_NAT if v is None else v for v in values), dtype=np.int64, count=len(values))
    elif kinds <= _DATETIME_OR_NONE | _INT_OR_NONE:
        us = np.fromiter((_NAT if v is None else v if type(v) is int else datetime_us(v) for v in values),
                         dtype=np.int64, count=len(values))
    else:
        return pd.to_datetime(list(values), utc=True).astype(dtype)
    nat = us == _NAT
    ns = us * 1000
    ns[nat] = _NAT
    return pd.to_datetime(ns.view("datetime64[ns]"), utc=True).astype(dtype)


_EMPTY: dict[str, Any] = {}


def empty_frame(table: str):
    """:func:`storagebench.schema.empty`, made once per table and copied (an empty 49-column frame
    costs ~2 ms to build)."""
    if table not in _EMPTY:
        _EMPTY[table] = _schema.empty(table)
    return _EMPTY[table].copy()

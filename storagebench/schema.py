"""The tidy schema: table definitions with a unit on every column.

Three tables come out of ingest and go into stats and plots:

``runs``
    one row per run x host x job x direction (``read``/``write``/``trim``).
``histograms``
    fio json+ completion-latency bins, one row per non-empty bin.
``timeseries``
    fio log samples (``write_iops_log`` / ``write_bw_log`` / ``write_lat_log``).

A fourth, ``all_clients``, has the ``runs`` columns and holds fio's own "All clients"
aggregate of a client/server run. It is kept *apart* from ``runs`` so that summing
``runs.iops`` over hosts never double counts.

A fifth, ``run_totals``, is the run-level table: the rows of ``runs`` combined with fio's own rule
for combining jobs (``stat.c`` ``sum_thread_stats``), per run x host x direction, per run x host for
all directions (``direction == "mixed"``) and for all hosts of a client/server run
(``host == ALL_HOSTS``). It is the one source of "one row per run" for stats, figures and
testbeds (:mod:`storagebench.runlevel` builds it; ingest writes it as ``tidy/run_totals.parquet``).

Units are in the names (``_ns``, ``_bytes``, ``_bytes_per_s``, ``_s``, ``_pct``) and
fio's own units are converted once, in ingest. Display units (ms, MB/s = 10**6 B/s,
MiB/s) are chosen by plots and tables and always labelled.
Study factors that are not fio options (``stripe_width``, ``clients`` ...) are extra
columns of ``runs``; :func:`validate` allows them.

No number in ``runs`` is invented: a metric fio did not print, or printed as a value it cannot
have (negative, above 2**63-1), is NaN (``-1`` in an integer column) and the row's ``note`` says
which value and why; a file whose core metrics (IOPS, bandwidth, bytes, I/Os, runtime) are bad is
not ingested at all (:mod:`storagebench.ingest.fio` has the rule).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._inputs import open_input
from .errors import SchemaError

__all__ = [
    "Column",
    "RUNS",
    "HISTOGRAMS",
    "TIMESERIES",
    "RUN_TOTALS",
    "ALL_HOSTS",
    "ALL_DIRECTIONS",
    "TABLES",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "table_metadata",
    "write_table",
    "read_table",
    "read_metadata",
    "PERCENTILES",
    "DIRECTIONS",
    "percentile_column",
    "empty",
    "validate",
    "describe",
]

#: fio's default completion-latency percentile list (``percentile_list`` in fio's options.c),
#: the ones kept as columns of ``runs``. Any other percentile comes from ``histograms``.
PERCENTILES: tuple[float, ...] = (1.0, 5.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99)

DIRECTIONS: tuple[str, ...] = ("read", "write", "trim")

#: ``run_totals.host`` of the rows that combine every host of a client/server run (no fio host label
#: can be this: labels are ``addr:port``, ``sock:/path``, ``local`` or ``published``).
ALL_HOSTS = "all hosts"
#: ``run_totals.direction`` of the rows that combine the directions of a run: fio's own name for
#: read + write + trim reported as one (``unified_rw_reporting=mixed``, ``stat.c``
#: ``gen_mixed_ddir_stats_from_ts``, which combines them with the same ``sum_thread_stats``).
ALL_DIRECTIONS = "mixed"


@dataclass(frozen=True)
class Column:
    """One column of a tidy table.

    Parameters
    ----------
    name : str
        Column name; its suffix carries the unit.
    dtype : str
        pandas dtype the column is stored as (``"string"``, ``"int64"``, ``"float64"``,
        ``"bool"``, ``"datetime64[ns, UTC]"``).
    unit : str
        Unit in words (``"ns"``, ``"bytes/s"``, ``"1"`` for counts and labels).
    description : str
        What it is, and where in fio's output it comes from.
    """

    name: str
    dtype: str
    unit: str
    description: str


def percentile_column(p: float, kind: str = "clat") -> str:
    """Name of the column holding percentile ``p`` of ``kind`` latency.

    Parameters
    ----------
    p : float
        Percentile in %, e.g. ``99.9``.
    kind : {"clat", "lat"}
        Completion latency (fio ``clat_ns``) or total latency (fio ``lat_ns``).

    Returns
    -------
    str
        e.g. ``percentile_column(99.9) == "clat_p99_9_ns"``, ``percentile_column(50) == "clat_p50_ns"``.
    """
    if kind not in ("clat", "lat"):
        raise SchemaError(f"kind must be one of ['clat', 'lat'], got {kind!r}")
    text = f"{float(p):.4f}".rstrip("0").rstrip(".")
    return f"{kind}_p{text.replace('.', '_')}_ns"


_S, _I, _F, _B, _T = "string", "int64", "float64", "bool", "datetime64[ns, UTC]"

RUNS: tuple[Column, ...] = (
    # identity
    Column("study", _S, "1", "study name from the spec"),
    Column("run_id", _S, "1", "stable hash of the study point and repetition"),
    Column("repetition", _I, "1", "1-based repetition of the point (the plan's RunPoint); 0 outside a study"),
    Column("run_order", _I, "1", "position in the randomised execution order (-1 when unknown)"),
    Column("host", _S, "1", "'local', or 'hostname:port' of a fio server (client/server mode)"),
    Column("job", _S, "1", "fio jobname"),
    Column("job_index", _I, "1", "index among fio job entries of the same name in one output (numjobs without group_reporting)"),
    Column("direction", _S, "1", "read, write or trim"),
    Column("tool", _S, "1", "fio, diskspd, iometer or published"),
    # factors (fio option names; bs in bytes)
    Column("rw", _S, "1", "fio rw= (read, randread, randrw ...)"),
    Column("bs_bytes", _I, "bytes", "fio bs= for this direction (-1 when unknown or variable)"),
    Column("rwmixread_pct", _F, "%", "fio rwmixread= (100 for pure reads, 0 for pure writes)"),
    Column("random_pct", _F, "%", "fio percentage_random= (100 for rand*, 0 for sequential)"),
    Column("iodepth", _I, "1", "fio iodepth= (outstanding I/Os per job; -1 when unknown)"),
    Column("numjobs", _I, "1", "fio numjobs= (-1 when unknown)"),
    Column("ioengine", _S, "1", "fio ioengine="),
    Column("direct", _B, "1", "fio direct=1 (O_DIRECT)"),
    Column("target", _S, "1", "fio filename= (file or block device)"),
    # metrics
    Column("iops", _F, "1/s", "fio <dir>.iops"),
    Column("bw_bytes_per_s", _F, "bytes/s", "fio <dir>.bw_bytes (3.x) or bw KiB/s x 1024 (2.x)"),
    Column("io_bytes", _I, "bytes", "fio <dir>.io_bytes"),
    Column("total_ios", _I, "1", "fio <dir>.total_ios (completed I/Os; -1 when the tool does not count them, e.g. fio 2.1)"),
    Column("runtime_s", _F, "s", "fio <dir>.runtime (ms) / 1000"),
    Column("lat_mean_ns", _F, "ns", "fio lat_ns.mean: submission to completion"),
    Column("lat_stdev_ns", _F, "ns", "fio lat_ns.stddev"),
    Column("lat_min_ns", _F, "ns", "fio lat_ns.min"),
    Column("lat_max_ns", _F, "ns", "fio lat_ns.max"),
    Column("clat_mean_ns", _F, "ns", "fio clat_ns.mean: completion latency"),
    Column("clat_stdev_ns", _F, "ns", "fio clat_ns.stddev"),
    Column("slat_mean_ns", _F, "ns", "fio slat_ns.mean: submission latency"),
    *(Column(percentile_column(p), _F, "ns", f"fio clat_ns.percentile[{p:.6f}]") for p in PERCENTILES),
    Column("usr_cpu_pct", _F, "%", "fio usr_cpu"),
    Column("sys_cpu_pct", _F, "%", "fio sys_cpu"),
    Column("error", _I, "1", "fio job error (errno); 0 when the job succeeded"),
    Column("partial", _B, "1", "True when the output is from a killed / unfinished run"),
    # provenance
    Column("fio_version", _S, "1", "fio-version of the output (or of the server)"),
    Column("started_at", _T, "UTC", "start time of the run"),
    Column("hostname", _S, "1", "hostname fio ran on"),
    Column("kernel", _S, "1", "uname -r of that host"),
    Column("source_file", _S, "1", "path of the raw file the row came from (bytes of a non-UTF-8 name as \\xNN)"),
    Column("note", _S, "1", "what the reader has to say about this row, '; '-separated, '' when nothing: a value "
           "fio did not print or could not have printed, stored as NaN/-1 (named by its JSON path), a unit "
           "derived another way (fio < 3.4's bw in KiB/s), a DiskSPD/Iometer rule applied"),
)

HISTOGRAMS: tuple[Column, ...] = (
    Column("run_id", _S, "1", "as in runs"),
    Column("host", _S, "1", "as in runs"),
    Column("job", _S, "1", "as in runs"),
    Column("job_index", _I, "1", "as in runs"),
    Column("direction", _S, "1", "as in runs"),
    Column("bin_ns", _I, "ns", "bin value from fio json+ clat_ns.bins (plat_idx_to_val in fio stat.c)"),
    Column("count", _I, "1", "number of completions in the bin"),
)

TIMESERIES: tuple[Column, ...] = (
    Column("run_id", _S, "1", "as in runs"),
    Column("host", _S, "1", "as in runs"),
    Column("job", _S, "1", "as in runs"),
    Column("direction", _S, "1", "as in runs"),
    Column("t_s", _F, "s", "fio log time (ms) / 1000"),
    Column("metric", _S, "1", "iops, bw_bytes_per_s, lat_ns, clat_ns or slat_ns"),
    Column("value", _F, "per metric", "sample value in the unit the metric name gives"),
)

RUN_TOTALS: tuple[Column, ...] = (
    # identity
    Column("study", _S, "1", "as in runs"),
    Column("run_id", _S, "1", "as in runs"),
    Column("repetition", _I, "1", "as in runs"),
    Column("run_order", _I, "1", "as in runs"),
    Column("host", _S, "1", f"a host of the run (runs.host), or {ALL_HOSTS!r}: every host of a client/server run"),
    Column("direction", _S, "1", f"read, write, trim, or {ALL_DIRECTIONS!r}: every direction of the run (or fio's "
           "own unified_rw_reporting block)"),
    Column("all_hosts", _B, "1", "the row covers every host of the run (True for every row of a one-host run)"),
    Column("all_directions", _B, "1", "the row covers every direction its hosts reported (True for the one row "
           "of a single-direction run)"),
    Column("n_hosts", _I, "1", "hosts combined in the row"),
    Column("n_directions", _I, "1", "directions combined in the row (1: a direction as reported)"),
    Column("n_jobs", _I, "1", "job entries combined (distinct host x job x job_index)"),
    Column("n_rows", _I, "1", "runs rows combined"),
    Column("combined_by", _S, "1", "'as reported' (one runs row, unchanged); 'I/O counts' (fio's sum_thread_stats: "
           "counts add up, means weighted by completed I/Os, IOPS = I/Os / longest runtime); 'IOPS' (the I/O counts "
           "or runtimes are unknown: IOPS and bandwidth summed, means weighted by IOPS, a common runtime assumed)"),
    Column("tool", _S, "1", "as in runs ('|'-joined when the rows differ)"),
    Column("job", _S, "1", "job name(s) combined, '|'-joined when several"),
    # factors: the value when every combined row has it, else -1 / NaN / '|'-joined
    Column("rw", _S, "1", "fio rw= ('|'-joined when the combined jobs differ)"),
    Column("bs_bytes", _I, "bytes", "fio bs= (-1 when unknown or when the combined rows differ)"),
    Column("rwmixread_pct", _F, "%", "fio rwmixread= (NaN when the combined rows differ)"),
    Column("random_pct", _F, "%", "fio percentage_random= (NaN when the combined rows differ)"),
    Column("iodepth", _I, "1", "fio iodepth= (-1 when unknown or when the combined rows differ)"),
    Column("numjobs", _I, "1", "fio numjobs= (-1 when unknown or when the combined rows differ)"),
    Column("ioengine", _S, "1", "fio ioengine= ('|'-joined when the combined rows differ)"),
    Column("direct", _B, "1", "True when every combined row has direct=1"),
    Column("target", _S, "1", "fio filename= ('|'-joined when the combined rows differ)"),
    Column("outstanding_ios", _F, "1", "sum of iodepth x numjobs over the distinct job sections (host x job) of the "
           "row, whose directions share one queue; NaN when one is unknown"),
    # metrics, fio's sum_thread_stats / sum_stat (stat.c)
    Column("iops", _F, "1/s", "total_ios / longest runtime (fio's group and 'All clients' IOPS; the sum of IOPS when "
           "combined_by is 'IOPS')"),
    Column("bw_bytes_per_s", _F, "bytes/s", "io_bytes / longest runtime (fio prints it truncated to an integer)"),
    Column("io_bytes", _I, "bytes", "sum (-1 when a combined row does not know it)"),
    Column("total_ios", _I, "1", "sum of completed I/Os (-1 when a combined row does not know it)"),
    Column("runtime_s", _F, "s", "longest runtime of the combined rows (fio keeps the max)"),
    Column("lat_mean_ns", _F, "ns", "mean weighted by completed I/Os (fio sum_stat); NaN when a combined row with "
           "I/O has none"),
    Column("lat_stdev_ns", _F, "ns", "pooled SD: sum of squares within rows plus between their means, / (N - 1) "
           "(fio sum_stat, Chan et al.'s parallel update)"),
    Column("lat_min_ns", _F, "ns", "min"),
    Column("lat_max_ns", _F, "ns", "max"),
    Column("clat_mean_ns", _F, "ns", "as lat_mean_ns"),
    Column("clat_stdev_ns", _F, "ns", "as lat_stdev_ns"),
    Column("slat_mean_ns", _F, "ns", "as lat_mean_ns over the rows that measured it (fio prints 0 with N = 0 for "
           "sync ioengines, and sum_stat skips a stat without samples)"),
    *(Column(percentile_column(p), _F, "ns", f"percentile {p:g} of the completions: the row's own for one row, else "
             "from the merged json+ bins (fio's calc_clat_percentiles rule); NaN when a combined row with I/O has "
             "no bins (percentiles are never averaged)") for p in PERCENTILES),
    Column("usr_cpu_pct", _F, "%", "mean over the distinct jobs weighted by their runtime (fio: usr_time summed / "
           "total_run_time summed)"),
    Column("sys_cpu_pct", _F, "%", "as usr_cpu_pct"),
    Column("error", _I, "1", "the first non-zero fio job error (errno) of the combined jobs, as fio's group; 0 when none"),
    Column("n_jobs_error", _I, "1", "combined job entries with error != 0: a run with any is flagged, never averaged "
           "away"),
    Column("partial", _B, "1", "True when any combined row is from a killed / unfinished run"),
    # provenance
    Column("fio_version", _S, "1", "as in runs ('|'-joined when the rows differ)"),
    Column("started_at", _T, "UTC", "earliest start of the combined rows"),
    Column("hostname", _S, "1", "as in runs ('|'-joined when the rows differ)"),
    Column("kernel", _S, "1", "as in runs ('|'-joined when the rows differ)"),
    Column("source_file", _S, "1", "as in runs ('|'-joined when the rows differ)"),
    Column("note", _S, "1", "the distinct notes of the combined rows, and what combining had to say, '; '-separated"),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "all_clients": RUNS,
    "histograms": HISTOGRAMS,
    "timeseries": TIMESERIES,
    "run_totals": RUN_TOTALS,
}


def _columns(table: str) -> tuple[Column, ...]:
    try:
        return TABLES[table]
    except KeyError:
        raise SchemaError(f"table must be one of {sorted(TABLES)}, got {table!r}") from None


def describe(table: str) -> pd.DataFrame:
    """The schema of ``table`` as a DataFrame with columns ``name, dtype, unit, description``."""
    return pd.DataFrame([c.__dict__ for c in _columns(table)])


def empty(table: str) -> pd.DataFrame:
    """An empty DataFrame with the columns and dtypes of ``table``."""
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in _columns(table)})


def validate(df: pd.DataFrame, table: str, *, coerce: bool = True) -> pd.DataFrame:
    """Check that ``df`` follows the schema of ``table``; return it with schema dtypes.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. Extra columns (study factors) are kept as they are.
    table : {"runs", "all_clients", "histograms", "timeseries", "run_totals"}
    coerce : bool
        Cast schema columns to their dtype (default). With ``False`` a dtype mismatch raises.

    Returns
    -------
    pandas.DataFrame
        ``df`` with schema columns first, in schema order, then the extra columns.

    Raises
    ------
    SchemaError
        A schema column is missing, or cannot be cast to its dtype.
    """
    cols = _columns(table)
    missing = [c.name for c in cols if c.name not in df.columns]
    if missing:
        raise SchemaError(f"{table} table is missing columns {missing}")
    out = df.copy(deep=False)  # columns are replaced, never written into: the caller's frame is unchanged
    for c in cols:
        if str(out[c.name].dtype) == c.dtype:
            continue
        if not coerce:
            raise SchemaError(f"{table}.{c.name} must be {c.dtype}, got {out[c.name].dtype}")
        try:
            if c.dtype.startswith("datetime64"):
                # pandas >= 3 infers microsecond resolution; the schema stores ns.
                out[c.name] = pd.to_datetime(out[c.name], utc=True).astype(c.dtype)
            else:
                out[c.name] = out[c.name].astype(c.dtype)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{table}.{c.name} cannot be cast to {c.dtype}: {exc}") from exc
    names = [c.name for c in cols]
    return out[names + [n for n in out.columns if n not in names]]


# ---- the tables on disk: parquet with a format version ------------------------------------------

#: Version of the tidy-table file format written now, stored in each parquet file's schema metadata
#: under :data:`METADATA_KEY`. Format 0 is every file written before the key existed: the tables
#: ``runs``, ``histograms``, ``all_clients``, ``timeseries`` (no ``run_totals``; the oldest ``runs``
#: lack ``note``). Format 1 adds the metadata and ``run_totals``.
#:
#: The tables have their own version rather than :data:`storagebench.records.FORMAT_VERSION`
#: (``provenance.json``, ``testbed.json``): the two change for different reasons and at different
#: times -- a new ``runs`` column changes the tables and not one record, a new provenance field
#: changes the records and not one table -- and a shared number would make every reader of one
#: "migrate" files of the other that did not change.
FORMAT_VERSION = 1
#: Key of the storagebench metadata in a parquet file's (Arrow) schema metadata.
METADATA_KEY = b"storagebench"


def table_metadata(table: str, *, spec_hash: str | None = None,
                   spec_hashes: list[str] | None = None) -> dict[bytes, bytes]:
    """The schema metadata storagebench writes into a parquet file of ``table``.

    Parameters
    ----------
    table : str
        One of :data:`TABLES`.
    spec_hash : str, optional
        :attr:`storagebench._study.Study.spec_hash` of the study the rows come from (``None`` for
        loose files).
    spec_hashes : list of str, optional
        Every spec hash met, when the rows come from several studies (``spec_hash`` is then ``None``).

    Returns
    -------
    dict
        ``{METADATA_KEY: JSON}``, the JSON an object ``{"format_version", "table", "spec_hash"[,
        "spec_hashes"]}``.
    """
    _columns(table)
    meta: dict[str, Any] = {"format_version": FORMAT_VERSION, "table": table, "spec_hash": spec_hash}
    if spec_hashes and len(spec_hashes) > 1:
        meta["spec_hashes"] = sorted(spec_hashes)
    return {METADATA_KEY: json.dumps(meta, sort_keys=True).encode()}


def with_metadata(arrow_schema: Any, table: str, *, spec_hash: str | None = None,
                  spec_hashes: list[str] | None = None) -> Any:
    """``arrow_schema`` (a :class:`pyarrow.Schema`) with :func:`table_metadata` added to its metadata."""
    return arrow_schema.with_metadata({**(arrow_schema.metadata or {}),
                                       **table_metadata(table, spec_hash=spec_hash, spec_hashes=spec_hashes)})


def write_table(df: pd.DataFrame, path: str | os.PathLike, table: str, *, spec_hash: str | None = None,
                spec_hashes: list[str] | None = None) -> Path:
    """Write ``df`` as the parquet file of ``table``, with its format version and spec hash.

    The file is written beside ``path`` and renamed over it (``os.replace``): a reader never sees a
    half-written table.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``table`` (checked by :func:`validate`; extra columns are kept).
    path : path
        Parquet file to write.
    table : str
        One of :data:`TABLES`.
    spec_hash, spec_hashes
        As in :func:`table_metadata`.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SchemaError
        ``df`` does not follow the schema of ``table``.
    """
    out = Path(path)
    arrow = pa.Table.from_pandas(validate(df, table), preserve_index=False)
    arrow = arrow.replace_schema_metadata(dict(with_metadata(arrow.schema, table, spec_hash=spec_hash,
                                                             spec_hashes=spec_hashes).metadata))
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(arrow, tmp)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


#: Largest parquet table read, bytes (:func:`read_table`, :func:`read_metadata`; through the one reader of inputs,
#: :func:`storagebench._inputs.open_input`: a regular file, never a FIFO or a device).
MAX_TABLE_BYTES = 16 * 2**30


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The storagebench metadata of a parquet file; ``{"format_version": 0}`` for a file without it.

    Raises
    ------
    SchemaError
        The file is not parquet, or its metadata is not a JSON object with an integer
        ``format_version`` >= 0.
    """
    with open_input(path, max_bytes=MAX_TABLE_BYTES, what="parquet table", error=SchemaError) as fh:
        return _metadata(fh, os.fspath(path))


def _metadata(fh: Any, where: str) -> dict[str, Any]:
    try:  # the footer's key-value metadata: the Arrow schema's, or added when a streamed file was closed
        meta = pq.read_metadata(fh).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise SchemaError(f"{where}: not a readable parquet file ({exc})") from None
    raw = meta.get(METADATA_KEY)
    if raw is None:
        return {"format_version": 0}
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, Mapping):
        raise SchemaError(f"{where}: parquet metadata {METADATA_KEY.decode()!r} must be a JSON object, "
                          f"got {raw[:80]!r}")
    version = data.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise SchemaError(f"{where}: format_version must be an integer >= 0, got {version!r}")
    return dict(data)


def _migrate_0(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Format 0 -> 1: the same tables; ``runs``/``all_clients`` written before ``note`` existed get ``note=''``."""
    if table in ("runs", "all_clients") and "note" not in df.columns:
        df = df.assign(note="")
    return df


def read_table(path: str | os.PathLike, table: str | None = None) -> pd.DataFrame:
    """Read a parquet table storagebench wrote, checking (and if needed migrating) its format.

    Parameters
    ----------
    path : path
        A parquet file.
    table : str, optional
        The table it must hold (one of :data:`TABLES`). Default: the table its metadata names, or
        for a file without metadata the table its file name names (``runs.parquet`` ...); a parquet
        file that is none of them is returned as it is.

    Returns
    -------
    pandas.DataFrame
        The table in schema dtypes (:func:`validate`); ``df.attrs["storagebench"]`` holds the file's
        metadata (``format_version`` 0 for a file written before the metadata existed, migrated:
        see :data:`FORMAT_VERSION`).

    Raises
    ------
    SchemaError
        The file was written by a newer storagebench (its ``format_version`` names the version), it
        holds another table than ``table``, or a format-0 file misses columns no migration can
        supply (the message says to ingest ``raw/`` again).
    """
    where = os.fspath(path)
    with open_input(path, max_bytes=MAX_TABLE_BYTES, what="parquet table", error=SchemaError) as fh:
        meta = _metadata(fh, where)
        fh.seek(0)
        return _read_checked(fh, where, meta, table)


def _read_checked(fh: Any, where: str, meta: dict[str, Any], table: str | None) -> pd.DataFrame:
    version = meta["format_version"]
    if version > FORMAT_VERSION:
        raise SchemaError(f"{where}: table format_version {version} was written by a newer storagebench; this one "
                          f"reads formats 0 to {FORMAT_VERSION}: upgrade storagebench to read it")
    stored = meta.get("table")
    if table is not None:
        _columns(table)
        if stored is not None and stored != table:
            raise SchemaError(f"{where}: holds the {stored!r} table, not {table!r}")
    name = table or stored or (Path(where).stem if Path(where).stem in TABLES else None)
    df = pd.read_parquet(fh)
    if name is None:
        df.attrs["storagebench"] = meta
        return df
    if version == 0:
        df = _migrate_0(df, name)
        try:
            df = validate(df, name)
        except SchemaError as exc:
            raise SchemaError(f"{where}: format 0 (written before storagebench tables carried a format version) "
                              f"cannot be read as {name!r}: {exc}; ingest the study's raw/ again") from None
    else:
        df = validate(df, name)
    df.attrs["storagebench"] = {**meta, "table": name}
    return df

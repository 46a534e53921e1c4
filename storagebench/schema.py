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

from dataclasses import dataclass

import pandas as pd

from .errors import SchemaError

__all__ = [
    "Column",
    "RUNS",
    "HISTOGRAMS",
    "TIMESERIES",
    "TABLES",
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
    Column("repetition", _I, "1", "0-based repetition index of the point"),
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

TABLES: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "all_clients": RUNS,
    "histograms": HISTOGRAMS,
    "timeseries": TIMESERIES,
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
    table : {"runs", "all_clients", "histograms", "timeseries"}
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

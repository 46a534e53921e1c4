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

Every column declares what it is (:class:`Column`): its **role** (identity, factor, metric or
provenance: :data:`ROLES`), its unit, its valid range (:class:`Valid`, what the table gate
:func:`check_rows` checks) and, for ``run_totals``, its **combine rule** (:data:`COMBINE_RULES`, fio's
``sum_thread_stats``). Every list of columns elsewhere -- the factors a comparison pools, the fio reader's
factor fields, the axis labels, the run-level combination -- is :func:`columns` of a role or rule, so a
new column is one entry here and its reader (``docs/ARCHITECTURE.md``, "Adding a column").

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
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._inputs import open_input
from .errors import SchemaError

__all__ = [
    "Column",
    "Valid",
    "Ordered",
    "Rate",
    "BinsWithin",
    "RELATIONS",
    "Violation",
    "check_rows",
    "note_pattern",
    "MAX_INT",
    "MAX_FLOAT",
    "RUNS",
    "HISTOGRAMS",
    "TIMESERIES",
    "RUN_TOTALS",
    "ALL_HOSTS",
    "ALL_DIRECTIONS",
    "TABLES",
    "ROLES",
    "COMBINE_RULES",
    "columns",
    "names",
    "FORMAT_VERSION",
    "MIGRATIONS",
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


#: The largest int64 value (counts, bytes, ns as integers): fio's own bound for what it can print.
MAX_INT = 2**63 - 1
#: The largest float below 2**63 (``float(2**63 - 1) == 2**63``): the bound of every float count,
#: rate and latency, as in fio's reader (``storagebench.ingest._fiorows._LIMIT``).
MAX_FLOAT = math.nextafter(2.0**63, 0.0)


#: What a column is to a study (:attr:`Column.role`).
ROLES: dict[str, str] = {
    "identity": "which run, host, job and direction the row is (keys and labels)",
    "factor": "a setting of the run that a study varies or holds (fio options, the tool)",
    "metric": "a value measured by the run",
    "provenance": "where and when the row was measured and read",
}

#: How :func:`storagebench.runlevel.run_totals` combines a column over the rows of a run
#: (:attr:`Column.combine`), after fio's ``sum_thread_stats`` (``stat.c``); the words are the
#: column's description in :data:`RUN_TOTALS`.
COMBINE_RULES: dict[str, str] = {
    "first": "as in runs (one value per run)",
    "join": "as in runs ('|'-joined when the combined rows differ)",
    "same": "as in runs (unknown -- -1 or NaN -- when the combined rows differ)",
    "all": "True when every combined row has it",
    "any": "True when any combined row has it",
    "sum": "sum (-1 when a combined row does not know it)",
    "longest": "longest of the combined rows (fio keeps the max)",
    "rate": "the summed count over the longest runtime (fio's group and 'All clients' rate; the sum of the "
            "rates when combined_by is 'IOPS')",
    "mean": "mean weighted by completed I/Os (fio sum_stat); NaN when a combined row with I/O has none",
    "mean_sampled": "mean weighted by completed I/Os over the rows that measured it (fio prints 0 with N = 0 "
                    "for sync ioengines, and sum_stat skips a stat without samples)",
    "sd": "pooled SD: sum of squares within rows plus between their means, / (N - 1) (fio sum_stat, Chan et "
          "al.'s parallel update)",
    "min": "min over the rows that did I/O",
    "max": "max over the rows that did I/O",
    "bins": "the row's own for one row, else from the merged json+ bins (fio's calc_clat_percentiles rule); NaN "
            "when a combined row with I/O has no bins (percentiles are never averaged)",
    "own": "the row's own for one row; NaN with a note for several (a statistic that cannot be combined "
           "without its samples: never averaged)",
    "job_runtime_mean": "mean over the distinct jobs weighted by their runtime (fio: time summed / "
                        "total_run_time summed)",
    "first_error": "the first non-zero value of the combined jobs, as fio's group; 0 when none",
    "earliest": "earliest of the combined rows",
    "notes": "the distinct notes of the combined rows, and what combining had to say, '; '-separated",
}

_UNKNOWN_OF_DTYPE: dict[str, Any] = {"string": "", "int64": -1, "float64": math.nan, "bool": False,
                                     "datetime64[ns, UTC]": None}


@dataclass(frozen=True)
class Valid:
    """The values a column may hold: one declaration, checked by the table gate for every format.

    Parameters
    ----------
    lo, hi : float
        Inclusive bounds of a known value (never NaN or infinite).
    unknown : int, optional
        The integer that stands for "not known" in an int column that has one (``-1``). In a float
        column NaN is "not known".
    metric : bool
        A measured value: a NaN in it must be explained by the row's ``note``, which names the column
        (or one of ``names``). Factor and count columns say "unknown" by their sentinel instead.
    on_bad : {"error", "nan"}
        What a reader does with a value outside ``[lo, hi]``: ``"error"`` refuses the file (core
        metrics -- IOPS, bandwidth, bytes, I/Os, runtime -- factors and keys: a table built on them
        would be wrong); ``"nan"`` stores NaN with a note naming the column and the value (secondary
        metrics: latencies, percentiles, CPU; fio's rule since issue 2, :mod:`storagebench.ingest.fio`).
        The gate itself never repairs: what reaches it out of range is refused.
    names : tuple of str
        Other words a note may use for the column: the group it belongs to (``"clat_p*_ns"``).
    optional : bool
        A statistic the tool prints only when asked (fio's ``slat_percentiles=1``): NaN without a note
        means it was not printed. A reader reads it apart from the statistics every row has, so that its
        usual NaN never takes a row off the reader's fast path.
    """

    lo: float
    hi: float
    unknown: int | None = None
    metric: bool = False
    on_bad: str = "error"
    names: tuple[str, ...] = ()
    optional: bool = False

    def allows(self, value: Any) -> bool:
        """Whether one value is allowed (NaN, the sentinel: allowed here; the note rule is the gate's)."""
        if value is None:
            return True
        if isinstance(value, float) and value != value:
            return True
        if self.unknown is not None and value == self.unknown:
            return True
        try:
            return self.lo <= value <= self.hi
        except TypeError:
            return False

    def describe(self) -> str:
        """The allowed values in words (for messages and docs/SECURITY.md)."""
        hi = "2**63-1" if self.hi >= MAX_FLOAT else f"{self.hi:g}"
        text = f"{self.lo:g} to {hi}"
        if self.unknown is not None:
            text += f", or {self.unknown} (unknown)"
        return text


#: Counts and sizes: 0 .. 2**63-1, -1 when the tool does not report it.
_COUNT = Valid(0, MAX_INT, unknown=-1, metric=True)
#: Core float metrics (IOPS, bandwidth, runtime): finite, >= 0, below 2**63; out of range refuses the file.
_CORE = Valid(0.0, MAX_FLOAT, metric=True)
#: Latencies (ns): finite, >= 0, below 2**63; a reader stores a bad one as NaN with a note.
_LAT = Valid(0.0, MAX_FLOAT, metric=True, on_bad="nan", names=("lat_*_ns",))
_CLAT = Valid(0.0, MAX_FLOAT, metric=True, on_bad="nan", names=("clat_*_ns",))
_SLAT = Valid(0.0, MAX_FLOAT, metric=True, on_bad="nan")
_PCTL = Valid(0.0, MAX_FLOAT, metric=True, on_bad="nan", names=("clat_p*_ns",))
#: CPU use of a job, % of one CPU (fio usr_cpu/sys_cpu): >= 0. A job of one thread cannot exceed
#: 100%, but fio's group and "All clients" rows sum the CPU time of many (stat.c sum_thread_stats).
_CPU = Valid(0.0, MAX_FLOAT, metric=True, on_bad="nan", names=("usr_cpu_pct, sys_cpu_pct",))
#: A percentage of the I/Os (rwmixread, random): 0 .. 100, NaN when unknown.
_SHARE = Valid(0.0, 100.0)
#: A positive setting (bs, iodepth, numjobs): 1 .. 2**63-1, -1 when unknown.
_SETTING = Valid(1, MAX_INT, unknown=-1)
_NONNEG = Valid(0, MAX_INT)
#: A time-series sample (time, value): finite and >= 0; the table has no note, so NaN is refused too.
_SAMPLE = Valid(0.0, MAX_FLOAT, metric=True)
_POSITIVE = Valid(1, MAX_INT)


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
    valid : Valid, optional
        The values the column may hold (:class:`Valid`): the table gate
        (:func:`check_rows`) refuses a written row with any other. ``None``: any value of the dtype.
    role : {"identity", "factor", "metric", "provenance"}
        What the column is to a study (:data:`ROLES`): which run and row it is, a setting the study
        varies or holds, a measured value, or where the row came from. Every list of "the factor
        columns", "the metric columns" ... is :func:`columns` of a role, never kept by hand.
    combine : str, optional
        How :func:`storagebench.runlevel.run_totals` combines the column over the rows of a run
        (:data:`COMBINE_RULES`: fio's ``sum_thread_stats``). ``None``: the run-level table computes it
        itself (``n_rows``, ``combined_by`` ...) or the column is a key.
    of : str, optional
        The column a rule refers to: the mean of a ``"sd"`` column, the count of a ``"rate"`` column.
    option : str, optional
        For a factor: the study factor (fio option name) that sets it (``"bs"`` for ``bs_bytes``); its
        unit is the column's.
    workload : bool
        A factor that says what I/O the run asks of the storage (pattern, size, mix, queue): the same
        whichever tool issues it. The other factors (``ioengine``, ``direct``, ``target``, ``tool``)
        say how and where it ran; two tools' runs are "the same configuration" when their workload
        factors are equal (:data:`storagebench.stats.crosstool.CONFIG_COLUMNS`).
    default : optional
        The value of a row whose tool does not report the column, when it is not :attr:`unknown`'s
        rule (``error``: 0, no error reported).
    """

    name: str
    dtype: str
    unit: str
    description: str
    valid: Valid | None = None
    role: str = "identity"
    combine: str | None = None
    of: str | None = None
    option: str | None = None
    workload: bool = False
    default: Any = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise SchemaError(f"{self.name}: role must be one of {list(ROLES)}, got {self.role!r}")
        if self.combine is not None and self.combine not in COMBINE_RULES:
            raise SchemaError(f"{self.name}: combine must be one of {sorted(COMBINE_RULES)}, got {self.combine!r}")

    @property
    def unknown(self) -> Any:
        """The value that says "not known" in this column: the :class:`Valid` sentinel of an int column
        that has one (``-1``), else -1 (int), NaN (float), ``False`` (bool), ``""`` (string), ``None``
        (a time: NaT). What a reader stores for a value its tool did not print, and what
        :func:`read_table` fills in for a column an older file does not have."""
        if self.default is not None:
            return self.default
        if self.valid is not None and self.valid.unknown is not None:
            return self.valid.unknown
        if self.dtype == "int64" and self.valid is not None:
            return int(self.valid.lo)  # no sentinel: the least value allowed (repetition 0)
        return _UNKNOWN_OF_DTYPE[self.dtype]


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

_ID, _FA, _ME, _PR = "identity", "factor", "metric", "provenance"

RUNS: tuple[Column, ...] = (
    Column("study", _S, "1", "study name from the spec", combine="first"),
    Column("run_id", _S, "1", "stable hash of the study point and repetition"),
    Column("repetition", _I, "1", "repetition of the point: 1, 2 ... as the runner numbers them (0 for a file "
           "without a runner's point.json)", valid=_NONNEG, combine="first"),
    Column("run_order", _I, "1", "position in the randomised execution order (-1 when unknown)",
           valid=Valid(0, MAX_INT, unknown=-1), combine="first"),
    Column("host", _S, "1", "'local', or 'hostname:port' of a fio server (client/server mode)"),
    Column("job", _S, "1", "fio jobname", combine="join"),
    Column("job_index", _I, "1", "index among fio job entries of the same name in one output (numjobs without "
           "group_reporting)", valid=_NONNEG),
    Column("direction", _S, "1", "read, write or trim"),
    Column("tool", _S, "1", "fio, diskspd, iometer or published", role=_FA, combine="join"),
    # factors: fio option names (the study factor in ``option``); bs in bytes
    Column("rw", _S, "1", "fio rw= (read, randread, randrw ...)", role=_FA, combine="join", option="rw", workload=True),
    Column("bs_bytes", _I, "bytes", "fio bs= for this direction (-1 when unknown or variable)", valid=_SETTING,
           role=_FA, combine="same", option="bs", workload=True),
    Column("rwmixread_pct", _F, "%", "fio rwmixread= (100 for pure reads, 0 for pure writes)", valid=_SHARE,
           role=_FA, combine="same", option="rwmixread", workload=True),
    Column("random_pct", _F, "%", "fio percentage_random= (100 for rand*, 0 for sequential)", valid=_SHARE,
           role=_FA, combine="same", option="percentage_random", workload=True),
    Column("iodepth", _I, "outstanding I/Os per job", "fio iodepth= (outstanding I/Os per job; -1 when unknown)",
           valid=_SETTING, role=_FA, combine="same", option="iodepth", workload=True),
    Column("numjobs", _I, "jobs", "fio numjobs= (-1 when unknown)", valid=_SETTING, role=_FA, combine="same",
           option="numjobs", workload=True),
    Column("ioengine", _S, "1", "fio ioengine=", role=_FA, combine="join", option="ioengine"),
    Column("direct", _B, "1", "fio direct=1 (O_DIRECT)", role=_FA, combine="all", option="direct"),
    Column("target", _S, "1", "fio filename= (file or block device)", role=_FA, combine="join", option="target"),
    # metrics (fio's sum_thread_stats rule in ``combine``)
    Column("iops", _F, "1/s", "fio <dir>.iops", valid=_CORE, role=_ME, combine="rate", of="total_ios"),
    Column("bw_bytes_per_s", _F, "bytes/s", "fio <dir>.bw_bytes (3.x) or bw KiB/s x 1024 (2.x)", valid=_CORE,
           role=_ME, combine="rate", of="io_bytes"),
    Column("io_bytes", _I, "bytes", "fio <dir>.io_bytes", valid=_COUNT, role=_ME, combine="sum"),
    Column("total_ios", _I, "1", "fio <dir>.total_ios (completed I/Os; -1 when the tool does not count them, e.g. "
           "fio 2.1)", valid=_COUNT, role=_ME, combine="sum"),
    Column("runtime_s", _F, "s", "fio <dir>.runtime (ms) / 1000", valid=_CORE, role=_ME, combine="longest"),
    Column("lat_mean_ns", _F, "ns", "fio lat_ns.mean: submission to completion", valid=_LAT, role=_ME,
           combine="mean"),
    Column("lat_stdev_ns", _F, "ns", "fio lat_ns.stddev", valid=_LAT, role=_ME, combine="sd", of="lat_mean_ns"),
    Column("lat_min_ns", _F, "ns", "fio lat_ns.min", valid=_LAT, role=_ME, combine="min"),
    Column("lat_max_ns", _F, "ns", "fio lat_ns.max", valid=_LAT, role=_ME, combine="max"),
    Column("clat_mean_ns", _F, "ns", "fio clat_ns.mean: completion latency", valid=_CLAT, role=_ME, combine="mean"),
    Column("clat_stdev_ns", _F, "ns", "fio clat_ns.stddev", valid=_CLAT, role=_ME, combine="sd", of="clat_mean_ns"),
    Column("slat_mean_ns", _F, "ns", "fio slat_ns.mean: submission latency", valid=_SLAT, role=_ME,
           combine="mean_sampled"),
    *(Column(percentile_column(p), _F, "ns", f"fio clat_ns.percentile[{p:.6f}]", valid=_PCTL, role=_ME,
             combine="bins") for p in PERCENTILES),
    Column("usr_cpu_pct", _F, "%", "fio usr_cpu", valid=_CPU, role=_ME, combine="job_runtime_mean"),
    Column("sys_cpu_pct", _F, "%", "fio sys_cpu", valid=_CPU, role=_ME, combine="job_runtime_mean"),
    Column("error", _I, "1", "fio job error (errno); 0 when the job succeeded", role=_ME, combine="first_error",
           default=0),
    Column("partial", _B, "1", "True when the output is from a killed / unfinished run", role=_ME, combine="any"),
    # provenance
    Column("fio_version", _S, "1", "fio-version of the output (or of the server)", role=_PR, combine="join"),
    Column("started_at", _T, "UTC", "start time of the run", role=_PR, combine="earliest"),
    Column("hostname", _S, "1", "hostname fio ran on", role=_PR, combine="join"),
    Column("kernel", _S, "1", "uname -r of that host", role=_PR, combine="join"),
    Column("source_file", _S, "1", "path of the raw file the row came from (bytes of a non-UTF-8 name as \\xNN)",
           role=_PR, combine="join"),
    Column("note", _S, "1", "what the reader has to say about this row, '; '-separated, '' when nothing: a value "
           "fio did not print or could not have printed, stored as NaN/-1 (named by its JSON path), a unit "
           "derived another way (fio < 3.4's bw in KiB/s), a DiskSPD/Iometer rule applied", role=_PR,
           combine="notes"),
)

HISTOGRAMS: tuple[Column, ...] = (
    Column("run_id", _S, "1", "as in runs"),
    Column("host", _S, "1", "as in runs"),
    Column("job", _S, "1", "as in runs"),
    Column("job_index", _I, "1", "as in runs", valid=_NONNEG),
    Column("direction", _S, "1", "as in runs"),
    Column("bin_ns", _I, "ns", "bin value from fio json+ clat_ns.bins (plat_idx_to_val in fio stat.c)", valid=_NONNEG),
    Column("count", _I, "1", "number of completions in the bin", valid=_NONNEG, role=_ME),
)

TIMESERIES: tuple[Column, ...] = (
    Column("run_id", _S, "1", "as in runs"),
    Column("host", _S, "1", "as in runs"),
    Column("job", _S, "1", "as in runs"),
    Column("direction", _S, "1", "as in runs"),
    Column("t_s", _F, "s", "fio log time (ms) / 1000", valid=_SAMPLE),
    Column("metric", _S, "1", "iops, bw_bytes_per_s, lat_ns, clat_ns or slat_ns"),
    Column("value", _F, "per metric", "sample value in the unit the metric name gives", valid=_SAMPLE, role=_ME),
)

_BY_NAME = {c.name: c for c in RUNS}


def _total(name: str) -> Column:
    """The ``run_totals`` column of a ``runs`` column: the same name, dtype, unit, range and role,
    described by its combine rule."""
    c = _BY_NAME[name]
    words = COMBINE_RULES[c.combine] if c.combine else "as in runs"
    if c.combine == "sd":
        words = f"{words}; of {c.of}"
    return replace(c, description=words)


def _totals(role: str, skip: tuple[str, ...] = ()) -> tuple[Column, ...]:
    out = []
    for c in RUNS:
        if c.role == role and c.name not in skip:
            out.append(_total(c.name))
            if c.name == "error":
                out.append(Column("n_jobs_error", _I, "1", "combined job entries with error != 0: a run with any is "
                                  "flagged, never averaged away", valid=_NONNEG, role=_ME))
    return tuple(out)


#: ``run_totals``: its own columns (what a row covers and how it was combined), then every factor,
#: metric and provenance column of ``runs``, described by its combine rule (:data:`COMBINE_RULES`).
RUN_TOTALS: tuple[Column, ...] = (
    *(_total(n) for n in ("study", "run_id", "repetition", "run_order")),
    Column("host", _S, "1", f"a host of the run (runs.host), or {ALL_HOSTS!r}: every host of a client/server run"),
    Column("direction", _S, "1", f"read, write, trim, or {ALL_DIRECTIONS!r}: every direction of the run (or fio's "
           "own unified_rw_reporting block)"),
    Column("all_hosts", _B, "1", "the row covers every host of the run (True for every row of a one-host run)"),
    Column("all_directions", _B, "1", "the row covers every direction its hosts reported (True for the one row "
           "of a single-direction run)"),
    Column("n_hosts", _I, "1", "hosts combined in the row", valid=_POSITIVE, role=_PR),
    Column("n_directions", _I, "1", "directions combined in the row (1: a direction as reported)", valid=_POSITIVE,
           role=_PR),
    Column("n_jobs", _I, "1", "job entries combined (distinct host x job x job_index)", valid=_POSITIVE, role=_PR),
    Column("n_rows", _I, "1", "runs rows combined", valid=_POSITIVE, role=_PR),
    Column("combined_by", _S, "1", "'as reported' (one runs row, unchanged); 'I/O counts' (fio's sum_thread_stats: "
           "counts add up, means weighted by completed I/Os, IOPS = I/Os / longest runtime); 'IOPS' (the I/O counts "
           "or runtimes are unknown: IOPS and bandwidth summed, means weighted by IOPS, a common runtime assumed)",
           role=_PR),
    _total("tool"),
    _total("job"),
    *_totals(_FA, skip=("tool",)),
    Column("outstanding_ios", _F, "1", "sum of iodepth x numjobs over the distinct job sections (host x job) of the "
           "row, whose directions share one queue; NaN when one is unknown", valid=Valid(0.0, MAX_FLOAT), role=_FA),
    *_totals(_ME),
    *_totals(_PR),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "all_clients": RUNS,
    "histograms": HISTOGRAMS,
    "timeseries": TIMESERIES,
    "run_totals": RUN_TOTALS,
}



def columns(table: str, *, role: str | None = None, combine: str | None = None) -> tuple[Column, ...]:
    """The columns of ``table`` (in schema order), those of one ``role`` and/or ``combine`` rule.

    The one way to ask for "the factor columns", "the metric columns" ...: every such list in
    storagebench is derived from here, so that a new column is one entry of the schema.

    Parameters
    ----------
    table : str
        One of :data:`TABLES`.
    role : str, optional
        One of :data:`ROLES`.
    combine : str, optional
        One of :data:`COMBINE_RULES`.

    Returns
    -------
    tuple of Column

    Raises
    ------
    SchemaError
        An unknown table, role or rule.
    """
    cols = _columns(table)
    if role is not None and role not in ROLES:
        raise SchemaError(f"role must be one of {list(ROLES)}, got {role!r}")
    if combine is not None and combine not in COMBINE_RULES:
        raise SchemaError(f"combine must be one of {sorted(COMBINE_RULES)}, got {combine!r}")
    return tuple(c for c in cols if (role is None or c.role == role) and (combine is None or c.combine == combine))


def names(table: str, *, role: str | None = None, combine: str | None = None) -> tuple[str, ...]:
    """The names of :func:`columns` (same parameters)."""
    return tuple(c.name for c in columns(table, role=role, combine=combine))


# ---- the table gate: declared relations, checked once per batch before anything is written ---------


@dataclass(frozen=True)
class Ordered:
    """Known values of ``columns`` (NaN skipped) never decrease from left to right.

    ``rel`` is the allowed excess of an earlier column over a later one, as a fraction of the later
    (``a <= b * (1 + rel)``); ``why`` says where the rule comes from.
    """

    columns: tuple[str, ...]
    why: str
    rel: float = 0.0


@dataclass(frozen=True)
class Rate:
    """``rate x time == count`` within the printed precision of the tool that wrote the row.

    ``tolerance`` maps ``runs.tool`` to ``(dt, resolution, rel)``: the row passes when
    ``|rate * time - count| <= rate * dt + resolution * time + rel * count + 1`` -- ``dt`` the rounding
    of the printed time (s), ``resolution`` that of the printed rate (per s), ``rel`` a relative
    rounding of the rate, and 1 the rounding of the count itself. A tool not named gets ``"*"``.
    Rows whose count is unknown (-1) or whose rate or time is NaN are not compared.
    """

    rate: str
    time: str
    count: str
    tolerance: Mapping[str, tuple[float, float, float]]
    why: str


@dataclass(frozen=True)
class BinsWithin:
    """The ``histograms`` counts of one block (run_id, host, job, job_index, direction) add up to at
    most the ``total_ios`` of its ``runs`` row; a ``"mixed"`` block with no ``mixed`` row is compared
    with the sum over the directions of its job (Iometer's bins count reads and writes together)."""

    why: str


_PCT_COLS = tuple(percentile_column(p) for p in PERCENTILES)
#: fio reports a percentile as the middle of its json+ bin (stat.c plat_idx_to_val): with 64 bins per
#: power of two (FIO_IO_U_PLAT_BITS = 6) the middle is at most 1/128 above any value in the bin, so a
#: percentile may print above the largest latency by that much. 1/64 leaves room for ns rounding.
_BIN_REL = 1 / 64
_RATE_TOL: dict[str, tuple[float, float, float]] = {
    # fio: iops = 1000 * total_ios / runtime_ms with the very ms it prints, iops printed "%f"
    "fio": (0.0, 1e-6, 0.0),
    # DiskSPD: TestTimeSeconds / 'actual test time' printed "%.2f" (XML IOPS are I/Os over it: exact;
    # the text's 'I/O per s' is over the exact timer value, printed "%.2f")
    "diskspd": (0.005, 0.005, 0.0),
    # Iometer: rates with C++'s 6 significant digits; run time = raw ticks / 'Processor Speed', itself
    # printed with 6 digits (3.91406e+006); the ALL row adds the managers' rates, each over its own run
    # time, and runtime_s is the longest of them (they stop within milliseconds of each other)
    "iometer": (0.0, 0.0, 1e-3),
    "*": (0.005, 0.005, 1e-3),
}
_BW_TOL: dict[str, tuple[float, float, float]] = {
    # fio >= 3.4: bw_bytes = 1000 * io_bytes / runtime_ms truncated to an integer (< 1 B/s); fio < 3.4
    # prints bw in KiB/s (< 1024 B/s)
    "fio": (0.0, 1024.0, 0.0),
    # DiskSPD XML: bytes / TestTimeSeconds (exact over the printed time); text: bytes x IOPS / I/Os
    # (the IOPS's 2 decimals, relative to the I/O size)
    "diskspd": (0.005, 0.0, 1e-3),
    # Iometer: MiBps (6 significant digits) x 2**20, and the managers' run times as for IOPS
    "iometer": (0.0, 0.0, 1e-3),
    "*": (0.005, 1024.0, 1e-3),
}

_RUN_RELATIONS: tuple = (
    Ordered(("lat_min_ns", "lat_mean_ns", "lat_max_ns"), "the minimum, mean and maximum of one set of latencies"),
    Ordered(_PCT_COLS, "percentiles are monotone in p (fio's from one histogram, DiskSPD's from its sorted "
            "latencies)"),
    Ordered((_PCT_COLS[-1], "lat_max_ns"), "no completion latency percentile exceeds the largest latency "
            "(fio: clat <= lat; its percentiles are bin middles, up to 1/128 above the values in the bin)",
            rel=_BIN_REL),
    Ordered(("clat_mean_ns", "lat_max_ns"), "a mean completion latency cannot exceed the largest total latency"),
    Rate("iops", "runtime_s", "total_ios", _RATE_TOL, "IOPS are the completed I/Os over the runtime"),
    Rate("bw_bytes_per_s", "runtime_s", "io_bytes", _BW_TOL, "bandwidth is the bytes moved over the runtime"),
)

#: The relations every row of a table must satisfy beside its columns' :class:`Valid` ranges.
RELATIONS: dict[str, tuple] = {
    "runs": _RUN_RELATIONS,
    "all_clients": _RUN_RELATIONS,
    "run_totals": _RUN_RELATIONS,
    "histograms": (BinsWithin("a histogram counts completed I/Os: fio's json+ bins the clat samples (clat_ns.N: at "
                              "most total_ios, plus iodepth x numjobs I/Os in flight when ramp_time ended), "
                              "Iometer's bins every read and write (exactly)"),),
    "timeseries": (),
}


@dataclass(frozen=True)
class Violation:
    """One value the gate refuses: ``table``, ``row`` (position in the frame), ``column``, ``value`` and
    the rule (``rule``) it breaks."""

    table: str
    row: int
    column: str
    value: Any
    rule: str

    def message(self) -> str:
        """``"runs.lat_max_ns = -5.0: allowed 0 to 2**63-1"``: the field, the value and the rule."""
        return f"{self.table}.{self.column} = {self.value!r}: {self.rule}"


def note_pattern(col: Column) -> re.Pattern:
    """The regular expression a ``note`` must match to explain a NaN in ``col``: the column's name or one
    of its :attr:`Valid.names`, as a whole word (``clat_*_ns`` does not name ``lat_mean_ns``)."""
    words = (col.name, *(col.valid.names if col.valid else ()))
    alt = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{alt})(?![A-Za-z0-9_])")


_NOTE_RE: dict[str, re.Pattern] = {}


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def check_rows(df: pd.DataFrame, table: str, *, runs: pd.DataFrame | None = None,
               block_starts: np.ndarray | None = None, block_rows: np.ndarray | None = None,
               limit: int = 1000) -> list[Violation]:
    """The table gate: every value of ``df`` against its column's :class:`Valid` and the table's
    :data:`RELATIONS`; every NaN of a metric column against the row's ``note``.

    Checks only, vectorised (numpy over whole columns); nothing is changed. Ingest calls it once per
    batch on each table before anything is written and refuses the files whose rows break a rule
    (:mod:`storagebench.ingest`).

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``table`` in schema dtypes (:func:`validate`).
    table : str
        One of :data:`TABLES`.
    runs : pandas.DataFrame, optional
        The ``runs`` rows the ``histograms`` belong to (for :class:`BinsWithin`); without it that
        relation is not checked.
    block_starts : numpy.ndarray, optional
        Row positions where each histogram block starts (ingest knows them); computed when omitted.
    block_rows : numpy.ndarray, optional
        With ``block_starts``: the ``runs`` row of each block (-1: find it by its key), as ingest knows
        it for fio's json+ blocks; the comparison is then vectorised.
    limit : int
        Stop after this many violations (one per file is enough to refuse it).

    Returns
    -------
    list of Violation
        Empty when every row passes.
    """
    cols = _columns(table)
    out: list[Violation] = []
    if df.empty:
        return out
    note = df["note"].to_numpy(dtype=object) if "note" in df.columns else None
    for c in cols:
        v = c.valid
        if v is None or c.dtype not in ("int64", "float64"):
            continue
        a = df[c.name].to_numpy()
        if c.dtype == "int64":
            bad = (a < v.lo) | (a > v.hi)
            if v.unknown is not None:
                bad &= a != v.unknown
            nan = None
        else:
            with np.errstate(invalid="ignore"):
                nan = np.isnan(a)
                bad = ~nan & ~((a >= v.lo) & (a <= v.hi))
        for i in np.flatnonzero(bad)[:limit]:
            out.append(Violation(table, int(i), c.name, _py(a[i]), f"allowed {v.describe()}"))
        if v.metric and not v.optional and nan is not None and nan.any():
            rows = np.flatnonzero(nan)
            if note is None:
                for i in rows[:limit]:
                    out.append(Violation(table, int(i), c.name, math.nan, "NaN is not allowed in this table"))
                continue
            pat = _NOTE_RE.get(c.name) or _NOTE_RE.setdefault(c.name, note_pattern(c))
            texts = note[rows]
            seen: dict[Any, bool] = {}
            for i, t in zip(rows, texts, strict=True):
                ok = seen.get(t)
                if ok is None:
                    ok = seen[t] = isinstance(t, str) and pat.search(t) is not None
                if not ok:
                    out.append(Violation(table, int(i), c.name, math.nan,
                                         f"NaN without a note naming {c.name} (a NaN must say why)"))
                    if len(out) >= limit:
                        break
        if len(out) >= limit:
            return out
    for rel in RELATIONS.get(table, ()):
        if isinstance(rel, Ordered):
            out.extend(_check_ordered(df, table, rel, limit))
        elif isinstance(rel, Rate):
            out.extend(_check_rate(df, table, rel, limit))
        elif isinstance(rel, BinsWithin) and runs is not None:
            out.extend(_check_bins(df, runs, table, rel, block_starts, block_rows, limit))
    return out


def _check_ordered(df: pd.DataFrame, table: str, rel: Ordered, limit: int) -> list[Violation]:
    m = np.column_stack([df[c].to_numpy(dtype=np.float64) for c in rel.columns])
    run = np.fmax.accumulate(m, axis=1)  # the largest known value so far, left to right
    prev = run[:, :-1]
    cur = m[:, 1:]
    with np.errstate(invalid="ignore"):
        bad = cur * (1.0 + rel.rel) < prev  # NaN on either side compares False
    out = []
    for i, j in zip(*np.nonzero(bad), strict=True):
        col = rel.columns[j + 1]
        k = int(np.flatnonzero(m[i, : j + 1] == prev[i, j])[0])
        out.append(Violation(table, int(i), col, _py(m[i, j + 1]),
                             f"below {rel.columns[k]} = {float(prev[i, j])!r}: {rel.why}"))
        if len(out) >= limit:
            break
    return out


def _check_rate(df: pd.DataFrame, table: str, rel: Rate, limit: int) -> list[Violation]:
    r = df[rel.rate].to_numpy(dtype=np.float64)
    t = df[rel.time].to_numpy(dtype=np.float64)
    c = df[rel.count].to_numpy()
    tools = df["tool"].to_numpy(dtype=object) if "tool" in df.columns else np.full(len(df), "*", dtype=object)
    known = c >= 0
    cf = c.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(r * t - cf)
    dt = np.full(len(df), rel.tolerance["*"][0])
    res = np.full(len(df), rel.tolerance["*"][1])
    rr = np.full(len(df), rel.tolerance["*"][2])
    for tool, (a, b, e) in rel.tolerance.items():
        if tool == "*":
            continue
        sel = tools == tool
        dt[sel], res[sel], rr[sel] = a, b, e
    with np.errstate(invalid="ignore", over="ignore"):
        tol = r * dt + res * t + rr * cf + 1.0
        bad = known & (diff > tol)  # NaN rate or time compares False: not compared
    out = []
    for i in np.flatnonzero(bad)[:limit]:
        out.append(Violation(table, int(i), rel.rate, _py(r[i]),
                             f"x {rel.time} = {float(t[i])!r} is {float(r[i] * t[i])!r}, but {rel.count} = {int(c[i])} "
                             f"(allowed difference {tol[i]:.6g}: {rel.why}, within the printed precision of "
                             f"{tools[i]!s})"))
    return out


_BLOCK_KEY = ("run_id", "host", "job", "job_index", "direction")


def _check_bins(hist: pd.DataFrame, runs: pd.DataFrame, table: str, rel: BinsWithin,
                starts: np.ndarray | None, block_rows: np.ndarray | None, limit: int) -> list[Violation]:
    counts = hist["count"].to_numpy()
    if starts is None:
        change = np.zeros(len(hist), dtype=bool)
        change[0] = True
        for k in _BLOCK_KEY:
            a = pd.factorize(hist[k])[0]
            change[1:] |= a[1:] != a[:-1]
        starts = np.flatnonzero(change)
    sums = np.add.reduceat(counts.astype(np.float64), starts)
    exact = np.add.reduceat(counts, starts)
    ios = runs["total_ios"].to_numpy()
    # fio: the I/Os in flight when ramp_time ends complete after the counters are reset, so they are
    # completions (bins, clat_ns.N) but not issued I/Os (total_ios): up to iodepth per job more
    slack = np.where((runs["tool"].to_numpy(dtype=object) == "fio") & (runs["iodepth"].to_numpy() > 0),
                     runs["iodepth"].to_numpy() * np.maximum(runs["numjobs"].to_numpy(), 1), 0)
    if block_rows is not None and len(block_rows) == len(starts):
        known = block_rows >= 0
        r = np.where(known, block_rows, 0)
        limit_n = np.where(known & (ios[r] >= 0), ios[r] + slack[r], -1)
        over = (limit_n >= 0) & ((sums > limit_n) | ((sums < 2.0**62) & (exact > limit_n)))
        if not over.any() and known.all():
            return []
        todo = np.flatnonzero(over | ~known)
    else:
        todo = np.arange(len(starts))
    total: dict[tuple, int] = {}
    by_job: dict[tuple, int] = {}
    rk = [runs[k].to_numpy(dtype=object) for k in _BLOCK_KEY]
    for i in range(len(runs)):
        key = tuple(x[i] for x in rk)
        n = int(ios[i]) + int(slack[i]) if ios[i] >= 0 else -1
        total[key] = n if key not in total else (n if min(n, total[key]) >= 0 else -1)
        j = key[:4]
        by_job[j] = (by_job.get(j, 0) + n) if n >= 0 and by_job.get(j, 0) >= 0 else -1
    out = []
    first = [hist[k].take(starts[todo]).to_numpy(dtype=object) for k in _BLOCK_KEY]  # those blocks' keys only
    for j, b in enumerate(todo):
        s = starts[b]
        key = tuple(x[j] for x in first)
        n = total.get(key)
        if n is None and key[4] == ALL_DIRECTIONS:
            n = by_job.get(key[:4])
        if n is None or n < 0:
            continue
        if sums[b] > n or (sums[b] < 2.0**62 and int(exact[b]) > n):
            shown = int(exact[b]) if sums[b] < 2.0**62 else f"more than {2**62}"
            out.append(Violation(table, int(s), "count", shown,
                                 f"the bins of {'/'.join(map(str, key))} add up to more completions than its "
                                 f"total_ios (with fio's in-flight allowance) = {n}: {rel.why}"))
            if len(out) >= limit:
                break
    return out


def _columns(table: str) -> tuple[Column, ...]:
    try:
        return TABLES[table]
    except KeyError:
        raise SchemaError(f"table must be one of {sorted(TABLES)}, got {table!r}") from None


def describe(table: str) -> pd.DataFrame:
    """The schema of ``table`` as a DataFrame: ``name, dtype, unit, description, valid, role, combine, of,
    option, default`` (the fields of :class:`Column`)."""
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
#: **When the version changes.** A new column does *not* change it: a file written before the column
#: existed lacks it, and :func:`read_table` fills it with the column's unknown value
#: (:attr:`Column.unknown`: NaN, -1, ``""`` ...; a metric's NaN gets a ``note`` naming it) and lists it
#: in ``attrs["storagebench"]["filled"]``. Adding a column is one entry of the schema and its reader,
#: and every ``tidy/`` directory already written still loads. The version goes up (and
#: :data:`MIGRATIONS` gets the step from the old version) only when stored values change meaning: a
#: column renamed or dropped, a unit or a rule changed, a key column added. Only key and core columns
#: can never be filled: an identity column, or a core metric (``Valid.on_bad == "error"``: IOPS,
#: bandwidth, bytes, I/Os, runtime, a histogram count) -- a file without one is refused.
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
    """Format 0 -> 1: the same tables; ``runs``/``all_clients`` written before ``note`` existed get ``note=''``
    (``run_totals``, which format 0 lacks, is built by :func:`storagebench.runlevel.read_run_totals`)."""
    if table in ("runs", "all_clients") and "note" not in df.columns:
        df = df.assign(note="")
    return df


#: The chain of format migrations: ``MIGRATIONS[n]`` takes a table of format ``n`` (a DataFrame, and the
#: table's name) to format ``n + 1``. :func:`read_table` applies ``MIGRATIONS[v], MIGRATIONS[v + 1] ...``
#: up to :data:`FORMAT_VERSION`; a format change is one function added here.
MIGRATIONS: dict[int, Any] = {0: _migrate_0}


def _required(c: Column) -> bool:
    """A column a stored table must have: a key (identity), or a core metric (out of range refuses a file)."""
    return c.role == "identity" or (c.role == "metric" and c.valid is not None and c.valid.on_bad == "error")


def _fill_added(df: pd.DataFrame, table: str) -> tuple[pd.DataFrame, list[str]]:
    """``df`` with every schema column it lacks that may be filled (not :func:`_required`) set to the
    column's unknown value, and their names; a metric filled with NaN is named in each row's ``note``."""
    missing = [c for c in _columns(table) if c.name not in df.columns and not _required(c)]
    if not missing:
        return df, []
    n = len(df)
    fill = {}
    for c in missing:
        if c.dtype.startswith("datetime64"):
            fill[c.name] = pd.Series(pd.NaT, index=df.index, dtype=c.dtype)
        elif c.dtype == "string":
            fill[c.name] = pd.Series([c.unknown] * n, index=df.index, dtype="string")
        else:
            fill[c.name] = pd.Series(np.full(n, c.unknown, dtype=c.dtype), index=df.index)
    df = df.assign(**fill)
    nan_metrics = [c.name for c in missing if c.role == "metric" and c.dtype == "float64"
                   and c.valid is not None and c.valid.metric and not c.valid.optional]  # a NaN that needs a note
    if nan_metrics and "note" in df.columns and n:
        text = f"{', '.join(nan_metrics)}: not in this table (written before the column existed), NaN"
        note = df["note"].fillna("").astype(str).to_numpy(dtype=object)
        df = df.assign(note=pd.array(np.where(note == "", text, note + "; " + text), dtype="string"))
    return df, [c.name for c in missing]


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
        metadata (``format_version`` 0 for a file written before the metadata existed, migrated by the
        chain :data:`MIGRATIONS`; ``filled``: the columns the file was written without, filled with
        their unknown value -- see :data:`FORMAT_VERSION` for the rule).

    Raises
    ------
    SchemaError
        The file was written by a newer storagebench (its ``format_version`` names the version), it
        holds another table than ``table``, or misses a key or core column that nothing can supply
        (for a format-0 file the message says to ingest ``raw/`` again).
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
    for v in range(version, FORMAT_VERSION):
        df = MIGRATIONS[v](df, name)
    df, filled = _fill_added(df, name)
    try:
        df = validate(df, name)
    except SchemaError as exc:
        if version == 0:
            raise SchemaError(f"{where}: format 0 (written before storagebench tables carried a format version) "
                              f"cannot be read as {name!r}: {exc}; ingest the study's raw/ again") from None
        raise SchemaError(f"{where}: {exc}") from None
    if filled:
        meta = {**meta, "filled": filled}
    df.attrs["storagebench"] = {**meta, "table": name}
    return df

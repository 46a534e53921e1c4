"""The columns of the tidy tables (private part of :mod:`storagebench.schema`, which re-exports its public names):
each column's dtype, unit, role, valid range and combine rule, the tables built from them, and the check of a
frame against a table (:func:`validate`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from .errors import SchemaError

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
    "latest": "latest of the combined rows",
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
#: fio's steady-state criterion (% of the window mean, or IOPS / bytes/s): a slope may be negative; NaN when
#: the run had no steady-state rule or fio printed none (``"-nan%"``).
_SS_CRITERION = Valid(-MAX_FLOAT, MAX_FLOAT)
#: A length of time a setting gives, s: >= 0, NaN when not set.
_SECONDS = Valid(0.0, MAX_FLOAT)
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
    # fio's steady-state detection (steadystate=, steadystate_duration=): how fio decided the run's length
    # (it stops a job early once steady), as fio reports it: provenance of the measurement, not a metric
    Column("ss_rule", _S, "1", "fio steadystate block's ss: the steady-state rule as fio read it "
           "('iops:10.000000%', 'bw_slope:...'); '' when the job had no steady-state detection", role=_PR,
           combine="join"),
    Column("ss_window_s", _F, "s", "fio steadystate.duration: the window fio judges steadiness over (one sample "
           "a second); NaN without a rule", valid=_SECONDS, role=_PR, combine="same"),
    Column("ss_attained", _B, "1", "fio steadystate.attained: True when fio judged the job steady and stopped it "
           "before runtime", role=_PR, combine="all"),
    Column("ss_criterion", _F, "% or metric unit", "fio steadystate.criterion: the last computed criterion (% of "
           "the window mean for a % rule); NaN without a rule or when fio printed -nan", valid=_SS_CRITERION,
           role=_PR, combine="same"),
    # provenance
    Column("fio_version", _S, "1", "fio-version of the output (or of the server)", role=_PR, combine="join"),
    Column("started_at", _T, "UTC", "start time of the run", role=_PR, combine="earliest"),
    Column("reported_at", _T, "UTC", "fio's timestamp_ms: when fio wrote its report, right after its jobs ended "
           "(the end of the measured window to the ms, plus fio's clean-up); NaT where fio printed none",
           role=_PR, combine="latest"),
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



"""Client/server checks on the run-level table: cluster totals vs fio's "All clients", overlap, fairness, scaling.

Rows are never combined here: every combination of jobs, directions and hosts comes from
:func:`storagebench.runlevel.run_totals` (fio's ``sum_thread_stats`` rule: counts add up, means are
weighted by completed I/Os, IOPS is the pooled I/O count over the longest runtime, percentiles come
from the merged json+ bins). This module selects from that table and checks it:

* fio's "All clients" entry must equal the cluster total (:func:`cluster_aggregate` reports the
  relative difference and flags > 0.5 %); with fio's own rule on both sides they agree to rounding;
* the clients must really have run at the same time (:func:`client_overlap`): fio's client JSON
  carries no per-client start time, so the spans come from fio logs written with
  ``log_unix_epoch=1`` (``write_iops_log``), which the client collects from every server.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .errors import SchemaError, StatsError
from .findings import CONFIDENCE, Finding, Findings, fmt_ci, fmt_number
from .runlevel import is_run_totals, run_totals, select
from .schema import PERCENTILES
from .stats import compare, mean_ci
from .stats.comparison import FACTOR_COLUMNS
from .stats.saturation import find_knee

__all__ = [
    "combine_jobs",
    "per_host",
    "cluster_aggregate",
    "client_spans",
    "client_overlap",
    "cluster_checks",
    "fairness",
    "jain_index",
    "scaling_summary",
    "saturation_point",
    "scaling_findings",
]

#: Relative difference above which "All clients" and the per-host sum disagree.
ALL_CLIENTS_TOLERANCE = 0.005
#: Share of the median host span the clients of a run must overlap to count as concurrent.
MIN_OVERLAP = 0.9

#: combine_jobs' ``by`` -> the run-level rows it means (hosts, direction of runlevel.select)
_BY = {
    ("run_id", "host", "direction"): ("each", "each"),
    ("run_id", "direction"): ("all", "each"),
    ("run_id", "host"): ("each", None),
    ("run_id",): ("all", None),
}


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SchemaError(f"{what} is missing columns {missing}")


def _totals(runs: pd.DataFrame, histograms: pd.DataFrame | None) -> pd.DataFrame:
    return runs if is_run_totals(runs) else run_totals(runs, histograms)


def combine_jobs(
    runs: pd.DataFrame,
    histograms: pd.DataFrame | None = None,
    by: Sequence[str] = ("run_id", "host", "direction"),
    percentiles: Sequence[float] = PERCENTILES,
) -> pd.DataFrame:
    """Rows of the run-level table at the level ``by`` names (jobs, hosts and directions combined by fio's rule).

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs`` rows, or a run-level table (``tidy/run_totals.parquet``: selected, nothing recomputed).
    histograms : pandas.DataFrame, optional
        ``histograms`` rows of the same runs: percentiles of combined rows come from the merged bins;
        without them they are NaN (percentiles are never averaged).
    by : sequence of str
        ``("run_id", "host", "direction")`` (the jobs of each host, per direction),
        ``("run_id", "direction")`` (every host), ``("run_id", "host")`` (every direction of each host)
        or ``("run_id",)`` (the run's total).
    percentiles : sequence of float
        Percentiles (%) wanted; the run-level table holds fio's default list
        (:data:`storagebench.schema.PERCENTILES`), so each must be one of them.

    Returns
    -------
    pandas.DataFrame
        :func:`storagebench.runlevel.select` of :func:`storagebench.runlevel.run_totals`: the
        :data:`storagebench.schema.RUN_TOTALS` columns (``iops`` 1/s, latencies ns ...; ``n_jobs``
        job entries combined) plus the study factors.

    Raises
    ------
    SchemaError
        ``by`` is none of those, a percentile is not in fio's default list, or ``runs`` lacks
        ``run_id``/``iops`` (a ``histograms`` key column).
    """
    key = tuple(by)
    if key not in _BY:
        raise SchemaError(f"by must be one of {[list(k) for k in _BY]}, got {list(key)}")
    other = [p for p in percentiles if float(p) not in PERCENTILES]
    if other:
        raise SchemaError(f"percentiles must be among {list(PERCENTILES)} (the run-level table's), got {other}; "
                          "compute others from the histograms (storagebench._histogram)")
    hosts, direction = _BY[key]
    return select(_totals(runs, histograms), hosts=hosts, direction=direction)


def per_host(runs: pd.DataFrame, histograms: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run x host x direction: :func:`combine_jobs` with ``by=("run_id", "host", "direction")``."""
    return combine_jobs(runs, histograms, by=("run_id", "host", "direction"))


def cluster_aggregate(
    runs: pd.DataFrame,
    histograms: pd.DataFrame | None = None,
    all_clients: pd.DataFrame | None = None,
    *,
    tolerance: float = ALL_CLIENTS_TOLERANCE,
) -> pd.DataFrame:
    """The cluster result of each run x direction, checked against fio's "All clients".

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs`` rows of client/server runs (one per host x job x direction), or their run-level table.
    histograms : pandas.DataFrame, optional
        ``histograms`` rows; the cluster percentiles come from all hosts' bins merged.
    all_clients : pandas.DataFrame, optional
        fio's "All clients" rows (the ``all_clients`` table).
    tolerance : float
        Relative difference above which the check is flagged (0.005 = 0.5 %).

    Returns
    -------
    pandas.DataFrame
        One row per ``run_id, direction``: the run-level columns (``iops`` = the pooled I/Os over the
        longest runtime, fio's ``All clients`` rule, client.c ``handle_ts`` -> stat.c
        ``sum_thread_stats``) plus ``hosts`` (hosts that reported), ``runtime_spread_s`` (longest -
        shortest host runtime, s), and with ``all_clients``: ``all_clients_iops``,
        ``all_clients_bw_bytes_per_s``, ``iops_rel_diff``, ``bw_rel_diff`` (cluster total / All clients
        - 1) and ``all_clients_mismatch`` (True when either exceeds ``tolerance``, or a multi-host run has
        no All clients entry; fio prints none for a single client).
    """
    totals = _totals(runs, histograms)
    out = select(totals, hosts="all", direction="each")
    if out.empty:
        return out
    out = out.assign(hosts=out["n_hosts"])
    each = select(totals, hosts="each", direction="each")
    grp = each.groupby(["run_id", "direction"], observed=True)["runtime_s"]
    spread = (grp.max() - grp.min()).rename("runtime_spread_s").reset_index()
    out = out.merge(spread, on=["run_id", "direction"], how="left")
    if all_clients is not None:
        _need(all_clients, ["run_id", "direction", "iops", "bw_bytes_per_s"], "all_clients")
        ac = (all_clients.groupby(["run_id", "direction"], observed=True)[["iops", "bw_bytes_per_s"]].sum()
              .rename(columns={"iops": "all_clients_iops", "bw_bytes_per_s": "all_clients_bw_bytes_per_s"})
              .reset_index())
        out = out.merge(ac, on=["run_id", "direction"], how="left")
        with np.errstate(divide="ignore", invalid="ignore"):
            out["iops_rel_diff"] = out["iops"] / out["all_clients_iops"] - 1.0
            out["bw_rel_diff"] = out["bw_bytes_per_s"] / out["all_clients_bw_bytes_per_s"] - 1.0
        worst = out[["iops_rel_diff", "bw_rel_diff"]].abs().max(axis=1)
        # fio prints no "All clients" entry for a single client: nothing to check then
        single = (out["hosts"] == 1) & out["all_clients_iops"].isna()
        out["all_clients_mismatch"] = ~(worst <= tolerance) & ~single
    return out


def client_spans(timeseries: pd.DataFrame, log_avg_msec: float = 0.0) -> pd.DataFrame:
    """When each host ran, from fio logs written with ``log_unix_epoch=1``.

    Parameters
    ----------
    timeseries : pandas.DataFrame
        ``timeseries`` rows (``run_id, host, t_s``) whose ``t_s`` is Unix time in s (fio
        ``log_unix_epoch=1``; relative times of different servers cannot be compared).
    log_avg_msec : float
        fio ``log_avg_msec`` of the logs, ms. A sample at ``t`` averages the window
        ``[t - log_avg_msec, t]``, and fio 3.33 does not log the last window of a job, so the
        span is ``[min(t_s) - w, max(t_s) + w]`` with ``w = log_avg_msec / 1000``: start and end
        are known to within one window.

    Returns
    -------
    pandas.DataFrame
        ``run_id, host, start_s, end_s`` (Unix s).

    Raises
    ------
    SchemaError
        Columns missing, or times that are not Unix times (before 2001).
    """
    _need(timeseries, ["run_id", "host", "t_s"], "timeseries")
    g = timeseries.groupby(["run_id", "host"], observed=True)["t_s"].agg(["min", "max"]).reset_index()
    if (g["min"] < 1e9).any():
        raise SchemaError("timeseries.t_s must be Unix times (fio log_unix_epoch=1) to compare hosts, "
                          f"got values from {g['min'].min():.3f} s")
    g["start_s"] = g["min"] - log_avg_msec / 1000.0
    g["end_s"] = g["max"] + log_avg_msec / 1000.0
    return g[["run_id", "host", "start_s", "end_s"]]


def client_overlap(spans: pd.DataFrame, runtime_s: float | pd.Series | None = None, *,
                   min_fraction: float = MIN_OVERLAP) -> pd.DataFrame:
    """Did the clients of each run really run at the same time?

    Parameters
    ----------
    spans : pandas.DataFrame
        ``run_id, host, start_s, end_s`` (:func:`client_spans`).
    runtime_s : float or pandas.Series indexed by run_id, optional
        Runtime of each run, s; defaults to the median host span of the run.
    min_fraction : float
        Overlap below this fraction of the runtime is flagged.

    Returns
    -------
    pandas.DataFrame
        One row per run: ``run_id, hosts, overlap_s`` (earliest end minus latest start, >= 0),
        ``start_skew_s`` (latest start - earliest start), ``overlap_fraction`` (overlap /
        runtime) and ``not_concurrent`` (fraction < ``min_fraction``).
    """
    _need(spans, ["run_id", "host", "start_s", "end_s"], "spans")
    g = spans.groupby("run_id", observed=True).agg(
        hosts=("host", "nunique"), first_start=("start_s", "min"), last_start=("start_s", "max"),
        first_end=("end_s", "min"))
    g["median_span"] = (spans.assign(d=spans["end_s"] - spans["start_s"]).groupby("run_id")["d"].median())
    g["overlap_s"] = (g["first_end"] - g["last_start"]).clip(lower=0.0)
    g["start_skew_s"] = g["last_start"] - g["first_start"]
    if runtime_s is None:
        rt = g["median_span"]
    elif isinstance(runtime_s, pd.Series):
        rt = runtime_s.reindex(g.index)
    else:
        rt = pd.Series(float(runtime_s), index=g.index)
    g["overlap_fraction"] = g["overlap_s"] / rt
    g["not_concurrent"] = ~(g["overlap_fraction"] >= min_fraction)
    return g[["hosts", "overlap_s", "start_skew_s", "overlap_fraction", "not_concurrent"]].reset_index()


def cluster_checks(cluster: pd.DataFrame, overlap: pd.DataFrame, *, tolerance: float = ALL_CLIENTS_TOLERANCE,
                   min_fraction: float = MIN_OVERLAP) -> pd.DataFrame:
    """Are the cluster numbers sound? The checks of a client/server study, one row each.

    Parameters
    ----------
    cluster : pandas.DataFrame
        :func:`cluster_aggregate` of the study (with ``all_clients``: the ``*_rel_diff`` and
        ``all_clients_mismatch`` columns).
    overlap : pandas.DataFrame
        :func:`client_overlap` of its span logs.
    tolerance, min_fraction : float
        The thresholds ``cluster`` and ``overlap`` were flagged with (fractions), for the labels.

    Returns
    -------
    pandas.DataFrame
        Columns ``check``, ``value`` and ``note``; rows: the runs, the worst relative difference of the
        per-host sum to fio's "All clients" (%), the runs flagged above ``tolerance``, the multi-client runs,
        their median overlap (% of the median host span) and the runs flagged not concurrent. A value that
        cannot be computed is NaN with a note saying why (no "All clients" entry, no multi-client run),
        never a made-up number.
    """
    _need(cluster, ["run_id"], "cluster")
    _need(overlap, ["hosts", "overlap_fraction", "not_concurrent"], "overlap")
    rows = [("runs", cluster["run_id"].nunique(), "")]
    diffs = [c for c in ("iops_rel_diff", "bw_rel_diff") if c in cluster]
    worst = cluster[diffs].abs().max().max() if diffs else np.nan
    none = "" if np.isfinite(worst) else (
        "no run has fio's All clients entry (fio prints none for a single client)" if diffs
        else "the All clients table was not given")
    flagged = int(cluster["all_clients_mismatch"].sum()) if "all_clients_mismatch" in cluster else np.nan
    rows += [("worst |per-host sum / All clients - 1| (%)", 100 * worst, none),
             (f"runs flagged above {100 * tolerance:g} %", flagged, "" if diffs else none)]
    multi = overlap[overlap["hosts"] > 1]
    alone = "" if len(multi) else "no run had more than one client"
    rows += [("multi-client runs", len(multi), ""),
             ("median overlap (% of the median host span)",
              100 * multi["overlap_fraction"].median() if len(multi) else np.nan, alone),
             (f"runs flagged not concurrent (< {100 * min_fraction:g} %)", int(multi["not_concurrent"].sum()), alone)]
    return pd.DataFrame(rows, columns=["check", "value", "note"])


def jain_index(x: Sequence[float] | np.ndarray) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 = perfectly fair, 1/n = one takes all.

    Source: R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of Fairness and Discrimination
    for Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984.
    """
    a = np.asarray(x, dtype=float)
    a = a[~np.isnan(a)]
    if a.size == 0 or (a**2).sum() == 0:
        return float("nan")
    return float(a.sum() ** 2 / (a.size * (a**2).sum()))


def fairness(host_rows: pd.DataFrame, metric: str = "iops",
             by: Sequence[str] = ("run_id", "direction")) -> pd.DataFrame:
    """Per-client fairness of each run: spread of a per-host metric.

    Parameters
    ----------
    host_rows : pandas.DataFrame
        :func:`per_host` rows.
    metric : str
        Per-host column, default ``iops``.
    by : sequence of str
        Groups (one run x direction by default).

    Returns
    -------
    pandas.DataFrame
        ``by``, ``hosts``, ``jain_index``, ``cv`` (sample SD / mean; NaN for one host),
        ``min_max_ratio`` (slowest / fastest host).
    """
    by = list(by)
    _need(host_rows, [*by, metric], "host rows")
    rows = []
    for key, g in host_rows.groupby(by, observed=True, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        v = g[metric].to_numpy(dtype=float)
        mean = v.mean()
        rows.append({
            **dict(zip(by, key, strict=True)),
            "hosts": len(v),
            "jain_index": jain_index(v),
            "cv": float(v.std(ddof=1) / mean) if len(v) > 1 and mean > 0 else float("nan"),
            "min_max_ratio": float(v.min() / v.max()) if v.max() > 0 else float("nan"),
        })
    return pd.DataFrame(rows)


def scaling_summary(per_run: pd.DataFrame, *, x: str = "clients", metric: str = "iops",
                    by: Sequence[str] = ("pattern",), factors: Sequence[str] | None = None,
                    confidence: float = CONFIDENCE, min_gain: float = 0.0, geometric: bool = True) -> pd.DataFrame:
    """Geometric mean of ``metric`` per ``x`` level with its CI, and the gain over the previous level.

    The rows of one (group, ``x`` level) cell are its replicates: repetitions of the same runs. A factor
    that varies within a cell (the load generator that measured the same configuration, another
    pattern) is refused, never counted as replication: put it in ``by`` for one curve per level.

    Parameters
    ----------
    per_run : pandas.DataFrame
        One row per run (:func:`storagebench.runlevel.per_run`), with the ``x`` and ``by`` columns.
    x : str
        The load factor (client count).
    metric : str
        Column, > 0 (``iops``, ``bw_bytes_per_s``, ``lat_mean_ns``).
    by : sequence of str
        One curve per group (the access pattern; add the tool column when several tools measured).
    factors : sequence of str, optional
        Columns that are factors, never replicates: none may vary within a (group, ``x``) cell. Default:
        those of :data:`storagebench.stats.comparison.FACTOR_COLUMNS` present (the fio factors of the runs
        schema, ``tool``, and ``source_tool`` of the published seed tables).
    confidence : float
        Confidence level of the CIs.
    min_gain : float
        Smallest gain that counts, as a fraction (0.05 = 5 %): a step "adds" when the lower CI
        bound of the ratio exceeds ``1 + min_gain``.
    geometric : bool
        ``True`` (default): ``mean``, ``ci_low``, ``ci_high`` are the geometric mean with the Student t CI
        of the log values, back-transformed: the scale of the gain columns (a ratio of geometric means),
        and the point the figures draw (:func:`storagebench.stats.per_point`); an arithmetic t interval of
        a skewed positive metric (a p99 latency) can reach below 0 with few runs. ``False``: the
        arithmetic mean with its Student t CI. ``attrs["estimate"]`` of the result names which.

    Returns
    -------
    pandas.DataFrame
        Per group and level: ``by``, ``x``, ``n``, ``mean``, ``ci_low``, ``ci_high`` (Student t on the
        log values, or on the values with ``geometric=False``: :func:`storagebench.stats.mean_ci`), and versus the previous level ``gain_ratio``,
        ``gain_ci_low``, ``gain_ci_high`` (ratio of geometric means with the Welch CI on log values,
        :func:`storagebench.stats.compare`), ``gain_p`` (of the same test), ``adds`` (the step is shown to add
        more than ``min_gain``: its CI lies above ``1 + min_gain``) and ``flat`` (the step is shown to add at
        most ``min_gain``: its CI lies at or below ``1 + min_gain``); a step with neither shown is False in
        both ("not shown" either way, never "no gain"); both None when the step has no CI: fewer than 2
        runs on a side. The first level has NaN gain columns.

    Raises
    ------
    SchemaError
        A column is missing.
    StatsError
        A factor column (``factors``) varies within a (group, ``x``) cell, e.g. the DiskSPD and FIO rows of
        one VM count of seed 002: name it in ``by``.
    """
    by = list(by)
    _need(per_run, [*by, x, metric], "per_run")
    if factors is None:
        factors = [c for c in FACTOR_COLUMNS if c in per_run.columns]
    else:
        factors = [factors] if isinstance(factors, str) else list(factors)
        _need(per_run, factors, "per_run")
    checked = [c for c in factors if c not in (*by, x)]
    if checked:
        spread = per_run.groupby([*by, x], observed=True, sort=True, dropna=False)[checked].nunique(dropna=False)
        mixed = [c for c in checked if (spread[c] > 1).any()]
        if mixed:
            levels = "; ".join(f"{c} {sorted(map(str, per_run[c].dropna().unique()))}" for c in mixed)
            raise StatsError(
                f"the rows of one {x} level differ in {mixed} ({levels}): a factor, not a replicate (e.g. two "
                f"tools that measured the same configuration); put it in by={[*by, *mixed]} for one curve per "
                "level")
    rows = []
    groups = per_run.groupby(by, observed=True, sort=True) if by else [((), per_run)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        levels = sorted(g[x].unique())
        prev = None
        for lv in levels:
            vals = g.loc[g[x] == lv, metric].to_numpy(dtype=float)
            if geometric:
                if not (vals > 0).all():
                    raise StatsError(f"{metric} must be > 0 for a geometric mean, got {vals.min()!r} at {x}={lv}")
                est = mean_ci(np.log(vals), confidence)
                mean, lo, hi = (float(np.exp(v)) for v in (est.estimate, est.ci_low, est.ci_high))
            else:
                est = mean_ci(vals, confidence)
                mean, lo, hi = est.estimate, est.ci_low, est.ci_high
            row = {**dict(zip(by, key, strict=True)), x: lv, "n": len(vals), "mean": mean,
                   "ci_low": lo, "ci_high": hi, "gain_ratio": np.nan,
                   "gain_ci_low": np.nan, "gain_ci_high": np.nan, "gain_p": np.nan, "adds": None, "flat": None}
            if prev is not None:
                pair = g[g[x].isin([prev, lv])].drop(columns=[c for c in ("direction",) if c in g])
                c = compare(pair, x, prev, metric, confidence=confidence, adjust="holm").rows[0]
                row.update(gain_ratio=c.ratio, gain_ci_low=c.ci_low, gain_ci_high=c.ci_high, gain_p=c.p,
                           adds=bool(c.ci_low > 1.0 + min_gain) if np.isfinite(c.ci_low) else None,
                           flat=bool(c.ci_high <= 1.0 + min_gain) if np.isfinite(c.ci_high) else None)
            rows.append(row)
            prev = lv
    out = pd.DataFrame(rows)
    out.attrs["estimate"] = "geometric mean" if geometric else "mean"
    return out


def saturation_point(summary: pd.DataFrame, *, x: str = "clients", by: Sequence[str] = ("pattern",)) -> pd.DataFrame:
    """Where adding clients stops adding: the level reached by the last significant gain.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`scaling_summary` output.

    Returns
    -------
    pandas.DataFrame
        Per group: ``saturation_<x>`` -- the level reached by the *last* step shown to add (the first
        level when none is; the largest level when the last step still adds; NaN when no step has a CI),
        ``saturated`` -- True only when every later step is shown to add at most ``min_gain``
        (``summary``'s ``flat``: its CI at or below ``1 + min_gain``), False when the last step still
        adds (not saturated within the range), None when neither is shown (a later step's CI reaches
        both sides: "not shown" is not "no gain") or no step has a CI, ``mean_at_saturation``, ``knee_<x>`` (Kneedle on the means,
        :func:`storagebench.stats.saturation.find_knee`; NaN with fewer than 3 levels or no knee), and
        ``rule`` in words.
    """
    by = list(by)
    _need(summary, [*by, x, "mean", "adds", "flat"], "summary")
    rows = []
    groups = summary.groupby(by, observed=True, sort=True) if by else [((), summary)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(x).reset_index(drop=True)
        known = [i for i in range(1, len(g)) if g.loc[i, "adds"] is not None and not pd.isna(g.loc[i, "adds"])]
        adds = [i for i in known if g.loc[i, "adds"]]
        sat_i = adds[-1] if adds else 0
        later = [g.loc[i, "flat"] for i in range(sat_i + 1, len(g))]
        if not known:
            saturated = None
        elif sat_i == len(g) - 1:
            saturated = False  # the last step still adds
        else:  # saturated only when shown: every later step's CI at or below 1 + min_gain
            saturated = True if all(f is True or f is np.True_ for f in later) else None
        knee = np.nan
        if len(g) >= 3:
            try:
                knee = find_knee(g, x, "mean", curve="concave", direction="increasing").x
            except StatsError:
                knee = np.nan
        rule = ("level reached by the last step whose ratio CI lies above 1 + min_gain; saturated only when every "
                "later step's CI lies at or below 1 + min_gain, not shown when a later CI reaches both sides")
        rows.append({**dict(zip(by, key, strict=True)), f"saturation_{x}": g.loc[sat_i, x] if known else np.nan,
                     "saturated": saturated, "mean_at_saturation": g.loc[sat_i, "mean"] if known else np.nan,
                     f"knee_{x}": knee,
                     "rule": rule if known else "no step has a CI (one run per level): no saturation level; the "
                                                 "knee is a point estimate"})
    return pd.DataFrame(rows)


def _level_words(n, x: str) -> str:
    n = int(n) if float(n).is_integer() else n
    if x == "clients":
        return f"{n} client" + ("" if n == 1 else "s")
    return f"{x} {n}"


def scaling_findings(summary: pd.DataFrame, saturation: pd.DataFrame, *, fairness_runs: pd.DataFrame | None = None,
                     cluster: pd.DataFrame | None = None, overlap: pd.DataFrame | None = None, x: str = "clients",
                     by: Sequence[str] = ("pattern",), metric: str = "IOPS", confidence: float = CONFIDENCE,
                     min_gain: float = 0.0, title: str = "", provenance: str = ""):
    """What a scale-out study found, as sentences with their numbers (the write-up opens with them).

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`scaling_summary` of the cluster metric (one row per group and ``x`` level).
    saturation : pandas.DataFrame
        :func:`saturation_point` of ``summary``.
    fairness_runs : pandas.DataFrame, optional
        :func:`fairness` rows (one per run; runs with one host are left out here).
    cluster, overlap : pandas.DataFrame, optional
        :func:`cluster_aggregate` (with ``all_clients``) and :func:`client_overlap`: the soundness checks,
        one finding, a caveat when a run is flagged.
    x : str
        The load factor (``clients``).
    by : sequence of str
        The groups of ``summary`` (``pattern``): one finding each.
    metric : str
        The metric's name in the sentences, with its unit (``"IOPS"``).
    confidence : float
        Level of the CIs in ``summary`` (for the words only).
    min_gain : float
        The ``min_gain`` ``summary`` was computed with (fraction): "adds" means the ratio CI lies above it.
    title, provenance : str
        The question and the data's source, for :class:`storagebench.findings.Findings`.

    Returns
    -------
    storagebench.findings.Findings
        Per group: the metric at the lowest and highest level and at the saturation point, each with its
        Student t CI and n (runs per point), and the step past saturation with its ratio CI (Welch on log
        values, :func:`storagebench.stats.compare`); then fairness (Jain 1984) and the checks.

    Raises
    ------
    StatsError
        ``summary`` or ``saturation`` lack their columns.
    """
    by = list(by)
    _need(summary, [*by, x, "n", "mean", "ci_low", "ci_high", "gain_ratio", "gain_ci_low", "gain_ci_high", "adds"],
          "summary")
    _need(saturation, [*by, f"saturation_{x}", "saturated", f"knee_{x}"], "saturation")
    level = f"{confidence:.0%}"
    estimate_words = summary.attrs.get("estimate", "mean")
    estimate = ("Student t CI of the log values over runs (a geometric mean)" if estimate_words == "geometric mean"
                else "Student t CI of the mean over runs")
    out = []
    sat_rows = {tuple(r[c] for c in by): r for _, r in saturation.iterrows()}
    groups = summary.groupby(by, observed=True, sort=True) if by else [((), summary)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(x).reset_index(drop=True)
        sat = sat_rows.get(key)
        if sat is None:
            continue
        name = ", ".join(str(k) for k in key)
        first, last = g.iloc[0], g.iloc[-1]
        level_at = sat[f"saturation_{x}"]
        if pd.isna(level_at):  # one run per level: no step has a CI, so no saturation level is claimed
            sentence = (f"{name}: {fmt_number(first['mean'])} {metric} with {_level_words(first[x], x)}, "
                        f"{fmt_number(last['mean'])} {metric} with {_level_words(last[x], x)} (one run per level: "
                        "no CI, so no step is shown to add and no saturation level is claimed; repeat the runs).")
            out.append(Finding(sentence, estimate=float(last["mean"]), confidence=confidence, n=int(g["n"].min()),
                               unit_of_replication=f"fio runs per ({', '.join([*by, x])}) point", unit=metric,
                               method="one run per level: point values only", key=f"saturation:{name}"))
            continue
        at = g[g[x] == level_at].iloc[0]
        sentence = (f"{name}: {_val_words(first, metric, confidence)} with {_level_words(first[x], x)}, "
                    f"{_val_words(last, metric, confidence)} with {_level_words(last[x], x)}. ")
        sentence += _saturation_words(g, sat, x=x, min_gain=min_gain, metric=metric, confidence=confidence)
        knee = sat[f"knee_{x}"]
        if pd.notna(knee) and knee > first[x]:  # a "knee" at the first level is no bend of a rising curve
            sentence += f" Kneedle's knee of the {estimate_words} curve: {_level_words(knee, x)}."
        out.append(Finding(
            sentence, estimate=float(at["mean"]), ci=(at["ci_low"], at["ci_high"]), confidence=confidence,
            n=int(g["n"].min()), unit_of_replication=f"fio runs per ({', '.join([*by, x])}) point", unit=metric,
            method=(f"{estimate}; each step the ratio of geometric means with Welch's t on log "
                    f"values (stats.compare); a step adds when its {level} CI lies above {1 + min_gain:g}; Kneedle "
                    "(Satopää et al. 2011) for the knee"),
            key=f"saturation:{name}"))
    out += _fairness_findings(fairness_runs, metric) + _check_findings(cluster, overlap)
    return Findings(tuple(out), title=title, provenance=provenance)


def _val_words(r: pd.Series, metric: str, confidence: float) -> str:
    return f"{fmt_number(r['mean'])} {metric} ({fmt_ci(r['ci_low'], r['ci_high'], confidence)})"


def _step_words(r: pd.Series, confidence: float) -> str:
    return f"ratio {fmt_number(r['gain_ratio'])}, {fmt_ci(r['gain_ci_low'], r['gain_ci_high'], confidence)}"


def _saturation_words(g: pd.DataFrame, sat: pd.Series, *, x: str, min_gain: float, metric: str,
                      confidence: float) -> str:
    """The saturation sentence: "saturated" only when shown (every later step's CI at or below 1 + min_gain);
    a later step whose CI reaches both sides is "not shown" either way, with its point change, never "no gain"."""
    first, last = g.iloc[0], g.iloc[-1]
    at, saturated = g[g[x] == sat[f"saturation_{x}"]].iloc[0], sat["saturated"]
    gain = f"more than {min_gain:.0%}" if min_gain else "significantly more"

    def step(r) -> str:
        return _step_words(r, confidence)

    def val(r) -> str:
        return _val_words(r, metric, confidence)

    flat = f"at most {min_gain:.0%} more" if min_gain else "no more"
    if saturated is False:
        return (f"The last step, to {_level_words(last[x], x)}, still added {gain} ({step(last)}): not "
                f"saturated within the {len(g)} levels tested.")
    after = g[g[x] > at[x]]
    nxt = after.iloc[0]
    head = (f"No step after {_level_words(first[x], x)} was shown to add {gain}" if at[x] == first[x] else
            f"The last client count shown to add {gain} was {_level_words(at[x], x)}, at {val(at)}")
    if saturated:
        return (f"{head}, and each later step was shown to add {flat} (its CI at or below "
                f"{1 + min_gain:g}): saturated at {_level_words(at[x], x)} (the step to {_level_words(nxt[x], x)}: "
                f"{step(nxt)}).")
    unshown = [r for _, r in after.iterrows() if r["flat"] is not True and r["flat"] is not np.True_]
    nxt = unshown[0] if unshown else nxt
    change = f"{fmt_number(100 * (nxt['gain_ratio'] - 1), 2)}%"
    change = change if change.startswith("-") else "+" + change
    either = (f"neither a gain of more than {min_gain:.0%} nor one of at most {min_gain:.0%}" if min_gain
              else "neither a gain nor its absence")
    return (f"{head}; the step to {_level_words(nxt[x], x)} (point change {change}; {step(nxt)}) shows {either}: "
            "saturation is not shown (more runs per level would tell).")


def _fairness_findings(fairness_runs: pd.DataFrame | None, metric: str) -> list[Finding]:
    """Jain's fairness index over the runs with two or more clients (none without such runs)."""
    out = []
    if fairness_runs is not None and len(fairness_runs):
        multi = fairness_runs[fairness_runs["hosts"] > 1]
        if len(multi):
            j = multi["jain_index"]
            sentence = (f"With two or more clients, Jain's fairness index of the per-client {metric} was "
                        f"{fmt_number(j.median(), 4)} (median; from {fmt_number(j.min(), 4)} to {fmt_number(j.max(), 4)}; "
                        f"1 = every client got the same, 1/n = one took all), and the slowest client got at least "
                        f"{multi['min_max_ratio'].min():.0%} of the fastest one's {metric}.")
            out.append(Finding(sentence, estimate=float(j.median()), n=len(multi),
                               unit_of_replication="runs with two or more clients", unit="Jain's index",
                               method="Jain's index (sum x)^2 / (n sum x^2) of the per-host values of each run (Jain, "
                                      "Chiu & Hawe 1984, DEC-TR-301)", key="fairness"))
    return out


def _check_findings(cluster: pd.DataFrame | None, overlap: pd.DataFrame | None) -> list[Finding]:
    """The checks of a multi-client study: fio's "All clients" entry against the per-host sum, and the overlap
    of the clients' spans (a caveat when a run is flagged)."""
    out = []
    if cluster is not None and overlap is not None and len(cluster):
        multi_runs = overlap[overlap["hosts"] > 1]
        checked = cluster.dropna(subset=["iops_rel_diff"]) if "iops_rel_diff" in cluster else cluster.iloc[:0]
        worst = float(checked[["iops_rel_diff", "bw_rel_diff"]].abs().max().max()) if len(checked) else float("nan")
        mismatch = int(cluster["all_clients_mismatch"].sum()) if "all_clients_mismatch" in cluster else 0
        apart = int(multi_runs["not_concurrent"].sum())
        runs = int(cluster["run_id"].nunique())
        if len(checked):
            sentence = (f"Checks: in the {checked['run_id'].nunique()} multi-client runs the per-host sum matched fio's "
                        f"\"All clients\" entry to {fmt_number(100 * worst, 2)}% at worst ({mismatch} of {runs} runs "
                        f"flagged above {ALL_CLIENTS_TOLERANCE:.1%})")
        else:
            sentence = f"Checks: no multi-client run, so no \"All clients\" entry to check ({runs} runs)"
        if len(multi_runs):
            sentence += (f"; the clients overlapped for {multi_runs['overlap_fraction'].median():.0%} of the median "
                         f"host span (median over {len(multi_runs)} runs), {apart} run(s) flagged as not concurrent "
                         "(< 90%).")
        else:
            sentence += "."
        out.append(Finding(sentence, estimate=worst, n=runs, unit_of_replication="runs", unit="fraction",
                           method="the run-level cluster total (fio's sum_thread_stats rule) vs fio's All clients; "
                                  "span logs written with log_unix_epoch=1 for the overlap",
                           key="checks", caveat=bool(mismatch or apart)))
    return out

"""Per-point estimates of a sweep: geometric means over repetitions with log-scale CIs, merged-bin percentiles.

A *point* is one combination of factor levels (``numjobs`` x ``iodepth``); its repetitions are runs.
These are the numbers the figures draw and the tables and findings state; :mod:`storagebench.plots`
draws them and computes nothing of its own. :func:`per_point` gives them per point in the display units
of :data:`storagebench.tables.METRICS` (what the figures draw), :func:`point_table` as a table for a reader.

The estimand of a point is the **geometric mean** of its runs' values (IOPS, bandwidth, mean latency:
positive quantities whose run-to-run spread is multiplicative). Its CI is computed on the log scale,
``exp(mean(log x) ± t · s / sqrt(n))``, so it never reaches below 0. With ``method="pooled_log"`` ``s`` is
pooled over all points of the grid: the residual standard deviation of an OLS fit of ``log x`` on the point as a
categorical factor (one mean per point, :mod:`statsmodels`), with its residual degrees of freedom
``runs - points``. The assumption is equal log-scale variance, i.e. an equal coefficient of variation,
at every point, and pooling under it when it is false makes the CIs of the noisy points too narrow. No
check rescues it at the n of a sweep: behind Bartlett's test, pooling from 5 runs per point still covered
only 0.79 at a point with 3 times the others' SD (the test rejects 54% there), and behind Brown-Forsythe at
3 runs, 0.61 (with an odd number of runs one absolute deviation per point is exactly zero, so it never
rejects). So by default (``auto``) each point gets the log-scale t CI of its own runs (n - 1 df: wide at
2 runs, but it covers whatever the CVs), and the equal-spread check (Bartlett's test of the log values) is
reported beside it; ``method="pooled_log"`` pools by name. Simulation: ``benchmarks/bench_pooling.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats as st

from .._checks import need_columns, one_of
from .._histogram import merge_histograms, percentiles_from_bins
from ..errors import SchemaError, StatsError
from ..findings import CONFIDENCE, fmt_number, fmt_p, renamed_ci
from ..runlevel import is_run_totals
from ..runlevel import per_run as _runlevel_per_run
from ..schema import DIRECTIONS, RUN_TOTALS, RUNS, names
from ..tables import column_display, display_metric
from ._common import check_confidence
from .equivalence import mean_ci

#: CI methods of :func:`point_estimates`: ``auto`` (each point's own runs on the log scale, the spread checked and
#: reported but not pooled), ``pooled_log`` (the spread pooled over the points), ``log_t`` (own runs, log scale) and ``t`` (arithmetic mean with each point's Student t CI; needs n >= 3 per point).
POINT_METHODS = ("auto", "pooled_log", "log_t", "t")

#: Words of each method, for method texts.
_WORDS = {
    "pooled_log": "log scale, run-to-run SD pooled over the points",
    "log_t": "log scale, each point's own runs",
    "t": "arithmetic mean, Student t per point",
}


@dataclass(frozen=True)
class SpreadCheck:
    """How the CIs of one column were computed, and the check of the equal-spread assumption behind pooling.

    Attributes
    ----------
    column : str
        The value column.
    method : {"pooled_log", "log_t", "t"}
        The CI method used (``auto`` resolved).
    requested : str
        The method asked for (``auto`` or one of the above).
    confidence : float
    points : int
        Points with at least one finite value.
    runs : int
        Finite values used.
    df_resid : int
        Residual degrees of freedom of the pooled fit, ``runs - points`` (0: one run per point, no pooling).
    pooled_log_sd : float
        Residual SD of the OLS fit of the log values on the point (NaN without residual df). Roughly the CV.
    log_sd_min, log_sd_max : float
        Smallest and largest per-point SD of the log values (points with >= 2 runs).
    test : str
        ``"Bartlett"`` (Bartlett's test of equal variance of the log values over the points with >= 2 runs)
        or ``""`` (not checkable: fewer than two such points, or every point's runs agree exactly).
    statistic, p : float
        The test's statistic and p-value (NaN when not checked).
    alpha : float
        Level at which equal spread is rejected.
    rejected : bool
        ``p < alpha``.
    note : str
        Why a CI is missing, or what the fallback did.
    """

    column: str
    method: str
    requested: str
    confidence: float
    points: int
    runs: int
    df_resid: int
    pooled_log_sd: float
    log_sd_min: float
    log_sd_max: float
    test: str
    statistic: float
    p: float
    alpha: float
    rejected: bool
    note: str = ""

    @property
    def name(self) -> str:
        """The column in words (``IOPS``, ``mean latency``), from :func:`storagebench.tables.column_display`."""
        header = column_display(self.column)[0]
        header = header.rsplit(" (", 1)[0] if header.endswith(")") else header
        return header.split(", ")[0]  # "mean latency, lat" -> "mean latency"

    def check_text(self) -> str:
        """The spread check in words: ``"Bartlett test of equal spread of log iops: p = 0.31; per-point
        SD of log iops 0.010 to 0.20"``; ``""`` when nothing could be checked."""
        parts = []
        if self.test:
            parts.append(f"{self.test} test of equal spread of log {self.name} over {self.points} points: "
                         f"p = {fmt_p(self.p)}" + (" (rejected)" if self.rejected else ""))
        if np.isfinite(self.log_sd_min):
            parts.append(f"per-point SD of log {self.name} {fmt_number(self.log_sd_min, 2)} to "
                         f"{fmt_number(self.log_sd_max, 2)}")
        return "; ".join(parts)

    def short(self) -> str:
        """A few words for a legend or caption: ``"log scale, pooled over 12 points (24 df)"``."""
        if self.method == "pooled_log":
            return f"log scale, pooled over {self.points} points ({self.df_resid} df)"
        return _WORDS[self.method]

    def method_text(self) -> str:
        """The method in one sentence with its assumption, check and source (for a finding's method)."""
        pct = f"{self.confidence:.0%}"
        if self.method == "t":
            return (f"arithmetic mean over the runs of each point with its {pct} Student t CI (n - 1 df; "
                    "Student 1908)")
        head = (f"geometric mean over the runs of each point; {pct} CI exp(mean(log) ± t·s/√n) on the log scale, "
                "so it stays above 0")
        if self.method == "pooled_log":
            body = (f"s pooled over the {self.points} points (OLS of log {self.name} on the point as a "
                    f"categorical factor, statsmodels; {self.df_resid} residual df), assuming equal log-scale "
                    "variance (equal CV) at every point")
        else:
            body = "s and t from each point's own runs (n - 1 df)"
            if self.requested == "auto":
                body += (", not pooled over the points: pooling when the CV differs between points makes the noisy "
                         "points' CIs too narrow, and no check has the power to rule that out at a sweep's n")
        check = self.check_text()
        return f"{head}; {body}" + (f"; {check}" if check else "") + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class PointEstimates:
    """Result of :func:`point_estimates`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per point (see :func:`point_estimates`).
    by : tuple of str
        Factor columns of a point.
    columns : tuple of str
        Value columns estimated.
    confidence : float
    checks : dict
        Per value column its :class:`SpreadCheck` (method used, pooled df, the equal-spread test).
    """

    table: pd.DataFrame
    by: tuple[str, ...]
    columns: tuple[str, ...]
    confidence: float
    checks: dict[str, SpreadCheck] = field(default_factory=dict)

    def method_text(self, column: str) -> str:
        """:meth:`SpreadCheck.method_text` of ``column``."""
        return self.checks[column].method_text()


def _point_label(by: Sequence[str], key: tuple) -> str:
    return ", ".join(f"{c}={v.item() if isinstance(v, np.generic) else v}" for c, v in zip(by, key, strict=True))


def _refuse_non_positive(per_run: pd.DataFrame, by: Sequence[str], col: str, values: np.ndarray,
                         rows: pd.Index, bad: np.ndarray) -> None:
    if not bad.any():
        return
    where = []
    for i in np.flatnonzero(bad)[:5]:
        r = per_run.loc[rows[i]]
        who = f"run {r['run_id']}" if "run_id" in per_run.columns else f"row {rows[i]!r}"
        where.append(f"{who} ({_point_label(by, tuple(r[c] for c in by))}): {values[i]:g}")
    raise StatsError(f"{col} is <= 0 in {int(bad.sum())} run(s): {'; '.join(where)}. A geometric mean and a "
                     f"log-scale CI need values > 0: a run that completed no I/O measured nothing, so leave it out "
                     "(or rerun it); method='t' gives arithmetic means instead")


def _spread_test(groups: list[np.ndarray]) -> tuple[str, float, float]:
    """Bartlett's test of equal variance of the log values over the points with >= 2 runs (``""`` and NaN when
    fewer than two such points, or every one's runs agree exactly; a point whose runs agree while others vary
    rejects, p = 0)."""
    tested = [g for g in groups if g.size >= 2]
    if len(tested) < 2 or all(np.ptp(g) == 0 for g in tested):
        return "", math.nan, math.nan
    if any(np.ptp(g) == 0 for g in tested):  # a zero variance: log(0) in the statistic, equal spread is refuted
        return "Bartlett", math.inf, 0.0
    res = st.bartlett(*tested)
    return "Bartlett", float(res.statistic), float(res.pvalue)


def _pooled_log_ci(codes: np.ndarray, y: np.ndarray, k: int, confidence: float) -> tuple[np.ndarray, ...]:
    """OLS of ``y`` on the point as a categorical factor (cell means, no intercept): means, CI bounds, SD, df."""
    X = np.zeros((y.size, k))
    X[np.arange(y.size), codes] = 1.0
    fit = sm.OLS(y, X).fit()
    df = int(round(fit.df_resid))
    if fit.ssr <= 0:  # every point's runs agree exactly: zero-width CIs
        return fit.params, fit.params.copy(), fit.params.copy(), 0.0, df
    ci = fit.conf_int(alpha=1.0 - confidence)
    return fit.params, ci[:, 0], ci[:, 1], float(np.sqrt(fit.scale)), df


def _check_point_args(per_run: pd.DataFrame, needed: list[str], method: str, spread_alpha) -> None:
    """Refuse an unknown ``method``, a ``spread_alpha`` outside (0, 1), missing columns and an empty table."""
    if method not in POINT_METHODS:
        raise StatsError(f"method must be one of {list(POINT_METHODS)}, got {method!r}")
    if not (isinstance(spread_alpha, (int, float)) and 0 < spread_alpha < 1):
        raise StatsError(f"spread_alpha must be a level in (0, 1), got {spread_alpha!r}")
    missing = [c for c in needed if c not in per_run.columns]
    if missing:
        raise SchemaError(f"per_run has no column(s) {missing}; it has {sorted(map(str, per_run.columns))}")
    if per_run.empty:
        raise SchemaError("per_run has no rows")


def _own_log_t_cis(groups: list[np.ndarray], est: np.ndarray, bounds: tuple[np.ndarray, np.ndarray],
                   confidence: float) -> None:
    """Fill ``bounds`` (low, high; log scale) with each point's own t CI (points of >= 2 runs; runs that agree
    give a zero-width interval)."""
    lo, hi = bounds
    for i, g in enumerate(groups):
        if g.size >= 2 and np.ptp(g) == 0:
            lo[i] = hi[i] = est[i]
        elif g.size >= 2:
            ci = st.ttest_1samp(g, 0.0).confidence_interval(confidence)
            lo[i], hi[i] = ci.low, ci.high


def _geometric_means(est: np.ndarray, groups: list[np.ndarray], v: np.ndarray, codes: np.ndarray,
                     alone: dict[int, float]) -> np.ndarray:
    """``exp(est)``, except where a point's runs agree (the value itself, without exp(log()) noise) or its one
    value is <= 0 (``alone``: kept as it is)."""
    gm = np.exp(est)
    for i, g in enumerate(groups):  # one run, or runs that agree: the value itself, without exp(log()) noise
        if g.size and np.ptp(g) == 0:
            gm[i] = v[codes == i][0]
    for i, x in alone.items():
        gm[i] = x
    return gm


def point_estimates(per_run: pd.DataFrame, by: str | Sequence[str], columns: Sequence[str], *,
                    confidence: float = CONFIDENCE, method: str = "auto", spread_alpha: float = 0.05) -> PointEstimates:
    """Per point: the geometric mean of each column over its runs, with a log-scale CI (own runs, or pooled by name).

    Parameters
    ----------
    per_run : pandas.DataFrame
        One row per run (:func:`storagebench.stats.per_run`), with the ``by`` and ``columns`` columns and,
        for error messages, ``run_id``.
    by : str or sequence of str
        Factor columns that define a point, e.g. ``["numjobs", "iodepth"]``.
    columns : sequence of str
        Value columns (in their own unit: ``iops`` in 1/s, ``lat_mean_ns`` in ns ...); > 0 for the log
        methods. Non-finite values (NaN) are left out of their point.
    confidence : float
        Confidence level of the intervals (default :data:`~storagebench.findings.CONFIDENCE`).
    method : {"auto", "pooled_log", "log_t", "t"}
        ``pooled_log``: geometric mean, CI ``exp(mean(log x) ± t · s / sqrt(n))`` with ``s`` the residual SD
        of the OLS fit of ``log x`` on the point as a categorical factor (statsmodels), ``t`` on its
        residual df ``runs - points``; a point with one run gets a CI too when other points have
        repetitions. ``log_t``: the same with each point's own ``s`` and ``n - 1`` df. ``t``: arithmetic
        mean with each point's Student t CI (refused when a point has exactly two runs: t = 12.7 on 1 df,
        and the interval reaches below 0). ``auto`` (default): ``log_t``, with the spread check reported.
    spread_alpha : float
        Level at which the equal-spread test is reported as rejecting (default 0.05).

    Returns
    -------
    PointEstimates
        ``table``: one row per point, sorted by ``by``: the ``by`` columns, ``n`` (runs), and per column
        ``<col>`` (geometric mean; arithmetic mean with ``method="t"``), ``<col>_ci_low``,
        ``<col>_ci_high`` (NaN with a reason in the check's ``note`` when not estimable: one run and no
        pooling possible) and, for the log methods, ``<col>_log_sd`` (SD of the point's log values, NaN
        with one run). ``checks``: per column the :class:`SpreadCheck`.

    Raises
    ------
    SchemaError
        A ``by`` or value column is missing, or ``per_run`` has no rows.
    StatsError
        A value <= 0 with a log method (the message names the run and its point); bad ``confidence``,
        ``method`` or ``spread_alpha``; ``method="t"`` with a point of exactly two runs.

    Notes
    -----
    The pooled interval is the textbook one-way ANOVA (cell means) interval on the log scale; the
    equal-variance assumption is checked with Bartlett's test (Bartlett 1937, Proc. R. Soc. A 160:268;
    ``scipy.stats.bartlett``), normal theory, which is the model of the log values; ``auto`` does not pool
    (behind the old check, pooled CIs covered 0.61 to 0.87 at the noisy points at 3 runs,
    ``benchmarks/bench_pooling.py``); the per-point SDs of the log values are reported. Student (1908), Biometrika 6:1, for the t interval.
    """
    by = [by] if isinstance(by, str) else list(by)
    columns = list(columns)
    confidence = check_confidence(confidence)
    _check_point_args(per_run, [*by, *columns], method, spread_alpha)
    grouped = per_run.groupby(by, sort=True)  # rows with a missing factor value belong to no point
    keys = [k if isinstance(k, tuple) else (k,) for k in grouped.size().index]
    base = pd.DataFrame([dict(zip(by, k, strict=True)) for k in keys], columns=by)
    codes_all = grouped.ngroup().to_numpy(dtype=int)
    base["n"] = np.bincount(codes_all[codes_all >= 0], minlength=len(keys))
    checks: dict[str, SpreadCheck] = {}
    for col in columns:
        v_all = pd.to_numeric(per_run[col], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(v_all) & (codes_all >= 0)
        codes, v = codes_all[ok], v_all[ok]
        est, lo, hi, sd = (np.full(len(keys), np.nan) for _ in range(4))
        n_pt = np.bincount(codes, minlength=len(keys))
        if method == "t":
            if (n_pt == 2).any():
                k = keys[int(np.flatnonzero(n_pt == 2)[0])]
                raise StatsError(f"method='t' needs >= 3 runs per point; {_point_label(by, k)} has 2 (a t interval on "
                                 "1 df has t = 12.7 and reaches below 0): use method='pooled_log' or 'auto'")
            for i in range(len(keys)):
                x = v[codes == i]
                if x.size:
                    e = mean_ci(x, confidence)
                    est[i], lo[i], hi[i] = e.estimate, e.ci_low, e.ci_high
            pts_n = int((n_pt > 0).sum())
            checks[col] = SpreadCheck(col, "t", method, confidence, pts_n, int(v.size), int(v.size) - pts_n,
                                      math.nan, math.nan, math.nan, "", math.nan, math.nan, float(spread_alpha),
                                      False, "points with one run have no CI" if (n_pt == 1).any() else "")
            base[col], base[f"{col}_ci_low"], base[f"{col}_ci_high"] = est, lo, hi
            continue
        # a value <= 0 has no log: refused where it would enter one (a point with several runs); the only
        # value of its point (a published cell rounded to 0 ms) is kept as the point's estimate, without a CI
        nonpos = v <= 0
        _refuse_non_positive(per_run, by, col, v, per_run.index[ok], nonpos & (n_pt[codes] >= 2))
        alone = {int(c): float(x) for c, x in zip(codes[nonpos], v[nonpos], strict=True)}
        codes, v = codes[~nonpos], v[~nonpos]
        y = np.log(v)
        groups = [y[codes == i] for i in range(len(keys))]
        for i, g in enumerate(groups):
            if g.size:
                est[i] = g.mean()
            if g.size >= 2:
                sd[i] = g.std(ddof=1)
        present = np.bincount(codes, minlength=len(keys)) > 0  # points whose values enter the logs
        pts_n, df_resid = int((n_pt > 0).sum()), int(v.size - present.sum())
        test, stat, p = _spread_test(groups)
        rejected = bool(np.isfinite(p) and p < spread_alpha)
        use, note, pooled_sd = ("log_t" if method == "auto" else method), "", math.nan
        if use == "pooled_log":
            if df_resid == 0:
                note = "one run per point: no pooling possible (0 residual df), so no CI"
            else:
                idx = np.flatnonzero(present)
                remap = np.full(len(keys), -1)
                remap[idx] = np.arange(idx.size)
                m, a, b, pooled_sd, df_resid = _pooled_log_ci(remap[codes], y, idx.size, confidence)
                lo[idx], hi[idx] = a, b
        else:
            _own_log_t_cis(groups, est, (lo, hi), confidence)
            if (n_pt == 1).any():
                note = (note + "; " if note else "") + "points with one run have no CI (no pooling with this method)"
            if df_resid > 0 and use == "log_t":
                pooled_sd = float(np.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups if g.size) / df_resid))
        sds = sd[np.isfinite(sd)]
        checks[col] = SpreadCheck(col, use, method, confidence, pts_n, int(v.size), df_resid, pooled_sd,
                                  float(sds.min()) if sds.size else math.nan,
                                  float(sds.max()) if sds.size else math.nan, test, stat, p, float(spread_alpha),
                                  rejected, note)
        gm = _geometric_means(est, groups, v, codes, alone)
        if alone:
            note = (note + "; " if note else "") + (f"{len(alone)} point(s) with one run of {col} <= 0 keep that "
                                                    "value, without a CI")
        base[col], base[f"{col}_ci_low"], base[f"{col}_ci_high"] = gm, np.exp(lo), np.exp(hi)
        base[f"{col}_log_sd"] = sd
    return PointEstimates(base, tuple(by), tuple(columns), confidence, checks)


def point_means(per_run: pd.DataFrame, by: str | Sequence[str], columns: Sequence[str], *,
                confidence: float = CONFIDENCE, method: str = "auto", spread_alpha: float = 0.05) -> pd.DataFrame:
    """The table of :func:`point_estimates`: per point the geometric mean of each column and its log-scale CI.

    Parameters
    ----------
    per_run, by, columns, confidence, method, spread_alpha
        As in :func:`point_estimates`.

    Returns
    -------
    pandas.DataFrame
        :attr:`PointEstimates.table`; ``attrs["checks"]`` holds the per-column :class:`SpreadCheck`.

    Raises
    ------
    SchemaError, StatsError
        As :func:`point_estimates`.
    """
    res = point_estimates(per_run, by, columns, confidence=confidence, method=method, spread_alpha=spread_alpha)
    out = res.table
    out.attrs["checks"] = res.checks
    return out


def attach_factors(histograms: pd.DataFrame, runs: pd.DataFrame | None, by: Sequence[str],
                   direction: str | None = None) -> pd.DataFrame:
    """The rows of ``histograms`` with the factor columns ``by`` joined from ``runs`` on ``run_id``.

    Parameters
    ----------
    histograms : pandas.DataFrame
        Tidy ``histograms`` table (``run_id``, ``bin_ns`` in ns, ``count``, ``direction`` ...).
    runs : pandas.DataFrame or None
        Tidy ``runs`` table, needed when a ``by`` column is not in ``histograms``.
    by : sequence of str
        Factor columns wanted on every histogram row.
    direction : {"read", "write", "trim"} or None
        Keep only that direction's bins.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    SchemaError
        A column is missing, no row has ``direction``, or no ``run_id`` of ``histograms`` is in ``runs``.
    """
    for c in ("run_id", "bin_ns", "count"):
        if c not in histograms.columns:
            raise SchemaError(f"`histograms` has no column {c!r}; it has {sorted(map(str, histograms.columns))}.")
    h = histograms
    if direction is not None:
        one_of("direction", direction, list(DIRECTIONS))
        h = h[h["direction"] == direction]
        if h.empty:
            raise SchemaError(f"`histograms` has no rows with direction {direction!r}.")
    need = [c for c in by if c not in h.columns]
    if need:
        if runs is None:
            raise SchemaError(f"`histograms` has no column(s) {need}; pass `runs` to take them from there.")
        missing = [c for c in ["run_id", *need] if c not in runs.columns]
        if missing:
            raise SchemaError(f"`runs` has no column(s) {missing}; it has {sorted(map(str, runs.columns))}.")
        h = h.merge(runs[["run_id", *need]].drop_duplicates("run_id"), on="run_id", how="inner")
        if h.empty:
            raise SchemaError("no run_id of `histograms` is in `runs`.")
    return h


def point_percentiles(histograms: pd.DataFrame, runs: pd.DataFrame | None, by: str | Sequence[str],
                      percentiles: Sequence[float] = (50.0, 99.0), *, direction: str | None = None) -> pd.DataFrame:
    """Completion-latency percentiles per point from the merged json+ bins of all its runs.

    Parameters
    ----------
    histograms, runs, direction
        As in :func:`attach_factors`.
    by : str or sequence of str
        Factor columns that define a point.
    percentiles : sequence of float
        Percentiles in % (50, 99, 99.9).

    Returns
    -------
    pandas.DataFrame
        One row per point: the ``by`` columns and ``clat_p<p>_ns`` per percentile (ns; ``p99.9`` is
        written ``clat_p99.9_ns``).

    Notes
    -----
    Bins of every run, job and host of a point are added up (:func:`storagebench._histogram.merge_histograms`)
    and the percentile is read with fio's rule (:func:`storagebench._histogram.percentiles_from_bins`, fio
    ``stat.c``); percentiles of runs are never averaged.
    """
    by = [by] if isinstance(by, str) else list(by)
    h = attach_factors(histograms, runs, by, direction)
    rows = []
    for key, grp in h.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        merged = merge_histograms(grp, by=())
        res = percentiles_from_bins(merged["bin_ns"].to_numpy(), merged["count"].to_numpy(), list(percentiles))
        vals = {float(k): float(v) for k, v in res.items()}
        row = dict(zip(by, key, strict=True))
        for p in percentiles:
            row[f"clat_p{p:g}_ns"] = vals[float(p)]
        rows.append(row)
    return pd.DataFrame(rows)


def _per_run(runs: pd.DataFrame, *, direction: str | None = None) -> pd.DataFrame:
    """One row per completed, error-free run (one direction, or all): the run-level table.

    Parameters
    ----------
    runs : pandas.DataFrame
        The tidy ``runs`` table (:data:`storagebench.schema.RUNS`, plus study factor columns), or the
        run-level table (``tidy/run_totals.parquet``).
    direction : {"read", "write", "trim"} or None
        That direction only; ``None`` combines all directions (total IOPS of a mixed workload).

    Returns
    -------
    pandas.DataFrame
        :func:`storagebench.runlevel.per_run` with ``completed=True``: one row per ``run_id`` with fio's
        rule for combining jobs, hosts and directions (completed I/Os over the longest runtime, mean
        latencies weighted by completed I/Os, ``stat.c`` ``sum_thread_stats``) and every study factor.
        A run with any job in error (``error != 0``) or killed (``partial``) is left out whole, never
        averaged with its good jobs.

    Raises
    ------
    ValueError
        ``direction`` is not one of the allowed values.
    SchemaError
        ``runs`` lacks ``run_id``/``iops``, or no run is left after filtering.
    """
    need_columns(runs, ["run_id", "iops"], "runs")
    if direction is not None:
        one_of("direction", direction, list(DIRECTIONS))
        need_columns(runs, ["direction"], "runs")
        if not (runs["direction"] == direction).any():
            present = sorted(runs["direction"].unique())
            raise SchemaError(f"`runs` has no rows with direction {direction!r}; it has {present}.")
    pr = _runlevel_per_run(runs, direction=direction, completed=True)
    if pr.empty:
        raise SchemaError("`runs` has no rows of completed, error-free runs (error == 0, partial == False).")
    return pr


def _varies_within_run(runs: pd.DataFrame, cols: Sequence[str], direction: str | None) -> list[str]:
    """The ``cols`` of ``runs`` that take several values within one run (a randrw job's bs per direction)."""
    if is_run_totals(runs) or "run_id" not in runs.columns:
        return []
    df = runs if direction is None or "direction" not in runs.columns else runs[runs["direction"] == direction]
    cols = [c for c in cols if c in df.columns]
    if not cols or df.empty:
        return []
    n = df.groupby("run_id", observed=True, dropna=False)[cols].nunique(dropna=False).max()
    return [c for c in cols if n[c] > 1]


#: Factor columns that must be equal within a point (``target`` may differ: a resumed sweep can
#: use a new temp file on the same disk).
_GUARDED = tuple(n for n in names("runs", role="factor") if n != "target")
_SCHEMA_NAMES = frozenset(c.name for c in (*RUNS, *RUN_TOTALS))


def _check_not_mixed(pr: pd.DataFrame, by: Sequence[str]) -> None:
    extra = [c for c in pr.columns if c not in _SCHEMA_NAMES and c not in ("n_rows", "run_id", "outstanding_ios")
             and pr[c].nunique(dropna=True) <= 32]
    for col in [*_GUARDED, *extra]:
        if col in by or col not in pr.columns:
            continue
        per = pr.groupby(list(by), dropna=False)[col].nunique(dropna=True)
        if (per > 1).any():
            key = per[per > 1].index[0]
            key = key if isinstance(key, tuple) else (key,)
            sel = pr
            for c, v in zip(by, key, strict=True):
                sel = sel[sel[c] == v]
            values = sorted(map(str, sel[col].dropna().unique()))
            where = ", ".join(f"{c}={v}" for c, v in zip(by, key, strict=True))
            raise ValueError(
                f"The runs of one point ({where}) have different `{col}` values {values}: averaging them would mix "
                f"configurations. Filter the rows (e.g. runs[runs[{col!r}] == ...]) or add {col!r} to `by`/`hue`."
            )


@renamed_ci
def per_point(runs: pd.DataFrame, *, by: Sequence[str], metrics: Sequence[str] = ("iops",),
              direction: str | None = None, confidence: float = CONFIDENCE, method: str = "auto") -> pd.DataFrame:
    """Geometric mean and log-scale confidence interval of display metrics per study point.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    by : sequence of str
        Factor columns that define a point, e.g. ``["numjobs", "iodepth"]``.
    metrics : sequence of str
        Names from :data:`storagebench.tables.METRICS` (``"iops"``, ``"lat_mean_ms"``, ``"bw_MB_per_s"`` ...).
    direction : {"read", "write", "trim"} or None
        As in :func:`_per_run`.
    confidence : float
        Confidence level of the interval (:func:`point_means`). (``ci=``, its old name, still works with a
        FutureWarning.)
    method : str
        CI method of :func:`storagebench.stats.point_estimates` (default ``auto``: log scale, pooled over
        the points unless equal spread is rejected).

    Returns
    -------
    pandas.DataFrame
        One row per point: the ``by`` columns, ``n`` (runs), and per metric ``<metric>`` (geometric mean,
        display unit), ``<metric>_ci_low``, ``<metric>_ci_high`` (equal to the estimate where there is no
        CI). ``attrs["checks"]``: per metric the :class:`storagebench.stats.points.SpreadCheck` (method used).

    Raises
    ------
    ValueError
        Unknown metric or direction; or the runs of one point differ in another factor
        (e.g. two block sizes, two tools): averaging them would pass one configuration off
        as repetitions of another, so filter the rows or add that column to ``by``.
    SchemaError
        A column is missing.
    """
    by = [by] if isinstance(by, str) else list(by)
    specs = [display_metric(m) for m in metrics]
    pr = _per_run(runs, direction=direction)
    varies = _varies_within_run(runs, by, direction)
    if varies:
        raise ValueError(f"`{varies[0]}` differs between the rows of one run (e.g. its read and write rows), so a "
                         "run has no single value of it: pass `direction` or filter the rows.")
    need_columns(pr, by + [s.column for s in specs], "runs")
    _check_not_mixed(pr, by)
    scaled = pr[[*by, "run_id"]].copy() if "run_id" in pr.columns else pr[by].copy()  # errors name the run
    for name, spec in zip(metrics, specs, strict=True):
        scaled[name] = pr[spec.column].astype(float) * spec.scale
    pts = point_means(scaled, by, list(metrics), confidence=confidence, method=method)
    checks = pts.attrs.get("checks", {})
    pts = pts.drop(columns=[f"{m}_log_sd" for m in metrics if f"{m}_log_sd" in pts.columns])
    for name in metrics:  # a band of zero width where there is no interval (one run): drawn as the line
        for side in ("_ci_low", "_ci_high"):
            pts[name + side] = pts[name + side].fillna(pts[name])
    pts.attrs["checks"] = checks
    return pts


@renamed_ci
def point_table(runs: pd.DataFrame, histograms: pd.DataFrame | None = None, *,
                by: Sequence[str] = ("numjobs", "iodepth"), direction: str | None = None,
                confidence: float = CONFIDENCE) -> pd.DataFrame:
    """A display table per study point with the unit in every column header (:func:`per_point`).

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    histograms : pandas.DataFrame, optional
        Tidy ``histograms`` table; when given, p50/p99 completion latency of each point
        are computed from the merged json+ bins of all its runs (never by averaging
        percentiles), with :func:`point_percentiles`.
    by : sequence of str
        Factor columns that define a point.
    direction : {"read", "write", "trim"} or None
        As in :func:`_per_run`.
    confidence : float
        Confidence level of the IOPS interval. (``ci=``, its old name, still works with a FutureWarning.)

    Returns
    -------
    pandas.DataFrame
        Indexed by the ``by`` columns; columns ``runs``, ``IOPS (1/s)``, ``IOPS 95% CI (1/s)``,
        ``bandwidth (MB/s)``, ``mean lat (ms)``, and with histograms ``p50 clat (ms)``,
        ``p99 clat (ms)``.
    """
    by = [by] if isinstance(by, str) else list(by)
    pts = per_point(runs, by=by, metrics=("iops", "bw_MB_per_s", "lat_mean_ms"), direction=direction,
                    confidence=confidence)
    level = f"{confidence * 100:g}%"
    out = pts[by].copy()
    out["runs"] = pts["n"]
    out["IOPS (1/s)"] = pts["iops"].round(0)
    out[f"IOPS {level} CI (1/s)"] = [
        f"{lo:,.0f} – {hi:,.0f}" if hi > lo else "n/a"
        for lo, hi in zip(pts["iops_ci_low"], pts["iops_ci_high"], strict=True)
    ]
    out["bandwidth (MB/s)"] = pts["bw_MB_per_s"].round(2)
    out["mean lat (ms)"] = pts["lat_mean_ms"].round(4)
    if histograms is not None:
        pct = _display_percentiles(runs, histograms, by=by, percentiles=(50.0, 99.0), direction=direction)
        out = out.merge(pct, on=by, how="left")
    return out.set_index(by)


def _display_percentiles(runs, histograms, *, by, percentiles, direction) -> pd.DataFrame:
    """:func:`point_percentiles` with the headers of :func:`point_table`: ``p99 clat (ms)``, ms to 4 decimals."""
    pct = point_percentiles(histograms, runs, list(by), tuple(percentiles), direction=direction)
    return pct.rename(columns={f"clat_p{p:g}_ns": f"p{p:g} clat (ms)" for p in percentiles}).assign(
        **{f"p{p:g} clat (ms)": lambda d, p=p: (d[f"p{p:g} clat (ms)"] * 1e-6).round(4) for p in percentiles})

"""Load and saturation: Little's law (the check, its table and its sentence), the knee of a QD x numjobs sweep,
QoS-limited load, normalisation."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import StatsError
from ..findings import CONFIDENCE
from ._common import as_list, check_confidence, require_columns, require_positive_finite
from ._littles import littles_law, littles_law_summary, littles_law_table, per_run  # noqa: F401 (home here)
from .comparison import ComparisonTable
from .points import point_estimates, point_percentiles
from .ratio import check_estimand, ratio_ci

# --------------------------------------------------------------------------- knee


@dataclass(frozen=True)
class Knee:
    """A knee found by Kneedle.

    Attributes
    ----------
    x, y : float
        Knee coordinates: ``y`` is the observed value at ``x`` (NaN when no knee was found, or when Kneedle's
        maximum fell on the first or last ``x``: an edge of the grid is never reported as a knee).
    sensitivity : float
        Kneedle's S.
    curve, direction : str
    log_x : bool
        True when the knee was searched on ``log2(x)`` (geometric sweeps such as QD 1..128).
    method : str
        Kneedle's settings, and whether it ran on the isotonic fit of a curve that was not monotone.
    note : str
        Why there is no knee ("no knee found", "no knee inside the grid ...").
    """

    x: float
    y: float
    sensitivity: float
    curve: str
    direction: str
    log_x: bool
    method: str
    note: str = ""


def find_knee(df: pd.DataFrame, x: str, y: str, *, curve: str = "concave", direction: str = "increasing",
              log_x: bool = False, sensitivity: float = 1.0) -> Knee:
    """Knee of ``y`` versus ``x`` by the Kneedle algorithm (``kneed.KneeLocator``).

    Parameters
    ----------
    df : pandas.DataFrame
        One row per ``x`` value (aggregate replicates first, e.g. ``df.groupby(x, as_index=False)[y].mean()``).
    x, y : str
        Columns, e.g. ``"outstanding_ios"`` and ``"iops"``.
    curve : {"concave", "convex"}
        Throughput curves that flatten are concave; latency curves that shoot up are convex.
    direction : {"increasing", "decreasing"}
    log_x : bool
        Search on ``log2(x)``: right for geometric sweeps (QD 1, 2, 4 ... 128), where a linear x would put
        the knee wherever the points are densest.
    sensitivity : float
        Kneedle's S (default 1, the paper's recommendation for offline data).

    Returns
    -------
    Knee
        NaN coordinates with a note when Kneedle finds no knee, or when its knee is the first or last ``x``
        ("no knee inside the grid": an edge is where the sweep stopped, not where the curve bends).

    Raises
    ------
    StatsError
        Missing columns; fewer than 3 points; repeated or non-positive (with ``log_x``) x; NaN values;
        bad ``curve``/``direction``.

    Notes
    -----
    Satopää, V., Albrecht, J., Irwin, D. & Raghavan, B. (2011), "Finding a 'Kneedle' in a Haystack:
    Detecting Knee Points in System Behavior", 31st ICDCS Workshops, pp. 166-171. Kneedle assumes a
    monotone curve: it normalises ``y`` by its minimum and maximum, so a curve whose last point lies below
    its peak (a p99 that dips at the largest load) maps its end below 1 and the difference curve's maximum
    moves to the grid's edge (the project once recommended iodepth 32 at p99 0.9 ms where Kneedle on the
    rise gives 16 at 0.2 ms). So Kneedle runs only on the monotone part: the points up to the last one at the
    curve's extreme in ``direction``, with wiggles inside it replaced by their least-squares isotonic fit (pool
    adjacent violators; Barlow, Bartholomew, Bremner & Brunk 1972, ``scipy.optimize.isotonic_regression``);
    the method says when either was done.
    """
    require_columns(df, [x, y])
    if curve not in ("concave", "convex"):
        raise StatsError(f"curve must be one of ['concave', 'convex'], got {curve!r}")
    if direction not in ("increasing", "decreasing"):
        raise StatsError(f"direction must be one of ['increasing', 'decreasing'], got {direction!r}")
    d = df[[x, y]].apply(pd.to_numeric, errors="coerce")
    if d.isna().any().any():
        raise StatsError(f"columns {x!r}/{y!r} have NaN or non-numeric values")
    if len(d) < 3:
        raise StatsError(f"a knee needs at least 3 points, got {len(d)}")
    rep = d[x][d[x].duplicated()].unique().tolist()
    if rep:
        raise StatsError(f"x column {x!r} has repeated values {rep[:10]}; aggregate replicates first "
                         f"(e.g. df.groupby({x!r}, as_index=False)[{y!r}].mean())")
    d = d.sort_values(x)
    xs = d[x].to_numpy(float)
    if log_x:
        if (xs <= 0).any():
            raise StatsError(f"log_x needs x > 0, got {xs[xs <= 0].tolist()}")
        xs = np.log2(xs)
    yv = d[y].to_numpy(float)
    end, ys, fit = _monotone_part(yv, direction)
    method = (f"Kneedle (Satopää et al. 2011; kneed.KneeLocator S={sensitivity}, {curve}, {direction}"
              f"{', on log2(x)' if log_x else ''}{fit})")
    lab = [float(v) for v in d[x]]
    if end < 3:
        return Knee(math.nan, math.nan, sensitivity, curve, direction, log_x, method,
                    f"no knee inside the grid: {y} reaches its {'peak' if direction == 'increasing' else 'minimum'} "
                    f"at {x} = {lab[end - 1]:g}, the {'first' if end == 1 else 'second'} point, and turns back after it")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from kneed import KneeLocator  # kneed imports matplotlib.pyplot (~0.6 s)

        kl = KneeLocator(xs[:end], ys, S=sensitivity, curve=curve, direction=direction)
    if kl.knee is None:
        return Knee(math.nan, math.nan, sensitivity, curve, direction, log_x, method, "no knee found")
    i = int(np.argmin(np.abs(xs - kl.knee)))
    if i in (0, end - 1, len(xs) - 1):
        return Knee(math.nan, math.nan, sensitivity, curve, direction, log_x, method,
                    f"no knee inside the grid: Kneedle's maximum fell on {x} = {lab[i]:g}, "
                    f"{'the first point' if i == 0 else 'the last point of the monotone part'}: an edge, not a knee")
    return Knee(lab[i], float(yv[i]), sensitivity, curve, direction, log_x, method)


def _monotone_part(y: np.ndarray, direction: str) -> tuple[int, np.ndarray, str]:
    """The part of ``y`` Kneedle can read, as the paper assumes it: monotone in ``direction``.

    The curve is cut after the last point at its extreme (the maximum of an increasing curve, the minimum of a
    decreasing one; ties kept, so an exact plateau stays): points past it (a p99 that dips at the largest load, IOPS that fall past saturation) are not part
    of the rise whose knee is sought. Wiggles left inside that part are smoothed by the least-squares isotonic
    fit (pool adjacent violators; Barlow, Bartholomew, Bremner & Brunk 1972, ``scipy.optimize.isotonic_regression``).
    Returns the number of points kept, the values Kneedle gets and a phrase for the method ("" when ``y`` was
    monotone already)."""
    inc = direction == "increasing"
    end = len(y) - int(np.argmax(y[::-1]) if inc else np.argmin(y[::-1]))  # after the LAST point at the extreme:
    # a plateau of equal values (a throttled device's IOPS) is part of the monotone curve
    part = y[:end]
    words = []
    if end < len(y):
        words.append(f"only the monotone part, up to the curve's {'peak' if inc else 'minimum'} "
                     f"({end} of {len(y)} points)")
    steps = np.diff(part)
    if not ((steps >= 0).all() if inc else (steps <= 0).all()):
        from scipy.optimize import isotonic_regression

        part = isotonic_regression(part, increasing=inc).x
        words.append("its isotonic least-squares fit (PAVA, scipy.optimize.isotonic_regression)")
    return end, part, ("; on " + " and ".join(words)) if words else ""


@dataclass(frozen=True)
class Recommendation:
    """Test parameters chosen from a QD x numjobs sweep by :func:`recommend_parameters`.

    Attributes
    ----------
    numjobs, iodepth : int
        Recommended fio ``numjobs`` and ``iodepth``.
    outstanding_ios : float
        ``numjobs x iodepth``.
    metric, latency : str
        Column names used.
    value, latency_value : float
        Geometric-mean metric and mean latency (ns) of the recommended point over its runs.
    max_value : float
        Highest point estimate of the metric in the sweep (the peak).
    fraction : float
        Share of the best admissible point's metric the rule requires.
    knee : Knee
        Kneedle knee of the metric on the frontier (best point per outstanding-I/O count) versus
        ``log2(outstanding_ios)``.
    rule : str
        The rule in words.
    table : pandas.DataFrame
        Per point: ``numjobs, iodepth, outstanding_ios, n``, the metric and latency (geometric means)
        with their CIs (``<col>_ci_low``, ``<col>_ci_high``), with histograms ``clat_p<tail>_ns`` (ns,
        merged bins), ``share_of_max`` (of the peak), ``frontier`` (the best point of its
        outstanding-I/O count), ``within_tail_knee`` (not past the tail knee), ``qualifies``.
    latency_knee : Knee or None
        Kneedle knee of the mean latency on the frontier versus ``log2(outstanding_ios)`` (convex,
        increasing): where latency starts to climb.
    tail_knee : Knee or None
        The same for the tail percentile of the completion latency (``None`` without histograms).
    tail : str or None
        The tail column (``clat_p99_ns``), ``None`` without histograms.
    plateau : (int, int)
        ``(numjobs, iodepth)`` of the fewest outstanding I/Os reaching ``fraction`` of the peak, ignoring
        the tail: where the throughput plateau starts.
    method : str
        How the per-point estimates and their CIs were computed.
    """

    numjobs: int
    iodepth: int
    outstanding_ios: float
    metric: str
    latency: str
    value: float
    latency_value: float
    max_value: float
    fraction: float
    knee: Knee
    rule: str
    table: pd.DataFrame
    latency_knee: Knee | None = None
    tail_knee: Knee | None = None
    tail: str | None = None
    plateau: tuple[int, int] | None = None
    method: str = ""

    @property
    def at_grid_edge(self) -> bool:
        """True when the recommended cell has the sweep's largest ``outstanding_ios``: the metric was
        still rising at the highest load measured, so no saturation was seen and the grid should
        extend to more outstanding I/Os before this choice is trusted."""
        return bool(self.outstanding_ios >= self.table["outstanding_ios"].max())

    def knee_point(self, knee: Knee | None) -> pd.Series | None:
        """The frontier row of :attr:`table` at a knee's outstanding-I/O count (``None`` without a knee)."""
        if knee is None or not np.isfinite(knee.x):
            return None
        f = self.table[self.table["frontier"]]
        hit = f[np.isclose(f["outstanding_ios"].astype(float), knee.x, rtol=1e-9)]
        return hit.iloc[0] if len(hit) else None

    @property
    def knees(self) -> pd.DataFrame:
        """One row per knee: ``curve`` ("IOPS", "mean latency", "p99 completion latency"), the frontier
        point at it (``numjobs, iodepth, outstanding_ios``, the metric, latency and tail columns of
        :attr:`table`) and ``method`` (Kneedle, Satopää et al. 2011) or ``note`` (no knee found)."""
        names = {self.metric: "IOPS" if self.metric == "iops" else self.metric, self.latency: "mean latency"}
        if self.tail:
            names[self.tail] = f"p{self.tail[len('clat_p'):-len('_ns')]} completion latency"
        cols = ["numjobs", "iodepth", "outstanding_ios", self.metric, self.latency, *([self.tail] if self.tail else [])]
        rows = []
        for col, knee in ((self.metric, self.knee), (self.latency, self.latency_knee), (self.tail, self.tail_knee)):
            if knee is None or col is None:
                continue
            pt = self.knee_point(knee)
            row = {"curve": names[col]}
            row.update({c: (pt[c] if pt is not None else np.nan) for c in cols})
            row["method"] = knee.method
            row["note"] = knee.note
            rows.append(row)
        return pd.DataFrame(rows, columns=["curve", *cols, "method", "note"])


#: The plateau: the share of the best point's throughput at which a point counts as saturated (95% of the
#: best IOPS), the default ``fraction`` of :func:`recommend_parameters` and of everything built on it.
PLATEAU_FRACTION = 0.95
#: The fewest (numjobs, iodepth) cells :func:`sweep_summary` reads (its knees and frontier need three points).
MIN_SWEEP_CELLS = 3


def _frontier(cells: pd.DataFrame, metric: str, latency: str) -> pd.Series:
    order = cells.sort_values(["outstanding_ios", metric, latency], ascending=[True, False, True])
    first = order.drop_duplicates("outstanding_ios", keep="first").index
    return cells.index.isin(first)


def recommend_parameters(runs: pd.DataFrame, metric: str = "iops", latency: str = "lat_mean_ns", *,
                         fraction: float = PLATEAU_FRACTION, histograms: pd.DataFrame | None = None, tail: float = 99.0,
                         confidence: float = CONFIDENCE, method: str = "auto") -> Recommendation:
    """Pick ``numjobs`` and ``iodepth`` from a saturation sweep: the cheapest load on the plateau before the tail knee.

    The rule (one rule, stated in :attr:`Recommendation.rule`):

    1. Per point (``numjobs`` x ``iodepth``) the geometric mean of the metric and of the mean latency over
       its runs (:func:`storagebench.stats.point_estimates`), and with ``histograms`` the ``tail``
       percentile of the completion latency from the merged json+ bins of its runs.
    2. The *frontier*: per outstanding-I/O count (``numjobs x iodepth``) the point with the highest metric.
       Kneedle finds three knees on it against ``log2(outstanding I/Os)``: of the metric (where
       throughput flattens), of the mean latency and of the tail latency (where they start to climb).
    3. Admissible points: those with no more outstanding I/Os than the tail knee (every point without
       histograms, or when Kneedle finds no tail knee). Past the tail knee, more outstanding I/Os mostly
       buy queueing in the tail: p99 grows faster than IOPS.
    4. Recommended: among the admissible points, the fewest outstanding I/Os whose metric reaches
       ``fraction`` (95%) of the best admissible point; ties broken by the lowest mean latency.

    Without a tail knee this is the plain plateau rule (the fewest outstanding I/Os reaching 95% of the
    peak). That plateau start is reported too (:attr:`Recommendation.plateau`), so a reader sees what
    the last few percent of IOPS would cost in p99.

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs``-schema table (aggregated per run by :func:`per_run`) or a published table with one row
        per cell, with ``numjobs``, ``iodepth``, the metric and the latency column (> 0).
    metric : str
        Throughput column to saturate (``iops`` or ``bw_bytes_per_s``).
    latency : str
        Mean latency column in ns.
    fraction : float
        Share of the best admissible point that counts as saturated (default :data:`PLATEAU_FRACTION`).
    histograms : pandas.DataFrame, optional
        Tidy ``histograms`` table of the runs: gives the tail percentile per point and the tail knee.
    tail : float
        Tail percentile in % (default 99).
    confidence : float
        Level of the CIs in :attr:`Recommendation.table`.
    method : str
        CI method of :func:`storagebench.stats.point_estimates`.

    Returns
    -------
    Recommendation

    Raises
    ------
    StatsError
        Missing columns, NaN/<= 0 metric or latency, fewer than 3 cells or outstanding-I/O counts,
        ``fraction`` outside (0, 1].

    Notes
    -----
    Satopää, V., Albrecht, J., Irwin, D. & Raghavan, B. (2011), "Finding a 'Kneedle' in a Haystack:
    Detecting Knee Points in System Behavior", 31st ICDCS Workshops, pp. 166-171 (``kneed``). Little
    (1961) for the latency cost of extra outstanding I/Os.
    """
    if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise StatsError(f"fraction must be in (0, 1], got {fraction!r}")
    require_columns(runs, [metric, latency, "numjobs", "iodepth"], "runs")
    if metric not in ("iops", "bw_bytes_per_s"):
        raise StatsError(f"metric must be one of ['iops', 'bw_bytes_per_s'], got {metric!r}")
    if not (isinstance(tail, (int, float)) and 0 < tail < 100):
        raise StatsError(f"tail must be a percentile in (0, 100), got {tail!r}")
    pr = per_run(runs, latency=latency)
    require_positive_finite(pr[metric], metric)
    by = ["numjobs", "iodepth"]
    est = point_estimates(pr, by, [metric, latency], confidence=confidence, method=method)
    cells = est.table.drop(columns=[f"{metric}_log_sd", f"{latency}_log_sd"], errors="ignore")
    oio = pr.groupby(by, as_index=False)["outstanding_ios"].mean()
    cells = cells.merge(oio, on=by, how="left")
    cells.insert(2, "outstanding_ios", cells.pop("outstanding_ios"))
    if len(cells) < MIN_SWEEP_CELLS:
        raise StatsError(f"a sweep needs at least {MIN_SWEEP_CELLS} (numjobs, iodepth) cells, got {len(cells)}")
    tail_col = None
    if histograms is not None and len(histograms):
        tail_col = f"clat_p{tail:g}_ns"
        h = histograms[histograms["run_id"].isin(pr["run_id"])] if "run_id" in pr.columns else histograms
        pct = point_percentiles(h, runs, by, (float(tail),))
        cells = cells.merge(pct, on=by, how="left")
    best = float(cells[metric].max())
    cells["share_of_max"] = cells[metric] / best
    cells["frontier"] = _frontier(cells, metric, latency)
    front = cells[cells["frontier"]]
    knee = find_knee(front, "outstanding_ios", metric, log_x=True)
    latency_knee = find_knee(front, "outstanding_ios", latency, curve="convex", log_x=True)
    tail_knee = None
    if tail_col is not None:
        if front[tail_col].notna().all():
            tail_knee = find_knee(front, "outstanding_ios", tail_col, curve="convex", log_x=True)
        else:
            tail_knee = Knee(math.nan, math.nan, 1.0, "convex", "increasing", True, "Kneedle",
                             f"no knee: a frontier point has no p{tail:g} (no histogram bins)")
    bound = tail_knee.x if tail_knee is not None and np.isfinite(tail_knee.x) else math.inf
    cells["within_tail_knee"] = cells["outstanding_ios"] <= bound * (1 + 1e-9)
    best_within = float(cells.loc[cells["within_tail_knee"], metric].max())
    cells["qualifies"] = cells["within_tail_knee"] & (cells[metric] >= fraction * best_within)
    pick = cells[cells["qualifies"]].sort_values(["outstanding_ios", latency]).iloc[0]
    plateau = cells[cells[metric] >= fraction * best].sort_values(["outstanding_ios", latency]).iloc[0]
    pname = f"p{tail:g} completion latency"
    mname = "IOPS" if metric == "iops" else metric
    core = (f"the fewest outstanding I/Os (numjobs x iodepth) whose geometric-mean {mname} reaches {fraction:.0%} of "
            "the best {of}; ties broken by the lowest mean latency")
    if tail_col is None:
        rule = core.format(of=f"point ({best:,.6g}); no {pname} without histograms, so the tail is not used")
    elif not np.isfinite(bound):
        rule = (f"{pname} has no knee ({tail_knee.note}), so every point is admissible: "
                + core.format(of=f"point ({best:,.6g})"))
    else:
        rule = (f"among the points not past the knee of {pname} (Kneedle, Satopää et al. 2011, on the best point "
                f"per outstanding-I/O count against log2 outstanding I/Os: {bound:g} outstanding I/Os), "
                + core.format(of=f"of those ({best_within:,.6g})"))
    return Recommendation(numjobs=int(pick["numjobs"]), iodepth=int(pick["iodepth"]),
                          outstanding_ios=float(pick["outstanding_ios"]), metric=metric, latency=latency,
                          value=float(pick[metric]), latency_value=float(pick[latency]), max_value=best,
                          fraction=float(fraction), knee=knee, rule=rule,
                          table=cells.sort_values(by).reset_index(drop=True), latency_knee=latency_knee,
                          tail_knee=tail_knee, tail=tail_col,
                          plateau=(int(plateau["numjobs"]), int(plateau["iodepth"])),
                          method=est.method_text(metric))


# --------------------------------------------------------------------------- QoS


@dataclass(frozen=True)
class QosResult:
    """Highest load meeting a latency QoS limit (:func:`qos_max_load`).

    Attributes
    ----------
    load, latency : str
        Column names.
    limit : float
        QoS limit in the latency column's unit.
    max_load : object
        Highest load level before the first level whose mean latency exceeds the limit (None when even
        the lowest load fails).
    max_load_confident : object
        Same, but requiring the upper CI bound of the latency to meet the limit (None when not estimable or
        the lowest level fails).
    confidence : float
    table : pandas.DataFrame
        Per load level: ``load, n, mean, ci_low, ci_high, meets, meets_confident``.
    method : str
    note : str
    """

    load: str
    latency: str
    limit: float
    max_load: object
    max_load_confident: object
    confidence: float
    table: pd.DataFrame
    method: str
    note: str = ""


def qos_max_load(df: pd.DataFrame, load: str, latency: str, limit: float, *,
                 confidence: float = CONFIDENCE, method: str = "auto") -> QosResult:
    """The highest load level whose latency meets a QoS limit, with a log-scale CI over repetitions.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run (repetitions as separate rows), e.g. VMmark tiles or fio ``iodepth`` levels.
        Rows sharing a ``run_id`` within a level are refused: aggregate per run first (percentiles by
        merging histograms).
    load : str
        Ordered load column (``iodepth``, ``tiles``, ``clients`` ...).
    latency : str
        Latency column in ns, > 0: a mean (``lat_mean_ns``) or a percentile (``clat_p99_ns``).
    limit : float
        QoS limit in the same unit (ns), > 0.
    confidence : float
        Level of the CI of each level's latency.
    method : {"auto", "pooled_log", "log_t", "t"}
        CI method of :func:`storagebench.stats.point_estimates` with the load level as the point: by
        default the geometric mean with a log-scale CI from each level's own runs (``pooled_log`` pools the
        run-to-run SD over the levels, and then a level with one run gets a CI when others have repetitions).

    Returns
    -------
    QosResult
        ``table``: per level ``load, n, mean`` (the geometric mean of the runs' latencies, ns; arithmetic
        with ``method="t"``), ``ci_low, ci_high, meets, meets_confident``. ``max_load``: the level just
        before the first level (in load order) whose ``mean`` exceeds ``limit``; ``max_load_confident``:
        the same with the upper bound of the two-sided ``confidence`` CI, i.e. a one-sided
        ``1 - (1 - confidence) / 2`` upper confidence bound (97.5% at the default 95%): the defensible claim.
        When every level meets the limit the largest level is returned and ``note`` says it is the grid's
        edge, a lower bound, not the QoS-limited load.

    Raises
    ------
    StatsError
        Missing columns, NaN or <= 0 latency (the message names the row), non-positive limit, repeated
        ``run_id`` within a level, a bad ``method``.

    Notes
    -----
    A Student t interval of the arithmetic mean of two runs has 1 df (t = 12.7) and reaches below 0 ns;
    on the log scale it cannot (:func:`storagebench.stats.point_estimates`; Student 1908).
    """
    require_columns(df, [load, latency])
    confidence = check_confidence(confidence)
    if not (isinstance(limit, (int, float)) and limit > 0 and math.isfinite(limit)):
        raise StatsError(f"limit must be a positive number in the unit of {latency!r}, got {limit!r}")
    require_positive_finite(df[latency], latency)
    if df[load].isna().any():
        raise StatsError(f"load column {load!r} has missing values")
    if "run_id" in df.columns and df.duplicated([load, "run_id"]).any():
        raise StatsError(f"several rows share a run_id within one {load!r} level; aggregate per run first "
                         "(storagebench.runlevel merges histograms for percentiles)")
    est = point_estimates(df, load, [latency], confidence=confidence, method=method)
    t = est.table
    lo, hi = t[f"{latency}_ci_low"].astype(float), t[f"{latency}_ci_high"].astype(float)
    table = pd.DataFrame({"load": t[load], "n": t["n"].astype(int), "mean": t[latency].astype(float),
                          "ci_low": lo, "ci_high": hi})
    table["meets"] = table["mean"] <= limit
    table["meets_confident"] = np.isfinite(hi) & (hi <= limit)

    def _last_before_fail(col: str):
        last = None
        for lev, ok in zip(table["load"], table[col], strict=True):
            if not ok:
                break
            last = lev
        return last.item() if isinstance(last, np.generic) else last

    check = est.checks[latency]
    note = ""
    if not np.isfinite(hi).all():
        note = (f"levels without a CI ({check.note or 'one run'}): max_load_confident stops before them")
    notes = [note] if note else []
    for col, name in (("meets", "max_load"), ("meets_confident", "max_load_confident")):
        if len(table) and table[col].all():
            notes.append(f"every level meets the limit ({name}): the grid's largest load is an edge, not the QoS "
                         "limit; the load the limit allows is at least that, and the grid must extend to find it")
    note = "; ".join(notes)
    estimand = "mean" if check.method == "t" else "geometric mean"
    return QosResult(load=load, latency=latency, limit=float(limit), max_load=_last_before_fail("meets"),
                     max_load_confident=_last_before_fail("meets_confident"), confidence=confidence, table=table,
                     method=(f"highest load before the first level whose {estimand} latency over its runs exceeds "
                             f"the limit; confident: the upper bound of the two-sided {confidence:.0%} CI, a one-sided "
                             f"{1 - (1 - confidence) / 2:.1%} upper confidence bound, within the limit "
                             f"({check.method_text()})"),
                     note=note)


# --------------------------------------------------------------------------- normalisation


def normalize(df: pd.DataFrame, metric: str, baseline_query: str, *, by: str | Sequence[str] | None = None,
              confidence: float = CONFIDENCE, estimand: str = "geometric") -> pd.DataFrame:
    """Scores normalised to a baseline (VMmark style), each with its CI and "% improvement".

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run.
    metric : str
        Score column (> 0), e.g. ``iops``, ``bw_bytes_per_s`` or a benchmark score.
    baseline_query : str
        ``DataFrame.query`` expression selecting the baseline rows, e.g.
        ``"array == 'HDD' and tiles == 1"``. All selected rows form the baseline arm.
    by : str or list of str, optional
        Columns grouping the rows to normalise (e.g. ``["array", "tiles"]``); without it every row is its
        own group.
    confidence : float
        CI level.
    estimand : {"geometric", "arithmetic"}
        Ratio of geometric means with the Welch t CI on log values (default), or ratio of arithmetic means
        with Fieller's CI (:func:`storagebench.stats.ratio_ci`).

    Returns
    -------
    pandas.DataFrame
        One row per group: the ``by`` keys, ``n``, ``mean``, ``n_baseline``, ``baseline_mean`` (arithmetic
        means, metric's unit), ``normalized`` (the estimand: group / baseline), ``ci_low``, ``ci_high``,
        ``p`` (of normalized = 1, on the CI's scale), ``improvement_pct`` = (normalized - 1) x 100 with
        ``improvement_ci_low_pct``, ``improvement_ci_high_pct``, ``estimand`` and ``note``. The group whose
        rows ARE the baseline rows has ``normalized`` exactly 1 with no CI (a baseline is not compared with
        itself); every other CI is the two-sample CI of group vs baseline, so it carries the baseline's
        run-to-run uncertainty as well as the group's. A group sharing only some rows with the baseline
        gets no CI (its arms are not independent), and says so.

    Raises
    ------
    StatsError
        Bad query, a query selecting no rows, NaN or <= 0 metric, missing columns, unknown estimand.

    Notes
    -----
    :func:`storagebench.stats.ratio_ci` (Welch 1947 on log values; Fieller 1954 by name). A single baseline
    run (as in VMmark's published comparisons) gives the normalised score but no CI.
    """
    by_l = as_list(by)
    require_columns(df, [metric, *by_l])
    confidence = check_confidence(confidence)
    estimand = check_estimand(estimand)
    require_positive_finite(df[metric], metric)
    try:
        base = df.query(baseline_query)
    except Exception as exc:  # pandas raises many types for a bad expression
        raise StatsError(f"baseline_query {baseline_query!r} is not a valid DataFrame.query expression: {exc}") from exc
    if base.empty:
        raise StatsError(f"baseline_query {baseline_query!r} selects no rows")
    b = base[metric].to_numpy(float)
    base_idx = set(base.index)
    bm = float(b.mean())
    groups = df.groupby(by_l, sort=True) if by_l else ((i, df.loc[[i]]) for i in df.index)
    rows = []
    for key, grp in groups:
        x = grp[metric].to_numpy(float)
        rec = dict(zip(by_l, key if isinstance(key, tuple) else (key,), strict=True)) if by_l else {"row": key}
        if estimand == "geometric":
            ratio = float(np.exp(np.log(x).mean() - np.log(b).mean()))
        else:
            ratio = float(x.mean()) / bm
        lo = hi = p = math.nan
        shared = base_idx & set(grp.index)
        if shared == set(grp.index) == base_idx:
            ratio, note = 1.0, "baseline: 1 by definition, no CI"
        elif shared:
            note = (f"no CI: {len(shared)} of this group's rows are baseline rows too (the arms are not independent)")
        elif len(x) >= 2 and len(b) >= 2 and (x.var() > 0 or b.var() > 0):
            rc = ratio_ci(x, b, confidence, estimand=estimand)
            ratio, lo, hi, p, note = rc.ratio, rc.ci_low, rc.ci_high, rc.p, rc.note
        else:
            note = f"no CI: n={len(x)}, n_baseline={len(b)} (each needs >= 2 runs with spread)"
        rec.update(n=len(x), mean=float(x.mean()), n_baseline=len(b), baseline_mean=bm, normalized=ratio,
                   ci_low=lo, ci_high=hi, p=p, improvement_pct=(ratio - 1) * 100,
                   improvement_ci_low_pct=(lo - 1) * 100, improvement_ci_high_pct=(hi - 1) * 100,
                   estimand=estimand, note=note)
        rows.append(rec)
    return pd.DataFrame(rows)


def improvement_pct(table: ComparisonTable) -> pd.DataFrame:
    """"% improvement" of each level over the baseline from a :func:`compare` result.

    Returns
    -------
    pandas.DataFrame
        ``table.to_frame()`` plus ``improvement_pct = (ratio - 1) x 100`` and ``improvement_ci_low_pct``,
        ``improvement_ci_high_pct`` (the ratio CI minus 1, in %). For a latency metric a negative value is
        a reduction.
    """
    if not isinstance(table, ComparisonTable):
        raise StatsError(f"table must be a ComparisonTable (from compare), got {type(table).__name__}")
    f = table.to_frame()
    f["improvement_pct"] = (f["ratio"] - 1) * 100
    f["improvement_ci_low_pct"] = (f["ci_low"] - 1) * 100
    f["improvement_ci_high_pct"] = (f["ci_high"] - 1) * 100
    return f

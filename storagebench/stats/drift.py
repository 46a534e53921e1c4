"""Drift over the run order: :func:`drift_check`.

A sweep's runs are made one after the other; a device that slows down (garbage collection, a thermal
limit, a neighbour's load, a filling cache) shows as residuals that trend with the run order. The
randomised run order keeps such drift from being confounded with a factor, but it still widens every
CI, and a write-up should say whether it was there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st
from statsmodels.sandbox.stats.runs import runstest_1samp

from ..errors import StatsError
from ..findings import CONFIDENCE, fmt_number
from ._common import as_list, check_confidence, require_columns, require_positive_finite

_METHOD = ("OLS of log({metric}) on one mean per cell ({cells}) plus a common slope in {order}; the slope's t CI "
           "with {df} residual df, shown as % change from the first run to the last, exp(span x slope) - 1; and the Wald-Wolfowitz "
           "runs test of the signs of the residuals from the cell means (above/below their median) in {order} "
           "order, normal approximation with continuity correction (statsmodels runstest_1samp); the unit is the run"
           "{why}")
_UNIT_METHOD = ("the unit is the set-up ({unit}), because its runs share its effect and follow each other in {order}: "
                "per set-up the mean of its runs' log({metric}) residuals from the cell means ({cells}) and its mean "
                "{order}; OLS of these {units} set-up means on one mean per set-up cell ({between}) plus a common "
                "slope in mean {order}; the slope's t CI with {df} residual df, shown as % change from the first "
                "set-up to the last, exp(span x slope) - 1; and the Wald-Wolfowitz runs test of the signs of the "
                "set-up residuals in {order} order (statsmodels runstest_1samp)")


@dataclass(frozen=True)
class Drift:
    """Result of :func:`drift_check`.

    Attributes
    ----------
    metric, order : str
        The metric (> 0; analysed on the log scale) and the run-order column.
    cells : tuple of str
        Columns whose combinations have a mean of their own (the treatments); the drift is what is left.
    n : int
        Experimental units used: runs, or set-ups when ``unit`` is a set-up.
    df : int
        Residual degrees of freedom of the slope (``n`` - cells - 1; with set-ups, cells between set-ups).
    slope : float
        Change of ``log(metric)`` per unit of ``order``.
    pct_per_100 : float
        The slope as % change of the metric per 100 runs, ``(exp(100 x slope) - 1) x 100``.
    span : float
        Range of ``order`` covered (last - first).
    pct_over_span, ci_low_pct, ci_high_pct : float
        The slope as % change from the first run to the last, ``(exp(span x slope) - 1) x 100``, with its CI.
    p : float
        Two-sided t test of slope = 0.
    runs_z, runs_p : float
        Runs test of the residual signs in run order (NaN with fewer than 2 runs on either side).
    confidence : float
    drift : bool
        A trend: the slope's CI excludes 0 (``p < 1 - confidence``).
    clustered : bool
        The runs test finds the residual signs clustered in run order (``runs_p < 1 - confidence``):
        neighbouring runs are more alike than chance allows, trend or not.
    residuals : pandas.DataFrame
        ``order``, ``residual`` (log scale, from the cell means) and ``cell``, in run order (for a figure);
        with set-ups one row per set-up: its mean ``order``, mean residual and set-up cell.
    method : str
    unit : str
        ``"run"``, or the set-up column(s) joined by ``", "`` when the set-up is the unit.
    runs : int
        Runs behind the ``n`` units.
    """

    metric: str
    order: str
    cells: tuple[str, ...]
    n: int
    df: int
    slope: float
    pct_per_100: float
    span: float
    pct_over_span: float
    ci_low_pct: float
    ci_high_pct: float
    p: float
    runs_z: float
    runs_p: float
    confidence: float
    drift: bool
    residuals: pd.DataFrame
    method: str
    clustered: bool = False
    unit: str = "run"
    runs: int = 0

    @property
    def alpha(self) -> float:
        """``1 - confidence``."""
        return 1.0 - self.confidence

    def text(self, what: str | None = None) -> str:
        """One sentence: the slope with its CI, n, the runs test and the verdict."""
        conf = f"{self.confidence:.{max(0, -int(math.floor(math.log10(1 - self.confidence))) - 2)}%}"
        what = what or self.metric
        units = "runs" if self.unit == "run" else "set-ups"
        if not np.isfinite(self.slope):
            return (f"Drift check ({what} vs {self.order}): not estimable with {self.n} {units} in "
                    f"{self.n - self.df - 1 if self.df >= 0 else '?'} cells (no residual degrees of freedom).")
        one = "run" if self.unit == "run" else "set-up"
        if not np.isfinite(self.runs_p):
            runs = "runs test not estimable"
        elif self.clustered:
            runs = (f"runs test of the residual signs p = {self.runs_p:.2g}: they cluster in run order (neighbouring "
                    f"{units} are not independent)")
        else:
            runs = f"runs test of the {one} residual signs p = {self.runs_p:.2g}: no clustering shown"
            if self.unit != "run" and self.n < 10:
                runs += f" (with {self.n} set-ups it can hardly show any)"
        def pct(x: float) -> str:
            return ("+" if x > 0 else "") + fmt_number(x) + "%"

        word = "drift shown" if self.drift else "no drift shown"
        # per 100 runs only where the sweep spans that many: beyond the data it is an extrapolation, not a finding
        per_100 = f"; {pct(self.pct_per_100)} per 100 runs" if self.span >= 100 else ""
        n = f"n = {self.n} runs" if self.unit == "run" else f"n = {self.n} set-ups ({self.runs} runs)"
        means = "" if self.unit == "run" else ", on set-up means"
        return (f"Drift check ({what} against the run order, after each cell's mean{means}): "
                f"{pct(self.pct_over_span)} from the first {one} to the last ({conf} CI {pct(self.ci_low_pct)} to "
                f"{pct(self.ci_high_pct)}{per_100}), {n}, {self.df} residual df: {word}; {runs}; alpha = {self.alpha:g}.")


def _runs_test(x: np.ndarray) -> tuple[float, float]:
    above = x > np.median(x)
    if above.sum() < 2 or (~above).sum() < 2:
        return math.nan, math.nan
    z, p = runstest_1samp(x, cutoff="median", correction=True)
    return float(z), float(p)


def _slope_fit(y: np.ndarray, x: np.ndarray, codes: np.ndarray, confidence: float) -> tuple[float, ...]:
    """Common slope of ``y`` in ``x`` within the groups ``codes`` (ANCOVA): slope, lower, upper, p, df
    (NaN and the df when there is no residual df or no spread of ``x`` within groups)."""
    k = int(codes.max()) + 1
    resid = y - pd.Series(y).groupby(codes).transform("mean").to_numpy()
    xc = x - pd.Series(x).groupby(codes).transform("mean").to_numpy()
    dof = y.size - k - 1
    sxx = float((xc ** 2).sum())
    if dof < 1 or sxx <= 0:
        return math.nan, math.nan, math.nan, math.nan, dof
    slope = float((xc * resid).sum() / sxx)
    e = resid - slope * xc
    se = math.sqrt(float((e ** 2).sum()) / dof / sxx)
    t = st.t.ppf(0.5 + confidence / 2, dof)
    p = float(2 * st.t.sf(abs(slope / se), dof)) if se > 0 else (0.0 if slope else 1.0)
    return slope, slope - t * se, slope + t * se, p, dof


def _label(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
    return frame[cols].astype(str).agg("|".join, axis=1) if cols else pd.Series("all", index=frame.index)


def _by_unit(work: pd.DataFrame, y: np.ndarray, cells_l: list[str], unit_l: list[str], order: str) -> tuple:
    """Per set-up: mean residual of log y from the cell means, mean ``order``, and the set-up cell (the cell
    columns constant within every set-up); and the set-up cell columns."""
    cell_codes = pd.factorize(_label(work, cells_l))[0]
    frame = work[list(dict.fromkeys(unit_l + cells_l))].copy()
    frame["_r"] = y - pd.Series(y).groupby(cell_codes).transform("mean").to_numpy()
    frame["_x"] = work[order].to_numpy(float)
    frame["_u"] = _label(work, unit_l).to_numpy()
    between = [c for c in cells_l if (frame.groupby("_u")[c].nunique() <= 1).all()]
    g = frame.groupby("_u", sort=False)
    units = pd.DataFrame({"r": g["_r"].mean(), "x": g["_x"].mean()})
    units["cell"] = _label(g[between].first(), between) if between else "all"
    return units.sort_values("x", kind="stable"), between


def _setup_is_unit(work: pd.DataFrame, cells_l: list[str], unit_l: list[str]) -> bool:
    """The set-up is the unit when some cell holds runs of several set-ups (else each set-up's effect is
    absorbed by its cell's mean, or each run is its own set-up)."""
    if not unit_l:
        return False
    u = _label(work, unit_l)
    if u.nunique() == len(work):
        return False
    return bool(u.groupby(_label(work, cells_l).to_numpy()).nunique().max() > 1)


def _pct(b: float, over: float) -> float:
    return float(np.expm1(over * b) * 100)


def _unit_drift(work: pd.DataFrame, y: np.ndarray, args: tuple, confidence: float) -> Drift:
    """:func:`drift_check` on set-up means (``args``: metric, order, cells, unit columns)."""
    metric, order, cells_l, unit_l = args
    units, between = _by_unit(work, y, cells_l, unit_l, order)
    codes = pd.factorize(units["cell"])[0]
    x, r = units["x"].to_numpy(float), units["r"].to_numpy(float)
    slope, lo, hi, p, dof = _slope_fit(r, x, codes, confidence)
    resid = r - pd.Series(r).groupby(codes).transform("mean").to_numpy()
    runs_z, runs_p = _runs_test(resid)
    span = float(x.max() - x.min())
    method = _UNIT_METHOD.format(unit=", ".join(unit_l), order=order, metric=metric, cells=", ".join(cells_l) or
                                 "one cell", units=len(units), between=", ".join(between) or "one cell", df=dof)
    residuals = pd.DataFrame({order: x, "residual": resid, "cell": units["cell"].to_numpy()})
    return Drift(metric, order, tuple(cells_l), len(units), dof, slope, _pct(slope, 100), span, _pct(slope, span),
                 _pct(lo, span), _pct(hi, span), p, runs_z, runs_p, confidence, bool(p < 1 - confidence), residuals,
                 method, bool(runs_p < 1 - confidence), ", ".join(unit_l), len(work))


def drift_check(df: pd.DataFrame, metric: str, *, cells: str | Sequence[str], order: str = "run_order",
                confidence: float = CONFIDENCE, setup: str | Sequence[str] | None = None) -> Drift:
    """Do the runs drift with the run order? A common slope of ``log(metric)`` in ``order``, and a runs test,
    on the experimental unit: the run, or the set-up when runs share one.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run (e.g. per-run totals): ``metric`` (> 0), ``order``, the ``cells`` columns and, when
        given, the ``setup`` column(s).
    metric : str
        Metric column (IOPS in 1/s, latency in ns ...), analysed on the log scale.
    cells : str or list of str
        Columns whose combinations are the treatments (every factor of the study): each gets its own mean,
        so the slope is estimated within cells. The set-up is not a cell: set-ups built later in the sweep
        are part of what may drift.
    order : str
        Run-order column (``run_order``: 0-based position in the sweep).
    confidence : float
        Level of the slope's CI; the verdict is at ``alpha = 1 - confidence``.
    setup : str or list of str, optional
        Column(s) that name a set-up (``["setup", *setup factors]``). A set-up's runs follow each other and
        share its effect, so they are not independent: when some cell holds runs of several set-ups, the
        unit is the set-up, and the slope and the runs test are computed on one mean per set-up (its runs'
        mean residual from the cell means, at its mean ``order``), within the cells that are constant within
        set-ups. Without it, or when every run is its own set-up or every cell has one set-up, the unit is
        the run (the sweep's runs are independent given their cell).

    Returns
    -------
    Drift

    Raises
    ------
    StatsError
        Missing columns, values <= 0 or NaN, NaN in ``order``, ``cells`` or ``setup``, fewer than 3 runs, bad
        ``confidence``.

    Notes
    -----
    The slope is the within-cell regression of an analysis of covariance (Montgomery, *Design and Analysis
    of Experiments*, 8th ed., ch. 15) with ``order`` as the covariate, on the experimental unit (Hurlbert
    1984, Ecol. Monogr. 54:187, on pseudoreplication: with the runs of a set-up counted as independent,
    a sweep with no drift and a set-up SD equal to the run SD showed "drift" in 30% and "clustered" in 52%
    of simulated sweeps; on set-up means 5%, ``benchmarks/bench_drift.py``); the runs test is Wald &
    Wolfowitz (1940), Ann. Math. Stat. 11:147. Kalibera & Jones (2013, ISMM) recommend checking benchmark
    results for such dependence on the order of execution before treating runs as independent. With
    fewer residual degrees of freedom than 1 the result is NaN and says so.
    """
    cells_l = as_list(cells)
    unit_l = as_list(setup) if setup is not None else []
    confidence = check_confidence(confidence)
    require_columns(df, [metric, order, *cells_l, *unit_l])
    if len(df) < 3:
        raise StatsError(f"a drift check needs at least 3 runs, got {len(df)}")
    require_positive_finite(df[metric], metric)
    for col in [order, *cells_l, *unit_l]:
        if df[col].isna().any():
            raise StatsError(f"column {col!r} has {int(df[col].isna().sum())} missing value(s)")
    work = df.sort_values(order, kind="stable").reset_index(drop=True)
    y = np.log(work[metric].to_numpy(float))
    if _setup_is_unit(work, cells_l, unit_l):
        return _unit_drift(work, y, (metric, order, cells_l, unit_l), confidence)
    x = work[order].to_numpy(float)
    cell = _label(work, cells_l)
    codes, _ = pd.factorize(cell)
    resid0 = y - pd.Series(y).groupby(codes).transform("mean").to_numpy()  # from the cell means
    slope, lo, hi, p, dof = _slope_fit(y, x, codes, confidence)
    why = (" (each cell's runs come from one set-up, whose effect its mean absorbs)" if unit_l and
           _label(work, unit_l).nunique() < len(work) else "")
    method = _METHOD.format(metric=metric, cells=", ".join(cells_l) or "one cell", order=order, df=dof, why=why)
    runs_z, runs_p = _runs_test(resid0)
    residuals = pd.DataFrame({order: x, "residual": resid0, "cell": cell.to_numpy()})
    span = float(x.max() - x.min())
    drift = bool(np.isfinite(p) and p < 1 - confidence)
    return Drift(metric, order, tuple(cells_l), len(y), dof, slope, _pct(slope, 100), span, _pct(slope, span),
                 _pct(lo, span), _pct(hi, span), p, runs_z, runs_p, confidence, drift, residuals, method,
                 bool(runs_p < 1 - confidence), "run", len(y))

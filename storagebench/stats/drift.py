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
           "order, normal approximation with continuity correction (statsmodels runstest_1samp)")


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
        Runs used.
    df : int
        Residual degrees of freedom of the slope (``n`` - cells - 1).
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
        ``order``, ``residual`` (log scale, from the cell means) and ``cell``, in run order (for a figure).
    method : str
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

    @property
    def alpha(self) -> float:
        """``1 - confidence``."""
        return 1.0 - self.confidence

    def text(self, what: str | None = None) -> str:
        """One sentence: the slope with its CI, n, the runs test and the verdict."""
        conf = f"{self.confidence:.{max(0, -int(math.floor(math.log10(1 - self.confidence))) - 2)}%}"
        what = what or self.metric
        if not np.isfinite(self.slope):
            return (f"Drift check ({what} vs {self.order}): not estimable with {self.n} runs in "
                    f"{self.n - self.df - 1 if self.df >= 0 else '?'} cells (no residual degrees of freedom).")
        if not np.isfinite(self.runs_p):
            runs = "runs test not estimable"
        elif self.clustered:
            runs = (f"runs test of the residual signs p = {self.runs_p:.2g}: they cluster in run order (neighbouring "
                    "runs are not independent)")
        else:
            runs = f"runs test of the residual signs p = {self.runs_p:.2g}: no clustering shown"
        def pct(x: float) -> str:
            return ("+" if x > 0 else "") + fmt_number(x) + "%"

        word = "drift shown" if self.drift else "no drift shown"
        # per 100 runs only where the sweep spans that many: beyond the data it is an extrapolation, not a finding
        per_100 = f"; {pct(self.pct_per_100)} per 100 runs" if self.span >= 100 else ""
        return (f"Drift check ({what} against the run order, after each cell's mean): {pct(self.pct_over_span)} "
                f"from the first run to the last ({conf} CI {pct(self.ci_low_pct)} to {pct(self.ci_high_pct)}"
                f"{per_100}), n = {self.n} runs, {self.df} residual df: {word}; {runs}; alpha = {self.alpha:g}.")


def _runs_test(x: np.ndarray) -> tuple[float, float]:
    above = x > np.median(x)
    if above.sum() < 2 or (~above).sum() < 2:
        return math.nan, math.nan
    z, p = runstest_1samp(x, cutoff="median", correction=True)
    return float(z), float(p)


def drift_check(df: pd.DataFrame, metric: str, *, cells: str | Sequence[str], order: str = "run_order",
                confidence: float = CONFIDENCE) -> Drift:
    """Do the runs drift with the run order? A common slope of ``log(metric)`` in ``order``, and a runs test.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run (e.g. per-run totals): ``metric`` (> 0), ``order`` and the ``cells`` columns.
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

    Returns
    -------
    Drift

    Raises
    ------
    StatsError
        Missing columns, values <= 0 or NaN, NaN in ``order`` or ``cells``, fewer than 3 runs, bad
        ``confidence``.

    Notes
    -----
    The slope is the within-cell regression of an analysis of covariance (Montgomery, *Design and Analysis
    of Experiments*, 8th ed., ch. 15) with ``order`` as the covariate; the runs test is Wald & Wolfowitz
    (1940), Ann. Math. Stat. 11:147. Kalibera & Jones (2013, ISMM) recommend checking benchmark results
    for such dependence on the order of execution before treating runs as independent. With fewer residual
    degrees of freedom than 1 the result is NaN and says so.
    """
    cells_l = as_list(cells)
    confidence = check_confidence(confidence)
    require_columns(df, [metric, order, *cells_l])
    if len(df) < 3:
        raise StatsError(f"a drift check needs at least 3 runs, got {len(df)}")
    require_positive_finite(df[metric], metric)
    for col in [order, *cells_l]:
        if df[col].isna().any():
            raise StatsError(f"column {col!r} has {int(df[col].isna().sum())} missing value(s)")
    work = df.sort_values(order, kind="stable").reset_index(drop=True)
    y = np.log(work[metric].to_numpy(float))
    x = work[order].to_numpy(float)
    cell = (work[cells_l].astype(str).agg("|".join, axis=1) if cells_l else pd.Series("all", index=work.index))
    codes, _ = pd.factorize(cell)
    k = int(codes.max()) + 1
    n = len(y)
    resid0 = y - pd.Series(y).groupby(codes).transform("mean").to_numpy()  # from the cell means
    xc = x - pd.Series(x).groupby(codes).transform("mean").to_numpy()     # order, centred within cells
    dof = n - k - 1
    sxx = float((xc ** 2).sum())
    method = _METHOD.format(metric=metric, cells=", ".join(cells_l) or "one cell", order=order, df=dof)
    runs_z, runs_p = _runs_test(resid0)
    residuals = pd.DataFrame({order: x, "residual": resid0, "cell": cell.to_numpy()})
    span = float(x.max() - x.min())
    if dof < 1 or sxx <= 0:
        nan = math.nan
        return Drift(metric, order, tuple(cells_l), n, dof, nan, nan, span, nan, nan, nan, nan, runs_z, runs_p,
                     confidence, False, residuals, method, bool(runs_p < 1 - confidence))
    slope = float((xc * resid0).sum() / sxx)
    e = resid0 - slope * xc
    s2 = float((e ** 2).sum()) / dof
    se = math.sqrt(s2 / sxx)
    t = st.t.ppf(0.5 + confidence / 2, dof)
    p = float(2 * st.t.sf(abs(slope / se), dof)) if se > 0 else (0.0 if slope else 1.0)

    def pct(b: float, over: float) -> float:
        return float(np.expm1(over * b) * 100)

    return Drift(metric, order, tuple(cells_l), n, dof, slope, pct(slope, 100), span, pct(slope, span),
                 pct(slope - t * se, span), pct(slope + t * se, span), p, runs_z, runs_p, confidence,
                 bool(p < 1 - confidence), residuals, method, bool(runs_p < 1 - confidence))

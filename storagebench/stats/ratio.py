"""The ratio of two configurations, its CI and its p-value on ONE scale: the estimand of every comparison.

Vocabulary (used by :func:`storagebench.stats.compare`, :func:`storagebench.stats.saturation.normalize` and
:func:`storagebench.stats.verdict`):

*estimand*
    What a comparison row estimates. ``"geometric"`` (the default): the ratio of geometric means
    ``other / baseline``, ``exp(mean(log other) - mean(log baseline))``; for paired arms the geometric
    mean of the per-pair ratios. Its p-value, CI and TOST all come from one t statistic on the log
    scale (Welch on log values for independent arms, paired t on log ratios for paired arms), so the
    p-value is below ``alpha`` exactly when the ``1 - alpha`` CI excludes 1. ``"arithmetic"`` (only when
    asked for by name): the ratio of arithmetic means with Fieller's CI; its p-value is Fieller's test
    of ratio = 1 with the same t statistic and df as the CI, so the same agreement holds.
*experimental unit*
    What was independently repeated (a run, a set-up, a block of a sweep): one value per unit enters
    the test, and ``n`` counts units.
*family*
    The comparisons whose p-values are adjusted together (one :class:`ComparisonTable`).

Why the log scale: throughput and latency are positive and right-skewed, their run-to-run spread
grows with the level, and a ratio is the quantity a storage claim is about ("4 % faster"). On the log
scale the ratio becomes a difference, its CI is always positive and bounded, and lognormal
run-to-run noise gives nominal coverage and type-I error (benchmarks/bench_coverage.py). The
arithmetic-mean ratio with Fieller's interval is kept for comparisons with published "ratio of means"
numbers; its interval can be unbounded or reach below 0 with few runs (Franz 2007), and it is never
substituted silently.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as st
from scipy.special import gammaln
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from ..errors import StatsError
from ..findings import CONFIDENCE
from ._common import BCA_COVERAGE_NOTE, BCA_MIN_N

#: ``estimand=`` names accepted by :func:`ratio_ci` / :func:`~storagebench.stats.compare` and what they estimate.
ESTIMANDS: dict[str, str] = {
    "geometric": "ratio of geometric means (other / baseline)",
    "arithmetic": "ratio of arithmetic means (other / baseline)",
}


def check_estimand(estimand: str) -> str:
    """``estimand`` if it is a key of :data:`ESTIMANDS`, else :class:`StatsError` naming the allowed ones."""
    if estimand not in ESTIMANDS:
        raise StatsError(f"estimand must be one of {sorted(ESTIMANDS)}, got {estimand!r}")
    return estimand


# --------------------------------------------------------------------------- Fieller


def _fieller_set(xb: float, yb: float, vx: float, vy: float, cxy: float, t: float) -> tuple[float, float, str]:
    """Bounds of ``{rho : (xb - rho yb)^2 <= t^2 (vx - 2 rho cxy + rho^2 vy)}``; NaN with a note when unbounded."""
    a = yb * yb - t * t * vy
    b = -2.0 * (xb * yb - t * t * cxy)
    c = xb * xb - t * t * vx
    disc = b * b - 4.0 * a * c
    if a <= 0 or disc < 0:
        return math.nan, math.nan, "Fieller confidence set unbounded: baseline mean not distinguishable from 0"
    r = math.sqrt(disc)
    return (-b - r) / (2 * a), (-b + r) / (2 * a), ""


def _fieller_parts(x: np.ndarray, y: np.ndarray, paired: bool) -> tuple[float, float, float, float, float, float]:
    """``xb, yb, vx, vy, cxy, df`` of Fieller's statistic ``T(rho) = (xb - rho yb) / sqrt(vx - 2 rho cxy + rho^2 vy)``.

    Independent arms: ``vx = s_x^2/n_x``, ``vy = s_y^2/n_y``, ``cxy = 0`` and the Welch-Satterthwaite df
    evaluated at ``rho = xb/yb`` (as R ``mratios::ttestratio(var.equal = FALSE)``). Paired arms: the
    (co)variances of the pairs over ``n`` and ``df = n - 1`` (Fieller 1954, the correlated case).
    """
    xb, yb = float(np.mean(x)), float(np.mean(y))
    if paired:
        n = len(x)
        cov = np.cov(x, y, ddof=1)
        return xb, yb, float(cov[0, 0]) / n, float(cov[1, 1]) / n, float(cov[0, 1]) / n, float(n - 1)
    nx, ny = len(x), len(y)
    vx, vy = float(np.var(x, ddof=1)) / nx, float(np.var(y, ddof=1)) / ny
    rho = xb / yb
    den = vx**2 / (nx - 1) + (rho**2 * vy) ** 2 / (ny - 1)
    df = (vx + rho**2 * vy) ** 2 / den if den > 0 else float(nx + ny - 2)
    return xb, yb, vx, vy, 0.0, df


def fieller_ratio_ci(x: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float, str]:
    """Fieller CI of ``mean(x) / mean(y)`` for independent samples with unequal variances.

    The bounds are the ``rho`` solving ``(xbar - rho*ybar)^2 = t^2 (vx + rho^2 vy)`` with
    ``vx = s_x^2/n_x``, ``vy = s_y^2/n_y`` and ``t`` the Student quantile at the Welch-Satterthwaite df
    evaluated at ``rho = xbar/ybar`` (Fieller 1954, J. R. Stat. Soc. B 16:175; the unequal-variance form of
    R ``mratios::ttestratio(var.equal = FALSE)``).

    Returns
    -------
    (low, high, note)
        ``(nan, nan, note)`` when the confidence set is unbounded (the baseline mean is not significantly
        different from zero at this level). ``low`` can be < 0 when the numerator mean is not
        significantly different from zero. Only :func:`ratio_ci` with ``estimand="arithmetic"`` uses it;
        the default estimand is the ratio of geometric means.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xb, yb, vx, vy, cxy, df = _fieller_parts(x, y, paired=False)
    t = float(st.t.ppf(0.5 + confidence / 2, df))
    return _fieller_set(xb, yb, vx, vy, cxy, t)


# --------------------------------------------------------------------------- one row: ratio, CI, p


@dataclass(frozen=True)
class RatioCI:
    """A ratio ``other / baseline`` with its CI and the p-value of ratio = 1, all on one scale (:func:`ratio_ci`).

    Attributes
    ----------
    ratio, ci_low, ci_high : float
        The estimand and its CI (NaN when not estimable or, for Fieller, unbounded).
    p : float
        Two-sided p-value of ``ratio = 1`` from the same statistic and df as the CI: ``p < 1 - confidence``
        exactly when the CI excludes 1.
    df : float
        Degrees of freedom of the t statistic.
    confidence : float
    estimand : str
        ``"geometric"`` or ``"arithmetic"`` (:data:`ESTIMANDS`).
    paired : bool
    method : str
        What was done, in words, with its sources.
    note : str
        Why a value is NaN, or a caveat; empty when none.
    """

    ratio: float
    ci_low: float
    ci_high: float
    p: float
    df: float
    confidence: float
    estimand: str
    paired: bool
    method: str
    note: str = ""

    @property
    def geometric(self) -> bool:
        """True for the ratio of geometric means (the default estimand)."""
        return self.estimand == "geometric"


_GEO_INDEPENDENT = ("ratio of geometric means other/baseline; p and CI from one Welch t on log values "
                    "(Welch 1947; CI = exp(t CI of the difference of mean logs), so p < alpha exactly when the CI "
                    "excludes 1)")
_GEO_PAIRED = ("geometric mean of the per-pair ratios other/baseline; p and CI from one paired t-test on the log "
               "ratios (Student 1908; CI = exp(t CI of the mean log ratio), so p < alpha exactly when the CI excludes 1)")
_FIELLER_INDEPENDENT = ("ratio of arithmetic means other/baseline (asked for by name); CI by Fieller's theorem and p "
                        "from Fieller's test of ratio = 1, T = (mean(other) - mean(baseline)) / sqrt(v_o + v_b), both "
                        "with the Welch-Satterthwaite df at the estimate, so p < alpha exactly when the CI excludes 1 "
                        "(Fieller 1954; mratios::ttestratio)")
_FIELLER_PAIRED = ("ratio of arithmetic means other/baseline (asked for by name), paired; CI by Fieller's theorem for "
                   "correlated means and p from the paired t-test of the raw differences (Fieller's test of ratio "
                   "= 1), both on n - 1 df, so p < alpha exactly when the CI excludes 1 (Fieller 1954)")


#: The method words of :func:`ratio_ci` per (estimand, paired).
RATIO_METHODS: dict[tuple[str, bool], str] = {
    ("geometric", False): _GEO_INDEPENDENT,
    ("geometric", True): _GEO_PAIRED,
    ("arithmetic", False): _FIELLER_INDEPENDENT,
    ("arithmetic", True): _FIELLER_PAIRED,
}


def ratio_ci(x, y, confidence: float = CONFIDENCE, *, estimand: str = "geometric", paired: bool = False) -> RatioCI:
    """The ratio ``x / y`` (other / baseline) with its CI and the p-value of ratio = 1, on one scale.

    Parameters
    ----------
    x, y : array-like of float
        Other and baseline arm, values > 0, at least 2 each (with ``paired=True`` the i-th values belong
        together and the lengths are equal).
    confidence : float
        Confidence level in (0, 1).
    estimand : {"geometric", "arithmetic"}
        ``"geometric"`` (default): ratio of geometric means; Welch t on the log values (independent) or
        the paired t-test on log ratios (paired). ``"arithmetic"``: ratio of arithmetic means with
        Fieller's CI and Fieller's test of ratio = 1 (independent: Welch-Satterthwaite df at the
        estimate; paired: the correlated form on n - 1 df).
    paired : bool
        Paired arms.

    Returns
    -------
    RatioCI
        ``p < 1 - confidence`` exactly when ``[ci_low, ci_high]`` excludes 1. NaN p/CI with a note when
        both arms have no spread; NaN CI with a note when Fieller's set is unbounded (the p-value is
        still reported). A Fieller lower bound below 0 is reported as it is, with a note.

    Raises
    ------
    StatsError
        Unknown ``estimand``; fewer than 2 values in an arm; unequal lengths when paired; values <= 0 or
        not finite.

    Notes
    -----
    Welch, B. L. (1947), Biometrika 34:28. Student (1908), Biometrika 6:1. Fieller, E. C. (1954), J. R. Stat.
    Soc. B 16:175 (the set is bounded only when the denominator differs significantly from 0). Franz, V. H.
    (2007), "Ratios: a short guide to confidence limits and proper use", arXiv:0710.2024 (the log-ratio
    interval for positive quantities). Inverting the test that gives ``p`` gives the CI, which is why the
    two agree about 1 (Lehmann & Romano 2005, *Testing Statistical Hypotheses*, sec. 3.5).
    """
    check_estimand(estimand)
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.size < 2 or y.size < 2:
        raise StatsError(f"ratio_ci needs >= 2 values per arm, got {x.size} (other) and {y.size} (baseline)")
    if paired and x.size != y.size:
        raise StatsError(f"paired arms need equal lengths, got {x.size} (other) and {y.size} (baseline)")
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or (x <= 0).any() or (y <= 0).any():
        raise StatsError("ratio_ci needs finite values > 0 in both arms")
    if estimand == "geometric":
        lx, ly = np.log(x), np.log(y)
        if paired:
            d = lx - ly
            ratio = float(np.exp(d.mean()))
            if np.var(d) == 0:
                return RatioCI(ratio, math.nan, math.nan, math.nan, float(x.size - 1), confidence, estimand, True,
                               _GEO_PAIRED, "not estimable: every pair has the same log ratio (zero variance)")
            tt = st.ttest_1samp(d, 0.0)
            method = _GEO_PAIRED
        else:
            ratio = float(np.exp(lx.mean() - ly.mean()))
            if np.var(lx) == 0 and np.var(ly) == 0:
                return RatioCI(ratio, math.nan, math.nan, math.nan, float(x.size + y.size - 2), confidence, estimand,
                               False, _GEO_INDEPENDENT, "not estimable: zero variance in both arms (identical values)")
            tt = st.ttest_ind(lx, ly, equal_var=False)
            method = _GEO_INDEPENDENT
        ci = tt.confidence_interval(confidence)
        return RatioCI(ratio, float(np.exp(ci.low)), float(np.exp(ci.high)), float(tt.pvalue), float(tt.df),
                       confidence, estimand, paired, method)
    # arithmetic: Fieller's CI and Fieller's test on one statistic and df
    ratio = float(np.mean(x) / np.mean(y))
    method = _FIELLER_PAIRED if paired else _FIELLER_INDEPENDENT
    xb, yb, vx, vy, cxy, df = _fieller_parts(x, y, paired)
    v1 = vx - 2 * cxy + vy
    if not v1 > 0:
        return RatioCI(ratio, math.nan, math.nan, math.nan, df, confidence, estimand, paired, method,
                       "not estimable: no spread (zero variance), no Fieller test")
    tq = float(st.t.ppf(0.5 + confidence / 2, df))
    lo, hi, note = _fieller_set(xb, yb, vx, vy, cxy, tq)
    p = float(2 * st.t.sf(abs(xb - yb) / math.sqrt(v1), df))
    if np.isfinite(lo) and lo <= 0:
        note = (f"Fieller lower bound {lo:.3g} <= 0: the other arm's mean is not distinguishable from 0 at this level "
                "(the default geometric estimand has no such bound)")
    return RatioCI(ratio, lo, hi, p, df, confidence, estimand, paired, method, note)


def ratio_tost(x, y, bounds: tuple[float, float], alpha: float, *, estimand: str = "geometric",
               paired: bool = False) -> float:
    """TOST p-value that ``x / y`` lies inside ``bounds`` = ``(low, high)``, on the scale of the estimand.

    ``"geometric"``: Schuirmann's two one-sided t-tests on the log values with bounds ``log(low)``,
    ``log(high)`` (``statsmodels`` ``ttost_ind(usevar="unequal")`` / ``ttost_paired``), the same t and df
    as :func:`ratio_ci`. ``"arithmetic"``: the two one-sided Fieller tests ``T(low) > t`` and ``T(high) < -t``
    with the df of :func:`ratio_ci` (Hauschke, Kieser & Hothorn 1999, Biometrical J. 41:295; the
    unequal-variance form of Tamhane & Logan 2004, Biometrics 60:583). Either way equivalence at ``alpha``
    holds exactly when the ``1 - 2 alpha`` CI of :func:`ratio_ci` lies inside the bounds.

    Returns
    -------
    float
        The larger one-sided p-value (NaN when not estimable).
    """
    check_estimand(estimand)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    low, high = bounds
    if estimand == "geometric":
        lx, ly = np.log(x), np.log(y)
        if paired:
            return float(ttost_paired(lx, ly, math.log(low), math.log(high))[0])
        return float(ttost_ind(lx, ly, math.log(low), math.log(high), usevar="unequal")[0])
    xb, yb, vx, vy, cxy, df = _fieller_parts(x, y, paired)

    def t_at(rho: float) -> float:
        v = vx - 2 * rho * cxy + rho * rho * vy
        return (xb - rho * yb) / math.sqrt(v) if v > 0 else math.nan

    p_low = float(st.t.sf(t_at(low), df))  # H0: ratio <= low
    p_high = float(st.t.cdf(t_at(high), df))  # H0: ratio >= high
    return max(p_low, p_high)


# --------------------------------------------------------------------------- BCa


def _bca_stat(estimand: str, paired: bool):
    if estimand == "geometric":
        if paired:
            return lambda d, axis=-1: np.mean(d, axis=axis), 0.0
        return lambda a, b, axis=-1: np.mean(a, axis=axis) - np.mean(b, axis=axis), 0.0
    return lambda a, b, axis=-1: np.mean(a, axis=axis) / np.mean(b, axis=axis), 1.0


def ratio_bca(x, y, confidence: float, n_boot: int, rng, *, estimand: str = "geometric",
              paired: bool = False) -> tuple[float, float, float, str]:
    """BCa bootstrap CI of the estimand and the p-value of ratio = 1 obtained by inverting it.

    The statistic is the difference of mean logs (geometric, independent), the mean log ratio (geometric,
    paired) or the ratio of means (arithmetic; pairs resampled together when paired); the interval is
    ``scipy.stats.bootstrap(method="BCa")`` (Efron 1987, J. Am. Stat. Assoc. 82:171). ``p`` is ``1 - c*``
    with ``c*`` the smallest confidence level whose BCa interval (same resamples) contains the null value,
    found by bisection on the level (Efron & Tibshirani 1993, sec. 15.4: a test from a confidence
    interval); the bisection runs on the side fixed by the requested interval, so ``p < 1 - confidence``
    exactly when that interval excludes 1.

    Parameters
    ----------
    x, y : array-like
        Other and baseline arm (> 0), each with at least :data:`~storagebench.stats._common.BCA_MIN_N` values.
    confidence : float
    n_boot : int
        Resamples.
    rng : numpy.random.Generator
    estimand, paired
        As in :func:`ratio_ci`.

    Returns
    -------
    (ci_low, ci_high, p, note)
        On the ratio scale; NaN with a note when the bootstrap distribution is degenerate.

    Raises
    ------
    StatsError
        An arm with fewer than ``BCA_MIN_N`` values (BCa undercovers with few runs: 0.73-0.83 at n = 3 in
        benchmarks/bench_coverage.py --bca).

    Notes
    -----
    At n >= 10 BCa still undercovers somewhat (:data:`~storagebench.stats._common.BCA_COVERAGE_NOTE`); the
    note returned says so.
    """
    check_estimand(estimand)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if min(len(x), len(y)) < BCA_MIN_N:
        raise StatsError(f"BCa bootstrap needs >= {BCA_MIN_N} values per arm (or pairs), got {len(x)} and {len(y)}")
    stat, null = _bca_stat(estimand, paired)
    if estimand == "geometric":
        data = (np.log(x) - np.log(y),) if paired else (np.log(x), np.log(y))
        back = np.exp
    else:
        data = (x, y)
        back = float
    kw = dict(method="BCa", vectorized=True, paired=paired and estimand == "arithmetic")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = st.bootstrap(data, stat, n_resamples=int(n_boot), confidence_level=confidence, rng=rng, **kw)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            return math.nan, math.nan, math.nan, "BCa bootstrap CI not estimable (degenerate bootstrap distribution)"

        def contains(level: float) -> bool:
            r = st.bootstrap(data, stat, n_resamples=0, confidence_level=level, bootstrap_result=res, **kw)
            return bool(r.confidence_interval.low <= null <= r.confidence_interval.high)

        excluded = not (lo <= null <= hi)
        # bracket [a, b] of levels: contains(a) is False, contains(b) is True (intervals are nested in the level)
        a, b = (confidence, 1.0 - 0.5 / n_boot) if excluded else (1e-9, confidence)
        if excluded and not contains(b):
            p = 1.0 - b  # beyond every resample: p at the bootstrap's resolution
        elif not excluded and contains(a):
            p = 1.0
        else:
            for _ in range(40):
                mid = (a + b) / 2
                if contains(mid):
                    b = mid
                else:
                    a = mid
            p = 1.0 - b if not excluded else 1.0 - (a + b) / 2
    note = BCA_COVERAGE_NOTE
    msgs = [str(w.message).split("\n")[0] for w in caught]
    if msgs:
        note += "; bootstrap warning: " + msgs[0]
    return float(back(lo)), float(back(hi)), float(p), note


# --------------------------------------------------------------------------- effect size


def _hedges_j(df: float) -> float:
    """Hedges' exact small-sample correction ``J(df) = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2))`` (Hedges 1981)."""
    return float(math.exp(gammaln(df / 2) - 0.5 * math.log(df / 2) - gammaln((df - 1) / 2)))


def hedges_g(x, y, *, paired: bool = False) -> float:
    """Standardised difference ``mean(x) - mean(y)`` with Hedges' small-sample correction.

    Independent arms: Hedges' g, the difference over the pooled SD times ``J(df)`` with
    ``df = n_x + n_y - 2``. Paired arms: Hedges' g_z, the mean of the differences ``x_i - y_i`` over their
    SD (Cohen's d_z) times ``J(df)`` with ``df = n - 1`` (Lakens 2013, Front. Psychol. 4:863, eq. 6): the
    standardised effect the paired test sees, ``t = d_z sqrt(n)``. ``J`` is Hedges' exact correction
    ``Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2))`` (Hedges 1981, J. Educ. Stat. 6:107; Hedges & Olkin 1985,
    eq. 5.10 is its approximation ``1 - 3/(4 df - 1)``), as R ``effectsize::hedges_g`` (checked against it,
    paired and independent, in tests/test_stats_compare.py). :func:`~storagebench.stats.compare` passes log
    values for the default (geometric) estimand.

    Returns
    -------
    float
        NaN when there is no spread, fewer than 2 values per arm (3 pairs: J needs df >= 2) or unequal
        lengths when paired.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    nx, ny = len(x), len(y)
    if paired:
        if nx != ny or nx < 3:
            return math.nan
        d = x - y
        sd = float(np.std(d, ddof=1))
        if not sd > 0:
            return math.nan
        return float(np.mean(d) / sd * _hedges_j(nx - 1))
    if nx < 2 or ny < 2:
        return math.nan
    sp2 = ((nx - 1) * np.var(x, ddof=1) + (ny - 1) * np.var(y, ddof=1)) / (nx + ny - 2)
    if not sp2 > 0:
        return math.nan
    d = (np.mean(x) - np.mean(y)) / math.sqrt(sp2)
    return float(d * _hedges_j(nx + ny - 2))

"""Equivalence ("within 1%") and single-arm estimates: :func:`tost`, :func:`tost_sample_size`, :func:`mean_ci`."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from ..errors import StatsError
from ..findings import CONFIDENCE
from ._common import BCA_COVERAGE_NOTE, BCA_MIN_N, check_confidence, check_margin
from .variance import VarianceComponents


@dataclass(frozen=True)
class Estimate:
    """One estimate with its confidence interval.

    Attributes
    ----------
    estimate, ci_low, ci_high : float
        Point estimate and CI bounds, in the unit of the data.
    confidence : float
        Confidence level of the CI.
    n : int
        Observations the estimate is based on.
    method : str
        Method in words with its citation.
    note : str
        Why a value is NaN, or a caveat; empty when none.
    """

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    n: int
    method: str
    note: str = ""

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame with columns ``estimate, ci_low, ci_high, confidence, n, method, note``."""
        return pd.DataFrame([self.__dict__])


@dataclass(frozen=True)
class Equivalence:
    """Result of :func:`tost`: is ``other / baseline`` within the margin?

    Attributes
    ----------
    ratio : float
        Geometric mean ratio ``exp(mean(log other) - mean(log baseline))`` (independent), or geometric mean
        of the paired ratios.
    ci_low, ci_high : float
        ``1 - 2 alpha`` CI of the ratio (the interval that must lie inside the bounds, Schuirmann 1987).
    ci_level : float
        ``1 - 2 alpha``.
    low, high : float
        Equivalence bounds on the ratio (e.g. 0.99 and 1.01 for "within 1%").
    p : float
        TOST p-value (the larger of the two one-sided p-values).
    alpha : float
    equivalent : bool
        ``p < alpha``.
    n_baseline, n_other : int
    paired : bool
    method : str
    """

    ratio: float
    ci_low: float
    ci_high: float
    ci_level: float
    low: float
    high: float
    p: float
    alpha: float
    equivalent: bool
    n_baseline: int
    n_other: int
    paired: bool
    method: str

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame of the attributes."""
        return pd.DataFrame([self.__dict__])


def _positive_array(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise StatsError(f"{name} is empty")
    if not np.isfinite(a).all():
        raise StatsError(f"{name} has {int((~np.isfinite(a)).sum())} NaN/infinite value(s)")
    if (a <= 0).any():
        raise StatsError(f"{name} has value(s) <= 0 {a[a <= 0][:5].tolist()}; log ratios need values > 0")
    return a


def mean_ci(x, confidence: float = CONFIDENCE, *, n_boot: int | None = None, seed: int | None = 0) -> Estimate:
    """Mean of ``x`` with a Student t CI, or a BCa bootstrap CI when ``n_boot`` is given.

    Parameters
    ----------
    x : array-like of float
        Replicate values (e.g. IOPS of repeated runs), finite.
    confidence : float
        Confidence level (default :data:`~storagebench.findings.CONFIDENCE`).
    n_boot : int, optional
        Bootstrap resamples (>= 100): BCa interval (Efron 1987, J. Am. Stat. Assoc. 82:171;
        ``scipy.stats.bootstrap(method="BCa")``) instead of the t interval (Student 1908). Refused with
        fewer than 10 values: BCa undercovers there (benchmarks/bench_coverage.py).
    seed : int, optional
        Seed of the bootstrap generator.

    Returns
    -------
    Estimate

    Raises
    ------
    StatsError
        Empty input, NaN/inf values, bad ``confidence`` or ``n_boot``, ``n_boot`` with fewer than 10 values.
        One value gives a NaN CI with a note.
    """
    confidence = check_confidence(confidence)
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise StatsError("x is empty; mean_ci needs at least one value")
    if not np.isfinite(a).all():
        raise StatsError(f"x has {int((~np.isfinite(a)).sum())} NaN/infinite value(s)")
    m = float(a.mean())
    if n_boot is not None and (not isinstance(n_boot, (int, np.integer)) or n_boot < 100):
        raise StatsError(f"n_boot must be None (t interval) or an int >= 100, got {n_boot!r}")
    if n_boot and a.size < BCA_MIN_N:
        raise StatsError(f"n_boot: a BCa bootstrap CI needs >= {BCA_MIN_N} values, got {a.size}; below that it "
                         "undercovers (benchmarks/bench_coverage.py): leave n_boot=None for the t interval")
    if a.size < 2:
        return Estimate(m, math.nan, math.nan, confidence, 1, "mean", "not estimable: one value, no CI")
    if np.var(a) == 0:
        return Estimate(m, m, m, confidence, a.size, "mean", "all values identical: zero-width CI")
    if n_boot:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = st.bootstrap((a,), np.mean, n_resamples=int(n_boot), confidence_level=confidence, method="BCa",
                               rng=np.random.default_rng(seed))
        return Estimate(m, float(res.confidence_interval.low), float(res.confidence_interval.high), confidence,
                        a.size, f"mean with BCa bootstrap CI, {n_boot} resamples (Efron 1987; scipy.stats.bootstrap)",
                        BCA_COVERAGE_NOTE)
    ci = st.ttest_1samp(a, 0.0).confidence_interval(confidence)
    return Estimate(m, float(ci.low), float(ci.high), confidence, a.size, "mean with Student t CI (Student 1908)")


def _bounds(margin) -> tuple[float, float]:
    m = check_margin(margin)
    if m is None:
        raise StatsError("margin is required: a fraction such as 0.01 for 'within 1%', or bounds (low, high)")
    return m if isinstance(m, tuple) else (1.0 - m, 1.0 + m)


def tost(baseline, other, margin, *, paired: bool = False, alpha: float = 0.05) -> Equivalence:
    """Two one-sided tests (TOST) that ``other / baseline`` lies within the margin.

    Parameters
    ----------
    baseline, other : array-like of float
        Replicates of each configuration (> 0, e.g. IOPS per run). With ``paired=True`` the i-th
        values belong together (same VM count, same repetition slot ...).
    margin : float or (float, float)
        Fraction (0.01 for "within 1%": bounds 0.99 and 1.01 on the ratio) or ratio bounds ``(low, high)``.
    paired : bool
        Paired t on the log ratios (``ttost_paired``) instead of Welch (``ttost_ind(usevar="unequal")``).
    alpha : float
        Level of each one-sided test (default 0.05, i.e. a 90% CI inside the bounds).

    Returns
    -------
    Equivalence

    Raises
    ------
    StatsError
        Values <= 0 or NaN, fewer than 2 replicates per arm, unequal lengths when paired, bad margin/alpha.

    Notes
    -----
    Schuirmann (1987), J. Pharmacokinet. Biopharm. 15:657, on the log scale with bounds ``log(low)``,
    ``log(high)``, computed by ``statsmodels.stats.weightstats.ttost_ind`` / ``ttost_paired``.
    """
    if not 0 < alpha < 0.5:
        raise StatsError(f"alpha must be in (0, 0.5), got {alpha!r}")
    low, high = _bounds(margin)
    b, o = _positive_array(baseline, "baseline"), _positive_array(other, "other")
    if b.size < 2 or o.size < 2:
        raise StatsError(f"tost needs >= 2 replicates per arm, got n_baseline={b.size}, n_other={o.size}")
    lb, ub = math.log(low), math.log(high)
    lo_, lb_ = np.log(o), np.log(b)
    level = 1 - 2 * alpha
    if paired:
        if b.size != o.size:
            raise StatsError(f"paired tost needs equal lengths, got {b.size} baseline and {o.size} other values")
        d = lo_ - lb_
        p = float(ttost_paired(lo_, lb_, lb, ub)[0])
        ci = st.ttest_1samp(d, 0.0).confidence_interval(level)
        est = float(d.mean())
        method = ("TOST, paired t on log ratios (Schuirmann 1987; statsmodels ttost_paired), "
                  f"bounds log({low:g}), log({high:g})")
    else:
        p = float(ttost_ind(lo_, lb_, lb, ub, usevar="unequal")[0])
        ci = st.ttest_ind(lo_, lb_, equal_var=False).confidence_interval(level)
        est = float(lo_.mean() - lb_.mean())
        method = ("TOST, Welch t on log values (Schuirmann 1987; statsmodels ttost_ind usevar='unequal'), "
                  f"bounds log({low:g}), log({high:g})")
    return Equivalence(ratio=math.exp(est), ci_low=math.exp(ci.low), ci_high=math.exp(ci.high), ci_level=level,
                       low=low, high=high, p=p, alpha=alpha, equivalent=bool(p < alpha), n_baseline=b.size,
                       n_other=o.size, paired=paired, method=method)


def _cv_to_sigma(cv: float) -> float:
    # log-normal: CV = sqrt(exp(sigma^2) - 1)
    return math.sqrt(math.log1p(cv * cv))


def tost_power(n: int, cv: float, margin, ratio: float = 1.0, alpha: float = 0.05, *, paired: bool = False) -> float:
    """Power of the log-scale TOST with ``n`` runs per arm (or ``n`` pairs).

    Non-central t approximation (Owen 1965; PowerTOST ``method="nct"``; Chow, Shao & Wang 2008,
    *Sample Size Calculations in Clinical Research*, 2nd ed., sec. 3.2)::

        power = F_nct(-t_{1-alpha,df}; df, (d-ub)/se) - F_nct(t_{1-alpha,df}; df, (d-lb)/se)

    with ``d = log(ratio)``, ``sigma^2 = log(1 + cv^2)``, ``se = sigma*sqrt(2/n)`` and ``df = 2n-2``
    (independent arms of equal CV); paired: ``cv`` is the CV of the per-pair ratio, ``se = sigma/sqrt(n)``,
    ``df = n-1``. Clipped at 0.

    Parameters
    ----------
    n : int
        Runs per arm (independent) or pairs (paired), >= 2.
    cv : float
        Coefficient of variation of the metric between runs (e.g. 0.02 for 2%).
    margin, ratio, alpha
        As in :func:`tost_sample_size`.
    """
    low, high = _bounds(margin)
    lb, ub, d = math.log(low), math.log(high), math.log(ratio)
    s = _cv_to_sigma(cv)
    if paired:
        se, df = s / math.sqrt(n), n - 1
    else:
        se, df = s * math.sqrt(2.0 / n), 2 * n - 2
    tc = st.t.ppf(1 - alpha, df)
    pw = st.nct.cdf(-tc, df, (d - ub) / se) - st.nct.cdf(tc, df, (d - lb) / se)
    return float(max(pw, 0.0))


@dataclass(frozen=True)
class PlanningCV:
    """A run-to-run CV for planning: the pilot's point estimate and the upper confidence bound that is used.

    Attributes
    ----------
    cv : float
        Point estimate (fraction, 0.02 for 2%): ``sqrt(exp(s^2) - 1)`` of the log-scale SD ``s``.
    df : float
        Degrees of freedom of ``s^2`` (``math.inf`` for a CV known from a long history).
    confidence : float
        One-sided level of the upper bound (0.8 by default).
    cv_upper : float
        The CV at the upper bound ``s_U = s sqrt(df / chi2_{1-confidence, df})``; equals ``cv`` when
        ``df`` is infinite.
    source : str
        Where the estimate came from, in words.
    method : str
    """

    cv: float
    df: float
    confidence: float
    cv_upper: float
    source: str
    method: str

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame of the attributes."""
        return pd.DataFrame([self.__dict__])


#: One-sided level of the upper bound of a pilot's CV that sample sizes are planned at (Browne 1995: 80%):
#: a planning convention, not the level of the CIs (:data:`~storagebench.findings.CONFIDENCE`), so it stays
#: when that changes.
PLANNING_CONFIDENCE = 0.8

_UPPER_METHOD = ("one-sided {conf:.0%} upper confidence bound of the log-scale SD from the chi-square distribution, "
                 "s_U = s sqrt(df / chi2_(1-{conf:g}; df)) with df = {df:g} (Browne 1995, Stat. Med. 14:1933; "
                 "PowerTOST::CVCL), CV = sqrt(exp(s^2) - 1)")


def cv_upper_bound(cv: float, df: float, confidence: float = PLANNING_CONFIDENCE, *, source: str = "given") -> PlanningCV:
    """Upper confidence bound of a run-to-run CV estimated with ``df`` degrees of freedom.

    Parameters
    ----------
    cv : float
        Estimated CV (fraction), > 0.
    df : float
        Degrees of freedom of the variance estimate: ``n - 1`` for one arm of ``n`` runs, ``n_a + n_b - 2``
        pooled over two arms, ``n - 1`` for ``n`` pairs; ``math.inf`` for a CV known without error.
    confidence : float
        One-sided level of the bound (default 0.8, as recommended for sample-size planning by Browne 1995).
    source : str
        Words for the report.

    Returns
    -------
    PlanningCV

    Raises
    ------
    StatsError
        ``cv`` not > 0, ``df`` not > 0, ``confidence`` not in (0, 1).

    Notes
    -----
    On the log scale ``df s^2 / sigma^2 ~ chi2(df)``, so ``P(sigma <= s sqrt(df / chi2_{1-c; df})) = c``.
    Planning with the upper bound instead of ``s`` makes the planned power hold in a share ``c`` of
    pilots and raises the expected power of the procedure above the target (Browne, R. H. (1995), "On the
    use of a pilot sample for sample size determination", Stat. Med. 14:1933-1940; Kieser & Wassmer 1996,
    Biometrical J. 38:941). benchmarks/bench_planning.py simulates it.
    """
    if not (isinstance(cv, (int, float, np.floating)) and cv > 0 and math.isfinite(cv)):
        raise StatsError(f"cv must be a positive fraction such as 0.02 for 2%, got {cv!r}")
    if not (isinstance(df, (int, float, np.integer, np.floating)) and df > 0):
        raise StatsError(f"df must be the degrees of freedom of the CV estimate (> 0, math.inf if known), got {df!r}")
    confidence = check_confidence(confidence)
    s = _cv_to_sigma(float(cv))
    if math.isinf(df):
        s_u = s
        method = "CV known (df = inf): used as it is"
    else:
        s_u = s * math.sqrt(df / st.chi2.ppf(1 - confidence, df))
        method = _UPPER_METHOD.format(conf=confidence, df=df)
    return PlanningCV(cv=float(cv), df=float(df), confidence=confidence, cv_upper=math.sqrt(math.expm1(s_u * s_u)),
                      source=source, method=method)


def pilot_cv(pilot, *, confidence: float = PLANNING_CONFIDENCE) -> PlanningCV:
    """The planning CV of a pilot: pooled log-scale SD of its arms, or the top level of variance components.

    Parameters
    ----------
    pilot : array-like, sequence of array-like, VarianceComponents or sequence of them
        One arm of replicate values (> 0; ``df = n - 1``); several arms, e.g. ``[baseline, other]``
        (the log variance pooled over arms, ``df = sum(n_i - 1)``); for paired plans, the per-pair ratios
        as one arm; or :class:`~storagebench.stats.variance.VarianceComponents` of the pilot (one per arm), whose
        highest level is the experimental unit: its ``S^2`` (the variance of the unit means with the pilot's
        repetitions below, Kalibera & Jones 2013) over the squared grand mean gives the CV and
        ``df = r - 1`` with ``r`` the units measured (pooled over arms as ``log(1 + CV^2)``). The plan's
        ``n`` then counts units of that level, each repeated as in the pilot.
    confidence : float
        One-sided level of the upper bound (default 0.8).

    Returns
    -------
    PlanningCV

    Raises
    ------
    StatsError
        An arm with fewer than 2 values or values <= 0; no spread; a ``VarianceComponents`` with a
        non-positive mean.
    """
    vcs = [pilot] if isinstance(pilot, VarianceComponents) else (
        list(pilot) if isinstance(pilot, (list, tuple)) and pilot and all(isinstance(v, VarianceComponents)
                                                                          for v in pilot) else [])
    if vcs:
        log_ss, df = 0.0, 0
        for v in vcs:
            if not v.mean > 0:
                raise StatsError(f"the pilot's grand mean must be > 0 to give a CV, got {v.mean!r}")
            cv_v = math.sqrt(max(v.s2[0], 0.0)) / v.mean
            log_ss += (v.reps[0] - 1) * math.log1p(cv_v * cv_v)
            df += v.reps[0] - 1
        if not log_ss > 0:
            raise StatsError("the pilot's highest level shows no spread (S^2 = 0); no CV to plan with")
        v0 = vcs[0]
        return cv_upper_bound(math.sqrt(math.expm1(log_ss / df)), df, confidence, source=(
            f"variance_components of {v0.metric!r} ({len(vcs)} arm(s)): units of level {v0.levels[0]!r} "
            f"({'+'.join(str(v.reps[0]) for v in vcs)}), each {' x '.join(map(str, v0.reps[1:]))} "
            f"{'/'.join(v0.levels[1:])}; CV of the unit means, pooled on the log scale"))
    seqs = (list, tuple, np.ndarray, pd.Series)
    if isinstance(pilot, (list, tuple)) and pilot and all(isinstance(a, seqs) for a in pilot):
        arms = list(pilot)
    elif isinstance(pilot, np.ndarray) and pilot.ndim == 2:
        arms = list(pilot)
    else:
        arms = [pilot]
    logs, df = [], 0
    for i, arm in enumerate(arms):
        a = _positive_array(arm, f"pilot arm {i}")
        if a.size < 2:
            raise StatsError(f"pilot arm {i} has {a.size} value(s); each arm needs >= 2")
        logs.append(np.log(a))
        df += a.size - 1
    ss = sum(float(((la - la.mean()) ** 2).sum()) for la in logs)
    if not ss > 0:
        raise StatsError("the pilot shows no spread (all values equal within each arm); no CV to plan with")
    s = math.sqrt(ss / df)
    sizes = "+".join(str(len(la)) for la in logs)
    return cv_upper_bound(math.sqrt(math.expm1(s * s)), df, confidence,
                          source=f"pilot of {sizes} runs, log-scale SD pooled over {len(logs)} arm(s)")


@dataclass(frozen=True)
class SamplePlan:
    """Result of :func:`tost_plan`: how many runs per arm (or pairs) the TOST needs.

    Attributes
    ----------
    n : int
        Runs per arm (independent) or pairs (paired); units of the pilot's highest level when the CV
        came from ``variance_components``.
    power : float
        Power of the TOST at ``n`` with the planning CV (non-central t).
    cv : PlanningCV
        The pilot CV, its upper bound and how it was obtained; ``cv.cv_upper`` is what was planned with.
    low, high : float
        Equivalence bounds on the ratio.
    ratio, alpha, target_power : float
    paired : bool
    method : str
    """

    n: int
    power: float
    cv: PlanningCV
    low: float
    high: float
    ratio: float
    alpha: float
    target_power: float
    paired: bool
    method: str


def _planning_cv(cv, df, cv_confidence) -> PlanningCV:
    if isinstance(cv, PlanningCV):
        if df is not None:
            raise StatsError("df is part of the PlanningCV already; do not pass df with it")
        return cv
    if df is None:
        raise StatsError(
            "df is required with a numeric cv: the degrees of freedom of the CV estimate (runs - 1 per arm, pooled), "
            "so that the plan uses its upper confidence bound; pass df=math.inf only for a CV known without error, "
            "or pass cv=pilot_cv(pilot)")
    return cv_upper_bound(cv, df, cv_confidence)


def tost_plan(cv, margin, ratio: float = 1.0, alpha: float = 0.05, power: float = 0.8, *, df: float | None = None,
              cv_confidence: float = PLANNING_CONFIDENCE, paired: bool = False, n_max: int = 100_000) -> SamplePlan:
    """Smallest runs per arm (or pairs) for which the log-scale TOST reaches ``power`` at the CV's upper bound.

    Parameters
    ----------
    cv : float or PlanningCV
        Run-to-run coefficient of variation (0.02 for 2%) estimated with ``df`` degrees of freedom, or a
        :class:`PlanningCV` from :func:`pilot_cv` / :func:`cv_upper_bound`. For ``paired=True`` the CV of
        the per-pair ratio. The plan uses the one-sided ``cv_confidence`` upper confidence bound of the CV
        (chi-square bound of the log-scale SD, :func:`cv_upper_bound`), never the point estimate.
    margin : float or (float, float)
        Equivalence margin: fraction (0.01 for "within 1%") or ratio bounds ``(low, high)``.
    ratio : float
        True ratio assumed for the planning (1 = identical configurations); must lie inside the bounds.
    alpha : float
        Level of each one-sided test (0.05).
    power : float
        Target power (0.8).
    df : float, optional
        Degrees of freedom of a numeric ``cv`` (required with one; ``math.inf`` for a known CV).
    cv_confidence : float
        One-sided level of the CV's upper bound (0.8, Browne 1995).
    paired : bool
        Paired design (``n`` pairs) instead of two independent arms (``n`` runs each).
    n_max : int
        Give up above this many runs (raises).

    Returns
    -------
    SamplePlan

    Raises
    ------
    StatsError
        Non-positive ``cv``; a numeric ``cv`` without ``df``; ``ratio`` outside the bounds; ``alpha``/``power``
        outside their ranges; no ``n`` up to ``n_max`` reaches the power.

    Notes
    -----
    Power by the non-central t approximation of :func:`tost_power` (Chow, Shao & Wang 2008, sec. 3.2;
    Julious 2004, Stat. Med. 23:1921), searched upward from n = 2. With a known CV of 2% and a 1% margin a
    storage comparison needs about 70 runs per arm: "within 1%" is a strong claim.
    """
    if not 0 < alpha < 0.5:
        raise StatsError(f"alpha must be in (0, 0.5), got {alpha!r}")
    if not 0 < power < 1:
        raise StatsError(f"power must be in (0, 1), got {power!r}")
    pcv = _planning_cv(cv, df, cv_confidence)
    low, high = _bounds(margin)
    if not low < ratio < high:
        raise StatsError(f"ratio must lie inside the equivalence bounds ({low:g}, {high:g}), got {ratio!r}")
    c = pcv.cv_upper
    # doubling then bisection: power increases with n
    lo, hi = 2, 2
    while tost_power(hi, c, (low, high), ratio, alpha, paired=paired) < power:
        if hi >= n_max:
            raise StatsError(f"no n <= n_max={n_max} reaches power {power} at cv={c:.4g} (the upper bound of "
                             f"{pcv.cv:.4g}), margin={margin}")
        lo, hi = hi + 1, min(hi * 2, n_max)
    while lo < hi:
        mid = (lo + hi) // 2
        if tost_power(mid, c, (low, high), ratio, alpha, paired=paired) >= power:
            hi = mid
        else:
            lo = mid + 1
    design = "pairs" if paired else "runs per arm"
    return SamplePlan(n=int(hi), power=tost_power(hi, c, (low, high), ratio, alpha, paired=paired), cv=pcv, low=low,
                      high=high, ratio=float(ratio), alpha=float(alpha), target_power=float(power), paired=paired,
                      method=(f"smallest n ({design}) with TOST power >= {power:g} by the non-central t (Chow, Shao & "
                              f"Wang 2008, sec. 3.2) at CV {c:.4g}: {pcv.method}"))


def tost_sample_size(cv, margin, ratio: float = 1.0, alpha: float = 0.05, power: float = 0.8, *,
                     df: float | None = None, cv_confidence: float = PLANNING_CONFIDENCE, paired: bool = False,
                     n_max: int = 100_000) -> int:
    """Runs per arm (or pairs) the log-scale TOST needs: ``tost_plan(...).n`` (see :func:`tost_plan`).

    Parameters
    ----------
    cv, margin, ratio, alpha, power, df, cv_confidence, paired, n_max
        As in :func:`tost_plan`: a numeric ``cv`` needs its ``df``, and the plan uses the CV's one-sided
        ``cv_confidence`` upper confidence bound.

    Returns
    -------
    int

    Raises
    ------
    StatsError
        As :func:`tost_plan`.
    """
    return tost_plan(cv, margin, ratio, alpha, power, df=df, cv_confidence=cv_confidence, paired=paired,
                     n_max=n_max).n

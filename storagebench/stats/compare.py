"""Two-configuration comparisons with confidence intervals: :func:`compare`.

One row per (group, level): the level is compared with the baseline level of ``factor`` on
one metric. Independent arms use Welch's t-test and a Fieller (or BCa bootstrap) interval for
the ratio of means; paired arms (``pair_on``) use the paired t-test on log ratios.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats as st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from ..errors import StatsError
from ._common import (
    _as_list,
    _check_confidence,
    _check_margin,
    _key_tuple,
    _positive_finite,
    _require_columns,
)

__all__ = ["Comparison", "ComparisonTable", "RatioCI", "compare", "summary_table", "adjust_pvalues", "fieller_ratio_ci",
           "ratio_ci", "hedges_g", "ADJUST_METHODS"]

#: ``adjust=`` names accepted by :func:`compare` → ``statsmodels.stats.multitest.multipletests`` method.
ADJUST_METHODS: dict[str, str | None] = {
    "holm": "holm",
    "bonferroni": "bonferroni",
    "hommel": "hommel",
    "bh": "fdr_bh",
    "fdr_bh": "fdr_bh",
    "by": "fdr_by",
    "fdr_by": "fdr_by",
    "none": None,
}

_ADJUST_WORDS = {
    "holm": "Holm (1979) step-down",
    "bonferroni": "Bonferroni",
    "hommel": "Hommel (1988)",
    "fdr_bh": "Benjamini & Hochberg (1995) FDR",
    "fdr_by": "Benjamini & Yekutieli (2001) FDR",
    None: "no",
}

_METHOD_INDEPENDENT = (
    "independent arms: Welch t-test for the difference of means (Welch 1947); ratio of means with "
    "{ratio_ci}; Mann-Whitney U test as p_rank (Mann & Whitney 1947); Hedges' g (Hedges & Olkin 1985)"
)
_FIELLER = "Fieller CI, Welch-Satterthwaite df at the estimate (Fieller 1954)"
_GEOMETRIC = ("ratio of GEOMETRIC means with exp(Welch t CI of the difference of mean logs), because Fieller's "
              "interval was unbounded or reached below 0 (rule of ratio_ci; Fieller 1954, Franz 2007)")
_BCA = "BCa bootstrap CI, {n} resamples (Efron 1987; scipy.stats.bootstrap)"
_METHOD_PAIRED = (
    "paired arms on {keys}: paired t-test on log ratios, ratio = geometric mean ratio with CI = exp(t CI "
    "of the mean log ratio){boot}; Wilcoxon signed-rank test as p_rank (Wilcoxon 1945); Hedges' g "
    "(Hedges & Olkin 1985)"
)
_TOST = "; TOST on the log ratio, bounds log(1-m), log(1+m) (Schuirmann 1987)"

_RESERVED = {"level", "n_baseline", "n_other", "mean_baseline", "mean_other", "estimate", "ratio", "ci_low",
             "ci_high", "p", "p_adjusted", "method", "equivalent", "note"}


@dataclass(frozen=True)
class Comparison:
    """One level of a factor compared with the baseline level, within one group.

    Attributes
    ----------
    group : tuple of (str, object)
        The ``by`` column names and their values for this row (empty without ``by``).
    level, baseline : object
        The compared level and the baseline level of the factor.
    metric : str
        Column compared (unit as in the schema, e.g. ``iops`` in 1/s).
    paired : bool
        True when the arms were matched on ``pair_on`` keys.
    n_baseline, n_other : int
        Rows (independent) or matched pairs (paired) in each arm.
    mean_baseline, mean_other : float
        Arithmetic means of the metric in each arm (metric's unit).
    estimate, diff_ci_low, diff_ci_high : float
        ``mean_other - mean_baseline`` and its CI (Welch, or paired t on the raw differences).
    ratio, ci_low, ci_high : float
        Independent: ``mean_other / mean_baseline`` with a Fieller or BCa CI; where Fieller's interval is
        unbounded or reaches below 0, the ratio of geometric means with its log-scale Welch CI instead
        (:func:`ratio_ci`; ``method`` and ``note`` say so). Paired: geometric mean of ``other / baseline``
        with ``exp`` of the t CI of the mean log ratio.
    confidence : float
        Confidence level of the CIs (e.g. 0.95).
    p, p_adjusted : float
        Two-sided p of the t-test (Welch, or paired t on logs) and after the multiple-comparison adjustment.
    p_rank : float
        Rank test p: Mann-Whitney U (independent) or Wilcoxon signed-rank (paired).
    effect_size : float
        Hedges' g: difference of means over the pooled SD, small-sample corrected.
    margin, p_equivalence, equivalent : float or None, float, bool or None
        Equivalence margin (fraction), TOST p and whether ``p_equivalence < 1 - confidence``;
        ``equivalent`` is None when no margin was asked or TOST was not estimable.
    method : str
        The methods used, in words with citations.
    note : str
        Why a value is NaN ("not estimable: ..."), or other caveats; empty when none.
    """

    group: tuple[tuple[str, object], ...]
    level: object
    baseline: object
    metric: str
    paired: bool
    n_baseline: int
    n_other: int
    mean_baseline: float
    mean_other: float
    estimate: float
    diff_ci_low: float
    diff_ci_high: float
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    p: float
    p_adjusted: float
    p_rank: float
    effect_size: float
    margin: float | tuple[float, float] | None
    p_equivalence: float
    equivalent: bool | None
    method: str
    note: str = ""

    @property
    def estimable(self) -> bool:
        """True when the t-test p-value could be computed."""
        return bool(np.isfinite(self.p))


_FRAME_FIRST = ["level", "n_baseline", "n_other", "mean_baseline", "mean_other", "estimate", "ratio", "ci_low",
                "ci_high", "p", "p_adjusted", "method", "equivalent", "note"]
_FRAME_EXTRA = ["baseline", "metric", "paired", "confidence", "diff_ci_low", "diff_ci_high", "p_rank",
                "effect_size", "margin", "p_equivalence"]


@dataclass(frozen=True)
class ComparisonTable:
    """Result of :func:`compare`: the rows plus what was compared and how.

    Use :meth:`to_frame` for a DataFrame (columns: the ``by`` keys, ``level, n_baseline, n_other,
    mean_baseline, mean_other, estimate, ratio, ci_low, ci_high, p, p_adjusted, method, equivalent, note``,
    then ``baseline, metric, paired, confidence, diff_ci_low, diff_ci_high, p_rank, effect_size, margin,
    p_equivalence``) and :func:`summary_table` for a formatted one.
    """

    factor: str
    baseline: object
    metric: str
    by: tuple[str, ...]
    pair_on: tuple[str, ...]
    confidence: float
    adjust: str
    margin: float | tuple[float, float] | None
    rows: tuple[Comparison, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Comparison]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> Comparison:
        return self.rows[i]

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (see the class docstring for the columns)."""
        records = []
        for r in self.rows:
            rec = {k: v for k, v in r.group}
            for name in _FRAME_FIRST + _FRAME_EXTRA:
                rec[name] = getattr(r, name)
            records.append(rec)
        cols = list(self.by) + _FRAME_FIRST + _FRAME_EXTRA
        out = pd.DataFrame.from_records(records, columns=cols)
        out["equivalent"] = out["equivalent"].astype(object)
        return out


def summary_table(table: ComparisonTable, digits: int = 3) -> pd.DataFrame:
    """Formatted, human-readable view of a :class:`ComparisonTable` (strings, for reports).

    Parameters
    ----------
    table : ComparisonTable
    digits : int
        Significant digits of ratios and p-values.

    Returns
    -------
    pandas.DataFrame
        Columns: the ``by`` keys, ``level``, ``n`` ("baseline/other"), ``mean_baseline``, ``mean_other``,
        ``ratio [CI]``, ``change_pct [CI]``, ``p``, ``p_adjusted``, ``equivalent``, ``note``.
    """
    if not isinstance(table, ComparisonTable):
        raise StatsError(f"table must be a ComparisonTable, got {type(table).__name__}")
    pct = f"{table.confidence:.0%}"

    def g(x: float) -> str:
        return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}g}"

    def pc(x: float) -> str:
        return "n/a" if not np.isfinite(x) else f"{(x - 1) * 100:+.{max(digits - 2, 1)}f}%"

    rows = []
    for r in table.rows:
        rec = {k: v for k, v in r.group}
        rec.update(
            level=r.level,
            n=f"{r.n_baseline}/{r.n_other}",
            mean_baseline=g(r.mean_baseline),
            mean_other=g(r.mean_other),
            **{f"ratio [{pct} CI]": f"{g(r.ratio)} [{g(r.ci_low)}, {g(r.ci_high)}]",
               f"change [{pct} CI]": f"{pc(r.ratio)} [{pc(r.ci_low)}, {pc(r.ci_high)}]"},
            p=g(r.p),
            p_adjusted=g(r.p_adjusted),
            equivalent="" if r.equivalent is None else ("yes" if r.equivalent else "no"),
            note=r.note,
        )
        rows.append(rec)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- maths


def _log_bounds(margin) -> tuple[float, float]:
    if isinstance(margin, tuple):
        return math.log(margin[0]), math.log(margin[1])
    return math.log1p(-margin), math.log1p(margin)


def fieller_ratio_ci(x: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float, str]:
    """Fieller CI of ``mean(x) / mean(y)`` for independent samples with unequal variances.

    The bounds are the ``rho`` solving ``(xbar - rho*ybar)^2 = t^2 (vx + rho^2 vy)`` with
    ``vx = s_x^2/n_x``, ``vy = s_y^2/n_y`` and ``t`` the Student quantile at the Welch-Satterthwaite df
    evaluated at ``rho = xbar/ybar`` (Fieller 1954, J. R. Stat. Soc. B 16:175; the unequal-variance form of
    R ``mratios::ttestratio(var.equal = FALSE)``).

    Returns
    -------
    (low, high, note)
        ``(nan, nan, note)`` when the interval is unbounded (the baseline mean is not significantly
        different from zero at this level). ``low`` can be < 0 when the numerator mean is not
        significantly different from zero: for positive metrics use :func:`ratio_ci`, which then
        falls back to the log scale.
    """
    nx, ny = len(x), len(y)
    xb, yb = float(np.mean(x)), float(np.mean(y))
    vx, vy = float(np.var(x, ddof=1)) / nx, float(np.var(y, ddof=1)) / ny
    rho = xb / yb
    num = (vx + rho**2 * vy) ** 2
    den = vx**2 / (nx - 1) + (rho**2 * vy) ** 2 / (ny - 1)
    df = num / den if den > 0 else float(nx + ny - 2)
    t = float(st.t.ppf(0.5 + confidence / 2, df))
    a = yb**2 - t**2 * vy
    b = -2 * xb * yb
    c = xb**2 - t**2 * vx
    disc = b * b - 4 * a * c
    if a <= 0 or disc < 0:
        return math.nan, math.nan, "Fieller CI unbounded: baseline mean not distinguishable from 0"
    r = math.sqrt(disc)
    lo, hi = (-b - r) / (2 * a), (-b + r) / (2 * a)
    return lo, hi, ""


@dataclass(frozen=True)
class RatioCI:
    """A ratio of two independent arms with its CI, and which estimator gave it (:func:`ratio_ci`).

    Attributes
    ----------
    ratio, ci_low, ci_high : float
        The ratio and its CI bounds (NaN when not estimable).
    geometric : bool
        False: ratio of arithmetic means with Fieller's CI. True: ratio of geometric means with
        ``exp`` of the Welch t CI of the difference of mean logs (the fallback).
    method : str
        The estimator in words, with its source.
    note : str
        Why the fallback was taken; empty for a Fieller interval.
    """

    ratio: float
    ci_low: float
    ci_high: float
    geometric: bool
    method: str
    note: str = ""


def ratio_ci(x: np.ndarray, y: np.ndarray, confidence: float) -> RatioCI:
    """CI of the ratio of two independent arms of positive values: Fieller, or a log-scale fallback.

    Rule: the ratio of arithmetic means ``mean(x) / mean(y)`` with Fieller's interval
    (:func:`fieller_ratio_ci`) when that interval is bounded and its lower bound is > 0. Otherwise
    Fieller's confidence set is not an interval a positive ratio can have -- unbounded or the
    union of two rays when ``mean(y)`` is not distinguishable from 0, or reaching below 0 when
    ``mean(x)`` is not (e.g. -0.108 for 3 runs per arm with a run-to-run CV of ~50%) -- and the
    ratio is reported on the log scale instead: the ratio of geometric means
    ``exp(mean(log x) - mean(log y))`` with ``exp`` of the Welch t CI of the difference of mean
    logs, which is always positive and bounded. ``geometric`` and ``method`` say which was used.

    Parameters
    ----------
    x, y : numpy.ndarray
        Numerator and denominator arm, values > 0, at least 2 each, not both without spread.
    confidence : float
        Confidence level in (0, 1).

    Returns
    -------
    RatioCI

    Notes
    -----
    Fieller, E. C. (1954), "Some problems in interval estimation", J. R. Stat. Soc. B 16:175-185
    (the confidence set of a ratio is bounded only when the denominator differs significantly
    from 0). Franz, V. H. (2007), "Ratios: a short guide to confidence limits and proper use",
    arXiv:0710.2024 (when Fieller's limits are usable; the log-ratio method for positive
    quantities, whose limits are never negative or unbounded). Welch, B. L. (1947), Biometrika
    34:28 for the t interval on the logs.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    lo, hi, note = fieller_ratio_ci(x, y, confidence)
    if np.isfinite(lo) and np.isfinite(hi) and lo > 0:
        return RatioCI(float(np.mean(x) / np.mean(y)), lo, hi, False, _FIELLER)
    why = note or f"Fieller CI [{lo:.3g}, {hi:.3g}] reaches below 0: numerator mean not distinguishable from 0"
    lx, ly = np.log(x), np.log(y)
    ratio = float(np.exp(lx.mean() - ly.mean()))
    if np.var(lx) == 0 and np.var(ly) == 0:
        return RatioCI(ratio, math.nan, math.nan, True, _GEOMETRIC, f"{why}; log-scale CI not estimable (no spread)")
    ci = st.ttest_ind(lx, ly, equal_var=False).confidence_interval(confidence)
    return RatioCI(ratio, float(np.exp(ci.low)), float(np.exp(ci.high)), True, _GEOMETRIC,
                   f"{why}; ratio and CI are of geometric means (log scale) instead")


def hedges_g(x: np.ndarray, y: np.ndarray) -> float:
    """Hedges' g of ``mean(x) - mean(y)``: pooled-SD Cohen's d times ``J = 1 - 3/(4(nx+ny)-9)``
    (Hedges & Olkin 1985, *Statistical Methods for Meta-Analysis*, eq. 5.10 approximation)."""
    nx, ny = len(x), len(y)
    sp2 = ((nx - 1) * np.var(x, ddof=1) + (ny - 1) * np.var(y, ddof=1)) / (nx + ny - 2)
    if not sp2 > 0:
        return math.nan
    d = (np.mean(x) - np.mean(y)) / math.sqrt(sp2)
    return float(d * (1 - 3 / (4 * (nx + ny) - 9)))


def _bca_ratio(x: np.ndarray, y: np.ndarray, confidence: float, n_boot: int, seed) -> tuple[float, float, str]:
    def ratio(a, b, axis=-1):
        return np.mean(a, axis=axis) / np.mean(b, axis=axis)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = st.bootstrap((x, y), ratio, n_resamples=n_boot, confidence_level=confidence, method="BCa",
                           vectorized=True, rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    note = ""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        note = "BCa bootstrap CI not estimable (degenerate bootstrap distribution)"
        lo = hi = math.nan
    elif caught:
        note = "bootstrap warning: " + str(caught[0].message).split("\n")[0]
    return lo, hi, note


def _equivalence(tost, margin, confidence: float, notes: list[str]) -> tuple[float, bool | None]:
    """TOST p on the log ratio (``tost(log_low, log_high)``, a statsmodels ``ttost_*``) and the verdict.

    ``(nan, None)`` without a margin; a p that is not finite adds "TOST not estimable" to ``notes``.
    """
    if not margin:
        return math.nan, None
    p_eq = float(tost(*_log_bounds(margin))[0])
    if np.isfinite(p_eq):
        return p_eq, bool(p_eq < 1 - confidence)
    notes.append("TOST not estimable")
    return p_eq, None


def _nan_row(**kw) -> Comparison:
    base = dict(mean_baseline=math.nan, mean_other=math.nan, estimate=math.nan, diff_ci_low=math.nan,
                diff_ci_high=math.nan, ratio=math.nan, ci_low=math.nan, ci_high=math.nan, p=math.nan,
                p_adjusted=math.nan, p_rank=math.nan, effect_size=math.nan, p_equivalence=math.nan,
                equivalent=None)
    base.update(kw)
    return Comparison(**base)


def _independent(x_base, x_other, *, common: dict, confidence, margin, n_boot, seed) -> Comparison:
    nb, no = len(x_base), len(x_other)
    mb, mo = float(np.mean(x_base)) if nb else math.nan, float(np.mean(x_other)) if no else math.nan
    tost = _TOST if margin else ""
    method = _METHOD_INDEPENDENT.format(ratio_ci=_BCA.format(n=n_boot) if n_boot else _FIELLER) + tost
    kw = dict(common, n_baseline=nb, n_other=no, method=method)
    if nb < 2 or no < 2:
        return _nan_row(**kw, mean_baseline=mb, mean_other=mo, estimate=mo - mb, ratio=mo / mb if nb and no else math.nan,
                        note=f"not estimable: n_baseline={nb}, n_other={no}; each arm needs >= 2 runs")
    vb, vo = float(np.var(x_base, ddof=1)), float(np.var(x_other, ddof=1))
    if vb == 0 and vo == 0:
        return _nan_row(**kw, mean_baseline=mb, mean_other=mo, estimate=mo - mb, ratio=mo / mb,
                        note="not estimable: zero variance in both arms (identical values), no t-test")
    notes = []
    tt = st.ttest_ind(x_other, x_base, equal_var=False)
    dci = tt.confidence_interval(confidence)
    ratio = mo / mb
    if n_boot:
        lo, hi, nt = _bca_ratio(x_other, x_base, confidence, n_boot, seed)
    else:
        rc = ratio_ci(x_other, x_base, confidence)
        ratio, lo, hi, nt = rc.ratio, rc.ci_low, rc.ci_high, rc.note
        if rc.geometric:
            kw["method"] = _METHOD_INDEPENDENT.format(ratio_ci=rc.method) + tost
    if nt:
        notes.append(nt)
    p_rank = float(st.mannwhitneyu(x_other, x_base, alternative="two-sided").pvalue)
    p_eq, equivalent = _equivalence(lambda lb, ub: ttost_ind(np.log(x_other), np.log(x_base), lb, ub,
                                                             usevar="unequal"), margin, confidence, notes)
    return Comparison(**kw, mean_baseline=mb, mean_other=mo, estimate=mo - mb, diff_ci_low=float(dci.low),
                      diff_ci_high=float(dci.high), ratio=ratio, ci_low=lo, ci_high=hi, p=float(tt.pvalue),
                      p_adjusted=math.nan, p_rank=p_rank, effect_size=hedges_g(x_other, x_base),
                      p_equivalence=p_eq, equivalent=equivalent, note="; ".join(notes))


def _paired(x_base, x_other, *, common: dict, confidence, margin, n_boot, seed, keys) -> Comparison:
    n = len(x_base)
    mb, mo = float(np.mean(x_base)), float(np.mean(x_other))
    boot = f", BCa bootstrap CI of the mean log ratio with {n_boot} resamples (Efron 1987)" if n_boot else ""
    method = _METHOD_PAIRED.format(keys=list(keys), boot=boot) + (_TOST if margin else "")
    kw = dict(common, n_baseline=n, n_other=n, method=method)
    d = np.log(x_other) - np.log(x_base)
    if n < 2:
        return _nan_row(**kw, mean_baseline=mb, mean_other=mo, estimate=mo - mb, ratio=float(np.exp(d.mean())),
                        note=f"not estimable: {n} matched pair(s); needs >= 2")
    if np.var(d) == 0:
        return _nan_row(**kw, mean_baseline=mb, mean_other=mo, estimate=mo - mb, ratio=float(np.exp(d.mean())),
                        note="not estimable: every pair has the same log ratio (zero variance), no t-test")
    notes = []
    tt = st.ttest_1samp(d, 0.0)
    ci = tt.confidence_interval(confidence)
    lo, hi = float(np.exp(ci.low)), float(np.exp(ci.high))
    if n_boot:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            res = st.bootstrap((d,), np.mean, n_resamples=n_boot, confidence_level=confidence, method="BCa",
                               rng=np.random.default_rng(seed))
        lo, hi = float(np.exp(res.confidence_interval.low)), float(np.exp(res.confidence_interval.high))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            lo = hi = math.nan
            notes.append("BCa bootstrap CI not estimable")
    diff = x_other - x_base
    if np.var(diff) > 0:
        dci = st.ttest_1samp(diff, 0.0).confidence_interval(confidence)
        dlo, dhi = float(dci.low), float(dci.high)
    else:
        dlo = dhi = math.nan
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p_rank = float(st.wilcoxon(d).pvalue)
    except ValueError as exc:
        p_rank = math.nan
        notes.append(f"Wilcoxon not estimable: {exc}")
    p_eq, equivalent = _equivalence(lambda lb, ub: ttost_paired(np.log(x_other), np.log(x_base), lb, ub),
                                    margin, confidence, notes)
    return Comparison(**kw, mean_baseline=mb, mean_other=mo, estimate=mo - mb, diff_ci_low=dlo, diff_ci_high=dhi,
                      ratio=float(np.exp(d.mean())), ci_low=lo, ci_high=hi, p=float(tt.pvalue),
                      p_adjusted=math.nan, p_rank=p_rank, effect_size=hedges_g(x_other, x_base),
                      p_equivalence=p_eq, equivalent=equivalent, note="; ".join(notes))


# --------------------------------------------------------------------------- input checks


def _check_not_mixed(df: pd.DataFrame, keys: list[str], factor: str) -> None:
    """Refuse silently pooling read and write rows, runs of different tools, or several rows of one run
    as replicates."""
    if "tool" in df.columns and factor != "tool" and "tool" not in keys:
        tools = sorted(map(str, df["tool"].dropna().unique()))
        if len(tools) > 1:
            raise StatsError(
                f"rows come from several tools {tools}; a tool is a factor, not a replicate: compare factor='tool' "
                "(storagebench.stats.cross_tool), or put 'tool' in by= or pair_on="
            )
    if "direction" in df.columns and "direction" not in keys:
        dirs = sorted(map(str, df["direction"].dropna().unique()))
        if len(dirs) > 1:
            raise StatsError(
                f"rows mix directions {dirs}; filter one direction or put 'direction' in by= "
                "(read and write rows of a run are not replicates)"
            )
    if "run_id" in df.columns and "run_id" not in keys:
        dup = df.duplicated(subset=keys + [factor, "run_id"], keep=False)
        if dup.any():
            ex = df.loc[dup, "run_id"].iloc[0]
            raise StatsError(
                f"{int(dup.sum())} rows share a run_id within one cell (e.g. run_id {ex!r}): several hosts/jobs "
                "of one run are not independent replicates; aggregate per run first (storagebench.aggregate) "
                "or put 'host'/'job' in by="
            )


def _levels_sorted(values) -> list:
    vals = [v.item() if isinstance(v, np.generic) else v for v in pd.unique(values)]
    try:
        return sorted(vals)
    except TypeError:
        return vals


def compare(
    df: pd.DataFrame,
    factor: str,
    baseline,
    metric: str,
    *,
    by: str | Sequence[str] | None = None,
    pair_on: str | Sequence[str] | None = None,
    margin: float | None = None,
    confidence: float = 0.95,
    adjust: str = "holm",
    n_boot: int | None = None,
    seed: int | None = 0,
) -> ComparisonTable:
    """Compare every level of ``factor`` with its ``baseline`` level on ``metric``, per group.

    Parameters
    ----------
    df : pandas.DataFrame
        A ``runs``-schema table (or any long table): one row per replicate. Rows of several
        directions are refused unless ``direction`` is in ``by``; rows sharing a ``run_id`` within
        one cell are refused (aggregate hosts/jobs per run first).
    factor : str
        Column whose levels are compared (e.g. ``"stripe_width"``, ``"tool"``, ``"ioengine"``).
    baseline : object
        The reference level of ``factor``; every other level is compared with it.
    metric : str
        Metric column, > 0 and finite (e.g. ``"iops"`` in 1/s, ``"lat_mean_ns"`` in ns).
    by : str or list of str, optional
        Group columns: one comparison per group (e.g. ``["rw", "bs_bytes"]`` for a pattern).
    pair_on : str or list of str, optional
        Columns matching a baseline row with one row of the other level (e.g. ``"vms"``, ``"tool"``,
        ``"repetition"``). Each key must appear exactly once in each arm of a group. Rows of several
        ``tool`` values are refused unless ``tool`` is the factor or in ``by``/``pair_on``.
    margin : float or (float, float), optional
        Equivalence margin as a fraction (0.01 for "within 1%": ratio bounds 0.99 and 1.01), or explicit
        ratio bounds ``(low, high)`` such as the bioequivalence ``(0.8, 1.25)``: adds a TOST on the log ratio.
    confidence : float
        Confidence level of every CI (default 0.95). TOST is run at ``alpha = 1 - confidence``.
    adjust : {"holm", "bh", "bonferroni", "hommel", "by", "none"}
        Multiple-comparison adjustment of ``p`` across all estimable rows
        (``statsmodels.stats.multitest.multipletests``): Holm (1979) for confirmatory claims,
        Benjamini-Hochberg (1995) FDR for screening.
    n_boot : int, optional
        When given (>= 100), the ratio CI is a BCa bootstrap (Efron 1987, ``scipy.stats.bootstrap``)
        with that many resamples instead of Fieller's interval.
    seed : int, optional
        Seed of the bootstrap generator (results are reproducible by default).

    Returns
    -------
    ComparisonTable
        One :class:`Comparison` per group and non-baseline level. ``to_frame()`` columns: the ``by``
        keys, ``level, n_baseline, n_other, mean_baseline, mean_other, estimate`` (other - baseline,
        metric's unit), ``ratio, ci_low, ci_high`` (of the ratio), ``p, p_adjusted, method, equivalent,
        note`` and the extras ``baseline, metric, paired, confidence, diff_ci_low, diff_ci_high, p_rank,
        effect_size, margin, p_equivalence``.

    Raises
    ------
    StatsError
        Missing column; ``factor`` with one level; ``baseline`` not a level; ``metric`` with NaN or
        values <= 0; NaN in ``factor``/``by``/``pair_on``; mixed directions or repeated ``run_id``;
        unmatched or duplicated ``pair_on`` keys (named); unknown ``adjust``; bad ``confidence``,
        ``margin`` or ``n_boot``.

    Notes
    -----
    Independent arms: Welch's t-test (Welch 1947, Biometrika 34:28) on the difference of means, the ratio of
    arithmetic means with Fieller's CI (Fieller 1954) under unequal variances or a BCa bootstrap -- where
    Fieller's set is not a positive bounded interval, the ratio of geometric means with a log-scale CI
    (:func:`ratio_ci`, after Franz 2007), said in the row's ``method`` and ``note`` --, the
    Mann-Whitney U test (``p_rank``) and Hedges' g. Paired arms: the paired t-test on ``log(other) -
    log(baseline)``, the ratio is the geometric mean ratio with CI ``exp`` of the t CI of the mean log
    ratio, Wilcoxon's signed-rank test (``p_rank``). The TOST (Schuirmann 1987, J. Pharmacokinet. Biopharm.
    15:657) uses ``ttost_ind(usevar="unequal")`` or ``ttost_paired`` on the logs with bounds ``log(1 -
    margin), log(1 + margin)``; ``p_equivalence`` is not multiplicity-adjusted (claiming equivalence in
    *every* group is an intersection-union test, which needs no adjustment, Berger & Hsu 1996). Groups with
    fewer than 2 replicates per arm (or 2 pairs) give a row with NaN p/CI and a "not estimable" note, never
    a silent number.
    """
    by_l, pair_l = _as_list(by), _as_list(pair_on)
    _require_columns(df, [factor, metric, *by_l, *pair_l])
    if factor in by_l or factor in pair_l or metric in by_l + pair_l + [factor]:
        raise StatsError(f"factor {factor!r} and metric {metric!r} must not also be in by={by_l} or pair_on={pair_l}")
    bad = sorted(set(by_l) & _RESERVED)
    if bad:
        raise StatsError(f"by columns {bad} clash with result column names; rename them")
    confidence = _check_confidence(confidence)
    margin = _check_margin(margin)
    if adjust not in ADJUST_METHODS:
        raise StatsError(f"adjust must be one of {sorted(ADJUST_METHODS)}, got {adjust!r}")
    if n_boot is not None and n_boot != 0:
        if not isinstance(n_boot, (int, np.integer)) or isinstance(n_boot, bool) or n_boot < 100:
            raise StatsError(f"n_boot must be None (Fieller CI) or an int >= 100, got {n_boot!r}")
    for col in [factor, *by_l, *pair_l]:
        if df[col].isna().any():
            raise StatsError(f"column {col!r} has {int(df[col].isna().sum())} missing value(s); fill or drop them")
    levels = _levels_sorted(df[factor])
    if len(levels) < 2:
        raise StatsError(f"factor {factor!r} has only one level {levels}; a comparison needs at least two")
    if baseline not in levels:
        raise StatsError(f"baseline must be one of the levels of {factor!r} {levels}, got {baseline!r}")
    _positive_finite(df[metric], metric)
    _check_not_mixed(df, by_l + pair_l, factor)

    values = pd.to_numeric(df[metric]).to_numpy(dtype=float)
    if by_l:
        group_items = list(df.groupby(by_l, sort=True, dropna=False).indices.items())
    else:
        group_items = [((), np.arange(len(df)))]
    fac = df[factor].to_numpy()
    pair_keys = (list(df[pair_l].itertuples(index=False, name=None)) if pair_l else None)
    rows: list[Comparison] = []
    for gkey, idx in group_items:
        group = tuple(zip(by_l, _key_tuple(gkey), strict=True)) if by_l else ()
        gfac = fac[idx]
        glevels = _levels_sorted(gfac)
        common_base = dict(group=group, baseline=baseline, metric=metric, paired=bool(pair_l),
                           confidence=confidence, margin=margin)
        if baseline not in glevels:
            for lev in glevels:
                rows.append(_nan_row(**common_base, level=lev, n_baseline=0, n_other=int((gfac == lev).sum()),
                                     method="", note=f"not estimable: baseline level {baseline!r} absent in group "
                                     f"{dict(group)}"))
            continue
        ib = idx[gfac == baseline]
        for lev in glevels:
            if lev == baseline:
                continue
            io = idx[gfac == lev]
            common = dict(common_base, level=lev)
            if pair_l:
                kb = [pair_keys[i] for i in ib]
                ko = [pair_keys[i] for i in io]
                for arm, ks in (("baseline", kb), (repr(lev), ko)):
                    dup = sorted((k for k, c in Counter(ks).items() if c > 1), key=str)
                    if dup:
                        raise StatsError(f"pair_on={pair_l} keys {dup[:10]} appear more than once in the {arm} arm "
                                         f"of group {dict(group)}; each key must match one row per arm")
                only_b = sorted(set(kb) - set(ko), key=str)
                only_o = sorted(set(ko) - set(kb), key=str)
                if only_b or only_o:
                    raise StatsError(
                        f"pair_on={pair_l} keys do not match in group {dict(group)} for level {lev!r}: "
                        f"only in baseline {only_b[:10]}, only in {lev!r} {only_o[:10]}")
                pos = {k: i for i, k in zip(io, ko, strict=True)}
                order_o = np.array([pos[k] for k in kb], dtype=int)
                rows.append(_paired(values[ib], values[order_o], common=common, confidence=confidence,
                                    margin=margin, n_boot=n_boot, seed=seed, keys=pair_l))
            else:
                rows.append(_independent(values[ib], values[io], common=common, confidence=confidence,
                                         margin=margin, n_boot=n_boot, seed=seed))
    rows = _adjust(rows, ADJUST_METHODS[adjust])
    return ComparisonTable(factor=factor, baseline=baseline, metric=metric, by=tuple(by_l), pair_on=tuple(pair_l),
                           confidence=confidence, adjust=adjust, margin=margin, rows=tuple(rows))


def adjust_pvalues(p, method: str = "holm") -> np.ndarray:
    """Multiple-comparison adjusted p-values, as R's ``p.adjust``.

    Parameters
    ----------
    p : array-like of float
        Raw p-values in [0, 1]; NaN entries stay NaN and are not counted.
    method : {"holm", "bh", "bonferroni", "hommel", "by", "none"}
        Holm (1979, Scand. J. Stat. 6:65) step-down for confirmatory claims; Benjamini & Hochberg
        (1995, J. R. Stat. Soc. B 57:289) FDR for screening; computed by
        ``statsmodels.stats.multitest.multipletests``.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values, same shape and order as ``p``.

    Raises
    ------
    StatsError
        Unknown ``method``, or a p-value outside [0, 1].
    """
    if method not in ADJUST_METHODS:
        raise StatsError(f"method must be one of {sorted(ADJUST_METHODS)}, got {method!r}")
    arr = np.asarray(p, dtype=float)
    ok = np.isfinite(arr)
    if ((arr[ok] < 0) | (arr[ok] > 1)).any():
        raise StatsError(f"p-values must be in [0, 1], got {arr[ok][(arr[ok] < 0) | (arr[ok] > 1)][:5].tolist()}")
    out = np.full_like(arr, np.nan)
    m = ADJUST_METHODS[method]
    if ok.any():
        out[ok] = arr[ok] if m is None else multipletests(arr[ok], method=m)[1]
    return out


def _adjust(rows: list[Comparison], method: str | None) -> list[Comparison]:
    ok = [i for i, r in enumerate(rows) if np.isfinite(r.p)]
    words = _ADJUST_WORDS[method] + " adjustment of p over " + f"{len(ok)} comparison(s)"
    out = list(rows)
    if ok:
        p = np.array([rows[i].p for i in ok])
        padj = p if method is None else multipletests(p, method=method)[1]
        for i, pa in zip(ok, padj, strict=True):
            out[i] = replace(rows[i], p_adjusted=float(pa), method=rows[i].method + "; " + words)
    return out


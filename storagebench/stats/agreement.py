"""Agreement of two methods measuring the same things: :func:`bland_altman` (bias and limits of agreement), with
the pairs independent or in clusters (several configurations of one pattern: Bland & Altman 2007)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats as st

from ..errors import StatsError
from ..findings import CONFIDENCE
from ._common import check_confidence, check_fraction, require_positive_finite


@dataclass(frozen=True)
class Agreement:
    """Bland-Altman agreement of ``a`` with ``b`` (:func:`bland_altman`).

    With ``log=True`` every value except ``sd`` is a ratio ``a / b`` (back-transformed from the
    log scale); with ``log=False`` a difference ``a - b`` in the unit of the inputs.

    Attributes
    ----------
    n : int
        Pairs.
    log : bool
        Ratios (True) or differences (False).
    bias, bias_ci_low, bias_ci_high : float
        Mean difference (or geometric mean ratio) and its Student t CI. With clusters: the mean of the
        cluster means, its t CI on (clusters - 1) df.
    sd : float
        SD of the differences (of the log ratios with ``log=True``); with clusters the total SD of a single
        pair, ``sqrt(between-cluster variance + within-cluster variance)``.
    loa_low, loa_high : float
        Limits of agreement: ``bias -/+ z x sd`` with ``z`` the normal quantile of ``coverage``
        (1.96 for 95% of pairs).
    loa_low_ci_low, loa_low_ci_high, loa_high_ci_low, loa_high_ci_high : float
        Student t CIs of the two limits (NaN with clusters: Bland & Altman 2007 give none; the limits of each
        cluster, with their CIs, are each cluster's own :func:`bland_altman`).
    confidence, coverage : float
        CI level; share of pairs the limits should hold.
    method : str
        The method in words, with its sources.
    p : float
        Two-sided p of "no bias" (ratio 1, difference 0), from the same t statistic as the bias CI.
    clusters : int
        Number of clusters (0: the pairs were taken as independent).
    icc : float
        Share of the variance of a pair's difference that lies between clusters (one-way ANOVA estimate;
        NaN without clusters).
    """

    n: int
    log: bool
    bias: float
    bias_ci_low: float
    bias_ci_high: float
    sd: float
    loa_low: float
    loa_high: float
    loa_low_ci_low: float
    loa_low_ci_high: float
    loa_high_ci_low: float
    loa_high_ci_high: float
    confidence: float
    coverage: float
    method: str
    p: float = math.nan
    clusters: int = 0
    icc: float = math.nan

    def to_dict(self) -> dict:
        """The attributes as a dict (one row of a table)."""
        return asdict(self)


#: The scale of the analysis in words, by ``log``.
_SCALE = {True: "log ratios log(a/b), reported back-transformed as ratios a/b", False: "differences a - b"}

#: The limits of agreement hold this share of single pairs (Bland & Altman 1986: bias -/+ 1.96 SD): a coverage of
#: pairs, not a confidence level, so it stays 0.95 whatever :data:`~storagebench.findings.CONFIDENCE` is.
LOA_COVERAGE = 0.95


def bland_altman(a, b, *, log: bool = True, confidence: float = CONFIDENCE, coverage: float = LOA_COVERAGE,
                 clusters=None) -> Agreement:
    """Bias and limits of agreement of two methods measured on the same items (Bland & Altman 1986, 2007).

    Parameters
    ----------
    a, b : array-like of float
        Paired measurements of the same items by two methods (e.g. FIO and DiskSPD IOPS of the same
        VM count and stripe width), same length, in the same unit. With ``log=True`` every value must
        be > 0.
    log : bool
        Analyse ``log(a) - log(b)`` and report ratios ``a / b`` (default: for IOPS, bandwidth and
        latency the difference between methods grows with the value); ``False`` analyses ``a - b``.
    confidence : float
        Level of the CIs of the bias and of each limit, in (0, 1).
    coverage : float
        Share of pairs the limits of agreement should contain, in (0, 1) (0.95: bias -/+ 1.96 SD).
    clusters : array-like, optional
        A label per pair naming the unit the pair belongs to (the I/O pattern of a configuration), when the
        pairs are several observations of fewer independent units. The bias is then the mean of the cluster
        means with a Student t CI on (clusters - 1) df, and the limits use the total SD of a single pair from
        the one-way ANOVA variance components (Bland & Altman 2007). At least 3 clusters.

    Returns
    -------
    Agreement

    Raises
    ------
    StatsError
        Lengths differ; fewer than 3 pairs; NaN/infinite values; values <= 0 with ``log=True``;
        all differences equal (no spread); bad ``confidence`` or ``coverage``; ``clusters`` of another
        length, with missing labels, or with fewer than 3 clusters.

    Notes
    -----
    Bland, J. M. & Altman, D. G. (1986), "Statistical methods for assessing agreement between two
    methods of clinical measurement", Lancet 327:307-310: bias = mean difference ``d``, limits of
    agreement ``d -/+ z s``, CIs with the t distribution on n - 1 df; log-transformed data for a
    difference that grows with the magnitude (back-transformed, the limits are ratios). The standard
    error of a limit, ``s sqrt(1/n + z^2 / (2 (n - 1)))``, is from Bland & Altman (1999), "Measuring
    agreement in method comparison studies", Stat. Methods Med. Res. 8:135-160 (the 1986 paper's
    ``sqrt(3 s^2 / n)`` is its approximation for z = 2).

    With ``clusters`` (Bland, J. M. & Altman, D. G. (2007), "Agreement between methods of measurement with
    multiple observations per individual", J. Biopharm. Stat. 17:571-582): the pairs of one cluster share its
    bias, so they are not independent and the t CI on n - 1 df is too narrow (seed 002's 144 configurations
    of 6 patterns: 1.029 [1.006, 1.053] as independent, 1.029 [0.925, 1.145] with the pattern as the
    cluster). The bias is estimated at the level of the cluster: the mean of the cluster means, with the
    one-sample t CI of those means on k - 1 df (a summary-statistics analysis; with equal cluster sizes it
    equals the REML random-intercept model's estimate and Satterthwaite CI, checked against R ``lmerTest``).
    The SD of a single pair's difference is ``sqrt(s_b^2 + s_w^2)``, ``s_w^2`` the within-cluster mean square
    and ``s_b^2 = (MS_between - MS_within) / m0`` (0 when negative), ``m0 = (n^2 - sum m_i^2) / ((k - 1) n)``
    for unequal cluster sizes (Bland & Altman 2007, section 3).
    """
    confidence = check_confidence(confidence)
    coverage = check_fraction(coverage, f"coverage must be a fraction in (0, 1) such as {LOA_COVERAGE:g}, got {coverage!r}")
    x = pd.Series(np.asarray(a, dtype=float).ravel())
    y = pd.Series(np.asarray(b, dtype=float).ravel())
    if len(x) != len(y):
        raise StatsError(f"a and b must be paired (same length), got {len(x)} and {len(y)} values")
    if len(x) < 3:
        raise StatsError(f"limits of agreement need at least 3 pairs, got {len(x)}")
    if log:
        require_positive_finite(x, "a")
        require_positive_finite(y, "b")
        d = np.log(x.to_numpy()) - np.log(y.to_numpy())
    else:
        for name, v in (("a", x), ("b", y)):
            if not np.isfinite(v.to_numpy()).all():
                raise StatsError(f"{name} has NaN or infinite values; drop the pairs explicitly first")
        d = x.to_numpy() - y.to_numpy()
    n = len(d)
    mean, s = float(d.mean()), float(d.std(ddof=1))
    if not s > 1e-12 * max(1.0, abs(mean)):  # equal up to rounding (log(4) - log(2) vs log(2) - log(1))
        raise StatsError(f"all {n} differences are equal ({mean:g}): no spread, limits of agreement not estimable")
    if clusters is not None:
        return _clustered(d, _labels(clusters, n), log, confidence, coverage)
    z = float(st.norm.ppf(0.5 + coverage / 2))
    scale = _SCALE[bool(log)]
    t = float(st.t.ppf(0.5 + confidence / 2, n - 1))
    se_bias = s / math.sqrt(n)
    se_loa = s * math.sqrt(1 / n + z**2 / (2 * (n - 1)))
    lo, hi = mean - z * s, mean + z * s
    raw = [mean, mean - t * se_bias, mean + t * se_bias, lo, hi, lo - t * se_loa, lo + t * se_loa,
           hi - t * se_loa, hi + t * se_loa]
    vals = [math.exp(v) for v in raw] if log else raw
    p = float(2 * st.t.sf(abs(mean) / se_bias, n - 1))
    method = (f"Bland-Altman limits of agreement on {scale}, the {n} pairs taken as independent: bias = mean with "
              f"Student t CI, limits = bias -/+ {z:.3g} SD ({coverage:.0%} of pairs), their t CIs with SE "
              "s*sqrt(1/n + z^2/(2(n-1))) (Bland & Altman 1986, Lancet 327:307; 1999, Stat Methods Med Res 8:135)")
    return Agreement(n, bool(log), *vals[:3], s, *vals[3:], confidence=confidence, coverage=coverage, method=method,
                     p=p)


def _labels(clusters, n: int) -> np.ndarray:
    """The cluster labels as text, one per pair; refuses another length, missing labels and fewer than 3 clusters."""
    raw = pd.Series(np.asarray(clusters, dtype=object).ravel())
    if len(raw) != n:
        raise StatsError(f"clusters must give one label per pair ({n}), got {len(raw)}")
    if raw.isna().any():
        raise StatsError(f"clusters has {int(raw.isna().sum())} missing label(s); every pair needs its cluster")
    labels = raw.astype(str).to_numpy()
    k = len(set(labels))
    if k < 3:
        raise StatsError(f"a bias with clusters needs at least 3 clusters (its t CI has clusters - 1 df), got {k}; "
                         "without clusters the pairs are taken as independent")
    return labels


def _clustered(d: np.ndarray, labels: np.ndarray, log: bool, confidence: float, coverage: float) -> Agreement:
    """Bland & Altman (2007) with the clusters ``labels``: the bias from the cluster means (t on k - 1 df) and
    limits from the total SD of one pair (one-way ANOVA components)."""
    z, scale = float(st.norm.ppf(0.5 + coverage / 2)), _SCALE[bool(log)]
    g = pd.Series(d).groupby(labels)
    means, sizes = g.mean().to_numpy(float), g.size().to_numpy(float)
    n, k = d.size, means.size
    bias = float(means.mean())
    se = float(means.std(ddof=1)) / math.sqrt(k)
    t = float(st.t.ppf(0.5 + confidence / 2, k - 1))
    p = float(2 * st.t.sf(abs(bias) / se, k - 1)) if se > 0 else (0.0 if bias != 0 else 1.0)
    ss_within = float(((d - g.transform("mean").to_numpy(float)) ** 2).sum())
    ms_within = ss_within / (n - k) if n > k else 0.0
    ms_between = float((sizes * (means - d.mean()) ** 2).sum()) / (k - 1)
    m0 = (n**2 - float((sizes**2).sum())) / ((k - 1) * n)
    var_between = max(0.0, (ms_between - ms_within) / m0)
    sd = math.sqrt(var_between + ms_within)
    icc = var_between / (var_between + ms_within) if var_between + ms_within > 0 else math.nan
    raw = [bias, bias - t * se, bias + t * se, bias - z * sd, bias + z * sd]
    vals = [math.exp(v) for v in raw] if log else raw
    method = (f"Bland-Altman on {scale}, the {n} pairs in {k} clusters (Bland & Altman 2007, J Biopharm Stat "
              f"17:571): bias = mean of the {k} cluster means with its Student t CI on {k - 1} df (the cluster is "
              f"the unit; intraclass correlation {icc:.2f}); limits = bias -/+ {z:.3g} x the total SD of one pair, "
              f"sqrt(between- + within-cluster variance) from the one-way ANOVA ({coverage:.0%} of single pairs); "
              "no CI for these pooled limits: each cluster's own limits carry theirs")
    nan = math.nan
    return Agreement(n, bool(log), *vals[:3], sd, vals[3], vals[4], nan, nan, nan, nan, confidence=confidence,
                     coverage=coverage, method=method, p=p, clusters=k, icc=icc)


def agreement_table(pairs: pd.DataFrame, by_l: list[str], cols: tuple[str, str], log: bool,
               confidence: float) -> tuple[pd.DataFrame, str | None]:
    """Bland-Altman of the ``cols`` (other, baseline) of ``pairs``, over all (the ``by_l`` groups as clusters) and
    per ``by_l`` group: the table of :attr:`storagebench.stats.crosstool.CrossTool.agreement`, with the method
    words of the pooled row (of the first estimable group when the pooled row is not; None when none is)."""
    agreement, method_ba = [], None
    groups = [("all", pairs)] + (list(pairs.groupby(by_l, dropna=False)) if by_l else [])
    for gkey, part in groups:
        pooled = isinstance(gkey, str) and gkey == "all"
        rec = ({c: "all" for c in by_l} if pooled
               else dict(zip(by_l, gkey if isinstance(gkey, tuple) else (gkey,), strict=True)))
        try:
            ba, note = _pooled_agreement(part, by_l, cols, log, confidence) if pooled else (
                bland_altman(part[cols[0]], part[cols[1]], log=log, confidence=confidence), "")
        except StatsError as exc:
            rec.update(n=len(part), note=f"not estimable: {exc}")
        else:
            rec.update({k: v for k, v in ba.to_dict().items() if k != "method"}, note=note)
            method_ba = ba.method if pooled or method_ba is None else method_ba
        agreement.append(rec)
    return pd.DataFrame(agreement), method_ba


def _pooled_agreement(pairs: pd.DataFrame, by_l: list[str], cols: tuple[str, str], log: bool, confidence: float):
    """Bland-Altman over every configuration: with ``by`` groups they are the clusters (the bias depends on the
    group, so its configurations are not independent: Bland & Altman 2007); with fewer than 3 groups, or no
    ``by``, the configurations are taken as independent and the note says so when there were groups."""
    a, b = pairs[cols[0]], pairs[cols[1]]
    if by_l:
        labels = pairs[by_l].astype(str).agg(" | ".join, axis=1)
        if labels.nunique() >= 3:
            return bland_altman(a, b, log=log, confidence=confidence, clusters=labels), ""
        note = (f"the configurations are taken as independent: {labels.nunique()} {' x '.join(by_l)} group(s), "
                "fewer than the 3 a clustered CI needs, so the CI may be too narrow")
        return bland_altman(a, b, log=log, confidence=confidence), note
    return bland_altman(a, b, log=log, confidence=confidence), ""

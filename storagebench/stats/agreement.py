"""Agreement of two methods measuring the same things: :func:`bland_altman` (bias and limits of agreement)."""

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
        Mean difference (or geometric mean ratio) and its Student t CI.
    sd : float
        SD of the differences (of the log ratios with ``log=True``).
    loa_low, loa_high : float
        Limits of agreement: ``bias -/+ z x sd`` with ``z`` the normal quantile of ``coverage``
        (1.96 for 95% of pairs).
    loa_low_ci_low, loa_low_ci_high, loa_high_ci_low, loa_high_ci_high : float
        Student t CIs of the two limits.
    confidence, coverage : float
        CI level; share of pairs the limits should hold.
    method : str
        The method in words, with its sources.
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

    def to_dict(self) -> dict:
        """The attributes as a dict (one row of a table)."""
        return asdict(self)


#: The limits of agreement hold this share of single pairs (Bland & Altman 1986: bias -/+ 1.96 SD): a coverage of
#: pairs, not a confidence level, so it stays 0.95 whatever :data:`~storagebench.findings.CONFIDENCE` is.
LOA_COVERAGE = 0.95


def bland_altman(a, b, *, log: bool = True, confidence: float = CONFIDENCE, coverage: float = LOA_COVERAGE) -> Agreement:
    """Bias and limits of agreement of two methods measured on the same items (Bland & Altman 1986).

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

    Returns
    -------
    Agreement

    Raises
    ------
    StatsError
        Lengths differ; fewer than 3 pairs; NaN/infinite values; values <= 0 with ``log=True``;
        all differences equal (no spread); bad ``confidence`` or ``coverage``.

    Notes
    -----
    Bland, J. M. & Altman, D. G. (1986), "Statistical methods for assessing agreement between two
    methods of clinical measurement", Lancet 327:307-310: bias = mean difference ``d``, limits of
    agreement ``d -/+ z s``, CIs with the t distribution on n - 1 df; log-transformed data for a
    difference that grows with the magnitude (back-transformed, the limits are ratios). The standard
    error of a limit, ``s sqrt(1/n + z^2 / (2 (n - 1)))``, is from Bland & Altman (1999), "Measuring
    agreement in method comparison studies", Stat. Methods Med. Res. 8:135-160 (the 1986 paper's
    ``sqrt(3 s^2 / n)`` is its approximation for z = 2).
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
    t = float(st.t.ppf(0.5 + confidence / 2, n - 1))
    z = float(st.norm.ppf(0.5 + coverage / 2))
    se_bias = s / math.sqrt(n)
    se_loa = s * math.sqrt(1 / n + z**2 / (2 * (n - 1)))
    lo, hi = mean - z * s, mean + z * s
    raw = [mean, mean - t * se_bias, mean + t * se_bias, lo, hi, lo - t * se_loa, lo + t * se_loa,
           hi - t * se_loa, hi + t * se_loa]
    vals = [math.exp(v) for v in raw] if log else raw
    scale = "log ratios log(a/b), reported back-transformed as ratios a/b" if log else "differences a - b"
    method = (f"Bland-Altman limits of agreement on {scale}: bias = mean with Student t CI, limits = bias -/+ "
              f"{z:.3g} SD ({coverage:.0%} of pairs), their t CIs with SE s*sqrt(1/n + z^2/(2(n-1))) "
              "(Bland & Altman 1986, Lancet 327:307; 1999, Stat Methods Med Res 8:135)")
    return Agreement(n, bool(log), *vals[:3], s, *vals[3:], confidence=confidence, coverage=coverage, method=method)

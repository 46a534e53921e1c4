"""The family adjustment of :func:`~storagebench.stats.comparison.compare`: the ``adjust=`` methods, the p-value
adjustment over a table's estimable rows and its words. Private: imported from :mod:`storagebench.stats.comparison`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from statsmodels.stats.multitest import multipletests

from ..errors import StatsError

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


def adjust_rows(rows: list, method: str | None, by: Sequence[str], factor: str) -> list:
    """The rows (:class:`~storagebench.stats.comparison.Comparison`) with ``family`` set and ``p`` adjusted over the
    estimable ones by ``method`` (a ``multipletests`` name, None for no adjustment)."""
    ok = [i for i, r in enumerate(rows) if np.isfinite(r.p)]
    family = family_words(method, len(ok), by, factor)
    words = _ADJUST_WORDS[method] + " adjustment of p over " + f"{len(ok)} comparison(s)"
    out = [replace(r, family=family) for r in rows]
    if ok:
        p = np.array([rows[i].p for i in ok])
        padj = p if method is None else multipletests(p, method=method)[1]
        for i, pa in zip(ok, padj, strict=True):
            out[i] = replace(out[i], p_adjusted=float(pa), method=rows[i].method + "; " + words)
    return out



def family_words(method: str | None, k: int, by: Sequence[str], factor: str) -> str:
    scope = f"one per ({', '.join(by)}) group and level of {factor}" if by else f"one per level of {factor}"
    if k == 1:
        return f"a single comparison ({scope}): nothing to adjust for"
    if method is None:
        return f"no adjustment: each of the {k} estimable comparison(s) ({scope}) stands alone"
    return f"{_ADJUST_WORDS[method]} over the {k} estimable comparison(s) of this table ({scope})"


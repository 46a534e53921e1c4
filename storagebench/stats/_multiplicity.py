"""The family adjustment of :func:`~storagebench.stats.comparison.compare`: the ``adjust=`` methods, the p-value
adjustment over a table's estimable rows and its words, and :func:`adjust_family`, the one family of a write-up's
question over all the tables that answer it. Imported from :mod:`storagebench.stats.comparison` (and
:func:`adjust_family` from there too)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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
    words = _adjusted_words(method, len(ok))
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


def ci_words(confidence: float, m: int) -> str:
    """What the CIs of a family of ``m`` tests are: per comparison, at ``confidence``, not adjusted; with the level a
    simultaneous (Bonferroni) CI would need."""
    if m <= 1:
        return f"{confidence:.0%} CIs"
    sim = 1 - (1 - confidence) / m
    return (f"the {confidence:.0%} CIs are per comparison, not adjusted for the {m} tests (simultaneous Bonferroni "
            f"CIs would be at {sim * 100:.4g}%)")


_ADJUSTED = re.compile(r"; [^;]* adjustment of p over \d+ comparison\(s\)$")


def adjust_family(tables: Mapping, question: str, *, method: str | None = None) -> dict:
    """One multiplicity family per question of a write-up: adjust the p-values of every table answering it together.

    A write-up that asks one question ("does a wider stripe give more IOPS, by either tool?") and answers it with
    several tables (both tools combined, per tool, the tool x stripe interaction, the average) draws its verdicts
    from all of them; adjusting each table on its own makes each family smaller than the verdicts drawn. This
    re-adjusts the raw p of every estimable row of every table as one family and says so in each row's ``family``.

    Parameters
    ----------
    tables : mapping of str to ComparisonTable
        Name of each analysis (``"combined"``, ``"per tool"``) -> its table (:func:`~storagebench.stats.compare`,
        :func:`~storagebench.stats.interaction`), in the order the write-up shows them.
    question : str
        The question the tables answer, in the write-up's words (quoted in the family).
    method : str, optional
        An ``adjust=`` name (``"holm"``, ``"bh"``, ...); default the tables' own, which must then agree.

    Returns
    -------
    dict of str to ComparisonTable
        The same tables, each row with ``p_adjusted`` over the whole family and ``family`` saying "Holm (1979)
        step-down over the 25 tests of this question (...): combined 6, per tool 12, ..." and what the CIs are
        (per comparison, not adjusted; :func:`ci_words`); ``table.family`` says the same.

    Raises
    ------
    StatsError
        No tables, an empty question, a value that is not a comparison table, tables adjusted by different
        methods without ``method``, an unknown ``method``.

    Notes
    -----
    Holm (1979), Scand. J. Stat. 6:65 (``statsmodels.stats.multitest.multipletests``); the family is the set of
    hypotheses a conclusion is drawn from (Bender & Lange 2001, J. Clin. Epidemiol. 54:343). The CIs stay the
    per-comparison ones; Holm has no simple compatible simultaneous CIs (Strassburger & Bretz 2008, Stat. Med.
    27:4914), so the words say that the CIs are not adjusted and at what level a simultaneous one would be.
    """
    if not tables:
        raise StatsError("adjust_family needs at least one table")
    if not isinstance(question, str) or not question.strip():
        raise StatsError(f"question must be the write-up's question in words, got {question!r}")
    for name, t in tables.items():
        if not hasattr(t, "rows") or not hasattr(t, "adjust"):
            raise StatsError(f"tables[{name!r}] must be a ComparisonTable, got {type(t).__name__}")
    names = {t.adjust for t in tables.values()}
    if method is None and len(names) > 1:
        raise StatsError(f"the tables were adjusted by different methods {sorted(names)}; pass method=")
    method = method if method is not None else names.pop()
    if method not in ADJUST_METHODS:
        raise StatsError(f"method must be one of {sorted(ADJUST_METHODS)}, got {method!r}")
    sm = ADJUST_METHODS[method]
    where = [(name, i) for name, t in tables.items() for i, r in enumerate(t.rows) if np.isfinite(r.p)]
    m = len(where)
    p = np.array([tables[name].rows[i].p for name, i in where])
    padj = (p if sm is None else multipletests(p, method=sm)[1]) if m else p
    counts = ", ".join(f"{name} {sum(1 for n, _ in where if n == name)}" for name in tables)
    conf = next(iter(tables.values())).confidence
    scope = f"the {m} tests of this question (\u201c{question.strip()}\u201d: {counts})"
    head = (f"a single test of this question (\u201c{question.strip()}\u201d): nothing to adjust for" if m == 1 else
            f"no adjustment over {scope}" if sm is None else f"{_ADJUST_WORDS[sm]} over {scope}")
    family = f"{head}; {ci_words(conf, m)}"
    new_p = {key: float(v) for key, v in zip(where, padj, strict=True)}
    out = {}
    for name, t in tables.items():
        rows = []
        for i, r in enumerate(t.rows):
            if (name, i) in new_p:
                words = f"; {_adjusted_words(sm, m)}"
                r = replace(r, p_adjusted=new_p[(name, i)], method=_ADJUSTED.sub("", r.method) + words)
            rows.append(replace(r, family=family))
        out[name] = replace(t, rows=tuple(rows), adjust=method, question_family=family)
    return out


def _adjusted_words(method: str | None, m: int) -> str:
    """The words :func:`adjust_rows` appends to a row's method (and :data:`_ADJUSTED` removes)."""
    return f"{_ADJUST_WORDS[method]} adjustment of p over {m} comparison(s)"


"""Plain-words verdicts of comparisons, and the interaction of two factors: :func:`verdict`, :func:`interaction`.

A verdict states the estimand, its CI and confidence, ``n`` and what it counts, the experimental
unit, the multiplicity family and alpha, all taken from the analysis (never typed in as "95%"). The
rule: a direction is claimed only when the family-adjusted p < alpha AND the CI lies on that side of
1; a row without a CI gets no verdict, whatever its p.

The caller names the experimental unit and the keys that are not replicates (blocks: the steps of
one sweep, days, hosts; factors: the load generator that measured the same configuration). A verdict
on a comparison that counted such a key as replication is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import StatsError
from ..findings import CONFIDENCE, Finding, Findings, fmt_ci, fmt_number, fmt_p
from ..tables import metric_words, value_text
from ._common import as_list, key_tuple, require_columns, require_positive_finite
from .comparison import Comparison, ComparisonTable, compare, factor_pairing_problem
from .ratio import ESTIMANDS

#: Verdict of a row whose CI is NaN: no direction may be claimed from its p-value alone.
NO_CI_VERDICT = "no verdict: CI not estimable"
#: Verdict of a row whose adjusted p is not below alpha, or whose CI includes 1.
NO_DIFFERENCE = "no difference shown"


def verdict_words(ci_low, ci_high, p_adjusted, alpha: float, up, down) -> np.ndarray:
    """The verdict rule, per row: a direction only where the adjusted p and the CI both show one.

    Parameters
    ----------
    ci_low, ci_high : array-like of float
        CI of the ratio.
    p_adjusted : array-like of float
        Family-adjusted p-values.
    alpha : float
        ``1 - confidence`` of the analysis.
    up, down : str or array-like of str
        Words for a ratio above / below 1 (per row allowed, e.g. "faster" for IOPS, "slower" for latency).

    Returns
    -------
    numpy.ndarray of str
        ``up`` when p_adjusted < alpha and ci_low > 1; ``down`` when p_adjusted < alpha and ci_high < 1;
        :data:`NO_CI_VERDICT` when a CI bound is NaN; otherwise :data:`NO_DIFFERENCE`.
    """
    lo = np.asarray(ci_low, dtype=float)
    hi = np.asarray(ci_high, dtype=float)
    sig = np.asarray(p_adjusted, dtype=float) < alpha
    estimable = np.isfinite(lo) & np.isfinite(hi)
    return np.where(~estimable, NO_CI_VERDICT,
                    np.where(sig & (lo > 1), up, np.where(sig & (hi < 1), down, NO_DIFFERENCE))).astype(object)


def _check_replication(row: Comparison, blocks: list[str], factors: list[str]) -> None:
    d = row.design
    if d is None:
        raise StatsError("the comparison has no design record (not made by storagebench.stats.compare)")
    for k in blocks:
        if not (k == row.factor or k in d.by or k in d.pair_on or k in d.blocks):
            raise StatsError(
                f"{k!r} is a block, not a replicate, but the comparison neither paired on it, grouped by it nor was "
                f"told (compare(..., blocks=[{k!r}])): its levels may have been counted as replicates; compare "
                f"again with pair_on/by/blocks naming {k!r}")
    problem = factor_pairing_problem(d.pair_on, factors)
    if problem:
        raise StatsError(problem)
    for k in factors:
        if not (k == row.factor or k in d.by or k in d.factors):
            raise StatsError(
                f"{k!r} is a factor, not a replicate, but the comparison was not told (by= or factors=): its "
                f"levels may have been pooled as replicates; compare again with factors=[{k!r}] or by=[{k!r}]")


def _fmt(x: float, digits: int) -> str:
    """``digits`` significant digits with thousands separators (:func:`storagebench.findings.fmt_number`)."""
    return "n/a" if x is None or not np.isfinite(x) else fmt_number(x, digits)


def _fmt_p(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.2g}"


def verdict(comparison, *, unit: str, blocks: str | Sequence[str] | None = None,
            factors: str | Sequence[str] | None = None, up: str = "higher", down: str = "lower",
            digits: int = 3) -> pd.DataFrame:
    """Plain-words verdicts of a comparison, with its estimand, CI, n, experimental unit, family and alpha.

    Parameters
    ----------
    comparison : ComparisonTable or Comparison
        A result of :func:`~storagebench.stats.compare` (or :func:`interaction`), or one of its rows.
    unit : str
        The experimental unit in words: what was independently repeated, e.g. ``"run (fresh fio process
        on the same file)"``, ``"set-up (file system built afresh)"`` or ``"VM-count step of one sweep
        (a block; nothing was repeated)"``. Required: a verdict names it.
    blocks : str or list of str, optional
        Keys that are blocks, not replicates (e.g. ``"vms"`` for the 12 VM counts of one sweep). Each must
        have been paired on, grouped by or declared in the comparison, else the verdict is refused.
    factors : str or list of str, optional
        Keys that are factors, not replicates (e.g. ``"source_tool"``: DiskSPD and FIO measured the same
        configuration). Each must have been grouped by or averaged over (``compare(factors=...)``); one that
        was paired on, or not named at all, is refused.
    up, down : str
        Words for a ratio above / below 1 ("faster"/"slower" for IOPS; "slower"/"faster" for latency).
    digits : int
        Significant digits of the ratio and its CI in the text (p-values get 2 significant digits).

    Returns
    -------
    pandas.DataFrame
        One row per comparison row: the ``by`` keys, ``factor, level, baseline, metric, estimand, ratio,
        ci_low, ci_high, confidence, alpha, n`` (pairs, or units per arm as "n_baseline/n_other"),
        ``unit, design, p, p_adjusted, family, verdict`` (:func:`verdict_words`), ``equivalent`` and
        ``text`` (one sentence saying all of it).

    Raises
    ------
    StatsError
        Not a comparison; empty ``unit``; a block or factor the comparison counted as replication.

    Notes
    -----
    Pseudo-replication: Hurlbert (1984), Ecol. Monogr. 54:187. Reporting a ratio with its CI, n and the
    adjustment: Hoefler & Belli (2015), "Scientific benchmarking of parallel computing systems", SC '15,
    rules 3-6; Kalibera & Jones (2013), ISMM.
    """
    if isinstance(comparison, ComparisonTable):
        rows, by = list(comparison.rows), list(comparison.by)
    elif isinstance(comparison, Comparison):
        rows, by = [comparison], [k for k, _ in comparison.group]
    else:
        raise StatsError(f"comparison must be a ComparisonTable or a Comparison (from compare), got "
                         f"{type(comparison).__name__}")
    if not isinstance(unit, str) or not unit.strip():
        raise StatsError("unit must name the experimental unit in words (what was independently repeated), "
                         f"got {unit!r}")
    blocks_l, factors_l = as_list(blocks), as_list(factors)
    for r in rows:
        _check_replication(r, blocks_l, factors_l)
    out = []
    for r in rows:
        word = str(verdict_words([r.ci_low], [r.ci_high], [r.p_adjusted], r.alpha, up, down)[0])
        n = f"{r.n_baseline}" if r.paired else f"{r.n_baseline}/{r.n_other}"
        n_words = f"{r.n_baseline} pairs" if r.paired else f"{r.n_baseline} vs {r.n_other} units"
        where = ", ".join(f"{k}={v}" for k, v in r.group)
        conf = f"{r.confidence:.{max(0, -int(math.floor(math.log10(1 - r.confidence))) - 2)}%}"
        what = ESTIMANDS.get(r.estimand, r.estimand)
        caveat = ""
        if word == NO_DIFFERENCE and np.isfinite(r.ci_low) and (r.ci_low > 1 or r.ci_high < 1):
            caveat = " (the unadjusted CI excludes 1, the family-adjusted p does not)"
        eq = ""
        if r.equivalent is not None:
            lo_b, hi_b = r.margin if isinstance(r.margin, tuple) else (1 - r.margin, 1 + r.margin)
            eq = (f"; equivalence within [{lo_b:g}, {hi_b:g}] {'shown' if r.equivalent else 'not shown'} "
                  f"(TOST p = {_fmt_p(r.p_equivalence)})")
        text = (f"{(where + ': ') if where else ''}{r.factor or 'level'} {r.level} vs {r.baseline}, {r.metric}: "
                f"{what} = {_fmt(r.ratio, digits)} ({conf} CI {_fmt(r.ci_low, digits)} to {_fmt(r.ci_high, digits)}), "
                f"n = {n_words}; experimental unit: {unit}; {r.design}; family: {r.family}; adjusted p = "
                f"{_fmt_p(r.p_adjusted)} at alpha = {r.alpha:g}: {word}{caveat}{eq}."
                + (f" Note: {r.note}." if r.note else ""))
        rec = {k: v for k, v in r.group}
        rec.update(factor=r.factor, level=r.level, baseline=r.baseline, metric=r.metric, estimand=r.estimand,
                   ratio=r.ratio, ci_low=r.ci_low, ci_high=r.ci_high, confidence=r.confidence, alpha=r.alpha, n=n,
                   unit=unit, design=str(r.design), p=r.p, p_adjusted=r.p_adjusted, family=r.family, verdict=word,
                   equivalent=r.equivalent, text=text)
        out.append(rec)
    cols = by + ["factor", "level", "baseline", "metric", "estimand", "ratio", "ci_low", "ci_high", "confidence",
                 "alpha", "n", "unit", "design", "p", "p_adjusted", "family", "verdict", "equivalent", "text"]
    return pd.DataFrame(out, columns=cols)


def verdict_findings(comparison, *, unit: str, blocks: str | Sequence[str] | None = None,
                     factors: str | Sequence[str] | None = None, up: str = "higher", down: str = "lower",
                     digits: int = 3, title: str = "", provenance: str = ""):
    """The verdicts of a comparison as :class:`~storagebench.findings.Findings`: one short sentence per row.

    Each sentence states the group, the ratio with its CI, the adjusted p and the verdict; the n, the
    experimental unit, the design and the family go into the finding's fields (shown beside the sentence,
    recorded in the report's sidecar). Same refusals as :func:`verdict`, which computes every value.

    Parameters
    ----------
    comparison, unit, blocks, factors, up, down, digits
        As in :func:`verdict`.
    title : str
        The question the findings answer.
    provenance : str
        Where the data come from, in one line.

    Returns
    -------
    storagebench.findings.Findings
    """
    frame = verdict(comparison, unit=unit, blocks=blocks, factors=factors, up=up, down=down, digits=digits)
    rows = list(comparison.rows) if isinstance(comparison, ComparisonTable) else [comparison]
    # the spread behind the CI, said so that it is not read as a sweep report's pooled interval
    spread = f"spread: {comparison.spread}; " if isinstance(comparison, ComparisonTable) else ""
    items = []
    for r, v in zip(rows, frame.itertuples(index=False), strict=True):
        where = ", ".join(value_text(k, val) for k, val in r.group)  # "bs 4 KiB", not "bs_bytes 4096"
        conf = f"{r.confidence:.{max(0, -int(math.floor(math.log10(1 - r.confidence))) - 2)}%}"  # 99.5%, not 100%
        ci = (f"{conf} CI {_fmt(r.ci_low, digits)} to {_fmt(r.ci_high, digits)}" if np.isfinite(r.ci_low)
              and np.isfinite(r.ci_high) else "CI not estimable")
        p_text = fmt_p(r.p_adjusted)
        sentence = (f"{(where[0].upper() + where[1:] + ': ') if where else ''}{metric_words(r.metric)} at "
                    f"{r.factor or 'level'} "
                    f"{r.level} is {_fmt(r.ratio, digits)} times that at {r.baseline} ({ci}; adjusted p "
                    f"{p_text if p_text.startswith('<') else '= ' + p_text}); verdict: {v.verdict}.")
        items.append(Finding(sentence, estimate=r.ratio, ci=(r.ci_low, r.ci_high), confidence=r.confidence,
                             n=r.n_baseline if r.paired else min(r.n_baseline, r.n_other),
                             unit_of_replication=(f"matched pairs, unit: {unit}" if r.paired else
                                                  f"per arm, unit: {unit}"),
                             method=f"{ESTIMANDS.get(r.estimand, r.estimand)}; {r.design}; {spread}family: {r.family}",
                             unit="ratio", key=f"{r.metric}:{where}:{r.level}"))
    return Findings(tuple(items), title=title, provenance=provenance)


_ADJUST_SHORT = {"holm": "Holm", "bonferroni": "Bonferroni", "hommel": "Hommel", "bh": "Benjamini-Hochberg",
                 "fdr_bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli", "fdr_by": "Benjamini-Yekutieli"}


def _family_short(table: ComparisonTable) -> str:
    if table.question_family:  # adjust_family: the whole question is the family, and the words say its size
        return table.question_family
    k = sum(r.estimable for r in table.rows)
    name = _ADJUST_SHORT.get(table.adjust)
    if k == 1:
        return "a single comparison (nothing to adjust for)"
    if name is None:
        return f"no multiplicity adjustment ({k} comparisons)"
    return f"p adjusted by {name} over {k} comparisons"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict_summary(comparison: ComparisonTable, *, unit: str, blocks: str | Sequence[str] | None = None,
                    factors: str | Sequence[str] | None = None, up: str = "higher", down: str = "lower",
                    per: str | None = None, name_by: str | None = None, what: str = "", label: str = "",
                    digits: int = 3, key: str = ""):
    """A comparison's verdicts in one sentence (or one per level of ``per``): where the ratio is up, down or not shown.

    Each sentence gives the groups by verdict with each ratio, its CI and (for a direction) its adjusted
    p; its fields (shown beside it) name n and the experimental unit, the estimand, the confidence of the
    CIs, the multiplicity family and alpha. A group whose unadjusted CI excludes 1 while its adjusted p is not below
    alpha is listed apart ("no difference shown after the multiplicity adjustment"), with its adjusted p. Every value comes from the comparison (:func:`verdict`, whose refusals
    apply); nothing is typed in.

    Parameters
    ----------
    comparison : ComparisonTable
        From :func:`~storagebench.stats.compare` (with ``by`` groups) or :func:`interaction`.
    unit, blocks, factors, up, down, digits
        As in :func:`verdict`.
    per : str, optional
        A ``by`` column: one sentence per level of it (``"source_tool"``: one per tool), each naming the
        table's whole family.
    name_by : str, optional
        The ``by`` column naming a group in the sentence (``"pattern"``); default every ``by`` key but ``per``.
    what : str, optional
        What the ratio is, in words; default ``"<metric> at <factor> <level> / <baseline>"``.
    label : str, optional
        A lead-in ("Averaged over the two tools").
    key : str, optional
        Prefix of the findings' keys (default the metric).

    Returns
    -------
    storagebench.findings.Findings
        One finding per sentence, keys ``<key>:summary`` or ``<key>:summary:<per level>``; the finding's
        ``n`` is the fewest pairs (units per arm) of its rows.

    Raises
    ------
    StatsError
        Not a ComparisonTable; ``per`` or ``name_by`` not a ``by`` column; the refusals of :func:`verdict`.
    """
    if not isinstance(comparison, ComparisonTable):
        raise StatsError(f"comparison must be a ComparisonTable (from compare), got {type(comparison).__name__}")
    for name, col in (("per", per), ("name_by", name_by)):
        if col is not None and col not in comparison.by:
            raise StatsError(f"{name}={col!r} must be one of the comparison's by columns {list(comparison.by)}")
    frame = verdict(comparison, unit=unit, blocks=blocks, factors=factors, up=up, down=down, digits=digits)
    rows = list(comparison.rows)
    levels = list(dict.fromkeys(dict(r.group)[per] for r in rows)) if per else [None]
    hidden = {per} if per else set()
    family = _family_short(comparison)
    items = []
    for lev in levels:
        picked = [(r, w) for r, (_, w) in zip(rows, frame.iterrows(), strict=True)
                  if per is None or dict(r.group)[per] == lev]
        if not picked:
            continue
        r0 = picked[0][0]
        adjusted_away = "adjusted away"
        groups: dict[str, list[str]] = {up: [], down: [], adjusted_away: [], NO_DIFFERENCE: [], NO_CI_VERDICT: []}
        for r, w in picked:
            g = {k: v for k, v in r.group if k not in hidden}
            name = str(g[name_by]) if name_by else (", ".join(f"{k} {v}" for k, v in g.items()) or "all")
            if w["verdict"] == NO_CI_VERDICT:
                groups[NO_CI_VERDICT].append(name)
                continue
            word = w["verdict"]
            if word == NO_DIFFERENCE and (r.ci_low > 1 or r.ci_high < 1):
                word = adjusted_away  # the unadjusted CI excludes 1, the family-adjusted p does not
            p = fmt_p(r.p_adjusted)
            ptext = f"; adjusted p {p if p.startswith('<') else '= ' + p}" if word != NO_DIFFERENCE else ""
            groups.setdefault(word, []).append(
                f"{name} ({fmt_number(r.ratio, digits)}; {fmt_ci(r.ci_low, r.ci_high, r.confidence, digits)}{ptext})")
        n_min = min(r.n_baseline if r.paired else min(r.n_baseline, r.n_other) for r, _ in picked)
        fewest = " (the fewest)" if len({(r.n_baseline, r.n_other) for r, _ in picked}) > 1 else ""
        ratio_what = what or f"{metric_words(r0.metric)} at {r0.factor} {r0.level} / {r0.baseline}"
        head = f"{label + ': ' if label else ''}{(str(lev) + ': ') if per else ''}{ratio_what} is "
        parts = [f"{word} for {_and(groups[word])}" for word in (up, down) if groups.get(word)]
        if groups[adjusted_away]:
            parts.append(f"{NO_DIFFERENCE} after the adjustment (the unadjusted CI excludes 1) for "
                         f"{_and(groups[adjusted_away])}")
        if groups[NO_DIFFERENCE]:
            parts.append(f"{NO_DIFFERENCE} for {_and(groups[NO_DIFFERENCE])}")
        if groups[NO_CI_VERDICT]:
            parts.append(f"no verdict (no CI) for {_and(groups[NO_CI_VERDICT])}")
        sentence = head[:1].upper() + head[1:] + "; ".join(parts) + "."
        items.append(Finding(
            sentence, n=n_min, confidence=r0.confidence,
            unit_of_replication=(f"{'pairs' if r0.paired else 'units per arm'}{fewest}; experimental unit: {unit}"),
            method=(f"{ESTIMANDS.get(r0.estimand, r0.estimand)}, {r0.confidence:.0%} CIs; {family} at alpha = "
                    f"{r0.alpha:g}; a direction only where the adjusted p < {r0.alpha:g} and the CI excludes 1"),
            key=f"{key or r0.metric}:summary" + (f":{lev}" if per else "")))
    return Findings(tuple(items))


def methods_table(tables: Mapping[str, ComparisonTable], *, units: Mapping[str, str] | str) -> pd.DataFrame:
    """What each comparison of a write-up did, one row per table: the Methods section's table.

    Parameters
    ----------
    tables : mapping of str to ComparisonTable
        Name of the analysis (``"combined"``, ``"per tool"``) -> its comparison.
    units : str or mapping of str to str
        The experimental unit in words, one for all or one per analysis name.

    Returns
    -------
    pandas.DataFrame
        Columns ``analysis``, ``compared`` (metric, levels), ``estimand``, ``experimental unit``, ``n`` (pairs
        or units per arm, "12" or "3-5"), ``design`` (:class:`~storagebench.stats.comparison.Design` in words),
        ``family`` (what was adjusted together), ``confidence``, ``alpha`` and ``method`` (the test, with
        its sources).

    Raises
    ------
    StatsError
        A value that is not a ComparisonTable; an analysis without a unit.
    """
    out = []
    for name, t in tables.items():
        if not isinstance(t, ComparisonTable):
            raise StatsError(f"tables[{name!r}] must be a ComparisonTable, got {type(t).__name__}")
        unit = units if isinstance(units, str) else units.get(name)
        if not unit:
            raise StatsError(f"no experimental unit given for analysis {name!r}")
        ns = sorted({r.n_baseline if r.paired else min(r.n_baseline, r.n_other) for r in t.rows})
        levels = ", ".join(map(str, dict.fromkeys(r.level for r in t.rows)))
        out.append({"analysis": name, "compared": f"{t.metric}: {t.factor} {levels} vs {t.baseline}"
                                                  + (f", per {', '.join(t.by)}" if t.by else ""),
                    "estimand": ESTIMANDS.get(t.estimand, t.estimand), "experimental unit": unit,
                    "n": str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}",
                    "design": str(t.design), "family": t.family, "confidence": t.confidence, "alpha": t.alpha,
                    "method": "; ".join(m.split("; ")[0] for m in dict.fromkeys(r.method for r in t.rows) if m)})
    return pd.DataFrame(out, columns=["analysis", "compared", "estimand", "experimental unit", "n", "design",
                                      "family", "confidence", "alpha", "method"])


def interaction(df: pd.DataFrame, factor: str, baseline, metric: str, *, modifier: str, modifier_baseline,
                pair_on: str | Sequence[str], by: str | Sequence[str] | None = None,
                blocks: str | Sequence[str] | None = None, confidence: float = CONFIDENCE,
                adjust: str = "holm") -> ComparisonTable:
    """Does the effect of ``factor`` depend on ``modifier``? The ratio of ratios per block, paired on blocks.

    For each block (``pair_on`` key), level of ``factor`` and level of ``modifier`` the log ratio
    ``log(other) - log(baseline)`` is formed; then, paired on blocks, the modifier's levels are compared
    with ``modifier_baseline`` by :func:`~storagebench.stats.compare` on those ratios. A row's ``ratio``
    is ``(other/baseline at the modifier level) / (other/baseline at modifier_baseline)`` as a geometric
    mean over blocks: 1 means the same effect for both (no interaction); its CI and p are the paired t
    on the log scale (the interaction contrast of a randomized-block two-factor design).

    Parameters
    ----------
    df : pandas.DataFrame
        One row per (group, block, factor level, modifier level).
    factor, baseline : str, object
        The compared column and its reference level (e.g. ``"stripe_width"``, 1).
    metric : str
        Metric column (> 0).
    modifier, modifier_baseline : str, object
        The second factor and its reference level (e.g. ``"source_tool"``, ``"DiskSPD"``).
    pair_on : str or list of str
        Block columns (e.g. ``"vms"``): each block must hold every (factor, modifier) combination once.
    by : str or list of str, optional
        One interaction test per group (e.g. ``"pattern"``).
    blocks : str or list of str, optional
        Declared blocks, as in :func:`~storagebench.stats.compare`.
    confidence, adjust
        As in :func:`~storagebench.stats.compare`; the family is every (group, factor level,
        modifier level) row of the result.

    Returns
    -------
    ComparisonTable
        ``factor`` of the table is ``modifier``; ``by`` is ``by`` plus ``factor`` (its non-baseline level);
        ``metric`` is ``"<metric>_ratio"``; ``estimand`` geometric.

    Raises
    ------
    StatsError
        Missing columns; a (group, block, factor, modifier) cell with no or several rows; errors of
        :func:`~storagebench.stats.compare`.

    Notes
    -----
    Interaction contrast in a randomized complete block design on the log scale (Montgomery, *Design and
    Analysis of Experiments*, 8th ed., sec. 5.3 and 4.1); the paired t on per-block contrasts is its
    test with blocks x contrast as the error term.
    """
    by_l, pair_l = as_list(by), as_list(pair_on)
    if not pair_l:
        raise StatsError("interaction needs blocks (pair_on=): the contrast is formed within each block; for "
                         "independent runs fit a model with the interaction term (storagebench.stats.fit_model)")
    require_columns(df, [factor, metric, modifier, *by_l, *pair_l])
    keys = [*by_l, modifier, *pair_l]
    counts = df.groupby([*keys, factor], sort=True, dropna=False).size()
    if (counts > 1).any():
        ex = counts[counts > 1].index[0]
        raise StatsError(f"cell {dict(zip([*keys, factor], key_tuple(ex), strict=True))} holds {int(counts.max())} rows; "
                         "interaction needs one row per (group, block, factor, modifier) cell")
    require_positive_finite(df[metric], metric)
    wide = df.assign(_log=np.log(df[metric].astype(float))).pivot_table(
        index=keys, columns=factor, values="_log", aggfunc="first")
    if baseline not in wide.columns:
        raise StatsError(f"baseline must be one of the levels of {factor!r} {sorted(map(str, wide.columns))}, got "
                         f"{baseline!r}")
    name = f"{metric}_ratio"
    parts = []
    for lev in [c for c in wide.columns if c != baseline]:
        d = (wide[lev] - wide[baseline])
        missing = d[d.isna()]
        if len(missing):
            raise StatsError(f"{factor}={lev!r} or {baseline!r} missing in cell "
                             f"{dict(zip(keys, key_tuple(missing.index[0]), strict=True))}; "
                             "every block must hold both levels for every modifier level")
        parts.append(d.rename(name).reset_index().assign(**{factor: lev}))
    ratios = pd.concat(parts, ignore_index=True)
    ratios[name] = np.exp(ratios[name])
    return compare(ratios, modifier, modifier_baseline, name, by=[*by_l, factor], pair_on=pair_l, blocks=blocks,
                   confidence=confidence, adjust=adjust)

"""A source's claims, checked: one verdict per claim, computed from the analysis, never typed into a notebook.

A published source states claims in words ("switching to a higher number of disk stripes per object can
give you some more IOPS"). How such a sentence is read as a test is metadata of the source, kept beside
its transcription (``data/published/<name>.yaml``, key ``claim_checks``, read by :func:`claim_checks`):

* a **ratio claim** (:class:`RatioClaim`) names the factor, the claimed level and the baseline, the metric,
  the direction claimed (``expect``: ``"higher"`` or ``"lower"``), over which groups of the comparison
  (``over``: ``"any"`` group, ``"every"`` group, or the ``"average"`` over them), optionally which groups
  (``where``) and the smallest effect the words imply (``min_ratio``: "a game-changer" read as +20%);
* a **parameter claim** (:class:`ParameterClaim`): "these numjobs and iodepth give the highest
  performance", checked against the plateau of the sweep (:func:`~storagebench.stats.recommend_parameters`).

:func:`claim_verdicts` applies the verdict rule of :mod:`storagebench.stats.verdicts` (a direction only
where the family-adjusted p < alpha and the CI lies on that side) to every group a ratio claim covers and
combines them; :func:`parameter_claim_verdicts` does the same for a parameter claim per tool;
:func:`claim_findings` writes the sentences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import StatsError
from ..findings import Finding, Findings, fmt_ci, fmt_number, fmt_p
from ._common import as_list
from .comparison import ComparisonTable
from .ratio import ESTIMANDS
from .saturation import PLATEAU_FRACTION, recommend_parameters
from .verdicts import verdict

#: The verdicts a claim can get.
CLAIM_VERDICTS = ("holds", "holds loosely", "contradicted", "not shown", "no verdict")
_OVER = ("any", "every", "average")
_EXPECT = ("higher", "lower")


@dataclass(frozen=True)
class RatioClaim:
    """A claim that one level of a factor gives more (or less) of a metric than another.

    Attributes
    ----------
    claim : str
        The claim as quoted from the source.
    factor : str
        The compared column (``"stripe_width"``).
    level, baseline : object
        The level the claim favours or disfavours, and the level it is compared with (ratio level/baseline).
    metric : str
        The metric column (``"iops"``).
    expect : {"higher", "lower"}
        The direction claimed for the ratio level/baseline.
    over : {"any", "every", "average"}
        ``"any"``: the claim holds when it holds for at least one group of the comparison ("can give some
        more"); ``"every"``: for each group in scope ("is a game-changer for writes"); ``"average"``: for
        the comparison averaged over the groups (a general statement), checked on a table without groups.
    where : mapping of str to object
        Groups in scope, by the comparison's ``by`` columns (``{"direction": "write"}``); empty: all.
    min_ratio : float or None
        The smallest ratio (>= 1, in the claimed direction: ``1 / min_ratio`` for ``"lower"``) the claim's
        words imply; None: any difference in the claimed direction.
    reading : str
        How the claim is read, in words (shown beside the verdict).
    """

    claim: str
    factor: str
    level: Any
    baseline: Any
    metric: str
    expect: str = "higher"
    over: str = "any"
    where: Mapping[str, Any] = field(default_factory=dict)
    min_ratio: float | None = None
    reading: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.claim, str) or not self.claim.strip():
            raise StatsError(f"a claim needs its quoted text, got {self.claim!r}")
        for name in ("factor", "metric"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise StatsError(f"claim {self.claim!r}: {name} must be a column name, got {getattr(self, name)!r}")
        if self.expect not in _EXPECT:
            raise StatsError(f"claim {self.claim!r}: expect must be one of {list(_EXPECT)}, got {self.expect!r}")
        if self.over not in _OVER:
            raise StatsError(f"claim {self.claim!r}: over must be one of {list(_OVER)}, got {self.over!r}")
        if not isinstance(self.where, Mapping):
            raise StatsError(f"claim {self.claim!r}: where must map by-columns to values, got {self.where!r}")
        object.__setattr__(self, "where", dict(self.where))
        if self.min_ratio is not None:
            ok = isinstance(self.min_ratio, (int, float)) and not isinstance(self.min_ratio, bool)
            if not ok or not math.isfinite(self.min_ratio) or self.min_ratio < 1:
                raise StatsError(f"claim {self.claim!r}: min_ratio must be a number >= 1 (the claimed effect in "
                                 f"its direction), got {self.min_ratio!r}")
            object.__setattr__(self, "min_ratio", float(self.min_ratio))

    @property
    def threshold(self) -> float:
        """The ratio level/baseline the claim must clear: ``min_ratio`` (higher), ``1 / min_ratio`` (lower), or 1."""
        m = self.min_ratio or 1.0
        return m if self.expect == "higher" else 1.0 / m


@dataclass(frozen=True)
class ParameterClaim:
    """A claim that a (numjobs, iodepth) cell gives the highest performance of a saturation sweep.

    Attributes
    ----------
    claim : str
        The claim as quoted.
    numjobs, iodepth : int
        The claimed cell (DiskSPD threads = fio ``numjobs``, Outstanding I/O per thread = ``iodepth``).
    metric : str
        ``"iops"`` or ``"bw_bytes_per_s"``.
    reading : str
        How the claim is read, in words.
    """

    claim: str
    numjobs: int
    iodepth: int
    metric: str = "iops"
    reading: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.claim, str) or not self.claim.strip():
            raise StatsError(f"a claim needs its quoted text, got {self.claim!r}")
        for name in ("numjobs", "iodepth"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise StatsError(f"claim {self.claim!r}: {name} must be a positive integer, got {v!r}")


_RATIO_KEYS = {"claim", "factor", "level", "baseline", "metric", "expect", "over", "where", "min_ratio", "reading"}
_PARAM_KEYS = {"claim", "kind", "numjobs", "iodepth", "metric", "reading"}


def claim_checks(metadata: Mapping) -> tuple[RatioClaim | ParameterClaim, ...]:
    """The claims of a source's metadata that say how they are tested (``claim_checks``).

    Parameters
    ----------
    metadata : mapping
        A published table's sidecar (:func:`storagebench.published.published_metadata`): ``claims`` (the
        quoted claims) and ``claim_checks``, a list of mappings, each with ``claim`` (one of ``claims``,
        verbatim) and either ``kind: parameters`` with ``numjobs``, ``iodepth`` (and ``metric``), or the
        fields of :class:`RatioClaim`.

    Returns
    -------
    tuple of RatioClaim or ParameterClaim
        In the order of ``claim_checks``; empty when the metadata has none.

    Raises
    ------
    StatsError
        ``claim_checks`` is not a list of mappings; an unknown key (named, with the allowed ones); a claim that
        is not quoted in ``claims``; the refusals of :class:`RatioClaim` / :class:`ParameterClaim`.
    """
    if not isinstance(metadata, Mapping):
        raise StatsError(f"metadata must be a mapping (a published table's sidecar), got {type(metadata).__name__}")
    checks = metadata.get("claim_checks") or []
    if not isinstance(checks, list) or not all(isinstance(c, Mapping) for c in checks):
        raise StatsError(f"claim_checks must be a list of mappings, got {checks!r}")
    quoted = [str(c) for c in metadata.get("claims") or []]
    out: list[RatioClaim | ParameterClaim] = []
    for i, c in enumerate(checks):
        kind = c.get("kind", "ratio")
        allowed = _PARAM_KEYS if kind == "parameters" else _RATIO_KEYS | {"kind"}
        if kind not in ("ratio", "parameters"):
            raise StatsError(f"claim_checks[{i}].kind must be 'ratio' or 'parameters', got {kind!r}")
        unknown = sorted(set(c) - allowed)
        if unknown:
            raise StatsError(f"claim_checks[{i}] has unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        if c.get("claim") not in quoted:
            raise StatsError(f"claim_checks[{i}].claim {c.get('claim')!r} is not one of the quoted claims {quoted}")
        fields = {k: v for k, v in c.items() if k != "kind"}
        try:
            out.append(ParameterClaim(**fields) if kind == "parameters" else RatioClaim(**fields))
        except TypeError as exc:
            raise StatsError(f"claim_checks[{i}]: {exc}") from None
    return tuple(out)


# --------------------------------------------------------------------------- ratio claims


def _row_status(claim: RatioClaim, ci_low: float, ci_high: float, p_adj: float, alpha: float) -> str:
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return "no verdict"
    t = claim.threshold
    sig = np.isfinite(p_adj) and p_adj < alpha
    if claim.expect == "higher":
        if sig and ci_low > 1 and ci_low > t:
            return "holds"
        if (sig and ci_high < 1) or (claim.min_ratio and ci_high < t):
            return "contradicted"
    else:
        if sig and ci_high < 1 and ci_high < t:
            return "holds"
        if (sig and ci_low > 1) or (claim.min_ratio and ci_low > t):
            return "contradicted"
    return "not shown"


def _combine(over: str, statuses: list[str]) -> str:
    if not statuses or all(s == "no verdict" for s in statuses):
        return "no verdict"
    if over == "every":
        if "contradicted" in statuses:
            return "contradicted"
        return "holds" if all(s == "holds" for s in statuses) else "not shown"
    # any / average (one row)
    if "holds" in statuses:
        return "holds"
    return "contradicted" if all(s == "contradicted" for s in statuses) else "not shown"


def _group_name(group: tuple, name_by: str | None) -> str:
    d = dict(group)
    if name_by and name_by in d:
        return str(d[name_by])
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "all"


def _rule_words(claim: RatioClaim, alpha: float, confidence: float) -> str:
    side = "above" if claim.expect == "higher" else "below"
    other = "below" if claim.expect == "higher" else "above"
    conf = f"{confidence:.0%}"
    size = ""
    if claim.min_ratio:
        size = (f" and {side} {claim.threshold:.3g} (the claimed size); ruled out where the {conf} CI lies "
                f"{other} {claim.threshold:.3g}")
    combine = {"any": "it holds when it holds for at least one group, and is contradicted when contradicted for "
                      "every group",
               "every": "it holds when it holds for every group in scope, and is contradicted when contradicted "
                        "for one",
               "average": "one comparison, averaged over the groups"}[claim.over]
    return (f"a group supports the claim where the adjusted p < {alpha:g} and the {conf} CI lies {side} 1{size}; "
            f"it contradicts it where the adjusted p < {alpha:g} and the CI lies {other} 1; {combine}; the p-values "
            f"are adjusted over the family, the {conf} CIs are per comparison (not adjusted)")


def claim_verdicts(claims: Sequence[RatioClaim | ParameterClaim], comparison: ComparisonTable, *, unit: str,
                   average: ComparisonTable | None = None, blocks: str | Sequence[str] | None = None,
                   factors: str | Sequence[str] | None = None, name_by: str | None = None,
                   digits: int = 3) -> pd.DataFrame:
    """A verdict per ratio claim: ``holds``, ``contradicted``, ``not shown`` or ``no verdict``, with its evidence.

    Each group in a claim's scope gets the verdict rule of :func:`~storagebench.stats.verdict` (the
    comparison's family-adjusted p and its CI), against the claimed size where the claim has one
    (``min_ratio``); the groups are combined as the claim's ``over`` says (see :class:`RatioClaim`).
    Parameter claims in ``claims`` are skipped (:func:`parameter_claim_verdicts`).

    Parameters
    ----------
    claims : sequence of RatioClaim (ParameterClaim ignored)
        From :func:`claim_checks`.
    comparison : ComparisonTable
        The per-group comparison (:func:`~storagebench.stats.compare` with ``by``), for ``over`` "any" and
        "every".
    unit : str
        The experimental unit in words (as in :func:`~storagebench.stats.verdict`).
    average : ComparisonTable, optional
        The comparison averaged over the groups (one row), for ``over="average"`` claims.
    blocks, factors : str or list of str, optional
        Keys that are not replicates, checked as :func:`~storagebench.stats.verdict` does.
    name_by : str, optional
        The ``by`` column naming a group in the text (``"pattern"``); default: every ``by`` key.
    digits : int
        Significant digits of the ratios in the text.

    Returns
    -------
    pandas.DataFrame
        One row per ratio claim: ``claim``, ``reading``, ``over``, ``scope`` (the groups covered),
        ``verdict``, ``holds_for``, ``contradicted_for``, ``not_shown_for`` (group names, "; "-joined),
        ``n`` (units or pairs per group, the fewest), ``unit``, ``estimand``, ``confidence``, ``alpha``,
        ``family``, ``evidence`` (each group's ratio, CI and adjusted p) and ``rule`` (the rule in words).

    Raises
    ------
    StatsError
        A claim about another factor, baseline or metric than its table; a claimed level the table does not
        compare; ``where`` naming a column that is not a ``by`` key or selecting no group; an "average"
        claim without ``average`` (or with a grouped one); the refusals of
        :func:`~storagebench.stats.verdict`.
    """
    if not isinstance(comparison, ComparisonTable):
        raise StatsError(f"comparison must be a ComparisonTable (from compare), got {type(comparison).__name__}")
    rows = []
    for claim in claims:
        if isinstance(claim, ParameterClaim):
            continue
        if not isinstance(claim, RatioClaim):
            raise StatsError(f"claims must be RatioClaim or ParameterClaim objects, got {type(claim).__name__}")
        table = comparison
        if claim.over == "average":
            if average is None:
                raise StatsError(f"claim {claim.claim!r} is about the average over the groups: pass average= (the "
                                 "comparison without by, the groups averaged within each unit: compare(factors=...))")
            if average.by:
                raise StatsError(f"average= must be a comparison without groups, got by={list(average.by)}")
            table = average
        for name, want, got in (("factor", claim.factor, table.factor), ("baseline", claim.baseline, table.baseline),
                                ("metric", claim.metric, table.metric)):
            if str(want) != str(got):
                raise StatsError(f"claim {claim.claim!r} is about {name} {want!r}; the comparison's {name} is {got!r}")
        bad = sorted(set(claim.where) - set(table.by))
        if bad:
            raise StatsError(f"claim {claim.claim!r}: where names {bad}, which are not by-columns of the comparison "
                             f"{list(table.by)}")
        v = verdict(table, unit=unit, blocks=blocks, factors=factors)
        picked = []
        for r, (_, w) in zip(table.rows, v.iterrows(), strict=True):
            g = dict(r.group)
            if str(r.level) != str(claim.level) or any(str(g[k]) != str(val) for k, val in claim.where.items()):
                continue
            picked.append((r, w))
        if not picked:
            raise StatsError(f"claim {claim.claim!r}: the comparison has no row for {claim.factor}={claim.level!r}"
                             + (f" where {claim.where}" if claim.where else ""))
        statuses, evidence = [], []
        names = {s: [] for s in CLAIM_VERDICTS}
        for r, _w in picked:
            s = _row_status(claim, r.ci_low, r.ci_high, r.p_adjusted, r.alpha)
            statuses.append(s)
            gname = _group_name(r.group, name_by) if r.group else "averaged over the groups"
            names[s].append(gname)
            p = fmt_p(r.p_adjusted)
            evidence.append(f"{gname}: {fmt_number(r.ratio, digits)} ({fmt_ci(r.ci_low, r.ci_high, r.confidence, digits)}"
                            f"; adjusted p {p if p.startswith('<') else '= ' + p})")
        r0 = picked[0][0]
        scope = "; ".join(_group_name(r.group, name_by) for r, _ in picked) if r0.group else "averaged over the groups"
        rows.append({
            "claim": claim.claim, "reading": claim.reading, "over": claim.over, "scope": scope,
            "verdict": _combine(claim.over, statuses), "holds_for": "; ".join(names["holds"]),
            "contradicted_for": "; ".join(names["contradicted"]), "not_shown_for": "; ".join(names["not shown"]),
            "n": min(r.n_baseline if r.paired else min(r.n_baseline, r.n_other) for r, _ in picked),
            "unit": unit, "estimand": f"{ESTIMANDS.get(r0.estimand, r0.estimand)}, {claim.factor} {claim.level} / "
                                      f"{claim.baseline}",
            "confidence": r0.confidence, "alpha": r0.alpha, "family": r0.family, "evidence": "; ".join(evidence),
            "rule": _rule_words(claim, r0.alpha, r0.confidence)})
    return pd.DataFrame(rows, columns=["claim", "reading", "over", "scope", "verdict", "holds_for", "contradicted_for",
                                       "not_shown_for", "n", "unit", "estimand", "confidence", "alpha", "family",
                                       "evidence", "rule"])


# --------------------------------------------------------------------------- parameter claims


def parameter_claim_verdicts(claims: Sequence[RatioClaim | ParameterClaim], sweep: pd.DataFrame, *,
                             by: str | Sequence[str] | None = None, fraction: float = PLATEAU_FRACTION,
                             latency: str = "lat_mean_ns") -> pd.DataFrame:
    """A verdict per parameter claim and group (tool): is the claimed cell on the sweep's plateau?

    Rule, per group of ``sweep``: with :func:`~storagebench.stats.recommend_parameters` (the cells whose
    mean metric reaches ``fraction`` of the best cell form the plateau; the recommended cell is the one on
    it with the fewest outstanding I/Os), the claimed cell

    * is ``contradicted`` when it is off the plateau (below ``fraction`` of the best cell);
    * ``holds`` when it is the recommended cell, or on the plateau with no fewer outstanding I/Os needed;
    * ``holds loosely`` when it is on the plateau but another cell reaches it with fewer outstanding I/Os
      (the claimed load buys no throughput, only latency);
    * gets ``no verdict`` when the sweep did not measure it.

    Ratio claims in ``claims`` are skipped.

    Parameters
    ----------
    claims : sequence of ParameterClaim (RatioClaim ignored)
    sweep : pandas.DataFrame
        A ``runs``-schema numjobs x iodepth sweep (one published value per cell, or runs).
    by : str or list of str, optional
        One verdict per group (the tool column, ``"source_tool"``).
    fraction : float
        Share of the best cell that counts as the plateau (default :data:`~storagebench.stats.saturation.PLATEAU_FRACTION`).
    latency : str
        Mean latency column, ns.

    Returns
    -------
    pandas.DataFrame
        One row per (claim, group): the ``by`` keys, ``claim``, ``reading``, ``claimed`` and ``recommended``
        ("numjobs=4, iodepth=16"), ``claimed_share_of_best`` (fraction), ``claimed_lat_ms``,
        ``claimed_numjobs``, ``claimed_iodepth``, ``recommended_numjobs``, ``recommended_iodepth``,
        ``recommended_<metric>``, ``recommended_lat_ms``, ``best_<metric>``, ``knee_outstanding_ios`` (Kneedle),
        ``cells`` (cells in the sweep), ``runs_per_cell`` (the fewest), ``verdict`` and ``evidence`` (words),
        ``rule``.

    Raises
    ------
    StatsError
        The refusals of :func:`~storagebench.stats.recommend_parameters` (missing columns, fewer than 3
        cells, bad ``fraction``).
    """
    by_l = as_list(by)
    groups = list(sweep.groupby(by_l, sort=True)) if by_l else [((), sweep)]
    out = []
    for claim in claims:
        if not isinstance(claim, ParameterClaim):
            continue
        claimed = f"numjobs={claim.numjobs}, iodepth={claim.iodepth}"
        oio = claim.numjobs * claim.iodepth
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            rec = recommend_parameters(part, claim.metric, latency, fraction=fraction)
            cells = rec.table.set_index(["numjobs", "iodepth"])
            rec_words = f"numjobs={rec.numjobs}, iodepth={rec.iodepth}"
            row = {**dict(zip(by_l, key, strict=True)), "claim": claim.claim, "reading": claim.reading,
                   "claimed": claimed, "recommended": rec_words, "claimed_numjobs": claim.numjobs,
                   "claimed_iodepth": claim.iodepth, "recommended_numjobs": rec.numjobs,
                   "recommended_iodepth": rec.iodepth, "claimed_share_of_best": math.nan,
                   "claimed_lat_ms": math.nan, f"recommended_{claim.metric}": rec.value,
                   "recommended_lat_ms": rec.latency_value / 1e6, f"best_{claim.metric}": rec.max_value,
                   "knee_outstanding_ios": rec.knee.x, "cells": len(cells), "runs_per_cell": int(cells["n"].min()),
                   "rule": f"plateau: {rec.rule}; knee: {rec.knee.method}"}
            if (claim.numjobs, claim.iodepth) not in cells.index:
                row.update(verdict="no verdict", evidence=f"the sweep did not measure {claimed}")
                out.append(row)
                continue
            cell = cells.loc[(claim.numjobs, claim.iodepth)]
            share, lat_ms = float(cell["share_of_max"]), float(cell[latency]) / 1e6
            row.update(claimed_share_of_best=share, claimed_lat_ms=lat_ms)
            best = f"best cell {fmt_number(rec.max_value)} {claim.metric}"
            if not bool(cell["qualifies"]):
                verdict_, ev = "contradicted", (f"{claimed} reaches {share:.1%} of the {best}, below the "
                                                f"{fraction:.0%} plateau")
            elif (rec.numjobs, rec.iodepth) == (claim.numjobs, claim.iodepth):
                verdict_, ev = "holds", f"{claimed} is the recommended cell ({share:.1%} of the {best})"
            elif rec.outstanding_ios < oio:
                verdict_, ev = "holds loosely", (
                    f"{claimed} is on the plateau ({share:.1%} of the {best}, {fmt_number(lat_ms)} ms), but "
                    f"{rec_words} reaches it with {fmt_number(rec.outstanding_ios)} instead of {oio} outstanding "
                    f"I/Os ({fmt_number(rec.latency_value / 1e6)} ms)")
            else:
                verdict_, ev = "holds", (f"{claimed} is on the plateau ({share:.1%} of the {best}) at the fewest "
                                         f"outstanding I/Os ({oio}); {rec_words}, the recommended cell, is also on the "
                                         f"plateau at {fmt_number(rec.outstanding_ios)} outstanding I/Os, and the "
                                         "rule does not choose between the two (no equivalence test was made)")
            row.update(verdict=verdict_, evidence=ev + f"; Kneedle knee at {fmt_number(rec.knee.x)} outstanding I/Os")
            out.append(row)
    cols = [*by_l, "claim", "reading", "claimed", "recommended", "claimed_share_of_best", "claimed_lat_ms"]
    frame = pd.DataFrame(out)
    return frame[[*cols, *(c for c in frame.columns if c not in cols)]] if len(frame) else frame


# --------------------------------------------------------------------------- sentences


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def claim_findings(ratio_verdicts: pd.DataFrame | None = None, parameter_verdicts: pd.DataFrame | None = None, *,
                   by: str | Sequence[str] | None = None, source: str = "The article", title: str = "",
                   provenance: str = ""):
    """The claims' verdicts as sentences (:class:`~storagebench.findings.Findings`), one per claim.

    Parameters
    ----------
    ratio_verdicts : pandas.DataFrame, optional
        From :func:`claim_verdicts`.
    parameter_verdicts : pandas.DataFrame, optional
        From :func:`parameter_claim_verdicts`; its groups (``by``) are told apart in one sentence per claim.
    by : str or list of str, optional
        The group columns of ``parameter_verdicts``.
    source : str
        Who made the claims ("The article").
    title, provenance : str
        As in :class:`~storagebench.findings.Findings`.

    Returns
    -------
    storagebench.findings.Findings
        Keys ``claim:<i>`` (ratio claims, in order) and ``claim:parameters:<i>``.
    """
    items = []
    if ratio_verdicts is not None:
        for i, r in enumerate(ratio_verdicts.itertuples(index=False)):
            parts = []
            if r.over == "average":
                detail = r.evidence.split(": ", 1)[-1]
            else:
                lists = [(w, getattr(r, c)) for w, c in (("holds for", "holds_for"),
                                                         ("is contradicted for", "contradicted_for"),
                                                         ("is not shown for", "not_shown_for")) if getattr(r, c)]
                parts = [f"it {w} {_and(names.split('; '))}" for w, names in lists]
                detail = ""
            reading = f" (read as: {r.reading})" if r.reading else ""
            sentence = (f"{source}'s claim \u201c{r.claim}\u201d{reading}: {r.verdict}"
                        + (f", {detail}" if detail else "") + (f"; {'; '.join(parts)}" if parts else "") + ".")
            items.append(Finding(sentence, n=int(r.n), confidence=float(r.confidence),
                                 unit_of_replication=f"per comparison; unit: {r.unit}",
                                 method=f"{r.estimand}, {r.confidence:.0%} CIs; family: {r.family}, alpha = {r.alpha:g}",
                                 key=f"claim:{i}"))
    if parameter_verdicts is not None and len(parameter_verdicts):
        by_l = as_list(by)
        for i, (claim, part) in enumerate(parameter_verdicts.groupby("claim", sort=False)):
            first = part.iloc[0]
            per = []
            for _, r in part.iterrows():
                who = ", ".join(str(r[k]) for k in by_l)
                per.append(f"{who + ': ' if who else ''}{r['verdict']} ({r['evidence']})")
            reading = f" (read as: {first['reading']})" if first["reading"] else ""
            items.append(Finding(f"{source}'s claim \u201c{claim}\u201d{reading}: " + "; ".join(per) + ".",
                                 n=int(part["cells"].min()),
                                 unit_of_replication=(f"sweep cells, {int(part['runs_per_cell'].min())} value(s) "
                                                      "each; no CI"),
                                 method=str(first["rule"]), key=f"claim:parameters:{i}"))
    return Findings(tuple(items), title=title, provenance=provenance)

"""Two-configuration comparisons with confidence intervals: :func:`compare`.

One row per (group, level): the level is compared with the baseline level of ``factor`` on one metric.
The vocabulary is the one of :mod:`storagebench.stats.ratio`:

* the **experimental unit** is what was independently repeated (a run by default; ``unit=`` names
  another one, e.g. a set-up, and its rows are averaged into one value first; with ``pair_on`` each
  key is one block holding one unit per arm). ``n_baseline``/``n_other`` count units or pairs.
* the **estimand** is the ratio of geometric means other/baseline (default), whose p-value, CI and
  TOST all come from one t statistic on the log scale; the ratio of arithmetic means (Fieller) only
  when asked for by name (``estimand="arithmetic"``).
* the **family** is the set of rows adjusted together for multiplicity: the estimable rows of one table.

Keys that are not replicates are named: ``blocks`` (steps of a sweep, days, hosts: paired on or
grouped by, never pooled) and ``factors`` (a load generator, a second treatment: grouped by, or
averaged over within each unit, never counted as replicates).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st

from ..errors import StatsError, StorageBenchWarning
from ..findings import CONFIDENCE
from ..schema import RUNS, names
from ._common import (
    BCA_MIN_N,
    as_list,
    check_confidence,
    check_margin,
    geometric_mean,
    key_tuple,
    require_columns,
    require_positive_finite,
)
from ._comparisontable import (  # noqa: F401 (TABLE_SUFFIXES, summary_table: their home is here)
    TABLE_SUFFIXES,
    Comparison,
    ComparisonTable,
    Design,
    summary_table,
)
from ._multiplicity import ADJUST_METHODS, adjust_family, adjust_pvalues, adjust_rows  # noqa: F401 (home here)
from .ratio import (
    ESTIMANDS,
    RATIO_METHODS,
    check_estimand,
    hedges_g,
    ratio_bca,
    ratio_ci,
    ratio_tost,
)

_BCA = ("CI = BCa bootstrap with {n} resamples of the {stat} (Efron 1987; scipy.stats.bootstrap; refused below "
        f"{BCA_MIN_N} per arm), p = 1 - the smallest level whose BCa interval contains the null (Efron & Tibshirani "
        "1993, sec. 15.4), so p < alpha exactly when the CI excludes 1")
_TOST = {"geometric": "TOST on the log scale with the same t and df, bounds log(low), log(high) (Schuirmann 1987)",
         "arithmetic": "TOST by two one-sided Fieller tests with the df of the CI (Hauschke, Kieser & Hothorn 1999)"}

_RESERVED = {"level", "n_baseline", "n_other", "gmean_baseline", "gmean_other", "mean_baseline", "mean_other",
             "estimate", "ratio", "ci_low",
             "ci_high", "p", "p_adjusted", "method", "equivalent", "note", "estimand", "design", "family"}


# --------------------------------------------------------------------------- one row


def _ratio_bounds(margin) -> tuple[float, float]:
    return margin if isinstance(margin, tuple) else (1.0 - margin, 1.0 + margin)


def _nan_row(**kw) -> Comparison:
    base = dict(gmean_baseline=math.nan, gmean_other=math.nan, mean_baseline=math.nan, mean_other=math.nan,
                estimate=math.nan, diff_ci_low=math.nan,
                diff_ci_high=math.nan, ratio=math.nan, ci_low=math.nan, ci_high=math.nan, p=math.nan,
                p_adjusted=math.nan, p_rank=math.nan, effect_size=math.nan, p_equivalence=math.nan,
                equivalent=None)
    base.update(kw)
    return Comparison(**base)


def _method_words(estimand: str, paired: bool, n_boot: int | None, margin) -> str:
    if n_boot:
        stat = {("geometric", False): "difference of mean logs", ("geometric", True): "mean log ratio",
                ("arithmetic", False): "ratio of means", ("arithmetic", True): "ratio of means (pairs resampled)"}
        head = (f"{ESTIMANDS[estimand]}{', paired' if paired else ''}; "
                + _BCA.format(n=n_boot, stat=stat[(estimand, paired)]))
    else:
        head = RATIO_METHODS[(estimand, paired)]
    scale = "log values" if estimand == "geometric" else "raw values"
    tail = ("Wilcoxon signed-rank test as p_rank (Wilcoxon 1945); Hedges' g_z of the paired differences on "
            + scale + " (Lakens 2013)" if paired else
            "Mann-Whitney U test as p_rank (Mann & Whitney 1947); Hedges' g on " + scale + " (Hedges & Olkin 1985)")
    diff = ("descriptive extra: difference of arithmetic means with its "
            + ("paired t CI" if paired else "Welch CI") + " (estimate, diff_ci_*), not the row's test")
    parts = [head, tail, diff]
    if margin:
        parts.append(_TOST[estimand] + (" (t-based also with the bootstrap)" if n_boot else ""))
    return "; ".join(parts)


def _row(x_base: np.ndarray, x_other: np.ndarray, c: _Cells, common: dict, rng) -> Comparison:
    """One comparison of two arms' values, with the options ``c`` of its :func:`compare` call."""
    paired, estimand, confidence, margin, n_boot = bool(c.pair), c.estimand, c.confidence, c.margin, c.n_boot
    nb, no = len(x_base), len(x_other)
    mb = float(np.mean(x_base)) if nb else math.nan
    mo = float(np.mean(x_other)) if no else math.nan
    kw = dict(common, n_baseline=nb, n_other=no, method=_method_words(estimand, paired, n_boot, margin),
              estimand=estimand, gmean_baseline=geometric_mean(x_base), gmean_other=geometric_mean(x_other), mean_baseline=mb,
              mean_other=mo, estimate=mo - mb)
    point = math.nan
    if nb and no:
        point = (float(np.exp(np.mean(np.log(x_other) - np.log(x_base)))) if paired else
                 float(np.exp(np.mean(np.log(x_other)) - np.mean(np.log(x_base))))) if estimand == "geometric" else mo / mb
    if paired and nb < 2:
        return _nan_row(**kw, ratio=point, note=f"not estimable: {nb} matched pair(s); needs >= 2")
    if nb < 2 or no < 2:
        return _nan_row(**kw, ratio=point, note=f"not estimable: n_baseline={nb}, n_other={no}; each arm needs >= 2 "
                        "units")
    rc = ratio_ci(x_other, x_base, confidence, estimand=estimand, paired=paired)
    if not np.isfinite(rc.p):
        return _nan_row(**kw, ratio=rc.ratio, note=rc.note)
    notes = [rc.note] if rc.note else []
    lo, hi, p = rc.ci_low, rc.ci_high, rc.p
    if n_boot:
        lo, hi, p, nt = ratio_bca(x_other, x_base, confidence, n_boot, rng, estimand=estimand, paired=paired)
        notes = [nt] if nt else []
    if paired:
        diff = x_other - x_base
        dci = st.ttest_1samp(diff, 0.0).confidence_interval(confidence) if np.var(diff) > 0 else None
    else:
        dci = st.ttest_ind(x_other, x_base, equal_var=False).confidence_interval(confidence)
    dlo, dhi = (float(dci.low), float(dci.high)) if dci is not None else (math.nan, math.nan)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p_rank = (float(st.wilcoxon(np.log(x_other) - np.log(x_base)).pvalue) if paired else
                      float(st.mannwhitneyu(x_other, x_base, alternative="two-sided").pvalue))
    except ValueError as exc:
        p_rank = math.nan
        notes.append(f"rank test not estimable: {exc}")
    scale = np.log if estimand == "geometric" else np.asarray
    g = hedges_g(scale(x_other), scale(x_base), paired=paired)
    p_eq, equivalent = math.nan, None
    if margin:
        p_eq = ratio_tost(x_other, x_base, _ratio_bounds(margin), 1 - confidence, estimand=estimand, paired=paired)
        if np.isfinite(p_eq):
            equivalent = bool(p_eq < 1 - confidence)
        else:
            notes.append("TOST not estimable")
    return Comparison(**kw, diff_ci_low=dlo, diff_ci_high=dhi, ratio=rc.ratio, ci_low=lo, ci_high=hi, p=p,
                      p_adjusted=math.nan, p_rank=p_rank, effect_size=g, p_equivalence=p_eq, equivalent=equivalent,
                      note="; ".join(notes))


# --------------------------------------------------------------------------- design: units, blocks, factors


def _varies(df: pd.DataFrame, col: str, keys: list[str]) -> pd.Series:
    """Cells (``keys``) in which ``col`` takes more than one value."""
    if not keys:
        n = pd.Series([df[col].nunique(dropna=False)], index=[()])
        return n[n > 1]
    n = df.groupby(keys, sort=True, dropna=False)[col].nunique(dropna=False)
    return n[n > 1]


def _check_not_mixed(df: pd.DataFrame, by: list[str], keys: list[str], factor: str, declared: list[str]) -> None:
    """Refuse pooling read and write rows, runs of different tools, or several rows of one run as replicates,
    checked within each ``by`` group (a group of one direction is fine whatever the other groups hold)."""
    for col, word, hint in (
        ("tool", "come from several tools", "a tool is a factor, not a replicate: compare factor='tool' "
         "(storagebench.stats.cross_tool), put 'tool' in by=, or declare factors=['tool']"),
        ("direction", "mix directions", "read and write rows of a run are not replicates: filter one "
         "direction or put 'direction' in by="),
    ):
        if col not in df.columns or col == factor or col in keys or col in declared:
            continue
        mixed = _varies(df, col, by)
        if len(mixed):
            rows = df[_match(df, by, mixed.index[0])] if by else df
            where = f" in group {dict(zip(by, key_tuple(mixed.index[0]), strict=True))}" if by else ""
            vals = sorted(map(str, rows[col].dropna().unique()))
            raise StatsError(f"rows {word} {vals}{where}; {hint}")
    if "run_id" in df.columns and "run_id" not in keys:
        dup = df.duplicated(subset=keys + [factor, "run_id"], keep=False)
        if dup.any():
            ex = df.loc[dup, "run_id"].iloc[0]
            raise StatsError(
                f"{int(dup.sum())} rows share a run_id within one cell (e.g. run_id {ex!r}): several hosts/jobs "
                "of one run are not independent replicates; aggregate per run first (storagebench.runlevel.per_run, "
                "tidy/run_totals.parquet) "
                "or put 'host'/'job' in by="
            )


def _match(df: pd.DataFrame, cols: list[str], key) -> np.ndarray:
    m = np.ones(len(df), dtype=bool)
    for c, v in zip(cols, key_tuple(key), strict=True):
        m &= (df[c] == v).to_numpy()
    return m


def _check_design(df: pd.DataFrame, factor: str, keys: _Keys) -> list[str]:
    """Refuse a block or a factor counted as a replicate; return the factors to average over."""
    by, pair_on, unit, blocks, factors = keys.by, keys.pair, keys.unit, keys.blocks, keys.factors
    both = sorted(set(blocks) & set(factors))
    if both:
        raise StatsError(f"{both} are declared both blocks and factors; a key is one or the other")
    named = [factor, *by, *pair_on, *unit]
    for k in blocks + factors:
        if k == factor:
            raise StatsError(f"{k!r} is the compared factor; it cannot also be declared a block or a factor")
    problem = factor_pairing_problem(pair_on, factors)
    if problem:
        raise StatsError(problem)
    for k in factors:
        if k in unit:
            raise StatsError(f"{k!r} is a factor, not the experimental unit; remove it from unit=")
    cell = [*by, factor]
    for k in blocks:
        if k in named:
            continue
        mixed = _varies(df, k, cell)
        if len(mixed):
            raise StatsError(
                f"{k!r} is a block (its levels are steps of a sweep, days or hosts, not independent repeats) but "
                f"it varies within the cells {cell} (e.g. {key_tuple(mixed.index[0])}): its rows would be pooled "
                f"as replicates; pair on it (pair_on={[*pair_on, k]}) or put it in by=")
    averaged = []
    for k in factors:
        if k in named:
            continue
        if len(_varies(df, k, cell)):
            if not (pair_on or unit):
                raise StatsError(
                    f"{k!r} is a factor (not a replicate) that varies within the cells {cell}: put it in by= "
                    f"(one comparison per level), or name the unit it is averaged within (pair_on= or unit=)")
            averaged.append(k)
    return averaged


def _to_units(df: pd.DataFrame, metric: str, keys: list[str], averaged: list[str], by: list[str],
              estimand: str) -> pd.DataFrame:
    """One row per experimental unit (``keys``): the geometric (or arithmetic) mean of its rows."""
    if averaged:
        combos = df.groupby(keys, sort=True, dropna=False)[averaged].apply(
            lambda g: tuple(sorted(map(str, g.drop_duplicates().itertuples(index=False, name=None)))))
        frame = combos.rename("_levels").reset_index()
        per_group = frame.groupby(by, sort=True)["_levels"].nunique() if by else pd.Series([frame["_levels"].nunique()])
        if (per_group > 1).any():
            ex = frame.groupby(by, sort=True)["_levels"].unique().iloc[int(np.argmax(per_group.to_numpy() > 1))] \
                if by else frame["_levels"].unique()
            raise StatsError(
                f"the units do not all hold the same levels of {averaged} (e.g. {list(ex)[:2]}): averaging over "
                "unbalanced factor levels would compare different mixes; filter the rows to a balanced set")
    values = df[metric].astype(float)
    work = df[keys].copy()
    work["_v"] = np.log(values.to_numpy()) if estimand == "geometric" else values.to_numpy()
    out = work.groupby(keys, sort=True, dropna=False)["_v"].mean().reset_index()
    out[metric] = np.exp(out["_v"]) if estimand == "geometric" else out["_v"]
    return out.drop(columns="_v")


#: the factor columns of the runs schema (role ``factor``); with the columns a study adds (pattern, stripe_width ...) these are what
#: ``compare`` without ``by`` pools when they vary (identity, metric and provenance columns never count).
_SCHEMA_FACTORS = names("runs", role="factor")
#: The columns that are factors of a run, never its replicates: the fio factors of the runs schema and the tool
#: (``tool``; ``source_tool`` in the published seed tables, whose ``tool`` is ``"published"``).
FACTOR_COLUMNS: tuple[str, ...] = (*_SCHEMA_FACTORS, "source_tool")


def factor_pairing_problem(pair_on: Sequence[str], factors: Sequence[str]) -> str | None:
    """Why pairing on ``pair_on`` counts a factor as a replicate, or ``None``: the one rule of
    :func:`compare`, :func:`storagebench.stats.verdict` and ``storagebench compare --pair-on``.

    A factor (the load generator that measured the same configuration, a fio option) is not a block: pairing
    on it makes each of its levels a pair, so n grows with the number of its levels (seed 002's 24 "pairs" were
    12 VM counts x 2 tools).

    Parameters
    ----------
    pair_on : sequence of str
        The columns paired on.
    factors : sequence of str
        The columns known to be factors (``factors=``; the CLI: :data:`FACTOR_COLUMNS`).

    Returns
    -------
    str or None
        The message naming the first factor paired on, the pairing and what to do instead.
    """
    for k in factors:
        if k in pair_on:
            return (f"{k!r} is a factor, not a replicate, but the comparison paired on it "
                    f"(pair_on={list(pair_on)}), so n counts its levels as pairs (n would grow with the number of "
                    f"{k} levels); compare again with {k!r} in by= (one comparison per level; CLI --by {k}) or in "
                    "factors= (averaged within each block)")
    return None


def check_pairing(columns: Sequence[str], pair_on: Sequence[str] | None, *, where: str = "pair_on") -> None:
    """Refuse pairing on a column known to be a factor (:data:`FACTOR_COLUMNS` among ``columns``), by the rule of
    :func:`factor_pairing_problem`: what ``storagebench compare --pair-on`` and ``compare.ipynb`` check before
    :func:`compare`, which refuses it only for the ``factors=`` it is told.

    Parameters
    ----------
    columns : sequence of str
        The table's columns.
    pair_on : sequence of str or None
        The columns to pair on.
    where : str
        The input's name in the message (``"--pair-on"``).

    Raises
    ------
    StatsError
        A factor column in ``pair_on``; the message names it and says to put it in ``by``.
    """
    problem = factor_pairing_problem(list(pair_on or []), [c for c in FACTOR_COLUMNS if c in columns])
    if problem:
        raise StatsError(f"{where}: {problem}")


def pooled_factors(df: pd.DataFrame, factor: str, named: Sequence[str] = (),
                   keys: Sequence[str] = (), unit: Sequence[str] = ()) -> dict[str, list]:
    """The factor columns whose levels vary within the levels of ``factor`` and are not named.

    Parameters
    ----------
    df : pandas.DataFrame
        The compared table.
    factor : str
        The compared column.
    named : sequence of str
        Columns already accounted for (``by``, ``pair_on``, ``unit``, ``blocks``, ``factors``, the metric).
    keys : sequence of str
        Key columns (``pair_on``, ``unit``): a column constant within each key (``rw`` of a ``pattern``) is
        accounted for by it.
    unit : sequence of str
        The experimental unit's columns: a column that varies within a unit (its repetitions) is averaged
        within the unit by design, not pooled.

    Returns
    -------
    dict of str to list
        ``{column: [levels]}`` for each schema factor (:data:`_SCHEMA_FACTORS`) or study column (not a
        ``runs`` schema column, at most 32 levels) that takes several values within a level of ``factor``;
        a column with a different value on every row of every arm (more than 4 rows) is an identifier
        and is left out.
    """
    schema = {c.name for c in RUNS}
    skip = {factor, *named}
    out = {}
    for col in df.columns:
        if col in skip or (col in schema and col not in _SCHEMA_FACTORS):
            continue
        values = df[col].dropna()
        if values.nunique() < 2 or values.nunique() > 32 or (col not in schema and values.dtype.kind == "f"
                                                              and values.nunique() > 8):
            continue
        if keys and (df.groupby(list(keys), dropna=False)[col].nunique() <= 1).all():
            continue
        if unit and (df.groupby(list(unit), dropna=False)[col].nunique() > 1).any():
            continue
        per_level = df.groupby(factor, dropna=False)[col].agg(["nunique", "size"])
        if (per_level["size"] > 4).all() and (per_level["nunique"] == per_level["size"]).all():
            continue  # a distinct value per row of each arm (a subject or VM id): an identifier, not a factor
        if (df.groupby(factor, dropna=False)[col].nunique() > 1).any():
            out[str(col)] = _levels_sorted(values)
    return out


def _levels_sorted(values) -> list:
    vals = [v.item() if isinstance(v, np.generic) else v for v in pd.unique(values)]
    try:
        return sorted(vals)
    except TypeError:
        return vals


def _rng(seed: int | None, group: tuple, level) -> np.random.Generator:
    """Bootstrap generator of one row: derived from ``seed`` and the row's (group, level) key, reproducibly."""
    if seed is None:
        return np.random.default_rng()
    key = repr(tuple((k, str(v.item() if isinstance(v, np.generic) else v)) for k, v in group) + (str(level),))
    return np.random.default_rng(np.random.SeedSequence(entropy=int(seed), spawn_key=(zlib.crc32(key.encode()),)))


def compare(
    df: pd.DataFrame,
    factor: str,
    baseline,
    metric: str,
    *,
    by: str | Sequence[str] | None = None,
    pair_on: str | Sequence[str] | None = None,
    estimand: str = "geometric",
    unit: str | Sequence[str] | None = None,
    blocks: str | Sequence[str] | None = None,
    factors: str | Sequence[str] | None = None,
    margin: float | None = None,
    confidence: float = CONFIDENCE,
    adjust: str = "holm",
    n_boot: int | None = None,
    seed: int | None = 0,
) -> ComparisonTable:
    """Compare every level of ``factor`` with its ``baseline`` level on ``metric``, per group.

    Parameters
    ----------
    df : pandas.DataFrame
        A ``runs``-schema table (or any long table). Rows of several directions (or ``tool`` values) in
        one ``by`` group are refused unless ``direction`` (``tool``) is in ``by``/``pair_on``; rows sharing
        a ``run_id`` within one cell are refused (aggregate hosts/jobs per run first).
    factor : str
        Column whose levels are compared (e.g. ``"stripe_width"``, ``"tool"``, ``"ioengine"``).
    baseline : object
        The reference level of ``factor``; every other level is compared with it (ratio other/baseline).
    metric : str
        Metric column, > 0 and finite (e.g. ``"iops"`` in 1/s, ``"lat_mean_ns"`` in ns).
    by : str or list of str, optional
        Group columns: one comparison per group (e.g. ``["rw", "bs_bytes"]`` for a pattern).
    pair_on : str or list of str, optional
        Block columns matching a baseline unit with one unit of the other level (e.g. ``"vms"``,
        ``"repetition"``). Each key must appear exactly once in each arm of a group (after averaging
        within units).
    estimand : {"geometric", "arithmetic"}
        ``"geometric"`` (default): ratio of geometric means; p, CI and TOST from Welch's t on log values
        (independent) or the paired t on log ratios (paired). ``"arithmetic"``: ratio of arithmetic means
        with Fieller's CI, Fieller's test for p and a Fieller TOST (:func:`~storagebench.stats.ratio_ci`).
    unit : str or list of str, optional
        Columns identifying the experimental unit within a level (what was independently repeated, e.g.
        ``"setup"``): the rows of one unit enter as one value, their geometric mean (arithmetic for the
        arithmetic estimand), and ``n`` counts units. Default: every row is one unit.
    blocks : str or list of str, optional
        Keys that are blocks, not replicates (the steps of one sweep, days, hosts). Each must be in
        ``by`` or ``pair_on`` when it varies within a cell, else the comparison is refused.
    factors : str or list of str, optional
        Keys that are factors, not replicates (the load generator that measured the same configuration).
        One in ``by`` gives one comparison per level; one that varies within a unit or block is averaged
        over (balanced levels required); one in ``pair_on`` is refused (its levels would count as pairs).
    margin : float or (float, float), optional
        Equivalence margin as a fraction (0.01 for "within 1%": ratio bounds 0.99 and 1.01), or explicit
        ratio bounds ``(low, high)`` such as ``(0.8, 1.25)``: adds a TOST on the estimand's scale.
    confidence : float
        Confidence level of every CI (default :data:`~storagebench.findings.CONFIDENCE`); every test runs at ``alpha = 1 - confidence``.
    adjust : {"holm", "bh", "bonferroni", "hommel", "by", "none"}
        Multiple-comparison adjustment of ``p`` across all estimable rows of the table (the family;
        ``statsmodels.stats.multitest.multipletests``): Holm (1979) for confirmatory claims,
        Benjamini-Hochberg (1995) FDR for screening.
    n_boot : int, optional
        When given (>= 100), the CI is a BCa bootstrap of the same estimand with that many resamples and
        ``p`` the inverted BCa test; refused for cells with fewer than 10 units per arm (pairs), and each
        row's ``note`` carries BCa's simulated coverage (0.89-0.94 at n = 10 for a nominal 95%).
    seed : int, optional
        Seed of the bootstrap: each row's generator is derived from it and the row's (group, level) key,
        so rows get different streams and results are reproducible (None: fresh entropy).

    Returns
    -------
    ComparisonTable
        One :class:`Comparison` per group and non-baseline level. ``to_frame()`` columns: the ``by``
        keys, ``level, n_baseline, n_other, gmean_baseline, gmean_other`` (each arm's geometric mean of
        its units, the metric's unit: their quotient is the default ratio), ``ratio, ci_low, ci_high`` (the
        estimand), ``p, p_adjusted, method, equivalent, note`` and the extras ``mean_baseline, mean_other,
        estimate`` (arithmetic means and their difference other - baseline: descriptive, the arms of the
        ``estimand="arithmetic"`` ratio), ``baseline, metric, paired, confidence, diff_ci_low, diff_ci_high,
        p_rank, effect_size, margin, p_equivalence, estimand, design, family``.

    Raises
    ------
    StatsError
        Missing column; ``factor`` with one level; ``baseline`` not a level; ``metric`` with NaN or
        values <= 0; NaN in ``factor``/``by``/``pair_on``/``unit``; mixed directions or tools within a
        group, or a repeated ``run_id``; unmatched or duplicated ``pair_on`` keys (named); a block or a
        factor that would be counted as a replicate; unbalanced factor levels to average over; unknown
        ``adjust`` or ``estimand``; bad ``confidence``, ``margin`` or ``n_boot``; BCa asked for a cell with
        fewer than 10 units.

    Notes
    -----
    Welch (1947), Biometrika 34:28; Student (1908), Biometrika 6:1; Fieller (1954), J. R. Stat. Soc. B
    16:175; Schuirmann (1987), J. Pharmacokinet. Biopharm. 15:657 (TOST; ``p_equivalence`` is not
    multiplicity-adjusted: claiming equivalence in *every* group is an intersection-union test, Berger &
    Hsu 1996). Mann-Whitney / Wilcoxon for ``p_rank``. Blocks and pseudo-replication: Hurlbert (1984),
    Ecol. Monogr. 54:187; Kalibera & Jones (2013), ISMM. Groups with fewer than 2 units per arm (or 2
    pairs) give a row with NaN p/CI and a "not estimable" note, never a silent number.
    """
    k = _Keys(as_list(by), as_list(pair_on), as_list(unit), as_list(blocks), as_list(factors))
    _check_keys(df, factor, metric, k)
    estimand = check_estimand(estimand)
    confidence = check_confidence(confidence)
    margin = check_margin(margin)
    _check_adjust_and_boot(adjust, n_boot)
    _check_levels(df, factor, baseline, metric, k)
    _check_not_mixed(df, k.by, k.by + k.pair, factor, k.factors)
    averaged = _check_design(df, factor, k)
    if not k.by:
        _warn_pooled(df, factor, metric, k)
    if k.unit or averaged:
        df = _to_units(df, metric, [*k.by, factor, *k.pair, *k.unit], averaged, k.by, estimand)
    design = Design(tuple(k.by), tuple(k.pair), tuple(k.unit), tuple(k.blocks), tuple(k.factors), tuple(averaged),
                    estimand)
    cells = _Cells(factor=factor, baseline=baseline, metric=metric, by=k.by, pair=k.pair, estimand=estimand,
                   confidence=confidence, margin=margin, n_boot=n_boot, seed=seed, design=design,
                   values=pd.to_numeric(df[metric]).to_numpy(dtype=float), fac=df[factor].to_numpy(),
                   pair_keys=(list(df[k.pair].itertuples(index=False, name=None)) if k.pair else None))
    if k.by:
        group_items = list(df.groupby(k.by, sort=True, dropna=False).indices.items())
    else:
        group_items = [((), np.arange(len(df)))]
    rows: list[Comparison] = []
    for gkey, idx in group_items:
        rows += _group_rows(cells, gkey, idx)
    rows = adjust_rows(rows, ADJUST_METHODS[adjust], k.by, factor)
    return ComparisonTable(factor=factor, baseline=baseline, metric=metric, by=tuple(k.by), pair_on=tuple(k.pair),
                           confidence=confidence, adjust=adjust, margin=margin, rows=tuple(rows), estimand=estimand,
                           unit=tuple(k.unit), blocks=tuple(k.blocks), factors=tuple(k.factors),
                           averaged=tuple(averaged))


# --------------------------------------------------------------------------- compare's steps


@dataclass(frozen=True)
class _Keys:
    """The key columns of one :func:`compare` call, as lists."""

    by: list[str]
    pair: list[str]
    unit: list[str]
    blocks: list[str]
    factors: list[str]


@dataclass(frozen=True)
class _Cells:
    """What every row of one :func:`compare` call shares: its arguments, design and column arrays."""

    factor: str
    baseline: object
    metric: str
    by: list[str]
    pair: list[str]
    estimand: str
    confidence: float
    margin: object
    n_boot: int | None
    seed: int | None
    design: Design
    values: np.ndarray
    fac: np.ndarray
    pair_keys: list | None


def _check_keys(df: pd.DataFrame, factor: str, metric: str, k: _Keys) -> None:
    """Refuse missing columns and key columns named twice or clashing with result columns."""
    by_l, pair_l, unit_l = k.by, k.pair, k.unit
    require_columns(df, [factor, metric, *by_l, *pair_l, *unit_l, *k.blocks, *k.factors])
    if factor in by_l + pair_l + unit_l or metric in by_l + pair_l + unit_l + [factor]:
        raise StatsError(f"factor {factor!r} and metric {metric!r} must not also be in by={by_l}, pair_on={pair_l} "
                         f"or unit={unit_l}")
    overlap = sorted((set(by_l) & set(pair_l)) | (set(by_l) & set(unit_l)) | (set(pair_l) & set(unit_l)))
    if overlap:
        raise StatsError(f"columns {overlap} appear in more than one of by={by_l}, pair_on={pair_l}, unit={unit_l}")
    bad = sorted(set(by_l) & _RESERVED)
    if bad:
        raise StatsError(f"by columns {bad} clash with result column names; rename them")


def _check_adjust_and_boot(adjust: str, n_boot) -> None:
    """Refuse an unknown ``adjust`` method and an ``n_boot`` that is not None, 0 or an int >= 100."""
    if adjust not in ADJUST_METHODS:
        raise StatsError(f"adjust must be one of {sorted(ADJUST_METHODS)}, got {adjust!r}")
    if n_boot is not None and n_boot != 0:
        if not isinstance(n_boot, (int, np.integer)) or isinstance(n_boot, bool) or n_boot < 100:
            raise StatsError(f"n_boot must be None (t-based CI) or an int >= 100, got {n_boot!r}")


def _check_levels(df: pd.DataFrame, factor: str, baseline, metric: str, k: _Keys) -> None:
    """Refuse missing keys, a factor of one level, a baseline that is not a level and a metric <= 0 or NaN."""
    for col in [factor, *k.by, *k.pair, *k.unit]:
        if df[col].isna().any():
            raise StatsError(f"column {col!r} has {int(df[col].isna().sum())} missing value(s); fill or drop them")
    levels = _levels_sorted(df[factor])
    if len(levels) < 2:
        raise StatsError(f"factor {factor!r} has only one level {levels}; a comparison needs at least two")
    if baseline not in levels:
        raise StatsError(f"baseline must be one of the levels of {factor!r} {levels}, got {baseline!r}")
    require_positive_finite(df[metric], metric)


def _warn_pooled(df: pd.DataFrame, factor: str, metric: str, k: _Keys) -> None:
    """Warn (at :func:`compare`'s caller) when a call without ``by`` pools the levels of other factors."""
    # a column fixed by the declared keys (rw of a pattern averaged over) is accounted for by them
    pooled = pooled_factors(df, factor, [metric, *k.pair, *k.unit, *k.blocks, *k.factors],
                            [*k.pair, *k.unit, *k.factors], k.unit)
    if pooled:
        levels_text = "; ".join(f"{c} {v}" for c, v in pooled.items())
        warnings.warn(
            f"compare without `by` pools the levels of {sorted(pooled)} ({levels_text}) into one comparison of "
            f"{factor!r}: a difference between {factor} levels is averaged over them; pass by={sorted(pooled)} "
            "(CLI: --by) to compare within each, or pair_on/factors= to declare them", StorageBenchWarning,
            stacklevel=3)


def _group_rows(c: _Cells, gkey, idx: np.ndarray) -> list[Comparison]:
    """The rows of one ``by`` group: each non-baseline level against the baseline (NaN rows without a baseline)."""
    group = tuple(zip(c.by, key_tuple(gkey), strict=True)) if c.by else ()
    gfac = c.fac[idx]
    glevels = _levels_sorted(gfac)
    common_base = dict(group=group, baseline=c.baseline, metric=c.metric, paired=bool(c.pair),
                       confidence=c.confidence, margin=c.margin, design=c.design, factor=c.factor)
    if c.baseline not in glevels:
        return [_nan_row(**common_base, level=lev, n_baseline=0, n_other=int((gfac == lev).sum()),
                         method="", estimand=c.estimand, note=f"not estimable: baseline level {c.baseline!r} "
                         f"absent in group {dict(group)}") for lev in glevels]
    rows = []
    ib = idx[gfac == c.baseline]
    for lev in glevels:
        if lev == c.baseline:
            continue
        xb, xo = _arms(c, group, ib, idx[gfac == lev], lev)
        if c.n_boot and min(len(xb), len(xo)) < BCA_MIN_N and min(len(xb), len(xo)) >= 2:
            raise StatsError(
                f"n_boot: a BCa bootstrap CI needs >= {BCA_MIN_N} units per arm (or pairs); group {dict(group)} "
                f"level {lev!r} has {len(xb)} (baseline) and {len(xo)}; below that BCa undercovers (0.73-0.83 "
                "at n = 3, benchmarks/bench_coverage.py --bca): leave n_boot=None for the t-based CI")
        rows.append(_row(xb, xo, c, dict(common_base, level=lev), _rng(c.seed, group, lev) if c.n_boot else None))
    return rows


def _arms(c: _Cells, group: tuple, ib: np.ndarray, io: np.ndarray, lev) -> tuple[np.ndarray, np.ndarray]:
    """The baseline and other values of one level; with ``pair_on``, the other arm in the baseline's key order
    (keys repeated within an arm or present in one arm only are refused, named)."""
    if not c.pair:
        return c.values[ib], c.values[io]
    kb = [c.pair_keys[i] for i in ib]
    ko = [c.pair_keys[i] for i in io]
    for arm, ks in (("baseline", kb), (repr(lev), ko)):
        dup = sorted((key for key, n in Counter(ks).items() if n > 1), key=str)
        if dup:
            raise StatsError(f"pair_on={c.pair} keys {dup[:10]} appear more than once in the {arm} arm "
                             f"of group {dict(group)}; each key must match one unit per arm (name the "
                             "unit within a block with unit=, or average with factors=)")
    only_b = sorted(set(kb) - set(ko), key=str)
    only_o = sorted(set(ko) - set(kb), key=str)
    if only_b or only_o:
        raise StatsError(
            f"pair_on={c.pair} keys do not match in group {dict(group)} for level {lev!r}: "
            f"only in baseline {only_b[:10]}, only in {lev!r} {only_o[:10]}")
    pos = {key: i for i, key in zip(io, ko, strict=True)}
    return c.values[ib], c.values[np.array([pos[key] for key in kb], dtype=int)]

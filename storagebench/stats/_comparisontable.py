"""The result types of :func:`~storagebench.stats.comparison.compare`: one row (:class:`Comparison`), how the
rows became replicates (:class:`Design`) and the table with its DataFrame, file and HTML forms
(:class:`ComparisonTable`, :func:`summary_table`). Private: imported from :mod:`storagebench.stats.comparison`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._html import Markup, html
from ..errors import StatsError
from ..tables import table
from ._multiplicity import ADJUST_METHODS, family_words
from .ratio import ESTIMANDS


@dataclass(frozen=True)
class Design:
    """How the rows of a comparison became replicates: the experimental unit and the keys that are not replicates.

    Attributes
    ----------
    by : tuple of str
        Group columns (one comparison per group).
    pair_on : tuple of str
        Block columns the arms were matched on (one unit per arm and block; ``n`` counts blocks).
    unit : tuple of str
        Columns identifying the experimental unit (rows of one unit entered as one value); empty: a row.
    blocks, factors : tuple of str
        Keys declared not to be replicates (``compare(blocks=..., factors=...)``).
    averaged : tuple of str
        Declared factors averaged over within each unit.
    estimand : str
    """

    by: tuple[str, ...] = ()
    pair_on: tuple[str, ...] = ()
    unit: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    factors: tuple[str, ...] = ()
    averaged: tuple[str, ...] = ()
    estimand: str = "geometric"

    def describe(self) -> str:
        """The design in words (also the ``design`` column of :meth:`ComparisonTable.to_frame`)."""
        return _design_words(self.pair_on, self.unit, self.blocks, self.factors, self.averaged, self.estimand)

    def __str__(self) -> str:
        return self.describe()


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
        Experimental units (independent arms) or matched pairs (paired) in each arm: after rows of
        one unit were averaged, never the raw row count.
    gmean_baseline, gmean_other : float
        Geometric means of the units' values in each arm (metric's unit; NaN when a value is not
        positive): the arms of the default estimand, ``ratio = gmean_other / gmean_baseline`` (paired:
        over the matched pairs, so the same quotient is the geometric mean of the per-pair ratios).
    mean_baseline, mean_other : float
        Arithmetic means of the units' values in each arm (metric's unit): the arms of
        ``estimand="arithmetic"`` and of the descriptive ``estimate``; beside a ratio of geometric means
        they are not its arms (shown only in :meth:`ComparisonTable.to_frame`'s extras).
    estimate, diff_ci_low, diff_ci_high : float
        Descriptive extra on the raw scale: ``mean_other - mean_baseline`` and its CI (Welch, or paired t on
        the raw differences). Not the row's test: ``p`` belongs to ``ratio``.
    ratio, ci_low, ci_high : float
        The estimand (:data:`~storagebench.stats.ratio.ESTIMANDS`) and its CI: by default the ratio of
        geometric means (independent) or the geometric mean of the per-pair ratios (paired) with ``exp`` of
        the t CI on the log scale; ``estimand="arithmetic"``: ratio of means with Fieller's CI (NaN when
        Fieller's set is unbounded); ``n_boot``: a BCa CI of the same estimand.
    confidence : float
        Confidence level of the CIs (e.g. 0.95); ``alpha = 1 - confidence``.
    p, p_adjusted : float
        Two-sided p of ratio = 1 from the statistic that gave the CI (so ``p < alpha`` exactly when the CI
        excludes 1), and after the multiple-comparison adjustment over the table (the family).
    p_rank : float
        Rank test p: Mann-Whitney U (independent) or Wilcoxon signed-rank (paired); a separate test.
    effect_size : float
        On the estimand's scale (log values for the geometric estimand): Hedges' g (independent) or
        Hedges' g_z of the paired differences (paired; Lakens 2013), :func:`~storagebench.stats.ratio.hedges_g`.
    margin, p_equivalence, equivalent : float or None, float, bool or None
        Equivalence margin (fraction or ratio bounds), TOST p on the estimand's scale and whether
        ``p_equivalence < 1 - confidence``; ``equivalent`` is None when no margin was asked or TOST was
        not estimable.
    method : str
        What was done, in words with citations.
    note : str
        Why a value is NaN ("not estimable: ..."), or other caveats; empty when none.
    estimand : str
        ``"geometric"`` or ``"arithmetic"``.
    design : Design or None
        The experimental unit and the keys that are not replicates (``str(design)`` says it in words).
    family : str
        The multiplicity family this row's ``p_adjusted`` belongs to, in words.
    factor : str
        The compared column.
    """

    group: tuple[tuple[str, object], ...]
    level: object
    baseline: object
    metric: str
    paired: bool
    n_baseline: int
    n_other: int
    gmean_baseline: float
    gmean_other: float
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
    estimand: str = "geometric"
    design: Design | None = None
    family: str = ""
    factor: str = ""

    @property
    def estimable(self) -> bool:
        """True when the p-value could be computed."""
        return bool(np.isfinite(self.p))

    @property
    def alpha(self) -> float:
        """``1 - confidence``: the level of the tests behind this row."""
        return 1.0 - self.confidence


_FRAME_FIRST = ["level", "n_baseline", "n_other", "gmean_baseline", "gmean_other", "ratio", "ci_low",
                "ci_high", "p", "p_adjusted", "method", "equivalent", "note"]
#: File suffixes :meth:`ComparisonTable.to_file` writes.
TABLE_SUFFIXES = (".csv", ".parquet")
_FRAME_EXTRA = ["mean_baseline", "mean_other", "estimate", "baseline", "metric", "paired", "confidence", "diff_ci_low", "diff_ci_high", "p_rank",
                "effect_size", "margin", "p_equivalence", "estimand", "design", "family"]


@dataclass(frozen=True)
class ComparisonTable:
    """Result of :func:`compare`: the rows plus what was compared and how.

    Use :meth:`to_frame` for a DataFrame (columns: the ``by`` keys, ``level, n_baseline, n_other,
    gmean_baseline, gmean_other, ratio, ci_low, ci_high, p, p_adjusted, method, equivalent, note``,
    then ``mean_baseline, mean_other, estimate, baseline, metric, paired, confidence, diff_ci_low, diff_ci_high, p_rank, effect_size, margin,
    p_equivalence, estimand, design, family``) and :func:`summary_table` for a formatted one.

    Attributes
    ----------
    factor, baseline, metric, by, pair_on, confidence, adjust, margin
        As passed to :func:`compare`.
    rows : tuple of Comparison
    estimand : str
    unit : tuple of str
        Columns identifying the experimental unit (empty: one row is one unit).
    blocks, factors : tuple of str
        Keys declared not to be replicates.
    averaged : tuple of str
        The declared factors that varied within a unit and were averaged over.
    question_family : str
        Set by :func:`~storagebench.stats.comparison.adjust_family`: the family of the write-up's question this table's
        p-values were adjusted in (empty: the table is its own family).
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
    estimand: str = "geometric"
    unit: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    factors: tuple[str, ...] = ()
    averaged: tuple[str, ...] = ()
    question_family: str = ""

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Comparison]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> Comparison:
        return self.rows[i]

    @property
    def alpha(self) -> float:
        """``1 - confidence``."""
        return 1.0 - self.confidence

    @property
    def family(self) -> str:
        """The multiplicity family of the table's adjusted p-values, in words."""
        if self.question_family:
            return self.question_family
        return family_words(ADJUST_METHODS[self.adjust], sum(r.estimable for r in self.rows), self.by,
                             self.factor)

    @property
    def design(self) -> Design:
        """The experimental unit and the keys that are not replicates (``str()`` gives words)."""
        return Design(self.by, self.pair_on, self.unit, self.blocks, self.factors, self.averaged, self.estimand)

    @property
    def spread(self) -> str:
        """The estimate of spread behind every row's CI and p, in words: the two arms' own units (Welch), or the
        pairs' own log ratios (paired), never a run-to-run SD pooled over other levels or groups as a sweep
        report's point intervals are (:func:`storagebench.stats.point_estimates`). Said so that the two are not
        read as one answer: where the report's pooled intervals of two points do not overlap, a row here can
        still show no difference, from far fewer df."""
        rows = [r for r in self.rows if r.estimable] or list(self.rows)
        small = min((min(r.n_baseline, r.n_other) for r in rows), default=0)
        scale = "log values" if self.estimand == "geometric" else f"{self.metric} values (Fieller)"
        if self.pair_on:
            own = (f"the SD of the log ratios over each row's own matched pairs (n - 1 df; as few as {small} "
                   "pairs)" if self.estimand == "geometric" else
                   f"each row's own matched pairs ({scale}; as few as {small} pairs)")
        else:
            own = (f"each row's two arms only: each arm's own SD of its {scale} (Welch; Welch-Satterthwaite df, "
                   f"below n_baseline + n_other - 2; as few as {small} units in an arm)")
        return (f"{own}; not a run-to-run SD pooled over the other levels and groups, as a sweep report's point "
                "intervals are (pooled over the grid, with more df): where those intervals of two points do not "
                "overlap, a row here can still show no difference")

    def __repr__(self) -> str:
        by = f" by {list(self.by)}" if self.by else ""
        paired = f", paired on {list(self.pair_on)}" if self.pair_on else ""
        return (f"ComparisonTable({self.metric}: {self.factor} levels vs {self.baseline!r}{by}{paired}; "
                f"{len(self.rows)} row(s), {ESTIMANDS[self.estimand]}, {self.confidence:.0%} CI, "
                f"p adjusted by {self.adjust})")

    def _repr_html_(self) -> str:
        """The table for a notebook or write-up: the ``by`` keys, level, n, ratio with its CI, p, p_adjusted,
        then the method, design and family in words (:func:`storagebench.tables.table`)."""
        frame = self.to_frame()
        cols = [*self.by, "level", "n_baseline", "n_other", "ratio", "ci_low", "ci_high", "p", "p_adjusted"]
        if frame["equivalent"].notna().any():
            cols.append("equivalent")
        if (frame["note"].fillna("") != "").any():
            cols.append("note")
        styled = table(frame[cols], confidence=self.confidence, units=False,
                       labels={"level": f"{self.factor}", "n_baseline": "n baseline", "n_other": "n other",
                               "ratio": f"ratio to {self.factor}={self.baseline}"})
        methods = "; ".join(m for m in pd.unique(frame["method"]) if m)
        words = [f"{self.metric}: each level of {self.factor} against {self.factor}={self.baseline!r}; "
                 f"{ESTIMANDS[self.estimand]}.", f"Design: {self.design}.", f"Spread: {self.spread}.",
                 f"Family: {self.family}."]
        if methods:
            words.append(f"Method: {methods}.")
        notes = Markup("").join(html('<p class="sb-table-note">{}</p>', w) for w in words)  # the HTML gate
        return str(html('<div class="sb-comparison">{}{}</div>', Markup(styled.to_html()), notes))

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (see the class docstring for the columns)."""
        records = []
        for r in self.rows:
            rec = {k: v for k, v in r.group}
            for name in _FRAME_FIRST + _FRAME_EXTRA:
                rec[name] = getattr(r, name)
            rec["design"] = "" if r.design is None else r.design.describe()
            records.append(rec)
        cols = list(self.by) + _FRAME_FIRST + _FRAME_EXTRA
        out = pd.DataFrame.from_records(records, columns=cols)
        out["equivalent"] = out["equivalent"].astype(object)
        return out

    def to_file(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_frame` to ``path``, a ``.csv`` or ``.parquet`` file (by its suffix).

        ``margin`` is written as text and ``equivalent`` as a nullable string: their values mix types
        (a fraction or a pair of bounds; True, False or None), which parquet cannot store as one column.

        Parameters
        ----------
        path : str or path
            The file; its directory is created.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        StatsError
            The suffix is neither ``.csv`` nor ``.parquet`` (nothing is written).
        """
        path = Path(path)
        if path.suffix.lower() not in TABLE_SUFFIXES:
            raise StatsError(f"output file suffix must be one of {list(TABLE_SUFFIXES)}, got {path.suffix!r}")
        frame = self.to_frame()
        frame = frame.assign(margin=frame["margin"].astype(str), equivalent=frame["equivalent"].astype("string"))
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".parquet":
            frame.to_parquet(path, index=False)
        else:
            frame.to_csv(path, index=False)
        return path


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
        Columns: the ``by`` keys, ``level``, ``n`` ("baseline/other"), the arms of the ratio:
        ``gmean_baseline``, ``gmean_other`` (geometric means; ``mean_baseline``, ``mean_other``, arithmetic,
        with ``estimand="arithmetic"``), ``ratio [CI]``, ``change_pct [CI]``, ``p``, ``p_adjusted``, ``equivalent``, ``note``.
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
            **({"gmean_baseline": g(r.gmean_baseline), "gmean_other": g(r.gmean_other)}
               if r.estimand == "geometric" else {"mean_baseline": g(r.mean_baseline), "mean_other": g(r.mean_other)}),
            **{f"ratio [{pct} CI]": f"{g(r.ratio)} [{g(r.ci_low)}, {g(r.ci_high)}]",
               f"change [{pct} CI]": f"{pc(r.ratio)} [{pc(r.ci_low)}, {pc(r.ci_high)}]"},
            p=g(r.p),
            p_adjusted=g(r.p_adjusted),
            equivalent="" if r.equivalent is None else ("yes" if r.equivalent else "no"),
            note=r.note,
        )
        rows.append(rec)
    return pd.DataFrame(rows)



def _design_words(pair_on, unit, blocks, factors, averaged, estimand: str) -> str:
    mean = "geometric mean" if estimand == "geometric" else "mean"
    if pair_on:
        words = (f"paired: each {'/'.join(pair_on)} key is one block holding one unit per arm; n counts blocks")
    elif unit:
        words = f"independent arms; experimental unit: one {'/'.join(unit)}; n counts units"
    else:
        words = "independent arms; experimental unit: one row (run); n counts rows"
    if unit and pair_on:
        words += f"; unit within a block: {'/'.join(unit)}"
    if unit or averaged:
        words += f"; several rows of one unit enter as their {mean}"
    if blocks:
        words += f"; blocks (not replicates): {', '.join(blocks)}"
    if factors:
        words += f"; factors (not replicates): {', '.join(factors)}"
    if averaged:
        words += f" ({', '.join(averaged)} averaged over within each unit)"
    return words


"""Two load generators on the same configurations: :func:`cross_tool` (compare + Bland-Altman tables).

The tool is a *factor*: runs of different tools are never pooled as replicates of one another.
A configuration cell is a combination of the fio factor columns (``rw``, ``bs_bytes``,
``rwmixread_pct``, ``random_pct``, ``iodepth``, ``numjobs``) and any study columns that also
define what was measured (``match_on``, e.g. ``stripe_width`` and ``vms`` of seed 002). Within a cell
the two tools' runs are compared:

* with one run per tool per cell, the cells are paired (:func:`~storagebench.stats.compare`
  ``pair_on`` = the cell columns not in ``by``): one paired comparison per ``by`` group;
* with replicates, each cell is compared on its own (independent arms, ``by`` = the cell columns);

and :func:`~storagebench.stats.bland_altman` gives the bias and limits of agreement of the
per-cell means, per ``by`` group and over all cells.

For a write-up, :func:`cross_tool_table` turns a :class:`CrossTool` into one row per comparison with
its verdict (:func:`~storagebench.stats.verdict`) and limits of agreement, and
:func:`cross_tool_findings` into plain sentences (:class:`~storagebench.findings.Findings`): the
agreement with its CI and limits, and where the tools disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import StatsError
from ..findings import CONFIDENCE, Finding, Findings, fmt_ci, fmt_number, fmt_p
from ..schema import RUNS, columns
from ..tables import metric_words
from ._common import as_list, capitalise_after, geometric_mean, require_columns
from ._littles import tool_littles_law  # noqa: F401 (its home is stats)
from .agreement import agreement_table
from .comparison import ComparisonTable, compare
from .saturation import per_run
from .verdicts import NO_CI_VERDICT, NO_DIFFERENCE, verdict

#: The fio factor columns of ``runs`` that make two runs "the same configuration": the workload factors of
#: the schema (:attr:`storagebench.schema.Column.workload`).
CONFIG_COLUMNS: tuple[str, ...] = tuple(c.name for c in columns("runs", role="factor") if c.workload)
#: the mean latency columns of runs (combine rule "mean": weighted by completed I/Os)
_MEANS = tuple(c.name for c in columns("runs", role="metric") if c.combine in ("mean", "mean_sampled"))


@dataclass(frozen=True)
class CrossTool:
    """The cross-tool tables of :func:`cross_tool`.

    Attributes
    ----------
    pairs : pandas.DataFrame
        One row per configuration cell both tools measured: the cell columns, ``n_<tool>`` (runs),
        ``<metric>_<tool>`` (mean over the cell's runs, metric unit) for both tools and ``ratio``
        (other / baseline).
    comparison : pandas.DataFrame
        :meth:`ComparisonTable.to_frame` of ``compare(factor=tool_col, baseline)``.
    agreement : pandas.DataFrame
        Bland-Altman of other vs baseline per ``by`` group and over ``"all"`` cells:
        the ``by`` columns (``"all"`` in the pooled row), ``n``, ``bias``, CIs, ``p``, ``loa_low``, ``loa_high``
        and their CIs (ratios with ``log=True``), ``clusters``, ``icc``, ``note`` where fewer than 3 pairs made
        it not estimable. Each group's row takes its configurations as independent (its own limits of
        agreement, with CIs). The ``"all"`` row, with 3 or more ``by`` groups, takes the groups as clusters
        (:func:`~storagebench.stats.bland_altman` ``clusters=``; Bland & Altman 2007): the bias is the mean of
        the group means with a t CI on (groups - 1) df, the limits use the total SD of one configuration,
        without CIs.
    unmatched : pandas.DataFrame
        Runs whose cell only one tool measured, whose configuration is unknown (-1, NaN, ""), or
        without a value of the metric (NaN: e.g. a DiskSPD run without ``-L`` has no latency), with a
        ``reason`` column.
    tool_col, baseline, other, metric : str
    cells : tuple of str
        The columns that define a configuration cell.
    paired : bool
        True when every matched cell had one run per tool (paired comparison).
    method : str
    table : ComparisonTable
        The comparison itself (what :func:`~storagebench.stats.verdict` takes); ``comparison`` is its frame.
    by : tuple of str
        The ``by`` columns.
    unit : str
        The experimental unit in words, from the design: a configuration measured once by each tool
        (paired; the cell columns that vary within a group are named), or a run (replicates present).
    """

    pairs: pd.DataFrame
    comparison: pd.DataFrame
    agreement: pd.DataFrame
    unmatched: pd.DataFrame
    tool_col: str
    baseline: object
    other: object
    metric: str
    cells: tuple[str, ...]
    paired: bool
    method: str
    table: ComparisonTable | None = None
    by: tuple[str, ...] = ()
    unit: str = ""


def _unknown(s: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(s):
        v = pd.to_numeric(s, errors="coerce")
        return v.isna() | (v == -1)
    return s.isna() | (s.astype("string") == "")


def _other_tool(runs: pd.DataFrame, baseline, tool_col: str, metric: str) -> str:
    """The tool that is not ``baseline``; refuses missing columns and anything but two tools."""
    require_columns(runs, [tool_col, metric], "runs")
    levels = sorted(map(str, pd.unique(runs[tool_col].dropna())))
    if len(levels) != 2:
        raise StatsError(f"{tool_col!r} must have exactly two tools to compare, got {levels}; filter the rows first")
    if str(baseline) not in levels:
        raise StatsError(f"baseline must be one of the tools {levels}, got {baseline!r}")
    return next(lv for lv in levels if lv != str(baseline))


def _tool_labels(runs: pd.DataFrame, tool_col: str) -> pd.DataFrame:
    """A copy of ``runs`` with ``tool_col`` as text; a ``tool`` column besides it must make the same split and
    is dropped (one factor, not two)."""
    df = runs.copy()
    df[tool_col] = df[tool_col].astype(str)
    if tool_col != "tool" and "tool" in df.columns:  # e.g. user labels over ingested runs: must name the same split
        mixed = df.groupby(tool_col)["tool"].nunique(dropna=False)
        if (mixed > 1).any():
            lv = mixed[mixed > 1].index[0]
            raise StatsError(f"{tool_col}={lv!r} holds runs of several tools (tool column: "
                             f"{sorted(map(str, df.loc[df[tool_col] == lv, 'tool'].unique()))}); a tool is a factor, "
                             f"not a replicate: label each tool's runs apart")
        df = df.drop(columns="tool")  # the same split as tool_col: one factor, not two
    return df


def cross_tool(
    runs: pd.DataFrame,
    *,
    baseline,
    tool_col: str = "tool",
    metric: str = "iops",
    match_on: str | Sequence[str] | None = None,
    by: str | Sequence[str] | None = None,
    config: Sequence[str] = CONFIG_COLUMNS,
    aggregate: bool = True,
    replicates: str | Sequence[str] | None = None,
    confidence: float = CONFIDENCE,
    adjust: str = "holm",
    margin: float | None = None,
    log: bool = True,
) -> CrossTool:
    """Compare two tools on the configurations both measured: compare table, pairs, Bland-Altman.

    Parameters
    ----------
    runs : pandas.DataFrame
        A ``runs``-schema table (ingested DiskSPD / Iometer / fio runs, or a published table) holding
        exactly two levels of ``tool_col``.
    baseline : object
        The reference tool (a level of ``tool_col``), e.g. ``"diskspd"`` or ``"DiskSPD"``.
    tool_col : str
        ``"tool"`` for ingested runs; ``"source_tool"`` for the published seed 002 tables (whose
        ``tool`` is ``"published"``).
    metric : str
        ``iops``, ``bw_bytes_per_s``, ``lat_mean_ns`` ... (> 0).
    match_on : str or list of str, optional
        Study columns that, with ``config``, define a cell (``["stripe_width", "vms"]``).
    by : str or list of str, optional
        Report one comparison and one agreement per group (``"pattern"``, ``["rw", "bs_bytes"]``).
    config : list of str
        The fio factor columns defining a cell (those missing from ``runs`` are skipped).
    aggregate : bool
        Combine the rows of one run (read and write rows, jobs) into one row per ``run_id`` first
        (:func:`~storagebench.stats.per_run`: fio's rule, completed I/Os over the longest runtime, mean latency
        weighted by I/Os). Without it a
        ``direction`` column becomes part of the cell.
    replicates : str or list of str, optional
        Study columns whose levels within a cell are independent repeats of the same configuration (e.g.
        ``"setup"``: the testbed built afresh). Every other study column (one the ``runs`` schema does not
        define) that varies within a cell is refused: its levels are not replicates (see Raises).
    confidence, adjust, margin
        As in :func:`~storagebench.stats.compare`.
    log : bool
        Bland-Altman on log ratios (default, reported as ratios) or on differences.

    Returns
    -------
    CrossTool

    Raises
    ------
    StatsError
        Missing columns; ``tool_col`` without exactly two levels; ``baseline`` not one of them; a level of
        ``tool_col`` holding runs of several ``tool`` values (two tools labelled as one); a study column
        (not in ``match_on``, ``by`` or ``replicates``) that varies among one tool's runs of one cell, e.g.
        ``stripe_width`` and ``vms`` of seed 002's stripe table without ``match_on``: the error names the
        columns and their levels, and how to pass ``match_on``; no cell measured by both tools; errors of
        :func:`~storagebench.stats.compare`.

    Notes
    -----
    Why a refusal and not a warning: rows of one cell that differ in a study column are different
    configurations (the steps of a sweep, another stripe width), so counting them as replicates gives a
    CI and a verdict for an experimental unit that does not exist (pseudo-replication, Hurlbert 1984,
    Ecol. Monogr. 54:187); a warning would still publish that verdict. The fix is one argument
    (``match_on``, ``by`` or ``replicates``), and :func:`~storagebench.stats.compare` refuses blocks and
    factors counted as replicates the same way.
    """
    other = _other_tool(runs, baseline, tool_col, metric)
    match_l, by_l = as_list(match_on), as_list(by)
    require_columns(runs, [*match_l, *by_l], "runs")
    df = _tool_labels(runs, tool_col)
    no_value = ~np.isfinite(pd.to_numeric(df[metric], errors="coerce").astype(float)).to_numpy()
    missing = df[no_value].assign(reason=f"no {metric} value (the tool did not report it)")
    df = df[~no_value]
    if aggregate and "run_id" in df.columns and df["run_id"].duplicated().any():
        df = per_run(df, latency=metric if metric in _MEANS else None)
    cells = [c for c in config if c in df.columns] + [c for c in match_l if c not in config]
    if "direction" in df.columns and "direction" not in cells:
        cells.append("direction")
    cells += [c for c in by_l if c not in cells]
    if not cells:
        raise StatsError(f"no configuration columns: none of {list(config)} nor match_on are in runs")
    unknown = np.zeros(len(df), dtype=bool)
    for c in cells:
        unknown |= _unknown(df[c]).to_numpy()
    unmatched = [missing, df[unknown].assign(reason="unknown configuration (-1, NaN or empty in "
                                                     + ", ".join(cells) + ")")]
    df = df[~unknown]
    _check_cells_are_configurations(df, cells, tool_col, runs.columns, as_list(replicates), match_l)
    tools_per_cell = df.groupby(cells, dropna=False)[tool_col].nunique()
    both = tools_per_cell[tools_per_cell == 2].index
    key = pd.MultiIndex.from_frame(df[cells]) if len(cells) > 1 else pd.Index(df[cells[0]])
    in_both = key.isin(both)
    unmatched.append(df[~in_both].assign(reason="only one tool measured this configuration"))
    df = df[in_both]
    if df.empty:
        raise StatsError(f"no configuration ({', '.join(cells)}) was measured by both {baseline!r} and {other!r}")
    counts = df.groupby([*cells, tool_col], dropna=False).size()
    paired = bool((counts == 1).all())
    if paired:
        pair_keys = [c for c in cells if c not in by_l]
        table = compare(df, tool_col, str(baseline), metric, by=by_l or None, pair_on=pair_keys or None,
                        confidence=confidence, adjust=adjust, margin=margin)
    else:
        table = compare(df, tool_col, str(baseline), metric, by=cells, confidence=confidence, adjust=adjust,
                        margin=margin)
    means = df.pivot_table(index=cells, columns=tool_col, values=metric, aggfunc="mean")
    ns = df.pivot_table(index=cells, columns=tool_col, values=metric, aggfunc="size")
    pairs = pd.DataFrame({f"n_{baseline}": ns[str(baseline)], f"n_{other}": ns[other],
                          f"{metric}_{baseline}": means[str(baseline)], f"{metric}_{other}": means[other]})
    pairs["ratio"] = pairs[f"{metric}_{other}"] / pairs[f"{metric}_{baseline}"]
    pairs = pairs.reset_index()
    agreement_df, method_ba = agreement_table(pairs, by_l, (f"{metric}_{other}", f"{metric}_{baseline}"), log, confidence)
    design = (f"paired over the cells ({', '.join(c for c in cells if c not in by_l)}) within each group"
              if paired else "independent arms within each configuration cell (replicates present)")
    method = (f"cross-tool: {other} vs baseline {baseline} ({tool_col} is the factor, never a replicate) on "
              f"{metric}; cells = {', '.join(cells)}; compare: {design}"
              + (f"; agreement: {method_ba}" if method_ba is not None else "") + (f"; per {' x '.join(by_l)}: "
                 "Bland-Altman on that group's configurations, taken as independent" if by_l and method_ba else ""))
    spread = (pairs.groupby(by_l, dropna=False)[[c for c in cells if c not in by_l]].nunique(dropna=False).max()
              if by_l else pairs[cells].nunique(dropna=False))
    varying = [c for c in cells if c not in by_l and spread[c] > 1 and not (c == "direction" and "rw" in cells)]
    if paired:
        unit = (f"configuration ({' x '.join(varying) or 'one cell'}"
                f"{' within each ' + ', '.join(by_l) if by_l else ''}), one run per tool")
    else:
        unit = "run (the runs of one tool on one configuration are its replicates)"
    return CrossTool(pairs=pairs, comparison=table.to_frame(), agreement=agreement_df,
                     unmatched=pd.concat(unmatched, ignore_index=True), tool_col=tool_col, baseline=str(baseline),
                     other=other, metric=metric, cells=tuple(cells), paired=paired, method=method, table=table,
                     by=tuple(by_l), unit=unit)


def _check_cells_are_configurations(df: pd.DataFrame, cells: list[str], tool_col: str, columns,
                                    replicates: list[str], match_on: list[str]) -> None:
    """Refuse study columns that vary among one tool's rows of one configuration cell (not replicates)."""
    unknown = sorted(set(replicates) - set(columns))
    if unknown:
        raise StatsError(f"replicates={replicates}: no column(s) {unknown} in runs")
    schema = {c.name for c in RUNS}
    study = [c for c in columns if c in df.columns and c not in schema and c not in cells and c != tool_col
             and c not in replicates]
    if not study or df.empty:
        return
    spread = df.groupby([*cells, tool_col], dropna=False)[study].nunique(dropna=False)
    varying = [c for c in study if (spread[c] > 1).any()]
    if not varying:
        return
    cell = spread[(spread[varying] > 1).any(axis=1)].index[0]
    where = dict(zip([*cells, tool_col], cell, strict=True))
    levels = "; ".join(f"{c} {sorted(map(str, pd.unique(df[c].dropna())), key=_natural)[:12]}" for c in varying)
    n = int(((df[[*cells, tool_col]] == pd.Series(where)).all(axis=1)).sum())
    raise StatsError(
        f"the rows of one configuration cell ({', '.join(cells)}) differ in {varying} ({levels}): e.g. "
        f"{n} rows of {tool_col}={where[tool_col]!r} in cell {cell_words({k: where[k] for k in cells})}; they "
        f"are different configurations (the steps of a sweep, another setting), not replicates of one; pass "
        f"match_on={[*match_on, *varying]} so that they define the configuration (the notebook's match_on "
        f"parameter), by= to compare within each level, or replicates={varying} if their levels really are "
        "independent repeats of the same configuration (set-ups built afresh)")


def _natural(text: str):
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


# --------------------------------------------------------------------------- write-up helpers

_SEQ = {"read", "write", "rw", "readwrite", "trim", "trimwrite"}



def _size_words(nbytes) -> str:
    b = int(nbytes)
    for unit, scale in (("MiB", 2**20), ("KiB", 1024)):
        if b >= scale and b % scale == 0:
            return f"{b // scale} {unit}"
    return f"{b} B"


def _num_words(v) -> str:
    f = float(v)
    return f"{f:g}"


def cell_words(cell: dict) -> str:
    """A configuration cell in fio's terms: ``"randrw 4 KiB, rwmixread 70%, iodepth 1, numjobs 1"``.

    Parameters
    ----------
    cell : mapping
        Column -> value of the cell (``rw``, ``bs_bytes``, ``rwmixread_pct``, ``random_pct``, ``iodepth``,
        ``numjobs``, ``direction`` and study columns such as ``vms``). What ``rw`` implies
        (``random_pct`` of a pure random or sequential pattern, ``rwmixread_pct`` of a pure read or write,
        the ``direction``) is left out; study columns are written ``name value``.
    """
    c = dict(cell)
    rw = str(c.get("rw", "")) if c.get("rw") is not None else ""
    parts = []
    head = " ".join(x for x in (rw, _size_words(c["bs_bytes"]) if "bs_bytes" in c else "") if x)
    if head:
        parts.append(head)
    mixed = rw in ("randrw", "rw", "readwrite") or not rw
    if "rwmixread_pct" in c and mixed:
        parts.append(f"rwmixread {_num_words(c['rwmixread_pct'])}%")
    if "random_pct" in c:
        implied = 100.0 if rw.startswith("rand") else (0.0 if rw in _SEQ else None)
        if implied is None or float(c["random_pct"]) != implied:
            parts.append(f"percentage_random {_num_words(c['random_pct'])}%")
    for k in ("iodepth", "numjobs"):
        if k in c:
            parts.append(f"{k} {c[k]}")
    skip = set(CONFIG_COLUMNS)
    if rw:
        skip.add("direction")
    parts += [f"{k} {v}" if k != "pattern" else str(v) for k, v in c.items() if k not in skip]
    return ", ".join(parts)


def _group_words(keys: dict, cells: Sequence[str], by: Sequence[str]) -> str:
    if list(keys) == ["pattern"] or (len(keys) == 1 and list(keys)[0] in by):
        return str(next(iter(keys.values())))
    if set(keys) >= set(c for c in cells if c != "direction") and len(keys) > len(by):
        return cell_words(keys)
    return ", ".join(f"{k} {v}" for k, v in keys.items())


def _check_ct(ct) -> None:
    if not isinstance(ct, CrossTool) or ct.table is None:
        raise StatsError(f"expected the result of cross_tool(), got {type(ct).__name__}")


def cross_tool_table(ct: CrossTool, *, unit: str | None = None) -> pd.DataFrame:
    """One row per comparison of a :class:`CrossTool`, with its verdict and (paired) limits of agreement.

    Parameters
    ----------
    ct : CrossTool
        From :func:`cross_tool`.
    unit : str, optional
        The experimental unit in words for the verdicts; default ``ct.unit``.

    Returns
    -------
    pandas.DataFrame
        The ``by`` keys of the comparison (per ``by`` group when paired, per configuration cell with
        replicates), then ``configurations`` (paired: pairs) or ``runs <baseline>`` / ``runs <other>``,
        ``<baseline> <metric>`` and ``<other> <metric>`` (geometric means, the metric's unit: the arms of the
        ratio),
        ``ratio``, ``ci_low``, ``ci_high`` (other / baseline, :func:`~storagebench.stats.compare`'s
        estimand), ``p_adjusted``, ``verdict`` (:func:`~storagebench.stats.verdict`: ``higher``,
        ``lower``, ``no difference shown`` or ``no verdict: CI not estimable``) and, paired, the
        group's Bland-Altman limits ``loa_low``, ``loa_low_ci_low``, ``loa_low_ci_high``, ``loa_high``,
        ``loa_high_ci_low``, ``loa_high_ci_high``. Paired with ``by`` groups, a last row ``all`` gives
        the agreement over every configuration (bias as ``ratio``; descriptive, not in the family:
        no p, verdict ``"(descriptive)"``).

    Raises
    ------
    StatsError
        ``ct`` is not a :func:`cross_tool` result; the refusals of :func:`~storagebench.stats.verdict`.
    """
    _check_ct(ct)
    keys = list(ct.table.by)
    v = verdict(ct.table, unit=unit or ct.unit)
    comp = ct.comparison
    base, other, m = ct.baseline, ct.other, ct.metric
    out = v[keys].copy()
    if ct.paired:
        out["configurations"] = comp["n_baseline"].astype("int64").to_numpy()
    else:
        out[f"runs {base}"] = comp["n_baseline"].astype("int64").to_numpy()
        out[f"runs {other}"] = comp["n_other"].astype("int64").to_numpy()
    out[f"{base} {m}"] = comp["gmean_baseline"].to_numpy()  # the arms of the ratio beside them
    out[f"{other} {m}"] = comp["gmean_other"].to_numpy()
    for c in ("ratio", "ci_low", "ci_high", "p_adjusted", "verdict"):
        out[c] = v[c].to_numpy()
    loa = ["loa_low", "loa_low_ci_low", "loa_low_ci_high", "loa_high", "loa_high_ci_low", "loa_high_ci_high"]
    if ct.paired and "loa_low" in ct.agreement.columns:
        ag = ct.agreement
        if keys:
            groups = ag[~(ag[keys] == "all").all(axis=1)]
            out = out.merge(groups[keys + loa], on=keys, how="left")
            row = ag[(ag[keys] == "all").all(axis=1)].iloc[0]
            if np.isfinite(row.get("bias", np.nan)):
                allrow = {k: "all" for k in keys}
                allrow.update({"configurations": int(row["n"]), f"{base} {m}": geometric_mean(ct.pairs[f"{m}_{base}"]),
                               f"{other} {m}": geometric_mean(ct.pairs[f"{m}_{other}"]), "ratio": row["bias"],
                               "ci_low": row["bias_ci_low"], "ci_high": row["bias_ci_high"], "p_adjusted": np.nan,
                               "verdict": "(descriptive)"})
                allrow.update({c: row[c] for c in loa})
                out = pd.concat([out, pd.DataFrame([allrow])], ignore_index=True)
        else:
            row = ag.iloc[0]
            for c in loa:
                out[c] = row.get(c, np.nan)
    return out


def _ratio_words(r, digits: int) -> str:
    return f"{fmt_number(r.ratio, digits)}; {fmt_ci(r.ci_low, r.ci_high, r.confidence, digits)}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def cross_tool_findings(ct: CrossTool, *, unit: str | None = None, label: str = "", title: str = "",
                        provenance: str = "", digits: int = 3):
    """What a cross-tool comparison found, in plain sentences (:class:`~storagebench.findings.Findings`).

    Sentences, each with its numbers in the finding's fields:

    * ``agreement`` -- over all configurations both tools measured: the Bland-Altman bias of
      ``other / baseline`` with its CI, and the limits of agreement (the range holding 95% of single
      configurations) with their CIs; n = configurations. With one comparison only, its verdict is
      added (adjusted p, alpha).
    * ``disagree`` -- with several comparisons (``by`` groups, or configurations with replicates): for
      which the tools differ (:func:`~storagebench.stats.verdict`: the family-adjusted p < alpha and the
      CI on one side of 1), in which direction, with each ratio and CI; for which no difference is
      shown; for which no CI could be estimated.
    * ``spread`` -- with several ``by`` groups whose agreement is estimable: the groups of the closest
      and of the loosest limits of agreement.
    * caveats: runs without a counterpart in the other tool (left out), and agreement not estimable.

    Parameters
    ----------
    ct : CrossTool
        From :func:`cross_tool`.
    unit : str, optional
        The experimental unit in words; default ``ct.unit`` (from the design).
    label : str
        A prefix naming the data set (``"vsan_stripe"``), for write-ups holding several.
    title : str
        The question the findings answer.
    provenance : str
        Where the data come from, in one line.
    digits : int
        Significant digits of ratios (:func:`storagebench.findings.fmt_number`).

    Returns
    -------
    storagebench.findings.Findings

    Raises
    ------
    StatsError
        ``ct`` is not a :func:`cross_tool` result; the refusals of :func:`~storagebench.stats.verdict`.

    Notes
    -----
    Bland & Altman (1986), Lancet 327:307 (bias and limits of agreement; on log ratios for measures whose
    differences grow with the value); the verdict rule and its family: :mod:`storagebench.stats.verdicts`.
    """
    _check_ct(ct)
    w = _Words(ct, f"{label}: " if label else "", unit or ct.unit, digits,
               verdict(ct.table, unit=unit or ct.unit, up="higher", down="lower"))
    items = [_agreement_finding(w)]
    items += _disagree_findings(w) + _spread_findings(w) + _unmatched_findings(w)
    return Findings(tuple(items), title=title, provenance=provenance)


@dataclass(frozen=True)
class _Words:
    """What the sentences of :func:`cross_tool_findings` share."""

    ct: CrossTool
    pre: str
    unit: str
    digits: int
    v: pd.DataFrame


def _names(w: _Words):
    """The baseline and other tool, the metric in words, the rows and the ``by`` keys of the comparison."""
    ct = w.ct
    return ct.baseline, ct.other, metric_words(ct.metric), list(ct.table.rows), list(ct.table.by)


def _agreement_finding(w: _Words) -> Finding:
    """The sentence on agreement over all configurations (a caveat when there is none)."""
    ct, pre, unit, digits, v = w.ct, w.pre, w.unit, w.digits, w.v
    base, other, mw, rows, _ = _names(w)
    ag = ct.agreement
    allrow = ag.iloc[0]
    log = bool(allrow.get("log", True))
    n_cfg = len(ct.pairs)
    # the agreement is over configurations (each tool's runs of one averaged), whatever the comparison's unit
    ag_unit = unit if ct.paired else "configuration (each tool's runs of it averaged)"
    if "bias" in ag.columns and np.isfinite(allrow.get("bias", np.nan)):
        conf = float(allrow["confidence"])
        k = int(allrow["clusters"]) if np.isfinite(allrow.get("clusters", np.nan)) else 0
        if k:
            return _clustered_agreement_finding(w, allrow, k, ag_unit)
        if log:
            sentence = (f"{pre}over the {n_cfg} configurations both tools measured, {other}'s {mw} is "
                        f"{fmt_number(allrow['bias'], digits)} times {base}'s on average "
                        f"({fmt_ci(allrow['bias_ci_low'], allrow['bias_ci_high'], conf, digits)}); for a single "
                        f"configuration the ratio lies between {fmt_number(allrow['loa_low'], digits)} and "
                        f"{fmt_number(allrow['loa_high'], digits)} ({allrow['coverage']:.0%} limits of agreement; "
                        f"{conf:.0%} CIs {fmt_number(allrow['loa_low_ci_low'], digits)} to "
                        f"{fmt_number(allrow['loa_low_ci_high'], digits)} and {fmt_number(allrow['loa_high_ci_low'], digits)}"
                        f" to {fmt_number(allrow['loa_high_ci_high'], digits)}).")
        else:
            sentence = (f"{pre}over the {n_cfg} configurations both tools measured, {other}'s {mw} differs from "
                        f"{base}'s by {fmt_number(allrow['bias'], digits)} on average "
                        f"({fmt_ci(allrow['bias_ci_low'], allrow['bias_ci_high'], conf, digits)}); for a single "
                        f"configuration the difference lies between {fmt_number(allrow['loa_low'], digits)} and "
                        f"{fmt_number(allrow['loa_high'], digits)} ({allrow['coverage']:.0%} limits of agreement).")
        if len(rows) == 1:
            r, w = rows[0], v.iloc[0]
            p = fmt_p(r.p_adjusted)
            sentence = sentence[:-1] + (f"; verdict: {w['verdict'] if w['verdict'] not in ('higher', 'lower') else other + ' ' + w['verdict']}"
                                        f" (p {p if p.startswith('<') else '= ' + p} at alpha = {r.alpha:g}).")
        return Finding(capitalise_after(sentence, pre), estimate=allrow["bias"], ci=(allrow["bias_ci_low"], allrow["bias_ci_high"]),
                             confidence=conf, n=n_cfg, unit_of_replication=f"matched configurations; unit: {ag_unit}",
                             method=_agreement_method(ct, short=True), unit="ratio" if log else ct.metric,
                             key=f"{ct.metric}:agreement")
    else:
        note = allrow.get("note", "") or "fewer than 3 configurations"
        return Finding(capitalise_after(f"{pre}{base} and {other} measured {n_cfg} common configuration(s) of {mw}: their "
                                  f"agreement is {note}.", pre), n=n_cfg,
                             unit_of_replication=f"matched configurations; unit: {ag_unit}",
                             key=f"{ct.metric}:agreement", caveat=True)


def _clustered_agreement_finding(w: _Words, allrow: pd.Series, k: int, ag_unit: str) -> Finding:
    """The agreement sentence when the ``by`` groups are the clusters of the pooled bias (Bland & Altman 2007)."""
    ct, pre, digits = w.ct, w.pre, w.digits
    base, other, mw, _, keys = _names(w)
    log = bool(allrow.get("log", True))
    conf, n_cfg = float(allrow["confidence"]), len(ct.pairs)
    noun = "patterns" if keys == ["pattern"] else f"{' x '.join(keys)} groups"
    size = (f"{fmt_number(allrow['bias'], digits)} times {base}'s" if log
            else f"{base}'s plus {fmt_number(allrow['bias'], digits)}")
    p = fmt_p(allrow["p"])
    sentence = (f"{pre}over the {n_cfg} configurations both tools measured, {other}'s {mw} is {size} on average "
                f"({fmt_ci(allrow['bias_ci_low'], allrow['bias_ci_high'], conf, digits)}, p "
                f"{p if p.startswith('<') else '= ' + p}; the {k} {noun} are the units of this CI, since the "
                f"{'ratio' if log else 'difference'} depends on the {noun[:-1] if keys == ['pattern'] else 'group'}: "
                f"intraclass correlation {allrow['icc']:.2f}); for a single configuration the "
                f"{'ratio' if log else 'difference'} lies between {fmt_number(allrow['loa_low'], digits)} and "
                f"{fmt_number(allrow['loa_high'], digits)} ({allrow['coverage']:.0%} limits of agreement from the "
                f"spread between and within {noun}; each one's own limits are in the table).")
    return Finding(capitalise_after(sentence, pre), estimate=allrow["bias"],
                   ci=(allrow["bias_ci_low"], allrow["bias_ci_high"]), confidence=conf, n=k,
                   unit_of_replication=f"{noun} ({n_cfg} matched configurations); unit: {ag_unit}",
                   method=_agreement_method(ct, short=True), unit="ratio" if log else ct.metric,
                   key=f"{ct.metric}:agreement")


def _disagree_findings(w: _Words) -> list[Finding]:
    """With several comparisons: where the tools differ, in one sentence."""
    ct, pre, unit, digits, v = w.ct, w.pre, w.unit, w.digits, w.v
    base, other, mw, rows, keys = _names(w)
    items = []
    if len(rows) > 1:
        groups = {"higher": [], "lower": [], NO_DIFFERENCE: [], NO_CI_VERDICT: []}
        for r, (_, vr) in zip(rows, v.iterrows(), strict=True):
            name = _group_words(dict(r.group), ct.cells, ct.by)
            text = name if vr["verdict"] == NO_CI_VERDICT else f"{name} ({_ratio_words(r, digits)})"
            groups.setdefault(vr["verdict"], []).append(text)
        noun = ("patterns" if keys == ["pattern"] else " x ".join(keys) + " groups") if ct.paired and keys \
            else "configurations"
        differ = len(groups["higher"]) + len(groups["lower"])
        estimable = len(rows) - len(groups[NO_CI_VERDICT])
        uniform = next((w for w in ("higher", "lower") if len(groups[w]) == len(rows) and len(rows) > 2), None)
        if uniform:  # every comparison in one direction: its range, not a list
            est = [(r.ratio, _group_words(dict(r.group), ct.cells, ct.by)) for r in rows]
            lo, hi = min(est), max(est)
            groups[uniform] = [f"every one of them (ratios from {fmt_number(lo[0], digits)}, {lo[1]}, to "
                               f"{fmt_number(hi[0], digits)}, {hi[1]}; each CI excludes 1)"]
        directed = [f"{word} for " + _and(groups[word]) for word in ("higher", "lower") if groups[word]]
        parts = [f"{other}'s {mw} is " + "; ".join(directed)] if directed else []
        if groups[NO_DIFFERENCE]:
            parts.append("no difference is shown for " + _and(groups[NO_DIFFERENCE]))
        if groups[NO_CI_VERDICT]:
            parts.append(f"no verdict (too few runs per tool for a CI) for {_and(groups[NO_CI_VERDICT])}")
        if estimable:
            sentence = (f"{pre}{other} and {base} differ in {differ} of {estimable} {noun}"
                        + (f" with a CI ({len(rows)} compared)" if estimable != len(rows) else "")
                        + ": " + "; ".join(parts) + ".")
        else:
            sentence = (f"{pre}none of the {len(rows)} {noun} compared has enough runs per tool for a CI, so no "
                        f"difference between {other} and {base} can be claimed: " + "; ".join(parts) + ".")
        r0 = rows[0]
        test = "paired t-test on the log ratios" if ct.paired else "Welch's t-test on log values"
        items.append(Finding(capitalise_after(sentence, pre), n=min(r.n_baseline for r in rows), unit_of_replication=(
            f"matched configurations per {' x '.join(keys)} (the fewest)" if ct.paired else
            f"run(s) of {base} per configuration (the fewest); unit: {unit}"),
            method=f"{test} per {' x '.join(keys) if ct.paired and keys else 'configuration'}; "
                   + (f"{r0.family.split(' of this table')[0]}; a difference only where the adjusted p < "
                      f"{r0.alpha:g} and the CI excludes 1" if estimable else
                      "a CI needs at least 2 runs per tool (independent arms) or 2 pairs"),
            key=f"{ct.metric}:disagree"))
    return items


def _spread_findings(w: _Words) -> list[Finding]:
    """Paired with ``by`` groups: where the tools agree most and least closely."""
    ct, pre, digits = w.ct, w.pre, w.digits
    keys = list(ct.table.by)
    ag = ct.agreement
    log = bool(ag.iloc[0].get("log", True))
    items = []
    if ct.paired and keys and "loa_low" in ag.columns:
        grp = ag[~(ag[keys] == "all").all(axis=1) & ag["loa_low"].notna()]
        if len(grp) > 1:
            width = (np.log(grp["loa_high"]) - np.log(grp["loa_low"])) if log else grp["loa_high"] - grp["loa_low"]
            tight, loose = grp.loc[width.idxmin()], grp.loc[width.idxmax()]

            def name(row):
                return _group_words({k: row[k] for k in keys}, ct.cells, ct.by)
            sentence = (f"{pre}the tools agree most closely for {name(tight)} (a single configuration's ratio "
                        f"within {fmt_number(tight['loa_low'], digits)} to {fmt_number(tight['loa_high'], digits)}) "
                        f"and least for {name(loose)} ({fmt_number(loose['loa_low'], digits)} to "
                        f"{fmt_number(loose['loa_high'], digits)}); {int(grp['n'].min())}"
                        + (f" to {int(grp['n'].max())}" if grp['n'].max() != grp['n'].min() else "")
                        + f" configurations per {' and '.join(keys)}.")
            items.append(Finding(capitalise_after(sentence, pre), n=int(grp["n"].min()),
                                 unit_of_replication=f"matched configurations per {' x '.join(keys)} (the fewest)",
                                 method=_agreement_method(ct, short=True), key=f"{ct.metric}:spread"))
    return items


def _unmatched_findings(w: _Words) -> list[Finding]:
    """The runs left out of the comparison, as a caveat."""
    ct, pre, mw = w.ct, w.pre, metric_words(w.ct.metric)
    items = []
    if len(ct.unmatched):
        reasons = ct.unmatched["reason"].value_counts()
        n_runs = ct.unmatched["run_id"].nunique() if "run_id" in ct.unmatched else len(ct.unmatched)
        items.append(Finding(capitalise_after(f"{pre}{n_runs} run(s) are left out of the {mw} comparison: "
                                  + "; ".join(f"{r} ({c} row(s))" for r, c in reasons.items()) + ".", pre),
                             n=n_runs, unit_of_replication="runs left out", key=f"{ct.metric}:unmatched",
                             caveat=True))
    return items


def _agreement_method(ct: CrossTool, short: bool = False) -> str:
    log = bool(ct.agreement["log"].iloc[0]) if "log" in ct.agreement and len(ct.agreement) else True
    ag = ct.agreement
    k = int(ag["clusters"].iloc[0]) if "clusters" in ag and len(ag) and np.isfinite(ag["clusters"].iloc[0]) else 0
    if short and k:
        return (f"Bland-Altman on {'log ratios' if log else 'differences'} with the {k} {' x '.join(ct.by)} groups as "
                f"clusters: bias = mean of the group means with its t CI on {k - 1} df, limits of agreement bias -/+ "
                "1.96 x the total SD of one configuration (Bland & Altman 2007, J Biopharm Stat 17:571); each "
                "group's limits with their t CIs (Bland & Altman 1986, 1999)")
    if short:
        return (f"Bland-Altman on {'log ratios' if log else 'differences'}: bias with its t CI, limits of agreement "
                "bias -/+ 1.96 SD with their CIs (Bland & Altman 1986, 1999)")
    m = ct.method.split("; agreement: ", 1)
    return "Bland-Altman: " + m[1] if len(m) == 2 else "Bland-Altman limits of agreement"

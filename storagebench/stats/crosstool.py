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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import StatsError
from ._common import _as_list, _require_columns
from .agreement import bland_altman
from .compare import compare

__all__ = ["CONFIG_COLUMNS", "CrossTool", "cross_tool"]

#: The fio factor columns of ``runs`` that make two runs "the same configuration".
CONFIG_COLUMNS: tuple[str, ...] = ("rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs")
_MEANS = ("lat_mean_ns", "clat_mean_ns", "slat_mean_ns")


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
        the ``by`` columns (``"all"`` in the pooled row), ``n``, ``bias``, CIs, ``loa_low``, ``loa_high``
        and their CIs (ratios with ``log=True``), ``note`` where fewer than 3 pairs made it not estimable.
    unmatched : pandas.DataFrame
        Runs whose cell only one tool measured, or whose configuration is unknown (-1, NaN, ""),
        with a ``reason`` column.
    tool_col, baseline, other, metric : str
    cells : tuple of str
        The columns that define a configuration cell.
    paired : bool
        True when every matched cell had one run per tool (paired comparison).
    method : str
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


def _unknown(s: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(s):
        v = pd.to_numeric(s, errors="coerce")
        return v.isna() | (v == -1)
    return s.isna() | (s.astype("string") == "")


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
    confidence: float = 0.95,
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
        Missing columns; ``tool_col`` without exactly two levels; ``baseline`` not one of them;
        no cell measured by both tools; errors of :func:`~storagebench.stats.compare`.
    """
    _require_columns(runs, [tool_col, metric], "runs")
    levels = sorted(map(str, pd.unique(runs[tool_col].dropna())))
    if len(levels) != 2:
        raise StatsError(f"{tool_col!r} must have exactly two tools to compare, got {levels}; filter the rows first")
    if str(baseline) not in levels:
        raise StatsError(f"baseline must be one of the tools {levels}, got {baseline!r}")
    other = next(lv for lv in levels if lv != str(baseline))
    match_l, by_l = _as_list(match_on), _as_list(by)
    _require_columns(runs, [*match_l, *by_l], "runs")
    df = runs.copy()
    df[tool_col] = df[tool_col].astype(str)
    if aggregate and "run_id" in df.columns and df["run_id"].duplicated().any():
        from .saturation import per_run

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
    unmatched = [df[unknown].assign(reason="unknown configuration (-1, NaN or empty in " + ", ".join(cells) + ")")]
    df = df[~unknown]
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
    agreement = []
    groups = [("all", pairs)] + (list(pairs.groupby(by_l, dropna=False)) if by_l else [])
    for gkey, part in groups:
        rec = ({c: "all" for c in by_l} if isinstance(gkey, str) and gkey == "all"
               else dict(zip(by_l, gkey if isinstance(gkey, tuple) else (gkey,), strict=True)))
        try:
            ba = bland_altman(part[f"{metric}_{other}"], part[f"{metric}_{baseline}"], log=log, confidence=confidence)
        except StatsError as exc:
            rec.update(n=len(part), note=f"not estimable: {exc}")
        else:
            rec.update({k: v for k, v in ba.to_dict().items() if k != "method"}, note="")
            method_ba = ba.method
        agreement.append(rec)
    agreement_df = pd.DataFrame(agreement)
    design = (f"paired over the cells ({', '.join(c for c in cells if c not in by_l)}) within each group"
              if paired else "independent arms within each configuration cell (replicates present)")
    method = (f"cross-tool: {other} vs baseline {baseline} ({tool_col} is the factor, never a replicate) on "
              f"{metric}; cells = {', '.join(cells)}; compare: {design}"
              + (f"; agreement: {method_ba}" if "method_ba" in locals() else ""))
    return CrossTool(pairs=pairs, comparison=table.to_frame(), agreement=agreement_df,
                     unmatched=pd.concat(unmatched, ignore_index=True), tool_col=tool_col, baseline=str(baseline),
                     other=other, metric=metric, cells=tuple(cells), paired=paired, method=method)

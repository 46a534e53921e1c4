"""Per-run aggregation and Little's law (the check, its table and its sentence, and per tool). Private: imported from
:mod:`storagebench.stats.saturation`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .._checks import need_columns
from ..errors import StatsError
from ..findings import Finding, Findings, fmt_number
from ..runlevel import is_run_totals
from ..runlevel import per_run as _runlevel_per_run
from ._common import capitalise_after, require_columns

# --------------------------------------------------------------------------- per-run aggregation


def _is_percentile(col: str) -> bool:
    return col.endswith("_ns") and col.startswith(("clat_p", "lat_p")) and col[:-3].split("_p", 1)[-1].replace(
        "_", "").isdigit()


def per_run(runs: pd.DataFrame, *, latency: str | None = "lat_mean_ns",
            histograms: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run, checked for the statistics: :func:`storagebench.runlevel.per_run`.

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs``-schema rows (run x host x job x direction) or a run-level table
        (``tidy/run_totals.parquet``), with ``iops`` (1/s) and the ``latency`` column (ns). Without a
        ``run_id`` column every row is its own run (published tables).
    latency : str or None
        Mean-latency column that must be present and valid (``lat_mean_ns`` or ``clat_mean_ns``), e.g. for
        Little's law; ``None`` requires only ``iops``. Percentile columns cannot be averaged: they come
        from merged histograms (``histograms``).
    histograms : pandas.DataFrame, optional
        json+ bins of the runs: the percentiles of a run with several rows come from them.

    Returns
    -------
    pandas.DataFrame
        The run-level rows (:data:`storagebench.schema.RUN_TOTALS`: ``iops`` = completed I/Os / longest
        runtime, the sum over directions; mean latencies weighted by completed I/Os, fio's
        ``sum_thread_stats``; ``outstanding_ios`` = sum of ``iodepth x numjobs`` over the run's job
        sections, NaN where one is unknown; ``n_rows`` rows combined) and the study factor columns.

    Raises
    ------
    StatsError
        Missing columns; NaN or negative IOPS, or (with ``latency``) NaN or negative latency, iodepth or
        numjobs; a percentile column given as ``latency``.

    Notes
    -----
    The rule is fio's own for combining jobs (``sum_thread_stats`` in fio's ``stat.c``, used by
    ``group_reporting``); :mod:`storagebench.runlevel` is its one implementation. Two jobs of 1000 IOPS,
    one for 10 s at 1 ms and one for 1 s at 10 ms, give 1100 IOPS at 1.818 ms.
    """
    if latency is not None and _is_percentile(latency):
        raise StatsError(f"latency {latency!r} is a percentile: percentiles cannot be IOPS-weighted; merge "
                         "histograms (storagebench.runlevel) or pass a mean column such as 'lat_mean_ns'")
    require_columns(runs, ["iops", *([latency] if latency else [])], "runs")
    checked = ["iops", *([latency, "iodepth", "numjobs"] if latency else [])]  # -1: unknown in published tables
    for col in (c for c in checked if c in runs.columns):
        v = pd.to_numeric(runs[col], errors="coerce")
        if v.isna().any() or (v < 0).any():
            raise StatsError(f"runs.{col} has NaN or negative values (rows {list(runs.index[v.isna() | (v < 0)][:5])})")
    if is_run_totals(runs):
        return _runlevel_per_run(runs)
    return _runlevel_per_run(runs, histograms)


# --------------------------------------------------------------------------- Little's law


def littles_law(runs: pd.DataFrame, *, tolerance: float = 0.2, latency: str = "lat_mean_ns") -> pd.DataFrame:
    """Check Little's law per run: IOPS x mean latency should equal the outstanding I/Os.

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs``-schema table (see :func:`per_run`; directions, hosts and jobs of a run are combined first
        by fio's rule: completed I/Os over the longest runtime, latency weighted by completed I/Os,
        outstanding I/Os = sum of ``iodepth x numjobs``).
    tolerance : float
        Flag runs with ``|littles_ratio - 1| > tolerance`` (default 0.2).
    latency : str
        Mean latency column in ns (``lat_mean_ns``, fio's submission-to-completion latency).

    Returns
    -------
    pandas.DataFrame
        :func:`per_run` columns plus ``littles_ratio`` = ``iops x latency x 1e-9 / outstanding_ios``
        (dimensionless), ``flagged`` (bool) and ``note``: below 1 - tolerance fewer I/Os were in flight
        than configured (a sync ioengine such as psync, ``iodepth_low``/batching, a device or scheduler
        queue limit, think time); above 1 + tolerance the numbers are inconsistent (check units and how
        rows were aggregated).

    Raises
    ------
    StatsError
        Bad ``tolerance``; errors of :func:`per_run`.

    Notes
    -----
    Little, J. D. C. (1961), "A proof for the queuing formula L = lambda W", Oper. Res. 9:383. For a closed
    loop such as fio's (each job keeps ``iodepth`` I/Os in flight), L = outstanding I/Os, lambda = IOPS and
    W = mean latency.
    """
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise StatsError(f"tolerance must be a fraction in (0, 1), got {tolerance!r}")
    require_columns(runs, ["iops", latency, "iodepth", "numjobs"], "runs")
    out = per_run(runs, latency=latency)
    ratio = out["iops"] * out[latency] * 1e-9 / out["outstanding_ios"].where(out["outstanding_ios"] > 0)
    out["littles_ratio"] = ratio
    notes = []
    for r in ratio:
        if not np.isfinite(r):
            notes.append("not estimable: no I/O completed or no outstanding I/Os")
        elif r < 1 - tolerance:
            notes.append("fewer I/Os in flight than iodepth x numjobs: sync ioengine, batching, queue limit or "
                         "think time")
        elif r > 1 + tolerance:
            notes.append("more I/Os in flight than configured: inconsistent units or aggregation")
        else:
            notes.append("")
    out["flagged"] = [bool(n) for n in notes]
    out["note"] = notes
    return out


def littles_law_table(checked: pd.DataFrame, *, by: Sequence[str] = ("numjobs", "iodepth", "repetition")) -> pd.DataFrame:
    """Display view of :func:`storagebench.stats.littles_law` with units in the headers.

    Parameters
    ----------
    checked : pandas.DataFrame
        The result of :func:`storagebench.stats.littles_law` (one row per run).
    by : sequence of str
        Columns to index and sort by (those present are used).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``by``; columns ``IOPS (1/s)``, ``mean lat (ms)``, ``IOPS x lat (I/Os)``,
        ``outstanding I/Os (numjobs x iodepth)``, ``ratio (1 = law holds)``, ``flagged``, ``note``.

    Raises
    ------
    SchemaError
        ``checked`` lacks ``iops``, ``outstanding_ios`` or ``littles_ratio``.
    """
    need_columns(checked, ["iops", "outstanding_ios", "littles_ratio"], "checked")
    lat = next((c for c in ("lat_mean_ns", "clat_mean_ns") if c in checked.columns), None)
    keys = [c for c in by if c in checked.columns]
    out = checked[keys].copy()
    out["IOPS (1/s)"] = checked["iops"].round(0)
    if lat is not None:
        out["mean lat (ms)" if lat == "lat_mean_ns" else "mean clat (ms)"] = (checked[lat] * 1e-6).round(4)
        out["IOPS x lat (I/Os)"] = (checked["iops"] * checked[lat] * 1e-9).round(2)
    out["outstanding I/Os (numjobs x iodepth)"] = checked["outstanding_ios"]
    out["ratio (1 = law holds)"] = checked["littles_ratio"].round(3)
    for c in ("flagged", "note"):
        if c in checked.columns:
            out[c] = checked[c]
    return out.sort_values(keys).set_index(keys) if keys else out


def littles_law_summary(checked: pd.DataFrame, *, tolerance: float = 0.2) -> str:
    """One sentence for a report: how many runs obey Little's law, and the range of the ratio.

    Parameters
    ----------
    checked : pandas.DataFrame
        The result of :func:`storagebench.stats.littles_law` (``littles_ratio``, ``flagged``).
    tolerance : float
        The tolerance ``checked`` was computed with (``littles_law``'s default 0.2), for the sentence.

    Returns
    -------
    str
        e.g. "Little's law (IOPS x mean latency = numjobs x iodepth outstanding I/Os) holds within ±20% for 36
        of 36 runs (ratio 0.995 to 0.999); no run is flagged."
    """
    need_columns(checked, ["littles_ratio", "flagged"], "checked")
    ratio = checked["littles_ratio"].astype(float)
    finite = ratio[np.isfinite(ratio)]
    flagged = int(checked["flagged"].astype(bool).sum())
    n = len(checked)
    rng = f" (ratio {finite.min():.3f} to {finite.max():.3f})" if len(finite) else ""
    tail = "no run is flagged." if not flagged else f"{flagged} run(s) are flagged and listed below."
    return (f"Little's law (IOPS × mean latency = numjobs × iodepth outstanding I/Os) holds within "
            f"±{tolerance:.0%} for {n - flagged} of {n} runs{rng}; {tail}")


def tool_littles_law(runs: pd.DataFrame, *, tool_col: str = "tool", scale: str | None = None,
                     tolerance: float = 0.2, latency: str = "lat_mean_ns", label: str = ""):
    """Little's law per tool: does each tool's mean latency fit its own IOPS and outstanding I/Os?

    Two tools can disagree on latency because one reports it differently (a sum over jobs, a different
    start of the clock). Little's law tells which: in a closed loop, IOPS x mean latency equals the
    outstanding I/Os, so a tool whose ratio is far from 1 did not report a per-I/O mean.

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs``-schema rows of both tools (:func:`~storagebench.stats.littles_law` aggregates each run).
    tool_col : str
        The column naming the tool.
    scale : str, optional
        A column multiplying ``numjobs x iodepth`` into the run's outstanding I/Os, for rows that are
        totals over several load generators (``"vms"`` in seed 002's stripe table: every VM ran threads x QD).
        Ignored when ``runs`` has no such column.
    tolerance : float
        A run is flagged when its ratio is off 1 by more than this fraction (default 0.2).
    latency : str
        Mean latency column, ns.
    label : str
        A prefix naming the data set in the sentence.

    Returns
    -------
    (pandas.DataFrame, storagebench.findings.Findings)
        Per tool: ``tool``, ``runs``, ``median``, ``min``, ``max`` (of the ratio, dimensionless) and
        ``flagged`` (runs off by more than ``tolerance``); and one finding, a caveat when a tool has most of
        its runs flagged. Runs without a latency (NaN) are left out.

    Raises
    ------
    StatsError
        Missing columns; the errors of :func:`~storagebench.stats.littles_law`.

    Notes
    -----
    Little, J. D. C. (1961), "A proof for the queuing formula L = lambda W", Oper. Res. 9:383.
    """
    require_columns(runs, [tool_col, latency], "runs")
    df = runs[runs[latency].notna()]
    if scale and scale in df.columns:
        df = df.assign(numjobs=df["numjobs"] * df[scale])
    per = littles_law(df, tolerance=tolerance, latency=latency)
    rows = []
    for tool, part in per.groupby(per[tool_col].astype(str), sort=True):
        r = part["littles_ratio"].dropna()
        rows.append({"tool": tool, "runs": len(r), "median": r.median(), "min": r.min(), "max": r.max(),
                     "flagged": int(part["flagged"].sum())})
    table = pd.DataFrame(rows, columns=["tool", "runs", "median", "min", "max", "flagged"])
    if table.empty:
        return table, Findings()
    off = table[table["flagged"] > table["runs"] / 2]
    per_tool = "; ".join(f"{t.tool} median {fmt_number(t.median)} (range {fmt_number(t.min)} to {fmt_number(t.max)}, "
                         f"{t.flagged} of {t.runs} runs off by more than {tolerance:.0%})" for t in table.itertuples())
    pre = f"{label}: " if label else ""
    sentence = (f"{pre}Little's law (IOPS x mean latency / outstanding I/Os, 1 for a per-I/O mean latency): "
                f"{per_tool}.")
    if len(off):
        names = " and ".join(off["tool"])
        sentence += (f" {names}'s mean latency does not fit {'its' if len(off) == 1 else 'their'} own IOPS and "
                     "outstanding I/Os, so it is not a per-I/O mean and a latency ratio between the tools measures "
                     "how it was reported, not the storage.")
    method = ("storagebench.stats.littles_law (Little 1961) per run, outstanding I/Os = numjobs x iodepth"
              + (f" x {scale}" if scale and scale in runs.columns else "") + f", tolerance {tolerance:.0%}")
    return table, Findings((Finding(capitalise_after(sentence, pre), n=int(table["runs"].sum()),
                                     unit_of_replication="runs of both tools", method=method,
                                     key=f"{latency}:littles_law", caveat=bool(len(off))),))

"""Per-run aggregation and Little's law (the check, its table and its sentence). Private: imported from
:mod:`storagebench.stats.saturation`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .._checks import need_columns
from ..errors import StatsError
from ..runlevel import is_run_totals
from ..runlevel import per_run as _runlevel_per_run
from ._common import require_columns

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

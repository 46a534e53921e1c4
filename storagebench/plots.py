"""Figure functions with one house style: long-form tidy tables in, a labelled Axes out.

Every axes-level function takes the tidy table first, keyword-only options after it,
``ax=None`` (a new figure is made when it is ``None``) and returns the
:class:`matplotlib.axes.Axes` it drew on. Axes always carry their unit: latency in ms,
bandwidth in MB/s (10**6 B/s) or MiB/s (2**20 B/s) as the metric name says, IOPS in I/Os
per second.

Rows of ``runs`` are one per run x host x job x direction (see :mod:`storagebench.schema`).
The figures read one row per run from the run-level table (:func:`storagebench.runlevel.per_run`;
a ``runs`` table is combined first, or pass ``tidy/run_totals.parquet``): fio's own rule for group
reporting (``sum_thread_stats`` in fio's ``stat.c``): completed I/Os and bytes add up over the
longest runtime, mean latencies are weighted by completed I/Os (``total_ios``). Latency
*percentiles* are never averaged; figures of percentiles use the json+ histograms (:func:`clat_cdf`,
:func:`summary_table`).

Each point is the geometric mean over its repetitions, and its uncertainty band is the log-scale
confidence interval computed by :func:`storagebench.stats.point_means` (by default with the run-to-run
spread pooled over the points of the figure; this module draws, it computes no statistics of its own),
drawn only where a point has a CI.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ._histogram import merge_histograms, percentiles_from_bins
from .errors import SchemaError
from .findings import fmt_number
from .records import provenance_records
from .runlevel import is_run_totals
from .runlevel import per_run as _runlevel_per_run
from .schema import DIRECTIONS, PERCENTILES, RUN_TOTALS, RUNS, percentile_column
from .stats import attach_factors, bland_altman, point_means, point_percentiles
from .tables import column_display

__all__ = [
    "METRICS",
    "FACTOR_LABELS",
    "HEATMAP_LOG_RATIO",
    "set_house_style",
    "house_style",
    "per_point",
    "summary_table",
    "littles_law_table",
    "littles_law_summary",
    "iops_vs_iodepth",
    "latency_vs_iops",
    "heatmap",
    "heatmap_grid",
    "clat_cdf",
    "TAIL_TICKS",
    "metric_vs",
    "ratio_forest",
    "bland_altman_plot",
    "cross_tool_plot",
    "parameter_claim_plot",
    "provenance_caption",
    "add_caption",
]


@dataclass(frozen=True)
class _Metric:
    column: str  # tidy column it is computed from
    scale: float  # display value = column value * scale
    label: str  # axis label with the display unit
    fmt: str  # format of annotated values


def _pct_metrics() -> dict[str, _Metric]:
    out = {}
    for p in PERCENTILES:
        col = percentile_column(p)
        name = col[: -len("_ns")] + "_ms"
        out[name] = _Metric(col, 1e-6, f"p{p:g} completion latency, clat (ms)", ".3g")
    return out


#: Display metrics: name -> tidy column, scale to the display unit, axis label.
METRICS: dict[str, _Metric] = {
    "iops": _Metric("iops", 1.0, "IOPS (I/Os per s)", ",.0f"),
    "kiops": _Metric("iops", 1e-3, "IOPS (thousand I/Os per s)", ".3g"),
    "bw_MB_per_s": _Metric("bw_bytes_per_s", 1e-6, "bandwidth (MB/s, 10^6 B/s)", ".4g"),
    "bw_MiB_per_s": _Metric("bw_bytes_per_s", 1.0 / 2**20, "bandwidth (MiB/s, 2^20 B/s)", ".4g"),
    "lat_mean_ms": _Metric("lat_mean_ns", 1e-6, "mean latency, lat (ms)", ".3g"),
    "clat_mean_ms": _Metric("clat_mean_ns", 1e-6, "mean completion latency, clat (ms)", ".3g"),
    "slat_mean_ms": _Metric("slat_mean_ns", 1e-6, "mean submission latency, slat (ms)", ".3g"),
    "usr_cpu_pct": _Metric("usr_cpu_pct", 1.0, "user CPU (% of one CPU, mean over jobs)", ".3g"),
    "sys_cpu_pct": _Metric("sys_cpu_pct", 1.0, "system CPU (% of one CPU, mean over jobs)", ".3g"),
    **_pct_metrics(),
}

#: Axis labels (with units) of the factor columns of ``runs``; other columns are labelled by name.
FACTOR_LABELS: dict[str, str] = {
    "iodepth": "iodepth (outstanding I/Os per job)",
    "numjobs": "numjobs (jobs)",
    "bs_bytes": "I/O size, bs (KiB)",
    "rwmixread_pct": "reads, rwmixread (%)",
    "random_pct": "random I/O, percentage_random (%)",
    "clients": "clients (fio servers)",
    "stripe_width": "stripe width (components)",
    "repetition": "repetition",
    "run_order": "run order",
}



# --------------------------------------------------------------------------- style


_CONTEXT_RC = {"axes.titlesize": 12.0, "legend.fontsize": 10.0, "legend.title_fontsize": 10.0}
_FIGSIZE = (7.0, 4.3)  # inches
_DPI = 110  # PNG resolution in notebooks (dots per inch)


def set_house_style() -> None:
    """Apply the storagebench figure style globally (seaborn ``whitegrid``, colour-blind palette).

    Notebooks call it once; the figure functions also draw new figures inside
    :func:`house_style`, so they look the same without it.
    """
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind",
                  rc={**_CONTEXT_RC, "figure.figsize": _FIGSIZE, "figure.dpi": _DPI})


@contextmanager
def house_style():
    """Context manager: the house style for the figures made inside it.

    Only seaborn's style and context keys are set and restored (not a full
    ``rc_context``, whose restore would also undo what a backend sets when it loads,
    e.g. Jupyter's inline backend turning interactive mode on).
    """
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", rc=_CONTEXT_RC):
        yield


def _new_ax(ax: Axes | None, figsize: tuple[float, float] | None = None) -> Axes:
    if ax is not None:
        return ax
    with house_style():
        _, new = plt.subplots(figsize=figsize or _FIGSIZE, dpi=_DPI, layout="constrained")
    return new


# --------------------------------------------------------------------------- validation


def _one_of(name: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"The value for `{name}` must be one of {list(allowed)}, but {value!r} was passed.")


def _need_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`{what}` must be a pandas DataFrame, but {type(df).__name__} was passed.")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SchemaError(
            f"`{what}` has no column(s) {missing}; it has {sorted(map(str, df.columns))}."
        )
    if df.empty:
        raise SchemaError(f"`{what}` has no rows.")


def _metric(name: str) -> _Metric:
    _one_of("metric", name, list(METRICS))
    return METRICS[name]


def _factor_label(col: str) -> str:
    return FACTOR_LABELS.get(col, col)


# --------------------------------------------------------------------------- tables


def _per_run(runs: pd.DataFrame, *, direction: str | None = None) -> pd.DataFrame:
    """One row per completed, error-free run (one direction, or all): the run-level table.

    Parameters
    ----------
    runs : pandas.DataFrame
        The tidy ``runs`` table (:data:`storagebench.schema.RUNS`, plus study factor columns), or the
        run-level table (``tidy/run_totals.parquet``).
    direction : {"read", "write", "trim"} or None
        That direction only; ``None`` combines all directions (total IOPS of a mixed workload).

    Returns
    -------
    pandas.DataFrame
        :func:`storagebench.runlevel.per_run` with ``completed=True``: one row per ``run_id`` with fio's
        rule for combining jobs, hosts and directions (completed I/Os over the longest runtime, mean
        latencies weighted by completed I/Os, ``stat.c`` ``sum_thread_stats``) and every study factor.
        A run with any job in error (``error != 0``) or killed (``partial``) is left out whole, never
        averaged with its good jobs.

    Raises
    ------
    ValueError
        ``direction`` is not one of the allowed values.
    SchemaError
        ``runs`` lacks ``run_id``/``iops``, or no run is left after filtering.
    """
    _need_columns(runs, ["run_id", "iops"], "runs")
    if direction is not None:
        _one_of("direction", direction, list(DIRECTIONS))
        _need_columns(runs, ["direction"], "runs")
        if not (runs["direction"] == direction).any():
            present = sorted(runs["direction"].unique())
            raise SchemaError(f"`runs` has no rows with direction {direction!r}; it has {present}.")
    pr = _runlevel_per_run(runs, direction=direction, completed=True)
    if pr.empty:
        raise SchemaError("`runs` has no rows of completed, error-free runs (error == 0, partial == False).")
    return pr


def _varies_within_run(runs: pd.DataFrame, cols: Sequence[str], direction: str | None) -> list[str]:
    """The ``cols`` of ``runs`` that take several values within one run (a randrw job's bs per direction)."""
    if is_run_totals(runs) or "run_id" not in runs.columns:
        return []
    df = runs if direction is None or "direction" not in runs.columns else runs[runs["direction"] == direction]
    cols = [c for c in cols if c in df.columns]
    if not cols or df.empty:
        return []
    n = df.groupby("run_id", observed=True, dropna=False)[cols].nunique(dropna=False).max()
    return [c for c in cols if n[c] > 1]


#: Factor columns that must be equal within a point (``target`` may differ: a resumed sweep can
#: use a new temp file on the same disk).
_GUARDED = ("rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs", "ioengine", "direct", "tool")
_SCHEMA_NAMES = frozenset(c.name for c in (*RUNS, *RUN_TOTALS))


def _check_not_mixed(pr: pd.DataFrame, by: Sequence[str]) -> None:
    extra = [c for c in pr.columns if c not in _SCHEMA_NAMES and c not in ("n_rows", "run_id", "outstanding_ios")
             and pr[c].nunique(dropna=True) <= 32]
    for col in [*_GUARDED, *extra]:
        if col in by or col not in pr.columns:
            continue
        per = pr.groupby(list(by), dropna=False)[col].nunique(dropna=True)
        if (per > 1).any():
            key = per[per > 1].index[0]
            key = key if isinstance(key, tuple) else (key,)
            sel = pr
            for c, v in zip(by, key, strict=True):
                sel = sel[sel[c] == v]
            values = sorted(map(str, sel[col].dropna().unique()))
            where = ", ".join(f"{c}={v}" for c, v in zip(by, key, strict=True))
            raise ValueError(
                f"The runs of one point ({where}) have different `{col}` values {values}: averaging them would mix "
                f"configurations. Filter the rows (e.g. runs[runs[{col!r}] == ...]) or add {col!r} to `by`/`hue`."
            )


def per_point(runs: pd.DataFrame, *, by: Sequence[str], metrics: Sequence[str] = ("iops",),
              direction: str | None = None, ci: float = 0.95, method: str = "auto") -> pd.DataFrame:
    """Geometric mean and log-scale confidence interval of display metrics per study point.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    by : sequence of str
        Factor columns that define a point, e.g. ``["numjobs", "iodepth"]``.
    metrics : sequence of str
        Names from :data:`METRICS` (``"iops"``, ``"lat_mean_ms"``, ``"bw_MB_per_s"`` ...).
    direction : {"read", "write", "trim"} or None
        As in :func:`_per_run`.
    ci : float
        Confidence level of the interval (:func:`storagebench.stats.point_means`; plots compute no
        statistics of their own).
    method : str
        CI method of :func:`storagebench.stats.point_estimates` (default ``auto``: log scale, pooled over
        the points unless equal spread is rejected).

    Returns
    -------
    pandas.DataFrame
        One row per point: the ``by`` columns, ``n`` (runs), and per metric ``<metric>`` (geometric mean,
        display unit), ``<metric>_ci_low``, ``<metric>_ci_high`` (equal to the estimate where there is no
        CI). ``attrs["checks"]``: per metric the :class:`storagebench.stats.SpreadCheck` (method used).

    Raises
    ------
    ValueError
        Unknown metric or direction; or the runs of one point differ in another factor
        (e.g. two block sizes, two tools): averaging them would pass one configuration off
        as repetitions of another, so filter the rows or add that column to ``by``.
    SchemaError
        A column is missing.
    """
    by = [by] if isinstance(by, str) else list(by)
    specs = [_metric(m) for m in metrics]
    pr = _per_run(runs, direction=direction)
    varies = _varies_within_run(runs, by, direction)
    if varies:
        raise ValueError(f"`{varies[0]}` differs between the rows of one run (e.g. its read and write rows), so a "
                         "run has no single value of it: pass `direction` or filter the rows.")
    _need_columns(pr, by + [s.column for s in specs], "runs")
    _check_not_mixed(pr, by)
    scaled = pr[[*by, "run_id"]].copy() if "run_id" in pr.columns else pr[by].copy()  # errors name the run
    for name, spec in zip(metrics, specs, strict=True):
        scaled[name] = pr[spec.column].astype(float) * spec.scale
    pts = point_means(scaled, by, list(metrics), confidence=ci, method=method)
    checks = pts.attrs.get("checks", {})
    pts = pts.drop(columns=[f"{m}_log_sd" for m in metrics if f"{m}_log_sd" in pts.columns])
    for name in metrics:  # a band of zero width where there is no interval (one run): drawn as the line
        for side in ("_ci_low", "_ci_high"):
            pts[name + side] = pts[name + side].fillna(pts[name])
    pts.attrs["checks"] = checks
    return pts


def summary_table(runs: pd.DataFrame, histograms: pd.DataFrame | None = None, *,
                  by: Sequence[str] = ("numjobs", "iodepth"), direction: str | None = None,
                  ci: float = 0.95) -> pd.DataFrame:
    """A display table per study point with the unit in every column header.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    histograms : pandas.DataFrame, optional
        Tidy ``histograms`` table; when given, p50/p99 completion latency of each point
        are computed from the merged json+ bins of all its runs (never by averaging
        percentiles), with :func:`storagebench._histogram.percentiles_from_bins`.
    by : sequence of str
        Factor columns that define a point.
    direction : {"read", "write", "trim"} or None
        As in :func:`_per_run`.
    ci : float
        Confidence level of the IOPS interval.

    Returns
    -------
    pandas.DataFrame
        Indexed by the ``by`` columns; columns ``runs``, ``IOPS (1/s)``, ``IOPS 95% CI (1/s)``,
        ``bandwidth (MB/s)``, ``mean lat (ms)``, and with histograms ``p50 clat (ms)``,
        ``p99 clat (ms)``.
    """
    by = [by] if isinstance(by, str) else list(by)
    pts = per_point(runs, by=by, metrics=("iops", "bw_MB_per_s", "lat_mean_ms"), direction=direction, ci=ci)
    level = f"{ci * 100:g}%"
    out = pts[by].copy()
    out["runs"] = pts["n"]
    out["IOPS (1/s)"] = pts["iops"].round(0)
    out[f"IOPS {level} CI (1/s)"] = [
        f"{lo:,.0f} – {hi:,.0f}" if hi > lo else "n/a"
        for lo, hi in zip(pts["iops_ci_low"], pts["iops_ci_high"], strict=True)
    ]
    out["bandwidth (MB/s)"] = pts["bw_MB_per_s"].round(2)
    out["mean lat (ms)"] = pts["lat_mean_ms"].round(4)
    if histograms is not None:
        pct = _point_percentiles(runs, histograms, by=by, percentiles=(50.0, 99.0), direction=direction)
        out = out.merge(pct, on=by, how="left")
    return out.set_index(by)


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
    _need_columns(checked, ["iops", "outstanding_ios", "littles_ratio"], "checked")
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
    _need_columns(checked, ["littles_ratio", "flagged"], "checked")
    ratio = checked["littles_ratio"].astype(float)
    finite = ratio[np.isfinite(ratio)]
    flagged = int(checked["flagged"].astype(bool).sum())
    n = len(checked)
    rng = f" (ratio {finite.min():.3f} to {finite.max():.3f})" if len(finite) else ""
    tail = "no run is flagged." if not flagged else f"{flagged} run(s) are flagged and listed below."
    return (f"Little's law (IOPS × mean latency = numjobs × iodepth outstanding I/Os) holds within "
            f"±{tolerance:.0%} for {n - flagged} of {n} runs{rng}; {tail}")


def _merged_bins(histograms: pd.DataFrame) -> pd.DataFrame:
    return merge_histograms(histograms, by=())


def _percentiles(bins: pd.DataFrame, percentiles: Sequence[float]) -> dict[float, float]:
    res = percentiles_from_bins(bins["bin_ns"].to_numpy(), bins["count"].to_numpy(), list(percentiles))
    return {float(k): float(v) for k, v in res.items()}


def _join_factors(runs: pd.DataFrame | None, histograms: pd.DataFrame, by: Sequence[str],
                  direction: str | None) -> pd.DataFrame:
    if direction is not None:
        _one_of("direction", direction, list(DIRECTIONS))
    return attach_factors(histograms, runs, list(by), direction)


def _point_percentiles(runs, histograms, *, by, percentiles, direction) -> pd.DataFrame:
    if direction is not None:
        _one_of("direction", direction, list(DIRECTIONS))
    pct = point_percentiles(histograms, runs, list(by), tuple(percentiles), direction=direction)
    return pct.rename(columns={f"clat_p{p:g}_ns": f"p{p:g} clat (ms)" for p in percentiles}).assign(
        **{f"p{p:g} clat (ms)": lambda d, p=p: (d[f"p{p:g} clat (ms)"] * 1e-6).round(4) for p in percentiles})


# --------------------------------------------------------------------------- axes helpers


def _log2_axis(ax: Axes, values: Sequence[float], axis: str = "x", scale: float = 1.0) -> None:
    ticks = sorted({float(v) for v in values if np.isfinite(v) and v > 0})
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_scale("log", base=2)
    target = ax.xaxis if axis == "x" else ax.yaxis
    if ticks and len(ticks) <= 16:
        target.set_ticks(ticks)
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v * scale:g}"))
    target.set_minor_formatter(NullFormatter())


def _upper(means: pd.Series, highs: pd.Series | None, room: float = 1.5) -> float:
    """Top of a value axis: the CI tops, but at most ``room`` x the largest mean.

    With 2-3 repetitions a t interval can be many times the mean; letting it set the axis
    would flatten the lines. Bands beyond the axis are clipped (visibly cut at the edge).
    """
    top = float(np.nanmax(means.to_numpy(dtype=float)))
    if highs is not None:
        top = max(top, min(float(np.nanmax(highs.to_numpy(dtype=float))), room * top))
    return top * 1.05 if top > 0 else 1.0


def _ci_note(ci: float | None, pts: pd.DataFrame, what: str, metric: str) -> str:
    """``"; bands: 95% CI, log scale, pooled over 12 points (24 df)"``: the method stats used, in a few words."""
    if ci is None:
        return ""
    check = pts.attrs.get("checks", {}).get(metric)
    if check is None or not (pts[f"{metric}_ci_high"] > pts[f"{metric}_ci_low"]).any():
        return "; no CI (one run per point)"
    return f"; {what}: {ci * 100:g}% CI, {check.short()}"


_THOUSANDS = FuncFormatter(lambda v, _: f"{v:,.0f}")


def _hue_palette(levels: Sequence[Any]):
    return dict(zip(levels, sns.color_palette("colorblind", n_colors=max(len(levels), 1)), strict=False))


# --------------------------------------------------------------------------- figures


def iops_vs_iodepth(runs: pd.DataFrame, *, hue: str | None = "numjobs", metric: str = "iops",
                    direction: str | None = None, ci: float | None = 0.95, ax: Axes | None = None) -> Axes:
    """IOPS vs iodepth, one line per ``hue`` level (numjobs), on a log2 iodepth axis.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table with ``iodepth`` and the ``hue`` column.
    hue : str or None
        Column with one line per value (default ``numjobs``); ``None`` draws one line.
    metric : str
        A name from :data:`METRICS`; ``"iops"`` by default, ``"bw_MB_per_s"`` for bandwidth.
    direction : {"read", "write", "trim"} or None
        As in :func:`_per_run`.
    ci : float or None
        Confidence level of the band around each line (:func:`storagebench.stats.point_means`: log
        scale, pooled over the points); ``None`` draws no band.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        One line (``ax.lines``) per ``hue`` level; bands in ``ax.collections``.
    """
    return metric_vs(runs, x="iodepth", metric=metric, hue=hue, direction=direction, ci=ci, logx=True,
                     ax=ax, title=f"{METRICS[metric].label.split(' (')[0] if metric in METRICS else metric} vs iodepth")


def metric_vs(runs: pd.DataFrame, *, x: str, metric: str = "iops", hue: str | None = None,
              direction: str | None = None, ci: float | None = 0.95, logx: bool = False,
              ax: Axes | None = None, title: str | None = None) -> Axes:
    """A display metric against a factor, one line per ``hue`` level, with CI bands.

    E.g. IOPS or MB/s vs I/O size (``x="bs_bytes"``), mean latency vs clients.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    x : str
        Factor column on the x axis (``bs_bytes`` is shown in KiB).
    metric : str
        A name from :data:`METRICS`.
    hue : str or None
        Factor column, one line per value.
    direction : {"read", "write", "trim"} or None
        As in :func:`_per_run`.
    ci : float or None
        Confidence level of the band (:func:`storagebench.stats.point_means`); ``None`` for none.
    logx : bool
        log2 x axis with a tick at each value present.
    ax : matplotlib.axes.Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        Unknown ``metric``/``direction``/``ci``.
    SchemaError
        ``x`` or ``hue`` is not a column of ``runs``.
    """
    m = _metric(metric)
    if ci is not None and not 0 < ci < 1:
        raise ValueError(f"The value for `ci` must be a confidence level in (0, 1) or None, but {ci!r} was passed.")
    by = [x] + ([hue] if hue else [])
    pts = per_point(runs, by=by, metrics=(metric,), direction=direction, ci=ci or 0.95)
    pts = pts[np.isfinite(pts[metric].astype(float))]
    if pts.empty:
        raise SchemaError(f"`runs` has no finite values of {m.column!r} to plot.")
    ax = _new_ax(ax)
    levels = sorted(pts[hue].unique()) if hue else [None]
    pal = _hue_palette(levels)
    for level in levels:
        g = (pts if level is None else pts[pts[hue] == level]).sort_values(x)
        xv = g[x].astype(float).to_numpy()
        ax.plot(xv, g[metric], marker="o", ms=5, lw=1.8, color=pal[level],
                label=str(level) if level is not None else m.label.split(" (")[0])
        if ci is not None and (g[f"{metric}_ci_high"] > g[f"{metric}_ci_low"]).any():
            ax.fill_between(xv, g[f"{metric}_ci_low"], g[f"{metric}_ci_high"], color=pal[level], alpha=0.18, lw=0)
    xscale = 1.0 / 1024 if x == "bs_bytes" else 1.0
    if logx:
        _log2_axis(ax, pts[x].astype(float).unique(), "x", xscale)
    elif xscale != 1.0:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * xscale:g}"))
    elif (pts[x].astype(float) % 1 == 0).all():  # a count (clients, numjobs): no tick at 1.25 clients
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(_factor_label(x))
    ax.set_ylabel(m.label)
    if metric == "iops":
        ax.yaxis.set_major_formatter(_THOUSANDS)
    ax.set_ylim(0, _upper(pts[metric], pts.get(f"{metric}_ci_high") if ci is not None else None))
    if hue:
        ax.legend(title=f"{hue}{_ci_note(ci, pts, 'band', metric)}", loc="best")
    ax.set_title(title or f"{m.label.split(' (')[0]} vs {x}")
    return ax


_KNEE_KEYS = ("numjobs", "iodepth", "iops", "lat_mean_ns", "latency_ms")


def _knee_point(knee: Any, by: Sequence[str]) -> dict[str, Any]:
    if knee is None:
        return {}
    if isinstance(knee, Mapping):
        return dict(knee)
    if isinstance(knee, pd.Series):
        return knee.to_dict()
    return {k: getattr(knee, k) for k in (*by, *_KNEE_KEYS) if hasattr(knee, k)}


def _mark_label(k: Mapping[str, Any], by: Sequence[str], recommended: bool) -> str:
    desc = ", ".join(f"{c}={k[c]:g}" for c in by)
    return f"{'recommended' if recommended else 'knee'} ({desc})"


def latency_vs_iops(runs: pd.DataFrame, *, knee: Any = None, latency: str = "lat_mean_ms",
                    hue: str | None = "numjobs", order: str = "iodepth", direction: str | None = None,
                    ci: float | None = 0.95, histograms: pd.DataFrame | None = None, tail: float = 99.0,
                    ax: Axes | None = None) -> Axes:
    """The hockey stick: mean latency (and the tail) against IOPS as load rises, with the knees marked.

    Each point is one study point (``hue`` x ``order`` value), the geometric mean over its repetitions,
    with the confidence intervals :func:`storagebench.stats.point_means` computes on both axes; points
    of a ``hue`` level are joined in ``order`` (iodepth). With ``histograms``, the ``tail`` percentile of
    the completion latency of each point (merged json+ bins of its runs) is drawn beside the mean as a
    dashed line with open markers in the same colour, on a log latency axis (the tail is often ten
    times the mean): the mean alone hides what the slowest I/Os see.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    knee : mapping or object, optional
        The chosen operating point, e.g. the :class:`storagebench.stats.Recommendation` of
        :func:`storagebench.stats.recommend_parameters`: anything with ``numjobs`` and ``iodepth``
        keys/attributes (the ``hue``/``order`` columns), or with ``iops`` and ``lat_mean_ns`` (or
        ``latency_ms``) to mark a point directly. A Recommendation is marked "recommended" on the mean
        (and, with ``histograms``, on the tail) line, and its knees
        (:attr:`storagebench.stats.Recommendation.knees`) of the mean latency and of the tail are marked
        on their lines. ``None`` marks nothing.
    latency : str
        A latency name from :data:`METRICS` (``"lat_mean_ms"``, ``"clat_mean_ms"``).
    hue, order : str
        Line per ``hue`` value, points joined by increasing ``order``.
    direction : {"read", "write", "trim"} or None
    ci : float or None
        Confidence level of the error bars.
    histograms : pandas.DataFrame, optional
        Tidy ``histograms`` table: adds the ``tail`` percentile per point
        (:func:`storagebench.stats.point_percentiles`).
    tail : float
        Percentile (%) drawn with ``histograms`` (default 99).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        One line per ``hue`` level in ``ax.lines``, plus one marker line per mark, labelled ``"knee
        (...)"`` for a plain point, ``"recommended (...)"``, ``"knee of mean latency (...)"`` and
        ``"knee of p99 completion latency (...)"`` for a Recommendation; with ``histograms`` one dashed
        line per level labelled ``"_p99 <level>"``, kept out of the legend, which explains solid and
        dashed once.

    Raises
    ------
    ValueError
        ``latency`` is not a latency metric; ``knee`` names a point that is not in ``runs``.
    """
    lat_names = [k for k in METRICS if k.endswith("_ms")]
    _one_of("latency", latency, lat_names)
    by = [c for c in (hue, order) if c]
    pts = per_point(runs, by=by, metrics=("iops", latency), direction=direction, ci=ci if ci else 0.95)
    ax = _new_ax(ax)
    levels = sorted(pts[hue].unique()) if hue else [None]
    pal = _hue_palette(levels)
    for level in levels:
        g = pts if level is None else pts[pts[hue] == level]
        g = g.sort_values(order)
        ax.plot(g["iops"], g[latency], marker="o", ms=5, lw=1.6, color=pal[level],
                label=f"{level}" if level is not None else "all runs")
        if ci is not None:
            xerr = np.vstack([g["iops"] - g["iops_ci_low"], g["iops_ci_high"] - g["iops"]])
            yerr = np.vstack([g[latency] - g[f"{latency}_ci_low"], g[f"{latency}_ci_high"] - g[latency]])
            ax.errorbar(g["iops"], g[latency], xerr=xerr, yerr=yerr, fmt="none", ecolor=pal[level], capsize=2,
                        elinewidth=0.8, alpha=0.45)
    tail_col = f"p{tail:g} clat (ms)"
    both = None
    if histograms is not None:
        pct = _point_percentiles(runs, histograms, by=by, percentiles=(tail,), direction=direction)
        both = pts.merge(pct, on=by, how="inner")
        for level in levels:
            g = (both if level is None else both[both[hue] == level]).sort_values(order)
            ax.plot(g["iops"], g[tail_col], ls="--", marker="o", ms=5, mfc="white", lw=1.2, color=pal[level],
                    label=f"_p{tail:g} {level}")
    for level in levels:  # the load at the end of each line, on the upper curve
        g = (both if both is not None else pts)
        g = (g if level is None else g[g[hue] == level]).sort_values(order)
        last = g.iloc[-1]
        ax.annotate(f"{order}={last[order]:g}", (last["iops"], last[tail_col if both is not None else latency]),
                    textcoords="offset points", xytext=(4, 4), fontsize="x-small", color=pal[level])

    def locate(k: Mapping[str, Any], table: pd.DataFrame, col: str) -> tuple[float, float]:
        sel = table
        for c in by:
            sel = sel[sel[c] == k[c]]
        if sel.empty:
            have = pts[by].drop_duplicates().to_dict("records")
            raise ValueError(f"The knee {dict((c, k[c]) for c in by)} is not a point of `runs`; points are {have}.")
        return float(sel["iops"].iloc[0]), float(sel[col].iloc[0])

    k = _knee_point(knee, by)
    recommended = knee is not None and hasattr(knee, "rule") and hasattr(knee, "knees")
    if k:
        if all(c in k for c in by):
            kx, ky = locate(k, pts, latency)
            label = _mark_label(k, by, recommended)
            if recommended and both is not None:
                tx, ty = locate(k, both, tail_col)
                ax.plot([kx, tx], [ky, ty], linestyle=":", color="crimson", lw=1.0, label="_recommended link")
                ax.plot([tx], [ty], linestyle="none", marker="*", ms=18, mfc="none", mec="crimson", mew=2,
                        label="_recommended tail", zorder=5)
        elif "iops" in k and ("lat_mean_ns" in k or "latency_ms" in k):
            kx = float(k["iops"])
            ky = float(k["latency_ms"]) if "latency_ms" in k else float(k["lat_mean_ns"]) * 1e-6
            label = f"knee ({kx:,.0f} IOPS)"
        else:
            raise ValueError(
                f"The value for `knee` must name a point by {by} or give `iops` and `lat_mean_ns`, "
                f"but {k!r} was passed."
            )
        ax.plot([kx], [ky], linestyle="none", marker="*", ms=18, mfc="none", mec="crimson", mew=2,
                label=label, zorder=5)
    if recommended and set(by) == {"numjobs", "iodepth"}:
        name = METRICS[latency].label.split(",")[0].split(" (")[0]
        for _, row in knee.knees.iterrows():
            if not all(np.isfinite(float(row[c])) for c in by):
                continue
            kk = {c: row[c] for c in by}
            if row["curve"] == "mean latency":
                x, y = locate(kk, pts, latency)
                marker, what = "D", name
            elif str(row["curve"]).startswith(f"p{tail:g} ") and both is not None:
                x, y = locate(kk, both, tail_col)
                marker, what = "^", f"p{tail:g}"
            else:
                continue
            ax.plot([x], [y], linestyle="none", marker=marker, ms=11, mfc="none", mec="black", mew=1.6, zorder=6,
                    label=f"knee of {what} ({int(row['outstanding_ios'])} outstanding I/Os)")
    ax.set_xlabel(METRICS["iops"].label)
    ax.xaxis.set_major_formatter(_THOUSANDS)
    ax.set_xlim(0, _upper(pts["iops"], pts["iops_ci_high"] if ci is not None else None, 1.3))
    top = _upper(pts[latency], pts[f"{latency}_ci_high"] if ci is not None else None)
    title = f"{hue or ''}{_ci_note(ci, pts, 'bars', 'iops')}".lstrip("; ") or None
    if both is None:
        ax.set_ylabel(METRICS[latency].label)
        ax.legend(title=title, loc="best")
        ax.set_title(f"{METRICS[latency].label.split(' (')[0]} vs IOPS (load rises with {order})")
        ax.set_ylim(0, top)
        return ax
    name = METRICS[latency].label.split(" (")[0]
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_yscale("log")
    lows = np.concatenate([pts[f"{latency}_ci_low"].to_numpy(float), both[tail_col].to_numpy(float)])
    lows = lows[np.isfinite(lows) & (lows > 0)]
    highs = np.concatenate([[top], both[tail_col].to_numpy(float)])
    ax.set_ylim(float(lows.min()) / 1.5 if lows.size else None, float(np.nanmax(highs)) * 1.5)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", lw=1.6, marker="o", ms=5),
                Line2D([], [], color="0.3", lw=1.2, ls="--", marker="o", ms=5, mfc="white")]
    labels += [name, f"p{tail:g} completion latency"]
    # below the axes, so neither the curves nor the marks are hidden behind it
    ax.legend(handles, labels, title=title, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
              fontsize="small", title_fontsize="small")
    ax.set_title(f"Mean and p{tail:g} latency vs IOPS (load rises with {order})")
    return ax


#: :func:`heatmap` uses a log colour scale by itself when the largest cell is more than this many
#: times the smallest (one cached cell would otherwise turn every other cell the same colour).
HEATMAP_LOG_RATIO = 100.0


def _heat_norm(cells: np.ndarray, metric: str, log: bool | None) -> tuple[Normalize, bool]:
    """One colour scale for ``cells``: log when asked, or by :data:`HEATMAP_LOG_RATIO` when ``log`` is None."""
    cells = cells[np.isfinite(cells)]
    positive = cells.size > 0 and bool((cells > 0).all())
    if log is None:
        log = positive and float(cells.max()) > HEATMAP_LOG_RATIO * float(cells.min())
    elif log and not positive:
        raise ValueError(f"`log=True` needs every cell > 0, but the smallest {metric} cell is {cells.min():g}.")
    lo, hi = (float(cells.min()), float(cells.max())) if cells.size else (0.0, 1.0)
    return (LogNorm(vmin=lo, vmax=hi) if log else Normalize(vmin=lo, vmax=hi)), bool(log)


def heatmap(runs: pd.DataFrame, *, x: str = "iodepth", y: str = "numjobs", metric: str = "iops",
            direction: str | None = None, annot: bool = True, cmap: str = "viridis",
            log: bool | None = None, norm: Normalize | None = None, cbar: bool = True,
            ax: Axes | None = None) -> Axes:
    """Geometric mean of a display metric over a two-factor grid (numjobs x iodepth), one cell per point.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    x, y : str
        Factor columns of the grid.
    metric : str
        A name from :data:`METRICS`; cell value is the geometric mean over repetitions (:func:`per_point`).
    direction : {"read", "write", "trim"} or None
    annot : bool
        Write each cell's value.
    cmap : str
        matplotlib colormap.
    log : bool or None
        Log colour scale (``matplotlib.colors.LogNorm``). ``None`` (default): log when every cell
        is > 0 and the largest is more than :data:`HEATMAP_LOG_RATIO` (100) times the smallest,
        e.g. an HDD grid of ~100 IOPS cells with one cached cell at ~30,000 IOPS.
    norm : matplotlib.colors.Normalize, optional
        A colour scale shared with other heatmaps of the same figure (:func:`heatmap_grid`); overrides ``log``.
    cbar : bool
        Draw this heatmap's own colour bar (False when the figure has one shared bar).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        The cells are ``ax.collections[0]`` (a QuadMesh with one value per grid point, NaN
        where a point was not run); the colour bar is labelled with the unit, and says
        "log colour scale" when it is one.

    Raises
    ------
    ValueError
        ``log=True`` with a cell <= 0; an unknown metric or direction.
    """
    m = _metric(metric)
    pts = per_point(runs, by=[y, x], metrics=(metric,), direction=direction)
    grid = pts.pivot(index=y, columns=x, values=metric).sort_index(ascending=False).sort_index(axis=1)
    if norm is None:
        norm, log = _heat_norm(grid.to_numpy(dtype=float), metric, log)
    else:
        log = isinstance(norm, LogNorm)
    ax = _new_ax(ax)
    sns.heatmap(grid, annot=annot, fmt=m.fmt, cmap=cmap, ax=ax, linewidths=0.5, norm=norm, cbar=cbar,
                cbar_kws={"label": m.label + (", log colour scale" if log else ""),
                          "format": _THOUSANDS if metric == "iops" else None} if cbar else None,
                annot_kws={"fontsize": "x-small"})
    ax.set_xlabel(_factor_label(x))
    ax.set_ylabel(_factor_label(y))
    ax.set_title(f"{m.label.split(' (')[0]} (geometric mean over repetitions) by {y} x {x}")
    return ax


def heatmap_grid(runs: pd.DataFrame, *, col: str, x: str = "iodepth", y: str = "numjobs", metric: str = "iops",
                 direction: str | None = None, annot: bool = True, cmap: str = "viridis", log: bool | None = None,
                 col_label=None, figsize: tuple[float, float] | None = None) -> Figure:
    """Heatmaps of one metric side by side, one per level of ``col``, on ONE colour scale with one bar.

    Two heatmaps with their own scales make the same colour mean two values; here a colour means one
    value in every panel (e.g. 4 KiB and 16 KiB IOPS of seed 001's HDD over %random x %read).

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table.
    col : str
        Column with one panel per level (e.g. ``"bs_bytes"``).
    x, y, metric, direction, annot, cmap
        As in :func:`heatmap`.
    log : bool or None
        Log colour scale; ``None`` decides over the cells of all panels together (:data:`HEATMAP_LOG_RATIO`).
    col_label : callable, optional
        Panel title from a level (default ``"<col>=<level>"``; ``bs_bytes`` is written in KiB).
    figsize : (float, float), optional
        Inches; default 4.2 wide per panel plus the bar, 3.8 high.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes per level (``fig.axes[:-1]``, every QuadMesh sharing one ``norm``) and the shared colour
        bar (``fig.axes[-1]``), labelled with the unit.

    Raises
    ------
    SchemaError
        ``col`` is missing.
    ValueError
        As :func:`heatmap`.
    """
    m = _metric(metric)
    _need_columns(runs, [col], "runs")
    levels = sorted(runs[col].dropna().unique())
    pts = per_point(runs, by=[col, y, x], metrics=(metric,), direction=direction)
    norm, log = _heat_norm(pts[metric].to_numpy(dtype=float), metric, log)
    label = col_label or ((lambda v: f"{v / 1024:g} KiB") if col == "bs_bytes" else (lambda v: f"{col}={v}"))
    with house_style():
        fig, axes = plt.subplots(1, len(levels), figsize=figsize or (4.2 * len(levels) + 1.2, 3.8), dpi=_DPI,
                                 layout="constrained", squeeze=False)
    for ax, level in zip(axes[0], levels, strict=True):
        heatmap(runs[runs[col] == level], x=x, y=y, metric=metric, direction=direction, annot=annot, cmap=cmap,
                norm=norm, cbar=False, ax=ax)
        ax.set_title(label(level))
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=list(axes[0]),
                       label=m.label + (", log colour scale" if log else ""),
                       format=_THOUSANDS if metric == "iops" else None)
    bar.ax.set_gid("storagebench-shared-colorbar")
    fig.suptitle(f"{m.label.split(' (')[0]} (geometric mean over repetitions) by {y} x {x}, one colour scale")
    return fig


#: Percentiles labelled on the tail axis of :func:`clat_cdf` (``kind="percentile"``).
TAIL_TICKS: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9, 99.99, 99.999)


def _tail_forward(p):
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0 - 1e-9)
    return -np.log10(1.0 - p)


def _tail_inverse(y):
    return 1.0 - 10.0 ** (-np.asarray(y, dtype=float))


def clat_cdf(histograms: pd.DataFrame, *, runs: pd.DataFrame | None = None, by: str | Sequence[str] | None = None,
             where: Mapping[str, Any] | None = None, kind: str = "percentile", direction: str | None = None,
             mark: Sequence[float] = (50.0, 99.0), ax: Axes | None = None) -> Axes:
    """Completion-latency distribution from merged fio json+ bins, log latency axis.

    The bins of all runs (and jobs, hosts) in a group are merged by adding counts
    (:func:`storagebench._histogram.merge_histograms`); percentiles are marked with fio's
    own rule (:func:`storagebench._histogram.percentiles_from_bins`, fio ``stat.c``).

    Parameters
    ----------
    histograms : pandas.DataFrame
        Tidy ``histograms`` table.
    runs : pandas.DataFrame, optional
        Tidy ``runs`` table, needed when ``by``/``where`` name factor columns (joined on ``run_id``).
    by : str or sequence of str, optional
        One curve per value (e.g. ``"iodepth"``); ``None`` merges everything into one curve.
    where : mapping, optional
        Keep only runs whose factor columns equal these values, e.g. ``{"numjobs": 2}``.
    kind : {"percentile", "cdf", "ccdf"}
        ``"percentile"`` (default): the CDF on a tail axis, ``-log10(1 - p)``, so p50, p90, p99, p99.9
        are equally spaced (:data:`TAIL_TICKS`) and the tail is not crowded into the top 1% as on a
        linear axis; ``"cdf"``: linear fraction of I/Os at or below a latency; ``"ccdf"``: the
        exceedance fraction (1 - CDF) on a log axis.
    direction : {"read", "write", "trim"} or None
    mark : sequence of float
        Percentiles (%) to mark on each curve.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        One labelled line per group; percentile marks are in ``ax.collections``. Data coordinates
        are fractions (p99 is y = 0.99) for ``cdf`` and ``percentile``, 1 - fraction for ``ccdf``.
    """
    _one_of("kind", kind, ["percentile", "cdf", "ccdf"])
    bys = [] if by is None else ([by] if isinstance(by, str) else list(by))
    where = dict(where or {})
    h = _join_factors(runs, histograms, bys + list(where), direction)
    for col, val in where.items():
        h = h[h[col] == val]
        if h.empty:
            raise SchemaError(f"no histogram rows with {col} == {val!r}.")
    ax = _new_ax(ax)
    groups = list(h.groupby(bys, sort=True)) if bys else [((), h)]
    pal = sns.color_palette("colorblind", n_colors=max(len(groups), 1))
    smallest_tail = 1.0
    for (key, grp), color in zip(groups, pal, strict=False):
        key = key if isinstance(key, tuple) else (key,)
        merged = _merged_bins(grp).sort_values("bin_ns")
        x_ms = merged["bin_ns"].to_numpy(dtype=float) * 1e-6
        counts = merged["count"].to_numpy(dtype=float)
        cdf = np.cumsum(counts) / counts.sum()
        smallest_tail = min(smallest_tail, 1.0 / counts.sum())
        if kind == "ccdf":
            yv = np.clip(1.0 - cdf, 1.0 / counts.sum() / 10, None)
        elif kind == "percentile":  # the last bin (CDF = 1) would be at infinity on the tail axis
            yv = np.minimum(cdf, 1.0 - 1.0 / counts.sum() / 2)
        else:
            yv = cdf
        label = ", ".join((f"{v:g}" if isinstance(v, (int, float, np.number)) else str(v))
                          if len(bys) == 1 else f"{c}={v}" for c, v in zip(bys, key, strict=False)) or "all runs"
        ax.step(x_ms, yv, where="post", color=color, lw=1.5, label=label)
        pcts = _percentiles(merged, mark)
        px = np.array([pcts[float(p)] for p in mark]) * 1e-6
        py = np.array([1 - p / 100.0 for p in mark]) if kind == "ccdf" else np.array([p / 100.0 for p in mark])
        ax.scatter(px, py, color=color, edgecolor="black", s=28, zorder=4)
    for p in mark:
        yline = 1 - p / 100.0 if kind == "ccdf" else p / 100.0
        ax.axhline(yline, color="0.5", lw=0.7, ls=":", zorder=1)
        ax.annotate(f"p{p:g}", (1.0, yline), xycoords=("axes fraction", "data"), xytext=(2, 0),
                    textcoords="offset points", va="center", fontsize="x-small", color="0.3")
    ax.set_xscale("log")
    ax.set_xlabel("completion latency, clat (ms, log scale)")
    if kind == "cdf":
        ax.set_ylabel("fraction of I/Os completed within (CDF)")
        ax.set_ylim(0, 1.02)
        what = "CDF"
    elif kind == "percentile":
        ax.set_yscale("function", functions=(_tail_forward, _tail_inverse))
        top_pct = max(99.9, max(mark, default=99.0))
        # as far into the tail as the data reach (1 / N), at least p99.9
        top = max(1.0 - (100.0 - top_pct) / 100.0, min(1.0 - smallest_tail, 1.0 - 1e-5))
        ticks = [t / 100.0 for t in (0.0, *TAIL_TICKS) if t / 100.0 <= top + 1e-12]
        ax.set_ylim(0.0, top)
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"p{v * 100:.6g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_locator(FixedLocator([]))
        ax.set_ylabel("percentile (CDF, tail scale)")
        what = "percentiles"
    else:
        ax.set_yscale("log")
        ax.set_ylabel("fraction of I/Os slower than (1 - CDF)")
        what = "tail (1 - CDF)"
    marks = "/".join(f"p{p:g}" for p in mark)
    ax.legend(title=(", ".join(bys) if bys else None), loc="upper left" if kind != "ccdf" else "best")
    extra = ", ".join(f"{c}={v}" for c, v in where.items())
    ax.set_title(f"Completion latency {what} from json+ bins, {marks} marked" + (f" ({extra})" if extra else ""))
    return ax


def _geometric_rows(df: pd.DataFrame) -> np.ndarray | None:
    """Per row of a comparison frame: is the ratio a geometric mean ratio? ``None`` when it cannot be told.

    :func:`storagebench.stats.compare` says so in its ``estimand`` column (the ratio of geometric means by
    default, of arithmetic means only when asked for by name); older frames without it are read from
    ``method`` (and ``paired``).
    """
    if "estimand" in df.columns:
        est = df["estimand"].fillna("").astype(str)
        return (est == "geometric").to_numpy() if bool((est != "").all()) else None
    if "method" in df.columns:
        text = df["method"].fillna("").astype(str).str.lower()
        known = text != ""
        geo = text.str.contains("geometric mean").to_numpy()
        if "paired" in df.columns:
            geo = geo | df["paired"].fillna(False).astype(bool).to_numpy()
        return geo if bool(known.all()) else None
    if "paired" in df.columns:
        return df["paired"].fillna(False).astype(bool).to_numpy()
    return None


def ratio_forest(comparison: Any, *, group: str | Sequence[str] | None = None, ratio: str = "ratio",
                 low: str = "ci_low", high: str = "ci_high", label: str | None = None,
                 logx: bool = True, ax: Axes | None = None) -> Axes:
    """Forest plot: one ratio with its confidence interval per group, vertical line at 1.

    Parameters
    ----------
    comparison : storagebench.stats.ComparisonTable or pandas.DataFrame
        A result of :func:`storagebench.stats.compare` (its ``to_frame()`` is used), or one
        row per group with the ratio and its CI bounds.
    group : str or sequence of str, optional
        Column(s) that label the rows; default: the comparison's ``by`` columns and
        ``level`` (whichever are present).
    ratio, low, high : str
        Columns of the ratio estimate and its CI bounds (ratios, not %).
    label : str, optional
        x-axis label; default says which ratio it is, from the comparison's ``estimand`` (or, for frames
        without it, ``method``/``paired``): "geometric mean ratio" (the default estimand of
        :func:`storagebench.stats.compare`), "ratio of mean" (``estimand="arithmetic"``, Fieller; in a mix
        the geometric rows are drawn as open diamonds), and what is divided by what when the comparison
        knows it.
    logx : bool
        Log ratio axis (0.5x and 2x are equally far from 1); ticks at round ratios when the axis spans
        less than a decade (0.96, 0.98, 1, 1.02 ...), at 1-2-5 steps otherwise.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        One point with a horizontal CI bar per row (``ax.lines[0]`` holds the points) and
        a dashed reference line at 1.

    Raises
    ------
    SchemaError
        A named column is missing.
    ValueError
        A ratio estimate is not finite, or <= 0 on a log axis. (CI bounds that are not finite
        -- an unbounded Fieller interval -- or <= 0 on a log axis are drawn open-ended, with
        an arrow at the axis edge and the note "CI not bounded".)
    """
    by: list[str] = []
    what, ci_text = "", ""
    if hasattr(comparison, "to_frame") and hasattr(comparison, "baseline"):
        by = list(getattr(comparison, "by", ()))
        what = f" {comparison.metric}: level / {comparison.factor}={comparison.baseline}"
        ci_text = f"{comparison.confidence:.0%} CI; "
        comparison = comparison.to_frame()
    if not isinstance(comparison, pd.DataFrame):
        raise TypeError(f"`comparison` must be a ComparisonTable or a DataFrame, but {type(comparison).__name__} was passed.")
    if group is None:
        group = [c for c in [*by, "level", "group"] if c in comparison.columns] or [comparison.columns[0]]
    groups = [group] if isinstance(group, str) else list(group)
    _need_columns(comparison, [*groups, ratio, low, high], "comparison")
    df = comparison.reset_index(drop=True)
    geometric = _geometric_rows(df)
    if geometric is None:
        kind = f"ratio{what}"
    elif geometric.all():
        kind = f"geometric mean ratio{' of' + what if what else ''}"
    elif not geometric.any():
        kind = f"ratio of mean{what}" if what else "ratio of means"
    else:
        kind = f"ratio of mean{what}" if what else "ratio of means"
        kind += "; open diamonds: geometric mean ratio (see method)"
    default_label = f"{kind} ({ci_text}1 = no difference)"
    r = df[ratio].astype(float).to_numpy()
    lo = df[low].astype(float).to_numpy()
    hi = df[high].astype(float).to_numpy()
    bad = ~np.isfinite(r) | ((r <= 0) if logx else False)
    if bad.any():
        raise ValueError(f"`{ratio}` must be finite{' and > 0 on a log axis' if logx else ''}; rows "
                         f"{np.flatnonzero(bad).tolist()} are not ({r[bad].tolist()}).")
    # an unbounded CI (Fieller with a baseline mean near 0) or a bound <= 0 on a log axis is drawn open-ended
    ok_lo = np.isfinite(lo) & ((lo > 0) if logx else True)
    ok_hi = np.isfinite(hi)
    vals = np.concatenate([r, lo[ok_lo], hi[ok_hi], [1.0]])
    if logx:  # pad by a share of the span on the log scale, so a narrow span is not squeezed into the middle
        span = float(np.log(vals.max()) - np.log(vals.min()))
        pad = max(0.12 * span, 0.01)
        left, right = float(vals.min() * np.exp(-pad)), float(vals.max() * np.exp(pad))
    else:
        pad = 0.15 * (vals.max() - vals.min() or 1.0)
        left, right = vals.min() - pad, vals.max() + pad
    lo_d, hi_d = np.where(ok_lo, lo, left), np.where(ok_hi, hi, right)
    names = _forest_labels(df, groups)
    ax = _new_ax(ax, figsize=(8.0, 1.6 + 0.42 * len(df)))
    yy = np.arange(len(df))[::-1].astype(float)
    ax.errorbar(r, yy, xerr=np.vstack([r - lo_d, hi_d - r]), fmt="o", color="black", ecolor="0.35", capsize=3)
    if geometric is not None and geometric.any() and not geometric.all():
        ax.scatter(r[geometric], yy[geometric], marker="D", s=40, facecolor="white", edgecolor="black", zorder=4)
    if (~ok_lo).any():
        ax.scatter(lo_d[~ok_lo], yy[~ok_lo], marker="<", color="0.35", s=30, zorder=3)
    if (~ok_hi).any():
        ax.scatter(hi_d[~ok_hi], yy[~ok_hi], marker=">", color="0.35", s=30, zorder=3)
    for y, a, b in zip(yy, ok_lo, ok_hi, strict=True):
        if not (a and b):
            ax.annotate("CI not bounded", (right, y), xytext=(-2, 5), textcoords="offset points", ha="right",
                        fontsize="x-small", color="0.35")
    ax.axvline(1.0, color="crimson", lw=1, ls="--")
    ax.set_xlim(left, right)
    ax.set_yticks(yy)
    ax.set_yticklabels(names, fontsize="small")
    ax.set_ylim(-0.7, len(df) - 0.3)
    if logx:
        ax.set_xscale("log")
        # within a decade, log ticks would leave only "1": ticks at round ratios (0.96, 0.98, 1, ...) instead
        narrow = right / left < 10
        # over many decades (a CI of two set-ups) matplotlib's LogLocator with subs (1, 2, 5) places no tick at
        # all: powers of ten only beyond 3 decades
        subs = (1.0, 2.0, 5.0) if right / left < 1e3 else (1.0,)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10]) if narrow
                                   else LogLocator(base=10, subs=subs, numticks=9))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.6g}"))
        ax.xaxis.set_minor_locator(LogLocator(base=10, subs="auto") if not narrow else MaxNLocator(nbins=28))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(label or default_label)
    ax.set_ylabel(", ".join(groups))
    ax.set_title("Ratio with confidence interval per group")
    return ax


def _forest_labels(df: pd.DataFrame, groups: Sequence[str], width: int = 38) -> list[str]:
    """Readable row labels: values in their display unit (bs in KiB), wrapped at ``width`` characters."""
    def text(col: str, v: Any) -> str:
        if col == "bs_bytes" and isinstance(v, (int, float, np.number)):
            return f"{v / 1024:g} KiB"
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            return f"{v:g}"
        return str(v)

    rows = []
    for _, r in df[list(groups)].iterrows():
        rows.append("\n".join(textwrap.wrap(", ".join(text(c, r[c]) for c in groups), width)) or "")
    return rows


def bland_altman_plot(a, b, *, log: bool = True, confidence: float = 0.95, names: tuple[str, str] = ("a", "b"),
                      unit: str = "", ax: Axes | None = None, groups=None, title: str | None = None) -> Axes:
    """Bland-Altman plot of two methods measured on the same items: difference against magnitude.

    The bias, the limits of agreement and their CIs are :func:`storagebench.stats.bland_altman`'s; this
    function only draws them. With ``log=True`` (IOPS, bandwidth, latency: the difference grows with the
    value) each item is drawn at its geometric mean (x, log axis) and its ratio ``a / b`` (y, log axis).

    Parameters
    ----------
    a, b : array-like of float
        Paired measurements of the same items by the two methods, same unit (> 0 with ``log``).
    log : bool
        Ratios on log axes (default) or differences ``a - b``.
    confidence : float
        Level of the CIs drawn as bands around the bias and each limit.
    names : (str, str)
        What ``a`` and ``b`` are ("FIO", "DiskSPD").
    unit : str
        Unit of the values, for the x label ("IOPS", "ms").
    ax : matplotlib.axes.Axes, optional
    groups : array-like of str, optional
        A label per item (e.g. the I/O pattern): the items are coloured by it, with a legend. The bias and
        the limits stay those of all items.
    title : str, optional
        Axes title; default ``"Agreement of A and B (Bland-Altman, n = ...; bands: 95% CIs)"``.

    Returns
    -------
    matplotlib.axes.Axes
        The items in ``ax.collections[0]`` (one collection per group with ``groups``); the bias and the
        two limits as horizontal lines
        (``gid`` ``"bias"``, ``"loa_low"``, ``"loa_high"``) with their CI bands.

    Raises
    ------
    StatsError
        From :func:`storagebench.stats.bland_altman` (fewer than 3 pairs, values <= 0 with ``log`` ...).
    """
    ag = bland_altman(a, b, log=log, confidence=confidence)
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    mag, diff = (np.sqrt(x * y), x / y) if log else ((x + y) / 2.0, x - y)
    ax = _new_ax(ax)
    if groups is None:
        ax.scatter(mag, diff, s=22, color=sns.color_palette("colorblind")[0], edgecolor="white", lw=0.5, zorder=3)
    else:
        labels = np.asarray(groups, dtype=object).ravel()
        if len(labels) != len(mag):
            raise SchemaError(f"groups must give one label per pair ({len(mag)}), got {len(labels)}")
        levels = list(dict.fromkeys(map(str, labels)))
        palette = sns.color_palette("colorblind", max(len(levels), 1))
        markers = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
        for k, level in enumerate(levels):
            sel = np.array([str(x) == level for x in labels])
            ax.scatter(mag[sel], diff[sel], s=24, color=palette[k % len(palette)], marker=markers[k % len(markers)],
                       edgecolor="white", lw=0.5, zorder=3, label=level)
    ref = 1.0 if log else 0.0
    ax.axhline(ref, color="0.6", lw=0.8, zorder=1)
    lines = (("bias", ag.bias, ag.bias_ci_low, ag.bias_ci_high, "-"),
             ("loa_low", ag.loa_low, ag.loa_low_ci_low, ag.loa_low_ci_high, "--"),
             ("loa_high", ag.loa_high, ag.loa_high_ci_low, ag.loa_high_ci_high, "--"))
    words = {"bias": "bias" if not log else "geometric mean ratio",
             "loa_low": f"lower limit ({ag.coverage:.0%} of pairs)", "loa_high": "upper limit"}
    # bias label at the left, the limits at the right, the lower one under its line: they never overlap
    where = {"bias": ((0.0, 4, 3), "left", "bottom"), "loa_high": ((1.0, -4, 3), "right", "bottom"),
             "loa_low": ((1.0, -4, -3), "right", "top")}
    for gid, value, lo, hi, ls in lines:
        ax.axhline(value, color="crimson", lw=1.2, ls=ls, zorder=2, gid=gid)
        if np.isfinite(lo) and np.isfinite(hi):
            ax.axhspan(lo, hi, color="crimson", alpha=0.10, lw=0, zorder=0)
        (xa, dx, dy), ha, va = where[gid]
        ax.annotate(f"{words[gid]} {fmt_number(value, 3)}", (xa, value), xycoords=("axes fraction", "data"),
                    xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize="x-small", color="crimson",
                    zorder=5, bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8, "lw": 0})
    _ba_axis_labels(ax, names, unit, log)
    ax.set_title(title if title is not None else f"Agreement of {names[0]} and {names[1]} (Bland-Altman, n = {ag.n}; "
                 f"bands: {ag.confidence:.0%} CIs)")
    if groups is not None:
        ax.legend(fontsize="x-small", title=None, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


def _compact(v: float) -> str:
    """A tick label of a log axis: 200, 5k, 20k, 1M, 0.5 (no 2x10^4)."""
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _ba_axis_labels(ax, names, unit: str, log: bool) -> None:
    """Axis labels (and log axes) of a Bland-Altman plot: ratio vs geometric mean, or difference vs mean."""
    u = f" ({unit})" if unit else ""
    if log:
        _ba_log_axes(ax)
        ax.set_xlabel(f"geometric mean of {names[0]} and {names[1]}{u}, log scale")
        ax.set_ylabel(f"ratio {names[0]} / {names[1]} (log scale)")
    else:
        ax.set_xlabel(f"mean of {names[0]} and {names[1]}{u}")
        ax.set_ylabel(f"difference {names[0]} - {names[1]}{u}")


def _ba_log_axes(ax: Axes) -> None:
    """Log axes of a Bland-Altman view, labelled 2k / 50k / 0.5 and 0.9 / 1 / 1.2 (no 2x10^4)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _compact(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.2g}"))


def _too_few(ax: Axes, a, b, *, log: bool, names: tuple[str, str], unit: str) -> None:
    """The pairs of a Bland-Altman view too small for limits (n < 3): the points and the reference line only."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    mag, diff = (np.sqrt(x * y), x / y) if log else ((x + y) / 2.0, x - y)
    ax.scatter(mag, diff, s=26, color=sns.color_palette("colorblind")[0], edgecolor="white", lw=0.5, zorder=3)
    ax.axhline(1.0 if log else 0.0, color="0.6", lw=0.8, zorder=1)
    _ba_axis_labels(ax, names, unit, log)


def _display_unit(metric: str) -> tuple[str, float]:
    label, scale = column_display(metric)
    if metric == "iops":
        return "IOPS", scale
    return (label[label.rfind("(") + 1: -1] if label.endswith(")") else ""), scale


def cross_tool_plot(ct, *, per_group: bool = False, ncols: int = 3) -> Figure:
    """Bland-Altman plot(s) of a cross-tool comparison: the other tool / the baseline per configuration.

    Parameters
    ----------
    ct : storagebench.stats.CrossTool
        From :func:`storagebench.stats.cross_tool`; its ``pairs`` are drawn, and its ``agreement``
        settings (log ratios or differences, confidence) are used.
    per_group : bool
        One panel per ``by`` group (shared y axis, so the spread of the groups compares at a glance), each
        with its own bias and limits; default one panel of all configurations, coloured by group.
    ncols : int
        Panels per row with ``per_group``.

    Returns
    -------
    matplotlib.figure.Figure
        Values in the metric's display unit (ms for ``*_ns``, IOPS as is). A group with fewer than 3
        configurations gets a panel that says its limits are not estimable.

    Raises
    ------
    SchemaError
        ``ncols`` < 1; ``ct`` without ``pairs``.
    StatsError
        From :func:`storagebench.stats.bland_altman` (fewer than 3 configurations over all ...).
    """
    if not isinstance(ncols, int) or ncols < 1:
        raise SchemaError(f"ncols must be a positive int, got {ncols!r}")
    pairs = getattr(ct, "pairs", None)
    if pairs is None:
        raise SchemaError(f"cross_tool_plot takes the result of storagebench.stats.cross_tool, got {type(ct).__name__}")
    a_col, b_col = f"{ct.metric}_{ct.other}", f"{ct.metric}_{ct.baseline}"
    unit, scale = _display_unit(ct.metric)
    ag = ct.agreement
    conf = float(ag["confidence"].dropna().iloc[0]) if "confidence" in ag and ag["confidence"].notna().any() else 0.95
    log = bool(ag["log"].dropna().iloc[0]) if "log" in ag and ag["log"].notna().any() else True
    names = (str(ct.other), str(ct.baseline))
    keys = list(getattr(ct, "by", ()))
    if not per_group or not keys:
        groups = pairs[keys].astype(str).agg(", ".join, axis=1) if keys and pairs[keys].drop_duplicates().shape[0] > 1 \
            else None
        if len(pairs) < 3:
            ax = _new_ax(None)
            _too_few(ax, pairs[a_col] * scale, pairs[b_col] * scale, log=log, names=names, unit=unit)
            ax.set_title(f"{names[0]} and {names[1]} on {len(pairs)} configuration(s): limits of agreement not "
                         "estimable (fewer than 3)")
            return ax.figure
        ax = bland_altman_plot(pairs[a_col] * scale, pairs[b_col] * scale, log=log, confidence=conf, names=names,
                               unit=unit, groups=groups)
        if groups is not None:
            leg = ax.get_legend()
            if leg is not None:
                leg.set_title(", ".join(keys), prop={"size": "x-small"})
        return ax.figure
    grouped = list(pairs.groupby(keys, sort=True))
    n = len(grouped)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    with house_style():
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.5 * nrows), dpi=_DPI, sharey=True,
                                 layout="constrained", squeeze=False)
    for ax, (key, part) in zip(axes.flat, grouped, strict=False):
        name = ", ".join(map(str, key if isinstance(key, tuple) else (key,)))
        if len(part) < 3:
            _too_few(ax, part[a_col] * scale, part[b_col] * scale, log=log, names=names, unit=unit)
            ax.set_title(f"{name} (n = {len(part)}: limits not estimable)", fontsize="small")
            continue
        bland_altman_plot(part[a_col] * scale, part[b_col] * scale, log=log, confidence=conf, names=names, unit=unit,
                          ax=ax, title=f"{name} (n = {len(part)})")
        ax.title.set_fontsize("small")
    for ax in axes.flat[n:]:
        ax.remove()
    xlabel = next((ax.get_xlabel() for ax in axes.flat[:n] if ax.get_xlabel()), "")
    ylabel = next((ax.get_ylabel() for ax in axes.flat[:n] if ax.get_ylabel()), "")
    for ax in axes.flat[:n]:
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.supxlabel(xlabel, fontsize="medium")
    fig.supylabel(ylabel, fontsize="medium")
    fig.suptitle(f"Agreement of {names[0]} and {names[1]} per {', '.join(keys)} (Bland-Altman; bands: {conf:.0%} CIs)")
    return fig


def parameter_claim_plot(sweep: pd.DataFrame, verdicts: pd.DataFrame, *, by: str, latency: str = "lat_mean_ms",
                         ci: float | None = 0.95) -> Figure:
    """The numjobs x iodepth sweep per group (tool), with the recommended and the claimed cell marked.

    One panel per level of ``by``: :func:`latency_vs_iops` (a line per ``numjobs``, points joined by
    ``iodepth``) with the recommended cell as its knee (star) and the claimed cell as an open square.

    Parameters
    ----------
    sweep : pandas.DataFrame
        Tidy ``runs`` table of the sweep, with the ``by`` column.
    verdicts : pandas.DataFrame
        :func:`storagebench.stats.parameter_claim_verdicts` of the same sweep grouped by ``by`` (columns
        ``recommended_numjobs``, ``recommended_iodepth``, ``claimed_numjobs``, ``claimed_iodepth``).
    by : str
        The group column (``"source_tool"``).
    latency : str
        A latency name from :data:`METRICS`.
    ci : float or None
        Confidence level of the error bars (none with one value per cell).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    SchemaError
        A missing column, or a group of ``sweep`` without a row in ``verdicts``.
    """
    _need_columns(sweep, [by, "numjobs", "iodepth", "iops"], "sweep")
    _need_columns(verdicts, [by, "recommended_numjobs", "recommended_iodepth", "claimed_numjobs", "claimed_iodepth"],
                  "verdicts")
    groups = list(sweep.groupby(by, sort=True))
    with house_style():
        fig, axes = plt.subplots(1, len(groups), figsize=(6.5 * len(groups), 4.8), dpi=_DPI, layout="constrained",
                                 squeeze=False)
    for ax, (level, part) in zip(axes.flat, groups, strict=True):
        row = verdicts[verdicts[by].astype(str) == str(level)]
        if row.empty:
            raise SchemaError(f"verdicts has no row for {by}={level!r}")
        v = row.iloc[0]
        latency_vs_iops(part, knee={"numjobs": int(v["recommended_numjobs"]), "iodepth": int(v["recommended_iodepth"])},
                        latency=latency, ci=ci, ax=ax)
        cell = part[(part["numjobs"] == v["claimed_numjobs"]) & (part["iodepth"] == v["claimed_iodepth"])]
        if len(cell):
            y = cell[latency].astype(float) if latency in cell else cell[latency.replace("_ms", "_ns")] / 1e6
            ax.plot([cell["iops"].mean()], [y.mean()], linestyle="none", marker="s", ms=13, mfc="none", mec="black",
                    mew=1.6, zorder=6, label=f"claimed (numjobs={int(v['claimed_numjobs'])}, "
                                             f"iodepth={int(v['claimed_iodepth'])})")
        for line in ax.lines:  # the knee is the recommended cell here
            if line.get_label().startswith("knee ("):
                line.set_label("recommended" + line.get_label()[4:])
        ax.legend(loc="upper left", fontsize="small", title="numjobs (threads)")
        ax.set_title(f"{level}: mean latency vs IOPS (load rises with iodepth)", fontsize="medium")
    return fig


# --------------------------------------------------------------------------- provenance


def _uniq(values) -> list[str]:
    out = []
    for v in values:
        if v is None or (not isinstance(v, (Mapping, list, tuple)) and pd.isna(v)):
            continue
        s = str(v)
        if s and s not in out:
            out.append(s)
    return out


def provenance_caption(runs: pd.DataFrame, provenance: Any = None) -> str:
    """One-paragraph provenance text for a figure: workload, device, fio version, host, date.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table: ``study``, ``fio_version``, ``hostname``, ``kernel``,
        ``started_at``, ``target``, ``rw``, ``bs_bytes``, ``ioengine``, ``direct`` are used
        when present.
    provenance : Provenance, mapping, sequence of them or DataFrame, optional
        ``provenance.json`` records of the runs (:func:`storagebench.publish.study_provenance`, or
        their JSON form: :func:`storagebench.records.provenance_records`); the device
        (:attr:`storagebench.records.DeviceInfo.label`) and filesystem are taken from them.

    Returns
    -------
    str
        e.g. ``"study demo, 36 runs, randread bs=4 KiB libaio direct=1 on /tmp/x · device:
        /dev/vda (ext4) · fio-3.33 · kernel 6.1.0 · host h · 2026-11-22 05:41–05:45 UTC"``.
    """
    _need_columns(runs, ["run_id"], "runs")
    recs = provenance_records(provenance)
    parts = []
    head = []
    if "study" in runs:
        head.append("study " + "/".join(_uniq(runs["study"])))
    head.append(f"{runs['run_id'].nunique()} runs")
    wl = []
    if "rw" in runs:
        wl.append("/".join(_uniq(runs["rw"])))
    if "bs_bytes" in runs:
        wl.append("bs=" + "/".join(f"{int(b) / 1024:g} KiB" for b in sorted(set(runs["bs_bytes"].dropna()))))
    if "ioengine" in runs:
        wl.append("/".join(_uniq(runs["ioengine"])))
    if "direct" in runs:
        wl.append("direct=" + "/".join(_uniq(runs["direct"].astype("boolean").astype("Int64"))))
    if "target" in runs:
        wl.append("on " + ", ".join(_uniq(runs["target"])[:3]))
    parts.append(", ".join(head) + (": " + " ".join(wl) if wl else ""))
    devs = _uniq(r.device.label for r in recs if r.device is not None)
    fss = _uniq(r.filesystem.fstype for r in recs if r.filesystem is not None)
    if devs:
        parts.append("device " + ", ".join(devs[:3]) + (f", filesystem {'/'.join(fss)}" if fss else ""))
    fio = _uniq(runs["fio_version"]) if "fio_version" in runs else _uniq(r.fio_version for r in recs)
    if fio:
        parts.append(", ".join(fio))
    kern = _uniq(runs["kernel"]) if "kernel" in runs else _uniq(r.kernel for r in recs)
    if kern:
        parts.append("kernel " + ", ".join(kern))
    hosts = _uniq(runs["hostname"]) if "hostname" in runs else _uniq(r.hostname for r in recs)
    if hosts:
        parts.append("host " + ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else ""))
    times = pd.to_datetime(runs["started_at"], utc=True) if "started_at" in runs else \
        pd.to_datetime(pd.Series([r.started_at for r in recs], dtype=object), utc=True)
    times = times.dropna()
    if len(times):
        t0, t1 = times.min(), times.max()
        end = t1.strftime("%H:%M") if t0.date() == t1.date() else t1.strftime("%Y-%m-%d %H:%M")
        parts.append(f"{t0:%Y-%m-%d %H:%M}–{end} UTC")
    return " · ".join(parts)


def add_caption(fig: Figure, text: str, *, fontsize: str | float = "x-small") -> Text:
    """Write ``text`` under the figure (left aligned, wrapped), e.g. :func:`provenance_caption`.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Also accepts an Axes (its figure is used).
    text : str
    fontsize : str or float

    Returns
    -------
    matplotlib.text.Text
        The caption artist (in ``fig.texts``); figures saved with ``bbox_inches="tight"`` (as
        Jupyter's inline backend does) include it.
    """
    if isinstance(fig, Axes):
        fig = fig.figure
    if not isinstance(fig, Figure):
        raise TypeError(f"`fig` must be a matplotlib Figure or Axes, but {type(fig).__name__} was passed.")
    if not isinstance(text, str) or not text:
        raise ValueError("`text` must be a non-empty string.")
    return fig.text(0.01, -0.01, text, ha="left", va="top", fontsize=fontsize, color="0.25", wrap=True,
                    gid="storagebench-caption")

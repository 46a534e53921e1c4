"""Figures of a sweep: a metric against a factor, the latency-IOPS hockey stick, heatmaps of a two-factor grid,
and the completion-latency distribution from merged json+ bins.

They draw what :func:`storagebench.stats.per_point` (geometric means and log-scale CIs per point) and
:func:`storagebench.stats.point_percentiles` compute; the latency distribution is fio's merged bins
(:func:`storagebench._histogram.merge_histograms`) with fio's percentile rule
(:func:`storagebench._histogram.percentiles_from_bins`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from .._checks import need_columns, one_of
from .._histogram import merge_histograms, percentiles_from_bins
from ..errors import SchemaError
from ..findings import CONFIDENCE, renamed_ci
from ..schema import DIRECTIONS
from ..stats import per_point, point_percentiles
from ..stats.points import attach_factors
from ..tables import METRICS, display_metric
from ._style import DPI, factor_label, house_style, new_ax

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


def _ci_note(confidence: float | None, pts: pd.DataFrame, what: str, metric: str) -> str:
    """``"; bands: 95% CI, log scale, each point's own runs"``: the method stats used, in a few words."""
    if confidence is None:
        return ""
    check = pts.attrs.get("checks", {}).get(metric)
    if check is None or not (pts[f"{metric}_ci_high"] > pts[f"{metric}_ci_low"]).any():
        return "; no CI (one run per point)"
    return f"; {what}: {confidence * 100:g}% CI, {check.short()}"


_THOUSANDS = FuncFormatter(lambda v, _: f"{v:,.0f}")


def _hue_palette(levels: Sequence[Any]):
    return dict(zip(levels, sns.color_palette("colorblind", n_colors=max(len(levels), 1)), strict=False))


# --------------------------------------------------------------------------- figures


@renamed_ci
def iops_vs_iodepth(runs: pd.DataFrame, *, hue: str | None = "numjobs", metric: str = "iops",
                    direction: str | None = None, confidence: float | None = CONFIDENCE,
                    ax: Axes | None = None) -> Axes:
    """IOPS vs iodepth, one line per ``hue`` level (numjobs), on a log2 iodepth axis.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table with ``iodepth`` and the ``hue`` column.
    hue : str or None
        Column with one line per value (default ``numjobs``); ``None`` draws one line.
    metric : str
        A name from :data:`storagebench.tables.METRICS`; ``"iops"`` by default, ``"bw_MB_per_s"`` for bandwidth.
    direction : {"read", "write", "trim"} or None
        As in :func:`storagebench.stats.per_point`.
    confidence : float or None
        Confidence level of the band around each line (:func:`storagebench.stats.point_means`: log
        scale, each point's own runs); ``None`` draws no band. (``ci=``, its old name, still works with a
        FutureWarning.)
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        One line (``ax.lines``) per ``hue`` level; bands in ``ax.collections``.
    """
    return metric_vs(runs, x="iodepth", metric=metric, hue=hue, direction=direction, confidence=confidence, logx=True,
                     ax=ax, title=f"{METRICS[metric].label.split(' (')[0] if metric in METRICS else metric} vs iodepth")


@renamed_ci
def metric_vs(runs: pd.DataFrame, *, x: str, metric: str = "iops", hue: str | None = None,
              direction: str | None = None, confidence: float | None = CONFIDENCE, logx: bool = False,
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
        A name from :data:`storagebench.tables.METRICS`.
    hue : str or None
        Factor column, one line per value.
    direction : {"read", "write", "trim"} or None
        As in :func:`storagebench.stats.per_point`.
    confidence : float or None
        Confidence level of the band (:func:`storagebench.stats.point_means`); ``None`` for none. (``ci=``,
        its old name, still works with a FutureWarning.)
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
        Unknown ``metric``/``direction``/``confidence``.
    SchemaError
        ``x`` or ``hue`` is not a column of ``runs``.
    """
    m = display_metric(metric)
    if confidence is not None and not 0 < confidence < 1:
        raise ValueError(f"The value for `confidence` must be a confidence level in (0, 1) or None, but {confidence!r} "
                         "was passed.")
    by = [x] + ([hue] if hue else [])
    # without a band (confidence=None) the points' intervals are computed but not drawn
    pts = per_point(runs, by=by, metrics=(metric,), direction=direction, confidence=confidence or CONFIDENCE)
    pts = pts[np.isfinite(pts[metric].astype(float))]
    if pts.empty:
        raise SchemaError(f"`runs` has no finite values of {m.column!r} to plot.")
    ax = new_ax(ax)
    levels = sorted(pts[hue].unique()) if hue else [None]
    pal = _hue_palette(levels)
    for level in levels:
        g = (pts if level is None else pts[pts[hue] == level]).sort_values(x)
        xv = g[x].astype(float).to_numpy()
        ax.plot(xv, g[metric], marker="o", ms=5, lw=1.8, color=pal[level],
                label=str(level) if level is not None else m.label.split(" (")[0])
        if confidence is not None and (g[f"{metric}_ci_high"] > g[f"{metric}_ci_low"]).any():
            ax.fill_between(xv, g[f"{metric}_ci_low"], g[f"{metric}_ci_high"], color=pal[level], alpha=0.18, lw=0)
    xscale = 1.0 / 1024 if x == "bs_bytes" else 1.0
    if logx:
        _log2_axis(ax, pts[x].astype(float).unique(), "x", xscale)
    elif xscale != 1.0:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * xscale:g}"))
    elif (pts[x].astype(float) % 1 == 0).all():  # a count (clients, numjobs): no tick at 1.25 clients
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(factor_label(x))
    ax.set_ylabel(m.label)
    if metric == "iops":
        ax.yaxis.set_major_formatter(_THOUSANDS)
    ax.set_ylim(0, _upper(pts[metric], pts.get(f"{metric}_ci_high") if confidence is not None else None))
    if hue:
        ax.legend(title=f"{hue}{_ci_note(confidence, pts, 'band', metric)}", loc="best")
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


@renamed_ci
def latency_vs_iops(runs: pd.DataFrame, *, knee: Any = None, latency: str = "lat_mean_ms",
                    hue: str | None = "numjobs", order: str = "iodepth", direction: str | None = None,
                    confidence: float | None = CONFIDENCE, histograms: pd.DataFrame | None = None, tail: float = 99.0,
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
        The chosen operating point, e.g. the :class:`storagebench.stats.saturation.Recommendation` of
        :func:`storagebench.stats.recommend_parameters`: anything with ``numjobs`` and ``iodepth``
        keys/attributes (the ``hue``/``order`` columns), or with ``iops`` and ``lat_mean_ns`` (or
        ``latency_ms``) to mark a point directly. A Recommendation is marked "recommended" on the mean
        (and, with ``histograms``, on the tail) line, and its knees
        (:attr:`storagebench.stats.saturation.Recommendation.knees`) of the mean latency and of the tail are marked
        on their lines. ``None`` marks nothing.
    latency : str
        A latency name from :data:`storagebench.tables.METRICS` (``"lat_mean_ms"``, ``"clat_mean_ms"``).
    hue, order : str
        Line per ``hue`` value, points joined by increasing ``order``.
    direction : {"read", "write", "trim"} or None
    confidence : float or None
        Confidence level of the error bars; ``None`` draws none. (``ci=``, its old name, still works with a
        FutureWarning.)
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
    one_of("latency", latency, lat_names)
    by = [c for c in (hue, order) if c]
    # without error bars (confidence=None) the points' intervals are computed but not drawn
    pts = per_point(runs, by=by, metrics=("iops", latency), direction=direction, confidence=confidence or CONFIDENCE)
    ax = new_ax(ax)
    levels = sorted(pts[hue].unique()) if hue else [None]
    pal = _hue_palette(levels)
    for level in levels:
        g = pts if level is None else pts[pts[hue] == level]
        g = g.sort_values(order)
        ax.plot(g["iops"], g[latency], marker="o", ms=5, lw=1.6, color=pal[level],
                label=f"{level}" if level is not None else "all runs")
        if confidence is not None:
            xerr = np.vstack([g["iops"] - g["iops_ci_low"], g["iops_ci_high"] - g["iops"]])
            yerr = np.vstack([g[latency] - g[f"{latency}_ci_low"], g[f"{latency}_ci_high"] - g[latency]])
            ax.errorbar(g["iops"], g[latency], xerr=xerr, yerr=yerr, fmt="none", ecolor=pal[level], capsize=2,
                        elinewidth=0.8, alpha=0.45)
    tail_col = f"p{tail:g} clat (ms)"
    both = None
    if histograms is not None:
        pct = point_percentiles(histograms, runs, list(by), (tail,), direction=direction)
        pct[tail_col] = (pct.pop(f"clat_p{tail:g}_ns") * 1e-6).round(4)
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

    s = _Stick(ax=ax, pts=pts, both=both, by=by, latency=latency, tail=tail, tail_col=tail_col, order=order,
               hue=hue, confidence=confidence)
    _mark_knees(s, knee)
    return _finish_stick(s)


@dataclass(frozen=True)
class _Stick:
    """What the steps of :func:`latency_vs_iops` share: the axes, the points (``both``: with the tail) and the
    options."""

    ax: Axes
    pts: pd.DataFrame
    both: pd.DataFrame | None
    by: list[str]
    latency: str
    tail: float
    tail_col: str
    order: str
    hue: str | None
    confidence: float | None


def _locate(s: _Stick, k: Mapping[str, Any], table: pd.DataFrame, col: str) -> tuple[float, float]:
    """The (IOPS, ``col``) of the point ``k`` names in ``table``; a point not in ``runs`` is refused, named."""
    sel = table
    for c in s.by:
        sel = sel[sel[c] == k[c]]
    if sel.empty:
        have = s.pts[s.by].drop_duplicates().to_dict("records")
        raise ValueError(f"The knee {dict((c, k[c]) for c in s.by)} is not a point of `runs`; points are {have}.")
    return float(sel["iops"].iloc[0]), float(sel[col].iloc[0])


def _mark_knees(s: _Stick, knee: Any) -> None:
    """Mark the knee (or the recommended point, linked to its tail, and the knees of each curve)."""
    ax, pts, both, by, latency, tail_col = s.ax, s.pts, s.both, s.by, s.latency, s.tail_col
    tail = s.tail
    k = _knee_point(knee, by)
    recommended = knee is not None and hasattr(knee, "rule") and hasattr(knee, "knees")
    if k:
        if all(c in k for c in by):
            kx, ky = _locate(s, k, pts, latency)
            label = _mark_label(k, by, recommended)
            if recommended and both is not None:
                tx, ty = _locate(s, k, both, tail_col)
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
                x, y = _locate(s, kk, pts, latency)
                marker, what = "D", name
            elif str(row["curve"]).startswith(f"p{tail:g} ") and both is not None:
                x, y = _locate(s, kk, both, tail_col)
                marker, what = "^", f"p{tail:g}"
            else:
                continue
            ax.plot([x], [y], linestyle="none", marker=marker, ms=11, mfc="none", mec="black", mew=1.6, zorder=6,
                    label=f"knee of {what} ({int(row['outstanding_ios'])} outstanding I/Os)")


def _finish_stick(s: _Stick) -> Axes:
    """Axes, scales, legend and title of the hockey stick."""
    ax, pts, both, latency, tail_col = s.ax, s.pts, s.both, s.latency, s.tail_col
    tail, order, hue, confidence = s.tail, s.order, s.hue, s.confidence
    ax.set_xlabel(METRICS["iops"].label)
    ax.xaxis.set_major_formatter(_THOUSANDS)
    ax.set_xlim(0, _upper(pts["iops"], pts["iops_ci_high"] if confidence is not None else None, 1.3))
    top = _upper(pts[latency], pts[f"{latency}_ci_high"] if confidence is not None else None)
    title = f"{hue or ''}{_ci_note(confidence, pts, 'bars', 'iops')}".lstrip("; ") or None
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
        A name from :data:`storagebench.tables.METRICS`; cell value is the geometric mean over repetitions (:func:`storagebench.stats.per_point`).
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
    m = display_metric(metric)
    pts = per_point(runs, by=[y, x], metrics=(metric,), direction=direction)
    grid = pts.pivot(index=y, columns=x, values=metric).sort_index(ascending=False).sort_index(axis=1)
    if norm is None:
        norm, log = _heat_norm(grid.to_numpy(dtype=float), metric, log)
    else:
        log = isinstance(norm, LogNorm)
    ax = new_ax(ax)
    sns.heatmap(grid, annot=annot, fmt=m.fmt, cmap=cmap, ax=ax, linewidths=0.5, norm=norm, cbar=cbar,
                cbar_kws={"label": m.label + (", log colour scale" if log else ""),
                          "format": _THOUSANDS if metric == "iops" else None} if cbar else None,
                annot_kws={"fontsize": "x-small"})
    ax.set_xlabel(factor_label(x))
    ax.set_ylabel(factor_label(y))
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
    m = display_metric(metric)
    need_columns(runs, [col], "runs")
    levels = sorted(runs[col].dropna().unique())
    pts = per_point(runs, by=[col, y, x], metrics=(metric,), direction=direction)
    norm, log = _heat_norm(pts[metric].to_numpy(dtype=float), metric, log)
    label = col_label or ((lambda v: f"{v / 1024:g} KiB") if col == "bs_bytes" else (lambda v: f"{col}={v}"))
    with house_style():
        fig, axes = plt.subplots(1, len(levels), figsize=figsize or (4.2 * len(levels) + 1.2, 3.8), dpi=DPI,
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
    one_of("kind", kind, ["percentile", "cdf", "ccdf"])
    bys = [] if by is None else ([by] if isinstance(by, str) else list(by))
    where = dict(where or {})
    if direction is not None:
        one_of("direction", direction, list(DIRECTIONS))
    h = attach_factors(histograms, runs, bys + list(where), direction)
    for col, val in where.items():
        h = h[h[col] == val]
        if h.empty:
            raise SchemaError(f"no histogram rows with {col} == {val!r}.")
    ax = new_ax(ax)
    groups = list(h.groupby(bys, sort=True)) if bys else [((), h)]
    pal = sns.color_palette("colorblind", n_colors=max(len(groups), 1))
    smallest_tail = 1.0
    for (key, grp), color in zip(groups, pal, strict=False):
        key = key if isinstance(key, tuple) else (key,)
        merged = merge_histograms(grp, by=()).sort_values("bin_ns")
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
        pcts = {float(k): float(v) for k, v in percentiles_from_bins(
            merged["bin_ns"].to_numpy(), merged["count"].to_numpy(), list(mark)).items()}
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

"""Figures of a comparison: a forest of ratios with their CIs, Bland-Altman agreement of two methods or tools,
and a source's claimed numjobs x iodepth against the sweep.

The ratios, CIs, bias and limits of agreement are :mod:`storagebench.stats`' (``compare``, ``bland_altman``,
``cross_tool``, ``parameter_claim_verdicts``); these functions draw them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from .._checks import need_columns
from ..errors import SchemaError
from ..findings import CONFIDENCE, fmt_number, renamed_ci
from ..stats import bland_altman, per_point
from ..tables import column_display
from ._style import DPI, house_style, new_ax
from ._sweep import latency_vs_iops


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


def _forest_kind(geometric: np.ndarray | None, what: str) -> str:
    """What the forest's ratios are, in words (geometric mean ratios are marked when mixed with others)."""
    if geometric is None:
        return f"ratio{what}"
    if geometric.all():
        return f"geometric mean ratio{' of' + what if what else ''}"
    kind = f"ratio of mean{what}" if what else "ratio of means"
    if geometric.any():
        kind += "; open diamonds: geometric mean ratio (see method)"
    return kind


def _forest_xlim(vals: np.ndarray, logx: bool) -> tuple[float, float]:
    """The x range of the forest around ``vals``, padded."""
    if logx:  # pad by a share of the span on the log scale, so a narrow span is not squeezed into the middle
        span = float(np.log(vals.max()) - np.log(vals.min()))
        pad = max(0.12 * span, 0.01)
        return float(vals.min() * np.exp(-pad)), float(vals.max() * np.exp(pad))
    pad = 0.15 * (vals.max() - vals.min() or 1.0)
    return vals.min() - pad, vals.max() + pad


def ratio_forest(comparison: Any, *, group: str | Sequence[str] | None = None, ratio: str = "ratio",
                 low: str = "ci_low", high: str = "ci_high", label: str | None = None,
                 logx: bool = True, ax: Axes | None = None) -> Axes:
    """Forest plot: one ratio with its confidence interval per group, vertical line at 1.

    Parameters
    ----------
    comparison : storagebench.stats.comparison.ComparisonTable or pandas.DataFrame
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
    need_columns(comparison, [*groups, ratio, low, high], "comparison")
    df = comparison.reset_index(drop=True)
    geometric = _geometric_rows(df)
    default_label = f"{_forest_kind(geometric, what)} ({ci_text}1 = no difference)"
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
    left, right = _forest_xlim(vals, logx)
    lo_d, hi_d = np.where(ok_lo, lo, left), np.where(ok_hi, hi, right)
    names = _forest_labels(df, groups)
    ax = new_ax(ax, figsize=(8.0, 1.6 + 0.42 * len(df)))
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


def bland_altman_plot(a, b, *, log: bool = True, confidence: float = CONFIDENCE, names: tuple[str, str] = ("a", "b"),
                      unit: str = "", ax: Axes | None = None, groups=None, title: str | None = None,
                      clusters: bool = False) -> Axes:
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
        the limits stay those of all items (with the groups as clusters when ``clusters``).
    title : str, optional
        Axes title; default ``"Agreement of A and B (Bland-Altman, n = ...; bands: 95% CIs)"``.
    clusters : bool
        The ``groups`` are clusters (several items of one pattern): the bias and the limits are
        :func:`storagebench.stats.bland_altman` with ``clusters=groups`` (Bland & Altman 2007; the pooled
        limits then have no CI band).

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
    if clusters and groups is None:
        raise SchemaError("clusters=True needs groups: the cluster of each pair")
    ag = bland_altman(a, b, log=log, confidence=confidence, clusters=groups if clusters else None)
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    mag, diff = (np.sqrt(x * y), x / y) if log else ((x + y) / 2.0, x - y)
    ax = new_ax(ax)
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
    ax.set_title(title if title is not None else f"Agreement of {names[0]} and {names[1]} (Bland-Altman, n = {ag.n}"
                 f"{f' in {ag.clusters} clusters' if ag.clusters else ''}; "
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
    ct : storagebench.stats.crosstool.CrossTool
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
    conf = (float(ag["confidence"].dropna().iloc[0]) if "confidence" in ag and ag["confidence"].notna().any()
            else CONFIDENCE)
    log = bool(ag["log"].dropna().iloc[0]) if "log" in ag and ag["log"].notna().any() else True
    names = (str(ct.other), str(ct.baseline))
    keys = list(getattr(ct, "by", ()))
    if not per_group or not keys:
        groups = pairs[keys].astype(str).agg(", ".join, axis=1) if keys and pairs[keys].drop_duplicates().shape[0] > 1 \
            else None
        if len(pairs) < 3:
            ax = new_ax(None)
            _too_few(ax, pairs[a_col] * scale, pairs[b_col] * scale, log=log, names=names, unit=unit)
            ax.set_title(f"{names[0]} and {names[1]} on {len(pairs)} configuration(s): limits of agreement not "
                         "estimable (fewer than 3)")
            return ax.figure
        clustered = bool(ag["clusters"].iloc[0] > 0) if "clusters" in ag and len(ag) and groups is not None else False
        ax = bland_altman_plot(pairs[a_col] * scale, pairs[b_col] * scale, log=log, confidence=conf, names=names,
                               unit=unit, groups=groups, clusters=clustered)
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
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.5 * nrows), dpi=DPI, sharey=True,
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


@renamed_ci
def parameter_claim_plot(sweep: pd.DataFrame, verdicts: pd.DataFrame, *, by: str, latency: str = "lat_mean_ms",
                         confidence: float | None = CONFIDENCE) -> Figure:
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
        A latency name from :data:`storagebench.tables.METRICS`.
    confidence : float or None
        Confidence level of the error bars; ``None`` for none (one value per cell). (``ci=``, its old name,
        still works with a FutureWarning.)

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    SchemaError
        A missing column, or a group of ``sweep`` without a row in ``verdicts``.
    """
    need_columns(sweep, [by, "numjobs", "iodepth", "iops"], "sweep")
    need_columns(verdicts, [by, "recommended_numjobs", "recommended_iodepth", "claimed_numjobs", "claimed_iodepth"],
                  "verdicts")
    groups = list(sweep.groupby(by, sort=True))
    with house_style():
        fig, axes = plt.subplots(1, len(groups), figsize=(6.5 * len(groups), 4.8), dpi=DPI, layout="constrained",
                                 squeeze=False)
    for ax, (level, part) in zip(axes.flat, groups, strict=True):
        row = verdicts[verdicts[by].astype(str) == str(level)]
        if row.empty:
            raise SchemaError(f"verdicts has no row for {by}={level!r}")
        v = row.iloc[0]
        latency_vs_iops(part, knee={"numjobs": int(v["recommended_numjobs"]), "iodepth": int(v["recommended_iodepth"])},
                        latency=latency, confidence=confidence, ax=ax)
        cell = part[(part["numjobs"] == v["claimed_numjobs"]) & (part["iodepth"] == v["claimed_iodepth"])]
        if len(cell):  # the point latency_vs_iops drew for this cell: the geometric mean of its rows
            pt = per_point(cell, by=["numjobs", "iodepth"], metrics=("iops", latency),
                           confidence=confidence or CONFIDENCE)  # the mean only: its interval is not drawn
            ax.plot(pt["iops"], pt[latency], linestyle="none", marker="s", ms=13, mfc="none", mec="black",
                    mew=1.6, zorder=6, label=f"claimed (numjobs={int(v['claimed_numjobs'])}, "
                                             f"iodepth={int(v['claimed_iodepth'])})")
        for line in ax.lines:  # the knee is the recommended cell here
            if line.get_label().startswith("knee ("):
                line.set_label("recommended" + line.get_label()[4:])
        ax.legend(loc="upper left", fontsize="small", title="numjobs (threads)")
        ax.set_title(f"{level}: mean latency vs IOPS (load rises with iodepth)", fontsize="medium")
    return fig

"""The figures of the testbed studies (part of :mod:`storagebench.studies._base`, which re-exports them).

Plain matplotlib Figures: the ratio forest of a verdict table, the drift residuals, the within-run stability of
every run, and the plain-number log axis they share; numbering, captions and alt text belong to the write-up.
Also the constants of the within-run stability check, which its figure and :mod:`._base`'s check share.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt  # plots, imported here anyway, draws with pyplot
import numpy as np
import pandas as pd
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogFormatterSciNotation,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from .. import stats
from ..findings import fmt_number
from ..plots import ratio_forest
from ..tables import metric_words
from ._results import StudyData

#: Round of the per-second IOPS log (fio ``log_avg_msec=1000``), s.
ROUND_S = 1.0
#: Within-run stability window: one-second samples, data excursion and fitted-line excursion (fractions of the
#: mean): the SNIA PTS steady-state criteria, applied to the per-second IOPS samples inside one run, not to PTS
#: rounds (whole test rounds); a run is "stable" when some 5 consecutive samples meet both.
PTS_WINDOW, PTS_DATA_LIMIT, PTS_FIT_LIMIT = 5, 0.20, 0.10
#: What that check is, in words (the write-ups' findings, captions and figure say it so).
STABILITY_WORDS = (f"within-run stability: the SNIA PTS steady-state criteria applied to {PTS_WINDOW} consecutive "
                   "one-second IOPS samples inside each run, not to PTS rounds (whole test rounds)")
#: Columns of a fio IOPS log series that add up to a run's total IOPS in one round.
_LOG_PARTS = ("host", "job", "log_index", "direction")


def _pct(x: float) -> str:
    """A signed percentage for a sentence: ``+56.8%``, ``-100%``, ``+1,860,000%``."""
    return ("+" if x > 0 else "") + fmt_number(x) + "%"


# ---------------------------------------------------------------------------------------------
# figures (plain matplotlib Figures; numbering, captions and alt text belong to the write-up)


def ratio_figure(verdicts: pd.DataFrame, group: str | Sequence[str], *, title: str,
                 margin: float | None = None):
    """Forest plot of the verdict table's ratios with their CIs (:func:`storagebench.plots.ratio_forest`).

    Rows whose CI is not estimable are left out and counted in the title; with none left, the figure
    says so. ``margin`` (a fraction) draws the equivalence bounds dotted.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ok = verdicts.dropna(subset=["ratio", "ci_low", "ci_high"])
    ok = ok[(ok["ci_low"] > 0) & (ok["ci_high"] > 0)]
    if "metric" in ok:  # "p99 completion latency (clat)", not "clat_p99_ns"
        ok = ok.assign(metric=ok["metric"].map(metric_words))
    height = 1.5 + 0.3 * max(len(ok), 1)
    fig, ax = plt.subplots(figsize=(7, height))
    if ok.empty:
        ax.axis("off")
        ax.text(0.5, 0.5, "no ratio has an estimable CI with these runs", ha="center", va="center")
        return fig
    ratio_forest(ok, group=group, ax=ax)
    groups = [group] if isinstance(group, str) else list(group)
    factor = str(verdicts["factor"].iloc[0]) if "factor" in verdicts and len(verdicts) else "level"
    ax.set_ylabel(", ".join(factor if g == "level" else _short_name(g) for g in groups))  # "datastore", not "level"
    if margin:
        for x in (1 - margin, 1 + margin):
            ax.axvline(x, ls=":", color="grey")
    left = len(verdicts) - len(ok)
    ax.set_title(title + (f" ({left} of {len(verdicts)} left out: CI not estimable)" if left else ""),
                 fontsize="small")
    fig.tight_layout()
    return fig


def plain_log_axis(axis, ticks=None) -> None:
    """Label a log axis with plain numbers (``4``, ``30``, ``1,000``), not ``2^2`` or ``3 x 10^1``.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis`` of a log-scaled axes.
    ticks : sequence of float, optional
        Put the major ticks exactly there (e.g. the loads measured) and no minor ticks; default: where
        matplotlib puts them, with the minor ticks it would label labelled too.
    """
    def plain(x: float) -> str:  # 0.001, 0.01, 0.1, 1, 30, 1,000: no trailing zeros on an axis
        text = fmt_number(x)
        return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text

    class _Plain(LogFormatterSciNotation):
        def __call__(self, x, pos=None):  # the same ticks as matplotlib labels, in plain numbers
            return plain(x) if super().__call__(x, pos) else ""

    if ticks is not None:
        axis.set_major_locator(FixedLocator(sorted({float(t) for t in ticks})))
        axis.set_minor_locator(NullLocator())
        axis.set_major_formatter(FuncFormatter(lambda x, _: plain(x)))
        axis.set_minor_formatter(NullFormatter())
        return
    axis.set_major_formatter(_Plain())
    axis.set_minor_formatter(_Plain(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def _short_name(column: str) -> str:
    """A column's name for an axis label: ``bs`` for ``bs_bytes``, ``load`` for ``load_label``."""
    for suffix in ("_bytes_per_s", "_bytes", "_pct", "_ns", "_ms", "_s", "_label"):
        if column.endswith(suffix) and len(column) > len(suffix):
            return column[: -len(suffix)]
    return column


def drift_figure(drift: stats.drift.Drift):
    """Residuals (log scale, from the cell means; per run, or per set-up when that is the unit) against the run
    order, with the fitted common slope.

    Returns
    -------
    matplotlib.figure.Figure
    """
    r = drift.residuals
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.scatter(r[drift.order], 100 * np.expm1(r["residual"]), s=12, color="C0")
    if np.isfinite(drift.slope):
        x = np.array([r[drift.order].min(), r[drift.order].max()])
        xm = r[drift.order].mean()
        ax.plot(x, 100 * np.expm1(drift.slope * (x - xm)), color="C3",
                label=f"{_pct(drift.pct_over_span)} first to last {'run' if drift.unit == 'run' else 'set-up'}")
        ax.legend(loc="best", fontsize="small")

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # a position in the run order is a whole number
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("run order (position in the sweep)" if drift.order == "run_order" else
                  f"{drift.order} (position in the sweep)")
    ax.set_ylabel(f"{metric_words(drift.metric)}: % from its cell mean")
    fig.tight_layout()
    return fig


def steady_figure(data: StudyData):
    """Every run's per-second IOPS as % of its own mean, not-steady runs in red.

    Returns
    -------
    matplotlib.figure.Figure
    """
    ts = data.timeseries[data.timeseries["metric"] == "iops"]
    parts = [c for c in _LOG_PARTS if c in ts.columns]
    per = (ts.assign(_round=np.rint(ts["t_s"].astype(float) / ROUND_S).astype(int))
           .groupby(["run_id", *parts, "_round"])["value"].mean().groupby(["run_id", "_round"]).sum())
    flags = data.per_run.set_index("run_id")["steady"]
    fig, ax = plt.subplots(figsize=(7, 3))
    for rid, s in per.groupby(level=0):
        y = s.to_numpy(float)
        bad = flags.get(rid) is False
        # a marker on every round: a run that logged one second is a point, not an invisible line
        ax.plot(s.index.get_level_values(1), 100 * y / y.mean(), color="C3" if bad else "C0", marker="o", ms=3,
                alpha=0.9 if bad else 0.25, lw=1.2 if bad else 0.8)
    ax.axhspan(90, 110, color="grey", alpha=0.1)
    ax.set_xlim(0, max(float(per.index.get_level_values(1).max()), 1.0) + 1)  # from the start of the run
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("second of the run")
    ax.set_ylabel("IOPS, % of the run's mean")
    n_bad = int((data.per_run["steady"] == False).sum())  # noqa: E712
    logged = len(per.index.get_level_values(0).unique())
    ax.set_title(f"{len(data.per_run)} runs, {logged} with a per-second IOPS log; red: {n_bad} not stable "
                 "(PTS criteria on 1-s samples)", fontsize="small")
    fig.tight_layout()
    return fig

"""Figure functions with one house style: long-form tidy tables in, a labelled Axes out.

Every axes-level function takes the tidy table first, keyword-only options after it,
``ax=None`` (a new figure is made when it is ``None``) and returns the
:class:`matplotlib.axes.Axes` it drew on. Axes always carry their unit: latency in ms,
bandwidth in MB/s (10**6 B/s) or MiB/s (2**20 B/s) as the metric name says, IOPS in I/Os
per second. Metrics are named as in :data:`storagebench.tables.METRICS` (``"iops"``,
``"lat_mean_ms"``, ``"bw_MB_per_s"``, ``"clat_p99_ms"`` ...).

Rows of ``runs`` are one per run x host x job x direction (see :mod:`storagebench.schema`).
The figures read one row per run from the run-level table (:func:`storagebench.runlevel.per_run`;
a ``runs`` table is combined first, or pass ``tidy/run_totals.parquet``): fio's own rule for group
reporting (``sum_thread_stats`` in fio's ``stat.c``): completed I/Os and bytes add up over the
longest runtime, mean latencies are weighted by completed I/Os (``total_ios``). Latency
*percentiles* are never averaged; figures of percentiles use the json+ histograms (:func:`clat_cdf`,
:func:`storagebench.stats.point_percentiles`).

Each point is the geometric mean over its repetitions, and its uncertainty band is the log-scale
confidence interval computed by :func:`storagebench.stats.per_point` (:func:`storagebench.stats.point_means`,
by default from each point's own runs), drawn only where a point has a
CI. This package draws; it computes no statistics and no tables of its own (the tables of a sweep are
:func:`storagebench.stats.point_table`, :func:`storagebench.stats.littles_law_table` and
:func:`storagebench.stats.littles_law_summary`).

Modules, one per concept (private; the names are this package's ``__all__``):

``_style``
    The house style (:func:`set_house_style`, :func:`house_style`) and the factor axis labels
    (:data:`FACTOR_LABELS`).
``_sweep``
    Figures of a sweep: :func:`metric_vs`, :func:`iops_vs_iodepth`, :func:`latency_vs_iops`,
    :func:`heatmap`, :func:`heatmap_grid`, :func:`clat_cdf`.
``_compare``
    Figures of a comparison: :func:`ratio_forest`, :func:`bland_altman_plot`, :func:`cross_tool_plot`,
    :func:`parameter_claim_plot`.
``_caption``
    :func:`provenance_caption`, :func:`add_caption`.
"""

from __future__ import annotations

from ._caption import add_caption, provenance_caption
from ._compare import bland_altman_plot, cross_tool_plot, parameter_claim_plot, ratio_forest
from ._style import FACTOR_LABELS, house_style, set_house_style
from ._sweep import (
    HEATMAP_LOG_RATIO,
    TAIL_TICKS,
    clat_cdf,
    heatmap,
    heatmap_grid,
    iops_vs_iodepth,
    latency_vs_iops,
    metric_vs,
)

__all__ = [
    "FACTOR_LABELS",
    "HEATMAP_LOG_RATIO",
    "set_house_style",
    "house_style",
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

"""Per-point estimates of a sweep: the mean over repetitions with its CI, and merged-histogram percentiles.

A *point* is one combination of factor levels (``numjobs`` x ``iodepth``); its repetitions are runs.
These are the numbers the figures draw and the tables and findings state; :mod:`storagebench.plots`
draws them and computes nothing of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import SchemaError
from ._common import _check_confidence
from .equivalence import mean_ci

__all__ = ["point_means", "attach_factors", "point_percentiles"]


def point_means(per_run: pd.DataFrame, by: str | Sequence[str], columns: Sequence[str], *,
                confidence: float = 0.95) -> pd.DataFrame:
    """Mean and Student-t confidence interval of columns per point, over the runs of each point.

    Parameters
    ----------
    per_run : pandas.DataFrame
        One row per run (:func:`storagebench.stats.per_run`), with the ``by`` and ``columns`` columns.
    by : str or sequence of str
        Factor columns that define a point, e.g. ``["numjobs", "iodepth"]``.
    columns : sequence of str
        Value columns to average (in their own unit: ``iops`` in 1/s, ``lat_mean_ns`` in ns ...).
    confidence : float
        Confidence level of the interval (default 0.95).

    Returns
    -------
    pandas.DataFrame
        One row per point, sorted by ``by``: the ``by`` columns, ``n`` (runs), and per column ``<col>`` (mean
        of the finite values), ``<col>_ci_low``, ``<col>_ci_high`` (Student t CI of the mean,
        :func:`storagebench.stats.mean_ci`; NaN with fewer than two finite values; equal to the mean when
        all values are equal).

    Raises
    ------
    SchemaError
        A ``by`` or value column is missing, or ``per_run`` has no rows.
    StatsError
        Bad ``confidence``.

    Notes
    -----
    Student (1908), Biometrika 6:1: the t interval of a mean of n independent runs, n - 1 degrees of freedom.
    """
    by = [by] if isinstance(by, str) else list(by)
    confidence = _check_confidence(confidence)
    missing = [c for c in [*by, *columns] if c not in per_run.columns]
    if missing:
        raise SchemaError(f"per_run has no column(s) {missing}; it has {sorted(map(str, per_run.columns))}")
    if per_run.empty:
        raise SchemaError("per_run has no rows")
    rows = []
    for key, grp in per_run.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key, strict=True))
        row["n"] = len(grp)
        for col in columns:
            v = pd.to_numeric(grp[col], errors="coerce").to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            if v.size == 0:
                row[col] = row[f"{col}_ci_low"] = row[f"{col}_ci_high"] = np.nan
                continue
            est = mean_ci(v, confidence)
            row[col], row[f"{col}_ci_low"], row[f"{col}_ci_high"] = est.estimate, est.ci_low, est.ci_high
        rows.append(row)
    return pd.DataFrame(rows)


def attach_factors(histograms: pd.DataFrame, runs: pd.DataFrame | None, by: Sequence[str],
                   direction: str | None = None) -> pd.DataFrame:
    """The rows of ``histograms`` with the factor columns ``by`` joined from ``runs`` on ``run_id``.

    Parameters
    ----------
    histograms : pandas.DataFrame
        Tidy ``histograms`` table (``run_id``, ``bin_ns`` in ns, ``count``, ``direction`` ...).
    runs : pandas.DataFrame or None
        Tidy ``runs`` table, needed when a ``by`` column is not in ``histograms``.
    by : sequence of str
        Factor columns wanted on every histogram row.
    direction : {"read", "write", "trim"} or None
        Keep only that direction's bins.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    SchemaError
        A column is missing, no row has ``direction``, or no ``run_id`` of ``histograms`` is in ``runs``.
    """
    from ..schema import DIRECTIONS

    for c in ("run_id", "bin_ns", "count"):
        if c not in histograms.columns:
            raise SchemaError(f"`histograms` has no column {c!r}; it has {sorted(map(str, histograms.columns))}.")
    h = histograms
    if direction is not None:
        if direction not in DIRECTIONS:
            raise ValueError(f"The value for `direction` must be one of {list(DIRECTIONS)}, but {direction!r} was passed.")
        h = h[h["direction"] == direction]
        if h.empty:
            raise SchemaError(f"`histograms` has no rows with direction {direction!r}.")
    need = [c for c in by if c not in h.columns]
    if need:
        if runs is None:
            raise SchemaError(f"`histograms` has no column(s) {need}; pass `runs` to take them from there.")
        missing = [c for c in ["run_id", *need] if c not in runs.columns]
        if missing:
            raise SchemaError(f"`runs` has no column(s) {missing}; it has {sorted(map(str, runs.columns))}.")
        h = h.merge(runs[["run_id", *need]].drop_duplicates("run_id"), on="run_id", how="inner")
        if h.empty:
            raise SchemaError("no run_id of `histograms` is in `runs`.")
    return h


def point_percentiles(histograms: pd.DataFrame, runs: pd.DataFrame | None, by: str | Sequence[str],
                      percentiles: Sequence[float] = (50.0, 99.0), *, direction: str | None = None) -> pd.DataFrame:
    """Completion-latency percentiles per point from the merged json+ bins of all its runs.

    Parameters
    ----------
    histograms, runs, direction
        As in :func:`attach_factors`.
    by : str or sequence of str
        Factor columns that define a point.
    percentiles : sequence of float
        Percentiles in % (50, 99, 99.9).

    Returns
    -------
    pandas.DataFrame
        One row per point: the ``by`` columns and ``clat_p<p>_ns`` per percentile (ns; ``p99.9`` is
        written ``clat_p99.9_ns``).

    Notes
    -----
    Bins of every run, job and host of a point are added up (:func:`storagebench.histogram.merge_histograms`)
    and the percentile is read with fio's rule (:func:`storagebench.histogram.percentiles_from_bins`, fio
    ``stat.c``); percentiles of runs are never averaged.
    """
    from ..histogram import merge_histograms, percentiles_from_bins

    by = [by] if isinstance(by, str) else list(by)
    h = attach_factors(histograms, runs, by, direction)
    rows = []
    for key, grp in h.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        merged = merge_histograms(grp, by=())
        res = percentiles_from_bins(merged["bin_ns"].to_numpy(), merged["count"].to_numpy(), list(percentiles))
        vals = {float(k): float(v) for k, v in res.items()}
        row = dict(zip(by, key, strict=True))
        for p in percentiles:
            row[f"clat_p{p:g}_ns"] = vals[float(p)]
        rows.append(row)
    return pd.DataFrame(rows)

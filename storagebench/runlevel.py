"""The run-level table: ``runs`` rows combined into one row per run x host x direction, fio's way.

Every "one row per run" of storagebench comes from :func:`run_totals` (ingest writes it once, as
``tidy/run_totals.parquet``); stats, figures, testbeds and notebooks select from it
(:func:`select`, :func:`per_run`) and never combine rows themselves.

**fio's rule.** fio combines jobs with one function, ``sum_thread_stats`` (``stat.c``), for
``group_reporting``, for ``unified_rw_reporting=mixed`` (``gen_mixed_ddir_stats_from_ts``: the
directions of a job summed into one ``mixed`` block) and for a client's ``All clients`` entry
(``client.c`` ``handle_ts``). Per direction it does:

* ``io_bytes`` and ``total_io_u`` (completed I/Os) add up; ``runtime`` is the longest one;
* IOPS and bandwidth are then ``1000 * total_io_u / runtime_ms`` and ``1000 * io_bytes / runtime_ms``
  (``add_ddir_status_json``): the pooled I/Os over the longest runtime, which is *not* the sum of
  the jobs' IOPS when their runtimes differ (when they are equal it is, and the sum of the rows' own
  IOPS is used: the directions of one job, DiskSPD's one test time);
* latency statistics (``lat``, ``clat``, ``slat``) merge by sample count (``sum_stat``, the parallel
  algorithm of Chan, Golub & LeVeque 1979): mean ``(m1 n1 + m2 n2) / (n1 + n2)``, sum of squares
  ``S = S1 + S2 + (m1 - m2)**2 n1 n2 / (n1 + n2)``, printed SD ``sqrt(S / (N - 1))`` (``calc_lat``);
  min and max are the min and max; a stat without samples is skipped;
* percentiles come from the summed ``io_u_plat`` histogram (``calc_clat_percentiles``): here the
  merged json+ bins (:mod:`storagebench._histogram`), never an average of percentiles;
* CPU is ``usr_time`` summed over ``total_run_time`` summed: the runtime-weighted mean of the jobs'
  ``usr_cpu``;
* the group's ``error`` is the first non-zero job error.

The weights are the completed I/Os (``total_ios``; fio's ``clat_ns.N`` and ``lat_ns.N`` equal it).
Where the counts are unknown (fio 2.1 prints no ``total_ios``: the count is ``iops x runtime``; a
published table has neither), the rows are taken to share one runtime: IOPS and bandwidth add up and
means are weighted by IOPS (``combined_by == "IOPS"``). A single row is passed through unchanged
(``combined_by == "as reported"``): DiskSPD and Iometer rows are run totals already.

**Worked example** (the gold check of the tests): one run of two jobs, 1000 IOPS for 10 s at 1 ms
and 1000 IOPS for 1 s at 10 ms. fio's group is 11,000 I/Os over 10 s = 1,100 IOPS with a mean
latency of (10,000 x 1 + 1,000 x 10) / 11,000 = **1.818 ms**; weighting the means by IOPS would give
5.500 ms, which no fio output ever shows.

**The table** (schema :data:`storagebench.schema.RUN_TOTALS`). For each run:

* a row per host x direction (the host's jobs combined);
* for a host with several directions (a ``randrw`` job), a row with ``direction == "mixed"`` (fio's
  name for the directions reported as one): the run's total, whose IOPS is the sum over directions;
* for a run on several hosts (client/server), the same rows with ``host == "all hosts"``: the
  cluster total, which is what fio prints as ``All clients``.

A row that already covers everything is not repeated: a one-host run has no ``all hosts`` rows, a
single-direction run no ``mixed`` row. The flags ``all_hosts`` and ``all_directions`` say what a row
covers, so the run-level row of every run is ``all_hosts & all_directions`` (:func:`per_run`).
``error``, ``n_jobs_error`` and ``partial`` flag a run with a failed or killed job: its numbers are
kept, never silently averaged with the good jobs, and figures leave it out (:func:`per_run`,
``completed=True``).

Jobs are taken to run at the same time (one fio group): a run whose jobs ran one after the other
(``stonewall``) is combined as if they overlapped, which fio itself would report as several groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from ._histogram import grid_index, grouped_percentiles
from .errors import SchemaError
from .schema import ALL_DIRECTIONS, ALL_HOSTS, DIRECTIONS, PERCENTILES, RUN_TOTALS

__all__ = ["run_totals", "select", "per_run", "read_run_totals", "is_run_totals"]

_KEYS = ("run_id", "host", "job", "job_index", "direction")
_RUN_COLS = {c.name: c for c in schema.RUNS}
_OUT_NAMES = tuple(c.name for c in RUN_TOTALS)
#: columns of runs consumed by the combination (everything else is a study factor, kept when constant)
_CONSUMED = frozenset(_RUN_COLS) | {c.name for c in RUN_TOTALS}
_DIR_RANK = {d: i for i, d in enumerate((*DIRECTIONS, ALL_DIRECTIONS))}


def is_run_totals(df: pd.DataFrame) -> bool:
    """True when ``df`` is a run-level table (it has the ``all_hosts``/``all_directions`` flags)."""
    return "all_hosts" in df.columns and "all_directions" in df.columns


# ---- inputs ------------------------------------------------------------------------------------


def _unknown(name: str, n: int) -> pd.Series:
    """A column ``runs`` lacks: its unknown value (:attr:`storagebench.schema.Column.unknown`)."""
    col = _RUN_COLS[name]
    if name == "job_index":  # no job identity: every row is its own job entry
        return pd.Series(np.arange(n, dtype=np.int64))
    if name == "direction":  # a row without a direction covers the run's directions as reported
        return pd.Series([ALL_DIRECTIONS] * n, dtype="string")
    if col.dtype.startswith("datetime64"):
        return pd.Series(pd.NaT, index=range(n), dtype=col.dtype)
    if col.dtype == "string":
        return pd.Series([col.unknown] * n, dtype="string")
    return pd.Series(np.full(n, col.unknown, dtype=col.dtype))


def _prepared(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with every ``runs`` column (unknown ones filled as the schema says), schema dtypes."""
    missing = [c for c in ("run_id", "iops") if c not in runs.columns]
    if missing:
        raise SchemaError(f"runs is missing columns {missing} (a run-level table needs run_id and iops)")
    df = runs.reset_index(drop=True)
    fill = {name: _unknown(name, len(df)) for name in _RUN_COLS if name not in df.columns}
    if fill:
        df = pd.concat([df, pd.DataFrame(fill)], axis=1)
    dtypes = dict(zip(df.columns, map(str, df.dtypes), strict=True))
    if any(dtypes[c.name] != c.dtype for c in schema.RUNS):  # ingest's tables are in schema dtypes
        df = schema.validate(df, "runs")
    return df


def _hist_rows(df: pd.DataFrame, histograms: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(runs row of each block of histogram rows (-1: none), the blocks' lengths, whether each runs row
    has bins).

    ``histograms`` rows come in blocks of one key (run_id, host, job, job_index, direction): the block
    starts are found by comparing neighbouring rows (pyarrow), and only the block keys are matched with
    the runs keys (one hash grouping of both). Runs rows sharing a key (the same output ingested twice)
    share its bins, and its group at every level.
    """
    n, nh = len(df), len(histograms)
    if nh == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(n, dtype=bool)
    change = np.zeros(nh, dtype=bool)
    change[0] = True
    if nh > 1:
        for k in _KEYS:
            col = histograms[k]
            try:
                arr = col.array._pa_array if isinstance(col.array, pd.arrays.ArrowStringArray) \
                    else pa.chunked_array([pa.array(col.to_numpy())])  # noqa: SLF001 - zero copy
                diff = pc.fill_null(pc.not_equal(arr.slice(1), arr.slice(0, nh - 1)), True)
                change[1:] |= diff.to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError):
                v = col.to_numpy()
                change[1:] |= v[1:] != v[:-1]
    starts = np.flatnonzero(change)
    blocks = pd.DataFrame({k: histograms[k].take(starts).reset_index(drop=True) for k in _KEYS})
    both = pd.concat([df[list(_KEYS)], blocks], ignore_index=True)
    codes = both.groupby(list(_KEYS), sort=False, dropna=False, observed=True).ngroup().to_numpy(dtype=np.int64)
    run_codes, block_codes = codes[:n], codes[n:]
    first = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
    first[run_codes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)  # the first runs row of each key
    block_row = first[block_codes]
    has = np.zeros(n, dtype=bool)
    has[block_row[block_row >= 0]] = True
    return block_row, np.diff(np.r_[starts, nh]), has[first[run_codes]]


# ---- combining ---------------------------------------------------------------------------------


class _Level:
    """The rows of one level (host x direction, host, direction, run) grouped by an integer code."""

    def __init__(self, rows: np.ndarray, codes: np.ndarray) -> None:
        order = np.argsort(codes, kind="stable")
        self.rows = rows[order]  # runs row indices, grouped, row order kept within a group
        sc = codes[order]
        self.starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if len(sc) else np.zeros(0, np.int64)
        self.codes = sc
        self.n_groups = len(self.starts)
        self.size = np.diff(np.r_[self.starts, len(sc)])
        self.first = self.rows[self.starts]
        # dense group number of each grouped position (0..n_groups-1)
        self.gid = np.repeat(np.arange(self.n_groups), self.size)

    def take(self, values: np.ndarray) -> np.ndarray:
        return values[self.rows]

    def add(self, values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, self.starts) if self.n_groups else values[:0]

    def any(self, values: np.ndarray) -> np.ndarray:
        return np.logical_or.reduceat(values, self.starts) if self.n_groups else values[:0]

    def all(self, values: np.ndarray) -> np.ndarray:
        return np.logical_and.reduceat(values, self.starts) if self.n_groups else values[:0]

    def fmax(self, values: np.ndarray) -> np.ndarray:
        return np.fmax.reduceat(values, self.starts) if self.n_groups else values[:0]

    def fmin(self, values: np.ndarray) -> np.ndarray:
        return np.fmin.reduceat(values, self.starts) if self.n_groups else values[:0]

    def imin(self, values: np.ndarray) -> np.ndarray:
        return np.minimum.reduceat(values, self.starts) if self.n_groups else values[:0]

    def imax(self, values: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(values, self.starts) if self.n_groups else values[:0]

    def first_of(self, keys: np.ndarray) -> np.ndarray:
        """Mask (grouped order) of the first position of each ``keys`` value within its group."""
        if not len(keys):
            return np.zeros(0, dtype=bool)
        return ~pd.Series(self.gid.astype(np.int64) * (int(keys.max()) + 1) + keys).duplicated().to_numpy()


def _weighted(lv: _Level, m: np.ndarray, w: np.ndarray, use: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean per group of ``m`` over grouped positions ``use`` (w > 0); NaN when one used value
    is NaN or nothing is used. Returns (mean per group, mean broadcast to grouped positions)."""
    bad = lv.any(use & np.isnan(m))
    ww = np.where(use, w, 0.0)
    den = lv.add(ww)
    num = lv.add(np.where(use, np.nan_to_num(m) * ww, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where((den > 0) & ~bad, num / np.where(den > 0, den, 1.0), np.nan)
    return mean, mean[lv.gid]


def _joined(lv: _Level, col: pd.Series, sep: str = "|", skip_empty: bool = False) -> np.ndarray:
    """Per group: the value when every row has it, else the distinct values joined (first-seen order)."""
    values = col.to_numpy(dtype=object, na_value=None)
    codes, _ = pd.factorize(col)  # NA -> -1 (on the column itself: pyarrow's hashing for strings)
    g = lv.take(codes)
    const = lv.imin(g) == lv.imax(g)
    out = values[lv.first].copy()  # a value every row has (NA when none has one)
    taken = lv.take(values)
    for k in np.flatnonzero(~const):
        part = taken[lv.starts[k]:lv.starts[k] + lv.size[k]]
        seen = dict.fromkeys(v for v in part if v is not None and not (skip_empty and v == ""))
        out[k] = sep.join(seen)
    return out


def _const_number(lv: _Level, values: np.ndarray, unknown: float) -> np.ndarray:
    v = lv.take(values.astype(float))
    nan = np.isnan(v)
    same = (lv.fmin(v) == lv.fmax(v)) & ~lv.any(nan)
    allnan = lv.all(nan)
    out = np.where(same, lv.fmin(v), unknown)
    return np.where(allnan, unknown, out)


class _Bins:
    """The histograms of a run_totals call: block -> runs row, block lengths, bins, counts, and the fio
    bucket index of every bin (``None`` when some bin is off fio's grid)."""

    def __init__(self, df: pd.DataFrame, histograms: pd.DataFrame, blocks: tuple | None = None) -> None:
        if blocks is None:
            self.block_row, self.lengths, self.has_bins = _hist_rows(df, histograms)
        else:  # ingest knows the runs row of each block
            self.block_row, self.lengths = (np.asarray(b, dtype=np.int64) for b in blocks)
            self.has_bins = np.zeros(len(df), dtype=bool)
            self.has_bins[self.block_row[self.block_row >= 0]] = True
        self.bins = histograms["bin_ns"].to_numpy(dtype=np.int64)
        self.counts = histograms["count"].to_numpy(dtype=np.int64)
        self.idx = grid_index(self.bins) if len(self.bins) else None  # once per call: every level reuses it

    @classmethod
    def none(cls, n: int) -> _Bins:
        self = cls.__new__(cls)
        self.block_row = self.lengths = self.bins = self.counts = np.zeros(0, dtype=np.int64)
        self.has_bins, self.idx = np.zeros(n, dtype=bool), None
        return self


def _percentiles(lv: _Level, hist: _Bins, row_group: np.ndarray, multi: np.ndarray,
                 ps: tuple[float, ...] = PERCENTILES) -> np.ndarray:
    """Percentiles ``ps`` (ns) of the merged bins of each multi-row group of ``lv``: (n_groups, len(ps)),
    NaN where a group has none (fio's rule: :func:`storagebench._histogram.grouped_percentiles`)."""
    out = np.full((lv.n_groups, len(ps)), np.nan)
    if not len(hist.block_row):
        return out
    bgroup = np.where(hist.block_row >= 0, row_group[np.maximum(hist.block_row, 0)], -1)
    bsel = bgroup >= 0
    bsel[bsel] = multi[bgroup[bsel]]
    if not bsel.any():
        return out
    groups = np.flatnonzero(multi)
    dense = np.full(lv.n_groups, -1, dtype=np.int64)
    dense[groups] = np.arange(len(groups))
    gi = np.repeat(dense[bgroup[bsel]], hist.lengths[bsel])
    if bsel.all():  # every block (one level of ingest's usual table): no copies
        bins, counts, idx = hist.bins, hist.counts, hist.idx
    else:
        sel = np.repeat(bsel, hist.lengths)
        bins, counts, idx = hist.bins[sel], hist.counts[sel], None if hist.idx is None else hist.idx[sel]
    pct = grouped_percentiles(gi, bins, counts, len(groups), ps, bucket_idx=idx)
    out[groups] = pct
    return out


#: The ``runs`` columns by role, each with its combine rule (:data:`storagebench.schema.COMBINE_RULES`):
#: :func:`_combine` applies the rule of every column, so a new column is combined as its schema entry says.
_METRICS = schema.columns("runs", role="metric")
_CARRIED = tuple(c for c in schema.RUNS if c.role != "metric" and c.combine is not None)
#: the json+ percentile of each ``"bins"`` column (``clat_p99_9_ns`` -> 99.9)
_BIN_PS = {c.name: float(c.name[len("clat_p"):-len("_ns")].replace("_", "."))
           for c in _METRICS if c.combine == "bins"}


def _combine(df: pd.DataFrame, lv: _Level, arrays: dict[str, np.ndarray], hist: _Bins | None,
             extra: Sequence[str]) -> dict[str, Any]:
    """The combined columns of every group of ``lv``: each ``runs`` column by its schema combine rule
    (see the module docstring), and the run-level table's own columns."""
    single = lv.size == 1
    first = lv.first
    out: dict[str, Any] = {}
    iops = lv.take(arrays["iops"])
    rt = lv.take(arrays["runtime_s"])
    ios = lv.take(arrays["est:total_ios"])
    rt_max = lv.fmax(rt)
    counts_ok = ~lv.any(np.isnan(ios)) & (rt_max > 0)
    by_counts = counts_ok[lv.gid]
    # the weight of a row: its completed I/Os (fio's sample count), else its IOPS (a common runtime assumed)
    w = np.where(by_counts, np.nan_to_num(ios), np.nan_to_num(iops))
    # one runtime for every row (the directions of one job; DiskSPD's one test time): I/Os / runtime is
    # then the sum of the rows' own IOPS, which keeps the tool's precision (DiskSPD prints its time
    # rounded to 10 ms, its IOPS from the exact one)
    same_rt = lv.fmin(rt) == rt_max
    out["combined_by"] = np.where(single, "as reported", np.where(counts_ok, "I/O counts", "IOPS"))
    used = w > 0
    notes = [[] for _ in range(lv.n_groups)]
    means: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    pct: dict[str, np.ndarray] = {}
    job_first = lv.first_of(lv.take(arrays["job_id"]))
    for c in _METRICS:
        name, rule = c.name, c.combine
        own = arrays[name]
        if rule == "rate":  # the summed count over the longest runtime (fio add_ddir_status_json)
            est = lv.take(arrays[f"est:{c.of}"])
            with np.errstate(invalid="ignore", divide="ignore"):
                combined = np.where(counts_ok & ~same_rt,
                                    np.where(~lv.any(np.isnan(est)), lv.add(np.nan_to_num(est)) /
                                             np.where(rt_max > 0, rt_max, 1.0), np.nan),
                                    lv.add(lv.take(own)))
        elif rule == "sum":
            raw = lv.take(own)
            out[name] = np.where(lv.all(raw >= 0), lv.add(np.where(raw >= 0, raw, 0)), -1)
            continue
        elif rule == "longest":
            combined = lv.fmax(lv.take(own))
        elif rule == "mean":  # sample-weighted (fio sum_stat)
            means[name] = _weighted(lv, lv.take(own), w, used)
            combined = means[name][0]
        elif rule == "sd":  # pooled sums of squares (fio sum_stat)
            m = lv.take(arrays[c.of])
            mean, mean_b = means.get(c.of) or _weighted(lv, m, w, used)
            sd = lv.take(own)
            bad_sd = lv.any(used & np.isnan(sd))
            within_w = np.where(by_counts, np.maximum(w - 1.0, 0.0), w)  # S_i = sd_i**2 (n_i - 1)
            within = lv.add(np.where(used, np.nan_to_num(sd) ** 2 * within_w, 0.0))
            between = lv.add(np.where(used, w * (np.nan_to_num(m) - np.nan_to_num(mean_b)) ** 2, 0.0))
            nsum = lv.add(np.where(used, w, 0.0))
            with np.errstate(invalid="ignore", divide="ignore"):
                denom = np.where(counts_ok, nsum - 1.0, nsum)
                var = np.where(denom > 0, (within + between) / np.where(denom > 0, denom, 1.0), 0.0)
            combined = np.where(bad_sd | np.isnan(mean), np.nan, np.sqrt(var))
        elif rule == "mean_sampled":  # fio prints 0 with N = 0 (sync ioengines): no samples
            v = lv.take(own)
            s_used = used & ~(v == 0.0)
            s_mean, _ = _weighted(lv, v, w, s_used)
            no_samples = ~lv.any(s_used) & lv.all(~used | (v == 0.0))
            combined = np.where(no_samples, 0.0, s_mean)
        elif rule in ("min", "max"):  # over the rows that did I/O
            v = lv.take(own)
            combined = (lv.fmin if rule == "min" else lv.fmax)(np.where(used, v, np.nan))
            combined = np.where(lv.any(used & np.isnan(v)), np.nan, combined)
        elif rule == "bins":  # the row's own, or from merged bins (never averaged)
            if not pct:
                pct = _bin_percentiles(df, lv, hist, single, used, notes)
            combined = pct[name]
        elif rule == "own":  # a statistic that needs its samples: never combined
            has = lv.any(~np.isnan(lv.take(own)))
            for k in np.flatnonzero(~single & has):
                notes[k].append(f"{name}: NaN, the combined rows' values cannot be combined without their "
                                "samples (never averaged)")
            combined = np.full(lv.n_groups, np.nan)
        elif rule == "job_runtime_mean":  # runtime-weighted mean over the distinct jobs
            jw = lv.take(arrays["job_runtime"])
            v = lv.take(own)
            use = job_first & (jw > 0)
            mean, _ = _weighted(lv, v, jw, use)
            plain = np.where(lv.any(job_first & np.isnan(v)), np.nan,
                             lv.add(np.where(job_first, np.nan_to_num(v), 0.0)) / np.maximum(lv.add(job_first), 1))
            combined = np.where(lv.any(use), mean, plain)
        elif rule == "first_error":  # fio's group error: the first non-zero job error
            err = lv.take(own)
            out["n_jobs_error"] = lv.add((job_first & (err != 0)).astype(np.int64))
            pos = np.where(err != 0, np.arange(len(err)), len(err))
            at = lv.imin(pos) if lv.n_groups else pos[:0]
            out[name] = np.where(at < len(err), err[np.minimum(at, max(len(err) - 1, 0))], 0) if len(err) else at
            continue
        elif rule == "any":
            out[name] = lv.any(lv.take(own))
            continue
        else:  # pragma: no cover - schema.Column checks the rule names
            raise SchemaError(f"runs.{name}: no run-level rule {rule!r}")
        out[name] = np.where(single, own[first], combined)
    out["n_jobs"] = lv.add(job_first.astype(np.int64))
    out["n_rows"] = lv.size
    # queue: iodepth x numjobs per distinct job section (host x job)
    sec_first = lv.first_of(lv.take(arrays["section_id"]))
    oio = lv.take(arrays["oio"])
    out["outstanding_ios"] = np.where(lv.any(sec_first & np.isnan(oio)), np.nan,
                                      lv.add(np.where(sec_first, np.nan_to_num(oio), 0.0)))
    # identity, factors and provenance
    for c in _CARRIED:
        name, rule = c.name, c.combine
        if rule == "same":
            out[name] = _const_number(lv, df[name].to_numpy(dtype=float), float(c.unknown)).astype(c.dtype)
        elif rule == "join":
            out[name] = _joined(lv, df[name])
        elif rule == "all":
            out[name] = lv.all(lv.take(df[name].to_numpy(dtype=bool)))
        elif rule == "first":
            out[name] = df[name].to_numpy()[first]
        elif rule == "earliest":
            started = df[name]
            ns = started.to_numpy(dtype="datetime64[ns]").view(np.int64)
            nat = started.isna().to_numpy()
            big = np.iinfo(np.int64).max
            smin = lv.imin(lv.take(np.where(nat, big, ns)))
            out[name] = np.where(smin == big, np.iinfo(np.int64).min, smin)  # ns since the epoch; NaT: int64 min
        elif rule == "notes":
            out[name] = _notes(lv, df[name], arrays, notes)
        else:  # pragma: no cover - schema.Column checks the rule names
            raise SchemaError(f"runs.{name}: no run-level rule {rule!r}")
    # every NaN says why (the table gate's rule): a combined value is NaN because some row's input was
    final = out["note"]
    for c in _NOTED:
        v = np.asarray(out[c], dtype=np.float64)
        for k in np.flatnonzero(np.isnan(v) & ~np.asarray(single, dtype=bool)):
            if not _NOTED[c].search(final[k]):
                extra_note = f"{c}: NaN, a combined row lacks a value it needs"
                final[k] = f"{final[k]}; {extra_note}" if final[k] else extra_note
    for c in extra:
        codes, uniques = pd.factorize(df[c], use_na_sentinel=True)
        g = lv.take(codes)
        const = (lv.imin(g) == lv.imax(g)) & (lv.imin(g) >= 0)
        vals = df[c].iloc[first].reset_index(drop=True)
        out[c] = vals.where(pd.Series(const)) if not const.all() else vals
    return out


def _bin_percentiles(df: pd.DataFrame, lv: _Level, hist: _Bins | None, single: np.ndarray, used: np.ndarray,
                     notes: list[list[str]]) -> dict[str, np.ndarray]:
    """Per ``"bins"`` column: the percentile of each group's merged json+ bins (NaN, with a note, for a
    multi-row group where a row with I/O has none)."""
    ps = tuple(_BIN_PS.values())
    pct = np.full((lv.n_groups, len(ps)), np.nan)
    multi = ~single
    if hist is not None:
        covered = lv.all(~used | lv.take(hist.has_bins))
        row_group = np.full(len(df), -1, dtype=np.int64)
        row_group[lv.rows] = lv.gid
        pct = _percentiles(lv, hist, row_group, multi & covered, ps)
        missing = multi & ~covered
    else:
        missing = multi.copy()
    for k in np.flatnonzero(missing & lv.any(used)):
        notes[k].append("clat_p*_ns: NaN, a combined row has no json+ bins (percentiles are never averaged)")
    return {c: pct[:, j] for j, c in enumerate(_BIN_PS)}


def _notes(lv: _Level, note: pd.Series, arrays: dict[str, np.ndarray], notes: list[list[str]]) -> np.ndarray:
    """The rows' own notes (distinct, joined) and what combining had to say, per group."""
    note_vals = _joined(lv, note.fillna(""), sep="; ", skip_empty=True)
    dups = lv.any(lv.take(arrays["dup"]))
    final = []
    for k in range(lv.n_groups):
        parts = [note_vals[k]] if note_vals[k] else []
        if dups[k]:
            parts.append("the same job entry appears more than once (one output ingested twice?)")
        parts.extend(notes[k])
        final.append("; ".join(parts))
    return np.array(final, dtype=object)


#: the metric columns whose NaN needs a note, and the pattern of a note naming them (schema's rule)
_NOTED = {c.name: schema.note_pattern(c) for c in schema.RUN_TOTALS
          if c.valid is not None and c.valid.metric and not c.valid.optional and c.dtype == "float64"}


def _codes(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Group number of each (outer, inner) pair of codes, numbered in order of first appearance."""
    width = int(inner.max()) + 1 if len(inner) else 1
    return pd.factorize(outer * width + inner)[0].astype(np.int64)


def _repeated(codes: np.ndarray) -> np.ndarray:
    """Per row: True when an earlier row has the same code (``DataFrame.duplicated`` of the keys coded)."""
    out = np.ones(len(codes), dtype=bool)
    out[np.unique(codes, return_index=True)[1]] = False
    return out


def _distinct(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Per row: how many distinct ``inner`` codes its ``outer`` group holds (``inner`` nested in ``outer``)."""
    first = ~pd.Series(inner).duplicated().to_numpy()
    return np.bincount(outer[first], minlength=int(outer.max()) + 1)[outer]


def run_totals(runs: pd.DataFrame, histograms: pd.DataFrame | None = None, *,
               _blocks: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """The run-level table of ``runs``: fio's rule for combining jobs, directions and hosts.

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs`` rows (schema :data:`storagebench.schema.RUNS`; at least ``run_id`` and ``iops``:
        missing columns are unknown, as the schema says -- a frame without ``job_index`` has one job
        per row, without ``direction`` one ``mixed`` direction). Study factor columns are kept where
        they are constant within a row's group.
    histograms : pandas.DataFrame, optional
        ``histograms`` rows of the same runs (json+ bins). A combined row's ``clat_p*_ns`` come from
        its rows' merged bins; without them (or when a row with I/O has none) they are NaN, with a
        ``note``. A single row keeps its own percentiles.

    Returns
    -------
    pandas.DataFrame
        The ``run_totals`` table (:data:`storagebench.schema.RUN_TOTALS`, in schema dtypes, then the
        study factor columns): per run, one row per host x direction, a ``mixed`` row per host with
        several directions, and ``all hosts`` rows for a run on several hosts. Units: ``iops`` 1/s,
        ``bw_bytes_per_s`` bytes/s, ``runtime_s`` s, latencies ns, CPU %. Sorted by run (first
        appearance), host (``all hosts`` last) and direction (read, write, trim, mixed).

    Raises
    ------
    SchemaError
        ``runs`` lacks ``run_id`` or ``iops``, a column cannot be cast to its schema dtype, or
        ``histograms`` lacks a key column.

    Other Parameters
    ----------------
    _blocks : (array, array), optional
        Internal (ingest): the ``runs`` row of each block of consecutive ``histograms`` rows and the
        blocks' lengths, which ingest knows; otherwise they are found from the key columns.

    Notes
    -----
    fio ``stat.c``: ``sum_thread_stats``, ``sum_stat``, ``calc_lat``, ``calc_clat_percentiles``,
    ``add_ddir_status_json``; ``client.c``: ``handle_ts`` ("All clients"). See the module docstring.
    """
    df = _prepared(runs)
    extra = [c for c in df.columns if c not in _CONSUMED]
    n = len(df)
    if n == 0:
        out = schema.empty("run_totals")
        for c in extra:
            out[c] = pd.Series(dtype=df[c].dtype)
        return out
    iops = df["iops"].to_numpy(dtype=float)
    rt = df["runtime_s"].to_numpy(dtype=float)
    tios = df["total_ios"].to_numpy(dtype=np.int64)
    iob = df["io_bytes"].to_numpy(dtype=np.int64)
    bw = df["bw_bytes_per_s"].to_numpy(dtype=float)
    rt_ok = np.isfinite(rt) & (rt > 0)
    with np.errstate(invalid="ignore"):
        ios_est = np.where(tios >= 0, tios.astype(float), np.where(rt_ok, iops * rt, np.nan))
        bytes_est = np.where(iob >= 0, iob.astype(float), np.where(rt_ok, bw * rt, np.nan))
    factorized = {k: pd.factorize(df[k], use_na_sentinel=False) for k in _KEYS}
    key = {k: codes.astype(np.int64) for k, (codes, _) in factorized.items()}
    run_code = key["run_id"]
    host_code = _codes(run_code, key["host"])
    section_id = _codes(host_code, key["job"])
    job_id = _codes(section_id, key["job_index"])
    job_runtime = np.full(int(job_id.max()) + 1, np.nan)
    np.fmax.at(job_runtime, job_id, rt)
    job_runtime = job_runtime[job_id]
    depth = df["iodepth"].to_numpy(dtype=float)
    nj = df["numjobs"].to_numpy(dtype=float)
    oio = np.where((depth > 0) & (nj > 0), depth * nj, np.nan)
    arrays = {
        # every metric column by name, in its dtype (bool and int ones as they are)
        **{c.name: df[c.name].to_numpy(dtype=float if c.dtype == "float64" else c.dtype) for c in _METRICS},
        "iops": iops, "runtime_s": rt, "bw_bytes_per_s": bw, "total_ios": tios, "io_bytes": iob,
        # the counts behind the rates: as reported, else rate x runtime
        "est:total_ios": ios_est, "est:io_bytes": bytes_est,
        "job_id": job_id, "job_runtime": np.nan_to_num(job_runtime), "section_id": section_id, "oio": oio,
        "dup": _repeated(_codes(job_id, key["direction"])),  # the same job entry key again
    }
    l1 = _codes(host_code, key["direction"])
    l3 = _codes(run_code, key["direction"])
    dirs_per_host = _distinct(host_code, l1)
    hosts_per_run = _distinct(run_code, host_code)
    dirs_per_run = _distinct(run_code, l3)
    rows = np.arange(n, dtype=np.int64)
    first_row = np.full(int(run_code.max()) + 1, n, dtype=np.int64)
    first_row[run_code[::-1]] = rows[::-1]
    host_rank = host_code - host_code[first_row[run_code]]  # a run's hosts number from its first row's host
    other = len(_DIR_RANK)
    ranks = [_DIR_RANK.get(d, other) if isinstance(d, str) else other for d in factorized["direction"][1]]
    dir_rank = np.array(ranks, dtype=np.int64)[key["direction"]]

    hist = None
    if histograms is not None:
        miss = [c for c in (*_KEYS, "bin_ns", "count") if c not in histograms.columns]
        if miss:
            raise SchemaError(f"histograms is missing columns {miss}")
        combines = int(l1.max()) + 1 < n or bool((hosts_per_run > 1).any() or (dirs_per_host > 1).any())
        # only combined rows need bins: a table of one-row groups never reads them
        hist = _Bins(df, histograms, _blocks) if combines else _Bins.none(n)
    parts = []
    # (rows in the level, their group codes, host label, direction label, all_hosts, all_directions)
    levels = [
        (rows, l1, None, None, hosts_per_run == 1, dirs_per_host == 1, False, False),
        (rows[dirs_per_host > 1], host_code[dirs_per_host > 1], None, ALL_DIRECTIONS, hosts_per_run == 1, None,
         False, True),
        (rows[hosts_per_run > 1], l3[hosts_per_run > 1], ALL_HOSTS, None, None, dirs_per_run == 1, True, False),
        (rows[(hosts_per_run > 1) & (dirs_per_run > 1)], run_code[(hosts_per_run > 1) & (dirs_per_run > 1)],
         ALL_HOSTS, ALL_DIRECTIONS, None, None, True, True),
    ]
    run_ids = df["run_id"].to_numpy(dtype=object, na_value=None)
    host_names = df["host"].to_numpy(dtype=object, na_value=None)
    dir_names = df["direction"].to_numpy(dtype=object, na_value=None)
    for lrows, lcodes, host, direction, all_h, all_d, cluster, mixed in levels:
        if not len(lrows):
            continue
        lv = _Level(lrows, lcodes)
        cols = _combine(df, lv, arrays, hist, extra)
        f = lv.first
        cols["run_id"] = run_ids[f]
        cols["host"] = host_names[f] if host is None else np.full(lv.n_groups, host, object)
        cols["direction"] = dir_names[f] if direction is None else np.full(lv.n_groups, direction, object)
        cols["all_hosts"] = np.ones(lv.n_groups, bool) if all_h is None else all_h[f]
        cols["all_directions"] = np.ones(lv.n_groups, bool) if all_d is None else all_d[f]
        cols["n_hosts"] = lv.add(lv.first_of(lv.take(host_code)).astype(np.int64))
        cols["n_directions"] = lv.add(lv.first_of(lv.take(key["direction"])).astype(np.int64))
        cols["_k_run"] = run_code[f]
        cols["_k_host"] = np.full(lv.n_groups, np.iinfo(np.int64).max) if cluster else host_rank[f]
        cols["_k_dir"] = np.full(lv.n_groups, _DIR_RANK[ALL_DIRECTIONS]) if mixed else dir_rank[f]
        parts.append(cols)
    return _frame(parts, extra)


def _frame(parts: list[dict[str, Any]], extra: Sequence[str]) -> pd.DataFrame:
    """The run-level table from the columns of each level: sorted by run, host (``all hosts`` last) and
    direction, each column built once in its schema dtype."""
    def cat(name: str) -> np.ndarray:
        return parts[0][name] if len(parts) == 1 else np.concatenate([p[name] for p in parts])

    order = np.lexsort((cat("_k_dir"), cat("_k_host"), cat("_k_run")))
    if np.array_equal(order, np.arange(len(order))):
        order = None
    data: dict[str, Any] = {}
    for c in RUN_TOTALS:
        v = cat(c.name)
        if order is not None:
            v = v[order]
        if c.dtype == "string":
            data[c.name] = pd.array(v, dtype="string")
        elif c.dtype.startswith("datetime64"):
            data[c.name] = pd.to_datetime(np.asarray(v, dtype=np.int64).view("datetime64[ns]"), utc=True) \
                .astype(c.dtype)
        else:
            data[c.name] = np.asarray(v, dtype=c.dtype)
    out = pd.DataFrame(data, copy=False)
    for c in extra:
        v = pd.concat([p[c] for p in parts], ignore_index=True) if len(parts) > 1 else parts[0][c]
        out[c] = (v.take(order) if order is not None else v).reset_index(drop=True)
    return out


# ---- selecting -----------------------------------------------------------------------------------


def select(totals: pd.DataFrame, *, hosts: str = "all", direction: str | None = None) -> pd.DataFrame:
    """Rows of a run-level table at one level.

    Parameters
    ----------
    totals : pandas.DataFrame
        A :func:`run_totals` table.
    hosts : {"all", "each"}
        ``"all"``: the rows covering every host of their run (the cluster total; a one-host run's own
        rows); ``"each"``: one row per host (a run on one host: its rows again).
    direction : str or None
        ``None``: the rows covering every direction (the run's total: IOPS summed over directions);
        ``"each"``: one row per direction as reported; ``"read"``/``"write"``/``"trim"``/``"mixed"``:
        that direction.

    Returns
    -------
    pandas.DataFrame
        The selected rows (one per run with the defaults), index reset.

    Raises
    ------
    SchemaError
        ``totals`` is not a run-level table, or ``hosts``/``direction`` is not an allowed value.
    """
    if not is_run_totals(totals):
        raise SchemaError("select needs a run-level table (storagebench.runlevel.run_totals): it has no "
                          "all_hosts/all_directions columns")
    if hosts == "all":
        keep = totals["all_hosts"].to_numpy(dtype=bool, copy=True)
    elif hosts == "each":
        keep = (totals["host"] != ALL_HOSTS).to_numpy(dtype=bool, copy=True)
    else:
        raise SchemaError(f"hosts must be one of ['all', 'each'], got {hosts!r}")
    if direction is None:
        keep &= totals["all_directions"].to_numpy(dtype=bool)
    elif direction == "each":
        keep &= (totals["n_directions"] == 1).to_numpy(dtype=bool)
    elif direction in (*DIRECTIONS, ALL_DIRECTIONS):
        keep &= (totals["direction"] == direction).to_numpy(dtype=bool)
    else:
        raise SchemaError(f"direction must be one of {[None, 'each', *DIRECTIONS, ALL_DIRECTIONS]}, "
                          f"got {direction!r}")
    return totals[keep].reset_index(drop=True)


def per_run(table: pd.DataFrame, histograms: pd.DataFrame | None = None, *, direction: str | None = None,
            completed: bool = False) -> pd.DataFrame:
    """One row per run: every host (and every direction, or one) combined with fio's rule.

    Parameters
    ----------
    table : pandas.DataFrame
        A ``runs`` table (combined here by :func:`run_totals`) or a run-level table (read from
        ``tidy/run_totals.parquet``: selected, nothing recomputed). A ``runs`` table without
        ``run_id`` has one run per row (a published table).
    histograms : pandas.DataFrame, optional
        With a ``runs`` table: its json+ bins, for the percentiles of combined rows.
    direction : str or None
        ``None``: all directions (a ``randrw`` run's total); ``"read"``/``"write"``/``"trim"``/``"mixed"``:
        that direction only (runs without it have no row).
    completed : bool
        Leave out runs with a job in error (``error != 0``) or killed (``partial``).

    Returns
    -------
    pandas.DataFrame
        The run-level rows (columns of :data:`storagebench.schema.RUN_TOTALS` plus study factors).

    Raises
    ------
    SchemaError
        As :func:`run_totals` and :func:`select`.
    """
    if is_run_totals(table):
        totals = table
    else:
        if "run_id" not in table.columns:
            table = table.assign(run_id=[f"row{i}" for i in range(len(table))])
        totals = run_totals(table, histograms)
    out = select(totals, hosts="all", direction=direction)
    if completed:
        ok = (out["error"] == 0) & (out["n_jobs_error"] == 0) & ~out["partial"].astype(bool)
        out = out[ok.to_numpy(dtype=bool)].reset_index(drop=True)
    return out


def read_run_totals(tidy_dir: str | Any) -> pd.DataFrame:
    """``tidy/run_totals.parquet`` of a study, checked (:func:`storagebench.schema.read_table`).

    A tidy directory of format 0 (written before the run-level table existed) has none: it is
    migrated by combining its ``runs.parquet`` and ``histograms.parquet`` now.

    Parameters
    ----------
    tidy_dir : path
        ``results/<study>/tidy``.

    Returns
    -------
    pandas.DataFrame
        The run-level table.

    Raises
    ------
    SchemaError
        No ``run_totals.parquet`` nor ``runs.parquet`` in ``tidy_dir``, or a file of a newer format.
    """
    d = Path(tidy_dir)
    path = d / "run_totals.parquet"
    if path.exists():
        return schema.read_table(path, "run_totals")
    runs_p = d / "runs.parquet"
    if not runs_p.exists():
        raise SchemaError(f"{d}: no run_totals.parquet or runs.parquet (ingest the study first)")
    runs = schema.read_table(runs_p, "runs")
    hist_p = d / "histograms.parquet"
    hist = schema.read_table(hist_p, "histograms") if hist_p.exists() else None
    out = run_totals(runs, hist)
    out.attrs["storagebench"] = {**runs.attrs.get("storagebench", {}), "table": "run_totals",
                                 "migrated_from": "runs.parquet"}
    return out

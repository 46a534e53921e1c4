"""How the run-level table combines rows (private part of :mod:`storagebench.runlevel`): the inputs read from
``runs`` and ``histograms``, a level's groups, and each column's schema combine rule (fio's ``sum_thread_stats``;
see :mod:`storagebench.runlevel`'s docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from ._histogram import grid_index, grouped_percentiles
from .errors import SchemaError
from .schema import ALL_DIRECTIONS, DIRECTIONS, PERCENTILES, RUN_TOTALS

_KEYS = ("run_id", "host", "job", "job_index", "direction")
_RUN_COLS = {c.name: c for c in schema.RUNS}
_OUT_NAMES = tuple(c.name for c in RUN_TOTALS)
#: columns of runs consumed by the combination (everything else is a study factor, kept when constant)
_CONSUMED = frozenset(_RUN_COLS) | {c.name for c in RUN_TOTALS}
_DIR_RANK = {d: i for i, d in enumerate((*DIRECTIONS, ALL_DIRECTIONS))}


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
    pct = grouped_percentiles(gi, bins, counts, len(groups), ps, bucket_idx=idx, _groups_scratch=True)
    out[groups] = pct
    return out


#: The ``runs`` columns by role, each with its combine rule (:data:`storagebench.schema.COMBINE_RULES`):
#: :func:`_combine` applies the rule of every column, so a new column is combined as its schema entry says.
_METRICS = schema.columns("runs", role="metric")
_CARRIED = tuple(c for c in schema.RUNS if c.role != "metric" and c.combine is not None)
#: the json+ percentile of each ``"bins"`` column (``clat_p99_9_ns`` -> 99.9)
_BIN_PS = {c.name: float(c.name[len("clat_p"):-len("_ns")].replace("_", "."))
           for c in _METRICS if c.combine == "bins"}


@dataclass
class _Rows:
    """What the combine rules of one level share: the rows' arrays, weights and flags, and the notes gathered
    per group (filled in as the rules run)."""

    df: pd.DataFrame
    lv: _Level
    arrays: dict[str, np.ndarray]
    hist: _Bins | None
    single: np.ndarray  # per group: one row only (it keeps its own values)
    w: np.ndarray  # per row of the level: its weight, its completed I/Os (fio's sample count), else its IOPS
    used: np.ndarray  # per row of the level: w > 0
    counts_ok: np.ndarray  # per group: every row's I/O count known and a runtime > 0
    same_rt: np.ndarray  # per group: one runtime for every row
    rt_max: np.ndarray  # per group: the longest runtime
    job_first: np.ndarray  # per row of the level: the first row of its job
    notes: list[list[str]] = field(default_factory=list)
    means: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    pct: dict[str, np.ndarray] = field(default_factory=dict)


def _rows(df: pd.DataFrame, lv: _Level, arrays: dict[str, np.ndarray], hist: _Bins | None) -> _Rows:
    """The weights and flags of the rows of ``lv`` that every combine rule reads."""
    iops = lv.take(arrays["iops"])
    rt = lv.take(arrays["runtime_s"])
    ios = lv.take(arrays["est:total_ios"])
    rt_max = lv.fmax(rt)
    counts_ok = ~lv.any(np.isnan(ios)) & (rt_max > 0)
    # the weight of a row: its completed I/Os (fio's sample count), else its IOPS (a common runtime assumed)
    w = np.where(counts_ok[lv.gid], np.nan_to_num(ios), np.nan_to_num(iops))
    # one runtime for every row (the directions of one job; DiskSPD's one test time): I/Os / runtime is
    # then the sum of the rows' own IOPS, which keeps the tool's precision (DiskSPD prints its time
    # rounded to 10 ms, its IOPS from the exact one)
    return _Rows(df, lv, arrays, hist, single=lv.size == 1, w=w, used=w > 0, counts_ok=counts_ok,
                 same_rt=lv.fmin(rt) == rt_max, rt_max=rt_max, job_first=lv.first_of(lv.take(arrays["job_id"])),
                 notes=[[] for _ in range(lv.n_groups)])


def _combine(df: pd.DataFrame, lv: _Level, arrays: dict[str, np.ndarray], hist: _Bins | None,
             extra: Sequence[str]) -> dict[str, Any]:
    """The combined columns of every group of ``lv``: each ``runs`` column by its schema combine rule
    (see the module docstring), and the run-level table's own columns."""
    r = _rows(df, lv, arrays, hist)
    out: dict[str, Any] = {"combined_by": np.where(r.single, "as reported",
                                                   np.where(r.counts_ok, "I/O counts", "IOPS"))}
    for c in _METRICS:
        combined = _metric(r, c, out)
        if combined is not None:
            out[c.name] = np.where(r.single, arrays[c.name][lv.first], combined)
    out["n_jobs"] = lv.add(r.job_first.astype(np.int64))
    out["n_rows"] = lv.size
    # queue: iodepth x numjobs per distinct job section (host x job)
    sec_first = lv.first_of(lv.take(arrays["section_id"]))
    oio = lv.take(arrays["oio"])
    out["outstanding_ios"] = np.where(lv.any(sec_first & np.isnan(oio)), np.nan,
                                      lv.add(np.where(sec_first, np.nan_to_num(oio), 0.0)))
    for c in _CARRIED:  # identity, factors and provenance
        out[c.name] = _carried(r, c)
    _note_nans(out, r.single)
    for c in extra:
        codes, uniques = pd.factorize(df[c], use_na_sentinel=True)
        g = lv.take(codes)
        const = (lv.imin(g) == lv.imax(g)) & (lv.imin(g) >= 0)
        vals = df[c].iloc[lv.first].reset_index(drop=True)
        out[c] = vals.where(pd.Series(const)) if not const.all() else vals
    return out


def _metric(r: _Rows, c: Any, out: dict[str, Any]) -> np.ndarray | None:
    """The combined value per group of the metric column ``c`` by its rule; ``None`` when the rule wrote its
    columns into ``out`` itself (a single row's own value is then not kept)."""
    lv, name, rule = r.lv, c.name, c.combine
    own = r.arrays[name]
    if rule == "rate":  # the summed count over the longest runtime (fio add_ddir_status_json)
        est = lv.take(r.arrays[f"est:{c.of}"])
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(r.counts_ok & ~r.same_rt,
                            np.where(~lv.any(np.isnan(est)), lv.add(np.nan_to_num(est)) /
                                     np.where(r.rt_max > 0, r.rt_max, 1.0), np.nan),
                            lv.add(lv.take(own)))
    if rule == "sum":
        raw = lv.take(own)
        out[name] = np.where(lv.all(raw >= 0), lv.add(np.where(raw >= 0, raw, 0)), -1)
        return None
    if rule == "longest":
        return lv.fmax(lv.take(own))
    if rule == "mean":  # sample-weighted (fio sum_stat)
        r.means[name] = _weighted(lv, lv.take(own), r.w, r.used)
        return r.means[name][0]
    if rule == "sd":  # pooled sums of squares (fio sum_stat)
        return _pooled_sd(r, c, own)
    if rule == "mean_sampled":  # fio prints 0 with N = 0 (sync ioengines): no samples
        v = lv.take(own)
        s_used = r.used & ~(v == 0.0)
        s_mean, _ = _weighted(lv, v, r.w, s_used)
        no_samples = ~lv.any(s_used) & lv.all(~r.used | (v == 0.0))
        return np.where(no_samples, 0.0, s_mean)
    if rule in ("min", "max"):  # over the rows that did I/O
        v = lv.take(own)
        combined = (lv.fmin if rule == "min" else lv.fmax)(np.where(r.used, v, np.nan))
        return np.where(lv.any(r.used & np.isnan(v)), np.nan, combined)
    if rule == "bins":  # the row's own, or from merged bins (never averaged)
        if not r.pct:
            r.pct = _bin_percentiles(r.df, lv, r.hist, r.single, r.used, r.notes)
        return r.pct[name]
    if rule == "own":  # a statistic that needs its samples: never combined
        has = lv.any(~np.isnan(lv.take(own)))
        for k in np.flatnonzero(~r.single & has):
            r.notes[k].append(f"{name}: NaN, the combined rows' values cannot be combined without their "
                              "samples (never averaged)")
        return np.full(lv.n_groups, np.nan)
    if rule == "job_runtime_mean":  # runtime-weighted mean over the distinct jobs
        return _job_runtime_mean(r, own)
    if rule == "first_error":  # fio's group error: the first non-zero job error
        _first_error(r, name, own, out)
        return None
    if rule == "any":
        out[name] = lv.any(lv.take(own))
        return None
    raise SchemaError(f"runs.{name}: no run-level rule {rule!r}")  # pragma: no cover - Column checks the rules


def _pooled_sd(r: _Rows, c: Any, own: np.ndarray) -> np.ndarray:
    """The ``"sd"`` rule: the standard deviation of the pooled rows, from their sums of squares (fio sum_stat)."""
    lv, w, used = r.lv, r.w, r.used
    m = lv.take(r.arrays[c.of])
    mean, mean_b = r.means.get(c.of) or _weighted(lv, m, w, used)
    sd = lv.take(own)
    bad_sd = lv.any(used & np.isnan(sd))
    within_w = np.where(r.counts_ok[lv.gid], np.maximum(w - 1.0, 0.0), w)  # S_i = sd_i**2 (n_i - 1)
    within = lv.add(np.where(used, np.nan_to_num(sd) ** 2 * within_w, 0.0))
    between = lv.add(np.where(used, w * (np.nan_to_num(m) - np.nan_to_num(mean_b)) ** 2, 0.0))
    nsum = lv.add(np.where(used, w, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = np.where(r.counts_ok, nsum - 1.0, nsum)
        var = np.where(denom > 0, (within + between) / np.where(denom > 0, denom, 1.0), 0.0)
    return np.where(bad_sd | np.isnan(mean), np.nan, np.sqrt(var))


def _job_runtime_mean(r: _Rows, own: np.ndarray) -> np.ndarray:
    """The ``"job_runtime_mean"`` rule: the runtime-weighted mean over the distinct jobs."""
    lv, job_first = r.lv, r.job_first
    jw = lv.take(r.arrays["job_runtime"])
    v = lv.take(own)
    use = job_first & (jw > 0)
    mean, _ = _weighted(lv, v, jw, use)
    plain = np.where(lv.any(job_first & np.isnan(v)), np.nan,
                     lv.add(np.where(job_first, np.nan_to_num(v), 0.0)) / np.maximum(lv.add(job_first), 1))
    return np.where(lv.any(use), mean, plain)


def _first_error(r: _Rows, name: str, own: np.ndarray, out: dict[str, Any]) -> None:
    """The ``"first_error"`` rule (fio's group error: the first non-zero job error), and ``n_jobs_error``."""
    lv = r.lv
    err = lv.take(own)
    out["n_jobs_error"] = lv.add((r.job_first & (err != 0)).astype(np.int64))
    pos = np.where(err != 0, np.arange(len(err)), len(err))
    at = lv.imin(pos) if lv.n_groups else pos[:0]
    out[name] = np.where(at < len(err), err[np.minimum(at, max(len(err) - 1, 0))], 0) if len(err) else at


def _carried(r: _Rows, c: Any) -> np.ndarray:
    """An identity, factor or provenance column of every group, by its combine rule."""
    lv, df, name, rule = r.lv, r.df, c.name, c.combine
    if rule == "same":
        return _const_number(lv, df[name].to_numpy(dtype=float), float(c.unknown)).astype(c.dtype)
    if rule == "join":
        return _joined(lv, df[name])
    if rule == "all":
        return lv.all(lv.take(df[name].to_numpy(dtype=bool)))
    if rule == "first":
        return df[name].to_numpy()[lv.first]
    if rule in ("earliest", "latest"):  # of a time: the latest is the earliest of the negated times
        times = df[name]
        ns = times.to_numpy(dtype="datetime64[ns]").view(np.int64)
        sign = 1 if rule == "earliest" else -1
        nat = times.isna().to_numpy()
        big = np.iinfo(np.int64).max
        smin = lv.imin(lv.take(np.where(nat, big, sign * ns)))
        return np.where(smin == big, np.iinfo(np.int64).min, sign * smin)  # ns since the epoch; NaT: int64 min
    if rule == "notes":
        return _notes(lv, df[name], r.arrays, r.notes)
    raise SchemaError(f"runs.{name}: no run-level rule {rule!r}")  # pragma: no cover - Column checks the rules


def _note_nans(out: dict[str, Any], single: np.ndarray) -> None:
    """Every NaN says why (the table gate's rule): a combined value is NaN because some row's input was."""
    final = out["note"]
    for c in _NOTED:
        v = np.asarray(out[c], dtype=np.float64)
        for k in np.flatnonzero(np.isnan(v) & ~np.asarray(single, dtype=bool)):
            if not _NOTED[c](final[k]):
                extra_note = f"{c}: NaN, a combined row lacks a value it needs"
                final[k] = f"{final[k]}; {extra_note}" if final[k] else extra_note


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
_NOTED = {c.name: schema.NoteNames(c) for c in schema.RUN_TOTALS
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



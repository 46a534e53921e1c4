"""fio json+ completion-latency histograms: bin values, fio's percentile rule, merging.

fio keeps every completion latency in a log-linear histogram (``io_u_plat``, see fio's ``stat.h``:
``FIO_IO_U_PLAT_BITS = 6``, ``FIO_IO_U_PLAT_VAL = 1 << 6``, ``FIO_IO_U_PLAT_GROUP_NR = 29``).
``--output-format=json+`` prints the non-empty buckets as ``clat_ns.bins``: ``{"<bin value ns>": count}``,
where the key is ``plat_idx_to_val(idx)`` of the bucket (fio ``stat.c``, ``add_ddir_status_json``).

Percentiles that span several jobs, clients or runs are computed here from *merged bins*
(:func:`merge_histograms` then :func:`percentiles_from_bins`), never by averaging fio's percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from .errors import SchemaError, StatsError

__all__ = [
    "plat_idx_to_val",
    "plat_val_to_idx",
    "plat_idx_to_vals",
    "plat_vals_to_idx",
    "grid_index",
    "percentiles_from_bins",
    "grouped_percentiles",
    "merge_histograms",
]

#: fio ``stat.h``: bits of precision kept per power-of-two group (``FIO_IO_U_PLAT_BITS``).
FIO_IO_U_PLAT_BITS = 6
#: fio ``stat.h``: number of power-of-two groups (``FIO_IO_U_PLAT_GROUP_NR``).
FIO_IO_U_PLAT_GROUP_NR = 29
#: fio ``stat.h``: number of buckets (``FIO_IO_U_PLAT_NR`` = 1856 in fio 3.x).
FIO_IO_U_PLAT_NR = FIO_IO_U_PLAT_GROUP_NR << FIO_IO_U_PLAT_BITS
#: groups summed into one dense bucket array at a time (x 1856 int64: 30 MB at most)
_DENSE_GROUPS = 2048
#: values per step of :func:`grid_index` (512 KiB of int64)
_STEP = 1 << 16
#: counts beyond which a group is summed with Python ints (:func:`_exact_percentiles`): the float64 total that
#: decides it is exact below 2**53, and no int64 running sum over every group can wrap under it
_EXACT_FLOAT_SUM = 2.0**53


def plat_idx_to_val(idx: int, plat_bits: int = FIO_IO_U_PLAT_BITS, group_nr: int = FIO_IO_U_PLAT_GROUP_NR) -> int:
    """Value (ns) that fio reports for histogram bucket ``idx``.

    A port of ``plat_idx_to_val()`` in fio's ``stat.c``: the first ``2 * 2**plat_bits`` buckets
    are exact; above that, bucket ``idx`` covers a range of width ``2**error_bits`` and fio
    reports the middle of the range, truncated to an integer.

    Parameters
    ----------
    idx : int
        Bucket index, ``0 <= idx < group_nr * 2**plat_bits``.
    plat_bits : int
        fio ``FIO_IO_U_PLAT_BITS`` (6 in every fio release since 2.0).
    group_nr : int
        fio ``FIO_IO_U_PLAT_GROUP_NR`` (29 in fio 3.x, i.e. values up to ~17 s in ns).

    Returns
    -------
    int
        Bin value in ns (the key fio prints in json+ ``clat_ns.bins``).

    Raises
    ------
    SchemaError
        ``idx`` outside the histogram.
    """
    plat_val = 1 << plat_bits
    nr = group_nr * plat_val
    if not 0 <= int(idx) < nr:
        raise SchemaError(f"idx must be in [0, {nr}), got {idx!r}")
    idx = int(idx)
    if idx < (plat_val << 1):
        return idx
    error_bits = (idx >> plat_bits) - 1
    base = 1 << (error_bits + plat_bits)
    k = idx % plat_val
    # fio: base + ((k + 0.5) * (1 << error_bits)) in double, converted to unsigned long long
    return base + int((k + 0.5) * (1 << error_bits))


def plat_val_to_idx(val: int, plat_bits: int = FIO_IO_U_PLAT_BITS, group_nr: int = FIO_IO_U_PLAT_GROUP_NR) -> int:
    """Bucket index of a latency ``val`` (ns): a port of ``plat_val_to_idx()`` in fio's ``stat.c``.

    Parameters
    ----------
    val : int
        Latency in ns (>= 0).
    plat_bits, group_nr : int
        As in :func:`plat_idx_to_val`.

    Returns
    -------
    int
        The bucket index; values beyond the last bucket go to the last one, as in fio.
    """
    val = int(val)
    if val < 0:
        raise SchemaError(f"val must be >= 0 ns, got {val}")
    plat_val = 1 << plat_bits
    nr = group_nr * plat_val
    msb = val.bit_length() - 1 if val else 0
    if msb <= plat_bits:
        return val
    error_bits = msb - plat_bits
    base = (error_bits + 1) << plat_bits
    offset = (plat_val - 1) & (val >> error_bits)
    return min(base + offset, nr - 1)


def plat_idx_to_vals(idx: np.ndarray) -> np.ndarray:
    """:func:`plat_idx_to_val` of an int64 array of bucket indices in ``[0, FIO_IO_U_PLAT_NR)`` (not checked)."""
    idx = np.asarray(idx, dtype=np.int64)
    bits = FIO_IO_U_PLAT_BITS
    # base + int((k + 0.5) * 2**err) = (2**bits + k) << err  +  2**err >> 1, and idx itself below 2**bits
    hi = idx >> bits
    err = hi - 1
    np.maximum(err, 0, out=err)
    np.minimum(hi, 1, out=hi)
    hi <<= bits
    hi |= idx & ((1 << bits) - 1)
    hi <<= err
    half = np.left_shift(np.int64(1), err)
    half >>= 1
    hi += half
    return hi


def plat_vals_to_idx(val: np.ndarray) -> np.ndarray:
    """:func:`plat_val_to_idx` of an int64 array of latencies in ``[0, 2**53)`` ns (not checked): the bucket
    of each, values beyond the last bucket in the last one, as in fio."""
    val = np.asarray(val, dtype=np.int64)
    bits = FIO_IO_U_PLAT_BITS
    # error_bits = max(msb - bits, 0), msb from the float64 exponent (exact below 2**53; 0 -> -1023);
    # fio's ((error_bits + 1) << bits) + ((val >> error_bits) & (2**bits - 1)) is (error_bits << bits) +
    # (val >> error_bits), since val >> error_bits has its top bit at ``bits`` (or is val, below 2**bits)
    err = val.astype(np.float64).view(np.int64)
    err >>= 52
    err -= 1023 + bits
    np.maximum(err, 0, out=err)
    idx = val >> err
    err <<= bits
    idx += err
    np.minimum(idx, FIO_IO_U_PLAT_NR - 1, out=idx)
    return idx


def grid_index(bin_ns: np.ndarray) -> np.ndarray | None:
    """The fio bucket index of every bin, or ``None`` when some bin is not a value fio prints.

    A fio json+ bin is ``plat_idx_to_val(idx)`` of its bucket (:func:`plat_idx_to_val`); DiskSPD's and
    Iometer's bins, or edited ones, may be anything else.

    Parameters
    ----------
    bin_ns : array of int
        Bin values (ns).

    Returns
    -------
    numpy.ndarray or None
        int64 bucket indices (:func:`plat_vals_to_idx`), when every value is in ``[0, 2**53)`` and equals
        :func:`plat_idx_to_vals` of its index; else ``None``.

    Notes
    -----
    With ``error_bits`` as in :func:`plat_vals_to_idx`, a bucket below the last one prints the middle of
    its range: the value with its low ``error_bits`` bits equal to ``2**error_bits >> 1``
    (``plat_idx_to_val``), so that is the test, without mapping every index back to its value.
    """
    b = np.asarray(bin_ns, dtype=np.int64)
    if not len(b):
        return b.copy()
    if b.min() < 0 or b.max() >= 2**53:
        return None
    out = np.empty_like(b)
    for lo in range(0, len(b), _STEP):  # in steps: the temporaries are reused and stay in the CPU cache
        part = b[lo:lo + _STEP]
        err = part.astype(np.float64).view(np.int64)
        err >>= 52
        err -= 1023 + FIO_IO_U_PLAT_BITS
        np.maximum(err, 0, out=err)
        idx = np.right_shift(part, err, out=out[lo:lo + _STEP])
        width = np.left_shift(np.int64(1), err)  # 2**error_bits
        err <<= FIO_IO_U_PLAT_BITS
        idx += err
        half = width >> 1
        width -= 1
        width &= part
        if not np.array_equal(width, half):
            return None
    return out if out.max() < FIO_IO_U_PLAT_NR else None  # beyond the last bucket: off the grid


def _grouped_arguments(groups, bin_ns, counts, percentiles, precision: str) -> tuple:
    """:func:`grouped_percentiles`' arguments checked: ``(groups, bins, counts)`` as int64 arrays, the
    percentiles as floats and the float type of the threshold (``StatsError`` naming what is wrong)."""
    g = np.asarray(groups, dtype=np.int64)
    b = np.asarray(bin_ns, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)
    if not (g.shape == b.shape == c.shape) or g.ndim != 1:
        raise StatsError(f"groups, bin_ns and counts must be 1-d of one length, got {g.shape}, {b.shape}, {c.shape}")
    plist = [float(p) for p in percentiles]
    bad = [p for p in plist if not 0.0 < p <= 100.0]
    if bad:
        raise StatsError(f"percentiles must be in (0, 100], got {bad}")
    if len(c) and c.min() < 0:
        raise StatsError("counts must be >= 0")
    if precision == "double":
        return g, b, c, plist, np.float64
    if precision == "long double":
        return g, b, c, plist, np.longdouble
    raise StatsError(f"precision must be one of ['double', 'long double'], got {precision!r}")


def grouped_percentiles(
    groups: np.ndarray,
    bin_ns: np.ndarray,
    counts: np.ndarray,
    n_groups: int,
    percentiles: Sequence[float],
    *,
    bucket_idx: np.ndarray | None = None,
    totals: np.ndarray | None = None,
    precision: str = "double",
    _groups_scratch: bool = False,
) -> np.ndarray:
    """fio's percentile rule on many merged histograms at once: the vectorised :func:`percentiles_from_bins`.

    The bins of each group are pooled (summed) and, as in ``calc_clat_percentiles`` (fio ``stat.c``), the
    percentile ``p`` of a group is the value of the first bucket, in increasing latency, whose running
    count reaches ``t = p / 100 * N`` (``N`` = the group's completions; ``double`` arithmetic). With
    integer counts ``sum >= t`` is ``sum >= ceil(t)``, so every group is searched at once in one int64
    running sum. fio json+ bins are bucket values (:func:`plat_idx_to_val`): they are summed into a dense
    array of 1856 buckets per group, without sorting; bins off that grid (other tools) are sorted.

    Parameters
    ----------
    groups : array of int
        Group of each bin row, ``0 .. n_groups - 1``.
    bin_ns, counts : array of int
        Bin values (ns) and completions, one per row (a group's rows need not be sorted or distinct).
    n_groups : int
        Number of groups.
    percentiles : sequence of float
        Percentiles in %, each in (0, 100].
    bucket_idx : array of int, optional
        :func:`plat_vals_to_idx` of ``bin_ns`` when the caller has it and every bin is on fio's grid.
    totals : array of int, optional
        ``N`` of each group (fio ``clat_ns.N``); default: the sum of its counts. A threshold beyond the
        last bin gives the last bin, as in fio.
    precision : {"double", "long double"}
        Arithmetic of the threshold, as in :func:`percentiles_from_bins`.
    _groups_scratch : bool
        Internal: ``groups`` is an int64 array the caller made for this call alone, which may be overwritten
        (one array of the bins' length fewer: :func:`storagebench._runcombine._percentiles`).

    Returns
    -------
    numpy.ndarray
        ``(n_groups, len(percentiles))`` values in ns (float), NaN for a group without completions or whose
        counts add up past ``2**63 - 1`` (an edited file: ingest notes it).

    Raises
    ------
    StatsError
        A percentile outside (0, 100], negative counts, or arrays of different lengths.
    """
    g, b, c, plist, ftype = _grouped_arguments(groups, bin_ns, counts, percentiles, precision)

    def need(base: np.ndarray, total: np.ndarray, rows: np.ndarray, p: float) -> np.ndarray:
        n = total if totals is None else np.asarray(totals, dtype=np.int64)[rows]
        t = ftype(p) / ftype(100.0) * n.astype(ftype)
        return base + np.ceil(t).astype(np.int64)

    out = np.full((int(n_groups), len(plist)), np.nan)
    if not len(g):
        return out
    big = c.sum(dtype=np.float64) >= _EXACT_FLOAT_SUM or (
        totals is not None and len(totals) and np.asarray(totals, dtype=np.float64).max() >= _EXACT_FLOAT_SUM)
    if big:  # an edited file: float64 sums would round, int64 running sums over all groups could wrap
        return _exact_percentiles((g, b, c), out, plist, totals, ftype)
    idx = bucket_idx if bucket_idx is not None else grid_index(b)
    if idx is not None:
        nr = FIO_IO_U_PLAT_NR
        for lo in range(0, int(n_groups), _DENSE_GROUPS):
            hi = min(lo + _DENSE_GROUPS, int(n_groups))
            if n_groups > _DENSE_GROUPS:
                part = (g >= lo) & (g < hi)
                key = (g[part] - lo) * nr + idx[part]
            else:
                part = slice(None)
                key = g if _groups_scratch and g is groups else g * nr
                if key is g:
                    key *= nr
                key += idx
            # int64 sums, exact: every count together is below 2**53 here (``big`` above), so no bucket, group or
            # running sum wraps (numpy's ufunc.at: no float64 copy of the counts, as bincount's weights make)
            flat = np.zeros((hi - lo) * nr, dtype=np.int64)
            np.add.at(flat, key, c[part])
            np.cumsum(flat, out=flat)
            start = np.arange(hi - lo, dtype=np.int64) * nr
            base = np.where(start > 0, flat[np.maximum(start - 1, 0)], 0)
            total = flat[start + nr - 1] - base
            has = total > 0
            if totals is not None:
                has &= np.asarray(totals, dtype=np.int64)[lo:hi] > 0
            rows = np.arange(lo, hi)
            for j, p in enumerate(plist):
                # the last non-empty bucket when the threshold is beyond the bins (N > their sum, as fio)
                last = np.searchsorted(flat, base + total, side="left")
                pos = np.minimum(np.searchsorted(flat, need(base, total, rows, p), side="left"), last)
                out[lo + np.flatnonzero(has), j] = plat_idx_to_vals(pos - start)[has].astype(np.float64)
        return out
    order = np.lexsort((b, g))
    g, b, c = g[order], b[order], c[order]
    cum = np.cumsum(c, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:], len(g)]
    base = np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0)
    total = cum[ends - 1] - base
    rows = g[starts]
    has = total > 0
    if totals is not None:
        has &= np.asarray(totals, dtype=np.int64)[rows] > 0
    last = np.searchsorted(cum, base + total, side="left")  # the last non-empty bin, as in the dense path
    for j, p in enumerate(plist):
        at = np.minimum(np.searchsorted(cum, need(base, total, rows, p), side="left"), last)
        out[rows[has], j] = b[at[has]].astype(np.float64)
    return out


def _exact_percentiles(bins: tuple, out, plist, totals, ftype) -> np.ndarray:
    """:func:`grouped_percentiles` one group at a time with Python's integers: for counts or totals past 2**53
    (only an edited file has them), where the vectorised sums would round or wrap. A group whose counts add up
    past ``2**63 - 1`` stays NaN. ``bins`` is ``(groups, bin values, counts)``."""
    g, b, c = bins
    order = np.lexsort((b, g))
    g, b, c = g[order], b[order], c[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(g)], strict=True):
        row = int(g[lo])
        counts = c[lo:hi].tolist()
        total = sum(counts)
        n = total if totals is None else int(np.asarray(totals)[row])
        if total <= 0 or n <= 0 or total > np.iinfo(np.int64).max:
            continue
        cum = np.cumsum(c[lo:hi])  # exact: the group's total fits int64
        last = int(np.searchsorted(cum, total, side="left"))
        for j, p in enumerate(plist):
            need = math.ceil(float(ftype(p) / ftype(100.0) * ftype(n)))  # fio's double threshold, as an int
            at = min(int(np.searchsorted(cum, min(need, total), side="left")), last)
            out[row, j] = float(b[lo + at])
    return out


def percentiles_from_bins(
    bin_ns: Sequence[int] | np.ndarray,
    counts: Sequence[int] | np.ndarray,
    percentiles: Iterable[float],
    *,
    total: int | None = None,
    precision: str = "double",
) -> dict[float, int]:
    """Latency percentiles from histogram bins with fio's own rule.

    Port of ``calc_clat_percentiles()`` in fio's ``stat.c``: walk the buckets in increasing
    latency, keep a running sum of counts, and report for percentile ``p`` the value of the first
    bucket where ``sum >= p / 100 * N``. ``N`` is the number of samples (fio ``clat_ns.N``). With the
    bins of one fio job this reproduces fio's printed ``clat_ns.percentile`` exactly (checked against
    fio 3.33 output in the tests); with merged bins it gives the percentile of the pooled completions.

    Parameters
    ----------
    bin_ns : sequence of int
        Bin values in ns (json+ ``clat_ns.bins`` keys, or the ``bin_ns`` column of ``histograms``).
    counts : sequence of int
        Completions per bin, same length.
    percentiles : iterable of float
        Percentiles in %, each in (0, 100].
    total : int, optional
        Number of samples ``N``; defaults to ``sum(counts)``.
    precision : {"double", "long double"}
        Arithmetic of the threshold ``p / 100 * N``. fio 3.33 and earlier compute it in ``double``
        (``plist[j].u.f / 100.0 * nr``); later fio casts to ``long double``. They differ only when the
        threshold lands on an integer, e.g. p=30, N=100: ``double`` gives exactly 30, x87 ``long
        double`` gives 30.000000000000000002 and so the next bucket.

    Returns
    -------
    dict
        ``{percentile: value_ns}`` in the order given.

    Raises
    ------
    StatsError
        Empty histogram, mismatched lengths, negative counts, or a percentile outside (0, 100].
    """
    b = np.asarray(bin_ns, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)
    if b.shape != c.shape or b.ndim != 1:
        raise StatsError(f"bin_ns and counts must be 1-d of the same length, got {b.shape} and {c.shape}")
    if (c < 0).any():
        raise StatsError("counts must be >= 0")
    n = int(c.sum()) if total is None else int(total)
    if n <= 0 or len(c) == 0 or c.sum() <= 0:
        raise StatsError("percentiles need a histogram with at least one completion")
    plist = [float(p) for p in percentiles]
    vals = grouped_percentiles(np.zeros(len(b), dtype=np.int64), b, c, 1, plist, totals=np.array([n]),
                               precision=precision)[0]
    return {p: int(v) for p, v in zip(plist, vals, strict=True)}


def merge_histograms(histograms: pd.DataFrame, by: Sequence[str] = ("direction",)) -> pd.DataFrame:
    """Sum bin counts of several histograms (jobs, clients, runs) into one per group.

    Parameters
    ----------
    histograms : pandas.DataFrame
        Rows of the ``histograms`` table (at least ``bin_ns``, ``count`` and the ``by`` columns).
    by : sequence of str
        Columns that identify one merged histogram, e.g. ``["run_id", "direction"]`` to pool the
        jobs and hosts of each run, or ``["direction"]`` to pool everything.

    Returns
    -------
    pandas.DataFrame
        Columns ``*by, bin_ns, count`` (``count`` int64), one row per group and bin, sorted.
        Feed each group to :func:`percentiles_from_bins`.

    Raises
    ------
    SchemaError
        A needed column is missing.
    """
    by = list(by)
    missing = [c for c in [*by, "bin_ns", "count"] if c not in histograms.columns]
    if missing:
        raise SchemaError(f"histograms is missing columns {missing}")
    out = histograms.groupby([*by, "bin_ns"], sort=True, observed=True, dropna=False)["count"].sum().reset_index()
    out["count"] = out["count"].astype("int64")
    return out

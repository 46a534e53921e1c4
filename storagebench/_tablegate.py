"""The table gate (private part of :mod:`storagebench.schema`, which re-exports its public names): the relations
declared between columns, checked once per batch by :func:`check_rows` before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._schemacols import ALL_DIRECTIONS, PERCENTILES, Column, _columns, percentile_column

# ---- the table gate: declared relations, checked once per batch before anything is written ---------


@dataclass(frozen=True)
class Ordered:
    """Known values of ``columns`` (NaN skipped) never decrease from left to right.

    ``rel`` is the allowed excess of an earlier column over a later one, as a fraction of the later
    (``a <= b * (1 + rel)``); ``why`` says where the rule comes from.
    """

    columns: tuple[str, ...]
    why: str
    rel: float = 0.0


@dataclass(frozen=True)
class Rate:
    """``rate x time == count`` within the printed precision of the tool that wrote the row.

    ``tolerance`` maps ``runs.tool`` to ``(dt, resolution, rel)``: the row passes when
    ``|rate * time - count| <= rate * dt + resolution * time + rel * count + 1`` -- ``dt`` the rounding
    of the printed time (s), ``resolution`` that of the printed rate (per s), ``rel`` a relative
    rounding of the rate, and 1 the rounding of the count itself. A tool not named gets ``"*"``.
    Rows whose count is unknown (-1) or whose rate or time is NaN are not compared.
    """

    rate: str
    time: str
    count: str
    tolerance: Mapping[str, tuple[float, float, float]]
    why: str


@dataclass(frozen=True)
class BinsWithin:
    """The ``histograms`` counts of one block (run_id, host, job, job_index, direction) add up to at
    most the ``total_ios`` of its ``runs`` row; a ``"mixed"`` block with no ``mixed`` row is compared
    with the sum over the directions of its job (Iometer's bins count reads and writes together)."""

    why: str


_PCT_COLS = tuple(percentile_column(p) for p in PERCENTILES)
#: fio reports a percentile as the middle of its json+ bin (stat.c plat_idx_to_val): with 64 bins per
#: power of two (FIO_IO_U_PLAT_BITS = 6) the middle is at most 1/128 above any value in the bin, so a
#: percentile may print above the largest latency by that much. 1/64 leaves room for ns rounding.
_BIN_REL = 1 / 64
_RATE_TOL: dict[str, tuple[float, float, float]] = {
    # fio: iops = 1000 * total_ios / runtime_ms with the very ms it prints, iops printed "%f"
    "fio": (0.0, 1e-6, 0.0),
    # DiskSPD: TestTimeSeconds / 'actual test time' printed "%.2f" (XML IOPS are I/Os over it: exact;
    # the text's 'I/O per s' is over the exact timer value, printed "%.2f")
    "diskspd": (0.005, 0.005, 0.0),
    # Iometer: rates with C++'s 6 significant digits; run time = raw ticks / 'Processor Speed', itself
    # printed with 6 digits (3.91406e+006); the ALL row adds the managers' rates, each over its own run
    # time, and runtime_s is the longest of them (they stop within milliseconds of each other)
    "iometer": (0.0, 0.0, 1e-3),
    "*": (0.005, 0.005, 1e-3),
}
_BW_TOL: dict[str, tuple[float, float, float]] = {
    # fio >= 3.4: bw_bytes = 1000 * io_bytes / runtime_ms truncated to an integer (< 1 B/s); fio < 3.4
    # prints bw in KiB/s (< 1024 B/s)
    "fio": (0.0, 1024.0, 0.0),
    # DiskSPD XML: bytes / TestTimeSeconds (exact over the printed time); text: bytes x IOPS / I/Os
    # (the IOPS's 2 decimals, relative to the I/O size)
    "diskspd": (0.005, 0.0, 1e-3),
    # Iometer: MiBps (6 significant digits) x 2**20, and the managers' run times as for IOPS
    "iometer": (0.0, 0.0, 1e-3),
    "*": (0.005, 1024.0, 1e-3),
}

_RUN_RELATIONS: tuple = (
    Ordered(("lat_min_ns", "lat_mean_ns", "lat_max_ns"), "the minimum, mean and maximum of one set of latencies"),
    Ordered(_PCT_COLS, "percentiles are monotone in p (fio's from one histogram, DiskSPD's from its sorted "
            "latencies)"),
    Ordered((_PCT_COLS[-1], "lat_max_ns"), "no completion latency percentile exceeds the largest latency "
            "(fio: clat <= lat; its percentiles are bin middles, up to 1/128 above the values in the bin)",
            rel=_BIN_REL),
    Ordered(("clat_mean_ns", "lat_max_ns"), "a mean completion latency cannot exceed the largest total latency"),
    Rate("iops", "runtime_s", "total_ios", _RATE_TOL, "IOPS are the completed I/Os over the runtime"),
    Rate("bw_bytes_per_s", "runtime_s", "io_bytes", _BW_TOL, "bandwidth is the bytes moved over the runtime"),
)

#: The relations every row of a table must satisfy beside its columns' :class:`Valid` ranges.
RELATIONS: dict[str, tuple] = {
    "runs": _RUN_RELATIONS,
    "all_clients": _RUN_RELATIONS,
    "run_totals": _RUN_RELATIONS,
    "histograms": (BinsWithin("a histogram counts completed I/Os: fio's json+ bins the clat samples (clat_ns.N: at "
                              "most total_ios, plus iodepth x numjobs I/Os in flight when ramp_time ended), "
                              "Iometer's bins every read and write (exactly)"),),
    "timeseries": (),
}


@dataclass(frozen=True)
class Violation:
    """One value the gate refuses: ``table``, ``row`` (position in the frame), ``column``, ``value`` and
    the rule (``rule``) it breaks."""

    table: str
    row: int
    column: str
    value: Any
    rule: str

    def message(self) -> str:
        """``"runs.lat_max_ns = -5.0: allowed 0 to 2**63-1"``: the field, the value and the rule."""
        return f"{self.table}.{self.column} = {self.value!r}: {self.rule}"


def note_pattern(col: Column) -> re.Pattern:
    """The regular expression a ``note`` must match to explain a NaN in ``col``: the column's name or one
    of its :attr:`Valid.names`, as a whole word (``clat_*_ns`` does not name ``lat_mean_ns``)."""
    words = (col.name, *(col.valid.names if col.valid else ()))
    alt = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{alt})(?![A-Za-z0-9_])")


class NoteNames:
    """``names(note) -> bool``: whether ``note`` names ``col`` by :func:`note_pattern`'s rule, the same
    answer, about 4x faster on a long note (a DiskSPD or Iometer row's note names most of its NaN columns).

    A match of the pattern begins where one of its words is written, so the regular expression (whose
    leading look-behind keeps ``re`` from skipping ahead) runs only from the first place ``str.find``
    finds one of them, and not at all when none is in the note. The look-behind still sees the
    character before that place (``Pattern.search(text, pos)`` does not slice ``text``).
    """

    __slots__ = ("pattern", "words", "_seen")

    def __init__(self, col: Column) -> None:
        self.pattern = note_pattern(col)
        self.words = (col.name, *(col.valid.names if col.valid else ()))
        #: the answers of the notes seen last (a note is asked of a row when it is made, then by the gate)
        self._seen: dict[str, bool] = {}

    def __call__(self, note: str) -> bool:
        ok = self._seen.get(note)
        if ok is not None:
            return ok
        start = -1
        for w in self.words:
            i = note.find(w)
            if i >= 0 and (start < 0 or i < start):
                start = i
        ok = start >= 0 and self.pattern.search(note, start) is not None
        if len(self._seen) >= 8192:
            self._seen.clear()
        self._seen[note] = ok
        return ok


_NOTE_NAMES: dict[str, NoteNames] = {}


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def check_rows(df: pd.DataFrame, table: str, *, runs: pd.DataFrame | None = None,
               block_starts: np.ndarray | None = None, block_rows: np.ndarray | None = None,
               limit: int = 1000) -> list[Violation]:
    """The table gate: every value of ``df`` against its column's :class:`Valid` and the table's
    :data:`RELATIONS`; every NaN of a metric column against the row's ``note``.

    Checks only, vectorised (numpy over whole columns); nothing is changed. Ingest calls it once per
    batch on each table before anything is written and refuses the files whose rows break a rule
    (:mod:`storagebench.ingest`).

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``table`` in schema dtypes (:func:`validate`).
    table : str
        One of :data:`TABLES`.
    runs : pandas.DataFrame, optional
        The ``runs`` rows the ``histograms`` belong to (for :class:`BinsWithin`); without it that
        relation is not checked.
    block_starts : numpy.ndarray, optional
        Row positions where each histogram block starts (ingest knows them); computed when omitted.
    block_rows : numpy.ndarray, optional
        With ``block_starts``: the ``runs`` row of each block (-1: find it by its key), as ingest knows
        it for fio's json+ blocks; the comparison is then vectorised.
    limit : int
        Stop after this many violations (one per file is enough to refuse it).

    Returns
    -------
    list of Violation
        Empty when every row passes.
    """
    cols = _columns(table)
    out: list[Violation] = []
    if df.empty:
        return out
    note = df["note"].to_numpy(dtype=object) if "note" in df.columns else None
    for c in cols:
        v = c.valid
        if v is None or c.dtype not in ("int64", "float64"):
            continue
        a = df[c.name].to_numpy()
        if c.dtype == "int64":
            if len(a) and v.lo <= a.min() and a.max() <= v.hi:  # the usual column (a bins table's): no mask made
                bad = None
            else:
                bad = (a < v.lo) | (a > v.hi)
                if v.unknown is not None:
                    bad &= a != v.unknown
            nan = None
        else:
            with np.errstate(invalid="ignore"):
                nan = np.isnan(a)
                bad = ~nan & ~((a >= v.lo) & (a <= v.hi))
        for i in np.flatnonzero(bad)[:limit] if bad is not None else ():
            out.append(Violation(table, int(i), c.name, _py(a[i]), f"allowed {v.describe()}"))
        if v.metric and not v.optional and nan is not None and nan.any():
            rows = np.flatnonzero(nan)
            if note is None:
                for i in rows[:limit]:
                    out.append(Violation(table, int(i), c.name, math.nan, "NaN is not allowed in this table"))
                continue
            names = _NOTE_NAMES.get(c.name) or _NOTE_NAMES.setdefault(c.name, NoteNames(c))
            texts = note[rows]
            seen: dict[Any, bool] = {}
            for i, t in zip(rows, texts, strict=True):
                ok = seen.get(t)
                if ok is None:
                    ok = seen[t] = isinstance(t, str) and names(t)
                if not ok:
                    out.append(Violation(table, int(i), c.name, math.nan,
                                         f"NaN without a note naming {c.name} (a NaN must say why)"))
                    if len(out) >= limit:
                        break
        if len(out) >= limit:
            return out
    for rel in RELATIONS.get(table, ()):
        if isinstance(rel, Ordered):
            out.extend(_check_ordered(df, table, rel, limit))
        elif isinstance(rel, Rate):
            out.extend(_check_rate(df, table, rel, limit))
        elif isinstance(rel, BinsWithin) and runs is not None:
            out.extend(_check_bins(df, runs, table, rel, (block_starts, block_rows), limit))
    return out


def _check_ordered(df: pd.DataFrame, table: str, rel: Ordered, limit: int) -> list[Violation]:
    m = np.column_stack([df[c].to_numpy(dtype=np.float64) for c in rel.columns])
    run = np.fmax.accumulate(m, axis=1)  # the largest known value so far, left to right
    prev = run[:, :-1]
    cur = m[:, 1:]
    with np.errstate(invalid="ignore"):
        bad = cur * (1.0 + rel.rel) < prev  # NaN on either side compares False
    out = []
    for i, j in zip(*np.nonzero(bad), strict=True):
        col = rel.columns[j + 1]
        k = int(np.flatnonzero(m[i, : j + 1] == prev[i, j])[0])
        out.append(Violation(table, int(i), col, _py(m[i, j + 1]),
                             f"below {rel.columns[k]} = {float(prev[i, j])!r}: {rel.why}"))
        if len(out) >= limit:
            break
    return out


def _check_rate(df: pd.DataFrame, table: str, rel: Rate, limit: int) -> list[Violation]:
    r = df[rel.rate].to_numpy(dtype=np.float64)
    t = df[rel.time].to_numpy(dtype=np.float64)
    c = df[rel.count].to_numpy()
    tools = df["tool"].to_numpy(dtype=object) if "tool" in df.columns else np.full(len(df), "*", dtype=object)
    known = c >= 0
    cf = c.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(r * t - cf)
    dt = np.full(len(df), rel.tolerance["*"][0])
    res = np.full(len(df), rel.tolerance["*"][1])
    rr = np.full(len(df), rel.tolerance["*"][2])
    for tool, (a, b, e) in rel.tolerance.items():
        if tool == "*":
            continue
        sel = tools == tool
        dt[sel], res[sel], rr[sel] = a, b, e
    with np.errstate(invalid="ignore", over="ignore"):
        tol = r * dt + res * t + rr * cf + 1.0
        bad = known & (diff > tol)  # NaN rate or time compares False: not compared
    out = []
    for i in np.flatnonzero(bad)[:limit]:
        out.append(Violation(table, int(i), rel.rate, _py(r[i]),
                             f"x {rel.time} = {float(t[i])!r} is {float(r[i] * t[i])!r}, but {rel.count} = {int(c[i])} "
                             f"(allowed difference {tol[i]:.6g}: {rel.why}, within the printed precision of "
                             f"{tools[i]!s})"))
    return out


_BLOCK_KEY = ("run_id", "host", "job", "job_index", "direction")


def _check_bins(hist: pd.DataFrame, runs: pd.DataFrame, table: str, rel: BinsWithin,
                blocks: tuple[np.ndarray | None, np.ndarray | None], limit: int) -> list[Violation]:
    starts, block_rows = blocks  # the first row of each block of bins, and its row of ``runs`` (from the caller)
    counts = hist["count"].to_numpy()
    if starts is None:
        change = np.zeros(len(hist), dtype=bool)
        change[0] = True
        for k in _BLOCK_KEY:
            a = pd.factorize(hist[k])[0]
            change[1:] |= a[1:] != a[:-1]
        starts = np.flatnonzero(change)
    exact = np.add.reduceat(counts, starts)
    if len(counts) and max(-int(counts.min()), int(counts.max())) * len(counts) < 2**53:
        sums = exact.astype(np.float64)  # every partial sum is below 2**53: the float sums are these, exactly
    else:
        sums = np.add.reduceat(counts.astype(np.float64), starts)
    ios = runs["total_ios"].to_numpy()
    # fio: the I/Os in flight when ramp_time ends complete after the counters are reset, so they are
    # completions (bins, clat_ns.N) but not issued I/Os (total_ios): up to iodepth per job more
    slack = np.where((runs["tool"].to_numpy(dtype=object) == "fio") & (runs["iodepth"].to_numpy() > 0),
                     runs["iodepth"].to_numpy() * np.maximum(runs["numjobs"].to_numpy(), 1), 0)
    if block_rows is not None and len(block_rows) == len(starts):
        known = block_rows >= 0
        r = np.where(known, block_rows, 0)
        limit_n = np.where(known & (ios[r] >= 0), ios[r] + slack[r], -1)
        over = (limit_n >= 0) & ((sums > limit_n) | ((sums < 2.0**62) & (exact > limit_n)))
        if not over.any() and known.all():
            return []
        todo = np.flatnonzero(over | ~known)
    else:
        todo = np.arange(len(starts))
    total: dict[tuple, int] = {}
    by_job: dict[tuple, int] = {}
    rk = [runs[k].to_numpy(dtype=object) for k in _BLOCK_KEY]
    for i in range(len(runs)):
        key = tuple(x[i] for x in rk)
        n = int(ios[i]) + int(slack[i]) if ios[i] >= 0 else -1
        total[key] = n if key not in total else (n if min(n, total[key]) >= 0 else -1)
        j = key[:4]
        by_job[j] = (by_job.get(j, 0) + n) if n >= 0 and by_job.get(j, 0) >= 0 else -1
    out = []
    first = [hist[k].take(starts[todo]).to_numpy(dtype=object) for k in _BLOCK_KEY]  # those blocks' keys only
    for j, b in enumerate(todo):
        s = starts[b]
        key = tuple(x[j] for x in first)
        n = total.get(key)
        if n is None and key[4] == ALL_DIRECTIONS:
            n = by_job.get(key[:4])
        if n is None or n < 0:
            continue
        if sums[b] > n or (sums[b] < 2.0**62 and int(exact[b]) > n):
            shown = int(exact[b]) if sums[b] < 2.0**62 else f"more than {2**62}"
            out.append(Violation(table, int(s), "count", shown,
                                 f"the bins of {'/'.join(map(str, key))} add up to more completions than its "
                                 f"total_ios (with fio's in-flight allowance) = {n}: {rel.why}"))
            if len(out) >= limit:
                break
    return out



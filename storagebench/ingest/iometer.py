"""Iometer results CSV (``Iometer /c test.icf /r results.csv``) → ``runs`` (and ``histograms``) rows.

Layout (writers in ``iometer-org/iometer``: ``src/ManagerList.cpp`` header and ``ALL`` row,
``src/Manager.cpp`` ``MANAGER``/``PROCESSOR`` rows, ``src/Worker.cpp`` ``WORKER``/``DISK``/``NETWORK`` rows,
``src/AccessSpecList.cpp`` the access specifications; the test header ``'Test Type``, ``'Version``,
``'Time Stamp`` before them)::

    'Test Type,Test Description      one test (a file opened with ios::app holds several, appended)
    'Version                         2006.07.27 | 2008.06.18 | 1.1.0 ...
    'Time Stamp                      local time YYYY-MM-DD hh:mm:ss:mmm (no time zone)
    'Access specifications ... 'End access specifications
    'Results                         one block per cycling step (queue depth, workers, targets ...)
    'Target Type,Target Name,...     the header, repeated per block
    ALL / MANAGER / PROCESSOR / WORKER / DISK / NETWORK rows
    'Time Stamp                      when the block was written
    'End Test                        1.1.0 only

Columns are found by header name, so the 56-column 2006/2008 layout (``MBps``), the intermediate
``MBps (Binary)``/``MBps (Decimal)`` one and the 80-column 1.1.0 layout (``MiBps (Binary)`` ...,
21 latency-bin columns) are all read. Fields are parsed by :mod:`csv` (quoted fields, e.g. after a
spreadsheet re-saved the file, are fine).

What one ``runs`` row is
    The ``ALL`` row of one results block (one test, or one cycling step of it) x one direction
    that did I/O. ``MANAGER``/``WORKER``/``DISK`` rows are its parts and are *not* ingested
    (:attr:`IometerResult.parts`); the file is refused when they do not add up to it (``ALL`` I/O
    and byte counts must equal the sum over managers, a manager's the sum over its workers, a
    worker's the sum over its disks), which is how a trimmed or edited file shows.

Units
    ``MBps`` of 2006/2008 is MiB/s (``MEGABYTE 1048576`` in ``IOmeter/src/IOCommon.h``); 1.1.0 prints
    both ``MiBps (Binary)`` (2**20) and ``MBps (Decimal)`` (10**6): ``bw_bytes_per_s`` is the binary
    column x 2**20, checked against the decimal one. Response times are ms (→ ns). Numbers are
    printed with C++'s default 6 significant digits. ``runtime_s`` = ``Total Raw Run Time`` /
    ``Processor Speed`` (timer ticks / ticks per s) of the ``MANAGER`` rows (the ``ALL`` row leaves them
    empty); NaN without manager or worker rows.

Workload → fio factor columns (from the access specification the ``ALL`` row names)
    ``bs_bytes`` = ``size``; ``rwmixread_pct`` = ``% reads``; ``random_pct`` = ``% random``; ``rw``
    from both; for a specification of several lines (``% of size`` weights) a value the lines do not
    share is unknown (-1 / NaN / ``""``). ``iodepth`` = ``Queue Depth`` (outstanding I/Os per target)
    x targets per worker; ``numjobs`` = ``# Workers``; ``target`` = the ``DISK`` names.

Latency bins
    The 21 latency-bin columns of 1.1.0 count read and write I/Os together: they go to
    ``histograms`` with ``direction = "mixed"`` and ``bin_ns`` = the bin's upper edge (the open
    ``>= 10 s`` bin: 10 s), so a percentile computed from them is an upper bound at Iometer's
    resolution — and only when they sum to the block's read + write I/Os. (In the 1.1.0 source
    only ``Worker::UpdateResults`` copies bins, per target; ``Manager`` and ``ManagerList`` sum bins
    nothing fills, so ``ALL`` rows of that code carry zeros, which are not ingested.)

Not in ``runs``
    CPU columns (Iometer's are system-wide averages over all processors, fio's ``usr_cpu`` a
    job's share of one CPU: not the same quantity); ``PROCESSOR`` rows (in 1.1.0 their CPU values
    sit 3 columns left of the header, a leftover of the 3 decimal MBps columns added before them);
    network rows. ``started_at`` is NaT: Iometer's time stamps are local time without a zone (the
    printed string is :attr:`IometerBlock.time_stamp`).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .._inputs import MAX_TOOL_OUTPUT_BYTES, read_input
from ..errors import IngestError
from .fio import file_run_id
from .loadgen import (
    MIB,
    NS_PER_MS,
    Format,
    LoadgenRows,
    decode_text,
    detect_format,
    never_crash,
    refuse_format,
    register,
    run_row,
    unexplained_nan,
)

__all__ = ["IometerSpec", "IometerBlock", "IometerResult", "parse_iometer", "read_iometer"]

#: Upper edges (ns) of Iometer 1.1.0's 21 latency bins (``LATENCY_BIN_SIZE``, ``src/IOCommon.h``;
#: header ``0 to 50 uS`` ... ``5 to 10 s``, `` >= 10 s``); the last, open bin gets its lower edge.
LATENCY_BINS_NS: tuple[int, ...] = tuple(int(x) for x in (
    50e3, 100e3, 200e3, 500e3, 1e6, 2e6, 5e6, 10e6, 15e6, 20e6, 30e6, 50e6, 100e6, 200e6, 500e6, 1e9, 2e9,
    4.7e9, 5e9, 10e9, 10e9,
))
_ROW_TYPES = {"ALL", "MANAGER", "PROCESSOR", "WORKER", "DISK", "NETWORK", "UNKNOWN"}
_BINARY = ("MiBps (Binary)", "MBps (Binary)", "MBps")
_DECIMAL = ("MBps (Decimal)",)
_REL = 2e-5  # C++ default stream precision: 6 significant digits
#: what an Iometer row never has (the table gate wants every NaN named)
_NOT_PRINTED = ("Iometer prints no latency deviation, minimum, completion/submission split, percentiles or "
                "per-job CPU: lat_stdev_ns, lat_min_ns, clat_mean_ns, clat_stdev_ns, slat_mean_ns, clat_p*_ns, "
                "usr_cpu_pct, sys_cpu_pct NaN")


@dataclass
class IometerSpec:
    """One access specification: ``name`` and its lines ``(size, of_size, reads, random, delay, burst,
    align, reply)`` (bytes, %, %, %, ms, I/Os, bytes, bytes)."""

    name: str
    lines: list[tuple[int, ...]] = field(default_factory=list)


@dataclass
class IometerBlock:
    """One ``'Results`` block: the ``ALL`` row and its parts.

    Attributes
    ----------
    test : int
        1-based test number in the file.
    block : int
        1-based block number within the test (cycling steps).
    all_row : dict
        Header name → value (str) of the ``ALL`` row.
    parts : list of dict
        The ``MANAGER``/``PROCESSOR``/``WORKER``/``DISK``/``NETWORK`` rows, each with ``type``,
        ``name``, ``manager``, ``worker`` and the header fields.
    time_stamp : str
        The ``'Time Stamp`` after the block (local time as printed).
    """

    test: int
    block: int
    all_row: dict
    parts: list[dict] = field(default_factory=list)
    time_stamp: str = ""
    intervals: list[dict] = field(default_factory=list)


@dataclass
class IometerResult:
    """An Iometer results file, read.

    Attributes
    ----------
    path, encoding : str
    tests : list of dict
        Per test: ``test_type`` (0 normal; 1..7 cycling modes, ``src/PageSetup.h``), ``description``,
        ``version``, ``time_stamp`` (local, as printed), ``specs`` (name → :class:`IometerSpec`).
    blocks : list of IometerBlock
    run_ids : list of str
        One per block: the file's :func:`~storagebench.ingest.fio.file_run_id`, ``-<k>`` appended when
        the file holds more than one block.
    problems : list of str
        Blocks dropped with ``strict=False``.
    """

    path: str
    encoding: str
    tests: list[dict]
    blocks: list[IometerBlock]
    run_ids: list[str]
    problems: list[str] = field(default_factory=list)
    #: read from an instantaneous ("last update") file: the blocks carry their ``intervals``
    instantaneous: bool = False

    @property
    def parts(self):
        """The ``MANAGER``/``WORKER``/``DISK`` rows of every block (not ingested): a DataFrame with
        ``run_id, type, name, manager, worker, iops, read_ios, write_ios, read_bytes, write_bytes``."""
        rows = []
        for b, rid in zip(self.blocks, self.run_ids, strict=True):
            for p in b.parts:
                if p["type"] == "PROCESSOR":
                    continue
                rows.append({"run_id": rid, "type": p["type"], "name": p["name"], "manager": p["manager"],
                             "worker": p["worker"], "iops": _f(p.get("IOps")),
                             "read_ios": _i(p.get("Read I/Os")), "write_ios": _i(p.get("Write I/Os")),
                             "read_bytes": _i(p.get("Bytes Read")), "write_bytes": _i(p.get("Bytes Written"))})
        return pd.DataFrame(rows)

    @never_crash("an Iometer results file")
    def rows(self) -> LoadgenRows:
        """``runs`` rows (one per block and direction), ``histograms`` blocks and, for an instantaneous
        file, ``timeseries`` rows from its update intervals."""
        out = LoadgenRows(problems=list(self.problems))
        ts: dict[str, list] = {k: [] for k in ("run_id", "host", "job", "direction", "t_s", "metric", "value")}
        for b, rid in zip(self.blocks, self.run_ids, strict=True):
            test = self.tests[b.test - 1]
            a = b.all_row
            spec_name = a.get("Access Specification Name", "")
            w = _workload(test["specs"].get(spec_name), a, b.parts)
            managers = [p["name"] for p in b.parts if p["type"] == "MANAGER"]
            disks = list(dict.fromkeys(p["name"] for p in b.parts if p["type"] == "DISK"))
            runtime = _runtime(b.parts)
            binary = next((c for c in _BINARY if c in a), None)
            dirs = []
            for d, cap in (("read", "Read"), ("write", "Write")):
                ios = _i(a.get(f"{cap} I/Os"))
                if ios > 0 or (ios < 0 and _f(a.get(f"{cap} IOps")) > 0):
                    dirs.append((d, cap))
            if not dirs:
                dirs = [("write", "Write")] if w["rwmixread_pct"] == 0 else [("read", "Read")]
            for d, cap in dirs:
                errs = _i(a.get(f"{cap} Errors"))
                bw_col = f"{cap} {binary}" if binary else None
                out.runs.append(run_row(
                    run_id=rid, host="local", job=spec_name, direction=d, tool="iometer",
                    rw=w["rw"], bs_bytes=w["bs_bytes"], rwmixread_pct=w["rwmixread_pct"], random_pct=w["random_pct"],
                    iodepth=w["iodepth"], numjobs=_i(a.get("# Workers")), ioengine="", direct=False,
                    target=";".join(disks),
                    iops=_f(a.get(f"{cap} IOps")),
                    bw_bytes_per_s=_f(a.get(bw_col)) * MIB if bw_col else math.nan,
                    io_bytes=_i(a.get(f"Bytes {cap if cap == 'Read' else 'Written'}")),
                    total_ios=_i(a.get(f"{cap} I/Os")), runtime_s=runtime,
                    lat_mean_ns=_f(a.get(f"Average {cap} Response Time")) * NS_PER_MS,
                    lat_max_ns=_f(a.get(f"Maximum {cap} Response Time")) * NS_PER_MS,
                    error=0 if errs <= 0 else -1,
                    fio_version=f"iometer-{test['version']}" if test["version"] else "iometer",
                    started_at=None, hostname=",".join(managers), source_file=self.path,
                    note=(f"Iometer test {b.test} block {b.block} ({test['description']}); local time stamp "
                          f"{test['time_stamp']!r} (no zone, so started_at is NaT); " + _NOT_PRINTED
                          + (f"; {errs} {d} errors" if errs > 0 else "")
                          + ("" if runtime == runtime else "; no MANAGER/WORKER Total Raw Run Time: runtime_s NaN")),
                ))
                gone = unexplained_nan(out.runs[-1])
                if gone:
                    out.runs[-1]["note"] += f"; not in the file for {d}: {', '.join(gone)} NaN"
            if b.intervals:
                self._series(b, rid, spec_name, test, [d for d, _ in dirs], ts)
            bins = [_i(a.get(c)) for c in _bin_columns(a)]
            total = _i(a.get("Read I/Os")) + _i(a.get("Write I/Os"))
            if len(bins) == len(LATENCY_BINS_NS) and sum(bins) > 0 and sum(bins) == total:
                counts: dict[int, int] = {}
                for edge, c in zip(LATENCY_BINS_NS, bins, strict=True):
                    if c > 0:
                        counts[edge] = counts.get(edge, 0) + c
                out.histograms.append(((rid, "local", spec_name, 0, "mixed"), counts))
        if ts["t_s"]:
            ts["log_index"] = [1] * len(ts["t_s"])
            out.timeseries = ts
        return out

    @staticmethod
    def _series(b: IometerBlock, rid: str, job: str, test: dict, dirs: list[str], ts: dict) -> None:
        """The block's update intervals as run-level ``timeseries``: per time stamp the workers' IOPS
        added up (``iops``) and their mean response time weighted by their I/Os (``lat_ns``), per direction;
        ``t_s`` = seconds from the test's 'Time Stamp to the interval's (the end of the interval)."""
        t0 = _stamp_s(test["time_stamp"])
        by_stamp: dict[str, list[dict]] = {}
        for r in b.intervals:
            if r["type"] == "WORKER" or not any(x["type"] == "WORKER" for x in b.intervals):
                by_stamp.setdefault(r["stamp"], []).append(r)
        for stamp, rows in by_stamp.items():
            t = _stamp_s(stamp) - t0
            if not t >= 0:
                continue  # a time stamp that is not one, or before the test's: no point of the series
            for d in dirs:
                cap = d.title()
                iops = sum(_f(r.get(f"{cap} IOps")) for r in rows)
                n = sum(max(_i(r.get(f"{cap} I/Os")), 0) for r in rows)
                lat = (sum(_f(r.get(f"Average {cap} Response Time")) * max(_i(r.get(f"{cap} I/Os")), 0) for r in rows)
                       / n * NS_PER_MS) if n > 0 else math.nan
                for metric, v in (("iops", iops), ("lat_ns", lat)):
                    if metric == "lat_ns" and not n:
                        continue
                    for col, x in (("run_id", rid), ("host", "local"), ("job", job), ("direction", d),
                                   ("metric", metric), ("t_s", t), ("value", v)):
                        ts[col].append(x)


def _bin_columns(row: dict) -> list[str]:
    keys = list(row)
    try:
        k = keys.index("Segments Retransmitted/Second")
    except ValueError:
        return []
    return [c for c in keys[k + 1:] if c.strip().endswith(("uS", "mS", "S", "s"))]


def _f(v) -> float:
    if v is None:
        return math.nan
    s = str(v).strip()
    if not s:
        return math.nan
    return float(s)


def _i(v) -> int:
    if v is None or not str(v).strip():
        return -1
    s = str(v).strip()
    try:
        return int(s)
    except ValueError:
        return int(float(s))


def _runtime(parts: list[dict]) -> float:
    for kind in ("MANAGER", "WORKER"):
        times = []
        for p in parts:
            if p["type"] != kind:
                continue
            ticks, speed = _f(p.get("Total Raw Run Time")), _f(p.get("Processor Speed"))
            if ticks > 0 and speed > 0:
                times.append(ticks / speed)
        if times:
            return max(times)
    return math.nan


def _workload(spec: IometerSpec | None, a: dict, parts: list[dict]) -> dict:
    unknown = {"rw": "", "bs_bytes": -1, "rwmixread_pct": math.nan, "random_pct": math.nan, "iodepth": -1}
    out = dict(unknown)
    if spec is not None and spec.lines:
        def same(k):
            vals = {ln[k] for ln in spec.lines}
            return vals.pop() if len(vals) == 1 else None

        size, reads, rnd = same(0), same(2), same(3)
        out["bs_bytes"] = int(size) if size is not None else -1
        out["rwmixread_pct"] = float(reads) if reads is not None else math.nan
        out["random_pct"] = float(rnd) if rnd is not None else math.nan
        if reads is not None and rnd is not None:
            family = "read" if reads == 100 else ("write" if reads == 0 else "rw")
            out["rw"] = ("rand" + family) if rnd > 0 else family
    qd = _i(a.get("Queue Depth"))
    workers, disks = _i(a.get("# Workers")), _i(a.get("# Disks"))
    if qd > 0 and workers > 0 and disks > 0 and disks % workers == 0:
        out["iodepth"] = qd * (disks // workers)
    return out


# ---- parsing --------------------------------------------------------------------------------------


def read_iometer(path: str | Path, *, strict: bool = True) -> IometerResult:
    """Read an Iometer results CSV (:func:`parse_iometer` of its bytes)."""
    p = Path(path)
    data = read_input(p, max_bytes=MAX_TOOL_OUTPUT_BYTES, what="Iometer result", error=IngestError)
    return parse_iometer(data, str(p), strict=strict)


@never_crash("an Iometer results file")
def parse_iometer(data: bytes, path: str = "<bytes>", *, strict: bool = True) -> IometerResult:
    """Parse an Iometer results CSV: every test appended to the file, every results block of each.

    Parameters
    ----------
    data : bytes
        The file's bytes (decoded by BOM sniffing).
    path : str
        Name for ``source_file`` and error messages.
    strict : bool
        With ``True`` (default) a block that is cut or does not add up raises for the whole file;
        with ``False`` it is dropped and named in :attr:`IometerResult.problems`, the complete blocks
        are kept.

    Returns
    -------
    IometerResult

    Raises
    ------
    IngestError
        Not an Iometer results file; a block cut mid-way (a row shorter than its header, a block
        without its ``'Time Stamp``, an access specification that never ends); no ``ALL`` row;
        parts that do not add up to the ``ALL`` row; a non-numeric count.
    """
    fmt = detect_format(data)
    text, enc = decode_text(data, path)
    if fmt not in ("iometer", "iometer-instantaneous"):
        head = text.strip().splitlines()[0][:80] if text.strip() else ""
        if fmt == "iometer-icf":
            refuse_format(fmt, path)
        raise IngestError(f"not an Iometer results file (no 'Test Type / 'Results sections); it starts with "
                          f"{head!r}", path=path)
    rows = list(csv.reader(io.StringIO(text)))
    intervals: list[list[dict]] = []
    if fmt == "iometer-instantaneous":
        rows, intervals = _split_instantaneous(rows, path)
    tests: list[dict] = []
    blocks: list[IometerBlock] = []
    problems: list[str] = []
    i = 0
    n = len(rows)

    def cell(r: list[str]) -> str:
        return r[0].strip() if r else ""

    def new_test() -> dict:
        t = {"test_type": -1, "description": "", "version": "", "time_stamp": "", "specs": {}, "blocks": 0}
        tests.append(t)
        return t

    cur: dict | None = None
    while i < n:
        r = rows[i]
        c = cell(r)
        if c == "'Test Type":
            cur = new_test()
            if i + 1 < n and rows[i + 1]:
                nxt = rows[i + 1]
                cur["test_type"] = _i(nxt[0]) if nxt[0].strip().lstrip("-").isdigit() else -1
                cur["description"] = ",".join(nxt[1:]).strip()
            i += 2
            continue
        if cur is None and c.startswith("'"):
            cur = new_test()  # a file that starts mid-way (no 'Test Type): keep reading
        if c == "'Version":
            cur["version"] = cell(rows[i + 1]) if i + 1 < n else ""
            i += 2
            continue
        if c == "'Time Stamp":
            if not cur["time_stamp"]:
                cur["time_stamp"] = cell(rows[i + 1]) if i + 1 < n else ""
            i += 2
            continue
        if c == "'Access specifications":
            i = _read_specs(rows, i + 1, cur, path, len(tests))
            continue
        if c == "'Results":
            cur["blocks"] += 1
            label = f"test {len(tests)}, results block {cur['blocks']}"
            try:
                block, i = _read_block(rows, i + 1, len(tests), cur["blocks"], label, path)
                _check_block(block, label, path)
                blocks.append(block)
            except IngestError as exc:
                if strict:
                    raise IngestError(f"{exc.reason} ({len(blocks)} complete block(s) before it; "
                                      "parse_iometer(..., strict=False) keeps them)", path=path) from None
                problems.append(exc.reason)
                i = _skip_to_next_section(rows, i + 1)
            continue
        i += 1
    if not blocks:
        if problems:
            raise IngestError("no complete results block: " + "; ".join(problems), path=path)
        raise IngestError("no 'Results block with an ALL row (a test that never ran?)", path=path)
    base = file_run_id(data)
    ids = [base] if len(blocks) == 1 else [f"{base}-{k}" for k in range(1, len(blocks) + 1)]
    res = IometerResult(path=path, encoding=enc, tests=tests, blocks=blocks, run_ids=ids, problems=problems)
    if fmt == "iometer-instantaneous":
        res.instantaneous = True
        for b, k in zip(blocks, _block_numbers(rows), strict=False):
            b.intervals = intervals[k] if k < len(intervals) else []
    return res


def _block_numbers(rows: list[list[str]]) -> list[int]:
    """The 0-based 'Results section number of each results block, in order."""
    return list(range(sum(1 for r in rows if r and r[0].strip() == "'Results")))


def _split_instantaneous(rows: list[list[str]], path: str) -> tuple[list[list[str]], list[list[dict]]]:
    """An Iometer instantaneous ("last update") file as a results file, and its intervals.

    Iometer's ``PrepareInstantaneousFile`` (``src/GalileoView.cpp``) writes the results header prefixed
    by ``TimeStamp,`` and, per update interval, a ``WORKER`` row per worker whose ``Access Specification
    Name`` is empty (numbers at C++'s default 6 significant digits: the interval's own I/Os and rates);
    the test ends with the rows of a results file -- the ``WORKER`` rows with the specification name
    (the whole run) and the ``ALL`` row, full precision -- each also prefixed by its time stamp. The
    time stamp column is dropped and the interval rows (with any ``DISK``/``PROCESSOR`` rows after
    them) set aside, so the rest is read exactly as a results file; the intervals become ``timeseries``.
    """
    out: list[list[str]] = []
    blocks: list[list[dict]] = []
    header: list[str] | None = None
    interval = False
    for r in rows:
        c = r[0].strip().strip("'") if r else ""
        if c.lower() == "timestamp" and len(r) > 1 and r[1].strip().lstrip("'").startswith("Target Type"):
            header = [h.strip() for h in r[1:]]
            header[0] = header[0].lstrip("'")
            out.append(r[1:])
            continue
        if header is None or not r or r[0].strip().startswith("'"):
            if r and r[0].strip() in ("'Results", "'Time Stamp"):  # a block starts / ends (its time stamp next)
                if r[0].strip() == "'Results":
                    blocks.append([])
                header = None
            out.append(r)
            continue
        stamp, rest = r[0].strip(), r[1:]
        if not any(x.strip() for x in r):
            continue
        if _stamp_s(stamp) != _stamp_s(stamp):
            raise IngestError(f"an Iometer instantaneous file, but the row {','.join(r)[:60]!r} does not start with "
                              "a time stamp (YYYY-MM-DD hh:mm:ss:mmm) under its TimeStamp header (edited or cut?)",
                              path=path)
        kind = rest[0].strip().upper() if rest else ""
        vals = {h: (rest[k].strip() if k < len(rest) else "") for k, h in enumerate(header)}
        if kind in ("WORKER", "MANAGER"):
            interval = not vals.get("Access Specification Name", "")
        elif kind == "ALL":
            interval = False
        if interval:
            if kind in ("WORKER", "MANAGER") and blocks:
                blocks[-1].append({"stamp": stamp, "type": kind, **vals})
            continue
        out.append(rest)
    return out, blocks


def _stamp_s(text: str) -> float:
    """Seconds since the epoch of an Iometer time stamp ``YYYY-MM-DD hh:mm:ss:mmm`` (local time, no zone:
    only differences are used); NaN when it is not one."""
    from datetime import datetime

    try:
        day, ms = text.strip().rsplit(":", 1)
        return datetime.strptime(day, "%Y-%m-%d %H:%M:%S").timestamp() + int(ms) / 1000.0
    except ValueError:
        return math.nan


def _skip_to_next_section(rows: list[list[str]], i: int) -> int:
    while i < len(rows):
        c = rows[i][0].strip() if rows[i] else ""
        if c in ("'Results", "'Test Type", "'Access specifications"):
            return i
        i += 1
    return i


def _read_specs(rows: list[list[str]], i: int, test: dict, path: str, test_no: int) -> int:
    spec: IometerSpec | None = None
    while i < len(rows):
        r = rows[i]
        c = r[0].strip() if r else ""
        if c == "'End access specifications":
            return i + 1
        if c == "'Access specification name":
            if i + 1 >= len(rows) or not rows[i + 1]:
                break
            name = rows[i + 1][0].strip() if len(rows[i + 1]) <= 2 else ",".join(rows[i + 1][:-1]).strip()
            spec = IometerSpec(name=name)
            test["specs"][name] = spec
            i += 2
            continue
        if c == "'size":
            i += 1
            continue
        if c.startswith("'"):
            break
        if spec is not None and r and any(x.strip() for x in r):
            vals = [x.strip() for x in r if x.strip() != ""]
            try:
                spec.lines.append(tuple(int(float(v)) for v in vals[:8]))
            except ValueError:
                raise IngestError(f"test {test_no}: access specification {spec.name!r} line {r} is not numbers",
                                  path=path) from None
        i += 1
    raise IngestError(f"test {test_no}: the access specifications never end ('End access specifications "
                      "missing: file cut mid-block?)", path=path)


def _read_block(rows: list[list[str]], i: int, test_no: int, block_no: int, label: str,
                path: str) -> tuple[IometerBlock, int]:
    if i >= len(rows) or not rows[i] or not rows[i][0].strip().startswith("'Target Type"):
        raise IngestError(f"{label}: no 'Target Type,Target Name,... header after 'Results (file cut?)", path=path)
    header = [h.strip() for h in rows[i]]
    header[0] = header[0].lstrip("'")
    need = ("Target Type", "Target Name", "IOps", "Read IOps", "Write IOps", "Read I/Os", "Write I/Os")
    missing = [h for h in need if h not in header]
    if missing:
        raise IngestError(f"{label}: header lacks {missing} (not an Iometer results header)", path=path)
    last_needed = header.index("Segments Retransmitted/Second") if "Segments Retransmitted/Second" in header \
        else len(header) - 1
    i += 1
    all_row = None
    parts: list[dict] = []
    manager = worker = ""
    while i < len(rows):
        r = rows[i]
        c = r[0].strip() if r else ""
        if not r or not any(x.strip() for x in r):
            i += 1
            continue
        if c.startswith("'"):
            break
        kind = c.upper()
        if kind not in _ROW_TYPES:
            raise IngestError(f"{label}: row type {c!r} is not one of {sorted(_ROW_TYPES)}", path=path)
        if kind != "PROCESSOR" and len(r) <= last_needed:
            raise IngestError(f"{label}: {kind} row {r[1] if len(r) > 1 else ''!r} has {len(r)} fields, the header "
                              f"{len(header)}: the file is cut mid-row", path=path)
        vals = {h: (r[k].strip() if k < len(r) else "") for k, h in enumerate(header)}
        if kind == "ALL":
            if all_row is not None:
                raise IngestError(f"{label}: two ALL rows in one block ('Time Stamp between them missing?)", path=path)
            all_row = vals
        else:
            if kind == "MANAGER":
                manager, worker = vals["Target Name"], ""
            elif kind == "WORKER":
                worker = vals["Target Name"]
            parts.append({"type": kind, "name": vals["Target Name"], "manager": manager,
                          "worker": worker if kind in ("DISK", "NETWORK") else (worker if kind == "WORKER" else ""),
                          **vals})
        i += 1
    if all_row is None:
        raise IngestError(f"{label}: no ALL row (file cut mid-block?)", path=path)
    if i >= len(rows) or (rows[i][0].strip() if rows[i] else "") != "'Time Stamp":
        raise IngestError(f"{label}: the block does not end with its 'Time Stamp (file cut mid-block?)", path=path)
    stamp = rows[i + 1][0].strip() if i + 1 < len(rows) and rows[i + 1] else ""
    if not stamp:
        raise IngestError(f"{label}: 'Time Stamp without a time (file cut mid-block?)", path=path)
    return IometerBlock(test=test_no, block=block_no, all_row=all_row, parts=parts, time_stamp=stamp), i + 2


def _close(a: float, b: float, rel: float = _REL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-9


def _check_block(b: IometerBlock, label: str, path: str) -> None:
    """The ALL row and its parts must add up (exact integer counts, 6-digit rates)."""
    a = b.all_row
    try:
        for row in [a, *b.parts]:
            for key in ("Read I/Os", "Write I/Os", "Bytes Read", "Bytes Written", *_bin_columns(row)):
                v = _i(row.get(key))
                if (v < 0 and str(row.get(key)).strip()) or v > 2**63 - 1:  # empty is -1: not printed
                    raise IngestError(f"{label}: {row.get('type', 'ALL')} row "
                                      f"{key} = {row.get(key)!r}: not a count (allowed 0 to 2**63-1)", path=path)
        iops, r_iops, w_iops = _f(a["IOps"]), _f(a["Read IOps"]), _f(a["Write IOps"])
    except (ValueError, KeyError) as exc:
        raise IngestError(f"{label}: ALL row has a non-numeric count ({exc})", path=path) from None
    if not _close(iops, r_iops + w_iops):
        raise IngestError(f"{label}: ALL IOps {iops} != Read IOps + Write IOps {r_iops + w_iops}", path=path)
    binary = next((c for c in _BINARY if c in a), None)
    if binary and "MBps (Decimal)" in a:
        mib, mb = _f(a[binary]), _f(a["MBps (Decimal)"])
        if not _close(mib * MIB, mb * 1e6, 1e-4):
            raise IngestError(f"{label}: ALL {binary} {mib} and MBps (Decimal) {mb} are not the same rate", path=path)
    kinds = [k for k in ("MANAGER", "WORKER", "DISK") if any(p["type"] == k for p in b.parts)]
    top = [{"type": "ALL", "name": "All", "manager": "", "worker": "", **a}]
    pairs = [("ALL", kinds[0])] if kinds else []
    pairs += [(up, down) for up, down in (("MANAGER", "WORKER"), ("WORKER", "DISK")) if up in kinds and down in kinds]
    for up, down in pairs:
        parents = top if up == "ALL" else [p for p in b.parts if p["type"] == up]
        children = [p for p in b.parts if p["type"] == down]
        for parent in parents:
            if up == "ALL":
                mine = children
            elif up == "MANAGER":
                mine = [p for p in children if p["manager"] == parent["name"]]
            else:
                mine = [p for p in children if p["worker"] == parent["name"] and p["manager"] == parent["manager"]]
            if not mine:
                continue
            for key in ("Read I/Os", "Write I/Os", "Bytes Read", "Bytes Written"):
                s = sum(_i(p.get(key)) for p in mine)
                if s != _i(parent.get(key)):
                    raise IngestError(f"{label}: {key} of {up} {parent['name']!r} is {_i(parent.get(key))} but its "
                                      f"{len(mine)} {down} row(s) sum to {s} (trimmed or edited file?)", path=path)


# ---- the formats of this module, registered for the ingest (storagebench.ingest.loadgen.FORMATS) ------------

#: The header of Iometer's "last update" file: PrepareInstantaneousFile prefixes it with TimeStamp.
_INSTANT_HEADER = re.compile(r"^[\"']*TimeStamp[\"']*,[\"']*'?Target Type", re.M | re.I)


def _is_icf(text: str) -> bool:
    return text[0] != "<" and "'TEST SETUP" in text[:4096] and "'ACCESS SPECIFICATIONS" in text.upper()


def _is_results_csv(text: str) -> bool:
    unquoted = text.lstrip('"')  # a spreadsheet re-save quotes every field
    return text[0] != "<" and (unquoted.startswith("'Test Type") or (
        "'Results" in text and "'Target Type" in text and "Target Name" in text))


def _rows(data: bytes, path: str) -> LoadgenRows:
    return parse_iometer(data, path).rows()


register(Format("iometer-icf", _is_icf, refusal=(
    "an Iometer configuration (.icf), not results; `storagebench translate icf` turns it into a study"),
    fixtures="iometer", priority=20))
register(Format("iometer-instantaneous", lambda text: _is_results_csv(text) and bool(_INSTANT_HEADER.search(text)),
                _rows, fixtures="iometer/instantaneous", priority=30))
register(Format("iometer", lambda text: _is_results_csv(text) and not _INSTANT_HEADER.search(text), _rows,
                fixtures="iometer", priority=31))

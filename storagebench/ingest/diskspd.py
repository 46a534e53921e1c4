"""DiskSPD results (``-Rxml`` XML and the default text report) → ``runs`` and ``timeseries`` rows.

Sources (format notes with citations in ``tests/fixtures/diskspd/README.md``):
``microsoft/diskspd:XmlResultParser/XmlResultParser.cpp`` (XML results), ``Common/Common.cpp``
(``<Profile>``), ``ResultParser/ResultParser.cpp`` (text report).

What one ``runs`` row is
    One timespan of one DiskSPD run x one direction (``read``/``write``) that did I/O: the run
    total over every ``Thread/Target``. ``job`` is ``timespan<N>``; ``host`` is ``"local"``,
    ``hostname`` DiskSPD's computer name. Per-thread x per-target rows are parts of that total and
    are *not* ingested (they are :attr:`DiskSpdResult.targets`), so nothing is counted twice.

Totals, the tool's way
    The XML has no totals: ``iops = sum(ReadCount) / TestTimeSeconds`` and ``bw_bytes_per_s =
    sum(ReadBytes) / TestTimeSeconds`` (what VMFleet and ``Process-DiskSpd.ps1`` do).
    ``TestTimeSeconds`` is printed with 2 decimals, so these can differ from the text report
    (which divides by the exact timer value) by up to ``0.005 / TestTimeSeconds`` relative.
    The text report prints ``total:`` rows: ``iops`` is the printed ``I/O per s``;
    ``bw_bytes_per_s`` is ``bytes x iops / I/Os`` (bytes over the tool's exact time, which keeps
    more digits than the printed MiB/s) and is checked against the printed MiB/s.

Units
    DiskSPD's "MiB/s" (and "MB/s" before 2.0.18, always 2**20 bytes) → bytes/s; latency ms → ns.
    DiskSPD measures latency from issue to completion, fio's ``lat`` (not ``clat``): means and
    standard deviations go to ``lat_mean_ns``/``lat_stdev_ns``, the 0th/100th percentiles to
    ``lat_min_ns``/``lat_max_ns``.

Percentiles
    ``<Latency><Bucket>`` (XML) and the ``%-ile`` table (text) are selected by their percentile
    value, never by position. The ones on fio's default list (:data:`storagebench.schema.PERCENTILES`)
    go to the ``clat_p*_ns`` columns — the only percentile columns of ``runs`` — and hold
    DiskSPD's issue-to-completion latency: DiskSPD prints no 99.5th, so ``clat_p99_5_ns`` is NaN.
    Every other one (2nd, 25th, 99.999th ...) is in :attr:`DiskSpdResult.percentiles`.

Time series
    ``<TimeSpan><Iops><Bucket>`` (``-D``) → ``timeseries`` rows ``metric = "iops"`` per direction
    (``t_s`` = ``SampleMillisecond`` / 1000, the end of the interval, as fio logs time samples)
    and ``metric = "lat_ns"`` (the bucket's mean latency) where the bucket had I/O.

Workload → fio factor columns
    ``bs_bytes`` = ``BlockSize``; ``rwmixread_pct`` = 100 - ``WriteRatio``; ``random_pct`` = 100
    with ``<Random>`` (``RandomRatio`` when given, 2.1+ ``-rs``), 0 with ``<StrideSize>``
    (``<RandomAccess>`` is the ``FILE_FLAG_RANDOM_ACCESS`` caching hint, not random I/O:
    microsoft/diskspd#202); ``rw`` from both; ``iodepth`` = outstanding I/Os per thread
    (``RequestCount`` of the thread's target with ``-t``; ``-O`` or the sum over targets with ``-F``);
    ``numjobs`` = threads; ``direct`` = ``DisableOSCache``; ``target`` = the paths joined by ``;``.
    Targets with different values give the unknown value (-1 / NaN / ``""``).

Provenance
    ``fio_version`` holds the producing tool and its version (``diskspd-2.0.21a``; ``diskspd``
    for text, which does not print it); ``started_at`` DiskSPD's ``RunTime`` / ``start time`` (UTC).

Real-world bytes
    Decoded by BOM sniffing (:func:`storagebench.ingest.loadgen.decode_text`); XML with a DTD goes
    to ``defusedxml``, which refuses it (entity expansion, the XML bomb, and external entities need
    a DTD; DiskSPD never writes one); XML without one cannot declare entities and is parsed by the
    standard library's C parser (1.5x faster than defusedxml's Python tree builder); text lines
    wrapped by a console are re-joined; several runs pasted into one text file are split; a run
    whose per-thread rows do not add up to its ``total:`` rows (a trimmed excerpt) is refused.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import defusedxml
import defusedxml.ElementTree as DET
import pandas as pd

from .._inputs import MAX_TOOL_OUTPUT_BYTES, read_input
from ..errors import IngestError
from ..schema import PERCENTILES, percentile_column
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

__all__ = ["DiskSpdRun", "DiskSpdResult", "parse_diskspd", "read_diskspd"]

_PCT_COLS = {float(p): percentile_column(p) for p in PERCENTILES}
_TEXT_PCT = {"min": 0.0, "25th": 25.0, "50th": 50.0, "75th": 75.0, "90th": 90.0, "95th": 95.0, "99th": 99.0,
             "3-nines": 99.9, "4-nines": 99.99, "5-nines": 99.999, "6-nines": 99.9999, "7-nines": 99.99999,
             "8-nines": 99.999999, "9-nines": 99.9999999, "max": 100.0}
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "K": 1 << 10, "M": 1 << 20,
          "G": 1 << 30, "T": 1 << 40, "": 1}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*$")


@dataclass
class DiskSpdRun:
    """One timespan of one DiskSPD run, as read.

    Attributes
    ----------
    timespan : int
        1-based timespan number within the run.
    run_index : int
        1-based number of the run within the file (several runs can be pasted into one text file).
    source : {"xml", "text"}
    version : str
        DiskSPD version (XML ``Tool/Version``); ``""`` for text, which does not print it.
    layout : str
        Text layout recognised: ``"pre-2.0.18"`` ("MB/s" header), ``"2.0.18-2.1"``, ``"2.2"``; ``"xml"``.
    computer_name : str
    started_at : datetime or None
        Start of the run, UTC.
    cmdline : str
        ``Command Line:`` of a text report (``""`` when not printed).
    test_time_s : float
        Measured seconds (``TestTimeSeconds`` / ``actual test time``, 2 decimals as printed).
    thread_count : int
    workload : dict
        The fio factor columns (``rw``, ``bs_bytes``, ``rwmixread_pct``, ``random_pct``, ``iodepth``,
        ``numjobs``, ``direct``, ``target``) and ``duration_s``, ``warmup_s``, ``cooldown_s``.
    totals : dict
        ``{"read"|"write": {"ios", "bytes", "iops", "bw_bytes_per_s", "lat_mean_ns", "lat_stdev_ns",
        "iops_stdev"}}`` in schema units.
    percentiles : list of tuple
        ``(percentile, read_ns, write_ns, total_ns)``, NaN where a direction had no I/O.
    targets : list of dict
        Per thread x target: ``thread, path, read_ios, read_bytes, write_ios, write_bytes``
        (+ ``lat_mean_ns`` ... when printed).
    series : list of tuple
        ``(t_s, read_iops, write_iops, total_iops, read_lat_ms, write_lat_ms)`` from ``<Iops><Bucket>``.
    """

    timespan: int
    run_index: int
    source: str
    version: str = ""
    layout: str = ""
    computer_name: str = ""
    started_at: datetime | None = None
    cmdline: str = ""
    test_time_s: float = math.nan
    thread_count: int = -1
    workload: dict = field(default_factory=dict)
    totals: dict = field(default_factory=dict)
    percentiles: list = field(default_factory=list)
    targets: list = field(default_factory=list)
    series: list = field(default_factory=list)


@dataclass
class DiskSpdResult:
    """A DiskSPD file, read: its runs (one per timespan per pasted run).

    Attributes
    ----------
    path : str
    encoding : str
        How the bytes were decoded (:func:`~storagebench.ingest.loadgen.decode_text`).
    runs : list of DiskSpdRun
    run_ids : list of str
        ``run_id`` of each run: :func:`~storagebench.ingest.fio.file_run_id` of the bytes, with
        ``-<k>`` (1-based) appended when the file holds more than one run or timespan.
    problems : list of str
        Runs dropped with ``strict=False``.
    """

    path: str
    encoding: str
    runs: list[DiskSpdRun]
    run_ids: list[str]
    problems: list[str] = field(default_factory=list)

    # -- tables ---------------------------------------------------------------------------

    @never_crash("DiskSPD output")
    def rows(self) -> LoadgenRows:
        """``runs`` and ``timeseries`` rows (:class:`~storagebench.ingest.loadgen.LoadgenRows`)."""
        out = LoadgenRows(problems=list(self.problems))
        ts: dict[str, list] = {k: [] for k in ("run_id", "host", "job", "direction", "t_s", "metric", "value")}
        for run, run_id in zip(self.runs, self.run_ids, strict=True):
            job = f"timespan{run.timespan}"
            w = run.workload
            pct = {p: (r, wr) for p, r, wr, _ in run.percentiles}
            fio_version = f"diskspd-{run.version}" if run.version else "diskspd"
            note = ("DiskSPD latency is issue-to-completion (fio lat): clat_mean_ns, clat_stdev_ns, slat_mean_ns "
                    "NaN; its percentiles are in the clat_p columns, without a 99.5th (clat_p99_5_ns NaN); its "
                    "CPU use is per processor, not per job (usr_cpu_pct, sys_cpu_pct NaN)")
            if not run.percentiles:
                note += "; no latency percentiles in the file (-L not given): lat_min_ns, lat_max_ns, clat_p*_ns NaN"
            if run.source == "xml":
                note += f"; IOPS = sum(I/O counts) / TestTimeSeconds ({run.test_time_s:.2f} s as printed)"
            dirs = [d for d in ("read", "write") if run.totals.get(d, {}).get("ios", 0) > 0]
            if not dirs:
                dirs = ["write" if w.get("rwmixread_pct") == 0 else "read"]
            for d in dirs:
                t = run.totals.get(d, {})
                k = 0 if d == "read" else 1
                fields = {col: pct[p][k] for p, col in _PCT_COLS.items() if p in pct}
                out.runs.append(run_row(
                    run_id=run_id, host="local", job=job, direction=d, tool="diskspd",
                    rw=w.get("rw", ""), bs_bytes=w.get("bs_bytes", -1), rwmixread_pct=w.get("rwmixread_pct", math.nan),
                    random_pct=w.get("random_pct", math.nan), iodepth=w.get("iodepth", -1),
                    numjobs=w.get("numjobs", -1), ioengine="", direct=bool(w.get("direct", False)),
                    target=w.get("target", ""),
                    iops=t.get("iops", 0.0), bw_bytes_per_s=t.get("bw_bytes_per_s", 0.0),
                    io_bytes=int(t.get("bytes", 0)), total_ios=int(t.get("ios", 0)), runtime_s=run.test_time_s,
                    lat_mean_ns=t.get("lat_mean_ns", math.nan), lat_stdev_ns=t.get("lat_stdev_ns", math.nan),
                    lat_min_ns=pct.get(0.0, (math.nan, math.nan))[k],
                    lat_max_ns=pct.get(100.0, (math.nan, math.nan))[k],
                    fio_version=fio_version, started_at=run.started_at, hostname=run.computer_name,
                    source_file=self.path, note=note, **fields,
                ))
                gone = unexplained_nan(out.runs[-1])
                if gone:  # a trimmed percentile table, no -L averages ...: named, never silent
                    out.runs[-1]["note"] += f"; not in the file for {d}: {', '.join(gone)} NaN"
                k = 1 if d == "read" else 2
                lat = [(x[0], x[k + 3] * NS_PER_MS) for x in run.series if x[k] and not math.isnan(x[k + 3])]
                for metric, t_s, vals in (("iops", [x[0] for x in run.series], [float(x[k]) for x in run.series]),
                                          ("lat_ns", [x[0] for x in lat], [x[1] for x in lat])):
                    n = len(t_s)
                    for col, x in (("run_id", run_id), ("host", "local"), ("job", job), ("direction", d),
                                   ("metric", metric)):
                        ts[col] += [x] * n
                    ts["t_s"] += t_s
                    ts["value"] += vals
        if ts["t_s"]:
            ts["log_index"] = [1] * len(ts["t_s"])
            out.timeseries = ts  # columns: the ingest makes one DataFrame of a batch's files, not one per file
        return out

    @property
    def targets(self) -> pd.DataFrame:
        """Per thread x target rows (the parts of the run totals; not ingested into ``runs``).

        Columns ``run_id, timespan, thread, path, read_ios, read_bytes, write_ios, write_bytes`` and,
        when DiskSPD printed them, ``lat_mean_ns, lat_stdev_ns`` (ns).
        """
        rows = [{"run_id": rid, "timespan": r.timespan, **t} for r, rid in zip(self.runs, self.run_ids, strict=True)
                for t in r.targets]
        return pd.DataFrame(rows)

    @property
    def percentiles(self) -> pd.DataFrame:
        """Every latency percentile DiskSPD printed: ``run_id, percentile, read_ns, write_ns, total_ns``."""
        rows = [{"run_id": rid, "percentile": p, "read_ns": r, "write_ns": w, "total_ns": t}
                for run, rid in zip(self.runs, self.run_ids, strict=True) for p, r, w, t in run.percentiles]
        return pd.DataFrame(rows, columns=["run_id", "percentile", "read_ns", "write_ns", "total_ns"])


# ---- entry points ---------------------------------------------------------------------------------


def read_diskspd(path: str | Path, *, strict: bool = True) -> DiskSpdResult:
    """Read a DiskSPD XML or text result file (:func:`parse_diskspd` of its bytes)."""
    p = Path(path)
    data = read_input(p, max_bytes=MAX_TOOL_OUTPUT_BYTES, what="DiskSPD result", error=IngestError)
    return parse_diskspd(data, str(p), strict=strict)


@never_crash("DiskSPD output")
def parse_diskspd(data: bytes, path: str = "<bytes>", *, strict: bool = True) -> DiskSpdResult:
    """Parse DiskSPD output, XML or text, told apart by content.

    Parameters
    ----------
    data : bytes
        The file's bytes (any encoding :func:`~storagebench.ingest.loadgen.decode_text` reads).
    path : str
        Name for ``source_file`` and error messages.
    strict : bool
        With ``True`` (default) any run that does not add up raises; with ``False`` such runs are
        dropped and listed in :attr:`DiskSpdResult.problems` (the good runs of the file are kept).

    Returns
    -------
    DiskSpdResult

    Raises
    ------
    IngestError
        Not DiskSPD output; undecodable bytes; malformed or truncated XML; an XML DTD or entity
        declaration (refused by defusedxml: XML bombs); a run without results, without a ``total:``
        line, or whose rows do not add up (trimmed excerpt).
    """
    fmt = detect_format(data)
    if fmt == "diskspd-xml":
        return parse_diskspd_xml(data, path)
    if fmt == "diskspd-text":
        return parse_diskspd_text(data, path, strict=strict)
    if fmt == "diskspd-linux":
        refuse_format(fmt, path)
    text, _ = decode_text(data, path)  # raises for UTF-16 without BOM, binary ...
    head = text.strip().splitlines()[0][:80] if text.strip() else ""
    raise IngestError(f"not DiskSPD output (no <Results> XML, no 'Input parameters:'/'Results for timespan' "
                      f"text); it starts with {head!r}", path=path)


def _run_ids(data: bytes, n: int) -> list[str]:
    base = file_run_id(data)
    return [base] if n == 1 else [f"{base}-{k}" for k in range(1, n + 1)]


# ---- XML ------------------------------------------------------------------------------------------


def _x(el: ET.Element | None, tag: str, conv=str, default: Any = None, *, where: str = "", path: str = "") -> Any:
    found = el.findall(tag) if el is not None else []
    if len(found) > 1:  # ElementTree's find() would take the first and drop the other in silence
        raise IngestError(f"{where or el.tag}: <{tag}> appears {len(found)} times (DiskSPD writes it once; an edited "
                          "or concatenated file?)", path=path)
    child = found[0] if found else None
    if child is None or child.text is None or not child.text.strip():
        if default is not None or where == "":
            return default
        raise IngestError(f"{where}: missing <{tag}>", path=path)
    try:
        return conv(child.text.strip())
    except ValueError:
        raise IngestError(f"{where}/<{tag}> must be {getattr(conv, 'what', 'a number')}, got {child.text.strip()!r}",
                          path=path) from None


def _count(text: str) -> int:
    """A DiskSPD I/O or byte count: an integer from 0 to 2**63-1 (DiskSPD's are UINT64 of what it did;
    a negative one is not a count, and one past int64 cannot be stored): ValueError otherwise."""
    v = int(text)
    if not 0 <= v <= 2**63 - 1:
        raise ValueError(f"{text!r} is not a count from 0 to 2**63-1")
    return v


_count.what = "a count from 0 to 2**63-1"  # type: ignore[attr-defined]


def _check_time(t: float, what: str, path: str) -> None:
    """DiskSPD prints its measured time with 2 decimals ("%.2f"): a time it wrote is >= 0.01 s and finite.
    0 is a test interrupted before measuring; anything else (1e-300, inf, a negative time) was not
    written by DiskSPD, and IOPS over it would be invented."""
    if t == 0:
        raise IngestError(f"{what} is 0 s: the test was interrupted before measuring", path=path)
    if not 0.01 <= t < 1e9:
        raise IngestError(f"{what} is {t!r} s: DiskSPD prints a measured time of 0.01 s or more with 2 decimals "
                          "(allowed 0.01 to 1e9 s)", path=path)


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _utc(text: str | None) -> datetime | None:
    if not text:
        return None
    t = text.strip().removesuffix("UTC").strip()
    for fmt in ("%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(t, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


def parse_diskspd_xml(data: bytes, path: str = "<bytes>") -> DiskSpdResult:
    """Parse DiskSPD ``-Rxml`` output (2.0.16b .. 2.2). See the module docstring for the rules.

    Raises
    ------
    IngestError
        Undecodable bytes, not well-formed XML (e.g. truncated), a DTD/entity declaration
        (defusedxml refuses it), a root other than ``<Results>``, a ``<TimeSpan>`` without
        ``<TestTimeSeconds>`` or without ``<Thread><Target>`` counts, counts that do not add up
        (``IOCount != ReadCount + WriteCount``), or a thread count that disagrees with the threads listed.
    """
    text, enc = decode_text(data, path)
    try:
        if "<!DOCTYPE" in text:  # only a DTD can declare entities: defusedxml refuses it
            root = DET.fromstring(text, forbid_dtd=True)
        else:  # no DTD, no entities beyond XML's five: the stdlib's C parser is safe and fast
            root = ET.fromstring(data[3:] if enc == "utf-8" and data[:3] == b"\xef\xbb\xbf" else
                                 (data if enc == "utf-8" else text))
    except defusedxml.DTDForbidden:
        raise IngestError("refused: the XML declares a DTD (DiskSPD never writes one; entity expansion "
                          "is how XML bombs work)", path=path) from None
    except (defusedxml.EntitiesForbidden, defusedxml.ExternalReferenceForbidden) as exc:
        raise IngestError(f"refused: the XML declares entities ({type(exc).__name__}; XML bomb or external "
                          "reference)", path=path) from None
    except ET.ParseError as exc:
        raise IngestError(f"not well-formed XML ({exc}); truncated file?", path=path) from None
    if root.tag != "Results":
        raise IngestError(f"XML root is <{root.tag}>, expected DiskSPD's <Results>", path=path)
    system = root.find("System")
    computer = _x(system, "ComputerName", default="") or ""
    version = _x(system, "Tool/Version", default="") or ""
    started = _utc(_x(system, "RunTime", default=""))
    prof_spans = root.findall("Profile/TimeSpans/TimeSpan")
    res_spans = root.findall("TimeSpan")
    if not res_spans:
        raise IngestError("no <TimeSpan> results in the XML (DiskSPD interrupted, or a profile (-X) file?)",
                          path=path)
    runs = []
    for i, ts in enumerate(res_spans, start=1):
        where = f"TimeSpan {i}"
        prof = prof_spans[i - 1] if i - 1 < len(prof_spans) else None
        run = _xml_timespan(ts, prof, i, where, path)
        run.version, run.computer_name, run.started_at, run.layout = version, computer, started, "xml"
        runs.append(run)
    return DiskSpdResult(path=path, encoding=enc, runs=runs, run_ids=_run_ids(data, len(runs)))


def _xml_timespan(ts: ET.Element, prof: ET.Element | None, i: int, where: str, path: str) -> DiskSpdRun:
    t = _x(ts, "TestTimeSeconds", float, where=where, path=path)
    _check_time(t, f"{where}: TestTimeSeconds", path)
    run = DiskSpdRun(timespan=i, run_index=1, source="xml", test_time_s=t)
    threads = ts.findall("Thread")
    sums = {"read": [0, 0], "write": [0, 0]}
    for th in threads:
        tid = _x(th, "Id", int, default=-1, where=f"{where}/Thread", path=path)
        seen_paths: set[str] = set()
        for tg in th.findall("Target"):
            w = f"{where}/Thread {tid}/Target"
            rc, wc = _x(tg, "ReadCount", _count, where=w, path=path), _x(tg, "WriteCount", _count, where=w, path=path)
            rb, wb = _x(tg, "ReadBytes", _count, where=w, path=path), _x(tg, "WriteBytes", _count, where=w, path=path)
            ioc = _x(tg, "IOCount", _count, default=rc + wc, where=w, path=path)
            bc = _x(tg, "BytesCount", _count, default=rb + wb, where=w, path=path)
            tpath = _x(tg, "Path", default="", where=w, path=path) or ""
            if tpath in seen_paths:
                raise IngestError(f"{w}: target {tpath!r} is listed twice in thread {tid} (DiskSPD writes one <Target> "
                                  "per path per thread; counting it twice would double its I/Os)", path=path)
            seen_paths.add(tpath)
            if ioc != rc + wc or bc != rb + wb:
                raise IngestError(f"{w}: IOCount {ioc} / BytesCount {bc} != ReadCount + WriteCount {rc + wc} / "
                                  f"ReadBytes + WriteBytes {rb + wb}: the counts do not add up (edited file?)",
                                  path=path)
            row = {"thread": tid, "path": tpath, "read_ios": rc, "read_bytes": rb,
                   "write_ios": wc, "write_bytes": wb}
            lat = _x(tg, "AverageLatencyMilliseconds", float, default=math.nan)
            if not math.isnan(lat):
                row["lat_mean_ns"] = lat * NS_PER_MS
                row["lat_stdev_ns"] = _x(tg, "LatencyStdev", float, default=math.nan) * NS_PER_MS
            run.targets.append(row)
            sums["read"][0] += rc
            sums["read"][1] += rb
            sums["write"][0] += wc
            sums["write"][1] += wb
    if not run.targets:
        raise IngestError(f"{where}: no <Thread><Target> results (trimmed file?)", path=path)
    declared = _x(ts, "ThreadCount", int, default=len(threads))
    per_file = prof is None or _x(prof, "ThreadCount", int, default=0) == 0
    if per_file and declared != len(threads):
        raise IngestError(f"{where}: ThreadCount is {declared} but {len(threads)} <Thread> results are listed "
                          "(trimmed file?)", path=path)
    run.thread_count = declared
    lat = ts.find("Latency")
    means = {}
    if lat is not None:
        for d, tag, sd in (("read", "AverageReadMilliseconds", "ReadLatencyStdev"),
                           ("write", "AverageWriteMilliseconds", "WriteLatencyStdev")):
            m = _x(lat, tag, float, default=math.nan)
            means[d] = (m * NS_PER_MS, _x(lat, sd, float, default=math.nan) * NS_PER_MS)
        seen = set()
        for b in lat.iterfind("Bucket"):
            kv = {c.tag: c.text for c in b}  # one pass over the bucket's children
            try:
                p = float(kv["Percentile"])
                vals = [float(kv[t]) * NS_PER_MS if t in kv else math.nan
                        for t in ("ReadMilliseconds", "WriteMilliseconds", "TotalMilliseconds")]
            except (KeyError, TypeError, ValueError):
                raise IngestError(f"{where}/Latency/Bucket needs a numeric <Percentile> and numeric "
                                  f"Read/Write/TotalMilliseconds, got {kv}", path=path) from None
            if p in seen:
                raise IngestError(f"{where}/Latency: percentile {p:g} listed twice", path=path)
            seen.add(p)
            run.percentiles.append((p, *vals))
        run.percentiles.sort()
    iops_std = {}
    iops = ts.find("Iops")
    if iops is not None:
        iops_std = {"read": _x(iops, "ReadIopsStdDev", float, default=math.nan),
                    "write": _x(iops, "WriteIopsStdDev", float, default=math.nan)}
        for b in iops.findall("Bucket"):
            a = b.attrib
            try:
                ms = float(a["SampleMillisecond"])
                vals = (float(a.get("Read", 0)), float(a.get("Write", 0)), float(a.get("Total", 0)))
            except (KeyError, ValueError):
                raise IngestError(f"{where}/Iops/Bucket needs numeric SampleMillisecond, Read, Write, Total; "
                                  f"got {dict(a)}", path=path) from None
            rl = float(a["ReadAvgLatencyMilliseconds"]) if "ReadAvgLatencyMilliseconds" in a else math.nan
            wl = float(a["WriteAvgLatencyMilliseconds"]) if "WriteAvgLatencyMilliseconds" in a else math.nan
            run.series.append((ms / 1000.0, *vals, rl, wl))
        run.series.sort()
    for d, (ios, nbytes) in sums.items():
        run.totals[d] = {"ios": ios, "bytes": nbytes, "iops": ios / t, "bw_bytes_per_s": nbytes / t,
                         "lat_mean_ns": means.get(d, (math.nan,))[0],
                         "lat_stdev_ns": means.get(d, (math.nan, math.nan))[1],
                         "iops_stdev": iops_std.get(d, math.nan)}
    run.workload = _xml_workload(prof, declared)
    return run


def _xml_workload(prof: ET.Element | None, threads: int) -> dict:
    if prof is None:
        return {"numjobs": threads}
    targets = []
    for tg in prof.findall("Targets/Target"):
        random = tg.find("Random") is not None
        rnd_ratio = _x(tg, "RandomRatio", float, default=math.nan)
        targets.append({
            "path": _x(tg, "Path", default="") or "",
            "bs": _x(tg, "BlockSize", int, default=-1),
            "write_ratio": _x(tg, "WriteRatio", float, default=math.nan),
            "random_pct": (rnd_ratio if not math.isnan(rnd_ratio) else 100.0) if random else 0.0,
            "qd": _x(tg, "RequestCount", int, default=-1),
            "direct": _x(tg, "DisableOSCache", _bool, default=False) or _x(tg, "DisableAllCache", _bool, default=False),
        })
    pool = _x(prof, "ThreadCount", int, default=0)
    per_thread_o = _x(prof, "RequestCount", int, default=0)
    if pool > 0:  # -F: every thread works on every target
        qd = per_thread_o if per_thread_o > 0 else (sum(t["qd"] for t in targets) if targets else -1)
    else:  # -t: one target per thread
        qd = _same([t["qd"] for t in targets], -1)
    w = _workload_fields(targets, qd, threads)
    w.update(duration_s=_x(prof, "Duration", float, default=math.nan),
             warmup_s=_x(prof, "Warmup", float, default=math.nan),
             cooldown_s=_x(prof, "Cooldown", float, default=math.nan))
    return w


def _same(values: list, unknown: Any) -> Any:
    """The one value every target has, or ``unknown`` (targets differ, a value is missing, no targets)."""
    if not values or any(isinstance(v, float) and math.isnan(v) for v in values):
        return unknown
    return values[0] if all(v == values[0] for v in values) else unknown


def _workload_fields(targets: list[dict], qd: int, threads: int) -> dict:
    """Factor columns from per-target profile values (fio names; unknown where targets differ)."""
    bs = _same([t["bs"] for t in targets], -1)
    wr = _same([t["write_ratio"] for t in targets], math.nan)
    rnd = _same([t["random_pct"] for t in targets], math.nan)
    mix = 100.0 - wr if not math.isnan(wr) else math.nan
    if math.isnan(mix) or math.isnan(rnd):
        rw = ""
    else:
        family = "read" if mix == 100 else ("write" if mix == 0 else "rw")
        rw = ("rand" + family) if rnd > 0 else family
    return {"rw": rw, "bs_bytes": int(bs), "rwmixread_pct": float(mix), "random_pct": float(rnd),
            "iodepth": int(qd) if qd is not None else -1, "numjobs": int(threads),
            "direct": bool(targets) and all(t["direct"] for t in targets),
            "target": ";".join(dict.fromkeys(t["path"] for t in targets))}


# ---- text -----------------------------------------------------------------------------------------

_RUN_START = re.compile(r"^\s*Input parameters:\s*$")
_CMDLINE = re.compile(r"^\s*Command Line:\s*(.*)$")
_RESULTS = re.compile(r"^\s*Results for timespan\s+(\d+):\s*$")
_SECTION = {"Total IO": "total", "Read IO": "read", "Write IO": "write"}


def _unwrap(lines: list[str]) -> list[str]:
    """Re-join lines a console wrapped at a fixed width (80 by default in cmd.exe).

    Evidence of wrapping: a DiskSPD table header (``thread | bytes ...``) that does not end with
    ``file``; the width is then the length of that broken header line, and every line of exactly
    that length is joined with the one after it.
    """
    width = None
    for ln in lines:
        if ln.lstrip().startswith("thread |") and not ln.rstrip().endswith("file"):
            width = len(ln)
            break
    if width is None:
        return lines
    out: list[str] = []
    buf = ""
    for ln in lines:
        buf += ln
        if len(ln) == width:
            continue
        out.append(buf)
        buf = ""
    if buf:
        out.append(buf)
    return out


def _size(text: str) -> int:
    m = _SIZE.match(text)
    if not m:
        return -1
    unit = m.group(2)
    mult = _UNITS.get(unit, _UNITS.get(unit.rstrip("B"), None))
    if mult is None:
        return -1
    return int(round(float(m.group(1)) * mult))


def _num(text: str) -> float:
    t = text.strip()
    if t in ("N/A", ""):
        return math.nan
    return float(t)


def parse_diskspd_text(data: bytes, path: str = "<bytes>", *, strict: bool = True) -> DiskSpdResult:
    """Parse DiskSPD's text report (pre-2.0.18 "MB/s", 2.0.18 .. 2.1, 2.2 layouts).

    Several runs pasted into one file are split at ``Input parameters:`` (with the ``Command Line:``
    before it); each ``Results for timespan N`` of a run is one :class:`DiskSpdRun`. The ``Totals:``
    section DiskSPD prints across timespans is a sum of them and is not read.

    Raises
    ------
    IngestError
        No results; a ``Total IO``/``Read IO``/``Write IO`` table without its ``total:`` line; per-thread
        rows that do not sum to the ``total:`` row, or read + write totals that do not equal the
        ``Total IO`` total, or a ``total:`` IOPS / MiB/s that does not match I/Os / bytes over the
        printed test time (a trimmed or edited excerpt) — with ``strict=False`` such runs are dropped
        instead and listed in ``problems``.
    """
    text, enc = decode_text(data, path)
    lines = _unwrap(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    starts = [i for i, ln in enumerate(lines) if _RUN_START.match(ln)]
    starts = [i - _cmd_offset(lines, i) for i in starts]
    if not starts:
        starts = [0]
    elif starts[0] > 0 and any(_RESULTS.match(ln) for ln in lines[:starts[0]]):
        starts.insert(0, 0)  # results before the first 'Input parameters:' (an excerpt)
    bounds = list(zip(starts, starts[1:] + [len(lines)], strict=True))
    runs: list[DiskSpdRun] = []
    problems: list[str] = []
    for k, (a, b) in enumerate(bounds, start=1):
        label = f"run {k} of {len(bounds)} (lines {a + 1}-{b})"
        try:
            runs.extend(_text_run(lines[a:b], k, label, path))
        except IngestError as exc:
            if strict:
                raise
            problems.append(exc.reason)
    if not runs:
        if problems:
            raise IngestError("no run of the file could be read: " + "; ".join(problems), path=path)
        raise IngestError("no 'Results for timespan' section: not a complete DiskSPD text report", path=path)
    return DiskSpdResult(path=path, encoding=enc, runs=runs, run_ids=_run_ids(data, len(runs)), problems=problems)


def _cmd_offset(lines: list[str], i: int) -> int:
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return i - j if j >= 0 and _CMDLINE.match(lines[j]) else 0


def _text_run(lines: list[str], run_index: int, label: str, path: str) -> list[DiskSpdRun]:
    cmdline = ""
    for ln in lines[:5]:
        m = _CMDLINE.match(ln)
        if m:
            cmdline = m.group(1).strip()
    res_idx = [(i, int(m.group(1))) for i, ln in enumerate(lines) if (m := _RESULTS.match(ln))]
    if not res_idx:
        if any("interrupted before the measurements began" in ln for ln in lines):
            raise IngestError(f"{label}: DiskSPD says the test was interrupted before the measurements began",
                              path=path)
        raise IngestError(f"{label}: no 'Results for timespan' section (trimmed excerpt?)", path=path)
    params = _text_params(lines[:res_idx[0][0]])
    computer, started = "", None
    for ln in lines[:res_idx[0][0]]:
        s = ln.strip()
        if s.startswith("computer name:"):
            computer = s.split(":", 1)[1].strip()
        elif s.startswith("start time:"):
            started = _utc(s.split(":", 1)[1])
    out = []
    for j, (i, n) in enumerate(res_idx):
        end = res_idx[j + 1][0] if j + 1 < len(res_idx) else len(lines)
        block = lines[i:end]
        for stop, ln in enumerate(block):
            if ln.strip() == "Totals:":
                block = block[:stop]
                break
        where = f"{label}, timespan {n}"
        run = _text_timespan(block, n, where, path)
        run.run_index, run.cmdline, run.computer_name, run.started_at = run_index, cmdline, computer, started
        p = params[n - 1] if n - 1 < len(params) else None
        run.workload = _text_workload(p, run.thread_count)
        out.append(run)
    return out


def _text_params(lines: list[str]) -> list[dict]:
    """Per timespan: duration, warm-up, cool-down and the target blocks of 'Input parameters:'."""
    spans: list[dict] = []
    cur: dict | None = None
    tgt: dict | None = None
    for ln in lines:
        s = ln.strip()
        if s.startswith("timespan:"):
            cur = {"targets": [], "pool": 0, "pool_o": 0}
            spans.append(cur)
            tgt = None
            continue
        if cur is None:
            continue
        key, _, val = s.partition(":")
        val = val.strip()
        if s.startswith("path:"):
            tgt = {"path": val.strip("'"), "bs": -1, "write_ratio": math.nan, "random_pct": math.nan, "qd": -1,
                   "direct": False}
            cur["targets"].append(tgt)
        elif key in ("duration", "warm up time", "cool down time"):
            cur[key] = _num(val.rstrip("s")) if val.rstrip("s").replace(".", "", 1).isdigit() else math.nan
        elif key == "total threads":
            cur["pool"] = int(val) if val.isdigit() else 0
        elif key == "requests per thread":
            cur["pool_o"] = int(val) if val.isdigit() else 0
        elif tgt is not None:
            if s == "performing read test":
                tgt["write_ratio"] = 0.0
            elif s == "performing write test":
                tgt["write_ratio"] = 100.0
            elif s.startswith("performing mix test"):
                m = re.search(r"(\d+)\s*/\s*(\d+)", s)
                if m:
                    tgt["write_ratio"] = float(m.group(2))
            elif key == "block size":
                tgt["bs"] = _size(val)
            elif s.startswith("using random I/O"):
                tgt["random_pct"] = 100.0
            elif "sequential I/O" in s and s.startswith("using"):
                tgt["random_pct"] = 0.0
                if "interlocked" in s:
                    tgt["interlocked"] = True
            elif s.startswith("number of outstanding I/O operations"):
                tgt["qd"] = int(val) if val.isdigit() else -1
            elif key == "threads per file":
                tgt["threads_per_file"] = int(val) if val.isdigit() else -1
            elif s == "software cache disabled":
                tgt["direct"] = True
            m = re.search(r"\((\d+(?:\.\d+)?)%\s*random\)", s)
            if m:
                tgt["random_pct"] = float(m.group(1))
    return spans


def _text_workload(p: dict | None, threads: int) -> dict:
    if p is None:
        return {"numjobs": threads}
    targets = p["targets"]
    if p.get("pool", 0) > 0:
        qd = p["pool_o"] if p.get("pool_o", 0) > 0 else (sum(t["qd"] for t in targets) if targets else -1)
    else:
        qd = _same([t["qd"] for t in targets], -1)
    w = _workload_fields(targets, qd, threads)
    w.update(duration_s=p.get("duration", math.nan), warmup_s=p.get("warm up time", math.nan),
             cooldown_s=p.get("cool down time", math.nan))
    return w


def _text_timespan(block: list[str], n: int, where: str, path: str) -> DiskSpdRun:
    run = DiskSpdRun(timespan=n, run_index=1, source="text")
    layout = "2.0.18-2.1"
    for ln in block:
        s = ln.strip()
        if s.startswith("actual test time:"):
            run.test_time_s = _num(s.split(":", 1)[1].strip().rstrip("s"))
        elif s.startswith("thread count:"):
            run.thread_count = int(s.split(":", 1)[1])
        elif s.startswith("Core |") or s.startswith("Total latency distribution"):
            layout = "2.2"
    if math.isnan(run.test_time_s):
        raise IngestError(f"{where}: no 'actual test time:' line (trimmed excerpt?)", path=path)
    _check_time(run.test_time_s, f"{where}: actual test time", path)
    tables = {}
    for i, ln in enumerate(block):
        name = _SECTION.get(ln.strip())
        if name and name not in tables:
            tables[name] = _section(block, i + 1, f"{where}, {ln.strip()} table", path)
    missing = [k for k in ("total", "read", "write") if k not in tables]
    if missing:
        raise IngestError(f"{where}: no {' / '.join(m.title() + ' IO' for m in missing)} table (trimmed excerpt?)",
                          path=path)
    if any(t["mb_header"] for t in tables.values()):
        layout = "pre-2.0.18"
    run.layout = layout
    _check_text(tables, run.test_time_s, where, path)
    run.percentiles = _text_percentiles(block, where, path)
    for d in ("read", "write"):
        tot = tables[d]["total"]
        ios, nbytes, iops = tot["ios"], tot["bytes"], tot["iops"]
        bw = nbytes * iops / ios if ios else 0.0
        run.totals[d] = {"ios": ios, "bytes": nbytes, "iops": iops, "bw_bytes_per_s": bw,
                         "lat_mean_ns": tot.get("avglat", math.nan) * NS_PER_MS,
                         "lat_stdev_ns": tot.get("latstd", math.nan) * NS_PER_MS,
                         "iops_stdev": tot.get("iopsstd", math.nan)}
    for r in tables["total"]["rows"]:
        rd = next((x for x in tables["read"]["rows"] if x["key"] == r["key"]), None)
        wr = next((x for x in tables["write"]["rows"] if x["key"] == r["key"]), None)
        row = {"thread": r["thread"], "path": r["file"], "read_ios": rd["ios"] if rd else -1,
               "read_bytes": rd["bytes"] if rd else -1, "write_ios": wr["ios"] if wr else -1,
               "write_bytes": wr["bytes"] if wr else -1}
        if "avglat" in r:
            row["lat_mean_ns"] = r["avglat"] * NS_PER_MS
            row["lat_stdev_ns"] = r.get("latstd", math.nan) * NS_PER_MS
        run.targets.append(row)
    if run.thread_count < 0:
        run.thread_count = len({r["thread"] for r in tables["total"]["rows"]})
    return run


def _section(block: list[str], start: int, where: str, path: str) -> dict:
    """One ``thread | bytes | I/Os | MiB/s | I/O per s [| AvgLat] [| IopsStdDev] [| LatStdDev] | file`` table."""
    i = start
    while i < len(block) and not block[i].strip():
        i += 1
    if i >= len(block) or not block[i].strip().startswith("thread"):
        raise IngestError(f"{where}: no 'thread | bytes | I/Os ...' header (trimmed excerpt?)", path=path)
    header = [h.strip() for h in block[i].split("|")]
    mb_header = "MB/s" in header
    cols = {name: k for k, name in enumerate(header)}
    need = ["thread", "bytes", "I/Os", "I/O per s"]
    if any(c not in cols for c in need) or ("MiB/s" not in cols and "MB/s" not in cols):
        raise IngestError(f"{where}: unexpected header {block[i].strip()!r}", path=path)
    mib = cols.get("MiB/s", cols.get("MB/s"))
    extra = {"AvgLat": "avglat", "IopsStdDev": "iopsstd", "LatStdDev": "latstd"}
    rows, total = [], None
    i += 1
    for j in range(i, len(block)):
        s = block[j].strip()
        if not s or set(s) == {"-"}:
            continue
        if s.startswith("total:"):
            parts = [p.strip() for p in s[len("total:"):].split("|")]
            # the total row has no thread column and no file column
            vals = dict(zip(header[1:], parts, strict=False))
            total = _nums(vals, header, mib, extra, where, path, "total:")
            break
        if not re.match(r"^\d+\s*\|", s):
            break  # end of the table without a total: line
        parts = [p.strip() for p in s.split("|")]
        if len(parts) < len(header):
            raise IngestError(f"{where}: row {s[:60]!r} has {len(parts)} fields, the header {len(header)} "
                              "(cut line?)", path=path)
        vals = dict(zip(header, parts[:len(header) - 1] + ["|".join(parts[len(header) - 1:])], strict=True))
        row = _nums(vals, header, mib, extra, where, path, f"thread {vals['thread']}")
        row["thread"] = int(vals["thread"])
        row["file"] = re.sub(r"\s*\([^()]*\)\s*$", "", vals.get("file", ""))
        row["key"] = (row["thread"], vals.get("file", ""))
        rows.append(row)
    if total is None:
        raise IngestError(f"{where}: no 'total:' line (trimmed excerpt?)", path=path)
    return {"rows": rows, "total": total, "mb_header": mb_header}


def _nums(vals: dict, header: list[str], mib: int, extra: dict, where: str, path: str, what: str) -> dict:
    try:
        out = {"bytes": _count(vals["bytes"]), "ios": _count(vals["I/Os"]), "mib_s": float(vals[header[mib]]),
               "iops": float(vals["I/O per s"])}
        for name, key in extra.items():
            if name in vals:
                out[key] = _num(vals[name])
    except (KeyError, ValueError) as exc:
        raise IngestError(f"{where}: {what} row is not numbers ({exc}; cut line?)", path=path) from None
    return out


def _check_text(tables: dict, t: float, where: str, path: str) -> None:
    """A trimmed or edited excerpt does not add up: refuse it."""
    for name, tab in tables.items():
        tot = tab["total"]
        for key in ("bytes", "ios"):
            s = sum(r[key] for r in tab["rows"])
            if s != tot[key]:
                label = {"bytes": "bytes", "ios": "I/Os"}[key]
                raise IngestError(f"{where}: the {name.title()} IO rows sum to {s} {label} but its total: line "
                                  f"says {tot[key]} (trimmed excerpt?)", path=path)
        lo, hi = t - 0.005, t + 0.005  # 'actual test time' is printed with 2 decimals
        for what, row in [("total:", tot)] + [(f"thread {r['thread']}", r) for r in tab["rows"]]:
            for key, scale, label in (("ios", 1.0, "I/O per s"), ("bytes", MIB, "MiB/s")):
                printed = row["iops" if key == "ios" else "mib_s"]
                q = row[key] / scale
                if not (q / hi - 0.0051 <= printed <= q / lo + 0.0051):
                    raise IngestError(f"{where}: {name.title()} IO {what} {label} {printed} does not match "
                                      f"{row[key]} / {t:.2f} s (trimmed or edited excerpt?)", path=path)
    for key in ("bytes", "ios"):
        if tables["read"]["total"][key] + tables["write"]["total"][key] != tables["total"]["total"][key]:
            raise IngestError(f"{where}: Read IO + Write IO totals ({tables['read']['total'][key]} + "
                              f"{tables['write']['total'][key]}) != Total IO total ({tables['total']['total'][key]}) "
                              "(trimmed excerpt?)", path=path)


def _text_percentiles(block: list[str], where: str, path: str) -> list[tuple]:
    """The aggregate ``%-ile | Read (ms) | Write (ms) | Total (ms)`` table (``total:`` / ``Total latency
    distribution:``); per-target tables before it are skipped."""
    start = None
    for i, ln in enumerate(block):
        s = ln.strip()
        if s in ("total:", "Total latency distribution:"):
            nxt = next((block[j].strip() for j in range(i + 1, min(i + 3, len(block))) if block[j].strip()), "")
            if nxt.startswith("%-ile"):
                start = i
    if start is None:
        return []
    out = []
    seen = set()
    for ln in block[start + 1:]:
        s = ln.strip()
        if not s or s.startswith("%-ile") or set(s) == {"-"}:
            if out and not s:
                break
            continue
        parts = [p.strip() for p in s.split("|")]
        if len(parts) != 4 or parts[0] not in _TEXT_PCT:
            break
        p = _TEXT_PCT[parts[0]]
        if p in seen:
            raise IngestError(f"{where}: percentile row {parts[0]!r} listed twice", path=path)
        seen.add(p)
        try:
            out.append((p, *(_num(v) * NS_PER_MS for v in parts[1:])))
        except ValueError:
            raise IngestError(f"{where}: latency row {s!r} is not numbers", path=path) from None
    return out


# ---- the formats of this module, registered for the ingest (storagebench.ingest.loadgen.FORMATS) ------------

_TEXT_MARKERS = ("Input parameters:", "Results for timespan", "actual test time:")


def _is_xml(text: str) -> bool:
    return text[0] == "<" and "<Results" in text[:4096]


def _is_linux_text(text: str) -> bool:
    return text[0] != "<" and "Results for job" in text and ("System info:" in text or "test time:" in text)


def _is_text(text: str) -> bool:
    return text[0] != "<" and any(m in text for m in _TEXT_MARKERS) and (
        "thread |" in text or "timespan:" in text or "actual test time:" in text)


register(Format("diskspd-xml", _is_xml, lambda data, path: parse_diskspd_xml(data, path).rows(),
                fixtures="diskspd", priority=10))
register(Format("diskspd-linux", _is_linux_text, refusal=(
    "DiskSPD for Linux text output (microsoft/diskspd-for-linux) is not ingested: it divides IOPS and MB/s by "
    "the configured duration, not a measured time, and its 'Total' latency column over-counts with more than "
    "one target (src/result_formatter.cc)"), priority=40))
register(Format("diskspd-text", _is_text, lambda data, path: parse_diskspd_text(data, path).rows(),
                fixtures="diskspd", priority=50))

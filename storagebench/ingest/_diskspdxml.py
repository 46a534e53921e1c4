"""DiskSPD's ``-Rxml`` XML result (private part of :mod:`storagebench.ingest.diskspd`): read through defusedxml
(no DTD, no entities), one :class:`~storagebench.ingest.diskspd.DiskSpdRun` per timespan."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import defusedxml
import defusedxml.ElementTree as DET

from ..errors import IngestError
from ._diskspdruns import (
    DiskSpdResult,
    DiskSpdRun,
    _check_time,
    _count,
    _run_ids,
    _same,
    _utc,
    _workload_fields,
)
from .loadgen import (
    NS_PER_MS,
    decode_text,
)


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


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


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
    means = _xml_latency(ts.find("Latency"), run, where, path)
    iops_std = _xml_iops(ts.find("Iops"), run, where, path)
    for d, (ios, nbytes) in sums.items():
        run.totals[d] = {"ios": ios, "bytes": nbytes, "iops": ios / t, "bw_bytes_per_s": nbytes / t,
                         "lat_mean_ns": means.get(d, (math.nan,))[0],
                         "lat_stdev_ns": means.get(d, (math.nan, math.nan))[1],
                         "iops_stdev": iops_std.get(d, math.nan)}
    run.workload = _xml_workload(prof, declared)
    return run


def _xml_latency(lat: ET.Element | None, run: DiskSpdRun, where: str, path: str) -> dict:
    """A timespan's ``<Latency>``: its percentile buckets added to ``run.percentiles`` (ns, sorted); returns
    ``{direction: (mean, stdev)}`` in ns."""
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
    return means


def _xml_iops(iops: ET.Element | None, run: DiskSpdRun, where: str, path: str) -> dict:
    """A timespan's ``<Iops>``: its sample buckets added to ``run.series`` (s, sorted); returns
    ``{direction: IOPS standard deviation}``."""
    iops_std = {}
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
    return iops_std


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

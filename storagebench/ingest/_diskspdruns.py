"""What a DiskSPD result holds (private part of :mod:`storagebench.ingest.diskspd`, which re-exports its public
names): :class:`DiskSpdRun` and :class:`DiskSpdResult` with their ``runs``/``timeseries`` rows, and what the XML and
the text reader share."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from ..errors import IngestError
from ..schema import PERCENTILES, percentile_column
from .fio import file_run_id
from .loadgen import (
    NS_PER_MS,
    LoadgenRows,
    never_crash,
    run_row,
    unexplained_nan,
)

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


def _run_ids(data: bytes, n: int) -> list[str]:
    base = file_run_id(data)
    return [base] if n == 1 else [f"{base}-{k}" for k in range(1, n + 1)]


def _check_time(t: float, what: str, path: str) -> None:
    """DiskSPD prints its measured time with 2 decimals ("%.2f"): a time it wrote is >= 0.01 s and finite.
    0 is a test interrupted before measuring; anything else (1e-300, inf, a negative time) was not
    written by DiskSPD, and IOPS over it would be invented."""
    if t == 0:
        raise IngestError(f"{what} is 0 s: the test was interrupted before measuring", path=path)
    if not 0.01 <= t < 1e9:
        raise IngestError(f"{what} is {t!r} s: DiskSPD prints a measured time of 0.01 s or more with 2 decimals "
                          "(allowed 0.01 to 1e9 s)", path=path)


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


def _count(text: str) -> int:
    """A DiskSPD I/O or byte count: an integer from 0 to 2**63-1 (DiskSPD's are UINT64 of what it did;
    a negative one is not a count, and one past int64 cannot be stored): ValueError otherwise."""
    v = int(text)
    if not 0 <= v <= 2**63 - 1:
        raise ValueError(f"{text!r} is not a count from 0 to 2**63-1")
    return v


_count.what = "a count from 0 to 2**63-1"  # type: ignore[attr-defined]

"""DiskSPD's default text report (private part of :mod:`storagebench.ingest.diskspd`): the input parameters,
the results of each timespan and its latency percentiles, one :class:`~storagebench.ingest.diskspd.DiskSpdRun` per
timespan."""

from __future__ import annotations

import math
import re

from ..errors import IngestError
from ._diskspdruns import (
    _SIZE,
    _TEXT_PCT,
    _UNITS,
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
    MIB,
    NS_PER_MS,
    decode_text,
)

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
            total = _nums(vals, header[mib], extra, where, path, "total:")
            break
        if not re.match(r"^\d+\s*\|", s):
            break  # end of the table without a total: line
        parts = [p.strip() for p in s.split("|")]
        if len(parts) < len(header):
            raise IngestError(f"{where}: row {s[:60]!r} has {len(parts)} fields, the header {len(header)} "
                              "(cut line?)", path=path)
        vals = dict(zip(header, parts[:len(header) - 1] + ["|".join(parts[len(header) - 1:])], strict=True))
        row = _nums(vals, header[mib], extra, where, path, f"thread {vals['thread']}")
        row["thread"] = int(vals["thread"])
        row["file"] = re.sub(r"\s*\([^()]*\)\s*$", "", vals.get("file", ""))
        row["key"] = (row["thread"], vals.get("file", ""))
        rows.append(row)
    if total is None:
        raise IngestError(f"{where}: no 'total:' line (trimmed excerpt?)", path=path)
    return {"rows": rows, "total": total, "mb_header": mb_header}


def _nums(vals: dict, mib_key: str, extra: dict, where: str, path: str, what: str) -> dict:
    """The numbers of one row of a text results table (``mib_key``: its MiB/s column's header)."""
    try:
        out = {"bytes": _count(vals["bytes"]), "ios": _count(vals["I/Os"]), "mib_s": float(vals[mib_key]),
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

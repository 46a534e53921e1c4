#!/usr/bin/env python3
"""For every DiskSPD and Iometer fixture: the totals as ingested against what the tool printed or its rule.

    .venv/bin/python runners/loadgen_fixture_table.py            # the table (markdown), one row per number
    .venv/bin/python runners/loadgen_fixture_table.py --check    # exit 1 when a number differs

"Printed" is read here straight from the file, without storagebench's parsers (a second, independent
reading), and compared at the precision the tool prints it:

* DiskSPD text: the ``total:`` rows of the ``Total IO`` / ``Read IO`` / ``Write IO`` tables (``I/O per s``
  and ``MiB/s``, 2 decimals) and the ``99th`` row of the run's total latency table (``total:`` or
  ``Total latency distribution:``, ms, 3 decimals);
* DiskSPD XML has no totals: DiskSPD's own rule (``ResultParser.cpp``, ``XmlResultParser.cpp``) is the sum
  of ``ReadCount``/``WriteCount`` and ``ReadBytes``/``WriteBytes`` over every ``TimeSpan/Thread/Target``
  divided by ``TimeSpan/TestTimeSeconds`` (itself printed with 2 decimals), compared to 1e-12 relative;
  the text report would print the same values with 2 decimals (shown); p99 is the ``TimeSpan/Latency/Bucket``
  whose ``Percentile`` is 99 (ms, 3 decimals);
* Iometer: the ``ALL`` row of each results block (``IOps``, ``Read IOps``, ``Write IOps``, ``MiBps (Binary)``
  or the 2006 layout's ``MBps``, printed as C++ ``ostream`` prints a double: 6 significant digits); beside
  it Iometer's rule (``Worker::UpdateResults`` summed by the manager list): each worker's I/Os over its
  ``Total Raw Run Time / Processor Speed``, summed. Iometer prints no percentiles. ``runs`` holds one row
  per direction, each as printed, so an ingested total is their sum: it is compared with the printed total
  within the three roundings (half a unit in the last digit of each).

A "total" of DiskSPD is read + write of the ingested rows; a direction without I/O has no row (0, and
no p99: DiskSPD prints ``N/A``).

Whether each fixture is captured (a real run) or constructed comes from its directory's ``SOURCES.tsv``
(``storagebench.published.file_sources``).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

import defusedxml.ElementTree as ET

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storagebench.ingest import ingest_paths  # noqa: E402
from storagebench.published import file_sources  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
MIB = 2**20


def _text(path: Path) -> str:
    data = path.read_bytes()
    for bom, enc in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le")):
        if data.startswith(bom):
            return data[len(bom):].decode(enc)
    return data.decode("utf-8")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.replace("total:", "", 1).split("|")]


def diskspd_text_printed(path: Path) -> dict:
    """{(direction, metric): printed string} from a DiskSPD text report (one run per file here)."""
    lines = _text(path).splitlines()
    out = {}
    for head, direction in (("Total IO", "total"), ("Read IO", "read"), ("Write IO", "write")):
        k = next(i for i, ln in enumerate(lines) if ln.strip() == head)
        header = [c.strip() for c in lines[k + 1].split("|")]
        total = next(ln for ln in lines[k + 1:] if ln.startswith("total:"))
        cells = _cells(total)
        # the header has a leading "thread" column the total: row does not
        named = dict(zip(header[1:], cells, strict=False))
        out[direction, "iops"] = named["I/O per s"]
        out[direction, "MiB/s"] = named.get("MiB/s", named.get("MB/s"))
    starts = [i for i, ln in enumerate(lines) if ln.strip() in ("total:", "Total latency distribution:")]
    if starts:
        k = starts[-1]
        head = [c.strip() for c in lines[k + 1].split("|")]
        row = next(ln for ln in lines[k + 1:] if ln.strip().startswith("99th"))
        named = dict(zip(head, [c.strip() for c in row.split("|")], strict=True))
        for direction, col in (("read", "Read (ms)"), ("write", "Write (ms)")):
            out[direction, "p99 ms"] = named[col]
    return out


def diskspd_xml_rule(path: Path) -> dict:
    """{(direction, metric): value} by DiskSPD's rule from an XML report."""
    root = ET.parse(str(path)).getroot()
    ts = root.find("TimeSpan")
    t = float(ts.findtext("TestTimeSeconds"))
    sums = {k: 0 for k in ("ReadCount", "WriteCount", "ReadBytes", "WriteBytes")}
    for target in ts.iter("Target"):
        for k in sums:
            sums[k] += int(target.findtext(k))
    out = {("read", "iops"): sums["ReadCount"] / t, ("write", "iops"): sums["WriteCount"] / t,
           ("read", "MiB/s"): sums["ReadBytes"] / MIB / t, ("write", "MiB/s"): sums["WriteBytes"] / MIB / t}
    out["total", "iops"] = out["read", "iops"] + out["write", "iops"]
    out["total", "MiB/s"] = out["read", "MiB/s"] + out["write", "MiB/s"]
    lat = ts.find("Latency")
    if lat is not None:
        for bucket in lat.findall("Bucket"):
            if float(bucket.findtext("Percentile")) == 99.0:
                for direction, tag in (("read", "ReadMilliseconds"), ("write", "WriteMilliseconds")):
                    if bucket.findtext(tag) is not None:
                        out[direction, "p99 ms"] = float(bucket.findtext(tag))
    return out


def iometer_printed(path: Path) -> list[dict]:
    """Per results block: {(direction, metric): (printed string, rule value)} from the ALL and WORKER rows."""
    rows = list(csv.reader(io.StringIO(_text(path))))
    blocks, header, workers = [], None, []
    for row in rows:
        if row and row[0] == "'Target Type":
            header, workers = row, []
        elif header and row and row[0] == "ALL":
            all_row = dict(zip(header, row, strict=False))
            blocks.append({"all": all_row, "workers": workers})
        elif header and row and row[0] == "WORKER":
            workers.append(dict(zip(header, row, strict=False)))
    out = []
    for b in blocks:
        a, ws = b["all"], b["workers"]
        mib = "MiBps (Binary)" if "MiBps (Binary)" in a else "MBps"

        def rule(col, ws=ws):
            return sum(int(w[col]) / (int(w["Total Raw Run Time"]) / float(w["Processor Speed"])) for w in ws)

        rec = {("total", "iops"): (a["IOps"], rule("Read I/Os") + rule("Write I/Os")),
               ("read", "iops"): (a["Read IOps"], rule("Read I/Os")),
               ("write", "iops"): (a["Write IOps"], rule("Write I/Os")),
               ("total", "MiB/s"): (a[mib], None),
               ("read", "MiB/s"): (a["Read " + mib], None), ("write", "MiB/s"): (a["Write " + mib], None)}
        out.append(rec)
    return out


def _dec(s: str) -> int:
    return len(s.split(".")[1]) if "." in s else 0


def _half_ulp(printed: str) -> float:
    """Half a unit in the last printed digit of a %g number ("158.711" -> 0.0005, "12813" -> 0.5)."""
    mant = printed.lower().split("e")[0]
    exp = int(printed.lower().split("e")[1]) if "e" in printed.lower() else 0
    return 0.5 * 10.0 ** (exp - _dec(mant))


def _g6(x: float) -> str:
    return f"{x:.6g}"


def ingested(path: Path) -> list[dict]:
    """Per run (in file order): {(direction, metric): value} of the ingested runs table."""
    res = ingest_paths(path)
    if res.errors:
        raise SystemExit(f"{path.name}: {res.errors}")
    out = []
    for _, run in res.runs.groupby("run_id", sort=False):
        rec = {}
        for r in run.itertuples():
            rec[r.direction, "iops"] = r.iops
            rec[r.direction, "MiB/s"] = r.bw_bytes_per_s / MIB
            if not math.isnan(r.clat_p99_ns):
                rec[r.direction, "p99 ms"] = r.clat_p99_ns / 1e6
        for m in ("iops", "MiB/s"):
            rec["total", m] = sum(v for (d, mm), v in rec.items() if mm == m and d in ("read", "write"))
        out.append(rec)
    return out


def table() -> list[dict]:
    files = sorted((FIX / "diskspd").glob("*.xml")) + sorted((FIX / "diskspd").glob("*.txt")) + \
        sorted((FIX / "iometer").glob("*.csv"))
    status = file_sources(files).set_index("file")["status"]
    rows = []
    for path in files:
        got = ingested(path)
        kind = status[path.name]
        if path.suffix == ".txt":
            printed = diskspd_text_printed(path)
            for (direction, metric), text in printed.items():
                value = got[0].get((direction, metric))
                if value is None and float(text.replace("N/A", "nan")) == 0:
                    value = 0.0  # a direction with no I/O: printed 0.00, no row ingested
                shown = "n/a" if value is None else f"{value:.{_dec(text)}f}"
                same = shown == text or (text == "N/A" and value is None)  # no I/O in that direction: no p99
                rows.append(dict(file=path.name, kind=kind, run=1, direction=direction, metric=metric,
                                 printed=text, rule="", ingested=shown, equal=same))
        elif path.suffix == ".xml":
            rule = diskspd_xml_rule(path)
            for (direction, metric), r in rule.items():
                value = got[0].get((direction, metric), 0.0 if r == 0 else None)
                text2 = f"{r:.3f}" if metric == "p99 ms" else f"{r:.2f}"
                same = value is not None and math.isclose(value, r, rel_tol=1e-12, abs_tol=1e-12)
                rows.append(dict(file=path.name, kind=kind, run=1, direction=direction, metric=metric,
                                 printed=f"({text2} in the text report)", rule=repr(round(r, 12)),
                                 ingested="n/a" if value is None else repr(round(value, 12)), equal=same))
        else:
            for k, (block, run) in enumerate(zip(iometer_printed(path), got, strict=True), start=1):
                for (direction, metric), (text, rule) in block.items():
                    value = run.get((direction, metric), 0.0 if float(text) == 0 else None)
                    shown = "n/a" if value is None else _g6(value)
                    same = shown == _g6(float(text)) and (rule is None or _g6(rule) == _g6(float(text)))
                    if not same and value is not None and direction == "total":
                        # runs holds the read and write rows as printed (6 digits each); their sum can differ
                        # from the printed total in its last digit: equal within the three roundings
                        parts = [block["read", metric][0], block["write", metric][0]]
                        tol = sum(_half_ulp(x) for x in [*parts, text])
                        same = abs(value - float(text)) <= tol and (rule is None or _g6(rule) == _g6(float(text)))
                        shown += f" (= {' + '.join(parts)})"
                    rows.append(dict(file=path.name, kind=kind, run=k, direction=direction, metric=metric,
                                     printed=text, rule="" if rule is None else _g6(rule), ingested=shown,
                                     equal=same))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when an ingested number differs")
    args = ap.parse_args()
    rows = table()
    cols = ["file", "kind", "run", "direction", "metric", "printed", "rule", "ingested", "equal"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("yes" if r[c] is True else "NO" if r[c] is False else str(r[c]) for c in cols) + " |")
    bad = [r for r in rows if not r["equal"]]
    print(f"\n{len(rows)} numbers from {len({r['file'] for r in rows})} fixtures; {len(rows) - len(bad)} equal to the "
          f"printed precision (or the tool's rule), {len(bad)} differ")
    return 1 if (bad and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())

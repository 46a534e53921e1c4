"""Iometer results CSV → runs (and histograms), checked against the ALL rows Iometer printed.

Fixtures: tests/fixtures/iometer — all CONSTRUCTED from Iometer's own writers (README.md there;
no permissively licensed real results file was found). Variants built below from them are
constructed too; each says how.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
from pathlib import Path

import pytest

from storagebench.ingest import ingest_paths
from storagebench.ingest.iometer import LATENCY_BINS_NS, parse_iometer, read_iometer
from storagebench.ingest.loadgen import MIB, detect_format

FIX = Path(__file__).parent / "fixtures" / "iometer"
NEW = FIX / "iometer_1.1.0_two_tests.csv"
OLD = FIX / "iometer_2006.07.27_two_managers.csv"

# The ALL rows as printed (Read IOps / Write IOps, Read MiBps (Binary) or Read MBps): Iometer's own totals.
EXPECTED = [
    (NEW, 0, "read", 28535.6, 111.467),
    (NEW, 0, "write", 12094.3, 47.2434),
    (NEW, 1, "read", 4969.83, 310.614),
    (NEW, 2, "read", 12813.0, 800.81),
    (OLD, 0, "read", 3016.34, 23.5651),
]


@pytest.mark.parametrize(("path", "block", "direction", "iops", "mib_s"), EXPECTED,
                         ids=[f"{p.name}:{b}:{d}" for p, b, d, *_ in EXPECTED])
def test_totals_equal_the_all_row(path, block, direction, iops, mib_s):
    res = read_iometer(path)
    rows = [r for r in res.rows().runs if r["run_id"] == res.run_ids[block] and r["direction"] == direction]
    assert len(rows) == 1
    r = rows[0]
    assert r["iops"] == iops and r["bw_bytes_per_s"] / MIB == pytest.approx(mib_s, rel=1e-12)
    # Iometer's rule (Worker::UpdateResults, summed by Manager/ManagerList): each worker's I/Os over its own
    # counter_time / timer resolution, summed -- equal to the printed 6 significant digits
    cap = direction.title()
    workers = [p for p in res.blocks[block].parts if p["type"] == "WORKER"]
    rule = sum(int(w[f"{cap} I/Os"]) / (int(w["Total Raw Run Time"]) / float(w["Processor Speed"])) for w in workers)
    assert rule == pytest.approx(iops, rel=1e-5)
    assert sum(int(w[f"{cap} I/Os"]) for w in workers) == r["total_ios"]
    assert math.isnan(r["clat_p99_ns"])  # Iometer prints no percentiles


def test_two_tests_appended_and_a_cycling_test():
    res = read_iometer(NEW)
    assert [t["version"] for t in res.tests] == ["1.1.0", "1.1.0"]
    assert [t["test_type"] for t in res.tests] == [0, 6]  # 6: cycle # outstanding I/Os
    assert [(b.test, b.block) for b in res.blocks] == [(1, 1), (2, 1), (2, 2)]
    assert len(set(res.run_ids)) == 3
    runs = res.rows().runs
    seed000 = [r for r in runs if r["run_id"] == res.run_ids[0]]
    assert {r["direction"] for r in seed000} == {"read", "write"}
    r = seed000[0]
    assert (r["rw"], r["bs_bytes"], r["rwmixread_pct"], r["random_pct"], r["iodepth"], r["numjobs"]) == (
        "randrw", 4096, 70.0, 100.0, 64, 1)
    assert (r["tool"], r["fio_version"], r["hostname"], r["target"]) == ("iometer", "iometer-1.1.0", "IOA-WORKER-1",
                                                                         "sdb")
    assert r["started_at"] is None  # local time without a zone: not invented
    assert r["lat_mean_ns"] == pytest.approx(1.42891e6)  # Average Read Response Time, ms
    qd = [x["iodepth"] for x in runs if x["job"].startswith("64 KiB")]
    assert qd == [1, 4]  # one block per queue-depth step


def test_2006_layout_mbps_is_mib():
    res = read_iometer(OLD)
    r = res.rows().runs[0]
    # 2006/2008 'MBps' = IOps x 8192 / 2**20 (MEGABYTE 1048576 in IOmeter/src/IOCommon.h @0ff6132)
    assert r["bw_bytes_per_s"] == pytest.approx(r["iops"] * 8192, rel=1e-5)
    assert (r["iodepth"], r["numjobs"]) == (32, 4)  # Queue Depth 16 x 8 disks / 4 workers
    assert r["hostname"] == "SQLHOST1,SQLHOST2" and r["fio_version"] == "iometer-2006.07.27"


def test_parts_are_kept_apart():
    res = read_iometer(OLD)
    parts = res.parts
    assert sorted(parts["type"].unique()) == ["DISK", "MANAGER", "WORKER"]
    assert len(res.rows().runs) == 1  # only the ALL row
    total = res.rows().runs[0]["total_ios"]
    for kind in ("MANAGER", "WORKER", "DISK"):
        assert parts.loc[parts["type"] == kind, "read_ios"].sum() == total


def test_quoted_fields_crlf_bom_from_a_spreadsheet_resave():
    """Re-saved through csv with every field quoted, CRLF and a UTF-8 BOM (constructed): same rows."""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(csv.reader(io.StringIO(NEW.read_text())))
    data = b"\xef\xbb\xbf" + out.getvalue().encode()
    assert data.count(b'"') > 1000
    a = [{k: v for k, v in r.items() if k not in ("run_id", "source_file")} for r in parse_iometer(data, "q").rows().runs]
    b = [{k: v for k, v in r.items() if k not in ("run_id", "source_file")} for r in read_iometer(NEW).rows().runs]
    assert a == b


def test_utf16le_with_bom():
    data = b"\xff\xfe" + NEW.read_text().encode("utf-16-le")
    res = parse_iometer(data, "u16.csv")
    assert res.encoding == "utf-16-le" and len(res.blocks) == 3


def test_latency_bins_go_to_histograms_only_when_they_count_the_ios(tmp_path):
    """1.1.0's ALL-row bins are zeros in the constructed file (as the source writes them): no histogram.
    A variant with bins that sum to read + write I/Os (constructed) gives one 'mixed' histogram."""
    assert read_iometer(NEW).rows().histograms == []
    lines = NEW.read_text().split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith("ALL,"))
    fields = next(csv.reader([lines[k]]))
    total = int(fields[32]) + int(fields[33])  # Read I/Os, Write I/Os
    bins = [0] * 21
    bins[3], bins[4], bins[5] = total // 2, total // 4, total - total // 2 - total // 4
    lines[k] = ",".join(fields[:59] + [str(b) for b in bins])
    path = tmp_path / "bins.csv"
    path.write_text("\n".join(lines))
    res = ingest_paths(path)
    assert res.ok, res.errors
    h = res.histograms
    assert set(h["direction"]) == {"mixed"} and h["count"].sum() == total
    assert sorted(h["bin_ns"]) == [LATENCY_BINS_NS[3], LATENCY_BINS_NS[4], LATENCY_BINS_NS[5]]
    lines[k] = ",".join(fields[:59] + ["1"] * 21)  # bins that do not count the I/Os: not ingested
    path.write_text("\n".join(lines))
    assert ingest_paths(path).histograms.empty


def test_strict_false_keeps_the_complete_blocks():
    text = NEW.read_text()
    cut = text[: text.rindex("'Time Stamp")]  # the last block loses its 'Time Stamp (cut mid-block)
    res = parse_iometer(cut.encode(), "cut.csv", strict=False)
    assert len(res.blocks) == 2 and len(res.problems) == 1 and "cut mid-block" in res.problems[0]


def test_detection_and_the_generator_is_reproducible(tmp_path):
    assert detect_format(NEW.read_bytes()) == "iometer"
    assert detect_format((FIX / "seed000.icf").read_bytes()) == "iometer-icf"
    gen = tmp_path / "make_iometer_fixtures.py"
    gen.write_text((FIX / "make_iometer_fixtures.py").read_text())
    subprocess.run([sys.executable, str(gen)], check=True)
    for f in (NEW, OLD):
        assert (tmp_path / f.name).read_bytes() == f.read_bytes()

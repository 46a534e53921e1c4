"""DiskSPD XML and text results → runs / timeseries, checked against what DiskSPD printed.

Fixtures: the five captured DiskSPD outputs in tests/fixtures/diskspd (README.md there). Every variant
below that is not one of those files is CONSTRUCTED here from a captured one, by the transformation
written next to it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from storagebench.errors import IngestError
from storagebench.ingest import ingest_paths
from storagebench.ingest.diskspd import parse_diskspd, read_diskspd
from storagebench.ingest.loadgen import MIB, decode_text, detect_format
from storagebench.stats import steady_state_timeseries

FIX = Path(__file__).parent / "fixtures" / "diskspd"
PKB = FIX / "pkb_diskspd_result_2018.xml"
VC_XML = FIX / "virtualclient_Results_DiskSpd.xml"
VC_RW = FIX / "virtualclient_DiskSpdExample-ReadWrite.txt"
VC_22 = FIX / "virtualclient_DiskSpdExample-WriteOnly-v2.2.0-SingleGroup.txt"
W8K = FIX / "virtualclient_Write8k.txt"

# What DiskSPD printed (text: the total: rows and the total latency table) or what its rule gives
# (XML: sum of per-target counts / TestTimeSeconds). (file, direction, iops, MiB/s, p99 ms or None)
EXPECTED = [
    # PKB: ReadCount 22645 + 22623 + 22548 + 23154 = 90970 over 30.02 s; ReadBytes sum 5961809920; no -L
    (PKB, "read", 90970 / 30.02, 5961809920 / MIB / 30.02, None),
    # VirtualClient XML: Thread 0 / Target: ReadCount 37162, WriteCount 15753, TestTimeSeconds 120.01;
    # <Bucket><Percentile>99</Percentile> Read 21.897, Write 4.184 ms
    (VC_XML, "read", 37162 / 120.01, 152215552 / MIB / 120.01, 21.897),
    (VC_XML, "write", 15753 / 120.01, 64524288 / MIB / 120.01, 4.184),
    # text total: rows: 'I/O per s' and 'MiB/s' columns; '99th' row of the total latency table
    (VC_RW, "read", 834.98, 3.26, 0.877),
    (VC_RW, "write", 354.05, 1.38, 6.107),
    (VC_22, "write", 508.09, 1.98, 161.752),
    (W8K, "write", 330118.77, 2579.05, 368.150),
]


def _row(runs, direction):
    sel = runs[runs["direction"] == direction]
    assert len(sel) == 1, sel
    return sel.iloc[0]


@pytest.mark.parametrize(("path", "direction", "iops", "mib_s", "p99_ms"), EXPECTED,
                         ids=[f"{p.name}:{d}" for p, d, *_ in EXPECTED])
def test_totals_equal_what_diskspd_printed(path, direction, iops, mib_s, p99_ms):
    res = ingest_paths(path)
    assert res.ok, res.errors
    assert set(res.runs["tool"]) == {"diskspd"}
    r = _row(res.runs, direction)
    text = path.suffix == ".txt"
    if text:  # printed with 2 decimals: equal to the printed precision
        assert round(r["iops"], 2) == iops
        assert round(r["bw_bytes_per_s"] / MIB, 2) == mib_s
    else:  # the tool's rule, exactly
        assert r["iops"] == pytest.approx(iops, rel=1e-12)
        assert r["bw_bytes_per_s"] / MIB == pytest.approx(mib_s, rel=1e-12)
    if p99_ms is None:
        assert math.isnan(r["clat_p99_ns"])
    else:
        assert r["clat_p99_ns"] == pytest.approx(p99_ms * 1e6, rel=1e-12)
    assert math.isnan(r["clat_p99_5_ns"])  # DiskSPD prints no 99.5th percentile


def test_xml_provenance_and_workload():
    res = ingest_paths([PKB, VC_XML])
    pkb = res.runs[res.runs["source_file"] == str(PKB)].iloc[0]
    assert (pkb["fio_version"], pkb["hostname"]) == ("diskspd-2.0.21a", "pkb-044ffc87-0")
    assert str(pkb["started_at"]) == "2018-10-18 21:39:04+00:00"
    assert (pkb["rw"], pkb["bs_bytes"], pkb["rwmixread_pct"], pkb["random_pct"]) == ("read", 65536, 100.0, 0.0)
    assert (pkb["iodepth"], pkb["numjobs"], pkb["direct"], pkb["runtime_s"]) == (2, 4, True, 30.02)
    vc = _row(res.runs[res.runs["source_file"] == str(VC_XML)], "write")
    assert (vc["rw"], vc["bs_bytes"], vc["rwmixread_pct"], vc["random_pct"], vc["iodepth"], vc["numjobs"]) == (
        "randrw", 4096, 70.0, 100.0, 1, 1)
    assert vc["lat_mean_ns"] == pytest.approx(1.767e6) and vc["lat_stdev_ns"] == pytest.approx(0.508e6)
    assert vc["lat_min_ns"] == pytest.approx(1.117e6) and vc["lat_max_ns"] == pytest.approx(10.958e6)
    assert vc["clat_p50_ns"] == pytest.approx(1.657e6)  # <Percentile>50</Percentile> WriteMilliseconds


def test_percentiles_are_selected_by_value_not_position():
    """Reverse the order of the <Bucket> elements (constructed): every percentile column is unchanged."""
    xml = VC_XML.read_text()
    head, rest = xml.split("<Bucket>", 1)
    buckets = re.findall(r"<Bucket>.*?</Bucket>", "<Bucket>" + rest.split("</Latency>")[0], re.S)
    tail = "</Latency>" + rest.split("</Latency>", 1)[1]
    shuffled = (head + "".join(reversed(buckets)) + tail).encode()
    a = parse_diskspd(VC_XML.read_bytes(), "a").rows().runs
    b = parse_diskspd(shuffled, "b").rows().runs
    cols = [c for c in a[0] if c.startswith("clat_p") or c in ("lat_min_ns", "lat_max_ns")]
    for ra, rb in zip(a, b, strict=True):
        assert {c: ra[c] for c in cols} == pytest.approx({c: rb[c] for c in cols}, nan_ok=True)
    full = read_diskspd(VC_XML).percentiles
    assert len(full) == 108 and full["percentile"].is_monotonic_increasing
    assert full.set_index("percentile").loc[25.0, "read_ns"] == pytest.approx(2.067e6)  # a percentile not in runs


def test_random_access_hint_is_not_random_io():
    """<RandomAccess>true</RandomAccess> with <StrideSize> (constructed from the PKB file) is sequential I/O."""
    data = PKB.read_bytes().replace(b"<RandomAccess>false</RandomAccess>", b"<RandomAccess>true</RandomAccess>")
    r = parse_diskspd(data, "hint.xml").rows().runs[0]
    assert (r["rw"], r["random_pct"]) == ("read", 0.0)


def test_thread_pool_outstanding_ios():
    """-F2 -O8 (constructed: the VirtualClient profile's ThreadCount/RequestCount set): iodepth is -O per thread."""
    data = VC_XML.read_text()
    data = data.replace("<ThreadCount>0</ThreadCount>\n                <RequestCount>0</RequestCount>",
                        "<ThreadCount>2</ThreadCount>\n                <RequestCount>8</RequestCount>", 1)
    r = parse_diskspd(data.encode(), "pool.xml").rows().runs[0]
    assert r["iodepth"] == 8 and r["numjobs"] == 1


def test_per_second_iops_series_and_steady_state():
    res = ingest_paths(VC_XML)
    ts = res.timeseries
    iops = ts[ts["metric"] == "iops"]
    assert len(iops) == 240 and set(iops["direction"]) == {"read", "write"}
    first = iops[(iops["direction"] == "read") & (iops["t_s"] == 1.0)]["value"].item()
    assert first == 332.0  # <Bucket SampleMillisecond="1000" Read="332" ...>
    # interval IOPS integrate to about the counted I/Os (the series is the run, not a part of it)
    assert iops[iops["direction"] == "write"]["value"].sum() == pytest.approx(15753, rel=0.01)
    ss = steady_state_timeseries(ts, metric="iops", round_s=10)
    assert len(ss) == 2 and ss["rounds"].tolist() == [13, 13]  # samples at t = 1 .. 120 s (interval ends)


def test_a_mixed_batch_keeps_every_files_series_in_order(tmp_path):
    """fio logs and DiskSPD files in one batch: each file's series as when it is ingested alone, in file
    order (DiskSPD series are collected as columns and made one DataFrame per batch)."""
    fio_logs = Path(__file__).parent / "fixtures" / "fio" / "logs_avg"
    second = tmp_path / "second.xml"
    second.write_bytes(VC_XML.read_bytes().replace(b"<ComputerName>", b"<ComputerName>other-"))
    both = ingest_paths([VC_XML, fio_logs, second]).timeseries
    alone = [ingest_paths(p).timeseries for p in (VC_XML, fio_logs, second)]
    assert len(both) == sum(len(a) for a in alone) and len(alone[0]) == 480
    cols = ["job", "direction", "t_s", "metric", "value"]
    start = 0
    for a in alone:
        part = both.iloc[start:start + len(a)]
        assert part[cols].reset_index(drop=True).equals(a[cols].reset_index(drop=True))
        assert part["run_id"].nunique() == 1 and part["run_id"].iloc[0] == a["run_id"].iloc[0]
        start += len(a)


def test_parts_are_kept_apart_and_add_up():
    res = read_diskspd(W8K)
    rows = res.rows().runs
    assert len(rows) == 1  # one run total, not 115 thread rows
    parts = res.targets
    assert len(parts) == 115 and parts["path"].nunique() == 5
    assert parts["write_ios"].sum() == rows[0]["total_ios"] == 19812174
    assert rows[0]["numjobs"] == 115 and rows[0]["iodepth"] == 22 and rows[0]["bs_bytes"] == 8192


def test_text_22_layout_and_provenance():
    res = read_diskspd(VC_22)
    run = res.runs[0]
    assert run.layout == "2.2" and run.cmdline.startswith("C:\\dskspd\\amd64\\diskspd.exe -c1G -b4K")
    r = res.rows().runs[0]
    assert (r["hostname"], str(r["started_at"])) == ("alexwill-dskspd", "2026-06-22 22:16:45+00:00")
    assert (r["rw"], r["bs_bytes"], r["iodepth"], r["numjobs"], r["direct"]) == ("randwrite", 4096, 16, 4, True)


# ---- real-world bytes (all CONSTRUCTED from the captured VC_RW / VC_22 / W8K files) -----------------


def _same_numbers(a, b):
    keys = ["direction", "iops", "bw_bytes_per_s", "total_ios", "clat_p99_ns", "lat_mean_ns", "rw", "bs_bytes"]
    assert [{k: r[k] for k in keys} for r in a] == [{k: r[k] for k in keys} for r in b]


def test_utf16le_with_bom_from_a_powershell_redirect():
    data = b"\xff\xfe" + VC_RW.read_text().replace("\n", "\r\n").encode("utf-16-le")
    res = parse_diskspd(data, "ps.txt")
    assert res.encoding == "utf-16-le"
    _same_numbers(res.rows().runs, parse_diskspd(VC_RW.read_bytes(), "x").rows().runs)


def test_cp1251_bytes_in_a_path():
    text = VC_RW.read_text().replace("diskspd.dat", "тест.dat")
    data = text.encode("cp1251")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")  # not UTF-8: a UTF-8 reader would fail or garble
    res = parse_diskspd(data, "ru.txt")
    r = res.rows().runs[0]
    assert r["target"] == "тест.dat" and res.encoding == "cp1251"


def test_lines_wrapped_at_80_columns():
    text = VC_RW.read_text()
    wrapped = "\n".join(ln[i:i + 80] for ln in text.split("\n") for i in range(0, max(len(ln), 1), 80))
    assert max(map(len, wrapped.split("\n"))) == 80 and "thread |" in wrapped
    _same_numbers(parse_diskspd(wrapped.encode(), "w.txt").rows().runs,
                  parse_diskspd(VC_RW.read_bytes(), "x").rows().runs)


def test_several_runs_pasted_into_one_file():
    parts = [VC_RW.read_text(), VC_22.read_text(), W8K.read_text(encoding="utf-8-sig")]
    res = parse_diskspd("\n\n".join(parts).encode(), "pasted.txt")
    assert len(res.runs) == 3 and len(set(res.run_ids)) == 3
    for part, k in zip(parts, range(3), strict=True):
        alone = parse_diskspd(part.encode(), "x").rows().runs
        got = [r for r in res.rows().runs if r["run_id"] == res.run_ids[k]]
        _same_numbers(got, alone)


def test_pre_2_0_18_mb_s_layout():
    """Before 2.0.18 the header said 'MB/s' (the values were always 2**20 bytes) and there was no
    'System information' block: both constructed from the captured 2.0.21a-layout file."""
    text = VC_RW.read_text().replace("|    MiB/s   |", "|     MB/s   |")
    text = re.sub(r"System information:.*?(?=Results for timespan)", "", text, flags=re.S)
    res = parse_diskspd(text.encode(), "old.txt")
    assert res.runs[0].layout == "pre-2.0.18" and res.runs[0].computer_name == ""
    r = res.rows().runs[0]
    assert round(r["bw_bytes_per_s"] / MIB, 2) == 3.26 and r["iops"] == 834.98


def test_format_detection_is_by_content(tmp_path):
    assert detect_format(PKB.read_bytes()) == "diskspd-xml"
    assert detect_format(VC_RW.read_bytes()) == "diskspd-text"
    assert detect_format(W8K.read_bytes()) == "diskspd-text"  # UTF-8 BOM
    assert detect_format(b"\xff\xfe" + VC_RW.read_text().encode("utf-16-le")) == "diskspd-text"
    odd = tmp_path / "results.json"  # DiskSPD XML under a fio-like name
    odd.write_bytes(PKB.read_bytes())
    res = ingest_paths(odd)
    assert res.ok and res.runs["tool"].tolist() == ["diskspd"]


def test_decode_never_assumes_utf8():
    assert decode_text("ä".encode("utf-8"), "x") == ("ä", "utf-8")
    assert decode_text(b"\xef\xbb\xbfabc", "x") == ("abc", "utf-8")
    with pytest.raises(IngestError, match="UTF-16 .* no byte-order mark"):
        decode_text("Input parameters:".encode("utf-16-le"), "x")

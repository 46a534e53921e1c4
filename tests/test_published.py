"""Published seed tables: transcription from the seed text and mapping onto the runs schema.

Expected values are read from the seed documents themselves (``/work/shared/seeds`` or
``$STORAGEBENCH_SEEDS``), never typed here a second time.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from storagebench import schema
from storagebench.errors import IngestError, PublishError
from storagebench.published import (
    PUBLISHED_DIR,
    list_published,
    load_published,
    published_metadata,
    read_published,
)

SEEDS = Path(os.environ.get("STORAGEBENCH_SEEDS", ROOT.parent / "shared" / "seeds"))


@pytest.fixture(scope="module")
def seeds() -> Path:
    if not list(SEEDS.glob("00[12]_*.txt")):
        pytest.skip(f"seed documents not found in {SEEDS} (set STORAGEBENCH_SEEDS)")
    return SEEDS


def _lines(seeds: Path, prefix: str) -> list[str]:
    return next(seeds.glob(f"{prefix}_*.txt")).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def transcriber():
    spec = importlib.util.spec_from_file_location("transcribe_seeds", ROOT / "runners" / "transcribe_seeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _after(lines: list[str], heading: str, row_prefix: str) -> list[str]:
    """Whitespace tokens of the first line starting with ``row_prefix`` after the line ``heading``."""
    start = lines.index(heading)
    return next(ln for ln in lines[start:] if ln.startswith(row_prefix)).split()


def test_row_counts_follow_the_seed_tables(seeds):
    l2, l1 = _lines(seeds, "002"), _lines(seeds, "001")
    qd_rows = [ln for ln in l2 if ln.startswith("QD=")]
    vm_rows = [ln for ln in l2 if re.match(r"\d+x VM ", ln)]
    # every QD row holds 4 thread counts x 3 metrics; every VM row 12 tool columns x 3 metrics
    assert len(load_published("vsan_qd_threads")) == sum(len(r.split()[1:]) // 3 for r in qd_rows) == 64
    assert len(load_published("vsan_stripe")) == sum(len(r.split()[2:]) // 3 for r in vm_rows) == 288
    assert len(load_published("hdd_iops")) == sum(bool(re.match(r"\d+KB \|", ln)) for ln in l1) == 32
    inv = l1.index(next(ln for ln in l1 if ln.startswith("Device | Vendor")))
    n_dev = next(i for i, ln in enumerate(l1[inv + 1:]) if "|" not in ln)
    assert len(read_published("hdd_devices")) == n_dev == 19
    listed = list_published().set_index("name")["rows"].to_dict()
    assert listed == {"hdd_devices": 19, "hdd_iops": 32, "vsan_qd_threads": 64, "vsan_stripe": 288}


def test_qd_threads_values_match_the_seed_text(seeds):
    lines = _lines(seeds, "002")
    df = load_published("vsan_qd_threads")
    for tool in ("DiskSPD", "FIO"):
        heading = f"VMware Virtual Disk 264GB (RAW) over vsanDatastore – 4k random read ({tool})"
        for qd in (1, 16, 128):
            tokens = _after(lines, heading, f"QD={qd} ")
            for k, threads in enumerate((1, 2, 4, 8)):
                iops, mb, ms = (float(t) for t in tokens[1 + 3 * k: 4 + 3 * k])
                row = df[(df.source_tool == tool) & (df.iodepth == qd) & (df.numjobs == threads)]
                assert len(row) == 1
                r = row.iloc[0]
                assert r.iops == iops
                assert r.bw_bytes_per_s == mb * 2**20
                assert r.lat_mean_ns == pytest.approx(ms * 1e6)
                assert (r.rw, r.bs_bytes, r.direction, r.tool) == ("randread", 4096, "read", "published")


def test_stripe_values_match_the_seed_text(seeds):
    lines = _lines(seeds, "002")
    df = load_published("vsan_stripe")
    for width in (1, 4):
        heading = f"Number of disk stripes per object={width}"
        patterns = re.findall(r"\d+[kM] (?:random|seq) (?:\d+%read/\d+%write|write|read)",
                              lines[lines.index(heading) + 1])
        for vms in (1, 9, 12):
            tokens = _after(lines, heading, f"{vms}x VM ")[2:]
            for col in range(12):
                pattern, tool = patterns[col // 2], ("DiskSPD", "FIO")[col % 2]
                iops, mb, ms = (float(t) for t in tokens[3 * col: 3 * col + 3])
                r = df[(df.stripe_width == width) & (df.vms == vms) & (df.pattern == pattern)
                       & (df.source_tool == tool)]
                assert len(r) == 1, (width, vms, pattern, tool)
                assert r.iops.iloc[0] == iops
                assert r.bw_bytes_per_s.iloc[0] == mb * 2**20
                assert r.lat_mean_ns.iloc[0] == pytest.approx(ms * 1e6)
    mixed = df[df.pattern == "8k random 70%read/30%write"]
    assert set(mixed.rw) == {"randrw"} and set(mixed.rwmixread_pct) == {70.0} and set(mixed.direction) == {"mixed"}
    seq = df[df.pattern == "1M seq read"]
    assert set(seq.rw) == {"read"} and set(seq.random_pct) == {0.0} and set(seq.bs_bytes) == {2**20}
    assert set(df.iodepth) == {16} and set(df.numjobs) == {4}


def test_hdd_values_match_the_seed_text(seeds):
    lines = _lines(seeds, "001")
    df = load_published("hdd_iops")
    rows = [ln for ln in lines if re.match(r"\d+KB \|", ln)]
    for line in rows:
        size, pattern, resp, iops, kb = [c.strip() for c in line.split("|")][:5]
        seq, read = (int(x) for x in re.findall(r"(\d+)%", pattern))
        r = df[(df.bs_bytes == int(size[:-2]) * 1024) & (df.random_pct == 100 - seq) & (df.rwmixread_pct == read)]
        assert len(r) == 1, line
        assert r.iops.iloc[0] == float(iops.replace(",", ""))
        assert r.bw_bytes_per_s.iloc[0] == float(kb.replace(",", "")) * 1024
        assert r.lat_mean_ns.iloc[0] == pytest.approx(float(resp) * 1e6)
        expected_rw = {100: "read", 0: "write"}.get(read, "rw")
        assert r.rw.iloc[0] == (expected_rw if seq == 100 else "rand" + expected_rw)
    assert set(df.numjobs) == {1}
    assert (df.iodepth == -1).all()  # not stated by the source


def test_published_bandwidth_is_binary_megabytes():
    """MB/s x 2**20 (and KB/s x 1024) is consistent with IOPS x block size; x 10**6 is not."""
    for name in ("vsan_qd_threads", "vsan_stripe", "hdd_iops"):
        df = load_published(name)
        big = df[df.bw_bytes_per_s > 40 * 2**20]  # printed to the unit: rounding < 1.3 % here
        ratio = big.bw_bytes_per_s / (big.iops * big.bs_bytes)
        assert ratio.between(0.985, 1.015).all(), (name, ratio.describe())
    raw = read_published("vsan_qd_threads")
    decimal = raw.bw_mb_per_s * 1e6 / (raw.iops * 4096)
    assert (decimal < 0.97).mean() > 0.9


def test_loaded_tables_follow_the_runs_schema():
    for name in ("vsan_qd_threads", "vsan_stripe", "hdd_iops"):
        df = load_published(name)
        schema.validate(df, "runs", coerce=False)
        assert (df.tool == "published").all() and df.run_id.is_unique
        assert df[["iops", "bw_bytes_per_s", "lat_mean_ns"]].notna().all().all()
        assert df["clat_mean_ns"].isna().all() and df["fio_version"].isna().all()


def test_unknown_or_inventory_table_is_refused():
    with pytest.raises(IngestError, match=r"must be one of \[.*'vsan_stripe'.*\], got 'vsan_strip'"):
        load_published("vsan_strip")
    with pytest.raises(IngestError, match="inventory"):
        load_published("hdd_devices")
    assert published_metadata("vsan_stripe")["source"]["seed_file"].startswith("002_")


def test_row_count_mismatch_with_sidecar_is_refused(tmp_path):
    for f in PUBLISHED_DIR.glob("vsan_qd_threads.*"):
        shutil.copy(f, tmp_path / f.name)
    csv = tmp_path / "vsan_qd_threads.csv"
    csv.write_text("".join(csv.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(IngestError, match="63 rows, its sidecar vsan_qd_threads.yaml says 64"):
        load_published("vsan_qd_threads", data_dir=tmp_path)


def test_transcription_is_reproducible(seeds, transcriber, tmp_path):
    assert transcriber.main(["--seeds", str(seeds), "--out", str(PUBLISHED_DIR), "--check"]) == 0
    assert transcriber.main(["--seeds", str(seeds), "--out", str(tmp_path)]) == 0
    for f in PUBLISHED_DIR.glob("*.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(f), pd.read_csv(tmp_path / f.name))


def test_transcription_refuses_a_damaged_table(seeds, transcriber, tmp_path):
    for f in seeds.glob("00[12]_*.txt"):
        shutil.copy(f, tmp_path / f.name)
    seed2 = next(tmp_path.glob("002_*.txt"))
    text = seed2.read_text(encoding="utf-8")
    damaged = re.sub(r"^(QD=16 \S+ \S+ )\S+ ", r"\1", text, count=1, flags=re.M)  # drop one latency
    assert damaged != text
    seed2.write_text(damaged, encoding="utf-8")
    with pytest.raises(transcriber.TranscriptionError, match="QD=16: 11 values, expected 12"):
        transcriber.transcribe(tmp_path)
    assert transcriber.main(["--seeds", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()


def test_vsan_tools_agree_with_littles_law_in_the_sweep_only():
    """The single-VM sweep obeys N = X R for both tools; the stripe tables' FIO latency does not.

    Documented in data/published/README.md: FIO's latency there is ~4x the Little's-law value.
    """
    sweep = load_published("vsan_qd_threads")
    n = sweep.iops * sweep.lat_mean_ns / 1e9 / (sweep.iodepth * sweep.numjobs)
    assert n.between(0.85, 1.15).all()  # 0.90 at worst (FIO t1 QD32: 0.46 ms printed)
    st = load_published("vsan_stripe")
    n = st.iops * st.lat_mean_ns / 1e9 / (st.iodepth * st.numjobs * st.vms)
    by_tool = n.groupby(st.source_tool).median()
    assert 0.9 < by_tool["DiskSPD"] < 1.2 and 3.5 < by_tool["FIO"] < 5
    assert np.isfinite(n).all()


# ---- result sets of any kind (the cross-tool write-up's input) ----------------------------------------


def test_result_sets_of_every_kind_into_one_runs_table(tmp_path):
    from conftest import FIXTURES

    from storagebench.published import load_result_sets

    tidy = tmp_path / "runs.parquet"
    load_published("vsan_qd_threads").to_parquet(tidy)
    iometer = FIXTURES / "iometer" / "iometer_1.1.0_two_tests.csv"  # a .csv that is raw Iometer output, not a table
    sets = load_result_sets(["published:vsan_stripe", str(tidy), FIXTURES / "diskspd", iometer],
                            labels=["a", "b", "c", "d"], tool_col="label")
    src = sets.sources.set_index("label")
    assert list(src["kind"]) == ["published table", "tidy table", "raw results", "raw results"]
    assert (src.loc["c", "files"], src.loc["c", "runs"], src.loc["d", "runs"]) == (5, 5, 3)
    assert "QuickTest2" in src.loc["c", "hosts"] and src.loc["d", "hosts"] == "IOA-WORKER-1"
    assert sets.runs.groupby("label").size().to_dict() == {"a": 288, "b": 64, "c": 7, "d": 4}
    assert set(sets.runs.loc[sets.runs["label"] == "d", "tool"]) == {"iometer"}
    assert sets.errors == []


def test_result_sets_keep_the_good_files_and_refuse_what_cannot_be_read(tmp_path):
    from conftest import FIXTURES

    from storagebench.published import load_result_sets

    d = tmp_path / "mixed"
    d.mkdir()
    (d / "good.xml").write_bytes((FIXTURES / "diskspd" / "pkb_diskspd_result_2018.xml").read_bytes())
    (d / "cut.xml").write_bytes((FIXTURES / "diskspd" / "pkb_diskspd_result_2018.xml").read_bytes()[:900])
    sets = load_result_sets(d)
    assert len(sets.runs) == 1 and len(sets.errors) == 1 and sets.errors[0].path.endswith("cut.xml")
    assert sets.sources["errors"].tolist() == [1]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text("no results here\n")
    with pytest.raises(IngestError, match="no runs could be read"):
        load_result_sets(empty)
    with pytest.raises(IngestError, match="no such file or directory"):
        load_result_sets(tmp_path / "missing")
    with pytest.raises(IngestError, match="one label per result set"):
        load_result_sets([d, d], labels=["only one"])
    with pytest.raises(IngestError, match="no 'source_tool' column"):
        load_result_sets(d, tool_col="source_tool")
    with pytest.raises(IngestError, match="no result set"):
        load_result_sets([])


def test_file_sources_say_captured_constructed_or_published():
    from conftest import FIXTURES

    from storagebench.published import file_sources

    files = [FIXTURES / "diskspd" / "virtualclient_Write8k.txt", FIXTURES / "iometer" / "iometer_1.1.0_two_tests.csv",
             "data/published/vsan_stripe.csv", FIXTURES / "fio" / "single.json"]
    got = file_sources(files).set_index("file")
    assert got["status"].tolist() == ["captured", "constructed", "published", "not listed"]
    assert got.loc["virtualclient_Write8k.txt", "licence"] == "MIT"
    assert got.loc["virtualclient_Write8k.txt", "origin"] == "microsoft/VirtualClient @ 504ffb92380c"
    assert "seed 002_" in got.loc["vsan_stripe.csv", "origin"]
    # every fixture of both load-generator directories is listed in its SOURCES.tsv
    listed = file_sources([p for sub in ("diskspd", "iometer") for p in (FIXTURES / sub).iterdir()
                           if p.suffix in (".xml", ".txt", ".csv", ".icf")])
    assert (listed["status"] != "not listed").all(), listed


def test_name_source_is_the_one_way_write_ups_name_a_result_set(tmp_path):
    from storagebench.published import name_source, published_metadata

    meta = published_metadata("vsan_stripe")
    src = name_source("published:vsan_stripe")
    assert src.name == "vsan_stripe" and src.metadata == meta
    assert src.citation == (f"{meta['source']['title']} ({meta['source']['publisher']}, seed "
                            f"{meta['source']['seed_file']})") and "StarWind" in src.citation
    other = name_source(tmp_path / "runs" / "fio-runs")
    assert (other.name, other.citation, other.metadata) == ("fio-runs", str(tmp_path / "runs" / "fio-runs"), {})
    assert name_source("/").name == "/"  # a path without a last component keeps its text
    with pytest.raises(IngestError, match="published table must be one of"):
        name_source("published:no_such_table")


def test_write_csv_exports_tables_under_safe_names(tmp_path):
    from storagebench.stats import compare
    from storagebench.tables import write_csv

    df = load_published("vsan_stripe")
    cmp = compare(df, "stripe_width", 1, "iops", by=["pattern", "source_tool"], pair_on="vms")
    assert write_csv("", {"x": df}) == [] and write_csv(None, {"x": df}) == []
    out = tmp_path / "out"
    paths = write_csv(out, {"vsan_stripe vs a/b_iops": cmp, "../../escape": df.head(3), ".hidden": df.head(1)})
    assert [p.name for p in paths] == ["vsan_stripe_vs_a_b_iops.csv", "_.._escape.csv", "hidden.csv"]
    assert all(p.parent == out for p in paths) and sorted(out.iterdir()) == sorted(paths)
    got = pd.read_csv(paths[0])
    assert list(got.columns) == list(cmp.to_frame().columns) and len(got) == len(cmp.to_frame())
    assert pd.read_csv(paths[1]).shape == (3, df.shape[1])
    with pytest.raises(PublishError, match="same CSV file name"):
        write_csv(out, {"a b": df, "a/b": df})

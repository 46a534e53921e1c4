"""ingest of real fio JSON/JSON+ output (fixtures captured with fio 3.33, see tests/fixtures/fio/README.md)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from storagebench._histogram import percentiles_from_bins
from storagebench.errors import IngestError
from storagebench.fio import options as fo
from storagebench.ingest import ingest_paths, ingest_study, ingest_to_parquet
from storagebench.ingest.fio import parse_fio_output, read_fio_json
from storagebench.schema import PERCENTILES

GOOD = ["single.json", "single_jsonplus.json", "numjobs4_nogroup.json", "numjobs4_group.json", "two_jobs.json",
        "randrw_70_30.json", "status_interval.json", "note_prefix.json", "error_enospc.json", "sigint.json",
        "killed_status_interval.json", "clientserver.json", "fio2_perfkitbenchmarker.json"]


@pytest.fixture
def fio_dir(fixtures_dir) -> Path:
    return fixtures_dir / "fio"


def _last_doc(path: Path) -> dict:
    """Independent reader (stdlib json): the last complete top-level document of a fio output."""
    text = path.read_text()
    dec, docs, i = json.JSONDecoder(), [], 0
    while True:
        j = text.find("\n{\n", i - 1 if i else 0) if i else (0 if text.startswith("{") else text.find("\n{\n"))
        if j < 0:
            break
        j = j if text[j] == "{" else j + 1
        try:
            doc, i = dec.raw_decode(text, j)
        except json.JSONDecodeError:
            break
        docs.append(doc)
    return docs[-1]


def _fio_value(doc: dict, row: pd.Series, key: str):
    entries = doc.get("jobs") or doc.get("client_stats")
    same = [e for e in entries if e["jobname"] == row["job"]
            and (row["host"] in ("local", "All clients") or f"{e['hostname']}:{e['port']}" == row["host"])]
    return same[row["job_index"]][row["direction"]][key]


@pytest.mark.parametrize("name", GOOD)
def test_iops_in_parquet_equal_fio_json_to_the_last_digit(fio_dir, tmp_path, name):
    res = ingest_paths([fio_dir / name])
    assert res.ok, res.errors
    res.write_parquet(tmp_path)
    back = pd.read_parquet(tmp_path / "runs.parquet")
    doc = _last_doc(fio_dir / name)
    assert len(back) == len(res.runs) >= 1
    for _, row in back.iterrows():
        assert row["iops"] == float(_fio_value(doc, row, "iops"))  # exact float equality
        assert row["runtime_s"] == _fio_value(doc, row, "runtime") / 1000.0


def test_fio3_units_and_factors(fio_dir):
    r = ingest_paths([fio_dir / "single_jsonplus.json"]).runs.iloc[0]
    d = _last_doc(fio_dir / "single_jsonplus.json")["jobs"][0]["read"]
    assert r["bw_bytes_per_s"] == d["bw_bytes"]
    assert r["io_bytes"] == d["io_bytes"] == 8 * 1024 * 1024
    assert r["total_ios"] == d["total_ios"] == 2048
    assert r["lat_mean_ns"] == d["lat_ns"]["mean"] and r["clat_stdev_ns"] == d["clat_ns"]["stddev"]
    assert r["slat_mean_ns"] == d["slat_ns"]["mean"] and r["lat_max_ns"] == d["lat_ns"]["max"]
    assert r["clat_p99_9_ns"] == d["clat_ns"]["percentile"]["99.900000"]
    assert r["clat_p50_ns"] == d["clat_ns"]["percentile"]["50.000000"]
    assert (r["rw"], r["bs_bytes"], r["iodepth"], r["numjobs"], r["ioengine"], r["direct"], r["target"]) == \
        ("randread", 4096, 8, 1, "libaio", True, "sbfx_data1")
    assert (r["rwmixread_pct"], r["random_pct"], r["host"], r["tool"], r["fio_version"]) == \
        (100.0, 100.0, "local", "fio", "fio-3.33")
    assert r["study"] == "" and r["repetition"] == 0 and r["run_order"] == -1
    data = (fio_dir / "single_jsonplus.json").read_bytes()
    assert r["run_id"] == xxhash.xxh3_128_hexdigest(data)[:12]
    assert r["started_at"].tzinfo is not None and not r["partial"] and r["error"] == 0
    # fio's report time to the ms (runs.reported_at: the end of the measured window, docs/testbed.md)
    ms = _last_doc(fio_dir / "single_jsonplus.json")["timestamp_ms"]
    assert r["reported_at"] == pd.Timestamp(ms, unit="ms", tz="UTC")
    assert (r["reported_at"] - r["started_at"]).total_seconds() == _last_doc(
        fio_dir / "single_jsonplus.json")["jobs"][0]["elapsed"]


def test_fio2_units_are_converted_once(fio_dir):
    """fio-2.1.4 (PerfKitBenchmarker sample): µs latencies, KiB/s bandwidth, KiB io_bytes."""
    runs = ingest_paths([fio_dir / "fio2_perfkitbenchmarker.json"]).runs
    assert list(runs["job"]) == ["sequential_write", "sequential_read", "random_write_test", "random_read_test",
                                 "random_read_test_parallel"]
    assert list(runs["direction"]) == ["write", "read", "write", "read", "read"]
    w = runs.iloc[0]
    assert w["clat_mean_ns"] == pytest.approx(477734.84 * 1000, rel=1e-15)
    assert w["lat_min_ns"] == 189438 * 1000 and w["clat_p99_ns"] == 823296 * 1000
    assert w["bw_bytes_per_s"] == 68118 * 1024 and w["io_bytes"] == 361984 * 1024
    assert w["runtime_s"] == 5.314 and w["iops"] == 133.0
    assert w["total_ios"] == -1  # not reported by fio 2.1
    assert w["rw"] == "" and w["bs_bytes"] == -1  # fio 2.1 prints no options: unknown, not defaults


def test_text_before_json_is_skipped(fio_dir):
    assert (fio_dir / "note_prefix.json").read_text().startswith("note: both iodepth >= 1")
    fd = read_fio_json((fio_dir / "note_prefix.json").read_bytes(), "note_prefix.json")
    assert any(t.startswith("note:") for t in fd.text) and not fd.partial
    r = ingest_paths([fio_dir / "note_prefix.json"]).runs.iloc[0]
    assert r["ioengine"] == "psync" and r["iodepth"] == 4 and r["total_ios"] == 2048


def test_job_error_is_kept_with_its_errno(fio_dir):
    fd = read_fio_json((fio_dir / "error_enospc.json").read_bytes(), "e")
    assert any("err=28" in t for t in fd.text)
    runs = ingest_paths([fio_dir / "error_enospc.json"]).runs
    assert len(runs) == 1
    r = runs.iloc[0]
    assert (r["direction"], r["error"], r["io_bytes"], r["target"]) == ("write", 28, 0, "/dev/full")


def test_job_without_any_io_still_gets_one_row(fio_dir):
    doc = _last_doc(fio_dir / "error_enospc.json")
    doc["jobs"][0]["write"]["total_ios"] = 0  # a job that failed before its first I/O
    rows = parse_fio_output(json.dumps(doc).encode(), "noio.json").runs
    assert [(r["direction"], r["error"], r["total_ios"]) for r in rows] == [("write", 28, 0)]


def test_numjobs_with_and_without_group_reporting(fio_dir):
    nog = ingest_paths([fio_dir / "numjobs4_nogroup.json"])
    assert list(nog.runs["job_index"]) == [0, 1, 2, 3] and set(nog.runs["job"]) == {"randread4"}
    assert set(nog.runs["numjobs"]) == {4}
    assert set(nog.histograms["job_index"]) == {0, 1, 2, 3}
    grp = ingest_paths([fio_dir / "numjobs4_group.json"]).runs
    assert len(grp) == 1 and grp.iloc[0]["numjobs"] == 4 and grp.iloc[0]["total_ios"] == 4 * 2048


def test_two_jobs_and_mixed_directions(fio_dir):
    two = ingest_paths([fio_dir / "two_jobs.json"]).runs
    assert list(zip(two["job"], two["direction"], two["bs_bytes"], two["random_pct"], strict=True)) == [
        ("seqread", "read", 65536, 0.0), ("randwrite", "write", 4096, 100.0)]
    mix = ingest_paths([fio_dir / "randrw_70_30.json"])
    assert list(zip(mix.runs["direction"], mix.runs["bs_bytes"], strict=True)) == [("read", 4096), ("write", 16384)]
    assert set(mix.runs["rwmixread_pct"]) == {70.0} and set(mix.runs["rw"]) == {"randrw"}
    assert set(mix.histograms["direction"]) == {"read", "write"}


def test_status_interval_takes_the_last_document(fio_dir):
    fd = read_fio_json((fio_dir / "status_interval.json").read_bytes(), "s")
    assert fd.n_docs == 4 and not fd.partial
    r = ingest_paths([fio_dir / "status_interval.json"]).runs
    assert len(r) == 1 and r.iloc[0]["runtime_s"] == _last_doc(fio_dir / "status_interval.json")["jobs"][0]["read"]["runtime"] / 1000


@pytest.mark.parametrize("name,why", [("sigint.json", "terminating on signal 2"),
                                      ("killed_status_interval.json", "final report is missing")])
def test_killed_runs_are_flagged_partial(fio_dir, name, why):
    fd = read_fio_json((fio_dir / name).read_bytes(), name)
    assert fd.partial and why in fd.reason
    runs = ingest_paths([fio_dir / name]).runs
    assert runs["partial"].all()


def test_truncated_last_status_document_uses_previous_one(fio_dir):
    data = (fio_dir / "status_interval.json").read_bytes()
    cut = data[: data.rindex(b'"fio version"') + 500]
    fd = read_fio_json(cut, "cut.json")
    assert fd.partial and fd.n_docs == 3 and "truncated" in fd.reason


def test_client_server_hosts_and_all_clients(fio_dir):
    res = ingest_paths([fio_dir / "clientserver.json"])
    assert sorted(res.runs["host"]) == ["127.0.0.1:18791", "127.0.0.1:18792"]
    assert "All clients" not in set(res.runs["job"]) and "All clients" not in set(res.histograms["host"])
    assert len(res.all_clients) == 1
    allc = res.all_clients.iloc[0]
    assert allc["host"] == "All clients" and allc["job"] == "All clients"
    # fio's aggregate: I/Os and bytes are the per-host sums ...
    assert allc["total_ios"] == res.runs["total_ios"].sum() and allc["io_bytes"] == res.runs["io_bytes"].sum()
    # ... while its IOPS is total I/Os over the longest host runtime, hence <= the sum of per-host IOPS
    assert allc["iops"] == pytest.approx(allc["total_ios"] / allc["runtime_s"], rel=1e-9)
    assert allc["runtime_s"] == res.runs["runtime_s"].max()
    assert allc["iops"] <= res.runs["iops"].sum()
    assert set(res.runs["hostname"]) == {"127.0.0.1"}


@pytest.mark.parametrize("name,reason", [
    ("truncated.json", "truncated JSON"),
    ("killed_sigkill.json", "empty file"),
    ("bad_option.json", "fio: failed parsing rw=bogus"),
])
def test_bad_fixture_gives_ingest_error_naming_the_file(fio_dir, name, reason):
    res = ingest_paths([fio_dir / name])
    assert res.runs.empty and len(res.errors) == 1
    err = res.errors[0]
    assert isinstance(err, IngestError) and err.path == str(fio_dir / name) and reason in err.reason
    assert str(fio_dir / name) in str(err)


def test_directory_with_bad_files_still_ingests_the_good_ones(fio_dir, tmp_path):
    for name in ("single.json", "randrw_70_30.json", "truncated.json", "killed_sigkill.json"):
        shutil.copy(fio_dir / name, tmp_path / name)
    (tmp_path / "notes.json").write_text("these are my notes, not fio output\n")
    (tmp_path / "other.json").write_text('{"hello": "world"}')
    (tmp_path / "sub").mkdir()
    shutil.copy(fio_dir / "two_jobs.json", tmp_path / "sub" / "two.json")
    res = ingest_paths([tmp_path, tmp_path / "missing.json"])
    assert res.files == 3 and len(res.runs) == 1 + 2 + 2
    bad = {Path(e.path).name: e.reason for e in res.errors}
    assert set(bad) == {"truncated.json", "killed_sigkill.json", "notes.json", "other.json", "missing.json"}
    assert "no fio JSON" in bad["notes.json"] and "not fio output" in bad["other.json"]
    assert "no such file" in bad["missing.json"]


def test_ingest_study_uses_point_and_provenance(fio_dir, tmp_path):
    raw = tmp_path / "demo" / "raw"
    for i, (name, width) in enumerate([("randrw_70_30.json", 1), ("single_jsonplus.json", 4)]):
        d = raw / f"run{i}"
        d.mkdir(parents=True)
        shutil.copy(fio_dir / name, d / "output.json")
        (d / "point.json").write_text(json.dumps({
            "study": "demo", "run_id": f"run{i}", "repetition": i, "run_order": 10 + i,
            "factors": {"stripe_width": width, "pattern": "p4k", "iodepth": 999}, "options": {}}))
        (d / "provenance.json").write_text(json.dumps({
            "fio_version": "fio-3.33", "kernel": "6.1.0-test", "hostname": "box1",
            "started_at": "2026-11-22T05:00:00Z"}))
    shutil.copy(fio_dir / "logs" / "logs_iops.1.log", raw / "run0" / "logs_iops.1.log")
    bad = raw / "run9"
    bad.mkdir()
    (bad / "point.json").write_text(json.dumps({"study": "demo", "run_id": "run9"}))
    (bad / "output.json").write_bytes(b"")
    res = ingest_study(tmp_path / "demo")
    r = res.runs
    assert list(r["run_id"]) == ["run0", "run0", "run1"] and list(r["repetition"]) == [0, 0, 1]
    assert list(r["run_order"]) == [10, 10, 11] and set(r["study"]) == {"demo"}
    assert list(r["stripe_width"]) == [1, 1, 4] and set(r["pattern"]) == {"p4k"}
    assert set(r["iodepth"]) == {8}  # fio's own output wins over a clashing study factor
    assert set(r["kernel"]) == {"6.1.0-test"} and set(r["hostname"]) == {"box1"}
    assert set(r["started_at"]) == {pd.Timestamp("2026-11-22T05:00:00Z")}
    # the runner's start and fio's own report time, side by side; a report time fio cannot print is NaT, noted
    for i, name in enumerate(["randrw_70_30.json", "single_jsonplus.json"]):
        ms = _last_doc(fio_dir / name)["timestamp_ms"]
        assert set(r.loc[r["run_id"] == f"run{i}", "reported_at"]) == {pd.Timestamp(ms, unit="ms", tz="UTC")}
    assert set(res.histograms["run_id"]) == {"run0", "run1"}
    assert set(res.timeseries["run_id"]) == {"run0"} and set(res.timeseries["metric"]) == {"iops"}
    assert [Path(e.path).parent.name for e in res.errors] == ["run9"]
    with pytest.raises(IngestError, match="has no raw/"):
        ingest_study(tmp_path)
    # a failed attempt beside raw/ is never read, neither by ingest_study nor by ingest_paths
    failed = tmp_path / "demo" / "failed" / "run5" / "20261122T050000Z"
    failed.mkdir(parents=True)
    shutil.copy(fio_dir / "single.json", failed / "output.json")
    (failed / "point.json").write_text(json.dumps({"study": "demo", "run_id": "run5"}))
    for again in (ingest_study(tmp_path / "demo"), ingest_paths([tmp_path / "demo"])):
        assert "run5" not in set(again.runs["run_id"]) and len(again.runs) == 3


def test_stream_to_parquet_matches_in_memory(fio_dir, tmp_path):
    mem = ingest_paths([fio_dir])
    summary = ingest_to_parquet([fio_dir], tmp_path / "out", batch_files=2)
    assert summary.files == mem.files and len(summary.errors) == len(mem.errors) == 3
    for name in ("runs", "histograms", "all_clients", "timeseries"):
        back = pd.read_parquet(tmp_path / "out" / f"{name}.parquet")
        assert summary.rows[name] == len(getattr(mem, name)) == len(back)
    back = pd.read_parquet(tmp_path / "out" / "runs.parquet")
    assert back["iops"].tolist() == mem.runs["iops"].tolist()


def test_cli_ingest_lists_bad_files_and_exits_1(fio_dir, tmp_path):
    for name in ("single.json", "clientserver.json", "truncated.json"):
        shutil.copy(fio_dir / name, tmp_path / name)
    out = tmp_path / "tidy"
    proc = subprocess.run([sys.executable, "-m", "storagebench.cli", "ingest", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert f"{tmp_path / 'truncated.json'}: truncated JSON" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["all_clients.parquet", "histograms.parquet", "run_totals.parquet",
                                                     "runs.parquet"]
    assert len(pd.read_parquet(out / "runs.parquet")) == 3
    (tmp_path / "truncated.json").unlink()
    ok = subprocess.run([sys.executable, "-m", "storagebench.cli", "ingest", str(tmp_path), "--out", str(out)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "0 not ingested" in ok.stdout


def test_real_fio_run_end_to_end(fio_bin, tmp_path):
    """A fresh 1 MiB fio json+ run: ingested IOPS and the percentiles from its bins equal fio's."""
    out = tmp_path / "out.json"
    subprocess.run([fio_bin, "--name=e2e", "--rw=randrw", "--rwmixread=60", "--bs=4k", "--size=1m",
                    f"--filename={tmp_path / 'data'}", "--ioengine=psync", "--output-format=json+",
                    f"--output={out}"], check=True, timeout=60, capture_output=True)
    res = ingest_paths([out])
    doc = json.loads(out.read_text())
    for _, row in res.runs.iterrows():
        d = doc["jobs"][0][row["direction"]]
        assert row["iops"] == d["iops"] and row["total_ios"] == d["total_ios"]
        h = res.histograms[res.histograms["direction"] == row["direction"]]
        printed = {float(k): v for k, v in d["clat_ns"]["percentile"].items()}
        assert percentiles_from_bins(h["bin_ns"], h["count"], printed, total=d["clat_ns"]["N"]) == printed
    assert set(res.runs["direction"]) == {"read", "write"}


#: Option spellings the old copies of fio's grammar in ingest (ingest.fio.parse_size / parse_time_ms,
#: removed) read differently from fio: (option, spelling, kb_base) -> what the old copy gave.
OLD_WRONG_SIZES = {
    ("bs", "1.5k", 1024): 1536,  # fio: strtoll stops at '.', ".5k" is no suffix -> 1 byte
    ("bs", "4 k", 1024): 4096,  # fio: no suffix after a blank -> 4 bytes
    ("bs", "1e", 1024): 1024**6,  # fio has no 'e' (exa) suffix -> 1 byte
    ("bs", "0x10k", 1024): 16 * 1024,  # fio: hex, then no suffix -> 16 bytes
    ("bs", "4ki", 1000): 4096,  # fio with kb_base=1000: only "kib" is 1024-based -> 4000
    ("iodepth", "2k", 1024): None,  # old ingest: int("2k") failed -> iodepth 1 (fio: 2048)
}


def test_ingest_reads_option_values_with_fios_grammar(fio_bin, tmp_path, fio_dir):
    """bs/iodepth in job options are read by storagebench.fio.options, checked here against fio itself
    (``fio --debug=parse --parse-only``); the spellings the old ingest copies read wrongly included."""
    sections = ["[global]\nioengine=null\nsize=1m\n"]
    for i, ((opt, spelling, kb), _) in enumerate(OLD_WRONG_SIZES.items()):
        sections.append(f"[p{i}]\nkb_base={kb}\n{opt}={spelling}\n")
    job = tmp_path / "probe.fio"
    job.write_text("".join(sections))
    proc = subprocess.run([fio_bin, "--debug=parse", "--parse-only", str(job)], capture_output=True, text=True,
                          timeout=120)
    stored, current = [], None
    for line in (proc.stdout + proc.stderr).splitlines():
        if m := re.search(r"\s__handle_option=(bs|iodepth), type=\S+, ptr=(.*)$", line):
            current = m.group(1)
        elif (m := re.search(r"\sret=(\d+), out=(\d+)$", line)) and current:
            stored.append(int(m.group(2)))
            current = None
    assert len(stored) == len(OLD_WRONG_SIZES), proc.stderr
    base = _last_doc(fio_dir / "single.json")
    for ((opt, spelling, kb), old), fio_says in zip(OLD_WRONG_SIZES.items(), stored, strict=True):
        assert fo.parse_size(spelling, kb) == fio_says != old
        base["jobs"][0]["job options"] = {"rw": "randread", opt: spelling, "kb_base": str(kb)}
        row = parse_fio_output(json.dumps(base).encode(), "o.json").runs[0]
        assert row["bs_bytes" if opt == "bs" else "iodepth"] == fio_says, (opt, spelling)
        assert row["note"] == ""
    # times: the old parse_time_ms read "10sec" as 10 s and "1.5" as 1.5 s; fio reads 10 µs and 1 s
    assert fo.parse_time_us("10sec") == 10 and fo.parse_time_us("1.5") == 1_000_000


def test_tables_follow_the_schema_dtypes_exactly(fio_dir):
    from storagebench import schema

    res = ingest_paths([fio_dir])
    for name in ("runs", "all_clients", "histograms", "timeseries"):
        df = getattr(res, name)
        assert len(df) > 0
        schema.validate(df, name, coerce=False)  # raises on any dtype that is not the schema's


def test_unified_rw_reporting_gives_one_mixed_row(fio_dir):
    """fio 3.33 --unified_rw_reporting=1 (randrw 70/30): one "mixed" block instead of read/write."""
    res = ingest_paths([fio_dir / "unified_rw.json"])
    doc = _last_doc(fio_dir / "unified_rw.json")
    mixed = doc["jobs"][0]["mixed"]
    assert list(res.runs["direction"]) == ["mixed"]
    r = res.runs.iloc[0]
    assert r["iops"] == mixed["iops"] and r["total_ios"] == mixed["total_ios"] and r["rwmixread_pct"] == 70.0
    assert res.histograms["count"].sum() == mixed["clat_ns"]["N"]


def test_fio30_bw_without_bw_bytes_and_global_options_as_list(fio_dir):
    """fio 3.0-3.3 print only "bw" (KiB/s); some client outputs give "global options" as a list."""
    doc = _last_doc(fio_dir / "single.json")
    read = doc["jobs"][0]["read"]
    bw_kib = read.pop("bw")
    read.pop("bw_bytes")
    read["bw"] = bw_kib
    doc["global options"] = [{"ioengine": "libaio"}, {"iodepth": "16"}]
    with pytest.raises(IngestError, match=r"jobs\[0\]\.read\.bw_bytes: missing \(fio-3.33 always prints it\)"):
        parse_fio_output(json.dumps(doc).encode(), "old.json")
    doc["fio version"] = "fio-3.2"
    row = parse_fio_output(json.dumps(doc).encode(), "old.json").runs[0]
    assert row["bw_bytes_per_s"] == bw_kib * 1024.0 and "bw (KiB/s) x 1024" in row["note"]
    assert (row["ioengine"], row["iodepth"]) == ("libaio", 16)


# ---- the fast table builder against a straightforward reference --------------------------------------


def _reference_tables(files: list[tuple[Path, dict | None, dict | None]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """runs and histograms the plain way: one dict per row (parse_fio_output), one DataFrame of them,
    and histogram rows expanded with Python ints; validated like ingest does."""
    from storagebench import schema

    runs, hist = [], []
    for path, ident, prov in files:
        rows = parse_fio_output(path.read_bytes(), str(path), identity=ident, provenance=prov)
        runs.extend(rows.runs)
        keys, counts = iter(rows.hist_bins), iter(rows.hist_counts)
        for run_id, host, job, job_index, direction, n in rows.hist_blocks:
            for _ in range(n):
                hist.append({"run_id": run_id, "host": host, "job": job, "job_index": job_index,
                             "direction": direction, "bin_ns": int(next(keys)), "count": next(counts)})
    df = pd.DataFrame(runs)
    df["started_at"] = pd.to_datetime(df["started_at"], utc=True).astype("datetime64[ns, UTC]")
    hist_df = schema.validate(pd.DataFrame(hist), "histograms") if hist else schema.empty("histograms")
    return schema.validate(df, "runs"), hist_df


def test_fast_tables_equal_reference_tables_on_every_fixture(fio_dir, tmp_path):
    names = [*GOOD, "unified_rw.json"]
    files = [(fio_dir / n, None, None) for n in names]
    for name in names:  # each alone ...
        res = ingest_paths([fio_dir / name])
        ref_runs, ref_hist = _reference_tables([(fio_dir / name, None, None)])
        pd.testing.assert_frame_equal(res.runs, ref_runs, check_exact=True)
        pd.testing.assert_frame_equal(res.histograms, ref_hist, check_exact=True)
    # ... and all together, plus runner run directories with study factors (some files without factors)
    raw = tmp_path / "demo" / "raw"
    for i, (name, factors) in enumerate([("randrw_70_30.json", {"stripe_width": 1, "pattern": "p4k"}),
                                         ("clientserver.json", {"stripe_width": 4, "clients": 2, "iodepth": 9}),
                                         ("single_jsonplus.json", {})]):
        d = raw / f"run{i}"
        d.mkdir(parents=True)
        shutil.copy(fio_dir / name, d / "output.json")
        ident = {"study": "demo", "run_id": f"run{i}", "repetition": i, "run_order": 5 - i, "factors": factors}
        prov = {"fio_version": "fio-3.33", "kernel": "6.1.0-test", "hostname": "box1",
                "started_at": "2026-11-22T05:00:00+02:00"}
        (d / "point.json").write_text(json.dumps(ident))
        (d / "provenance.json").write_text(json.dumps(prov))
        files.append((d / "output.json", ident, prov))
    res = ingest_paths([*(fio_dir / n for n in names), raw])
    ref_runs, ref_hist = _reference_tables(files)
    assert {"stripe_width", "pattern", "clients"} <= set(res.runs.columns) and res.runs["stripe_width"].isna().any()
    pd.testing.assert_frame_equal(res.runs, ref_runs, check_exact=True)
    pd.testing.assert_frame_equal(res.histograms, ref_hist, check_exact=True)


def test_row_fields_name_runs_columns_once(fio_dir):
    """A row tuple's fields are named (RUN_FIELDS, joined from its parts' names): each a runs column, once;
    runs_frame builds the table by those names in schema order."""
    from storagebench import schema
    from storagebench.ingest.fio import RUN_FIELDS

    assert len(set(RUN_FIELDS)) == len(RUN_FIELDS)
    assert set(RUN_FIELDS) <= {c.name for c in schema.RUNS}
    res = parse_fio_output((fio_dir / "single.json").read_bytes(), "single.json")
    assert list(res.runs[0])[: len(schema.RUNS)] == [c.name for c in schema.RUNS]


def _reference_metrics(d: dict, fio2: bool) -> list:
    """The 27 metric columns of one direction block, read from stdlib-json dicts (independent of msgspec)."""
    f = 1000.0 if fio2 else 1.0
    sfx = "" if fio2 else "_ns"
    lat, clat, slat = d["lat" + sfx], d["clat" + sfx], d["slat" + sfx]
    pct = clat.get("percentile", {})
    bw = float(d["bw_bytes"]) if "bw_bytes" in d else d["bw"] * 1024.0
    io = d["io_bytes"] * (1024 if fio2 and "io_kbytes" not in d else 1)
    return [float(d["iops"]), bw, io, d.get("total_ios", -1), d["runtime"] / 1000.0,
            *(float(lat[k]) * f for k in ("mean", "stddev", "min", "max")), float(clat["mean"]) * f,
            float(clat["stddev"]) * f, float(slat["mean"]) * f,
            *(float(pct[f"{p:.6f}"]) * f if f"{p:.6f}" in pct else float("nan") for p in PERCENTILES)]


def test_typed_metrics_equal_stdlib_json_to_the_bit(fio_dir):
    """Every metric of every row of every fixture (typed msgspec decoding, the fast and the general
    path) equals an independent stdlib-json reading, to the bit; and no fixture row has a note but the
    ones that say why (fio 2.1's missing bw_bytes)."""
    from storagebench import schema

    # the metrics read from a direction block (by name: the CPU, error and partial come from the job)
    metric_cols = [c for c in schema.names("runs", role="metric")
                   if c not in ("usr_cpu_pct", "sys_cpu_pct", "error", "partial")]
    checked = 0
    for name in [*GOOD, "unified_rw.json"]:
        doc = _last_doc(fio_dir / name)
        rows = parse_fio_output((fio_dir / name).read_bytes(), name).runs
        fio2 = doc["fio version"].startswith("fio-2.")
        for row in rows:
            ref = _reference_metrics(_block(doc, row), fio2)
            ours = [row[c] for c in metric_cols]
            assert [repr(float(v)) for v in ours] == [repr(float(v)) for v in ref], (name, row["job"], row["direction"])
            # the table gate wants every NaN named: a direction without I/O has no percentiles
            no_io = row["io_bytes"] == 0 and "not printed, no I/O completed (clat_p*_ns NaN)" in row["note"]
            assert row["note"] == "" or (fio2 and "bw_bytes: not printed" in row["note"]) or no_io, row["note"]
            checked += 1
    assert checked >= 20


def _block(doc: dict, row: dict) -> dict:
    entries = doc.get("jobs") or doc.get("client_stats")
    same = [e for e in entries if e["jobname"] == row["job"]
            and (row["host"] in ("local", "All clients") or f"{e['hostname']}:{e['port']}" == row["host"])]
    return same[row["job_index"]][row["direction"]]


# ---- one bad file never loses the others; tables are replaced only when complete ----------------------


def _study_with_factors(root: Path, fio_dir: Path, factors: list[dict]) -> Path:
    for i, f in enumerate(factors):
        d = root / "raw" / f"run{i}"
        d.mkdir(parents=True)
        shutil.copy(fio_dir / "single_jsonplus.json", d / "output.json")
        (d / "point.json").write_text(json.dumps({"study": "s", "run_id": f"run{i}", "factors": f}))
    return root


def test_a_failing_later_batch_leaves_the_previous_tables_untouched(fio_dir, tmp_path, monkeypatch):
    from storagebench.errors import SchemaError
    from storagebench.ingest import _Collector

    out = tmp_path / "tidy"
    first = ingest_to_parquet([fio_dir], out, batch_files=2)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"runs.parquet", "histograms.parquet", "all_clients.parquet", "timeseries.parquet",
                           "run_totals.parquet"}
    # a later batch brings a factor column the first did not have: refused, after batch 1 was written
    study = _study_with_factors(tmp_path / "s", fio_dir, [{"x": 1}, {"x": 2, "y": 3}])
    with pytest.raises(SchemaError, match=r"columns \['y'\] appear after the first batch"):
        ingest_to_parquet([study], out, batch_files=1)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary directory left either
    # killed (KeyboardInterrupt) while the second batch is turned into tables
    calls = {"n": 0}
    frames = _Collector.frames

    def interrupted(self):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return frames(self)

    monkeypatch.setattr(_Collector, "frames", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest_to_parquet([fio_dir / "single.json", fio_dir / "two_jobs.json"], out, batch_files=1)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    # a complete ingest replaces them all, and removes a table the new ingest does not have
    again = ingest_to_parquet([fio_dir / "single.json"], out, batch_files=1)
    assert again.ok and sorted(p.name for p in out.iterdir()) == ["histograms.parquet", "run_totals.parquet",
                                                                   "runs.parquet"]
    assert len(pd.read_parquet(out / "runs.parquet")) == 1 and first.rows["runs"] > 1


def test_an_unexpected_exception_in_one_file_loses_only_that_file(fio_dir, tmp_path, monkeypatch):
    """The per-file safety net: whatever goes wrong in one file (here a bug injected into the fio
    parser for one file) is reported for that file; the batch keeps every other file's rows."""
    from storagebench.ingest import _collector as ing  # where each file is handed to the fio reader

    for name in ("single.json", "two_jobs.json", "randrw_70_30.json"):
        shutil.copy(fio_dir / name, tmp_path / name)
    shutil.copy(fio_dir / "single.json", tmp_path / "boom.json")
    real = ing.emit_rows

    def buggy(sink, data, path, *args):
        if path.endswith("boom.json"):
            sink.runs.append(("half a row",))  # a bug that leaves a row behind before it raises
            raise RuntimeError("injected")
        return real(sink, data, path, *args)

    monkeypatch.setattr(ing, "emit_rows", buggy)
    res = ingest_paths([tmp_path])
    assert len(res.runs) == 1 + 2 + 2 and res.files == 3
    (err,) = res.errors
    assert err.path.endswith("boom.json") and "internal error" in err.reason and "RuntimeError: injected" in err.reason
    summary = ingest_to_parquet([tmp_path], tmp_path / "out", batch_files=2)
    assert summary.rows["runs"] == 5 and [e.path for e in summary.errors] == [err.path]


@pytest.mark.parametrize("stamp", [-1, 0, 10**17, 2**62])
def test_a_report_time_fio_cannot_print_is_nat_and_named(fio_dir, tmp_path, stamp):
    doc = _last_doc(fio_dir / "single_jsonplus.json")
    doc["timestamp_ms"] = stamp
    path = tmp_path / "out.json"
    path.write_text(json.dumps(doc))
    r = ingest_paths([path]).runs.iloc[0]
    assert pd.isna(r["reported_at"]) and pd.isna(r["started_at"])
    assert f"timestamp_ms = {stamp}" in r["note"] and "reported_at NaT" in r["note"]


@given(st.one_of(st.integers(946_684_800_000, 9_223_372_035_999).map(lambda ms: ms / 1000.0),
                 st.floats(946_684_800.0, 9_223_372_035.0, allow_nan=False)))
@settings(max_examples=500, deadline=None)
def test_a_row_s_time_in_us_is_the_datetime_fromtimestamp_makes(ts):
    """Ingest keeps fio's times as µs since the epoch and makes the datetime column at once: each value is the one
    ``datetime.fromtimestamp`` gives (its rounding: the fraction of a second, half to even)."""
    from datetime import datetime, timezone

    from storagebench.ingest._runmeta import datetime_us, epoch_us, us_datetime

    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    assert epoch_us(ts) == datetime_us(dt)
    assert us_datetime(epoch_us(ts)) == dt

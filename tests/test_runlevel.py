"""The run-level table: one rule (fio's sum_thread_stats) for every "one row per run", gold-checked.

Gold checks:

* the two-job example of issue 10 (1000 IOPS for 10 s at 1 ms, 1000 IOPS for 1 s at 10 ms) gives one
  mean latency, 1.818 ms (weighted by completed I/Os), and 1,100 IOPS (I/Os over the longest runtime)
  through every call site: the table, stats, figures, aggregate, parquet;
* real fio output where fio itself combined the *same* job entries: the ``All clients`` entry of a
  client/server run (client.c handle_ts -> stat.c sum_thread_stats) and the ``mixed`` block of
  ``unified_rw_reporting=both`` (stat.c gen_mixed_ddir_stats_from_ts -> sum_thread_stats);
* a pair of real runs of one job set without and with ``group_reporting`` (two runs: only the counts
  and the rates can agree, and they do).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storagebench import schema, stats
from storagebench._histogram import percentiles_from_bins
from storagebench.aggregate import cluster_aggregate, combine_jobs
from storagebench.errors import SchemaError
from storagebench.fio.hosts import host_label
from storagebench.ingest import ingest_paths, ingest_study
from storagebench.runlevel import per_run, read_run_totals, run_totals, select
from storagebench.schema import PERCENTILES, percentile_column
from storagebench.stats import littles_law
from storagebench.stats import per_run as stats_per_run

FIO = Path(__file__).parent / "fixtures" / "fio"
FIXTURES = Path(__file__).parent / "fixtures"
PCT = {f"{p:.6f}": percentile_column(p) for p in PERCENTILES}


def _doc(name: str) -> dict:
    text = (FIO / name).read_text()
    return json.loads(text[text.index("{"):])


# ---- the two-job example -------------------------------------------------------------------------


def _two_jobs(**over) -> pd.DataFrame:
    """One run, two jobs: 1000 IOPS for 10 s at 1 ms, and 1000 IOPS for 1 s at 10 ms (4 KiB)."""
    d = {"run_id": ["r", "r"], "host": ["local", "local"], "job": ["a", "b"], "job_index": [0, 0],
         "direction": ["read", "read"], "rw": ["randread"] * 2, "bs_bytes": [4096, 4096], "iodepth": [1, 1],
         "numjobs": [1, 1], "iops": [1000.0, 1000.0], "runtime_s": [10.0, 1.0], "total_ios": [10_000, 1_000],
         "io_bytes": [10_000 * 4096, 1_000 * 4096], "bw_bytes_per_s": [4096e3, 4096e3],
         "lat_mean_ns": [1e6, 1e7], "clat_mean_ns": [1e6, 1e7], "lat_stdev_ns": [0.0, 0.0],
         "clat_stdev_ns": [0.0, 0.0]}
    d.update(over)
    return pd.DataFrame(d)


GOLD_MS = 20_000 / 11_000  # (10,000 x 1 ms + 1,000 x 10 ms) / 11,000 I/Os = 1.818 ms


def test_two_job_example_has_one_mean_latency_everywhere(tmp_path):
    runs = _two_jobs()
    assert GOLD_MS == pytest.approx(1.818, abs=5e-4)
    table = run_totals(runs)
    row = per_run(table).iloc[0]
    assert row["lat_mean_ns"] / 1e6 == pytest.approx(GOLD_MS, rel=1e-12)
    assert row["iops"] == pytest.approx(11_000 / 10.0)  # fio's group IOPS: I/Os over the longest runtime
    assert row["total_ios"] == 11_000 and row["runtime_s"] == 10.0 and row["combined_by"] == "I/O counts"
    assert row["n_jobs"] == 2 and row["outstanding_ios"] == 2
    # the pooled SD: both jobs had constant latency, so all of it is between the jobs (sum_stat's delta term)
    sd = np.sqrt((10_000 * (1e6 - GOLD_MS * 1e6) ** 2 + 1_000 * (1e7 - GOLD_MS * 1e6) ** 2) / (11_000 - 1))
    assert row["lat_stdev_ns"] == pytest.approx(sd, rel=1e-12)
    # every call site gives the same number
    sites = {
        "runlevel.per_run(runs)": per_run(runs).iloc[0]["lat_mean_ns"],
        "stats.per_run(runs)": stats_per_run(runs).iloc[0]["lat_mean_ns"],
        "stats.per_run(run_totals)": stats_per_run(table).iloc[0]["lat_mean_ns"],
        "stats.littles_law": littles_law(runs).iloc[0]["lat_mean_ns"],
        "aggregate.combine_jobs(by=run_id)": combine_jobs(runs, by=("run_id",)).iloc[0]["lat_mean_ns"],
        "aggregate.combine_jobs(by=run_id, direction)": combine_jobs(runs, by=("run_id", "direction"))
        .iloc[0]["lat_mean_ns"],
        "stats.per_point": stats.per_point(runs, by=["iodepth"], metrics=("lat_mean_ms",)).iloc[0]["lat_mean_ms"] * 1e6,
        "stats.point_table": stats.point_table(runs, by=["iodepth"]).iloc[0]["mean lat (ms)"] * 1e6,
    }
    for site, value in sites.items():
        tol = 5e-5 if site == "stats.point_table" else 1e-12  # the display table rounds to 4 decimals (ms)
        assert value / 1e6 == pytest.approx(GOLD_MS, rel=tol), site
    assert stats.per_point(runs, by=["iodepth"], metrics=("iops",)).iloc[0]["iops"] == pytest.approx(1100.0)
    # the table written by ingest and read back (parquet with its metadata) holds the same number
    path = schema.write_table(table, tmp_path / "run_totals.parquet", "run_totals", spec_hash="abc")
    back = read_run_totals(tmp_path)
    assert back.attrs["storagebench"] == {"format_version": schema.FORMAT_VERSION, "table": "run_totals",
                                          "spec_hash": "abc"}
    assert path.exists() and per_run(back).iloc[0]["lat_mean_ns"] / 1e6 == pytest.approx(GOLD_MS, rel=1e-12)
    # weighting the means by IOPS, the rule that made the testbed verdicts differ from the figures, gives 5.5 ms
    assert (runs["lat_mean_ns"] * runs["iops"]).sum() / runs["iops"].sum() / 1e6 == pytest.approx(5.5)


def test_two_job_example_without_counts():
    # fio 2.1 prints no total_ios: the count is IOPS x runtime, and the rule is fio's again
    row = per_run(_two_jobs(total_ios=[-1, -1], io_bytes=[-1, -1])).iloc[0]
    assert row["lat_mean_ns"] / 1e6 == pytest.approx(GOLD_MS) and row["iops"] == pytest.approx(1100.0)
    assert row["total_ios"] == -1 and row["io_bytes"] == -1 and row["combined_by"] == "I/O counts"
    # nothing known but the rates (a published table): a common runtime is assumed, and said so
    row = per_run(_two_jobs(total_ios=[-1, -1], io_bytes=[-1, -1], runtime_s=[np.nan, np.nan])).iloc[0]
    assert row["combined_by"] == "IOPS" and row["iops"] == 2000.0
    assert row["lat_mean_ns"] / 1e6 == pytest.approx(5.5)


def test_a_job_in_error_flags_the_run_and_figures_leave_it_out():
    runs = _two_jobs(error=[0, 5])
    row = per_run(runs).iloc[0]
    assert row["error"] == 5 and row["n_jobs_error"] == 1  # kept and flagged, not averaged away
    assert per_run(runs, completed=True).empty
    good = pd.concat([runs, _two_jobs(run_id=["s", "s"], error=[0, 0])], ignore_index=True)
    assert list(per_run(good, completed=True)["run_id"]) == ["s"]
    with pytest.raises(SchemaError, match="no rows of completed"):
        stats.per_point(runs, by=["iodepth"])
    killed = per_run(_two_jobs(partial=[False, True])).iloc[0]
    assert killed["partial"] and per_run(_two_jobs(partial=[False, True]), completed=True).empty


def test_single_rows_pass_through_unchanged():
    one = _two_jobs().iloc[[0]].assign(clat_p99_ns=1.5e6, note="a note")
    row = per_run(one).iloc[0]
    assert row["combined_by"] == "as reported" and row["n_rows"] == 1 and row["note"] == "a note"
    for c in ("iops", "runtime_s", "lat_mean_ns", "bw_bytes_per_s", "clat_p99_ns", "total_ios", "io_bytes"):
        assert row[c] == one[c].iloc[0], c


# ---- real fio: fio's own combination of the same job entries ---------------------------------------


def test_cluster_total_equals_fio_all_clients_of_the_two_job_run():
    """cs_two_jobs.json: two fio servers, one job each (4 KiB for 2 s at 1000 IOPS; 256 KiB for 1 s at
    200 IOPS), and fio's "All clients" entry: sum_thread_stats of exactly those two job entries."""
    res = ingest_paths(FIO / "cs_two_jobs.json")
    assert res.ok and len(res.runs) == 2 and len(res.all_clients) == 1
    t = res.run_totals
    assert list(t["host"]) == [*sorted(res.runs["host"], key=list(res.runs["host"]).index), "all hosts"]
    row = per_run(t).iloc[0]
    assert row["host"] == "all hosts" and row["all_hosts"] and row["n_hosts"] == 2 and row["n_jobs"] == 2
    ac = _doc("cs_two_jobs.json")["client_stats"][-1]
    assert ac["jobname"] == "All clients"
    rd = ac["read"]
    assert row["total_ios"] == rd["total_ios"] and row["io_bytes"] == rd["io_bytes"]
    assert row["runtime_s"] == rd["runtime"] / 1000
    assert row["iops"] == pytest.approx(rd["iops"], rel=1e-9)
    assert abs(row["bw_bytes_per_s"] - rd["bw_bytes"]) < 1.0  # fio truncates bw_bytes to an integer
    for col, key in (("lat", "lat_ns"), ("clat", "clat_ns")):
        assert row[f"{col}_mean_ns"] == pytest.approx(rd[key]["mean"], rel=1e-9), col  # fio prints 6 decimals
        assert row[f"{col}_stdev_ns"] == pytest.approx(rd[key]["stddev"], rel=1e-9), col
    assert row["slat_mean_ns"] == pytest.approx(rd["slat_ns"]["mean"], rel=1e-9)
    assert row["lat_min_ns"] == rd["lat_ns"]["min"] and row["lat_max_ns"] == rd["lat_ns"]["max"]
    assert row["usr_cpu_pct"] == pytest.approx(ac["usr_cpu"], rel=1e-2)  # fio weights by job_runtime (~1 ms less)
    # the rule matters here: the sum of IOPS and the IOPS-weighted mean are not what fio prints
    r = res.runs
    assert abs(r["iops"].sum() / rd["iops"] - 1) > 0.05
    iops_weighted = (r["lat_mean_ns"] * r["iops"]).sum() / r["iops"].sum()
    assert abs(iops_weighted / rd["lat_ns"]["mean"] - 1) > 0.01
    # percentiles of the cluster: the merged bins of both hosts (fio 3.33 prints none for All clients)
    pooled: Counter = Counter()
    for c in _doc("cs_two_jobs.json")["client_stats"][:-1]:
        pooled.update({int(k): v for k, v in c["read"]["clat_ns"]["bins"].items()})
    b = np.array(sorted(pooled))
    want = percentiles_from_bins(b, np.array([pooled[k] for k in b]), PERCENTILES)
    for p in PERCENTILES:
        assert row[percentile_column(p)] == want[p]
    # and aggregate's check against All clients finds nothing to flag
    ca = cluster_aggregate(t, all_clients=res.all_clients).iloc[0]
    assert abs(ca["iops_rel_diff"]) < 1e-9 and not ca["all_clients_mismatch"]
    # each host's row is that host's job as fio printed it
    for c in _doc("cs_two_jobs.json")["client_stats"][:-1]:
        h = select(t, hosts="each")
        hrow = h[h["host"] == host_label(c["hostname"], c["port"])].iloc[0]
        assert hrow["iops"] == c["read"]["iops"] and hrow["combined_by"] == "as reported"


def test_mixed_row_equals_fio_unified_rw_reporting_both():
    """randrw_both.json: one randrw job (bs=4k,16k) reported per direction and, by fio, as a "mixed"
    block of the same I/Os. Ingest keeps read and write; the run-level mixed row must be fio's."""
    res = ingest_paths(FIO / "randrw_both.json")
    assert res.ok and sorted(res.runs["direction"]) == ["read", "write"]
    t = res.run_totals
    assert list(t["direction"]) == ["read", "write", "mixed"]
    assert list(t["all_directions"]) == [False, False, True]
    row = per_run(t).iloc[0]
    mixed = _doc("randrw_both.json")["jobs"][0]["mixed"]
    assert row["direction"] == "mixed" and row["n_directions"] == 2
    assert row["total_ios"] == mixed["total_ios"] and row["io_bytes"] == mixed["io_bytes"]
    assert row["iops"] == pytest.approx(mixed["iops"], rel=1e-12)
    assert abs(row["bw_bytes_per_s"] - mixed["bw_bytes"]) <= 2.0  # each direction's bw truncated by fio
    assert row["runtime_s"] == mixed["runtime"] / 1000
    for col, key in (("lat", "lat_ns"), ("clat", "clat_ns")):
        assert row[f"{col}_mean_ns"] == pytest.approx(mixed[key]["mean"], rel=1e-9), col
        assert row[f"{col}_stdev_ns"] == pytest.approx(mixed[key]["stddev"], rel=1e-9), col
    assert row["slat_mean_ns"] == pytest.approx(mixed["slat_ns"]["mean"], rel=1e-9)
    assert row["lat_min_ns"] == mixed["lat_ns"]["min"] and row["lat_max_ns"] == mixed["lat_ns"]["max"]
    for key, col in PCT.items():  # from the merged bins of both directions, exactly fio's
        assert row[col] == mixed["clat_ns"]["percentile"][key], col
    assert row["bs_bytes"] == -1 and row["rw"] == "randrw"  # 4k reads, 16k writes: no single bs
    # a per-direction row is that direction as fio printed it
    rd = select(t, direction="read").iloc[0]
    assert rd["iops"] == _doc("randrw_both.json")["jobs"][0]["read"]["iops"] and rd["bs_bytes"] == 4096


def test_group_pair_same_job_set_with_and_without_group_reporting():
    """group_pair_*.json: the same two jobs (4 KiB at 1000 IOPS for 2 s, 256 KiB at 200 IOPS for 1 s), one run
    per job, one run with group_reporting. Two runs: latencies differ from run to run, but the rates are
    fixed, so fio's group IOPS and counts must be reproduced by the run-level row of the per-job run."""
    res = ingest_paths(FIO / "group_pair_nogroup.json")
    assert res.ok and len(res.runs) == 2
    row = per_run(res.run_totals).iloc[0]
    grp = _doc("group_pair_group.json")["jobs"]
    assert len(grp) == 1
    g = grp[0]["read"]
    assert row["iops"] == pytest.approx(g["iops"], rel=0.01)
    assert row["total_ios"] == pytest.approx(g["total_ios"], rel=0.01)
    assert row["runtime_s"] == pytest.approx(g["runtime"] / 1000, rel=0.01)
    assert row["io_bytes"] == pytest.approx(g["io_bytes"], rel=0.01)
    assert abs(res.runs["iops"].sum() / g["iops"] - 1) > 0.05  # summing the jobs' IOPS is not fio's rule


def test_jobs_without_group_reporting_and_their_merged_percentiles():
    res = ingest_paths(FIO / "numjobs4_nogroup.json")
    row = per_run(res.run_totals).iloc[0]
    jobs = _doc("numjobs4_nogroup.json")["jobs"]
    ios = sum(j["read"]["total_ios"] for j in jobs)
    rt = max(j["read"]["runtime"] for j in jobs) / 1000
    assert row["n_jobs"] == 4 and row["total_ios"] == ios and row["iops"] == pytest.approx(ios / rt, rel=1e-12)
    # numjobs=4 clones of one job section: its queue counts once (iodepth x numjobs), not four times
    r = res.runs.iloc[0]
    assert r["numjobs"] == 4 and row["outstanding_ios"] == r["iodepth"] * 4
    pooled: Counter = Counter()
    for j in jobs:
        pooled.update({int(k): v for k, v in j["read"]["clat_ns"]["bins"].items()})
    b = np.array(sorted(pooled))
    want = percentiles_from_bins(b, np.array([pooled[k] for k in b]), PERCENTILES)
    assert all(row[percentile_column(p)] == want[p] for p in PERCENTILES)


def test_failed_and_killed_fio_runs_are_flagged():
    res = ingest_paths([FIO / "error_enospc.json", FIO / "sigint.json"])
    t = per_run(res.run_totals)
    err = t[t["source_file"].str.endswith("error_enospc.json")].iloc[0]
    assert err["error"] == 28 and err["n_jobs_error"] == 1
    assert t[t["source_file"].str.endswith("sigint.json")]["partial"].all()
    assert per_run(res.run_totals, completed=True).empty


# ---- DiskSPD / Iometer / published: run totals already ---------------------------------------------


def test_diskspd_and_iometer_rows_pass_through_and_total_the_tools_way():
    res = ingest_paths([FIXTURES / "diskspd", FIXTURES / "iometer"])
    t = res.run_totals
    each = select(t, hosts="each", direction="each")
    assert len(each) == len(res.runs)
    merged = each.merge(res.runs, on=["run_id", "host", "direction"], suffixes=("", "_runs"))
    assert len(merged) == len(res.runs) and (merged["combined_by"] == "as reported").all()
    for c in ("iops", "bw_bytes_per_s", "io_bytes", "total_ios", "runtime_s", "lat_mean_ns", "lat_stdev_ns",
              "clat_p99_ns", "clat_p50_ns", "usr_cpu_pct"):
        pd.testing.assert_series_equal(merged[c], merged[f"{c}_runs"], check_names=False)
    # a DiskSPD read/write run: the total is DiskSPD's own "total:" line (1189.03 IOPS, 0.840 ms)
    rw = per_run(t)
    total = rw[rw["source_file"].str.endswith("ReadWrite.txt")].iloc[0]
    assert total["direction"] == "mixed" and total["total_ios"] == 35686
    assert total["iops"] == pytest.approx(1189.03, abs=0.005)
    assert total["lat_mean_ns"] / 1e6 == pytest.approx(0.840, abs=0.0005)


def test_published_tables_pass_through_with_unknown_counts():
    from storagebench.published import load_published

    for name in ("hdd_iops", "vsan_stripe", "vsan_qd_threads"):
        df = load_published(name)
        pr = per_run(df)
        assert len(pr) == len(df) and (pr["combined_by"] == "as reported").all(), name
        for c in ("iops", "lat_mean_ns", "bw_bytes_per_s", "total_ios", "io_bytes", "direction", "source_tool"):
            pd.testing.assert_series_equal(pr[c].reset_index(drop=True), df[c].reset_index(drop=True),
                                           check_names=False, check_dtype=False)
        assert (pr["total_ios"] == -1).all()


# ---- the table on disk -----------------------------------------------------------------------------


def test_study_tables_carry_format_version_and_spec_hash(tmp_path):
    res = ingest_study(FIXTURES / "study_demo")
    assert res.ok and res.spec_hash == "df339d75f040de9d"
    written = res.write_parquet(tmp_path)
    assert set(written) == {"runs", "histograms", "run_totals"}
    for name, path in written.items():
        meta = schema.read_metadata(path)
        assert meta == {"format_version": schema.FORMAT_VERSION, "table": name, "spec_hash": "df339d75f040de9d"}
        df = schema.read_table(path)
        assert df.attrs["storagebench"]["table"] == name and len(df) == len(getattr(res, name))
    from storagebench.ingest import ingest_to_parquet

    s = ingest_to_parquet(FIXTURES / "study_demo", tmp_path / "streamed", batch_files=5)
    assert s.ok and s.spec_hashes == ["df339d75f040de9d"]
    for name, path in s.paths.items():
        assert schema.read_metadata(path)["spec_hash"] == "df339d75f040de9d", name
    streamed = schema.read_table(s.paths["run_totals"], "run_totals")
    pd.testing.assert_frame_equal(streamed, res.run_totals, check_dtype=False)
    # loose files: no study, no spec hash
    loose = ingest_paths(FIO / "single.json")
    assert loose.spec_hash is None and schema.read_metadata(
        loose.write_parquet(tmp_path / "loose")["runs"])["spec_hash"] is None


def test_a_format_0_tidy_directory_still_loads():
    d = FIXTURES / "tidy_format0"
    runs = schema.read_table(d / "runs.parquet")
    assert runs.attrs["storagebench"]["format_version"] == 0 and runs.attrs["storagebench"]["table"] == "runs"
    fresh = ingest_study(FIXTURES / "study_demo")
    # source_file is the absolute path where the format-0 tables were ingested (another checkout): the same
    # raw/<run_id>/output.json below it
    def tail(col):
        return col.astype(str).str.split("/").str[-3:].str.join("/")

    assert tail(runs["source_file"]).tolist() == tail(fresh.runs["source_file"]).tolist()
    # reported_at (fio's report time) came after format 0: an old table reads it as unknown (NaT), every other
    # column as a fresh ingest of the same raw files gives it
    assert runs["reported_at"].isna().all() and fresh.runs["reported_at"].notna().all()
    later = ["source_file", "reported_at"]
    pd.testing.assert_frame_equal(runs.drop(columns=later), fresh.runs.drop(columns=later), check_dtype=False)
    migrated = read_run_totals(d)  # no run_totals.parquet: built from runs + histograms
    assert migrated.attrs["storagebench"]["migrated_from"] == "runs.parquet"
    assert tail(migrated["source_file"]).tolist() == tail(fresh.run_totals["source_file"]).tolist()
    assert migrated["reported_at"].isna().all()
    pd.testing.assert_frame_equal(migrated.drop(columns=later), fresh.run_totals.drop(columns=later),
                                  check_dtype=False)


def test_bad_and_newer_tables_are_refused_by_name(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    res = ingest_paths(FIO / "single_jsonplus.json")
    path = schema.write_table(res.runs, tmp_path / "runs.parquet", "runs")
    with pytest.raises(SchemaError, match=r"holds the 'runs' table, not 'histograms'"):
        schema.read_table(path, "histograms")
    arrow = pq.read_table(path)
    for meta, pattern in (
        ({"format_version": schema.FORMAT_VERSION + 1, "table": "runs"},
         rf"format_version {schema.FORMAT_VERSION + 1} was written by a newer storagebench; this one reads "
         rf"formats 0 to {schema.FORMAT_VERSION}"),
        ({"format_version": "1"}, "format_version must be an integer >= 0, got '1'"),
        ([1, 2], "must be a JSON object"),
    ):
        bad = tmp_path / "bad.parquet"
        pq.write_table(arrow.replace_schema_metadata({b"storagebench": json.dumps(meta).encode()}), bad)
        with pytest.raises(SchemaError, match=pattern):
            schema.read_table(bad, "runs")
    # format 0 runs written before `note` existed: migrated
    old = tmp_path / "old" / "runs.parquet"
    old.parent.mkdir()
    res.runs.drop(columns=["note"]).to_parquet(old, index=False)
    back = schema.read_table(old)
    assert (back["note"] == "").all() and back.attrs["storagebench"]["format_version"] == 0
    # format 0 that lacks a column no migration can supply: a clear error naming the format
    res.runs.drop(columns=["iops"]).to_parquet(old, index=False)
    with pytest.raises(SchemaError, match=r"format 0 .* cannot be read as 'runs'.*\['iops'\].*ingest the study's raw/"):
        schema.read_table(old)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(SchemaError, match="not a readable parquet file"):
        schema.read_table(tmp_path / "junk.parquet")
    # a parquet that is no storagebench table (e.g. a compare --out file) is read as it is
    other = tmp_path / "comparison.parquet"
    pq.write_table(pa.table({"ratio": [1.0]}), other)
    assert list(schema.read_table(other).columns) == ["ratio"]


def test_point_json_format_versions(tmp_path):
    import shutil

    study = tmp_path / "s"
    for i, version in enumerate((None, 1, 2)):
        d = study / "raw" / f"run{i}"
        d.mkdir(parents=True)
        shutil.copy(FIO / "single_jsonplus.json", d / "output.json")
        point = {"study": "s", "run_id": f"run{i}", "repetition": 0, "run_order": i, "factors": {}, "options": {}}
        if version is not None:
            point["format_version"] = version
        (d / "point.json").write_text(json.dumps(point))
    res = ingest_study(study)
    assert sorted(res.runs["run_id"]) == ["run0", "run1"]  # format 0 (no key) and 1 are read
    assert len(res.errors) == 1
    assert "point.json format_version 2 was written by a newer storagebench" in res.errors[0].reason
    assert res.errors[0].path.endswith("run2/point.json")


# ---- properties and bad inputs -----------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_job = st.tuples(st.integers(1, 3), st.sampled_from(["read", "write"]), st.integers(1, 10**6),
                 st.floats(0.5, 20.0), st.floats(1e4, 1e8), st.floats(0.0, 1e7))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(_job, min_size=2, max_size=8))
def test_fio_rule_is_the_same_in_one_step_or_in_stages(jobs):
    """fio sums jobs into groups and groups into "All clients" (client.c) with one rule: combining the
    per-host rows again must give the all-hosts rows (and the mixed rows the same as their directions)."""
    rows = pd.DataFrame([{"run_id": "r", "host": f"h{h}", "job": f"j{i}", "job_index": 0, "direction": d,
                          "total_ios": n, "runtime_s": rt, "iops": n / rt, "io_bytes": n * 4096,
                          "bw_bytes_per_s": n * 4096 / rt, "lat_mean_ns": m, "lat_stdev_ns": sd,
                          "clat_mean_ns": m, "clat_stdev_ns": sd}
                         for i, (h, d, n, rt, m, sd) in enumerate(jobs)])
    t = run_totals(rows)
    hosts = select(t, hosts="each", direction="each")  # one row per host x direction: jobs combined
    again = run_totals(hosts.assign(job=hosts["host"], job_index=0))
    for d in sorted(rows["direction"].unique()):
        one = select(t, hosts="all", direction=d).iloc[0]
        two = select(again, hosts="all", direction=d).iloc[0]
        assert one["total_ios"] == two["total_ios"] and one["runtime_s"] == two["runtime_s"]
        for c in ("iops", "lat_mean_ns", "lat_stdev_ns"):
            assert one[c] == pytest.approx(two[c], rel=1e-9, abs=1e-6), (d, c)
    total = per_run(t).iloc[0]
    assert total["total_ios"] == rows["total_ios"].sum()
    w = rows["total_ios"] / rows["total_ios"].sum()
    assert total["lat_mean_ns"] == pytest.approx((w * rows["lat_mean_ns"]).sum(), rel=1e-9)
    assert rows["lat_mean_ns"].min() * (1 - 1e-12) <= total["lat_mean_ns"] <= rows["lat_mean_ns"].max() * (1 + 1e-12)


def test_bad_inputs_are_named():
    runs = _two_jobs()
    with pytest.raises(SchemaError, match=r"missing columns \['iops'\]"):
        run_totals(runs.drop(columns=["iops"]))
    with pytest.raises(SchemaError, match=r"missing columns \['run_id'\]"):
        run_totals(runs.drop(columns=["run_id"]))
    with pytest.raises(SchemaError, match=r"histograms is missing columns \['job_index'\]"):
        run_totals(runs, pd.DataFrame({"run_id": ["r"], "host": ["local"], "job": ["a"], "direction": ["read"],
                                       "bin_ns": [1000], "count": [1]}))
    with pytest.raises(SchemaError, match="cannot be cast to int64"):
        run_totals(runs.assign(total_ios=["many", "few"]))
    with pytest.raises(SchemaError, match=r"hosts must be one of \['all', 'each'\]"):
        select(run_totals(runs), hosts="some")
    with pytest.raises(SchemaError, match="direction must be one of"):
        select(run_totals(runs), direction="reads")
    with pytest.raises(SchemaError, match="needs a run-level table"):
        select(runs)
    # a latency fio did not print (NaN) in a job with I/O: the combined mean is unknown, not the other job's
    row = per_run(runs.assign(lat_mean_ns=[1e6, np.nan])).iloc[0]
    assert np.isnan(row["lat_mean_ns"]) and row["clat_mean_ns"] / 1e6 == pytest.approx(GOLD_MS)
    # the same job entry twice (one output ingested twice): combined, and said so
    twice = per_run(pd.concat([runs, runs], ignore_index=True)).iloc[0]
    assert twice["n_rows"] == 4 and "appears more than once" in twice["note"]
    with pytest.raises(SchemaError, match="percentiles must be among"):
        combine_jobs(runs, by=("run_id",), percentiles=(99.0, 42.0))


def test_bad_point_json_versions_are_per_run_errors(tmp_path):
    import shutil

    study = tmp_path / "s"
    for i, version in enumerate(('"1"', "-1", "1.5", "true")):
        d = study / "raw" / f"run{i}"
        d.mkdir(parents=True)
        shutil.copy(FIO / "single_jsonplus.json", d / "output.json")
        (d / "point.json").write_text(f'{{"run_id": "run{i}", "format_version": {version}}}')
    res = ingest_study(study)
    assert res.runs.empty and len(res.errors) == 4
    assert all("format_version" in e.reason for e in res.errors), [e.reason for e in res.errors]

"""Cluster aggregation of a real 1 s fio client/server run on 3 test servers (owner-only Unix sockets)."""

from __future__ import annotations

import shutil
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from storagebench._clientserver import read_client_output, read_span_logs, run_clients
from storagebench._histogram import percentiles_from_bins
from storagebench.aggregate import (
    client_overlap,
    client_spans,
    cluster_aggregate,
    combine_jobs,
    fairness,
    jain_index,
    per_host,
)
from storagebench.errors import SchemaError
from storagebench.fio.hosts import host_label
from storagebench.ingest import ingest_paths
from storagebench.servers import fio_servers

JOB = """[global]
ioengine=psync
rw=randrw
rwmixread=70
bs=4k
size=4m
runtime=1
time_based
numjobs=2

[sb]
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory, fio_bin):
    d = tmp_path_factory.mktemp("agg")
    job = d / "job.fio"
    job.write_text(JOB)
    with fio_servers(3, workdir=d / "servers") as servers:
        hosts = [s.host for s in servers]
        run_clients(job, hosts, d / "output.json", d / "stderr.txt", 60)
    res = ingest_paths(d / "output.json")
    assert res.ok, res.errors
    doc, _ = read_client_output(d / "output.json")
    spans = read_span_logs(d, hosts, run_id=res.runs["run_id"].iloc[0])
    return res, doc, spans, [h.label for h in hosts]


def _fio_iops(g: pd.DataFrame) -> float:
    """fio's group IOPS of rows ``g`` (stat.c sum_thread_stats): completed I/Os over the longest runtime,
    which is the sum of the rows' IOPS when they share one runtime."""
    rt = g["runtime_s"]
    return g["iops"].sum() if rt.min() == rt.max() else g["total_ios"].sum() / rt.max()


def test_per_host_rows_combine_the_jobs_of_each_host(run):
    res, doc, _, hosts = run
    ph = per_host(res.runs, res.histograms)
    assert sorted(ph["host"].unique()) == sorted(hosts)
    assert set(ph["n_jobs"]) == {2}  # numjobs=2 without group_reporting: two entries per host
    for (host, d), g in res.runs.groupby(["host", "direction"]):
        row = ph[(ph.host == host) & (ph.direction == d)].iloc[0]
        assert row["iops"] == pytest.approx(_fio_iops(g), rel=1e-12)
        assert row["total_ios"] == g["total_ios"].sum()
        w = g["total_ios"] / g["total_ios"].sum()  # fio sum_stat: means weighted by samples (= completed I/Os)
        assert row["lat_mean_ns"] == pytest.approx((w * g["lat_mean_ns"]).sum(), rel=1e-12)
        assert g["lat_mean_ns"].min() <= row["lat_mean_ns"] <= g["lat_mean_ns"].max()
        assert row["lat_max_ns"] == g["lat_max_ns"].max()
        # the pooled SD is fio's merge (stat.c sum_stat, Welford): sums of squares add up, plus the spread of
        # the means; with sample variances (n - 1) it may come out a hair below the smallest job's SD
        n, m, sd = g["total_ios"], g["clat_mean_ns"], g["clat_stdev_ns"]
        grand = (n * m).sum() / n.sum()
        pooled = np.sqrt((((n - 1) * sd**2).sum() + (n * (m - grand) ** 2).sum()) / (n.sum() - 1))
        assert row["clat_stdev_ns"] == pytest.approx(pooled, rel=1e-6)


def test_cluster_sums_match_per_host_and_all_clients(run):
    """The cluster total is fio's own "All clients" (client.c handle_ts sums the hosts' jobs with
    stat.c sum_thread_stats): every number agrees to fio's printed precision."""
    res, doc, _, hosts = run
    ph = per_host(res.runs, res.histograms)
    ca = cluster_aggregate(res.runs, res.histograms, res.all_clients)
    assert set(ca["direction"]) == {"read", "write"}
    for _, row in ca.iterrows():
        hs = ph[ph.direction == row["direction"]]
        jobs = res.runs[res.runs.direction == row["direction"]]
        assert row["hosts"] == 3 and row["n_jobs"] == 6
        assert row["iops"] == pytest.approx(_fio_iops(jobs), rel=1e-12)
        assert row["total_ios"] == hs["total_ios"].sum()
        ac = res.all_clients[res.all_clients.direction == row["direction"]].iloc[0]
        assert row["total_ios"] == ac["total_ios"] and row["io_bytes"] == ac["io_bytes"]
        assert row["runtime_s"] == ac["runtime_s"]  # the longest runtime
        # fio's All clients IOPS is the pooled I/O count over the longest runtime
        assert ac["iops"] == pytest.approx(ac["total_ios"] / jobs["runtime_s"].max(), rel=1e-6)
        assert row["iops"] == pytest.approx(ac["iops"], rel=1e-6)
        # fio truncates bw_bytes to an integer: in All clients once, in each job's row (whose sum is used when
        # the runtimes are equal) once per job
        assert abs(row["bw_bytes_per_s"] - ac["bw_bytes_per_s"]) <= row["n_jobs"]
        for c in ("lat_mean_ns", "clat_mean_ns", "slat_mean_ns", "lat_stdev_ns", "clat_stdev_ns"):
            assert row[c] == pytest.approx(ac[c], rel=1e-6), c  # fio prints 6 decimals
        assert row["lat_min_ns"] == ac["lat_min_ns"] and row["lat_max_ns"] == ac["lat_max_ns"]
        assert abs(row["iops_rel_diff"]) < 1e-6 and not row["all_clients_mismatch"]
    # an All clients entry 1 % off is flagged
    off = res.all_clients.assign(iops=res.all_clients["iops"] * 1.01)
    assert cluster_aggregate(res.runs, res.histograms, off)["all_clients_mismatch"].all()
    # a multi-host run without All clients is flagged too
    assert cluster_aggregate(res.runs, res.histograms, res.all_clients.iloc[0:0])["all_clients_mismatch"].all()
    # one host: fio prints no All clients entry, and there is nothing to flag
    one = res.runs[res.runs.host == hosts[0]]
    single = cluster_aggregate(one, res.histograms, res.all_clients.iloc[0:0])
    assert (single["hosts"] == 1).all() and not single["all_clients_mismatch"].any()
    # the same checks on the run-level table ingest wrote (nothing recomputed)
    again = cluster_aggregate(res.run_totals, all_clients=res.all_clients)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), ca.reset_index(drop=True))


def _raw_bins(doc, direction, host=None, job_index=None):
    pooled: Counter = Counter()
    seen: Counter = Counter()
    for c in doc["client_stats"]:
        if c["jobname"] == "All clients":
            continue
        label = host_label(c["hostname"], c["port"])
        idx = seen[label]
        seen[label] += 1
        if host is not None and (label != host or idx != job_index):
            continue
        for k, v in c[direction]["clat_ns"].get("bins", {}).items():
            pooled[int(k)] += int(v)
    return pooled


def test_cluster_percentiles_are_those_of_all_hosts_raw_bins(run):
    res, doc, _, hosts = run
    ca = cluster_aggregate(res.runs, res.histograms, res.all_clients).set_index("direction")
    for d in ("read", "write"):
        pooled = _raw_bins(doc, d)
        b, c = np.array(sorted(pooled)), np.array([pooled[k] for k in sorted(pooled)])
        want = percentiles_from_bins(b, c, [50.0, 99.0, 99.9])
        assert ca.loc[d, "clat_p50_ns"] == want[50.0]
        assert ca.loc[d, "clat_p99_ns"] == want[99.0]
        assert ca.loc[d, "clat_p99_9_ns"] == want[99.9]
        # and the rule reproduces fio's own percentile for one job's bins
        one = _raw_bins(doc, d, host=hosts[0], job_index=0)
        entry = [c for c in doc["client_stats"] if host_label(c["hostname"], c["port"]) == hosts[0]][0]
        fio_p99 = entry[d]["clat_ns"]["percentile"]["99.000000"]
        ob = np.array(sorted(one))
        got = percentiles_from_bins(ob, np.array([one[k] for k in ob]), [99.0], total=entry[d]["clat_ns"]["N"])
        assert got[99.0] == fio_p99
    # percentiles are not an average of the per-host percentiles in general; at least bounded by them
    ph = per_host(res.runs, res.histograms)
    for d in ("read", "write"):
        p99 = ph[ph.direction == d]["clat_p99_ns"]
        assert p99.min() <= ca.loc[d, "clat_p99_ns"] <= p99.max()


def test_clients_ran_at_the_same_time(run):
    res, _, spans, hosts = run
    assert sorted(spans["host"].unique()) == sorted(hosts)
    sp = client_spans(spans, log_avg_msec=50)
    # every host's span lies inside the client's wall-clock window of the run
    t0 = res.runs["started_at"].min().timestamp()
    assert (sp["start_s"] >= t0 - 1.0).all() and (sp["end_s"] - sp["start_s"] > 0.5).all()
    ov = client_overlap(sp, runtime_s=1.0).iloc[0]
    assert ov["hosts"] == 3
    want = max(0.0, sp["end_s"].min() - sp["start_s"].max())
    assert ov["overlap_s"] == pytest.approx(want)
    assert ov["not_concurrent"] == (want / 1.0 < 0.9)
    # the same spans with one host shifted by the whole runtime: no overlap at all, flagged
    shifted = sp.copy()
    shifted.loc[shifted.host == hosts[1], ["start_s", "end_s"]] += 2.0
    ov2 = client_overlap(shifted, runtime_s=1.0).iloc[0]
    assert ov2["overlap_s"] == 0.0 and ov2["not_concurrent"]
    assert ov2["start_skew_s"] >= 2.0 - ov["start_skew_s"] - 1e-9
    # spans made to coincide exactly: fraction 1, not flagged
    same = sp.assign(start_s=sp["start_s"].min(), end_s=sp["start_s"].min() + 1.0)
    ov3 = client_overlap(same).iloc[0]
    assert ov3["overlap_fraction"] == pytest.approx(1.0) and not ov3["not_concurrent"]


def test_fairness_and_jain_index(run):
    res, _, _, _ = run
    assert jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    f = fairness(per_host(res.runs, res.histograms))
    assert set(f["hosts"]) == {3}
    assert ((f["jain_index"] > 1 / 3) & (f["jain_index"] <= 1.0)).all()
    assert (f["min_max_ratio"] <= 1.0).all()


def test_bad_inputs_are_named(run):
    res, _, spans, _ = run
    with pytest.raises(SchemaError, match=r"missing columns \['iops'\]"):
        combine_jobs(res.runs.drop(columns=["iops"]))
    with pytest.raises(SchemaError, match=r"by must be one of"):
        combine_jobs(res.runs, by=("run_id", "job"))
    with pytest.raises(SchemaError, match="log_unix_epoch"):
        client_spans(spans.assign(t_s=spans["t_s"] - spans["t_s"].min()))
    with pytest.raises(SchemaError, match="histograms is missing"):
        combine_jobs(res.runs, res.histograms.drop(columns=["host"]))
    # without histograms, percentiles are unknown rather than averaged
    plain = combine_jobs(res.runs)
    assert plain["clat_p99_ns"].isna().all()
    assert isinstance(plain, pd.DataFrame)


def test_scaling_summary_on_seed_002_vm_scaling():
    """Seed 002 (vSAN, stripe width 1): 4k random read IOPS of 1..12 VMs, measured once by DiskSPD and once by FIO.

    The two tools measured the same configuration: the tool is a factor, not a replicate. Pooled as the
    two values of a VM count (as this test once did) they gave a CI and "significant" gains from no
    repetition at all; now that is refused, and per tool each VM count holds one published value: no CI,
    no significance claim, a point gain and a point knee."""
    from storagebench.aggregate import saturation_point, scaling_summary
    from storagebench.errors import StatsError
    from storagebench.published import load_published

    df = load_published("vsan_stripe")
    one = df[(df.stripe_width == 1) & df.pattern.isin(["4k random read", "1M seq read"])]
    d = one[["pattern", "vms", "source_tool", "iops"]]
    with pytest.raises(StatsError, match=r"differ in \['source_tool'\].*a factor, not a replicate.*"
                                         r"by=\['pattern', 'source_tool'\]"):
        scaling_summary(d, x="vms", by=("pattern",), min_gain=0.05)
    sm = scaling_summary(d, x="vms", by=("pattern", "source_tool"), min_gain=0.05)
    rr = sm[(sm.pattern == "4k random read") & (sm.source_tool == "DiskSPD")].set_index("vms")
    assert list(rr.index) == list(range(1, 13)) and (rr["n"] == 1).all()
    assert rr["ci_low"].isna().all() and rr["gain_ci_low"].isna().all() and rr["gain_p"].isna().all()
    assert rr["adds"].iloc[1:].isna().all()  # unknown, not "does not add"
    # the gain is the point ratio of the two published values (seed table: 67054 -> 134719 IOPS)
    v = d[(d.pattern == "4k random read") & (d.source_tool == "DiskSPD")].set_index("vms")["iops"]
    assert (v[1], v[2]) == (67054, 134719)
    assert rr.loc[2, "gain_ratio"] == pytest.approx(134719 / 67054, rel=1e-12)
    sat = saturation_point(sm, x="vms", by=("pattern", "source_tool")).set_index(["pattern", "source_tool"])
    row = sat.loc[("4k random read", "DiskSPD")]
    # no step has a CI: no saturation level is claimed; the knee of the means is a point estimate
    assert np.isnan(row["saturation_vms"]) and row["saturated"] is None and "no step has a CI" in row["rule"]
    assert 1 < row["knee_vms"] < 12
    with pytest.raises(SchemaError, match="missing columns"):
        scaling_summary(d, x="clients")


@pytest.fixture(scope="module")
def scaling_quick(tmp_path_factory):
    """The committed small real scale-out run (tests/fixtures/scaling_quick: 3 socket servers, 1..3 clients)."""
    from conftest import FIXTURES

    from storagebench import runlevel
    from storagebench.scaling import load_scaling

    root = tmp_path_factory.mktemp("scaling") / "scaling"
    shutil.copytree(FIXTURES / "scaling_quick", root, ignore=shutil.ignore_patterns("README.md"))
    res, spans = load_scaling(root)
    return res, spans, runlevel.per_run(res.run_totals)


@pytest.mark.slow
def test_geometric_scaling_summary_keeps_a_tail_latency_above_zero(scaling_quick):
    """p99 of 3 runs: the arithmetic t interval reaches below 0 ms; the geometric one is exp of the log-scale t CI."""
    from scipy import stats as st

    from storagebench.aggregate import scaling_summary

    _, _, totals = scaling_quick
    plain = scaling_summary(totals, metric="clat_p99_ns", geometric=False)
    geo = scaling_summary(totals, metric="clat_p99_ns")  # the default: the gain columns' scale
    assert (plain["ci_low"] < 0).any() and (geo["ci_low"] > 0).all()
    assert geo.attrs["estimate"] == "geometric mean" and plain.attrs["estimate"] == "mean"
    for _, row in geo.iterrows():
        v = totals[(totals["pattern"] == row["pattern"]) & (totals["clients"] == row["clients"])]["clat_p99_ns"]
        lg = np.log(v.to_numpy(float))
        half = st.t.ppf(0.975, len(lg) - 1) * lg.std(ddof=1) / np.sqrt(len(lg))
        assert row["mean"] == pytest.approx(np.exp(lg.mean()), rel=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((np.exp(lg.mean() - half), np.exp(lg.mean() + half)),
                                                                 rel=1e-9)
    # the gain columns are the same comparison either way (ratio of geometric means)
    pd.testing.assert_series_equal(plain["gain_ratio"], geo["gain_ratio"])


def test_scaling_findings_state_the_numbers_of_the_summary(scaling_quick):
    from storagebench.aggregate import saturation_point, scaling_findings, scaling_summary
    from storagebench.findings import fmt_number
    from storagebench.runlevel import select

    res, spans, totals = scaling_quick
    summary = scaling_summary(totals, metric="iops", min_gain=0.05)
    sat = saturation_point(summary)
    fair = fairness(select(res.run_totals, hosts="each"), by=("pattern", "clients", "run_id"))
    cluster = cluster_aggregate(res.run_totals, all_clients=res.all_clients)
    overlap = client_overlap(client_spans(spans, 50))
    f = scaling_findings(summary, sat, fairness_runs=fair, cluster=cluster, overlap=overlap, min_gain=0.05,
                         title="q")
    assert [x.key for x in f] == ["saturation:1m_seqread", "saturation:4k_randread", "fairness", "checks"]
    for pattern, s in sat.set_index("pattern").iterrows():
        finding = f[f"saturation:{pattern}"]
        at = summary[(summary["pattern"] == pattern) & (summary["clients"] == s["saturation_clients"])].iloc[0]
        assert finding.estimate == pytest.approx(at["mean"]) and finding.ci == pytest.approx((at["ci_low"], at["ci_high"]))
        assert finding.n == 3 and fmt_number(at["mean"]) in finding.sentence and "more than 5%" in finding.sentence
        # a knee at the lowest level is no bend of a rising curve: not stated
        assert ("Kneedle" in finding.sentence) == (pd.notna(s["knee_clients"]) and s["knee_clients"] > 1)
    # the step from 1 to 2 clients has a CI of 0.48 to 1.95: neither a gain nor its absence is shown, so the
    # sentence says "not shown", never "saturated at 1 client"
    assert "saturated at" not in f["saturation:1m_seqread"].sentence
    assert "saturation is not shown" in f["saturation:1m_seqread"].sentence
    multi = fair[fair["hosts"] > 1]
    assert f["fairness"].n == len(multi) and f["fairness"].estimate == pytest.approx(multi["jain_index"].median())
    checks = f["checks"]
    flagged = int(overlap[overlap["hosts"] > 1]["not_concurrent"].sum())
    assert f"{flagged} run(s) flagged as not concurrent" in checks.sentence and checks.caveat == (flagged > 0)
    assert f"0 of {cluster['run_id'].nunique()} runs flagged above 0.5%" in checks.sentence


def test_cluster_checks_state_the_numbers_and_say_why_a_value_is_missing(scaling_quick):
    """The checks table of scaling.ipynb, from the committed scale-out study: each value as the tables give it;
    where a check cannot be made (no multi-client run, no All clients entry) NaN and a note, never a number."""
    from storagebench.aggregate import cluster_checks

    res, spans, _ = scaling_quick
    cluster = cluster_aggregate(res.run_totals, all_clients=res.all_clients)
    overlap = client_overlap(client_spans(spans, 50))
    checks = cluster_checks(cluster, overlap).set_index("check")
    multi = overlap[overlap["hosts"] > 1]
    assert list(checks.index) == [
        "runs", "worst |per-host sum / All clients - 1| (%)", "runs flagged above 0.5 %", "multi-client runs",
        "median overlap (% of the median host span)", "runs flagged not concurrent (< 90 %)"]
    assert checks.loc["runs", "value"] == cluster["run_id"].nunique() > 0
    assert checks.loc["worst |per-host sum / All clients - 1| (%)", "value"] == pytest.approx(
        100 * cluster[["iops_rel_diff", "bw_rel_diff"]].abs().max().max())
    assert checks.loc["multi-client runs", "value"] == len(multi) > 0
    assert checks.loc["median overlap (% of the median host span)", "value"] == pytest.approx(
        100 * multi["overlap_fraction"].median())
    assert (checks["note"] == "").all()
    # single-client runs only: fio prints no All clients entry and nothing overlaps
    one = cluster[cluster["hosts"] == 1]
    alone = cluster_checks(one, overlap[overlap["hosts"] == 1], tolerance=0.01, min_fraction=0.8).set_index("check")
    assert np.isnan(alone.loc["worst |per-host sum / All clients - 1| (%)", "value"])
    assert "single client" in alone.loc["worst |per-host sum / All clients - 1| (%)", "note"]
    assert np.isnan(alone.loc["median overlap (% of the median host span)", "value"])
    assert alone.loc["runs flagged not concurrent (< 80 %)", "note"] == "no run had more than one client"
    assert alone.loc["runs flagged above 1 %", "value"] == 0 and alone.loc["multi-client runs", "value"] == 0
    # without the All clients table the check says so
    bare = cluster_checks(cluster_aggregate(res.run_totals), overlap).set_index("check")
    assert bare.loc["runs flagged above 0.5 %", "note"] == "the All clients table was not given"
    assert (bare["value"] != -1).all()


def test_saturated_only_when_shown_on_the_committed_scale_out_run(scaling_quick):
    """"Not shown" is not "no gain". The committed scale-out run (3 runs per point): 1M sequential read, 1 -> 2
    clients, ratio 0.968 (CI 0.48 to 1.95); 4K random read, 2 -> 3 clients, ratio 1.04 (CI 0.84 to 1.28). With
    min_gain 5% neither step is shown to add more than 5% nor at most 5%: saturation is not shown (None), and
    the words say so with the step's point change. With min_gain 50% the 4K step's CI lies below 1.5: shown,
    saturated at 2 clients. The experimental unit is the run; the estimand each step's ratio of geometric
    means of cluster IOPS (Welch on logs); one test per step, no family claimed over the steps."""
    from storagebench.aggregate import saturation_point, scaling_findings, scaling_summary

    _, _, totals = scaling_quick
    summary = scaling_summary(totals, metric="iops", min_gain=0.05)
    steps = summary.dropna(subset=["gain_ci_low"])
    # flat: the CI at or below 1 + min_gain; adds: above it; a CI across it is neither (not shown)
    assert (steps["flat"] == (steps["gain_ci_high"] <= 1.05)).all()
    assert (steps["adds"] == (steps["gain_ci_low"] > 1.05)).all()
    sat = saturation_point(summary).set_index("pattern")
    assert sat.loc["1m_seqread", "saturated"] is None and sat.loc["4k_randread", "saturated"] is None
    f = scaling_findings(summary, saturation_point(summary), min_gain=0.05)
    for pattern in ("1m_seqread", "4k_randread"):
        sentence = f[f"saturation:{pattern}"].sentence
        assert "saturated at" not in sentence and "saturation is not shown" in sentence
        assert "neither a gain of more than 5% nor one of at most 5%" in sentence
    assert "point change -3.2%" in f["saturation:1m_seqread"].sentence
    assert "point change +3.6%" in f["saturation:4k_randread"].sentence
    wide = scaling_summary(totals, metric="iops", min_gain=0.5)
    sat = saturation_point(wide).set_index("pattern")
    assert sat.loc["4k_randread", "saturated"] is True and sat.loc["4k_randread", "saturation_clients"] == 2
    words = scaling_findings(wide, saturation_point(wide), min_gain=0.5)["saturation:4k_randread"].sentence
    assert "saturated at 2 clients" in words and "each later step was shown to add at most 50% more" in words

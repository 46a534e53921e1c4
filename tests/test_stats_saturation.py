"""Tests of storagebench.stats.saturation: Little's law, Kneedle, parameter choice, QoS load, normalisation."""

from __future__ import annotations

import math
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kneed import DataGenerator

from storagebench.errors import StatsError
from storagebench.ingest import ingest_paths, ingest_study
from storagebench.stats import compare, littles_law, per_run, qos_max_load, recommend_parameters
from storagebench.stats.saturation import find_knee, improvement_pct, normalize


@pytest.fixture
def seed002(fixtures_dir) -> pd.DataFrame:
    df = pd.read_csv(fixtures_dir / "stats" / "seed002_fio_qd_threads_4k_randread.csv", comment="#")
    df["lat_mean_ns"] = df["lat_ms"] * 1e6
    return df


def test_kneedle_paper_figure2():
    """Gold: Satopää et al. 2011, figure 2 (y = -1/(x + 0.1) + 5 on 10 points in [0, 1]); kneed's own test
    ``test_figure2`` (kneed's test suite) expects ``math.isclose(knee, 0.22, rel_tol=1e-02)``."""
    x, y = DataGenerator.figure2()
    k = find_knee(pd.DataFrame({"x": x, "y": y}), "x", "y")
    assert math.isclose(k.x, 0.22, rel_tol=1e-02)
    assert k.y == pytest.approx(-1 / (k.x + 0.1) + 5)
    assert "Kneedle" in k.method


def test_find_knee_bad_input():
    df = pd.DataFrame({"x": [1, 2, 2, 4], "y": [1.0, 2.0, 2.5, 3.0]})
    with pytest.raises(StatsError, match=r"repeated values \[2\]"):
        find_knee(df, "x", "y")
    with pytest.raises(StatsError, match="at least 3 points"):
        find_knee(df.iloc[:2], "x", "y")
    with pytest.raises(StatsError, match="curve must be one of"):
        find_knee(df.drop_duplicates("x"), "x", "y", curve="s-shaped")
    with pytest.raises(StatsError, match="log_x needs x > 0"):
        find_knee(pd.DataFrame({"x": [0, 1, 2], "y": [1, 2, 3]}), "x", "y", log_x=True)
    # a straight line has no knee: said, not invented
    line = pd.DataFrame({"x": np.arange(10.0), "y": np.arange(10.0)})
    k = find_knee(line, "x", "y")
    assert math.isnan(k.x) and k.note == "no knee found"


def test_recommend_parameters_on_seed002_fio_table(seed002):
    """Seed 002 (StarWind vSAN, FIO 4k random read, threads 1..8 x QD 1..128). The article chose threads=4,
    QD=16 by eye (66784 IOPS at 0.95 ms). Our rule (fewest outstanding I/Os reaching >= 95% of the best cell,
    69254 IOPS) picks threads=2, QD=16: 32 outstanding I/Os, 67200 IOPS at 0.46 ms -- the same plateau
    (within 1% of the article's IOPS) at half the outstanding I/Os and half the latency. The article's cell
    qualifies too; restricted to 4 threads (one per vCPU of the test VM) the rule returns exactly QD=16."""
    rec = recommend_parameters(seed002)
    assert (rec.numjobs, rec.iodepth, rec.outstanding_ios) == (2, 16, 32.0)
    assert rec.value == 67200 and rec.max_value == 69254
    assert rec.latency_value == pytest.approx(0.46e6)
    # Kneedle on the best IOPS per outstanding-I/O count (log2 x) agrees: knee at 32 outstanding I/Os
    assert rec.knee.x == pytest.approx(32.0) and rec.knee.log_x
    article = rec.table.set_index(["numjobs", "iodepth"]).loc[(4, 16)]
    assert bool(article["qualifies"]) and article["lat_mean_ns"] > 2 * rec.latency_value
    four = recommend_parameters(seed002[seed002.numjobs == 4])
    assert (four.numjobs, four.iodepth) == (4, 16)
    assert "95%" in rec.rule


def test_littles_law_holds_on_published_and_real_libaio_runs(seed002, fixtures_dir):
    ll = littles_law(seed002)
    # the published table is self-consistent: IOPS x latency = threads x QD within 11%
    assert ll["littles_ratio"].between(0.89, 1.01).all() and not ll["flagged"].any()
    assert (ll["outstanding_ios"] == ll["numjobs"] * ll["iodepth"]).all()
    real = littles_law(ingest_study(fixtures_dir / "study_demo").runs)
    assert len(real) == 12 and not real["flagged"].any()
    assert real["littles_ratio"].between(0.9, 1.1).all()


def test_littles_law_flags_a_sync_engine_real_fio(fio_bin, tmp_path):
    """A real 1 s fio run with ioengine=psync and iodepth=8: psync keeps one I/O in flight, so
    IOPS x latency is ~1, not 8 -- the run is flagged, with the reason."""
    out = tmp_path / "psync.json"
    subprocess.run([fio_bin, "--name=qd8psync", f"--filename={tmp_path / 'f'}", "--size=8M", "--rw=randread",
                    "--bs=4k", "--ioengine=psync", "--iodepth=8", "--time_based", "--runtime=1",
                    "--output-format=json", f"--output={out}"], check=True, capture_output=True, timeout=60)
    runs = ingest_paths([out]).runs
    ll = littles_law(runs)
    assert len(ll) == 1
    row = ll.iloc[0]
    assert row["outstanding_ios"] == 8
    assert row["littles_ratio"] == pytest.approx(1 / 8, rel=0.3)
    assert row["flagged"] and "sync ioengine" in row["note"]


def test_per_run_aggregates_directions_and_hosts():
    rows = pd.DataFrame({
        "run_id": ["a", "a", "a", "a"], "host": ["h1", "h1", "h2", "h2"], "job": ["j"] * 4,
        "direction": ["read", "write"] * 2, "iodepth": [4] * 4, "numjobs": [2] * 4,
        "iops": [700.0, 300.0, 700.0, 300.0], "lat_mean_ns": [2e6, 4e6, 2e6, 4e6],
    })
    pr = per_run(rows)
    assert len(pr) == 1
    r = pr.iloc[0]
    assert r["iops"] == 2000 and r["lat_mean_ns"] == pytest.approx(2.6e6)
    assert r["outstanding_ios"] == 16  # 2 hosts x iodepth 4 x numjobs 2
    assert littles_law(rows)["littles_ratio"].iloc[0] == pytest.approx(2000 * 2.6e-3 / 16)
    with pytest.raises(StatsError, match="percentile"):
        per_run(rows.assign(clat_p99_ns=1.0), latency="clat_p99_ns")
    with pytest.raises(StatsError, match="NaN or negative"):
        per_run(rows.assign(iops=[1.0, np.nan, 1.0, 1.0]))
    with pytest.raises(StatsError, match="tolerance"):
        littles_law(rows, tolerance=2)


def test_per_run_combines_jobs_and_directions_of_a_real_fio_run(fio_bin, tmp_path):
    """numjobs=2 randrw without group_reporting: 2 jobs x 2 directions = 4 rows of one run.
    The per-run row follows fio's group rule (stat.c sum_thread_stats): I/Os add up, mean
    lat/clat/slat are weighted by completed I/Os, CPU is the mean over the two jobs (not over
    the four rows), and percentiles without json+ bins are NaN, never averaged."""
    import json

    out = tmp_path / "rw.json"
    subprocess.run([fio_bin, "--name=mix", f"--filename={tmp_path / 'f'}", "--size=4M", "--rw=randrw",
                    "--bs=4k", "--ioengine=libaio", "--iodepth=4", "--numjobs=2", "--time_based", "--runtime=1",
                    "--output-format=json", f"--output={out}"], check=True, capture_output=True, timeout=60)
    runs = ingest_paths([out]).runs
    assert len(runs) == 4 and runs["run_id"].nunique() == 1
    pr = per_run(runs)
    assert len(pr) == 1 and pr["n_rows"].iloc[0] == 4
    r = pr.iloc[0]
    jobs = json.loads(out.read_text())["jobs"]
    dirs = [j[d] for j in jobs for d in ("read", "write")]
    ios = sum(d["total_ios"] for d in dirs)
    # fio's group rule (stat.c add_ddir_status_json): the pooled I/Os over the longest runtime, which is the sum
    # of the rows' IOPS only when the jobs ran equally long
    longest_s = max(d["runtime"] for d in dirs) / 1000
    assert r["total_ios"] == ios and r["iops"] == pytest.approx(ios / longest_s, rel=1e-3)
    for col, key in (("lat_mean_ns", "lat_ns"), ("clat_mean_ns", "clat_ns"), ("slat_mean_ns", "slat_ns")):
        want = sum(d[key]["mean"] * d["total_ios"] for d in dirs) / ios
        assert r[col] == pytest.approx(want, rel=1e-9), col
    w = [j["job_runtime"] for j in jobs]  # CPU: the runtime-weighted mean over the jobs (usr_time / total_run_time)
    assert r["usr_cpu_pct"] == pytest.approx(np.average([j["usr_cpu"] for j in jobs], weights=w), rel=1e-3)
    assert r["sys_cpu_pct"] == pytest.approx(np.average([j["sys_cpu"] for j in jobs], weights=w), rel=1e-3)
    assert r["outstanding_ios"] == 4 * 2  # one job section of numjobs=2 clones at iodepth 4 (not 2 x 8)
    pcols = [c for c in pr.columns if c.startswith("clat_p")]
    assert pcols and pr[pcols].isna().all(axis=None) and "never averaged" in r["note"]  # plain json: no bins
    assert r["direction"] == "mixed" and r["all_directions"] and r["rw"] == "randrw"
    # without total_ios (fio 2.1) the counts are IOPS x runtime, fio's rule otherwise
    nt = per_run(runs.drop(columns=["total_ios"]))
    w = runs["iops"] * runs["runtime_s"]
    assert nt["combined_by"].iloc[0] == "I/O counts"
    assert nt["lat_mean_ns"].iloc[0] == pytest.approx((runs["lat_mean_ns"] * w).sum() / w.sum(), rel=1e-9)
    # without counts and runtimes (a published table) the rows share one runtime: IOPS weights
    pub = per_run(runs.drop(columns=["total_ios", "runtime_s"]))
    want = (runs["lat_mean_ns"] * runs["iops"]).sum() / runs["iops"].sum()
    assert pub["combined_by"].iloc[0] == "IOPS" and pub["iops"].iloc[0] == pytest.approx(runs["iops"].sum())
    assert pub["lat_mean_ns"].iloc[0] == pytest.approx(want, rel=1e-9)


def test_qos_max_load_with_repetitions():
    rng = np.random.default_rng(5)
    rows = []
    for tiles, lat in ((1, 10.0), (2, 12.0), (3, 15.0), (4, 19.4), (5, 30.0), (6, 60.0)):
        for rep in range(4):
            rows.append(dict(tiles=tiles, repetition=rep, lat_mean_ns=lat * 1e6 * (1 + rng.normal(0, 0.02))))
    df = pd.DataFrame(rows)
    q = qos_max_load(df, "tiles", "lat_mean_ns", 20e6)
    assert q.max_load == 4
    # tiles=4 averages ~19.4 ms: its upper CI bound may pass 20 ms; the confident answer is never higher
    assert q.max_load_confident in (3, 4) and q.max_load_confident <= q.max_load
    assert list(q.table.columns) == ["load", "n", "mean", "ci_low", "ci_high", "meets", "meets_confident"]
    # the first failing level ends the search even if a higher level passes again (saturation)
    dip = df.copy()
    dip.loc[dip.tiles == 6, "lat_mean_ns"] = 5e6
    assert qos_max_load(dip, "tiles", "lat_mean_ns", 20e6).max_load == 4
    assert qos_max_load(df, "tiles", "lat_mean_ns", 1e6).max_load is None
    assert "edge" not in qos_max_load(df, "tiles", "lat_mean_ns", 20e6).note
    # every level within the limit: the largest level is returned as a lower bound and called the grid's edge
    roomy = qos_max_load(df, "tiles", "lat_mean_ns", 1e9)
    assert roomy.max_load == 6 and roomy.max_load_confident == 6
    assert "the grid's largest load is an edge, not the QoS limit" in roomy.note and "(max_load)" in roomy.note
    single = df.groupby("tiles", as_index=False).first()
    s = qos_max_load(single, "tiles", "lat_mean_ns", 20e6)
    assert s.max_load == 4 and s.max_load_confident is None and "no CI" in s.note
    with pytest.raises(StatsError, match="limit must be"):
        qos_max_load(df, "tiles", "lat_mean_ns", -1)
    with pytest.raises(StatsError, match="share a run_id"):
        qos_max_load(df.assign(run_id="same"), "tiles", "lat_mean_ns", 20e6)


def test_normalize_and_improvement():
    rng = np.random.default_rng(9)
    rows = []
    for array, gain in (("HDD", 1.0), ("EFD", 1.25)):
        for tiles in (1, 2, 3):
            for rep in range(3):
                rows.append(dict(array=array, tiles=tiles, rep=rep, score=100.0 * tiles * gain * (1 + rng.normal(0, 0.01))))
    df = pd.DataFrame(rows)
    n = normalize(df, "score", "array == 'HDD' and tiles == 1", by=["array", "tiles"])
    base = n.set_index(["array", "tiles"]).loc[("HDD", 1)]
    assert base["normalized"] == pytest.approx(1.0)
    efd3 = n.set_index(["array", "tiles"]).loc[("EFD", 3)]
    assert efd3["normalized"] == pytest.approx(3.75, rel=0.03)
    assert efd3["ci_low"] < efd3["normalized"] < efd3["ci_high"]
    assert efd3["improvement_pct"] == pytest.approx((efd3["normalized"] - 1) * 100)
    # a single baseline run (VMmark style) gives the score, no CI, and says so
    one = normalize(df, "score", "array == 'HDD' and tiles == 1 and rep == 0", by=["array", "tiles"])
    assert one["ci_low"].isna().all() and one["note"].str.contains("no CI").all()
    with pytest.raises(StatsError, match="selects no rows"):
        normalize(df, "score", "array == 'SSD'")
    with pytest.raises(StatsError, match="not a valid"):
        normalize(df, "score", "array === 'HDD'")
    # % improvement with CI from compare(): EFD vs HDD per tile count, paired on repetition
    t = compare(df, "array", "HDD", "score", by="tiles", pair_on="rep")
    imp = improvement_pct(t)
    assert imp["improvement_pct"].between(20, 30).all()
    assert (imp["improvement_ci_low_pct"] < imp["improvement_pct"]).all()
    with pytest.raises(StatsError):
        improvement_pct(imp)


def test_recommendation_says_when_the_sweep_never_saturated():
    """A sweep whose IOPS still grow at the largest load must be flagged as the grid's edge, not a knee;
    the published seed 002 FIO sweep (which plateaus) must not be."""
    import pandas as pd

    from storagebench.stats import recommend_parameters

    rows = []
    for nj in (1, 2):
        for qd in (1, 2, 4, 8):
            oio = nj * qd
            rows.append({"run_id": f"r{nj}-{qd}", "numjobs": nj, "iodepth": qd, "direction": "read",
                         "iops": 10_000.0 * oio, "lat_mean_ns": 1e5, "total_ios": 1000})
    rising = recommend_parameters(pd.DataFrame(rows))
    assert rising.at_grid_edge and rising.outstanding_ios == 16
    rows = [dict(r, iops=min(r["iops"], 40_000.0), run_id=r["run_id"]) for r in rows]
    flat = recommend_parameters(pd.DataFrame(rows))
    assert not flat.at_grid_edge and flat.outstanding_ios == 4


def test_per_run_of_a_published_table_with_unknown_counts():
    """Seed 001's HDD table has no I/O counts or queue depth (stored as -1): IOPS weights, NaN outstanding."""
    from storagebench.published import load_published

    df = load_published("hdd_iops")
    assert (df["total_ios"] == -1).all() and (df["iodepth"] == -1).all()
    pr = per_run(df, latency=None)
    assert len(pr) == len(df) and pr["outstanding_ios"].isna().all()
    np.testing.assert_allclose(pr["lat_mean_ns"], df["lat_mean_ns"])
    with pytest.raises(StatsError, match="iodepth has NaN or negative"):
        littles_law(df)  # Little's law needs the real queue depth


# --------------------------------------------------------------------------- knees of curves that are not monotone
# Unit: one sweep point (a QD level); estimand: the knee of the point estimates (geometric-mean IOPS, p99 from the
# merged bins) against log2 outstanding I/Os; no test family (no p-values).

_QD = [1, 2, 4, 8, 16, 32, 64]
_IOPS = [10e3, 19e3, 35e3, 60e3, 90e3, 97e3, 99e3]
_P99_MS = [0.10, 0.11, 0.12, 0.14, 0.20, 0.90, 0.60]  # the last p99 lies below its peak


def _dipping_tail_sweep():
    """Two runs per iodepth (±1% IOPS), each with a json+-like histogram: 98% of completions at Little's mean and
    2% at the point's p99, so fio's percentile rule reads p99 = ``_P99_MS`` exactly."""
    runs, hist = [], []
    for qd, iops, p99 in zip(_QD, _IOPS, _P99_MS, strict=True):
        for r, f in enumerate((0.99, 1.01)):
            rid = f"qd{qd}-{r}"
            runs.append({"run_id": rid, "numjobs": 1, "iodepth": qd, "direction": "read", "iops": iops * f,
                         "lat_mean_ns": qd / (iops * f) * 1e9, "total_ios": 1000})
            hist += [{"run_id": rid, "direction": "read", "bin_ns": int(qd / iops * 1e9), "count": 980},
                     {"run_id": rid, "direction": "read", "bin_ns": int(p99 * 1e6), "count": 20}]
    return pd.DataFrame(runs), pd.DataFrame(hist)


def test_a_p99_that_dips_at_the_largest_load_keeps_its_knee_and_the_tail_rule():
    """The audit's reproducer (issue 20): p99 rises to 0.9 ms at iodepth 32 and dips to 0.6 ms at 64. Kneedle on
    the whole curve put the p99 "knee" on the grid's edge (64), every point became admissible and the rule chose
    iodepth 32 (p99 0.9 ms). Kneedle as in the paper, on the monotone rise (kneed by hand here on the points up
    to the peak), gives 16; the rule then picks iodepth 16 (p99 0.2 ms)."""
    from kneed import KneeLocator

    runs, hist = _dipping_tail_sweep()
    rise = np.log2(_QD[:6])
    by_hand = 2 ** KneeLocator(rise, _P99_MS[:6], curve="convex", direction="increasing").knee
    assert by_hand == 16
    # the old call, on the whole curve, lands on the edge: the defect this test guards
    assert 2 ** KneeLocator(np.log2(_QD), _P99_MS, curve="convex", direction="increasing").knee == 64
    rec = recommend_parameters(runs, histograms=hist)
    assert rec.tail_knee.x == by_hand and rec.tail_knee.y == pytest.approx(0.2e6)
    assert "only the monotone part" in rec.tail_knee.method and "6 of 7 points" in rec.tail_knee.method
    assert (rec.numjobs, rec.iodepth) == (1, 16)
    pick = rec.table.set_index("iodepth").loc[16]
    assert pick["clat_p99_ns"] == pytest.approx(0.2e6) and "16 outstanding I/Os" in rec.rule
    assert rec.plateau == (1, 32)  # the plateau start is still reported: what the last IOPS would cost in p99


def test_an_edge_is_never_presented_as_a_knee():
    """A p99 that peaks at the second point and falls after it has no rise to bend: "no knee inside the grid",
    and the rule says the tail was not used and why."""
    f = pd.DataFrame({"x": _QD, "y": [0.2, 0.9, 0.5, 0.4, 0.3, 0.3, 0.2]})
    k = find_knee(f, "x", "y", curve="convex", log_x=True)
    assert math.isnan(k.x) and k.note.startswith("no knee inside the grid") and "x = 2" in k.note
    runs, hist = _dipping_tail_sweep()
    fast = {int(qd / iops * 1e9) for qd, iops in zip(_QD, _IOPS, strict=True)}
    tail = hist["bin_ns"].where(hist["bin_ns"].isin(fast), 0)
    p99 = dict(zip(_QD, [0.2e6, 0.9e6, 0.5e6, 0.4e6, 0.3e6, 0.3e6, 0.2e6], strict=True))
    qd_of = runs.set_index("run_id")["iodepth"]
    hist = hist.assign(bin_ns=np.where(tail == 0, hist["run_id"].map(qd_of).map(p99), hist["bin_ns"]).astype(int))
    rec = recommend_parameters(runs, histograms=hist)
    assert math.isnan(rec.tail_knee.x) and "no knee inside the grid" in rec.rule and "every point is admissible" in rec.rule
    assert "no knee inside the grid" in rec.knees.set_index("curve").loc["p99 completion latency", "note"]
    # the sweep's sentence says which rule applied, and why
    from storagebench.stats import sweep_summary

    said = sweep_summary(runs, hist).findings()["recommended"].sentence
    assert "no p99 knee inside the grid (Kneedle), so the tail did not bound the choice" in said
    assert "p99 knee (16 outstanding I/Os" in sweep_summary(*_dipping_tail_sweep()).findings()["recommended"].sentence


@settings(max_examples=150, deadline=None, derandomize=True)
@given(rise=st.lists(st.floats(0.01, 10.0), min_size=4, max_size=9),
       drop=st.lists(st.floats(0.2, 0.99), min_size=1, max_size=3),
       curve=st.sampled_from(["convex", "concave"]))
def test_points_past_the_peak_never_move_the_knee_to_an_edge(rise, drop, curve):
    """Property, over random monotone-then-dropping curves on a geometric grid: the knee is where Kneedle puts it
    on the rise alone (the points past the peak change nothing), and it is never the first or the last point of
    the grid."""
    y = np.cumsum(rise)
    if curve == "concave":
        y = np.cumsum(np.sort(rise)[::-1])
    full = np.r_[y, y[-1] * np.cumprod(drop)]
    x = 2.0 ** np.arange(full.size)
    k = find_knee(pd.DataFrame({"x": x, "y": full}), "x", "y", curve=curve, log_x=True)
    alone = find_knee(pd.DataFrame({"x": x[:y.size], "y": y}), "x", "y", curve=curve, log_x=True)
    assert (math.isnan(k.x) and math.isnan(alone.x)) or k.x == alone.x
    assert math.isnan(k.x) or x[0] < k.x < x[-1]
    assert math.isnan(k.x) or k.x < x[y.size - 1]  # and never the peak, the last point of the rise


@settings(max_examples=100, deadline=None, derandomize=True)
@given(steps=st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 10.0]), min_size=3, max_size=9),
       curve=st.sampled_from(["convex", "concave"]))
def test_a_monotone_curve_gets_kneedles_own_knee_plateaus_included(steps, curve):
    """Property: on a monotone curve (ties allowed: a throttled device's IOPS sit exactly on its cap) find_knee is
    Kneedle on the whole curve, as kneed gives it, unless that falls on an edge (then no knee)."""
    from kneed import KneeLocator

    y = 1.0 + np.cumsum([0.0, *steps])
    x = 2.0 ** np.arange(y.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = KneeLocator(np.log2(x), y, curve=curve, direction="increasing").knee
    k = find_knee(pd.DataFrame({"x": x, "y": y}), "x", "y", curve=curve, log_x=True)
    if ref is None or 2.0 ** ref in (x[0], x[-1]):
        assert math.isnan(k.x)
    else:
        assert k.x == 2.0 ** ref and "monotone part" not in k.method


def test_a_capped_devices_plateau_keeps_its_knee():
    """IOPS of a device throttled at 200: 50, 100, 200, 200, 200, 200 over QD 1..32. The knee is where the cap is
    reached (QD 4), as before issue 20; cutting the curve at the first 200 lost it."""
    k = find_knee(pd.DataFrame({"x": _QD[:6], "y": [50.0, 100, 200, 200, 200, 200]}), "x", "y", log_x=True)
    assert k.x == 4 and k.y == 200 and "monotone part" not in k.method

"""Per-point estimates of a sweep (issue 10 item 8): geometric means with log-scale CIs pooled over the grid.

Real data: ``tests/fixtures/study_demo`` (a committed demo-like sweep, real fio runs, two per point) and
``tests/fixtures/stats/demo_n3_runs.csv`` (the runs of a real ``storagebench demo``, three per point). Gold:
R's ``lm(log(y) ~ 0 + point)`` (``tests/fixtures/stats/r_point_reference.R``) and an independent computation
here with numpy and scipy.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES
from scipy import stats as st

from storagebench.errors import SchemaError, StatsError
from storagebench.ingest import ingest_study
from storagebench.stats import per_run, point_estimates, point_means, qos_max_load

STATS = FIXTURES / "stats"
BY = ["numjobs", "iodepth"]


@pytest.fixture(scope="module")
def demo():
    res = ingest_study(FIXTURES / "study_demo")
    return res.runs, res.histograms


@pytest.fixture(scope="module")
def ref():
    return json.loads((STATS / "r_point_reference.json").read_text())


def _old_t_interval(pr: pd.DataFrame, col: str) -> pd.DataFrame:
    """The interval point_means gave before: arithmetic mean ± t(n-1) s / sqrt(n) per point (t = 12.7 at n = 2)."""
    rows = []
    for key, g in pr.groupby(BY):
        v = g[col].to_numpy(float)
        half = st.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
        rows.append(dict(zip(BY, key, strict=True), low=v.mean() - half, high=v.mean() + half))
    return pd.DataFrame(rows)


def test_committed_n2_sweep_has_every_ci_above_zero_where_the_t_interval_did_not(demo):
    runs, _ = demo
    pr = per_run(runs)
    for col in ("iops", "lat_mean_ns"):
        old = _old_t_interval(pr, col)
        assert (old["low"] < 0).sum() >= 2, old  # the defect: 1 df, t = 12.7, below 0 IOPS and below 0 ns
        est = point_estimates(pr, BY, [col])
        t = est.table
        assert (t["n"] == 2).all() and (t[f"{col}_ci_low"] > 0).all()
        assert (t[f"{col}_ci_low"] < t[col]).all() and (t[col] < t[f"{col}_ci_high"]).all()
        check = est.checks[col]
        assert check.method == "log_t" and check.df_resid == 6 and check.test == "Bartlett"
    # the per-run file the R reference reads is exactly these runs
    csv = pd.read_csv(STATS / "demo_n2_runs.csv", dtype={"run_id": str})
    mine = pr[["run_id", *BY, "iops", "lat_mean_ns"]].sort_values([*BY, "run_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(csv, mine, check_dtype=False, rtol=1e-15)


@pytest.mark.parametrize("name", ["demo_n2_runs.csv", "demo_n3_runs.csv"])
@pytest.mark.parametrize("col", ["iops", "lat_mean_ns"])
def test_pooled_log_ci_matches_r_and_an_independent_computation(ref, name, col):
    d = pd.read_csv(STATS / name, dtype={"run_id": str})
    est = point_estimates(d, BY, [col], method="pooled_log")
    t = est.table
    gold = ref[name][col]
    assert [f"{a}x{b}" for a, b in zip(t["numjobs"], t["iodepth"], strict=True)] == gold["points"]
    np.testing.assert_allclose(t[col], gold["estimate"], rtol=1e-12)
    np.testing.assert_allclose(t[f"{col}_ci_low"], gold["ci_low"], rtol=1e-10)
    np.testing.assert_allclose(t[f"{col}_ci_high"], gold["ci_high"], rtol=1e-10)
    check = est.checks[col]
    assert check.df_resid == gold["df_resid"] and check.pooled_log_sd == pytest.approx(gold["sigma"], rel=1e-12)
    # by hand: pooled variance of the logs over the points, t on runs - points df
    y = np.log(d[col].to_numpy(float))
    g = d.groupby(BY).ngroup().to_numpy()
    k = g.max() + 1
    means = np.array([y[g == i].mean() for i in range(k)])
    n = np.bincount(g)
    s2 = sum(((y[g == i] - means[i]) ** 2).sum() for i in range(k)) / (y.size - k)
    half = st.t.ppf(0.975, y.size - k) * np.sqrt(s2 / n)
    np.testing.assert_allclose(t[f"{col}_ci_low"], np.exp(means - half), rtol=1e-12)
    np.testing.assert_allclose(t[f"{col}_ci_high"], np.exp(means + half), rtol=1e-12)
    np.testing.assert_allclose(t[f"{col}_log_sd"], [y[g == i].std(ddof=1) for i in range(k)], rtol=1e-12)


def test_spread_check_is_bartlett_at_every_n_and_brown_forsythe_was_void_at_three(ref):
    """Unit: the run; the check: equal variance of log IOPS over the points (equal CV). Gold: R's
    ``bartlett.test`` (r_point_reference.R). At 3 runs per point the Brown-Forsythe test had one deviation of
    exactly zero per point and said p = 0.907 on the demo whose per-point log SDs run from 0.025 to 0.367;
    Bartlett says 0.082."""
    d3 = pd.read_csv(STATS / "demo_n3_runs.csv", dtype={"run_id": str})
    c3 = point_estimates(d3, BY, ["iops"]).checks["iops"]
    gold = ref["demo_n3_runs.csv"]["iops"]
    assert c3.test == "Bartlett" and c3.statistic == pytest.approx(gold["bartlett_K2"], rel=1e-10)
    assert c3.p == pytest.approx(gold["bartlett_p"], rel=1e-10) and c3.p == pytest.approx(0.082, abs=5e-4)
    assert gold["brown_forsythe_p"] == pytest.approx(0.907, abs=5e-4)  # what the old check reported
    assert c3.log_sd_min == pytest.approx(0.025, abs=5e-4) and c3.log_sd_max == pytest.approx(0.367, abs=5e-4)
    assert c3.method == "log_t" and c3.df_resid == 24 and c3.points == 12
    text = c3.method_text()
    assert "geometric mean" in text and "own runs (n - 1 df)" in text and "not pooled over the points" in text
    assert "Bartlett test of equal spread of log IOPS over 12 points: p = 0.082" in text
    d2 = pd.read_csv(STATS / "demo_n2_runs.csv", dtype={"run_id": str})
    g2 = ref["demo_n2_runs.csv"]["iops"]
    c2 = point_estimates(d2, BY, ["iops"]).checks["iops"]
    assert c2.test == "Bartlett" and c2.p == pytest.approx(g2["bartlett_p"], rel=1e-10)


@pytest.mark.parametrize("name", ["demo_n2_runs.csv", "demo_n3_runs.csv", "demo_busy_n2_runs.csv"])
@pytest.mark.parametrize("col", ["iops", "lat_mean_ns"])
def test_default_ci_is_each_points_own_t_interval_as_r(ref, name, col):
    """Unit: the run; estimand: each point's geometric mean; no family (one CI per point). Gold: R's
    ``exp(t.test(log(y))$conf.int)`` per point (r_point_reference.R): the default CI whatever the CVs."""
    d = pd.read_csv(STATS / name, dtype={"run_id": str})
    est = point_estimates(d, BY, [col])
    gold = ref[name][col]
    np.testing.assert_allclose(est.table[f"{col}_ci_low"], gold["own_ci_low"], rtol=1e-10)
    np.testing.assert_allclose(est.table[f"{col}_ci_high"], gold["own_ci_high"], rtol=1e-10)
    assert est.checks[col].method == "log_t" and est.checks[col].requested == "auto"


def test_auto_falls_back_to_each_points_own_runs_when_equal_spread_is_rejected(ref):
    """The first demo of 2026-11-25 (18 points x 2 real runs on a busy host): Bartlett rejects equal spread
    of log IOPS (p = 0.036, as R), so ``auto`` takes each point's own runs, a log-scale t on n - 1 df: wide
    (1 df) but above 0, and the method says why."""
    d = pd.read_csv(STATS / "demo_busy_n2_runs.csv", dtype={"run_id": str})
    est = point_estimates(d, BY, ["iops"])
    check = est.checks["iops"]
    assert check.test == "Bartlett" and check.p == pytest.approx(ref["demo_busy_n2_runs.csv"]["iops"]["bartlett_p"],
                                                                 rel=1e-10)
    assert check.rejected and check.method == "log_t" and check.requested == "auto"
    assert "rejected" in check.method_text() and "own runs" in check.method_text()
    t = est.table.set_index(BY)
    assert (t["iops_ci_low"] > 0).all()
    for (nj, qd), g in d.groupby(BY):
        ci = st.ttest_1samp(np.log(g["iops"]), 0.0).confidence_interval(0.95)
        assert t.loc[(nj, qd), "iops_ci_low"] == pytest.approx(math.exp(ci.low), rel=1e-12)
        assert t.loc[(nj, qd), "iops_ci_high"] == pytest.approx(math.exp(ci.high), rel=1e-12)
    # asked for by name, pooling is done anyway (and the rejection still reported), as R computes it
    forced = point_estimates(d, BY, ["iops"], method="pooled_log")
    assert forced.checks["iops"].method == "pooled_log" and "(rejected)" in forced.checks["iops"].method_text()
    np.testing.assert_allclose(forced.table["iops_ci_low"], ref["demo_busy_n2_runs.csv"]["iops"]["ci_low"], rtol=1e-10)


def test_one_run_per_point_pooling_and_its_limits():
    d = pd.read_csv(STATS / "demo_n3_runs.csv", dtype={"run_id": str})
    # every point once: no residual df, no CI, and the reason
    once = d.groupby(BY, as_index=False).first()
    est = point_estimates(once, BY, ["iops"])
    assert est.table["iops_ci_low"].isna().all() and est.checks["iops"].df_resid == 0
    assert "one run have no CI" in est.checks["iops"].note
    assert "no pooling possible" in point_estimates(once, BY, ["iops"], method="pooled_log").checks["iops"].note
    np.testing.assert_array_equal(est.table["iops"], once["iops"])  # one run: the value itself
    # one point with a single run among points with three: by default it has no CI (its own runs give none);
    # pooled by name, the pooled SD gives it one
    part = d.drop(d[(d["numjobs"] == 1) & (d["iodepth"] == 1)].index[1:])
    auto = point_estimates(part, BY, ["iops"])
    assert auto.table.set_index(BY)["iops_ci_low"].isna().sum() == 1 and "one run have no CI" in auto.checks["iops"].note
    t = point_estimates(part, BY, ["iops"], method="pooled_log").table.set_index(BY)
    assert t.loc[(1, 1), "n"] == 1 and 0 < t.loc[(1, 1), "iops_ci_low"] < t.loc[(1, 1), "iops"]
    c = point_estimates(part, BY, ["iops"], method="pooled_log").checks["iops"]
    assert c.df_resid == 34 - 12  # two runs fewer, the same 12 points
    one = math.log(t.loc[(1, 1), "iops"])
    assert t.loc[(1, 1), "iops_ci_high"] == pytest.approx(math.exp(one + st.t.ppf(0.975, 22) * c.pooled_log_sd))


def test_bad_inputs_are_refused_naming_the_run():
    d = pd.read_csv(STATS / "demo_n3_runs.csv", dtype={"run_id": str})
    rid = d.loc[5, "run_id"]
    for bad in (0.0, -12.0):
        z = d.copy()
        z.loc[5, "iops"] = bad
        with pytest.raises(StatsError, match=rf"iops is <= 0 in 1 run\(s\): run {rid} \(numjobs=1, iodepth=2\)"):
            point_estimates(z, BY, ["iops"])
        # the arithmetic method has no log: it accepts the value
        assert np.isfinite(point_estimates(z, BY, ["iops"], method="t").table["iops"]).all()
    with pytest.raises(StatsError, match="method must be one of"):
        point_estimates(d, BY, ["iops"], method="median")
    with pytest.raises(StatsError, match="spread_alpha"):
        point_estimates(d, BY, ["iops"], spread_alpha=1.5)
    with pytest.raises(SchemaError, match="no column"):
        point_estimates(d, BY, ["bw_bytes_per_s"])
    with pytest.raises(SchemaError, match="no rows"):
        point_estimates(d.iloc[:0], BY, ["iops"])
    # NaN values are left out of their point; the rest of it stays
    nan = d.copy()
    nan.loc[0, "iops"] = np.nan
    t = point_estimates(nan, BY, ["iops"]).table
    assert np.isfinite(t["iops_ci_low"]).all()
    # a published cell rounded to 0 ms (one value, no log needed) keeps its value, without a CI
    pub = d.groupby(BY, as_index=False).first().drop(columns="run_id")
    pub.loc[0, "lat_mean_ns"] = 0.0
    assert point_estimates(pub, BY, ["lat_mean_ns"]).table.loc[0, "lat_mean_ns"] == 0.0


def test_arithmetic_t_is_an_option_from_three_runs(demo):
    d = pd.read_csv(STATS / "demo_n3_runs.csv", dtype={"run_id": str})
    t = point_estimates(d, BY, ["iops"], method="t").table
    for (nj, qd), g in d.groupby(BY):
        ci = st.ttest_1samp(g["iops"], 0.0).confidence_interval(0.95)
        row = t[(t["numjobs"] == nj) & (t["iodepth"] == qd)].iloc[0]
        assert row["iops"] == pytest.approx(g["iops"].mean()) and row["iops_ci_low"] == pytest.approx(ci.low)
    with pytest.raises(StatsError, match=r"needs >= 3 runs per point; numjobs=1, iodepth=1 has 2 .*t = 12.7"):
        point_estimates(per_run(demo[0]), BY, ["iops"], method="t")
    # point_means: the same table, the checks in attrs
    pm = point_means(d, BY, ["iops"])
    assert pm.attrs["checks"]["iops"].method == "log_t" and "iops_log_sd" in pm.columns


def test_qos_max_load_interval_on_the_log_scale_with_real_n2_data(demo):
    """The committed demo sweep per outstanding-I/O level (two runs each): the old Student t interval of the
    arithmetic mean latency reached below 0 ns at two levels; the log-scale one never does."""
    runs, _ = demo
    pr = per_run(runs)
    old = []
    for _, g in pr.groupby("outstanding_ios"):
        v = g["lat_mean_ns"].to_numpy(float)
        old.append(st.ttest_1samp(v, 0.0).confidence_interval(0.95).low)
    assert sum(lo < 0 for lo in old) >= 2
    q = qos_max_load(pr[["run_id", "outstanding_ios", "lat_mean_ns"]], "outstanding_ios", "lat_mean_ns", 1e6)
    tab = q.table
    assert (tab["ci_low"] > 0).all() and (tab["ci_low"] < tab["mean"]).all() and (tab["n"] == 2).all()
    gm = pr.groupby("outstanding_ios")["lat_mean_ns"].agg(st.gmean).to_numpy()
    np.testing.assert_allclose(tab["mean"], gm, rtol=1e-12)
    assert "geometric mean" in q.method and "own runs (n - 1 df)" in q.method
    # levels in load order up to the first geometric mean above 1 ms; the confident claim never goes further
    first_fail = next((lv for lv, m in zip(tab["load"], tab["mean"], strict=True) if m > 1e6), None)
    assert (q.max_load is None) or first_fail is None or q.max_load < first_fail
    order = list(tab["load"])
    conf = -1 if q.max_load_confident is None else order.index(q.max_load_confident)
    assert conf <= (order.index(q.max_load) if q.max_load is not None else -1)
    with pytest.raises(StatsError, match=r"'lat_mean_ns' has 12 value\(s\) <= 0"):
        qos_max_load(pr.assign(lat_mean_ns=0.0), "outstanding_ios", "lat_mean_ns", 1e6)


def _frontier_by_hand(t: pd.DataFrame) -> pd.DataFrame:
    t = t.assign(oio=t["numjobs"] * t["iodepth"]).sort_values(["oio", "iops"], ascending=[True, False])
    return t.drop_duplicates("oio").sort_values("oio")


def test_recommendation_rule_uses_the_p99_knee_computed_independently(demo):
    """Kneedle on the frontier (best point per outstanding-I/O count) against log2 outstanding I/Os, by hand
    with kneed here; then the rule: the fewest outstanding I/Os reaching 95% of the best point not past the
    p99 knee."""
    from kneed import KneeLocator

    from storagebench._histogram import percentiles_from_bins
    from storagebench.stats import recommend_parameters

    runs, hist = demo
    rec = recommend_parameters(runs, histograms=hist)
    pr = per_run(runs)
    pts = pr.groupby(BY).agg(iops=("iops", st.gmean), lat=("lat_mean_ns", st.gmean)).reset_index()
    p99 = []
    for _, r in pts.iterrows():
        ids = pr.loc[(pr["numjobs"] == r["numjobs"]) & (pr["iodepth"] == r["iodepth"]), "run_id"]
        b = hist[hist["run_id"].isin(ids)].groupby("bin_ns", as_index=False)["count"].sum()
        p99.append(percentiles_from_bins(b["bin_ns"], b["count"], [99.0])[99.0])
    pts["p99"] = p99
    front = _frontier_by_hand(pts)
    x = np.log2(front["oio"].to_numpy(float))
    knee99 = 2 ** KneeLocator(x, front["p99"].to_numpy(), curve="convex", direction="increasing").knee
    knee_mean = 2 ** KneeLocator(x, front["lat"].to_numpy(), curve="convex", direction="increasing").knee
    assert rec.tail_knee.x == pytest.approx(knee99) and rec.latency_knee.x == pytest.approx(knee_mean)
    ok = pts[pts["numjobs"] * pts["iodepth"] <= knee99]
    cand = ok[ok["iops"] >= 0.95 * ok["iops"].max()].assign(oio=lambda t: t["numjobs"] * t["iodepth"])
    pick = cand.sort_values(["oio", "lat"]).iloc[0]
    assert (rec.numjobs, rec.iodepth) == (int(pick["numjobs"]), int(pick["iodepth"]))
    assert rec.value == pytest.approx(pick["iops"]) and rec.max_value == pytest.approx(pts["iops"].max())
    assert "p99 completion latency" in rec.rule and "Kneedle, Satopää et al. 2011" in rec.rule
    k = rec.knees.set_index("curve")
    assert list(k.index) == ["IOPS", "mean latency", "p99 completion latency"]
    assert k.loc["p99 completion latency", "outstanding_ios"] == pytest.approx(knee99)
    assert k.loc["p99 completion latency", "clat_p99_ns"] == pytest.approx(front.set_index("oio").loc[knee99, "p99"])
    assert rec.table["qualifies"].sum() >= 1 and rec.table.loc[rec.table["qualifies"], "within_tail_knee"].all()
    # without histograms there is no tail: the plain plateau rule, and the rule says so
    plain = recommend_parameters(runs)
    assert plain.tail_knee is None and "without histograms" in plain.rule
    top = pts.assign(oio=pts["numjobs"] * pts["iodepth"])
    top = top[top["iops"] >= 0.95 * top["iops"].max()].sort_values(["oio", "lat"]).iloc[0]
    assert (plain.numjobs, plain.iodepth) == (int(top["numjobs"]), int(top["iodepth"]))
    assert plain.plateau == (int(top["numjobs"]), int(top["iodepth"]))
    with pytest.raises(StatsError, match="tail must be a percentile"):
        recommend_parameters(runs, histograms=hist, tail=100)


def test_sweep_findings_give_the_recommended_point_with_mean_p99_and_the_rule(demo):
    from storagebench.publish import study_provenance
    from storagebench.stats import sweep_summary

    runs, hist = demo
    s = sweep_summary(runs, hist, provenance=study_provenance(FIXTURES / "study_demo"))
    f = s.findings()
    assert [x.key for x in f] == ["peak_iops", "recommended", "cache", "runs_per_point"]
    peak, rec = f["peak_iops"], f["recommended"]
    assert peak.ci[0] > 0 and rec.ci[0] > 0 and "geometric mean" in peak.method and "own runs (n - 1 df)" in peak.method
    rc = s.recommended
    assert (rc.numjobs, rc.iodepth) == (s.recommendation.numjobs, s.recommendation.iodepth)
    assert f"mean latency {rc.lat_mean_ms:.3f} ms" in rec.sentence and "p99 completion latency" in rec.sentence
    assert "p99 knee" in rec.sentence and "Kneedle" in rec.method and "rule:" in rec.method
    assert rc.lat_mean_ci_low_ms > 0
    # the committed fixture's device calls itself rotational, yet answers in 0.2 ms at one outstanding I/O
    assert f["cache"].caveat and "0.219 ms" in f["cache"].sentence
    n = f["runs_per_point"]
    assert "n = 2 times" in n.sentence and "from the point's own runs (n - 1 df), not pooled over the points" in n.sentence
    assert "Bartlett" in n.sentence and not n.caveat
    kp = s.key_points()
    assert list(kp["point"])[:3] == ["peak IOPS", "recommended", "start of the IOPS plateau (>= 95% of the peak)"]
    assert "knee of p99 completion latency" in set(kp["point"]) and (kp["iops_ci_low"].dropna() > 0).all()
    methods = " ".join(s.methods())
    assert "Satopää, Albrecht, Irwin & Raghavan 2011" in methods and "not pooled over the points" in methods


def test_default_ci_covers_at_noisy_points_where_pooling_behind_brown_forsythe_did_not():
    """A small seeded version of benchmarks/bench_pooling.py. Unit: the run; estimand: each point's geometric
    mean; no family. 12 points, 3 runs each, log SDs 0.025 to 0.367 (the committed demo's spread): the old rule
    (pool unless Brown-Forsythe rejects, which at 3 runs it never does) covered about 0.65 at the noisiest
    point; each point's own CI covers it at 0.95 (200 sweeps: a 99% binomial bound for 0.95 is 0.91)."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_pooling import cell

    r = cell("demo", 3, 200, seed=11)
    assert r["pooled_before"] > 0.9 and r["noisy_cover_before"] < 0.8
    assert r["pooled_after"] == 0 and r["noisy_cover_after"] >= 0.91

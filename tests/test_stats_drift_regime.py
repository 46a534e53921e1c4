"""Drift over the run order, the "cache, not medium" rule, and per-run steady state from fio's averaged logs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from storagebench.errors import StatsError
from storagebench.records import DeviceInfo
from storagebench.stats import (
    cache_caveats,
    drift_check,
    steady_state,
    steady_state_timeseries,
)
from storagebench.stats.regime import CACHE_CAVEAT, ROTATIONAL_FLOOR_NS
from storagebench.stats.sweep import CACHE_LATENCY_MS


def _runs(rng, n_cells=3, per_cell=8, slope=0.0, sd=0.02):
    cells = np.tile([f"c{i}" for i in range(n_cells)], per_cell)
    order = rng.permutation(len(cells))
    base = {f"c{i}": 1000.0 * (i + 1) for i in range(n_cells)}
    y = np.array([base[c] for c in cells]) * np.exp(slope * order + rng.normal(0, sd, len(cells)))
    return pd.DataFrame({"cell": cells, "run_order": order, "iops": y})


def test_drift_slope_is_the_ancova_slope_of_statsmodels(rng):
    """Gold check: slope, SE-based CI and p equal statsmodels' OLS of log(iops) ~ C(cell) + run_order."""
    df = _runs(rng, slope=0.004)
    d = drift_check(df, "iops", cells="cell")
    fit = smf.ols("np.log(iops) ~ C(cell) + run_order", data=df).fit()
    assert d.slope == pytest.approx(fit.params["run_order"], rel=1e-10)
    assert d.p == pytest.approx(fit.pvalues["run_order"], rel=1e-8)
    lo, hi = fit.conf_int(0.05).loc["run_order"]
    assert d.ci_low_pct == pytest.approx(np.expm1(lo * d.span) * 100, rel=1e-8)
    assert d.ci_high_pct == pytest.approx(np.expm1(hi * d.span) * 100, rel=1e-8)
    assert d.df == int(fit.df_resid) and d.n == len(df)
    assert d.drift and "drift shown" in d.text() and "no drift" not in d.text()
    assert d.pct_per_100 == pytest.approx(np.expm1(100 * d.slope) * 100)


def test_no_drift_and_the_runs_test(rng):
    d = drift_check(_runs(rng, slope=0.0), "iops", cells=["cell"], confidence=0.99)
    assert d.ci_low_pct < 0 < d.ci_high_pct and not d.drift
    assert "99% CI" in d.text() and "no drift shown" in d.text()
    assert 0 <= d.runs_p <= 1
    # residuals alternating above/below in run order: far too many runs for chance; no trend
    n = 40
    alt = pd.DataFrame({"cell": "a", "run_order": np.arange(n), "iops": 1000 * np.where(np.arange(n) % 2, 1.01, 0.99)})
    a = drift_check(alt, "iops", cells="cell")
    assert a.runs_p < 1e-6 and a.clustered and not a.drift
    assert "no drift shown" in a.text() and "they cluster in run order" in a.text()


def test_drift_bad_input_and_no_df():
    df = pd.DataFrame({"cell": ["a", "b", "c"], "run_order": [0, 1, 2], "iops": [1.0, 2.0, 3.0]})
    d = drift_check(df, "iops", cells="cell")  # one run per cell: nothing left for a slope
    assert math.isnan(d.slope) and not d.drift and "not estimable" in d.text()
    with pytest.raises(StatsError, match="at least 3 runs"):
        drift_check(df.iloc[:2], "iops", cells="cell")
    with pytest.raises(StatsError, match="iops"):
        drift_check(df.assign(iops=[1.0, -1.0, 2.0]), "iops", cells="cell")
    with pytest.raises(StatsError, match="missing"):
        drift_check(df.assign(run_order=[0, None, 2]), "iops", cells="cell")
    with pytest.raises(StatsError):
        drift_check(df, "iops", cells="nope")


def test_cache_caveat_rule():
    runs = pd.DataFrame({"run_id": ["a", "b", "c", "d"], "clat_mean_ns": [41_000.0, 3_500_000.0, 41_000.0, 999_999.0],
                         "iodepth": [1, 1, 32, 1], "numjobs": [1, 1, 1, 2], "rw": "randread"})
    rot = DeviceInfo(path="/dev/vda", rotational=True)
    out = cache_caveats(runs, rot)
    assert list(out["cache_not_medium"]) == [True, False, True, True]  # the floor holds at any depth
    assert out.loc[0, "caveat"].startswith(CACHE_CAVEAT) and "41 µs" in out.loc[0, "caveat"]
    assert "1 outstanding I/O " in out.loc[0, "caveat"] and "32 outstanding I/Os" in out.loc[2, "caveat"]
    assert out.loc[1, "caveat"] == "" and list(out["outstanding_ios"]) == [1, 1, 32, 2]
    # non-rotational or unknown: never a caveat; the JSON form of the record works too
    assert not cache_caveats(runs, {"path": "/dev/nvme0n1", "rotational": False})["cache_not_medium"].any()
    assert not cache_caveats(runs, {"path": "/dev/loop9", "rotational": None})["cache_not_medium"].any()
    # per run: a record per run id; a run without one gets none
    per = cache_caveats(runs, {"a": rot, "b": rot, "c": {"path": "/dev/zram0", "rotational": False}})
    assert list(per["cache_not_medium"]) == [True, False, False, False]
    assert list(per["device"]) == ["/dev/vda", "/dev/vda", "/dev/zram0", ""]
    assert cache_caveats(runs, rot, floor_ns=50_000)["cache_not_medium"].tolist() == [True, False, True, False]
    assert ROTATIONAL_FLOOR_NS == 1e6 and CACHE_LATENCY_MS == 1.0  # one floor: the demo's sweep summary uses it too
    with pytest.raises(StatsError, match="percentile|mean-latency"):
        cache_caveats(runs.assign(clat_p99_ns=1.0), rot, latency="clat_p99_ns")
    with pytest.raises(StatsError, match="floor_ns"):
        cache_caveats(runs, rot, floor_ns=0)
    with pytest.raises(StatsError, match="run_id"):
        cache_caveats(runs.drop(columns="run_id"), {"a": rot})
    # random or sequential must be known: the rule is for random I/O only
    with pytest.raises(StatsError, match="rw or a random_pct"):
        cache_caveats(runs.drop(columns="rw"), rot)


def test_cache_caveat_is_for_random_io_only():
    """A rotating medium streams sequential I/O without a seek per I/O: sub-millisecond sequential runs are its
    transfer rate, not a cache. Random is ``random_pct`` > 0, else an ``rw`` of rand*."""
    runs = pd.DataFrame({"clat_mean_ns": 41_000.0, "iodepth": 1, "numjobs": 1,
                         "rw": ["read", "randread", "randrw", "write", "read,randwrite", "read"],
                         "random_pct": [np.nan, np.nan, np.nan, np.nan, np.nan, 40.0]})
    out = cache_caveats(runs, DeviceInfo(path="/dev/sda", rotational=True))
    assert out["random"].tolist() == [False, True, True, False, True, True]
    assert out["cache_not_medium"].tolist() == out["random"].tolist()
    assert "random I/O" in out.loc[1, "caveat"] and out.loc[0, "caveat"] == ""
    # percentage_random 0 with a rand* rw: fio does not seek (percentage_random=0 is sequential)
    assert not cache_caveats(runs.assign(random_pct=0.0), DeviceInfo(rotational=True))["cache_not_medium"].any()


def test_cache_caveat_spares_the_sequential_hdd_cells_of_seed_001():
    """Seed 001's 7,200 rpm disk: the two 100% sequential read cells respond in 0.0 and 0.1 ms as printed and
    move 116 and 120 MiB/s, the platters' streaming rate; the one rule sets them apart as a stream, never as
    "cache, not medium", and the other 30 cells (>= 2.4 ms) get no caveat either."""
    from storagebench.published import load_published, published_metadata
    from storagebench.stats import rotational_findings

    df = load_published("hdd_iops")
    out = cache_caveats(df, DeviceInfo(path="WD1003FBYX", rotational=True), latency="lat_mean_ns")
    fast = df["lat_mean_ns"] < ROTATIONAL_FLOOR_NS
    assert int(fast.sum()) == 2 and (df.loc[fast, "random_pct"] == 0).all()
    assert not out["cache_not_medium"].any()
    mib = df.loc[fast, "bw_bytes_per_s"] / 2**20
    assert mib.round().tolist() == [116.0, 120.0]
    f, apart = rotational_findings(df, rpm=7200, device="the drive",
                                   claim=published_metadata("hdd_iops")["claims"][0])
    assert apart.tolist() == fast.tolist()
    assert "2 sequential cell(s) stream at 116 to 120 MiB/s" in f["platter_iops"].sentence
    assert "cache" not in f["platter_iops"].sentence.replace("no sign of a cache", "")
    claim = f["claim_cache"].sentence
    assert "is not shown for the 2 sequential cell(s)" in claim and "holds" not in claim
    # a random cell that fast would still be a cache: the rule is the same rule
    one = df[~fast].iloc[[0]].assign(lat_mean_ns=50_000.0)
    assert cache_caveats(one, DeviceInfo(rotational=True), latency="lat_mean_ns")["cache_not_medium"].all()


def test_steady_state_of_a_runs_total_from_real_averaged_logs(fixtures_dir):
    """Real fio 3.33 logs with log_avg_msec=1000 (2 jobs, read and write lines): stamped 999, 1999, 2999, 4000 ...
    ms. 'nearest' puts one sample per second into its round; the run's total is the sum over jobs and
    directions, and steady_state() on those sums gives the same answer."""
    from storagebench.ingest import ingest_paths

    ts = ingest_paths([fixtures_dir / "fio" / "logs_avg"]).timeseries
    iops = ts[ts.metric == "iops"]
    assert set(iops["log_index"]) == {1, 2} and set(iops["direction"]) == {"read", "write"}
    floor = np.floor(iops["t_s"]).astype(int)
    assert floor.value_counts().max() > 4  # floor puts 999 ms and 1999 ms ... into neighbouring rounds wrongly
    out = steady_state_timeseries(ts, metric="iops", by=["run_id"], sum_over=["job", "log_index", "direction"],
                                  align="nearest")
    assert len(out) == 1 and out.loc[0, "rounds"] == 6
    total = iops.assign(r=np.rint(iops["t_s"]).astype(int)).groupby("r")["value"].sum()
    assert list(total.index) == [1, 2, 3, 4, 5, 6]
    direct = steady_state(total.to_numpy())
    assert bool(out.loc[0, "steady"]) == direct.steady
    assert out.loc[0, "data_range_pct"] == pytest.approx(direct.data_range_pct)
    if direct.steady:
        assert out.loc[0, "steady_at_s"] == total.index[direct.first_round]
    with pytest.raises(StatsError, match="align"):
        steady_state_timeseries(ts, align="ceil")
    with pytest.raises(StatsError, match="sum_over"):
        steady_state_timeseries(ts.assign(metric="lat_ns"), metric="lat_ns", sum_over=["job"])


def test_drift_on_set_up_means_matches_r(fixtures_dir):
    """Unit: the set-up (its runs follow each other and share its effect); estimand: the common slope of log
    IOPS in run order within cells, as % change over the sweep; family: one test. Gold: R's
    ``lm(mean log ~ arm + mean run order)`` over the 8 set-ups of ``drift_setups.csv`` (r_drift_reference.R).
    Counted as 48 independent runs the same sweep says "drift shown" (R's run-level ANCOVA p = 0.023); on its
    8 set-ups, p = 0.34."""
    import json

    d = pd.read_csv(fixtures_dir / "stats" / "drift_setups.csv")
    ref = json.loads((fixtures_dir / "stats" / "r_drift_reference.json").read_text())
    u = drift_check(d, "iops", cells=["arm", "cell"], setup=["setup", "arm"])
    r = ref["setups"]
    assert (u.unit, u.n, u.runs, u.df) == ("setup, arm", r["n"], 48, r["df"])
    assert u.slope == pytest.approx(r["slope"], rel=1e-9) and u.p == pytest.approx(r["p"], rel=1e-8)
    assert u.span == r["span"] and u.pct_over_span == pytest.approx(r["pct_over_span"], rel=1e-8)
    assert u.ci_low_pct == pytest.approx(np.expm1(r["ci_low"] * r["span"]) * 100, rel=1e-8)
    assert u.ci_high_pct == pytest.approx(np.expm1(r["ci_high"] * r["span"]) * 100, rel=1e-8)
    assert not u.drift and "n = 8 set-ups (48 runs)" in u.text() and "no drift shown" in u.text()
    assert "on set-up means" in u.text() and "the unit is the set-up" in u.method and len(u.residuals) == 8
    runs = drift_check(d, "iops", cells=["arm", "cell"])
    assert runs.unit == "run" and runs.p == pytest.approx(ref["runs"]["p"], rel=1e-8) and runs.drift


def test_drift_unit_falls_back_to_the_run_where_set_ups_cannot_matter(fixtures_dir):
    """Each run its own set-up, or one set-up per cell (its effect is its cell's mean): the run-level check of
    before, and the method says why; a missing set-up column is refused."""
    d = pd.read_csv(fixtures_dir / "stats" / "drift_setups.csv")
    plain = drift_check(d, "iops", cells=["arm", "cell"])
    own = drift_check(d.assign(setup=np.arange(len(d))), "iops", cells=["arm", "cell"], setup="setup")
    assert own.unit == "run" and own.p == plain.p and own.n == 48
    one = d[d["setup"] == 1]  # one set-up per arm: every cell holds runs of one set-up
    o = drift_check(one, "iops", cells=["arm", "cell"], setup=["setup", "arm"])
    assert o.unit == "run" and "whose effect its mean absorbs" in o.method
    with pytest.raises(StatsError, match="setup_id"):
        drift_check(d, "iops", cells="cell", setup="setup_id")
    with pytest.raises(StatsError, match="missing"):
        drift_check(d.assign(setup=d["setup"].where(d.index > 0)), "iops", cells="cell", setup="setup")


def test_drift_on_set_up_means_holds_its_level_where_runs_did_not():
    """A small seeded version of benchmarks/bench_drift.py: no drift, set-up SD 2.5 x the run SD, 8 set-ups of 6
    runs. Counting runs as independent shows "drift" in far more than 5% of sweeps; on set-up means it stays
    near 5% (120 sweeps: binomial 99% bound for a true 0.05 is 0.12)."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_drift import cell

    r = cell((2, 4, 2, 3), 2.5, 0.0, 120, seed=7)
    assert r["drift_before"] > 0.2 and r["clustered_before"] > 0.5
    assert r["drift_after"] <= 0.12

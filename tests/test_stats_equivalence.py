"""Tests of storagebench.stats.equivalence: TOST, its sample size, and single-arm CIs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.weightstats import ttost_ind

from storagebench.errors import StatsError
from storagebench.stats import mean_ci, pilot_cv, tost, tost_plan, variance_components
from storagebench.stats.equivalence import cv_upper_bound, tost_power, tost_sample_size


@pytest.fixture
def tost_ref(fixtures_dir):
    return json.loads((fixtures_dir / "stats" / "tost_reference.json").read_text())


def test_bca_mean_matches_r_boot():
    """Gold: scipy's test_resampling.py ``test_bootstrap_against_R``: R ``boot.ci(boot(x, mean, 1e6))`` BCa
    interval (32.31, 91.43) for x below; scipy checks its own BCa at rtol 0.005 with 1e6 resamples."""
    x = [10, 12, 12.5, 12.5, 13.9, 15, 21, 22, 23, 34, 50, 81, 89, 121, 134, 213]
    est = mean_ci(x, n_boot=200_000, seed=0)
    assert est.estimate == pytest.approx(np.mean(x))
    assert est.ci_low == pytest.approx(32.31, rel=0.01)
    assert est.ci_high == pytest.approx(91.43, rel=0.01)
    assert "BCa" in est.method and est.n == 16
    # the t interval is symmetric and differs from BCa on this skewed sample
    t = mean_ci(x)
    assert t.estimate - t.ci_low == pytest.approx(t.ci_high - t.estimate)
    assert t.ci_high < est.ci_high
    one = mean_ci([5.0])
    assert math.isnan(one.ci_low) and "not estimable" in one.note
    with pytest.raises(StatsError, match="BCa bootstrap CI needs >= 10 values, got 3"):
        mean_ci([1.0, 2.0, 3.0], n_boot=999)
    with pytest.raises(StatsError, match="NaN"):
        mean_ci([1.0, float("nan")])
    with pytest.raises(StatsError, match="empty"):
        mean_ci([])


def test_tost_gold_paired_sas_and_independent_clinic(tost_ref):
    """Gold: statsmodels test_tost.py references (R ``equivalence::tost``, SAS), transcribed with their source
    in tests/fixtures/stats/tost_reference.json: SAS bioequivalence data paired, p = 0.003059338540563293;
    clinic var1 independent (Welch), p = 0.01047085593138891; bounds 0.8/1.25."""
    x, y = np.array(tost_ref["sas_raw"]).reshape(-1, 2).T
    r = tost(y, x, (0.8, 1.25), paired=True)
    assert r.p == pytest.approx(tost_ref["sas_paired_p"], rel=1e-10) and r.equivalent
    assert r.low < r.ci_low < r.ratio < r.ci_high < r.high and r.ci_level == pytest.approx(0.9)
    # R: mean_diff 0.06060076667771316, ci_diff (-0.0257063329659993, 0.1469078663214256) for log(y) - log(x)
    r2 = tost(x, y, (0.8, 1.25), paired=True)
    assert math.log(r2.ratio) == pytest.approx(tost_ref["sas_paired_mean_diff_log_y_minus_log_x"], rel=1e-10)
    assert (math.log(r2.ci_low), math.log(r2.ci_high)) == pytest.approx(tuple(tost_ref["sas_paired_ci_diff"]))
    ri = tost(tost_ref["clinic_var1_b"], tost_ref["clinic_var1_a"], (0.8, 1.25))
    assert ri.p == pytest.approx(tost_ref["clinic_indep_p"], rel=1e-10)
    # R: ci_diff for log(A) - log(B), Welch df 27.61
    assert (math.log(ri.ci_low), math.log(ri.ci_high)) == pytest.approx(tuple(tost_ref["clinic_indep_ci_diff_a_minus_b"]))


def test_tost_bad_input():
    with pytest.raises(StatsError, match="margin is required"):
        tost([1, 2], [1, 2], None)
    with pytest.raises(StatsError, match="<= 0"):
        tost([1, 0], [1, 2], 0.01)
    with pytest.raises(StatsError, match=">= 2 replicates"):
        tost([1], [1, 2], 0.01)
    with pytest.raises(StatsError, match="equal lengths"):
        tost([1, 2, 3], [1, 2], 0.01, paired=True)
    with pytest.raises(StatsError, match="0 < low < 1 < high"):
        tost([1, 2], [1, 2], (1.1, 1.2))


def test_sample_size_is_minimal_and_power_holds_by_simulation():
    """With a CV known without error (df = inf) tost_sample_size returns the smallest n with nct power >= 0.8;
    a seeded simulation of statsmodels' ttost_ind at that n (log-normal runs, CV 2%, margin 5%, true ratio
    1.01) agrees."""
    cv, m, ratio = 0.02, 0.05, 1.01
    n = tost_sample_size(cv, m, ratio=ratio, df=math.inf)
    assert tost_power(n, cv, m, ratio) >= 0.8 > tost_power(n - 1, cv, m, ratio)
    rng = np.random.default_rng(7)
    sigma = math.sqrt(math.log1p(cv**2))
    sims = 2000
    hits = 0
    for _ in range(sims):
        a = rng.normal(0.0, sigma, n)
        b = rng.normal(math.log(ratio), sigma, n)
        hits += ttost_ind(b, a, math.log1p(-m), math.log1p(m), usevar="unequal")[0] < 0.05
    assert hits / sims == pytest.approx(tost_power(n, cv, m, ratio), abs=0.04)
    inf = math.inf
    # "within 1%" at 2% CV is expensive; a paired design of ratios with the same CV needs about half
    assert tost_sample_size(0.02, 0.01, df=inf) > 50
    assert tost_sample_size(0.02, 0.01, paired=True, df=inf) < tost_sample_size(0.02, 0.01, df=inf)
    # a search that must go past the last power of two below n_max still finds the minimum (regression:
    # cv 74% at a 1% margin needs ~75,000 runs per arm, between 65,536 and n_max = 100,000)
    big = tost_sample_size(0.74, 0.01, df=inf)
    assert 65_536 < big < 100_000 and tost_power(big, 0.74, 0.01) >= 0.8 > tost_power(big - 1, 0.74, 0.01)
    # more noise, or a true ratio nearer the bound, needs more runs
    assert tost_sample_size(0.04, 0.05, df=inf) > tost_sample_size(0.02, 0.05, df=inf)
    assert tost_sample_size(0.02, 0.05, ratio=1.03, df=inf) > tost_sample_size(0.02, 0.05, df=inf)


def test_cv_upper_bound_is_the_chi_square_bound_of_the_log_sd():
    """s_U = s sqrt(df / chi2_{0.2; df}); with 4 df (3 runs per arm, pooled) the 80% bound is 1.558 s."""
    from scipy import stats as st

    b = cv_upper_bound(0.05, 4)
    s = math.sqrt(math.log1p(0.05**2))
    s_u = math.sqrt(math.log1p(b.cv_upper**2))
    assert s_u == pytest.approx(s * math.sqrt(4 / st.chi2.ppf(0.2, 4)), rel=1e-12)
    assert s_u / s == pytest.approx(1.5576, abs=1e-4)
    assert b.confidence == 0.8 and "Browne 1995" in b.method and "chi2" in b.method
    assert cv_upper_bound(0.05, math.inf).cv_upper == pytest.approx(0.05)
    assert cv_upper_bound(0.05, 4, 0.95).cv_upper > b.cv_upper > cv_upper_bound(0.05, 40).cv_upper > 0.05
    # the plan uses the bound: the same CV with 4 df needs more runs than a known one
    plan = tost_plan(0.05, 0.05, df=4)
    assert plan.cv.cv_upper == pytest.approx(b.cv_upper) and plan.n == tost_sample_size(b.cv_upper, 0.05, df=math.inf)
    assert plan.n > tost_sample_size(0.05, 0.05, df=math.inf) and plan.power >= 0.8 and "upper" in plan.method


def test_pilot_cv_from_arms_and_from_variance_components():
    a, b = np.array([100.0, 104.0, 97.0]), np.array([101.0, 99.0, 106.0])
    p = pilot_cv([a, b])
    la, lb = np.log(a), np.log(b)
    s2 = (((la - la.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum()) / 4
    assert p.df == 4 and p.cv == pytest.approx(math.sqrt(math.expm1(s2)), rel=1e-12)
    assert pilot_cv(a).df == 2 and pilot_cv(np.vstack([a, b])).df == 4
    # variance components: the highest level is the unit; its S^2 is the variance of the unit means
    rng = np.random.default_rng(4)
    rows = [dict(setup=s, run=r, iops=1000 * (1 + 0.05 * u) * (1 + rng.normal(0, 0.01)))
            for s, u in enumerate(rng.normal(0, 1, 5)) for r in range(3)]
    df = pd.DataFrame(rows)
    vc = variance_components(df, ["setup", "run"], "iops")
    pv = pilot_cv(vc)
    means = df.groupby("setup")["iops"].mean()
    assert pv.df == 4 and pv.cv == pytest.approx(means.std(ddof=1) / df["iops"].mean(), rel=1e-12)
    assert "units of level 'setup' (5)" in pv.source and pv.cv_upper > pv.cv
    both = pilot_cv([vc, vc])  # one per arm: pooled, twice the df
    assert both.df == 8 and both.cv == pytest.approx(pv.cv, rel=1e-12) and both.cv_upper < pv.cv_upper
    assert tost_plan(pv, 0.1).n >= 2
    with pytest.raises(StatsError, match="has 1 value"):
        pilot_cv([a, [5.0]])
    with pytest.raises(StatsError, match="no spread"):
        pilot_cv([[2.0, 2.0], [3.0, 3.0]])


def test_plans_from_a_pilot_reach_the_target_power_in_simulation():
    """Seeded simulation (400 plans): pilots of 3 runs per arm (log-normal, CV 5%), plans for a 5% margin at
    80% power, then the planned study and its TOST. At the point estimate of the CV the plans are
    underpowered (as issue 10 found: ~60% of plans, power ~0.6); at the 80% upper bound they reach >= 0.8.
    benchmarks/bench_planning.py runs the larger grid."""
    rng = np.random.default_rng(2026)
    cv, margin = 0.05, 0.05
    s = math.sqrt(math.log1p(cv**2))
    hits = {"point": 0, "upper": 0}
    plans = 400
    for _ in range(plans):
        pilot = [np.exp(rng.normal(0, s, 3)), np.exp(rng.normal(0, s, 3))]
        pc = pilot_cv(pilot)
        for kind, plan in (("point", tost_plan(pc.cv, margin, df=math.inf)), ("upper", tost_plan(pc, margin))):
            x, y = np.exp(rng.normal(0, s, plan.n)), np.exp(rng.normal(0, s, plan.n))
            hits[kind] += tost(y, x, margin).equivalent
    assert hits["upper"] / plans >= 0.8
    assert hits["point"] / plans < 0.7


def test_sample_size_bad_input():
    with pytest.raises(StatsError, match="cv must be"):
        tost_sample_size(0, 0.01, df=5)
    with pytest.raises(StatsError, match="df is required with a numeric cv"):
        tost_sample_size(0.02, 0.01)
    with pytest.raises(StatsError, match="df must be"):
        tost_sample_size(0.02, 0.01, df=0)
    with pytest.raises(StatsError, match="df is part of the PlanningCV"):
        tost_sample_size(cv_upper_bound(0.02, 4), 0.01, df=4)
    with pytest.raises(StatsError, match="ratio must lie inside"):
        tost_sample_size(0.02, 0.01, ratio=1.02, df=5)
    with pytest.raises(StatsError, match="power must be"):
        tost_sample_size(0.02, 0.01, power=1.5, df=5)
    with pytest.raises(StatsError, match="n_max"):
        tost_sample_size(0.5, 0.001, n_max=1000, df=math.inf)

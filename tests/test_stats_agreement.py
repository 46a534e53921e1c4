"""Tests of storagebench.stats.agreement: Bland & Altman (1986)'s own peak-flow example, the log scale, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as st

from storagebench.errors import StatsError
from storagebench.published import load_published
from storagebench.stats import bland_altman

# Bland & Altman (1986), Lancet 327:307, Table 1: peak expiratory flow rate (l/min) of 17 subjects, first
# reading with the Wright peak flow meter and with the mini Wright meter.
WRIGHT = np.array([494, 395, 516, 434, 476, 557, 413, 442, 650, 433, 417, 656, 267, 478, 178, 423, 427.0])
MINI = np.array([512, 430, 520, 428, 500, 600, 364, 380, 658, 445, 432, 626, 260, 477, 259, 350, 451.0])


def test_the_papers_own_example():
    """The paper: mean difference -2.1, SD 38.8, limits -79.7 and 75.5 (with 2 SD), SE of a limit
    sqrt(3 s^2/n) = 16.3, 95% CI of the lower limit -114.3 to -45.1 and of the upper 40.9 to 110.1."""
    ba = bland_altman(WRIGHT, MINI, log=False, coverage=st.norm.cdf(2) * 2 - 1)  # z = 2, as the paper
    assert ba.n == 17 and not ba.log
    assert ba.bias == pytest.approx(-2.1, abs=0.05) and ba.sd == pytest.approx(38.8, abs=0.05)
    assert (ba.loa_low, ba.loa_high) == pytest.approx((-79.7, 75.5), abs=0.1)
    assert (ba.bias_ci_low, ba.bias_ci_high) == pytest.approx((-22.0, 17.8), abs=0.1)
    # the 1999 SE (s sqrt(1/n + z^2/(2(n-1)))) is a little wider than the paper's sqrt(3 s^2/n) approximation
    assert (ba.loa_low_ci_low, ba.loa_low_ci_high) == pytest.approx((-114.3, -45.1), abs=1.0)
    assert (ba.loa_high_ci_low, ba.loa_high_ci_high) == pytest.approx((40.9, 110.1), abs=1.0)
    se = ba.sd * math.sqrt(1 / 17 + 4 / 32)
    assert ba.loa_high_ci_high - ba.loa_high == pytest.approx(st.t.ppf(0.975, 16) * se, rel=1e-6)
    assert "Bland & Altman 1986" in ba.method and ba.to_dict()["n"] == 17


def test_log_scale_reports_ratios_on_published_tool_pairs():
    """FIO vs DiskSPD IOPS of seed 002 (same VM count and stripe width): ratios, not differences."""
    df = load_published("vsan_stripe")
    wide = df.pivot_table(index=["pattern", "vms", "stripe_width"], columns="source_tool", values="iops")
    ba = bland_altman(wide["FIO"], wide["DiskSPD"])
    d = np.log(wide["FIO"] / wide["DiskSPD"])
    z = st.norm.ppf(0.975)
    assert ba.n == 144 and ba.log
    assert ba.bias == pytest.approx(math.exp(d.mean()))
    assert (ba.loa_low, ba.loa_high) == pytest.approx((math.exp(d.mean() - z * d.std()), math.exp(d.mean() + z * d.std())))
    assert ba.loa_low_ci_low < ba.loa_low < ba.loa_low_ci_high < ba.bias_ci_low < ba.bias < ba.bias_ci_high
    assert ba.bias_ci_high < ba.loa_high_ci_low < ba.loa_high < ba.loa_high_ci_high
    # swapping the methods inverts every ratio
    inv = bland_altman(wide["DiskSPD"], wide["FIO"])
    assert inv.bias == pytest.approx(1 / ba.bias) and inv.loa_high == pytest.approx(1 / ba.loa_low)


def test_bad_input_is_named():
    with pytest.raises(StatsError, match="same length"):
        bland_altman([1, 2, 3], [1, 2])
    with pytest.raises(StatsError, match="at least 3 pairs"):
        bland_altman([1, 2], [1, 3])
    with pytest.raises(StatsError, match=r"metric 'b' has 1 value\(s\) <= 0"):
        bland_altman([1, 2, 3], [1, 0, 3])
    with pytest.raises(StatsError, match="NaN"):
        bland_altman([1, np.nan, 3], [1, 2, 3], log=False)
    with pytest.raises(StatsError, match="no spread"):
        bland_altman([2, 4, 6], [1, 2, 3])  # every ratio is 2
    with pytest.raises(StatsError, match="coverage must be a fraction"):
        bland_altman(WRIGHT, MINI, coverage=95)


# --------------------------------------------------------------------------- clustered pairs (Bland & Altman 2007)
# Unit: the I/O pattern (6), of which the 144 configurations (2 stripe widths x 12 VM counts each) are repeated
# observations; estimand: the geometric mean ratio FIO / DiskSPD of IOPS (the mean log ratio, back-transformed),
# the pattern means weighted equally; one test (no family). Gold: R (lmerTest on d ~ 1 + (1 | pattern), t.test on
# the pattern means, the one-way ANOVA components): tests/fixtures/stats/r_agreement_reference.R.

@pytest.fixture(scope="module")
def r_agreement():
    from conftest import FIXTURES

    return json.loads((FIXTURES / "stats" / "r_agreement_reference.json").read_text())


def _stripe_pairs(unbalanced: bool = False):
    wide = load_published("vsan_stripe").pivot_table(index=["pattern", "vms", "stripe_width"], columns="source_tool",
                                                     values="iops").reset_index()
    if unbalanced:  # as the R script: 1M seq read without its VM counts above 6
        wide = wide[~((wide["pattern"] == "1M seq read") & (wide["vms"] > 6))]
    return wide


@pytest.mark.parametrize("case", ["balanced", "unbalanced"])
def test_clustered_bias_matches_r_and_is_wider_than_the_independent_one(r_agreement, case):
    """The audit's case: as 144 independent pairs the bias is 1.029 [1.006, 1.053] (p 0.013); with the pattern as
    the cluster (ICC 0.48) it is 1.029 [0.925, 1.145], p 0.516: no bias shown. Equal to R's t.test on the pattern
    means and, balanced, to lmerTest's random-intercept estimate and Satterthwaite CI (df 5)."""
    ref, w = r_agreement[case], _stripe_pairs(case == "unbalanced")
    naive = bland_altman(w["FIO"], w["DiskSPD"])
    ba = bland_altman(w["FIO"], w["DiskSPD"], clusters=w["pattern"])
    assert (naive.bias, naive.bias_ci_low, naive.bias_ci_high, naive.p) == pytest.approx(
        (ref["naive"]["bias"], ref["naive"]["ci_low"], ref["naive"]["ci_high"], ref["naive"]["p"]), rel=1e-9)
    cm = ref["cluster_means"]
    assert (ba.bias, ba.bias_ci_low, ba.bias_ci_high, ba.p) == pytest.approx(
        (cm["bias"], cm["ci_low"], cm["ci_high"], cm["p"]), rel=1e-9)
    an = ref["anova"]
    assert (ba.icc, ba.sd, ba.loa_low, ba.loa_high) == pytest.approx(
        (an["icc"], an["sd_total"], an["loa_low"], an["loa_high"]), rel=1e-7)
    assert ba.clusters == ref["clusters"] == 6 and ba.n == ref["n"] and naive.clusters == 0
    assert ba.bias_ci_high - ba.bias_ci_low > 4 * (naive.bias_ci_high - naive.bias_ci_low)
    assert math.isnan(ba.loa_low_ci_low) and "Bland & Altman 2007" in ba.method and "5 df" in ba.method
    if case == "balanced":
        lm = ref["lmer"]
        assert (ba.bias, ba.bias_ci_low, ba.bias_ci_high, ba.p) == pytest.approx(
            (lm["bias"], lm["ci_low"], lm["ci_high"], lm["p"]), rel=1e-6)
        assert ba.icc == pytest.approx(lm["icc"], rel=1e-6)
        assert f"{ba.bias:.3g} [{ba.bias_ci_low:.2f}, {ba.bias_ci_high:.2f}]" == "1.03 [0.93, 1.14]"
        assert naive.p < 0.05 < ba.p


def test_per_pattern_limits_match_r(r_agreement):
    """Each pattern's own limits of agreement (its 24 configurations independent) and their t CIs, as R gives."""
    w = _stripe_pairs()
    for pattern, ref in r_agreement["balanced"]["per_pattern"].items():
        part = w[w["pattern"] == pattern]
        ba = bland_altman(part["FIO"], part["DiskSPD"])
        assert (ba.n, ba.bias, ba.loa_low, ba.loa_high, ba.loa_low_ci_low, ba.loa_high_ci_high) == pytest.approx(
            (ref["n"], ref["bias"], ref["loa_low"], ref["loa_high"], ref["loa_low_ci_low"], ref["loa_high_ci_high"]),
            rel=1e-9)


def test_clusters_bad_input_is_named():
    w = _stripe_pairs()
    with pytest.raises(StatsError, match=r"one label per pair \(144\), got 3"):
        bland_altman(w["FIO"], w["DiskSPD"], clusters=["a", "b", "c"])
    with pytest.raises(StatsError, match="at least 3 clusters.*got 2"):
        bland_altman(w["FIO"], w["DiskSPD"], clusters=w["stripe_width"])
    with pytest.raises(StatsError, match="1 missing label"):
        bland_altman(w["FIO"], w["DiskSPD"], clusters=w["pattern"].where(w.index != 0))

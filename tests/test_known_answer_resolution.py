"""The counting-resolution rule of the known-answer checks (:func:`storagebench.studies.count_resolution`,
:meth:`storagebench.studies.KnownAnswerCheck.of`), on recorded per-run counts.

Experimental unit: the set-up; estimand: the ratio of two arms' geometric mean IOPS (other / baseline); a check is
one interval against one truth (no family). fio counts whole I/Os in its measured window and a run's outstanding
I/Os at the window's edges may fall either side, so a run's log IOPS is known to outstanding / counted I/Os; the
stated interval is never narrower than the estimate x exp(+-(sum over both arms of the largest such step)).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from storagebench.studies import KnownAnswerCheck, count_resolution

# ka_fast_vs_slow on this host (docs/testbed.md): at iodepth 1-16 every slow set-up counted exactly 600 I/Os in
# 3.00 s at a cap of 200, every fast one 3000 at a cap of 1000: no spread between set-ups, a degenerate t CI.
FVS = pd.DataFrame({
    "device": ["slow"] * 4 + ["fast"] * 4,
    "load": ["L2"] * 8,
    "setup": [1, 2, 3, 4] * 2,
    "total_ios": [600] * 4 + [3000] * 4,
    "outstanding_ios": [4] * 8,
})

# ka_consolidation --quick at iodepth 2 per workload (recorded 2026-11-28, /var/tmp run of this branch): one row per
# workload process and set-up.
CONS = pd.DataFrame({
    "layout": ["isolated"] * 6 + ["shared"] * 6,
    "workload": ["store", "oltp"] * 6,
    "setup": [1, 1, 2, 2, 3, 3] * 2,
    "repetition": [1] * 12,
    "total_ios": [604, 602, 600, 606, 604, 600, 309, 299, 317, 309, 296, 311],
    "outstanding_ios": [2] * 12,
})


def test_zero_spread_gives_the_resolution_interval_and_covers_an_exact_estimate():
    r = count_resolution(FVS, "device", ("fast", "slow"), by={"load": "L2"})
    assert r == pytest.approx(4 / 600 + 4 / 3000)
    c = KnownAnswerCheck.of("fast / slow IOPS, load L2", 5.0, 5.0, (math.nan, math.nan), "ratio of the caps",
                            resolution=r)
    assert c.covered and c.resolution == r
    assert c.ci_low == pytest.approx(5 * math.exp(-r)) and c.ci_high == pytest.approx(5 * math.exp(r))
    assert "counting resolution" in c.rule and "exp(+-0.008)" in c.rule
    assert c.to_dict()["resolution"] == r and c.to_dict()["covered"] is True  # calibration.json's checks[]
    # without the rule the same check is not estimable and not covered (the old behaviour, kept for callers)
    bare = KnownAnswerCheck.of("fast / slow IOPS, load L2", 5.0, 5.0, (math.nan, math.nan), "ratio of the caps")
    assert not bare.covered and math.isnan(bare.ci_low) and bare.resolution is None


def test_covered_is_exactly_the_truth_inside_the_stated_interval():
    r = count_resolution(FVS, "device", ("fast", "slow"))
    # a narrow CI is widened to the resolution, and covered follows the widened bounds, nothing else
    near = KnownAnswerCheck.of("x", 5.0, 5.03, (5.029, 5.031), "rule", resolution=r)
    far = KnownAnswerCheck.of("x", 5.0, 5.05, (5.049, 5.051), "rule", resolution=r)
    assert near.ci_low == pytest.approx(5.03 * math.exp(-r)) and near.ci_low < 5.0 and near.covered
    assert far.ci_low == pytest.approx(5.05 * math.exp(-r)) and far.ci_low > 5.0 and not far.covered
    # a CI wider than the resolution is stated as it is
    wide = KnownAnswerCheck.of("x", 5.0, 5.3, (5.1, 5.5), "rule", resolution=r)
    assert (wide.ci_low, wide.ci_high) == (5.1, 5.5) and not wide.covered
    for c in (near, far, wide):
        assert c.covered == (c.ci_low <= c.truth <= c.ci_high)


def test_the_total_of_concurrent_workloads_adds_their_counts_per_set_up():
    per_workload = count_resolution(CONS, "layout", ("shared", "isolated"), by={"workload": "oltp"})
    assert per_workload == pytest.approx(2 / 299 + 2 / 600)
    total = count_resolution(CONS, "layout", ("shared", "isolated"), together=("setup", "repetition"))
    # shared set-ups counted 608, 626, 607 with 4 I/Os outstanding; isolated 1206, 1206, 1204
    assert total == pytest.approx(4 / 607 + 4 / 1204)
    # missing counts: no resolution, and the check keeps its CI as given
    assert math.isnan(count_resolution(CONS.drop(columns="total_ios"), "layout", ("shared", "isolated")))
    c = KnownAnswerCheck.of("x", 0.5, 0.49, (0.48, 0.499), "rule", resolution=math.nan)
    assert (c.ci_low, c.ci_high, c.covered) == (0.48, 0.499, False)


def test_bucket_shares_follow_the_token_bucket_over_offset_windows():
    """The truth of a shared device when fio processes' windows are offset (fio starts a process's jobs in 100 ms
    steps, backend.c run_threads): windows that line up share evenly; the run that ends d later runs its last d
    alone, reading 1/k x (1 + d/T) for two runs; the tokens of the windows' union are all accounted for."""
    from storagebench.studies import bucket_shares

    assert bucket_shares([10.0, 10.0], [10.0, 10.0], 1.0) == pytest.approx([0.5, 0.5])
    assert bucket_shares([10.0, 10.1], [10.0, 10.0], 1.0) == pytest.approx([0.5, 0.5 * (1 + 0.1 / 10)])
    assert bucket_shares([3.2, 3.0], [3.0, 3.0], 1.0) == pytest.approx([0.5 * (1 + 0.2 / 3), 0.5])
    three = bucket_shares([0.0, 0.1, 0.2], [10.0] * 3, 1.0)
    # the last ends 0.2 s after the first: 0.1 s with one other, 0.1 s alone; the middle 0.1 s with one other
    assert three == pytest.approx([1 / 3, (9.9 / 3 + 0.1 / 2) / 10, (9.8 / 3 + 0.1 / 2 + 0.1) / 10])
    # an offset larger than the ramp: the late run's window starts alone too
    assert bucket_shares([10.0, 11.5], [10.0, 10.0], 1.0) == pytest.approx([(0.5 / 1 + 9.5 / 2) / 10,
                                                                          (8.5 / 2 + 1.5) / 10])
    for bad in (([1.0], [1.0, 2.0], 1.0), ([1.0, math.nan], [1.0, 1.0], 1.0), ([1.0], [0.0], 1.0),
                ([1.0], [1.0], -1.0)):
        with pytest.raises(ValueError, match="bucket_shares needs"):
            bucket_shares(*bad)


def test_stripe_width_check_holds_the_counting_floor_on_a_recorded_adaptive_sweep(tmp_path):
    """ka_stripe_width --quick under ``precision:`` (W 2 %), captured by bench_adaptive --testbed
    (tests/fixtures/testbed_quick/README.md): 9 set-ups per width, width 1 counting 400-420 I/Os in windows fio
    stretched to 2.1 s (its iodepth-32 queue drains in 160 ms at 200 IOPS, width 4's in 40 ms). The check's
    interval is held to the counting resolution (32/400 + 32/1,600 ~ 0.10 on the log scale), wider than the
    set-ups' own CI, and covers 4."""
    import shutil
    from pathlib import Path

    from storagebench import studies

    d = tmp_path / "ka_stripe_width-quick"  # a copy: the analysis writes tidy/ beside raw/
    shutil.copytree(Path(__file__).parent / "fixtures" / "testbed_quick" / "ka_stripe_width", d)
    res = studies.analyse("ka_stripe_width", d)
    (check,) = res.checks
    (v,) = res.verdicts[["ratio", "ci_low", "ci_high"]].itertuples(index=False)
    widths = studies.load_data("ka_stripe_width", d).per_run.groupby("stripe_width")
    expected = sum(float((g["outstanding_ios"] / g["total_ios"]).max()) for _, g in widths)
    assert check.resolution == pytest.approx(expected) and 0.09 < check.resolution < 0.11
    assert check.ci_low == pytest.approx(check.estimate * math.exp(-check.resolution))
    assert check.ci_high == pytest.approx(check.estimate * math.exp(check.resolution))
    assert check.ci_low < v.ci_low and v.ci_high < check.ci_high  # the floor, not the set-ups' spread, is the width
    assert check.truth == 4.0 and check.covered and "counting resolution" in check.rule

"""Tests of storagebench.stats.verdict and of compare's design keys (unit, blocks, factors), on seed 002's
published vSAN stripe table (DiskSPD and FIO on the same configurations, 12 VM counts of one sweep)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from storagebench.errors import StatsError
from storagebench.published import load_published
from storagebench.stats import compare, interaction, verdict
from storagebench.stats.verdicts import NO_CI_VERDICT, verdict_words

UNIT = "VM-count step of one sweep (a block; one published value per cell, nothing was repeated)"


@pytest.fixture(scope="module")
def stripe() -> pd.DataFrame:
    return load_published("vsan_stripe")


@pytest.fixture(scope="module")
def log_ratios(stripe) -> pd.DataFrame:
    """log(IOPS at stripe 4 / stripe 1) per (pattern, vms, tool), computed here straight from the table."""
    wide = stripe.pivot_table(index=["pattern", "vms", "source_tool"], columns="stripe_width", values="iops")
    return np.log(wide[4] / wide[1]).unstack("source_tool")


def test_combined_over_tools_is_paired_on_vm_count_with_tools_averaged(stripe, log_ratios):
    t = compare(stripe, "stripe_width", 1, "iops", by="pattern", pair_on="vms", blocks="vms", factors="source_tool")
    assert t.averaged == ("source_tool",) and len(t) == 6
    v = verdict(t, unit=UNIT, blocks="vms", factors="source_tool", up="faster", down="slower").set_index("pattern")
    for pattern, lr in log_ratios.groupby(level="pattern"):
        block = lr.mean(axis=1).to_numpy()  # the tools averaged within each VM count (log scale)
        tt = st.ttest_1samp(block, 0.0)
        ci = tt.confidence_interval(0.95)
        row = v.loc[pattern]
        assert row["n"] == "12" and len(block) == 12
        assert row["ratio"] == pytest.approx(math.exp(block.mean()), rel=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((math.exp(ci.low), math.exp(ci.high)), rel=1e-12)
        assert row["p"] == pytest.approx(tt.pvalue, rel=1e-10)
    assert v["p_adjusted"].tolist() == pytest.approx(
        list(np.minimum(1, pd.Series(v["p"]).pipe(lambda p: _holm(p.to_numpy())))))
    assert v.loc["1M seq read", "verdict"] == "faster"
    assert (v["family"].str.contains("Holm") & v["family"].str.contains("6 estimable")).all()
    text = v.loc["1M seq read", "text"]
    for words in ("ratio of geometric means", "95% CI", "n = 12 pairs", f"experimental unit: {UNIT}",
                  "source_tool averaged over", "blocks (not replicates): vms", "alpha = 0.05", "faster"):
        assert words in text, words


def _holm(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p)
    m = len(p)
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1)
    return out


def test_per_tool_and_the_tool_by_stripe_interaction(stripe, log_ratios):
    per = compare(stripe, "stripe_width", 1, "iops", by=["pattern", "source_tool"], pair_on="vms", blocks="vms",
                  factors="source_tool")
    v = verdict(per, unit=UNIT, blocks="vms", factors="source_tool").set_index(["pattern", "source_tool"])
    assert len(v) == 12 and (v["n"] == "12").all() and v["family"].str.contains("12 estimable").all()
    for (pattern, tool), row in v.iterrows():
        lr = log_ratios.loc[pattern, tool].to_numpy()
        assert row["ratio"] == pytest.approx(math.exp(lr.mean()), rel=1e-12)
        assert row["p"] == pytest.approx(st.ttest_1samp(lr, 0.0).pvalue, rel=1e-10)
    inter = interaction(stripe, "stripe_width", 1, "iops", modifier="source_tool", modifier_baseline="DiskSPD",
                        by="pattern", pair_on="vms", blocks="vms")
    vi = verdict(inter, unit=UNIT, blocks="vms", factors="source_tool", up="FIO sees a larger stripe effect",
                 down="FIO sees a smaller stripe effect").set_index("pattern")
    for pattern, lr in log_ratios.groupby(level="pattern"):
        d = (lr["FIO"] - lr["DiskSPD"]).to_numpy()
        assert vi.loc[pattern, "ratio"] == pytest.approx(math.exp(d.mean()), rel=1e-12)
        assert vi.loc[pattern, "p"] == pytest.approx(st.ttest_1samp(d, 0.0).pvalue, rel=1e-10)
    # the interaction is there: the stripe effect differs between the tools in 4 of 6 patterns (p < 0.05)
    assert int((vi["p"] < 0.05).sum()) == 4
    assert (vi.loc[["1M seq read", "8k random 70%read/30%write"], "verdict"] == "FIO sees a larger stripe effect").all()


def test_a_block_or_factor_counted_as_replication_is_refused(stripe):
    # the notebook's old analysis: 24 "pairs" = 12 VM counts x 2 tools, the tool treated as replication
    old = compare(stripe, "stripe_width", 1, "iops", by="pattern", pair_on=["vms", "source_tool"])
    with pytest.raises(StatsError, match="'source_tool' is a factor, not a replicate, but the comparison paired on it"):
        verdict(old, unit=UNIT, blocks="vms", factors="source_tool")
    # per pattern, unpaired: the direction check is per group now, so compare runs ...
    pooled = compare(stripe, "stripe_width", 1, "iops", by=["pattern"])
    assert len(pooled) == 6 and set(pooled.to_frame()["n_baseline"]) == {24}
    # ... but the 24 rows per arm are 12 sweep steps x 2 tools, and a verdict on them is refused
    with pytest.raises(StatsError, match="'vms' is a block, not a replicate"):
        verdict(pooled, unit=UNIT, blocks="vms", factors="source_tool")
    # compare refuses the same when told up front
    with pytest.raises(StatsError, match="'vms' is a block .* pooled as replicates"):
        compare(stripe, "stripe_width", 1, "iops", by="pattern", blocks="vms")
    with pytest.raises(StatsError, match="'source_tool' is a factor, not a replicate"):
        compare(stripe, "stripe_width", 1, "iops", by="pattern", pair_on=["vms", "source_tool"],
                factors="source_tool")
    with pytest.raises(StatsError, match="name the unit it is averaged within"):
        compare(stripe, "stripe_width", 1, "iops", by=["pattern", "vms"], factors="source_tool")
    unbalanced = stripe[~((stripe.vms == 3) & (stripe.source_tool == "FIO"))]
    with pytest.raises(StatsError, match="do not all hold the same levels of \\['source_tool'\\]"):
        compare(unbalanced, "stripe_width", 1, "iops", by="pattern", pair_on="vms", factors="source_tool")
    with pytest.raises(StatsError, match="unit must name the experimental unit"):
        verdict(pooled, unit=" ")
    with pytest.raises(StatsError, match="must be a ComparisonTable or a Comparison"):
        verdict(pooled.to_frame(), unit=UNIT)
    # interaction needs one row per cell and both levels in every block, and says where it is not so
    with pytest.raises(StatsError, match=r"cell \{'source_tool': 'DiskSPD', 'vms': 1, 'stripe_width': 1\} holds 6 rows"):
        interaction(stripe, "stripe_width", 1, "iops", modifier="source_tool", modifier_baseline="DiskSPD",
                    pair_on="vms")
    gap = stripe[~((stripe.vms == 2) & (stripe.stripe_width == 4) & (stripe.source_tool == "FIO"))]
    with pytest.raises(StatsError, match=r"missing in cell \{'pattern': '1M seq read', 'source_tool': 'FIO', 'vms': 2\}"):
        interaction(gap, "stripe_width", 1, "iops", modifier="source_tool", modifier_baseline="DiskSPD",
                    by="pattern", pair_on="vms")
    with pytest.raises(StatsError, match="interaction needs blocks"):
        interaction(stripe, "stripe_width", 1, "iops", modifier="source_tool", modifier_baseline="DiskSPD",
                    by="pattern", pair_on=[])
    # a row works as well as a table
    one = verdict(pooled[0], unit="run")
    assert len(one) == 1 and one["n"].iloc[0] == "24/24"


def test_unit_averages_rows_of_one_unit_first(rng):
    """Runs within set-ups: with unit="setup" the set-up is the experimental unit; n counts set-ups and the
    ratio is that of the geometric means of the set-up geometric means."""
    rows = []
    for fs, gain in (("ext4", 1.0), ("xfs", 1.05)):
        for setup in range(4):
            u = rng.normal(0, 0.05)
            for rep in range(3):
                rows.append(dict(fs=fs, setup=f"{fs}-{setup}", rep=rep,
                                 iops=10_000 * gain * math.exp(u + rng.normal(0, 0.01))))
    df = pd.DataFrame(rows)
    t = compare(df, "fs", "ext4", "iops", unit="setup")
    r = t[0]
    means = df.groupby(["fs", "setup"])["iops"].apply(lambda v: np.log(v).mean())
    tt = st.ttest_ind(means["xfs"], means["ext4"], equal_var=False)
    assert (r.n_baseline, r.n_other) == (4, 4)
    assert r.ratio == pytest.approx(math.exp(means["xfs"].mean() - means["ext4"].mean()), rel=1e-12)
    assert r.p == pytest.approx(tt.pvalue, rel=1e-10)
    assert "experimental unit: one setup" in str(r.design)
    # pooling the 12 runs as replicates gives a much narrower (wrong) CI
    naive = compare(df, "fs", "ext4", "iops")[0]
    assert naive.n_baseline == 12 and (naive.ci_high / naive.ci_low) < (r.ci_high / r.ci_low)
    v = verdict(t, unit="set-up (file system built afresh)", blocks=None)
    assert "n = 4 vs 4 units" in v["text"].iloc[0]


def test_verdict_rule_and_confidence_come_from_the_analysis(stripe):
    words = verdict_words([1.1, np.nan, 1.02, 0.8, 0.9], [1.3, np.nan, 1.2, 0.9, 1.1],
                          [0.01, 0.001, 0.2, 0.02, 0.01], 0.05, "up", "down")
    assert list(words) == ["up", NO_CI_VERDICT, "no difference shown", "down", "no difference shown"]
    t = compare(stripe, "stripe_width", 1, "iops", by="pattern", pair_on="vms", blocks="vms", factors="source_tool",
                confidence=0.9)
    v = verdict(t, unit=UNIT, blocks="vms", factors="source_tool")
    assert v["text"].str.contains("90% CI").all() and not v["text"].str.contains("95%").any()
    assert v["text"].str.contains("alpha = 0.1:").all() and v["alpha"].tolist() == pytest.approx([0.1] * 6)
    # a CI excluding 1 whose family-adjusted p is not below alpha: no direction, and the text says why
    caveat = v[(v["verdict"] == "no difference shown") & ((v["ci_low"] > 1) | (v["ci_high"] < 1))]
    assert len(caveat) >= 1 and caveat["text"].str.contains("unadjusted CI excludes 1").all()
    # TOST shows up in the text when a margin was asked
    eq = compare(stripe, "stripe_width", 1, "iops", by="pattern", pair_on="vms", factors="source_tool", margin=0.5)
    assert verdict(eq, unit=UNIT)["text"].str.contains(r"equivalence within \[0.5, 1.5\]").all()


# ---- independent check in R, and the sentences and Methods table built from the same tables --------------


@pytest.fixture(scope="module")
def r_vsan() -> dict:
    """R's t.test on the per-VM-count log ratios (tests/fixtures/stats/r_reference.R, key vsan_stripe)."""
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "fixtures" / "stats" / "r_reference.json").read_text())["vsan_stripe"]


def _design(stripe):
    d = dict(pair_on="vms", blocks="vms")
    return {
        "combined": compare(stripe, "stripe_width", 1, "iops", by=["pattern", "direction"], factors="source_tool", **d),
        "per_tool": compare(stripe, "stripe_width", 1, "iops", by=["pattern", "direction", "source_tool"], **d),
        "interaction": interaction(stripe, "stripe_width", 1, "iops", modifier="source_tool",
                                   modifier_baseline="DiskSPD", by=["pattern", "direction"], **d),
        "average": compare(stripe, "stripe_width", 1, "iops", factors=["source_tool", "pattern", "direction"], **d),
    }


def test_vsan_stripe_at_the_right_unit_agrees_with_r(stripe, r_vsan):
    """The vsan_stripe write-up's numbers (n = 12 VM-count blocks; tools averaged, per tool, interaction) equal R's."""
    tables = _design(stripe)
    for name, keys in (("combined", ["pattern"]), ("per_tool", ["pattern", "tool"]), ("interaction", ["pattern"])):
        frame = tables[name].to_frame().rename(columns={"source_tool": "tool"}).set_index(keys)
        assert len(frame) == len(r_vsan[name])
        for ref in r_vsan[name]:
            row = frame.loc[tuple(ref[k] for k in keys) if len(keys) > 1 else ref[keys[0]]]
            assert row["n_baseline"] == ref["n"] == 12
            assert (row["ratio"], row["ci_low"], row["ci_high"]) == pytest.approx(
                (ref["ratio"], *ref["ci_ratio"]), rel=1e-12), (name, ref)
            assert (row["p"], row["p_adjusted"]) == pytest.approx((ref["p"], ref["p_holm"]), rel=1e-9), (name, ref)
    avg = tables["average"][0]
    ref = r_vsan["average"]
    assert (avg.n_baseline, avg.ratio, avg.ci_low, avg.ci_high, avg.p) == pytest.approx(
        (ref["n"], ref["ratio"], *ref["ci_ratio"], ref["p"]), rel=1e-9)
    # the figures, to the digits it states them
    c = tables["combined"].to_frame().set_index("pattern")
    assert c.loc["1M seq read", ["ratio", "ci_low", "ci_high"]].round(3).tolist() == [1.163, 1.096, 1.234]
    assert round(c.loc["1M seq read", "p_adjusted"], 5) == 0.00098
    assert round(c.loc["64k random read", "p"], 3) == 0.030 and round(c.loc["64k random read", "p_adjusted"], 2) == 0.14
    assert c.loc["8k random 70%read/30%write", ["ratio", "ci_low", "ci_high"]].round(3).tolist() == [0.887, 0.798, 0.985]


@pytest.mark.slow
def test_verdict_summary_sorts_the_groups_by_verdict_with_their_numbers(stripe):
    from storagebench.stats import verdict_summary

    t = _design(stripe)
    unit = "VM-count step of one sweep"
    f = verdict_summary(t["combined"], unit=unit, blocks="vms", factors="source_tool", name_by="pattern",
                        label="Both tools combined")
    assert len(f) == 1
    s = f[0].sentence
    assert s.startswith("Both tools combined: IOPS at stripe_width 4 / 1 is higher for 1M seq read (1.16; 95% CI "
                        "1.10 to 1.23; adjusted p = 9.8e-04)")
    # unadjusted CI excludes 1 but the Holm-adjusted p does not reach alpha: listed apart, with the adjusted p
    assert ("no difference shown after the adjustment (the unadjusted CI excludes 1) for 64k random read (1.09; "
            "95% CI 1.01 to 1.18; adjusted p = 0.141) and 8k random 70%read/30%write") in s
    assert "no difference shown for 4k random read (1.04; 95% CI 0.955 to 1.13), 4k random write" in s
    assert f[0].n == 12 and f[0].unit_of_replication == f"pairs; experimental unit: {unit}"
    assert "p adjusted by Holm over 6 comparisons at alpha = 0.05" in f[0].method
    assert "ratio of geometric means" in f[0].method and "95% CIs" in f[0].method
    per = verdict_summary(t["per_tool"], unit=unit, blocks="vms", factors="source_tool", name_by="pattern",
                          per="source_tool")
    assert [x.key for x in per] == ["iops:summary:DiskSPD", "iops:summary:FIO"]
    assert "lower for 8k random 70%read/30%write (0.829; 95% CI 0.753 to 0.912" in per[0].sentence
    assert "8k random 70%read/30%write (0.949; 95% CI 0.835 to 1.08)" in per[1].sentence
    assert all("Holm over 12 comparisons" in x.method for x in per)
    avg = verdict_summary(t["average"], unit=unit, blocks="vms", factors="source_tool")
    assert "a single comparison (nothing to adjust for)" in avg[0].method
    assert "no difference shown for all (1.02; 95% CI 0.954 to 1.09)" in avg[0].sentence
    # the refusals of verdict apply: the old analysis paired on the tool
    old = compare(stripe, "stripe_width", 1, "iops", by="pattern", pair_on=["vms", "source_tool"])
    with pytest.raises(StatsError, match="paired on it"):
        verdict_summary(old, unit=unit, blocks="vms", factors="source_tool")
    with pytest.raises(StatsError, match="per='tool' must be one of the comparison's by columns"):
        verdict_summary(t["combined"], unit=unit, per="tool")
    with pytest.raises(StatsError, match="must be a ComparisonTable"):
        verdict_summary(t["combined"].to_frame(), unit=unit)


@pytest.mark.slow
def test_methods_table_says_what_each_comparison_did(stripe):
    from storagebench.stats import methods_table

    t = _design(stripe)
    m = methods_table(t, units={k: f"unit of {k}" for k in t}).set_index("analysis")
    assert list(m.index) == ["combined", "per_tool", "interaction", "average"]
    assert (m["n"] == "12").all() and (m["confidence"] == 0.95).all() and m["alpha"].tolist() == pytest.approx([0.05] * 4)
    assert m.loc["combined", "experimental unit"] == "unit of combined"
    assert "source_tool averaged over within each unit" in m.loc["combined", "design"]
    assert "12 estimable" in m.loc["per_tool", "family"] and "6 estimable" in m.loc["interaction", "family"]
    assert m.loc["average", "family"].startswith("a single comparison")
    assert m.loc["interaction", "compared"].startswith("iops_ratio: source_tool FIO vs DiskSPD")
    with pytest.raises(StatsError, match="no experimental unit given for analysis 'per_tool'"):
        methods_table(t, units={"combined": "u"})

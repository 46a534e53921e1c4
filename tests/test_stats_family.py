"""One multiplicity family per question of a write-up (issue 20 item 5): ``stats.comparison.adjust_family``.

Unit: the VM-count step of seed 002's one published sweep (a block; 12 per comparison). Estimand: the ratio of
geometric means stripe 4 / stripe 1 (paired on the VM counts), per pattern (tools averaged), per pattern and tool,
the tool x stripe ratio of ratios, and all averaged. Family: the write-up's stripe question, the 25 tests of those
four tables (Holm). Gold: R's ``p.adjust(method = "holm")`` over R's own 25 raw p
(tests/fixtures/stats/r_family_reference.R). Real data: ``data/published/vsan_stripe.csv`` and the committed
quick-variant consolidation results (tests/fixtures/testbed_quick).
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES

from storagebench.errors import StatsError
from storagebench.published import load_published
from storagebench.stats import compare, interaction, verdict
from storagebench.stats.comparison import adjust_family

QUESTION = "Does a wider stripe give more IOPS on vSAN, by either tool?"


@pytest.fixture(scope="module")
def stripe_tables():
    stripe = load_published("vsan_stripe")
    d = dict(pair_on="vms", blocks="vms")
    by = ["pattern", "direction"]
    return {
        "combined": compare(stripe, "stripe_width", 1, "iops", by=by, factors="source_tool", **d),
        "per tool": compare(stripe, "stripe_width", 1, "iops", by=[*by, "source_tool"], **d),
        "interaction": interaction(stripe, "stripe_width", 1, "iops", modifier="source_tool",
                                   modifier_baseline="DiskSPD", by=by, **d),
        "average": compare(stripe, "stripe_width", 1, "iops", factors=["source_tool", *by], **d),
    }


@pytest.fixture(scope="module")
def r_family():
    return json.loads((FIXTURES / "stats" / "r_family_reference.json").read_text())


def test_the_stripe_question_is_one_family_of_25_as_r_adjusts_it(stripe_tables, r_family):
    fam = adjust_family(stripe_tables, QUESTION)
    assert r_family["m"] == 25 and r_family["question"] == QUESTION
    for name, key in (("combined", "combined"), ("per tool", "per_tool"), ("interaction", "interaction")):
        got = fam[name]
        ref = r_family[key]
        by_r = dict(zip(zip(ref["pattern"], ref["tool"], strict=True), ref["p_holm_question"], strict=True)) \
            if key == "per_tool" else dict(zip(ref["pattern"], ref["p_holm_question"], strict=True))
        for r, before in zip(got.rows, stripe_tables[name].rows, strict=True):
            g = dict(r.group)
            k = (g["pattern"], g["source_tool"]) if key == "per_tool" else g["pattern"]
            assert r.p_adjusted == pytest.approx(by_r[k], rel=1e-9), (name, k)
            # the raw p, the ratio and its CI are untouched; the adjusted p only grows with the family
            assert (r.p, r.ratio, r.ci_low, r.ci_high) == (before.p, before.ratio, before.ci_low, before.ci_high)
            assert r.p_adjusted >= before.p_adjusted - 1e-15
    assert fam["average"][0].p_adjusted == pytest.approx(r_family["average"]["p_holm_question"], rel=1e-9)


def test_the_audit_case_the_8k_tool_x_stripe_verdict_is_adjusted_away(stripe_tables):
    """Holm over the interaction table alone (6): 8k random 70/30 at p_adj .019, "larger with FIO". Over the
    question's 25 tests: .077, no difference shown, and the sentence says the unadjusted CI excludes 1."""
    key = "8k random 70%read/30%write"
    before = verdict(stripe_tables["interaction"], unit="VM-count step", blocks="vms").set_index("pattern")
    fam = adjust_family(stripe_tables, QUESTION)
    after = verdict(fam["interaction"], unit="VM-count step", blocks="vms").set_index("pattern")
    assert round(before.loc[key, "p_adjusted"], 3) == 0.019 and before.loc[key, "verdict"] == "higher"
    assert round(after.loc[key, "p_adjusted"], 3) == 0.077 and after.loc[key, "verdict"] == "no difference shown"
    assert "the unadjusted CI excludes 1, the family-adjusted p does not" in after.loc[key, "text"]
    fam_words = after.loc[key, "family"]
    assert fam_words.startswith("Holm (1979) step-down over the 25 tests of this question")
    assert "combined 6, per tool 12, interaction 6, average 1" in fam_words and QUESTION in fam_words
    assert "the 95% CIs are per comparison, not adjusted for the 25 tests" in fam_words and "99.8%" in fam_words
    assert fam["interaction"].family == fam_words and "25 comparison(s)" in fam["interaction"][0].method
    assert fam["interaction"][0].method.count("adjustment of p over") == 1  # replaced, not appended


def test_a_one_table_question_keeps_its_p_and_says_it_is_the_question(stripe_tables):
    fam = adjust_family({"combined": stripe_tables["combined"]}, QUESTION)
    for a, b in zip(fam["combined"].rows, stripe_tables["combined"].rows, strict=True):
        assert a.p_adjusted == pytest.approx(b.p_adjusted, rel=1e-12)
    assert "over the 6 tests of this question" in fam["combined"].family
    one = adjust_family({"average": stripe_tables["average"]}, QUESTION)
    assert one["average"].family.startswith("a single test of this question") and "nothing to adjust" in \
        one["average"].family


def test_bad_families_are_refused(stripe_tables):
    with pytest.raises(StatsError, match="at least one table"):
        adjust_family({}, QUESTION)
    with pytest.raises(StatsError, match="question must be"):
        adjust_family(stripe_tables, "  ")
    with pytest.raises(StatsError, match=r"tables\['x'\] must be a ComparisonTable"):
        adjust_family({"x": [1, 2]}, QUESTION)
    bh = compare(load_published("vsan_stripe"), "stripe_width", 1, "iops", by=["pattern", "direction"],
                 factors="source_tool", pair_on="vms", blocks="vms", adjust="bh")
    with pytest.raises(StatsError, match="different methods"):
        adjust_family({"holm": stripe_tables["combined"], "bh": bh}, QUESTION)
    assert "Benjamini & Hochberg" in adjust_family({"a": stripe_tables["combined"], "b": bh}, QUESTION,
                                                   method="bh")["a"].family
    with pytest.raises(StatsError, match="method must be one of"):
        adjust_family(stripe_tables, QUESTION, method="sidak?")


def test_consolidation_is_one_family_over_its_metrics_and_workloads(tmp_path):
    """Seed 003's question (IOPS and tail latency, both workloads) drew verdicts from 3 families of 2 (one per
    metric); now one family of 6, on the committed quick-variant results."""
    from storagebench import studies

    shutil.copytree(FIXTURES / "testbed_quick" / "consolidation", tmp_path / "c",
                    ignore=shutil.ignore_patterns("README.md"))
    res = studies.analyse("consolidation", tmp_path / "c")
    v = res.verdicts
    assert len(v) == 6 and v["family"].nunique() == 1
    fam = v["family"].iloc[0]
    assert fam.startswith("Holm (1979) step-down over the 6 tests of this question")
    assert studies.get("consolidation").question in fam
    assert "IOPS 2" in fam and "not adjusted for the 6 tests" in fam
    from statsmodels.stats.multitest import multipletests

    assert v["p_adjusted"].tolist() == pytest.approx(multipletests(v["p"], method="holm")[1].tolist(), rel=1e-12)
    assert all("family: " + fam in f.method for f in res.findings if f.kind == "verdict")

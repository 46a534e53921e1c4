"""Tests of storagebench.stats.claims: seed 002's claims, read from its metadata, checked against its tables.

Data: data/published/vsan_stripe.csv and vsan_qd_threads.csv (seed 002, StarWind) with their sidecars'
``claim_checks``; every verdict is checked against the rule applied here to the comparison's own rows.
"""

from __future__ import annotations

import pandas as pd
import pytest

from storagebench.errors import StatsError
from storagebench.published import load_published, published_metadata
from storagebench.stats import (
    claim_checks,
    claim_findings,
    claim_verdicts,
    compare,
    parameter_claim_verdicts,
    recommend_parameters,
)
from storagebench.stats.claims import ParameterClaim, RatioClaim

UNIT = "VM-count step of one sweep (a block), both tools averaged within it"


@pytest.fixture(scope="module")
def stripe() -> pd.DataFrame:
    return load_published("vsan_stripe")


@pytest.fixture(scope="module")
def tables(stripe):
    d = dict(pair_on="vms", blocks="vms")
    return (compare(stripe, "stripe_width", 1, "iops", by=["pattern", "direction"], factors="source_tool", **d),
            compare(stripe, "stripe_width", 1, "iops", factors=["source_tool", "pattern", "direction"], **d))


def test_claim_checks_come_from_the_sources_metadata():
    meta = published_metadata("vsan_stripe")
    claims = claim_checks(meta)
    assert [type(c) for c in claims] == [RatioClaim] * 3
    assert [c.claim for c in claims] == meta["claims"]  # each quoted claim, in order
    assert [(c.expect, c.over) for c in claims] == [("higher", "any"), ("higher", "every"), ("lower", "average")]
    assert claims[1].where == {"direction": "write"} and claims[1].min_ratio == 1.2 and claims[1].threshold == 1.2
    (qd,) = claim_checks(published_metadata("vsan_qd_threads"))
    assert isinstance(qd, ParameterClaim) and (qd.numjobs, qd.iodepth, qd.metric) == (4, 16, "iops")
    assert claim_checks(published_metadata("hdd_iops")) == ()  # no claim_checks: nothing to check


def test_bad_claim_metadata_is_refused_with_what_is_allowed():
    meta = published_metadata("vsan_stripe")
    good = meta["claim_checks"][0]
    for bad, match in (
        ({**good, "direcion": "write"}, r"unknown key\(s\) \['direcion'\]; allowed: \['baseline', 'claim'"),
        ({**good, "claim": "stripes are magic"}, "is not one of the quoted claims"),
        ({**good, "expect": "faster"}, r"expect must be one of \['higher', 'lower'\], got 'faster'"),
        ({**good, "over": "most"}, r"over must be one of \['any', 'every', 'average'\]"),
        ({**good, "min_ratio": 0.8}, "min_ratio must be a number >= 1"),
        ({**good, "kind": "vibes"}, "kind must be 'ratio' or 'parameters'"),
        ({k: v for k, v in good.items() if k != "metric"}, "missing 1 required positional argument: 'metric'"),
        ({"claim": good["claim"], "kind": "parameters", "numjobs": 0, "iodepth": 16}, "numjobs must be a positive"),
    ):
        with pytest.raises(StatsError, match=match):
            claim_checks({**meta, "claim_checks": [bad]})
    with pytest.raises(StatsError, match="claim_checks must be a list of mappings"):
        claim_checks({**meta, "claim_checks": "all of them"})
    with pytest.raises(StatsError, match="metadata must be a mapping"):
        claim_checks(["claims"])


def _rule(r, claim) -> str:
    """The verdict rule, written out again here for one comparison row."""
    sig = r.p_adjusted < r.alpha
    t = claim.threshold
    if claim.expect == "higher":
        if sig and r.ci_low > max(1, t):
            return "holds"
        if (sig and r.ci_high < 1) or (claim.min_ratio and r.ci_high < t):
            return "contradicted"
    else:
        if sig and r.ci_high < min(1, t):
            return "holds"
        if sig and r.ci_low > 1:
            return "contradicted"
    return "not shown"


def test_each_claims_verdict_is_the_rule_applied_to_its_groups(tables):
    combined, average = tables
    claims = claim_checks(published_metadata("vsan_stripe"))
    v = claim_verdicts(claims, combined, unit=UNIT, average=average, blocks="vms", factors="source_tool",
                       name_by="pattern")
    assert len(v) == 3 and (v["n"] == 12).all() and (v["unit"] == UNIT).all()
    per_group = {dict(r.group)["pattern"]: r for r in combined}
    # "can give you some more IOPS": holds because 1M seq read does (Holm-adjusted p 0.00098, CI 1.10-1.23)
    some = v.iloc[0]
    expected = {p: _rule(r, claims[0]) for p, r in per_group.items()}
    assert some["verdict"] == "holds" and some["holds_for"] == "1M seq read"
    assert [p for p, s in expected.items() if s == "holds"] == ["1M seq read"]
    assert some["not_shown_for"].split("; ") == [p for p, s in expected.items() if s == "not shown"]
    # "a game-changer for writing", read as >= +20% on every write pattern: both write CIs end below 1.2
    game = v.iloc[1]
    writes = {p: r for p, r in per_group.items() if dict(r.group)["direction"] == "write"}
    assert sorted(writes) == ["4k random write", "64k random write"]
    assert all(r.ci_high < 1.2 for r in writes.values()) and game["verdict"] == "contradicted"
    assert game["scope"] == "4k random write; 64k random write" and "min_ratio" not in game["rule"]
    assert "above 1.2 (the claimed size)" in game["rule"]
    # Automatic Striping (stripe 1) better than stripe 4 on average: the average's CI spans 1
    auto = v.iloc[2]
    a = average[0]
    assert a.ci_low < 1 < a.ci_high and auto["verdict"] == "not shown" and auto["scope"] == "averaged over the groups"
    assert f"{a.ratio:.3g}" in auto["evidence"] and auto["family"].startswith("a single comparison")


def test_claim_verdicts_use_the_adjusted_p_and_refuse_a_mismatched_table(stripe, tables):
    combined, average = tables
    per_tool = compare(stripe, "stripe_width", 1, "iops", by=["pattern", "direction", "source_tool"], pair_on="vms",
                       blocks="vms")
    mixed = "8k random 70%read/30%write"
    fewer = RatioClaim("stripe 4 is slower on the mix", factor="stripe_width", level=4, baseline=1, metric="iops",
                       expect="lower", over="every", where={"pattern": mixed})
    v = claim_verdicts([fewer], per_tool, unit="VM-count step, one tool", blocks="vms", factors="source_tool",
                       name_by="source_tool").iloc[0]
    # DiskSPD: 0.829 [0.753, 0.912], Holm p 0.012 -> holds; FIO: 0.949 [0.835, 1.08] -> not shown; so not for every tool
    assert (v["holds_for"], v["not_shown_for"], v["verdict"]) == ("DiskSPD", "FIO", "not shown")
    anyone = RatioClaim("stripe 4 is slower on the mix for a tool", factor="stripe_width", level=4, baseline=1,
                        metric="iops", expect="lower", over="any", where={"pattern": mixed})
    assert claim_verdicts([anyone], per_tool, unit="u", blocks="vms", factors="source_tool").iloc[0]["verdict"] == "holds"
    # the same claim on the combined table: the unadjusted CI (0.798-0.985) excludes 1, the Holm p 0.14 does not
    on_combined = RatioClaim("x", factor="stripe_width", level=4, baseline=1, metric="iops", expect="lower",
                             where={"pattern": mixed})
    assert claim_verdicts([on_combined], combined, unit="u", blocks="vms", factors="source_tool")["verdict"].item() \
        == "not shown"
    with pytest.raises(StatsError, match="pass average="):
        claim_verdicts([RatioClaim("y", "stripe_width", 4, 1, "iops", over="average")], combined, unit="u",
                       blocks="vms", factors="source_tool")
    with pytest.raises(StatsError, match="average= must be a comparison without groups"):
        claim_verdicts([RatioClaim("y", "stripe_width", 4, 1, "iops", over="average")], combined, unit="u",
                       average=combined, blocks="vms", factors="source_tool")
    with pytest.raises(StatsError, match="is about metric 'bw_bytes_per_s'; the comparison's metric is 'iops'"):
        claim_verdicts([RatioClaim("z", "stripe_width", 4, 1, "bw_bytes_per_s")], combined, unit="u")
    with pytest.raises(StatsError, match=r"where names \['tool'\], which are not by-columns"):
        claim_verdicts([RatioClaim("z", "stripe_width", 4, 1, "iops", where={"tool": "FIO"})], combined, unit="u",
                       blocks="vms", factors="source_tool")
    with pytest.raises(StatsError, match="has no row for stripe_width=8"):
        claim_verdicts([RatioClaim("z", "stripe_width", 8, 1, "iops")], combined, unit="u", blocks="vms",
                       factors="source_tool")
    # the refusals of verdict: a claim checked on the pseudo-replicated table is refused
    old = compare(stripe, "stripe_width", 1, "iops", by=["pattern", "direction"], pair_on=["vms", "source_tool"])
    with pytest.raises(StatsError, match="'source_tool' is a factor, not a replicate"):
        claim_verdicts(claim_checks(published_metadata("vsan_stripe"))[:1], old, unit="u", blocks="vms",
                       factors="source_tool")


def test_parameter_claim_against_each_tools_plateau():
    sweep = load_published("vsan_qd_threads")
    claims = claim_checks(published_metadata("vsan_qd_threads"))
    v = parameter_claim_verdicts(claims, sweep, by="source_tool").set_index("source_tool")
    for tool, part in sweep.groupby("source_tool"):
        rec = recommend_parameters(part, "iops", fraction=0.95)
        row = v.loc[tool]
        assert (row["recommended_numjobs"], row["recommended_iodepth"]) == (rec.numjobs, rec.iodepth)
        cell = rec.table.set_index(["numjobs", "iodepth"]).loc[(4, 16)]
        assert row["claimed_share_of_best"] == pytest.approx(cell["share_of_max"])
        assert row["cells"] == 32 and row["runs_per_cell"] == 1
    # DiskSPD: threads=4 x QD16 (64 outstanding) is on the plateau and no cell reaches it with fewer
    assert v.loc["DiskSPD", "verdict"] == "holds" and v.loc["DiskSPD", "recommended"] == "numjobs=1, iodepth=64"
    # FIO: on the plateau (96.4% of the best) but numjobs=2 x iodepth=16 gets there with half the outstanding I/Os
    assert v.loc["FIO", "verdict"] == "holds loosely" and v.loc["FIO", "recommended"] == "numjobs=2, iodepth=16"
    assert "32 instead of 64 outstanding I/Os" in v.loc["FIO", "evidence"]
    low = ParameterClaim("one thread at QD1 is best", numjobs=1, iodepth=1)
    absent = ParameterClaim("three threads", numjobs=3, iodepth=16)
    w = parameter_claim_verdicts([low, absent], sweep, by="source_tool")
    assert w.loc[w["claim"] == low.claim, "verdict"].tolist() == ["contradicted", "contradicted"]
    assert w.loc[w["claim"] == absent.claim, "verdict"].tolist() == ["no verdict", "no verdict"]
    assert w.loc[w["claim"] == absent.claim, "evidence"].str.contains("did not measure numjobs=3").all()
    with pytest.raises(StatsError, match="fraction must be in"):
        parameter_claim_verdicts(claims, sweep, by="source_tool", fraction=1.5)


def test_claim_findings_say_each_verdict_with_the_quoted_claim(tables):
    combined, average = tables
    stripe_claims = claim_checks(published_metadata("vsan_stripe"))
    v = claim_verdicts(stripe_claims, combined, unit=UNIT, average=average, blocks="vms", factors="source_tool",
                       name_by="pattern")
    p = parameter_claim_verdicts(claim_checks(published_metadata("vsan_qd_threads")), load_published("vsan_qd_threads"),
                                 by="source_tool")
    f = claim_findings(v, p, by="source_tool")
    assert [x.key for x in f] == ["claim:0", "claim:1", "claim:2", "claim:parameters:0"]
    assert f[0].sentence.startswith("The article's claim \u201cswitching to a higher number of disk stripes per object "
                                    "can give you some more IOPS\u201d (read as: stripe width 4 gives more IOPS")
    assert "): holds; it holds for 1M seq read; it is not shown for 4k random read," in f[0].sentence
    assert "contradicted; it is contradicted for 4k random write and 64k random write." in f[1].sentence
    assert "not shown, 1.02 (95% CI 0.954 to 1.09; adjusted p = 0.555)" in f[2].sentence
    assert "DiskSPD: holds (" in f[3].sentence and "FIO: holds loosely (" in f[3].sentence
    assert f[0].n == 12 and UNIT in f[0].unit_of_replication and "alpha = 0.05" in f[0].method
    assert f[3].unit_of_replication == "sweep cells, 1 value(s) each; no CI"


def test_a_parameter_cell_is_never_called_equivalent_without_an_equivalence_test():
    """Seed 002's queue-depth x threads sweep, DiskSPD: the claimed cell numjobs=4, iodepth=16 and the
    recommended numjobs=1, iodepth=64 are both on the plateau at 64 outstanding I/Os. The plateau rule
    (>= 95% of the best cell, one published value per cell, no CI) does not test equivalence: the evidence
    says both are on the plateau and that no equivalence test was made, never "equivalent"."""
    p = parameter_claim_verdicts(claim_checks(published_metadata("vsan_qd_threads")), load_published("vsan_qd_threads"),
                                 by="source_tool").set_index("source_tool")
    ev = p.loc["DiskSPD", "evidence"]
    assert p.loc["DiskSPD", "verdict"] == "holds" and "numjobs=1, iodepth=64, the recommended cell" in ev
    assert "no equivalence test was made" in ev and "equivalent" not in ev.replace("equivalence test", "")
    assert not p["evidence"].str.contains("equivalent").any()

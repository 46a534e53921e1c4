"""Cross-tool analysis (issue 12 item 3, library half): compare with the tool as the factor, Bland-Altman.

Data: seed 002's published DiskSPD and FIO columns (data/published/vsan_stripe.csv), and the captured
DiskSPD fixtures against real 1-s fio runs of the same configurations on a file in tmp_path (different
machines, so only the mechanics are checked there, not the ratios).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

from storagebench.errors import StatsError
from storagebench.ingest import ingest_paths
from storagebench.published import load_published
from storagebench.stats import bland_altman, compare, cross_tool


def test_seed002_tables_equal_compare_and_bland_altman_done_by_hand():
    stripe = load_published("vsan_stripe")
    ct = cross_tool(stripe, tool_col="source_tool", baseline="DiskSPD", metric="iops",
                    match_on=["stripe_width", "vms"], by="pattern")
    assert ct.paired and ct.unmatched.empty and len(ct.pairs) == 144
    # the vsan_stripe notebook's own calls
    hand = compare(stripe, "source_tool", "DiskSPD", "iops", by=["pattern", "direction"],
                   pair_on=["vms", "stripe_width"]).to_frame().set_index("pattern")
    got = ct.comparison.set_index("pattern")
    for pattern in hand.index:
        for col in ("ratio", "ci_low", "ci_high", "p", "n_baseline"):
            assert got.loc[pattern, col] == pytest.approx(hand.loc[pattern, col], rel=1e-12)
    wide = stripe.pivot_table(index=["pattern", "vms", "stripe_width"], columns="source_tool", values="iops")
    for pattern, part in [("all", wide), *wide.groupby(level="pattern")]:
        # over all configurations the patterns are the clusters (Bland & Altman 2007); within one, independent
        clusters = part.index.get_level_values("pattern") if pattern == "all" else None
        ba = bland_altman(part["FIO"], part["DiskSPD"], log=True, clusters=clusters)
        row = ct.agreement.set_index("pattern").loc[pattern]
        assert (row["n"], row["bias"], row["loa_low"], row["loa_high"]) == pytest.approx(
            (ba.n, ba.bias, ba.loa_low, ba.loa_high), rel=1e-12)
    assert "never a replicate" in ct.method


def test_tools_are_never_pooled_as_replicates():
    stripe = load_published("vsan_stripe").assign(tool=lambda d: d["source_tool"].str.lower())
    one = stripe[stripe["pattern"] == "4k random read"]
    with pytest.raises(StatsError, match="a tool is a factor, not a replicate"):
        compare(one, "stripe_width", 1, "iops", pair_on="vms")
    ok = compare(one, "stripe_width", 1, "iops", pair_on=["vms", "tool"])  # the tool matched, not pooled
    assert ok.to_frame()["n_baseline"].item() == 24


def test_bad_inputs():
    stripe = load_published("vsan_stripe")
    with pytest.raises(StatsError, match="exactly two tools"):
        cross_tool(stripe, baseline="published")
    with pytest.raises(StatsError, match="baseline must be one of"):
        cross_tool(stripe, tool_col="source_tool", baseline="iometer")
    with pytest.raises(StatsError, match="measured by both"):
        cross_tool(stripe[stripe["stripe_width"] == 1].assign(
            vms=lambda d: np.where(d["source_tool"] == "FIO", d["vms"] + 100, d["vms"])),
            tool_col="source_tool", baseline="DiskSPD", match_on=["stripe_width", "vms"])


def test_diskspd_fixtures_against_real_fio_runs(crosstool_fio_runs):
    # real 1-s fio runs of rw7030 (randrw 70/30 4k QD1 x1), seq64k (read 64k QD2 x4), rwrite (randwrite 4k QD16 x4)
    fio = [crosstool_fio_runs / f"{name}.json" for name in ("rw7030", "seq64k", "rwrite")]
    d = FIXTURES / "diskspd"
    disk = [d / "virtualclient_Results_DiskSpd.xml", d / "virtualclient_DiskSpdExample-ReadWrite.txt",
            d / "pkb_diskspd_result_2018.xml", d / "virtualclient_DiskSpdExample-WriteOnly-v2.2.0-SingleGroup.txt",
            d / "virtualclient_Write8k.txt"]
    res = ingest_paths([*disk, *fio])
    assert res.ok, res.errors
    ct = cross_tool(res.runs, baseline="diskspd", metric="iops")
    assert (ct.baseline, ct.other) == ("diskspd", "fio")
    assert len(ct.pairs) == 3  # randrw 4k QD1 x1, read 64k QD2 x4, randwrite 4k QD16 x4
    assert sorted(ct.pairs["n_diskspd"]) == [1, 1, 2]  # two DiskSPD runs of the 70/30 profile: replicates
    assert not ct.paired  # so each cell is compared on its own, tool as the factor
    assert set(ct.comparison["level"]) == {"fio"} and len(ct.comparison) == 3
    # one run per arm cannot give a CI: said in the note, no number invented
    single = ct.comparison[ct.comparison["n_baseline"] == 1]
    assert single["p"].isna().all() and single["note"].str.contains("not estimable").all()
    w8k = res.runs.loc[res.runs["source_file"].str.endswith("Write8k.txt"), "run_id"].unique()
    assert set(ct.unmatched["run_id"]) == set(w8k)  # 115 threads: no fio twin
    assert ct.unmatched["reason"].str.contains("only one tool").all()
    allrow = ct.agreement.iloc[0]
    assert allrow["n"] == 3 and np.isfinite(allrow["bias"])
    # the matched fio IOPS are the ingested ones, the DiskSPD cell mean the mean of its two runs
    cell = ct.pairs[ct.pairs["rw"] == "randrw"].iloc[0]
    ds = res.runs[(res.runs["tool"] == "diskspd") & (res.runs["rw"] == "randrw")]
    per_run_iops = ds.groupby("run_id")["iops"].sum()
    assert cell["iops_diskspd"] == pytest.approx(per_run_iops.mean(), rel=1e-12)


# ---- write-up helpers: the table, the sentences, Little's law per tool -------------------------------


def _stripe(metric="iops"):
    return cross_tool(load_published("vsan_stripe"), tool_col="source_tool", baseline="DiskSPD",
                      match_on=["stripe_width", "vms"], by="pattern", metric=metric)


def test_cross_tool_table_is_the_comparison_with_its_verdicts_and_limits():
    from storagebench.stats import cross_tool_table, verdict

    ct = _stripe()
    tab = cross_tool_table(ct).set_index("pattern")
    v = verdict(ct.table, unit=ct.unit).set_index("pattern")
    comp = ct.comparison.set_index("pattern")
    ag = ct.agreement.set_index("pattern")
    for p in comp.index:
        assert tab.loc[p, "ratio"] == comp.loc[p, "ratio"] and tab.loc[p, "p_adjusted"] == comp.loc[p, "p_adjusted"]
        assert tab.loc[p, "verdict"] == v.loc[p, "verdict"]
        assert (tab.loc[p, "loa_low"], tab.loc[p, "loa_high"]) == (ag.loc[p, "loa_low"], ag.loc[p, "loa_high"])
        # the tools' columns are the arms of the ratio beside them: geometric means
        assert tab.loc[p, "DiskSPD iops"] == pytest.approx(comp.loc[p, "gmean_baseline"], rel=1e-12)
        assert tab.loc[p, "ratio"] == pytest.approx(tab.loc[p, "FIO iops"] / tab.loc[p, "DiskSPD iops"], rel=1e-12)
    # per pattern: the tools differ on 5 of 6 (only 4k random read is within its CI of 1)
    assert sorted(tab["verdict"].iloc[:6].unique()) == ["higher", "lower", "no difference shown"]
    assert tab.loc["4k random read", "verdict"] == "no difference shown"
    allrow = tab.loc["all"]
    assert allrow["configurations"] == 144 and allrow["ratio"] == ag.loc["all", "bias"]
    assert np.isnan(allrow["p_adjusted"]) and allrow["verdict"] == "(descriptive)"
    assert ct.unit == "configuration (stripe_width x vms within each pattern), one run per tool"


def test_cross_tool_findings_state_the_numbers_of_the_tables():
    from storagebench.findings import fmt_number
    from storagebench.stats import cross_tool_findings

    ct = _stripe()
    f = cross_tool_findings(ct, label="vsan_stripe")
    allrow = ct.agreement.iloc[0]
    agree = f["iops:agreement"]
    # the bias over all 144 configurations has the 6 patterns as its units (Bland & Altman 2007): 1.03 [0.925, 1.14]
    assert agree.n == 6 and agree.estimate == allrow["bias"] and allrow["clusters"] == 6
    assert agree.ci == (allrow["bias_ci_low"], allrow["bias_ci_high"])
    for value in ("bias", "bias_ci_low", "bias_ci_high", "loa_low", "loa_high"):
        assert fmt_number(allrow[value]) in agree.sentence
    assert "0.925 to 1.14, p = 0.516" in agree.sentence and "144 configurations" in agree.sentence
    assert "the 6 patterns are the units of this CI" in agree.sentence and "intraclass correlation 0.48" in agree.sentence
    assert "Bland & Altman 2007" in agree.method and "5 df" in agree.method
    assert ct.unit in agree.unit_of_replication
    disagree = f["iops:disagree"].sentence
    assert "differ in 5 of 6 patterns" in disagree and "no difference is shown for 4k random read" in disagree
    assert "Holm" in f["iops:disagree"].method
    assert "least for 4k random write" in f["iops:spread"].sentence
    assert not any(x.caveat for x in f)  # every run matched
    # latency: FIO above DiskSPD in every pattern, said once as a range
    lat = cross_tool_findings(_stripe("lat_mean_ns"))
    assert "higher for every one of them" in lat["lat_mean_ns:disagree"].sentence


def test_the_tools_little_law_shows_which_latency_is_not_a_mean():
    from storagebench.stats import tool_littles_law

    table, f = tool_littles_law(load_published("vsan_stripe"), tool_col="source_tool", scale="vms")
    t = table.set_index("tool")
    assert t.loc["FIO", "flagged"] == 144 and 3.9 < t.loc["FIO", "median"] < 4.3  # the sum over 4 jobs
    assert t.loc["DiskSPD", "flagged"] < 72 and 0.95 < t.loc["DiskSPD", "median"] < 1.1
    assert f[0].caveat and "FIO's mean latency does not fit" in f[0].sentence
    table, f = tool_littles_law(load_published("vsan_qd_threads"), tool_col="source_tool")
    assert table["flagged"].sum() == 0 and not f[0].caveat


def test_runs_without_the_metric_and_mislabelled_tools(tmp_path):
    d = FIXTURES / "diskspd"
    res = ingest_paths([d / "pkb_diskspd_result_2018.xml", d / "virtualclient_Results_DiskSpd.xml"])
    runs = res.runs.copy()
    # a second "tool" built from the same files under another label (the numbers do not matter here)
    twin = runs.assign(tool="fio", run_id=runs["run_id"] + "-twin")
    both = pd.concat([runs, twin], ignore_index=True)
    ct = cross_tool(both, baseline="diskspd", metric="lat_mean_ns")
    # the PKB run has no latency (no -L): left out with its reason, not dropped silently and not a crash
    pkb = runs.loc[runs["source_file"].str.endswith("pkb_diskspd_result_2018.xml"), "run_id"].iloc[0]
    reasons = ct.unmatched.set_index("run_id")["reason"]
    assert "no lat_mean_ns value" in reasons[pkb]
    # labels that put two tools under one name are refused: that would pool tools as replicates
    mixed = both.assign(label=np.where(both["run_id"] == pkb, "B", "A"))
    with pytest.raises(StatsError, match="holds runs of several tools"):
        cross_tool(mixed, tool_col="label", baseline="A")
    # labels that name the same split as the tool column are one factor
    ok = cross_tool(both.assign(label=both["tool"].str.upper()), tool_col="label", baseline="DISKSPD")
    assert ok.other == "FIO" and len(ok.pairs) == 2


def test_findings_of_too_few_configurations_say_so():
    from storagebench.stats import cross_tool_findings

    stripe = load_published("vsan_stripe")
    two = stripe[(stripe["vms"] <= 2) & (stripe["stripe_width"] == 1) & (stripe["pattern"] == "4k random read")]
    ct = cross_tool(two, tool_col="source_tool", baseline="DiskSPD", match_on=["stripe_width", "vms"])
    f = cross_tool_findings(ct)
    assert f["iops:agreement"].caveat and "not estimable" in f["iops:agreement"].sentence


def test_cells_whose_rows_differ_in_a_study_column_are_refused_not_pooled():
    """Issue: without match_on, the 24 stripe x VM cells of a pattern were compared as 24 replicates of one
    configuration (Welch, n = 24 per tool). Now refused, naming the columns, their levels and match_on."""
    stripe = load_published("vsan_stripe")
    with pytest.raises(StatsError) as err:
        cross_tool(stripe, tool_col="source_tool", baseline="DiskSPD")
    msg = str(err.value)
    assert "differ in ['stripe_width', 'vms']" in msg and "stripe_width ['1', '4']" in msg
    assert "vms ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12']" in msg
    assert "24 rows of source_tool='DiskSPD'" in msg and "match_on=['stripe_width', 'vms']" in msg
    # half the configuration named: the other half is still refused, and the message adds it to match_on
    with pytest.raises(StatsError, match=r"differ in \['stripe_width'\].*match_on=\['vms', 'stripe_width'\]"):
        cross_tool(stripe, tool_col="source_tool", baseline="DiskSPD", match_on="vms")
    # grouping by a column takes it out of the cell's replicates too
    ct = cross_tool(stripe, tool_col="source_tool", baseline="DiskSPD", match_on="vms", by=["pattern", "stripe_width"])
    assert ct.paired and len(ct.comparison) == 12 and set(ct.comparison["n_baseline"]) == {12}
    # the single-VM sweep varies only in fio options (threads = numjobs, QD = iodepth): accepted as before
    sweep = cross_tool(load_published("vsan_qd_threads"), tool_col="source_tool", baseline="DiskSPD")
    assert sweep.paired and len(sweep.pairs) == 32
    with pytest.raises(StatsError, match=r"replicates=\['setup'\]: no column"):
        cross_tool(stripe, tool_col="source_tool", baseline="DiskSPD", replicates="setup")


def test_replicates_declares_a_study_column_whose_levels_are_repeats():
    """The way out for real replicates: a set-up column whose levels are the same configuration built afresh.
    Seed 002 has none, so the stripe-1 rows stand in: the VM counts declared as repeats (a user's claim, not
    seed 002's design) make each cell a set of 12 independent runs per tool."""
    one = load_published("vsan_stripe").query("stripe_width == 1").rename(columns={"vms": "setup"})
    with pytest.raises(StatsError, match=r"differ in \['setup'\]"):
        cross_tool(one, tool_col="source_tool", baseline="DiskSPD")
    ct = cross_tool(one, tool_col="source_tool", baseline="DiskSPD", replicates="setup")
    assert not ct.paired and len(ct.comparison) == 6
    assert set(ct.comparison["n_baseline"]) == {12} and ct.unit.startswith("run")

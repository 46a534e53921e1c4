"""Cross-tool analysis (issue 12 item 3, library half): compare with the tool as the factor, Bland-Altman.

Data: seed 002's published DiskSPD and FIO columns (data/published/vsan_stripe.csv), and the captured
DiskSPD fixtures against real 1-s fio runs of the same configurations on a file in tmp_path (different
machines, so only the mechanics are checked there, not the ratios).
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
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
        ba = bland_altman(part["FIO"], part["DiskSPD"], log=True)
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


def _fio(tmp_path, fio_bin, name, **opts):
    args = [fio_bin, f"--name={name}", f"--filename={tmp_path / 'target.dat'}", "--size=32m", "--time_based",
            "--runtime=1", "--ioengine=libaio", "--direct=1", "--group_reporting", "--output-format=json",
            *(f"--{k}={v}" for k, v in opts.items())]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    path = tmp_path / f"{name}.json"
    path.write_text(out.stdout)
    json.loads(out.stdout)
    return path


def test_diskspd_fixtures_against_real_fio_runs(tmp_path, fio_bin):
    fio = [
        _fio(tmp_path, fio_bin, "rw7030", rw="randrw", rwmixread=70, bs="4k", iodepth=1, numjobs=1),
        _fio(tmp_path, fio_bin, "seq64k", rw="read", bs="64k", iodepth=2, numjobs=4),
        _fio(tmp_path, fio_bin, "rwrite", rw="randwrite", bs="4k", iodepth=16, numjobs=4),
    ]
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

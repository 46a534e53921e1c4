"""The cross-tool write-up (notebooks/studies/cross_tool.ipynb), run as a user would run it.

Two runs through papermill (:func:`storagebench.publish.publish_report`, which executes the notebook
with :func:`storagebench.publish.execute_notebook`):

* on its defaults, seed 002's published DiskSPD and FIO columns: the tables it writes are the
  library's (:func:`storagebench.stats.cross_tool` on the same table), and the page opens with the
  findings;
* on a user-supplied pair of result sets given as raw files: the five captured DiskSPD fixtures and
  real 1-s fio runs of three of their configurations on a file in tmp_path (different machines, so
  the mechanics are checked, not the ratios), labelled by the user.
"""

from __future__ import annotations

import nbformat
import pandas as pd
import pytest
from conftest import FIXTURES

from storagebench.findings import MIME_TYPE
from storagebench.ingest import ingest_paths
from storagebench.publish import publish_report
from storagebench.published import load_published
from storagebench.stats import cross_tool

NOTEBOOK = "studies/cross_tool.ipynb"


def _findings(executed) -> list[dict]:
    nb = nbformat.read(str(executed), as_version=4)
    return [f for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if MIME_TYPE in o.get("data", {}) for f in o["data"][MIME_TYPE]["findings"]]


def test_defaults_write_the_library_tables(tmp_path):
    out = tmp_path / "tables"
    page = publish_report(tmp_path, notebooks=[NOTEBOOK], parameters={"out_dir": str(out)})
    stripe = load_published("vsan_stripe")
    ct = cross_tool(stripe, tool_col="source_tool", baseline="DiskSPD", match_on=["stripe_width", "vms"],
                    by="pattern", metric="iops")
    got = pd.read_csv(out / "vsan_stripe_iops_comparison.csv").set_index("pattern")
    want = ct.comparison.set_index("pattern")
    for pattern in want.index:
        assert got.loc[pattern, "ratio"] == pytest.approx(want.loc[pattern, "ratio"], rel=1e-12)
        assert got.loc[pattern, "p_adjusted"] == pytest.approx(want.loc[pattern, "p_adjusted"], rel=1e-9)
    assert got.loc["all", "configurations"] == 144
    assert got.loc["all", "ratio"] == pytest.approx(ct.agreement.iloc[0]["bias"], rel=1e-12)
    # both seed 002 tables hold both tools; both are compared on both metrics
    assert sorted(p.name for p in out.glob("*_comparison.csv")) == [
        "vsan_qd_threads_iops_comparison.csv", "vsan_qd_threads_lat_mean_ns_comparison.csv",
        "vsan_stripe_iops_comparison.csv", "vsan_stripe_lat_mean_ns_comparison.csv"]
    findings = _findings(tmp_path / "notebooks" / "cross_tool.ipynb")
    keys = [f["key"] for f in findings]
    assert keys[:3] == ["iops:agreement", "iops:disagree", "iops:spread"]
    first = findings[0]
    # the 144 configurations are 6 patterns' repeated observations: the bias CI's units are the patterns
    assert first["n"] == 6 and "144 configurations" in first["sentence"] and first["ci"] == pytest.approx([ct.agreement.iloc[0]["bias_ci_low"],
                                                             ct.agreement.iloc[0]["bias_ci_high"]])
    assert "unit: configuration (stripe_width x vms within each pattern), one run per tool" in first[
        "unit_of_replication"]
    # FIO's stripe-table latency does not fit its IOPS (Little's law): said as a caveat
    assert any(f["caveat"] and "FIO's mean latency does not fit" in f["sentence"] for f in findings)
    html = page.read_text()
    assert html.index('id="findings"') < html.index("Agreement, configuration by configuration")
    assert html.count('class="sb-figure"') == 6  # a Bland-Altman plot for every agreement reported


def test_a_user_pair_diskspd_fixtures_and_real_fio_runs(tmp_path, crosstool_fio_runs):
    # the three configurations the DiskSPD fixtures share with a 1-s fio run on this machine (tests/conftest.py)
    fio_dir = crosstool_fio_runs
    assert sorted(p.name for p in fio_dir.iterdir()) == ["rw7030.json", "rwrite.json", "seq64k.json"]
    out = tmp_path / "tables"
    study = tmp_path / "writeup"
    study.mkdir()
    params = {"results_a": str(FIXTURES / "diskspd"), "results_b": str(fio_dir), "labels": ["DiskSPD", "fio"],
              "tool_col": "tool_label", "baseline": "DiskSPD", "match_on": [], "by": [], "sweep_table": "",
              "out_dir": str(out)}
    page = publish_report(study, notebooks=[NOTEBOOK], parameters=params)
    # what the library gives on the same files
    res = ingest_paths([FIXTURES / "diskspd", fio_dir])
    assert res.ok, res.errors
    ct = cross_tool(res.runs, baseline="diskspd", metric="iops")
    got = pd.read_csv(out / "diskspd vs fio-runs_iops_comparison.csv".replace(" ", "_"))
    assert len(got) == 3 and list(got["runs DiskSPD"].sort_values()) == [1, 1, 2]
    assert sorted(got["ratio"]) == pytest.approx(sorted(ct.comparison["ratio"]), rel=1e-12)
    pairs = pd.read_csv(out / "diskspd_vs_fio-runs_iops_pairs.csv")
    assert sorted(pairs["iops_fio"]) == pytest.approx(sorted(ct.pairs["iops_fio"]), rel=1e-12)
    findings = {f["key"]: f for f in _findings(study / "notebooks" / "cross_tool.ipynb")}
    agree = findings["iops:agreement"]
    assert agree["n"] == 3 and agree["ci"] is not None  # 3 configurations: bias and limits estimable
    # the agreement is over configurations (each tool's runs averaged); the comparison's unit is the run
    assert "unit: configuration (each tool's runs of it averaged)" in agree["unit_of_replication"]
    assert "unit: run (the runs of one tool on one configuration are its replicates)" in findings[
        "iops:disagree"]["unit_of_replication"]
    # one run per arm (or 2 vs 1): no CI, so no difference is claimed, and the sentence says why
    assert "no difference between fio and DiskSPD can be claimed" in findings["iops:disagree"]["sentence"]
    # the 115-thread Write8k run has no fio twin; the PKB XML (no -L) has no latency: both said, not dropped silently
    assert "only one tool measured this configuration" in findings["iops:unmatched"]["sentence"]
    assert "no lat_mean_ns value" in findings["lat_mean_ns:unmatched"]["sentence"]
    html = page.read_text()
    # provenance: the DiskSPD fixtures are captured (their SOURCES.tsv), the fio runs are not listed
    assert html.count(">captured<") == 5 and html.count(">not listed<") == 3
    assert "virtualclient_Write8k.txt" in html

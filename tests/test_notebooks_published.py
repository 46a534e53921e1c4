"""The published-data notebooks: stored clean, parameterised, and run end to end with papermill.

Each notebook is executed on the published seed tables (small: at most 288 rows) and its written
tables are checked against the library computed here on the same input.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from storagebench.publish import NOTEBOOK_DIR, execute_notebook, notebook_parameters
from storagebench.published import load_published
from storagebench.stats import compare

NOTEBOOKS = [
    ROOT / "notebooks" / "analyze.ipynb",
    ROOT / "notebooks" / "sweep.ipynb",
    ROOT / "notebooks" / "compare.ipynb",
    ROOT / "notebooks" / "studies" / "vsan_stripe.ipynb",
    ROOT / "notebooks" / "studies" / "hdd_iops.ipynb",
    ROOT / "notebooks" / "studies" / "cross_tool.ipynb",
]


def _assigned(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets = [node.target]
        for t in targets:
            names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_an_annotated_parameters_cell(path):
    # stored without outputs: tests/test_notebook_outputs.py (the checked cells' expected stdout is in a sidecar)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    params = notebook_parameters(path)
    assert params and all(p["help"] for p in params.values()), params  # every parameter is commented
    tree = ast.parse(code[0].source)
    assert all(isinstance(s, ast.AnnAssign) for s in tree.body)  # annotated literals only
    for cell in code[1:]:
        clash = _assigned(ast.parse(cell.source)) & set(params)
        assert not clash, f"a later cell reassigns parameter(s) {clash}"


RUNS = {  # notebook -> parameters (small defaults: the published tables, at most 288 rows)
    "compare": ("compare.ipynb", lambda d: {"out": str(d / "cmp.csv"), "metric": "bw_bytes_per_s", "adjust": "fdr_bh",
                                            "table": "published:vsan_stripe", "factor": "stripe_width",
                                            "by": ["pattern", "direction", "source_tool"], "pair_on": ["vms"],
                                            "unit": "VM count"}),
    "hdd": ("studies/hdd_iops.ipynb", lambda d: {"out_dir": str(d / "hdd")}),
    "vsan": ("studies/vsan_stripe.ipynb", lambda d: {"out_dir": str(d / "vsan")}),
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """The three notebooks executed once, in parallel kernels: {key: (executed notebook, output dir)}."""
    from concurrent.futures import ThreadPoolExecutor

    d = tmp_path_factory.mktemp("notebooks")
    with ThreadPoolExecutor(max_workers=len(RUNS)) as pool:
        # absolute paths: papermill changes the process's working directory while a notebook runs (to the
        # notebook's own), so a relative name resolved in another thread could miss
        futures = {k: pool.submit(execute_notebook, NOTEBOOK_DIR / nb, d / f"{k}.ipynb", params(d))
                   for k, (nb, params) in RUNS.items()}
        return {k: (f.result(), d) for k, f in futures.items()}


def _outputs_text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", out
            data = out.get("data", {})
            parts.append(out.get("text", "") or data.get("text/html", "") or data.get("text/plain", ""))
            if "text/markdown" in data:
                parts.append(data["text/markdown"])
    return "\n".join(parts)


def test_compare_notebook_writes_the_library_comparison(executed):
    path, d = executed["compare"]
    out = d / "cmp.csv"
    text = _outputs_text(path)
    got = pd.read_csv(out)
    # per tool, paired on the VM count: the second tool's measurement of a configuration is not a replicate
    want = compare(load_published("vsan_stripe"), "stripe_width", 1, "bw_bytes_per_s",
                   by=["pattern", "direction", "source_tool"], pair_on="vms", adjust="fdr_bh").to_frame()
    np.testing.assert_allclose(got["ratio"], want["ratio"], rtol=1e-12)
    np.testing.assert_allclose(got["p_adjusted"], want["p_adjusted"], rtol=1e-12)
    assert list(got["pattern"]) == list(want["pattern"]) and len(got) == 12 and set(got["n_baseline"]) == {12}
    assert "Benjamini &amp; Hochberg" in text and "288 rows" in text and 'id="findings"' in text


def test_hdd_notebook_checks_littles_law_on_the_published_rows(executed):
    path, d = executed["hdd"]
    out_dir = d / "hdd"
    text = _outputs_text(path)
    lit = pd.read_csv(out_dir / "hdd_littles_law.csv")
    df = load_published("hdd_iops")
    assert len(lit) == len(df) == 32
    merged = lit.merge(df, on=["bs_bytes", "rwmixread_pct", "iops", "lat_mean_ns"], suffixes=("", "_pub"))
    assert len(merged) == 32
    np.testing.assert_allclose(merged["outstanding"], merged["iops"] * merged["lat_mean_ns"] / 1e9)
    assert (lit["outstanding_low"] <= lit["outstanding"]).all() and (lit["outstanding"] <= lit["outstanding_high"]).all()
    # the two sub-ms cells are sequential reads streaming off the platters, not a cache (stats.regime's rule
    # is for random I/O only)
    assert int(lit["streaming_seq_read"].sum()) == 2
    size = pd.read_csv(out_dir / "hdd_size_ratio.csv").set_index("metric")
    assert set(size["n_baseline"]) == {15}
    # seek-bound HDD: 16 KiB moves ~4x the bytes of 4 KiB at about the same IOPS
    assert size.loc["bw_bytes_per_s", "ci_low"] > 3 and size.loc["iops", "ci_low"] < 1 < size.loc["iops", "ci_high"]
    assert "rows that reach the platters" in text and "95% CI" in text


def test_vsan_stripe_notebook_verdicts_follow_the_comparison(executed):
    """The write-up's tables are the library's comparisons with the right unit: VM count a block, tool a factor."""
    from storagebench.published import published_metadata
    from storagebench.stats import (
        bland_altman,
        claim_checks,
        claim_verdicts,
        interaction,
        parameter_claim_verdicts,
    )
    from storagebench.stats.comparison import adjust_family

    path, d = executed["vsan"]
    out_dir = d / "vsan"
    text = _outputs_text(path)
    stripe = load_published("vsan_stripe")
    design = dict(pair_on="vms", blocks="vms", adjust="holm")
    by = ["pattern", "direction"]
    combined = compare(stripe, "stripe_width", 1, "iops", by=by, factors="source_tool", **design)
    per_tool = compare(stripe, "stripe_width", 1, "iops", by=[*by, "source_tool"], **design)
    average = compare(stripe, "stripe_width", 1, "iops", factors=["source_tool", *by], **design)
    inter = interaction(stripe, "stripe_width", 1, "iops", modifier="source_tool", modifier_baseline="DiskSPD",
                        by=by, **design)
    # one family for the write-up's stripe question: Holm over the 25 tests of the four tables (issue 20)
    fam = adjust_family({"combined": combined, "per tool": per_tool, "interaction": inter, "average": average},
                        "Does a wider stripe give more IOPS on vSAN, by either tool?")
    combined, per_tool, inter, average = (fam[k] for k in ("combined", "per tool", "interaction", "average"))
    assert "Holm (1979) step-down over the 25 tests of this question" in combined.family
    for name, table, rows in (("stripe_combined", combined, 6), ("stripe_per_tool", per_tool, 12),
                              ("stripe_average", average, 1), ("tool_x_stripe", inter, 6)):
        got, want = pd.read_csv(out_dir / f"{name}.csv"), table.to_frame()
        assert len(got) == rows and set(got["n_baseline"]) == {12}, name  # 12 VM counts, never 24 "replicates"
        for col in ("ratio", "ci_low", "ci_high", "p_adjusted"):
            np.testing.assert_allclose(got[col], want[col], rtol=1e-12, err_msg=f"{name}.{col}")
    # the tool is never a replicate: the old pairing on (vms, tool) is refused by the verdict
    claims = claim_checks(published_metadata("vsan_stripe"))
    unit = "VM-count step"
    want_claims = claim_verdicts(claims, combined, unit=unit, average=average, blocks="vms", factors="source_tool",
                                 name_by="pattern")
    got_claims = pd.read_csv(out_dir / "claims.csv")
    assert got_claims["verdict"].tolist() == want_claims["verdict"].tolist() == ["holds", "contradicted", "not shown"]
    params = pd.read_csv(out_dir / "parameter_claim.csv").set_index("source_tool")
    want_params = parameter_claim_verdicts(claims=claim_checks(published_metadata("vsan_qd_threads")),
                                           sweep=load_published("vsan_qd_threads"), by="source_tool").set_index(
        "source_tool")
    assert params["verdict"].to_dict() == want_params["verdict"].to_dict() == {"DiskSPD": "holds",
                                                                                 "FIO": "holds loosely"}
    # the Bland-Altman agreement over every configuration is the library's
    agreement = pd.read_csv(out_dir / "tool_agreement.csv").set_index("pattern")
    overall = agreement.loc["all"]
    assert overall["configurations"] == 144
    wide = stripe.pivot_table(index=["pattern", "vms", "stripe_width"], columns="source_tool", values="iops")
    ba = bland_altman(wide["FIO"], wide["DiskSPD"], clusters=wide.index.get_level_values("pattern"))
    np.testing.assert_allclose([overall.loa_low, overall.loa_high], [ba.loa_low, ba.loa_high], rtol=1e-9)
    np.testing.assert_allclose([overall.ci_low, overall.ci_high], [ba.bias_ci_low, ba.bias_ci_high], rtol=1e-9)
    assert round(overall.ci_low, 2) == 0.93 and round(overall.ci_high, 2) == 1.14  # not 1.01-1.05: patterns are units
    # the findings open the page, each claim's verdict in a sentence; the verdicts table is HTML, not printed text
    assert text.index('id="findings"') < text.index("<table")
    assert "switching to a higher number of disk stripes per object can give you some more IOPS\u201d" in text
    assert "contradicted; it is contradicted for 4k random write and 64k random write" in text
    assert "<pre" not in text

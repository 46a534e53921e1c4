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

from storagebench.publish import execute_notebook, notebook_parameters
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
def test_notebook_is_stored_clean_with_an_annotated_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    # stored without outputs, except the expected stdout of the cells nbval checks (# NBVAL_CHECK_OUTPUT)
    for c in code:
        if c.source.lstrip().startswith("# NBVAL_CHECK_OUTPUT"):
            assert [o["output_type"] for o in c.outputs] == ["stream"] and c.outputs[0]["name"] == "stdout"
        else:
            assert not c.get("outputs") and c.get("execution_count") is None, c.source[:80]
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
                                            "by": ["pattern", "direction"], "pair_on": ["vms", "source_tool"],
                                            "unit": "(VM count, tool) cell"}),
    "hdd": ("studies/hdd_iops.ipynb", lambda d: {"out_dir": str(d / "hdd")}),
    "vsan": ("studies/vsan_stripe.ipynb", lambda d: {"out_dir": str(d / "vsan")}),
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """The three notebooks executed once, in parallel kernels: {key: (executed notebook, output dir)}."""
    from concurrent.futures import ThreadPoolExecutor

    d = tmp_path_factory.mktemp("notebooks")
    with ThreadPoolExecutor(max_workers=len(RUNS)) as pool:
        futures = {k: pool.submit(execute_notebook, nb, d / f"{k}.ipynb", params(d)) for k, (nb, params) in RUNS.items()}
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
    want = compare(load_published("vsan_stripe"), "stripe_width", 1, "bw_bytes_per_s", by=["pattern", "direction"],
                   pair_on=["vms", "source_tool"], adjust="fdr_bh").to_frame()
    np.testing.assert_allclose(got["ratio"], want["ratio"], rtol=1e-12)
    np.testing.assert_allclose(got["p_adjusted"], want["p_adjusted"], rtol=1e-12)
    assert list(got["pattern"]) == list(want["pattern"]) and set(got["n_baseline"]) == {24}
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
    assert int(lit["cached_seq_read"].sum()) == 2
    size = pd.read_csv(out_dir / "hdd_size_ratio.csv").set_index("metric")
    assert set(size["n_baseline"]) == {15}
    # seek-bound HDD: 16 KiB moves ~4x the bytes of 4 KiB at about the same IOPS
    assert size.loc["bw_bytes_per_s", "ci_low"] > 3 and size.loc["iops", "ci_low"] < 1 < size.loc["iops", "ci_high"]
    assert "rows that reach the platters" in text and "95% CI" in text


def test_vsan_stripe_notebook_verdicts_follow_the_comparison(executed):
    from storagebench.stats import recommend_parameters

    path, d = executed["vsan"]
    out_dir = d / "vsan"
    text = _outputs_text(path)
    stripe = load_published("vsan_stripe")
    by_pattern = pd.read_csv(out_dir / "stripe_by_pattern.csv")
    want = compare(stripe, "stripe_width", 1, "iops", by=["pattern", "direction"], pair_on=["vms", "source_tool"],
                   adjust="holm").to_frame()
    assert len(by_pattern) == 6 and set(by_pattern["n_baseline"]) == {24}
    np.testing.assert_allclose(by_pattern["ratio"], want["ratio"], rtol=1e-12)
    np.testing.assert_allclose(by_pattern["ci_high"], want["ci_high"], rtol=1e-12)
    np.testing.assert_allclose(by_pattern["p_adjusted"], want["p_adjusted"], rtol=1e-12)
    # every per-pattern verdict is the rule applied to that pattern's CI and adjusted p
    verdicts = pd.read_csv(out_dir / "verdicts.csv")
    per_pattern = verdicts[verdicts["claim"] == "stripe width 4 gives more iops"].set_index("scope")["verdict"]
    assert len(per_pattern) == 6
    for _, r in by_pattern.iterrows():
        expected = ("holds" if r.ci_low > 1 and r.p_adjusted < 0.05 else
                    "contradicted" if r.ci_high < 1 and r.p_adjusted < 0.05 else "not shown (CI includes 1)")
        assert per_pattern[r.pattern] == expected, r.pattern
    assert verdicts["evidence"].str.contains("CI|no CI").all() and verdicts["evidence"].str.contains("n = ").all()
    assert len(pd.read_csv(out_dir / "stripe_by_tool.csv")) == 12
    # balanced design: the model's per-pattern stripe ratio equals the paired geometric mean ratio
    effects = pd.read_csv(out_dir / "model_effects.csv")
    assert sorted(effects["model"].unique()) == ["A", "B"] and set(effects["n"]) == {288}
    for _, eff in effects.groupby("model"):
        merged = eff.merge(by_pattern, on="pattern", suffixes=("_model", ""))
        np.testing.assert_allclose(merged["ratio_model"], merged["ratio"], rtol=1e-9)
        assert (merged["ci_low_model"] < merged["ratio"]).all() and (merged["ratio"] < merged["ci_high_model"]).all()
    assert pd.read_csv(out_dir / "stripe_pooled.csv")["n_baseline"].tolist() == [144]
    # the knee table reports the recommendation computed by the library on each tool's sweep
    knee = pd.read_csv(out_dir / "knee.csv").set_index("tool")
    sweep = load_published("vsan_qd_threads")
    for tool, part in sweep.groupby("source_tool"):
        rec = recommend_parameters(part, "iops", fraction=0.95)
        assert knee.loc[tool, "recommended"] == f"threads={rec.numjobs}, QD={rec.iodepth}"
    agreement = pd.read_csv(out_dir / "tool_agreement.csv")
    overall = agreement[agreement["pattern"] == "all patterns"].set_index("metric")
    assert overall.loc["iops", "n"] == 144
    assert (agreement["loa_low"] <= agreement["ratio_bias"]).all() and (agreement["ratio_bias"] <= agreement["loa_high"]).all()
    assert overall.loc["lat_mean_ns", "ci_low"] > 3  # FIO's printed latency ~4x DiskSPD's (README)
    # the limits of agreement and their CIs are the library's (stats.bland_altman), not computed in the notebook
    from storagebench.stats import bland_altman

    wide = stripe.pivot_table(index=["pattern", "vms", "stripe_width"], columns="source_tool", values="iops")
    ba = bland_altman(wide["FIO"], wide["DiskSPD"])
    row = overall.loc["iops"]
    np.testing.assert_allclose([row.ratio_bias, row.ci_low, row.ci_high, row.loa_low, row.loa_high,
                                row.loa_low_ci_low, row.loa_high_ci_high],
                               [ba.bias, ba.bias_ci_low, ba.bias_ci_high, ba.loa_low, ba.loa_high,
                                ba.loa_low_ci_low, ba.loa_high_ci_high], rtol=1e-12)
    assert (agreement["loa_low_ci_low"] < agreement["loa_low"]).all()
    assert (agreement["loa_high"] < agreement["loa_high_ci_high"]).all()
    assert agreement["method"].str.contains("Bland & Altman 1986").all()
    # the verdicts are an HTML table (not printed text), and the findings state each pattern's verdict
    assert "The article&#x27;s claims, checked" in text or "The article's claims, checked" in text
    assert "<pre" not in text and text.count("verdict: ") >= 7

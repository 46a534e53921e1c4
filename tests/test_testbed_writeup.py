"""The testbed write-ups' text, tables and figures, on the committed real quick-variant results (no root).

tests/fixtures/testbed_quick holds what `storagebench testbed NAME --quick` measured for each of the four
studies (see its README). Each is analysed here as the write-up analyses it; the checks are what a reader
would trip over: raw column names and unformatted numbers in sentences, a verdict table with an index
column, an axis labelled 2^4 or 3x10^1, a design paragraph that does not say it is the quick variant.
"""

from __future__ import annotations

import dataclasses
import html
import re
import shutil

import numpy as np
import pytest
from conftest import FIXTURES

from storagebench import studies
from storagebench.findings import METHOD_SHOWN, fmt_number
from storagebench.tables import metric_words, value_text

BUILT_IN = ("consolidation", "fast_vs_slow", "rdm_vs_vmfs", "stripe_width")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each study analysed from a copy of its committed results (the analysis writes tidy/ beside raw/)."""
    root = tmp_path_factory.mktemp("testbed-writeups")
    out = {}
    for name in BUILT_IN:
        shutil.copytree(FIXTURES / "testbed_quick" / name, root / name, ignore=shutil.ignore_patterns("README.md"))
        out[name] = (root / name, studies.analyse(name, root / name))
    return out


@pytest.mark.parametrize("name", BUILT_IN)
def test_verdict_sentences_read_as_words_and_formatted_numbers(results, name):
    _, res = results[name]
    verdicts = [f for f in res.findings if f.kind == "verdict"]
    assert len(verdicts) == len(res.verdicts) > 0
    for f, (_, row) in zip(verdicts, res.verdicts.iterrows(), strict=True):
        # the metric in words, the group keys in display units, 3 significant digits with separators
        assert metric_words(row["metric"]) in f.sentence and row["metric"] not in f.sentence.replace(
            metric_words(row["metric"]), "")
        assert not re.search(r"\b\w+_(ns|bytes|pct)\b", f.sentence), f.sentence
        assert fmt_number(row["ratio"]) in f.sentence
        if np.isfinite(row["ci_low"]):
            assert f"CI {fmt_number(row['ci_low'])} to {fmt_number(row['ci_high'])}" in f.sentence
        assert not re.search(r"\d{5,}\.\d", f.sentence), f.sentence  # no 134144.137
    if name == "rdm_vs_vmfs":
        assert verdicts[0].sentence.startswith(f"Mix rw60_40, {value_text('bs_bytes', 4096)}: IOPS at datastore")
        assert value_text("bs_bytes", 4096) == "bs 4 KiB"
    if name == "consolidation":
        assert any("p99 completion latency (clat) at layout shared" in f.sentence for f in verdicts)


@pytest.mark.parametrize("name", BUILT_IN)
def test_drift_sentence_does_not_extrapolate_beyond_the_sweep(results, name):
    _, res = results[name]
    drift = next(f for f in res.findings if f.kind == "drift")
    assert res.drift.span < 100 and "per 100 runs" not in drift.sentence
    assert not re.search(r"e[+-]\d\d%", drift.sentence), drift.sentence  # no +1.86e+06%


@pytest.mark.parametrize("name", BUILT_IN)
def test_verdict_table_is_a_formatted_table_without_index(results, name):
    _, res = results[name]
    page = res.verdict_table().to_html()
    heads = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", page, flags=re.S)]
    factor = res.verdicts["factor"].iloc[0]
    assert heads[:len(heads)] and factor in heads and "p_adjusted" in heads and "95% CI" in heads
    assert "row_heading" not in page  # no index column
    assert "level" not in heads and "ci_low" not in heads and "iops" not in re.sub(r"<[^>]+>", " ", page).split()
    assert all(metric_words(m) in page for m in res.verdicts["metric"].unique())


@pytest.mark.parametrize("name", BUILT_IN)
def test_design_says_it_is_the_quick_variant_and_the_testbed_notes_sit_under_their_arm(results, name):
    study_dir, _ = results[name]
    design = studies.describe_design(name, study_dir)
    assert "quick variant" in design and f"storagebench testbed {name} --quick" in design
    assert "16 MiB region" in design
    runs = len(list((study_dir / "raw").glob("*/output.json")))
    assert f"{runs} runs in all" in design
    text = studies.describe_testbed(study_dir)
    arms = re.findall(r"^- \*\*(.+?)\*\*: (\d+) builds", text, flags=re.M)
    assert len(arms) == 2 and all(int(n) == 2 for _, n in arms)
    assert text.startswith("- 4 builds of the testbed (2 arms)")


def test_findings_list_shows_a_short_method_and_keeps_the_full_one(results):
    _, res = results["consolidation"]
    page = res.report_findings()._repr_html_()
    full = res.findings[0].method
    assert len(full) > METHOD_SHOWN
    details = re.findall(r'<span class="sb-finding-detail"[^>]*>\((.*?)\)</span>', page, flags=re.S)
    first = details[0]
    assert "unit: set-up;" in first and "the layout testbed built afresh" not in first  # the unit in short
    method = html.unescape(first.split("method: ", 1)[1])
    assert method.endswith(" …") and len(method) <= METHOD_SHOWN + 2 and full.startswith(method[:-2])
    assert 'title="method: geometric mean of the per-pair ratios' in page  # the whole method on hover
    assert res.report_findings().to_dict()["findings"][0]["method"] == full  # and in the sidecar


def test_log_axes_are_labelled_with_plain_numbers(results):
    import matplotlib

    matplotlib.use("Agg", force=True)

    def labels(axis):
        axis.figure.canvas.draw()
        return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]

    fig = results["fast_vs_slow"][1].figures["scores"]()
    left, right = fig.axes[:2]
    assert labels(left.xaxis) == ["1", "16"] == labels(right.xaxis)  # the loads measured, not 2^0 .. 2^4
    assert all(re.fullmatch(r"[\d,.]+", t) for t in labels(right.yaxis)), labels(right.yaxis)
    fig = results["rdm_vs_vmfs"][1].figures["iops_vs_size"]()
    assert labels(fig.axes[0].xaxis) == ["4"]
    assert all(re.fullmatch(r"[\d,.]+", t) for t in labels(fig.axes[0].yaxis))
    fig = results["consolidation"][1].figures["ratios"]()  # CIs over 12 decades: ticks at powers of ten
    ticks = labels(fig.axes[0].xaxis)
    assert len(ticks) >= 3 and "1" in ticks and fig.axes[0].get_ylabel() == "workload, metric"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][0] == "oltp, IOPS"
    fig = results["rdm_vs_vmfs"][1].figures["ratios"]()
    assert fig.axes[0].get_ylabel() == "datastore, mix, bs"


def test_steady_figure_shows_a_run_of_one_logged_second(results):
    import matplotlib

    matplotlib.use("Agg", force=True)
    _, res = results["stripe_width"]
    ax = res.figures["steady"]().axes[0]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 1]
    assert lines and all(ln.get_marker() == "o" for ln in lines)  # a point, not an invisible line
    logged = res.tables["per_run"]["steady_rounds"].fillna(0).gt(0).sum()
    assert ax.get_title().startswith(f"{res.runs} runs, {logged} with a per-second IOPS log")


def test_full_tables_show_a_reader_the_per_run_columns_and_say_what_is_left_out(results):
    study_dir, res = results["consolidation"]
    full = res.tables["per_run"]
    shown, note = res.table_for_reader("per_run")
    assert len(shown) == len(full) and len(shown.columns) < 20 < len(full.columns)
    assert {"layout", "workload", "setup", "block", "run_id", "iops", "clat_p99_ns"} <= set(shown.columns)
    assert "source_file" not in shown.columns and str(study_dir) not in shown.to_string()  # no local paths
    assert note.startswith(f"{len(shown.columns)} of its {len(full.columns)} columns")
    assert "the same in every run: steady no" in note and "analysis/per_run.csv" in note
    # the quick variant has one run per set-up: no variance components, and the page says why
    empty, why = res.table_for_reader("variance")
    assert empty.empty and why.startswith("no rows: variance components need at least 2 set-ups")
    units, none = res.table_for_reader("units")
    assert units is res.tables["units"] and none == ""


def test_a_study_directory_of_another_study_is_refused_by_name(results):
    from storagebench.errors import StudyError

    stripe_dir, _ = results["stripe_width"]
    for fn in (studies.analyse, studies.describe_design):
        with pytest.raises(StudyError, match=r"holds study 'stripe_width-quick', not 'rdm_vs_vmfs'"):
            fn("rdm_vs_vmfs", stripe_dir)


def test_a_set_ups_percentile_is_read_from_the_merged_bins_of_its_runs(results):
    """Consolidation (committed quick run): each set-up holds two runs of a workload, one per layout. Per
    (workload, set-up) the p99 completion latency is read from the json+ bins of both runs added up (fio's
    rule, storagebench._histogram), never the geometric mean of the two runs' p99. Unit: the set-up; estimand:
    its p99 in ns."""
    from storagebench._histogram import percentiles_from_bins
    from storagebench.studies._base import unit_values

    d, _ = results["consolidation"]
    data = studies.load_data("consolidation", d)
    u = unit_values(data, "clat_p99_ns", ["workload"]).set_index(["workload", "setup"])
    assert set(u["runs"]) == {2} and u.attrs["estimate"] == "each set-up's p99 from the merged json+ bins of its runs"
    pr, h = data.per_run, data.histograms
    differs = 0
    for (w, s), row in u.iterrows():
        ids = pr.loc[(pr["workload"] == w) & (pr["setup"] == s), "run_id"]
        bins = h[h["run_id"].isin(ids)].groupby("bin_ns")["count"].sum()
        want = percentiles_from_bins(bins.index.to_numpy(), bins.to_numpy(), [99.0])[99.0]
        assert row["clat_p99_ns"] == want
        per_run = pr.loc[pr["run_id"].isin(ids), "clat_p99_ns"].to_numpy(float)
        differs += not np.isclose(row["clat_p99_ns"], np.exp(np.log(per_run).mean()), rtol=1e-3)
    assert differs == len(u)  # the averaged percentile is a different number in every unit
    _, res = results["consolidation"]
    assert "p90 and p99 completion latency: each set-up's p90 and p99 from the merged json+ bins of its runs" in \
        res.captions["ratios"]
    # without json+ bins the caption says the set-up's value is a mean of per-run percentiles
    bare = dataclasses.replace(data, histograms=data.histograms.iloc[:0])
    assert unit_values(bare, "clat_p99_ns", ["workload"]).attrs["estimate"] == (
        "each set-up's p99 the geometric mean of its runs' p99 (no json+ bins)")


def test_qos_words_name_the_geometric_mean_of_p99_and_the_one_sided_bound(results):
    """fast_vs_slow's QoS finding: the estimate is a geometric mean of p99 over the units (not "mean p99"), and
    the "defensible" bound is the upper end of a two-sided 95% CI: a one-sided 97.5% upper bound, said so."""
    _, res = results["fast_vs_slow"]
    qos = [f for f in res.findings if f.key.startswith("qos") or "meets p99" in f.sentence]
    assert len(qos) == 2
    for f in qos:
        assert "by the geometric mean of p99 over its units" in f.sentence and "mean p99" not in f.sentence
        assert "two-sided 95% CI, a one-sided 97.5% upper confidence bound" in f.sentence
        assert "one-sided 97.5% upper confidence bound" in f.method
    assert "geometric mean of p99 over the units" in res.captions["scores"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_within_run_stability_is_not_called_pts_steady_state(results, name):
    """The PTS criteria are applied to one-second samples inside a run (PTS rounds are whole test rounds):
    every finding, caption and method says "within-run stability ... not to PTS rounds"."""
    _, res = results[name]
    steady = next(f for f in res.findings if f.kind == "steady")
    assert steady.sentence.startswith("Within-run stability") and "not to PTS rounds" in steady.sentence
    texts = [f.sentence for f in res.findings] + [f.method for f in res.findings] + list(res.captions.values())
    assert not [t for t in texts if "SNIA PTS window" in t or "Steady state" in t]
    assert "steady" not in res.captions or "not on PTS rounds" in res.captions["steady"]

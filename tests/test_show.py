"""The write-up helpers: findings in words, tables a reader can use, numbered figures with alt text."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

from storagebench import plots, show, stats
from storagebench.errors import PublishError
from storagebench.findings import MIME_TYPE, Finding, Findings, fmt_ci, fmt_number, fmt_p
from storagebench.ingest import ingest_study
from storagebench.publish import study_provenance
from storagebench.stats import sweep_summary
from storagebench.tables import column_display, table

STUDY = FIXTURES / "study_demo"


@pytest.fixture(scope="module")
def tables():
    res = ingest_study(STUDY)
    return res.runs, res.histograms


def test_numbers_and_p_values_for_a_reader():
    assert [fmt_number(v) for v in (105178.3, 17846.0, 0.055556, 1.2159, 99.95, 76.0, 4.2e-7, float("nan"))] == \
        ["105,178", "17,846", "0.0556", "1.22", "100", "76", "4.20e-07", "n/a"]
    assert [fmt_p(p) for p in (0.3873, 0.0123, 3.873e-4, 8.250293e-230, np.nan)] == \
        ["0.387", "0.012", "3.9e-04", "< 1e-06", "n/a"]
    assert fmt_ci(16455.2, 19237.9) == "95% CI 16,455 to 19,238" and fmt_ci(np.nan, 1) == "no CI: one run"


def test_sweep_findings_come_from_the_results(tables):
    runs, hist = tables
    summary = sweep_summary(runs, hist, provenance=study_provenance(STUDY))
    f = summary.findings()
    peak = f["peak_iops"]
    pts = summary.points
    top = pts.loc[pts["iops"].idxmax()]
    assert peak.estimate == pytest.approx(top["iops"]) and peak.ci == pytest.approx((top["iops_ci_low"],
                                                                                     top["iops_ci_high"]))
    assert peak.n == 2 and fmt_number(top["iops"]) in peak.sentence and "p99 completion latency" in peak.sentence
    assert f"numjobs={int(top['numjobs'])} × iodepth={int(top['iodepth'])}" in peak.sentence
    # the fixture's device says it is rotational, yet answers in ~0.2 ms at one outstanding I/O: a cache
    assert f["cache"].caveat and "rotational" in f["cache"].sentence
    assert "n = 2 times" in f["runs_per_point"].sentence
    # the display bundle: HTML section, plain text, and the JSON part publish reads back
    bundle = f._repr_mimebundle_()
    assert bundle["text/html"].startswith('<section class="sb-findings" id="findings"')
    assert Findings.from_dict(bundle[MIME_TYPE]) == f
    with pytest.raises(PublishError, match="non-empty sentence"):
        Finding("  ")
    with pytest.raises(PublishError, match="newer than this storagebench"):
        Findings.from_dict({"format_version": 99, "findings": []})


def test_table_units_digits_p_values_and_no_index(tables):
    runs, hist = tables
    pts = sweep_summary(runs, hist).points.set_index(["numjobs", "iodepth"])
    styled = table(pts)
    frame = styled.data
    heads = list(frame.columns)
    assert heads[:3] == ["numjobs", "iodepth", "n"]  # the index became columns
    assert "IOPS (1/s)" in heads and "IOPS: 95% CI (1/s)" in heads and "mean latency, lat: 95% CI (ms)" in heads and "mean latency, lat (ms)" in heads
    assert "p99 completion latency, clat (ms)" in heads and "lat_mean_ns" not in heads
    page = styled.to_html()
    assert "<th" in page and 'class="sb-table"' in page and "row_heading" not in page  # no index column
    row = pts.iloc[-1]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert fmt_number(row["lat_mean_ns"] * 1e-6) in cells and fmt_number(row["iops"]) in cells
    assert f"{fmt_number(row['iops_ci_low'])}\u00a0–\u00a0{fmt_number(row['iops_ci_high'])}" in cells
    # p-values, booleans and several CIs in one table (each named)
    df = pd.DataFrame({"x": [1.0, 2.0], "x_ci_low": [0.5, 1.5], "x_ci_high": [1.5, 2.5], "y": [3.0, 4.0],
                       "y_ci_low": [2.0, 3.0], "y_ci_high": [4.0, 5.0], "p_adjusted": [8.25e-230, 0.3873],
                       "flagged": [True, False]})
    out = table(df)
    assert list(out.data.columns) == ["x", "x: 95% CI", "y", "y: 95% CI", "p_adjusted", "flagged"]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", out.to_html())
    assert "&lt; 1e-06" in cells and "0.387" in cells and "yes" in cells and "1.50\u00a0–\u00a02.50" in cells
    with pytest.raises(PublishError, match="pandas DataFrame"):
        table([1, 2])


def test_table_of_one_metric_per_tool_and_limits_of_agreement():
    """Columns "<tool> <tidy column>" (the cross-tool table) get the tidy column's unit and words."""
    from storagebench.published import load_published
    from storagebench.stats import cross_tool, cross_tool_table

    ct = cross_tool(load_published("vsan_qd_threads"), tool_col="source_tool", baseline="DiskSPD",
                    metric="lat_mean_ns")
    tab = cross_tool_table(ct)
    out = table(tab)
    heads = list(out.data.columns)
    assert heads[:3] == ["configurations", "DiskSPD mean latency, lat (ms)", "FIO mean latency, lat (ms)"]
    assert "lower LoA" in heads and "lower LoA: 95% CI" in heads and "upper LoA: 95% CI" in heads
    assert out.data["DiskSPD mean latency, lat (ms)"].iloc[0] == pytest.approx(tab["DiskSPD lat_mean_ns"].iloc[0] / 1e6)
    assert column_display("FIO iops") == ("FIO IOPS (1/s)", 1.0)
    assert column_display("DiskSPD my thing") == ("DiskSPD my thing", 1.0)  # not a tidy column: as is


def test_figure_is_vector_numbered_and_described(tables):
    runs, hist = tables
    ax = plots.clat_cdf(hist, runs=runs, by="iodepth", where={"numjobs": 2})
    fig = show.figure_html(ax, "Latency percentiles.", provenance="study demo", number=7)
    assert fig.mime == "image/svg+xml" and fig.data.lstrip().startswith(b"<?xml") and fig.width_px > 500
    page = fig._repr_html_()
    assert '<span class="sb-fignum">Figure 7.</span> Latency percentiles.' in page and "Data: study demo" in page
    assert "against completion latency" in fig.alt and "iodepth: 1, 4, 16" in fig.alt
    png = show.figure_html(ax, "Same, raster.", fmt="png", dpi=200, number=8)
    raw = png.data
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    import io

    from PIL import Image

    with Image.open(io.BytesIO(raw)) as im:  # 200 dpi: 2.5x the pixels of the 80 px/in it is shown at
        assert im.width >= 2 * png.width_px and round(im.info["dpi"][0]) == 200
    assert base64.b64encode(raw).decode()[:20] in png._repr_html_()
    for bad, msg in (({"caption": ""}, "needs a caption"), ({"caption": "x", "dpi": 110}, "dpi must be"),
                     ({"caption": "x", "fmt": "gif"}, "fmt must be")):
        with pytest.raises(PublishError, match=msg):
            show.figure_html(ax, **bad)


def test_collapsed_keeps_the_detail_behind_one_line(tables):
    runs, _ = tables
    from storagebench.stats import littles_law

    checked = littles_law(runs)
    line = stats.littles_law_summary(checked)
    assert f"for {len(checked)} of {len(checked)} runs" in line and "no run is flagged" in line
    box = show.collapsed(f"All {len(checked)} runs", stats.littles_law_table(checked))
    page = box._repr_html_()
    assert page.startswith('<details class="sb-details"><summary>All 12 runs</summary>') and page.count("<tr") == 13


def test_findings_of_several_parts_name_each_source_once():
    from storagebench.published import load_published
    from storagebench.stats import cross_tool, cross_tool_findings

    parts = [cross_tool_findings(cross_tool(load_published(name), tool_col="source_tool", baseline="DiskSPD",
                                            match_on=match), provenance="seed 002 (StarWind)")
             for name, match in (("vsan_qd_threads", None), ("vsan_stripe", ["stripe_width", "vms"]))]
    both = Findings.concat([*parts, Findings((Finding("x"),), provenance="seed 001")])
    assert both.provenance == "seed 002 (StarWind); seed 001" and len(both) == len(parts[0]) + len(parts[1]) + 1


def test_column_words_and_values_for_sentences():
    from storagebench.tables import metric_words, value_text

    assert [metric_words(m) for m in ("iops", "clat_p99_ns", "lat_mean_ns", "bw_bytes_per_s", "pattern")] == \
        ["IOPS", "p99 completion latency (clat)", "mean latency (lat)", "bandwidth", "pattern"]
    assert [value_text(c, v) for c, v in (("bs_bytes", 4096), ("bs_bytes", 1 << 20), ("rwmixread_pct", 70),
                                          ("pattern", "4k_randread"), ("iodepth", 16), ("clat_p99_ns", 2.5e6))] == \
        ["bs 4 KiB", "bs 1,024 KiB", "rwmixread 70%", "pattern 4k_randread", "iodepth 16", "clat_p99 2.50 ms"]


def test_a_long_method_is_cut_after_a_whole_clause():
    from storagebench.findings import short_method

    method = ("geometric mean of the ratios; p and CI from a paired t-test on the log ratios (Student 1908; CI = "
              "exp(t CI)); Wilcoxon signed-rank test (Wilcoxon 1945); Holm (1979) over 6 comparisons")
    assert short_method(method, 200) == method
    assert short_method(method, 120) == ("geometric mean of the ratios; p and CI from a paired t-test on the log ratios "
                                         "(Student 1908; CI = exp(t CI)) …")  # not inside the parentheses
    assert short_method(method, 10) == "geometric mean of the ratios …"  # the first clause stays whole
    f = Findings((Finding("x.", n=2, unit_of_replication="runs", method=method),))
    assert len(f[0].detail()) > len(f[0].detail(limit=120))


def test_collapsed_detail_scrolls_sideways_on_its_own():
    wide = pd.DataFrame({f"c{i}": [i] for i in range(60)})
    page = show.collapsed("60 columns", wide)._repr_html_()
    inner = page.split('<div class="sb-scroll">', 1)[1]
    assert page.count('class="sb-scroll"') == 1 and "<table" in inner and inner.endswith("</table>\n</div></details>")


def test_confidence_level_is_the_one_default_and_refuses_what_is_not_a_level():
    """``confidence_level(None)`` is what a notebook whose ``confidence`` parameter is left at None uses."""
    from storagebench.errors import StudyError
    from storagebench.findings import CONFIDENCE, confidence_level

    assert confidence_level(None) == CONFIDENCE and confidence_level(0.9) == 0.9
    assert confidence_level(np.float32(0.5)) == 0.5 and type(confidence_level(np.float64(0.99))) is float
    for bad in (95, 1, 0, -0.5, True, "0.9", float("nan"), [0.9]):
        with pytest.raises(ValueError, match=rf"^-p confidence must be a number in \(0, 1\), e\.g\. {CONFIDENCE:g}, "
                                             rf"got {re.escape(repr(bad))}$"):
            confidence_level(bad, name="-p confidence")
    with pytest.raises(StudyError, match="confidence must be a number"):
        confidence_level(1.5, error=StudyError)


def test_a_finding_kind_is_its_key_up_to_the_colon():
    assert Finding("x", key="verdict:3").kind == "verdict" and Finding("x", key="peak_iops").kind == "peak_iops"
    f = Finding("x", estimate=np.float64("nan"), confidence=np.float64(0.9), n=np.int64(4), ci=(1, float("nan")))
    assert (f.estimate, f.confidence, f.n, f.ci) == (None, 0.9, 4, None) and type(f.confidence) is float

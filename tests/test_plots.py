"""plots: every figure function on a real study (fio runs captured by the runner), units on every axis."""

from __future__ import annotations

import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection, QuadMesh
from scipy.stats import gmean

from storagebench import plots, stats
from storagebench._histogram import percentiles_from_bins
from storagebench.errors import SchemaError
from storagebench.ingest import ingest_study
from storagebench.publish import study_provenance
from storagebench.stats import points as stats_points

STUDY = FIXTURES / "study_demo"


@pytest.fixture(scope="module")
def tables():
    res = ingest_study(STUDY)
    return res.runs, res.histograms


@pytest.fixture
def runs(tables):
    return tables[0]


@pytest.fixture
def hist(tables):
    return tables[1]


def _per_run(runs: pd.DataFrame) -> pd.DataFrame:
    """Independent reference: sum IOPS/bw over jobs, lat weighted by completed I/Os."""
    r = runs.assign(lat_w=runs["lat_mean_ns"] * runs["total_ios"])
    g = r.groupby(["run_id", "numjobs", "iodepth"], as_index=False)[["iops", "bw_bytes_per_s", "lat_w", "total_ios"]].sum()
    g["lat_ms"] = g["lat_w"] / g["total_ios"] / 1e6
    return g


def _unit(label: str) -> bool:
    return "(" in label and ")" in label


def test_fixture_is_a_real_repeated_study(runs, hist):
    # the figures must be exercised on a grid with numjobs > 1 and repetitions (CI bands)
    assert runs["numjobs"].nunique() >= 2 and runs["iodepth"].nunique() >= 3
    assert runs.groupby(["numjobs", "iodepth"])["run_id"].nunique().min() >= 2
    assert (hist["count"] > 0).all()


def test_per_run_sums_jobs_and_weights_latency(runs):
    pr = stats_points._per_run(runs).set_index("run_id").sort_index()
    ref = _per_run(runs).set_index("run_id").sort_index()
    np.testing.assert_allclose(pr["iops"], ref["iops"])
    np.testing.assert_allclose(pr["lat_mean_ns"] / 1e6, ref["lat_ms"])
    assert (pr["n_rows"] == runs.groupby("run_id").size().sort_index()).all()
    # one row per run (group_reporting): fio's own percentiles are kept
    np.testing.assert_allclose(pr["clat_p99_ns"], runs.set_index("run_id").sort_index()["clat_p99_ns"])


def test_per_run_of_two_jobs_has_no_averaged_percentiles(runs):
    # the same run reported per job (numjobs without group_reporting): two rows, IOPS add up
    one = runs.iloc[[0]]
    two = pd.concat([one, one.assign(job_index=1, iops=one["iops"] / 2, lat_mean_ns=one["lat_mean_ns"] * 3,
                                     total_ios=one["total_ios"] // 2)])
    pr = stats_points._per_run(two)
    assert len(pr) == 1 and pr["n_rows"].iloc[0] == 2
    assert pr["iops"].iloc[0] == pytest.approx(1.5 * one["iops"].iloc[0])
    w = one["total_ios"].iloc[0]
    want = (one["lat_mean_ns"].iloc[0] * w + 3 * one["lat_mean_ns"].iloc[0] * (w // 2)) / (w + w // 2)
    assert pr["lat_mean_ns"].iloc[0] == pytest.approx(want)
    # percentiles cannot be combined over jobs without their bins: NaN with a note, never averaged
    assert pr["clat_p99_ns"].isna().all() and "never averaged" in pr["note"].iloc[0]


def test_per_run_is_the_stats_aggregation(runs):
    from storagebench.stats import per_run

    one = runs.iloc[[0]]
    two = pd.concat([one, one.assign(job_index=1, usr_cpu_pct=one["usr_cpu_pct"] + 4, slat_mean_ns=1e3,
                                     total_ios=one["total_ios"] * 3)])
    pr = stats_points._per_run(two)
    pd.testing.assert_frame_equal(pr, per_run(two, latency=None))
    assert pr["usr_cpu_pct"].iloc[0] == pytest.approx(one["usr_cpu_pct"].iloc[0] + 2)  # mean over the 2 jobs
    want = (one["slat_mean_ns"].iloc[0] + 3 * 1e3) / 4  # weighted by completed I/Os (1 : 3)
    assert pr["slat_mean_ns"].iloc[0] == pytest.approx(want)
    # a factor that differs between the rows of one run has no per-run value: said, not guessed
    mixed = two.assign(bs_bytes=[4096, 65536])
    with pytest.raises(ValueError, match="`bs_bytes` differs between the rows of one run"):
        stats.per_point(mixed, by=["bs_bytes"])


def test_iops_vs_iodepth_one_line_per_numjobs_with_means(runs):
    ax = plots.iops_vs_iodepth(runs)
    assert isinstance(ax, Axes)
    levels = sorted(runs["numjobs"].unique())
    assert len(ax.lines) == len(levels)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [str(v) for v in levels]
    assert "numjobs" in ax.get_legend().get_title().get_text()
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert "iodepth" in ax.get_xlabel() and _unit(ax.get_xlabel())
    assert "IOPS" in ax.get_ylabel() and "per s" in ax.get_ylabel()
    ref = _per_run(runs).groupby(["numjobs", "iodepth"])["iops"].agg(gmean)  # the estimand: geometric mean of runs
    for line, nj in zip(ax.lines, levels, strict=True):
        x, y = line.get_xdata(), line.get_ydata()
        np.testing.assert_allclose(y, [ref[(nj, d)] for d in x])
    assert len(ax.collections) == len(levels)  # one CI band per line (>= 2 repetitions per point)


def test_iops_vs_iodepth_without_bands_and_in_bandwidth(runs):
    ax = plots.iops_vs_iodepth(runs, confidence=None, metric="bw_MiB_per_s")
    assert len(ax.collections) == 0
    assert "MiB/s" in ax.get_ylabel() and "2^20" in ax.get_ylabel()
    ref = _per_run(runs).groupby(["numjobs", "iodepth"])["bw_bytes_per_s"].agg(gmean) / 2**20
    nj = sorted(runs["numjobs"].unique())[0]
    line = ax.lines[0]
    np.testing.assert_allclose(line.get_ydata(), [ref[(nj, d)] for d in line.get_xdata()])


def test_latency_vs_iops_marks_the_knee(runs):
    pts = _per_run(runs).groupby(["numjobs", "iodepth"])[["iops", "lat_ms"]].agg(gmean)
    knee = {"numjobs": int(pts.index[1][0]), "iodepth": int(pts.index[1][1])}
    ax = plots.latency_vs_iops(runs, knee=knee)
    assert "ms" in ax.get_ylabel() and "latency" in ax.get_ylabel()
    assert "IOPS" in ax.get_xlabel() and _unit(ax.get_xlabel())
    knee_lines = [ln for ln in ax.lines if ln.get_label().startswith("knee")]
    data_lines = [ln for ln in ax.lines if not ln.get_label().startswith(("knee", "_"))]
    assert len(knee_lines) == 1 and len(data_lines) == runs["numjobs"].nunique()
    kx, ky = knee_lines[0].get_xdata()[0], knee_lines[0].get_ydata()[0]
    want = pts.loc[(knee["numjobs"], knee["iodepth"])]
    assert kx == pytest.approx(want["iops"]) and ky == pytest.approx(want["lat_ms"])
    assert any(t.get_text().startswith("knee (numjobs=") for t in ax.get_legend().get_texts())
    assert "95% CI, log scale, each point's own runs" in ax.get_legend().get_title().get_text()
    # latency rises along each line from the lowest to the highest iodepth (the hockey stick)
    for ln in data_lines:
        y = np.asarray(ln.get_ydata())
        assert y[-1] > y[0]


def test_latency_vs_iops_accepts_an_object_with_attributes(runs):
    class Rec:
        numjobs = int(runs["numjobs"].min())
        iodepth = int(runs["iodepth"].max())

    ax = plots.latency_vs_iops(runs, knee=Rec())
    assert any(ln.get_label().startswith("knee (numjobs=") for ln in ax.lines)


def test_latency_vs_iops_refuses_a_knee_outside_the_grid(runs):
    with pytest.raises(ValueError, match=r"not a point of `runs`.*iodepth"):
        plots.latency_vs_iops(runs, knee={"numjobs": 3, "iodepth": 7})
    with pytest.raises(ValueError, match="The value for `latency` must be one of"):
        plots.latency_vs_iops(runs, latency="lat_mean_ns")


def test_heatmap_one_cell_per_point(runs):
    ax = plots.heatmap(runs, x="iodepth", y="numjobs", metric="iops")
    mesh = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(mesh) == 1
    nj, qd = runs["numjobs"].nunique(), runs["iodepth"].nunique()
    values = np.asarray(mesh[0].get_array()).reshape(nj, qd)
    ref = _per_run(runs).groupby(["numjobs", "iodepth"])["iops"].agg(gmean).unstack()
    np.testing.assert_allclose(values, ref.sort_index(ascending=False).to_numpy())
    assert "iodepth" in ax.get_xlabel() and "numjobs" in ax.get_ylabel()
    cbar = ax.figure.axes[-1]
    assert "IOPS" in cbar.get_ylabel() and "per s" in cbar.get_ylabel()
    assert len(ax.texts) == nj * qd  # annotated cells


def test_heatmap_of_latency_in_ms(runs):
    ax = plots.heatmap(runs, metric="lat_mean_ms", annot=False)
    assert "(ms)" in ax.figure.axes[-1].get_ylabel()
    assert len(ax.texts) == 0


def test_heatmap_log_colour_scale_when_one_cell_dwarfs_the_rest(runs):
    """Seed 001's HDD table: ~100 IOPS cells and one cached sequential-read cell at 29,736 IOPS."""
    from matplotlib.colors import LogNorm

    from storagebench.published import load_published

    df = load_published("hdd_iops")
    part = df[df["bs_bytes"] == 4096]
    assert part["iops"].max() / part["iops"].min() > plots.HEATMAP_LOG_RATIO
    ax = plots.heatmap(part, x="random_pct", y="rwmixread_pct", metric="iops")
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    assert isinstance(mesh.norm, LogNorm)
    assert (mesh.norm.vmin, mesh.norm.vmax) == (part["iops"].min(), part["iops"].max())
    assert "log colour scale" in ax.figure.axes[-1].get_ylabel()
    # the typical cells are told apart: ~76 and ~146 IOPS are far apart in colour, not both at the bottom
    lo, hi = np.percentile(part["iops"], [10, 90])
    assert mesh.norm(hi) - mesh.norm(lo) > 0.1
    linear = plots.heatmap(part, x="random_pct", y="rwmixread_pct", metric="iops", log=False)
    assert not isinstance(next(c for c in linear.collections if isinstance(c, QuadMesh)).norm, LogNorm)
    with pytest.raises(ValueError, match="needs every cell > 0"):
        plots.heatmap(part, x="random_pct", y="rwmixread_pct", metric="lat_mean_ms", log=True)  # 0 ms cells
    # a grid within 100x keeps the linear scale
    ax = plots.heatmap(runs, x="iodepth", y="numjobs", metric="iops")
    assert not isinstance(next(c for c in ax.collections if isinstance(c, QuadMesh)).norm, LogNorm)


def test_clat_cdf_from_merged_bins_marks_p50_p99(runs, hist):
    nj = int(runs["numjobs"].max())
    ax = plots.clat_cdf(hist, runs=runs, by="iodepth", where={"numjobs": nj})
    depths = sorted(runs.loc[runs["numjobs"] == nj, "iodepth"].unique())
    curves = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
    assert [ln.get_label() for ln in curves] == [str(d) for d in depths]
    assert ax.get_xscale() == "log" and "ms" in ax.get_xlabel() and "clat" in ax.get_xlabel()
    assert "CDF" in ax.get_ylabel()
    ids = runs.loc[(runs["numjobs"] == nj) & (runs["iodepth"] == depths[-1]), "run_id"].unique()
    pooled = hist[hist["run_id"].isin(ids)].groupby("bin_ns", as_index=False)["count"].sum()
    want = percentiles_from_bins(pooled["bin_ns"], pooled["count"], [50, 99])
    marks = ax.collections[-1].get_offsets()
    np.testing.assert_allclose(marks[:, 0], [want[50.0] / 1e6, want[99.0] / 1e6])
    np.testing.assert_allclose(marks[:, 1], [0.5, 0.99])
    # the tail axis: -log10(1 - p), so p50, p90, p99, p99.9 are equally spaced and labelled as percentiles
    assert ax.get_yscale() == "function"
    spaced = ax.transData.transform([(1.0, p) for p in (0.5, 0.9, 0.99, 0.999)])[:, 1]
    np.testing.assert_allclose(np.diff(spaced[1:]), np.diff(spaced[1:2 + 1])[0], rtol=1e-6)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert {"p50", "p90", "p99", "p99.9"} <= set(ticks)
    # the last bin holds the slowest I/O: on the tail axis it is drawn at 1 - 1/(2N), not at infinity
    n = int(pooled["count"].sum())
    assert curves[-1].get_ydata()[-1] == pytest.approx(1 - 1 / (2 * n))
    lin = plots.clat_cdf(hist, runs=runs, by="iodepth", where={"numjobs": nj}, kind="cdf")
    assert [ln for ln in lin.lines if not ln.get_label().startswith("_")][-1].get_ydata()[-1] == pytest.approx(1.0)
    # more outstanding I/O, slower median
    medians = [ax.collections[i].get_offsets()[0, 0] for i in range(len(depths))]
    assert medians == sorted(medians)


def test_clat_cdf_tail_kind_and_bad_kind(runs, hist):
    ax = plots.clat_cdf(hist, kind="ccdf")
    assert ax.get_yscale() == "log" and "1 - CDF" in ax.get_ylabel()
    with pytest.raises(ValueError, match=r"The value for `kind` must be one of \['percentile', 'cdf', 'ccdf'\], but 'pdf' was passed"):
        plots.clat_cdf(hist, kind="pdf")
    with pytest.raises(SchemaError, match="pass `runs`"):
        plots.clat_cdf(hist, by="iodepth")


def test_metric_vs_any_factor(runs):
    ax = plots.metric_vs(runs, x="numjobs", metric="bw_MB_per_s", hue="iodepth", logx=True)
    assert len(ax.lines) == runs["iodepth"].nunique()
    assert "MB/s" in ax.get_ylabel() and "10^6" in ax.get_ylabel()
    assert "numjobs" in ax.get_xlabel()
    ref = _per_run(runs).groupby(["iodepth", "numjobs"])["bw_bytes_per_s"].agg(gmean) / 1e6
    qd = sorted(runs["iodepth"].unique())[-1]
    np.testing.assert_allclose(ax.lines[-1].get_ydata(), [ref[(qd, n)] for n in ax.lines[-1].get_xdata()])


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        ({"x": "queue_depth"}, SchemaError, r"no column\(s\) \['queue_depth'\]"),
        ({"x": "iodepth", "metric": "latency"}, ValueError, r"The value for `metric` must be one of \[.*'iops'.*\], but 'latency'"),
        ({"x": "iodepth", "hue": "clients"}, SchemaError, r"\['clients'\]"),
        ({"x": "iodepth", "direction": "up"}, ValueError, r"`direction` must be one of \['read', 'write', 'trim'\], but 'up'"),
        ({"x": "iodepth", "direction": "write"}, SchemaError, r"no rows with direction 'write'"),
        ({"x": "iodepth", "confidence": 95}, ValueError, r"`confidence` must be a confidence level"),
        ({"x": "iodepth", "ci": 0.9, "confidence": 0.9}, TypeError, r"both `ci` and `confidence`: pass `confidence` only"),
    ],
)
def test_metric_vs_bad_input(runs, kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        plots.metric_vs(runs, **kwargs)


def test_the_old_ci_keyword_still_sets_the_level_with_a_warning_naming_confidence(runs):
    """``ci=`` was the level's name in plots and per_point; ``ci`` is an interval everywhere else."""
    with pytest.warns(FutureWarning, match=r"metric_vs\(ci=\.\.\.\) is now metric_vs\(confidence=\.\.\.\)"):
        old = plots.metric_vs(runs, x="iodepth", hue="numjobs", ci=0.8)
    new = plots.metric_vs(runs, x="iodepth", hue="numjobs", confidence=0.8)
    assert old.get_legend().get_title().get_text() == new.get_legend().get_title().get_text()
    assert "80% CI" in new.get_legend().get_title().get_text()
    np.testing.assert_array_equal(old.collections[0].get_paths()[0].vertices, new.collections[0].get_paths()[0].vertices)
    with pytest.warns(FutureWarning, match="confidence"):
        by = ["numjobs", "iodepth"]
        assert stats.per_point(runs, by=by, ci=0.8).equals(stats.per_point(runs, by=by, confidence=0.8))


def test_not_a_dataframe_is_refused():
    with pytest.raises(TypeError, match="must be a pandas DataFrame"):
        plots.iops_vs_iodepth([{"iops": 1}])


def test_ratio_forest_from_a_real_comparison(runs):
    from storagebench.stats import compare

    pr = stats_points._per_run(runs)
    lo, hi = sorted(pr["numjobs"].unique())[:2]
    table = compare(pr[pr["numjobs"].isin([lo, hi])], "numjobs", baseline=lo, metric="iops", by="iodepth")
    ax = plots.ratio_forest(table)
    frame = table.to_frame()
    assert len(ax.get_yticklabels()) == len(frame)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), frame["ratio"])
    assert any(np.allclose(ln.get_xdata(), 1.0) for ln in ax.lines[1:])  # reference line at 1
    # 2 repetitions per point: the default estimand (ratio of geometric means, log-scale Welch CI) is
    # bounded and > 0 in every row, where Fieller's set would be unbounded or reach below 0 for some
    assert (frame["estimand"] == "geometric").all()
    assert (frame["ci_low"] > 0).all() and np.isfinite(frame["ci_high"]).all()
    fieller = compare(pr[pr["numjobs"].isin([lo, hi])], "numjobs", baseline=lo, metric="iops", by="iodepth",
                      estimand="arithmetic").to_frame()
    assert (fieller["ci_low"].isna() | (fieller["ci_low"] <= 0)).any()
    # a CI that is not bounded (NaN, or <= 0 on the log axis) is drawn open-ended
    cut = frame.assign(ci_low=[np.nan, -0.1, *frame["ci_low"].iloc[2:]])
    ax = plots.ratio_forest(cut)
    arrows = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in arrows) >= 2
    assert sum(t.get_text() == "CI not bounded" for t in ax.texts) == 2
    ax = plots.ratio_forest(table)
    assert "ratio" in ax.get_xlabel() and f"numjobs={lo}" in ax.get_xlabel()
    with pytest.raises(SchemaError, match="ci_lower"):
        plots.ratio_forest(frame, low="ci_lower")


def _visible_ticks(ax) -> list[float]:
    left, right = ax.get_xlim()
    return [t for t in ax.xaxis.get_majorticklocs() if left <= t <= right]


def test_ratio_forest_ticks_on_a_narrow_span_and_label_from_the_method():
    from storagebench.published import load_published
    from storagebench.stats import compare

    # ratios within +-1 %: more than the lone "1" tick, at round ratios
    narrow = pd.DataFrame({"group": ["a", "b"], "ratio": [0.995, 1.004], "ci_low": [0.985, 0.996],
                           "ci_high": [1.006, 1.012]})
    ax = plots.ratio_forest(narrow)
    ticks = _visible_ticks(ax)
    assert len(ticks) >= 4 and any(np.isclose(t, 1.0) for t in ticks)
    left, right = ax.get_xlim()
    assert right / left < 1.1  # the span is used, not squeezed into the middle of 0.6x .. 1.6x
    labels = [ax.xaxis.get_major_formatter()(t, i) for i, t in enumerate(ticks)]
    assert len(set(labels)) == len(labels)
    # a wide span gets 1-2-5 log ticks
    wide = narrow.assign(ratio=[0.2, 8.0], ci_low=[0.1, 5.0], ci_high=[0.4, 12.0])
    assert {0.2, 0.5, 1.0, 2.0, 5.0} <= {round(t, 6) for t in _visible_ticks(plots.ratio_forest(wide))}
    # paired comparison: geometric mean ratios, and the axis says so
    vsan = load_published("vsan_stripe")
    paired = compare(vsan, "stripe_width", 1, "iops", by=["pattern", "direction"], pair_on=["vms", "source_tool"])
    xl = plots.ratio_forest(paired).get_xlabel()
    assert xl.startswith("geometric mean ratio of iops") and "ratio of mean" not in xl
    # independent arms, default estimand: geometric mean ratio too
    geo = compare(vsan[vsan["source_tool"] == "FIO"], "stripe_width", 1, "iops", by=["pattern", "direction"])
    assert plots.ratio_forest(geo).get_xlabel().startswith("geometric mean ratio of iops")
    # Fieller by name: ratio of means
    indep = compare(vsan[vsan["source_tool"] == "FIO"], "stripe_width", 1, "iops", by=["pattern", "direction"],
                    estimand="arithmetic")
    assert not any("geometric mean" in m.lower() for m in indep.to_frame()["method"])
    assert plots.ratio_forest(indep).get_xlabel().startswith("ratio of mean iops")
    # a mix (rows of both estimands): the geometric rows are open diamonds, and the label says so
    frame = indep.to_frame()
    frame.loc[0, "estimand"] = "geometric"
    ax = plots.ratio_forest(frame)
    assert "open diamonds: geometric mean ratio" in ax.get_xlabel()
    diamonds = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in diamonds) == 1


def test_provenance_caption_and_add_caption(runs):
    prov = study_provenance(STUDY)
    out = json.loads(next((STUDY / "raw").glob("*/output.json")).read_text())
    text = plots.provenance_caption(runs, prov)
    assert out["fio version"] in text
    assert prov[0].hostname in text and prov[0].kernel in text
    if prov[0].device is not None:
        assert prov[0].device.path in text
    # the JSON form of the records gives the same caption (one reader: Provenance.from_json)
    assert plots.provenance_caption(runs, [p.to_json() for p in prov]) == text
    assert f"{runs['run_id'].nunique()} runs" in text and "UTC" in text
    # a figure's caption says the device and filesystem, not the target's path; target=True adds it
    assert not any(t in text for t in runs["target"].unique())
    with_target = plots.provenance_caption(runs, prov, target=True)
    assert f"on {runs['target'].iloc[0]}" in with_target and with_target.replace(f" on {runs['target'].iloc[0]}", "") == text
    ax = plots.iops_vs_iodepth(runs)
    cap = plots.add_caption(ax.figure, text)
    assert cap in ax.figure.texts and cap.get_text() == text
    with pytest.raises(ValueError, match="non-empty"):
        plots.add_caption(ax.figure, "")


def test_summary_table_percentiles_from_merged_bins(runs, hist):
    tab = stats.point_table(runs, hist)
    assert {"IOPS (1/s)", "bandwidth (MB/s)", "mean lat (ms)", "p50 clat (ms)", "p99 clat (ms)"} <= set(tab.columns)
    assert len(tab) == runs.groupby(["numjobs", "iodepth"]).ngroups
    assert list(tab.index.names) == ["numjobs", "iodepth"]
    row = tab.reset_index().iloc[-1]
    ids = runs.loc[(runs["numjobs"] == row["numjobs"]) & (runs["iodepth"] == row["iodepth"]), "run_id"].unique()
    pooled = hist[hist["run_id"].isin(ids)].groupby("bin_ns", as_index=False)["count"].sum()
    want = percentiles_from_bins(pooled["bin_ns"], pooled["count"], [99])[99.0] / 1e6
    assert row["p99 clat (ms)"] == pytest.approx(want, abs=1e-4)


def test_littles_law_table_units_and_ratio(runs):
    from storagebench.stats import littles_law

    tab = stats.littles_law_table(littles_law(runs))
    assert len(tab) == runs["run_id"].nunique()
    assert list(tab.index.names) == ["numjobs", "iodepth", "repetition"]
    # closed loop with libaio: IOPS x mean latency = numjobs x iodepth, within a few %
    np.testing.assert_allclose(tab["IOPS x lat (I/Os)"], tab["outstanding I/Os (numjobs x iodepth)"], rtol=0.05)
    with pytest.raises(SchemaError, match="littles_ratio"):
        stats.littles_law_table(runs)


def test_points_that_mix_configurations_are_refused():
    # seed 002's published QD x threads sweep holds DiskSPD and FIO rows for every cell
    from storagebench.published import load_published

    table = load_published("vsan_qd_threads")
    with pytest.raises(ValueError, match=r"different `source_tool` values \['DiskSPD', 'FIO'\]"):
        plots.iops_vs_iodepth(table)
    fio = table[table["source_tool"] == "FIO"]
    ax = plots.iops_vs_iodepth(fio)
    assert len(ax.lines) == fio["numjobs"].nunique()
    ax = plots.metric_vs(table[table["numjobs"] == 1], x="iodepth", hue="source_tool", metric="iops", logx=True)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["DiskSPD", "FIO"]
    caption = plots.provenance_caption(fio)
    assert "<NA>" not in caption and "32 runs" in caption


def test_latency_vs_iops_draws_p99_beside_the_mean(runs, hist):
    ax = plots.latency_vs_iops(runs, histograms=hist)
    tails = [ln for ln in ax.lines if ln.get_label().startswith("_p99")]
    assert len(tails) == runs["numjobs"].nunique() and all(ln.get_linestyle() == "--" for ln in tails)
    # each dashed point is the p99 of the merged bins of that point's runs (fio's rule), at the point's mean IOPS
    nj = int(runs["numjobs"].max())
    line = next(ln for ln in tails if ln.get_label() == f"_p99 {nj}")
    qd = int(runs.loc[runs["numjobs"] == nj, "iodepth"].max())
    ids = runs.loc[(runs["numjobs"] == nj) & (runs["iodepth"] == qd), "run_id"].unique()
    pooled = hist[hist["run_id"].isin(ids)].groupby("bin_ns", as_index=False)["count"].sum()
    want = percentiles_from_bins(pooled["bin_ns"], pooled["count"], [99])[99.0] / 1e6
    assert line.get_ydata()[-1] == pytest.approx(want, rel=1e-3)
    assert "p99" in ax.get_title() and "ms" in ax.get_ylabel() and "p99 completion latency" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_ylim()[1] >= max(ln.get_ydata().max() for ln in tails)


def test_heatmap_grid_shares_one_colour_scale(runs):
    from storagebench.published import load_published

    df = load_published("hdd_iops")
    fig = plots.heatmap_grid(df, col="bs_bytes", x="random_pct", y="rwmixread_pct", metric="iops")
    meshes = [next(c for c in ax.collections if isinstance(c, QuadMesh)) for ax in fig.axes[:-1]]
    assert len(meshes) == 2 and meshes[0].norm is meshes[1].norm
    assert (meshes[0].norm.vmin, meshes[0].norm.vmax) == (df["iops"].min(), df["iops"].max())
    assert "IOPS" in fig.axes[-1].get_ylabel() and [ax.get_title() for ax in fig.axes[:-1]] == ["4 KiB", "16 KiB"]


def test_bland_altman_plot_draws_the_library_limits():
    from storagebench.published import load_published
    from storagebench.stats import bland_altman

    stripe = load_published("vsan_stripe")
    wide = stripe.pivot_table(index=["pattern", "vms", "stripe_width"], columns="source_tool", values="iops")
    ax = plots.bland_altman_plot(wide["FIO"], wide["DiskSPD"], names=("FIO", "DiskSPD"), unit="IOPS")
    ba = bland_altman(wide["FIO"], wide["DiskSPD"])
    got = {ln.get_gid(): ln.get_ydata()[0] for ln in ax.lines if ln.get_gid()}
    assert got == pytest.approx({"bias": ba.bias, "loa_low": ba.loa_low, "loa_high": ba.loa_high})
    assert len(ax.collections[0].get_offsets()) == ba.n == len(wide)
    assert ax.get_yscale() == "log" and "FIO / DiskSPD" in ax.get_ylabel()


def test_cross_tool_plot_one_panel_coloured_by_group_or_one_panel_per_group():
    from storagebench.published import load_published
    from storagebench.stats import cross_tool

    ct = cross_tool(load_published("vsan_stripe"), tool_col="source_tool", baseline="DiskSPD",
                    match_on=["stripe_width", "vms"], by="pattern", metric="lat_mean_ns")
    fig = plots.cross_tool_plot(ct)
    ax = fig.axes[0]
    assert len(ax.collections) == 6 and sum(len(c.get_offsets()) for c in ax.collections) == 144
    assert [t.get_text() for t in ax.get_legend().get_texts()][0] in set(ct.pairs["pattern"])
    assert "(ms)" in ax.get_xlabel()  # ns shown in ms
    xs = np.sort(np.concatenate([c.get_offsets()[:, 0] for c in ax.collections]))
    want = np.sort((np.sqrt(ct.pairs["lat_mean_ns_FIO"] * ct.pairs["lat_mean_ns_DiskSPD"]) / 1e6).to_numpy())
    np.testing.assert_allclose(xs, want, rtol=1e-12)
    grid = plots.cross_tool_plot(ct, per_group=True)
    panels = [a for a in grid.axes if a.get_title()]
    assert len(panels) == 6 and all("(n = 24)" in a.get_title() for a in panels)
    ag = ct.agreement.set_index("pattern")
    for a in panels:
        bias = next(ln.get_ydata()[0] for ln in a.lines if ln.get_gid() == "bias")
        assert bias == pytest.approx(ag.loc[a.get_title().split(" (n")[0], "bias"])
    ylims = {a.get_ylim() for a in panels}
    assert len(ylims) == 1  # one shared ratio axis
    plt.close("all")


def test_cross_tool_plot_of_too_few_configurations_draws_the_points_only():
    from storagebench.published import load_published
    from storagebench.stats import cross_tool

    s = load_published("vsan_stripe")
    two = s[(s["vms"] <= 2) & (s["stripe_width"] == 1) & (s["pattern"] == "4k random read")]
    ct = cross_tool(two, tool_col="source_tool", baseline="DiskSPD", match_on=["stripe_width", "vms"])
    ax = plots.cross_tool_plot(ct).axes[0]
    assert len(ax.collections[0].get_offsets()) == 2 and not [ln for ln in ax.lines if ln.get_gid()]
    assert "not estimable" in ax.get_title()
    plt.close("all")


def test_hockey_stick_marks_the_recommended_point_and_the_knees_stats_computed(runs, hist):
    """The figure draws the Recommendation: the star on the mean and on the p99 curve, the knee of the mean
    latency on the mean curve and the knee of p99 on the dashed curve, at the points stats chose."""
    from storagebench.stats import recommend_parameters, sweep_summary

    rec = recommend_parameters(runs, histograms=hist)
    ax = plots.latency_vs_iops(runs, knee=rec, histograms=hist)
    labels = [ln.get_label() for ln in ax.lines]
    star = next(ln for ln in ax.lines if ln.get_label().startswith("recommended (numjobs="))
    pts = sweep_summary(runs, hist).points.set_index(["numjobs", "iodepth"])
    want = pts.loc[(rec.numjobs, rec.iodepth)]
    assert star.get_xdata()[0] == pytest.approx(want["iops"]) and star.get_ydata()[0] == pytest.approx(
        want["lat_mean_ns"] * 1e-6)
    tail_star = next(ln for ln in ax.lines if ln.get_label() == "_recommended tail")
    assert tail_star.get_ydata()[0] == pytest.approx(want["clat_p99_ns"] * 1e-6, rel=1e-3)
    k = rec.knees.set_index("curve")
    mean_mark = next(ln for ln in ax.lines if ln.get_label().startswith("knee of mean latency"))
    p99_mark = next(ln for ln in ax.lines if ln.get_label().startswith("knee of p99"))
    m = k.loc["mean latency"]
    assert mean_mark.get_ydata()[0] == pytest.approx(m["lat_mean_ns"] * 1e-6)
    assert f"({int(m['outstanding_ios'])} outstanding I/Os)" in mean_mark.get_label()
    assert p99_mark.get_ydata()[0] == pytest.approx(k.loc["p99 completion latency", "clat_p99_ns"] * 1e-6, rel=1e-3)
    assert ax.get_yscale() == "log" and sum(lab.startswith("_p99") for lab in labels) == runs["numjobs"].nunique()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("knee of p99") for t in legend) and "p99 completion latency" in legend
    # the error bars are stats' intervals: never below 0, on both axes
    assert all(np.asarray(seg)[:, 1].min() > 0 for c in ax.collections for seg in c.get_segments())


def test_parameter_claim_square_sits_on_the_drawn_point():
    """The claimed cell's square is the point latency_vs_iops drew for that cell (geometric mean of its
    runs), here on seed 002's numjobs x iodepth sweep with a second repetition of every run at three times
    its IOPS and latency, so that the arithmetic and the geometric mean of a cell differ."""
    from storagebench.published import load_published

    sweep = load_published("vsan_qd_threads")
    tool = sweep["source_tool"].iloc[0]
    one = sweep[sweep["source_tool"] == tool]
    two = pd.concat([one, one.assign(iops=one["iops"] * 3, lat_mean_ns=one["lat_mean_ns"] * 3,
                                     run_id=one["run_id"] + "/copy", repetition=1)])
    nj, qd = int(one["numjobs"].iloc[0]), int(one["iodepth"].iloc[0])
    verdicts = pd.DataFrame([{"source_tool": tool, "recommended_numjobs": nj, "recommended_iodepth": qd,
                              "claimed_numjobs": nj, "claimed_iodepth": qd}])
    fig = plots.parameter_claim_plot(two, verdicts, by="source_tool", confidence=None)
    square = next(ln for ln in fig.axes[0].lines if ln.get_label().startswith("claimed"))
    cell = two[(two["numjobs"] == nj) & (two["iodepth"] == qd)]
    assert square.get_xdata()[0] == pytest.approx(gmean(cell["iops"]))
    assert square.get_ydata()[0] == pytest.approx(gmean(cell["lat_mean_ns"]) / 1e6)
    assert square.get_xdata()[0] != pytest.approx(cell["iops"].mean())
    plt.close(fig)


def test_publish_knows_every_figure_function_of_plots(tmp_path):
    """Issue 19: publish's figure calls are derived from ``plots.__all__``, not kept by hand: every public
    function returning an Axes or a Figure is one (``parameter_claim_plot`` was missing from the hand list),
    and a cell calling it without an image in its outputs is reported."""
    import inspect

    import nbformat

    from storagebench import publish

    drawing = {n for n in plots.__all__ if callable(getattr(plots, n))
               and re.search(r"\b(Axes|Figure)\b", str(inspect.signature(getattr(plots, n)).return_annotation))}
    assert "parameter_claim_plot" in drawing and len(drawing) >= 10
    assert drawing == publish.figure_calls() - publish.OTHER_FIGURE_CALLS
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)"),
                                         nbformat.v4.new_code_cell("plots.parameter_claim_plot(sweep, v, by='tool')")])
    nbformat.write(nb, str(tmp_path / "x.ipynb"))
    assert publish.missing_figures(tmp_path / "x.ipynb") == [(1, "plots.parameter_claim_plot(sweep, v, by='tool')")]

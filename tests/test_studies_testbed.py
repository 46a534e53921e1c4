"""The four testbed studies, --quick, end to end on real loop/btrfs/zram devices as root.

Each test checks the verdict table against numbers recomputed here from the tidy runs, and that
no loop device, mount or zram device of ours is left behind.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storagebench.errors import StatsError, StudyError, TestbedError
from storagebench.stats import pilot_cv, tost_sample_size
from storagebench.testbed_studies import (
    STUDIES,
    analyse,
    analyse_fast_vs_slow,
    load_tables,
    load_testbed_record,
    notebook_path,
    run_testbed_study,
    study_spec,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _testbed_and_nothing_left(testbed_ready, fio_bin):
    yield


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Run a quick study once per module (lazily, by name) into one results root."""
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices)")
    root = tmp_path_factory.mktemp("testbed-results")
    done: dict[str, object] = {}

    def get(name: str, **kw):
        if name not in done:
            try:
                done[name] = run_testbed_study(name, out_dir=root, quick=True, **kw)
            except TestbedError as exc:
                if "is not installed" in str(exc):  # mkfs.xfs / mkfs.btrfs missing on this host
                    pytest.skip(str(exc))
                raise
        return done[name]

    get.root = root
    return get


def _totals(study_dir: Path) -> pd.DataFrame:
    """Per-run IOPS (directions summed) straight from the tidy runs table."""
    runs, _ = load_tables(study_dir)
    return runs.groupby("run_id", as_index=False).agg(
        iops=("iops", "sum"), **{c: (c, "first") for c in runs.columns if c in
                                ("datastore", "stripe_width", "pattern", "mix", "bs_bytes", "device", "load",
                                 "layout", "workload", "numjobs", "iodepth")})


def _ratio(other: pd.Series, base: pd.Series, note: str = "") -> float:
    """The ratio compare reports: its default estimand, the ratio of geometric means."""
    return float(np.exp(np.log(other).mean() - np.log(base).mean()))


def _planned(name: str) -> int:
    return len(study_spec(name, quick=True).expand())


def test_specs_load_and_bad_names():
    for name in STUDIES:
        full, quick = study_spec(name), study_spec(name, quick=True)
        assert quick.name == f"{name}-quick" and len(quick.expand()) < len(full.expand())
    with pytest.raises(StudyError, match=r"must be one of \['rdm_vs_vmfs', .*got 'nope'"):
        run_testbed_study("nope")


def test_rdm_vs_vmfs_quick(quick):
    out = quick("rdm_vs_vmfs")
    assert (out.completed, out.failed) == (_planned("rdm_vs_vmfs"), 0)
    rec = load_testbed_record(out.study_dir)
    assert rec["devices"][0]["kind"] == "loop" and rec["devices"][0]["direct_io"] is True
    assert any(d.get("fstype") == "ext4" for d in rec["devices"])
    v = out.tables["verdicts"]
    t = _totals(out.study_dir)
    for _, row in v[v["metric"] == "iops"].iterrows():
        sel = (t["mix"] == row["mix"]) & (t["bs_bytes"] == row["bs_bytes"])
        raw = t.loc[sel & (t["datastore"] == "raw"), "iops"]
        fs = t.loc[sel & (t["datastore"] == row["level"]), "iops"]
        assert row["ratio"] == pytest.approx(_ratio(fs, raw, row["note"]), rel=1e-9)
        # the CV from the log-scale SD pooled over both arms, planned at its 80% upper confidence bound
        lr, lf = np.log(raw.to_numpy()), np.log(fs.to_numpy())
        df = len(lr) + len(lf) - 2
        s2 = (((lr - lr.mean()) ** 2).sum() + ((lf - lf.mean()) ** 2).sum()) / df
        assert row["cv_pct"] == pytest.approx(np.sqrt(np.expm1(s2)) * 100, rel=1e-9)
        pcv = pilot_cv([raw.to_numpy(), fs.to_numpy()])
        assert row["cv_upper_pct"] == pytest.approx(pcv.cv_upper * 100, rel=1e-9) and pcv.df == df
        try:
            needed = tost_sample_size(pcv, 0.01)
        except StatsError:  # more than n_max runs: reported as NaN, never a made-up number
            needed = float("nan")
        assert row["n_needed_per_arm"] == needed or (np.isnan(needed) and np.isnan(row["n_needed_per_arm"]))
        assert row["margin"] == 0.01
    assert (out.study_dir / "analysis" / "verdicts.csv").exists()


def test_stripe_width_quick(quick):
    out = quick("stripe_width")
    assert (out.completed, out.failed) == (_planned("stripe_width"), 0)
    rec = load_testbed_record(out.study_dir)
    raid = [d for d in rec["devices"] if d.get("profile") == "raid0"]
    assert len(raid) == 1 and len(raid[0]["devices"]) == 4
    t = _totals(out.study_dir)
    t["stripe_width"] = t["stripe_width"].astype(str)
    for _, row in out.tables["verdicts"].iterrows():
        p = t[t["pattern"] == row["pattern"]]
        expect = _ratio(p.loc[p["stripe_width"] == "4", "iops"], p.loc[p["stripe_width"] == "1", "iops"], row["note"])
        assert row["ratio"] == pytest.approx(expect, rel=1e-9)
        assert row["p_adjusted"] >= row["p"]


def test_consolidation_quick_runs_pairs_concurrently(quick):
    out = quick("consolidation")
    assert (out.completed, out.failed) == (_planned("consolidation"), 0)
    # the two workloads of each (layout, repetition) really ran at the same time
    spans: dict[tuple, list] = {}
    for d in (out.study_dir / "raw").iterdir():
        point = json.loads((d / "point.json").read_text())
        prov = json.loads((d / "provenance.json").read_text())
        start = datetime.fromisoformat(str(prov["started_at"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(prov["finished_at"]).replace("Z", "+00:00"))
        spans.setdefault((point["factors"]["layout"], point["repetition"]), []).append((start, end))
    assert len(spans) == 4
    for pair in spans.values():
        (s1, e1), (s2, e2) = pair
        overlap = (min(e1, e2) - max(s1, s2)).total_seconds()
        assert overlap > 0.5 * min((e1 - s1).total_seconds(), (e2 - s2).total_seconds())
    # resume with half a pair missing: both runs of that pair are measured again, together
    import shutil

    victim = sorted((out.study_dir / "raw").iterdir())[0]
    shutil.rmtree(victim)
    again = run_testbed_study("consolidation", out_dir=quick.root, quick=True)
    assert (again.completed, again.skipped, again.failed) == (2, out.completed - 2, 0)
    assert victim.is_dir()
    pooled = out.tables["pooled"]
    assert set(pooled["layout"]) == {"isolated", "shared"} and set(pooled["workload"]) == {"store", "oltp"}
    assert (pooled["clat_p99_ms"] >= pooled["clat_p90_ms"]).all()
    # pooled p99 from merged bins lies within the per-run p99 range of its runs
    pr = out.tables["per_run"]
    for _, row in pooled.iterrows():
        r = pr[(pr["workload"] == row["workload"]) & (pr["layout"] == row["layout"])]["clat_p99_ns"] / 1e6
        assert r.min() - 1e-9 <= row["clat_p99_ms"] <= r.max() + 1e-9


def test_fast_vs_slow_quick(quick):
    out = quick("fast_vs_slow", qos_p99_ms=50.0)
    assert (out.completed, out.failed) == (_planned("fast_vs_slow"), 0)
    notes = " ".join(load_testbed_record(out.study_dir)["notes"])
    assert "zram" in notes or "tmpfs" in notes
    scores = out.tables["scores"]
    lowest = scores["outstanding_ios"].min()
    base = scores[(scores["device"] == "slow") & (scores["outstanding_ios"] == lowest)]
    assert base["score"].iloc[0] == 1.0 and np.isnan(base["score_ci_low"].iloc[0])  # the baseline: 1, no CI
    t = _totals(out.study_dir)
    imp = out.tables["improvement"]
    for _, row in imp.iterrows():
        g = t[t["load"] == row["load"]]
        ratio = _ratio(g.loc[g["device"] == "fast", "iops"], g.loc[g["device"] == "slow", "iops"], row["note"])
        assert row["improvement_pct"] == pytest.approx((ratio - 1) * 100, rel=1e-9)
    qos = out.tables["qos"].set_index("device")
    for dev, g in scores.groupby("device"):
        g = g.sort_values("outstanding_ios")
        first_fail = g[~g["meets"]]["outstanding_ios"].min()
        passing = g[g["outstanding_ios"] < first_fail] if np.isfinite(first_fail) else g
        expect = None if passing.empty else int(passing["outstanding_ios"].max())
        got = qos.loc[dev, "max_outstanding_ios"]
        assert (got is None or pd.isna(got)) if expect is None else int(got) == expect
    # a lower limit can only lower the highest load that meets it
    runs, hist = load_tables(out.study_dir)
    strict = analyse_fast_vs_slow(runs, hist, qos_p99_ms=1e-6)["qos"]
    assert strict["max_load"].isna().all()
    with pytest.raises(StatsError, match="qos_p99_ms must be a positive"):
        analyse_fast_vs_slow(runs, hist, qos_p99_ms=-1)
    # (resume, a second call measuring nothing, is checked through the CLI below)
    assert set(analyse(out.study_dir)) == {"scores", "improvement", "qos"}


def test_verdict_claims_no_direction_without_a_ci():
    """A significant p beside a CI that is not estimable (or includes 1) is not a direction."""
    from storagebench.testbed_studies import NO_CI_VERDICT, direction_verdicts, verdict_text

    v = pd.DataFrame({
        "workload": ["oltp", "oltp", "store", "store"],
        "metric": ["iops", "clat_p99_ns", "iops", "clat_p99_ns"],
        "ratio": [0.8, 1.3, 1.1, 0.9], "ci_low": [np.nan, 1.1, 0.9, 0.8], "ci_high": [np.nan, 1.6, 1.3, 0.95],
        "p_adjusted": [0.001, 0.01, 0.01, 0.02],
    })
    iops = v["metric"] == "iops"
    words = direction_verdicts(v, 0.05, np.where(iops, "better shared", "worse shared"),
                               np.where(iops, "worse shared", "better shared"))
    assert list(words) == [NO_CI_VERDICT, "worse shared", "no difference shown", "better shared"]
    text = verdict_text("consolidation", {"verdicts": v.assign(verdict=words), "pooled": pd.DataFrame()})
    first = text.splitlines()[0]
    assert "CI not estimable" in first and "worse" not in first and "better" not in first
    imp = pd.DataFrame({"load": ["low", "high"], "outstanding_ios": [1, 8], "improvement_pct": [-20.0, 50.0],
                        "ci_low_pct": [np.nan, 10.0], "ci_high_pct": [np.nan, 90.0], "p_adjusted": [0.01, 0.01]})
    text = verdict_text("fast_vs_slow", {"improvement": imp, "qos": pd.DataFrame()})
    low, high = text.splitlines()[:2]
    assert "not estimable" in low and NO_CI_VERDICT in low and "improves" not in low and "slower" not in low
    assert high.endswith("fast is faster.")


@pytest.mark.parametrize("name", STUDIES)
def test_notebook_cells_run_on_quick_results(quick, name):
    """The write-up's cells (parameters, then calls into storagebench) run on the study's data.

    Executed in this process (no kernel start) with the parameters cell's values replaced, as
    papermill would inject them; one notebook also goes through papermill below.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import nbformat

    out = quick(name)
    nb = nbformat.read(notebook_path(name), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert all(not c.outputs for c in code), "notebooks are stored without outputs"
    params = {}
    for line in code[0].source.splitlines():
        assert re.match(r"^\w+: \w+ = .+  # .+", line), f"parameter line needs a type and a comment: {line!r}"
        params[line.split(":")[0]] = None
    assert "study_dir" in params
    ns: dict = {}
    exec(code[0].source, ns)  # the defaults parse
    ns["study_dir"] = str(out.study_dir)
    for cell in code[1:]:
        for p in params:  # no later cell reassigns a parameter
            assert not re.search(rf"^{p}\s*=", cell.source, re.MULTILINE)
        exec(cell.source, ns)
    assert set(ns["tables"]) == set(out.tables)


def test_publish_report_and_cli(quick, tmp_path):
    from typer.testing import CliRunner

    from storagebench.cli import app
    from storagebench.publish import publish_report

    out = quick("fast_vs_slow", qos_p99_ms=50.0)
    html = publish_report(out.study_dir, notebooks=[notebook_path("fast_vs_slow")], parameters={"qos_p99_ms": 50.0})
    text = Path(html).read_text()
    assert "improvement" in text and ("zram" in text or "tmpfs" in text) and "<img" in text
    runner = CliRunner()
    res = runner.invoke(app, ["testbed", "fast_vs_slow", "--quick", "--out", str(quick.root), "--no-report",
                              "--no-progress", "--qos-p99-ms", "50"])
    assert res.exit_code == 0, res.output
    assert "0 run(s) measured" in res.output and "% improvement" in res.output and "testbed:" in res.output
    bad = runner.invoke(app, ["testbed", "nope", "--out", str(tmp_path)])
    assert bad.exit_code == 1 and "must be one of" in bad.output

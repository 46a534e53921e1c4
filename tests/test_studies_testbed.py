"""The testbed studies (storagebench.studies), --quick, end to end on real loop/btrfs/zram devices as root.

Each test checks the verdict table against numbers recomputed here from the tidy runs (per-run IOPS
summed over directions, the set-up's geometric mean, the paired t on log ratios over blocks), and that
no loop device, mount or zram device of ours is left behind. One test adds a fifth study as ONE module
plus ONE YAML in a temporary directory (STORAGEBENCH_STUDY_PATH) and runs it.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import textwrap
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from storagebench import studies
from storagebench._store import StudyStore
from storagebench.errors import StatsError, StudyError, TestbedError
from storagebench.findings import fmt_number
from storagebench.stats import pilot_cv, tost_plan
from storagebench.stats.regime import ROTATIONAL_FLOOR_NS

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: The testbed studies of the package, found by the registry (a new one is tested without an edit here); the
#: known-answer variants run the same modules and are tested below and in test_throttle.py, one of them whole.
BUILT_IN = tuple(n for n in studies.names() if studies.get(n).source == "package" and not studies.get(n).known_answer)


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

    def get(name: str, **params):
        if name not in done:
            try:
                done[name] = studies.run(name, out_dir=root, quick=True, params=params)
            except TestbedError as exc:
                if "is not installed" in str(exc):  # mkfs.xfs / mkfs.btrfs missing on this host
                    pytest.skip(str(exc))
                raise
        return done[name]

    get.root = root
    return get


def _per_run(study_dir: Path) -> pd.DataFrame:
    """Per-run IOPS (directions summed) straight from the tidy runs table, with the design columns."""
    runs = pd.read_parquet(study_dir / "tidy" / "runs.parquet")
    keep = [c for c in runs.columns if c in ("datastore", "stripe_width", "pattern", "mix", "bs_bytes", "device",
                                             "load", "layout", "workload", "numjobs", "iodepth", "setup", "block",
                                             "run_order")]
    return runs.groupby("run_id", as_index=False).agg(iops=("iops", "sum"), **{c: (c, "first") for c in keep})


def _paired(per_run: pd.DataFrame, factor: str, base, other, confidence: float = 0.95):
    """Set-up geometric means, then the paired t on log(other/base) over blocks: (ratio, lo, hi, n)."""
    u = per_run.assign(lg=np.log(per_run["iops"])).groupby([factor, "block"])["lg"].mean().unstack(0)
    d = (u[other] - u[base]).dropna().to_numpy()
    t = st.t.ppf(0.5 + confidence / 2, len(d) - 1)
    se = d.std(ddof=1) / np.sqrt(len(d))
    return float(np.exp(d.mean())), float(np.exp(d.mean() - t * se)), float(np.exp(d.mean() + t * se)), len(d)


def _planned(name: str) -> int:
    return len(studies.get(name).spec(quick=True).expand())


def test_registry_finds_the_studies_by_themselves():
    assert set(BUILT_IN) <= set(studies.names())
    for name in BUILT_IN:
        ts = studies.get(name)
        assert ts.source == "package" and ts.spec_path.name == f"{name}.yaml"
        full, q = ts.spec(), ts.spec(quick=True)
        assert q.name == f"{name}-quick" and q.n_runs < full.n_runs
        assert full.setups >= 3 and full.blocks and full.setup_factors
        assert "write_iops_log" in full.fixed and full.fixed["log_avg_msec"] == 1000 and full.runtime >= 5
    assert studies.get("fast_vs_slow").parameters() == {"qos_p99_ms": 5.0}
    with pytest.raises(StudyError, match=re.escape(f"testbed study must be one of {list(studies.names())}, got 'nope'")):
        studies.get("nope")
    with pytest.raises(StudyError, match=r"unknown analysis parameter\(s\) \['margin'\]; allowed: qos_p99_ms"):
        studies.get("fast_vs_slow").check_parameters({"margin": 0.01})


def test_rdm_vs_vmfs_quick(quick):
    out = quick("rdm_vs_vmfs")
    assert (out.completed, out.failed) == (_planned("rdm_vs_vmfs"), 0)
    store = StudyStore(out.study_dir)
    recs = store.setup_records()
    assert len(recs) == 4 and sorted((r.setup, r.arm["datastore"]) for r in recs) == [
        (1, "ext4"), (1, "raw"), (2, "ext4"), (2, "raw")]
    for r in recs:  # one fresh loop device per build, a filesystem on it for ext4
        loops = [d for d in r.devices if d["kind"] == "loop"]
        assert len(loops) == 1 and loops[0]["direct_io"] is True
        assert any(d.get("fstype") == "ext4" for d in r.devices) == (r.arm["datastore"] == "ext4")
    assert len({r.build_id for r in recs}) == 4
    assert len({d["backing_file"] for r in recs for d in r.devices if d["kind"] == "loop"}) == 4
    v = out.result.verdicts
    pr = _per_run(out.study_dir)
    for _, row in v.iterrows():
        sel = pr[(pr["mix"] == row["mix"]) & (pr["bs_bytes"] == row["bs_bytes"])]
        ratio, lo, hi, n = _paired(sel, "datastore", "raw", row["level"])
        assert row["ratio"] == pytest.approx(ratio, rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
        assert row["n"] == str(n) == "2" and "set-up" in row["unit"] and "paired" in row["design"]
        # the plan: pilot CV of the per-block ratios, TOST planned at its 80% upper bound, blocks needed
        u = sel.assign(lg=np.log(sel["iops"])).groupby(["datastore", "block"])["lg"].mean().unstack(0)
        pcv = pilot_cv([np.exp(u[row["level"]] - u["raw"]).to_numpy()])
        assert row["cv_upper_pct"] == pytest.approx(pcv.cv_upper * 100, rel=1e-9)
        try:
            needed = tost_plan(pcv, 0.01, paired=True).n
        except StatsError:  # beyond the planner's limit: NaN and a note, never a made-up number
            needed = float("nan")
            assert "n_max" in row["plan_note"] or row["plan_note"]
        assert row["units_needed"] == needed or (np.isnan(needed) and np.isnan(row["units_needed"]))
    assert (out.study_dir / "analysis" / "verdicts.csv").exists()
    assert (out.study_dir / "analysis" / "findings.csv").exists()
    kinds = [f.kind for f in out.result.findings]
    assert kinds.count("verdict") == len(v) and {"equivalence", "plan", "drift", "steady"} <= set(kinds)


def test_stripe_width_quick(quick):
    out = quick("stripe_width")
    assert (out.completed, out.failed) == (_planned("stripe_width"), 0)
    for r in StudyStore(out.study_dir).setup_records():
        raid = [d for d in r.devices if d.get("profile") == "raid0"]
        assert len(raid) == (1 if r.arm["stripe_width"] == 4 else 0)
        assert len([d for d in r.devices if d["kind"] == "loop"]) == r.arm["stripe_width"]
    pr = _per_run(out.study_dir)
    pr["stripe_width"] = pr["stripe_width"].astype(int)
    for _, row in out.result.verdicts.iterrows():
        ratio, lo, hi, _ = _paired(pr[pr["pattern"] == row["pattern"]], "stripe_width", 1, 4)
        assert row["ratio"] == pytest.approx(ratio, rel=1e-9) and row["ci_low"] == pytest.approx(lo, rel=1e-9)
        assert row["p_adjusted"] >= row["p"]


def test_consolidation_runs_pairs_together_and_resumes_a_set_up_whole(quick):
    out = quick("consolidation")
    assert (out.completed, out.failed) == (_planned("consolidation"), 0)
    store = StudyStore(out.study_dir)
    spans: dict[tuple, list] = {}
    for d in store.raw_dir.iterdir():
        point = json.loads((d / "point.json").read_text())
        prov = json.loads((d / "provenance.json").read_text())
        start = datetime.fromisoformat(str(prov["started_at"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(prov["finished_at"]).replace("Z", "+00:00"))
        spans.setdefault((point["factors"]["layout"], point["setup"], point["repetition"]), []).append((start, end))
    assert len(spans) == 4
    for pair in spans.values():  # the two workloads of a group really ran at the same time
        (s1, e1), (s2, e2) = pair
        assert (min(e1, e2) - max(s1, s2)).total_seconds() > 0.5 * min((e1 - s1).total_seconds(),
                                                                       (e2 - s2).total_seconds())
    pooled = out.result.tables["pooled"]
    assert set(pooled["layout"]) == {"isolated", "shared"} and set(pooled["workload"]) == {"store", "oltp"}
    assert (pooled["clat_p99_ms"] >= pooled["clat_p90_ms"]).all()
    pr = out.result.tables["per_run"]
    for _, row in pooled.iterrows():  # pooled p99 from merged bins lies within its runs' p99 range
        r = pr[(pr["workload"] == row["workload"]) & (pr["layout"] == row["layout"])]["clat_p99_ns"] / 1e6
        assert r.min() - 1e-9 <= row["clat_p99_ms"] <= r.max() + 1e-9
    assert set(out.result.verdicts["metric"]) == {"iops", "clat_p90_ns", "clat_p99_ns"}
    # a set-up measured in part (its testbed gone): built again, its other run moved aside, nothing else redone
    unit = studies.get("consolidation").spec(quick=True).expand().units()[1]
    shutil.rmtree(store.run_dir(unit.run_ids[0]))
    again = studies.run("consolidation", out_dir=quick.root, quick=True)
    assert again.completed == len(unit.points) and again.skipped == out.completed - len(unit.points)
    assert len(again.sweep.builds) == 1 and set(again.sweep.set_aside) == set(unit.run_ids[1:])
    assert len(again.set_ups) == 1 and again.set_ups[0].arm == unit.arm
    assert all(store.set_aside_runs()[r] for r in unit.run_ids[1:])


def test_fast_vs_slow_quick(quick):
    out = quick("fast_vs_slow", qos_p99_ms=50.0)
    assert (out.completed, out.failed) == (_planned("fast_vs_slow"), 0)
    notes = " ".join(n for r in StudyStore(out.study_dir).setup_records() for n in r.notes)
    assert ("zram" in notes or "tmpfs" in notes) and "written sequentially 2 times" in notes
    res = out.result
    scores = res.tables["scores"]
    lowest = scores["outstanding_ios"].min()
    base = scores[(scores["device"] == "slow") & (scores["outstanding_ios"] == lowest)]
    assert base["normalized"].iloc[0] == 1.0 and np.isnan(base["ci_low"].iloc[0])  # the baseline: 1, no CI
    assert set(scores["n"]) == {2}  # set-ups, not runs
    pr = _per_run(out.study_dir)
    for _, row in res.verdicts.iterrows():
        ratio, *_ = _paired(pr[pr["load"] == row["load"]], "device", "slow", "fast")
        assert row["improvement_pct"] == pytest.approx((ratio - 1) * 100, rel=1e-9)
    qos = res.tables["qos"].set_index("device")
    for dev, g in scores.groupby("device"):
        g = g.sort_values("outstanding_ios")
        first_fail = g[~g["meets"]]["outstanding_ios"].min()
        passing = g[g["outstanding_ios"] < first_fail] if np.isfinite(first_fail) else g
        expect = None if passing.empty else int(passing["outstanding_ios"].max())
        got = qos.loc[dev, "max_outstanding_ios"]
        assert (got is None or pd.isna(got)) if expect is None else int(got) == expect
    strict = studies.analyse("fast_vs_slow", out.study_dir, qos_p99_ms=1e-6).tables["qos"]
    assert strict["max_load"].isna().all()
    with pytest.raises(StudyError, match="study fast_vs_slow: qos_p99_ms must be a positive"):
        studies.analyse("fast_vs_slow", out.study_dir, qos_p99_ms=-1)
    with pytest.raises(StatsError, match="qos_p99_ms must be a positive"):  # the module's own check, called directly
        studies.get("fast_vs_slow").module.analyse(studies.load_data("fast_vs_slow", out.study_dir), qos_p99_ms=0)
    # the cache caveat is the one rule applied to each run and its device record from provenance
    per = res.tables["per_run"]
    for _, r in per.iterrows():
        prov = json.loads((out.study_dir / "raw" / r["run_id"] / "provenance.json").read_text())
        rot = prov["device"]["rotational"]
        assert r["cache_not_medium"] == bool(rot and r["clat_mean_ns"] < ROTATIONAL_FLOOR_NS)
        assert r["target_device"] == prov["device"]["path"]
    assert res.runs_cache_not_medium == int(per["cache_not_medium"].sum())
    caveats = [f for f in res.findings if f.kind == "caveat"]
    assert len(caveats) == len(res.caveats) and (len(caveats) > 0) == bool(per["cache_not_medium"].any())


@pytest.mark.parametrize("name", BUILT_IN)
def test_findings_carry_their_numbers_and_the_analysis_confidence(quick, name):
    out = quick(name)
    res = studies.analyse(name, out.study_dir, confidence=0.9)
    assert "90% CI" in res.text and "95% CI" not in res.text and "alpha = 0.1" in res.text
    verdicts = [f for f in res.findings if f.kind == "verdict"]
    for f, (_, row) in zip(verdicts, res.verdicts.iterrows(), strict=True):
        assert f.estimate == row["ratio"] and row["verdict"] in f.sentence
        # a CI is NaN where it is not estimable (every set-up gave the same ratio: percentiles from fio's
        # bucketed bins of 1 s runs); then the sentence says so
        assert (f.ci is not None and f.ci == (row["ci_low"], row["ci_high"])) or (
            f.ci is None and math.isnan(row["ci_low"]) and "CI not estimable" in f.sentence)
        assert fmt_number(row["ratio"]) in f.sentence and fmt_number(row["ratio"]) in row["text"]
        assert "family" in f.method and "paired" in f.method
        assert f.confidence == 0.9 and f.unit_of_replication == "blocks; unit: set-up" and f.method
        assert f.n == int(row["n"]) and f.unit == "ratio" and f.kind == "verdict" and f.key.startswith("verdict:")
    assert res.runs == out.completed and res.runs_not_steady == out.completed  # 1 s runs: too short to test
    steady = next(f for f in res.findings if f.kind == "steady")
    assert f"{out.completed} of {out.completed} runs not steady" in steady.sentence
    drift = next(f for f in res.findings if f.kind == "drift")
    assert drift.sentence.startswith("Drift check") and (drift.n, drift.unit_of_replication) == (out.completed, "runs")
    assert res.report_findings().findings == res.findings  # one Finding type: the write-up shows them as they are
    assert [f.key for f in res.findings] == [f"{f.kind}:{i}" for i, f in enumerate(res.findings)]
    frame = res.findings_frame()
    assert list(frame.columns) == ["kind", "sentence", "estimate", "ci_low", "ci_high", "confidence", "n",
                                   "unit_of_replication", "unit", "method"]
    assert frame["kind"].tolist() == [f.kind for f in res.findings] and frame["n"].tolist() == [f.n for f in res.findings]
    assert (res.verdicts["runs_not_steady"] == res.verdicts["runs"]).all()
    summary = res.verdict_summary()
    assert "ratio [90% CI]" in summary.columns and len(summary) == len(res.verdicts)
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    assert "drift" in res.figures and ("steady" in res.figures) == (not res.tables["per_run"]["steady_rounds"].fillna(0).eq(0).all())
    for draw in res.figures.values():
        assert isinstance(draw(), Figure)


EXAMPLE_MODULE = '''
"""Example testbed study: a loop device on disk vs one over a file in RAM."""
import contextlib

from storagebench import testbed as tb
from storagebench.studies import SetUp
from storagebench.studies._base import compare_arms, finish, loop_size, ratio_figure

name = "example_medium"
title = "Disk-backed vs RAM-backed loop device"
question = "How much faster is a loop device over RAM than one over the local disk?"


@contextlib.contextmanager
def testbed(study, unit):
    size = loop_size(study, minimum=64 << 20)
    make = tb.ram_loop_device if unit.arm["medium"] == "ram" else tb.loop_device
    with make(size) as dev:
        yield SetUp(targets={unit.arm["medium"]: dev.path}, allow_devices=(dev.path,),
                    devices=({**dev.to_dict(), "role": unit.arm["medium"]},), notes=("one loop device per build",))


def analyse(data, *, confidence=0.95):
    _, v, findings = compare_arms(data, "medium", "disk", "iops", up="faster", down="slower", confidence=confidence)
    return finish(data, title=title, question=question, findings=findings, verdicts=v, tables={},
                  figures={"ratios": lambda: ratio_figure(v, ["level"], title="ram / disk")}, confidence=confidence)
'''

EXAMPLE_YAML = '''
name: example_medium
factors:
  medium:
    - {name: disk, target: disk}
    - {name: ram, target: ram}
fixed: {rw: randread, bs: 4k, ioengine: libaio, direct: 1, iodepth: 4, write_iops_log: iops, log_avg_msec: 1000}
runtime: 1
size: 8m
setups: 3
setup_factors: [medium]
blocks: true
seed: 11
test_settings: {setups: 2}
'''


def test_a_fifth_study_is_one_module_and_one_yaml(tmp_path, monkeypatch):
    """The documented mechanism: a directory on STORAGEBENCH_STUDY_PATH holding <name>.py and <name>.yaml.
    Nothing else is edited: the registry, the CLI and the write-up notebook find it by its name."""
    from typer.testing import CliRunner

    from storagebench.cli import app

    d = tmp_path / "mystudies"
    d.mkdir()
    (d / "example_medium.py").write_text(textwrap.dedent(EXAMPLE_MODULE))
    (d / "example_medium.yaml").write_text(textwrap.dedent(EXAMPLE_YAML))
    monkeypatch.setenv(studies.STUDY_PATH_ENV, str(d))
    assert "example_medium" in studies.names() and studies.get("example_medium").source == "path"
    listing = CliRunner().invoke(app, ["testbed", "--list"])
    assert listing.exit_code == 0 and "example_medium: Disk-backed vs RAM-backed loop device" in listing.output
    out = studies.run("example_medium", out_dir=tmp_path / "r", quick=True)
    assert (out.completed, out.failed, len(out.sweep.builds)) == (4, 0, 4)
    row = out.result.verdicts.iloc[0]
    assert row["level"] == "ram" and row["n"] == "2" and np.isfinite(row["ratio"])
    _run_notebook_cells("example_medium", out.study_dir, {})
    # a module that breaks the protocol, or a second module of the same name, is refused by name
    (d / "broken.py").write_text("name = 'broken'\n")
    (d / "broken.yaml").write_text("name: broken\n")
    with pytest.raises(StudyError, match=r"broken.py: a testbed study module must define .*missing \['title'"):
        studies.names()
    (d / "broken.py").unlink()
    (d / "rdm_vs_vmfs.py").write_text((d / "example_medium.py").read_text().replace('"example_medium"',
                                                                                     '"rdm_vs_vmfs"'))
    (d / "rdm_vs_vmfs.yaml").write_text("name: rdm_vs_vmfs\n")
    with pytest.raises(StudyError, match="two testbed study modules are named 'rdm_vs_vmfs'"):
        studies.names()


def _run_notebook_cells(name: str, study_dir: Path, params: dict) -> dict:
    """Execute testbed.ipynb's cells in this process with the parameters replaced (as papermill injects them)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import nbformat

    nb = nbformat.read(studies.NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert all(not c.outputs for c in code), "notebooks are stored without outputs"
    declared = {}
    for line in code[0].source.splitlines():
        # a type papermill reads: one name, or "Optional[...]" (quoted: the cell runs before anything is imported)
        assert re.match(r'^\w+: (\w+|"Optional\[\w+\]") = .+  # [^=]+$', line), \
            f"parameter line needs a type and a comment: {line!r}"
        declared[line.split(":")[0]] = None
    assert set(declared) == {"study", "study_dir", "confidence", "params"}
    ns: dict = {}
    exec(code[0].source, ns)  # the defaults parse
    ns.update(study=name, study_dir=str(study_dir), params=params)
    for cell in code[1:]:
        for p in declared:  # no later cell reassigns a parameter
            assert not re.search(rf"^{p}\s*=", cell.source, re.MULTILINE)
        exec(cell.source, ns)
    assert ns["result"].name == name
    return ns


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_one_notebook_runs_for_every_study(quick, name):
    params = {"qos_p99_ms": 50.0} if name == "fast_vs_slow" else {}
    out = quick(name, **params)
    ns = _run_notebook_cells(name, out.study_dir, params)
    again = studies.analyse(name, out.study_dir, **params)
    assert ns["result"].verdicts.equals(again.verdicts) and ns["result"].text == again.text


def test_publish_report_and_cli(quick, tmp_path):
    from typer.testing import CliRunner

    from storagebench.cli import app

    out = quick("fast_vs_slow", qos_p99_ms=50.0)
    runner = CliRunner()
    res = runner.invoke(app, ["testbed", "fast_vs_slow", "--quick", "--out", str(quick.root), "--no-progress",
                              "-p", "qos_p99_ms=50"])
    assert res.exit_code == 0, res.output
    assert "0 run(s) measured" in res.output and "0 testbed build(s)" in res.output and "findings:" in res.output
    assert "ratio [95% CI]" in res.output and "report:" in res.output
    text = (out.study_dir / "report.html").read_text()
    assert "Findings" in text and "<img" in text and "Drift check" in text and "Steady state" in text
    assert "Experimental unit of the comparisons: set-up" in text
    bad = runner.invoke(app, ["testbed", "nope", "--out", str(tmp_path)])
    assert bad.exit_code == 1 and "must be one of" in bad.output
    badp = runner.invoke(app, ["testbed", "fast_vs_slow", "--quick", "--out", str(tmp_path), "-p", "margin=0.1"])
    assert badp.exit_code == 1 and "unknown analysis parameter(s) ['margin']" in badp.output
    form = runner.invoke(app, ["testbed", "fast_vs_slow", "--out", str(tmp_path), "-p", "qos"])
    assert form.exit_code == 2 and "KEY=VALUE" in form.output
    assert not (tmp_path / "fast_vs_slow").exists()  # nothing was built or measured for a bad call


def test_a_quick_known_answer_study_recovers_the_truth_and_its_write_up_shows_it(quick):
    """ka_caps --quick: two raw loop devices capped at 200 and 400 read IOPS; estimand the high/low ratio of the
    set-up geometric means (unit: the set-up, paired on blocks), truth 2. The check's CI covers it, every run's
    provenance carries its device's cap, and the one write-up shows the check."""
    out = quick("ka_caps")
    assert out.failed == 0 and out.completed == 6
    (check,) = out.result.checks
    assert check.truth == 2.0 and check.covered and 1.95 < check.estimate < 2.05, check
    assert check.ci_high - check.ci_low < 0.2
    prov = [json.loads(p.read_text()) for p in (out.study_dir / "raw").glob("*/provenance.json")]
    caps = sorted(str(sorted(p["set_up"]["caps"].values(), key=str)) for p in prov)
    assert caps == ["[{'riops': 200}]"] * 3 + ["[{'riops': 400}]"] * 3
    ns = _run_notebook_cells("ka_caps", out.study_dir, {})
    assert ns["result"].checks == out.result.checks
    shown = ns["result"].checks_table().data
    assert list(shown["CI covers the truth"]) == [True] and "ratio of the caps" in shown["rule of the truth"].iloc[0]

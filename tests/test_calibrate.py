"""``storagebench calibrate``: the A/A of a host on real loop devices, calibration.json, its one reader, and the
write-ups that cite it.

The A/A (storagebench.calibrate): experimental unit the set-up (a fresh loop device over a fresh file), runs within;
the estimand of each comparison the ratio B/A of the arms' geometric means of set-up geometric-mean IOPS, paired on
blocks, on the log scale; each comparison is its own family of one (alpha 0.05). The checks here recompute each
comparison's ratio and CI from the tidy runs (paired t on the per-block log differences), the CVs from the stored
variance components and the smallest detectable ratio from scipy's noncentral t, independently of the module.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from scipy import optimize
from scipy import stats as st
from test_html_gate import PAYLOADS

from storagebench import _html, calibrate
from storagebench._calibfile import (
    CALIBRATION_FILE,
    citation,
    find_calibrations,
    latest_calibration,
    read_calibration,
)
from storagebench.errors import SchemaError, StudyError
from storagebench.publish import build_page, calibration_citations, publish_report

EXAMPLE = ROOT / "tests" / "fixtures" / "calibration" / "example" / CALIBRATION_FILE


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory, require_root, fio_bin):
    """One real ``storagebench calibrate --quick --comparisons 2 --known ka_caps``: 16 A/A runs of 1 s on 8 loop
    devices, the known-answer study ka_caps (two capped devices, truth the ratio of their caps) and the write-up;
    about 100 s on a busy 2-core host."""
    from storagebench import testbed as tb
    from storagebench.errors import TestbedError

    try:
        tb.require_testbed()
    except TestbedError as exc:
        pytest.skip(str(exc))
    out = tmp_path_factory.mktemp("calib") / "results" / "calibration" / "vm-1"
    res = subprocess.run([sys.executable, "-m", "storagebench", "calibrate", "--quick", "--comparisons", "2", "--known",
                          "ka_caps", "--out", str(out), "--fio", fio_bin], capture_output=True, text=True,
                         timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-3000:]
    path = out / CALIBRATION_FILE
    return path, json.loads(path.read_text()), res


@pytest.mark.slow
@pytest.mark.notebook
def test_calibration_json_has_the_keys_and_types(calibrated):
    path, doc, _ = calibrated
    assert path.name == "calibration.json" and not any(p.name.startswith(".") for p in path.parent.iterdir())
    for key in ("checks", "aa", "host", "date", "storagebench_version", "budget"):
        assert key in doc, key
    aa = doc["aa"]
    assert isinstance(aa["n"], int) and aa["n"] == 2
    assert isinstance(aa["false_positive_rate"], float) and 0 <= aa["false_positive_rate"] <= 1
    for key in ("cv_run", "cv_setup"):
        assert isinstance(aa[key], float) and 0 <= aa[key] < 5, key
    assert isinstance(aa["mde"], float) and aa["mde"] > 1
    assert doc["budget"]["mde_setups_per_arm"] == 5 and doc["budget"]["mde_runs_per_setup"] == 3
    assert doc["budget"]["power"] == 0.8 and doc["budget"]["alpha"] == 0.05
    assert isinstance(doc["checks"], list)
    for c in doc["checks"]:
        assert {"name", "truth", "estimate", "ci_low", "ci_high", "covered"} <= set(c)
        assert isinstance(c["covered"], bool)
        assert c["covered"] == (c["ci_low"] is not None and c["ci_low"] <= c["truth"] <= c["ci_high"])
    assert doc["host"]["hostname"] == os.uname().nodename
    cal = read_calibration(path)  # the one reader takes what the writer wrote
    assert cal.aa.n == 2 and len(cal.aa.comparisons) == 2 and cal.quick is True


def _paired_ratio(runs: pd.DataFrame, blocks: list[int]) -> tuple[float, float, float]:
    """Set-up geometric means, per-block log difference B - A, paired t CI: (ratio, lo, hi)."""
    sel = runs[runs["block"].isin(blocks)]
    unit = sel.assign(lg=np.log(sel["iops"])).groupby(["arm", "block"])["lg"].mean().unstack(0)
    d = (unit["B"] - unit["A"]).to_numpy()
    t = st.t.ppf(0.975, len(d) - 1)
    se = d.std(ddof=1) / math.sqrt(len(d))
    return math.exp(d.mean()), math.exp(d.mean() - t * se), math.exp(d.mean() + t * se)


@pytest.mark.slow
@pytest.mark.notebook
def test_aa_on_identical_arms_recomputed_from_the_runs(calibrated):
    path, doc, _ = calibrated
    sdir = path.parent / doc["aa_study_dir"]
    runs = pd.read_parquet(sdir / "tidy" / "runs.parquet")
    per_run = runs.groupby("run_id", as_index=False).agg(iops=("iops", "sum"), arm=("arm", "first"),
                                                         block=("block", "first"), setup=("setup", "first"))
    assert len(per_run) == 2 * 2 * 2 * 2  # comparisons x blocks x arms x runs
    for comp in doc["aa"]["comparisons"]:
        ratio, lo, hi = _paired_ratio(per_run, comp["blocks"])
        assert comp["ratio"] == pytest.approx(ratio, rel=1e-9)
        assert (comp["ci_low"], comp["ci_high"]) == pytest.approx((lo, hi), rel=1e-9)
        assert comp["shown"] == (comp["p"] < 0.05)
    blocks = [b for c in doc["aa"]["comparisons"] for b in c["blocks"]]
    assert len(blocks) == len(set(blocks)) == 4  # disjoint: no block (set-up) in two comparisons
    k = sum(c["shown"] for c in doc["aa"]["comparisons"])
    assert doc["aa"]["false_positives"] == k and doc["aa"]["false_positive_rate"] == k / 2
    comp = doc["aa"]["components"]
    assert doc["aa"]["cv_run"] == pytest.approx(math.sqrt(math.expm1(comp["var_run"])))
    assert doc["aa"]["cv_setup"] == pytest.approx(math.sqrt(math.expm1(max(0, comp["var_setup"]))))
    kj = comp.get("kalibera_jones")
    if kj is not None and kj["var_setup"] > 0:  # balanced, inside the parameter space: REML = the ANOVA estimators
        assert (kj["var_setup"], kj["var_run"]) == pytest.approx((comp["var_setup"], comp["var_run"]), rel=1e-3)


def _mde_by_noncentral_t(var_setup: float, var_run: float, setups: int, runs: int) -> float:
    """Paired t, two-sided alpha 0.05, power 0.8 on ``setups`` blocks, solved here with scipy's noncentral t."""
    df = setups - 1
    tc = st.t.ppf(0.975, df)

    def power(d):
        nc = d * math.sqrt(setups)
        return float(np.nan_to_num(st.nct.sf(tc, df, nc), nan=1.0) + np.nan_to_num(st.nct.cdf(-tc, df, nc))) - 0.8

    d = optimize.brentq(power, 1e-3, 8)
    return math.exp(d * math.sqrt(2 * (var_setup + var_run / runs)))


@pytest.mark.slow
@pytest.mark.notebook
def test_mde_is_the_noncentral_t_answer_for_the_stated_budget(calibrated):
    _, doc, _ = calibrated
    comp = doc["aa"]["components"]
    assert doc["aa"]["mde"] == pytest.approx(_mde_by_noncentral_t(comp["var_setup"], comp["var_run"], 5, 3), rel=1e-4)
    row = next(r for r in doc["aa"]["mde_table"] if r["setups_per_arm"] == 10 and r["runs_per_setup"] == 1)
    assert row["mde"] == pytest.approx(_mde_by_noncentral_t(comp["var_setup"], comp["var_run"], 10, 1), rel=1e-4)
    # more set-ups never make the detectable ratio larger
    t = pd.DataFrame(doc["aa"]["mde_table"])
    for _, g in t.groupby("runs_per_setup"):
        assert g.sort_values("setups_per_arm")["mde"].is_monotonic_decreasing


def test_detectable_ratio_refuses_budgets_it_cannot_plan():
    with pytest.raises(Exception, match="at least|>= 2 set-ups"):
        calibrate.detectable_ratio(0.01, 0.01, setups=1, runs=3)
    with pytest.raises(Exception, match="variances"):
        calibrate.detectable_ratio(float("nan"), 0.01, setups=5, runs=3)
    assert calibrate.detectable_ratio(0.0, 0.0, setups=5, runs=3) == 1.0


@pytest.mark.slow
@pytest.mark.notebook
def test_calibrate_refuses_an_out_that_holds_one(calibrated):
    path, _, _ = calibrated
    with pytest.raises(StudyError, match="exists: give calibrate a new --out"):
        calibrate.calibrate(path.parent, quick=True, comparisons=1, known=[], report=False)
    with pytest.raises(StudyError, match=r"known-answer study must be one of \[.*\], got \['stripe_width'\]"):
        calibrate.calibrate(path.parent / "new", quick=True, known=["stripe_width"], report=False)
    assert not (path.parent / "new").exists()  # refused before anything was made
    with pytest.raises(StudyError, match="comparisons must be a whole number from 1 to 500"):
        calibrate.aa_plan(True, comparisons=0)


# --------------------------------------------------------------------------- finding and citing


def _write(dirpath: Path, doc: dict) -> Path:
    dirpath.mkdir(parents=True, exist_ok=True)
    (dirpath / CALIBRATION_FILE).write_text(json.dumps(doc))
    return dirpath / CALIBRATION_FILE


def _example(**changes) -> dict:
    doc = json.loads(EXAMPLE.read_text())
    for key, value in changes.items():
        doc[key] = value
    return doc


def test_the_latest_calibration_of_the_host_is_found(tmp_path):
    root = tmp_path / "results"
    old = _example(date="2026-01-01T00:00:00Z")
    new = _example(date="2026-06-01T00:00:00Z")
    other = _example(date="2026-09-01T00:00:00Z", host={**old["host"], "hostname": "otherhost"})
    _write(root / "calibration" / "a", new)
    _write(root / "calibration" / "b", old)
    _write(root / "calibration" / "c", other)
    found, refused = find_calibrations(root, old["host"]["hostname"])
    assert [c.date for c in found] == ["2026-06-01T00:00:00Z", "2026-01-01T00:00:00Z"] and refused == []
    assert latest_calibration(root, "otherhost").date == "2026-09-01T00:00:00Z"
    assert latest_calibration(root, "nohost") is None and latest_calibration(tmp_path / "none", "vm") is None


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["aa"].__setitem__("false_positive_rate", "0.0"), "aa.false_positive_rate"),
    (lambda d: d["aa"].__setitem__("false_positive_rate", 1.5), "aa.false_positive_rate"),
    (lambda d: d["aa"].__setitem__("n", True), "aa.n"),
    (lambda d: d["aa"].__setitem__("mde", 0.5), "aa.mde"),
    (lambda d: d["aa"].__setitem__("cv_run", -0.1), "aa.cv_run"),
    (lambda d: d["aa"]["comparisons"][0].__setitem__("shown", "yes"), "aa.comparisons[0].shown"),
    (lambda d: d.__setitem__("checks", [{"name": "x", "truth": 2, "estimate": 2, "ci_low": 3, "ci_high": 1,
                                         "covered": False}]), "checks[0].ci_low"),
    (lambda d: d.__setitem__("checks", [{"name": "x\ny", "truth": 2, "estimate": 2, "ci_low": 1, "ci_high": 3,
                                         "covered": True}]), "checks[0].name"),
    (lambda d: d.__setitem__("checks", [{"name": "x", "truth": 2, "estimate": 2, "ci_low": 1, "ci_high": 3,
                                         "covered": 1}]), "checks[0].covered"),
    (lambda d: d["host"].__setitem__("hostname", "a" * 300), "host.hostname"),
    (lambda d: d.__setitem__("checks", [{"name": "x", "truth": 2, "estimate": 2, "ci_low": 1, "ci_high": 3,
                                         "covered": True, "rule": {"a": 1}}]), "checks[0].rule"),
    (lambda d: d.__setitem__("date", "<script>"), "date"),
    (lambda d: d.__setitem__("format_version", 99), "format_version"),
    (lambda d: d.pop("checks"), "checks"),
    (lambda d: d.__setitem__("checks", [{"name": "x", "truth": 5, "estimate": 5, "ci_low": None, "ci_high": None,
                                         "covered": True}]), "checks[0].covered"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_bad_field_is_refused_naming_it_and_never_cited(tmp_path, edit, field):
    doc = _example()
    edit(doc)
    path = _write(tmp_path / "results" / "calibration" / "x", doc)
    with pytest.raises(SchemaError, match=re.escape(f"not a valid calibration: {field}")):
        read_calibration(path)
    found, refused = find_calibrations(tmp_path / "results", "vm")
    assert found == [] and len(refused) == 1 and field.split("[")[0] in refused[0]


def test_a_check_without_a_ci_is_read_shown_and_not_covered(tmp_path):
    """A known-answer study whose set-ups do not differ at all has no CI (null in the file): read, shown as not
    estimable, never as covered, and left out of the figure."""
    doc = _example()
    doc["checks"] = [{"name": "fast / slow", "truth": 5.0, "estimate": 5.0, "ci_low": None, "ci_high": None,
                      "covered": False},
                     {"name": "high / low", "truth": 2.0, "estimate": 2.01, "ci_low": 1.9, "ci_high": 2.1,
                      "covered": True}]
    cal = read_calibration(_write(tmp_path / "c", doc))
    assert cal.checks[0].ci_low is None and cal.checks[0].covered is False
    text = " ".join(f.sentence for f in calibrate.calibration_findings(cal))
    assert "fast / slow: truth 5, estimate 5 with no CI (not estimable" in text
    assert "1 of 2 known-answer checks covered" in citation(cal)
    figs = calibrate.calibration_figures(cal)
    assert "1 check(s) without a CI left out" in figs["checks"][1]
    figs["checks"][0]()


def test_files_that_are_not_regular_or_leave_the_tree_are_refused(tmp_path):
    root = tmp_path / "results"
    (root / "calibration" / "fifo").mkdir(parents=True)
    os.mkfifo(root / "calibration" / "fifo" / CALIBRATION_FILE)  # would block an open() for ever
    outside = _write(tmp_path / "elsewhere", _example())
    (root / "calibration" / "link").mkdir()
    (root / "calibration" / "link" / CALIBRATION_FILE).symlink_to(outside)
    (root / "calibration" / "big").mkdir()
    (root / "calibration" / "big" / CALIBRATION_FILE).write_bytes(b" " * (4 * 2**20 + 1))
    found, refused = find_calibrations(root, "vm")
    assert found == [] and len(refused) == 3
    assert any("FIFO" in r for r in refused) and any("larger" in r or "bytes" in r for r in refused)


def _executed_notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A study")]
    path = tmp_path / "done.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_hostile_calibration_values_reach_the_page_as_text(tmp_path):
    """Every payload without a control character is accepted in the string fields and shown escaped; those with
    one (a newline, NUL) make the file refused: nothing of it is cited."""
    clean = [p for p in PAYLOADS if not any(ord(c) < 32 for c in p)]
    assert len(clean) >= 25
    root = tmp_path / "results"
    for i, payload in enumerate(clean):
        doc = _example(storagebench_version=payload[:200])
        doc["host"]["hostname"] = "h" + payload[:200]
        doc["checks"] = [{"name": payload[:200], "truth": 2.0, "estimate": 2.0, "ci_low": 1.9, "ci_high": 2.1,
                          "covered": True, "rule": payload}]
        _write(root / "calibration" / f"c{i}", doc)
    study = root / "study"
    study.mkdir()
    texts, files = calibration_citations(study, ["h" + p[:200] for p in clean])
    assert len(texts) == len(clean) == len(files)
    page, _ = build_page([_executed_notebook(tmp_path)], "t", calibration=texts)
    assert _html.page_problems(page) == [] and "<script>alert" not in page and "<img src=x" not in page
    assert page.count('class="sb-calibration"') == len(clean)
    assert _html.escape(texts[0]) in page
    bad = [p for p in PAYLOADS if any(ord(c) < 32 for c in p)]
    for i, payload in enumerate(bad):
        doc = _example()
        doc["host"]["hostname"] = "bad" + payload[:200]
        _write(root / "calibration" / f"bad{i}", doc)
        assert calibration_citations(study, ["bad" + payload[:200]]) == ([], [])


@pytest.mark.notebook
def test_a_study_write_up_cites_its_hosts_latest_calibration_and_none_when_absent(tmp_path):
    root = tmp_path / "results"
    study = root / "demo"
    shutil.copytree(ROOT / "tests" / "fixtures" / "study_demo", study)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('study_dir: str = "."', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_markdown_cell("# Demo write-up")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    template = tmp_path / "tiny.ipynb"
    nbformat.write(nb, str(template))
    page = publish_report(study, notebooks=[template]).read_text()
    assert "sb-calibration" not in page and "Calibration of this host" not in page
    assert "calibration" not in json.loads((study / "report.json").read_text())
    _write(root / "calibration" / "vm-old", _example(date="2026-01-01T00:00:00Z"))
    _write(root / "calibration" / "vm-new", _example(date="2026-02-01T00:00:00Z"))
    page = publish_report(study, notebooks=[template]).read_text()
    cal = read_calibration(root / "calibration" / "vm-new" / CALIBRATION_FILE)
    assert page.count('class="sb-calibration"') == 1
    assert str(_html.escape(citation(cal, relative_to=study))) in page and "2026-02-01" in page
    side = json.loads((study / "report.json").read_text())
    assert side["calibration"] == [{"hostname": "vm", "date": "2026-02-01T00:00:00Z",
                                    "path": "../calibration/vm-new/calibration.json"}]


@pytest.mark.notebook
def test_the_calibration_write_up_escapes_a_hostile_file(tmp_path):
    clean = " ".join(p for p in PAYLOADS if not any(ord(c) < 32 for c in p))
    doc = _example(storagebench_version=clean[:250])
    doc["host"]["hostname"] = clean[:250]
    doc["checks"] = [{"name": clean[i:i + 250], "truth": 2.0, "estimate": 1.9, "ci_low": 1.8, "ci_high": 2.1,
                      "covered": True, "rule": clean} for i in range(0, len(clean), 250)]
    out = tmp_path / "cal"
    _write(out, doc)
    page = publish_report(out, notebooks=[calibrate.NOTEBOOK]).read_text()
    assert _html.page_problems(page) == [] and "<script>alert" not in page
    assert page.count("<figure") == 3  # A/A, detectable ratio by budget, known-answer checks


@pytest.mark.slow
@pytest.mark.notebook
def test_cli_output_progress_checks_and_write_up(calibrated):
    path, doc, res = calibrated
    out = path.parent
    assert "A/A: " in res.stdout and "smallest detectable ratio" in res.stdout
    assert "ETA" in res.stderr and "calibrate: A/A, 8 set-ups x 2 runs of 1 s (16 s of fio" in res.stderr
    assert "calibrate: known-answer study 1 of 1: ka_caps" in res.stderr
    cal = read_calibration(path)
    assert cal.aa.n == 2 and (out / "report.html").exists()
    assert cal.checks and all(c.covered == (c.ci_low is not None and c.ci_low <= c.truth <= c.ci_high)
                              for c in cal.checks)
    assert all(c["study"] == "ka_caps" for c in doc["checks"]) and doc["known_answer"]["studies"] == ["ka_caps"]
    assert f"known answer {cal.checks[0].name}: truth" in res.stdout
    page = (out / "report.html").read_text()
    assert _html.page_problems(page) == [] and page.count("<figure") == 3 and "Known answer" in page

"""`storagebench demo` and `storagebench report` end to end: real fio runs, ingest, notebook, HTML."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from storagebench.cli import app

TINY = """\
name: demo_tiny
description: tiny variant of data/studies/demo.yaml for the test suite
factors:
  numjobs: [1, 2]
  iodepth: [1, 8]
fixed:
  rw: randread
  bs: 4k
  ioengine: libaio
  direct: 1
runtime: 1
size: 16m
repetitions: 1
seed: 1
"""


def test_demo_end_to_end_on_a_tiny_study(tmp_path, fio_bin):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY)
    out = tmp_path / "results"
    res = CliRunner().invoke(app, ["demo", "--out", str(out), "--study", str(spec), "--no-progress"])
    assert res.exit_code == 0, res.output
    text = res.output
    report = out / "demo_tiny" / "report.html"
    assert f"report: {report}" in text
    m = re.search(r"Recommended test point: (?:the peak point itself, )?numjobs=(\d+) × iodepth=(\d+)", text)
    assert m, text
    assert (int(m[1]), int(m[2])) in {(1, 1), (1, 8), (2, 1), (2, 8)}
    peak = re.search(r"Peak: ([\d,]+) IOPS \(no CI: one run\) at numjobs=(\d+) × iodepth=(\d+), with mean latency "
                     r"([\d.]+) ms, p99 completion latency ([\d.]+) ms", text)
    assert peak, text
    assert float(peak[5]) > float(peak[4]) > 0
    # one run per point: the findings say there is no CI and how to get one
    assert "measured once" in text and "repetitions: 2" in text
    # the printed numbers are the tidy tables' numbers
    runs = pd.read_parquet(out / "demo_tiny" / "tidy" / "runs.parquet")
    assert runs["run_id"].nunique() == 4 and (runs["iops"] > 0).all()
    best = runs.groupby(["numjobs", "iodepth"])["iops"].sum().max()
    assert int(peak[1].replace(",", "")) == round(best)
    html = report.read_text()
    assert html.count('<img') == 4 and "Provenance:" in html
    # the page opens with the same findings the terminal printed
    assert html.index('id="findings"') < html.index("<img") and "Recommended test point" in html
    assert oct(report.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    sidecar = __import__("json").loads((out / "demo_tiny" / "report.json").read_text())
    assert [f["key"] for f in sidecar["findings"]][:2] == ["peak_iops", "recommended"]
    # the temporary target (and its directory) is gone; only the study is left in OUT
    assert sorted(p.name for p in out.iterdir()) == ["demo_tiny"]
    target = Path(runs["target"].iloc[0])
    assert target.name == "target.dat" and target.parent.name.startswith(".storagebench-demo-")
    assert not target.parent.exists()


def _umask() -> int:
    import os

    old = os.umask(0)
    os.umask(old)
    return old


def test_demo_refuses_a_missing_study(tmp_path):
    res = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--study", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 1
    assert "nope.yaml" in res.output and "cannot read" in res.output
    assert list(tmp_path.iterdir()) == []


def test_report_refuses_a_missing_directory(tmp_path):
    res = CliRunner().invoke(app, ["report", str(tmp_path / "missing")])
    assert res.exit_code == 1 and "is not a directory" in res.output

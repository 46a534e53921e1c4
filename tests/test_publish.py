"""publish: papermill execution with checked parameters, and the HTML write-up of a real study."""

from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import FIXTURES
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from storagebench.errors import PublishError
from storagebench.publish import execute_notebook, notebook_parameters, publish_report

STUDY_FIXTURE = FIXTURES / "study_demo"


def _notebook(path, *cells):
    nb = new_notebook()
    params = new_code_cell("divisor: int = 2  # what 10 is divided by\nlabel: str = 'x'  # a label")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [new_markdown_cell("# test"), params, *[new_code_cell(c) for c in cells]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def test_notebook_parameters_come_from_the_annotated_cell(tmp_path):
    nb = _notebook(tmp_path / "t.ipynb", "print(10 / divisor)")
    params = notebook_parameters(nb)
    assert set(params) == {"divisor", "label"}
    assert params["divisor"]["inferred_type_name"] == "int"
    assert params["divisor"]["help"] == "what 10 is divided by"


def test_execute_notebook_injects_parameters(tmp_path):
    nb = _notebook(tmp_path / "t.ipynb", "print('result', 10 / divisor, label)")
    out = execute_notebook(nb, tmp_path / "out" / "t.ipynb", {"divisor": 4, "label": "four"})
    text = json.dumps(nbformat.read(str(out), as_version=4).cells[-1].outputs)
    assert "result 2.5 four" in text


def test_unknown_parameter_is_refused_before_running(tmp_path):
    nb = _notebook(tmp_path / "t.ipynb", "print(10 / divisor)")
    out = tmp_path / "out.ipynb"
    with pytest.raises(PublishError) as exc:
        execute_notebook(nb, out, {"divisr": 5})
    msg = str(exc.value)
    assert "'divisr'" in msg and "divisor" in msg and "label" in msg
    assert not out.exists()


def test_missing_notebook_names_the_shipped_ones(tmp_path):
    with pytest.raises(PublishError, match="analyze.ipynb"):
        execute_notebook(tmp_path / "nope.ipynb", tmp_path / "o.ipynb")


def test_failing_cell_keeps_the_output_notebook(tmp_path):
    nb = _notebook(tmp_path / "t.ipynb", "print('before')", "print(10 / divisor)", "print('after')")
    out = tmp_path / "out" / "t.ipynb"
    with pytest.raises(PublishError) as exc:
        execute_notebook(nb, out, {"divisor": 0})
    msg = str(exc.value)
    assert "ZeroDivisionError" in msg and "cell" in msg and str(out) in msg
    assert out.exists()
    executed = nbformat.read(str(out), as_version=4)
    text = json.dumps([c.get("outputs", []) for c in executed.cells if c.cell_type == "code"])
    assert "before" in text and "ZeroDivisionError" in text and "after" not in text


def test_publish_report_refuses_parameters_no_notebook_declares(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    with pytest.raises(PublishError, match="'iodepth'"):
        publish_report(study, parameters={"iodepth": 4})


def test_publish_report_refuses_a_missing_study_dir(tmp_path):
    with pytest.raises(PublishError, match="not a directory"):
        publish_report(tmp_path / "missing")


@pytest.fixture
def study_copy(tmp_path):
    dst = tmp_path / "demo"
    shutil.copytree(STUDY_FIXTURE, dst, ignore=shutil.ignore_patterns("tidy", "notebooks", "report.*", ".gitignore"))
    return dst


def test_publish_report_on_a_real_study(study_copy):
    import os

    from storagebench.findings import Findings

    html_path = publish_report(study_copy, write_tidy=True)
    assert html_path == study_copy / "report.html"
    html = html_path.read_text()
    # figures: vector SVG, numbered 1-4 in page order, alt text from the figure, caption + provenance in HTML
    figs = []
    for num, body in re.findall(r'<figure class="sb-figure" id="figure-(\d+)">(.*?)</figure>', html, flags=re.S):
        src = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', body)
        alt, width = re.search(r'alt="([^"]+)"', body), re.search(r'width="(\d+)"', body)
        cap = re.search(r'<span class="sb-fignum">Figure (\d+)\.</span>', body)
        assert src and alt and width and cap, body[:300]
        figs.append((int(num), src[1], alt[1], int(width[1]), int(cap[1])))
    assert [(f[0], f[4]) for f in figs] == [(1, 1), (2, 2), (3, 3), (4, 4)]
    for _, b64, alt, width, _ in figs:
        svg = base64.b64decode(b64)
        assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg[:1000] and len(svg) > 10_000
        assert "No description has been provided" not in alt and " against " in alt and width > 500
    assert html.count("<img") == 4 and "image/png" not in html  # the four figures, no PNG left
    prov = json.loads(next((study_copy / "raw").glob("*/provenance.json")).read_text())
    assert "Provenance:" in html and prov["hostname"] in html and "fio-3" in html
    assert "Little" in html and "Recommended test point" in html
    assert "def " not in html and "import storagebench" not in html  # code cells hidden
    assert "Text(0.01" not in html and "<pre>" not in html.split('id="findings"')[1].split("Data and provenance")[0]
    assert "No description has been provided" not in html and "wrote /" not in html
    # Findings first: right after the title and the meta line, before any other section, table or figure
    first_h2 = re.search(r"<h2[^>]*>(.*?)</h2>", html)
    assert "Findings" in first_h2[1] and html.index('id="findings"') < min(html.index("<table"), html.index("<figure"))
    # the sidecar says the same, with the numbers behind each sentence
    side = json.loads((study_copy / "report.json").read_text())
    assert side["format_version"] == 1 and side["report"] == "report.html" and side["title"].startswith("Queue depth")
    keys = [f["key"] for f in side["findings"]]
    assert keys[:2] == ["peak_iops", "recommended"] and "runs_per_point" in keys
    assert Findings.from_dict(side)["peak_iops"].n == 2 and side["provenance"]["runs"] == 12
    assert all(f["sentence"] in html.replace("&#x27;", "'") for f in side["findings"])
    assert side["parameters"] == {}  # no local path recorded
    # 0644 (0666 less the umask), like every other file beside it
    umask = os.umask(0)
    os.umask(umask)
    assert html_path.stat().st_mode & 0o777 == 0o666 & ~umask == (study_copy / "report.json").stat().st_mode & 0o777
    assert (study_copy / "notebooks" / "analyze.ipynb").exists()
    assert (study_copy / "tidy" / "runs.parquet").exists()
    # the index of the results directory lists it with its headline findings
    from storagebench.publish import build_site

    (study_copy.parent / "broken").mkdir()
    (study_copy.parent / "broken" / "report.json").write_text("{not json")
    index, listed, skipped = build_site(study_copy.parent)
    page = index.read_text()
    assert listed == [study_copy / "report.json"] and len(skipped) == 1 and "broken" in skipped[0]
    assert 'href="demo/report.html"' in page and side["title"].replace("×", "&#215;")[:20] in page.replace("×", "&#215;")
    assert side["findings"][0]["sentence"] in page and "Not listed" in page


def test_publish_prints_no_kernel_noise(study_copy):
    """No "[IPKernelApp] WARNING | Kernel is running over TCP" nor "KeyboardInterrupt caught in kernel" on a
    successful publish: the kernel runs over IPC and is not sent SIGINT before a clean shutdown."""
    code = ("from storagebench.publish import execute_notebook; import sys; "
            "[execute_notebook('compare.ipynb', sys.argv[1] + f'/o{i}.ipynb') for i in range(3)]")
    proc = __import__("subprocess").run([__import__("sys").executable, "-c", code, str(study_copy)],
                                        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "IPKernelApp" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr


def test_publish_report_refuses_a_figure_cell_without_its_image(tmp_path):
    """A cell that draws a figure but whose executed output has no image (here: closed before it was
    shown, as when the kernel's output is lost) stops the report, naming the notebook and the cell."""
    from storagebench.publish import missing_figures

    study = tmp_path / "study"
    study.mkdir()
    nb = _notebook(tmp_path / "figs.ipynb",
                   "import matplotlib.pyplot as plt",
                   "fig, ax = plt.subplots()\nax.plot([1, 2], [divisor, 3])",
                   "fig2, ax2 = plt.subplots()  # drawn, then lost\nplt.close(fig2)",
                   "print('text only')")
    with pytest.raises(PublishError) as exc:
        publish_report(study, notebooks=[nb], parameters={"divisor": 1})
    msg = str(exc.value)
    assert "figs.ipynb" in msg and "cell 4 ('fig2, ax2 = plt.subplots()  # drawn, then lost')" in msg
    assert "cell 3" not in msg and "iopub_timeout=60" in msg
    assert not (study / "report.html").exists()
    executed = study / "notebooks" / "figs.ipynb"
    assert missing_figures(executed) == [(4, "fig2, ax2 = plt.subplots()  # drawn, then lost")]
    # a cell that is known not to show its figure can say so with the tag no-figure
    nbk = nbformat.read(str(nb), as_version=4)
    nbk.cells[4].metadata["tags"] = ["no-figure"]
    nbformat.write(nbk, str(nb))
    html = publish_report(study, notebooks=[nb], parameters={"divisor": 1}, iopub_timeout=30).read_text()
    assert len(re.findall(r'<img[^>]*src="data:image/png;base64,', html)) == 1 and "text only" in html


def test_timeouts_are_passed_to_papermill_and_checked(tmp_path):
    nb = _notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(30)")
    with pytest.raises(PublishError, match="could not be executed: CellTimeoutError: A cell timed out"):
        execute_notebook(nb, tmp_path / "o.ipynb", execution_timeout=1)
    for bad in ({"execution_timeout": 0}, {"execution_timeout": "5"}, {"iopub_timeout": 0.5},
                {"iopub_timeout": True}):
        with pytest.raises(PublishError, match="timeout must be"):
            execute_notebook(nb, tmp_path / "o2.ipynb", **bad)
    assert not (tmp_path / "o2.ipynb").exists()


def test_sweep_notebook_runs_a_study(tmp_path, fio_bin):
    spec = tmp_path / "tiny.yaml"
    spec.write_text("name: nb_tiny\nfactors:\n  iodepth: [1, 4]\n"
                    "fixed: {rw: randread, bs: 4k, ioengine: libaio, direct: 1}\nruntime: 1\nsize: 8m\n")
    out = execute_notebook("sweep.ipynb", tmp_path / "sweep.ipynb",
                           {"study_path": str(spec), "target": str(tmp_path / "target.dat"),
                            "out_dir": str(tmp_path / "results"), "run": True})
    raw = tmp_path / "results" / "nb_tiny" / "raw"
    runs = sorted(p.name for p in raw.iterdir())
    assert len(runs) == 2
    for run in runs:
        assert json.loads((raw / run / "output.json").read_text())["jobs"][0]["read"]["iops"] > 0
    text = json.dumps(nbformat.read(str(out), as_version=4).cells[-1].outputs)
    assert "nb_tiny: 2 run(s) measured, 0 already complete, 0 failed" in text
    # by default the notebook only shows the plan: nothing runs
    plan = execute_notebook("sweep.ipynb", tmp_path / "plan.ipynb",
                            {"study_path": str(spec), "out_dir": str(tmp_path / "plan-results")})
    assert not (tmp_path / "plan-results").exists()
    assert "nb_tiny: 2 runs (2 points x 1 repetitions)" in json.dumps([c.get("outputs", []) for c in nbformat.read(str(plan), as_version=4).cells])


@pytest.mark.parametrize("name", ["analyze.ipynb", "sweep.ipynb", "compare.ipynb", "studies/hdd_iops.ipynb",
                                  "studies/vsan_stripe.ipynb", "studies/scaling.ipynb"])
def test_shipped_notebooks_declare_every_parameter(name):
    """papermill must parse every line of the parameters cell (a quote in a comment can break it)."""
    import ast

    from storagebench.publish import NOTEBOOK_DIR

    nb = nbformat.read(str(NOTEBOOK_DIR / name), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assigned = {n.target.id for n in ast.parse(code[0].source).body if isinstance(n, ast.AnnAssign)}
    params = notebook_parameters(NOTEBOOK_DIR / name)
    assert set(params) == assigned
    assert all(p["help"] for p in params.values())  # every parameter says what it is
    # stored without outputs: tests/test_notebook_outputs.py


def test_a_parameter_line_papermill_cannot_read_is_refused(tmp_path):
    """papermill silently skips ``x: int | str = 1``; the parameter would vanish from -p and batch checks."""
    path = _notebook(tmp_path / "union.ipynb", "print(level)")
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[1].source += "\nlevel: int | str = 1  # a level"
    nbformat.write(nb, str(path))
    with pytest.raises(PublishError, match=r"papermill cannot read the parameter line\(s\) of \['level'\]"):
        notebook_parameters(path)


def test_parameter_of_the_wrong_type_is_refused(tmp_path):
    nb = _notebook(tmp_path / "t.ipynb", "print(10 / divisor)")
    with pytest.raises(PublishError, match=r"'divisor' of t.ipynb must be int \(what 10 is divided by\), got str '4'"):
        execute_notebook(nb, tmp_path / "o.ipynb", {"divisor": "4"})
    with pytest.raises(PublishError, match="must be int"):
        execute_notebook(nb, tmp_path / "o.ipynb", {"divisor": True})
    assert not (tmp_path / "o.ipynb").exists()


def test_one_type_rule_for_execute_notebook_and_batch(tmp_path):
    """publish.parameter_type_ok is the only checker: execute_notebook and batch agree on
    Optional/list annotations, which execute_notebook let through before."""
    from storagebench._batch import ParamSet, validate_param_sets
    from storagebench.publish import parameter_type_ok

    nb = new_notebook()
    params = new_code_cell("limit: Optional[int] = None  # a limit\nsizes: list[int] = [4]  # sizes, KiB")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [new_code_cell("from typing import Optional"), params, new_code_cell("print(limit, sizes)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "typed.ipynb"
    nbformat.write(nb, str(path))
    declared = notebook_parameters(path)
    assert declared["limit"]["inferred_type_name"] == "Optional[int]"
    for value, ok in ((None, True), (3, True), ("3", False), (True, False)):
        assert parameter_type_ok(value, "Optional[int]") is ok
    with pytest.raises(PublishError, match=r"'limit' of typed.ipynb must be Optional\[int\]"):
        execute_notebook(path, tmp_path / "o.ipynb", {"limit": "3"})
    with pytest.raises(PublishError, match=r"'sizes' of typed.ipynb must be list\[int\]"):
        execute_notebook(path, tmp_path / "o.ipynb", {"sizes": 4})
    with pytest.raises(PublishError, match=r"set 'a': parameter 'limit' must be Optional\[int\]"):
        validate_param_sets([ParamSet("a", {"limit": "3"})], declared)
    assert not (tmp_path / "o.ipynb").exists()
    assert parameter_type_ok(2, "float") and not parameter_type_ok(2.5, "int") and parameter_type_ok(1, "int | None")


def test_cli_publish_runs_a_published_study_and_refuses_unknown_parameters(tmp_path):
    """`storagebench publish` executes a study notebook on the seed tables and writes report.html;
    an undeclared -p parameter is refused before anything runs."""
    import re

    from typer.testing import CliRunner

    from storagebench.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["publish", "studies/hdd_iops.ipynb", "--out", str(tmp_path / "bad"), "-p", "bogus=1"])
    assert bad.exit_code == 1 and "bogus" in bad.output
    assert not (tmp_path / "bad" / "notebooks").exists()
    ok = runner.invoke(app, ["publish", "studies/hdd_iops.ipynb", "--out", str(tmp_path / "hdd")])
    assert ok.exit_code == 0, ok.output
    html = (tmp_path / "hdd" / "report.html").read_text()
    assert len(re.findall(r"<img", html)) >= 1  # the 2 x 2 heatmap figure


def test_a_template_titles_its_page_from_what_it_displays(tmp_path):
    """testbed.ipynb is one template for four studies: its h1 is the Markdown a code cell displays."""
    from nbformat.v4 import new_output

    from storagebench.findings import Finding, Findings
    from storagebench.publish import build_page, notebook_title

    nb = new_notebook()
    title = new_code_cell("display(Markdown(...))")
    title.outputs = [new_output("display_data", data={"text/markdown": "# Stripe width 1 vs 4\n\nAs run: 4 runs.",
                                                      "text/plain": "<IPython.core.display.Markdown object>"})]
    found = Findings((Finding("Width 4 is 0.995 times width 1."),), title="Does striping help?")
    shown = new_code_cell("display(result.report_findings())")
    shown.outputs = [new_output("display_data", data=found._repr_mimebundle_())]
    nb.cells = [new_markdown_cell("<!-- a template for every study -->"), title, shown,
                new_markdown_cell("## Verdicts")]
    path = tmp_path / "done.ipynb"
    nbformat.write(nb, str(path))
    assert notebook_title(nbformat.read(str(path), as_version=4)) == "Stripe width 1 vs 4"
    page, findings = build_page([path], meta="Published now.")
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", page, flags=re.S)
    assert h1 and "Stripe width 1 vs 4" in h1[1] and page.count("<h1") == 1
    # title, meta line, Findings, then the rest of what the cell displayed
    order = [page.index(s) for s in ("<h1", "Published now.", 'id="findings"', "As run: 4 runs.", "Verdicts")]
    assert order == sorted(order) and len(findings) == 1
    # a notebook whose first markdown cell opens with another heading has no title of its own to hoist
    nb.cells = [new_markdown_cell("## Verdicts"), title]
    nbformat.write(nb, str(path))
    body = build_page([path])[0].split("<main", 1)[1]
    assert body.index("Verdicts") < body.index("Stripe width 1 vs 4")


def test_scaling_notebook_refuses_a_study_dir_that_does_not_exist(tmp_path):
    """A typo in study_dir must not fall back to starting servers and measuring."""
    with pytest.raises(PublishError, match=r"StudyError: study_dir '.*no-such-study' is not a directory"):
        execute_notebook("studies/scaling.ipynb", tmp_path / "scaling.ipynb",
                         {"study_dir": str(tmp_path / "no-such-study"), "out_dir": str(tmp_path / "results")})
    assert not (tmp_path / "results").exists()  # nothing was measured


# ---- the default write-up and a study that is not a numjobs x iodepth sweep ----------------------------

def _stored(tmp_path: Path, spec: dict) -> Path:
    from storagebench._store import StudyStore
    from storagebench._study import load_study

    study = load_study(spec)
    store = StudyStore.for_study(tmp_path, study)
    store.ensure_spec(study)
    return store.root


_DEVICES = {"device": [{"name": "hdd", "target": "/tmp/h"}, {"name": "ssd", "target": "/tmp/s"}]}


@pytest.mark.parametrize("extra, factor, baseline, tail", [
    ({}, "device", "hdd", "-p by='[]'"),
    ({"factors": {**_DEVICES, "bs": ["4k", "64k"]}, "fixed": {"rw": "randread"}, "precision": {"compare": "bs"}}, "bs", "4k", "-p by='[device]'"),
    ({"setups": 3, "setup_factors": ["device"], "blocks": True}, "device", "hdd",
     "-p by='[]' -p unit_columns='[setup]' -p unit=set-up -p pair_on='[block]'"),
])
def test_report_of_a_study_that_is_not_a_sweep_names_the_comparison_to_publish(tmp_path, extra, factor, baseline,
                                                                                tail):
    """A study of another factor (SSD vs HDD) is not what the default write-up reads (a numjobs x iodepth sweep of
    >= 3 cells): publish_report refuses it before any notebook runs, with the compare.ipynb command of the study's
    own factor (precision.compare first), first level and remaining factors; with set-ups the set-up is the unit
    (and the block its pair), as in the fixed design's analysis."""
    from storagebench.publish import not_a_sweep

    root = _stored(tmp_path, {"name": "ssd_hdd", "factors": _DEVICES, "fixed": {"rw": "randread", "bs": "4k"},
                              "runtime": 1, **extra})
    with pytest.raises(PublishError) as exc:
        publish_report(root)
    words = str(exc.value)
    assert "is not a numjobs x iodepth sweep (1 (numjobs, iodepth) cell(s)" in words
    assert f"-p factor={factor} -p baseline={baseline} {tail}" in words
    assert not (root / "notebooks").exists() and not (root / "report.html").exists()
    # every parameter the command gives is one compare.ipynb declares
    given = {a.split("=", 1)[0] for a in shlex.split(words.split("\n")[-1]) if "=" in a and not a.startswith("-")}
    assert given and given <= set(notebook_parameters("compare.ipynb"))
    assert not_a_sweep(FIXTURES / "study_demo") is None  # a sweep: the default write-up
    sweep = _stored(tmp_path / "s", {"name": "qd", "factors": {"iodepth": [1, 2, 4]}, "fixed": {"rw": "randread"},
                                     "runtime": 1, "target": "/tmp/x"})
    assert not_a_sweep(sweep) is None and not_a_sweep(tmp_path / "none") is None

"""Papermill batch runs over parameter sets: validation first, parallel, failures reported."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pandas as pd
import pytest
from conftest import ROOT

from storagebench._batch import ParamSet, load_param_sets, run_batch, validate_param_sets
from storagebench.errors import PublishError


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(
        'x: int = 1  # a count\nscale: float = 2.0  # a factor\nlabel: str = "a"  # a name\nout: str = ""  # file to write\n'
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# batch test"),
        params,
        nbformat.v4.new_code_cell("if x < 0:\n    raise ValueError(f'x must be >= 0, got {x}')"),
        nbformat.v4.new_code_cell("from pathlib import Path\nPath(out).write_text(f'{label}:{x * scale}')\nprint(x * scale)"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def test_load_param_sets_forms_and_errors(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("notebook: nb.ipynb\ndefaults: {scale: 3.0}\nsets:\n  - name: a\n    parameters: {x: 1}\n  - {x: 2}\n")
    sets, nb = load_param_sets(p)
    assert nb == "nb.ipynb"
    assert sets == [ParamSet("a", {"scale": 3.0, "x": 1}), ParamSet("set-001", {"scale": 3.0, "x": 2})]
    p.write_text("- {x: 1}\n- {x: 2}\n")
    assert [s.name for s in load_param_sets(p)[0]] == ["set-000", "set-001"]
    for text, msg in [
        ("sets: []\n", "at least one"),
        ("sets:\n  - name: a\n    parameters: {}\n  - name: a\n    parameters: {}\n", "used twice"),
        ("sets:\n  - name: 'a b'\n    parameters: {}\n", "set name"),
        ("jobs: 3\nsets: [{x: 1}]\n", "top-level keys"),
        ("- 3\n", "must be a mapping"),
        ("sets: [\n", "not valid YAML"),
    ]:
        p.write_text(text)
        with pytest.raises(PublishError, match=msg):
            load_param_sets(p)
    with pytest.raises(PublishError, match="does not exist"):
        load_param_sets(tmp_path / "missing.yaml")


def test_validation_names_set_and_parameter_before_anything_runs(tmp_path):
    nb = _notebook(tmp_path / "nb.ipynb")
    marker = tmp_path / "ran.txt"
    sets = [ParamSet("good", {"x": 1, "out": str(marker)}), ParamSet("typo", {"xx": 1}),
            ParamSet("wrongtype", {"x": "three"}), ParamSet("boolint", {"x": True})]
    with pytest.raises(PublishError) as ei:
        run_batch(nb, sets, tmp_path / "out")
    msg = str(ei.value)
    assert "set 'typo': unknown parameter(s) ['xx']" in msg
    assert "set 'wrongtype': parameter 'x' must be int (a count), got str 'three'" in msg  # one message with -p and the API
    assert "set 'boolint': parameter 'x' must be int" in msg
    assert "'good'" not in msg
    assert not marker.exists()  # nothing ran
    # int is accepted where float is declared
    validate_param_sets([ParamSet("ok", {"scale": 2})], {"scale": {"inferred_type_name": "float"}})


def test_batch_runs_in_parallel_failed_set_does_not_stop_others(tmp_path):
    nb = _notebook(tmp_path / "nb.ipynb")
    params = tmp_path / "sets.yaml"
    params.write_text(
        f"sets:\n"
        f"  - name: one\n    parameters: {{x: 1, label: one, out: '{tmp_path}/one.txt'}}\n"
        f"  - name: bad\n    parameters: {{x: -1, out: '{tmp_path}/bad.txt'}}\n"
        f"  - name: three\n    parameters: {{x: 3, scale: 0.5, out: '{tmp_path}/three.txt'}}\n"
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "runners" / "batch.py"), str(params), "--notebook", str(nb),
         "--out", str(out), "--jobs", "2", "--report"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "2 ok, 1 failed" in proc.stdout
    summary = pd.read_csv(out / "summary.csv", keep_default_na=False)
    assert list(summary["set"]) == ["one", "bad", "three"]
    assert list(summary["status"]) == ["ok", "failed", "ok"]
    bad = summary.set_index("set").loc["bad"]
    assert int(bad["cell_index"]) == 2  # the template's third cell raised
    assert "ValueError: x must be >= 0, got -1" in bad["error"]
    assert (tmp_path / "one.txt").read_text() == "one:2.0"
    assert (tmp_path / "three.txt").read_text() == "a:1.5"
    assert not (tmp_path / "bad.txt").exists()
    for name in ("one", "three"):
        executed = nbformat.read(str(out / name / "nb.ipynb"), as_version=4)
        assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)
        assert (out / name / "nb.html").stat().st_size > 1000
    # the failed set's executed notebook is kept, with the traceback in that cell
    failed_nb = nbformat.read(str(out / "bad" / "nb.ipynb"), as_version=4)
    errors = [c.source for c in failed_nb.cells if c.cell_type == "code"
              for o in c.outputs if o.get("output_type") == "error"]
    assert errors == [nbformat.read(str(nb), as_version=4).cells[2].source]


def test_batch_cli_bad_input_exit_2(tmp_path):
    nb = _notebook(tmp_path / "nb.ipynb")
    params = tmp_path / "sets.yaml"
    params.write_text("- {nope: 1}\n")
    proc = subprocess.run([sys.executable, str(ROOT / "runners" / "batch.py"), str(params), "--notebook",
                           str(nb), "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "set 'set-000': unknown parameter(s) ['nope']" in proc.stderr
    assert not (tmp_path / "o" / "summary.csv").exists()


def test_scaling_notebook_runs_as_a_batch_on_test_servers(tmp_path):
    """The shipped scale-out notebook, two parameter sets, on loopback test servers (tiny runs)."""
    import shutil

    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    params = tmp_path / "sets.yaml"
    params.write_text(
        "notebook: " + str(ROOT / "notebooks" / "studies" / "scaling.ipynb") + "\n"
        "defaults:\n"
        f"  out_dir: '{tmp_path / 'results'}'\n"
        "  runtime: 1.0\n  ramp_time: 0.0\n  repetitions: 1\n  max_clients: 2\n  test_hosts: 2\n"
        "sets:\n"
        "  - name: randread\n    parameters: {patterns: [4k_randread]}\n"
        "  - name: typo-pattern\n    parameters: {patterns: [4k_randreed]}\n"
    )
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "runners" / "batch.py"), str(params), "--out", str(out), "--jobs", "2"],
                          capture_output=True, text=True, timeout=600)
    summary = pd.read_csv(out / "summary.csv", keep_default_na=False).set_index("set")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert summary.loc["randread", "status"] == "ok", summary.loc["randread", "error"]
    assert summary.loc["typo-pattern", "status"] == "failed"
    assert "4k_randreed" in summary.loc["typo-pattern", "error"]
    executed = nbformat.read(str(out / "randread" / "scaling.ipynb"), as_version=4)
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                   for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    import orjson

    from storagebench._study import load_study

    assert "4k_randread" in text
    assert load_study(tmp_path / "results" / "scaling" / "study.yaml").factors["clients"] == [1, 2]
    # both client counts were measured through the runner as ONE study (one dir, one random order)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["scaling"]
    points = [orjson.loads((d / "point.json").read_bytes()) for d in (tmp_path / "results" / "scaling" / "raw").iterdir()]
    assert sorted(p["factors"]["clients"] for p in points) == [1, 2]
    assert sorted(p["run_order"] for p in points) == [0, 1]

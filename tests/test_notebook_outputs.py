"""Notebook templates are stored without outputs; the checked cells' expected stdout is in sidecars.

``runners/store_checked_outputs.py`` writes ``tests/notebook_outputs/<path under notebooks/>.json``;
the root ``conftest.py`` hands them to nbval as the reference outputs of the ``# NBVAL_CHECK_OUTPUT``
cells. The notebooks themselves run under nbval in the same suite (``testpaths``); here: the templates
are clean, every stored entry belongs to a checked cell, and the mechanism compares for real (run on
small notebooks in a project of their own, so no notebook of ``notebooks/`` runs twice).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

TEMPLATES = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _load_runner(root: Path = ROOT):
    spec = importlib.util.spec_from_file_location("store_checked_outputs", root / "runners" / "store_checked_outputs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_notebook_template_is_stored_without_outputs(path):
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {i} ({cell.id}) of {path.name}"


def test_every_stored_output_belongs_to_a_checked_cell():
    """A sidecar entry whose cell was deleted or is no longer checked would be a fact nothing checks.
    (A checked cell without an entry fails in the notebook's own nbval run, naming the command.)"""
    runner = _load_runner()
    sidecars = {p for p in runner.SIDECAR_DIR.rglob("*") if p.is_file()}
    assert sidecars, f"no sidecar in {runner.SIDECAR_DIR}"
    orphans = sidecars - {runner.sidecar_path(p) for p in TEMPLATES}
    assert not orphans, f"sidecars without a notebook: {sorted(str(p.relative_to(ROOT)) for p in orphans)}"
    for path in TEMPLATES:
        checked = [c.id for c in nbformat.read(path, as_version=4).cells if runner.is_checked(c)]
        stored = list(runner.read_expected(path))
        refresh = f"{runner.COMMAND} {path.relative_to(ROOT)}"
        assert stored == [i for i in checked if i in stored], f"stale or out-of-order entries: {refresh}"
        assert runner.sidecar_path(path).exists() == bool(checked), refresh


def _notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, cell in enumerate(nb.cells):
        cell.id = f"{path.stem}-{i}"
    nbformat.write(nb, str(path))


@pytest.fixture
def project(tmp_path) -> Path:
    """A project of its own: the root conftest.py, the runner, three notebooks, ``--nbval-lax``."""
    (tmp_path / "runners").mkdir()
    shutil.copy(ROOT / "conftest.py", tmp_path)
    shutil.copy(ROOT / "runners" / "store_checked_outputs.py", tmp_path / "runners")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --nbval-lax -p no:cacheprovider --color=no\n")
    nbs = tmp_path / "notebooks"
    (nbs / "sub").mkdir(parents=True)
    table = "# NBVAL_CHECK_OUTPUT\nfor k in range(3):\n    print(f'{k} {k / 3:.4f}')"
    _notebook(nbs / "gold.ipynb", ["x = 21", "# NBVAL_CHECK_OUTPUT\nprint(2 * x)", "print('not checked')", table])
    _notebook(nbs / "sub" / "added.ipynb", ["# NBVAL_CHECK_OUTPUT\nprint('a new fact')", "y = 1"])
    _notebook(nbs / "quiet.ipynb", ["# NBVAL_CHECK_OUTPUT\nz = 3", "print(z)"])
    return tmp_path


def _pytest(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "notebooks"], cwd=project,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_checked_cells_are_compared_with_their_sidecar(project):
    runner = _load_runner(project)
    gold = project / "notebooks" / "gold.ipynb"
    assert [runner.store(p) for p in sorted((project / "notebooks").rglob("*.ipynb"))] == [2, 1, 1]
    stored = json.loads(runner.sidecar_path(gold).read_text())
    assert stored == {"notebook": "notebooks/gold.ipynb",
                      "cells": {"gold-1": ["42\n"], "gold-3": ["0 0.0000\n", "1 0.3333\n", "2 0.6667\n"]}}
    assert runner.read_expected(project / "notebooks" / "quiet.ipynb") == {"quiet-0": ""}  # prints nothing
    assert nbformat.read(gold, as_version=4).cells[1].outputs == []  # the notebook is not written
    first = {p: p.read_bytes() for p in runner.SIDECAR_DIR.rglob("*.json")}
    runner.store(gold)
    assert {p: p.read_bytes() for p in runner.SIDECAR_DIR.rglob("*.json")} == first  # storing again: no diff

    proc = _pytest(project)
    assert proc.returncode == 0 and "8 passed" in proc.stdout, proc.stdout + proc.stderr

    # a changed gold value fails that cell, with nbval's diff and where the reference is
    sidecar = runner.sidecar_path(gold)
    sidecar.write_text(sidecar.read_text().replace("1 0.3333", "1 0.3334"))
    # a checked cell added without storing its output fails, naming the notebook, the cell and the command
    added = project / "notebooks" / "sub" / "added.ipynb"
    nb = nbformat.read(added, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(y + 1)"))
    nb.cells[-1].id = "added-new"
    nbformat.write(nb, str(added))
    # a checked cell that now prints what it did not print before fails too
    quiet = project / "notebooks" / "quiet.ipynb"
    nb = nbformat.read(quiet, as_version=4)
    nb.cells[0].source += "\nprint(z)"
    nbformat.write(nb, str(quiet))

    proc = _pytest(project)
    out = proc.stdout
    assert proc.returncode == 1 and "3 failed, 6 passed" in out, out + proc.stderr
    assert "FAILED notebooks/gold.ipynb::Cell 3" in out and "FAILED notebooks/gold.ipynb::Cell 1" not in out
    assert "- 1 0.3333" in out, out
    assert "+ 1 0.3334" in out
    assert ("The reference is the output stored for cell gold-3 in tests/notebook_outputs/gold.json (in a diff "
            "above: + stored, - printed now). If the change is deliberate, store it and review the sidecar's diff: "
            ".venv/bin/python runners/store_checked_outputs.py notebooks/gold.ipynb") in out
    assert ("notebooks/sub/added.ipynb Cell 2 (cell id added-new) is checked (# NBVAL_CHECK_OUTPUT) but "
            "tests/notebook_outputs/sub/added.json stores no output for it: run "
            "`.venv/bin/python runners/store_checked_outputs.py notebooks/sub/added.ipynb`") in out
    assert "FAILED notebooks/quiet.ipynb::Cell 0" in out and "Unexpected output fields from running code" in out

    runner.store(added)  # stored: the new entry, in cell order
    assert runner.read_expected(added) == {"added-0": "a new fact\n", "added-new": "2\n"}


# ---- notebooks are parameters plus library calls: no checks and no sentinel values in cells --------------------

def _code_cells(path: Path) -> list[tuple[str, str]]:
    """``(cell id, source)`` of every code cell, IPython magics and shell lines left out."""
    cells = nbformat.read(path, as_version=4).cells
    return [(c.id, "\n".join(line for line in c.source.splitlines() if not line.lstrip().startswith(("%", "!"))))
            for c in cells if c.cell_type == "code"]


def _logic_in_cells(cells: list[tuple[str, str]]) -> list[str]:
    """What a notebook cell must leave to the library: an ``assert`` (a check that stops the write-up with no
    message for its reader; the library raises a named error or reports the check) and a ``-1`` standing for
    "none" (a sentinel: ``None``, or NaN with a note, says it). ``x[-1]`` (the last item) is an index, not a value."""
    found = []
    for cid, source in cells:
        tree = ast.parse(source)
        indices = {id(n) for s in ast.walk(tree) if isinstance(s, ast.Subscript) for n in ast.walk(s.slice)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                found.append(f"cell {cid}, line {node.lineno}: assert")
            elif (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and id(node) not in indices
                  and isinstance(node.operand, ast.Constant) and node.operand.value == 1
                  and not isinstance(node.operand.value, bool)):
                found.append(f"cell {cid}, line {node.lineno}: -1 used as a value")
    return found


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_notebook_cells_hold_no_assert_and_no_sentinel(path):
    assert _logic_in_cells(_code_cells(path)) == [], path.name


def test_the_cell_check_finds_an_assert_and_a_sentinel():
    cells = [("p", "ramp_time: float = -1.0  # -1 keeps the study's"),
             ("a", "per_run = runs.groupby('run_id').size()\nassert (per_run > 0).all(), per_run"),
             ("s", "checks = {'worst': -1 if empty else worst}"),
             ("ok", "last = hosts[-1]\nname = path.rsplit('/', 1)[-1]\ntail = rows[-1:]\nn = x - 1")]
    assert _logic_in_cells(cells) == ["cell p, line 1: -1 used as a value", "cell a, line 2: assert",
                                      "cell s, line 1: -1 used as a value"]

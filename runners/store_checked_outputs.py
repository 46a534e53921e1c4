#!/usr/bin/env python3
"""Store the expected output of the notebook cells that nbval checks (``# NBVAL_CHECK_OUTPUT``).

Notebook templates are stored without outputs. The facts their checked cells print on the notebook's
small committed-data defaults (row counts, gold findings sentences, gold ratio tables) are kept beside
them, one JSON file per notebook: ``tests/notebook_outputs/<path under notebooks/>.json``, e.g.
``tests/notebook_outputs/studies/vsan_stripe.json`` for ``notebooks/studies/vsan_stripe.ipynb``.
The test run (``conftest.py``) hands them to nbval as the cells' reference outputs, so nbval compares
each checked cell's stdout with them. After a deliberate change of such a fact, re-run this and review
the diff of ``tests/notebook_outputs/``:

    .venv/bin/python runners/store_checked_outputs.py notebooks/*.ipynb notebooks/studies/*.ipynb

Each notebook is executed with papermill on its defaults (in a temp dir); the notebook itself is not
written. A sidecar maps each checked cell's id (nbformat 4.5 ``cell.id``) to its stdout as a list of
lines. The id, not a hash of the source, is the key: it stays when the cell's code is edited, so an edit
that changes the printed fact fails the test with nbval's diff instead of asking for a new entry; a
copied cell gets a new id, and the test names the command that stores it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import nbformat
from nbval.plugin import find_comment_markers, find_metadata_tags

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: Where the expected outputs live, mirroring ``notebooks/``.
SIDECAR_DIR = ROOT / "tests" / "notebook_outputs"
#: This script as a command, for messages (run from the repository root).
COMMAND = ".venv/bin/python runners/store_checked_outputs.py"


def sidecar_path(notebook: str | Path) -> Path:
    """``tests/notebook_outputs/<path under notebooks/>.json`` of a notebook of ``notebooks/``.

    Raises ``ValueError`` for a notebook elsewhere (only the templates have sidecars).
    """
    path = Path(notebook).resolve()
    if not path.is_relative_to(NOTEBOOKS):
        raise ValueError(f"{notebook} is not a notebook of {NOTEBOOKS}: only the templates have stored outputs")
    return (SIDECAR_DIR / path.relative_to(NOTEBOOKS)).with_suffix(".json")


def is_checked(cell) -> bool:
    """nbval's rule under ``--nbval-lax``: a code cell whose output is compared (comment marker or tag)."""
    if cell.cell_type != "code":
        return False
    options = dict(find_metadata_tags(cell.metadata))
    options.update(find_comment_markers(cell.source))  # nbval: comments win over tags
    return bool(options.get("check", False))


def read_expected(notebook: str | Path) -> dict[str, str]:
    """The stored stdout of a notebook's checked cells, ``{cell id: text}``; ``{}`` without a sidecar."""
    path = sidecar_path(notebook)
    if not path.exists():
        return {}
    return {cell_id: "".join(lines) for cell_id, lines in json.loads(path.read_text())["cells"].items()}


def store(notebook: str | Path) -> int:
    """Execute ``notebook`` on its defaults and write the stdout of its checked cells to its sidecar.

    Returns the number of checked cells; a notebook without any has its sidecar removed.
    """
    from storagebench.publish import execute_notebook

    path = sidecar_path(notebook)
    notebook = Path(notebook).resolve()
    nb = nbformat.read(str(notebook), as_version=4)
    checked = [c.id for c in nb.cells if is_checked(c)]
    if not checked:
        path.unlink(missing_ok=True)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        done = nbformat.read(str(execute_notebook(notebook, Path(tmp) / notebook.name)), as_version=4)
    executed = {c.get("id"): c for c in done.cells}  # papermill keeps the template's cell ids
    cells = {}
    for cell_id in checked:
        text = "".join(o["text"] for o in executed[cell_id].outputs
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")
        cells[cell_id] = text.splitlines(keepends=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"notebook": notebook.relative_to(ROOT).as_posix(), "cells": cells}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return len(checked)


def main(argv: list[str]) -> int:
    from storagebench.errors import StorageBenchError

    for arg in argv:
        try:
            n = store(Path(arg))
        except (ValueError, OSError, StorageBenchError) as exc:  # a notebook elsewhere, missing, or failing
            print(f"{arg}: not stored: {exc}", file=sys.stderr)
            return 1
        print(f"{arg}: " + (f"{n} checked cell(s) stored in {sidecar_path(arg).relative_to(ROOT)}" if n
                            else "no checked cell (no sidecar)"))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Store the expected output of the notebook cells that nbval checks (``# NBVAL_CHECK_OUTPUT``).

Notebooks are stored without outputs, except these cells: nbval compares what they print, on the
notebook's small committed-data defaults, with what is stored. After a deliberate change of such a fact
(a row count, a gold value), re-run this and review the diff:

    .venv/bin/python runners/store_checked_outputs.py notebooks/*.ipynb notebooks/studies/*.ipynb

Each notebook is executed with papermill on its defaults (in a temp dir); only the checked cells get
their stdout and an execution count, every other cell is left clean.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MARK = "# NBVAL_CHECK_OUTPUT"


def store(path: Path) -> int:
    import nbformat

    from storagebench.publish import execute_notebook, template_cells

    nb = nbformat.read(str(path), as_version=4)
    checked = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.lstrip().startswith(MARK)]
    if not checked:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        done = nbformat.read(str(execute_notebook(path, Path(tmp) / path.name)), as_version=4)
    executed = dict(template_cells(done))
    for n, i in enumerate(checked, start=1):
        outs = [o for o in executed[i].outputs if o.get("output_type") == "stream" and o.get("name") == "stdout"]
        nb.cells[i].outputs = [nbformat.v4.new_output("stream", name="stdout", text="".join(o["text"] for o in outs))]
        nb.cells[i].execution_count = n
    nbformat.write(nb, str(path))
    return len(checked)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}: {store(Path(arg))} checked cell(s) stored")

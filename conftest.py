"""nbval reads the expected outputs of the notebooks' checked cells from their sidecars.

The templates in ``notebooks/`` are stored without outputs. The expected stdout of each cell nbval checks
(``# NBVAL_CHECK_OUTPUT``) is in ``tests/notebook_outputs/`` (written by
``runners/store_checked_outputs.py``, the owner of that format). The collector below is nbval's own,
given those outputs as the cells' reference: nbval runs each notebook once, as before, and compares and
reports a difference itself. A checked cell without a stored output fails, naming the command that
stores it (without one nbval would take the cell as never run and compare nothing).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbCell, IPyNbFile, NbCellError

_spec = importlib.util.spec_from_file_location(
    "store_checked_outputs", Path(__file__).resolve().parent / "runners" / "store_checked_outputs.py")
sidecars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sidecars)


class MissingExpectedOutput(Exception):
    """A checked cell whose expected output is not stored."""


class SidecarCell(IPyNbCell):
    """nbval's cell item; fails after running when its checked output has no stored reference."""

    def __init__(self, *args, missing: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.missing = missing

    def runtest(self):
        super().runtest()  # runs the cell (later cells need its state) and compares what is stored
        if self.missing:
            raise MissingExpectedOutput(self.missing)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, MissingExpectedOutput):
            return str(excinfo.value)
        text = super().repr_failure(excinfo)
        if isinstance(excinfo.value, NbCellError) and str(excinfo.value) == "Cell outputs differ":
            text += (f"\nThe reference is the output stored for cell {self.cell.id} in {self.parent.sidecar} (in a "
                     f"diff above: + stored, - printed now). If the change is deliberate, store it and review the "
                     f"sidecar's diff: {sidecars.COMMAND} {self.parent.notebook}\n")
        return text


class SidecarNotebook(IPyNbFile):
    """nbval's notebook collector with each checked cell's reference output read from its sidecar."""

    def collect(self):
        expected = sidecars.read_expected(self.path)
        self.notebook = self.path.resolve().relative_to(sidecars.ROOT).as_posix()  # as the command takes it
        self.sidecar = sidecars.sidecar_path(self.path).relative_to(sidecars.ROOT).as_posix()
        for item in super().collect():
            cell, missing = item.cell, None
            if item.options["check"]:
                if cell.get("id") in expected:
                    text = expected[cell.id]
                    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
                    cell.execution_count = 1  # nbval compares only cells that have been run
                else:
                    missing = (f"{self.notebook} {item.name} (cell id {cell.get('id')}) is checked "
                               f"(# NBVAL_CHECK_OUTPUT) but {self.sidecar} stores no output for it: "
                               f"run `{sidecars.COMMAND} {self.notebook}` and review the diff")
            yield SidecarCell.from_parent(self, name=item.name, cell_num=item.cell_num, cell=cell,
                                          options=item.options, missing=missing)


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """nbval's collector for a notebook of ``notebooks/`` becomes :class:`SidecarNotebook`."""
    collected = yield
    if not file_path.resolve().is_relative_to(sidecars.NOTEBOOKS):
        return collected
    return [SidecarNotebook.from_parent(parent, path=file_path) if type(node) is IPyNbFile else node
            for node in collected]

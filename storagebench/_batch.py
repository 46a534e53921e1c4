"""Papermill batch runs: one notebook over many parameter sets, in parallel processes.

A parameter file (YAML) lists the sets::

    notebook: notebooks/studies/scaling.ipynb     # optional; the caller may override it
    defaults:                                     # optional; every set starts from these
      runtime_s: 1
    sets:
      - name: loopback-2
        parameters: {n_hosts: 2, mode: loopback}
      - name: loopback-4
        parameters: {n_hosts: 4, mode: loopback}

or simply a YAML list of parameter mappings (named ``set-000``, ``set-001`` ...).

The file may come from someone else: it is read bounded (:func:`storagebench._safeyaml.read_text_capped`)
by :class:`storagebench._safeyaml.PlainLoader` (any YAML tag refused: ``!!binary``, ``!!python/...``), and
every value goes through the parameter gate (:mod:`storagebench._params`): plain JSON-typed data, then,
against the notebook's ``parameters`` cell, *before anything runs*: an unknown name or a value (or an
element of it) of the wrong type is an error naming the set and the parameter. Then the sets run in a :class:`concurrent.futures.ProcessPoolExecutor`; a
failed set never stops the others; the summary says what ran, what failed (cell index and
error) and where each output is.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ._params import check_parameters
from ._safeyaml import PlainLoader, load_yaml, read_text_capped

# nbformat (with its JSON-schema validator) is imported where a notebook is read, as in publish.
from .errors import PublishError, shown
from .publish import (
    execute_notebook,
    notebook_parameters,
    notebooks_to_html,
    read_notebook,
    template_cells,
)

__all__ = ["ParamSet", "BatchResult", "load_param_sets", "run_batch"]

_SET_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class ParamSet:
    """One named parameter set of a batch."""

    name: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class BatchResult:
    """Outcome of one set.

    Attributes
    ----------
    name : str
    status : {"ok", "failed"}
    notebook : str
        Executed notebook path (written even when a cell failed, when papermill got that far).
    report : str
        HTML report path, or "" when none was asked for / made.
    elapsed_s : float
        Wall time of the set, s.
    cell_index : int
        0-based index of the failing cell in the *template* notebook (the cells papermill adds
        to the executed copy -- injected parameters, error banners -- are not counted), -1 when
        none.
    error : str
        ``ename: evalue`` of the failure, "" when ok.
    """

    name: str
    status: str
    notebook: str
    report: str
    elapsed_s: float
    cell_index: int
    error: str


def load_param_sets(path: "str | os.PathLike[str]") -> tuple[list[ParamSet], str | None]:
    """Read a batch parameter file.

    Returns
    -------
    (list of ParamSet, str or None)
        The sets (defaults applied) and the file's ``notebook`` entry (``None`` when absent).

    Raises
    ------
    PublishError
        Missing file, not a regular file or too large, bad YAML, a YAML tag anywhere (``!!binary``,
        ``!!python/...``, ``!x``), an unknown top-level key, a set that is not a mapping, a bad or
        duplicate set name, no sets, or a value that is not plain JSON-typed data within bounds
        (:func:`storagebench._params.plain`; the message names the set and the parameter).
    """
    p = Path(path)
    if not p.exists():
        raise PublishError(f"parameter file {str(path)!r} does not exist")
    text = read_text_capped(p, error=PublishError, what="parameter file")
    doc = load_yaml(text, where=f"parameter file {p}", error=PublishError, loader=PlainLoader)
    notebook = None
    defaults: dict[str, Any] = {}
    if isinstance(doc, Mapping):
        unknown = sorted(set(doc) - {"notebook", "defaults", "sets"})
        if unknown:
            raise PublishError(f"{p}: top-level keys must be among ['defaults', 'notebook', 'sets'], got {unknown}")
        notebook = doc.get("notebook")
        if notebook is not None and not isinstance(notebook, str):
            raise PublishError(f"{p}: 'notebook' must be a path, got {shown(notebook)}")
        defaults = doc.get("defaults") or {}
        if not isinstance(defaults, Mapping):
            raise PublishError(f"{p}: 'defaults' must be a mapping of parameters, got {shown(defaults)}")
        items = doc.get("sets")
    else:
        items = doc
    if not isinstance(items, list) or not items:
        raise PublishError(f"{p}: must list at least one parameter set (a YAML list, or 'sets:'), got {shown(items)}")
    sets: list[ParamSet] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise PublishError(f"{p}: set {i} must be a mapping of parameters, got {shown(item)}")
        if "parameters" in item:
            extra = sorted(set(item) - {"name", "parameters"})
            if extra:
                raise PublishError(f"{p}: set {i} may only have 'name' and 'parameters', got {extra}")
            name = item.get("name", f"set-{i:03d}")
            if not isinstance(name, str):
                raise PublishError(f"{p}: set {i}: 'name' must be text, got {shown(name)}")
            params = item["parameters"] or {}
            if not isinstance(params, Mapping):
                raise PublishError(f"{p}: set {name!r}: parameters must be a mapping, got {shown(params)}")
        else:
            name, params = f"set-{i:03d}", item
        if not _SET_NAME.match(name):
            raise PublishError(f"{p}: set name must be letters, digits, '.', '_' or '-', got {shown(name)}")
        if any(s.name == name for s in sets):
            raise PublishError(f"{p}: set name {name!r} is used twice")
        merged = {**defaults, **dict(params)}
        checked = check_parameters(merged, None, where=f"{p.name} set {name!r}")  # plain data: the gate's first half
        sets.append(ParamSet(name, checked))
    return sets, notebook


def validate_param_sets(sets: Sequence[ParamSet], declared: Mapping[str, Mapping[str, Any]]) -> list[ParamSet]:
    """Check every set against a notebook's declared parameters (the parameter gate, set by set).

    Parameters
    ----------
    sets : sequence of ParamSet
    declared : mapping
        :func:`papermill.inspect_notebook` output: ``{name: {"inferred_type_name", "default", ...}}``;
        checked by :func:`storagebench._params.check_parameters` (names declared, values plain JSON-typed
        data, every element of the declared type).

    Returns
    -------
    list of ParamSet
        The sets with their values as the gate's fresh plain copies.

    Raises
    ------
    PublishError
        Listing, for every bad set, what the gate refused (an unknown parameter with the declared ones, a
        value that is not plain data, a value or element of the wrong type).
    """
    problems, checked = [], []
    for s in sets:
        if not isinstance(s, ParamSet):
            raise PublishError(f"sets must be ParamSet objects (load_param_sets), got {shown(s)}")
        try:
            checked.append(ParamSet(s.name, check_parameters(s.parameters, declared)))
        except PublishError as exc:
            problems.append(f"set {s.name!r}: {exc}")
    if problems:
        raise PublishError("invalid parameter sets: " + "; ".join(problems))
    return checked


def _html_report(nb_path: Path, html_path: Path) -> None:
    html_path.write_text(notebooks_to_html([nb_path], title=nb_path.stem), encoding="utf-8")


def _failed_cell(executed: Path) -> int:
    """Template index of the first cell with an error output in an executed notebook, or -1."""
    try:
        nb = read_notebook(executed)
    except (OSError, ValueError, PublishError):
        return -1
    for i, cell in template_cells(nb):
        if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.outputs):
            return i
    return -1


def _run_one(notebook: str, pset: ParamSet, out_dir: str, report: bool, kernel_name: str | None,
             cwd: str | None) -> BatchResult:
    t0 = time.monotonic()
    out_nb = Path(out_dir) / pset.name / Path(notebook).name
    html = ""
    try:
        execute_notebook(notebook, out_nb, pset.parameters, kernel_name=kernel_name, cwd=cwd)
        if report:
            html_path = out_nb.with_suffix(".html")
            _html_report(out_nb, html_path)
            html = str(html_path)
        return BatchResult(pset.name, "ok", str(out_nb), html, time.monotonic() - t0, -1, "")
    except Exception as exc:  # one failed set must never stop the batch: report it instead
        cause = exc.__cause__
        cell = _failed_cell(out_nb) if out_nb.exists() else -1
        if getattr(cause, "ename", None):
            err = f"{cause.ename}: {cause.evalue}"
        else:
            err = f"{type(exc).__name__}: {exc}"
        return BatchResult(pset.name, "failed", str(out_nb) if out_nb.exists() else "", "",
                           time.monotonic() - t0, cell, err)


def run_batch(
    notebook: "str | os.PathLike[str]",
    sets: Sequence[ParamSet],
    out_dir: "str | os.PathLike[str]",
    *,
    jobs: int = 1,
    report: bool = False,
    kernel_name: str | None = None,
    cwd: "str | os.PathLike[str] | None" = None,
) -> pd.DataFrame:
    """Execute ``notebook`` once per parameter set, ``jobs`` sets at a time.

    Parameters
    ----------
    notebook : path
        The template notebook (a cell tagged ``parameters``).
    sets : sequence of ParamSet
        From :func:`load_param_sets`; validated here before anything runs.
    out_dir : path
        Outputs go to ``out_dir/<set>/<notebook>.ipynb`` (and ``.html`` with ``report``);
        ``out_dir/summary.csv`` gets the summary.
    jobs : int
        Parallel processes (>= 1).
    report : bool
        Also export each executed notebook as an HTML report (code hidden).
    kernel_name, cwd
        Passed to :func:`storagebench.publish.execute_notebook`.

    Returns
    -------
    pandas.DataFrame
        One row per set in input order: ``set, status, notebook, report, elapsed_s,
        cell_index, error`` (also written to ``summary.csv``).

    Raises
    ------
    PublishError
        Bad ``jobs``, a missing notebook, or invalid sets (nothing has run then).
    """
    if not isinstance(jobs, int) or jobs < 1:
        raise PublishError(f"jobs must be an int >= 1, got {jobs!r}")
    declared = notebook_parameters(notebook)
    sets = validate_param_sets(sets, declared)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nb = str(Path(notebook).resolve()) if Path(notebook).exists() else str(notebook)
    cwd_s = str(cwd) if cwd is not None else None
    results: dict[str, BatchResult] = {}
    if jobs == 1:
        for s in sets:
            results[s.name] = _run_one(nb, s, str(out), report, kernel_name, cwd_s)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = {pool.submit(_run_one, nb, s, str(out), report, kernel_name, cwd_s): s for s in sets}
            for fut in as_completed(futs):
                s = futs[fut]
                try:
                    results[s.name] = fut.result()
                except Exception as exc:  # the worker process itself died
                    results[s.name] = BatchResult(s.name, "failed", "", "", float("nan"), -1,
                                                  f"{type(exc).__name__}: {exc}")
    table = pd.DataFrame([asdict(results[s.name]) for s in sets]).rename(columns={"name": "set"})
    table.to_csv(out / "summary.csv", index=False)
    return table

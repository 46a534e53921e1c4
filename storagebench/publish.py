"""Execute parameterised notebooks with papermill and publish them as one HTML write-up.

The notebooks in ``notebooks/`` are templates: a ``parameters`` cell of annotated
literals, then calls into :mod:`storagebench`. :func:`execute_notebook` runs one of them
with checked parameters; :func:`publish_report` runs the analysis notebook(s) of a study
into ``results/<study>/notebooks/`` and converts them with nbconvert into a single
self-contained ``results/<study>/report.html`` (code hidden, figures embedded as
base64 ``<img>``: SVG by default, PNG on request; :func:`storagebench.show.show_figure`).
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ._calibfile import citation, find_calibrations
from ._params import check_parameters, parameter_type_ok
from ._pubexec import (  # noqa: F401
    DEFAULT_IOPUB_TIMEOUT_S,
    MAX_NOTEBOOK_BYTES,
    NOTEBOOK_DIR,
    _assigned_parameters,
    _check_timeouts,
    _kernel_manager_class,
    _resolve_notebook,
    execute_notebook,
    notebook_parameters,
    read_notebook,
)
from ._pubpage import (  # noqa: F401
    _FIGNUM,
    _H1,
    _SCRIPT_TYPES,
    _STRAY_REPR,
    _TEMPLATE,
    REPORT_CSS,
    _findings_of,
    _is_stray,
    _markdown_outputs,
    _markdown_outputs_to_html,
    _markdown_plain,
    _pop_title,
    _renumber_figures,
    _text,
    build_page,
    jinja2_loader,
    notebook_title,
    notebooks_to_html,
)
from ._pubsite import (  # noqa: F401
    MAX_SIDECAR_BYTES,
    SIDECAR_VERSION,
    _atomic_write,
    _provenance_summary,
    _read_sidecar,
    _relative,
    build_site,
    sidecar_path,
    study_provenance,
)
from ._store import StudyStore

# papermill, nbformat, nbconvert, jupyter_client and jinja2 are imported inside the functions that use them:
# `import storagebench` loads this module, and they would add about a second to every command.
from ._version import __version__
from .errors import PublishError
from .ingest import write_study_tables

__all__ = [
    "NOTEBOOK_DIR",
    "DEFAULT_REPORT_NOTEBOOKS",
    "study_provenance",
    "notebook_parameters",
    "parameter_type_ok",
    "execute_notebook",
    "template_cells",
    "notebooks_to_html",
    "publish_report",
    "partial_banner",
    "memory_banner",
    "not_a_sweep",
    "read_notebook",
    "build_site",
]


#: Notebooks :func:`publish_report` runs when none are named.
DEFAULT_REPORT_NOTEBOOKS: tuple[str, ...] = ("analyze.ipynb",)


def not_a_sweep(study_dir: str | os.PathLike) -> str | None:
    """Why the default write-up (``analyze.ipynb``) cannot read a study, and the comparison to publish instead.

    The default write-up is a ``numjobs`` x ``iodepth`` sweep's (:func:`storagebench.stats.sweep_summary`: knees
    and a frontier need :data:`~storagebench.stats.saturation.MIN_SWEEP_CELLS` cells). A study of another factor
    (SSD vs HDD, a file system vs the raw device) is told so before anything runs, with the ``storagebench
    publish compare.ipynb`` command of its own factor and first level (``precision.compare`` when the spec has
    it), instead of failing in the notebook.

    Parameters
    ----------
    study_dir : path-like
        ``results/<study>/``.

    Returns
    -------
    str or None
        The message; None when the stored ``study.yaml`` plans enough cells, or is missing or unreadable (the
        notebook then says what it finds in the runs).
    """
    import shlex

    from ._study import load_study
    from .errors import StudyError
    from .stats.saturation import MIN_SWEEP_CELLS

    store = StudyStore(study_dir)
    try:
        study = load_study(store.spec_path, stored=True) if store.spec_path.is_file() else None
    except StudyError:
        study = None
    if study is None:
        return None
    cells = {(p.options.get("numjobs", 1), p.options.get("iodepth", 1)) for p in study.expand()}
    if len(cells) >= MIN_SWEEP_CELLS:
        return None
    order = {n: [lv["name"] if isinstance(lv, dict) else lv for lv in study.factors[n]] for n in study.factors}
    varying = [n for n in study.factors if len(order[n]) > 1]
    text = (f"{store.root} is not a numjobs x iodepth sweep ({len(cells)} (numjobs, iodepth) cell(s); the default "
            f"write-up, analyze.ipynb, needs at least {MIN_SWEEP_CELLS})")
    factor = (study.precision or {}).get("compare") or (varying[0] if varying else None)
    if factor is None or factor not in order:
        return text + ": no factor varies, so there is nothing to compare; give --notebook NOTEBOOK"
    q = shlex.quote
    command = (f"storagebench publish compare.ipynb --out {q(str(store.root) + '-compare')} "
               f"-p table={q(str(store.root))} -p factor={q(factor)} -p baseline={q(str(order[factor][0]))} "
               f"-p by={q('[' + ', '.join(n for n in varying if n != factor) + ']')}")
    if study.plan_setups > 1:  # the set-up is the unit (and the block its pair), as the fixed design's analysis
        command += " -p unit_columns='[setup]' -p unit=set-up" + (" -p pair_on='[block]'" if study.blocks else "")
    return f"{text}. It compares levels of {factor}: publish that comparison with\n  {command}"


# The parameter gate is storagebench._params (check_parameters): plain JSON-typed values, each element checked
# against the declared type, copied fresh before papermill. parameter_type_ok is its type rule, kept here by name.


#: Calls that draw a figure outside :mod:`storagebench.plots`: matplotlib's figure makers, the figure of
#: :mod:`storagebench.show` and the testbed studies' ratio figure (see :func:`figure_calls`).
OTHER_FIGURE_CALLS: frozenset[str] = frozenset({"subplots", "figure", "show_figure", "ratio_figure"})
_PLOTS = Path(__file__).with_name("plots")


@functools.cache
def figure_calls() -> frozenset[str]:
    """The names whose call draws a figure: a code cell calling one must show an image when executed.

    Every function of ``storagebench.plots.__all__`` whose return annotation is a matplotlib ``Axes`` or
    ``Figure`` (so a new figure function is covered without an edit here), and :data:`OTHER_FIGURE_CALLS`.
    The figure functions are read from the source of ``storagebench/plots/`` with :mod:`ast`, not imported:
    ``publish`` and ``plots`` are one layer (docs/ARCHITECTURE.md), and importing ``plots`` would load
    matplotlib into every ``storagebench`` command.

    Returns
    -------
    frozenset of str
        Function names (a call ``plots.heatmap(...)`` or ``heatmap(...)`` matches ``"heatmap"``).
    """
    public: set[str] = set()
    for node in ast.parse((_PLOTS / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            public = set(ast.literal_eval(node.value))
    drawn = set()
    for module in sorted(_PLOTS.glob("*.py")):
        for node in ast.parse(module.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name in public and node.returns is not None:
                names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node.returns)
                         if isinstance(n, (ast.Name, ast.Attribute))}
                if names & {"Axes", "Figure"}:
                    drawn.add(node.name)
    return frozenset(drawn) | OTHER_FIGURE_CALLS


_ADDED_TAGS = {"injected-parameters", "papermill-error-cell-tag"}
_IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg")


def template_cells(nb) -> list[tuple[int, Any]]:
    """``(index, cell)`` of an executed notebook's cells that come from the template.

    Cells papermill adds (tagged ``injected-parameters`` or ``papermill-error-cell-tag``) are
    skipped and not counted, so ``index`` is the cell's index in the template notebook.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        An executed notebook (``nbformat.read(path, as_version=4)``).
    """
    out = []
    for cell in nb.cells:
        if not _ADDED_TAGS & set(cell.metadata.get("tags", [])):
            out.append((len(out), cell))
    return out


def _calls_figure(source: str) -> bool:
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    calls = figure_calls()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in calls:
                return True
    return False


def _html_image(out) -> bool:
    """An HTML output holding an embedded image (:func:`storagebench.show.show_figure`'s ``<figure>``)."""
    htm = out.get("data", {}).get("text/html")
    text = htm if isinstance(htm, str) else "".join(htm or [])
    return bool(re.search(r"<img\s[^>]*src=\"data:image/|<svg[\s>]", text))


def missing_figures(notebook: str | os.PathLike) -> list[tuple[int, str]]:
    """The figure-drawing code cells of an executed notebook that have no image output.

    A code cell draws a figure when it calls one of :func:`figure_calls` (``plots.heatmap(...)``,
    ``plt.subplots(...)``, ``ts.ratio_figure(...)`` ...) or is tagged ``figure``; a cell tagged
    ``no-figure`` is never counted. Its executed outputs must hold an image (``image/png``,
    ``image/svg+xml`` or ``image/jpeg`` in a ``display_data`` or ``execute_result``, or an HTML
    output with an embedded image, as :func:`storagebench.show.show_figure` shows one).

    Parameters
    ----------
    notebook : str or path
        An executed ``.ipynb``.

    Returns
    -------
    list of (int, str)
        ``(index, first source line)`` per cell without its image; the index counts the cells of
        the template (cells papermill adds, such as injected parameters, are not counted).

    Raises
    ------
    PublishError
        The notebook cannot be read.
    """
    try:
        nb = read_notebook(notebook)
    except (OSError, ValueError) as exc:
        raise PublishError(f"cannot read executed notebook {notebook}: {exc}") from exc
    missing = []
    for index, cell in template_cells(nb):
        tags = set(cell.metadata.get("tags", []))
        if cell.cell_type != "code" or "no-figure" in tags:
            continue
        if "figure" not in tags and not _calls_figure(cell.source):
            continue
        images = any(out.get("output_type") in ("display_data", "execute_result")
                     and (any(t in out.get("data", {}) for t in _IMAGE_TYPES) or _html_image(out))
                     for out in cell.get("outputs", []))
        if not images:
            first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
            missing.append((index, first))
    return missing


def memory_banner(study_dir: str | os.PathLike) -> str | None:
    """The banner of a write-up whose runs measured memory (a target on tmpfs, devtmpfs or ramfs), or ``None``.

    Parameters
    ----------
    study_dir : str or path
        ``results/<study>/``; read: the ``memory_note`` of each run's ``provenance.json``
        (:func:`storagebench._hostinfo.memory_note`).

    Returns
    -------
    str or None
        e.g. ``"4 of 12 runs: this measured memory: the target '/dev/shm/x' is a file on tmpfs, ..."``, plain
        text (the page escapes it); ``None`` when no run has the note or there are no runs.
    """
    try:
        records = study_provenance(study_dir)
    except PublishError:
        return None
    notes = sorted({r.memory_note for r in records if r.memory_note})
    if not notes:
        return None
    count = sum(1 for r in records if r.memory_note)
    return f"{count} of {len(records)} runs: " + "; ".join(notes[:3]) + (" ..." if len(notes) > 3 else "") + "."


def partial_banner(study_dir: str | os.PathLike, *, partial: bool = False, action: str = "publish") -> str | None:
    """The banner of a write-up of a study whose sweep is still measuring, or ``None`` when none is.

    Parameters
    ----------
    study_dir : str or path
        ``results/<study>/``.
    partial : bool
        Whether a running study may be published (else it is refused).
    action : str
        What is refused, for the message (``"publish"``, ``"ingest"``).

    Returns
    -------
    str or None
        e.g. ``"Partial results: ... 6 of 12 planned runs done ..."`` (runs done: the completed runs,
        :meth:`storagebench._store.StudyStore.completed_run_ids`; planned: the plan of its ``study.yaml``; under
        ``precision:`` ``"6 runs used so far, of at most 60 that precision: allows ..."``: the plan is the rule's
        maximum);
        ``None`` when no sweep holds the study's lock.

    Raises
    ------
    PublishError
        A sweep holds the lock and ``partial`` is false; the message names the pid written in the lock file.
    """
    store = StudyStore(study_dir)
    if store.sweep_holder() is None:
        return None
    state = store.progress()
    pid = (state["holder"] or {}).get("pid")
    if state["planned"] is None:
        runs = f"{state['done']} runs done (the number planned is unknown: study.yaml cannot be read)"
    elif state["adaptive"]:  # precision: the plan is the rule's maximum; the sweep stops each point when answered
        runs = (f"{state['done']} runs used so far, of at most {state['planned']} that precision: allows "
                "(max_repetitions; the adaptive sweep stops each point once it is answered)")
    else:
        runs = f"{state['done']} of {state['planned']} planned runs done"
    if not partial:
        who = f"pid {pid}" if pid is not None else "a process that wrote no pid"
        raise PublishError(f"{store.root} is still being measured: a sweep holds its lock ({who}, as written in "
                           f"{store.root / '.sweep.lock'}); {runs}. Wait for the sweep to finish, or pass "
                           f"--partial (partial=True) to {action} the runs done so far, marked as partial")
    when = "this write-up was published" if action == "publish" else f"the runs were read ({action})"
    return (f"Partial results: the sweep of this study was still running when {when}; {runs}. "
            "Findings, figures, tables and counts cover only those runs.")


def calibration_citations(study_dir: Path, hosts: Sequence[str]) -> tuple[list[str], list[dict[str, str]]]:
    """The latest calibration of each host of a study (:func:`storagebench._calibfile.find_calibrations` under the
    results root, the study directory's parent): the sentences that cite them, and their files and dates for
    ``report.json``. A host without a calibration gets no sentence; a calibration that fails its checks is never
    cited. The sentences hold values from the files: the page shows them through the HTML gate."""
    texts, files = [], []
    for host in hosts:
        found, _ = find_calibrations(study_dir.parent, host)
        if found:
            texts.append(citation(found[0], relative_to=study_dir))
            files.append({"hostname": found[0].hostname, "date": found[0].date,
                          "path": os.path.relpath(found[0].path, study_dir)})
    return texts, files


def publish_report(study_dir: str | os.PathLike, notebooks: Sequence[str | os.PathLike] | None = None,
                   parameters: Mapping[str, Any] | None = None, *, output: str | os.PathLike | None = None,
                   kernel_name: str | None = None, execution_timeout: float | None = None,
                   iopub_timeout: int = DEFAULT_IOPUB_TIMEOUT_S, partial: bool = False,
                   write_tidy: bool = False) -> Path:
    """Execute the analysis notebook(s) of a study and write one self-contained HTML report.

    Parameters
    ----------
    study_dir : str or path
        ``results/<study>/`` holding ``raw/`` (and possibly ``tidy/``).
    notebooks : sequence of str or path, optional
        Templates to run in order (paths, or names in :data:`NOTEBOOK_DIR`); default
        :data:`DEFAULT_REPORT_NOTEBOOKS` (``analyze.ipynb``).
    parameters : mapping, optional
        Parameters for every notebook. ``study_dir`` is filled in (absolute) for each
        notebook that declares it and is not given it here. A parameter that none of the
        notebooks declares is refused.
    output : str or path, optional
        The HTML file; default ``<study_dir>/report.html``.
    kernel_name : str, optional
        Jupyter kernel, as in :func:`execute_notebook`.
    execution_timeout, iopub_timeout
        As in :func:`execute_notebook`.
    partial : bool
        Publish a study whose sweep is still measuring (holds ``.sweep.lock``): the write-up then opens with a
        banner stating the runs done and the runs planned (``report.json`` keeps it as ``partial``). Without it
        such a study is refused.
    write_tidy : bool
        Ingest the study and write its tables into ``<study_dir>/tidy/`` before the notebooks run
        (:func:`storagebench.ingest.write_study_tables`; what ``storagebench report`` does), so that the
        notebooks read them (:func:`storagebench.ingest.read_study_tables`). Not for a study whose sweep is
        still measuring (a partial write-up): its tables are written once the sweep is over. Nothing is
        written for a directory without ``raw/``.

    Returns
    -------
    pathlib.Path
        The HTML report: executed notebooks concatenated, code cells hidden, figures
        embedded as base64 ``<img>`` (SVG by default, :func:`storagebench.show.show_figure`); the
        executed notebooks are kept in ``<study_dir>/notebooks/``.

    Raises
    ------
    PublishError
        ``study_dir`` is being measured by a sweep and ``partial`` is false (the message names the pid the lock
        file holds, and the runs done and planned); ``study_dir`` is not a directory; a notebook is missing, is given a parameter it
        does not declare, or fails (its executed notebook is kept); a cell that draws a figure
        has no image in the executed notebook (:func:`missing_figures`; the message names the
        notebook and the cell, and no report is written).
    """
    sdir = Path(study_dir).resolve()
    if not sdir.is_dir():
        raise PublishError(f"study_dir {str(study_dir)!r} is not a directory")
    banner = partial_banner(sdir, partial=partial)
    memory = memory_banner(sdir)
    if not notebooks:
        refused = not_a_sweep(sdir)
        if refused:
            raise PublishError(refused)
    paths = [_resolve_notebook(n) for n in (notebooks or DEFAULT_REPORT_NOTEBOOKS)]
    if not paths:
        raise PublishError("notebooks must name at least one notebook")
    # the parameter gate first: report.json and every notebook get the same plain copies (a Path becomes its text)
    given = check_parameters(parameters, None, where="publish_report")
    declared = {p: notebook_parameters(p) for p in paths}
    everything = set().union(*(set(d) for d in declared.values()))
    unknown = sorted(set(given) - everything)
    if unknown:
        raise PublishError(
            f"unknown parameter(s) {unknown}: no notebook of {[p.name for p in paths]} declares them; "
            f"they declare {sorted(everything)}"
        )
    if write_tidy and banner is None and (sdir / "raw").is_dir():
        write_study_tables(sdir)
    executed = []
    for path in paths:
        params = {k: v for k, v in given.items() if k in declared[path]}
        if "study_dir" in declared[path]:
            params.setdefault("study_dir", str(sdir))
        out = sdir / "notebooks" / path.name
        done = execute_notebook(path, out, params, kernel_name=kernel_name, execution_timeout=execution_timeout,
                                iopub_timeout=iopub_timeout)
        lost = missing_figures(done)
        if lost:
            cells = "; ".join(f"cell {i} ({first!r})" for i, first in lost)
            raise PublishError(f"notebook {path.name}: {len(lost)} figure cell(s) have no image in the executed "
                               f"notebook {done}: {cells}; output was lost or the figure was closed before it was "
                               f"shown (iopub_timeout={iopub_timeout} s); no report written")
        executed.append(done)
    html_path = Path(output) if output is not None else sdir / "report.html"

    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    try:
        title = notebook_title(read_notebook(executed[0])) or f"storagebench report: {sdir.name}"
    except (OSError, ValueError) as exc:
        raise PublishError(f"cannot read the executed notebook {executed[0]}: {exc}") from exc
    prov = _provenance_summary(sdir)
    meta = f"Published {now:%Y-%m-%d %H:%M} UTC with storagebench {__version__} from " + \
        ", ".join(p.name for p in paths) + (f". Data: {prov['summary']}." if prov.get("summary") else ".")
    cited, cited_files = calibration_citations(sdir, prov.get("hosts", []))
    try:
        page, findings = build_page(executed, title, meta=meta,
                                    banner=" ".join(b for b in (banner, memory) if b) or None, calibration=cited)
    except PublishError:
        raise
    except Exception as exc:  # nbconvert template / conversion errors
        raise PublishError(f"cannot convert {[str(p) for p in executed]} to HTML: {type(exc).__name__}: {exc}") from exc
    if findings.provenance and not prov.get("summary"):
        prov["summary"] = findings.provenance
    sidecar = {
        "format_version": SIDECAR_VERSION, "title": title, "date": now.isoformat().replace("+00:00", "Z"),
        "report": html_path.name, "storagebench_version": __version__, "notebooks": [p.name for p in paths],
        "parameters": {k: _relative(v, html_path.parent) for k, v in given.items()},
        "findings": findings.to_dict()["findings"], "question": findings.title, "provenance": prov,
        **({"partial": banner} if banner else {}), **({"calibration": cited_files} if cited_files else {}),
    }
    _atomic_write(html_path, page)
    _atomic_write(sidecar_path(html_path), orjson.dumps(sidecar, option=orjson.OPT_INDENT_2).decode())
    return html_path



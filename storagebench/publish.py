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
import math
import os
import re
import secrets
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ._html import Markup, html, render_markdown, secure_page, site_href
from ._inputs import open_input, read_input, read_text, walk
from ._params import check_parameters, parameter_type_ok
from ._store import StudyStore

# papermill, nbformat, nbconvert, jupyter_client and jinja2 are imported inside the functions that use them:
# `import storagebench` loads this module, and they would add about a second to every command.
from ._version import __version__
from .errors import PublishError, SchemaError
from .findings import MIME_TYPE, Findings
from .ingest import write_study_tables
from .records import Provenance

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
    "read_notebook",
    "build_site",
]

#: The notebook templates shipped with storagebench (``notebooks/`` of the source tree).
NOTEBOOK_DIR: Path = Path(__file__).resolve().parents[1] / "notebooks"

#: Notebooks :func:`publish_report` runs when none are named.
DEFAULT_REPORT_NOTEBOOKS: tuple[str, ...] = ("analyze.ipynb",)


def study_provenance(study_dir: str | os.PathLike) -> list[Provenance]:
    """The ``provenance.json`` records of the completed runs of a study, for captions.

    Parameters
    ----------
    study_dir : str or path
        ``results/<study>/``; records are read from ``raw/<run_id>/provenance.json``
        (:meth:`storagebench._store.StudyStore.provenance`, any format version this storagebench reads).

    Returns
    -------
    list of storagebench.records.Provenance
        One record per run, in run-id order.

    Raises
    ------
    PublishError
        ``study_dir`` has no ``raw/`` directory, or a record is not valid (not JSON, a newer format,
        a field of the wrong type; the message names the file).
    """
    store = StudyStore(study_dir)
    if not store.raw_dir.is_dir():
        raise PublishError(f"study_dir {str(study_dir)!r} has no raw/ directory of completed runs")
    try:
        return list(store.provenance().values())
    except SchemaError as exc:
        raise PublishError(str(exc)) from exc


#: Largest notebook read, bytes (a template is a few KiB; an executed one with its figures a few MiB).
MAX_NOTEBOOK_BYTES = 64 * 2**20


def read_notebook(path: str | os.PathLike) -> Any:
    """A notebook (nbformat 4) read through the one reader of inputs (:func:`storagebench._inputs.read_text`).

    Parameters
    ----------
    path : str or path
        An ``.ipynb`` file.

    Returns
    -------
    nbformat.NotebookNode

    Raises
    ------
    PublishError
        Not a regular file (a FIFO, a device ...), larger than :data:`MAX_NOTEBOOK_BYTES`, not UTF-8, or not a
        notebook.
    """
    import nbformat

    text = read_text(path, max_bytes=MAX_NOTEBOOK_BYTES, what="notebook", error=PublishError)
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises many kinds for a file that is not a notebook
        raise PublishError(f"{os.fspath(path)}: not a notebook ({type(exc).__name__}: {exc})") from None


def _resolve_notebook(notebook: str | os.PathLike) -> Path:
    path = Path(notebook)
    if not path.exists() and not path.is_absolute() and (NOTEBOOK_DIR / path).exists():
        path = NOTEBOOK_DIR / path
    if not path.exists():
        shipped = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
        raise PublishError(f"notebook {str(notebook)!r} does not exist; the shipped notebooks are {shipped}")
    if path.suffix != ".ipynb":
        raise PublishError(f"notebook {str(notebook)!r} must be a .ipynb file")
    open_input(path, max_bytes=MAX_NOTEBOOK_BYTES, what="notebook", error=PublishError).close()  # a regular file
    return path.resolve()


# The parameter gate is storagebench._params (check_parameters): plain JSON-typed values, each element checked
# against the declared type, copied fresh before papermill. parameter_type_ok is its type rule, kept here by name.


def notebook_parameters(notebook: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The parameters a notebook declares in its cell tagged ``parameters``.

    Parameters
    ----------
    notebook : str or path
        A ``.ipynb`` path, or the name of a notebook in :data:`NOTEBOOK_DIR`.

    Returns
    -------
    dict
        ``{name: {"name", "inferred_type_name", "default", "help"}}`` as reported by
        :func:`papermill.inspect_notebook` (type and help come from the annotation and the
        trailing comment: ``iodepth: int = 32  # outstanding I/Os per job``).

    Raises
    ------
    PublishError
        The notebook does not exist or cannot be read.
    """
    import papermill

    path = _resolve_notebook(notebook)
    try:
        found = dict(papermill.inspect_notebook(str(path)))
    except Exception as exc:  # papermill/nbformat raise many kinds for an unreadable notebook
        raise PublishError(f"cannot read the parameters of {path}: {type(exc).__name__}: {exc}") from exc
    lost = sorted(_assigned_parameters(path) - set(found))
    if lost:  # papermill skips a line it cannot parse (e.g. "x: int | str = 1"): the parameter would vanish
        raise PublishError(f"papermill cannot read the parameter line(s) of {lost} in {path.name}; write the "
                           "annotation as one name (int, float, str, bool, list, dict, object) or Optional[...]")
    return found


def _assigned_parameters(path: Path) -> set[str]:
    """Names assigned in the cell tagged ``parameters`` (empty when the notebook has none or it does not parse)."""
    nb = read_notebook(path)
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    try:
        tree = ast.parse(cell.source) if cell is not None else None
    except SyntaxError:
        return set()
    names = set()
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _kernel_manager_class():
    """The kernel manager papermill starts notebooks with: IPC transport, no signal at a clean shutdown.

    Two messages printed on every publish came from how the kernel was run, not from the notebooks:

    * ``[IPKernelApp] WARNING | Kernel is running over TCP without encryption``: jupyter_client's default
      transport is TCP on 127.0.0.1, where every local account can connect to the kernel's ports. The
      kernel runs on this host only, so it is started with ``transport = "ipc"``: Unix sockets with a
      unique name in Jupyter's runtime directory (mode 0700), reachable by their owner only.
    * ``[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel``: jupyter_client (8.x) sends SIGINT
      before every shutdown request, so that a cell still running stops; after the last cell the kernel
      is idle, and the signal lands in whatever message handler runs at that moment. Here the interrupt
      is skipped while shutting down: the shutdown request arrives on the control channel, which the
      kernel serves even when a cell runs, and a kernel that does not exit in time is still killed by
      ``_async_finish_shutdown``.
    """
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets import CaselessStrEnum, default

    class ReportKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _ip_default(self) -> str:
            # jupyter_client names the sockets after the connection file, or "kernel-ipc" in the current
            # directory when the address is asked for before that file is named: kernels run side by side
            # (batch, tests) would then share sockets. One absolute, unique name per kernel instead.
            runtime = Path(jupyter_runtime_dir())
            runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
            return str(runtime / f"sb-kernel-{uuid.uuid4().hex[:12]}-ipc")

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return ReportKernelManager


#: Seconds papermill (nbclient) waits for a cell's outputs after the kernel says the cell is done.
#: nbclient's default of 4 s lost figures under load (the cell "succeeded" with no image); 60 s,
#: and a timeout is an error instead of a silent skip.
DEFAULT_IOPUB_TIMEOUT_S: int = 60


def _check_timeouts(execution_timeout: float | None, iopub_timeout: int) -> tuple[int | None, int]:
    if execution_timeout is not None:
        if isinstance(execution_timeout, bool) or not isinstance(execution_timeout, (int, float)) \
                or not execution_timeout > 0:
            raise PublishError(f"execution_timeout must be None (no limit) or a number of seconds > 0, "
                               f"got {execution_timeout!r}")
        execution_timeout = int(math.ceil(execution_timeout))
    if isinstance(iopub_timeout, bool) or not isinstance(iopub_timeout, int) or iopub_timeout < 1:
        raise PublishError(f"iopub_timeout must be a whole number of seconds >= 1, got {iopub_timeout!r}")
    return execution_timeout, iopub_timeout


def execute_notebook(notebook: str | os.PathLike, output_path: str | os.PathLike,
                     parameters: Mapping[str, Any] | None = None, *, kernel_name: str | None = None,
                     cwd: str | os.PathLike | None = None, progress_bar: bool = False,
                     start_timeout: float = 120, execution_timeout: float | None = None,
                     iopub_timeout: int = DEFAULT_IOPUB_TIMEOUT_S) -> Path:
    """Run a notebook with papermill after checking its parameters.

    Parameters
    ----------
    notebook : str or path
        The template (``.ipynb``), or the name of one in :data:`NOTEBOOK_DIR`.
    output_path : str or path
        Where the executed notebook is written (directories are created).
    parameters : mapping, optional
        Values for names of the notebook's ``parameters`` cell; papermill injects them in a
        cell after it. A name the notebook does not declare is refused before anything runs.
        Values are plain JSON-typed data (str, int, float, bool, None, lists and str-keyed mappings
        of these), checked against the declared types and copied before papermill sees them.
    kernel_name : str, optional
        Jupyter kernel; default: the notebook's own kernelspec (``python3``).
    cwd : str or path, optional
        Working directory of the kernel; default: the template's directory, so relative
        default paths in the parameters cell work the same as in JupyterLab. papermill changes this
        process's working directory to it while the notebook runs: run notebooks in parallel in
        processes (as ``run_batch`` does), or pass absolute paths from threads.
    progress_bar : bool
        papermill's progress bar (on stderr).
    start_timeout : float
        Seconds to wait for the kernel to start.
    execution_timeout : float, optional
        Seconds one cell may run (papermill ``execution_timeout``); ``None``: no limit.
    iopub_timeout : int
        Seconds to wait for a cell's outputs after it finished (nbclient ``iopub_timeout``,
        default :data:`DEFAULT_IOPUB_TIMEOUT_S`); running out is an error
        (``raise_on_iopub_timeout``), never a cell silently left without its figure.

    Returns
    -------
    pathlib.Path
        ``output_path``.

    Raises
    ------
    PublishError
        The notebook does not exist; a parameter is not declared by the notebook (the
        message names it and the allowed ones), its value is not plain JSON-typed data within
        bounds, or it (or an element of it) is not of the annotated type
        (:func:`storagebench._params.check_parameters`, the parameter gate); a bad timeout; a cell failed or timed out (the executed notebook,
        with the traceback in its failing cell, is saved at ``output_path`` *before* the
        error is raised; the message names the cell and the error).
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    path = _resolve_notebook(notebook)
    execution_timeout, iopub_timeout = _check_timeouts(execution_timeout, iopub_timeout)
    declared = notebook_parameters(path)
    # the gate: declared names, plain JSON-typed values checked element by element against their annotation,
    # fresh copies of built-in types only -- what papermill writes into the injected cell is these and nothing else
    params = check_parameters(parameters, declared, where=path.name)
    out = Path(output_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # the kernel inherits our environment: MPLBACKEND=Agg (common in CI and test runs) would stop
    # figures from being shown inline, so the executed notebook would have no images
    saved_backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        papermill.execute_notebook(
            str(path), str(out), parameters=params, kernel_name=kernel_name,
            cwd=str(cwd) if cwd is not None else str(path.parent), progress_bar=progress_bar,
            start_timeout=start_timeout, log_output=False, execution_timeout=execution_timeout,
            iopub_timeout=iopub_timeout, raise_on_iopub_timeout=True,
            kernel_manager_class=_kernel_manager_class(),
        )
    except PapermillExecutionError as exc:
        raise PublishError(
            f"notebook {path.name} failed in cell {exc.cell_index} (execution count {exc.exec_count}): "
            f"{exc.ename}: {exc.evalue}; the executed notebook is saved at {out}"
        ) from exc
    except Exception as exc:  # kernel died / not found: papermill raises plain RuntimeError, NoSuchKernel ...
        raise PublishError(f"notebook {path.name} could not be executed: {type(exc).__name__}: {exc}") from exc
    finally:
        if saved_backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = saved_backend
    return out


#: The page's stylesheet (screen and print). It replaces JupyterLab's 250 KB theme: a write-up needs
#: readable text, tables that fit the page and figures with captions, not the lab's widgets. The print
#: rules keep every column of a wide table on A4 (smaller type, wrapping cells) instead of cutting it off.
REPORT_CSS = """
:root { --sb-text: #1f2328; --sb-muted: #57606a; --sb-accent: #1a7f37; --sb-rule: #d0d7de; }
html { font-size: 16px; -webkit-text-size-adjust: 100%; }
body { margin: 0; color: var(--sb-text); line-height: 1.5; background: #fff;
       font-family: "DejaVu Sans", "Liberation Sans", "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 1.5rem 2rem 3rem; box-sizing: border-box; }
.jp-Collapser, .jp-InputPrompt, .jp-OutputPrompt, .jp-InputArea-prompt, .jp-OutputArea-prompt { display: none; }
h1 { font-size: 1.9rem; line-height: 1.25; margin: .3em 0 .2em; }
h2 { font-size: 1.4rem; margin: 1.8em 0 .5em; padding-bottom: .2em; border-bottom: 1px solid var(--sb-rule); }
h3 { font-size: 1.15rem; margin: 1.4em 0 .4em; }
p, li { max-width: 80ch; }
code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: .88em; background: #f6f8fa;
       padding: 0 .2em; border-radius: 3px; overflow-wrap: anywhere; }
pre { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: .82rem; white-space: pre-wrap;
      overflow-wrap: anywhere; background: #f6f8fa; padding: .5em .7em; margin: .4em 0; }
table { border-collapse: collapse; margin: .5em 0 1.2em; font-size: .85rem; font-variant-numeric: tabular-nums;
        max-width: 100%; }
th, td { padding: .3em .55em; text-align: right; vertical-align: top; border-bottom: 1px solid #eaeef2;
         white-space: normal; overflow-wrap: break-word; }
thead th { vertical-align: bottom; border-bottom: 2px solid #8c959f; hyphens: manual; }
tbody tr:nth-child(even) { background: #f6f8fa; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .3em; }
figure.sb-figure { margin: 1.6em 0; }
figure.sb-figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: .92rem; max-width: 100ch; margin-top: .5em; }
.sb-fignum { font-weight: 700; }
.sb-provenance { color: var(--sb-muted); }
.sb-findings { border-left: 4px solid var(--sb-accent); background: #f0f8f2; padding: .3em 1.2em .6em;
               margin: 1.2em 0 2em; }
.sb-findings h2 { border: none; margin: .5em 0 .3em; }
.sb-findings li { margin: .35em 0; }
.sb-findings-question { font-style: italic; margin: 0 0 .3em; }
.sb-finding-detail { color: var(--sb-muted); font-size: .85em; }
.sb-findings li.sb-caveat { color: #7a4a00; }
.sb-report-meta { color: var(--sb-muted); font-size: .88rem; }
.sb-partial { border: 2px solid #b45309; background: #fff7ed; padding: .2rem .8rem; margin: .8rem 0; }
.sb-table-note { color: var(--sb-muted); font-size: .85rem; margin: .2em 0; max-width: 100ch; }
details.sb-details { margin: .4em 0 1.2em; }
details.sb-details > summary { cursor: pointer; color: #0969da; }
.sb-scroll { overflow-x: auto; max-width: 100%; }
.sb-scroll th, .sb-scroll td { white-space: nowrap; }
@media print {
  @page { size: A4; margin: 14mm 12mm; }
  html { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  table { font-size: 7.5pt; width: 100%; table-layout: auto; page-break-inside: auto; }
  th, td { padding: 1.5pt 3pt; white-space: normal !important; }
  thead { display: table-header-group; }
  tr, figure.sb-figure, .sb-findings li { break-inside: avoid; }
  h1, h2, h3 { break-after: avoid; }
  figure.sb-figure img { max-height: 200mm; width: auto; }
  details.sb-details > summary { color: inherit; font-weight: 600; list-style: none; }
  details.sb-details::details-content { content-visibility: visible; }  /* paper cannot be clicked open */
  .sb-scroll { overflow: visible; }
  .sb-scroll table { font-size: 6.5pt; }
  .sb-scroll th, .sb-scroll td { white-space: normal; overflow-wrap: anywhere; padding: 1pt 2pt; }
  a { color: inherit; text-decoration: none; }
}
"""

_TEMPLATE = (
    "{%- extends 'index.html.j2' -%}\n"
    "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}\n"
    "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}\n"
    "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n"
    "{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}\n"
    "{%- block data_javascript -%}{%- endblock data_javascript -%}\n"
    "{%- block data_widget_view -%}{%- endblock data_widget_view -%}\n"
    "{%- block notebook_css -%}<style type=\"text/css\">{{ resources.storagebench_css }}</style>"
    "{%- endblock notebook_css -%}\n"
)

# reprs of matplotlib objects left as a cell's value (``Text(0.01, -0.01, '...')``, ``<Axes: ...>``): never content
_STRAY_REPR = re.compile(r"^\s*(\[?<matplotlib\.|\[?<(Figure|Axes)\b|Text\(|\[?<Axes:|<seaborn\.)")
_FIGNUM = re.compile(r'(<figure class="sb-figure" id="figure-)\d+(">)|(<span class="sb-fignum">Figure )\d+(\.</span>)')


def _is_stray(out) -> bool:
    data = out.get("data", {})
    return (out.get("output_type") == "execute_result" and set(data) == {"text/plain"}
            and bool(_STRAY_REPR.match(str(data["text/plain"]))))


def _findings_of(nb) -> list:
    """Pop the :class:`~storagebench.findings.Findings` outputs of a notebook's cells (in order)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        keep = []
        for out in cell.outputs:
            if MIME_TYPE in out.get("data", {}):
                try:
                    found.append(Findings.from_dict(out["data"][MIME_TYPE]))
                except PublishError as exc:
                    raise PublishError(f"a Findings output of the notebook cannot be read: {exc}") from exc
            else:
                keep.append(out)
        cell.outputs = keep
    return found


def _renumber_figures(nb) -> int:
    """Number the ``sb-figure`` outputs of the merged page 1, 2, ... in page order; return the count."""
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            htm = out.get("data", {}).get("text/html")
            if htm is None or "sb-figure" not in (htm if isinstance(htm, str) else "".join(htm)):
                continue
            n += 1
            text = htm if isinstance(htm, str) else "".join(htm)
            out["data"]["text/html"] = _FIGNUM.sub(
                lambda m, k=n: f"{m[1]}{k}{m[2]}" if m[1] else f"{m[3]}{k}{m[4]}", text)
            if "text/plain" in out["data"]:
                out["data"]["text/plain"] = re.sub(r"^Figure \d+\.", f"Figure {n}.", str(out["data"]["text/plain"]))
    return n


_H1 = re.compile(r"^#\s+(.+?)\s*$", flags=re.M)


def _markdown_outputs(cell) -> list:
    """The ``text/markdown`` outputs of an executed code cell (``display(Markdown(...))``)."""
    return [o for o in cell.get("outputs", []) if "text/markdown" in o.get("data", {})]


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def _markdown_plain(text: str) -> str:
    """A Markdown heading's text as plain text: the backslash escapes of :func:`storagebench._html.markdown_text`
    undone (the page's ``<title>`` and the sidecar hold text; they are escaped again when written)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def notebook_title(nb) -> str:
    """The first ``# heading`` of a notebook ("" when it has none).

    It is looked for in cell order, in markdown cells and in the Markdown a code cell displayed, so that
    one template can title each write-up from its results (``display(Markdown(f"# {result.title}"))``,
    as ``notebooks/studies/testbed.ipynb`` does for each testbed study).
    """
    for cell in nb.cells:
        texts = [cell.source] if cell.cell_type == "markdown" else \
            [_text(o["data"]["text/markdown"]) for o in _markdown_outputs(cell)] if cell.cell_type == "code" else []
        for text in texts:
            m = _H1.search(text)
            if m:
                return _markdown_plain(m[1])
    return ""


def _pop_title(cells) -> str | None:
    """Take the page's ``# heading`` out of the first cell holding one (source or displayed Markdown).

    Returns the heading line, or None when no cell before the first other heading holds one.
    """
    for cell in cells:
        if cell.cell_type == "markdown":
            m = _H1.search(cell.source)
            if m:
                cell.source = (cell.source[:m.start()] + cell.source[m.end():]).strip()
                return m[0].strip()
            if cell.source.lstrip().startswith("#"):  # another heading comes first: the page has no title of its own
                return None
        elif cell.cell_type == "code":
            for out in _markdown_outputs(cell):
                text = _text(out["data"]["text/markdown"])
                m = _H1.search(text)
                if m:
                    rest = (text[:m.start()] + text[m.end():]).strip()
                    out["data"]["text/markdown"] = rest
                    if "text/plain" in out["data"]:
                        out["data"]["text/plain"] = rest
                    if not rest:
                        cell.outputs = [o for o in cell.outputs if o is not out]
                    return m[0].strip()
    return None


def build_page(notebooks: Sequence[str | os.PathLike], title: str | None = None, *,
               meta: str = "", banner: str | None = None) -> tuple[str, Any]:
    """The HTML of a write-up and its findings: see :func:`notebooks_to_html`; ``banner`` (text, escaped) is shown
    above everything but the title (a partial study: :func:`partial_banner`).

    Returns
    -------
    (str, Findings)
        The page, and the findings of all notebooks in order (empty when none displayed any).
    """
    import nbformat
    from nbconvert import HTMLExporter


    merged = None
    findings = []
    for path in notebooks:
        nb = read_notebook(path)
        # a cell tagged "nbval-only" holds a check for the tests (a gold value printed for nbval), not content
        nb.cells = [c for c in nb.cells if "nbval-only" not in c.metadata.get("tags", [])]
        for cell in nb.cells:
            if cell.cell_type == "code":
                # progress bars and warnings on stderr, and stray matplotlib reprs, are noise in a write-up
                cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream"
                                                                 and o.get("name") == "stderr") and not _is_stray(o)]
        findings += _findings_of(nb)
        if merged is None:
            merged = nb
        else:
            merged.cells.extend(nb.cells)
    page_title = title or notebook_title(merged) or "storagebench report"
    merged.metadata["title"] = page_title
    all_findings = Findings.concat(findings)
    # the page opens with the title, the meta line and the findings; everything else follows
    head: list = []
    h1 = _pop_title(merged.cells)
    if h1 is not None:  # a heading a code cell displayed may hold data: rendered as every Markdown output is
        title_cell = nbformat.v4.new_code_cell("")
        title_cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": str(render_markdown(h1))})]
        head.append(title_cell)
        merged.cells = [c for c in merged.cells if not (c.cell_type == "markdown" and not c.source.strip())]
    if banner:  # text from data: escaped (markupsafe), never formatted into HTML as it is
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = [nbformat.v4.new_output("display_data", data={
            "text/html": str(html('<div class="sb-partial" role="alert"><p><strong>{}</strong></p></div>', banner)),
            "text/plain": banner})]
        head.append(cell)
    if meta:
        meta_cell = nbformat.v4.new_code_cell("")
        meta_cell.outputs = [nbformat.v4.new_output("display_data", data={
            "text/html": str(html('<p class="sb-report-meta">{}</p>', meta))})]
        head.append(meta_cell)
    if len(all_findings):
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": all_findings._repr_html_(),
                                                                      "text/plain": all_findings.text()})]
        head.append(cell)
    merged.cells = head + [c for c in merged.cells if c is not None]
    _markdown_outputs_to_html(merged)
    merged.metadata.pop("widgets", None)  # widget state is written as <script> elements: a write-up has no widgets
    _renumber_figures(merged)
    offline = jinja2_loader()
    exporter = HTMLExporter(template_name="lab", extra_loaders=[offline], template_file="storagebench_report.html.j2")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.exclude_anchor_links = True
    exporter.embed_images = True
    body, _ = exporter.from_notebook_node(merged, resources={"storagebench_css": REPORT_CSS})
    return secure_page(body, f"the write-up of {[Path(p).name for p in notebooks]}"), all_findings


def _markdown_outputs_to_html(nb) -> None:
    """Render every Markdown output of the code cells with :func:`storagebench._html.render_markdown`.

    A cell's ``display(Markdown(...))`` is built at run time and may hold data; nbconvert would render it with
    raw HTML passed through. Here it becomes an HTML output with raw HTML escaped and harmful link schemes
    removed (the Markdown cells of the template, written by its author, are left to nbconvert). Other
    types of output the page never shows as HTML (``application/javascript``, widget views) are dropped.
    """
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data")
            if not data:
                continue
            for mime in [m for m in data if m in _SCRIPT_TYPES]:
                del data[mime]
            if "text/markdown" in data and "text/html" not in data:
                data["text/html"] = str(render_markdown(_text(data["text/markdown"])))
            data.pop("text/markdown", None)
        cell.outputs = [o for o in cell.outputs if o.get("data", True)]  # nothing left to show


#: Output types that are script or run script when shown: never put on a page.
_SCRIPT_TYPES = frozenset({"application/javascript", "text/javascript", "application/vnd.jupyter.widget-view+json",
                           "application/vnd.jupyter.widget-state+json", "text/vnd.mermaid"})


def jinja2_loader():
    """The Jinja loader of the report template (nbconvert ``lab`` without CDN scripts or the lab theme)."""
    import jinja2

    return jinja2.DictLoader({"storagebench_report.html.j2": _TEMPLATE})


def notebooks_to_html(notebooks: Sequence[str | os.PathLike], title: str | None = None) -> str:
    """One self-contained HTML page of executed notebooks, for reading offline and printing.

    Parameters
    ----------
    notebooks : sequence of str or path
        Executed ``.ipynb`` files, concatenated in this order.
    title : str, optional
        Page title; default: the first notebook's ``# heading``.

    Returns
    -------
    str
        HTML (nbconvert ``lab`` template without CDN scripts, with :data:`REPORT_CSS` for screen and
        print): code cells and prompts hidden, stderr streams, stray matplotlib reprs and cells tagged
        ``nbval-only`` (checks printed for the tests) dropped, figures embedded. The page opens with the first heading and then a *Findings* section made of every
        :class:`storagebench.findings.Findings` the notebooks displayed (taken out of their cells);
        ``storagebench.show`` figures are numbered again in page order.
    """
    return build_page(notebooks, title)[0]


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


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by one rename, with the mode any new file gets here (0666 less the umask).

    ``tempfile.mkstemp`` would create the file 0600 whatever the umask, and a report nobody else can read
    cannot be served or shared; ``os.open(..., 0o666)`` lets the kernel apply the umask as for any file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk says nothing of where: name the file being written
        tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
        :meth:`storagebench._store.StudyStore.completed_run_ids`; planned: the plan of its ``study.yaml``);
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
    runs = (f"{state['done']} of {state['planned']} planned runs" if state["planned"] is not None
            else f"{state['done']} runs (the number planned is unknown: study.yaml cannot be read)")
    if not partial:
        who = f"pid {pid}" if pid is not None else "a process that wrote no pid"
        raise PublishError(f"{store.root} is still being measured: a sweep holds its lock ({who}, as written in "
                           f"{store.root / '.sweep.lock'}); {runs} done. Wait for the sweep to finish, or pass "
                           f"--partial (partial=True) to {action} the runs done so far, marked as partial")
    when = "this write-up was published" if action == "publish" else f"the runs were read ({action})"
    return (f"Partial results: the sweep of this study was still running when {when}; {runs} done. "
            "Findings, figures, tables and counts cover only those runs.")


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
    try:
        page, findings = build_page(executed, title, meta=meta, banner=banner)
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
        **({"partial": banner} if banner else {}),
    }
    _atomic_write(html_path, page)
    _atomic_write(sidecar_path(html_path), orjson.dumps(sidecar, option=orjson.OPT_INDENT_2).decode())
    return html_path


#: Version of the ``report.json`` sidecar format (:func:`publish_report`, read by :func:`build_site`).
SIDECAR_VERSION = 1


def sidecar_path(report: str | os.PathLike) -> Path:
    """``report.json`` beside ``report.html`` (the same name with ``.json``)."""
    return Path(report).with_suffix(".json")


def _relative(value: Any, base: Path) -> Any:
    """A parameter for the sidecar: paths inside the report's directory written relative to it."""
    if isinstance(value, str) and os.path.isabs(value):
        try:
            return str(Path(value).resolve().relative_to(base.resolve())) or "."
        except ValueError:
            return value
    return value


def _provenance_summary(study_dir: Path) -> dict[str, Any]:
    """Runs, hosts, fio versions and dates of a study directory's ``raw/`` records ({} without ``raw/``)."""
    if not (study_dir / "raw").is_dir():
        return {}
    recs = study_provenance(study_dir)
    if not recs:
        return {"runs": 0}

    def uniq(key: str) -> list[str]:
        return sorted({str(getattr(r, key)) for r in recs if getattr(r, key) not in (None, "")})

    started = uniq("started_at")
    out: dict[str, Any] = {"runs": len(recs), "hosts": uniq("hostname"), "fio_versions": uniq("fio_version"),
                           "kernels": uniq("kernel"), "first_run": started[0] if started else None,
                           "last_run": started[-1] if started else None}
    when = f", {started[0][:10]}" + (f" to {started[-1][:10]}" if started and started[-1][:10] != started[0][:10]
                                       else "") if started else ""
    out["summary"] = (f"{len(recs)} fio runs on {', '.join(out['hosts'][:3]) or 'an unknown host'}"
                      f" ({', '.join(out['fio_versions']) or 'fio version unknown'}){when}")
    return out


#: Largest ``report.json`` sidecar read, bytes (:func:`build_site`; a sidecar is a few KiB).
MAX_SIDECAR_BYTES = 16 * 2**20


def _read_sidecar(path: Path, root: Path | None = None) -> dict[str, Any]:
    try:
        data = orjson.loads(read_input(path, max_bytes=MAX_SIDECAR_BYTES, what="report sidecar", error=PublishError,
                                       root=root))
    except (OSError, orjson.JSONDecodeError) as exc:
        raise PublishError(f"{path}: not a readable report sidecar: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list) or "title" not in data:
        raise PublishError(f"{path}: not a report sidecar (no title and findings)")
    version = data.get("format_version")
    if not isinstance(version, int) or version > SIDECAR_VERSION:
        raise PublishError(f"{path}: sidecar format_version {version!r} is not one this storagebench reads "
                           f"(<= {SIDECAR_VERSION}); upgrade storagebench")
    return data


def build_site(results_dir: str | os.PathLike, out: str | os.PathLike | None = None, *,
               headline: int = 3) -> tuple[Path, list[Path], list[str]]:
    """An offline index page of every write-up published under ``results_dir``.

    Parameters
    ----------
    results_dir : str or path
        Directory searched (recursively, up to 4 levels) for ``report.json`` sidecars written by
        :func:`publish_report`; each is listed when its report (``report.html``) is beside it.
    out : str or path, optional
        The index page; default ``<results_dir>/index.html``. Links are relative to it, so the
        directory can be copied or served as it is.
    headline : int
        Findings shown per write-up (results first, then caveats).

    Returns
    -------
    (pathlib.Path, list of Path, list of str)
        The page, the sidecars listed (newest first) and one line per sidecar left out and why.

    Raises
    ------
    PublishError
        ``results_dir`` is not a directory.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise PublishError(f"results_dir {str(results_dir)!r} is not a directory")
    page_path = Path(out) if out is not None else root / "index.html"
    found, skipped = [], []
    # the one walk of inputs (storagebench._inputs.walk): regular files only, symlinks leaving the tree not followed,
    # FIFOs, sockets and devices never opened; hidden names skipped, as a glob would
    for d, dirs, files, bad in walk(root, max_depth=4):
        dirs[:] = [n for n in dirs if not n.startswith(".") and n != "notebooks"]
        skipped += [f"{r.path}: {r.reason}" for r in bad
                    if not os.path.basename(r.path).startswith(".") and (r.path.endswith((".json", ".html"))
                                                                         or "directory" in r.reason)]
        listed = set(files)
        for name in sorted(n for n in files if n.endswith(".json") and not n.startswith(".")):
            sidecar, html_name = Path(d) / name, name[: -len(".json")] + ".html"
            if html_name not in listed:
                if name == "report.json":
                    skipped.append(f"{sidecar}: no {html_name} (a regular file inside the tree) beside it")
                continue
            try:
                data = _read_sidecar(sidecar, root)
            except PublishError as exc:
                if name == "report.json":
                    skipped.append(str(exc))
                continue
            found.append((str(data.get("date") or ""), sidecar, data))
    found.sort(key=lambda t: (t[0], str(t[1])), reverse=True)
    base = page_path.parent.resolve()
    items = []
    for date, sidecar, data in found:
        # the link rule (storagebench._html.site_href): a relative path to a file under the index's directory
        href = site_href(sidecar.with_suffix(".html").absolute(), base)
        fnd = [f for f in data["findings"] if isinstance(f, dict) and f.get("sentence")]
        fnd = [f for f in fnd if not f.get("caveat")] + [f for f in fnd if f.get("caveat")]
        lis = Markup("").join(html('<li class="sb-caveat"><strong>Caveat:</strong> {}</li>', f["sentence"])
                              if f.get("caveat") else html("<li>{}</li>", f["sentence"]) for f in fnd[:headline])
        more = len(fnd) - headline
        when = date.replace("T", " ").replace("Z", " UTC") if date else "date unknown"
        where = str(sidecar.parent.relative_to(root)) if sidecar.parent != root else "."
        summary = data["provenance"].get("summary") if isinstance(data.get("provenance"), dict) else None
        # a write-up published with --partial says so in the index too (its sidecar keeps the banner's text)
        partial = (html('<p class="sb-partial" role="note"><strong>Partial write-up:</strong> {}</p>', data["partial"])
                   if data.get("partial") else "")
        title = (html('<a href="{}">{}</a>', href, data["title"]) if href is not None
                 else html('{} <span class="sb-report-meta">(not linked: {} is not a file under {})</span>',
                           data["title"], sidecar.with_suffix(".html").name, base.name or str(base)))
        items.append(html(
            '<article class="sb-site-entry"><h2>{}</h2><p class="sb-report-meta">{} · {}{}</p>{}{}{}</article>',
            title, when, where, html(" · {}", summary) if summary else "", partial,
            html("<ul>{}</ul>", lis) if lis else Markup("<p>No findings recorded.</p>"),
            html('<p class="sb-report-meta">{} more finding(s) in the write-up.</p>', more) if more > 0 else ""))
    now = dt.datetime.now(dt.timezone.utc)
    left_out = Markup("").join(html("<li>{}</li>", s) for s in skipped)
    page = str(html(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
        "<title>storagebench write-ups</title><style>{css}</style></head><body><main>"
        '<h1>storagebench write-ups</h1><p class="sb-report-meta">{n} write-up(s) under this '
        "directory; index built {now} UTC with storagebench {version}.</p>{items}{left}</main></body></html>\n",
        css=Markup(REPORT_CSS), n=len(found), now=f"{now:%Y-%m-%d %H:%M}", version=__version__,
        items=Markup("").join(items), left=html("<h2>Not listed</h2><ul>{}</ul>", left_out) if skipped else ""))
    page = secure_page(page, f"the index of {root}")
    _atomic_write(page_path, page)
    return page_path, [s for _, s, _ in found], skipped

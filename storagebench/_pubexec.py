"""Running a report notebook: reading it, its parameters, the kernel and the executing client (part of
:mod:`storagebench.publish`).
"""

from __future__ import annotations

import ast
import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._inputs import open_input, read_text
from ._params import check_parameters

# papermill, nbformat, nbconvert, jupyter_client and jinja2 are imported inside the functions that use them:
# `import storagebench` loads this module, and they would add about a second to every command.
from .errors import PublishError

#: The notebook templates shipped with storagebench (``notebooks/`` of the source tree).
NOTEBOOK_DIR: Path = Path(__file__).resolve().parents[1] / "notebooks"


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

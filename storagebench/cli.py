"""``storagebench`` command line: thin wrappers over the library.

Library functions raise :class:`~storagebench.errors.StorageBenchError` and warn with
:class:`~storagebench.errors.StorageBenchWarning`; this module only parses arguments and prints.
Every command runs behind ONE error decorator, :func:`cli_errors`, the only place that turns
errors into messages on stderr and exit codes:

* 0 success; 1 a command-level failure (bad input, fio failed, some files not ingested, a full
  disk or a permission refused: one line naming the path); 2 usage errors (typer's own, and bad
  batch input); 130 interrupted (Ctrl-C), with how to resume.
"""

from __future__ import annotations

import errno
import functools
import inspect
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Annotated, Callable, List, Optional

import typer
from typer.core import TyperCommand, TyperGroup

# Only light modules are imported here, so that `--version`, `-h` and a mistyped option answer at once:
# the library's public names are reached through the package (`sb.run_study`: `storagebench/__init__.py`
# loads each on first use), and the heavy internals (pandas, pyarrow, scipy, statsmodels, matplotlib) in the
# commands that use them.
import storagebench as sb

from ._hostinfo import filesystem_of
from ._version import __version__
from .errors import (
    PublishError,
    StatsError,
    StorageBenchError,
    StorageBenchWarning,
    StudyError,
    display_path,
    shown,
)
from .findings import CONFIDENCE
from .fio.hosts import parse_host, parse_hostfile
from .fio.process import fio_version
from .servers import check_versions, exposure, server_versions


def _plain_type(self, ctx) -> str | None:
    """Help shows ``PATH``, ``INTEGER``, ``TEXT`` (click's metavars), never ``<list[str]>`` or ``<bool>``."""
    if not hasattr(self, "is_flag"):
        return None  # an argument: its name is already its metavar
    if self.is_flag or self.count:
        return None
    if self.metavar:
        return self.metavar
    label = str(self.display_type(ctx)).strip("<>")
    many = label.startswith("list[")
    label = label[5:-1] if many else label
    return _METAVARS.get(label.lower(), label.upper()) + ("..." if many else "")


_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "bool": "BOOLEAN"}


#: What rich reads as a markup tag (``[a, b]``, ``[numjobs]``): rich.markup's rule, which hides such text.
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def _literal_help(text: str | None, *, paragraphs: bool = False) -> str | None:
    """Help text shown as written: brackets escaped for rich (``VALUE is YAML: [a, b]`` kept, not taken for a
    tag), and with ``paragraphs``, the prose paragraphs of a docstring joined into one line each so the
    terminal wraps them (an indented paragraph, an example command, keeps its lines)."""
    if not text:
        return text
    if paragraphs:
        parts = inspect.cleandoc(text).split("\n\n")
        text = "\n\n".join(part if part.startswith(("\b", " ")) or "\n " in part else " ".join(part.split("\n"))
                             for part in parts)
    return _MARKUP_TAG.sub(lambda m: m.group(1) * 2 + "\\" + m.group(2), text)


class _Command(TyperCommand):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.help = _literal_help(self.help, paragraphs=True)
        for p in self.params:
            if getattr(p, "help", None):
                p.help = _literal_help(p.help)

    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for p in params:
            p.display_type_rich = _plain_type.__get__(p)
        return params


class _Group(TyperGroup):
    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for p in params:
            p.display_type_rich = _plain_type.__get__(p)
        return params


#: The command-line interface is the app and its entry point; the commands are reached through them.
__all__ = ["app", "main", "cli_errors"]

app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.",
)


def _command(name: str | None = None, **kw):
    """``@app.command`` with the plain help formatter."""
    return app.command(name, cls=_Command, **kw)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"storagebench {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="print the version and exit")] = False) -> None:
    """storagebench: fio sweeps -> tidy tables -> statistics -> reproducible write-ups.

    Run `storagebench COMMAND -h` for a command's options and examples.
    """


_RESUME = "completed runs are kept; rerun the same command to resume"
_OS_WORDS = {errno.ENOSPC: "no space left on the device", errno.EACCES: "permission denied",
             errno.EPERM: "operation not permitted", errno.EROFS: "read-only file system",
             errno.EDQUOT: "disk quota exceeded", errno.EEXIST: "exists and is not a directory",
             errno.ENOTDIR: "a part of the path is not a directory", errno.EISDIR: "is a directory, not a file",
             errno.ELOOP: "too many levels of symbolic links", errno.ENAMETOOLONG: "file name too long"}


def _kind_of(path: Path) -> str | None:
    """What ``path`` is when it is not a directory or a regular file (``None`` when it is either or absent)."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return next((w for t, w in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")) if t(mode)), "special")


def _out_dir(out: Path, option: str = "--out") -> Path:
    """An ``--out`` that names a directory (created later when missing): refuse a file, a FIFO or a device there,
    or a parent that is a file, in one line (:func:`cli_errors`), before anything runs."""
    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            raise StorageBenchError(f"{option} {out}: {p} is {_kind_of(p) or 'a file'}, not a directory; {option} "
                                    "names a directory (created when missing)")
        if p.exists():
            break
    return out


def _out_file(out: Path, option: str = "--out", example: str = "report.html") -> Path:
    """An ``--out`` that names a file to write: refuse a directory, a FIFO or a device there, or a parent that is
    a file, in one line (:func:`cli_errors`), before anything runs."""
    if out.is_dir():
        raise StorageBenchError(f"{option} {out} is a directory; {option} names the file to write "
                                f"(e.g. {out / example})")
    kind = _kind_of(out)
    if kind is not None:
        raise StorageBenchError(f"{option} {out} is {kind}, not a regular file; {option} names the file to write")
    _out_dir(out.parent, option=f"{option} {out}: the directory")
    return out


def _error(text: str, code: int = 1):
    typer.secho(f"storagebench: error: {text}", err=True, fg="red")
    raise typer.Exit(code)


def cli_errors(*, interrupted: str = _RESUME, error_code: int = 1) -> Callable:
    """Decorator of every command: the one place errors become messages and exit codes.

    Parameters
    ----------
    interrupted : str
        What Ctrl-C leaves behind and how to go on (printed with exit status 130).
    error_code : int
        Exit status of a :class:`StorageBenchError` (1; 2 where bad input means nothing ran).

    The command's :class:`StorageBenchWarning` warnings are printed as ``storagebench: warning: ...``
    lines on stderr; other warnings keep Python's own display.
    """
    def wrap(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args, **kwargs):
            caught: list = []
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", StorageBenchWarning)
                    try:
                        return func(*args, **kwargs)
                    except StorageBenchError as exc:
                        _error(str(exc), error_code)
                    except KeyboardInterrupt:
                        typer.secho(f"storagebench: interrupted; {interrupted}", err=True, fg="yellow")
                        raise typer.Exit(130) from None
                    except OSError as exc:
                        if exc.errno not in _OS_WORDS:
                            raise
                        where = exc.filename or "?"
                        _error(f"{_OS_WORDS[exc.errno]}: {where}" + (f" -> {exc.filename2}" if exc.filename2 else ""))
            finally:
                # shown after the recording ends: inside it, showwarning appends to the list being shown
                for w in caught:
                    if issubclass(w.category, StorageBenchWarning):
                        typer.secho(f"storagebench: warning: {w.message}", err=True, fg="yellow")
                    else:
                        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return run
    return wrap


# ---- run / demo (runner) ---------------------------------------------------------------
@_command("run")
@cli_errors()
def run_cmd(
    study: Annotated[Path, typer.Argument(help="study spec (YAML), e.g. data/studies/demo.yaml")],
    target: Annotated[Optional[str], typer.Option(
        "--target", metavar="PATH", help="fio filename: a file or block device (default: the study's target)")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="results root; the study goes to OUT/<study name>/")] = Path(
        "results"),
    timeout: Annotated[Optional[float], typer.Option(
        "--timeout", help="per-run wall-clock limit, s (default: runtime + ramp + margin)")] = None,
    allow_device: Annotated[Optional[List[str]], typer.Option(
        "--allow-device", metavar="DEVICE", help="allow writes to this block device (repeatable)")] = None,
    stop_on_error: Annotated[bool, typer.Option("--stop-on-error", help="stop at the first failed run")] = False,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="a different spec is stored under this name: move it aside")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar with ETA on stderr")] = True,
    max_runs: Annotated[Optional[int], typer.Option(
        "--max-runs", min=1, help="refuse a plan of more runs than this (default 100,000)")] = None,
    wait_quiet: Annotated[float, typer.Option(
        "--wait-quiet", help="before each run, wait up to this many s for a quiet host (no other fio, no I/O on the "
        "target's device); 0 only records the check in provenance.json")] = 0.0,
    quiet_window: Annotated[Optional[float], typer.Option(
        "--quiet-window", help="sample window of the target device's I/O counters before each run, s "
        "(default: 1% of runtime + ramp_time, 0.02 to 0.5 s)")] = None,
) -> None:
    """Run every not-yet-complete run of STUDY with fio; rerun the same command to resume.

    Examples:

      storagebench run data/studies/qd_threads.yaml --target /mnt/test/sb.dat

      storagebench run data/studies/demo.yaml --target /var/tmp/sb.dat --out results --no-progress
    """
    spec = sb.load_study(study, max_runs=max_runs)
    res = sb.run_study(spec, target=target, out_dir=_out_dir(out), timeout_s=timeout, allow_devices=tuple(allow_device or ()),
                    stop_on_error=stop_on_error, overwrite=overwrite, progress=progress,
                    wait_quiet_s=wait_quiet, quiet_window_s=quiet_window)
    _report_guards(res)
    typer.echo(f"{res.study}: {len(res.completed)} run(s) measured, {len(res.skipped)} already complete, "
               f"{len(res.failed)} failed -> {res.root}")
    for run_id, msg in res.errors.items():
        typer.secho(f"  failed {run_id}: {msg}", err=True, fg="red")
    if res.failed:
        raise typer.Exit(1)


def _report_guards(res) -> None:
    """What the runner's guards found: fio left running by a killed sweep, runs started on a busy host."""
    for s in res.stale_stopped:
        pids = ", ".join(str(p["pid"]) for p in s["processes"])
        typer.secho(f"storagebench: stopped {len(s['processes'])} fio process(es) (pid {pids}) that a killed sweep "
                    f"(pid {s.get('parent_pid')}) had left running, job file {s['marker']}", err=True, fg="yellow")
    for r in res.schedulers_restored:
        what = (f"put the I/O scheduler of {r['device']} back to {r['previous']}" if r["restored"]
                else f"left the I/O scheduler of {r['device']} alone ({r['note']})")
        typer.secho(f"storagebench: a killed sweep had set it to {r['set']} (host_steps); {what}", err=True,
                    fg="yellow")
    if res.not_quiet:
        first_id, first = next(iter(res.not_quiet.items()))
        typer.secho(f"storagebench: warning: {len(res.not_quiet)} run(s) started on a busy host, e.g. {first_id}: "
                    f"{'; '.join(first)}; see quiet_host in their provenance.json (--wait-quiet SECONDS waits "
                    "for a quiet host)", err=True, fg="yellow")


_DEMO_STUDY = Path(__file__).resolve().parents[1] / "data" / "studies" / "demo.yaml"


def _demo_scratch_dir(out: Path) -> Path:
    """A temp dir for the demo's target file on a disk filesystem (O_DIRECT fails on tmpfs)."""
    for base in (out, Path("/var/tmp"), Path.home()):
        fs = filesystem_of(base) if base.exists() else None
        if base.exists() and (fs is None or fs.get("fstype") not in ("tmpfs", "ramfs")):
            return Path(tempfile.mkdtemp(prefix=".storagebench-demo-", dir=base))
    raise StorageBenchError(f"no disk filesystem for the demo's target file: {[str(out), '/var/tmp', str(Path.home())]} "
                            "are all tmpfs/ramfs (O_DIRECT needs a disk filesystem); pass --out on a disk")


@_command("demo")
@cli_errors(interrupted="completed runs are kept; rerun `storagebench demo` to resume")
def demo_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="results root; the study goes to OUT/<study name>/")] = Path(
        "results"),
    keep: Annotated[bool, typer.Option(
        "--keep", help="keep the temporary target file (default: it is removed at the end)")] = False,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="move earlier results of the study aside (OUT/<study>.<utc>) and measure again")] = False,
    study_path: Annotated[Path, typer.Option(
        "--study", help="study spec to run (default: data/studies/demo.yaml)")] = _DEMO_STUDY,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar with ETA on stderr")] = True,
) -> None:
    """Measure this machine's local disk: run the demo study on a temp file (direct I/O), ingest, publish report.html.

    Prints the findings the report opens with: peak IOPS, the recommended numjobs x iodepth with its
    mean and p99 latency, caveats, and how many runs each point rests on.

    Examples:

      storagebench demo

      storagebench demo --out /var/tmp/results --fresh
    """
    from . import ingest, publish
    from ._store import utc_stamp
    from .stats import sweep_summary  # stats (scipy, statsmodels) and studies (matplotlib): see the imports

    t0 = time.monotonic()
    study = sb.load_study(study_path)
    out = _out_dir(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    study_dir = out / study.name
    if fresh and study_dir.exists():
        aside = out / f"{study.name}.{utc_stamp()}"
        study_dir.rename(aside)
        typer.echo(f"earlier results moved to {aside}", err=True)
    scratch = _demo_scratch_dir(out)
    target = scratch / "target.dat"
    try:
        sweep = sb.run_study(study, target=str(target), out_dir=out, progress=progress)
        _report_guards(sweep)
        if not sweep.completed and not sweep.skipped:
            raise StorageBenchError(f"no run of {study.name} completed: {sweep.errors}")
        report = sb.publish_report(study_dir, write_tidy=True)
        result = ingest.read_study_tables(study_dir)  # the tables the report read
        summary = sweep_summary(result.run_totals, result.histograms, provenance=publish.study_provenance(study_dir))
    finally:
        if keep:
            typer.echo(f"target kept: {target}", err=True)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    wall = time.monotonic() - t0
    typer.echo(f"{study.name}: {len(sweep.planned)} runs ({len(sweep.completed)} measured now, {len(sweep.skipped)} "
               f"reused, {len(sweep.failed)} failed) in {wall / 60:.1f} min")
    typer.echo(summary.findings().text())
    if sweep.skipped:
        typer.echo(f"note: {len(sweep.skipped)} run(s) were reused from {study_dir}; --fresh measures them again")
    typer.echo(f"report: {report}")
    if sweep.failed:
        raise typer.Exit(1)


# ---- end run / demo ----------------------------------------------------------------------

# ---- ingest ------------------------------------------------------------------------------
@_command("ingest")
@cli_errors()
def ingest(
    paths: Annotated[List[Path], typer.Argument(
        help="fio JSON/JSON+ outputs, fio logs, DiskSPD XML/text, Iometer CSV, run or result directories")],
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for runs/histograms/all_clients/timeseries.parquet")],
    batch_files: Annotated[int, typer.Option("--batch-files", help="files per parquet batch (bounds memory)")] = 500,
    max_file_size: Annotated[int, typer.Option(
        "--max-file-size", min=1, help="MiB: a larger input file is reported, not read")] = 512,
    partial: Annotated[bool, typer.Option(
        "--partial", help="ingest a study whose sweep is still running (its completed runs; a warning says so)")] = False,
) -> None:
    """Ingest fio (and DiskSPD / Iometer) output into the tidy parquet tables; list every file not ingested.

    A study whose sweep is still running is refused (its tables would read as whole) unless --partial is given.

    Examples:

      storagebench ingest results/qd_threads/raw --out results/qd_threads/tidy

      storagebench ingest other/*.json diskspd.xml --out tidy/
    """
    _out_dir(out)
    for banner in _running_studies(paths, partial=partial, action="ingest"):
        typer.secho(f"storagebench: warning: {banner}", err=True, fg="yellow")
    summary = sb.ingest_to_parquet(paths, out, batch_files=batch_files, max_file_bytes=max_file_size * 2**20)
    for name, path in summary.paths.items():
        typer.echo(f"{name}: {summary.rows[name]} rows -> {path}")
    typer.echo(f"{summary.files} files ingested, {len(summary.errors)} not ingested")
    if summary.errors:
        for err in summary.errors:
            typer.secho(f"not ingested: {display_path(err.path)}: {err.reason}", err=True, fg="red")
        raise typer.Exit(1)


def _running_studies(paths: List[Path], *, partial: bool, action: str) -> list[str]:
    """The study directories among ``paths`` (a study, its ``raw/``, a run in it, or a directory of studies) whose
    sweep holds the lock: refused unless ``partial`` (``publish.partial_banner``), else one line each saying so."""
    import itertools

    from .publish import partial_banner

    studies: dict[Path, None] = {}
    for p in paths:
        near = [p, p.parent, p.parent.parent]
        if p.is_dir():
            try:
                near += [c for c in itertools.islice(p.iterdir(), 10_000) if c.is_dir()]
            except OSError:
                pass
        for c in near:
            if (c / ".sweep.lock").exists() and (c / "raw").is_dir():
                studies[c.resolve()] = None
    lines = []
    for study_dir in studies:
        banner = partial_banner(study_dir, partial=partial, action=action)
        if banner:
            lines.append(f"{study_dir}: {banner}")
    return lines
# ---- end ingest --------------------------------------------------------------------------

# ---- report ------------------------------------------------------------------------------
@_command("report")
@cli_errors()
def report_cmd(
    study_dir: Annotated[Path, typer.Argument(help="results/<study>/ of a sweep (holds raw/)")],
    notebook: Annotated[Optional[List[str]], typer.Option(
        "--notebook", metavar="NOTEBOOK", help="notebook(s) to publish, in order (default: notebooks/analyze.ipynb)")] = None,
    out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="HTML file (default: STUDY_DIR/report.html); its report.json sidecar goes beside it")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", hidden=True, help="deprecated: use --out")] = None,
    partial: Annotated[bool, typer.Option(
        "--partial", help="publish a study whose sweep is still running, under a banner stating the runs done and "
        "planned (without it such a study is refused)")] = False,
) -> None:
    """Ingest STUDY_DIR, execute the analysis notebook and write STUDY_DIR/report.html; print its path.

    A study whose sweep is still running is refused unless --partial is given.

    Examples:

      storagebench report results/demo

      storagebench report results/qd_threads --out /srv/www/qd_threads.html
    """
    if output is not None:
        typer.secho("storagebench: warning: --output is deprecated; use --out", err=True, fg="yellow")
        if out is not None and out != output:
            raise StorageBenchError(f"--out {out} and the deprecated --output {output} disagree; give --out only")
        out = output
    if out is not None:
        _out_file(out)
    # report stores the study's tidy tables (not those of a study still measured: once its sweep is over)
    path = sb.publish_report(study_dir, notebooks=notebook or None, output=out, partial=partial, write_tidy=True)
    typer.echo(str(path))


def _parse_params(items: List[str]) -> dict:
    """``-p name=value`` pairs; values are plain YAML data (``4`` -> int, ``[a, b]`` -> list), never a tag.

    Each value goes through the parameter gate's reader (:func:`storagebench._params.parse_value`): a YAML
    tag (``!!binary``, ``!!python/...``, ``!x``) is refused, a date stays text, the value is plain JSON-typed
    data within bounds; its type is checked against the notebook's parameters cell when the notebook runs.
    A string value naming an existing file or directory relative to the current directory is passed as an
    absolute path: the notebook runs in its own directory, where the relative path would mean another file.
    """
    from ._params import parse_value

    params = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise PublishError(f"-p must be NAME=VALUE with NAME a notebook parameter, got {shown(item)}")
        if name in params:
            raise PublishError(f"-p {name}= is given twice; give each parameter once")
        value = parse_value(text, name=name, where="-p")
        if isinstance(value, str) and value and not Path(value).is_absolute() and _exists(value):
            value = str(Path(value).resolve())
        params[name] = value
    return params


def _exists(text: str) -> bool:
    """``Path(text).exists()`` that is False, not an error, for a name the OS cannot take (too long, NUL)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


@_command("publish")
@cli_errors()
def publish_cmd(
    notebook: Annotated[List[str], typer.Argument(
        help="notebook(s), a path or a name under notebooks/ (e.g. studies/vsan_stripe.ipynb)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for the executed notebooks, report.html and report.json")],
    param: Annotated[Optional[List[str]], typer.Option(
        "--param", "-p", metavar="NAME=VALUE",
        help="a parameter of the notebooks' parameters cell (repeat); VALUE is YAML: 4, 0.5, text, [a, b]")] = None,
) -> None:
    """Execute notebook(s) with papermill and publish OUT/report.html (e.g. the published-table studies).

    Examples:

      storagebench publish studies/hdd_iops.ipynb --out results/hdd_iops

      storagebench publish compare.ipynb --out results/demo-compare \\
          -p table=results/demo/tidy/runs.parquet -p factor=iodepth \\
          -p baseline=1 -p metric=iops -p by='[numjobs]'
    """
    from . import publish
    params = _parse_params(param or [])
    _out_dir(out).mkdir(parents=True, exist_ok=True)
    declared = set().union(*(publish.notebook_parameters(n) for n in notebook))
    if "out_dir" in declared:
        params.setdefault("out_dir", str(out.resolve()))
    path = sb.publish_report(out, notebooks=notebook, parameters=params)
    typer.echo(str(path))


@_command("site")
@cli_errors()
def site_cmd(
    results_dir: Annotated[Path, typer.Argument(help="directory holding published write-ups (report.html + report.json)")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="index page (default: RESULTS_DIR/index.html)")] = None,
) -> None:
    """Write an offline index page of every write-up under RESULTS_DIR: title, date, headline findings.

    Examples:

      storagebench site results

      storagebench site results --out results/index.html
    """
    path, listed, skipped = sb.build_site(results_dir, None if out is None else _out_file(out, example="index.html"))
    for why in skipped:
        typer.secho(f"storagebench: warning: not listed: {why}", err=True, fg="yellow")
    typer.echo(f"{len(listed)} write-up(s) -> {path}")

# ---- end report --------------------------------------------------------------------------

# ---- compare (stats) ---------------------------------------------------------------------
@_command("compare")
@cli_errors()
def compare_cmd(
    table: Annotated[str, typer.Argument(help="results table (.parquet/.csv, e.g. results/<study>/tidy/runs.parquet), "
                                         "a study directory, or published:<name>")],
    factor: Annotated[str, typer.Option("--factor", help="column whose levels are compared, e.g. stripe_width")],
    baseline: Annotated[str, typer.Option("--baseline", help="the reference level of --factor, e.g. 1")],
    metric: Annotated[str, typer.Option("--metric", help="metric column, > 0: iops, bw_bytes_per_s, lat_mean_ns ...")],
    by: Annotated[Optional[List[str]], typer.Option(
        "--by", metavar="COLUMN", help="group column (repeat): one comparison per group")] = None,
    pair_on: Annotated[Optional[List[str]], typer.Option(
        "--pair-on", metavar="COLUMN", help="column matching rows across levels (repeat)")] = None,
    where: Annotated[Optional[List[str]], typer.Option(
        "--where", metavar="COLUMN=VALUE", help="keep rows with COLUMN=VALUE (repeat)")] = None,
    margin: Annotated[Optional[float],
                      typer.Option("--margin", help="equivalence margin as a fraction (0.01 = 1%): TOST")] = None,
    confidence: Annotated[float, typer.Option("--confidence", help="confidence level of the CIs")] = CONFIDENCE,
    adjust: Annotated[str, typer.Option("--adjust", help="p adjustment: holm, fdr_bh, bonferroni, hommel, none")] = "holm",
    estimand: Annotated[str, typer.Option(
        "--estimand", help="geometric (ratio of geometric means, log-scale t) or arithmetic (Fieller)")] = "geometric",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="write the full table here (.csv or .parquet)")] = None,
) -> None:
    """Compare each level of --factor with --baseline on --metric: ratio, CI, p, adjusted p, per group.

    Without --by every other factor that varies is pooled into one comparison; a warning names them.

    Examples:

      storagebench compare results/demo --factor iodepth --baseline 1 \\
          --metric iops --by numjobs

      storagebench compare published:vsan_stripe --factor stripe_width \\
          --baseline 1 --metric iops --by pattern --by direction \\
          --pair-on vms --pair-on source_tool --out stripe.csv
    """
    import pandas as pd

    from .published import match_level, select_rows
    from .stats import compare  # stats (scipy, statsmodels): see the imports
    from .stats.comparison import TABLE_SUFFIXES
    from .stats.ratio import ESTIMANDS

    if out is not None and out.suffix.lower() not in TABLE_SUFFIXES:
        raise StatsError(f"--out suffix must be one of {list(TABLE_SUFFIXES)}, got {out.suffix!r}")
    if out is not None:
        _out_file(out, example="comparison.csv")
    df = select_rows(sb.load_table(table), where or [])
    if factor not in df.columns:
        raise StatsError(f"--factor must be one of the table's columns {list(df.columns)}, got {factor!r}")
    level = match_level(df[factor], baseline, f"--baseline (a level of {factor!r})")
    result = compare(df, factor, level, metric, by=by or None, pair_on=pair_on or None, margin=margin,
                     confidence=confidence, adjust=adjust, estimand=estimand)
    frame = result.to_frame()
    shown = list(result.by) + ["level", "n_baseline", "n_other", "estimate", "ratio", "ci_low", "ci_high", "p",
                               "p_adjusted", "equivalent", "note"]
    pct = f"{result.confidence:.0%}"
    typer.echo(f"{metric}: {factor} levels vs baseline {factor}={level!r} ({table}, {len(df)} rows); "
               f"ratio = {ESTIMANDS[result.estimand]} with its {pct} CI and p from one test; "
               f"estimate = mean(other) - mean(baseline) in {metric}'s unit (descriptive); "
               f"p adjusted by {adjust}")
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.max_colwidth", 60):
        typer.echo(frame[shown].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    for method in pd.unique(frame["method"]):
        if method:
            typer.echo(f"method: {method}")
    typer.echo(f"design: {result.design}")
    typer.echo(f"family: {result.family}")
    if out is not None:
        typer.echo(f"wrote {result.to_file(out)}")

# ---- end compare -------------------------------------------------------------------------

# ---- testbed studies ---------------------------------------------------------------------


def _params(items: Optional[List[str]]) -> dict:
    """``KEY=VALUE`` pairs; values are plain YAML data (5, 0.5, true, text), read by the parameter gate.

    They become the testbed notebook's ``params`` parameter: :func:`storagebench._params.parse_value`
    refuses a YAML tag and anything that is not plain JSON-typed data.
    """
    from ._params import parse_value

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"must be KEY=VALUE with KEY a name, got {shown(item)}", param_hint="-p/--param")
        out[key] = parse_value(value, name=key, where="-p")  # a refused value: PublishError, exit 1 as for publish -p
    return out


@_command("testbed")
@cli_errors(interrupted="the testbed was torn down, completed runs are kept; rerun the same command to resume (a "
                        "set-up measured in part is built and measured again as a whole)")
def testbed_cmd(
    study: Annotated[Optional[str], typer.Argument(
        help="a testbed study (storagebench testbed --list names them)")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="results root; the study goes to OUT/<study>[-quick]/")] = Path(
        "results"),
    quick: Annotated[bool, typer.Option("--quick", help="the spec's quick variant (test_factors, test_settings)")] = False,
    confidence: Annotated[float, typer.Option("--confidence", help="level of every CI; tests at 1 - confidence")] = CONFIDENCE,
    param: Annotated[Optional[List[str]], typer.Option(
        "-p", "--param", help="analysis parameter of the study as KEY=VALUE (repeatable), e.g. -p qos_p99_ms=5")] = None,
    report: Annotated[bool, typer.Option(
        "--report/--no-report", help="execute notebooks/studies/testbed.ipynb into OUT/<study>/report.html")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar on stderr")] = True,
    list_: Annotated[bool, typer.Option("--list", help="list the testbed studies and their parameters")] = False,
) -> None:
    """Build STUDY's testbed afresh for each set-up (root), measure, tear down, print the findings.

    Examples:

      storagebench testbed --list

      storagebench testbed stripe_width --quick

      storagebench testbed fast_vs_slow -p qos_p99_ms=2 --confidence 0.99 \\
          --out results
    """
    import pandas as pd

    from . import studies  # the studies draw with plots (matplotlib): see the imports

    if list_:
        for name in studies.names():
            ts = studies.get(name)
            params = ", ".join(f"{k}={v!r}" for k, v in ts.parameters().items()) or "no parameters"
            typer.echo(f"{name}: {ts.title} [{params}] ({ts.spec_path})")
        return
    if study is None:
        raise typer.BadParameter(f"name a study: one of {', '.join(studies.names())}", param_hint="STUDY")
    params = _params(param)
    res = studies.run(study, out_dir=_out_dir(out), quick=quick, progress=progress, confidence=confidence, params=params)
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in res.phases_s.items())
    sw = res.sweep
    typer.echo(f"{res.name}: {res.completed} run(s) measured, {res.skipped} already complete, {res.failed} failed, "
               f"{len(sw.set_aside)} set aside, {len(sw.builds)} testbed build(s) in {res.wall_s:.1f} s ({phases}) "
               f"-> {res.study_dir}")
    for note in dict.fromkeys(n for r in res.set_ups for n in r.notes):
        typer.echo(f"  testbed: {note}")
    typer.echo("\nfindings:")
    for f in res.result.findings:
        typer.echo(f"- {f.sentence}")
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 40):
        typer.echo(f"\nverdicts:\n{res.result.verdict_summary().to_string(index=False)}")
    if report:
        html = sb.publish_report(res.study_dir, notebooks=[studies.NOTEBOOK],
                              parameters={"study": study, "confidence": confidence, "params": params})
        typer.echo(f"\nreport: {html}")
    if res.failed:
        raise typer.Exit(1)


@_command("testbed-leftovers")
@cli_errors()
def testbed_leftovers_cmd(
    cleanup: Annotated[bool, typer.Option(
        "--cleanup", help="tear down the leftovers of storagebench processes that no longer run")] = False,
) -> None:
    """List loop devices, mounts and zram devices created by storagebench testbeds that are still there.

    Examples:

      storagebench testbed-leftovers

      storagebench testbed-leftovers --cleanup
    """
    if cleanup:
        for r in sb.testbed.cleanup_stale():
            typer.echo(f"removed {r['kind']} {r['path']} (process {r['pid']} is gone)")
    rows = sb.testbed.leftovers(all_processes=True)
    for r in rows:
        state = "running" if r["alive"] else "gone: --cleanup removes it"
        typer.echo(f"{r['kind']} {r['path']} (process {r['pid']}, {state})")
    if not rows:
        typer.echo("no testbed leftovers")


# ---- end testbed studies -----------------------------------------------------------------

# ---- hosts / batch (scale-out) -----------------------------------------------------------
@_command("hosts")
@cli_errors()
def hosts_cmd(
    hosts: Annotated[Optional[List[str]], typer.Argument(help="fio servers: sock:/path, host[,port] or host:port")] = None,
    hostfile: Annotated[Optional[Path], typer.Option("--hostfile", help="fio host file (one host a line)")] = None,
    fio_bin: Annotated[str, typer.Option("--fio", metavar="PATH", help="controller's fio executable")] = "fio",
) -> None:
    """Check fio servers: reachable, on the controller's fio version, and reachable by nobody else.

    fio servers have no authentication; a warning names each server that other local accounts
    can reach (a TCP port on this host, a socket others can open) and why.

    Examples:

      storagebench hosts sock:/run/sb/fio0.sock sock:/run/sb/fio1.sock

      storagebench hosts --hostfile hosts.list
    """
    hs = [parse_host(h) for h in (hosts or [])] + (parse_hostfile(hostfile) if hostfile else [])
    if not hs:
        raise typer.BadParameter("give HOSTS or --hostfile")
    versions = server_versions(hs, fio_bin)
    for h, v in versions.items():
        typer.echo(f"{h}\t{v}")
    check_versions(versions, fio_version(fio_bin))
    exposed = {h.label: exposure(h) for h in hs}
    typer.echo(f"{len(hs)} server(s) reachable, all on the controller's fio version")
    warned = {label: why for label, why in exposed.items() if why}
    for label, why in warned.items():
        typer.secho(f"warning: fio server {label} can be reached by other local users: {'; '.join(why)}",
                    err=True, fg="yellow")
    if warned:
        typer.secho(
            "  fio servers have no authentication: whoever connects runs jobs, and programs (exec_prerun), "
            "as the server's user (root for a storage benchmark).\n"
            "  Local test servers: use Unix sockets in a directory only you can enter (the default of "
            "`runners/test_hosts.py start` and `storagebench scaling`).\n"
            "  Remote servers: an isolated network, or SSH forwarding to a socket in a directory of mode 0700 "
            "(ssh -L /dir/fio.sock:/remote/fio.sock host); never a server on a shared network.\n"
            "  See docs/ARCHITECTURE.md, 'fio servers'.", err=True, fg="yellow")


@_command("scaling")
@cli_errors()
def scaling_cmd(
    study: Annotated[Path, typer.Argument(help="study spec with a `clients` factor (data/studies/scaling.yaml)")],
    hostfile: Annotated[Optional[Path], typer.Option("--hosts", help="fio host file; default: start test servers")] = None,
    test_hosts: Annotated[int, typer.Option("--test-hosts", help="test servers to start without --hosts")] = 4,
    test_mode: Annotated[str, typer.Option(
        "--test-mode",
        help="socket (owner-only Unix sockets), loopback (TCP: every local account can reach it) or netns (root)")] = "socket",
    insecure_tcp: Annotated[bool, typer.Option(
        "--insecure-tcp", help="netns without its nftables owner guard: every local account can reach it")] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help="results root")] = Path("results"),
    runtime: Annotated[float, typer.Option("--runtime", help="s per run; 0 keeps the spec's")] = 0.0,
    repetitions: Annotated[int, typer.Option("--repetitions", help="runs per point; 0 keeps the spec's")] = 0,
) -> None:
    """Run a scale-out study: level n of `clients` on the first n fio servers, one study in random order.

    Examples:

      storagebench scaling data/studies/scaling.yaml

      storagebench scaling data/studies/scaling.yaml --hosts hosts.list \\
          --out results
    """
    s = sb.measure_scaling(study, str(hostfile) if hostfile else None, _out_dir(out), test_hosts=test_hosts,
                        test_mode=test_mode, test_insecure_tcp=insecure_tcp, runtime=runtime,
                        repetitions=repetitions, progress=True)
    typer.echo(f"{s.study}: {len(s.completed)} measured, {len(s.skipped)} already done, "
               f"{len(s.failed)} failed -> {s.root}")
    for run_id, msg in s.errors.items():
        typer.echo(f"  failed {run_id}: {msg}", err=True)
    if s.failed:
        raise typer.Exit(1)


@_command("batch")
@cli_errors(error_code=2, interrupted="sets that finished are in OUT/<set>/; rerun to run them all again")
def batch_cmd(
    params: Annotated[Path, typer.Argument(help="YAML file of parameter sets")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory (OUT/<set>/, OUT/summary.csv)")],
    notebook: Annotated[Optional[Path], typer.Option(
        "--notebook", help="template (default: the file's 'notebook' entry)")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="parallel processes")] = 1,
    report: Annotated[bool, typer.Option("--report", help="also an HTML report per set")] = False,
    kernel: Annotated[Optional[str], typer.Option(
        "--kernel", help="Jupyter kernel name (default: the notebook's)")] = None,
) -> None:
    """Execute a notebook over parameter sets with papermill (validated first, run in parallel).

    Exit status: 0 when every set ran, 1 when a set failed, 2 for bad input (nothing ran).
    `runners/batch.py` is this command.

    Examples:

      storagebench batch sets.yaml --notebook notebooks/studies/scaling.ipynb --out results/batch --jobs 2

      storagebench batch sets.yaml --out results/batch --report
    """
    from ._batch import load_param_sets
    _out_dir(out)
    sets, nb = load_param_sets(params)
    nb = notebook or nb
    if not nb:
        raise StorageBenchError("give --notebook, or a 'notebook:' entry in the parameter file")
    table = sb.run_batch(nb, sets, out, jobs=jobs, report=report, kernel_name=kernel)
    typer.echo(table.assign(elapsed_s=table["elapsed_s"].round(1)).to_string(index=False, max_colwidth=80))
    failed = int((table["status"] != "ok").sum())
    typer.echo(f"{len(table) - failed} ok, {failed} failed; summary: {out / 'summary.csv'}")
    if failed:
        raise typer.Exit(1)


# ---- end hosts / batch -------------------------------------------------------------------


# ---- translate (DiskSPD / Iometer profiles -> fio study) -----------------------------------
# DiskSPD's own switches (-o, -h, -b ...) pass through: no short options here, and only --help asks for help
@_command("translate", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                         "help_option_names": ["--help"]})
@cli_errors()
def translate_cmd(
    ctx: typer.Context,
    kind: Annotated[Optional[str], typer.Argument(
        help="diskspd (a DiskSPD command line) or icf (an Iometer .icf file)")] = None,
    source: Annotated[Optional[List[str]], typer.Argument(
        help="the DiskSPD switches and targets (quoted or not), or the .icf path")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="study name (default: translated / the .icf stem)")] = None,
    ioengine: Annotated[str, typer.Option("--ioengine", help="fio engine of the study")] = "libaio",
    out: Annotated[Optional[Path], typer.Option("--out", help="write the study YAML (with the translation) here")] = None,
) -> None:
    """Write a fio study from a DiskSPD command line or an Iometer .icf, and print the translation.

    The study is written by PyYAML's emitter, the translation as one-line comments above it, and loaded back
    before the file is written: text from the source (a target path, the .icf path) can never become a key.

    Examples:

      storagebench translate diskspd -b4K -d60 -o32 -t4 -r -w0 -Sh C:\\test.dat \\
          --out data/studies/from_diskspd.yaml

      storagebench translate icf profile.icf --name iometer_oltp
    """
    from ._safeyaml import one_line

    source = list(source or [])
    if kind in (None, "-h", "help"):  # DiskSPD's -h is a switch, so only --help is click's; -h alone asks for help
        typer.echo(ctx.get_help())
        return
    if kind == "diskspd":
        if not source:
            raise StudyError("translate diskspd takes a DiskSPD command line, e.g. -b4K -o32 -t4 -r C:\\test.dat")
        t = sb.study_from_diskspd(" ".join(source), name=name or "translated", ioengine=ioengine)
    elif kind == "icf":
        if len(source) != 1:
            raise StudyError(f"translate icf takes one .icf path, got {len(source)}: {one_line(source, limit=200)}")
        t = sb.study_from_icf(source[0], name=name, ioengine=ioengine)
    else:
        raise StudyError(f"translate takes one of ['diskspd', 'icf'], got {one_line(repr(kind), limit=80)}")
    text = t.to_yaml()  # emitted from data and loaded back to the same study, or a StudyError: nothing written
    typer.echo(t.report())
    if out is not None:
        _write_new_yaml(out, text)
        typer.echo(f"wrote {display_path(out)}")


def _write_new_yaml(out: Path, text: str) -> None:
    """Write ``text`` to ``out`` atomically (a temporary file beside it, renamed): never half a spec."""
    import os

    _out_file(out, example="translated.yaml").parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
# ---- end translate -------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the ``storagebench`` console script (and of ``runners/batch.py``)."""
    app(args=argv, prog_name="storagebench", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    main()

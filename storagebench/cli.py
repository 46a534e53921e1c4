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

import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, List, Optional

import typer

# Only light modules are imported here, so that `--version`, `-h` and a mistyped option answer at once:
# the library's public names are reached through the package (`sb.run_study`: `storagebench/__init__.py`
# loads each on first use), and the heavy internals (pandas, pyarrow, scipy, statsmodels, matplotlib) in the
# commands that use them.
import storagebench as sb

from ._adaptive import time_text
from ._cliutil import (  # noqa: F401
    _MARKUP_TAG,
    _METAVARS,
    _OS_WORDS,
    _RESUME,
    _Command,
    _command,
    _error,
    _exists,
    _Group,
    _kind_of,
    _literal_help,
    _main,
    _out_dir,
    _out_file,
    _params,
    _parse_params,
    _plain_type,
    _version,
    app,
    cli_errors,
)
from ._hostinfo import filesystem_of
from .errors import (
    StatsError,
    StorageBenchError,
    display_path,
)
from .findings import CONFIDENCE

#: The command-line interface is the app and its entry point; the commands are reached through them.
__all__ = ["app", "main", "cli_errors"]


# ---- run / demo (runner) ---------------------------------------------------------------
@_command("run")
@cli_errors()
def run_cmd(
    *,  # typer passes every option by name
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
    create_dirs: Annotated[bool, typer.Option(
        "--create-dirs", help="let fio create the target's missing directories (default: refused, naming "
        "the directory)")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print the plan and the fio time it takes (fixed, or expected and most under "
        "precision:), run nothing")] = False,
    assumed_cv: Annotated[Optional[float], typer.Option(
        "--assumed-cv", min=0.0001, max=10.0, help="with --dry-run: run-to-run CV for the expected time under "
        "precision: (default precision.assumed_cv, else 0.05)")] = None,
) -> None:
    """Run every not-yet-complete run of STUDY with fio; rerun the same command to resume.

    Examples:

      storagebench run data/studies/qd_threads.yaml --target /mnt/test/sb.dat

      storagebench run data/studies/demo.yaml --target /var/tmp/sb.dat --out results --no-progress
    """
    spec = sb.load_study(study, max_runs=max_runs)
    if dry_run:
        spec.check_max_runs()
        for line in time_text(spec, assumed_cv):
            typer.echo(line)
        return
    res = sb.run_study(spec, target=target, out_dir=_out_dir(out), timeout_s=timeout, allow_devices=tuple(allow_device or ()),
                    stop_on_error=stop_on_error, overwrite=overwrite, progress=progress,
                    wait_quiet_s=wait_quiet, quiet_window_s=quiet_window, create_dirs=create_dirs)
    _report_guards(res)
    typer.echo(f"{res.study}: {len(res.completed)} run(s) measured, {len(res.skipped)} already complete, "
               f"{len(res.failed)} failed -> {res.root}")
    if spec.precision is not None:
        _report_precision(res.root, len(res.planned))
    for run_id, msg in res.errors.items():
        typer.secho(f"  failed {run_id}: {msg}", err=True, fg="red")
    if res.failed:
        raise typer.Exit(1)


def _report_precision(root: Path, planned: int) -> None:
    """An adaptive sweep's outcome in a line: runs used of the most planned, and why the points stopped."""
    from collections import Counter

    from ._precision import read_precision

    rec = read_precision(root)
    if rec is None:
        return
    why = Counter(p["stopped"] for p in rec["points"])
    used = sum(p["runs"] for p in rec["points"])
    what = "runs" if rec["unit"] == "run" else "set-ups (summed over the points)"
    typer.echo(f"precision: {len(rec['points'])} points, {used} {what} ({planned} runs planned at most); "
               + ", ".join(f"{n} {w}" for w, n in why.items()) + f" (details: {root / 'precision.json'})")


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
        typer.secho(f"storagebench: warning: {len(res.not_quiet)} run(s) measured on a busy host, e.g. {first_id}: "
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
    Nothing recognised (no fio, DiskSPD or Iometer output) is an error that says what was seen.

    Examples:

      storagebench ingest results/qd_threads/raw other/*.json --out tidy/

      storagebench ingest other/*.json diskspd.xml --out tidy/
    """
    _out_dir(out)
    for banner in _running_studies(paths, partial=partial, action="ingest"):
        typer.secho(f"storagebench: warning: {banner}", err=True, fg="yellow")
    summary = sb.ingest_to_parquet(paths, out, batch_files=batch_files, max_file_bytes=max_file_size * 2**20,
                                   require_files=True)
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
    *,  # typer passes every option by name
    table: Annotated[str, typer.Argument(help="results table (.parquet/.csv, e.g. results/<study>/tidy/runs.parquet), "
                                         "a study directory, or published:<name>")],
    factor: Annotated[str, typer.Option("--factor", help="column whose levels are compared, e.g. stripe_width")],
    baseline: Annotated[str, typer.Option("--baseline", help="the reference level of --factor, e.g. 1")],
    metric: Annotated[str, typer.Option("--metric", help="metric column, > 0: iops, bw_bytes_per_s, lat_mean_ns ...")],
    by: Annotated[Optional[List[str]], typer.Option(
        "--by", metavar="COLUMN", help="group column (repeat): one comparison per group")] = None,
    pair_on: Annotated[Optional[List[str]], typer.Option(
        "--pair-on", metavar="COLUMN", help="block column matching rows across levels (repeat), e.g. vms; never a "
        "factor such as the tool (refused: put it in --by)")] = None,
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

    Pair only on blocks (vms: the steps of one sweep), never on a factor such as the tool: the tool goes in
    --by (one comparison per tool); --pair-on a factor is refused. The CIs use each arm's own runs (the
    spread: line), not the run-to-run SD a sweep report pools over its grid.

    Examples:

      storagebench compare results/demo --factor iodepth --baseline 1 \\
          --metric iops --by numjobs

      storagebench compare published:vsan_stripe --factor stripe_width \\
          --baseline 1 --metric iops --by pattern --by direction \\
          --by source_tool --pair-on vms --out stripe.csv
    """
    import pandas as pd

    from .published import match_level, select_rows
    from .stats import compare  # stats (scipy, statsmodels): see the imports
    from .stats.comparison import TABLE_SUFFIXES, check_pairing
    from .stats.ratio import ESTIMANDS

    if out is not None and out.suffix.lower() not in TABLE_SUFFIXES:
        raise StatsError(f"--out suffix must be one of {list(TABLE_SUFFIXES)}, got {out.suffix!r}")
    if out is not None:
        _out_file(out, example="comparison.csv")
    df = select_rows(sb.load_table(table), where or [])
    if factor not in df.columns:
        raise StatsError(f"--factor must be one of the table's columns {list(df.columns)}, got {factor!r}")
    level = match_level(df[factor], baseline, f"--baseline (a level of {factor!r})")
    check_pairing(list(df.columns), pair_on, where="--pair-on")  # the rule of verdict: a factor is never a pair
    result = compare(df, factor, level, metric, by=by or None, pair_on=pair_on or None, margin=margin,
                     confidence=confidence, adjust=adjust, estimand=estimand)
    frame = result.to_frame()
    # the arms beside the ratio are the ratio's own: geometric means for the default estimand
    arms = ["gmean_baseline", "gmean_other"] if result.estimand == "geometric" else ["mean_baseline", "mean_other"]
    shown = list(result.by) + ["level", "n_baseline", "n_other", *arms, "ratio", "ci_low", "ci_high", "p",
                               "p_adjusted", "equivalent", "note"]
    pct = f"{result.confidence:.0%}"
    arm_words = ("gmean_* = each arm's geometric mean" if result.estimand == "geometric"
                 else "mean_* = each arm's arithmetic mean")
    typer.echo(f"{metric}: {factor} levels vs baseline {factor}={level!r} ({table}, {len(df)} rows); "
               f"ratio = {ESTIMANDS[result.estimand]} with its {pct} CI and p from one test; "
               f"{arm_words} in {metric}'s unit (ratio = other / baseline); "
               f"p adjusted by {adjust}")
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.max_colwidth", 60):
        typer.echo(frame[shown].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    for method in pd.unique(frame["method"]):
        if method:
            typer.echo(f"method: {method}")
    typer.echo(f"design: {result.design}")
    typer.echo(f"spread: {result.spread}")
    typer.echo(f"family: {result.family}")
    if out is not None:
        typer.echo(f"wrote {result.to_file(out)}")

# ---- end compare -------------------------------------------------------------------------

# ---- testbed studies ---------------------------------------------------------------------


# ---- end testbed studies -----------------------------------------------------------------


# ---- end hosts / batch -------------------------------------------------------------------


# the lab and batch commands, registered after the study commands above (the order of `storagebench -h`)
from ._clitools import (  # noqa: E402,F401
    _write_new_yaml,
    batch_cmd,
    hosts_cmd,
    scaling_cmd,
    testbed_cmd,
    testbed_leftovers_cmd,
    translate_cmd,
)


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the ``storagebench`` console script (and of ``runners/batch.py``)."""
    app(args=argv, prog_name="storagebench", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    main()

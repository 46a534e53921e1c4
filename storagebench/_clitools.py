"""The lab and batch commands of the command line: ``testbed``, ``hosts``, ``scaling``, ``batch`` and
``translate`` (registered on :data:`storagebench.cli.app`, part of :mod:`storagebench.cli`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

# Only light modules are imported here, so that `--version`, `-h` and a mistyped option answer at once:
# the library's public names are reached through the package (`sb.run_study`: `storagebench/__init__.py`
# loads each on first use), and the heavy internals (pandas, pyarrow, scipy, statsmodels, matplotlib) in the
# commands that use them.
import storagebench as sb

from ._cliutil import (
    _command,
    _out_dir,
    _out_file,
    _params,
    cli_errors,
)
from .errors import (
    StorageBenchError,
    StudyError,
    display_path,
    shown,
)
from .findings import CONFIDENCE
from .fio.hosts import parse_host, parse_hostfile
from .fio.process import fio_version
from .servers import check_versions, exposure, server_versions


@_command("testbed")
@cli_errors(interrupted="the testbed was torn down, completed runs are kept; rerun the same command to resume (a "
                        "set-up measured in part is built and measured again as a whole)")
def testbed_cmd(
    *,  # typer passes every option by name
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
    precision: Annotated[Optional[List[str]], typer.Option(
        "--precision", help="adaptive set-ups, a key of precision: as KEY=VALUE (repeatable), e.g. --precision "
        "compare=device --precision ci_rel_half_width=0.02: min_repetitions/max_repetitions count set-ups per "
        "arm and replace the spec's setups")] = None,
) -> None:
    """Build STUDY's testbed afresh for each set-up (root), measure, tear down, print the findings.

    Examples:

      storagebench testbed --list

      storagebench testbed stripe_width --quick

      storagebench testbed fast_vs_slow -p qos_p99_ms=2 --confidence 0.99 \\
          --out results

      storagebench testbed ka_caps --quick --precision compare=device \\
          --precision ci_rel_half_width=0.02 --precision max_repetitions=10
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
    rule = _precision_items(precision)
    res = studies.run(study, out_dir=_out_dir(out), quick=quick, progress=progress, confidence=confidence, params=params,
                      precision=rule)
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
    if res.result.checks:  # a known-answer study: the truth its caps give against the estimate
        typer.echo("\nknown answers (truth, estimate [CI], covered):")
        for c in res.result.checks:
            typer.echo(f"- {c.name}: truth {c.truth:.4g}, estimate {c.estimate:.4g} [{c.ci_low:.4g}, {c.ci_high:.4g}], "
                       f"{'covered' if c.covered else 'NOT covered'}"
                       + (f"; TOST within {c.tost_margin:.0%}: p = {c.tost_p:.2g}" if c.tost_margin is not None else ""))
    if report:
        html = sb.publish_report(res.study_dir, notebooks=[studies.NOTEBOOK],
                              parameters={"study": study, "confidence": confidence, "params": params})
        typer.echo(f"\nreport: {html}")
    if res.failed:
        raise typer.Exit(1)


def _precision_items(items: Optional[List[str]]) -> dict | None:
    """``--precision KEY=VALUE`` pairs as a ``precision:`` mapping; each value plain YAML data through the parameter
    gate's reader (:func:`storagebench._params.parse_value`: no tag, JSON-typed, bounded), the mapping then checked
    by the spec's own ``precision:`` check when the study is loaded (unknown key with a did-you-mean, ranges)."""
    from ._params import parse_value

    if not items:
        return None
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"must be KEY=VALUE with KEY a key of precision:, got {shown(item)}",
                                     param_hint="--precision")
        if key in out:
            raise typer.BadParameter(f"{key}= is given twice; give each key once", param_hint="--precision")
        out[key] = parse_value(value, name=key, where="--precision")
    return out


@_command("calibrate")
@cli_errors(interrupted="the testbed was torn down and the runs measured so far are kept; rerun the same command "
                        "(the same --out) to resume")
def calibrate_cmd(
    *,  # typer passes every option by name
    out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="directory of the calibration (default results/calibration/<host>-<UTC stamp>/, where "
                            "the write-ups of studies under results/ find the latest one of their host)")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="6 A/A comparisons of 2 blocks x 2 runs of 1 s (48 s of fio) and the quick known-answer "
                        "studies (38 runs of 2-3 s): about 6 minutes on 2 cores")] = False,
    comparisons: Annotated[Optional[int], typer.Option(
        "--comparisons", min=1, max=500, help="independent A/A comparisons (default 20; 6 with --quick)")] = None,
    known: Annotated[Optional[List[str]], typer.Option(
        "--known", metavar="STUDY", help="run only this known-answer study (repeatable; default every one, "
                                         "storagebench testbed --list names them: ka_...)")] = None,
    report: Annotated[bool, typer.Option("--report/--no-report", help="write OUT/report.html")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="phases and ETA on stderr")] = True,
    fio_bin: Annotated[str, typer.Option("--fio", metavar="PATH", help="fio executable")] = "fio",
) -> None:
    """Calibrate this host (root: loop devices): an A/A test, its noise floor and the smallest detectable ratio,
    and the known-answer checks; writes OUT/calibration.json and OUT/report.html.

    The A/A by default: 20 independent comparisons of 3 blocks x 3 runs of 2 s (120 set-ups, 720 s of fio, about
    25 minutes with the builds); --quick: 6 of 2 blocks x 2 runs of 1 s (48 s of fio).

    Examples:

      storagebench calibrate --quick

      storagebench calibrate --out results/calibration/lab1

      storagebench calibrate --quick --known ka_caps --known ka_stripe_width
    """
    from . import calibrate as cal
    from ._calibfile import read_calibration

    path = cal.calibrate(_out_dir(out) if out is not None else None, quick=quick, comparisons=comparisons,
                         known=known, progress=progress, fio_bin=fio_bin, report=report)
    c = read_calibration(path)
    typer.echo(f"calibration of {c.hostname} -> {path}")
    typer.echo(f"A/A: {c.aa.false_positives} of {c.aa.n} comparisons showed a difference "
               f"(false-positive rate {c.aa.false_positive_rate:.0%}); run-to-run CV {100 * (c.aa.cv_run or 0):.1f}%, "
               f"set-up-to-set-up CV {100 * (c.aa.cv_setup or 0):.1f}%; smallest detectable ratio {c.aa.mde:.3g} with "
               f"{c.budget['mde_setups_per_arm']:g} set-ups per arm x {c.budget['mde_runs_per_setup']:g} runs "
               f"(power {c.budget['power']:g}, alpha {c.budget['alpha']:g})")
    for k in c.checks:
        est = "not estimable" if k.estimate is None else f"{k.estimate:.4g}"
        ci = (f"[{k.ci_low:.4g}, {k.ci_high:.4g}], {'covered' if k.covered else 'NOT covered'}"
              if k.ci_low is not None and k.ci_high is not None else "no CI (not estimable), not covered")
        typer.echo(f"known answer {k.name}: truth {k.truth:.4g}, estimate {est} {ci}")
    if not c.checks:
        typer.echo("known answer: none (this storagebench has no known-answer studies)")
    if report:
        typer.echo(f"report: {path.parent / 'report.html'}")


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
    *,  # typer passes every option by name
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

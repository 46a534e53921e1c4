"""The command line: --version, -h with examples and plain metavars, one error decorator, --out everywhere."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys

import pytest
import typer
from conftest import FIXTURES, ROOT
from typer.testing import CliRunner

from storagebench import __version__
from storagebench.cli import app, cli_errors
from storagebench.errors import StorageBenchError, StorageBenchWarning

COMMANDS = ["run", "demo", "ingest", "report", "publish", "site", "compare", "testbed", "testbed-leftovers", "hosts",
            "scaling", "batch", "translate"]


def test_version_and_short_help():
    runner = CliRunner()
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"storagebench {__version__}"
    res = runner.invoke(app, ["-h"])
    assert res.exit_code == 0 and "Usage:" in res.output and "--version" in res.output and "site" in res.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_examples_and_no_type_names(command):
    flag = "--help" if command == "translate" else "-h"  # translate passes DiskSPD's own -h through
    res = CliRunner().invoke(app, [command, flag], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert "Examples:" in res.output and f"storagebench {command}" in res.output
    assert not any(t in res.output for t in ("<list[", "<bool>", "<path>", "<int>", "<float>", "<str>")), res.output
    if command not in ("testbed-leftovers", "hosts"):
        assert "--out" in res.output  # every command that writes something takes --out


def test_batch_runner_is_the_same_command():
    proc = subprocess.run([sys.executable, str(ROOT / "runners" / "batch.py"), "--help"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "120"})
    assert proc.returncode == 0
    want = CliRunner().invoke(app, ["batch", "--help"], env={"COLUMNS": "120"}).output
    options = lambda text: sorted(w for w in text.split() if w.startswith("--"))  # noqa: E731
    assert options(proc.stdout) == options(want) and "--kernel" in options(want) and "--jobs" in options(want)


def _probe_app(exc: BaseException | None = None, warn: str = ""):
    probe = typer.Typer()

    @probe.command()
    @cli_errors(interrupted="completed runs are kept; rerun to resume")
    def go() -> None:
        if warn:
            import warnings

            warnings.warn(warn, StorageBenchWarning, stacklevel=1)
        if exc is not None:
            raise exc
        typer.echo("done")

    return probe


def test_one_error_decorator_turns_errors_into_lines_and_exit_codes():
    runner = CliRunner()
    res = runner.invoke(_probe_app(StorageBenchError("bad value 'x' for y; allowed: a, b")))
    assert res.exit_code == 1 and res.output.strip() == "storagebench: error: bad value 'x' for y; allowed: a, b"
    res = runner.invoke(_probe_app(KeyboardInterrupt()))
    assert res.exit_code == 130 and "interrupted; completed runs are kept; rerun to resume" in res.output
    res = runner.invoke(_probe_app(OSError(errno.ENOSPC, "No space left on device", "/srv/results/x.parquet")))
    assert res.exit_code == 1
    assert res.output.strip() == "storagebench: error: no space left on the device: /srv/results/x.parquet"
    res = runner.invoke(_probe_app(PermissionError(errno.EACCES, "Permission denied", "/srv/results")))
    assert res.output.strip() == "storagebench: error: permission denied: /srv/results" and res.exit_code == 1
    res = runner.invoke(_probe_app(FileNotFoundError(errno.ENOENT, "No such file", "/x")))
    assert isinstance(res.exception, FileNotFoundError)  # not ours to word: a traceback, as a bug
    res = runner.invoke(_probe_app(warn="pooled ['numjobs']"))
    assert res.exit_code == 0 and "storagebench: warning: pooled ['numjobs']" in res.output and "done" in res.output


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="needs root to mount a tiny tmpfs")
def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
    """A real ENOSPC: the write-up goes to a 64 KiB tmpfs this test mounts (and unmounts)."""
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "sbtest", str(tiny)], check=True)
    try:
        study = tmp_path / "demo"
        shutil.copytree(FIXTURES / "study_demo", study, ignore=shutil.ignore_patterns("tidy", "notebooks", "report.*"))
        res = CliRunner().invoke(app, ["report", str(study), "--out", str(tiny / "report.html")])
        assert res.exit_code == 1, res.output
        assert res.output.strip().splitlines()[-1] == f"storagebench: error: no space left on the device: {tiny / 'report.html'}"
        assert not [p for p in tiny.iterdir() if p.name.startswith(".report.html")]  # no temp file left behind
    finally:
        subprocess.run(["umount", str(tiny)], check=True)


def test_report_output_is_a_deprecated_alias_of_out(tmp_path):
    study = tmp_path / "demo"
    shutil.copytree(FIXTURES / "study_demo", study, ignore=shutil.ignore_patterns("tidy", "notebooks", "report.*"))
    res = CliRunner().invoke(app, ["report", str(study), "--output", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert "storagebench: warning: --output is deprecated; use --out" in res.output
    assert (tmp_path / "r.html").is_file() and (tmp_path / "r.json").is_file()
    assert (study / "tidy" / "runs.parquet").is_file()  # report stores the tidy tables of the study
    assert (study / "tidy" / "ingest.json").is_file()  # with the record its notebooks read them by
    clash = CliRunner().invoke(app, ["report", str(study), "--output", "a.html", "--out", "b.html"])
    assert clash.exit_code == 1 and "disagree" in clash.output


def test_compare_without_by_names_the_pooled_factors_and_takes_a_study_dir():
    res = CliRunner().invoke(app, ["compare", str(FIXTURES / "study_demo"), "--factor", "iodepth", "--baseline", "1",
                                   "--metric", "iops"])
    assert res.exit_code == 0, res.output
    assert "storagebench: warning: compare without `by` pools the levels of ['numjobs']" in res.output
    res = CliRunner().invoke(app, ["compare", str(FIXTURES / "study_demo"), "--factor", "iodepth", "--baseline", "1",
                                   "--metric", "iops", "--by", "numjobs"])
    assert res.exit_code == 0 and "warning" not in res.output and "numjobs" in res.output


def test_site_lists_nothing_in_an_empty_dir_and_refuses_a_file(tmp_path):
    res = CliRunner().invoke(app, ["site", str(tmp_path)])
    assert res.exit_code == 0 and "0 write-up(s)" in res.output and (tmp_path / "index.html").is_file()
    (tmp_path / "f").write_text("x")
    res = CliRunner().invoke(app, ["site", str(tmp_path / "f")])
    assert res.exit_code == 1 and "is not a directory" in res.output


def test_readme_publish_and_compare_examples_run_on_the_demo_table(tmp_path, monkeypatch):
    """The README's examples, as written, from a checkout's root after `make demo` (here: the committed demo study
    as results/demo, its tidy table written by `storagebench report`)."""
    import re

    results = tmp_path / "results"
    shutil.copytree(FIXTURES / "study_demo", results / "demo",
                    ignore=shutil.ignore_patterns("tidy", "notebooks", "report.*", ".gitignore"))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["report", "results/demo"]).exit_code == 0
    readme = (ROOT / "README.md").read_text()
    block = readme.split("After `make demo`", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [" ".join(c.replace("\\\n", " ").split()) for c in re.split(r"(?<!\\)\n", block) if c.strip()]
    commands = [re.sub(r"\s+#.*$", "", c) for c in commands]
    import shlex

    ran = 0
    for cmd in commands:
        argv = shlex.split(cmd)
        assert argv[0] == "storagebench", cmd
        res = runner.invoke(app, argv[1:])
        assert res.exit_code == 0, (cmd, res.output)
        ran += 1
    assert ran == 4
    page = (results / "demo-compare" / "report.html").read_text()
    assert 'id="findings"' in page and "iodepth" in page and "numjobs" in page
    assert "demo-compare" in (results / "index.html").read_text()


def test_a_warning_of_another_library_is_shown_once_and_the_command_ends(tmp_path):
    """A UserWarning raised inside a command is shown by Python's own display, once, after the command.
    (It used to be shown while warnings were still being recorded: each display was recorded again, and
    the loop over the record never ended.) Run in a subprocess with a time limit, so a regression is a
    failed test, not a hung suite."""
    code = (
        "import warnings, typer\n"
        "from typer.testing import CliRunner\n"
        "from storagebench.cli import cli_errors\n"
        "from storagebench.errors import StorageBenchWarning\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "@cli_errors()\n"
        "def go():\n"
        "    warnings.warn('from another library', UserWarning, stacklevel=1)\n"
        "    warnings.warn('ours', StorageBenchWarning, stacklevel=1)\n"
        "    typer.echo('done')\n"
        "res = CliRunner().invoke(app, [])\n"
        "print(res.exit_code, repr(res.output))\n"
    )
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("0 ") and "done" in proc.stdout and "storagebench: warning: ours" in proc.stdout
    assert proc.stdout.count("UserWarning: from another library") == 1  # CliRunner mixes stderr into output


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_brackets_and_examples_as_written(command):
    """Issue 19: `publish -h` lost the `[a, b]` of `--param` (rich took it for a markup tag). Every bracketed
    text of a command's help and of its options' help is shown, and each example line fits 80 columns."""
    click_command = typer.main.get_command(app).commands[command]
    texts = [click_command.help or "", *(getattr(p, "help", None) or "" for p in click_command.params)]
    brackets = {b.replace("\\[", "[") for t in texts for b in re.findall(r"(?<!\\)\[[^\]\n]*\]", t.replace("\\[", "["))}
    flag = "--help" if command == "translate" else "-h"
    wide = CliRunner().invoke(app, [command, flag], env={"COLUMNS": "250"}).output
    missing = sorted(b for b in brackets if b not in wide)
    assert not missing, f"{command} -h hides {missing}:\n{wide}"
    narrow = CliRunner().invoke(app, [command, flag], env={"COLUMNS": "80"}).output
    examples = narrow.split("Examples:", 1)[1].split("╭", 1)[0]
    lines = [x for x in examples.splitlines() if x.strip()]
    assert lines and all(x.strip().startswith(("storagebench", "-", "runners/", "#")) for x in lines), \
        f"an example wraps at 80 columns:\n{examples}"


def test_publish_help_shows_the_list_example_of_param():
    out = CliRunner().invoke(app, ["publish", "-h"], env={"COLUMNS": "120"}).output
    assert "VALUE is YAML: 4, 0.5, text, [a, b]" in " ".join(out.replace("│", " ").split())
    assert "-p by='[numjobs]'" in out

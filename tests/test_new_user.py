"""Issue 20 item 6, "no silent wrong question": what a new user got wrong, and the tool answered anyway.

Each case is the exact input a new user gave (a misspelt factor, a target that does not exist, a directory that
does not exist, a target in RAM, a directory with nothing to ingest, a comparison paired on the tool) and the
message it now gives; the runs that matter are real 1 s fio runs.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from storagebench import StudyStore
from storagebench._study import load_study
from storagebench.cli import app
from storagebench.errors import StatsError, StorageBenchWarning, StudyError, UnsafeTargetError

ROOT = Path(__file__).resolve().parents[1]
RUNNER = CliRunner()


def _spec(tmp_path: Path, name: str, factors: dict, **extra) -> Path:
    spec = {"name": name, "factors": factors, "fixed": {"rw": "randread", "bs": "4k", "direct": 0},
            "runtime": 1, "size": "4m", **extra}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ---- a factor that is neither a fio option nor declared --------------------------------------------------


def test_a_misspelt_factor_is_refused_with_did_you_mean(tmp_path):
    path = _spec(tmp_path, "typo", {"iodpeth": [1, 32]})
    with pytest.raises(StudyError) as info:
        load_study(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: factors.iodpeth: not a fio option, and not declared as a study factor"), msg
    assert "Did you mean the fio option 'iodepth'" in msg
    assert "labels: [iodpeth]" in msg and "setup_factors" in msg and "{name: ..., <fio options>}" in msg


def test_the_cli_refuses_it_before_any_run(tmp_path):
    path = _spec(tmp_path, "typo", {"iodpeth": [1, 32]})
    res = RUNNER.invoke(app, ["run", str(path), "--target", str(tmp_path / "t.dat"), "--out", str(tmp_path / "r"),
                              "--no-progress"])
    assert res.exit_code == 1, res.output
    assert "factors.iodpeth: not a fio option" in res.output and "'iodepth'" in res.output
    assert not (tmp_path / "r").exists() and not (tmp_path / "t.dat").exists()


def test_a_declared_label_loads_and_its_declaration_changes_no_hash(tmp_path):
    base = {"name": "lab", "factors": {"stripe_width": [1, 4], "iodepth": [1, 2]}, "runtime": 1}
    declared = load_study({**base, "labels": ["stripe_width"]})
    assert declared.labels == ["stripe_width"]
    # a results tree's study.yaml written before the rule: loaded (its runs are measured), same hash
    stored = load_study(base, stored=True)
    assert stored.spec_hash == declared.spec_hash
    assert "labels" not in stored.spec_dict() and declared.spec_dict()["labels"] == ["stripe_width"]
    # the same spec from a user is refused; no close fio option, so no did-you-mean
    with pytest.raises(StudyError, match=r"factors.stripe_width: not a fio option") as info:
        load_study(base)
    # a setup_factors arm or mapping levels declare a study factor by themselves
    load_study({**base, "setup_factors": ["stripe_width"]})
    load_study({"name": "m", "factors": {"pattern": [{"name": "a", "rw": "read"}, {"name": "b"}]}})
    assert "Did you mean" not in str(info.value) or "stripe_width" in str(info.value)


@pytest.mark.parametrize("labels, match", [
    (["iodepth"], r"labels: 'iodepth' is a fio option or a factor the runner interprets"),
    (["nope"], r"labels: 'nope' is not a factor of this study"),
    ("stripe_width", r"labels: must be a list of factor names"),
])
def test_bad_labels_are_refused(labels, match):
    with pytest.raises(StudyError, match=match):
        load_study({"name": "x", "factors": {"stripe_width": [1, 4], "iodepth": [1]}, "labels": labels})


def test_every_committed_spec_loads_under_the_rule():
    specs = sorted((ROOT / "data" / "studies").glob("*.yaml"))
    assert len(specs) >= 7
    for spec in specs:
        study = load_study(spec)
        study.test_variant()
    for stored in sorted((ROOT / "tests" / "fixtures").rglob("study.yaml")):
        load_study(stored, stored=True)


# ---- targets: /dev, missing directories, memory -----------------------------------------------------------


def test_a_missing_target_under_dev_is_refused_and_nothing_is_created(tmp_path, fio_bin):
    from storagebench import run_study

    missing = f"/dev/sbz{os.getpid()}"
    assert not os.path.lexists(missing)
    spec = load_study(_spec(tmp_path, "dev", {"iodepth": [1]}))
    with pytest.raises(UnsafeTargetError) as info:
        run_study(spec, target=missing, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
    assert str(info.value) == (
        f"refusing filename '{missing}': it does not exist, and fio would create it as a file in /dev, which is "
        "memory (devtmpfs), so the run would measure RAM, not a device; name an existing block device (see lsblk "
        "or /dev/disk/by-id) or a file on the file system you mean to measure")
    assert not os.path.lexists(missing)
    assert not list((tmp_path / "r").rglob("output.json"))


def test_a_missing_directory_is_refused_unless_create_dirs(tmp_path, fio_bin):
    from storagebench import run_study

    spec = load_study(_spec(tmp_path, "dirs", {"iodepth": [1]}))
    target = tmp_path / "no" / "such" / "t.dat"
    with pytest.raises(UnsafeTargetError, match=re.escape(
            f"refusing filename '{target}': its directory '{target.parent}' does not exist, and fio would create "
            "it silently") + r".*--create-dirs"):
        run_study(spec, target=target, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
    assert not (tmp_path / "no").exists()
    res = run_study(spec, target=target, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False, create_dirs=True)
    assert len(res.completed) == 1 and target.is_file()
    # the CLI says the same and takes --create-dirs
    other = tmp_path / "nope" / "t.dat"
    out = RUNNER.invoke(app, ["run", str(_spec(tmp_path, "dirs2", {"iodepth": [1]})), "--target", str(other),
                              "--out", str(tmp_path / "r"), "--no-progress"])
    assert out.exit_code == 1 and "does not exist, and fio would create it silently" in out.output
    assert "--create-dirs" in RUNNER.invoke(app, ["run", "-h"]).output


def _tmpfs_dir() -> Path:
    from storagebench._hostinfo import filesystem_of

    shm = Path("/dev/shm")
    if not shm.is_dir() or (filesystem_of(shm) or {}).get("fstype") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    return shm


def test_a_target_in_memory_is_warned_recorded_and_bannered(tmp_path, fio_bin):
    from storagebench import run_study
    from storagebench.publish import memory_banner

    shm = _tmpfs_dir()
    target = shm / f"sb-new-user-<b>&{os.getpid()}.dat"  # a name the write-up must show as text
    spec = load_study(_spec(tmp_path, "mem", {"iodepth": [1]}))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StorageBenchWarning)
            res = run_study(spec, target=target, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
        mine = [str(w.message) for w in caught if issubclass(w.category, StorageBenchWarning)]
        assert mine == [f"this measured memory: the target {str(target)!r} is a file on tmpfs, which keeps its data "
                        "in RAM, so its IOPS and latency are those of memory and the page cache, not of a storage "
                        "device"]
        assert len(res.completed) == 1
        prov = list(StudyStore(res.root).provenance().values())
        assert [p.memory_note for p in prov] == mine and prov[0].filesystem.fstype == "tmpfs"
        banner = memory_banner(res.root)
        assert banner == f"1 of 1 runs: {mine[0]}."
    finally:
        target.unlink(missing_ok=True)
    # the write-up shows it through the HTML gate (escaped text in the banner)
    import nbformat

    from storagebench._pubpage import build_page

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# mem\n\ntext")])
    path = tmp_path / "mem.ipynb"
    nbformat.write(nb, path)
    page, _ = build_page([path], banner=banner)
    assert "this measured memory" in page and "sb-new-user-&lt;b&gt;&amp;" in page and "<b>&" not in page


def test_a_disk_target_gets_no_memory_note(tmp_path):
    from storagebench._hostinfo import filesystem_of, memory_note

    fs = (filesystem_of(tmp_path) or {}).get("fstype")
    if fs in ("tmpfs", "ramfs"):
        pytest.skip("tmp_path is in memory here")
    assert memory_note(tmp_path / "x", fs) is None
    assert memory_note("/x", "ramfs").startswith("this measured memory: the target '/x' is a file on ramfs")


# ---- ingest that recognises nothing --------------------------------------------------------------------


def test_ingest_of_nothing_recognised_fails_and_says_what_it_saw(tmp_path):
    junk = tmp_path / "junk"
    (junk / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "sub/c.csv", "d.png", "README"):
        (junk / name).write_text("not a tool's output\n")
    out = tmp_path / "tidy"
    res = RUNNER.invoke(app, ["ingest", str(junk), "--out", str(out)])
    assert res.exit_code == 1, res.output
    assert (f"nothing recognised in '{junk}': saw 5 files (2 '.txt', 1 '(none)', 1 '.csv', 1 '.png'), e.g. "
            in res.output)
    assert "storagebench ingests fio JSON/JSON+ output" in res.output and "No table was written" in res.output
    assert not list(out.glob("*.parquet"))
    empty = tmp_path / "empty"
    empty.mkdir()
    res = RUNNER.invoke(app, ["ingest", str(empty), "--out", str(out)])
    assert res.exit_code == 1 and "saw no files at all" in res.output


def test_ingest_of_nothing_leaves_earlier_tables_and_real_results_still_ingest(tmp_path):
    from storagebench.ingest import ingest_to_parquet

    out = tmp_path / "tidy"
    res = RUNNER.invoke(app, ["ingest", str(ROOT / "tests" / "fixtures" / "study_demo"), "--out", str(out)])
    assert res.exit_code == 0 and "12 files ingested, 0 not ingested" in res.output
    before = pd.read_parquet(out / "runs.parquet")
    assert len(before) == 12
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("x")
    assert RUNNER.invoke(app, ["ingest", str(tmp_path / "junk"), "--out", str(out)]).exit_code == 1
    pd.testing.assert_frame_equal(pd.read_parquet(out / "runs.parquet"), before)
    # the library keeps its default: empty tables, and the summary says what it saw
    summary = ingest_to_parquet(tmp_path / "junk", tmp_path / "lib")
    assert summary.files == 0 and summary.seen_text().startswith("saw 1 file (1 '.txt'), e.g. ")


# ---- compare: the spread it uses, pairing on a factor, the -h examples --------------------------------------


def test_compare_refuses_pairing_on_the_tool_as_the_verdict_layer_does():
    res = RUNNER.invoke(app, ["compare", "published:vsan_stripe", "--factor", "stripe_width", "--baseline", "1",
                              "--metric", "iops", "--by", "pattern", "--by", "direction", "--pair-on", "vms",
                              "--pair-on", "source_tool"])
    assert res.exit_code == 1
    assert ("--pair-on: 'source_tool' is a factor, not a replicate, but the comparison paired on it "
            "(pair_on=['vms', 'source_tool'])") in res.output
    # the verdict layer gives the same message (one rule)
    from storagebench.published import load_table
    from storagebench.stats import compare, verdict

    old = compare(load_table("published:vsan_stripe"), "stripe_width", 1, "iops", by="pattern",
                  pair_on=["vms", "source_tool"])
    with pytest.raises(StatsError) as info:
        verdict(old, unit="vm count", blocks="vms", factors="source_tool")
    assert str(info.value) in res.output.replace("\n", " ") or str(info.value)[:60] in res.output


def test_compare_states_the_spread_it_uses_in_the_cli_and_the_write_up():
    res = RUNNER.invoke(app, ["compare", str(ROOT / "tests" / "fixtures" / "study_demo"), "--factor", "iodepth",
                              "--baseline", "1", "--metric", "iops", "--by", "numjobs"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("spread: "))
    assert "each arm's own SD of its log values (Welch" in line and "as few as 2 units in an arm" in line
    assert "not a run-to-run SD pooled over the other levels and groups, as a sweep report's point" in line
    from storagebench.published import load_table
    from storagebench.stats import compare

    table = compare(load_table(str(ROOT / "tests" / "fixtures" / "study_demo")), "iodepth", 1, "iops", by="numjobs")
    from storagebench.stats import verdict_findings

    found = verdict_findings(table, unit="fio run")
    assert all("spread: each row's two arms only" in f.method for f in found)
    assert "Spread: each row&#39;s two arms only" in table._repr_html_() or "Spread: each row's two arms only" in \
        table._repr_html_()


def _help_examples() -> dict[str, list[str]]:
    """Every command's ``Examples:`` lines, joined over their continuation lines."""
    import typer.main

    group = typer.main.get_command(app)
    out = {}
    for name, cmd in group.commands.items():
        text = (cmd.help or "").replace("\\\n", " ")
        out[name] = [" ".join(x.split()) for x in text.splitlines() if x.strip().startswith("storagebench ")]
    return out


def test_every_help_example_follows_the_readme():
    from storagebench.stats.comparison import FACTOR_COLUMNS

    examples = _help_examples()
    assert examples["compare"] and examples["run"]
    readme = (ROOT / "README.md").read_text()
    for name, lines in examples.items():
        for line in lines:
            words = line.split()
            paired = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--pair-on"]
            assert not set(paired) & set(FACTOR_COLUMNS), (name, line)
            for w in words[2:3]:  # the committed spec a run/scaling example runs exists and loads under the rules
                if name in ("run", "scaling") and w.startswith("data/studies/"):
                    load_study(ROOT / w)
    # the example README gives for the published stripe study is the one `compare -h` gives
    assert ("--by pattern --by direction --by source_tool --pair-on vms --out stripe.csv" in " ".join(
        examples["compare"])) and "--by source_tool --pair-on vms --out stripe.csv" in readme


@pytest.mark.notebook
def test_the_published_write_up_of_a_memory_run_carries_the_banner(tmp_path, fio_bin):
    """The whole route: a real run on tmpfs, then ``publish_report`` (papermill) -> report.html with the note."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from storagebench import run_study
    from storagebench.publish import publish_report

    shm = _tmpfs_dir()
    target = shm / f"sb-new-user-pub-{os.getpid()}.dat"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StorageBenchWarning)
            res = run_study(load_study(_spec(tmp_path, "mempub", {"iodepth": [1]})), target=target,
                            out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
    finally:
        target.unlink(missing_ok=True)
    nb = new_notebook()
    params = new_code_cell("study_dir: str = ''  # the study")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [new_markdown_cell("# mem"), params, new_code_cell("print(len(study_dir) > 0)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "mem.ipynb"))
    html_path = publish_report(res.root, [tmp_path / "mem.ipynb"], {}, write_tidy=False)
    page = html_path.read_text()
    assert "1 of 1 runs: this measured memory: the target" in page and "is a file on tmpfs" in page


def test_hostile_target_names_in_the_memory_banner_stay_text(tmp_path):
    """The note holds the target path as the user gave it: every payload of the HTML gate's suite, planted as a
    target name, reaches the page as text (the banner goes through storagebench._html)."""
    import nbformat
    from test_html_gate import PAYLOADS

    from storagebench import _html
    from storagebench._hostinfo import memory_note
    from storagebench._pubpage import build_page

    banner = " ".join(memory_note(f"/dev/shm/{p}", "tmpfs") for p in PAYLOADS)
    assert "\n" not in banner and "\x00" not in banner  # repr escapes control characters
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# hostile")])
    nbformat.write(nb, tmp_path / "h.ipynb")
    page, _ = build_page([tmp_path / "h.ipynb"], banner=banner)
    assert _html.page_problems(page) == []
    for tag in ("<script>alert", "<img", "<svg", "<iframe", "<object", "<base ", "<meta http-equiv=\"refresh"):
        assert tag not in page, tag
    assert page.count("this measured memory") == len(PAYLOADS)

"""Bounded inputs everywhere (issue 18, item 7): every command reads only regular files of bounded size, through
the one reader :mod:`storagebench._inputs`; FIFOs, devices and symlinks leaving a tree are refused in one line,
promptly; an ``--out`` of the wrong kind is one line, never a traceback.

Each CLI call runs in-process under a SIGALRM guard (a blocking ``open`` of a FIFO would be interrupted and fail the
test instead of hanging the suite); two run in a subprocess with a timeout, as a user would run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import Hang, time_limit
from typer.testing import CliRunner

from storagebench import _inputs
from storagebench.cli import app
from storagebench.errors import IngestError, PublishError, SchemaError, StorageBenchError, StudyError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
DEMO_SPEC = ROOT / "data" / "studies" / "demo.yaml"
LIMIT_S = 30.0  # in-process; a command that blocks on a FIFO never returns




def cli(args: list, codes=(1, 2)) -> str:
    """Run the CLI in-process; it must end within LIMIT_S with an exit code in ``codes`` and one error line."""
    with time_limit(LIMIT_S):
        res = CliRunner().invoke(app, [str(a) for a in args])
    assert not isinstance(res.exception, Hang), f"{args}: hung"
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, res.exception)
    assert res.exit_code in codes, (args, res.exit_code, res.output)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("storagebench: error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, (args, res.output)
    return errors[0]


@pytest.fixture
def specials(tmp_path):
    """A FIFO per suffix, and names for /dev/zero and /dev/urandom with each suffix (symlinks)."""
    d = tmp_path / "specials"
    d.mkdir()
    out = {}
    for suffix in (".yaml", ".icf", ".ipynb", ".parquet", ".csv", ".json"):
        fifo = d / f"fifo{suffix}"
        os.mkfifo(fifo)
        out[("fifo", suffix)] = fifo
        for dev in ("zero", "urandom"):
            link = d / f"{dev}{suffix}"
            link.symlink_to(f"/dev/{dev}")
            out[(dev, suffix)] = link
    return out


KINDS = {"fifo": "a FIFO", "zero": "a character device", "urandom": "a character device"}


# ---- the gate itself ------------------------------------------------------------------------------------------


def test_the_reader_refuses_what_is_not_a_small_regular_file(tmp_path, specials):
    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"\xef\xbb\xbfhello\n")
    assert _inputs.read_text(ok, max_bytes=100) == "hello\n"
    assert _inputs.read_input(ok, max_bytes=100, head=3) == b"\xef\xbb\xbf"
    with _inputs.open_input(ok, max_bytes=100) as fh:
        assert fh.read() == b"\xef\xbb\xbfhello\n"
    for (kind, _suffix), path in specials.items():
        with time_limit(5), pytest.raises(StudyError, match=rf"not a regular file \({KINDS[kind]}\)"):
            _inputs.read_input(path, max_bytes=100, what="study spec", error=StudyError)
        with time_limit(5), pytest.raises(PublishError, match="not a regular file"):
            _inputs.open_input(path, max_bytes=100, error=PublishError)
    with pytest.raises(IngestError) as info:  # an IngestError keeps the path apart
        _inputs.read_input(specials[("fifo", ".json")], max_bytes=10, error=IngestError)
    assert info.value.path == str(specials[("fifo", ".json")]) and info.value.reason.startswith("file is not")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 101)
    with pytest.raises(StorageBenchError, match=r"file of 101 bytes, more than the size cap of 100 bytes"):
        _inputs.read_input(big, max_bytes=100)
    with pytest.raises(StorageBenchError, match="directory"):
        _inputs.read_input(tmp_path, max_bytes=100)
    with pytest.raises(StorageBenchError, match="does not exist"):
        _inputs.read_input(tmp_path / "missing", max_bytes=100)
    # with a root, a symlink leaving it is not followed, one inside it is
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "in.txt").write_text("in")
    (tree / "alias.txt").symlink_to(tree / "in.txt")
    (tree / "passwd").symlink_to("/etc/passwd")
    assert _inputs.read_text(tree / "alias.txt", max_bytes=10, root=tree) == "in"
    with pytest.raises(StorageBenchError, match=r"symlink to /etc/passwd, outside .*: not followed"):
        _inputs.read_input(tree / "passwd", max_bytes=10**6, root=tree)


def test_the_walk_lists_regular_files_inside_the_tree_only(tmp_path):
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "ok.json").write_text("{}")
    (tree / "a" / "alias.json").symlink_to(tree / "a" / "ok.json")
    (tree / "a" / "passwd.json").symlink_to("/etc/passwd")
    (tree / "a" / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(tree / "a" / "fifo.json")
    (tree / "a" / "up").symlink_to(tmp_path)
    (tree / "a" / "b" / "deep.json").write_text("{}")
    seen = {d: (dirs, sorted(files), {os.path.basename(r.path): r.reason for r in bad})
            for d, dirs, files, bad in _inputs.walk(tree)}
    dirs, files, bad = seen[str(tree / "a")]
    assert dirs == ["b"] and files == ["alias.json", "ok.json"]
    assert "outside the tree" in bad["passwd.json"] and "outside the tree" in bad["up"]
    assert "a FIFO" in bad["fifo.json"] and "outside the tree (/dev/zero)" in bad["zero.json"]
    assert seen[str(tree / "a" / "b")][1] == ["deep.json"]
    assert str(tree / "a" / "b") not in {d for d, *_ in _inputs.walk(tree, max_depth=1)}


def test_completed_runs_is_one_rule(tmp_path):
    from storagebench._store import StudyStore

    raw = tmp_path / "s" / "raw"
    (raw / "r1").mkdir(parents=True)
    (raw / ".tmp-r2-123").mkdir()
    (raw / "r3").symlink_to(tmp_path)
    (raw / "file").write_text("")
    assert _inputs.completed_runs(raw) == ["r1"] == sorted(StudyStore(tmp_path / "s").completed_run_ids())
    assert _inputs.completed_runs(tmp_path / "missing") == []


# ---- every command, FIFO and devices --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "zero", "urandom"])
def test_commands_refuse_fifos_and_devices_promptly(tmp_path, specials, kind):
    s = {suffix: specials[(kind, suffix)] for suffix in (".yaml", ".icf", ".ipynb", ".parquet", ".csv", ".json")}
    word = KINDS[kind]
    assert word in cli(["run", s[".yaml"], "--out", tmp_path / "r", "--no-progress"])
    assert word in cli(["translate", "icf", s[".icf"]])
    assert word in cli(["publish", s[".ipynb"], "--out", tmp_path / "p"])
    for table in (s[".parquet"], s[".csv"]):
        assert word in cli(["compare", table, "--factor", "iodepth", "--baseline", "1", "--metric", "iops"])
    assert word in cli(["batch", s[".yaml"], "--out", tmp_path / "b"], codes=(2,))
    assert word in cli(["hosts", "--hostfile", s[".yaml"]])
    # ingest names each file it did not read, and goes on
    with time_limit(LIMIT_S):
        res = CliRunner().invoke(app, ["ingest", str(s[".json"]), str(FIXTURES / "fio" / "single_jsonplus.json"),
                                       "--out", str(tmp_path / "tidy")])
    assert res.exit_code == 1 and "1 files ingested, 1 not ingested" in res.stdout, res.output
    assert f"not a regular file ({word})" in res.stderr


def test_a_named_fifo_or_device_in_a_subprocess_returns_promptly(tmp_path, specials):
    """As a user runs it: `translate icf /dev/zero` read until MemoryError, `site` hung on a FIFO."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    results = tmp_path / "results" / "study"
    results.mkdir(parents=True)
    os.mkfifo(results / "report.json")
    (results / "report.html").write_text("<html></html>")
    for args in (["translate", "icf", "/dev/zero"], ["translate", "icf", str(specials[("fifo", ".icf")])],
                 ["site", str(tmp_path / "results")]):
        proc = subprocess.run([sys.executable, "-m", "storagebench", *args], env=env, capture_output=True, text=True,
                              timeout=60)
        assert "Traceback" not in proc.stderr, proc.stderr
        if args[0] == "translate":
            assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
            assert "not a regular file" in proc.stderr
        else:
            assert proc.returncode == 0 and "0 write-up(s)" in proc.stdout
            assert "not listed" in proc.stderr and "a FIFO" in proc.stderr, proc.stderr


@pytest.mark.notebook
def test_publish_a_fifo_as_a_table_parameter(tmp_path, specials):
    """`publish compare.ipynb -p table=FIFO`: the kernel's load_table refuses it (through schema.read_table)."""
    msg = cli(["publish", "compare.ipynb", "--out", tmp_path / "pub", "-p", f"table={specials[('fifo', '.parquet')]}",
               "-p", "factor=iodepth", "-p", "baseline=1", "-p", "metric=iops"])
    assert "not a regular file (a FIFO)" in msg or "a FIFO" in msg, msg


# ---- site: a results tree that points outside itself ----------------------------------------------------------


def _sidecar(title: str) -> bytes:
    return orjson.dumps({"format_version": 1, "title": title, "date": "2026-01-01T00:00:00Z", "report": "report.html",
                         "findings": [{"sentence": f"{title} finding"}], "provenance": {}})


def test_site_does_not_follow_symlinks_out_of_the_tree(tmp_path):
    root = tmp_path / "results"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_bytes(_sidecar("OUTSIDE-SECRET"))
    (outside / "report.html").write_text("<html>outside</html>")
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: above the sidecar cap without using the disk
        fh.truncate(64 * 2**20)
    for name in ("good", "passwd", "linkdir", "bigone", "htmlout", "fifo"):
        (root / name).mkdir(parents=True) if name != "linkdir" else None
    (root / "good" / "report.json").write_bytes(_sidecar("GOOD"))
    (root / "good" / "report.html").write_text("<html>good</html>")
    (root / "passwd" / "report.json").symlink_to("/etc/passwd")
    (root / "passwd" / "report.html").write_text("<html></html>")
    (root / "linkdir").symlink_to(outside)
    (root / "bigone" / "report.json").symlink_to(big)
    (root / "bigone" / "report.html").write_text("<html></html>")
    (root / "htmlout" / "report.json").write_bytes(_sidecar("HTML-OUTSIDE"))
    (root / "htmlout" / "report.html").symlink_to(outside / "report.html")
    os.mkfifo(root / "fifo" / "report.json")
    (root / "fifo" / "report.html").write_text("<html></html>")
    inside_big = root / "good" / "huge.json"
    with open(inside_big, "wb") as fh:
        fh.truncate(64 * 2**20)
    (root / "good" / "huge.html").write_text("<html></html>")
    with time_limit(LIMIT_S):
        res = CliRunner().invoke(app, ["site", str(root)])
    assert res.exit_code == 0, res.output
    assert "1 write-up(s)" in res.stdout
    page = (root / "index.html").read_text()
    assert "GOOD" in page and "OUTSIDE-SECRET" not in page and "HTML-OUTSIDE" not in page and "root:" not in page
    err = res.stderr
    for name in ("passwd", "linkdir", "bigone", "htmlout", "fifo"):
        assert str(root / name) in err, (name, err)
    assert "outside the tree" in err and "a FIFO" in err


def test_a_provenance_record_leaving_the_study_is_not_read(tmp_path):
    from storagebench import publish

    raw = tmp_path / "study" / "raw" / "run1"
    raw.mkdir(parents=True)
    (raw / "provenance.json").symlink_to("/etc/passwd")
    with pytest.raises(PublishError, match=r"provenance.json: provenance record is a symlink to /etc/passwd, outside"):
        publish.study_provenance(tmp_path / "study")


# ---- size caps ------------------------------------------------------------------------------------------------


def test_oversized_inputs_are_refused_naming_the_cap(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text(DEMO_SPEC.read_text() + "# " + "x" * (256 * 1024) + "\n")
    assert "more than the size cap of 262,144 bytes" in cli(["run", spec, "--out", tmp_path / "r", "--no-progress"])
    icf = tmp_path / "big.icf"
    with open(icf, "wb") as fh:
        fh.truncate(5 * 2**20)
    assert "more than the size cap of 4,194,304 bytes" in cli(["translate", "icf", icf])
    table = tmp_path / "huge.parquet"
    with open(table, "wb") as fh:  # sparse, 17 GiB: refused by its size before a byte is read
        fh.truncate(17 * 2**30)
    assert "more than the size cap of 17,179,869,184 bytes" in cli(
        ["compare", table, "--factor", "iodepth", "--baseline", "1", "--metric", "iops"])
    nb = tmp_path / "huge.ipynb"
    with open(nb, "wb") as fh:
        fh.truncate(65 * 2**20)
    assert "more than the size cap of 67,108,864 bytes" in cli(["publish", nb, "--out", tmp_path / "p"])
    params = tmp_path / "sets.yaml"
    with open(params, "wb") as fh:
        fh.truncate(300 * 1024)
    assert "more than the size cap" in cli(["batch", params, "--out", tmp_path / "b"], codes=(2,))
    with pytest.raises(SchemaError, match="size cap"):
        from storagebench import schema
        schema.read_metadata(table)


# ---- --out of the wrong kind ----------------------------------------------------------------------------------


def test_out_of_the_wrong_kind_is_one_line(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    a_dir = tmp_path / "a_dir.csv"
    a_dir.mkdir()
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    study = FIXTURES / "study_demo"
    dirs_expected = [  # --out must be a directory: a file there is refused
        ["run", DEMO_SPEC, "--no-progress", "--out"],
        ["demo", "--no-progress", "--out"],
        ["ingest", FIXTURES / "fio" / "single_jsonplus.json", "--out"],
        ["publish", "compare.ipynb", "--out"],
        ["testbed", "stripe_width", "--no-report", "--out"],
        ["scaling", ROOT / "data" / "studies" / "scaling.yaml", "--out"],
        ["batch", FIXTURES / "missing.yaml", "--out"],
    ]
    for args in dirs_expected:
        for bad in (a_file, a_file / "sub", fifo):
            msg = cli([*args, bad])
            assert "not a directory" in msg, (args, msg)
    files_expected = [  # --out must be a file: a directory (or a FIFO) there is refused
        ["report", study, "--out"],
        ["site", FIXTURES, "--out"],
        ["compare", study, "--factor", "iodepth", "--baseline", "1", "--metric", "iops", "--out"],
        ["translate", "diskspd", "-b4K", "-d1", "x.dat", "--out"],
    ]
    for args in files_expected:
        msg = cli([*args, a_dir])
        assert "is a directory; --out names the file to write" in msg, (args, msg)
    for args in files_expected[:2]:
        msg = cli([*args, fifo])
        assert "is a FIFO, not a regular file" in msg, (args, msg)
    msg = cli(["site", FIXTURES, "--out", a_file / "index.html"])
    assert "not a directory" in msg
    assert a_file.read_text() == "keep me"

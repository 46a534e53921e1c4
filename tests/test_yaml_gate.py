"""The text-to-YAML gate (issue 18, item 3): YAML the project writes comes from the emitter, fed with data.

Hostile source text (DiskSPD target paths, ``.icf`` paths, Iometer target and worker names, test descriptions)
is planted in every string that reaches a written study: through ``storagebench translate`` and its API. The
written YAML must load back to exactly the study intended: no ``target:``, ``size:`` or ``host_steps:`` key
smuggled in by a newline (``\\n``, ``\\r``, ``\\x85``, U+2028, U+2029). hypothesis writes arbitrary text into
each of those strings too. Values the tools themselves refuse are refused, never mapped to a default.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import storagebench
from storagebench._loadgen_profiles import Mapping, Translation, study_from_diskspd, study_from_icf
from storagebench._safeyaml import PlainLoader, dump_yaml, load_yaml, one_line, yaml_comment
from storagebench._study import load_study
from storagebench.cli import app
from storagebench.errors import StorageBenchError, StudyError

ICF = Path(__file__).parent / "fixtures" / "iometer" / "seed000.icf"
BREAKS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029"]
INJECTED = ("target: /dev/sda", "size: 100%", "host_steps: {drop_caches: true, scheduler: none}", "name: evil",
            "fixed: {exec_prerun: 'touch /tmp/x'}", "---", "...", "? target\n: /dev/sda", "allow_exec: true")
HOSTILE = [f"C:\\x{br}{inj}" for br in BREAKS for inj in INJECTED] + [
    "x\n#\ntarget: /dev/sda", "x\x00y", "x\x1b[31mred", "\ufeffx", "x\t\ty", "\ud800", "x\n  - item", "& * ! | > ' \" %",
]
SETTINGS = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


def _keys_and_study(text: str, intended) -> None:
    """``text`` loads (the project's loader) to exactly ``intended``'s spec, and as a study to the same hash."""
    data = load_yaml(text, where="written", error=StudyError)
    assert data == intended.spec_dict()
    assert list(data) == list(intended.spec_dict())
    assert "target" not in data and "host_steps" not in data  # no translated study sets either
    assert load_study(data).spec_hash == intended.spec_hash
    head = text[: text.index("\nname:") + 1] if not text.startswith("name:") else ""
    for line in head.splitlines():  # Python's splitlines breaks at every YAML line break and more
        assert line.startswith("#"), repr(line)


# ---- the comment, the emitter ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE)
def test_a_comment_is_one_printable_line(text):
    c = yaml_comment(text)
    assert c.startswith("#") and len(c.splitlines()) == 1 and "\x1b" not in c and "\t" not in c
    assert load_yaml(f"a: 1\n{c}\nb: 2\n") == {"a": 1, "b": 2}


@SETTINGS
@given(st.text(), st.dictionaries(st.text(max_size=20), st.text() | st.integers() | st.floats(allow_nan=False),
                                  max_size=5))
def test_any_text_in_comments_and_values_loads_back_as_written(comment, data):
    text = dump_yaml(data, comments=[comment, "second " + comment])
    assert load_yaml(text) == data
    assert yaml.load(text, Loader=PlainLoader) == data  # no tag, nothing but the data either
    lines = text.split("\n")
    assert lines[0].startswith("#") and lines[1].startswith("# second")
    assert len(yaml_comment(comment).splitlines()) == 1


def test_a_yaml_that_does_not_load_back_is_an_error_and_no_file(tmp_path, monkeypatch):
    real = yaml.safe_dump

    def smuggling(data, *a, **k):
        return real(data, *a, **k) + "target: /dev/sda\n"

    monkeypatch.setattr(yaml, "safe_dump", smuggling)
    with pytest.raises(StorageBenchError, match="does not load back|not valid YAML"):
        dump_yaml({"name": "x"})
    with pytest.raises(StorageBenchError, match="does not load back"):
        dump_yaml({"name": "x", "k": ["a", "b"]})  # block style: the extra key loads, and is caught
    out = tmp_path / "s.yaml"
    res = CliRunner().invoke(app, ["translate", "diskspd", "-b4K", "-o4", "x", "--out", str(out)])
    assert res.exit_code == 1 and "does not load back" in res.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_only_the_gate_calls_the_emitter():
    """No module writes YAML but through _safeyaml.dump_yaml: grep the package."""
    root = Path(storagebench.__file__).parent
    offenders = []
    for f in root.rglob("*.py"):
        if f.name == "_safeyaml.py":
            continue
        src = f.read_text()
        if re.search(r"\byaml\.(safe_)?dump(_all)?\(|\bDumper\b|\bemit\(", src):
            offenders.append(str(f.relative_to(root)))
        if re.search(r"""f?["']#[^"'\n]*\{[^}]+\}[^"'\n]*\\n["']\s*\+""", src):  # "# {x}\n" + yaml text
            offenders.append(f"{f.relative_to(root)} (a comment by string formatting)")
    assert offenders == []


# ---- translate: hostile source text ---------------------------------------------------------------------


@pytest.mark.parametrize("target", HOSTILE)
def test_diskspd_targets_and_command_lines_never_become_keys(target):
    try:
        t = study_from_diskspd(f"-b4K -o4 -r -w30 -d5 {target}", name="hostile")
    except StudyError as exc:  # a target token starting with '-' is a DiskSPD switch: refused by name
        assert "DiskSPD switch -" in str(exc)
        return
    text = t.to_yaml()
    _keys_and_study(text, t.study)
    assert t.study.target is None if hasattr(t.study, "target") else True
    for line in t.table().split("\n") + t.report().split("\n"):
        assert "\x1b" not in line and "\r" not in line


@pytest.mark.parametrize("name_part", [h for h in HOSTILE if "\x00" not in h and "/" not in h
                                       and not any("\ud800" <= c <= "\udfff" for c in h)][:20])
def test_icf_paths_with_newlines_never_become_keys(tmp_path, name_part):
    path = tmp_path / f"p{name_part.replace(chr(92), '_')}.icf"
    path.write_text(ICF.read_text())
    t = study_from_icf(path, name="icf_hostile")
    _keys_and_study(t.to_yaml(), t.study)
    out = tmp_path / "out.yaml"
    res = CliRunner().invoke(app, ["translate", "icf", str(path), "--name", "icf_hostile", "--out", str(out)])
    assert res.exit_code == 0, res.output
    _keys_and_study(out.read_text(), t.study)
    assert load_study(out).spec_hash == t.study.spec_hash


@pytest.mark.parametrize("where", ["'Target\n\t", "'Worker\n\t", "'Test Description\n\t"])
@pytest.mark.parametrize("inj", ["sdb\x85target: /dev/sda", "sdb\u2028host_steps: {drop_caches: true}",
                                 "sdb\rsize: 100%", "x\x1b]0;title\x07"])
def test_icf_fields_never_become_keys(tmp_path, where, inj):
    text = ICF.read_text()
    field = {"'Target\n\t": "sdb", "'Worker\n\t": "Worker 1",
             "'Test Description\n\t": "RAID group vs storage pool (seed 000)"}[where]
    assert where + field in text
    path = tmp_path / "x.icf"
    path.write_text(text.replace(where + field, where + inj, 1), encoding="utf-8", newline="")
    t = study_from_icf(path)
    _keys_and_study(t.to_yaml(), t.study)
    assert "\x1b" not in t.report()


@pytest.mark.parametrize("target", HOSTILE[:12])
def test_cli_translate_writes_exactly_the_study(tmp_path, target):
    out = tmp_path / "s.yaml"
    res = CliRunner().invoke(app, ["translate", "diskspd", "-b8K", "-o2", "-w0", target, "--out", str(out)])
    if res.exit_code == 1 and "DiskSPD switch -" in res.output:  # '---' after a newline: a switch, refused
        assert not out.exists()
        return
    assert res.exit_code == 0, res.output
    data = load_yaml(out.read_text())
    assert set(data) <= {"name", "description", "factors", "fixed", "runtime", "ramp_time", "repetitions", "seed",
                         "allow", "allow_exec", "allow_remote"}
    assert "target" not in data and "host_steps" not in data and "size" not in data


@SETTINGS
@given(source=st.text(max_size=200), targets=st.lists(st.text(max_size=60), max_size=3),
       note=st.text(max_size=80), fio=st.text(max_size=40), description=st.text(max_size=300))
def test_any_text_in_every_string_of_a_translation_stays_data(source, targets, note, fio, description):
    try:
        study = load_study({"name": "t", "description": description, "fixed": {"bs": 4096, "rw": "read"},
                            "runtime": 1})
    except StudyError:  # the spec's own check refused the description: nothing to write
        study = load_study({"name": "t", "fixed": {"bs": 4096, "rw": "read"}, "runtime": 1})
    t = Translation("diskspd", source, study, (Mapping(source, fio, False, note), Mapping("-b4K", "bs=4096", True)),
                    tuple(targets))
    text = t.to_yaml()
    _keys_and_study(text, study)
    assert len(t.table().split("\n")) == 4  # header, rule, two mappings: no text adds a row


# ---- translate: values the tools refuse -----------------------------------------------------------------


@pytest.mark.parametrize(("cmd", "words"), [
    ("-o-5 x", r"-o: must be an integer 1\.\."), ("-o0 x", "-o: must be an integer 1"), ("-t0 x", "-t: must be"),
    ("-F0 x", "-F: must be"), ("-F2 -O-1 x", "-O: must be"), ("-d0 x", "-d: must be"), ("-W-5 x", "-W: must be"),
    ("-b0 x", "-b: a size of 1"), ("-b1.5 x", "not a whole number"), ("-b8G x", "-b: a size of 1..4,294,967,295"),
    ("-r0 x", "-r: a size of 1"), ("-T0 x", "-T: a size of 1"), ("-c0 x", "-c: a size of 1"),
    ("-rs0 x", r"-rs: must be an integer 1\.\.99"), ("-rs150 x", "-rs"), ("-rsnan x", "-rs"), ("-rs-5 x", "-rs"),
    ("-w101 x", "0..100"), ("-w-1 x", "-w"), ("-g0 x", "-g: must be"), ("-I7 x", "-I: must be an integer 1..3"),
    ("-i0 x", "-i: must be"), ("-j-1 x", "-j: must be"), ("-D0 x", "-D: must be"), ("-o99999999999999 x", "-o"),
    ("-d2147483648 x", "-d"), ("-b99999999999999999999999T x", "-b"),
])
def test_diskspd_values_outside_what_diskspd_takes_are_refused(cmd, words):
    with pytest.raises(StudyError, match=words):
        study_from_diskspd(cmd, name="bad")


@pytest.mark.parametrize(("old", "new", "words"), [
    ("\t64,DISABLED,1", "\t-5,DISABLED,1", "'Number of outstanding IOs.*1..2,147,483,647, got '-5'"),
    ("\t64,DISABLED,1", "\t0,DISABLED,1", "outstanding IOs.*got '0'"),
    ("\t64,DISABLED,1", "\tmany,DISABLED,1", "outstanding IOs.*got 'many'"),
    ("'Ramp Up Time (s)\n\t3600", "'Ramp Up Time (s)\n\t1e308", "Ramp Up Time.*got '1e308'"),
    ("'Ramp Up Time (s)\n\t3600", "'Ramp Up Time (s)\n\t-5", "Ramp Up Time.*got '-5'"),
    ("'Ramp Up Time (s)\n\t3600", "'Ramp Up Time (s)\n\tinf", "Ramp Up Time.*got 'inf'"),
    ("'Ramp Up Time (s)\n\t3600", "'Ramp Up Time (s)\n\tnan", "Ramp Up Time.*got 'nan'"),
    ("\t1          0          0", "\t-1          0          0", "Run Time hours"),
    ("\t1          0          0", "\t1e9 0 0", "Run Time hours"),
    ("\t1          0          0", "\t1 0", "hours minutes seconds"),
    ("\t1          0          0", "\t999999999 0 0", "Run Time of"),
    ("4096,100,70,100,0,1,0,0", "4096,100,170,100,0,1,0,0", "% reads must be a whole number 0..100"),
    ("4096,100,70,100,0,1,0,0", "4096,100,70,-100,0,1,0,0", "% random must be"),
    ("4096,100,70,100,0,1,0,0", "0,100,70,100,0,1,0,0", "size must be a whole number 1"),
    ("4096,100,70,100,0,1,0,0", "-4096,100,70,100,0,1,0,0", "size must be"),
    ("4096,100,70,100,0,1,0,0", "4096,100,70,100,-1,1,0,0", "delay must be"),
    ("4096,100,70,100,0,1,0,0", "4096,100,70,100,0,0,0,0", "burst must be"),
    ("4096,100,70,100,0,1,0,0", "4096,100,70,100,0,1,-512,0", "align must be"),
    ("4096,100,70,100,0,1,0,0", "4096,100,70,100,0,1,0", "must be size,% of size"),
    ("4096,100,70,100,0,1,0,0", "4096,100,70,100,0,1,0,0,9", "must be size,% of size"),
    ("4096,100,70,100,0,1,0,0", "4096.5,100,70,100,0,1,0,0", "size must be"),
])
def test_icf_values_outside_what_iometer_takes_are_refused(tmp_path, old, new, words):
    text = ICF.read_text()
    assert old in text
    path = tmp_path / "bad.icf"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(StudyError, match=words):
        study_from_icf(path)
    res = CliRunner().invoke(app, ["translate", "icf", str(path), "--out", str(tmp_path / "o.yaml")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert not (tmp_path / "o.yaml").exists()


@pytest.mark.parametrize(("cycle", "words"), [
    ("0          32         2          EXPONENTIAL", "start must be a whole number 1"),
    ("1          32         1          EXPONENTIAL", "step must be a whole number 2"),
    ("1          32         0          LINEAR", "step must be a whole number 1"),
    ("8          4          1          LINEAR", "end must be a whole number 8"),
    ("1          32         2          SIDEWAYS", "LINEAR|EXPONENTIAL"),
    ("1          100000     1          LINEAR", "more than 64 queue depths"),
])
def test_icf_queue_depth_cycling_that_never_ends_is_refused(tmp_path, cycle, words):
    text = ICF.read_text().replace("'Test Type\n\tNORMAL", "'Test Type\n\tCYCLE_OUTSTANDING_IOS")
    text = text.replace("1          32         2          EXPONENTIAL", cycle)
    path = tmp_path / "c.icf"
    path.write_text(text)
    with pytest.raises(StudyError, match=words):
        study_from_icf(path)


def test_valid_values_are_still_exact(tmp_path):
    t = study_from_icf(ICF)
    ramp = next(m for m in t.mappings if m.source.startswith("'Ramp Up Time"))
    qd = next(m for m in t.mappings if m.source.startswith("'Number of outstanding IOs"))
    assert ramp.exact and ramp.fio == "ramp_time=3600" and qd.exact and qd.fio == "iodepth=64"


def test_icf_must_be_a_regular_file_of_bounded_size(tmp_path):
    import os

    fifo = tmp_path / "f.icf"
    os.mkfifo(fifo)
    with pytest.raises(StudyError, match="regular file"):
        study_from_icf(fifo)
    res = CliRunner().invoke(app, ["translate", "icf", "/dev/zero"])
    assert res.exit_code == 1 and "regular file" in res.output


def test_translate_help_and_usage_errors(tmp_path):
    runner = CliRunner()
    for args in (["translate", "-h"], ["translate"], ["translate", "--help"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "DiskSPD" in res.output, res.output
    res = runner.invoke(app, ["translate", "diskspd"])
    assert res.exit_code == 1 and "DiskSPD command line" in res.output
    res = runner.invoke(app, ["translate", "diskspd", "-o4", "x", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "is a directory" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["translate", "vdbench\nx"])
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1 and "vdbench" in res.output


def test_one_line_escapes_what_yaml_and_terminals_break_on():
    s = one_line("a\nb\rc\x85d\u2028e\u2029f\tg\x1bh\u202ei\ufeffj\ud800k")
    assert s == "a\\x0ab\\x0dc\\x85d\\u2028e\\u2029f\\x09g\\x1bh\\u202ei\\ufeffj\\ud800k"
    assert len(one_line("x" * 5000)) == 2000

"""fio job files: rendering (checked by fio itself), parsing, linting options that run programs."""

from __future__ import annotations

import subprocess

import pytest

from storagebench._jobfile import (
    fio_parsed_options,
    parse_jobfile,
    render_jobfile,
    rendered_options,
    verify_fio_parse,
    verify_rendered,
)
from storagebench._plan import RunPoint
from storagebench._safety import lint_jobfile
from storagebench._study import load_study
from storagebench.errors import JobFileError, UnsafeJobFileError

SPEC = {
    "name": "jf",
    "factors": {"iodepth": [1, 8], "pattern": [{"name": "mix", "rw": "randrw", "rwmixread": 70, "bs": "8k"}]},
    "fixed": {"ioengine": "psync", "direct": 0, "norandommap": True},
    "runtime": 1,
    "ramp_time": 1,
    "size": "16m",
}


def test_render_then_parse_round_trip(tmp_path):
    study = load_study(SPEC)
    point = study.expand().points[0]
    text = render_jobfile(point, study, tmp_path / "data")
    jf = parse_jobfile(text)
    assert [name for name, _ in jf.sections] == ["global", point.run_id]
    (name, opts), = jf.jobs
    assert name == point.run_id
    assert opts["filename"] == str(tmp_path / "data")
    assert opts["time_based"] is None and opts["norandommap"] is None  # bare flags
    assert opts["runtime"] == "1" and opts["ramp_time"] == "1" and opts["size"] == "16m"
    assert opts["group_reporting"] == "1"
    assert (opts["rw"], opts["rwmixread"], opts["bs"]) == ("randrw", "70", "8k")
    assert opts["iodepth"] == str(point.factors["iodepth"])
    # runner options and fixed options in [global], the factors' options in the job section
    assert "ioengine" in jf.global_options and "iodepth" not in jf.global_options


def test_fio_accepts_rendered_jobfile(tmp_path, fio_bin):
    study = load_study(SPEC)
    for point in study.expand():
        path = tmp_path / f"{point.run_id}.fio"
        path.write_text(render_jobfile(point, study, tmp_path / "a:b"))
        proc = subprocess.run([fio_bin, "--parse-only", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert "filename=" + str(tmp_path / "a\\:b") in path.read_text()  # ':' separates files in fio


def test_render_needs_a_target():
    study = load_study(SPEC)
    with pytest.raises(JobFileError, match="no target"):
        render_jobfile(study.expand().points[0], study, None)


def test_parse_fio_syntax(tmp_path):
    (tmp_path / "inc.fio").write_text("[included]\nrw=read\n")
    text = """
; a comment
# another comment
[global]
ioengine = libaio
time_based
[a]
rw=randread
bs=4k
[global]
direct=1
[b]
include inc.fio
"""
    jf = parse_jobfile(text, base_dir=tmp_path)
    jobs = dict(jf.jobs)
    assert jobs["a"] == {"ioengine": "libaio", "time_based": None, "rw": "randread", "bs": "4k"}
    assert "direct" not in jobs["a"]  # [global] applies only to the jobs after it
    assert jobs["b"]["direct"] == "1"
    assert jobs["included"]["rw"] == "read" and jobs["included"]["direct"] == "1"


@pytest.mark.parametrize(
    "text, match",
    [
        ("rw=read\n[a]\n", "line 1: option 'rw=read' before any"),
        ("[a\nrw=read\n", "bad section header"),
        ("[a]\ninclude missing.fio\n", "cannot read include 'missing.fio'"),
    ],
)
def test_parse_errors(tmp_path, text, match):
    with pytest.raises(JobFileError, match=match):
        parse_jobfile(text, base_dir=tmp_path)


def test_include_loop_is_refused(tmp_path):
    (tmp_path / "self.fio").write_text("[a]\ninclude self.fio\n")
    with pytest.raises(JobFileError, match="includes itself"):
        parse_jobfile((tmp_path / "self.fio").read_text(), base_dir=tmp_path)


@pytest.mark.parametrize(
    "body, gate",
    [
        ("exec_prerun=rm -rf /\n", "exec"),
        ("exec_postrun=/bin/sh -c true\n", "exec"),
        ("ioengine=exec\nprogram=/bin/true\n", "exec"),
        ("ioengine=external:/tmp/evil.so\n", "exec"),
        ("ioengine=/tmp/evil.so\n", "exec"),
        ("opendir=/\n", "other_files"),
        ("read_iolog=/tmp/x.log\n", "iolog"),
        ("cgroup=sb\n", "cgroup"),
        ("ioscheduler=none\n", "ioscheduler"),
        ("unlink=1\n", "unlink"),
        ("ioengine=net\nhostname=10.0.0.1\nport=5000\n", "net"),
        ("write_lat_log=/etc/lat\n", "log_paths"),
        ("create_only=1\n", "create"),
    ],
)
def test_lint_refuses_gated_options_unless_allowed(body, gate, tmp_path):
    text = "[global]\nsize=1m\n[x]\n" + body
    with pytest.raises(UnsafeJobFileError, match=rf"job file section \[(x|global)\].*allow: \[{gate}\]"):
        lint_jobfile(text, check_targets=False, base_dir=tmp_path)
    lint_jobfile(text, check_targets=False, allow=[gate], base_dir=tmp_path)  # the user said they trust it


def test_lint_reads_aliases_and_variables_as_fio_does(tmp_path):
    with pytest.raises(JobFileError, match="same fio option"):
        lint_jobfile("[x]\nrw=randread\nreadwrite=write\n", check_targets=False)
    with pytest.raises(UnsafeJobFileError, match="substitutes"):
        lint_jobfile("[x]\nrw=${RW}\n", check_targets=False)
    with pytest.raises(JobFileError, match="not an option fio-3.33 knows.*'rwmixread'"):
        lint_jobfile("[x]\nrwmixred=70\n", check_targets=False)
    lint_jobfile("[x]\nioengine=libaio\nrw=randread\nbs=4k\nwrite_lat_log=lat\n", check_targets=False)


def test_values_are_cut_where_fio_cuts_them():
    jf = parse_jobfile("[x]\nrw=randread;write\ndescription=a # b\n")
    assert dict(jf.jobs)["x"] == {"rw": "randread", "description": "a"}


def _point(options, factors=None):
    return RunPoint(run_id="abc123", repetition=1, run_order=0, factors=factors or {}, options=options)


@pytest.mark.parametrize("options, factors, match", [
    ({"rw": "randread", "description": "x\n[global]\nexec_prerun=id"}, {}, "control characters"),
    ({"rw": "randread"}, {}, None),
    ({"rw": "randread", "bs": "4k;x"}, {}, "';'"),
    ({"rw": "randread", "readwrite": "write"}, {}, "same fio option"),
    ({"rw": "randread", "bogus_option": 1}, {}, "not an option"),
])
def test_render_refuses_what_could_change_the_job_file(options, factors, match, tmp_path):
    if match is None:
        render_jobfile(_point(options, factors), None, tmp_path / "t")
        return
    with pytest.raises(JobFileError, match=match):
        render_jobfile(_point(options, factors), None, tmp_path / "t")


def test_factor_comment_cannot_break_out(tmp_path):
    """A hostile factor label reaches only a comment line, printable and on one line."""
    text = render_jobfile(_point({"rw": "randread"}, {"pattern": "x\n[global]\nexec_prerun=id"}), None,
                          tmp_path / "t")
    assert "exec_prerun" not in dict(parse_jobfile(text).jobs)["abc123"]
    assert text.count("\n[") == 2  # [global] and the job, nothing else starts a section
    assert "; factors: pattern=x?[global]?exec_prerun=id" in text


def test_times_are_rendered_as_fio_reads_them(tmp_path, fio_bin):
    point = _point({"rw": "randread", "time_based": True, "runtime": 1.5, "ramp_time": 0.25, "size": "1m",
                    "ioengine": "null"})
    text = render_jobfile(point, None, tmp_path / "t")
    assert "runtime=1500ms" in text and "ramp_time=250ms" in text
    path = tmp_path / "j.fio"
    path.write_text(text)
    verify_fio_parse(path, rendered_options(point, tmp_path / "t"), fio_bin)


def test_fio_parse_check_catches_a_file_that_says_more(tmp_path, fio_bin):
    point = _point({"rw": "randread", "size": "1m", "ioengine": "null"})
    text = render_jobfile(point, None, tmp_path / "t")
    expected = rendered_options(point, tmp_path / "t")
    path = tmp_path / "j.fio"
    path.write_text(text + "rw=randwrite\n")
    with pytest.raises(JobFileError, match="rw: checked 'randread', read back 'randwrite'"):
        verify_rendered(path.read_text(), expected)
    with pytest.raises(JobFileError, match="fio read option rw twice, as 'randread' and 'randwrite'"):
        verify_fio_parse(path, expected, fio_bin)
    assert ("rw", "randwrite") in fio_parsed_options(path, fio_bin)

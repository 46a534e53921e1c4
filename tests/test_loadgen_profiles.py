"""DiskSPD command lines and Iometer .icf files → fio studies, with the translation shown (issue 12 item 4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from storagebench._jobfile import render_jobfile
from storagebench._loadgen_profiles import study_from_diskspd, study_from_icf
from storagebench._study import load_study
from storagebench.cli import app
from storagebench.errors import StudyError

ICF = Path(__file__).parent / "fixtures" / "iometer" / "seed000.icf"
SEED000 = "-b4K -r -w30 -o64 -t1 -d3600 -W3600"
SEED000_FIO = {"rw": "randrw", "bs": 4096, "rwmixread": 70, "iodepth": 64, "numjobs": 1}


def test_seed000_diskspd_line_translates():
    t = study_from_diskspd(SEED000, name="seed000")
    s = t.study
    assert {k: s.fixed[k] for k in SEED000_FIO} == SEED000_FIO
    assert (s.runtime, s.ramp_time, s.target) == (3600.0, 3600.0, None)
    assert s.fixed["direct"] == 0  # no -S: DiskSPD caches, as fio's default buffered I/O
    assert [m.source for m in t.inexact] == ["(engine)"]  # libaio is not DiskSPD's IOCP; said, not hidden
    assert len(s.expand()) == 1


def test_seed000_icf_translates_to_the_same_workload():
    t = study_from_icf(ICF)
    s = t.study
    assert {k: s.fixed[k] for k in SEED000_FIO} == SEED000_FIO
    assert (s.runtime, s.ramp_time, s.fixed["direct"]) == (3600.0, 3600.0, 1)
    assert s.description == "RAID group vs storage pool (seed 000)"
    assert t.targets == ("sdb",) and s.target is None
    # Iometer's 'align 0' (sector boundaries) has no exact fio counterpart: reported, not set
    assert any("sector" in m.note and not m.exact for m in t.inexact)
    assert "ba" not in s.fixed and "blockalign" not in s.fixed


def test_translated_job_file_is_accepted_by_fio(tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("fio not installed")
    for t in (study_from_diskspd(SEED000, name="seed000"), study_from_icf(ICF)):
        point = t.study.expand().points[0]
        job = tmp_path / f"{t.tool}.fio"
        job.write_text(render_jobfile(point, t.study, target=str(tmp_path / "target.dat")))
        out = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        text = job.read_text()
        assert "iodepth=64" in text and "rwmixread=70" in text and "ramp_time=3600" in text


def test_seed002_line_with_target_and_redirect():
    t = study_from_diskspd(r"diskspd.exe -t1 -b4k -r -w0 -o8 -d60 -Sh -L #1 > c:\log\t1-o8-4k-rand-read.txt",
                           name="s002", ioengine="windowsaio")
    f = t.study.fixed
    assert (f["rw"], f["bs"], f["iodepth"], f["numjobs"], f["direct"], f["sync"]) == ("randread", 4096, 8, 1, 1, 1)
    assert t.study.ramp_time == 5.0  # DiskSPD's default -W5, said in the table
    assert any(m.source == "(no -W)" for m in t.mappings)
    assert t.targets[0].startswith("#1 (physical drive 1") and t.study.target is None
    assert t.inexact == ()  # with windowsaio, -Sh is exactly direct=1 + sync=1 (fio engines/windowsaio.c)


def test_diskspd_defaults_are_diskspd_not_fio():
    t = study_from_diskspd("testfile.dat", name="defaults")
    f = t.study.fixed
    assert (f["bs"], f["iodepth"], f["numjobs"], f["rw"]) == (65536, 2, 1, "read")
    assert (t.study.runtime, t.study.ramp_time) == (10.0, 5.0)


def test_not_exact_is_said():
    t = study_from_diskspd("-F4 -O8 -b8K -si -C30 -a0,1 -w100 a.dat b.dat", name="pool")
    f = t.study.fixed
    assert (f["numjobs"], f["iodepth"], f["rw"]) == (4, 8, "write")
    bad = {m.source.split()[0] for m in t.inexact}
    assert {"-F4", "-si", "-C30", "-a0,1"} <= bad
    assert "NO" in t.table() and "interlocked" in t.report()


def test_stride_and_alignment():
    t = study_from_diskspd("-b4K -s16K x", name="stride")
    assert t.study.fixed["rw"] == "read:12288"  # stride 16 KiB = 4 KiB block + 12 KiB hole
    t = study_from_diskspd("-b8K -r4K x", name="align")
    assert t.study.fixed["ba"] == 4096  # fio's canonical name of blockalign


@pytest.mark.parametrize(("cmd", "words"), [
    ("-b4K -q", "unknown"),
    ("-t2 -F2", "cannot be combined"),
    ("-O4", "only valid with -F"),
    ("-bX", "must be a size"),
    ("-w150", "0..100"),
    ("-X profile.xml", "XML profile"),
    ("-b4K -s2K x", "smaller than the block size"),
])
def test_bad_command_lines(cmd, words):
    with pytest.raises(StudyError, match=words):
        study_from_diskspd(cmd, name="bad")


def test_icf_cycling_and_several_specs(tmp_path):
    text = ICF.read_text()
    text = text.replace("'Test Type\n\tNORMAL", "'Test Type\n\tCYCLE_OUTSTANDING_IOS")
    text = text.replace("'END access specifications", "'Access specification name,default assignment\n"
                        "\t64K; 100% Read; 0% random,NONE\n'size,% of size,% reads,% random,delay,burst,align,reply\n"
                        "\t65536,100,100,0,0,1,65536,0\n'END access specifications")
    text = text.replace("\t4K; 70% Read; 100% random\n'End assigned", "\t4K; 70% Read; 100% random\n"
                        "\t64K; 100% Read; 0% random\n'End assigned")
    path = tmp_path / "cycling.icf"
    path.write_text(text)
    s = study_from_icf(path).study
    assert s.factors["iodepth"] == [1, 2, 4, 8, 16, 32]  # 'Queue Depth Cycling 1..32 exponential x2
    # Iometer's names hold ';' and '%': the level names are safe names made from them
    assert [lv["name"] for lv in s.factors["access_spec"]] == ["4K_70pct_Read_100pct_random", "64K_100pct_Read_0pct_random"]
    assert s.factors["access_spec"][1]["rw"] == "read" and s.factors["access_spec"][1]["bs"] == 65536
    assert len(s.expand()) == 12


def test_icf_bad(tmp_path):
    bad = tmp_path / "bad.icf"
    bad.write_text(ICF.read_text().replace("\t4096,100,70,100,0,1,0,0", "\t4096,90,70,100,0,1,0,0"))
    with pytest.raises(StudyError, match="adds to 90"):
        study_from_icf(bad)
    bad.write_text(ICF.read_text().replace("\t1          0          0", "\t0          0          0"))
    with pytest.raises(StudyError, match="Run Time"):
        study_from_icf(bad)


def test_cli_translate_prints_and_writes(tmp_path):
    out = tmp_path / "seed000.yaml"
    r = CliRunner().invoke(app, ["translate", "diskspd", *SEED000.split(), "--name", "seed000", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "-o64" in r.output and "iodepth=64" in r.output and "without an exact fio equivalent" in r.output
    assert load_study(out).fixed["iodepth"] == 64
    r = CliRunner().invoke(app, ["translate", "icf", str(ICF)])
    assert r.exit_code == 0 and "sector" in r.output
    r = CliRunner().invoke(app, ["translate", "diskspd", "-t2", "-F2"])
    assert r.exit_code == 1

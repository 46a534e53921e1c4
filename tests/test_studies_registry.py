"""The testbed-study registry without root: entry points, protocol checks, the quick grids of the specs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from storagebench import studies
from storagebench.errors import StudyError

#: The testbed studies of the package, found by the registry (a new one is tested without an edit here).
BUILT_IN = tuple(n for n in studies.names() if studies.get(n).source == "package")

MODULE = '''
import contextlib
from storagebench.studies import SetUp

name = "ep_example"
title = "entry-point example"
question = "is it found?"


@contextlib.contextmanager
def testbed(study, unit):
    yield SetUp(targets={})


def analyse(data, *, confidence=0.95, knob=3):
    raise NotImplementedError
'''


@pytest.mark.slow
def test_a_study_from_an_installed_package_entry_point(tmp_path):
    """Group ``storagebench.studies``: an installed package's module (its YAML beside it) is a study too."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ep_example.py").write_text(textwrap.dedent(MODULE))
    (site / "ep_example.yaml").write_text("name: ep_example\nfactors: {rw: [randread]}\nruntime: 1\nsize: 1m\n")
    dist = site / "ep_example-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-example\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[storagebench.studies]\nep_example = ep_example\n")
    code = ("from storagebench import studies; t = studies.get('ep_example'); "
            "print(t.source, t.spec().name, t.parameters())")
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop(studies.STUDY_PATH_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 2) == ["entry", "point", "ep_example {'knob': 3}\n"]


def test_protocol_and_spec_checks(tmp_path, monkeypatch):
    d = tmp_path / "s"
    d.mkdir()
    monkeypatch.setenv(studies.STUDY_PATH_ENV, str(d))
    (d / "mismatch.py").write_text(textwrap.dedent(MODULE).replace('"ep_example"', '"mismatch"'))
    (d / "mismatch.yaml").write_text("name: other\nfactors: {rw: [randread]}\nruntime: 1\n")
    with pytest.raises(StudyError, match=r"mismatch.yaml: name must be 'mismatch' \(the module's name\), got 'other'"):
        studies.get("mismatch").spec()
    (d / "mismatch.yaml").write_text("name: mismatch\nfactors: {rw: [randread]}\nruntime: 1\n")
    assert studies.get("mismatch").spec(quick=True).name == "mismatch-quick"
    (d / "notcallable.py").write_text("name = 'notcallable'\ntitle = question = 'x'\ntestbed = 1\nanalyse = 2\n")
    (d / "notcallable.yaml").write_text("name: notcallable\n")
    with pytest.raises(StudyError, match="notcallable.py: testbed must be callable"):
        studies.names()
    (d / "notcallable.py").unlink()
    (d / "raises.py").write_text("raise RuntimeError('boom')\n")
    (d / "raises.yaml").write_text("name: raises\n")
    with pytest.raises(StudyError, match="raises.py: importing the study module failed: RuntimeError: boom"):
        studies.names()
    (d / "raises.py").unlink()
    (d / "_helper.py").write_text("raise RuntimeError('never imported')\n")  # "_" modules are not studies
    (d / "noyaml.py").write_text("raise RuntimeError('never imported')\n")  # a module without a YAML is not one
    assert "mismatch" in studies.names()
    monkeypatch.setenv(studies.STUDY_PATH_ENV, str(tmp_path / "nope"))
    with pytest.raises(StudyError, match="STORAGEBENCH_STUDY_PATH lists .*nope.*not a directory"):
        studies.names()


@pytest.mark.parametrize("name", BUILT_IN)
def test_built_in_specs_plan_set_ups_in_blocks(name):
    """The design the issue asks for: set-ups >= 3 per arm, one build per arm and set-up, blocks; the plan's
    units are exactly that, and each block holds every arm once."""
    spec = studies.get(name).spec()
    plan = spec.expand()
    units = plan.units()
    arms = len(spec.factors[spec.setup_factors[0]])
    assert spec.setups >= 3 and len(units) == spec.setups * arms
    for b in range(1, spec.setups + 1):
        block = [u for u in units if u.block == b]
        assert len(block) == arms and len({tuple(u.arm.values()) for u in block}) == arms
    assert len(plan) * (spec.runtime + spec.ramp_time) < 10 * 60  # the measured time alone fits in 10 minutes


@pytest.mark.parametrize("args, code, message", [
    (["nope"], 1, f"testbed study must be one of {sorted(studies.names())}, got 'nope'"),
    (["fast_vs_slow", "--confidence", "1.5"], 1, "confidence must be a number in (0, 1), e.g. 0.95, got 1.5"),
    (["fast_vs_slow", "-p", "qos_p99_ms=abc"], 1, "qos_p99_ms must be like its default 5.0 (float), got str 'abc'"),
    (["fast_vs_slow", "-p", "qos_p99_ms=true"], 1, "got bool True"),
    (["fast_vs_slow", "-p", "qos_p99_ms=.nan"], 1, "got float nan"),
    (["fast_vs_slow", "-p", "qos_p99_ms=0"], 1, "qos_p99_ms must be a positive number of ms, got 0"),
    (["fast_vs_slow", "-p", "margin=0.1"], 1, "unknown analysis parameter(s) ['margin']; allowed: qos_p99_ms"),
    (["rdm_vs_vmfs", "-p", "power=1.5"], 1, "power must be a fraction in (0, 1), got 1.5"),
    (["rdm_vs_vmfs", "-p", "margin=2"], 1, "margin must be a fraction in (0, 1), got 2"),
    (["fast_vs_slow", "-p", "=3"], 2, "KEY=VALUE"),
    (["fast_vs_slow", "-p", "qos"], 2, "KEY=VALUE"),
    ([], 2, "name a study"),
])
def test_bad_cli_input_is_refused_before_anything_is_built(tmp_path, args, code, message):
    from typer.testing import CliRunner

    from storagebench.cli import app

    res = CliRunner().invoke(app, ["testbed", *args, "--out", str(tmp_path), "--no-progress", "--no-report"])
    assert res.exit_code == code, res.output
    assert message in " ".join(res.output.split()).replace("│", "").replace("  ", " ") or message in res.output
    assert list(tmp_path.iterdir()) == []  # nothing built, nothing measured, no directory made

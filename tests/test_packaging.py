"""environment.yml and pyproject.toml must list the same dependencies."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import tomllib
import yaml
from conftest import ROOT

#: conda-forge names that differ from the PyPI ones
_CONDA_TO_PYPI = {"python-xxhash": "xxhash"}


def _name(req: str) -> str:
    name = re.split(r"[<>=!~ \[;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")
    return _CONDA_TO_PYPI.get(name, name)


def test_environment_yml_matches_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    conda -= {"python", "pip", "fio"}
    assert wanted == conda, (
        f"only in pyproject: {sorted(wanted - conda)}; only in environment.yml: {sorted(conda - wanted)}"
    )
    assert "fio" in {_name(d) for d in env["dependencies"] if isinstance(d, str)}


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in ci and "make test" in readme


def _committed_modes() -> dict[str, int] | None:
    """{path: mode} of the files git tracks (the mode a clone gets), or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return {line.split("\t", 1)[1]: int(line.split()[0], 8) for line in out.stdout.split("\0") if "\t" in line}


def test_every_script_with_a_shebang_is_executable():
    """Issue 19: `runners/transcribe_seeds.py --check`, as the README writes it, failed: the file was not
    executable. Every file of runners/ and benchmarks/ starting with ``#!`` is executable, in git (what a
    clone gets) and in this checkout."""
    modes = _committed_modes()
    scripts = [p for d in ("runners", "benchmarks") for p in sorted((ROOT / d).iterdir())
               if p.is_file() and p.read_bytes()[:2] == b"#!"]
    assert any(p.name == "transcribe_seeds.py" for p in scripts)
    not_executable = [str(p.relative_to(ROOT)) for p in scripts if not os.access(p, os.X_OK)]
    if modes is not None:
        not_executable += [f"{p.relative_to(ROOT)} (in git)" for p in scripts
                           if str(p.relative_to(ROOT)) in modes and not modes[str(p.relative_to(ROOT))] & 0o111]
    assert not not_executable, f"scripts with a shebang that cannot be run as written: {not_executable}"


def test_python_in_the_folder_above_a_clone_named_storagebench_imports_the_package(tmp_path):
    """Issue 19: Python started in the folder above a clone named ``storagebench`` imported the clone as an empty
    namespace package (setuptools' editable finder comes after the current directory). The Makefile installs the
    package with ``editable_mode=compat`` (a path entry), which a regular package on ``sys.path`` wins over."""
    import json
    from importlib import metadata

    # the installed distribution's record: with the compat mode the checkout also holds a storagebench.egg-info
    # (no direct_url.json), which metadata.distribution() finds first when the checkout is on sys.path
    urls = [json.loads(d.read_text("direct_url.json") or "{}").get("url", "")
            for d in metadata.distributions(name="storagebench")]
    url = next((u for u in urls if u), "")
    if url.removeprefix("file://") != str(ROOT.resolve()):
        pytest.skip(f"the venv's storagebench is not this checkout ({url or 'not installed'}): make venv installs it")
    (tmp_path / "storagebench").symlink_to(ROOT.resolve(), target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", "import storagebench; print(storagebench.__file__)"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(ROOT.resolve() / "storagebench" / "__init__.py"), \
        "the clone directory was imported as a namespace package: reinstall with `make venv` (editable_mode=compat)"
    assert "editable_mode=compat" in (ROOT / "Makefile").read_text()

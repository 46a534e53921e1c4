"""The architecture holds: import-linter's contracts (pyproject.toml [tool.importlinter]) pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def _lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([*cmd, "--no-cache", "--no-logo"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_import_contracts_hold():
    """The layers (fio -> study/ingest/stats -> runner/plots -> studies/publish -> cli) and no cycles."""
    res = _lint_imports(ROOT)
    assert res.returncode == 0, f"lint-imports failed:\n{res.stdout}\n{res.stderr}"
    assert "0 broken" in res.stdout


def test_import_contracts_catch_an_upward_import_and_a_cycle(tmp_path):
    """The same contracts on a copy of the package in which the fio layer imports the CLI: broken."""
    shutil.copytree(ROOT / "storagebench", tmp_path / "storagebench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    hosts = tmp_path / "storagebench" / "fio" / "hosts.py"
    hosts.write_text(hosts.read_text() + "\nfrom .. import cli  # noqa: E402,F401\n")
    res = _lint_imports(tmp_path, pythonpath=tmp_path)
    assert res.returncode != 0, res.stdout
    assert "storagebench.fio is not allowed to import storagebench.cli" in res.stdout, res.stdout
    assert "No cycles are allowed in storagebench." in res.stdout, res.stdout

"""The architecture holds: import-linter's contracts (pyproject.toml [tool.importlinter]) pass."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib
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


def _module_table() -> list[str]:
    """First-column entries of docs/ARCHITECTURE.md's "Modules and their public API" table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Modules and their public API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, re.M)


def _modules_in_code() -> tuple[set[str], dict[str, set[str]]]:
    """(the top-level modules ``x.py``, {package ``p/``: its public modules ``p/m.py``}) of storagebench/."""
    pkg = ROOT / "storagebench"
    top = {p.name for p in pkg.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    packages = {f"{d.name}/": {f"{d.name}/{m.name}" for m in d.glob("*.py") if not m.name.startswith("_")}
                for d in pkg.iterdir() if (d / "__init__.py").is_file()}
    return top, packages


def test_architecture_module_table_matches_the_code():
    """Every module is in the table (a package by ``p/`` or by each of its public modules), and every row
    names a module or package that exists."""
    listed = _module_table()
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({x for x in listed if listed.count(x) > 1})}"
    top, packages = _modules_in_code()
    missing = sorted(top - set(listed))
    missing += sorted(p for p, mods in packages.items() if p not in listed and not mods <= set(listed))
    assert not missing, f"modules missing from docs/ARCHITECTURE.md's module table: {missing}"
    exists = top | set(packages) | {m for mods in packages.values() for m in mods}
    gone = sorted(x for x in listed if x not in exists)
    assert not gone, f"docs/ARCHITECTURE.md lists modules that do not exist: {gone}"


def test_architecture_layers_table_is_the_import_linter_contract():
    """The layers table of docs/ARCHITECTURE.md and the `layers` contract of pyproject.toml are the same list."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith(("| layer", "| ---"))]
    doc = [set(re.findall(r"`([A-Za-z_]+)`", re.split(r"(?<!\\)\|", row)[2])) for row in rows]
    contract = next(c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers")
    code = [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in contract["layers"]]
    assert doc == code


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_docs_are_self_contained():
    """README.md and docs/: no web links, and every link or `../` path stays inside the repository and exists.
    (Papers and standards are cited by name, author and year, not linked.)"""
    problems = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = doc.read_text()
        for url in re.findall(r"\b(?:https?|ftp)://\S+", text):
            problems.append(f"{doc.name}: web link {url}")
        targets = _LINK.findall(text) + re.findall(r"`(\.\./[^`\s]+)`", text)
        for target in targets:
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            if ROOT.resolve() not in (path, *path.parents) or not path.exists():
                problems.append(f"{doc.name}: {target} is not a file of the repository")
    assert not problems, problems

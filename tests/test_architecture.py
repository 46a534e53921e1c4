"""The architecture holds: import-linter's contracts (pyproject.toml [tool.importlinter]) pass."""

from __future__ import annotations

import ast
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


def test_import_contracts_catch_an_upward_import_a_cycle_and_a_new_study_importing_another(tmp_path):
    """The same contracts on a copy of the package in which the fio layer imports the CLI, and a new testbed
    study (a module no contract names) imports a built-in one: all broken. The studies contract covers every
    module of ``studies/`` by wildcard, so the new study is checked without an edit of pyproject.toml."""
    shutil.copytree(ROOT / "storagebench", tmp_path / "storagebench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    hosts = tmp_path / "storagebench" / "fio" / "hosts.py"
    hosts.write_text(hosts.read_text() + "\nfrom .. import cli  # noqa: E402,F401\n")
    built_in = sorted(p.stem for p in (ROOT / "storagebench" / "studies").glob("[!_]*.py"))[0]
    (tmp_path / "storagebench" / "studies" / "zz_new_study.py").write_text(
        f"from storagebench.studies import StudyData, {built_in}  # noqa: F401\n")
    res = _lint_imports(tmp_path, pythonpath=tmp_path)
    assert res.returncode != 0, res.stdout
    out = " ".join(res.stdout.split())
    assert "storagebench.fio is not allowed to import storagebench.cli" in out, res.stdout
    assert "No cycles are allowed in storagebench." in out, res.stdout
    assert f"storagebench.studies.zz_new_study is not allowed to import storagebench.studies.{built_in}" in out, \
        res.stdout


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


#: Libraries whose import means statistics are computed (or random numbers drawn) in the module.
_STATISTICS_LIBRARIES = ("scipy", "statsmodels", "numpy.random", "sklearn", "pingouin", "arch")
#: Calls that are the ingredients of an interval: a distribution's quantile, a spread, sample quantiles.
_INTERVAL_CALLS = frozenset({"ppf", "isf", "interval", "std", "nanstd", "var", "nanvar", "sem", "quantile",
                             "nanquantile", "percentile", "nanpercentile", "bootstrap", "t_interval"})


def _statistics_in(source: str) -> list[str]:
    """What a module computes beyond drawing: imports of statistics libraries (or numpy.random), calls that
    make an interval (a t or normal quantile, a standard deviation or error, sample quantiles), and functions
    that return a table (a DataFrame: the tables of results belong to stats/tables, not to the figures)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names
                      if any(a.name == lib or a.name.startswith(lib + ".") for lib in _STATISTICS_LIBRARIES)]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(n == lib or n.startswith(lib + ".") for n in names for lib in _STATISTICS_LIBRARIES):
                found.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Attribute) and node.attr == "random" and isinstance(node.value, ast.Name) \
                and node.value.id in ("np", "numpy"):
            found.append(f"line {node.lineno}: {node.value.id}.random")
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in _INTERVAL_CALLS:
                found.append(f"line {node.lineno}: calls {name}()")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None \
                and "DataFrame" in ast.unparse(node.returns):
            found.append(f"line {node.lineno}: {node.name}() returns a table ({ast.unparse(node.returns)})")
    return found


def test_plots_draws_and_computes_nothing_statistical():
    """Issue 9: the figures draw what stats computes. No module of storagebench/plots/ imports scipy,
    statsmodels or numpy.random, computes an interval's ingredients, or returns a table."""
    modules = sorted((ROOT / "storagebench" / "plots").glob("*.py"))
    assert len(modules) >= 4, modules
    found = {m.name: _statistics_in(m.read_text()) for m in modules}
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def test_the_statistics_check_finds_an_interval_a_table_and_a_library():
    """The check above is not vacuous: a figure module with its own t interval, its own table of points or
    numpy's random numbers is caught, and the stats module that does compute intervals is caught too."""
    own_t = """
import numpy as np
from scipy import stats


def band(x):
    m, s = np.mean(x), np.std(x, ddof=1)
    return m - stats.t.ppf(0.975, len(x) - 1) * s / np.sqrt(len(x))
"""
    assert {"from scipy import stats", "line 7: calls std()", "line 8: calls ppf()"} <= set(_statistics_in(own_t))
    table = "import pandas as pd\n\ndef per_point(runs) -> pd.DataFrame:\n    return runs\n"
    assert _statistics_in(table) == ["line 3: per_point() returns a table (pd.DataFrame)"]
    assert _statistics_in("import numpy as np\nrng = np.random.default_rng(1)\n") == ["line 2: np.random"]
    assert _statistics_in("import numpy as np\n\ndef f(x):\n    return np.log(x).mean()\n") == []
    points = (ROOT / "storagebench" / "stats" / "points.py").read_text()
    assert any("statsmodels" in f for f in _statistics_in(points))

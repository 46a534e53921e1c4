"""The architecture holds: import-linter's contracts (pyproject.toml [tool.importlinter]) pass."""

from __future__ import annotations

import ast
import json
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


# --------------------------------------------------------------------------- one default confidence level

#: The one owner of the default confidence level, and the constant it owns.
_CONFIDENCE_OWNER = ("storagebench/findings.py", "CONFIDENCE")
#: The other 0.95s, each a named constant of its owner module: not a confidence level, so they stay when it changes.
_OTHER_095 = {("storagebench/stats/saturation.py", "PLATEAU_FRACTION"),  # share of the best IOPS: the plateau
              ("storagebench/stats/agreement.py", "LOA_COVERAGE")}  # share of pairs inside the limits of agreement
#: Named constants whose text states a level on purpose (a fact measured at 95%, not a default).
_TEXT_95 = {("storagebench/stats/_common.py", "BCA_COVERAGE_NOTE")}
_LEVEL_TEXT = re.compile(r"(?<![\d.])(0\.95|95 ?%)(?!\d)")


def _code_sources(root: Path) -> list[tuple[str, str]]:
    """``(where, source)`` of every module of storagebench/ and every code cell of notebooks/."""
    out = [(str(p.relative_to(root)), p.read_text()) for p in sorted((root / "storagebench").rglob("*.py"))]
    for nb in sorted((root / "notebooks").rglob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        out += [(f"{nb.relative_to(root)} cell {i}", "".join(c["source"])) for i, c in enumerate(cells)
                if c["cell_type"] == "code"]
    return out


def _confidence_literals(where: str, source: str) -> list[str]:
    """Where ``source`` states a confidence level of its own: a literal 0.95 (or ``"95%"`` in a message) outside
    the named constants above, a ``confidence``/``ci`` default that is a number, and a ``x or 0.95`` fallback."""
    tree = ast.parse(source)
    named: dict[int, str] = {}  # id of a constant node -> the module-level name it is assigned to
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node in getattr(tree, "body", []):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and node.value is not None:
                    for sub in ast.walk(node.value):
                        named[id(sub)] = t.id
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            docstrings.add(id(node.body[0].value))
    path = where.split(" cell ")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            pos = node.posonlyargs + node.args
            pairs = list(zip(pos[len(pos) - len(node.defaults):], node.defaults, strict=True)) + [
                (a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
            found += [f"{where}:{d.lineno}: {a.arg}={ast.unparse(d)}" for a, d in pairs
                      if a.arg in ("confidence", "ci") and isinstance(d, ast.Constant)
                      and isinstance(d.value, (int, float)) and not isinstance(d.value, bool)]
        if not isinstance(node, ast.Constant) or id(node) in docstrings:
            continue
        owner = (path, named.get(id(node)))
        if type(node.value) is float and node.value == 0.95 and owner not in {_CONFIDENCE_OWNER, *_OTHER_095}:
            found.append(f"{where}:{node.lineno}: literal 0.95" + (f" ({owner[1]} = ...)" if owner[1] else ""))
        if isinstance(node.value, str) and _LEVEL_TEXT.search(node.value) and owner not in _TEXT_95:
            found.append(f"{where}:{node.lineno}: {node.value!r} states a level: format it from the confidence")
    if "= 0.95" in source and where.endswith(("cell 1", "cell 0")):  # a notebook's parameters (literal defaults)
        found += [f"{where}: {line.strip()}" for line in source.splitlines() if re.search(r"=\s*0\.95\b", line)]
    return found


def test_the_default_confidence_level_has_one_owner():
    """Issue 19: the default confidence level is one edit. No module of storagebench/ and no notebook states a
    level of its own (a literal 0.95, a ``confidence=0.95`` or ``ci=0.95`` default, ``ci or 0.95``, a "95%" in a
    message): they read :data:`storagebench.findings.CONFIDENCE`. The other 0.95s are named constants."""
    found = [f for where, source in _code_sources(ROOT) for f in _confidence_literals(where, source)]
    assert not found, "\n".join(found)


def test_the_confidence_scan_is_not_vacuous():
    """The scan above catches each way a level used to be written, and lets the named constants be."""
    bad = ('def f(x, *, confidence: float = 0.95):\n    return x\n\n'
           'def g(x, ci=0.9):\n    return per_point(x, ci=ci or 0.95)\n\n'
           'def h(level):\n    return f"{level} (95% CI)"\n')
    found = _confidence_literals("storagebench/x.py", bad)
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "' (95% CI)' states a level: format it from the confidence", "ci=0.9", "confidence=0.95",
        "literal 0.95", "literal 0.95"]  # the default of f, the fallback of g
    assert _confidence_literals("storagebench/stats/saturation.py", "PLATEAU_FRACTION = 0.95\n") == []
    assert _confidence_literals("storagebench/stats/sweep.py", "PLATEAU_FRACTION = 0.95\n")  # not its owner
    assert _confidence_literals("notebooks/a.ipynb cell 1", 'confidence: float = 0.95  # level\n')
    assert _confidence_literals("notebooks/a.ipynb cell 1", 'confidence: float | None = None  # level\n') == []


_ONE_EDIT = r"""
import inspect, json, pkgutil, importlib, sys
import storagebench
from storagebench import findings, stats, plots, studies, aggregate, tables
from storagebench.findings import CONFIDENCE, confidence_level, fmt_ci
defaults, other = {}, {}
for mod in pkgutil.walk_packages(storagebench.__path__, "storagebench."):
    if mod.name.endswith("__main__"):
        continue
    m = importlib.import_module(mod.name)
    for name, obj in vars(m).items():
        f = inspect.unwrap(obj) if callable(obj) else None
        if inspect.isfunction(f) and f.__module__ == m.__name__:
            for p in inspect.signature(f).parameters.values():
                if p.name == "confidence" and p.default is not inspect.Parameter.empty:
                    (defaults if p.default is not None else other)[f"{m.__name__}.{name}"] = p.default
est = stats.mean_ci([10.0, 11.0, 12.0, 13.0])
print(json.dumps({"CONFIDENCE": CONFIDENCE, "defaults": defaults, "none": sorted(other),
                  "notebook": confidence_level(None), "mean_ci": est.confidence, "fmt_ci": fmt_ci(1, 2),
                  "stats_compare": inspect.signature(stats.compare).parameters["confidence"].default}))
"""


def test_the_default_confidence_level_is_one_edit(tmp_path):
    """Change CONFIDENCE in findings.py of a copy of the package, and nothing else: every ``confidence``
    default of every function, the notebooks' level (``confidence_level(None)``), the numbers computed and
    the words written follow, and so does the CLI's ``--confidence``."""
    shutil.copytree(ROOT / "storagebench", tmp_path / "storagebench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    owner = tmp_path / "storagebench" / "findings.py"
    text = owner.read_text()
    assert text.count("\nCONFIDENCE = 0.95\n") == 1
    owner.write_text(text.replace("\nCONFIDENCE = 0.95\n", "\nCONFIDENCE = 0.9\n"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "MPLBACKEND": "Agg"}
    res = subprocess.run([sys.executable, "-c", _ONE_EDIT], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["CONFIDENCE"] == 0.9 and got["notebook"] == 0.9 and got["mean_ci"] == 0.9
    assert got["fmt_ci"] == "90% CI 1 to 2" and got["stats_compare"] == 0.9
    planning = {f"storagebench.stats.equivalence.{f}": 0.8 for f in ("cv_upper_bound", "pilot_cv")}  # Browne 1995
    assert {k: v for k, v in got["defaults"].items() if v != 0.9} == planning, got["defaults"]
    assert len(got["defaults"]) >= 30
    assert "storagebench.plots._sweep.metric_vs" in got["defaults"]  # plots' old ci= is confidence= too
    assert "storagebench.studies.analyse" in got["defaults"] and "storagebench.stats.points.per_point" in got["defaults"]
    for command in ("compare", "testbed"):
        help_text = subprocess.run([sys.executable, "-m", "storagebench", command, "-h"], capture_output=True,
                                   text=True, env={**env, "COLUMNS": "200"}, cwd=tmp_path, timeout=120).stdout
        assert re.search(r"--confidence\b.*\[default: 0\.9\]", help_text), help_text

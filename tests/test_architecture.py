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


def _table_rows() -> dict[str, str]:
    """{first column: the whole row} of docs/ARCHITECTURE.md's module table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Modules and their public API", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", section, re.M)}


def _is_study_plugin(module: Path) -> bool:
    """A testbed study (``studies/<name>.py``): found by the registry, one module + one YAML and no other edit
    (issue 19), so the docs name the registry, not each study."""
    return module.parent.name == "studies" and not module.name.startswith("_")


def test_architecture_names_every_module_of_every_package():
    """Every module of every package, private ones included, is named in the module table: in a row of its
    own (``p/m.py``) or in a row of its package (``p/`` or ``p/x.py``) as `m`, `m.py` or ``p/m.py``. The
    testbed study modules are the one exception (the registry finds them)."""
    rows = _table_rows()
    missing = []
    for package in sorted(d for d in (ROOT / "storagebench").iterdir() if (d / "__init__.py").is_file()):
        text = " ".join(row for key, row in rows.items() if key.startswith(f"{package.name}/"))
        for module in sorted(package.glob("*.py")):
            if module.name == "__init__.py" or _is_study_plugin(module):
                continue
            names = {f"`{module.stem}`", f"`{module.name}`", f"{package.name}/{module.name}"}
            if not any(n in text for n in names):
                missing.append(f"{package.name}/{module.name}")
    assert not missing, f"modules not named in docs/ARCHITECTURE.md's module table: {missing}"


def test_architecture_private_list_is_every_private_module():
    """"Public and private modules" lists every private top-level module, and only those."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    line = next(x for x in text.splitlines() if "Private: `_" in x)
    listed = re.findall(r"`(_\w+)`", line.split("Private:", 1)[1].split(". ", 1)[0])
    code = sorted(p.stem for p in (ROOT / "storagebench").glob("_*.py") if not p.stem.startswith("__"))
    assert sorted(listed) == code


def test_architecture_entry_points_are_defined_where_the_table_says():
    """An entry point the module table writes as a call (`name(...)`) is defined in the row's module (for a
    package row, in one of the package's modules)."""
    package = ROOT / "storagebench"
    wrong = []
    for key, row in _table_rows().items():
        path = package / key
        modules = sorted(path.rglob("*.py")) if key.endswith("/") else [path]
        defined = set().union(*(_top_level_names(m) for m in modules))
        entries = re.split(r"(?<!\\)\|", row)[3]
        wrong += [f"{key}: {name}" for name in re.findall(r"`([A-Za-z_]\w*)\(", entries) if name not in defined]
    assert not wrong, f"docs/ARCHITECTURE.md names entry points their module does not define: {wrong}"


#: Dotted words that are not names of the package: abbreviations, a pyproject table, a field of provenance.json.
_NOT_MODULES = frozenset({"i", "e", "tool", "set_up"})
#: File extensions: ``point.json``, ``job.fio``, fio's ``stat.c``... are files, not modules (a ``.py`` is checked).
_FILE_EXTENSIONS = frozenset({"json", "fio", "txt", "html", "toml", "yaml", "yml", "c", "h", "parquet", "ipynb",
                              "lock", "md", "log", "csv", "tsv", "sock", "sh", "xml", "icf", "cfg", "ini", "png",
                              "svg"})


def _top_level_names(path: Path) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments, imports, ``__all__``)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in getattr(node, "targets", [])):
                names |= {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
    return names


def _resolve(dotted: str, package: Path) -> str | None:
    """Why ``dotted`` (``_study.Study``, ``fio.hosts.host_label``, ``storagebench.run_study``) names nothing of
    the package, or None when it does: modules and packages are followed down, then the next word must be
    a name the module defines (what follows it is that object's attribute, not checked)."""
    parts = dotted.split(".")
    if parts[0] in ("storagebench", "sb"):
        parts = parts[1:]
    here = package
    for i, part in enumerate(parts):
        if here.is_dir() and (here / part / "__init__.py").is_file():
            here = here / part
        elif here.is_dir() and (here / f"{part}.py").is_file():
            here = here / f"{part}.py"
        elif i == 0 and here == package and part not in _top_level_names(package / "__init__.py"):
            return f"no module storagebench.{part}"
        else:
            module = here / "__init__.py" if here.is_dir() else here
            if part not in _top_level_names(module):
                return f"{module.relative_to(package.parent)} defines no {part!r}"
            return None
    return None


def _stale_module_names(text: str, root: Path) -> list[str]:
    """The module-like names of a Markdown text (prose, tables and code-block diagrams) that name nothing:
    dotted names ``word.word`` whose first word is not a file (``point.json``) or an abbreviation, private
    names ```_word``` (must be a module of the package, at any depth), and paths ``pkg/module.py`` /
    ``module.py`` (a file under storagebench/ or the repository)."""
    package = root / "storagebench"
    stems = {p.stem for p in package.rglob("*.py")}
    files = {p.name for p in package.rglob("*.py")}
    problems = []
    for dotted in sorted(set(re.findall(r"(?<![\w./<-])([a-z_][a-z0-9_]*(?:\.[A-Za-z_]\w*)+)(?![\w/-])", text))):
        parts = dotted.split(".")
        if parts[-1] in _FILE_EXTENSIONS or parts[0] in _NOT_MODULES or parts[0] in sys.stdlib_module_names:
            continue  # a file, an abbreviation, or the standard library (``dataclasses.replace``)
        if parts[-1] == "py":
            if "/" not in dotted and dotted not in files and not (root / dotted).is_file():
                problems.append(f"{dotted}: no such file")
            continue
        why = _resolve(dotted, package)
        if why:
            problems.append(f"{dotted}: {why}")
    for name in sorted(set(re.findall(r"`(_[a-z][a-z0-9_]*)(?:\.py)?[`.(]", text))):
        if name not in stems:
            problems.append(f"`{name}`: no module of that name")
    for path in sorted(set(re.findall(r"(?<![\w./-])((?:\w+/)+\w+\.(?:py|ipynb|sh))\b", text))):
        if not (root / path).is_file() and not (package / path).is_file():
            problems.append(f"{path}: no such file")
    return problems


def test_architecture_names_only_modules_that_exist():
    """Every module-like name in docs/ARCHITECTURE.md, its diagrams included, exists in the code."""
    problems = _stale_module_names((ROOT / "docs" / "ARCHITECTURE.md").read_text(), ROOT)
    assert not problems, f"docs/ARCHITECTURE.md names what does not exist: {problems}"


def test_the_stale_name_check_finds_the_old_diagram():
    """The check is not vacuous: the first diagram as it was (modules renamed since), a function that is gone,
    a private module that is gone and a file that is gone are all caught; real names pass."""
    old = """
data/studies/*.yaml ─► study.Study ─expand()─► study.RunPlan
                               runner.run_study (local fio)
                                                  │ per run, written atomically by store.StudyStore:
                                    ingest.ingest_study / ingest.no_such_reader
`_runner` `_no_such_module`, `fio/no_such.py`, point.json, i.e. `_histogram.py`, fio/_watchdog.py
"""
    assert _stale_module_names(old, ROOT) == [
        "ingest.no_such_reader: storagebench/ingest/__init__.py defines no 'no_such_reader'",
        "runner.run_study: no module storagebench.runner",
        "store.StudyStore: no module storagebench.store",
        "study.RunPlan: no module storagebench.study",
        "study.Study: no module storagebench.study",
        "`_no_such_module`: no module of that name",
        "fio/no_such.py: no such file",
    ]
    good = "_study.Study, _plan.RunPlan, storagebench.aggregate.fairness, sb.stats, fio.hosts.host_label, `_base.py`"
    assert _stale_module_names(good, ROOT) == []


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


#: vulture's kinds of dead definition (reported at 60 % confidence: a name nothing uses); other findings count
#: from 80 % (unused imports, unreachable code, unused arguments and locals). Left out: class-level names at
#: 60 %, which are dataclass and pydantic fields or attributes a library reads (read by ``asdict``/by name).
_DEAD_KINDS = re.compile(r": unused (function|method|class|property) '|\((8\d|9\d|100)% confidence\)")


def _dead_code(package: str, users: list[Path], cwd: Path) -> list[str]:
    """vulture's findings in ``package`` (a path under ``cwd``), with ``users`` (files or directories) as the
    code that uses its names; vulture's settings are ``[tool.vulture]`` of ``cwd/pyproject.toml``."""
    res = subprocess.run([sys.executable, "-m", "vulture", package, *map(str, users)], cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode in (0, 3), res.stderr  # 3: dead code found
    return [line for line in res.stdout.splitlines() if line.startswith(package) and _DEAD_KINDS.search(line)]


def _notebook_code(tmp_path: Path) -> Path:
    """The code cells of every notebook as ``.py`` files (magics and shell lines left out): their calls use names."""
    out = tmp_path / "notebook_code"
    out.mkdir()
    for i, nb in enumerate(sorted((ROOT / "notebooks").rglob("*.ipynb"))):
        cells = json.loads(nb.read_text())["cells"]
        code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        lines = [x for x in code.splitlines() if not x.lstrip().startswith(("%", "!"))]
        (out / f"nb{i}_{nb.stem}.py").write_text("\n".join(lines) + "\n")
    return out


def test_no_dead_code(tmp_path):
    """Issue 19: dead code stays out. Every function, method, class and property of the package is used by the
    package, the tests, the runners, the benchmarks or a notebook (framework hooks: pyproject's
    ``[tool.vulture]``; public names kept for users: tests/vulture_whitelist.py, each with its reason)."""
    users = [ROOT / "tests", ROOT / "runners", ROOT / "benchmarks", ROOT / "conftest.py", _notebook_code(tmp_path)]
    dead = _dead_code("storagebench", users, ROOT)
    assert not dead, "dead code (remove it, or whitelist a public name in tests/vulture_whitelist.py):\n" + \
        "\n".join(dead)


def test_the_dead_code_check_finds_a_dead_function(tmp_path):
    """The check is not vacuous: with the repository's vulture settings, an unused function, method and import
    are found; a used one, a pydantic validator and a typer command are not."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    pkg = tmp_path / "storagebench"
    pkg.mkdir()
    (pkg / "mod.py").write_text('''import os
from pydantic import BaseModel, field_validator


def used():
    return 1


def never_called():
    return 2


class Spec(BaseModel):
    x: int = 0

    @field_validator("x")
    @classmethod
    def _x_ok(cls, v):
        return v if cls else None

    def unused_method(self):
        return used()


@_command("run")
def run_cmd():
    return Spec()
''')
    found = _dead_code("storagebench", [], tmp_path)
    assert [line.split(": ", 1)[1] for line in found] == [
        "unused import 'os' (90% confidence)", "unused function 'never_called' (60% confidence)",
        "unused method 'unused_method' (60% confidence)"]


# -- size rules (issue 19: lean and legible) ------------------------------------------------------------------

#: Modules held to the size rules below (paths under storagebench/): every module of the package, so a new module is
#: held without a line here (issue 19 item 5: "no module over 700 lines, no function over 80 lines of code").
LEAN_MODULES = tuple(sorted(str(p.relative_to(ROOT / "storagebench")) for p in (ROOT / "storagebench").rglob("*.py")))
MAX_PARAMETERS = 6  # per function, ``self``/``cls`` of a method not counted
MAX_FUNCTION_LINES = 80  # lines of code of a function: its span (``end_lineno - lineno + 1``) less its docstring
MAX_MODULE_LINES = 700
#: Public entry points that users call by keyword and that keep their keywords: they may take more keyword-only
#: parameters (their positional parameters still count against the limit). Each one is named, never a pattern.
KEYWORD_ENTRY_POINTS = {
    "_runner.py": {"run_study"},  # storagebench.run_study(study, target=..., out_dir=..., ...), the public API
    "_runone.py": {"run_point"},  # _runner.run_point(point, study, store, target=..., ...), one run of a plan
    "_runfio.py": {"run_fio"},  # _runner.run_fio(jobfile, output, stderr, fio_bin=..., ...), one fio process
    "fio/process.py": {"spawn"},  # fio.process.spawn(cmd, marker=..., stdout=..., record_path=..., ...)
    "servers.py": {"start_test_hosts", "fio_servers"},  # servers.fio_servers(n, mode, workdir=..., port=..., ...)
    "_safety.py": {"check_run", "check_point_hosts"},  # check_run(target, options, allow_devices=..., cwd=..., ...)
    "scaling.py": {"measure_scaling"},  # sb.measure_scaling(study, hosts, out_dir, test_hosts=..., runtime=..., ...)
    "_clientserver.py": {"run_clients"},  # run_clients(jobfile, hosts, output, stderr, timeout_s, fio_bin, check_version=...)
    "publish.py": {"publish_report"},  # sb.publish_report(study_dir, notebooks, parameters, output=..., ...)
    "_pubexec.py": {"execute_notebook"},  # sb.execute_notebook(notebook, output_path, parameters, kernel_name=..., ...)
    "cli.py": {"run_cmd", "compare_cmd"},  # typer commands: typer passes every option by name
    "_clitools.py": {"testbed_cmd", "scaling_cmd", "calibrate_cmd"},  # typer commands, as above
    "stats/comparison.py": {"compare"},  # stats.compare(df, factor, baseline, metric, by=..., pair_on=..., ...)
    "stats/saturation.py": {"find_knee", "recommend_parameters"},  # find_knee(df, x, y, curve=..., ...)
    "studies/_base.py": {"compare_arms", "compare_question", "tost_plans", "finish"},  # compare_arms(data, factor, baseline, metric, by=...)
    "stats/crosstool.py": {"cross_tool"},  # stats.cross_tool(runs, baseline=..., tool_col=..., metric=..., ...)
    "stats/sweep.py": {"rotational_findings"},  # stats.sweep.rotational_findings(table, rpm=..., device=..., ...)
    "plots/_sweep.py": {"metric_vs", "latency_vs_iops", "heatmap", "heatmap_grid", "clat_cdf"},  # plots.heatmap(runs, x=...)
    "plots/_compare.py": {"ratio_forest", "bland_altman_plot"},  # plots.ratio_forest(comparison, group=..., ...)
    "aggregate.py": {"scaling_summary", "scaling_findings"},  # scaling_findings(summary, saturation, x=..., ...)
    "stats/claims.py": {"claim_verdicts"},  # stats.claims.claim_verdicts(claims, comparison, unit=..., ...)
    "stats/equivalence.py": {"tost_plan", "tost_sample_size"},  # stats.tost_plan(cv, margin, ratio, alpha, power, df=..., ...)
    "stats/models.py": {"fit_mixed"},
    "calibrate.py": {"calibrate"},  # calibrate.calibrate(out, quick=..., comparisons=..., known=..., report=...)  # stats.fit_mixed(df, formula, groups=..., ...)
    "stats/ratio.py": {"ratio_bca"},  # ratio_bca(x_other, x_base, confidence, n_boot, rng, estimand=..., paired=...)
    "stats/steady.py": {"steady_state_timeseries"},  # stats.steady_state_timeseries(ts, metric=..., window=..., ...)
    "stats/verdicts.py": {"verdict", "verdict_findings", "verdict_summary", "interaction"},  # stats.verdict(t, unit=...)
    "studies/__init__.py": {"run"},  # studies.run(name, quick=..., ...)
    "_batch.py": {"run_batch"},  # sb.run_batch(notebook, sets, out_dir, jobs=..., ...)
    "_histogram.py": {"grouped_percentiles"},  # grouped_percentiles(groups, bins, counts, n, percentiles, totals=...)
    "_inputs.py": {"read_input"},  # read_input(path, max_bytes=..., what=..., error=..., root=..., ...)
    "show.py": {"figure_html"},  # show.figure_html(fig, caption, alt=..., provenance=..., ...)
    "tables.py": {"table"},  # tables.table(df, labels=..., confidence=..., caption=..., ...)
}


def size_problems(source: str, name: str, entry_points: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What breaks the size rules in one module's ``source``: more than ``MAX_MODULE_LINES`` lines, a function of
    more than ``MAX_PARAMETERS`` parameters (for ``entry_points``: positional ones) or of more than
    ``MAX_FUNCTION_LINES`` lines of code. Nested functions and methods are checked like the others."""
    problems = []
    n_lines = len(source.splitlines())
    if n_lines > MAX_MODULE_LINES:
        problems.append(f"{name}: {n_lines} lines (at most {MAX_MODULE_LINES})")
    tree = ast.parse(source)
    methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
               and not any(ast.unparse(d) == "staticmethod" for d in f.decorator_list)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        positional = [*a.posonlyargs, *a.args][1 if id(node) in methods else 0:]
        params = [*positional, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
        counted = positional if node.name in entry_points else params
        if len(counted) > MAX_PARAMETERS:
            problems.append(f"{name}:{node.lineno} {node.name}() takes {len(counted)} parameters "
                            f"(at most {MAX_PARAMETERS}): pass what the calls share as one frozen context")
        lines = node.end_lineno - node.lineno + 1
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines -= first.end_lineno - first.lineno + 1
        if lines > MAX_FUNCTION_LINES:
            problems.append(f"{name}:{node.lineno} {node.name}() has {lines} lines of code (at most "
                            f"{MAX_FUNCTION_LINES})")
    return problems


def test_the_lean_modules_keep_the_size_rules():
    """Issue 19 item 5: in every module no function takes more than 6 parameters (one frozen run context instead
    of dicts and long positional lists; public entry points users call by keyword keep their keywords and are
    named in KEYWORD_ENTRY_POINTS) or runs over 80 lines of code, and no module is over 700 lines."""
    problems = []
    for module in LEAN_MODULES:
        path = ROOT / "storagebench" / module
        problems += size_problems(path.read_text(), module, KEYWORD_ENTRY_POINTS.get(module, set()))
    assert not problems, problems


def test_every_module_is_held_to_the_size_rules():
    """No module escapes the rules by not being listed: the runner's parts and every other module are held, and
    every keyword entry point names a function of a module that exists."""
    runner = {p.name for p in (ROOT / "storagebench").glob("_run*.py")}
    assert runner and runner <= set(LEAN_MODULES), sorted(runner - set(LEAN_MODULES))
    assert len(LEAN_MODULES) > 100 and "publish.py" in LEAN_MODULES and "stats/comparison.py" in LEAN_MODULES
    assert set(KEYWORD_ENTRY_POINTS) <= set(LEAN_MODULES)


def test_the_size_check_finds_long_signatures_long_functions_and_large_modules():
    """The check is not vacuous: each rule catches its breach, at one past the limit and not at the limit."""
    six = "def f(a, b, c, d, e, *, g):\n    return a\n"
    seven = "def f(a, b, c, d, e, g, *args):\n    return a\n"
    assert size_problems(six, "m.py") == []
    assert size_problems(seven, "m.py") == [
        "m.py:1 f() takes 7 parameters (at most 6): pass what the calls share as one frozen context"]
    method = "class C:\n    def f(self, a, b, c, d, e, g):\n        return a\n"
    assert size_problems(method, "m.py") == []  # self is not counted
    nested = "def outer():\n    def inner(a, b, c, d, e, g, h, **kw):\n        return a\n    return inner\n"
    assert [p.split(" takes")[0] for p in size_problems(nested, "m.py")] == ["m.py:2 inner()"]
    entry = "def run(a, *, b, c, d, e, f, g, h):\n    return a\n"
    assert size_problems(entry, "m.py", {"run"}) == []  # keyword-only parameters of a named entry point
    assert size_problems("def run(a, b, c, d, e, f, g):\n    pass\n", "m.py", {"run"}) != []
    body = "\n".join(f"    x{i} = {i}" for i in range(78))
    doc = '    """A docstring\n    of\n    four lines."""\n'
    at_limit = f"def f():\n{doc}{body}\n    return x0\n"  # 1 + 78 + 1 lines of code: the docstring is not counted
    assert size_problems(at_limit, "m.py") == []
    over = f"def f():\n{doc}{body}\n    x = 1\n    return x0\n"
    assert size_problems(over, "m.py") == ["m.py:1 f() has 81 lines of code (at most 80)"]
    big = "x = 1\n" * (MAX_MODULE_LINES + 1)
    assert size_problems(big, "big.py") == [f"big.py: {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES})"]
    assert size_problems("x = 1\n" * MAX_MODULE_LINES, "ok.py") == []


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

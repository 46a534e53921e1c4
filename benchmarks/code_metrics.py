"""Code metrics of a checkout (issues 9 and 19): size, surface, long functions and signatures, local imports.

Usage: ``python benchmarks/code_metrics.py [REPO_ROOT]`` (default: the current directory). Counts, with ``ast``:

* total lines and modules of ``storagebench/`` (every ``.py`` file, the vendored fio table included, as
  issue 19 counted them), and the five largest modules (lines);
* public names: the sum of every module's ``__all__`` (and the number of modules), and the same over the
  public modules only (no ``_`` in the module's path below ``storagebench/``, ``__init__`` aside), where a
  public module without ``__all__`` counts its top-level functions and classes not starting with ``_``, and a
  name a public module re-exports from another public module counts once (at its owner);
* the names ``storagebench.stats`` exports (its ``__all__``);
* functions over 80 lines, counted two ways: from ``def`` to the last line (issue 19's count), and in lines
  of code (the docstring, blank lines and comment-only lines left out: issue 19's rule "no function over 80
  lines of code"), with the longest ones named;
* the largest parameter counts (every parameter: positional, keyword-only, ``*args``, ``**kw``; ``self`` and
  ``cls`` included), with the functions named;
* imports inside functions (each import statement once, however deeply nested);
* names starting with ``_`` imported from another storagebench module.

The vendored fio option table (``fio/_fio333.py``) is left out. Not a timed benchmark: it counts code.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _all_names(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


def _is_public(module: str) -> bool:
    return module.startswith("storagebench") and not any(p.startswith("_") for p in module.split("."))


def _reexports(tree: ast.Module, path: Path, package: Path) -> dict[str, str]:
    """Names a module imports from another storagebench module -> that module's dotted name."""
    parts = ["storagebench", *path.relative_to(package).with_suffix("").parts]
    here = parts[:-1]  # the package a relative import starts from (for __init__: the package itself)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                out[alias.asname or alias.name] = module
    return out


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """Lines of code of a function: ``def`` to its last line, without its docstring, blank or comment-only lines."""
    body = node.body
    doc = range(0)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        doc = range(body[0].lineno, body[0].end_lineno + 1)
    return sum(1 for i in range(node.lineno, node.end_lineno + 1)
               if i not in doc and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def _n_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def main(root: Path) -> None:
    package = root / "storagebench"
    largest, public, modules, inner, private = [], 0, 0, 0, 0
    public_api, public_modules = 0, 0
    total_lines, all_modules, stats_names = 0, 0, 0
    long_def, long_code, parameters = [], [], []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        total_lines += len(lines)
        all_modules += 1
        if "_fio333" in path.name:
            continue
        tree = ast.parse(source)
        where = str(path.relative_to(package))
        if where == "stats/__init__.py":
            stats_names = len(_all_names(tree))
        for node in ast.walk(tree):
            if isinstance(node, _FUNCTIONS):
                name = f"{where}:{node.name}"
                if node.end_lineno - node.lineno + 1 > 80:
                    long_def.append((node.end_lineno - node.lineno + 1, name))
                if _code_lines(node, lines) > 80:
                    long_code.append((_code_lines(node, lines), name))
                parameters.append((_n_parameters(node), name))
        largest.append((len(lines), str(path.relative_to(root))))
        public += len(_all_names(tree))
        modules += 1
        parts = path.relative_to(package).with_suffix("").parts
        if not any(p.startswith("_") and p != "__init__" for p in parts):
            public_modules += 1
            names = _all_names(tree) or [
                n.name for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_")
            ]
            reexported = _reexports(tree, path, package)
            public_api += sum(not _is_public(reexported.get(n, "_")) for n in names)
        in_functions = {id(sub) for node in ast.walk(tree) if isinstance(node, _FUNCTIONS)
                        for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom))}
        inner += len(in_functions)
        for node in ast.walk(tree):
            # ``from . import _runner`` imports a private module of the same package, not a private name
            ours = isinstance(node, ast.ImportFrom) and node.module is not None and (
                node.level or node.module.startswith("storagebench"))
            if ours:
                private += sum(a.name.startswith("_") and not a.name.startswith("__") for a in node.names)
    largest.sort(reverse=True)
    for found in (long_def, long_code, parameters):
        found.sort(key=lambda x: (-x[0], x[1]))
    print("total lines:", total_lines, "modules:", all_modules)
    print("largest:", largest[:5])
    print("public names (sum of __all__):", public, "modules:", modules)
    print("public names of public modules:", public_api, "public modules:", public_modules)
    print("stats names (stats.__all__):", stats_names)
    print("functions over 80 lines (def to end):", len(long_def))
    print("functions over 80 lines of code (no docstring, blank or comment lines):", len(long_code), long_code[:5])
    print("largest parameter counts:", parameters[:5])
    print("imports inside functions:", inner)
    print("imports of private names from other modules:", private)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))

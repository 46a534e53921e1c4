"""Issue 9 code metrics of a checkout: largest modules, public names, imports inside functions, private imports.

Usage: ``python benchmarks/code_metrics.py [REPO_ROOT]`` (default: the current directory). Counts, with ``ast``:

* the five largest modules of ``storagebench/`` (lines);
* public names: the sum of every module's ``__all__`` (and the number of modules), and the same over the
  public modules only (no ``_`` in the module's path below ``storagebench/``, ``__init__`` aside), where a
  public module without ``__all__`` counts its top-level functions and classes not starting with ``_``, and a
  name a public module re-exports from another public module counts once (at its owner);
* the names of ``storagebench.stats`` (its ``__all__``; issue 19: at most 40);
* imports inside functions (an import in a nested function counts once per enclosing function);
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


def main(root: Path) -> None:
    package = root / "storagebench"
    largest, public, modules, inner, private = [], 0, 0, 0, 0
    public_api, public_modules = 0, 0
    for path in sorted(package.rglob("*.py")):
        if "_fio333" in path.name:
            continue
        source = path.read_text()
        tree = ast.parse(source)
        largest.append((len(source.splitlines()), str(path.relative_to(root))))
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
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner += sum(isinstance(sub, (ast.Import, ast.ImportFrom)) for sub in ast.walk(node))
            # ``from . import _runner`` imports a private module of the same package, not a private name
            ours = isinstance(node, ast.ImportFrom) and node.module is not None and (
                node.level or node.module.startswith("storagebench"))
            if ours:
                private += sum(a.name.startswith("_") and not a.name.startswith("__") for a in node.names)
    largest.sort(reverse=True)
    print("largest:", largest[:5])
    print("public names (sum of __all__):", public, "modules:", modules)
    print("public names of public modules:", public_api, "public modules:", public_modules)
    print("stats names (storagebench.stats.__all__):", len(_all_names(ast.parse((package / "stats" / "__init__.py").read_text()))))
    print("imports inside functions:", inner)
    print("imports of private names from other modules:", private)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))

"""Issue 9 code metrics of a checkout: largest modules, public names, imports inside functions, private imports.

Usage: ``python benchmarks/code_metrics.py [REPO_ROOT]`` (default: the current directory). Counts, with ``ast``:

* the five largest modules of ``storagebench/`` (lines);
* public names: the sum of every module's ``__all__`` (and the number of modules);
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


def main(root: Path) -> None:
    package = root / "storagebench"
    largest, public, modules, inner, private = [], 0, 0, 0, 0
    for path in sorted(package.rglob("*.py")):
        if "_fio333" in path.name:
            continue
        source = path.read_text()
        tree = ast.parse(source)
        largest.append((len(source.splitlines()), str(path.relative_to(root))))
        public += len(_all_names(tree))
        modules += 1
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner += sum(isinstance(sub, (ast.Import, ast.ImportFrom)) for sub in ast.walk(node))
            ours = isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("storagebench"))
            if ours:
                private += sum(a.name.startswith("_") and not a.name.startswith("__") for a in node.names)
    largest.sort(reverse=True)
    print("largest:", largest[:5])
    print("public names (sum of __all__):", public, "modules:", modules)
    print("imports inside functions:", inner)
    print("imports of private names from other modules:", private)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))

"""The public API: ``storagebench.__all__`` is the documented list, every name resolves, and
``import storagebench`` loads none of the heavy sub-APIs."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT

import storagebench


def _documented() -> tuple[list[str], list[str]]:
    """(names of the table, sub-APIs) of docs/ARCHITECTURE.md's "The public API" section."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## The public API", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("group", "---"):
            names += re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[1])
    subs = section.split("Sub-APIs imported on first use:", 1)[1].split("(", 1)[0]
    return names, re.findall(r"`([a-z_]+)`", subs)


def test_all_is_the_documented_list():
    names, subs = _documented()
    assert len(names) == len(set(names)), "a name is documented twice"
    assert sorted(names) == sorted(storagebench.__all__)
    assert len(storagebench.__all__) == len(set(storagebench.__all__))
    assert 30 <= len(storagebench.__all__) <= 40
    assert sorted(subs) == sorted(storagebench.SUBMODULES)


def test_every_public_name_and_sub_api_resolves():
    missing = [n for n in storagebench.__all__ if getattr(storagebench, n, None) is None]
    assert missing == []
    for name in storagebench.SUBMODULES:
        assert getattr(storagebench, name).__name__ == f"storagebench.{name}"
    assert "stats" in dir(storagebench)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    try:
        storagebench.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("storagebench.no_such_name resolved")


def test_import_does_not_load_the_heavy_sub_apis():
    heavy = ["matplotlib", "seaborn", "scipy", "statsmodels", "papermill", "nbconvert", "pandas", "pyarrow",
             "storagebench.stats", "storagebench.plots", "storagebench._runner", "storagebench.ingest"]
    code = f"import sys, storagebench; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_names_come_from_their_owner_and_match_the_type_checking_imports():
    """Each name of ``__all__`` that is not imported eagerly is in ``_LAZY``, resolves to the owner's own
    object, and the ``if TYPE_CHECKING:`` block imports the same name from the same module."""
    import ast
    import importlib

    tree = ast.parse((ROOT / "storagebench" / "__init__.py").read_text())
    checked = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                for alias in imp.names:
                    checked[alias.name] = "." * imp.level + imp.module
    assert checked == storagebench._LAZY
    eager = set(vars(storagebench)) - set(storagebench._LAZY)
    assert set(storagebench.__all__) <= eager | set(storagebench._LAZY)
    for name, owner in storagebench._LAZY.items():
        assert name in storagebench.__all__, f"{name} is loaded lazily but not public"
        assert getattr(storagebench, name) is getattr(importlib.import_module(owner, "storagebench"), name)


def test_the_version_is_written_once():
    from storagebench._version import __version__

    assert storagebench.__version__ == __version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'version = { attr = "storagebench._version.__version__" }' in pyproject
    assert not re.search(r'^version = "', pyproject, re.M)


def _public_modules() -> list:
    """Every public module of storagebench (no ``_`` part in its dotted name), imported."""
    import importlib
    import pkgutil

    names = ["storagebench"] + [m.name for m in pkgutil.walk_packages(storagebench.__path__, "storagebench.")
                                if not any(p.startswith("_") for p in m.name.split(".")[1:])]
    return [importlib.import_module(n) for n in names]


def test_stats_is_a_curated_surface_and_no_function_hides_its_module():
    """Issue 19: ``stats`` exports at most 40 names, each resolving; and in every package a submodule is
    reached by its name (``stats.compare`` is the function, its module ``stats.comparison``)."""
    import importlib
    import pkgutil
    import types

    from storagebench import stats

    assert len(stats.__all__) <= 40 and len(set(stats.__all__)) == len(stats.__all__)
    assert all(callable(getattr(stats, n)) for n in stats.__all__)
    hidden = []
    for pkg in (m for m in _public_modules() if hasattr(m, "__path__")):
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name == "__main__":
                continue
            sub = importlib.import_module(f"{pkg.__name__}.{info.name}")
            if getattr(pkg, info.name) is not sub:
                hidden.append(f"{pkg.__name__}.{info.name} is {type(getattr(pkg, info.name)).__name__}")
    assert hidden == []
    assert isinstance(stats.comparison, types.ModuleType) and isinstance(stats.verdicts, types.ModuleType)
    assert stats.compare is stats.comparison.compare and stats.verdict is stats.verdicts.verdict


def test_one_home_per_public_name():
    """A function, class or table of constants is in the ``__all__`` of one public module only (a package
    re-exporting its private modules' names is their one home; ``storagebench`` itself is the facade of
    "The public API", each name loaded from its owner)."""
    homes: dict[int, list[str]] = {}
    keep = {}
    for mod in _public_modules()[1:]:
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if isinstance(obj, (int, float, str, bytes, bool)) or obj is None:
                continue  # equal literals share an object without being one name
            keep[id(obj)] = obj
            homes.setdefault(id(obj), []).append(f"{mod.__name__}.{name}")
    twice = sorted(v for v in homes.values() if len(v) > 1)
    assert twice == [], twice


def test_display_is_the_old_name_of_show():
    """``storagebench.show`` does not clash with IPython's ``display``; the old import still works, warned."""
    import pytest

    from storagebench import show

    with pytest.warns(DeprecationWarning, match="storagebench.display is now storagebench.show"):
        from storagebench import display
    assert display is show and "table" not in show.__all__

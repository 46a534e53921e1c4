#!/usr/bin/env python
"""Benchmark of start-up cost (issue 9, item 4): ``import storagebench`` and ``storagebench --version``.

For the working tree and for the storagebench of git ref ``--ref`` (default ``main``, extracted with
``git archive`` into a temporary directory), each in a fresh interpreter (``PYTHONPATH`` set to the
tree, bytecode compiled once beforehand so neither side pays for it), interleaved round by round:

* wall time of ``python -c "import storagebench"``;
* wall time of ``python -m storagebench --version`` (what the ``storagebench`` script runs);
* wall time of importing each of ``--modules`` (default the sub-APIs a notebook uses);
* which heavy libraries each command leaves in ``sys.modules`` (pandas, pyarrow, scipy, statsmodels,
  matplotlib, papermill, nbconvert) and how many modules it loaded: facts, not timings.

Printed: the median of ``--rounds`` per command and tree, and the ratio working tree / ref, both measured
in this run on this machine (the machine is shared: only the ratio means anything). The baseline for the
ratios is a bare ``python -c pass`` measured in the same rounds.

Usage::

    .venv/bin/python benchmarks/bench_import.py                # 15 rounds against main
    .venv/bin/python benchmarks/bench_import.py --ref HEAD~5 --rounds 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "pyarrow", "scipy", "statsmodels", "matplotlib", "seaborn", "papermill", "nbconvert")
_PROBE = ("import sys, json; {stmt}; "
          "print(json.dumps({{'n': len(sys.modules), 'heavy': [m for m in {heavy!r} if m in sys.modules]}}))")


def ref_tree(ref: str, tmp: Path) -> Path:
    """The ``storagebench`` package of git ref ``ref``, extracted under ``tmp``."""
    tree = tmp / f"ref-{ref.replace('/', '_')}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "storagebench"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def commands(modules: list[str]) -> dict[str, list[str]]:
    cmds = {"python -c pass": ["-c", "pass"],
            "import storagebench": ["-c", "import storagebench"],
            "storagebench --version": ["-m", "storagebench", "--version"]}
    for m in modules:
        cmds[f"import storagebench.{m}"] = ["-c", f"import storagebench.{m}"]
    return cmds


def wall(tree: Path, args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=tempfile.gettempdir(), env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def loaded(tree: Path, stmt: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = _PROBE.format(stmt=stmt, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], cwd=tempfile.gettempdir(), env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="main", help="git ref to compare with (default main)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--modules", default="stats,plots,ingest,runner,cli",
                    help="comma-separated submodules to time as well")
    args = ap.parse_args()
    modules = [m for m in args.modules.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="sb-bench-import-") as tmp:
        trees = {"this tree": ROOT, args.ref: ref_tree(args.ref, Path(tmp))}
        for tree in trees.values():  # compile once, so no round pays for bytecode
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "storagebench")], check=True)
        cmds = commands(modules)
        times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in cmds}
        for _ in range(args.rounds):
            for c, a in cmds.items():
                for t, tree in trees.items():
                    try:
                        times[(t, c)].append(wall(tree, a))
                    except subprocess.CalledProcessError:  # a module the ref does not have
                        times[(t, c)].append(float("nan"))
        print(f"median wall time of {args.rounds} rounds, s (fresh interpreter each; {sys.executable})")
        print(f"{'command':32s} {'this tree':>10s} {args.ref:>10s} {'ratio':>7s}")
        for c in cmds:
            a = statistics.median(times[("this tree", c)])
            b = statistics.median(times[(args.ref, c)])
            print(f"{c:32s} {a:10.3f} {b:10.3f} {a / b:7.2f}")
        print("\nmodules loaded (count) and heavy libraries among them")
        for stmt in ("import storagebench", "import storagebench.cli"):
            for t, tree in trees.items():
                info = loaded(tree, stmt)
                print(f"  {stmt:26s} {t:10s} {info['n']:5d}  {', '.join(info['heavy']) or '-'}")


if __name__ == "__main__":
    main()

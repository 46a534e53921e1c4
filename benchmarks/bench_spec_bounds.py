"""What the spec bounds cost a normal spec, and what a hostile spec costs with them.

Measured in one process, alternating, median over ``--rounds``:

* ``parse``: the 7 committed ``data/studies/*.yaml`` parsed with :func:`storagebench._safeyaml.load_yaml`
  (node/depth/alias limits, duplicate keys) vs bare ``yaml.safe_load`` (the baseline): the ratio is
  the price of the limits on a normal spec.
* ``load``: :func:`storagebench._study.load_study` of the same files (parse + every check) vs bare
  ``yaml.safe_load``.
* hostile specs, each refused: a billion-laughs document (9 levels of 9 under an unknown key), a
  merge-key bomb, 256 KiB of ``[``, a 10**20-run grid; time to the StudyError in ms and as a ratio
  to loading ``demo.yaml``, and the tracemalloc peak (MiB) while it is refused.

Run: ``.venv/bin/python benchmarks/bench_spec_bounds.py [--rounds 20]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storagebench._safeyaml import load_yaml  # noqa: E402
from storagebench._study import load_study  # noqa: E402
from storagebench.errors import StudyError  # noqa: E402

STUDIES = sorted((ROOT / "data" / "studies").glob("*.yaml"))
GOOD = "name: fz\nfactors:\n  iodepth: [1, 2]\nfixed:\n  rw: randread\nruntime: 1\n"


def _laughs() -> str:
    lines = ["unknown:", "  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i, name in enumerate("bcdefghij"):
        lines.append(f"  {name}: &{name} [" + ", ".join([f"*{'abcdefghij'[i]}"] * 9) + "]")
    return GOOD + "\n".join(lines) + "\n"


def _merge() -> str:
    lines = ["fixed2:", "  m0: &m0 {k0: 1, k1: 2}"]
    lines += [f"  m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 8) + "]}" for i in range(1, 14)]
    return GOOD + "\n".join(lines) + "\n"


HOSTILE = {
    "billion laughs (9^10 under an unknown key)": _laughs(),
    "merge-key bomb (8^13)": _merge(),
    "256 KiB of '['": "description: " + "[" * (256 * 1024 - 20) + "\n",
    "10^20-run grid": "name: fz\nfactors:\n" + "".join(f"  f{i}: [0,1,2,3,4,5,6,7,8,9]\n" for i in range(20))
    + "labels: [" + ", ".join(f"f{i}" for i in range(20)) + "]\n",
}


def _time(fn, n: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    texts = [p.read_text() for p in STUDIES]
    res: dict[str, list[float]] = {"bare": [], "bounded": [], "load": []}
    for _ in range(args.rounds):
        res["bare"].append(_time(lambda: [yaml.safe_load(t) for t in texts]))
        res["bounded"].append(_time(lambda: [load_yaml(t) for t in texts]))
        res["load"].append(_time(lambda: [load_study(p) for p in STUDIES]))
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"{len(STUDIES)} committed specs, median of {args.rounds} rounds:")
    print(f"  bare yaml.safe_load          {med['bare'] * 1e3:8.2f} ms  (baseline)")
    print(f"  safeyaml.load_yaml           {med['bounded'] * 1e3:8.2f} ms  {med['bounded'] / med['bare']:.2f}x")
    print(f"  load_study (parse + checks)  {med['load'] * 1e3:8.2f} ms  {med['load'] / med['bare']:.2f}x")
    tmp = ROOT / "benchmarks" / ".bench_spec_bounds.yaml"
    demo = statistics.median(_time(lambda: load_study(STUDIES[1])) for _ in range(args.rounds))
    print(f"hostile specs (refused), vs loading {STUDIES[1].name} ({demo * 1e3:.2f} ms):")
    try:
        for name, text in HOSTILE.items():
            tmp.write_text(text)

            def refuse(name: str = name) -> str:
                try:
                    load_study(tmp).expand()
                except StudyError as exc:
                    return str(exc)
                raise AssertionError(f"{name} was not refused")

            t = statistics.median(_time(refuse) for _ in range(max(3, args.rounds // 4)))
            tracemalloc.start()
            msg = refuse()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            first = msg.split("\n")[0].split(": ", 1)[-1][:70]
            print(f"  {name:44s} {t * 1e3:8.2f} ms  {t / demo:6.1f}x  peak {peak / 2**20:5.1f} MiB  {first}")
    finally:
        tmp.unlink(missing_ok=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Benchmark of DiskSPD XML ingest (storagebench issue 12, item 6, the DiskSPD half).

Time to ingest N DiskSPD ``-Rxml`` files (default 2,000) into validated ``runs`` (+ ``timeseries``)
DataFrames with ``storagebench.ingest.ingest_paths``, against baselines measured in the same run on
the same files (round-robin, best of ``--repeat``, wall and CPU time):

* bare ``xml.etree.ElementTree.fromstring`` of every file's bytes (read + parse, no tables);
* ``defusedxml.ElementTree.fromstring`` (the same parser with the entity/DTD guards storagebench uses);
* ``lxml.etree.fromstring``, if lxml is installed (benchmark-only; not a storagebench dependency).

The corpus alternates the two real DiskSPD 2.0.21a XML fixtures (``tests/fixtures/diskspd``): the
PerfKitBenchmarker one (6 KB: 4 threads, no latency, no series) and the VirtualClient one (120 KB:
108 latency percentiles, 120-second IOPS series twice), each copy with its own computer name and
test time so that no two files are identical. Ratios are printed against bare ElementTree.

``--compare-ref REF`` also times the storagebench of git ref ``REF`` (the code before a change) on the same
files, in a child process that times its own bare ElementTree in the same round-robin, so that both ratios
come from one run; its ``runs`` and ``timeseries`` must equal this tree's (``assert_frame_equal``, exact).

Usage::

    .venv/bin/python benchmarks/bench_ingest_diskspd.py                  # 2,000 files, best of 3
    .venv/bin/python benchmarks/bench_ingest_diskspd.py --files 1000 --repeat 5 --compare-ref perf
    .venv/bin/python benchmarks/bench_ingest_diskspd.py --files 200 --repeat 1
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = [ROOT / "tests" / "fixtures" / "diskspd" / "pkb_diskspd_result_2018.xml",
            ROOT / "tests" / "fixtures" / "diskspd" / "virtualclient_Results_DiskSpd.xml"]
sys.path.insert(0, str(ROOT))


def make_files(out: Path, n: int) -> list[Path]:
    """n variants of the two real XML files (computer name and test time varied)."""
    bases = [f.read_text() for f in FIXTURES]
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        text = bases[i % 2]
        for old in ("pkb-044ffc87-0", "QuickTest2"):
            text = text.replace(f"<ComputerName>{old}</ComputerName>", f"<ComputerName>host-{i:05d}</ComputerName>")
        t = 30.02 if i % 2 == 0 else 120.01
        text = text.replace(f"<TestTimeSeconds>{t:.2f}</TestTimeSeconds>",
                            f"<TestTimeSeconds>{t + (i // 2) / 100:.2f}</TestTimeSeconds>")
        p = out / f"diskspd_{i:06d}.xml"
        p.write_text(text)
        paths.append(p)
    return paths


def bench_etree(paths):
    return sum(len(ET.fromstring(p.read_bytes())) for p in paths)


def bench_defusedxml(paths):
    import defusedxml.ElementTree as DET

    return sum(len(DET.fromstring(p.read_bytes())) for p in paths)


def bench_lxml(paths):
    from lxml import etree

    return sum(len(etree.fromstring(p.read_bytes())) for p in paths)


def bench_storagebench(paths):
    from storagebench.ingest import ingest_paths

    res = ingest_paths(paths)
    if res.errors:
        raise SystemExit(f"ingest errors: {res.errors[:3]}")
    return len(res.runs) + len(res.timeseries)


def timed(fn, paths):
    """(wall s, CPU s of this process) of one call."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn(paths)
    return time.perf_counter() - t0, time.process_time() - c0


_COMPARE_CHILD = """
import gc, json, pickle, sys, time
import xml.etree.ElementTree as ET
sys.path.insert(0, {tree!r})
from storagebench.ingest import ingest_paths
import storagebench
assert storagebench.__file__.startswith({tree!r}), storagebench.__file__
paths = {paths!r}
ingest_paths(paths[:4])
best = {{"etree_cpu": float("inf"), "sb_cpu": float("inf")}}
for _ in range({repeat}):
    for name, fn in (("etree", lambda: sum(len(ET.fromstring(open(p, "rb").read())) for p in paths)),
                     ("sb", lambda: ingest_paths(paths))):
        gc.collect()
        c0 = time.process_time()
        fn()
        best[name + "_cpu"] = min(best[name + "_cpu"], time.process_time() - c0)
res = ingest_paths(paths)
with open({tables!r}, "wb") as f:
    pickle.dump({{"runs": res.runs, "timeseries": res.timeseries}}, f)
print(json.dumps(best))
"""


def compare_ref(ref: str, paths: list[Path], tmp: Path, repeat: int) -> dict[str, float]:
    """Best CPU s of bare ElementTree and ingest_paths (``etree_cpu``, ``sb_cpu``) of the storagebench at git
    ref ``ref``, timed in a child process; AssertionError when its tables differ from this tree's."""
    import pickle

    import pandas as pd

    from storagebench.ingest import ingest_paths

    tree = tmp / "ref"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "storagebench"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    tables = tmp / "ref-tables.pickle"
    code = _COMPARE_CHILD.format(tree=str(tree), paths=[str(p) for p in paths], repeat=repeat, tables=str(tables))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    best = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     env=env).stdout)
    with open(tables, "rb") as f:
        theirs = pickle.load(f)
    ours = ingest_paths(paths)
    for name, df in theirs.items():
        pd.testing.assert_frame_equal(getattr(ours, name), df, check_exact=True, obj=f"{name} ({ref} vs this tree)")
    print(f"  tables identical to {ref}'s (assert_frame_equal, exact): "
          + ", ".join(f"{name} {len(df):,} rows" for name, df in theirs.items()))
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare-ref", default="", help="also time the storagebench of this git ref (e.g. main)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sb-bench-diskspd-") as tmp:
        paths = make_files(Path(tmp), args.files)
        mb = sum(p.stat().st_size for p in paths) / 1e6
        bench_storagebench(paths[:4])  # warm imports
        rows = [("bare xml.etree.ElementTree.fromstring", bench_etree),
                ("defusedxml.ElementTree.fromstring", bench_defusedxml)]
        try:
            import lxml  # noqa: F401

            rows.append(("lxml.etree.fromstring", bench_lxml))
        except ImportError:
            print("lxml not installed: its baseline is skipped (pip install lxml to add it)")
        rows.append(("storagebench ingest_paths (runs + timeseries)", bench_storagebench))
        # round-robin repeats, best of each (load on a shared machine drifts; this keeps the ratios fair), in
        # wall time and in this process's CPU time (what other jobs on the machine do not inflate)
        best = {name: [float("inf"), float("inf")] for name, _ in rows}
        for _ in range(args.repeat):
            for name, fn in rows:
                t, c = timed(fn, paths)
                best[name] = [min(best[name][0], t), min(best[name][1], c)]
        base, base_cpu = best[rows[0][0]]
        print(f"{args.files} DiskSPD XML files ({mb:.0f} MB), best of {args.repeat}, round-robin:")
        for name, _ in rows:
            t, c = best[name]
            print(f"  {name:<48} {t:7.3f} s wall {t / base:5.2f}x   {c:7.3f} s CPU {c / base_cpu:5.2f}x bare "
                  "ElementTree")
        if args.compare_ref:
            ref = compare_ref(args.compare_ref, paths, Path(tmp), args.repeat)
            print(f"  storagebench at {args.compare_ref} (child process, its own bare ElementTree "
                  f"{ref['etree_cpu']:.3f} s CPU): {ref['sb_cpu']:.3f} s CPU = {ref['sb_cpu'] / ref['etree_cpu']:.2f}x "
                  "bare ElementTree")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Benchmark of fio JSON+ ingest (storagebench issue 2, item 5, benchmarks a and b; issue 12, item 6).

(a) Time to ingest N json+ files (default 2,000) into runs + histograms, against baselines measured
    in the same run on the same files:
      * bare ``orjson.loads`` of every file (the lower bound: read + parse, no tables),
      * ``json.load`` + ``pandas.json_normalize`` (what a notebook user writes first),
      * fio-plot's JSON import (``fio_plot.fiolib.jsonimport.import_json_dataset`` +
        ``jsonparsing.parse_json_data``), if ``fio-plot`` is installed (benchmark-only dependency:
        ``.venv/bin/pip install fio-plot``); it builds no histograms;
      * storagebench ``ingest_paths`` → validated ``runs``, ``histograms`` and ``run_totals`` DataFrames,
        and the same with the run-level table switched off (its own cost is the difference).
    Target: storagebench within 2x of bare orjson.
(b) Peak memory (``VmHWM`` of a fresh subprocess, see ``_CHILD``) of ``ingest_to_parquet`` over M files
    (default 20,000) to parquet, against the same subprocess that only imports storagebench.
    Target: < 1 GiB.

Two corpora (``--corpus``):

``multijob`` (the realistic one, issue 12 item 6)
    the 36 real fio 3.33 json+ outputs in ``benchmarks/data/fio_multijob/`` (libaio randread 4k on a
    file, iodepth 1..32, numjobs 1 and 2 *without* group_reporting, 1-second runs; captured by
    ``benchmarks/make_fio_corpus.py``), replicated byte for byte to N files: nothing in a copy is
    changed, so every file is a real fio output (a copy shares its original's ``run_id``).
``dense``
    the dense-bin corpus of issue 21: the 12 real fio 3.33 json+ outputs that
    ``benchmarks/make_fio_corpus.py --dense`` writes to ``--dense-dir`` (default ``/tmp/sb-fio-dense``;
    randread 4k, iodepth 1..32 x numjobs 1-2 without group_reporting, 4-second runs, ~450 bins a
    row), replicated byte for byte to N files like ``multijob`` (not in git: made on the machine).
``single``
    variants of one real single-job json+ output (``tests/fixtures/fio/single_jsonplus.json``),
    each with a different job name, iodepth, numjobs and IOPS so that no two are identical.

``--compare-ref REF`` also times the storagebench of git ref ``REF`` (e.g. ``main``: the code
before a change) on the same files, in a child process that measures its own bare ``orjson`` in
the same round-robin, so both ratios come from one run.

(c) The decoder alone, on each corpus (how the typed decoder was chosen): bare ``orjson.loads``,
    storagebench's ``msgspec`` typed decoder (:data:`storagebench.ingest._fiodoc.DECODER`: every value
    ingest reads type- and range-checked while decoded), the same with the json+ bins left as raw
    JSON (:data:`~storagebench.ingest._fiodoc.RAW_DECODER`, what ingest decodes: the bins of a whole batch
    are then parsed and checked at once by ``RowSink.parse_bins``, part of (a)'s time) and pydantic v2
    ``TypeAdapter.validate_json`` of an equivalent strict model (:class:`_PydanticDoc` below), CPU
    time, best of ``--repeat``.

(d) With ``--stages``, on the multijob and dense corpora: where ingest's CPU time goes. Each stage of
    ``ingest_paths`` is timed alone (ingest's own functions on the same files: the walk, the reads, the
    XXH3-128 run ids of loose files, the typed decode, the duplicate-``"iops"`` scan, the row tuples, the
    json+ bins text parse, the histograms and runs tables, ``run_totals``, the table gate), best of
    ``--repeat``, each round beside bare ``orjson.loads``, in x orjson; then their sum against the whole.

(e) With ``--kernel``, on the multijob and dense corpora: the user and kernel CPU time and the minor page faults
    of bare ``orjson.loads`` and of ``ingest_paths``, each in a fresh child process, once as it runs and once
    with glibc's malloc keeping freed memory (``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_``, mallopt(3)):
    how much of ingest's time is the kernel zeroing fresh pages for it again each round.

``--compare-ref`` also checks that the ref's tables equal this tree's (``assert_frame_equal``, exact).
Every time is printed as wall time and as the process's CPU time: on a machine shared with other
jobs, wall time also counts the time the process waited for a CPU. Beside the best of ``--repeat`` rounds,
(a) prints the median over the rounds of each round's own ratio to bare orjson (both timed in that round),
and so does ``--compare-ref`` for the ref.

Usage::

    .venv/bin/python benchmarks/bench_ingest.py                 # both corpora, 2,000 files, memory test on 20,000
    .venv/bin/python benchmarks/bench_ingest.py --corpus multijob --mem-files 0 --compare-ref main
    .venv/bin/python benchmarks/bench_ingest.py --corpus dense --mem-files 0 --repeat 7 --stages
    .venv/bin/python benchmarks/bench_ingest.py --files 200 --mem-files 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "fio" / "single_jsonplus.json"
MULTIJOB = ROOT / "benchmarks" / "data" / "fio_multijob"
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))


def make_files(out: Path, n: int) -> list[Path]:
    """n variants of the real json+ fixture (job name, iodepth, numjobs, IOPS varied)."""
    base = orjson.loads(FIXTURE.read_bytes())
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        doc = base  # mutate in place and dump: cheaper than a deep copy per file
        job = doc["jobs"][0]
        job["jobname"] = f"randread_{i}"
        opts = job.setdefault("job options", {})
        opts["iodepth"] = str(1 << (i % 8))
        opts["numjobs"] = str(1 + i % 4)
        opts["bs"] = opts.get("bs", "4k")
        opts["rw"] = opts.get("rw", "randread")
        job["read"]["iops"] = 40960.0 + i / 7.0
        p = out / f"run_{i:06d}.json"
        p.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        paths.append(p)
    return paths


def make_multijob_files(out: Path, n: int, src: Path = MULTIJOB) -> list[Path]:
    """n byte-for-byte copies of the real multi-job json+ outputs in ``src`` (``benchmarks/data/fio_multijob``)."""
    sources = sorted(src.glob("*.json"))
    if not sources:
        raise SystemExit(f"no fio outputs in {src}: run benchmarks/make_fio_corpus.py"
                         + (" --dense" if src != MULTIJOB else ""))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        src = sources[i % len(sources)]
        p = out / f"c{i:06d}_{src.name}"
        shutil.copyfile(src, p)
        paths.append(p)
    return paths


def bench_orjson(paths):
    n = 0
    for p in paths:
        n += len(orjson.loads(p.read_bytes())["jobs"])
    return n


def bench_json_normalize(paths):
    import pandas as pd

    docs = []
    for p in paths:
        with open(p) as f:
            docs.append(json.load(f))
    df = pd.json_normalize(docs, record_path=["jobs"], meta=["fio version", "timestamp"])
    return len(df)


def bench_fio_plot(paths):
    from fio_plot.fiolib import jsonimport, jsonparsing

    settings = {"rw": "randread", "filter": ["read", "write"]}
    dataset = [{"directory": str(paths[0].parent), "files": [str(p) for p in paths]}]
    dataset = jsonimport.import_json_dataset(settings, dataset)
    dataset = jsonparsing.parse_json_data(settings, dataset)
    return len(dataset[0]["data"])


def bench_storagebench(paths):
    from storagebench.ingest import ingest_paths

    res = ingest_paths([paths[0].parent])
    assert res.ok, res.errors[:3]
    return len(res.runs) + len(res.histograms)


def bench_storagebench_without_run_totals(paths):
    """ingest_paths with the run-level table switched off: the rest of ingest, for the table's own cost.

    The name is replaced where ingest calls it (``storagebench.ingest._collector``, which imports
    ``run_totals`` into its namespace): replacing ``storagebench.ingest.run_totals`` switched nothing off."""
    import storagebench.ingest._collector as col
    from storagebench import schema

    saved = col.run_totals
    col.run_totals = lambda runs, hist, **_: schema.empty("run_totals")
    try:
        return bench_storagebench(paths)
    finally:
        col.run_totals = saved


def timed(fn, paths, repeat):
    """(best wall s, best CPU s of this process, last output) of ``repeat`` calls."""
    best, best_cpu = float("inf"), float("inf")
    out = None
    for _ in range(repeat):
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn(paths)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, out


_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
import storagebench.ingest as ing
if {run!r}:
    s = ing.ingest_to_parquet([{src!r}], {dst!r}, batch_files={batch})
    assert s.ok and s.files == {n}, (s.files, s.errors[:3])
    print(s.rows["runs"], s.rows["histograms"])
else:
    print(0, 0)
# VmHWM: peak RSS of this process image. ru_maxrss is not used: after fork+exec Linux reports
# max(parent's RSS at fork, own peak), so a big parent would hide the child's real peak.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(hwm, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss(src: Path, dst: Path, n: int, batch: int, run: bool, root: Path = ROOT) -> tuple[int, int, int, float]:
    code = _CHILD.format(root=str(root), src=str(src), dst=str(dst), batch=batch, n=n, run=run)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dt = time.perf_counter() - t0
    runs, hist, rss_kib, _maxrss_kib = proc.stdout.split()
    return int(runs), int(hist), int(rss_kib) * 1024, dt


_COMPARE_CHILD = """
import gc, json, pickle, statistics, sys, time
from pathlib import Path
sys.path.insert(0, {tree!r})
import orjson
import storagebench.ingest as ing
assert ing.__file__.startswith({tree!r}), ing.__file__
paths = sorted(Path({src!r}).iterdir())
def bare(paths):
    n = 0
    for p in paths:
        n += len(orjson.loads(p.read_bytes())["jobs"])
    return n
def sb(paths):
    res = ing.ingest_paths([paths[0].parent])
    assert res.ok, res.errors[:3]
    return len(res.runs) + len(res.histograms)
sb(paths[:1])
best = {{k: float("inf") for k in ("orjson", "sb", "orjson_cpu", "sb_cpu")}}
ratios, ratios_cpu = [], []
for _ in range({repeat}):
    this = {{}}
    for name, fn in (("orjson", bare), ("sb", sb)):
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        fn(paths)
        this[name], this[name + "_cpu"] = time.perf_counter() - t0, time.process_time() - c0
        best[name] = min(best[name], this[name])
        best[name + "_cpu"] = min(best[name + "_cpu"], this[name + "_cpu"])
    ratios.append(this["sb"] / this["orjson"])
    ratios_cpu.append(this["sb_cpu"] / this["orjson_cpu"])
best["ratio_median"] = statistics.median(ratios)
best["ratio_cpu_median"] = statistics.median(ratios_cpu)
res = ing.ingest_paths([paths[0].parent])
with open({tables!r}, "wb") as f:  # the tables, for the parent to compare with its own
    pickle.dump({{t: getattr(res, t) for t in ("runs", "histograms", "all_clients", "timeseries", "run_totals")}}, f)
print(json.dumps(best))
"""


def ref_tree(ref: str, tmp: Path) -> Path:
    """The ``storagebench`` package of git ref ``ref``, extracted under ``tmp``."""
    tree = tmp / f"ref-{ref.replace('/', '_')}"
    if not tree.exists():
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "storagebench"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def compare_ref(ref: str, src: Path, tmp: Path, repeat: int) -> dict[str, float]:
    """Best wall and CPU s of bare orjson and ingest_paths (keys ``orjson``, ``sb``, ``orjson_cpu``,
    ``sb_cpu``) of the storagebench at git ref ``ref``, timed in a child process.

    The child also writes its tables; they must equal this tree's (``pandas.testing.assert_frame_equal``,
    exact, on the ref's columns; the columns this tree adds are named): a speed-up never changes a result.
    Raises AssertionError when they differ."""
    import pickle

    import pandas as pd

    from storagebench.ingest import ingest_paths

    tree = ref_tree(ref, tmp)
    tables = tmp / f"tables-{ref.replace('/', '_')}.pickle"
    code = _COMPARE_CHILD.format(tree=str(tree), src=str(src), repeat=repeat, tables=str(tables))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    best = json.loads(out)
    with open(tables, "rb") as f:
        theirs = pickle.load(f)
    ours = ingest_paths([src])
    # a loose file's run id was the SHA-256 of its bytes before XXH3-128 (file_run_id): the ref's ids are
    # mapped file by file (an id change, not a table change)
    import hashlib

    from storagebench.ingest.fio import file_run_id
    ids = {hashlib.sha256(d).hexdigest()[:12]: file_run_id(d) for d in (p.read_bytes() for p in src.glob("*.json"))}
    for name, df in theirs.items():
        if "run_id" in df.columns and df["run_id"].isin(list(ids)).any():
            df["run_id"] = df["run_id"].map(lambda r: ids.get(r, r)).astype(df["run_id"].dtype)
            print(f"  {name}: {ref}'s SHA-256 run ids mapped to this tree's XXH3-128 ones")
        mine = getattr(ours, name)
        added = [c for c in mine.columns if c not in df.columns]  # columns this tree adds (a feature, not a speed-up)
        if added:
            print(f"  {name}: columns added since {ref} (not compared): {', '.join(added)}")
        pd.testing.assert_frame_equal(mine[list(df.columns)], df, check_exact=True, obj=f"{name} ({ref} vs this tree)")
    print(f"  tables identical to {ref}'s (assert_frame_equal, exact): "
          + ", ".join(f"{name} {len(df):,} rows" for name, df in theirs.items()))
    return best


def time_corpus(label: str, paths: list[Path], args, tmp: Path) -> None:
    size = sum(p.stat().st_size for p in paths)
    print(f"(a) {label}: {len(paths)} json+ files ({size / 2**20:.1f} MiB), best of {args.repeat}")
    methods = [("bare orjson.loads (lower bound)", bench_orjson),
               ("json.load + pandas.json_normalize", bench_json_normalize),
               ("fio-plot jsonimport + parse_json_data", bench_fio_plot),
               ("storagebench ingest_paths (runs+histograms)", bench_storagebench),
               ("  the same without run_totals", bench_storagebench_without_run_totals)]
    try:
        import fio_plot  # noqa: F401
    except ImportError:
        print("  skipped: fio-plot is not installed (.venv/bin/pip install fio-plot)")
        methods = [m for m in methods if m[1] is not bench_fio_plot]
    bench_storagebench([paths[0]])  # warm imports (pandas, pyarrow compute)
    # round-robin repeats, best of each: load on a shared machine drifts, this keeps ratios fair
    # wall time (what a user waits) and this process's CPU time (user + system, all its threads: what a
    # machine shared with other jobs does not inflate by descheduling; no method here starts threads of
    # its own, storagebench included)
    best = {name: [float("inf"), float("inf"), None] for name, _ in methods}
    rounds = []  # (wall, CPU) of every method in each round: the ratios to orjson of one round are paired
    for _ in range(args.repeat):
        this = {}
        for name, fn in methods:
            t, c, out = timed(fn, paths, 1)
            b = best[name]
            b[0], b[1], b[2] = min(b[0], t), min(b[1], c), out
            this[name] = (t, c)
        rounds.append(this)
    rows = [(name, *best[name]) for name, _ in methods]
    base, base_cpu = rows[0][1], rows[0][2]
    print(f"  {'method':46s} {'wall s':>8s} {'files/s':>9s} {'x orjson':>9s} {'CPU s':>7s} {'x orjson':>9s}  output")
    for name, t, c, out in rows:
        print(f"  {name:46s} {t:8.3f} {len(paths) / t:9.0f} {t / base:9.2f} {c:7.3f} {c / base_cpu:9.2f}  {out}")
    base_name = rows[0][0]
    print(f"  median over the {args.repeat} rounds of each round's ratio to bare orjson (same round; wall, CPU):")
    for name, _ in methods[1:]:
        wall = statistics.median(r[name][0] / r[base_name][0] for r in rounds)
        cpu = statistics.median(r[name][1] / r[base_name][1] for r in rounds)
        print(f"    {name.strip():46s} {wall:6.2f} wall {cpu:6.2f} CPU")
    sb = [(t, c) for name, t, c, _ in rows if name.startswith("storagebench")][0]
    nort = [(t, c) for name, t, c, _ in rows if name.startswith("  the same without")][0]
    print(f"  storagebench / bare orjson = {sb[0] / base:.2f} wall, {sb[1] / base_cpu:.2f} CPU (target <= 2.0); "
          f"without run_totals {nort[0] / base:.2f} wall, {nort[1] / base_cpu:.2f} CPU")
    if args.compare_ref:
        ref = compare_ref(args.compare_ref, paths[0].parent, tmp, args.repeat)
        print(f"  storagebench at {args.compare_ref} (child process, its own bare orjson {ref['orjson']:.3f} s wall, "
              f"{ref['orjson_cpu']:.3f} s CPU): {ref['sb']:.3f} s = {ref['sb'] / ref['orjson']:.2f} x orjson wall, "
              f"{ref['sb_cpu']:.3f} s = {ref['sb_cpu'] / ref['orjson_cpu']:.2f} x CPU; median of the rounds' ratios "
              f"{ref['ratio_median']:.2f} wall, {ref['ratio_cpu_median']:.2f} CPU")


def _pydantic_adapter():
    """pydantic v2 model of the fields storagebench reads, with the same types and bounds (strict)."""
    from typing import Annotated, Optional, Union

    from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

    count = Annotated[int, Field(ge=0, le=2**63 - 1)]
    amount = Annotated[float, Field(ge=0, lt=2.0**63)]
    wide = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
    options = Optional[dict[str, Union[str, int, float]]]

    class _M(BaseModel):
        model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    class _Lat(_M):
        min: Optional[wide] = None
        max: Optional[wide] = None
        mean: Optional[float] = None
        stddev: Optional[float] = None
        N: Optional[count] = None
        percentile: Optional[dict[str, wide]] = None
        bins: Optional[dict[int, count]] = None

    class _Dir(_M):
        iops: amount
        runtime: count
        io_bytes: count
        io_kbytes: Optional[count] = None
        bw_bytes: Optional[count] = None
        bw: Optional[count] = None
        total_ios: Optional[count] = None
        lat_ns: Optional[_Lat] = None
        clat_ns: Optional[_Lat] = None
        slat_ns: Optional[_Lat] = None

    class _Job(_M):
        jobname: str
        error: count
        elapsed: Optional[wide] = None
        job_options: options = Field(None, alias="job options")
        read: Optional[_Dir] = None
        write: Optional[_Dir] = None
        trim: Optional[_Dir] = None
        mixed: Optional[_Dir] = None
        usr_cpu: Optional[float] = None
        sys_cpu: Optional[float] = None

    class _PydanticDoc(_M):
        fio_version: str = Field("", alias="fio version")
        timestamp_ms: Optional[wide] = None
        global_options: options = Field(None, alias="global options")
        jobs: Optional[list[_Job]] = None

    return TypeAdapter(_PydanticDoc)


def time_decoders(label: str, paths: list[Path], repeat: int) -> None:
    from storagebench.ingest._fiodoc import DECODER, RAW_DECODER

    datas = [p.read_bytes() for p in paths]
    methods = [("bare orjson.loads", orjson.loads), ("msgspec typed, bins as dicts (DECODER)", DECODER.decode),
               ("msgspec typed, bins left raw (ingest's)", RAW_DECODER.decode)]
    try:
        methods.append(("pydantic v2 validate_json (strict model)", _pydantic_adapter().validate_json))
    except ImportError:
        print("  skipped pydantic: not installed")
    best = {name: float("inf") for name, _ in methods}
    for _ in range(repeat):
        for name, fn in methods:
            gc.collect()
            t0 = time.process_time()
            for d in datas:
                fn(d)
            best[name] = min(best[name], time.process_time() - t0)
    base = best["bare orjson.loads"]
    print(f"(c) decoders alone, {label}: CPU seconds, best of {repeat}")
    for name, _ in methods:
        print(f"  {name:46s} {best[name]:8.3f} {best[name] / base:9.2f} x orjson")


def _stage_inputs(paths: list[Path]) -> dict:
    """What each stage of :func:`time_stages` starts from, made once: the files' bytes and run ids, their
    decoded documents, the raw json+ bins in the steps ingest parses them in, and a batch's collector and
    tables (``storagebench.ingest`` internals: the stages are ingest's own functions, called alone)."""
    from storagebench.ingest import _collector, _fiodoc, _fiorows, _walk

    cap = _walk.MAX_FILE_BYTES
    datas = [p.read_bytes() for p in paths]
    names = [str(p) for p in paths]
    ids = [_fiorows.file_run_id(x) for x in datas]
    docs = [_fiorows._document(x, n, True)[0] for x, n in zip(datas, names, strict=True)]
    sink = _fiorows.RowSink(raw_bins=True)
    for x, n, i in zip(datas, names, ids, strict=True):
        _fiorows.emit_rows(sink, x, n, None, None, i)
    steps, step, size = [], [], 0  # as RowSink.parse_step cuts them: ~BINS_STEP bytes of bins text each
    for raw in sink.hist_raw:
        step.append(raw)
        size += len(raw)
        if size >= _fiorows.BINS_STEP:
            steps.append(step)
            step, size = [], 0
    steps += [step] if step else []
    col, errors = _collector._collect_once(list(_walk._discover([paths[0].parent], cap)), cap, None)
    assert not errors, errors[:3]
    return {"cap": cap, "datas": datas, "names": names, "ids": ids, "docs": docs, "steps": steps, "col": col,
            "frames": col.frames(), "dir": paths[0].parent, "decode": _fiodoc.RAW_DECODER.decode,
            "resolve": _fiodoc.resolve_options, "dup": _fiodoc._check_duplicate_keys}


def _stages(paths: list[Path]) -> list[tuple[str, object]]:
    """(name, function of no argument) of every stage of ingest_paths on ``paths``, in pipeline order."""
    from storagebench import schema
    from storagebench.ingest import _fiobins, _fiorows, _walk, ingest_paths
    from storagebench.ingest.fio import runs_frame
    from storagebench.runlevel import run_totals

    s = _stage_inputs(paths)
    cap, datas, names, docs, col, frames = s["cap"], s["datas"], s["names"], s["docs"], s["col"], s["frames"]

    def emit():
        sink = _fiorows.RowSink(raw_bins=True)
        for x, n, i in zip(datas, names, s["ids"], strict=True):
            _fiorows.emit_rows(sink, x, n, None, None, i)

    return [
        ("walk: the files to read (_walk._discover)", lambda: list(_walk._discover([s["dir"]], cap))),
        ("read: open_input + read of each file", lambda: [_walk._read_file(n, cap) for n in names]),
        ("run_id: XXH3-128 of each loose file", lambda: [_fiorows.file_run_id(x) for x in datas]),
        ("decode: msgspec typed, bins raw, + options", lambda: [s["resolve"](s["decode"](x)) for x in datas]),
        ("duplicate-key scan (\"iops\" count)", lambda: [s["dup"](x, d, n) for x, d, n in zip(datas, docs, names, strict=True)]),
        ("emit_rows (decode + scan + the row tuples)", emit),
        ("json+ bins text -> int64 arrays", lambda: [_fiobins._parse_bins_text(step) for step in s["steps"]]),
        ("histograms table (+ bins vs N check, validate)",
         lambda: schema.validate(col.histograms(), "histograms")),
        ("runs table (runs_frame + validate)",
         lambda: schema.validate(runs_frame(col.runs, col.runs_extra, "runs"), "runs")),
        ("run_totals", lambda: run_totals(frames["runs"], frames["histograms"], _blocks=col._blocks())),
        ("table gate (check_rows of every table)", lambda: col.gate(frames)),
        ("ingest_paths, all of it", lambda: ingest_paths([s["dir"]])),
    ]


def time_stages(label: str, paths: list[Path], repeat: int) -> None:
    """(d) Where ingest's CPU time goes: each stage of ``ingest_paths`` alone (ingest's own functions on the
    same files), best of ``repeat`` rounds, each round beside bare orjson, in x orjson. The row tuples'
    own cost is emit_rows less decode and scan. What ingest_paths costs beyond the sum of its stages is the
    batch machinery's and the stages' together: one stage's fresh memory and cold caches are the next
    one's (a stage timed alone reuses the memory its last round freed)."""
    stages = _stages(paths)
    best = {name: float("inf") for name, _ in stages}
    base = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        bench_orjson(paths)
        base = min(base, time.process_time() - t0)
        for name, fn in stages:
            gc.collect()
            gc.disable()  # as ingest runs (storagebench.ingest._collector._gc_paused)
            try:
                t0 = time.process_time()
                fn()
                best[name] = min(best[name], time.process_time() - t0)
            finally:
                gc.enable()
    names = [name for name, _ in stages]
    rows_only = best[names[5]] - best[names[3]] - best[names[4]]
    parts = [best[n] for n in names[:3]] + [best[names[5]]] + [best[n] for n in names[6:11]]
    print(f"(d) stages of ingest_paths alone, {label}: CPU ms, best of {repeat}; bare orjson {base * 1e3:.1f} ms")
    for name in names:
        print(f"  {name:50s} {best[name] * 1e3:8.1f} ms {best[name] / base:6.2f} x orjson")
    print(f"    of emit_rows, the row tuples alone (emit_rows - decode - scan) {rows_only * 1e3:8.1f} ms "
          f"{rows_only / base:6.2f} x orjson")
    total = sum(parts)
    print(f"    sum of the stages alone (walk, read, run_id, emit_rows ... gate)  {total * 1e3:8.1f} ms "
          f"{total / base:6.2f} x orjson")
    rest = best[names[-1]] - total
    print(f"    ingest_paths beyond that sum (batch machinery; stages together)   {rest * 1e3:8.1f} ms "
          f"{rest / base:6.2f} x orjson")


_KERNEL_CHILD = """
import gc, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import orjson
from storagebench.ingest import ingest_paths
paths = sorted(Path({src!r}).glob("*.json"))
def bare():
    for p in paths:
        orjson.loads(p.read_bytes())
def ours():
    ingest_paths([{src!r}])
for fn in (bare, ours):  # warm: imports, caches
    fn()
best = {{}}
for _ in range({repeat}):
    for name, fn in (("bare", bare), ("ingest", ours)):
        gc.collect()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        fn()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        row = (r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt)
        if name not in best or sum(row[:2]) < sum(best[name][:2]):
            best[name] = row
print(*best["bare"], *best["ingest"])
"""

#: glibc malloc kept from handing freed memory back to the kernel (mallopt(3)'s environment names)
_KEEP_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
                "MALLOC_TOP_PAD_": str(64 << 20)}


def time_kernel(label: str, paths: list[Path], repeat: int) -> None:
    """(e) User and kernel CPU of bare orjson and of ingest_paths, in a fresh child process each, best of
    ``repeat`` rounds by user + kernel time, with minor page faults: once as it runs, once with glibc malloc
    keeping freed memory (:data:`_KEEP_MEMORY`, mallopt(3)). The difference is what the kernel spends
    handing ingest fresh, zeroed pages again each round (bare orjson frees each document before the next)."""
    print(f"(e) user and kernel CPU, {label}: best of {repeat} rounds in a child process, ms")
    for words, extra in (("as it runs", {}), ("glibc malloc keeping freed memory", _KEEP_MEMORY)):
        out = subprocess.run([sys.executable, "-c", _KERNEL_CHILD.format(root=str(ROOT), src=str(paths[0].parent),
                                                                          repeat=repeat)],
                             capture_output=True, text=True, check=True, env={**os.environ, **extra})
        bu, bs, bf, iu, is_, if_ = (float(x) for x in out.stdout.split())
        print(f"  {words}: bare orjson user {bu * 1e3:.1f} + kernel {bs * 1e3:.1f} ({bf:.0f} faults); ingest_paths "
              f"user {iu * 1e3:.1f} + kernel {is_ * 1e3:.1f} ({if_:.0f} faults): {(iu + is_) / (bu + bs):.2f} x orjson "
              f"CPU, kernel {is_ / (bu + bs):.2f} x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000, help="json+ files for the timing table (a)")
    ap.add_argument("--corpus", choices=("multijob", "dense", "single", "both"), default="both",
                    help="timing corpus: the real multi-job outputs, the dense-bin ones (--dense-dir), variants of "
                         "one single-job output, or both multijob and single")
    ap.add_argument("--dense-dir", type=Path, default=Path("/tmp/sb-fio-dense"),
                    help="the dense-bin corpus's fio outputs (benchmarks/make_fio_corpus.py --dense)")
    ap.add_argument("--mem-files", type=int, default=20000, help="json+ files for the memory test (b); 0 skips it")
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats, round-robin (best of)")
    ap.add_argument("--batch-files", type=int, default=500, help="files per parquet batch in (b)")
    ap.add_argument("--compare-ref", default="", help="also time the storagebench of this git ref (e.g. main)")
    ap.add_argument("--stages", action="store_true", help="also (d): the CPU time of each stage of ingest alone")
    ap.add_argument("--kernel", action="store_true", help="also (e): user and kernel CPU, and page faults")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="sb-bench-ingest-") as tmp:
        tmp = Path(tmp)
        if args.corpus in ("multijob", "both"):
            paths = make_multijob_files(tmp / "m", args.files)
            time_corpus(f"multijob corpus (copies of {len(list(MULTIJOB.glob('*.json')))} real fio 3.33 outputs, "
                        "numjobs 1-2 without group_reporting, iodepth 1-32)", paths, args, tmp)
            time_decoders("multijob corpus", paths, args.repeat)
            if args.stages:
                time_stages("multijob corpus", paths, args.repeat)
            if args.kernel:
                time_kernel("multijob corpus", paths, args.repeat)
        if args.corpus == "dense":
            paths = make_multijob_files(tmp / "d", args.files, args.dense_dir)
            time_corpus(f"dense-bin corpus (copies of {len(list(args.dense_dir.glob('*.json')))} real fio 3.33 "
                        "outputs of 4-s runs, numjobs 1-2 without group_reporting, iodepth 1-32)", paths, args, tmp)
            time_decoders("dense-bin corpus", paths, args.repeat)
            if args.stages:
                time_stages("dense-bin corpus", paths, args.repeat)
            if args.kernel:
                time_kernel("dense-bin corpus", paths, args.repeat)
        if args.corpus in ("single", "both"):
            paths = make_files(tmp / "a", args.files)
            time_corpus(f"single-job corpus (variants of {FIXTURE.name})", paths, args, tmp)
            time_decoders("single-job corpus", paths, args.repeat)

        if args.mem_files > 0:
            src = tmp / "b"
            make_files(src, args.mem_files)
            _, _, idle, _ = peak_rss(src, tmp / "out0", args.mem_files, args.batch_files, run=False)
            runs, hist, peak, dt = peak_rss(src, tmp / "out", args.mem_files, args.batch_files, run=True)
            print(f"(b) ingest_to_parquet of {args.mem_files} json+ files (batch_files={args.batch_files}) "
                  f"in a subprocess: {dt:.1f} s, {runs} runs rows, {hist} histogram rows")
            print(f"  peak RSS {peak / 2**20:.0f} MiB (import-only baseline {idle / 2**20:.0f} MiB); "
                  f"target < 1024 MiB: {'OK' if peak < 2**30 else 'MISSED'}")
            if args.compare_ref:
                tree = ref_tree(args.compare_ref, tmp)
                _, _, ref_idle, _ = peak_rss(src, tmp / "out1", args.mem_files, args.batch_files, run=False, root=tree)
                _, _, ref_peak, ref_dt = peak_rss(src, tmp / "out2", args.mem_files, args.batch_files, run=True,
                                                  root=tree)
                print(f"  storagebench at {args.compare_ref}: {ref_dt:.1f} s, peak RSS {ref_peak / 2**20:.0f} MiB "
                      f"(import-only {ref_idle / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

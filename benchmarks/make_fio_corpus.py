#!/usr/bin/env python
"""Capture the real fio outputs of the multi-job ingest corpus (``benchmarks/data/fio_multijob/``).

Every file is the untouched ``--output`` of one real fio run, made here:

* fio 3.33 (the one on ``PATH``; the script refuses another version), ``ioengine=libaio``,
  ``direct=1``, ``rw=randread``, ``bs=4k``, 1-second ``time_based`` runs;
* ``iodepth`` 1, 2, 4, 8, 16, 32 x ``numjobs`` 1 and 2, **without** ``group_reporting`` (so a
  numjobs=2 output holds two job entries of the same name, each with its own json+ histogram);
* ``--output-format=json+`` (``clat_ns.bins``);
* ``--repeat`` repetitions of each configuration (default 3: 36 files).

The target is a 128 MiB file of random bytes that this script creates in a fresh temporary
directory under ``--scratch`` (default ``/var/tmp``, a disk filesystem: O_DIRECT needs one) and
removes afterwards; nothing else is read or written.

``benchmarks/bench_ingest.py --corpus multijob`` replicates these few dozen files, byte for byte,
to ~2,000 files: nothing in a copy is changed, so every copy is a real fio output (copies of
one run share its content and hence its ``run_id``).

``--dense`` makes the dense-bin corpus of issue 21 instead (kept out of git, under ``/tmp`` by default):
one run of each of the 12 configurations, each ``--runtime`` seconds (default 4: a longer run
meets more distinct latencies, so each json+ histogram has more bins, ~500 a job on this VM).
``bench_ingest.py --corpus dense --dense-dir DIR`` replicates them to ~2,000 files like the
multi-job corpus.

Usage::

    .venv/bin/python benchmarks/make_fio_corpus.py            # writes benchmarks/data/fio_multijob/
    .venv/bin/python benchmarks/make_fio_corpus.py --dense    # writes /tmp/sb-fio-dense/
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "data" / "fio_multijob"
DENSE_OUT = Path("/tmp/sb-fio-dense")
IODEPTHS = (1, 2, 4, 8, 16, 32)
NUMJOBS = (1, 2)
FILE_BYTES = 128 * 2**20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None,
                    help=f"directory for the fio outputs (replaced; default {OUT}, or {DENSE_OUT} with --dense)")
    ap.add_argument("--repeat", type=int, default=None, help="runs of each configuration (default 3, 1 with --dense)")
    ap.add_argument("--dense", action="store_true", help="the dense-bin corpus: longer runs, one each")
    ap.add_argument("--runtime", type=int, default=None, help="s per run (default 1, 4 with --dense)")
    ap.add_argument("--scratch", type=Path, default=Path("/var/tmp"), help="where the 128 MiB target file lives")
    ap.add_argument("--fio", default=shutil.which("fio") or "fio")
    args = ap.parse_args(argv)
    args.out = args.out or (DENSE_OUT if args.dense else OUT)
    args.repeat = args.repeat or (1 if args.dense else 3)
    args.runtime = args.runtime or (4 if args.dense else 1)

    version = subprocess.run([args.fio, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if version != "fio-3.33":
        print(f"this corpus is fio 3.33 output; {args.fio} is {version}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.json"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="sb-corpus-", dir=args.scratch) as tmp:
        target = Path(tmp) / "randread.dat"
        with open(target, "wb") as f:  # real data: reads of unwritten extents would not touch the disk
            for _ in range(FILE_BYTES // 2**20):
                f.write(os.urandom(2**20))
            f.flush()
            os.fsync(f.fileno())
        n = 0
        for rep in range(args.repeat):
            for numjobs in NUMJOBS:
                for iodepth in IODEPTHS:
                    name = f"randread_qd{iodepth:02d}_nj{numjobs}_r{rep}.json"
                    cmd = [args.fio, "--name=randread", f"--filename={target}", "--rw=randread", "--bs=4k",
                           "--ioengine=libaio", "--direct=1", f"--iodepth={iodepth}", f"--numjobs={numjobs}",
                           f"--size={FILE_BYTES}", "--time_based", f"--runtime={args.runtime}",
                           "--output-format=json+", f"--output={args.out / name}"]
                    subprocess.run(cmd, check=True, capture_output=True, timeout=60 + args.runtime)
                    n += 1
    total = sum(p.stat().st_size for p in args.out.glob("*.json"))
    bins = [len(job[d]["clat_ns"].get("bins", {})) for p in args.out.glob("*.json")
            for job in json.loads(p.read_bytes())["jobs"] for d in ("read", "write", "trim") if job[d]["total_ios"]]
    print(f"{n} fio outputs ({total / 2**20:.1f} MiB) in {args.out}: {len(bins)} job rows with I/O, "
          f"{sum(bins) / max(len(bins), 1):.0f} json+ bins a row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

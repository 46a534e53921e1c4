"""What storagebench's runner adds to a sweep's wall time, against bare fio.

A 16-point grid (iodepth 1, 2, 4, 8 x numjobs 1, 2, 4, 8; 4 KiB random read, libaio,
direct=1, runtime 2 s, a 16 MiB file) is run two ways in the same process, in alternating
order over ``--rounds`` rounds:

* ``storagebench``: :func:`storagebench._runner.run_study` into a fresh results directory
  (job files, safety check, provenance, fio with a timeout, JSON check, fsync + rename);
* ``bare fio``: the same 16 job files (rendered once by storagebench beforehand) run as
  ``fio --output-format=json+ --output=... job.fio`` back to back with ``subprocess.run``.

Reported per round and as the median over rounds, in % of the bare fio wall time (target
<= 0.5 %, issue 21) and in ms per run:

* ``A/B``: storagebench wall time minus bare fio wall time. Honest but noisy on a shared
  machine: two sweeps of 16 fio runs differ by a few % by themselves.
* ``accounted``: storagebench wall time minus the wall time of its own fio processes (each
  run's ``duration_s`` in ``provenance.json``, spawn to exit): the time storagebench spends
  outside fio, free of fio's run-to-run noise. The same accounting for the bare loop
  (loop wall minus its ``subprocess.run`` times) is printed as the floor.

* ``gap``: the median time between one run's fio exit and the next run's fio start (``finished_at`` ->
  ``started_at`` of consecutive runs in ``provenance.json``; what the runner does between two fio runs,
  the quiet-host window's wait included), in ms and in % of the run's nominal duration. Less exposed to
  a loaded machine than the sums above: fio's own start and exit, which a loaded machine slows down
  most, are outside it.

* ``check``: the median time a run waits in the quiet-host check itself (``_runone._quiet_record``, wrapped with a
  timer: the window's remaining wait, the last reading, the scan for other fio), in ms and in % of the run's
  nominal duration: the check's cost on the sweep's critical path, the least exposed to a loaded machine (most
  of it is a sleep).

``--quiet-window S`` sets the runner's quiet-host sample window (``run_study(quiet_window_s=)``;
default 1 % of runtime + ramp_time, 0.02 s here; 0 reads the device counters back to back), to see
what the check costs.

``--uncredited`` adds a third way in the same rounds, ``uncredited``: storagebench with the window *not*
credited with the previous run's watched fio life (``QuietProbe.credit`` made a no-op), as the check was
before the run's own watch (issue 21, item 4): each run then waits for its window between the fio runs.
The same numbers are printed for it, so before and after are measured side by side against one bare loop.
Target (issue 21): <= 0.5 % with the check on. Measured 2026-11-28 on the shared 2-core VM (as root,
``--rounds 5 --uncredited``): accounted overhead, median of 5 rounds, 0.46 % credited (rounds 0.27 to 0.96 %,
round 0 7.2 %: the first sweep of a process also pays fio's parse check of each new job file, 0.15 s each)
against 1.18 % uncredited; gap between fio runs 6.8 against 24.3 ms; the check itself 0.08 against 19.97 ms a
run. A/B is dominated by the host's noise (2.23 against 2.31 %; fio's own wall time moves by a few %).

``--ramp S`` gives every run a ``ramp_time`` of S s; the bare loop runs the same job files, ramp included. fio
resets its counts when the ramp ends, so the run's own watch samples the device while fio runs and places the
ramp's end on those samples (``storagebench._runwatch``); only the measured part is compared with fio's counts
and credited. ``watched`` counts the runs whose own I/O was told apart (``during_run.attributed``). Before that
watch, a ramped run was not attributed and waited its whole window, as ``uncredited`` does now. Measured
2026-11-28 on the shared 2-core VM (as root, ``--rounds 3 --ramp 1 --uncredited``, 16 runs of 1 s ramp + 2 s,
at the lowest load of the session, 1.1 rising to 4.6: benchmarks/data/sweep_overhead_ramp.txt): accounted overhead,
median of 3 rounds, 0.44 % credited (rounds 0.31 and 0.44 %, round 0 5.0 %: fio's parse check of each new job
file) against 1.15 % uncredited; gap between fio runs 7.9 against 33.5 ms; the check itself 0.07 against 29.1 ms
a run; 16 of 16 runs watched. A/B: 2.20 against 1.43 %, with one round where fio itself took 1.2 s longer; an
earlier run at load 5.7 gave 0.33 against 1.30 % accounted and -0.19 against 1.95 % A/B.

Run: ``.venv/bin/python benchmarks/bench_sweep_overhead.py [--rounds 2] [--runtime 2] [--ramp S]
[--quiet-window S] [--uncredited]``
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import storagebench._runone as runone  # noqa: E402
from storagebench._hostinfo import QuietProbe  # noqa: E402
from storagebench._jobfile import render_jobfile  # noqa: E402
from storagebench._runner import run_study  # noqa: E402
from storagebench._study import load_study  # noqa: E402
from storagebench.records import Provenance  # noqa: E402

_CHECK_S: list[float] = []


def _timed_quiet_record(*args, _inner=runone._quiet_record, **kwargs):
    t0 = time.perf_counter()
    try:
        return _inner(*args, **kwargs)
    finally:
        _CHECK_S.append(time.perf_counter() - t0)


runone._quiet_record = _timed_quiet_record


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds; each runs both ways, order alternating")
    ap.add_argument("--runtime", type=float, default=2.0, help="fio runtime per run, s")
    ap.add_argument("--dir", default=None, help="scratch directory on a disk filesystem (default: a temp dir in /var/tmp)")
    ap.add_argument("--fio", default=shutil.which("fio") or "fio")
    ap.add_argument("--quiet-window", type=float, default=None,
                    help="run_study(quiet_window_s=...), s (default: the runner's default)")
    ap.add_argument("--ramp", type=float, default=0.0,
                    help="ramp_time of every run, s (bare fio runs the same job files, ramp included)")
    ap.add_argument("--uncredited", action="store_true",
                    help="also run storagebench with the quiet window not credited with the previous run's fio life")
    args = ap.parse_args(argv)
    extra = {} if args.quiet_window is None else {"quiet_window_s": args.quiet_window}

    scratch = Path(tempfile.mkdtemp(prefix="sb-bench-", dir=args.dir or "/var/tmp"))
    try:
        study = load_study({
            "name": "bench_overhead",
            "factors": {"iodepth": [1, 2, 4, 8], "numjobs": [1, 2, 4, 8]},
            "fixed": {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": 1},
            "runtime": args.runtime,
            "size": "16m",
            **({"ramp_time": args.ramp} if args.ramp else {}),
        })
        target = scratch / "data"
        plan = study.expand()
        jobs_dir = scratch / "bare-jobs"
        jobs_dir.mkdir()
        job_paths = []
        for point in plan:
            p = jobs_dir / f"{point.run_id}.fio"
            p.write_text(render_jobfile(point, study, target))
            job_paths.append(p)
        # lay the file out once, so that neither way pays for it
        subprocess.run([args.fio, "--output=/dev/null", str(job_paths[0]), "--runtime=1"], check=True)

        def storagebench_way(r: int, credited: bool = True) -> tuple[float, float, float, float, int]:
            _CHECK_S.clear()
            credit = QuietProbe.credit
            if not credited:
                QuietProbe.credit = lambda self, *a: None
            try:
                t0 = time.perf_counter()
                res = run_study(study, target=target, out_dir=scratch / f"results-{r}-{credited}", fio_bin=args.fio,
                                progress=False, **extra)
                dt = time.perf_counter() - t0
            finally:
                QuietProbe.credit = credit
            assert res.ok and len(res.completed) == len(plan), res.errors
            provs = sorted((Provenance.read(d / "provenance.json") for d in res.run_dirs()),
                           key=lambda p: p.started_at)
            in_fio = sum(p.duration_s for p in provs)
            gap = statistics.median(_ts(b.started_at) - _ts(a.finished_at) for a, b in itertools.pairwise(provs))
            watched = sum(bool((p.quiet_host or {}).get("during_run", {}).get("attributed")) for p in provs)
            return dt, in_fio, gap, statistics.median(_CHECK_S), watched

        def bare_way(r: int) -> tuple[float, float]:
            out = scratch / f"bare-{r}"
            out.mkdir()
            in_fio = 0.0
            t0 = time.perf_counter()
            for p in job_paths:
                t1 = time.perf_counter()
                subprocess.run([args.fio, "--output-format=json+", f"--output={out / (p.stem + '.json')}", str(p)],
                               check=True, stdout=subprocess.DEVNULL)
                in_fio += time.perf_counter() - t1
            return time.perf_counter() - t0, in_fio

        n = len(plan)
        ways = ("storagebench", "uncredited", "bare") if args.uncredited else ("storagebench", "bare")
        rows = []
        for r in range(args.rounds):
            order = ways[r % len(ways):] + ways[:r % len(ways)]
            times = {}
            for way in order:
                times[way] = bare_way(r) if way == "bare" else storagebench_way(r, credited=way == "storagebench")
            bare, bare_fio = times["bare"]
            for way in ways[:-1]:
                sb, sb_fio, gap, check, watched = times[way]
                rows.append({
                    "way": way, "round": r, "first": order[0], "sb_s": sb, "bare_s": bare,
                    "ab_pct": 100.0 * (sb - bare) / bare, "ab_ms": 1000.0 * (sb - bare) / n,
                    "acc_pct": 100.0 * (sb - sb_fio) / bare, "acc_ms": 1000.0 * (sb - sb_fio) / n,
                    "floor_ms": 1000.0 * (bare - bare_fio) / n, "gap_ms": 1000.0 * gap, "check_ms": 1000.0 * check,
                    "watched": watched,
                })
        print(f"sweep overhead: {n} runs x {args.runtime:g} s" + (f" + {args.ramp:g} s ramp" if args.ramp else "")
              + f", fio {args.fio}"
              + (f", quiet window {args.quiet_window:g} s" if args.quiet_window is not None else ""))
        print(f"{'way':>12} {'round':>5} {'first':>12} {'storagebench_s':>14} {'bare_fio_s':>10} {'A/B_%':>7} "
              f"{'A/B_ms/run':>10} {'accounted_%':>11} {'accounted_ms/run':>16} {'bare_loop_ms/run':>16} {'gap_ms':>7} "
              f"{'check_ms':>8} {'watched':>7}")
        for w in rows:
            print(f"{w['way']:>12} {w['round']:>5} {w['first']:>12} {w['sb_s']:>14.2f} {w['bare_s']:>10.2f} "
                  f"{w['ab_pct']:>7.2f} {w['ab_ms']:>10.1f} {w['acc_pct']:>11.2f} {w['acc_ms']:>16.1f} "
                  f"{w['floor_ms']:>16.1f} {w['gap_ms']:>7.1f} {w['check_ms']:>8.2f} {w['watched']:>7}")
        for way in ways[:-1]:
            mine = [w for w in rows if w["way"] == way]
            med = {k: statistics.median(w[k] for w in mine) for k in ("ab_pct", "ab_ms", "acc_pct", "acc_ms", "gap_ms",
                                                                       "check_ms")}
            print(f"{way}: median A/B overhead: {med['ab_pct']:.2f} % ({med['ab_ms']:.1f} ms per run); "
                  f"median accounted overhead: {med['acc_pct']:.2f} % ({med['acc_ms']:.1f} ms per run); target <= 0.5 %; "
                  f"median gap between fio runs {med['gap_ms']:.1f} ms "
                  f"({100 * med['gap_ms'] / 1000 / study.run_duration_s:.2f} % of a run); median quiet-host check "
                  f"{med['check_ms']:.2f} ms ({100 * med['check_ms'] / 1000 / study.run_duration_s:.2f} % of a run)")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

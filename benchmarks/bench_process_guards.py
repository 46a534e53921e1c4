"""What the process guards cost per run, against spawning fio once (``fio --version``), in the same run.

Per run the runner adds, outside fio's own time:

* ``quiet check``: :meth:`storagebench._hostinfo.QuietProbe.finish` with a 0 s window: two reads of
  the target device's ``stat`` file and one scan of ``/proc`` for other fio processes (the window
  itself, 1 % of runtime + ramp_time by default, is measured by ``bench_sweep_overhead.py --quiet-window``);
* ``leftover scan``: :func:`storagebench.fio.process.run_processes`, the ``/proc`` scan that
  :meth:`FioProcess.close` does after fio exits to check that no worker is left;
* ``watchdog``: one registration and one unregistration (two small writes to a pipe);
* ``spawn + wait``: :func:`storagebench.fio.process.run` of ``fio --version`` (its own session,
  ``setpriv --pdeathsig``, the watchdog, pidfd wait, the leftover scan) against
  ``subprocess.run`` of the same command: the guards' share of starting fio.

Each is timed ``--n`` times (median, ms) and printed as a ratio to the bare ``subprocess.run`` of
``fio --version`` (the cheapest fio process there is). The number of processes on the host is
printed too: both scans read ``/proc/<pid>/stat`` of each.

Run: ``.venv/bin/python benchmarks/bench_process_guards.py [--n 200]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storagebench._hostinfo import QuietProbe  # noqa: E402
from storagebench.fio import process  # noqa: E402


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="repetitions of each measurement")
    args = ap.parse_args(argv)
    fio = process.find_fio()
    target = Path(tempfile.mkdtemp(prefix="sb-bench-guards-", dir="/var/tmp")) / "t.dat"
    try:
        process.run([fio, "--version"], timeout_s=30)  # start the watchdog once, outside the timings
        bare = _median_ms(lambda: subprocess.run([fio, "--version"], capture_output=True), args.n)
        guarded = _median_ms(lambda: process.run([fio, "--version"], timeout_s=30), args.n)
        quiet = _median_ms(lambda: QuietProbe(target).finish(0.0), args.n)
        scan = _median_ms(lambda: process.run_processes(str(target)), args.n)

        def reg() -> None:
            process._WATCHDOG.unregister(process._WATCHDOG.register(str(target), "fio"))

        watchdog = _median_ms(reg, args.n)
        procs = sum(1 for d in os.listdir("/proc") if d.isdigit())
        print(f"process guards: median of {args.n}, {procs} processes on this host, fio {fio}")
        print(f"{'measurement':<34} {'ms':>8} {'ratio to bare fio --version':>28}")
        rows = [("bare subprocess.run(fio --version)", bare), ("fio.process.run(fio --version)", guarded),
                ("quiet check (0 s window)", quiet), ("leftover scan of /proc", scan),
                ("watchdog register + unregister", watchdog)]
        for name, ms in rows:
            print(f"{name:<34} {ms:>8.3f} {ms / bare:>28.3f}")
        per_run = quiet + scan + watchdog
        print(f"added per run outside fio (quiet check + leftover scan + watchdog): {per_run:.3f} ms "
              f"= {per_run / bare:.3f} x a bare fio --version, {100 * per_run / 2000:.3f} % of a 2 s run")
        return 0
    finally:
        import shutil

        shutil.rmtree(target.parent, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""Controller overhead of fio client/server: wall time of an N-client point vs a 1-client point.

Every point runs the same job (4 KiB random read, psync, ``runtime`` s, ``time_based``) through
:func:`storagebench._clientserver.run_clients` on loopback test servers (one directory each). The
wall time of the client process is measured for 1 client and for N clients, ``--repeat`` times
each, interleaved; reported: medians, the ratio N-client / 1-client, and the overhead beyond the
runtime. A ratio near 1 means the controller adds no per-client serial cost; fio's client sends
the job files, starts the servers and gathers their stats concurrently.

The version probe (about 1 s per server, cached per process) is done once before timing and is
not part of the ratio; ``--probe`` times it separately.

Usage::

    .venv/bin/python benchmarks/bench_controller.py               # N = 4, runtime 2 s, 3 repeats
    .venv/bin/python benchmarks/bench_controller.py -n 8 --runtime 1 --repeat 5 --probe
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storagebench._clientserver import run_clients  # noqa: E402
from storagebench.servers import fio_servers, server_versions  # noqa: E402

JOB = """[global]
ioengine=psync
rw=randread
bs=4k
size=16m
runtime={runtime}
time_based

[bench]
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=4, help="clients of the N-client point (default 4)")
    ap.add_argument("--runtime", type=float, default=2.0, help="fio runtime per point, s (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each point (default 3)")
    ap.add_argument("--probe", action="store_true", help="also time the per-host version probe")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sb-bench-ctl-") as tmp, fio_servers(args.n) as servers:
        d = Path(tmp)
        job = d / "job.fio"
        job.write_text(JOB.format(runtime=args.runtime))
        hosts = [s.host for s in servers]
        t0 = time.monotonic()
        server_versions(hosts)
        probe_s = time.monotonic() - t0
        run_clients(job, hosts, d / "warm.json", d / "warm.txt", 120)  # lay out files, cache versions
        walls: dict[int, list[float]] = {1: [], args.n: []}
        for r in range(args.repeat):
            for n in (1, args.n):
                res = run_clients(job, hosts[:n], d / f"o{n}-{r}.json", d / f"e{n}-{r}.txt", 120)
                walls[n].append(res.elapsed_s)
    one, many = statistics.median(walls[1]), statistics.median(walls[args.n])
    print(f"fio runtime per point     : {args.runtime:.1f} s, {args.repeat} repeats, interleaved")
    print(f"1-client point, wall      : median {one:.2f} s  {['%.2f' % w for w in walls[1]]}")
    print(f"{args.n}-client point, wall      : median {many:.2f} s  {['%.2f' % w for w in walls[args.n]]}")
    print(f"ratio {args.n}-client / 1-client  : {many / one:.3f}")
    print(f"overhead beyond runtime   : 1 client {one - args.runtime:.2f} s, {args.n} clients {many - args.runtime:.2f} s")
    if args.probe:
        print(f"version probe, {args.n} hosts in parallel: {probe_s:.2f} s (once per host and process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How well the quiet-host watch tells a ramped run's own I/O from others' (``storagebench._runwatch``).

fio resets its counts when ``ramp_time`` ends; the runner samples the target's device while fio runs, places the
ramp's end on the samples and compares the device's I/O from there with fio's counts (``during_run`` in each run's
``quiet_host`` record). On a loop device over a file this script creates (as root; torn down by its exact path),
the sweep-overhead grid (iodepth 1, 2, 4, 8 x numjobs 1, 2, 4, 8; 4 KiB direct random reads, 16 MiB, ``--ramp``
+ ``--runtime`` s) is run twice:

* ``quiet``: nothing else uses the device -- every run should be attributed and quiet (a busy one is a false
  alarm), with the device's I/O beyond fio's (``excess_ios``) within the recorded ``tolerance_ios``;
* ``writer``: another process writes 4 KiB with O_DIRECT to the device's last 16 MiB every ``--pace`` s during
  the whole sweep -- every run should be flagged busy (a quiet one is a miss).

Printed per condition: runs attributed, quiet, busy; ``excess_ios`` and ``tolerance_ios`` in % of fio's I/Os
(min, median, max); runs whose ``|excess|`` is within the tolerance. Measured 2026-11-28 on the shared 2-core VM
(benchmarks/data/ramp_watch.txt, 1 s ramp + 2 s, writer every 2 ms): quiet, 16 of 16 attributed and quiet (no false
alarm), ``excess_ios`` 0.000 to 0.089 % of fio's I/Os, all within their tolerance (0.066 to 0.201 %); writer, 16
of 16 busy (no miss), excess 0.48 to 3.4 % of fio's I/Os against tolerances of 0.06 to 0.19 %.

With ``--cpu-load N``, N busy-loop processes run through both sweeps: on a host whose CPUs are taken, fio's job
sees the end of its ``runtime`` later than its last I/O, which the watch's bracket of the ramp's end must allow for
(:func:`storagebench._runwatch.ramp_io_record`).

Run (root): ``.venv/bin/python benchmarks/bench_ramp_watch.py [--ramp 1] [--runtime 2] [--pace 0.002] [--cpu-load 2]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storagebench._runner import run_study  # noqa: E402
from storagebench._study import load_study  # noqa: E402

_WRITER = """
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
buf, i = mmap.mmap(-1, 4096), 0
print("go", flush=True)
while True:
    os.pwrite(fd, buf, (48 << 20) + (i % 4096) * 4096)
    i += 1
    time.sleep(float(sys.argv[2]))
"""


def _sweep(dev: str, out: Path, args: argparse.Namespace) -> list[dict]:
    study = load_study({"name": "ramp_watch", "factors": {"iodepth": [1, 2, 4, 8], "numjobs": [1, 2, 4, 8]},
                        "fixed": {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": 1},
                        "runtime": args.runtime, "ramp_time": args.ramp, "size": "16m"})
    res = run_study(study, target=dev, out_dir=out, progress=False)
    assert res.ok, res.errors
    runs = (out / "ramp_watch" / "raw").glob("*/provenance.json")
    return [json.loads(p.read_text())["quiet_host"]["during_run"] for p in runs]


def _summary(name: str, runs: list[dict]) -> str:
    att = [r for r in runs if r.get("attributed")]

    def pct(key: str) -> str:
        v = sorted(100.0 * r[key] / r["fio_ios"] for r in att)
        return f"{v[0]:.3f} / {statistics.median(v):.3f} / {v[-1]:.3f}" if v else "-"

    return (f"{name:>7}: {len(runs)} runs, attributed {len(att)}, quiet {sum(r['quiet'] is True for r in att)}, "
            f"busy {sum(r['quiet'] is False for r in att)}; excess_ios % of fio's (min / median / max) {pct('excess_ios')}; "
            f"tolerance_ios % {pct('tolerance_ios')}; |excess| within tolerance "
            f"{sum(abs(r['excess_ios']) <= r['tolerance_ios'] for r in att)}; "
            f"notes {sorted({r['note'] for r in runs if not r.get('attributed')})}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ramp", type=float, default=1.0, help="ramp_time, s")
    ap.add_argument("--runtime", type=float, default=2.0, help="runtime, s")
    ap.add_argument("--pace", type=float, default=0.002, help="the writer's sleep between two 4 KiB writes, s")
    ap.add_argument("--cpu-load", type=int, default=0, help="busy-loop processes running through both sweeps (a "
                    "host whose CPUs are taken: fio's jobs and the sampler wait for one)")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="sb-rampwatch-", dir="/var/tmp"))
    img = scratch / "loop.img"
    with open(img, "wb") as fh:
        fh.truncate(64 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(img)], capture_output=True, text=True,
                         check=True).stdout.strip()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.cpu_load)]
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={dev}", "bs=1M", "count=64", "oflag=direct", "status=none"],
                       check=True)  # no holes: a read of a hole is no I/O of the backing file's
        print(f"ramp watch: {dev} (loop over {img}), 16 runs x ({args.ramp:g} s ramp + {args.runtime:g} s), "
              f"writer every {args.pace:g} s, {args.cpu_load} busy-loop process(es)")
        print(_summary("quiet", _sweep(dev, scratch / "quiet", args)))
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, dev, str(args.pace)], stdout=subprocess.PIPE,
                                  text=True)
        try:
            assert writer.stdout.readline().strip() == "go"
            print(_summary("writer", _sweep(dev, scratch / "writer", args)))
        finally:
            writer.kill()
            writer.wait()
        return 0
    finally:
        for p in spinners:
            p.kill()
            p.wait()
        subprocess.run(["losetup", "-d", dev], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

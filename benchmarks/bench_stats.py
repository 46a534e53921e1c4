#!/usr/bin/env python
"""Benchmark of ``storagebench.stats.compare`` on a large grouped table (storagebench issue 3).

A synthetic ``runs``-like table of N rows (default 1,000,000): G groups (``by=["rw", "bs_bytes"]``) x 2
levels of ``stripe_width`` (1 = baseline, 4) x N / (2 G) runs per cell, log-normal IOPS with a 2% CV
and a 3% effect, one distinct ``run_id`` per row. Each mode runs in a fresh subprocess that builds the
same table (same seed) and then times only the statistics; peak memory is that subprocess's
``ru_maxrss``. Modes:

* ``build``              build the table only (memory floor of every other mode)
* ``bare_ttest``         baseline: pandas ``groupby`` + ``scipy.stats.ttest_ind(equal_var=False)`` per group
* ``bare_bootstrap``     baseline: pandas ``groupby`` + ``scipy.stats.bootstrap(method="BCa")`` of the
                         ratio of means per group (same resamples as ``compare_boot``)
* ``compare``            ``compare(df, "stripe_width", 1, "iops", by=[...])``: ratio of geometric means with
                         p and CI from Welch on log values + Mann-Whitney + Hedges' g + Holm, every check
* ``compare_boot``       the same with ``n_boot`` (BCa CI of the difference of mean logs, plus the p of the
                         inverted BCa interval: ~40 more interval evaluations per group on the same resamples)

Reported: wall seconds of the statistics, ratio to the matching bare baseline, peak RSS (MiB) and the
increase over ``build``. Timings are noisy on a shared machine: compare ratios, not absolute numbers.

Usage::

    .venv/bin/python benchmarks/bench_stats.py                       # 1,000,000 rows, 200 groups, 999 resamples
    .venv/bin/python benchmarks/bench_stats.py --rows 100000 --groups 50 --n-boot 999 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("build", "bare_ttest", "bare_bootstrap", "compare", "compare_boot")


def make_table(rows: int, groups: int, seed: int = 1):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    per_cell = rows // (2 * groups)
    n = per_cell * 2 * groups
    g = np.repeat(np.arange(groups), 2 * per_cell)
    stripe = np.tile(np.repeat([1, 4], per_cell), groups)
    iops = 50_000.0 * np.where(stripe == 4, 1.03, 1.0) * np.exp(rng.normal(0.0, 0.02, n))
    return pd.DataFrame({
        "rw": np.where(g % 2 == 0, "randread", "randwrite"),
        "bs_bytes": 4096 * (1 + g // 2),
        "stripe_width": stripe,
        "run_id": pd.Series(np.arange(n)).map("{:012x}".format),
        "direction": "read",
        "iops": iops,
    })


def _child(mode: str, rows: int, groups: int, n_boot: int) -> dict:
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from scipy import stats as st

    from storagebench.stats import compare  # imported before the clock, as scipy is for the baselines

    df = make_table(rows, groups)
    by = ["rw", "bs_bytes"]
    t0 = time.perf_counter()
    out = 0
    if mode == "bare_ttest":
        for _, g in df.groupby(by, sort=True):
            a = g.loc[g["stripe_width"] == 1, "iops"].to_numpy()
            b = g.loc[g["stripe_width"] == 4, "iops"].to_numpy()
            out += st.ttest_ind(b, a, equal_var=False).pvalue < 0.05
    elif mode == "bare_bootstrap":
        def ratio(x, y, axis=-1):
            return np.mean(x, axis=axis) / np.mean(y, axis=axis)

        for _, g in df.groupby(by, sort=True):
            a = g.loc[g["stripe_width"] == 1, "iops"].to_numpy()
            b = g.loc[g["stripe_width"] == 4, "iops"].to_numpy()
            res = st.bootstrap((b, a), ratio, n_resamples=n_boot, method="BCa", vectorized=True,
                               rng=np.random.default_rng(0))
            out += res.confidence_interval.low > 1
    elif mode in ("compare", "compare_boot"):
        t = compare(df, "stripe_width", 1, "iops", by=by, n_boot=n_boot if mode == "compare_boot" else None)
        out = int((t.to_frame()["p_adjusted"] < 0.05).sum())
    elapsed = time.perf_counter() - t0
    return {"mode": mode, "seconds": elapsed, "result": int(out), "rows": len(df),
            "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_mode(mode: str, rows: int, groups: int, n_boot: int) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--rows", str(rows), "--groups", str(groups),
           "--n-boot", str(n_boot)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--n-boot", type=int, default=999)
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode; the minimum time is reported")
    ap.add_argument("--child", choices=MODES)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.rows, args.groups, args.n_boot)))
        return
    best: dict[str, dict] = {}
    for _ in range(args.repeat):
        for mode in MODES:
            r = run_mode(mode, args.rows, args.groups, args.n_boot)
            if mode not in best or r["seconds"] < best[mode]["seconds"]:
                best[mode] = {**r, "maxrss_mib": max(r["maxrss_mib"], best.get(mode, r)["maxrss_mib"])}
    floor = best["build"]["maxrss_mib"]
    print(f"rows={best['build']['rows']:,} groups={args.groups} n_boot={args.n_boot} repeat={args.repeat} "
          f"(min time, max RSS over repeats)")
    print(f"{'mode':<16}{'seconds':>10}{'x baseline':>12}{'peak MiB':>10}{'+MiB vs build':>15}  significant groups")
    base = {"compare": "bare_ttest", "compare_boot": "bare_bootstrap"}
    for mode in MODES:
        r = best[mode]
        ratio = f"{r['seconds'] / best[base[mode]]['seconds']:.2f}" if mode in base else ""
        print(f"{mode:<16}{r['seconds']:>10.3f}{ratio:>12}{r['maxrss_mib']:>10.0f}{r['maxrss_mib'] - floor:>15.0f}  "
              f"{r['result'] if mode != 'build' else ''}")


if __name__ == "__main__":
    main()

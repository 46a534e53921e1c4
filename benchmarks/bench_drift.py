#!/usr/bin/env python
"""Type-I error and power of ``storagebench.stats.drift_check`` when runs share a set-up (issue 20, item 5).

Not a speed benchmark: a Monte Carlo check. Unit of replication: the set-up (a built testbed configuration
whose runs follow each other and share its effect); estimand: the common slope of log IOPS in run order
within cells, shown as % change over the sweep; family: one drift test and one runs test per sweep.

A testbed-like sweep: a set-up factor of ``arms`` levels x ``setups`` set-ups each, built in a random order;
each set-up runs ``cells`` within-set-up cells (patterns) x ``reps`` repetitions, consecutively, in a random
order. ``log IOPS = cell mean + set-up effect (SD tau) + slope x run order + run noise (SD sigma = 0.03)``.

* ``drift_before`` / ``clustered_before``: share of sweeps with "drift shown" / "clustered" when every run
  counts as independent (``drift_check`` without ``setup``, what studies/_base.py gave before issue 20);
* ``drift_after`` / ``clustered_after``: the same with ``setup=["setup", "arm"]``: slope and runs test on
  the set-up means (the default of the studies now).

With ``pct_over_sweep = 0`` the shares are type-I errors (criterion: ``drift_after <= 0.06``); with a real
drift they are power. The Monte Carlo SE of a share near 0.05 with 2,000 sweeps is 0.005.

Usage::

    .venv/bin/python benchmarks/bench_drift.py                       # tau/sigma 0, 1, 2.5; drift 0, -10%, -20%
    .venv/bin/python benchmarks/bench_drift.py --sweeps 4000 --setups 5
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from storagebench.stats import drift_check

SIGMA = 0.03


def one_sweep(rng: np.random.Generator, design: tuple[int, int, int, int], tau: float,
              pct_over_sweep: float) -> pd.DataFrame:
    """One sweep: ``design`` = (arms, set-ups per arm, cells per set-up, repetitions per cell)."""
    arms, setups, cells, reps = design
    rows = []
    order = 0
    built = [(a, s) for a in range(arms) for s in range(setups)]
    for i in rng.permutation(len(built)):
        arm, setup = built[i]
        effect = rng.normal(0, tau)
        for c in rng.permutation(np.repeat(np.arange(cells), reps)):
            rows.append({"arm": arm, "setup": setup, "cell": int(c), "run_order": order, "effect": effect})
            order += 1
    d = pd.DataFrame(rows)
    slope = np.log1p(pct_over_sweep / 100) / max(order - 1, 1)
    log_iops = (10 + 0.2 * d["arm"] + 0.1 * d["cell"] + d["effect"] + slope * d["run_order"]
                + rng.normal(0, SIGMA, len(d)))
    return d.assign(iops=np.exp(log_iops))


def cell(design: tuple[int, int, int, int], tau_ratio: float, pct: float, sweeps: int, seed: int) -> dict:
    """Shares of "drift shown" and "clustered" before and after over ``sweeps`` simulated sweeps."""
    rng = np.random.default_rng(seed)
    n = {"drift_before": 0, "drift_after": 0, "clustered_before": 0, "clustered_after": 0}
    for _ in range(sweeps):
        d = one_sweep(rng, design, tau_ratio * SIGMA, pct)
        before = drift_check(d, "iops", cells=["arm", "cell"])
        after = drift_check(d, "iops", cells=["arm", "cell"], setup=["setup", "arm"])
        n["drift_before"] += before.drift
        n["clustered_before"] += before.clustered
        n["drift_after"] += after.drift
        n["clustered_after"] += after.clustered
    arms, setups, cells, reps = design
    return {"setups": arms * setups, "runs": arms * setups * cells * reps, "tau_over_sigma": tau_ratio,
            "pct_over_sweep": pct, "df_after": after.df, **{k: v / sweeps for k, v in n.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweeps", type=int, default=2000)
    ap.add_argument("--arms", type=int, default=2)
    ap.add_argument("--setups", type=int, default=4, help="set-ups per arm")
    ap.add_argument("--cells", type=int, default=2, help="within-set-up cells")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20)
    a = ap.parse_args(argv)
    design = (a.arms, a.setups, a.cells, a.reps)
    rows = [cell(design, tau, pct, a.sweeps, a.seed + i) for i, (tau, pct) in
            enumerate((t, p) for p in (0.0, -10.0, -20.0) for t in (0.0, 1.0, 2.5))]
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 200):
        print(t.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    ok = bool((t.loc[t["pct_over_sweep"] == 0, "drift_after"] <= 0.06).all())
    print("criterion drift_after <= 0.06 with no drift:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

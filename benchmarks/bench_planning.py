#!/usr/bin/env python
"""Do "TOST would need N runs" plans from a small pilot reach their power? (storagebench issue 10, item 5)

Not a speed benchmark: a Monte Carlo check of ``storagebench.stats.tost_plan``. For each cell, ``--plans``
times: draw a pilot from log-normal runs with a known CV (true ratio 1), estimate the CV with
``pilot_cv``, plan the runs per arm for a TOST at the margin with 80% power, then draw the planned study
and run ``tost`` on it. The share of planned studies that show equivalence is the simulated power of the
planning procedure. Two planners are compared on the same pilots:

* ``point``: the pilot's point estimate of the CV used as if known (the rule before issue 10);
* ``upper``: its one-sided 80% upper confidence bound, chi-square on the pilot's df (the default now;
  Browne 1995, Stat. Med. 14:1933).

Also reported: ``underpowered`` = share of plans whose true power (non-central t at the true CV) is below
0.8, and the median planned n. The last cell takes the pilot from ``variance_components`` (3 set-ups x
3 runs per arm, set-up SD 4%, run SD 2%): the plan counts set-ups, and the planned study is compared
with ``compare(..., unit="setup", margin=...)``. Criterion: ``upper`` power >= 0.80 in every cell.

Usage::

    .venv/bin/python benchmarks/bench_planning.py               # 1,000 plans per cell (250 for set-ups), ~1 min
    .venv/bin/python benchmarks/bench_planning.py --plans 300
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storagebench.stats import (  # noqa: E402
    compare,
    pilot_cv,
    tost,
    tost_plan,
    tost_power,
    variance_components,
)

CELLS = [  # (true CV, margin, pilot runs per arm)
    (0.05, 0.05, 2), (0.05, 0.05, 3), (0.05, 0.05, 5),
    (0.20, 0.20, 3), (0.20, 0.20, 5),
    (0.02, 0.01, 3), (0.02, 0.01, 5),
]


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


def runs_cell(rng, plans: int, cv: float, margin: float, n_pilot: int) -> dict:
    s = _sigma(cv)
    hits = {"point": 0, "upper": 0}
    under = {"point": 0, "upper": 0}
    ns: dict[str, list[int]] = {"point": [], "upper": []}
    for _ in range(plans):
        pc = pilot_cv([np.exp(rng.normal(0, s, n_pilot)), np.exp(rng.normal(0, s, n_pilot))])
        for kind, plan in (("point", tost_plan(pc.cv, margin, df=math.inf)), ("upper", tost_plan(pc, margin))):
            n = plan.n
            ns[kind].append(n)
            under[kind] += tost_power(n, cv, margin) < 0.8
            x, y = np.exp(rng.normal(0, s, n)), np.exp(rng.normal(0, s, n))
            hits[kind] += tost(x, y, margin).equivalent
    return {"pilot": f"{n_pilot}+{n_pilot} runs", "true_cv_pct": cv * 100, "margin_pct": margin * 100,
            "n_if_cv_known": tost_plan(cv, margin, df=math.inf).n,
            "power_point": hits["point"] / plans, "underpowered_point": under["point"] / plans,
            "median_n_point": float(np.median(ns["point"])),
            "power_upper": hits["upper"] / plans, "underpowered_upper": under["upper"] / plans,
            "median_n_upper": float(np.median(ns["upper"]))}


def setups_cell(rng, plans: int, margin: float = 0.05, sd_setup: float = 0.04, sd_run: float = 0.02,
                setups: int = 3, runs: int = 3) -> dict:
    """Pilot from variance_components of set-ups x runs (per arm); the plan counts set-ups."""
    def arm(n_setups: int, arm_name: str) -> pd.DataFrame:
        u = rng.normal(0, sd_setup, n_setups)
        e = rng.normal(0, sd_run, (n_setups, runs))
        return pd.DataFrame({"arm": arm_name, "setup": np.repeat([f"{arm_name}{i}" for i in range(n_setups)], runs),
                             "run": np.tile(np.arange(runs), n_setups),
                             "iops": 50_000 * np.exp(u[:, None] + e).ravel()})

    unit_sd = math.sqrt(sd_setup**2 + sd_run**2 / runs)
    cv_unit = math.sqrt(math.expm1(unit_sd**2))
    hits = {"point": 0, "upper": 0}
    under = {"point": 0, "upper": 0}
    ns: dict[str, list[int]] = {"point": [], "upper": []}
    for _ in range(plans):
        vcs = [variance_components(arm(setups, a), ["setup", "run"], "iops") for a in ("a", "b")]
        pc = pilot_cv(vcs)
        for kind, plan in (("point", tost_plan(pc.cv, margin, df=math.inf)), ("upper", tost_plan(pc, margin))):
            n = plan.n
            ns[kind].append(n)
            under[kind] += tost_power(n, cv_unit, margin) < 0.8
            study = pd.concat([arm(n, "a"), arm(n, "b")], ignore_index=True)
            row = compare(study, "arm", "a", "iops", unit="setup", margin=margin)[0]
            hits[kind] += bool(row.equivalent)
    return {"pilot": f"variance_components {setups}x{runs}+{setups}x{runs}", "true_cv_pct": cv_unit * 100,
            "margin_pct": margin * 100, "n_if_cv_known": tost_plan(cv_unit, margin, df=math.inf).n,
            "power_point": hits["point"] / plans, "underpowered_point": under["point"] / plans,
            "median_n_point": float(np.median(ns["point"])),
            "power_upper": hits["upper"] / plans, "underpowered_upper": under["upper"] / plans,
            "median_n_upper": float(np.median(ns["upper"]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plans", type=int, default=1000, help="plans per cell")
    ap.add_argument("--seed", type=int, default=20262)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    rows = [runs_cell(rng, args.plans, *c) for c in CELLS]
    rows.append(setups_cell(rng, max(args.plans // 4, 50)))
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 220)
    print(f"TOST plans for 80% power from a pilot (alpha 0.05 per side), {args.plans} plans per cell "
          f"({max(args.plans // 4, 50)} in the variance_components cell), seed {args.seed}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    ok = bool((table["power_upper"] >= 0.8).all())
    print(f"\nsimulated power of upper-bound plans {table['power_upper'].min():.3f}-{table['power_upper'].max():.3f} "
          f"(point-estimate plans {table['power_point'].min():.3f}-{table['power_point'].max():.3f}); "
          f"wall {time.perf_counter() - t0:.0f} s")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

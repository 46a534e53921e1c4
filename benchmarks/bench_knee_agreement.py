#!/usr/bin/env python
"""Two audit cases of issue 20 rerun before and after their fixes: knees of curves that are not monotone, and the
Bland-Altman bias of clustered configurations.

Not a speed benchmark: Monte Carlo checks of :func:`storagebench.stats.saturation.find_knee` and
:func:`storagebench.stats.bland_altman`.

* **Knees.** ``--curves`` random p99 curves on a geometric grid (1, 2, 4 ... outstanding I/Os, 5 to 10 points):
  a convex rise (random positive steps growing geometrically) whose last 1 to 3 points dip below the peak
  (the audit's case: the last p99 below its peak). *Before* is Kneedle on the whole curve, as ``find_knee``
  called ``kneed.KneeLocator`` until issue 20; *after* is ``find_knee``. Reported: the share of knees on an
  edge of the grid (the first or the last point), the share of curves whose knee is the one Kneedle finds on the
  rise alone (what the points past the peak should not change), and the share with no knee at all (said as
  "no knee inside the grid", never an edge). Criterion: no edge knee after the fix.
* **Agreement.** Log ratios ``d = mu + b_pattern + e``: 6 patterns x 24 configurations (seed 002's design),
  between-pattern and within-pattern SDs chosen for an intraclass correlation of 0, 0.25, 0.48 (seed 002's) and
  0.75, mu = log 1.03. Estimand: the mean bias over patterns, ``exp(mu)``. *Before* is the CI with the 144
  configurations independent (t on 143 df); *after* is ``bland_altman(clusters=pattern)`` (the mean of the
  pattern means, t on 5 df; Bland & Altman 2007). Reported: the coverage of ``exp(mu)`` by each 95% CI.
  Criterion: the clustered CI covers in [0.93, 0.97] at every ICC.

Usage::

    .venv/bin/python benchmarks/bench_knee_agreement.py                  # 5,000 curves, 4 ICCs x 4,000 sets
    .venv/bin/python benchmarks/bench_knee_agreement.py --curves 500 --sets 500
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storagebench.stats import bland_altman  # noqa: E402
from storagebench.stats.saturation import find_knee  # noqa: E402


def _curve(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """A convex rise of 5 to 10 points whose last 1 to 3 points dip below its peak, on x = 1, 2, 4 ...: (x, y,
    points of the rise)."""
    n_rise = int(rng.integers(4, 8))
    rise = np.cumsum(rng.exponential(1.0, n_rise) * np.geomspace(1.0, rng.uniform(2.0, 30.0), n_rise)) + 0.1
    dip = rise[-1] * np.cumprod(rng.uniform(0.3, 0.99, int(rng.integers(1, 4))))
    y = np.r_[rise, dip]
    return 2.0 ** np.arange(y.size), y, n_rise


def knees(n: int, seed: int) -> pd.DataFrame:
    """Before / after shares over ``n`` dipping curves."""
    from kneed import KneeLocator

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        x, y, n_rise = _curve(rng)
        lx = np.log2(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = KneeLocator(lx, y, curve="convex", direction="increasing").knee
            on_rise = KneeLocator(lx[:n_rise], y[:n_rise], curve="convex", direction="increasing").knee
        new = find_knee(pd.DataFrame({"x": x, "y": y}), "x", "y", curve="convex", log_x=True)
        rise_knee = math.nan if on_rise is None or on_rise in (lx[0], lx[n_rise - 1]) else 2.0 ** on_rise
        old_x = math.nan if old is None else 2.0 ** old
        rows.append({"old_edge": old_x in (x[0], x[-1]), "new_edge": new.x in (x[0], x[-1]),
                     "old_as_rise": old_x == rise_knee or (math.isnan(old_x) and math.isnan(rise_knee)),
                     "new_as_rise": new.x == rise_knee or (math.isnan(new.x) and math.isnan(rise_knee)),
                     "new_none": math.isnan(new.x)})
    f = pd.DataFrame(rows)
    return pd.DataFrame({"curves": [n, n], "version": ["before (Kneedle on the whole curve)", "after (find_knee)"],
                         "knee_on_an_edge": [f["old_edge"].mean(), f["new_edge"].mean()],
                         "knee_as_on_the_rise": [f["old_as_rise"].mean(), f["new_as_rise"].mean()],
                         "no_knee_said": [np.nan, f["new_none"].mean()]})


def agreement(sets: int, seed: int, iccs=(0.0, 0.25, 0.48, 0.75), k: int = 6, m: int = 24) -> pd.DataFrame:
    """Coverage of the true bias by the independent and the clustered CI, per ICC."""
    rng = np.random.default_rng(seed)
    mu, total_sd = math.log(1.03), 0.14  # seed 002: bias 1.03, total SD of one configuration's log ratio 0.143
    labels = np.repeat(np.arange(k), m)
    rows = []
    for icc in iccs:
        sb, sw = total_sd * math.sqrt(icc), total_sd * math.sqrt(1 - icc)
        cover = {"independent": 0, "clustered": 0}
        for _ in range(sets):
            d = mu + rng.normal(0, sb, k)[labels] + rng.normal(0, sw, k * m)
            a, b = np.exp(d), np.ones_like(d)
            for name, cl in (("independent", None), ("clustered", labels)):
                ba = bland_altman(a, b, clusters=cl)
                cover[name] += ba.bias_ci_low <= math.exp(mu) <= ba.bias_ci_high
        rows.append({"icc": icc, "patterns": k, "configurations": k * m, "sets": sets,
                     "coverage_before_independent": cover["independent"] / sets,
                     "coverage_after_clustered": cover["clustered"] / sets})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--curves", type=int, default=5000, help="random dipping curves (default 5000)")
    ap.add_argument("--sets", type=int, default=4000, help="simulated data sets per ICC (default 4000)")
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args(argv)
    pd.set_option("display.width", 200)
    kn = knees(args.curves, args.seed)
    print("Knees of p99 curves whose last points dip below the peak:")
    print(kn.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ag = agreement(args.sets, args.seed)
    print("\nBland-Altman bias, 6 patterns x 24 configurations: coverage of the true bias by the 95% CI")
    print(ag.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ok = kn["knee_on_an_edge"].iloc[1] == 0 and ag["coverage_after_clustered"].between(0.93, 0.97).all()
    print("\ncriteria (no edge knee after; clustered coverage in [0.93, 0.97] at every ICC):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

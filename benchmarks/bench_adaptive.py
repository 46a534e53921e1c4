#!/usr/bin/env python
"""fio-seconds to an answer: adaptive precision (``precision:``) against fixed 3, 5 and 10 repetitions (issue 21).

Not a speed benchmark: a Monte Carlo check of the two stopping rules of :mod:`storagebench._adaptive`, and,
with ``--demo``, the demo grid measured on this host both ways.

**Points** (experimental unit: the run; estimand: the geometric mean of a point's runs): log-normal runs with
a CV of 2 %, 10 % and 30 %. The adaptive rule is ``{ci_rel_half_width: W, min_repetitions: 3,
max_repetitions: 30}`` (W = 3 % and 10 %), stopping on the guarded CI of
:func:`storagebench.stats.sequential.point_stops`; fixed n reports the plain t interval. Per cell: mean runs,
fio-seconds (runs x ``--run-s``), the share whose CI reached W ("answered"), the median half-width reached and
the coverage of the true geometric mean (criterion >= 0.93). The library's own :func:`point_stops` is what
runs.

**Comparisons** (estimand: the ratio of geometric means other/baseline, Welch t on logs; family: the one
comparison): two arms, true ratio 1.00, 1.05 and 1.20, CV 2 %, 10 %, 30 %. Adaptive rule ``{compare,
alpha: 0.05, equivalence_margin: 0.05, min_repetitions: 3, max_repetitions: 30}``: stops when "different" (the
two-sided Lan-DeMets O'Brien-Fleming boundary) or "equivalent"/"not equivalent" (TOST within 5 %, one-sided
boundaries at 0.05) is decided. Fixed n: Welch at 0.05 and TOST at 0.05. Per cell: runs per comparison
(both arms), the share of each verdict, and the coverage of the true ratio by the repeated confidence interval
at the stopping look (Jennison & Turnbull 2000, ch. 9: Welch t interval at the look's nominal level 1 - p2_k,
as ``precision.json`` reports it; criterion >= 0.93) and by the
naive 95 % CI (reported, no criterion). Type-I error: "different" at ratio 1.00 (criterion <= 0.06); the
equivalence rule's type-I is "equivalent" at ratio 1.05, the margin's edge (criterion <= 0.06). For speed
the comparison cells use a vectorised copy of the decision; the library's
:func:`~storagebench.stats.sequential.comparison_decision` is run on the first ``--check`` sets of every
cell and must agree on every one (the script stops otherwise).

**--demo**: the demo grid (``data/studies/demo.yaml``, 12 points) at quick settings (runtime 1 s, no ramp,
64 MiB file) on this host: one fixed sweep of 10 repetitions (fixed 3 and 5 are its first 3 and 5
repetitions: the same run ids) and one adaptive sweep ``{ci_rel_half_width: 0.05, min_repetitions: 3,
max_repetitions: 10}``. Per design: runs, fio-seconds and the points' CI half-widths reached. The truth is
unknown here, so there is no coverage column.

**--testbed ka_caps,ka_fast_vs_slow,ka_stripe_width,ka_rdm_vs_vmfs,ka_consolidation** (root: loop devices capped
by the block-I/O throttle; the known answers of issue 20): the experimental unit is the set-up (a fresh build);
estimand: the ratio of the arms' set-up geometric means, paired on blocks (the study's own analysis); family: each
of the study's known-answer checks on its own (one row per check: ka_consolidation has three, each workload's
shared/isolated and their total). The rule compares the study's arm factor (its first set-up factor) and takes
the study's own equivalence margin when its analysis has one (ka_rdm_vs_vmfs: 1 %). ka_consolidation runs its two
workloads at the same time: a round is one block of two builds, each running the pair together, and its fio-
seconds count a pair once.
Per repetition, in a fresh directory: one real adaptive sweep of the quick variant under ``--testbed-rule``
(:data:`TESTBED_RULES`, ``studies.run(..., precision=...)``), and one fixed sweep of 10 set-ups per arm, of which
fixed 3 and 5 are the first 3 and 5 blocks (the same run ids); each rule of :data:`TESTBED_RULES` is also
replayed on the fixed-10 sweep's values (:func:`storagebench._runrounds.replay`: the decisions are a pure
function of the set-ups measured, so the replay is what an adaptive sweep would have done on those set-ups).
Per design: set-ups per arm, builds, fio-seconds, the median CI half-width of the ratio (the study's own known-
answer check, ``known_answer``) and its coverage of the truth (criterion >= 0.90), and for the rule its repeated
CI's coverage. Rows go to ``benchmarks/data/adaptive_testbed.json`` as they come; ``--table`` prints them.

**--paired**: the rule of set-ups in blocks by simulation (block log SD 0.3, a set-up's own CV 2/10/30 %, true
ratio 1.00/1.05/1.20, 3..10 set-ups): the paired decisions (a vectorised copy, the library's
``comparison_decision(..., paired=True)`` run on the first ``--check`` sets of every cell and required to agree),
type-I error of "different" at 1.00 (criterion <= 0.06) and the repeated CI's coverage (criterion >= 0.93).

Usage::

    .venv/bin/python benchmarks/bench_adaptive.py                  # simulation, ~2-4 min
    .venv/bin/python benchmarks/bench_adaptive.py --sets 4000 --comp-sets 4000
    .venv/bin/python benchmarks/bench_adaptive.py --demo --target-dir /var/tmp   # + real fio, ~5 min
    .venv/bin/python benchmarks/bench_adaptive.py --demo --no-sim                # the demo grid only
    sudo .venv/bin/python benchmarks/bench_adaptive.py --testbed ka_caps,ka_fast_vs_slow --testbed-reps 10 --no-sim
    .venv/bin/python benchmarks/bench_adaptive.py --table                        # the testbed rows so far
    .venv/bin/python benchmarks/bench_adaptive.py --paired --comp-sets 20000     # set-ups in blocks, ~1 min
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storagebench._adaptive import nominal_levels  # noqa: E402
from storagebench.stats.sequential import comparison_decision, point_stops, rel_half_width  # noqa: E402

CVS = (0.02, 0.10, 0.30)
RATIOS = (1.00, 1.05, 1.20)
FIXED = (3, 5, 10)
MIN_N, MAX_N, ALPHA, MARGIN = 3, 30, 0.05, 0.05


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


def _t_half(z: np.ndarray) -> float:
    n = z.size
    return float(st.t.ppf(0.975, n - 1) * z.std(ddof=1) / math.sqrt(n))


def point_cell(rng: np.random.Generator, cv: float, width: float, sets: int, run_s: float) -> list[dict]:
    """One CV and target width: the adaptive rule and the fixed designs on the same simulated runs."""
    z = rng.normal(0.0, _sigma(cv), (sets, MAX_N))  # log values; the true geometric mean is exp(0) = 1
    rows = []
    ns, cover, hw = [], 0, []
    for s in range(sets):
        y = np.exp(z[s])
        n = point_stops(y, width, MIN_N) or MAX_N
        h = rel_half_width(y[:n])
        ns.append(n)
        hw.append(h)
        cover += abs(z[s, :n].mean()) <= math.log1p(h)
    rows.append({"design": f"adaptive (W {width:.0%}, 3..30)", "cv": cv, "runs": np.mean(ns),
                 "fio_s": np.mean(ns) * run_s, "answered": np.mean(np.array(hw) <= width),
                 "half_width_median": np.median(hw), "coverage": cover / sets})
    for n in FIXED:
        h = np.array([_t_half(z[s, :n]) for s in range(sets)])
        cov = np.mean(np.abs(z[:, :n].mean(axis=1)) <= h)
        rows.append({"design": f"fixed {n}", "cv": cv, "runs": n, "fio_s": n * run_s,
                     "answered": np.mean(np.expm1(h) <= width), "half_width_median": np.median(np.expm1(h)),
                     "coverage": cov})
    return rows


def _welch(lx: np.ndarray, ly: np.ndarray, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Welch t of mean(lx) - mean(ly) - shift over the last axis: (t, df, se)."""
    n = lx.shape[-1]
    vx, vy = lx.var(axis=-1, ddof=1) / n, ly.var(axis=-1, ddof=1) / n
    se = np.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (n - 1) + vy**2 / (n - 1))
    return (lx.mean(axis=-1) - ly.mean(axis=-1) - shift) / se, df, se


def _decide_vec(lx: np.ndarray, ly: np.ndarray, nominal: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised copy of comparison_decision over looks MIN_N..MAX_N: (verdict code, n at stop, RCI covers)."""
    sets = lx.shape[0]
    code = np.zeros(sets, dtype=int)  # 0 undecided, 1 different, 2 equivalent, 3 not equivalent
    at = np.full(sets, MAX_N)
    lo_m, hi_m = math.log(1 - MARGIN), math.log(1 + MARGIN)
    for n in range(MIN_N, MAX_N + 1):
        p2, p1 = nominal[n]
        t, df, _ = _welch(lx[:, :n], ly[:, :n])
        diff = 2 * st.t.sf(np.abs(t), df) < p2
        t_lo, df_lo, _ = _welch(lx[:, :n], ly[:, :n], lo_m)
        t_hi, _, _ = _welch(lx[:, :n], ly[:, :n], hi_m)
        equiv = np.maximum(st.t.sf(t_lo, df_lo), st.t.cdf(t_hi, df_lo)) < p1
        outside = np.minimum(st.t.sf(t_hi, df_lo), st.t.cdf(t_lo, df_lo)) < p1
        new = code == 0
        for c, hit in ((1, diff), (2, equiv & ~diff), (3, outside & ~diff & ~equiv)):
            take = new & hit
            code[take], at[take] = c, n
            new &= ~take
    return code, at, np.zeros(sets)


def comparison_cell(rng: np.random.Generator, cv: float, ratio: float, sets: int, check: int,
                    run_s: float) -> list[dict]:
    """One CV and true ratio: the adaptive comparison and the fixed designs on the same simulated runs."""
    rule = {"min_repetitions": MIN_N, "max_repetitions": MAX_N, "alpha": ALPHA}
    nominal = nominal_levels(rule)
    sd = _sigma(cv)
    lx = math.log(ratio) + rng.normal(0.0, sd, (sets, MAX_N))
    ly = rng.normal(0.0, sd, (sets, MAX_N))
    code, at, _ = _decide_vec(lx, ly, nominal)
    words = {None: 0, "different": 1, "equivalent": 2, "not_equivalent": 3}
    for s in range(min(check, sets)):  # the library's decision on the same data must agree
        lib = next(((words[w], n) for n in range(MIN_N, MAX_N + 1)
                    if (w := comparison_decision(np.exp(lx[s, :n]), np.exp(ly[s, :n]), nominal[n], MARGIN))),
                   (0, MAX_N))
        if lib != (code[s], at[s]):
            raise SystemExit(f"vectorised decision differs from the library at cv {cv}, ratio {ratio}, set {s}: "
                             f"{(code[s], at[s])} vs {lib}")
    rci = naive = 0
    for s in range(sets):
        n = at[s]
        t, df, se = _welch(lx[s, :n], ly[s, :n])
        d = lx[s, :n].mean() - ly[s, :n].mean()
        rci += abs(d - math.log(ratio)) <= st.t.isf(nominal[n][0] / 2, df) * se  # ratio_ci at 1 - p2_k
        naive += abs(d - math.log(ratio)) <= st.t.ppf(0.975, df) * se
    rows = [{"design": "adaptive (compare, margin 5%, 3..30)", "cv": cv, "ratio": ratio, "runs": 2 * at.mean(),
             "fio_s": 2 * at.mean() * run_s, "different": np.mean(code == 1), "equivalent": np.mean(code == 2),
             "not_equivalent": np.mean(code == 3), "undecided": np.mean(code == 0), "coverage_rci": rci / sets,
             "coverage_naive": naive / sets}]
    for n in FIXED:
        t, df, se = _welch(lx[:, :n], ly[:, :n])
        d = lx[:, :n].mean(axis=1) - ly[:, :n].mean(axis=1)
        t_lo, _, _ = _welch(lx[:, :n], ly[:, :n], math.log(1 - MARGIN))
        t_hi, _, _ = _welch(lx[:, :n], ly[:, :n], math.log(1 + MARGIN))
        eq = np.maximum(st.t.sf(t_lo, df), st.t.cdf(t_hi, df)) < ALPHA
        cov = np.mean(np.abs(d - math.log(ratio)) <= st.t.ppf(0.975, df) * se)
        rows.append({"design": f"fixed {n}", "cv": cv, "ratio": ratio, "runs": 2 * n, "fio_s": 2 * n * run_s,
                     "different": np.mean(2 * st.t.sf(np.abs(t), df) < ALPHA), "equivalent": np.mean(eq),
                     "not_equivalent": np.nan, "undecided": np.nan, "coverage_rci": np.nan, "coverage_naive": cov})
    return rows


def _paired_t(d: np.ndarray, shift: float = 0.0) -> tuple[np.ndarray, int, np.ndarray]:
    """One-sample t of mean(d) - shift over the last axis (d: per-block log ratios): (t, df, se)."""
    n = d.shape[-1]
    se = d.std(axis=-1, ddof=1) / math.sqrt(n)
    return (d.mean(axis=-1) - shift) / se, n - 1, se


def _decide_paired_vec(d: np.ndarray, nominal: dict, lo_n: int, hi_n: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised copy of comparison_decision(paired=True) over looks lo_n..hi_n: (verdict code, n at stop)."""
    code = np.zeros(d.shape[0], dtype=int)
    at = np.full(d.shape[0], hi_n)
    lo_m, hi_m = math.log(1 - MARGIN), math.log(1 + MARGIN)
    for n in range(lo_n, hi_n + 1):
        p2, p1 = nominal[n]
        t, df, _ = _paired_t(d[:, :n])
        t_lo, _, _ = _paired_t(d[:, :n], lo_m)
        t_hi, _, _ = _paired_t(d[:, :n], hi_m)
        diff = 2 * st.t.sf(np.abs(t), df) < p2
        equiv = np.maximum(st.t.sf(t_lo, df), st.t.cdf(t_hi, df)) < p1
        outside = np.minimum(st.t.sf(t_hi, df), st.t.cdf(t_lo, df)) < p1
        new = code == 0
        for c, hit in ((1, diff), (2, equiv & ~diff), (3, outside & ~diff & ~equiv)):
            take = new & hit
            code[take], at[take] = c, n
            new &= ~take
    return code, at


def paired_cell(rng: np.random.Generator, cv: float, ratio: float, sets: int, check: int) -> list[dict]:
    """Set-ups in blocks (the known-answer testbeds' design), budget 3..10 set-ups per arm: a block effect (log SD
    0.3, shared by the block's set-ups) and a set-up's own noise at ``cv``; the rule's paired decisions, its
    type-I error and the coverage of the true ratio by the repeated CI at the stop."""
    lo_n, hi_n = 3, 10
    nominal = nominal_levels({"min_repetitions": lo_n, "max_repetitions": hi_n, "alpha": ALPHA})
    block = rng.normal(0.0, 0.3, (sets, hi_n))
    ly = block + rng.normal(0.0, _sigma(cv), (sets, hi_n))
    lx = block + math.log(ratio) + rng.normal(0.0, _sigma(cv), (sets, hi_n))
    code, at = _decide_paired_vec(lx - ly, nominal, lo_n, hi_n)
    words = {None: 0, "different": 1, "equivalent": 2, "not_equivalent": 3}
    for s in range(min(check, sets)):  # the library's paired decision on the same data must agree
        lib = next(((words[w], n) for n in range(lo_n, hi_n + 1)
                    if (w := comparison_decision(np.exp(lx[s, :n]), np.exp(ly[s, :n]), nominal[n], MARGIN,
                                                 paired=True))), (0, hi_n))
        if lib != (code[s], at[s]):
            raise SystemExit(f"vectorised paired decision differs from the library at cv {cv}, ratio {ratio}, set "
                             f"{s}: {(code[s], at[s])} vs {lib}")
    cover = 0
    for s in range(sets):  # ratio_ci(paired=True) at 1 - p2 of the stopping look
        d = (lx - ly)[s, :at[s]]
        half = st.t.isf(nominal[at[s]][0] / 2, at[s] - 1) * d.std(ddof=1) / math.sqrt(at[s])
        cover += abs(d.mean() - math.log(ratio)) <= half
    cover /= sets
    return [{"design": "adaptive paired (compare, margin 5%, 3..10 set-ups)", "cv": cv, "ratio": ratio,
             "setups_per_arm": at.mean(), "different": np.mean(code == 1), "equivalent": np.mean(code == 2),
             "not_equivalent": np.mean(code == 3), "undecided": np.mean(code == 0), "coverage_rci": cover}]


def simulate(args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables of the simulation."""
    rng = np.random.default_rng(args.seed)
    points = [r for cv in CVS for w in (0.03, 0.10) for r in point_cell(rng, cv, w, args.sets, args.run_s)]
    comps = [r for cv in CVS for ratio in RATIOS
             for r in comparison_cell(rng, cv, ratio, args.comp_sets, args.check, args.run_s)]
    return pd.DataFrame(points), pd.DataFrame(comps)


def simulate_paired(args: argparse.Namespace) -> pd.DataFrame:
    """The paired (set-ups in blocks) comparison rule: every CV and ratio (:func:`paired_cell`)."""
    rng = np.random.default_rng(args.seed + 1)
    return pd.DataFrame([r for cv in CVS for ratio in RATIOS
                         for r in paired_cell(rng, cv, ratio, args.comp_sets, args.check)])


def demo(args: argparse.Namespace) -> pd.DataFrame:
    """The demo grid on this host: fixed 10 (3 and 5 as its first repetitions) and adaptive."""
    from storagebench import load_study, run_study
    from storagebench._runrounds import read_values

    base = load_study(Path(__file__).resolve().parents[1] / "data" / "studies" / "demo.yaml").spec_dict()
    base.update(runtime=1, ramp_time=0, size="64m")
    out = Path(tempfile.mkdtemp(prefix="bench-adaptive-", dir=args.target_dir))
    target = out / "demo.dat"
    rows = []
    fixed = load_study({**base, "name": "demo-fixed10", "repetitions": 10})
    t0 = time.monotonic()
    res = run_study(fixed, target=target, out_dir=out, progress=False)
    wall_fixed = time.monotonic() - t0
    values = read_values(res.raw_dir, res.completed, "iops")
    plan = fixed.expand()
    for n in FIXED:
        hws = _point_widths(plan, values, n, guarded=False)
        rows.append({"design": f"fixed {n}", "runs": 12 * n, "fio_s": 12 * n * 1.0,
                     "half_width_median": np.median(hws), "half_width_max": np.max(hws),
                     "wall_s": wall_fixed * n / 10})
    adaptive = load_study({k: v for k, v in {**base, "name": "demo-adaptive", "precision": {
        "ci_rel_half_width": args.demo_width, "min_repetitions": 3, "max_repetitions": 10}}.items()
        if k != "repetitions"})
    t0 = time.monotonic()
    res = run_study(adaptive, target=target, out_dir=out, progress=False)
    wall = time.monotonic() - t0
    import json

    rec = json.loads((res.root / "precision.json").read_text())
    hws = [p["ci_rel_half_width"] for p in rec["points"]]
    rows.append({"design": f"adaptive (W {args.demo_width:.0%}, 3..10)", "runs": len(res.completed), "fio_s": len(res.completed) * 1.0,
                 "half_width_median": np.median(hws), "half_width_max": np.max(hws), "wall_s": wall,
                 "stopped": ", ".join(f"{k} {v}" for k, v in pd.Series([p["stopped"] for p in rec["points"]])
                                      .value_counts().items())})
    print(f"(results kept in {out}; remove it when done)")
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# the known-answer testbeds (issue 20): the set-up is the unit, root

#: The adaptive rules replayed on every fixed-10 sweep (the first is also run for real, --testbed).
#: ``compare`` is filled in per study: its first set-up factor (the arm, :func:`_rule`).
TESTBED_RULES = {
    "W 2%": {"ci_rel_half_width": 0.02, "min_repetitions": 3, "max_repetitions": 10},
    "W 0.5%": {"ci_rel_half_width": 0.005, "min_repetitions": 3, "max_repetitions": 10},
}


def _rule(rule_name: str, study, name: str) -> dict:
    """The rule ``rule_name`` comparing the study's arms (its first set-up factor: device, stripe_width, layout ...),
    with the study's own equivalence margin when its analysis has one (ka_rdm_vs_vmfs: TOST within 1 %, truth
    1.0: without a margin "different" is never decided there and every sweep would spend its budget)."""
    import inspect

    from storagebench import studies

    margin = inspect.signature(studies.get(name).module.analyse).parameters.get("margin")
    extra = {"equivalence_margin": margin.default} if margin is not None else {}
    return {"compare": study.setup_factors[0], **TESTBED_RULES[rule_name], **extra}


def _fio_s(study, run_ids) -> float:
    """fio-seconds of the runs ``run_ids``: one run duration per concurrency group (a concurrent group's runs take
    the time of one)."""
    ids = set(run_ids)
    plan = study.expand()
    return len(plan.groups([p for p in plan if p.run_id in ids])) * study.run_duration_s


def _arms(study) -> int:
    """Arms (combinations of the set-up factors' levels): one build each per set-up."""
    return len({tuple(repr(p.factors[f]) for f in study.setup_factors) for p in study.expand()})


def _ka_subset(data, k: int):
    """The study's data cut to its first ``k`` set-ups (blocks) of every arm: fixed k as a prefix of fixed 10."""
    import dataclasses

    pr = data.per_run[data.per_run["setup"] <= k]
    ids = set(pr["run_id"])
    cut = {name: getattr(data, name) for name in ("runs", "histograms", "timeseries")}
    cut = {name: df[df["run_id"].isin(ids)] if "run_id" in df.columns else df for name, df in cut.items()}
    return dataclasses.replace(data, per_run=pr, set_ups=tuple(r for r in data.set_ups if r.setup <= k), **cut)


def _ka_check(name: str, data) -> list[dict]:
    """The study's own analysis and known answers (its module's ``analyse`` and ``known_answer``) on ``data``: one
    dict per check (ka_consolidation has three: each workload and their total)."""
    from storagebench import studies

    ts = studies.get(name)
    result = ts.module.analyse(data)
    return [{"check": c.name, "truth": c.truth, "estimate": c.estimate, "ci_low": c.ci_low, "ci_high": c.ci_high,
             "covered": bool(c.covered),
             "ratio_half_width": max(c.ci_high / c.estimate - 1.0, 1.0 - c.ci_low / c.estimate)}
            for c in ts.module.known_answer(data, result)]


def _matching(verdicts: dict, check: str) -> dict | None:
    """The comparison of the rule that a check is about: the only one, or the one whose other factors' levels
    (``... at workload=store``) all appear in the check's name; None when none does (e.g. a total)."""
    if len(verdicts) == 1:
        return next(iter(verdicts.values()))
    words = set(check.replace(",", " ").split())
    for label, v in verdicts.items():
        at = label.split(" at ", 1)[1] if " at " in label else ""
        levels = [kv.split("=", 1)[1] for kv in at.split(", ") if "=" in kv]
        if levels and all(lv in words for lv in levels):
            return v
    return None


def _rule_outcome(verdicts: dict, check: dict) -> dict:
    """The rule's own answer for ``check``: its repeated CI at the decision (``precision.json`` or a replay's
    verdict), of the comparison the check is about."""
    v = _matching(verdicts, check["check"]) or {}
    out = {"decision": v.get("decision"), "rci_covered": None}
    if v.get("ci_low") is not None:
        out["rci_covered"] = bool(v["ci_low"] <= check["truth"] <= v["ci_high"])
        out["rci_half_width"] = max(v["ci_high"] / v["ratio"] - 1.0, 1.0 - v["ci_low"] / v["ratio"])
    return out


def _fixed_sweep(name: str, out: Path, setups: int):
    """The quick variant with ``setups`` set-ups per arm, built, measured and torn down (the testbed of the
    study's module, as ``storagebench testbed NAME --quick`` does it)."""
    from storagebench import load_study, run_study, studies
    from storagebench.studies import _build

    ts = studies.get(name)
    study = load_study({**ts.spec(quick=True).spec_dict(), "setups": setups})
    phases = {"build": 0.0, "precondition": 0.0, "tear_down": 0.0}
    return study, run_study(study, out_dir=out, progress=False, testbed=_build(ts, study, phases, "fio"))


def testbed_rep(name: str, out: Path, rule_name: str) -> list[dict]:
    """One repetition on a known-answer testbed: a real adaptive sweep, a fixed-10 sweep (fixed 3 and 5 are its
    first 3 and 5 blocks), and every rule of :data:`TESTBED_RULES` replayed on the fixed-10 sweep's values."""
    import json

    from storagebench import studies
    from storagebench._runrounds import read_values, replay
    from storagebench._study import load_study
    from storagebench.studies._base import load_data

    rows = []
    t0 = time.monotonic()
    quick = studies.get(name).spec(quick=True)
    rule = _rule(rule_name, quick, name)
    adaptive = load_study({**quick.spec_dict(), "precision": rule})  # its plan: max_repetitions set-ups per arm
    res = studies.run(name, out_dir=out / "adaptive", quick=True, precision=rule)
    rec = json.loads((res.study_dir / "precision.json").read_text())
    data = load_data(name, res.study_dir)
    n = max(p["repetitions"] for p in rec["points"])
    verdicts = {c["comparison"]: c for c in rec["comparisons"]}
    for check in _ka_check(name, data):
        rows.append({"study": name, "design": f"adaptive {rule_name} (run)", "setups_per_arm": n,
                     "builds": len(res.sweep.builds), "runs": len(res.sweep.completed),
                     "fio_s": _fio_s(adaptive, res.sweep.completed), "wall_s": time.monotonic() - t0, **check,
                     **_rule_outcome(verdicts, check)})
    t0 = time.monotonic()
    fixed, sweep = _fixed_sweep(name, out / "fixed", 10)
    wall = time.monotonic() - t0
    data = load_data(name, sweep.root)
    arms = _arms(fixed)
    ids = {k: set(_ka_subset(data, k).per_run["run_id"]) for k in FIXED}
    for k in FIXED:
        rows += [{"study": name, "design": f"fixed {k}", "setups_per_arm": k, "builds": arms * k,
                  "runs": len(ids[k]), "fio_s": _fio_s(fixed, ids[k]), "wall_s": wall * k / 10, **check}
                 for check in _ka_check(name, _ka_subset(data, k))]
    values = read_values(sweep.raw_dir, sweep.completed, "iops")
    for rn in TESTBED_RULES:
        ad = load_study({**fixed.spec_dict(), "precision": _rule(rn, fixed, name)})
        rounds = replay(ad.expand(), ad.precision, ad.factors, values)
        stop = next((rd["round"] - 1 for rd in rounds if len(rd["finished"]) == len(ad.expand()) // 10), 10)
        sub = _ka_subset(data, stop)
        kept = set(sub.per_run["run_id"])
        rows += [{"study": name, "design": f"adaptive {rn} (replayed on fixed 10)", "setups_per_arm": stop,
                  "builds": arms * stop, "runs": len(kept), "fio_s": _fio_s(fixed, kept), **check,
                  **_rule_outcome(rounds[stop]["verdicts"], check)} for check in _ka_check(name, sub)]
    return rows


def testbed(args: argparse.Namespace) -> pd.DataFrame:
    """``--testbed-reps`` repetitions of :func:`testbed_rep` per study, each in a fresh directory (fresh builds);
    rows appended to ``--testbed-json`` as they come (a long run keeps what it measured)."""
    import json
    import shutil

    out_json = Path(args.testbed_json)
    old = json.loads(out_json.read_text()) if out_json.exists() and args.testbed_append else {}
    rows = old.get("rows", [])
    commands = [*old.get("commands", [old["command"]] if "command" in old else []),
                f"{' '.join(sys.argv)}  # {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC"]
    for name in [s for s in args.testbed.split(",") if s]:
        for i in range(args.testbed_reps):
            out = Path(tempfile.mkdtemp(prefix=f"bench-adaptive-{name}-", dir=args.target_dir))
            try:
                rows += [{**r, "rep": i} for r in testbed_rep(name, out, args.testbed_rule)]
            finally:
                shutil.rmtree(out, ignore_errors=True)
            out_json.write_text(json.dumps({"commands": commands, "rows": rows}, indent=1, default=str))
            print(f"{name} rep {i + 1}/{args.testbed_reps} done", flush=True)
    return testbed_table(pd.DataFrame(rows))


def testbed_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per study and design: repetitions, mean set-ups per arm, builds and fio-seconds, the median CI half-width
    of the ratio (the study's own analysis), its coverage of the truth, and the rule's repeated-CI coverage."""
    df = df.assign(check=df["check"].fillna("") if "check" in df.columns else "")  # older rows: one check each
    g = df.groupby(["study", "check", "design"], sort=False)
    out = g.agg(reps=("covered", "size"), setups_per_arm=("setups_per_arm", "mean"), builds=("builds", "mean"),
                fio_s=("fio_s", "mean"), half_width_median=("ratio_half_width", "median"),
                coverage=("covered", "mean"))
    if "rci_covered" in df.columns:
        out["rci_coverage"] = g["rci_covered"].agg(lambda s: s.dropna().astype(float).mean() if s.notna().any()
                                                   else float("nan"))
    return out.reset_index()


def _point_widths(plan, values: dict, n: int, guarded: bool) -> list[float]:
    by: dict[str, list[float]] = {}
    for p in plan:
        if p.repetition <= n and p.run_id in values:
            by.setdefault(repr(sorted(p.factors.items())), []).append(values[p.run_id])
    return [rel_half_width(v, guard=0.3 if guarded else None) for v in by.values()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", type=int, default=2000, help="simulated points per cell")
    ap.add_argument("--comp-sets", type=int, default=2000, help="simulated comparisons per cell")
    ap.add_argument("--check", type=int, default=40, help="sets per cell checked against the library's decision")
    ap.add_argument("--run-s", type=float, default=65.0, help="fio time of one run (runtime + ramp_time), s")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--demo", action="store_true", help="also run the demo grid on this host (real fio)")
    ap.add_argument("--target-dir", default="/var/tmp", help="--demo: where its results and file go")
    ap.add_argument("--demo-width", type=float, default=0.05, help="--demo: the adaptive sweep's ci_rel_half_width")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulation (with --demo: the demo grid only)")
    ap.add_argument("--testbed", default="", help="known-answer testbeds, e.g. ka_caps,ka_fast_vs_slow (root)")
    ap.add_argument("--testbed-reps", type=int, default=10, help="--testbed: repetitions per study (fresh builds)")
    ap.add_argument("--testbed-rule", default="W 2%", choices=list(TESTBED_RULES), help="--testbed: the rule run")
    ap.add_argument("--testbed-json", default=str(Path(__file__).resolve().parent / "data" / "adaptive_testbed.json"))
    ap.add_argument("--testbed-append", action="store_true", help="--testbed: add to the rows already in the JSON")
    ap.add_argument("--table", action="store_true", help="print the table of --testbed-json and stop")
    ap.add_argument("--paired", action="store_true", help="only the paired (set-ups in blocks) rule's simulation")
    args = ap.parse_args()
    if args.paired:
        df = simulate_paired(args)
        print(f"## paired comparisons, set-ups in blocks ({args.comp_sets} sets per cell)\n")
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return
    if args.table:
        import json

        df = pd.DataFrame(json.loads(Path(args.testbed_json).read_text())["rows"])
        print(testbed_table(df).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
        return
    if args.testbed:
        print("## known-answer testbeds (quick variants; the set-up is the unit)\n")
        print(testbed(args).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
        if args.no_sim:
            return
    if args.no_sim:
        if args.demo:
            print("## demo grid on this host (runtime 1 s, 12 points)\n")
            print(demo(args).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    t0 = time.monotonic()
    points, comps = simulate(args)
    print(f"## points ({args.sets} sets per cell, a run = {args.run_s:g} s of fio)\n")
    print(points.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"\n## comparisons ({args.comp_sets} sets per cell)\n")
    print(comps.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    ad = comps[comps.design.str.startswith("adaptive")]
    checks = {
        "point coverage >= 0.93 (adaptive)": points[points.design.str.startswith("adaptive")].coverage.min(),
        "comparison RCI coverage >= 0.93": ad.coverage_rci.min(),
        "type-I 'different' at 1.00 <= 0.06": ad[ad.ratio == 1.00].different.max(),
        "type-I 'equivalent' at 1.05 (margin edge) <= 0.06": ad[ad.ratio == 1.05].equivalent.max(),
    }
    print("\n## criteria\n")
    for k, v in checks.items():
        print(f"{k}: {v:.3f}")
    print(f"\nsimulation: {time.monotonic() - t0:.0f} s")
    if args.demo:
        print("\n## demo grid on this host (runtime 1 s, 12 points)\n")
        print(demo(args).to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()

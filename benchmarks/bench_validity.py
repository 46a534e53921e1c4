"""Validity benchmark (issue 20, item 4): does the whole chain recover known truths, and do the statistics hold
their stated error rates? Not a timed test: run it by hand and commit its JSON.

Two parts:

``--fio`` (root: loop devices, block-I/O throttles)
    Each known-answer study (:func:`storagebench.studies.known_answer_names`) run ``--reps`` times at quick
    settings, each repetition a fresh results root (fresh set-ups): per study and check, the coverage of the truth
    by the CI, the bias (median estimate / truth) and the estimates' spread; plus the A/A of
    ``storagebench calibrate`` (:func:`storagebench.calibrate.run_aa`) with ``--aa-comparisons`` independent
    comparisons: its false-positive rate with a Clopper-Pearson CI.

``--simulate``
    The audit's cases by simulation, through the public functions, so that it measures whichever version of
    them is installed ("before" on one branch, "after" on another); ``--cases`` picks some:

    ``drift``      no drift, set-up effects (set-up SD = 1 and 2.5 x run SD), the runs of a set-up consecutive:
                   the rate of "drift shown" and of "clustered" from :func:`storagebench.stats.drift_check`
                   (target: drift type-I <= 0.06).
    ``pooling``    3 runs per point, log SDs from 0.025 to 0.367 (the committed demo's range): per-point coverage of
                   the true geometric mean by :func:`storagebench.stats.point_estimates` (target >= 0.93 at every
                   point).
    ``knee``       non-monotone p99 tails (the last p99 below its peak): how often
                   :func:`storagebench.stats.saturation.find_knee` puts the p99 knee on the grid's edge, and the
                   audit's reproducer (Kneedle as in the paper gives iodepth 16).
    ``ba``         144 configurations in 12 patterns, the pattern a cluster (ICC about 0.48), true bias 1: coverage
                   of :func:`storagebench.stats.bland_altman`'s bias CI (a cluster argument is passed when the
                   installed version has one).
    ``mixed``      6 groups (hosts), a host-level factor (3 vs 3), 4 runs per host: coverage of
                   :func:`storagebench.stats.fit_mixed`'s CI of the factor (target >= 0.93).

Usage::

    PYTHONPATH=. python benchmarks/bench_validity.py --simulate --reps 1000
    PYTHONPATH=. python benchmarks/bench_validity.py --fio --reps 20 --aa-comparisons 20   # root, long
    PYTHONPATH=. python benchmarks/bench_validity.py --simulate --cases drift,mixed --reps 200 --json out.json

Prints markdown tables; writes ``benchmarks/data/validity_<part>.json`` (``--json`` elsewhere).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import shutil
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storagebench import __version__, stats  # noqa: E402
from storagebench.stats import saturation  # noqa: E402

CASES = ("drift", "pooling", "knee", "ba", "mixed")


def _binom_ci(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    if n == 0:
        return math.nan, math.nan
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def _rate(k: int, n: int) -> dict:
    lo, hi = _binom_ci(k, n)
    return {"k": int(k), "n": int(n), "rate": k / n if n else math.nan, "ci_low": lo, "ci_high": hi}


# ---------------------------------------------------------------------------------------------
# simulations


def sim_drift(reps: int, rng: np.random.Generator) -> list[dict]:
    """No drift; 2 arms x 4 set-ups x 3 consecutive runs, set-ups in random order; set-up SD = k x run SD.

    The set-up column is passed by name when the installed ``drift_check`` takes one (``unit``, ``units``, ``setup``
    or ``groups``); without it, whatever the function does with a ``setup`` column of the table is measured."""
    params = inspect.signature(stats.drift_check).parameters
    unit_kw = next((k for k in ("unit", "units", "setup", "groups") if k in params), None)
    kw = {unit_kw: "setup"} if unit_kw else {}
    out = []
    for ratio in (1.0, 2.5):
        shown = clustered = 0
        for _ in range(reps):
            arms = np.repeat(["A", "B"], 4)
            order = rng.permutation(len(arms))
            rows, pos = [], 0
            for s in order:
                u = rng.normal(0, 0.05 * ratio)
                for r in range(3):
                    rows.append({"arm": arms[s], "setup": int(s), "repetition": r, "run_order": pos,
                                 "iops": float(np.exp(10 + u + rng.normal(0, 0.05)))})
                    pos += 1
            d = stats.drift_check(pd.DataFrame(rows), "iops", cells="arm", **kw)
            shown += bool(d.drift)
            clustered += bool(d.clustered)
        out.append({"case": "drift", "setup_sd_over_run_sd": ratio, "reps": reps, "unit_argument": unit_kw,
                    "drift_shown": _rate(shown, reps), "clustered": _rate(clustered, reps),
                    "target": "drift type-I <= 0.06"})
    return out


def sim_pooling(reps: int, rng: np.random.Generator) -> list[dict]:
    """8 points, 3 runs each, log SDs 0.025 ... 0.367: per-point coverage of the true geometric mean."""
    sds = np.geomspace(0.025, 0.367, 8)
    mu = np.log(1000.0) + np.arange(8) * 0.3
    hits = np.zeros(8, int)
    for _ in range(reps):
        rows = [{"iodepth": 2 ** i, "run_id": f"{i}-{r}", "iops": float(np.exp(mu[i] + rng.normal(0, sds[i])))}
                for i in range(8) for r in range(3)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = stats.point_estimates(pd.DataFrame(rows), "iodepth", ["iops"]).table.sort_values("iodepth")
        truth = np.exp(mu)
        hits += ((t["iops_ci_low"].to_numpy() <= truth) & (truth <= t["iops_ci_high"].to_numpy())).astype(int)
    return [{"case": "pooling", "reps": reps, "log_sd": float(sds[i]), "runs_per_point": 3,
             "coverage": _rate(int(hits[i]), reps), "target": "per-point coverage >= 0.93"} for i in range(8)]


#: The audit's Kneedle reproducer: p99 (ms) by iodepth, the last p99 below its peak.
KNEE_CASE = pd.DataFrame({"iodepth": [1, 2, 4, 8, 16, 32, 64],
                          "p99_ms": [0.10, 0.11, 0.12, 0.14, 0.20, 0.90, 0.60]})


def sim_knee(reps: int, rng: np.random.Generator) -> list[dict]:
    """Non-monotone p99 tails: how often the p99 knee lands on the grid's edge (largest load)."""
    def knee(df):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                k = saturation.find_knee(df, "iodepth", "p99_ms", curve="convex", direction="increasing",
                                         log_x=True)
            except Exception as exc:  # noqa: BLE001 - a refusal is an outcome here
                return None, type(exc).__name__
        return getattr(k, "x", None), getattr(k, "note", "") or ""

    x0, note0 = knee(KNEE_CASE)
    edge = none = 0
    xs = np.array([1, 2, 4, 8, 16, 32, 64, 128])
    for _ in range(reps):
        base = 0.1 * np.exp(0.05 * np.arange(8))
        jump = rng.integers(3, 6)
        y = base.copy()
        y[jump:] *= np.exp(rng.uniform(1.0, 2.0)) * np.exp(rng.normal(0, 0.1, 8 - jump))
        y[-1] = y[jump:-1].max() * rng.uniform(0.5, 0.9)  # the last p99 below its peak
        x, _ = knee(pd.DataFrame({"iodepth": xs, "p99_ms": y}))
        if x is None or (isinstance(x, float) and math.isnan(x)):
            none += 1
        elif float(x) == float(xs.max()):
            edge += 1
    return [{"case": "knee", "reproducer": {"iodepth": KNEE_CASE["iodepth"].tolist(),
                                            "p99_ms": KNEE_CASE["p99_ms"].tolist(),
                                            "knee_iodepth": None if x0 is None else float(x0), "note": str(note0),
                                            "kneedle_paper": 16},
             "reps": reps, "edge_knees": _rate(edge, reps), "no_knee": _rate(none, reps),
             "target": "an edge is never presented as a knee (edge rate 0)"}]


def sim_ba(reps: int, rng: np.random.Generator) -> list[dict]:
    """144 pairs in 12 patterns (clusters), pattern SD so that ICC ~0.48, true bias 1 (log 0)."""
    params = inspect.signature(stats.bland_altman).parameters
    cluster_kw = next((k for k in ("cluster", "clusters", "groups", "group") if k in params), None)
    hits = 0
    widths = []
    for _ in range(reps):
        pattern = np.repeat(np.arange(12), 12)
        u = rng.normal(0, 0.05, 12)[pattern]
        e = rng.normal(0, 0.052, 144)
        b = np.exp(rng.normal(9, 1, 144))
        a = b * np.exp(u + e)
        kw = {cluster_kw: pattern} if cluster_kw else {}
        ag = stats.bland_altman(a, b, **kw)
        hits += ag.bias_ci_low <= 1.0 <= ag.bias_ci_high
        widths.append(ag.bias_ci_high / ag.bias_ci_low)
    return [{"case": "ba", "reps": reps, "pairs": 144, "clusters": 12, "icc": round(0.05**2 / (0.05**2 + 0.052**2), 2),
             "cluster_argument": cluster_kw, "coverage": _rate(hits, reps),
             "median_ci_width_ratio": float(np.median(widths)), "target": "bias CI coverage >= 0.93"}]


def sim_mixed(reps: int, rng: np.random.Generator) -> list[dict]:
    """6 hosts, a host-level factor (3 vs 3), 4 runs per host; host SD 0.1, run SD 0.05; true effect 0."""
    hits = done = 0
    for _ in range(reps):
        rows = []
        for h in range(6):
            u = rng.normal(0, 0.1)
            rows += [{"host": f"h{h}", "x": int(h >= 3), "y": 5 + u + rng.normal(0, 0.05)} for _ in range(4)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                m = stats.fit_mixed(pd.DataFrame(rows), "y ~ x", groups="host")
            except Exception:  # noqa: BLE001 - a failed fit is counted out
                continue
        row = m.params.set_index("term").loc["x"]
        done += 1
        hits += row["ci_low"] <= 0.0 <= row["ci_high"]
    return [{"case": "mixed", "reps": reps, "fits": done, "groups": 6, "coverage": _rate(hits, done),
             "method": m.method if done else "", "target": "coverage >= 0.93"}]


SIMULATIONS = {"drift": sim_drift, "pooling": sim_pooling, "knee": sim_knee, "ba": sim_ba, "mixed": sim_mixed}


def _fmt(r: dict) -> str:
    return f"{r['rate']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] ({r['k']}/{r['n']})"


def simulation_table(results: list[dict]) -> str:
    """Markdown: one row per simulated case."""
    lines = ["| case | setting | measure | value (95% CI) | target |", "| --- | --- | --- | --- | --- |"]
    for r in results:
        c = r["case"]
        if c == "drift":
            lines.append(f"| drift | set-up SD = {r['setup_sd_over_run_sd']:g} x run SD | drift shown | "
                         f"{_fmt(r['drift_shown'])} | {r['target']} |")
            lines.append(f"| drift | set-up SD = {r['setup_sd_over_run_sd']:g} x run SD | clustered | "
                         f"{_fmt(r['clustered'])} | - |")
        elif c == "pooling":
            lines.append(f"| pooling | log SD {r['log_sd']:.3f}, 3 runs | per-point coverage | {_fmt(r['coverage'])} | "
                         f"{r['target']} |")
        elif c == "knee":
            rep = r["reproducer"]
            lines.append(f"| knee | audit reproducer | p99 knee at iodepth | {rep['knee_iodepth']} (paper: 16) | "
                         "not the edge (64) |")
            lines.append(f"| knee | random non-monotone tails | knee on the edge | {_fmt(r['edge_knees'])} | 0 |")
        elif c == "ba":
            lines.append(f"| ba | 144 pairs, 12 clusters, ICC {r['icc']} (cluster arg: {r['cluster_argument']}) | "
                         f"bias CI coverage | {_fmt(r['coverage'])} | {r['target']} |")
        elif c == "mixed":
            lines.append(f"| mixed | 6 groups, host-level factor | CI coverage | {_fmt(r['coverage'])} | "
                         f"{r['target']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# fio: the known-answer studies and the A/A


def fio_known(reps: int, names: list[str], root: Path, save) -> list[dict]:
    """Each known-answer study ``reps`` times at quick settings, a fresh results root each time; the studies
    interleaved (repetition 1 of every study, then 2 ...) and ``save(rows)`` called after each, so that a run stopped
    early keeps what it measured, evenly over the studies."""
    from storagebench import studies

    rows: list[dict] = []
    for rep in range(reps):
        for name in names:
            out = root / f"{name}-{rep}"
            t0 = time.monotonic()
            res = studies.run(name, out_dir=out, quick=True, progress=False)
            wall = round(time.monotonic() - t0, 1)
            for c in res.result.checks:
                rows.append({"study": name, "rep": rep, "check": c.name, "truth": c.truth, "estimate": c.estimate,
                             "ci_low": c.ci_low, "ci_high": c.ci_high, "covered": bool(c.covered),
                             "overhead": getattr(c, "overhead", None), "wall_s": wall})
            shutil.rmtree(out, ignore_errors=True)
            save(rows)
            print(f"{name} {rep + 1}/{reps}: {wall:.0f} s", file=sys.stderr, flush=True)
    return rows


def _truth(s: dict) -> str:
    lo, hi = s["truth_range"]
    return f"{s['truth']:.4g}" if lo == hi else f"{s['truth']:.4g} (median; {lo:.4g}–{hi:.4g})"


def known_table(rows: list[dict]) -> tuple[str, list[dict]]:
    """Markdown and records: per study and check, coverage, bias (median estimate / truth), spread."""
    if not rows:
        return "no known-answer runs", []
    df = pd.DataFrame(rows)
    summary = []
    for (study, check), g in df.groupby(["study", "check"], sort=True):
        rel = g["estimate"] / g["truth"]
        # a truth from a measured overhead (ka_consolidation's window offsets) differs between repetitions:
        # the median and the range are shown, and the bias is per repetition, against its own truth
        summary.append({"study": study, "check": check, "reps": len(g), "truth": float(g["truth"].median()),
                        "truth_range": [float(g["truth"].min()), float(g["truth"].max())],
                        "coverage": _rate(int(g["covered"].sum()), len(g)), "bias": float(rel.median() - 1),
                        "estimate_cv": float(rel.std(ddof=1) / rel.mean()) if len(g) > 1 else math.nan})
    lines = ["| study | check | reps | truth | coverage (95% CI) | bias (median estimate / truth - 1) | CV of estimates |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {s['study']} | {s['check']} | {s['reps']} | {_truth(s)} | {_fmt(s['coverage'])} | "
              f"{100 * s['bias']:+.2f}% | {100 * s['estimate_cv']:.2f}% |" for s in summary]
    return "\n".join(lines), summary


def fio_aa(comparisons: int, root: Path) -> dict:
    """The A/A of ``storagebench calibrate`` (quick design) with ``comparisons`` independent comparisons."""
    from storagebench import calibrate

    plan = calibrate.aa_plan(True, comparisons=comparisons)
    aa, _ = calibrate.run_aa(root / "aa", plan, progress=True)
    return {"plan": plan.__dict__, "false_positive": _rate(aa["false_positives"], aa["n"]), "cv_run": aa["cv_run"],
            "cv_setup": aa["cv_setup"], "mde": aa["mde"], "mde_budget": aa["mde_budget"],
            "comparisons": aa["comparisons"]}


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulate", action="store_true", help="the audit's cases by simulation")
    ap.add_argument("--fio", action="store_true", help="the known-answer studies and the A/A, with fio (root)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"simulated cases, comma-separated: {', '.join(CASES)}")
    ap.add_argument("--studies", default="", help="known-answer studies (default: all of known_answer_names())")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 1000 simulated, 20 with fio; 0 with --fio: the A/A alone)")
    ap.add_argument("--aa-comparisons", type=int, default=20,
                    help="independent A/A comparisons (--fio; 0: no A/A)")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    if not (args.simulate or args.fio):
        ap.error("give --simulate, --fio or both")
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "storagebench_version": __version__,
            "seed": args.seed, "argv": sys.argv[1:]}
    if args.simulate:
        cases = [c.strip() for c in args.cases.split(",") if c.strip()]
        unknown = sorted(set(cases) - set(CASES))
        if unknown:
            ap.error(f"--cases: unknown {unknown}; allowed: {', '.join(CASES)}")
        rng = np.random.default_rng(args.seed)
        reps = args.reps or 1000
        results = []
        for c in cases:
            t0 = time.monotonic()
            results += SIMULATIONS[c](reps, rng)
            print(f"{c}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        print("## Simulated audit cases\n\n" + simulation_table(results) + "\n")
        path = args.json or ROOT / "benchmarks" / "data" / "validity_simulate.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**meta, "reps": reps, "results": results}, indent=1, default=float) + "\n")
        print(f"written {path}", file=sys.stderr)
    if args.fio:
        from storagebench import studies

        names = [s for s in args.studies.split(",") if s] or studies.known_answer_names()
        reps = 20 if args.reps is None else args.reps  # --reps 0: the A/A alone
        path = (args.json.with_name(args.json.stem + "_fio.json") if args.json and args.simulate else args.json) or \
            ROOT / "benchmarks" / "data" / "validity_fio.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        doc: dict = {**meta, "reps_planned": reps, "studies": names}

        def save(rows: list[dict]) -> None:
            doc["known_answer"] = known_table(rows)[1]
            doc["runs"] = rows
            path.write_text(json.dumps(doc, indent=1, default=float) + "\n")

        with tempfile.TemporaryDirectory(prefix="sb-validity-", dir="/var/tmp") as tmp:
            if args.aa_comparisons:
                doc["aa"] = fio_aa(args.aa_comparisons, Path(tmp))
                save([])
                aa = doc["aa"]
                print(f"## A/A\n\nfalse-positive rate {_fmt(aa['false_positive'])} over independent comparisons; "
                      f"run-to-run CV {100 * aa['cv_run']:.1f}%, set-up-to-set-up CV {100 * aa['cv_setup']:.1f}%, "
                      f"smallest detectable ratio {aa['mde']:.3g} with {aa['mde_budget']['mde_setups_per_arm']} "
                      f"set-ups x {aa['mde_budget']['mde_runs_per_setup']} runs per arm\n", flush=True)
            rows = fio_known(reps, names, Path(tmp), save)
        text, _ = known_table(rows)
        print(f"## Known-answer studies ({reps} repetitions each, quick settings)\n\n{text}\n")
        print(f"written {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

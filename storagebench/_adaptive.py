"""The decisions of an adaptive sweep (``precision:``): a pure function of the completed runs' values and the rule.

Round ``r`` of a sweep measures repetition ``r`` of every point still going (so a run's round is its
``repetition``: no column of its own). Before round ``r``, :func:`decide` reads the values of repetitions
``< r`` and says, per point, whether it is finished and why. Nothing else enters (no clock, no random
state), so a killed sweep resumed from its ``raw/`` makes the same decisions on the same data, and the
decisions of a finished sweep can be replayed from its tables (``tests/test_adaptive.py``).

Rules (:mod:`storagebench._precision` has the keys):

* **a point's CI width** (``ci_rel_half_width``): the fixed-width sequential CI of Chow & Robbins (1965),
  looks from ``min_repetitions`` on (:func:`storagebench.stats.sequential.point_stops`);
* **a comparison** (``compare``): each level vs the factor's first level at each combination of the other
  factors; looks at n = ``min_repetitions`` .. ``max_repetitions`` runs per arm, each test at the nominal
  level of the Lan-DeMets O'Brien-Fleming-type boundary for information fraction n / ``max_repetitions``
  (:func:`storagebench.stats.sequential.comparison_decision`);
* a point is finished when its CI target is reached (if asked) and every comparison it is an arm of is
  decided (if asked), or when it has ``max_repetitions`` runs (its budget).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.stats as st

from ._plan import canonical_json
from .findings import CONFIDENCE
from .stats.ratio import ratio_ci
from .stats.sequential import (
    comparison_decision,
    log_half_width,
    point_stops,
    rel_half_width,
    spending_bounds,
)

__all__ = ["Comparison", "Decisions", "comparisons", "decide", "nominal_levels", "point_key", "expected_repetitions",
           "time_to_answer", "time_text"]


def point_key(factors: Mapping[str, Any]) -> str:
    """The identity of a point: the canonical JSON of its factor levels."""
    return canonical_json(dict(factors)).decode()


@dataclass(frozen=True)
class Comparison:
    """One comparison of ``precision.compare``: ``other`` vs ``baseline`` (point keys) at the levels ``at``."""

    factor: str
    baseline: str
    other: str
    level: Any
    at: tuple[tuple[str, Any], ...]

    def label(self) -> str:
        """``stripe_width=4 vs 1 at bs=4k``."""
        at = ", ".join(f"{k}={v}" for k, v in self.at)
        base = dict(_items(self.baseline))[self.factor]
        return f"{self.factor}={self.level} vs {base}" + (f" at {at}" if at else "")


def _items(key: str) -> list[tuple[str, Any]]:
    import orjson

    return list(orjson.loads(key).items())


def comparisons(points: Sequence[Mapping[str, Any]], factor: str, levels: Sequence[Any],
                derived: Sequence[str] = ()) -> tuple[Comparison, ...]:
    """Each level of ``factor`` after the first vs the first, at every combination of the other factors.

    Parameters
    ----------
    points : sequence of mapping
        The factor levels of each point of the plan (each once).
    factor : str
    levels : sequence
        The level labels of ``factor`` in spec order (the first is the baseline).
    derived : sequence of str
        Columns that follow from ``factor``'s level, not other factors (``target`` when its levels pick the
        target, as ``device: [{name: low, target: low}, ...]`` does): left out of "the other factors".
    """
    by_rest: dict[str, dict[Any, str]] = {}
    for f in points:
        rest = {k: v for k, v in f.items() if k != factor and k not in derived}
        by_rest.setdefault(point_key(rest), {})[f[factor]] = point_key(f)
    out = []
    for rest, arms in by_rest.items():
        if levels[0] not in arms:
            continue
        out += [Comparison(factor, arms[levels[0]], arms[lv], lv, tuple(_items(rest))) for lv in levels[1:] if lv in arms]
    return tuple(out)


def nominal_levels(precision: Mapping[str, Any]) -> dict[int, tuple[float, float]]:
    """n -> (two-sided, one-sided) nominal p threshold of the look at n runs per arm.

    The boundaries are Lan-DeMets O'Brien-Fleming-type at fractions n / max_repetitions,
    n = min_repetitions .. max_repetitions: two-sided at ``alpha`` (``alpha / 2`` a side) for "different",
    one-sided at ``alpha`` for each one-sided test of the equivalence decisions (TOST at level alpha).
    """
    lo, hi, alpha = precision["min_repetitions"], precision["max_repetitions"], precision.get("alpha", 0.05)
    ns = np.arange(lo, hi + 1)
    b2 = spending_bounds(ns / hi, alpha / 2, two_sided=True)
    b1 = spending_bounds(ns / hi, alpha, two_sided=False)
    return {int(n): (float(2 * st.norm.sf(x2)), float(st.norm.sf(x1))) for n, x2, x1 in zip(ns, b2, b1, strict=True)}


@dataclass
class Decisions:
    """The state of an adaptive sweep before a round.

    Attributes
    ----------
    finished : dict of str to str
        Point key -> why it is finished (``"target"``, ``"decided"``, ``"budget"``).
    n : dict of str to int
        Point key -> runs it has (of the repetitions read).
    half_width : dict of str to float
        Point key -> relative CI half-width reached with its runs.
    verdicts : dict of str to dict
        Comparison label -> ``{"decision": ..., "n": ...}`` (decision None: not decided).
    """

    finished: dict[str, str] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)
    half_width: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)


def _series(values: Mapping[int, float], before: int) -> np.ndarray:
    return np.array([values[r] for r in sorted(values) if r < before], dtype=float)


def _arms(comp: Comparison, values: Mapping[str, Mapping[int, float]], before: int,
          paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """The two arms' values of rounds ``< before``; paired: only the rounds (blocks) both arms have, aligned."""
    xo, yb = values.get(comp.other, {}), values.get(comp.baseline, {})
    if not paired:
        return _series(xo, before), _series(yb, before)
    both = sorted(r for r in xo if r in yb and r < before)
    return np.array([xo[r] for r in both], dtype=float), np.array([yb[r] for r in both], dtype=float)


def _verdict(comp: Comparison, values: Mapping[str, Mapping[int, float]], precision: Mapping[str, Any],
             nominal: Mapping[int, tuple[float, float]], before: int, paired: bool = False) -> dict[str, Any]:
    x, y = _arms(comp, values, before, paired)
    last = min(x.size, y.size)
    for n in range(precision["min_repetitions"], last + 1):
        word = comparison_decision(x[:n], y[:n], nominal[n], precision.get("equivalence_margin"),
                                   precision.get("detect_ratio"), paired=paired)
        if word is not None:
            return {"decision": word, "n": n, **_repeated_ci(x[:n], y[:n], nominal[n][0], paired)}
    out: dict[str, Any] = {"decision": None, "n": int(last)}
    if last >= precision["min_repetitions"]:
        last = min(last, precision["max_repetitions"])
        out.update(_repeated_ci(x[:last], y[:last], nominal[last][0], paired))
    return out


def _repeated_ci(x: np.ndarray, y: np.ndarray, p2: float, paired: bool = False) -> dict[str, float]:
    """The ratio and its repeated confidence interval at a look: :func:`ratio_ci` at level ``1 - p2``, the look's
    nominal level, so it excludes 1 exactly when the look's test says "different" (Jennison & Turnbull 2000,
    ch. 9: repeated confidence intervals keep their level at any stopping time)."""
    r = ratio_ci(x, y, 1.0 - p2, paired=paired)
    return {"ratio": r.ratio, "ci_low": r.ci_low, "ci_high": r.ci_high, "ci_level": 1.0 - p2}


def decide(precision: Mapping[str, Any], points: Sequence[str], comps: Sequence[Comparison],
           values: Mapping[str, Mapping[int, float]], before: int, *, paired: bool = False) -> Decisions:
    """Which points are finished before round ``before``, from the values of repetitions ``< before``.

    Parameters
    ----------
    precision : mapping
        The study's checked ``precision`` (:func:`storagebench._precision.check_precision`).
    points : sequence of str
        Point keys of the plan (:func:`point_key`).
    comps : sequence of Comparison
        The comparisons of ``precision.compare`` (:func:`comparisons`), or empty.
    values : mapping
        Point key -> repetition -> the metric of that completed run (missing: not complete or failed).
    before : int
        The round about to run (1-based); only repetitions ``< before`` are read. With ``setups > 1`` a round
        is a set-up number and a value is the set-up's (the geometric mean of its runs).
    paired : bool
        ``blocks: true``: a comparison pairs its arms on the round (the block) and tests the paired t on the log
        ratios, the fixed design's own analysis; n counts blocks.

    Returns
    -------
    Decisions
    """
    data = {p: _series(values.get(p, {}), before) for p in points}
    out = Decisions(n={p: int(v.size) for p, v in data.items()})
    conf = precision.get("confidence", CONFIDENCE)
    target = precision.get("ci_rel_half_width")
    open_arms: set[str] = set()
    if comps:
        nominal = nominal_levels(precision)
        for c in comps:
            v = _verdict(c, values, precision, nominal, before, paired)
            out.verdicts[c.label()] = v
            if v["decision"] is None:
                open_arms.update((c.baseline, c.other))
    for p, v in data.items():
        out.half_width[p] = rel_half_width(v, conf)
        reached = target is None or point_stops(v, target, precision["min_repetitions"], conf) is not None
        if v.size >= precision["max_repetitions"]:
            out.finished[p] = "budget"
        elif reached and p not in open_arms and v.size >= precision["min_repetitions"]:
            out.finished[p] = "target" if target is not None else "decided"
    return out


def expected_repetitions(cv: float, precision: dict[str, Any]) -> int:
    """Runs per point the rule is expected to use at a run-to-run ``cv``: the t-based sample size.

    For ``ci_rel_half_width`` w: the smallest n whose guarded interval at the assumed SD is that narrow,
    :func:`storagebench.stats.sequential.log_half_width` ``(s, n) <= log(1 + w)``, ``s = sqrt(log(1 + cv^2))``
    (the log-scale SD of a lognormal with that CV). For ``compare``: the
    two-sample n of a two-sided Welch test at ``alpha`` with 80 % power to detect ``detect_ratio``
    (or the margin, or 1.2), ``n = 2 (z_{1-a/2} + z_{0.8})^2 s^2 / log(d)^2``, times 1.1 for the
    group-sequential design's inflation (O'Brien-Fleming, Jennison & Turnbull 2000, Table 2.4: R ~ 1.02-1.03,
    rounded up). Clipped to [min_repetitions, max_repetitions].
    """
    lo, hi = precision["min_repetitions"], precision["max_repetitions"]
    s = math.sqrt(math.log1p(cv * cv))
    need = lo
    if "ci_rel_half_width" in precision:
        w, c = math.log1p(precision["ci_rel_half_width"]), precision["confidence"]
        need = next((n for n in range(max(2, lo), hi + 1) if log_half_width(s, n, c) <= w), hi)
    if "compare" in precision:
        d = precision.get("detect_ratio") or (1 + precision["equivalence_margin"]
                                              if "equivalence_margin" in precision else 1.2)
        z = st.norm.ppf(1 - precision["alpha"] / 2) + st.norm.ppf(0.8)
        need = max(need, math.ceil(1.1 * 2 * z * z * s * s / math.log(d) ** 2))
    return int(min(max(need, lo), hi))


def time_to_answer(study: Any, cv: float | None = None) -> dict[str, Any]:
    """The fio time a study takes: runs x (runtime + ramp_time), fixed, or expected and maximum under ``precision``.

    Parameters
    ----------
    study : storagebench.Study
    cv : float, optional
        Run-to-run CV for the expected time; default ``precision.assumed_cv``, else 0.05 (stated).

    Returns
    -------
    dict
        ``points``, ``run_s`` (runtime + ramp_time; with ``concurrent``, divided by ``together``, the runs of
        a concurrency group, which run at once), and ``fixed_runs``/``fixed_s`` or ``min_runs``,
        ``expected_runs``, ``expected_s``, ``max_runs``, ``max_s``, ``assumed_cv``, ``cv_source``; with ``setups > 1``
        also ``arms`` (levels of ``setup_factors``) and ``fixed_builds``, or under ``precision`` (the set-up the
        unit: ``expected_repetitions`` is set-ups per arm, each of ``repetitions`` runs per point) ``min_builds``,
        ``expected_builds``, ``max_builds``.
    """
    points = study.n_runs // (study.plan_repetitions * study.plan_setups)
    # the runs of a concurrency group (the levels of the concurrent factors) run at once: one run's time each group
    together = math.prod(len(study.factors[f]) for f in study.concurrent)
    run_s = float(study.runtime + study.ramp_time) / together
    arms = math.prod(len(study.factors[f]) for f in study.setup_factors) if study.setups > 1 else 0
    out: dict[str, Any] = {"points": points, "run_s": run_s}
    if together > 1:
        out["together"] = together
    if arms:
        out["arms"] = arms
    p = study.precision
    if p is None:
        out.update(fixed_runs=study.n_runs, fixed_s=study.n_runs * run_s)
        if arms:
            out["fixed_builds"] = arms * study.setups
        return out
    src = "given" if cv is not None else ("precision.assumed_cv" if "assumed_cv" in p else "default 0.05")
    cv = cv if cv is not None else p.get("assumed_cv", 0.05)
    n = expected_repetitions(cv, p)
    per = study.repetitions if study.adaptive_setups else 1  # runs per set-up (the rule counts set-ups)
    out.update(min_runs=points * p["min_repetitions"] * per, expected_runs=points * n * per,
               expected_s=points * n * per * run_s, max_runs=points * p["max_repetitions"] * per,
               max_s=points * p["max_repetitions"] * per * run_s, assumed_cv=cv, cv_source=src,
               expected_repetitions=n)
    if study.adaptive_setups:
        out.update(min_builds=arms * p["min_repetitions"], expected_builds=arms * n,
                   max_builds=arms * p["max_repetitions"])
    return out


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def time_text(study: Any, cv: float | None = None) -> list[str]:
    """The lines of ``storagebench run --dry-run``: the plan and the fio time it takes (:func:`time_to_answer`).

    Parameters
    ----------
    study : storagebench.Study
    cv : float, optional
        Run-to-run CV assumed for the expected time (default as :func:`time_to_answer`).

    Returns
    -------
    list of str
    """
    t = time_to_answer(study, cv)
    run = f"{study.runtime + study.ramp_time:g} s per run (runtime {study.runtime:g} s + ramp_time {study.ramp_time:g} s)"
    if "together" in t:
        run += f", {t['together']} runs at a time (concurrent: {', '.join(study.concurrent)})"
    lines = [f"study {study.name}: {t['points']} point(s), {run}"]
    if study.precision is None:
        lines.append(f"fixed: {study.repetitions} repetition(s) per point = {t['fixed_runs']} runs, "
                     f"fio time {_hms(t['fixed_s'])}")
    elif study.adaptive_setups:
        p = study.precision
        arms = t["arms"]
        lines += [f"adaptive (precision), the set-up as the unit: {p['min_repetitions']} to {p['max_repetitions']} "
                  f"set-ups per arm ({arms} arm(s) of {', '.join(study.setup_factors) or 'the whole testbed'}; "
                  f"min_repetitions/max_repetitions count set-ups; setups: {study.setups} is replaced by them), "
                  f"{study.repetitions} run(s) per point and set-up",
                  f"  expected: {t['expected_repetitions']} set-ups per arm = {t['expected_builds']} builds, "
                  f"{t['expected_runs']} runs, fio time {_hms(t['expected_s'])} (at a set-up-to-set-up CV of "
                  f"{t['assumed_cv']:g}, {t['cv_source']})",
                  f"  at least: {t['min_builds']} builds, {t['min_runs']} runs, fio time "
                  f"{_hms(t['min_runs'] * t['run_s'])}",
                  f"  at most:  {t['max_builds']} builds, {t['max_runs']} runs, fio time {_hms(t['max_s'])} "
                  "(max_repetitions)",
                  "  the builds' time is not counted (it depends on the testbed)"]
        return lines
    else:
        p = study.precision
        lines += [f"adaptive (precision): {p['min_repetitions']} to {p['max_repetitions']} repetitions per point",
                  f"  expected: {t['expected_repetitions']} per point = {t['expected_runs']} runs, fio time "
                  f"{_hms(t['expected_s'])} (at a run-to-run CV of {t['assumed_cv']:g}, {t['cv_source']})",
                  f"  at least: {t['min_runs']} runs, fio time {_hms(t['min_runs'] * t['run_s'])}",
                  f"  at most:  {t['max_runs']} runs, fio time {_hms(t['max_s'])} (max_repetitions)"]
    if study.setups > 1:
        lines.append(f"plus {study.setups} testbed build(s) per arm, not counted (their time depends on the testbed)")
    return lines

"""The rounds of an adaptive sweep (a study with ``precision:``): measure, analyse, stop what is answered.

Round ``r`` measures repetition ``r`` of every point that is not finished, in a seeded random order (SHA-256
of ``seed:run_id``, the order of a fixed sweep's runs); before each round the decisions are made again from
the completed runs in ``raw/`` (:func:`storagebench._adaptive.decide`, a pure function of their values and
the rule). A killed sweep therefore resumes where it stopped with the same decisions on the same data: the
runs of the plan are those of a fixed sweep of ``max_repetitions`` (one id per repetition), and the ones
that are complete are read again, never measured again.

With ``blocks: true`` a round is one block: repetition (or set-up) ``r`` of **every** point while any point is
unfinished, so that each block holds one unit of every arm (the paired analysis pairs on it).

With ``setups > 1`` (a testbed) the experimental unit is the set-up, a fresh build: round ``r`` builds set-up
``r`` of every arm (level of ``setup_factors``) with a point to measure, one build each in a seeded order
(:func:`round_units`), and measures those points on it; a point's value in round ``r`` is the geometric mean
of its runs on set-up ``r`` (``repetitions`` runs per set-up), so ``min_repetitions``/``max_repetitions`` count
set-ups and the stopping rules read n = set-ups (blocks, when paired). A build interrupted by a kill is redone
whole on resume (its complete runs set aside, as a fixed sweep does), and since the decisions before round ``r``
read only set-ups ``< r``, the resumed sweep builds the same units.

With ``concurrent`` (workloads run at the same time, as one unit) a round measures whole concurrency groups
(:meth:`storagebench._plan.RunPlan.groups`, the fixed sweep's own cut): a group runs, all its runs at once, when
any of its points is unfinished (:func:`round_groups`; with set-ups each unit carries its groups, as a fixed
sweep's does), so no point is measured without the load beside it, and a finished point measured with an
unfinished partner gets the extra runs. The decisions stay a pure function of the completed runs, so resume holds.

After each round ``precision.json`` (in the study's directory, replaced in one rename) records the rule, the
repetitions each point used, why it stopped, the CI half-width it reached and each comparison's verdict:
what the write-up reports (``notebooks/analyze.ipynb``).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ._adaptive import Decisions, comparisons, decide, point_key
from ._plan import SetUpUnit
from ._precision import PRECISION_FILE
from ._runcontext import RunContext
from ._rungroups import run_group
from ._specvalues import level_label
from ._study import RunPlan, RunPoint
from .ingest import ingest_paths
from .runlevel import per_run

__all__ = ["PRECISION_FILE", "run_rounds", "read_values", "replay", "round_groups", "round_units"]


def read_values(raw_dir: Path, run_ids, metric: str) -> dict[str, float]:
    """run id -> the run-level ``metric`` of each complete run (every host and direction combined, fio's rule;
    runs with a job in error or killed are left out)."""
    dirs = [raw_dir / r for r in run_ids]
    if not dirs:
        return {}
    res = ingest_paths(dirs)
    if res.runs.empty:
        return {}
    rows = per_run(res.runs, res.histograms, completed=True)
    return {str(r): float(v) for r, v in zip(rows["run_id"], rows[metric], strict=True) if v == v and v > 0}


def _gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


class _State:
    """The plan seen as points x rounds, with the values read so far.

    A round is a repetition; with set-ups (a plan whose runs carry set-up numbers > 1: ``precision`` with
    ``setups > 1``) it is a set-up number, and a point's value in it is the geometric mean of its runs on that
    set-up (the set-up is the unit, as :func:`storagebench.studies.unit_values` makes it).
    """

    def __init__(self, plan: RunPlan, precision: Mapping[str, Any], factors: Mapping[str, list[Any]]):
        self.precision = precision
        self.setups = any(p.setup > 1 for p in plan)
        self.paired = any(p.block is not None for p in plan)  # blocks: true
        self.by_point: dict[str, dict[int, tuple[RunPoint, ...]]] = {}
        for p in plan:
            reps = self.by_point.setdefault(point_key(p.factors), {})
            r = p.setup if self.setups else p.repetition
            reps[r] = (*reps.get(r, ()), p)
        self.keys = list(self.by_point)
        comp = precision.get("compare")
        levels = [level_label(lv) for lv in factors[comp]] if comp else []
        derived = ("target",) if comp and any(isinstance(lv, dict) and "target" in lv for lv in factors[comp]) else ()
        self.comps = comparisons([next(iter(v.values()))[0].factors for v in self.by_point.values()], comp, levels,
                                 derived) if comp else ()
        # the concurrency groups of the plan (its own rule, RunPlan.groups): run id -> the runs measured with it
        self.group_of = {p.run_id: g for g in plan.groups() for p in g}
        self.values: dict[str, dict[int, float]] = {k: {} for k in self.keys}
        self.run_values: dict[str, float] = {}
        self.read: set[str] = set()

    def set_runs(self, run_values: Mapping[str, float]) -> None:
        """Take run id -> value and recompute each point's value per round (the geometric mean of its runs)."""
        self.run_values.update(run_values)
        for k, reps in self.by_point.items():
            self.values[k] = {}
            for r, runs in reps.items():
                got = [self.run_values[p.run_id] for p in runs if p.run_id in self.run_values]
                if got:
                    self.values[k][r] = _gmean(got)

    def update(self, raw_dir: Path, done: set[str]) -> None:
        """Read the metric of the complete runs not read yet."""
        new = sorted(p.run_id for reps in self.by_point.values() for runs in reps.values() for p in runs
                     if p.run_id in done and p.run_id not in self.read)
        self.set_runs(read_values(raw_dir, new, self.precision["metric"]) if new else {})
        self.read.update(new)

    def forget(self, run_ids) -> None:
        """Runs measured again (a set-up unit rebuilt after an interrupted one): read them afresh."""
        for rid in run_ids:
            self.read.discard(rid)
            self.run_values.pop(rid, None)

    def decide(self, before: int) -> Decisions:
        """The decisions before round ``before``."""
        return decide(self.precision, self.keys, self.comps, self.values, before, paired=self.paired)

    def todo(self, d: Decisions, r: int) -> list[RunPoint]:
        """The runs of round ``r``: those of every point not finished before it; with ``blocks`` the whole block
        r (every point, so that each block holds one unit of every arm, as the paired analysis needs) while any
        point is not finished; with ``concurrent`` each whole concurrency group of such a run (its runs are
        measured together or not at all, as in a fixed sweep)."""
        open_ = [k for k in self.keys if k not in d.finished]
        if self.paired and open_:
            open_ = self.keys
        runs: dict[str, RunPoint] = {}
        for k in open_:
            for p in self.by_point[k].get(r, ()):
                runs.update((q.run_id, q) for q in self.group_of[p.run_id])
        return list(runs.values())


def replay(plan: RunPlan, precision: Mapping[str, Any], factors: Mapping[str, list[Any]],
           values: Mapping[str, float]) -> list[dict[str, Any]]:
    """The decisions a sweep makes before each round, replayed from run id -> value (e.g. a finished sweep's).

    Returns
    -------
    list of dict
        Per round r = 1 .. ``max_repetitions`` + 1: ``{"round": r, "finished": {point: reason}, "verdicts": ...}``
        (a round is a set-up number when the plan has set-ups).
    """
    state = _State(plan, precision, factors)
    state.set_runs({p.run_id: values[p.run_id] for p in plan if p.run_id in values})
    out = []
    for r in range(1, precision["max_repetitions"] + 2):
        d = state.decide(r)
        out.append({"round": r, "finished": dict(sorted(d.finished.items())), "verdicts": d.verdicts})
    return out


def round_groups(plan: RunPlan, todo: list[RunPoint], seed: int) -> list[tuple[RunPoint, ...]]:
    """The runs ``todo`` of a round without set-ups as the plan's concurrency groups (:meth:`RunPlan.groups`, one
    run each without ``concurrent``), in a seeded random order (SHA-256 of ``seed:run_id`` of a group's first run:
    a fixed sweep's order of its runs)."""
    want = {p.run_id for p in todo}
    groups = plan.groups([p for p in plan if p.run_id in want])
    return sorted(groups, key=lambda g: hashlib.sha256(f"{seed}:{g[0].run_id}".encode()).hexdigest())


def round_units(plan: RunPlan, todo: list[RunPoint], r: int, seed: int) -> list[SetUpUnit]:
    """Set-up ``r`` of every arm with a run in ``todo``: one unit (one build) per arm, holding only those runs
    (in plan order), the units in a seeded random order (SHA-256 of ``seed:set-up:r:arm``, the fixed plan's)."""
    want = {p.run_id for p in todo}
    by_arm: dict[str, list[RunPoint]] = {}
    for p in plan:
        if p.run_id in want:
            by_arm.setdefault(point_key({f: p.factors[f] for f in plan.setup_factors}), []).append(p)
    units = [SetUpUnit(setup=r, block=pts[0].block, arm={f: pts[0].factors[f] for f in plan.setup_factors},
                       points=tuple(pts), groups=plan.groups(pts)) for pts in by_arm.values()]
    return sorted(units, key=lambda u: hashlib.sha256(f"{seed}:set-up:{r}:{point_key(u.arm)}".encode()).hexdigest())


def run_rounds(ctx: RunContext, plan: RunPlan,
               measure_unit: Callable[[RunContext, SetUpUnit], None] | None = None) -> Decisions:
    """Measure ``plan`` in rounds until every point is finished (:mod:`storagebench._adaptive`).

    Parameters
    ----------
    ctx : RunContext
        The sweep's context (its tally's ``done`` holds the runs complete in ``raw/``).
    plan : RunPlan
        The study's plan: ``max_repetitions`` per point (or set-ups per arm).
    measure_unit : callable, optional
        With set-ups: ``measure_unit(ctx, unit)`` builds the unit's testbed and measures it (the runner's, which
        skips a complete unit and redoes an interrupted one whole). Round r is then set-up r of every arm with an
        unfinished point, one build each, measuring only the unfinished points' runs.

    Returns
    -------
    Decisions
        The decisions after the last round (what ``precision.json`` records).
    """
    study, store = ctx.study, ctx.store
    state = _State(plan, study.precision, {f: list(v) for f, v in study.factors.items()})
    if state.setups and measure_unit is None:
        raise ValueError("run_rounds: a plan with set-ups needs measure_unit (a testbed builds each set-up)")
    for r in range(1, study.precision["max_repetitions"] + 1):
        state.update(store.raw_dir, ctx.tally.done)
        d = state.decide(r)
        todo = state.todo(d, r)
        write_record(store.root, study, state, d)
        if not todo:
            break
        if state.setups:
            for unit in round_units(plan, todo, r, study.seed):
                measure_unit(ctx, unit)
                state.forget(unit.run_ids)  # measured again if it was interrupted: read afresh
        else:
            for group in round_groups(plan, todo, study.seed):
                run_group(ctx, group)
        ctx.tally.done.update(ctx.tally.completed)
    state.update(store.raw_dir, ctx.tally.done)
    final = state.decide(study.precision["max_repetitions"] + 1)
    write_record(store.root, study, state, final)
    return final


def write_record(root: Path, study: Any, state: _State, final: Decisions) -> Path:
    """``precision.json``: the rule, each point's repetitions, why it stopped and the precision reached, and
    each comparison's verdict (replaced in one rename)."""
    points = []
    for k in state.keys:
        hw = final.half_width.get(k)
        points.append({"factors": orjson.loads(k), "repetitions": final.n.get(k, 0),
                       "stopped": final.finished.get(k, "not finished"),
                       "ci_rel_half_width": hw if hw is not None and hw != float("inf") else None,
                       "run_ids": [p.run_id for r in sorted(state.values[k]) for p in state.by_point[k][r]
                                   if p.run_id in state.run_values]})
    record = {"study": study.name, "rule": dict(study.precision), "unit": "setup" if state.setups else "run",
              "blocks": state.paired, "concurrent": list(study.concurrent), "points": points,
              "comparisons": [{"comparison": label, **v} for label, v in final.verdicts.items()]}
    path = root / PRECISION_FILE
    tmp = path.with_name(f".{PRECISION_FILE}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)
    return path

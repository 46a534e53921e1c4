"""The rounds of an adaptive sweep (a study with ``precision:``): measure, analyse, stop what is answered.

Round ``r`` measures repetition ``r`` of every point that is not finished, in a seeded random order (SHA-256
of ``seed:run_id``, the order of a fixed sweep's runs); before each round the decisions are made again from
the completed runs in ``raw/`` (:func:`storagebench._adaptive.decide`, a pure function of their values and
the rule). A killed sweep therefore resumes where it stopped with the same decisions on the same data: the
runs of the plan are those of a fixed sweep of ``max_repetitions`` (one id per repetition), and the ones
that are complete are read again, never measured again.

After each round ``precision.json`` (in the study's directory, replaced in one rename) records the rule, the
repetitions each point used, why it stopped, the CI half-width it reached and each comparison's verdict:
what the write-up reports (``notebooks/analyze.ipynb``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ._adaptive import Decisions, comparisons, decide, point_key
from ._precision import PRECISION_FILE
from ._runcontext import RunContext
from ._rungroups import run_group
from ._specvalues import level_label
from ._study import RunPlan, RunPoint
from .ingest import ingest_paths
from .runlevel import per_run

__all__ = ["PRECISION_FILE", "run_rounds", "read_values", "replay"]



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


def _round_order(seed: int, points: list[RunPoint]) -> list[RunPoint]:
    return sorted(points, key=lambda p: hashlib.sha256(f"{seed}:{p.run_id}".encode()).hexdigest())


class _State:
    """The plan seen as points x repetitions, with the values read so far."""

    def __init__(self, plan: RunPlan, precision: Mapping[str, Any], factors: Mapping[str, list[Any]]):
        self.precision = precision
        self.by_point: dict[str, dict[int, RunPoint]] = {}
        for p in plan:
            self.by_point.setdefault(point_key(p.factors), {})[p.repetition] = p
        self.keys = list(self.by_point)
        comp = precision.get("compare")
        levels = [level_label(lv) for lv in factors[comp]] if comp else []
        self.comps = comparisons([next(iter(v.values())).factors for v in self.by_point.values()], comp, levels) \
            if comp else ()
        self.values: dict[str, dict[int, float]] = {k: {} for k in self.keys}
        self.read: set[str] = set()

    def update(self, raw_dir: Path, done: set[str]) -> None:
        """Read the metric of the complete runs not read yet."""
        new = {p.run_id: (k, r) for k, reps in self.by_point.items() for r, p in reps.items()
               if p.run_id in done and p.run_id not in self.read}
        vals = read_values(raw_dir, sorted(new), self.precision["metric"])
        for rid, (k, r) in new.items():
            if rid in vals:
                self.values[k][r] = vals[rid]
        self.read.update(new)

    def decide(self, before: int) -> Decisions:
        """The decisions before round ``before``."""
        return decide(self.precision, self.keys, self.comps, self.values, before)


def replay(plan: RunPlan, precision: Mapping[str, Any], factors: Mapping[str, list[Any]],
           values: Mapping[str, float]) -> list[dict[str, Any]]:
    """The decisions a sweep makes before each round, replayed from run id -> value (e.g. a finished sweep's).

    Returns
    -------
    list of dict
        Per round r = 1 .. ``max_repetitions`` + 1: ``{"round": r, "finished": {point: reason}, "verdicts": ...}``.
    """
    state = _State(plan, precision, factors)
    for k, reps in state.by_point.items():
        state.values[k] = {r: values[p.run_id] for r, p in reps.items() if p.run_id in values}
    out = []
    for r in range(1, precision["max_repetitions"] + 2):
        d = state.decide(r)
        out.append({"round": r, "finished": dict(sorted(d.finished.items())), "verdicts": d.verdicts})
    return out


def run_rounds(ctx: RunContext, plan: RunPlan) -> Decisions:
    """Measure ``plan`` in rounds until every point is finished (:mod:`storagebench._adaptive`).

    Parameters
    ----------
    ctx : RunContext
        The sweep's context (its tally's ``done`` holds the runs complete in ``raw/``).
    plan : RunPlan
        The study's plan: ``max_repetitions`` per point.

    Returns
    -------
    Decisions
        The decisions after the last round (what ``precision.json`` records).
    """
    study, store = ctx.study, ctx.store
    state = _State(plan, study.precision, {f: list(v) for f, v in study.factors.items()})
    for r in range(1, study.precision["max_repetitions"] + 1):
        state.update(store.raw_dir, ctx.tally.done)
        d = state.decide(r)
        todo = [state.by_point[k][r] for k in state.keys if k not in d.finished and r in state.by_point[k]]
        write_record(store.root, study, state, d)
        if not todo:
            break
        for point in _round_order(study.seed, todo):
            run_group(ctx, (point,))
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
                       "run_ids": [state.by_point[k][r].run_id for r in sorted(state.values[k])]})
    record = {"study": study.name, "rule": dict(study.precision), "points": points,
              "comparisons": [{"comparison": label, **v} for label, v in final.verdicts.items()]}
    path = root / PRECISION_FILE
    tmp = path.with_name(f".{PRECISION_FILE}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)
    return path

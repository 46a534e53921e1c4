"""The plan of a study: its runs, how they are identified, and in what order they run.

:func:`build_plan` expands a :class:`~storagebench._study.Study` (its :meth:`~storagebench._study.Study.expand`)
into a :class:`RunPlan`: the full factorial grid x repetitions x set-ups, each run a
:class:`RunPoint` with a stable ``run_id`` (a hash of what the run is), in a seeded random order
cut into :class:`SetUpUnit` s (one build of a testbed each) and concurrency groups.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pandas as pd

from .errors import StudyError
from .fio.options import KNOWN_OPTIONS

__all__ = ["RunPoint", "SetUpUnit", "RunPlan", "build_plan", "canonical_json"]


def canonical_json(obj: Any) -> bytes:
    """``obj`` as JSON with sorted keys: what ``run_id`` and the spec hash are hashes of."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


@dataclass(frozen=True)
class RunPoint:
    """One fio run of a plan.

    Attributes
    ----------
    run_id : str
        12-hex stable hash (see :meth:`Study.expand`).
    repetition : int
        1-based repetition of this grid point.
    run_order : int
        0-based position in the randomised run order.
    factors : dict
        Factor name -> level (mapping levels by their ``name``).
    options : dict
        Every fio option of the run except ``filename`` (fixed, factor, and runner options).
    """

    run_id: str
    repetition: int
    run_order: int
    factors: dict[str, Any]
    options: dict[str, Any]
    setup: int = 1
    block: int | None = None

    def to_dict(self, study: str, *, setups: bool = False) -> dict[str, Any]:
        """What ``point.json`` holds (``setup``/``block`` only when the design has them: ``setups``, the study
        builds several set-ups, writes set-up 1 too, so that every run of such a study names its set-up)."""
        out: dict[str, Any] = {
            "study": study, "run_id": self.run_id, "repetition": self.repetition,
            "run_order": self.run_order, "factors": self.factors, "options": self.options,
        }
        if setups or self.setup != 1 or self.block is not None:
            out["setup"] = self.setup
        if self.block is not None:
            out["block"] = self.block
        return out


@dataclass(frozen=True)
class SetUpUnit:
    """The runs of one build of a testbed: one set-up of one arm.

    Attributes
    ----------
    setup : int
        1-based set-up number (the build of this arm).
    block : int or None
        Block of the unit (``blocks: true``), else None.
    arm : dict
        Level of each of the study's ``setup_factors`` (empty: the build holds every level).
    points : tuple of RunPoint
        Its runs, in run order.
    groups : tuple of tuple of RunPoint
        The same runs cut into concurrency groups (one point each without ``concurrent``).
    """

    setup: int
    block: int | None
    arm: dict[str, Any]
    points: tuple[RunPoint, ...]
    groups: tuple[tuple[RunPoint, ...], ...]

    @property
    def run_ids(self) -> tuple[str, ...]:
        """Run ids of the unit, in run order."""
        return tuple(p.run_id for p in self.points)

    def describe(self) -> str:
        """``set-up 2 (datastore=ext4)``."""
        arm = ", ".join(f"{k}={v}" for k, v in self.arm.items())
        return f"set-up {self.setup}" + (f" ({arm})" if arm else "")


@dataclass(frozen=True)
class RunPlan:
    """The runs of a study in run order.

    Attributes
    ----------
    study : str
    spec_hash : str
    points : tuple of RunPoint
    """

    study: str
    spec_hash: str
    points: tuple[RunPoint, ...]
    setup_factors: tuple[str, ...] = ()
    #: The study's ``concurrent`` factors (plus ``target`` when their levels pick the target).
    concurrent: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.points)

    def groups(self, points=None) -> tuple[tuple[RunPoint, ...], ...]:
        """``points`` (default: the plan) cut into concurrency groups: adjacent runs of one set-up and
        repetition that differ only in the ``concurrent`` factors. Without ``concurrent``, one run each."""
        out: list[list[RunPoint]] = []
        last = None
        for p in self.points if points is None else points:
            key = (p.setup, p.repetition,
                   tuple((k, repr(v)) for k, v in p.factors.items() if k not in self.concurrent))
            if self.concurrent and out and key == last:
                out[-1].append(p)
            else:
                out.append([p])
            last = key
        return tuple(tuple(g) for g in out)

    def units(self) -> tuple[SetUpUnit, ...]:
        """The plan cut into set-up units (adjacent runs of one set-up of one arm), in run order."""
        out: list[list[RunPoint]] = []
        last = None
        for p in self.points:
            key = (p.setup, tuple(repr(p.factors.get(f)) for f in self.setup_factors))
            if out and key == last:
                out[-1].append(p)
            else:
                out.append([p])
            last = key
        return tuple(SetUpUnit(setup=u[0].setup, block=u[0].block if len({p.block for p in u}) == 1 else None,
                               arm={f: u[0].factors[f] for f in self.setup_factors},
                               points=tuple(u), groups=self.groups(u)) for u in out)

    def __iter__(self) -> Iterator[RunPoint]:
        return iter(self.points)

    @property
    def run_ids(self) -> tuple[str, ...]:
        """Run ids in run order."""
        return tuple(p.run_id for p in self.points)

    def to_frame(self):
        """One row per run: ``run_id``, ``repetition``, ``run_order`` (``setup``, ``block`` when the design has
        set-ups or blocks) and a column per factor.

        Returns
        -------
        pandas.DataFrame
        """
        design = any(p.setup != 1 or p.block is not None for p in self.points)
        rows = [{"run_id": p.run_id, "repetition": p.repetition, "run_order": p.run_order,
                 **({"setup": p.setup, "block": p.block} if design else {}), **p.factors} for p in self.points]
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# expansion


def _base_options(study: Any) -> dict[str, Any]:
    opts: dict[str, Any] = {"time_based": True, "runtime": _num(study.runtime)}
    if study.ramp_time:
        opts["ramp_time"] = _num(study.ramp_time)
    if study.size is not None:
        opts["size"] = study.size
    opts["group_reporting"] = 1
    opts.update(study.fixed)
    return opts


def build_plan(study: Any) -> RunPlan:
    """The plan of ``study`` (a :class:`~storagebench._study.Study`): the rule of :meth:`Study.expand`.

    Parameters
    ----------
    study : storagebench.Study
        A validated study; its run count is not checked here (:meth:`Study.expand` does it first).

    Returns
    -------
    RunPlan
        Points in run order.

    Raises
    ------
    StudyError
        Two runs with the same ``run_id`` (distinct levels make distinct ids).
    """
    names = list(study.factors)
    grids = [study.factors[n] for n in names]
    concurrent = set(study.concurrent)
    if any(isinstance(lv, dict) and "target" in lv for f in study.concurrent for lv in study.factors[f]):
        concurrent.add("target")  # the target a concurrent factor picks differs within its group
    # unit key -> group key -> [(rank, run_id, rep, factors, options)]
    units: dict[tuple, dict[tuple, list]] = {}
    for rank, combo in enumerate(itertools.product(*grids)):
        factors: dict[str, Any] = {}
        options = _base_options(study)
        for name, level in zip(names, combo, strict=True):
            if isinstance(level, dict):
                factors[name] = level["name"]
                for k, v in level.items():
                    if k == "name":
                        continue
                    if k == "target":
                        factors.setdefault("target", v)
                    else:
                        options[k] = v
            else:
                factors[name] = level
                if name in KNOWN_OPTIONS:
                    options[name] = level
        arm = tuple((f, factors[f]) for f in study.setup_factors)
        rest = tuple((k, canonical_json(v)) for k, v in factors.items() if k not in concurrent)
        for setup in range(1, study.plan_setups + 1):
            for rep in range(1, study.plan_repetitions + 1):
                key = {"study": study.name, "options": options, "factors": factors, "repetition": rep}
                if study.setups > 1:
                    key["setup"] = setup
                run_id = hashlib.sha256(canonical_json(key)).hexdigest()[:12]
                units.setdefault((setup, arm), {}).setdefault((rep, rest), []).append(
                    (rank, run_id, rep, dict(factors), dict(options)))

    def unit_rank(key: tuple) -> tuple:
        setup, arm = key
        h = hashlib.sha256(f"{study.seed}:set-up:{setup}:".encode() + canonical_json([list(a) for a in arm])).hexdigest()
        return (setup if study.blocks and study.setups > 1 else 0, h)

    ordered = []
    for ukey in sorted(units, key=unit_rank):
        setup, arm = ukey
        groups = [sorted(g) for g in units[ukey].values()]
        groups.sort(key=lambda g: (g[0][2] if study.blocks else 0,
                                   hashlib.sha256(f"{study.seed}:{min(m[1] for m in g)}".encode()).hexdigest()))
        for g in groups:
            for _, run_id, rep, factors, options in g:
                block = (setup if study.setups > 1 else rep) if study.blocks else None
                ordered.append((run_id, rep, setup, block, factors, options))
    run_points = tuple(
        RunPoint(run_id=rid, repetition=rep, run_order=i, factors=f, options=o, setup=setup, block=block)
        for i, (rid, rep, setup, block, f, o) in enumerate(ordered)
    )
    ids = [p.run_id for p in run_points]
    if len(set(ids)) != len(ids):  # pragma: no cover - distinct levels make distinct ids
        raise StudyError(f"study {study.name}: two runs got the same run_id; make factor levels distinct")
    return RunPlan(study=study.name, spec_hash=study.spec_hash, points=run_points,
                   setup_factors=tuple(study.setup_factors),
                   concurrent=tuple(study.concurrent) + (("target",) if "target" in concurrent
                                                         and "target" not in study.concurrent else ()))

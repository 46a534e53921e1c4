"""Resume: what a sweep finds when it starts, and what it measures again as a whole.

Resume is exact at every level of the design (see :func:`storagebench._runner.run_study`):

* a run is complete or absent (``raw/<run_id>/`` appears in one rename, :mod:`storagebench._runone`);
* a concurrency group measured only in part is set aside and measured again together
  (:func:`set_aside_group`);
* a testbed set-up unit measured only in part is set aside and built and measured again as a whole
  (:func:`set_aside_unit`), because its build was torn down when the sweep stopped.

At the start (:func:`resume`), fio processes a killed sweep left running are stopped, its staging
directories removed, and the I/O schedulers it changed put back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._runcontext import HOST_STEPS_JOURNAL, RunContext
from ._store import StudyStore
from ._study import RunPlan, RunPoint, SetUpUnit
from .hoststeps import restore_journal


@dataclass(frozen=True)
class Resumed:
    """What :func:`resume` cleaned up after a killed sweep.

    Attributes
    ----------
    stale : tuple of dict
        fio processes a killed sweep left running into this study, stopped.
    restored : tuple of dict
        I/O schedulers a killed sweep changed, put back (or left alone, with the reason).
    """

    stale: tuple[dict[str, Any], ...]
    restored: tuple[dict[str, Any], ...]


def resume(ctx: RunContext, overwrite: bool) -> Resumed:
    """With the study's lock held, before the first run: store the spec (a different one refused, or moved
    aside with ``overwrite``), stop what a killed sweep left running, remove its staging directories, and
    put back the schedulers it changed (its ``host_steps`` journal)."""
    store = ctx.store
    store.ensure_spec(ctx.study, overwrite=overwrite)
    stale = store.stop_stale_runs(fio_bin=ctx.fio_exe)
    store.cleanup_stale(fio_bin=ctx.fio_exe)
    restored = tuple(restore_journal(store.root / HOST_STEPS_JOURNAL))  # a killed sweep's schedulers
    return Resumed(stale=tuple(stale), restored=restored)


def skipped_runs(plan: RunPlan, done: set[str], set_aside: Sequence[str]) -> tuple[str, ...]:
    """The runs of ``plan`` that were complete before this call (``done`` at its start) and were kept."""
    return tuple(r for r in plan.run_ids if r in done and r not in set_aside)


def unit_is_complete(ctx: RunContext, unit: SetUpUnit) -> bool:
    """Every run of the set-up unit is complete in ``raw/``."""
    return len([r for r in unit.run_ids if r in ctx.tally.done]) == len(unit.points)


def set_aside_unit(ctx: RunContext, unit: SetUpUnit) -> None:
    """A testbed set-up unit measured only in part: its build no longer exists (it was torn down when the
    sweep stopped), so its complete runs go to ``aside/`` and the set-up is built and measured again."""
    have = [r for r in unit.run_ids if r in ctx.tally.done]
    if not have:
        return
    _put_aside(ctx, have, f"{unit.describe()} was interrupted after {len(have)} of its "
               f"{len(unit.points)} runs; its testbed no longer exists, so the set-up is built "
               "and measured again as a whole (runs of two builds are never mixed in one set-up)",
               {"setup": unit.setup, "block": unit.block, "arm": unit.arm})


def runs_to_measure(ctx: RunContext, group: Sequence[RunPoint]) -> list[RunPoint]:
    """The runs of a concurrency group still to measure: none when all are complete, all when only some are
    (those are set aside: its runs ran at the same time by design, so the group is measured again whole)."""
    todo = [p for p in group if p.run_id not in ctx.tally.done]
    if len(group) > 1 and todo and len(todo) < len(group):  # half a group: measured again as a whole
        have = [p.run_id for p in group if p.run_id in ctx.tally.done]
        _put_aside(ctx, have, f"concurrency group of {len(group)} runs was measured only in part ({len(have)} "
                   f"complete); its runs ran at the same time by design, so the group is measured again as "
                   f"a whole", {"run_ids_of_group": [p.run_id for p in group]})
        todo = list(group)
    return todo


def _put_aside(ctx: RunContext, have: list[str], reason: str, info: dict[str, Any]) -> None:
    """Move complete runs to ``aside/`` (:meth:`StudyStore.set_aside`) and count them as to do again."""
    ctx.store.set_aside(have, reason, **info)
    ctx.tally.set_aside.extend(have)
    ctx.tally.done.difference_update(have)
    ctx.progress.remaining += len(have)


def kept_hint(store: StudyStore, completed: Sequence[str]) -> str:
    """What a stopped sweep kept, and how to resume it (appended to its last error message)."""
    try:
        n = len(store.completed_run_ids())
    except OSError:
        return ""
    if not n:
        return ""
    return (f"; the run in progress was discarded, the {n} complete run(s) in {store.raw_dir} are kept"
            f" ({len(completed)} measured by this call): rerun the same command to resume")

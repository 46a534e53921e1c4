"""Concurrency groups: the runs of a group measured at once (one alone, several together), the study's
``host_steps`` applied once around each group, and each run accounted for in the sweep's tally.

Several runs of one group run in threads of their own, each with a helper thread of its own, and do
not wait for a quiet host (the other I/O is theirs). When one fails or the sweep is interrupted, this
process's other fio runs are stopped before the error goes on.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ._runcontext import RunContext, host_steps_for, wait_for_helper
from ._runone import measure_point
from ._runresume import runs_to_measure
from ._study import RunPoint
from .errors import FioError, HostError
from .fio import process

_TALLY_LOCK = threading.Lock()


def run_group(ctx: RunContext, group: Sequence[RunPoint]) -> None:
    """Measure the runs of one concurrency group that are not complete: one alone, several together (a
    group measured only in part is measured again whole, :func:`storagebench._runresume.runs_to_measure`)."""
    todo = runs_to_measure(ctx, group)
    if not todo:
        return
    # the study's host steps once before the group (its runs start together), undone after it;
    # after the previous run's fsyncs, so that a dropped cache is not refilled by them
    if ctx.study.host_steps:
        wait_for_helper(ctx.pool)
    with host_steps_for(ctx, todo) as steps:
        _measure_group(ctx, todo, steps)


def _measure_group(ctx: RunContext, todo: list[RunPoint], steps: Sequence[Mapping[str, Any]]) -> None:
    if len(todo) == 1:
        _one(ctx, todo[0], steps)
        return
    # several runs at once: one thread and one helper each; no waiting for a quiet host (the others are us)
    helper = ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="storagebench-group-helper")
    with helper, ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="storagebench-group") as threads:
        together = replace(ctx, pool=helper, wait_quiet_s=0.0)
        futures = [threads.submit(_one, together, p, steps) for p in todo]
        try:
            for f in futures:
                f.result()
        except BaseException:
            for marker, exe in process.live_markers():  # this process's own runs only
                with contextlib.suppress(Exception):
                    process.stop_processes(marker, exe)
            for f in futures:
                with contextlib.suppress(BaseException):
                    f.result()
            raise


def _one(ctx: RunContext, point: RunPoint, steps: Sequence[Mapping[str, Any]]) -> None:
    """Measure one run and account for it in the sweep's tally (thread-safe)."""
    tally, bar = ctx.tally, ctx.progress
    report: dict[str, Any] = {}
    try:
        duration = measure_point(ctx, point, steps, report)
    except (FioError, HostError) as exc:
        with _TALLY_LOCK:
            tally.failed.append(point.run_id)
            tally.errors[point.run_id] = getattr(exc, "message", str(exc))
            bar.step(None, failed=len(tally.failed))
        if ctx.stop_on_error:
            raise
        return
    finally:
        quiet = report.get("quiet_host")
        if quiet and not quiet.get("quiet", True):
            with _TALLY_LOCK:
                tally.not_quiet[point.run_id] = list(quiet.get("reasons", []))
    with _TALLY_LOCK:
        tally.completed.append(point.run_id)
        bar.step(duration, failed=len(tally.failed))

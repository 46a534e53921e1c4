"""What every step of a sweep shares: the frozen run context, the tally, the progress bar, and the
rules that turn a run point into what fio touches (its target, its hosts, the study's host steps).

:class:`RunContext` is built once by :func:`storagebench._runner.run_study` (or by
:func:`storagebench._runone.run_point` for one run) and handed down unchanged; a testbed build or a
concurrency group derives its own with :func:`dataclasses.replace` (its targets and devices, its
helper thread), never by editing it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tqdm import tqdm

from ._hostinfo import filesystem_of, memory_note
from ._store import StudyStore
from ._study import RunPoint, Study
from .errors import HostError, StorageBenchWarning, StudyError
from .fio.hosts import parse_host, parse_hostfile
from .fio.options import join_filenames, split_filenames
from .hoststeps import HostSteps
from .records import SetUpInfo

#: Schedulers a sweep changed and has not put back yet (:class:`storagebench.hoststeps.HostSteps`).
HOST_STEPS_JOURNAL = "host_steps_journal.json"


@dataclass
class Tally:
    """What a sweep did so far, and which runs are complete in ``raw/`` (filled under a lock by
    :mod:`storagebench._rungroups`; runs set aside leave ``done`` again, :mod:`storagebench._runresume`)."""

    completed: list[str]
    done: set[str] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    not_quiet: dict[str, list[str]] = field(default_factory=dict)
    set_aside: list[str] = field(default_factory=list)
    builds: list[str] = field(default_factory=list)


def _fmt_eta(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """tqdm bar on stderr whose ETA is (remaining runs) x (runtime + ramp + observed overhead)."""

    def __init__(self, total: int, done: int, nominal_s: float, name: str, enabled: bool):
        self.nominal_s = nominal_s
        self.remaining = total - done
        self.overheads: list[float] = []
        self.bar = None
        if enabled:
            self.bar = tqdm(total=total, initial=done, file=sys.stderr, unit="run", desc=name, dynamic_ncols=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} runs [{elapsed}{postfix}]")
            self._post()

    def _post(self) -> None:
        if self.bar is None:
            return
        over = sum(self.overheads) / len(self.overheads) if self.overheads else 0.0
        self.bar.set_postfix_str(f"ETA {_fmt_eta(self.remaining * (self.nominal_s + over))}", refresh=True)

    def step(self, duration_s: float | None, failed: int = 0) -> None:
        self.remaining -= 1
        if duration_s is not None:
            self.overheads.append(max(0.0, duration_s - self.nominal_s))
        if self.bar is not None:
            self.bar.update(1)
            if failed:
                self.bar.set_description_str(f"{self.bar.desc.split(' (')[0]} ({failed} failed)")
            self._post()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass(frozen=True)
class RunContext:
    """What the runs of one sweep share, fixed for the sweep (one build or group derives its own with
    :func:`dataclasses.replace`).

    Attributes
    ----------
    study : Study
    store : StudyStore
        Where the runs go; its spec is stored before the first run.
    fio_exe : str
        fio executable (:func:`storagebench.fio.process.find_fio`).
    timeout_s : float
        Wall-clock limit of one fio process, s.
    target : str or path-like, optional
        fio ``filename`` of every run without a ``target`` factor (default the study's ``target``).
    targets : mapping, optional
        ``target`` factor level -> path (a testbed build adds its own).
    allow_devices : sequence of str
        Block devices runs may write (:func:`storagebench._safety.check_run`).
    wait_quiet_s, quiet_window_s : float
        How long to wait for a quiet host, and the sample window of the quiet-host check, s.
    set_up : SetUpInfo or mapping, optional
        The testbed build the runs are measured on (kept in ``provenance.json``).
    pool : ThreadPoolExecutor, optional
        The helper thread for provenance and fsyncs while fio runs (one per run of a group).
    stop_on_error : bool
        Raise the first failed run's error instead of recording it and going on.
    tally : Tally, optional
        The sweep's account (``None`` for one run measured outside a sweep).
    progress : Progress, optional
        The sweep's progress bar.
    create_dirs : bool
        A target whose directory does not exist may be created (``--create-dirs``); otherwise it is refused.
    cgroup : str, optional
        The cgroup every fio process of the sweep runs in (a testbed build's throttle,
        :func:`storagebench.testbed.throttle`): fio enters it before it executes.
    """

    study: Study
    store: StudyStore
    fio_exe: str
    timeout_s: float
    target: str | os.PathLike[str] | None = None
    targets: Mapping[str, Any] | None = None
    allow_devices: Sequence[str] = ()
    wait_quiet_s: float = 0.0
    quiet_window_s: float = 0.0
    set_up: SetUpInfo | Mapping[str, Any] | None = None
    pool: ThreadPoolExecutor | None = None
    stop_on_error: bool = False
    tally: Tally | None = None
    progress: Progress | None = None
    create_dirs: bool = False
    cgroup: str | None = None


def quiet_window_for(study: Study) -> float:
    """The default quiet-host sample window of ``study``'s runs, s.

    1 % of a run's nominal duration (runtime + ramp_time), at least 0.02 s and at most 0.5 s: the
    window is time the sweep waits before each run (beyond the run's own preparation), so it
    costs at most 1 % of the sweep, and a longer run, which more I/O of others would disturb,
    gets a longer look. When the previous run's fio life was watched with its own I/O told apart
    (direct I/O: :meth:`storagebench._hostinfo.QuietProbe.credit`), that time fills the window and
    nothing is waited for. A device is busy above 50 IOPS (:data:`storagebench._hostinfo.QUIET_MAX_IOPS`):
    a 0.02 s window sees that as 2 I/Os or more.
    """
    return min(0.5, max(0.02, 0.01 * study.run_duration_s))


def resolve_target(ctx: RunContext, point: RunPoint) -> str:
    """The fio ``filename`` of ``point``: its ``target`` level (through ``ctx.targets``), else
    ``ctx.target``, else the study's ``target``; :class:`StudyError` when there is none."""
    level = point.factors.get("target")
    targets = ctx.targets
    if level is not None:
        if targets and str(level) in targets:
            return os.fspath(targets[str(level)])
        if targets:
            raise StudyError(
                f"target level {level!r} is not in targets; must be one of {sorted(targets)}, got {level!r}"
            )
        return str(level)
    if ctx.target is not None:
        return os.fspath(ctx.target)
    if ctx.study.target is not None:
        return ctx.study.target
    raise StudyError(f"study {ctx.study.name}: no target; pass target= (--target PATH) or set 'target' in the study")


def warn_memory_targets(ctx: RunContext, points: Sequence[RunPoint]) -> list[str]:
    """Warn (:class:`~storagebench.errors.StorageBenchWarning`, once per target) of each target on a file system in
    memory (tmpfs, devtmpfs, ramfs: :func:`storagebench._hostinfo.memory_note`); each run's ``provenance.json``
    records the same note and the write-up shows it. Returns the notes."""
    notes: list[str] = []
    seen: set[str] = set()
    for point in points:
        for path in split_filenames(absolute_targets(resolve_target(ctx, point))):
            if path in seen:
                continue
            seen.add(path)
            real = os.path.realpath(path)
            if os.path.exists(real) and stat.S_ISBLK(os.stat(real).st_mode):
                continue
            fstype = (filesystem_of(real) or {}).get("fstype")
            if fstype == "devtmpfs" and not os.path.lexists(path):
                continue  # a new file in /dev: refused by the safety check (storagebench._objectchecks)
            note = memory_note(path, fstype)
            if note:
                notes.append(note)
                warnings.warn(note, StorageBenchWarning, stacklevel=3)
    return notes


def absolute_targets(target: str) -> str:
    """Each ``:``-separated fio filename made absolute against storagebench's working directory."""
    parts = [os.path.abspath(p) for p in split_filenames(target)]
    return join_filenames(parts)


def hosts_list(hosts: list[str] | str | None) -> list[str] | None:
    """``hosts`` checked with fio's host grammar (:mod:`storagebench.fio.hosts`): a list as is, a
    string as a fio host file, read into the ``--client`` form of each host."""
    if hosts is None:
        return None
    try:
        if isinstance(hosts, list):
            labels = [parse_host(h).label for h in hosts]
            dup = sorted({x for x in labels if labels.count(x) > 1})
            if dup:
                raise HostError(f"hosts must be distinct, got {dup} more than once")
            return hosts
        return [h.fio_arg for h in parse_hostfile(hosts)]
    except HostError as exc:
        raise StudyError(f"hosts: {exc}") from None


def host_steps_for(ctx: RunContext, points: Sequence[RunPoint], *,
                   journal: bool = True) -> AbstractContextManager[tuple[dict[str, Any], ...]]:
    """The study's ``host_steps`` on the targets of ``points`` (checked now), to apply with ``with``
    (which gives their records); ``journal``: keep the journal of changed schedulers in the study's
    directory (``False``: only check)."""
    if not ctx.study.host_steps:
        return contextlib.nullcontext(())
    paths: list[str] = []
    for point in points:
        paths.extend(p for p in split_filenames(absolute_targets(resolve_target(ctx, point))) if p not in paths)
    return HostSteps(ctx.study.host_steps, paths, allow_devices=ctx.allow_devices, allow=ctx.study.allowed,
                     journal=ctx.store.root / HOST_STEPS_JOURNAL if journal else None)


def _noop() -> None:
    return None


def wait_for_helper(pool: ThreadPoolExecutor) -> None:
    """Wait until what the helper thread was given so far (the previous run's fsyncs) is done."""
    pool.submit(_noop).result()


def utc_now() -> str:
    """Now, UTC, ISO 8601 with ``Z``."""
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")

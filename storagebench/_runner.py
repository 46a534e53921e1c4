"""Execute a study's run plan with fio: the sweep loop, and the entry points of the runner.

Per run: render the job file, refuse unsafe targets (:func:`storagebench._safety.check_run`),
run ``fio --output-format=json+ --output=<tmp>/output.json <tmp>/job.fio`` in its own
process group with a wall-clock limit, then store ``job.fio``, ``output.json``,
``stderr.txt``, ``point.json`` and ``provenance.json`` with one atomic rename
(:class:`storagebench._store.StudyStore`). Runs already in ``raw/`` are skipped, so rerunning
the same command resumes a sweep that was interrupted or killed.

The runner is split by concept, one private module each, sharing one frozen
:class:`storagebench._runcontext.RunContext`:

* ``_runner`` (here): :func:`run_study` and the sweep loop over set-up units (a testbed build each);
* ``_rungroups``: concurrency groups, the study's ``host_steps`` around each, the tally;
* ``_runone``: measuring one run (:func:`run_point`): safety check, job file, quiet host, provenance;
* ``_runresume``: resume (what a killed sweep left, groups and set-ups measured only in part);
* ``_runcontext``: the run context, the tally and progress bar, targets, hosts and host steps;
* ``_runfio``: one fio process and the judgement of its output (:func:`run_fio`);
* ``_runwrite``: results or a target that cannot be written (:class:`NotWritableError` messages).
"""

from __future__ import annotations

import contextlib
import math
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from . import _throttle
from ._runcontext import (
    Progress,
    RunContext,
    Tally,
    host_steps_for,
    hosts_list,
    quiet_window_for,
    utc_now,
    warn_memory_targets,
)
from ._runfio import FioRun, run_fio
from ._rungroups import run_group
from ._runone import run_point
from ._runresume import Resumed, kept_hint, resume, set_aside_unit, skipped_runs, unit_is_complete
from ._runrounds import run_rounds
from ._runwrite import WRITE_ERRNOS, inside, not_writable
from ._store import StudyStore
from ._study import RunPlan, SetUpUnit, Study, load_study
from .errors import NotWritableError, StudyError
from .fio.process import find_fio
from .records import SetUpInfo, TestbedRecord

__all__ = ["SweepResult", "FioRun", "SetUp", "run_study", "run_point", "run_fio", "quiet_window_for"]


@dataclass(frozen=True)
class SetUp:
    """What one build of a testbed gives the sweep (yielded by a ``testbed`` of :func:`run_study`).

    Attributes
    ----------
    targets : mapping of str to str
        Target level -> path of this build (as ``targets`` of :func:`run_study`).
    allow_devices : tuple of str
        Block devices of this build that runs may write (devices the testbed created).
    devices : tuple of dict
        What was made (loop devices, filesystems ...; ``kind``, ``path``, ``role`` ...).
    notes : tuple of str
        What a reader must know about the build.
    phases_s : mapping of str to float
        Wall time of the build's phases so far, s (e.g. ``build``, ``precondition``).
    cgroup : str, optional
        The build's throttle cgroup (:func:`storagebench.testbed.throttle`): every fio run on the build runs in it.
    caps : mapping
        Device path -> its caps under that cgroup (each run's ``provenance.json`` records them: ``set_up.caps``).
    """

    targets: Mapping[str, str]
    allow_devices: tuple[str, ...] = ()
    devices: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    phases_s: Mapping[str, float] = field(default_factory=dict)
    cgroup: str | None = None
    caps: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepResult:
    """What one :func:`run_study` call did.

    Attributes
    ----------
    study : str
    root : Path
        ``<out_dir>/<study>``.
    planned : tuple of str
        Every run id of the plan, in run order.
    completed : tuple of str
        Runs measured by this call.
    skipped : tuple of str
        Runs already complete before this call (resume).
    failed : tuple of str
        Runs that failed in this call (kept under ``failed/``).
    errors : dict of str to str
        run id -> fio's message, for the failed runs.
    stale_stopped : tuple of dict
        fio processes a killed sweep had left running into this study, stopped before the first
        run (see :meth:`storagebench._store.StudyStore.stop_stale_runs`).
    not_quiet : dict of str to list of str
        run id -> why the host was not quiet when that run started (another fio, I/O on the
        target's device); the numbers are in the run's ``provenance.json`` (``quiet_host``).
    set_aside : tuple of str
        Complete runs this call moved to ``aside/`` before measuring their set-up or concurrency
        group again as a whole (:meth:`storagebench._store.StudyStore.set_aside`).
    builds : tuple of str
        Build ids of the testbed set-ups this call built (``testbed.json``).
    schedulers_restored : tuple of dict
        I/O schedulers a killed sweep of this study had changed (``host_steps``) and not put back,
        put back (or left alone, with the reason) before the first run
        (:func:`storagebench.hoststeps.restore_journal`).
    """

    study: str
    root: Path
    planned: tuple[str, ...]
    completed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)
    stale_stopped: tuple[dict[str, Any], ...] = ()
    not_quiet: dict[str, list[str]] = field(default_factory=dict)
    set_aside: tuple[str, ...] = ()
    builds: tuple[str, ...] = ()
    schedulers_restored: tuple[dict[str, Any], ...] = ()

    @property
    def raw_dir(self) -> Path:
        """``<root>/raw``."""
        return self.root / "raw"

    @property
    def ok(self) -> bool:
        """No run failed."""
        return not self.failed

    def run_dirs(self) -> list[Path]:
        """Directories of all complete runs of the plan (completed or skipped), in run order."""
        done = set(self.completed) | set(self.skipped)
        return [self.raw_dir / r for r in self.planned if r in done]


def run_study(
    study: Study | str | os.PathLike[str],
    *,
    target: str | os.PathLike[str] | None = None,
    targets: Mapping[str, str | os.PathLike[str]] | None = None,
    out_dir: str | os.PathLike[str] = "results",
    fio_bin: str = "fio",
    progress: bool = True,
    allow_devices: Sequence[str] = (),
    timeout_s: float | None = None,
    stop_on_error: bool = False,
    overwrite: bool = False,
    wait_quiet_s: float = 0.0,
    quiet_window_s: float | None = None,
    testbed: Callable[[SetUpUnit], AbstractContextManager[SetUp]] | None = None,
    create_dirs: bool = False,
) -> SweepResult:
    """Run every run of a study's plan that is not complete yet.

    Parameters
    ----------
    study : Study or path
        The spec (or a YAML path, loaded with :func:`storagebench._study.load_study`).
    target : str or path-like, optional
        fio ``filename`` for every run (a file or a block device); default the study's
        ``target``. For client/server studies: the path on the servers.
    targets : mapping, optional
        Target factor level -> path, for testbed studies that create devices at run time
        (``{"raid0": "/dev/loop3"}``).
    out_dir : str or path-like
        Results root; the study goes to ``<out_dir>/<study name>/``.
    fio_bin : str
        fio executable.
    progress : bool
        Show a progress bar with ETA on stderr (tqdm).
    allow_devices : sequence of str
        Devices the user explicitly allows to be written (see :func:`storagebench._safety.check_run`).
    timeout_s : float, optional
        Per-run wall-clock limit, s; default :attr:`Study.timeout_s`.
    stop_on_error : bool
        Stop at the first failed run (after recording it) and raise its :class:`FioError`.
    overwrite : bool
        When ``<out_dir>/<study>`` holds a different spec, move it aside and start afresh.
    wait_quiet_s : float
        Before each run, when the host is not quiet (another fio, or I/O on the target's
        device: :class:`storagebench._hostinfo.QuietProbe`), wait up to this long, s, for it to
        become quiet; 0 only records the check in ``provenance.json`` (``quiet_host``).
    quiet_window_s : float, optional
        Sample window of the device counters before each run, s (the run's preparation is
        inside it); 0 reads them back to back. Default :func:`quiet_window_for`: 1 % of a
        run's runtime + ramp_time, between 0.02 and 0.5 s.
    testbed : callable, optional
        Builds the testbed of one set-up: called with a :class:`storagebench._plan.SetUpUnit`
        (set-up number, block, arm levels, runs), it returns a context manager that builds the
        devices, yields a :class:`SetUp` (targets, devices it may write, what it made) and tears
        them down on exit. Required when the study has ``setups > 1``. Each set-up unit of the
        plan gets a build of its own, recorded in ``testbed.json`` with a build id that each of
        its runs keeps in ``provenance.json`` (``set_up``).
    create_dirs : bool
        Let fio create a target's missing directories; default refused (:class:`UnsafeTargetError`
        naming the directory): a misspelt mount point would otherwise be measured on the root file system.

    Returns
    -------
    SweepResult

    Raises
    ------
    FioNotFoundError
        fio is not installed (checked before anything is written).
    ResultsBusyError
        Another sweep is measuring into ``<out_dir>/<study>`` (it holds the lock); its pid is named.
    NotWritableError
        The results directory is full (ENOSPC, EDQUOT), read-only or not writable, or fio could
        not write the target for one of these reasons (that run is kept under ``failed/``). The
        run in progress is discarded; complete runs are kept. The message is one line naming
        the path and what to do.
    StudyError
        No target, a different spec is stored under the same study name, a ``clients``
        level exceeds the number of hosts (of a host file), or ``setups > 1`` without a
        ``testbed``.
    UnsafeTargetError
        A run would destroy data (nothing of that run is written; the sweep stops), or a
        ``host_steps`` scheduler would change a device it may not
        (:func:`storagebench._safety.check_scheduler_device`).
    HostError
        A ``host_steps`` step cannot be made on this host (``drop_page_cache`` without root; a
        scheduler that cannot be written or put back). Checked before the first run, except on a
        testbed's devices, which exist only once built.
    FioError
        Only with ``stop_on_error``; otherwise failed runs are recorded under
        ``failed/<run_id>/<utc>/`` and listed in the result.
    KeyboardInterrupt
        On Ctrl-C: fio is ended, the run in progress is discarded, completed runs are kept.

    Notes
    -----
    The sweep holds ``<out_dir>/<study>/.sweep.lock`` (:meth:`StudyStore.lock`) from start to
    end. At the start it stops fio processes a killed sweep left running into this study
    (:meth:`StudyStore.stop_stale_runs`; listed in ``SweepResult.stale_stopped``).
    fio runs with the run's staging directory as its working directory, so fio logs with
    relative names (``write_lat_log=lat``, ``write_iops_log=iops`` in ``fixed``) end up in
    ``raw/<run_id>/`` with the rest of the run. A ``target`` factor wins over ``target``.
    Client/server studies (``hosts``) go through
    ``storagebench._clientserver.run_clients(jobfile, hosts, output_path, stderr_path,
    timeout_s, fio_bin)``; their target lives on the servers, so the local safety check is
    not applied to it. A ``clients`` factor runs each point on ``hosts[:clients]``
    (:meth:`Study.hosts_for`), in the same seeded random order as every other factor;
    ``provenance.json`` lists the hosts that ran the point, with the client command and each
    server's fio version (``client_server``).

    The study's ``host_steps`` (:class:`storagebench.hoststeps.HostSteps`) are checked on every
    target before the first run (a testbed's when it is built): a scheduler only on a device the
    safety rules let it change and that offers it, ``drop_page_cache`` only as root. They are applied
    before each concurrency group (each run, when runs are not concurrent), after the previous
    run's files are synced and before the quiet-host window opens; each run's ``provenance.json``
    records what they did (``host_steps``). A changed scheduler is put back after the group, when a
    run fails or the sweep is interrupted too; a sweep killed outright leaves a journal that the
    next sweep of the study reads first (``SweepResult.schedulers_restored``).

    The public entry point keeps its keyword parameters (more than the runner's rule of 6, the one
    exception, named in ``tests/test_architecture.py``); inside, they become one frozen
    :class:`storagebench._runcontext.RunContext` that every step of the sweep takes.

    A study with ``precision:`` is measured in rounds (:func:`storagebench._runrounds.run_rounds`): round r is
    repetition r of every point not finished yet, in a seeded order, and the decisions are made again before
    each round from the runs complete in ``raw/`` (a pure function of their values and the rule), so a killed
    adaptive sweep resumes with the same decisions; ``precision.json`` records them. With ``setups > 1`` (and a
    ``testbed``) the set-up is the unit: round r builds set-up r of every arm with an unfinished point (with
    ``blocks``, one block) and measures those points on it; an interrupted build is redone whole.

    Resume is exact at every level of the design:

    * a run is complete or absent (``raw/<run_id>/`` appears in one rename);
    * a concurrency group (``concurrent``) is measured as a whole: when only some of its runs are
      complete, they are moved aside (``aside/``, with the reason) and the whole group is
      measured again, together;
    * a testbed set-up is measured on one build: when only some runs of a set-up unit are complete,
      its testbed no longer exists (it was torn down when the sweep stopped), so its complete runs
      are moved aside and the set-up is built and measured again as a whole. Runs of two builds
      are never mixed in one set-up, and the set-up stays the experimental unit the analysis
      expects (a set-up that failed a run is redone the same way on the next call).
    """
    if not isinstance(study, Study):
        study = load_study(study)
    if study.setups > 1 and testbed is None:
        raise StudyError(
            f"study {study.name}: setups: {study.setups} builds each arm's testbed afresh {study.setups} times, "
            "so it needs a testbed that can build it (storagebench testbed NAME, or run_study(..., testbed=...)); "
            "a plain sweep on one target has one set-up: remove setups or set it to 1")
    if study.throttle and testbed is None:
        raise StudyError(
            f"study {study.name}: throttle: caps devices a testbed builds (storagebench testbed NAME, or "
            "run_study(..., testbed=...)); a plain sweep makes no device to cap: remove throttle")
    if study.precision is not None and testbed is not None and study.setups == 1:
        raise StudyError(f"study {study.name}: precision with a testbed counts set-ups (the unit is a fresh build), "
                         "so it needs setups > 1 (any number: min_repetitions to max_repetitions set-ups per arm "
                         "replace it); with setups: 1 run it on one target without a testbed")
    fio_exe = find_fio(fio_bin)
    plan = study.expand()
    _check_hosts(study, plan)
    tally = Tally(completed=[])
    ctx = RunContext(study=study, store=StudyStore.for_study(out_dir, study), fio_exe=fio_exe,
                     timeout_s=float(timeout_s) if timeout_s is not None else study.timeout_s,
                     target=target, targets=targets, allow_devices=allow_devices, wait_quiet_s=wait_quiet_s,
                     quiet_window_s=quiet_window_for(study) if quiet_window_s is None else quiet_window_s,
                     stop_on_error=stop_on_error, tally=tally, create_dirs=create_dirs)
    if study.host_steps and testbed is None:  # a step this host cannot make is refused before any run
        host_steps_for(ctx, plan.points, journal=False)
    _check_quiet(ctx)
    if testbed is None and study.hosts is None:  # a testbed's devices exist only once built
        warn_memory_targets(ctx, plan.points)
    store = ctx.store
    try:
        with store.lock():
            return _sweep(ctx, plan, resume(ctx, overwrite), testbed, progress)
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS and not inside(exc.filename, Path(out_dir).absolute()):
            raise
        raise not_writable(exc, store, kept_hint(store, tally.completed)) from None
    except NotWritableError as exc:
        raise NotWritableError(f"{exc}{kept_hint(store, tally.completed)}", path=exc.path, errno=exc.errno) from None


def _check_hosts(study: Study, plan: RunPlan) -> None:
    """The study's hosts in fio's grammar, and a ``clients`` level above their number refused, before anything runs."""
    hosts = hosts_list(study.hosts)
    for point in plan if hosts else ():
        study.hosts_for(point, hosts)


def _check_quiet(ctx: RunContext) -> None:
    """``wait_quiet_s`` and ``quiet_window_s``: finite numbers of seconds >= 0 (:class:`StudyError` naming the option)."""
    for name, value in (("wait_quiet_s", ctx.wait_quiet_s), ("quiet_window_s", ctx.quiet_window_s)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise StudyError(f"{name} (--{name[:-2].replace('_', '-')}) must be a finite number of seconds >= 0, "
                             f"got {value!r}")


def _sweep(ctx: RunContext, plan: RunPlan, resumed: Resumed, testbed: Callable | None,
           show_progress: bool) -> SweepResult:
    """The loop of :func:`run_study`, with the study's lock held: set-up units, then concurrency groups."""
    store, tally = ctx.store, ctx.tally
    tally.done.update(store.completed_run_ids())
    skipped = {p.run_id for p in plan if p.run_id in tally.done}
    bar = Progress(len(plan), len(skipped), ctx.study.run_duration_s, ctx.study.name, show_progress)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-runner")
    ctx = replace(ctx, pool=pool, progress=bar)
    try:
        if ctx.study.precision is not None:  # adaptive: rounds of the unfinished points (_runrounds)
            run_rounds(ctx, plan, None if testbed is None else partial(_measure_unit, testbed=testbed))
        for unit in plan.units() if ctx.study.precision is None else ():
            if unit_is_complete(ctx, unit):
                continue
            if testbed is None:
                for group in unit.groups:
                    run_group(ctx, group)
                continue
            set_aside_unit(ctx, unit)  # the build these runs were measured on was torn down: redo it whole
            _run_unit(ctx, unit, testbed)
    finally:
        pool.shutdown(wait=True)  # pending fsyncs of completed runs
        with contextlib.suppress(OSError):
            store.sync_raw_dir()
        bar.close()
    return SweepResult(study=ctx.study.name, root=store.root, planned=plan.run_ids, completed=tuple(tally.completed),
                       skipped=skipped_runs(plan, skipped, tally.set_aside), failed=tuple(tally.failed),
                       errors=tally.errors, stale_stopped=resumed.stale, not_quiet=tally.not_quiet,
                       set_aside=tuple(tally.set_aside), builds=tuple(tally.builds),
                       schedulers_restored=resumed.restored)


def _measure_unit(ctx: RunContext, unit: SetUpUnit, *,
                  testbed: Callable[[SetUpUnit], AbstractContextManager[SetUp]]) -> None:
    """One set-up unit of an adaptive round: skipped when complete, else built and measured whole (its runs of an
    interrupted build set aside first), as a fixed sweep does it."""
    if unit_is_complete(ctx, unit):
        return
    set_aside_unit(ctx, unit)
    _run_unit(ctx, unit, testbed)


def _run_unit(ctx: RunContext, unit: SetUpUnit, testbed: Callable[[SetUpUnit], AbstractContextManager[SetUp]]) -> None:
    """Build the unit's testbed, record the build, measure the unit's groups on it, tear it down."""
    study = ctx.study
    set_up_at = utc_now()
    with testbed(unit) as built:
        if not isinstance(built, SetUp):
            raise StudyError(f"testbed of study {study.name} must yield a storagebench._runner.SetUp, got "
                             f"{type(built).__name__}")
        if built.caps and not built.cgroup:
            raise StudyError(f"testbed of study {study.name}: caps {dict(built.caps)} without the cgroup that holds them")
        build_id = uuid.uuid4().hex[:12]
        ctx.store.append_setup(TestbedRecord(
            study=study.name, set_up_at=set_up_at, setup=unit.setup, block=unit.block, arm=dict(unit.arm),
            build_id=build_id, targets={str(k): os.fspath(v) for k, v in built.targets.items()},
            devices=tuple(built.devices), notes=tuple(built.notes), run_ids=unit.run_ids,
            phases_s=dict(built.phases_s)))
        ctx.tally.builds.append(build_id)
        on_build = replace(ctx, targets={**(ctx.targets or {}), **built.targets},
                           allow_devices=[*ctx.allow_devices, *built.allow_devices], cgroup=built.cgroup,
                           set_up=SetUpInfo(setup=unit.setup, block=unit.block, arm=dict(unit.arm), build_id=build_id,
                                            caps={d: dict(c) for d, c in built.caps.items()}))
        # the sweep enters the throttle's cgroup once, so the fio processes of a concurrent group are born in it
        # and start together, instead of each migrating on its own, one after another (_throttle.inside)
        with _throttle.inside(built.cgroup) if built.cgroup else contextlib.nullcontext():
            for group in unit.groups:
                run_group(on_build, group)

"""Execute a study's run plan with fio: timeouts, resume, progress, clean interruption.

Per run: render the job file, refuse unsafe targets (:func:`storagebench._safety.check_run`),
run ``fio --output-format=json+ --output=<tmp>/output.json <tmp>/job.fio`` in its own
process group with a wall-clock limit, then store ``job.fio``, ``output.json``,
``stderr.txt``, ``point.json`` and ``provenance.json`` with one atomic rename
(:class:`storagebench._store.StudyStore`). Runs already in ``raw/`` are skipped, so rerunning
the same command resumes a sweep that was interrupted or killed.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from . import _clientserver as clientserver
from . import _safety as safety
from ._hostinfo import QuietProbe, collect_provenance
from ._jobfile import render_jobfile, rendered_options, verify_fio_parse
from ._store import StudyStore
from ._study import RunPoint, SetUpUnit, Study, load_study
from .errors import FioError, HostError, NotWritableError, StudyError
from .fio import process
from .fio.hosts import parse_host, parse_hostfile
from .fio.options import join_filenames, split_filenames
from .fio.process import find_fio, fio_message
from .hoststeps import HostSteps, restore_journal
from .records import Provenance, SetUpInfo, TestbedRecord

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
    """

    targets: Mapping[str, str]
    allow_devices: tuple[str, ...] = ()
    devices: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    phases_s: Mapping[str, float] = field(default_factory=dict)


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


@dataclass(frozen=True)
class FioRun:
    """One finished fio process.

    Attributes
    ----------
    returncode : int
    duration_s : float
        Wall-clock time of the fio process, s.
    """

    returncode: int
    duration_s: float


def run_fio(
    jobfile: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    stderr_path: str | os.PathLike[str],
    *,
    fio_bin: str = "fio",
    timeout_s: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
    record_path: str | os.PathLike[str] | None = None,
) -> FioRun:
    """Run ``fio --output-format=json+ --output=OUTPUT JOBFILE`` with a wall-clock limit.

    fio is started by :func:`storagebench.fio.process.spawn`: in a session of its own, so a
    terminal's Ctrl-C reaches only storagebench, which then ends fio (SIGTERM, SIGKILL to every
    process of the run after 5 s, and a wait until none is left); tied to storagebench by the
    parent-death signal and the watchdog, so that neither fio nor its workers (one process per
    job, each in a session of its own) outlive a storagebench killed outright (SIGKILL, OOM).
    The run's processes are told apart by the job file's path in their command line.

    Parameters
    ----------
    jobfile, output_path, stderr_path : path
        The job file, fio's JSON+ output, fio's stderr (and stdout).
    fio_bin : str
        fio executable.
    timeout_s : float, optional
        Limit, s; the run's processes are killed when it is reached.
    cwd : path, optional
        Working directory (fio's relative log files land there).
    extra_args : sequence of str
        More fio arguments, before the job file.
    record_path : path, optional
        Where to keep the run's process record while fio runs (see
        :func:`storagebench.fio.process.spawn`), so that a later sweep can stop what a killed one
        left running.

    Returns
    -------
    FioRun

    Raises
    ------
    FioNotFoundError
        fio is not installed.
    FioError
        Non-zero exit (message: fio's ``fio: ...``/``err=`` lines), a timeout (``returncode``
        ``None``), output that holds no JSON, a job with ``error`` != 0, a fatal message fio
        prints while exiting 0 (``failed allocating random map`` ...,
        :func:`storagebench.fio.process.fatal_lines`), or 0 completed I/Os in every job.
    KeyboardInterrupt
        After fio was ended.
    """
    exe = find_fio(fio_bin)
    # fio may run in another cwd (the run's staging dir): relative paths would point elsewhere.
    output_path, stderr_path = Path(output_path).absolute(), Path(stderr_path).absolute()
    jobfile = Path(jobfile).absolute()
    cmd = [exe, "--output-format=json+", f"--output={output_path}", *extra_args, os.fspath(jobfile)]
    start = time.monotonic()
    with open(stderr_path, "wb") as err:
        fp = process.spawn(cmd, marker=os.fspath(jobfile), stdout=err, stderr=err, cwd=cwd,
                           record_path=record_path)
        with fp:  # any exception (KeyboardInterrupt, SystemExit): fio and its workers are stopped
            try:
                rc = fp.wait(timeout_s)
            except subprocess.TimeoutExpired:
                fp.stop()
                stderr = stderr_path.read_text(errors="replace")
                raise FioError(
                    f"fio did not finish within {timeout_s:g} s and was killed"
                    + (f" ({fio_message(stderr)})" if stderr.strip() else ""),
                    returncode=None, stderr=stderr,
                ) from None
            duration = time.monotonic() - start
    _check_output(output_path, stderr_path, rc)
    return FioRun(returncode=rc, duration_s=duration)


def _check_output(output_path: Path, stderr_path: Path, rc: int) -> None:
    """fio's exit status, its JSON, each job's ``error``, fatal messages and runs of 0 I/Os."""
    stderr = stderr_path.read_text(errors="replace") if stderr_path.exists() else ""
    output = output_path.read_text(errors="replace") if output_path.exists() else ""
    if rc != 0:
        msg = fio_message(stderr, output) or f"no message (exit status {rc})"
        raise FioError(f"fio exited with status {rc}: {msg}", returncode=rc, stderr=stderr)
    start = output.find("{")
    if start < 0:
        raise FioError(f"fio wrote no JSON output to {output_path} ({fio_message(stderr) or 'no message'})",
                       returncode=rc, stderr=stderr)
    try:
        data = orjson.loads(output[start:])
    except orjson.JSONDecodeError as exc:
        raise FioError(f"fio output {output_path} is not valid JSON: {exc}", returncode=rc, stderr=stderr) from None
    for job in data.get("jobs", []):
        if job.get("error"):
            raise FioError(
                f"fio job {job.get('jobname')!r} ended with error {job['error']} "
                f"({os.strerror(job['error']) if isinstance(job['error'], int) else ''}): "
                f"{fio_message(stderr, output)}",
                returncode=rc, stderr=stderr,
            )
    _check_measured(data, stderr, output[:start], rc)


def _check_measured(doc: Mapping[str, Any], stderr: str, head: str, rc: int | None) -> None:
    """A run that printed a fatal message or completed 0 I/Os measured nothing: :class:`FioError`."""
    fatal = process.fatal_lines(stderr, head)
    idle = process.zero_io_jobs(doc)
    if not fatal and idle is None:
        return
    why = []
    if idle is not None:
        why.append(f"fio completed 0 I/Os in every job ({', '.join(idle)})")
    if fatal:
        why.append("fio reported: " + "; ".join(fatal[:4]))
    raise FioError("run measured nothing: " + "; ".join(why), returncode=rc, stderr=stderr)


# ---------------------------------------------------------------------------------------------
# a sweep


def _resolve_target(point: RunPoint, study: Study, target: str | None, targets: Mapping[str, Any] | None) -> str:
    level = point.factors.get("target")
    if level is not None:
        if targets and str(level) in targets:
            return os.fspath(targets[str(level)])
        if targets:
            raise StudyError(
                f"target level {level!r} is not in targets; must be one of {sorted(targets)}, got {level!r}"
            )
        return str(level)
    if target is not None:
        return os.fspath(target)
    if study.target is not None:
        return study.target
    raise StudyError(f"study {study.name}: no target; pass target= (--target PATH) or set 'target' in the study")


def _absolute_targets(target: str) -> str:
    """Each ``:``-separated fio filename made absolute against storagebench's working directory."""
    parts = [os.path.abspath(p) for p in split_filenames(target)]
    return join_filenames(parts)


def _check_safety(point: RunPoint, study: Study, store: StudyStore, tgt: str, hosts: list[str] | None,
                  allow_devices: Sequence[str]) -> dict[str, Any]:
    """:mod:`storagebench._safety` on what this run's fio will touch; the record goes to provenance."""
    common = {"allow": sorted(study.allowed), "allow_devices": list(allow_devices)}
    if hosts:
        rec = safety.check_point_hosts(tgt, point.options, hosts, allow_devices=allow_devices, allow=study.allowed,
                                       allow_remote=study.allow_remote, forbidden_roots=[store.root])
    else:
        rec = safety.check_run(tgt, point.options, allow_devices=allow_devices, allow=study.allowed,
                               cwd=os.getcwd(), own_files=_own_files(store), forbidden_roots=[store.root])
    return {**common, **rec}


def _own_files(store: StudyStore) -> set[tuple[int, int, int]]:
    """Regular files this study's runs created (fio laid them out): ``(major, minor, inode)``
    (:meth:`StudyStore.own_files`: the list is read through the root-action gate and checked against the files)."""
    return store.own_files()


def _existing_files(target: str) -> set[str]:
    return {p for p in split_filenames(target) if os.path.lexists(p)}


def _note_created(store: StudyStore, target: str, existed: set[str]) -> None:
    """Remember files fio created for this study, so a later run may grow them (see safety's size rule)."""
    store.note_created(p for p in split_filenames(target) if p not in existed)


_FIO_PARSED: set[str] = set()


def _verify_with_fio(job_path: Path, point: RunPoint, tgt: str, fio_exe: str) -> None:
    """fio's own reading of the job file must be what was checked; once per distinct option set (0.15 s)."""
    expected = rendered_options(point, tgt)
    key = orjson.dumps(expected, option=orjson.OPT_SORT_KEYS).decode()
    if key in _FIO_PARSED:
        return
    verify_fio_parse(job_path, expected, fio_exe)
    _FIO_PARSED.add(key)


#: Schedulers a sweep changed and has not put back yet (:class:`storagebench.hoststeps.HostSteps`).
_HOST_STEPS_JOURNAL = "host_steps_journal.json"


def _host_steps(study: Study, points: Sequence[RunPoint], store: StudyStore | None, *, target, targets,
                allow_devices: Sequence[str]) -> AbstractContextManager[tuple[dict[str, Any], ...]]:
    """The study's ``host_steps`` on the targets of ``points`` (checked now), to apply with ``with``;
    ``store``: where the journal of changed schedulers goes (``None``: only check)."""
    if not study.host_steps:
        return contextlib.nullcontext(())
    paths: list[str] = []
    for point in points:
        tgt = _resolve_target(point, study, None if target is None else os.fspath(target), targets)
        paths.extend(p for p in split_filenames(_absolute_targets(tgt)) if p not in paths)
    return HostSteps(study.host_steps, paths, allow_devices=allow_devices, allow=study.allowed,
                     journal=None if store is None else store.root / _HOST_STEPS_JOURNAL)


def _hosts_list(hosts: list[str] | str | None) -> list[str] | None:
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


def _fmt_eta(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class _Progress:
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
    fio_exe = find_fio(fio_bin)
    plan = study.expand()
    hosts = _hosts_list(study.hosts)
    for point in plan if hosts else ():
        study.hosts_for(point, hosts)  # a clients level above len(hosts) is refused before anything runs
    if study.host_steps and testbed is None:  # a step this host cannot make is refused before any run
        _host_steps(study, plan.points, None, target=target, targets=targets, allow_devices=allow_devices)
    if quiet_window_s is None:
        quiet_window_s = quiet_window_for(study)
    for name, value in (("wait_quiet_s", wait_quiet_s), ("quiet_window_s", quiet_window_s)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise StudyError(f"{name} (--{name[:-2].replace('_', '-')}) must be a finite number of seconds >= 0, "
                             f"got {value!r}")
    store = StudyStore.for_study(out_dir, study)
    completed: list[str] = []
    try:
        with store.lock():
            store.ensure_spec(study, overwrite=overwrite)
            stale = store.stop_stale_runs(fio_bin=fio_exe)
            store.cleanup_stale(fio_bin=fio_exe)
            restored = tuple(restore_journal(store.root / _HOST_STEPS_JOURNAL))  # a killed sweep's schedulers
            return _sweep(study, plan, store, stale, completed, restored, target=target, targets=targets,
                          fio_exe=fio_exe,
                          allow_devices=allow_devices, timeout_s=timeout_s, stop_on_error=stop_on_error,
                          progress=progress, wait_quiet_s=wait_quiet_s, quiet_window_s=quiet_window_s,
                          testbed=testbed)
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS and not _inside(exc.filename, Path(out_dir).absolute()):
            raise
        raise _not_writable(exc, store, _kept(store, completed)) from None
    except NotWritableError as exc:
        raise NotWritableError(f"{exc}{_kept(store, completed)}", path=exc.path, errno=exc.errno) from None


def quiet_window_for(study: Study) -> float:
    """The default quiet-host sample window of ``study``'s runs, s.

    1 % of a run's nominal duration (runtime + ramp_time), at least 0.02 s and at most 0.5 s: the
    window is time the sweep waits before each run (beyond the run's own preparation), so it
    costs at most 1 % of the sweep, and a longer run, which more I/O of others would disturb,
    gets a longer look. A device is busy above 50 IOPS (:data:`storagebench._hostinfo.QUIET_MAX_IOPS`):
    a 0.02 s window sees that as 2 I/Os or more.
    """
    return min(0.5, max(0.02, 0.01 * study.run_duration_s))


@dataclass
class _Tally:
    """What a sweep did so far (filled by :func:`_run_group`)."""

    completed: list[str]
    failed: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    not_quiet: dict[str, list[str]] = field(default_factory=dict)
    set_aside: list[str] = field(default_factory=list)
    builds: list[str] = field(default_factory=list)


def _sweep(study: Study, plan, store: StudyStore, stale: list[dict[str, Any]], completed: list[str],
           restored: tuple[dict[str, Any], ...], *,
           target, targets, fio_exe: str, allow_devices: Sequence[str], timeout_s: float | None,
           stop_on_error: bool, progress: bool, wait_quiet_s: float, quiet_window_s: float,
           testbed=None) -> SweepResult:
    """The loop of :func:`run_study`, with the study's lock held: set-up units, then concurrency groups."""
    done = store.completed_run_ids()
    limit = float(timeout_s) if timeout_s is not None else study.timeout_s
    tally = _Tally(completed)
    skipped = {p.run_id for p in plan if p.run_id in done}
    bar = _Progress(len(plan), len(skipped), study.run_duration_s, study.name, progress)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-runner")
    common = dict(study=study, store=store, target=target, fio_exe=fio_exe, timeout_s=limit, pool=pool,
                  wait_quiet_s=wait_quiet_s, quiet_window_s=quiet_window_s, stop_on_error=stop_on_error,
                  bar=bar, tally=tally)
    try:
        for unit in plan.units():
            have = [r for r in unit.run_ids if r in done]
            if len(have) == len(unit.points):
                continue
            if testbed is None:
                for group in unit.groups:
                    _run_group(group, done, targets=targets, allow_devices=allow_devices, set_up=None, **common)
                continue
            if have:  # the build these runs were measured on was torn down: redo the set-up as a whole
                store.set_aside(have, f"{unit.describe()} was interrupted after {len(have)} of its "
                                f"{len(unit.points)} runs; its testbed no longer exists, so the set-up is built "
                                "and measured again as a whole (runs of two builds are never mixed in one set-up)",
                                setup=unit.setup, block=unit.block, arm=unit.arm)
                tally.set_aside.extend(have)
                done.difference_update(have)
                bar.remaining += len(have)
            _run_unit(unit, done, testbed, targets=targets, allow_devices=allow_devices, **common)
    finally:
        pool.shutdown(wait=True)  # pending fsyncs of completed runs
        with contextlib.suppress(OSError):
            store.sync_raw_dir()
        bar.close()
    return SweepResult(study=study.name, root=store.root, planned=plan.run_ids, completed=tuple(tally.completed),
                       skipped=tuple(r for r in plan.run_ids if r in skipped and r not in tally.set_aside),
                       failed=tuple(tally.failed),
                       errors=tally.errors, stale_stopped=tuple(stale), not_quiet=tally.not_quiet,
                       set_aside=tuple(tally.set_aside), builds=tuple(tally.builds), schedulers_restored=restored)


def _run_unit(unit: SetUpUnit, done: set[str], testbed, *, targets, allow_devices, study: Study,
              store: StudyStore, tally: _Tally, **common) -> None:
    """Build the unit's testbed, record the build, measure the unit's groups on it, tear it down."""
    set_up_at = _utc_now()
    with testbed(unit) as built:
        if not isinstance(built, SetUp):
            raise StudyError(f"testbed of study {study.name} must yield a storagebench._runner.SetUp, got "
                             f"{type(built).__name__}")
        build_id = uuid.uuid4().hex[:12]
        store.append_setup(TestbedRecord(
            study=study.name, set_up_at=set_up_at, setup=unit.setup, block=unit.block, arm=dict(unit.arm),
            build_id=build_id, targets={str(k): os.fspath(v) for k, v in built.targets.items()},
            devices=tuple(built.devices), notes=tuple(built.notes), run_ids=unit.run_ids,
            phases_s=dict(built.phases_s)))
        tally.builds.append(build_id)
        set_up = SetUpInfo(setup=unit.setup, block=unit.block, arm=dict(unit.arm), build_id=build_id)
        for group in unit.groups:
            _run_group(group, done, targets={**(targets or {}), **built.targets},
                       allow_devices=[*allow_devices, *built.allow_devices], set_up=set_up, study=study,
                       store=store, tally=tally, **common)


def _run_group(group, done: set[str], *, study: Study, store: StudyStore, target, targets, fio_exe: str,
               allow_devices: Sequence[str], timeout_s: float, pool: ThreadPoolExecutor, wait_quiet_s: float,
               quiet_window_s: float, stop_on_error: bool, bar: _Progress, tally: _Tally,
               set_up: SetUpInfo | None) -> None:
    """Measure the runs of one concurrency group that are not complete: one alone, several together."""
    todo = [p for p in group if p.run_id not in done]
    if not todo:
        return
    if len(group) > 1 and len(todo) < len(group):  # half a group: measured again as a whole
        have = [p.run_id for p in group if p.run_id in done]
        store.set_aside(have, f"concurrency group of {len(group)} runs was measured only in part ({len(have)} "
                        f"complete); its runs ran at the same time by design, so the group is measured again as "
                        f"a whole", run_ids_of_group=[p.run_id for p in group])
        tally.set_aside.extend(have)
        done.difference_update(have)
        bar.remaining += len(have)
        todo = list(group)
    # the study's host steps once before the group (its runs start together), undone after it;
    # after the previous run's fsyncs, so that a dropped cache is not refilled by them
    if study.host_steps:
        pool.submit(_noop).result()
    with _host_steps(study, todo, store, target=target, targets=targets, allow_devices=allow_devices) as steps:
        kw = dict(target=target, targets=targets, fio_exe=fio_exe, allow_devices=allow_devices, timeout_s=timeout_s,
                  quiet_window_s=quiet_window_s, set_up=set_up, host_steps=steps)
        _measure_group(todo, study, store, tally, bar, stop_on_error, pool, wait_quiet_s, kw)


def _measure_group(todo: list[RunPoint], study: Study, store: StudyStore, tally: _Tally, bar: _Progress,
                   stop_on_error: bool, pool: ThreadPoolExecutor, wait_quiet_s: float, kw: dict[str, Any]) -> None:
    if len(todo) == 1:
        _one(todo[0], study, store, tally, bar, stop_on_error,
             lambda p, report: run_point(p, study, store, pool=pool, wait_quiet_s=wait_quiet_s, report=report, **kw))
        return
    # several runs at once: one thread and one helper each; no waiting for a quiet host (the others are us)
    helper = ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="storagebench-group-helper")
    with helper, ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="storagebench-group") as threads:
        futures = [threads.submit(_one, p, study, store, tally, bar, stop_on_error,
                                  lambda p, report: run_point(p, study, store, pool=helper, wait_quiet_s=0.0,
                                                              report=report, **kw))
                   for p in todo]
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


_TALLY_LOCK = threading.Lock()


def _one(point: RunPoint, study: Study, store: StudyStore, tally: _Tally, bar: _Progress, stop_on_error: bool,
         measure) -> None:
    """Measure one run with ``measure(point, report)`` and account for it in ``tally`` (thread-safe)."""
    report: dict[str, Any] = {}
    try:
        duration = measure(point, report)
    except (FioError, HostError) as exc:
        with _TALLY_LOCK:
            tally.failed.append(point.run_id)
            tally.errors[point.run_id] = getattr(exc, "message", str(exc))
            bar.step(None, failed=len(tally.failed))
        if stop_on_error:
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


#: errno values that mean "this path cannot be written": full, over quota, read-only, not permitted.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def _errno_hint(err: int | None, where: str, what: str) -> str:
    """What to do about ``err`` on ``where`` (the results directory or the target)."""
    if err in (errno.ENOSPC, errno.EDQUOT):
        return f"free space on the filesystem holding {where} (df -h {where}) or choose another {what}"
    if err == errno.EROFS:
        return f"the filesystem holding {where} is read-only: remount it read-write or choose another {what}"
    if err in (errno.EACCES, errno.EPERM):
        return f"make {where} writable for uid {os.geteuid()} or choose another {what}"
    return f"choose another {what}"


def _inside(path: Any, root: Path) -> bool:
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = Path(os.fspath(path)).absolute()
    return p == root or root in p.parents


def _not_writable(exc: OSError, store: StudyStore, suffix: str = "") -> NotWritableError:
    """A results-directory :class:`OSError` (ENOSPC, EROFS, EACCES, ENOTDIR ...) as a one-line message."""
    path = os.fspath(exc.filename) if isinstance(exc.filename, (str, os.PathLike)) else str(store.root)
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return NotWritableError(
        f"cannot write the results: {path}: {exc.strerror or os.strerror(exc.errno or 0)} ({name}); "
        f"{_errno_hint(exc.errno, _where(path, store), '--out')}{suffix}", path=path, errno=exc.errno)


def _where(path: str, store: StudyStore) -> str:
    """The directory to act on: the study's directory for a path inside it (a staging directory is
    gone by the time the message is read), and the nearest existing directory above one that
    could not be created."""
    p = store.root if _inside(path, store.root) else Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    while p != p.parent and not p.is_dir():
        p = p.parent
    return str(p)


def _kept(store: StudyStore, completed: Sequence[str]) -> str:
    try:
        n = len(store.completed_run_ids())
    except OSError:
        return ""
    if not n:
        return ""
    return (f"; the run in progress was discarded, the {n} complete run(s) in {store.raw_dir} are kept"
            f" ({len(completed)} measured by this call): rerun the same command to resume")


def _results_full(store: StudyStore) -> bool:
    """The results filesystem has (almost) no space left: fio's output was cut there."""
    try:
        st = os.statvfs(store.root)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _MIN_FREE_BYTES


#: Below this many free bytes on the results filesystem, a fio output that is missing or cut
#: short is put down to the full disk (fio exits 0 when it cannot write its --output).
_MIN_FREE_BYTES = 256 * 1024

_FIO_ERR_RE = re.compile(r"\berr(?:or)?\s*=\s*(\d+)")


def _fio_errno(exc: FioError) -> int | None:
    """The errno of a failed fio run: the first ``err=N`` of its message or stderr."""
    for text in (exc.message, exc.stderr):
        m = _FIO_ERR_RE.search(text or "")
        if m:
            return int(m.group(1))
    return None


def run_point(
    point: RunPoint,
    study: Study,
    store: StudyStore,
    *,
    target: str | os.PathLike[str] | None,
    targets: Mapping[str, Any] | None,
    fio_exe: str,
    allow_devices: Sequence[str],
    timeout_s: float,
    pool: ThreadPoolExecutor | None = None,
    wait_quiet_s: float = 0.0,
    quiet_window_s: float | None = None,
    report: dict[str, Any] | None = None,
    set_up: SetUpInfo | Mapping[str, Any] | None = None,
    host_steps: Sequence[Mapping[str, Any]] | None = None,
) -> float:
    """Measure one point of a plan and store it (the step :func:`run_study` repeats).

    Checks the target (:func:`storagebench._safety.check_run`), renders ``job.fio``, checks
    that the host is quiet (:class:`storagebench._hostinfo.QuietProbe`), runs fio (or
    ``clientserver.run_clients`` when the study has ``hosts``) and commits ``raw/<run_id>/``
    atomically. Safe to call from several threads at once for different points (concurrent
    workloads); callers other than :func:`run_study` should hold :meth:`StudyStore.lock`.

    Parameters
    ----------
    point : RunPoint
    study : Study
    store : StudyStore
        Its spec must already be stored (:meth:`StudyStore.ensure_spec`).
    target, targets
        As in :func:`run_study`.
    fio_exe : str
        fio executable (:func:`storagebench.fio.process.find_fio`).
    allow_devices : sequence of str
    timeout_s : float
        Wall-clock limit of the fio process, s.
    pool : ThreadPoolExecutor, optional
        Helper thread for provenance and fsyncs while fio runs; default a private one.
    wait_quiet_s, quiet_window_s : float
        As in :func:`run_study`, s.
    report : dict, optional
        Receives ``quiet_host``: the quiet-host record of this run (also in ``provenance.json``).
    set_up : SetUpInfo or mapping, optional
        The testbed build the run is measured on (``setup``, ``block``, ``arm``, ``build_id``),
        kept in ``provenance.json`` as ``set_up``.
    host_steps : sequence of dict, optional
        Records of the study's ``host_steps`` the caller applied for this run
        (:class:`storagebench.hoststeps.HostSteps`; :func:`run_study` applies them once around each
        concurrency group), kept in ``provenance.json``. ``None``: the study's ``host_steps``, if
        any, are applied here around this one run (and a changed scheduler put back after it).

    Returns
    -------
    float
        Wall time of the fio process, s.

    Raises
    ------
    FioError, HostError
        After the attempt was kept under ``failed/<run_id>/<utc>/``. A run that completed 0
        I/Os in every job, or after which fio printed a fatal message (``failed allocating``
        ...), is such a failure.
    NotWritableError
        The results directory cannot be written (nothing of the run is kept), or fio could not
        write a local target (the attempt is kept under ``failed/``).
    UnsafeTargetError
        Before anything is written; also a ``host_steps`` scheduler on a device it may not change.
    """
    if pool is None or host_steps is None:
        with contextlib.ExitStack() as stack:
            if pool is None:
                pool = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-point"))
            if host_steps is None:
                host_steps = stack.enter_context(_host_steps(study, [point], store, target=target, targets=targets,
                                                             allow_devices=allow_devices))
            return run_point(point, study, store, target=target, targets=targets, fio_exe=fio_exe,
                             allow_devices=allow_devices, timeout_s=timeout_s, pool=pool,
                             wait_quiet_s=wait_quiet_s, quiet_window_s=quiet_window_s, report=report,
                             set_up=set_up, host_steps=host_steps)
    if quiet_window_s is None:
        quiet_window_s = quiet_window_for(study)
    hosts = study.hosts_for(point, _hosts_list(study.hosts))  # hosts[:clients] with a clients factor
    tgt = _resolve_target(point, study, None if target is None else os.fspath(target), targets)
    if not hosts:
        pool.submit(_noop).result()  # the previous run's fsyncs must not count as another's I/O
    probe = None if hosts else QuietProbe(tgt)  # the window starts here: the preparation is inside it
    checked = _check_safety(point, study, store, tgt, hosts, allow_devices)  # relative paths: in our cwd
    if not hosts:
        tgt = _absolute_targets(tgt)  # fio runs in the staging dir: a relative path would mean another file
    existed = hosts or _existing_files(tgt)
    try:
        staging = store.staging_dir(point.run_id)
    except OSError as exc:
        if exc.errno in _WRITE_ERRNOS:
            raise _not_writable(exc, store) from None
        raise
    try:
        try:
            duration = _measure(point, study, store, staging, tgt, hosts, checked, existed, fio_exe, timeout_s,
                                pool, probe, wait_quiet_s, quiet_window_s, report, set_up, host_steps)
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS:
                raise _not_writable(exc, store) from None
            raise
        return duration
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # an interrupted or failed run leaves nothing in raw/
        raise


def _noop() -> None:
    return None


def _quiet_record(probe: QuietProbe | None, tgt: str, window_s: float, wait_s: float) -> dict[str, Any]:
    """The ``quiet_host`` record; waits up to ``wait_s`` for a quiet host."""
    if probe is None:
        return {"quiet": None, "note": "client/server run: the target and its device are on the servers"}
    rec = probe.finish(window_s)
    t0 = time.monotonic()
    while not rec["quiet"] and time.monotonic() - t0 < wait_s:
        time.sleep(min(1.0, max(0.0, wait_s - (time.monotonic() - t0))))
        rec = QuietProbe(tgt).finish(max(window_s, 0.25))
    rec["waited_s"] = round(time.monotonic() - t0, 3) if wait_s > 0 else 0.0
    rec["own_fio_runs"] = len(process.live_markers())  # this process's other runs (concurrent workloads)
    return rec


def _measure(point: RunPoint, study: Study, store: StudyStore, staging: Path, tgt: str, hosts, checked, existed,
             fio_exe: str, timeout_s: float, pool: ThreadPoolExecutor, probe: QuietProbe | None,
             wait_quiet_s: float, quiet_window_s: float, report: dict[str, Any] | None,
             set_up: SetUpInfo | Mapping[str, Any] | None, host_steps: Sequence[Mapping[str, Any]]) -> float:
    job_text = render_jobfile(point, study, tgt)
    job_path = staging / "job.fio"
    job_path.write_text(job_text)
    _verify_with_fio(job_path, point, tgt, fio_exe)
    (staging / "point.json").write_bytes(
        orjson.dumps(point.to_dict(study.name), option=orjson.OPT_INDENT_2)
    )
    quiet = _quiet_record(probe, tgt, quiet_window_s, wait_quiet_s)
    if report is not None:
        report["quiet_host"] = quiet
    started = datetime.now(timezone.utc)

    def _before() -> Provenance:
        # off the critical path, while fio starts: what is known before the run (sysfs, mountinfo)
        # and the fsync of the files written so far
        known = collect_provenance(None if hosts else tgt, spec_hash=study.spec_hash, fio_bin=fio_exe,
                                   started_at=started)
        store.sync_files([job_path, staging / "point.json"])
        return known

    pending = pool.submit(_before)
    output, stderr = staging / "output.json", staging / "stderr.txt"
    t0 = time.monotonic()
    client = None
    try:
        try:
            if hosts:
                res = clientserver.run_clients(job_path, hosts, output, stderr, timeout_s, fio_exe,
                                               record_path=staging / process.RECORD_NAME)
                client = res.provenance()  # the servers' fio versions and the client command
                doc, head = clientserver.read_client_output(output)
                _check_measured(doc or {}, stderr.read_text(errors="replace"), head, res.returncode)
            else:
                run_fio(job_path, output, stderr, fio_bin=fio_exe, timeout_s=timeout_s, cwd=staging,
                        record_path=staging / process.RECORD_NAME)
        finally:
            duration = time.monotonic() - t0
            known = pending.result()
            # the run's one record: what was known before it, and what only its end tells
            prov = known.replace(
                finished_at=_utc_now(), duration_s=round(duration, 6), safety=checked, quiet_host=quiet,
                set_up=_set_up_info(set_up), host_steps=tuple(host_steps),
                **({"hosts": tuple(hosts), "target": tgt, "client_server": client} if hosts else {}))
            (staging / "provenance.json").write_bytes(orjson.dumps(prov.to_json(), option=orjson.OPT_INDENT_2))
    except (FioError, HostError) as exc:
        if isinstance(exc, FioError) and _results_full(store):
            # fio exits 0 when it cannot write its --output: a cut or missing output on a full disk
            raise NotWritableError(
                f"cannot write the results: {output}: {os.strerror(errno.ENOSPC)} (ENOSPC: fio's output is missing "
                f"or cut short); {_errno_hint(errno.ENOSPC, str(store.root), '--out')}", path=str(output),
                errno=errno.ENOSPC) from None
        store.record_failure(point.run_id, error=exc, staging=staging)
        err = _fio_errno(exc) if isinstance(exc, FioError) and not hosts else None
        if err in _WRITE_ERRNOS:
            raise NotWritableError(
                f"fio cannot write the target {tgt}: {os.strerror(err)} ({errno.errorcode.get(err, err)}); "
                f"{_errno_hint(err, tgt, '--target')}; the attempt is kept in {store.failed_dir / point.run_id}",
                path=tgt, errno=err) from exc
        raise
    if not hosts:
        _note_created(store, tgt, existed)
    store.commit_run(point.run_id, staging, synced=[job_path, staging / "point.json"], sync_parent=False)
    pool.submit(store.sync_raw_dir)  # makes the rename durable while the next run starts
    return duration


_run_point = run_point  # the name other modules used before it was public


def _set_up_info(set_up: SetUpInfo | Mapping[str, Any] | None) -> SetUpInfo | None:
    if set_up is None or isinstance(set_up, SetUpInfo):
        return set_up
    return SetUpInfo.from_json(set_up)


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")

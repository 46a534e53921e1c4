"""Measure one run: check its target, render its job file, look for a quiet host, run fio (or fio's
client/server mode), assemble its provenance, and commit ``raw/<run_id>/`` in one rename.

Each step has one function here; what the steps share comes in as one frozen
:class:`storagebench._runcontext.RunContext` and, for the run itself, one frozen :class:`_Run`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from . import _clientserver as clientserver
from . import _safety as safety
from ._hostinfo import QuietProbe, add_other_fio, collect_provenance, run_io_record
from ._jobfile import render_jobfile, rendered_options, verify_fio_parse
from ._runcontext import (
    RunContext,
    absolute_targets,
    host_steps_for,
    hosts_list,
    quiet_window_for,
    resolve_target,
    utc_now,
    wait_for_helper,
)
from ._runfio import FioRun, check_measured, run_fio
from ._runwatch import IoSampler, ramp_io_record
from ._runwrite import WRITE_ERRNOS, not_writable, output_cut_short, results_full, target_not_writable
from ._specvalues import steadystate_request
from ._store import StudyStore
from ._study import RunPoint, Study
from .errors import FioError, HostError
from .fio import process
from .fio.options import parse_time_us, split_filenames
from .records import Provenance, SetUpInfo


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
    """Measure one point of a plan and store it (the step :func:`storagebench._runner.run_study` repeats).

    Checks the target (:func:`storagebench._safety.check_run`), renders ``job.fio``, checks
    that the host is quiet (:class:`storagebench._hostinfo.QuietProbe`), runs fio (or
    ``clientserver.run_clients`` when the study has ``hosts``) and commits ``raw/<run_id>/``
    atomically. Safe to call from several threads at once for different points (concurrent
    workloads); callers other than :func:`run_study` should hold :meth:`StudyStore.lock`.
    A public entry point, so it keeps its keywords; inside, they become one :class:`RunContext`
    (:func:`measure_point`).

    Parameters
    ----------
    point : RunPoint
    study : Study
    store : StudyStore
        Its spec must already be stored (:meth:`StudyStore.ensure_spec`).
    target, targets
        As in :func:`storagebench._runner.run_study`.
    fio_exe : str
        fio executable (:func:`storagebench.fio.process.find_fio`).
    allow_devices : sequence of str
    timeout_s : float
        Wall-clock limit of the fio process, s.
    pool : ThreadPoolExecutor, optional
        Helper thread for provenance and fsyncs while fio runs; default a private one.
    wait_quiet_s, quiet_window_s : float
        As in :func:`storagebench._runner.run_study`, s.
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
    ctx = RunContext(study=study, store=store, fio_exe=fio_exe, timeout_s=timeout_s, target=target, targets=targets,
                     allow_devices=allow_devices, wait_quiet_s=wait_quiet_s,
                     quiet_window_s=quiet_window_for(study) if quiet_window_s is None else quiet_window_s,
                     set_up=set_up, pool=pool)
    with contextlib.ExitStack() as stack:
        if pool is None:
            ctx = replace(ctx, pool=stack.enter_context(
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-point")))
        if host_steps is None:
            host_steps = stack.enter_context(host_steps_for(ctx, [point]))
        return measure_point(ctx, point, host_steps, report)


@dataclass(frozen=True)
class _Run:
    """One run being measured: what :func:`measure_point` found out before fio starts."""

    point: RunPoint
    target: str  # absolute paths for a local run; the servers' path for a client/server run
    hosts: list[str] | None  # the hosts of a client/server run (``hosts[:clients]``), else None or []
    safety: dict[str, Any]  # the safety check's record
    existed: Any  # the target's files that existed before the run (local), else the hosts
    staging: Path
    probe: QuietProbe | None  # the quiet-host probe, opened before the run's preparation
    host_steps: tuple[Mapping[str, Any], ...]
    report: dict[str, Any] | None


def measure_point(ctx: RunContext, point: RunPoint, host_steps: Sequence[Mapping[str, Any]],
                  report: dict[str, Any] | None = None) -> float:
    """Measure ``point`` with the helper thread ``ctx.pool`` and the applied ``host_steps`` records, and
    commit it (:func:`run_point`, whose returns and raises these are); ``report`` receives ``quiet_host``."""
    study, store = ctx.study, ctx.store
    hosts = study.hosts_for(point, hosts_list(study.hosts))  # hosts[:clients] with a clients factor
    tgt = resolve_target(ctx, point)
    if not hosts:
        wait_for_helper(ctx.pool)  # the previous run's fsyncs must not count as another's I/O
    probe = None if hosts else _open_probe(ctx, tgt)  # the preparation is inside the window
    checked = _check_safety(ctx, point, tgt, hosts)  # relative paths: in our cwd
    if not hosts:
        tgt = absolute_targets(tgt)  # fio runs in the staging dir: a relative path would mean another file
    existed = hosts or _existing_files(tgt)
    try:
        staging = store.staging_dir(point.run_id)
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS:
            raise not_writable(exc, store) from None
        raise
    run = _Run(point=point, target=tgt, hosts=hosts, safety=checked, existed=existed, staging=staging, probe=probe,
               host_steps=tuple(host_steps), report=report)
    try:
        try:
            return _measure(ctx, run)
        except OSError as exc:
            if exc.errno in WRITE_ERRNOS:
                raise not_writable(exc, store) from None
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # an interrupted or failed run leaves nothing in raw/
        raise


#: The quiet-host probe the previous run of this thread opened when its fio exited (paused over its commit),
#: with the helper pool of its sweep: ``(pool, probe)``. Thread-local: the runs of a concurrency group run
#: in threads of their own and never hand a window on.
_CARRIED = threading.local()
#: A probe paused longer than this (a concurrency group, host steps or a slow disk in between) is not handed
#: on: the next run's window starts afresh rather than join observations far apart.
_CARRY_PAUSE_S = 5.0


def _open_probe(ctx: RunContext, tgt: str) -> QuietProbe:
    """The quiet-host probe of a run: the one the previous run of the same sweep and thread opened at its fio's
    exit when it samples the same device and was paused for less than :data:`_CARRY_PAUSE_S` (its window then
    covers the time since, storagebench's own fsyncs left out), else a new one (the window starts now)."""
    carried, _CARRIED.probe = getattr(_CARRIED, "probe", None), None
    if (carried is not None and carried[0] is ctx.pool and carried[1].paused_for() < _CARRY_PAUSE_S
            and carried[1].same_device(tgt)):
        carried[1].resume()
        return carried[1]
    return QuietProbe(tgt)


def _check_safety(ctx: RunContext, point: RunPoint, tgt: str, hosts: list[str] | None) -> dict[str, Any]:
    """:mod:`storagebench._safety` on what this run's fio will touch; the record goes to provenance."""
    study, store, allow_devices = ctx.study, ctx.store, ctx.allow_devices
    common = {"allow": sorted(study.allowed), "allow_devices": list(allow_devices)}
    if hosts:
        rec = safety.check_point_hosts(tgt, point.options, hosts, allow_devices=allow_devices, allow=study.allowed,
                                       allow_remote=study.allow_remote, forbidden_roots=[store.root])
    else:
        # own_files: regular files this study's runs created (fio laid them out), read through the
        # root-action gate and checked against the files (StudyStore.own_files)
        rec = safety.check_run(tgt, point.options, allow_devices=allow_devices, allow=study.allowed,
                               cwd=os.getcwd(), own_files=store.own_files(), forbidden_roots=[store.root],
                               create_dirs=ctx.create_dirs)
    return {**common, **rec}


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


def _quiet_record(probe: QuietProbe | None, tgt: str, window_s: float,
                  wait_s: float) -> tuple[dict[str, Any], dict[str, float] | None]:
    """The ``quiet_host`` record, and the device reading its window ended with (the start of the run's own
    watch, :class:`_Watch`); waits up to ``wait_s`` for a quiet host. When nothing is waited for (``wait_s`` 0)
    and the window has no time left, the scan for other fio processes is left to the helper thread as fio
    starts (:meth:`QuietProbe.finish` ``defer_scan``)."""
    if probe is None:
        return {"quiet": None, "note": "client/server run: the target and its device are on the servers"}, None
    rec = probe.finish(window_s, defer_scan=wait_s <= 0)
    t0 = time.monotonic()
    while not rec["quiet"] and time.monotonic() - t0 < wait_s:
        time.sleep(min(1.0, max(0.0, wait_s - (time.monotonic() - t0))))
        probe = QuietProbe(tgt)
        rec = probe.finish(max(window_s, 0.25))
    rec["waited_s"] = round(time.monotonic() - t0, 3) if wait_s > 0 else 0.0
    rec["own_fio_runs"] = len(process.live_markers())  # this process's other runs (concurrent workloads)
    return rec, probe.last


#: ioengines whose I/O on a local file or block device reaches the device as fio counts it (with direct=1).
_BLOCK_ENGINES = frozenset({"psync", "sync", "pvsync", "pvsync2", "vsync", "libaio", "io_uring", "posixaio"})
#: Options with which fio does I/O it does not count in ``total_ios`` (verify, pre_read) or touches other
#: files (nrfiles ...), each with the values that leave it off.
_UNCOUNTED_IO = {"verify": ("0", "null"), "pre_read": ("0",), "nrfiles": ("1",), "unlink": ("0",),
                 "unlink_each_loop": ("0",), "directory": (), "filename_format": (), "opendir": ()}
#: Local fio runs of this process: how many run now, and how many have started; a run's own I/O can be told
#: apart from others' only when no other run of ours (a concurrency group) overlapped it.
_LOCAL_RUNS = {"active": 0, "started": 0}
_LOCAL_RUNS_LOCK = threading.Lock()


def _attribution_problem(point: RunPoint, tgt: str, probe: QuietProbe | None) -> str | None:
    """Why the device's I/O during this run cannot be split into fio's and others' (``None``: it can)."""
    if probe is None or probe.device is None or probe.last is None:
        return "no block device is watched"
    key = tuple(sorted((k, repr(v)) for k, v in point.options.items()))
    if key not in _OPTIONS_PROBLEM:
        if len(_OPTIONS_PROBLEM) > 4096:
            _OPTIONS_PROBLEM.clear()
        _OPTIONS_PROBLEM[key] = _options_problem(point)
    if _OPTIONS_PROBLEM[key] is not None:
        return _OPTIONS_PROBLEM[key]
    for path in split_filenames(tgt):
        if not probe.same_device(path):
            return f"{path} is not on device {probe.device[0]}"
    return None


#: :func:`_options_problem` of each option set met (0.5 ms each to work out).
_OPTIONS_PROBLEM: dict[tuple[tuple[str, str], ...], str | None] = {}


def _options_problem(point: RunPoint) -> str | None:
    """Why fio's I/O under ``point``'s options may not reach the device as fio counts it (``None``: it does)."""
    opts = rendered_options(point, None)
    direct = "1" if "direct" in opts and opts["direct"] is None else str(opts.get("direct", "0")).lower()
    if direct not in ("1", "true", "yes", "on") and opts.get("buffered") != "0":
        return "buffered I/O (direct=0): the page cache stands between fio's I/O and the device's"
    engine = opts.get("ioengine") or "psync"
    if engine not in _BLOCK_ENGINES:
        return f"ioengine {engine}: its I/O is not known to reach the device one to one"
    for key, off in _UNCOUNTED_IO.items():
        if key in opts and opts[key] not in off:
            return f"{key}={opts[key]}: fio does I/O it does not count, or on other files"
    try:  # fio resets its counts when the ramp ends: the ramp's end is placed on the device's samples
        _run_length(point)
    except ValueError:  # a value fio's parse check refuses anyway: do not attribute
        return f"ramp_time={opts.get('ramp_time')!r}, runtime={opts.get('runtime')!r}: not a time fio reads"
    return None


def _run_length(point: RunPoint) -> tuple[float, float | None]:
    """``ramp_time`` and ``runtime`` of ``point``, s (``runtime`` ``None`` when unset); ``ValueError`` when one is
    not a time (:func:`storagebench.fio.options.parse_time_us`)."""
    opts = rendered_options(point, None)
    ramp = parse_time_us(opts.get("ramp_time") or 0) / 1e6
    runtime = parse_time_us(opts["runtime"]) / 1e6 if opts.get("runtime") else None
    return ramp, runtime


def _file_state(tgt: str) -> tuple[tuple[int, int], ...] | None:
    """Size and allocated bytes of each target file (a block device: 0, 0); ``None`` when one is missing or
    sparse (fio lays out what is missing, and a hole is read without I/O)."""
    out = []
    for path in split_filenames(tgt):
        try:
            st = os.stat(path)
        except OSError:
            return None
        if st.st_size and st.st_blocks * 512 < st.st_size:
            return None
        out.append((st.st_size, st.st_blocks))
    return tuple(out)


@dataclass
class _Watch:
    """The run's own watch of its device while fio runs (:func:`run_io_record`): opened before fio starts,
    closed at its exit by :func:`_close_watch`."""

    before: dict[str, float] | None
    problem: str | None
    files: tuple[tuple[int, int], ...] | None
    started: int = 0
    sampler: IoSampler | None = None  # a ramped run's samples of its device (:func:`ramp_io_record`)

    @classmethod
    def open(cls, run: _Run, before: dict[str, float] | None) -> _Watch:
        problem = None if run.hosts else _attribution_problem(run.point, run.target, run.probe)
        files = None if problem else _file_state(run.target)
        if problem is None and files is None:
            problem = "a target file is missing or sparse (fio lays it out, or reads holes without I/O)"
        with _LOCAL_RUNS_LOCK:
            if _LOCAL_RUNS["active"]:
                problem = problem or "another run of this sweep ran at the same time"
            _LOCAL_RUNS["active"] += 1
            _LOCAL_RUNS["started"] += 1
            started = _LOCAL_RUNS["started"]
        ramp, runtime = _run_length(run.point) if problem is None else (0.0, None)
        sampler = IoSampler(run.probe.device[1], ramp, runtime).start() if ramp > 0 else None
        return cls(before=before, problem=problem, files=files, started=started, sampler=sampler)


def _close_watch(quiet: dict[str, Any], watch: _Watch, run: _Run, nxt: QuietProbe | None,
                 fio_run: FioRun | None) -> None:
    """Add the run's own watch to its ``quiet_host`` record (``during_run``; a reason when others' I/O was found)
    and credit its time to the next run's window (:meth:`QuietProbe.credit`), so that the next run need not wait
    for it again. A ramped run is compared with fio's counts from its ramp's end only
    (:func:`storagebench._runwatch.ramp_io_record`), and only that measured part is credited."""
    with _LOCAL_RUNS_LOCK:
        _LOCAL_RUNS["active"] -= 1
        overlapped = _LOCAL_RUNS["started"] != watch.started
    if watch.sampler is not None:
        watch.sampler.stop(None if nxt is None else nxt.before)
    problem = watch.problem or ("fio failed" if fio_run is None else None)
    if problem is None and overlapped:
        problem = "another run of this sweep ran at the same time"
    if problem is None and _file_state(run.target) != watch.files:
        problem = "fio laid out or resized a target file"
    if problem is None and (nxt is None or nxt.before is None):
        problem = "the device's counters could not be read at fio's exit"
    during = None
    if problem is None and watch.sampler is None:
        during = run_io_record(watch.before, nxt.before, fio_run.io_counts, run.probe.device)
    elif problem is None:  # only the measured part, from the ramp's end to fio's exit, is watched and credited
        during, problem = ramp_io_record(watch.sampler, fio_run.window, fio_run.io_counts, run.probe.device)
    if during is None:
        quiet["during_run"] = {"attributed": False, "quiet": None, "note": problem}
        return
    reason = during.pop("reason", None)
    quiet["during_run"] = during
    if reason:
        quiet["reasons"].append(reason)
        quiet["quiet"] = False
    # what is surely others' (beyond the tolerance of a ramped run's window; the verdict's own rule)
    nxt.credit(during["window_s"], during["excess_ios"] - during["tolerance_ios"],
               during["excess_bytes"] - during["tolerance_bytes"])


def _add_scan(quiet: dict[str, Any], scan: Future[list[Any]]) -> None:
    """The helper thread's scan for other fio processes into the run's ``quiet_host`` record; a scan that failed
    is said so (``other_fio`` stays ``None``) rather than cost the run."""
    try:
        add_other_fio(quiet, scan.result())
    except OSError as exc:
        quiet["other_fio_note"] = f"could not look for other fio processes: {exc}"


def _write_inputs(ctx: RunContext, run: _Run) -> Path:
    """``job.fio`` (checked against fio's own reading of it) and ``point.json`` in the staging directory."""
    job_path = run.staging / "job.fio"
    job_path.write_text(render_jobfile(run.point, ctx.study, run.target))
    _verify_with_fio(job_path, run.point, run.target, ctx.fio_exe)
    (run.staging / "point.json").write_bytes(
        orjson.dumps(run.point.to_dict(ctx.study.name, setups=ctx.study.plan_setups > 1), option=orjson.OPT_INDENT_2)
    )
    return job_path


def _known_before(ctx: RunContext, run: _Run, started: datetime) -> Provenance:
    """Off the critical path, while fio starts: what is known before the run (sysfs, mountinfo), and the
    fsync of the files written so far."""
    known = collect_provenance(None if run.hosts else run.target, spec_hash=ctx.study.spec_hash,
                               fio_bin=ctx.fio_exe, started_at=started)
    ctx.store.sync_files([run.staging / "job.fio", run.staging / "point.json"])
    return known


def _measure(ctx: RunContext, run: _Run) -> float:
    """Write the run's inputs, run fio, write ``provenance.json`` (also for a failed run), commit."""
    job_path = _write_inputs(ctx, run)
    quiet, before = _quiet_record(run.probe, run.target, ctx.quiet_window_s, ctx.wait_quiet_s)
    if run.report is not None:
        run.report["quiet_host"] = quiet
    pending = ctx.pool.submit(_known_before, ctx, run, datetime.now(timezone.utc))
    # other fio processes looked for as fio starts, in the helper thread, when the window left none of its own
    scan = ctx.pool.submit(process.other_fio_processes) if quiet.get("other_fio", ()) is None else None
    watch = None if run.hosts else _Watch.open(run, before)  # closed (always) by _close_watch below
    output, stderr = run.staging / "output.json", run.staging / "stderr.txt"
    t0 = time.monotonic()
    client = fio_run = None
    try:
        try:
            if run.hosts:
                res = clientserver.run_clients(job_path, run.hosts, output, stderr, ctx.timeout_s, ctx.fio_exe,
                                               record_path=run.staging / process.RECORD_NAME)
                client = res.provenance()  # the servers' fio versions and the client command
                doc, head = clientserver.read_client_output(output)
                check_measured(doc or {}, stderr.read_text(errors="replace"), head, res.returncode)
            else:
                fio_run = run_fio(job_path, output, stderr, fio_bin=ctx.fio_exe, timeout_s=ctx.timeout_s,
                                  cwd=run.staging, record_path=run.staging / process.RECORD_NAME, cgroup=ctx.cgroup)
        finally:
            duration = time.monotonic() - t0
            nxt = None if run.hosts else QuietProbe(run.target)  # the next run's window opens at fio's exit
            if watch is not None:
                _close_watch(quiet, watch, run, nxt, fio_run)
            if scan is not None:
                _add_scan(quiet, scan)
            _write_provenance(ctx, run, pending.result(), duration, quiet, client)
    except (FioError, HostError) as exc:
        _keep_failure(ctx, run, exc, output)
        raise
    if not run.hosts:
        _note_created(ctx.store, run.target, run.existed)
    if nxt is not None:
        nxt.pause()  # our own fsyncs (the commit, then raw/ on the helper thread) are not another's I/O
        _CARRIED.probe = (ctx.pool, nxt)
    ctx.store.commit_run(run.point.run_id, run.staging, synced=[job_path, run.staging / "point.json"],
                         sync_parent=False)
    ctx.pool.submit(ctx.store.sync_raw_dir)  # makes the rename durable while the next run starts
    return duration


def _write_provenance(ctx: RunContext, run: _Run, known: Provenance, duration: float, quiet: dict[str, Any],
                      client: Any) -> None:
    """The run's one record: what was known before it, and what only its end tells."""
    hosts = run.hosts
    prov = known.replace(
        finished_at=utc_now(), duration_s=round(duration, 6), safety=run.safety, quiet_host=quiet,
        set_up=_set_up_info(ctx.set_up), host_steps=run.host_steps,
        steadystate=steadystate_request(run.point.options, ctx.study.runtime),
        **({"hosts": tuple(hosts), "target": run.target, "client_server": client} if hosts else {}))
    (run.staging / "provenance.json").write_bytes(orjson.dumps(prov.to_json(), option=orjson.OPT_INDENT_2))


def _keep_failure(ctx: RunContext, run: _Run, exc: FioError | HostError, output: Path) -> None:
    """Keep a failed attempt under ``failed/``; raise :class:`NotWritableError` instead of ``exc`` when the
    results filesystem is full (nothing kept) or fio could not write a local target."""
    if isinstance(exc, FioError) and results_full(ctx.store):
        raise output_cut_short(output, ctx.store) from None
    ctx.store.record_failure(run.point.run_id, error=exc, staging=run.staging)
    if isinstance(exc, FioError) and not run.hosts:
        unwritable = target_not_writable(exc, run.target, ctx.store.failed_dir / run.point.run_id)
        if unwritable is not None:
            raise unwritable from exc


def _set_up_info(set_up: SetUpInfo | Mapping[str, Any] | None) -> SetUpInfo | None:
    if set_up is None or isinstance(set_up, SetUpInfo):
        return set_up
    return SetUpInfo.from_json(set_up)

"""Execute a study's run plan with fio: timeouts, resume, progress, clean interruption.

Per run: render the job file, refuse unsafe targets (:func:`storagebench.safety.check_run`),
run ``fio --output-format=json+ --output=<tmp>/output.json <tmp>/job.fio`` in its own
process group with a wall-clock limit, then store ``job.fio``, ``output.json``,
``stderr.txt``, ``point.json`` and ``provenance.json`` with one atomic rename
(:class:`storagebench.store.StudyStore`). Runs already in ``raw/`` are skipped, so rerunning
the same command resumes a sweep that was interrupted or killed.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from .errors import FioError, FioNotFoundError, HostError, StudyError
from .hostinfo import collect_provenance
from .jobfile import render_jobfile
from .store import StudyStore
from .study import RunPoint, Study, load_study

__all__ = ["SweepResult", "FioRun", "run_study", "run_point", "run_fio", "find_fio", "fio_message"]

_KILL_GRACE_S = 5.0


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
    """

    study: str
    root: Path
    planned: tuple[str, ...]
    completed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)

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


def find_fio(fio_bin: str = "fio") -> str:
    """Absolute path of the fio executable.

    Raises
    ------
    FioNotFoundError
        Not installed / not executable, with what to install.
    """
    path = shutil.which(fio_bin)
    if path is None:
        raise FioNotFoundError(
            f"fio executable not found: {fio_bin!r} (install it: 'apt-get install fio' on Debian/Ubuntu, "
            "'dnf install fio' on Fedora, or run 'make test' / 'make demo' as root, which installs it)"
        )
    return path


def fio_message(stderr: str, output: str = "") -> str:
    """fio's own error lines: ``fio: ...``, ``err=``, ``error=`` and job lines before them.

    Parameters
    ----------
    stderr : str
        fio's stderr.
    output : str
        The ``--output`` file (fio writes some errors before the JSON).
    """
    lines: list[str] = []
    for text in (stderr, output.split("{", 1)[0] if output else ""):
        for line in text.splitlines():
            line = line.strip()
            if line and line not in lines:
                lines.append(line)
    keep = [ln for ln in lines if ln.startswith("fio:") or "err=" in ln or "error" in ln.lower()]
    picked = keep or lines
    return "; ".join(picked[:8])


_PRCTL: Any = None


def _prctl():
    """libc ``prctl``, resolved in the parent: the forked child must not import or dlopen anything."""
    global _PRCTL
    if _PRCTL is None:
        try:
            import ctypes

            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _PRCTL = False
    return _PRCTL


_SETPRIV: list[str] | None = None


def _pdeathsig_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL`` (util-linux >= 2.33) when available, else ``[]``.

    Setting PR_SET_PDEATHSIG through ``setpriv`` lets Python spawn fio with vfork (about
    1.5 ms) instead of fork + ``preexec_fn`` (about 30 ms in a large process), per run.
    """
    global _SETPRIV
    if _SETPRIV is None:
        exe = shutil.which("setpriv")
        ok = False
        if exe and sys.platform.startswith("linux"):
            try:
                out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
                ok = "--pdeathsig" in out.stdout
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        _SETPRIV = [exe, "--pdeathsig", "KILL"] if ok and exe else []
    return _SETPRIV


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Have the kernel SIGKILL fio when storagebench dies, even by SIGKILL (prctl PR_SET_PDEATHSIG)."""
    if _PRCTL:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9


def _wait(proc: subprocess.Popen, timeout_s: float | None) -> int:
    """Block until ``proc`` exits; ``subprocess.TimeoutExpired`` after ``timeout_s``.

    ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms, which a sweep would pay on every
    run; a pidfd (Linux >= 5.3) wakes up the moment fio exits.
    """
    if timeout_s is None:
        return proc.wait()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            poller.poll(max(1.0, left * 1000.0))  # readable when fio has exited
        return proc.returncode
    finally:
        os.close(fd)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM fio's process group, SIGKILL after a grace period."""
    for sig, wait_s in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, _KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_fio(
    jobfile: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    stderr_path: str | os.PathLike[str],
    *,
    fio_bin: str = "fio",
    timeout_s: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
) -> FioRun:
    """Run ``fio --output-format=json+ --output=OUTPUT JOBFILE`` with a wall-clock limit.

    fio runs in a new session (its own process group), so a terminal's Ctrl-C reaches only
    storagebench, which then ends fio: SIGTERM to the group, SIGKILL after 5 s. On Linux fio
    also gets ``PR_SET_PDEATHSIG``: if storagebench is killed outright (SIGKILL, OOM), the
    kernel kills fio too instead of leaving it writing into a dead sweep's staging directory.

    Parameters
    ----------
    jobfile, output_path, stderr_path : path
        The job file, fio's JSON+ output, fio's stderr (and stdout).
    fio_bin : str
        fio executable.
    timeout_s : float, optional
        Limit, s; the process group is killed when it is reached.
    cwd : path, optional
        Working directory (fio's relative log files land there).
    extra_args : sequence of str
        More fio arguments, before the job file.

    Returns
    -------
    FioRun

    Raises
    ------
    FioNotFoundError
        fio is not installed.
    FioError
        Non-zero exit (message: fio's ``fio: ...``/``err=`` lines), a timeout (``returncode``
        ``None``), or output that holds no JSON, or a job with ``error`` != 0.
    KeyboardInterrupt
        After fio was ended.
    """
    exe = find_fio(fio_bin)
    # fio may run in another cwd (the run's staging dir): relative paths would point elsewhere.
    output_path, stderr_path = Path(output_path).absolute(), Path(stderr_path).absolute()
    jobfile = Path(jobfile).absolute()
    prefix = _pdeathsig_prefix()
    cmd = [*prefix, exe, "--output-format=json+", f"--output={output_path}", *extra_args, os.fspath(jobfile)]
    start = time.monotonic()
    with open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(cmd, stdout=err, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                                    start_new_session=True,
                                    preexec_fn=None if prefix or not _prctl() else _die_with_parent)
        except FileNotFoundError as exc:
            raise FioNotFoundError(f"cannot run fio {exe!r}: {exc.strerror}; install it: apt-get install fio") from exc
        try:
            rc = _wait(proc, timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stderr = stderr_path.read_text(errors="replace")
            raise FioError(
                f"fio did not finish within {timeout_s:g} s and was killed"
                + (f" ({fio_message(stderr)})" if stderr.strip() else ""),
                returncode=None, stderr=stderr,
            ) from None
        except BaseException:  # KeyboardInterrupt, SystemExit: never leave fio running
            _kill_group(proc)
            raise
    duration = time.monotonic() - start
    _check_output(output_path, stderr_path, rc)
    return FioRun(returncode=rc, duration_s=duration)


def _check_output(output_path: Path, stderr_path: Path, rc: int) -> None:
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
    from .safety import _split_filenames

    parts = [os.path.abspath(p) for p in _split_filenames(target)]
    return ":".join(p.replace(":", "\\:") for p in parts)


def _check_safety(point: RunPoint, study: Study, store: StudyStore, tgt: str, hosts: list[str] | None,
                  allow_devices: Sequence[str]) -> dict[str, Any]:
    """:mod:`storagebench.safety` on what this run's fio will touch; the record goes to provenance."""
    from . import safety

    common = {"allow": sorted(study.allowed), "allow_devices": list(allow_devices)}
    if hosts:
        rec = safety.check_point_hosts(tgt, point.options, hosts, allow_devices=allow_devices, allow=study.allowed,
                                       allow_remote=study.allow_remote, forbidden_roots=[store.root])
    else:
        rec = safety.check_run(tgt, point.options, allow_devices=allow_devices, allow=study.allowed,
                               cwd=os.getcwd(), own_files=_own_files(store), forbidden_roots=[store.root])
    return {**common, **rec}


_CREATED = "created_targets.json"


def _own_files(store: StudyStore) -> set[tuple[int, int, int]]:
    """Regular files this study's runs created (fio laid them out): ``(major, minor, inode)``."""
    try:
        data = orjson.loads((store.root / _CREATED).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return set()
    out = set()
    for entry in data if isinstance(data, list) else []:
        ident = entry.get("identity") if isinstance(entry, dict) else None
        if isinstance(ident, list) and len(ident) == 3 and all(isinstance(x, int) for x in ident):
            out.add(tuple(ident))
    return out


def _existing_files(target: str) -> set[str]:
    from .safety import _split_filenames

    return {p for p in _split_filenames(target) if os.path.lexists(p)}


def _note_created(store: StudyStore, target: str, existed: set[str]) -> None:
    """Remember files fio created for this study, so a later run may grow them (see safety's size rule)."""
    from .safety import _split_filenames

    new = []
    for p in _split_filenames(target):
        if p in existed:
            continue
        try:
            st = os.stat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            new.append({"path": p, "identity": [os.major(st.st_dev), os.minor(st.st_dev), st.st_ino]})
    if not new:
        return
    path = store.root / _CREATED
    try:
        old = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        old = []
    tmp = path.with_name(f".{_CREATED}.tmp-{os.getpid()}")
    tmp.write_bytes(orjson.dumps([*old, *new], option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)


_FIO_PARSED: set[str] = set()


def _verify_with_fio(job_path: Path, point: RunPoint, tgt: str, fio_exe: str) -> None:
    """fio's own reading of the job file must be what was checked; once per distinct option set (0.15 s)."""
    from .jobfile import rendered_options, verify_fio_parse

    expected = rendered_options(point, tgt)
    key = orjson.dumps(expected, option=orjson.OPT_SORT_KEYS).decode()
    if key in _FIO_PARSED:
        return
    verify_fio_parse(job_path, expected, fio_exe)
    _FIO_PARSED.add(key)


def _hosts_list(hosts: list[str] | str | None) -> list[str] | None:
    """``hosts`` checked with fio's host grammar (:mod:`storagebench.fio.hosts`): a list as is, a
    string as a fio host file, read into the ``--client`` form of each host."""
    from .fio.hosts import parse_host, parse_hostfile

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
            from tqdm import tqdm

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
) -> SweepResult:
    """Run every run of a study's plan that is not complete yet.

    Parameters
    ----------
    study : Study or path
        The spec (or a YAML path, loaded with :func:`storagebench.study.load_study`).
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
        Devices the user explicitly allows to be written (see :func:`storagebench.safety.check_run`).
    timeout_s : float, optional
        Per-run wall-clock limit, s; default :attr:`Study.timeout_s`.
    stop_on_error : bool
        Stop at the first failed run (after recording it) and raise its :class:`FioError`.
    overwrite : bool
        When ``<out_dir>/<study>`` holds a different spec, move it aside and start afresh.

    Returns
    -------
    SweepResult

    Raises
    ------
    FioNotFoundError
        fio is not installed (checked before anything is written).
    StudyError
        No target, a different spec is stored under the same study name, or a ``clients``
        level exceeds the number of hosts (of a host file).
    UnsafeTargetError
        A run would destroy data (nothing of that run is written; the sweep stops).
    FioError
        Only with ``stop_on_error``; otherwise failed runs are recorded under
        ``failed/<run_id>/<utc>/`` and listed in the result.
    KeyboardInterrupt
        On Ctrl-C: fio is ended, the run in progress is discarded, completed runs are kept.

    Notes
    -----
    fio runs with the run's staging directory as its working directory, so fio logs with
    relative names (``write_lat_log=lat``, ``write_iops_log=iops`` in ``fixed``) end up in
    ``raw/<run_id>/`` with the rest of the run. A ``target`` factor wins over ``target``.
    Client/server studies (``hosts``) go through
    ``storagebench.clientserver.run_clients(jobfile, hosts, output_path, stderr_path,
    timeout_s, fio_bin)``; their target lives on the servers, so the local safety check is
    not applied to it. A ``clients`` factor runs each point on ``hosts[:clients]``
    (:meth:`Study.hosts_for`), in the same seeded random order as every other factor;
    ``provenance.json`` lists the hosts that ran the point.
    """
    if not isinstance(study, Study):
        study = load_study(study)
    fio_exe = find_fio(fio_bin)
    plan = study.expand()
    hosts = _hosts_list(study.hosts)
    for point in plan if hosts else ():
        study.hosts_for(point, hosts)  # a clients level above len(hosts) is refused before anything runs
    store = StudyStore.for_study(out_dir, study)
    store.ensure_spec(study, overwrite=overwrite)
    store.cleanup_stale()
    done = store.completed_run_ids()
    limit = float(timeout_s) if timeout_s is not None else study.timeout_s
    skipped = [p.run_id for p in plan if p.run_id in done]
    completed: list[str] = []
    failed: list[str] = []
    errors: dict[str, str] = {}
    bar = _Progress(len(plan), len(skipped), study.run_duration_s, study.name, progress)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-runner")
    try:
        for point in plan:
            if point.run_id in done:
                continue
            try:
                duration = run_point(point, study, store, target=target, targets=targets, fio_exe=fio_exe,
                                      allow_devices=allow_devices, timeout_s=limit, pool=pool)
            except (FioError, HostError) as exc:
                failed.append(point.run_id)
                errors[point.run_id] = getattr(exc, "message", str(exc))
                bar.step(None, failed=len(failed))
                if stop_on_error:
                    raise
                continue
            completed.append(point.run_id)
            bar.step(duration, failed=len(failed))
    finally:
        pool.shutdown(wait=True)  # pending fsyncs of completed runs
        store.sync_raw_dir()
        bar.close()
    return SweepResult(study=study.name, root=store.root, planned=plan.run_ids, completed=tuple(completed),
                       skipped=tuple(skipped), failed=tuple(failed), errors=errors)


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
) -> float:
    """Measure one point of a plan and store it (the step :func:`run_study` repeats).

    Checks the target (:func:`storagebench.safety.check_run`), renders ``job.fio``, runs fio
    (or ``clientserver.run_clients`` when the study has ``hosts``) and commits
    ``raw/<run_id>/`` atomically. Safe to call from several threads at once for different
    points (concurrent workloads).

    Parameters
    ----------
    point : RunPoint
    study : Study
    store : StudyStore
        Its spec must already be stored (:meth:`StudyStore.ensure_spec`).
    target, targets
        As in :func:`run_study`.
    fio_exe : str
        fio executable (:func:`find_fio`).
    allow_devices : sequence of str
    timeout_s : float
        Wall-clock limit of the fio process, s.
    pool : ThreadPoolExecutor, optional
        Helper thread for provenance and fsyncs while fio runs; default a private one.

    Returns
    -------
    float
        Wall time of the fio process, s.

    Raises
    ------
    FioError, HostError
        After the attempt was kept under ``failed/<run_id>/<utc>/``.
    UnsafeTargetError
        Before anything is written.
    """
    if pool is None:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="storagebench-point") as own:
            return run_point(point, study, store, target=target, targets=targets, fio_exe=fio_exe,
                             allow_devices=allow_devices, timeout_s=timeout_s, pool=own)
    hosts = study.hosts_for(point, _hosts_list(study.hosts))  # hosts[:clients] with a clients factor
    tgt = _resolve_target(point, study, None if target is None else os.fspath(target), targets)
    checked = _check_safety(point, study, store, tgt, hosts, allow_devices)  # relative paths: in our cwd
    if not hosts:
        tgt = _absolute_targets(tgt)  # fio runs in the staging dir: a relative path would mean another file
    existed = hosts or _existing_files(tgt)
    staging = store.staging_dir(point.run_id)
    try:
        job_text = render_jobfile(point, study, tgt)
        job_path = staging / "job.fio"
        job_path.write_text(job_text)
        _verify_with_fio(job_path, point, tgt, fio_exe)
        (staging / "point.json").write_bytes(
            orjson.dumps(point.to_dict(study.name), option=orjson.OPT_INDENT_2)
        )
        started = datetime.now(timezone.utc)

        def _before() -> dict[str, Any]:
            # off the critical path, while fio starts: provenance (sysfs, mountinfo) and the
            # fsync of the files written so far
            prov = collect_provenance(None if hosts else tgt, spec_hash=study.spec_hash, fio_bin=fio_exe,
                                      started_at=started)
            store.sync_files([job_path, staging / "point.json"])
            return prov

        pending = pool.submit(_before)
        output, stderr = staging / "output.json", staging / "stderr.txt"
        t0 = time.monotonic()
        try:
            try:
                if hosts:
                    from . import clientserver  # another module owns fio --client

                    clientserver.run_clients(job_path, hosts, output, stderr, timeout_s, fio_exe)
                else:
                    run_fio(job_path, output, stderr, fio_bin=fio_exe, timeout_s=timeout_s, cwd=staging)
            finally:
                duration = time.monotonic() - t0
                prov = pending.result()
                prov.update(finished_at=_utc_now(), duration_s=round(duration, 6), safety=checked)
                if hosts:
                    prov["hosts"] = hosts
                    prov["target"] = tgt
                (staging / "provenance.json").write_bytes(orjson.dumps(prov, option=orjson.OPT_INDENT_2))
        except (FioError, HostError) as exc:
            store.record_failure(point.run_id, error=exc, staging=staging)
            raise
        if not hosts:
            _note_created(store, tgt, existed)
        store.commit_run(point.run_id, staging, synced=[job_path, staging / "point.json"], sync_parent=False)
        pool.submit(store.sync_raw_dir)  # makes the rename durable while the next run starts
        return duration
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # an interrupted or failed run leaves nothing in raw/
        raise


_run_point = run_point  # the name other modules used before it was public


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")

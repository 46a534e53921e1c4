"""One fio process: start it with a wall-clock limit, end it cleanly, and judge its output.

:func:`run_fio` is the one place fio runs for a local run (client/server runs go through
:func:`storagebench._clientserver.run_clients`); :func:`check_measured` is the rule, shared by both,
that a run which printed a fatal message or completed 0 I/Os measured nothing.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .errors import FioError
from .fio import process
from .fio.process import find_fio, fio_message


@dataclass(frozen=True)
class FioRun:
    """One finished fio process.

    Attributes
    ----------
    returncode : int
    duration_s : float
        Wall-clock time of the fio process, s.
    io_counts : tuple of (int, int)
        Per data direction (read, write, trim), summed over the jobs: fio's ``total_ios`` (I/Os completed)
        and ``io_bytes`` (bytes moved) in its measured window -- fio resets both when ``ramp_time`` ends, so the
        ramp's I/O is left out -- what fio itself did, which the quiet-host check tells apart from others' I/O
        on the device (:func:`storagebench._hostinfo.run_io_record`).
    window : (float, float) or None
        When the measured window ended (fio's ``timestamp_ms``, s since the Unix epoch) and how long it lasted,
        s (:func:`storagebench.fio.process.measured_window`); ``None`` when fio's output does not say.
    """

    returncode: int
    duration_s: float
    io_counts: tuple[tuple[int, int], ...] = ()
    window: tuple[float, float] | None = None


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
    cgroup: str | os.PathLike[str] | None = None,
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
    cgroup : path, optional
        Run fio and its workers inside this cgroup (a testbed's throttle; :func:`storagebench.fio.process.spawn`).

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
                           record_path=record_path, cgroup=cgroup)
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
    data = _check_output(output_path, stderr_path, rc)
    return FioRun(returncode=rc, duration_s=duration, io_counts=io_counts(data), window=process.measured_window(data))


def io_counts(doc: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    """``(total_ios, io_bytes)`` of each data direction (read, write, trim) of fio's JSON, summed over its jobs
    (:attr:`FioRun.io_counts`); a missing or malformed count is 0."""
    out = []
    for ddir in ("read", "write", "trim"):
        ios = nbytes = 0
        for job in doc.get("jobs", ()) if isinstance(doc.get("jobs"), list) else ():
            part = job.get(ddir) if isinstance(job, Mapping) else None
            if isinstance(part, Mapping):
                ios += part.get("total_ios", 0) if isinstance(part.get("total_ios"), int) else 0
                nbytes += part.get("io_bytes", 0) if isinstance(part.get("io_bytes"), int) else 0
        out.append((ios, nbytes))
    return tuple(out)


def _check_output(output_path: Path, stderr_path: Path, rc: int) -> dict[str, Any]:
    """fio's exit status, its JSON, each job's ``error``, fatal messages and runs of 0 I/Os; returns the JSON."""
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
    check_measured(data, stderr, output[:start], rc)
    return data


def check_measured(doc: Mapping[str, Any], stderr: str, head: str, rc: int | None) -> None:
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

"""What fio said: its error lines, the fatal messages it prints without an error status, runs with no I/O.

Part of :mod:`storagebench.fio.process`, which re-exports its public names. Imports nothing from storagebench.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fio_message(stderr: str, output: str = "") -> str:
    """fio's own error lines: ``fio: ...``, ``err=``, ``error=`` and job lines before them.

    Parameters
    ----------
    stderr : str
        fio's stderr.
    output : str
        The ``--output`` file (fio writes some errors before the JSON).

    Returns
    -------
    str
        At most 8 lines joined by ``"; "`` (all lines when none looks like an error).
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


#: fio messages that mean the run did not measure what its job file asks, printed while fio still
#: exits 0 with ``error`` 0 in its JSON (fio 3.33 sources in parentheses).
FATAL_PATTERNS: tuple[str, ...] = (
    "failed allocating",  # random map: "fio: failed allocating random map ...", "file ... failed allocating random map. Running job without." (filesetup.c)
    "smalloc: oom",  # the shared-memory pool ran out (smalloc.c)
    "realloc oom",  # "fio: realloc OOM" (parse.c)
    "disappeared",  # "fio: pid=N disappeared N": a worker vanished (backend.c reap_threads)
    "got signal=",  # "fio: pid=N, got signal=N": a worker was killed (backend.c reap_threads)
    "appears to be stuck",  # "fio: job ... hasn't exited in N seconds, it appears to be stuck" (backend.c)
    "seems to be stuck",  # "fio seems to be stuck grabbing stat_sem, forcibly exiting" (backend.c)
)


def fatal_lines(*texts: str) -> list[str]:
    """Lines of fio's stderr / output that report a broken run (see :data:`FATAL_PATTERNS`).

    Parameters
    ----------
    *texts : str
        fio's stderr, and the part of its ``--output`` before the JSON.

    Returns
    -------
    list of str
        The matching lines, stripped, in order, each once.
    """
    out: list[str] = []
    for text in texts:
        for line in text.splitlines():
            low = line.lower()
            if any(p in low for p in FATAL_PATTERNS):
                s = line.strip()
                if s not in out:
                    out.append(s)
    return out


def _ios(entry: Mapping[str, Any]) -> int:
    total = 0
    for ddir in ("read", "write", "trim"):
        d = entry.get(ddir)
        if isinstance(d, Mapping):
            n = d.get("total_ios")
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                total += n
    return total


def zero_io_jobs(doc: Mapping[str, Any]) -> list[str] | None:
    """Whether a fio JSON document completed no I/O at all.

    Parameters
    ----------
    doc : mapping
        fio's ``--output-format=json``/``json+`` document (``jobs``, or ``client_stats`` of a
        client/server run, whose ``"All clients"`` entry is left out).

    Returns
    -------
    list of str or None
        The job names when *every* job completed 0 I/Os (``total_ios`` of read, write and trim
        all 0 or missing); ``None`` when some job did I/O or there is no job.
    """
    jobs = doc.get("client_stats") if "client_stats" in doc else doc.get("jobs")
    if not isinstance(jobs, list):
        return None
    entries = [j for j in jobs if isinstance(j, Mapping) and j.get("jobname") != "All clients"]
    if not entries or any(_ios(j) for j in entries):
        return None
    return [str(j.get("jobname")) for j in entries]


def measured_window(doc: Mapping[str, Any]) -> tuple[float, float] | None:
    """When fio's measured window ended and how long it lasted, as fio's JSON gives them: ``(reported_s, runtime_s)``.

    fio resets its counts, its job's ``epoch`` and its per-direction ``runtime`` when ``ramp_time`` ends
    (fio 3.33 ``reset_all_stats``), and writes ``timestamp_ms`` (wall clock, ms since the epoch, truncated)
    when it reports, after every job ended and was reaped. So each job counted its I/O over a window of its
    ``<dir>.runtime`` (ms, rounded up; with ``group_reporting`` the longest member's) that ended at or before
    ``timestamp_ms``: the rule the ingest's ``reported_at`` and ``runtime_s`` columns hold per run and
    :func:`storagebench.studies.bucket_shares` reasons with. fio's drain between the jobs' end and its report
    (reaping in 10 ms steps, closing files, the statistics) is 40 to 60 ms on a 2-core VM, so the window's
    start is ``reported_s - runtime_s`` only to that; the runner's watch of a ramped run finds the end on the
    device (:func:`storagebench._runwatch.ramp_io_record`).

    Parameters
    ----------
    doc : mapping
        fio's ``--output-format=json``/``json+`` document of a local run (``jobs``).

    Returns
    -------
    (float, float) or None
        ``timestamp_ms / 1000`` (s since the Unix epoch) and the longest ``<dir>.runtime`` of any job and
        direction, s; ``None`` when fio printed no ``timestamp_ms`` (fio 2.1, client/server output), no job,
        or no positive runtime.
    """
    ms = doc.get("timestamp_ms")
    jobs = doc.get("jobs")
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0 or not isinstance(jobs, list):
        return None
    longest = 0
    for job in jobs:
        for ddir in ("read", "write", "trim"):
            part = job.get(ddir) if isinstance(job, Mapping) else None
            rt = part.get("runtime") if isinstance(part, Mapping) else None
            if isinstance(rt, int) and not isinstance(rt, bool) and rt > longest:
                longest = rt
    return (ms / 1000.0, longest / 1000.0) if longest > 0 else None

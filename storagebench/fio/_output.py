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

"""Run one fio client/server point: ``fio --client=h1 job1 --client=h2 job2 ...``.

fio's client sends each server its job file, the servers run it at the same time, and the
client writes one JSON(+) document with a ``client_stats`` entry per server job (each tagged
``hostname``/``port``) and an ``"All clients"`` entry (fio ``client.c``). What fio does *not*
do is fail loudly: a server that cannot be reached or dies mid-run leaves fio's exit status at
0 or 1 and a line such as ``client: host=ADDR disconnected`` in the *output file* (fio's
``log_info`` goes to ``--output``). :func:`run_clients` therefore checks which hosts really
reported and raises :class:`~storagebench.errors.HostError` naming the ones that did not.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import orjson
import pandas as pd

from .errors import FioError, HostError
from .fio import process
from .fio.hosts import Host, host_label, parse_host
from .fio.process import find_fio, fio_version
from .ingest.fiolog import parse_fio_log
from .records import ClientServerInfo
from .schema import empty
from .servers import check_versions, host_error, server_versions

__all__ = [
    "ClientRunResult",
    "run_clients",
    "client_command",
    "read_client_output",
    "read_span_logs",
]

#: Prefix of the fio iops logs :func:`run_clients` asks every server for (``log_unix_epoch=1``):
#: fio's client JSON has no per-client start time, these logs give each host's time span.
SPAN_LOG_PREFIX = "sbspan"

#: fio client messages that name a host (client.c, server.c).
_HOST_MESSAGES = (
    re.compile(r"client: host=(?P<host>\S+) disconnected"),
    re.compile(r"fio: failed to connect to (?P<host>\S+)"),
    re.compile(r"client <(?P<host>[^>]+)>: exited with error (?P<err>\d+)"),
    re.compile(r"fio: client (?P<host>\S+?),? timed out"),
    re.compile(r"fio: client (?P<host>\S+), timeout on cmd"),
    re.compile(r"fio: failed to resolve <(?P<host>[^>]*)>"),
)

_VERSION_CACHE: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class ClientRunResult:
    """What :func:`run_clients` ran and what came back.

    Attributes
    ----------
    command : list of str
        The fio command line.
    returncode : int
        fio's exit status.
    hosts : list of str
        ``hostname:port`` of every server, in command order.
    server_versions : dict
        ``{"hostname:port": "fio-X.Y"}`` as each server reported it (probe reply).
    client_version : str
        The controller's fio version.
    started_at : datetime
        UTC time the client was started.
    elapsed_s : float
        Wall time of the client process, s.
    output_path, stderr_path : Path
    messages : list of str
        fio client messages found in the output / stderr (host problems, warnings).
    """

    command: list[str]
    returncode: int
    hosts: list[str]
    server_versions: dict[str, str]
    client_version: str
    started_at: datetime
    elapsed_s: float
    output_path: Path
    stderr_path: Path
    messages: list[str] = field(default_factory=list)

    def provenance(self) -> ClientServerInfo:
        """The run's ``client_server`` record of ``provenance.json``: hosts, each server's fio version,
        the client's, the client command, start (ISO 8601 UTC), wall time (s) and exit status."""
        return ClientServerInfo(
            hosts=tuple(self.hosts), server_fio_versions=dict(self.server_versions),
            client_fio_version=self.client_version, command=tuple(self.command),
            started_at=self.started_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
            elapsed_s=round(self.elapsed_s, 6), returncode=self.returncode)


def _jobfiles(jobfile, hosts: list[Host]) -> list[Path]:
    if isinstance(jobfile, Mapping):
        by = {parse_host(k).label: Path(v) for k, v in jobfile.items()}
        missing = [h.label for h in hosts if h.label not in by]
        if missing:
            raise HostError(f"jobfile mapping has no job file for hosts {missing}")
        files = [by[h.label] for h in hosts]
    elif isinstance(jobfile, (str, os.PathLike)):
        files = [Path(jobfile)] * len(hosts)
    else:
        files = [Path(j) for j in jobfile]
        if len(files) != len(hosts):
            raise HostError(f"need one job file per host: {len(hosts)} hosts, got {len(files)} job files")
    for f in files:
        if not f.is_file():
            raise FioError(f"job file {str(f)!r} does not exist")
    return files


def _host_token(h: Host) -> str:
    """A file-name-safe token of ``h``: ``<address>-<port>`` (``:`` of IPv6 as ``_``), or for a
    socket ``sock-<file name>-<hash of the path>``."""
    if not h.is_socket:
        return f"{h.address.replace(':', '_')}-{h.port}"
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(h.address).name)[:40]
    return f"sock-{base}-{hashlib.sha256(h.address.encode()).hexdigest()[:10]}"


def span_log_prefix(host: "str | Host") -> str:
    """Log prefix of ``host``'s span log: ``sbspan-<address>-<port>`` (``:`` of IPv6 as ``_``), or
    ``sbspan-sock-<file name>-<hash of the path>`` for a socket server."""
    return f"{SPAN_LOG_PREFIX}-{_host_token(parse_host(host))}"


def _socket_log_dir(h: Host, out_dir: Path) -> Path:
    """Where fio's client writes a socket server's span log (see :func:`_with_span_logs`)."""
    return out_dir / f"{span_log_prefix(h)}_iops.log." / Path(h.address).parent.relative_to("/")


def _with_span_logs(jobfiles: list[Path], hosts: list[Host], out_dir: Path, msec: int) -> list[Path]:
    """Per-host copies of the job files with a leading ``[global]`` that logs IOPS in Unix time.

    fio applies a ``[global]`` section to the jobs after it and allows several, so the job
    file's own options still win. The fio client stores each server's log as
    ``<log name>.<server address>`` in its working directory (fio ``client.c``
    ``fio_client_handle_iolog``): ``<prefix>_iops.<n>.log.<address>`` for TCP. For a socket
    server the address is the socket's path, so the name is a path below a directory
    ``<prefix>_iops.<n>.log.`` that must exist: the copies for socket servers also set
    ``per_job_logs=0``, which makes the name ``<prefix>_iops.log`` (no job number), the
    directory is made here, and :func:`_collect_socket_span_logs` moves the log to
    ``<prefix>_iops.0.log.sock``. With ``per_job_logs=0`` fio 3.33's server sends one job's log
    (the jobs of one server start together; a job file that sets ``per_job_logs=1`` itself gets
    no span log from a socket server).
    """
    out = []
    for h, j in zip(hosts, jobfiles, strict=True):
        p = out_dir / f"job.{_host_token(h)}.fio"
        extra = ""
        if h.is_socket:
            extra = "per_job_logs=0\n"
            _socket_log_dir(h, out_dir).mkdir(parents=True, exist_ok=True)
        head = (f"; added by storagebench: per-host IOPS log in Unix time, for the client overlap check\n"
                f"[global]\nwrite_iops_log={span_log_prefix(h)}\nlog_avg_msec={int(msec)}\nlog_unix_epoch=1\n"
                f"{extra}\n")
        p.write_text(head + j.read_text())
        out.append(p)
    return out


def _collect_socket_span_logs(hosts: list[Host], out_dir: Path) -> None:
    """Move each socket server's span log to ``<prefix>_iops.0.log.sock`` and remove the directories
    :func:`_with_span_logs` made for it (empty ones only, exact names)."""
    for h in hosts:
        if not h.is_socket:
            continue
        top = out_dir / f"{span_log_prefix(h)}_iops.log."
        log = _socket_log_dir(h, out_dir) / Path(h.address).name
        with contextlib.suppress(OSError):
            if log.is_file() and not log.is_symlink():
                log.replace(out_dir / f"{span_log_prefix(h)}_iops.0.log.sock")
        d = _socket_log_dir(h, out_dir)
        while d != out_dir and (d == top or top in d.parents):
            try:
                d.rmdir()
            except OSError:
                break
            d = d.parent


def read_span_logs(run_dir, hosts: Sequence["str | Host"], run_id: str = "") -> "pd.DataFrame":
    """The span logs of a :func:`run_clients` run as ``timeseries`` rows, one host each.

    Parameters
    ----------
    run_dir : path
        Directory holding the client's output (where the logs were written).
    hosts : sequence of str or Host
    run_id : str
        ``run_id`` column value.

    Returns
    -------
    pandas.DataFrame
        ``timeseries`` columns (``t_s`` in Unix s, ``metric == "iops"``) from
        :func:`storagebench.ingest.fiolog.parse_fio_log`; empty when there are no span logs.
    """

    frames = []
    for h in (parse_host(x) for x in hosts):
        prefix = span_log_prefix(h)
        for f in sorted(Path(run_dir).glob(f"{prefix}_iops.*.log.*")):
            if not f.is_file():
                continue
            name = f.name[: f.name.index(".log.") + 4]  # strip the client's ".<address>" suffix
            frames.append(parse_fio_log(Path(run_dir) / name, run_id=run_id, host=h.label, data=f.read_bytes()))
    if not frames:
        return empty("timeseries")
    return pd.concat(frames, ignore_index=True)


def client_command(jobfile, hosts: Sequence["str | Host"], output_path, fio_bin: str = "fio") -> list[str]:
    """The fio command line for a client/server run (one ``--client=HOST JOBFILE`` pair per host).

    Parameters
    ----------
    jobfile : path, sequence of paths, or mapping ``host -> path``
        One job file for all hosts, or one per host.
    hosts : sequence of str or Host
    output_path : path
        fio ``--output=`` (json+).
    """
    hs = [parse_host(h) for h in hosts]
    if not hs:
        raise HostError("hosts must name at least one fio server, got []")
    labels = [h.label for h in hs]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise HostError(f"hosts must be distinct, got {dup} more than once")
    cmd = [find_fio(fio_bin), "--output-format=json+", f"--output={output_path}"]
    for h, j in zip(hs, _jobfiles(jobfile, hs), strict=True):
        cmd += [f"--client={h.fio_arg}", str(j)]
    return cmd


def read_client_output(path) -> tuple[dict | None, str]:
    """Split a client/server ``--output`` file into its JSON document and the text before it.

    Returns
    -------
    (dict or None, str)
        The parsed JSON (``None`` when there is none or it is truncated) and the leading text
        (``<hostname>`` job lines and client messages).
    """
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return None, ""
    m = re.search(rb"^\{\s*$", raw, flags=re.M)
    if m is None:
        return None, raw.decode(errors="replace")
    head, body = raw[: m.start()].decode(errors="replace"), raw[m.start():]
    end = body.rfind(b"}")
    tail = body[end + 1:].decode(errors="replace") if end >= 0 else ""
    try:
        doc = orjson.loads(body[: end + 1])
    except orjson.JSONDecodeError:
        return None, head + tail
    return doc, head + tail


def _host_matches(name: str, h: Host) -> bool:
    return name in (h.address, h.label, f"{h.address},{h.port}", h.fio_arg)  # a socket: its path


def _versions(hosts: list[Host], fio_bin: str, timeout_s: float) -> dict[str, str]:
    todo = [h for h in hosts if (fio_bin, h.label) not in _VERSION_CACHE]
    if todo:
        got = server_versions(todo, fio_bin, timeout_s)
        for h in todo:
            _VERSION_CACHE[(fio_bin, h.label)] = got[h.label]
    return {h.label: _VERSION_CACHE[(fio_bin, h.label)] for h in hosts}


def run_clients(jobfile, hosts, output_path, stderr_path, timeout_s, fio_bin="fio", *,
                check_version: bool = True, reuse_versions: bool = True,
                span_log_msec: int | None = 50, probe_timeout_s: float = 20.0,
                record_path=None) -> ClientRunResult:
    """Run one point on several fio servers at once and check that every server reported.

    Runs ``fio --output-format=json+ --output=OUTPUT --client=H1 JOB1 --client=H2 JOB2 ...``
    through :func:`storagebench.fio.process.spawn` (a session of its own, the parent-death
    signal and the watchdog: the client dies with a killed sweep); on timeout or Ctrl-C the
    client's processes are stopped. The ``--output=OUTPUT`` argument tells them apart.

    Parameters
    ----------
    jobfile : path, sequence of paths, or mapping ``"host:port" -> path``
        One job file for every server, or one per server (fio accepts a job file per
        ``--client``; use it to give each server its own ``directory=``/``filename=``).
    hosts : sequence of str or Host
        Servers (``host[,port]``, ``host:port`` or :class:`~storagebench.fio.hosts.Host`).
    output_path : path
        fio's JSON+ output file (client messages and ``<hostname>`` lines precede the JSON).
    stderr_path : path
        fio's stdout and stderr.
    timeout_s : float
        Seconds before the client is killed (``None`` waits forever).
    fio_bin : str
        Controller's fio executable.
    check_version : bool
        Probe each server's fio version first and refuse a mismatch with the controller's
        (fio client/server silently misbehaves across versions). Default True.
    reuse_versions : bool
        Reuse a version probed earlier in this process for the same ``host:port`` (a probe costs
        about 1 s). Default True.
    span_log_msec : int or None
        Also log each server's IOPS every ``span_log_msec`` ms in Unix time (``write_iops_log``,
        ``log_avg_msec``, ``log_unix_epoch=1`` in a leading ``[global]`` of per-host copies of the
        job files, written next to ``output_path`` as ``job.<address>-<port>.fio``), so that
        :func:`read_span_logs` + :func:`storagebench.aggregate.client_overlap` can check that the
        clients ran at the same time. ``None`` runs the job files as given. A socket server's
        log is ``<prefix>_iops.0.log.sock`` (one job's; see ``_with_span_logs``).
    probe_timeout_s : float
        Seconds a server gets to answer the version probe (not part of ``timeout_s``).
    record_path : path, optional
        Keep the client's process record there while it runs
        (:func:`storagebench.fio.process.spawn`).

    Returns
    -------
    ClientRunResult
        Command, exit status, server versions, timing; :meth:`ClientRunResult.provenance`.

    Raises
    ------
    HostError
        A server is unreachable, runs another fio version, or died / disconnected during the run.
        ``exc.hosts`` lists the ``host:port`` of the servers at fault and ``exc.output_path`` the
        output, which keeps the results of the servers that finished.
    FioError
        The client timed out (``returncode`` None), fio failed for another reason, or wrote no
        usable JSON.
    FioNotFoundError
        ``fio_bin`` is not installed.
    """
    hs = [parse_host(h) for h in hosts] if not isinstance(hosts, (str, Host)) else [parse_host(hosts)]
    output_path, stderr_path = Path(output_path), Path(stderr_path)
    cmd = client_command(jobfile, hs, output_path, fio_bin)  # validates hosts and job files
    if span_log_msec:
        files = _with_span_logs(_jobfiles(jobfile, hs), hs, output_path.parent, span_log_msec)
        cmd = client_command(files, hs, output_path, fio_bin)
    client_version = fio_version(fio_bin)
    versions: dict[str, str] = {}
    if check_version:
        if not reuse_versions:
            for h in hs:
                _VERSION_CACHE.pop((fio_bin, h.label), None)
        versions = _versions(hs, fio_bin, probe_timeout_s)
        check_versions(versions, client_version)

    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    with open(stderr_path, "wb") as err:
        fp = process.spawn(cmd, marker=f"--output={output_path}", stdout=err, stderr=subprocess.STDOUT,
                           cwd=output_path.parent, record_path=record_path)
        try:
            with fp:  # any exception (KeyboardInterrupt, SystemExit): the client is stopped
                try:
                    rc = fp.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    fp.stop()
                    raise FioError(f"fio client timed out after {timeout_s} s on hosts "
                                   f"{[h.label for h in hs]}; killed", returncode=None,
                                   stderr=stderr_path.read_text(errors="replace")) from None
        finally:
            if span_log_msec:
                _collect_socket_span_logs(hs, output_path.parent)
    elapsed = time.monotonic() - t0

    doc, text = read_client_output(output_path)
    errtext = stderr_path.read_text(errors="replace")
    messages = [ln.strip() for ln in (text + "\n" + errtext).splitlines()
                if ln.strip() and not ln.startswith("<")]
    reported: set[str] = set()
    job_errors: dict[str, int] = {}
    for cs in (doc or {}).get("client_stats", []):
        if cs.get("jobname") == "All clients":
            continue
        label = host_label(cs.get("hostname"), cs.get("port"))  # the rule ingest uses
        reported.add(label)
        if cs.get("error"):
            job_errors[label] = int(cs["error"])
    named: set[str] = set()
    for line in messages:
        for rx in _HOST_MESSAGES:
            m = rx.search(line)
            if m:
                named |= {h.label for h in hs if _host_matches(m["host"], h)}
    missing = [h.label for h in hs if h.label not in reported]
    # A host named in a message that also reported is fine (e.g. a late disconnect after stats).
    at_fault = missing or sorted(set(job_errors) | (named - reported))
    if missing:
        why = "; ".join(m for m in messages if any(rx.search(m) for rx in _HOST_MESSAGES)) or "no stats received"
        raise host_error(
            f"fio server(s) {missing} did not complete the run (unreachable or died mid-run): {why}"
            + (f"; results of {sorted(reported)} are kept in {output_path}" if reported else ""),
            missing, output_path)
    if job_errors:
        detail = ", ".join(f"{h} error={e} ({os.strerror(e)})" for h, e in sorted(job_errors.items()))
        raise host_error(f"fio job failed on server(s): {detail}", at_fault, output_path)
    if doc is None:
        raise FioError(f"fio client wrote no JSON to {output_path} (exit status {rc}): "
                       f"{' / '.join(messages[-3:]) or 'no message'}", returncode=rc, stderr=errtext)
    if rc != 0:
        raise FioError(f"fio client exited with status {rc}: {' / '.join(messages[-3:]) or 'no message'}",
                       returncode=rc, stderr=errtext)
    return ClientRunResult(cmd, rc, [h.label for h in hs], versions, client_version, started,
                           elapsed, output_path, stderr_path, messages)

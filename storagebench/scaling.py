"""Scale-out studies: one study whose ``clients`` factor runs each point on ``hosts[:clients]``.

A scale-out study is an ordinary :class:`~storagebench._study.Study` with a ``clients`` factor: the
runner (:func:`storagebench._runner.run_study`) runs each point through fio's client/server mode
(:func:`storagebench._clientserver.run_clients`), the client counts interleaved with every other
factor in one seeded random order, stored in one study directory and resumed as one. This module
sets such a study up for given hosts (:func:`scaling_study`), runs it on them or on test fio servers
started here (:func:`measure_scaling`, :func:`run_scaling`), and reads it back with each host's span
log (:func:`load_scaling`). It sits above the runner; :mod:`storagebench._clientserver` (one
``fio --client`` run) sits below it and imports nothing of it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from ._clientserver import read_span_logs
from ._inputs import completed_runs
from ._runner import run_study
from ._study import CLIENTS_FACTOR, Study, load_study
from .errors import StudyError
from .fio.hosts import Host, parse_host, parse_hostfile
from .ingest import IngestResult, read_study_tables
from .records import Provenance
from .servers import default_socket_root, fio_servers
from .show import markdown

__all__ = ["scaling_study", "run_scaling", "load_scaling", "measure_scaling", "describe_measurement"]


def scaling_study(study, hosts: Sequence["str | Host"] | None = None, *, overrides: Mapping | None = None,
                  levels: Mapping | None = None):
    """A scale-out study (``clients`` factor) set up to run on ``hosts``, as ONE study.

    The ``clients`` factor is native to :class:`~storagebench._study.Study`: level ``n`` runs
    on ``hosts[:n]``, and the client counts are interleaved with every other factor in one
    seeded random run order (so drift over time is not confounded with load), stored in one
    study directory and resumed as one.

    Parameters
    ----------
    study : storagebench._study.Study or path
        A spec with a ``clients`` factor (``data/studies/scaling.yaml``).
    hosts : sequence of str or Host, optional
        fio servers, at least as many as the largest ``clients`` level; they replace the spec's
        ``hosts`` (only the first ``max(clients)`` are kept, so spare hosts do not change the
        spec). ``None`` keeps the spec's hosts.
    overrides : mapping, optional
        Spec keys to replace (``runtime``, ``ramp_time``, ``repetitions``, ``size`` ...), e.g. for a
        short demonstration run of the same design; validated like the YAML.
    levels : mapping, optional
        Factor name -> levels to keep (``{"pattern": ["4k_randread"], "clients": [1, 2]}``).

    Returns
    -------
    storagebench._study.Study

    Raises
    ------
    StudyError
        No ``clients`` factor, a level that is not a positive int, more clients than hosts, a
        level in ``levels`` that the study does not have, a bad override.
    """
    if not isinstance(study, Study):
        study = load_study(study)
    spec = {**study.spec_dict(), **dict(overrides or {})}
    factors = dict(spec.get("factors", {}))
    if CLIENTS_FACTOR not in factors:
        raise StudyError(f"study {study.name!r} has no factor {CLIENTS_FACTOR!r} (client counts); "
                         f"its factors are {sorted(factors)}")
    for name, keep in dict(levels or {}).items():
        if name not in factors:
            raise StudyError(f"levels: study {study.name!r} has no factor {name!r}; it has {sorted(factors)}")
        have = [lv["name"] if isinstance(lv, dict) else lv for lv in factors[name]]
        keep = list(keep)
        unknown = [k for k in keep if k not in have]
        if unknown or not keep:
            raise StudyError(f"levels.{name}: must be a non-empty subset of {have}, got {keep}")
        factors[name] = [lv for lv, h in zip(factors[name], have, strict=True) if h in keep]
    spec["factors"] = factors
    if hosts is not None:
        hs = [parse_host(h).fio_arg for h in hosts]
        counts = factors[CLIENTS_FACTOR]
        top = max((n for n in counts if isinstance(n, int)), default=len(hs))
        if top > len(hs):
            raise StudyError(f"factors.{CLIENTS_FACTOR}: level {top} needs {top} hosts, got {len(hs)} ({hs})")
        spec["hosts"] = hs[:top]
    return load_study(spec)


def run_scaling(study, hosts: Sequence["str | Host"] | None = None, out_dir="results", *,
                overrides: Mapping | None = None, levels: Mapping | None = None, **run_kwargs):
    """Run a scale-out study through the runner: one study, client counts in random order.

    Parameters
    ----------
    study : Study or path
    hosts : sequence of str or Host, optional
        fio servers (``None``: the spec's ``hosts``).
    out_dir : path
        Results root; the runs go to ``<out_dir>/<name>/raw/<run_id>/``.
    overrides, levels
        As in :func:`scaling_study`.
    **run_kwargs
        Passed to :func:`~storagebench._runner.run_study` (``progress``, ``timeout_s``, ``fio_bin`` ...).

    Returns
    -------
    storagebench._runner.SweepResult
        ``.root`` for :func:`load_scaling`.

    Raises
    ------
    StudyError
        See :func:`scaling_study` and :func:`~storagebench._runner.run_study`.
    """
    return run_study(scaling_study(study, hosts, overrides=overrides, levels=levels), out_dir=out_dir,
                     **run_kwargs)


def load_scaling(root):
    """Ingest a scale-out study and its per-host span logs.

    Parameters
    ----------
    root : path, SweepResult, or sequence of them
        The study directory ``<out_dir>/<name>`` (``SweepResult.root``); several are concatenated.

    Returns
    -------
    (storagebench.ingest.IngestResult, pandas.DataFrame)
        The tables (:func:`storagebench.ingest.read_study_tables`: ``runs`` has the ``clients`` column,
        from ``point.json``) and the span-log
        ``timeseries`` rows (Unix ``t_s``) of every run, host by host (the hosts each run used,
        from ``provenance.json``), for :func:`storagebench.aggregate.client_spans`.
    """
    def _dir(r) -> Path:  # a SweepResult has .raw_dir (a Path's own .root is its anchor, not this)
        return Path(r.root) if hasattr(r, "raw_dir") else Path(r)

    roots = [_dir(root)] if isinstance(root, (str, os.PathLike)) or hasattr(root, "raw_dir") \
        else [_dir(r) for r in root]
    results, spans = [], []
    for r in roots:
        results.append(read_study_tables(r))  # tidy/ as `storagebench report` wrote it, or raw/ ingested
        for run_dir in (r / "raw" / name for name in completed_runs(r / "raw")):
            prov_path = run_dir / "provenance.json"
            if not prov_path.exists():
                continue
            hosts = list(Provenance.read(prov_path, root=r).hosts)
            spans.append(read_span_logs(run_dir, hosts, run_id=run_dir.name))
    if len(results) == 1:
        merged = results[0]
    else:
        cat = {t: pd.concat([getattr(x, t) for x in results], ignore_index=True)
               for t in ("runs", "histograms", "all_clients", "timeseries")}
        merged = IngestResult(**cat, errors=[e for x in results for e in x.errors],
                              files=sum(x.files for x in results))
    ts = pd.concat(spans, ignore_index=True) if spans else pd.DataFrame(columns=["run_id", "host", "t_s"])
    return merged, ts


def measure_scaling(study, hosts: "str | Sequence[str] | None" = None, out_dir="results", *,
                    test_hosts: int = 4, test_mode: str = "socket", test_port: int | None = 18760,
                    test_insecure_tcp: bool = False, runtime: float | None = None, ramp_time: float | None = None,
                    repetitions: int | None = None, patterns: Sequence[str] = (), max_clients: int | None = None,
                    progress: bool = False,
                    **run_kwargs):
    """Measure a scale-out study on given hosts, or on test fio servers started (and stopped) here.

    The notebook entry point of ``notebooks/studies/scaling.ipynb`` and of ``storagebench scaling``.
    The whole design (every client count x every other factor x repetitions) is one study in
    one seeded random order (:func:`run_scaling`).

    Parameters
    ----------
    study : Study or path
        A spec with a ``clients`` factor (``data/studies/scaling.yaml``).
    hosts : str, sequence of str, or None
        A fio host file, or a list of ``host[,port]``; ``None``/``""`` starts ``test_hosts`` test
        servers on this machine (:func:`storagebench.servers.fio_servers`) for the measurement.
    out_dir : path
        Results root.
    test_hosts, test_mode, test_port
        Number and mode of the test servers (:func:`storagebench.servers.fio_servers`):
        ``socket`` (default; owner-only Unix sockets), ``loopback`` (TCP on 127.0.0.1, reachable
        by every local account) or ``netns`` (root; root-only through an nftables guard), and the
        first port of loopback servers. The hosts, hence the stored spec, stay the same from one
        call to the next, so an interrupted measurement resumes: socket mode puts the sockets in
        ``<default_socket_root()>/scaling-<hash of out_dir and study name>/``, loopback mode uses
        ports from ``test_port`` (``None``: free ports, new each call).
    test_insecure_tcp : bool
        netns mode without its nftables guard (see ``fio_servers(insecure_tcp=...)``).
    runtime, ramp_time, repetitions
        Overrides of the spec (s, s, count); ``None`` keeps the spec's (so do the earlier spellings ``0`` /
        a negative ramp time / ``0``).
    patterns : sequence of str
        Levels of ``pattern`` to run; empty runs all.
    max_clients : int or None
        Run only client counts up to this; ``None`` (or ``0``) runs all levels.
    progress : bool
        Runner progress bar.

    Returns
    -------
    storagebench._runner.SweepResult
        ``.root`` for :func:`load_scaling`.

    Raises
    ------
    StudyError
        Bad spec, override or level, or more clients than hosts (checked before any server starts).
    HostError
        A test server did not start.
    """
    spec = study if isinstance(study, Study) else load_study(study)
    choice = _Choice(runtime, ramp_time, repetitions, tuple(patterns), max_clients)
    kw = dict(overrides=choice.overrides(), levels=choice.levels(spec))
    if hosts:
        hs = parse_hostfile(hosts) if isinstance(hosts, (str, os.PathLike)) else [parse_host(h) for h in hosts]
        return run_scaling(spec, hs, out_dir, progress=progress, **kw, **run_kwargs)
    checked = scaling_study(spec, None, **kw)  # every bad input is refused before servers start
    servers = _TestServers(test_hosts, test_mode, test_port, test_insecure_tcp)
    return _on_test_servers(checked, servers, out_dir, progress=progress, **run_kwargs)


@dataclass(frozen=True)
class _Choice:
    """What :func:`measure_scaling` changes of the spec: ``runtime``, ``ramp_time``, ``repetitions`` (``None`` keeps
    the spec's; so do the older ``0`` / a negative ramp / ``0``), the ``pattern`` levels to run (empty: all) and the
    largest client count (``None`` or 0: all)."""

    runtime: float | None
    ramp_time: float | None
    repetitions: int | None
    patterns: tuple[str, ...]
    max_clients: int | None

    def overrides(self) -> dict:
        """The spec's values overridden, for :func:`scaling_study`."""
        overrides: dict = {}
        if self.runtime:
            overrides["runtime"] = self.runtime
        if self.ramp_time is not None and self.ramp_time >= 0:
            overrides["ramp_time"] = self.ramp_time
        if self.repetitions:
            overrides["repetitions"] = self.repetitions
        return overrides

    def levels(self, spec: Study) -> dict:
        """The levels kept, for :func:`scaling_study`."""
        levels: dict = {}
        if self.patterns:
            levels["pattern"] = list(self.patterns)
        if self.max_clients:
            levels[CLIENTS_FACTOR] = [n for n in spec.factors.get(CLIENTS_FACTOR, []) if n <= self.max_clients]
        return levels


@dataclass(frozen=True)
class _TestServers:
    """The test fio servers :func:`measure_scaling` starts when it is given no hosts (``fio_servers``' ``n``,
    ``mode``, ``port``, ``insecure_tcp``)."""

    n: int
    mode: str
    port: int | None
    insecure_tcp: bool


def _on_test_servers(checked: Study, servers: _TestServers, out_dir, *, progress: bool, **run_kwargs):
    """:func:`run_scaling` of ``checked`` on test servers started for it, stopped after (also on error)."""
    top = max(checked.factors[CLIENTS_FACTOR])
    if top > servers.n:
        raise StudyError(f"factors.{CLIENTS_FACTOR}: level {top} needs {top} hosts, but test_hosts is {servers.n}")
    socket_dir = None
    if servers.mode == "socket":
        key = f"{Path(out_dir).resolve()}\0{checked.name}".encode()
        socket_dir = default_socket_root() / f"scaling-{hashlib.sha256(key).hexdigest()[:16]}"
    with fio_servers(servers.n, servers.mode, port=servers.port if servers.mode == "loopback" else None,
                     socket_dir=socket_dir, insecure_tcp=servers.insecure_tcp) as started:
        return run_scaling(checked, [s.host for s in started], out_dir, progress=progress, **run_kwargs)


def describe_measurement(res: IngestResult, spec: Study) -> str:
    """What was run, in words: the runs, their order and the fio servers each used, for a write-up.

    Parameters
    ----------
    res : storagebench.ingest.IngestResult
        :func:`load_scaling` of the study (``runs`` with ``clients``, ``host`` and ``run_order``).
    spec : Study
        The study as run (its ``study.yaml``): runtime, ramp time, repetitions.

    Returns
    -------
    storagebench.show.MarkdownBlock
        One paragraph, every value shown as plain text (:func:`storagebench.show.markdown`).

    Raises
    ------
    StudyError
        A run used another number of fio servers than its ``clients`` level (the message names the runs):
        its numbers would be those of another client count.
    """
    per_run = res.runs.groupby("run_id").agg(clients=("clients", "first"), hosts=("host", "nunique"),
                                             run_order=("run_order", "first")).sort_values("run_order")
    wrong = per_run[per_run["clients"] != per_run["hosts"]]
    if len(wrong):
        runs = ", ".join(f"{r} ({w.hosts} hosts for clients={w.clients})" for r, w in wrong.head(5).iterrows())
        raise StudyError(f"{len(wrong)} run(s) did not use `clients` fio servers: {runs}; every run of level n "
                         "must run on the first n hosts")
    servers = sorted(res.runs["host"].unique())
    return markdown(
        "As run: {runs} runs of {runtime:g} s{ramp}, clients {clients} x patterns {patterns} x {reps} repetitions, in "
        "one seeded random order (client counts in run order: {order}); every run used exactly `clients` of the "
        "{n_servers} fio servers ({servers}). {files} fio output files ingested, {errors} not ingested.",
        runs=len(per_run), runtime=spec.runtime,
        ramp=f" after {spec.ramp_time:g} s of ramp-up" if spec.ramp_time else " (no ramp-up)",
        clients=", ".join(map(str, sorted(res.runs["clients"].unique()))),
        patterns=", ".join(sorted(res.runs["pattern"].unique())), reps=spec.repetitions,
        order=", ".join(map(str, per_run["clients"])), n_servers=len(servers),
        servers=", ".join(h.rsplit("/", 1)[-1] for h in servers), files=res.files, errors=len(res.errors))

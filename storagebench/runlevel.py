"""The run-level table: ``runs`` rows combined into one row per run x host x direction, fio's way.

Every "one row per run" of storagebench comes from :func:`run_totals` (ingest writes it once, as
``tidy/run_totals.parquet``); stats, figures, testbeds and notebooks select from it
(:func:`select`, :func:`per_run`) and never combine rows themselves.

**fio's rule.** fio combines jobs with one function, ``sum_thread_stats`` (``stat.c``), for
``group_reporting``, for ``unified_rw_reporting=mixed`` (``gen_mixed_ddir_stats_from_ts``: the
directions of a job summed into one ``mixed`` block) and for a client's ``All clients`` entry
(``client.c`` ``handle_ts``). Per direction it does:

* ``io_bytes`` and ``total_io_u`` (completed I/Os) add up; ``runtime`` is the longest one;
* IOPS and bandwidth are then ``1000 * total_io_u / runtime_ms`` and ``1000 * io_bytes / runtime_ms``
  (``add_ddir_status_json``): the pooled I/Os over the longest runtime, which is *not* the sum of
  the jobs' IOPS when their runtimes differ (when they are equal it is, and the sum of the rows' own
  IOPS is used: the directions of one job, DiskSPD's one test time);
* latency statistics (``lat``, ``clat``, ``slat``) merge by sample count (``sum_stat``, the parallel
  algorithm of Chan, Golub & LeVeque 1979): mean ``(m1 n1 + m2 n2) / (n1 + n2)``, sum of squares
  ``S = S1 + S2 + (m1 - m2)**2 n1 n2 / (n1 + n2)``, printed SD ``sqrt(S / (N - 1))`` (``calc_lat``);
  min and max are the min and max; a stat without samples is skipped;
* percentiles come from the summed ``io_u_plat`` histogram (``calc_clat_percentiles``): here the
  merged json+ bins (:mod:`storagebench._histogram`), never an average of percentiles;
* CPU is ``usr_time`` summed over ``total_run_time`` summed: the runtime-weighted mean of the jobs'
  ``usr_cpu``;
* the group's ``error`` is the first non-zero job error.

The weights are the completed I/Os (``total_ios``; fio's ``clat_ns.N`` and ``lat_ns.N`` equal it).
Where the counts are unknown (fio 2.1 prints no ``total_ios``: the count is ``iops x runtime``; a
published table has neither), the rows are taken to share one runtime: IOPS and bandwidth add up and
means are weighted by IOPS (``combined_by == "IOPS"``). A single row is passed through unchanged
(``combined_by == "as reported"``): DiskSPD and Iometer rows are run totals already.

**Worked example** (the gold check of the tests): one run of two jobs, 1000 IOPS for 10 s at 1 ms
and 1000 IOPS for 1 s at 10 ms. fio's group is 11,000 I/Os over 10 s = 1,100 IOPS with a mean
latency of (10,000 x 1 + 1,000 x 10) / 11,000 = **1.818 ms**; weighting the means by IOPS would give
5.500 ms, which no fio output ever shows.

**The table** (schema :data:`storagebench.schema.RUN_TOTALS`). For each run:

* a row per host x direction (the host's jobs combined);
* for a host with several directions (a ``randrw`` job), a row with ``direction == "mixed"`` (fio's
  name for the directions reported as one): the run's total, whose IOPS is the sum over directions;
* for a run on several hosts (client/server), the same rows with ``host == "all hosts"``: the
  cluster total, which is what fio prints as ``All clients``.

A row that already covers everything is not repeated: a one-host run has no ``all hosts`` rows, a
single-direction run no ``mixed`` row. The flags ``all_hosts`` and ``all_directions`` say what a row
covers, so the run-level row of every run is ``all_hosts & all_directions`` (:func:`per_run`).
``error``, ``n_jobs_error`` and ``partial`` flag a run with a failed or killed job: its numbers are
kept, never silently averaged with the good jobs, and figures leave it out (:func:`per_run`,
``completed=True``).

Jobs are taken to run at the same time (one fio group): a run whose jobs ran one after the other
(``stonewall``) is combined as if they overlapped, which fio itself would report as several groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from ._runcombine import (
    _CONSUMED,
    _DIR_RANK,
    _KEYS,
    _METRICS,
    _Bins,
    _codes,
    _combine,
    _distinct,
    _Level,
    _prepared,
    _repeated,
)
from .errors import SchemaError
from .schema import ALL_DIRECTIONS, ALL_HOSTS, DIRECTIONS, RUN_TOTALS

__all__ = ["run_totals", "select", "per_run", "read_run_totals", "is_run_totals"]


def is_run_totals(df: pd.DataFrame) -> bool:
    """True when ``df`` is a run-level table (it has the ``all_hosts``/``all_directions`` flags)."""
    return "all_hosts" in df.columns and "all_directions" in df.columns


def run_totals(runs: pd.DataFrame, histograms: pd.DataFrame | None = None, *,
               _blocks: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """The run-level table of ``runs``: fio's rule for combining jobs, directions and hosts.

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs`` rows (schema :data:`storagebench.schema.RUNS`; at least ``run_id`` and ``iops``:
        missing columns are unknown, as the schema says -- a frame without ``job_index`` has one job
        per row, without ``direction`` one ``mixed`` direction). Study factor columns are kept where
        they are constant within a row's group.
    histograms : pandas.DataFrame, optional
        ``histograms`` rows of the same runs (json+ bins). A combined row's ``clat_p*_ns`` come from
        its rows' merged bins; without them (or when a row with I/O has none) they are NaN, with a
        ``note``. A single row keeps its own percentiles.

    Returns
    -------
    pandas.DataFrame
        The ``run_totals`` table (:data:`storagebench.schema.RUN_TOTALS`, in schema dtypes, then the
        study factor columns): per run, one row per host x direction, a ``mixed`` row per host with
        several directions, and ``all hosts`` rows for a run on several hosts. Units: ``iops`` 1/s,
        ``bw_bytes_per_s`` bytes/s, ``runtime_s`` s, latencies ns, CPU %. Sorted by run (first
        appearance), host (``all hosts`` last) and direction (read, write, trim, mixed).

    Raises
    ------
    SchemaError
        ``runs`` lacks ``run_id`` or ``iops``, a column cannot be cast to its schema dtype, or
        ``histograms`` lacks a key column.

    Other Parameters
    ----------------
    _blocks : (array, array), optional
        Internal (ingest): the ``runs`` row of each block of consecutive ``histograms`` rows and the
        blocks' lengths, which ingest knows; otherwise they are found from the key columns.

    Notes
    -----
    fio ``stat.c``: ``sum_thread_stats``, ``sum_stat``, ``calc_lat``, ``calc_clat_percentiles``,
    ``add_ddir_status_json``; ``client.c``: ``handle_ts`` ("All clients"). See the module docstring.
    """
    df = _prepared(runs)
    extra = [c for c in df.columns if c not in _CONSUMED]
    n = len(df)
    if n == 0:
        out = schema.empty("run_totals")
        for c in extra:
            out[c] = pd.Series(dtype=df[c].dtype)
        return out
    factorized = {k: pd.factorize(df[k], use_na_sentinel=False) for k in _KEYS}
    key = {k: codes.astype(np.int64) for k, (codes, _) in factorized.items()}
    run_code = key["run_id"]
    host_code = _codes(run_code, key["host"])
    arrays = _row_arrays(df, key, host_code)
    l1 = _codes(host_code, key["direction"])
    l3 = _codes(run_code, key["direction"])
    dirs_per_host = _distinct(host_code, l1)
    hosts_per_run = _distinct(run_code, host_code)
    dirs_per_run = _distinct(run_code, l3)
    rows = np.arange(n, dtype=np.int64)
    first_row = np.full(int(run_code.max()) + 1, n, dtype=np.int64)
    first_row[run_code[::-1]] = rows[::-1]
    host_rank = host_code - host_code[first_row[run_code]]  # a run's hosts number from its first row's host
    other = len(_DIR_RANK)
    ranks = [_DIR_RANK.get(d, other) if isinstance(d, str) else other for d in factorized["direction"][1]]
    dir_rank = np.array(ranks, dtype=np.int64)[key["direction"]]

    hist = None
    if histograms is not None:
        miss = [c for c in (*_KEYS, "bin_ns", "count") if c not in histograms.columns]
        if miss:
            raise SchemaError(f"histograms is missing columns {miss}")
        combines = int(l1.max()) + 1 < n or bool((hosts_per_run > 1).any() or (dirs_per_host > 1).any())
        # only combined rows need bins: a table of one-row groups never reads them
        hist = _Bins(df, histograms, _blocks) if combines else _Bins.none(n)
    parts = []
    # (rows in the level, their group codes, host label, direction label, all_hosts, all_directions)
    levels = [
        (rows, l1, None, None, hosts_per_run == 1, dirs_per_host == 1, False, False),
        (rows[dirs_per_host > 1], host_code[dirs_per_host > 1], None, ALL_DIRECTIONS, hosts_per_run == 1, None,
         False, True),
        (rows[hosts_per_run > 1], l3[hosts_per_run > 1], ALL_HOSTS, None, None, dirs_per_run == 1, True, False),
        (rows[(hosts_per_run > 1) & (dirs_per_run > 1)], run_code[(hosts_per_run > 1) & (dirs_per_run > 1)],
         ALL_HOSTS, ALL_DIRECTIONS, None, None, True, True),
    ]
    run_ids = df["run_id"].to_numpy(dtype=object, na_value=None)
    host_names = df["host"].to_numpy(dtype=object, na_value=None)
    dir_names = df["direction"].to_numpy(dtype=object, na_value=None)
    for lrows, lcodes, host, direction, all_h, all_d, cluster, mixed in levels:
        if not len(lrows):
            continue
        lv = _Level(lrows, lcodes)
        cols = _combine(df, lv, arrays, hist, extra)
        f = lv.first
        cols["run_id"] = run_ids[f]
        cols["host"] = host_names[f] if host is None else np.full(lv.n_groups, host, object)
        cols["direction"] = dir_names[f] if direction is None else np.full(lv.n_groups, direction, object)
        cols["all_hosts"] = np.ones(lv.n_groups, bool) if all_h is None else all_h[f]
        cols["all_directions"] = np.ones(lv.n_groups, bool) if all_d is None else all_d[f]
        cols["n_hosts"] = lv.add(lv.first_of(lv.take(host_code)).astype(np.int64))
        cols["n_directions"] = lv.add(lv.first_of(lv.take(key["direction"])).astype(np.int64))
        cols["_k_run"] = run_code[f]
        cols["_k_host"] = np.full(lv.n_groups, np.iinfo(np.int64).max) if cluster else host_rank[f]
        cols["_k_dir"] = np.full(lv.n_groups, _DIR_RANK[ALL_DIRECTIONS]) if mixed else dir_rank[f]
        parts.append(cols)
    return _frame(parts, extra)


def _row_arrays(df: pd.DataFrame, key: dict[str, np.ndarray], host_code: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays the combine rules read, by name: every metric column in its dtype, the counts behind the rates
    (as reported, else rate x runtime), and each row's job, job section, runtime and outstanding I/Os."""
    iops = df["iops"].to_numpy(dtype=float)
    rt = df["runtime_s"].to_numpy(dtype=float)
    tios = df["total_ios"].to_numpy(dtype=np.int64)
    iob = df["io_bytes"].to_numpy(dtype=np.int64)
    bw = df["bw_bytes_per_s"].to_numpy(dtype=float)
    rt_ok = np.isfinite(rt) & (rt > 0)
    with np.errstate(invalid="ignore"):
        ios_est = np.where(tios >= 0, tios.astype(float), np.where(rt_ok, iops * rt, np.nan))
        bytes_est = np.where(iob >= 0, iob.astype(float), np.where(rt_ok, bw * rt, np.nan))
    section_id = _codes(host_code, key["job"])
    job_id = _codes(section_id, key["job_index"])
    job_runtime = np.full(int(job_id.max()) + 1, np.nan)
    np.fmax.at(job_runtime, job_id, rt)
    job_runtime = job_runtime[job_id]
    depth = df["iodepth"].to_numpy(dtype=float)
    nj = df["numjobs"].to_numpy(dtype=float)
    oio = np.where((depth > 0) & (nj > 0), depth * nj, np.nan)
    arrays = {
        # every metric column by name, in its dtype (bool and int ones as they are)
        **{c.name: df[c.name].to_numpy(dtype=float if c.dtype == "float64" else c.dtype) for c in _METRICS},
        "iops": iops, "runtime_s": rt, "bw_bytes_per_s": bw, "total_ios": tios, "io_bytes": iob,
        # the counts behind the rates: as reported, else rate x runtime
        "est:total_ios": ios_est, "est:io_bytes": bytes_est,
        "job_id": job_id, "job_runtime": np.nan_to_num(job_runtime), "section_id": section_id, "oio": oio,
        "dup": _repeated(_codes(job_id, key["direction"])),  # the same job entry key again
    }
    return arrays


def _frame(parts: list[dict[str, Any]], extra: Sequence[str]) -> pd.DataFrame:
    """The run-level table from the columns of each level: sorted by run, host (``all hosts`` last) and
    direction, each column built once in its schema dtype."""
    def cat(name: str) -> np.ndarray:
        return parts[0][name] if len(parts) == 1 else np.concatenate([p[name] for p in parts])

    order = np.lexsort((cat("_k_dir"), cat("_k_host"), cat("_k_run")))
    if np.array_equal(order, np.arange(len(order))):
        order = None
    data: dict[str, Any] = {}
    for c in RUN_TOTALS:
        v = cat(c.name)
        if order is not None:
            v = v[order]
        if c.dtype == "string":
            data[c.name] = pd.array(v, dtype="string")
        elif c.dtype.startswith("datetime64"):
            data[c.name] = pd.to_datetime(np.asarray(v, dtype=np.int64).view("datetime64[ns]"), utc=True) \
                .astype(c.dtype)
        else:
            data[c.name] = np.asarray(v, dtype=c.dtype)
    out = pd.DataFrame(data, copy=False)
    for c in extra:
        v = pd.concat([p[c] for p in parts], ignore_index=True) if len(parts) > 1 else parts[0][c]
        out[c] = (v.take(order) if order is not None else v).reset_index(drop=True)
    return out


# ---- selecting -----------------------------------------------------------------------------------


def select(totals: pd.DataFrame, *, hosts: str = "all", direction: str | None = None) -> pd.DataFrame:
    """Rows of a run-level table at one level.

    Parameters
    ----------
    totals : pandas.DataFrame
        A :func:`run_totals` table.
    hosts : {"all", "each"}
        ``"all"``: the rows covering every host of their run (the cluster total; a one-host run's own
        rows); ``"each"``: one row per host (a run on one host: its rows again).
    direction : str or None
        ``None``: the rows covering every direction (the run's total: IOPS summed over directions);
        ``"each"``: one row per direction as reported; ``"read"``/``"write"``/``"trim"``/``"mixed"``:
        that direction.

    Returns
    -------
    pandas.DataFrame
        The selected rows (one per run with the defaults), index reset.

    Raises
    ------
    SchemaError
        ``totals`` is not a run-level table, or ``hosts``/``direction`` is not an allowed value.
    """
    if not is_run_totals(totals):
        raise SchemaError("select needs a run-level table (storagebench.runlevel.run_totals): it has no "
                          "all_hosts/all_directions columns")
    if hosts == "all":
        keep = totals["all_hosts"].to_numpy(dtype=bool, copy=True)
    elif hosts == "each":
        keep = (totals["host"] != ALL_HOSTS).to_numpy(dtype=bool, copy=True)
    else:
        raise SchemaError(f"hosts must be one of ['all', 'each'], got {hosts!r}")
    if direction is None:
        keep &= totals["all_directions"].to_numpy(dtype=bool)
    elif direction == "each":
        keep &= (totals["n_directions"] == 1).to_numpy(dtype=bool)
    elif direction in (*DIRECTIONS, ALL_DIRECTIONS):
        keep &= (totals["direction"] == direction).to_numpy(dtype=bool)
    else:
        raise SchemaError(f"direction must be one of {[None, 'each', *DIRECTIONS, ALL_DIRECTIONS]}, "
                          f"got {direction!r}")
    return totals[keep].reset_index(drop=True)


def per_run(table: pd.DataFrame, histograms: pd.DataFrame | None = None, *, direction: str | None = None,
            completed: bool = False) -> pd.DataFrame:
    """One row per run: every host (and every direction, or one) combined with fio's rule.

    Parameters
    ----------
    table : pandas.DataFrame
        A ``runs`` table (combined here by :func:`run_totals`) or a run-level table (read from
        ``tidy/run_totals.parquet``: selected, nothing recomputed). A ``runs`` table without
        ``run_id`` has one run per row (a published table).
    histograms : pandas.DataFrame, optional
        With a ``runs`` table: its json+ bins, for the percentiles of combined rows.
    direction : str or None
        ``None``: all directions (a ``randrw`` run's total); ``"read"``/``"write"``/``"trim"``/``"mixed"``:
        that direction only (runs without it have no row).
    completed : bool
        Leave out runs with a job in error (``error != 0``) or killed (``partial``).

    Returns
    -------
    pandas.DataFrame
        The run-level rows (columns of :data:`storagebench.schema.RUN_TOTALS` plus study factors).

    Raises
    ------
    SchemaError
        As :func:`run_totals` and :func:`select`.
    """
    if is_run_totals(table):
        totals = table
    else:
        if "run_id" not in table.columns:
            table = table.assign(run_id=[f"row{i}" for i in range(len(table))])
        totals = run_totals(table, histograms)
    out = select(totals, hosts="all", direction=direction)
    if completed:
        ok = (out["error"] == 0) & (out["n_jobs_error"] == 0) & ~out["partial"].astype(bool)
        out = out[ok.to_numpy(dtype=bool)].reset_index(drop=True)
    return out


def read_run_totals(tidy_dir: str | Any) -> pd.DataFrame:
    """``tidy/run_totals.parquet`` of a study, checked (:func:`storagebench.schema.read_table`).

    A tidy directory of format 0 (written before the run-level table existed) has none: it is
    migrated by combining its ``runs.parquet`` and ``histograms.parquet`` now.

    Parameters
    ----------
    tidy_dir : path
        ``results/<study>/tidy``.

    Returns
    -------
    pandas.DataFrame
        The run-level table.

    Raises
    ------
    SchemaError
        No ``run_totals.parquet`` nor ``runs.parquet`` in ``tidy_dir``, or a file of a newer format.
    """
    d = Path(tidy_dir)
    path = d / "run_totals.parquet"
    if path.exists():
        return schema.read_table(path, "run_totals")
    runs_p = d / "runs.parquet"
    if not runs_p.exists():
        raise SchemaError(f"{d}: no run_totals.parquet or runs.parquet (ingest the study first)")
    runs = schema.read_table(runs_p, "runs")
    hist_p = d / "histograms.parquet"
    hist = schema.read_table(hist_p, "histograms") if hist_p.exists() else None
    out = run_totals(runs, hist)
    out.attrs["storagebench"] = {**runs.attrs.get("storagebench", {}), "table": "run_totals",
                                 "migrated_from": "runs.parquet"}
    return out

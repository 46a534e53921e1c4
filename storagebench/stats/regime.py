"""Which regime a run measured: the medium, or a cache in front of it: :func:`cache_caveats`.

The one rule (its one owner; the testbed write-ups, the demo report and seed 001's HDD table all call
it): a run of **random** I/O whose mean completion latency is physically impossible for the device class
gets the caveat "cache, not medium". Sequential I/O gets none: a rotating medium streams consecutive
sectors without a seek per I/O, so a sub-millisecond sequential read is the platters' transfer rate, not
evidence of a cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd

from ..errors import StatsError
from ..records import DeviceInfo
from ._common import require_columns

#: Mean completion latency below which a rotational device cannot have served a random-I/O run from its
#: medium, ns (1 ms). A rotating disk needs a seek plus on average half a rotation per random I/O: 2 ms at
#: 15,000 rpm, 4.2 ms at 7,200 rpm (30,000 / rpm ms). Half the fastest disk's half revolution leaves room
#: for short seeks. Only for random I/O (:func:`is_random`): a sequential stream needs no seek per I/O and reads at the medium's transfer rate
#: (a 7,200 rpm SATA disk streams ~100-200 MB/s: 4 KiB I/Os every 20-40 µs).
ROTATIONAL_FLOOR_NS = 1_000_000.0
#: The words of the caveat.
CACHE_CAVEAT = "cache, not medium"


def _device(record: Any, what: str) -> DeviceInfo | None:
    """A device record in its typed form (the JSON form is read by :meth:`DeviceInfo.from_json`)."""
    if record is None or isinstance(record, DeviceInfo):
        return record
    if isinstance(record, Mapping):
        return DeviceInfo.from_json(record)
    raise StatsError(f"{what} must be a DeviceInfo, its JSON object or None, got {type(record).__name__}")


#: The keys of a device record's JSON form: a mapping of only these is one record, not run id -> record.
_DEVICE_KEYS = frozenset(f.name for f in fields(DeviceInfo)) - {"extra"}


def is_random(runs: pd.DataFrame) -> pd.Series:
    """Per row: does the run's workload seek, i.e. is it random I/O?

    Random when ``random_pct`` (fio ``percentage_random``) is above 0, or, where it is missing or NaN,
    when ``rw`` names a random pattern (``randread``, ``randwrite``, ``randrw``, ``randtrim``; a joined
    ``rw`` of several jobs counts when any is random). fio applies ``percentage_random`` to random
    patterns only, so a sequential ``rw`` with ``random_pct`` > 0 does not occur in its output; the
    published tables give ``random_pct`` = 100 - %sequential.

    Parameters
    ----------
    runs : pandas.DataFrame
        Rows with ``rw`` (str) and/or ``random_pct`` (%).

    Returns
    -------
    pandas.Series of bool
        Indexed like ``runs``.

    Raises
    ------
    StatsError
        ``runs`` has neither column: whether a run seeks cannot be told.
    """
    has_pct, has_rw = "random_pct" in runs.columns, "rw" in runs.columns
    if not (has_pct or has_rw):
        raise StatsError("runs need an rw or a random_pct column to tell random from sequential I/O (the cache "
                         f"rule is for random I/O only); columns: {sorted(map(str, runs.columns))}")
    pct = (pd.to_numeric(runs["random_pct"], errors="coerce") if has_pct
           else pd.Series(np.nan, index=runs.index, dtype=float))
    by_rw = (runs["rw"].astype("string").str.contains("rand", na=False) if has_rw
             else pd.Series(False, index=runs.index))
    return (pct > 0).where(pct.notna(), by_rw).astype(bool)


def cache_caveats(runs: pd.DataFrame, devices, *, latency: str = "clat_mean_ns",
                  floor_ns: float = ROTATIONAL_FLOOR_NS) -> pd.DataFrame:
    """Random-I/O runs whose latency a device of their class cannot deliver: a cache was measured, not the medium.

    The rule: a run of **random** I/O (:func:`is_random`) on a device that sysfs calls rotational
    (``queue/rotational`` = 1) with a mean completion latency below ``floor_ns`` (1 ms) cannot have been
    served by the platter, whatever the load: each random I/O waits for a seek and part of a rotation
    (milliseconds), and more outstanding I/Os only add queueing to that. Such a run measured a cache (the
    page cache, a hypervisor's cache, a loop device's backing file in RAM, the drive's own buffer).
    Sequential runs get no caveat: the medium streams consecutive sectors without a seek per I/O, so
    sub-millisecond sequential I/O is its transfer rate (seed 001's 7,200 rpm disk: 4 KiB and 16 KiB
    sequential reads at 116 and 120 MiB/s). Non-rotational and unknown devices get no caveat (flash and
    RAM can be that fast; unknown is unknown).

    Parameters
    ----------
    runs : pandas.DataFrame
        Run-level rows (one per run: jobs and directions combined) with ``latency`` (ns), ``rw`` and/or
        ``random_pct`` (random or sequential, :func:`is_random`) and, when present, ``run_id``,
        ``iodepth`` and ``numjobs`` (or ``outstanding_ios``) for the wording.
    devices : DeviceInfo, mapping, or mapping of run id to either
        The device record from provenance (:attr:`storagebench.records.Provenance.device`, or its JSON form,
        read by :meth:`storagebench.records.DeviceInfo.from_json`): one record for every row, or
        ``{run_id: record}`` (a :class:`pandas.Series` indexed by run id works too). A mapping whose keys
        are all fields of :class:`~storagebench.records.DeviceInfo` is one record. A run without a record
        gets no caveat.
    latency : str
        Mean-latency column, ns: ``clat_mean_ns`` (completion latency, default) or ``lat_mean_ns``.
    floor_ns : float
        The floor for a rotational medium, ns (default :data:`ROTATIONAL_FLOOR_NS`).

    Returns
    -------
    pandas.DataFrame
        One row per input row, in input order: ``run_id`` (when given), ``device`` (path), ``rotational``
        (bool or None), ``random`` (bool), ``outstanding_ios`` (``iodepth x numjobs``, or NaN), ``latency_ns``,
        ``cache_not_medium`` (bool) and ``caveat`` (one sentence, ``""`` when none).

    Raises
    ------
    StatsError
        ``latency`` missing or a percentile column; ``floor_ns`` not positive; per-run records without a
        ``run_id`` column; a record that is not a device record.
    SchemaError
        A device record's JSON form with a field of the wrong type.
    """
    if latency.startswith("clat_p") or not latency.endswith("_ns"):
        raise StatsError(f"latency must be a mean-latency column in ns (clat_mean_ns, lat_mean_ns), got {latency!r}")
    if not (isinstance(floor_ns, (int, float)) and math.isfinite(floor_ns) and floor_ns > 0):
        raise StatsError(f"floor_ns must be a positive number of ns, got {floor_ns!r}")
    require_columns(runs, [latency], "runs")
    rand = is_random(runs).to_numpy(bool)
    per_run = isinstance(devices, pd.Series) or (isinstance(devices, Mapping) and not set(devices) <= _DEVICE_KEYS)
    if per_run and "run_id" not in runs.columns:
        raise StatsError("devices maps run ids to records, but runs has no run_id column")
    if per_run:
        devices = {rid: _device(rec, f"devices[{rid!r}]") for rid, rec in devices.items()}
    else:
        devices = _device(devices, "devices")
    if "outstanding_ios" in runs.columns:
        oio = pd.to_numeric(runs["outstanding_ios"], errors="coerce").to_numpy(float)
    elif {"iodepth", "numjobs"} <= set(runs.columns):
        oio = (pd.to_numeric(runs["iodepth"], errors="coerce") * pd.to_numeric(runs["numjobs"], errors="coerce")
               ).to_numpy(float)
    else:
        oio = np.full(len(runs), np.nan)
    lat = pd.to_numeric(runs[latency], errors="coerce").to_numpy(float)
    rows = []
    for i, rid in enumerate(runs["run_id"] if "run_id" in runs.columns else [None] * len(runs)):
        dev = (devices.get(rid) if per_run else devices)
        rot = None if dev is None else dev.rotational
        flag = bool(rot is True and rand[i] and np.isfinite(lat[i]) and lat[i] < floor_ns)
        path = "" if dev is None else (dev.path or dev.name or "")
        where = path or "the device"
        load = (f"{int(oio[i])} outstanding I/O{'s' if oio[i] != 1 else ''}" if np.isfinite(oio[i])
                else "its load")
        caveat = (f"{CACHE_CAVEAT}: random I/O with a mean completion latency of {lat[i] / 1e3:.0f} µs at {load} on "
                  f"{where}, which sysfs calls rotational; a rotating medium needs milliseconds per random I/O (seek "
                  f"and rotation), so below "
                  f"{floor_ns / 1e3:g} µs a cache answered (page cache, hypervisor or drive cache)") if flag else ""
        rec = {"run_id": rid} if "run_id" in runs.columns else {}
        rec.update(device=path, rotational=rot, random=bool(rand[i]), outstanding_ios=oio[i], latency_ns=lat[i],
                   cache_not_medium=flag, caveat=caveat)
        rows.append(rec)
    cols = (["run_id"] if "run_id" in runs.columns else []) + ["device", "rotational", "random",
                                                                "outstanding_ios", "latency_ns", "cache_not_medium", "caveat"]
    return pd.DataFrame(rows, columns=cols)

"""Which regime a run measured: the medium, or a cache in front of it: :func:`cache_caveats`.

The one rule (its one owner; the testbed write-ups and the demo report both call it): a run whose mean
completion latency is physically impossible for the device class gets the caveat "cache, not medium".
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

#: Mean completion latency below which a rotational device cannot have served a run from its medium, ns
#: (1 ms). A rotating disk needs a seek plus on average half a rotation per random I/O: 2 ms at 15,000 rpm,
#: 4.2 ms at 7,200 rpm (30,000 / rpm ms); a small sequential read faster than that came from the drive's
#: read-ahead buffer, a cache too. Half the fastest disk's half revolution leaves room for short seeks.
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


def cache_caveats(runs: pd.DataFrame, devices, *, latency: str = "clat_mean_ns",
                  floor_ns: float = ROTATIONAL_FLOOR_NS) -> pd.DataFrame:
    """Runs whose latency a device of their class cannot deliver: a cache was measured, not the medium.

    The rule: on a device that sysfs calls rotational (``queue/rotational`` = 1), a mean completion
    latency below ``floor_ns`` (1 ms) cannot come from the platter, whatever the load: at queue depth 1
    each I/O waits for a seek and part of a rotation (milliseconds), and more outstanding I/Os only add
    queueing to that. Such a run measured a cache (the page cache, a hypervisor's cache, a loop device's
    backing file in RAM, the drive's own buffer). Non-rotational and unknown devices get no caveat (flash
    and RAM can be that fast; unknown is unknown).

    Parameters
    ----------
    runs : pandas.DataFrame
        Run-level rows (one per run: jobs and directions combined) with ``latency`` (ns) and, when present,
        ``run_id``, ``iodepth`` and ``numjobs`` (or ``outstanding_ios``) for the wording.
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
        (bool or None), ``outstanding_ios`` (``iodepth x numjobs``, or NaN), ``latency_ns``,
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
        flag = bool(rot is True and np.isfinite(lat[i]) and lat[i] < floor_ns)
        path = "" if dev is None else (dev.path or dev.name or "")
        where = path or "the device"
        load = (f"{int(oio[i])} outstanding I/O{'s' if oio[i] != 1 else ''}" if np.isfinite(oio[i])
                else "its load")
        caveat = (f"{CACHE_CAVEAT}: mean completion latency {lat[i] / 1e3:.0f} µs at {load} on {where}, which sysfs "
                  f"calls rotational; a rotating medium needs milliseconds per I/O (seek and rotation), so below "
                  f"{floor_ns / 1e3:g} µs a cache answered (page cache, hypervisor or drive cache)") if flag else ""
        rec = {"run_id": rid} if "run_id" in runs.columns else {}
        rec.update(device=path, rotational=rot, outstanding_ios=oio[i], latency_ns=lat[i],
                   cache_not_medium=flag, caveat=caveat)
        rows.append(rec)
    cols = (["run_id"] if "run_id" in runs.columns else []) + ["device", "rotational", "outstanding_ios",
                                                                "latency_ns", "cache_not_medium", "caveat"]
    return pd.DataFrame(rows, columns=cols)

"""fio log files (``write_iops_log`` / ``write_bw_log`` / ``write_lat_log``) → the ``timeseries`` table.

fio names them ``<prefix>_<type>.<n>.log`` with type ``iops``, ``bw``, ``lat``, ``clat`` or ``slat``
and ``n`` the 1-based number of the job (thread) that wrote it. Each line is (fio HOWTO, "Log File
Formats")::

    time (ms), value, data direction (0 read, 1 write, 2 trim), block size (bytes)[, offset (bytes)][, priority]

with *value* in IOPS, KiB/s for ``bw`` logs (converted ×1024 to bytes/s) and ns for latency logs
in fio 3.x (µs in fio 2.x: ×1000, pass ``fio_version``).
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .._inputs import MAX_TOOL_OUTPUT_BYTES, read_input
from ..errors import IngestError

__all__ = ["parse_fio_log", "is_fio_log"]

#: ``<prefix>_<type>.<n>.log`` as fio writes it (``iolog.c``); hist logs are not handled here.
LOG_NAME = re.compile(r"^(?P<prefix>.*)_(?P<kind>iops|bw|lat|clat|slat)\.(?P<n>\d+)\.log$")
_METRIC = {"iops": "iops", "bw": "bw_bytes_per_s", "lat": "lat_ns", "clat": "clat_ns", "slat": "slat_ns"}
_DIRS = np.array(["read", "write", "trim"], dtype=object)


def is_fio_log(path: str | Path) -> bool:
    """True when the file name has fio's log pattern ``<prefix>_<iops|bw|lat|clat|slat>.<n>.log``."""
    name = os.path.basename(os.fspath(path))  # not Path(path).name: a twentieth of a loose file's ingest
    return name.endswith(".log") and LOG_NAME.match(name) is not None


def parse_fio_log(
    path: str | Path,
    *,
    run_id: str,
    host: str = "local",
    fio_version: str = "",
    data: bytes | None = None,
) -> pd.DataFrame:
    """Read one fio log file into ``timeseries`` rows.

    Parameters
    ----------
    path : str or Path
        The log; its name gives the metric and the job (``job = <prefix>``, extra column
        ``log_index = <n>``).
    run_id : str
        Run the log belongs to (as in ``runs``).
    host : str
        ``"local"`` or ``"hostname:port"``.
    fio_version : str
        ``fio-2.x`` logs hold latencies in µs; anything else is taken as fio 3.x (ns).
    data : bytes, optional
        The file content, when already read.

    Returns
    -------
    pandas.DataFrame
        Columns ``run_id, host, job, direction, t_s, metric, value, log_index``; ``t_s`` = time ms / 1000,
        ``value`` in the unit of ``metric`` (``iops``, ``bw_bytes_per_s``, ``lat_ns``, ``clat_ns``, ``slat_ns``).
        An empty log (e.g. ``slat`` of a sync engine) gives no rows.

    Raises
    ------
    IngestError
        The name is not a fio log name, a line is not ``time, value, direction, ...`` numbers, or a
        time or value is negative, not finite or above 2**63-1 (never stored as NaN or inf).
    """
    path = Path(path)
    m = LOG_NAME.match(path.name)
    if m is None:
        raise IngestError(
            "not a fio log name: must be <prefix>_<iops|bw|lat|clat|slat>.<n>.log", path=str(path)
        )
    kind = m.group("kind")
    if data is None:
        data = read_input(path, max_bytes=MAX_TOOL_OUTPUT_BYTES, what="fio log", error=IngestError)
    cols = ["run_id", "host", "job", "direction", "t_s", "metric", "value", "log_index"]
    if not data.strip():
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("t_s", "value") else "object") for c in cols})
    try:
        raw = pd.read_csv(
            io.BytesIO(data), header=None, usecols=[0, 1, 2], skipinitialspace=True,
            dtype={0: "float64", 1: "float64", 2: "int64"}, engine="c",
        )
    except (ValueError, pd.errors.ParserError) as exc:
        raise IngestError(f"not a fio log: lines must be 'time, value, direction, bs, ...' numbers ({exc})",
                          path=str(path)) from None
    ddir = raw[2].to_numpy()
    if ((ddir < 0) | (ddir > 2)).any():
        bad = sorted(set(ddir[(ddir < 0) | (ddir > 2)].tolist()))[:5]
        raise IngestError(f"data direction must be one of [0, 1, 2], got {bad}", path=str(path))
    t_ms, value = raw[0].to_numpy(), raw[1].to_numpy()
    bad = ~(np.isfinite(t_ms) & np.isfinite(value) & (t_ms >= 0) & (value >= 0) & (value <= 2.0**63 - 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IngestError(f"line {i + 1}: time {t_ms[i]!r} ms, value {value[i]!r}: fio logs non-negative, finite "
                          "numbers (at most 2**63-1)", path=str(path))
    if kind == "bw":
        value = value * 1024.0
    elif kind in ("lat", "clat", "slat") and str(fio_version).startswith("fio-2."):
        value = value * 1000.0
    n = len(raw)
    return pd.DataFrame({
        "run_id": np.full(n, run_id, dtype=object),
        "host": np.full(n, host, dtype=object),
        "job": np.full(n, m.group("prefix"), dtype=object),
        "direction": _DIRS[ddir],
        "t_s": t_ms / 1000.0,
        "metric": np.full(n, _METRIC[kind], dtype=object),
        "value": value,
        "log_index": np.full(n, int(m.group("n")), dtype="int64"),
    })


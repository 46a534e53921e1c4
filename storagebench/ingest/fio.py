"""fio ``--output-format=json`` / ``json+`` output → rows of the ``runs``, ``all_clients`` and ``histograms`` tables.

What real fio writes, and how each case is handled (fio 3.33 fixtures in ``tests/fixtures/fio``):

* text before or between the JSON (``note: ...`` lines, ``fio: pid=..., err=28/...`` lines, warnings,
  ``fio: terminating on signal 2``) is kept aside; a ``terminating on signal`` line flags the run ``partial``;
* several JSON documents in one file (``--status-interval``): the last complete one is used; a
  truncated last document, or a last document whose jobs neither reached ``runtime`` nor moved
  ``size`` bytes, flags ``partial`` (the final report is missing);
* ``jobs`` (local) and ``client_stats`` (``--client``): per-client entries get ``host = "hostname:port"``;
  the ``"All clients"`` entry goes to ``all_clients`` only, never to ``runs``;
* fio 2.x units: ``clat``/``slat``/``lat`` blocks in µs (×1000 → ns), ``bw`` in KiB/s (×1024 → bytes/s),
  ``io_bytes`` in KiB (×1024) when there is no ``io_kbytes`` field; fio 3.x: ``*_ns`` blocks in ns,
  ``bw_bytes`` in bytes/s (fio 3.0–3.3 print only ``bw`` in KiB/s: ×1024);
* ``runtime`` is ms; percentile keys are ``"99.900000"``.

Factor columns (``rw``, ``bs_bytes`` ...) come from the output's ``global options`` merged with each
job's ``job options``, with fio's defaults (HOWTO) for options that were not given; for a runner run the
options of its ``point.json`` win (in client/server output fio's ``global options`` hold each host's keys
again and the last host's value wins, so per-host job files would otherwise be mislabelled).
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from .. import schema as _schema
from ..errors import IngestError
from ..fio.hosts import host_label
from ..schema import PERCENTILES, RUNS, percentile_column

__all__ = [
    "FioDocument",
    "FioRows",
    "RUN_FIELDS",
    "empty_frame",
    "histogram_frame",
    "runs_frame",
    "read_fio_json",
    "parse_fio_output",
    "parse_size",
    "parse_time_ms",
    "file_run_id",
]

DIRECTIONS = ("read", "write", "trim")
_PCT_KEYS = tuple((f"{p:.6f}", percentile_column(p)) for p in PERCENTILES)
_DOC_START = re.compile(rb"^\{[ \t]*\r?$", re.M)
_DOC_END = re.compile(rb"^\}[ \t]*\r?$", re.M)
_SIGNAL = re.compile(r"terminating on signal (\d+)")
_SIZE = re.compile(r"^\s*(0x[0-9a-f]+|\d+(?:\.\d*)?)\s*([kmgtpe]?)(i?)(b?)\s*$", re.I)
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(d|h|m|s|sec|ms|msec|us|usec)?\s*$", re.I)
_TIME_MS = {None: 1000.0, "d": 86400e3, "h": 3600e3, "m": 60e3, "s": 1e3, "sec": 1e3, "ms": 1.0, "msec": 1.0,
            "us": 1e-3, "usec": 1e-3}
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}
_ALL_CLIENTS = "All clients"
_UNKNOWN = {"rw": "", "rwmixread_pct": math.nan, "iodepth": -1, "numjobs": -1, "ioengine": "", "direct": False,
            "target": ""}


@dataclass
class FioDocument:
    """One fio output file, read.

    Attributes
    ----------
    doc : dict
        The fio JSON document used (the last complete one).
    partial : bool
        The run did not finish (signal, truncated or missing final document).
    n_docs : int
        Number of complete JSON documents in the file (> 1 with ``--status-interval``).
    text : list of str
        Non-JSON lines fio printed around the JSON (``note:``, ``fio: ... err=`` ...).
    reason : str
        Why ``partial`` is set ("" when it is not).
    """

    doc: dict
    partial: bool = False
    n_docs: int = 1
    text: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class FioRows:
    """Rows parsed from one fio output, before they become DataFrames.

    Attributes
    ----------
    runs, all_clients : list of dict
        One dict per row, keys = ``runs`` columns (+ study factors).
    hist_blocks, hist_bins, hist_counts : lists
        The ``histograms`` rows in compact form; :meth:`histograms` makes the DataFrame.
    """

    runs: list[dict] = field(default_factory=list)
    all_clients: list[dict] = field(default_factory=list)
    hist_blocks: list[tuple] = field(default_factory=list)
    hist_bins: list[str] = field(default_factory=list)  # json+ bin keys (ns, as fio prints them)
    hist_counts: list[int] = field(default_factory=list)

    def histograms(self):
        """The ``histograms`` rows as a DataFrame (not yet validated)."""
        return histogram_frame(self.hist_blocks, self.hist_bins, self.hist_counts)


def histogram_frame(blocks: list[tuple], bins: list, counts: list):
    """Build the ``histograms`` DataFrame from blocks ``(run_id, host, job, job_index, direction, n_bins)``,
    the flat json+ bin keys (decimal strings, ns) and counts.

    Work is done in bulk by pyarrow: each key column is one ``take`` of its per-block values, the
    bin keys one string → int64 cast (~10x faster than per-file Python ints and strings).

    Returns
    -------
    pandas.DataFrame
        ``run_id, host, job, job_index, direction, bin_ns, count`` in schema dtypes, one row per bin
        (not yet validated).
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    run_id, host, job, job_index, direction, n_bins = zip(*blocks, strict=True)
    n = np.array(n_bins, dtype=np.int64)
    cols = {}
    for name, values in (("run_id", run_id), ("host", host), ("job", job), ("job_index", job_index),
                         ("direction", direction)):
        if name == "job_index":
            cols[name] = np.repeat(np.array(values, dtype=np.int64), n)
            continue
        cols[name] = pd.arrays.ArrowStringArray(_repeat_strings(values, n_bins, n))
    cols["bin_ns"] = pa.array(bins, type=pa.string()).cast(pa.int64()).to_numpy()
    cols["count"] = np.fromiter(counts, dtype=np.int64, count=len(counts))
    return pd.DataFrame(cols)


def _repeat_strings(values: tuple, repeats: tuple, n):
    """pyarrow string array of ``values[i]`` repeated ``repeats[i]`` times, built from its two buffers:
    the bytes by one C-level ``join`` of ``bytes * k``, the offsets by one cumulative sum (about
    twice as fast as ``take``, which copies string by string)."""
    import numpy as np
    import pyarrow as pa

    encoded = [v.encode() for v in values]
    data = b"".join([e * k for e, k in zip(encoded, repeats, strict=True)])
    if len(data) >= 2**31 - 1:  # beyond int32 offsets: let pyarrow chunk it
        return pa.chunked_array([pa.array([v] * k, type=pa.string()) for v, k in zip(values, repeats, strict=True)])
    lengths = np.repeat(np.fromiter(map(len, encoded), dtype=np.int32, count=len(encoded)), n)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(data))


def file_run_id(data: bytes) -> str:
    """Stable run id of a loose file: the first 12 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:12]


def parse_size(text: Any, kb_base: int = 1024) -> int | None:
    """Parse a fio ``int`` with a size suffix into bytes, following fio's HOWTO ("Parameter types").

    With ``kb_base=1024`` (fio's default) ``4k`` = 4096 and ``4ki`` = 4000 (fio's compatibility
    mode); with ``kb_base=1000`` ``4k`` = 4000 and ``4ki`` = 4096. Suffixes are case-insensitive and
    an optional ``b``/``B`` means bytes.

    Parameters
    ----------
    text : str or int
        e.g. ``"4k"``, ``"1m"``, ``"64KiB"``, ``4096``.
    kb_base : {1024, 1000}
        fio ``kb_base=`` of the job.

    Returns
    -------
    int or None
        Bytes, or ``None`` when the value is not a plain size (``"50%"``, a range ``"4k-16k"``).
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    if not isinstance(text, str):
        return None
    m = _SIZE.match(text)
    if not m:
        return None
    num, prefix, iec, _ = m.groups()
    value = float(int(num, 16)) if num.lower().startswith("0x") else float(num)
    prefix = prefix.lower()
    if kb_base == 1000:
        base = 1024 if iec else 1000
    else:
        base = 1000 if iec else 1024
    return int(round(value * base ** _POW[prefix]))


def parse_time_ms(text: Any) -> float | None:
    """Parse a fio ``time`` value (default unit seconds; ``d h m s ms us`` suffixes) into ms."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text) * 1000.0
    if not isinstance(text, str):
        return None
    m = _TIME.match(text)
    if not m:
        return None
    unit = m.group(2).lower() if m.group(2) else None
    return float(m.group(1)) * _TIME_MS[unit]


def _tail_text(data: bytes, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace").strip()
    for line in text.splitlines():
        if line.startswith("fio:") or "err=" in line:
            return line.strip()[:limit]
    return text.splitlines()[0][:limit] if text else ""


def read_fio_json(data: bytes, path: str = "<bytes>") -> FioDocument:
    """Find the fio JSON document(s) in the bytes of one output file.

    Parameters
    ----------
    data : bytes
        Content of the file (stdout of ``fio --output-format=json[+]`` or its ``--output`` file).
    path : str
        Name used in error messages.

    Returns
    -------
    FioDocument

    Raises
    ------
    IngestError
        Empty file, no JSON at all (fio's own error text is quoted), a truncated document and no
        complete one before it, invalid JSON, or JSON that is not fio output.
    """
    stripped = data.strip()
    if not stripped:
        raise IngestError("empty file: no fio output (fio killed before it wrote its JSON?)", path=path)
    if stripped[:1] == b"{":
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # several documents, or truncated: take the slow path
        else:
            return _checked(FioDocument(doc=doc), path)
    starts = [m.start() for m in _DOC_START.finditer(data)]
    if not starts:
        brace = data.find(b"{")
        if brace < 0:
            said = _tail_text(data)
            raise IngestError(f"no fio JSON in the file; it says: {said!r}", path=path)
        starts = [brace]
    ends = [m.end() for m in _DOC_END.finditer(data)]
    docs: list[tuple[int, int]] = []
    text_parts: list[bytes] = []
    pos = 0
    trailing_start = None
    for s in starts:
        if s < pos:
            continue  # a "{" line inside the previous document
        e = next((e for e in ends if e > s), None)
        text_parts.append(data[pos:s])
        if e is None:
            trailing_start = s
            pos = len(data)
            break
        docs.append((s, e))
        pos = e
    text_parts.append(data[pos:])
    text = [ln.strip() for part in text_parts for ln in part.decode("utf-8", "replace").splitlines() if ln.strip()]
    if not docs:
        if trailing_start is not None and len(starts) == 1 and not _DOC_END.search(data):
            # compact (one-line) JSON cannot be split by lines: try it whole
            try:
                return _checked(FioDocument(doc=orjson.loads(data[trailing_start:]), text=text), path)
            except orjson.JSONDecodeError:
                pass
        raise IngestError(
            f"truncated JSON: the fio document starting at byte {starts[0]} never ends "
            f"({len(data)} bytes; fio killed while writing?)",
            path=path,
        )
    s, e = docs[-1]
    try:
        doc = orjson.loads(data[s:e])
    except orjson.JSONDecodeError as exc:
        raise IngestError(f"invalid JSON in bytes {s}..{e}: {exc}", path=path) from None
    out = FioDocument(doc=doc, n_docs=len(docs), text=text)
    reasons = []
    sig = next((m.group(0) for m in map(_SIGNAL.search, text) if m), None)
    if sig:
        reasons.append(f"fio printed '{sig}'")
    if trailing_start is not None:
        reasons.append(f"the last of {len(docs) + 1} JSON documents is truncated")
    out = _checked(out, path)
    if not reasons and len(docs) > 1 and _unfinished(doc):
        reasons.append(
            f"last of {len(docs)} --status-interval documents is an interim report "
            "(jobs reached neither runtime nor size): the final report is missing"
        )
    if reasons:
        out.partial = True
        out.reason = "; ".join(reasons)
    return out


def _checked(fd: FioDocument, path: str) -> FioDocument:
    doc = fd.doc
    if not isinstance(doc, dict) or ("jobs" not in doc and "client_stats" not in doc):
        keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise IngestError(f"not fio output: JSON without 'jobs' or 'client_stats' (has {keys})", path=path)
    if not doc.get("jobs") and not doc.get("client_stats"):
        raise IngestError("fio output lists no jobs", path=path)
    return fd


def _global_options(doc: dict) -> dict:
    """``global options``: a dict, or (some fio client/server outputs) a list of dicts, merged in order."""
    g = doc.get("global options") or {}
    if isinstance(g, list):
        merged: dict = {}
        for part in g:
            if isinstance(part, dict):
                merged.update(part)
        return merged
    return g if isinstance(g, dict) else {}


def _unfinished(doc: dict) -> bool:
    """An interim --status-interval report: some job reached neither its runtime nor its size."""
    gopts = _global_options(doc)
    for job in doc.get("jobs") or doc.get("client_stats") or []:
        if job.get("jobname") == _ALL_CLIENTS or job.get("error"):
            continue
        opts = {**gopts, **(job.get("job options") or {})}
        runtime_ms = parse_time_ms(opts.get("runtime"))
        ran_ms = max(float((job.get(d) or {}).get("runtime", 0) or 0) for d in DIRECTIONS)
        if runtime_ms and ran_ms >= runtime_ms - 1:
            continue
        kb = int(opts.get("kb_base", 1024) or 1024)
        size = parse_size(opts.get("io_size") or opts.get("io_limit") or opts.get("size"), kb)
        if size is None:
            return False  # cannot tell
        n = int(opts.get("numjobs", 1) or 1) if "group_reporting" in opts else 1
        io = sum(int((job.get(d) or {}).get("io_bytes", 0) or 0) for d in DIRECTIONS)
        if io == size * n:
            continue
        return True
    return False


# ---- factors ---------------------------------------------------------------------------------


def _per_direction(value: Any, parse, default):
    """fio's "r,w,t" comma rule (HOWTO ``bs``): a value not ended by a comma applies to the later types."""
    if value is None:
        return (default, default, default)
    parts = str(value).split(",")
    out = []
    for i in range(3):
        if i < len(parts):
            p = parts[i].strip()
        else:
            p = parts[-1].strip()
        out.append(parse(p) if p else default)
    return tuple(out)


def _pct(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("", "1", "true", "yes", "on")


def _factors(opts: Mapping[str, Any]) -> tuple[dict, tuple, tuple]:
    """Factor columns from merged options; returns (common, bs per direction, random_pct per direction)."""
    rw = str(opts.get("rw", opts.get("readwrite", "read"))).split(":")[0].strip() or "read"
    kb = opts.get("kb_base", 1024)
    try:
        kb = int(kb)
    except (TypeError, ValueError):
        kb = 1024
    bs_text = opts.get("bs", opts.get("blocksize"))
    if bs_text is None and any(k in opts for k in ("bssplit", "bsrange", "blocksize_range")):
        bs = (-1, -1, -1)  # variable block size: no single value
    else:
        bs = _per_direction(bs_text, lambda s: parse_size(s, kb) if parse_size(s, kb) is not None else -1, 4096)
    is_random = rw.startswith("rand")
    if is_random:
        rnd = _per_direction(opts.get("percentage_random"), _pct, 100.0)
    else:
        rnd = (0.0, 0.0, 0.0)
    mixed = rw in ("rw", "readwrite", "randrw")
    if mixed:
        if "rwmixread" in opts:
            mix = float(opts["rwmixread"])
        elif "rwmixwrite" in opts:
            mix = 100.0 - float(opts["rwmixwrite"])
        else:
            mix = 50.0
    elif rw in ("read", "randread"):
        mix = 100.0
    else:
        mix = 0.0
    direct = _flag(opts["direct"]) if "direct" in opts else ("buffered" in opts and not _flag(opts["buffered"]))

    def _int(name, default):
        try:
            return int(str(opts.get(name, default)).strip() or default)
        except ValueError:
            return default

    common = {
        "rw": rw,
        "rwmixread_pct": mix,
        "iodepth": _int("iodepth", 1),
        "numjobs": _int("numjobs", 1),
        "ioengine": str(opts.get("ioengine", "psync")),
        "direct": bool(direct),
        "target": str(opts.get("filename", opts.get("directory", ""))),
    }
    return common, bs, rnd


def _main_direction(rw: str) -> str:
    if "trim" in rw and "write" not in rw:
        return "trim"
    if rw in ("write", "randwrite", "trimwrite"):
        return "write"
    return "read"


# ---- rows --------------------------------------------------------------------------------------

#: Fields of one row tuple, in the order :func:`_emit_rows` builds it (the ``runs`` schema order;
#: ``tests/test_ingest_fio.py`` checks that the two agree).
RUN_FIELDS: tuple[str, ...] = (
    "study", "run_id", "repetition", "run_order", "host", "job", "job_index", "direction", "tool",
    "rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs", "ioengine", "direct", "target",
    "iops", "bw_bytes_per_s", "io_bytes", "total_ios", "runtime_s", "lat_mean_ns", "lat_stdev_ns", "lat_min_ns",
    "lat_max_ns", "clat_mean_ns", "clat_stdev_ns", "slat_mean_ns", *(col for _, col in _PCT_KEYS),
    "usr_cpu_pct", "sys_cpu_pct", "error", "partial",
    "fio_version", "started_at", "hostname", "kernel", "source_file",
)
_RUN_FIELD_SET = frozenset(RUN_FIELDS)
#: Keys of a runner's ``point.json`` beside the factors that become columns of ``runs`` when present:
#: the set-up and block of the run in the study's design (``storagebench.study.DESIGN_COLUMNS``).
_DESIGN_KEYS = ("setup", "block")
_PCT_STR = tuple(key for key, _ in _PCT_KEYS)
_NAN = math.nan
_UTC = timezone.utc


class _RowSink:
    """What :func:`_emit_rows` appends to: row tuples (:data:`RUN_FIELDS` order) of ``runs`` and
    ``all_clients``, each with its study factors (one dict per row, shared by the rows of one file),
    and the json+ histogram blocks in the compact form of :func:`histogram_frame`."""

    def __init__(self) -> None:
        self.runs: list[tuple] = []
        self.runs_extra: list[dict] = []
        self.all_clients: list[tuple] = []
        self.all_extra: list[dict] = []
        self.hist_blocks: list[tuple] = []
        self.hist_bins: list[str] = []  # json+ bin keys (ns, decimal strings as fio prints them)
        self.hist_counts: list[int] = []


def _lat_block(d: dict, name: str) -> tuple[dict, float]:
    """fio 3.x ``<name>_ns`` (ns) or fio 2.x ``<name>`` (µs): (block, factor to ns)."""
    b = d.get(name + "_ns")
    if b is not None:
        return b, 1.0
    b = d.get(name)
    if isinstance(b, dict):
        return b, 1000.0
    return {}, 1.0


_LAT4 = operator.itemgetter("mean", "stddev", "min", "max")
_CLAT_PCT = operator.itemgetter("mean", "stddev", "percentile")
_PCTS = operator.itemgetter(*_PCT_STR)


def _direction_metrics(d: dict) -> tuple:
    """The metric fields of a row (``iops`` ... ``clat_p99_99_ns``, :data:`RUN_FIELDS` order) from
    one direction block of a job entry, in the schema's units.

    A fio 3.x block with every field (the usual case) takes :func:`_fio3_metrics`, which gets the
    fields with C-level ``itemgetter`` calls; anything else (fio 2.x, missing fields) takes
    :func:`_any_metrics`. Both give the same values (``test_fast_metrics_equal_general_ones``).
    """
    try:
        return _fio3_metrics(d)
    except (KeyError, TypeError):
        return _any_metrics(d)


def _fio3_metrics(d: dict) -> tuple:
    lat = _LAT4(d["lat_ns"])
    cmean, cstd, pct = _CLAT_PCT(d["clat_ns"])
    return (
        float(d["iops"]),
        float(d["bw_bytes"]),
        int(d["io_bytes"]),
        int(d["total_ios"]),
        float(d["runtime"]) / 1000.0,
        *map(float, lat),
        float(cmean),
        float(cstd),
        float(d["slat_ns"]["mean"]),
        *map(float, _PCTS(pct)),
    )


def _any_metrics(d: dict) -> tuple:
    clat, cf = _lat_block(d, "clat")
    lat, lf = _lat_block(d, "lat")
    slat, sf = _lat_block(d, "slat")
    if "bw_bytes" in d:
        bw = float(d["bw_bytes"])
    else:
        bw = float(d.get("bw", 0)) * 1024.0
    io = d.get("io_bytes", 0)
    if "io_kbytes" not in d and cf == 1000.0:  # fio 2.x: "io_bytes" holds KiB
        io = io * 1024
    nan = _NAN
    pct = clat.get("percentile") or {}
    return (
        float(d.get("iops", 0.0)),
        bw,
        int(io),
        int(d.get("total_ios", -1)),
        float(d.get("runtime", 0)) / 1000.0,
        float(lat["mean"]) * lf if "mean" in lat else nan,
        float(lat["stddev"]) * lf if "stddev" in lat else nan,
        float(lat["min"]) * lf if "min" in lat else nan,
        float(lat["max"]) * lf if "max" in lat else nan,
        float(clat["mean"]) * cf if "mean" in clat else nan,
        float(clat["stddev"]) * cf if "stddev" in clat else nan,
        float(slat["mean"]) * sf if "mean" in slat else nan,
        *[float(v) * cf if (v := pct.get(key)) is not None else nan for key in _PCT_STR],
    )


def _did_io(d: dict | None) -> bool:
    if not d:
        return False
    return (d.get("total_ios", 0) or 0) > 0 or (d.get("io_bytes", 0) or 0) > 0


def _started_at(doc: dict, entries: list) -> datetime | None:
    """fio's ``timestamp_ms`` (or ``timestamp``, s) minus the longest job ``elapsed`` (s)."""
    ts = doc.get("timestamp_ms")
    ts = ts / 1000.0 if ts is not None else doc.get("timestamp")
    if ts is None:
        return None
    if len(entries) == 1:
        elapsed = float(entries[0].get("elapsed", 0) or 0)
    else:
        elapsed = max((float(e.get("elapsed", 0) or 0) for e in entries), default=0.0)
    return datetime.fromtimestamp(float(ts) - elapsed, tz=_UTC)


def _iso_utc(value: Any, path: str) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise IngestError(f"provenance started_at must be an ISO 8601 time, got {value!r}", path=path) from None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _factor_fields(common: dict, bs: tuple, rnd: tuple) -> tuple[str, tuple[tuple, tuple, tuple]]:
    """(``rw``, the factor fields ``rw`` ... ``target`` of a row for read, write and trim)."""
    out = []
    for i in range(3):
        out.append((common["rw"], int(bs[i]), common["rwmixread_pct"],
                    float(rnd[i]) if rnd[i] is not None else _NAN, common["iodepth"], common["numjobs"],
                    common["ioengine"], common["direct"], common["target"]))
    return common["rw"], tuple(out)


_UNKNOWN_FIELDS = _factor_fields(_UNKNOWN, (-1, -1, -1), (_NAN,) * 3)
_FIELDS_CACHE: dict[tuple, tuple[str, tuple]] = {}


def _job_factor_fields(gopts: dict, gkey: tuple | None, jopts: dict) -> tuple[str, tuple]:
    """:func:`_factor_fields` of the merged options, memoised on the option values (a study repeats
    a few option sets many times; the key needs no merge and no sort)."""
    try:
        key = (gkey, tuple(jopts.items()))
        hit = _FIELDS_CACHE.get(key)
    except TypeError:  # unhashable option value
        return _factor_fields(*_factors({**gopts, **jopts}))
    if hit is None:
        if len(_FIELDS_CACHE) > 4096:
            _FIELDS_CACHE.clear()
        hit = _FIELDS_CACHE[key] = _factor_fields(*_factors({**gopts, **jopts}))
    return hit


def _emit_rows(
    sink: _RowSink,
    data: bytes,
    path: str,
    identity: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """Parse one fio output and append its rows to ``sink`` (see :func:`parse_fio_output`).

    All or nothing: the rows of the file are gathered first and appended only when the whole file
    parsed, so a file that raises leaves nothing behind in ``sink``.
    """
    doc = None
    if data[:1] == b"{":  # the usual file: one document and nothing else (read_fio_json's first case)
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    if type(doc) is dict and (doc.get("jobs") or (doc.get("client_stats") and "jobs" not in doc)):
        partial = False
    else:
        fd = read_fio_json(data, path)
        doc, partial = fd.doc, fd.partial
    ident = identity or {}
    prov = provenance or {}
    run_id = str(ident.get("run_id") or file_run_id(data))
    factors = ident.get("factors") or {}
    extra = {k: v for k, v in factors.items() if k not in _RUN_FIELD_SET} if factors else {}
    for key in _DESIGN_KEYS:  # the plan's design (storagebench.study.DESIGN_COLUMNS): columns like factors
        if ident.get(key) is not None:
            extra[key] = ident[key]
    gopts = _global_options(doc)
    if ident.get("options"):  # a runner run: point.json's options are what every host ran (see module doc)
        gopts = {**gopts, **{k: v for k, v in ident["options"].items() if v is not None}}
    try:
        gkey = tuple(gopts.items())
    except TypeError:
        gkey = None
    has_gopts = "global options" in doc
    client_mode = "client_stats" in doc and "jobs" not in doc
    entries = doc.get("client_stats") if client_mode else doc.get("jobs")
    started = _iso_utc(prov.get("started_at"), path) or _started_at(doc, entries)
    head = (str(ident.get("study", "")), run_id, int(ident.get("repetition", 0)), int(ident.get("run_order", -1)))
    fio_version = str(doc.get("fio version") or prov.get("fio_version", ""))
    kernel = str(prov.get("kernel", ""))
    source = str(path)
    local_hostname = str(prov.get("hostname", ""))
    seen: dict[tuple[str, str], int] = {}
    runs: list[tuple] = []
    all_clients: list[tuple] = []
    blocks: list[tuple] = []
    bin_dicts: list[dict] = []
    for entry in entries:
        name = str(entry.get("jobname", ""))
        if client_mode:
            host = host_label(entry.get("hostname", ""), entry.get("port", ""))  # sock:/path for sockets
            hostname = str(entry.get("hostname", ""))
        else:
            host = "local"
            hostname = local_hostname
        is_all = client_mode and name == _ALL_CLIENTS
        if is_all:
            host = _ALL_CLIENTS
        key = (host, name)
        job_index = seen.get(key, 0)
        seen[key] = job_index + 1
        if has_gopts or "job options" in entry:
            jopts = entry.get("job options")
            rw, fields = _job_factor_fields(gopts, gkey, jopts if isinstance(jopts, dict) else {})
        else:  # fio < 2.2 prints no options: the factors are unknown, not fio's defaults
            rw, fields = _UNKNOWN_FIELDS
        if "mixed" in entry and not ("read" in entry or "write" in entry or "trim" in entry):
            # unified_rw_reporting=1: fio reports one "mixed" block (with =both, "mixed" is the sum of
            # the read/write/trim blocks also printed, and is skipped so nothing counts twice)
            todo = ((0, "mixed"),)
        else:
            todo = []
            for i, dn in enumerate(DIRECTIONS):  # _did_io, inlined
                d = entry.get(dn)
                if d and ((d.get("total_ios", 0) or 0) > 0 or (d.get("io_bytes", 0) or 0) > 0):
                    todo.append((i, dn))
            if not todo:
                main = _main_direction(rw)
                todo = ((DIRECTIONS.index(main), main),)
        tail = (float(entry.get("usr_cpu", _NAN)), float(entry.get("sys_cpu", _NAN)),
                int(entry.get("error", 0) or 0), partial, fio_version, started, hostname, kernel, source)
        for i, dname in todo:
            d = entry.get(dname) or {}
            try:  # _direction_metrics, inlined
                metrics = _fio3_metrics(d)
            except (KeyError, TypeError):
                metrics = _any_metrics(d)
            row = (*head, host, name, job_index, dname, "fio", *fields[i], *metrics, *tail)
            if is_all:
                all_clients.append(row)
                continue
            runs.append(row)
            bins = (d.get("clat_ns") or {}).get("bins")
            if bins:
                blocks.append((run_id, host, name, job_index, dname, len(bins)))
                bin_dicts.append(bins)
    sink.runs.extend(runs)
    sink.runs_extra.extend([extra] * len(runs))
    sink.all_clients.extend(all_clients)
    sink.all_extra.extend([extra] * len(all_clients))
    sink.hist_blocks.extend(blocks)
    for bins in bin_dicts:
        sink.hist_bins.extend(bins)  # keys: decimal strings, parsed in bulk by histogram_frame
        sink.hist_counts.extend(bins.values())


def parse_fio_output(
    data: bytes,
    path: str,
    *,
    identity: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> FioRows:
    """Parse one fio JSON/JSON+ output into rows of ``runs``, ``all_clients`` and ``histograms``.

    Parameters
    ----------
    data : bytes
        The file's bytes.
    path : str
        Its path (``source_file`` column, error messages).
    identity : mapping, optional
        The runner's ``point.json``: ``study``, ``run_id``, ``repetition``, ``run_order`` and
        ``factors`` (study factors, added as extra columns). Without it: ``run_id`` is
        :func:`file_run_id` of the bytes, ``study=""``, ``repetition=0``, ``run_order=-1``.
    provenance : mapping, optional
        The runner's ``provenance.json``: ``fio_version``, ``kernel``, ``hostname``, ``started_at`` (ISO UTC).
        Without it ``started_at`` is fio's ``timestamp`` minus the longest job ``elapsed`` (s).

    Returns
    -------
    FioRows
        ``runs``: one row per job entry x direction that did I/O (``total_ios > 0`` or
        ``io_bytes > 0``); a job entry without any I/O (an error) gets one row for the main
        direction of its ``rw``. ``job_index`` numbers entries of the same name (per host).
        ``all_clients``: fio's ``"All clients"`` entries. With ``unified_rw_reporting=1`` the one row
        per entry has ``direction="mixed"`` (fio's ``mixed`` block). ``histograms``: json+ ``clat_ns.bins``
        of the emitted directions, one row per non-empty bin (``bin_ns`` in ns). Study factors
        whose name is a ``runs`` column are dropped (fio's own output wins).

    Raises
    ------
    IngestError
        See :func:`read_fio_json`.

    Notes
    -----
    :func:`storagebench.ingest.ingest_paths` does not go through the row dicts: it appends row tuples
    of many files to one sink and builds each table once (:func:`runs_frame`, :func:`histogram_frame`).
    """
    sink = _RowSink()
    _emit_rows(sink, data, path, identity, provenance)
    out = FioRows(hist_blocks=sink.hist_blocks, hist_bins=sink.hist_bins, hist_counts=sink.hist_counts)
    out.runs = [{**dict(zip(RUN_FIELDS, r, strict=True)), **x} for r, x in zip(sink.runs, sink.runs_extra, strict=True)]
    out.all_clients = [{**dict(zip(RUN_FIELDS, r, strict=True)), **x}
                       for r, x in zip(sink.all_clients, sink.all_extra, strict=True)]
    return out


_RUN_DTYPES: dict[str, str] = {c.name: c.dtype for c in RUNS}


def runs_frame(rows: list[tuple], extras: list[dict] | None = None, table: str = "runs"):
    """Build the ``runs`` (or ``all_clients``) DataFrame from row tuples in :data:`RUN_FIELDS` order.

    Each column is made once, directly in its schema dtype (numpy for numbers and bools, pyarrow
    strings, ``datetime64[ns, UTC]``), which is several times faster than a DataFrame of row dicts.

    Parameters
    ----------
    rows : list of tuple
        Row tuples built by :func:`parse_fio_output`'s row emitter.
    extras : list of dict, optional
        Study factors of each row (same length as ``rows``); they become extra columns after the
        schema columns, in order of first appearance, with pandas' dtype inference (as
        ``pandas.DataFrame(list_of_dicts)``); a row without a factor gets NaN.
    table : {"runs", "all_clients"}
        Schema used when ``rows`` is empty.

    Returns
    -------
    pandas.DataFrame
        Schema columns in schema dtypes, then the factor columns; not yet validated.
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if not rows:
        return empty_frame(table)
    data = {}
    for name, col in zip(RUN_FIELDS, zip(*rows, strict=True), strict=True):
        dtype = _RUN_DTYPES[name]
        if dtype == "string":
            data[name] = pd.arrays.ArrowStringArray(pa.array(col, type=pa.string()))
        elif dtype.startswith("datetime64"):
            data[name] = pd.to_datetime(list(col), utc=True).astype(dtype)
        else:
            data[name] = np.array(col, dtype=dtype)
    df = pd.DataFrame(data)
    if extras and any(extras):
        df = pd.concat([df, pd.DataFrame(extras)], axis=1)
    return df


_EMPTY: dict[str, Any] = {}


def empty_frame(table: str):
    """:func:`storagebench.schema.empty`, made once per table and copied (an empty 49-column frame
    costs ~2 ms to build)."""
    if table not in _EMPTY:
        _EMPTY[table] = _schema.empty(table)
    return _EMPTY[table].copy()

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
  ``bw_bytes`` in bytes/s (fio 3.0–3.3 print only ``bw`` in KiB/s: ×1024, with a ``note``);
* ``runtime`` is ms; percentile keys are ``"99.900000"``.

Factor columns (``rw``, ``bs_bytes`` ...) come from the output's ``global options`` merged with each
job's ``job options``, with fio's defaults (HOWTO) for options that were not given; for a runner run the
options of its ``point.json`` win (in client/server output fio's ``global options`` hold each host's keys
again and the last host's value wins, so per-host job files would otherwise be mislabelled). Option
values are read with fio's own grammar (:mod:`storagebench.fio.options`: ``parse_size`` with the job's
``kb_base``, ``parse_time_us``).

**Validation: no crash, no invented number.** The JSON is decoded by ``msgspec`` into typed structs
(:class:`_Doc`), so every value ingest reads is type-checked while it is decoded, and values that
fio cannot print are refused. The rule, per value read:

========================================================  ==============================================
what                                                      when it is wrong
========================================================  ==============================================
the structure: a JSON object with ``jobs`` or             :class:`~storagebench.errors.IngestError` for
``client_stats``, a non-empty array of job objects with   the file (nothing of it is kept)
a string ``jobname`` and an integer ``error``; direction
blocks (``read``/``write``/``trim``/``mixed``) that are
objects, at least one per job, and the block of the
row's direction
any value of the wrong JSON type (a number given as a     IngestError: fio never prints it, so the file
string, ``true``, ``null``, an object ...)                was edited or corrupted
the core metrics of a direction: ``iops``, ``runtime``,   IngestError when missing, negative, above
``io_bytes``, ``bw_bytes`` (or fio < 3.4's ``bw``),       2**63-1 or not finite
``total_ios`` (fio ≥ 3; fio 2.1 has none: ``-1``)
json+ ``bins``: keys decimal integers, counts integers,   IngestError
both from 0 to 2**63-1
the latency statistics (``lat``/``clat``/``slat``         NaN in the column, and the ``note`` column says
``mean``/``stddev``/``min``/``max``), the ten clat        which value (JSON path) and why
percentiles, ``usr_cpu``/``sys_cpu``: missing, negative
or above 2**63-1
``timestamp``/``elapsed`` (start time), job options       ``started_at`` NaT / the factor unknown (``-1``,
fio could not have read (``iodepth=abc``)                 NaN, ``""``) and a ``note``
========================================================  ==============================================

A percentile block fio leaves out because the direction completed no I/O (``clat_ns.N == 0``) gives
NaN without a note. Every error names the file, the JSON path (``jobs[0].read.iops``), the value and
what is allowed. JSON itself cannot hold NaN or ±Infinity (``NaN``, ``Infinity`` are refused as
invalid JSON, ``1e309`` as out of range).
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Union

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
from msgspec import Meta, Struct

from .. import schema as _schema
from ..errors import IngestError, SchemaError, shown
from ..errors import display_path as _display_path
from ..fio import options as _fo
from ..fio.hosts import host_label
from ..records import POINT_FORMAT_VERSION, Provenance
from ..schema import PERCENTILES, RUNS, percentile_column

__all__ = [
    "FioRows",
    "RUN_FIELDS",
    "RowSink",
    "emit_rows",
    "empty_frame",
    "runs_frame",
    "parse_fio_output",
    "check_point",
    "check_provenance",
    "file_run_id",
]

DIRECTIONS = ("read", "write", "trim")
_PCT_KEYS = tuple((f"{p:.6f}", percentile_column(p)) for p in PERCENTILES)
_DOC_START = re.compile(rb"^\{[ \t]*\r?$", re.M)
_DOC_END = re.compile(rb"^\}[ \t]*\r?$", re.M)
_SIGNAL = re.compile(r"terminating on signal (\d+)")
_ALL_CLIENTS = "All clients"
_UNKNOWN = {"rw": "", "rwmixread_pct": math.nan, "iodepth": -1, "numjobs": -1, "ioengine": "", "direct": False,
            "target": ""}
_NAN = math.nan
_UTC = timezone.utc

#: Largest value fio can print in a count, size, time or rate: fio keeps them in 64-bit integers
#: and storagebench stores them in int64 / float64 columns (2**63 - 1).
MAX_VALUE = 2**63 - 1
_MAXF = float(MAX_VALUE)

# ---- the typed fio document (msgspec) ---------------------------------------------------------------

_Count = Annotated[int, Meta(ge=0, le=MAX_VALUE)]
#: a float fio prints (``iops``): finite, >= 0 and below 2**63 (2**63 itself rounds to float(2**63-1))
_Amount = Annotated[float, Meta(ge=0, lt=2.0**63)]
_OptValue = Union[str, int, float]
_Options = dict[str, _OptValue]
#: an integer where a bad value becomes NaN + note (latency min/max, percentiles, time stamps):
#: negative ones are noted; one beyond int64 is refused while decoding (fio prints 64-bit integers)
_Wide = Annotated[int, Meta(ge=-(2**63), le=MAX_VALUE)]
_Unset = msgspec.UnsetType
_U = msgspec.UNSET  # a field fio did not print (null is a wrong type: fio never prints null)

#: The ten clat percentiles kept in ``runs`` (fio's keys ``"1.000000"`` ..., integers in ns or µs),
#: missing ones NaN.
_Pct = msgspec.defstruct(
    "_Pct", [(f"p{i}", _Wide, msgspec.field(name=key, default=_NAN)) for i, (key, _) in enumerate(_PCT_KEYS)],
    gc=False,
)
_PCT_VALUES = operator.attrgetter(*(f"p{i}" for i in range(len(_PCT_KEYS))))


class _Lat(Struct, gc=False):
    """``lat_ns``/``clat_ns``/``slat_ns`` (fio 3, ns) or ``lat``/``clat``/``slat`` (fio 2, µs).

    As fio prints them (``stat.c``: ``json_object_add_value_int``/``_float``): ``min``, ``max``,
    ``N``, the percentiles and the bins are integers, ``mean`` and ``stddev`` numbers. A missing
    value is NaN here and gets a note.
    """

    min: _Wide = _NAN  # type: ignore[assignment]
    max: _Wide = _NAN  # type: ignore[assignment]
    mean: float = _NAN
    stddev: float = _NAN
    N: Union[_Count, _Unset] = _U
    percentile: Union[_Pct, _Unset] = _U  # type: ignore[valid-type]
    bins: Union[dict[_Count, _Count], _Unset] = _U


class _Dir(Struct, gc=False):
    """One direction block of a job entry (``read``, ``write``, ``trim`` or ``mixed``)."""

    iops: _Amount
    runtime: _Count
    io_bytes: _Count
    io_kbytes: Union[_Count, _Unset] = _U
    bw_bytes: Union[_Count, _Unset] = _U
    bw: Union[_Count, _Unset] = _U
    total_ios: Union[_Count, _Unset] = _U
    lat_ns: Union[_Lat, _Unset] = _U
    clat_ns: Union[_Lat, _Unset] = _U
    slat_ns: Union[_Lat, _Unset] = _U
    lat: Union[_Lat, _Unset] = _U
    clat: Union[_Lat, _Unset] = _U
    slat: Union[_Lat, _Unset] = _U


class _Job(Struct, gc=False):
    """One entry of ``jobs`` or ``client_stats``."""

    jobname: str
    error: _Count
    elapsed: _Wide = _NAN  # type: ignore[assignment]
    job_options: Union[_Options, _Unset] = msgspec.field(name="job options", default=_U)
    read: Union[_Dir, _Unset] = _U
    write: Union[_Dir, _Unset] = _U
    trim: Union[_Dir, _Unset] = _U
    mixed: Union[_Dir, _Unset] = _U
    usr_cpu: float = _NAN
    sys_cpu: float = _NAN
    hostname: Union[str, _Unset] = _U
    port: Union[int, str, _Unset] = _U


class _Doc(Struct, gc=False):
    """The parts of a fio JSON document that ingest reads (everything else is skipped unread)."""

    fio_version: str = msgspec.field(name="fio version", default="")
    timestamp: _Wide = _NAN  # type: ignore[assignment]
    timestamp_ms: _Wide = _NAN  # type: ignore[assignment]
    global_options: Union[_Options, list[_Options], _Unset] = msgspec.field(name="global options", default=_U)
    jobs: Union[list[_Job], _Unset] = _U
    client_stats: Union[list[_Job], _Unset] = _U


class _Names(Struct, gc=False):
    """Just the job names of a document (the other documents of a ``--status-interval`` file)."""

    jobs: Union[list[dict[str, Any]], _Unset] = _U
    client_stats: Union[list[dict[str, Any]], _Unset] = _U


_DECODER = msgspec.json.Decoder(_Doc)


def _retyped(cls: type, name: str, types: dict[str, Any]) -> type:
    """A copy of Struct ``cls`` (same fields, JSON names and defaults) with the types of ``types``."""
    fields = []
    for f in msgspec.structs.fields(cls):
        default = msgspec.NODEFAULT if f.required else f.default
        fields.append((f.name, types.get(f.name, f.type), msgspec.field(name=f.encode_name, default=default)))
    return msgspec.defstruct(name, fields, gc=False)


#: The fast decoder of ingest's usual file: :class:`_Doc` with every ``clat_ns.bins`` left as raw JSON
#: (:class:`msgspec.Raw`, a slice of the input), which :meth:`RowSink.parse_bins` turns into int64
#: arrays many files at a time (the same values, type- and range-checked as strictly as
#: :data:`_DECODER` checks them; anything else sends the batch back to :data:`_DECODER`). Decoding
#: bins into a dict of Python ints and converting them to arrays was most of the cost of typed
#: decoding (69 -> 26 ms for the 2,000 files of the multijob corpus), and of ingest.
_LatRaw = _retyped(_Lat, "_LatRaw", {"bins": Union[msgspec.Raw, _Unset]})
_DirRaw = _retyped(_Dir, "_DirRaw", {"clat_ns": Union[_LatRaw, _Unset]})
_JobRaw = _retyped(_Job, "_JobRaw", {d: Union[_DirRaw, _Unset] for d in ("read", "write", "trim", "mixed")})
_DocRaw = _retyped(_Doc, "_DocRaw", {"jobs": Union[list[_JobRaw], _Unset],
                                     "client_stats": Union[list[_JobRaw], _Unset]})
_RAW_DECODER = msgspec.json.Decoder(_DocRaw)
_Raw = msgspec.Raw

#: a study factor level or option value in point.json: an int must fit the int64 column it becomes
_Scalar = Union[str, Annotated[int, Meta(ge=-(2**63), le=MAX_VALUE)], float, bool, None]
_Factor = Union[_Scalar, list[_Scalar]]


class _Point(Struct, gc=False):
    """What ingest reads of a runner ``point.json``."""

    format_version: Annotated[int, Meta(ge=0, le=MAX_VALUE)] = 0
    run_id: str = ""
    study: str = ""
    repetition: Annotated[int, Meta(ge=0, le=MAX_VALUE)] = 0
    run_order: Annotated[int, Meta(ge=-1, le=MAX_VALUE)] = -1
    factors: dict[str, _Factor] = {}
    options: dict[str, _Factor] = {}
    setup: Union[Annotated[int, Meta(ge=1, le=MAX_VALUE)], None] = None  # the design (storagebench._study)
    block: Union[Annotated[int, Meta(ge=1, le=MAX_VALUE)], None] = None


_NO_POINT = _Point()
_NO_PROV = Provenance()
_NO_EXTRA: dict = {}


@dataclass
class FioDocument:
    """One fio output file, read.

    Attributes
    ----------
    doc : msgspec.Struct
        The fio JSON document used (the last complete one), decoded and type-checked: attributes
        ``fio_version``, ``timestamp``, ``global_options``, ``jobs``, ``client_stats``.
    partial : bool
        The run did not finish (signal, truncated or missing final document).
    n_docs : int
        Number of complete JSON documents in the file (> 1 with ``--status-interval``).
    text : list of str
        Non-JSON lines fio printed around the JSON (``note:``, ``fio: ... err=`` ...).
    reason : str
        Why ``partial`` is set ("" when it is not).
    """

    doc: Any
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
    hist_bins: list[int] = field(default_factory=list)  # json+ bin keys (ns)
    hist_counts: list[int] = field(default_factory=list)

    def histograms(self):
        """The ``histograms`` rows as a DataFrame (not yet validated)."""
        return histogram_frame(self.hist_blocks, self.hist_bins, self.hist_counts)


def histogram_frame(blocks: list[tuple], bins, counts):
    """Build the ``histograms`` DataFrame from blocks ``(run_id, host, job, job_index, direction, n_bins)``,
    the flat json+ bin keys (ints, ns; checked to be in 0..2**63-1 when decoded) and counts.

    ``bins`` and ``counts`` are int64 arrays or iterables of ints holding ``sum(n_bins)`` values each.
    Work is done in bulk: each string key column is built from its two buffers (:func:`_repeat_strings`).

    Returns
    -------
    pandas.DataFrame
        ``run_id, host, job, job_index, direction, bin_ns, count`` in schema dtypes, one row per bin
        (not yet validated).
    """
    run_id, host, job, job_index, direction, n_bins = zip(*blocks, strict=True)
    n = np.array(n_bins, dtype=np.int64)
    cols = {}
    for name, values in (("run_id", run_id), ("host", host), ("job", job), ("job_index", job_index),
                         ("direction", direction)):
        if name == "job_index":
            cols[name] = np.repeat(np.array(values, dtype=np.int64), n)
            continue
        cols[name] = pd.arrays.ArrowStringArray(_repeat_strings(values, n_bins, n))
    total = int(n.sum())
    cols["bin_ns"] = bins if isinstance(bins, np.ndarray) else np.fromiter(bins, dtype=np.int64, count=total)
    cols["count"] = counts if isinstance(counts, np.ndarray) else np.fromiter(counts, dtype=np.int64, count=total)
    return pd.DataFrame(cols, copy=False)  # no consolidation of the int columns into one block (a copy)


#: rows of the one chunk a constant string column of the ``histograms`` table repeats
_CONST_CHUNK = 1 << 16


def _repeat_strings(values: tuple, repeats: tuple, n):
    """pyarrow string array of ``values[i]`` repeated ``repeats[i]`` times, built from its two buffers:
    the bytes by one C-level ``join`` of ``bytes * k``, the offsets by one cumulative sum, or one
    ``arange`` when every value has the same length (run ids, ``local``, one job name): about twice
    as fast as ``take``, which copies string by string."""
    total = int(n.sum())
    if len(set(values)) == 1:  # one host, job name or direction: no encoding per block
        first = values[0].encode()
        if total > _CONST_CHUNK and len(first) * _CONST_CHUNK < 2**31:
            # one chunk of the value, the same object many times: the column's buffers are not repeated
            piece = _repeat_strings((values[0],), (_CONST_CHUNK,), np.array([_CONST_CHUNK]))
            full, rest = divmod(total, _CONST_CHUNK)
            return pa.chunked_array([piece] * full + ([piece.slice(0, rest)] if rest else []))
        encoded = [first]
        data = first * total
    else:
        encoded = [v.encode() for v in values]
        first = encoded[0]
        data = b"".join([e * k for e, k in zip(encoded, repeats, strict=True)])
    if len(data) >= 2**31 - 1:  # beyond int32 offsets: let pyarrow chunk it
        return pa.chunked_array([pa.array([v] * k, type=pa.string()) for v, k in zip(values, repeats, strict=True)])
    width = len(first)
    if len(set(map(len, encoded))) == 1:
        offsets = np.arange(0, (total + 1) * width, width, dtype=np.int32) if width else np.zeros(total + 1, np.int32)
    else:
        lengths = np.repeat(np.fromiter(map(len, encoded), dtype=np.int32, count=len(encoded)), n)
        offsets = np.zeros(total + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(total, pa.py_buffer(offsets), pa.py_buffer(data))


def file_run_id(data: bytes) -> str:
    """Stable run id of a loose file: the first 12 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:12]


def _tail_text(data: bytes, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace").strip()
    for line in text.splitlines():
        if line.startswith("fio:") or "err=" in line:
            return line.strip()[:limit]
    return text.splitlines()[0][:limit] if text else ""


# ---- clear messages for values the typed decoder refused ------------------------------------------

_MS_AT = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<p1>[^`]*)`(?: in `(?P<p2>[^`]*)`)?)?$", re.S)
_EXPECT = re.compile(r"Expected `(?P<kinds>[^`]*)`(?:, got `(?P<got>[^`]*)`)?(?: (?P<op>>=|<=) (?P<bound>\S+))?")
_KIND_WORDS = {"float": "a number", "int": "a whole number", "str": "a string", "object": "a JSON object",
               "array": "a JSON array", "null": "null", "bool": "true or false"}
_JSON_KIND = {str: "str", bool: "bool", int: "int", float: "float", dict: "object", list: "array", type(None): "null"}


def _kind_words(kinds: str) -> str:
    names = [k.strip() for k in kinds.split("|")]
    if "int" in names and "float" in names:
        names.remove("int")
    return " or ".join(_KIND_WORDS.get(k, k) for k in names)


def _allowed(msg: str) -> str:
    """What the decoder wanted, in words: ``a number from 0 to 2**63-1``."""
    m = _EXPECT.search(msg)
    if m is None:
        if "out of range" in msg:
            return "a finite number from 0 to 2**63-1"
        return msg
    words = _kind_words(m["kinds"])
    if m["op"]:
        low = m["bound"] if m["op"] == ">=" else "0"
        low = low[:-2] if low.endswith(".0") else low
        return f"{words} from {low} to 2**63-1"
    return words


def _lenient_json(source: Any) -> Any:
    """The JSON for an error message (stdlib json: it also reads 1e309, NaN and lone surrogates)."""
    if not isinstance(source, (bytes, bytearray, str)):
        return source
    try:
        return json.loads(source)
    except (ValueError, RecursionError):
        return None


def _walk(doc: Any, jpath: str) -> tuple[Any, bool]:
    """The value at msgspec path ``$.jobs[0].read.iops`` (keys may hold dots: ``percentile.99.000000``)."""
    rest = jpath[1:] if jpath.startswith("$") else jpath
    cur = doc
    while rest:
        m = re.match(r"\[(\d+)\]", rest)
        if m:
            i = int(m[1])
            if not isinstance(cur, list) or i >= len(cur):
                return None, False
            cur, rest = cur[i], rest[m.end():]
            continue
        if rest.startswith(".") and isinstance(cur, dict):
            keys = [k for k in cur if isinstance(k, str) and rest[1:].startswith(k)
                    and rest[1 + len(k):][:1] in ("", ".", "[")]
            if not keys:
                return None, False
            k = max(keys, key=len)
            cur, rest = cur[k], rest[1 + len(k):]
            continue
        return None, False
    return cur, True


def _fits(value: Any, kinds: str, bounded: bool) -> bool:
    if not kinds:  # "Number out of range": the value JSON cannot hold as a float
        return not (isinstance(value, float) and not math.isfinite(value))
    kind = _JSON_KIND.get(type(value), "?")
    allowed = {k.strip() for k in kinds.split("|")}
    if kind == "int" and "float" in allowed:
        kind = "float"
    if kind not in allowed:
        return False
    if bounded and kind in ("int", "float"):
        return 0 <= value <= MAX_VALUE
    return True


def _show(jpath: str) -> str:
    return jpath[2:] if jpath.startswith("$.") else ("the document" if jpath in ("$", "") else jpath)


def _validation_error(exc: msgspec.ValidationError, source: Any, path: str, what: str = "") -> IngestError:
    """An IngestError naming the JSON path, the value and what is allowed, from msgspec's error."""
    m = _MS_AT.match(str(exc))
    msg, p1, p2 = m["msg"], m["p1"] or "$", m["p2"]
    prefix = f"{what}: " if what else ""
    doc = _lenient_json(source)
    missing = re.match(r"Object missing required field `([^`]*)`", msg)
    if missing:
        where = _show(p1)
        field_path = missing[1] if where == "the document" else f"{where}.{missing[1]}"
        return IngestError(f"{prefix}{field_path}: missing (fio always prints it)", path=path)
    em = _EXPECT.search(msg)
    kinds = em["kinds"] if em else ""
    bounded = bool(em and em["op"])
    if p1 == "key" and p2:  # a dict key (json+ bins: decimal integers)
        container, _ = _walk(doc, p2)
        bad = next((k for k in container if not (k.isdigit() and k == str(int(k)) and int(k) <= MAX_VALUE)), None) \
            if isinstance(container, dict) else None
        quoted = f" {shown(bad)}" if bad is not None else ""
        return IngestError(f"{prefix}{_show(p2)}: key{quoted} is not allowed; allowed: decimal integers from 0 "
                           "to 2**63-1", path=path)
    if p1.endswith("[...]"):  # a dict value
        container, _ = _walk(doc, p1[:-5])
        bad = next(((k, v) for k, v in container.items() if not _fits(v, kinds, bounded)), None) \
            if isinstance(container, dict) else None
        if bad is not None:
            return IngestError(f"{prefix}{_show(p1[:-5])}.{bad[0]} = {shown(bad[1])}: not allowed; "
                               f"allowed: {_allowed(msg)}", path=path)
        return IngestError(f"{prefix}{_show(p1)}: {msg}", path=path)
    value, found = _walk(doc, p1)
    if p1 == "$" and em and not bounded:
        if what:
            return IngestError(f"{what} must be a JSON object, got {_kind_words(em['got'] or '?')}", path=path)
        return IngestError(f"not fio output: the JSON is {_kind_words(em['got'] or '?')}, not an object", path=path)
    quoted = f" = {shown(value)}" if found else ""
    problem = "wrong type" if em and em["got"] else "out of range"
    return IngestError(f"{prefix}{_show(p1)}{quoted}: {problem}; allowed: {_allowed(msg)}", path=path)


def _not_utf8(exc: UnicodeDecodeError, path: str) -> IngestError:
    return IngestError(f"a JSON string holds bytes that are not UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
                       f"offset {exc.start} of the string); fio writes UTF-8", path=path)


def _decode(data: bytes, path: str) -> Any:
    """Typed decode of one JSON document; msgspec.DecodeError (not JSON) is left to the caller."""
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc, data, path) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc, path) from None
    except RecursionError:
        raise IngestError("JSON nested too deeply to be fio output", path=path) from None


_BOM = b"\xef\xbb\xbf"
_BYTE = re.compile(r"\(byte (\d+)\)")


def _invalid_json(exc: msgspec.DecodeError, data: bytes, offset: int, path: str) -> IngestError:
    """Invalid JSON: the line it is on, with its number, quoted (``"min" : NaN,``)."""
    m = _BYTE.search(str(exc))
    if m is None:
        return IngestError(f"invalid JSON: {exc}", path=path)
    at = offset + int(m[1])
    line_no = data.count(b"\n", 0, at) + 1
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    line = data[start:end if end >= 0 else len(data)].decode("utf-8", "replace").strip()
    reason = str(exc).split(" (byte")[0]
    return IngestError(f"invalid JSON at line {line_no}, byte {at}: {shown(line)} ({reason}; JSON has no NaN, "
                       "Infinity or numbers beyond 1e308)", path=path)


def _cumulative_problem(prev: Any, doc: Any, k: int) -> str:
    """Why ``doc`` cannot be a later ``--status-interval`` report of the same run as ``prev`` ("" if it can):
    fio's reports are cumulative, so per job the I/O counts, runtimes, maximum latencies and json+ bin
    counts never fall and minimum latencies never rise."""
    where = "client_stats" if prev.jobs is _U else "jobs"
    a = prev.jobs if prev.jobs is not _U else prev.client_stats
    b = doc.jobs if doc.jobs is not _U else doc.client_stats
    names_a = [(e.jobname, e.hostname) for e in a or ()]
    names_b = [(e.jobname, e.hostname) for e in b or ()]
    if names_a != names_b:
        return (f"document {k} has the jobs {[n for n, _ in names_a][:4]}, the last one "
                f"{[n for n, _ in names_b][:4]}")
    for i, (ea, eb) in enumerate(zip(a, b, strict=True)):
        for dn in ("read", "write", "trim", "mixed"):
            da, db = getattr(ea, dn), getattr(eb, dn)
            if da is _U or db is _U:
                continue
            at = f"{where}[{i}].{dn}"
            for name in ("total_ios", "io_bytes", "runtime"):
                x, y = getattr(da, name), getattr(db, name)
                if x is not _U and y is not _U and y < x:
                    return f"{at}.{name} falls from {x} (document {k}) to {y} (the last)"
            for name in ("clat_ns", "lat_ns", "clat", "lat"):
                la, lb = getattr(da, name), getattr(db, name)
                if la is _U or lb is _U or not (la.N if la.N is not _U else da.io_bytes):
                    continue
                if lb.max < la.max or lb.min > la.min:
                    return (f"{at}.{name} min/max go from {la.min}/{la.max} (document {k}) to {lb.min}/{lb.max} "
                            "(the last)")
                if la.bins is not _U and lb.bins is not _U:
                    fell = next((key for key, c in la.bins.items() if lb.bins.get(key, 0) < c), None)
                    if fell is not None:
                        return f"{at}.{name}.bins[{fell}] falls from document {k} to the last"
    return ""


def _check_cumulative(data: bytes, docs: list[tuple[int, int]], doc: Any, path: str) -> None:
    """Several documents in one file must be one run's ``--status-interval`` reports (not outputs of
    several runs put in one file): same jobs, cumulative counts (:func:`_cumulative_problem`)."""
    for k, (s, e) in enumerate(docs[:-1], start=1):
        try:
            prev = _DECODER.decode(data[s:e])
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            continue  # an earlier report that cannot be read is not used anyway
        problem = _cumulative_problem(prev, doc, k)
        if problem:
            raise IngestError(f"{len(docs)} fio documents that are not one run's --status-interval reports "
                              f"({problem}): outputs of several runs in one file? Ingest them as separate files",
                              path=path)


def read_fio_json(data: bytes, path: str = "<bytes>") -> FioDocument:
    """Find the fio JSON document(s) in the bytes of one output file, and decode the last one typed.

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
        complete one before it, invalid JSON, JSON that is not fio output, or a value of the wrong
        type or out of range (see the module docstring).
    """
    if data[:3] == _BOM:  # fio writes none; an editor may have added it
        data = data[3:]
    stripped = data.strip()
    if not stripped:
        raise IngestError("empty file: no fio output (fio killed before it wrote its JSON?)", path=path)
    if stripped[:1] == b"{":
        try:
            doc = _decode(data, path)
        except msgspec.DecodeError:
            pass  # several documents, or truncated: take the slow path
        else:
            return _checked(FioDocument(doc=doc), data, path)
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
                doc = _decode(data[trailing_start:], path)
            except msgspec.DecodeError as exc:
                if "truncated" not in str(exc):
                    raise _invalid_json(exc, data, trailing_start, path) from None
            else:
                return _checked(FioDocument(doc=doc, text=text), data[trailing_start:], path)
        raise IngestError(
            f"truncated JSON: the fio document starting at byte {starts[0]} never ends "
            f"({len(data)} bytes; fio killed while writing?)",
            path=path,
        )
    s, e = docs[-1]
    last = data[s:e]
    if len(docs) > 1 and all(data[a:b] == last for a, b in docs[:-1]):
        docs = docs[-1:]  # the same document repeated (copies concatenated): it is one document
    try:
        doc = _decode(last, path)
    except msgspec.DecodeError as exc:
        raise _invalid_json(exc, data, s, path) from None
    if len(docs) > 1:
        _check_cumulative(data, docs, doc, path)
    out = FioDocument(doc=doc, n_docs=len(docs), text=text)
    reasons = []
    sig = next((m.group(0) for m in map(_SIGNAL.search, text) if m), None)
    if sig:
        reasons.append(f"fio printed '{sig}'")
    if trailing_start is not None:
        reasons.append(f"the last of {len(docs) + 1} JSON documents is truncated")
    out = _checked(out, data[s:e], path)
    if not reasons and len(docs) > 1 and _unfinished(doc):
        reasons.append(
            f"last of {len(docs)} --status-interval documents is an interim report "
            "(jobs reached neither runtime nor size): the final report is missing"
        )
    if reasons:
        out.partial = True
        out.reason = "; ".join(reasons)
    return out


def _checked(fd: FioDocument, source: bytes, path: str) -> FioDocument:
    doc = fd.doc
    if doc.jobs is _U and doc.client_stats is _U:
        raw = _lenient_json(source)
        keys = sorted(raw)[:8] if isinstance(raw, dict) else "?"
        raise IngestError(f"not fio output: JSON without 'jobs' or 'client_stats' (has {keys})", path=path)
    if not doc.jobs and not doc.client_stats:
        raise IngestError("fio output lists no jobs", path=path)
    return fd


def _global_options(doc: Any) -> dict:
    """``global options``: a dict, or (some fio client/server outputs) a list of dicts, merged in order."""
    g = doc.global_options
    if g is _U:
        return {}
    if isinstance(g, list):
        merged: dict = {}
        for part in g:
            merged.update(part)
        return merged
    return g


def _opt_int(value: Any, kb: int = 1024) -> int | None:
    """An integer option (``iodepth``, ``numjobs``, ``rwmixread``) read as fio reads it, or None."""
    try:
        return _fo.parse_size(value, kb)
    except (ValueError, TypeError):
        return None


def _kb_base(opts: Mapping[str, Any]) -> int | None:
    kb = _opt_int(opts.get("kb_base", 1024))
    return kb if kb in (1000, 1024) else None


def _unfinished(doc: Any) -> bool:
    """An interim --status-interval report: some job reached neither its runtime nor its size."""
    gopts = _global_options(doc)
    for job in doc.jobs or doc.client_stats or []:
        if job.jobname == _ALL_CLIENTS or job.error:
            continue
        opts = {**gopts, **(job.job_options or {})}
        try:
            runtime_ms = _fo.parse_time_us(opts["runtime"]) / 1000.0 if "runtime" in opts else None
        except (ValueError, TypeError):
            runtime_ms = None
        blocks = [d for d in (job.read, job.write, job.trim, job.mixed) if d is not _U]
        ran_ms = max((d.runtime for d in blocks), default=0.0)
        if runtime_ms and ran_ms >= runtime_ms - 1:
            continue
        kb = _kb_base(opts)
        text = opts.get("io_size") or opts.get("io_limit") or opts.get("size")
        size = _opt_int(text, kb) if (kb and text is not None) else None
        if size is None:
            return False  # cannot tell
        n = 1
        if "group_reporting" in opts:
            n = _opt_int(opts.get("numjobs", 1) or 1) or 1
        io = sum(d.io_bytes for d in blocks)
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


_TRUE = frozenset({"", "1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _factors(opts: Mapping[str, Any]) -> tuple[dict, tuple, tuple, tuple[str, ...]]:
    """Factor columns from merged options: (common, bs per direction, random_pct per direction, notes).

    A value fio could not have read gives the factor's unknown value (``-1``, NaN, ``""``) and a note.
    """
    notes: list[str] = []
    rw_text = opts.get("rw", opts.get("readwrite", "read"))
    rw = str(rw_text).split(":")[0].strip() or "read"
    if rw not in _fo.RW_VALUES:
        notes.append(f"job options rw={shown(rw_text)}: not an rw value fio knows (stored '')")
        rw = ""
    kb = _kb_base(opts)
    if kb is None:
        notes.append(f"job options kb_base={shown(opts.get('kb_base'))}: fio allows 1000 or 1024 (sizes unknown)")
    bs_text = opts.get("bs", opts.get("blocksize"))
    if kb is None or (bs_text is None and any(k in opts for k in ("bssplit", "bsrange", "blocksize_range"))):
        bs = (-1, -1, -1)  # variable block size (or unreadable sizes): no single value
    elif bs_text is not None and not str(bs_text).strip():
        bs = (-1, -1, -1)
        notes.append("job options bs='': fio needs a value (bs_bytes -1)")
    else:
        bs = _per_direction(bs_text, lambda s: _opt_int(s, kb) if _opt_int(s, kb) is not None else -1, 4096)
        if -1 in bs:
            notes.append(f"job options bs={shown(bs_text)}: not a size fio reads (bs_bytes -1)")
    is_random = rw.startswith("rand")
    if not rw:
        rnd = (_NAN, _NAN, _NAN)
    elif is_random:
        rnd = _per_direction(opts.get("percentage_random"),
                             lambda s: float(v) if (v := _opt_int(s)) is not None and v <= 100 else _NAN, 100.0)
        if any(r != r for r in rnd):
            notes.append(f"job options percentage_random={shown(opts.get('percentage_random'))}: "
                         "not a percentage from 0 to 100 (random_pct NaN)")
    else:
        rnd = (0.0, 0.0, 0.0)
    if rw in ("rw", "readwrite", "randrw"):
        if "rwmixread" in opts:
            v = _opt_int(opts["rwmixread"])
            mix = float(v) if v is not None and v <= 100 else _NAN
            what = f"rwmixread={shown(opts['rwmixread'])}"
        elif "rwmixwrite" in opts:
            v = _opt_int(opts["rwmixwrite"])
            mix = 100.0 - v if v is not None and v <= 100 else _NAN
            what = f"rwmixwrite={shown(opts['rwmixwrite'])}"
        else:
            mix, what = 50.0, ""
        if mix != mix:
            notes.append(f"job options {what}: not a percentage from 0 to 100 (rwmixread_pct NaN)")
    elif rw in ("read", "randread"):
        mix = 100.0
    elif rw:
        mix = 0.0
    else:
        mix = _NAN
    if "direct" in opts or "buffered" in opts:
        name = "direct" if "direct" in opts else "buffered"
        text = str(opts[name]).strip().lower()
        if text in _TRUE or text in _FALSE:
            flag = text in _TRUE
        elif (v := _opt_int(text)) is not None:
            flag = v != 0
        else:
            flag = False
            notes.append(f"job options {name}={shown(opts[name])}: not a boolean fio reads (direct stored False)")
        direct = flag if name == "direct" else not flag
    else:
        direct = False
    ints = {}
    for name in ("iodepth", "numjobs"):
        if name not in opts:
            ints[name] = 1
            continue
        v = _opt_int(opts[name])
        if v is None:
            notes.append(f"job options {name}={shown(opts[name])}: not a number fio reads ({name} -1)")
            v = -1
        ints[name] = v
    common = {
        "rw": rw,
        "rwmixread_pct": mix,
        "iodepth": ints["iodepth"],
        "numjobs": ints["numjobs"],
        "ioengine": str(opts.get("ioengine", "psync")),
        "direct": bool(direct),
        "target": str(opts.get("filename", opts.get("directory", ""))),
    }
    return common, bs, rnd, tuple(notes)


def _main_direction(rw: str) -> str:
    if "trim" in rw and "write" not in rw:
        return "trim"
    if rw in ("write", "randwrite", "trimwrite"):
        return "write"
    return "read"


# ---- rows --------------------------------------------------------------------------------------

#: Fields of one row tuple, in the order :func:`emit_rows` builds it (the ``runs`` schema order;
#: ``tests/test_ingest_fio.py`` checks that the two agree).
RUN_FIELDS: tuple[str, ...] = (
    "study", "run_id", "repetition", "run_order", "host", "job", "job_index", "direction", "tool",
    "rw", "bs_bytes", "rwmixread_pct", "random_pct", "iodepth", "numjobs", "ioengine", "direct", "target",
    "iops", "bw_bytes_per_s", "io_bytes", "total_ios", "runtime_s", "lat_mean_ns", "lat_stdev_ns", "lat_min_ns",
    "lat_max_ns", "clat_mean_ns", "clat_stdev_ns", "slat_mean_ns", *(col for _, col in _PCT_KEYS),
    "usr_cpu_pct", "sys_cpu_pct", "error", "partial",
    "fio_version", "started_at", "hostname", "kernel", "source_file", "note",
)
_RUN_FIELD_SET = frozenset(RUN_FIELDS)
#: Keys of a runner's ``point.json`` beside the factors that become columns of ``runs`` when present:
#: the set-up and block of the run in the study's design (``storagebench._study.DESIGN_COLUMNS``).
_DESIGN_KEYS = ("setup", "block")
_PCT_STR = tuple(key for key, _ in _PCT_KEYS)


#: ``bytes.translate`` table of json+ bins text for ``numpy.fromstring(sep=",")`` (JSON whitespace, quotes
#: and ``{`` are deleted first): digits kept, ``:`` and ``}`` (end of a block) separate numbers like ``,``,
#: and any other byte is ``x``, which no number has (fromstring stops there: the text is refused)
_BINS_TEXT = bytes(c if (0x30 <= c <= 0x39 or c == 0x2C) else 0x2C if c in b":}" else 0x78 for c in range(256))
#: 0, 10, 100, ... 10**18: a key of ``w`` digits (1 <= w <= 18, no leading zero) is in ``[_POW10[w-1], _POW10[w])``
_POW10 = np.r_[0, 10 ** np.arange(1, 19, dtype=np.int64)]


#: bytes of json+ bins text parsed at a time by :meth:`RowSink.parse_bins` (its temporaries then stay in
#: the CPU cache and are reused: 47 -> 39 ms and no page faults on the multijob corpus, against one piece)
_BINS_STEP = 512 << 10


def _parse_bins_text(raws: list[bytes]) -> tuple | None:
    """(keys, counts, bins per block) of the raw json+ bins objects ``raws`` (int64 arrays), or None when
    they are not the text :meth:`RowSink.parse_bins` takes (see there)."""
    text = b"".join([*raws, b"  "])  # two blanks after the last block: a[closing + 2] is in range
    a = np.frombuffer(text, dtype=np.uint8)
    ends = np.cumsum(np.fromiter(map(len, raws), dtype=np.int64, count=len(raws)))
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    if not ((a[starts] == 0x7B).all() and (a[ends - 1] == 0x7D).all()):
        return None  # not an object (an object inside one leaves an empty number between separators)
    quotes = np.flatnonzero(a == 0x22)
    if len(quotes) % 2:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy < 2.3 warns and stops early where 2.3+ raises
            # a number per quote (per key and per count, when the checks below pass): allocated once;
            # fewer numbers raise, more are found by the key check (a key holding a separator)
            values = np.fromstring(text.translate(_BINS_TEXT, b' \t\r\n"{'), dtype=np.int64,
                                   sep=",", count=len(quotes))
    except (ValueError, DeprecationWarning):
        return None  # a character no integer key or count has (sign, '.', 'e', letter, escape ...)
    opening, closing = quotes[0::2], quotes[1::2]
    after = a[closing + 1]
    if not ((after == 0x3A) | ((after == 0x20) & (a[closing + 2] == 0x3A))).all():
        return None  # a string that is not a key (a string count)
    keys, counts = values[0::2], values[1::2]
    # each key's characters are exactly its digits: 10**(width-1) <= key < 10**width (0 <= key < 10 for
    # width 1). Else a leading zero, a space, nothing, or a ',' or ':' in it (its number is then only
    # the part before; with every string a key this is also the only way to more numbers than quotes)
    width = closing - opening - 1
    if len(width) and not (1 <= width.min() and width.max() <= 18
                           and (_POW10[width - 1] <= keys).all() and (keys < _POW10[width]).all()):
        return None
    if len(counts) and int(counts.max()) >= MAX_VALUE:
        return None  # 2**63-1 is also where fromstring saturates: let the decoder judge
    n = (np.searchsorted(quotes, ends) - np.searchsorted(quotes, starts)) // 2
    if not n.all():
        return None
    step = np.diff(keys) <= 0
    step[(np.cumsum(n) - n)[1:] - 1] = False  # a block's first key may be below the last one of the block before
    if step.any():
        return None  # keys not increasing: a repeated key, which a dict keeps once
    return keys, counts, n  # every other number: views, made contiguous once all blocks are parsed


class RowSink:
    """What :func:`emit_rows` appends to: row tuples (:data:`RUN_FIELDS` order) of ``runs`` and
    ``all_clients``, each with its study factors (one dict per row, shared by the rows of one file),
    and the json+ histogram blocks in the compact form of :func:`histogram_frame`."""

    def __init__(self, raw_bins: bool = False) -> None:
        self.runs: list[tuple] = []
        self.runs_extra: list[dict] = []
        self.all_clients: list[tuple] = []
        self.all_extra: list[dict] = []
        self.hist_blocks: list[tuple] = []
        #: json+ bins of each block (checked when decoded), as int64 arrays: bin values (ns) and counts.
        #: Made right after the file is decoded, while its dict is in the CPU cache (~2x faster than
        #: walking every file's dict at the end, and the dicts are freed at once)
        self.hist_keys: list = []
        self.hist_counts: list = []
        #: per block: fio's clat_ns.N (-1: not printed, or not a fio block), and (row index in ``runs``,
        #: JSON path) for the note
        self.hist_n: list[int] = []
        self.hist_checks: list[tuple | None] = []
        #: per block: the raw JSON of its bins (:class:`msgspec.Raw`, the fast decoder's, ``raw_bins``) until
        #: a step of :meth:`parse_bins` has made them arrays, else None
        self.hist_raw: list = []
        #: decode json+ bins raw and parse them in steps (:meth:`parse_bins`); False: as dicts
        self.raw_bins = raw_bins
        self._parsed = 0  # blocks before this one are parsed (or not raw)
        self._pending = 0  # bytes of raw bins not parsed yet
        self._steps: list[tuple] = []  # (block indices, keys, counts, bins per block) of each step
        self._failed = False  # some raw bins are not the text parse_bins takes: read the batch again
        #: the flat bin values and counts of every block, when :meth:`parse_bins` made them in one piece
        self._flat: tuple | None = None

    def parse_step(self) -> None:
        """Parse the raw bins of the files added since the last step (:func:`_parse_bins_text`).

        Called between files (a file's rows are all there or all rolled back: never half a file), once
        ~``_BINS_STEP`` bytes of bins are waiting, so that their text is parsed while it is still in the
        CPU cache and only a few files' bytes are kept alive; :meth:`parse_bins` parses the rest.
        """
        at = [k for k in range(self._parsed, len(self.hist_raw)) if self.hist_raw[k] is not None]
        if at and not self._failed:
            try:
                part = _parse_bins_text([self.hist_raw[k] for k in at])
            except Exception:  # noqa: BLE001 - never a file's fault: the batch is read again with the decoder
                part = None
            if part is None:
                self._failed = True
            else:
                self._steps.append((at, *part))
        for k in at:
            self.hist_raw[k] = None  # the file's bytes are freed
        self._parsed = len(self.hist_raw)
        self._pending = 0

    def parse_bins(self) -> bool:
        """Turn the raw json+ bins of every block into int64 arrays (bin values in ns, counts).

        The JSON text of the blocks is joined and parsed, a step of a few hundred KiB at a time
        (:meth:`parse_step`), by one ``numpy.fromstring`` once whitespace, quotes and ``{`` are deleted
        and ``:`` and ``}`` made separators. The values are taken only when the text is what
        :data:`_DECODER` reads as ``dict[int, int]`` with these same numbers, which is checked on the
        text: each block one object (an object inside it leaves an empty number), every string a key
        (followed by ``:`` or `` :``) whose characters are decimal digits without a leading zero,
        every value a JSON integer (no sign, fraction or exponent), each number at most 2**63-2, one
        number per key and value, and the keys of a block increasing (a repeated key would collapse in
        a dict). fio writes exactly this; so does ``json.dump`` of fio's output.

        Returns
        -------
        bool
            False when some block is not such text: nothing is changed, and the batch must be read
            again with :data:`_DECODER` (``raw_bins=False``), which gives the dict semantics or the
            file's error.
        """
        self.parse_step()
        if self._failed:
            return False
        steps, self._steps = self._steps, []
        if not steps:
            return True
        at = [k for step in steps for k in step[0]]
        keys, counts, n = (np.concatenate(x) if len(x) > 1 else np.ascontiguousarray(x[0])
                           for x in zip(*(step[1:] for step in steps), strict=True))
        if len(at) == len(self.hist_blocks):  # every block (fio's json+ only): the arrays in one piece
            self._flat = (keys, counts)
            self.hist_blocks = [(*b[:5], m) for b, m in zip(self.hist_blocks, n.tolist(), strict=True)]
            return True
        block_start = np.cumsum(n) - n
        for j, k in enumerate(at):
            b0, b1 = block_start[j], block_start[j] + n[j]
            self.hist_keys[k], self.hist_counts[k] = keys[b0:b1], counts[b0:b1]
            self.hist_blocks[k] = (*self.hist_blocks[k][:5], int(n[j]))
        return True

    def check_bins(self, counts, n_bins=None) -> None:
        """Note the ``runs`` rows whose json+ bins do not add up to fio's ``clat_ns.N`` (one vector
        sum per batch: ``counts`` is the flat count array of :meth:`histograms`). fio's bins and N
        count the same completions; they differ in an interim ``--status-interval`` report (a
        completion landing between the two reads) or in an edited file."""
        if not self.hist_blocks:
            return
        if n_bins is None:
            n_bins = np.fromiter((b[5] for b in self.hist_blocks), dtype=np.int64, count=len(self.hist_blocks))
        starts = np.zeros(len(n_bins), dtype=np.int64)
        np.cumsum(n_bins[:-1], out=starts[1:])
        sums = np.add.reduceat(counts, starts) if len(counts) else np.zeros(len(n_bins), np.int64)
        expected = np.array(self.hist_n, dtype=np.int64)
        for k in np.flatnonzero((expected >= 0) & (sums != expected)):
            n = self.hist_n[k]
            row, loc = self.hist_checks[k]
            note = f"{_at(loc)}.clat_ns.bins add up to {int(sums[k])} completions, clat_ns.N is {n}"
            old = self.runs[row]
            self.runs[row] = (*old[:-1], f"{old[-1]}; {note}" if old[-1] else note)

    def histograms(self):
        """The ``histograms`` DataFrame of the blocks gathered (not yet validated)."""
        if self._failed or self._steps or any(r is not None for r in self.hist_raw[self._parsed:]):
            raise RuntimeError("json+ bins not parsed: call parse_bins first (and read the batch again if it "
                               "returns False)")
        keys, counts = self._flat or (np.concatenate(self.hist_keys), np.concatenate(self.hist_counts))
        frame = histogram_frame(self.hist_blocks, keys, counts)
        self.check_bins(counts, np.fromiter((b[5] for b in self.hist_blocks), dtype=np.int64,
                                            count=len(self.hist_blocks)))
        return frame


#: JSON names of the 17 secondary metrics of a row, for notes: (block, field) in row order.
_SECONDARY = (("lat", "mean"), ("lat", "stddev"), ("lat", "min"), ("lat", "max"), ("clat", "mean"),
              ("clat", "stddev"), ("slat", "mean"), *(("clat", f"percentile.{k}") for k in _PCT_STR))
_LAT4 = operator.attrgetter("mean", "stddev", "min", "max")


def _old_units(version: str) -> bool | None:
    """fio < 3 (µs latency blocks ``lat``/``clat``/``slat``): True; fio >= 3 (``*_ns``): False; unknown: None."""
    if version.startswith(("fio-1.", "fio-2.")):
        return True
    if version.startswith("fio-"):
        return False
    return None


_OLD_UNITS: dict[str, bool | None] = {}  # _old_units, memoised per version string
_VERSION = re.compile(r"fio-(\d+)\.(\d+)")


def _prints_bw_bytes(version: str) -> bool:
    """fio >= 3.4 always prints ``bw_bytes``; fio 2.x and 3.0-3.3 print only ``bw`` (KiB/s)."""
    m = _VERSION.match(version)
    return bool(m) and (int(m[1]), int(m[2])) >= (3, 4)


#: a float must be below 2**63 (float(2**63 - 1) == 2**63, so ``<=`` would let 2**63 through)
_LIMIT = 2.0**63


def _lat_problem(block: Any) -> str:
    """Why a latency block's statistics contradict each other ("" when they do not): fio's mean
    of the samples lies within [min, max], their standard deviation is at most max - min, and it
    is 0 only when every sample is the same (min == max)."""
    lo, hi, mean, sd = block.min, block.max, block.mean, block.stddev
    if lo == lo and hi == hi and lo > hi:
        return f"min {lo} > max {hi}"
    if mean == mean and lo == lo and hi == hi and not lo <= mean <= hi:
        return f"mean {mean!r} outside [min {lo}, max {hi}]"
    if sd == sd and lo == lo and hi == hi and sd > hi - lo:
        return f"stddev {sd!r} > max - min ({hi - lo})"
    if sd == 0 and lo == lo and hi == hi and lo < hi:
        return f"stddev 0 while min {lo} < max {hi}"
    return ""


def _metrics(d: Any, loc: tuple, old: bool | None, version: str, path: str) -> tuple[tuple, list[str]]:
    """The metric fields of a row (``iops`` ... ``clat_p99_99_ns``, :data:`RUN_FIELDS` order) from one
    direction block, in the schema's units, and the notes on values set to NaN (module docstring).

    ``loc`` is ``(where, index, direction)``: the JSON path ``jobs[0].read`` of the block, made into
    text only when a note or an error needs it (the usual block needs none)."""
    notes: list[str] = []
    if old is None:  # no version: the blocks say which units
        old = d.clat_ns is _U and d.lat_ns is _U and d.slat_ns is _U and not (
            d.clat is _U and d.lat is _U and d.slat is _U)
    if old:
        lat, clat, slat, suffix, f = d.lat, d.clat, d.slat, "", 1000.0
    else:
        lat, clat, slat, suffix, f = d.lat_ns, d.clat_ns, d.slat_ns, "_ns", 1.0
    if d.bw_bytes is not _U:
        bw = float(d.bw_bytes)
    elif d.bw is not _U and not _prints_bw_bytes(version):
        bw = d.bw * 1024.0
        notes.append(f"{_at(loc)}.bw_bytes: not printed by this fio; bw_bytes_per_s = bw (KiB/s) x 1024")
    else:
        raise IngestError(f"{_at(loc)}.bw_bytes: missing ({version or 'fio'} always prints it)", path=path)
    io = d.io_bytes
    if old and d.io_kbytes is _U:  # fio 2.x: "io_bytes" holds KiB
        io *= 1024
        if io > MAX_VALUE:
            raise IngestError(f"{_at(loc)}.io_bytes = {d.io_bytes} KiB: more than 2**63-1 bytes", path=path)
    total = d.total_ios
    if total is _U:
        if not old:
            raise IngestError(f"{_at(loc)}.total_ios: missing (fio 3 always prints it)", path=path)
        total = -1  # fio 2.1 does not count I/Os
    if lat is not _U and clat is not _U and slat is not _U and clat.percentile is not _U:
        if f == 1.0:
            sec = (*_LAT4(lat), clat.mean, clat.stddev, slat.mean, *_PCT_VALUES(clat.percentile))
        else:
            sec = (*(v * f for v in _LAT4(lat)), clat.mean * f, clat.stddev * f, slat.mean * f,
                   *(v * f for v in _PCT_VALUES(clat.percentile)))
    else:
        where = _at(loc)
        nan4 = (_NAN,) * 4
        pct = clat.percentile if clat is not _U else _U
        sec = (*((v * f for v in _LAT4(lat)) if lat is not _U else nan4),
               *((clat.mean * f, clat.stddev * f) if clat is not _U else (_NAN, _NAN)),
               slat.mean * f if slat is not _U else _NAN,
               *((v * f for v in _PCT_VALUES(pct)) if pct is not _U else (_NAN,) * len(_PCT_STR)))
        for name, block in (("lat", lat), ("clat", clat), ("slat", slat)):
            if block is _U:
                notes.append(f"{where}.{name}{suffix}: missing (its columns are NaN)")
        if clat is not _U and pct is _U:
            did = clat.N if clat.N is not _U else max(total, 0) + d.io_bytes
            if did:  # fio leaves the percentiles out when the direction completed no I/O
                notes.append(f"{where}.clat{suffix}.percentile: missing (clat_p*_ns are NaN)")
    total_sec = sum(sec)  # NaN if a value is missing
    if total_sec == total_sec and min(sec) >= 0.0 and max(sec) < _LIMIT:  # the usual case: all in range ...
        # ... and the statistics consistent (every block is there: no value above is NaN)
        if lat.min <= lat.mean <= lat.max and lat.stddev <= lat.max - lat.min \
                and clat.min <= clat.mean <= clat.max and clat.stddev <= clat.max - clat.min \
                and slat.min <= slat.mean <= slat.max and slat.stddev <= slat.max - slat.min \
                and (lat.stddev or lat.min == lat.max) and (clat.stddev or clat.min == clat.max) \
                and (slat.stddev or slat.min == slat.max):
            return (d.iops, bw, io, total, d.runtime / 1000.0, *sec), notes
    where = _at(loc)
    out = list(sec)
    blocks = {"lat": lat, "clat": clat, "slat": slat}
    missing_pct = []
    for i, v in enumerate(sec):
        if 0.0 <= v < _LIMIT:
            continue
        out[i] = _NAN
        name, key = _SECONDARY[i]
        if blocks[name] is _U or (key.startswith("percentile") and blocks[name].percentile is _U):
            continue  # noted above
        if v != v:
            if key.startswith("percentile."):
                missing_pct.append(key.split(".", 1)[1])
            else:
                notes.append(f"{where}.{name}{suffix}.{key}: missing (NaN)")
        else:
            raw = v / f
            notes.append(f"{where}.{name}{suffix}.{key} = {raw!r}: impossible (allowed 0 to 2**63-1); stored NaN")
    if missing_pct:
        notes.append(f"{where}.clat{suffix}.percentile: no {', '.join(missing_pct)} (NaN)")
    for name, block in blocks.items():  # contradicting statistics: the block's mean/stddev/min/max are NaN
        problem = _lat_problem(block) if block is not _U else ""
        if problem:
            for i, (n, key) in enumerate(_SECONDARY):
                if n == name and not key.startswith("percentile"):
                    out[i] = _NAN
            notes.append(f"{where}.{name}{suffix}: {problem} (impossible; its mean, stddev, min, max stored NaN)")
    return (d.iops, bw, io, total, d.runtime / 1000.0, *out), notes


def _at(loc: tuple) -> str:
    """``(where, index, direction)`` as the JSON path ``jobs[0].read`` (direction ``""``: ``jobs[0]``)."""
    where, idx, name = loc
    return f"{where}[{idx}].{name}" if name else f"{where}[{idx}]"


def _cpu(value: float, where: str, notes: list[str]) -> float:
    """A job's ``usr_cpu``/``sys_cpu`` (%), or NaN with a note; called only when it is not in range."""
    if 0.0 <= value < _LIMIT:
        return value
    if value != value:
        notes.append(f"{where}: missing (NaN)")
    else:
        notes.append(f"{where} = {value!r}: impossible (allowed 0 to 2**63-1); stored NaN")
    return _NAN


#: started_at must fit pandas' datetime64[ns]: 1677-09-22 .. 2262-04-11.
_TS_MIN, _TS_MAX = -9_223_372_036.0, 9_223_372_036.0
#: a fio JSON time stamp is after 2000-01-01 (fio's JSON output is from 2012 on) and fits datetime64[ns]
_FIO_TS_MIN = 946_684_800.0


def _started_at(doc: Any, entries: list, notes: list[str]) -> datetime | None:
    """fio's ``timestamp_ms`` (or ``timestamp``, s) minus the longest job ``elapsed`` (s)."""
    ms = doc.timestamp_ms
    ts = ms / 1000.0 if ms == ms else doc.timestamp
    if ts != ts:
        return None  # fio 2.1 and client output print no time stamp
    elapsed = [e.elapsed for e in entries if e.elapsed == e.elapsed]
    longest = max(elapsed, default=0)
    start = ts - longest
    if not (longest >= 0 and _FIO_TS_MIN <= start < _TS_MAX):
        name = f"timestamp_ms = {ms}" if ms == ms else f"timestamp = {doc.timestamp}"
        notes.append(f"{name} minus elapsed = {longest} s is not a time fio can print (2000 to 2262): "
                     "started_at NaT")
        return None
    return datetime.fromtimestamp(start, tz=_UTC)


def _iso_utc(value: Any, path: str) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise IngestError(f"provenance started_at must be an ISO 8601 time, got {value!r}", path=path) from None
    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    if not _TS_MIN < dt.timestamp() < _TS_MAX:
        raise IngestError(f"provenance started_at {value!r} is outside 1677..2262 (what the tables can hold)",
                          path=path)
    return dt


def _factor_fields(common: dict, bs: tuple, rnd: tuple, notes: tuple) -> tuple[str, tuple, tuple[str, ...]]:
    """(``rw``, the factor fields ``rw`` ... ``target`` of a row for read, write and trim, notes)."""
    out = []
    for i in range(3):
        out.append((common["rw"], int(bs[i]), common["rwmixread_pct"],
                    float(rnd[i]) if rnd[i] is not None else _NAN, common["iodepth"], common["numjobs"],
                    common["ioengine"], common["direct"], common["target"]))
    return common["rw"], tuple(out), notes


_UNKNOWN_FIELDS = _factor_fields(_UNKNOWN, (-1, -1, -1), (_NAN,) * 3, ())
_FIELDS_CACHE: dict[tuple, tuple[str, tuple, tuple]] = {}


def _job_factor_fields(gopts: dict, gkey: tuple | None, jopts: dict) -> tuple[str, tuple, tuple[str, ...]]:
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


def _decode_meta(data: bytes, kind: type, what: str, path: str) -> Any:
    """point.json / provenance.json bytes, decoded typed (big integers stay integers and are refused)."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc, data, path, what) from None
    except msgspec.DecodeError as exc:
        raise IngestError(f"{what}: invalid JSON: {exc}", path=path) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc, path) from None
    except RecursionError:
        raise IngestError(f"{what}: JSON nested too deeply", path=path) from None


def check_point(point: Any, path: str) -> Any:
    """A runner ``point.json`` (its identity and study factors), type-checked.

    Parameters
    ----------
    point : bytes, mapping, checked struct or None
        The file's bytes (decoded here) or its parsed JSON: ``format_version`` (int; absent: 0, a file
        written before the key existed), ``study`` (str), ``run_id`` (str), ``repetition`` (int, 0..2**63-1), ``run_order`` (int,
        -1..2**63-1), ``factors`` and ``options`` (objects of strings, numbers, booleans, null, or
        arrays of them), ``setup`` and ``block`` (int >= 1 or null: the study's design). Other keys are
        ignored.
    path : str
        File named in errors.

    Returns
    -------
    msgspec.Struct
        With those attributes (defaults ``""``, ``""``, 0, -1, {}, {}).

    Raises
    ------
    IngestError
        Not an object, or a value of the wrong type or out of range (the message names the key,
        the value and what is allowed), or a ``format_version`` newer than
        :data:`storagebench.records.POINT_FORMAT_VERSION` (the message names it).
    """
    if point is None:
        return _NO_POINT
    if isinstance(point, _Point):
        return point
    if isinstance(point, (bytes, bytearray)):
        return _point_version(_decode_meta(point, _Point, "point.json", path), path)
    if not isinstance(point, Mapping):
        raise IngestError(f"point.json must be a JSON object, got {type(point).__name__}", path=path)
    try:
        return _point_version(msgspec.convert(dict(point), _Point), path)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc, dict(point), path, "point.json") from None


def _point_version(point: Any, path: str) -> Any:
    """Formats 0 (no ``format_version``: written before it existed, the same keys) and
    :data:`~storagebench.records.POINT_FORMAT_VERSION` are read; a newer one is refused by name."""
    if point.format_version > POINT_FORMAT_VERSION:
        raise IngestError(f"point.json format_version {point.format_version} was written by a newer storagebench; "
                          f"this one reads formats 0 to {POINT_FORMAT_VERSION}: upgrade storagebench to ingest it",
                          path=path)
    return point


def check_provenance(prov: Any, path: str) -> Provenance:
    """A runner ``provenance.json``, read by :meth:`storagebench.records.Provenance.from_json` (every
    format version it reads; each field's type checked), with ``started_at`` an ISO 8601 time.

    Parameters
    ----------
    prov : bytes, mapping, Provenance or None
        The file's bytes (decoded here) or its parsed JSON.
    path : str
        File named in errors.

    Returns
    -------
    storagebench.records.Provenance
        Ingest reads ``fio_version``, ``kernel``, ``hostname``, ``started_at`` and ``spec_hash``.

    Raises
    ------
    IngestError
        Not a JSON object, a field of the wrong type or a newer format version (the message names the
        key and the value), or ``started_at`` not an ISO 8601 time from 1677 to 2262.
    """
    if prov is None:
        return _NO_PROV
    if isinstance(prov, (bytes, bytearray)):
        prov = _decode_meta(prov, Any, "provenance.json", path)
    if not isinstance(prov, (Mapping, Provenance)):
        raise IngestError(f"provenance.json must be a JSON object, got {type(prov).__name__}", path=path)
    if isinstance(prov, Mapping):
        data = dict(prov)
        if isinstance(data.get("started_at"), datetime):
            data["started_at"] = data["started_at"].isoformat()
        try:
            prov = Provenance.from_json(data, path="provenance.json")
        except SchemaError as exc:
            raise IngestError(str(exc), path=path) from None
    _iso_utc(prov.started_at, path)
    return prov


def _decode_or_none(data: bytes, path: str) -> Any:
    """:data:`_DECODER`'s document of ``data`` (None: not one JSON document), or its error as an IngestError."""
    try:
        return _decode(data, path)
    except msgspec.DecodeError:
        return None


def emit_rows(
    sink: RowSink,
    data: bytes,
    path: str,
    identity: Any = None,
    provenance: Any = None,
    file_id: str | None = None,
) -> None:
    """Parse one fio output and append its rows to ``sink`` (see :func:`parse_fio_output`).

    The rows are appended as the file is read: a file that raises part-way leaves rows behind,
    which the caller drops (:meth:`storagebench.ingest._Collector.rollback`; :func:`parse_fio_output`
    uses a fresh sink). ``file_id`` is :func:`file_run_id` of ``data`` when the caller has it already.
    This is the hot path of ingest: strings for notes and errors are only made when needed.
    """
    doc = None
    if data[:1] == b"{":  # the usual file: one document and nothing else (read_fio_json's first case)
        try:
            # json+ bins raw when the sink parses them (many files at a time); _DECODER's document and
            # errors otherwise: the fast decoder checks all but the bins, so any error it meets is
            # reported as _DECODER reports it (the first in the file, which may be in the bins)
            doc = (_RAW_DECODER if sink.raw_bins else _DECODER).decode(data)
        except msgspec.DecodeError:
            doc = None  # several documents, or not JSON: read_fio_json (the same errors as before)
        except (msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            doc = _decode_or_none(data, path)
    if doc is not None and (doc.jobs or (doc.client_stats and doc.jobs is _U)):
        partial = False
    else:
        fd = read_fio_json(data, path)
        doc, partial = fd.doc, fd.partial
    point = _NO_POINT if identity is None else check_point(identity, path)
    prov = _NO_PROV if provenance is None else check_provenance(provenance, path)
    run_id = point.run_id or file_id or file_run_id(data)
    factors = point.factors
    extra = {k: v for k, v in factors.items() if k not in _RUN_FIELD_SET} if factors else _NO_EXTRA
    if point.setup is not None or point.block is not None:  # the plan's design: columns like factors
        extra = {**extra, **{k: v for k in _DESIGN_KEYS if (v := getattr(point, k)) is not None}}
    gopts = doc.global_options
    if type(gopts) is not dict:
        gopts = _global_options(doc)
    if point.options:  # a runner run: point.json's options are what every host ran (see module doc)
        gopts = {**gopts, **{k: v for k, v in point.options.items() if v is not None}}
    gkey = tuple(gopts.items())  # unhashable (a list from point.json): _job_factor_fields copes
    has_gopts = doc.global_options is not _U
    client_mode = doc.client_stats is not _U and doc.jobs is _U
    entries = doc.client_stats if client_mode else doc.jobs
    where = "client_stats" if client_mode else "jobs"
    doc_notes: list[str] = []
    started = _iso_utc(prov.started_at, path) if prov.started_at else _started_at(doc, entries, doc_notes)
    head = (point.study, run_id, point.repetition, point.run_order)
    fio_version = doc.fio_version or prov.fio_version or ""
    old = _OLD_UNITS.get(fio_version)
    if old is None and fio_version not in _OLD_UNITS:
        if len(_OLD_UNITS) > 256:
            _OLD_UNITS.clear()
        old = _OLD_UNITS[fio_version] = _old_units(fio_version)
    kernel = prov.kernel or ""
    source = path if path.isascii() else _display_path(path)
    local_hostname = prov.hostname or ""
    runs, runs_extra, hist_blocks = sink.runs, sink.runs_extra, sink.hist_blocks
    seen: dict[tuple[str, str], int] = {}
    json_plus = False  # some block has json+ bins ...
    no_bins: list[tuple[int, tuple]] = []  # ... then these rows that did I/O without any get a note
    for idx, entry in enumerate(entries):
        name = entry.jobname
        if client_mode:
            hostname = entry.hostname or ""
            host = host_label(hostname, entry.port if entry.port is not _U else "")  # sock:/path for sockets
        else:
            host = "local"
            hostname = local_hostname
        is_all = client_mode and name == _ALL_CLIENTS
        if is_all:
            host = _ALL_CLIENTS
        key = (host, name)
        job_index = seen.get(key, 0)
        seen[key] = job_index + 1
        if has_gopts or entry.job_options is not _U:
            rw, fields, fnotes = _job_factor_fields(gopts, gkey, entry.job_options or {})
        else:  # fio < 2.2 prints no options: the factors are unknown, not fio's defaults
            rw, fields, fnotes = _UNKNOWN_FIELDS
        read, write, trim = entry.read, entry.write, entry.trim
        if entry.mixed is not _U and read is _U and write is _U and trim is _U:
            # unified_rw_reporting=1: fio reports one "mixed" block (with =both, "mixed" is the sum of
            # the read/write/trim blocks also printed, and is skipped so nothing counts twice)
            todo = ((0, "mixed", entry.mixed),)
        else:
            if read is _U or write is _U or (trim is _U and old is False):
                gone = [dn for dn, d in (("read", read), ("write", write), ("trim", trim))
                        if d is _U and (dn != "trim" or old is False)]
                raise IngestError(f"{where}[{idx}] ({name!r}): no {' or '.join(gone)} block (fio prints read, "
                                  f"write{' and trim' if old is False else ''} for every job)", path=path)
            todo = [(i, dn, d) for i, dn, d in ((0, "read", read), (1, "write", write), (2, "trim", trim))
                    if d is not _U and ((d.total_ios or 0) > 0 or d.io_bytes > 0)]
            if not todo:
                main = _main_direction(rw)
                d = getattr(entry, main)
                if d is _U:
                    raise IngestError(f"{where}[{idx}].{main}: missing (fio prints it for every job; rw={rw!r})",
                                      path=path)
                todo = ((DIRECTIONS.index(main), main, d),)
        jnotes = [*doc_notes, *fnotes] if (doc_notes or fnotes) else []
        usr, sys_ = entry.usr_cpu, entry.sys_cpu
        if not (0.0 <= usr < _LIMIT and 0.0 <= sys_ < _LIMIT):
            usr = _cpu(usr, f"{where}[{idx}].usr_cpu", jnotes)
            sys_ = _cpu(sys_, f"{where}[{idx}].sys_cpu", jnotes)
        prefix = (*head, host, name, job_index)
        tail = (usr, sys_, entry.error, partial, fio_version, started, hostname, kernel, source)
        for i, dname, d in todo:
            metrics, mnotes = _metrics(d, (where, idx, dname), old, fio_version, path)
            note = "; ".join(jnotes + mnotes) if (jnotes or mnotes) else ""
            row = (*prefix, dname, "fio", *fields[i], *metrics, *tail, note)
            if is_all:
                sink.all_clients.append(row)
                sink.all_extra.append(extra)
                continue
            runs.append(row)
            runs_extra.append(extra)
            clat = d.clat_ns
            bins = _U if clat is _U else clat.bins
            raw = None
            if type(bins) is _Raw:  # the fast decoder's bins: parsed in steps (RowSink.parse_bins)
                raw = bins
                if len(raw) < 64:
                    small = bytes(raw)
                    if small[:1] == b"{" and b'"' not in small:  # {}: an object without a key
                        raw = bins = None  # (a longer empty one is left to the decoder by parse_bins)
            if not bins:
                if (d.total_ios or 0) > 0:
                    no_bins.append((len(runs) - 1, (where, idx, dname)))
                continue
            json_plus = True
            if raw is None:
                n = len(bins)
                sink.hist_keys.append(np.fromiter(bins, dtype=np.int64, count=n))
                sink.hist_counts.append(np.fromiter(bins.values(), dtype=np.int64, count=n))
            else:
                n = -1  # known once parsed
                sink.hist_keys.append(None)
                sink.hist_counts.append(None)
            sink.hist_raw.append(raw)
            if raw is not None:
                sink._pending += len(raw)
            hist_blocks.append((run_id, host, name, job_index, dname, n))
            sink.hist_n.append(-1 if clat.N is _U else clat.N)
            sink.hist_checks.append((len(runs) - 1, (where, idx, dname)))
    if json_plus and no_bins:
        for row, loc in no_bins:
            note = f"{_at(loc)}.clat{'_ns' if old is not True else ''}.bins: missing in json+ output (no histogram rows)"
            r = runs[row]
            runs[row] = (*r[:-1], f"{r[-1]}; {note}" if r[-1] else note)


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
        Checked by :func:`check_point`.
    provenance : mapping, optional
        The runner's ``provenance.json``: ``fio_version``, ``kernel``, ``hostname``, ``started_at`` (ISO UTC).
        Without it ``started_at`` is fio's ``timestamp`` minus the longest job ``elapsed`` (s).
        Checked by :func:`check_provenance`.

    Returns
    -------
    FioRows
        ``runs``: one row per job entry x direction that did I/O (``total_ios > 0`` or
        ``io_bytes > 0``); a job entry without any I/O (an error) gets one row for the main
        direction of its ``rw``. ``job_index`` numbers entries of the same name (per host).
        ``all_clients``: fio's ``"All clients"`` entries. With ``unified_rw_reporting=1`` the one row
        per entry has ``direction="mixed"`` (fio's ``mixed`` block). ``histograms``: json+ ``clat_ns.bins``
        of the emitted directions, one row per non-empty bin (``bin_ns`` in ns). Study factors
        whose name is a ``runs`` column are dropped (fio's own output wins). ``note`` says which
        values were missing or impossible and stored as NaN (module docstring); ``""`` otherwise.

    Raises
    ------
    IngestError
        See :func:`read_fio_json`; also a missing or impossible core metric, a job entry without
        direction blocks, a bad json+ bin, and a bad ``identity``/``provenance``. The message names
        the JSON path, the value and what is allowed.

    Notes
    -----
    :func:`storagebench.ingest.ingest_paths` does not go through the row dicts: it appends row tuples
    of many files to one sink and builds each table once (:func:`runs_frame`, :func:`histogram_frame`).
    """
    sink = RowSink()
    emit_rows(sink, data, path, identity, provenance)
    if sink.hist_blocks:
        counts = np.concatenate(sink.hist_counts)
        sink.check_bins(counts, np.array([len(k) for k in sink.hist_keys], dtype=np.int64))
        bins, counts = np.concatenate(sink.hist_keys).tolist(), counts.tolist()
    else:
        bins, counts = [], []
    out = FioRows(hist_blocks=sink.hist_blocks, hist_bins=bins, hist_counts=counts)
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
    if not rows:
        return empty_frame(table)
    data = {}
    for name, col in zip(RUN_FIELDS, zip(*rows, strict=True), strict=True):
        dtype = _RUN_DTYPES[name]
        if dtype == "string":
            data[name] = pd.arrays.ArrowStringArray(pa.array(col, type=pa.string()))
        elif dtype.startswith("datetime64"):
            data[name] = _datetime_column(col, dtype)
        else:
            data[name] = np.array(col, dtype=dtype)
    df = pd.DataFrame(data, copy=False)  # no consolidation of same-dtype columns into blocks (copies)
    if extras and any(extras):
        df = pd.concat([df, pd.DataFrame(extras)], axis=1)
    return df


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_NAT = np.iinfo(np.int64).min
_DATETIME_OR_NONE = frozenset({datetime, type(None)})


def _datetime_column(values: tuple, dtype: str):
    """``pandas.to_datetime(list(values), utc=True).astype(dtype)`` for datetimes (naive ones are UTC) and
    None (NaT), from each one's microseconds since the epoch: ~20x faster than pandas' object parsing."""
    if not set(map(type, values)) <= _DATETIME_OR_NONE:
        return pd.to_datetime(list(values), utc=True).astype(dtype)
    us = np.fromiter((_NAT if v is None else ((v if v.tzinfo else v.replace(tzinfo=_UTC)) - _EPOCH) // _US
                      for v in values), dtype=np.int64, count=len(values))
    nat = us == _NAT
    ns = us * 1000
    ns[nat] = _NAT
    return pd.to_datetime(ns.view("datetime64[ns]"), utc=True).astype(dtype)


_EMPTY: dict[str, Any] = {}


def empty_frame(table: str):
    """:func:`storagebench.schema.empty`, made once per table and copied (an empty 49-column frame
    costs ~2 ms to build)."""
    if table not in _EMPTY:
        _EMPTY[table] = _schema.empty(table)
    return _EMPTY[table].copy()

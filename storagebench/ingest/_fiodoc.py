"""fio's JSON output read typed: the document's structs, :func:`read_fio_json`, and the clear messages
for values the typed decoder refuses.

The JSON is decoded by ``msgspec`` into the structs below (:class:`_Doc`), so every value ingest reads
is type-checked while it is decoded; a refused value becomes an :class:`~storagebench.errors.IngestError`
naming the file, the JSON path, the value and what is allowed (:func:`validation_error`). The rules
(what is refused, what becomes NaN with a note) are :mod:`storagebench.ingest.fio`'s docstring.
Internal to :mod:`storagebench.ingest`.
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Union

import msgspec
import pyarrow as pa
from msgspec import Meta, Struct

from ..errors import IngestError, shown
from ..fio import options as _fo
from ..schema import PERCENTILES, percentile_column
from ._fiofactors import global_options, kb_base, opt_int

#: fio's clat percentile keys (``"99.900000"``) and the ``runs`` columns they become
PCT_KEYS = tuple((f"{p:.6f}", percentile_column(p)) for p in PERCENTILES)
_DOC_START = re.compile(rb"^\{[ \t]*\r?$", re.M)
_DOC_END = re.compile(rb"^\}[ \t]*\r?$", re.M)
_SIGNAL = re.compile(r"terminating on signal (\d+)")
ALL_CLIENTS = "All clients"  # client/server: fio's entry of the sum over hosts (all_clients, never runs)
_NAN = math.nan


#: Largest value fio can print in a count, size, time or rate: fio keeps them in 64-bit integers
#: and storagebench stores them in int64 / float64 columns (2**63 - 1).
MAX_VALUE = 2**63 - 1


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
    "_Pct", [(f"p{i}", _Wide, msgspec.field(name=key, default=_NAN)) for i, (key, _) in enumerate(PCT_KEYS)],
    gc=False,
)
PCT_VALUES = operator.attrgetter(*(f"p{i}" for i in range(len(PCT_KEYS))))


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


class _SteadyState(Struct, gc=False):
    """A job's ``steadystate`` block (fio ``stat.c``, printed only when the job had ``steadystate_duration``):
    the rule as fio read it (``ss``, ``"iops:10.000000%"``), its window (``duration``, s), fio's verdict
    (``attained``: 1 when the job was stopped at steady state) and the last computed ``criterion``
    (``"2.6%"``, a string: fio prints ``"-nan%"`` for a window without samples)."""

    ss: str = ""
    duration: Union[_Count, _Unset] = _U
    attained: Union[_Count, _Unset] = _U
    criterion: str = ""


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
    steadystate: Union[_SteadyState, _Unset] = _U


class _Doc(Struct, gc=False):
    """The parts of a fio JSON document that ingest reads (everything else is skipped unread)."""

    fio_version: str = msgspec.field(name="fio version", default="")
    timestamp: _Wide = _NAN  # type: ignore[assignment]
    timestamp_ms: _Wide = _NAN  # type: ignore[assignment]
    global_options: Union[_Options, list[_Options], _Unset] = msgspec.field(name="global options", default=_U)
    jobs: Union[list[_Job], _Unset] = _U
    client_stats: Union[list[_Job], _Unset] = _U


DECODER = msgspec.json.Decoder(_Doc)


def _retyped(cls: type, name: str, types: dict[str, Any]) -> type:
    """A copy of Struct ``cls`` (same fields, JSON names and defaults) with the types of ``types``."""
    fields = []
    for f in msgspec.structs.fields(cls):
        default = msgspec.NODEFAULT if f.required else f.default
        fields.append((f.name, types.get(f.name, f.type), msgspec.field(name=f.encode_name, default=default)))
    return msgspec.defstruct(name, fields, gc=False)


#: The fast decoder of ingest's usual file: :class:`_Doc` with every ``clat_ns.bins`` left as raw JSON
#: (:class:`msgspec.Raw`, a slice of the input), which
#: :meth:`~storagebench.ingest._fiorows.RowSink.parse_bins` turns into int64 arrays many files at a time
#: (the same values, type- and range-checked as strictly as :data:`DECODER` checks them; anything
#: else sends the batch back to :data:`DECODER`). Decoding bins into a dict of Python ints and
#: converting them to arrays was most of the cost of typed decoding (69 -> 26 ms for the 2,000 files
#: of the multijob corpus), and of ingest.
_LatRaw = _retyped(_Lat, "_LatRaw", {"bins": Union[msgspec.Raw, _Unset]})
_DirRaw = _retyped(_Dir, "_DirRaw", {"clat_ns": Union[_LatRaw, _Unset]})
#: The options too are left raw (:func:`resolve_options` decodes each distinct text once: a study repeats a few
#: option sets in many files).
_JobRaw = _retyped(_Job, "_JobRaw", {**{d: Union[_DirRaw, _Unset] for d in ("read", "write", "trim", "mixed")},
                                     "job_options": Union[msgspec.Raw, _Unset]})
_DocRaw = _retyped(_Doc, "_DocRaw", {"jobs": Union[list[_JobRaw], _Unset],
                                     "client_stats": Union[list[_JobRaw], _Unset],
                                     "global_options": Union[msgspec.Raw, _Unset]})
RAW_DECODER = msgspec.json.Decoder(_DocRaw)
#: the decoders of the option fields as :class:`_Job` and :class:`_Doc` type them
_JOB_OPTIONS = msgspec.json.Decoder(_Options)
_GLOBAL_OPTIONS = msgspec.json.Decoder(Union[_Options, list[_Options]])
#: decoded option texts: (decoder, text) -> value (shared by the files holding that text; never written into)
_OPTIONS_SEEN: dict[tuple, Any] = {}


def _options(decoder: Any, raw: Any) -> Any:
    """The value of the raw option text ``raw`` as ``decoder`` decodes it, decoded once per distinct text."""
    key = (decoder, bytes(raw))
    value = _OPTIONS_SEEN.get(key)
    if value is None:
        value = decoder.decode(key[1])
        if len(_OPTIONS_SEEN) >= 4096:
            _OPTIONS_SEEN.clear()
        _OPTIONS_SEEN[key] = value
    return value


def resolve_options(doc: Any) -> bool:
    """Replace the raw ``global options`` and ``job options`` of a :data:`RAW_DECODER` document by their values,
    exactly as :data:`DECODER` types them. False (the document half done) when some text is not such a value:
    the caller then decodes the file with DECODER, which reports that error as it always has."""
    try:
        if doc.global_options is not _U:
            doc.global_options = _options(_GLOBAL_OPTIONS, doc.global_options)
        for entries in (doc.jobs, doc.client_stats):
            for e in entries or ():
                if e.job_options is not _U:
                    e.job_options = _options(_JOB_OPTIONS, e.job_options)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False
    return True


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


def validation_error(exc: msgspec.ValidationError, source: Any, path: str, what: str = "") -> IngestError:
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


def not_utf8(exc: UnicodeDecodeError, path: str) -> IngestError:
    """The IngestError for a JSON string holding bytes that are not UTF-8 (the byte and its offset)."""
    return IngestError(f"a JSON string holds bytes that are not UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
                       f"offset {exc.start} of the string); fio writes UTF-8", path=path)


def _decode(data: bytes, path: str) -> Any:
    """Typed decode of one JSON document; msgspec.DecodeError (not JSON) is left to the caller."""
    try:
        return DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, data, path) from None
    except UnicodeDecodeError as exc:
        raise not_utf8(exc, path) from None
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
            prev = DECODER.decode(data[s:e])
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


def _unfinished(doc: Any) -> bool:
    """An interim --status-interval report: some job reached neither its runtime nor its size."""
    gopts = global_options(doc)
    for job in doc.jobs or doc.client_stats or []:
        if job.jobname == ALL_CLIENTS or job.error:
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
        kb = kb_base(opts)
        text = opts.get("io_size") or opts.get("io_limit") or opts.get("size")
        size = opt_int(text, kb) if (kb and text is not None) else None
        if size is None:
            return False  # cannot tell
        n = 1
        if "group_reporting" in opts:
            n = opt_int(opts.get("numjobs", 1) or 1) or 1
        io = sum(d.io_bytes for d in blocks)
        if io == size * n:
            continue
        return True
    return False


def decode_or_none(data: bytes, path: str) -> Any:
    """:data:`DECODER`'s document of ``data`` (None: not one JSON document), or its error as an IngestError."""
    try:
        return _decode(data, path)
    except msgspec.DecodeError:
        return None


# ---- duplicated JSON keys ---------------------------------------------------------------------------


def _pairs_once(pairs: list) -> dict:
    seen: dict = {}
    for k, v in pairs:
        if k in seen:
            raise _Duplicate(k, seen[k], v)
        seen[k] = v
    return seen


_IOPS_KEY = re.compile(rb'"iops"')


class _Duplicate(Exception):
    pass


def _iops_keys(data: bytes, bins: list) -> int:
    """The ``"iops"`` in ``data`` outside the raw json+ bins ``bins`` (:class:`msgspec.Raw` views into ``data``,
    RAW_DECODER's): half of a json+ file is its bins, whose text holds no key but digits (or the batch is read
    again with DECODER, whose bins are dicts: the whole text is then searched). A bins text starts with ``{``
    and ends with ``}``, so no ``"iops"`` lies across its edge. Where a view is not found inside ``data``,
    the whole text is searched."""
    if not bins:
        return len(_IOPS_KEY.findall(data))
    base = pa.py_buffer(data).address
    spans = sorted((pa.py_buffer(b).address - base, len(b)) for b in bins)
    findall, n, pos = _IOPS_KEY.findall, 0, 0
    for start, size in spans:
        if start < pos or start + size > len(data):  # not views into data: search all of it
            return len(findall(data))
        n += len(findall(data, pos, start))
        pos = start + size
    return n + len(findall(data, pos))


def _check_duplicate_keys(data: bytes, doc: Any, path: str) -> None:
    """Refuse a fio document in which an object holds a key twice (``"iops": 0, ..., "iops": 7262``).

    JSON leaves duplicated keys undefined; msgspec (and orjson, the stdlib) keep the last, so an edited
    or concatenated file could pass off either value. fio writes each key once. The check is cheap on
    the usual file: each direction block fio prints has exactly one ``"iops"``, so its byte count (a
    C-level scan of the text outside the raw json+ bins, :func:`_iops_keys`) must equal the blocks decoded; only
    when it does not is
    the document read again with the standard library, which names the duplicated key (the count is a
    compiled regular expression's ``findall``: 2.6x faster than ``bytes.count`` on json+ text, whose
    many ``"`` defeat the latter's skip table). Another key
    given twice is not looked for (a scan per key costs as much again); where it matters the table
    gate's relations stand behind it (two ``io_bytes`` with the last wrong break bandwidth x runtime).
    """
    entries = (doc.jobs or []) if doc.jobs is not _U else []
    if doc.client_stats is not _U and doc.client_stats:
        entries = [*entries, *doc.client_stats]
    blocks = 0
    bins = []
    for e in entries:
        for d in (e.read, e.write, e.trim, e.mixed):
            if d is not _U:
                blocks += 1
                clat = d.clat_ns
                if clat is not _U and type(clat.bins) is msgspec.Raw:
                    bins.append(clat.bins)
    if _iops_keys(data, bins) == blocks:
        return
    # the slow reading (the standard library's json): only for a file whose counts are off
    try:
        json.loads(data, object_pairs_hook=_pairs_once)
    except _Duplicate as dup:
        key, first, last = dup.args
        shown = [repr(x) if not isinstance(x, dict) else "{...}" for x in (first, last)]
        raise IngestError(f"the key {key!r} appears twice in one JSON object ({shown[0]}, then {shown[1]}): "
                          "fio writes each key once, and which value a reader keeps is a guess; refused",
                          path=path) from None
    except (ValueError, RecursionError):
        return  # not one stdlib-readable document: the typed decoder's reading stands

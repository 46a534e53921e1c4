"""A runner run's ``point.json`` (its identity and study factors) and ``provenance.json``, read typed.

:func:`check_point` and :func:`check_provenance` (re-exported by :mod:`storagebench.ingest.fio`): each
value type- and range-checked, a newer format version refused by name, the same clear messages as for
fio's own JSON (:func:`storagebench.ingest._fiodoc.validation_error`). Also the run's times as fio's output
gives them (:func:`fio_times`: ``started_at`` without provenance, ``reported_at``). Internal to
:mod:`storagebench.ingest`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Union

import msgspec
from msgspec import Meta, Struct

from ..errors import IngestError, SchemaError
from ..records import POINT_FORMAT_VERSION, Provenance
from ._fiodoc import MAX_VALUE, not_utf8, validation_error

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


#: what a run without ``point.json`` / ``provenance.json`` reads as (every field its default)
NO_POINT = _Point()
NO_PROVENANCE = Provenance()


#: started_at must fit pandas' datetime64[ns]: 1677-09-22 .. 2262-04-11.
TS_MIN, TS_MAX = -9_223_372_036.0, 9_223_372_036.0


def iso_utc(value: Any, path: str) -> datetime | None:
    """``provenance.json``'s ``started_at`` (ISO 8601 text or a datetime; naive = UTC) as a UTC datetime,
    None when absent; an IngestError when it is not ISO 8601 or outside 1677..2262."""
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
    if not TS_MIN < dt.timestamp() < TS_MAX:
        raise IngestError(f"provenance started_at {value!r} is outside 1677..2262 (what the tables can hold)",
                          path=path)
    return dt


def _decode_meta(data: bytes, kind: type, what: str, path: str) -> Any:
    """point.json / provenance.json bytes, decoded typed (big integers stay integers and are refused)."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, data, path, what) from None
    except msgspec.DecodeError as exc:
        raise IngestError(f"{what}: invalid JSON: {exc}", path=path) from None
    except UnicodeDecodeError as exc:
        raise not_utf8(exc, path) from None
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
        return NO_POINT
    if isinstance(point, _Point):
        return point
    if isinstance(point, (bytes, bytearray)):
        return _point_version(_decode_meta(point, _Point, "point.json", path), path)
    if not isinstance(point, Mapping):
        raise IngestError(f"point.json must be a JSON object, got {type(point).__name__}", path=path)
    try:
        return _point_version(msgspec.convert(dict(point), _Point), path)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, dict(point), path, "point.json") from None


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
        return NO_PROVENANCE
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
    iso_utc(prov.started_at, path)
    return prov


#: a fio JSON time stamp is after 2000-01-01 (fio's JSON output is from 2012 on) and fits datetime64[ns]
_FIO_TS_MIN = 946_684_800.0
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


def epoch_us(ts: float) -> int:
    """A POSIX time stamp (s, >= 0) in whole µs since the epoch, rounded as ``datetime.fromtimestamp`` rounds it
    (CPython ``_PyTime_ObjectToTimeval``: the fraction of a second times 10**6, half to even): a row's times
    are these ints, made into ``datetime64[ns, UTC]`` a column at a time (:func:`~storagebench.ingest.fio.runs_frame`)."""
    frac, whole = math.modf(ts)
    return int(whole) * 1_000_000 + round(frac * 1e6)


def datetime_us(dt: datetime) -> int:
    """An aware (or naive = UTC) datetime in whole µs since the epoch (see :func:`epoch_us`)."""
    return ((dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)) - _EPOCH) // _US


def us_datetime(us: int | None) -> datetime | None:
    """:func:`epoch_us`'s µs since the epoch as a UTC datetime (None stays None)."""
    return None if us is None else _EPOCH + timedelta(microseconds=us)


def fio_times(doc: Any, entries: list, notes: list[str], start_known: bool) -> tuple[int | None, int | None]:
    """fio's report time and the run's start as fio's output gives them: ``(started, reported)``, in µs since
    the epoch (:func:`epoch_us`).

    ``reported`` is fio's ``timestamp_ms`` (ms; or ``timestamp``, s), written right after its jobs ended: the
    end of the measured window to the ms plus fio's clean-up. ``started`` is that minus the longest ``elapsed``
    (whole s). ``None`` (NaT) when fio printed no time stamp (fio 2.1, client output) or one it cannot print
    (noted; ``started`` only when not ``start_known``: the runner's ``provenance.json`` gives it then)."""
    ms = doc.timestamp_ms
    ts = ms / 1000.0 if ms == ms else doc.timestamp
    if ts != ts:
        return None, None  # fio 2.1 and client output print no time stamp
    if not _FIO_TS_MIN <= ts < TS_MAX:
        lost = "reported_at NaT" if start_known else "started_at and reported_at NaT"
        notes.append(f"{_ts_name(doc)} is not a time fio can print (2000 to 2262): {lost}")
        return None, None
    reported = epoch_us(ts)
    elapsed = [e.elapsed for e in entries if e.elapsed == e.elapsed]
    longest = max(elapsed, default=0)
    start = ts - longest
    if not start_known and not (longest >= 0 and _FIO_TS_MIN <= start < TS_MAX):
        notes.append(f"{_ts_name(doc)} minus elapsed = {longest} s is not a time fio can print (2000 to 2262): "
                     "started_at NaT")
        return None, reported
    return epoch_us(start), reported


def _ts_name(doc: Any) -> str:
    ms = doc.timestamp_ms
    return f"timestamp_ms = {ms}" if ms == ms else f"timestamp = {doc.timestamp}"

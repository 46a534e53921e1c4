"""The factor columns of a fio run (``rw``, ``bs_bytes``, ``iodepth`` ...) from its job options.

The options are the output's ``global options`` merged with each job's ``job options`` (a runner's
``point.json`` options win: :mod:`storagebench.ingest.fio`); option values are read with fio's own
grammar (:mod:`storagebench.fio.options`: ``parse_size`` with the job's ``kb_base``), fio's defaults
(HOWTO) stand for options that were not given, and a value fio could not have read gives the
factor's unknown value (``-1``, NaN, ``""``) and a ``note``. Internal to :mod:`storagebench.ingest`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from .. import schema as _schema
from ..errors import shown
from ..fio import options as _fo

#: The factor columns of a fio row, in the order :func:`_factor_fields` gives them: the ``runs`` columns of
#: role ``factor`` (:func:`storagebench.schema.columns`) but ``tool``, which the reader sets.
FACTOR_FIELDS: tuple[str, ...] = tuple(n for n in _schema.names("runs", role="factor") if n != "tool")
#: Each factor's unknown value (-1, NaN, "", False: :attr:`storagebench.schema.Column.unknown`)
_UNKNOWN = {c.name: c.unknown for c in _schema.columns("runs", role="factor") if c.name in FACTOR_FIELDS}
_NAN = math.nan
_U = msgspec.UNSET  # a field fio did not print


def global_options(doc: Any) -> dict:
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


def opt_int(value: Any, kb: int = 1024) -> int | None:
    """An integer option (``iodepth``, ``numjobs``, ``rwmixread``) read as fio reads it, or None."""
    try:
        return _fo.parse_size(value, kb)
    except (ValueError, TypeError):
        return None


def kb_base(opts: Mapping[str, Any]) -> int | None:
    """The ``kb_base`` of merged options (default 1024), or None when it is not one fio allows (1000, 1024)."""
    kb = opt_int(opts.get("kb_base", 1024))
    return kb if kb in (1000, 1024) else None


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


def _rwmix(rw: str, opts: Mapping[str, Any], notes: list[str]) -> float:
    """``rwmixread_pct`` of a job (``rwmixread``/``rwmixwrite`` of a mixed ``rw``; 100 or 0 otherwise; NaN and a
    note for a value fio could not have read)."""
    if rw in ("rw", "readwrite", "randrw"):
        if "rwmixread" in opts:
            v = opt_int(opts["rwmixread"])
            mix = float(v) if v is not None and v <= 100 else _NAN
            what = f"rwmixread={shown(opts['rwmixread'])}"
        elif "rwmixwrite" in opts:
            v = opt_int(opts["rwmixwrite"])
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
    return mix


def _direct(opts: Mapping[str, Any], notes: list[str]) -> bool:
    """``direct`` of a job (``direct=``, or not ``buffered=``; False and a note for a value fio does not read)."""
    if "direct" in opts or "buffered" in opts:
        name = "direct" if "direct" in opts else "buffered"
        text = str(opts[name]).strip().lower()
        if text in _TRUE or text in _FALSE:
            flag = text in _TRUE
        elif (v := opt_int(text)) is not None:
            flag = v != 0
        else:
            flag = False
            notes.append(f"job options {name}={shown(opts[name])}: not a boolean fio reads (direct stored False)")
        direct = flag if name == "direct" else not flag
    else:
        direct = False
    return direct


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
    kb = kb_base(opts)
    if kb is None:
        notes.append(f"job options kb_base={shown(opts.get('kb_base'))}: fio allows 1000 or 1024 (sizes unknown)")
    bs_text = opts.get("bs", opts.get("blocksize"))
    if kb is None or (bs_text is None and any(k in opts for k in ("bssplit", "bsrange", "blocksize_range"))):
        bs = (-1, -1, -1)  # variable block size (or unreadable sizes): no single value
    elif bs_text is not None and not str(bs_text).strip():
        bs = (-1, -1, -1)
        notes.append("job options bs='': fio needs a value (bs_bytes -1)")
    else:
        # fio's options have minval 1 (options.c): a block size of 0 is not one it runs
        bs = _per_direction(bs_text, lambda s: v if (v := opt_int(s, kb)) is not None and v >= 1 else -1, 4096)
        if -1 in bs:
            notes.append(f"job options bs={shown(bs_text)}: not a size fio reads (bs_bytes -1)")
    is_random = rw.startswith("rand")
    if not rw:
        rnd = (_NAN, _NAN, _NAN)
    elif is_random:
        rnd = _per_direction(opts.get("percentage_random"),
                             lambda s: float(v) if (v := opt_int(s)) is not None and v <= 100 else _NAN, 100.0)
        if any(r != r for r in rnd):
            notes.append(f"job options percentage_random={shown(opts.get('percentage_random'))}: "
                         "not a percentage from 0 to 100 (random_pct NaN)")
    else:
        rnd = (0.0, 0.0, 0.0)
    mix = _rwmix(rw, opts, notes)
    direct = _direct(opts, notes)
    ints = {}
    for name in ("iodepth", "numjobs"):
        if name not in opts:
            ints[name] = 1
            continue
        v = opt_int(opts[name])
        if v is None or v < 1:  # minval 1 in fio's options.c
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


def main_direction(rw: str) -> str:
    """The direction of ``rw`` whose block a job that did no I/O reports (read, write or trim)."""
    if "trim" in rw and "write" not in rw:
        return "trim"
    if rw in ("write", "randwrite", "trimwrite"):
        return "write"
    return "read"


def _factor_fields(common: dict, bs: tuple, rnd: tuple, notes: tuple) -> tuple[str, tuple, tuple[str, ...]]:
    """(``rw``, the factor fields of a row (:data:`FACTOR_FIELDS`) for read, write and trim, notes); a factor
    the options do not give is unknown."""
    out = []
    for i in range(3):
        fields = {**_UNKNOWN, **common, "bs_bytes": int(bs[i]),
                  "random_pct": float(rnd[i]) if rnd[i] is not None else _NAN}
        out.append(tuple(fields[n] for n in FACTOR_FIELDS))  # by name: FACTOR_FIELDS names the tuple
    return common["rw"], tuple(out), notes


UNKNOWN_FIELDS = _factor_fields(_UNKNOWN, (-1, -1, -1), (_NAN,) * 3, ())
_FIELDS_CACHE: dict[tuple, tuple[str, tuple, tuple]] = {}


def job_factor_fields(gopts: dict, gkey: tuple | None, jopts: dict) -> tuple[str, tuple, tuple[str, ...]]:
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

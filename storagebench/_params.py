"""The notebook-parameter gate: plain JSON-typed values, checked against the declared type, copied.

Every value that becomes a notebook parameter passes :func:`check_parameters` (the gate) right before
papermill writes it into the injected cell, whatever route it came by: ``-p NAME=VALUE`` of ``publish``,
``report`` and ``testbed`` (parsed by :func:`parse_value`), a ``batch`` parameter file
(``_batch.load_param_sets``), or the Python API (:func:`storagebench.publish.execute_notebook`,
``publish_report(parameters=)``, ``run_batch``, ``studies``' ``params``).

What passes
-----------
Plain JSON-typed values only: ``str``, ``int``, ``float``, ``bool``, ``None``, and lists and mappings
(with ``str`` keys) of these, within bounds (:data:`MAX_TEXT_CHARS`, :data:`MAX_ITEMS`,
:data:`MAX_DEPTH`, :data:`MAX_NODES`, integers within 64 bits). Refused, with a message naming the
parameter, the value and what is allowed:

* anything else: ``bytes`` (YAML ``!!binary``), ``set``, ``datetime``, objects, a tuple's cousins
  (a ``tuple`` is taken as a list);
* floats that are not finite: JSON has no ``NaN`` or ``Infinity`` (the parameters are stored in the
  executed notebook's metadata and in ``report.json``, where orjson would write ``NaN`` as ``null``), and
  no parameter of a shipped notebook means anything by them;
* strings holding a lone surrogate (U+D800..U+DFFF, what Python makes of undecodable bytes in
  ``argv``): the executed notebook and ``report.json`` are UTF-8 files, which cannot hold one.

Every value, down to each element of a list and each value of a mapping, is checked against the
annotation of the notebook's ``parameters`` cell (:func:`type_mismatch`): ``int``, ``float`` (an ``int``
is a float), ``str``, ``bool``, ``list[X]``, ``tuple[X, ...]``, ``dict[K, V]``, ``Optional[X]``,
``Union[...]``, ``X | None``, ``Literal[...]``; ``typing.`` names and their capitalised forms
(``List``, ``Dict``, ``Sequence``, ``Mapping``) too. An unannotated parameter, ``object``, ``Any`` or
an annotation not understood here admits any plain value, never more.

What reaches papermill is a fresh copy made of built-in types only, through a JSON round trip
(:func:`plain`): no subclass with its own ``__repr__``, no object shared with the caller. papermill's
Python translator writes a ``str`` as a double-quoted literal escaped by ``unicode_escape`` (quotes,
backslashes, newlines, NUL, U+2028 all escaped); ``tests/test_param_gate.py`` parses every injected
cell and checks it is literal assignments only, and runs one notebook to check the kernel sees the
same values.

Nothing here imports the rest of storagebench except :mod:`storagebench._safeyaml` and
:mod:`storagebench.errors`.
"""

from __future__ import annotations

import ast
import json
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from ._safeyaml import PlainLoader, load_yaml
from .errors import PublishError, shown

__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_ITEMS",
    "MAX_DEPTH",
    "MAX_NODES",
    "ALLOWED",
    "parse_value",
    "plain",
    "type_mismatch",
    "parameter_type_ok",
    "check_parameters",
]

#: Longest string (a value, an element, a key), characters: PATH_MAX, the longest path Linux takes.
MAX_TEXT_CHARS = 4096
#: Most elements of one list or entries of one mapping.
MAX_ITEMS = 1000
#: Deepest nesting: a scalar is 1, ``[1]`` is 2, ``{"a": [1]}`` is 3.
MAX_DEPTH = 8
#: Most values in one parameter, every element and key counted.
MAX_NODES = 10_000
#: Smallest and largest integer: 64 bits, signed or unsigned (counts, sizes, seeds).
MIN_INT, MAX_INT = -(2**63), 2**64 - 1
#: Longest ``-p`` value text, characters.
MAX_VALUE_TEXT = 64 * 1024

#: What a parameter may hold, for messages.
ALLOWED = ("plain data: text, an integer, a finite number, true/false, null, or lists and mappings "
           "(text keys) of these")


def _where(name: str, where: str) -> str:
    return f"parameter {name!r}" + (f" of {where}" if where else "")


def parse_value(text: str, *, name: str, where: str = "-p") -> Any:
    """A ``-p NAME=VALUE`` value: YAML read by :class:`~storagebench._safeyaml.PlainLoader`, then :func:`plain`.

    Parameters
    ----------
    text : str
        The text after ``=`` (``4``, ``0.5``, ``[a, b]``, ``{qos_p99_ms: 2}``, ``"quoted text"``).
    name : str
        The parameter, for messages.
    where : str
        The route, for messages (``"-p"``, a file name).

    Returns
    -------
    object
        A plain value (built-in types only). A date-like or base-60 plain scalar stays the text typed
        (``2024-01-01``, ``1:30``); ``yes``/``no``/``on``/``off`` are booleans (YAML 1.1, as PyYAML reads them).

    Raises
    ------
    PublishError
        A YAML tag (``!!binary``, ``!!python/...``, ``!x``), bad YAML, or a value :func:`plain` refuses; the
        message names the parameter.
    """
    if not isinstance(text, str):
        raise PublishError(f"{where} {name}: the value must be text, got {type(text).__name__}")
    if len(text) > MAX_VALUE_TEXT:
        raise PublishError(f"{where} {name}=: a value of {len(text):,} characters; the limit is {MAX_VALUE_TEXT:,}")
    value = load_yaml(text, where=f"{where} {name}={shown(text, 60)}", error=PublishError, loader=PlainLoader)
    return plain(value, name=name, where=where)


def _bad(name: str, where: str, path: str, value: Any, why: str) -> PublishError:
    at = f" at {path}" if path else ""
    return PublishError(f"{_where(name, where)}{at}: {why}, got {type(value).__name__} {shown(value)}; "
                        f"allowed: {ALLOWED}")


def _copy(value: Any, name: str, where: str, path: str, depth: int, count: list[int]) -> Any:
    count[0] += 1
    if count[0] > MAX_NODES:
        raise PublishError(f"{_where(name, where)}: more than {MAX_NODES:,} values (the limit)")
    if depth > MAX_DEPTH:
        raise PublishError(f"{_where(name, where)}: nested more than {MAX_DEPTH} levels deep (the limit), "
                           f"at {path}")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, os.PathLike) and not isinstance(value, str):  # a Path from the API: its text
        value = os.fspath(value)
        if not isinstance(value, str):
            raise _bad(name, where, path, value, "a path that is bytes, not text")
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise _bad(name, where, path, value, f"text of {len(value):,} characters; the limit is {MAX_TEXT_CHARS:,}")
        if any("\ud800" <= c <= "\udfff" for c in value):
            raise _bad(name, where, path, value, "text holding a lone surrogate (undecodable bytes): not "
                       "Unicode text that a UTF-8 file can hold")
        return str.__getitem__(value, slice(None))  # an exact str, even from a subclass
    if isinstance(value, (int, numbers.Integral)):  # numpy integers too (numpy.bool_ is not Integral)
        try:
            n = int.__index__(value) if isinstance(value, int) else int(value)
        except (TypeError, ValueError, OverflowError):
            raise _bad(name, where, path, value, "not an integer") from None
        if not MIN_INT <= n <= MAX_INT:
            raise _bad(name, where, path, value, f"an integer outside {MIN_INT}..{MAX_INT} (64 bits)")
        return n
    if isinstance(value, float) or (isinstance(value, numbers.Real) and hasattr(value, "dtype")):
        f = float.__float__(value) if isinstance(value, float) else float(value)
        if not math.isfinite(f):
            raise _bad(name, where, path, value, "a number that is not finite (JSON has no NaN or Infinity)")
        return f
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:
            raise _bad(name, where, path, value, f"a list of {len(value):,} elements; the limit is {MAX_ITEMS:,}")
        return [_copy(v, name, where, f"{path}[{i}]", depth + 1, count) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if len(value) > MAX_ITEMS:
            raise _bad(name, where, path, value, f"a mapping of {len(value):,} entries; the limit is {MAX_ITEMS:,}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _bad(name, where, f"{path}{{{shown(k, 40)}}}", k, "a mapping key that is not text")
            key = _copy(k, name, where, f"{path}{{key}}", depth + 1, count)
            out[key] = _copy(v, name, where, f"{path}[{key!r}]", depth + 1, count)
        return out
    raise _bad(name, where, path, value, "not plain data")


def plain(value: Any, *, name: str, where: str = "") -> Any:
    """A fresh copy of ``value`` made of built-in JSON types only, or an error saying why not.

    Parameters
    ----------
    value : object
        The parameter's value.
    name : str
        The parameter, for messages.
    where : str
        The notebook or route, for messages.

    Returns
    -------
    object
        ``None``, ``bool``, ``int``, ``float``, ``str``, ``list`` or ``dict`` (``str`` keys) of these:
        exact built-in types (subclasses and numpy scalars converted, tuples made lists), through a JSON
        round trip, sharing nothing with ``value``. A :class:`os.PathLike` (``pathlib.Path``) becomes its text.

    Raises
    ------
    PublishError
        A type that is not plain data (``bytes``, ``set``, ``datetime``, any object), a float that is not
        finite, a non-text mapping key, a lone surrogate in a string, or a size beyond the bounds
        (:data:`MAX_TEXT_CHARS`, :data:`MAX_ITEMS`, :data:`MAX_DEPTH`, :data:`MAX_NODES`, 64-bit integers).
        The message names the parameter, the element (``[2]``, ``['key']``) and the value.
    """
    copied = _copy(value, name, where, "", 1, [0])
    return json.loads(json.dumps(copied, allow_nan=False, ensure_ascii=False))


# ---- the declared type ---------------------------------------------------------------------------

_SEQUENCES = {"list", "sequence", "tuple", "iterable", "collection", "mutablesequence"}
_MAPPINGS = {"dict", "mapping", "mutablemapping"}
_SCALARS = {"int", "float", "str", "bool"}


def _type_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # typing.Optional, collections.abc.Sequence ...
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _mismatch(value: Any, node: ast.expr, path: str, depth: int = 0) -> str | None:
    """Why ``value`` does not fit the annotation ``node`` (``None`` when it fits)."""
    if depth > 20:
        return None  # an absurdly nested annotation: the value is still plain data
    at = f" at {path}" if path else ""
    got = f"got {_kind(value)} {shown(value)}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "int": a string annotation
        try:
            return _mismatch(value, ast.parse(node.value, mode="eval").body, path, depth + 1)
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | Y
        left, right = _mismatch(value, node.left, path, depth + 1), _mismatch(value, node.right, path, depth + 1)
        return None if left is None or right is None else f"must be {ast.unparse(node)}{at}, {got}"
    if isinstance(node, ast.Subscript):
        base = (_type_name(node.value) or "").lower()
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base == "optional":
            return None if value is None else _mismatch(value, args[0], path, depth + 1)
        if base == "union":
            if any(_mismatch(value, a, path, depth + 1) is None for a in args):
                return None
            return f"must be {ast.unparse(node)}{at}, {got}"
        if base == "annotated":
            return _mismatch(value, args[0], path, depth + 1)
        if base == "literal":
            allowed = [a.value for a in args if isinstance(a, ast.Constant)]
            if any(type(value) is type(a) and value == a for a in allowed):
                return None
            return f"must be one of {allowed}{at}, {got}"
        if base in _SEQUENCES:
            return _sequence_mismatch(value, node, base, args, (path, at, got, depth))
        if base in _MAPPINGS:
            return _mapping_mismatch(value, node, args, (path, at, got, depth))
        return None  # a generic we do not know: any plain value
    return _name_mismatch(value, node, at, got)


def _sequence_mismatch(value: Any, node: ast.Subscript, base: str, args: list, where: tuple) -> str | None:
    """:func:`_mismatch` of ``list[...]``/``tuple[...]``/``Sequence[...]``; ``where`` is (path, at, got, depth)."""
    path, at, got, depth = where
    if not isinstance(value, (list, tuple)):
        return f"must be a list ({ast.unparse(node)}){at}, {got}"
    if base == "tuple" and not (len(args) == 2 and isinstance(args[1], ast.Constant)
                                and args[1].value is Ellipsis):
        if len(args) == 1 and isinstance(args[0], ast.Tuple) and not args[0].elts:
            args = []  # tuple[()]
        if len(value) != len(args):
            return f"must be a list of {len(args)} ({ast.unparse(node)}){at}, {got}"
        for i, (v, a) in enumerate(zip(value, args, strict=True)):
            why = _mismatch(v, a, f"{path}[{i}]", depth + 1)
            if why:
                return why
        return None
    for i, v in enumerate(value):
        why = _mismatch(v, args[0], f"{path}[{i}]", depth + 1)
        if why:
            return why
    return None


def _mapping_mismatch(value: Any, node: ast.Subscript, args: list, where: tuple) -> str | None:
    """:func:`_mismatch` of ``dict[K, V]``/``Mapping[K, V]``; ``where`` is (path, at, got, depth)."""
    path, at, got, depth = where
    if not isinstance(value, Mapping):
        return f"must be a mapping ({ast.unparse(node)}){at}, {got}"
    key_t, val_t = (args + [None, None])[:2]
    for k, v in value.items():
        if key_t is not None:
            why = _mismatch(k, key_t, f"{path}{{key {shown(k, 40)}}}", depth + 1)
            if why:
                return why
        if val_t is not None:
            why = _mismatch(v, val_t, f"{path}[{shown(k, 40)}]", depth + 1)
            if why:
                return why
    return None


def _name_mismatch(value: Any, node: ast.expr, at: str, got: str) -> str | None:
    """:func:`_mismatch` of a plain type name (``int``, ``str``, ``list`` ...)."""
    name = _type_name(node)
    if name is None:
        return None
    low = name.lower()
    if low in ("none", "nonetype"):
        return None if value is None else f"must be None{at}, {got}"
    if low in ("any", "object"):
        return None
    if low == "bool":
        return None if isinstance(value, bool) else f"must be bool (true/false){at}, {got}"
    if low == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"must be int{at}, {got}"
    if low == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else f"must be float{at}, {got}"
    if low == "str":
        return None if isinstance(value, str) else f"must be str (text; quote a number to pass it as text){at}, {got}"
    if low in _SEQUENCES:
        return None if isinstance(value, (list, tuple)) else f"must be a list{at}, {got}"
    if low in _MAPPINGS:
        return None if isinstance(value, Mapping) else f"must be a mapping{at}, {got}"
    return None  # a type we do not know (Path, a class of the notebook): any plain value


def type_mismatch(value: Any, type_name: str | None) -> str | None:
    """Why ``value`` does not fit a notebook parameter's annotation, or ``None`` when it does.

    Parameters
    ----------
    value : object
        A plain value (see :func:`plain`).
    type_name : str or None
        ``inferred_type_name`` from :func:`papermill.inspect_notebook` (``"int"``, ``"list[str]"``,
        ``"dict[str, float]"``, ``"Optional[int]"``, ``"int | None"``, ``"Literal['a', 'b']"`` ...);
        ``None``/``"None"`` when the parameter is not annotated.

    Returns
    -------
    str or None
        ``None`` when the value fits; else what was expected and where (``must be str at [2], got int 3``).
        ``bool`` is not an ``int``/``float``; an ``int`` is a ``float``; lists are checked element by element,
        mappings key by key and value by value, ``Optional``/``Union``/``|`` member by member. An unannotated
        parameter (``"None"``), ``object``, ``Any`` or an annotation not known here admits any value
        (:func:`check_parameters` has made sure it is plain data).
    """
    t = (type_name or "None").strip()
    if t in ("None", ""):
        return None
    try:
        node = ast.parse(t, mode="eval").body
    except SyntaxError:
        return None
    return _mismatch(value, node, "")


def parameter_type_ok(value: Any, type_name: str | None) -> bool:
    """Whether ``value`` fits a notebook parameter's annotation: :func:`type_mismatch` is ``None``.

    Parameters
    ----------
    value : object
    type_name : str or None
        As in :func:`type_mismatch`.

    Returns
    -------
    bool
    """
    return type_mismatch(value, type_name) is None


def check_parameters(parameters: Mapping[str, Any] | None, declared: Mapping[str, Mapping[str, Any]] | None, *,
                     where: str = "") -> dict[str, Any]:
    """The gate: the values papermill may inject, as fresh plain copies checked against their types.

    Parameters
    ----------
    parameters : mapping or None
        ``{name: value}`` from ``-p``, a parameter file or the Python API.
    declared : mapping or None
        The notebook's parameters (:func:`storagebench.publish.notebook_parameters`:
        ``{name: {"inferred_type_name", "default", "help"}}``); ``None``: names and types not checked
        here (a parameter file read before its notebook is known), values still made plain.
    where : str
        The notebook or route, for messages.

    Returns
    -------
    dict
        ``{name: plain copy}``, in the order given.

    Raises
    ------
    PublishError
        A name that is not text, not an identifier, or not declared by the notebook (the message lists
        the declared ones); a value that is not plain data or out of bounds (:func:`plain`); a value, or an
        element of it, that does not fit the declared type (:func:`type_mismatch`). The message names the
        parameter, shows the value and says what is allowed.
    """
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise PublishError(f"parameters{' of ' + where if where else ''} must be a mapping of names to values, "
                           f"got {type(parameters).__name__} {shown(parameters)}")
    out: dict[str, Any] = {}
    for name in parameters:
        if not isinstance(name, str) or not name.isidentifier():
            raise PublishError(f"a parameter name{' of ' + where if where else ''} must be a Python identifier, "
                               f"got {shown(name)}")
    if declared is not None:
        unknown = sorted(set(parameters) - set(declared))
        if unknown:
            raise PublishError(f"unknown parameter(s) {unknown}{' for ' + where if where else ''}; "
                               f"it declares {sorted(declared)}")
    for name, value in parameters.items():
        copy = plain(value, name=name, where=where)
        if declared is not None:
            info = declared[name]
            want = str(info.get("inferred_type_name") or "None")
            why = type_mismatch(copy, want)
            if why:
                help_ = info.get("help") or "no description"
                inner = f": {why}" if why.startswith("must") and " at " in why else ""
                raise PublishError(f"{_where(name, where)} must be {want} ({help_}), got {type(copy).__name__} "
                                   f"{shown(copy)}{inner}")
        out[name] = copy
    return out

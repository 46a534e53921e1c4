"""YAML that cannot exhaust memory: a size cap, a nesting cap, and aliases that cannot multiply.

PyYAML's ``safe_load`` builds nothing dangerous, but it bounds nothing either:

* **Alias bombs** ("billion laughs"): ``a: &a [x, x]``, ``b: &b [*a, *a]``, ... ten lines make a
  document of 2**k nodes. PyYAML shares the aliased objects, so loading is cheap, but everything
  that walks the result afterwards (validation, ``repr`` in an error message, JSON) expands it;
  ``<<`` merge keys copy entries while constructing, so a merge bomb explodes inside
  ``safe_load`` itself (yaml/pyyaml#235).
* **Recursive aliases** (``&a [*a]``) build a list that contains itself.
* **Deep nesting** (``[[[[...]]]]``): PyYAML's composer and constructor recurse, and a few
  thousand levels raise ``RecursionError``.
* **Huge integers**: ``int()`` of more than 4300 digits raises ``ValueError`` (CPython's
  integer-string limit), not a YAML error.
* **Duplicate keys**: PyYAML keeps the last value silently (``runtime: 60`` ... ``runtime: 6000``).

:func:`load_yaml` reads at most ``max_bytes`` of a regular file, composes the node graph while
counting nodes and depth (:class:`BoundedLoader`), and before constructing any object computes
the number of nodes the document has with every alias expanded, refusing cycles and documents
above ``max_nodes``. Aliases themselves stay allowed (``<<: *common`` is a fair way to share
options between levels); only their expansion is bounded, as omegaconf (#1296, "cap expanded
node construction"), SnakeYAML (``maxAliasesForCollections``) and go-yaml (alias ratio) do.

:func:`expanded_size` does the same count for plain Python data, so a mapping built in Python
(``load_study(dict)``) gets the same bounds.

Two more things are YAML's and live here, below everything that reads or writes it:

* :class:`PlainLoader`, the loader of notebook parameters (``-p NAME=VALUE``, ``batch`` parameter
  files): JSON-typed data only. Any explicit tag (``!!binary``, ``!!python/object/apply:...``, ``!x``,
  even ``!!str``) is refused before anything is constructed, and the YAML 1.1 plain scalars that would
  become a non-JSON type or a surprising number stay the text that was typed (``2024-01-01``, ``1:30``,
  ``=``). The value gate on top of it is :mod:`storagebench._params`.
* :func:`dump_yaml`, the only way the project writes YAML: PyYAML's emitter fed with data, comments
  made one line each by :func:`yaml_comment`, and the text loaded back with :func:`load_yaml` and
  compared with the data before it is returned.

Nothing here imports the rest of storagebench except :mod:`storagebench.errors`.
"""

from __future__ import annotations

import math
import os
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.scanner import ScannerError

from ._inputs import read_text
from .errors import StorageBenchError, shown

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "MAX_YAML_DEPTH",
    "ShapeError",
    "expanded_size",
    "load_yaml",
    "read_text_capped",
    "PlainLoader",
    "yaml_comment",
    "one_line",
    "dump_yaml",
]

#: Largest YAML file read, bytes (a hand-written study spec is a few KiB; PyYAML reads ~100 KiB/s).
MAX_YAML_BYTES = 256 * 1024
#: Most nodes a document may have, every alias expanded (scalars, sequences and mappings alike).
MAX_YAML_NODES = 100_000
#: Deepest nesting of sequences and mappings.
MAX_YAML_DEPTH = 32
#: Most digits of a YAML integer (2**64 has 20; 40 leaves room for signs and ``_`` separators).
MAX_INT_DIGITS = 40


class ShapeError(ValueError):
    """A document or data structure beyond the bounds (too many nodes, too deep, cyclic)."""


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with node, depth and alias-expansion limits, duplicate keys refused.

    Use through :func:`load_yaml`. The limits are class attributes (:data:`MAX_YAML_NODES`,
    :data:`MAX_YAML_DEPTH`); a subclass may change them.
    """

    max_nodes = MAX_YAML_NODES
    max_depth = MAX_YAML_DEPTH

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._composed = 0
        self._depth = 0

    # -- scanning: PyYAML's scanner reads a whole run of '[' ahead (each may start a simple key),
    # with work quadratic in the nesting: stop at the limit instead of composing the first node

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: D102, N803 - PyYAML hook
        if self.flow_level >= self.max_depth:
            raise ScannerError(None, None, f"nested more than {self.max_depth} levels deep", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    # -- composing: count nodes and depth as they are made -----------------------------------

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # noqa: D102 - PyYAML hook
        if not self.check_event(yaml.AliasEvent):
            self._composed += 1
            if self._composed > self.max_nodes:
                raise ComposerError(None, None, f"the document has more than {self.max_nodes:,} nodes "
                                    "(the limit for a spec)", self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise ComposerError(None, None, f"nested more than {self.max_depth} levels deep",
                                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Node | None:  # noqa: D102 - PyYAML hook
        node = super().get_single_node()
        if node is None:
            return node
        limits = {"max_nodes": self.max_nodes, "max_depth": self.max_depth, "children": _node_children}
        try:
            expanded_size(node, **limits)
        except ShapeError as whole:
            # out of bounds: each top-level value alone, so that the message names the key a bomb hides under
            hint = "(YAML aliases '*name' repeat what '&name' marks)"
            for key, value in node.value if isinstance(node, MappingNode) else ():
                try:
                    expanded_size(value, **limits)
                except ShapeError as exc:
                    shown_key = shown(key.value if isinstance(key, ScalarNode) else f"<{type(key).__name__}>", 60)
                    raise ComposerError(None, None, f"key {shown_key} {exc} {hint}", value.start_mark) from None
            raise ComposerError(None, None, f"the document {whole} {hint}", node.start_mark) from None
        return node

    # -- constructing --------------------------------------------------------------------------

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:  # noqa: D102
        if isinstance(node, MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                try:
                    hash(key)
                except TypeError:
                    continue  # SafeConstructor refuses an unhashable key with its own message
                if key in seen:
                    raise ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"key {shown(key)} appears twice (first at line {seen[key].line + 1}); YAML keeps only "
                        "the last value, so write each key once", key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:  # noqa: D102
        text = str(node.value)
        digits = sum(c.isalnum() for c in text)
        if digits > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"integer of {digits} digits: more than the {MAX_INT_DIGITS} any "
                                   "value here can have", node.start_mark)
        return super().construct_yaml_int(node)


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)


def _node_children(node: Any) -> Iterable[Any]:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [x for pair in node.value for x in pair]
    return ()


def _data_children(obj: Any) -> Iterable[Any]:
    if isinstance(obj, Mapping):
        return [x for pair in obj.items() for x in pair]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return obj
    return ()


def expanded_size(root: Any, *, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_YAML_DEPTH,
                  children: Callable[[Any], Iterable[Any]] | None = None) -> int:
    """Number of nodes of ``root`` with every shared reference counted each time it is reached.

    The count is made over the graph, each distinct object visited once (work linear in the
    document as written), so a billion-laughs document is measured without being expanded.

    Parameters
    ----------
    root : object
        Plain data (dicts, lists, tuples, sets and scalars), or a PyYAML node with ``children``.
    max_nodes : int
        Refuse a structure of more nodes than this, expanded.
    max_depth : int
        Refuse a structure nested deeper than this (``[[1]]`` has depth 3: two lists and a scalar).
    children : callable, optional
        ``node -> iterable of child nodes``; default: a mapping's keys and values, a sequence's or
        set's items.

    Returns
    -------
    int
        The expanded node count.

    Raises
    ------
    ShapeError
        A cycle (a container that contains itself), more than ``max_nodes`` nodes or more than
        ``max_depth`` levels.
    """
    kids = children or _data_children
    size: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, depth)
    on_path: set[int] = set()
    keep: list[Any] = []  # keeps every visited object alive, so that ids are not reused
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        obj, done = stack.pop()
        key = id(obj)
        if done:
            on_path.discard(key)
            total, depth = 1, 1
            for c in kids(obj):
                n, d = size[id(c)]
                total += n
                depth = max(depth, d + 1)
            if total > max_nodes:
                raise ShapeError(f"expands to more than {max_nodes:,} values (the limit)")
            if depth > max_depth:
                raise ShapeError(f"is nested more than {max_depth} levels deep (the limit)")
            size[key] = (total, depth)
            continue
        if key in size:
            continue
        if key in on_path:
            raise ShapeError("contains itself (a recursive alias or a self-referencing container)")
        items = list(kids(obj))
        if not items:
            size[key] = (1, 1)
            keep.append(obj)
            continue
        if len(on_path) >= max_depth:
            raise ShapeError(f"is nested more than {max_depth} levels deep (the limit)")
        on_path.add(key)
        keep.append(obj)
        stack.append((obj, True))
        for c in items:
            ck = id(c)
            if ck in on_path:
                raise ShapeError("contains itself (a recursive alias or a self-referencing container)")
            if ck not in size:
                stack.append((c, False))
    return size[id(root)][0]


def read_text_capped(path: str | os.PathLike[str], *, max_bytes: int = MAX_YAML_BYTES,
                     error: type[StorageBenchError] = StorageBenchError, what: str = "file") -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` bytes: :func:`storagebench._inputs.read_text`,
    the one reader of inputs (``O_NONBLOCK``, ``fstat`` of the open descriptor, so a FIFO or a device such as
    ``/dev/zero`` is refused instead of blocking or reading for ever), with the YAML size cap as default.

    ``errors="replace"`` reads text that is not UTF-8 (an ``.icf`` saved by Windows) with U+FFFD for
    the bytes that do not decode, instead of refusing it.

    Raises
    ------
    error
        Cannot be opened, not a regular file, larger than ``max_bytes``, or not UTF-8 (``errors="strict"``).
    """
    return read_text(path, max_bytes=max_bytes, what=what, error=error)


def load_yaml(text: str, *, where: str = "", error: type[StorageBenchError] = StorageBenchError,
              loader: type[BoundedLoader] = BoundedLoader) -> Any:
    """Parse one YAML document with :class:`BoundedLoader`'s limits.

    Parameters
    ----------
    text : str
        The document (at most :data:`MAX_YAML_BYTES` is expected; see :func:`read_text_capped`).
    where : str
        Prefix of messages (a file name).
    error : type
        The :class:`~storagebench.errors.StorageBenchError` subclass to raise.

    Returns
    -------
    object
        The constructed data (PyYAML's safe types only).

    Raises
    ------
    error
        Not valid YAML, more than one document, a duplicate key, an integer of more than
        :data:`MAX_INT_DIGITS` digits, more than :data:`MAX_YAML_NODES` nodes with aliases
        expanded, a recursive alias, or nesting deeper than :data:`MAX_YAML_DEPTH`. The message
        is PyYAML's with the line and column.
    """
    prefix = f"{where}: " if where else ""
    if len(text) > MAX_YAML_BYTES:
        raise error(f"{prefix}a YAML document of {len(text):,} characters; the limit is {MAX_YAML_BYTES:,}")
    ldr = None
    try:
        ldr = loader(text)  # the reader refuses unprintable characters already here
        return ldr.get_single_data()
    except yaml.YAMLError as exc:
        raise error(f"{prefix}not valid YAML: {exc}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # PyYAML's constructors call int(), float(), datetime() and base64 on the text as written
        raise error(f"{prefix}not valid YAML: {type(exc).__name__}: {shown(str(exc), 200)}") from None
    finally:
        if ldr is not None:
            ldr.dispose()


# ---- notebook parameters: plain data only -------------------------------------------------------

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_VALUE = "tag:yaml.org,2002:value"


class PlainLoader(BoundedLoader):
    """:class:`BoundedLoader` for values that become notebook parameters: JSON-typed data only.

    * An explicit tag on any node (``!!binary``, ``!!set``, ``!!timestamp``, ``!!python/...``, a
      local ``!x``, the non-specific ``!``, ``!!str`` too) is refused while composing, before any
      object is constructed: the message names the tag and says to quote the value instead.
    * Plain scalars that YAML 1.1 would turn into a type JSON does not have stay strings: a date or
      time (``2024-01-01`` would be :class:`datetime.date`, which papermill writes into the notebook as
      ``datetime.date(2024, 1, 1)``, a call that needs an import) and ``=`` (YAML's "value" key, which
      PyYAML cannot even construct). Base-60 numbers (``1:30`` is 90 in YAML 1.1, not in JSON or
      YAML 1.2) stay strings too.
    * Anchors, aliases and ``<<`` merge keys are plain YAML and stay allowed, bounded as in
      :class:`BoundedLoader`; the value gate copies the result, so nothing is shared.
    """

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in (_TIMESTAMP, _VALUE)]
        for first, resolvers in BoundedLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # noqa: D102 - PyYAML hook
        event = self.peek_event()
        tag = getattr(event, "tag", None)
        if tag is not None and not isinstance(event, yaml.AliasEvent):
            raise ComposerError(
                None, None, f"the YAML tag {shown(tag, 60)} is refused: a value is plain data (text, a number, "
                "true/false, null, [lists] or {mappings}); quote it to pass it as text", event.start_mark)
        return super().compose_node(parent, index)

    def construct_plain_int(self, node: ScalarNode) -> Any:  # noqa: D102
        if ":" in str(node.value):  # YAML 1.1 base 60
            return str(node.value)
        return self.construct_yaml_int(node)

    def construct_plain_float(self, node: ScalarNode) -> Any:  # noqa: D102
        if ":" in str(node.value):
            return str(node.value)
        return self.construct_yaml_float(node)


PlainLoader.add_constructor("tag:yaml.org,2002:int", PlainLoader.construct_plain_int)
PlainLoader.add_constructor("tag:yaml.org,2002:float", PlainLoader.construct_plain_float)


# ---- YAML the project writes ----------------------------------------------------------------------

#: Longest comment line :func:`yaml_comment` writes, characters (after escaping).
MAX_COMMENT_CHARS = 2000

# Characters that never reach a written line as themselves: C0/C1 controls (\t \n \r \x85 ...), line and
# paragraph separators (YAML 1.1 breaks lines at \x85, \u2028, \u2029), format characters (bidi overrides,
# zero-width, BOM), surrogates, private-use and unassigned code points (PyYAML's reader refuses some of
# them in a stream, \ufffe and \uffff among them).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape_char(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else (f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")


def one_line(text: Any, *, limit: int = MAX_COMMENT_CHARS) -> str:
    """``text`` as one printable line: every control, separator or format character escaped.

    Parameters
    ----------
    text : object
        Converted with :class:`str` when it is not a string.
    limit : int
        Longest result, characters: a longer one keeps its start and ends with ``...``.

    Returns
    -------
    str
        The text with each character of Unicode category Cc, Cf, Cs, Co, Cn, Zl or Zp written as
        ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` (a newline is ``\\x0a``, U+2028 is ``\\u2028``,
        a tab ``\\x09``). Never holds a line break of any kind; safe in a terminal too (no ESC).
    """
    s = text if isinstance(text, str) else str(text)
    out = "".join(_escape_char(c) if unicodedata.category(c) in _HIDDEN_CATEGORIES else c for c in s)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def yaml_comment(text: Any) -> str:
    """One YAML comment line holding ``text``: ``"# "`` + :func:`one_line` (no trailing newline).

    The only way the project writes a comment into a YAML file: whatever ``text`` holds (a path with a
    newline, ``\\r``, ``\\x85``, U+2028 ...), the comment ends at the end of this line, so nothing of
    it can become a key.
    """
    return ("# " + one_line(text)).rstrip()


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON kind, all the way down (``1 != 1.0 != True`` here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def dump_yaml(data: Any, *, comments: Iterable[Any] = (), where: str = "",
              error: type[StorageBenchError] = StorageBenchError) -> str:
    """YAML text of ``data`` from PyYAML's emitter, headed by comment lines, checked by loading it back.

    The only way storagebench makes YAML: never by formatting strings. The text is loaded back with
    :func:`load_yaml` (the project's own reader) and must give ``data`` again, keys in the same order and
    values of the same kind, before it is returned.

    Parameters
    ----------
    data : mapping, list or scalar
        Plain data (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``).
    comments : iterable
        Lines of the head comment, each made one line by :func:`yaml_comment` (an item holding newlines
        stays one line: they are escaped).
    where : str
        What is written (a path, ``"study 'x'"``), for messages.
    error : type
        The :class:`~storagebench.errors.StorageBenchError` subclass to raise.

    Returns
    -------
    str
        The document, ending with a newline.

    Raises
    ------
    error
        ``data`` holds something the safe emitter cannot write (bytes, a set, an object), or the
        written text does not load back to the same data.
    """
    prefix = f"{where}: " if where else ""
    try:
        body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=False, width=100)
    except yaml.YAMLError as exc:
        raise error(f"{prefix}cannot be written as YAML: {shown(str(exc), 200)}") from None
    head = "".join(yaml_comment(c) + "\n" for c in comments)
    text = head + body
    back = load_yaml(text, where=where or "written YAML", error=error)
    if not _same(data, back):
        raise error(f"{prefix}the YAML written does not load back to the same data "
                    f"(wrote {shown(data, 200)}, read {shown(back, 200)}); nothing written")
    return text

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

Nothing here imports the rest of storagebench except :mod:`storagebench.errors`.
"""

from __future__ import annotations

import os
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

    Raises
    ------
    error
        Cannot be opened, not a regular file, larger than ``max_bytes``, or not UTF-8.
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

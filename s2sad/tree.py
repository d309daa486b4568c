"""Pytrees: nested tuples, lists, dicts, namedtuples and registered classes, with array/number leaves.

Transformations accept and return pytrees. They flatten arguments at the boundary, so the
generated code (and numba) only ever sees the leaves: s2sad specializes the code to the
*structure*, as JAX does at trace time, and the structure is part of the cache key.

    leaves, treedef = tree_flatten({"W": W, "b": b})
    tree_unflatten(treedef, leaves)
    tree_map(lambda x: 2 * x, params)
    register(MyParams, lambda p: ((p.W, p.b), None), lambda aux, children: MyParams(*children))
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

__all__ = ["PyTreeDef", "register", "tree_flatten", "tree_leaves", "tree_map", "tree_structure",
           "tree_unflatten"]

_REGISTRY: dict[type, tuple[Callable, Callable]] = {}


def register(cls: type, flatten: Callable[[Any], tuple[tuple, Any]] | None = None,
             unflatten: Callable[[Any, tuple], Any] | None = None) -> type:
    """Make instances of `cls` pytree nodes: `flatten(x) -> (children, aux)`, `unflatten(aux, children) -> x`.

    `aux` (static data, part of the structure) must be hashable. A dataclass needs neither
    function: its fields are the children, and differentiated code reads them as `p.field`.
    Usable as a class decorator. Returns `cls`.
    """
    if flatten is None or unflatten is None:
        fields = getattr(cls, "__dataclass_fields__", None)
        if fields is None:
            raise TypeError(f"register({cls.__name__}) needs flatten and unflatten functions (or a dataclass)")
        names = tuple(fields)
        flatten = lambda x: (tuple(getattr(x, n) for n in names), None)  # noqa: E731
        unflatten = lambda aux, children: cls(*children)  # noqa: E731
    _REGISTRY[cls] = (flatten, unflatten)
    return cls


class PyTreeDef(NamedTuple):
    """The structure of a pytree: a node kind, static data, and the children's structures.

    A tuple underneath: every call of a transformation flattens its arguments and looks their
    structure up, and a tuple is built, hashed and compared in C, where a frozen dataclass does that
    in Python, a large part of a call on small arguments."""

    kind: str  # leaf | none | str | tuple | list | dict | namedtuple | custom | static (a function argument)
    aux: Any = None  # dict keys, namedtuple class, or (class, aux) of a registered class
    children: tuple = ()

    @property
    def num_leaves(self) -> int:
        return 1 if self.kind == "leaf" else sum(c.num_leaves for c in self.children)

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "str":
            return repr(self.aux)
        if self.kind == "static":
            obj = static_object(self)
            return f"<{getattr(obj, '__qualname__', type(obj).__name__)}>"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.aux, self.children)) + "}"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "tuple":
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        name = (self.aux if self.kind == "namedtuple" else self.aux[0]).__name__
        return f"{name}({inner})"


def static_def(obj) -> PyTreeDef:
    """The structure of a function or object passed as an argument: the object itself, compared by identity
    where it cannot be hashed (a dataclass with eq=True and frozen=False)."""
    try:
        hash(obj)
    except TypeError:
        return PyTreeDef("static", _ByIdentity(obj))
    return PyTreeDef("static", obj)


def static_object(treedef: PyTreeDef):
    """The object a "static" structure stands for."""
    return treedef.aux.obj if isinstance(treedef.aux, _ByIdentity) else treedef.aux


class _ByIdentity:
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _ByIdentity) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


LEAF = PyTreeDef("leaf")
_PLAIN_LEAVES = frozenset([float, int, complex, bool, np.ndarray, np.float64, np.float32])  # never registered nodes


def tree_registered(cls: type) -> bool:
    """Are instances of `cls` pytree nodes (register)?"""
    return cls in _REGISTRY


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(tree) -> tuple[list, PyTreeDef]:
    """The leaves of `tree` in a fixed order (dicts by sorted key) and its structure."""
    leaves: list = []

    def walk(x) -> PyTreeDef:
        kind = type(x)  # the common nodes first, by exact type (this runs on every call of a transformation)
        if kind is list:
            return PyTreeDef("list", None, tuple([walk(c) for c in x]))
        if kind is dict:
            keys = tuple(sorted(x))
            return PyTreeDef("dict", keys, tuple([walk(x[k]) for k in keys]))
        if kind in _PLAIN_LEAVES:
            leaves.append(x)
            return LEAF
        if x is None:
            return PyTreeDef("none")
        if kind is str:  # `{"mode": "train"}`: a string is structure, as None is (code is generated per value)
            return PyTreeDef("str", x)
        if type(x) in _REGISTRY:
            children, aux = _REGISTRY[type(x)][0](x)
            return PyTreeDef("custom", (type(x), aux), tuple(walk(c) for c in children))
        if _is_namedtuple(x):
            return PyTreeDef("namedtuple", type(x), tuple(walk(c) for c in x))
        if isinstance(x, (tuple, list)):
            return PyTreeDef("tuple" if isinstance(x, tuple) else "list", None, tuple(walk(c) for c in x))
        if isinstance(x, dict):
            keys = tuple(sorted(x))
            return PyTreeDef("dict", keys, tuple(walk(x[k]) for k in keys))
        leaves.append(x)
        return LEAF

    treedef = walk(tree)
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves) -> Any:
    """The pytree of structure `treedef` whose leaves are `leaves` (in tree_flatten's order)."""
    build = tree_builder(treedef)
    if build is not None:
        leaves = list(leaves)
        if len(leaves) != treedef.num_leaves:
            raise ValueError(f"tree_unflatten got {len(leaves)} leaves for {treedef}, which has {treedef.num_leaves}")
        return build(leaves)
    it = iter(leaves)

    def build(t: PyTreeDef):
        if t.kind == "leaf":
            return next(it)
        if t.kind == "none":
            return None
        if t.kind == "str":
            return t.aux
        children = [build(c) for c in t.children]
        if t.kind == "tuple":
            return tuple(children)
        if t.kind == "list":
            return children
        if t.kind == "dict":
            return dict(zip(t.aux, children))
        if t.kind == "namedtuple":
            return t.aux(*children)
        cls, aux = t.aux
        return _REGISTRY[cls][1](aux, tuple(children))

    out = build(treedef)
    rest = list(it)
    if rest:
        raise ValueError(f"tree_unflatten got {len(rest)} leaves too many for {treedef}")
    return out


_BUILDERS: dict[PyTreeDef, Callable | None] = {}


def tree_builder(treedef: PyTreeDef) -> Callable | None:
    """A function rebuilding a tree of this structure from its list of leaves, written out once per
    structure (`lambda leaves: [{'W': leaves[0], 'b': leaves[1]}]`); None for structures holding
    namedtuples, registered classes or dicts with keys other than strings, which the recursive
    builder handles."""
    if treedef not in _BUILDERS:
        body = builder_expression(treedef, (f"leaves[{i}]" for i in range(treedef.num_leaves)))
        _BUILDERS[treedef] = eval(f"lambda leaves: {body}") if body else None  # noqa: S307
    return _BUILDERS[treedef]


def builder_expression(treedef: PyTreeDef, leaves: Iterator[str]) -> str | None:
    """A Python expression building a tree of this structure from the expressions `leaves` (in
    tree_flatten's order); None where the structure holds a node no literal spells (a namedtuple, a
    registered class, a dict with keys other than strings)."""
    if not all(_literal_keys(t) for t in _nodes(treedef)):
        return None

    def expr(t: PyTreeDef) -> str | None:
        if t.kind == "leaf":
            return next(leaves)
        if t.kind == "none":
            return "None"
        if t.kind == "str":
            return repr(t.aux)
        if t.kind not in ("tuple", "list", "dict"):
            return None
        parts = [expr(c) for c in t.children]
        if None in parts:
            return None
        if t.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(t.aux, parts)) + "}"
        if t.kind == "list":
            return "[" + ", ".join(parts) + "]"
        return "(" + "".join(f"{p}, " for p in parts) + ")"

    return expr(treedef)


def _nodes(t: PyTreeDef):
    yield t
    for c in t.children:
        yield from _nodes(c)


def _literal_keys(t: PyTreeDef) -> bool:
    """Whether a dict node's keys are all strings. Builders are cached by structure, and structures
    compare keys by value: {1: x} and {True: x}, or {1: x} and {1.0: x}, would share one builder and
    one key type. Strings equal only themselves (and repr() writes them back)."""
    return t.kind != "dict" or all(type(k) is str for k in t.aux)


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


def tree_structure(tree) -> PyTreeDef:
    return tree_flatten(tree)[1]


def tree_map(f: Callable, tree, *rest) -> Any:
    """`f` applied leaf by leaf; `rest` are trees of the same structure whose leaves are passed too."""
    leaves, treedef = tree_flatten(tree)
    others = []
    for other in rest:
        other_leaves, other_def = tree_flatten(other)
        if other_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef} vs {other_def}")
        others.append(other_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def leaf_paths(treedef: PyTreeDef, prefix: str) -> list[str]:
    """Readable names for the leaves: `params_0_W` for params[0]['W'] (identifier-safe, not yet unique)."""
    out: list[str] = []

    def walk(t: PyTreeDef, path: str):
        if t.kind == "leaf":
            out.append(path)
        elif t.kind == "dict":
            for k, c in zip(t.aux, t.children):
                walk(c, f"{path}_{k}")
        elif t.kind == "namedtuple":
            for f, c in zip(t.aux._fields, t.children):
                walk(c, f"{path}_{f}")
        else:
            for i, c in enumerate(t.children):
                walk(c, f"{path}_{i}")

    walk(treedef, prefix)
    return out

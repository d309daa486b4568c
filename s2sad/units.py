"""Which axes of an array have length one, where lowering can tell: what `np.squeeze(x)` without `axis`
removes. Numba must know the result's rank when it compiles, so the axes are decided when the code is
generated: from the arguments' shapes (the code is specialized to them) and the operations in between.

A pattern is a tuple of bools, one per axis, True where the axis has length one. None: not known.
"""

from __future__ import annotations

from s2sad import rules
from s2sad.ir import Const, Copy, Load, Prim, Slice, Var

POINTWISE_FAMILIES = ("Operators", "Elementwise", "SciPy (scipy.special, scipy.stats.norm)")


def pointwise(rule) -> bool:
    """A rule whose result has its broadcast operands' shape: an operator or an elementwise function."""
    return rule.elementwise and rules.FAMILY_OF.get(rule.name) in POINTWISE_FAMILIES


def of_shape(shape: tuple) -> tuple:
    return tuple(n == 1 for n in shape)


def unit_axes(value, units: dict, ints: set) -> tuple | None:
    """The pattern of the array a right-hand side gives, where it follows from the patterns known."""
    if isinstance(value, Copy):
        return _of_atom(value.value, units)
    if isinstance(value, Load):
        return _loaded(value, units, ints)
    if isinstance(value, Prim) and value.args and value.rule.reduces:
        return _reduced(value, units)
    if not isinstance(value, Prim) or not value.args or value.kwargs:
        return None
    name, args = value.rule.name, value.args
    if value.rule.shaped_like is not None and len(args) > value.rule.shaped_like:
        return _of_atom(args[value.rule.shaped_like], units)
    if value.rule.shape_arg is not None and len(args) > value.rule.shape_arg:
        return _of_constant_shape(args[value.rule.shape_arg])
    if name in ("expand_dims", "expand_dims_any") and len(args) == 2:
        return _expanded(_of_atom(args[0], units), args[1])
    if name == "transpose":
        return _transposed(_of_atom(args[0], units), args[1] if len(args) == 2 else None)
    if name == "squeeze":
        found = _of_atom(args[0], units)
        return None if found is None else tuple(False for unit in found if not unit)
    if name in ("matmul", "dot") and len(args) == 2:
        return _product(_of_atom(args[0], units), _of_atom(args[1], units), name)
    if pointwise(value.rule):
        return _broadcast([_of_atom(a, units) for a in args])
    return None


def _reduced(value: Prim, units: dict) -> tuple | None:
    """`np.max(x, axis=..., keepdims=...)` with both constant: x's pattern, the reduced axes set to
    length one (keepdims) or dropped."""
    found = _of_atom(value.args[0], units)
    given = dict(value.kwargs)
    axis = value.args[1] if len(value.args) > 1 else given.get("axis", Const(None))
    keep = given.get("keepdims", Const(False))  # (positionally, the third operand is a dtype or ddof)
    if found is None or len(value.args) > 2 or not isinstance(axis, Const) or not isinstance(keep, Const):
        return None
    rank = len(found)
    axes = range(rank) if axis.value is None else axis.value if isinstance(axis.value, tuple) else (axis.value,)
    if not all(type(a) is int and -rank <= a < rank for a in axes):
        return None
    reduced = {a % rank for a in axes}
    if keep.value:
        return tuple(unit or i in reduced for i, unit in enumerate(found))
    return tuple(unit for i, unit in enumerate(found) if i not in reduced)


def _of_atom(atom, units: dict) -> tuple | None:
    if isinstance(atom, Const):
        return () if type(atom.value) in (int, float, bool) else None
    return units.get(atom.name) if isinstance(atom, Var) else None


def _of_constant_shape(shape) -> tuple | None:
    if not isinstance(shape, Const):
        return None
    dims = shape.value if isinstance(shape.value, tuple) else (shape.value,)
    if not all(type(n) is int and n >= 0 for n in dims):
        return None  # a -1 follows the size, which is known only at run time
    return of_shape(dims)


def _loaded(value: Load, units: dict, ints: set) -> tuple | None:
    """`x[i, :]`: an int drops its axis; a whole slice keeps it; any other slice makes it unknown."""
    base = units.get(value.base.name)
    if base is None or len(value.index) > len(base):
        return None
    kept = []
    for axis, item in zip(base, value.index):
        if isinstance(item, Slice):
            if (item.lower, item.upper, item.step) != (None, None, None):
                return None
            kept.append(axis)
        elif not (isinstance(item, Const) and type(item.value) is int or isinstance(item, Var) and item.name in ints):
            return None
    return tuple(kept) + base[len(value.index):]


def _expanded(found, axis) -> tuple | None:
    if found is None or not isinstance(axis, Const):
        return None
    axes = axis.value if isinstance(axis.value, tuple) else (axis.value,)
    rank = len(found) + len(axes)
    if not all(type(a) is int and -rank <= a < rank for a in axes):
        return None
    new = {a % rank for a in axes}
    rest = iter(found)
    return tuple(True if i in new else next(rest) for i in range(rank))


def _transposed(found, axes) -> tuple | None:
    if found is None:
        return None
    if axes is None:
        return found[::-1]
    if not isinstance(axes, Const) or not isinstance(axes.value, tuple) or len(axes.value) != len(found):
        return None
    return tuple(found[a] for a in axes.value)


def _product(a, b, name: str) -> tuple | None:
    """`a @ b`, and `np.dot` where both have at most two axes (where the two agree)."""
    if a is None or b is None:
        return None
    if not a or not b:
        return _broadcast([a, b]) if name == "dot" else None
    if name == "dot" and max(len(a), len(b)) > 2:
        return None
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return b[:-2] + b[-1:]
    return _broadcast([a[:-2], b[:-2]]) + (a[-2], b[-1])


def _broadcast(patterns: list) -> tuple | None:
    """An axis of the result has length one where every operand that has it does."""
    if any(p is None for p in patterns):
        return None
    rank = max(map(len, patterns), default=0)
    padded = [(True,) * (rank - len(p)) + p for p in patterns]
    return tuple(all(axis) for axis in zip(*padded))

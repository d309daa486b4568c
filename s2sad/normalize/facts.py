"""What lowering knows of the value each assignment binds: surely an array, one int, its rank, a
tuple's length; and operations on constant ints, folded now.
"""

from __future__ import annotations

import operator

import numpy as np

from s2sad.ir import Const, Copy, Load, Prim, Slice, Var
from s2sad.units import pointwise


INT_FOLDS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
             "mod": operator.mod, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
             "gt": operator.gt, "ge": operator.ge, "not": operator.not_}


def _fold_ints(key, args) -> Const | None:
    """The result of an operation on constant ints and bools (exact, so computed now), else None."""
    if not (isinstance(key, str) and key in INT_FOLDS and args
            and all(isinstance(a, Const) and type(a.value) in (int, bool) for a in args)):
        return None
    values = [a.value for a in args]
    if key in ("floordiv", "mod") and values[1] == 0:
        return None
    return Const(INT_FOLDS[key](*values))


_ARRAY_MAKERS = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "copy", "eye",
                           "arange", "linspace", "tile", "ascontiguousarray", "asfortranarray"})


_ARRAY_ARITHMETIC = frozenset({"add", "sub", "mul", "truediv", "pow", "neg", "pos", "matmul"})


def _makes_array(value, arrays: set) -> bool:
    """Does this right-hand side surely give an array? (made by NumPy, a slice of an array, or arithmetic
    with one): what a helper's `x += ...` on its parameter needs to know to write into the caller's array."""
    if isinstance(value, Copy):
        return isinstance(value.value, Var) and value.value.name in arrays
    if isinstance(value, Load):
        return any(isinstance(i, Slice) for i in value.index)
    if isinstance(value, Prim):
        name = value.rule.name
        return name in _ARRAY_MAKERS or ((name in _ARRAY_ARITHMETIC or pointwise(value.rule)) and any(
            isinstance(a, Var) and a.name in arrays for a in value.args))
    return False


def _makes_float32(value, singles: set) -> bool:
    """Does this right-hand side surely give a float32 array (made with dtype=np.float32, cast to it, or
    another name for one)? NumPy's `x += v` keeps such an x float32, where `x = x + v` would widen it."""
    if isinstance(value, Copy):
        return isinstance(value.value, Var) and value.value.name in singles
    return isinstance(value, Prim) and (value.rule.name == "as_float32" or value.rule.name in _ARRAY_MAKERS
                                        and ("dtype", Const(np.dtype(np.float32))) in value.kwargs)


GENERATOR_MAKERS = frozenset({"np.random.default_rng", "np.random.RandomState", "np.random.Generator"})


def _makes_generator(value, generators: set) -> bool:
    """Does this right-hand side give a random generator (`np.random.default_rng(seed)`, or another name
    for one), whose methods draw?"""
    if isinstance(value, Copy):
        return isinstance(value.value, Var) and value.value.name in generators
    return isinstance(value, Prim) and value.rule.name in GENERATOR_MAKERS


_KEEPS_DTYPE = frozenset({"reshape", "transpose", "squeeze", "expand_dims", "expand_dims_any", "swapaxes", "moveaxis",
                          "ravel", "copy", "ascontiguousarray", "asfortranarray", "atleast_1d", "atleast_2d",
                          "atleast_3d", "pad", "flip", "roll"})


def _kept_dtype(value, dtype_of):
    """The dtype of what a right-hand side gives where it is its operand's (a copy, an indexing, a reshape), and
    that one's is known (`dtype_of`); else None."""
    if isinstance(value, Copy):
        return dtype_of(value.value)
    if isinstance(value, Load):
        return dtype_of(value.base)
    if isinstance(value, Prim) and value.rule.name in _KEEPS_DTYPE and value.args:
        return dtype_of(value.args[0])
    return None


def _gives_int(value, ints: set, shapes: frozenset = frozenset()) -> bool:
    """Does this right-hand side surely give one int (a loop counter, arithmetic of ints, a length, an item
    of `x.shape`)?"""
    if isinstance(value, Copy):
        return _is_int_atom(value.value, ints)
    if isinstance(value, Load) and value.base.name in shapes:
        return len(value.index) == 1 and _is_int_atom(value.index[0], ints)
    if isinstance(value, Prim) and value.rule.name in ("add", "sub", "mul", "floordiv", "mod", "neg"):
        return all(_is_int_atom(a, ints) for a in value.args)
    return isinstance(value, Prim) and value.rule.name == "len"


def _rank(value, ranks: dict, ints: set, lengths: dict) -> int | None:
    """The ndim of the array a right-hand side gives, where it follows from ranks and shape lengths
    already known; None where lowering cannot tell."""
    if isinstance(value, Copy) and isinstance(value.value, Var):
        return ranks.get(value.value.name)
    if isinstance(value, Copy) and type(value.value.value) in (int, float, bool):
        return 0
    if isinstance(value, Load):
        base = ranks.get(value.base.name)
        fixed = [i for i in value.index if not isinstance(i, Slice) and i != Const(Ellipsis)]
        if base is None or not all(isinstance(i, Const) and type(i.value) is int or isinstance(i, Var) and i.name in ints
                                   for i in fixed):
            return None
        return base - len(fixed)
    if not isinstance(value, Prim) or not value.args:
        return None
    name, first = value.rule.name, value.args[0]
    if name in ("zeros", "ones", "empty", "full"):
        if isinstance(first, Const):
            return len(first.value) if isinstance(first.value, tuple) else 1
        return 1 if first.name in ints else lengths.get(first.name)
    if name in ("copy", "asarray", "zeros_like", "ones_like", "empty_like", "full_like", "neg", "inv", "swapaxes",
                "transpose", "moveaxis", "tril", "triu", "diff"):
        return ranks.get(first.name) if isinstance(first, Var) else None
    if value.rule.shaped_like is not None and value.rule.shaped_like < len(value.args):  # copy_adj(g), unbroadcast
        like = value.args[value.rule.shaped_like]
        return 0 if isinstance(like, Const) and type(like.value) in (int, float, bool) else \
            ranks.get(like.name) if isinstance(like, Var) else None
    if name in ("eye", "identity"):
        return 2
    if name == "number_like":  # `type(z)(1)`, `x.dtype.type(v)`: v's rank
        return 0 if isinstance(first, Const) else ranks.get(first.name)
    if name == "arange" or name == "linspace" and all(isinstance(a, Const) or ranks.get(a.name) == 0
                                                      for a in value.args[:2]):
        return 1
    if name == "ravel":
        return 1
    if name in ("atleast_1d", "atleast_2d", "atleast_3d") and len(value.args) == 1:
        rank = 0 if isinstance(first, Const) else ranks.get(first.name)
        return None if rank is None else max(rank, int(name[-2]))
    if name == "outer":
        return 2
    if name == "expand_dims_any" and len(value.args) == 2 and isinstance(value.args[1], Const) \
            and type(value.args[1].value) is int:  # an item of `np.array([a, b])`, given one new axis
        rank = 0 if isinstance(first, Const) else ranks.get(first.name)
        return None if rank is None else rank + 1
    if name == "concatenate2":  # items joined along an axis they have
        return ranks.get(first.name) if isinstance(first, Var) else None
    if name == "squeeze" and isinstance(first, Var) and first.name in ranks:  # np.squeeze(x, 1), (x, axis=(0, 2))
        axes = value.args[1] if len(value.args) == 2 else dict(value.kwargs).get("axis", Const(None))
        if isinstance(axes, Const) and axes.value is not None:
            return ranks[first.name] - (len(axes.value) if isinstance(axes.value, tuple) else 1)
    if name == "reshape" and len(value.args) == 2:  # the new shape's length
        shape = value.args[1]
        if isinstance(shape, Const):
            return len(shape.value) if isinstance(shape.value, tuple) else 1
        return 1 if shape.name in ints else lengths.get(shape.name)
    if name == "einsum" and isinstance(first, Const) and isinstance(first.value, str) and "." not in first.value:
        inputs, arrow, output = first.value.replace(" ", "").partition("->")
        named = inputs.replace(",", "")
        return len(output) if arrow else sum(named.count(c) == 1 for c in set(named))
    if value.rule.reduces:
        return _reduced_rank(value, ranks)
    operands = [0 if isinstance(a, Const) and type(a.value) in (int, float, bool) or _is_int_atom(a, ints)
                else ranks.get(getattr(a, "name", None)) for a in value.args]
    if pointwise(value.rule) and None not in operands:
        return max(operands)  # broadcasting
    operands = operands[:2]
    if name == "matmul" and None not in operands and min(operands) >= 1:
        return max(operands) if min(operands) > 1 else max(operands) - 1
    if name == "dot" and None not in operands:  # a sum over a's last axis and b's second-to-last
        return max(operands) if min(operands) == 0 else operands[0] + operands[1] - 2
    return None


def _reduced_rank(value: Prim, ranks: dict) -> int | None:
    """The rank of a NumPy reduction's result, given constant `axis` and `keepdims`: 0 over every axis,
    one less per axis reduced, the operand's own with keepdims."""
    first, kwargs = value.args[0], dict(value.kwargs)
    rank = 0 if isinstance(first, Const) else ranks.get(first.name)
    axis = value.args[1] if len(value.args) == 2 else kwargs.get("axis", Const(None))
    keep = kwargs.get("keepdims", Const(False))
    if len(value.args) > 2 or not isinstance(axis, Const) or not isinstance(keep, Const):
        return None
    if axis.value is None and not keep.value:  # every axis: a number, whatever the operand's rank
        return 0
    if rank is None:
        return None
    if keep.value:
        return rank
    return rank - (len(axis.value) if isinstance(axis.value, tuple) else 1)


def _is_int_atom(atom, ints: set) -> bool:
    return isinstance(atom, Const) and type(atom.value) is int or isinstance(atom, Var) and atom.name in ints


def _length(value, ranks: dict, lengths: dict) -> int | None:
    """How many items a tuple-valued right-hand side has, where lowering knows: `(a, b)`, `x.shape`,
    `x.shape[:2]`."""
    if isinstance(value, Prim) and value.rule.name == "make_tuple":
        return len(value.args)
    if isinstance(value, Prim) and value.rule.name == "shape" and isinstance(value.args[0], Var):
        return ranks.get(value.args[0].name)
    if isinstance(value, Load) and len(value.index) == 1 and isinstance(value.index[0], Slice) \
            and value.base.name in lengths:
        bounds = (value.index[0].lower, value.index[0].upper, value.index[0].step)
        if all(b is None or isinstance(b, Const) and type(b.value) is int for b in bounds):
            return len(range(lengths[value.base.name])[slice(*(b and b.value for b in bounds))])
    return None

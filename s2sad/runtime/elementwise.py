"""Runtime helpers for the elementwise rules (plain Python, plus numba overloads).

Each stands in for a NumPy function whose numba version is missing or narrower than NumPy's;
the rule that registers the NumPy function prints the helper instead (`print_as=`).
"""

import math

import numpy as np
from numba import types
from numba.extending import overload

from s2sad.runtime.core import _is_none_type, _is_scalar_type

__all__ = ["np_clip", "np_heaviside", "np_where", "math_factorial", "cotangent_only"]


def np_clip(x, a_min, a_max):
    """np.clip(x, a_min, a_max): numba's np.clip refuses a scalar `x`, and bounds that broadcast `x` bigger."""
    return np.clip(x, a_min, a_max)


@overload(np_clip)
def _ol_np_clip(x, a_min, a_max):
    lo_none, hi_none = _is_none_type(a_min), _is_none_type(a_max)
    scalar_bounds = all(_is_scalar_type(b) or _is_none_type(b) for b in (a_min, a_max))
    if not _is_scalar_type(x) and scalar_bounds:
        return lambda x, a_min, a_max: np.clip(x, a_min, a_max)
    # min(max(x, a_min), a_max), as NumPy computes it (NaN propagates; array operands broadcast)
    if lo_none and hi_none:
        return lambda x, a_min, a_max: x
    if lo_none:
        return lambda x, a_min, a_max: np.minimum(x, a_max)
    if hi_none:
        return lambda x, a_min, a_max: np.maximum(x, a_min)
    return lambda x, a_min, a_max: np.minimum(np.maximum(x, a_min), a_max)


def np_where(condition, x, y):
    """np.where(condition, x, y). Compiled, three numbers pick a number: numba's np.where makes a 0-d array
    of them, which no variable that also holds a number (`s = np.where(...) if c else 1.0`) can type."""
    return np.where(condition, x, y)


@overload(np_where)
def _ol_np_where(condition, x, y):
    if all(_is_scalar_type(t) for t in (condition, x, y)):
        return lambda condition, x, y: x if condition else y
    return lambda condition, x, y: np.where(condition, x, y)


def np_heaviside(x, h0):
    """np.heaviside(x, h0): 0 below zero, h0 at zero, 1 above (NaN stays NaN); numba lacks it."""
    return np.heaviside(x, h0)


@overload(np_heaviside)
def _ol_np_heaviside(x, h0):
    if _is_scalar_type(x) and _is_scalar_type(h0):
        def scalar(x, h0):
            if x < 0:
                return 0.0
            if x > 0:
                return 1.0
            return h0 * 1.0 if x == 0 else x * 1.0

        return scalar
    return lambda x, h0: np.where(x < 0, 0.0, np.where(x > 0, 1.0, np.where(x == 0, h0, x)))


def math_factorial(n):
    """math.factorial(n) of an int (a series' `x ** n / factorial(n)`); numba lacks it."""
    return math.factorial(n)


@overload(math_factorial)
def _ol_math_factorial(n):
    """A float under numba: exact up to 22!, and what the arithmetic it feeds takes; an int64 overflows past 20!."""
    if isinstance(n, types.Integer):
        def product(n):
            if n < 0:
                raise ValueError("factorial() not defined for negative values")
            out = 1.0
            for k in range(2, n + 1):
                out *= k
            return out

        return product
    return None


@overload(float)
def _ol_float_of_bool(x):
    """float(True) is 1.0, as in Python; numba's float() takes numbers only (`float(any(x > 0))`)."""
    if isinstance(x, types.Boolean):
        return lambda x: 1.0 if x else 0.0
    return None


def cotangent_only(g, c):
    """`c`, a contribution made from the cotangent `g`, but 0 where `g` is 0 even where `c` is nan or inf:
    an item the function computes as nan and then masks out (`e[np.isnan(e)] = 0`) sends nothing back."""
    if np.ndim(g) == 0 and np.ndim(c) == 0:
        return 0.0 if g == 0 else c
    return np.where(np.asarray(g) == 0, 0.0, c)


@overload(cotangent_only)
def _ol_cotangent_only(g, c):
    if _is_scalar_type(g) and _is_scalar_type(c):
        return lambda g, c: 0.0 if g == 0 else c
    if _is_scalar_type(c):  # (c made from an array g is an array)
        return lambda g, c: np.where(g == 0, 0.0, c)
    if _is_scalar_type(g):
        return lambda g, c: np.zeros_like(c) if g == 0 else c.copy()
    return lambda g, c: np.where(np.broadcast_to(g, c.shape) == 0, 0.0, c)

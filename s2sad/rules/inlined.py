"""Library functions s2sad inlines as Python written with NumPy functions that have rules.

np.linalg.matrix_power (a constant power) and multi_dot are products written out; np.append is
np.concatenate.

scipy.linalg's Cholesky factor and triangular solves are NumPy's, restricted to a triangle; written
out here, they differentiate and compile (numba has no SciPy) through the rules of np.linalg.cholesky,
np.linalg.solve, np.tril and np.triu. A caller's flags (`lower=True`) are constants when the code is
generated, so each `if` below is decided then. Parameters that only tune SciPy's own work
(`overwrite_a`, `check_finite`) are accepted and change nothing.
"""

from __future__ import annotations

import numpy as np


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    if lower:  # NumPy reads the lower triangle; SciPy reads the one it is asked for
        return np.linalg.cholesky(a)
    return np.linalg.cholesky(a.T).T


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    return cholesky(a, lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    if lower:
        factor = np.tril(c)
    else:
        factor = np.triu(c).T
    return np.linalg.solve(factor.T, np.linalg.solve(factor, b))


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    if unit_diagonal:
        raise NotImplementedError("s2sad: solve_triangular with unit_diagonal=True")
    if lower:
        triangle = np.tril(a)
    else:
        triangle = np.triu(a)
    if trans in (1, "T", "C"):
        triangle = triangle.T
    return np.linalg.solve(triangle, b)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True, assume_a=None,
          transposed=False):
    if transposed:
        return np.linalg.solve(a.T, b)
    return np.linalg.solve(a, b)


def inv(a, overwrite_a=False, check_finite=True):
    return np.linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    return np.linalg.det(a)


def matrix_power(a, n):
    """np.linalg.matrix_power with a constant `n`: unrolled by squaring (a negative `n` inverts first)."""
    if n < 0:
        return matrix_power(np.linalg.inv(a), -n)
    if n == 0:
        return np.eye(a.shape[0])
    if n == 1:
        return a
    half = matrix_power(a, n // 2)
    if n % 2 == 0:
        return half @ half
    return half @ half @ a


def multi_dot(arrays, out=None):
    if len(arrays) == 1:
        return arrays[0]
    return np.dot(multi_dot(arrays[:-1]), arrays[-1])


def append(arr, values, axis=None):
    """np.append: np.concatenate of the two, flattened first where no axis is given (values may be a list)."""
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(np.array(values))))
    return np.concatenate((arr, np.array(values)), axis=axis)


_SCIPY_LINALG = {f.__name__: f for f in (cholesky, cho_factor, cho_solve, solve_triangular, solve, inv, det)}
_NUMPY = {np.linalg.matrix_power: matrix_power, np.linalg.multi_dot: multi_dot, np.append: append}


def stand_in(fn):
    """The function above that s2sad inlines for library function `fn`, or None."""
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("scipy.linalg"):
        return _SCIPY_LINALG.get(getattr(fn, "__name__", None))
    try:
        return _NUMPY.get(fn)
    except TypeError:  # not hashable
        return None

"""Library functions s2sad inlines as Python written with NumPy functions that have rules.

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


_SCIPY_LINALG = {f.__name__: f for f in (cholesky, cho_factor, cho_solve, solve_triangular, solve, inv, det)}


def stand_in(fn):
    """The function above that s2sad inlines for library function `fn`, or None."""
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("scipy.linalg"):
        return _SCIPY_LINALG.get(getattr(fn, "__name__", None))
    return None

"""Finite differences: the oracle every derivative test compares against."""

import numpy as np

RTOL_FD = 1e-5
RTOL_EXACT = 1e-7


def fd_grad(f, args, argnum, eps=1e-6):
    """Central finite-difference gradient of scalar `f` with respect to args[argnum]."""
    args = list(args)
    x = args[argnum]
    if np.ndim(x) == 0:
        hi = f(*args[:argnum], x + eps, *args[argnum + 1:])
        lo = f(*args[:argnum], x - eps, *args[argnum + 1:])
        return (hi - lo) / (2 * eps)
    x = np.array(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(*args[:argnum], xp, *args[argnum + 1:]) - f(*args[:argnum], xm, *args[argnum + 1:])) / (2 * eps)
    return g


def assert_close(actual, expected, rtol=RTOL_FD, atol=1e-7):
    np.testing.assert_allclose(np.asarray(actual, dtype=float), np.asarray(expected, dtype=float),
                               rtol=rtol, atol=atol)


def fd_directional(f, args, tangents, eps=1e-6):
    """Central finite difference of `f` along `tangents` (int arguments stay fixed)."""
    def at(step):
        return f(*[a + step * t if not isinstance(a, (int, np.integer)) else a for a, t in zip(args, tangents)])

    return (at(eps) - at(-eps)) / (2 * eps)

"""check_grads: compare forward and reverse derivatives with central finite differences.

Like JAX's: along random directions, one argument at a time, and for order > 1 the same
checks are applied to the generated derivative functions themselves (`f_jvp_tangent`,
`f_vjp`), which s2sad differentiates again by parsing their source.
"""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

import numpy as np

from s2sad import api, hidden

DEFAULT_EPS = 1e-5
DEFAULT_TOL = 1e-5


def check_grads(f: Callable, args: Sequence, order: int = 1, modes: Sequence[str] = ("fwd", "rev"),
                eps: float | None = None, atol: float | None = None, rtol: float | None = None,
                backend: str = api.DEFAULT_BACKEND, seed: int = 0) -> None:
    """Raise AssertionError when a derivative of `f` at `args` disagrees with finite differences.

    order: check derivatives up to this order (1 to 3 are practical).
    modes: "fwd" checks jvp, "rev" checks vjp; each order-k check differentiates the
    order-(k-1) derivative function in that mode.
    """
    if isinstance(modes, str):
        modes = (modes,)
    bad = set(modes) - {"fwd", "rev"}
    if bad or not modes:
        raise ValueError(f"modes must be a subset of ('fwd', 'rev'), got {modes!r}")
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be a positive int, got {order!r}")
    tol = _Tolerance(eps or DEFAULT_EPS, DEFAULT_TOL if atol is None else atol, DEFAULT_TOL if rtol is None else rtol)
    _check(f, tuple(args), order, tuple(modes), tol, backend, np.random.default_rng(seed), [])


class _Tolerance:
    def __init__(self, eps, atol, rtol):
        self.eps, self.atol, self.rtol = eps, atol, rtol


def _check(f, args, order, modes, tol, backend, rng, path):
    spec, flat = api._forward(f, tuple(range(len(args))), backend).specialize(args)
    if spec.defs is not None:  # pytree arguments: check the primal specialized to their leaves
        f, args = spec.source_function("primal"), tuple(flat)
    positions = api._float_positions(args)
    names = list(inspect.signature(api.unwrap(f), follow_wrapped=False).parameters)
    for i in positions:
        direction = _random_like(rng, args[i])
        expected = _fd_directional(f, args, i, direction, tol.eps)
        if "fwd" in modes:
            tangents = [direction if j == i else _zeros_like(a) for j, a in enumerate(args)]
            _, actual = api.jvp(f, args, tangents, backend=backend)
            _compare(actual, expected, tol, path + [f"jvp (fwd) w.r.t. argument {i} (`{names[i]}`)"])
        if "rev" in modes:
            out = _call(f, args)
            cotangent = tuple(_random_like(rng, o) for o in out) if isinstance(out, tuple) else _random_like(rng, out)
            actual = _inner(_vjp(f, args, positions, cotangent, backend)[positions.index(i)], direction)
            _compare(actual, _inner(cotangent, expected), tol,
                     path + [f"vjp (rev) w.r.t. argument {i} (`{names[i]}`), <vjp(u), v> vs <u, fd(v)>"])
    if order == 1:
        return
    if "fwd" in modes:
        fwd = api._forward(f, positions, backend)
        tangents = tuple(_random_like(rng, args[i]) for i in positions)
        _check(fwd.source_function(), args + tangents, order - 1, modes, tol, backend, rng,
               path + ["derivative of jvp (fwd)"])
    if "rev" in modes:
        out = _call(f, args)
        if isinstance(out, tuple):  # differentiate the weighted sum the tuple's vjp is made of
            f = api._memo(("weighted", f), lambda: api._weighted_sum(f))
            args = args + tuple(_random_like(rng, o) for o in out)
            out = _call(f, args)
            positions = api._float_positions(args)
        rev = api._reverse(f, positions, False, backend, "vjp")
        _check(rev.source_function(), args + (_random_like(rng, out),), order - 1, modes, tol, backend, rng,
               path + ["derivative of vjp (rev)"])


def _vjp(f, args, positions, cotangent, backend):
    """Cotangents of the float arguments `positions` (ints stay constants)."""
    if isinstance(cotangent, tuple):
        weighted = api._memo(("weighted", f), lambda: api._weighted_sum(f))
        rev, leaves = api._reverse(weighted, positions, False, backend, "vjp").specialize(args + tuple(cotangent))
        return rev.vjp_fn(*leaves, 1.0)[1:len(args) + 1]
    rev, leaves = api._reverse(f, positions, False, backend, "vjp").specialize(args)
    return rev.vjp_fn(*leaves, api._as_float(cotangent))[1:len(args) + 1]


def _call(f, args):
    return hidden.call(api.unwrap(f), args)


def _random_like(rng, x):
    return rng.normal(size=np.shape(x)) if np.ndim(x) else float(rng.normal())


def _zeros_like(x):
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return np.zeros_like(x)
    return 0.0 if isinstance(x, float) else x


def _inner(a, b) -> float:
    if isinstance(a, tuple):
        return sum(_inner(x, y) for x, y in zip(a, b))
    return float(np.sum(np.asarray(a) * np.asarray(b)))


def _fd_directional(f, args, i, direction, eps):
    def at(step):
        shifted = list(args)
        shifted[i] = args[i] + step * direction
        return _call(f, shifted)

    hi, lo = at(eps), at(-eps)
    if isinstance(hi, tuple):
        return tuple((np.asarray(h) - np.asarray(l)) / (2 * eps) for h, l in zip(hi, lo))
    return (np.asarray(hi) - np.asarray(lo)) / (2 * eps)


def _compare(actual, expected, tol, path):
    if isinstance(expected, tuple):
        for k, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, tol, path + [f"output {k}"])
        return
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    if actual.shape == expected.shape and np.allclose(actual, expected, rtol=tol.rtol, atol=tol.atol):
        return
    with np.errstate(all="ignore"):
        err = np.max(np.abs(actual - expected)) if actual.shape == expected.shape else float("nan")
    raise AssertionError(
        "check_grads failed: " + " -> ".join(path) + "\n"
        f"  expected (finite differences): {np.array2string(expected, precision=10)}\n"
        f"  actual (s2sad):                {np.array2string(actual, precision=10)}\n"
        f"  max abs difference {err:.3g} (atol={tol.atol:g}, rtol={tol.rtol:g}, eps={tol.eps:g})")

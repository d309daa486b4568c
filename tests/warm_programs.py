"""What nearly every part of the suite compiles, compiled once in tests/run_suite.py's parent process before
the parts are forked from it: numba keeps each runtime helper it compiled for a type, and a forked part
inherits them instead of compiling its own.

`common` runs before any part starts. `broader` runs while the first part does (on the other core): the
helpers that many parts, but not all, compile (broadcasts over three axes, reductions along axes, index
reads, products, views, libm on scalars in loops, forward mode of each)."""

from __future__ import annotations

import math
import warnings

import numpy as np

import s2sad


def common() -> None:
    rng = np.random.default_rng(0)
    w, x, b, v = np.full(3, 0.1), rng.normal(size=(4, 3)), np.full(3, 0.2), np.linspace(0.1, 1.0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's note that -O0 code cannot be cached
        for backend in ("python", "numba"):
            s2sad.grad(loss, backend=backend)(w, x)
        s2sad.grad(bias, argnums=(0, 1))(w, b, x)  # a broadcast summed back to a vector
        s2sad.grad(rows)(x)  # reductions along an axis, a max's adjoint
        s2sad.grad(element_loop)(v)  # a loop over elements: tapes, element adjoints
        s2sad.jvp(rows, (x,), (x,))  # forward mode


def broader() -> None:
    rng = np.random.default_rng(1)
    a3, b2, c3 = rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(2, 1, 4))
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(3, 1))
    m, a4 = rng.normal(size=(4, 3)), rng.normal(size=(2, 2, 3, 2))
    u, v, A = rng.normal(size=3), rng.normal(size=3), rng.normal(size=(3, 3))
    x, idx = rng.normal(size=6), np.array([0, 2, 2, 5])
    differentiable = ((broadcast_3d, (a3, b2, c3)), (fused_broadcast, (a, b, c)), (along_axes, (a3, a4, m)),
                      (products, (u, v, A, m)), (libm_loop, (x,)), (reductions, (m, a3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f, args in differentiable:
            s2sad.grad(f, argnums=tuple(range(len(args))))(*args)
            s2sad.jvp(f, args, tuple(np.ones_like(t) for t in args))
        s2sad.grad(index_reads)(x, idx)


def loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2) + 0.5 * np.sum(w * w)


def bias(w, b, x):
    return np.sum(np.log1p(np.exp(x * w + b)))


def rows(a):
    m = np.max(a, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(a - m), axis=1)) + m[:, 0])


def element_loop(v):
    s = 0.0
    for i in range(v.shape[0]):
        s = s + math.sin(v[i]) * v[i]
    return s


def broadcast_3d(a, b, c):
    return np.sum(np.tanh(a * b + c) ** 2)


def fused_broadcast(a, b, c):
    return np.sum(np.tanh(a * b + c) * a + np.exp(c * b))


def along_axes(a3, a4, m):
    return (np.sum(np.var(m, axis=1)) + np.sum(np.sum(a3, axis=(0, 2), keepdims=True) * a3)
            + np.sum(np.mean(a3, axis=1)) + np.sum(np.tanh(a4 * a4[:1])) + np.sum(np.sin(m[:, 1:]) * m[:, :-1]))


def products(u, v, A, m):
    return np.sum(np.outer(u, v) @ A) + np.sum(m @ A.T) + np.dot(u, v)


def index_reads(x, idx):
    return np.sum(x[idx] ** 2) + np.sum(np.exp(x))


def libm_loop(v):
    s = 0.0
    for i in range(v.shape[0]):
        s = s + np.exp(v[i]) * np.tanh(v[i]) + np.log(1.0 + v[i] * v[i])
    return s


def reductions(a, b):
    return (np.sum(np.max(a, axis=0) ** 2) + np.sum(np.mean(b, axis=(0, 2))) + np.sum(np.min(a, axis=1))
            + np.sum(np.log(np.exp(a) + 1.0)) + np.sum(np.log1p(a * a)))

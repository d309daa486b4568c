"""What nearly every part of the suite compiles, compiled once in tests/run_suite.py's parent process before
the parts are forked from it: numba keeps each runtime helper it compiled for a type, and a forked part
inherits them instead of compiling its own.

Each part inherits the parent's memory too (numba keeps every compile's machine code), so the set stays
small: a broader one (three-axis broadcasts, reductions along axes, products, index reads and the forward
mode of each) saves a few seconds in a dozen parts and costs every part about half a gigabyte."""

from __future__ import annotations

import math
import warnings

import numpy as np

import s2sad
from s2sad.runtime import native


def common() -> None:
    rng = np.random.default_rng(0)
    w, x, b, v = np.full(3, 0.1), rng.normal(size=(4, 3)), np.full(3, 0.2), np.linspace(0.1, 1.0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's performance notes: the warm-up times nothing
        for backend in ("python", "numba"):
            s2sad.grad(loss, backend=backend)(w, x)
        s2sad.grad(bias, argnums=(0, 1))(w, b, x)  # a broadcast summed back to a vector
        s2sad.grad(rows)(x)  # reductions along an axis, a max's adjoint
        s2sad.grad(element_loop)(v)  # a loop over elements: tapes, element adjoints
        s2sad.jvp(rows, (x,), (x,))  # forward mode
        native.register()  # every C function of the runtime (runtime.native), compiled once for all parts


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

"""Jacobians from generated jvp and vjp functions: the Python loops `jacfwd`, `jacrev` and `hessian` run.

`s2sad.source(s2sad.jacfwd(f))` prints the generated module followed by a driver that calls these
functions exactly as the API does, so the printed program is the one that runs.
"""

from __future__ import annotations

import copy
from typing import Callable, Iterator, Sequence

import numpy as np

from s2sad.hidden import RANDOM_GENERATORS
from s2sad.runtime.core import adjoint_dtype, scalar_adjoint


def basis(x, k: int):
    """The k-th unit vector in the shape and precision of `x` (1.0 for a scalar)."""
    if np.ndim(x) == 0:
        return scalar_adjoint(1.0, x)
    e = np.zeros(np.shape(x), adjoint_dtype(x))
    e.flat[k] = 1.0
    return e


def _block_dtype(out, x):
    """A Jacobian block's dtype: float32 where the output and the argument are, else float64."""
    return np.result_type(adjoint_dtype(out), adjoint_dtype(x))


def stacked_columns(columns: list, out, x) -> np.ndarray:
    """J @ e_k, one per element of `x`, as an array of shape out.shape + x.shape (0-d for scalars)."""
    if np.ndim(x) == 0:
        return np.asarray(columns[0], dtype=_block_dtype(out, x))
    stacked = np.array(columns, dtype=_block_dtype(out, x)).reshape((np.size(x),) + np.shape(out))
    return np.moveaxis(stacked, 0, -1).reshape(np.shape(out) + np.shape(x))


def passes(args: Sequence) -> Iterator[Sequence]:
    """The arguments for each pass of a Jacobian. Every pass draws what one call of the function draws: the
    first takes the user's random generators, which move on as one call moves them; each later one takes
    copies of them as they were before the first."""
    generators = [i for i, a in enumerate(args) if isinstance(a, RANDOM_GENERATORS)]
    before = {i: copy.deepcopy(args[i]) for i in generators}
    yield args
    while True:
        yield [copy.deepcopy(before[i]) if i in before else a for i, a in enumerate(args)] if generators else args


def by_jvps(primal: Callable, jvp: Callable, args: Sequence, wrt: Sequence[int], tuple_out: bool) -> list:
    """Blocks [output][position in wrt] of the Jacobian, one jvp per element of each `args[i]`, i in wrt.

    `jvp(*args, *tangents)` returns the outputs, then their tangents; `tuple_out` says that `primal`
    returns a tuple. The outputs come from the first jvp: `primal` runs (and compiles) only where
    there is no element to take a jvp along."""
    zeros = [np.zeros(np.shape(args[i]), adjoint_dtype(args[i])) if np.ndim(args[i]) else 0.0 for i in wrt]
    outs, columns, each_pass = None, [[] for _ in wrt], passes(args)
    for pos, i in enumerate(wrt):
        for k in range(np.size(args[i])):
            tangents = list(zeros)
            tangents[pos] = basis(args[i], k)
            result = jvp(*next(each_pass), *tangents)
            n = len(result) // 2 if tuple_out else 1
            outs = result[:n] if outs is None else outs
            columns[pos].append(result[n:])
    if outs is None:
        outs = primal(*next(each_pass))
        outs = outs if tuple_out else (outs,)
    return [[stacked_columns([c[o] for c in columns[pos]], out, args[i]) for pos, i in enumerate(wrt)]
            for o, out in enumerate(outs)]


def by_vjps(primal: Callable, vjp: Callable, args: Sequence, wrt: Sequence[int]) -> list:
    """Blocks [position in wrt] of the Jacobian of a one-output `primal`, one vjp per output element.

    `vjp(*args, cotangent)` returns the output, then the cotangent of each `args[i]`, i in wrt."""
    each_pass = passes(args)
    out = primal(*next(each_pass))
    rows = [vjp(*next(each_pass), basis(out, j))[1:] for j in range(np.size(out))]
    return [np.array([r[pos] for r in rows], dtype=_block_dtype(out, args[i])).reshape(np.shape(out) + np.shape(args[i]))
            for pos, i in enumerate(wrt)]


def as_returned(blocks: list, single_wrt: bool, tuple_out: bool):
    """Blocks [output][wrt] as the API returns them for arguments that are arrays and floats: a row
    per output (a tuple of them where `primal` returns a tuple), a block per argnum (a tuple of
    them for tuple argnums)."""
    rows = [row[0] if single_wrt else tuple(row) for row in blocks]
    return tuple(rows) if tuple_out else rows[0]

"""The same workloads differentiated by JAX (`jax.jit(jax.grad)`, CPU, float64) and autograd.

Both are optional: `jax_gradient` / `autograd_gradient` return a `Missing` with the reason when
the package is not installed or cannot differentiate the workload. Vectorized workloads are the
plain NumPy functions of workloads.py with `np` rebound to `jax.numpy` / `autograd.numpy`.
Loops use `lax.fori_loop` / `lax.while_loop` for JAX (a Python loop would be unrolled by the
tracer). The GMM's in-place triangle fill is rewritten as a gather, which both libraries need
(neither has item assignment on traced arrays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

import workloads as W
from workloads import logsumexp


@dataclass
class Missing:
    reason: str


@dataclass
class Tool:
    """A gradient call ready to time: `fn(*args)` returns the gradients as NumPy-convertible leaves."""
    fn: Callable
    args: tuple
    leaves: Callable  # result -> list of arrays in the order of the s2sad gradient's leaves


# ---------------------------------------------------------------------------------------------
# GMM without item assignment (the lower triangles gathered from icf by a constant index array)
# ---------------------------------------------------------------------------------------------


def triangle_index(d: int) -> np.ndarray:
    """index[row, col] into concatenate([0], icf[k, d:]): 0 on and above the diagonal."""
    index = np.zeros((d, d), dtype=np.int64)
    t = 1
    for col in range(d):
        for row in range(col + 1, d):
            index[row, col] = t
            t += 1
    return index


def gmm_functional(alphas, means, icf, x, gamma, m, log_gamma_d, tri):
    n, d = x.shape
    K = icf.shape[0]
    Qdiags = np.exp(icf[:, :d])
    sum_qs = np.sum(icf[:, :d], axis=1)
    L = np.concatenate([np.zeros((K, 1)), icf[:, d:]], axis=1)[:, tri]
    xcentered = x[:, None, :] - means[None, :, :]
    Lx = Qdiags[None, :, :] * xcentered + np.einsum('kij,nkj->nki', L, xcentered)
    sqsum = np.sum(Lx * Lx, axis=2)
    inner = alphas[None, :] + sum_qs[None, :] - 0.5 * sqsum
    const = -n * d * 0.5 * math.log(2.0 * math.pi)
    frobenius = np.sum(Qdiags ** 2, axis=1) + np.sum(icf[:, d:] ** 2, axis=1)
    prior = np.sum(0.5 * gamma * gamma * frobenius - m * sum_qs)
    nn = d + m + 1
    C = nn * d * (np.log(gamma) - 0.5 * math.log(2.0)) - log_gamma_d
    return (const + np.sum(logsumexp(inner, 1)) - n * logsumexp(alphas, 0) + prior - K * C)


# ---------------------------------------------------------------------------------------------
# JAX
# ---------------------------------------------------------------------------------------------


def _jax():
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax


def jax_rosen(jax):
    def rosen(x):
        def body(i, s):
            return s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
        return jax.lax.fori_loop(0, x.shape[0] - 1, body, 0.0)
    return rosen


def jax_rk4_lv(jax, steps):
    def rk4(theta, u0, v0, dt):
        def f(u, v):
            return theta[0] * u - theta[1] * u * v, theta[2] * u * v - theta[3] * v

        def step(_, state):
            u, v = state
            du1, dv1 = f(u, v)
            du2, dv2 = f(u + 0.5 * dt * du1, v + 0.5 * dt * dv1)
            du3, dv3 = f(u + 0.5 * dt * du2, v + 0.5 * dt * dv2)
            du4, dv4 = f(u + dt * du3, v + dt * dv3)
            return (u + dt / 6.0 * (du1 + 2.0 * du2 + 2.0 * du3 + du4),
                    v + dt / 6.0 * (dv1 + 2.0 * dv2 + 2.0 * dv3 + dv4))
        u, v = jax.lax.fori_loop(0, steps, step, (u0, v0))
        return u * u + v * v
    return rk4


def jax_kepler(jax):
    jnp = jax.numpy

    def solve(Mi, e):
        def cond(state):
            return jnp.abs(state[1]) > 1e-12

        def body(state):
            E, _ = state
            step = (E - e * jnp.sin(E) - Mi) / (1.0 - e * jnp.cos(E))
            return E - step, step
        return jax.lax.while_loop(cond, body, (Mi, 1.0))[0]

    def kepler(M, e):
        return jnp.sum(jnp.sin(jax.vmap(solve, in_axes=(0, None))(M, e)))
    return kepler


def jax_gradient(w: W.Workload, args: tuple) -> Tool | Missing:
    """jax.jit(jax.grad(...)) of the workload, or the reason it cannot be had."""
    jax = _jax()
    if jax is None:
        return Missing("not installed")
    jnp = jax.numpy
    argnums = w.argnums if len(w.argnums) > 1 else w.argnums[0]
    fun = w.fun.__name__
    if fun == "gmm":
        d = args[3].shape[1]
        tri = jnp.asarray(triangle_index(d))
        f, args = (lambda *a: W.rebind_numpy(gmm_functional, jnp)(*a, tri)), args
    elif fun == "rosen":
        f = jax_rosen(jax)
    elif fun == "rk4_lv":
        steps = args[-1]
        f, args = jax_rk4_lv(jax, steps), args[:-1]
    elif fun == "kepler":
        f = jax_kepler(jax)
    else:
        f = W.rebind_numpy(w.fun, jnp)
    jargs = jax.tree_util.tree_map(jnp.asarray, args)
    grad = jax.jit(jax.grad(f, argnums=argnums))
    try:
        jax.block_until_ready(grad(*jargs))
    except Exception as exc:  # noqa: BLE001 - the reason JAX gives is the result we record
        first_sentence = str(exc).splitlines()[0].split(". ")[0]
        return Missing(f"JAX cannot: {type(exc).__name__}: {first_sentence[:120]}")

    def call(*a):
        return jax.block_until_ready(grad(*a))
    return Tool(call, jargs, lambda r: [np.asarray(v) for v in jax.tree_util.tree_leaves(r)])


# ---------------------------------------------------------------------------------------------
# autograd
# ---------------------------------------------------------------------------------------------

AUTOGRAD_SLOW = "skipped: each x[i] read of a boxed array builds a dense length-n adjoint, O(n^2)"


def autograd_gradient(w: W.Workload, args: tuple) -> Tool | Missing:
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return Missing("not installed")
    fun = w.fun.__name__
    if fun in ("rosen", "kepler") and args[0].shape[0] > 10**3:
        return Missing(AUTOGRAD_SLOW)
    if fun == "gmm":
        tri = triangle_index(args[3].shape[1])
        f = lambda *a: W.rebind_numpy(gmm_functional, anp)(*a, tri)  # noqa: E731
    else:
        f = W.rebind_numpy(w.fun, anp)
    if len(w.argnums) == 1:
        grad = autograd.grad(f, w.argnums[0])
    else:  # autograd differentiates one argument: pack the selected ones into a tuple
        def packed(selected, *rest):
            full = list(rest)
            for k, v in zip(w.argnums, selected):
                full.insert(k, v)
            return f(*full)
        pgrad = autograd.grad(packed, 0)

        def grad(*a):
            return pgrad(tuple(a[k] for k in w.argnums), *[v for k, v in enumerate(a) if k not in w.argnums])
    return Tool(grad, args, lambda r: [np.asarray(v) for v in _leaves(r)])


def _leaves(tree) -> list:
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]

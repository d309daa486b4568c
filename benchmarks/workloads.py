"""The benchmark workloads, each written once as plain NumPy, with hand-written numba adjoints.

s2sad reads the source of the plain functions, so they live in this file as ordinary Python.
Autograd runs the very same functions with `np` rebound to `autograd.numpy` (see `rebind_numpy`);
JAX runs them the same way where the code is vectorized, and uses `lax` loops (other_tools.py)
where a Python loop would be unrolled by the tracer.

Each `Workload` carries: the function, its differentiated argnums, an input maker, the hand-written
numba adjoint (returns the gradients in argnums order) and the loop-trip count where the gradient
keeps a per-iteration record (for the tape-memory target).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Callable

import numba
import numpy as np

# ---------------------------------------------------------------------------------------------
# 1. ADBench GMM objective (alphas, means, icf) with the Wishart prior
# ---------------------------------------------------------------------------------------------


def logsumexp(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(a - m), axis=axis)) + np.squeeze(m, axis=axis)


def lower_triangles(icf, d):
    """L[k] is strictly lower triangular, filled column by column from icf[k, d:] (ADBench order)."""
    K = icf.shape[0]
    L = np.zeros((K, d, d))
    start = d
    for col in range(d):
        rows = d - col - 1
        L[:, col + 1:, col] = icf[:, start:start + rows]
        start = start + rows
    return L


def log_multigamma(a, d):
    """log of the multivariate gamma function Gamma_d(a): a constant of the Wishart prior.

    Computed outside the differentiated function and passed in, because s2sad refuses a call
    with no derivative rule (math.lgamma) even when its arguments are constants (reported).
    """
    return 0.25 * d * (d - 1) * math.log(math.pi) + sum(math.lgamma(a - 0.5 * j) for j in range(d))


def log_wishart_prior(d, gamma, m, sum_qs, Qdiags, icf, log_gamma_d):
    K = icf.shape[0]
    n = d + m + 1
    frobenius = np.sum(Qdiags ** 2, axis=1) + np.sum(icf[:, d:] ** 2, axis=1)
    out = np.sum(0.5 * gamma * gamma * frobenius - m * sum_qs)
    C = n * d * (math.log(gamma) - 0.5 * math.log(2.0)) - log_gamma_d
    return out - K * C


def gmm(alphas, means, icf, x, gamma, m, log_gamma_d):
    n, d = x.shape
    Qdiags = np.exp(icf[:, :d])
    sum_qs = np.sum(icf[:, :d], axis=1)
    L = lower_triangles(icf, d)
    xcentered = x[:, None, :] - means[None, :, :]
    Lx = Qdiags[None, :, :] * xcentered + np.einsum('kij,nkj->nki', L, xcentered)
    sqsum = np.sum(Lx * Lx, axis=2)
    inner = alphas[None, :] + sum_qs[None, :] - 0.5 * sqsum
    const = -n * d * 0.5 * math.log(2.0 * math.pi)
    return (const + np.sum(logsumexp(inner, 1)) - n * logsumexp(alphas, 0)
            + log_wishart_prior(d, gamma, m, sum_qs, Qdiags, icf, log_gamma_d))


def gmm_inputs(d: int, K: int, n: int):
    rng = np.random.default_rng(0)
    icf_size = d + d * (d - 1) // 2
    gamma, m = 1.0, 0  # the Wishart prior's parameters, as in ADBench
    return (rng.normal(size=K), rng.normal(size=(K, d)), 0.1 * rng.normal(size=(K, icf_size)),
            rng.normal(size=(n, d)), gamma, m, log_multigamma(0.5 * (d + m + 1), d))


@numba.njit(cache=True)
def gmm_grad_hand(alphas, means, icf, x, gamma, m, log_gamma_d):
    """One pass over (point, component): softmax weights times the adjoint of -0.5 |Q (x - mu)|^2."""
    n, d = x.shape
    K = alphas.shape[0]
    d_alphas, d_means, d_icf = np.zeros(K), np.zeros((K, d)), np.zeros_like(icf)
    Q = np.exp(icf[:, :d])
    sum_qs = np.sum(icf[:, :d], axis=1)
    col_start = np.empty(d, np.int64)  # icf index of L[col + 1, col]
    start = d
    for col in range(d):
        col_start[col] = start
        start += d - col - 1
    xc = np.empty((K, d))
    Lx = np.empty((K, d))
    inner = np.empty(K)
    for i in range(n):
        for k in range(K):
            for j in range(d):
                xc[k, j] = x[i, j] - means[k, j]
            sq = 0.0
            for j in range(d):
                v = Q[k, j] * xc[k, j]
                for col in range(j):
                    v += icf[k, col_start[col] + j - col - 1] * xc[k, col]
                Lx[k, j] = v
                sq += v * v
            inner[k] = alphas[k] + sum_qs[k] - 0.5 * sq
        top = inner.max()
        total = 0.0
        for k in range(K):
            inner[k] = math.exp(inner[k] - top)
            total += inner[k]
        for k in range(K):
            w = inner[k] / total
            d_alphas[k] += w
            for j in range(d):
                g = -w * Lx[k, j]  # adjoint of Lx[k, j]
                d_icf[k, j] += w + g * xc[k, j] * Q[k, j]
                d_xc = g * Q[k, j]
                for col in range(j):
                    t = col_start[col] + j - col - 1
                    d_icf[k, t] += g * xc[k, col]
                    d_means[k, col] -= g * icf[k, t]
                d_means[k, j] -= d_xc
    top = alphas.max()
    weights = np.exp(alphas - top)
    d_alphas -= n * weights / weights.sum()
    d_icf[:, :d] += gamma * gamma * Q * Q - m
    d_icf[:, d:] += gamma * gamma * icf[:, d:]
    return d_alphas, d_means, d_icf


@numba.njit(cache=True)
def gmm_value_hand(alphas, means, icf, x, gamma, m, log_gamma_d):
    """The objective as loops (checks the NumPy primal independently)."""
    n, d = x.shape
    K = alphas.shape[0]
    total = 0.0
    inner = np.empty(K)
    for i in range(n):
        for k in range(K):
            sq = 0.0
            idx = d
            Lx = np.exp(icf[k, :d]) * (x[i] - means[k])
            for col in range(d):
                for row in range(col + 1, d):
                    Lx[row] += icf[k, idx] * (x[i, col] - means[k, col])
                    idx += 1
            sq = np.sum(Lx * Lx)
            inner[k] = alphas[k] + np.sum(icf[k, :d]) - 0.5 * sq
        top = inner.max()
        total += top + math.log(np.sum(np.exp(inner - top)))
    top = alphas.max()
    total -= n * (top + math.log(np.sum(np.exp(alphas - top))))
    nn = d + m + 1
    prior = np.sum(0.5 * gamma * gamma * (np.sum(np.exp(2 * icf[:, :d])) + np.sum(icf[:, d:] ** 2))) \
        - m * np.sum(icf[:, :d])
    log_gamma_d = 0.25 * d * (d - 1) * math.log(math.pi)
    for j in range(d):
        log_gamma_d += math.lgamma(0.5 * nn - 0.5 * j)
    C = nn * d * (math.log(gamma) - 0.5 * math.log(2.0)) - log_gamma_d
    return total - n * d * 0.5 * math.log(2.0 * math.pi) + prior - K * C


# ---------------------------------------------------------------------------------------------
# 2. Logistic regression
# ---------------------------------------------------------------------------------------------


def logreg(W, b, X, y):
    p = 0.5 * (np.tanh(0.5 * (X @ W + b)) + 1.0)
    return -np.sum(np.log(p * y + (1.0 - p) * (1.0 - y)))


def logreg_inputs(n: int, d: int):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, d))
    return 0.1 * rng.standard_normal(d), 0.1, X, (rng.uniform(size=n) < 0.5).astype(np.float64)


@numba.njit(cache=True)
def logreg_grad_hand(W, b, X, y):
    """d/dz of -log(p*y + (1-p)*(1-y)) is p - y for labels in {0, 1}."""
    r = 0.5 * (np.tanh(0.5 * (X @ W + b)) + 1.0) - y
    return X.T @ r, np.sum(r)


# ---------------------------------------------------------------------------------------------
# 3. MLP 784-64-10, tanh, batch 128, params as a list of dicts
# ---------------------------------------------------------------------------------------------


def mlp(params, x, y):
    for p in params:
        x = np.tanh(p['W'] @ x + p['b'])
    return np.sum((x - y) ** 2) / x.shape[1]


def mlp_inputs(sizes=(784, 64, 10), batch: int = 128):
    rng = np.random.default_rng(2)
    params = [{'W': rng.normal(size=(m, k)) / np.sqrt(k), 'b': 0.1 * rng.normal(size=(m, 1))}
              for k, m in zip(sizes[:-1], sizes[1:])]
    return params, rng.normal(size=(sizes[0], batch)), rng.uniform(-1, 1, size=(sizes[-1], batch))


@numba.njit(cache=True)
def mlp2_grad_hand(W1, b1, W2, b2, x, y):
    a1 = np.tanh(W1 @ x + b1)
    a2 = np.tanh(W2 @ a1 + b2)
    g2 = (2.0 / x.shape[1]) * (a2 - y) * (1.0 - a2 * a2)
    g1 = (W2.T @ g2) * (1.0 - a1 * a1)
    return g1 @ x.T, g1.sum(axis=1).reshape(-1, 1), g2 @ a1.T, g2.sum(axis=1).reshape(-1, 1)


def mlp_grad_hand(params, x, y):
    (p1, p2) = params
    dW1, db1, dW2, db2 = mlp2_grad_hand(p1['W'], p1['b'], p2['W'], p2['b'], x, y)
    return [{'W': dW1, 'b': db1}, {'W': dW2, 'b': db2}]


# ---------------------------------------------------------------------------------------------
# 4. Extended Rosenbrock, explicit scalar loop
# ---------------------------------------------------------------------------------------------


def rosen(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosen_inputs(n: int):
    return (np.random.default_rng(0).uniform(-1.5, 1.5, n),)


@numba.njit(cache=True)
def rosen_grad_hand(x):
    n = x.shape[0]
    g = np.zeros(n)
    for i in range(n - 1):
        xi = x[i]
        a = x[i + 1] - xi * xi
        g[i] += -400.0 * a * xi - 2.0 * (1.0 - xi)
        g[i + 1] += 200.0 * a
    return g


# ---------------------------------------------------------------------------------------------
# 5. RK4 integration of Lotka-Volterra, gradient w.r.t. the 4 parameters
# ---------------------------------------------------------------------------------------------


def lotka_volterra(u, v, theta):
    return theta[0] * u - theta[1] * u * v, theta[2] * u * v - theta[3] * v


def rk4_lv(theta, u0, v0, dt, steps):
    u = u0
    v = v0
    for _ in range(steps):
        du1, dv1 = lotka_volterra(u, v, theta)
        du2, dv2 = lotka_volterra(u + 0.5 * dt * du1, v + 0.5 * dt * dv1, theta)
        du3, dv3 = lotka_volterra(u + 0.5 * dt * du2, v + 0.5 * dt * dv2, theta)
        du4, dv4 = lotka_volterra(u + dt * du3, v + dt * dv3, theta)
        u = u + dt / 6.0 * (du1 + 2.0 * du2 + 2.0 * du3 + du4)
        v = v + dt / 6.0 * (dv1 + 2.0 * dv2 + 2.0 * dv3 + dv4)
    return u * u + v * v


def rk4_inputs(steps: int):
    return np.array([1.5, 1.0, 1.0, 3.0]), 1.0, 1.0, 0.01, steps


@numba.njit(cache=True, inline="always")
def _lv_vjp(u, v, a, b, c, e, gu, gv):
    """Adjoint of (u, v) -> lotka_volterra(u, v, (a, b, c, e)): (d_u, d_v, d_a, d_b, d_c, d_e)."""
    return (gu * (a - b * v) + gv * c * v, -gu * b * u + gv * (c * u - e),
            gu * u, -gu * u * v, gv * u * v, -gv * v)


@numba.njit(cache=True)
def rk4_lv_grad_hand(theta, u0, v0, dt, steps):
    """Store the state at each step, then walk back through the four stages of each step."""
    us, vs = np.empty(steps + 1), np.empty(steps + 1)
    us[0], vs[0] = u0, v0
    a, b, c, e = theta[0], theta[1], theta[2], theta[3]
    for t in range(steps):
        u, v = us[t], vs[t]
        k1u, k1v = a * u - b * u * v, c * u * v - e * v
        u2, v2 = u + 0.5 * dt * k1u, v + 0.5 * dt * k1v
        k2u, k2v = a * u2 - b * u2 * v2, c * u2 * v2 - e * v2
        u3, v3 = u + 0.5 * dt * k2u, v + 0.5 * dt * k2v
        k3u, k3v = a * u3 - b * u3 * v3, c * u3 * v3 - e * v3
        u4, v4 = u + dt * k3u, v + dt * k3v
        k4u, k4v = a * u4 - b * u4 * v4, c * u4 * v4 - e * v4
        us[t + 1] = u + dt / 6.0 * (k1u + 2.0 * k2u + 2.0 * k3u + k4u)
        vs[t + 1] = v + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v)
    da = db = dc = de = 0.0
    gu, gv = 2.0 * us[steps], 2.0 * vs[steps]
    w = dt / 6.0
    for t in range(steps - 1, -1, -1):
        u, v = us[t], vs[t]
        k1u, k1v = a * u - b * u * v, c * u * v - e * v
        u2, v2 = u + 0.5 * dt * k1u, v + 0.5 * dt * k1v
        k2u, k2v = a * u2 - b * u2 * v2, c * u2 * v2 - e * v2
        u3, v3 = u + 0.5 * dt * k2u, v + 0.5 * dt * k2v
        k3u, k3v = a * u3 - b * u3 * v3, c * u3 * v3 - e * v3
        u4, v4 = u + dt * k3u, v + dt * k3v
        s4u, s4v, t4a, t4b, t4c, t4e = _lv_vjp(u4, v4, a, b, c, e, w * gu, w * gv)  # k4 = f(u4, v4)
        s3u, s3v, t3a, t3b, t3c, t3e = _lv_vjp(u3, v3, a, b, c, e, 2 * w * gu + dt * s4u, 2 * w * gv + dt * s4v)
        s2u, s2v, t2a, t2b, t2c, t2e = _lv_vjp(u2, v2, a, b, c, e, 2 * w * gu + 0.5 * dt * s3u,
                                               2 * w * gv + 0.5 * dt * s3v)
        s1u, s1v, t1a, t1b, t1c, t1e = _lv_vjp(u, v, a, b, c, e, w * gu + 0.5 * dt * s2u, w * gv + 0.5 * dt * s2v)
        da += t4a + t3a + t2a + t1a
        db += t4b + t3b + t2b + t1b
        dc += t4c + t3c + t2c + t1c
        de += t4e + t3e + t2e + t1e
        gu, gv = gu + s4u + s3u + s2u + s1u, gv + s4v + s3v + s2v + s1v
    return np.array([da, db, dc, de])


# ---------------------------------------------------------------------------------------------
# 6. A while loop with a data-dependent trip count: Newton on Kepler's equation to 1e-12
# ---------------------------------------------------------------------------------------------


def kepler(M, e):
    """sum_i sin(E_i), where E_i - e sin(E_i) = M_i is solved by Newton's method."""
    s = 0.0
    for i in range(M.shape[0]):
        E = M[i]
        step = 1.0
        while abs(step) > 1e-12:
            step = (E - e * np.sin(E) - M[i]) / (1.0 - e * np.cos(E))
            E = E - step
        s += np.sin(E)
    return s


def kepler_inputs(n: int):
    return np.random.default_rng(3).uniform(0.0, 2 * np.pi, n), 0.3


@numba.njit(cache=True)
def kepler_grad_hand(M, e):
    """Implicit function theorem: dE/dM = 1 / (1 - e cos E), dE/de = sin E / (1 - e cos E)."""
    n = M.shape[0]
    d_M = np.empty(n)
    d_e = 0.0
    for i in range(n):
        E = M[i]
        step = 1.0
        while abs(step) > 1e-12:
            step = (E - e * np.sin(E) - M[i]) / (1.0 - e * np.cos(E))
            E = E - step
        slope = np.cos(E) / (1.0 - e * np.cos(E))
        d_M[i] = slope
        d_e += slope * np.sin(E)
    return d_M, d_e


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    label: str
    fun: Callable
    argnums: tuple
    make_inputs: Callable[[], tuple]
    hand_grad: Callable  # returns the gradients in argnums order (a tuple when len(argnums) > 1)
    loop: bool = False  # a scalar-loop workload (gradient/primal target <= 3)
    trips: int = 0  # loop iterations of one call (for bytes per iteration)
    rtol: float = 1e-9


def hand_grads(w: Workload, args) -> tuple:
    out = w.hand_grad(*args)
    return out if isinstance(out, tuple) else (out,)


SIZES = {  # gmm (d, K, n) pairs, rosen n, logreg (n, d), mlp (layer sizes, batch), rk4 steps, kepler n
    "full": ([(2, 5, 1000), (10, 25, 10000)], [10**4, 10**6], (10**4, 100), ((784, 64, 10), 128), 1000, 10**4),
    "quick": ([(2, 5, 100), (10, 25, 1000)], [10**3, 10**5], (10**3, 100), ((784, 64, 10), 128), 1000, 10**3),
    "tiny": ([(2, 3, 10), (3, 4, 12)], [50], (40, 5), ((8, 6, 3), 4), 20, 20),  # the smoke test
}


def workloads(quick: bool = False, tiny: bool = False) -> list[Workload]:
    gmm_sizes, rosen_sizes, (logreg_n, logreg_d), (layers, batch), steps, kepler_n = \
        SIZES["tiny" if tiny else "quick" if quick else "full"]
    out = [Workload(f"gmm_d{d}_K{K}_n{n}", f"GMM d={d} K={K} n={n:,}", gmm, (0, 1, 2),
                    lambda d=d, K=K, n=n: gmm_inputs(d, K, n), gmm_grad_hand, rtol=1e-8)
           for d, K, n in gmm_sizes]
    out.append(Workload(f"logreg_n{logreg_n}", f"logistic regression n={logreg_n:,} d={logreg_d}", logreg, (0, 1),
                        lambda: logreg_inputs(logreg_n, logreg_d), logreg_grad_hand))
    out.append(Workload("mlp", f"MLP {'-'.join(map(str, layers))} tanh, batch {batch}", mlp, (0,),
                        lambda: mlp_inputs(layers, batch),
                        lambda *a: (mlp_grad_hand(*a),)))
    out += [Workload(f"rosen_n{n}", f"Rosenbrock loop n={n:,}", rosen, (0,), lambda n=n: rosen_inputs(n),
                     rosen_grad_hand, loop=True, trips=n - 1) for n in rosen_sizes]
    out.append(Workload("rk4_lv", f"RK4 Lotka-Volterra, {steps} steps", rk4_lv, (0,), lambda: rk4_inputs(steps),
                        rk4_lv_grad_hand, loop=True, trips=steps, rtol=1e-8))
    out.append(Workload(f"kepler_n{kepler_n}", f"Newton while loop (Kepler), n={kepler_n:,}", kepler, (0, 1),
                        lambda: kepler_inputs(kepler_n), kepler_grad_hand, loop=True, rtol=1e-8))
    return out


def rebind_numpy(fun: Callable, numpy_module) -> Callable:
    """The same function (and the benchmark helpers it calls) with `np` bound to another NumPy."""
    namespace = dict(fun.__globals__)
    namespace["np"] = numpy_module
    for name, value in list(namespace.items()):
        if isinstance(value, types.FunctionType) and value.__module__ in ("workloads", "other_tools"):
            namespace[name] = types.FunctionType(value.__code__, namespace, value.__name__, value.__defaults__)
    return namespace[fun.__name__]

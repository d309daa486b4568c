"""s2sad's derivatives inside @numba.njit code: three numerical loops written entirely in numba.

    python examples/numba_loops.py

1. Gradient descent on the Rosenbrock function: `s2sad.grad` called at every step of an njit loop.
2. Hamiltonian Monte Carlo on a banana-shaped density: the leapfrog integrator and the sampler are njit,
   the force is `s2sad.grad` of the potential.
3. A backward-Euler step of the stiff Van der Pol oscillator: Newton's iterations on the implicit equation,
   each with the Jacobian from `s2sad.jacfwd`.

The functions s2sad differentiates are plain NumPy; the derivatives s2sad returns are numba-callable, so the
loops around them compile to one machine-code function each (no Python between steps). Every derivative is
checked against central finite differences; the script exits with status 1 if one disagrees.
"""

from __future__ import annotations

import sys

import numba
import numpy as np

import s2sad

EPS = 1e-6


@numba.njit  # s2sad differentiates the Python function behind an njit one
def rosenbrock(p):
    return (1.0 - p[0]) ** 2 + 100.0 * (p[1] - p[0] ** 2) ** 2


@numba.njit
def banana(q):
    """Potential energy -log density of a banana-shaped distribution in two dimensions."""
    return 0.5 * q[0] ** 2 + 0.5 * (q[1] - 0.5 * q[0] ** 2) ** 2 / 0.5


@numba.njit
def van_der_pol(y, mu):
    return np.array([y[1], mu * (1.0 - y[0] ** 2) * y[1] - y[0]])


rosenbrock_grad = s2sad.grad(rosenbrock)
force = s2sad.grad(banana)  # minus the force, as HMC writes it: dU/dq
vdp_jacobian = s2sad.jacfwd(van_der_pol)


# --- 1. gradient descent --------------------------------------------------------------------------------------

@numba.njit
def descend(p, rate, steps):
    for _ in range(steps):
        p = p - rate * rosenbrock_grad(p)
    return p


# --- 2. HMC leapfrog ------------------------------------------------------------------------------------------

@numba.njit
def leapfrog(q, p, step, n_steps):
    p = p - 0.5 * step * force(q)
    for i in range(n_steps):
        q = q + step * p
        if i < n_steps - 1:
            p = p - step * force(q)
    p = p - 0.5 * step * force(q)
    return q, p


@numba.njit
def hmc(q, n_samples, step, n_steps, seed):
    np.random.seed(seed)
    samples = np.empty((n_samples, q.size))
    accepted = 0
    for s in range(n_samples):
        p = np.random.standard_normal(q.size)
        q_new, p_new = leapfrog(q, p, step, n_steps)
        before = banana(q) + 0.5 * np.sum(p * p)
        after = banana(q_new) + 0.5 * np.sum(p_new * p_new)
        if np.random.random() < np.exp(before - after):
            q = q_new
            accepted += 1
        samples[s] = q
    return samples, accepted / n_samples


# --- 3. backward Euler with Newton ----------------------------------------------------------------------------

@numba.njit
def backward_euler_step(y, h, mu, tol):
    """y_next with y_next - y - h f(y_next) = 0, by Newton: (I - h J(y_next)) dy = -residual."""
    y_next = y.copy()
    for _ in range(50):
        residual = y_next - y - h * van_der_pol(y_next, mu)
        if np.max(np.abs(residual)) < tol:
            break
        y_next = y_next - np.linalg.solve(np.eye(y.size) - h * vdp_jacobian(y_next, mu), residual)
    return y_next


# --- checks ---------------------------------------------------------------------------------------------------

@numba.njit
def at(fn, x, mu):
    """A derivative evaluated in numba code (passed as a first-class function), for the checks."""
    return fn(x, mu)


@numba.njit
def grad_at(fn, x):
    return fn(x)


def fd_grad(f, x):
    e = np.eye(x.size) * EPS
    return np.array([(f(x + e[k]) - f(x - e[k])) / (2 * EPS) for k in range(x.size)])


def fd_jacobian(f, x):
    e = np.eye(x.size) * EPS
    return np.array([(f(x + e[k]) - f(x - e[k])) / (2 * EPS) for k in range(x.size)]).T


def check(name: str, got, want, rtol=1e-6, atol=1e-8) -> bool:
    ok = np.allclose(got, want, rtol=rtol, atol=atol)
    print(f"  {name}: {'ok' if ok else 'MISMATCH'} (max difference {np.max(np.abs(np.asarray(got) - want)):.1e})")
    return ok


def main() -> int:
    ok = True
    p0 = np.array([-1.2, 1.0])
    print("1. gradient descent on Rosenbrock")
    ok &= check("grad in njit vs finite differences", grad_at(rosenbrock_grad, p0),
                fd_grad(rosenbrock, p0))
    p = descend(p0, 1e-3, 20000)
    print(f"  20,000 steps from {p0}: {p} (minimum at [1, 1]), f = {rosenbrock(p):.2e}")
    ok &= rosenbrock(p) < rosenbrock(p0)

    print("2. HMC leapfrog on a banana density")
    q0 = np.array([0.5, -0.3])
    ok &= check("grad in njit vs finite differences", grad_at(force, q0), fd_grad(banana, q0))
    q1, p1 = leapfrog(q0, np.array([0.2, 0.4]), 0.01, 100)
    drift = abs(banana(q1) + 0.5 * p1 @ p1 - banana(q0) - 0.5 * 0.2 ** 2 - 0.5 * 0.4 ** 2)
    print(f"  energy drift over 100 leapfrog steps of 0.01: {drift:.1e}")
    ok &= drift < 1e-3
    samples, rate = hmc(q0, 5000, 0.2, 10, 0)
    print(f"  5,000 samples, acceptance {rate:.2f}, mean {samples.mean(axis=0)} (exact [0, 0.5])")

    print("3. backward Euler for Van der Pol (mu = 5), Newton with jacfwd")
    y0, mu, h = np.array([2.0, 0.0]), 5.0, 0.05
    ok &= check("jacfwd in njit vs finite differences", at(vdp_jacobian, y0, mu),
                fd_jacobian(lambda y: van_der_pol(y, mu), y0))
    y = y0
    for _ in range(40):
        y = backward_euler_step(y, h, mu, 1e-12)
    print(f"  40 steps of h = {h}: y = {y}")
    last = backward_euler_step(y, h, mu, 1e-12)
    ok &= check("implicit equation solved", last - y - h * van_der_pol(last, mu), np.zeros(2), atol=1e-10)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

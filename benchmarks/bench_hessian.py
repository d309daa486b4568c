#!/usr/bin/env python3
"""Hessian vs. gradient: what `s2sad.hessian(f)(x)` costs compared with `s2sad.grad(f)(x)`, n = 100.

    .venv/bin/python benchmarks/bench_hessian.py            # full run (30 batches per timing)
    .venv/bin/python benchmarks/bench_hessian.py --quick    # smoke test (5 batches per timing)

`s2sad.hessian(f)` is `jacfwd(grad(f))`: forward mode over the generated adjoint, one jvp call
per input element, so a Hessian costs about n calls of the forward-over-reverse code. Two
functions of x in R^100 (see benchmarks/README.md, "Hessian vs gradient"):

1. `loop_fn`: extended Rosenbrock as an explicit scalar loop; also compared with a hand-written
   numba Hessian (tridiagonal closed form, filled into a dense n x n matrix).
2. `vec_fn`: a vectorized function, log(sum(exp(tanh(x) * x))).

Before timing, every s2sad Hessian is checked against central finite differences of the s2sad
gradient (eps 1e-6, rtol 1e-5, atol 1e-6) and, for Rosenbrock, against the hand-written Hessian
(rtol = atol = 1e-9); the script exits with status 1 if any check fails.

The run uses a fresh temporary S2SAD_CACHE_DIR (numba caches next to the generated modules), so
the reported first call of the Hessian is a real code generation + numba compile every time.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

import s2sad
from bench_core import fmt_time, machine, measure  # the same timing method as the core benchmarks

N = 100

# The functions being differentiated. s2sad reads their source, so they live in this file.


def loop_fn(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def vec_fn(x):
    return np.log(np.sum(np.exp(np.tanh(x) * x)))


@numba.njit
def loop_hessian_hand(x):
    """Hessian of loop_fn: tridiagonal, written into a dense (n, n) matrix."""
    n = x.shape[0]
    H = np.zeros((n, n))
    for i in range(n - 1):
        xi = x[i]
        H[i, i] += 1200.0 * xi * xi - 400.0 * x[i + 1] + 2.0
        H[i, i + 1] = -400.0 * xi
        H[i + 1, i] = -400.0 * xi
        H[i + 1, i + 1] += 200.0
    return H


# Timing (same method as bench_core.py)


def fd_hessian(grad, x, eps: float = 1e-6) -> np.ndarray:
    """Central finite differences of the gradient; column j = d grad / d x_j."""
    H = np.empty((x.size, x.size))
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = eps
        H[:, j] = (grad(x + e) - grad(x - e)) / (2 * eps)
    return H


def check(what: str, got, want, rtol: float, atol: float) -> None:
    if np.shape(got) != np.shape(want) or not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.max(np.abs(got - want)) if np.shape(got) == np.shape(want) else f"shape {np.shape(got)}"
        sys.exit(f"\n*** HESSIAN MISMATCH in {what}: max abs diff {err} (rtol {rtol}, atol {atol}). "
                 "Not timing a wrong Hessian. ***")


def bench(name: str, fn, x, repeat: int, hand=None) -> list[str]:
    t0 = time.perf_counter()
    hess = s2sad.hessian(fn)
    H = hess(x)
    first = time.perf_counter() - t0
    grad = s2sad.grad(fn)
    check(f"{name} vs finite differences of s2sad.grad", H, fd_hessian(grad, x), rtol=1e-5, atol=1e-6)
    if hand is not None:
        check(f"{name} vs hand-written Hessian", H, hand(x), rtol=1e-9, atol=1e-9)
    g, h = measure(grad, x, repeat=repeat), measure(hess, x, repeat=repeat)
    g_best, g_med, h_best, h_med = g.best, g.median, h.best, h.median
    row = [name, f"{fmt_time(g_best)} ({fmt_time(g_med)})", f"{fmt_time(h_best)} ({fmt_time(h_med)})",
           f"{h_best / g_best:.0f}", f"{h_best / (x.size * g_best):.2f}"]
    if hand is not None:
        k = measure(hand, x, repeat=repeat)
        k_best, k_med = k.best, k.median
        row += [f"{fmt_time(k_best)} ({fmt_time(k_med)})", f"{h_best / k_best:.0f}"]
    else:
        row += ["n/a", "n/a"]
    return row + [fmt_time(first)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 batches per timing instead of 30 (smoke test)")
    args = parser.parse_args(argv)
    repeat = 5 if args.quick else 30
    x = np.random.default_rng(0).normal(size=N) * 0.5
    tmp = tempfile.TemporaryDirectory(prefix="s2sad-bench-hessian-")
    os.environ["S2SAD_CACHE_DIR"] = tmp.name  # cold caches: first call = codegen + numba compile

    rows = []
    for name, fn, hand in [("loop_fn (Rosenbrock loop)", loop_fn, loop_hessian_hand),
                           ("vec_fn (log-sum-exp(tanh(x)*x))", vec_fn, None)]:
        print(f"{name} ...", file=sys.stderr, flush=True)
        rows.append(bench(name, fn, x, repeat, hand))

    header = ["function, n = 100", "grad", "hessian", "hess/grad", "hess/(n*grad)",
              "hand Hessian (njit)", "s2sad/hand", "hessian first call"]
    print(f"machine: {machine()}")
    print(f"per-call times: best of {repeat} batches (median in parentheses); ratios use the best. "
          "first call = s2sad.hessian(f) + its first call, empty cache (codegen + numba compile)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()

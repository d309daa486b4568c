#!/usr/bin/env python3
"""Per-example gradients with vmap: `s2sad.vmap(s2sad.grad(loss))` over n examples of d = 100 features.

    .venv/bin/python benchmarks/bench_vmap.py            # full run, n = 100_000 (10 batches per timing)
    .venv/bin/python benchmarks/bench_vmap.py --quick    # smoke test, n = 10_000 (3 batches per timing)

The workload is the logistic-regression loss of one example, differentiated with respect to the
shared parameters (W, b) and mapped over the rows of X and Y (see benchmarks/README.md,
"Per-example gradients (vmap)"). Rows of the table:

- s2sad vmap, target="cpu" (a serial generated loop) and target="parallel" (numba prange);
- NumPy: the closed form (p - y) * x and (p - y), vectorized (the baseline);
- a hand-written numba njit(parallel=True) per-example loop (the reference limit);
- jax.jit(jax.vmap(jax.grad(...))), only if jax is installed.

Before timing, both s2sad results are checked against the NumPy closed form (rtol 1e-9,
atol 1e-12); the script exits with status 1 on a mismatch. A fresh temporary S2SAD_CACHE_DIR is
set before s2sad is imported, so the reported first calls are code generation + numba compile.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

_CACHE = tempfile.TemporaryDirectory(prefix="s2sad-bench-vmap-")
os.environ["S2SAD_CACHE_DIR"] = _CACHE.name  # before importing s2sad: cold caches, real first calls

import numba  # noqa: E402
import numpy as np  # noqa: E402

import s2sad  # noqa: E402
from bench_core import fmt_time, machine, measure  # noqa: E402  (the same timing method as the core benchmarks)

D = 100

# The function being differentiated. s2sad reads its source, so it lives in this file.


def per_example_loss(W, b, x, y):
    p = 0.5 * (np.tanh((x @ W + b) / 2.0) + 1.0)
    return -np.log(p * y + (1.0 - p) * (1.0 - y))


def numpy_grads(W, b, X, Y):
    """Closed form: d loss_i / d(W, b) = ((p_i - y_i) x_i, p_i - y_i), valid for labels in {0, 1}."""
    r = 0.5 * (np.tanh((X @ W + b) / 2.0) + 1.0) - Y
    return r[:, None] * X, r


@numba.njit(parallel=True)
def hand_grads(W, b, X, Y):
    n, d = X.shape
    dW, db = np.empty((n, d)), np.empty(n)
    for i in numba.prange(n):
        z = b
        for j in range(d):
            z += X[i, j] * W[j]
        r = 0.5 * (np.tanh(z / 2.0) + 1.0) - Y[i]
        for j in range(d):
            dW[i, j] = r * X[i, j]
        db[i] = r
    return dW, db


def jax_grads():
    """jax.jit(jax.vmap(jax.grad(...))) of the same loss, or None when jax is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def loss(W, b, x, y):
        p = 0.5 * (jnp.tanh((x @ W + b) / 2.0) + 1.0)
        return -jnp.log(p * y + (1.0 - p) * (1.0 - y))

    f = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, None, 0, 0)))
    return lambda *args: jax.block_until_ready(f(*args))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 10_000 and 3 batches per timing (smoke test)")
    args = parser.parse_args(argv)
    n, repeat = (10_000, 3) if args.quick else (100_000, 10)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, D))
    W, b = 0.1 * rng.standard_normal(D), 0.1
    Y = (rng.uniform(size=n) < 0.5).astype(np.float64)
    inputs = (W, b, X, Y)
    want = numpy_grads(*inputs)

    fns, first = {}, {}
    for target in ("cpu", "parallel"):
        print(f"s2sad vmap, target={target!r}: first call ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        fns[target] = s2sad.vmap(s2sad.grad(per_example_loss, argnums=(0, 1)),
                                 in_axes=(None, None, 0, 0), target=target)
        got = fns[target](*inputs)
        first[target] = time.perf_counter() - t0
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            if np.shape(g) != np.shape(w) or not np.allclose(g, w, rtol=1e-9, atol=1e-12):
                err = np.max(np.abs(g - w)) if np.shape(g) == np.shape(w) else f"shape {np.shape(g)}"
                sys.exit(f"\n*** MISMATCH: s2sad vmap target={target!r}, output {k} (dW, db) disagrees with "
                         f"the NumPy closed form (max abs diff {err}). Not timing a wrong gradient. ***")

    print("timing ...", file=sys.stderr, flush=True)
    t = {name: measure(f, *inputs, repeat=repeat) for name, f in
         [("cpu", fns["cpu"]), ("parallel", fns["parallel"]), ("numpy", numpy_grads), ("hand", hand_grads)]}
    jf = jax_grads()
    if jf is not None:
        t["jax"] = measure(jf, *inputs, repeat=repeat)

    cell = lambda k: f"{fmt_time(t[k].best)} ({fmt_time(t[k].median)})"  # noqa: E731
    ratios = lambda k: (f"{t[k].best / t['hand'].best:.2f}", f"{t[k].best / t['numpy'].best:.2f}")  # noqa: E731
    rows = [['s2sad vmap, target="cpu"', cell("cpu"), "1.00", *ratios("cpu"), fmt_time(first["cpu"])],
            ['s2sad vmap, target="parallel"', cell("parallel"), f"{t['cpu'].best / t['parallel'].best:.2f}",
             *ratios("parallel"), fmt_time(first["parallel"])],
            ["NumPy closed form, vectorized (baseline)", cell("numpy"), "", "", "1.00", ""],
            ["hand-written numba njit(parallel=True) loop", cell("hand"), "", "1.00", "", ""],
            ["jax.jit(jax.vmap(jax.grad))", cell("jax") if "jax" in t else "jax not installed", "", "", "", ""]]
    header = ["per-example gradients (dW, db)", "time", "speedup vs cpu", "/ hand", "/ numpy", "first call"]

    print(f"machine: {machine()}")
    print(f"n = {n:,} examples, d = {D}; per-call times: best of {repeat} batches (median in parentheses); "
          "ratios use the best. first call = vmap(grad(...)) + its first call, empty cache "
          "(codegen + numba compile)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()

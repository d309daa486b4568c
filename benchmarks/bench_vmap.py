#!/usr/bin/env python3
"""Per-example gradients with vmap: `s2sad.vmap(s2sad.grad(loss))` over n examples of d = 100 features.

    .venv/bin/python benchmarks/bench_vmap.py            # full run, n = 100_000 (10 batches per timing)
    .venv/bin/python benchmarks/bench_vmap.py --quick    # smoke test, n = 10_000 (3 batches per timing)
    python benchmarks/bench_vmap.py --n 1000000 --cuda   # on a GPU machine: adds the CUDA target's rows
    ... --dtype float32                                   # every input (and so every result) in float32

The workload is the logistic-regression loss of one example, differentiated with respect to the
shared parameters (W, b) and mapped over the rows of X and Y (see benchmarks/README.md,
"Per-example gradients (vmap)"). Rows of the table:

- s2sad vmap, target="cpu" (a serial generated loop) and target="parallel" (numba prange);
- NumPy: the closed form (p - y) * x and (p - y), vectorized (the baseline);
- a hand-written numba njit(parallel=True) per-example loop (the reference limit);
- jax.jit(jax.vmap(jax.grad(...))), only if jax is installed (on jax's default backend, named in the row);
- with --cuda: s2sad vmap, target="cuda", called with host arrays (transfers included) and with
  device arrays (results stay on the GPU), beside a hand-written @cuda.jit kernel on device arrays;
  the device-array rows run on X stored row-major (NumPy's default) and column-major.

Before timing, both s2sad results are checked against the NumPy closed form (rtol 1e-9,
atol 1e-12; 1e-4 and 1e-6 in float32) and their dtype; the script exits with status 1 on a mismatch. A fresh temporary S2SAD_CACHE_DIR is
set before s2sad is imported, so the reported first calls are code generation + numba compile.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

import numba
import numpy as np
from numba import cuda  # the --cuda rows; importing it needs no GPU

import s2sad
from bench_core import fmt_time, machine, measure  # (the same timing method as the core benchmarks)

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
    dW, db = np.empty((n, d), X.dtype), np.empty(n, X.dtype)
    for i in numba.prange(n):
        z = b
        for j in range(d):
            z += X[i, j] * W[j]
        r = 0.5 * (np.tanh(z / 2.0) + 1.0) - Y[i]
        for j in range(d):
            dW[i, j] = r * X[i, j]
        db[i] = r
    return dW, db


def hand_cuda_kernel():
    """One thread per example, the same arithmetic as hand_grads, on device arrays."""
    kernel = cuda.jit(hand_cuda_thread)

    def run(W, b, X, Y):
        n, d = X.shape
        dW, db = cuda.device_array((n, d), X.dtype), cuda.device_array(n, X.dtype)
        kernel[(n + 127) // 128, 128](W, b, X, Y, dW, db)
        cuda.synchronize()
        return dW, db

    return run


def hand_cuda_thread(W, b, X, Y, dW, db):
    i = cuda.grid(1)
    if i < X.shape[0]:
        z = b
        for j in range(D):  # a compile-time trip count, as in s2sad's kernel
            z += X[i, j] * W[j]
        r = 0.5 * (math.tanh(z / 2.0) + 1.0) - Y[i]
        for j in range(D):
            dW[i, j] = r * X[i, j]
        db[i] = r


GPU_ROWS = [('s2sad vmap, target="cuda", device arrays, row-major X', "cuda, device arrays"),
            ('s2sad vmap, target="cuda", device arrays, column-major X', "cuda, device arrays, column-major X"),
            ("hand-written @cuda.jit kernel, device arrays, row-major X", "hand cuda"),
            ("hand-written @cuda.jit kernel, device arrays, column-major X", "hand cuda, column-major X")]


def on_device(fn):
    """fn called on device arrays, timed until the GPU has finished."""

    def run(*args):
        out = fn(*args)
        cuda.synchronize()
        return out

    return run


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
    return jax.default_backend(), lambda *args: jax.block_until_ready(f(*args))


def check(target: str, got, want) -> None:
    """Exit with status 1 when a result disagrees with the NumPy closed form (in its dtype): a wrong gradient
    is not timed."""
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        single = np.result_type(w) == np.float32
        rtol, atol = (1e-4, 1e-6) if single else (1e-9, 1e-12)
        if np.shape(g) != np.shape(w) or np.result_type(g) != np.result_type(w) \
                or not np.allclose(g, w, rtol=rtol, atol=atol):
            err = np.max(np.abs(g - w)) if np.shape(g) == np.shape(w) else f"shape {np.shape(g)}"
            sys.exit(f"\n*** MISMATCH: s2sad vmap target={target!r}, output {k} (dW, db) disagrees with "
                     f"the NumPy closed form (max abs diff {err}). Not timing a wrong gradient. ***")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 10_000 and 3 batches per timing (smoke test)")
    parser.add_argument("--n", type=int, help="number of examples (default 100_000, or 10_000 with --quick)")
    parser.add_argument("--cuda", action="store_true", help='add vmap(target="cuda") rows (needs a GPU)')
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64", help="the inputs' dtype")
    args = parser.parse_args(argv)
    cache = tempfile.TemporaryDirectory(prefix="s2sad-bench-vmap-")
    os.environ["S2SAD_CACHE_DIR"] = cache.name  # read at each first call: cold caches, real first calls
    n, repeat = (10_000, 3) if args.quick else (100_000, 10)
    n = args.n or n
    rng = np.random.default_rng(0)
    dtype = np.dtype(args.dtype)
    X = rng.standard_normal((n, D)).astype(dtype)
    W, b = (0.1 * rng.standard_normal(D)).astype(dtype), dtype.type(0.1)
    Y = (rng.uniform(size=n) < 0.5).astype(dtype)
    inputs = (W, b, X, Y)
    want = numpy_grads(*inputs)

    fns, first = {}, {}
    targets = ("cpu", "parallel", "cuda") if args.cuda else ("cpu", "parallel")
    for target in targets:
        print(f"s2sad vmap, target={target!r}: first call ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        fns[target] = s2sad.vmap(s2sad.grad(per_example_loss, argnums=(0, 1)),
                                 in_axes=(None, None, 0, 0), target=target)
        got = fns[target](*inputs)
        first[target] = time.perf_counter() - t0
        check(target, got, want)
    on_gpu = {}  # row name -> (function, device inputs)
    if args.cuda:
        rows_first = (cuda.to_device(W), b, cuda.to_device(X), cuda.to_device(Y))
        columns_first = (rows_first[0], b, cuda.to_device(np.asfortranarray(X)), rows_first[3])
        s2sad_cuda, hand_cuda = on_device(fns["cuda"]), hand_cuda_kernel()
        on_gpu = {"cuda, device arrays": (s2sad_cuda, rows_first),
                  "cuda, device arrays, column-major X": (s2sad_cuda, columns_first),
                  "hand cuda": (hand_cuda, rows_first),
                  "hand cuda, column-major X": (hand_cuda, columns_first)}
        for name, (fn, device_inputs) in on_gpu.items():
            check(name, [g.copy_to_host() for g in fn(*device_inputs)], want)

    print("timing ...", file=sys.stderr, flush=True)
    host_fns = [("cpu", fns["cpu"]), ("parallel", fns["parallel"]), ("numpy", numpy_grads), ("hand", hand_grads)]
    t = {name: measure(f, *inputs, repeat=repeat) for name, f in host_fns}
    if args.cuda:
        t["cuda"] = measure(fns["cuda"], *inputs, repeat=repeat)
        for name, (fn, device_inputs) in on_gpu.items():
            t[name] = measure(fn, *device_inputs, repeat=repeat)
    backend, jf = jax_grads() or (None, None)
    if jf is not None:
        t["jax"] = measure(jf, *inputs, repeat=repeat)  # NumPy inputs; the results stay on jax's device
        if backend == "gpu":
            import jax

            t["jax, device arrays"] = measure(jf, *jax.device_put(inputs), repeat=repeat)

    cell = lambda k: f"{fmt_time(t[k].best)} ({fmt_time(t[k].median)})"  # noqa: E731
    ratios = lambda k: (f"{t[k].best / t['hand'].best:.2f}", f"{t[k].best / t['numpy'].best:.2f}")  # noqa: E731
    speedup = lambda k: f"{t['cpu'].best / t[k].best:.2f}"  # noqa: E731
    rows = [['s2sad vmap, target="cpu"', cell("cpu"), "1.00", *ratios("cpu"), fmt_time(first["cpu"])],
            ['s2sad vmap, target="parallel"', cell("parallel"), speedup("parallel"),
             *ratios("parallel"), fmt_time(first["parallel"])]]
    if args.cuda:
        rows += [['s2sad vmap, target="cuda", host arrays', cell("cuda"), speedup("cuda"), *ratios("cuda"),
                  fmt_time(first["cuda"])],
                 *([label, cell(k), speedup(k), *ratios(k), ""] for label, k in GPU_ROWS)]
    rows += [["NumPy closed form, vectorized (baseline)", cell("numpy"), "", "", "1.00", ""],
             ["hand-written numba njit(parallel=True) loop", cell("hand"), "", "1.00", "", ""],
             [f"jax.jit(jax.vmap(jax.grad)), {backend}" if backend else "jax.jit(jax.vmap(jax.grad))",
              cell("jax") if "jax" in t else "jax not installed", "", "", "", ""]]
    if "jax, device arrays" in t:
        rows.append(["jax.jit(jax.vmap(jax.grad)), gpu, device arrays", cell("jax, device arrays"),
                     speedup("jax, device arrays"), "", "", ""])
    header = ["per-example gradients (dW, db)", "time", "speedup vs cpu", "/ hand", "/ numpy", "first call"]
    print(f"machine: {machine()}")
    if args.cuda:
        name = getattr(cuda.get_current_device(), "name", b"numba's CUDA simulator")
        print(f"GPU: {name.decode() if isinstance(name, bytes) else name}")
    print(f"n = {n:,} examples, d = {D}, {dtype}; per-call times: best of {repeat} batches (median in parentheses); "
          "ratios use the best. first call = vmap(grad(...)) + its first call, empty cache "
          "(codegen + numba compile)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()

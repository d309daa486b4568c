#!/usr/bin/env python3
"""s2sad's gradients as numba callables (issue 36): per-call cost from Python and inside an @njit loop.

    .venv/bin/python benchmarks/bench_numba_callable.py            # about 20 s (compiles included)
    .venv/bin/python benchmarks/bench_numba_callable.py --quick    # fewer repeats

Three comparisons, each side by side in this one process (medians of batches, ns per call):

1. Per-call overhead on two floats: `s2sad.jit(s2sad.grad(tiny))(1.0, 2.0)` vs a hand-written njit gradient
   vs an njit function that returns a pair of floats (numba's dispatch and the boxing of the result, nothing
   computed). Target: s2sad <= dispatch + 20 ns.
2. The Kepler Newton solve (benchmarks/workloads.py, M of one element) through the public API,
   `s2sad.jit(s2sad.grad(kepler, (0, 1)))`, vs its hand adjoint `kepler_grad_hand`. Target: <= 1.3x. Also
   s2sad's generated `kepler_grad` dispatcher called directly: what the public API adds is the difference.
3. Inside an @njit loop: the same gradients called many times from compiled code, s2sad's vs the hand
   adjoint's (and vs the generated code itself), each passed to the same loop as a first-class function.
   Target: <= 1.1x.

Every gradient is checked against the hand-written one before it is timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s2sad  # noqa: E402
from workloads import kepler, kepler_grad_hand, kepler_inputs  # noqa: E402


def tiny(x, y):
    return x * y + np.sin(x)


@numba.njit
def tiny_grad_hand(x, y):
    return y + np.cos(x), x


@numba.njit
def pair(x, y):
    return y, x  # numba's dispatch and the boxing of a pair of floats, nothing computed


@numba.njit
def tiny_loop(grad_fn, n):
    s = 0.0
    for i in range(n):
        gx, gy = grad_fn(1.0 + 1e-6 * i, 2.0)
        s += gx + gy
    return s


@numba.njit
def kepler_loop(grad_fn, M, e, n):
    s = 0.0
    for i in range(n):
        dM, de = grad_fn(M, e + 1e-9 * i)
        s += dM[0] + de
    return s


def per_call_ns(fn, args, calls: int, batches: int) -> float:
    """Median over batches of the time per call, in ns."""
    s2sad.wait_for_compiles()  # compiled code, not a cold call's Python (s2sad.background)
    fn(*args)
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        times.append((time.perf_counter() - start) / calls * 1e9)
    return statistics.median(times)


def interleaved(named: dict, args, calls: int, batches: int) -> dict:
    """per_call_ns of each, batches interleaved (so a noisy neighbour slows them alike)."""
    out = {k: [] for k in named}
    for fn in named.values():
        fn(*args)
    for _ in range(batches):
        for k, fn in named.items():
            out[k].append(per_call_ns(fn, args, calls, 1))
    return {k: statistics.median(v) for k, v in out.items()}


def in_loop_ns(loop, fns: dict, args, n: int, batches: int) -> dict:
    """ns per gradient call inside the compiled `loop(fn, *args, n)`, each fn in turn."""
    for fn in fns.values():
        loop(fn, *args, 10)
    out = {k: [] for k in fns}
    for _ in range(batches):
        for k, fn in fns.items():
            start = time.perf_counter()
            loop(fn, *args, n)
            out[k].append((time.perf_counter() - start) / n * 1e9)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args()
    calls, batches = (20_000, 7) if opts.quick else (100_000, 15)

    g = s2sad.jit(s2sad.grad(tiny, (0, 1)))
    np.testing.assert_allclose(g(1.0, 2.0), tiny_grad_hand(1.0, 2.0), rtol=1e-12)
    python_path = s2sad.grad(tiny, (0, 1))  # the same gradient without s2sad.jit: s2sad's Python entry
    over = interleaved({"s2sad": g, "hand": tiny_grad_hand, "dispatch": pair, "python": python_path}, (1.0, 2.0),
                       calls, batches)

    M, e = kepler_inputs(1)
    kg = s2sad.jit(s2sad.grad(kepler, (0, 1)))
    for got, want in zip(kg(M, e), kepler_grad_hand(M, e)):
        np.testing.assert_allclose(got, want, rtol=1e-8)
    raw = kg.__s2sad_transform__.specialize((M, e))[0].compiled("wrapper")  # the generated njit gradient
    kep = interleaved({"s2sad": kg, "hand": kepler_grad_hand, "raw": raw}, (M, e), calls // 2, batches)

    n = 10_000 if opts.quick else 100_000
    np.testing.assert_allclose(tiny_loop(g, 100), tiny_loop(tiny_grad_hand, 100), rtol=1e-12)
    np.testing.assert_allclose(kepler_loop(kg, M, e, 100), kepler_loop(kepler_grad_hand, M, e, 100), rtol=1e-8)
    loop_tiny = in_loop_ns(tiny_loop, {"s2sad": g, "hand": tiny_grad_hand}, (), n, batches)
    loop_kep = in_loop_ns(kepler_loop, {"s2sad": kg, "hand": kepler_grad_hand, "raw": raw}, (M, e), n // 4, batches)

    rows = [
        ("1. from Python, two floats", "s2sad.jit(grad(tiny))", over["s2sad"], "hand njit gradient", over["hand"],
         f"dispatch {over['dispatch']:.0f} ns; s2sad - dispatch = {over['s2sad'] - over['dispatch']:+.0f} ns "
         f"(target <= +20)"),
        ("1. from Python, two floats", "s2sad.grad(tiny)", over["python"], "hand njit gradient", over["hand"],
         "without s2sad.jit: s2sad's Python entry function"),
        ("2. from Python, Kepler n=1", "s2sad.jit(grad(kepler))", kep["s2sad"], "kepler_grad_hand", kep["hand"],
         "target <= 1.3x"),
        ("2. from Python, Kepler n=1", "s2sad.jit(grad(kepler))", kep["s2sad"], "generated kepler_grad", kep["raw"],
         "what the public API adds to the generated code"),
        ("3. in an @njit loop, tiny", "s2sad.jit(grad(tiny))", loop_tiny["s2sad"], "hand njit gradient",
         loop_tiny["hand"], "target <= 1.1x"),
        ("3. in an @njit loop, Kepler", "s2sad.jit(grad(kepler))", loop_kep["s2sad"], "kepler_grad_hand",
         loop_kep["hand"], "target <= 1.1x"),
        ("3. in an @njit loop, Kepler", "s2sad.jit(grad(kepler))", loop_kep["s2sad"], "generated kepler_grad",
         loop_kep["raw"], "what calling through s2sad adds in compiled code"),
    ]
    print(f"numba {numba.__version__}, NUMBA_OPT={numba.config.OPT}; ns per call, median of {batches} batches")
    print(f"{'comparison':30} {'s2sad':>24} {'ns':>8} {'reference':>20} {'ns':>8} {'ratio':>7}  note")
    for what, a, ta, b, tb, note in rows:
        print(f"{what:30} {a:>24} {ta:8.1f} {b:>20} {tb:8.1f} {ta / tb:7.2f}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

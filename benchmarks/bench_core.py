#!/usr/bin/env python3
"""Core s2sad benchmarks: gradient cost vs. the numba primal, vs. hand-written adjoints, and per-call overhead.

    .venv/bin/python benchmarks/bench_core.py            # full run (about half a minute)
    .venv/bin/python benchmarks/bench_core.py --quick    # smoke test (about 10 s)

Three benchmarks (see benchmarks/README.md for what each row means):

1. Explicit-loop extended Rosenbrock: numba primal, s2sad gradient, a hand-written numba adjoint,
   and the first call of the s2sad gradient in fresh subprocesses (cold: empty caches; warm: disk cache).
2. Logistic-regression negative log-likelihood, X of shape (1000, 100): numba primal vs. s2sad
   `grad(loss, argnums=(0, 1))` (and a hand-written numba gradient for reference).
3. Per-call overhead of `s2sad.grad(tiny)(1.0, 2.0)` vs. calling a numba.njit function.

Every s2sad gradient is checked against its hand-written counterpart (np.allclose) before timing;
the script exits with status 1 if any disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numba
import numpy as np

import s2sad

# ---------------------------------------------------------------------------------------------
# The functions being differentiated. s2sad reads their source, so they live in this file.
# ---------------------------------------------------------------------------------------------


def rosen(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


@numba.njit  # jitted so that the numba primal of `loss` can call it; s2sad sees through the dispatcher
def sigmoid(z):
    return 0.5 * (np.tanh(z / 2) + 1)


def loss(W, b, X, y):
    preds = sigmoid(X @ W + b)
    return -np.sum(np.log(preds * y + (1 - preds) * (1 - y)))


def tiny(x, y):
    return x * y + np.sin(x)


# Primal baselines: the very same functions, compiled by numba.
rosen_primal = numba.njit(rosen)
loss_primal = numba.njit(loss)

# ---------------------------------------------------------------------------------------------
# Hand-written adjoints (the baselines s2sad is compared with, and the reference for checking).
# ---------------------------------------------------------------------------------------------


@numba.njit
def rosen_grad_hand(x):
    """Value and gradient of rosen in one fused loop (s2sad's generated vjp also computes the value)."""
    n = x.shape[0]
    g = np.zeros(n)
    s = 0.0
    for i in range(n - 1):
        xi = x[i]
        a = x[i + 1] - xi * xi
        c = 1.0 - xi
        s += 100.0 * a * a + c * c
        g[i] += -400.0 * a * xi - 2.0 * c
        g[i + 1] += 200.0 * a
    return s, g


@numba.njit
def loss_grad_hand(W, b, X, y):
    """d loss / d(W, b); uses d/dz of -log(p*y + (1-p)*(1-y)) = p - y, valid for labels y in {0, 1}."""
    p = 0.5 * (np.tanh((X @ W + b) / 2) + 1)
    r = p - y
    return X.T @ r, np.sum(r)


@numba.njit
def tiny_grad_hand(x, y):
    return y + np.cos(x)


# ---------------------------------------------------------------------------------------------
# Timing helpers
# ---------------------------------------------------------------------------------------------


@dataclass
class Timing:
    median: float  # seconds per call
    best: float  # seconds per call

    def __str__(self):
        return f"{fmt_time(self.best)} (med {fmt_time(self.median)})"


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def measure(fn, *args, repeat: int, min_batch_s: float = 5e-3) -> Timing:
    """Best and median seconds per call of fn(*args) over `repeat` batches, after a warm-up.

    Each batch runs fn enough times (calibrated once) to last at least `min_batch_s`, so that
    timer resolution does not matter for fast calls.
    """
    s2sad.wait_for_compiles()  # steady state: compiled code, not a cold call's Python (s2sad.background)
    fn(*args)  # warm-up (compilation has already happened, but caches and allocator settle)
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        if time.perf_counter() - t0 >= min_batch_s:
            break
        number *= 2
    per_call = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        per_call.append((time.perf_counter() - t0) / number)
    return Timing(statistics.median(per_call), min(per_call))


def check_close(what: str, got, want) -> None:
    """Abort the whole run (exit status 1) when s2sad disagrees with the hand-written gradient."""
    got_t = got if isinstance(got, tuple) else (got,)
    want_t = want if isinstance(want, tuple) else (want,)
    for k, (a, b) in enumerate(zip(got_t, want_t, strict=True)):
        if np.shape(a) != np.shape(b) or not np.allclose(a, b, rtol=1e-9, atol=1e-9):
            err = np.max(np.abs(np.asarray(a) - np.asarray(b))) if np.shape(a) == np.shape(b) else "shape"
            sys.exit(f"\n*** GRADIENT MISMATCH in {what} (output {k}): s2sad disagrees with the "
                     f"hand-written adjoint (max abs diff {err}). Not timing a wrong gradient. ***")


def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


# ---------------------------------------------------------------------------------------------
# 1. Rosenbrock
# ---------------------------------------------------------------------------------------------

ROSEN_TARGET = 3.0  # gradient time / primal time


def rosen_input(n: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1.5, 1.5, n)


def bench_rosen(n: int, repeat: int) -> dict:
    x = rosen_input(n)
    grad = s2sad.grad(rosen)
    check_close(f"rosen (n={n})", grad(x), rosen_grad_hand(x)[1])
    check_close(f"rosen value (n={n})", rosen_primal(x), rosen_grad_hand(x)[0])
    primal = measure(rosen_primal, x, repeat=repeat)
    s2 = measure(grad, x, repeat=repeat)
    hand = measure(rosen_grad_hand, x, repeat=repeat)
    # Diagnostic: the compiled gradient (`rosen_grad`) without s2sad's Python wrapper (internal; may vanish).
    raw_grad = _compiled_gradient(grad)
    raw = measure(raw_grad, x, repeat=repeat) if raw_grad is not None else None
    return dict(n=n, primal=primal, s2sad=s2, hand=hand, raw_vjp=raw,
                ratio_primal=s2.best / primal.best, ratio_hand=s2.best / hand.best)


def first_call_child(n: int) -> None:
    """Run in a fresh interpreter: time building and first calling s2sad.grad(rosen); print JSON."""
    x = rosen_input(n)
    t0 = time.perf_counter()
    grad = s2sad.grad(rosen)
    grad(x)
    t1 = time.perf_counter()
    grad(x)
    t2 = time.perf_counter()
    print(json.dumps({"first_call_s": t1 - t0, "second_call_s": t2 - t1}))


def bench_first_call(n: int) -> dict:
    """First-call time of s2sad.grad(rosen) in two fresh processes sharing one new cache dir.

    cold: S2SAD_CACHE_DIR and NUMBA_CACHE_DIR empty -> code generation + numba compilation;
    warm: the same dirs, now filled -> code generation + loading numba's on-disk cache.
    """
    out = {}
    with tempfile.TemporaryDirectory(prefix="s2sad-bench-") as tmp:
        env = dict(os.environ, S2SAD_CACHE_DIR=os.path.join(tmp, "s2sad"),
                   NUMBA_CACHE_DIR=os.path.join(tmp, "numba"))
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-call-child", str(n)],
                                  env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                sys.exit(f"\n*** first-call subprocess ({label}) failed:\n{proc.stdout}{proc.stderr}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["process_wall_s"] = wall
            out[label] = result
    return out


# ---------------------------------------------------------------------------------------------
# 2. Logistic regression
# ---------------------------------------------------------------------------------------------


def logreg_inputs(m: int = 1000, d: int = 100):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((m, d))
    W = 0.1 * rng.standard_normal(d)
    b = 0.1
    y = (rng.uniform(size=m) < 0.5).astype(np.float64)
    return W, b, X, y


def bench_logreg(repeat: int) -> dict:
    args = logreg_inputs()
    grad = s2sad.grad(loss, argnums=(0, 1))
    check_close("logistic regression", grad(*args), loss_grad_hand(*args))
    primal = measure(loss_primal, *args, repeat=repeat)
    s2 = measure(grad, *args, repeat=repeat)
    hand = measure(loss_grad_hand, *args, repeat=repeat)
    return dict(shape=args[2].shape, primal=primal, s2sad=s2, hand=hand,
                ratio_primal=s2.best / primal.best, ratio_hand=s2.best / hand.best)


# ---------------------------------------------------------------------------------------------
# 3. Per-call overhead
# ---------------------------------------------------------------------------------------------

OVERHEAD_TARGET_S = 2e-6


def per_call_loop(fn, args, calls: int, batches: int) -> Timing:
    """Median and best over `batches` of (time of `calls` back-to-back calls) / calls, in seconds."""
    fn(*args)
    per_call = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        per_call.append((time.perf_counter() - t0) / calls)
    return Timing(statistics.median(per_call), min(per_call))


def bench_overhead(calls: int, batches: int) -> dict:
    grad = s2sad.grad(tiny)
    check_close("tiny", grad(1.0, 2.0), tiny_grad_hand(1.0, 2.0))
    out = dict(calls=calls, batches=batches,
               s2sad=per_call_loop(grad, (1.0, 2.0), calls, batches),
               njit=per_call_loop(tiny_grad_hand, (1.0, 2.0), calls, batches))
    # Diagnostic: the compiled gradient without s2sad's Python wrapper (internal; may vanish).
    raw_grad = _compiled_gradient(grad)
    out["raw_vjp"] = per_call_loop(raw_grad, (1.0, 2.0), calls, batches) if raw_grad is not None else None
    return out


def _compiled_gradient(grad):
    """The generated `f_grad` as numba compiled it (what s2sad's wrapper calls), or None."""
    rev = getattr(grad, "__s2sad_transform__", None)
    try:
        return rev.compiled("wrapper")
    except AttributeError:
        return None


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def machine() -> str:
    """One line: CPU model, core count, Python, numpy and numba versions (for the other benchmarks)."""
    cpu = platform.processor()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), cpu)
    except OSError:
        pass
    return (f"{cpu or 'unknown'} ({platform.machine()}), os.cpu_count() = {os.cpu_count()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}")


def machine_description() -> list[tuple[str, str]]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    u = platform.uname()
    return [("CPU", f"{cpu or 'unknown'} ({u.machine})"),
            ("CPU count", f"{os.cpu_count()} (usable by this process: {usable})"),
            ("OS", f"{u.system} {u.release}"),
            ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
            ("numpy / numba", f"{np.__version__} / {numba.__version__}"),
            ("s2sad", s2sad.__version__)]


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def report(quick, rosen_rows, first, logreg, over) -> str:
    out = []
    out.append("s2sad core benchmarks" + ("  [--quick: small sizes, few repetitions]" if quick else ""))
    out.append(table(["machine", ""], [list(r) for r in machine_description()]))
    out.append("Times are per call: best of the repeated batches (median in parentheses); ratios use the best.")

    out.append("1. Extended Rosenbrock, explicit loop (target: s2sad grad / primal <= 3)")
    rows = [[f"{r['n']:,}", str(r["primal"]), str(r["s2sad"]), f"{r['ratio_primal']:.2f}",
             verdict(r["ratio_primal"], ROSEN_TARGET), str(r["hand"]), f"{r['ratio_hand']:.2f}",
             "n/a" if r["raw_vjp"] is None else fmt_time(r["raw_vjp"].best)]
            for r in rosen_rows]
    out.append(table(["n", "primal (numba.njit)", "s2sad grad", "grad/primal", "target",
                      "hand adjoint (njit)", "s2sad/hand", "s2sad f_grad, no wrapper"], rows))
    n = first["n"]
    rows = [[f"cold: fresh process, empty S2SAD_CACHE_DIR + NUMBA_CACHE_DIR",
             fmt_time(first["cold"]["first_call_s"]), fmt_time(first["cold"]["process_wall_s"])],
            [f"warm: fresh process, the disk cache filled by the cold run",
             fmt_time(first["warm"]["first_call_s"]), fmt_time(first["warm"]["process_wall_s"])],
            ["(second call in the cold process, for comparison)",
             fmt_time(first["cold"]["second_call_s"]), ""]]
    out.append(table([f"first call of s2sad.grad(rosen)(x), n={n:,}", "grad() + first call",
                      "whole subprocess"], rows))

    out.append(f"2. Logistic regression NLL, X {logreg['shape'][0]}x{logreg['shape'][1]}, "
               "s2sad.grad(loss, argnums=(0, 1))")
    out.append(table(["primal (numba.njit)", "s2sad grad", "grad/primal", "hand gradient (njit)", "s2sad/hand"],
                     [[str(logreg["primal"]), str(logreg["s2sad"]), f"{logreg['ratio_primal']:.2f}",
                       str(logreg["hand"]), f"{logreg['ratio_hand']:.2f}"]]))

    out.append(f"3. Per-call overhead, tiny(x, y) = x * y + np.sin(x), scalar args "
               f"(median of {over['batches']} batches x {over['calls']:,} calls; target <= 2 µs)")
    us = lambda t, attr: "n/a" if t is None else f"{getattr(t, attr) * 1e6:.2f} µs"  # noqa: E731
    rows = [["s2sad.grad(tiny)(1.0, 2.0)", us(over["s2sad"], "median"), us(over["s2sad"], "best"),
             verdict(over["s2sad"].median, OVERHEAD_TARGET_S)],
            ["numba.njit hand gradient (dispatch baseline)", us(over["njit"], "median"), us(over["njit"], "best"), ""],
            ["s2sad's compiled f_grad called directly (diagnostic)", us(over["raw_vjp"], "median"),
             us(over["raw_vjp"], "best"), ""]]
    out.append(table(["call", "per call (median)", "best batch", "target"], rows))
    return "\n\n".join(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke test)")
    parser.add_argument("--first-call-child", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.first_call_child is not None:
        first_call_child(args.first_call_child)
        return

    if args.quick:
        sizes, repeat, calls, batches = (10**3, 10**5), 5, 20_000, 3
    else:
        sizes, repeat, calls, batches = (10**4, 10**6), 50, 100_000, 9

    progress = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    progress("first-call subprocesses (cold, then warm) ...")
    first = bench_first_call(sizes[0])
    first["n"] = sizes[0]
    rosen_rows = []
    for n in sizes:
        progress(f"rosen n={n:,} ...")
        rosen_rows.append(bench_rosen(n, repeat))
    progress("logistic regression ...")
    logreg = bench_logreg(repeat)
    progress("per-call overhead ...")
    over = bench_overhead(calls, batches)
    print(report(args.quick, rosen_rows, first, logreg, over))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The first call of the seed examples, each in a fresh process with an empty cache (issue 35's targets).

    .venv/bin/python benchmarks/bench_first_call.py          # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/bench_first_call.py --runs 3 # the median of 3 fresh processes each

For each example, side by side on this machine:
- "first call": s2sad's default, a cold first call running uncompiled while a worker compiles
  (s2sad.background);
- "compiled in place": from the same start until `s2sad.wait_for_compiles()` returns, when calls run
  compiled;
- "in-process compile": the first call with `S2SAD_BACKGROUND_COMPILE=0`, compiling before it returns.
Times are from making the transformation to the end of the call; imports are excluded. Every result is
checked against a closed form or central finite differences before its time is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def tanh_example():
    import s2sad

    g = s2sad.grad(np.tanh)
    return lambda: g(0.5), lambda out: abs(out - (1.0 - np.tanh(0.5) ** 2)) < 1e-12


def predict(W, b, inputs):
    return 1.0 / (1.0 + np.exp(-(inputs @ W + b)))


def logistic_loss(W, b, inputs, targets):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probs))


def logistic_example():
    import s2sad

    inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = np.array([True, True, False, True])
    W, b = np.array([0.1, 0.2, 0.3]), 0.1
    g = s2sad.grad(logistic_loss, (0, 1))

    def check(out):
        eps = 1e-6
        fd = [(logistic_loss(W + eps * e, b, inputs, targets) - logistic_loss(W - eps * e, b, inputs, targets))
              / (2 * eps) for e in np.eye(3)]
        fd_b = (logistic_loss(W, b + eps, inputs, targets) - logistic_loss(W, b - eps, inputs, targets)) / (2 * eps)
        return np.allclose(out[0], fd, rtol=1e-6) and abs(out[1] - fd_b) < 1e-6

    return lambda: g(W, b, inputs, targets), check


def logsumexp(x):
    return np.log(np.sum(np.exp(x)))


def hessian_example():
    import s2sad

    x = np.array([1.0, 2.0, 3.0])
    h = s2sad.hessian(logsumexp)
    p = np.exp(x) / np.sum(np.exp(x))
    return lambda: h(x), lambda out: np.allclose(out, np.diag(p) - np.outer(p, p), atol=1e-12)


def mlp(params, x):
    for p in params:
        x = np.tanh(p['W'] @ x + p['b'])
    return np.sum(x ** 2)


def mlp_example():
    import s2sad

    rng = np.random.default_rng(0)
    W1, b1, W2, b2 = rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=(2, 4)), rng.normal(size=2)
    x = rng.normal(size=3)
    params = [{'W': W1, 'b': b1}, {'W': W2, 'b': b2}]
    g = s2sad.grad(mlp)

    def check(out):
        eps = 1e-6
        for layer in range(2):
            for key in ("W", "b"):
                leaf = params[layer][key]
                for i in np.ndindex(leaf.shape):
                    saved = leaf[i]
                    leaf[i] = saved + eps
                    up = mlp(params, x)
                    leaf[i] = saved - eps
                    down = mlp(params, x)
                    leaf[i] = saved
                    if abs(out[layer][key][i] - (up - down) / (2 * eps)) > 1e-6:
                        return False
        return True

    return lambda: g(params, x), check


EXAMPLES = {"grad(np.tanh)": tanh_example, "logistic regression 4 x 3": logistic_example,
            "hessian of logsumexp": hessian_example, "list-of-dicts MLP": mlp_example}


def child(name: str) -> None:
    """In a fresh interpreter: the example's first call, and when its compiled code is in place; JSON out."""
    import s2sad

    t0 = time.perf_counter()
    call, check = EXAMPLES[name]()
    out = call()
    first = time.perf_counter() - t0
    s2sad.wait_for_compiles()
    compiled = time.perf_counter() - t0
    if not (check(out) and check(call())):
        raise SystemExit(f"{name}: wrong result {out!r}")
    print(json.dumps(dict(first=first, compiled=compiled)))


def run_child(name: str, background: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="s2sad-first-") as tmp:
        env = dict(os.environ, S2SAD_CACHE_DIR=os.path.join(tmp, "s2sad"), NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                   S2SAD_BACKGROUND_COMPILE="1" if background else "0")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name], env=env,
                              capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"*** {name} failed:\n{proc.stdout}{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts.child)
        return 0
    from bench_core import machine

    print(f"{machine()}; the median of {opts.runs} fresh process(es) each")
    print("| seed example | first call | compiled in place | in-process compile (S2SAD_BACKGROUND_COMPILE=0) |")
    print("|---|---|---|---|")
    for name in EXAMPLES:
        runs = [(run_child(name, True), run_child(name, False)) for _ in range(opts.runs)]
        first = statistics.median(bg["first"] for bg, _ in runs)
        compiled = statistics.median(bg["compiled"] for bg, _ in runs)
        inline = statistics.median(fg["first"] for _, fg in runs)
        print(f"| {name} | {first:.3f} s | {compiled:.2f} s | {inline:.2f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())

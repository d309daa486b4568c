"""What numba compiles for one gradient: a census of typical small gradients, each in a fresh process.

    .venv/bin/python benchmarks/compile_census.py [NAME ...] [--opt 0|3] [--baseline DIR] [--warm-runtime]
    .venv/bin/python benchmarks/compile_census.py --functions NAME [--opt 0|3]

Per function: how many functions numba compiles for the first call (the generated ones and every
runtime helper and NumPy implementation they reach), how many LLVM instructions the gradient's own
module holds after numba links its callees into it (numba emits machine code for all of them again
for each caller), and the CPU seconds of the first call. Each run starts with empty caches and compiles
in-process. `--warm-runtime` first runs the gradient once, then deletes every cached file except the
runtime's own helpers and measures a second fresh process: a new gradient on a machine where s2sad has
compiled its runtime before, as most first calls are. `--baseline DIR` runs another checkout's s2sad
beside this one. Every gradient is checked
against central differences before its numbers count. `--functions NAME` lists the functions linked into
that gradient's module, largest first.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def logsumexp_rows(a):
    m = np.max(a, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(a - m), axis=1)) + m[:, 0])


def softmax_xent(z, y):
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return -np.mean(np.sum(y * np.log(p), axis=1))


def standardized(x):
    return np.sum(((x - x.mean(axis=0)) / x.std(axis=0)) ** 2)


def dense_tanh(w, b, x):
    return np.sum(np.tanh(x @ w + b) ** 2)


def row_variance(x):
    return np.sum(np.var(x, axis=1))


def elementwise(a):
    return np.sum(np.sinh(a) * a)


def scalar_loop(v):
    s = 0.0
    for i in range(v.shape[0]):
        s = s + math.sin(v[i]) * v[i]
    return s


def _cases() -> dict:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 4))
    return {
        "logsumexp_rows": (logsumexp_rows, (a,), 0),
        "softmax_xent": (softmax_xent, (a, np.eye(4)[[0, 1, 2, 3, 0]]), 0),
        "standardized": (standardized, (a,), 0),
        "dense_tanh": (dense_tanh, (rng.normal(size=(4, 3)), rng.normal(size=3), a), (0, 1)),
        "row_variance": (row_variance, (a,), 0),
        "elementwise": (elementwise, (a,), 0),
        "scalar_loop": (scalar_loop, (np.linspace(0.1, 1.0, 6),), 0),
    }


def _max_fd_error(f, args, argnums, grads) -> float:
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    grads = grads if isinstance(argnums, tuple) else (grads,)
    worst = 0.0
    for k, g in zip(nums, grads):
        for index in np.ndindex(np.shape(args[k])):
            plus, minus = np.array(args[k], float), np.array(args[k], float)
            plus[index] += 1e-6
            minus[index] -= 1e-6
            at = lambda v: f(*[v if j == k else a for j, a in enumerate(args)])  # noqa: E731
            fd = (at(plus) - at(minus)) / 2e-6
            worst = max(worst, abs(fd - np.asarray(g)[index]) / max(1.0, abs(fd)))
    return worst


def child(name: str) -> None:
    """One census line (JSON) for `name`, in this fresh process."""
    from numba.core import codegen, event

    import s2sad

    linked, functions = {}, {}
    finalize = codegen.JITCodeLibrary._finalize_specific

    def counting(library):
        module = library._final_module
        sizes = {fn.name: sum(len(list(b.instructions)) for b in fn.blocks) for fn in module.functions
                 if not fn.is_declaration}
        linked[library.name], functions[library.name] = sum(sizes.values()), sizes
        finalize(library)

    codegen.JITCodeLibrary._finalize_specific = counting
    compiles = [0]

    class Count(event.Listener):
        def on_start(self, ev):
            compiles[0] += 1

        def on_end(self, ev):
            pass

    f, args, argnums = _cases()[name]
    g = s2sad.grad(f, argnums=argnums)
    start = time.process_time()
    with event.install_listener("numba:compile", Count()):
        grads = g(*args)
    seconds = time.process_time() - start
    error = _max_fd_error(f, args, argnums, grads)
    if error > 1e-5:
        raise SystemExit(f"GRADIENT MISMATCH: {name} differs from central differences by {error:.1e}")
    own = max((lib for lib in linked if lib.endswith("_grad")), key=linked.get)
    print(json.dumps({"compiles": compiles[0], "linked": linked[own], "cpu_s": round(seconds, 2),
                      "functions": sorted(functions[own].items(), key=lambda kv: -kv[1])}))


def run(name: str, checkout: Path, opt: str, warm_runtime: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, S2SAD_CACHE_DIR=f"{tmp}/s2sad", NUMBA_CACHE_DIR=f"{tmp}/numba",
                   S2SAD_BACKGROUND_COMPILE="0", NUMBA_OPT=opt, PYTHONPATH=str(checkout))
        for _ in range(2 if warm_runtime else 1):
            _forget_all_but_the_runtime(Path(tmp))
            done = subprocess.run([sys.executable, str(HERE / "compile_census.py"), "--child", name], env=env,
                                  capture_output=True, text=True, cwd=checkout)
            if done.returncode != 0:
                raise SystemExit(f"*** {name} ({checkout}) failed:\n{done.stdout}{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def _forget_all_but_the_runtime(folder: Path) -> None:
    """Delete the cached generated modules and their compiled code; keep the runtime's (s2sad_gen_runtime_*)."""
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.startswith("s2sad_gen_runtime_"):
            path.unlink()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="cases to run (default: all)")
    parser.add_argument("--opt", default="3", choices=["0", "1", "2", "3"], help="NUMBA_OPT (the tests use 0)")
    parser.add_argument("--baseline", type=Path, help="another checkout, run beside this one")
    parser.add_argument("--functions", metavar="NAME", help="list what is linked into this gradient's module")
    parser.add_argument("--warm-runtime", action="store_true",
                        help="measure a second process, after the first compiled the runtime's helpers")
    options = parser.parse_args()
    if options.functions:
        for symbol, size in run(options.functions, HERE.parent, options.opt, options.warm_runtime)["functions"]:
            print(f"{size:7,d}  {symbol}")
        return
    checkouts = [("s2sad", HERE.parent)] + ([("baseline", options.baseline.resolve())] if options.baseline else [])
    header = " | ".join(f"{label}: compiles, linked instructions, CPU s" for label, _ in checkouts)
    runtime = ", the runtime compiled by an earlier process" if options.warm_runtime else ", empty caches"
    print(f"NUMBA_OPT={options.opt}, {os.cpu_count()} cores{runtime}\n\n| function | {header} |\n|---{'|---' * len(checkouts)}|")
    for name in options.names or _cases():
        cells = []
        for _, checkout in checkouts:
            found = run(name, checkout, options.opt, options.warm_runtime)
            cells.append(f"{found['compiles']}, {found['linked']:,}, {found['cpu_s']:.2f}")
        print(f"| {name} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()

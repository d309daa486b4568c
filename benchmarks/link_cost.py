"""What a runtime helper costs each generated function that calls it (issue 35), three ways side by side.

    .venv/bin/python benchmarks/link_cost.py            # about a minute on 2 cores
    .venv/bin/python benchmarks/link_cost.py --opt 0    # as the tests compile

numba links a copy of every jitted helper a function calls into that function's module and emits its
machine code again there, so a helper's size is paid by every caller, not once. The script compiles a
run of small callers, each new (as each generated gradient is), in fresh processes, and times each
caller's compile and first call:

- "plain": `g * k`, no helper (the floor);
- "unbroadcast": `unbroadcast(g * k, like)` of two 2-d arrays, as generated adjoints call it: numba
  links the general sum back to `like`'s shape (`runtime.core._sum_to` and its loops) into each caller,
  though equal shapes never run it;
- "C symbol": a sum back (here the bias case alone) compiled once as a C function (`numba.cfunc`), registered under a symbol name
  with llvmlite's `add_symbol` and declared in each caller (`types.ExternalFunction`): a caller compiles
  the call alone. Its result is checked against NumPy's sum.

Each way runs in two fresh processes sharing one new NUMBA_CACHE_DIR: "cold" compiles everything, "warm"
finds what numba cached on disk: the C function and its wrapper (the runtime's own helpers are cached
by s2sad's backend, which the callers here do not go through).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLERS = 4

# The C-symbol helper, written into a module of its own in the run's folder (numba caches functions
# defined in real files only).
C_SYMBOL_MODULE = '''
import llvmlite.binding as llvm
import numpy as np
from numba import carray, cfunc, njit, types

SIGNATURE = types.void(types.CPointer(types.float64), types.intp, types.CPointer(types.float64), types.intp,
                       types.CPointer(types.int64), types.intp)


@cfunc(SIGNATURE, cache=True)
def sum_rows_c(big_ptr, n, small_ptr, m, shape_ptr, ndim):
    """small (m entries) += big (n entries) summed over its leading axes: the bias case of a sum back."""
    big, small = carray(big_ptr, n), carray(small_ptr, m)
    for a in range(n // m):
        for j in range(m):
            small[j] += big[a * m + j]


llvm.add_symbol("bench_sum_rows_c", sum_rows_c.address)
sum_rows = types.ExternalFunction("bench_sum_rows_c", SIGNATURE)


@njit(cache=True)
def sum_to(g, like):
    out = np.zeros(like.shape, g.dtype)
    big = np.ascontiguousarray(g)
    shape = np.empty(g.ndim, np.int64)
    sum_rows(big.ctypes, big.size, out.ctypes, out.size, shape.ctypes, g.ndim)
    return out
'''

CHILD = '''
import json, sys, time
import numpy as np
import numba
sys.path.insert(0, sys.argv[2])
way = sys.argv[1]
if way == "unbroadcast":
    from s2sad.runtime import unbroadcast
elif way == "C symbol":
    import c_symbol
times = []
g, like = np.arange(12.0).reshape(3, 4), np.ones((3, 4))
for k in range(int(sys.argv[3])):
    if way == "plain":
        def caller(g, like, k=float(k)):
            return g * k
    elif way == "unbroadcast":
        def caller(g, like, k=float(k)):
            return unbroadcast(g * k, like)
    else:
        def caller(g, like, k=float(k)):
            h = g * k
            return h if h.shape == like.shape else c_symbol.sum_to(h, like)
    started = time.perf_counter()
    out = numba.njit(caller)(g, like)
    times.append(time.perf_counter() - started)
    assert np.allclose(out, g * k), (way, out)
if way == "C symbol":  # the sum itself, which equal shapes never run
    assert np.allclose(c_symbol.sum_to(g, like[:1]), g.sum(axis=0, keepdims=True))
print(json.dumps(times))
'''


def run(way: str, opt: str, folder: Path) -> list[float]:
    env = dict(os.environ, NUMBA_OPT=opt, NUMBA_CACHE_DIR=str(folder / "numba"), PYTHONPATH=str(ROOT))
    env.pop("S2SAD_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", CHILD, way, str(folder), str(CALLERS)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--opt", default="3", help="NUMBA_OPT for the children (default 3, numba's own)")
    opt = parser.parse_args().opt
    print(f"NUMBA_OPT={opt}, {os.cpu_count()} cores; seconds to compile and call each new caller\n")
    print("| way | run | first caller | later callers (mean) |")
    print("|---|---|---|---|")
    for way in ("plain", "unbroadcast", "C symbol"):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "c_symbol.py").write_text(C_SYMBOL_MODULE)
            for label in ("cold", "warm"):
                times = run(way, opt, folder)
                later = sum(times[1:]) / len(times[1:])
                print(f"| {way} | {label} | {times[0]:.3f} | {later:.3f} |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Gradients that `s2sad build` wrote into a package, against the same gradients through `s2sad.grad`.

    .venv/bin/python benchmarks/bench_built.py            # full sizes (GMM d=2, logistic regression, Rosenbrock, Kepler)
    .venv/bin/python benchmarks/bench_built.py --quick    # logistic regression and Rosenbrock only (no GMM compile)

A built module ships the readable source; at import it hands numba the same rewritten text that
`s2sad.grad` compiles (`_s2sad_runtime/passes`), so the two should run at the same speed. Each
workload of benchmarks/workloads.py is built into a temporary package, its gradient checked against
`s2sad.grad`'s (rtol 1e-10; exit status 1 and `BUILT MISMATCH` otherwise), and both are timed
interleaved in this process with `bench_core.measure`. A fresh S2SAD_CACHE_DIR and a fresh output
folder make every first call a cold compile (not reported: `run.py` measures first calls).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

os.environ["S2SAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="s2sad-bench-built-")

import numpy as np  # noqa: E402

import s2sad  # noqa: E402
import workloads as W  # noqa: E402
from bench_core import fmt_time, machine, measure  # noqa: E402
from s2sad import build  # noqa: E402

WORKLOADS = ("gmm_d2_K5_n1000", "logreg_n10000", "rosen_n10000", "kepler_n10000")
QUICK = ("logreg_n10000", "rosen_n10000")


def argnums_text(w: W.Workload) -> str:
    return f"grad(argnums={w.argnums[0]})" if len(w.argnums) == 1 else f"grad(argnums={tuple(w.argnums)})"


def built_gradients(chosen: list[W.Workload]) -> dict[str, object]:
    """Each workload's gradient as `s2sad build` writes it, imported from a temporary package."""
    out = Path(tempfile.mkdtemp(prefix="s2sad-built-")) / "built_grads"
    targets = [t for w in chosen for t in build.target_from(f"workloads:{w.fun.__name__}", [argnums_text(w)])]
    build.build(build.Config(out, targets))
    sys.path.insert(0, str(out.parent))
    found = {}
    for w, target in zip(chosen, targets):
        stem = f"{target.name}_{target.transforms[0].tag()}"  # the module and entry point build names
        found[w.name] = getattr(importlib.import_module(f"built_grads.{stem}"), stem)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="logistic regression and Rosenbrock only")
    parser.add_argument("--repeat", type=int, default=15, help="timed batches per gradient and round")
    args = parser.parse_args()
    names = QUICK if args.quick else WORKLOADS
    chosen = [w for w in W.workloads() if w.name in names]
    built = built_gradients(chosen)
    print(f"Machine: {machine()}\n")
    print("| workload | s2sad.grad | built module | built/grad |")
    print("|---|---|---|---|")
    for w in chosen:
        inputs = w.make_inputs()
        api = s2sad.grad(w.fun, argnums=w.argnums if len(w.argnums) > 1 else w.argnums[0])
        want, got = api(*inputs), built[w.name](*inputs)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        if not all(np.allclose(g, x, rtol=1e-10, atol=1e-12) for g, x in zip(got, want)):
            print(f"BUILT MISMATCH: {w.name}: the built gradient differs from s2sad.grad's", file=sys.stderr)
            return 1
        times = {"grad": [], "built": []}
        for _ in range(3):  # interleaved rounds: drift on the machine reaches both alike
            times["grad"].append(measure(api, *inputs, repeat=args.repeat).median)
            times["built"].append(measure(built[w.name], *inputs, repeat=args.repeat).median)
        grad_s, built_s = min(times["grad"]), min(times["built"])
        print(f"| {w.name} | {fmt_time(grad_s)} | {fmt_time(built_s)} | **{built_s / grad_s:.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

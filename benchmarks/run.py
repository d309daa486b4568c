#!/usr/bin/env python3
"""The s2sad benchmark suite: every workload of workloads.py, against a hand-written numba adjoint, JAX and autograd.

    .venv/bin/python benchmarks/run.py                 # full sizes; rewrites the README table and results.png
    .venv/bin/python benchmarks/run.py --quick         # small sizes, fewer repetitions
    .venv/bin/python benchmarks/run.py --only rosen    # workloads whose name contains "rosen" (README and
                                                       # results.json untouched; numbers in results-only.json)

For each workload: every gradient (s2sad, hand adjoint, JAX, autograd) is checked against the hand
adjoint, and the hand adjoint against central finite differences of the primal, before anything is
timed; a mismatch exits with status 1. Then all tools are timed in one process, interleaved (one
batch of each tool per round), and the median per call over the rounds is reported. First calls
and peak memory come from two fresh subprocesses sharing a new cache directory (cold, then warm).
"""

from __future__ import annotations

import os

# One thread per tool: multi-threaded BLAS/XLA on a shared 2-core machine measures contention, not code
# (a 10^4 x 100 matrix-vector product took 12 ms with OpenBLAS threads and 0.4 ms without).
for _var, _value in (("OPENBLAS_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1"),
                     ("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")):
    os.environ.setdefault(_var, _value)

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import s2sad  # noqa: E402
import other_tools  # noqa: E402
import workloads as W  # noqa: E402
from bench_core import fmt_time, machine, tiny, tiny_grad_hand  # noqa: E402

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
TARGETS = dict(s2sad_over_hand=1.5, loop_grad_over_primal=3.0, overhead_s=2e-6, warm_first_call_s=0.5,
               rosen_tape_bytes_per_iter=16.0, cold_over_hand_compile=1.5)
TOOLS = ("primal", "s2sad", "hand", "jax", "autograd")


class Mismatch(SystemExit):
    pass


# ---------------------------------------------------------------------------------------------
# What gets timed
# ---------------------------------------------------------------------------------------------


def s2sad_gradient(w: W.Workload, backend: str = "numba") -> Callable:
    return s2sad.grad(w.fun, argnums=w.argnums if len(w.argnums) > 1 else w.argnums[0], backend=backend)


def primal(w: W.Workload, grad: Callable, args: tuple) -> tuple[Callable, tuple, str]:
    """numba.njit(fun) when numba takes it as written, else s2sad's generated primal (compiled by numba)."""
    jitted = numba.njit(w.fun)
    try:
        jitted(*args)
        return jitted, args, "numba.njit"
    except Exception:  # noqa: BLE001 - numba refuses einsum, dict arguments...
        specialized, leaves = grad.__s2sad_transform__.specialize(args)
        return specialized.primal_fn, leaves, "s2sad primal"


def leaves_of(result) -> list[np.ndarray]:
    result = result if isinstance(result, tuple) else (result,)
    return [np.asarray(v, dtype=float) for v in s2sad.tree.tree_leaves(result)]


def check_close(what: str, got: list, want: list, rtol: float) -> None:
    if len(got) != len(want):
        raise Mismatch(f"*** GRADIENT MISMATCH in {what}: {len(got)} gradient arrays, expected {len(want)} ***")
    for k, (a, b) in enumerate(zip(got, want)):
        scale = max(np.max(np.abs(b)), 1e-300)
        if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=rtol * scale):
            err = np.max(np.abs(a - b)) if a.shape == b.shape else f"shape {a.shape} vs {b.shape}"
            raise Mismatch(f"*** GRADIENT MISMATCH in {what}, array {k}: max abs diff {err} "
                           f"(scale {scale:.3g}, rtol {rtol}). Not timing a wrong gradient. ***")


def check_reference_by_finite_differences(w: W.Workload, f: Callable, args: tuple, hand: list) -> float:
    """Directional derivative of the primal along a random direction vs the hand adjoint; returns rel. error."""
    rng = np.random.default_rng(7)
    flat, defs = zip(*(s2sad.tree.tree_flatten(args[i]) for i in w.argnums))
    directions = [[rng.normal(size=np.shape(leaf)) for leaf in leaves] for leaves in flat]

    def shifted(h):
        moved = list(args)
        for i, leaves, dirs, d in zip(w.argnums, flat, directions, defs):
            new = [leaf + h * v if np.ndim(leaf) else float(leaf + h * v) for leaf, v in zip(leaves, dirs)]
            moved[i] = s2sad.tree.tree_unflatten(d, new)
        return f(*moved)

    h = 1e-6
    fd = (shifted(h) - shifted(-h)) / (2 * h)
    exact = sum(float(np.sum(g * v)) for g, v in zip(hand, (v for dirs in directions for v in dirs)))
    scale = sum(float(np.sum(np.abs(g * v))) for g, v in zip(hand, (v for dirs in directions for v in dirs)))
    err = abs(fd - exact) / max(abs(exact), 1e-3 * scale)
    if err > 1e-5:
        raise Mismatch(f"*** REFERENCE MISMATCH in {w.name}: the hand adjoint gives {exact!r} along a random "
                       f"direction, central differences of the primal {fd!r} (relative error {err:.2g}) ***")
    return err


# ---------------------------------------------------------------------------------------------
# Timing: interleaved batches, median per call
# ---------------------------------------------------------------------------------------------


@dataclass
class Timing:
    median: float
    best: float
    calls: int  # calls per batch
    rounds: int
    samples: tuple[float, ...] = ()  # seconds per call, one per round, in round order

    def __str__(self):
        return fmt_time(self.median)


def calibrate(fn: Callable, args: tuple, min_batch_s: float) -> tuple[int, float]:
    """Calls per batch so that one batch lasts min_batch_s, and the time of one call."""
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        elapsed = time.perf_counter() - t0
        if elapsed >= min_batch_s:
            return number, elapsed / number
        number *= 2


def measure_interleaved(calls: dict[str, tuple[Callable, tuple]], rounds: int, min_batch_s: float,
                        slow_s: float = 0.5, slow_rounds: int = 5) -> dict[str, Timing]:
    """Round r times one batch of every tool, in an order rotated each round; median over rounds.

    A tool whose single call takes longer than slow_s runs one call per batch, in the first slow_rounds rounds.
    The garbage collector is off while a batch runs (as `timeit` does), and collects between batches: a
    collection costs in proportion to every object the process holds, JAX's and autograd's included, and
    it charged that to whichever tool happened to trigger it (RK4: s2sad 65 -> 52 us, autograd 4.0 -> 1.5 s).

    Each batch starts with one untimed call. A collection walks every object JAX holds and evicts the
    caches, and so does the batch of the tool before: the first call after either reads its arrays
    from memory again (logistic regression: 1.4-1.7 ms instead of 0.3 ms, for every tool). Untimed,
    that call would have counted once per batch, so a tool calibrated to 4 calls per batch paid it
    twice as often, per call, as one calibrated to 8. Steady state is what the targets ask for.
    """
    s2sad.wait_for_compiles()  # steady state: compiled code, not a cold call's Python (s2sad.background)
    plan = {}
    for name, (fn, args) in calls.items():
        fn(*args)  # warm-up
        number, one = calibrate(fn, args, min_batch_s)
        plan[name] = (fn, args, number, slow_rounds if one > slow_s else rounds)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, args, number, wanted = plan[name]
            if len(samples[name]) >= wanted:
                continue
            gc.collect()
            gc.disable()
            try:
                if wanted == rounds:  # a slow call (over slow_s) is long enough to warm up itself
                    fn(*args)
                t0 = time.perf_counter()
                for _ in range(number):
                    fn(*args)
                samples[name].append((time.perf_counter() - t0) / number)
            finally:
                gc.enable()
    return {name: Timing(statistics.median(s), min(s), plan[name][2], len(s), tuple(s))
            for name, s in samples.items()}


# ---------------------------------------------------------------------------------------------
# One workload, in this process
# ---------------------------------------------------------------------------------------------


def bench_workload(w: W.Workload, rounds: int, min_batch_s: float, progress: Callable) -> dict:
    args = w.make_inputs()
    grad = s2sad_gradient(w)
    hand = leaves_of(W.hand_grads(w, args))
    check_close(f"{w.name}: s2sad vs hand adjoint", leaves_of(grad(*args)), hand, w.rtol)
    prim, prim_args, prim_kind = primal(w, grad, args)
    fd_err = check_reference_by_finite_differences(w, lambda *a: float(prim(*primal_args(w, grad, a, prim_kind))),
                                                    args, hand)
    calls = {"primal": (prim, prim_args), "s2sad": (grad, args), "hand": (w.hand_grad, args)}
    status = {}
    for name, make in (("jax", other_tools.jax_gradient), ("autograd", other_tools.autograd_gradient)):
        tool = make(w, args)
        if isinstance(tool, other_tools.Missing):
            status[name] = tool.reason
            continue
        check_close(f"{w.name}: {name} vs hand adjoint", tool.leaves(tool.fn(*tool.args)), hand, w.rtol)
        calls[name] = (tool.fn, tool.args)
    progress(f"  {w.name}: gradients agree (hand adjoint vs central differences: rel. error {fd_err:.1e}); timing")
    timings = measure_interleaved(calls, rounds, min_batch_s)
    return dict(name=w.name, label=w.label, loop=w.loop, trips=w.trips, primal_kind=prim_kind,
                fd_rel_error=fd_err, status=status,
                times={k: dict(median=t.median, best=t.best, calls=t.calls, rounds=t.rounds, samples=list(t.samples))
                       for k, t in timings.items()})


def primal_args(w: W.Workload, grad: Callable, args: tuple, kind: str) -> tuple:
    return args if kind == "numba.njit" else grad.__s2sad_transform__.specialize(args)[1]


# ---------------------------------------------------------------------------------------------
# First call (cold / warm) and peak memory, in fresh processes
# ---------------------------------------------------------------------------------------------


def rss_bytes(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        line = next(ln for ln in f if ln.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def peak_increase(fn: Callable, args: tuple) -> int | None:
    """How far the resident set rose above its level before one call of fn (Linux: resets VmHWM first)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return None
    before = rss_bytes("VmRSS")
    fn(*args)
    return rss_bytes("VmHWM") - before


def child(name: str, quick: bool, numba_first: bool) -> None:
    """In a fresh interpreter: first call of the s2sad gradient, then the peak memory of one call; JSON out.

    numba_first: call the (disk-cached) hand adjoint first, so that numba's one-time start-up in a
    process (its registries, the SciPy import that finds BLAS) is paid before s2sad is timed.
    """
    w = next(w for w in W.workloads(quick) if w.name == name)
    args = w.make_inputs()
    hand_first_call_s = None
    if numba_first:
        t0 = time.perf_counter()
        w.hand_grad(*args)
        hand_first_call_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    grad = s2sad_gradient(w)
    grad(*args)
    first = time.perf_counter() - t0
    s2sad.wait_for_compiles()  # a cold first call runs uncompiled while a worker compiles (s2sad.background)
    compiled = time.perf_counter() - t0
    t1 = time.perf_counter()
    grad(*args)
    t2 = time.perf_counter()
    w.hand_grad(*args)
    w.hand_grad(*args)
    out = dict(first_call_s=first, compiled_s=compiled, second_call_s=t2 - t1, hand_first_call_s=hand_first_call_s,
               peak_s2sad=peak_increase(grad, args), peak_hand=peak_increase(w.hand_grad, args))
    print(json.dumps(out))


def child_first_of(name: str, quick: bool, tool: str) -> None:
    """In a fresh interpreter with empty caches: the first call of the hand adjoint (numba compiles
    it) or of jax.jit(jax.grad) (XLA compiles it), imports excluded; JSON out."""
    w = next(w for w in W.workloads(quick) if w.name == name)
    args = w.make_inputs()
    if tool == "jax" and other_tools._jax() is None:
        print(json.dumps(dict(first_call_s=None)))
        return
    t0 = time.perf_counter()
    made = w.hand_grad(*args) if tool == "hand" else other_tools.jax_gradient(w, args)  # jax_gradient calls it once
    first = time.perf_counter() - t0
    print(json.dumps(dict(first_call_s=None if isinstance(made, other_tools.Missing) else first)))


WARM_PROCESSES = 3  # the warm first calls are single samples of a noisy start-up: the median of three


def first_calls(name: str, quick: bool) -> dict:
    out = {}
    with tempfile.TemporaryDirectory(prefix="s2sad-bench-") as tmp:
        # A fixed mmap threshold: every large array is its own mapping, returned on free, so the peak of
        # the resident set during a call measures what that call allocates. s2sad's own malloc tuning
        # (runtime/memory.py keeps freed memory for reuse) would hide that, so it is off here.
        env = dict(os.environ, S2SAD_CACHE_DIR=os.path.join(tmp, "s2sad"), NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                   MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536", S2SAD_MALLOC_TUNING="0")
        for label in ("cold", "warm", "warm_numba_first"):
            runs = [_first_call_process(name, quick, label, env) for _ in range(1 if label == "cold" else WARM_PROCESSES)]
            runs.sort(key=lambda r: r["first_call_s"])
            out[label] = dict(runs[len(runs) // 2], first_call_all_s=[r["first_call_s"] for r in runs])
    for tool in ("hand", "jax"):
        with tempfile.TemporaryDirectory(prefix="s2sad-bench-") as tmp:
            env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
            out[f"cold_{tool}"] = _first_call_process(name, quick, f"cold_{tool}", env)
    return out


def cold_table(chosen: list, quick: bool, baseline: str | None) -> str:
    """Each workload's cold first call (fresh process, empty caches) beside the hand adjoint's cold
    compile, and the same first call of a `baseline` checkout's s2sad, run one after another."""
    columns = [("s2sad", None)] + ([(f"baseline ({baseline})", baseline)] if baseline else [])
    lines = ["| workload | " + " | ".join(c for c, _ in columns) + " | hand adjoint's compile | s2sad / hand |",
             "|---" * (len(columns) + 3) + "|"]
    for w in chosen:
        cells = []
        for _, checkout in columns:
            with tempfile.TemporaryDirectory(prefix="s2sad-bench-") as tmp:
                env = dict(os.environ, S2SAD_CACHE_DIR=os.path.join(tmp, "s2sad"), NUMBA_CACHE_DIR=os.path.join(tmp, "numba"))
                if checkout:
                    env["PYTHONPATH"] = str(Path(checkout).resolve())
                cells.append(_first_call_process(w.name, quick, "cold", env)["first_call_s"])
        with tempfile.TemporaryDirectory(prefix="s2sad-bench-") as tmp:
            hand = _first_call_process(w.name, quick, "cold_hand", dict(os.environ, NUMBA_CACHE_DIR=tmp))["first_call_s"]
        lines.append(f"| {w.name} | " + " | ".join(f"{c:.2f} s" for c in cells) + f" | {hand:.2f} s | {cells[0] / hand:.2f} |")
    return "\n".join(lines)


def _first_call_process(name: str, quick: bool, label: str, env: dict) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name] + (["--quick"] if quick else []) \
        + (["--numba-first"] if label == "warm_numba_first" else []) \
        + (["--first-of", label.removeprefix("cold_")] if label in ("cold_hand", "cold_jax") else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"*** first-call subprocess ({label}, {name}) failed:\n{proc.stdout}{proc.stderr}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), process_s=wall)


# ---------------------------------------------------------------------------------------------
# Per-call overhead of a compiled scalar gradient
# ---------------------------------------------------------------------------------------------


def bench_overhead(calls: int, rounds: int) -> dict:
    grad = s2sad.grad(tiny)
    check_close("tiny", leaves_of(grad(1.0, 2.0)), leaves_of(tiny_grad_hand(1.0, 2.0)), 1e-12)
    timings = measure_interleaved({"s2sad": (grad, (1.0, 2.0)), "njit": (tiny_grad_hand, (1.0, 2.0))}, rounds,
                                  min_batch_s=0.002)
    return {k: t.median for k, t in timings.items()}


# ---------------------------------------------------------------------------------------------
# Report: markdown tables, targets, README section, plot
# ---------------------------------------------------------------------------------------------


def ratio(times: dict, a: str, b: str) -> float | None:
    return times[a]["median"] / times[b]["median"] if a in times and b in times else None


def ratio_spread(times: dict, a: str, b: str) -> tuple[float, float] | None:
    """The middle half (quartiles) of a/b taken round by round: the rounds are interleaved, so one
    round's two batches ran under the same load, and the spread shows how far the host moved a ratio."""
    pairs = list(zip(times.get(a, {}).get("samples", ()), times.get(b, {}).get("samples", ())))
    if len(pairs) < 8:
        return None
    q1, _, q3 = statistics.quantiles([x / y for x, y in pairs], n=4)
    return q1, q3


def fmt_spread(times: dict, a: str, b: str) -> str:
    s = ratio_spread(times, a, b)
    return f" (rounds' middle half {s[0]:.2f}-{s[1]:.2f})" if s else ""


def fmt_ratio(x: float | None, bold: bool = False) -> str:
    if x is None:
        return ""
    return f"**{x:.2f}**" if bold else f"{x:.2f}"


def fmt_tool(r: dict, tool: str) -> str:
    if tool in r["times"]:
        t = r["times"][tool]
        return fmt_time(t["median"]) + (f" ({t['rounds']} calls)" if t["rounds"] <= 5 and t["calls"] == 1 else "")
    return r["status"].get(tool, "")


RESOLVED_BYTES = 64 * 2**10  # smaller arrays come from the malloc heap, not their own mapping: not seen


def fmt_bytes(b: int | None) -> str:
    if b is None:
        return "n/a"
    if b < RESOLVED_BYTES:
        return "< 64 KiB"
    return f"{b / 2**20:.1f} MiB" if b >= 2**20 else f"{b / 2**10:.0f} KiB"


def markdown(results: dict) -> str:
    rows = results["workloads"]
    lines = [f"Machine: {results['machine']}; load average {results['load_before']:.1f} before the run, "
             f"{results['load_after']:.1f} after. {results['mode']}. Times are medians per call over interleaved "
             "rounds (all tools in one process, pinned to one core); ratios divide medians (the targets table adds the middle "
             "half of the ratios taken round by round, the spread the host's noise gives them). `primal` is `numba.njit(f)`, or s2sad's "
             "generated primal compiled by numba (marked *) where numba refuses `f` as written.", "",
             "| workload | primal | s2sad grad | grad/primal | hand adjoint (njit) | **s2sad/hand** | "
             "jax.jit(jax.grad) | **s2sad/jax** | autograd |", "|" + "---|" * 9]
    for r in rows:
        t = r["times"]
        star = "*" if r["primal_kind"] != "numba.njit" else ""
        lines.append(f"| {r['label']} | {fmt_tool(r, 'primal')}{star} | {fmt_tool(r, 's2sad')} | "
                     f"{fmt_ratio(ratio(t, 's2sad', 'primal'))} | {fmt_tool(r, 'hand')} | "
                     f"{fmt_ratio(ratio(t, 's2sad', 'hand'), True)} | {fmt_tool(r, 'jax')} | "
                     f"{fmt_ratio(ratio(t, 's2sad', 'jax'), True)} | {fmt_tool(r, 'autograd')} |")
    lines += ["", "| workload | first call, cold (uncompiled while a worker compiles) | compiled code in place | "
              "hand adjoint's first call (njit compile) | **s2sad/hand** | "
              "same, jax.jit(jax.grad) | first call, warm process (disk cache; median of 3) | "
              "same, numba already started | (numba start-up + cached hand adjoint) | "
              "peak memory of one s2sad gradient call | same, hand adjoint |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = r.get("first")
        if f:
            nf = f["warm_numba_first"]
            cold, hand, jax = (f.get(k, {}).get("first_call_s") for k in ("cold", "cold_hand", "cold_jax"))
            compiled = f["cold"].get("compiled_s")
            lines.append(f"| {r['label']} | {fmt_time(cold)} | {fmt_time(compiled) if compiled else '-'} | "
                         f"{fmt_time(hand) if hand else '-'} | "
                         f"{fmt_ratio(cold / hand if hand else None, True)} | {fmt_time(jax) if jax else '-'}"
                         f" | {fmt_time(f['warm']['first_call_s'])}"
                         f" | {fmt_time(nf['first_call_s'])} | {fmt_time(nf['hand_first_call_s'])}"
                         f" | {fmt_bytes(f['warm']['peak_s2sad'])} | {fmt_bytes(f['warm']['peak_hand'])} |")
    o = results.get("overhead")
    if o:
        lines += ["", f"Per-call overhead, `s2sad.grad(tiny)(1.0, 2.0)` with `tiny(x, y) = x * y + "
                  f"np.sin(x)`: **{o['s2sad'] * 1e6:.2f} µs** (a numba.njit function returning the same gradient: "
                  f"{o['njit'] * 1e6:.2f} µs)."]
    lines += ["", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {what} | {value} | {verdict} |" for what, value, verdict in results["targets"]]
    return "\n".join(lines)


def targets(results: dict) -> list[tuple[str, str, str]]:
    out = []
    rows = results["workloads"]

    def verdict(ok):
        return "met" if ok else "**missed**"

    for r in rows:
        x = ratio(r["times"], "s2sad", "hand")
        out.append((f"{r['label']}: s2sad/hand <= {TARGETS['s2sad_over_hand']}",
                    f"{x:.2f}{fmt_spread(r['times'], 's2sad', 'hand')}",
                    verdict(x <= TARGETS["s2sad_over_hand"])))
    for r in rows:
        if r["loop"]:
            x = ratio(r["times"], "s2sad", "primal")
            out.append((f"{r['label']}: grad/primal <= 3", f"{x:.2f}{fmt_spread(r['times'], 's2sad', 'primal')}", verdict(x <= TARGETS["loop_grad_over_primal"])))
    for r in rows:
        x = ratio(r["times"], "s2sad", "jax")
        if x is not None:
            out.append((f"{r['label']}: faster than jax.jit(jax.grad)",
                        f"s2sad/jax = {x:.2f}{fmt_spread(r['times'], 's2sad', 'jax')}", verdict(x < 1.0)))
    if results.get("overhead"):
        x = results["overhead"]["s2sad"]
        out.append(("per-call overhead <= 2 µs", f"{x * 1e6:.2f} µs", verdict(x <= TARGETS["overhead_s"])))
    for r in rows:
        f = r.get("first")
        if f:
            # The call's own work is not overhead. It is the second call in the same child: the child's
            # allocator settings (see first_calls) make a large call slower there than in the timing rounds.
            hand = f.get("cold_hand", {}).get("first_call_s")
            if hand:
                x = f["cold"]["first_call_s"] / hand
                out.append((f"{r['label']}: cold first call <= 1.5 x compiling the hand adjoint",
                            f"{fmt_time(f['cold']['first_call_s'])} / {fmt_time(hand)} = {x:.1f}",
                            verdict(x <= TARGETS["cold_over_hand_compile"])))
            own = f["warm"]["second_call_s"]
            x = f["warm"]["first_call_s"] - own
            out.append((f"{r['label']}: warm-process first call <= 0.5 s",
                        f"{fmt_time(x)} (+ {fmt_time(own)} for the call itself, timed as the child's second call)",
                        verdict(x <= TARGETS["warm_first_call_s"])))
            if r["name"].startswith("rosen") and (f["warm"]["peak_s2sad"] or 0) >= 16 * RESOLVED_BYTES:
                extra = (f["warm"]["peak_s2sad"] - 8 * (r["trips"] + 1)) / r["trips"]
                out.append((f"{r['label']}: tape memory <= 16 B/iteration",
                            f"{extra:.1f} B/iteration beyond the 8 B/element gradient",
                            verdict(extra <= TARGETS["rosen_tape_bytes_per_iter"])))
    return out


def plot(results: dict, path: Path) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    rows = results["workloads"]
    tools = [("s2sad", "s2sad"), ("hand", "hand adjoint (njit)"), ("jax", "jax.jit(jax.grad)"), ("autograd", "autograd")]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(tools)
    for k, (tool, label) in enumerate(tools):
        xs = [i + (k - 1.5) * width for i, r in enumerate(rows) if tool in r["times"]]
        ys = [ratio(r["times"], tool, "primal") for r in rows if tool in r["times"]]
        ax.bar(xs, ys, width, label=label)
    ax.axhline(3.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("gradient time / primal time (log)")
    ax.set_title(f"Gradient / primal per workload ({results['mode']}); dashed: 3")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"plot written to {path}"


def update_readme(section: str) -> None:
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    README.write_text(f"{head}{START}\n{section}\n{END}{tail}", encoding="utf-8")


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer rounds")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="workloads whose name contains NAME")
    parser.add_argument("--no-first-call", action="store_true", help="skip the subprocess first-call/memory runs")
    parser.add_argument("--cold-only", action="store_true",
                        help="only the cold first calls (s2sad and the hand adjoint's compile), as a table")
    parser.add_argument("--baseline", metavar="DIR", help="with --cold-only: also s2sad from this checkout")
    parser.add_argument("--child", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--numba-first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-of", choices=("hand", "jax"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child and args.first_of:
        child_first_of(args.child, args.quick, args.first_of)
        return
    if args.child:
        child(args.child, args.quick, args.numba_first)
        return
    progress = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    # Short batches: on a shared machine a batch longer than a scheduler slice is mostly waiting time.
    rounds, min_batch_s = (15, 0.002) if args.quick else (41, 0.002)
    chosen = [w for w in W.workloads(args.quick) if not args.only or any(s in w.name for s in args.only)]
    if not chosen:
        raise SystemExit(f"no workload matches {args.only}; names: {[w.name for w in W.workloads(args.quick)]}")
    if args.cold_only:
        print(cold_table(chosen, args.quick, args.baseline))
        return
    mode = "`--quick` sizes" if args.quick else "full sizes"
    results = dict(machine=machine(), mode=mode, workloads=[], load_before=os.getloadavg()[0])
    for w in chosen:
        progress(f"{w.name} ...")
        row = bench_workload(w, rounds, min_batch_s, progress)
        if not args.no_first_call:
            progress(f"  {w.name}: first calls in fresh processes (cold, warm)")
            row["first"] = first_calls(w.name, args.quick)
        results["workloads"].append(row)
    progress("per-call overhead ...")
    results["overhead"] = bench_overhead(calls=20_000, rounds=rounds)
    results["load_after"] = os.getloadavg()[0]
    results["targets"] = targets(results)
    text = markdown(results)
    print(text)
    # a partial run keeps its numbers apart: results.json stays the full run the README table shows
    (HERE / ("results-only.json" if args.only else "results.json")).write_text(json.dumps(results, indent=1),
                                                                               encoding="utf-8")
    if not args.only:
        progress(plot(results, HERE / "results.png"))
        update_readme(text + "\n\n![gradient / primal per workload](benchmarks/results.png)")
        progress("README.md table rewritten")


def pin_to_one_core() -> None:
    """One core for the whole run (the first-call subprocesses inherit it): XLA's CPU runtime in JAX 0.11
    ignores the thread flags at the top and spreads one gradient over every core it may use (GMM d=10 on a
    16-core machine: 46 ms on all cores, 165 ms pinned to one), which measures the machine, not the code.
    Only when run as a script: a process that imports this module (the smoke test) keeps its cores."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


if __name__ == "__main__":
    pin_to_one_core()
    try:
        main()
    except Mismatch as exc:
        print(f"\n{exc}", file=sys.stderr)
        sys.exit(1)

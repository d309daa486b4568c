"""The benchmark workloads' s2sad gradients match the hand-written adjoints (tiny sizes), so the suite cannot rot.

Each hand adjoint is itself checked against central finite differences of the plain NumPy primal.
Runs the generated code on the python backend and the hand adjoints uncompiled (`.py_func`): no numba compile.
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
CORES_BEFORE_IMPORT = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None

import run  # noqa: E402
import workloads as W  # noqa: E402

TINY = W.workloads(tiny=True)


def test_importing_the_suite_leaves_the_process_on_its_cores():
    # run.py pins itself to one core when run as a script; a test worker that imports it must keep both.
    if CORES_BEFORE_IMPORT is not None:
        assert os.sched_getaffinity(0) == CORES_BEFORE_IMPORT


def uncompiled(fn):
    return getattr(fn, "py_func", fn)


@pytest.mark.parametrize("w", TINY, ids=[w.name for w in TINY])
def test_s2sad_gradient_matches_the_hand_adjoint(w):
    args = w.make_inputs()
    hand = run.leaves_of(uncompiled(w.hand_grad)(*args))
    run.check_reference_by_finite_differences(w, w.fun, args, hand)
    got = run.leaves_of(run.s2sad_gradient(w, backend="python")(*args))
    run.check_close(w.name, got, hand, w.rtol)


def test_a_wrong_gradient_stops_the_suite():
    w = TINY[0]
    args = w.make_inputs()
    hand = run.leaves_of(uncompiled(w.hand_grad)(*args))
    with pytest.raises(run.Mismatch, match="GRADIENT MISMATCH"):
        run.check_close(w.name, [hand[0] * (1 + 1e-6)] + hand[1:], hand, w.rtol)
    with pytest.raises(run.Mismatch, match="REFERENCE MISMATCH"):
        run.check_reference_by_finite_differences(w, w.fun, args, [2.0 * h for h in hand])


def test_the_gmm_primal_matches_an_independent_loop():
    for w in TINY[:2]:
        args = w.make_inputs()
        assert np.isclose(w.fun(*args), uncompiled(W.gmm_value_hand)(*args), rtol=1e-12)


def test_the_gpu_references_of_the_vmap_benchmark_match_the_closed_form():
    import bench_vmap as V  # numba's CUDA simulator here (tests/conftest.py), the GPU where one is

    rng = np.random.default_rng(1)
    W_, X = 0.1 * rng.standard_normal(V.D), rng.standard_normal((40, V.D))  # fewer than a block of threads
    Y = (rng.uniform(size=40) < 0.5).astype(np.float64)
    want = V.numpy_grads(W_, 0.1, X, Y)
    got = [g.copy_to_host() for g in V.hand_cuda_kernel()(W_, 0.1, X, Y)]
    V.check("hand cuda", got, want)
    with pytest.raises(SystemExit, match="MISMATCH"):
        V.check("hand cuda", [got[0] * (1 + 1e-6), got[1]], want)

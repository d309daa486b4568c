"""The benchmark workloads' s2sad gradients match the hand-written adjoints (tiny sizes), so the suite cannot rot.

Each hand adjoint is itself checked against central finite differences of the plain NumPy primal.
Runs the generated code on the python backend and the hand adjoints uncompiled (`.py_func`): no numba compile.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import run  # noqa: E402
import workloads as W  # noqa: E402

TINY = W.workloads(tiny=True)


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

"""Indexing, methods, joining and small real models: forward and reverse mode vs finite differences."""

import numpy as np
import pytest

import s2sad
import numpy_programs as P

R = np.random.default_rng(7)
X6 = R.normal(size=6)
CASES = [
    ("gather", (X6, np.array([0, 2, 2, 5])), 2),
    ("gather_constant_list", (X6,), 2),
    ("newaxis_outer", (X6[:4], X6[4:]), 2),
    ("ellipsis_and_reversed", (R.normal(size=(3, 2)),), 2),
    ("methods_and_joining", (X6, R.normal(size=(2, 3))), 2),
    ("gmm_log_likelihood", (R.normal(size=(3, 2)), R.normal(size=3), R.normal(size=(5, 2))), 1),
    ("softmax_cross_entropy", (R.normal(size=(3, 4)), R.normal(size=(5, 3)), np.eye(4)[[0, 3, 1, 1, 2]]), 1),
    ("least_squares", (R.normal(size=(6, 3)), R.normal(size=6), 0.3), 1),
    ("contiguous_normal_equations", (R.normal(size=(6, 3)), R.normal(size=6)), 2),
    ("gaussian_log_density", (R.normal(size=(3, 3)), R.normal(size=3), R.normal(size=3)), 1),
    ("scatter_writes", (R.normal(size=5), np.array([0, 3, 0, 1, 3])), 2),  # repeated indices: the last write wins
    ("gaussian_log_density_slogdet", (R.normal(size=(3, 3)), R.normal(size=3), R.normal(size=3)), 1),
]


# Second order on numba for a representative part of the programs, whose second-order sources numba
# compiles here: scatter-adds (gather), repeated-index writes and reversed, ellipsis-indexed views. The
# others' second-order sources run on the python backend, which checks exactly the text numba would
# compile; on numba they are checked to first order in both modes. Their second derivatives took four
# numba compiles each, ~400 s of worker CPU in CI (methods_and_joining alone ~190 s).
NUMBA_FIRST_ORDER_ONLY = {"methods_and_joining", "newaxis_outer", "contiguous_normal_equations", "gather_constant_list"}


@pytest.mark.parametrize("name, args, order", CASES, ids=[c[0] for c in CASES])
def test_matches_finite_differences_in_both_modes(name, args, order, backend):
    if backend == "numba" and name in NUMBA_FIRST_ORDER_ONLY:
        order = 1
    s2sad.check_grads(getattr(P, name), args, order=order, modes=("fwd", "rev"), backend=backend)


def test_repeated_indices_accumulate_in_the_gradient():
    x = np.array([1.0, 2.0, 3.0])
    g = s2sad.grad(P.gather)(x, np.array([0, 2, 2]))
    np.testing.assert_allclose(g, [2.0, 0.0, 12.0])  # d/dx2 of 2 * x2**2

"""Constant-subscript contractions (s2sad/runtime/contract.py): the loop nests numba compiles for
einsum_op / einsum_into agree with np.einsum, keep NumPy's errors, and fold into generated code."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from s2sad.runtime import contract, einsum_into, einsum_op

rng = np.random.default_rng(7)

OP_CASES = [
    ("kij,nkj->nki", [(4, 3, 3), (5, 4, 3)]),
    ("nki,nkj->kij", [(5, 4, 3), (5, 4, 2)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij,ij->j", [(2, 3), (2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii->", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ba", [(2, 3)]),
    ("ij,j->i", [(3, 0), (0,)]),  # an empty sum: each output element is set (to 0), never left unset
    # sums four output elements side by side, then the rest one by one (contract.JAM)
    ("kij,nkj->nki", [(3, 6, 5), (4, 3, 5)]),
    ("ij,j->i", [(9, 5), (5,)]),
    # a short last output axis sums in registers (i, k, j); a long one updates out in place (i, j, k)
    ("ij,jk->ik", [(5, 4), (4, 9)]),
    ("ij,jk->ik", [(3, 4), (4, 17)]),
]


@pytest.mark.parametrize("spec,shapes", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_kernel_matches_numpy(spec, shapes):
    args = [rng.normal(size=s) for s in shapes]
    assert contract.specialisable(spec, tuple(len(s) for s in shapes), into=False)
    np.testing.assert_allclose(contract.kernel(spec, False)(*args), np.einsum(spec, *args), rtol=1e-12)


INTO_CASES = [  # output subscripts may repeat (a diagonal) or be new (broadcast along them)
    ("ij->iij", [(2, 3)], (2, 2, 3)),
    ("i->ij", [(3,)], (3, 2)),
    ("nki,nkj->kij", [(5, 4, 3), (5, 4, 2)], (4, 3, 2)),
    ("kij,nki->nkj", [(4, 3, 2), (5, 4, 3)], (5, 4, 2)),
    ("kij,nki->nkj", [(4, 3, 9), (5, 4, 3)], (5, 4, 9)),
    ("kij,nki->nkj", [(2, 3, 17), (5, 2, 3)], (5, 2, 17)),
]


@pytest.mark.parametrize("spec,shapes,like", INTO_CASES, ids=[c[0] for c in INTO_CASES])
def test_into_kernel_matches_generic(spec, shapes, like):
    args = [rng.normal(size=s) for s in shapes]
    target = np.zeros(like)
    expected = einsum_into(spec, target, *args)  # the Python path: the generic contraction
    np.testing.assert_allclose(contract.kernel(spec, True)(target, *args), expected, rtol=1e-12)


def test_python_path_writes_diagonals_and_broadcasts_in_closed_form():
    """The python backend's einsum_into is np.einsum plus placement: checked against closed forms."""
    np.testing.assert_array_equal(einsum_into("->ii", np.zeros((3, 3)), np.array(1.5)), 1.5 * np.eye(3))
    v = np.array([1.0, 2.0])
    expected = v[:, None, None] * np.eye(4)[None, :, :]
    np.testing.assert_array_equal(einsum_into("i->ijj", np.zeros((2, 4, 4)), v), expected)
    a = rng.normal(size=(3, 3))
    assert einsum_into("ii->", 0.0, a) == pytest.approx(np.trace(a))


def test_python_path_returns_new_arrays():
    a = rng.normal(size=(3, 4))
    for out in (einsum_op("ij->ji", a), einsum_into("ij->ji", np.zeros((4, 3)), a)):
        np.testing.assert_array_equal(out, a.T)
        assert not np.shares_memory(out, a)


def test_integer_operands_give_floats():
    a, b = np.arange(6).reshape(2, 3), np.arange(3)
    out = contract.kernel("ij,j->i", False)(a, b)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, a @ b)


def test_mismatched_sizes_raise_numpy_style():
    with pytest.raises(ValueError, match="two different sizes"):
        contract.kernel("ij,jk->ik", False)(np.ones((2, 3)), np.ones((4, 2)))


@pytest.mark.parametrize("spec,ndims", [("ii->ii", (2,)), ("ij->k", (2,)), ("ij,jk->ik", (2, 3)),
                                        ("i...->i", (1,)), ("a,b,c", (1, 1, 1)), ("i->", (2,))])
def test_generic_kernel_keeps_what_the_loop_nest_does_not_cover(spec, ndims):
    assert not contract.specialisable(spec, ndims, into=False)


def test_loop_order_streams_the_big_operands():
    """'nki,nkj->kij' (an einsum adjoint): n, the leading axis of both big operands, runs outermost
    and j, the last axis of the output and of y, innermost."""
    src = contract.kernel_source("nki,nkj->kij", True).split("def kernel(")[1]  # not `small`
    loops = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("for ")]
    assert loops == ["for i_n in range(n_n):", "for i_k in range(n_k):", "for i_i in range(n_i):",
                     "for i_j in range(n_j):"]
    assert "acc" in contract.kernel_source("kij,nkj->nki", False)  # the innermost label j is summed


def test_short_output_axis_sums_in_registers():
    """'kij,nki->nkj' with a short j (GMM's d): j moves outside the sum over i, four at a time."""
    src = contract.kernel_source("kij,nki->nkj", True)
    assert f"if n_j < {contract.SHORT_RUN}:" in src
    assert "acc3 += x[i_k, i_i, i_j + 3] * y[i_n, i_k, i_i]" in src
    assert "out[i_n, i_k, i_j] += x[i_k, i_i, i_j] * y[i_n, i_k, i_i]" in src  # the long-axis loop


def test_small_operands_sum_in_registers():
    """'nki,nkj->kij' over operands that fit in cache: n, the summed label, runs innermost in `small`."""
    src = contract.kernel_source("nki,nkj->kij", True)
    assert f"if x.size + y.size < {contract.SMALL_OPERANDS}:" in src and "return small(like, x, y)" in src
    small = src.split("def kernel(")[0]
    loops = [ln.strip() for ln in small.splitlines() if ln.strip().startswith("for ")]
    assert loops[:2] == ["for i_k in range(n_k):", "for i_i in range(n_i):"] and set(loops[2:]) == {"for i_n in range(n_n):"}
    assert "acc1 += x[i_n, i_k, i_i] * y[i_n, i_k, i_j + 1]" in small  # two at a time (d = 2)


@pytest.mark.parametrize("n", [50, 6000])  # either side of SMALL_OPERANDS for every d
@pytest.mark.parametrize("d", [1, 2, 3, 5, 7])  # 4 then 2 at a time, and what remains
def test_both_sides_of_the_small_operand_switch_agree_with_numpy(n, d):
    x, y = rng.normal(size=(n, 3, d)), rng.normal(size=(n, 3, d))
    assert (x.size + y.size < contract.SMALL_OPERANDS) == (n == 50)  # 2 * 6000 * 3 > 2 ** 15
    got = contract.kernel("nki,nkj->kij", True)(np.empty((3, d, d)), x, y)
    np.testing.assert_allclose(got, np.einsum("nki,nkj->kij", x, y), rtol=1e-12, atol=1e-12)


def test_swap_text_matches_the_runtime():
    assert contract.swap_text("ij,jk->ik", 0) == "ik,jk->ij"
    assert contract.swap_text("ij,jk->ik", 1) == "ij,ik->jk"
    assert contract.swap_text("ij,jk", 1) == "ij,ik->jk"
    with pytest.raises(ValueError, match="no such operand"):
        contract.swap_text("ij->ji", 1)


def gmm_like(L, X):
    return np.sum(np.einsum("kij,nkj->nki", L, X) ** 2)


def test_generated_code_has_constant_subscripts_and_folded_powers():
    text = s2sad.source(gmm_like, argnums=(0, 1))
    assert "einsum_swap" not in text
    assert "einsum_into('nki,nkj->kij'" in text and "einsum_into('kij,nki->nkj'" in text
    assert "** (2 - 1)" not in text and "** 1" not in text


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_einsum_gradient_against_closed_form(backend):
    L, X = rng.normal(size=(3, 2, 2)), rng.normal(size=(4, 3, 2))
    gL, gX = s2sad.grad(gmm_like, argnums=(0, 1), backend=backend)(L, X)
    Y = np.einsum("kij,nkj->nki", L, X)
    np.testing.assert_allclose(gL, 2 * np.einsum("nki,nkj->kij", Y, X), rtol=1e-10)
    np.testing.assert_allclose(gX, 2 * np.einsum("kij,nki->nkj", L, Y), rtol=1e-10)


def _tuned_in_fresh_process(env_value):
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("S2SAD_MALLOC_TUNING", None)
    if env_value is not None:
        env["S2SAD_MALLOC_TUNING"] = env_value
    code = "import s2sad.runtime.memory as m; print(m.tune_malloc())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_malloc_tuning_is_on_under_glibc_and_can_be_switched_off():
    import platform

    glibc = platform.libc_ver()[0] == "glibc"
    assert _tuned_in_fresh_process(None) == str(glibc)
    assert _tuned_in_fresh_process("0") == "False"


def _contractions(L, x, A, B):
    Lx = np.einsum("kij,nkj->nki", L, x)
    return np.sum(Lx * Lx) + np.sum(np.tensordot(A, B, 1) ** 2) + np.sum(np.inner(A, A)) + np.trace(A @ B)


def test_python_backend_compiles_nothing():
    """The python backend is what a cold first call runs while numba compiles (s2sad.background): it
    must answer without compiling anything itself."""
    from numba.core import event

    args = (rng.normal(size=(3, 2, 2)), rng.normal(size=(4, 3, 2)), rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))
    class Compiles(event.Listener):
        def __init__(self):
            self.names = []

        def on_start(self, e):
            self.names.append(e.data["dispatcher"].py_func.__qualname__)

        def on_end(self, e):
            pass

    compiles = Compiles()
    with event.install_listener("numba:compile", compiles):
        grads = s2sad.grad(_contractions, argnums=(0, 1, 2, 3), backend="python")(*args)
    assert compiles.names == []
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_contractions, args, i))

"""float32 through the shape, linalg and special helpers (s2sad/runtime/shapes.py, linalg.py, contract.py,
special.py): an adjoint has its primal's precision (runtime/core.py), so float32 operands give float32
results in Python and under numba, with the values of the float64 computation; float64 stays float64."""

import numba
import numpy as np
import pytest
from numba.core import types
from numba.np.numpy_support import as_dtype

import s2sad
from s2sad.runtime import (as_float, concat_embed, concat_part, concatenate2, diag_adjoint, einsum_into,
                           einsum_op, expand_dims_any, flip_any, inner_op, logabsdet, matrix_t, norm_cdf, norm_logpdf,
                           norm_pdf, pad_any, repeat_adjoint, repeat_any, reshape_any, reshape_like, roll_any,
                           slogdet_sign, sp_digamma, sp_erf, sp_erfc, sp_expit, sp_gammaln, sp_logit, sp_logsumexp,
                           sp_polygamma, sp_xlogy, square_block, squeeze_any, sym_lower, tensordot_op,
                           tile_adjoint, tile_any, tril_half, unit_like, unpad, untranspose, vdot_flat)

R = np.random.default_rng(32)


def _m(*shape):
    """Float64 values in (0.5, 1.5): sums of them do not cancel, so float32 keeps 1e-5 relative."""
    return R.uniform(0.5, 1.5, size=shape)


SPD = _m(3, 3) + 3.0 * np.eye(3)
IDX = np.array([0, 2, 2, 4, 0])

# (id, function of the operands only, operands as float64: arrays and Python floats)
CASES = [
    # shapes.py: the transposes of the shape functions
    ("reshape_like", lambda t, like: reshape_like(t, like), (_m(6), _m(2, 3))),
    ("reshape_like to scalar", lambda t, like: reshape_like(t, like), (_m(1), 0.7)),
    ("reshape_like of scalar", lambda t, like: reshape_like(t, like), (0.7, _m(1, 1))),
    ("reshape_like scalars", lambda t, like: reshape_like(t, like), (0.7, 0.3)),
    ("untranspose", lambda t: untranspose(t, (1, 2, 0)), (_m(2, 3, 4),)),
    ("flip_any", lambda x: flip_any(x, 1), (_m(2, 3),)),
    ("roll_any", lambda x: roll_any(x, -2, 1), (_m(2, 3),)),
    ("tile_any", lambda x: tile_any(x, (2, 1)), (_m(2, 3),)),
    ("tile_adjoint", lambda t, x: tile_adjoint(t, x, (2, 1)), (_m(4, 3), _m(2, 3))),
    ("tile_adjoint to scalar", lambda t, x: tile_adjoint(t, x, 3), (_m(3), 0.5)),
    ("repeat_any", lambda x: repeat_any(x, 2, 1), (_m(2, 3),)),
    ("repeat_adjoint", lambda t, x: repeat_adjoint(t, x, 2), (_m(12), _m(2, 3))),
    ("repeat_adjoint axis", lambda t, x: repeat_adjoint(t, x, 2, 1), (_m(2, 6), _m(2, 3))),
    ("repeat_adjoint to scalar", lambda t, x: repeat_adjoint(t, x, 2), (_m(2), 0.5)),
    ("pad_any", lambda x: pad_any(x, (1, 2)), (_m(2, 3),)),
    ("unpad", lambda t: unpad(t, 1), (_m(4, 5),)),
    ("squeeze_any", lambda x: squeeze_any(x, 0), (_m(1, 3),)),
    ("expand_dims_any", lambda x: expand_dims_any(x, (0, 2)), (_m(2, 3),)),
    ("reshape_any", lambda x: reshape_any(x, (3, 2)), (_m(2, 3),)),
    ("concatenate2", lambda a, b: concatenate2(a, b, 1), (_m(2, 3), _m(2, 2))),
    ("concat_part", lambda t, like: concat_part(t, like, 1, 1), (_m(2, 5), _m(2, 3))),
    ("concat_embed", lambda h, like: concat_embed(h, like, 1, 0), (_m(2, 3), _m(2, 5))),
    ("diag_adjoint of matrix", lambda t, like: diag_adjoint(t, like, 1), (_m(2), _m(3, 3))),
    ("diag_adjoint of vector", lambda t, like: diag_adjoint(t, like, -1), (_m(4, 4), _m(3))),
    ("unit_like", lambda x: unit_like(x, 4), (_m(2, 3),)),
    ("unit_like scalar", lambda x: unit_like(x, 0), (0.5,)),
    ("square_block", lambda h, x: square_block(h, x), (_m(6, 6), _m(2, 3))),
    ("square_block scalar", lambda h, x: square_block(h, x), (_m(1, 1), 0.5)),
    # linalg.py and contract.py: contractions (literal subscripts: contract.py's loop nests; the others:
    # the generic kernel), matrix helpers
    ("einsum_op", lambda a, b: einsum_op("ij,jk->ik", a, b), (_m(2, 3), _m(3, 20))),
    ("einsum_op implicit", lambda a, b: einsum_op("ij,jk", a, b), (_m(2, 3), _m(3, 2))),
    ("einsum_op to scalar", lambda a, b: einsum_op("i,i", a, b), (_m(5), _m(5))),
    ("einsum_op one operand", lambda a: einsum_op("ij->j", a), (_m(3, 4),)),
    ("einsum_op generic", lambda c, a: einsum_op(",i->i", c, a), (0.5, _m(3))),
    ("einsum_into", lambda like, g, y: einsum_into("ik,jk->ij", like, g, y), (_m(2, 3), _m(2, 4), _m(3, 4))),
    ("einsum_into jammed", lambda like, x, g: einsum_into("nki,nkj->kij", like, x, g),
     (_m(2, 3, 5), _m(4, 2, 3), _m(4, 2, 5))),
    ("einsum_into diagonal", lambda like, a: einsum_into("ij->iij", like, a), (_m(2, 2, 3), _m(2, 3))),
    ("einsum_into generic", lambda like, a, b: einsum_into(",i->i", like, a, b), (_m(3), 0.5, _m(3))),
    ("einsum_into to scalar", lambda like, a, b: einsum_into("i,i->", like, a, b), (0.5, _m(3), _m(3))),
    ("tensordot_op", lambda a, b: tensordot_op(a, b, 1), (_m(2, 3), _m(3, 4))),
    ("tensordot_op to scalar", lambda a, b: tensordot_op(a, b, 2), (_m(2, 3), _m(2, 3))),
    ("inner_op", lambda a, b: inner_op(a, b), (_m(2, 3), _m(4, 3))),
    ("vdot_flat", lambda a, b: vdot_flat(a, b), (_m(2, 3), _m(2, 3))),
    ("matrix_t", lambda x: matrix_t(x), (_m(2, 3),)),
    ("tril_half", lambda x: tril_half(x), (_m(3, 3),)),
    ("sym_lower", lambda x: sym_lower(x), (_m(3, 3),)),
    ("logabsdet", lambda a: logabsdet(a), (SPD,)),
    ("slogdet_sign", lambda a: slogdet_sign(a), (SPD,)),
    # special.py: SciPy's functions, as numbers and elementwise
    ("sp_erf", lambda x: sp_erf(x), (_m(4),)),
    ("sp_erf scalar", lambda x: sp_erf(x), (0.5,)),
    ("sp_erfc", lambda x: sp_erfc(x), (_m(4),)),
    ("sp_expit scalar", lambda x: sp_expit(x), (0.5,)),
    ("sp_logit", lambda x: sp_logit(x), (_m(4) * 0.5,)),
    ("sp_gammaln", lambda x: sp_gammaln(x), (_m(4),)),
    ("sp_digamma", lambda x: sp_digamma(x), (_m(4),)),
    ("sp_digamma scalar", lambda x: sp_digamma(x), (0.5,)),
    ("sp_polygamma", lambda x: sp_polygamma(1, x), (_m(4),)),
    ("sp_polygamma scalar", lambda x: sp_polygamma(2, x), (1.5,)),
    ("sp_xlogy", lambda x, y: sp_xlogy(x, y), (_m(2, 3), _m(3))),
    ("sp_xlogy by a float", lambda x: sp_xlogy(x, 2.0), (_m(3),)),
    ("sp_xlogy scalars", lambda x, y: sp_xlogy(x, y), (0.5, 1.5)),
    ("sp_logsumexp", lambda a: sp_logsumexp(a), (_m(2, 3),)),
    ("sp_logsumexp axis", lambda a: sp_logsumexp(a, 1), (_m(2, 3),)),
    ("norm_cdf", lambda x: norm_cdf(x), (_m(4),)),
    ("norm_cdf scalar", lambda x: norm_cdf(x, 0.5, 2.0), (0.5,)),
    ("norm_pdf", lambda x, loc, scale: norm_pdf(x, loc, scale), (_m(2, 3), _m(3), 1.5)),
    ("norm_logpdf", lambda x: norm_logpdf(x, 0.5, 2.0), (_m(4),)),
    ("norm_logpdf scalar", lambda x, scale: norm_logpdf(x, 0.0, scale), (0.5, 1.5)),
]


def _in(dtype, value):
    """A float64 operand in `dtype`: a float32 array or np.float32 scalar, or the float64 value itself."""
    if dtype == np.float64:
        return value
    return value.astype(dtype) if isinstance(value, np.ndarray) else dtype(value)


def _nb_dtype(jitted):
    """The dtype of what the last compiled signature of `jitted` returns (numba hands a float32 scalar
    back to Python as a float, so its type says more than the value)."""
    t = jitted.nopython_signatures[-1].return_type
    return as_dtype(t.dtype if isinstance(t, types.Array) else t)


def _results(fn, dtype, operands):
    """(Python result, numba result, numba result's dtype) of fn with the operands in `dtype`."""
    args = [_in(dtype, v) for v in operands]
    jitted = numba.njit(fn)
    compiled = jitted(*args)
    return fn(*args), compiled, _nb_dtype(jitted)


@pytest.mark.parametrize("fn, operands", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_float32_operands_give_float32(fn, operands):
    want = fn(*operands)
    py, nb, nb_dtype = _results(fn, np.float32, operands)
    assert np.result_type(py) == np.float32, "Python"
    assert nb_dtype == np.float32, "numba"
    np.testing.assert_allclose(py, want, rtol=1e-5, err_msg="Python")
    np.testing.assert_allclose(nb, want, rtol=1e-5, err_msg="numba")


@pytest.mark.parametrize("fn, operands", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_float64_operands_give_float64(fn, operands):
    """In Python: numba's float64 helpers compile, and are checked, in the rest of the suite."""
    assert np.result_type(fn(*operands)) == np.float64


def test_float64_scalar_adjoints_are_python_floats():
    assert type(reshape_like(np.ones(1), 0.5)) is float
    assert type(unit_like(0.5, 0)) is float
    assert type(einsum_into("i,i->", 0.5, np.ones(3), np.ones(3))) is float
    assert type(square_block(np.ones((1, 1)), 0.5)) is float
    assert type(tile_adjoint(np.ones(2), 0.5, 2)) is float


# The adjoint takes the precision of the operand it is the adjoint of (`like` / `x`), not of the
# adjoint it starts from: (id, function, operands, their dtypes, the result's dtype).
MIXED = [
    ("reshape_like", lambda t, like: reshape_like(t, like), (_m(6), _m(2, 3)), "f8 f4", "f4"),
    ("reshape_like up", lambda t, like: reshape_like(t, like), (_m(6), _m(2, 3)), "f4 f8", "f8"),
    ("tile_adjoint", lambda t, x: tile_adjoint(t, x, (2, 1)), (_m(4, 3), _m(2, 3)), "f8 f4", "f4"),
    ("repeat_adjoint axis", lambda t, x: repeat_adjoint(t, x, 2, 1), (_m(2, 6), _m(2, 3)), "f8 f4", "f4"),
    ("concat_part", lambda t, like: concat_part(t, like, 1, 1), (_m(2, 5), _m(2, 3)), "f8 f4", "f4"),
    ("concat_embed", lambda h, like: concat_embed(h, like, 1, 0), (_m(2, 3), _m(2, 5)), "f8 f4", "f4"),
    ("diag_adjoint", lambda t, like: diag_adjoint(t, like, -1), (_m(4, 4), _m(3)), "f8 f4", "f4"),
    ("einsum_into", lambda like, g, y: einsum_into("ik,jk->ij", like, g, y), (_m(2, 3), _m(2, 4), _m(3, 4)),
     "f4 f8 f4", "f4"),
    ("einsum_into up", lambda like, g, y: einsum_into("ik,jk->ij", like, g, y), (_m(2, 3), _m(2, 4), _m(3, 4)),
     "f8 f4 f4", "f8"),
    ("einsum_into generic", lambda like, a, b: einsum_into(",i->i", like, a, b), (_m(3), np.float64(0.5), _m(3)),
     "f4 f8 f8", "f4"),
]


@pytest.mark.parametrize("fn, operands, dtypes, want", [c[1:] for c in MIXED], ids=[c[0] for c in MIXED])
def test_mixed_operands_follow_the_operand(fn, operands, dtypes, want):
    args = [v.astype(d) for v, d in zip(operands, dtypes.split())]
    jitted = numba.njit(fn)
    nb = jitted(*args)
    assert np.result_type(fn(*args)) == np.dtype(want), "Python"
    assert _nb_dtype(jitted) == np.dtype(want), "numba"
    np.testing.assert_allclose(nb, fn(*operands), rtol=1e-5)


def test_as_float_is_float64():
    """`x.astype(float)` is float64 in NumPy, whatever x's precision."""
    x = np.ones(3, np.float32)
    assert as_float(x).dtype == np.float64
    assert numba.njit(lambda x: as_float(x))(x).dtype == np.float64


# ---------------------------------------------------------------------------------------------------
# end to end, python backend: float32 in, float32 gradients out, the float64 function's derivatives

X, W = _m(3, 4) - 1.0, _m(4, 2) - 1.0
A, B = _m(2, 3), _m(3, 4)
V, Y = _m(5), _m(3)


def tanh_of_product(W):
    return np.sum(np.tanh(X @ W))


def squared_einsum(a, b):
    return np.sum(np.einsum("ij,jk->ik", a, b) ** 2)


def summed_solve(A, b):
    return np.sum(np.linalg.solve(A, b))


def gathered(v):
    return np.sum(v[IDX] ** 2)


def concatenated(v, y):
    return np.sum(np.concatenate([v, y]) ** 2)


def upper_triangle(m):
    return np.sum(np.triu(m))


def tiled(v):
    return np.sum(np.tile(v, 2) ** 2)


def tensordot_product(a, b):
    return np.sum(np.tensordot(a, b, 1) ** 2)


def stacked(v, y):
    return np.sum(np.stack([v[:3], y]) ** 2)


def _case(f, args):
    return pytest.param(f, args, id=f.__name__)


E2E = [_case(tanh_of_product, (W,)), _case(squared_einsum, (A, B)), _case(summed_solve, (SPD, Y)),
       _case(gathered, (V,)), _case(concatenated, (V, Y)), _case(upper_triangle, (SPD,)), _case(tiled, (V,)),
       _case(tensordot_product, (A, B)), _case(stacked, (V, Y))]


def _finite_differences(f, args, k, h=1e-6):
    x = args[k]
    out = np.empty(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = h
        up, down = list(args), list(args)
        up[k], down[k] = x + e, x - e
        out[i] = (f(*up) - f(*down)) / (2 * h)
    return out


@pytest.mark.parametrize("f, args", E2E)
def test_float32_gradients(f, args):
    argnums = tuple(range(len(args)))
    grads = s2sad.grad(f, argnums=argnums, backend="python")(*[a.astype(np.float32) for a in args])
    for k, g in enumerate(grads):
        assert g.dtype == np.float32, f"argument {k}"
        np.testing.assert_allclose(g, _finite_differences(f, args, k), rtol=1e-3, atol=1e-4, err_msg=f"argument {k}")

"""The reductions' runtime helpers keep float32: an adjoint has its primal's precision (runtime/core.py),
in Python and under numba, and float64 inputs still give float64."""

import numba
import numpy as np
import pytest
import scipy.special
from numba import types
from numba.np.numpy_support import as_dtype

import s2sad
from s2sad.runtime import native
from s2sad.runtime.reductions import (center, cumprod_axis, cumsum_adjoint, cumsum_axis, diff_adjoint, diff_axis,
                                      extremum_adjoint, extremum_adjoint_into, extremum_mask, first_zero, lone_zero,
                                      max_reduce, mean_reduce, min_reduce, norm_grad, norm_op, norm_smooth,
                                      prod_reduce, reduce_count, std_reduce, sum_expand, sum_expand_view, sum_reduce,
                                      trace_adjoint, var_reduce)

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
X = np.random.default_rng(0).standard_normal((3, 4))  # distinct entries: no ties in max and min
X3 = np.random.default_rng(1).standard_normal((2, 3, 4))


# numba wrappers: `keepdims` and `ord` must be constants there, `axis` need not be

@numba.njit
def nb_sum_reduce(x, axis):
    return sum_reduce(x, axis)


@numba.njit
def nb_sum_expand(g, x, axis):
    return sum_expand(g, x, axis)


@numba.njit
def nb_sum_expand_keep(g, x, axis):
    return sum_expand(g, x, axis, True)


@numba.njit
def nb_sum_expand_view(g, x, axis):
    return sum_expand_view(g, x, axis).copy()


@numba.njit
def nb_mean_reduce(x, axis):
    return mean_reduce(x, axis)


@numba.njit
def nb_reduce_count(x, axis):
    return reduce_count(x, axis)


@numba.njit
def nb_prod_reduce(x, axis):
    return prod_reduce(x, axis)


@numba.njit
def nb_max_reduce(x, axis):
    return max_reduce(x, axis)


@numba.njit
def nb_min_reduce(x, axis):
    return min_reduce(x, axis)


@numba.njit
def nb_lone_zero(x, axis):
    return lone_zero(x, axis)


@numba.njit
def nb_extremum_mask(x, out, axis):
    return extremum_mask(x, out, axis)


@numba.njit
def nb_extremum_adjoint(g, x, out, axis):
    return extremum_adjoint(g, x, out, axis)


@numba.njit
def nb_extremum_adjoint_into(target, g, x, out, axis):
    return extremum_adjoint_into(target, g, x, out, axis)


@numba.njit
def nb_center(x, axis):
    return center(x, axis)


@numba.njit
def nb_var_reduce(x, axis, ddof):
    return var_reduce(x, axis, ddof)


@numba.njit
def nb_std_reduce(x, axis, ddof):
    return std_reduce(x, axis, ddof)


@numba.njit
def nb_cumsum_axis(x, axis):
    return cumsum_axis(x, axis)


@numba.njit
def nb_cumsum_adjoint(g, x, axis):
    return cumsum_adjoint(g, x, axis)


@numba.njit
def nb_cumprod_axis(x, axis):
    return cumprod_axis(x, axis)


@numba.njit
def nb_first_zero(x, axis):
    return first_zero(x, axis)


@numba.njit
def nb_diff_axis(x, axis):
    return diff_axis(x, 2, axis)


@numba.njit
def nb_diff_adjoint(g, x, axis):
    return diff_adjoint(g, x, 2, axis)


@numba.njit
def nb_trace_adjoint(g, x, offset):
    return trace_adjoint(g, x, offset)


@numba.njit
def nb_norm_op(x, axis):
    return norm_op(x, None, axis)


@numba.njit
def nb_norm_op_1(x, axis):
    return norm_op(x, 1, axis)


@numba.njit
def nb_norm_op_inf(x, axis):
    return norm_op(x, np.inf, axis)


@numba.njit
def nb_norm_grad(x, norm, axis):
    return norm_grad(x, norm, None, axis)


@numba.njit
def nb_norm_grad_1(x, norm, axis):
    return norm_grad(x, norm, 1, axis)


@numba.njit
def nb_norm_grad_inf(x, norm, axis):
    return norm_grad(x, norm, np.inf, axis)


@numba.njit
def nb_norm_smooth(x, axis):
    return norm_smooth(x, None, axis)


def _norm(ord):
    return lambda x, axis: norm_op(x, ord, axis)


def _norm_grad(ord):
    return lambda x, norm, axis: norm_grad(x, norm, ord, axis)


def _x(axis, zeros=False):
    """The float64 data for `axis`: a 3-D array for (0, 2), whose groups are not runs of memory."""
    x = X3 if axis == (0, 2) else X
    return x * (np.arange(x.size).reshape(x.shape) % 5 != 2) if zeros else x  # zeros: lone in some groups


def _red(axis, fn=np.sum):
    """A reduction of the float64 data for `axis`, as the `g` or `out` of an adjoint."""
    return fn(_x(axis), axis=axis)


# name: (Python helper, numba wrapper, arguments for a float dtype and an axis, axes); each kind of axis
# (None, an int, a tuple) compiles once per dtype, and two ints take different loops
CASES = {
    "sum_reduce": (sum_reduce, nb_sum_reduce, lambda dt, a: (X.astype(dt), a), (None, 0, 1)),
    "sum_expand": (sum_expand, nb_sum_expand, lambda dt, a: (_red(a).astype(dt), _x(a).astype(dt), a),
                   (None, 0, 1, (0, 2))),
    "sum_expand_keep": (lambda g, x, a: sum_expand(g, x, a, True), nb_sum_expand_keep,
                        lambda dt, a: (np.sum(X, a, keepdims=True).astype(dt), X.astype(dt), a), (0,)),
    "sum_expand_scalar_g": (sum_expand, nb_sum_expand, lambda dt, a: (dt.type(1.5), X.astype(dt), a), (None,)),
    "sum_expand_scalar_x": (sum_expand, nb_sum_expand, lambda dt, a: (dt.type(1.5), dt.type(2.0), a), (None,)),
    "sum_expand_view": (lambda g, x, a: sum_expand_view(g, x, a).copy(), nb_sum_expand_view,
                        lambda dt, a: (_red(a).astype(dt), X.astype(dt), a), (None, 1)),
    "sum_expand_view_scalar_g": (lambda g, x, a: sum_expand_view(g, x, a).copy(), nb_sum_expand_view,
                                 lambda dt, a: (dt.type(1.5), X.astype(dt), a), (None,)),
    "mean_reduce": (mean_reduce, nb_mean_reduce, lambda dt, a: (X.astype(dt), a), (None, 0)),
    "reduce_count": (reduce_count, nb_reduce_count, lambda dt, a: (X.astype(dt), a), (None, 1)),
    "reduce_count_scalar": (reduce_count, nb_reduce_count, lambda dt, a: (dt.type(2.0), a), (None,)),
    "prod_reduce": (prod_reduce, nb_prod_reduce, lambda dt, a: (X.astype(dt), a), (1,)),
    "max_reduce": (max_reduce, nb_max_reduce, lambda dt, a: (X.astype(dt), a), (None, 0, 1)),
    "min_reduce": (min_reduce, nb_min_reduce, lambda dt, a: (X.astype(dt), a), (0, 1)),
    "lone_zero": (lone_zero, nb_lone_zero, lambda dt, a: (_x(a, True).astype(dt), a), (None, 0, 1, (0, 2))),
    "lone_zero_scalar": (lone_zero, nb_lone_zero, lambda dt, a: (dt.type(0.0), a), (None,)),
    "extremum_mask": (extremum_mask, nb_extremum_mask,
                      lambda dt, a: (_x(a).astype(dt), _red(a, np.max).astype(dt), a), (None, 0, 1, (0, 2))),
    "extremum_mask_scalar": (extremum_mask, nb_extremum_mask, lambda dt, a: (dt.type(2.0), dt.type(2.0), a), (None,)),
    "extremum_adjoint": (extremum_adjoint, nb_extremum_adjoint,
                         lambda dt, a: (_red(a).astype(dt), _x(a).astype(dt), _red(a, np.min).astype(dt), a),
                         (None, 0, 1, (0, 2))),
    "extremum_adjoint_scalar": (extremum_adjoint, nb_extremum_adjoint,
                                lambda dt, a: (dt.type(1.5), dt.type(2.0), dt.type(2.0), a), (None,)),
    "extremum_adjoint_into": (extremum_adjoint_into, nb_extremum_adjoint_into,
                              lambda dt, a: (np.ones(X.shape, dt), _red(a).astype(dt), X.astype(dt),
                                             _red(a, np.max).astype(dt), a), (None, 0, 1)),
    "center": (center, nb_center, lambda dt, a: (_x(a).astype(dt), a), (None, 0, (0, 2))),
    "center_scalar": (center, nb_center, lambda dt, a: (dt.type(2.0), a), (None,)),
    "var_reduce": (var_reduce, nb_var_reduce, lambda dt, a: (_x(a).astype(dt), a, 1), (None, 0, (0, 2))),
    "var_reduce_scalar": (var_reduce, nb_var_reduce, lambda dt, a: (dt.type(2.0), a, 0), (None,)),
    "std_reduce": (std_reduce, nb_std_reduce, lambda dt, a: (X.astype(dt), a, 0), (None, 1)),
    "cumsum_axis": (cumsum_axis, nb_cumsum_axis, lambda dt, a: (X.astype(dt), a), (0,)),
    "cumsum_adjoint": (cumsum_adjoint, nb_cumsum_adjoint,
                       lambda dt, a: (np.cumsum(X, a).astype(dt), X.astype(dt), a), (None, 0, 1)),
    "cumprod_axis": (cumprod_axis, nb_cumprod_axis, lambda dt, a: (X.astype(dt), a), (1,)),
    "first_zero": (first_zero, nb_first_zero, lambda dt, a: (_x(a, True).astype(dt), a), (None, 0, 1)),
    "diff_axis": (lambda x, a: diff_axis(x, 2, a), nb_diff_axis, lambda dt, a: (X.astype(dt), a), (-1,)),
    "diff_adjoint": (lambda g, x, a: diff_adjoint(g, x, 2, a), nb_diff_adjoint,
                     lambda dt, a: (np.diff(X, 2, a).astype(dt), X.astype(dt), a), (0, -1)),
    "trace_adjoint": (trace_adjoint, nb_trace_adjoint, lambda dt, a: (dt.type(1.5), X.astype(dt), a), (0, 1, -1)),
    "norm_op": (_norm(None), nb_norm_op, lambda dt, a: (X.astype(dt), a), (None, 1)),
    "norm_op_1": (_norm(1), nb_norm_op_1, lambda dt, a: (X.astype(dt), a), (0,)),
    "norm_op_inf": (_norm(np.inf), nb_norm_op_inf, lambda dt, a: (X.astype(dt), a), (1,)),
    "norm_grad": (_norm_grad(None), nb_norm_grad,
                  lambda dt, a: (X.astype(dt), np.linalg.norm(X, axis=a).astype(dt), a), (None, 0, 1)),
    "norm_grad_1": (_norm_grad(1), nb_norm_grad_1,
                    lambda dt, a: (X.astype(dt), np.linalg.norm(X, 1, axis=a).astype(dt), a), (0, 1)),
    "norm_grad_inf": (_norm_grad(np.inf), nb_norm_grad_inf,
                      lambda dt, a: (X.astype(dt), np.linalg.norm(X, np.inf, axis=a).astype(dt), a), (0, 1)),
    "norm_smooth": (lambda x, a: norm_smooth(x, None, a), nb_norm_smooth, lambda dt, a: (X.astype(dt), a), (None, 1)),
}
# every axis form in Python; under numba, whose compiles take seconds each, each helper's first and last
PARAMS = [pytest.param(name, axis, impl, id=f"{name}-{axis}-{impl}") for name, case in CASES.items()
          for impl in ("python", "numba")
          for axis in (case[3] if impl == "python" else list(dict.fromkeys([case[3][0], case[3][-1]])))]


def _numba_dtype(dispatcher, args):
    """The dtype numba gives the result of `dispatcher` for `args` (a float32 scalar boxes as a Python float)."""
    rt = dispatcher.overloads[tuple(numba.typeof(a) for a in args)].signature.return_type
    return as_dtype(rt.dtype if isinstance(rt, types.Array) else rt)


def _python_dtype(r):
    """A result's dtype; np.float32 scalars are float32, Python floats (and np.float64) float64."""
    assert isinstance(r, (np.ndarray, np.float32, float)), type(r)
    return np.result_type(r)


def _run(name, impl, dt, axis):
    py, nb, make, _ = CASES[name]
    args = make(dt, axis)
    if impl == "python":
        r = py(*args)
        return r, _python_dtype(r)
    r = nb(*args)
    return r, _numba_dtype(nb, args)


@pytest.mark.parametrize("name, axis, impl", PARAMS)
def test_float32_in_float32_out(name, axis, impl):
    """Under numba against Python's float64 result: numba's float64 helpers compile in the rest of the suite."""
    r32, dt32 = _run(name, impl, F32, axis)
    r64, dt64 = _run(name, "python", F64, axis)
    assert dt32 == F32, f"{name}: {dt32} from float32"
    assert dt64 == F64, f"{name}: {dt64} from float64"
    np.testing.assert_allclose(r32, r64, rtol=1e-5, atol=1e-6)


# The adjoint of x follows x, not the incoming adjoint g (as JAX gives a cotangent its primal's dtype).
MIXED = {
    "sum_expand": lambda g, x: sum_expand(g, x, 0),
    "sum_expand_scalar": lambda g, x: sum_expand(g[0], x, None),
    "sum_expand_view": lambda g, x: sum_expand_view(g, x, 0),
    "extremum_adjoint": lambda g, x: extremum_adjoint(g, x, np.max(x, axis=0), 0),
    "cumsum_adjoint": lambda g, x: cumsum_adjoint(np.ones(x.shape, g.dtype), x, 1),
    "diff_adjoint": lambda g, x: diff_adjoint(np.ones((3, 3), g.dtype), x, 1, -1),
    "trace_adjoint": lambda g, x: trace_adjoint(g[0], x, 0),
}
NB_MIXED = {
    "sum_expand": numba.njit(lambda g, x: sum_expand(g, x, 0)),
    "sum_expand_scalar": numba.njit(lambda g, x: sum_expand(g[0], x, None)),
    "sum_expand_view": numba.njit(lambda g, x: sum_expand_view(g, x, 0).copy()),
    "extremum_adjoint": numba.njit(lambda g, x: extremum_adjoint(g, x, max_reduce(x, 0), 0)),
    "cumsum_adjoint": numba.njit(lambda g, x: cumsum_adjoint(np.ones(x.shape, g.dtype), x, 1)),
    "diff_adjoint": numba.njit(lambda g, x: diff_adjoint(np.ones((3, 3), g.dtype), x, 1, -1)),
    "trace_adjoint": numba.njit(lambda g, x: trace_adjoint(g[0], x, 0)),
}


@pytest.mark.parametrize("gdt, xdt", [(F64, F32), (F32, F64)])
@pytest.mark.parametrize("name", MIXED)
def test_adjoint_follows_x_not_g(name, gdt, xdt):
    g, x = np.arange(1.0, 5.0).astype(gdt), X.astype(xdt)
    assert _python_dtype(MIXED[name](g, x)) == xdt
    assert np.asarray(NB_MIXED[name](g, x)).dtype == xdt


def test_extremum_adjoint_into_adds_into_a_float32_target_in_place():
    x = X.astype(np.float32)
    target = np.zeros(x.shape, np.float32)
    r = nb_extremum_adjoint_into(target, np.ones(4, np.float32), x, x.max(axis=0), 0)
    assert np.shares_memory(r, target)
    np.testing.assert_array_equal(target, x == x.max(axis=0))


@pytest.mark.parametrize("dt", [F32, F64])
def test_max_min_take_llvm_maximum_and_keep_nan(dt):
    x = np.array([[1.0, np.nan, 3.0], [-0.0, 0.0, -2.0]], dt)
    np.testing.assert_array_equal(nb_max_reduce(x, 1), np.max(x, axis=1))
    np.testing.assert_array_equal(nb_min_reduce(x, 0), np.min(x, axis=0))
    assert nb_max_reduce(x, 0).dtype == dt
    loop = native.compiled(f"s2sad_max_block_c_{dt}")  # the max along an axis: a C function (runtime.native)
    assert f"llvm.maximum.f{dt.itemsize * 8}" in loop.inspect_llvm()


# end to end, Python backend: float32 gradients that match finite differences of the float64 function

FUNCTIONS = {
    "sum_max_sq": lambda x: np.sum(np.max(x, axis=0) ** 2),
    "mean_cumsum": lambda x: np.mean(np.cumsum(x)),
    "norm": lambda x: np.linalg.norm(x),
    "norm_rows": lambda x: np.sum(np.linalg.norm(x, axis=1)),
    "std": lambda x: np.std(x),
    "var_rows": lambda x: np.sum(np.var(x, axis=1, ddof=1)),
    "prod_rows": lambda x: np.sum(np.prod(x, axis=1)),
    "cumprod": lambda x: np.sum(np.cumprod(x, axis=1)),
    "diff": lambda x: np.sum(np.diff(x, axis=0) ** 2),
    "min_cubed": lambda x: np.sum(np.min(x, axis=1) ** 3),
    "mean_keepdims": lambda x: np.sum(x * np.mean(x, axis=0, keepdims=True)),
    "logsumexp": lambda x: np.sum(scipy.special.logsumexp(x, axis=1)),
    "logsumexp_by_hand": lambda x: np.sum(np.log(np.sum(np.exp(x - np.max(x, axis=1, keepdims=True)), axis=1))),
}


def _finite_differences(f, x, eps=1e-6):
    out = np.empty_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


@pytest.mark.parametrize("name", FUNCTIONS)
def test_grad_of_float32_is_float32(name):
    f = FUNCTIONS[name]
    g = s2sad.grad(f, backend="python")(X.astype(np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, _finite_differences(f, X), rtol=1e-3, atol=1e-4)

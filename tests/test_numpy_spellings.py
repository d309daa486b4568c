"""NumPy's other spellings of what s2sad differentiates: a layout order, ufunc methods, reductions' `initial` and
`where`, np.clip's NumPy 2 keywords and one-sided bounds, np.pad's modes. Each against central differences."""

import math

import numpy as np
import pytest
import scipy.special

import s2sad
from helpers import assert_close, fd_directional, fd_grad

X = np.array([0.31, -0.72, 1.13, 0.46, -0.27, 0.94])
WEIGHTS = np.arange(1.0, 7.0)
Y = np.sin(np.arange(1.0, 13.0))


def value_and_grad_match(f, x, backend):
    value, grad = s2sad.value_and_grad(f, backend=backend)(x)
    assert_close(value, f(x), rtol=1e-12)
    assert_close(grad, fd_grad(f, (x,), 0))


def derivatives_match(f, x, backend):
    """value_and_grad against central differences, and jvp along one direction."""
    value_and_grad_match(f, x, backend)
    direction = np.cos(np.arange(x.size)).reshape(x.shape)
    value, tangent = s2sad.jvp(f, (x,), (direction,), backend=backend)
    assert_close(tangent, fd_directional(f, (x,), (direction,)))


def fortran_reads(x):
    a = x.reshape(2, 3)
    flat = np.ravel(a, order="F") + a.flatten("F") * 2.0 + a.ravel("C")
    b = np.reshape(x, (3, 2), order="F")
    c = a.reshape(3, 2, order="F")
    return np.sum(flat * WEIGHTS) + np.sum(b * c * WEIGHTS.reshape(3, 2))


def test_items_read_in_fortran_order(backend):
    """order='F' reads the first index fastest: the gradient ignored it (the primal kept it), a silent error."""
    value_and_grad_match(fortran_reads, X, backend)


def layout_dependent(x):
    return np.sum(np.ravel(x, order="K"))


def test_a_layout_dependent_order_is_refused_where_written():
    with pytest.raises(s2sad.UnsupportedError, match="order=\"K\" is not supported") as info:
        s2sad.grad(layout_dependent, backend="python")(X)
    assert "hint: write order='C'" in str(info.value)


def ufunc_methods(x):
    a = x.reshape(2, 3)
    return (np.sum(np.add.reduce(a ** 2)) + np.multiply.reduce(1.0 + 0.1 * x) + np.maximum.reduce(x)
            + np.sum(np.minimum.reduce(a, axis=1)) + np.logaddexp.reduce(x) + np.sum(np.logaddexp.reduce(a, axis=1))
            + np.sum(np.add.accumulate(a, axis=1) ** 2) + np.sum(np.multiply.accumulate(1.0 + 0.1 * x)))


def test_ufunc_reduce_and_accumulate_are_numpy_reductions(backend):
    value_and_grad_match(ufunc_methods, X, backend)


def reductions_with_initial_and_where(x):
    positive = x > 0
    return (np.max(x, initial=0.5) + np.min(x ** 2, initial=0.05) + x.max(where=positive, initial=-1.0)
            + np.sum(x ** 2, where=positive) + np.sum(x, initial=2.0) + np.prod(1.0 + x, where=positive)
            + np.mean(x ** 3, where=positive))


def test_reductions_take_initial_and_where(backend):
    """initial joins the result; items `where` leaves out count as the reduction's identity."""
    value_and_grad_match(reductions_with_initial_and_where, X, backend)


def masked_std(x):
    return np.std(x, where=x > 0)


def test_a_keyword_the_runtime_does_not_take_is_refused_where_written():
    """It raised a bare TypeError from inside the generated code."""
    with pytest.raises(s2sad.UnsupportedError, match=r"np\.std\(\) with `where=` is not supported") as info:
        s2sad.grad(masked_std, backend="python")(X)
    assert "np.std(x[mask])" in str(info.value)
    value_and_grad_match(lambda x: np.std(x[x > 0]), X, "python")  # the hint, followed


def clipped(x):
    return np.sum(x.clip(min=-0.5) ** 2 + x.clip(max=0.5) ** 3 + x.clip(0.0, None) * WEIGHTS + np.clip(x, None, 0.2)
                  + np.clip(x, max=0.8, min=-0.6))


def test_clip_with_one_bound_and_numpy_2_names():
    value_and_grad_match(clipped, X, "python")


def padded(mode, width):
    def f(x):
        y = np.pad(x, width, mode=mode)
        return np.sum(y * np.arange(1.0, y.size + 1.0).reshape(y.shape)) + np.sum(y ** 3)
    return f


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric"])
def test_pad_modes_read_the_items_they_repeat(mode):
    """Widths as one int, a (before, after) pair wider than the axis, and pairs per axis; one-item axes."""
    matrix = X.reshape(2, 3)
    for x, width in ((X, 2), (X, (1, 7)), (matrix, ((1, 0), (2, 3))), (np.array([0.7]), 2)):
        value_and_grad_match(padded(mode, width), x, "python")


def test_pad_modes_compile():
    value_and_grad_match(padded("reflect", ((1, 0), (2, 1))), X.reshape(2, 3), "numba")
    value_and_grad_match(padded("edge", 2), X, "numba")


def padded_in_an_unknown_mode(x):
    return np.sum(np.pad(x, 1, mode="median"))


def test_other_pad_modes_are_refused_where_written():
    with pytest.raises(s2sad.UnsupportedError, match="np.pad in mode 'median' is not supported"):
        s2sad.grad(padded_in_an_unknown_mode, backend="python")(X)


def upper_factor(x):
    a = np.outer(x[:3], x[:3]) + 3.0 * np.eye(3) + 0.5 * np.triu(np.ones((3, 3)), 1)  # not symmetric
    return np.sum(np.linalg.cholesky(a, upper=True) * WEIGHTS[:3]) + np.sum(np.linalg.cholesky(a, upper=False))


def test_cholesky_upper_reads_the_upper_triangle():
    """upper=True went to NumPy and the rule's derivative, of the lower factor, ignored it: silently wrong."""
    value_and_grad_match(upper_factor, X, "python")


def traces_of_stacks(y):
    a = y.reshape(2, 3, 2)
    return (np.sum(np.trace(a) ** 2) + np.sum(np.trace(a, 1, axis1=1, axis2=2) * WEIGHTS[:2])
            + np.sum(a.trace(-1, 2, 0) ** 3) + np.trace(a[:, :, 0].T, offset=1) + np.sum(np.trace(a, 5) + 1.0))


def test_traces_of_any_rank_along_any_two_axes(backend):
    """np.trace of a 3-D array keeps the axes after the first two: its adjoint raised inside the runtime, and
    axis1=/axis2= were refused."""
    derivatives_match(traces_of_stacks, Y, backend)


def flattened_joins(x):
    a = x.reshape(2, 3)
    joined = np.concatenate([a.T, x[:2], [0.5]], axis=None)
    return np.sum(joined ** 2 * np.arange(1.0, 10.0)) + np.sum(np.concatenate((a, a), None)[3:] ** 3)


def numbers_of_a_dtype(x):
    counts = np.arange(6)
    return (np.sum(x * x.dtype.type(2)) + x.dtype.type(x[0] ** 2) * 3.0 + counts.dtype.type(x[1] * 10.0)
            + np.sum(x * counts.dtype.type(1.5)))


def ellipsis_then_newaxis(x):
    y = x.reshape(2, 3)
    z = x.reshape(1, 2, 3)
    return (np.sum(y[..., None] * y[:, None, :]) + np.sum(z[0, ..., None, 1:] ** 2) + np.sum(y[None, ...] * z)
            + np.sum(x[..., None] ** 3))


@pytest.mark.parametrize("f", [flattened_joins, numbers_of_a_dtype, ellipsis_then_newaxis])
def test_spellings_real_code_uses(f, backend):
    """np.concatenate(..., axis=None) flattens first (a TypeError inside lowering); x.dtype.type(v) is a number of
    x's dtype, truncated by an integer one (it was refused); `...` before `None` stands for the axes left."""
    derivatives_match(f, X, backend)


def sorted_along_axes(y):
    a = y.reshape(3, 4)
    return (np.sum(np.sort(a, axis=1) * np.arange(4.0)) + np.sum(np.sort(a, axis=0) * np.arange(3.0)[:, None])
            + np.sum(np.sort(a) ** 3) + np.sum(np.sort(a, axis=None) * np.arange(12.0)))


def covariances(y):
    a = y.reshape(3, 4)
    return (np.sum(np.cov(a) ** 2) + np.sum(np.cov(a, rowvar=False) * np.arange(16.0).reshape(4, 4)) + np.cov(a[0])
            + np.sum(np.cov(a[0], a[1], bias=True) ** 2) + np.sum(np.cov(a, ddof=0) ** 3)
            + np.sum(np.cov(a.T, a[:2].T, rowvar=False) ** 2))


def correlations(y):
    a = y.reshape(3, 4)
    return (np.sum(np.corrcoef(a) * np.arange(9.0).reshape(3, 3)) + np.sum(np.corrcoef(a[0], a[2]) ** 2)
            + np.sum(np.corrcoef(a, rowvar=False)[0] ** 3))


def selections(y):
    a = y.reshape(3, 4)
    return (np.sum(np.select([y > 0.5, y < -0.5], [y ** 2, np.sin(y)], default=0.1 * y))
            + np.sum(np.select([a > 0], [a ** 3]) * 2.0))


def matrix_norms(y):
    a = y.reshape(3, 4)
    return (np.linalg.norm(a, ord=1) + np.linalg.norm(a, np.inf) + np.linalg.norm(a, ord=-np.inf)
            + np.linalg.norm(a, -1) + np.sum(np.linalg.norm(a, np.inf, keepdims=True) * 2.0) + np.linalg.norm(a[0], 1)
            + np.linalg.norm(a[1], ord=np.inf))


def softmaxes(y):
    a = y.reshape(3, 4)
    return (np.sum(scipy.special.softmax(a, axis=1) * np.arange(12.0).reshape(3, 4))
            + np.sum(scipy.special.softmax(y) ** 2) + np.sum(scipy.special.log_softmax(a, axis=0)[0]))


def cleaned_and_summarized(y):
    marks = np.where(np.arange(12) % 4 == 0, np.nan, np.where(np.arange(12) % 4 == 1, np.inf, 1.0))
    marked = y * marks  # nan, inf of the sign of y, or y
    return (np.sum(np.nan_to_num(y * np.where(marks == 1.0, 1.0, np.nan)) * y)
            + np.sum(np.nan_to_num(marked, nan=-1.0, posinf=2.0, neginf=-3.0) ** 2)
            + math.fsum(y * y) + np.sum(np.quantile(y, [0.1, 0.5, 0.9]) * np.array([1.0, 2.0, 3.0]))
            + np.sum(np.percentile(y, (25, 75)) ** 2))


def _row_norm(r, p):
    return np.sum(np.abs(r) ** p) ** (1.0 / p)


def applied_along_axes(y):
    a = y.reshape(3, 4)
    return (np.sum(np.apply_along_axis(lambda r: np.sum(r ** 2), 1, a) * np.arange(3.0))
            + np.sum(np.apply_along_axis(lambda c: c / np.sum(c ** 2), 0, a) ** 2 * np.arange(12.0).reshape(3, 4))
            + np.sum(np.apply_along_axis(_row_norm, -1, a, 3.0)) + np.sum(np.apply_along_axis(np.sin, 0, a)[1]))


def spectra(y):
    """np.linalg.eigh's eigenvalues and eigenvectors, and eigvalsh, of symmetric matrices."""
    a = y[:3]
    m = np.outer(a, a) + np.diag(np.arange(1.0, 4.0))
    w, v = np.linalg.eigh(m)
    return (np.sum(w ** 2) + np.sum((v[:, -1] * np.arange(1.0, 4.0)) ** 2) + np.linalg.eigh(m)[0][0]
            + np.sum(np.linalg.eigvalsh(m + np.diag(y[3:6])) ** 3))


def least_squares_fits(y):
    """np.linalg.lstsq as polynomial fits call it: the solution indexed, unpacked with its residuals, or starred."""
    t = np.linspace(0.0, 1.0, 12)
    line = np.linalg.lstsq(np.vstack([t, np.ones(len(t))]).T, y, rcond=None)[0]
    coef, res, rank, sv = np.linalg.lstsq(np.vstack([t ** 2, t, np.ones(12)]).T, y, rcond=None)
    both, *_ = np.linalg.lstsq(np.vstack([t, np.ones(12)]).T, np.stack([y, y ** 2], axis=1), rcond=None)
    return line[0] ** 2 + line[1] + np.sum(coef ** 2) + res[0] + np.sum(both ** 2)


@pytest.mark.parametrize("f", [sorted_along_axes, covariances, correlations, selections, matrix_norms, softmaxes,
                               cleaned_and_summarized, applied_along_axes, spectra, least_squares_fits])
def test_numpy_functions_written_out(f, backend):
    """np.sort along an axis of a matrix, np.cov, np.corrcoef and np.select, written with functions that have
    rules; np.linalg.norm of a matrix with ord 1, -1, inf or -inf, the largest or smallest column or row sum;
    scipy.special's softmax and log_softmax, np.nan_to_num, math.fsum, np.quantile/np.percentile at several q;
    np.apply_along_axis of a matrix's rows or columns; np.linalg.eigh's pair and eigvalsh; np.linalg.lstsq."""
    derivatives_match(f, Y, backend)


def weighted_covariance(y):
    return np.sum(np.cov(y.reshape(3, 4), aweights=WEIGHTS[:4]))


def sorted_cube(y):
    return np.sum(np.sort(y.reshape(2, 3, 2)) * y.reshape(2, 3, 2))


@pytest.mark.parametrize("f, message", [(weighted_covariance, r"np\.cov with fweights=, aweights= or dtype="),
                                        (sorted_cube, r"np\.sort of an array of more than two axes")])
def test_what_a_written_out_function_leaves_out_is_refused_at_the_call(f, message):
    """It raised a NotImplementedError, with no line, when the generated code ran."""
    with pytest.raises(s2sad.UnsupportedError, match=message + " is not supported") as info:
        s2sad.grad(f, backend="python")(Y)
    assert "test_numpy_spellings.py" in str(info.value) and "@s2sad.custom_vjp" in str(info.value)


def stored_in_a_run_time_dtype(x, k):
    out = np.empty(3, dtype=k.dtype)
    like = np.zeros_like(k)
    for i in range(3):
        out[i] = x[i] * 2.6
        like[i] = x[i + 1] * 3.3
    like[1:] = like[1:] + x[:2] * 1.7
    return np.sum(out * x[:3]) + np.sum(like * x[1:4])


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_a_store_into_an_array_of_a_run_time_dtype_is_truncated_by_an_integer_one(dtype, backend):
    """np.empty(n, dtype=k.dtype) and np.zeros_like(k) hold ints where k does: the values stored into them then
    carry no derivative (they did: silently wrong)."""
    x, k = np.array([0.3, 1.7, 2.2, 0.9]), np.arange(3).astype(dtype)
    derivatives_match(lambda x: stored_in_a_run_time_dtype(x, k), x, backend)
    hessian = s2sad.hessian(stored_in_a_run_time_dtype, backend=backend)(x, k)
    assert_close(hessian[1], fd_grad(lambda x: s2sad.grad(stored_in_a_run_time_dtype, backend=backend)(x, k)[1],
                                     (x,), 0))


def positive_items(x):
    idx = np.where(x > 0)[0]
    y = x.copy()
    y[np.nonzero(x < 0.5)[0]] *= 3.0
    return np.sum(x[idx] ** 2) + 0.1 * len(idx) + np.sum(y ** 2) + x[idx[-1]]


def test_where_of_a_1d_condition_gives_its_indices(backend):
    """np.where(c)[0] / np.nonzero(c)[0] of a 1-D c: an index array, for reads, writes and len (it was refused)."""
    value_and_grad_match(positive_items, X, backend)


def array_methods(x):
    a = x.reshape(2, 3)
    return (np.sum(a.swapaxes(0, 1) * WEIGHTS.reshape(3, 2)) + np.sum(x.round(1) * x) + np.sum(x.repeat(2) ** 2)
            + np.sum(a.take(np.array([0, 2]), axis=1) ** 2) + np.sum(x[x.argsort()] * WEIGHTS)
            + float((x > -5.0).all()) + float(x.any()))


def test_more_array_methods(backend):
    """.swapaxes, .round, .repeat, .take, .argsort, .all and .any, as the NumPy functions (they were refused, and
    a method of a function without a rule lost its array)."""
    value_and_grad_match(array_methods, X, backend)


def einsums_of_many_operands(x):
    """Quadratic forms and chained products written as one np.einsum, as real code writes them."""
    a = x.reshape(2, 3)
    m = np.outer(x[:3], x[3:]) + np.eye(3)
    stack = np.stack([m, m.T * 0.5])
    return (np.einsum("i,ij,j->", x[:3], m, x[3:], optimize=True) + np.sum(np.einsum("ij,jk,kl->il", a, m, m.T) ** 2)
            + np.sum(np.einsum("ij,jk,kl", a, m, a.T)) + np.sum(np.einsum("bij,jk,k->bi", stack, m, x[:3]) ** 2)
            + np.sum(np.einsum("...ij,jk,k->...i", stack, m, x[3:])) + np.einsum("ii,i,i->", m, x[:3], x[3:])
            + np.sum(np.einsum("ij,jk,kl,i->l", a, m, m, x[:2])))


def test_einsum_of_three_or_more_operands_contracts_a_pair_at_a_time(backend):
    derivatives_match(einsums_of_many_operands, X, backend)


def test_einsum_subscripts_that_name_other_operands_than_given_are_refused_where_written():
    def f(x):
        return np.einsum("i,i,i->", x, x)
    with pytest.raises(s2sad.UnsupportedError, match="subscripts name 3 operands; it is given 2"):
        s2sad.grad(f)(X)


def _huber(r, delta=1.0):
    if abs(r) <= delta:
        return 0.5 * r * r
    return delta * (abs(r) - 0.5 * delta)


_vectorized_huber = np.vectorize(_huber)


@np.vectorize
def _softplus(r):
    return math.log1p(math.exp(r)) if r < 30.0 else r


def vectorized_by_numpy(y):
    return (np.sum(_vectorized_huber(y * 3.0)) + np.sum(_softplus(y) * y)
            + np.sum(np.vectorize(_huber, otypes=[float])(y.reshape(3, 4), 0.5) * np.arange(4.0)))


def test_np_vectorize_runs_its_function_item_by_item(backend):
    """np.vectorize(f), as a decorator, a global or called in place: f inlined on each item (it was refused)."""
    derivatives_match(vectorized_by_numpy, Y, backend)

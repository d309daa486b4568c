"""Helpers that write into the caller's arrays, and functions that write into their own arguments."""

import numpy as np
import pytest

import s2sad
import side_effect_functions as se
from helpers import assert_close, fd_grad

X = np.array([0.4, -0.2, 0.3, 0.9])


def test_kernels_writing_into_the_callers_arrays(backend):
    value, (ga, gs) = s2sad.value_and_grad(se.through_kernels, (0, 1), backend=backend)(X, 1.5)
    assert_close(value, se.through_kernels(X, 1.5), rtol=1e-12)
    assert_close(ga, fd_grad(se.through_kernels, (X, 1.5), 0))
    assert_close(gs, fd_grad(se.through_kernels, (X, 1.5), 1))


@pytest.mark.parametrize("fn", [se.sets_first, se.smooths_its_argument])
def test_writes_into_an_argument_differentiate_from_its_values_on_entry(fn, backend):
    args = (X.copy(), 1.5)[:fn.__code__.co_argcount]
    kept = args[0].copy()
    g = s2sad.grad(fn, backend=backend)(*args)
    assert np.array_equal(args[0], kept)  # grad leaves the caller's array alone
    assert_close(g, fd_grad(lambda x, *rest: fn(x.copy(), *rest), args, 0))
    tangent = s2sad.jvp(fn, args, (np.ones(4),) + (0.0,) * (len(args) - 1), backend=backend)[1]
    assert np.array_equal(args[0], kept)
    assert_close(tangent, np.sum(g), rtol=1e-9)


def test_differentiate_called_plainly_writes_into_the_callers_array_as_numpy_does(backend):
    f = s2sad.differentiate(se.smooths_its_argument, backend=backend)
    mine, theirs = X.copy(), X.copy()
    assert f(mine, 1.5) == pytest.approx(se.smooths_its_argument(theirs, 1.5), rel=1e-12)
    assert_close(mine, theirs, rtol=1e-14)
    assert not np.array_equal(mine, X)


def test_a_global_objects_method(backend):
    assert s2sad.grad(se.calls_method, backend=backend)(1.5) == pytest.approx(2.0, rel=1e-12)


def test_the_copy_an_argument_written_into_is_visible_in_the_source():
    assert "x2 = np.copy(x)" in s2sad.source(se.sets_first)


def test_a_helper_writing_into_the_argument_it_is_handed(backend):
    A = np.random.default_rng(1).random((5, 3)) + np.eye(5, 3)
    kept = A.copy()
    g = s2sad.grad(se.gram_schmidt_loss, backend=backend)(A)
    assert np.array_equal(A, kept)
    assert_close(g, fd_grad(lambda a: se.gram_schmidt_loss(a.copy()), (A,), 0))


@pytest.mark.parametrize("fn, callee, line", [(se.puts_in, "np.put", "np.put(y, [0, 2], x[:2] * 3.0)"),
                                              (se.puts_into_a_view, "np.putmask", "np.putmask(tail, tail < 1.0, x[1:])")])
def test_a_library_call_made_for_its_effect_on_differentiated_arrays_is_refused_at_its_line(fn, callee, line):
    # Kept as written, the call's writes are invisible to differentiation: the gradient would be wrong
    # (for puts_in, [0.9, 0, 2.1] where finite differences give [1.8, 3.3, 2.1]).
    with pytest.raises(s2sad.UnsupportedError) as raised:
        s2sad.grad(fn, backend="python")(X[:3])
    message = str(raised.value)
    assert f"`{callee}` is called for its effect" in message and line in message
    assert "side_effect_functions.py" in message and "as an assignment (`a[idx] = v`" in message


@pytest.mark.parametrize("fn", [se.puts_constants, se.puts_into_scratch])
def test_a_library_call_made_for_its_effect_still_runs_where_no_derivative_passes_through_it(fn):
    x = X[:3]  # the python backend: numba has no np.put
    assert_close(s2sad.grad(fn, backend="python")(x), fd_grad(fn, (x,), 0))


@pytest.mark.parametrize("fn", [se.copies_in, se.copies_across_rows, se.copies_where, se.fills_the_diagonal,
                                se.regularizes_a_kernel, se.fills_a_tall_diagonal, se.scatters,
                                se.scatters_rows_and_subtracts, se.scatters_a_slice, se.scatters_through_a_view])
def test_numpy_writes_copyto_and_add_at_differentiate(fn, backend):
    x = X[:3]
    value, g = s2sad.value_and_grad(fn, backend=backend)(x)
    assert value == pytest.approx(fn(x), rel=1e-12)
    assert_close(g, fd_grad(fn, (x,), 0))
    tangent = s2sad.jvp(fn, (x,), (np.ones(3),), backend=backend)[1]
    assert tangent == pytest.approx(np.sum(g), rel=1e-9)


def test_copyto_into_a_view_of_another_array_is_refused_as_the_assignment_is():
    with pytest.raises(s2sad.UnsupportedError) as raised:
        s2sad.grad(se.copies_into_a_view, backend="python")(X[:3])
    assert "np.copyto(tail, x[1:] * x[0])" in str(raised.value) and "side_effect_functions.py" in str(raised.value)


def test_fill_diagonal_with_wrap_is_refused_at_its_argument():
    def wraps(x):
        A = np.ones((7, 3)) * x
        np.fill_diagonal(A, 0.0, wrap=True)
        return np.sum(A)

    with pytest.raises(s2sad.UnsupportedError, match="wrap=True is not supported"):
        s2sad.grad(wraps, backend="python")(X[:3])

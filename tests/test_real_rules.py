"""Calls real code makes (pyscf's capi_example, meshoid) that had no rule or crashed: np.copysign, x.diagonal(),
and the index arrays of np.diag_indices / np.diag_indices_from, each against finite differences."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_directional, fd_grad

X = np.array([0.3, -1.2, 0.7])
POINTS = np.array([[0.0, 0.1, 0.2], [1.1, -0.3, 0.4], [0.2, 1.3, -0.5], [-0.6, 0.4, 1.2]])


def check_both_modes(f, x, backend):
    assert_close(s2sad.grad(f, backend=backend)(x), fd_grad(f, (x,), 0))
    t = np.linspace(-1.0, 1.0, x.size).reshape(x.shape)
    assert_close(s2sad.jvp(f, (x,), (t,), backend=backend)[1], fd_directional(f, (x,), (t,)))


def signed_square(x):
    return np.sum(np.copysign(x * x, x - 0.1) * x) + np.copysign(x[0], -2.0)


def test_copysign(backend):
    check_both_modes(signed_square, X, backend)


def coulomb(x):  # pyscf's capi_example: pairwise distances with the zero diagonal replaced before 1/r
    n = x.shape[0]
    r = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2))
    r[np.diag_indices(n)] = 1e-60
    return np.sum(np.triu(1.0 / r, 1))


def diagonal_method(x):
    rr = np.dot(x, x.T)
    rd = rr.diagonal()
    return np.sum(np.sqrt(rd[:, None] + rd[None, :] - 2.0 * rr + 1.0)) + rr.diagonal(1).sum() + rr.trace()


def shifted_diagonal(x):
    r = np.outer(x, x)
    r[np.diag_indices_from(r)] += 0.5
    return np.sum(r**2)


def diagonal_read(x):
    r = np.outer(x, x)
    d = np.diag_indices_from(r)  # through a name, as np.where's positions can be
    return np.sum(r[d] ** 3) + np.sum(r[np.diag_indices(3)] * x)


def diagonal_of_a_cube(x):
    c = x[:, None, None] * x[None, :, None] * x[None, None, :]
    c[np.diag_indices(x.shape[0], 3)] *= x
    return np.sum(np.sin(c))


CASES = [(coulomb, POINTS), (diagonal_method, POINTS), (shifted_diagonal, X), (diagonal_read, X),
         (diagonal_of_a_cube, X)]


@pytest.mark.parametrize("f, x", CASES, ids=[f.__name__ for f, _ in CASES])
def test_diagonal_positions(f, x, backend):
    check_both_modes(f, x, backend)


def lower_triangle(x):  # np.tril_indices_from gives a tuple of index arrays, indexed with as NumPy does
    r = np.outer(x, x)
    r[np.tril_indices_from(r)] += x[0]
    r[np.tril_indices_from(r, -1)] *= 2.0
    return np.sum(r**2) + np.sum(r[np.tril_indices_from(r)] ** 3)


def test_a_tuple_of_index_arrays(backend):
    check_both_modes(lower_triangle, X, backend)


def unpacked(x):
    r = np.outer(x, x)
    rows, cols = np.diag_indices_from(r)
    return np.sum(r[rows, cols] ** 3)


def rows_alone(x):
    r = np.outer(x, x)
    rows, cols = np.diag_indices_from(r)
    return np.sum(r[rows])


def test_unpacked_diagonal_indices_index_together(backend):
    check_both_modes(unpacked, X, backend)


def test_an_unpacked_index_array_used_alone_is_refused_at_the_line():
    with pytest.raises(s2sad.UnsupportedError, match=r"test_real_rules.py:\d+:\d+: `rows` is one of the index "
                                                     r"arrays `rows, cols`(.|\n)*hint: write `x\[rows, cols\]`"):
        s2sad.grad(rows_alone, backend="python")(X)


ROWS, COLS = np.array([0, 1, 0]), np.array([2, 0, 2])  # the pair (0, 2) twice


def writes_a_repeated_pair(x):
    y = np.zeros((2, 3))
    y[ROWS, COLS] = 2.0 * x  # NumPy keeps the last write of (0, 2)
    return np.sum(y ** 2)


def reads_a_repeated_pair(x):
    y = np.outer(x[:2], x)
    return np.sum(np.sin(y[ROWS, COLS]))


def reads_an_int_and_an_index_array(x, i):
    y = np.outer(x, x)
    return np.sum(np.sin(y[i, COLS] * y[1:, 0].sum()))


def writes_at_int_positions(x, i, j):
    y = np.outer(x, x)
    y[i, j] = 3.0 * x[0]  # int arguments: one position
    return np.sum(np.sin(y[i, j] * y))


def test_two_index_arrays_that_repeat_a_position_add_reads_and_keep_the_last_write(backend):
    x = np.array([0.7, -1.2, 1.4])
    for f, args in ((writes_a_repeated_pair, (x,)), (reads_a_repeated_pair, (x,)),
                    (reads_an_int_and_an_index_array, (x, 1)), (writes_at_int_positions, (x, 1, 2))):
        assert_close(s2sad.grad(f, backend=backend)(*args), fd_grad(f, args, 0))


def reads_columns_at_repeated_indices(x):
    y = np.outer(x, x)
    return np.sum(np.sin(y[:, COLS]))


def test_repeated_columns_read_among_slices_on_the_python_backend():
    x = np.array([0.7, -1.2, 1.4])
    assert_close(s2sad.grad(reads_columns_at_repeated_indices, backend="python")(x),
                 fd_grad(reads_columns_at_repeated_indices, (x,), 0))


def spread_of_equal_items(x, c):
    h = np.zeros(4) + np.arctan(c)  # four equal items: their spread is 0 whatever c is
    return np.std(np.hypot(1.0, h)) + np.std(x * c, axis=0).sum()


def test_the_derivative_of_a_spread_of_equal_items_is_zero_not_nan(backend):
    x = np.array([[1.0, 2.0], [1.0, 3.0]])  # the first column's items are equal too
    for i in (0, 1):
        assert_close(s2sad.grad(spread_of_equal_items, argnums=i, backend=backend)(x, 0.3),
                     fd_grad(spread_of_equal_items, (x, 0.3), i))
    _, tangent = s2sad.jvp(lambda c: spread_of_equal_items(x, c), (0.3,), (1.0,), backend=backend)
    assert_close(tangent, fd_grad(spread_of_equal_items, (x, 0.3), 1))

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
    return np.sum(r[rows, cols])


def test_unpacking_diagonal_indices_is_refused_at_the_line():
    with pytest.raises(s2sad.UnsupportedError, match=r"test_real_rules.py:\d+:\d+: .*diag_indices"):
        s2sad.grad(unpacked, backend="python")(X)

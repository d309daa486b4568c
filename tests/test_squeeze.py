"""`np.squeeze(x)` without `axis` on both backends: the axes it removes are decided when the code is
generated, from the arguments' shapes (the code is specialized to them) and the operations since."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_directional, fd_grad

RNG = np.random.default_rng(7)
W = RNG.normal(size=(4, 3))
G = np.ones((3, 1))


def squeezed_square(x):
    z = np.squeeze(x)
    return np.sum(z**2 * np.arange(1.0, z.shape[0] + 1.0)) if z.ndim else z**2 * 3.0


def logistic_column(w):  # a column of weights, a score per row
    scores = np.squeeze(W @ w)
    return np.sum(np.log1p(np.exp(-scores)) + 0.1 * scores**2)


def expanded_then_squeezed(x):
    y = x[:, None] * 2.0
    return np.sum(np.sin(np.squeeze(y)) * y[:, 0])


def method_in_a_loop(x):
    total = 0.0
    for i in range(3):
        total += np.sum(x.squeeze() ** 2 * (i + 1.0))
    return total


def transposed_cube(x):
    return np.sum(np.cos(np.squeeze(x.T)) * np.arange(x.size))


def plain_global(x):
    return np.sum(np.squeeze(G) * x)


def made_at_run_time(x, n):
    return np.sum(np.squeeze(np.zeros((n, 1)) + x) ** 2)


CASES = [(squeezed_square, (1, 3)), (squeezed_square, (3, 1)), (squeezed_square, (1, 1)), (squeezed_square, (3,)),
         (logistic_column, (3, 1)), (expanded_then_squeezed, (3,)), (method_in_a_loop, (1, 4)),
         (transposed_cube, (1, 4, 1))]


@pytest.mark.parametrize("f, shape", CASES, ids=[f"{f.__name__}{s}" for f, s in CASES])
def test_squeeze_without_axis(f, shape, backend):
    x = RNG.normal(size=shape)
    assert_close(s2sad.grad(f, backend=backend)(x), fd_grad(f, (x,), 0))
    t = np.linspace(-1.0, 1.0, x.size).reshape(shape)
    assert_close(s2sad.jvp(f, (x,), (t,), backend=backend)[1], fd_directional(f, (x,), (t,)))


def test_one_function_for_row_and_column(backend):
    """Shapes with their length-one axes in other places get their own code: a row, then a column."""
    grad = s2sad.grad(squeezed_square, backend=backend)
    for shape in ((1, 3), (3, 1), (1, 3)):
        x = RNG.normal(size=shape)
        assert_close(grad(x), fd_grad(squeezed_square, (x,), 0))


def test_plain_call_keeps_numpy_result():
    x = RNG.normal(size=(3, 1))
    assert s2sad.differentiate(logistic_column)(x) == pytest.approx(logistic_column(x), rel=1e-12)


def test_code_made_without_arguments_squeezes_at_run_time():
    assert "squeeze_any(matmul, None)" in s2sad.source(logistic_column)
    x = RNG.normal(size=(3, 1))
    hessian = s2sad.hessian(logistic_column, backend="python")(x)
    assert_close(hessian.reshape(3, 3), fd_jacobian_of_grad(x))


def fd_jacobian_of_grad(x, h=1e-5):
    grad = s2sad.grad(logistic_column, backend="python")
    columns = []
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = h
        columns.append((grad(x + step.reshape(x.shape)) - grad(x - step.reshape(x.shape))).ravel() / (2 * h))
    return np.array(columns).T


def test_global_reshaped_between_calls(backend):
    global G
    grad = s2sad.grad(plain_global, backend=backend)
    assert_close(grad(np.ones(3)), np.ones(3))
    G = np.ones((1, 3))  # squeezed to the same rank from another axis: the code squeezes axis 1
    try:
        with pytest.raises(TypeError, match="`G`, read by `plain_global`.*has shape \\(1, 3\\) now"):
            grad(np.ones(3))
    finally:
        G = np.ones((3, 1))


def test_unknown_shape_under_numba_asks_for_axis():
    with pytest.raises(s2sad.UnsupportedError, match=r"test_squeeze.py:\d+.*give `axis`"):
        s2sad.grad(made_at_run_time, backend="numba")(np.ones(1), 3)
    x = np.array([0.5])
    assert_close(s2sad.grad(made_at_run_time, backend="python")(x, 3), fd_grad(made_at_run_time, (x, 3), 0))

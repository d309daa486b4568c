"""vmap: generated batch loops (serial and numba prange), per-example gradients, composition."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from vmap_functions import batch_loss, example_losses, per_example_loss, row_energy, row_norms, two_outputs

R = np.random.default_rng(11)
W, B = R.normal(size=3), 0.1
X, Y = R.normal(size=(7, 3)), (R.uniform(size=7) > 0.5).astype(float)
TARGETS = ["cpu", "parallel"]


@pytest.mark.parametrize("target", TARGETS)
def test_per_example_gradient_of_tanh(target, backend):
    x = np.linspace(-2.0, 2.0, 5)
    with pytest.raises(TypeError, match=r"shape \(5,\).*vmap"):
        s2sad.grad(np.tanh, backend=backend)(x)
    per_example = s2sad.vmap(s2sad.grad(np.tanh, backend=backend), target=target, backend=backend)
    assert_close(per_example(x), 1.0 - np.tanh(x) ** 2, rtol=1e-12)
    assert_close(s2sad.jit(per_example)(x), 1.0 - np.tanh(x) ** 2, rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_per_example_logistic_gradients_are_the_rows_of_jacrev(target, backend):
    grads = s2sad.vmap(s2sad.grad(per_example_loss, argnums=(0, 1), backend=backend), in_axes=(None, None, 0, 0),
                       target=target, backend=backend)(W, B, X, Y)
    jac_W, jac_b = s2sad.jacrev(example_losses, argnums=(0, 1), backend=backend)(W, B, X, Y)
    assert grads[0].shape == (7, 3) and grads[1].shape == (7,)
    assert_close(grads[0], jac_W, rtol=1e-10)
    assert_close(grads[1], jac_b, rtol=1e-10)
    assert_close(grads[0][2], fd_grad(per_example_loss, (W, B, X[2], Y[2]), 0))


def test_grad_of_a_function_that_uses_vmap(backend):
    g = s2sad.grad(batch_loss, argnums=(0, 1), backend=backend)(W, B, X, Y)
    for i in (0, 1):
        assert_close(g[i], fd_grad(batch_loss, (W, B, X, Y), i))
    m = R.normal(size=(4, 3))
    assert_close(s2sad.jacfwd(row_norms, backend=backend)(m).sum(axis=0), fd_grad(lambda a: np.sum(row_norms(a)),
                                                                                   (m,), 0))


def test_vmap_of_jvp_and_nested_vmap(backend):
    tangent = s2sad.api._tangent_function(row_energy, 0)  # (row, row_dot) -> directional derivative
    m, v = R.normal(size=(4, 3)), R.normal(size=(4, 3))
    directional = s2sad.vmap(tangent, backend=backend)(m, v)
    assert_close(directional, np.sum(2.0 * np.sin(m) * np.cos(m) * v, axis=1), rtol=1e-12)
    nested = s2sad.vmap(s2sad.vmap(two_outputs, in_axes=(0, None), backend=backend), in_axes=(None, 0),
                        backend=backend)(np.arange(3.0), np.arange(2.0))
    assert nested[0].shape == (2, 3) and nested[1].shape == (2, 3)
    assert_close(nested[0], np.outer(np.arange(2.0), np.arange(3.0)), rtol=0)


def test_in_axes_out_axes_and_errors():
    m = R.normal(size=(3, 4))
    assert_close(s2sad.vmap(row_energy, in_axes=1)(m), np.sum(np.sin(m) ** 2, axis=0), rtol=1e-12)
    out = s2sad.vmap(np.tanh, out_axes=1)(m)  # rows in, rows mapped, the batch axis put last
    assert_close(out, np.tanh(m).T, rtol=1e-12)
    with pytest.raises(ValueError, match="same batch size.*`x` has 7.*`y` has 4"):
        s2sad.vmap(per_example_loss, in_axes=(None, None, 0, 0))(W, B, X, Y[:4])
    with pytest.raises(ValueError, match="target"):
        s2sad.vmap(np.tanh, target="gpu-please")
    with pytest.raises(ValueError, match="in_axes has 2 entries"):
        s2sad.vmap(row_energy, in_axes=(0, 0))


def test_source_shows_the_batch_loop():
    text = s2sad.source(s2sad.vmap(per_example_loss, in_axes=(None, None, 0, 0), target="parallel"))
    assert "def per_example_loss_batched(W, b, x, y):" in text
    assert "for b2 in prange(1, n):" in text and "per_example_loss(W, b, x[b2], y[b2])" in text

"""SPEC.md's seed behaviours that need reverse mode, on both backends."""

import numpy as np
import pytest

import s2sad
from helpers import RTOL_EXACT, assert_close, fd_grad
from seed_functions import (B0, INPUTS, TARGETS, W0, log1pexp, logistic_loss, loss_with_aux, product,
                            quadratic_form, quadratic_scalars, with_stop_gradient)


def test_product(backend):
    assert s2sad.grad(product, backend=backend)(3.0, 4.0) == 4.0
    assert s2sad.grad(product, argnums=1, backend=backend)(3.0, 4.0) == 3.0
    assert s2sad.value_and_grad(product, backend=backend)(3.0, 4.0) == (12.0, 4.0)


def test_quadratic_form(backend):
    g = s2sad.grad(quadratic_form, backend=backend)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [10.0, 24.0, 42.0], rtol=RTOL_EXACT)
    assert s2sad.grad(quadratic_scalars, argnums=(0, 1, 2), backend=backend)(1.0, 2.0, 3.0) == (10.0, 24.0, 42.0)
    assert s2sad.grad(quadratic_scalars, argnums=(0, 2), backend=backend)(1.0, 2.0, 3.0) == (10.0, 42.0)


def test_stop_gradient(backend):
    gx, gy = s2sad.grad(with_stop_gradient, argnums=(0, 1), backend=backend)(3.0, 4.0)
    assert (gx, gy) == (4.0, 0.0)


def test_log1pexp(backend):
    d = s2sad.grad(log1pexp, backend=backend)
    assert d(5.0) == pytest.approx(0.9933071490757152, rel=RTOL_EXACT)
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(d(1000.0))  # exp overflows: the plain derivative is inf/inf


def test_tanh_first_derivative(backend):
    d = s2sad.grad(np.tanh, backend=backend)
    assert d(0.5) == pytest.approx(0.7864477329659275, rel=RTOL_EXACT)
    assert d(2.0) == pytest.approx(0.07065082485316447, rel=RTOL_EXACT)


def test_polynomial_first_derivatives(backend):
    from programs_poly import cubic, two_x_cubed

    assert s2sad.grad(cubic, backend=backend)(1.0) == pytest.approx(4.0, rel=RTOL_EXACT)
    assert s2sad.grad(two_x_cubed, backend=backend)(1.0) == pytest.approx(6.0, rel=RTOL_EXACT)


def test_grad_of_vector_output_names_the_shape(backend):
    with pytest.raises(TypeError, match=r"shape \(5,\).*vmap"):
        s2sad.grad(np.tanh, backend=backend)(np.linspace(-1.0, 1.0, 5))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_logistic_regression(argnums, backend):
    g = s2sad.grad(logistic_loss, argnums=argnums, backend=backend)(W0, B0, INPUTS, TARGETS)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    g = g if isinstance(argnums, tuple) else (g,)
    for n, gn in zip(nums, g):
        assert_close(gn, fd_grad(logistic_loss, (W0, B0, INPUTS, TARGETS), n))


def test_logistic_regression_has_aux(backend):
    (value, preds), (gW, gb) = s2sad.value_and_grad(loss_with_aux, argnums=(0, 1), has_aux=True,
                                                    backend=backend)(W0, B0, INPUTS, TARGETS)
    assert value == pytest.approx(logistic_loss(W0, B0, INPUTS, TARGETS), rel=1e-12)
    assert preds.shape == (4,)
    assert_close(gW, fd_grad(logistic_loss, (W0, B0, INPUTS, TARGETS), 0))
    gW2, aux = s2sad.grad(loss_with_aux, has_aux=True, backend=backend)(W0, B0, INPUTS, TARGETS)
    np.testing.assert_allclose(gW2, gW)
    np.testing.assert_allclose(aux, preds)


def test_vjp_of_vector_function(backend):
    out, vjp_fun = s2sad.vjp(np.tanh, np.array([0.1, -0.4, 2.0]), backend=backend)
    (ct,) = vjp_fun(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(ct, np.array([1.0, 2.0, 3.0]) * (1 - out ** 2), rtol=RTOL_EXACT)

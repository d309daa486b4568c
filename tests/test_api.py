"""The API surface: numba-jitted inputs, @differentiate, keyword arguments, vjp checks."""

import numpy as np
import pytest

import s2sad
from api_functions import decorated, decorated_both, jitted_loss, uses_decorated
from helpers import assert_close, fd_grad

X = np.array([0.3, -1.2, 0.8])


def test_numba_jitted_function_is_differentiated_from_its_python_source():
    g = s2sad.grad(jitted_loss)(0.7, X)
    assert_close(g, fd_grad(jitted_loss.py_func, (0.7, X), 0))


def test_differentiate_decorator():
    assert decorated(0.5, X) == pytest.approx(np.sum(np.sin(0.5 * X)), rel=1e-12)
    assert_close(decorated.grad(0.5, X), np.sum(X * np.cos(0.5 * X)), rtol=1e-12)
    value, g = decorated.value_and_grad(0.5, X)
    assert value == pytest.approx(decorated(0.5, X)) and g == pytest.approx(decorated.grad(0.5, X))
    gw, gx = decorated_both.grad(0.5, X)
    assert_close(gx, 0.5 * np.cos(0.5 * X), rtol=1e-12)
    assert "def decorated_grad(w, x):" in decorated.source()
    out, vjp_fun = decorated.vjp(0.5, X)
    assert_close(vjp_fun(2.0)[1], 2.0 * 0.5 * np.cos(0.5 * X), rtol=1e-12)


def test_decorated_function_is_inlined_when_called():
    assert_close(s2sad.grad(uses_decorated)(0.5, X), 2.0 * np.sum(X * np.cos(0.5 * X)), rtol=1e-12)


def test_keyword_arguments_bind_like_python(backend):
    g = s2sad.grad(jitted_loss.py_func, argnums=1, backend=backend)
    assert_close(g(x=X, w=0.7), g(0.7, X), rtol=0)


def test_vjp_checks_cotangent_shape():
    _, vjp_fun = s2sad.vjp(np.sin, X)
    with pytest.raises(ValueError, match=r"cotangent has shape \(2,\).*\(3,\)"):
        vjp_fun(np.ones(2))


def test_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match="has_aux=True needs"):
        s2sad.grad(decorated, has_aux=True)(0.5, X)


def make_scaled(scale):
    def scaled(x):
        return np.sin(x) * scale

    return scaled


def test_closure_variables_and_nested_functions(backend):
    f = make_scaled(3.0)
    assert s2sad.grad(f, backend=backend)(0.4) == pytest.approx(3.0 * np.cos(0.4), rel=1e-12)
    g = make_scaled(5.0)  # same code, other closure value: must not reuse the first one's code
    assert s2sad.grad(g, backend=backend)(0.4) == pytest.approx(5.0 * np.cos(0.4), rel=1e-12)

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


def test_an_int_primal_of_vjp_is_refused_with_a_hint_that_works():
    with pytest.raises(TypeError, match=r"argument 0 \(`w`\) of jitted_loss is int 2; pass a float \(e.g. 2.0\) or, "
                                        r"to keep it constant, pass it in a lambda: vjp\(lambda ...: jitted_loss\(..., w=2, "):
        s2sad.vjp(jitted_loss.py_func, 2, X)
    out, vjp_fun = s2sad.vjp(lambda x: jitted_loss(w=2, x=x), X)
    assert out == pytest.approx(jitted_loss.py_func(2, X), rel=1e-12)
    (x_bar,) = vjp_fun(1.5)
    assert_close(x_bar, 1.5 * fd_grad(lambda x: jitted_loss.py_func(2.0, x), (X,), 0))
    with pytest.raises(TypeError, match=r"to keep it constant, pass it in a lambda: "
                                        r"vjp\(lambda ...: jitted_loss\(..., x, "):
        s2sad.vjp(jitted_loss.py_func, 2.0, np.array([1, 2, 3]))


def _scaled_by_a_record(x, p):  # RRMPG's models take their parameters as a structured array
    return np.sum(x * p["a"])


def test_a_structured_primal_of_jvp_is_refused_with_a_hint_that_works():
    x, p = np.array([0.5, -1.0, 2.0]), np.array([(1.5,), (2.0,), (-0.5,)], dtype=[("a", "f8")])
    with pytest.raises(TypeError, match=r"pass its fields as float arrays \(p\['a'\], ...\) or, to keep it constant, "
                                        r"pass it in a lambda: jvp\(lambda ...: _scaled_by_a_record\(..., p, ...\), "
                                        r"<the other primals>, <their tangents>\)"):
        s2sad.jvp(_scaled_by_a_record, (x, p), (x, p))
    t = np.array([1.0, 0.5, -2.0])
    _, tangent = s2sad.jvp(lambda x: _scaled_by_a_record(x, p), (x,), (t,))
    assert tangent == pytest.approx(np.sum(t * p["a"]), rel=1e-12)


def test_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match="has_aux=True needs"):
        s2sad.grad(decorated, has_aux=True)(0.5, X)


def value_and_square(x):
    return np.sum(np.sin(x)), x[0] * x[0]


def test_grad_of_a_tuple_output_says_to_use_has_aux():
    for transform in (s2sad.grad, s2sad.value_and_grad, s2sad.hessian):
        with pytest.raises(TypeError, match=r"value_and_square returns a tuple; .* needs a single output "
                                            r"\(use has_aux=True to return \(value, aux\)\)"):
            transform(value_and_square)(X)
    g, aux = s2sad.grad(value_and_square, has_aux=True)(X)
    assert_close(g, np.cos(X))
    assert aux == pytest.approx(X[0] * X[0])


def make_scaled(scale):
    def scaled(x):
        return np.sin(x) * scale

    return scaled


def test_closure_variables_and_nested_functions(backend):
    f = make_scaled(3.0)
    assert s2sad.grad(f, backend=backend)(0.4) == pytest.approx(3.0 * np.cos(0.4), rel=1e-12)
    g = make_scaled(5.0)  # same code, other closure value: must not reuse the first one's code
    assert s2sad.grad(g, backend=backend)(0.4) == pytest.approx(5.0 * np.cos(0.4), rel=1e-12)


# ---------------------------------------------------------------- lambdas


def test_lambda_is_differentiated_like_the_def_it_stands_for():
    from api_functions import cube, softplus_sum, spread, square

    assert s2sad.grad(square)(1.5) == pytest.approx(3.0, rel=1e-14)
    assert s2sad.grad(s2sad.grad(cube))(2.0) == pytest.approx(12.0, rel=1e-12)  # calls the lambda `square`
    assert_close(s2sad.grad(softplus_sum)(X), fd_grad(softplus_sum, (X,), 0))
    assert_close(s2sad.jvp(square, (1.5,), (2.0,))[1], 6.0, rtol=1e-14)
    assert_close(s2sad.vmap(s2sad.grad(square))(X), 2.0 * X, rtol=1e-14)
    y = np.array([0.1, 0.7, -0.4])
    gx, gy = s2sad.grad(spread, argnums=(0, 1))(X, y)  # split over lines
    assert_close(gx, fd_grad(spread, (X, y), 0))
    assert_close(gy, fd_grad(spread, (X, y), 1))


def test_lambda_code_is_named_after_its_line():
    from api_functions import LAMBDA_LINES, square

    line = LAMBDA_LINES["square"]
    text = s2sad.source(square)
    assert f"def lambda_{line}_grad(t):" in text
    assert f"api_functions.py:{line})" in text.splitlines()[0]
    assert "# square = lambda t: t * t" in text


def test_two_alike_lambdas_on_one_line_are_told_apart_by_column():
    from api_functions import thrice, twice

    assert s2sad.grad(twice)(0.3) == pytest.approx(2.0 * np.cos(0.3), rel=1e-14)
    assert s2sad.grad(thrice)(0.3) == pytest.approx(3.0 * np.cos(0.3), rel=1e-14)


def test_error_in_a_lambda_points_into_it():
    from api_functions import LAMBDA_LINES, prints

    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(prints)(1.0)
    message = str(info.value)
    assert f"api_functions.py:{LAMBDA_LINES['prints']}:" in message and "`print`" in message
    assert "prints = lambda x: print(x)" in message


def test_lambda_made_in_a_function_reads_numbers_from_its_closure():
    scale = 2.5
    g = s2sad.grad(lambda t: scale * t ** 3)
    assert g(2.0) == pytest.approx(3 * scale * 4.0, rel=1e-14)


# ---------------------------------------------------------------- functools.partial


def cubic(x, a, b=1.0):
    return a * x ** 3 + b * np.sin(x)


def test_partial_differentiates_the_parameters_it_leaves():
    from functools import partial

    assert s2sad.grad(partial(cubic, a=2.0))(1.0) == pytest.approx(6.0 + np.cos(1.0), rel=1e-14)
    assert s2sad.grad(partial(cubic, 2.0))(3.0) == pytest.approx(8.0, rel=1e-14)  # x bound: d/da = x**3
    value, (gx, ga) = s2sad.value_and_grad(partial(cubic, b=3.0), argnums=(0, 1))(1.0, 2.0)
    assert value == pytest.approx(cubic(1.0, 2.0, 3.0), rel=1e-14)
    assert (gx, ga) == (pytest.approx(6.0 + 3.0 * np.cos(1.0), rel=1e-14), pytest.approx(1.0, rel=1e-14))
    assert s2sad.jvp(partial(cubic, a=2.0), (1.0,), (0.5,))[1] == pytest.approx(0.5 * (6.0 + np.cos(1.0)), rel=1e-14)
    assert "def cubic_partial_grad(" in s2sad.source(partial(cubic, a=2.0))

"""Arrays, functions and objects read from globals, closures, partials, defaults and objects (hidden.py)."""

import functools

import numpy as np
import pytest

import outside_functions as of
import s2sad
from helpers import assert_close, fd_grad

W0 = np.array([0.1, 0.2, 0.3])


def test_the_tutorials_logistic_regression_reads_global_data(backend):
    for argnums in (0, 1, (0, 1)):
        grads = s2sad.grad(of.loss, argnums, backend=backend)(W0, 0.1)
        for n, g in zip((argnums,) if isinstance(argnums, int) else argnums,
                        (grads,) if isinstance(argnums, int) else grads):
            assert_close(g, fd_grad(of.loss, (W0, 0.1), n))


def test_check_grads_of_a_function_reading_globals_at_order_2():
    """On the python backend, which runs the same generated source (global arrays are hidden arguments
    in the source itself): numba compiles second derivatives of this function in the hessian test below,
    and its first derivatives in the tests above; these six compiles cost ~65 s of CI."""
    s2sad.check_grads(of.loss, (W0, 0.1), order=2, backend="python")


def test_a_lambda_closing_over_local_arrays(backend):
    X = of.inputs * 0.5
    y = np.arange(4.0)
    g = s2sad.grad(lambda W: of.squared_error(W, X, y), backend=backend)(W0)
    assert_close(g, 2.0 * X.T @ (X @ W0 - y), rtol=1e-9)


def test_check_grads_of_a_lambda_over_arrays_at_order_2():
    """On the python backend, as above: numba compiles lambdas over closed-over arrays in both modes in
    test_a_lambda_closing_over_local_arrays and test_jvp_of_a_lambda_closing_over_arrays."""
    X, y = of.inputs, np.arange(4.0)
    s2sad.check_grads(lambda W: of.squared_error(W, X, y), (W0,), order=2, backend="python")


def test_jvp_of_a_lambda_closing_over_arrays(backend):
    X = of.inputs
    out, tangent = s2sad.jvp(lambda w: np.sum(np.sin(X @ w)), (W0,), (np.ones(3),), backend=backend)
    assert_close(out, np.sum(np.sin(X @ W0)), rtol=1e-12)
    assert_close(tangent, np.cos(X @ W0) @ X @ np.ones(3), rtol=1e-9)


def test_a_global_array_changed_between_calls_is_read_again(backend, monkeypatch):
    monkeypatch.setattr(of, "inputs", of.inputs.copy())
    g = s2sad.grad(of.loss, backend=backend)
    before = g(W0, 0.1)
    assert_close(before, fd_grad(of.loss, (W0, 0.1), 0))
    of.inputs[0, 0] = 5.0  # written in place
    changed = g(W0, 0.1)
    assert_close(changed, fd_grad(of.loss, (W0, 0.1), 0))
    monkeypatch.setattr(of, "inputs", of.inputs * 2.0)  # rebound to a new array of the same type
    rebound = g(W0, 0.1)
    assert_close(rebound, fd_grad(of.loss, (W0, 0.1), 0))
    assert not np.allclose(before, changed) and not np.allclose(changed, rebound)
    if backend == "numba":  # one compilation served all three calls: only the array's type is in the key
        assert len(g.__s2sad_transform__.compiled("wrapper").signatures) == 1


def test_a_partial_binding_arrays(backend):
    p = functools.partial(of.squared_error, X=of.inputs, y=np.ones(4))
    assert_close(s2sad.grad(p, backend=backend)(W0), 2.0 * of.inputs.T @ (of.inputs @ W0 - 1.0), rtol=1e-9)


def test_a_global_tuple_of_arrays(backend):
    x = np.array([0.3, -0.4, 0.8])
    assert_close(s2sad.grad(of.through_tuple_of_arrays, backend=backend)(x), fd_grad(of.through_tuple_of_arrays, (x,), 0))


def test_a_helpers_default_array(backend):
    x = np.array([0.3, -0.4, 0.8])
    assert_close(s2sad.grad(of.uses_default, backend=backend)(x), 2.0 * x * np.array([1.0, 4.0, 9.0]), rtol=1e-9)


def test_a_callback_passed_to_a_helper(backend):
    y0 = np.array([1.0, -0.5])
    assert_close(s2sad.grad(of.integrated, backend=backend)(y0), fd_grad(of.integrated, (y0,), 0))


def test_an_objects_arrays_and_bound_methods(backend):
    x = np.array([0.3, -0.4, 0.8])
    assert_close(s2sad.grad(of.through_method, backend=backend)(x), fd_grad(of.through_method, (x,), 0))
    assert_close(s2sad.grad(of.LAYER.loss, backend=backend)(x), fd_grad(of.LAYER.loss, (x,), 0))


def test_vmap_and_hessian_of_a_function_reading_globals():
    Ws = np.array([[0.1, 0.2, 0.3], [-0.3, 0.5, 0.1]])
    per_example = s2sad.vmap(s2sad.grad(of.loss))(Ws, np.array([0.1, -0.2]))
    for k in range(2):
        assert_close(per_example[k], fd_grad(of.loss, (Ws[k], [0.1, -0.2][k]), 0))
    H = s2sad.hessian(of.loss)(W0, 0.1)
    expected = np.array([fd_grad(lambda w: float(s2sad.grad(of.loss)(w, 0.1)[i]), (W0,), 0) for i in range(3)])
    assert_close(H, expected)


def test_the_generated_code_names_a_global_array_as_the_user_does():
    text = s2sad.source(of.loss)
    assert "def loss_grad(W, b, inputs, targets):" in text


@pytest.mark.parametrize("what", ["grad", "jvp"])
def test_a_function_used_as_a_number_is_refused_with_its_name(what):
    def bad(x):
        return x * of.sigmoid

    with pytest.raises(s2sad.UnsupportedError, match="`of.sigmoid` is a function"):
        if what == "grad":
            s2sad.grad(bad)(1.0)
        else:
            s2sad.jvp(bad, (1.0,), (1.0,))


@pytest.mark.parametrize("fn", [of.with_nested_rhs, of.with_lambdas])
def test_nested_defs_and_lambdas_close_over_the_functions_values(fn, backend):
    y0 = np.array([0.3, -0.5, 0.8])
    ga, gb = s2sad.grad(fn, (0, 1), backend=backend)(y0, 0.7)
    assert_close(ga, fd_grad(fn, (y0, 0.7), 0))
    assert_close(gb, fd_grad(fn, (y0, 0.7), 1))


def test_a_nested_def_writes_into_the_enclosing_functions_array(backend):
    x = np.array([0.3, -0.5, 0.8])
    assert_close(s2sad.grad(of.nested_writes_and_defaults, backend=backend)(x),
                 fd_grad(of.nested_writes_and_defaults, (x,), 0))


def test_a_function_passed_as_an_argument_is_inlined_and_keys_the_code(backend):
    x = np.array([0.3, -0.5, 0.8])
    g = s2sad.grad(of.descends, argnums=1, backend=backend)
    for f in (of.bumpy, of.cubic, of.bumpy):
        assert_close(g(f, x), fd_grad(of.descends, (f, x), 1))
    assert len(g.__s2sad_transform__.made.derived) == 2


def test_a_plain_object_argument_is_read_like_a_global_one(backend):
    p = of.Params(np.array([[0.1, 0.2, 0.3], [0.4, -0.5, 0.6]]), 2.0)
    x = np.array([0.3, -0.5, 0.8])
    g = s2sad.grad(of.energy, backend=backend)
    assert_close(g(x, p), fd_grad(of.energy, (x, p), 0))
    p.W[0, 0] = 3.0  # its arrays are read at each call
    assert_close(g(x, p), fd_grad(of.energy, (x, p), 0))


def test_star_arguments_spread_static_tuples_and_dicts(backend):
    X0 = np.array([0.3, -0.5])
    gx, gw = s2sad.grad(of.spread_arguments, (0, 1), backend=backend)(X0, 1.3)
    assert_close(gx, fd_grad(of.spread_arguments, (X0, 1.3), 0))
    assert_close(gw, fd_grad(of.spread_arguments, (X0, 1.3), 1))


def test_the_transformed_function_takes_star_args_and_kwargs(backend):
    c, xs = np.array([1.0, -0.9, 0.3]), np.linspace(0.0, 1.0, 11)
    ys = np.exp(-xs)
    g = s2sad.grad(of.least_squares, backend=backend)
    assert_close(g(c, xs, ys), fd_grad(lambda c: of.least_squares(c, xs, ys), (c,), 0))
    assert_close(g(c, xs, ys, weight=2.0, ridge=0.5),
                 fd_grad(lambda c: of.least_squares(c, xs, ys, weight=2.0, ridge=0.5), (c,), 0))


def test_a_helper_called_without_its_star_arguments_gets_them_empty(backend):  # () and {}, as Python binds them
    assert_close(s2sad.grad(of.calls_without_extras, backend=backend)(1.5), 8.0 * 1.5)  # d/dx (2x)^2


def test_argnums_count_a_calls_positional_arguments_into_star_args(backend):
    """As in JAX: argnums=1 of `least_squares(coefficients, *data)` is the first of `data`, and emcee's
    `nll = lambda *args: -log_likelihood(*args)` differentiates its first argument."""
    c, xs = np.array([1.0, -0.9, 0.3]), np.linspace(0.0, 1.0, 11)
    ys = np.exp(-xs)
    g = s2sad.grad(of.least_squares, argnums=1, backend=backend)
    assert_close(g(c, xs, ys), fd_grad(lambda x: of.least_squares(c, x, ys), (xs,), 0))
    assert_close(g(c, xs, ys, weight=3.0), fd_grad(lambda x: of.least_squares(c, x, ys, weight=3.0), (xs,), 0))
    negated = lambda *args: -of.least_squares(*args)  # noqa: E731
    value, gc = s2sad.value_and_grad(negated, backend=backend)(c, xs, ys)
    assert_close(value, negated(c, xs, ys), rtol=1e-12)
    assert_close(gc, fd_grad(negated, (c, xs, ys), 0))
    assert_close(s2sad.hessian(negated, argnums=2, backend=backend)(c, xs, ys), -2.0 * np.eye(11))
    assert "args_2_bar" in s2sad.source(s2sad.grad(negated, argnums=2), c, xs, ys)  # its third argument
    batch = np.stack([c, 2.0 * c])
    per_example = s2sad.vmap(s2sad.grad(negated), in_axes=(0, None, None), backend=backend)(batch, xs, ys)
    assert_close(per_example[1], fd_grad(negated, (batch[1], xs, ys), 0))
    assert_close(s2sad.jit(s2sad.grad(negated, backend=backend))(c, xs, ys), gc)


def test_a_rank_test_on_what_a_global_array_makes_folds_in_a_loop(backend):
    x, P, zs = np.array([0.5, 1.0]), np.array([[1.0, 0.1], [0.1, 2.0]]), np.array([0.6, 0.75, 0.9])
    grads = s2sad.grad(of.filtered, argnums=(0, 1, 2), backend=backend)(x, P, zs)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(of.filtered, (x, P, zs), i))


def test_a_global_array_rebound_to_another_rank_is_named(monkeypatch):
    x, P, zs = np.array([0.5, 1.0]), np.array([[1.0, 0.1], [0.1, 2.0]]), np.array([0.6])
    g = s2sad.grad(of.filtered, backend="python")
    g(x, P, zs)
    monkeypatch.setattr(of, "TRANSITION", np.array([1.0, 0.1]))
    with pytest.raises(TypeError, match=r"`TRANSITION`, read by `filtered` from outside its arguments, was a 2-D "
                                        r"array when s2sad generated code for it and is 1-D now"):
        g(x, P, zs)


def test_super_in_a_method_of_an_object_made_outside(backend):
    """`super().forward(x)` in a method of a model the function reads (it was refused: super() worked only on
    objects the function built); the parent's method reads the object's arrays where they live."""
    rng = np.random.default_rng(2)
    model = of.AveragedDense(rng.normal(size=(3, 4)), rng.normal(size=3))
    loss, x = of.SquaredError(model, np.ones(3)), rng.normal(size=4)
    assert_close(s2sad.grad(loss, backend=backend)(x), fd_grad(loss, (x,), 0))
    model.W = model.W * 2.0  # read again at the next call
    assert_close(s2sad.grad(loss, backend=backend)(x), fd_grad(loss, (x,), 0))


def test_a_network_loops_over_the_layers_a_list_attribute_holds(backend):
    """`for layer in self.layers` of a model made outside the function (it was refused: a list attribute was
    read as a number), and `net.layers[0].weights = W` assigning into one of those layers."""
    rng = np.random.default_rng(5)
    net = of.Sequential([of.Affine(rng.normal(size=(4, 5)), np.zeros((1, 5))), of.Rectifier(),
                         of.Affine(rng.normal(size=(5, 2)), rng.normal(size=(1, 2)))])
    X, y = rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    assert_close(s2sad.grad(net.cost, backend=backend)(X, y), fd_grad(net.cost, (X, y), 0))
    W = net.layers[0].weights.copy()
    assert_close(s2sad.grad(of.cost_of_first_weights, backend=backend)(W * 0.5, net, X, y),
                 fd_grad(lambda w: of.cost_of_first_weights(w, net, X, y), (W * 0.5,), 0))

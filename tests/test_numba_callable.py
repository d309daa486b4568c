"""s2sad's functions inside @numba.njit code (issue 36): called in a loop, passed as a first-class function and
closed over, each result checked against central finite differences or a closed form.

numba compiles every distinct caller once per argument types (0.5-2 s and several MB each), so the
functions, the transformed functions and the njit callers are few and shared across the tests.
"""

import re
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

import s2sad
from s2sad.numba_callable import NotNumbaCallable
from helpers import assert_close, fd_directional, fd_grad

REPO = Path(__file__).resolve().parent.parent


def energy(x, y):
    return np.sum(np.sin(x) * y) + y * y


def field(x, y):
    return np.sin(x) * y


@numba.njit
def field_njit(x, y):
    return np.sin(x) * y


@s2sad.differentiate
def loss(w, b):
    return np.sum(w * w) * b + np.sum(np.cos(w))


def tree_loss(p, x):
    return np.sum(p["w"] * x) + p["b"] ** 2


G = s2sad.grad(energy, (0, 1))
VG = s2sad.value_and_grad(energy)
J = s2sad.jacfwd(field)
JR = s2sad.jacrev(field, (0, 1))
H = s2sad.hessian(energy)
V = s2sad.vmap(s2sad.grad(energy), in_axes=(0, None))

X = np.array([0.3, -0.5, 0.9])
Y = 1.7


@numba.njit
def call(fn, a, b):
    """A first-class function argument."""
    return fn(a, b)


@numba.njit
def descend(x, y, steps, rate):
    """Gradient descent on energy in x, y: G called from a numba loop (a global)."""
    for _ in range(steps):
        gx, gy = G(x, y)
        x = x - rate * gx
        y = y - rate * gy
    return x, y


def closing_over(fn):
    @numba.njit
    def closed(a, b):
        return fn(a, b)
    return closed


def test_grad_in_a_loop_as_an_argument_and_closed_over():
    gx, gy = call(G, X, Y)
    assert_close(gx, fd_grad(energy, (X, Y), 0))
    assert_close(gy, fd_grad(energy, (X, Y), 1))
    cx, cy = closing_over(G)(X, Y)
    assert_close(cx, gx, rtol=1e-12)
    assert_close(cy, gy, rtol=1e-12)
    x, y = X.copy(), Y  # the same steps in Python, with the gradient checked at every one
    for _ in range(3):
        fx, fy = fd_grad(energy, (x, y), 0), fd_grad(energy, (x, y), 1)
        x, y = x - 0.1 * fx, y - 0.1 * fy
    nx, ny = descend(X.copy(), Y, 3, 0.1)
    assert_close(nx, x)
    assert_close(ny, y)


def test_value_and_grad():
    value, gx = call(VG, X, Y)
    assert_close(value, energy(X, Y), rtol=1e-12)
    assert_close(gx, fd_grad(energy, (X, Y), 0))


def test_jacfwd_and_hessian():
    jac = call(J, X, Y)
    assert jac.shape == (3, 3)
    fd = np.array([fd_directional(field, (X, Y), (np.eye(3)[k], 0.0)) for k in range(3)]).T
    assert_close(jac, fd)
    assert_close(call(H, X, Y), np.diag(-np.sin(X) * Y), rtol=1e-12)  # d2/dx2 sum(sin(x) y)


def test_jacrev_gives_every_block_by_vjps():
    jac_x, jac_y = call(JR, X, Y)
    assert jac_x.shape == (3, 3) and jac_y.shape == (3,)
    fd_x = np.array([fd_directional(field, (X, Y), (np.eye(3)[k], 0.0)) for k in range(3)]).T
    assert_close(jac_x, fd_x)
    assert_close(jac_y, fd_directional(field, (X, Y), (np.zeros(3), 1.0)))
    scalar_x, scalar_y = call(s2sad.jacrev(energy, (0, 1)), X, Y)  # a scalar output: the gradient
    assert_close(scalar_x, fd_grad(energy, (X, Y), 0))
    assert_close(scalar_y, fd_grad(energy, (X, Y), 1))


def damped(x, rate=0.5, steps=3):
    s = 0.0
    for _ in range(steps):
        s += rate * np.sum(np.sin(x) ** 2)
    return s


DAMPED = s2sad.grad(damped)


@numba.njit
def damped_grads(x):
    return DAMPED(x), DAMPED(x, 0.25), DAMPED(x, 0.25, 1)


def test_parameters_left_out_in_numba_code_take_their_defaults():
    for got, args in zip(damped_grads(X), ((X,), (X, 0.25), (X, 0.25, 1))):
        assert_close(got, fd_grad(damped, args, 0))


def payoff_squared(s, k, option_type="call"):  # option pricers pick the payoff by a string
    if option_type == "call":
        return max(s - k, 0.0) ** 2
    return max(k - s, 0.0) ** 2


@numba.njit
def left_out_string(g, s):
    return g(s, 2.0)


def test_a_string_argument_is_refused_in_numba_code_with_a_hint_that_works():
    with pytest.raises(NotNumbaCallable, match=re.escape(
            "bind it in Python first: s2sad.grad(lambda s, k: payoff_squared(s, k, option_type='call'))")):
        left_out_string(s2sad.grad(payoff_squared), 3.0)
    put = s2sad.grad(lambda s, k: payoff_squared(s, k, option_type="put"))
    assert left_out_string(put, 1.5) == pytest.approx(-2.0 * (2.0 - 1.5), rel=1e-12)
    assert left_out_string(s2sad.grad(lambda s, k: payoff_squared(s, k, option_type="call")), 3.0) == 2.0


def test_vmap_of_grad():
    batch = np.random.default_rng(0).normal(size=(4, 3))
    got = call(V, batch, Y)
    for row, g in zip(batch, got):
        assert_close(g, fd_grad(energy, (row, Y), 0))


@numba.njit
def jvps(x, t):
    out, tangent = s2sad.jvp(field_njit, (x, 2.0), (t, 0.0))
    value, dvalue = loss.jvp((x, 2.0), (t, 0.0))
    return out, tangent, value, dvalue


def test_jvp_of_an_njit_function_and_of_a_differentiate_method():
    t = np.array([1.0, 0.5, -2.0])
    out, tangent, value, dvalue = jvps(X, t)
    assert_close(out, field(X, 2.0), rtol=1e-12)
    assert_close(tangent, fd_directional(field, (X, 2.0), (t, 0.0)))
    assert_close(value, loss(X, 2.0), rtol=1e-12)
    assert_close(dvalue, fd_directional(loss, (X, 2.0), (t, 0.0)))


@numba.njit
def methods(w, b):
    g = loss.grad(w, b)
    v, g2 = loss.value_and_grad(w, b)
    return g, v, g2, loss.hessian(w, b), loss(w, b)


def test_differentiate_methods():
    g, v, g2, h, plain = methods(X, Y)
    assert plain == v
    assert_close(g, fd_grad(loss, (X, Y), 0))
    assert_close(g2, g, rtol=1e-12)
    assert_close(v, loss(X, Y), rtol=1e-12)
    assert_close(h, np.diag(2 * Y - np.cos(X)), rtol=1e-12)  # d2/dw2 of sum(w^2) b + sum(cos w)
    assert_close(call(loss.grad, X, Y), g, rtol=1e-12)  # a method passed as a first-class function
    assert call(loss, X, Y) == v  # and the function itself


def test_modules_s2sad_build_writes():
    sys.path.insert(0, str(REPO))
    try:
        from generated import recur_grad_0_1, recur_hessian, recur_jvp_0_1
        sys.path.insert(0, str(REPO / "examples"))
        from demo import recur
    finally:
        del sys.path[:2]
    x, w = np.array([0.5, -0.3, 0.8, 0.1]), 0.7

    @numba.njit
    def use(x, w):
        total = 0.0
        for _ in range(2):
            gx, gw = recur_grad_0_1(x, w)
            total += gw
        return gx, total / 2, recur_hessian(x, w), recur_jvp_0_1(x, w, np.ones_like(x), 0.0)

    gx, gw, h, (value, tangent) = use(x, w)
    assert_close(gx, fd_grad(recur, (x, w), 0))
    assert_close(gw, fd_grad(recur, (x, w), 1))
    hessian_fd = np.array([fd_grad(lambda x, w: recur_grad_0_1(x, w)[0][k], (x, w), 0) for k in range(4)])
    assert_close(h, hessian_fd)  # central differences of the gradient, itself checked above
    assert_close(value, recur(x, w), rtol=1e-12)
    assert_close(tangent, fd_directional(recur, (x, w), (np.ones_like(x), 0.0)))


def test_pytrees_through_the_flat_entry_point():
    params, x = {"w": np.array([1.0, 2.0]), "b": 0.5}, np.array([3.0, -1.0])
    flat = s2sad.grad(tree_loss).numba(params, x)  # leaves in tree_flatten order: b, then w
    gb, gw = call3(flat, params["b"], params["w"], x)
    assert_close(gb, 2 * params["b"], rtol=1e-12)
    assert_close(gw, x, rtol=1e-12)
    value, gb, gw = call3(s2sad.value_and_grad(tree_loss).numba(params, x), params["b"], params["w"], x)
    assert_close(value, tree_loss(params, x), rtol=1e-12)
    assert_close(gw, x, rtol=1e-12)


@numba.njit
def call3(fn, a, b, c):
    return fn(a, b, c)


def test_refusals_name_the_flat_entry_point():
    with pytest.raises(NotNumbaCallable, match=r"\.numba\(\*example_args\)"):
        call(loss.grad, (X, X), Y)
    with pytest.raises(TypeError, match=r"requires float inputs.*int64"):
        call(G, X, 2)
    with pytest.raises(NotNumbaCallable, match="maps axis 0"):
        call(s2sad.vmap(s2sad.grad(energy), in_axes=(1, None)), X.reshape(3, 1), Y)


def test_jit_is_numbas_dispatcher_and_keeps_the_python_path():
    jg = s2sad.jit(G)
    assert isinstance(jg, numba.core.registry.CPUDispatcher)
    gx, gy = jg(X, Y)
    assert_close(gx, G(X, Y)[0], rtol=1e-12)
    with pytest.raises(TypeError, match="requires float inputs"):  # the Python path's own error
        jg(X, 2)
    params, x = {"w": np.array([1.0, 2.0]), "b": 0.5}, np.array([3.0, -1.0])
    tg = s2sad.jit(s2sad.grad(tree_loss))
    assert_close(tg(params, x)["w"], x, rtol=1e-12)  # a pytree: numba cannot pass it, Python does
    assert "energy" in s2sad.source(jg)


def test_the_njit_examples_match_finite_differences(capsys):
    """examples/numba_loops.py: gradient descent, HMC leapfrog, backward Euler with jacfwd, all in @njit."""
    import runpy

    example = runpy.run_path(str(REPO / "examples" / "numba_loops.py"))
    assert example["main"]() == 0, capsys.readouterr().out


def test_callers_are_never_cached_by_numba():
    """A caller cached by numba would need s2sad's generated modules imported by name in a later process:
    numba refuses to cache it (with its warning) instead of failing to load it there."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cached = numba.njit(cache=True)(lambda a, b: G(a, b)[1])
        assert_close(cached(X, Y), G(X, Y)[1], rtol=1e-12)
    assert any("dynamic globals" in str(w.message) for w in caught)


WEIGHTS = np.array([1.0, 2.0, 3.0])


def weighted(x, y):
    return np.sum(WEIGHTS * x) * y


def test_arrays_read_from_globals_are_frozen_in_numba_code_and_read_again_by_jit():
    g = s2sad.grad(weighted)
    jg = s2sad.jit(g)
    try:
        assert_close(call(g, X, Y), WEIGHTS * Y, rtol=1e-12)
        WEIGHTS[:] = [4.0, 5.0, 6.0]
        assert_close(call(g, X, Y), [Y, 2 * Y, 3 * Y], rtol=1e-12)  # compiled: numba froze the array
        assert_close(jg(X, Y), WEIGHTS * Y, rtol=1e-12)  # from Python: read again, as g(X, Y) does
        with pytest.raises(NotNumbaCallable, match="reads arrays from outside"):
            call(jg, X, Y)  # the Python-facing dispatcher does not freeze them
    finally:
        WEIGHTS[:] = [1.0, 2.0, 3.0]

"""Higher derivatives by composition: grad(grad(f)), jvp(grad(f)), hessian, jacobians, check_grads."""

import numpy as np
import pytest

import s2sad
from helpers import RTOL_EXACT, assert_close, fd_grad
from higher_order_functions import (calls_grad_inside, logsumexp, loop_energy, scaled_tanh,
                                    softmax_cross_entropy, tangent_of_scaled_tanh, two_outputs, uses_sin,
                                    vector_map)
from programs import newton_sqrt
from programs_poly import cubic, two_x_cubed
from seed_functions import B0, INPUTS, TARGETS, W0, logistic_loss

TANH = {0.5: (0.7864477329659275, -0.7268619813835876, -0.5652092882597699),
        2.0: (0.07065082485316447, -0.13621868742711302, 0.25265406509806265)}


def nested_grad(f, order, backend):
    for _ in range(order):
        f = s2sad.grad(f, backend=backend)
    return f


def nested_forward(f, order, backend):
    """The order-th derivative of a scalar function by forward mode over forward mode."""
    fn = f
    for _ in range(order - 1):
        fn = s2sad.api._tangent_function(fn, 0)  # d/dx as generated source, differentiated again
    return lambda x: s2sad.jvp(fn, (x,) + (1.0,) * (order - 1), (1.0,) + (0.0,) * (order - 1),
                               backend=backend)[1]


@pytest.mark.parametrize("x", [0.5, 2.0])
@pytest.mark.parametrize("order", [1, 2, 3])
def test_tanh_derivatives_reverse_over_reverse(x, order, backend):
    assert nested_grad(np.tanh, order, backend)(x) == pytest.approx(TANH[x][order - 1], rel=RTOL_EXACT)


@pytest.mark.parametrize("x", [0.5, 2.0])
@pytest.mark.parametrize("order", [1, 2, 3])
def test_tanh_derivatives_forward_and_mixed(x, order, backend):
    expected = TANH[x][order - 1]
    assert nested_forward(np.tanh, order, backend)(x) == pytest.approx(expected, rel=RTOL_EXACT)
    if order > 1:  # forward over reverse
        g = nested_grad(np.tanh, order - 1, backend)
        assert s2sad.jvp(g, (x,), (1.0,), backend=backend)[1] == pytest.approx(expected, rel=RTOL_EXACT)


@pytest.mark.parametrize("order, expected", [(1, 4.0), (2, 10.0), (3, 6.0), (4, 0.0)])
def test_polynomial_derivatives_to_order_four(order, expected, backend):
    assert nested_grad(cubic, order, backend)(1.0) == pytest.approx(expected, rel=RTOL_EXACT, abs=1e-12)
    assert nested_forward(cubic, order, backend)(1.0) == pytest.approx(expected, rel=RTOL_EXACT, abs=1e-12)


def test_two_x_cubed_to_order_two(backend):
    assert nested_grad(two_x_cubed, 1, backend)(1.0) == pytest.approx(6.0, rel=RTOL_EXACT)
    assert nested_grad(two_x_cubed, 2, backend)(1.0) == pytest.approx(12.0, rel=RTOL_EXACT)
    assert s2sad.hessian(two_x_cubed, backend=backend)(1.0) == pytest.approx(12.0, rel=RTOL_EXACT)


def test_reverse_over_reverse_through_a_tape(backend):
    """newton_sqrt's adjoint tapes x; its second derivative differentiates that tape: -a**-1.5 / 4."""
    for mode in ("rev", "fwd"):
        d2 = nested_grad(newton_sqrt, 2, backend) if mode == "rev" else \
            (lambda a: s2sad.jvp(s2sad.grad(newton_sqrt, backend=backend), (a,), (1.0,), backend=backend)[1])
        assert d2(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-9)
    assert nested_grad(newton_sqrt, 3, backend)(2.0) == pytest.approx(0.375 * 2.0 ** -2.5, rel=1e-8)


TAPED = [
    ("stencil", (np.array([0.1, 0.3, 0.2, 0.4, 0.25]), 3)),  # in-place overwrites in a loop: a store tape
    ("overwrite_element", (np.array([0.3, -0.2, 0.5]),)),
    ("slices", (np.array([0.3, -0.2, 0.5]),)),  # a tape of array rows
    ("while_with_break", (0.8,)),
    ("early_return_in_loop", (0.5,)),
    ("scalar_loop_carried", (0.3,)),
]
# numba compiles the same second-order source the python backend checks: overwrite_element's
# element-store tape is the kind stencil's compiles at second order (and its first order compiles in
# test_programs), so numba skips its four second-derivative compiles (~30 s of CI).
TAPED_BY_BACKEND = [(b, name, args) for b in ("python", "numba") for name, args in TAPED
                    if not (b == "numba" and name == "overwrite_element")]


@pytest.mark.parametrize("backend, name, args", TAPED_BY_BACKEND,
                         ids=[f"{b}-{name}" for b, name, _ in TAPED_BY_BACKEND])
def test_second_order_checks_through_tapes(backend, name, args):
    """Reverse over reverse and forward over reverse of programs whose adjoints keep tapes."""
    import programs

    s2sad.check_grads(getattr(programs, name), args, order=2, backend=backend)


@pytest.mark.parametrize("fn, x", [
    (logsumexp, np.array([0.3, -1.2, 0.8, 2.0])),
    (loop_energy, np.array([0.3, -1.2, 0.8, 2.0, -0.4])),
])
def test_hessian_matches_finite_differences_of_the_gradient(fn, x, backend):
    H = s2sad.hessian(fn, backend=backend)(x)
    assert H.shape == (x.size, x.size)
    g = s2sad.grad(fn, backend="python")
    fd = np.array([fd_grad(lambda y: g(y)[k], (x,), 0) for k in range(x.size)])
    assert_close(H, fd)
    assert_close(H, H.T, rtol=1e-10, atol=1e-12)


def test_hessian_of_softmax_cross_entropy_with_argnums(backend):
    logits, labels = np.array([0.2, -1.0, 0.7]), np.array([0.0, 1.0, 0.0])
    H = s2sad.hessian(softmax_cross_entropy, backend=backend)(logits, labels)
    p = np.exp(logits) / np.sum(np.exp(logits))
    assert_close(H, np.diag(p) - np.outer(p, p), rtol=RTOL_EXACT)  # closed form
    (Hww, Hwb), (Hbw, Hbb) = s2sad.hessian(logistic_loss, argnums=(0, 1), backend=backend)(W0, B0, INPUTS, TARGETS)
    assert Hww.shape == (3, 3) and Hwb.shape == (3,) and Hbw.shape == (3,) and np.shape(Hbb) == ()
    gb = s2sad.grad(logistic_loss, argnums=1, backend="python")
    assert_close(Hbw, fd_grad(lambda W: gb(W, B0, INPUTS, TARGETS), (W0,), 0))
    assert_close(Hwb, Hbw, rtol=1e-10)


def test_jacobians_forward_and_reverse_agree(backend):
    x = np.array([0.3, -0.5, 1.2])
    jf = s2sad.jacfwd(vector_map, argnums=(0, 1), backend=backend)(x, 0.8)
    jr = s2sad.jacrev(vector_map, argnums=(0, 1), backend=backend)(x, 0.8)
    assert jf[0].shape == (3, 3) and jf[1].shape == (3,)
    for a, b in zip(jf, jr):
        assert_close(a, b, rtol=1e-12)
    fd = np.array([fd_grad(lambda y: vector_map(y, 0.8)[k], (x,), 0) for k in range(3)])
    assert_close(jf[0], fd)
    m = np.arange(6.0).reshape(2, 3) / 5.0
    J = s2sad.jacrev(np.tanh, backend=backend)(m)
    assert J.shape == (2, 3, 2, 3)
    assert_close(J, s2sad.jacfwd(np.tanh, backend=backend)(m), rtol=1e-12)
    assert_close(J.reshape(6, 6), np.diag(1.0 - np.tanh(m.ravel()) ** 2), rtol=RTOL_EXACT)


def test_scalar_jacobians_are_0d_arrays_in_every_mode(backend):
    """jacfwd, jacrev and hessian agree on the type of a scalar-by-scalar block: a 0-d array, as in JAX."""
    def f(a, b):
        return a * b + np.sin(a)

    blocks = {name: getattr(s2sad, name)(f, argnums=(0, 1), backend=backend)(0.5, 2.0) for name in ("jacfwd", "jacrev")}
    blocks["hessian"] = s2sad.hessian(f, argnums=(0, 1), backend=backend)(0.5, 2.0)[0]
    for name, (da, db) in blocks.items():
        assert isinstance(da, np.ndarray) and da.shape == () and isinstance(db, np.ndarray) and db.shape == (), name
    assert_close(blocks["jacfwd"], (2.0 + np.cos(0.5), 0.5), rtol=RTOL_EXACT)
    assert_close(blocks["jacrev"], (2.0 + np.cos(0.5), 0.5), rtol=RTOL_EXACT)
    assert_close(blocks["hessian"], (-np.sin(0.5), 1.0), rtol=RTOL_EXACT)
    single = s2sad.hessian(f, backend=backend)(0.5, 2.0)
    assert isinstance(single, np.ndarray) and single.shape == ()


def test_jacfwd_of_tuple_outputs():
    ja, jb = s2sad.jacfwd(two_outputs, argnums=(0, 1))(0.4, 1.5)
    assert ja == pytest.approx((1.5, 0.4)) and jb == pytest.approx((np.cos(0.4), 1.0))


def test_grad_of_a_function_that_calls_grad_inside(backend):
    x = np.array([0.3, -0.7, 1.1])
    assert_close(s2sad.grad(calls_grad_inside, backend=backend)(x), fd_grad(calls_grad_inside, (x,), 0))


def test_vjp_of_a_jvp(backend):
    args = (0.4, 1.3, 0.7)
    out, vjp_fun = s2sad.vjp(tangent_of_scaled_tanh, *args, backend=backend)
    assert out == pytest.approx(tangent_of_scaled_tanh(*args), rel=1e-12)
    for i, g in enumerate(vjp_fun(1.0)):
        assert_close(g, fd_grad(tangent_of_scaled_tanh, args, i))
    assert s2sad.jvp(scaled_tanh, (0.4, 1.3), (0.7, 0.0))[1] == pytest.approx(out, rel=1e-12)


def test_check_grads_passes_for_logistic_regression(backend):
    s2sad.check_grads(logistic_loss, (W0, B0, INPUTS, TARGETS), order=2, backend=backend)


def test_check_grads_to_order_three():
    """check_grads's compositions to order 3 (jvp and vjp of the generated jvp and vjp sources) against
    finite differences, on the python backend: numba compiles tanh's third derivatives in the tanh tests
    above (reverse over reverse, forward over forward, forward over reverse, against closed forms) and
    check_grads at order 2 in the logistic regression test; these twelve compiles cost ~50 s of CI."""
    s2sad.check_grads(np.tanh, (0.5,), order=3, modes=("fwd", "rev"), backend="python")


def test_check_grads_reports_a_wrong_rule(monkeypatch):
    from s2sad.rules import lookup

    def wrong_sin(g, out, x):
        return (g * np.cos(x) * 1.01,)

    rule = lookup("sin")
    monkeypatch.setattr(rule, "adjoint", wrong_sin)
    monkeypatch.setattr(rule, "_template", None)
    monkeypatch.setattr(rule, "_tangent_template", None)
    x = np.array([0.3, -0.7, 1.1])
    with pytest.raises(AssertionError) as err:
        s2sad.check_grads(uses_sin, (x,), modes=("fwd",), backend="python")
    message = str(err.value)
    assert "jvp (fwd) w.r.t. argument 0 (`x`)" in message
    assert "expected (finite differences)" in message and "actual (s2sad)" in message
    with pytest.raises(AssertionError, match=r"vjp \(rev\) w.r.t. argument 0"):
        s2sad.check_grads(uses_sin, (x,), modes=("rev",), backend="python")


def test_check_grads_validates_its_options():
    with pytest.raises(ValueError, match="modes"):
        s2sad.check_grads(np.tanh, (0.5,), modes=("sideways",))
    with pytest.raises(ValueError, match="order"):
        s2sad.check_grads(np.tanh, (0.5,), order=0)


def test_differentiate_gains_jvp_hessian_and_source_modes():
    decorated = s2sad.differentiate(loop_energy)
    x = np.array([0.3, -1.2, 0.8])
    v = np.array([1.0, 0.0, -1.0])
    out, t = decorated.jvp((x,), (v,))
    assert out == pytest.approx(loop_energy(x), rel=1e-12)
    assert t == pytest.approx(float(decorated.grad(x) @ v), rel=1e-10)
    assert_close(decorated.hessian(x), s2sad.hessian(loop_energy)(x), rtol=1e-12)
    assert "def loop_energy_jvp(x, x_dot):" in decorated.source(mode="fwd")
    second = decorated.source(mode="rev", order=2)
    assert "loop_energy_grad_grad" in second and second.startswith('"""Adjoint')
    with pytest.raises(ValueError, match="mode"):
        decorated.source(mode="sideways")

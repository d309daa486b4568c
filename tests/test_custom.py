"""custom_jvp / custom_vjp: overrides honoured by grad, vjp, jvp and hessian, and shown in the source."""

import numpy as np
import pytest

import s2sad
from custom_functions import (clip_gradient, clipped_loss, log1pexp, norm, normalized_energy, scaled_product,
                              softplus_loss)
from helpers import RTOL_EXACT, assert_close, fd_grad
from seed_functions import log1pexp as plain_log1pexp


def test_log1pexp_seed_behaviour(backend):
    with np.errstate(over="ignore", invalid="ignore"):
        assert s2sad.grad(plain_log1pexp, backend=backend)(5.0) == pytest.approx(0.9933071490757152, rel=RTOL_EXACT)
        assert np.isnan(s2sad.grad(plain_log1pexp, backend=backend)(1000.0))
        d = s2sad.grad(log1pexp, backend=backend)
        assert d(5.0) == pytest.approx(0.9933071490757152, rel=RTOL_EXACT)
        assert d(1000.0) == 1.0
        assert s2sad.jvp(log1pexp, (1000.0,), (1.0,), backend=backend)[1] == 1.0


def test_source_shows_the_override():
    text = s2sad.source(log1pexp)
    assert "def log1pexp_custom_jvp(x, x_dot):" in text
    assert "# ans_dot = (1.0 - 1.0 / (1.0 + np.exp(x))) * x_dot" in text
    assert "log1pexp_custom_lin_vjp(" in text.split("def log1pexp_grad")[1]  # the adjoint calls the rule
    fwd = s2sad.source(log1pexp, mode="fwd")
    assert "log1pexp_custom_jvp(" in fwd.split("def log1pexp_jvp")[1]


def test_custom_jvp_inside_a_function_all_modes(backend):
    w, x = 0.7, np.array([0.5, -2.0, 700.0])
    with np.errstate(over="ignore"):
        g = s2sad.grad(softplus_loss, argnums=(0, 1), backend=backend)(w, x)
        expected_x = w / (1.0 + np.exp(-w * x))
        assert_close(g[1], expected_x, rtol=RTOL_EXACT)
        _, t = s2sad.jvp(softplus_loss, (w, x), (0.0, np.ones(3)), backend=backend)
        assert t == pytest.approx(np.sum(expected_x), rel=RTOL_EXACT)


def test_custom_jvp_with_two_operands_and_higher_order(backend):
    gx, gy = s2sad.grad(scaled_product, argnums=(0, 1), backend=backend)(3.0, 4.0)
    assert (gx, gy) == (8.0, 6.0)
    H = s2sad.hessian(scaled_product, argnums=(0, 1), backend=backend)(3.0, 4.0)
    assert H[0][1] == pytest.approx(2.0) and H[0][0] == 0.0
    d2 = s2sad.grad(s2sad.grad(log1pexp, backend=backend), backend=backend)(0.3)
    assert d2 == pytest.approx(np.exp(0.3) / (1.0 + np.exp(0.3)) ** 2, rel=RTOL_EXACT)  # derivative of the rule


def test_custom_vjp_gradient_clipping_in_grad_and_vjp(backend):
    x = np.array([1.0, 2.0])
    assert_close(s2sad.grad(clipped_loss, backend=backend)(x), [1.0, 1.0], rtol=0)  # 3.0 clipped to 1.0
    _, vjp_fun = s2sad.vjp(clip_gradient, x, backend=backend)
    assert_close(vjp_fun(np.array([5.0, -0.5]))[0], [1.0, -0.5], rtol=0)


def test_custom_vjp_norm_matches_finite_differences(backend):
    x, w = np.array([3.0, -4.0, 1.0]), 0.8
    for i, g in enumerate(s2sad.grad(normalized_energy, argnums=(0, 1), backend=backend)(x, w)):
        assert_close(g, fd_grad(normalized_energy, (x, w), i))
    H = s2sad.hessian(norm, backend=backend)(x)  # forward mode over the generated adjoint, through norm_bwd
    n = np.linalg.norm(x)
    assert_close(H, (np.eye(3) - np.outer(x, x) / n ** 2) / n, rtol=RTOL_EXACT)


def test_custom_vjp_has_no_forward_mode():
    with pytest.raises(TypeError, match="custom_vjp function: it has a reverse-mode rule only"):
        s2sad.jvp(norm, (np.ones(3),), (np.ones(3),))


def test_custom_functions_still_run_and_need_a_rule():
    assert log1pexp(0.0) == pytest.approx(np.log(2.0))

    @s2sad.custom_jvp
    def no_rule(x):
        return x

    with pytest.raises(TypeError, match="has no rule: decorate one with @no_rule.defjvp"):
        s2sad.grad(no_rule)(1.0)


def test_rule_registered_for_another_packages_function(backend):
    from third_party import uses_softsign

    x = np.array([0.3, -1.5, 2.0])
    assert_close(s2sad.grad(uses_softsign, backend=backend)(x), fd_grad(uses_softsign, (x,), 0))
    text = s2sad.source(uses_softsign)
    assert "import third_party\n" in text and "third_party.softsign(mul)" in text
    s2sad.check_grads(uses_softsign, (x,), order=2, backend=backend)


def test_rule_for_a_plain_python_function_compiles(backend):
    """defrule takes the function as the other package defines it, not only an @njit one: numba compiles it
    where generated code calls it, and the package's module keeps its plain function."""
    import inspect

    import third_party
    from third_party import uses_softplus

    x = np.array([0.3, -1.5, 2.0])
    assert_close(s2sad.grad(uses_softplus, backend=backend)(x), fd_grad(uses_softplus, (x,), 0))
    assert "third_party.softplus(mul)" in s2sad.source(uses_softplus)
    assert inspect.isfunction(third_party.softplus) and third_party.softplus(0.0) == np.log(2.0)


def test_missing_rule_names_the_three_ways_out():
    import scipy.special

    from custom_functions import uses_erfcx

    with pytest.raises(s2sad.UnsupportedError) as err:
        s2sad.grad(uses_erfcx)(0.5)
    text = str(err.value)
    assert "no derivative rule for `erfcx`" in text and "custom_functions.py" in text
    assert "@s2sad.custom_jvp" in text and "@s2sad.custom_vjp" in text and "s2sad.rules.defrule" in text
    assert scipy.special.erfcx is not None

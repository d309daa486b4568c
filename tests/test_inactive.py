"""Inactive code runs as written: validation, printing, seeded draws, normalising constants and dtype
plumbing need no derivative rule; gradients checked against finite differences on both backends."""

import inspect
import math
import os
import traceback

import numba
import numpy as np
import pytest

import hostile_functions as H
import inactive_functions as F
import s2sad
from helpers import assert_close, fd_grad

X = np.array([0.3, -1.2, 0.8, 2.0])


def check_grad(f, args, argnums, backend):
    got = s2sad.grad(f, argnums=argnums, backend=backend)(*args)
    for g, k in zip(got if isinstance(argnums, tuple) else (got,), np.atleast_1d(argnums)):
        assert_close(g, fd_grad(f, args, int(k)))


def code(source: str) -> str:
    """Generated source without its comments (which quote the user's lines)."""
    return "\n".join(ln for ln in source.splitlines() if not ln.strip().startswith("#"))


def check_jvp(f, args, backend):
    """Forward mode (jacfwd) along the first argument, against finite differences."""
    assert_close(s2sad.jacfwd(f, argnums=0, backend=backend)(*args), fd_grad(f, args, 0))


def test_raise_in_input_validation(backend):
    args = (100.0, 95.0, 0.5, 0.01, 0.2)
    check_grad(F.black_scholes_call, args, (0, 4), backend)
    check_jvp(F.black_scholes_call, args, backend)
    with pytest.raises(ValueError, match="sigma must be positive"):
        s2sad.grad(F.black_scholes_call, backend=backend)(100.0, 95.0, 0.5, 0.01, -0.2)
    with pytest.raises(ValueError, match=r"T must be positive, got \{T\}"):  # numba raises constant messages
        s2sad.grad(F.black_scholes_call, backend=backend)(100.0, 95.0, -0.5, 0.01, 0.2)


def test_assert_and_finfo_of_the_argument_dtype(backend):
    gamma, beta = np.array([1.0, 0.5, 2.0, 1.5]), np.array([0.1, 0.0, -0.2, 0.3])
    check_grad(F.layer_norm_energy, (X, gamma, beta), (0, 1), backend)
    with pytest.raises(AssertionError, match="one entry per feature"):
        s2sad.grad(F.layer_norm_energy, backend=backend)(X, gamma[:3], beta)
    with pytest.raises(AssertionError):
        s2sad.grad(F.layer_norm_energy, backend=backend)(X[:1], gamma[:1], beta[:1])


def test_hostile_validation_now_differentiates(backend):
    for f in (H.asserts, H.raises, H.prints_value):
        assert s2sad.grad(f, backend=backend)(1.5) == pytest.approx(2.0 if f is not H.prints_value else 1.0)
    with pytest.raises(ValueError, match="negative"):
        s2sad.grad(H.raises, backend=backend)(-1.5)


def test_lgamma_of_data_is_a_constant_in_a_loop(backend):
    args = (np.array([1.5, 2.0, 0.7]), np.array([1.0, 3.0, 0.0]))
    check_grad(F.poisson_nll, args, 0, backend)
    value, _ = s2sad.value_and_grad(F.poisson_nll, backend=backend)(*args)
    assert_close(value, F.poisson_nll(*args))


def test_lgamma_imported_under_another_name(backend):
    check_grad(F.poisson_pmf, (3.0, 2.5), 1, backend)
    assert s2sad.grad(F.poisson_pmf, argnums=1, backend=backend)(3.0, 0.0) == 0.0


def test_calls_on_constants_are_evaluated_when_the_code_is_generated(backend):
    check_grad(F.gaussian_nll, (X, 0.3), 1, backend)
    source = code(s2sad.source(F.gaussian_nll))
    assert "scipy" not in source and "finfo" not in source  # numba has no SciPy: the values are folded
    assert repr(float(np.finfo(float).tiny)) in source


def test_seeded_draws_are_constants_and_never_drawn_again(backend):
    check_grad(F.monte_carlo_second_moment, (0.5, 1.3, 50), (0, 1), backend)
    check_grad(F.noisy_walk, (0.7, 20), 0, backend)
    check_jvp(F.noisy_walk, (0.7, 20), backend)
    adjoint = code(s2sad.source(F.noisy_walk).split("adjoint sweep")[-1])
    assert "np.random" not in adjoint  # the reverse sweep restores the draws from a tape


def test_draws_from_a_generator_the_function_seeds_are_constants():
    """`rng = np.random.default_rng(12)` then `rng.shuffle`, `rng.normal(size=)`, `rng.standard_normal()`: each
    draw runs once, where it is written."""
    check_grad(F.local_generator_walk, (0.7, 15), 0, "python")
    check_jvp(F.local_generator_walk, (0.7, 15), "python")
    assert_close(s2sad.value_and_grad(F.local_generator_walk, backend="python")(0.7, 15)[0],
                 F.local_generator_walk(0.7, 15), rtol=1e-12)


def test_numba_draws_from_a_generator_it_is_given_and_says_so_where_one_is_made():
    with pytest.raises(s2sad.UnsupportedError, match="take it as an argument") as info:
        s2sad.grad(F.local_generator_walk, backend="numba")(0.7, 15)
    assert str(info.value).startswith(_place(F.local_generator_walk, "rng = np.random.default_rng(12)"))
    value, got = s2sad.value_and_grad(F.given_generator_walk, backend="numba")(0.7, 15, np.random.default_rng(12))
    assert_close(value, F.given_generator_walk(0.7, 15, np.random.default_rng(12)), rtol=1e-12)
    assert_close(got, fd_grad(lambda x: F.given_generator_walk(x, 15, np.random.default_rng(12)), (0.7,), 0))


def test_draws_from_the_users_generator_advance_it(backend):
    """A generator passed in, closed over or held by `self` is the one generated code draws from (it drew from
    NumPy's global stream instead): the value is the function's, and the generator moves on as it would."""
    ours, theirs = np.random.default_rng(4), np.random.default_rng(4)
    for _ in range(2):  # the second call draws on from where the first left the generator
        before = theirs.bit_generator.state
        value, got = s2sad.value_and_grad(F.walk_drawing_from(ours), backend=backend)(0.3)
        assert_close(value, F.walk_drawing_from(theirs)(0.3), rtol=1e-12)
        assert_close(got, fd_grad(lambda x: F.walk_drawing_from(_generator_at(before))(x), (0.3,), 0))
    sampler, twin = F.Sampler(8), F.Sampler(8)
    x = np.array([0.2, -0.4, 1.1])
    assert_close(s2sad.grad(sampler.noisy_loss, backend=backend)(x), 2.0 * (x - twin.rng.standard_normal(3)))


def test_every_pass_of_a_jacobian_draws_what_one_call_draws():
    """jacfwd, jacrev and hessian run the function's derivative once per row or column: each pass draws the
    same numbers, and the user's generator moves on as one call of the function moves it."""
    x = np.array([0.3, -0.8, 1.2])
    seeded = lambda: np.random.default_rng(5)  # noqa: E731
    features = lambda y: F.noisy_features(y, seeded())  # noqa: E731
    rng, twin = seeded(), seeded()
    assert_close(s2sad.jacfwd(F.noisy_features, backend="python")(x, rng), _jacobian(features, x))
    F.noisy_features(x, twin)
    assert rng.random() == twin.random()
    assert_close(s2sad.jacrev(F.noisy_features, backend="python")(x, seeded()), _jacobian(features, x))
    gradient = lambda y: s2sad.grad(lambda z: np.sum(features(z)), backend="python")(y)  # noqa: E731
    hessian = s2sad.hessian(lambda z, r: np.sum(F.noisy_features(z, r)), backend="python")(x, seeded())
    assert_close(hessian, _jacobian(gradient, x))


def test_numba_code_passes_its_generator_to_a_gradient():
    g = s2sad.grad(lambda z, r: np.sum(F.noisy_features(z, r)))

    @numba.njit
    def descend(x, rng):
        for _ in range(3):
            x = x - 0.1 * g(x, rng)
        return x

    x, rng = np.array([0.3, -0.8, 1.2]), np.random.default_rng(9)
    expected = x
    for _ in range(3):
        drawing = lambda z: np.sum(F.noisy_features(z, _generator_at(rng.bit_generator.state)))  # noqa: E731
        expected = expected - 0.1 * fd_grad(drawing, (expected,), 0)
        F.noisy_features(expected, rng)
    assert_close(descend(x, np.random.default_rng(9)), expected)


def test_a_legacy_random_state_draws_on_the_python_backend_and_numba_says_what_to_pass():
    got = s2sad.grad(F.given_generator_walk, backend="python")(0.7, 5, np.random.RandomState(3))
    assert_close(got, fd_grad(lambda v: F.given_generator_walk(v, 5, np.random.RandomState(3)), (0.7,), 0))
    with pytest.raises(TypeError, match=r"RandomState, which numba code cannot draw from; pass a np.random.Generator"):
        s2sad.grad(F.given_generator_walk, backend="numba")(0.7, 5, np.random.RandomState(3))


def _jacobian(f, x, h=1e-6):
    return np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)], axis=-1)


def _generator_at(state) -> np.random.Generator:
    made = np.random.default_rng()
    made.bit_generator.state = state
    return made


def test_monte_carlo_pricer_with_a_seed_argument(backend):
    args = (100.0, 1.0, 105.0, 0.05, 0.01, 0.2, 400, 7)
    check_grad(F.mc_call_value, args, (0, 5), backend)
    with pytest.raises(ValueError, match="must be int"):  # the validation is folded: numba sees only the raise
        s2sad.grad(F.mc_call_value, backend=backend)(100.0, 1.0, 105.0, 0.05, 0.01, 0.2, 400.0, 7)


def test_a_draw_nothing_reads_still_runs():
    primal = s2sad.source(F.noisy_walk).split("adjoint sweep")[0]
    assert "unused = np.random.uniform(0.0, 1.0)" in primal.split("def noisy_walk_grad")[1]


def test_print_runs_in_the_primal(backend, capsys):
    X = np.arange(12.0).reshape(4, 3) / 10
    args = (np.array([0.1, 0.2, -0.3]), X, np.array([1.0, 0.0, 2.0, 1.0]))
    check_grad(F.least_squares_verbose, args, 0, backend)
    printed = capsys.readouterr().out
    assert "loss" in printed and "w[0] = 0.1 , n = 4" in printed


def test_dtype_astype_and_dtype_arguments(backend):
    args = (X, np.array([1.0, -1.0, 2.0, 0.0]))
    check_grad(F.masked_energy, args, 0, backend)
    check_jvp(F.masked_energy, args, backend)
    source = s2sad.source(F.masked_energy)
    assert "np.zeros(x_shape_0, dtype=x_dtype" in source and "dtype=np.float64" in source
    assert ".astype(np.int64)" in source


def _place(fn, snippet):
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if snippet in text)
    return f"{F.__file__}:{first + offset}:{lines[offset].index(snippet) + 1}: "


@pytest.mark.parametrize("fn, args, snippet, message, hint", [
    (F.gamma_of_input, (2.5,), "math.gamma(x)", "no derivative rule for `gamma`", "custom_jvp"),
    (F.draw_from_input, (0.5,), "np.random.normal", "draws random numbers from differentiated parameters",
     "mu + sigma * np.random.normal(0.0, 1.0, n)"),
    (F.draw_from_local_generator_at_input, (0.5,), "rng.normal(mu, 1.0)",
     "`rng.normal` draws random numbers from differentiated parameters", "mu + sigma * np.random.normal(0.0, 1.0, n)"),
    (F.partitions_in_place, (X,), "y.partition(1)", "no effect s2sad can differentiate", "`x = np.sort(x)`"),
])
def test_active_calls_without_rules_are_refused_at_the_users_line(fn, args, snippet, message, hint):
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(fn, backend="python")(*args)
    text = str(info.value)
    assert text.startswith(_place(fn, snippet)) and message in text.splitlines()[0], text
    assert hint in text.splitlines()[-1]


def test_active_call_without_rule_is_refused_in_forward_mode_too():
    with pytest.raises(s2sad.UnsupportedError, match="no derivative rule for `gamma`"):
        s2sad.jvp(F.gamma_of_input, (2.5,), (1.0,), backend="python")


def test_inactive_lgamma_of_a_constant_argument():
    f = lambda x, n: x * math.lgamma(n + 1.0)  # noqa: E731
    assert s2sad.grad(f, backend="python")(2.0, 4.0) == pytest.approx(math.lgamma(5.0))


def _s2sad_frames(tb) -> list:
    package = os.path.dirname(s2sad.__file__) + os.sep  # not any path with an `s2sad` folder: a clone may be one
    return [f for f in traceback.extract_tb(tb) if f.filename.startswith(package)]


def test_numba_typing_error_is_an_error_at_the_users_line():
    assert_close(s2sad.grad(F.ellipk_of_length, backend="python")(X), 2.0 * X)  # closed form: uncompiled, it runs
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(F.ellipk_of_length, backend="numba")(X)
    text = str(info.value)
    assert text.startswith(_place(F.ellipk_of_length, "c = scipy.special.ellipk"))
    assert "numba cannot compile the code generated for this line (`c = scipy.special.ellipk(truediv)`)" in text
    assert "'ellipk'" in text and 'backend="python"' in text.splitlines()[-1]
    assert "Failed in nopython mode" not in text and "During:" not in text
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.filename, last.lineno) == (F.__file__, int(_place(F.ellipk_of_length, "c =").split(":")[1]))
    assert len(_s2sad_frames(info.value.__traceback__)) == 1  # the API's own call, nothing below it


def test_refusal_traceback_ends_at_the_users_line():
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(F.gamma_of_input, backend="python")(2.5)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename == F.__file__ and "math.gamma(x)" in last.line
    assert len(_s2sad_frames(info.value.__traceback__)) == 1


def test_branches_on_argument_rank_keep_only_their_live_side(backend):
    grad = s2sad.grad(F.sum_of_squares_any_rank, backend=backend)
    for x in (X, np.float64(1.5), X.reshape(2, 2), X[:3], np.float64(0.5)):  # one transform, each rank in turn
        assert_close(grad(x), fd_grad(F.sum_of_squares_any_rank, (x,), 0))
    check_jvp(F.sum_of_squares_any_rank, (X.reshape(2, 2),), backend)


def test_isinstance_of_an_argument_is_decided_per_argument_type(backend):
    for x in (X, 0.7):
        check_grad(F.weighted_by_type, (x, 1.5), (0, 1), backend)
        check_jvp(F.weighted_by_type, (x, 1.5), backend)
    assert s2sad.grad(F.weighted_by_type, backend=backend)(0.7, 3) == pytest.approx(6.0 * math.cos(0.7))


def test_reading_the_code_of_a_function_that_branches_on_types():
    assert "x_ndim = x.ndim" in s2sad.source(F.sum_of_squares_any_rank)  # without arguments: both sides, as written
    with pytest.raises(s2sad.UnsupportedError, match="`x`'s type decides the code"):
        s2sad.source(F.weighted_by_type)  # isinstance has no run-time form in numba


def test_validation_stays_in_a_cuda_kernel():
    """vmap(target="cuda") on numba's CUDA simulator (tests/conftest.py); closed form (1 - tanh^2) x."""
    X_batch = np.random.default_rng(0).normal(size=(8, 3))
    w = np.array([0.1, -0.2, 0.3])
    g = s2sad.vmap(s2sad.grad(F.tanh_score), in_axes=(None, 0), target="cuda")(w, X_batch)
    expected = (1.0 - np.tanh(X_batch @ w) ** 2)[:, None] * X_batch
    assert_close(g, expected, rtol=1e-7)

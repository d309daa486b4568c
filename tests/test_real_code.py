"""Plumbing real kernels are written with (npbench, polybench, numba-examples shapes), against finite differences."""

import collections
import copy
import dataclasses
import enum
import logging
import math
import typing
import warnings
from math import cos, prod, sqrt

import numba
import numpy as np
import pytest
import scipy.linalg
import scipy.special

import s2sad
from helpers import assert_close, fd_directional, fd_grad


def covariance(data):
    M = data.shape[1]
    N = data.shape[0]
    mean = np.sum(data, axis=0) / N
    data = data - mean
    cov = np.zeros((M, M))
    for i in range(M):
        for j in range(i, M):
            cov[i, j] = cov[j, i] = np.sum(data[:, i] * data[:, j]) / (N - 1.0)
    return np.sum(cov * cov)


def chained_names(x):
    a = b = x * 2.0
    return np.sum(a * b)


def test_chained_assignment_fills_both_targets_with_one_value(backend):
    data = np.random.default_rng(0).normal(size=(5, 3))
    assert_close(s2sad.grad(covariance, backend=backend)(data), fd_grad(covariance, (data,), 0))
    x = np.array([0.5, -1.0])
    assert_close(s2sad.grad(chained_names, backend=backend)(x), 8.0 * x, rtol=1e-12)


def lennard_jones_masked(cluster):
    diff = cluster[:, np.newaxis, :] - cluster[np.newaxis, :, :]
    d = np.sqrt((diff * diff).sum(-1))
    upper = np.triu(d)
    r = upper[upper > 1e-6]
    sr6 = (1.0 / r) ** 6
    return np.sum(4.0 * (sr6 * sr6 - sr6))


def test_a_masked_zero_of_sqrt_adds_nothing_to_the_gradient(backend):
    cluster = np.array([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [0.0, 1.2, 0.1], [0.3, 0.2, 1.15]])
    g = s2sad.grad(lennard_jones_masked, backend=backend)(cluster)
    assert np.all(np.isfinite(g))
    assert_close(g, fd_grad(lennard_jones_masked, (cluster,), 0))


def pair_energy_nan_masked(cluster, eps, sigma):  # self-distances set to nan, the nan energies to 0
    r = np.linalg.norm(cluster[:, None, :] - cluster, axis=-1)
    r[r == 0] = None
    e = 4 * eps * (np.power(r / sigma, -12) - np.power(r / sigma, -6))
    e[np.isnan(e)] = 0
    return np.sum(e)


def inverse_distances_inf_masked(x):  # 1/0 on the diagonal, zeroed after
    with np.errstate(divide="ignore"):
        w = 1.0 / np.abs(x[:, None] - x[None, :])
    w[np.isinf(w)] = 0.0
    return np.sum(w * x)


def test_values_masked_out_after_they_are_nan_or_inf_send_no_nan_back(backend):
    cluster = np.array([[0.0, 0.0, 0.0], [1.15, 0.1, -0.05], [0.2, 1.2, 0.1], [1.0, 1.1, 0.9]])
    g = s2sad.grad(pair_energy_nan_masked, argnums=(0, 1, 2), backend=backend)(cluster, 1.0, 1.1)
    for k, part in enumerate(g):
        assert_close(part, fd_grad(pair_energy_nan_masked, (cluster, 1.0, 1.1), k))
    x = np.array([0.3, 1.1, -0.4, 2.0])
    assert_close(s2sad.grad(inverse_distances_inf_masked, backend=backend)(x),
                 fd_grad(inverse_distances_inf_masked, (x,), 0))


@numba.njit
def quantile_guess(p):  # early returns, each in its own branch
    if p <= 0.0:
        return math.nan
    if p < 0.3:
        return p * 2.0
    return p * p


@numba.vectorize
def solved_or_guessed(y, k):
    if abs(y - 0.5) < 0.1:  # a helper with early returns, inlined in a branch of the loop over the items
        return -2.0 * quantile_guess(y) / k
    x = y
    for _ in range(5):
        x = x - 0.1 * (x * x - y)
    return x * k


def early_returns_in_a_branch(x):
    return np.sum(solved_or_guessed(x, 2.0))


def test_a_helper_with_early_returns_inlined_in_a_branch(backend):
    for x in (np.array([0.2, 0.45, 0.9, 0.55]), np.array([0.2, 0.9])):  # the branch taken; never taken
        assert_close(s2sad.grad(early_returns_in_a_branch, backend=backend)(x),
                     fd_grad(early_returns_in_a_branch, (x,), 0))


def binomial_tree_of_lists(spot, strike, rate, vol, steps=6):  # a triangle of lists over np.arange
    dt = 1.0 / steps
    up = math.exp(vol * math.sqrt(dt))
    down = 1.0 / up
    p = (math.exp(rate * dt) - down) / (up - down)
    v = [[0.0 for j in np.arange(i + 1)] for i in np.arange(steps + 1)]
    for j in np.arange(steps + 1):
        v[steps][j] = max(spot * up**j * down ** (steps - j) - strike, 0.0)
    for i in np.arange(steps - 1, -1, -1):
        for j in np.arange(i + 1):
            held = math.exp(-rate * dt) * (p * v[i + 1][j + 1] + (1.0 - p) * v[i + 1][j])
            v[i][j] = max(held, spot * up**j * down ** (i - j) - strike)
    return v[0][0]


def two_trees(spot, strike, rate, vol):  # the tree's size is known when the code is generated
    return binomial_tree_of_lists(spot, strike, rate, vol) + binomial_tree_of_lists(spot, strike, rate, vol, steps=4)


def test_a_triangle_of_lists_written_item_by_item_is_a_padded_table(backend):
    args = (40.0, 41.5, 0.05, 0.3)
    g = s2sad.grad(two_trees, argnums=(0, 1, 2, 3), backend=backend)(*args)
    assert_close(np.array(g), np.array([fd_grad(two_trees, args, k) for k in range(4)]))


def sum_of_a_list(a):
    b = [1.0, a * a, 2.0]
    return np.sum(b) + np.sum(np.array(np.array([a, 2.0 * a])))


def test_a_list_handed_to_numpy_is_an_array_and_np_array_of_an_array_a_copy(backend):
    assert_close(s2sad.grad(sum_of_a_list, backend=backend)(1.5), 2.0 * 1.5 + 3.0, rtol=1e-12)


def sines_of_a_list(x):
    return np.sum(np.sin(x))


def test_a_list_argument_handed_to_numpy_is_an_array(backend):
    g = s2sad.grad(sines_of_a_list, backend=backend)([1.0, 2.0])
    assert isinstance(g, list)
    assert_close(g, np.cos([1.0, 2.0]), rtol=1e-12)


def covariance_by_slices(data):
    M, n = data.shape[1], data.shape[0]
    data = data - np.sum(data, axis=0) / n
    cov = np.zeros((M, M))
    for i in range(M):  # npbench's covariance: the row's length changes every iteration
        cov[i:M, i] = cov[i, i:M] = data[:, i] @ data[:, i:M] / (n - 1.0)
    return np.sum(cov ** 2)


def test_a_loop_temporary_whose_shape_changes_each_iteration(backend):
    data = np.random.default_rng(1).normal(size=(6, 3))
    assert_close(s2sad.grad(covariance_by_slices, backend=backend)(data), fd_grad(covariance_by_slices, (data,), 0))


def predict(x, P, F, Q, alpha=1.0):
    if np.isscalar(F):  # filterpy's predict, validating its argument
        F = np.array(F)
    x = np.dot(F, x)
    P = (alpha * alpha) * np.dot(np.dot(F, P), F.T) + Q
    return x, P


def update(x, P, z, R, H=None):
    if z is None:
        return x, P
    if H is None:
        H = np.eye(len(x))
    y = z - np.dot(H, x)
    S = np.dot(np.dot(H, P), H.T) + R
    K = np.dot(np.dot(P, H.T), np.linalg.inv(S))
    return x + np.dot(K, y), P - np.dot(np.dot(K, H), P)


F_KALMAN = np.array([[1.0, 0.1], [0.0, 1.0]])


def kalman(x, P, R):
    for k in range(3):
        x, P = predict(x, P, F_KALMAN, 0.01 * np.eye(2))
        x, P = update(x, P, np.array([0.1 * k, 1.0]), R)
        x, P = update(x, P, None, R)
    return np.sum(x ** 2) + np.trace(P)


def test_isscalar_and_is_none_are_decided_when_the_code_is_generated(backend):
    args = (np.array([0.5, 1.0]), np.array([[1.0, 0.1], [0.1, 2.0]]), np.array([[0.3, 0.0], [0.0, 0.4]]))
    g = s2sad.grad(kalman, argnums=(0, 1, 2), backend=backend)(*args)
    for i in range(3):
        assert_close(g[i], fd_grad(kalman, args, i))


def sphere(opposite=False):
    return lambda x: np.sum(x ** 2) * (-1.0 if opposite else 1.0), None


def activation(name):
    if name == "tanh":
        return np.tanh
    if name in ("sine", "sin"):
        return np.sin
    return lambda v: np.maximum(v, 0.0)


def made_by_factories(x):
    f, _ = sphere(True)  # swarm optimizers' benchmark factories
    return f(x) + np.sum(activation("tanh")(x)) + np.sum(activation("sin")(x) * activation("relu")(x))


def test_functions_made_by_factories_are_inlined(backend):
    x = np.array([0.3, -0.7, 1.1])
    assert_close(s2sad.grad(made_by_factories, backend=backend)(x), fd_grad(made_by_factories, (x,), 0))


def branchy_factory(x):
    if x[0] > 0:
        return np.tanh
    return np.sin


def calls_a_runtime_choice(x):
    return np.sum(branchy_factory(x)(x))


def test_a_factory_choosing_at_run_time_is_refused_where_it_returns():
    import pytest

    with pytest.raises(s2sad.UnsupportedError, match="decide which when the code is generated") as info:
        s2sad.grad(calls_a_runtime_choice, backend="python")(np.array([0.5]))
    assert "return np.tanh" in str(info.value)


def none_checked(x, scale=None):
    if x is None or scale is not None:
        return 0.0
    return x * 2.0


def none_sentinel_in_a_loop(x):
    best = np.sum(x)
    for v in x:
        if v > 0.0:
            best = None
    return best


def test_is_none_is_decided_when_the_code_is_generated_and_none_cannot_change_type_at_run_time(backend):
    import pytest

    assert_close(s2sad.grad(none_checked, backend=backend)(1.5), 2.0, rtol=1e-12)
    with pytest.raises(s2sad.UnsupportedError, match="`best` is None on one path"):
        s2sad.grad(none_sentinel_in_a_loop, backend=backend)(np.array([1.5]))


def heads_stacked(x, W):
    heads = []
    for i in range(3):  # a multi-head layer: one head per iteration, stacked after the loop
        heads.append(np.tanh(x * W[i]))
    return np.sum(np.stack(heads, axis=1) ** 2)


def test_a_constant_range_loop_that_appends_to_a_list_is_unrolled(backend):
    x, W = np.array([0.5, 1.0]), np.array([1.0, 2.0, 3.0])
    g = s2sad.grad(heads_stacked, argnums=(0, 1), backend=backend)(x, W)
    assert_close(g[0], fd_grad(heads_stacked, (x, W), 0))
    assert_close(g[1], fd_grad(heads_stacked, (x, W), 1))


def _normalized(row):
    shift = np.max(row)
    e = np.exp(row - shift)
    return e / np.sum(e)


def rows_softmax_stacked(X):  # rows collected in a list, then stacked: the item's rank comes from reductions
    rows = []
    for row in X:
        rows.append(_normalized(row))
    return np.sum(np.array(rows) ** 2) + np.mean(np.max(X, axis=1, keepdims=True) * X.sum(0))


def test_a_list_of_rows_made_through_reductions_is_stacked(backend):
    X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    assert_close(s2sad.grad(rows_softmax_stacked, backend=backend)(X), fd_grad(rows_softmax_stacked, (X,), 0))


def griewank(x):
    return 1 + sum(i ** 2 for i in x) / 4000 - prod([cos(i / sqrt(idx + 1)) for idx, i in enumerate(x)])


def identity_and_prod(x):
    return np.sum((np.identity(x.shape[0]) + np.outer(x, x)) ** 2) + math.prod(x)


def test_math_prod_and_np_identity(backend):
    x = np.array([0.5, -1.2, 2.0])
    for f in (griewank, identity_and_prod):
        assert_close(s2sad.grad(f, backend=backend)(x), fd_grad(f, (x,), 0))


def pairwise_distance(X1, X2, D):  # dpbench's kernel: every step writes into the output argument
    x1 = np.sum(np.square(X1), axis=1)
    x2 = np.sum(np.square(X2), axis=1)
    np.dot(X1, X2.T, D)
    D *= -2
    x3 = x1.reshape(x1.size, 1)
    np.add(D, x3, D)
    np.add(D, x2, D)
    np.sqrt(D, D)


def distances(X1, X2):
    D = np.empty((X1.shape[0], X2.shape[0]))
    pairwise_distance(X1, X2, D)
    y = np.empty_like(D)
    z = np.exp(-D, out=y)
    return np.sum(z * y)


def test_results_written_into_output_arguments(backend):
    rng = np.random.default_rng(0)
    X1, X2 = rng.random((3, 2)), rng.random((4, 2))
    g = s2sad.grad(distances, argnums=(0, 1), backend=backend)(X1, X2)
    assert_close(g[0], fd_grad(distances, (X1, X2), 0))
    assert_close(g[1], fd_grad(distances, (X1, X2), 1))


def add_into(x, A, y):
    x += A @ y  # npbench's mvt: an in-place update of the caller's argument


def updates_its_argument_in_a_helper(x, A, y):
    add_into(x, A, y)
    return np.sum(x ** 2)


def test_a_helper_updating_an_array_argument_in_place_updates_the_callers(backend):
    rng = np.random.default_rng(2)
    x, A, y = rng.random(3), rng.random((3, 3)), rng.random(3)
    kept = x.copy()
    value, g = s2sad.value_and_grad(updates_its_argument_in_a_helper, argnums=(0, 1), backend=backend)(x, A, y)
    assert_close(value, np.sum((kept + A @ y) ** 2), rtol=1e-12)
    assert np.array_equal(x, kept)  # grad never writes into the caller's arrays
    def on_a_copy(x, A, y):  # the plain function writes into its argument
        return updates_its_argument_in_a_helper(x.copy(), A, y)

    assert_close(g[0], fd_grad(on_a_copy, (x, A, y), 0))
    assert_close(g[1], fd_grad(on_a_copy, (x, A, y), 1))


def styblinski_tang(*args):
    args = np.asarray(args)  # benchmark suites taking one number per coordinate
    return np.sum(args ** 4 - 16 * args ** 2 + 5 * args) / 2


def three_coordinates(a, b, c):
    return styblinski_tang(a, b, c)


def test_np_asarray_of_star_args_makes_an_array(backend):
    g = s2sad.grad(three_coordinates, argnums=(0, 1, 2), backend=backend)(0.3, -1.7, 2.2)
    assert_close(np.array(g), [(4 * v ** 3 - 32 * v + 5) / 2 for v in (0.3, -1.7, 2.2)], rtol=1e-12)


class Rosenbrock:
    def __init__(self, a):
        self.a = a
        self.w = np.array([1.0, 2.0])

    def __call__(self, x):
        return np.sum(self.a * (x[1:] - x[:-1] ** 2) ** 2) + np.sum(self.w * x[:2])


ROSENBROCK = Rosenbrock(100.0)


def calls_an_object(x):
    return ROSENBROCK(x) + 1.0


def test_objects_with_a_call_method_are_called_and_differentiated(backend):
    x = np.array([0.5, 1.2, -0.3])
    assert_close(s2sad.grad(calls_an_object, backend=backend)(x), fd_grad(calls_an_object, (x,), 0))
    assert_close(s2sad.grad(Rosenbrock(10.0), backend=backend)(x), fd_grad(Rosenbrock(10.0), (x,), 0))


def black_scholes(S, X, T, r, sigma, option_type='call'):
    d1 = (np.log(S / X) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    if option_type == 'call':  # a string option, defaulted or passed: decided when the code is generated
        price = S * np.exp(-d1 ** 2) - X * np.exp(-r * T) * np.exp(-d2 ** 2)
    elif option_type == 'put':
        price = X * np.exp(-r * T) * np.exp(-d2 ** 2) - S * np.exp(-d1 ** 2)
    return price


def both_options(S, sigma):
    return np.sum(black_scholes(S, 100.0, 0.75, 0.03, sigma)) + np.sum(black_scholes(S, 100.0, 0.75, 0.03, sigma, 'put'))


def test_string_options_of_helpers_choose_the_branch(backend):
    S = np.array([95.0, 100.0, 110.0])
    g = s2sad.grad(both_options, argnums=(0, 1), backend=backend)(S, 0.25)
    assert_close(g[0], fd_grad(both_options, (S, 0.25), 0))
    assert_close(g[1], fd_grad(both_options, (S, 0.25), 1))


def copies_parameters(w, b):
    w2 = copy.deepcopy(w)  # a training loop keeps its initial parameters
    b2 = copy.copy(b)
    w2[0] = 3.0 * b2
    return np.sum(w2 ** 2) + b2


def test_copy_and_deepcopy_of_arrays_and_numbers(backend):
    w = np.array([1.0, 2.0])
    g = s2sad.grad(copies_parameters, argnums=(0, 1), backend=backend)(w, 0.5)
    assert_close(g[0], [0.0, 4.0], rtol=1e-12)
    assert_close(g[1], 18.0 * 0.5 + 1.0, rtol=1e-12)


LOGGER = logging.getLogger("s2sad-tests")


def gp_marginal_likelihood(K, y):
    LOGGER.debug(f"Computing cholesky of {K.shape[0]}x{K.shape[0]} matrix")  # left out of generated code
    L, lower = scipy.linalg.cho_factor(K + 1e-10 * np.eye(K.shape[0]))
    c = scipy.linalg.cho_solve((L, lower), y)
    return -0.5 * (np.dot(c, y) + 2 * np.sum(np.log(np.diagonal(L))))


def gp_by_triangular_solves(K, y):
    L = scipy.linalg.cholesky(K, lower=True)
    alpha = scipy.linalg.solve_triangular(L.T, scipy.linalg.solve_triangular(L, y, lower=True), lower=False)
    upper = scipy.linalg.cholesky(K)  # SciPy's default: the upper factor, read from K's upper triangle
    z = scipy.linalg.solve_triangular(upper, y, trans="T")
    return -0.5 * y @ alpha - np.sum(np.log(np.diag(L))) + np.sum(z ** 2) + scipy.linalg.det(K)


def test_scipy_linalg_factors_and_solves_of_a_gaussian_process(backend):
    rng = np.random.default_rng(0)
    A = rng.random((4, 4))
    K, y = A @ A.T + 4.0 * np.eye(4), rng.random(4)
    for f in (gp_marginal_likelihood, gp_by_triangular_solves):
        g = s2sad.grad(f, argnums=(0, 1), backend=backend)(K, y)
        assert_close(g[0], fd_grad(f, (K, y), 0))
        assert_close(g[1], fd_grad(f, (K, y), 1))


def lennard_jones_where(x, sigma=1.0, eps=1.0):
    dx = x[:, np.newaxis, :] - x[np.newaxis, :, :]
    d = np.sqrt((dx ** 2).sum(axis=2))
    dinv = np.zeros_like(d)
    idx = np.where(d != 0.0)  # the self pairs are left out by position
    dinv[idx] = 1.0 / d[idx]
    sdi6 = (sigma * dinv) ** 6
    return 0.5 * np.sum(4 * eps * (sdi6 ** 2 - sdi6)) + np.sum(x[np.nonzero(x > 0.55)])


def uses_where_positions_as_numbers(x):
    idx = np.where(x > 0)
    return np.sum(x[idx[0]])


def uses_row_positions_alone(x):
    rows = np.where(x > 0.25)[0]  # of a 2-D condition: one of two index arrays
    return np.sum(x[rows])


def test_np_where_of_a_condition_indexes_as_the_mask(backend):
    import pytest

    x = np.array([[0.2, 0.3, 0.1], [1.3, 0.2, 0.4], [0.4, 1.4, 0.2], [0.3, 0.5, 1.5]])
    assert_close(s2sad.grad(lennard_jones_where, backend=backend)(x), fd_grad(lennard_jones_where, (x,), 0))
    row = x[0]  # of a 1-D condition, np.where's only index array is np.flatnonzero's
    assert_close(s2sad.grad(uses_where_positions_as_numbers, backend=backend)(row),
                 fd_grad(uses_where_positions_as_numbers, (row,), 0))
    with pytest.raises(s2sad.UnsupportedError, match=r"np.where\(condition\) / np.nonzero / np.diag_indices serve"):
        s2sad.grad(uses_row_positions_alone, backend=backend)(x)


def list_shapes_and_ndarray(x):
    X = np.zeros([3, len(x)])  # a list shape, as NumPy code writes it
    c = np.ndarray((2, len(x)), dtype=x.dtype)  # npbench's uninitialized buffers
    c[:] = 1.0
    X[0] = x * 2.0
    X[1:] = c * x
    return np.sum(X ** 2)


def test_a_list_shape_and_the_ndarray_constructor(backend):
    x = np.array([1.0, 2.0])
    assert_close(s2sad.grad(list_shapes_and_ndarray, backend=backend)(x), 12.0 * x, rtol=1e-12)


def kalman_gain(P, H, S):
    try:  # filterpy's update: the except branch handles a 1-D S, which this S is not
        K = np.dot(np.dot(P, H.T), np.linalg.inv(S))
    except Exception:
        K = np.dot(np.dot(P, H.T), 1.0 / S)
    else:
        K = K * 2.0
    finally:
        K = K + 1.0
    return np.sum(K ** 2)


def test_try_runs_the_path_on_which_nothing_raises(backend):
    P, H, S = np.array([[1.0, 0.1], [0.1, 2.0]]), np.array([[1.0, 0.0]]), np.array([[0.5]])
    g = s2sad.grad(kalman_gain, argnums=(0, 2), backend=backend)(P, H, S)
    assert_close(g[0], fd_grad(kalman_gain, (P, H, S), 0))
    assert_close(g[1], fd_grad(kalman_gain, (P, H, S), 2))


def reshape_z(z, x):
    z = np.atleast_2d(z)  # filterpy's reshape_z: a row becomes a column
    if z.shape[1] == 3:
        z = z.T
    if z.shape != (3, 1):
        raise ValueError("z must be convertible to shape (3, 1)")
    if x.shape == (2,):
        return np.sum(z * x[0] * np.arange(1.0, 4.0)[:, None]) + x[1]
    return np.sum(z)


def test_shapes_compare_with_tuples_and_a_transposed_rebinding_keeps_its_adjoint_shape(backend):
    z, x = np.array([1.0, 2.0, 3.0]), np.array([2.0, 5.0])
    g = s2sad.grad(reshape_z, argnums=(0, 1), backend=backend)(z, x)
    assert_close(g[0], [2.0, 4.0, 6.0], rtol=1e-12)
    assert_close(g[1], [14.0, 1.0], rtol=1e-12)


def gain_by_matrix_power(P, H, R):
    K = P @ H.T @ np.linalg.matrix_power((H @ P @ H.T + R), -1)  # a Kalman gain, as some filters write it
    M = np.linalg.matrix_power(P, 3) + np.linalg.matrix_power(P, 0) + np.linalg.multi_dot([P, H.T, H])
    return np.sum(K ** 2) + np.sum(M)


def test_matrix_power_and_multi_dot_are_products_written_out(backend):
    P, H, R = np.array([[1.0, 0.1], [0.1, 2.0]]), np.array([[1.0, 0.5]]), np.array([[0.5]])
    g = s2sad.grad(gain_by_matrix_power, argnums=(0, 2), backend=backend)(P, H, R)
    assert_close(g[0], fd_grad(gain_by_matrix_power, (P, H, R), 0))
    assert_close(g[1], fd_grad(gain_by_matrix_power, (P, H, R), 2))


def rk4_rows_by_append(x0):
    X = np.array([x0])  # master-csmi's RK4: the trajectory grows by np.append until the time runs out
    t = 0.0
    while t + 0.1 <= 0.5:
        X = np.append(X, [X[-1] * 1.1 + np.sin(X[-1])], axis=0)
        t += 0.1
    return np.sum(X[-1] ** 2)


def appended_flat(x):
    y = np.append(x, 2.0 * x[0])  # no axis: both flattened first
    return np.sum(np.append(y, np.array([[x[1], 3.0]])) ** 3)


def test_np_append_is_np_concatenate(backend):
    x = np.array([1.0, 2.0])
    for f in (rk4_rows_by_append, appended_flat):
        assert_close(s2sad.grad(f, backend=backend)(x), fd_grad(f, (x,), 0))


def merton_call(s, sigma, lam, n_terms):
    price = 0.0  # Merton's jump-diffusion price: a Poisson-weighted series of Black-Scholes prices
    for n in range(n_terms):
        sig_n = np.sqrt(sigma ** 2 + n * 0.01 / 0.5)
        price += np.exp(-lam * 0.5) * (lam * 0.5) ** n / math.factorial(n) * s * sig_n
    return price


def test_math_factorial_of_a_loop_counter_compiles(backend):
    args = (100.0, 0.2, 0.4, 30)  # 30! is past int64: numba computes it as a float
    for i in (0, 1, 2):
        assert_close(s2sad.grad(merton_call, argnums=i, backend=backend)(*args), fd_grad(merton_call, args, i))


def rotation_and_constant_tables(x):
    c, s = np.cos(x[0]), np.sin(x[0])
    R = np.array([[c, -s], [s, c]])
    dt = 0.1
    F = np.array([[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    H = np.array([[1, 0], [0, 1]], dtype=float)
    stacked = np.array([[x, 2.0 * x], [x * x, x]])  # rows of arrays: a 3-D array
    return np.sum(R @ x) + np.sum(F @ np.concatenate((x, x))) + np.sum(H @ x) + np.sum(stacked ** 2)


def test_np_array_of_nested_lists_stacks_rows_and_keeps_constant_tables(backend):
    x = np.array([0.3, -0.7])
    assert_close(s2sad.grad(rotation_and_constant_tables, backend=backend)(x),
                 fd_grad(rotation_and_constant_tables, (x,), 0))


def another_name_for_an_argument(p, v):
    q = p
    q += 0.5 * v
    return np.sum(p * p) + np.sum(q)


def another_name_for_a_copy(p, v):
    pos = p.copy()
    q = pos
    q += 0.5 * v
    return np.sum(pos * pos) + np.sum(q)


def another_name_for_arithmetic(p, v):
    pos = p * 1.0
    q = pos
    q += 0.5 * v
    return np.sum(pos * pos) + np.sum(q)


def another_name_for_a_number(p, v):
    a = p[0] * 1.0
    b = a
    b += v[0]
    return a * b


def test_an_update_through_another_name_for_an_array_is_refused_not_silently_wrong():
    x = np.array([0.3, -0.2, 0.5])
    for fn in (another_name_for_an_argument, another_name_for_a_copy, another_name_for_arithmetic):
        with pytest.raises(s2sad.UnsupportedError, match=r"augmented assignment of `q` changes memory that `p"):
            s2sad.grad(fn, backend="python")(x, x + 1.0)
    # a number updated through a second name is rebound, as in Python: no sharing, a right gradient
    assert_close(s2sad.grad(another_name_for_a_number, backend="python")(x, x + 1.0),
                 fd_grad(another_name_for_a_number, (x, x + 1.0), 0))


def poisson_nll(obs, exp):
    from scipy.special import loggamma
    import numpy.linalg as la
    return np.sum(-(obs * np.log(exp) - exp - loggamma(obs + 1))) + la.norm(exp)


def sabr_like(F, K):
    if F is K:
        return F * 2.0
    return F * K


def batchnorm_like(x, gamma, params):
    mode = params["mode"]
    eps = params.get("eps", 1e-5)
    out = None
    if mode == "train":
        out = gamma * (x - np.mean(x)) / np.sqrt(np.var(x) + eps)
    elif mode == "test":
        out = gamma * x
    params["running"] = np.mean(x)
    return np.sum(out ** 2) + params["running"]


def trains_a_batchnorm(x, gamma):
    return batchnorm_like(x, gamma, {"mode": "train"})


def picks_with_range(X, y):
    p = np.exp(X) / np.sum(np.exp(X), axis=1, keepdims=True)
    return -np.sum(np.log(p[range(X.shape[0]), y]))


def test_imports_identity_dict_get_string_modes_and_range_indexes():
    x = np.array([1.5, 2.0, 0.5])
    for i in (0, 1):
        assert_close(s2sad.grad(poisson_nll, argnums=i, backend="python")(x, x + 1.0),
                     fd_grad(poisson_nll, (x, x + 1.0), i))
    assert_close(s2sad.grad(sabr_like, backend="python")(1.5, 2.5), 2.5)  # two arguments: two objects
    g = s2sad.grad(trains_a_batchnorm, argnums=(0, 1), backend="python")(x, 0.7)
    assert_close(g[0], fd_grad(trains_a_batchnorm, (x, 0.7), 0))
    assert_close(g[1], fd_grad(trains_a_batchnorm, (x, 0.7), 1))
    X, y = np.random.default_rng(3).normal(size=(4, 3)), np.array([2, 0, 1, 2])
    assert_close(s2sad.grad(picks_with_range, backend="python")(X, y), fd_grad(picks_with_range, (X, y), 0))


SOFTENING = 0.01


def body_body_interaction(force, pos_mass0, pos_mass1):
    r = pos_mass1[:3] - pos_mass0
    dist_sqr = (r * r).sum()
    dist_sqr += SOFTENING
    inv_dist = np.sqrt(dist_sqr)
    s = pos_mass1[3] * inv_dist * inv_dist * inv_dist
    force += r * s


def integrate(position_out, position_in, velocity, delta_time, n):  # numba-examples' legacy n-body
    for i in range(n):
        p = position_in[i][:3]
        f = np.zeros(3)
        for j in range(i):
            body_body_interaction(f, p, position_in[j])
        inv_mass = position_in[i, 3]
        v = velocity[i]
        v += f * inv_mass * delta_time
        p += v * delta_time
        position_out[i, :3] = p
        position_out[i, 3] = inv_mass
        velocity[i] = v


def nbody_step(position_in, velocity, delta_time):
    out = np.zeros_like(position_in)
    integrate(out, position_in, velocity, delta_time, position_in.shape[0])
    return np.sum(out ** 2) + np.sum(position_in ** 2) + np.sum(velocity)


def nbody_step_on_copies(position_in, velocity, delta_time):
    return nbody_step(position_in.copy(), velocity.copy(), delta_time)


def rows_updated_through_views(m, v):
    a = np.zeros((3, 2))
    for i in range(m.shape[0]):
        r = m[i]
        r += v * i
        q = a[i]
        q += m[i] * m[i]
    e = m[1]
    e += 1.0  # an element of a row of m: m is 2-D, so `m[1]` is a row and this writes into m
    s = v[0]
    s += 2.0  # an element of a vector: a number, rebound
    return np.sum(m ** 2) + np.sum(a) * s


def row_of_a_product(a, b):
    m = np.tile(a @ b, (2, 1))  # an array whose rank lowering does not follow
    r = m[0]
    r += 1.0
    return np.sum(m)


def test_an_update_through_a_view_writes_into_the_viewed_array(backend):
    rng = np.random.RandomState(6)
    pos = np.hstack([rng.randn(4, 3), 1.0 + rng.rand(4, 1)])
    vel = 0.1 * rng.randn(4, 3)
    for i in (0, 1):
        assert_close(s2sad.grad(nbody_step_on_copies, argnums=i, backend=backend)(pos, vel, 0.0167),
                     fd_grad(nbody_step_on_copies, (pos, vel, 0.0167), i))
    before = (pos.copy(), vel.copy())
    s2sad.grad(nbody_step, argnums=(0, 1), backend=backend)(pos, vel, 0.0167)  # grad leaves the arrays alone
    np.testing.assert_array_equal(pos, before[0])
    np.testing.assert_array_equal(vel, before[1])
    m, v = rng.randn(3, 2), rng.randn(2)
    f = lambda m, v: rows_updated_through_views(m.copy(), v.copy())  # noqa: E731 (the function writes into m)
    for i in (0, 1):
        assert_close(s2sad.grad(f, argnums=i, backend="python")(m, v), fd_grad(f, (m, v), i))


def test_an_update_of_a_row_of_an_array_of_unknown_rank_is_refused():
    a = np.ones((2, 2))
    message = r"`r \+= \.\.\.` of `r = m\[\.\.\.\]`: s2sad cannot tell whether `r` is a row of `m`"
    with pytest.raises(s2sad.UnsupportedError, match=message):
        s2sad.grad(row_of_a_product, backend="python")(a, a)


def rows_after_a_branch(x, v):
    if x > 2.0:
        v = np.tanh(0.5 + v)  # both paths leave `v` a vector: its items are numbers
    for i, e in enumerate(v):
        e += x * i  # a number: `v` is left alone
    return x * np.sum(v ** 2)


def test_an_array_rebound_in_a_branch_keeps_the_rank_both_paths_give(backend):
    v = np.array([0.3, -0.7, 1.1])
    for x in (1.0, 3.0):
        for i in (0, 1):
            assert_close(s2sad.grad(rows_after_a_branch, argnums=i, backend=backend)(x, v),
                         fd_grad(rows_after_a_branch, (x, v), i))


def kalman_update(state, measurement, model):
    if measurement.ndim == 1:  # a row of zs is made a column
        measurement = np.expand_dims(measurement, axis=1)
    return state + 0.5 * (measurement - model @ state)


def measurement_update(zs, x, H):
    for z in zs:
        x = kalman_update(x, z, H)
    y = x @ x.T
    if y.ndim == 1:  # a product of 2-D arrays is 2-D: this side is left out
        y = np.outer(y, y)
    return np.sum(x ** 2) + np.sum(y)


def test_the_rank_of_a_row_or_a_product_decides_an_ndim_branch(backend):
    zs, x, H = np.array([[0.6], [0.75], [0.9]]), np.array([[0.5], [1.0]]), np.array([[1.0, 0.0]])
    for i in (0, 1):
        assert_close(s2sad.grad(measurement_update, argnums=i, backend=backend)(zs, x, H),
                     fd_grad(measurement_update, (zs, x, H), i))


def column_of_itself_in_a_branch(x):
    z = np.atleast_2d(x * 2.0)
    if x[0] > 0:
        z = z[:, 0]  # filterpy's reshape_z: the name reads itself, and its shape changes
    return np.sum(z ** 2)


def picks_of_itself_in_a_branch(x):
    z = np.atleast_2d(x * 2.0).T
    if x[0] > 0:
        z = z[np.array([0, 0, 1])]
    return np.sum(z ** 3)


def test_a_read_of_itself_in_a_branch_sends_the_adjoint_in_the_old_shape(backend):
    x = np.array([1.5, 2.0])
    assert_close(s2sad.grad(picks_of_itself_in_a_branch, backend=backend)(x),
                 fd_grad(picks_of_itself_in_a_branch, (x,), 0))
    assert_close(s2sad.grad(column_of_itself_in_a_branch, backend="python")(x),  # numba: one rank per name
                 fd_grad(column_of_itself_in_a_branch, (x,), 0))


def predict_with_defaults(x, F, B=1, u=0):
    return np.dot(F, x) + np.dot(B, u)  # filterpy's defaults: dot(1, 0) is the number 0


def folds_calls_on_numbers(x):
    F = np.array([[1.0, 0.1], [0.0, 1.0]])
    return np.sum(predict_with_defaults(x, F) ** 2) + np.sqrt(2.0) * np.float32(1.5) * x[0]


def test_a_numpy_call_on_numbers_known_when_the_code_is_generated_is_a_number(backend):
    x = np.array([0.5, -1.0])
    assert_close(s2sad.grad(folds_calls_on_numbers, backend=backend)(x), fd_grad(folds_calls_on_numbers, (x,), 0))


def shifted_products(x):
    out = np.zeros_like(x)
    if x.shape[0] < 2:  # ti_numba's helpers: an early `return out` before the writes into `out`
        return out
    for i in range(1, x.shape[0]):
        out[i] = x[i - 1] * x[i]
    return out


def sum_of_shifted_squares(x):
    return np.sum(shifted_products(x) ** 2)


def scaled_outer(x):
    return 2.0 * np.outer(x, x)


def jittered_kernel(x):
    K = scaled_outer(x)  # a helper's fresh result: the write below reaches no other name
    K[0, 0] += 1.0
    return np.sum(K ** 2)


def scaled_by_epsilon(x, ϵ):  # noqa: PLC2401 (Python reads this name as `ε`, NFKC-normalized)
    return np.sum(x / ϵ)


def calls_with_epsilon(x, e):
    return scaled_by_epsilon(x, e) * e * e


def test_a_helper_writing_after_an_early_return_and_a_helper_result_written_into(backend):
    x = np.array([0.4, -1.3, 0.9, 2.0])
    for f in (sum_of_shifted_squares, jittered_kernel):
        assert_close(s2sad.grad(f, backend=backend)(x), fd_grad(f, (x,), 0))
    assert_close(s2sad.grad(sum_of_shifted_squares, backend="python")(x[:1]), np.zeros(1))


def test_a_parameter_name_python_normalizes_is_read_as_python_reads_it():
    x = np.array([0.4, -1.3, 0.9])
    for i in (0, 1):
        assert_close(s2sad.grad(calls_with_epsilon, argnums=i, backend="python")(x, 1.7),
                     fd_grad(calls_with_epsilon, (x, 1.7), i))


def gaussian_nll_of_pairs(p, mu):
    llk = []  # kulprit's likelihood: one number per pair, summed after the loop
    for y, m in zip(p, mu):
        llk.append(0.5 * (y - m) ** 2)
    return -sum(llk) + np.mean(np.array(llk)) * len(llk)


def nll_of_recorded_points(mu):
    return gaussian_nll_of_pairs(np.array([0.3, -0.2, 1.1]), mu)  # the data written out, as np.array([...])


def euler_trajectory(y0, k):
    ys = [y0]  # the states, as an integrator keeps them: one row per step
    y = y0
    for _ in range(1, 6):
        y = y - 0.1 * k * y * y
        ys.append(y)
    return np.sum(np.array(ys) ** 2)


def runge_kutta_rows(time_steps, y0, rhs, k):
    ys = [y0]  # haos_TS's integrator: an argument's state first, then one per step of a run-time count
    for t in range(len(time_steps) - 1):
        dt = time_steps[t + 1] - time_steps[t]
        y0 = y0 + dt * rhs(y0, k)
        ys.append(y0)
    return np.array(ys)


def decay_rate(y, k):
    return -k * y * y


def trajectory_energy(time_steps, y0, k):
    return np.sum(runge_kutta_rows(time_steps, y0, decay_rate, k) ** 2)


def decayed_values(k, y0):
    ys = [1.0]  # a number first, then one per step
    y = y0
    for _ in range(4):
        y = y - 0.1 * k * y
        ys.append(y)
    return np.sum(np.array(ys) ** 2) + sum(ys)


def stacked_copies(x, n):
    out = np.zeros((n,) + x.shape)  # a tuple joined with an array's shape
    for i in range(n):
        out[i] = x * (i + 1)
    return np.sum(np.sin(out))


def test_a_list_a_runtime_loop_appends_to_is_an_array(backend):
    p, mu = np.array([0.3, 1.2, -0.4]), np.array([0.1, 0.5, 0.2])
    for i in (0, 1):
        assert_close(s2sad.grad(gaussian_nll_of_pairs, argnums=i, backend=backend)(p, mu),
                     fd_grad(gaussian_nll_of_pairs, (p, mu), i))
        assert_close(s2sad.grad(euler_trajectory, argnums=i, backend=backend)(p, 0.7),
                     fd_grad(euler_trajectory, (p, 0.7), i))
    assert_close(s2sad.grad(nll_of_recorded_points, backend=backend)(mu), fd_grad(nll_of_recorded_points, (mu,), 0))
    assert_close(s2sad.grad(stacked_copies, backend=backend)(p, 3), fd_grad(stacked_copies, (p, 3), 0))
    for i in (0, 1):
        assert_close(s2sad.grad(decayed_values, argnums=i, backend=backend)(0.7, 2.0),
                     fd_grad(decayed_values, (0.7, 2.0), i))
    steps = np.linspace(0.0, 0.5, 6)  # the list's first item is an argument's array: its rank comes with its type
    for i in (1, 2):
        assert_close(s2sad.grad(trajectory_energy, argnums=i, backend=backend)(steps, p, 0.7),
                     fd_grad(trajectory_energy, (steps, p, 0.7), i))


def grows_by_matrices(x, w):
    S = []
    for k in range(len(w)):
        S.append(w[k] * np.outer(x, x))
    return np.sum(np.array(S))


def covariances_of_components(x, w):
    Sigma = []  # an EM m-step: one matrix per component, then np.array of the list
    for k in range(len(w)):
        S_k = np.zeros((len(x), len(x)))
        S_k += w[k] * np.outer(x, x)
        Sigma.append(S_k)
    Sigma = np.array(Sigma)
    return np.sum(Sigma * Sigma) + np.sum(Sigma[:, 0, 1])


def grows_by_tiles(x, w):
    S = []
    for k in range(len(w)):
        S.append(np.tile(x * w[k], (2, 1)))  # a rank lowering does not follow
    return np.sum(np.array(S))


def test_a_list_grown_by_arrays_is_allocated_by_the_first_pass(backend):
    x, w = np.array([0.3, 1.2, -0.4]), np.array([0.5, -1.0])
    for f in (grows_by_matrices, covariances_of_components):
        for i in (0, 1):
            assert_close(s2sad.grad(f, argnums=i, backend=backend)(x, w), fd_grad(f, (x, w), i))
    with pytest.raises(s2sad.UnsupportedError, match="`S` grows by one item per pass.*needs the rank"):
        s2sad.grad(grows_by_tiles, backend="python")(x, w)


class SoftmaxLoss:
    def __init__(self, n, k):
        self.onehot = np.zeros((n, k))

    def forward(self, z, label):
        n = z.shape[0]
        self.onehot[np.arange(n), label] = 1.0  # the layer keeps its one-hot labels as state
        e = np.exp(z - np.max(z, axis=1, keepdims=True))
        p = e / np.sum(e, axis=1, keepdims=True)
        return -np.sum(self.onehot * np.log(p)) / n


class PaddedFilter:
    def __init__(self, b, n):
        self.b = np.zeros(n)
        self.b[self.b.size - len(b):] = b  # filter1's coefficients, right-aligned in a longer buffer

    def response(self, x):
        return np.sum(self.b * x)


def filter_energy(b, x):
    return PaddedFilter(b, 5).response(x) ** 2


def lotka_volterra_rows(a, b, n):
    X0 = [a, b]
    X = np.zeros((n, 2))
    X[0] = X0  # a list stored into a row
    for i in range(1, n):
        x, y = X[i - 1]
        X[i] = [x + 0.1 * (x - x * y), y + 0.1 * (x * y - y)]
    return np.sum(X ** 2)


def test_writes_into_array_attributes_and_lists_stored_into_rows(backend):
    layer, label = SoftmaxLoss(3, 4), np.array([0, 2, 1])
    z = np.random.default_rng(3).normal(size=(3, 4))
    assert_close(s2sad.grad(lambda z: layer.forward(z, label), backend=backend)(z),
                 fd_grad(lambda z: SoftmaxLoss(3, 4).forward(z, label), (z,), 0))
    assert not layer.onehot.any()  # the caller's object keeps its own array, as grad keeps arguments
    b, x = np.array([0.5, -0.3]), np.arange(5.0)
    for i in (0, 1):
        assert_close(s2sad.grad(filter_energy, argnums=i, backend=backend)(b, x), fd_grad(filter_energy, (b, x), i))
        assert_close(s2sad.grad(lotka_volterra_rows, argnums=i, backend=backend)(0.5, 0.7, 5),
                     fd_grad(lotka_volterra_rows, (0.5, 0.7, 5), i))


def relative_strength(up, down):
    rs = np.divide(up, down, out=np.zeros_like(up), where=down != 0)  # piker's RSI: 0 where down is 0
    return np.sum(100.0 - 100.0 / (1.0 + rs))


def masked_into_local(a, b):
    d = np.ones_like(a)
    np.divide(a, b, out=d, where=b > 0.5)
    np.sqrt(d, out=d)
    return np.sum(d * a)


def test_a_ufunc_with_where_and_a_new_output_array(backend):
    up, down = np.array([0.5, 1.0, 0.2, 0.7]), np.array([0.3, 0.0, 0.6, 1.1])
    d_up, d_down = s2sad.grad(relative_strength, argnums=(0, 1), backend=backend)(up, down)
    assert_close(d_up, fd_grad(relative_strength, (up, down), 0))
    kept = down != 0  # where down is 0 the output is the constant 0: no nan, no inf, a zero derivative
    assert_close(d_down[kept], fd_grad(relative_strength, (up, down), 1)[kept])
    assert d_down[~kept] == 0.0
    for i in (0, 1):
        assert_close(s2sad.grad(masked_into_local, argnums=i, backend=backend)(up, down),
                     fd_grad(masked_into_local, (up, down), i))


@numba.vectorize([numba.float32(numba.float32), numba.float64(numba.float64)])
def cubic_spline_kernel(q):  # meshoid's kernel, a scalar branchy function numba makes a ufunc
    if q <= 0.5:
        return 1 - 6 * q * q + 6 * q * q * q
    elif q <= 1.0:
        return 2 * (1 - q) ** 3
    return 0.0


@numba.vectorize
def shifted_sine(a, h):
    return a * h + np.sin(a)


def kernel_density(r, h):
    return (np.sum(cubic_spline_kernel(r / h)) / h ** 3 + np.sum(shifted_sine(r, h))
            + np.sum(shifted_sine(r, r * h)) + cubic_spline_kernel(0.3 * h))


def test_a_numba_vectorize_function_runs_item_by_item_on_arrays(backend):
    r = np.array([[0.1, 0.4], [0.7, 0.9], [1.2, 0.2]])
    for i in (0, 1):
        assert_close(s2sad.grad(kernel_density, argnums=i, backend=backend)(r, 1.1),
                     fd_grad(kernel_density, (r, 1.1), i))


def pair_distances(cluster):
    diff = (cluster.reshape(cluster.shape[0], 1, cluster.shape[1]) -  # numba-examples' LJ without np.newaxis
            cluster.reshape(1, cluster.shape[0], cluster.shape[1]))
    mat = diff * diff
    out = np.empty(mat.shape[:2], dtype=mat.dtype)
    for i in np.ndindex(out.shape):  # `i` a tuple, the shape's rank followed through the reshapes
        out[i] = mat[i].sum()
    return np.sum(np.sqrt(out + 1.0))


def test_an_ndindex_over_a_shape_whose_rank_follows_from_reshapes(backend):
    cluster = np.array([[0.0, 0.1, 0.3], [1.0, 0.2, -0.4], [0.3, 1.1, 0.5]])
    assert_close(s2sad.grad(pair_distances, backend=backend)(cluster), fd_grad(pair_distances, (cluster,), 0))


def pairwise_differences(x, sigma):
    D = np.zeros((len(x), len(x)))
    D[:] = x
    D.T[:] -= x.T  # alexis-roche's GP: a write through the transposed view, D[j, i] = x[i] - x[j]
    E = np.ones((2, 3))
    E.T[:] = x[:2]  # a row broadcast over the transposed view: E's columns
    return np.sum(np.exp(-0.5 * D ** 2 / sigma ** 2)) + np.sum(E * np.arange(6.0).reshape(2, 3))


def test_a_write_through_a_transposed_view(backend):
    x = np.array([0.3, 1.1, -0.4, 0.8])
    for i in (0, 1):
        assert_close(s2sad.grad(pairwise_differences, argnums=i, backend=backend)(x, 1.3),
                     fd_grad(pairwise_differences, (x, 1.3), i))


def smoothed(y, alpha, ylast=None):
    s = np.empty(y.shape[0])
    if y.shape[0] == 1:
        s[0] = y[0] * alpha + ylast * (1 - alpha)  # piker's ema: None here raises, as Python would
    else:
        s[0] = y[0] if ylast is None else ylast
        for i in range(1, y.shape[0]):
            s[i] = y[i] * alpha + s[i - 1] * (1 - alpha)
    return np.sum(s ** 2)


def test_arithmetic_on_none_raises_on_the_path_that_does_it(backend):
    y = np.array([0.3, 1.2, -0.4, 0.8])
    for i in (0, 1):
        assert_close(s2sad.grad(smoothed, argnums=i, backend=backend)(y, 0.3), fd_grad(smoothed, (y, 0.3), i))
    with pytest.raises(TypeError):
        s2sad.grad(smoothed, backend="python")(y[:1], 0.3)


def scattered_outer_products(data, resp):
    Sigma = []
    for k in range(resp.shape[1]):
        S_k = np.zeros((data.shape[1], data.shape[1]))
        for n in range(data.shape[0]):  # S_k's rank stays 2 through the in-place updates of the inner loop
            diff = data[n] - data[0]
            S_k += resp[n, k] * np.outer(diff, diff)
        S_k /= np.sum(resp[:, k])
        Sigma.append(S_k)
    return np.sum(np.array(Sigma) ** 2)


def state_after_measurements(x, zs):
    for z in zs:
        x = x + 0.5 * (z - x)
        if x.ndim == 2:  # decided per rank: x stays a vector through the loop, and numba sees one side
            x = x[:, 0]
    return np.sum(x ** 2)


def test_ranks_that_each_pass_of_a_loop_keeps(backend):
    data, resp = np.array([[0.3, 1.0], [1.2, -0.5], [0.1, 0.4]]), np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    for i in (0, 1):
        assert_close(s2sad.grad(scattered_outer_products, argnums=i, backend=backend)(data, resp),
                     fd_grad(scattered_outer_products, (data, resp), i))
    x, zs = np.array([0.5, 1.0]), np.array([[0.6, 0.2], [0.75, 0.1]])
    for i in (0, 1):
        assert_close(s2sad.grad(state_after_measurements, argnums=i, backend=backend)(x, zs),
                     fd_grad(state_after_measurements, (x, zs), i))


class _Stencil:
    """polybench-python's kernels are methods whose bodies start with a `# scop begin` at column 0."""

    def kernel(self, A, B):
# scop begin
        for _ in range(2):
            B[1:self.N - 1] = 0.25 * (A[:self.N - 2] + 2.0 * A[1:self.N - 1] + A[2:self.N])
            A[1:self.N - 1] = 0.25 * (B[:self.N - 2] + 2.0 * B[1:self.N - 1] + B[2:self.N])
# scop end


def _stencil_loss(a0):
    kern = _Stencil()
    kern.N = a0.shape[0]
    a, b = a0.copy(), a0.copy()
    kern.kernel(a, b)
    return np.sum(a ** 2) + np.sum(b * np.sin(a0))


def test_a_method_with_comments_at_column_0(backend):
    a0 = np.linspace(0.0, 1.0, 7) ** 2
    assert_close(s2sad.grad(_stencil_loss, backend=backend)(a0), fd_grad(_stencil_loss, (a0,), 0))


def _pair_energy(p):
    """An md code's pair energy: the distance of each particle to itself is 0, masked to nan (None), then dropped."""
    s = p[:, None, :] - p
    d = np.linalg.norm(s, axis=-1)
    d[d == 0] = None
    e = d ** -2
    e[np.isnan(e)] = 0
    return np.sum(e)


def test_a_norm_that_is_zero_then_masked_adds_nothing_to_the_gradient(backend):
    p = np.array([[0.0, 0.1, 0.3], [1.0, 0.5, -0.2], [0.3, 1.2, 0.8]])
    value, grad = s2sad.value_and_grad(_pair_energy, backend=backend)(p)
    assert_close(value, _pair_energy(p), rtol=1e-12)
    assert_close(grad, fd_grad(_pair_energy, (p,), 0))


def _tangent_of(n):
    """A geometry helper: a list of numbers whose items are set in a branch."""
    tangent = [0.0, 0.0, 0.0]
    if abs(n[0]) > abs(n[1]):
        tangent[0] = n[2]
        tangent[2] = -n[0]
    else:
        tangent[1] = n[2]
    t = [0.0, 0.0]
    t[0] = n[1] * n[2]  # straight-line: the list itself gets the item
    return np.sum(np.asarray(tangent) * n) + t[0] * n[0] + t[1]


def test_lists_of_numbers_written_item_by_item(backend):
    for n in (np.array([0.9, -0.4, 1.1]), np.array([0.3, -0.7, 1.1])):
        assert_close(s2sad.grad(_tangent_of, backend=backend)(n), fd_grad(_tangent_of, (n,), 0))


def _counts_in_a_list(x):
    counts = [0, 0]
    for v in x:
        if v > 0:
            counts[0] += v
    return counts[0] * np.sum(x)


def test_a_list_of_ints_written_with_floats_in_a_loop_is_refused_with_the_fix():
    with pytest.raises(s2sad.UnsupportedError, match=r"would round the floats written into it") as info:
        s2sad.grad(_counts_in_a_list, backend="python")(np.array([0.5, -1.0, 2.0]))
    assert "[0.0, 0.0]" in str(info.value)


def _ising_energy(L, h):
    E = 0.0
    for (i, j), s in np.ndenumerate(L):
        E += -h * s * L[(i + 1) % L.shape[0], j] + 0.1 * s ** 3
    count = 0.0
    for index, value in np.ndenumerate(L):  # the item unused, as in the corpus's magnetisation
        count += 1.0
    return E / count


def test_np_ndenumerate_gives_each_index_with_its_item(backend):
    L, h = np.random.default_rng(3).normal(size=(3, 4)), 0.7
    grads = s2sad.grad(_ising_energy, argnums=(0, 1), backend=backend)(L, h)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_ising_energy, (L, h), i))


def _ewma(x, alpha):
    """A pandas-style moving average: `out.fill(np.nan)`, then filled item by item."""
    out = np.empty(x.shape[0])
    out.fill(np.nan)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = alpha * x[i] + (1 - alpha) * out[i - 1]
    grid = np.empty((2, 3))
    grid.fill(x[1])
    return np.sum(out ** 2) + np.sum(grid * x[0])


def test_array_fill_sets_every_item(backend):
    x = np.array([0.3, 1.2, -0.5, 0.8])
    grads = s2sad.grad(_ewma, argnums=(0, 1), backend=backend)(x, 0.3)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_ewma, (x, 0.3), i))


def _plucked(x, which):
    """A string simulation's `force[which][1] += plunk`: a row by an int index, then an item of it."""
    force = np.zeros((3, 2))
    force[1][1] += x[0]
    force[which][0] = x[1] * x[2]
    for i in range(3):
        force[i][1] += x[i] ** 2
    _pluck(force, 0, x[2])
    return np.sum(force * x[1])


def _pluck(force, which, plunk):
    force[which][1] += plunk  # `which` is the caller's constant 0


def test_an_item_of_a_row_by_int_indexes_is_written_into_the_array(backend):
    x = np.array([0.3, 1.2, -0.5])
    value, grad = s2sad.value_and_grad(_plucked, backend=backend)(x, 2)
    assert_close(value, _plucked(x, 2), rtol=1e-12)
    assert_close(grad, fd_grad(_plucked, (x, 2), 0))


def _masked_copy_written(x):
    f = np.zeros((3, 2))
    f[x > 0][0] = 5.0  # NumPy writes into a copy: nothing changes
    return np.sum(f * x[0])


def test_an_item_of_a_masked_copy_written_is_refused_with_the_single_index():
    with pytest.raises(s2sad.UnsupportedError, match=r"a write into `a\[k\]\[...\]` is refused") as info:
        s2sad.grad(_masked_copy_written, backend="python")(np.array([0.3, -1.2, 0.5]))
    assert "a[k, ...] = ..." in str(info.value)


def _correlation_triangles(x):
    """polybench's correlation: the triangles by np.triu_indices / np.tril_indices, written and read."""
    M = x.shape[1]
    corr = np.empty((M, M))
    corr[np.diag_indices(corr.shape[0])] = 1.0
    upper = np.triu_indices(n=M, m=M, k=1)
    corr[upper] = 0.0
    for i in range(0, M - 1):
        corr[i, i + 1:M] = (x[:, i] * x[:, i + 1:M].T).sum(axis=1)
    lower = np.tril_indices(n=M, m=M, k=-1)
    corr[lower] = corr[upper]
    return np.sum(corr ** 2) + np.sum(x[np.triu_indices_from(x, 1)] * 2.0) + np.sum(x[:, :4][np.tril_indices(4)] ** 3)


def test_triangle_indices_read_and_write_the_triangles(backend):
    x = np.random.default_rng(0).normal(size=(4, 5))
    value, grad = s2sad.value_and_grad(_correlation_triangles, backend=backend)(x)
    assert_close(value, _correlation_triangles(x), rtol=1e-12)
    assert_close(grad, fd_grad(_correlation_triangles, (x,), 0))


def _pair_energy_unpacked(x, kappa):
    """Pairs i < j by unpacked triangle indices, read from a matrix of distances (a JAX-style energy)."""
    n = x.shape[0]
    i, j = np.triu_indices(n, k=1)
    gaps = np.sqrt(np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1) + 1.0)
    return 0.5 * np.sum(x ** 2) + np.sum(kappa / gaps[i, j])


def _pair_energy_3d(x, kappa):
    """The same pairs read from the (n, n, dim) differences: a 2-D mask over a 3-D array."""
    n, dim = x.shape
    i, j = np.triu_indices(n, k=1)
    r = np.linalg.norm((np.reshape(x, (n, 1, dim)) - np.reshape(x, (1, n, dim)))[i, j], axis=-1)
    return np.sum(kappa / r)


def _pairs_swapped(x):
    i, j = np.triu_indices(x.shape[0], k=1)
    return np.sum(x[j, i] ** 2)


def _pairs_swapped_as_hinted(x):
    i, j = np.triu_indices(x.shape[0], k=1)
    return np.sum(x.T[i, j] ** 2)


def test_unpacked_triangle_indices_index_together(backend):
    x = np.array([[0.1, 0.5], [1.2, -0.3], [0.4, 1.1], [-0.7, 0.2]])
    assert_close(s2sad.grad(_pair_energy_unpacked, backend=backend)(x, 0.7), fd_grad(_pair_energy_unpacked, (x, 0.7), 0))
    with pytest.raises(s2sad.UnsupportedError, match=r"`j` is one of the index arrays `i, j`(.|\n)*hint: .*`x.T\[i, j\]`"):
        s2sad.grad(_pairs_swapped, backend=backend)(np.ones((3, 3)))
    square = np.arange(9.0).reshape(3, 3)  # the hint, followed: the items below the diagonal
    assert_close(s2sad.grad(_pairs_swapped_as_hinted, backend=backend)(square), 2.0 * np.tril(square, -1))
    assert_close(s2sad.grad(_pairs_swapped_as_hinted, backend=backend)(square), fd_grad(_pairs_swapped, (square,), 0))


def test_a_lower_rank_mask_numba_cannot_index_with_is_a_located_error_and_runs_as_python():
    x = np.array([[0.1, 0.5], [1.2, -0.3], [0.4, 1.1]])
    grad = s2sad.grad(_pair_energy_3d, backend="python")(x, 0.7)
    assert_close(grad, fd_grad(_pair_energy_3d, (x, 0.7), 0))
    with pytest.raises(s2sad.UnsupportedError, match="numba cannot compile the code generated for `_pair_energy_3d`"):
        s2sad.grad(_pair_energy_3d)(x, 0.7)


def _clamp(i, offset, maxval):
    j = max(0, i + offset)
    return min(j, maxval)


def _conv(x, weights):
    """numpy-benchmarks' conv: a tuple index bound again on each pass, `idx = clamp(...), clamp(...)`."""
    result = np.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            for ii in range(weights.shape[0]):
                for jj in range(weights.shape[1]):
                    idx = _clamp(i, ii - weights.shape[0] // 2, weights.shape[0]), \
                        _clamp(j, jj - weights.shape[0] // 2, weights.shape[0])
                    result[i, j] += x[idx] * weights[ii, jj]
    return np.sum(result * np.arange(result.size).reshape(result.shape))


def _ordered_pair(x):
    total = 0.0
    for k in range(x.shape[0] - 1):
        if x[k] > x[k + 1]:
            pair = (x[k + 1], x[k])
        else:
            pair = (x[k], x[k + 1])
        total += pair[0] * 2.0 + pair[1] ** 2
    return total


def test_a_tuple_bound_again_on_each_pass_or_branch(backend):
    rng = np.random.default_rng(4)
    x, w = rng.random((5, 5)), rng.random((3, 3))
    grads = s2sad.grad(_conv, argnums=(0, 1), backend=backend)(x, w)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_conv, (x, w), i))
    v = np.array([0.3, 1.2, -0.5, 0.8])
    assert_close(s2sad.grad(_ordered_pair, backend=backend)(v), fd_grad(_ordered_pair, (v,), 0))


@dataclasses.dataclass
class _Tree:
    """finmath's Cox-Ross-Rubinstein model: a field left to __post_init__ (`field(init=False)`)."""

    u: float
    d: float
    r: float = 0.0
    q: float = dataclasses.field(init=False)

    def __post_init__(self):
        self.q = (self.r - self.d) / (self.u - self.d)

    def american_put(self, spot, maturity, strike):
        def payoff(t):
            n = np.arange(t + 1)
            return np.maximum(strike - spot * (1 + self.u) ** n * (1 + self.d) ** (t - n), 0)
        v = payoff(maturity)
        for t in range(maturity - 1, -1, -1):
            v[:t + 1] = np.maximum(payoff(t), (self.q * v[1:t + 2] + (1 - self.q) * v[:t + 1]) / (1 + self.r))
        return v[0]


def _put_price(u, d, spot):
    return _Tree(u, d, 0.01).american_put(spot, 5, 97.3)


def test_a_dataclass_field_set_in_post_init(backend):
    args = (0.1, -0.08, 100.0)
    grads = s2sad.grad(_put_price, argnums=(0, 1, 2), backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_put_price, args, i))


def _quietly(x, c):
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = x[1:] / x[:-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaled = c * np.log(np.abs(ratio))
    return np.sum(scaled ** 2)


def test_contexts_that_only_silence_warnings_run_their_body(backend):
    x = np.array([0.5, 1.2, -0.8, 2.0])
    grads = s2sad.grad(_quietly, argnums=(0, 1), backend=backend)(x, 1.5)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_quietly, (x, 1.5), i))


def test_other_with_statements_are_refused_with_a_hint():
    def opens(x):
        with open("/dev/null"):
            return x * 2.0
    with pytest.raises(s2sad.UnsupportedError, match="`With` statements are not supported") as info:
        s2sad.grad(opens, backend="python")(1.0)
    assert "pass the values in as arguments" in str(info.value)


def _sabr_ratio(s, k):
    """A SABR formula's `log(s/k) / (s - k)`, k where s == k, into a copy of k (`out=np.array(k, dtype=float)`)."""
    return np.sum(np.divide(np.log(s / k), s - k, where=np.abs(s - k) > 1e-12, out=np.array(k, dtype=float)) * s)


def test_an_output_argument_made_by_np_array(backend):
    s, k = np.array([1.1, 0.9, 1.0]), np.array([1.0, 1.0, 1.0])
    grads = s2sad.grad(_sabr_ratio, argnums=(0,), backend=backend)(s, k)
    expected = fd_grad(_sabr_ratio, (s, k), 0)
    assert_close(grads[0][:2], expected[:2])
    assert_close(grads[0][2], k[2])  # at s == k the item is k's (d(k * s)/ds); FD there straddles the switch


class _ListKernel:
    """polybench-python's list strategy: a method writing into lists its caller made (`[0.0] * n`)."""

    def kernel(self, alpha, A, x, w):
        for i in range(0, self.N):
            for j in range(0, self.N):
                A[i][j] = A[i][j] + x[i] * x[j]
        for i in range(0, self.N):
            for j in range(0, self.N):
                w[i] = w[i] + alpha * A[i][j] * x[j]


def _list_kernel_loss(alpha, A0, x):
    k = _ListKernel()
    k.N = 3
    A = A0.copy()
    w = [0.0] * 3
    scale = (0.5,) * 2
    k.kernel(alpha, A, x, w)
    return sum(w[i] * (i + 1.0) for i in range(3)) + scale[1] * np.sum(A * A0)


def test_lists_repeated_and_written_by_a_helper_in_loops(backend):
    args = (1.5, np.random.default_rng(6).random((3, 3)), np.array([0.3, 1.2, -0.5]))
    grads = s2sad.grad(_list_kernel_loss, argnums=(0, 1, 2), backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_list_kernel_loss, args, i))


def test_a_list_repeated_a_run_time_number_of_times_then_joined_is_refused_with_the_array_to_make():
    def repeated(x, n):
        w = [0.0] * n + [x]  # a list grown by joining: an array of n zeros would add x to each
        return x * len(w)
    with pytest.raises(s2sad.UnsupportedError, match="known only at run time") as info:
        s2sad.grad(repeated, backend="python")(1.0, 3)
    assert "np.zeros(n)" in str(info.value)


def _guarded(x, c):
    r = np.abs(x)
    entropy = np.where(x > 0, x * np.log(x), 0.0)
    root = np.where(x > 0, np.sqrt(x), 0.0)
    inverse = np.where(r > 0.1, c / r, 0.0)
    return np.sum(entropy + root * c + inverse * x)


def test_np_where_gives_no_nan_from_the_side_it_does_not_pick(backend):
    """JAX's and PyTorch's `0 * inf`: the unpicked side of np.where reads its variables as 1.0 there."""
    x = np.array([0.0, 0.5, -0.3, 1.2, -2.0])
    with np.errstate(all="ignore"):
        grads = s2sad.grad(_guarded, argnums=(0, 1), backend=backend)(x, 1.5)
        for i, g in enumerate(grads):
            assert np.all(np.isfinite(g))
            if i == 1:
                assert_close(g, fd_grad(_guarded, (x, 1.5), 1))
        inside = [1, 2, 3, 4]  # away from the kinks at 0 (where x = 0 picks the constant side)
        assert_close(grads[0][inside], fd_grad(_guarded, (x, 1.5), 0)[inside])


def _guarded_special(x):
    import scipy.special

    return np.sum(np.where(x > 0, scipy.special.gammaln(x) + scipy.special.xlogy(x, x), 0.0))


def test_np_where_guards_scipy_functions_singular_off_its_picked_side(backend):
    x = np.array([0.0, -1.0, 2.0])  # gammaln's derivative is infinite at 0 and -1, xlogy's at 0
    with np.errstate(all="ignore"):
        g = s2sad.grad(_guarded_special, backend=backend)(x)
    assert_close(g, [0.0, 0.0, 0.42278433509846713 + np.log(2.0) + 1.0])  # digamma(2) + log(2) + 1


# ---- patterns from public code that were refused: a clipped prediction written back by position,
# erfc-based normal CDF, .item() on a 1x1 result -----------------------------------------------------

def _bce_clipped_in_place(p, y):
    eps = 1e-3
    np.clip(p, eps, 1.0 - eps, p)  # the output array by position, as NumPy's signature allows
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def test_clip_with_its_output_by_position_writes_it(backend):
    p, y = np.array([0.0005, 0.7, 0.2, 0.9995]), np.array([0.0, 1.0, 0.0, 1.0])
    g = s2sad.grad(_bce_clipped_in_place, backend=backend)(p.copy(), y)
    assert_close(g, [0.0, -1.0 / (4 * 0.7), 1.0 / (4 * 0.8), 0.0])  # the clipped entries get nothing
    assert_close(g[1:3], fd_grad(_bce_clipped_in_place, (p.copy(), y), 0)[1:3])


def _normal_cdf_by_erfc(x, sigma):
    return 0.5 * math.erfc(-x / (sigma * math.sqrt(2.0)))


def test_math_erfc_is_differentiable(backend):
    g = s2sad.grad(_normal_cdf_by_erfc, argnums=(0, 1), backend=backend)(0.3, 1.5)
    density = math.exp(-0.5 * (0.3 / 1.5) ** 2) / (1.5 * math.sqrt(2 * math.pi))
    assert_close(g, [density, -density * 0.3 / 1.5])


def _quadratic_form_item(w, a):
    return (w[None, :] @ a @ w[:, None]).item() + 0.5 * (a @ w).item(1) + np.outer(w, w).item(0, 1)


def test_item_reads_the_one_entry_or_the_one_at_its_position(backend):
    rng = np.random.default_rng(7)
    w, a = rng.normal(size=3), rng.normal(size=(3, 3))
    g = s2sad.grad(_quadratic_form_item, backend=backend)(w, a)
    assert_close(g, (a + a.T) @ w + 0.5 * a[1] + np.array([w[1], w[0], 0.0]))
    assert_close(g, fd_grad(_quadratic_form_item, (w, a), 0))


def _item_of_a_vector(w):
    return (w * 2.0).item()


def test_item_of_more_than_one_entry_raises_as_numpy_does(backend):
    with pytest.raises(ValueError, match="size 1"):
        s2sad.grad(_item_of_a_vector, backend=backend)(np.ones(2))
    assert_close(s2sad.grad(_item_of_a_vector, backend=backend)(np.ones(1)), [2.0])


def _mixture_normalizers(cov):
    return np.sum(np.linalg.det(cov) ** -0.5) + np.sum(np.linalg.slogdet(cov)[1])


def test_det_and_slogdet_of_a_stack_of_matrices_differentiate_per_matrix():
    """NumPy's det of shape (k, n, n) is one determinant per matrix; numba's takes one matrix, so this runs
    on the python backend."""
    rng = np.random.default_rng(11)
    m = rng.normal(size=(3, 2, 2))
    cov = m @ np.swapaxes(m, 1, 2) + 2.0 * np.eye(2)
    g = s2sad.grad(_mixture_normalizers, backend="python")(cov)
    inv_t = np.swapaxes(np.linalg.inv(cov), 1, 2)
    det = np.linalg.det(cov)
    assert_close(g, (-0.5 * det ** -0.5)[:, None, None] * inv_t + inv_t)
    t = rng.normal(size=cov.shape)
    _, tangent = s2sad.jvp(_mixture_normalizers, (cov,), (t,), backend="python")
    assert_close(tangent, np.sum(g * t))


def _energies(x):
    return 0.5 * x * x, np.cos(x)


def _history_into_arguments(x, kinetic, potential):
    for i in range(kinetic.shape[0]):
        kinetic[i], potential[i] = _energies(x * (i + 1))  # one tuple target writes both histories
    return np.sum(kinetic) + np.sum(potential)


def test_a_tuple_target_may_write_into_argument_arrays_as_single_writes_do(backend):
    kinetic, potential = np.zeros(3), np.zeros(3)
    g = s2sad.grad(_history_into_arguments, backend=backend)(0.4, kinetic, potential)
    k = np.arange(1, 4)
    assert_close(g, np.sum(k * k * 0.4 - k * np.sin(0.4 * k)))
    assert not kinetic.any() and not potential.any()  # the gradient's writes went to copies


class _ClippedCrossEntropy:
    def __init__(self, eps):
        self.eps = eps

    def __call__(self, p, y):
        return self.forward(p, y)

    def forward(self, p, y):
        np.clip(p, self.eps, 1.0 - self.eps, p)
        return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def test_a_method_may_write_into_its_array_arguments_as_a_function_may(backend):
    loss = _ClippedCrossEntropy(1e-3)
    p, y = np.array([0.2, 0.7, 0.9999]), np.array([0.0, 1.0, 1.0])
    expected = [1.0 / (3 * 0.8), -1.0 / (3 * 0.7), 0.0]
    for differentiated in (loss.forward, loss):  # the bound method, and the object called through __call__
        assert_close(s2sad.grad(differentiated, backend=backend)(p, y), expected)
    assert p[2] == 0.9999  # the gradient clipped a copy


def _where_of_numbers(x):
    s = np.where(x ** 3 > 0.5, x ** 3, 0.5 * x) if x < 2.0 else 1.0  # a number or np.where's pick in one variable
    return s + np.where(s > 0.1, s, 0.0) * x


def test_np_where_of_numbers_is_a_number_a_variable_can_also_hold(backend):
    for x in (0.3, 1.5, 2.5):
        assert_close(s2sad.grad(_where_of_numbers, backend=backend)(x), fd_grad(_where_of_numbers, (x,), 0))
        assert_close(s2sad.jvp(_where_of_numbers, (x,), (1.0,), backend=backend)[1], fd_grad(_where_of_numbers, (x,), 0))


class _OptionKind(enum.Enum):
    CALL = 1
    PUT = 2


def _payoff_of_kind(s, k, kind):  # FinancePy's `if option_type == FinOptionTypes.EUROPEAN_CALL:`
    if kind == _OptionKind.CALL:
        return max(s - k, 0.0) * s
    elif kind != _OptionKind.PUT:
        return 0.0
    return max(k - s, 0.0) * s


def test_an_enum_argument_compared_with_a_member_picks_its_branch_per_member(backend):
    grad = s2sad.grad(_payoff_of_kind, backend=backend)
    assert_close(grad(3.0, 2.0, _OptionKind.CALL), 2 * 3.0 - 2.0)
    assert_close(grad(1.0, 2.0, _OptionKind.PUT), 2.0 - 2 * 1.0)  # the same code object, the other member
    assert_close(grad(3.0, 2.0, _OptionKind.PUT), 0.0)


def _clenshaw_of_list(t):  # FinancePy's normcdf_slow: a list of constants filled item by item, read at i
    a = [0.0] * 4
    a[0] = 0.5
    a[1] = -0.25
    a[2] = 0.125
    a[3] = 0.0625
    b = 0.0
    bm = 0.0
    bp = 0.0
    for i in range(0, 4):
        bp = b
        b = bm
        bm = t * b - bp + a[3 - i]
    return bm - bp


def test_a_list_of_constants_is_read_at_a_run_time_index(backend):
    t = 0.3
    assert_close(s2sad.grad(_clenshaw_of_list, backend=backend)(t), fd_grad(_clenshaw_of_list, (t,), 0))


@numba.njit(fastmath=True, cache=True)
def _elementwise_maximum(a, b):  # FinancePy's maximum: a list of n numbers, n known at run time, filled item by item
    n = len(a)
    out = [0.0] * n

    for i in range(0, n):
        if a[i] > b[i]:
            out[i] = a[i]
        else:
            out[i] = b[i]

    return out


def _squared_maximum(a, b):
    return np.sum(np.array(_elementwise_maximum(a, b)) ** 2) + sum(_elementwise_maximum(b, a))


def _repeated_then_doubled(x):
    out = [0.0] * len(x)
    out[0] = x[0]
    return np.sum(np.array(out * 2))  # a list repeated again: an array would double its items instead


def test_a_list_of_a_number_repeated_a_run_time_count_is_an_array(backend):
    a, b = np.array([0.3, -0.7, 1.0]), np.array([0.1, 0.2, 1.5])
    for i in (0, 1):
        assert_close(s2sad.grad(_squared_maximum, argnums=i, backend=backend)(a, b), fd_grad(_squared_maximum, (a, b), i))
    with pytest.raises(s2sad.UnsupportedError, match="repeated here a number of times known only at run time"):
        s2sad.grad(_repeated_then_doubled, backend=backend)(a)


def _garch_nll_with_np_size(mu, data):  # `T = np.size(data, 0)`: numba has no axis argument, nor np.size(number)
    T = np.size(data, 0)
    eps = data - mu
    return np.sum(eps ** 2) / T + np.size(data) * 0.0 + data.size * 0.0 + (np.size(mu) - 1) * mu


def test_np_size_with_an_axis_compiles(backend):
    data = np.arange(6.0)
    assert_close(s2sad.grad(_garch_nll_with_np_size, backend=backend)(0.5, data), -2.0 * np.sum(data - 0.5) / 6)


def _sph_density(pos):  # hfathie/SPH_1: `rr = (...) ** 0.5` is 0 on the self pair i == j, where the kernel is flat
    s = 0.0
    for i in range(pos.shape[0]):
        for j in range(pos.shape[0]):
            dx = pos[i] - pos[j]
            rr = (dx ** 2) ** 0.5
            q = rr / 1.3
            s += 1.0 - 1.5 * q ** 2 + 0.75 * q ** 3
    return s


def test_a_distance_written_as_a_half_power_is_finite_at_zero(backend):  # as np.sqrt's rule keeps it
    pos, v = np.array([0.1, 0.5, 0.9]), np.array([1.0, 0.3, -0.2])
    assert_close(s2sad.grad(_sph_density, backend=backend)(pos), fd_grad(_sph_density, (pos,), 0))
    _, tangent = s2sad.jvp(_sph_density, (pos,), (v,), backend=backend)
    assert_close(tangent, fd_grad(_sph_density, (pos,), 0) @ v)


def _two_body_rhs_with_del(t, state, mu):  # Reagamo44/NEO_orbit: `del t` drops an argument ODE solvers pass
    del t
    r_vec = state[0:3]
    r_norm = np.linalg.norm(r_vec)
    return np.sum(np.hstack((state[3:6], -mu * r_vec / r_norm ** 3)) ** 2)


def test_del_of_a_name_unbinds_it_and_changes_no_value(backend):
    state = np.array([1.0, 0.3, 0.2, 0.1, 0.9, 0.0])
    f = s2sad.grad(_two_body_rhs_with_del, argnums=(1, 2), backend=backend)
    for got, k in zip(f(0.0, state, 1.3), (1, 2)):
        assert_close(got, fd_grad(_two_body_rhs_with_del, (0.0, state, 1.3), k))


def _del_of_an_item(x):
    y = x * 2.0
    del y[0]
    return np.sum(y)


def test_del_of_an_item_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedError, match=r"Del.*\n.*del y\[0\]"):
        s2sad.grad(_del_of_an_item, backend="python")(np.ones(3))


def _mps_overlap(gamma, lam):  # an MPS norm: np.conj of real tensors, as code written for complex ones has it
    theta = np.tensordot(np.diag(lam), gamma, axes=(1, 0))
    return np.tensordot(np.conj(theta), theta, axes=([0, 1, 2], [0, 1, 2])) + np.sum(theta.conj() * np.conjugate(theta))


def test_conj_of_real_values_leaves_them_as_they_are(backend):
    rng = np.random.default_rng(4)
    gamma, lam = rng.normal(size=(2, 2, 3)), 0.5 + rng.random(2)
    for got, k in zip(s2sad.grad(_mps_overlap, argnums=(0, 1), backend=backend)(gamma, lam), (0, 1)):
        assert_close(got, fd_grad(_mps_overlap, (gamma, lam), k))


def _conv_forward(x, w, conv_param):  # Usman-Bajwa1/CNN-Scratch: pad widths from a dict's ints, then loops
    pad, stride = conv_param["pad"], conv_param["stride"]
    x_pad = np.pad(x, ((0, 0), (pad, pad), (pad, pad)), 'constant')
    out_h = 1 + (x.shape[1] + 2 * pad - w.shape[0]) // stride
    out = np.zeros((x.shape[0], out_h, out_h))
    for c in range(x.shape[0]):
        for i in range(out_h):
            for j in range(out_h):
                out[c, i, j] = np.sum(x_pad[c, i * stride:i * stride + w.shape[0], j * stride:j * stride + w.shape[1]] * w)
    return np.sum(out ** 2)


def test_pad_widths_may_be_pairs_of_run_time_ints(backend):
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(2, 4, 4)), rng.normal(size=(3, 3))
    param = {"pad": 1, "stride": 2}
    gx, gw = s2sad.grad(_conv_forward, argnums=(0, 1), backend=backend)(x, w, param)
    assert_close(gx, fd_grad(_conv_forward, (x, w, param), 0))
    assert_close(gw, fd_grad(_conv_forward, (x, w, param), 1))


def _mse_einsum(a, y):  # HoshiMeisa/NumPy-CNN's MSELoss: `optimize=True` tunes NumPy's own contraction order
    u = a - y
    return np.einsum('ij,ij->', u, u, optimize=True) / u.size + np.sum(np.einsum('ij,kj->ik', a, y, optimize='greedy'))


def test_einsum_takes_and_ignores_its_optimize_keyword(backend):
    a, y = np.array([[0.3, -1.2], [0.5, 2.0]]), np.array([[1.0, 0.2], [-0.4, 0.1]])
    assert_close(s2sad.grad(_mse_einsum, backend=backend)(a, y), (a - y) / 2 + np.ones((2, 2)) @ y)


# ---- @guvectorize kernels (numba's movemean example, numbagg-style), called as NumPy calls a gufunc --------------

@numba.guvectorize(["void(float64[:], intp[:], float64[:])"], "(n),()->(n)")
def _running_mean(a, window_arr, out):  # a `()` operand arrives as an array of one item
    window = window_arr[0]
    total = 0.0
    for i in range(len(a)):
        total += a[i]
        if i >= window:
            total -= a[i - window]
        out[i] = total / min(i + 1, window)


@numba.guvectorize(["void(float64[:], float64[:], float64, float64[:])"], "(n),(n),()->()")
def _weighted_sq(x, w, scale, res):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += w[i] * x[i] * x[i]
    res[0] = scale * acc


def _smoothed_energy(series, w, scale):
    return np.sum(_running_mean(series, 3) ** 2) + np.sum(_weighted_sq(series, w, scale)) + _weighted_sq(w, w, 0.5)


def test_a_guvectorize_function_runs_on_the_core_of_each_row(backend):
    rng = np.random.default_rng(11)
    series, w = rng.normal(size=(2, 6)), rng.uniform(0.5, 1.5, size=6)
    args = (series, w, 0.7)
    assert_close(s2sad.value_and_grad(_smoothed_energy, backend=backend)(*args)[0], _smoothed_energy(*args),
                 rtol=1e-12)
    for k, g in enumerate(s2sad.grad(_smoothed_energy, argnums=(0, 1, 2), backend=backend)(*args)):
        assert_close(g, fd_grad(_smoothed_energy, args, k))


def _mean_into(x):
    out = np.zeros_like(x)
    _running_mean(x, 2, out)
    return np.sum(out * x)


def test_a_guvectorize_function_given_its_output_argument_writes_into_it():
    x = np.array([0.5, -1.0, 2.0, 0.3])
    assert_close(s2sad.grad(_mean_into, backend="python")(x), fd_grad(_mean_into, (x,), 0))

    def into_a_row(x):
        out = np.zeros((2, 4))
        _running_mean(x, 2, out[0])
        return np.sum(out)

    with pytest.raises(s2sad.UnsupportedError, match="an output argument of the gufunc `_running_mean` must be a "
                                                     "local array variable") as err:
        s2sad.grad(into_a_row, backend="python")(x)
    assert "_running_mean(x, 2, out[0])" in str(err.value) and "y = f(x)" in str(err.value)


@numba.vectorize([numba.float64(numba.float64, numba.float64)])
def _cubic_wave(x, y):
    return math.pow(x, 3.0) + 4.0 * math.sin(y)


def _filled_by_a_ufunc(x, y):  # ENCCS-style @vectorize kernel given its output array by position
    res = np.zeros_like(x)
    _cubic_wave(x, y, res)
    return np.sum(res * x)


def test_a_vectorize_function_writes_into_an_output_given_by_position(backend):
    x, y = np.array([1.0, 2.0, -0.5]), np.array([0.3, 0.4, 1.1])
    for k, g in enumerate(s2sad.grad(_filled_by_a_ufunc, argnums=(0, 1), backend=backend)(x, y)):
        assert_close(g, fd_grad(_filled_by_a_ufunc, (x, y), k))


@numba.stencil
def _four_neighbours(a):
    return 0.25 * (a[0, 1] + a[1, 0] + a[0, -1] + a[-1, 0])


def test_a_numba_stencil_is_refused_at_its_call_with_the_loop_to_write():
    def f(a):
        return np.sum(_four_neighbours(a) ** 2)

    with pytest.raises(s2sad.UnsupportedError, match="is a numba @stencil") as err:
        s2sad.grad(f, backend="python")(np.ones((3, 4)))
    assert "_four_neighbours(a)" in str(err.value) and "a[i, j + 1]" in str(err.value)


# ---- np.delete: a log-sum-exp that drops the largest term (numba-jitted losses), and deleting by an index array --------


@numba.njit
def _lse_without_max(a):
    k = np.argmax(a)
    return np.log1p(np.sum(np.delete(np.exp(a - a[k]), k))) + a[k]


@numba.njit
def _row_losses(w, xs, ys, n_in=3, n_out=2):
    def one(w, x, y):
        s = np.dot(x, w)
        return -np.sum(y * (s - _lse_without_max(s)))

    wm = np.reshape(w, (n_in, n_out))
    res = np.zeros(len(ys))
    for r in range(len(ys)):
        res[r] = one(wm, xs[r], ys[r])
    return res


def test_np_delete_of_the_largest_term_in_a_log_sum_exp(backend):
    xs = np.array([[0.3, -1.0, 0.5], [1.2, 0.4, -0.7], [-0.2, 0.9, 0.1]])
    ys = np.eye(2)[[0, 1, 1]]
    weights = np.array([0.5, -1.5, 2.0])

    def f(w):
        return np.sum(_row_losses(w, xs, ys) * weights)

    w = np.array([0.4, -0.3, 1.1, 0.2, -0.8, 0.6])
    value, g = s2sad.value_and_grad(f, backend=backend)(w)
    assert_close(value, f(w), rtol=1e-12)
    assert_close(g, fd_grad(f, (w,), 0))


def test_np_delete_of_an_index_array_and_of_a_negative_index(backend):
    def f(a):
        return np.sum(np.delete(a, np.array([0, 2])) ** 2) + np.sum(np.delete(a, -1) * np.array([3.0, 1.0, -2.0]))

    a = np.array([0.3, -1.2, 2.0, 0.7])
    value, g = s2sad.value_and_grad(f, backend=backend)(a)
    assert_close(value, f(a), rtol=1e-12)
    assert_close(g, fd_grad(f, (a,), 0))


@numba.njit
def _numba_dtypes(x):
    out = np.empty(x.shape[0], dtype=numba.float64)  # numba's types as dtypes, as jitted kernels write them
    out[:] = 2.0 * x
    idx = np.zeros(2, dtype=numba.int64)
    return np.sum(out * x) + np.sum(x[idx])


def test_numba_types_as_dtypes(backend):
    x = np.array([0.3, 0.7, 1.1])
    value, g = s2sad.value_and_grad(_numba_dtypes, backend=backend)(x)
    assert_close(value, _numba_dtypes(x), rtol=1e-12)
    assert_close(g, fd_grad(_numba_dtypes, (x,), 0))


@numba.jit(numba.double[:, :](numba.double[:, :], numba.int32, numba.int32[:]), nopython=True, parallel=True,
           nogil=True, cache=True)
def _charges_potential(particle_coords, grid_resolution, charges):  # PyHPC's potential of point charges
    potential_grid = np.zeros((grid_resolution, grid_resolution), dtype="float64")
    grid_step_denom = grid_resolution - 1
    for n in range(charges.shape[0]):
        for i in range(grid_resolution):
            for j in numba.prange(grid_resolution):
                delta_x = i/grid_step_denom - particle_coords[n, 0]
                delta_y = j/grid_step_denom - particle_coords[n, 1]
                euclid_distance = np.sqrt(delta_x**2 + delta_y**2)
                potential_grid[j, i] -= charges[n]*np.log(euclid_distance)
    return potential_grid


def _charges_field_energy(coords):
    charges = np.array([1, 2], dtype=np.int32)  # the kernel's signature asks for int32 charges
    return np.sum(_charges_potential(coords, np.int32(4), charges) ** 2)


def test_np_array_of_a_list_with_a_dtype_is_made_then_cast(backend):
    coords = np.array([[0.31, 0.42], [0.77, 0.13]])
    value, g = s2sad.value_and_grad(_charges_field_energy, backend=backend)(coords)
    assert_close(value, _charges_field_energy(coords), rtol=1e-12)
    assert_close(g, fd_grad(_charges_field_energy, (coords,), 0))


def _scatter_into_a_longer_shape(x):
    shape = list(x.shape)  # a list of the shape's items, changed and used as a shape
    shape[0] = x.shape[0] + 1
    y = np.zeros(shape)
    np.add.at(y, np.array([0, 2, 3]), x)
    m = y.reshape(2, 2)
    rows, cols = tuple(m.shape)
    return np.sum(y * y) + np.sum(m.reshape(cols, rows) * np.array([[1.0, 2.0], [3.0, 4.0]]))


def test_list_of_an_arrays_shape(backend):
    x = np.array([0.3, 0.7, 1.1])
    value, g = s2sad.value_and_grad(_scatter_into_a_longer_shape, backend=backend)(x)
    assert_close(value, _scatter_into_a_longer_shape(x), rtol=1e-12)
    assert_close(g, fd_grad(_scatter_into_a_longer_shape, (x,), 0))
    with pytest.raises(s2sad.UnsupportedError, match="follows the arguments' ranks"):
        s2sad.source(_scatter_into_a_longer_shape)  # no arguments: the shape's length is unknown


def _logsumexp_with_defaults(a, axis=None, scale=2.0):
    a_max = np.amax(a, axis=axis)
    return scale * (np.log(np.sum(np.exp(a - a_max), axis=axis)) + a_max)


def test_jvp_with_primals_for_the_leading_parameters_only(backend):
    # as hyl317/CS4775_FinalProject helper.py's logsumexp(a, axis=None, keepdims=False) is called: jvp(f, (a,), (t,))
    a = np.array([[0.3, -1.2, 2.0], [0.7, 0.1, -0.4]])
    t = np.array([[1.0, 0.5, -2.0], [0.3, -0.7, 1.1]])
    out, tangent = s2sad.jvp(_logsumexp_with_defaults, (a,), (t,), backend=backend)
    assert_close(out, _logsumexp_with_defaults(a), rtol=1e-12)
    assert_close(tangent, np.sum(fd_grad(_logsumexp_with_defaults, (a,), 0) * t))


def _hmm_logsumexp(a, axis=None, keepdims=False):
    # hyl317/CS4775_FinalProject helper.py: `axis` passed on to np.squeeze, None included
    a_max = np.amax(a, axis=axis, keepdims=True)

    if a_max.ndim > 0:
        a_max[~np.isfinite(a_max)] = 0
    elif not np.isfinite(a_max):
        a_max = 0

    tmp = np.exp(a - a_max)
    with np.errstate(divide='ignore'):
        s = np.sum(tmp, axis=axis, keepdims=keepdims)
        out = np.log(s)

    if not keepdims:
        a_max = np.squeeze(a_max, axis=axis)

    return out+a_max


def _hmm_logsumexps(a):
    return (_hmm_logsumexp(a) + np.sum(_hmm_logsumexp(a, axis=1) * np.array([1.0, -2.0]))
            + np.sum(_hmm_logsumexp(a, axis=0, keepdims=True) ** 2))


def test_squeeze_with_axis_none_of_a_kept_reduction(backend):
    a = np.array([[0.3, -1.2, 2.0], [0.7, 0.1, -0.4]])
    value, g = s2sad.value_and_grad(_hmm_logsumexps, backend=backend)(a)
    assert_close(value, _hmm_logsumexps(a), rtol=1e-12)
    assert_close(g, fd_grad(_hmm_logsumexps, (a,), 0))


def _logistic_into(z, out=None):  # the optional output buffer of NumPy-style helpers
    if out is None:
        out = np.asarray(0.5 * z)
    else:
        if out is not z:
            out[:] = z
        out *= 0.5
    np.tanh(out, out=out)
    out += 1.0
    out *= 0.5
    return out


def _logistic_layers(x, w):
    h = x * w
    _logistic_into(h, h)  # in place: `out is not z` is False, the copy is skipped
    buf = np.empty_like(x)
    _logistic_into(h * x, out=buf)  # into the caller's buffer
    return np.sum(buf * w) + np.sum(_logistic_into(h) * x)


def test_a_helper_whose_output_buffer_is_bound_in_a_branch_decided_when_generated(backend):
    x, w = np.array([0.3, -1.2, 0.8]), np.array([1.5, 0.4, -0.7])
    value, g = s2sad.value_and_grad(_logistic_layers, argnums=(0, 1), backend=backend)(x, w)
    assert_close(value, _logistic_layers(x, w), rtol=1e-12)
    for i in range(2):
        assert_close(g[i], fd_grad(_logistic_layers, (x, w), i))
    tx, tw = np.array([1.0, -0.5, 0.25]), np.array([0.3, 0.2, -1.0])
    _, tangent = s2sad.jvp(_logistic_layers, (x, w), (tx, tw), backend=backend)
    assert_close(tangent, fd_directional(_logistic_layers, (x, w), (tx, tw)))


@numba.njit(numba.float32(numba.float32, numba.float32))
def _declared_single(a, b):  # an explicit signature: numba converts Python floats to float32
    return a * a * b + 0.1 * b / a


def test_a_declared_numba_signature_is_not_applied_the_values_precision_decides(backend):
    g = s2sad.value_and_grad(_declared_single, argnums=(0, 1), backend=backend)
    value, (da, db) = g(np.float32(1.3), np.float32(2.7))  # float32 values: computed in float32, as numba does
    assert type(value) is np.float32 and type(da) is np.float32 and type(db) is np.float32
    assert_close(value, _declared_single(1.3, 2.7), rtol=1e-6)
    assert_close((da, db), (2 * 1.3 * 2.7 - 0.1 * 2.7 / 1.3 ** 2, 1.3 ** 2 + 0.1 / 1.3), rtol=1e-6)
    value, (da, db) = g(1.3, 2.7)  # Python floats: the function as Python runs it, in float64
    assert type(value) is float and value == _declared_single.py_func(1.3, 2.7)
    assert_close((da, db), (fd_grad(_declared_single.py_func, (1.3, 2.7), 0),
                            fd_grad(_declared_single.py_func, (1.3, 2.7), 1)))


def _great_circle(lon1, lat1, lon2, lat2):
    lon1, lat1, lon2, lat2 = map(np.radians, [lon1, lat1, lon2, lat2])  # unpacked as the items map gives
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return np.sum(2.0 * np.arcsin(np.sqrt(a)))


def _sweep_on_copies(lower, diag, rhs):
    lo, di, r = map(np.array, (lower, diag, rhs))  # copies, written in place below
    for i in range(1, di.shape[0]):
        m = lo[i - 1] / di[i - 1]
        di[i] = di[i] - m * lo[i - 1]
        r[i] = r[i] - m * r[i - 1]
    return np.sum(r / di) + np.sum(diag * lower[0])


def test_map_over_a_tuple_or_list_unpacked_into_names(backend):
    lon1, lat1 = np.array([-84.3, -84.4]), np.array([33.7, 33.8])
    lon2, lat2 = np.array([-84.35, -84.2]), np.array([33.9, 33.6])
    args = (lon1, lat1, lon2, lat2)
    grads = s2sad.grad(_great_circle, argnums=(0, 1, 2, 3), backend=backend)(*args)
    for i in range(4):
        assert_close(grads[i], fd_grad(_great_circle, args, i))
    args = (np.array([-1.0, 0.5, -0.3]), np.array([5.0, 7.0, 11.0, 5.0]), np.array([9.0, 5.0, 15.0, 10.0]))
    value, grads = s2sad.value_and_grad(_sweep_on_copies, argnums=(0, 1, 2), backend=backend)(*args)
    assert_close(value, _sweep_on_copies(*args), rtol=1e-12)
    for i in range(3):
        assert_close(grads[i], fd_grad(_sweep_on_copies, args, i))


# ---- real code, batch 11 ------------------------------------------------------------------------------------------


def _power_law_hawkes_nll(params, times, horizon, ratio, terms):  # a Hawkes kernel's sum of exponentials
    mu, eta, alpha, tau = params[0], params[1], params[2], params[3]
    count = np.float64(terms)  # an int argument made a float
    z = np.power(tau, -alpha) * (1 - np.power(ratio, -alpha * count)) / (1 - np.power(ratio, -alpha))
    scales = tau * ratio ** np.arange(0, terms, 1)
    decay = np.zeros(terms)
    total = 0.0
    for i in range(1, len(times)):
        s = 0.0
        for k in range(terms):
            decay[k] = np.exp(-(times[i] - times[i - 1]) / scales[k]) * (decay[k] + 1)
            s += scales[k] ** (-1 - alpha) * decay[k]
        total += np.log(mu + eta / z * s)
    return mu * horizon - total


def test_jvp_of_a_function_that_makes_an_int_argument_a_float(backend):
    # jvp generated its code with every argument differentiated, then refused np.float64 of the int one
    params = np.array([0.8, 0.5, 0.7, 0.3])
    times = np.array([0.2, 0.9, 1.1, 2.4, 2.6, 3.9])
    primals = (params, times, 4.5, 5.0, 3)
    dp, dh = np.array([0.3, -0.2, 0.5, 0.1]), 0.7
    out, tangent = s2sad.jvp(_power_law_hawkes_nll, primals, (dp, np.zeros(6), dh, 0.0, 0), backend=backend)
    assert_close(out, _power_law_hawkes_nll(*primals), rtol=1e-12)
    expected = np.sum(fd_grad(_power_law_hawkes_nll, primals, 0) * dp) + fd_grad(_power_law_hawkes_nll, primals, 2) * dh
    assert_close(tangent, expected)


def _numpy_scalar_casts(x, v):
    return np.float64(x) ** 3 + np.sum(np.float64(v) * x) + float(np.float32(x))


def test_numpy_float_types_called_on_a_differentiated_value_are_casts(backend):
    x, v = 0.7, np.array([1.5, -0.5, 2.0])
    gx, gv = s2sad.grad(_numpy_scalar_casts, argnums=(0, 1), backend=backend)(x, v)
    assert_close(gx, 3 * x ** 2 + np.sum(v) + 1.0, rtol=1e-6)  # (float32's step rounds: a looser tolerance)
    assert_close(gv, np.full(3, x), rtol=1e-12)


def test_lambdas_compile_with_s2sad_jit_and_inside_numba():
    # the numba-callable trampoline was named after the function: `def <lambda>_select(...)` did not parse
    f = lambda x, y: x * y ** 2  # noqa: E731
    g = s2sad.grad(f, argnums=(0, 1))
    assert_close(s2sad.jit(g)(2.0, 3.0), (9.0, 12.0), rtol=1e-12)

    @numba.njit
    def twice(x, y):
        a, b = g(x, y)
        return a + b

    assert_close(twice(2.0, 3.0), 21.0, rtol=1e-12)


def _unchanged_boundary(u):  # an outflow boundary: the array itself, as it came
    return u


def _conservative_steps(u0, cfl, boundary=_unchanged_boundary):
    u = np.copy(u0)
    i = np.arange(1, len(u0) - 1, 1)
    dt = cfl / max(abs(u0))
    t = 0.0
    while t < 0.3:
        t += dt
        u = boundary(u)  # the helper hands the array back: `u` stays its one name
        f = u ** 2 / (u ** 2 + (1 - u) ** 2)
        u[i] = u[i] - dt * (f[i] - f[i - 1])
    return np.sum(u ** 2)


def test_an_array_handed_back_by_a_helper_is_written_in_place(backend):
    # a Buckley-Leverett upwind scheme's `u = boundary(u)`: the write after it was refused as one through another name
    u0 = np.linspace(0.1, 0.9, 7) ** 2
    value, g = s2sad.value_and_grad(_conservative_steps, argnums=(0, 1), backend=backend)(u0, 0.05)
    assert_close(value, _conservative_steps(u0, 0.05), rtol=1e-12)
    assert_close(g[0], fd_grad(_conservative_steps, (u0, 0.05), 0))
    assert_close(g[1], fd_grad(_conservative_steps, (u0, 0.05), 1))


def _kept_and_handed_back(u0):
    u = np.copy(u0)
    v = u  # a second name for the array: the write below changes what v reads
    u = _unchanged_boundary(u)
    u[0] = 5.0 * u[1]
    return np.sum(v ** 2) + np.sum(u)


def test_an_array_handed_back_while_another_name_holds_it_stays_refused(backend):
    with pytest.raises(s2sad.UnsupportedError, match="in-place write to `u`"):
        s2sad.grad(_kept_and_handed_back, backend=backend)(np.array([0.3, 0.6, 0.9]))


def _tv_energy(img, weight):  # a total-variation denoiser's normalisation by the pixel count
    count = np.prod(img.shape[:2])
    total = np.sum(img.shape)
    ux = np.roll(img, -1, axis=1) - img
    return weight * np.sum(np.sqrt(ux ** 2 + 1e-3)) / np.sqrt(count) + np.sum(img ** 2) / total


def test_np_prod_and_np_sum_of_a_shape(backend):
    img = np.random.default_rng(3).uniform(size=(4, 5))
    value, g = s2sad.value_and_grad(_tv_energy, argnums=(0, 1), backend=backend)(img, 0.3)
    assert_close(value, _tv_energy(img, 0.3), rtol=1e-12)
    assert_close(g[0], fd_grad(_tv_energy, (img, 0.3), 0))
    assert_close(g[1], fd_grad(_tv_energy, (img, 0.3), 1))



SINGLE = np.float32  # a geometry package's working precision, set once at module level


def _polygon_area_single(pts, normal):
    total = np.zeros(3, dtype=SINGLE)
    for i in range(pts.shape[0]):
        nxt = pts[0] if i == pts.shape[0] - 1 else pts[i + 1]
        total += np.cross(pts[i], nxt)  # float64 products added into a float32 array: it stays float32
    head = total[:2]
    head *= 2.0  # (a view of it sees the writes)
    return abs(np.dot(total, normal) / 2.0) + np.sum(head ** 2)


def _polygon_area_double(pts, normal):  # the same in float64, whose finite differences are fine enough
    total = np.zeros(3)
    for i in range(pts.shape[0]):
        total += np.cross(pts[i], pts[0] if i == pts.shape[0] - 1 else pts[i + 1])
    head = total[:2]
    head *= 2.0
    return abs(np.dot(total, normal) / 2.0) + np.sum(head ** 2)


def test_a_float32_array_stays_float32_when_float64_values_are_added_into_it(backend):
    ang = np.array([0.1, 1.2, 2.0, 3.3, 4.1, 5.5])
    pts = np.stack([np.cos(ang), np.sin(ang), 0.05 * ang], axis=1)
    normal = np.array([0.1, -0.2, 1.0])
    value, g = s2sad.value_and_grad(_polygon_area_single, argnums=(0, 1), backend=backend)(pts, normal)
    assert_close(value, _polygon_area_single(pts, normal), rtol=1e-12)
    assert_close(g[0], fd_grad(_polygon_area_double, (pts, normal), 0))
    assert_close(g[1], fd_grad(_polygon_area_double, (pts, normal), 1))


def _rows_in_dtype(x, dtype=np.float64):  # a NumPy type as a default argument, with code that reads x.ndim
    y = np.zeros(x.shape[0], dtype=dtype)
    y[:] = 2.0 * x if x.ndim == 1 else x[:, 0]
    return np.sum(y ** 2)


def test_a_numpy_type_as_an_argument_of_code_that_reads_ranks(backend):
    # np.shape(np.float64) is the class's `shape` descriptor: reading the arguments' ranks crashed on it
    x = np.array([0.5, 1.5])
    assert_close(s2sad.grad(_rows_in_dtype, backend=backend)(x), 8.0 * x, rtol=1e-12)



def _stacked_shifts(u):
    shifted = np.zeros((2, *u.shape))  # a shape built with `*`: the items of u's shape
    shifted[0] = np.roll(u, 1, axis=0)
    shifted[1] = np.roll(u, -1, axis=1)
    dims = [*u.shape, 1]
    return np.sum(shifted * u) / len(dims)


def test_starred_shapes_and_tuples_in_tuple_and_list_literals(backend):
    u = np.random.default_rng(6).normal(size=(3, 4))
    assert_close(s2sad.grad(_stacked_shifts, backend=backend)(u), fd_grad(_stacked_shifts, (u,), 0))


def _neighbour_energy(state, dims=2):  # an Ising model's neighbour sum, over spins relaxed to positive reals
    neighbours = np.zeros(shape=(2 * dims, *state.shape), dtype=np.bool_)
    for d in range(dims):
        neighbours[2 * d, :, :] = np.roll(state, 1, axis=d)  # stored as bools: True where nonzero
        neighbours[2 * d + 1, :, :] = np.roll(state, -1, axis=d)
    return np.log(np.exp(np.sum(state * neighbours) / 2.0))


def _truncated_counts(x):
    counts = np.zeros(3, dtype=np.int64)
    counts[:2] = 3.7 * x[:2]  # stored as ints: truncated
    counts[2] = x[2] * 10.0
    filled = np.full(3, 0)  # an int array: the fill value's type
    filled[:] = 2.5 * x
    return np.sum(counts * x) + np.sum(x ** 2) + np.sum(filled * x)


def test_values_written_into_bool_or_int_arrays_carry_no_derivative(backend):
    # the bool array's entries took the derivative of the floats written into them: the gradient was silently wrong
    state = np.random.default_rng(5).uniform(0.2, 1.0, size=(4, 5))
    g = s2sad.grad(_neighbour_energy, backend=backend)(state)
    assert_close(g, np.full(state.shape, 2.0), rtol=1e-10)  # 4 neighbours, each True: sum(state) * 4 / 2
    _, t = s2sad.jvp(_neighbour_energy, (state,), (np.ones_like(state),), backend=backend)
    assert_close(t, 2.0 * state.size, rtol=1e-10)
    x = np.array([0.9, 1.3, 0.77])
    assert_close(s2sad.grad(_truncated_counts, backend=backend)(x), fd_grad(_truncated_counts, (x,), 0))


def _shoelace_from_lists(face):  # a detector-geometry plot's polygon area: lists of coordinates NumPy reads
    x = [item[0] for item in face]
    y = [item[1] for item in face]
    return 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) + x[0] * len(y)


def _joined_lists(face):
    x = [item[0] for item in face]
    return np.sum(x + x)  # list concatenation: not what an array's + does


def test_a_run_time_list_comprehension_read_only_by_numpy_is_an_array(backend):
    ang = np.array([0.2, 1.1, 2.3, 3.0, 4.4, 5.6])
    face = np.stack([np.cos(ang), 1.3 * np.sin(ang)], axis=1)
    assert_close(s2sad.grad(_shoelace_from_lists, backend=backend)(face), fd_grad(_shoelace_from_lists, (face,), 0))
    with pytest.raises(s2sad.UnsupportedError, match="length is only known at run time"):
        s2sad.grad(_joined_lists, backend=backend)(face)


# ---- real code, batch 13: numba kernels copied verbatim ------------------------------------------------------------


@numba.njit
def _bernoulli_log_pdf(y, prob):  # bambinos/kulprit's projection likelihoods
    if prob in (0, 1):
        return -np.inf
    else:
        return y * np.log(prob) + (1 - y) * np.log(1 - prob)


@numba.njit
def _bernoulli_neg_llk(points, probs):
    llk = 0
    for (
        y,
        p,
    ) in zip(points, probs):
        llk -= _bernoulli_log_pdf(y, p)
    return llk


def _kept_unless_listed(x, v):
    total = 0.0
    for e in v:
        if e not in (1.0, x):  # an item equal to the run-time x is left out
            total += e * x
        elif e in [2.0, 3.0]:
            total += 100.0
    return total


def test_in_of_a_number_and_a_tuple_of_numbers_tests_each_item(backend):
    # `prob in (0, 1)` was refused: only `in` decided when the code is generated was taken
    points, probs = np.array([1, 0, 1, 1]), np.array([0.2, 0.4, 0.6, 0.3])
    g = s2sad.grad(_bernoulli_neg_llk, argnums=1, backend=backend)(points, probs)
    assert_close(g, fd_grad(_bernoulli_neg_llk.py_func, (points, probs), 1))
    v = np.array([1.0, 0.5, 2.0, 0.3])
    gx, gv = s2sad.grad(_kept_unless_listed, argnums=(0, 1), backend=backend)(0.3, v)
    assert_close(gx, 0.5 + 2.0, rtol=1e-12)  # 1.0 and 0.3 (= x) are left out
    assert_close(gv, [0.0, 0.3, 0.3, 0.0], rtol=1e-12)
    assert_close(s2sad.grad(_kept_unless_listed, backend=backend)(0.7, v), 0.5 + 2.0 + 0.3, rtol=1e-12)
    with pytest.raises(s2sad.UnsupportedError, match="`in` is supported of a number and a tuple or list of numbers"):
        s2sad.grad(lambda x, v: x if v in (0.0, 1.0) else 2 * x, backend=backend)(0.3, v)


basis = np.array([1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0, 0.0])  # mir-group/flare's cubic spline coefficients (mgp)


@numba.njit(cache=True)
def solve_deriv_interp_1d(bands, coefs):

    M = coefs.shape[0] - 2

    # Solve interpolating equations
    # First and last rows are different

    bands[0, 1] /= bands[0, 0]
    bands[0, 2] /= bands[0, 0]
    bands[0, 3] /= bands[0, 0]
    bands[0, 0] = 1.0
    bands[1, 1] -= bands[1, 0] * bands[0, 1]
    bands[1, 2] -= bands[1, 0] * bands[0, 2]
    bands[1, 3] -= bands[1, 0] * bands[0, 3]
    bands[0, 0] = 0.0
    bands[1, 2] /= bands[1, 1]
    bands[1, 3] /= bands[1, 1]
    bands[1, 1] = 1.0

    # Now do rows 2 through M+1
    for row in range(2, M + 1):
        bands[row, 1] -= bands[row, 0] * bands[row - 1, 2]
        bands[row, 3] -= bands[row, 0] * bands[row - 1, 3]
        bands[row, 2] /= bands[row, 1]
        bands[row, 3] /= bands[row, 1]
        bands[row, 0] = 0.0
        bands[row, 1] = 1.0

    # Do last row
    bands[M + 1, 1] -= bands[M + 1, 0] * bands[M - 1, 2]
    bands[M + 1, 3] -= bands[M + 1, 0] * bands[M - 1, 3]
    bands[M + 1, 2] -= bands[M + 1, 1] * bands[M, 2]
    bands[M + 1, 3] -= bands[M + 1, 1] * bands[M, 3]
    bands[M + 1, 3] /= bands[M + 1, 2]
    bands[M + 1, 2] = 1.0
    coefs[M + 1] = bands[(M + 1), 3]
    # Now back substitute up
    for row in range(M, 0, -1):
        coefs[row] = bands[row, 3] - bands[row, 2] * coefs[row + 1]

    # Finish with first row
    coefs[0] = bands[0, 3] - bands[0, 1] * coefs[1] - bands[0, 2] * coefs[2]


@numba.njit(cache=True)
def find_coefs_1d(delta_inv, M, data, coefs):

    bands = np.zeros((M + 2, 4))

    # Setup boundary conditions
    abcd_left = np.zeros(4)
    abcd_right = np.zeros(4)

    # Left boundary
    abcd_left[0] = 1.0 * delta_inv * delta_inv
    abcd_left[1] = -2.0 * delta_inv * delta_inv
    abcd_left[2] = 1.0 * delta_inv * delta_inv
    abcd_left[3] = 0

    # Right boundary
    abcd_right[0] = 1.0 * delta_inv * delta_inv
    abcd_right[1] = -2.0 * delta_inv * delta_inv
    abcd_right[2] = 1.0 * delta_inv * delta_inv
    abcd_right[3] = 0

    for i in range(4):
        bands[0, i] = abcd_left[i]
        bands[M + 1, i] = abcd_right[i]

    for i in range(M):
        for j in range(3):
            bands[i + 1, j] = basis[j]
            bands[i + 1, 3] = data[i]

    solve_deriv_interp_1d(bands, coefs)


@numba.njit(cache=True)
def filter_coeffs_2d(dinv, data):

    Mx = data.shape[0]
    My = data.shape[1]

    Nx = Mx + 2
    Ny = My + 2

    coefs = np.zeros((Nx, Ny))

    # First, solve in the X-direction
    for iy in range(My):
        find_coefs_1d(dinv[0], Mx, data[:, iy], coefs[:, iy])

    # Now, solve in the Y-direction
    for ix in range(Nx):
        find_coefs_1d(dinv[1], My, coefs[ix, :], coefs[ix, :])

    return coefs


def _spline_energy(data, dinv):
    return np.sum(np.sin(filter_coeffs_2d(dinv, data)))


def _written_through_a_column(m):
    c = np.zeros((3, 3))
    col = c[:, 1]
    col[0] = m[0, 0] ** 2
    col[2] = col[0] * m[1, 1]  # reads the item written through the view
    return np.sum(c * m) + np.sum(col)


def _set_second(col, x):
    col[1] = x * 2.0


def _into_part_of_a_column(m):
    c = m * 1.0
    _set_second(c[1:3, 0], m[0, 0])  # a view with bounds: refused, named as the helper spells it
    return np.sum(c * m)


def test_a_helper_writes_into_a_row_or_column_of_the_callers_array(backend):
    # flare's spline fit hands coefs[:, iy] and coefs[ix, :] to a helper that writes each item: refused as a write
    # through another name for an array
    data, dinv = np.random.default_rng(8).normal(size=(5, 4)), np.array([0.4, 0.3])
    g = s2sad.grad(_spline_energy, argnums=(0, 1), backend=backend)(data, dinv)
    for i in (0, 1):
        assert_close(g[i], fd_grad(_spline_energy, (data, dinv), i))
    direction = np.cos(np.arange(20.0)).reshape(5, 4)
    _, t = s2sad.jvp(_spline_energy, (data, dinv), (direction, np.zeros(2)), backend=backend)
    assert_close(t, fd_directional(_spline_energy, (data, dinv), (direction, np.zeros(2))))
    m = np.random.default_rng(9).normal(size=(3, 3))
    assert_close(s2sad.grad(_written_through_a_column, backend=backend)(m), fd_grad(_written_through_a_column, (m,), 0))
    with pytest.raises(s2sad.UnsupportedError, match="in-place write to `col`"):
        s2sad.grad(_into_part_of_a_column, backend=backend)(m)


@numba.njit
def fun_LAGRANGE_SODE(t,y, O, I):  # a metapopulation SIR package's Lagrangian movement term

    K = I.shape[0]
    y = np.resize(y, (K,K))
    new_y = np.zeros((K,K), dtype=float)
    for i in range(K):
        for j in range(K):
            new_y[i,i] += I[i,j] * y[i,j] - O[i,j] * y[i,i]
            if i != j:
                new_y[i,j] = O[i,j] * y[i,i] - I[i,j] * y[i,j]
    return new_y.flatten()


def _lagrange_flows(y, O, I):
    return np.sum(np.sin(fun_LAGRANGE_SODE(0.0, y, O, I))) + np.sum(np.resize(y, 11) ** 2)


def _per_block(x, b):
    n_blocks = -(-x.shape[0] // 3)  # ceil division
    return np.sum(x) * n_blocks + b ** -(x[0] * x[1])


@pytest.mark.parametrize("fn, args", [
    (_lagrange_flows, (np.linspace(0.1, 0.9, 9), np.eye(3) + 0.2, np.full((3, 3), 0.3))),
    (_per_block, (np.array([0.5, 1.5, 2.0, 0.25]), 1.7)),  # -(-n // 3) was folded into (-(-n)) // 3: silently wrong
], ids=["np_resize", "ceil_division"])
def test_batch13_kernels_match_finite_differences(fn, args, backend):
    value, g = s2sad.value_and_grad(fn, argnums=tuple(range(len(args))), backend=backend)(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    for i in range(len(args)):
        assert_close(g[i], fd_grad(fn, args, i))
    direction = tuple(np.cos(np.arange(np.size(a)) + 1.0).reshape(np.shape(a)) for a in args)
    _, t = s2sad.jvp(fn, args, direction, backend=backend)
    assert_close(t, fd_directional(fn, args, direction))


@numba.njit(fastmath=True)  # an NDVI phenology package's product-kernel density, var_type='cc' as statsmodels spells it
def _normal_reference(data):
        nobs,_ = np.shape(data)
        X = np.array([np.std(data[:,idx]) for idx in range(np.shape(data)[1])])
        return 1.06 * X * nobs ** (- 1. / (4 + data.shape[1]))

@numba.njit(fastmath=True)
def gaussian_numba(h, Xi, x):
    return (1. / np.sqrt(2 * np.pi)) * np.exp(-(Xi - x)**2 / (h**2 * 2.))


@numba.njit(fastmath=True)
def gpke_numba(bw, data, data_predict, var_type):
    Kval = np.empty(data.shape)
    for ii, vtype in enumerate(var_type):
        Kval[:, ii] = gaussian_numba(bw[ii], data[:, ii], data_predict[ii])
    Kval_prod=np.array([np.prod(Kval[idx,:]) for idx in range(np.shape(Kval)[0])])
    dens =Kval_prod / np.prod(bw)
    return dens.sum()

@numba.njit(fastmath=True)
def get_pdf_numba(bw, data, var_type,data_predict):
    nobs,_ = np.shape(data)
    pdf_est = [gpke_numba(bw, data, data_predict[i, :], var_type) / nobs for i in range(np.shape(data_predict)[0])]
    #pdf_est = np.squeeze(pdf_est)
    return np.array(pdf_est)


def _kde_log_likelihood(data, points):
    return np.sum(np.log(get_pdf_numba(_normal_reference(data), data, 'cc', points)))


def test_a_loop_over_a_string_known_when_the_code_is_generated_runs_once_per_character(backend):
    # enumerate(var_type) of 'cc' was refused as a loop over a number
    rng = np.random.default_rng(10)
    data, points = rng.normal(size=(8, 2)), rng.normal(size=(3, 2))
    g = s2sad.grad(_kde_log_likelihood, argnums=(0, 1), backend=backend)(data, points)
    for i in (0, 1):
        assert_close(g[i], fd_grad(_kde_log_likelihood, (data, points), i))


_ECONVERGED = 0  # QuantEcon's optimize.root_finding.newton, with the namedtuple it returns
_ECONVERR = -1
results = collections.namedtuple('results', 'root function_calls iterations converged')


@numba.njit
def _results(r):
    r"""Select from a tuple of(root, funccalls, iterations, flag)"""
    x, funcalls, iterations, flag = r
    return results(x, funcalls, iterations, flag == 0)


@numba.njit
def newton(func, x0, fprime, args=(), tol=1.48e-8, maxiter=50,
           disp=True):
    if tol <= 0:
        raise ValueError("tol is too small <= 0")
    if maxiter < 1:
        raise ValueError("maxiter must be greater than 0")
    # Convert to float (don't use float(x0); this works also for complex x0)
    p0 = 1.0 * x0
    funcalls = 0
    status = _ECONVERR

    # Newton-Raphson method
    for itr in range(maxiter):
        # first evaluate fval
        fval = func(p0, *args)
        funcalls += 1
        # If fval is 0, a root has been found, then terminate
        if fval == 0:
            status = _ECONVERGED
            p = p0
            itr -= 1
            break
        fder = fprime(p0, *args)
        funcalls += 1
        # derivative is zero, not converged
        if fder == 0:
            p = p0
            break
        newton_step = fval / fder
        # Newton step
        p = p0 - newton_step
        if abs(p - p0) < tol:
            status = _ECONVERGED
            break
        p0 = p

    if disp and status == _ECONVERR:
        msg = "Failed to converge"
        raise RuntimeError(msg)

    return _results((p, funcalls, itr + 1, status))


@numba.njit
def _cubic(x, a):
    return x ** 3 - a


@numba.njit
def _cubic_prime(x, a):
    return 3 * x ** 2


def _cube_root(a):
    return newton(_cubic, 1.0, _cubic_prime, args=(a,)).root


@numba.vectorize(nopython=True)
def gammaln(x):  # QuantEcon's quad.py
    return math.lgamma(x)


def _gamma_log_likelihood(shape, x):
    return np.sum((shape - 1.0) * np.log(x) - x - gammaln(shape))


def test_a_field_of_the_namedtuple_a_call_returns_and_math_lgamma(backend):
    # `newton(...).root` was refused (a Record used as a number); math.lgamma of a differentiated value had no rule
    a = 2.0
    assert_close(s2sad.grad(_cube_root, backend=backend)(a), 1.0 / (3.0 * a ** (2.0 / 3.0)), rtol=1e-7)
    x = np.array([0.5, 1.7, 2.2, 0.9])
    g = s2sad.grad(_gamma_log_likelihood, backend=backend)(2.5, x)
    assert_close(g, np.sum(np.log(x)) - x.size * scipy.special.digamma(2.5), rtol=1e-10)


@numba.njit(cache=True, fastmath=True)  # a Heston/Bates calibration package's common-random-numbers kernel
def generate_heston_paths_crn(S0, r, q, v0, kappa, theta, xi, rho, T, n_paths, n_steps, noise_matrix):
    dt, sqrt_dt = T / n_steps, np.sqrt(T / n_steps)
    c1, c2 = rho, np.sqrt(1 - rho**2)
    
    prices = np.zeros((n_paths, n_steps + 1)); prices[:, 0] = S0
    cv, cs = np.full(n_paths, v0), np.full(n_paths, S0)
    
    for j in range(n_steps):
        Z1, Z2 = noise_matrix[0, j], noise_matrix[1, j]
        vt = np.maximum(cv, 0.0) 
        cs *= np.exp((r - q - 0.5 * vt) * dt + np.sqrt(vt) * sqrt_dt * Z1)
        cv += kappa * (theta - vt) * dt + xi * np.sqrt(vt) * sqrt_dt * (c1 * Z1 + c2 * Z2)
        prices[:, j + 1] = cs
        
    return prices


def _heston_call(v0, xi, noise):
    paths = generate_heston_paths_crn(100.0, 0.02, 0.0, v0, 1.5, 0.05, xi, -0.6, 1.0, 6, 5, noise)
    return np.mean(np.maximum(paths[:, -1] - 95.0, 0.0)) + np.mean(np.clip(paths, 90.0, 110.0))


def test_a_variance_truncated_at_zero_sends_no_nan_back_through_its_square_root(backend):
    # full truncation, np.sqrt(np.maximum(v, 0.0)): where v < 0 the square root's infinite slope at 0 met
    # maximum's zero share as inf * 0, and the whole gradient was nan
    noise = np.random.default_rng(0).normal(size=(2, 5, 6))
    g = s2sad.grad(_heston_call, argnums=(0, 1), backend=backend)(0.04, 0.9, noise)
    for i in (0, 1):
        assert_close(g[i], fd_grad(_heston_call, (0.04, 0.9, noise), i))


@numba.njit(cache=True, fastmath=True)  # the same package's Bates (Heston with jumps) kernel
def generate_bates_paths_crn(S0, r, q, v0, kappa, theta, xi, rho, lamb, mu_j, sigma_j, T, n_paths, n_steps, noise_matrix):
    dt, sqrt_dt = T / n_steps, np.sqrt(T / n_steps)
    c1, c2 = rho, np.sqrt(1 - rho**2)
    k_bar = np.exp(mu_j + 0.5 * sigma_j**2) - 1
    drift_corr = lamb * k_bar
    
    prices = np.zeros((n_paths, n_steps + 1)); prices[:, 0] = S0
    cv, cs = np.full(n_paths, v0, dtype=np.float64), np.full(n_paths, S0, dtype=np.float64)
    lam_dt, en_lam = lamb * dt, np.exp(-lamb * dt)
    
    for j in range(n_steps):
        Z1, Z2, Uj, Zs = noise_matrix[0, j, :n_paths], noise_matrix[1, j, :n_paths], noise_matrix[2, j, :n_paths], noise_matrix[3, j, :n_paths]
        vt = np.maximum(cv, 0.0)
        cv += kappa * (theta - vt) * dt + xi * np.sqrt(vt) * sqrt_dt * (c1 * Z1 + c2 * Z2)
        db, diff = (r - q - 0.5 * vt - drift_corr) * dt, np.sqrt(vt) * sqrt_dt * Z1
        
        for i in range(n_paths):
            u, nj, pp = Uj[i], 0, en_lam
            sp = pp
            while u > sp and nj < 10:
                nj += 1
                pp *= lam_dt / nj
                sp += pp
            jm = nj * mu_j + np.sqrt(float(nj)) * sigma_j * Zs[i] if nj > 0 else 0.0
            cs[i] *= np.exp(db[i] + diff[i] + jm)
        prices[:, j + 1] = cs
    return prices


def _bates_mean(v0, kappa, xi, noise):
    paths = generate_bates_paths_crn(100.0, 0.02, 0.0, v0, kappa, 0.04, xi, -0.5, 0.8, -0.05, 0.1, 1.0, 6, 5, noise)
    return np.mean(paths[:, -1])


def test_a_value_recomputed_in_the_reverse_sweep_reads_its_operands_as_they_were(backend):
    # vt = np.maximum(cv, 0.0) was recomputed for np.sqrt(vt)'s adjoint after cv += ... had changed cv (the
    # adjoint of the per-path loop below read it): the gradients of kappa and xi were silently wrong, or nan
    rng = np.random.default_rng(1)
    noise = np.concatenate([rng.normal(size=(2, 5, 6)), rng.uniform(size=(1, 5, 6)), rng.normal(size=(1, 5, 6))])
    args = (0.04, 1.5, 0.3, noise)
    g = s2sad.grad(_bates_mean, argnums=(0, 1, 2), backend=backend)(*args)
    for i in range(3):
        assert_close(g[i], fd_grad(_bates_mean, args, i))


# ---- real code, batch 16: numba kernels of audio filters, volatility models, resampling, distributions, networks --

# jurihock/biquad src/python/biquad/biquad.py (__df1__) and lowpass.py (the filter kernel, a staticmethod)
numpy = np


@numba.jit(nopython=True, fastmath=True)
def __df1__(g, ba, xy, x, y, i):
    """
    Compute filter output y[i] based on filter input x[i]
    as well as specified filter gain g, coeffs ba and delay line xy,
    according to the Direct Form 1.
    """

    # roll x
    xy[0, 2] = xy[0, 1]
    xy[0, 1] = xy[0, 0]

    # roll y
    xy[1, 2] = xy[1, 1]
    xy[1, 1] = xy[1, 0]

    # update x
    xy[0, 0] = x[i]

    # compute intermediate results b*x and a*y
    bx = ba[0, 0] * xy[0, 0] + ba[0, 1] * xy[0, 1] + ba[0, 2] * xy[0, 2]
    ay =                       ba[1, 1] * xy[1, 1] + ba[1, 2] * xy[1, 2]

    # update y
    xy[1, 0] = (bx * g - ay) / ba[1, 0]

    # return y
    y[i] = xy[1, 0]


class lowpass:

    @staticmethod
    @numba.jit(nopython=True, fastmath=True)
    def __filter__(ba, xy, x, y, f, g, q, sr):

        rs = 2 * numpy.pi / sr

        for i in range(x.size):

            w = f[i] * rs

            cosw = numpy.cos(w)
            sinw = numpy.sin(w)

            alpha = sinw / (+2 * q[i])
            beta  = cosw * (-2)

            # update b
            ba[0, 1] = +(1 - cosw)
            ba[0, 2] = ba[0, 1] / +2
            ba[0, 0] = ba[0, 2]

            # update a
            ba[1, 0] = 1 + alpha
            ba[1, 1] =     beta
            ba[1, 2] = 1 - alpha

            # update y
            __df1__(g[i], ba, xy, x, y, i)


def _lowpass_energy(x, f, q):  # the coefficients start from np.array of a constant nested list, as biquad's do
    ba = np.array([[1., 0., 0.], [1., 0., 0.]])
    xy = np.zeros((2, 3))
    y = np.zeros(x.shape)
    lowpass.__filter__(ba, xy, x, y, f, np.ones(x.shape), q, 44100.0)
    return np.sum(y * y)


def test_a_biquad_filter_writes_into_coefficients_made_from_a_constant_table():
    # ba = np.array([[1., 0., 0.], [1., 0., 0.]]) was refused at `ba[0, 1] = ...` in the kernel: the constant
    # table np.array reads was taken for memory another name shares
    rng = np.random.default_rng(5)
    args = (rng.normal(size=8), np.full(8, 1000.0) + 50.0 * rng.random(8), np.full(8, 0.7071))
    g = s2sad.grad(_lowpass_energy, argnums=(0, 1, 2), backend="python")(*args)
    for k in range(3):
        assert_close(g[k], fd_grad(_lowpass_energy, args, k))


def _as_written(fn):
    return fn


# bashtage/arch arch/univariate/recursions_python.py (arch.compat.numba's jit is numba's; the arch._typing aliases
# are ndarray; GARCHUpdater without its docstring-inheriting metaclass)
jit = numba.jit
cast = typing.cast
Float64Array1D = Float64Array2D = np.ndarray


def bounds_check_python(sigma2: float, var_bounds: Float64Array2D) -> float:
    if sigma2 < var_bounds[0]:
        sigma2 = var_bounds[0]
    elif sigma2 > var_bounds[1]:
        if not np.isinf(sigma2):
            sigma2 = var_bounds[1] + np.log(sigma2 / var_bounds[1])
        else:
            sigma2 = var_bounds[1] + 1000
    return sigma2


bounds_check = jit(bounds_check_python, nopython=True, inline="always")


class GARCHUpdater:
    def __init__(self, p: int, o: int, q: int, power: float) -> None:
        self.p = p
        self.o = o
        self.q = q
        self.power = power
        self.backcast = -1.0

    def initialize_update(
        self,
        parameters: Float64Array1D,
        backcast: float | Float64Array1D,
        nobs: int,
    ) -> None:
        self.backcast = cast("float", backcast)

    def update(
        self,
        t: int,
        parameters: Float64Array1D,
        resids: Float64Array1D,
        sigma2: Float64Array1D,
        var_bounds: Float64Array2D,
    ) -> None:
        loc = 0
        sigma2[t] = parameters[loc]
        loc += 1
        for j in range(self.p):
            if (t - 1 - j) < 0:
                sigma2[t] += parameters[loc] * self.backcast
            else:
                sigma2[t] += parameters[loc] * (np.abs(resids[t - 1 - j]) ** self.power)
            loc += 1
        for j in range(self.o):
            if (t - 1 - j) < 0:
                sigma2[t] += parameters[loc] * 0.5 * self.backcast
            else:
                sigma2[t] += (
                    parameters[loc]
                    * (np.abs(resids[t - 1 - j]) ** self.power)
                    * (resids[t - 1 - j] < 0)
                )
            loc += 1
        for j in range(self.q):
            if (t - 1 - j) < 0:
                sigma2[t] += parameters[loc] * self.backcast
            else:
                sigma2[t] += parameters[loc] * sigma2[t - 1 - j]
            loc += 1
        sigma2[t] = bounds_check(sigma2[t], var_bounds[t])


def _updater_nll(parameters, resids):
    up = GARCHUpdater(1, 1, 1, 2.0)
    up.initialize_update(parameters, 0.5, resids.shape[0])
    sigma2 = np.zeros(resids.shape[0])
    bounds = np.ones((resids.shape[0], 2)) * np.array([1e-6, 1e6])
    for t in range(resids.shape[0]):
        up.update(t, parameters, resids, sigma2, bounds)
    return np.sum(np.log(sigma2) + resids ** 2 / sigma2)


def test_typing_cast_is_its_value():
    # GARCHUpdater.initialize_update's cast("float", backcast) was refused: no derivative rule for `cast`
    args = (np.array([0.1, 0.1, 0.05, 0.8]), 0.8 * np.random.default_rng(11).normal(size=8))
    g = s2sad.grad(_updater_nll, argnums=(0, 1), backend="python")(*args)
    for k in range(2):
        assert_close(g[k], fd_grad(_updater_nll, args, k))


# bmcfee/resampy resampy/interpn.py
guvectorize, prange = numba.guvectorize, numba.prange


def _resample_loop(x, t_out, interp_win, interp_delta, num_table, scale, y):

    index_step = int(scale * num_table)
    time_register = 0.0

    n = 0
    frac = 0.0
    index_frac = 0.0
    offset = 0
    eta = 0.0
    weight = 0.0

    nwin = interp_win.shape[0]
    n_orig = x.shape[0]
    n_out = t_out.shape[0]

    for t in prange(n_out):
        time_register = t_out[t]

        # Grab the top bits as an index to the input buffer
        n = int(time_register)

        # Grab the fractional component of the time index
        frac = scale * (time_register - n)

        # Offset into the filter
        index_frac = frac * num_table
        offset = int(index_frac)

        # Interpolation factor
        eta = index_frac - offset

        # Compute the left wing of the filter response
        i_max = min(n + 1, (nwin - offset) // index_step)
        for i in range(i_max):

            weight = (
                interp_win[offset + i * index_step]
                + eta * interp_delta[offset + i * index_step]
            )
            y[t] += weight * x[n - i]

        # Invert P
        frac = scale - frac

        # Offset into the filter
        index_frac = frac * num_table
        offset = int(index_frac)

        # Interpolation factor
        eta = index_frac - offset

        # Compute the right wing of the filter response
        k_max = min(n_orig - n - 1, (nwin - offset) // index_step)
        for k in range(k_max):
            weight = (
                interp_win[offset + k * index_step]
                + eta * interp_delta[offset + k * index_step]
            )
            y[t] += weight * x[n + k + 1]


_resample_loop_p = jit(nopython=True, nogil=True, parallel=True)(_resample_loop)
_resample_loop_s = jit(nopython=True, nogil=True, parallel=False)(_resample_loop)


@guvectorize(
    "(n),(m),(p),(p),(),()->(m)",
    nopython=True,
)
def resample_f_p(x, t_out, interp_win, interp_delta, num_table, scale, y):
    _resample_loop_p(x, t_out, interp_win, interp_delta, num_table, scale, y)


@guvectorize(
    "(n),(m),(p),(p),(),()->(m)",
    nopython=True,
)
def resample_f_s(x, t_out, interp_win, interp_delta, num_table, scale, y):
    _resample_loop_s(x, t_out, interp_win, interp_delta, num_table, scale, y)


def _resampled(x, interp_win, sample_ratio, precision):  # resampy.core.resample's body, for a filter passed in
    axis = -1
    shape = list(x.shape)
    shape[axis] = int(shape[axis] * sample_ratio)
    y = np.zeros_like(x, dtype=x.dtype, shape=shape)
    if sample_ratio < 1:
        interp_win = sample_ratio * interp_win
    interp_delta = np.diff(interp_win, append=interp_win[-1])
    scale = min(1.0, sample_ratio)
    time_increment = 1.0 / sample_ratio
    t_out = np.arange(shape[axis]) * time_increment
    resample_f_s(
        x.swapaxes(-1, axis),
        t_out,
        interp_win,
        interp_delta,
        precision,
        scale,
        y.swapaxes(-1, axis),
    )
    return y


def _resampled_energy(x, interp_win):
    return np.sum(_resampled(x, interp_win, 1.5, 4) ** 2)


def _rows_resampled(x, interp_win):  # two signals at once: the gufunc loops over the rows of x and y
    y = np.zeros((2, 9))
    resample_f_s(x, np.arange(9) * 0.66, interp_win, np.diff(interp_win, prepend=0.0), 4, 1.0, y)
    return np.sum(y ** 2)


def test_resampy_resamples_into_an_output_given_through_swapped_axes():
    # refused in turn: shape[axis] = ... (a list stored at a local int), np.zeros_like(..., shape=) (numba has no
    # such keyword), np.diff(..., append=), the gufunc's rank of np.arange(n) * dt, its output argument
    rng = np.random.default_rng(13)
    x, win = rng.normal(size=6), np.hanning(17)[8:] + 0.01
    for f, args in ((_resampled_energy, (x, win)), (_rows_resampled, (np.stack([x, x[::-1]]), win))):
        g = s2sad.grad(f, argnums=(0, 1), backend="python")(*args)
        for k in range(2):
            assert_close(g[k], fd_grad(f, args, k))


def test_zeros_like_given_a_shape_compiles_under_numba():
    def made(x, w):
        y = np.zeros_like(x, dtype=x.dtype, shape=(2, 3))
        y[1] = x * w
        return np.sum(y ** 2) + np.sum(np.full_like(x, 2.0, shape=3)) * w

    x = np.array([0.5, 1.0, 2.0])
    assert_close(s2sad.grad(made, argnums=1)(x, 0.7), 2.0 * 0.7 * np.sum(x ** 2) + 6.0, rtol=1e-12)


# HDembinski/numba-stats src/numba_stats/_util.py (the jit wrappers, _trans) and norm.py (_logpdf1, _cdf1, _logpdf)
nb, Array, Any, Callable = numba, numba.types.Array, typing.Any, typing.Callable
_prange, _erf = numba.prange, math.erf
DistributionFunction = Callable[..., np.ndarray]


def _readonly_carray(T: type) -> Array:
    return Array(T, 1, "A", readonly=True)


def _jit_custom(
    signatures: Any, cache: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """
    Wrap numba.njit to reduce boilerplate code.

    We want to build jitted functions with explicit signatures to restrict the argument
    types which are used in the implemnetation to float32 or float64. We also want to
    pass specific options consistently: error_model='numpy' and inline='always'. The
    latter is important to profit from auto-parallelization of surrounding code.
    """
    return nb.njit(signatures, cache=cache, inline="always", error_model="numpy")  # type:ignore[no-any-return]


def _jit_pointwise(
    npar: int, *, cache: bool = True
) -> Callable[[Callable[..., float]], Callable[..., float]]:
    """
    Wrap numba.njit to reduce boilerplate code.

    We want to build jitted functions with explicit signatures to restrict the argument
    types which are used in the implemnetation to float32 or float64. We also want to
    pass specific options consistently: error_model='numpy' and inline='always'. The
    latter is important to profit from auto-parallelization of surrounding code.

    This decorator builds signatures with "narg" array arguments followed by "npar"
    scalar arguments, and it does that for the types float32 or float64.

    Parameters
    ----------
    npar : int
        Number of scalar arguments.
    cache : bool, optional (default: True)
        Whether to cache the compilation. We must turn this off if the function uses a
        function pointer from Scipy.
    """
    assert npar >= 0
    signatures = []
    for T in (nb.float32, nb.float64):
        sig = T(*([T] * npar))
        signatures.append(sig)
    return _jit_custom(signatures, cache=cache)


def _jit(
    npar: int, *, narg: int = 1, cache: bool = True
) -> Callable[[DistributionFunction], DistributionFunction]:
    """
    Wrap numba.njit to reduce boilerplate code.

    We want to build jitted functions with explicit signatures to restrict the argument
    types which are used in the implemnetation to float32 or float64. We also want to
    pass specific options consistently: error_model='numpy' and inline='always'. The
    latter is important to profit from auto-parallelization of surrounding code.

    This decorator builds signatures with "narg" array arguments followed by "npar"
    scalar arguments, and it does that for the types float32 or float64.

    Parameters
    ----------
    npar : int
        Number of scalar arguments.
    narg : int, optional (default: 1)
        Number of array arguments.
    cache : bool, optional (default: True)
        Whether to cache the compilation. We must turn this off if the function uses a
        function pointer from Scipy.
    """
    assert npar >= 0
    assert narg >= 1
    signatures = []
    for T in (nb.float32, nb.float64):
        sig = T[:](
            *[_readonly_carray(T) for _ in range(narg)], *[T for _ in range(npar)]
        )
        signatures.append(sig)
    return _jit_custom(signatures, cache=cache)


@_jit(2)
def _trans(x: np.ndarray, loc: float, scale: float) -> np.ndarray:
    inv_scale = type(scale)(1) / scale
    return (x - loc) * inv_scale


@_jit_pointwise(1)
def _logpdf1(z: float) -> float:
    T = type(z)
    return -T(0.5) * (z * z + T(np.log(2 * np.pi)))


@_jit_pointwise(1)
def _cdf1(z: float) -> float:
    T = type(z)
    c = T(np.sqrt(0.5))
    return T(0.5) * (T(1.0) + _erf(z * c))


@_jit(2)
def _logpdf(x: np.ndarray, loc: float, scale: float) -> np.ndarray:
    r = _trans(x, loc, scale)
    for i in _prange(len(r)):
        r[i] = _logpdf1(r[i]) - np.log(scale)
    return r


def _normal_nll(mu, sigma, x):
    return -np.sum(_logpdf(x, mu, sigma)) + np.sum(_cdf1(x[0]))


def test_a_number_type_made_by_type_of_a_number_converts_to_its_precision():
    # T = type(z); T(0.5) and type(scale)(1) were refused as calls of a called expression
    args = (0.2, 1.3, np.array([0.3, 1.2, -0.4, 2.0, 0.9]))
    g = s2sad.grad(_normal_nll, argnums=(0, 1), backend="python")(*args)
    for k in range(2):
        assert_close(g[k], fd_grad(_normal_nll, args, k))
    with pytest.raises(s2sad.UnsupportedError, match="a number's type\\(\\) is compared here"):
        s2sad.grad(lambda z: 2.0 * z if type(z) is float else z, backend="python")(0.7)


def test_a_callee_made_by_exec_is_refused_at_its_call():
    namespace = {}
    exec("def logpdf(x, loc, scale):\n    return -0.5 * ((x - loc) / scale) ** 2\n", namespace)
    logpdf = namespace["logpdf"]

    def nll(mu, x):
        return -np.sum(logpdf(x, mu, 1.0))

    with pytest.raises(s2sad.SourceUnavailableError, match="`logpdf` is called here: cannot find the source") as err:
        s2sad.grad(nll, backend="python")(0.2, np.ones(3))
    assert "return -np.sum(logpdf(x, mu, 1.0))" in str(err.value)


# nicoloval/NEMtropy src/NEMtropy/models_functions.py: the configuration model's likelihood and its hand gradient
@jit(nopython=True)
def loglikelihood_cm(x, args):
    """Returns UBCM loglikelihood function evaluated in x.

    :param x: Evaluating point *x*.
    :type x: numpy.ndarray
    :param args: Arguments to define the loglikelihood function.
        Degrees and classes cardinality sequences.
    :type args: (numpy.ndarray, numpy.ndarray)
    :return: Loglikelihood value.
    :rtype: float
    """
    k = args[0]
    c = args[1]
    n = len(k)
    f = 0.0
    for i in np.arange(n):
        f += c[i] * k[i] * np.log(x[i])
        for j in np.arange(n):
            if i == j:
                f -= (c[i] * (c[i] - 1) * np.log(1 + (x[i]) ** 2)) / 2
            else:
                f -= (c[i] * c[j] * np.log(1 + x[i] * x[j])) / 2
    return f


@jit(nopython=True)
def loglikelihood_prime_cm(x, args):
    """Returns UBCM loglikelihood gradient function evaluated in x.

    :param x: Evaluating point *x*.
    :type x: numpy.ndarray
    :param args: Arguments to define the loglikelihood gradient function.
        Degrees and classes cardinality sequences.
    :type args: (numpy.ndarray, numpy.ndarray)
    :return: Loglikelihood gradient.
    :rtype: float
    """
    k = args[0]
    c = args[1]
    n = len(k)
    f = np.zeros_like(k, dtype=np.float64)
    for i in np.arange(n):
        f[i] += c[i] * k[i] / x[i]
        for j in np.arange(n):
            if i == j:
                f[i] -= c[i] * (c[j] - 1) * (x[j] / (1 + (x[j] ** 2)))
            else:
                f[i] -= c[i] * c[j] * (x[j] / (1 + x[i] * x[j]))
    return f


def test_a_network_likelihood_over_a_tuple_of_arrays_matches_its_hand_gradient():
    x, args = np.array([0.5, 0.9, 1.3, 0.7]), (np.array([2.0, 1.0, 3.0, 2.0]), np.array([1.0, 2.0, 1.0, 1.0]))
    g = s2sad.grad(loglikelihood_cm, backend="python")(x, args)
    assert_close(g, loglikelihood_prime_cm(x, args), rtol=1e-12)
    assert_close(g, fd_grad(loglikelihood_cm.py_func, (x, args), 0))


# royalexis/bls_cuda utils_python/keplerian.py
njit = numba.njit


@njit
def trueAnomaly(eccn, Eanom):
    """
    Calculates the true anomaly
    """

    ratio = (1 + eccn) / (1 - eccn)
    return 2 * np.arctan(np.sqrt(ratio) * np.tan(Eanom/2))

@njit
def distance(a, eccn, Tanom):
    """
    Calculates the distance between the star and the planet
    """

    return a * (1 - eccn*eccn) / (1 + eccn * np.cos(Tanom))

@njit
def solve_kepler_eq(eccn, Manom, Eanom, thres=1e-8, itmax=100):

    # First calculation to find diff
    Eold = max(Eanom, 0.0001)
    Eanom = Manom + eccn*np.sin(Eanom)
    diff = abs(1 - Eanom/Eold)
    Eold = Eanom

    i = 0
    while (diff >= thres and i < itmax):
        Eanom = Manom + eccn * np.sin(Eanom)
        diff = abs(1 - Eanom/Eold)
        Eold = Eanom
        i += 1

    return Eanom


def _star_planet_distance(a, eccn, Manom):
    E = solve_kepler_eq(eccn, Manom, Manom)
    return distance(a, eccn, trueAnomaly(eccn, E))


def test_a_planet_distance_through_a_fixed_point_kepler_solve(backend):
    args = (1.5, 0.2, 1.3)
    g = s2sad.grad(_star_planet_distance, argnums=(0, 1, 2), backend=backend)(*args)
    for k in range(3):
        assert_close(g[k], fd_grad(_star_planet_distance, args, k))


def test_np_cross_takes_a_list():
    def f(h, v):  # poliastro's rv2coe: n = cross([0, 0, 1], h)
        return np.sum(np.cross([0, 0, 1], h) ** 2) + np.sum(np.cross(h, (1.0, v[0], 2.0)) * v)

    args = (np.array([0.3, -1.2, 0.5]), np.array([1.1, 0.4, -0.7]))
    g = s2sad.grad(f, argnums=(0, 1), backend="python")(*args)
    for k in range(2):
        assert_close(g[k], fd_grad(f, args, k))


# poliastro/poliastro src/poliastro/core/angles.py, propagation/farnocchia.py (docstrings elided). poliastro's jit
# is numba's njit; here it leaves the functions plain Python, as pytest rewrites this module's `assert`s into
# calls numba cannot compile (the finite differences run them)
jit = _as_written


@jit
def nu_to_E(nu, ecc):
    E = 2 * np.arctan(np.sqrt((1 - ecc) / (1 + ecc)) * np.tan(nu / 2))
    return E


@jit
def E_to_M(E, ecc):
    M = E - ecc * np.sin(E)
    return M


@jit
def nu_to_D(nu):
    # TODO: Rename to B
    return np.tan(nu / 2.0)


@jit
def D_to_M(D):
    M = D + D**3 / 3
    return M


@jit
def nu_to_F(nu, ecc):
    F = 2 * np.arctanh(np.sqrt((ecc - 1) / (ecc + 1)) * np.tan(nu / 2))
    return F


@jit
def F_to_M(F, ecc):
    M = ecc * np.sinh(F) - F
    return M


@jit
def S_x(ecc, x, atol=1e-12):
    assert abs(x) < 1
    S = 0
    k = 0
    while True:
        S_old = S
        S += (ecc - 1 / (2 * k + 3)) * x**k
        k += 1
        if abs(S - S_old) < atol:
            return S


@jit
def D_to_M_near_parabolic(D, ecc):
    x = (ecc - 1.0) / (ecc + 1.0) * (D**2)
    assert abs(x) < 1
    S = S_x(ecc, x)
    return (
        np.sqrt(2.0 / (1.0 + ecc)) * D
        + np.sqrt(2.0 / (1.0 + ecc) ** 3) * (D**3) * S
    )


@jit
def delta_t_from_nu(nu, ecc, k=1.0, q=1.0, delta=1e-2):
    assert -np.pi <= nu < np.pi
    if ecc < 1 - delta:
        # Strong elliptic
        E = nu_to_E(nu, ecc)  # (-pi, pi]
        M = E_to_M(E, ecc)  # (-pi, pi]
        n = np.sqrt(k * (1 - ecc) ** 3 / q**3)
    elif 1 - delta <= ecc < 1:
        E = nu_to_E(nu, ecc)  # (-pi, pi]
        if delta <= 1 - ecc * np.cos(E):
            # Strong elliptic
            M = E_to_M(E, ecc)  # (-pi, pi]
            n = np.sqrt(k * (1 - ecc) ** 3 / q**3)
        else:
            # Near parabolic
            D = nu_to_D(nu)  # (-∞, ∞)
            # If |nu| is far from pi this result is bounded
            # because the near parabolic region shrinks in its vicinity,
            # otherwise the eccentricity is very close to 1
            # and we are really far away
            M = D_to_M_near_parabolic(D, ecc)
            n = np.sqrt(k / (2 * q**3))
    elif ecc == 1:
        # Parabolic
        D = nu_to_D(nu)  # (-∞, ∞)
        M = D_to_M(D)  # (-∞, ∞)
        n = np.sqrt(k / (2 * q**3))
    elif 1 + ecc * np.cos(nu) < 0:
        # Unfeasible region
        return np.nan
    elif 1 < ecc <= 1 + delta:
        # NOTE: Do we need to wrap nu here?
        # For hyperbolic orbits, it should anyway be in
        # (-arccos(-1 / ecc), +arccos(-1 / ecc))
        F = nu_to_F(nu, ecc)  # (-∞, ∞)
        if delta <= ecc * np.cosh(F) - 1:
            # Strong hyperbolic
            M = F_to_M(F, ecc)  # (-∞, ∞)
            n = np.sqrt(k * (ecc - 1) ** 3 / q**3)
        else:
            # Near parabolic
            D = nu_to_D(nu)  # (-∞, ∞)
            M = D_to_M_near_parabolic(D, ecc)  # (-∞, ∞)
            n = np.sqrt(k / (2 * q**3))
    elif 1 + delta < ecc:
        # Strong hyperbolic
        F = nu_to_F(nu, ecc)  # (-∞, ∞)
        M = F_to_M(F, ecc)  # (-∞, ∞)
        n = np.sqrt(k * (ecc - 1) ** 3 / q**3)
    else:
        raise RuntimeError

    return M / n


def test_a_name_bound_in_branches_at_different_depths_gets_its_adjoint_only_where_bound():
    # D = nu_to_D(nu) in two branches, one nested deeper, and S_x's result bound in a loop of one branch: their
    # adjoints were zeroed at the top of the reverse sweep, reading names the branch taken never binds
    # (UnboundLocalError under Python)
    for args, argnums in (((0.7, 0.3), (0, 1)), ((0.2, 0.995), (0, 1)), ((0.7, 1.5), (0, 1)), ((0.7, 1.0), (0,))):
        g = s2sad.grad(delta_t_from_nu, argnums=argnums, backend="python")(*args)
        for k, gk in zip(argnums, g):
            assert_close(gk, fd_grad(delta_t_from_nu, args, k))


# poliastro/poliastro src/poliastro/_math/special.py, _math/linalg.py and core/propagation/vallado.py (docstrings
# elided; jit as above)
gamma = math.gamma


@jit
def norm(arr):
    return np.sqrt(arr @ arr)


@jit
def stumpff_c2(psi):
    eps = 1.0
    if psi > eps:
        res = (1 - np.cos(np.sqrt(psi))) / psi
    elif psi < -eps:
        res = (np.cosh(np.sqrt(-psi)) - 1) / (-psi)
    else:
        res = 1.0 / 2.0
        delta = (-psi) / gamma(2 + 2 + 1)
        k = 1
        while res + delta != res:
            res = res + delta
            k += 1
            delta = (-psi) ** k / gamma(2 * k + 2 + 1)

    return res


@jit
def stumpff_c3(psi):
    eps = 1.0
    if psi > eps:
        res = (np.sqrt(psi) - np.sin(np.sqrt(psi))) / (psi * np.sqrt(psi))
    elif psi < -eps:
        res = (np.sinh(np.sqrt(-psi)) - np.sqrt(-psi)) / (-psi * np.sqrt(-psi))
    else:
        res = 1.0 / 6.0
        delta = (-psi) / gamma(2 + 3 + 1)
        k = 1
        while res + delta != res:
            res = res + delta
            k += 1
            delta = (-psi) ** k / gamma(2 * k + 3 + 1)

    return res



@jit
def vallado(k, r0, v0, tof, numiter):
    # Cache some results
    dot_r0v0 = r0 @ v0
    norm_r0 = norm(r0)
    sqrt_mu = k**0.5
    alpha = -(v0 @ v0) / k + 2 / norm_r0

    # First guess
    if alpha > 0:
        # Elliptic orbit
        xi_new = sqrt_mu * tof * alpha
    elif alpha < 0:
        # Hyperbolic orbit
        xi_new = (
            np.sign(tof)
            * (-1 / alpha) ** 0.5
            * np.log(
                (-2 * k * alpha * tof)
                / (
                    dot_r0v0
                    + np.sign(tof)
                    * np.sqrt(-k / alpha)
                    * (1 - norm_r0 * alpha)
                )
            )
        )
    else:
        # Parabolic orbit
        # (Conservative initial guess)
        xi_new = sqrt_mu * tof / norm_r0

    # Newton-Raphson iteration on the Kepler equation
    count = 0
    while count < numiter:
        xi = xi_new
        psi = xi * xi * alpha
        c2_psi = c2(psi)
        c3_psi = c3(psi)
        norm_r = (
            xi * xi * c2_psi
            + dot_r0v0 / sqrt_mu * xi * (1 - psi * c3_psi)
            + norm_r0 * (1 - psi * c2_psi)
        )
        xi_new = (
            xi
            + (
                sqrt_mu * tof
                - xi * xi * xi * c3_psi
                - dot_r0v0 / sqrt_mu * xi * xi * c2_psi
                - norm_r0 * xi * (1 - psi * c3_psi)
            )
            / norm_r
        )
        if abs(xi_new - xi) < 1e-7:
            break
        else:
            count += 1
    else:
        raise RuntimeError("Maximum number of iterations reached")

    # Compute Lagrange coefficients
    f = 1 - xi**2 / norm_r0 * c2_psi
    g = tof - xi**3 / sqrt_mu * c3_psi

    gdot = 1 - xi**2 / norm_r * c2_psi
    fdot = sqrt_mu / (norm_r * norm_r0) * xi * (psi * c3_psi - 1)

    return f, g, fdot, gdot


c2, c3 = stumpff_c2, stumpff_c3


def _lagrange_coefficients(r0, v0, tof):
    f, g, fdot, gdot = vallado(398600.4418, r0, v0, tof, 35)
    return f + 2.0 * g + 3.0 * fdot + gdot


def test_while_else_runs_where_no_break_ended_the_loop():
    # vallado's Newton loop ends in `else: raise RuntimeError(...)`: `while ... else` was refused
    args = (np.array([7000.0, -1200.0, 300.0]), np.array([1.0, 7.3, 0.9]), 1800.0)
    g = s2sad.grad(_lagrange_coefficients, argnums=(0, 1, 2), backend="python")(*args)
    for k in range(3):
        assert_close(g[k], fd_grad(_lagrange_coefficients, args, k, eps=1e-4), rtol=1e-4)
    with pytest.raises(RuntimeError, match="Maximum number of iterations reached"):
        s2sad.grad(lambda r0, v0: vallado(398600.4418, r0, v0, 1800.0, 1)[0], backend="python")(*args[:2])

"""The NumPy and SciPy that real kernels call: ufuncs spelled as functions, boolean masks, matrix parts,
stacks of matrices, scipy.special and scipy.stats.norm, in programs shaped like the code that uses them.
Each gradient is checked against central finite differences, and the tangent along a random direction
too, on both backends."""

import copy
import functools
import math
import os
import subprocess
import sys
from functools import reduce
from pathlib import Path
from typing import Callable, Optional, Tuple

import numpy
import numpy as np
import pytest
import scipy.special
from scipy.spatial.distance import cdist, pdist, squareform
from scipy.special import erf, expit, gammaln, logsumexp, xlogy
from scipy.stats import nbinom, norm

import s2sad
from helpers import assert_close, fd_directional, fd_grad
from test_real_code import _hmm_logsumexp


# ------------------------------------------------------------------ the programs

def relu_layer(W, b, x):
    """A dense layer with a ReLU written as a mask write, the way NumPy tutorials write it."""
    h = W @ x + b
    h[h < 0.0] = 0.0
    return np.sum(h * h)


def clipped_residuals(r, cap):
    """Huber-like clipping with masks read and written."""
    out = r * 1.0
    big = np.abs(r) > cap
    out[big] = cap * np.sign(r[big])
    return np.sum(out ** 2) + np.sum(r[r > 0.0])


def leaky_relu_in_place(x, slope, shift):
    """Augmented writes through masks of a 2-D array."""
    y = x.copy()
    y[y < 0.0] *= slope
    big = y > 0.5
    y[big] += shift * y[big]
    return np.sum(y ** 2)


def regression_log_likelihood(beta, sigma, X, y):
    resid = y - X @ beta
    return np.sum(norm.logpdf(resid, loc=0.0, scale=sigma))


def map_objective(theta, prior_mean, prior_scale, X, y):
    """A MAP objective written with frozen distributions, `norm(loc, scale).logpdf(x)`."""
    prior = np.sum(norm(prior_mean, prior_scale).logpdf(theta))
    return prior + np.sum(norm(loc=X @ theta, scale=prior_scale).logpdf(y))


def normal_cdf(x):
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def black_scholes_erf(S, sigma, K, T, r):
    """A call price with the cumulative normal written with erf, as numba's Black-Scholes example does."""
    d1 = (np.log(S / K) + (r + 0.5 * sigma * sigma) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    return np.sum(S * normal_cdf(d1) - K * np.exp(-r * T) * normal_cdf(d2))


def black_scholes_norm(S, sigma, K, T, r):
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    return np.sum(S * norm.cdf(d1) - K * np.exp(-r * T) * norm.cdf(d2))


def upper_quadratic_form(A, x):
    U = np.triu(A)
    return x @ U @ x + np.sum(np.tril(A, -1) ** 2)


def cholesky_log_det(A):
    L = np.linalg.cholesky(A @ A.T + 3.0 * np.eye(A.shape[0]))
    return 2.0 * np.sum(np.log(np.diag(L)))


def gamma_log_likelihood(shape, rate, x):
    """Gamma(shape, rate) log density summed over data: gammaln's derivative is digamma."""
    n = x.shape[0]
    return np.sum(xlogy(shape - 1.0, x) - rate * x) + n * (shape * np.log(rate) - gammaln(shape))


def mixture_log_likelihood(means, log_scales, logits, x):
    """A 1-D Gaussian mixture: log-sum-exp over components of log weight + log density."""
    log_w = logits - logsumexp(logits)
    dens = norm.logpdf(x.reshape(-1, 1), means, np.exp(log_scales))
    return np.sum(logsumexp(log_w + dens, axis=1))


def logistic_loss(w, X, y):
    p = expit(X @ w)
    return -np.sum(xlogy(y, p) + xlogy(1.0 - y, 1.0 - p))


def ufunc_spelling(w, x, b):
    z = np.add(np.multiply(w, x), b)
    return np.sum(np.true_divide(np.negative(z), np.float_power(np.add(x, 3.0), 2.0)))


def attention_scores(Q, K):
    """Stacks of matrices, as a batch of attention heads computes them."""
    scores = Q @ np.swapaxes(K, 1, 2)
    return np.sum(np.tanh(scores)) + np.sum(np.matmul(Q, K[0, 0]) ** 2)


def student_t_log_density(x, mu, nu):
    """A multivariate Student-t with identity scale, its normalizer a ratio of scipy.special.gamma."""
    d = x.shape[1]
    c = scipy.special.gamma((nu + d) / 2) / (scipy.special.gamma(nu / 2) * (nu * np.pi) ** (d / 2))
    r = x - mu
    return np.sum(np.log(c * (1.0 + np.sum(r * r, axis=1) / nu) ** (-(nu + d) / 2)))


R = np.random.default_rng(11)
SPD = R.normal(size=(3, 3))
CASES = [
    (relu_layer, (R.normal(size=(4, 3)), R.normal(size=4), R.normal(size=3)), (0, 1, 2)),
    (clipped_residuals, (R.normal(size=7), 0.8), (0, 1)),
    (leaky_relu_in_place, (R.normal(size=(3, 4)), 0.1, 0.3), (0, 1, 2)),
    (regression_log_likelihood, (R.normal(size=3), 0.7, R.normal(size=(6, 3)), R.normal(size=6)), (0, 1)),
    (map_objective, (R.normal(size=3), 0.2, 1.3, R.normal(size=(5, 3)), R.normal(size=5)), (0, 1, 2)),
    (black_scholes_erf, (R.uniform(80.0, 120.0, 4), 0.25, 100.0, 0.5, 0.03), (0, 1)),
    (black_scholes_norm, (R.uniform(80.0, 120.0, 4), 0.25, 100.0, 0.5, 0.03), (0, 1)),
    (upper_quadratic_form, (R.normal(size=(3, 3)), R.normal(size=3)), (0, 1)),
    (cholesky_log_det, (SPD,), (0,)),
    (gamma_log_likelihood, (2.5, 1.5, R.uniform(0.2, 3.0, 6)), (0, 1)),
    (mixture_log_likelihood, (R.normal(size=2), R.normal(size=2) * 0.3, R.normal(size=2), R.normal(size=5)),
     (0, 1, 2)),
    (logistic_loss, (R.normal(size=3), R.normal(size=(6, 3)), (R.uniform(size=6) > 0.5) * 1.0), (0,)),
    (ufunc_spelling, (R.normal(size=3), R.uniform(0.5, 1.5, 3), 0.4), (0, 1, 2)),
    (attention_scores, (R.normal(size=(2, 3, 4)), R.normal(size=(2, 2, 4))), (0, 1)),
    (student_t_log_density, (R.normal(size=(4, 3)), R.normal(size=3), 4.5), (0, 1, 2)),
]


@pytest.mark.parametrize("fun, args, argnums", CASES, ids=[c[0].__name__ for c in CASES])
def test_gradient_and_tangent_match_finite_differences(fun, args, argnums, backend):
    grads = s2sad.grad(fun, argnums=argnums, backend=backend)(*args)
    for g, i in zip(grads, argnums):
        assert_close(g, fd_grad(fun, args, i))
    rng = np.random.default_rng(3)
    directions = [(rng.normal(size=np.shape(a)) if np.ndim(a) else 0.7) if i in argnums else np.zeros_like(a) * 1.0
                  for i, a in enumerate(args)]  # the data (not in argnums) stays fixed
    out, tangent = s2sad.jvp(fun, args, tuple(directions), backend=backend)
    eps = 1e-6
    plus = fun(*[a + eps * d for a, d in zip(args, directions)])
    minus = fun(*[a - eps * d for a, d in zip(args, directions)])
    assert_close(out, fun(*args), rtol=1e-12)
    assert_close(tangent, (plus - minus) / (2 * eps))


def test_a_product_of_4d_and_2d_arrays_has_the_gradient_of_finite_differences(backend, rng):
    """npbench's doitgen: numba's own `@` takes 1-D and 2-D arrays only."""
    def doitgen(A, C4):
        return np.sum(np.reshape(np.reshape(A, (2, 3, 1, 4)) @ C4, (2, 3, 4)) ** 2)

    args = (rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 4)))
    grads = s2sad.grad(doitgen, argnums=(0, 1), backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(doitgen, args, i))


def test_black_scholes_greeks_match_closed_forms(backend):
    S, sigma, K, T, r = np.array([95.0, 105.0]), 0.2, 100.0, 0.75, 0.01
    delta, vega = s2sad.grad(black_scholes_norm, argnums=(0, 1), backend=backend)(S, sigma, K, T, r)
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    assert_close(delta, norm.cdf(d1), rtol=1e-7)
    assert_close(vega, np.sum(S * norm.pdf(d1) * np.sqrt(T)), rtol=1e-7)


def test_gammaln_second_derivative_is_trigamma(backend):
    def log_gamma_sum(a):
        return np.sum(gammaln(a))

    a = np.array([0.7, 2.5, 11.0])
    H = s2sad.hessian(log_gamma_sum, backend=backend)(a)
    assert_close(H, np.diag(scipy.special.polygamma(1, a)), rtol=1e-7)


def test_generated_code_calls_the_runtime_not_scipy():
    text = s2sad.source(mixture_log_likelihood, argnums=(0, 1, 2))
    code = "\n".join(line.split("#")[0] for line in text.splitlines())
    assert "scipy" not in code and "norm_logpdf(" in code and "sp_logsumexp(" in code


def test_an_operator_ufunc_writes_into_its_out_argument():
    def f(x, y):
        return np.sum(np.multiply(x, y, out=x) * x)

    x, y = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    value, g = s2sad.value_and_grad(f, argnums=(0, 1), backend="python")(x, y)
    assert value == np.sum((x * y) ** 2) and np.array_equal(x, [1.0, 2.0])
    assert_close(g[0], 2.0 * x * y * y, rtol=1e-12)
    assert_close(g[1], 2.0 * x * y * x, rtol=1e-12)


def test_other_keyword_arguments_of_an_operator_ufunc_are_refused():
    def f(x, y):
        return np.sum(np.multiply(x, y, where=x > 0))

    with pytest.raises(s2sad.UnsupportedError, match=r"np.multiply\(\) with keyword arguments \(where=...\)") as err:
        s2sad.grad(f, backend="python")(np.ones(2), np.ones(2))
    assert "write the operator `*`" in str(err.value)


def test_scipy_rules_load_when_a_program_names_scipy(tmp_path):
    """s2sad does not import scipy.special or scipy.stats (slow); their rules load on first sight of one."""
    (tmp_path / "uses_erf.py").write_text("from scipy.special import erf\n\n\ndef f(x):\n    return erf(x) * 2.0\n")
    code = ("import sys, s2sad\n"
            "assert 'scipy.special' not in sys.modules and 'scipy.stats' not in sys.modules\n"
            "import uses_erf\n"
            "assert s2sad.rules.lookup_object(uses_erf.erf)[1] == 'scipy.special.erf'\n"
            "print(s2sad.grad(uses_erf.f, backend='python')(0.3))\n")
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(tmp_path)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert_close(float(out), 2.0 * 2.0 / math.sqrt(math.pi) * math.exp(-0.09), rtol=1e-12)


def test_compiled_stand_ins_match_scipy():
    """The numba versions of SciPy's functions (math, and series for digamma and polygamma) against SciPy,
    poles and ends included."""
    from numba import njit

    from s2sad.runtime import (norm_cdf, norm_logpdf, norm_pdf, sp_digamma, sp_erf, sp_erfc, sp_expit, sp_gammaln,
                               sp_logit, sp_logsumexp, sp_polygamma, sp_xlogy)

    @njit
    def compiled(x, p):
        return (sp_erf(x), sp_erfc(x), sp_expit(x), sp_logit(p), sp_gammaln(x), sp_digamma(x), sp_polygamma(1, x),
                sp_polygamma(3, x), sp_xlogy(p, x), norm_cdf(x, 0.3, 2.0), norm_pdf(x, 0.3, 2.0),
                norm_logpdf(x, 0.3, 2.0), sp_logsumexp(x[:6]), sp_logsumexp(x[:6].reshape(2, 3), 1))

    sp = scipy.special
    x = np.concatenate([np.random.default_rng(5).uniform(-7.0, 30.0, 20), [0.0, -1.0, -2.5, 1e-3, 1e6]])
    p = np.concatenate([np.random.default_rng(6).uniform(0.0, 1.0, 21), [0.0, 1.0, 1.5, -0.5]])
    expected = (sp.erf(x), sp.erfc(x), sp.expit(x), sp.logit(p), sp.gammaln(x), sp.digamma(x), sp.polygamma(1, x),
                sp.polygamma(3, x), sp.xlogy(p, x), norm.cdf(x, 0.3, 2.0), norm.pdf(x, 0.3, 2.0),
                norm.logpdf(x, 0.3, 2.0), sp.logsumexp(x[:6]), sp.logsumexp(x[:6].reshape(2, 3), 1))
    for got, want in zip(compiled(x, p), expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


# ---- spellings from public numba kernels that were refused: np.interp of a table, np.nansum, a list of
# numbers among the arrays np.concatenate joins, np.ndim(x) of a number ---------------------------------------

def _table_energy(x, knots, values):  # a tabulated potential read at run-time positions, some beyond the table
    return np.sum(np.sin(np.interp(x, knots, values)) + 0.5 * np.interp(x, knots, values, left=0.0, right=1.0))


def _table_value(x, values):
    return np.interp(x, np.array([0.0, 0.5, 1.5, 2.0]), values) ** 2


def test_np_interp_differentiates_in_the_points_the_knots_and_the_values(backend):
    x = np.array([[-0.4, 0.3, 0.9], [1.4, 2.2, 2.9]])
    knots, values = np.array([0.0, 0.6, 1.1, 2.0, 2.6]), np.array([0.2, -0.5, 0.9, 1.3, 0.4])
    grads = s2sad.grad(_table_energy, argnums=(0, 1, 2), backend=backend)(x, knots, values)
    for k, g in enumerate(grads):
        assert_close(g, fd_grad(_table_energy, (x, knots, values), k))
    assert grads[0][0, 0] == 0.0 and grads[0][1, 2] == 0.0  # flat beyond the table, as NumPy's values are
    assert_close(s2sad.value_and_grad(_table_value, argnums=(0, 1), backend=backend)(1.2, values[:4])[0],
                 _table_value(1.2, values[:4]), rtol=1e-12)
    for k, g in enumerate(s2sad.grad(_table_value, argnums=(0, 1), backend=backend)(1.2, values[:4])):
        assert_close(g, fd_grad(_table_value, (1.2, values[:4]), k))


def _masked_chi2(mu, y, s):  # missing observations are nan; np.nansum and np.nanmean leave them out
    return np.sum(np.nansum(((y - mu) / s) ** 2, axis=0)) + np.nansum(y * mu) + np.sum(np.nanmean(y * s, axis=1))


def test_np_nansum_and_nanmean_leave_nan_items_out_of_the_value_and_the_gradient(backend):
    y = np.array([[0.3, np.nan, 1.1], [0.7, 0.2, np.nan]])
    mu, s = np.array([0.1, 0.4, 0.9]), np.array([[1.0, 2.0, 0.5], [1.5, 1.0, 2.0]])
    value, grads = s2sad.value_and_grad(_masked_chi2, argnums=(0, 1, 2), backend=backend)(mu, y, s)
    assert_close(value, _masked_chi2(mu, y, s), rtol=1e-12)
    for k, g in enumerate(grads):
        assert np.all(np.isfinite(g))
        assert_close(g, fd_grad(_masked_chi2, (mu, y, s), k))
    assert grads[1][0, 1] == 0.0 and grads[2][1, 2] == 0.0


def _normalized_cumulative_trapezoid(f, x, w0):  # tardis-style: the integral from x[0], 0 first
    integ = (np.diff(x) * (f[1:] + f[:-1]) / 2.0).cumsum()
    cdf = np.concatenate(([0], integ / integ[-1]))
    return np.sum(np.hstack(([1.0, w0], cdf)) * np.arange(1.0, 8.0))


def test_a_list_of_numbers_among_the_arrays_np_concatenate_joins(backend):
    f, x = np.array([1.0, 1.3, 0.8, 0.5, 0.9]), np.array([0.0, 0.4, 1.0, 1.3, 2.0])
    grads = s2sad.grad(_normalized_cumulative_trapezoid, argnums=(0, 1, 2), backend=backend)(f, x, 0.3)
    for k, g in enumerate(grads):
        assert_close(g, fd_grad(_normalized_cumulative_trapezoid, (f, x, 0.3), k))


def _norm2_any(x):
    if np.ndim(x) == 0:
        return x * x
    return np.sum(x * x)


def test_np_ndim_of_a_number_is_decided_as_x_ndim_is(backend):
    assert_close(s2sad.grad(_norm2_any, backend=backend)(0.7), 1.4, rtol=1e-12)
    assert_close(s2sad.grad(_norm2_any, backend=backend)(np.array([0.7, -0.2])), [1.4, -0.4], rtol=1e-12)


def _pair_energy_in_shell(r, y, cut):  # masks combined with `&`, `|`, `^` and `~`, as NumPy code writes them
    shell = (r > 0.5) & (r < cut)
    shell |= r > 2.5
    seen = ~np.isnan(y)
    seen &= ~(shell ^ (y > 0.0))
    return np.sum(1.0 / r[shell] ** 6) + np.sum((y[seen] - r[seen]) ** 2) + (5 & 3) * np.sum(r[~shell])


def test_masks_combine_with_bitwise_operators(backend):
    r, y = np.array([0.3, 0.8, 1.4, 2.0, 2.7]), np.array([0.5, np.nan, 1.0, -0.4, 2.0])
    grads = s2sad.grad(_pair_energy_in_shell, argnums=(0, 1), backend=backend)(r, y, 1.8)
    for k, g in enumerate(grads):
        assert_close(g, fd_grad(_pair_energy_in_shell, (r, y, 1.8), k))


def test_a_bitwise_operator_on_a_float_is_refused_at_its_line():
    def f(x):
        return (x | 2) * x

    with pytest.raises(s2sad.UnsupportedError, match=r"operator `\|` is not supported on floats") as err:
        s2sad.grad(f, backend="python")(1.5)
    assert "x | 2" in str(err.value) and "booleans and ints" in str(err.value)


# ---- NumPy functions s2sad writes out with others that have rules (rules/inlined.py) -----------------


def _elementwise_spellings(x):
    return np.sum(np.fabs(x) * np.rad2deg(x) + np.degrees(x) * np.sinc(x) + np.real(x) ** 2 + np.imag(x))


def _integrals(y, t, c):
    return (np.trapezoid(y[0] ** 2, t) + np.sum(np.trapezoid(y, dx=0.5, axis=0)) + np.sum(np.polyval(c, t))
            + np.polyval(c, 0.3) + np.sum(np.trapezoid(y, y * y + t, axis=0)))


def _vectors(a, b):
    n = np.cross(a, b)
    return np.sum(n * n) + np.sum(np.column_stack((a[:, 0], b)) ** 2) + np.sum(np.ediff1d(a) ** 2)


def _order_statistics(x, m):
    ranked = np.sort(x)
    return (np.sum(ranked * np.arange(x.shape[0])) + np.median(x) + np.median(x[1:]) + np.sum(np.ptp(m, axis=0))
            + np.ptp(x))


def _weighted(a, w):
    return (np.average(a, weights=w) + np.sum(np.average(a, axis=0, weights=w) ** 2) + np.average(a[0])
            + np.sum(np.take(a, np.array([0, 2])) ** 2) + np.sum(np.take(a, np.array([1, 0]), axis=1) * w[:, :2])
            + np.sum(np.take(a, 1, axis=1) * w[:, 0]))


def _quarter_turns(m):
    weights = np.arange(m.size, dtype=np.float64).reshape(m.shape)
    return np.sum(weights * (np.flipud(m) + np.fliplr(m) + np.rot90(m, 2) + np.rot90(m.T, 1).T + np.rot90(m.T, -1).T
                             + np.rot90(m.T, 3).T))


def _statistics_of_items(x, m):
    return (np.nanmax(m) + np.sum(np.nanmin(m, axis=1)) + np.quantile(x, 0.3) + np.percentile(m[1], 75.0) + np.median(m[1])
            + np.sum(np.gradient(x, 0.5) ** 2) + np.sum(np.gradient(x) * x))


def _grids_and_norms(x, y):
    gx, gy = np.meshgrid(x, y)
    ix, iy = np.meshgrid(x, y, indexing="ij")
    close = 1.0 if np.allclose(x[:2], y[:2]) else 2.0
    return (np.sum(gx * gy ** 2) + np.sum(ix ** 2 * iy) + np.sum(np.vecdot(gx, gy)) * close
            + np.linalg.vector_norm(x) + np.sum(np.diagflat(y) ** 2) + np.sum(np.where(np.isclose(x[:2], y[:2]), 0.0, x[:2])))


def _without_nans(m, v):
    return (np.nanvar(m) + np.sum(np.nanstd(m, axis=0)) + np.nanprod(m[1]) + np.sum(np.nancumsum(m) * np.arange(6.0))
            + np.sum(np.dstack((v, v * v)) ** 2) + np.sum(np.take_along_axis(m, np.array([[0, 2], [1, 1]]), axis=1) ** 2)
            + np.sum(np.take_along_axis(v, np.array([2, 0]), axis=0)) + np.sum(np.angle(v) * v)
            + np.linalg.matrix_norm(m[:, ::2]))


def _outer_products(v, m):
    return (np.sum(np.subtract.outer(v, v) ** 2) + np.sum(np.maximum.outer(m, v) * np.arange(12.0).reshape(2, 2, 3))
            + np.sum(np.multiply.outer(v, 2.0) * v))


def _inserted(v, s):
    return (np.sum(np.insert(v, 3, s) ** 2 * np.arange(5.0)) + np.sum(np.insert(v, -1, [s, 2.0 * s]) ** 3)
            + np.sum(np.insert(v, 0, 1) * np.arange(5.0)) + np.sum(np.insert(v, 4, s * v[0]) * v[1])
            + np.sum(np.insert(np.arange(4), 1, s) * v[2]))  # into ints: s is truncated, no derivative


WRITTEN_OUT = [
    (_inserted, (np.array([0.3, -1.2, 0.8, 2.0]), 0.7)),
    (_elementwise_spellings, (np.array([0.3, -1.2, 0.0, 2.0]),)),
    (_integrals, (np.array([[0.2, 0.5, -0.3, 1.0], [0.1, -0.4, 0.8, 0.6]]), np.array([0.0, 0.4, 1.1, 1.5]),
                  np.array([0.5, -1.0, 2.0]))),
    (_vectors, (np.array([[0.2, 0.5, -0.3], [1.0, 0.1, -0.4]]), np.array([[0.8, 0.6, 0.3], [-0.2, 0.7, 0.9]]))),
    (_order_statistics, (np.array([0.3, -1.2, 0.8, 2.0, -0.1]), np.array([[0.2, 0.5, -0.3], [1.0, 0.1, -0.4]]))),
    (_weighted, (np.array([[0.2, 0.5, -0.3], [1.0, 0.1, -0.4]]), np.array([[1.0, 2.0, 0.5], [0.3, 1.5, 2.5]]))),
    (_quarter_turns, (np.array([[0.2, 0.5, -0.3], [1.0, 0.1, -0.4], [0.7, -0.8, 0.9]]),)),
    (_statistics_of_items, (np.array([0.3, -1.2, 0.8, 2.0, -0.1]), np.array([[0.2, np.nan, -0.3], [1.0, 0.1, -0.4]]))),
    (_grids_and_norms, (np.array([0.3, -1.2, 0.8]), np.array([0.5, 1.1]))),
    (_without_nans, (np.array([[0.2, np.nan, -0.3], [1.0, 0.1, -0.4]]), np.array([0.3, -1.2, 0.8]))),
    (_outer_products, (np.array([0.3, -1.2, 0.8]), np.array([[0.2, 0.5], [-0.35, 1.0]]))),
]


@pytest.mark.parametrize("fn, args", WRITTEN_OUT, ids=[f.__name__.strip("_") for f, _ in WRITTEN_OUT])
def test_numpy_functions_written_out_with_ruled_ones(fn, args, backend):
    argnums = tuple(range(len(args)))
    grads = s2sad.grad(fn, argnums=argnums, backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(fn, args, i))


def _middle(v):
    return np.median(v) + np.quantile(v, 0.5)


def test_a_median_or_quantile_of_items_with_a_nan_is_nan_as_in_numpy(backend):
    x = np.array([0.3, np.nan, -1.2])
    value, _ = s2sad.value_and_grad(_middle, backend=backend)(x)
    assert np.isnan(value) and np.isnan(_middle(x))


def _gradient_at_points(f, t):
    return np.sum(np.gradient(f, t))


def test_np_gradient_at_sample_coordinates_is_refused_not_read_as_a_spacing():
    with pytest.raises(NotImplementedError, match="sample coordinates"):
        s2sad.grad(_gradient_at_points, backend="python")(np.array([0.1, 0.4, 0.2]), np.array([0.0, 0.5, 1.5]))


# ---- conversions that may return their operand: `x.astype(dtype, copy=False)`, np.asarray(x, dtype) -------------


def _no_copy_conversions(x, w):
    same = x.astype(np.float64, copy=False)  # x itself for a float64 x
    single = w.astype(np.float32, copy=False)
    scratch = (x * 2.0).astype(np.float64, copy=False)
    scratch[0] = 1.0  # a write into what only `scratch` reads again
    return np.sum(same * same) + np.sum(single * x) + np.sum(scratch * x)


def test_astype_without_a_copy_is_a_conversion_that_may_be_its_operand(backend):
    x, w = np.array([0.3, -1.2, 0.8]), np.array([0.5, 1.5, -0.25])
    value, g = s2sad.value_and_grad(_no_copy_conversions, argnums=(0, 1), backend=backend)(x, w)
    assert_close(value, _no_copy_conversions(x, w), rtol=1e-12)
    assert_close(g[0], fd_grad(_no_copy_conversions, (x, w), 0))
    assert_close(g[1], x, rtol=1e-6)  # through float32 values, which finite differences cannot step through
    tx, tw = np.array([1.0, -0.5, 0.25]), np.array([0.3, 0.2, -1.0])
    _, tangent = s2sad.jvp(_no_copy_conversions, (x, w), (tx, tw), backend=backend)
    assert_close(tangent, fd_directional(_no_copy_conversions, (x, w), (tx, 0.0 * tw)) + np.dot(x, tw), rtol=1e-6)
    g32 = s2sad.grad(_no_copy_conversions, argnums=1, backend=backend)(x, w.astype(np.float32))
    assert g32.dtype == np.float32


def _written_through_a_no_copy_conversion(x):
    y = x * 2.0
    z = y.astype(np.float64, copy=False)  # the same memory as y: NumPy shows y the write
    z[0] = 0.0
    return np.sum(y * x)


def _integers_of_a_differentiated_value(x):
    k = np.asarray(x, dtype=np.int64)
    return np.sum(k * x)


def _integers_as_constants(x):  # what the refusal's hint writes
    k = np.asarray(s2sad.stop_gradient(x), dtype=np.int64)
    return np.sum(k * x) + np.sum(s2sad.stop_gradient(x).astype(int) * x)


def test_a_conversion_that_may_share_memory_or_drop_the_derivative_is_refused():
    x = np.array([0.3, -1.2, 1.8])
    with pytest.raises(s2sad.UnsupportedError, match="another name for an array"):
        s2sad.grad(_written_through_a_no_copy_conversion, backend="python")(x)
    with pytest.raises(s2sad.UnsupportedError, match="np.asarray` to a dtype other than float64") as refused:
        s2sad.grad(_integers_of_a_differentiated_value, backend="python")(x)  # was the identity's derivative
    assert "`np.asarray(s2sad.stop_gradient(x), dtype=np.int64)`" in str(refused.value)
    assert_close(s2sad.grad(_integers_as_constants, backend="python")(x), 2.0 * x.astype(int), rtol=1e-12)


def _binned(w, bins):
    sums = np.bincount(bins, weights=w * w, minlength=6)  # repeated bins add again; bins past the last are 0
    counts = np.bincount(bins, minlength=6)  # ints, no derivative
    return np.sum(sums / np.maximum(counts, 1) * np.arange(6.0)) + np.sum(np.bincount(bins, w) ** 2)


def test_bincount_with_weights_is_differentiable_in_the_weights(backend):
    w, bins = np.array([0.3, -1.2, 0.8, 0.5, 1.1, -0.4]), np.array([0, 2, 2, 4, 1, 2])
    value, g = s2sad.value_and_grad(_binned, backend=backend)(w, bins)
    assert_close(value, _binned(w, bins), rtol=1e-12)
    assert_close(g, fd_grad(_binned, (w, bins), 0))
    t = np.array([1.0, -0.5, 0.25, 0.3, 0.2, -1.0])
    _, tangent = s2sad.jvp(_binned, (w, bins), (t, np.zeros(6, dtype=np.int64)), backend=backend)
    assert_close(tangent, np.dot(fd_grad(_binned, (w, bins), 0), t))
    with pytest.raises(ValueError, match="negative"):
        s2sad.grad(_binned, backend=backend)(w, np.array([0, -2, 2, 4, 1, 2]))


# ---- spellings of real vectorized NumPy code (batch 12) -----------------------------------------------------


def _sums_in_a_dtype(x, m):
    """Sums and products given the dtype to add in, as a moving average's `np.cumsum(a, dtype=float)`."""
    c = np.cumsum(x, dtype=float)
    return (np.sum((c[2:] - c[:-2]) ** 2) + np.sum(np.sum(m, axis=0, dtype=np.float64) ** 2) + m.mean(dtype=float)
            + np.sum(x.cumsum(dtype=np.float64) * x) + np.prod(x, dtype=float) + np.sum(np.cumprod(m, axis=1, dtype=float))
            + np.sum(np.cumsum(np.arange(4), dtype=float) * x))


def _copied_quaternion(q):
    """A rotation matrix from a quaternion copied with np.array(q, dtype=..., copy=True), then scaled in place."""
    q = np.array(q, dtype=np.float64, copy=True)
    q *= np.sqrt(2.0 / np.dot(q, q))
    p = np.outer(q, q)
    return np.sum(np.array([[1.0 - p[2, 2] - p[3, 3], p[1, 2] - p[3, 0]], [p[1, 2] + p[3, 0], 1.0 - p[1, 1]]]) ** 2
                  * np.array([[1.0, 2.0], [3.0, 4.0]])) + np.sum(np.array(q, copy=True) ** 3)


def _masked_attention_with_ellipses(q, k, v):
    """Attention over a batch of heads written with einsum's '...' (explicit and implicit outputs, operands whose
    '...' differ in rank) and x.swapaxes."""
    scores = np.einsum('...nd, ...od->...no', q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(scores) * np.tril(np.ones_like(scores))
    weights /= np.sum(weights, axis=-1, keepdims=True)
    out = np.einsum('...ij,...jk->...ik', weights, v)
    return (np.sum(out ** 2) + np.sum(np.einsum('...ij,...jk', q, k.swapaxes(-1, -2)) ** 2)
            + np.sum(np.einsum('i...->...', q) ** 2) + np.sum(np.einsum('...d,...d', q[0], k[0, 0]) ** 3))


def _column_of_quadratic_forms(x, mu, s):
    """A Student-t's Mahalanobis terms written into a column, one (1, 1) product per row: NumPy stores the
    product into the row's one item."""
    n = x.shape[0]
    delta = np.zeros([n, 1])
    r = x - np.reshape(mu, (1, -1))
    scaled = np.dot(r, np.linalg.inv(np.diag(s)))
    for i in range(n):
        delta[i] = np.dot(np.reshape(scaled[i, :], (1, -1)), np.transpose(np.reshape(r[i, :], (1, -1))))
    return np.sum(np.log(np.dot((1.0 + delta / 3.0) ** -2.5, 0.5)))


@pytest.mark.parametrize("fn, args", [
    (_column_of_quadratic_forms, (np.linspace(-1.0, 1.0, 12).reshape(4, 3), np.array([0.1, -0.2, 0.3]),
                                  np.array([1.5, 0.8, 2.0]))),
    (_sums_in_a_dtype, (np.array([0.3, -1.2, 0.8, 2.0]), np.array([[0.5, -0.4, 1.3], [0.9, 0.2, -0.7]]))),
    (_copied_quaternion, (np.array([0.9, 0.2, -0.3, 0.4]),)),
    (_masked_attention_with_ellipses, (np.linspace(-1.0, 1.0, 24).reshape(2, 3, 4), np.cos(np.arange(24.0)).reshape(2, 3, 4),
                                       np.sin(np.arange(12.0)).reshape(2, 3, 2))),
], ids=["column_of_quadratic_forms", "sums_in_a_dtype", "copied_quaternion", "masked_attention_with_ellipses"])
def test_spellings_of_real_vectorized_code(fn, args, backend):
    argnums = tuple(range(len(args)))
    value, grads = s2sad.value_and_grad(fn, argnums=argnums, backend=backend)(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(fn, args, i))
    tangents = tuple(np.linspace(-1.0, 1.0, np.size(a)).reshape(np.shape(a)) for a in args)
    _, tangent = s2sad.jvp(fn, args, tangents, backend=backend)
    assert_close(tangent, fd_directional(fn, args, tangents))


def _summed_in_a_run_time_dtype(x):
    return np.sum(x, dtype=x.dtype)


def test_a_dtype_of_a_sum_known_only_at_run_time_is_refused_at_its_line():
    with pytest.raises(s2sad.UnsupportedError, match="dtype= of a sum or product must be known") as err:
        s2sad.grad(_summed_in_a_run_time_dtype, backend="python")(np.array([0.3, 1.2]))
    assert "np.sum(x, dtype=x.dtype)" in str(err.value)


def _ellipsis_summed_away(a):
    return np.sum(np.einsum("...ij->ij", a))


def test_an_einsum_whose_output_drops_the_ellipsis_is_refused_as_numpy_refuses_it():
    with pytest.raises(s2sad.UnsupportedError, match="output has no '...'") as err:
        s2sad.grad(_ellipsis_summed_away, backend="python")(np.ones((2, 3, 4)))
    assert 'np.einsum("...ij->ij", a)' in str(err.value)


def _floats_written_into_integers(v, w):
    """NumPy truncates a float stored into an array of ints or bools: the stored value has no derivative."""
    counts = np.zeros(3, dtype=np.int64)
    counts[0] = v * 2.0
    steps = np.arange(4)
    steps[1:3] = w
    flags = np.zeros(2, dtype=bool)
    flags[0], flags[1] = v, w
    kept = np.full(2, 0).copy()
    kept[1] = v
    return np.sum(counts) + np.sum(steps) * v + np.sum(flags) * w + v * w + np.sum(kept)


def test_a_float_stored_into_an_array_of_integers_carries_no_derivative(backend):
    args = (1.3, 0.7)
    value, grads = s2sad.value_and_grad(_floats_written_into_integers, argnums=(0, 1), backend=backend)(*args)
    assert_close(value, _floats_written_into_integers(*args), rtol=1e-12)
    for i, g in enumerate(grads):  # was 1 + 6 + ... : the truncated values' derivatives counted
        assert_close(g, fd_grad(_floats_written_into_integers, args, i))
    _, tangent = s2sad.jvp(_floats_written_into_integers, args, (1.0, -0.5), backend=backend)
    assert_close(tangent, fd_directional(_floats_written_into_integers, args, (1.0, -0.5)))


def _branch_on_the_rank(alpha):
    """Dirichlet expectations of one vector or of rows, chosen by len(alpha.shape): the branch for the other
    rank cannot compile for this one, so the test is decided when the code is generated, as x.ndim is."""
    if len(alpha.shape) == 1:
        e = scipy.special.digamma(alpha + 0.5) - scipy.special.digamma(np.sum(alpha))
    else:
        e = scipy.special.digamma(alpha) - scipy.special.digamma(np.sum(alpha, 1))[:, np.newaxis]
    return np.sum(e ** 2)


def test_len_of_a_shape_is_the_rank_known_when_the_code_is_generated(backend):
    rows = np.array([[0.8, 1.5, 2.5], [1.2, 0.6, 3.0]])
    per_row = s2sad.vmap(s2sad.grad(_branch_on_the_rank, backend=backend))(rows)
    for k in range(2):
        assert_close(per_row[k], fd_grad(_branch_on_the_rank, (rows[k],), 0))
    assert_close(s2sad.grad(_branch_on_the_rank, backend=backend)(rows), fd_grad(_branch_on_the_rank, (rows,), 0))


# ---- real vectorized NumPy code (batch 15) -----------------------------------------------------------------


def _logsumexp_of_all(a):  # CS4775's logsumexp (test_real_code), whose Hessian read .ndim of a float
    return _hmm_logsumexp(a) + np.sum(_hmm_logsumexp(a, axis=1) ** 2)


def _partial_log_likelihood(betas, X, events, durations):  # RigautAntoine/pysurv coxph.py, verbatim
    """
    Assumes no ties in the data
    """
    unique_event_times = np.unique(durations[events==1])
    unique_event_times.sort()

    loglik = 0

    for i, t in enumerate(unique_event_times):

        loglik += X[(events==1) & (durations==t)].dot(betas)[0] - np.log(np.sum(np.exp(X[(durations >= t)].dot(betas))))

    return -loglik


def _sorted_in_place(x, m):  # ndarray.sort of differentiated values, along each axis
    y = x * 2.0
    y.sort()
    by_column = m * 1.0
    by_column.sort(axis=0)
    by_row = m ** 2
    by_row.sort(1)
    weights = np.arange(6.0).reshape(3, 2)
    return np.sum(y * np.arange(4.0)) + np.sum(by_column * weights) + np.sum(by_row * weights)


def _adj_loglikelihood(xVec, lenSampleRibo, lenSampleRna, X, y, mu, sign):  # ratschlab/RiboDiff adjlik.py

    disp = np.hstack([np.repeat(xVec[0], lenSampleRibo), np.repeat(xVec[1], lenSampleRna)])
    n = 1 / disp
    p = n / (n + mu)
    loglik = sum(nbinom.logpmf(y, n, p))

    diagVec = mu / (1 + np.dot(mu.transpose(), disp))
    diagWM = np.diagflat(diagVec)
    xtwx = np.dot(np.dot(np.transpose(X), diagWM), X)
    coxreid = 0.5 * np.log(np.linalg.det(xtwx))

    return (loglik - coxreid) * sign


def _ribodiff_likelihood(xVec, X, y, mu):
    return _adj_loglikelihood(xVec, 2, 3, X, y, mu, -1.0)


def _count_likelihoods(rates, shape, p, counts, x):
    """scipy.stats's poisson, nbinom and gamma, spelled with keywords as count models spell them."""
    return (np.sum(scipy.stats.poisson.logpmf(counts, np.exp(rates))) + np.sum(nbinom.pmf(counts, n=shape, p=p))
            + np.sum(scipy.stats.gamma.logpdf(x, shape, scale=np.exp(rates)))
            + np.sum(scipy.stats.gamma.pdf(x, shape, 0.1))
            + np.sum(scipy.stats.poisson.logpmf(counts + 0.5, 2.0) == -np.inf))  # off the support: -inf


def fk_calculator(lengths, angles):  # 0itaps/unm-tapia-lab-summer-research fk_calculator.py, verbatim
    positions = [(0,0)]
    x, y = 0, 0
    total_angle = 0

    for i in range(len(lengths)):
        total_angle += angles[i]
        x += lengths[i] * np.cos(total_angle)
        y += lengths[i] * np.sin(total_angle)
        positions.append((x,y))

    return np.array(positions)


def _joint_positions(angles, lengths):
    return np.sum(fk_calculator(lengths, angles) ** 2 * np.array([1.0, 2.0]))


def _chamfer_distance(A, B):  # a point-cloud metric from public code (the index names no repository), verbatim
    min_distance_A_to_B = []
    for x in A:
        min_distance_A_to_B.append(np.min(np.linalg.norm(x - B, axis=1)) ** 2)
    min_distance_B_to_A = []
    for x in B:
        min_distance_B_to_A.append(np.min(np.linalg.norm(x - A, axis=1)) ** 2)
    return np.mean(min_distance_A_to_B) + np.mean(min_distance_B_to_A)


def log_poisson_likelihood(y, y_obs):  # mshumko/bayes_learning log_likelihood.py, verbatim
    assert len(y) == len(y_obs), ('The modeled and observed count'
                                ' lengths must be identical.')

    # Drop 0 y values because they diverge. The probability of
    # any y_obs other than 0, given y is 0 is 0.
    y_ind = np.where(np.array(y) != 0)[0]
    y = y[y_ind]
    y_obs_copy = copy.copy(np.array(y_obs))
    y_obs_copy = y_obs_copy[y_ind]

    # Take the factorial and apply Stirling's approximation
    # for y_obs > 100.
    log_factorial = [math.log(math.factorial(y_i)) if y_i < 100
                    else y_i*np.log(y_i) - y_i for y_i in y_obs_copy]
    # Analytic derivation of the Poisson log-likelihood for a product
    # of Poisson random variables
    log_likelihood = np.sum(y_obs_copy*np.log(y) - y - log_factorial)
    return log_likelihood


BATCH_15 = [
    (_logsumexp_of_all, (np.array([[0.3, -1.2, 0.8], [2.0, 0.1, -0.4]]),), (0,)),
    (_partial_log_likelihood, (np.array([0.3, -0.5]), np.linspace(-1.0, 1.0, 12).reshape(6, 2) ** 3,
                               np.array([1, 0, 1, 1, 0, 1]), np.array([2.0, 3.0, 1.0, 5.0, 4.0, 6.0])), (0,)),
    (_sorted_in_place, (np.array([0.3, -1.2, 0.8, 0.1]), np.array([[0.2, -0.5], [1.0, 0.7], [-0.3, 0.4]])), (0, 1)),
    (_ribodiff_likelihood, (np.array([0.3, 0.5]), np.linspace(-1.0, 1.0, 10).reshape(5, 2) ** 2 + np.eye(5, 2),
                            np.array([3, 1, 4, 2, 5]), np.array([2.5, 1.5, 3.0, 2.0, 4.0])), (0, 3)),
    (_chamfer_distance, (np.linspace(-1.0, 1.0, 12).reshape(4, 3) ** 3, np.cos(np.arange(15.0)).reshape(5, 3)), (0, 1)),
    (log_poisson_likelihood, (np.array([1.5, 0.7, 4.0, 2.0]), np.array([2, 3, 105, 1])), (0,)),
    (_joint_positions, (np.array([0.3, 0.5, -0.2]), np.array([1.0, 0.7, 0.5])), (0, 1)),
    (_count_likelihoods, (np.array([0.3, 1.1, -0.2]), 2.5, 0.4, np.array([1, 3, 0]), np.array([0.5, 1.2, 3.0])),
     (0, 1, 2, 4)),
]


@pytest.mark.parametrize("fn, args, argnums", BATCH_15, ids=[f.__name__.strip("_") for f, _, _ in BATCH_15])
def test_real_vectorized_code_batch_15(fn, args, argnums, backend):
    """Gradient, value, tangent and Hessian against finite differences. `a_max.ndim` of an array reduced with
    keepdims is decided when the code is generated, and the Hessian's forward sweep knows the rank of the
    adjoint's copies (it read `.ndim` of a float); `x.sort()` is the write `x[:] = np.sort(x)`; scipy.stats's
    poisson, nbinom and gamma are written out; a list grown by tuples of numbers is an array of rows; a full
    reduction is a number whatever its operand's rank; a comprehension of run-time length that `-` takes with
    an array is an array (the last five were refused)."""
    value, grads = s2sad.value_and_grad(fn, argnums=argnums, backend=backend)(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    expected = [fd_grad(fn, args, i) for i in argnums]
    for g, e in zip(grads, expected):
        assert_close(g, e)
    tangents = tuple(np.linspace(-1.0, 1.0, np.size(a)).reshape(np.shape(a)) if i in argnums else np.zeros_like(a)
                     for i, a in enumerate(args))  # the data stays fixed (counts stay ints)
    _, tangent = s2sad.jvp(fn, args, tangents, backend=backend)
    assert_close(tangent, sum(np.sum(e * tangents[i]) for e, i in zip(expected, argnums)))
    first = argnums[0]
    hessian = s2sad.hessian(fn, argnums=first, backend=backend)(*args)
    gradient = s2sad.grad(fn, argnums=first, backend="python")
    size = np.size(args[first])
    rows = [fd_grad(lambda *a, k=k: np.ravel(gradient(*a))[k], args, first) for k in range(size)]
    assert_close(np.reshape(hessian, (size, size)), np.reshape(rows, (size, size)))


# ---- real vectorized NumPy code (batch 17) -----------------------------------------------------------------


def _doubled(func):
    @functools.wraps(func)
    def wrapper(x, *args, **kwargs):
        return 2.0 * func(x, *args, **kwargs)
    return wrapper


@_doubled
def _doubled_power(x, power=2):
    return x ** power


def _sums_the_doubled_cube(x):
    return np.sum(_doubled_power(x, power=3))


def test_a_decorator_made_with_functools_wraps_runs_its_wrapper(backend):
    """inspect.getsource follows `__wrapped__`: s2sad read the decorated function's own source and
    silently left the wrapper out (the gradients were 3 x**2)."""
    x = np.array([1.0, 2.0])
    assert_close(s2sad.grad(_sums_the_doubled_cube, backend=backend)(x), 6.0 * x ** 2, rtol=1e-12)
    assert_close(s2sad.grad(_doubled_power, backend=backend)(1.5, 3), 6.0 * 1.5 ** 2, rtol=1e-12)


def _padded_by_rank(x, boundary="wrap", method=None):
    n = x.ndim
    if n == 1:
        y = x[None, :]
    else:
        y = x
    if method is None:
        method = "constant"
    modes = {"wrap": "wrap", "pad": method}
    parts = (y, y * 2.0)
    if isinstance(parts, tuple):
        y = parts[1] - parts[0] * 0.5
    return np.sum(np.pad(y, [(1, 1)] * len(y.shape), mode=modes[boundary]) ** 2 * np.arange(1.0, 3.0 + y.shape[1]))


def _pads_in_a_helper(x):
    return _padded_by_rank(x, boundary="pad") + _padded_by_rank(x[0])


def test_a_rank_named_once_a_str_argument_and_isinstance_of_a_tuple_are_decided():
    """`n = x.ndim; if n == 1:` keeps one branch, as `if x.ndim == 1:` does; a str parameter (a default, a
    keyword, a parameter a dead `if method is None:` would rebind) keys a dict; `isinstance(t, tuple)` of a
    tuple made in the code is True (each was refused)."""
    for args in [(np.array([0.5, -1.5, 2.0]),), (np.cos(np.arange(6.0)).reshape(2, 3),)]:
        for fn in (_padded_by_rank, _pads_in_a_helper):
            if fn is _pads_in_a_helper and args[0].ndim == 1:
                continue
            assert_close(s2sad.grad(fn, backend="python")(*args), fd_grad(fn, args, 0))


def _cast_unless_float(x):
    if x.dtype not in [np.float32, np.float64]:
        x = x.astype(np.float32)
    return x


def _by_dtype(x, y):
    z = _cast_unless_float(x)[None, ...]
    scale = 2.0 if z.dtype == np.float32 else 3.0
    if x.dtype != y.dtype:
        scale += 1.0
    return np.sum(z ** 2) * scale + np.sum(y ** 2) * (y.dtype in (np.float64,))


def _dtype_of_a_new_array(x):
    return np.sum(x) * (np.zeros(2).dtype == np.float64)


def test_comparisons_of_dtypes_are_decided_for_the_argument_types():
    """`x.dtype == np.float32`, `!=`, `in` and `not in`, of an argument, a helper's parameter and a view of
    one, as real validation code writes them (refused, naming `np.float32` a function)."""
    x, y = np.array([0.5, -1.5]), np.array([2.0, 1.0])
    gx, gy = s2sad.grad(_by_dtype, argnums=(0, 1), backend="python")(x, y)
    assert_close(gx, 6.0 * x, rtol=1e-12)
    assert_close(gy, 2.0 * y, rtol=1e-12)
    single = x.astype(np.float32)
    gx = s2sad.grad(_by_dtype, backend="python")(single, y)
    assert_close(gx, 6.0 * single, rtol=1e-6)  # scale 2 + 1: the dtypes differ
    with pytest.raises(s2sad.UnsupportedError, match="comparison of `.dtype` is decided") as err:
        s2sad.grad(_dtype_of_a_new_array, backend="python")(x)
    assert "np.zeros(2).dtype == np.float64" in str(err.value)


def _reduced_over_an_array(x):
    return reduce(np.add, x * 2.0)


def _masked_mean(x):
    return np.sum(np.ma.array(x, mask=x > 1.0))


def test_refusals_name_the_call_as_written():
    with pytest.raises(s2sad.UnsupportedError, match="functools.reduce is supported of a function and a tuple"):
        s2sad.grad(_reduced_over_an_array, backend="python")(np.array([1.0, 2.0]))
    with pytest.raises(s2sad.UnsupportedError, match="no derivative rule for `array`, called as `np.ma.array`"):
        s2sad.grad(_masked_mean, backend="python")(np.array([1.0, 2.0]))


def handle_batch_dims(func: Callable):  # Vinschers/algorithms src/vicentin/image/differentiation/diff_np.py
    @functools.wraps(func)
    def wrapper(img: np.ndarray, *args, **kwargs):
        if img.dtype not in [np.float32, np.float64]:
            img = img.astype(np.float32)

        orig_ndim = img.ndim

        if orig_ndim == 2:
            img_4d = img[None, None, ...]
        elif orig_ndim == 3:
            img_4d = img[None, ...]
        else:
            img_4d = img

        result = func(img_4d, *args, **kwargs)

        def restore(t: np.ndarray):
            if orig_ndim == 2:
                return t.squeeze(0).squeeze(0)
            if orig_ndim == 3:
                return t.squeeze(0)
            return t

        if isinstance(result, tuple):
            return tuple(restore(res) for res in result)
        return restore(result)

    return wrapper


def _pad_img(img: np.ndarray, boundary) -> np.ndarray:  # (the same file)
    pad_map = {
        "wrap": "wrap",
        "reflect": "reflect",
        "pad": "constant",
        "extend": "edge",
    }

    pad_width = [(0, 0), (0, 0), (1, 1), (1, 1)]
    return np.pad(img, pad_width, mode=pad_map[boundary])


@handle_batch_dims
def finite_diffs(  # (the same file)
    img: np.ndarray,
    mode: Optional[str] = "central",
    boundary: Optional[str] = "reflect",
) -> Tuple[np.ndarray, np.ndarray]:

    if mode is None:
        mode = "central"

    img_pad = _pad_img(img, boundary)

    if mode == "forward":
        dx = img_pad[..., 1:-1, 2:] - img
        dy = img_pad[..., 2:, 1:-1] - img

    elif mode == "backward":
        dx = img - img_pad[..., 1:-1, :-2]
        dy = img - img_pad[..., :-2, 1:-1]

    elif mode == "central":
        dx = (img_pad[..., 1:-1, 2:] - img_pad[..., 1:-1, :-2]) / 2
        dy = (img_pad[..., 2:, 1:-1] - img_pad[..., :-2, 1:-1]) / 2

    else:
        raise ValueError(f"Unknown mode: {mode}")

    return dx, dy


@handle_batch_dims
def image_grad(  # (the same file's `grad`, renamed here; its `sobel` branch left out)
    img: np.ndarray,
    method: Optional[str] = "diff",
    mode: Optional[str] = "central",
    boundary: Optional[str] = "reflect",
) -> Tuple[np.ndarray, np.ndarray]:

    if method is None:
        method = "diff"
    if boundary is None:
        boundary = "reflect"

    if method == "diff":
        dx, dy = finite_diffs(img, mode, boundary)
    else:
        raise ValueError(f"Unknown gradient method: {method}")

    return dx, dy


def total_variation(img, epsilon=1e-2):  # Vinschers/algorithms src/vicentin/image/regularization/regularization_np.py
    dx, dy = image_grad(img, mode="forward", boundary="wrap")
    return np.sum(np.sqrt(epsilon**2 + dx**2 + dy**2))


def _regularized(img):
    dx, dy = finite_diffs(img, "central", "reflect")
    return total_variation(img) + np.sum(dx ** 2 + dy ** 2 * 0.5)


def energy1(coord, charge):  # pyscf/capi_example profile_example/coulomb_o2.py (reduce: Python 2's builtin)
    rr = numpy.dot(coord*2, coord.T)
    rd = rr.diagonal() * .5
    rd2 = rd[:,None] + rd
    rd2 -= rr
    rr = rd2
    rr[numpy.diag_indices_from(rr)] = 1e300
    r = 1/numpy.sqrt(rr)
    e = reduce(numpy.dot, (charge, r, charge)) * .5
    return e


def getEnergy( pos, vel, mass, G ):  # pmocz/nbody-python nbody.py (tabs as spaces, docstring left out)
    # Kinetic Energy:
    KE = 0.5 * np.sum(np.sum( mass * vel**2 ))


    # Potential Energy:

    # positions r = [x,y,z] for all particles
    x = pos[:,0:1]
    y = pos[:,1:2]
    z = pos[:,2:3]

    # matrix that stores all pairwise particle separations: r_j - r_i
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z

    # matrix that stores 1/r for all particle pairwise particle separations
    inv_r = np.sqrt(dx**2 + dy**2 + dz**2)
    inv_r[inv_r>0] = 1.0/inv_r[inv_r>0]

    # sum over upper triangle, to count each interaction only once
    PE = G * np.sum(np.sum(np.triu(-(mass*mass.T)*inv_r,1)))

    return KE, PE;


def _nbody_energy(pos, vel, mass):
    KE, PE = getEnergy(pos, vel, mass, 1.0)
    return KE + PE


def eggholder(X):  # Sargaleano/PUPI-metaheuristic pupi_bm.py
    Z = X[:,1]+47
    return (-Z * np.sin(np.sqrt((np.abs(X[:,0]/2 + Z)))) \
            -X[:,0] * np.sin(np.sqrt((np.abs(X[:,0] - Z))))) #+ 959.640662720851

def ackley(x):  # (the same file)
    d = x.shape[1]     # Search space dimensionality
    return (-20.0 * np.exp(-0.2 * np.sqrt((1 / d) * (x ** 2).sum(axis=1)))
            - np.exp((1 / float(d)) * np.cos(2 * np.pi * x).sum(axis=1))
            + 20.0
            + np.exp(1))


def _benchmarks(X):
    return np.sum(eggholder(X) + ackley(X))


def log_gaussian(x, mu, sigma):  # tweag/chainsail examples/use-cases/mixture/probability.py
    Z = np.log(np.sqrt(2 * np.pi * sigma ** 2))
    return -0.5 * np.sum((x - mu) ** 2, -1) / sigma ** 2 - Z


class GaussianMixture(object):  # (the same file)
    def __init__(self, means, sigmas, weights):
        self.means = means
        self.sigmas = sigmas
        self.weights = weights

    def log_prob(self, x):
        return logsumexp(np.log(self.weights) + log_gaussian(x, self.means, self.sigmas))


def _mixture_log_prob(x, means, sigmas, weights):
    return GaussianMixture(means, sigmas, weights).log_prob(x)


def svm_loss_vectorized(W, X, y, reg):  # broartem/snippets python/numpy-ml.md
  num_classes = W.shape[1]
  num_train = X.shape[0]
  num_dims = W.shape[0]

  scores = X.dot(W)
  correct_class_scores = scores[np.arange(num_train), y]

  margin = np.maximum(0, scores - np.reshape(correct_class_scores, (num_train, 1)) + 1)
  margin[np.arange(num_train), y] = 0

  indicator = (margin > 0).astype("float32")
  indicator_sums = np.sum(indicator, axis=1)
  indicator[np.arange(num_train), y] = -indicator_sums

  # 3D array of shape (num_train, num_dims, num_classes), containing gradient deltas for
  # each training example `i` in its rows. `X` is broadcasted in `num_classes` dimention and
  # `indicator` is broadcasted in `num_dims` dimention.
  dWi = X.reshape((num_train, num_dims, 1)) * indicator.reshape((num_train, 1, num_classes))

  loss = np.sum(margin) / num_train
  dW = np.sum(dWi, axis=0) / num_train

  return loss, dW


def _svm_loss(W, X, y):
    loss, dW = svm_loss_vectorized(W, X, y, 0.1)
    return loss + 0.01 * np.sum(dW * W)


def get_im2col_indices(x_shape, field_height, field_width, padding=0, stride=1):  # Viyachikhh/network network/utils.py
    # First figure out what the size of the output should be
    N, C, H, W = x_shape
    #assert (H + 2 * padding - field_height) % stride == 0
    #assert (W + 2 * padding - field_width) % stride == 0
    out_height = int((H + 2 * padding - field_height) / stride + 1)
    out_width = int((W + 2 * padding - field_width) / stride + 1)

    i0 = np.repeat(np.arange(field_height), field_width)
    i0 = np.tile(i0, C)
    i1 = stride * np.repeat(np.arange(out_height), out_width)
    j0 = np.tile(np.arange(field_width), field_height * C)
    j1 = stride * np.tile(np.arange(out_width), out_height)
    i = i0.reshape(-1, 1) + i1.reshape(1, -1)
    j = j0.reshape(-1, 1) + j1.reshape(1, -1)

    k = np.repeat(np.arange(C), field_height * field_width).reshape(-1, 1)

    return k.astype(int), i.astype(int), j.astype(int)


def im2col_indices(x, filter_height, filter_with, padding=0, stride=1):  # (the same file)

    # Zero-pad the input
    p = padding
    x_padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), mode='constant', constant_values=0)

    k, i, j = get_im2col_indices(x.shape, filter_height, filter_with, padding, stride)

    cols = x_padded[:, k, i, j]
    C = x.shape[1]
    cols = cols.transpose(1, 2, 0).reshape(filter_height * filter_with * C, -1)
    return cols


def _conv_im2col(x, w):
    cols = im2col_indices(x, 2, 2, padding=1, stride=1)
    return np.sum(np.tanh(w.reshape(w.shape[0], -1) @ cols) ** 2)


def denoise(img, weight=0.1, eps=1e-3, num_iter_max=200):  # bvirxx/bLUe_PYSIDE denoising.py (docstring left out)
    u = np.zeros_like(img)
    px = np.zeros_like(img)
    py = np.zeros_like(img)

    nm = np.prod(img.shape[:2])
    tau = 0.125

    i = 0
    while i < num_iter_max:
        u_old = u

        # x and y components of u's gradient
        ux = np.roll(u, -1, axis=1) - u
        uy = np.roll(u, -1, axis=0) - u

        # update the dual variable
        px_new = px + (tau / weight) * ux
        py_new = py + (tau / weight) * uy

        norm_new = np.maximum(1, np.sqrt(px_new ** 2 + py_new ** 2))
        px = px_new / norm_new
        py = py_new / norm_new

        # calculate divergence
        rx = np.roll(px, 1, axis=1)
        ry = np.roll(py, 1, axis=0)
        div_p = (px - rx) + (py - ry)

        # update image
        u = img + weight * div_p

        # calculate error
        error = np.linalg.norm(u - u_old) / np.sqrt(nm)

        if i == 0:
            err_init = error
            err_prev = error
        else:
            # break if error small enough
            if np.abs(err_prev - error) < eps * err_init:
                break
            else:
                e_prev = error

            # don't forget to update iterator
        i += 1

    return u


def _denoised(img):
    return np.sum(denoise(img, weight=2.0, num_iter_max=6) ** 2 * np.arange(1.0, 1.0 + img.size).reshape(img.shape))


def log_likelihood_2PL(y1, theta, alpha, beta):  # 17zuoye/pyirt build/lib.linux-x86_64-2.7/pyirt/utl/tools.py
    expComp = np.exp(-(alpha*theta + beta));
    ell =  y1*np.log(1.0/(1.0+expComp)) + (1.0-y1)*np.log(1.0-1.0/(1.0+expComp)) ;
    return ell;

def logsum(logp):  # (the same file)
    w = max(logp)
    logSump = w+ np.log(sum(np.exp(logp-w)))
    return logSump


def _item_response(theta, alpha, beta, y):
    return np.sum(log_likelihood_2PL(y, theta, alpha, beta)) + logsum(theta * alpha)


IMAGE = np.cos(np.arange(12.0)).reshape(3, 4)
POINTS = np.array([[0.0, 0.1, 0.2], [1.0, -0.3, 0.5], [-0.4, 0.8, -0.9], [0.6, 0.7, 1.1]])
SCORES = np.linspace(-1.0, 1.0, 12).reshape(3, 4) ** 3 + 0.1 * np.arange(12.0).reshape(3, 4)
BATCH_17 = [
    (_regularized, (IMAGE,), (0,)),
    (energy1, (POINTS, np.array([1.0, -0.5, 0.7, 0.3])), (0, 1)),
    (_nbody_energy, (POINTS, np.cos(POINTS), np.array([[1.0], [2.0], [0.5], [1.5]])), (0, 2)),
    (_benchmarks, (np.array([[0.3, -0.7], [1.2, 0.4], [-0.5, 0.9]]),), (0,)),
    (_mixture_log_prob, (np.array([-1.0, 0.5]), np.array([[-1.0, -2.0], [1.0, 1.0], [3.0, 2.0]]),
                         np.array([0.5, 0.8, 1.1]), np.array([0.2, 0.3, 0.5])), (0, 1, 2, 3)),
    (_svm_loss, (np.cos(np.arange(12.0)).reshape(4, 3), SCORES, np.array([1, 0, 2])), (0, 1)),
    (_conv_im2col, (np.cos(np.arange(18.0)).reshape(1, 2, 3, 3), np.sin(np.arange(24.0)).reshape(3, 2, 2, 2)), (0, 1)),
    (_denoised, (IMAGE,), (0,)),
    (_item_response, (np.array([0.3, -0.5, 1.1]), np.array([1.2, 0.8, 1.5]), np.array([0.1, -0.4, 0.2]),
                      np.array([1.0, 0.0, 1.0])), (0, 1, 2)),
]


@pytest.mark.parametrize("fn, args, argnums", BATCH_17, ids=[f.__name__.strip("_") for f, _, _ in BATCH_17])
def test_real_vectorized_code_batch_17(fn, args, argnums):
    """Gradient, value and tangent against finite differences. A decorator made with functools.wraps runs
    (its wrapper was skipped: s2sad read the wrapped function's source), `img.dtype not in [...]`, `orig_ndim
    = img.ndim` and `isinstance(result, tuple)` are decided for the argument types, a str argument keys a dict,
    and functools.reduce of a tuple is written out (the first and second were refused)."""
    value, grads = s2sad.value_and_grad(fn, argnums=argnums, backend="python")(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    expected = [fd_grad(fn, args, i) for i in argnums]
    for g, e in zip(grads, expected):
        assert_close(g, e)
    tangents = tuple(np.linspace(-1.0, 1.0, np.size(a)).reshape(np.shape(a)) if i in argnums else np.zeros_like(a)
                     for i, a in enumerate(args))
    _, tangent = s2sad.jvp(fn, args, tangents, backend="python")
    assert_close(tangent, sum(np.sum(e * tangents[i]) for e, i in zip(expected, argnums)))


def test_the_hessian_of_a_reduce_of_dot_products():
    """pyscf's Coulomb energy `reduce(numpy.dot, (charge, r, charge))`: second derivatives in the charges."""
    charge = np.array([1.0, -0.5, 0.7, 0.3])
    hessian = s2sad.hessian(energy1, argnums=1, backend="python")(POINTS, charge)
    gradient = s2sad.grad(energy1, argnums=1, backend="python")
    assert_close(hessian, [fd_grad(lambda c, k=k: gradient(POINTS, c)[k], (charge,), 0) for k in range(4)])


class TestUtils():  # StemVibrations/RandomFields __tests/utils.py (no tests of its own for pytest to collect)

    @staticmethod
    def moving_average(x, w):
        return np.convolve(x, np.ones(w), 'valid') / w


def _smoothed_signal(x, kernel):
    return (np.sum(TestUtils.moving_average(x, 3) ** 2) + np.sum(np.convolve(x, kernel) * np.arange(7.0))
            + np.sum(np.convolve(kernel, x, mode="same") ** 2) + np.sum(np.correlate(kernel, x, "same") ** 3)
            + np.sum(np.correlate(x, kernel, mode="full") ** 2) + np.sum(np.correlate(x, kernel) ** 2))


def test_np_convolve_and_correlate_are_written_out(backend):
    """np.convolve and np.correlate in each mode, the shorter vector first or second (refused: no rule)."""
    args = (np.array([0.5, -1.5, 2.0, 0.3, 1.1]), np.array([0.2, -0.7, 1.3]))
    value, grads = s2sad.value_and_grad(_smoothed_signal, argnums=(0, 1), backend=backend)(*args)
    assert_close(value, _smoothed_signal(*args), rtol=1e-12)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_smoothed_signal, args, i))


def _max_drawdown(returns: np.ndarray) -> float:  # a walk-forward tournament's metric (the index names no repository)
    if returns.size == 0:
        return 0.0
    equity = np.cumprod(1.0 + returns)
    peaks = np.maximum.accumulate(equity)
    drawdowns = np.where(peaks > 0.0, (equity / peaks) - 1.0, 0.0)
    return float(np.min(drawdowns))


def maxDrawDown(vals):  # Alan-Du/PortfolioMV maxDrawDown.py
    # rets is portfolio returns
    # on daily basis
    # return = maxDrawDown
    mDD, cur_max = 0,0
    for level in vals:
        cur_max = max(cur_max,level)
        mDD = max((cur_max-level)/cur_max,mDD)
    return -mDD


def _drawdowns(returns, paths):
    troughs = np.minimum.accumulate(paths)  # down each column
    return (_max_drawdown(returns) + maxDrawDown(np.cumprod(1.0 + returns))
            + np.sum(troughs * np.arange(1.0, 1.0 + paths.size).reshape(paths.shape)))


def test_a_running_maximum_is_written_out():
    """np.maximum.accumulate and np.minimum.accumulate (drawdowns' running peak) down axis 0 (refused: no rule)."""
    args = (np.array([0.05, -0.02, 0.03, -0.06, 0.01, 0.04, -0.03]), np.cos(np.arange(8.0)).reshape(4, 2))
    value, grads = s2sad.value_and_grad(_drawdowns, argnums=(0, 1), backend="python")(*args)
    assert_close(value, _drawdowns(*args), rtol=1e-12)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_drawdowns, args, i))


def sq_distances(X,Y=None):  # tt6746690/misc_impl kernel/kernel.py
    """ Returns K where Kij = ||X_i - Y_j||^2 """
    assert(X.ndim==2)
    # Compute pairwise distance matrix.
    #     Don't use explicit loops, but the above scipy functions
    # if X=Y, use more efficient pdist call which exploits symmetry
    if Y is None:
        sq_dists = squareform(pdist(X, metric='sqeuclidean'))
    else:
        assert(Y.ndim==2)
        assert(X.shape[1]==Y.shape[1])
        sq_dists = cdist(X, Y, metric='sqeuclidean')

    return sq_dists

def gauss_kernel(X, Y=None, sigma=1.0):  # (the same file)
    """ Computes the standard Gaussian kernel k(x,y)=exp(- ||x-y||**2 / (2 * sigma**2))
        Returns the kernel matrix
    """
    sq_dists = sq_distances(X,Y)
    K = np.exp(-sq_dists / (2 * sigma**2))
    return K


def _kernels_and_softmaxes(X, sigma):
    K = gauss_kernel(X, sigma=sigma) + 0.1 * np.eye(3)
    cross = gauss_kernel(X, X[:2] * 2.0, sigma)
    return (np.linalg.slogdet(K)[1] + np.sum(cross * cdist(X, X[:2] * 2.0)) + np.sum(pdist(X, "cityblock") ** 2)
            + np.sum(scipy.special.softmax(X, axis=1) ** 2) + np.sum(scipy.special.log_softmax(X) * X))


def test_scipy_distances_and_softmax_are_written_out():
    """scipy.spatial.distance's cdist, pdist and squareform (a GP kernel's), scipy.special's softmax and
    log_softmax (each refused: no rule)."""
    args = (np.array([[0.5, -1.2], [0.3, 0.8], [1.5, 0.1]]), 0.8)
    value, grads = s2sad.value_and_grad(_kernels_and_softmaxes, argnums=(0, 1), backend="python")(*args)
    assert_close(value, _kernels_and_softmaxes(*args), rtol=1e-12)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(_kernels_and_softmaxes, args, i))


def _log_forward_ess(log_w, mask, scores):  # an importance sampler's ESS, as public JAX code writes it with b=mask
    log_z_inv = logsumexp(-log_w, b=mask) - np.log(np.sum(mask))
    log_z_expectation_p_over_q = logsumexp(log_w, b=mask) - np.log(np.sum(mask))
    return (- log_z_inv - log_z_expectation_p_over_q + np.sum(logsumexp(scores, axis=1, b=mask + 0.5) ** 2)
            + np.sum(logsumexp(scores, axis=0, b=scores ** 2, keepdims=True) * scores))


def test_a_weighted_logsumexp_is_written_out():
    """scipy.special.logsumexp(a, b=weights), over every axis or one (refused: s2sad's rule takes no `b=`)."""
    args = (np.array([0.3, -1.2, 0.8]), np.array([1.0, 0.0, 1.0]), np.array([[0.5, -1.2, 0.4], [0.3, 0.8, -0.1]]))
    value, grads = s2sad.value_and_grad(_log_forward_ess, argnums=(0, 2), backend="python")(*args)
    assert_close(value, _log_forward_ess(*args), rtol=1e-12)
    for g, i in zip(grads, (0, 2)):
        assert_close(g, fd_grad(_log_forward_ess, args, i))

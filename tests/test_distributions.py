"""scipy.stats densities and scipy.special functions s2sad writes out (rules/distributions.py): the values
SciPy gives, on and off the support, and derivatives against central differences."""

import warnings

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import s2sad
from helpers import assert_close, fd_grad

X = np.array([-1.3, -0.2, 0.15, 0.6, 0.95, 2.4])
COV = np.array([[1.0, 0.3], [0.3, 0.5]])

# (function of a parameter t and the points X, the parameter's value)
CASES = {
    "norm.logcdf": (lambda t, x: st.norm.logcdf(x * t, loc=0.1), 1.5),
    "norm.logcdf, far tail": (lambda t, x: st.norm.logcdf(x * t - 30.0), 1.1),
    "norm.sf": (lambda t, x: st.norm.sf(x, 0.2, t), 0.8),
    "norm.logsf": (lambda t, x: st.norm.logsf(x, scale=t), 0.7),
    "t.logpdf": (lambda t, x: st.t.logpdf(x, t, loc=0.1, scale=1.5), 3.5),
    "t.pdf": (lambda t, x: st.t.pdf(x * t, 4.0), 1.2),
    "beta.logpdf": (lambda t, x: st.beta.logpdf(x, t, 2.5), 1.7),
    "beta.pdf": (lambda t, x: st.beta.pdf(x, 2.0, t), 3.0),
    "expon.logpdf": (lambda t, x: st.expon.logpdf(x, scale=t), 2.0),
    "expon.pdf": (lambda t, x: st.expon.pdf(x * t), 0.9),
    "expon.cdf": (lambda t, x: st.expon.cdf(x, scale=t), 1.4),
    "lognorm.logpdf": (lambda t, x: st.lognorm.logpdf(x, t, scale=0.8), 0.6),
    "lognorm.pdf": (lambda t, x: st.lognorm.pdf(x * t, 0.4), 1.1),
    "cauchy.logpdf": (lambda t, x: st.cauchy.logpdf(x, t, 0.7), 0.3),
    "laplace.logpdf": (lambda t, x: st.laplace.logpdf(x, scale=t), 1.3),
    "logistic.logpdf": (lambda t, x: st.logistic.logpdf(x * t), 1.6),
    "logistic.cdf": (lambda t, x: st.logistic.cdf(x, scale=t), 0.9),
    "uniform.logpdf": (lambda t, x: st.uniform.logpdf(x, -0.5, t), 1.2),
    "halfnorm.logpdf": (lambda t, x: st.halfnorm.logpdf(x, scale=t), 1.1),
    "invgamma.logpdf": (lambda t, x: st.invgamma.logpdf(x, t), 2.5),
    "binom.logpmf": (lambda t, x: st.binom.logpmf(np.array([0.0, 1.0, 3.0, 5.0, 7.0, 2.5]), 6, t), 0.35),
    "bernoulli.logpmf": (lambda t, x: st.bernoulli.logpmf(np.array([0.0, 1.0, 1.0, 0.0, 2.0, 1.0]), t), 0.3),
    "multivariate_normal.logpdf": (lambda t, x: st.multivariate_normal.logpdf(x.reshape(3, 2) * t, np.zeros(2), COV),
                                   0.9),
    "multivariate_normal.pdf, one point": (lambda t, x: st.multivariate_normal.pdf(x[:2], x[2:4] * t, COV), 1.2),
    "special.ndtr": (lambda t, x: sp.ndtr(x * t), 1.3),
    "special.log_ndtr": (lambda t, x: sp.log_ndtr(x * t - 25.0), 0.8),
    "special.log_expit": (lambda t, x: sp.log_expit(x * t), 2.0),
    "special.betaln": (lambda t, x: sp.betaln(np.abs(x) + t, 2.0), 0.5),
    "special.beta": (lambda t, x: sp.beta(t, np.abs(x) + 1.0), 1.5),
    "special.binom": (lambda t, x: sp.binom(6.0 + t, np.abs(x)), 0.5),
    "special.xlog1py": (lambda t, x: sp.xlog1py(np.where(X > 0.5, 0.0, x), x * t + 1.5), 0.4),
    "special.entr": (lambda t, x: sp.entr(x * t), 0.7),
    "special.rel_entr": (lambda t, x: sp.rel_entr(x, t + 0.0 * x), 0.6),
    "special.kl_div": (lambda t, x: sp.kl_div(x * t, 0.5), 1.2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_derivatives(name):
    f, t = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # SciPy's own, off the support
        expected = f(t, X)
    total = lambda t: np.sum(np.where(np.isfinite(expected), f(t, X), 0.0))  # noqa: E731
    value, grad = s2sad.value_and_grad(lambda t: f(t, X), backend="python")(t) if np.ndim(expected) == 0 else \
        (None, s2sad.grad(total, backend="python")(t))
    if value is not None:
        assert_close(value, expected, rtol=1e-12)
    else:
        assert_close(s2sad.jacfwd(lambda t: f(t, X), backend="python")(t), _fd_each(f, t))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_close(grad, fd_grad(total if value is None else (lambda t: f(t, X)), (t,), 0))


def _fd_each(f, t, h=1e-6):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        up, down = f(t + h, X), f(t - h, X)
    same = np.isfinite(up) & np.isfinite(down) & (up == up)
    return np.where(same, (np.where(same, up, 0.0) - np.where(same, down, 0.0)) / (2 * h), 0.0)


def model_log_likelihood(theta, y):
    """A robust regression's likelihood with a prior, as statistical code writes one."""
    mu, log_sigma, df = theta[0], theta[1], theta[2]
    return (np.sum(st.t.logpdf(y, df, loc=mu, scale=np.exp(log_sigma))) + st.norm.logcdf(mu)
            + st.invgamma.logpdf(df, 2.0) + np.sum(sp.log_expit(y * mu)) + st.beta.logpdf(0.3, df, 2.0))


def test_the_written_out_functions_compile():
    theta, y = np.array([0.2, -0.3, 4.0]), np.array([0.5, -1.2, 0.1, 2.2])
    value, grad = s2sad.value_and_grad(model_log_likelihood, backend="numba")(theta, y)
    assert_close(value, model_log_likelihood(theta, y), rtol=1e-12)
    assert_close(grad, fd_grad(model_log_likelihood, (theta, y), 0))


def frozen_distributions(t):
    """Distributions frozen with their parameters, then asked for a density."""
    return st.t(4.0, loc=t).logpdf(0.3) + st.beta(2.0, t).logpdf(0.4) + np.sum(st.expon(scale=t).logpdf(np.abs(X)))


def test_a_frozen_distribution_is_the_distribution_with_its_parameters():
    assert_close(s2sad.grad(frozen_distributions, backend="python")(1.5), fd_grad(frozen_distributions, (1.5,), 0))

"""scipy.stats densities and scipy.special functions written with functions that have rules.

Statistical code calls `scipy.stats.t.logpdf(x, df)` or `scipy.special.log_ndtr(z)`; numba has no SciPy,
and these have no rule of their own, so s2sad inlines them (rules/inlined.py's stand_in) as the formulas
below. SciPy is imported inside them: importing s2sad does not import it. Each gives what SciPy gives,
-inf (or 0 for a cdf) off the support: a value off the support is replaced before a logarithm reads it
(`y_in`), so neither branch of the np.where makes a nan or a warning, and the branch not taken has no
derivative. `loc` and `scale` shift and scale x as SciPy's do.
"""

from __future__ import annotations

import numpy as np

_LOG_2PI = float(np.log(2.0 * np.pi))
_TAIL = -20.0  # below it, log_ndtr's asymptotic series (erfc's value underflows further out)


# ------------------------------------------------------------------ scipy.special

def ndtr(x):
    """The standard normal cdf, through erfc (accurate in the lower tail)."""
    from scipy.special import erfc
    return 0.5 * erfc(-x / np.sqrt(2.0))


def log_ndtr(x):
    """log of the standard normal cdf: log(ndtr(x)) above -20, the asymptotic series below, as SciPy does."""
    above = np.maximum(x, _TAIL)
    below = np.minimum(x, _TAIL)
    inv2 = 1.0 / (below * below)
    series = -0.5 * below * below - np.log(-below) - 0.5 * _LOG_2PI + np.log1p(-inv2 + 3.0 * inv2 * inv2)
    return np.where(x > _TAIL, np.log(ndtr(above)), series)


def log_expit(x):
    return -np.logaddexp(0.0, -x)


def betaln(a, b):
    from scipy.special import gammaln
    return gammaln(a) + gammaln(b) - gammaln(a + b)


def beta(a, b):
    return np.exp(betaln(a, b))


def binom(n, k):
    from scipy.special import gammaln
    return np.exp(gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0))


def xlog1py(x, y):
    """x * log1p(y), 0 where x is 0 (as xlogy is)."""
    return np.where(x == 0, 0.0, x * np.log1p(np.where(x == 0, 0.0, y)))


def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below."""
    x_in = np.where(x > 0, x, 1.0)
    return np.where(x > 0, -x_in * np.log(x_in), np.where(x == 0, 0.0, -np.inf))


def rel_entr(x, y):
    """x log(x / y) for x, y > 0; 0 at x = 0, y >= 0; inf elsewhere."""
    inside = (x > 0) & (y > 0)
    x_in, y_in = np.where(inside, x, 1.0), np.where(inside, y, 1.0)
    return np.where(inside, x_in * np.log(x_in / y_in), np.where((x == 0) & (y >= 0), 0.0, np.inf))


def kl_div(x, y):
    """x log(x / y) - x + y for x, y > 0; y at x = 0, y >= 0; inf elsewhere."""
    inside = (x > 0) & (y > 0)
    x_in, y_in = np.where(inside, x, 1.0), np.where(inside, y, 1.0)
    return np.where(inside, x_in * np.log(x_in / y_in) - x_in + y_in, np.where((x == 0) & (y >= 0), y, np.inf))


# ------------------------------------------------------------------ scipy.stats

def _standardized(x, loc, scale):
    return (x - loc) / scale


def norm_logcdf(x, loc=0.0, scale=1.0):
    return log_ndtr(_standardized(x, loc, scale))


def norm_sf(x, loc=0.0, scale=1.0):
    return ndtr(-_standardized(x, loc, scale))


def norm_logsf(x, loc=0.0, scale=1.0):
    return log_ndtr(-_standardized(x, loc, scale))


def t_logpdf(x, df, loc=0.0, scale=1.0):
    """Student's t: log Gamma((df + 1) / 2) - log Gamma(df / 2) - log(pi df) / 2 - (df + 1) / 2 log(1 + z^2 / df)."""
    from scipy.special import gammaln
    z = _standardized(x, loc, scale)
    return (gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * np.log(np.pi * df)
            - 0.5 * (df + 1.0) * np.log1p(z * z / df) - np.log(scale))


def t_pdf(x, df, loc=0.0, scale=1.0):
    return np.exp(t_logpdf(x, df, loc, scale))


def beta_logpdf(x, a, b, loc=0.0, scale=1.0):
    from scipy.special import xlogy
    y = _standardized(x, loc, scale)
    inside = (y >= 0) & (y <= 1)
    y_in = np.where(inside, y, 0.5)
    return np.where(inside, xlogy(a - 1.0, y_in) + xlog1py(b - 1.0, -y_in) - betaln(a, b) - np.log(scale), -np.inf)


def beta_pdf(x, a, b, loc=0.0, scale=1.0):
    return np.exp(beta_logpdf(x, a, b, loc, scale))


def expon_logpdf(x, loc=0.0, scale=1.0):
    y = _standardized(x, loc, scale)
    return np.where(y >= 0, -y - np.log(scale), -np.inf)


def expon_pdf(x, loc=0.0, scale=1.0):
    return np.exp(expon_logpdf(x, loc, scale))


def expon_cdf(x, loc=0.0, scale=1.0):
    y = _standardized(x, loc, scale)
    return np.where(y >= 0, -np.expm1(-np.maximum(y, 0.0)), 0.0)


def lognorm_logpdf(x, s, loc=0.0, scale=1.0):
    y = _standardized(x, loc, scale)
    y_in = np.where(y > 0, y, 1.0)
    log_y = np.log(y_in)
    return np.where(y > 0, -0.5 * (log_y / s) ** 2 - log_y - np.log(s) - 0.5 * _LOG_2PI - np.log(scale), -np.inf)


def lognorm_pdf(x, s, loc=0.0, scale=1.0):
    return np.exp(lognorm_logpdf(x, s, loc, scale))


def cauchy_logpdf(x, loc=0.0, scale=1.0):
    z = _standardized(x, loc, scale)
    return -np.log(np.pi) - np.log1p(z * z) - np.log(scale)


def cauchy_pdf(x, loc=0.0, scale=1.0):
    return np.exp(cauchy_logpdf(x, loc, scale))


def laplace_logpdf(x, loc=0.0, scale=1.0):
    return -np.log(2.0) - np.abs(_standardized(x, loc, scale)) - np.log(scale)


def laplace_pdf(x, loc=0.0, scale=1.0):
    return np.exp(laplace_logpdf(x, loc, scale))


def logistic_logpdf(x, loc=0.0, scale=1.0):
    z = _standardized(x, loc, scale)
    return -z - 2.0 * np.logaddexp(0.0, -z) - np.log(scale)


def logistic_pdf(x, loc=0.0, scale=1.0):
    return np.exp(logistic_logpdf(x, loc, scale))


def logistic_cdf(x, loc=0.0, scale=1.0):
    return np.exp(log_expit(_standardized(x, loc, scale)))


def uniform_logpdf(x, loc=0.0, scale=1.0):
    y = _standardized(x, loc, scale)
    return np.where((y >= 0) & (y <= 1), -np.log(scale) + 0.0 * y, -np.inf)  # 0 * y: a density shaped like x


def halfnorm_logpdf(x, loc=0.0, scale=1.0):
    y = _standardized(x, loc, scale)
    return np.where(y >= 0, 0.5 * np.log(2.0 / np.pi) - 0.5 * y * y - np.log(scale), -np.inf)


def halfnorm_pdf(x, loc=0.0, scale=1.0):
    return np.exp(halfnorm_logpdf(x, loc, scale))


def invgamma_logpdf(x, a, loc=0.0, scale=1.0):
    from scipy.special import gammaln
    y = _standardized(x, loc, scale)
    y_in = np.where(y > 0, y, 1.0)
    return np.where(y > 0, -(a + 1.0) * np.log(y_in) - 1.0 / y_in - gammaln(a) - np.log(scale), -np.inf)


def invgamma_pdf(x, a, loc=0.0, scale=1.0):
    return np.exp(invgamma_logpdf(x, a, loc, scale))


def binom_logpmf(k, n, p, loc=0):
    """log C(n, k) + k log(p) + (n - k) log(1 - p) at the integers 0 <= k <= n, -inf elsewhere."""
    from scipy.special import gammaln, xlogy
    k = k - loc
    inside = (k >= 0) & (k <= n) & (k == np.floor(k))
    k_in = np.where(inside, k, 0.0)
    value = gammaln(n + 1.0) - gammaln(k_in + 1.0) - gammaln(n - k_in + 1.0) + xlogy(k_in, p) + xlog1py(n - k_in, -p)
    return np.where(inside, value, -np.inf)


def binom_pmf(k, n, p, loc=0):
    return np.exp(binom_logpmf(k, n, p, loc))


def bernoulli_logpmf(k, p, loc=0):
    return binom_logpmf(k, 1.0, p, loc)


def bernoulli_pmf(k, p, loc=0):
    return np.exp(bernoulli_logpmf(k, p, loc))


def multivariate_normal_logpdf(x, mean=None, cov=1, allow_singular=False):
    """log N(x; mean, cov) of a vector x, or of each row of a matrix x, with a covariance matrix."""
    diff = x if mean is None else x - mean
    d = np.shape(cov)[0]
    logdet = np.linalg.slogdet(cov)[1]
    if np.ndim(x) == 1:
        return -0.5 * (d * _LOG_2PI + logdet + np.dot(diff, np.linalg.solve(cov, diff)))
    quad = np.sum(diff.T * np.linalg.solve(cov, diff.T), axis=0)
    return -0.5 * (d * _LOG_2PI + logdet + quad)


def multivariate_normal_pdf(x, mean=None, cov=1, allow_singular=False):
    return np.exp(multivariate_normal_logpdf(x, mean, cov, allow_singular))


SPECIAL = {f.__name__: f for f in (ndtr, log_ndtr, log_expit, betaln, beta, binom, xlog1py, entr, rel_entr, kl_div)}
STATS = {(f"{f.__name__.rsplit('_', 1)[0]}_gen", f.__name__.rsplit("_", 1)[1]): f for f in (
    norm_logcdf, norm_sf, norm_logsf, t_logpdf, t_pdf, beta_logpdf, beta_pdf, expon_logpdf, expon_pdf, expon_cdf,
    lognorm_logpdf, lognorm_pdf, cauchy_logpdf, cauchy_pdf, laplace_logpdf, laplace_pdf, logistic_logpdf,
    logistic_pdf, logistic_cdf, uniform_logpdf, halfnorm_logpdf, halfnorm_pdf, invgamma_logpdf, invgamma_pdf,
    binom_logpmf, binom_pmf, bernoulli_logpmf, bernoulli_pmf, multivariate_normal_logpdf, multivariate_normal_pdf)}

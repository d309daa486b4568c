"""SciPy's special functions and normal distribution, as generated code calls them: numba has no SciPy.

The rules for `scipy.special.erf`, `scipy.stats.norm.logpdf`, ... print these stand-ins, so generated
modules never import SciPy. Run as plain Python (the python backend) they call SciPy itself; under
numba their overloads compute the same values from `math` (erf, erfc, lgamma) and, for digamma and
polygamma, from the series below.
"""

import math

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from s2sad.runtime.core import _is_scalar_type, _nb_adj_dtype, _nb_adj_scalar
from s2sad.runtime.reductions import max_reduce, sum_reduce
from s2sad.runtime.shapes import _in_dtype

__all__ = ["sp_erf", "sp_erfc", "sp_expit", "sp_logit", "sp_gamma", "sp_gammaln", "sp_digamma", "sp_polygamma",
           "sp_xlogy", "sp_logsumexp", "norm_cdf", "norm_pdf", "norm_logpdf"]

_LOG_SQRT_2PI = 0.9189385332046727  # log(sqrt(2 pi))
_SQRT_2 = 1.4142135623730951


def _scipy_special():
    import scipy.special  # only the python backend gets here, and only for code that called SciPy

    return scipy.special


# A value keeps float32 precision as NumPy's rules give it: it is float32 when an operand is and every
# array operand is; other scalars adapt, as Python numbers do in NumPy (numba types a Python float as
# float64, so a float64 scalar adapts under numba too). SciPy computes some functions (polygamma,
# scipy.stats) in float64 whatever their operands: the Python stand-ins convert those values.

def _float32_value(arrays, scalars):
    """Whether a value of operands with these array dtypes and scalar dtypes is float32."""
    return np.dtype(np.float32) in arrays + scalars and all(d == np.float32 for d in arrays)


def _kept(value, *operands):
    """SciPy's `value` in float32 where the operands make it float32 (Python)."""
    arrays = [v.dtype for v in operands if isinstance(v, np.ndarray)]
    scalars = [np.result_type(v) for v in operands if not isinstance(v, np.ndarray)]
    if not _float32_value(arrays, scalars) or np.result_type(value) == np.float32:
        return value
    return value.astype(np.float32) if isinstance(value, np.ndarray) else np.float32(value)


def _value_dtype(*operands):
    """numba (typing time): the dtype of a value of operands of these types; omitted operands count not."""
    arrays = [as_dtype(t.dtype) for t in operands if isinstance(t, types.Array)]
    scalars = [as_dtype(types.unliteral(t)) for t in operands if _is_scalar_type(t)]
    return np.dtype(np.float32 if _float32_value(arrays, scalars) else np.float64)


def _as_value(v, dtype):
    """numba only: the number or array `v` in `dtype` (`v` itself where it has it)."""
    raise NotImplementedError


@overload(_as_value)
def _ol_as_value(v, dtype):
    if _is_scalar_type(v):
        cast = _nb_adj_scalar(dtype.dtype)
        return lambda v, dtype: cast(v)
    return lambda v, dtype: _in_dtype(v, dtype)


def _elementwise(scalar):
    """An overload typer that applies the njit function `scalar` to a number or to each entry of an array."""

    def typer(x):
        if _is_scalar_type(x):
            cast = _nb_adj_scalar(x)
            return lambda x: cast(scalar(x))
        dtype = _nb_adj_dtype(x.dtype)

        def impl(x):
            out = np.empty(x.size, dtype)
            for i, v in enumerate(x.flat):
                out[i] = scalar(v)
            return out.reshape(x.shape)

        return impl

    return typer


def _elementwise2(scalar):
    """`_elementwise` for a function of two operands, broadcast together."""

    def typer(x, y):
        dtype = _value_dtype(x, y)
        if _is_scalar_type(x) and _is_scalar_type(y):
            cast = np.float32 if dtype == np.float32 else float
            return lambda x, y: cast(scalar(x, y))

        def impl(x, y):
            shape = np.broadcast_shapes(np.shape(x), np.shape(y))
            xs, ys = np.broadcast_to(x, shape), np.broadcast_to(y, shape)
            out = np.empty(xs.size, dtype)
            for i, (a, b) in enumerate(zip(xs.flat, ys.flat)):
                out[i] = scalar(a, b)
            return out.reshape(shape)

        return impl

    return typer


# ---------------------------------------------------------------- scalar kernels (numba)

@njit(error_model="numpy")
def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(error_model="numpy")
def _logit(p):
    return math.log(p / (1.0 - p)) if 0.0 <= p <= 1.0 else math.nan


@njit(error_model="numpy")
def _xlogy(x, y):
    if x == 0.0 and y == y:
        return 0.0
    return x * math.log(y) if y > 0.0 else (x * -math.inf if y == 0.0 else math.nan)


@njit(error_model="numpy")
def _lgamma(x):
    return math.lgamma(x) if x > 0.0 or x != math.floor(x) else math.inf


@njit(error_model="numpy")
def _digamma(x):
    """psi(x): shifted up to x >= 10 with psi(x) = psi(x + 1) - 1/x, then its asymptotic series; below zero
    the reflection psi(x) = psi(1 - x) - pi / tan(pi x)."""
    if x != x or x == -math.inf:
        return math.nan
    if x == 0.0:  # the pole at 0, approached from the side of the zero's sign (as SciPy)
        return -math.copysign(math.inf, x)
    if x < 0.0 and x == math.floor(x):
        return math.nan
    result = 0.0
    if x < 0.0:
        result = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))))
    return result + math.log(x) - 0.5 / x - series


# B_2j / (2j)! for j = 1..7: the Euler-Maclaurin tail of the Hurwitz zeta function
_BERNOULLI_OVER_FACTORIAL = (1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
                             -691.0 / 1307674368000, 1.0 / 74724249600)


@njit(error_model="numpy")
def _hurwitz_zeta(s, x):
    """zeta(s, x) = sum over k >= 0 of (x + k)^-s, for an integer s >= 2: the first terms summed until
    x + k >= 10 + s, the rest by Euler-Maclaurin (its error there is below 1e-15 relative)."""
    total = 0.0
    while x < 10.0 + s:
        total += (1.0 / x) ** s
        x += 1.0
    total += x ** (1.0 - s) / (s - 1.0) + 0.5 * x ** (-1.0 * s)
    rising = float(s)  # s (s + 1) ... (s + 2j - 2)
    power = x ** (-1.0 * s - 1.0)  # x^(-s - 2j + 1)
    for j in range(len(_BERNOULLI_OVER_FACTORIAL)):
        total += _BERNOULLI_OVER_FACTORIAL[j] * rising * power
        rising *= (s + 2.0 * j + 1.0) * (s + 2.0 * j + 2.0)
        power /= x * x
    return total


@njit(error_model="numpy")
def _polygamma(n, x):
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x) for n >= 1."""
    if n == 0:
        return _digamma(x)
    if n < 0 or x != x:
        return math.nan
    sign = 1.0 if n % 2 == 1 else -1.0
    if x <= 0.0 and x == math.floor(x):  # a pole of every order's sign
        return sign * math.inf
    return sign * math.gamma(n + 1.0) * _hurwitz_zeta(n + 1, x)


# ---------------------------------------------------------------- scipy.special

def sp_erf(x):
    """scipy.special.erf(x)."""
    return _scipy_special().erf(x)


def sp_erfc(x):
    """scipy.special.erfc(x)."""
    return _scipy_special().erfc(x)


def sp_expit(x):
    """scipy.special.expit(x) = 1 / (1 + exp(-x)), without overflow."""
    return _scipy_special().expit(x)


def sp_logit(p):
    """scipy.special.logit(p) = log(p / (1 - p))."""
    return _scipy_special().logit(p)


def sp_gamma(x):
    """scipy.special.gamma(x)."""
    return _scipy_special().gamma(x)


def sp_gammaln(x):
    """scipy.special.gammaln(x) = log|Gamma(x)|."""
    return _scipy_special().gammaln(x)


def sp_digamma(x):
    """scipy.special.digamma(x), the derivative of gammaln."""
    return _scipy_special().digamma(x)


def sp_polygamma(n, x):
    """scipy.special.polygamma(n, x) for an integer n >= 0 (n = 0 is digamma)."""
    return _kept(_scipy_special().polygamma(n, x)[()], n, x)  # SciPy returns a 0-d array for numbers


def sp_xlogy(x, y):
    """scipy.special.xlogy(x, y) = x * log(y), and 0 where x == 0."""
    return _kept(_scipy_special().xlogy(x, y), x, y)


def sp_logsumexp(a, axis=None, keepdims=False):
    """scipy.special.logsumexp(a, axis, keepdims=keepdims) (no weights `b`, no `return_sign`)."""
    return _scipy_special().logsumexp(a, axis=axis, keepdims=keepdims)


overload(sp_erf)(_elementwise(njit(lambda x: math.erf(x))))
overload(sp_erfc)(_elementwise(njit(lambda x: math.erfc(x))))
overload(sp_expit)(_elementwise(_expit))
overload(sp_logit)(_elementwise(_logit))
overload(sp_gamma)(_elementwise(njit(lambda x: math.gamma(x))))  # inf, -inf or nan at the poles, as SciPy's
overload(sp_gammaln)(_elementwise(_lgamma))
overload(sp_digamma)(_elementwise(_digamma))
overload(sp_polygamma)(_elementwise2(_polygamma))
overload(sp_xlogy)(_elementwise2(_xlogy))


@overload(sp_logsumexp)
def _ol_sp_logsumexp(a, axis=None, keepdims=False):
    dt = _value_dtype(a)
    zero = dt.type(0.0)

    def impl(a, axis=None, keepdims=False):
        shift = max_reduce(a, axis, True)
        shift = np.where(np.isfinite(shift), shift, zero)  # all -inf: log(0) = -inf, not nan
        total = sum_reduce(np.exp(a - shift), axis, keepdims)
        return _as_value(np.log(total) + sum_reduce(shift, axis, keepdims), dt)

    return impl


# ---------------------------------------------------------------- scipy.stats.norm

def norm_cdf(x, loc=0.0, scale=1.0):
    """scipy.stats.norm.cdf(x, loc, scale)."""
    from scipy.stats import norm

    return _kept(norm.cdf(x, loc, scale), x, loc, scale)


def norm_pdf(x, loc=0.0, scale=1.0):
    """scipy.stats.norm.pdf(x, loc, scale)."""
    from scipy.stats import norm

    return _kept(norm.pdf(x, loc, scale), x, loc, scale)


def norm_logpdf(x, loc=0.0, scale=1.0):
    """scipy.stats.norm.logpdf(x, loc, scale)."""
    from scipy.stats import norm

    return _kept(norm.logpdf(x, loc, scale), x, loc, scale)


# The overloads bring the operands and constants to the value's dtype first: numba makes a float32
# array minus a float (the default loc, 0.0) float64.

@overload(norm_cdf)
def _ol_norm_cdf(x, loc=0.0, scale=1.0):
    dt = _value_dtype(x, loc, scale)
    half, sqrt_2 = dt.type(0.5), dt.type(_SQRT_2)

    def impl(x, loc=0.0, scale=1.0):
        return half * sp_erfc((_as_value(loc, dt) - _as_value(x, dt)) / (_as_value(scale, dt) * sqrt_2))

    return impl


@overload(norm_pdf)
def _ol_norm_pdf(x, loc=0.0, scale=1.0):
    dt = _value_dtype(x, loc, scale)
    half, log_sqrt_2pi = dt.type(0.5), dt.type(_LOG_SQRT_2PI)

    def impl(x, loc=0.0, scale=1.0):
        s = _as_value(scale, dt)
        z = (_as_value(x, dt) - _as_value(loc, dt)) / s
        return np.exp(-half * z * z - log_sqrt_2pi) / s

    return impl


@overload(norm_logpdf)
def _ol_norm_logpdf(x, loc=0.0, scale=1.0):
    dt = _value_dtype(x, loc, scale)
    half, log_sqrt_2pi = dt.type(0.5), dt.type(_LOG_SQRT_2PI)

    def impl(x, loc=0.0, scale=1.0):
        s = _as_value(scale, dt)
        z = (_as_value(x, dt) - _as_value(loc, dt)) / s
        return -half * z * z - log_sqrt_2pi - np.log(s)

    return impl

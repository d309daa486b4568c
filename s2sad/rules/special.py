"""SciPy's special functions and the normal distribution (scipy.special, scipy.stats.norm).

numba has no SciPy, so each rule prints a runtime stand-in (s2sad/runtime/special.py) that numba
compiles; generated code never imports SciPy. s2sad loads this module the first time a program names
a SciPy function (registry.lookup_object), since importing SciPy is slow.
"""

import numpy as np
import scipy.special
import scipy.stats

from s2sad.rules.registry import Check, add_namespace, defrule, spell_as
from s2sad.runtime import (norm_cdf, norm_logpdf, norm_pdf, sp_digamma, sp_erf, sp_erfc, sp_expit, sp_gamma,
                           sp_gammaln, sp_logit, sp_logsumexp, sp_polygamma, sp_xlogy, sum_expand, sum_reduce,
                           unbroadcast)

SCALAR = ((),)
BROADCAST = ((), (3,), ((2, 3), (3,)))
NORM = ((), (3,), ((2, 3), (3,), ()), ((3,), (), (2, 3)))

norm = scipy.stats.norm
add_namespace(norm)
for _name in ("erf", "erfc", "expit", "logit", "gamma", "gammaln", "loggamma", "digamma", "polygamma", "xlogy",
              "logsumexp"):  # psi: digamma
    spell_as(getattr(scipy.special, _name), f"scipy.special.{_name}")
for _name in ("cdf", "pdf", "logpdf"):
    spell_as(getattr(norm, _name), f"scipy.stats.norm.{_name}")


# d/dx erf(x) = 2 / sqrt(pi) * exp(-x^2)
@defrule(scipy.special.erf, sp_erf, name="special_erf", print_as="sp_erf", costly=True,
         checks=[Check("scipy.special.erf(a)")])
def erf(g, out, x):
    return (g * 1.1283791670955126 * np.exp(-x * x),)


@defrule(scipy.special.erfc, sp_erfc, name="special_erfc", print_as="sp_erfc", costly=True,
         checks=[Check("scipy.special.erfc(a)")])
def erfc(g, out, x):
    return (-g * 1.1283791670955126 * np.exp(-x * x),)


@defrule(scipy.special.expit, sp_expit, name="special_expit", print_as="sp_expit", costly=True,
         checks=[Check("scipy.special.expit(a)")])
def expit(g, out, x):
    return (g * out * (1.0 - out),)


@defrule(scipy.special.logit, sp_logit, name="special_logit", print_as="sp_logit", costly=True,
         checks=[Check("scipy.special.logit(0.5 + 0.5 * a)", "unit")])
def logit(g, out, p):
    return (g / (p * (1.0 - p)),)


# d/dx gamma(x) = gamma(x) digamma(x)
@defrule(scipy.special.gamma, sp_gamma, name="special_gamma", print_as="sp_gamma", costly=True, singular=True,
         checks=[Check("scipy.special.gamma(a)", "positive"), Check("scipy.special.gamma(0.3 * a - 2.5)", "unit")])
def gamma(g, out, x):
    return (g * out * sp_digamma(x),)


# loggamma of a real x > 0 is gammaln (for x < 0 it is nan, where gammaln gives log|gamma(x)|)
@defrule(scipy.special.gammaln, scipy.special.loggamma, sp_gammaln, name="special_gammaln", print_as="sp_gammaln",
         costly=True, singular=True, checks=[Check("scipy.special.gammaln(a)", "positive"),
                              Check("scipy.special.gammaln(0.3 * a - 2.5)", "unit"),
                              Check("scipy.special.loggamma(a + 1.0)", "positive")])
def gammaln(g, out, x):
    return (g * sp_digamma(x),)


@defrule(scipy.special.digamma, scipy.special.psi, sp_digamma, name="special_digamma", print_as="sp_digamma",
         costly=True, singular=True,
         checks=[Check("scipy.special.digamma(a)", "positive"), Check("scipy.special.psi(a + 2.0)", "unit")])
def digamma(g, out, x):
    return (g * sp_polygamma(1, x),)


# the order n is an integer: only x is differentiable
@defrule(scipy.special.polygamma, sp_polygamma, name="special_polygamma", print_as="sp_polygamma", costly=True,
         checks=[Check("scipy.special.polygamma(1, a)", "positive"),
                 Check("scipy.special.polygamma(2, a + 3.0)", "unit")])
def polygamma(g, out, n, x):
    return None, g * sp_polygamma(n + 1, x)


# xlogy(x, y) = x log(y), 0 where x == 0 (its derivative there is still log(y))
@defrule(scipy.special.xlogy, sp_xlogy, name="special_xlogy", print_as="sp_xlogy", costly=True, singular=True,
         checks=[Check("scipy.special.xlogy(a, b)", "positive", BROADCAST)])
def xlogy(g, out, x, y):
    return g * np.log(y), g * x / y


def logsumexp_tangent(g, out, a, axis=None, keepdims=False):
    return (sum_reduce(g * np.exp(a - sum_expand(out, a, axis, keepdims)), axis, keepdims),)


# the adjoint spreads g over the reduced axes with the softmax weights exp(a - out)
@defrule(scipy.special.logsumexp, sp_logsumexp, name="special_logsumexp", print_as="sp_logsumexp",
         elementwise=False, cheap=False, tangent=logsumexp_tangent,
         checks=[Check("scipy.special.logsumexp(a)", shapes=((3,), (2, 3))),
                 Check("scipy.special.logsumexp(a, 1)", shapes=((2, 3),)),
                 Check("scipy.special.logsumexp(a, axis=0, keepdims=True)", shapes=((2, 3),)),
                 Check("scipy.special.logsumexp(a, axis=(0, 2))", shapes=((2, 3, 2),))])
def logsumexp(g, out, a, axis=None, keepdims=False):
    return (sum_expand(unbroadcast(g, out), a, axis, keepdims) * np.exp(a - sum_expand(out, a, axis, keepdims)),)


# scipy.stats.norm with z = (x - loc) / scale: d cdf / dx = pdf, d cdf / d loc = -pdf, d cdf / d scale = -pdf z
@defrule(norm.cdf, norm_cdf, name="norm_cdf", print_as="norm_cdf", costly=True,
         checks=[Check("scipy.stats.norm.cdf(a)"), Check("scipy.stats.norm.cdf(a, b, c)", "positive", NORM),
                 Check("scipy.stats.norm.cdf(a, 0.5, 2.0)")])
def cdf(g, out, x, loc=0.0, scale=1.0):
    return (g * norm_pdf(x, loc, scale), -g * norm_pdf(x, loc, scale),
            -g * norm_pdf(x, loc, scale) * (x - loc) / scale)


@defrule(norm.pdf, norm_pdf, name="norm_pdf", print_as="norm_pdf", costly=True,
         checks=[Check("scipy.stats.norm.pdf(a)"), Check("scipy.stats.norm.pdf(a, b, c)", "positive", NORM)])
def pdf(g, out, x, loc=0.0, scale=1.0):
    return (-g * out * (x - loc) / (scale * scale), g * out * (x - loc) / (scale * scale),
            g * out * ((x - loc) * (x - loc) / (scale * scale) - 1.0) / scale)


@defrule(norm.logpdf, norm_logpdf, name="norm_logpdf", print_as="norm_logpdf",
         checks=[Check("scipy.stats.norm.logpdf(a)"), Check("scipy.stats.norm.logpdf(a, b, c)", "positive", NORM)])
def logpdf(g, out, x, loc=0.0, scale=1.0):
    return (-g * (x - loc) / (scale * scale), g * (x - loc) / (scale * scale),
            g * ((x - loc) * (x - loc) / (scale * scale) - 1.0) / scale)

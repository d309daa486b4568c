"""Elementwise NumPy and `math` functions (and the builtins abs, min, max, pow, round on scalars).

Every template is also the rule's tangent, so each result is linear in `g`; math-module and
builtin spellings share the NumPy function's rule. Each rule also says how code generation treats
its calls: `fuses` (a one-operand ufunc, fused into loops with arithmetic), `cuda` (its form in a
CUDA kernel, on scalars), `vmath` (runtime.vmath's vectorizing kernel for it) and `singular` (its
derivative is infinite somewhere, so np.where guards its operands on the side it does not pick).
"""

import math

import numpy as np

from s2sad.rules.registry import Check, defrule, nondiff
from s2sad.runtime import copy_adj, math_factorial, np_clip, np_heaviside, np_where, sp_digamma, stop_gradient

BROADCAST = ((), (3,), ((2, 3), (3,)))
SCALAR = ((),)


# --- exponentials and logarithms -----------------------------------------------------------------

@defrule(np.exp, math.exp, costly=True, fuses=True, vmath="vexp", cuda="math.exp",
         checks=[Check("np.exp(a)"), Check("math.exp(a)", shapes=SCALAR)])
def exp(g, out, x):
    return (g * out,)


@defrule(np.exp2, costly=True, fuses=True, cuda="2.0 ** {0}", checks=[Check("np.exp2(a)")])
def exp2(g, out, x):
    return (g * out * np.log(2.0),)


# ldexp(x, i) = x * 2**i: linear in x, scaled exactly; the exponent i is an integer
@defrule(np.ldexp, math.ldexp,
         checks=[Check("np.ldexp(a, 3)"), Check("np.ldexp(a, np.arange(-1, 2))", shapes=((), (3,), (2, 3))),
                 Check("math.ldexp(a, -2)", shapes=SCALAR)])
def ldexp(g, out, x, i):
    return np.ldexp(g, i), None


@defrule(np.expm1, math.expm1, costly=True, fuses=True, cuda="math.expm1",
         checks=[Check("np.expm1(a)"), Check("math.expm1(a)", shapes=SCALAR)])
def expm1(g, out, x):
    return (g * (out + 1.0),)


@defrule(np.log, math.log, costly=True, singular=True, fuses=True, vmath="vlog", cuda="math.log",
         checks=[Check("np.log(a)", "positive"), Check("math.log(a)", "positive", SCALAR)])
def log(g, out, x):
    return (g / x,)


@defrule(np.log2, math.log2, costly=True, singular=True, fuses=True, cuda="math.log2",
         checks=[Check("np.log2(a)", "positive"), Check("math.log2(a)", "positive", SCALAR)])
def log2(g, out, x):
    return (g / (x * np.log(2.0)),)


@defrule(np.log10, math.log10, costly=True, singular=True, fuses=True, cuda="math.log10",
         checks=[Check("np.log10(a)", "positive"), Check("math.log10(a)", "positive", SCALAR)])
def log10(g, out, x):
    return (g / (x * np.log(10.0)),)


@defrule(np.log1p, math.log1p, costly=True, singular=True, fuses=True, vmath="vlog1p", cuda="math.log1p",
         checks=[Check("np.log1p(a)", "unit"), Check("math.log1p(a)", "unit", SCALAR)])
def log1p(g, out, x):
    return (g / (1.0 + x),)


# d/dx log(e^x + e^y) = e^x / e^out
@defrule(np.logaddexp, costly=True, checks=[Check("np.logaddexp(a, b)", shapes=BROADCAST)])
def logaddexp(g, out, x, y):
    return g * np.exp(x - out), g * np.exp(y - out)


@defrule(np.logaddexp2, costly=True, checks=[Check("np.logaddexp2(a, b)", shapes=BROADCAST)])
def logaddexp2(g, out, x, y):
    return g * np.exp2(x - out), g * np.exp2(y - out)


# --- powers and roots ------------------------------------------------------------------------------

@defrule(np.sqrt, math.sqrt, singular=True, fuses=True, cuda="math.sqrt",
         checks=[Check("np.sqrt(a)", "positive"), Check("math.sqrt(a)", "positive", SCALAR)])
def sqrt(g, out, x):
    # At x = 0 the derivative is infinite. Real code masks such entries out (the zero diagonal of a
    # distance matrix), so their cotangent is 0, and so is their share: not 0 * inf = nan. Elsewhere
    # (g != 0) the denominator is `out` itself, inf and nan as NumPy's math gives them.
    return (0.5 * g / (out + (g == 0.0)),)


@defrule(np.cbrt, costly=True, singular=True, checks=[Check("np.cbrt(a)", "nonzero")])
def cbrt(g, out, x):
    return (g / (3.0 * out * out),)


@defrule(np.square, fuses=True, cuda="{0} * {0}", checks=[Check("np.square(a)")])
def square(g, out, x):
    return (g * 2.0 * x,)


@defrule(np.reciprocal, singular=True, cuda="1.0 / {0}", checks=[Check("np.reciprocal(a)", "nonzero")])
def reciprocal(g, out, x):
    return (-g * out * out,)


@defrule(np.power, math.pow, pow, costly=True, singular=True, cuda="{0} ** {1}",
         checks=[Check("np.power(a, b)", "positive", BROADCAST), Check("math.pow(a, b)", "positive", SCALAR),
                 Check("pow(a, b)", "positive", SCALAR)])
def power(g, out, x, y):
    return g * y * np.power(x, y - 1), g * out * np.log(x)


@defrule(np.hypot, math.hypot, cuda="math.hypot",
         checks=[Check("np.hypot(a, b)", "nonzero", BROADCAST), Check("math.hypot(a, b)", "nonzero", SCALAR)])
def hypot(g, out, x, y):
    return g * x / out, g * y / out


# --- trigonometric and hyperbolic ----------------------------------------------------------------

@defrule(np.sin, math.sin, costly=True, fuses=True, cuda="math.sin",
         checks=[Check("np.sin(a)"), Check("math.sin(a)", shapes=SCALAR)])
def sin(g, out, x):
    return (g * np.cos(x),)


@defrule(np.cos, math.cos, costly=True, fuses=True, cuda="math.cos",
         checks=[Check("np.cos(a)"), Check("math.cos(a)", shapes=SCALAR)])
def cos(g, out, x):
    return (-g * np.sin(x),)


@defrule(np.tan, math.tan, costly=True, singular=True, fuses=True, cuda="math.tan",
         checks=[Check("np.tan(a)", "unit"), Check("math.tan(a)", "unit", SCALAR)])
def tan(g, out, x):
    return (g * (1.0 + out * out),)


@defrule(np.arcsin, math.asin, costly=True, singular=True, cuda="math.asin",
         checks=[Check("np.arcsin(a)", "unit"), Check("math.asin(a)", "unit", SCALAR)])
def arcsin(g, out, x):
    return (g / np.sqrt(1.0 - x * x),)


@defrule(np.arccos, math.acos, costly=True, singular=True, cuda="math.acos",
         checks=[Check("np.arccos(a)", "unit"), Check("math.acos(a)", "unit", SCALAR)])
def arccos(g, out, x):
    return (-g / np.sqrt(1.0 - x * x),)


@defrule(np.arctan, math.atan, costly=True, fuses=True, cuda="math.atan",
         checks=[Check("np.arctan(a)"), Check("math.atan(a)", shapes=SCALAR)])
def arctan(g, out, x):
    return (g / (1.0 + x * x),)


# arctan2(y, x) is the angle of the point (x, y): d/dy = x / r^2, d/dx = -y / r^2
@defrule(np.arctan2, math.atan2, costly=True, cuda="math.atan2",
         checks=[Check("np.arctan2(a, b)", "nonzero", BROADCAST), Check("math.atan2(a, b)", "nonzero", SCALAR)])
def arctan2(g, out, y, x):
    return g * x / (x * x + y * y), -g * y / (x * x + y * y)


@defrule(np.sinh, math.sinh, costly=True, fuses=True, cuda="math.sinh",
         checks=[Check("np.sinh(a)"), Check("math.sinh(a)", shapes=SCALAR)])
def sinh(g, out, x):
    return (g * np.cosh(x),)


@defrule(np.cosh, math.cosh, costly=True, fuses=True, cuda="math.cosh",
         checks=[Check("np.cosh(a)"), Check("math.cosh(a)", shapes=SCALAR)])
def cosh(g, out, x):
    return (g * np.sinh(x),)


@defrule(np.tanh, math.tanh, costly=True, fuses=True, vmath="vtanh", cuda="math.tanh",
         checks=[Check("np.tanh(a)"), Check("math.tanh(a)", shapes=SCALAR)])
def tanh(g, out, x):
    return (g * (1.0 - out * out),)


@defrule(np.arcsinh, math.asinh, costly=True, cuda="math.asinh",
         checks=[Check("np.arcsinh(a)"), Check("math.asinh(a)", shapes=SCALAR)])
def arcsinh(g, out, x):
    return (g / np.sqrt(x * x + 1.0),)


@defrule(np.arccosh, math.acosh, costly=True, singular=True, cuda="math.acosh",
         checks=[Check("np.arccosh(a)", "above_one"), Check("math.acosh(a)", "above_one", SCALAR)])
def arccosh(g, out, x):
    return (g / np.sqrt(x * x - 1.0),)


@defrule(np.arctanh, math.atanh, costly=True, singular=True, cuda="math.atanh",
         checks=[Check("np.arctanh(a)", "unit"), Check("math.atanh(a)", "unit", SCALAR)])
def arctanh(g, out, x):
    return (g / (1.0 - x * x),)


# degrees to radians: x * pi / 180
@defrule(np.deg2rad, np.radians, math.radians, fuses=True, cuda="math.radians",
         checks=[Check("np.deg2rad(a)"), Check("np.radians(a)"), Check("math.radians(a)", shapes=SCALAR)])
def deg2rad(g, out, x):
    return (g * 0.017453292519943295,)


# d/dx erf(x) = 2 / sqrt(pi) * exp(-x^2)
@defrule(math.erf, costly=True, cuda="math.erf", checks=[Check("math.erf(a)", shapes=SCALAR)])
def erf(g, out, x):
    return (g * 1.1283791670955126 * np.exp(-x * x),)


# d/dx erfc(x) = -2 / sqrt(pi) * exp(-x^2)
@defrule(math.erfc, costly=True, cuda="math.erfc", checks=[Check("math.erfc(a)", shapes=SCALAR)])
def erfc(g, out, x):
    return (g * -1.1283791670955126 * np.exp(-x * x),)


# d/dx lgamma(x) = digamma(x), scipy.special.gammaln's derivative (a Gamma or Beta likelihood's normalizer)
@defrule(math.lgamma, costly=True, singular=True, checks=[Check("math.lgamma(a)", "positive", shapes=SCALAR)])
def lgamma(g, out, x):
    return (g * sp_digamma(x),)


# --- piecewise: abs, copysign, max/min, clip, remainders -----------------------------------------
# Ties: at x == y the whole gradient goes to the first operand (maximum, minimum, fmax, fmin and the
# builtins max/min alike), which is also what Python's max(x, y) and min(x, y) return there. The operand
# not picked gets 0 whatever the cotangent is, as np.where's does: the cotangent of np.sqrt(np.maximum(v, 0.0))
# is inf where v < 0 (the root's slope at 0), and inf * 0 would be nan.

@defrule(np.abs, np.absolute, abs, math.fabs, fuses=True, cuda="abs",
         checks=[Check("np.abs(a)", "nonzero"), Check("abs(a)", "nonzero"), Check("math.fabs(a)", "nonzero", SCALAR)])
def absolute(g, out, x):
    return (g * np.sign(x),)


@defrule(np.maximum, max, cuda="max",
         checks=[Check("np.maximum(a, b)", shapes=BROADCAST), Check("max(a, b)", shapes=SCALAR)])
def maximum(g, out, x, y):
    return np.where(x >= y, g, 0.0), np.where(x >= y, 0.0, g)


@defrule(np.minimum, min, cuda="min",
         checks=[Check("np.minimum(a, b)", shapes=BROADCAST), Check("min(a, b)", shapes=SCALAR)])
def minimum(g, out, x, y):
    return np.where(x <= y, g, 0.0), np.where(x <= y, 0.0, g)


# fmax/fmin skip a NaN operand; `out == x` sends the gradient to the operand that was returned
@defrule(np.fmax, cuda="max", checks=[Check("np.fmax(a, b)", shapes=BROADCAST)])
def fmax(g, out, x, y):
    return np.where(out == x, g, 0.0), np.where(out == x, 0.0, g)


@defrule(np.fmin, cuda="min", checks=[Check("np.fmin(a, b)", shapes=BROADCAST)])
def fmin(g, out, x, y):
    return np.where(out == x, g, 0.0), np.where(out == x, 0.0, g)


# copysign(x, y) = |x| * sign(y): d/dx is sign(x) * sign(y) (one-sided at x = 0, as for abs); y's sign only
@defrule(np.copysign, math.copysign, checks=[Check("np.copysign(a, b)", "nonzero", BROADCAST),
                                             Check("math.copysign(a, b)", "nonzero", SCALAR)])
def copysign(g, out, x, y):
    return g * np.copysign(1.0, x) * np.copysign(1.0, y), None


# np.clip(x, lo, hi) is minimum(maximum(x, lo), hi): x where lo <= x <= hi (ties go to x), else the
# bound it was clipped to. Bounds may be None (no term then reads them). With inverted bounds
# (lo > hi: NumPy returns hi everywhere) hi only gets the x > hi part.
@defrule(np.clip, np_clip, print_as="np_clip", cuda="min(max({0}, {1}), {2})",
         checks=[Check("np.clip(a, b - 1.0, c + 1.0)", "unit", ((), (3,), ((2, 3), (3,), ()), ((3,), (2, 3), (3,)))),
                 Check("np.clip(a, a_min=b - 1.0, a_max=c + 1.0)", "unit", ((3,),)),
                 Check("np.clip(a, -0.5, 0.5)"), Check("np.clip(a, None, 0.5)"), Check("np.clip(a, -0.5, None)")])
def clip(g, out, x, a_min, a_max):
    return (np.where(out == x, g, 0.0), np.where((x < a_min) & (out == a_min), g, 0.0),
            np.where((x > a_max) & (out == a_max), g, 0.0))


# mod(x, y) = x - y * floor(x / y), fmod(x, y) = x - y * trunc(x / y) (derivatives away from the jumps)
@defrule(np.remainder, checks=[Check("np.mod(a, b)", "nonzero", BROADCAST)])
def remainder(g, out, x, y):
    return g, -g * np.floor(x / y)


@defrule(np.fmod, math.fmod, print_as="np.fmod",  # numba lacks math.fmod
         checks=[Check("np.fmod(a, b)", "nonzero", BROADCAST), Check("math.fmod(a, b)", "nonzero", SCALAR)])
def fmod(g, out, x, y):
    return g, -g * np.trunc(x / y)


# --- selection and copies ----------------------------------------------------------------------

@defrule(np.where, np_where, print_as="np_where", cuda="{1} if {0} else {2}",
         checks=[Check("np.where(a > 0.0, a, b)", shapes=((), (3,), ((2, 3), (3,))))])
def where(g, out, c, x, y):
    return None, np.where(c, g, 0.0), np.where(c, 0.0, g)


def copy_tangent(g, out, x):
    return (copy_adj(g),)


@defrule(np.copy, float, tangent=copy_tangent, cuda="{0}", fresh=True, shaped_like=0,
         checks=[Check("np.copy(a)", shapes=((3,),)), Check("float(a)", shapes=SCALAR)])
def copy(g, out, x):
    return (g,)


# --- zero derivative -----------------------------------------------------------------------------

nondiff(np.sign, name="sign")
nondiff(np.floor, math.floor, name="floor", cuda="math.floor")
nondiff(np.ceil, math.ceil, name="ceil", cuda="math.ceil")
nondiff(np.round, np.around, round, name="round")
nondiff(np.rint, name="rint")
nondiff(np.trunc, math.trunc, name="trunc", cuda="math.trunc")
nondiff(np.fix, name="fix", print_as="np.trunc")  # numba lacks np.fix; on floats it is trunc
nondiff(np.floor_divide, name="floor_divide")
nondiff(np.heaviside, np_heaviside, name="heaviside", print_as="np_heaviside")
nondiff(math.factorial, math_factorial, name="factorial", print_as="math_factorial")
nondiff(int, name="int", cuda="int", int_result=True)
nondiff(bool, name="bool", cuda="bool")
nondiff(np.isnan, math.isnan, name="isnan", bool_result=True)
nondiff(np.isinf, math.isinf, name="isinf", bool_result=True)
nondiff(np.isfinite, math.isfinite, name="isfinite", bool_result=True)
nondiff(np.greater, name="greater", bool_result=True)
nondiff(np.greater_equal, name="greater_equal", bool_result=True)
nondiff(np.less, name="less", bool_result=True)
nondiff(np.less_equal, name="less_equal", bool_result=True)
nondiff(np.equal, name="equal", bool_result=True)
nondiff(np.not_equal, name="not_equal", bool_result=True)
nondiff(np.logical_and, name="logical_and", bool_result=True)
nondiff(np.logical_or, name="logical_or", bool_result=True)
nondiff(np.logical_not, name="logical_not", bool_result=True)
nondiff(np.logical_xor, name="logical_xor", bool_result=True)

nondiff(stop_gradient, name="stop_gradient", cuda="{0}", shaped_like=0)

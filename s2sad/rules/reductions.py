"""Reductions: sum, mean, prod, max/min, var/std, cumsum/cumprod, diff, trace and np.linalg.norm.

Each NumPy reduction prints as a runtime stand-in (`sum_reduce`, `max_reduce`, ...) that takes `axis`
None, an int or a tuple, and `keepdims`, under numba too; the stand-in is registered with the same
rule, so generated code differentiates again. A reduction's adjoint copies `g` back along the reduced
axes (`sum_expand`, the transpose of `sum_reduce`) and multiplies by d out / d x; its tangent reduces
`g * d out / d x`.
"""

import numpy as np

from s2sad.rules.registry import Check, defrule, nondiff
from s2sad.runtime import (center, cumprod_axis, cumsum_adjoint, cumsum_axis, diff_adjoint, diff_axis,
                           extremum_adjoint, extremum_mask, first_zero, lone_zero, max_reduce, mean_reduce,
                           min_reduce, norm_grad, norm_op, norm_smooth, prod_reduce, reduce_count, std_reduce,
                           sum_expand, sum_reduce, trace_adjoint, unbroadcast, var_reduce)

ARRAYS = ((3,), (2, 3))
MATRIX = ((2, 3),)
CUBE = ((2, 3, 4),)


# ------------------------------------------------------------------ sums and means

def sum_tangent(g, out, x, axis=None, keepdims=False):
    return (sum_reduce(g, axis, keepdims),)


@defrule(np.sum, sum_reduce, elementwise=False, reduces=True,
         print_as="sum_reduce", print_plain=True, tangent=sum_tangent,
         checks=[Check("np.sum(a)"), Check("np.sum(a, axis=0)", shapes=MATRIX), Check("np.sum(a, 1)", shapes=MATRIX),
                 Check("np.sum(a, axis=-1)", shapes=CUBE), Check("np.sum(a, axis=(0, 2))", shapes=CUBE),
                 Check("np.sum(a, axis=(-1, 0), keepdims=True)", shapes=CUBE),
                 Check("np.sum(a, keepdims=True)", shapes=MATRIX)])
def sum(g, out, x, axis=None, keepdims=False):
    return (sum_expand(unbroadcast(g, out), x, axis, keepdims),)


def sum_expand_tangent(g, out, r, x, axis=None, keepdims=False):
    return sum_expand(g, x, axis, keepdims), None


@defrule(sum_expand, name="sum_expand", elementwise=False, shape_only=(1,), shaped_like=1,
         tangent=sum_expand_tangent,
         checks=[Check("sum_expand(a, b)", shapes=(((), ()), ((), (2, 3)))),
                 Check("sum_expand(a, b, 1)", shapes=(((2,), (2, 3)),)),
                 Check("sum_expand(a, b, (0, 2), True)", shapes=(((1, 3, 1), (2, 3, 4)),))])
def sum_expand_rule(g, out, r, x, axis=None, keepdims=False):
    return sum_reduce(unbroadcast(g, out), axis, keepdims), None


def mean_tangent(g, out, x, axis=None, keepdims=False):
    return (mean_reduce(g, axis, keepdims),)


@defrule(np.mean, mean_reduce, elementwise=False, reduces=True,
         print_as="mean_reduce", print_plain=True, tangent=mean_tangent,
         checks=[Check("np.mean(a)"), Check("np.mean(a, axis=0)", shapes=MATRIX), Check("np.mean(a, 1)", shapes=MATRIX),
                 Check("np.mean(a, axis=(0, -1), keepdims=True)", shapes=CUBE)])
def mean(g, out, x, axis=None, keepdims=False):
    return (sum_expand(unbroadcast(g, out), x, axis, keepdims) / reduce_count(x, axis),)


# ------------------------------------------------------------------ products

def prod_tangent(g, out, x, axis=None, keepdims=False):
    return ((out * sum_reduce(g * (x != 0) / np.where(x == 0, 1.0, x), axis, keepdims)
             + sum_reduce(g * lone_zero(x, axis), axis, keepdims)
             * prod_reduce(np.where(x == 0, 1.0, x), axis, keepdims)),)


# d out / d x_i is the product of the other entries: out / x_i where x_i != 0; where x_i is the only zero of its
# reduction, the product of the nonzero entries; 0 where there are more zeros. Computed without dividing by zero.
# (Second derivatives are exact unless a reduction has two or more zeros.)
@defrule(np.prod, prod_reduce, elementwise=False, reduces=True,
         print_as="prod_reduce", print_plain=True, tangent=prod_tangent,
         checks=[Check("np.prod(a)", shapes=ARRAYS), Check("np.prod(a, axis=1)", shapes=MATRIX),
                 Check("np.prod(a, axis=(0, 2), keepdims=True)", shapes=CUBE),
                 Check("np.prod(a * (a > 0.0), axis=0)", shapes=((4, 3),))])
def prod(g, out, x, axis=None, keepdims=False):
    g = unbroadcast(g, out)
    nonzero = np.where(x == 0, 1.0, x)
    single = sum_expand(g * prod_reduce(nonzero, axis, keepdims), x, axis, keepdims) * lone_zero(x, axis)
    return (sum_expand(g * out, x, axis, keepdims) / nonzero * (x != 0) + single,)


# ------------------------------------------------------------------ maxima and minima
# Ties: the k entries equal to the max (min) share its gradient equally, 1/k each (extremum_mask).
# That is the mean of the one-sided derivatives, a valid subgradient.

def max_tangent(g, out, x, axis=None, keepdims=False):
    return (sum_reduce(g * extremum_mask(x, out, axis, keepdims), axis, keepdims),)


@defrule(np.max, np.amax, max_reduce, elementwise=False, reduces=True,
         print_as="max_reduce", print_plain=True, tangent=max_tangent,
         checks=[Check("np.max(a)", "distinct"), Check("np.max(a, axis=0)", "distinct", MATRIX),
                 Check("np.amax(a, axis=(0, 2), keepdims=True)", "distinct", CUBE),
                 Check("np.amax(a, -1)", "distinct", CUBE)])
def max(g, out, x, axis=None, keepdims=False):
    return (extremum_adjoint(unbroadcast(g, out), x, out, axis, keepdims),)


def min_tangent(g, out, x, axis=None, keepdims=False):
    return (sum_reduce(g * extremum_mask(x, out, axis, keepdims), axis, keepdims),)


@defrule(np.min, np.amin, min_reduce, elementwise=False, reduces=True,
         print_as="min_reduce", print_plain=True, tangent=min_tangent,
         checks=[Check("np.min(a)", "distinct"), Check("np.min(a, axis=1)", "distinct", MATRIX),
                 Check("np.amin(a, axis=(1, 2))", "distinct", CUBE),
                 Check("np.amin(a, 0, keepdims=True)", "distinct", MATRIX)])
def min(g, out, x, axis=None, keepdims=False):
    return (extremum_adjoint(unbroadcast(g, out), x, out, axis, keepdims),)


def extremum_adjoint_tangent(g, out, r, x, m, axis=None, keepdims=False):
    return extremum_adjoint(g, x, m, axis, keepdims), None, None


# Linear in r; piecewise constant in x and m (which entries are extreme), as extremum_mask.
@defrule(extremum_adjoint, name="extremum_adjoint", elementwise=False, tangent=extremum_adjoint_tangent,
         checks=[Check("extremum_adjoint(a, b, np.max(b, axis=1), 1)", "distinct", shapes=(((2,), (2, 3)),)),
                 Check("extremum_adjoint(a, b, np.min(b, axis=(0, 2), keepdims=True), (0, 2), True)", "distinct",
                       shapes=(((1, 3, 1), (2, 3, 4)),)),
                 Check("extremum_adjoint(a, b, np.max(b))", "distinct", shapes=(((), (2, 3)),))])
def extremum_adjoint_rule(g, out, r, x, m, axis=None, keepdims=False):
    r_bar = sum_reduce(unbroadcast(g, out) * extremum_mask(x, m, axis, keepdims), axis, keepdims)
    return unbroadcast(r_bar, r), None, None


# ------------------------------------------------------------------ variance and standard deviation
# d var / d x = 2 (x - mean) / (n - ddof), n the count of each reduction; d std = d var / (2 std).

def var_tangent(g, out, x, axis=None, ddof=0, keepdims=False):
    return (sum_reduce(g * center(x, axis), axis, keepdims) * (2.0 / (reduce_count(x, axis) - ddof)),)


@defrule(np.var, var_reduce, elementwise=False, reduces=True,
         print_as="var_reduce", tangent=var_tangent,
         checks=[Check("np.var(a)", shapes=ARRAYS), Check("np.var(a, axis=0)", shapes=MATRIX),
                 Check("np.var(a, 1, ddof=1)", shapes=MATRIX),
                 Check("np.var(a, axis=(0, 2), keepdims=True)", shapes=CUBE)])
def var(g, out, x, axis=None, ddof=0, keepdims=False):
    scale = 2.0 / (reduce_count(x, axis) - ddof)
    return (sum_expand(unbroadcast(g, out), x, axis, keepdims) * center(x, axis) * scale,)


# Where the spread is 0 (all items equal) the centered items are 0 too: dividing by 1 there gives the
# subgradient 0 instead of 0/0 = nan (finite differences along equal items agree).
def std_tangent(g, out, x, axis=None, ddof=0, keepdims=False):
    return (sum_reduce(g * center(x, axis), axis, keepdims) / ((out + (out == 0.0)) * (reduce_count(x, axis) - ddof)),)


@defrule(np.std, std_reduce, elementwise=False, reduces=True,
         print_as="std_reduce", print_plain=True, tangent=std_tangent,
         checks=[Check("np.std(a)", shapes=ARRAYS), Check("np.std(a, axis=1)", shapes=MATRIX),
                 Check("np.std(a, 0, ddof=1)", shapes=MATRIX),
                 Check("np.std(a, axis=(1, 2), keepdims=True)", shapes=CUBE)])
def std(g, out, x, axis=None, ddof=0, keepdims=False):
    g = unbroadcast(g, out) / ((out + (out == 0.0)) * (reduce_count(x, axis) - ddof))
    return (sum_expand(g, x, axis, keepdims) * center(x, axis),)


def center_tangent(g, out, x, axis=None):
    return (center(g, axis),)


@defrule(center, name="center", elementwise=False, tangent=center_tangent,
         checks=[Check("center(a)", shapes=ARRAYS), Check("center(a, 1)", shapes=MATRIX),
                 Check("center(a, (0, 2))", shapes=CUBE)])
def center_rule(g, out, x, axis=None):
    return (center(unbroadcast(g, out), axis),)  # an orthogonal projection is its own adjoint


# ------------------------------------------------------------------ cumulative sums and products
# With axis=None both run along the flattened array, so the result is 1-D.

def cumsum_tangent(g, out, x, axis=None):
    return (cumsum_axis(g, axis),)


@defrule(np.cumsum, cumsum_axis, elementwise=False, print_as="cumsum_axis", tangent=cumsum_tangent,
         checks=[Check("np.cumsum(a)", shapes=ARRAYS), Check("np.cumsum(a, axis=0)", shapes=MATRIX),
                 Check("np.cumsum(a, -1)", shapes=CUBE)])
def cumsum(g, out, x, axis=None):
    return (cumsum_adjoint(unbroadcast(g, out), x, axis),)


def cumsum_adjoint_tangent(g, out, r, x, axis=None):
    return cumsum_adjoint(g, x, axis), None


@defrule(cumsum_adjoint, name="cumsum_adjoint", elementwise=False, tangent=cumsum_adjoint_tangent,
         checks=[Check("cumsum_adjoint(a, b)", shapes=(((3,), (3,)), ((6,), (2, 3)))),
                 Check("cumsum_adjoint(a, b, 1)", shapes=MATRIX)])
def cumsum_adjoint_rule(g, out, r, x, axis=None):
    return cumsum_axis(unbroadcast(g, out), axis), None


def cumprod_tangent(g, out, x, axis=None):
    return ((out * cumsum_axis(g * (x != 0) / np.where(x == 0, 1.0, x), axis)
             + cumprod_axis(np.where(first_zero(x, axis) > 0.0, 1.0, x), axis)
             * cumsum_axis(g * first_zero(x, axis), axis)),)


# d out_i / d x_j (x_j at or before out_i along the axis) is the product of out_i's other factors: out_i / x_j
# where x_j != 0 (0 past a zero, with the right derivative); at the first zero, the cumulative product with that
# zero replaced by 1; 0 at later zeros. (Second derivatives are exact unless a line has two or more zeros.)
@defrule(np.cumprod, cumprod_axis, elementwise=False, print_as="cumprod_axis", tangent=cumprod_tangent,
         checks=[Check("np.cumprod(a)", shapes=ARRAYS), Check("np.cumprod(a, axis=0)", shapes=MATRIX),
                 Check("np.cumprod(a, -1)", shapes=CUBE), Check("np.cumprod(a * (a > 0.0), 1)", shapes=((3, 4),))])
def cumprod(g, out, x, axis=None):
    g = unbroadcast(g, out)
    first = first_zero(x, axis)
    nonzero = cumsum_adjoint(g * out, x, axis) / np.where(x == 0, 1.0, x) * (x != 0)
    return (nonzero + cumsum_adjoint(g * cumprod_axis(np.where(first > 0.0, 1.0, x), axis), x, axis) * first,)


# ------------------------------------------------------------------ differences and traces

def diff_tangent(g, out, x, n=1, axis=-1):
    return (diff_axis(g, n, axis),)


@defrule(np.diff, diff_axis, elementwise=False, print_as="diff_axis", tangent=diff_tangent,
         checks=[Check("np.diff(a)", shapes=((4,), (2, 3))), Check("np.diff(a, 2)", shapes=((4,),)),
                 Check("np.diff(a, axis=0)", shapes=((3, 2),)), Check("np.diff(a, 2, 1)", shapes=CUBE)])
def diff(g, out, x, n=1, axis=-1):
    return (diff_adjoint(unbroadcast(g, out), x, n, axis),)


def diff_adjoint_tangent(g, out, r, x, n=1, axis=-1):
    return diff_adjoint(g, x, n, axis), None


@defrule(diff_adjoint, name="diff_adjoint", elementwise=False, tangent=diff_adjoint_tangent,
         checks=[Check("diff_adjoint(a, b)", shapes=(((3,), (4,)),)),
                 Check("diff_adjoint(a, b, 2, 0)", shapes=(((1, 3), (3, 3)),))])
def diff_adjoint_rule(g, out, r, x, n=1, axis=-1):
    return diff_axis(unbroadcast(g, out), n, axis), None


def trace_tangent(g, out, x, offset=0):
    return (np.trace(g, offset),)


@defrule(np.trace, elementwise=False, tangent=trace_tangent,
         checks=[Check("np.trace(a)", shapes=((3, 3), (2, 3))), Check("np.trace(a, 1)", shapes=((3, 4),))])
def trace(g, out, x, offset=0):
    return (trace_adjoint(unbroadcast(g, out), x, offset),)


def trace_adjoint_tangent(g, out, r, x, offset=0):
    return trace_adjoint(g, x, offset), None


@defrule(trace_adjoint, name="trace_adjoint", elementwise=False, tangent=trace_adjoint_tangent,
         checks=[Check("trace_adjoint(a, b)", shapes=(((), (3, 3)),)),
                 Check("trace_adjoint(a, b, -1)", shapes=(((), (3, 2)),))])
def trace_adjoint_rule(g, out, r, x, offset=0):
    return np.trace(unbroadcast(g, out), offset), None


# ------------------------------------------------------------------ norms
# Vector norms (ord None/2, 1, inf; axis None for 1-D x, or an int) and the Frobenius norm (ord None/'fro').

def norm_tangent(g, out, x, ord=None, axis=None, keepdims=False):
    return (sum_reduce(g * norm_grad(x, out, ord, axis, keepdims), axis, keepdims),)


@defrule(np.linalg.norm, norm_op, elementwise=False, print_as="norm_op", tangent=norm_tangent,
         checks=[Check("np.linalg.norm(a)", shapes=ARRAYS), Check("np.linalg.norm(a, 2)", shapes=((3,),)),
                 Check("np.linalg.norm(a, 'fro')", shapes=MATRIX), Check("np.linalg.norm(a, 1)", "nonzero", ((3,),)),
                 Check("np.linalg.norm(a, np.inf)", "distinct", ((4,),)),
                 Check("np.linalg.norm(a, axis=1)", shapes=MATRIX),
                 Check("np.linalg.norm(a, 1, axis=0, keepdims=True)", "nonzero", MATRIX)])
def norm(g, out, x, ord=None, axis=None, keepdims=False):
    return (sum_expand(unbroadcast(g, out), x, axis, keepdims) * norm_grad(x, out, ord, axis, keepdims),)


def norm_grad_tangent(g, out, x, norm, ord=None, axis=None, keepdims=False):
    return (g / sum_expand(norm, x, axis, keepdims) * norm_smooth(x, ord, axis),
            -out * sum_expand(g, x, axis, keepdims) / sum_expand(norm, x, axis, keepdims) * norm_smooth(x, ord, axis))


# For the 2-norm, out = x / norm; the other norms' gradients are piecewise constant (norm_smooth is 0).
@defrule(norm_grad, name="norm_grad", elementwise=False, tangent=norm_grad_tangent,
         checks=[Check("norm_grad(a, b)", "positive", (((3,), ()),)),
                 Check("norm_grad(a, b, None, 1)", "positive", (((2, 3), (2,)),)),
                 Check("norm_grad(a, b, 1)", "nonzero", (((3,), ()),))])
def norm_grad_rule(g, out, x, norm, ord=None, axis=None, keepdims=False):
    g = unbroadcast(g, out) * norm_smooth(x, ord, axis)
    return g / sum_expand(norm, x, axis, keepdims), -sum_reduce(g * out, axis, keepdims) / norm


# Piecewise-constant masks and counts: zero derivative.
nondiff(reduce_count, name="reduce_count")
nondiff(lone_zero, name="lone_zero")
nondiff(extremum_mask, name="extremum_mask")
nondiff(first_zero, name="first_zero")
nondiff(norm_smooth, name="norm_smooth")
nondiff(np.argmax, name="argmax", int_result=True)
nondiff(np.argmin, name="argmin", int_result=True)

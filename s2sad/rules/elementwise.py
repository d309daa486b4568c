"""Elementwise NumPy and `math` functions."""

import math

import numpy as np

from s2sad.rules.registry import Check, defrule, nondiff
from s2sad.runtime import copy_adj, stop_gradient

BROADCAST = ((), (3,), ((2, 3), (3,)))


@defrule(np.exp, math.exp, checks=[Check("np.exp(a)"), Check("math.exp(a)", shapes=((),))])
def exp(g, out, x):
    return (g * out,)


@defrule(np.log, math.log, checks=[Check("np.log(a)", "positive"), Check("math.log(a)", "positive", ((),))])
def log(g, out, x):
    return (g / x,)


@defrule(np.sin, math.sin, checks=[Check("np.sin(a)"), Check("math.sin(a)", shapes=((),))])
def sin(g, out, x):
    return (g * np.cos(x),)


@defrule(np.cos, math.cos, checks=[Check("np.cos(a)"), Check("math.cos(a)", shapes=((),))])
def cos(g, out, x):
    return (-g * np.sin(x),)


@defrule(np.tan, math.tan, checks=[Check("np.tan(a)", "unit"), Check("math.tan(a)", "unit", ((),))])
def tan(g, out, x):
    return (g * (1.0 + out * out),)


@defrule(np.tanh, math.tanh, checks=[Check("np.tanh(a)"), Check("math.tanh(a)", shapes=((),))])
def tanh(g, out, x):
    return (g * (1.0 - out * out),)


@defrule(np.sqrt, math.sqrt, checks=[Check("np.sqrt(a)", "positive"), Check("math.sqrt(a)", "positive", ((),))])
def sqrt(g, out, x):
    return (g * 0.5 / out,)


@defrule(np.abs, np.absolute, abs, math.fabs,
         checks=[Check("np.abs(a)", "nonzero"), Check("abs(a)", "nonzero"), Check("math.fabs(a)", "nonzero", ((),))])
def absolute(g, out, x):
    return (g * np.sign(x),)


@defrule(np.power, checks=[Check("np.power(a, b)", "positive", BROADCAST)])
def power(g, out, x, y):
    return g * y * np.power(x, y - 1), g * out * np.log(x)


@defrule(np.maximum, checks=[Check("np.maximum(a, b)", shapes=BROADCAST)])
def maximum(g, out, x, y):
    return g * (x >= y), g * (x < y)


@defrule(np.minimum, checks=[Check("np.minimum(a, b)", shapes=BROADCAST)])
def minimum(g, out, x, y):
    return g * (x <= y), g * (x > y)


@defrule(np.where, checks=[Check("np.where(a > 0.0, a, b)", shapes=((3,), ((2, 3), (3,))))])
def where(g, out, c, x, y):
    return None, np.where(c, g, 0.0), np.where(c, 0.0, g)


def copy_tangent(g, out, x):
    return (copy_adj(g),)


@defrule(np.copy, float, tangent=copy_tangent, checks=[Check("np.copy(a)", shapes=((3,),)), Check("float(a)", shapes=((),))])
def copy(g, out, x):
    return (g,)


nondiff(np.sign, name="sign")
nondiff(np.floor, math.floor, name="floor")
nondiff(np.ceil, math.ceil, name="ceil")
nondiff(np.round, round, name="round")
nondiff(int, name="int")
nondiff(bool, name="bool")
nondiff(np.isnan, math.isnan, name="isnan")
nondiff(np.isfinite, math.isfinite, name="isfinite")

nondiff(stop_gradient, name="stop_gradient")

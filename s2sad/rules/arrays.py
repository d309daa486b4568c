"""Reductions, dot products, array creation and shape queries."""

import numpy as np

from s2sad.rules.registry import Check, defrule, nondiff
from s2sad.runtime import (matmul_adjoint_a, matmul_adjoint_b, mean_adjoint, mean_axis, sum_adjoint, sum_axis,
                           unbroadcast)

MATRIX = ((2, 3),)


def sum_tangent(g, out, x, axis=None):
    return (sum_axis(g, axis),)


def mean_tangent(g, out, x, axis=None):
    return (mean_axis(g, axis),)


def dot_tangent(g, out, x, y):
    return np.dot(g, y), np.dot(x, g)


@defrule(np.sum, elementwise=False, tangent=sum_tangent,
         checks=[Check("np.sum(a)", shapes=((3,), (2, 3))), Check("np.sum(a, axis=0)", shapes=MATRIX),
                 Check("np.sum(a, axis=1)", shapes=MATRIX), Check("np.sum(a, axis=-1)", shapes=MATRIX)])
def sum(g, out, x, axis=None):
    return (sum_adjoint(unbroadcast(g, out), x, axis),)


@defrule(np.mean, elementwise=False, print_as="mean_axis", tangent=mean_tangent,
         checks=[Check("np.mean(a)", shapes=((3,), (2, 3))), Check("np.mean(a, axis=0)", shapes=MATRIX),
                 Check("np.mean(a, axis=1)", shapes=MATRIX)])
def mean(g, out, x, axis=None):
    return (mean_adjoint(unbroadcast(g, out), x, axis),)


@defrule(np.dot, elementwise=False, cheap=False, tangent=dot_tangent,
         checks=[Check("np.dot(a, b)", shapes=(((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4))))])
def dot(g, out, x, y):
    g = unbroadcast(g, out)
    return matmul_adjoint_a(g, x, y), matmul_adjoint_b(g, x, y)


nondiff(np.shape, name="shape")
nondiff(np.size, name="size")
nondiff(np.ndim, name="ndim")
nondiff(len, name="len")
nondiff(np.zeros, name="zeros")
nondiff(np.ones, name="ones")
nondiff(np.empty, name="empty")
nondiff(np.full, name="full")
nondiff(np.zeros_like, name="zeros_like")
nondiff(np.ones_like, name="ones_like")
nondiff(np.empty_like, name="empty_like")
nondiff(np.arange, name="arange")
nondiff(np.argmax, name="argmax")
nondiff(np.argmin, name="argmin")

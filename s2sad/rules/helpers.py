"""Rules for the runtime helpers generated code calls.

Generated source is itself s2sad input (that is how `grad(grad(f))`, `jvp(grad(f))` and
`hessian` compose), so every helper an adjoint or tangent may call needs rules too. Most
are linear in their first operand, so their adjoint is a transpose written with another
helper, and their tangent is the helper applied to the operand's tangent.
"""

import copy

from numba.typed import List

from s2sad.rules.registry import Check, alias, defrule, nondiff
from s2sad.runtime import (PythonTape, add_at, same_shape, batch_empty, broadcast_like, copy_adj, diagonal_mask,
                           triangle_mask,
                           hstack_axis, index_array, mask_last, matmul_adjoint_a, matmul_adjoint_b, matmul_like,
                           mean_adjoint, mean_axis, range_last, restore, sum_adjoint, sum_axis, unbroadcast, zeros_like_adj)

BROADCAST = (((2, 3), (3,)), ((2, 3), (2, 3)), ((3,), ()), ((), ()), ((2, 3), (1, 3)))
REDUCED = (((), (2, 3)), ((), (3,)), ((), ()))
MATMUL = (((2, 4), (2, 3), (3, 4)), ((2,), (2, 3), (3,)), ((4,), (3,), (3, 4)), ((), (3,), (3,)),
          ((2, 3), (2, 3), ()), ((), (), ()))
STACKED = (((2, 3, 2), (2, 3, 4), (2, 4, 2)), ((2, 3), (2, 3, 4), (4,)), ((2, 4), (3,), (2, 3, 4)))
STACKED_4D = (((2, 2, 2, 2), (2, 1, 2, 3), (2, 3, 2)),)  # broadcast stacks of two dims


def copy_adj_tangent(g, out, v):
    return (copy_adj(g),)


@defrule(copy_adj, copy.copy, copy.deepcopy, name="copy_adj", print_as="copy_adj", tangent=copy_adj_tangent,
         cuda="{0}", fresh=True, shaped_like=0, precision_of=0, checks=[Check("copy_adj(a)")])
def copy_adj_rule(g, out, v):
    return (g,)


def unbroadcast_tangent(g, out, t, like):
    return unbroadcast(g, like), None


@defrule(unbroadcast, name="unbroadcast", elementwise=False, shape_only=(1,), shaped_like=1, precision_of=1,
         tangent=unbroadcast_tangent, cuda="{0}", checks=[Check("unbroadcast(a, b)", shapes=BROADCAST)])
def unbroadcast_rule(g, out, t, like):
    return broadcast_like(g, t), None


def broadcast_like_tangent(g, out, t, like):
    return broadcast_like(g, like), None


@defrule(broadcast_like, name="broadcast_like", elementwise=False, shape_only=(1,), tangent=broadcast_like_tangent, cuda="{0}",
         checks=[Check("broadcast_like(b, a)", shapes=BROADCAST)])
def broadcast_like_rule(g, out, t, like):
    return unbroadcast(g, t), None


def sum_axis_tangent(g, out, x, axis=None):
    return (sum_axis(g, axis),)


@defrule(sum_axis, name="sum_axis", elementwise=False, tangent=sum_axis_tangent,
         checks=[Check("sum_axis(a)", shapes=((), (3,), (2, 3))), Check("sum_axis(a, 1)", shapes=((2, 3),))])
def sum_axis_rule(g, out, x, axis=None):
    return (sum_adjoint(unbroadcast(g, out), x, axis),)


def sum_adjoint_tangent(g, out, r, x, axis=None):
    return sum_adjoint(g, x, axis), None


@defrule(sum_adjoint, name="sum_adjoint", elementwise=False, shape_only=(1,), tangent=sum_adjoint_tangent,
         checks=[Check("sum_adjoint(a, b)", shapes=REDUCED), Check("sum_adjoint(a, b, 0)", shapes=(((3,), (2, 3)),))])
def sum_adjoint_rule(g, out, r, x, axis=None):
    return sum_axis(g, axis), None


def mean_adjoint_tangent(g, out, r, x, axis=None):
    return mean_adjoint(g, x, axis), None


@defrule(mean_adjoint, name="mean_adjoint", elementwise=False, shape_only=(1,), tangent=mean_adjoint_tangent,
         checks=[Check("mean_adjoint(a, b)", shapes=REDUCED),
                 Check("mean_adjoint(a, b, 1)", shapes=(((2,), (2, 3)),))])
def mean_adjoint_rule(g, out, r, x, axis=None):
    return mean_axis(g, axis), None


def matmul_adjoint_a_tangent(g, out, r, a, b):
    return matmul_adjoint_a(g, a, b), None, matmul_adjoint_a(r, a, g)


@defrule(matmul_adjoint_a, name="matmul_adjoint_a", elementwise=False, cheap=False,
         tangent=matmul_adjoint_a_tangent,
         checks=[Check("matmul_adjoint_a(a, b, c)", shapes=MATMUL), Check("matmul_adjoint_a(a, b, c)", shapes=STACKED),
                 Check("matmul_adjoint_a(a, b, c)", shapes=STACKED_4D)])
def matmul_adjoint_a_rule(g, out, r, a, b):
    return matmul_like(g, b), None, matmul_adjoint_b(r, g, b)


def matmul_adjoint_b_tangent(g, out, r, a, b):
    return matmul_adjoint_b(g, a, b), matmul_adjoint_b(r, g, b), None


@defrule(matmul_adjoint_b, name="matmul_adjoint_b", elementwise=False, cheap=False,
         tangent=matmul_adjoint_b_tangent,
         checks=[Check("matmul_adjoint_b(a, b, c)", shapes=MATMUL), Check("matmul_adjoint_b(a, b, c)", shapes=STACKED),
                 Check("matmul_adjoint_b(a, b, c)", shapes=STACKED_4D)])
def matmul_adjoint_b_rule(g, out, r, a, b):
    return matmul_like(a, g), matmul_adjoint_a(r, a, g), None


def matmul_like_tangent(g, out, a, b):
    return matmul_like(g, b), matmul_like(a, g)


@defrule(matmul_like, name="matmul_like", elementwise=False, cheap=False, tangent=matmul_like_tangent,
         checks=[Check("matmul_like(a, b)", shapes=(((2, 3), (3, 4)), ((3,), (3, 2)), ((), (3,)), ((2, 3), ())))])
def matmul_like_rule(g, out, a, b):
    return matmul_adjoint_a(g, a, b), matmul_adjoint_b(g, a, b)


def add_at_tangent(g, out, a, idx, v):
    return g, None, add_at(zeros_like_adj(a), idx, g)


@defrule(add_at, name="add_at", elementwise=False, precision_of=0, tangent=add_at_tangent,
         checks=[Check("add_at(a, index_array((0, 2, 0)), b)", shapes=(((3,), (3,)), ((3, 2), (3, 2)), ((3,), ()))),
                 Check("add_at(a, 1, b)", shapes=(((3,), ()), ((3, 2), (2,)))),
                 Check("add_at(a, slice(0, 2), b)", shapes=(((3,), (2,)), ((3, 2), (2, 2)))),
                 Check("add_at(a, (index_array((0, 1, 0)), index_array((2, 0, 2))), b)",
                       shapes=(((2, 3), (3,)), ((2, 3, 2), (3, 2)), ((2, 3), ())))])
def add_at_rule(g, out, a, idx, v):
    return g, None, unbroadcast(g[idx], v)


def mask_last_tangent(g, out, x, idx):
    return mask_last(g, idx), None


@defrule(mask_last, name="mask_last", elementwise=False, tangent=mask_last_tangent,
         checks=[Check("mask_last(a, index_array((0, 2, 0)))", shapes=((3,), (3, 2))),
                 Check("mask_last(a, (index_array((0, 1, 0)), index_array((2, 0, 2))))", shapes=((3,), (3, 2)))])
def mask_last_rule(g, out, x, idx):  # a 0/1 mask: its own transpose
    return mask_last(g, idx), None


alias("mean", mean_axis)
nondiff(index_array, name="index_array")
nondiff(diagonal_mask, name="diagonal_mask")  # np.diag_indices(n), np.diag_indices_from(a) as an index
nondiff(triangle_mask, name="triangle_mask")  # np.triu_indices(n, k, m) and the others as an index
nondiff(name="make_tuple")  # `(n, m)`: a shape or axes built from variables
nondiff(same_shape, name="same_shape")  # `x.shape == (n, 1)`
nondiff(hstack_axis, name="hstack_axis")
nondiff(batch_empty, name="batch_empty")
nondiff(zeros_like_adj, name="zeros_like_adj", shape_only=(0,), fresh=True, shaped_like=0, precision_of=0)
nondiff(range_last, name="range_last", int_result=True)
# Tapes: creating one has no derivative; pushes, pops and `restore` move values in and out
# of it, and each transformation gives them their derivative (codegen/forward.py, reverse.py).
nondiff(List, PythonTape, name="tape", print_as="List")
nondiff(restore, name="restore", reads_tape=True, precision_of=1)
nondiff(name="tape_pop", reads_tape=True)  # `tape.pop()`

"""Products and linear algebra: dot, vdot, inner, outer, kron, tensordot, einsum, solve, inv, det, cholesky,
eigvalsh, and the parts of a matrix: triu, tril, diag, diagonal.

Contractions numba lacks (einsum, tensordot, inner) print as runtime stand-ins (s2sad/runtime/linalg.py).
Their adjoints and tangents are all `einsum_into` calls: operand k's adjoint is the einsum with `g` in
operand k's place and operand k's subscripts as the output (`einsum_swap`).
"""

import numpy as np

from s2sad.rules.registry import Check, defrule, nondiff
from s2sad.runtime import (diag_adjoint, diagonal_2d, eig_gaps, eigh_vectors, einsum_into, einsum_op, einsum_swap,
                           expand_dims_any, inner_op,
                           kron_adjoint_a, kron_adjoint_b,
                           logabsdet, matmul_adjoint_a, matmul_adjoint_b, matrix_t, slogdet_sign, sum_reduce, sym_lower,
                           tensordot_op, tensordot_spec, tril_half, unbroadcast, vdot_flat)

MATRIX = ((2, 3),)
SQUARE = ((3, 3),)


# ------------------------------------------------------------------ products

def dot_tangent(g, out, x, y):
    return np.dot(g, y), np.dot(x, g)


@defrule(np.dot, elementwise=False, cheap=False, tangent=dot_tangent,
         checks=[Check("np.dot(a, b)", shapes=(((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4))))])
def dot(g, out, x, y):
    g = unbroadcast(g, out)
    return matmul_adjoint_a(g, x, y), matmul_adjoint_b(g, x, y)


def vdot_tangent(g, out, x, y):
    return sum_reduce(g * y), sum_reduce(x * g)


# Real operands of the same shape.
@defrule(np.vdot, vdot_flat, elementwise=False, print_as="vdot_flat", tangent=vdot_tangent,
         checks=[Check("np.vdot(a, b)", shapes=((3,), (2, 3)))])
def vdot(g, out, x, y):
    g = unbroadcast(g, out)
    return g * y, g * x


def outer_tangent(g, out, x, y):
    return np.outer(g, y), np.outer(x, g)


# 1-D operands.
@defrule(np.outer, elementwise=False, cheap=False, tangent=outer_tangent,
         checks=[Check("np.outer(a, b)", shapes=(((3,), (2,)),))])
def outer(g, out, x, y):
    g = unbroadcast(g, out)
    return g @ y, x @ g


def kron_tangent(g, out, x, y):
    return np.kron(g, y), np.kron(x, g)


# Operands of one or two axes, as numba's np.kron takes them.
@defrule(np.kron, elementwise=False, cheap=False, tangent=kron_tangent,
         checks=[Check("np.kron(a, b)", shapes=(((3,), (2,)), ((2, 3), (3, 2)), ((3,), (2, 2))))])
def kron(g, out, x, y):
    g = unbroadcast(g, out)
    return kron_adjoint_a(g, x, y), kron_adjoint_b(g, x, y)


def inner_tangent(g, out, x, y):
    return (einsum_into(tensordot_spec(x, y, (-1, -1)), out, g, y),
            einsum_into(tensordot_spec(x, y, (-1, -1)), out, x, g))


# inner(x, y) is tensordot(x, y, axes=(-1, -1)).
@defrule(np.inner, inner_op, elementwise=False, cheap=False, print_as="inner_op", tangent=inner_tangent,
         checks=[Check("np.inner(a, b)", shapes=(((3,), (3,)), ((2, 3), (3,)), ((2, 3), (4, 3))))])
def inner(g, out, x, y):
    g = unbroadcast(g, out)
    spec = tensordot_spec(x, y, (-1, -1))
    return einsum_into(einsum_swap(spec, 0), x, g, y), einsum_into(einsum_swap(spec, 1), y, x, g)


def tensordot_tangent(g, out, x, y, axes=2):
    return (einsum_into(tensordot_spec(x, y, axes), out, g, y), einsum_into(tensordot_spec(x, y, axes), out, x, g),
            None)


@defrule(np.tensordot, tensordot_op, elementwise=False, cheap=False, print_as="tensordot_op",
         tangent=tensordot_tangent,
         checks=[Check("np.tensordot(a, b, 1)", shapes=(((2, 3), (3, 4)),)),
                 Check("np.tensordot(a, b)", shapes=(((2, 3, 4), (3, 4, 2)),)),
                 Check("np.tensordot(a, b, axes=(0, 1))", shapes=(((3, 2), (4, 3)),)),
                 Check("np.tensordot(a, b, axes=([2, 0], [1, 0]))", shapes=(((2, 3, 4), (2, 4)),)),
                 Check("np.tensordot(a, b, 0)", shapes=(((2,), (3,)),))])
def tensordot(g, out, x, y, axes=2):
    g = unbroadcast(g, out)
    spec = tensordot_spec(x, y, axes)
    return einsum_into(einsum_swap(spec, 0), x, g, y), einsum_into(einsum_swap(spec, 1), y, x, g), None


def einsum_tangent(g, out, subscripts, x, y=None):
    return None, einsum_into(subscripts, out, g, y), einsum_into(subscripts, out, x, g)


# One or two operands, letter subscripts (explicit '->' or NumPy's implicit output).
@defrule(np.einsum, einsum_op, elementwise=False, cheap=False, print_as="einsum_op", tangent=einsum_tangent,
         checks=[Check("np.einsum('ij,jk->ik', a, b)", shapes=(((2, 3), (3, 4)),)),
                 Check("np.einsum('ij,jk', a, b)", shapes=(((2, 3), (3, 2)),)),
                 Check("np.einsum('i,i', a, b)", shapes=((3,),)),
                 Check("np.einsum('i,j->ij', a, b)", shapes=(((2,), (3,)),)),
                 Check("np.einsum('ij,ij->j', a, b)", shapes=MATRIX), Check("np.einsum('ii->', a)", shapes=SQUARE),
                 Check("np.einsum('ii->i', a)", shapes=SQUARE), Check("np.einsum('ij->ji', a)", shapes=MATRIX),
                 Check("np.einsum('ij->', a)", shapes=MATRIX),
                 Check("np.einsum('bij,bjk->bik', a, b)", shapes=(((2, 3, 4), (2, 4, 2)),))])
def einsum(g, out, subscripts, x, y=None):
    g = unbroadcast(g, out)
    return None, einsum_into(einsum_swap(subscripts, 0), x, g, y), einsum_into(einsum_swap(subscripts, 1), y, x, g)


def einsum_into_tangent(g, out, spec, like, x, y=None):
    return None, None, einsum_into(spec, like, g, y), einsum_into(spec, like, x, g)


@defrule(einsum_into, name="einsum_into", elementwise=False, cheap=False, tangent=einsum_into_tangent,
         checks=[Check("einsum_into('ij,jk->ik', c, a, b)", shapes=(((2, 3), (3, 4), (2, 4)),)),
                 Check("einsum_into('ij->iij', b, a)", shapes=(((2, 3), (2, 2, 3)),)),
                 Check("einsum_into('i->ij', b, a)", shapes=(((3,), (3, 2)),)),
                 Check("einsum_into(',i->i', c, a, b)", shapes=(((), (3,), (3,)),)),
                 Check("einsum_into('i,i->', b, a, c)", shapes=(((3,), (), (3,)),))])
def einsum_into_rule(g, out, spec, like, x, y=None):
    g = unbroadcast(g, out)
    return None, None, einsum_into(einsum_swap(spec, 0), x, g, y), einsum_into(einsum_swap(spec, 1), y, x, g)


# ------------------------------------------------------------------ linear algebra
# 2-D matrices (no stacks); `b` of solve may be 1-D or 2-D. Checks use well-conditioned matrices.

def solve_tangent(g, out, a, b):
    return -np.linalg.solve(a, g @ out), np.linalg.solve(a, g)


@defrule(np.linalg.solve, elementwise=False, cheap=False, tangent=solve_tangent,
         checks=[Check("np.linalg.solve(a + 3.0 * np.eye(3), b)", shapes=(((3, 3), (3,)),)),
                 Check("np.linalg.solve(a + 3.0 * np.eye(3), b)", shapes=(((3, 3), (3, 2)),)),
                 Check("np.linalg.solve(a, b)", "spd", SQUARE)])
def solve(g, out, a, b):
    b_bar = np.linalg.solve(matrix_t(a), unbroadcast(g, out))  # a^-T g
    return -matmul_adjoint_a(b_bar, a, out), b_bar  # a's adjoint: -b_bar out^T


def inv_tangent(g, out, x):
    return (-(out @ g @ out),)


@defrule(np.linalg.inv, elementwise=False, cheap=False, shaped_like=0, tangent=inv_tangent,
         checks=[Check("np.linalg.inv(a + 3.0 * np.eye(3))", shapes=SQUARE), Check("np.linalg.inv(a)", "spd", SQUARE)])
def inv(g, out, x):
    out_t = matrix_t(out)
    return (-(out_t @ unbroadcast(g, out) @ out_t),)


# The traces and scales below act on the last two axes: a stack of matrices (NumPy's det and slogdet
# of shape (..., n, n)) is differentiated matrix by matrix.
def det_tangent(g, out, x):
    return (out * np.sum(matrix_t(np.linalg.inv(x)) * g, axis=(-2, -1)),)


# d det / d x = det * inv(x)^T.
@defrule(np.linalg.det, elementwise=False, cheap=False, tangent=det_tangent,
         checks=[Check("np.linalg.det(a + 3.0 * np.eye(3))", shapes=SQUARE), Check("np.linalg.det(a)", "spd", SQUARE)])
def det(g, out, x):
    return (expand_dims_any(unbroadcast(g, out) * out, (-2, -1)) * matrix_t(np.linalg.inv(x)),)


def logabsdet_tangent(g, out, x):
    return (np.sum(matrix_t(np.linalg.inv(x)) * g, axis=(-2, -1)),)


# d log|det x| / dx = inv(x)^T; np.linalg.slogdet(x) is lowered to (slogdet_sign(x), logabsdet(x)).
@defrule(logabsdet, name="logabsdet", elementwise=False, cheap=False, tangent=logabsdet_tangent,
         checks=[Check("logabsdet(a + 3.0 * np.eye(3))", shapes=SQUARE), Check("logabsdet(a)", "spd", SQUARE)])
def logabsdet_rule(g, out, x):
    return (expand_dims_any(unbroadcast(g, out), (-2, -1)) * matrix_t(np.linalg.inv(x)),)


nondiff(slogdet_sign, name="slogdet_sign")


def cholesky_tangent(g, out, x):
    return (out @ tril_half(np.linalg.solve(out, matrix_t(np.linalg.solve(out, sym_lower(g))))),)


# NumPy reads only x's lower triangle, so the upper triangle's adjoint is zero. With L = out and S the symmetric
# matrix whose lower triangle is dx: dL = L tril_half(L^-1 S L^-T). Adjoint (Murray 2016): with
# P = tril_half(L^T g) and M = L^-T P L^-1, x_bar = tril_half(M + M^T).
@defrule(np.linalg.cholesky, elementwise=False, cheap=False, tangent=cholesky_tangent,
         checks=[Check("np.linalg.cholesky(a)", "spd", SQUARE + ((4, 4),))])
def cholesky(g, out, x):
    out_t = matrix_t(out)
    p = tril_half(out_t @ unbroadcast(g, out))
    m = np.linalg.solve(out_t, matrix_t(np.linalg.solve(out_t, matrix_t(p))))
    return (tril_half(m + matrix_t(m)),)


def eigvalsh_tangent(g, out, x):
    return (np.sum(eigh_vectors(x) * (sym_lower(g) @ eigh_vectors(x)), axis=0),)


# NumPy reads x's lower triangle: with V the eigenvectors of the symmetric matrix it stands for, dw_i = v_i^T dS v_i,
# so S_bar = V diag(g) V^T, and a lower item off the diagonal stands for two of S's: x_bar = tril_half(2 S_bar).
@defrule(np.linalg.eigvalsh, elementwise=False, cheap=False, tangent=eigvalsh_tangent,
         checks=[Check("np.linalg.eigvalsh(a)", "spd", SQUARE + ((4, 4),))])
def eigvalsh(g, out, x):
    v = eigh_vectors(x)
    s_bar = (v * unbroadcast(g, out)) @ matrix_t(v)
    return (tril_half(s_bar + matrix_t(s_bar)),)


def eigh_vectors_tangent(g, out, x):
    return (out @ (eig_gaps(np.linalg.eigvalsh(x)) * (matrix_t(out) @ sym_lower(g) @ out)),)


# V^T dV = F * (V^T dS V) with F = eig_gaps(w) (distinct eigenvalues): S_bar = V (F * (V^T V_bar)) V^T, then the
# lower triangle as for eigvalsh. (eigvalsh's second derivatives differentiate its adjoint, which reads V.)
@defrule(eigh_vectors, name="eigh_vectors", elementwise=False, cheap=False, tangent=eigh_vectors_tangent,
         checks=[Check("eigh_vectors(a)", "spd", SQUARE)])
def eigh_vectors_rule(g, out, x):
    s_bar = out @ (eig_gaps(np.linalg.eigvalsh(x)) * (matrix_t(out) @ g)) @ matrix_t(out)
    return (tril_half(s_bar + matrix_t(s_bar)),)


def eig_gaps_tangent(g, out, w):
    return (-(out * out) * (np.expand_dims(g, 0) - np.expand_dims(g, 1)),)


# dF[i, j] = -F[i, j]^2 (dw[j] - dw[i])
@defrule(eig_gaps, name="eig_gaps", elementwise=False, tangent=eig_gaps_tangent,
         checks=[Check("eig_gaps(a)", shapes=((3,),))])
def eig_gaps_rule(g, out, w):
    return (np.sum(g * out * out, axis=1) - np.sum(g * out * out, axis=0),)


# ------------------------------------------------------------------ parts of a matrix
# triu and tril are masks (their own transposes); diag and diagonal take a diagonal out of a matrix, or
# (np.diag of a vector) put one into a matrix of zeros, and diag_adjoint does the reverse of each.

def triu_tangent(g, out, x, k=0):
    return np.triu(g, k), None


@defrule(np.triu, elementwise=False, tangent=triu_tangent,
         checks=[Check("np.triu(a)", shapes=SQUARE + MATRIX), Check("np.triu(a, 1)", shapes=MATRIX),
                 Check("np.triu(a, -1)", shapes=SQUARE + ((2, 3, 3),)), Check("np.triu(a, k=2)", shapes=((3, 4),))])
def triu(g, out, x, k=0):
    return np.triu(unbroadcast(g, out), k), None


def tril_tangent(g, out, x, k=0):
    return np.tril(g, k), None


@defrule(np.tril, elementwise=False, tangent=tril_tangent,
         checks=[Check("np.tril(a)", shapes=SQUARE + MATRIX), Check("np.tril(a, 1)", shapes=MATRIX),
                 Check("np.tril(a, -1)", shapes=SQUARE + ((2, 3, 3),)), Check("np.tril(a, k=-2)", shapes=((4, 3),))])
def tril(g, out, x, k=0):
    return np.tril(unbroadcast(g, out), k), None


def diag_tangent(g, out, v, k=0):
    return np.diag(g, k), None


@defrule(np.diag, elementwise=False, views=True, tangent=diag_tangent,
         checks=[Check("np.diag(a)", shapes=((3,), (3, 3), (2, 3))), Check("np.diag(a, 1)", shapes=((2,), (3, 4))),
                 Check("np.diag(a, -2)", shapes=((2,), (4, 3))), Check("np.diag(a, k=1)", shapes=((3, 3),))])
def diag(g, out, v, k=0):
    return diag_adjoint(unbroadcast(g, out), v, k), None


def diagonal_tangent(g, out, x, offset=0):
    return diagonal_2d(g, offset), None


@defrule(np.diagonal, diagonal_2d, elementwise=False, views=True, print_as="diagonal_2d", tangent=diagonal_tangent,
         checks=[Check("np.diagonal(a)", shapes=SQUARE + MATRIX), Check("np.diagonal(a, 1)", shapes=((3, 4),)),
                 Check("np.diagonal(a, -1)", shapes=SQUARE)])
def diagonal(g, out, x, offset=0):
    return diag_adjoint(unbroadcast(g, out), x, offset), None


def diag_adjoint_tangent(g, out, t, like, k=0):
    return diag_adjoint(g, like, k), None, None


# linear in t: for a matrix t it takes diagonal k, for a vector t it puts it on diagonal k (the other's transpose)
@defrule(diag_adjoint, name="diag_adjoint", elementwise=False, tangent=diag_adjoint_tangent,
         checks=[Check("diag_adjoint(a, b)", shapes=(((3,), (3, 3)), ((2,), (2, 3)), ((3, 3), (3,)))),
                 Check("diag_adjoint(a, b, 1)", shapes=(((2,), (3, 3)), ((4, 4), (3,)))),
                 Check("diag_adjoint(a, b, -1)", shapes=(((2,), (3, 2)),))])
def diag_adjoint_rule(g, out, t, like, k=0):
    return diag_adjoint(unbroadcast(g, out), t, k), None, None


# ------------------------------------------------------------------ helpers the rules above call

def matrix_t_tangent(g, out, x):
    return (matrix_t(g),)


@defrule(matrix_t, name="matrix_t", elementwise=False, tangent=matrix_t_tangent,
         checks=[Check("matrix_t(a)", shapes=MATRIX)])
def matrix_t_rule(g, out, x):
    return (matrix_t(unbroadcast(g, out)),)


def tril_half_tangent(g, out, x):
    return (tril_half(g),)


@defrule(tril_half, name="tril_half", elementwise=False, tangent=tril_half_tangent,
         checks=[Check("tril_half(a)", shapes=SQUARE + MATRIX)])
def tril_half_rule(g, out, x):
    return (tril_half(unbroadcast(g, out)),)  # a mask: its own adjoint


def sym_lower_tangent(g, out, x):
    return (sym_lower(g),)


@defrule(sym_lower, name="sym_lower", elementwise=False, tangent=sym_lower_tangent,
         checks=[Check("sym_lower(a)", shapes=SQUARE)])
def sym_lower_rule(g, out, x):
    g = unbroadcast(g, out)
    return (tril_half(g + matrix_t(g)),)  # tril(g) + tril(g^T, -1)


nondiff(tensordot_spec, name="tensordot_spec")
nondiff(einsum_swap, name="einsum_swap")

"""Python operators: + - * / ** @, unary minus, and the non-differentiable ones.

NumPy's ufuncs spelled as functions (np.add(x, y), np.negative(x), ...) are the operators' own rules:
generated code prints them as the operators.
"""

import numpy as np

from s2sad.rules.registry import Check, alias, defrule, nondiff
from s2sad.runtime import matmul_adjoint_a, matmul_adjoint_b, unbroadcast

BROADCAST = ((), (3,), ((2, 3), (3,)), ((3,), ()), ((), (2, 3)))


@defrule(operator="add", keeps_int=True,
         checks=[Check("a + b", shapes=BROADCAST), Check("np.add(a, b)", shapes=BROADCAST)])
def add(g, out, x, y):
    return g, g


@defrule(operator="sub", keeps_int=True,
         checks=[Check("a - b", shapes=BROADCAST), Check("np.subtract(a, b)", shapes=BROADCAST)])
def sub(g, out, x, y):
    return g, -g


@defrule(operator="mul", keeps_int=True, checks=[Check("a * b", shapes=BROADCAST), Check("a * a"),
                                                 Check("np.multiply(a, b)", shapes=BROADCAST)])
def mul(g, out, x, y):
    return g * y, g * x


@defrule(operator="truediv", singular=True, checks=[Check("a / b", domain="nonzero", shapes=BROADCAST),
                                     Check("np.divide(a, b)", domain="nonzero", shapes=BROADCAST),
                                     Check("np.true_divide(a, b)", domain="nonzero", shapes=BROADCAST)])
def truediv(g, out, x, y):
    return g / y, -g * out / y


@defrule(operator="pow", singular=True, checks=[Check("a ** b", domain="positive", shapes=BROADCAST),
                                 Check("a ** 3"), Check("a ** 2.5", domain="positive"),
                                 Check("np.float_power(a, b)", domain="positive", shapes=BROADCAST)])
def pow(g, out, x, y):
    return g * y * x ** (y - 1), g * out * np.log(x)


@defrule(operator="neg", keeps_int=True, shaped_like=0, fuses=True, checks=[Check("-a"), Check("np.negative(a)")])
def neg(g, out, x):
    return (-g,)


@defrule(operator="pos", checks=[Check("+a"), Check("np.positive(a)")])
def pos(g, out, x):
    return (g,)


def matmul_tangent(g, out, x, y):
    return g @ y, x @ g


@defrule(operator="matmul", elementwise=False, cheap=False, tangent=matmul_tangent,
         checks=[Check("a @ b", shapes=(((2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3, 2)), ((3,), (3,)))),
                 Check("np.matmul(a, b)", shapes=(((2, 3), (3, 4)),)),
                 Check("a @ b", shapes=(((2, 3, 4), (4,)), ((3,), (2, 3, 4)), ((2, 3, 4), (2, 4, 2)))),
                 Check("np.matmul(a, b)", shapes=(((3, 4), (2, 4, 2)), ((2, 3, 4), (4, 2)), ((1, 2, 3), (2, 3, 2)))),
                 # stacks of more than one dim, one check each: numba runs a check's last shape only
                 Check("a @ b", shapes=(((2, 2, 1, 3), (3, 2)),)),
                 Check("a @ b", shapes=(((2, 1, 2, 3), (2, 3, 2)),)),
                 Check("np.matmul(a, b)", shapes=(((1, 2, 2, 3), (2, 1, 3, 2)),)),
                 Check("a @ b", shapes=(((3,), (2, 1, 3, 2)),)),
                 Check("np.matmul(a, b)", shapes=(((2, 1, 2, 2, 3), (3,)),))])
def matmul(g, out, x, y):
    g = unbroadcast(g, out)
    return matmul_adjoint_a(g, x, y), matmul_adjoint_b(g, x, y)


@defrule(operator="mod", keeps_int=True, checks=[Check("a % b", domain="positive", shapes=BROADCAST)])
def mod(g, out, x, y):  # float x % y = x - floor(x / y) * y, away from its jumps
    return g, -g * np.floor(x / y)


alias("add", np.add)
alias("sub", np.subtract)
alias("mul", np.multiply)
alias("truediv", np.divide, np.true_divide)
alias("pow", np.float_power)
alias("neg", np.negative)
alias("pos", np.positive)
alias("pos", np.conjugate)  # np.conj too: s2sad differentiates real values only, which it leaves as they are
alias("matmul", np.matmul)

for _key in ("lt", "le", "gt", "ge", "eq", "ne", "floordiv", "not", "and", "or"):
    nondiff(name=_key, operator=_key, keeps_int=_key == "floordiv", bool_result=_key not in ("floordiv", "and", "or"))
# `&`, `|`, `^`, `~`: combine boolean masks (`(r > 0) & (r < cut)`, `y[~np.isnan(y)]`), or the bits of ints
nondiff(np.bitwise_and, name="bitand", operator="bitand")
nondiff(np.bitwise_or, name="bitor", operator="bitor")
nondiff(np.bitwise_xor, name="bitxor", operator="bitxor")
nondiff(np.invert, name="invert", operator="invert")

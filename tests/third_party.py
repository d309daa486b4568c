"""Stand-ins for another package's functions, with s2sad rules registered for them: one `@numba.njit`, one plain
Python (defrule makes it callable from numba-compiled code)."""

import numba
import numpy as np

import s2sad


@numba.njit
def softsign(x):
    return x / (1.0 + np.abs(x))


@s2sad.rules.defrule(softsign, name="third_party_softsign", checks=[s2sad.rules.Check("third_party.softsign(a)")])
def softsign_rule(g, out, x):
    return (g / (1.0 + np.abs(x)) ** 2,)


def uses_softsign(x):
    return np.sum(softsign(x * 2.0) ** 2)


def softplus(x):
    return np.log1p(np.exp(x))


@s2sad.rules.defrule(softplus, name="third_party_softplus", checks=[s2sad.rules.Check("third_party.softplus(a)")])
def softplus_rule(g, out, x):
    return (g / (1.0 + np.exp(-x)),)


def uses_softplus(x):
    return np.sum(softplus(x * 2.0) * x)

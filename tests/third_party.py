"""A stand-in for another package's function, with an s2sad rule registered for it."""

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

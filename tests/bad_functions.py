"""Functions s2sad must refuse with a located error (line numbers are asserted by the tests)."""

import numpy as np


def uses_with(x):
    with open("weights.txt") as f:
        y = x * float(f.read())
    if x > 0.0:
        y = x
    return y


def calls_unknown(x):
    y = x * 2.0
    return np.i0(y)


def prints(x):
    print(x)
    return x


def writes_global(x):
    TABLE[0] = x
    return np.sum(TABLE)


TABLE = np.ones(3)

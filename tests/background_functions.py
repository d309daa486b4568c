"""Functions whose first calls tests/test_background.py runs while a worker compiles them."""

import numpy as np
import scipy.special


def logistic_loss(W, b, inputs, targets):
    preds = 1.0 / (1.0 + np.exp(-(inputs @ W + b)))
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probs))


def long_loop(x):
    """10^8 iterations: minutes as Python, a fraction of a second compiled."""
    s = 0.0
    for i in range(100_000_000):
        s += x * 1e-8
    return s


def ellipk_of_length(x):
    """numba cannot compile scipy.special.ellipk, which the gradient needs: Python can."""
    c = scipy.special.ellipk(1.0 / (x.shape[0] + 1.0))
    return c * np.sum(x ** 2)


def sum_of_squares(x):
    return np.sum(x ** 2)


def python_for(seconds):
    """Python lines for `seconds`."""
    import time

    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def one_long_call(n):
    """One call into C that runs no Python line (as a NumPy operation on large new arrays can take long)."""
    return sum(range(n))

import numba
import numpy as np

import s2sad


@numba.njit
def jitted_loss(w, x):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.tanh(w * x[i]) ** 2
    return s


@s2sad.differentiate
def decorated(w, x):
    return np.sum(np.sin(w * x))


@s2sad.differentiate(argnums=(0, 1))
def decorated_both(w, x):
    return np.sum(np.sin(w * x))


def uses_decorated(w, x):
    return decorated(w, x) * 2.0


# lambdas: what grad(lambda ...) differentiates (their source is the line they sit on)
square = lambda t: t * t  # noqa: E731
softplus_sum = lambda x: np.sum(np.log1p(np.exp(x)))  # noqa: E731
cube = lambda t: square(t) * t  # noqa: E731 - calls another lambda
twice, thrice = (lambda u: 2.0 * np.sin(u)), (lambda u: 3.0 * np.sin(u))  # noqa: E731 - two alike on one line
spread = (
    lambda x, y:
        np.sum(x * np.cos(y))
)
prints = lambda x: print(x)  # noqa: E731
LAMBDA_LINES = {"square": square.__code__.co_firstlineno, "prints": prints.__code__.co_firstlineno}

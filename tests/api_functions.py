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

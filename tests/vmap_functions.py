"""Functions for the vmap tests (s2sad reads their source)."""

import math

import numpy as np

import s2sad


def per_example_loss(W, b, x, y):
    p = 0.5 * (np.tanh((x @ W + b) / 2.0) + 1.0)
    return -np.log(p * y + (1.0 - p) * (1.0 - y))


def example_losses(W, b, X, Y):
    return s2sad.vmap(per_example_loss, in_axes=(None, None, 0, 0))(W, b, X, Y)


def batch_loss(W, b, X, Y):
    return np.sum(s2sad.vmap(per_example_loss, in_axes=(None, None, 0, 0))(W, b, X, Y))


def row_norms(m):
    return s2sad.vmap(row_energy)(m)


def row_energy(row):
    return np.sum(np.sin(row) ** 2)


def two_outputs(x, y):
    return x * y, np.sin(x) + y


def margin_loss(w, x, y):
    """A per-example loss in the loopy style a CUDA thread runs: a dot product, a branch, a while loop."""
    z = 0.0
    for j in range(x.shape[0]):
        z += w[j] * x[j]
    if y > 0.5:
        loss = math.log(1.0 + math.exp(-z))
    else:
        loss = math.log(1.0 + math.exp(z))
    k = 0
    scale = 1.0
    while scale * abs(z) > 0.5 and k < 10:  # a data-dependent trip count
        scale = scale * 0.5
        k += 1
    return loss + scale * z * z


def running_max(w, x):
    """Overwrites `m` in a loop with a value it must remember: the adjoint needs a tape."""
    m = w[0] * x[0]
    for j in range(1, x.shape[0]):
        m = np.sin(m) + w[j] * x[j]
    return m


def matrix_loss(W, x):
    return np.sum(np.tanh(W @ x))


def window_sum(w, x):
    return np.sum(w[1:] * x[1:])


def half_sum(w, x):
    k = x.shape[0] // 2
    return np.sum(w[:k] * x[:k])


def peak(w, x):
    return np.max(w * x)


def tree_loss(params, x, y):
    z = np.dot(x, params["w"]) + params["b"]
    return (np.tanh(z) - y) ** 2


def pair_energy(xy):
    x, y = xy
    return np.sum(np.sin(x) * y)


def scaled_energy(w, x):
    y = x * w
    return np.sum(y * y) + np.sum(np.sin(y))

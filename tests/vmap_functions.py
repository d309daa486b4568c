"""Functions for the vmap tests (s2sad reads their source)."""

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

"""Functions for the forward-mode and higher-order tests (s2sad reads their source)."""

import numpy as np

import s2sad


def logsumexp(x):
    return np.log(np.sum(np.exp(x)))


def softmax_cross_entropy(logits, labels):
    shifted = logits - np.log(np.sum(np.exp(logits)))
    return -np.sum(labels * shifted)


def loop_energy(x):
    e = 0.0
    for i in range(x.shape[0] - 1):
        d = x[i + 1] - x[i]
        e += d * d * (1.0 + 0.1 * x[i] * x[i]) + np.sin(x[i])
    return e


def vector_map(x, w):
    return np.tanh(w * x) * x


def two_outputs(x, y):
    return x * y, np.sin(x) + y


def inner(x):
    return np.sum(np.sin(x) * x)


def calls_grad_inside(x):
    return np.sum(s2sad.grad(inner)(x) ** 2)


def scaled_tanh(x, w):
    return np.tanh(w * x) * x


def tangent_of_scaled_tanh(x, w, v):
    y, dy = s2sad.jvp(scaled_tanh, (x, w), (v, 0.0))
    return dy


def uses_sin(x):
    return np.sum(np.sin(x) * x)

"""SPEC.md's seed functions, defined in a file so s2sad can read their source."""

import numpy as np

import s2sad


def product(x, y):
    return x * y


def quadratic_form(X):
    return 5.0 * X[0] ** 2 + 6.0 * X[1] ** 2 + 7.0 * X[2] ** 2


def quadratic_scalars(x, y, z):
    return 5.0 * x ** 2 + 6.0 * y ** 2 + 7.0 * z ** 2


def with_stop_gradient(x, y):
    return x * s2sad.stop_gradient(y)


def log1pexp(x):
    return np.log(1.0 + np.exp(x))


def sigmoid(x):
    return 0.5 * (np.tanh(x / 2.0) + 1.0)


def predict(W, b, inputs):
    return sigmoid(inputs @ W + b)


def logistic_loss(W, b, inputs, targets):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1.0 - preds) * (1.0 - targets)
    return -np.sum(np.log(label_probs))


def loss_with_aux(W, b, inputs, targets):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1.0 - preds) * (1.0 - targets)
    return -np.sum(np.log(label_probs)), preds


INPUTS = np.array([[0.52, 1.12, 0.77],
                   [0.88, -1.08, 0.15],
                   [0.52, 0.06, -1.30],
                   [0.74, -2.49, 1.39]])
TARGETS = np.array([1.0, 1.0, 0.0, 1.0])
W0 = np.array([0.3, -0.2, 0.5])
B0 = 0.1

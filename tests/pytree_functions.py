"""Functions over pytrees (dicts, lists, tuples, namedtuples, dataclasses) for the pytree tests."""

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

import s2sad

Affine = namedtuple("Affine", ["W", "b"])


@s2sad.tree.register
@dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray


def sigmoid(x):
    return 0.5 * (np.tanh(x / 2.0) + 1.0)


def logistic_loss_dict(params, inputs, targets):
    preds = sigmoid(inputs @ params['W'] + params['b'])
    label_probs = preds * targets + (1.0 - preds) * (1.0 - targets)
    return -np.sum(np.log(label_probs))


def mlp_predict(params, x):
    for p in params:
        x = np.tanh(p['W'] @ x + p['b'])
    return x


def mlp_loss(params, x):
    y = mlp_predict(params, x)
    return np.sum(y * y)


def mlp_loss_with_aux(params, x):
    y = mlp_predict(params, x)
    return y.sum(), y


def nested_mix(t, scale):
    (a, b), rest = t
    total = np.sum(a * b) * scale
    for k, v in rest['pairs']:
        total = total + k * np.sum(v ** 2)
    return total + rest['bias'] * len(rest['pairs'])


def namedtuple_layer(layer, x):
    return np.sum(np.tanh(layer.W @ x + layer.b) ** 2) + np.sum(layer[1])


def dataclass_layers(layers, x):
    for layer in layers:
        x = np.sin(layer.W @ x) + layer.b
    return np.sum(x ** 2)


def tree_output(params, x):
    h = np.tanh(params['W'] @ x)
    return {'h': h, 'norm': np.sum(h * h)}


def with_none(params, x):
    return np.sum(params['w'] * x)


@dataclass
class Ridge:  # not registered: a differentiated argument registers it, as s2sad.tree.register would
    w: np.ndarray
    b: float


@dataclass
class Settings:  # not registered, eq=True and not frozen: unhashable, passed as a constant
    alpha: float = 0.5
    mode: str = "l2"


class Plain:
    def __init__(self, w):
        self.w = w


def ridge_loss(model, settings, x, y):
    pred = x @ model.w + model.b
    penalty = np.sum(model.w ** 2) if settings.mode == "l2" else np.sum(np.abs(model.w))
    return np.mean((pred - y) ** 2) + settings.alpha * penalty


def plain_loss(obj):
    return np.sum(obj.w ** 2)

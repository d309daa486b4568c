"""Functions that read arrays, functions and objects from outside their arguments, as real code does."""

import dataclasses
import math

import numpy as np

# The JAX autodiff tutorial's logistic regression, as written there: the data are module globals.
inputs = np.array([[0.52, 1.12, 0.77],
                   [0.88, -1.08, 0.15],
                   [0.52, 0.06, -1.30],
                   [0.74, -2.49, 1.39]])
targets = np.array([True, True, False, True])


def sigmoid(x):
    return 0.5 * (np.tanh(x / 2) + 1)


def predict(W, b):
    return sigmoid(np.dot(inputs, W) + b)


def loss(W, b):
    preds = predict(W, b)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probs))


def squared_error(W, X, y):
    return np.sum((X @ W - y) ** 2)


WEIGHTS = (np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -0.5]))


def through_tuple_of_arrays(x):
    total = 0.0
    for w in WEIGHTS:
        total += np.sum(np.tanh(w * x))
    return total


def scaled(x, scale=np.array([1.0, 2.0, 3.0])):
    return x * scale


def uses_default(x):
    return np.sum(scaled(x) ** 2)


def rk4(rhs, y0, dt, n):
    y = y0
    for _ in range(n):
        k1 = rhs(y)
        k2 = rhs(y + 0.5 * dt * k1)
        k3 = rhs(y + 0.5 * dt * k2)
        k4 = rhs(y + dt * k3)
        y = y + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return y


RATES = np.array([[-0.5, 0.2], [0.1, -0.3]])


def linear_rhs(y):
    return RATES @ y + 0.1 * np.sin(y)


def integrated(y0):
    return np.sum(rk4(linear_rhs, y0, 0.1, 5) ** 2)


@dataclasses.dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    slope: float = 0.5

    def forward(self, x):
        return np.tanh(self.W @ x + self.b) * self.slope

    def loss(self, x):
        return np.sum(self.forward(x) ** 2)


LAYER = Layer(np.array([[0.3, -0.2, 0.1], [0.5, 0.4, -0.6]]), np.array([0.1, -0.2]))


def through_method(x):
    return LAYER.loss(x) + math.pi * 0.0


def with_nested_rhs(y0, a):
    def rhs(y):
        return -a * y + np.sin(y)
    return np.sum(rk4(rhs, y0, 0.1, 4) ** 2)


def with_lambdas(y0, a):
    decay = lambda y: -a * y  # noqa: E731 (real code binds lambdas)
    return np.sum(rk4(decay, y0, 0.1, 3)) + np.sum(rk4(lambda y: y * a * 0.5, y0, 0.1, 2))


def nested_writes_and_defaults(x):
    out = np.zeros_like(x)

    def fill(i, v):
        out[i] = v * v

    for i in range(x.shape[0]):
        fill(i, x[i])
    power = lambda t, p=2.0: t ** p  # noqa: E731
    return np.sum(out) + power(x[0]) + power(x[1], 3.0)


def descends(f, x0):
    x = x0
    for _ in range(3):
        x = x - 0.1 * (f(x + 1e-3) - f(x - 1e-3)) / 2e-3
    return np.sum(f(x))


def bumpy(x):
    return (x - 1.0) ** 2 + 0.1 * np.sin(3 * x)


def cubic(x):
    return 0.1 * x ** 3


class Params:
    """A plain object passed as an argument (not a registered pytree)."""

    def __init__(self, W, c):
        self.W = W
        self.c = c


def energy(x, p):
    return np.sum(np.tanh(p.W @ x) * p.c)


def oscillator(X, t, omega, damping):
    return np.array([X[1], -omega ** 2 * X[0] - damping * X[1]])


def midpoint(f, X0, ts, *args):
    X = X0
    for i in range(ts.shape[0] - 1):
        dt = ts[i + 1] - ts[i]
        k1 = f(X, ts[i], *args)
        X = X + dt * f(X + 0.5 * dt * k1, ts[i], *args)
    return X


def spread_arguments(X0, omega):
    params = (omega, 0.1)
    options = {"axis": 0}
    return np.sum(midpoint(oscillator, X0, np.arange(5) * 0.25, *params) ** 2, **options)


def least_squares(coefficients, *data, weight=1.0, **options):
    """A scipy.optimize objective, `fun(x, *args)`: the data arrive as extra positional arguments."""
    xs, ys = data[0], data[1]
    model = coefficients[0] + xs * coefficients[1] + xs ** 2 * coefficients[2]
    return weight * np.sum((ys - model) ** 2) + options.get("ridge", 0.0) * np.sum(coefficients ** 2)


def scaled_by_options(x, *extra, **options):
    return x * options.get("scale", 2.0) + len(extra) * x


def calls_without_extras(x):
    return scaled_by_options(x) ** 2


TRANSITION = np.array([[1.0, 0.1], [0.0, 1.0]])  # a filter's model, read from a global as filterpy's users do


def filter_step(x, P, F=1, Q=0.0):
    if np.isscalar(F):
        F = np.array(F)
    x = np.dot(F, x)
    P = np.dot(np.dot(F, P), F.T) + Q
    return x, P


def filtered(x, P, zs):
    for z in zs:
        x, P = filter_step(x, P, TRANSITION, 0.01)
        if x.ndim == 0:  # folded: the global's rank, and so x's, is known when the code is generated
            x = x[0, 0]
        x = x + 0.5 * (z - x[0]) * np.atleast_2d(P)[:, 0] / (P[0, 0] + 1.0)
    return np.sum(x ** 2) + np.trace(P)


class Dense:
    scale = 2.0

    def __init__(self, W, b):
        self.W, self.b = W, b

    @staticmethod
    def act(z):
        return np.tanh(z)

    @classmethod
    def factor(cls):
        return cls.scale * 0.5

    @property
    def n_out(self):
        return self.W.shape[0]

    def forward(self, x):
        return self.act(self.W @ x + self.b) * self.factor()


class AveragedDense(Dense):
    """A subclass whose method calls the parent's with super(), on an object made outside the function."""

    scale = 3.0

    def forward(self, x):
        return super().forward(x) / self.n_out


class SquaredError:
    def __init__(self, model, y):
        self.model, self.y = model, y

    def __call__(self, x):
        return np.sum((self.model.forward(x) - self.y) ** 2)


class Affine:
    """A layer as from-scratch NumPy networks write one: forward keeps its input and output on the object."""

    def __init__(self, weights, biases):
        self.weights, self.biases = weights, biases
        self.inputs = self.output = None

    def forward(self, inputs):
        self.inputs = inputs
        self.output = np.dot(inputs, self.weights) + self.biases
        return self.output


class Rectifier:
    def forward(self, inputs):
        self.output = np.maximum(0, inputs)
        return self.output


class Sequential:
    def __init__(self, layers):
        self.layers = layers

    def forward(self, X):
        for layer in self.layers:
            X = layer.forward(X)
        return X

    def cost(self, X, y):
        return np.mean((self.forward(X) - y) ** 2)


def cost_of_first_weights(W, net, X, y):
    net.layers[0].weights = W
    return net.cost(X, y)

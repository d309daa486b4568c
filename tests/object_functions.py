"""Objects a differentiated function builds or changes: classes, dataclasses, namedtuples, SimpleNamespace."""

import collections
import dataclasses
from types import SimpleNamespace

import numpy as np


class LayerNorm:
    def __init__(self, d_model, eps=1e-6):
        self.gamma = np.ones(d_model)
        self.beta = np.zeros(d_model)
        self.eps = eps

    def forward(self, x):
        mean = x.mean(axis=-1, keepdims=True)
        std = x.std(axis=-1, keepdims=True)
        return self.gamma * (x - mean) / (std + self.eps) + self.beta


def layer_norm_built_inside(x, gamma):
    ln = LayerNorm(3)
    ln.gamma = gamma
    return np.sum(ln.forward(x) * np.arange(6.0).reshape(2, 3))


class Integrator:
    def __init__(self, x, dt):
        self.x = x
        self.dt = dt
        self.steps = 0

    def step(self):
        self.x = self.x + self.dt * np.sin(self.x)
        self.steps += 1


def state_carried_by_a_loop(x):
    it = Integrator(x, 0.1)
    k = 0
    while k < 3:
        it.step()
        k += 1
    return np.sum(it.x ** 2) * it.steps


class Adam:
    def __init__(self, n):
        self.t = 0
        self.m = np.zeros(n)

    def update(self, g):
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * g
        return self.m / (1 - 0.9 ** self.t)


def optimizer_steps(x):
    opt = Adam(3)
    for _ in range(3):
        x = x - 0.1 * opt.update(2.0 * x)
    return np.sum(x ** 2)


class Poly:
    scale = 2.0

    def __init__(self, c):
        self.c = c

    @property
    def lead(self):
        return self.c[-1] * self.scale

    @staticmethod
    def horner(c, x):
        y = 0.0
        for k in range(len(c)):
            y = y * x + c[len(c) - 1 - k]
        return y

    @classmethod
    def unit(cls, x):
        return cls(np.ones(3) * x)

    def __call__(self, x):
        return self.horner(self.c, x) + self.lead


def methods_of_every_kind(c, x):
    p = Poly(c)
    q = Poly.unit(x[0])
    return p(x[1]) + q(2.0)


class Base:
    def __init__(self, k):
        self.k = k


class Scaled(Base):
    def __init__(self, k, w):
        super().__init__(k)
        self.w = w

    def __call__(self, x):
        return np.sum(np.tanh(self.w * x)) * self.k


def super_init(w, x):
    return Scaled(3.0, w)(x)


Pair = collections.namedtuple("Pair", "a b")


def namedtuple_built(x):
    p = Pair(x * 2.0, b=x[0])
    return np.sum(p.a) * p.b


@dataclasses.dataclass
class Config:
    w: np.ndarray
    n: int = 3
    shift: tuple = dataclasses.field(default_factory=lambda: (1.0, 2.0))

    def __post_init__(self):
        self.w2 = self.w * self.w


def dataclass_built(w):
    c = Config(w)
    return np.sum(c.w2) * c.n + c.shift[1] * np.sum(c.w)


def namespace_built(x, a):
    m = SimpleNamespace(A=a * 2.0, b=3)
    return np.sum(m.A * x) + m.b


class Layer:
    def __init__(self, W):
        self.W = W
        self.cache = None

    def forward(self, x):
        self.cache = x
        return np.tanh(x @ self.W)


class Net:
    def __init__(self, W1, W2):
        self.layers = [Layer(W1), Layer(W2)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x


def objects_in_a_list(W1, W2, x):
    net = Net(W1, W2)
    y = net(x)
    return np.sum(y ** 2) + np.sum(net.layers[1].cache)


def built_in_a_loop(x):
    total = 0.0
    for i in range(3):
        it = Integrator(x * i, 0.5)
        it.step()
        total = total + np.sum(it.x ** 2)
    return total


def assigned_in_a_branch(x):
    it = Integrator(x, 0.1)
    if x[0] > 0:
        it.x = it.x * 3.0
    else:
        it.x = it.x - 1.0
    return np.sum(it.x ** 2)


class KernelDensity:
    def __init__(self, bandwidth=None):
        self.bandwidth = bandwidth

    def fit(self, X):
        self.X = X
        self.n = self.X.shape[0]
        return self

    def score(self, x):
        return np.sum(np.exp(-((x[:, None] - self.X[None, :]) / self.bandwidth) ** 2)) / self.n


def method_of_a_built_object(data, points, h):
    return KernelDensity(bandwidth=h).fit(data).score(points)


MODEL = Layer(np.eye(3) * 0.5)


def assigns_a_global_objects_attribute(W, x):
    MODEL.W = W
    return np.sum(MODEL.forward(x))


class Model:
    def __init__(self, W):
        self.W = W

    def loss(self, x):
        self.h = np.tanh(x @ self.W)
        self.out = np.sum(self.h ** 2)
        return self.out


class Body:
    def __init__(self, pos, vel):
        self.pos = pos
        self.vel = vel

    def drift(self, dt):
        self.pos += dt * self.vel


def drift_shares_the_callers_array(p, v):
    pos = p.copy()
    b = Body(pos, v)
    b.drift(0.5)
    return np.sum(pos * pos) + np.sum(b.pos)


def drift_of_its_own_copy(p, v):
    b = Body(p.copy(), v)
    b.drift(0.5)
    b.drift(0.25)
    return np.sum(b.pos ** 3)


class Counter:
    def __init__(self):
        self.mode = "a"


def static_attribute_changed_in_a_loop(x):
    c = Counter()
    for i in range(3):
        c.mode = "b"
    return np.sum(x)


class Kalman:
    def __init__(self, x, P):
        self.x = x
        self.P = P

    def predict(self, F):
        self.x, self.P = F @ self.x, F @ self.P @ F.T


def unpacks_into_attributes_and_elements(x, P):
    kf = Kalman(x, P)
    kf.predict(np.array([[1.0, 0.1, 0.0], [0.0, 1.0, 0.1], [0.0, 0.0, 1.0]]))
    a = np.zeros(2)
    a[0], a[1] = kf.x[1], kf.x[0] * 2.0
    return np.sum(kf.P) + np.sum(a ** 2)

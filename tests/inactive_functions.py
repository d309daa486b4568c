"""Functions with code that touches no differentiated value, shaped like real numba/NumPy kernels:
input validation, printing, seeded random draws, normalising constants, dtype plumbing."""

import math
from math import lgamma as _lgamma

import numpy as np
import scipy.special


def black_scholes_call(S, K, T, r, sigma):
    if sigma <= 0.0:
        raise ValueError("sigma must be positive")
    if T <= 0.0:
        raise ValueError(f"T must be positive, got {T}")
    sqrt_t = math.sqrt(T)
    d1 = (math.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    nd1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
    nd2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
    return S * nd1 - K * math.exp(-r * T) * nd2


def layer_norm_energy(x, gamma, beta):
    assert x.ndim == 1, "x must be a vector"
    assert x.shape[0] == gamma.shape[0], "gamma must have one entry per feature"
    assert x.shape[0] > 1
    eps = np.finfo(x.dtype).eps
    mu = np.mean(x)
    var = np.mean((x - mu) ** 2)
    y = (x - mu) / np.sqrt(var + 1e-5 + eps) * gamma + beta
    return np.sum(y ** 2)


def poisson_nll(rate, counts):
    total = 0.0
    for i in range(counts.shape[0]):
        k = counts[i]
        total += rate[i] - k * math.log(rate[i]) + math.lgamma(k + 1.0)
    return total


def gaussian_nll(x, mu):
    n = x.shape[0]
    log_norm = 0.5 * n * math.log(2.0 * math.pi) + scipy.special.gammaln(1.0)
    tiny = np.finfo(float).tiny
    return 0.5 * np.sum((x - mu) ** 2) + log_norm + tiny


def monte_carlo_second_moment(mu, sigma, n):
    np.random.seed(0)
    z = np.random.normal(size=n)
    samples = mu + sigma * z
    u = np.random.rand(n)
    v = np.random.randn(n)
    return np.mean(samples ** 2) + np.mean(u * v) * mu


def noisy_walk(x, steps):
    np.random.seed(1)
    pos = x
    for i in range(steps):
        unused = np.random.uniform(0.0, 1.0)
        kick = np.random.randn()
        pos = pos + 0.1 * np.tanh(pos) * kick
    return pos


def least_squares_verbose(w, X, y):
    pred = X @ w
    loss = np.mean((pred - y) ** 2)
    print("loss", loss)
    print(f"w[0] = {w[0]}, n = {X.shape[0]}")
    return loss


def masked_energy(x, labels):
    mask = (labels > 0).astype(x.dtype)
    shift = labels.astype(np.int64)
    out = np.zeros(x.shape[0], dtype=x.dtype)
    scale = np.ones(x.shape[0], dtype=float)
    for i in range(x.shape[0]):
        out[i] = x[i] * mask[i] * scale[i] + shift[i]
    return np.sum(out ** 2)


def sum_of_squares_any_rank(x):
    if x.ndim == 0:
        x = np.array([x])
    elif x.ndim == 2:
        x = x.ravel()
    return np.sum(x ** 2)


def weighted_by_type(x, w):
    if isinstance(x, np.ndarray):
        total = np.sum(np.sin(x) * w)
    else:
        total = math.sin(x) * w
    return total if not isinstance(w, int) else total * 2.0


def tanh_score(w, x):
    if x.shape[0] != w.shape[0]:
        raise ValueError("one weight per feature")
    return np.tanh(np.sum(w * x))


def poisson_pmf(k, mu):
    if mu == 0:
        return 1.0 if k == 0 else 0.0
    logp = k * np.log(mu) - _lgamma(k + 1.0) - mu
    return np.exp(logp)


def mc_call_value(s0, t, k, r, q, v, num_paths, seed):
    if not isinstance(num_paths, int) or not isinstance(seed, int):
        raise ValueError("num_paths and seed must be int.")
    v_sqrt_t = v * math.sqrt(t)
    st = s0 * math.exp((r - q - v * v / 2.0) * t)
    np.random.seed(seed)
    g = np.random.standard_normal(num_paths)
    payoff = 0.0
    for i in range(0, num_paths):
        s = st * math.exp(+g[i] * v_sqrt_t)
        payoff += max(s - k, 0.0)
    return payoff * np.exp(-r * t) / num_paths


# ---------------------------------------------------------------- refused: these touch a differentiated value
def gamma_of_input(x):
    return math.gamma(x) * 2.0


def draw_from_input(mu):
    return np.random.normal(mu, 1.0) * 2.0


def partitions_in_place(x):
    y = x * 2.0
    y.partition(1)
    return np.sum(y)


# ---------------------------------------------------------------- runs in Python, but numba has no SciPy
def ellipk_of_length(x):
    c = scipy.special.ellipk(1.0 / (x.shape[0] + 1.0))
    return np.sum(x ** 2) + c


def local_generator_walk(x, steps):
    """A Monte Carlo walk drawing from a generator it seeds itself, as NumPy's docs recommend."""
    rng = np.random.default_rng(12)
    order = np.arange(steps)
    rng.shuffle(order)
    kicks = rng.normal(0.0, 0.2, size=steps)
    pos = x
    for i in order:
        pos = pos + np.tanh(pos) * kicks[i] + 0.01 * rng.standard_normal()
    return pos * pos


def draw_from_local_generator_at_input(mu):
    rng = np.random.default_rng(0)
    return rng.normal(mu, 1.0) * 2.0


def given_generator_walk(x, steps, rng):
    kicks = rng.normal(0.0, 0.2, size=steps)
    pos = x
    for i in range(steps):
        pos = pos + np.tanh(pos) * kicks[i] + 0.01 * rng.standard_normal()
    return pos * pos


def walk_drawing_from(rng):
    """A walk whose kicks come from a generator read from outside the function (a closure here; a module
    global or `self.rng` reads the same way)."""
    def walk(x):
        kicks = rng.normal(0.0, 0.2, size=10)
        return np.sum(np.tanh(x * kicks)) + x * rng.random()
    return walk


class Sampler:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def noisy_loss(self, x):
        return np.sum((x - self.rng.standard_normal(x.shape[0])) ** 2)


def noisy_features(x, rng):
    return np.sin(x * rng.normal(size=x.shape[0])) ** 2

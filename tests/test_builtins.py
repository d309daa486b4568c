"""zip / enumerate / range loops, max / min / sum / any / all, comprehensions, list / tuple / dict and
tuples indexed at run time, in programs shaped like numba kernels, against finite differences."""

import numba
import numpy as np
import pytest
from numba import prange

import hostile_functions
import s2sad
from helpers import assert_close, fd_grad


# ---------------------------------------------------------------- zip, enumerate, range
def dot_zip(x, y):
    s = 0.0
    for a, b in zip(x, y):
        s += a * b
    return s


def weighted_pairs(x, y):
    s = 0.0
    for i, (a, b) in enumerate(zip(x, y)):
        s += (i + 1) * a * np.sin(b)
    for i, (a, b) in enumerate(zip(x, y), 1):
        s += a / (i + b * b)
    return s


def horner_enumerate(coeffs, t):
    s = 0.0
    for i, c in enumerate(coeffs):
        s += c * t ** i
    return s


def odd_terms(x):
    n = x.shape[0]
    s = 0.0
    for k, v in zip(range(1, 2 * n, 2), x):
        s += v ** 2 / k
    for k, v in zip(range(n, 0, -3), x):  # a negative step: the shortest still wins
        s += k * v
    return s


def polyline_length(points):
    total = 0.0
    for (x0, y0), (x1, y1) in zip(points[:-1], points[1:]):
        total += np.sqrt((x1 - x0) ** 2 + (y1 - y0) ** 2)
    return total


def pair_energy(pairs):
    e = 0.0
    for a, b in pairs:  # the rows of an (n, 2) array
        e += (a - b) ** 2 * a
    return e


def zip_as_tuple(x, y):
    s = 0.0
    for p in zip(x, y):
        s += p[0] * np.cos(p[1])
    return s


def mlp_layers(x, weights, biases):
    for W, b in zip(weights, biases):  # static lists: unrolled
        x = np.tanh(W @ x + b)
    scales = (1.0, 2.0, 0.5)
    s = 0.0
    for i, (c, v) in enumerate(zip(scales, (x[0], x[1], x[0] * x[1]))):
        s += c * v * (i + 1)
    for i, c in zip(range(3), scales):
        s += c * x[i % 2]
    return s


def backward_scan(x):
    n = len(x)
    s = 0.0
    for i in reversed(range(n)):
        s = s * 0.5 + x[i] * i
    for v in reversed(x):
        s = s * 0.9 + v
    ws = (1.0, 2.0)
    return s + sum(w * x[0] for w in reversed(ws)) + sum(list(ws)) * x[1]


RNG = np.random.default_rng(7)
X4 = np.array([0.3, -0.4, 0.5, 0.9])
Y3 = np.array([1.0, 2.0, -0.7])  # shorter than X4: zip stops at 3, as in Python
POINTS = RNG.normal(size=(5, 2))
WEIGHTS = [RNG.normal(size=(3, 2)), RNG.normal(size=(2, 3))]
BIASES = [RNG.normal(size=3), RNG.normal(size=2)]

ITERATION_CASES = [
    (dot_zip, (X4, Y3), (0, 1)),
    (weighted_pairs, (X4, Y3), (0, 1)),
    (horner_enumerate, (X4, 0.7), (0, 1)),
    (odd_terms, (X4,), 0),
    (polyline_length, (POINTS,), 0),
    (pair_energy, (POINTS,), 0),
    (zip_as_tuple, (X4, Y3), (0, 1)),
    (mlp_layers, (np.array([0.4, -0.2]), WEIGHTS, BIASES), 0),
    (backward_scan, (X4,), 0),
]


# ---------------------------------------------------------------- max, min, sum, any, all
def soft_clip(x):
    lo, hi = -0.5, 0.6
    y = max(lo, min(x[0], x[1] * 2, hi))
    return y * max(x[0], x[1], x[2] ** 2, x[3]) + min(x[2], 1.0)


def spread(x):
    return max(x) - min(x) + max([x[1], x[2] * 3]) + min((x[0], x[3]))


def sum_of_squares(x):
    n = x.shape[0]
    return sum(x[i] ** 2 for i in range(n)) + sum(np.sin(v) for v in x if v > 0) + sum(x)


def sum_constant_range(x):
    return sum(x[i] ** 2 * (i + 1) for i in range(3)) + sum([x[0], x[1] * x[2], 2.0], x[3])


def weighted_sum(x, ws):
    vs = (np.cos(x[0]), x[1], x[2] * x[3])
    return sum(w * v for w, v in zip(ws, vs))


def hinge_flags(x):
    n = len(x)
    s = 0.0
    if any(x[i] < 0 for i in range(n)):
        s = s + x[0] ** 2
    if all(v > -10.0 for v in x):
        s = s + x[1] ** 3
    if any(x > 100.0) or not all([x[0] < 5.0, x[1] < 5.0]):
        s = s + 1.0
    return s + float(any(x > 0.5)) * x[2] + float(x[3] < 0.0)  # float of a truth value: 1.0 or 0.0


def largest_term(x):
    n = len(x)
    return max(abs(x[i]) * x[i] for i in range(n)) + min(x[i] * x[i - 1] for i in range(1, n))


def double_sum(x):
    n = len(x)
    pairs = [(1.0, 2.0), (3.0, 0.5)]
    return sum(a * x[0] + b * x[i] for a, b in pairs for i in range(n)) + \
        sum(x[i] * x[j] for i in range(n) for j in range(i))


REDUCTION_CASES = [
    (soft_clip, (X4,), 0),
    (spread, (X4,), 0),
    (sum_of_squares, (X4,), 0),
    (sum_constant_range, (X4,), 0),
    (weighted_sum, (X4, (0.5, -1.0, 2.0)), 0),
    (hinge_flags, (X4,), 0),
    (largest_term, (X4,), 0),
    (double_sum, (X4,), 0),
]


# ---------------------------------------------------------------- comprehensions and containers
def doubled(x):
    ys = [x[i] * 2 for i in range(3)]  # a constant range: unrolled into a list
    return np.sum(np.array([x[i] * 2 for i in range(3)])) + ys[0] * ys[2]


def activations(x, weights):
    hs = [np.tanh(W @ x) for W in weights]
    return np.sum(hs[0] ** 2) + np.sum(np.concatenate(hs)) + np.sum(np.stack([h[:2] for h in hs]))


def features(x):
    n = len(x)
    f = np.array([np.sin(x[i]) * x[i] for i in range(n)])  # a run-time length: a loop fills an array
    g = np.mean([x[i] * x[i - 1] for i in range(1, n)])
    return np.sum(f ** 2) + np.sum([v * v for v in x]) + g


def containers(x):
    p = dict(a=x[0], b=x[1] * 2)
    t = tuple([x[2], x[3]])
    pairs = list(zip((1.0, 2.0), t))
    q = dict(dict(zip(("u", "v"), (x[0], x[3]))), w=x[1])
    return p["a"] * p["b"] + t[1] + pairs[1][0] * pairs[1][1] + len(list(range(3))) * q["v"] + q["u"] * q["w"]


def scoped_names(x):
    i = 2
    a = sum(x[i] * sum(x[j] * i for j in range(i)) for i in range(len(x)))
    return a + x[i] + sum([x[i] for i in range(2)]) * i


def squared(v):
    return v * v


class Rastrigin:
    def __init__(self, a=10):
        self.a = a

    def f(self, x):  # samidhaVerma/optimization-test's objective
        return self.a * len(x) + sum(map(lambda i: i ** 2 - self.a * np.cos(2 * np.pi * i), x))


def mapped(x, y):
    pairs = sum(map(lambda a, b: a * b ** 2, x, y))  # two iterables: zipped, the shortest wins
    listed = np.array(list(map(np.tanh, x)))  # a run-time length: a loop fills an array
    return Rastrigin().f(x) + sum(map(squared, x)) + pairs + max(map(np.sin, y)) + np.sum(listed ** 2) \
        + tuple(map(squared, (x[0], y[1])))[1]


def shadowed_iterables(x):
    a = sum(x * x for x in x)  # the first iterable is read outside: the function's `x`
    b = np.sum(np.array([x ** 3 for x in x]))
    t = (x[0], x[1])
    return a + b + sum(map(lambda x: np.sin(x), x)) + sum(t * 2.0 for t in t)


COMPREHENSION_CASES = [
    (mapped, (X4, Y3), (0, 1)),
    (shadowed_iterables, (X4,), 0),
    (doubled, (X4,), 0),
    (activations, (np.array([0.4, -0.2]), [RNG.normal(size=(3, 2)), RNG.normal(size=(2, 2))]), 0),
    (features, (X4,), 0),
    (containers, (X4,), 0),
    (scoped_names, (X4,), 0),
    (hostile_functions.list_comp, (1.5,), 0),
]


# ---------------------------------------------------------------- tuples indexed at run time
def rhs(y):
    return np.array([y[1], -np.sin(y[0])])


def rk4(y0, h):
    """A pendulum integrated by RK4 written with its Butcher tableau."""
    c = (0.0, 0.5, 0.5, 1.0)
    b = (1 / 6, 1 / 3, 1 / 3, 1 / 6)
    a = ((0.0, 0.0, 0.0), (0.5, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 0.0, 1))
    y = y0.copy()
    for step in range(3):
        ks = np.zeros((4, y.shape[0]))
        for s in range(4):
            ys = y.copy()
            for j in range(s):
                ys = ys + h * a[s][j] * ks[j]
            ks[s] = rhs(ys) * (1.0 + c[s] * h)
        y = y + h * sum(b[s] * ks[s] for s in range(4))
    return np.sum(y ** 2)


def alternating(v, A, B):
    mats = (A, B)
    scales = [1.0, 2]
    for t in range(5):
        v = np.tanh(mats[t % 2] @ v) * scales[t % 2]
    return np.sum(v)


# ---------------------------------------------------------------- prange, np.ndindex, recursion
def grid_energy(x):
    s = 0.0
    for i, j in np.ndindex(x.shape):
        s += x[i, j] ** 2 * (i + 2 * j)
    for i, j, k in np.ndindex(2, 3, x.shape[1]):
        s += x[i, k] * j
    return s + np.sum(sum(x) ** 2)  # the builtin adds the rows


def parallel_map(x):
    n = x.shape[0]
    out = np.zeros(n)
    for i in numba.prange(n):
        out[i] = np.sin(x[i]) * x[i]
    for i in prange(n):
        out[i] += x[i]
    return np.sum(out)


def power(n, x):
    return x if n == 0 else x * power(n - 1, x)


def chebyshev(n, t):
    if n == 0:
        return 1.0
    if n == 1:
        return t
    return 2 * t * chebyshev(n - 1, t) - chebyshev(n - 2, t)


def pairwise_sum(xs):
    if len(xs) == 1:
        return xs[0]
    return pairwise_sum(xs[:len(xs) // 2]) + pairwise_sum(xs[len(xs) // 2:])


def recursive(x):
    return power(4, x[0]) + chebyshev(5, x[1]) + pairwise_sum([x[0], x[1] ** 2, np.sin(x[2]), x[0] * x[2], x[1]])


Y0 = np.array([0.5, -0.3])
A2 = np.array([[0.5, 0.1], [-0.2, 0.3]])
INDEXED_CASES = [
    (rk4, (Y0, 0.1), (0, 1)),
    (alternating, (Y0, A2, A2.T * 1.5), (0, 1, 2)),
]

INDEXED_CASES += [
    (grid_energy, (RNG.normal(size=(2, 3)),), 0),
    (parallel_map, (X4,), 0),
    (recursive, (X4,), 0),
]

CASES = ITERATION_CASES + REDUCTION_CASES + COMPREHENSION_CASES + INDEXED_CASES


def _check(fn, args, argnums, backend):
    value, grads = s2sad.value_and_grad(fn, argnums, backend=backend)(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    grads = grads if isinstance(argnums, tuple) else (grads,)
    for n, g in zip(nums, grads):
        assert_close(g, fd_grad(fn, args, n))


@pytest.mark.parametrize("case", CASES, ids=[c[0].__name__ for c in CASES])
def test_gradient_matches_finite_differences(case, backend):
    _check(*case, backend)


def _direction(x):
    return np.cos(np.arange(np.size(x)) + 1.0).reshape(np.shape(x)) if np.ndim(x) else 0.6


@pytest.mark.parametrize("case", CASES, ids=[c[0].__name__ for c in CASES])
def test_forward_mode_matches_finite_differences(case, backend):
    fn, args, argnums = case
    n = argnums[0] if isinstance(argnums, tuple) else argnums
    dx, eps = _direction(args[n]), 1e-6
    tangents = [s2sad.tree.tree_map(lambda a: np.zeros_like(np.asarray(a, dtype=float)), a) for a in args]
    tangents[n] = dx

    def along(t):
        return fn(*args[:n], args[n] + t * dx, *args[n + 1:])

    out, tangent = s2sad.jvp(fn, args, tuple(tangents), backend=backend)
    assert_close(out, fn(*args), rtol=1e-12)
    assert_close(tangent, (along(eps) - along(-eps)) / (2 * eps))


def test_recursion_is_unrolled():
    code = [line for line in s2sad.source(recursive).splitlines() if not line.strip().startswith("#")]
    assert not any(name + "(" in line for line in code for name in ("power", "chebyshev", "pairwise_sum"))


# ---------------------------------------------------------------- what stays unsupported says so
def zip_static_and_array(x):
    s = 0.0
    for w, v in zip((1.0, 2.0), x):
        s += w * v
    return s


def runtime_list(x):
    ys = [x[i] for i in range(len(x))]  # read only an item at a time, it would be an array
    zs = ys + ys
    return zs[0]


def max_with_key(x):
    return max(x[0], x[1], key=abs)


def ragged_table(x):
    a = ((1.0,), (0.5, 0.5))
    s = 0.0
    for i in range(2):
        s += a[i][0] * x[i]
    return s


def list_of_array(x):
    return tuple(x)[0]


def loop_over_map(x):
    s = 0.0
    for v in map(np.sin, x):
        s += v
    return s


def recursion_at_run_time(x):
    return power(len(x), x[0])


def ndindex_of_an_argument_shape(x):
    s = 0.0
    for idx in np.ndindex(x.shape):  # one loop variable: the shape's rank is the argument's
        s += x[idx] ** 2
    return s


def test_ndindex_of_an_argument_shape_takes_its_rank_from_the_argument(backend):
    for x in (X4, RNG.normal(size=(2, 3))):
        _check(ndindex_of_an_argument_shape, (x,), 0, backend)


@pytest.mark.parametrize("fn, words", [
    (zip_static_and_array, "zip() of a tuple/list with an array"),
    (runtime_list, "length is only known at run time"),
    (max_with_key, "max() with `key=`"),
    (ragged_table, "rows of equal length"),
    (list_of_array, "tuple() of an array"),
    (recursion_at_run_time, "recursive call to `power` with arguments known only at run time"),
    (loop_over_map, "or write the comprehension: [f(v) for v in x]"),
])
def test_unsupported_forms_are_located(fn, words):
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(fn, backend="python")(X4)
    text = str(info.value)
    assert words in text and __file__ in text and "hint:" in text


@pytest.mark.parametrize("fn, args", [
    (weighted_pairs, (X4, Y3)), (sum_of_squares, (X4,)), (features, (X4,)), (largest_term, (X4,)),
    (grid_energy, (RNG.normal(size=(2, 3)),)), (recursive, (X4,)), (backward_scan, (X4,)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_second_order_through_the_generated_loops(fn, args):
    """The loops these constructs become are s2sad input again: forward over reverse vs differences."""
    s2sad.check_grads(fn, args, order=2, backend="python")

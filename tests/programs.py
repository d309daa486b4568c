"""A corpus of programs with loops, branches and in-place writes, differentiated by the tests.

Each entry of PROGRAMS is (function, example arguments, argnums). Functions live in this
file because s2sad reads their source.
"""

import math

import numpy as np


def loop_bound_from_input(x, n):
    s = 0.0
    for i in range(n):
        s = s + x * (i + 1.0)
    return s * x


def nested_loops(a):
    total = 0.0
    for i in range(a.shape[0]):
        for j in range(i, a.shape[0]):
            total += a[i] * a[j] * (j - i + 1.0)
    return total


def square_many(x):
    for _ in range(1000):
        x = x * x
        x = x / (1.0 + x)
    return x


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-13:
        x = 0.5 * (x + a / x)
    return x


def while_counter(x):
    k = 0
    y = x
    while k < 5:
        y = np.sin(y) + x
        k += 1
    return y


def break_loop(x):
    s = 0.0
    for i in range(100):
        s += np.exp(-x * i)
        if s > 2.0:
            break
    return s * x


def continue_loop(v):
    s = 0.0
    for i in range(v.shape[0]):
        if v[i] < 0.0:
            continue
        s += v[i] ** 2
    return s


def branches_in_loop(v):
    s = 0.0
    for i in range(v.shape[0]):
        if v[i] > 0.5:
            s += np.sin(v[i])
        elif v[i] > 0.0:
            s += v[i] * v[i]
        else:
            s -= 2.0 * v[i]
    return s


def piecewise(x):
    if x < 0.0:
        return x * x
    elif x < 1.0:
        return np.sin(x)
    y = np.log(x + 1.0)
    return y * x


def early_return_in_loop(x):
    y = x
    for i in range(10):
        y = y * 1.5
        if y > 10.0:
            return y + i
    return -y


def helper_square(u):
    return u * u


def helper_poly(u, c):
    t = helper_square(u)
    return c * t + u


def calls_helpers(x, y):
    return helper_poly(x, 3.0) * helper_square(y)


def recurrence(x, w):
    n = x.shape[0]
    h = np.zeros(n)
    h[0] = x[0]
    for t in range(1, n):
        h[t] = np.tanh(w * h[t - 1] + x[t])
    return np.sum(h * h)


def stencil(u, steps):
    v = u * 1.0
    n = v.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            v[i] = 0.25 * v[i - 1] + 0.5 * v[i] * v[i] + 0.25 * v[i + 1]
    return np.sum(v * v)


def overwrite_element(x):
    y = np.zeros(3)
    y[0] = x[0] * x[1]
    y[0] = np.sin(y[0]) * x[2]
    y[1] = y[0] * y[0]
    y[0] = y[1] + x[0]
    return np.sum(y * y)


def accumulate_element(x):
    y = np.zeros(2)
    y[0] += x[0] * x[1]
    y[0] += x[1] * x[2]
    y[1] += y[0] * x[0]
    return y[0] * y[1]


def slices(a):
    m = np.zeros((3, 4))
    for i in range(3):
        m[i, :] = a[i] * np.arange(4.0)
    m[1, :] += np.sin(m[0, :])
    return np.sum(m[:, 1:] ** 2)


def conditional_expression(x, y):
    z = x * y if x > y else x + y
    return z * z


def tuple_unpack(x, y):
    a, b = x * 2.0, y * 3.0
    a, b = b, a
    return a * np.exp(b)


def loop_over_array(rows):
    s = 0.0
    for r in rows:
        s += np.sum(np.tanh(r)) ** 2
    return s


def enumerate_loop(v):
    s = 0.0
    for i, x in enumerate(v):
        s += (i + 1.0) * x ** 3
    return s


def shapes_and_len(x):
    n = len(x)
    m = x.size
    return np.sum(x) * n / m + x.shape[0]


def math_calls(x):
    return math.exp(math.sin(x)) + math.sqrt(x * x + 1.0) + math.log(x) * math.tanh(x)


def axis_reductions(m):
    return np.sum(np.mean(m, axis=0) ** 2) + np.sum(np.sum(m * m, axis=1))


def matrix_vector(m, v):
    return np.sum(np.tanh(m @ v)) + np.dot(v, v)


def reassign_param(x):
    x = x * 2.0
    x = np.sin(x) + x
    return x * x


def scalar_loop_carried(x):
    a = x
    b = 1.0
    for i in range(20):
        a, b = b, a * 0.5 + np.cos(b)
    return a + b


def while_with_break(x):
    y = x
    i = 0
    while True:
        y = y * 0.9 + 0.1 * np.sin(y)
        i += 1
        if i >= 7:
            break
    return y


def and_or_conditions(x, y):
    s = 0.0
    if x > 0.0 and y > 0.0:
        s = x * y
    if x < 0.0 or y > 1.0:
        s += y * y
    return s + x


def copy_then_write(x):
    x = x.copy()
    x[0] = x[0] * x[1]
    x[1] += np.sin(x[0])
    return np.sum(x * x)


def one_line_body(x): return np.tanh(x) * x  # noqa: E704 - a body on the def's line


def one_line_suites(x, c):
    if c > 0: y = x * x  # noqa: E701 - every block on its header's line
    else: y = 3.0 * x  # noqa: E701
    for i in range(3): y = y + np.sin(x * i)  # noqa: E701
    while y < 10.0: y = y * 2.0  # noqa: E701
    if y > 15.0: return y * y  # noqa: E701
    return y


def loop_overwrites_before_a_read(x, n):
    """`y` is read backwards only after each inner loop (by sin) and before it (by the square):
    the inner loop pushes it once, after itself, and `y = x[i]` not at all."""
    s = 0.0
    for i in range(x.shape[0]):
        y = x[i]
        s = s + y * y
        y = x[i] * 0.5
        for k in range(n):  # n = 0 runs no step: the value pushed after it is x[i] * 0.5
            y = y + 0.25 * s
        s = s + np.sin(y)
    return s


def nested_overwriting_loops(x, w):
    """The outer loop of two overwrites `z` with no backwards read inside: it is pushed once."""
    t = 0.0
    for i in range(3):
        z = x * w
        for j in range(2):
            for k in range(2):
                z = z - 0.1 * w
            z = z * 0.9
        t = t + np.cos(z) * x
    return t


def overwritten_in_a_branch(x, c):
    """`y = x * 3.0` is overwritten only under a branch: it keeps its push."""
    s = 0.0
    for i in range(3):
        y = x * 3.0
        if c > i:
            y = x + 1.0
        s = s + np.sin(y) * y
    return s


def libm_chain(x):
    """Popped sin, exp, log and tanh values whose operands change afterwards, read by other rules."""
    total = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = np.sin(a)
        c = np.cos(a)
        e = np.exp(0.3 * a)
        a = a * 2.0
        total = total + s * c + e * np.log(1.5 + s) + np.tanh(a) * c
    return total


R = np.random.default_rng(42)
VEC = R.normal(size=6)
PROGRAMS = [
    (loop_bound_from_input, (0.7, 5), 0),
    (nested_loops, (R.normal(size=5),), 0),
    (square_many, (0.9,), 0),
    (newton_sqrt, (2.0,), 0),
    (while_counter, (0.3,), 0),
    (break_loop, (0.3,), 0),
    (continue_loop, (VEC,), 0),
    (branches_in_loop, (R.uniform(-1, 1.5, size=8),), 0),
    (piecewise, (-0.7,), 0),
    (piecewise, (0.4,), 0),
    (piecewise, (2.5,), 0),
    (early_return_in_loop, (0.5,), 0),
    (early_return_in_loop, (0.001,), 0),
    (calls_helpers, (0.7, 1.3), (0, 1)),
    (recurrence, (R.normal(size=7), 0.8), (0, 1)),
    (stencil, (R.uniform(0, 0.5, size=6), 3), 0),
    (overwrite_element, (R.normal(size=3),), 0),
    (accumulate_element, (R.normal(size=3),), 0),
    (slices, (R.normal(size=3),), 0),
    (conditional_expression, (2.0, 1.0), (0, 1)),
    (conditional_expression, (1.0, 2.0), (0, 1)),
    (tuple_unpack, (0.3, 0.2), (0, 1)),
    (loop_over_array, (R.normal(size=(4, 3)),), 0),
    (enumerate_loop, (VEC,), 0),
    (shapes_and_len, (VEC,), 0),
    (math_calls, (1.3,), 0),
    (axis_reductions, (R.normal(size=(3, 4)),), 0),
    (matrix_vector, (R.normal(size=(3, 4)), R.normal(size=4)), (0, 1)),
    (reassign_param, (0.4,), 0),
    (scalar_loop_carried, (0.3,), 0),
    (while_with_break, (0.8,), 0),
    (and_or_conditions, (0.5, 2.0), (0, 1)),
    (and_or_conditions, (-0.5, 0.5), (0, 1)),
    (copy_then_write, (VEC,), 0),
    (one_line_body, (0.7,), 0),
    (one_line_suites, (1.2, 1.0), 0),
    (one_line_suites, (0.4, -1.0), 0),
    (loop_overwrites_before_a_read, (VEC, 3), 0),
    (loop_overwrites_before_a_read, (VEC, 0), 0),
    (nested_overwriting_loops, (0.6, 1.3), (0, 1)),
    (overwritten_in_a_branch, (0.6, 1.5), 0),
    (libm_chain, (VEC,), 0),
]

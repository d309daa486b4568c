"""One function per construct s2sad refuses (test_hostile.py finds each caret by its snippet)."""

import math

import numpy as np


class Model:
    def __init__(self):
        self.w = 2.0

    def forward(self, x):
        return x * self.w

    def __call__(self, x):
        return x * 3.0


MODEL = Model()
TABLE = np.ones(3)


def class_inside(x):
    class Box:
        pass
    return x * 2.0


def uses_with(x):
    with open("weights.txt") as fh:
        y = x * 2.0
    return y


def generator(x):
    yield x * 2.0


def generator_from(x):
    yield from (x, x)


async def coroutine(x):
    return x * 2.0


def uses_global(x):
    global TABLE
    TABLE = x
    return x * 2.0


def make_counter():
    count = 0.0

    def uses_nonlocal(x):
        nonlocal count
        count = count + 1.0
        return x * count
    return uses_nonlocal


uses_nonlocal = make_counter()


def attribute_write(x):
    y = x * 2.0
    y.real = x
    return y


def deletes(x):
    y = [x, 2.0]
    del y[0]
    return x


def calls_method(x):
    return MODEL.forward(x)


def string_of_active(x):
    label = str(x)
    return x * 2.0


def fstring(x):
    label = f"value {x}"
    return x * 2.0


def positional_only(x, /, y=2.0):
    return x * y


def list_comp(x):
    ys = [x * i for i in range(3)]
    return ys[0]


def generator_expression(x):
    return np.sum(x * i for i in range(3))


def dict_comp(x):
    d = {i: x for i in range(3)}
    return d[0]


def set_literal(x):
    s = {x, 2.0}
    return x


def walrus(x):
    if (y := x * 2.0) > 1.0:
        return y
    return x


def walrus_short_circuit(x):
    count = 0.0
    if x > 0.0 and (count := count + x * x) > 0.5:
        return count * x
    return count + x


def walrus_counter(x):
    steps = 0
    while (steps := steps + 1) < 4:
        x = x * x * 0.5 + 0.1
    return x


SCALE = 3.0


def declares_global_it_reads(x):
    global SCALE
    return x * SCALE


def declares_nonlocal_it_reads(x, k):
    def term(t):
        nonlocal k
        return t * k
    return term(x) + k


def piecewise_of_functions(x):
    return np.sum(np.piecewise(x, [x < 0, x >= 0], [lambda t: t ** 2, lambda t: 3 * t]))


def returns_a_class(x):
    if x > 10.0:
        return RuntimeError
    return x * 2.0


def matches(x):
    match x:
        case 1.0:
            return x
    return x * 2.0


def asserts(x):
    assert x > 0.0
    return x * 2.0


def raises(x):
    if x < 0.0:
        raise ValueError("negative")
    return x * 2.0


def in_test(x):
    if x in (1.0, 2.0):
        return 0.0
    return x * 2.0


def imports(x):
    import s2sad_no_such_module as m
    return m.sin(x)


def recursion(x):
    if x < 1.0:
        return x
    return recursion(x / 2.0)


def evals(x):
    return eval("x * 2.0")


def execs(x):
    exec("y = x")
    return x


def starred_assign(x):
    a, *rest = np.ones(3) * x  # an array: its length is known only at run time
    return a


def global_write(x):
    TABLE[0] = x
    return np.sum(TABLE)


def argument_write(x):
    x[0] += 1.0
    return np.sum(x)


def rebound_view_write(x):
    x = x[1:]  # a view of the argument under the argument's name (a variable of its own inside s2sad)
    x[0] = 2.0
    return np.sum(x)


def view_write(x):
    y = x[:]
    y[0] = 5.0
    return np.sum(x * y)


def contiguous_copy_write(x):
    y = np.ascontiguousarray(x)  # x itself when x is already contiguous: the write would reach the argument
    y[0] = 5.0
    return np.sum(x * y)


def complex_literal(x):
    return x * 1j


def isinstance_branch(x):
    if isinstance(x, float):
        return x * 2.0
    return x


def bitwise(x):
    return x & 1


def real_part(x):
    return x.real


def list_append(x):
    acc = []
    while x > 1.0:  # a list growing at run time (in straight-line code it stays a static list)
        acc.append(x)
        x = x / 2.0
    return x


def returns_none(x):
    return None




def prints_value(x):
    print("x =", x)
    return x


# ---- not hostile syntax: targets of the argument checks and the NaN/inf tests


def smooth(x):
    return np.sum(np.sin(x) * x)


def smooth_vector(x):
    return np.sin(x) * 2.0


def sqrt_sum(x):
    return np.sum(np.sqrt(x))


def log_sum(x):
    return np.sum(np.log(x))


def scalar_ratio(x, y):
    return np.sqrt(x) / y

"""The hostile-input catalogue: every unsupported construct gives a located error with a way out;
non-float differentiated arguments give a TypeError naming the argument; NaN/inf propagate like NumPy."""

import inspect

import numpy as np
import pytest

import hostile_functions as H
import s2sad

ONES = np.ones(3)

# (function, what the message says, the source text the caret points at, what the hint says, arguments)
CASES = [
    (H.class_inside, "`ClassDef` statements are not supported", "class Box", "module level", (1.5,)),
    (H.uses_with, "`With` statements are not supported", "with open", "as arguments", (1.5,)),
    (H.generator, "generator functions (`yield`)", "yield x", "np.zeros", (1.5,)),
    (H.generator_from, "generator functions (`yield`)", "yield from", "np.zeros", (1.5,)),
    (H.coroutine, "`async def` functions cannot be differentiated", "async def", "plain `def`", (1.5,)),
    (H.uses_global, "`Global` is not supported", "global TABLE", "return the new value", (1.5,)),
    (H.uses_nonlocal, "`Nonlocal` is not supported", "nonlocal count", "return the new value", (1.5,)),
    (H.attribute_write, "only attributes of objects can be assigned", "y.real = x", "return the new value", (1.5,)),
    (H.deletes, "`Del` is not supported", "del y", "rebind", (1.5,)),
    (H.string_of_active, "the builtin `str` has no derivative rule", "str(x)", "strings are not differentiable",
     (1.5,)),
    (H.fstring, "`FormattedString` expressions", 'f"value', "strings are not differentiable", (1.5,)),
    (H.positional_only, "positional-only parameters", "x, /", "remove the `/`", (1.5,)),
    (H.generator_expression, "NumPy functions refuse generator expressions", "x * i for", "sum(", (1.5,)),
    (H.dict_comp, "`DictComp` expressions", "{i: x", "dict literally", (1.5,)),
    (H.set_literal, "`Set` expressions", "{x, 2.0}", "tuple", (1.5,)),
    (H.matches, "`Match` statements", "match x", "if/elif", (1.5,)),
    (H.in_test, "comparison `in` is supported of a number and a tuple or list of numbers", "x in (",
     "outside the function", (ONES,)),
    (H.imports, "this import fails when the code is generated", "import s2sad_no_such_module", "install the module",
     (1.5,)),
    (H.recursion, "recursive call to `recursion`", "recursion(x / 2.0)", "loop", (1.5,)),
    (H.evals, "the builtin `eval` has no derivative rule", "eval(", "expression itself", (1.5,)),
    (H.execs, "expression statement has no effect", "exec(", "statements themselves", (1.5,)),
    (H.starred_assign, "starred assignment", "a, *rest", "unpack every item", (1.5,)),
    (H.global_write, "in-place writes need a local array", "TABLE[0] = x", "inside the function", (1.5,)),
    (H.view_write, "a view of one", "y[0] = 5.0", "y = y.copy()", (ONES,)),
    (H.contiguous_copy_write, "a view of one", "y[0] = 5.0", "y = y.copy()", (ONES,)),
    (H.complex_literal, "`Imaginary` expressions", "1j", "real and imaginary parts", (1.5,)),
    (H.bitwise, "operator `&` is not supported", "x & 1", "no derivative", (1.5,)),
    (H.real_part, "attribute `.real` has no derivative rule", "x.real", "s2sad reads .shape", (1.5,)),
    (H.list_append, "a list cannot grow", "acc.append(x)", "np.zeros(n)", (1.5,)),
    (H.returns_none, "must return numbers or arrays (this returns None)", "return None", "return the value",
     (1.5,)),
    (H.returns_a_class, "must return numbers or arrays (this returns 'RuntimeError', an object)",
     "return RuntimeError", "raise an error", (1.5,)),
    (H.piecewise_of_functions, "functions passed to a NumPy function", "[lambda t", "np.where", (ONES,)),
]


def expected_place(fn, snippet: str) -> tuple[int, int, str]:
    """(line, 1-based column, source line) of the first line of `fn` holding `snippet`."""
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if snippet in text)
    text = lines[offset].rstrip("\n")
    return first + offset, text.index(snippet) + 1, text


@pytest.mark.parametrize("fn, message, snippet, hint, args", CASES, ids=[c[0].__name__ for c in CASES])
def test_construct_is_refused_with_a_located_error(fn, message, snippet, hint, args):
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(fn, backend="python")(*args)
    line, col, text = expected_place(fn, snippet)
    header, shown, caret, *rest = str(info.value).splitlines()
    assert header.startswith(f"{H.__file__}:{line}:{col}: "), header
    assert message in header
    assert shown == "    " + text
    assert caret == "    " + " " * (col - 1) + "^"
    assert rest and rest[0].startswith("  hint: ") and hint in rest[0], rest


def test_catalogue_covers_enough_constructs():
    assert len({c[0] for c in CASES}) == len(CASES) >= 25


def test_keyword_only_arguments_are_supported():
    """Not hostile: checked against the closed form d/dx (x * scale) = scale."""
    def scaled(x, *, scale=2.0):
        return x * scale

    assert s2sad.grad(scaled, backend="python")(1.5, scale=3.0) == 3.0
    assert s2sad.grad(scaled, argnums=1, backend="python")(1.5, scale=3.0) == 1.5


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_assignment_expressions_assign_where_python_evaluates_them(backend):
    """Not hostile: `:=` binds its name then gives its value, in an `if` test, behind a short-circuit `and`
    (only where the left side holds) and in a `while` test (once per test). Closed forms."""
    g = s2sad.grad(H.walrus, backend=backend)
    assert g(1.5) == 2.0 and g(0.25) == 1.0
    short = s2sad.grad(H.walrus_short_circuit, backend=backend)
    assert short(-2.0) == 1.0  # x > 0 fails: count stays 0.0
    assert short(1.0) == 3.0  # count = x ** 2 > 0.5: x ** 3
    assert short(0.5) == 2.0  # count = x ** 2 <= 0.5: x ** 2 + x
    x, grad = 0.7, 1.0
    for _ in range(3):  # three steps of x -> x * x / 2 + 0.1: the chain rule by hand
        grad, x = grad * x, x * x * 0.5 + 0.1
    assert abs(s2sad.grad(H.walrus_counter, backend=backend)(0.7) - grad) < 1e-12


def test_global_and_nonlocal_declarations_of_names_only_read_change_nothing():
    """Not hostile: `global SCALE` / `nonlocal k` where the function never assigns the name read it as
    Python does (assigning it stays refused, above). Closed forms."""
    assert s2sad.grad(H.declares_global_it_reads, backend="python")(1.5) == H.SCALE
    g = s2sad.grad(H.declares_nonlocal_it_reads, argnums=(0, 1), backend="python")
    assert g(1.5, 4.0) == (4.0, 2.5)


# ---------------------------------------------------------------- differentiated arguments that are not floats
def _stacked(x):
    return np.stack([x, x]) if np.ndim(x) else np.array([x, x])


PATHS = {
    "grad": lambda x: s2sad.grad(H.smooth, backend="python")(x),
    "value_and_grad": lambda x: s2sad.value_and_grad(H.smooth, backend="python")(x),
    "jvp": lambda x: s2sad.jvp(H.smooth, (x,), (np.ones(np.shape(x)),), backend="python"),
    "vjp": lambda x: s2sad.vjp(H.smooth_vector, x, backend="python"),
    "jacfwd": lambda x: s2sad.jacfwd(H.smooth_vector, backend="python")(x),
    "jacrev": lambda x: s2sad.jacrev(H.smooth_vector, backend="python")(x),
    "hessian": lambda x: s2sad.hessian(H.smooth, backend="python")(x),
    "vmap(grad)": lambda x: s2sad.vmap(s2sad.grad(H.smooth, backend="python"), backend="python")(_stacked(x)),
}
BAD = {
    "int array": (np.arange(3), "dtype int64"),
    "bool array": (np.array([True, False, True]), "dtype bool"),
    "complex array": (np.ones(3) + 1j, "dtype complex128"),
    "object array": (np.array([1.0, 2.0, 3.0], dtype=object), "dtype object"),
    "int": (3, "int 3"),
    "complex": (1.0 + 2.0j, "complex"),
}


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("path", PATHS)
def test_non_float_argument_is_refused_by_name(path, kind):
    value, described = BAD[kind]
    if path == "jvp" and kind in ("int array", "bool array", "int"):  # documented: int/bool primals are constants
        expected = "at least one float primal"
    else:
        fname = "smooth_vector" if path in ("vjp", "jacfwd", "jacrev") else "smooth"
        expected = f"argument 0 (`x`) of {fname} is"
        described = "dtype int64" if path == "vmap(grad)" and kind == "int" else described
    with pytest.raises(TypeError) as info:
        PATHS[path](value)
    assert expected in str(info.value)
    if "argument 0" in expected:
        assert described in str(info.value) and ("float" in str(info.value))


def test_jvp_keeps_integer_primals_constant():
    def power(x, n):
        return x ** n

    out, tangent = s2sad.jvp(power, (2.0, 3), (1.0, 0), backend="python")
    assert out == 8.0 and tangent == 12.0  # d/dx x**3 = 3 x**2


# ---------------------------------------------------------------- NaN and inf propagate like NumPy
X_SPECIAL = np.array([0.0, 1.0, np.nan, np.inf, -1.0])


def _numpy(expr):
    with np.errstate(all="ignore"):
        return expr(X_SPECIAL)


@pytest.mark.parametrize("fn, derivative", [(H.sqrt_sum, lambda x: 0.5 / np.sqrt(x)), (H.log_sum, lambda x: 1.0 / x)],
                         ids=["sqrt", "log"])
def test_nan_and_inf_propagate_through_grad(fn, derivative, backend):
    with np.errstate(all="ignore"):
        g = s2sad.grad(fn, backend=backend)(X_SPECIAL)
    np.testing.assert_array_equal(g, _numpy(derivative))  # inf at 0, nan at nan, 0 at inf, as NumPy's math


def test_nan_and_inf_propagate_through_jvp(backend):
    tangent = np.array([0.0, 1.0, 0.0, 0.0, 0.0])  # only the finite entry moves: the others still poison the sum
    with np.errstate(all="ignore"):
        value, dvalue = s2sad.jvp(H.sqrt_sum, (X_SPECIAL,), (tangent,), backend=backend)
    expected = _numpy(lambda x: np.sum(0.5 / np.sqrt(x) * tangent))
    assert np.isnan(value) and np.isnan(dvalue) and np.isnan(expected)
    _, finite = s2sad.jvp(H.sqrt_sum, (np.array([4.0, np.inf]),), (np.array([1.0, 0.0]),), backend=backend)
    assert finite == 0.25  # 0.5 / sqrt(4); the inf entry contributes 0 * 0 = 0


def test_scalar_division_by_zero_is_inf_like_numpy():
    # numba's default error model raises ZeroDivisionError for scalars; s2sad compiles with NumPy's.
    # (backend="python" runs plain Python floats: ZeroDivisionError, exactly as the user's own function.)
    backend = "numba"
    with np.errstate(all="ignore"):
        dx, dy = s2sad.grad(H.scalar_ratio, argnums=(0, 1), backend=backend)(0.0, 0.0)
        expected_dx = np.float64(0.5) / np.sqrt(np.float64(0.0)) / np.float64(0.0)
    assert np.isnan(dy) or np.isinf(dy)
    assert dx == expected_dx  # inf, as NumPy computes it
    assert s2sad.grad(H.scalar_ratio, argnums=1, backend=backend)(4.0, 0.0) == -np.inf  # -sqrt(4) / 0**2

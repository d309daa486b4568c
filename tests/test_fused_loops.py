"""Elementwise expressions as loops (codegen/lower.py, runtime/fused.py): the rewritten text, and
the loops against NumPy on every kind of operand the planner distinguishes."""

import ast

import numba
import numpy as np
import pytest

import s2sad
from s2sad.codegen.arithmetic import is_arithmetic
from s2sad.codegen.compiled import compiled_text
from s2sad.codegen.lower import elementwise_loops, rank_bounds
from s2sad.runtime.core import unbroadcast
from s2sad.runtime.fused import (MAX_OPERANDS, ewise, ewise_into, ewise_into_finish, ewise_into_plan,
                                 ewise_plan, ewise_sum, ewise_sum_plan)

pytestmark = pytest.mark.slow

MODULE = '''"""doc"""
import math
import numpy as np
from s2sad.runtime import (unbroadcast, sum_reduce)


def f_grad(x, b, c):
    a = expand_dims_any(x[:, :], 0)
    t = a * b + c
    u = sum_reduce(np.exp(a - b), axis=1)
    a_bar = zeros_like_adj(a)
    a_bar += unbroadcast(t * 2.0, a_bar)
    a_bar -= unbroadcast(u, a_bar)
    for i in range(3):
        s = a * i
    v = a
    return a_bar, t * c
'''


# ---------------------------------------------------------------- the rewritten text

def test_rewrites_top_level_expressions_line_for_line():
    out = elementwise_loops(MODULE)
    lines, before = out.split("\n"), MODULE.split("\n")
    assert len(lines) == len(before)
    assert lines[2] == "import numpy as np; from s2sad.runtime.fused import " \
                       "ewise, ewise_plan, ewise_into, ewise_into_plan, ewise_into_finish, ewise_sum, ewise_sum_plan"
    assert "    t = ewise('_0 * _1 + _2', ewise_plan(a, b, c), a, b, c)" in lines
    # exp stays outside the loop (codegen.vmath's kernel vectorizes), its argument goes in
    assert "    u = sum_reduce(np.exp(ewise('_0 - _1', ewise_plan(a, b), a, b)), axis=1)" in lines
    assert "    a_bar = ewise_into_finish(a_bar, ewise_into('_0 * 2.0', ewise_into_plan(a_bar, t), t))" in lines
    assert "    a_bar = ewise_into_finish(a_bar, ewise_into('-_0', ewise_into_plan(a_bar, u), u))" in lines
    assert "    return (a_bar, ewise('_0 * _1', ewise_plan(t, c), t, c))" in lines
    assert "        s = a * i" in lines  # inside a loop: as written
    assert "    v = a" in lines  # nothing to compute
    assert "    a = expand_dims_any(x[:, :], 0)" in lines
    ast.parse(out)


def _module(*body: str, params: str = "x, y") -> str:
    return "import numpy as np\n\n\ndef f(" + params + "):\n" + "".join(f"    {line}\n" for line in body)


def test_leaves_modules_without_new_axes_or_arithmetic_alone():
    plain = _module("z = x * y + 1.0", "return z")  # no broadcasting along a new axis: numba's loops do
    assert elementwise_loops(plain) == plain
    no_arithmetic = _module("x = expand_dims_any(x[:, :], 0)", "b = np.sum(x)", "return b")
    assert elementwise_loops(no_arithmetic) == no_arithmetic


def test_leaves_expressions_over_fewer_than_three_axes_alone():
    outer = _module("v = expand_dims_any(x[:], 1)", "w = expand_dims_any(y[:], 0)", "m = v * w", "return m")
    assert elementwise_loops(outer) == outer  # `x[:, None] * y[None, :]`: 2-d, numba's loops do
    stacked = _module("s = expand_dims_any(x[0], 0)", "z = s * 2.0", "return z")  # np.stack of scalars
    assert elementwise_loops(stacked) == stacked
    mixed = _module("a = expand_dims_any(x[:, :], 1)", "p = y * 2.0", "q = a * p", "return q")
    lines = elementwise_loops(mixed).split("\n")
    assert "    p = y * 2.0" in lines and "    q = ewise('_0 * _1', ewise_plan(a, p), a, p)" in lines


def test_every_spelling_of_a_fused_ufunc_is_arithmetic():
    # np.abs(x) prints as np.absolute, abs(x) as np.abs: both fuse
    assert is_arithmetic(ast.parse("np.absolute(a) + np.abs(b) * np.exp(c)", mode="eval").body)
    assert not is_arithmetic(ast.parse("np.sign(a) + b", mode="eval").body)


def test_adds_into_two_dimensional_arrays_in_one_loop():
    """`x += unbroadcast(E, x)` builds E, then adds it: one loop from 2-d on (the expression alone
    stays numba's at 2-d)."""
    module = _module("v = expand_dims_any(x[:], 1)", "g = v * y", "s = x[:, :]", "s_bar = zeros_like_adj(s)",
                     "s_bar -= unbroadcast(g * y, s_bar)", "return s_bar")
    lines = elementwise_loops(module).split("\n")
    assert "    g = v * y" in lines
    assert "    s_bar = ewise_into_finish(s_bar, ewise_into('-(_0 * _1)', ewise_into_plan(s_bar, g, y), g, y))" in lines
    one_d = _module("v = expand_dims_any(x, 1)", "s = x[:]", "s_bar = zeros_like_adj(s)",
                    "s_bar += unbroadcast(s * 2.0, s_bar)", "return s_bar")
    assert elementwise_loops(one_d) == one_d


def test_rank_bounds_read_from_the_text():
    fn = ast.parse(_module("a = x[:, :]", "b = expand_dims_any(a, (0, 2))", "c = np.exp(b) * y",
                           "d = unbroadcast(c, y)", "e = einsum_op('kij,nkj->nki', c, b)", "f = sum_reduce(b, axis=1)",
                           "g = x[0]", "h = np.sum(b)", "return d")).body[1]
    assert rank_bounds(fn) == {"a": 2, "b": 4, "c": 4, "d": 0, "e": 3, "f": 0, "g": 0, "h": 0}


def test_names_each_operand_once_and_keeps_constants():
    out = elementwise_loops(_module("x = expand_dims_any(x[:, :], 0)", "z = x * x + 3 * y - x", "return z"))
    assert "    z = ewise('_0 * _0 + 3 * _1 - _0', ewise_plan(x, y), x, y)" in out.split("\n")


def test_summing_down_an_expression_is_one_pass():
    out = elementwise_loops(_module("a = expand_dims_any(x[:, :], 0)", "g = reshape_like(unbroadcast(a * y, a), x)",
                                    "h = unbroadcast(a, y)", "return g"))
    lines = out.split("\n")
    assert "    g = reshape_like(ewise_sum('_0 * _1', ewise_sum_plan(a, a, y), a, a, y), x)" in lines
    assert "    h = unbroadcast(a, y)" in lines  # nothing to compute: unbroadcast sums it as it is


def test_too_many_operands_stay_as_written():
    names = [f"v{i}" for i in range(MAX_OPERANDS + 1)]
    source = _module("v0 = expand_dims_any(v0[:, :], 0)", f"z = {' + '.join(names)}", "return z", params=", ".join(names))
    first = ", ".join(names[:-1])  # the largest part that fits is a loop; the last name is added after
    assert f"ewise_plan({first}), {first}) + {names[-1]}" in elementwise_loops(source)


def test_compiled_text_of_a_real_gradient_keeps_its_lines():
    def loss(a, b):
        return np.sum((a[:, None, :] - b[None, :, :]) ** 2 * 0.5)

    source = s2sad.source(loss, argnums=(0, 1))
    assert len(compiled_text(source).split("\n")) == len(source.split("\n"))
    assert "ewise(" in compiled_text(source) and "ewise(" not in source


# ---------------------------------------------------------------- the loops against NumPy

@numba.njit(error_model="numpy")
def _affine(a, b, c):
    return ewise("_0 * _1 + np.exp(_2)", ewise_plan(a, b, c), a, b, c)


@numba.njit(error_model="numpy")
def _affine_views(a, b, c):
    return _affine(a[::-1], b.T, c)  # a reversed view and a transposed one: strides of any sign


@numba.njit(error_model="numpy")
def _add_into(target, g, w):
    return ewise_into_finish(target, ewise_into("-(_0 * _1)", ewise_into_plan(target, g, w), g, w))


def _numpy_add_into(target, g, w):
    target -= unbroadcast(g * w, target)
    return target


SHAPES = [
    ((1000, 5, 2), (1, 5, 2)),  # GMM's broadcast of the parameters over points
    ((1000, 5, 2), (1000, 5, 1)),  # a short last axis broadcast: walked outside
    ((1000, 5), (1000, 1)),
    ((3, 1, 4), (5, 1)),  # both sides broadcast
    ((4, 3), (3,)),
    ((2, 3, 4, 5), (3, 1, 5)),  # more axes than the merge leaves
    ((0, 3), (3,)),  # empty
    ((1, 1), (1, 1)),
]


@pytest.mark.parametrize("sa, sb", SHAPES)
def test_loops_match_numpy_broadcasting(sa, sb):
    rng = np.random.default_rng(0)
    a, b, c = rng.normal(size=sa), rng.normal(size=sb), 0.25
    got = _affine(a, b, c)
    assert got.shape == np.broadcast_shapes(sa, sb) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, a * b + np.exp(c))


def test_loops_read_views_of_any_layout():
    rng = np.random.default_rng(1)
    a, b, c = rng.normal(size=(6, 4)), rng.normal(size=(4, 6)), rng.normal(size=(6, 4))
    np.testing.assert_array_equal(_affine_views(a, b, c), a[::-1] * b.T + np.exp(c))
    a2, b2, c2 = a[:, ::2], b[::2].T, c[:, 1::2]
    np.testing.assert_array_equal(_affine(a2, b2, c2), a2 * b2 + np.exp(c2))


def test_scalars_and_one_dimensional_arrays_keep_the_expression():
    x = np.arange(5.0)
    np.testing.assert_array_equal(_affine(x, 2.0, x), x * 2.0 + np.exp(x))
    assert _affine(1.5, 2, 0.0) == 1.5 * 2 + 1.0
    ints = np.arange(6).reshape(2, 3)  # not float64: numba's own array expression
    np.testing.assert_array_equal(_affine(ints, ints, 1.0), ints * ints + np.exp(1.0))


def test_incompatible_shapes_raise_like_numpy():
    with pytest.raises(ValueError, match="broadcast"):
        _affine(np.ones((2, 3)), np.ones((2, 4)), 0.0)


@pytest.mark.parametrize("target_shape, g_shape", [((4, 3), (4, 3)), ((1, 3), (4, 3)), ((4, 3), (5, 4, 3)),
                                                   ((2, 1, 4), (2, 3, 4)), ((2, 3, 4), (5, 2, 3, 4))])
def test_adding_into_matches_unbroadcast(target_shape, g_shape):
    rng = np.random.default_rng(2)
    target, g = rng.normal(size=target_shape), rng.normal(size=g_shape)
    expected = _numpy_add_into(target.copy(), g, 3.0)
    got = _add_into(target, g, 3.0)
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(target, expected, rtol=1e-15, atol=1e-15)  # the target itself, in place


def test_adding_into_an_overlapping_view_reads_the_old_values():
    base = np.arange(12.0).reshape(6, 2)
    expected = base.copy()
    expected[1:] -= expected[:-1] * 2.0
    _add_into(base[1:], base[:-1], 2.0)
    np.testing.assert_array_equal(base, expected)


def test_adding_into_itself_and_into_a_strided_target():
    t = np.full((3, 4), 2.0)
    np.testing.assert_array_equal(_add_into(t, t, t), np.full((3, 4), -2.0))
    base = np.zeros((3, 4))
    _add_into(base[:, ::2], np.ones((3, 2)), 1.0)
    np.testing.assert_array_equal(base, np.tile([-1.0, 0.0], (3, 2)))


def test_adding_into_a_scalar():
    assert _add_into(1.0, np.ones((2, 3)), 2.0) == 1.0 - 12.0
    assert _add_into(1.0, 2.0, 3.0) == -5.0


def test_adding_into_a_smaller_target_that_is_also_an_operand():
    t, g = np.full((1, 3), 2.0), np.arange(12.0).reshape(4, 3)
    expected = _numpy_add_into(t.copy(), g, t.copy())  # every row reads t as it was before the call
    np.testing.assert_array_equal(_add_into(t, g, t), expected)


@numba.njit(error_model="numpy")
def _sum_down(like, g, w):
    return ewise_sum("_0 * _1 + 1.0", ewise_sum_plan(like, g, w), like, g, w)


SUM_SHAPES = [
    ((1, 5, 2), (1000, 5, 2)),  # GMM's parameters: a sum over points, runs along K * d
    ((1000, 5, 1), (1000, 5, 2)),  # a sum along the last axis: one add per run
    ((4, 3), (4, 3)),  # nothing to sum: set once
    ((2, 1, 4), (5, 2, 3, 4)),  # a leading axis and a middle one
    ((3, 1), (3, 4)),
    ((1, 1), (0, 1)),  # an empty sum is 0
    ((2, 1), (2, 0)),
]


@pytest.mark.parametrize("like_shape, g_shape", SUM_SHAPES)
def test_summing_matches_unbroadcast(like_shape, g_shape):
    rng = np.random.default_rng(4)
    like, g, w = rng.normal(size=like_shape), rng.normal(size=g_shape), rng.normal(size=g_shape[-1:])
    got = _sum_down(like, g, w)
    assert got.shape == like_shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, unbroadcast(g * w + 1.0, like), rtol=1e-12, atol=1e-12)


def test_an_empty_sum_starts_from_zeros():
    """The result is zeroed only where it sums; an axis the operands have as 0 long sums to 0 elements."""
    from s2sad.runtime.fused import _sums_into

    def rows(*shapes):
        return np.array([[*s, *([0] * len(s)), 0] for s in shapes], np.int64)

    assert _sums_into(rows((0, 1), (1, 1)))
    assert _sums_into(rows((5, 3), (1, 3)))
    assert not _sums_into(rows((5, 3), (5, 3)))
    assert not _sums_into(rows((0, 3), (0, 3)))


def test_summing_into_other_likes_keeps_unbroadcast():
    g, w = np.arange(6.0).reshape(2, 3), np.ones(3)
    assert _sum_down(1.0, g, w) == pytest.approx(np.sum(g + 1.0))  # a scalar `like`
    np.testing.assert_array_equal(_sum_down(np.ones(3), g, w), (g + 1.0).sum(axis=0))  # 1-d: as written
    view = np.zeros((1, 6))[:, ::2]  # a strided `like`: the result is new and C-contiguous
    np.testing.assert_array_equal(_sum_down(view, g, w), (g + 1.0).sum(axis=0, keepdims=True))
    with pytest.raises(ValueError, match="broadcast"):
        _sum_down(np.ones((4, 3)), g, w)
    with pytest.raises(ValueError, match="broadcast-compatible"):  # larger than the value: unbroadcast refuses
        _sum_down(np.ones((2, 3)), g[:1], w)


def test_uncompiled_helpers_agree():
    a, b = np.ones((2, 3)), np.arange(3.0)
    assert np.array_equal(ewise("_0 * _1", ewise_plan(a, b), a, b), a * b)
    target, g = np.ones((2, 3)), np.arange(12.0).reshape(2, 2, 3)
    assert ewise_into_finish(target, ewise_into("_0", ewise_into_plan(target, g), g)) is target
    np.testing.assert_array_equal(target, 1.0 + g.sum(axis=0))
    like = np.ones((1, 3))
    np.testing.assert_array_equal(ewise_sum("_0 * 2.0", ewise_sum_plan(like, g), like, g), 2.0 * g.sum(axis=(0, 1))[None])


# ---------------------------------------------------------------- through the public API

def test_gradient_with_three_dimensional_broadcasting_matches_differences():
    def pairwise(a, b, w):
        d = a[:, None, :] - b[None, :, :]
        return np.sum(np.exp(-0.5 * d * d * w[None, :, :]))

    rng = np.random.default_rng(3)
    a, b, w = rng.normal(size=(7, 2)), rng.normal(size=(3, 2)), rng.uniform(0.5, 1.5, size=(3, 2))
    s2sad.check_grads(pairwise, (a, b, w), order=1, modes=("rev",))

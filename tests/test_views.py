"""Adjoints of sums as broadcast views (codegen/views.py, runtime.reductions.sum_expand_view): which
lines the compiled text rewrites, the view's values against sum_expand, and gradients through it."""

import numba
import numpy as np
import pytest

import s2sad
from s2sad.codegen.compiled import compiled_text
from s2sad.codegen.views import expand_views
from s2sad.runtime.reductions import sum_expand, sum_expand_view

pytestmark = pytest.mark.slow


def _module(*body: str) -> str:
    return "import numpy as np\n\n\ndef f(x, g, w):\n" + "".join(f"    {line}\n" for line in body)


def _viewed(source: str) -> list[str]:
    return [line.strip() for line in expand_views(source).split("\n") if "sum_expand_view(" in line]


# ---------------------------------------------------------------- the rewritten text

def test_a_value_only_arithmetic_reads_becomes_a_view_line_for_line():
    source = _module("t = sum_expand(g, x, 1, False)", "u = t", "a = np.exp(t) * w + (-u)", "b = w",
                     "b += u", "return a, b")
    out = expand_views(source)
    assert len(out.split("\n")) == len(source.split("\n"))
    assert out.startswith("import numpy as np; from s2sad.runtime.reductions import sum_expand_view\n")
    assert _viewed(source) == ["t = sum_expand_view(g, x, 1, False)"]


@pytest.mark.parametrize("use", [
    "return t",  # handed to the caller, who may write into it
    "y = unbroadcast(t, x)",  # a helper may hand its argument back
    "t += w",  # written into
    "t[0] = 1.0",
    "y = t @ w",  # numba's matmul wants contiguous operands
    "y = t[0]",  # a view of the view
    "u = t; u += w",  # through an alias
    "t = w",  # bound twice: one name, one type
])
def test_a_value_read_any_other_way_keeps_its_copy(use):
    source = _module("t = sum_expand(g, x, None, False)", *use.split("; "), "return w")
    assert expand_views(source) == source


def test_an_alias_bound_twice_keeps_the_copy():
    source = _module("t = sum_expand(g, x, None, False)", "u = t", "u = w", "y = u * 2.0", "return y")
    assert expand_views(source) == source


def test_modules_without_sum_expand_are_unchanged():
    source = _module("y = x * 2.0", "return y")
    assert expand_views(source) == source


def test_a_real_gradient_reads_the_adjoint_of_its_sum_as_a_view():
    def energy(x, w):
        return np.sum(np.sum(x * x, axis=2) * w)

    source = s2sad.source(energy, argnums=0)
    text = compiled_text(source)
    assert "sum_expand(" in source and "sum_expand_view(" not in source  # `s2sad show` keeps the copy
    assert "sum_expand_view(" in text and len(text.split("\n")) == len(source.split("\n"))


# ---------------------------------------------------------------- the view against sum_expand

CASES = [((4, 3, 2), (4, 3), 2, False), ((4, 3, 2), (4, 3, 1), 2, True), ((4, 3, 2), (3, 2), 0, False),
         ((4, 3, 2), (4, 2), 1, False), ((4, 3, 2), (3,), (0, 2), False), ((4, 3, 2), (), None, False),
         ((5,), (), 0, False), ((4, 3), (1, 1), None, True), ((0, 3), (3,), 0, False)]


@numba.njit
def _both(g, x, axis, keepdims):
    return sum_expand(g, x, axis, keepdims), sum_expand_view(g, x, axis, keepdims)


@pytest.mark.parametrize("x_shape, g_shape, axis, keepdims", CASES)
def test_the_view_holds_sum_expands_values(x_shape, g_shape, axis, keepdims):
    rng = np.random.default_rng(0)
    x, g = rng.normal(size=x_shape), rng.normal(size=g_shape)
    copy, view = _both(g, x, axis, keepdims)
    assert view.shape == copy.shape == x.shape and not view.flags.writeable
    np.testing.assert_array_equal(view, copy)
    uncompiled = sum_expand_view(g, x, axis, keepdims)
    assert uncompiled.shape == x.shape and not uncompiled.flags.writeable
    np.testing.assert_array_equal(uncompiled, copy)


def test_scalar_adjoints_and_scalar_operands():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(_both(2.5, x, None, False)[1], np.full((2, 3), 2.5))
    assert _both(np.ones(3), 4.0, None, False)[1] == 3.0  # a scalar x: a float, as sum_expand
    assert sum_expand_view(np.ones(3), 4.0) == 3.0


def test_a_wrongly_shaped_adjoint_raises_like_sum_expand():
    with pytest.raises(ValueError, match="reduced shape"):
        _both(np.ones(4), np.ones((4, 3)), 0, False)


# ---------------------------------------------------------------- through the public API

def test_gradients_through_views_match_differences():
    def softmax_energy(x, w):
        z = x - np.max(x, axis=1, keepdims=True)
        e = np.exp(z)
        p = e / np.sum(e, axis=1, keepdims=True)
        return np.sum(np.sum(p * w, axis=1) ** 2) + np.sum(np.sum(x[:, None, :] * w[None, :, :], axis=2) ** 2)

    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    assert "sum_expand_view(" in compiled_text(s2sad.source(softmax_energy, argnums=(0, 1)))
    s2sad.check_grads(softmax_energy, (x, w), order=1, modes=("rev",))

"""Entry functions: after one call, calls with the same structure skip the general path (s2sad.entry);
any other call takes the general path, with its checks and messages, as before."""

from collections import namedtuple

import numpy as np
import pytest

import s2sad
from helpers import assert_close
from pytree_functions import mlp_loss
from s2sad.api import _Reverse
from s2sad.entry import entry_function
from s2sad.tree import tree_leaves, tree_map

R = np.random.default_rng(11)


def mlp_params(sizes):
    return [{'W': R.normal(size=(m, n)) / np.sqrt(n), 'b': R.normal(size=m) * 0.1} for n, m in zip(sizes, sizes[1:])]


def finite_difference_along(f, args, direction, eps=1e-6):
    shift = lambda s: f(tree_map(lambda p, v: p + s * v, args[0], direction), *args[1:])  # noqa: E731
    return (shift(eps) - shift(-eps)) / (2 * eps)


@pytest.fixture
def general_calls(monkeypatch):
    """How many calls took the general path (they all specialize their arguments)."""
    count = [0]
    specialize = _Reverse.specialize

    def counted(self, args):
        count[0] += 1
        return specialize(self, args)

    monkeypatch.setattr(_Reverse, "specialize", counted)
    return count


def test_later_calls_of_one_structure_take_the_entry_and_agree_with_finite_differences(general_calls):
    grad = s2sad.grad(mlp_loss)
    params, x = mlp_params([5, 4, 3]), R.normal(size=5)
    first = grad(params, x)
    other_params, other_x = mlp_params([5, 4, 3]), R.normal(size=5)
    later = grad(other_params, other_x)
    assert general_calls[0] == 1
    assert_matches_finite_differences(mlp_loss, (other_params, other_x), later)
    assert [sorted(layer) for layer in later] == [['W', 'b'], ['W', 'b']]
    again = grad(params, x)
    for a, b in zip(tree_leaves(again), tree_leaves(first)):
        assert_close(a, b, rtol=1e-14)


def test_each_call_gets_fresh_containers():
    grad = s2sad.grad(mlp_loss)
    params, x = mlp_params([3, 2]), R.normal(size=3)
    grad(params, x)
    g1 = grad(params, x)
    g1[0]['W'] = None
    g1.append("mine")
    g2 = grad(params, x)
    assert len(g2) == 1 and isinstance(g2[0]['W'], np.ndarray) and g2[0] is not g1[0]


def assert_matches_finite_differences(f, args, g):
    direction = tree_map(lambda p: R.normal(size=np.shape(p)), args[0])
    along = sum(float(np.sum(a * v)) for a, v in zip(tree_leaves(g), tree_leaves(direction)))
    assert along == pytest.approx(finite_difference_along(f, args, direction), rel=1e-6)


@pytest.mark.parametrize("change, error", [
    (lambda p, x: ([{'W': p[0]['W'].astype(int), 'b': p[0]['b']}], x), "dtype int"),
    (lambda p, x: ([{'W': p[0]['W'], 'b': p[0]['b'], 'c': 1.0}], x), None),  # an unused extra leaf
    (lambda p, x: ([{'W': p[0]['W'], 'c': p[0]['b']}], x), "'b'"),  # a key renamed
    (lambda p, x: (p, np.stack([x, x], axis=1)), None),  # x of another rank
])
def test_a_changed_call_takes_the_general_path_with_its_checks(change, error, general_calls):
    grad = s2sad.grad(mlp_loss)
    params, x = mlp_params([3, 2]), R.normal(size=3)
    expected = grad(params, x)
    grad(params, x)
    assert general_calls[0] == 1
    changed = change(params, x)
    if error is not None:
        with pytest.raises(Exception, match=error):
            grad(*changed)
    else:
        assert_matches_finite_differences(mlp_loss, changed, grad(*changed))
    assert general_calls[0] == 2
    assert_close(grad(params, x)[0]['W'], expected[0]['W'], rtol=1e-14)  # back to the first structure


def test_keywords_defaults_and_the_python_backend_take_the_general_path(general_calls):
    def scaled(x, scale=2.0):
        return scale * np.sum(np.sin(x))

    x = R.normal(size=4)
    grad = s2sad.grad(scaled)
    assert_close(grad(x), 2.0 * np.cos(x), rtol=1e-14)
    assert_close(grad(x), 2.0 * np.cos(x), rtol=1e-14)  # a default needs binding: general path again
    assert_close(grad(x, scale=3.0), 3.0 * np.cos(x), rtol=1e-14)
    assert general_calls[0] == 3
    python = s2sad.grad(scaled, backend="python")
    python(x, 1.0), python(x, 1.0)
    assert general_calls[0] == 5


def test_scalar_arguments_keep_their_type_checks():
    def tiny(x, y):
        return x * y + np.sin(x)

    grad = s2sad.grad(tiny, argnums=(0, 1))
    assert grad(1.0, 2.0) == pytest.approx((2.0 + np.cos(1.0), 1.0), rel=1e-14)
    assert grad(0.5, 3.0) == pytest.approx((3.0 + np.cos(0.5), 0.5), rel=1e-14)
    with pytest.raises(TypeError, match="requires float inputs"):
        grad(1, 2.0)
    assert grad(np.float64(0.5), 3.0) == pytest.approx((3.0 + np.cos(0.5), 0.5), rel=1e-14)


def test_value_and_grad_takes_the_entry_too(general_calls):
    vag = s2sad.value_and_grad(mlp_loss)
    params, x = mlp_params([3, 2]), R.normal(size=3)
    value, g = vag(params, x)
    value2, g2 = vag(params, x)
    assert general_calls[0] == 1 and value2 == value == pytest.approx(mlp_loss(params, x), rel=1e-14)
    assert_close(g2[0]['b'], g[0]['b'], rtol=1e-14)
    assert_matches_finite_differences(mlp_loss, (params, x), g2)


def test_structures_no_literal_spells_get_no_entry():
    Pair = namedtuple("Pair", ["a", "b"])

    def f(p):
        return p.a * p.b

    grad = s2sad.grad(f)
    pair = Pair(2.0, 3.0)
    assert grad(pair) == Pair(3.0, 2.0) and grad(pair) == Pair(3.0, 2.0)
    rev = grad.__s2sad_transform__
    specialized, leaves = rev.specialize((pair,))
    assert entry_function(specialized, leaves) is None

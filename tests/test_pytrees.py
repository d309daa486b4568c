"""Pytrees as arguments and results: gradients have the arguments' structure, checked against finite differences."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from pytree_functions import (Affine, Layer, Plain, Ridge, Settings, dataclass_layers, logistic_loss_dict, mlp_loss,
                              mlp_loss_with_aux, mlp_predict, namedtuple_layer, nested_mix, plain_loss, ridge_loss,
                              tree_output, with_none)
from s2sad.tree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten
from seed_functions import B0, INPUTS, TARGETS, W0, logistic_loss

R = np.random.default_rng(3)


def directional_fd(f, args, argnum, direction, eps=1e-6):
    """(f(x + eps v) - f(x - eps v)) / 2 eps along a pytree direction v for argument `argnum`."""
    def at(step):
        shifted = list(args)
        shifted[argnum] = tree_map(lambda x, v: x + step * v, args[argnum], direction)
        return f(*shifted)

    return (at(eps) - at(-eps)) / (2 * eps)


def tree_dot(a, b):
    return sum(float(np.sum(x * y)) for x, y in zip(tree_leaves(a), tree_leaves(b)))


def random_like(tree):
    return tree_map(lambda x: R.normal(size=np.shape(x)) if np.ndim(x) else float(R.normal()), tree)


def check_tree_grad(f, args, argnum, backend):
    g = s2sad.grad(f, argnums=argnum, backend=backend)(*args)
    assert tree_structure(g) == tree_structure(args[argnum])
    v = random_like(args[argnum])
    assert tree_dot(g, v) == pytest.approx(directional_fd(f, args, argnum, v), rel=1e-6, abs=1e-8)
    return g


def test_logistic_regression_with_a_dict(backend):
    params = {'W': W0, 'b': B0}
    g = check_tree_grad(logistic_loss_dict, (params, INPUTS, TARGETS), 0, backend)
    gW, gb = s2sad.grad(logistic_loss, argnums=(0, 1), backend=backend)(W0, B0, INPUTS, TARGETS)
    assert_close(g['W'], gW, rtol=1e-12)
    assert g['b'] == pytest.approx(gb, rel=1e-12)


def mlp_params(sizes):
    return [{'W': R.normal(size=(m, n)) / np.sqrt(n), 'b': R.normal(size=m) * 0.1} for n, m in zip(sizes, sizes[1:])]


def test_mlp_784_64_10_list_of_dicts(backend):
    params, x = mlp_params([784, 64, 10]), R.normal(size=784)
    g = check_tree_grad(mlp_loss, (params, x), 0, backend)
    assert [sorted(p) for p in g] == [['W', 'b'], ['W', 'b']] and g[0]['W'].shape == (64, 784)
    (value, y), grads = s2sad.value_and_grad(mlp_loss_with_aux, has_aux=True, backend=backend)(params, x)
    assert_close(y, mlp_predict(params, x), rtol=1e-12)
    assert value == pytest.approx(np.sum(y), rel=1e-12)
    assert tree_structure(grads) == tree_structure(params)


def test_nested_tuples_lists_and_dicts(backend):
    t = ((R.normal(size=3), R.normal(size=3)), {'pairs': [(1.5, R.normal(size=2)), (-0.5, R.normal(size=2))],
                                                 'bias': 0.3})
    check_tree_grad(nested_mix, (t, 0.7), 0, backend)
    g_scale = s2sad.grad(nested_mix, argnums=1, backend=backend)(t, 0.7)
    assert g_scale == pytest.approx(np.sum(t[0][0] * t[0][1]), rel=1e-12)


def test_a_dataclass_is_differentiated_field_by_field_and_an_unhashable_one_is_a_constant(backend):
    """A dataclass that argnums names needs no registration; one that is not differentiated (eq=True, not
    frozen, so unhashable) configures the code, and a change of its fields between calls is seen."""
    x, y = R.normal(size=(5, 3)), R.normal(size=5)
    model, settings = Ridge(R.normal(size=3), 0.3), Settings()
    g = check_tree_grad(ridge_loss, (model, settings, x, y), 0, backend)
    assert isinstance(g, Ridge)
    settings.mode, settings.alpha = "l1", 2.0
    check_tree_grad(ridge_loss, (model, settings, x, y), 0, backend)
    assert_close(s2sad.grad(ridge_loss, argnums=2, backend=backend)(model, settings, x, y),
                 fd_grad(lambda x: ridge_loss(model, settings, x, y), (x,), 0))


def test_differentiating_an_object_that_is_not_a_pytree_says_how_to_make_it_one():
    with pytest.raises(TypeError, match=r"argument 0 \(`obj`\) of plain_loss is a Plain object; register Plain"):
        s2sad.grad(plain_loss, backend="python")(Plain(np.ones(2)))


def test_namedtuple_and_registered_dataclass(backend):
    x = R.normal(size=3)
    layer = Affine(R.normal(size=(2, 3)), R.normal(size=2))
    g = check_tree_grad(namedtuple_layer, (layer, x), 0, backend)
    assert isinstance(g, Affine)
    layers = [Layer(R.normal(size=(4, 3)), R.normal(size=4)), Layer(R.normal(size=(2, 4)), R.normal(size=2))]
    g = check_tree_grad(dataclass_layers, (layers, x), 0, backend)
    assert isinstance(g[1], Layer) and g[1].W.shape == (2, 4)


def test_jvp_with_pytree_primals_tangents_and_outputs(backend):
    params, x = {'W': R.normal(size=(3, 2))}, R.normal(size=2)
    v = random_like(params)
    out, t = s2sad.jvp(tree_output, (params, x), (v, np.zeros(2)), backend=backend)
    assert sorted(out) == ['h', 'norm'] and sorted(t) == ['h', 'norm']
    expected = directional_fd(lambda p, y: tree_output(p, y)['norm'], (params, x), 0, v)
    assert t['norm'] == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="structure"):
        s2sad.jvp(tree_output, (params, x), ({'V': v['W']}, np.zeros(2)))


def test_vjp_returns_cotangents_with_the_primals_structure(backend):
    params, x = {'W': R.normal(size=(3, 2)), 'b': R.normal(size=3)}, R.normal(size=2)
    out, vjp_fun = s2sad.vjp(mlp_predict, [params], x, backend=backend)
    u = R.normal(size=3)
    ct_params, ct_x = vjp_fun(u)
    assert isinstance(ct_params, list) and sorted(ct_params[0]) == ['W', 'b']
    assert_close(ct_params[0]['b'], u * (1 - out ** 2), rtol=1e-12)
    assert_close(ct_x, params['W'].T @ (u * (1 - out ** 2)), rtol=1e-12)


def test_none_is_an_empty_subtree():
    g = s2sad.grad(with_none)({'w': np.ones(2), 'unused': None}, np.array([2.0, 3.0]))
    assert g['unused'] is None and list(g['w']) == [2.0, 3.0]


def test_same_structure_compiles_once_new_structure_compiles_anew():
    grad = s2sad.grad(mlp_loss)
    x = R.normal(size=3)
    grad(mlp_params([3, 4, 2]), x)
    grad(mlp_params([3, 4, 2]), x)  # same structure (and types): no new code, no new compile
    specialized = grad.__s2sad_transform__.made.derived
    assert len(specialized) == 1
    (only,) = specialized.values()
    assert len(only.vjp_fn.signatures) == 1
    grad(mlp_params([3, 5, 4, 2]), x)  # three layers: a new structure, new code
    assert len(specialized) == 2


@pytest.mark.parametrize("tree", [
    [{'W': 1.0, 'b': 2.0}, {'W': 3.0, 'b': 4.0}], ((1.0,), [], {}, None, (2.0, [3.0])), {3: 1.0, 1: (2.0, None)},
    {1.5: 1.0, 0.5: 2.0},  # keys other than strings: the recursive builder
    Layer(np.ones(2), 1.0), [Affine(W=1.0, b=[2.0, 3.0])],  # namedtuples and registered classes, nested too
])
def test_unflatten_rebuilds_what_flatten_took_apart(tree):
    leaves, treedef = tree_flatten(tree)
    rebuilt = tree_unflatten(treedef, [2 * leaf for leaf in leaves])
    assert tree_structure(rebuilt) == treedef and type(rebuilt) is type(tree)
    assert all(np.all(a == 2 * b) for a, b in zip(tree_leaves(rebuilt), leaves))
    with pytest.raises(ValueError, match="leaves"):
        tree_unflatten(treedef, leaves + [0.0])


def test_equal_structures_with_keys_of_other_types_keep_their_own_keys():
    for tree in ({1: 2.0}, {True: 2.0}, {1.0: 2.0}):  # equal as structures: 1 == True == 1.0
        leaves, treedef = tree_flatten(tree)
        (key,) = tree_unflatten(treedef, leaves)
        assert type(key) is type(next(iter(tree)))


def test_bad_leaves_and_int_leaves_are_named():
    with pytest.raises(TypeError, match="params_b"):
        s2sad.grad(logistic_loss_dict)({'W': W0, 'b': 1}, INPUTS, TARGETS)
    # a string is structure, as None is (code is generated per value): here it meets arithmetic, at the user's line
    with pytest.raises(s2sad.UnsupportedError, match=r"pytree_functions.py:\d+:\d+: .*'x'"):
        s2sad.grad(logistic_loss_dict)({'W': W0, 'b': "x"}, INPUTS, TARGETS)


def mode_from_a_dict_argument(x, params):
    out = None
    if params["mode"] == "train":
        out = x * 2.0 + params.get("eps", 1e-5)
    elif params["mode"] == "test":
        out = x * 3.0
    return np.sum(out ** 2)


def test_a_string_in_a_pytree_argument_is_structure_and_decides_branches(backend):
    x = np.array([1.0, 2.0])
    for mode in ("train", "test"):
        g = s2sad.grad(mode_from_a_dict_argument, backend=backend)(x, {"mode": mode})
        assert_close(g, fd_grad(mode_from_a_dict_argument, (x, {"mode": mode}), 0))
    g = s2sad.grad(mode_from_a_dict_argument, argnums=1, backend="python")
    assert g(x, {"mode": "test", "eps": 0.1})["mode"] == "test"  # the gradient's tree keeps the string


def test_jacobians_and_hessian_of_pytree_arguments(backend):
    params, x = {'W': R.normal(size=(3, 2)), 'b': R.normal(size=3)}, R.normal(size=2)
    H = s2sad.hessian(mlp_loss, backend=backend)([params], x)
    assert isinstance(H, list) and sorted(H[0]) == ['W', 'b']
    assert H[0]['W'][0]['b'].shape == (3, 2, 3)  # d2/dW db: W.shape + b.shape
    g_b = s2sad.grad(mlp_loss, backend="python")
    eps, e = 1e-6, np.eye(3)
    fd = np.array([(g_b([{'W': params['W'], 'b': params['b'] + eps * e[k]}], x)[0]['b']
                    - g_b([{'W': params['W'], 'b': params['b'] - eps * e[k]}], x)[0]['b']) / (2 * eps)
                   for k in range(3)])
    assert_close(H[0]['b'][0]['b'], fd.T)
    jt = s2sad.jacfwd(tree_output, backend=backend)({'W': params['W']}, x)
    assert jt['h']['W'].shape == (3, 3, 2) and jt['norm']['W'].shape == (3, 2)
    jf = s2sad.jacfwd(mlp_predict, backend=backend)([params], x)
    jr = s2sad.jacrev(mlp_predict, backend=backend)([params], x)
    assert jf[0]['W'].shape == (3, 3, 2) and jf[0]['b'].shape == (3, 3)
    assert_close(jf[0]['W'], jr[0]['W'], rtol=1e-12)
    assert_close(jf[0]['b'], jr[0]['b'], rtol=1e-12)


def test_check_grads_with_pytree_arguments(backend):
    params = {'W': W0, 'b': B0}
    # Second order on the python backend, which runs the same generated source: pytrees are flattened to
    # leaves before any code is generated, and numba compiles the second derivatives of the same logistic
    # regression on its leaves in test_higher_order (those of this copy cost four compiles, ~120 s of CI).
    s2sad.check_grads(logistic_loss_dict, (params, INPUTS, TARGETS), order=2 if backend == "python" else 1,
                      backend=backend)
    with pytest.raises(AssertionError, match="params_W"):  # failures name the leaf by its path
        s2sad.check_grads(logistic_loss_dict, (params, INPUTS, TARGETS), modes=("fwd",), atol=0.0, rtol=1e-14,
                          backend=backend)

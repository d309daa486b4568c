"""Objects built or changed inside a differentiated function: their attributes are variables of the
generated code, their methods inlined (objects.py), each gradient against finite differences."""

import numpy as np
import pytest

import object_functions as O
import s2sad
from helpers import assert_close, fd_grad

RNG = np.random.default_rng(7)
X = RNG.normal(size=3)
W1, W2 = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))

CASES = [
    (O.layer_norm_built_inside, (RNG.normal(size=(2, 3)), np.array([1.0, 2.0, 0.5]))),
    (O.state_carried_by_a_loop, (X,)),
    (O.optimizer_steps, (X,)),
    (O.methods_of_every_kind, (X, np.array([0.3, 0.8]))),
    (O.super_init, (X, X + 0.5)),
    (O.namedtuple_built, (X,)),
    (O.dataclass_built, (X,)),
    (O.namespace_built, (X, X - 1.0)),
    (O.objects_in_a_list, (W1, W2, X)),
    (O.built_in_a_loop, (X,)),
    (O.assigned_in_a_branch, (X,)),
    (O.assigned_in_a_branch, (-X,)),
    (O.method_of_a_built_object, (X, np.linspace(-1.0, 1.0, 4), 0.7)),
    (O.assigns_a_global_objects_attribute, (W1, X)),
    (O.drift_of_its_own_copy, (X, X + 1.0)),
    (O.unpacks_into_attributes_and_elements, (X, W1 @ W1.T)),
]


def _all_gradients(fn, args, backend):
    argnums = tuple(range(len(args)))
    grads = s2sad.grad(fn, argnums=argnums, backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(fn, args, i))


@pytest.mark.parametrize("fn, args", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_an_object_built_or_changed_inside_differentiates(fn, args):
    _all_gradients(fn, args, "python")
    value = s2sad.value_and_grad(fn, backend="python")(*args)[0]
    assert_close(value, fn(*args), rtol=1e-12)


@pytest.mark.slow
def test_objects_compile_under_numba():
    """One compile per function, the cases whose plumbing differs most."""
    for fn, args in (CASES[1], CASES[3], CASES[4], CASES[8], CASES[12]):
        _all_gradients(fn, args, "numba")


def test_a_method_of_an_outside_object_may_set_its_attributes_and_leaves_it_as_it_was():
    model = O.Model(np.full((3, 3), 0.3))
    g = s2sad.grad(model.loss, backend="python")(X)
    assert not hasattr(model, "h")  # the object itself is not changed by grad
    assert_close(g, fd_grad(model.loss, (X,), 0))
    before = O.MODEL.W.copy()
    s2sad.grad(O.assigns_a_global_objects_attribute, backend="python")(W1, X)
    np.testing.assert_array_equal(O.MODEL.W, before)


def test_an_attribute_sharing_the_callers_array_is_refused_where_numpy_would_show_the_write():
    with pytest.raises(s2sad.UnsupportedError, match=r"augmented assignment of `self.pos` changes memory that `pos`"):
        s2sad.grad(O.drift_shares_the_callers_array, backend="python")(X, X + 1.0)


def test_a_string_attribute_cannot_change_at_run_time():
    with pytest.raises(s2sad.UnsupportedError, match=r"attribute `mode` would change .* at run time"):
        s2sad.grad(O.static_attribute_changed_in_a_loop, backend="python")(X)


class AccumulatingLayer:
    def __init__(self, w):
        self.w = w
        self.grads = []

    def derive(self, g):
        self.grads.append(2.0 * g)  # an FCLayer keeps its gradients in a list until the update

    def update(self, lr):
        self.w = self.w - lr * np.array(self.grads).sum(axis=0) / len(self.grads)
        self.grads = []


def accumulate_then_update(w, g1, g2, lr):
    layer = AccumulatingLayer(w)
    layer.derive(g1)
    layer.grads.append(g2)
    layer.update(lr)
    return np.sum(np.tanh(layer.w))


def test_a_list_attribute_grows_by_appends_in_straight_line_code(backend):
    args = (np.array([0.3, -0.5]), np.array([1.0, 2.0]), np.array([-0.5, 0.4]), 0.1)
    for i in range(4):
        assert_close(s2sad.grad(accumulate_then_update, argnums=i, backend=backend)(*args),
                     fd_grad(accumulate_then_update, args, i))

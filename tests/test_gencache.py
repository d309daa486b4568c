"""The generated-source cache (s2sad/gencache.py): a later process reuses a generated module only
while everything generation read is unchanged; any change regenerates, checked against finite
differences of the changed function."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import assert_close, fd_grad
from s2sad import api, backend, cache, gencache, ir

MODULE = """
import numpy as np
from helpers_gc import shift

SCALE = 2.0


def helper(x):
    return np.sin(x) * SCALE


def twice(x):
    return 2.0 * x


def f(x):
    return np.sum(helper(x) * x) + shift(x[0], 0.5)
"""

HELPERS = """
def shift(x, k=1.0):
    return (x + k) ** 2
"""


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(path))
    monkeypatch.setattr(backend, "_LOADED", {})
    monkeypatch.setattr(cache, "_usable", set())
    monkeypatch.setattr(cache, "_unusable", set())
    monkeypatch.syspath_prepend(str(tmp_path))
    return path


def load(tmp_path, name, text):
    """Write `text` to a module file and import it afresh (an edited module in a new process)."""
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def transform(fn):
    return api._Reverse(fn, 0, False, "python", "grad")  # a new one each time: nothing held in memory


def checked_gradient(fn, x):
    """The gradient through a fresh transform, checked against central differences; and whether the
    transform's module was generated here (True) or came from the disk."""
    t = transform(fn)
    generated_here = isinstance(t.generated.fn, ir.Function)
    (g,) = t.gradient((x,))
    assert_close(g, fd_grad(fn, (x,), 0))
    return generated_here


X = np.array([0.3, -1.1, 0.8])


def test_a_new_transform_reuses_the_saved_module(fresh_cache, tmp_path):
    load(tmp_path, "helpers_gc", HELPERS)
    mod = load(tmp_path, "user_gc", MODULE)
    made = transform(mod.f).generated
    assert isinstance(made.fn, ir.Function) and list(fresh_cache.glob("*.gen"))
    loaded = transform(mod.f).generated
    assert isinstance(loaded.fn, gencache.Summary)
    assert (loaded.source, loaded.primal, loaded.derivative, loaded.wrapper) == \
        (made.source, made.primal, made.derivative, made.wrapper)  # the module generation wrote, whole
    assert (loaded.fn.params, loaded.fn.outputs, loaded.fn.returns_tuple) == \
        (made.fn.params, made.fn.outputs, made.fn.returns_tuple)
    assert checked_gradient(mod.f, X) is False


def test_an_edited_callee_in_another_file_is_generated_again(fresh_cache, tmp_path):
    load(tmp_path, "helpers_gc", HELPERS)
    mod = load(tmp_path, "user_gc", MODULE)
    assert checked_gradient(mod.f, X) is True
    load(tmp_path, "helpers_gc", HELPERS.replace("(x + k) ** 2", "(x + k) ** 3"))
    mod = load(tmp_path, "user_gc", MODULE)
    assert "** 3" in transform(mod.f).generated.source
    assert checked_gradient(mod.f, X) is False  # the new one was saved in turn


@pytest.mark.parametrize("change", ["number", "rebound", "default"])
def test_a_changed_global_is_generated_again(fresh_cache, tmp_path, change):
    load(tmp_path, "helpers_gc", HELPERS)
    mod = load(tmp_path, "user_gc", MODULE)
    assert checked_gradient(mod.f, X) is True
    if change == "number":
        mod.SCALE = 3.0
    elif change == "rebound":
        mod.helper = mod.twice
    else:
        sys.modules["helpers_gc"].shift.__defaults__ = (2.0,)
    assert checked_gradient(mod.f, X) is True
    assert checked_gradient(mod.f, X) is False


def test_what_cannot_be_compared_is_never_saved(fresh_cache, tmp_path):
    import s2sad

    @s2sad.custom_jvp
    def smooth(x):
        return np.log1p(np.exp(x))

    @smooth.defjvp
    def smooth_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return smooth(x), t / (1.0 + np.exp(-x))

    def g(x):
        return np.sum(smooth(x) * x)

    assert checked_gradient(g, X) is True
    assert checked_gradient(g, X) is True
    assert not list(fresh_cache.glob("*.gen"))


def test_a_damaged_file_is_generated_again_and_rewritten(fresh_cache, tmp_path):
    load(tmp_path, "helpers_gc", HELPERS)
    mod = load(tmp_path, "user_gc", MODULE)
    assert checked_gradient(mod.f, X) is True
    (saved,) = fresh_cache.glob("*.gen")
    saved.write_bytes(saved.read_bytes()[:40])
    assert checked_gradient(mod.f, X) is True
    assert checked_gradient(mod.f, X) is False


SCRIPT = """
import json, sys
import numpy as np
import s2sad
from s2sad import ir
import user_gc
g = s2sad.grad(user_gc.f, backend="python")
x = np.array([0.3, -1.1, 0.8])
value = g(x)
print(json.dumps([g.__s2sad_transform__.generated.fn.__class__ is ir.Function, list(value)]))
"""


def test_a_second_process_skips_generation(fresh_cache, tmp_path):
    load(tmp_path, "helpers_gc", HELPERS)
    mod = load(tmp_path, "user_gc", MODULE)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(fresh_cache), PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    runs = [json.loads(subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                                      check=True, timeout=120).stdout) for _ in range(2)]
    assert [generated for generated, _ in runs] == [True, False]
    assert runs[0][1] == runs[1][1]
    assert_close(np.array(runs[1][1]), fd_grad(mod.f, (X,), 0))


RULED = """
import numpy as np
import s2sad


def softsign(x):
    return x / (1.0 + np.abs(x))


@s2sad.rules.defrule(softsign, name="softsign_gc")
def softsign_adjoint(g, out, x):
    return (g / (1.0 + np.abs(x)) ** 2,)


def f(x):
    return np.sum(softsign(x) * x)
"""


def test_a_user_rule_with_a_new_template_is_generated_again(fresh_cache, tmp_path, monkeypatch):
    from s2sad.rules import registry

    before = dict(registry._BY_NAME), dict(registry._BY_OBJECT)
    monkeypatch.setattr(registry, "_BY_NAME", dict(before[0]))  # the test's rules are gone afterwards
    monkeypatch.setattr(registry, "_BY_OBJECT", dict(before[1]))
    mod = load(tmp_path, "ruled_gc", RULED)
    assert checked_gradient(mod.f, X) is True
    assert checked_gradient(mod.f, X) is False
    # a new process: the same rule name, its template written differently
    monkeypatch.setattr(registry, "_BY_NAME", dict(before[0]))
    monkeypatch.setattr(registry, "_BY_OBJECT", dict(before[1]))
    mod = load(tmp_path, "ruled_gc", RULED.replace("(1.0 + np.abs(x)) ** 2", "((1.0 + np.abs(x)) * (1.0 + np.abs(x)))"))
    assert checked_gradient(mod.f, X) is True


PAIR = """
import numpy as np


def pair(x):
    return np.sum(np.sin(x) * x), x[0] * x[1]
"""


def test_vjp_of_a_saved_module_does_not_lower_the_function(fresh_cache, tmp_path, monkeypatch):
    load(tmp_path, "helpers_gc", HELPERS)
    f = load(tmp_path, "user_gc", MODULE).f
    pair = load(tmp_path, "pair_gc", PAIR).pair
    seed = 0.7
    out, pull = api.vjp(f, X, backend="python")  # generates and saves f's module
    assert_close(pull(seed)[0], seed * fd_grad(f, (X,), 0))

    def no_lowering(*args, **kwargs):
        raise AssertionError("the function was lowered again")

    with monkeypatch.context() as later:  # a new process: nothing held in memory, and vjp must not lower f
        later.setattr(api, "_MEMO", {})  # to learn that it returns one value
        later.setattr(api, "normalize", no_lowering)
        again, pull = api.vjp(f, X, backend="python")
        assert again == out
        assert_close(pull(seed)[0], seed * fd_grad(f, (X,), 0))

    (value, second), pull = api.vjp(pair, X, backend="python")  # a tuple: generated through a weighted sum
    assert (value, second) == pair(X)
    weighted = lambda x: 0.5 * pair(x)[0] - 2.0 * pair(x)[1]  # noqa: E731
    assert_close(pull((0.5, -2.0))[0], fd_grad(weighted, (X,), 0))

"""exp, log and tanh as vectorizable arithmetic (runtime/vmath.py) and the rewrite that points the
compiled text of generated modules at them (codegen/vmath.py)."""

import numba
import numpy as np
import pytest

import s2sad
from s2sad.codegen.compiled import compiled_text
from s2sad.codegen.vmath import vectorized_math
from s2sad.runtime.vmath import vexp, vlog, vlog1p, vtanh

FUNCTIONS = {"exp": (vexp, np.exp), "log": (vlog, np.log), "log1p": (vlog1p, np.log1p), "tanh": (vtanh, np.tanh)}


@numba.njit(error_model="numpy")
def compiled_vexp(x):
    return vexp(x)


@numba.njit(error_model="numpy")
def compiled_vlog(x):
    return vlog(x)


@numba.njit(error_model="numpy")
def compiled_vlog1p(x):
    return vlog1p(x)


@numba.njit(error_model="numpy")
def compiled_vtanh(x):
    return vtanh(x)


COMPILED = {"exp": compiled_vexp, "log": compiled_vlog, "log1p": compiled_vlog1p, "tanh": compiled_vtanh}


def wide_inputs(name: str) -> np.ndarray:
    """Every binade the function meets, the ends of its range and the joins of its pieces."""
    rng = np.random.default_rng(7)
    if name == "exp":
        return np.concatenate([rng.uniform(-745.1, 709.7, 20000), rng.uniform(-1, 1, 20000),
                               rng.uniform(-745.1, -700, 5000), rng.uniform(700, 709.78, 5000)])
    if name == "log":
        return np.concatenate([np.exp(rng.uniform(-744, 709, 20000)), rng.uniform(0.5, 2, 20000),
                               rng.uniform(0.70, 0.72, 5000), rng.uniform(0, 1e-310, 5000)])
    if name == "log1p":  # the rational piece holds for 1 + x in [sqrt(1/2), sqrt(2)]
        return np.concatenate([np.exp(rng.uniform(-700, 700, 20000)), rng.uniform(-0.5, 0.5, 20000),
                               rng.uniform(-1e-10, 1e-10, 5000), rng.uniform(-1, -0.99, 5000),
                               rng.uniform(0.40, 0.42, 5000), rng.uniform(-0.30, -0.28, 5000)])
    return np.concatenate([rng.uniform(-30, 30, 20000), rng.uniform(-1, 1, 20000), rng.uniform(0.6, 0.65, 5000),
                           rng.uniform(-1e-8, 1e-8, 5000), rng.uniform(21, 23, 1000)])


def ulps(got: np.ndarray, want: np.ndarray) -> float:
    finite = np.isfinite(want) & (want != 0)
    return float(np.max(np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(want.dtype))))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_within_two_ulp_of_numpy_over_the_whole_range(name):
    x = wide_inputs(name)
    got, want = COMPILED[name](x), FUNCTIONS[name][1](x)
    assert got.dtype == np.float64
    assert np.all(np.isfinite(got) == np.isfinite(want))
    assert ulps(got, want) <= 2.0


SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, -2.0, 5e-324, -5e-324, 1e-310,
                    2.2250738585072014e-308, 709.78, 709.79, -745.13, -745.14, 1e308, -1e308, 22.0, -22.0,
                    0.625, -0.625, 0.5, 2.0])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_special_values_as_numpy_gives_them(name):
    with np.errstate(all="ignore"):
        got, want = COMPILED[name](SPECIAL), FUNCTIONS[name][1](SPECIAL)
        same = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= 2 * np.spacing(np.abs(want)))
    assert same.all(), (SPECIAL[~same], got[~same], want[~same])
    assert np.array_equal(np.signbit(got[SPECIAL == 0.0]), np.signbit(want[SPECIAL == 0.0]))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_result_types_follow_numpy(name):
    f, reference = COMPILED[name], FUNCTIONS[name][1]
    rng = np.random.default_rng(3)
    single = rng.uniform(0.1, 3.0, 1000).astype(np.float32)
    got = f(single)
    assert got.dtype == np.float32
    assert ulps(got, reference(single)) <= 2.0
    assert f(np.arange(1, 5)).dtype == np.float64
    np.testing.assert_allclose(f(np.arange(1, 5)), reference(np.arange(1.0, 5.0)), rtol=1e-15)
    z = rng.uniform(0.1, 2, 6) + 1j * rng.uniform(0.1, 2, 6)  # complex: numba's own function
    np.testing.assert_allclose(f(z), reference(z), rtol=1e-14)
    assert f(1.5) == pytest.approx(reference(1.5), rel=1e-15)
    single_scalar = f(np.float32(1.5))  # numba returns a float32 as a Python float
    assert np.float32(single_scalar) == single_scalar == pytest.approx(reference(1.5), rel=1e-7)
    assert f(2) == pytest.approx(reference(2.0), rel=1e-15)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_any_layout_and_shape(name):
    f, reference = COMPILED[name], FUNCTIONS[name][1]
    a = np.random.default_rng(4).uniform(0.1, 3.0, (6, 5, 4))
    frozen = a.copy()
    frozen.flags.writeable = False
    spread = np.broadcast_to(a[0, 0], (3, 4))  # read-only, zero strides
    for view in (a, a[:, ::2, 1:], a.transpose(2, 0, 1), a[0], np.asfortranarray(a), a[:0], frozen, spread):
        got = f(view)
        assert got.shape == view.shape
        np.testing.assert_allclose(got, reference(view), rtol=4e-16, atol=0)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_in_python_they_are_numpys_functions(name):
    x = np.linspace(0.1, 2.0, 7)
    assert np.array_equal(FUNCTIONS[name][0](x), FUNCTIONS[name][1](x))


# ---------------------------------------------------------------- the rewrite of the compiled text

MODULE = '''"""doc: np.exp(x)"""
import math
import numpy as np


def f_grad(x, y):
    a = np.exp(x) + np.log(np.tanh(y)) + np.log1p(x)  # np.exp(x) in a comment
    b = ewise("np.exp(_0)", p, x)
    c = np.exp(x, out=y) + np.exp(*x) + np.log(x)
    d = math.exp(1.0) + np.expm1(x) + np.sum(x) + np.sum(x, axis=0)
    return np.tanh(
        a)
'''


def test_rewrite_is_line_for_line_and_only_single_argument_calls():
    text = vectorized_math(MODULE)
    lines = text.split("\n")
    assert len(lines) == len(MODULE.split("\n"))
    assert lines[2] == ("import numpy as np; from s2sad.runtime.vmath import vexp, vlog, vlog1p, vtanh; "
                        "from s2sad.runtime.core import sum_all")
    assert lines[6] == "    a = vexp(x) + vlog(vtanh(y)) + vlog1p(x)  # np.exp(x) in a comment"
    assert lines[7] == '    b = ewise("np.exp(_0)", p, x)'
    assert lines[8] == "    c = np.exp(x, out=y) + np.exp(*x) + vlog(x)"
    assert lines[9] == "    d = math.exp(1.0) + np.expm1(x) + sum_all(x) + np.sum(x, axis=0)"
    assert lines[10] == "    return vtanh("
    assert lines[0] == '"""doc: np.exp(x)"""'


def test_a_module_without_these_calls_is_left_alone():
    source = (MODULE.replace("np.exp", "np.sin").replace("np.log", "np.cos").replace("np.tanh", "np.sinh")
              .replace("np.sum(x)", "np.prod(x)"))
    assert vectorized_math(source) is source


def test_generated_gradient_compiles_through_them_and_matches_finite_differences():
    def loss(w, x):
        return np.sum(np.log(1.0 + np.exp(np.tanh(x @ w))))

    rng = np.random.default_rng(5)
    w, x = rng.normal(size=4), rng.normal(size=(50, 4))
    g = s2sad.grad(loss)
    got = g(w, x)
    source = g.__s2sad_transform__.generated.source
    assert "vtanh(" not in source and "vtanh(" in compiled_text(source)
    h = 1e-6
    fd = np.array([(loss(w + h * e, x) - loss(w - h * e, x)) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)

"""A max's adjoint added in one pass (codegen/into.py, runtime.reductions.extremum_adjoint_into): the
rewritten text, the values against the line as written, and a gradient through it against central
differences."""

import numba
import numpy as np
import pytest

import s2sad
from s2sad.codegen.compiled import compiled_text
from s2sad.codegen.into import added_in_place
from s2sad.runtime import extremum_adjoint, extremum_mask, unbroadcast
from s2sad.runtime.reductions import extremum_adjoint_into

pytestmark = pytest.mark.slow

LINE = "x_bar += unbroadcast(extremum_adjoint(unbroadcast(m_bar, m), x, m, axis, True), x_bar)"


def _module(*body: str) -> str:
    return "import numpy as np\n\n\ndef f(x, m, m_bar, x_bar, axis):\n" + "".join(f"    {line}\n" for line in body)


def test_the_added_adjoint_becomes_one_call_line_for_line():
    source = _module("y = x * 2.0", LINE, "for i in range(3):", f"    {LINE}", "return x_bar")
    out = added_in_place(source).split("\n")
    assert len(out) == len(source.split("\n"))
    assert out[0] == "import numpy as np; from s2sad.runtime.reductions import extremum_adjoint_into"
    into = "x_bar = extremum_adjoint_into(x_bar, unbroadcast(m_bar, m), x, m, axis, True)"
    assert out[5] == f"    {into}" and out[7] == f"        {into}"
    assert out[4] == "    y = x * 2.0"


@pytest.mark.parametrize("line", [
    "x_bar += unbroadcast(extremum_adjoint(m_bar, x, m), y_bar)",  # into another array than it sums to
    "x_bar = unbroadcast(extremum_adjoint(m_bar, x, m), x_bar)",  # not an addition
    "x_bar -= unbroadcast(extremum_adjoint(m_bar, x, m), x_bar)",
    "x_bar += unbroadcast(extremum_mask(x, m), x_bar)",
])
def test_other_lines_stay(line):
    source = _module(line, "return x_bar")
    assert added_in_place(source) == source


@numba.njit
def _as_written(target, g, x, out, axis, keepdims):
    target += unbroadcast(extremum_adjoint(g, x, out, axis, keepdims), target)
    return target


@numba.njit
def _into(target, g, x, out, axis, keepdims):
    return extremum_adjoint_into(target, g, x, out, axis, keepdims)


@pytest.mark.parametrize("shape, axis, keepdims", [((1000, 5), 1, True), ((40, 5), 0, True), ((4, 6, 5), 1, False),
                                                    ((30,), 0, True), ((3, 4, 5), (0, 2), False), ((4, 5), None, False)])
def test_the_call_adds_what_the_line_adds_ties_shared(shape, axis, keepdims):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, size=shape) * 1.0  # many ties: each group's share split between them
    out = np.max(x, axis=axis, keepdims=keepdims)
    g = rng.normal(size=out.shape)
    target = rng.normal(size=shape)
    want = _as_written(target.copy(), g, x, out, axis, keepdims)
    got = _into(target, g, x, out, axis, keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(target, want, rtol=1e-14, atol=1e-15)  # in the caller's array


@numba.njit
def _adjoint_and_mask(g, x, out):
    return extremum_adjoint(g, x, out), extremum_mask(x, out)


@pytest.mark.parametrize("shape", [(7,), (4, 5), (2, 3, 4)])
def test_over_every_entry_the_ties_share_and_a_nan_maximum_sends_nothing(shape):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 3, size=shape) * 1.0
    out = np.max(x)
    hit = (x == out) / np.sum(x == out)
    adjoint, mask = _adjoint_and_mask(0.7, x, out)
    np.testing.assert_allclose(adjoint, 0.7 * hit, rtol=1e-15)
    np.testing.assert_allclose(mask, hit, rtol=1e-15)
    target = rng.normal(size=shape)
    np.testing.assert_allclose(_into(target.copy(), 0.7, x, out, None, False), target + 0.7 * hit, rtol=1e-15)
    x.flat[1] = np.nan
    adjoint, mask = _adjoint_and_mask(0.7, x, np.max(x))
    assert not adjoint.any() and not mask.any()  # no entry equals nan: as along axes


def test_other_targets_run_as_written():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(6, 4))
    out = np.max(x, axis=1, keepdims=True)
    g = rng.normal(size=(6, 1))
    narrower = np.zeros((1, 4))  # summed down, as the line does
    np.testing.assert_allclose(_into(narrower, g, x, out, 1, True),
                               np.sum((x == out) * g, axis=0, keepdims=True), rtol=1e-14)
    with pytest.raises(ValueError, match="reduced shape"):
        _into(np.zeros((6, 4)), np.ones(5), x, out, 1, True)
    assert _into(0.5, 2.0, 3.0, 3.0, None, False) == 2.5  # scalars: the line as written
    assert extremum_adjoint_into(np.zeros(3), 1.0, np.array([1.0, 2.0, 2.0]), 2.0).tolist() == [0.0, 0.5, 0.5]


def logsumexp_rows(a):
    m = np.max(a, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(a - m), axis=1)) + np.squeeze(m, axis=1))


def test_a_logsumexp_gradient_adds_the_max_adjoint_in_place_and_matches_finite_differences():
    a = np.random.default_rng(7).normal(size=(50, 4))
    got = s2sad.grad(logsumexp_rows)(a)
    eps, want = 1e-6, np.empty_like(a)
    for idx in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[idx] += eps
        down[idx] -= eps
        want[idx] = (logsumexp_rows(up) - logsumexp_rows(down)) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    source = s2sad.source(logsumexp_rows)
    text = compiled_text(source)
    assert "+= unbroadcast(extremum_adjoint(" in source  # `s2sad show` keeps the line as written
    assert "extremum_adjoint_into(" in text and "+= unbroadcast(extremum_adjoint(" not in text

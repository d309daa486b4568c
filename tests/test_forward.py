"""Forward mode: array and tuple outputs, argument checks, readable source (the program corpus runs in
both modes in test_programs.py, where each program's jvp and vjp are compiled once for all its checks)."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_directional


def test_jvp_of_array_and_tuple_outputs(backend):
    from higher_order_functions import two_outputs, vector_map

    x = np.array([0.3, -0.5, 1.2])
    v = np.array([1.0, 0.5, -2.0])
    out, t = s2sad.jvp(vector_map, (x, 0.8), (v, 0.3), backend=backend)
    assert_close(out, vector_map(x, 0.8), rtol=1e-12)
    assert_close(t, fd_directional(vector_map, (x, 0.8), (v, 0.3)))
    (a, b), (da, db) = s2sad.jvp(two_outputs, (0.4, 1.5), (1.0, -0.5), backend=backend)
    assert (a, b) == pytest.approx(two_outputs(0.4, 1.5))
    assert da == pytest.approx(1.0 * 1.5 + 0.4 * -0.5, rel=1e-12)
    assert db == pytest.approx(np.cos(0.4) * 1.0 - 0.5, rel=1e-12)


def test_jvp_checks_its_arguments():
    with pytest.raises(ValueError, match="2 primals but 1 tangents"):
        s2sad.jvp(np.tanh, (1.0, 2.0), (1.0,))
    with pytest.raises(ValueError, match=r"tangent leaf 0 has shape \(2,\)"):
        s2sad.jvp(np.tanh, (np.zeros(3),), (np.zeros(2),))
    with pytest.raises(ValueError, match=r"tangent leaf 0 has shape \(2,\), but its primal has shape \(\)"):
        s2sad.jvp(np.tanh, (1.0,), (np.zeros(2),))  # floats and arrays skip flattening, not the checks
    with pytest.raises(TypeError, match="complex"):
        s2sad.jvp(np.tanh, (np.zeros(2, complex),), (np.zeros(2),))
    out, t = s2sad.jvp(np.tanh, (0.5,), (2,))  # an int tangent of a float primal
    assert t == pytest.approx(2.0 * (1.0 - np.tanh(0.5) ** 2), rel=1e-12)


def test_forward_source_is_readable():
    from programs import recurrence

    text = s2sad.source(recurrence, (0, 1), mode="fwd")
    assert "def recurrence_jvp(x, w, x_dot, w_dot):" in text
    assert "h_dot[t] = " in text and "List()" not in text
    assert "# h[t] = np.tanh(w * h[t - 1] + x[t])" in text

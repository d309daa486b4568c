"""Forward mode on the program corpus: jvp against finite differences, and against reverse mode."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close
from programs import PROGRAMS


def _id(case):
    fn, args, _ = case
    return f"{fn.__name__}{'-' + str(args[0]) if np.ndim(args[0]) == 0 else ''}"


def _directions(args, argnums, rng):
    """Random tangents for the differentiated arguments, zeros for the other float ones."""
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    out = []
    for i, a in enumerate(args):
        if isinstance(a, (int, np.integer)):
            out.append(a)  # ints are constants: jvp ignores their tangent
        elif i in nums:
            out.append(rng.normal(size=np.shape(a)) if np.ndim(a) else float(rng.normal()))
        else:
            out.append(np.zeros_like(a) if np.ndim(a) else 0.0)
    return out


def _fd_directional(fn, args, tangents, eps=1e-6):
    def at(step):
        return fn(*[a + step * t if not isinstance(a, (int, np.integer)) else a for a, t in zip(args, tangents)])

    return (at(eps) - at(-eps)) / (2 * eps)


@pytest.mark.parametrize("case", PROGRAMS, ids=[_id(c) for c in PROGRAMS])
def test_jvp_matches_finite_differences(case, backend, rng):
    fn, args, argnums = case
    tangents = _directions(args, argnums, rng)
    out, tangent_out = s2sad.jvp(fn, args, tangents, backend=backend)
    assert_close(out, fn(*args), rtol=1e-12)
    assert np.shape(tangent_out) == np.shape(out)
    assert_close(tangent_out, _fd_directional(fn, args, tangents))


@pytest.mark.parametrize("case", PROGRAMS, ids=[_id(c) for c in PROGRAMS])
def test_jvp_and_vjp_agree(case, backend, rng):
    """<vjp(u), v> == <u, jvp(v)>: the two modes are transposes of each other."""
    fn, args, argnums = case
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    tangents = _directions(args, argnums, rng)
    _, tangent_out = s2sad.jvp(fn, args, tangents, backend=backend)
    u = 1.7
    grads = s2sad.grad(fn, argnums=nums, backend=backend)(*args)
    lhs = sum(float(np.sum(u * g * tangents[n])) for n, g in zip(nums, grads))
    assert lhs == pytest.approx(u * float(tangent_out), rel=1e-9, abs=1e-12)


def test_jvp_of_array_and_tuple_outputs(backend):
    from higher_order_functions import two_outputs, vector_map

    x = np.array([0.3, -0.5, 1.2])
    v = np.array([1.0, 0.5, -2.0])
    out, t = s2sad.jvp(vector_map, (x, 0.8), (v, 0.3), backend=backend)
    assert_close(out, vector_map(x, 0.8), rtol=1e-12)
    assert_close(t, _fd_directional(vector_map, (x, 0.8), (v, 0.3)))
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

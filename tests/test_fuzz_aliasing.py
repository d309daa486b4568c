"""Aliasing fuzzer: random programs with views, aliases, rebinding and in-place writes
(tests/fuzz_aliasing.py) must give NumPy's value and a gradient matching finite differences, or be
refused with a located UnsupportedError. A silent difference, or any other exception, fails.

CI runs a fixed profile: S2SAD_ALIAS_FUZZ_EXAMPLES seeds on the python backend (default 40) and
S2SAD_ALIAS_FUZZ_NUMBA_EXAMPLES on numba (default 8), each of those also on float32 arguments (NumPy's dtype
and value), from seed S2SAD_ALIAS_FUZZ_FIRST (default 0). For a
long run, on demand, spread over the machine's cores:

    S2SAD_ALIAS_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest -n 0 -q tests/test_fuzz_aliasing.py -k python
    S2SAD_ALIAS_FUZZ_FIRST=1500 S2SAD_ALIAS_FUZZ_NUMBA_EXAMPLES=8500 \
        .venv/bin/python -m pytest -n 16 -q tests/test_fuzz_aliasing.py -k numba

`python tests/fuzz_aliasing.py SEED` prints the program of a failing seed.
"""

import os
import re

import numpy as np
import pytest

import s2sad
from fuzz_aliasing import AliasingProgram, draw_program
from helpers import assert_close

EXAMPLES = int(os.environ.get("S2SAD_ALIAS_FUZZ_EXAMPLES", "40"))
NUMBA_EXAMPLES = int(os.environ.get("S2SAD_ALIAS_FUZZ_NUMBA_EXAMPLES", "8"))
FIRST = int(os.environ.get("S2SAD_ALIAS_FUZZ_FIRST", "0"))


def _copies(args):
    return tuple(np.array(a, copy=True) for a in args)


def _fd(f, args, h):
    """4-point central differences of `f` (always called on copies: it may write into its arguments)."""
    def at(k, i, step):
        shifted = list(_copies(args))
        shifted[k][i] += step
        return float(f(*shifted))

    grads = []
    for k, a in enumerate(args):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            g[i] = (-at(k, i, 2 * h) + 8 * at(k, i, h) - 8 * at(k, i, -h) + at(k, i, -2 * h)) / (12 * h)
        grads.append(g)
    return grads


def _points(program: AliasingProgram):
    yield program.arguments()
    for k in (2, 3):
        rng = np.random.default_rng([program.seed, k])
        x = rng.uniform(-1.5, 1.5, program.n)
        yield (x, rng.uniform(-1.0, 1.0, (3, program.n))) if program.has_m else (x,)


def _smooth_point(f, program):
    """A point where finite differences with two step sizes agree (no branch flips nearby), or None."""
    for args in _points(program):
        fine, coarse = _fd(f, args, 1e-3), _fd(f, args, 2e-3)
        if all(np.allclose(a, b, rtol=1e-7, atol=1e-7) for a, b in zip(fine, coarse)):
            return args, fine
    return program.arguments(), None


def check_aliasing_program(seed: int, backend: str) -> None:
    program = draw_program(seed)
    f = program.function()
    args, fd = _smooth_point(f, program)
    expected = float(f(*_copies(args)))
    inputs = _copies(args)
    argnums = tuple(range(len(args)))
    try:
        value, grads = s2sad.value_and_grad(f, argnums=argnums, backend=backend)(*inputs)
    except s2sad.UnsupportedError as error:
        message = str(error)
        path = f.__code__.co_filename
        assert re.match(rf"{re.escape(path)}:\d+:\d+: ", message), f"refused without a location:\n{message}"
        return
    assert_close(value, expected, rtol=1e-12, atol=1e-12)
    for given, passed in zip(inputs, args):
        np.testing.assert_array_equal(given, passed, err_msg="s2sad changed the caller's array")
    if fd is not None:
        for g, expected_g in zip(grads, fd):
            assert_close(g, expected_g)


@pytest.mark.parametrize("seed", range(FIRST, FIRST + EXAMPLES))
def test_aliasing_program_python(seed):
    check_aliasing_program(seed, "python")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(FIRST, FIRST + NUMBA_EXAMPLES))
def test_aliasing_program_numba(seed):
    check_aliasing_program(seed, "numba")


def check_float32_program(seed: int) -> None:
    """The program on float32 arguments: compiled, its value has NumPy's dtype and (to float32's precision)
    NumPy's value, and each gradient is float32 and close to the float64 gradient at the same point."""
    program = draw_program(seed)
    f = program.function()
    args = tuple(np.asarray(a, dtype=np.float32) for a in program.arguments())
    expected = f(*_copies(args))
    argnums = tuple(range(len(args)))
    try:
        value, grads = s2sad.value_and_grad(f, argnums=argnums, backend="numba")(*_copies(args))
    except s2sad.UnsupportedError:
        return
    assert np.asarray(value).dtype == np.asarray(expected).dtype
    assert_close(value, expected, rtol=1e-4, atol=1e-4)
    wide = s2sad.value_and_grad(f, argnums=argnums, backend="python")(*(np.float64(a) for a in args))[1]
    for g, w in zip(grads, wide):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * max(1.0, np.max(np.abs(w))))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(FIRST, FIRST + NUMBA_EXAMPLES))
def test_aliasing_program_float32(seed):
    check_float32_program(seed)

"""Fuzzing the compiled path on broadcasting 2-D programs (tests/fuzz_broadcast.py).

For each program and random point: the python backend's gradient agrees with central finite
differences along a random direction (where the program is smooth there: two step sizes agree),
and the numba backend's value, gradient and jvp agree with the python backend's to rounding,
with every array argument handed to numba in a random memory layout (C, Fortran, or a strided
view into a larger array). The python backend is the oracle for numba because both run the same
generated source: any difference is in the compiled-text rewrites or the runtime helpers.

Second order, on the python backend: forward mode over the generated gradient (what `hessian` and
`jacfwd(grad(f))` run) agrees with central differences of that gradient.

CI runs a fixed-seed profile of S2SAD_FUZZ_BROADCAST_EXAMPLES programs (default 4; each compiles
two numba modules) and S2SAD_FUZZ_BROADCAST_EXAMPLES_2ND second-order ones (default 25). For a long
run, on demand:

    S2SAD_FUZZ_BROADCAST_EXAMPLES=200 S2SAD_FUZZ_RANDOM=1 .venv/bin/python -m pytest -n 2 -q tests/test_fuzz_broadcast.py

Every bug it found is a named regression test at the end of this file.
"""

import os

import numpy as np
import pytest
from hypothesis import assume, given, note, seed
from hypothesis import strategies as st

import s2sad
from fuzz_broadcast import BroadcastProgram, broadcast_programs
from test_fuzz import SEED, fuzz_settings

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("S2SAD_FUZZ_BROADCAST_EXAMPLES", "4"))
SECOND_ORDER_EXAMPLES = int(os.environ.get("S2SAD_FUZZ_BROADCAST_EXAMPLES_2ND", "25"))  # python backend: cheap
STEP = 1e-6
RTOL_FD = 1e-5
RTOL_BACKENDS = 1e-9  # the same formulas; vectorized exp/log/tanh (2 ulp) and reordered sums differ in rounding


def _flat(values) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in values])


def _close(actual, expected, what: str, rtol: float, scale: float | None = None) -> None:
    actual, expected = _flat(actual), _flat(expected)
    scale = 1.0 + (np.max(np.abs(expected), initial=0.0) if scale is None else scale)
    worst = np.max(np.abs(actual - expected), initial=0.0)
    assert worst <= rtol * scale, f"{what}: off by {worst:.3g} (scale {scale:.3g})\n{actual}\n{expected}"


def relaid(value, layout: str):
    """`value` with the same entries in another memory layout: numba compiles a specialization per layout."""
    if np.ndim(value) < 2 or layout == "C":
        return value
    if layout == "F":
        return np.asfortranarray(value)
    big = np.full((2 * value.shape[0] + 1, 3 * value.shape[1]), np.nan)
    view = big[1::2, ::3]
    view[...] = value
    return view


def finite_point(program: BroadcastProgram, point_seed: int):
    """(the function, the point's generator, a random point where its value is finite and moderate, the value)."""
    note(program.source)
    f = program.function()
    rng = np.random.default_rng(point_seed)
    args = program.arguments(rng)
    with np.errstate(all="ignore"):
        value = f(*args)
    assume(np.isfinite(value) and abs(value) < 1e6)
    return f, rng, args, value


def check_broadcast_program(program: BroadcastProgram, point_seed: int, layouts: tuple[str, ...]) -> None:
    f, rng, args, value = finite_point(program, point_seed)
    argnums = tuple(range(len(args)))
    direction = tuple(rng.normal(size=np.shape(a)) if np.ndim(a) else float(rng.normal()) for a in args)

    value_py, grads_py = s2sad.value_and_grad(f, argnums=argnums, backend="python")(*args)
    _close([value_py], [value], "python backend's value", RTOL_BACKENDS)
    slope = sum(float(np.sum(g * d)) for g, d in zip(grads_py, direction))
    slope_scale = sum(float(np.sum(np.abs(g * d))) for g, d in zip(grads_py, direction))  # before cancellation

    def along(t):
        return f(*(a + t * d for a, d in zip(args, direction)))

    with np.errstate(all="ignore"):
        fine = (along(STEP) - along(-STEP)) / (2 * STEP)
        coarse = (along(30 * STEP) - along(-30 * STEP)) / (60 * STEP)
    smooth = abs(fine - coarse) <= 1e-4 * (1.0 + abs(fine))
    note(f"smooth around the point: {smooth}")
    if smooth:
        _close([slope], [fine], "python backend's gradient vs central differences", RTOL_FD, slope_scale)

    note(f"numba layouts: {layouts}")
    laid = tuple(relaid(a, layout) for a, layout in zip(args, layouts))
    value_nb, grads_nb = s2sad.value_and_grad(f, argnums=argnums)(*laid)
    _close([value_nb], [value_py], "numba backend's value", RTOL_BACKENDS)
    _close(grads_nb, grads_py, "numba backend's gradient", RTOL_BACKENDS)
    _, tangent_nb = s2sad.jvp(f, laid, tuple(relaid(d, layout) for d, layout in zip(direction, layouts)))
    _close([tangent_nb], [slope], "numba backend's jvp vs the python backend's gradient", RTOL_BACKENDS, slope_scale)


@fuzz_settings(EXAMPLES)
@seed(SEED + 2)
@given(broadcast_programs(), st.integers(0, 2**32 - 1), st.lists(st.sampled_from("CFV"), min_size=6, max_size=6))
def test_random_broadcast_programs(program, point_seed, layouts):
    check_broadcast_program(program, point_seed, tuple(layouts))


def check_second_order(program: BroadcastProgram, point_seed: int) -> None:
    """Forward mode over the generated gradient (what `hessian` runs) vs central differences of that gradient."""
    f, rng, args, _ = finite_point(program, point_seed)
    grad_x = s2sad.grad(f, argnums=0, backend="python")
    assert np.all(np.isfinite(grad_x(*args))), "a finite program with a non-finite gradient"  # assume() below
    # would skip it: differences of a NaN gradient are never smooth
    direction = rng.normal(size=args[0].shape)
    zero = tuple(np.zeros_like(a) if np.ndim(a) else 0.0 for a in args[1:])
    _, hvp = s2sad.jvp(grad_x, args, (direction, *zero), backend="python")

    def along(t, step=1.0):
        return grad_x(args[0] + t * step * direction, *args[1:])

    with np.errstate(all="ignore"):
        fine = (along(STEP) - along(-STEP)) / (2 * STEP)
        coarse = (along(30 * STEP) - along(-30 * STEP)) / (60 * STEP)
    scale = float(np.max(np.abs(fine), initial=0.0))
    smooth = np.max(np.abs(fine - coarse), initial=0.0) <= 1e-4 * (1.0 + scale)
    note(f"smooth around the point: {smooth}")
    assume(smooth)
    _close([hvp], [fine], "forward over reverse vs central differences of the gradient", RTOL_FD)


@fuzz_settings(SECOND_ORDER_EXAMPLES)
@seed(SEED + 3)
@given(broadcast_programs(), st.integers(0, 2**32 - 1))
def test_random_broadcast_programs_second_order(program, point_seed):
    check_second_order(program, point_seed)

"""Property-based fuzzing: random programs (tests/fuzz_programs.py), differentiated in both modes.

For each program and random point, forward mode (jvp) and reverse mode (vjp) must agree with
each other (<u, jvp(v)> == <vjp(u), v>), with the primal, and with central finite differences
wherever the program is smooth around the point (finite differences with two step sizes agree;
a branch or a max switching within a step is not a bug).

CI runs a fixed-seed profile (`derandomize=True`): S2SAD_FUZZ_EXAMPLES programs on the python
backend (default 100) and S2SAD_FUZZ_NUMBA_EXAMPLES on numba (default 25, as large as the python ones). For a long run, on demand:

    S2SAD_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest -n 0 -q tests/test_fuzz.py

S2SAD_FUZZ_SEED=<int> draws a different fixed sequence; S2SAD_FUZZ_RANDOM=1 a fresh one each run.
Every bug the fuzzer found is a named regression test at the end of this file.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, seed, settings
from hypothesis import strategies as st

import s2sad
from s2sad import synthesize
from fuzz_programs import FLOAT, INT, VECTOR, Program, programs
from fuzz_regressions import (and_condition_in_a_loop, array_rebound_to_itself_plus, while_counter_index_after_rebinding,
                              assigned_in_both_branches_of_a_branch, branch_decided_by_constants,
                              chained_comparison_in_a_loop, constant_rebound_in_a_loop,
                              element_read_beside_an_unknown_rank,
                              early_return_then_conditional_expression, enumerate_rebound_array, full_of_input,
                              loop_over_rebound_array, or_condition_in_a_loop)
from helpers import RTOL_EXACT, assert_close, fd_grad

EXAMPLES = int(os.environ.get("S2SAD_FUZZ_EXAMPLES", "100"))
NUMBA_EXAMPLES = int(os.environ.get("S2SAD_FUZZ_NUMBA_EXAMPLES", "25"))
SEED = int(os.environ.get("S2SAD_FUZZ_SEED", "0"))
RANDOM = os.environ.get("S2SAD_FUZZ_RANDOM") == "1"

STEP = 1e-6
RTOL = 1e-5


def fuzz_settings(examples: int):
    return settings(max_examples=examples, derandomize=not RANDOM, database=None, deadline=None, print_blob=True,
                    report_multiple_bugs=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def _inner(a, b) -> float:
    if isinstance(a, tuple):
        return sum(_inner(x, y) for x, y in zip(a, b))
    return float(np.sum(np.asarray(a, dtype=float) * np.asarray(b, dtype=float)))


def _random_like(rng, value):
    if isinstance(value, tuple):
        return tuple(_random_like(rng, v) for v in value)
    return rng.normal(size=np.shape(value)) if np.ndim(value) else float(rng.normal())


def _shift(args, tangents, positions, step):
    return tuple(a + step * t if i in positions else a for i, (a, t) in enumerate(zip(args, tangents)))


def _difference(f, args, tangents, positions, step):
    hi, lo = f(*_shift(args, tangents, positions, step)), f(*_shift(args, tangents, positions, -step))
    if isinstance(hi, tuple):
        return tuple((np.asarray(h) - np.asarray(l)) / (2 * step) for h, l in zip(hi, lo))
    return (np.asarray(hi) - np.asarray(lo)) / (2 * step)


def _flat(value) -> np.ndarray:
    parts = value if isinstance(value, tuple) else (value,)
    return np.concatenate([np.ravel(np.asarray(p, dtype=float)) for p in parts])


def _assert_close(actual, expected, what: str, scale: float = 1.0):
    actual, expected = _flat(actual), _flat(expected)
    tol = RTOL * (np.abs(expected) + scale)
    assert np.all(np.abs(actual - expected) <= tol), f"{what}: s2sad {actual} vs expected {expected}"


def _floats_only(f, program: Program, args):
    """`f` with its int arguments fixed (vjp differentiates every argument it gets)."""
    if len(program.int_values) == 0:
        return f
    params = [name for name, kind in program.params if kind != INT]
    call = ", ".join(name if kind != INT else repr(a) for (name, kind), a in zip(program.params, args))
    return synthesize.function(f"{program.name}_floats", params, [f"return inner({call})"], {"inner": f})


def check_program(program: Program, backend: str, point_seed: int) -> bool:
    """jvp, vjp, the primal and finite differences of `program` at a random point agree.

    Returns whether the finite-difference comparison ran (the program is smooth around the point).
    """
    note(program.source)
    f = program.function()
    rng = np.random.default_rng(point_seed)
    args = program.arguments(rng)
    positions = [i for i, (_, kind) in enumerate(program.params) if kind in (FLOAT, VECTOR)]
    with np.errstate(all="ignore"):
        out = f(*args)
    assume(np.all(np.isfinite(_flat(out))) and np.max(np.abs(_flat(out))) < 1e4)
    tangents = tuple(_random_like(rng, a) if i in positions else a for i, a in enumerate(args))

    out_fwd, tangent_out = s2sad.jvp(f, args, tangents, backend=backend)
    _assert_close(out_fwd, out, "primal computed by jvp")
    out_rev, vjp_fun = s2sad.vjp(_floats_only(f, program, args), *(args[i] for i in positions), backend=backend)
    _assert_close(out_rev, out, "primal computed by vjp")
    cotangent = _random_like(rng, out)
    cotangents = vjp_fun(cotangent)
    reverse = sum(_inner(c, tangents[i]) for c, i in zip(cotangents, positions))
    _assert_close(reverse, _inner(cotangent, tangent_out), "<vjp(u), v> vs <u, jvp(v)>",
                  scale=1.0 + np.abs(_flat(cotangent)) @ np.abs(_flat(tangent_out)))

    with np.errstate(all="ignore"):
        fine = _difference(f, args, tangents, positions, STEP)
        coarse = _difference(f, args, tangents, positions, 30 * STEP)
    smooth = np.allclose(_flat(fine), _flat(coarse), rtol=1e-4, atol=1e-4)
    note(f"smooth around the point: {smooth}")
    if smooth:
        _assert_close(tangent_out, fine, "jvp vs central finite differences")
    return smooth


@fuzz_settings(EXAMPLES)
@seed(SEED)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_python(program, point_seed):
    check_program(program, "python", point_seed)


@fuzz_settings(NUMBA_EXAMPLES)
@seed(SEED + 1)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_numba(program, point_seed):
    check_program(program, "numba", point_seed)


# -- bugs the fuzzer found, reduced by hand -------------------------------------------------------

REGRESSIONS = [
    (full_of_input, (0.7, np.array([0.5, -1.0, 2.0, 0.25]))),
    (loop_over_rebound_array, (np.array([0.3, -1.2, 0.8]),)),
    (enumerate_rebound_array, (np.array([0.3, -1.2, 0.8]),)),
    (early_return_then_conditional_expression, (1.5,)),
    (early_return_then_conditional_expression, (-0.5,)),
    (early_return_then_conditional_expression, (-1.5,)),
    (assigned_in_both_branches_of_a_branch, (0.4, 1.0)),
    (assigned_in_both_branches_of_a_branch, (-0.4, 1.0)),
    (assigned_in_both_branches_of_a_branch, (0.4, -1.0)),
    *[(f, (x,)) for f in (and_condition_in_a_loop, or_condition_in_a_loop, chained_comparison_in_a_loop)
      for x in (-0.3, 0.5, 1.2)],
    (array_rebound_to_itself_plus, (np.array([0.3, -0.7, 0.9]),)),
    (while_counter_index_after_rebinding, (np.array([0.35, -1.1, 0.6, 1.3, -0.2]),)),
    (element_read_beside_an_unknown_rank, (0.3, np.array([0.1, 0.2, 0.4, 0.5]))),
    *[(constant_rebound_in_a_loop, (x,)) for x in (0.3, 1.5)],
    (branch_decided_by_constants, (0.3,)),
]


@pytest.mark.parametrize("f, args", REGRESSIONS, ids=lambda v: getattr(v, "__name__", ""))
def test_regression(f, args):
    check_regression(f, args, "python")


def test_regression_numba():  # the code generation is shared: one program on the compiled path
    check_regression(*REGRESSIONS[0], "numba")


def test_element_read_beside_an_unknown_rank_numba():  # refused only where the argument types are known
    check_regression(element_read_beside_an_unknown_rank, (0.3, np.array([0.1, 0.2, 0.4, 0.5])), "numba")


def test_branch_decided_by_constants_numba():  # numba decides the branch too, and refused what it left
    check_regression(branch_decided_by_constants, (0.3,), "numba")
    assert "np.tanh" not in s2sad.source(branch_decided_by_constants)  # the branch that never runs is gone


def check_regression(f, args, backend):
    out, _ = s2sad.jvp(f, args, tuple(np.zeros_like(a) for a in args), backend=backend)
    assert_close(out, f(*args), rtol=RTOL_EXACT)
    grads = s2sad.grad(f, argnums=tuple(range(len(args))), backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(f, args, i))
    s2sad.check_grads(f, args, backend=backend)


def test_full_of_input_closed_form():
    x, w = 0.7, np.array([0.5, -1.0, 2.0, 0.25])
    expected = np.sum(np.cos(x * x) * w) * 2 * x
    assert_close(s2sad.grad(full_of_input, backend="python")(x, w), expected, rtol=RTOL_EXACT)

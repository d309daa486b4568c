"""Loops, branches, while, break/continue, early return, helpers and in-place writes: both modes vs finite differences."""

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_directional, fd_grad
from programs import PROGRAMS


def _id(case):
    fn, args, argnums = case
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


@pytest.mark.parametrize("case", PROGRAMS, ids=[_id(c) for c in PROGRAMS])
def test_both_modes_match_finite_differences_and_each_other(case, backend, rng):
    """Reverse mode (value_and_grad) and forward mode (jvp) against finite differences, and
    <vjp(u), v> == <u, jvp(v)>: the two modes are transposes of each other.

    One test per program and backend, so that numba compiles each program's vjp and jvp once for
    all three checks (they were three tests, which compiled them again in each xdist worker, and
    the transpose check compiled a separate `grad`)."""
    fn, args, argnums = case
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    value, grads = s2sad.value_and_grad(fn, argnums, backend=backend)(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    grads = grads if isinstance(argnums, tuple) else (grads,)
    for n, g in zip(nums, grads):
        assert np.shape(g) == np.shape(args[n])
        assert_close(g, fd_grad(fn, args, n))

    tangents = _directions(args, argnums, rng)
    out, tangent_out = s2sad.jvp(fn, args, tangents, backend=backend)
    assert_close(out, fn(*args), rtol=1e-12)
    assert np.shape(tangent_out) == np.shape(out)
    assert_close(tangent_out, fd_directional(fn, args, tangents))

    u = 1.7
    lhs = sum(float(np.sum(u * g * tangents[n])) for n, g in zip(nums, grads))
    assert lhs == pytest.approx(u * float(tangent_out), rel=1e-9, abs=1e-12)


SOURCES = """
import json, sys
import s2sad
import programs as p

json.dump({
    "branches_in_loop, reverse": s2sad.source(p.branches_in_loop),
    "nested_overwriting_loops (tapes), reverse": s2sad.source(p.nested_overwriting_loops, (0, 1)),
    "calls_helpers (inlined), reverse": s2sad.source(p.calls_helpers, (0, 1)),
    "recurrence, forward": s2sad.source(p.recurrence, (0, 1), mode="fwd"),
    "newton_sqrt (while), reverse over reverse": s2sad.source(p.newton_sqrt, order=2),
}, sys.stdout)
"""


def test_generated_source_is_the_same_in_two_fresh_processes(tmp_path):
    """Each process starts from an empty cache of its own (nothing to read back) and its own string hash
    seed (set and dict orders that depend on it would show), and generates the code itself."""
    runs = [subprocess.Popen([sys.executable, "-c", SOURCES], cwd=Path(__file__).parent, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path / f"cache{i}"), PYTHONHASHSEED=str(i)))
            for i in (1, 2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err for _, err in outputs]
    first, second = (json.loads(out.replace(str(tmp_path / f"cache{i}"), "$S2SAD_CACHE_DIR"))  # (second order's
                     for i, (out, _) in zip((1, 2), outputs))  # header names the first-order module's file)
    assert len(first) == 5 and all("def " in text for text in first.values())
    for what, text in first.items():
        assert second[what] == text, f"{what}: " + "\n".join(difflib.unified_diff(
            text.splitlines(), second[what].splitlines(), "process 1", "process 2", lineterm=""))


def test_inactive_values_get_no_adjoint_code():
    from programs import recurrence

    import re

    text = s2sad.source(recurrence, 0)
    for name in ("n_bar", "t_bar", "sub_bar", "x_shape_bar"):
        assert not re.search(rf"\b{name}\b", text), name
    assert not re.search(r"\bw_bar\b", text)  # w is not differentiated here: argnums=0


def test_write_once_recurrence_needs_no_tape():
    from programs import recurrence

    assert "List()" not in s2sad.source(recurrence, (0, 1))


def test_while_loop_tapes_only_the_overwritten_value():
    from programs import newton_sqrt

    text = s2sad.source(newton_sqrt)
    assert text.count("List()") == 1 and "x_tape = List()" in text


def newton_or_fallback(a, x0):
    """A search written with `for ... else`: the else runs where no `break` ended the loop."""
    x = x0
    for i in range(6):
        step = (x * x - a) / (2 * x)
        x = x - step
        if abs(step) < 1e-12:
            break
    else:
        x = x * 3.0
    return x


def first_large(x):
    """`while ... else` around a loop whose own `break` leaves only the inner loop."""
    s = 0.0
    i = 0
    while i < x.shape[0]:
        for j in range(3):
            if j == 2:
                break
            s += x[i] * (j + 1.0)
        if x[i] > 0.8:
            s += x[i] ** 2
            break
        i += 1
    else:
        s = s * 10.0
    return s


@pytest.mark.parametrize("f, args", [(newton_or_fallback, (2.0, 1.0)), (newton_or_fallback, (2.0, 100.0)),
                                     (first_large, (np.array([0.1, 0.9, 0.3]),)),
                                     (first_large, (np.array([0.1, 0.2, 0.3]),))])
def test_a_loops_else_runs_where_no_break_ended_it(f, args, backend):
    assert_close(s2sad.grad(f, backend=backend)(*args), fd_grad(f, args, 0))
    direction = np.ones_like(args[0])
    assert_close(s2sad.jvp(lambda v: f(v, *args[1:]), (args[0],), (direction,), backend=backend)[1],
                 fd_directional(f, args, (direction,) + tuple(np.zeros_like(a) for a in args[1:])))


def weighted_powers(x):
    """numba's literal_unroll of a tuple: a loop unrolled when the code is generated, as numba unrolls it."""
    s = 0.0
    for c in numba.literal_unroll((1.0, 2.0, 3.0)):
        s += c * np.sum(x ** c)
    return s


def test_literal_unroll_is_a_loop_over_its_tuple(backend):
    x = np.array([0.3, -0.8, 1.2])
    assert_close(s2sad.grad(weighted_powers, backend=backend)(x), fd_grad(weighted_powers, (x,), 0))


def squares_through_flat(x):
    """numba kernels walk an array of any shape through .flat: read, written and updated one item at a time."""
    out = np.empty_like(x)
    acc = np.zeros((2, 2, 3))
    for k in range(x.size):
        out.flat[k] = x.flat[k] ** 2
        acc.flat[k] += np.sin(x.flat[k])
    return np.sum(out * x.flat[1]) + np.sum(acc ** 2)


def test_items_read_and_written_through_flat(backend):
    x = np.linspace(-1.0, 1.2, 12).reshape(2, 2, 3)
    assert_close(s2sad.grad(squares_through_flat, backend=backend)(x), fd_grad(squares_through_flat, (x,), 0))


def _four_parts(x):
    return x ** 2, np.sin(x), np.cos(x), x * 3.0


def starred_unpacking(x):
    """`a, *rest = t`, `*init, last = t` and `coef, *_ = ...` of a tuple a helper returns."""
    a, *rest = _four_parts(x)
    *init, last = _four_parts(x)
    first, *_ = _four_parts(x)
    return np.sum(a) + np.sum(rest[1]) + sum(np.sum(r) for r in rest) + np.sum(last * init[0]) + np.sum(first)


def test_starred_unpacking_of_a_tuple(backend):
    x = np.array([0.3, -0.5, 0.8])
    assert_close(s2sad.grad(starred_unpacking, backend=backend)(x), fd_grad(starred_unpacking, (x,), 0))

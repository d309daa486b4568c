"""Loops, branches, while, break/continue, early return, helpers and in-place writes vs finite differences."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from programs import PROGRAMS


def _id(case):
    fn, args, argnums = case
    return f"{fn.__name__}{'-' + str(args[0]) if np.ndim(args[0]) == 0 else ''}"


@pytest.mark.parametrize("case", PROGRAMS, ids=[_id(c) for c in PROGRAMS])
def test_gradient_matches_finite_differences(case, backend):
    fn, args, argnums = case
    value, grads = s2sad.value_and_grad(fn, argnums, backend=backend)(*args)
    assert_close(value, fn(*args), rtol=1e-12)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    grads = grads if isinstance(argnums, tuple) else (grads,)
    for n, g in zip(nums, grads):
        assert np.shape(g) == np.shape(args[n])
        assert_close(g, fd_grad(fn, args, n))


def test_generated_source_is_deterministic():
    fn, _, argnums = PROGRAMS[1]
    assert s2sad.source(fn, argnums) == s2sad.source(fn, argnums)


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

"""Closure: the code s2sad generates is itself s2sad input, and differentiating it again gives the right numbers.

Forward mode over a generated gradient, `jvp(grad(f))` (a Hessian-vector product, what `hessian` runs), reads
the adjoint's text back - its tapes, flags, inlined helpers and the runtime helpers it calls (`unbroadcast`,
`sum_adjoint`, `matmul_adjoint_a`, ...: they have rules of their own, rules/helpers.py) - generates its tangent
code and runs it. The result must match central finite differences of that gradient along the same direction,
for every program of programs.py and for every differentiable rule (its first check, at that check's last shape,
the broadcast or matrix case, inside `np.sum(out * out)` so that the second derivative reads the rule's first
as well as its second). On the python backend: it runs the text numba would compile, and numba's compiles of
second-order code are tested by test_higher_order.py and test_numpy_programs.py.
"""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_directional
from programs import PROGRAMS
from rule_checks import CASES, case_args, check_function, operands


def _flat(grads):
    """One vector of the gradients (jvp gives a one-element tuple of grad(argnums=(0,)) as the element alone)."""
    return np.concatenate([np.ravel(np.asarray(g, dtype=float)) for g in (grads if isinstance(grads, tuple) else (grads,))])


def _assert_hvp_matches_finite_differences(f, args, argnums, rng, step=1e-6):
    """jvp of s2sad's gradient of `f` along a random direction of the differentiated arguments vs central
    finite differences of that gradient (ints stay constant, other arguments get a zero tangent)."""
    grad = s2sad.grad(f, argnums=argnums, backend="python")
    tangents = [a if isinstance(a, (int, np.integer)) else
                (rng.normal(size=np.shape(a)) if np.ndim(a) else float(rng.normal())) if i in argnums else
                (np.zeros_like(a) if np.ndim(a) else 0.0) for i, a in enumerate(args)]
    out, tangent_out = s2sad.jvp(grad, tuple(args), tuple(tangents), backend="python")
    assert_close(_flat(out), _flat(grad(*args)), rtol=1e-12)
    assert_close(_flat(tangent_out), fd_directional(lambda *a: _flat(grad(*a)), args, tangents, eps=step))


def _program_id(case):
    fn, args, _ = case
    return f"{fn.__name__}{'-' + str(args[0]) if np.ndim(args[0]) == 0 else ''}"


@pytest.mark.parametrize("case", PROGRAMS, ids=[_program_id(c) for c in PROGRAMS])
def test_forward_over_reverse_of_each_program(case):
    fn, args, argnums = case
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    _assert_hvp_matches_finite_differences(fn, list(args), nums, np.random.default_rng(3))


FIRST_CHECKS = list({rule.name: (rule, check, check.shapes[-1])
                     for rule, check, _ in reversed(CASES)}.values())  # (reversed: the first check wins)


@pytest.mark.parametrize("case", FIRST_CHECKS, ids=[c[0].name for c in FIRST_CHECKS])
def test_forward_over_reverse_of_each_rule(case, tmp_path_factory):
    rule, check, _ = case
    names = operands(check.expr)
    f = check_function(check.expr, names, tmp_path_factory, body="out = {expr}\nreturn np.sum(out * out)")
    _assert_hvp_matches_finite_differences(f, case_args(case, "closure"), tuple(range(len(names))),
                                           np.random.default_rng(4), check.step)


def test_every_rule_is_differentiated_twice():
    assert {c[0].name for c in FIRST_CHECKS} == {rule.name for rule, _, _ in CASES}

"""Every registered rule's adjoint and tangent against central finite differences, scalars and broadcast shapes."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from rule_checks import CASES, RULES, case_args, case_id, case_rng, check_function, operands, sample, shapes
from s2sad import ir
from s2sad.api import _arg_kinds
from s2sad.normalize import normalize
from s2sad.rules import all_rules

# Every shape on the python backend (the same generated source); on numba, which compiles that
# source, the last (usually broadcast or matrix) shape of each check: one compile per check, not
# per shape, keeps the suite within CI's time.
BY_BACKEND = [("python", c) for c in CASES] + [
    ("numba", (rule, check, check.shapes[-1])) for rule in RULES for check in rule.checks]


def test_every_differentiable_rule_has_checks():
    missing = [r.name for r in RULES if not r.checks]
    assert not missing, f"rules without finite-difference checks: {missing}"


def _assert_same_value(out, expected):
    """s2sad's primal against the function's own: the inputs are O(1), so an element left near 0 by
    cancellation (x - mean(x)) may differ by an ulp of the inputs, not of itself."""
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend, case", BY_BACKEND, ids=[f"{b}-{case_id(c)}" for b, c in BY_BACKEND])
def test_rule_adjoint_matches_finite_differences(case, backend, tmp_path_factory):
    rule, check, shape = case
    rng = case_rng(case_id(case))
    names = operands(check.expr)
    f = check_function(check.expr, names, tmp_path_factory)
    args = [sample(rng, s, check.domain) for s in shapes(shape, len(names))]
    out, vjp_fun = s2sad.vjp(f, *args, backend=backend)
    _assert_same_value(out, f(*args))
    cot = rng.normal(size=np.shape(out)) if np.ndim(out) else 1.3
    grads = vjp_fun(cot)

    def weighted(*a):
        return float(np.sum(cot * f(*a)))

    for i, g in enumerate(grads):
        assert np.shape(g) == np.shape(args[i]), f"adjoint of operand {names[i]} has the wrong shape"
        assert_close(g, fd_grad(weighted, args, i, eps=check.step))


@pytest.mark.parametrize("backend, case", BY_BACKEND, ids=[f"{b}-{case_id(c)}" for b, c in BY_BACKEND])
def test_rule_tangent_matches_finite_differences(case, backend, tmp_path_factory):
    rule, check, shape = case
    rng = case_rng("tangent" + case_id(case))
    names = operands(check.expr)
    f = check_function(check.expr, names, tmp_path_factory)
    args = [sample(rng, s, check.domain) for s in shapes(shape, len(names))]
    tangents = [rng.normal(size=np.shape(a)) if np.ndim(a) else float(rng.normal()) for a in args]
    out, tangent_out = s2sad.jvp(f, args, tangents, backend=backend)
    _assert_same_value(out, f(*args))
    eps = check.step
    plus = f(*[a + eps * t for a, t in zip(args, tangents)])
    minus = f(*[a - eps * t for a, t in zip(args, tangents)])
    assert np.shape(tangent_out) == np.shape(out)
    assert_close(tangent_out, (plus - minus) / (2 * eps))


def _rules_called(f, names, args) -> set[str]:
    """The rules of the primitives `f` lowers to for these arguments: what its derivatives are made of."""
    kinds = {p: tuple(kind) for p, *kind in _arg_kinds(names, None, args)}  # (ndim, type, unit axes, dtype)
    fn = normalize(f, arg_kinds=kinds)
    prims = [s.value if isinstance(s, ir.Assign) else s.call for s, _, _ in ir.walk(fn.body)]
    return {p.rule.name for p in prims if isinstance(p, ir.Prim)}


def test_every_registered_rule_is_differentiated_by_its_own_checks(tmp_path_factory):
    """The finite-difference cases above test a rule only if its checks call it: a check whose expression
    lowers to other primitives (a copy-pasted `np.sin(a)` under the cos rule, a spelling the frontend
    rewrites) would pass without testing it, as would a rule registered after the cases were collected."""
    registered = {r.name for r in all_rules() if r.differentiable}
    collected = {rule.name for rule, _, _ in CASES}
    assert registered == collected, (f"registered but never run: {sorted(registered - collected)}; "
                                     f"run but no longer registered: {sorted(collected - registered)}")
    exercised = set()
    for rule, check, shape in CASES:
        if rule.name in exercised:
            continue
        names = operands(check.expr)
        args = case_args((rule, check, shape))
        if rule.name in _rules_called(check_function(check.expr, names, tmp_path_factory), names, args):
            exercised.add(rule.name)
    missing = sorted(registered - exercised)
    assert not missing, f"rules none of whose checks calls them (their derivatives go untested): {missing}"

"""The clean-up passes over generated lines (s2sad/codegen/fuse.py, prune.py) on their own: what they decide
from parsed statements, the text they write, and that folded code computes what the unfolded code does."""

import numpy as np
import pytest

import s2sad
from s2sad.codegen.fuse import fuse_elementwise
from s2sad.codegen.prune import (drop_dead_adjoints, names_read, names_read_first, negate_after_summing,
                                 start_from_first_contribution)
from s2sad.codegen.statements import parse

TEMPS = {"t", "u"}


def run(lines: list[str], **values) -> dict:
    """The variables after running `lines` (a 4-space body) with `values` bound."""
    scope = {"np": np, **values}
    exec("\n".join(line[4:] for line in lines), scope)
    return scope


def folds_to(lines: list[str], want: str, **values):
    """`lines` fold into the one line `want`, which computes the last line's target as the lines did."""
    folded = fuse_elementwise(lines, TEMPS)
    assert folded == [want]
    target = parse(want).binding[0]
    assert np.array_equal(run(folded, **values)[target], run(lines, **values)[target])


@pytest.mark.parametrize("lines, want", [
    (["    t = n // 3", "    w = -t"], "    w = -(n // 3)"),  # not -n // 3, which is -3 for n = 7
    (["    t = n // 3", "    w = x ** -t"], "    w = x ** -(n // 3)"),
    (["    t = b - c", "    w = a - t"], "    w = a - (b - c)"),
    (["    t = a - b", "    w = t - c"], "    w = a - b - c"),
    (["    t = a + b", "    w = t * c"], "    w = (a + b) * c"),
    (["    t = a * b", "    w = np.log(t)"], "    w = np.log(a * b)"),
    (["    t = a * b", "    w = c - t"], "    w = c - a * b"),
    (["    t = -a", "    w = t ** 2"], "    w = (-a) ** 2"),
    (["    t = a ** 2", "    w = -t"], "    w = -a ** 2"),  # -(a ** 2): the power binds first
    (["    t = -a", "    w = -t"], "    w = -(-a)"),
    (["    t = a * b", "    w = c ** t"], "    w = c ** (a * b)"),
    (["    t = a ** b", "    w = t ** c"], "    w = (a ** b) ** c"),  # ** groups from the right
    (["    t = a * b", "    u = c - t", "    w = np.exp(u - x)"], "    w = np.exp(c - a * b - x)"),
])
def test_a_fold_has_the_parentheses_python_needs(lines, want):
    folds_to(lines, want, n=7, a=np.array([1.5, -2.0]), b=np.array([0.5, -3.0]), c=2.0, x=1.25)


def test_a_name_is_matched_whole_not_as_part_of_a_longer_name_an_attribute_or_a_string():
    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    folds_to(["    t = a * b", "    w = t2 * t"], "    w = t2 * (a * b)", a=a, b=b, t2=2.0)
    folds_to(["    t = a * b", "    w = a.size + t"], "    w = a.size + a * b", a=a, b=b)
    folds_to(["    t = a * b", "    w = np.full(2, len('t')) * t"], "    w = np.full(2, len('t')) * (a * b)", a=a, b=b)


@pytest.mark.parametrize("lines", [
    ["    t = a * b", "    w = [t * y for y in a]"],  # would run once per element
    ["    t = a * b", "    w = [t for t in a]"],  # the comprehension's own t
    ["    t = a * b", "    a, c = c, a", "    w = t + 1.0"],  # an operand rebound by a tuple assignment
    ["    t = a * b", "    a = c", "    w = t + 1.0"],
    ["    t = a * b", "    a[0] = 1.0", "    w = t + 1.0"],  # ... changed through a subscript
    ["    t = a * b", "    a **= 2.0", "    w = t + 1.0"],  # ... by an augmented assignment
    ["    t = a * b", "    a //= 2.0", "    w = t + 1.0"],
    ["    t = a * b", "    t[0] = 1.0", "    w = t + 1.0"],  # the temporary itself changed
    ["    t = a * b", "    t += 1.0", "    w = t"],
    ["    t = a * b", "    w = t", "    y = t"],  # read twice
    ["    t = a * b", "    if c:", "        w = t"],  # read in a branch
    ["    t = b_bar * 2.0", "    a_bar = b_bar", "    a_bar += 1.0", "    w = t"],  # shares b_bar's memory
])
def test_what_does_not_fold(lines):
    assert fuse_elementwise(lines, TEMPS) == lines


def test_a_fold_keeps_the_use_as_written_and_drops_the_comment_left_alone():
    lines = ["    # t = a * b", "    t = a * b", "    # w = f(t, 'x')", "    w = f(t, 'x')  # kept"]
    assert fuse_elementwise(lines, TEMPS) == ["    # w = f(t, 'x')", "    w = f(a * b, 'x')  # kept"]


def test_names_read_are_names_not_attributes_or_strings():
    lines = ["    y = x.t + f('u')  # z", "    for i in range(n):", "    # q"]
    assert names_read(lines) == {"y", "x", "f", "i", "range", "n"}


def test_names_read_first_counts_a_binding_in_its_own_block_only():
    lines = ["    a = x", "    b = a + c", "    for i in range(n):", "        d = i * b", "        e = d",
             "    if p:", "        f = 1.0", "    else:", "        g = f", "    h += g"]
    assert names_read_first(lines) == {"x", "c", "range", "n", "p", "f", "g", "h"}


def test_a_dead_adjoint_goes_and_a_live_one_stays():
    lines = ["    a_bar = g * w", "    b_bar = g * 2.0", "    b_bar += [a_bar for _ in range(2)][0]",
             "    d_bar = g * 3.0", "    for i in range(2):", "        c_bar += g", "    return b_bar"]
    assert drop_dead_adjoints(lines, {"a_bar", "b_bar", "c_bar", "d_bar"}, {"b_bar"}) == lines[:3] + lines[4:]


def test_a_first_contribution_keeps_its_text_as_written():
    lines = ["    a_bar = zeros_like_adj(a)", "    a_bar2 = g", "    a_bar += unbroadcast(g * (-2), a_bar)"]
    want = [lines[1], "    a_bar = unbroadcast(g * (-2), a)"]  # a_bar2 is another name
    assert start_from_first_contribution(lines, {"a_bar", "a_bar2"}) == want


def test_the_sign_waits_for_the_sum_only_for_the_exact_forms():
    assert negate_after_summing(["    a_bar += unbroadcast(-g, a_bar)  # why"]) == [
        "    a_bar -= unbroadcast(g, a_bar)  # why"]
    kept = ["    a_bar += unbroadcast(-g, a_bar, 1)", "    a_bar += unbroadcast(-g.T, a_bar)",
            "    a_bar *= unbroadcast(-g, a_bar)"]
    assert negate_after_summing(kept) == kept


def test_a_line_that_is_not_one_statement_is_refused():
    with pytest.raises(ValueError, match="not one statement"):
        parse("    y = f(a,")


def negated_floor_third(x, n):
    return x * -(n // 3)


def test_a_negated_floor_division_against_its_closed_form():
    """The folded `-(n // 3)`: written `-n // 3` it would be -3 for n = 7, not -2."""
    g = s2sad.grad(negated_floor_third, backend="python")(1.5, 7)
    assert g == -2.0

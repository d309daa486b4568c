"""Programs the fuzzer (tests/test_fuzz.py) found bugs with, reduced by hand; each is a regression test.

Functions live in this file because s2sad reads their source.
"""

import numpy as np


def full_of_input(x, w):
    """np.full's fill value was a zero-derivative operand: the derivative of `v` was silently 0."""
    v = np.full(4, x * x)
    return np.sum(np.sin(v) * w)


def loop_over_rebound_array(v):
    """`for e in v` walks the array bound before the loop; the body rebinding `v` changed what s2sad read."""
    s = 0.0
    for e in v:
        s = s + e * e
        v = v * 2.0
    return s + np.sum(v)


def enumerate_rebound_array(v):
    s = 0.0
    for i, e in enumerate(v):
        v = np.sin(v) + e
        s = s + (i + 1.0) * e
    return s * np.sum(v)


def early_return_then_conditional_expression(x):
    """The adjoint of `choice` (the conditional expression) was zeroed before the function's
    top level, where `choice` is unbound when the early return was taken (UnboundLocalError)."""
    if x > 0.0:
        return x * 2.0
    return x + (x * x if x > -1.0 else 0.5)


def assigned_in_both_branches_of_a_branch(x, c):
    """Same bug without a return: `t` is assigned on every path of the inner `if`, so its adjoint
    belongs inside the outer branch, not at the top where `t` may be unbound."""
    if c > 0.0:
        if x > 0.0:
            t = x * x
        else:
            t = np.sin(x)
        y = t * c
    else:
        y = x * 3.0
    return y


def and_condition_in_a_loop(x):
    """`a and b` lowers to `cond = a; if cond: cond = b`: the reverse sweep tested the overwritten
    `cond` to undo that `if`, popped the tape once too few and read stale values (wrong gradient)."""
    for i in range(2):
        x = x * (x if x <= 1.0 and x > 0.0 else np.cos(x))
    return x


def or_condition_in_a_loop(x):
    for i in range(2):
        x = x * (np.cos(x) if x > 1.0 or x < 0.0 else x)
    return x


def chained_comparison_in_a_loop(x):
    for i in range(2):
        x = x * (x if 0.0 < x <= 1.0 else np.cos(x))
    return x


def array_rebound_to_itself_plus(v):
    """`h = h + h * v` on an array: the adjoint of `h * v` was `h_bar` itself (an alias), so the
    later `h_bar += ...` of the same statement changed it too (wrong gradient)."""
    h = np.ones(3)
    h = h + h * v
    h += h * v
    return np.sum(h)



def while_counter_index_after_rebinding(v0):
    """The fuzzer's program as found (reductions by hand lost the crash). `v2[k - 1]` and `h9[k - 1]`,
    `k` a while counter (k = k + 1), were taken for integer-array indices, and the scatter-add of
    their adjoint crashed ("array is not broadcastable") in reverse mode."""
    v2 = np.ones_like(v0)
    v0 = (v2[0] + v0)
    if -(v2[-3]) ** 2 > ((v0[1] / np.hypot(1.0, v2[2])) / (1.5 + np.tanh(v0[2]))):
        for i3 in range(1, v2.shape[0]):
            v4 = (np.exp(np.tanh(np.minimum(v2, v2))) * 1.0)
    else:
        k5 = 0
        while k5 < 3:
            k5 += 1
            s6 = np.sum(np.diff(v0) ** 2)
            v2 = np.tanh(v2)
            s7 = (v2[-1] - s6)
        s8 = np.var((np.concatenate((v0[1:], v0[:1]))))
    h9 = np.zeros(3)
    for i10 in range(3):
        h9[i10] += np.sinh(np.tanh((i10 + 1.0)))
        v2[1] += ((1.0 + (v2[-1]) ** 2) ** -0.5) ** 3
    k11 = 0
    while k11 < 2:
        k11 += 1
        h9 /= np.sqrt(1.0 + ((((v2[(k11 - 1)] + v0[0]) + np.mean(v2)) * h9)) ** 2)
        s12 = (np.min(v2) if (v2[2] / (1.0 + (h9[(k11 - 1)]) ** 2)) > h9[(k11 - 1)] and np.sum(v0) > 0.0
               else (((k11 - 1) + 1.0) / np.sqrt(1.0 + (h9[(k11 - 1)]) ** 2)))
    v2[-1] -= h9[0]
    return (np.sum(np.sin(v0)) + np.mean(v2 * v2) + np.sum(np.sin(h9))
            + np.maximum((h9[-3]), ((v2[0] if h9.sum() > 3.0 else 0.1))))



def element_read_beside_an_unknown_rank(x, v):
    """A rank lowering cannot tell in a loop (a norm's) made it forget the rank of every name the loop
    binds: the element read `v[k - 1]` of a vector was then taken for a row, a view of `v`, and `x *= ...`
    refused as a write into memory `s` shares, where the argument types were known."""
    s = x
    k = 0
    while k < 2:
        k += 1
        x *= np.tanh(0.1 - v[0])
    k = 0
    while k < 2:
        k += 1
        s = np.tanh(x * s)
        v = 0.5 * v + 0.5 * np.sin(v)
        for j in range(1, 2):
            s += np.linalg.norm(v) / np.cosh(v[k - 1])
            x = v[k - 1]
    return x + s + np.mean(v * v)


def branch_decided_by_constants(x):
    """numba decides `(0.5 if 1.0 <= s else 3.0) > s` itself and drops the other branch; the adjoint then
    read variables only that branch assigned, and numba refused it ("Unsupported assignment ...
    Undefined"). The branch is now decided when the code is generated."""
    s = 0.1
    if (0.5 if 1.0 <= s else 3.0) > s:
        t = 2.0 / np.exp(np.cos(x))
    elif (x if not s <= x else s) <= np.tanh(s):
        x = x + 0.25 * np.cos(x)
    return s + x * t


def constant_rebound_in_a_loop(x):
    """`flag` is a constant before the loop and another one after its first iteration: the test in the
    loop is decided by neither."""
    flag = 0.0
    for i in range(3):
        if flag > 0.5:
            x = x * np.sin(x)
        flag = 1.0
    limit = 2.0
    if limit > 1.0:
        y = x * 3.0
    else:
        y = np.exp(x)
    return y

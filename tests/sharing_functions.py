"""Programs where NumPy arrays share memory (tests/test_sharing.py).

The first group writes into memory that another name still reads afterwards: NumPy shows that name
the new values, s2sad's generated code would show the old ones, so s2sad refuses them. The second
group shares memory too, but no name is read after a write that changed it: s2sad takes them.
"""

import numpy as np


# ---------------------------------------------------------------- refused


def store_under_a_view(x):
    acc = np.sin(x)
    tail = acc[1:]
    acc[0] = 2.0 * acc[0]
    acc[1] = 3.0 * acc[1]
    return np.sum(tail * tail)


def augmented_under_a_transpose(m):
    acc = np.zeros_like(m)
    acc += m
    mt = acc.T
    acc *= 2.0
    return np.sum(mt ** 3)


def augmented_view_then_base_read(x):
    acc = np.sin(x)
    tail = acc[1:]
    tail += 1.0
    return np.sum(acc ** 2)


def loop_reads_a_shifted_view(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    prev = y[:-1]
    for i in range(x.shape[0] - 1):
        y[i + 1] = prev[i] * 0.5 + x[i + 1]
    return np.sum(y ** 2)


def max_of_a_view_then_loop_writes(m):
    acc = np.zeros_like(m)
    acc += np.sin(m)
    flipped = acc[::-1, :]
    top = np.max(flipped)
    for i in range(m.shape[0]):
        acc[i, :] += 0.5
    return np.sum(flipped * flipped) + top * top


def _add_one_in_place(a):
    a += 1.0
    return np.sum(a)


def helper_updates_a_viewed_array(m):
    acc = np.sin(m)
    mt = acc.T
    s = _add_one_in_place(acc)
    return s + np.sum(mt)


def contiguous_alias_then_write(m):
    acc = np.sin(m)
    c = np.ascontiguousarray(acc)
    acc[0, 0] = 0.0
    return np.sum(c ** 2)


def alias_in_one_branch_write_in_the_other_on_a_later_pass(x):
    acc = np.sin(x)
    b = np.cos(x)
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:  # a pass through the first branch ties `b` to `acc`, a later one through the other writes
            b = acc
        else:
            acc[0] = acc[0] * 2.0
        s += b[0] * x[i]
    return s


def alias_updated_with_its_own_view(x):  # `u` is only another name for `a`, though it is also viewed
    a = x * 1.0
    u = a
    u += u[::-1]
    return np.sum(a * a)


def alias_reshaped_then_updated(x):
    b = x
    b = b.reshape(2, 3)
    b += 1.0
    return np.sum(x * x)


def alias_viewed_then_base_item_written(x):
    b = x
    odd = b[1::2]
    x[2] *= 0.5
    return np.sum(b) + np.sum(odd)


def _returned_as_is(a):
    return a


def _bump_by_half(p, v):
    p += 0.5 * v  # the write: into the argument that `w` names too


def alias_made_by_a_helper_then_updated(x):
    w = _returned_as_is(x)
    _bump_by_half(x, x)
    return np.sum(w * w)


# ---------------------------------------------------------------- accepted


def rows_read_before_the_next_write(m):
    y = np.zeros_like(m)
    for i in range(m.shape[0] - 1):
        row = y[i, :]
        y[i + 1, :] = row * 0.5 + m[i, :]
    return np.sum(y ** 2)


def view_copied_before_the_write(x):
    acc = np.sin(x)
    tail = acc[1:].copy()
    acc[0] = 2.0 * acc[0]
    return np.sum(tail * tail) + np.sum(acc)


def view_taken_after_the_write(x):
    acc = np.sin(x)
    acc[0] = 2.0 * acc[0]
    tail = acc[1:]
    return np.sum(tail * tail)


def scalar_running_sums(x):
    s = 0.0
    for i in range(x.shape[0]):
        t = s
        s += x[i] * t + 1.0
    return s


def view_read_only_for_its_shape(x):
    acc = np.sin(x)
    tail = acc[1:]
    acc[0] = 2.0
    return np.sum(acc * acc) + np.sum(np.zeros_like(tail)) + tail.shape[0]


def view_taken_anew_each_iteration(m):
    acc = np.cos(m)
    for i in range(m.shape[0]):
        row = acc[i, :]
        acc[i, :] = row * np.tanh(m[i, :])
    return np.sum(acc ** 2)


def double_buffer(u0, steps):
    u = u0.copy()
    for _ in range(steps):
        u_new = np.empty_like(u)
        u_new[0] = u[0] * 0.5
        u_new[1:] = u[:-1] * 0.9 + np.sin(u[1:])
        u = u_new  # the next pass writes into a new array: the old one, read as `u`, is never written
    return np.sum(u ** 2)


# Double buffers that exchange names after each step (s2sad/swaps.py)

def swapped_stencil(u0):
    u = u0.copy()
    un = np.empty_like(u)
    un[0], un[-1] = u[0], u[-1]
    for _ in range(4):
        un[1:-1] = u[1:-1] + 0.2 * (u[2:] - 2.0 * u[1:-1] + u[:-2]) + 0.1 * np.sin(u[1:-1])
        u, un = un, u
    return np.sum(u ** 2)


def swapped_through_a_temporary(u0):
    u = u0.copy()
    un = u0.copy()
    for _ in range(3):
        for i in range(1, u.shape[0] - 1):
            un[i] = u[i] * np.cos(u[i - 1]) + 0.5 * u[i + 1]
        tmp = u
        u = un
        un = tmp
    return np.sum(u * un)


def swapped_with_the_argument(a):
    b = np.zeros_like(a)
    for _ in range(3):
        for i in range(1, a.shape[0] - 1):
            for j in range(1, a.shape[1] - 1):
                b[i, j] = 0.25 * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] * a[i, j + 1])
        a, b = b, a
    return np.sum(np.tanh(a))


def swapped_on_some_passes(u0):
    u = u0.copy()
    un = np.zeros_like(u0)
    for t in range(4):
        un[:] = np.tanh(u) * 1.1 + un * 0.3
        if t % 2 == 0:
            u, un = un, u
    return np.sum(u * un)


def view_kept_across_swaps(u0):
    u = u0.copy()
    un = u0.copy()
    inner = u[1:-1]
    for _ in range(3):
        un[1:-1] = 0.5 * (u[2:] + u[:-2]) + inner
        u, un = un, u
    return np.sum(u * u)


def _products_or_early(x):
    out = np.zeros_like(x)
    if x[0] > 10.0:  # an early `return out` before the writes into `out`: the rest is its else
        return out
    for i in range(1, x.shape[0]):
        out[i] = x[i - 1] * x[i]
    return out


def _normalized_or_zero(d):
    r = np.sqrt(np.sum(d * d))
    if r > 2.0:  # an early `return np.zeros(...)`: the helper's result is one of two arrays, never both
        return np.zeros(d.shape[0])
    result = np.empty(d.shape[0])
    for k in range(d.shape[0]):
        result[k] = d[k] / (1.0 + r)
    return result


def early_zeros_or_filled_result_in_a_loop(m):
    s = 0.0
    for i in range(m.shape[0]):
        g = _normalized_or_zero(m[i] * (i + 1.0))
        s += np.sum(g * g)
    return s


def explicit_step_rebinds_u_to_out(u0):  # `u = out` after filling a fresh `out`: the next write is elsewhere
    u = u0 * 1.0
    for step in range(3):
        out = np.zeros_like(u)
        for i in range(1, u.shape[0] - 1):
            out[i] = u[i] + 0.1 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = out
    return np.sum(u * u)


def explicit_step_then_a_write_into_u(u0):  # `out` is made anew each pass, filled, handed to `u`, then updated
    u = u0 * 1.0
    for step in range(3):
        out = np.zeros_like(u)
        for i in range(1, u.shape[0] - 1):
            out[i] = u[i] + 0.1 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = out
        u[2:] += 0.01 * u[:-2]
    return np.sum(u ** 2)


def one_buffer_handed_to_u_each_pass(u0):  # `out` is made once: the next pass fills the memory `u` names
    u = u0 * 1.0
    out = np.zeros_like(u)
    for step in range(3):
        for i in range(1, u.shape[0] - 1):
            out[i] = u[i] + 0.1 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = out
        u[0] += 0.5
    return np.sum(u ** 2)


def one_buffer_copied_before_the_write(u0):  # the refusal's hint followed: `u = u.copy()` before the write
    u = u0 * 1.0
    out = np.zeros_like(u)
    for step in range(3):
        for i in range(1, u.shape[0] - 1):
            out[i] = u[i] + 0.1 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = out
        u = u.copy()
        u[0] += 0.5
    return np.sum(u ** 2)


def explicit_step_on_the_argument(u):
    for step in range(2):
        out = np.zeros_like(u)
        out[1:-1] = u[1:-1] + 0.1 * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        u = out
    return np.sum(u * np.sin(u))


def view_of_itself_in_a_loop(x):  # `c = c[::-1]`: the adjoint of the old `c` is a new buffer, not c_bar
    c = x * 1.0
    for i in range(3):
        c = c[::-1] * (1.0 + 0.1 * i)
        c = c[::-1]
    return np.sum(c * c * x)


def shrinking_view_of_itself_in_a_loop(x):  # `c = c[1:]`: the old `c` (its shape) comes back from a tape
    c = x
    for i in range(2):
        c = c[1:]
    return np.sum(c * c)


def early_return_helper_in_a_loop(x):
    s = 0.0
    for k in range(3):
        s += np.sum(_products_or_early(x * (k + 1.0)) ** 2)
    return s


def item_times_the_array(x):  # adjoints bound to one buffer: `x_bar += ...` must not change `mul_bar` under a read
    b = x + x[0] * np.cos(x)
    return np.sum(b)


def slice_times_another_slice(x):  # the slices read are views: the write changes them under the adjoint
    a = x * 1.0
    a[1:3] *= a[4:6]
    a *= 0.5
    return np.sum(a)


def row_slice_written_then_updated(m):
    m = m * 1.0
    m[1, 1:3] *= m[0, 1:3]
    m += 1.0
    return np.sum(m * m)


def _add_half_of(p, v):
    p += 0.5 * v


def helper_updates_a_ufunc_result(x):  # NumPy's `p += ...` writes into the caller's array made by np.tanh
    y = np.tanh(x)
    _add_half_of(y, x)
    return np.sum(y * x)


# A row `m[i]` of an array is a view: once the argument's rank is known it shares m's memory

def row_read_after_its_array_is_written(m):
    u = m[1]
    m[1, -2] -= np.tanh(m[0, 0]) * u[0]
    return np.sum(u) + np.sum(m)


def row_of_a_reshaped_argument_then_written(x):
    b = x.reshape(2, 3)
    r = b[-1]
    x[4] += np.cos(r[0])
    return np.sum(np.sin(x)) + np.sum(r * r)


def row_of_an_array_a_helper_updates(m):
    a = m[1]
    _bump_by_half(m, m * m)
    return np.sum(m * m) + np.sum(a * a)


def alias_read_on_the_next_pass_after_the_write(x):
    b = x
    for i in range(x.shape[0]):
        x[-2] = 0.5 * (b[1] + 0.25 * np.sin(b[i]))
    for _ in range(3):
        b = np.sin(b)
    return np.sum(np.tanh(b[::-1] * x) * b) + np.sum(x)


def element_read_before_its_write(x):
    a = x[0]
    x[0] = 5.0 * x[1]
    return a * np.sum(x)


def row_written_then_the_array_renamed(m):
    m[2] *= np.tanh(m[0, ::-1])
    w = m
    return np.sum(w * w)


def element_updated_then_the_array_rebound(m):
    m[0] += np.sin(m[1] * m[0])
    m = m - 0.5 * m
    return np.sum(np.sin(m))


def swapped_names_written_between_swaps(x):
    v = x * 1.0
    w = x.copy()
    x[:] += w * x[::-1]
    v, w = w, v
    v[0] += 0.75
    v, w = w, v
    return np.sum(np.sin(v)) + np.sum(np.sin(w)) + np.sum(x * x)


def view_handed_through_a_helper_then_its_array_written(x):
    b = _returned_as_is(x[::-1])
    u = np.sin(b) * 1.0
    v = np.sin(b)
    x[:] += 0.5 * u
    _bump_by_half(x, np.tanh(np.sum(u)) * np.cos(v[::-1]))
    return np.sum(x * x) + np.sum(np.sin(u))


# A row updated and stored back each pass: accepted

def row_updated_and_stored_back_each_pass(m):
    v = np.zeros_like(m)
    for i in range(m.shape[0]):
        w = v[i]
        w += np.sin(m[i])
        v[i] = w * 0.5
    return np.sum(v * m)


# A view of a new array that no other name reads, then written: accepted

def transpose_of_a_new_array_written(m):  # clipped = np.maximum(...).T; clipped[idx] = 0 (an image filter)
    clipped = np.maximum(m, 0.1).T
    clipped[np.array([0, 2])] = 0.0
    return np.sum(clipped * clipped * m.T)


def slice_of_a_new_array_written(x):
    tail = np.exp(x)[1:]
    tail[0] = 0.5
    return np.sum(tail * x[:-1])

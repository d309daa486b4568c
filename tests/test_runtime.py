"""Tests for s2sad.runtime: each helper in plain Python and under numba njit."""

import numba
import numpy as np
import pytest

from s2sad.runtime import (
    copy_adj,
    mean_adjoint,
    range_last,
    sum_adjoint,
    sum_all,
    unbroadcast,
    zeros_like_adj,
)

# A few jitted wrappers, shared by all parametrised cases (compile once per
# argument-type combination).


@numba.njit
def _nb_zeros_like_adj(x):
    return zeros_like_adj(x)


@numba.njit
def _nb_unbroadcast(g, like):
    return unbroadcast(g, like)


@numba.njit
def _nb_copy_adj(v):
    return copy_adj(v)


@numba.njit
def _nb_sum_adjoint(g, x, axis):
    return sum_adjoint(g, x, axis)


@numba.njit
def _nb_sum_adjoint_noaxis(g, x):
    return sum_adjoint(g, x)


@numba.njit
def _nb_sum_adjoint_lit(g, x):
    return sum_adjoint(g, x, -1)


@numba.njit
def _nb_mean_adjoint(g, x, axis):
    return mean_adjoint(g, x, axis)


@numba.njit
def _nb_mean_adjoint_noaxis(g, x):
    return mean_adjoint(g, x)


@numba.njit
def _nb_range_last(start, stop, step):
    return range_last(start, stop, step)


@numba.njit
def _nb_reversed_range(start, stop, step):
    out = []
    for i in range(range_last(start, stop, step), start - step, -step):
        out.append(i)
    return out


IMPLS = {
    "py": dict(zeros=zeros_like_adj, unb=unbroadcast, copy=copy_adj,
               sum=sum_adjoint, sum0=sum_adjoint, mean=mean_adjoint,
               mean0=mean_adjoint, rl=range_last),
    "nb": dict(zeros=_nb_zeros_like_adj, unb=_nb_unbroadcast, copy=_nb_copy_adj,
               sum=_nb_sum_adjoint, sum0=_nb_sum_adjoint_noaxis,
               mean=_nb_mean_adjoint, mean0=_nb_mean_adjoint_noaxis,
               rl=_nb_range_last),
}


@pytest.fixture(params=["py", "nb"])
def impl(request):
    return IMPLS[request.param]


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# zeros_like_adj
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("x", [1.5, 3, True, np.float32(2.0), np.int64(4),
                               np.bool_(False)])
def test_zeros_like_adj_scalar(impl, x):
    z = impl["zeros"](x)
    assert isinstance(z, float) and z == 0.0 if type(x) is not np.float32 else z == 0.0
    if type(x) is np.float32 and impl is IMPLS["py"]:
        assert type(z) is np.float32  # an adjoint keeps its value's precision (numba boxes it as a float)


@pytest.mark.parametrize("x, dtype", [
    (np.ones(3), np.float64),
    (np.ones((2, 3), np.float32), np.float32),
    (np.arange(24).reshape(2, 3, 4), np.float64),
    (np.array([True, False]), np.float64),
    (np.array(2.0), np.float64),
    (np.ones((2, 1, 3, 2)), np.float64),
])
def test_zeros_like_adj_array(impl, x, dtype):
    z = impl["zeros"](x)
    assert isinstance(z, np.ndarray)
    assert z.shape == x.shape and z.dtype == dtype
    assert not z.any()


# ---------------------------------------------------------------------------
# unbroadcast
# ---------------------------------------------------------------------------

def _unbroadcast_ref(g, shape):
    lead = g.ndim - len(shape)
    s = g.sum(axis=tuple(range(lead)))
    ones = tuple(i for i, n in enumerate(shape) if n == 1)
    return s.sum(axis=ones, keepdims=True)


@pytest.mark.parametrize("gshape, lshape", [
    ((4, 3), (3,)),
    ((4, 3), (1, 3)),
    ((4, 3), (4, 1)),
    ((4, 3), ()),
    ((4, 3), (4, 3)),
    ((4, 3), (1, 1)),
    ((5,), (1,)),
    ((2, 4, 3), (4, 1)),
    ((2, 4, 3), (1, 4, 3)),
    ((2, 4, 3), (2, 1, 1)),
    ((2, 4, 3), (3,)),
    ((2, 3, 4, 5), (3, 1, 5)),
    ((2, 3, 4, 5), (1, 1, 1, 1)),
    ((2, 3, 4, 5), (5,)),
    ((2, 3, 4, 5), (2, 1, 4, 1)),
])
def test_unbroadcast_arrays(impl, gshape, lshape):
    g = _rng().standard_normal(gshape)
    like = np.ones(lshape)
    r = impl["unb"](g, like)
    assert isinstance(r, np.ndarray)
    assert r.shape == lshape and r.dtype == np.float64
    np.testing.assert_allclose(r, _unbroadcast_ref(g, lshape))


def test_unbroadcast_same_shape_no_copy(impl):
    g = np.ones((4, 3))
    assert impl["unb"](g, np.zeros((4, 3))) is g
    g0 = np.array(2.0)
    assert impl["unb"](g0, np.zeros(())) is g0


def test_unbroadcast_noncontiguous(impl):
    g = _rng(1).standard_normal((3, 4, 2)).transpose(2, 0, 1)  # (2, 3, 4)
    r = impl["unb"](g, np.ones((3, 1)))
    np.testing.assert_allclose(r, _unbroadcast_ref(g, (3, 1)))
    np.testing.assert_allclose(impl["unb"](g[:, ::2], np.ones((2, 1, 4))),
                               _unbroadcast_ref(g[:, ::2], (2, 1, 4)))


def test_unbroadcast_float32_and_int(impl):
    g = np.ones((4, 3), np.float32)
    r = impl["unb"](g, np.ones(3, np.float32))
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, [4.0, 4.0, 4.0])
    assert impl["unb"](g, np.ones(3)).dtype == np.float64  # an adjoint has its primal's precision
    assert impl["unb"](np.ones((4, 3)), np.ones(3, np.float32)).dtype == np.float32
    gi = np.arange(12).reshape(4, 3)
    ri = impl["unb"](gi, np.ones((4, 1)))
    assert ri.dtype == np.float64
    np.testing.assert_allclose(ri, _unbroadcast_ref(gi, (4, 1)))


def test_unbroadcast_scalar_cases(impl):
    unb = impl["unb"]
    assert unb(2.5, 1.0) == 2.5
    assert unb(2.5, 3) == 2.5
    g = _rng(2).standard_normal((4, 3))
    s = unb(g, 1.0)
    assert isinstance(s, float)
    np.testing.assert_allclose(s, g.sum())
    s3 = unb(np.ones((2, 3, 4)), True)
    assert isinstance(s3, float) and s3 == 24.0
    f = unb(1.5, np.zeros((2, 3)))
    assert f.shape == (2, 3) and f.dtype == np.float64
    assert np.all(f == 1.5)
    f0 = unb(2.0, np.zeros(()))
    assert f0.shape == () and f0 == 2.0


_nb_sum_all = numba.njit(lambda x: sum_all(x))


@pytest.mark.parametrize("x", [
    np.linspace(-1.0, 2.0, 10_001),  # four partial sums, and a tail of one
    np.arange(12.0).reshape(3, 4),
    np.asfortranarray(np.arange(35.0).reshape(5, 7) ** 1.5),  # F order: summed through its transpose
    np.arange(100.0).reshape(10, 10)[:, ::3],  # neither: numba's np.sum
    np.arange(7, dtype=np.float32) / 3,
    np.zeros(0),
], ids=["long", "C", "F", "strided", "float32", "empty"])
def test_sum_all_matches_numpy(x):
    got = _nb_sum_all(x)
    assert isinstance(got, float)  # float32 sums come back boxed as floats, as numba's np.sum does
    np.testing.assert_allclose(got, np.sum(x), rtol=1e-6 if x.dtype == np.float32 else 1e-13)


def test_sum_all_of_integers_and_bools_is_exact_int64():
    big = np.full(10_000, 2**40, dtype=np.int64) + np.arange(10_000)  # a sum past 2**53: floats would round
    assert _nb_sum_all(big) == int(big.sum()) and isinstance(_nb_sum_all(big), int)
    assert _nb_sum_all(np.ones(37, dtype=bool)) == 37


def test_unbroadcast_incompatible_raises(impl):
    with pytest.raises(ValueError):
        impl["unb"](np.ones((4, 3)), np.ones((3, 4)))
    with pytest.raises(ValueError):
        impl["unb"](np.ones((2, 4, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError):  # vectors: only (n,) -> (1,) reduces
        impl["unb"](np.ones(5), np.ones(3))


# ---------------------------------------------------------------------------
# copy_adj
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("v", [1.5, 3, True, np.float32(0.5)])
def test_copy_adj_scalar(impl, v):
    assert impl["copy"](v) == v


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
def test_copy_adj_array(impl, shape):
    a = _rng(3).standard_normal(shape)
    view = a[..., 1:] if a.ndim else a
    c = impl["copy"](view)
    expect = np.array(view, copy=True)
    view[...] = 0.0  # zeroing the adjoint slice must not touch the copy
    np.testing.assert_array_equal(c, expect)
    assert not np.shares_memory(c, a)


# ---------------------------------------------------------------------------
# sum_adjoint / mean_adjoint
# ---------------------------------------------------------------------------

SUM_CASES = [
    ((5,), None), ((5,), 0), ((5,), -1),
    ((3, 4), None), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((3, 4), -2),
    ((2, 3, 4), None), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
    ((2, 3, 4, 5), 2), ((2, 3, 4, 5), -4), ((2, 3, 4, 5), None),
]


@pytest.mark.parametrize("np_fn, name", [(np.sum, "sum"), (np.mean, "mean")])
@pytest.mark.parametrize("shape, axis", SUM_CASES)
def test_reduce_adjoint_vjp(impl, np_fn, name, shape, axis):
    rng = _rng(4)
    x = rng.standard_normal(shape)
    g = np_fn(rng.standard_normal(shape), axis=axis)  # right type and shape
    if isinstance(g, np.floating):
        g = float(g)
    r = impl[name](g, x, axis)
    assert isinstance(r, np.ndarray)
    assert r.shape == shape and r.dtype == np.float64
    for _ in range(3):
        v = rng.standard_normal(shape)
        np.testing.assert_allclose(np.vdot(r, v), np.vdot(g, np_fn(v, axis=axis)))
    # direct check against explicit broadcasting
    gx = np.asarray(g) if axis is None else np.expand_dims(g, axis)
    n = x.size if axis is None else shape[axis]
    ref = np.broadcast_to(gx, shape) / (n if name == "mean" else 1)
    np.testing.assert_allclose(r, ref)


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reduce_adjoint_scalar_x(impl, name):
    r = impl[name](2.5, 1.0, None)
    assert isinstance(r, float) and r == 2.5
    r = impl[name + "0"](3.0, 7)
    assert isinstance(r, float) and r == 3.0


def test_reduce_adjoint_float32_g(impl):
    x = np.ones((2, 3))
    g = np.arange(3, dtype=np.float32)
    r = impl["sum"](g, x, 0)
    assert r.dtype == np.float64
    np.testing.assert_allclose(r, np.broadcast_to(g, (2, 3)))
    np.testing.assert_allclose(impl["mean"](g, x, 0), r / 2)


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reduce_adjoint_omitted_axis(impl, name):
    x = np.ones((3, 4))
    r = impl[name + "0"](2.0, x)
    np.testing.assert_array_equal(r, impl[name](2.0, x, None))
    assert r.shape == (3, 4) and np.all(r == (2.0 if name == "sum" else 2.0 / 12))


def test_reduce_adjoint_0d_g(impl):
    g = np.array(1.5)
    np.testing.assert_array_equal(impl["sum"](g, np.ones(3), None), np.full(3, 1.5))
    np.testing.assert_array_equal(impl["mean"](g, np.ones(3), 0), np.full(3, 0.5))


def test_sum_adjoint_literal_axis():
    x = np.ones((2, 3, 4))
    g = _rng(5).standard_normal((2, 3))
    np.testing.assert_allclose(_nb_sum_adjoint_lit(g, x),
                               np.broadcast_to(g[:, :, None], x.shape))


def test_reduce_adjoint_bad_axis(impl):
    with pytest.raises(ValueError):
        impl["sum"](np.ones(3), np.ones((2, 3)), 2)
    with pytest.raises(ValueError):
        impl["mean"](np.ones(3), np.ones((2, 3)), -3)


# ---------------------------------------------------------------------------
# range_last
# ---------------------------------------------------------------------------

def test_range_last(impl):
    rl = impl["rl"]
    vals = range(-7, 8)
    for start in vals:
        for stop in vals:
            for step in (-4, -3, -2, -1, 1, 2, 3, 4):
                fwd = list(range(start, stop, step))
                last = rl(start, stop, step)
                assert last == (fwd[-1] if fwd else start - step)
                assert list(range(last, start - step, -step)) == fwd[::-1]


def test_range_last_numba_loop():
    for args in [(0, 10, 3), (10, 0, -3), (0, 0, 1), (5, 1, 1), (-2, 9, 4),
                 (3, -8, -5)]:
        assert list(_nb_reversed_range(*args)) == list(range(*args))[::-1]
    assert range_last(np.int64(0), np.int64(10), np.int64(3)) == 9


# ---- restore: undo one taped write (numba's own lists take a one-pass path) -------------------------

from s2sad.runtime import new_tape, restore  # noqa: E402


@numba.njit
def _nb_rewind_floats(values, start):
    tape = new_tape()
    for v in values:
        tape.append(v)
    seen = np.empty(len(values))
    for i in range(len(values)):
        seen[i] = restore(tape, start)
    return seen, len(tape)


@numba.njit
def _nb_rewind_arrays(rows, start):
    tape = new_tape()
    for i in range(rows.shape[0]):
        tape.append(rows[i] * 2.0)  # fresh arrays: the tape holds their only reference
    total = np.zeros(rows.shape[1])
    current = rows[0]
    for i in range(rows.shape[0]):
        current = restore(tape, start)
        total += current
    return total, current


@numba.njit
def _nb_rewind_mixed(n):
    tape = new_tape()
    x = 0  # an int first, a float later: the list holds floats, `current` is an int
    tape.append(1.5)
    return restore(tape, x), len(tape), n


@pytest.mark.parametrize("impl", ["python", "numba"])
def test_restore_returns_the_value_before_each_write(impl):
    values = np.array([0.5, 1.5, 2.5, 3.5])
    if impl == "numba":
        seen, left = _nb_rewind_floats(values, -1.0)
    else:
        tape, seen = list(values), []
        for i in range(len(values)):
            seen.append(restore(tape, -1.0))
        left = len(tape)
    np.testing.assert_array_equal(seen, [2.5, 1.5, 0.5, -1.0])  # the last: nothing before, `current`
    assert left == 0


def test_restore_of_taped_arrays_keeps_their_references_right():
    rows = np.arange(12.0).reshape(4, 3)
    start = np.full(3, -1.0)
    for _ in range(200):  # a miscounted reference frees an array still in use, or leaks every call
        total, current = _nb_rewind_arrays(rows, start)
    np.testing.assert_array_equal(total, 2.0 * rows[:3].sum(axis=0) + start)
    np.testing.assert_array_equal(current, start)
    assert _nb_rewind_mixed(3) == (0, 0, 3)
    with pytest.raises(IndexError):
        numba.njit(lambda: restore([1.0][:0], 2.0))()


# ---- tape_pop: numba's pop without the shrinking realloc (codegen.compiled.native_tapes calls it) --

import contextlib  # noqa: E402

from numba.core.runtime import _nrt_python, rtsys  # noqa: E402

from s2sad.runtime import tape_pop  # noqa: E402


@numba.njit
def _nb_pop_floats(values):
    tape = new_tape()
    for v in values:
        tape.append(v)
    out = np.empty(len(values))
    for i in range(len(values)):
        out[i] = tape_pop(tape)
    return out, len(tape)


@numba.njit
def _nb_pop_arrays_and_push_again(rows):
    """Pops, then pushes into the slots popped: a slot left holding a moved reference would be
    released twice by `append`, and one never released would leak."""
    tape = new_tape()
    for i in range(rows.shape[0]):
        tape.append(rows[i] * 2.0)
    total = np.zeros(rows.shape[1])
    for _ in range(rows.shape[0] // 2):
        total += tape_pop(tape)
    for i in range(rows.shape[0] // 2):
        tape.append(rows[i] + 1.0)
    while len(tape) > 0:
        total += tape_pop(tape)
    return total


@contextlib.contextmanager
def _nrt_balance():
    """Asserts that the block released every array and meminfo it allocated (numba's NRT counters)."""
    was_on = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        yield
        after = rtsys.get_allocation_stats()
    finally:
        if not was_on:
            _nrt_python.memsys_disable_stats()
    assert after.alloc - before.alloc == after.free - before.free
    assert after.mi_alloc - before.mi_alloc == after.mi_free - before.mi_free
    assert after.mi_alloc > before.mi_alloc  # it did allocate: the counters were on


def test_tape_pop_returns_the_values_last_in_first_out():
    values = np.array([0.5, 1.5, 2.5, 3.5])
    many = np.arange(100.0)  # well past new_tape's first allocation: numba's append grows the list
    out, left = _nb_pop_floats(many)
    np.testing.assert_array_equal(out, many[::-1])
    assert left == 0
    tape = new_tape()  # in Python, a list
    tape.append(1.0)
    assert tape_pop(tape) == 1.0 and tape == []
    out, left = _nb_pop_floats(values)
    np.testing.assert_array_equal(out, values[::-1])
    assert left == 0
    assert tape_pop([1.0, 2.0]) == 2.0  # in Python it is list.pop
    with pytest.raises(IndexError):
        numba.njit(lambda: tape_pop([1.0][:0]))()


def test_tape_pop_of_taped_arrays_leaks_and_double_frees_nothing():
    rows = np.arange(24.0).reshape(8, 3)
    want = 2.0 * rows.sum(axis=0) + (rows[:4] + 1.0).sum(axis=0)
    np.testing.assert_array_equal(_nb_pop_arrays_and_push_again(rows), want)
    with _nrt_balance():
        for _ in range(50):
            np.testing.assert_array_equal(_nb_pop_arrays_and_push_again(rows), want)


def test_restore_releases_what_it_drops():
    rows = np.arange(12.0).reshape(4, 3)
    start = np.full(3, -1.0)
    _nb_rewind_arrays(rows, start)
    with _nrt_balance():
        for _ in range(50):
            _nb_rewind_arrays(rows, start)

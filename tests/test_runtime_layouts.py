"""The index kernels behind unbroadcast, sum_expand and the reductions (runtime/core.py) walk merged
axes: checked under numba against NumPy on shapes whose axes merge in every way (broadcast or kept,
short or long last runs, size-1 and empty axes, patterns that do not merge at all). Reductions over
consecutive axes take their own loops (runtime/reductions.py, `_block`): both paths are checked."""

import numba
import numpy as np
import pytest

from s2sad.runtime import (extremum_adjoint, extremum_mask, max_reduce, min_reduce, prod_reduce, sum_expand, sum_reduce,
                           unbroadcast)
from s2sad.runtime.core import merged_axes

R = np.random.default_rng(15)


@numba.njit
def _reduce_all(x, axis):
    return sum_reduce(x, axis), max_reduce(x, axis), min_reduce(x, axis), prod_reduce(x, axis)


@numba.njit
def _expand(g, x, axis):
    return sum_expand(g, x, axis, False)


@numba.njit
def _unbroadcast(g, like):
    return unbroadcast(g, like)


@numba.njit
def _merged(shape, sstr):
    return merged_axes(shape, sstr)


REDUCTIONS = [((1000, 5, 2), 2), ((1000, 5, 2), 0), ((4, 3, 40), 1), ((3, 17), 1), ((3, 17), 0),
              ((2, 3, 4, 5), 2), ((2, 1, 4, 5), 3), ((5, 1), 1), ((6,), 0),
              ((50, 7, 3), 2), ((50, 7, 4), 2), ((200, 25, 10), 2)]  # last runs either side of SHORT_RUN


@pytest.mark.parametrize("shape, axis", REDUCTIONS)
def test_reductions_match_numpy(shape, axis):
    x = R.uniform(0.5, 1.5, size=shape)  # products stay near 1
    got = _reduce_all(x, axis)
    want = [np.sum(x, axis), np.max(x, axis, initial=-np.inf), np.min(x, axis, initial=np.inf), np.prod(x, axis)]
    for name, g, w in zip(("sum", "max", "min", "prod"), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=name)


@numba.njit
def _sum(x, axis):
    return sum_reduce(x, axis)


@numba.njit
def _sums_by_constant_axes(x3, x2):
    last = 2  # a constant through a name, as generated code passes it
    return (sum_reduce(x3, axis=2), sum_reduce(x3, axis=-1), sum_reduce(x3, axis=last), sum_reduce(x3, axis=1),
            sum_reduce(x3, axis=0), sum_reduce(x2, axis=1), sum_reduce(x2, axis=0), sum_reduce(x2[:, 1:], axis=1))


def test_sums_by_constant_axes_match_numpy():
    """A constant axis compiles only the branch it takes (the last axis: s2sad's loops; any other:
    numba's np.sum); both must agree with NumPy, as the runtime-axis path above does."""
    x3, x2 = R.normal(size=(6, 5, 40)), R.normal(size=(7, 9))
    want = [x3.sum(2), x3.sum(-1), x3.sum(2), x3.sum(1), x3.sum(0), x2.sum(1), x2.sum(0), x2[:, 1:].sum(1)]
    for k, (g, w) in enumerate(zip(_sums_by_constant_axes(x3, x2), want)):
        assert g.shape == w.shape, k
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=str(k))


def test_integer_sums_stay_exact():
    x = np.full((3, 40), 2 ** 53 + 1, dtype=np.int64)  # a float accumulator would round each term
    assert _sum(x, 1).tolist() == [40 * (2 ** 53 + 1)] * 3
    assert _sum(x[:, :2], 1).tolist() == [2 * (2 ** 53 + 1)] * 3  # runs of 2 and 3 have loops of their own
    assert _sum(x[:, :3], 1).tolist() == [3 * (2 ** 53 + 1)] * 3


def test_empty_arrays_sum_to_zeros_and_have_no_maximum():
    np.testing.assert_array_equal(_sum(np.ones((0, 4)), 0), np.zeros(4))
    assert _sum(np.ones((0, 4)), 1).shape == (0,)
    with pytest.raises(ValueError, match="zero-size array"):
        _reduce_all(np.ones((4, 0)), 1)


@pytest.mark.parametrize("shape, axis", [s for s in REDUCTIONS if s[0][s[1]] > 0])
def test_sum_expand_broadcasts_back(shape, axis):
    x = R.normal(size=shape)
    g = R.normal(size=np.sum(x, axis).shape)
    np.testing.assert_array_equal(_expand(g, x, axis), np.broadcast_to(np.expand_dims(g, axis), shape))


@numba.njit
def _reduce_kept(x, axis):
    return (sum_reduce(x, axis, True), max_reduce(x, axis, True), min_reduce(x, axis, True),
            prod_reduce(x, axis, True))


@numba.njit
def _extremum(g, x, axis):
    m = max_reduce(x, axis, True)
    return m, extremum_adjoint(g, x, m, axis, True), extremum_mask(x, m, axis, True)


# consecutive axes (one block), the whole array, and axes with a kept one between
TUPLE_AXES = [((4, 3, 5), (0, 1)), ((4, 3, 5), (1, 2)), ((4, 3, 5), (0, 1, 2)), ((4, 3, 5), (-1, -2)),
              ((4, 3, 5), (0, 2)), ((2, 3, 4, 5), (1, 3)),
              ((1000, 5), (1,)), ((3, 1, 4), (1,))]


@pytest.mark.parametrize("shape, axis", TUPLE_AXES)
def test_reductions_over_axis_tuples_keep_dims_as_numpy(shape, axis):
    x = R.uniform(0.5, 1.5, size=shape)
    got = _reduce_kept(x, axis)
    want = [np.sum(x, axis, keepdims=True), np.max(x, axis, keepdims=True, initial=-np.inf),
            np.min(x, axis, keepdims=True, initial=np.inf), np.prod(x, axis, keepdims=True)]
    for name, g, w in zip(("sum", "max", "min", "prod"), got, want):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=name)
    g = R.normal(size=want[0].shape)
    np.testing.assert_array_equal(_expand(g.reshape(np.sum(x, axis).shape), x, axis), np.broadcast_to(g, shape))


@numba.njit
def _sum_prod_kept(x, axis):
    return sum_reduce(x, axis, True), prod_reduce(x, axis, True)


@pytest.mark.parametrize("shape, axis", [((6, 0, 2), (0, 1)), ((6, 0, 2), (1,)), ((0, 3), (1,))])
def test_empty_blocks_give_the_identity(shape, axis):
    total, product = _sum_prod_kept(np.ones(shape), axis)
    np.testing.assert_array_equal(total, np.sum(np.ones(shape), axis, keepdims=True))
    np.testing.assert_array_equal(product, np.prod(np.ones(shape), axis, keepdims=True))


@pytest.mark.parametrize("axis", [0, 1, 2, (0, 1), (1, 2), (0, 2), None])
def test_max_and_min_propagate_nan_as_numpy(axis):
    x = R.normal(size=(4, 3, 5))
    x[1, 2, 3] = x[3, 0, 0] = np.nan
    got = _reduce_all(x, axis)
    np.testing.assert_array_equal(got[1], np.max(x, axis))
    np.testing.assert_array_equal(got[2], np.min(x, axis))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("shape, axis", [((6, 40), 1), ((6, 40), 0), ((3, 4, 9), 1)])
def test_max_and_min_of_other_dtypes_match_numpy(dtype, shape, axis):
    x = (R.normal(size=shape) * 10).astype(dtype)
    got = _reduce_all(x, axis)
    for g, w in ((got[1], np.max(x, axis)), (got[2], np.min(x, axis))):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("where", [0, 37, 98, 99])
def test_a_nan_anywhere_in_a_long_row_wins(where):
    """Rows of 100 run vectorized, with a remainder: a nan in either part, or first, decides the row."""
    x = R.normal(size=(3, 100))
    x[1, where] = np.nan
    got = _reduce_all(x, 1)
    np.testing.assert_array_equal(got[1], np.max(x, 1))
    np.testing.assert_array_equal(got[2], np.min(x, 1))
    assert np.isnan(got[1][1]) and np.isnan(got[2][1]) and not np.isnan(got[1][[0, 2]]).any()


@pytest.mark.parametrize("axis", [0, 1, 2, (0, 1), (1, 2), (0, 2)])
def test_extremum_adjoint_shares_among_ties(axis):
    x = np.round(R.normal(size=(6, 4, 5)))  # integers: many ties
    m = np.max(x, axis, keepdims=True)
    g = R.normal(size=m.shape)
    hit = x == m
    count = np.sum(hit, axis, keepdims=True)
    got_m, adjoint, mask = _extremum(g, x, axis)
    np.testing.assert_array_equal(got_m, m)
    np.testing.assert_allclose(mask, hit / count, rtol=1e-15)
    np.testing.assert_allclose(adjoint, hit * g / count, rtol=1e-15)
    np.testing.assert_allclose(np.sum(adjoint, axis, keepdims=True), g, rtol=1e-12)  # nothing lost or added


@pytest.mark.parametrize("gshape, lshape", [((1000, 5, 2), (5, 2)), ((1000, 5, 2), (1000, 5, 1)),
                                            ((7, 3, 40), (3, 1)), ((2, 3, 4, 5), (3, 1, 5)),
                                            ((2, 3, 4, 5), (2, 1, 4, 1)), ((0, 3), (3,)),
                                            ((50, 7, 3), (50, 7, 1)), ((200, 25, 10), (200, 25, 1)),
                                            # down the columns: four rows at a time (and the rows left
                                            # over), or, from ROW_BLOCK on, a row at a time
                                            ((1001, 5), (1, 5)), ((3, 2), (2,)), ((9, 16), (16,)),
                                            ((128, 64), (1, 64)), ((5, 300, 4), (5, 1, 4))])
def test_unbroadcast_sums_what_broadcasting_added(gshape, lshape):
    g = R.normal(size=gshape)
    added = len(gshape) - len(lshape)
    axes = tuple(range(added)) + tuple(added + i for i, n in enumerate(lshape) if n == 1 and gshape[added + i] != 1)
    want = np.sum(g, axis=axes).reshape(lshape)
    np.testing.assert_allclose(_unbroadcast(g, np.ones(lshape)), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind, gshape, lshape", [("float32", (1001, 5), (5,)), ("float32", (50, 7, 3), (50, 7, 1)),
                                                  ("complex128", (2, 3, 4, 5), (3, 1, 5)),
                                                  ("transposed", (1001, 5), (5,))])
def test_unbroadcast_sums_other_dtypes_and_layouts(kind, gshape, lshape):
    # float32 goes to its own C function (runtime.native), complex to the loop compiled into the caller
    g = R.normal(size=gshape[::-1]).T if kind == "transposed" else R.normal(size=gshape)
    if kind == "complex128":
        g = g + 1j * R.normal(size=gshape)
    g = g.astype(np.float32) if kind == "float32" else g
    added = len(gshape) - len(lshape)
    axes = tuple(range(added)) + tuple(added + i for i, n in enumerate(lshape) if n == 1 and gshape[added + i] != 1)
    got = _unbroadcast(g, np.ones(lshape, g.dtype))
    assert got.dtype == g.dtype
    np.testing.assert_allclose(got, np.sum(g.astype(np.complex128), axis=axes).reshape(lshape),
                               rtol=1e-5 if kind == "float32" else 1e-12, atol=1e-4 if kind == "float32" else 1e-12)


@pytest.mark.parametrize("shape, sstr, extents, strides", [
    ((1000, 5, 2), (0, 2, 1), (1000, 10), (0, 1)),  # summed over the leading axis: two axes
    ((1000, 5, 2), (5, 1, 0), (5000, 2), (1, 0)),  # summed over the last: two axes
    ((2, 3, 4, 5), (0, 5, 0, 1), (2, 3, 4, 5), (0, 5, 0, 1)),  # alternating: nothing merges
    ((2, 1, 4), (4, 0, 1), (8,), (1,)),  # a size-1 axis drops, the rest is contiguous
    ((1, 1), (0, 0), (1,), (0,)),
])
def test_axes_merge_where_one_step_walks_both(shape, sstr, extents, strides):
    got = _merged(np.array(shape, np.int64), np.array(sstr, np.int64))
    assert tuple(got[0]) == extents and tuple(got[1]) == strides

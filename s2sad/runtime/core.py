"""Type-directed runtime helpers called by generated adjoint code.

Every helper is a plain Python function (used when generated code runs
uncompiled) and also has a ``numba.extending.overload`` so that code compiled
in nopython mode can call it.  The overloads pick an implementation from the
numba types of the arguments (scalar vs array, ``axis`` None vs int).
"""

import operator

import numpy as np
from llvmlite import ir as llvm_ir
from numba import carray, literal_unroll, njit, types
from numba.typed import List
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.cpython.listobj import ListInstance
from numba.extending import intrinsic, lower_builtin, overload, register_jitable, type_callable
from numba.np.numpy_support import as_dtype

from s2sad.runtime import native

__all__ = [
    "zeros_like_adj",
    "unbroadcast",
    "copy_adj",
    "sum_adjoint",
    "mean_adjoint",
    "range_last",
    "restore",
    "new_tape",
    "tape_pop",
    "PythonTape",
    "stop_gradient",
    "matmul_adjoint_a",
    "matmul_adjoint_b",
    "mean_axis",
    "sum_all",
    "sum_axis",
    "broadcast_like",
    "add_at",
    "index_array",
    "diagonal_mask",
    "triangle_mask",
    "hstack_axis",
    "batch_empty",
    "mask_last",
    "matmul_like",
]


# ---------------------------------------------------------------------------
# shared utilities
# ---------------------------------------------------------------------------

def _np_adj_dtype(dtype):
    """Adjoint dtype for a NumPy dtype: floats/complex kept, others float64."""
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _nb_adj_dtype(dtype):
    """Adjoint NumPy dtype for a numba dtype: floats/complex kept, others float64."""
    if isinstance(dtype, (types.Float, types.Complex)):
        return as_dtype(dtype)
    return np.dtype(np.float64)


# An adjoint has its primal's precision: a float32 value's adjoint is float32 (an array's dtype, or a
# NumPy scalar), a float64's or an integer's is float64 (a Python float for a scalar).

def adjoint_dtype(like):
    """The dtype of the adjoint of the value `like` (an array, a NumPy scalar or a Python number)."""
    return _np_adj_dtype(np.result_type(like))


_FLOAT_ADJOINT = (float, int, np.float64)  # the scalars whose adjoint is a Python float, without asking NumPy


def scalar_adjoint(value, like):
    """`value` as a scalar in the adjoint precision of `like` (a scalar or an array): np.float32 for float32, a
    Python float otherwise."""
    if type(like) in _FLOAT_ADJOINT:  # the python backend's loops call this once per line: no dtype lookup
        return float(value)
    dtype = adjoint_dtype(like)
    return dtype.type(value) if dtype.kind == "f" and dtype != np.float64 else float(value)


def _nb_adj_of(t):
    """numba: the adjoint dtype (np.dtype) of a value of type `t`, an array or a scalar."""
    return _nb_adj_dtype(t.dtype if isinstance(t, types.Array) else t)


def _nb_adj_scalar(t):
    """numba: the function that makes a value the scalar adjoint of a value of type `t` (array or scalar),
    for an overload to close over: np.float32 for float32, float (float64) otherwise."""
    return np.float32 if _nb_adj_of(t) == np.float32 else float


def _is_scalar_type(t):
    """True for numba scalar types accepted by the helpers (number or bool)."""
    return isinstance(t, (types.Number, types.Boolean))


def _is_none_type(t):
    """True when a numba argument type stands for ``None`` (or omitted None)."""
    if t is None or isinstance(t, types.NoneType):
        return True
    return isinstance(t, types.Omitted) and t.value is None


@njit
def merged_axes(shape, sstr):
    """(extents, strides) of the fewest axes that walk the same offsets as (shape, sstr) in C order.

    GMM's (n, K, d) -> (K, d) sum becomes (n, K*d) with strides (0, 1): two plain loops instead of
    an index per element."""
    st = np.empty((1, shape.size), np.int64)
    for j in range(shape.size):  # a loop, not `st[0, :] = sstr`: numba's slice assignment compiles a
        st[0, j] = sstr[j]  # shape-mismatch message through its string formatting, a slow compile
    extents, strides, m = merged_axes_rows(shape, st)
    return extents[:m], strides[0, :m]


@njit
def merged_axes_rows(shape, st):
    """(extents, strides per row, count) of the fewest axes that walk the same offsets, in C order, as
    `shape` with each row of strides `st` (one row per array walked together).

    Neighbouring axes merge when, for every row, one step of the outer equals a full sweep of the
    inner (both broadcast, stride 0, or both kept and contiguous); size-1 axes drop."""
    nd, rows = shape.size, st.shape[0]
    extents = np.ones(max(nd, 1), np.int64)
    strides = np.zeros((rows, max(nd, 1)), np.int64)
    m = 0
    for j in range(nd):
        if shape[j] == 1:
            continue
        joins = m > 0
        for r in range(rows):
            if joins and strides[r, m - 1] != st[r, j] * shape[j]:
                joins = False
        if not joins:
            extents[m] = 1
            m += 1
        extents[m - 1] *= shape[j]
        for r in range(rows):
            strides[r, m - 1] = st[r, j]
    return extents, strides, max(m, 1)


@njit
def block_offsets(extents, strides):
    """Offsets where each run of the last merged axis starts, in C order (one per run)."""
    runs = 1
    for d in range(extents.size - 1):
        runs *= extents[d]
    out = np.empty(runs, np.int64)
    if extents.size == 2:  # the common case after merging: no multi-index
        for a in range(runs):
            out[a] = a * strides[0]
        return out
    idx = np.zeros(extents.size, np.int64)
    off = 0
    for r in range(runs):
        out[r] = off
        d = extents.size - 2
        while d >= 0:
            idx[d] += 1
            off += strides[d]
            if idx[d] < extents[d]:
                break
            off -= strides[d] * extents[d]
            idx[d] = 0
            d -= 1
    return out


SPLIT_ROW = 64  # rows this long sum in four partial sums, which vectorize; shorter ones in one chain
# each, which the processor overlaps from row to row
SHORT_RUN = 4  # a broadcast last axis of 2 or 3 is looped outside the other, as a loop per run that short costs more
# than the run; from 4 on, one run after the other is faster


@njit
def _scatter_add(big, small, shape, sstr):
    """small[off(i)] += big[i] over C-ordered multi-indices i of ``shape``."""
    extents, strides = merged_axes(shape, sstr)
    inner, step = extents[-1], strides[-1]
    if big.size == 0:
        return
    if extents.size == 2 and step == 0 and inner < SHORT_RUN:  # each small[...] still sums in C order
        for j in range(inner):
            for a in range(extents[0]):
                small[a * strides[0]] += big[a * inner + j]
        return
    if extents.size == 2 and strides[0] == 0 and step == 1:
        _sum_rows(big, small, extents[0], inner)
        return
    starts = block_offsets(extents, strides)
    for r in range(starts.size):
        k, off = r * inner, starts[r]
        if step == 0 and inner >= SPLIT_ROW:
            small[off] = run_sum(big, k, inner, small[off])
        elif step == 0:
            total = small[off]  # in small's own type: int sums stay exact
            for j in range(inner):
                total += big[k + j]
            small[off] = total
        elif step == 1:  # a literal step: the loop vectorizes
            for j in range(inner):
                small[off + j] += big[k + j]
        else:
            for j in range(inner):
                small[off + j * step] += big[k + j]


ROW_BLOCK = 16  # rows shorter than this are summed four at a time


@njit
def _sum_rows(big, small, rows, inner):
    """small[j] += the sum over rows a of big[a * inner + j]: a sum down the columns (unbroadcast of
    (n, K) to (1, K)). Short rows add four rows before each update of small, where one update per
    row waits on the last; long rows add one row at a time, which vectorizes where the loop over runs
    with a step does not."""
    if inner >= ROW_BLOCK:  # a loop of its own: after the blocked one below, LLVM leaves it scalar
        for a in range(rows):
            k = a * inner
            for j in range(inner):
                small[j] += big[k + j]
        return
    done = rows - rows % 4
    for a in range(0, done, 4):
        k = a * inner
        for j in range(inner):
            small[j] += (big[k + j] + big[k + inner + j]) + (big[k + 2 * inner + j] + big[k + 3 * inner + j])
    for a in range(done, rows):
        k = a * inner
        for j in range(inner):
            small[j] += big[k + j]


@njit
def _gather(big, small, shape, sstr):
    """big[i] = small[off(i)] over C-ordered multi-indices i of ``shape``."""
    extents, strides = merged_axes(shape, sstr)
    inner, step = extents[-1], strides[-1]
    if big.size == 0:
        return
    if extents.size == 2 and step == 0:  # each value of small copied along a run: no table of offsets
        if inner < SHORT_RUN:
            for j in range(inner):
                for a in range(extents[0]):
                    big[a * inner + j] = small[a * strides[0]]
        else:
            for a in range(extents[0]):
                value, k = small[a * strides[0]], a * inner
                for j in range(inner):
                    big[k + j] = value
        return
    starts = block_offsets(extents, strides)
    for r in range(starts.size):
        k, off = r * inner, starts[r]
        for j in range(inner):
            big[k + j] = small[off + j * step]


# ---------------------------------------------------------------------------
# zeros_like_adj
# ---------------------------------------------------------------------------

def zeros_like_adj(x):
    """Zero adjoint of ``x``: 0.0 for scalars, a float zero array for arrays, a tape of zeros for a tape."""
    if type(x) in _FLOAT_ADJOINT:
        return 0.0
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape, _np_adj_dtype(x.dtype))
    if isinstance(x, list):
        return PythonTape(zeros_like_adj(e) for e in x)
    if type(x).__name__ == "List":  # a numba typed List used from Python
        from numba.typed import List
        out = List()
        for e in x:
            out.append(zeros_like_adj(e))
        return out
    return scalar_adjoint(0.0, x)


@overload(zeros_like_adj)
def _ol_zeros_like_adj(x):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda x: cast(0.0)
    if isinstance(x, types.Array):
        dt = _nb_adj_dtype(x.dtype)
        return lambda x: np.zeros(x.shape, dt)
    if isinstance(x, types.ListType):
        def tape_of_zeros(x):
            out = List()
            for e in x:
                out.append(zeros_like_adj(e))
            return out
        return tape_of_zeros
    if isinstance(x, types.List):  # a tape compiled as numba's own list (see codegen.compiled.native_tapes)
        return lambda x: [zeros_like_adj(e) for e in x]
    raise TypingError(f"zeros_like_adj: unsupported type {x}")


# ---------------------------------------------------------------------------
# unbroadcast
# ---------------------------------------------------------------------------

def unbroadcast(g, like):
    """Sum adjoint ``g`` down to the shape of ``like`` (reverse of broadcasting)."""
    if type(g) is float and type(like) in _FLOAT_ADJOINT:  # most calls of the python backend's scalar loops
        return g
    g_arr, l_arr = isinstance(g, np.ndarray), isinstance(like, np.ndarray)
    if not l_arr:
        if g_arr:
            return scalar_adjoint(np.sum(g), like)
        return scalar_adjoint(g, like) if isinstance(like, np.floating) else g
    dt = _np_adj_dtype(like.dtype)
    if not g_arr:
        return np.full(like.shape, g, dtype=dt)
    if g.dtype.kind == "c":
        dt = g.dtype
    if g.shape == like.shape:
        return g if g.dtype == dt else g.astype(dt)
    lead = g.ndim - like.ndim
    if lead < 0:
        raise ValueError("unbroadcast: adjoint has fewer dims than target")
    s = np.sum(g, axis=tuple(range(lead))) if lead else g
    ones = tuple(i for i, n in enumerate(like.shape) if n == 1)
    s = np.sum(s, axis=ones, keepdims=True)
    if s.shape != like.shape:
        raise ValueError("unbroadcast: shapes are not broadcast-compatible")
    return np.asarray(s, dtype=dt)


@overload(unbroadcast)
def _ol_unbroadcast(g, like):
    g_arr, l_arr = isinstance(g, types.Array), isinstance(like, types.Array)
    if _is_scalar_type(like):
        cast = _nb_adj_scalar(like)
        if g_arr:
            return lambda g, like: cast(sum_all(g))
        if like == types.float32:
            return lambda g, like: cast(g)
        return lambda g, like: g
    if not (l_arr and (g_arr or _is_scalar_type(g))):
        raise TypingError(f"unbroadcast: unsupported types {g}, {like}")
    dt = _nb_adj_dtype(like.dtype)
    if not g_arr:
        return lambda g, like: np.full(like.shape, g, dt)
    if as_dtype(g.dtype) != dt and not (isinstance(g.dtype, types.Complex) and dt.kind == "f"):
        return lambda g, like: unbroadcast(g.astype(dt), like)
    if g.ndim < like.ndim:
        raise TypingError("unbroadcast: adjoint has fewer dims than target")
    if g.ndim == 1 and like.ndim == 1:  # the one broadcast there is (1,) -> (n,): no general reduction to compile
        return lambda g, like: g if g.shape == like.shape else _sum_to_one(g, like.shape)
    # the reductions take the shape alone: like's layout and dtype would only multiply their compilations
    if g.ndim != like.ndim:
        return lambda g, like: _sum_to(g, like.shape)
    return lambda g, like: g if g.shape == like.shape else _sum_to(g, like.shape)


LONG_RUN = 16  # runs this long are summed in four partial sums


@njit(inline="always")  # called per run: over short runs a call of its own would cost more than the sum
def run_sum(xf, base, n, total):
    """total + the sum of xf[base:base + n], in a register; a long run in four partial sums side by
    side (long runs vectorize, where numba's np.sum adds in one chain; short runs pay for the setup). Integer sums stay exact: `total` sets the type."""
    r = 0
    if n >= LONG_RUN:
        s1 = s2 = s3 = total * False  # a zero of total's type (numba's int 0 times a float32 is float64)
        while r + 4 <= n:
            total, s1 = total + xf[base + r], s1 + xf[base + r + 1]
            s2, s3 = s2 + xf[base + r + 2], s3 + xf[base + r + 3]
            r += 4
        total = (total + s1) + (s2 + s3)
    while r < n:
        total += xf[base + r]
        r += 1
    return total


def sum_all(x):
    """np.sum(x), the sum of every entry; compiled, contiguous arrays go through `run_sum`."""
    return np.sum(x)


@overload(sum_all)
def _ol_sum_all(x):
    if not (isinstance(x, types.Array) and x.ndim > 0 and x.layout in "CF"):
        return lambda x: np.sum(x)
    exact = isinstance(x.dtype, (types.Integer, types.Boolean))
    zero = np.int64(0) if exact else as_dtype(x.dtype).type(0)  # NumPy sums ints and bools as int64
    if x.layout == "C":
        return lambda x: sum_flat(x.reshape(x.size), zero)
    return lambda x: sum_flat(x.T.reshape(x.size), zero)  # F order: its transpose is C order


@njit
def sum_flat(xf, total):
    """total + the sum of the flat array xf: `sum_all`'s loop, module-level so that the backend
    caches it on disk once per dtype (backend._cache_runtime)."""
    return run_sum(xf, 0, xf.size, total)


@njit
def _sum_to_one(g, like_shape):
    """unbroadcast of a vector g to a vector of shape like_shape, which must then be (1,)."""
    if like_shape[0] != 1:
        raise ValueError("unbroadcast: shapes are not broadcast-compatible")
    return np.full(1, sum_all(g), g.dtype)


@njit
def _sum_to(g, like_shape):
    """unbroadcast of g to like_shape: sums over g's leading axes and the axes where like_shape is 1.

    numba links this into every caller that may broadcast (most calls then find equal shapes and never
    get here), so it is short: it checks the shapes and hands the sum to `sum_into`, which float arrays
    reach as a C function compiled once per machine (runtime.native)."""
    G, lead = g.ndim, g.ndim - len(like_shape)
    out = np.zeros(like_shape, g.dtype)
    shape, strides = np.empty(G, np.int64), np.zeros(G, np.int64)
    s = 1
    for i in range(G - 1, -1, -1):
        shape[i] = g.shape[i]
        if i < lead:
            continue
        n = like_shape[i - lead]
        if n != 1:
            if n != g.shape[i]:
                raise ValueError("unbroadcast: shapes are not broadcast-compatible")
            strides[i] = s
        s *= n
    sum_into(np.ascontiguousarray(g), out, shape, strides)
    return out


def sum_into(big, small, shape, strides):
    """small (C order) += big (C order, of `shape`) summed where `strides` (small's step per axis of big) is 0."""
    _sum_into(big.reshape(big.size), small.reshape(small.size), shape, strides)


@overload(sum_into)
def _ol_sum_into(big, small, shape, strides):
    c_function = native.chosen(_SUM_INTO_C, big.dtype, big, small)
    if c_function is None:  # complex and integer sums: compiled into the caller
        return lambda big, small, shape, strides: _sum_into(big.reshape(big.size), small.reshape(small.size),
                                                            shape, strides)
    return lambda big, small, shape, strides: c_function(big.ctypes, big.size, small.ctypes, small.size,
                                                         shape.ctypes, strides.ctypes, shape.size)


@njit
def _sum_into(big, small, shape, strides):
    """sum_into on flat arrays. Where the axes fall into two blocks, one summed and one kept (a bias's
    (n, K) to (K,), a keepdims (n, K) to (n, 1)), the loops that vectorize; elsewhere one pass over
    big's rows."""
    if big.size == 0:
        return
    if small.size == 1:
        small[0] = run_sum(big, 0, big.size, small[0])
        return
    tail = _tail_block(shape, strides)
    if tail > 0:  # the last axes kept, the others summed
        _sum_rows(big, small, big.size // tail, tail)
    elif tail < 0:  # the last axes summed, the others kept
        _sum_each_row(big, small, small.size, -tail)
    else:
        _sum_by_rows(big, small, shape, strides)


def sum_into_c(big, n, small, m, shape, strides, ndim):
    """`_sum_into` with C arguments: pointers to the data and the counts of entries."""
    _sum_into(carray(big, n), carray(small, m), carray(shape, ndim), carray(strides, ndim))


_SUM_INTO_C = native.declare(sum_into_c, (native.DATA, native.COUNT, native.DATA, native.COUNT, native.INDICES,
                                          native.INDICES, native.COUNT))


@njit
def _tail_block(shape, strides):
    """Where the axes (length-1 ones fit anywhere) are the last ones kept (stride != 0) and the others
    summed, the number of entries of that kept block; the last ones summed and the others kept, minus
    that of the summed block; 0 where kept and summed axes alternate more often."""
    i = len(shape) - 1
    while i > 0 and shape[i] == 1:
        i -= 1
    kept = strides[i] != 0
    block = 1
    while i >= 0 and (shape[i] == 1 or (strides[i] != 0) == kept):
        block *= shape[i]
        i -= 1
    while i >= 0:
        if shape[i] != 1 and (strides[i] != 0) == kept:
            return 0
        i -= 1
    return block if kept else -block


@njit
def _sum_by_rows(big, small, shape, strides):
    """small[off(i)] += big[i] over C-ordered multi-indices i of `shape`, a row of the last axis at a time
    (block_offsets' walk, without the array of offsets)."""
    G, inner = len(shape), shape[len(shape) - 1]
    step = strides[G - 1]
    index = np.zeros(G, np.int64)
    off = 0
    for k in range(0, big.size, inner):
        if step == 0:
            total = small[off]
            for j in range(inner):
                total += big[k + j]
            small[off] = total
        else:
            for j in range(inner):
                small[off + j * step] += big[k + j]
        d = G - 2
        while d >= 0:  # the next row's multi-index, and its offset in small
            index[d] += 1
            off += strides[d]
            if index[d] < shape[d]:
                break
            off -= strides[d] * shape[d]
            index[d] = 0
            d -= 1


@njit
def _sum_each_row(big, small, rows, inner):
    """small[a] += the sum of row a of big (rows of length inner, end to end)."""
    if inner < SHORT_RUN:  # one pass down each column
        for j in range(inner):
            for a in range(rows):
                small[a] += big[a * inner + j]
        return
    for a in range(rows):
        k = a * inner
        if inner >= SPLIT_ROW:
            small[a] = run_sum(big, k, inner, small[a])
        else:
            total = small[a]
            for j in range(inner):
                total += big[k + j]
            small[a] = total


# ---------------------------------------------------------------------------
# copy_adj
# ---------------------------------------------------------------------------

def copy_adj(v):
    """Independent copy of an adjoint: scalars as is, arrays via ``.copy()``."""
    return v.copy() if isinstance(v, np.ndarray) else v


@overload(copy_adj)
def _ol_copy_adj(v):
    if _is_scalar_type(v):
        return lambda v: v
    if isinstance(v, types.Array):
        return lambda v: v.copy()
    raise TypingError(f"copy_adj: unsupported type {v}")


# ---------------------------------------------------------------------------
# sum_adjoint / mean_adjoint
# ---------------------------------------------------------------------------

def _norm_axis(axis, ndim):
    """Normalise a possibly negative axis, checking its range."""
    a = axis + ndim if axis < 0 else axis
    if a < 0 or a >= ndim:
        raise ValueError("axis out of range")
    return a


def sum_adjoint(g, x, axis=None):
    """Adjoint of ``np.sum(x, axis=axis)``: broadcast ``g`` back to x's shape."""
    if not isinstance(x, np.ndarray):
        return scalar_adjoint(g, x)
    if axis is None or not isinstance(g, np.ndarray):
        return np.full(x.shape, g, dtype=adjoint_dtype(x))
    a = _norm_axis(axis, x.ndim)
    gx = np.expand_dims(g, a)
    return np.broadcast_to(gx, x.shape).astype(adjoint_dtype(x))


@overload(sum_adjoint)
def _ol_sum_adjoint(g, x, axis=None):
    cast = _nb_adj_scalar(x)
    if _is_scalar_type(x):
        return lambda g, x, axis=None: cast(g)
    if not isinstance(x, types.Array):
        raise TypingError(f"sum_adjoint: unsupported type {x}")
    if isinstance(g, types.Array) and g.ndim == 0:
        return lambda g, x, axis=None: sum_adjoint(g[()], x, axis)
    if _is_none_type(axis) or _is_scalar_type(g):
        return lambda g, x, axis=None: np.full(x.shape, cast(g))
    if not (isinstance(axis, types.Integer) and isinstance(g, types.Array)):
        raise TypingError(f"sum_adjoint: unsupported types {g}, {axis}")
    N = x.ndim
    if g.ndim != N - 1:
        raise TypingError("sum_adjoint: g must have one dim fewer than x")
    dt = _nb_adj_dtype(x.dtype)

    def impl(g, x, axis=None):
        a = axis + N if axis < 0 else axis
        if a < 0 or a >= N:
            raise ValueError("axis out of range")
        out = np.empty(x.shape, dt)
        shape = np.empty(N, np.int64)
        sstr = np.zeros(N, np.int64)
        s = 1
        for i in range(N - 1, -1, -1):
            shape[i] = x.shape[i]
            if i != a:
                sstr[i] = s
                s *= x.shape[i]
        if s != g.size:
            raise ValueError("sum_adjoint: g has the wrong shape")
        _gather(out.reshape(out.size), np.ascontiguousarray(g).reshape(g.size),
                shape, sstr)
        return out
    return impl


def mean_adjoint(g, x, axis=None):
    """Adjoint of ``np.mean(x, axis=axis)``: sum_adjoint divided by the count."""
    if not isinstance(x, np.ndarray):
        return scalar_adjoint(g, x)
    n = x.size if axis is None else x.shape[_norm_axis(axis, x.ndim)]
    return sum_adjoint(g, x, axis) / adjoint_dtype(x).type(n)


@overload(mean_adjoint)
def _ol_mean_adjoint(g, x, axis=None):
    cast = _nb_adj_scalar(x)
    if _is_scalar_type(x):
        return lambda g, x, axis=None: cast(g)
    if not isinstance(x, types.Array):
        raise TypingError(f"mean_adjoint: unsupported type {x}")
    if _is_none_type(axis):
        return lambda g, x, axis=None: sum_adjoint(g, x) / cast(x.size)
    if not isinstance(axis, types.Integer):
        raise TypingError(f"mean_adjoint: unsupported axis type {axis}")
    N = x.ndim

    def impl(g, x, axis=None):
        a = axis + N if axis < 0 else axis
        if a < 0 or a >= N:
            raise ValueError("axis out of range")
        return sum_adjoint(g, x, axis) / cast(x.shape[a])
    return impl


# ---------------------------------------------------------------------------
# range_last
# ---------------------------------------------------------------------------

def range_last(start, stop, step):
    """Last value of ``range(start, stop, step)``, or ``start - step`` if empty."""
    if step > 0:
        n = (stop - start + step - 1) // step if stop > start else 0
    elif step < 0:
        n = (start - stop - step - 1) // (-step) if start > stop else 0
    else:
        raise ValueError("range_last: step must not be zero")
    return start + (n - 1) * step


@overload(range_last)
def _ol_range_last(start, stop, step):
    if not all(isinstance(t, types.Integer) for t in (start, stop, step)):
        raise TypingError("range_last: integer arguments required")
    return range_last


# ---------------------------------------------------------------------------
# tapes
# ---------------------------------------------------------------------------

class PythonTape(list):
    """The tape generated code gets as `List` when it runs uncompiled (backend="python")."""


def restore(tape, current):
    """Undo one taped write: drop its value and return the one before (or `current`)."""
    tape.pop()
    return tape[-1] if len(tape) > 0 else current


def new_tape():
    """An empty tape: `t = List()` lines as compiled code makes them (codegen.compiled.native_tapes)."""
    return []


TAPE_CAPACITY = 7  # numba's append shrinks a list holding more than four times its new size: 7 // 4 = 1


@type_callable(new_tape)
def _type_new_tape(context):
    """A list whose element type the appends decide, as for `[]` (typed here, not by an overload, which
    would have to return a precise type)."""
    return lambda: types.List(types.undefined)


@lower_builtin(new_tape)
def _lower_new_tape(context, builder, signature, args):
    """numba's empty list with room for TAPE_CAPACITY elements, in one allocation: `[]` allocates none
    and reallocates on the first append, which costs more than the rest of a short tape's life (in the
    Kepler gradient, five tapes per call)."""
    return ListInstance.allocate(context, builder, signature.return_type, TAPE_CAPACITY).value


def tape_pop(tape):
    """`tape.pop()` as compiled code calls it (codegen.compiled.native_tapes rewrites `x = t.pop()` lines)."""
    return tape.pop()


def _owns_references(context, dtype) -> bool:
    return context.enable_nrt and context.data_model_manager[dtype].contains_nrt_meminfo()


def _drop_top(context, builder, inst, top, keep_reference: bool) -> None:
    """Shorten numba's list to `top` elements without giving memory back (a tape is emptied only by
    the sweep that reads it, so shrinking would only realloc on the way down). A slot past the end
    must hold null for a dtype with references: `append` releases what the slot held."""
    if _owns_references(context, inst.dtype):
        if not keep_reference:
            inst.decref_value(inst.getitem(top))
        inst.zfill(top, builder.add(top, llvm_ir.Constant(top.type, 1)))
    inst.size = top


@intrinsic
def _pop_in_place(typingctx, tape):
    """pop() on numba's own list, without the shrinking realloc of `list.pop`: a tape is popped once per
    taped value (in the Kepler benchmark's gradient, three floats per Newton step)."""
    if not isinstance(tape, types.List):
        return None

    def codegen(context, builder, signature, args):
        inst = ListInstance(context, builder, signature.args[0], args[0])
        size = inst.size
        cgutils.guard_zero(context, builder, size, (IndexError, "pop from an empty tape"))
        top = builder.sub(size, llvm_ir.Constant(size.type, 1))
        value = inst.getitem(top)  # the list's reference passes to the caller
        _drop_top(context, builder, inst, top, keep_reference=True)
        return value

    return tape.dtype(tape), codegen


@overload(tape_pop)
def _ol_tape_pop(tape):
    if not isinstance(tape, (types.ListType, types.List)):
        raise TypingError("tape_pop: a tape (a list) is required")
    if isinstance(tape, types.List):
        return lambda tape: _pop_in_place(tape)
    return lambda tape: tape.pop()


@intrinsic
def _restore_in_place(typingctx, tape, current):
    """restore() on numba's own list, in one pass over it: drop the top element and read the one
    below without the bounds checks and wraparound of `pop()` then `tape[-1]`, nor its shrinking
    realloc (half the time)."""
    if not isinstance(tape, types.List) or tape.dtype != current:
        return None

    def codegen(context, builder, signature, args):
        inst = ListInstance(context, builder, signature.args[0], args[0])
        size = inst.size
        cgutils.guard_zero(context, builder, size, (IndexError, "restore from an empty tape"))
        one = llvm_ir.Constant(size.type, 1)
        top = builder.sub(size, one)
        _drop_top(context, builder, inst, top, keep_reference=False)
        out = cgutils.alloca_once_value(builder, args[1])
        with builder.if_then(builder.icmp_signed(">", top, llvm_ir.Constant(size.type, 0)), likely=True):
            builder.store(inst.getitem(builder.sub(top, one)), out)
        result = builder.load(out)
        context.nrt.incref(builder, signature.return_type, result)
        return result

    return current(tape, current), codegen


@overload(restore)
def _ol_restore(tape, current):
    if not isinstance(tape, (types.ListType, types.List)):
        raise TypingError("restore: a tape (a list) is required")
    if isinstance(tape, types.List) and tape.dtype == current:
        return lambda tape, current: _restore_in_place(tape, current)

    def impl(tape, current):
        tape.pop()
        if len(tape) > 0:
            return tape[len(tape) - 1]
        return current

    return impl


def stop_gradient(x):
    """The identity; differentiation treats its result as a constant."""
    return x


@overload(stop_gradient)
def _ol_stop_gradient(x):
    return lambda x: x


# ---------------------------------------------------------------------------
# matrix products: stacks of matrices under numba, adjoints of a @ b / np.dot(a, b)
# ---------------------------------------------------------------------------

def matmul_adjoint_a(g, a, b):
    """Adjoint of `a` in `a @ b` (or np.dot) given the output adjoint `g`."""
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return unbroadcast(g * b, a)
    if na > 2 or nb > 2:
        return _stacked_matmul_adjoints(g, a, b)[0]
    if na == 1 and nb == 1:
        return g * b
    if na == 2 and nb == 1:
        return np.outer(g, b)
    if na == 1:
        return b @ g
    return g @ b.T


def matmul_adjoint_b(g, a, b):
    """Adjoint of `b` in `a @ b` (or np.dot) given the output adjoint `g`."""
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return unbroadcast(g * a, b)
    if na > 2 or nb > 2:
        return _stacked_matmul_adjoints(g, a, b)[1]
    if na == 1 and nb == 1:
        return g * a
    if na == 1:
        return np.outer(a, g)
    return a.T @ g


def _stacked_matmul_adjoints(g, a, b):
    """The adjoints of `a @ b` for stacks of matrices: a vector operand is a matrix of one row (a) or one
    column (b), as np.matmul treats it; the stacks' broadcasting is undone by `unbroadcast`."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g[..., None, :] if a.ndim == 1 else g
    g2 = g2[..., None] if b.ndim == 1 else g2
    a_bar = g2 @ np.swapaxes(b2, -1, -2)
    b_bar = np.swapaxes(a2, -1, -2) @ g2
    a_bar = a_bar[..., 0, :] if a.ndim == 1 else a_bar
    b_bar = b_bar[..., 0] if b.ndim == 1 else b_bar
    return unbroadcast(a_bar, a), unbroadcast(b_bar, b)


def _ndim(t):
    return t.ndim if isinstance(t, types.Array) else 0


@overload(operator.matmul)
def _ol_stacked_matmul(a, b):
    """`a @ b` where an operand is a stack of matrices (3-D or more): numba's `@` takes 1-D and 2-D arrays only.
    The stacks broadcast as in np.matmul (a 1-D or 2-D operand is used for every matrix of the other); the
    product loops over the broadcast stack, one BLAS product per pair of matrices, written in place by
    np.dot's `out`, which spares copying each product."""
    if not (_ndim(a) >= 1 and _ndim(b) >= 1 and max(_ndim(a), _ndim(b)) >= 3):
        return None

    def stacked(a, b):
        stack = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])  # a vector has no stack dims
        a3, b3 = _matrices(a), _matrices(b)
        out = np.empty((_size(stack),) + _core_shape(a, b), a.dtype)
        for i in range(out.shape[0]):
            np.dot(as_blas(_matrix(a3, a.shape, stack, i)), as_blas(_matrix(b3, b.shape, stack, i)), out[i])
        return out.reshape(stack + out.shape[1:])
    return stacked


@njit
def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@register_jitable  # plain Python in the python backend, which compiles nothing
def _source(i, stack, shape):
    """The index, among the matrices of an array of `shape`, of the one the i-th matrix of the broadcast
    `stack` reads (C order; a stack dim of size 1 is read at 0)."""
    j, step = 0, 1
    for d in range(1, len(shape) - 1):  # shape's stack dims, the last first
        n, m = shape[len(shape) - 2 - d], stack[len(stack) - d]
        if n != 1:
            j += i % m * step
        i //= m
        step *= n
    return j


def _matrices(x):
    """`x` as a 3-D stack of its matrices (a 1-D or 2-D `x` as itself)."""
    return x.reshape((-1,) + x.shape[-2:]) if x.ndim > 2 else x


def _matrix(x3, shape, stack, i):
    """The matrix (or vector) of `x3 = _matrices(x)` that the i-th product of the broadcast `stack` reads."""
    return x3[_source(i, stack, shape)] if x3.ndim == 3 else x3


def _core_shape(a, b):
    """The shape of one product of `a @ b`'s matrices: a vector operand drops its dim."""
    if a.ndim == 1:
        return (b.shape[-1],)
    if b.ndim == 1:
        return (a.shape[-2],)
    return (a.shape[-2], b.shape[-1])


@overload(_matrices)
def _ol_matrices(x):
    if x.ndim <= 2:
        return lambda x: as_blas(x)  # used for every product: one copy at most
    if x.ndim == 3:
        return lambda x: x
    if x.layout == "C":
        return lambda x: x.reshape((_size(x.shape[:-2]),) + x.shape[-2:])
    return lambda x: np.ascontiguousarray(x).reshape((_size(x.shape[:-2]),) + x.shape[-2:])


@overload(_matrix)
def _ol_matrix(x3, shape, stack, i):
    if x3.ndim == 3:
        return lambda x3, shape, stack, i: x3[_source(i, stack, shape)]
    return lambda x3, shape, stack, i: x3


@overload(_core_shape)
def _ol_core_shape(a, b):
    if a.ndim == 1:
        return lambda a, b: (b.shape[-1],)
    if b.ndim == 1:
        return lambda a, b: (a.shape[-2],)
    return lambda a, b: (a.shape[-2], b.shape[-1])


@overload(matmul_adjoint_a)
def _ol_matmul_adjoint_a(g, a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return lambda g, a, b: unbroadcast(g * b, a)
    if na >= 3 and nb == 1:
        return lambda g, a, b: np.expand_dims(g, na - 1) * b
    if na == 1 and nb >= 3:
        return lambda g, a, b: unbroadcast((np.expand_dims(g, nb - 2) @ np.swapaxes(b, -1, -2))[..., 0, :], a)
    if na >= 3 or nb >= 3:
        return lambda g, a, b: unbroadcast(g @ np.swapaxes(b, -1, -2), a)
    if na == 1 and nb == 1:
        return lambda g, a, b: g * b
    if na == 2 and nb == 1:
        return lambda g, a, b: np.outer(g, b)
    if na == 1:
        return lambda g, a, b: as_blas(b) @ as_blas(g)
    return lambda g, a, b: as_blas(g) @ as_blas(b.T)


@overload(matmul_adjoint_b)
def _ol_matmul_adjoint_b(g, a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return lambda g, a, b: unbroadcast(g * a, b)
    if na >= 3 and nb == 1:
        return lambda g, a, b: unbroadcast((np.expand_dims(g, na - 2) @ a)[..., 0, :], b)
    if na == 1 and nb >= 3:
        return lambda g, a, b: np.expand_dims(a, 1) * np.expand_dims(g, nb - 2)
    if na >= 3 or nb >= 3:
        return lambda g, a, b: unbroadcast(np.swapaxes(a, -1, -2) @ g, b)
    if na == 1 and nb == 1:
        return lambda g, a, b: g * a
    if na == 1:
        return lambda g, a, b: np.outer(a, g)
    if _ndim(g) == 1:
        return lambda g, a, b: as_blas(g) @ as_blas(a)  # = a.T @ g, reading `a` in its own order
    return lambda g, a, b: as_blas(a.T) @ as_blas(g)


def as_blas(x):
    """`x` itself if BLAS can read it in place (C or Fortran order, e.g. a transpose), else a C copy."""
    return x


@overload(as_blas)
def _ol_as_blas(x):
    if isinstance(x, types.Array) and x.layout in "CF":
        return lambda x: x  # a.T of a C array is Fortran-ordered: BLAS reads it without a copy
    return lambda x: np.ascontiguousarray(x)


# ---------------------------------------------------------------------------
# NumPy functions numba lacks in the form generated code needs
# ---------------------------------------------------------------------------

def mean_axis(x, axis=None):
    """np.mean(x, axis): numba's np.mean has no `axis` (and scalars are their own mean)."""
    return np.mean(x, axis=axis) if isinstance(x, np.ndarray) else x


@overload(mean_axis)
def _ol_mean_axis(x, axis=None):
    if _is_scalar_type(x):
        return lambda x, axis=None: x
    if _is_none_type(axis):
        return lambda x, axis=None: np.mean(x)
    return lambda x, axis=None: np.sum(x, axis=axis) / x.shape[axis]


def sum_axis(x, axis=None):
    """np.sum(x, axis) that also takes scalars (a scalar is its own sum)."""
    return np.sum(x, axis=axis) if isinstance(x, np.ndarray) else x


@overload(sum_axis)
def _ol_sum_axis(x, axis=None):
    if _is_scalar_type(x):
        return lambda x, axis=None: x
    if _is_none_type(axis):
        return lambda x, axis=None: sum_all(x)
    return lambda x, axis=None: np.sum(x, axis=axis)


# ---------------------------------------------------------------------------
# forward mode and the transposes of adjoint helpers
# ---------------------------------------------------------------------------

def broadcast_like(t, like):
    """`t` broadcast to the shape of `like`, as a new float array (scalars stay scalars)."""
    if not isinstance(like, np.ndarray):
        return t
    out = np.zeros(like.shape, adjoint_dtype(like))
    out += t
    return out


@overload(broadcast_like)
def _ol_broadcast_like(t, like):
    if _is_scalar_type(like):
        return lambda t, like: t
    dt = _nb_adj_dtype(like.dtype)
    if isinstance(t, types.Array) and t.ndim == like.ndim:
        def same_rank(t, like):
            if t.shape == like.shape:
                return t
            out = np.zeros(like.shape, dt)
            out += t
            return out
        return same_rank

    def impl(t, like):
        out = np.zeros(like.shape, dt)
        out += t
        return out
    return impl


def matmul_like(a, b):
    """`a @ b`, where a 0-d operand multiplies (the transposes of matmul adjoints need it)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return a @ b


@overload(matmul_like)
def _ol_matmul_like(a, b):
    if _ndim(a) == 0 or _ndim(b) == 0:
        return lambda a, b: a * b
    return lambda a, b: np.ascontiguousarray(a) @ np.ascontiguousarray(b)


def add_at(a, idx, v):
    """A copy of `a` with `v` added at `idx` along the first axis, repeated indices accumulating.

    The adjoint of a read `x[idx]` with an integer-array `idx` (np.add.at, which numba lacks).
    """
    out = np.array(a, dtype=adjoint_dtype(a))
    np.add.at(out, idx, v)
    return out


def _int_items(idx) -> bool:
    """A tuple of ints: one position, never repeated."""
    return isinstance(idx, types.BaseTuple) and all(isinstance(t, types.Integer) for t in idx.types)


def _index_arrays(idx) -> bool:
    """A tuple of 1-D integer index arrays and ints, one per leading axis (np.tril_indices_from, `y[i, idx]`)."""
    return isinstance(idx, types.BaseTuple) and not _int_items(idx) and all(
        isinstance(t, types.Integer) or isinstance(t, types.Array) and t.ndim == 1 and isinstance(t.dtype, types.Integer)
        for t in idx.types)


def _item_at(item, k):
    """Position k's index on one axis: an index array's k-th item, or the int every position shares."""
    return item if np.ndim(item) == 0 else item[k]


@overload(_item_at)
def _ol_item_at(item, k):
    if isinstance(item, types.Integer):
        return lambda item, k: item
    return lambda item, k: item[k]


@register_jitable
def _flat_positions(idx, shape):
    """The positions index arrays (and ints) `idx` name in the leading axes of `shape`, counted in C order."""
    flat = np.zeros(1, np.int64)
    d = 0
    for item in literal_unroll(idx):
        flat = flat * shape[d] + (item + shape[d] * (item < 0))
        d += 1
    return flat


@register_jitable
def _same_position(idx, j, k):
    same = True
    for item in literal_unroll(idx):
        same = same and _item_at(item, j) == _item_at(item, k)
    return same


@overload(add_at)
def _ol_add_at(a, idx, v):
    dt = _nb_adj_dtype(a.dtype)
    if _index_arrays(idx):
        axes = idx.count

        def positions(a, idx, v):  # the 1-D case on the leading axes' flattened view
            rows = np.ascontiguousarray(a).reshape((-1,) + a.shape[axes:])
            return add_at(rows, _flat_positions(idx, a.shape), v).reshape(a.shape)
        return positions
    if isinstance(idx, types.Integer) or _int_items(idx):
        def one(a, idx, v):
            out = a.astype(dt)
            out[idx] += v
            return out
        return one
    if isinstance(idx, types.SliceType) or isinstance(idx, types.Array) and isinstance(idx.dtype, types.Boolean):
        def masked(a, idx, v):  # a mask (or a slice) picks each entry at most once
            out = a.astype(dt)
            out[idx] += v
            return out
        return masked
    if not (isinstance(idx, types.Array) and isinstance(idx.dtype, types.Integer) and idx.ndim == 1):
        raise TypingError(f"add_at: index must be an int, a 1-D int array or a boolean mask, got {idx}")
    if isinstance(v, types.Array):
        def many(a, idx, v):
            out = a.astype(dt)
            for k in range(idx.shape[0]):
                out[idx[k]] += v[k]
            return out
        return many

    def broadcast_value(a, idx, v):
        out = a.astype(dt)
        for k in range(idx.shape[0]):
            out[idx[k]] += v
        return out
    return broadcast_value


def index_array(values):
    """np.array(values) of ints: a constant integer index such as x[[0, 2, 2]]."""
    return np.array(values, dtype=np.int64)


@overload(index_array)
def _ol_index_array(values):
    return lambda values: np.array(values)


def diagonal_mask(shape):
    """A boolean mask of `shape` true where all indices are equal: the items np.diag_indices_from picks, in the
    same (C) order, as one index numba can read and write with."""
    out = np.zeros(shape, dtype=np.bool_)
    out[np.diag_indices_from(out)] = True  # NumPy's errors for fewer than 2 or unequal dimensions
    return out


@overload(diagonal_mask)
def _ol_diagonal_mask(shape):
    if not isinstance(shape, types.UniTuple) or shape.count < 2:
        raise TypingError(f"diagonal_mask: an array of at least 2 dimensions is needed, got shape {shape}")

    def impl(shape):
        out = np.zeros(shape, np.bool_)
        step = 0  # in C order the diagonal is every (1 + n + n^2 + ...)-th item
        for n in shape:
            if n != shape[0]:
                raise ValueError("All dimensions of input must be of equal length")
            step = step * n + 1
        out.reshape(out.size)[::step] = True
        return out
    return impl


def triangle_mask(n, m, k, upper):
    """A boolean (n, m) mask true on and above (`upper`) or on and below the k-th diagonal: the items
    np.triu_indices / np.tril_indices pick, in the same (C) order, as one index numba can read and write with."""
    out = np.zeros((n, m), dtype=np.bool_)
    for i in range(n):
        for j in range(m):
            out[i, j] = j - i >= k if upper else j - i <= k
    return out


@overload(triangle_mask)
def _ol_triangle_mask(n, m, k, upper):
    return triangle_mask


def hstack_axis(x):
    """The axis np.hstack joins along: 0 for 1-D arrays, else 1."""
    return 0 if np.ndim(x) == 1 else 1


@overload(hstack_axis)
def _ol_hstack_axis(x):
    axis = 0 if _ndim(x) == 1 else 1
    return lambda x: axis


def batch_empty(n, like):
    """An uninitialised float array of shape (n,) + shape(like), in like's precision: the output of a vmap
    loop whose first result is `like`."""
    return np.empty((n,) + np.shape(like), adjoint_dtype(like))


@overload(batch_empty)
def _ol_batch_empty(n, like):
    dt = _nb_adj_of(like)
    if _is_scalar_type(like):
        return lambda n, like: np.empty(n, dt)
    return lambda n, like: np.empty((n,) + like.shape, dt)


def mask_last(g, idx):
    """`g` (rows taken at `idx`) with the rows of all but the last occurrence of each index zeroed.

    NumPy's `y[idx] = v` keeps the last write of a repeated index; the others have no effect,
    so their adjoint is zero. `idx` may be a tuple of index arrays, one per axis (np.tril_indices_from):
    a position is then one row of them.
    """
    idx = idx if isinstance(idx, tuple) else (idx,)
    at = [k for k, i in enumerate(idx) if not isinstance(i, slice)]  # NumPy's advanced indices: ints and arrays
    chosen = [idx[k] for k in at]
    if all(np.ndim(i) == 0 for i in chosen) or any(np.asarray(i).dtype == np.bool_ for i in chosen):
        return g  # one position, or a mask, which picks each entry at most once
    lead = np.broadcast_shapes(*[np.shape(i) for i in chosen])
    # the positions' axes of `g`: where the advanced indices stand when they are adjacent, else first
    first = at[0] if at == list(range(at[0], at[0] + len(at))) else 0
    out = np.array(g, dtype=adjoint_dtype(g))
    rows = np.moveaxis(out, list(range(first, first + len(lead))), list(range(len(lead))))  # a view of `out`
    keys = list(zip(*[np.ravel(np.broadcast_to(i, lead)).tolist() for i in chosen]))
    seen = set()
    for k in range(len(keys) - 1, -1, -1):
        if keys[k] in seen:
            rows[np.unravel_index(k, lead)] = 0.0
        seen.add(keys[k])
    return out


@overload(mask_last)
def _ol_mask_last(g, idx):
    if isinstance(idx, types.Integer) or isinstance(getattr(idx, "dtype", None), types.Boolean) or _int_items(idx) \
            or isinstance(idx, types.BaseTuple) and all(isinstance(t, (types.Integer, types.SliceType)) for t in idx.types):
        return lambda g, idx: g  # one position per item of g
    if isinstance(idx, types.Array) and idx.ndim == 1:
        return lambda g, idx: mask_last(g, (idx,))
    if not _index_arrays(idx):
        raise TypingError(f"mask_last: index must be an int, a 1-D int array (or a tuple of them and ints) or a "
                          f"mask, got {idx}")
    n_of = next(k for k, t in enumerate(idx.types) if isinstance(t, types.Array))
    dt = _nb_adj_dtype(g.dtype)

    def positions(g, idx):  # position k is (idx[0][k], idx[1][k], ...), an int standing for itself
        out = g.astype(dt)
        n = idx[n_of].shape[0]
        for k in range(n):
            for j in range(k + 1, n):
                if _same_position(idx, j, k):
                    out[k] = 0.0
                    break
        return out
    return positions

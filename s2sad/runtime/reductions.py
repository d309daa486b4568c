"""Runtime helpers for the reductions rules (plain Python, plus numba overloads).

numba's reductions take at most an integer `axis` and no `keepdims`, and numba has no `axis` for
np.prod/np.max/np.min/np.mean/np.var/np.std/np.diff: the `*_reduce` / `*_axis` stand-ins below take
`axis` None, an int (negative too) or a tuple of ints, and `keepdims`. Under numba, `keepdims` fixes the
result's rank, so it must be a constant (it is, in generated code).
"""

import numpy as np
from numba import carray, njit, types
from numba.core.errors import TypingError
from llvmlite import ir
from numba.extending import intrinsic, overload
from numba.np.numpy_support import as_dtype, from_dtype
from numba.np.unsafe.ndarray import to_fixed_tuple

from s2sad.runtime import native
from s2sad.runtime.core import (_gather, _is_none_type, _is_scalar_type, _nb_adj_dtype, _nb_adj_scalar, _scatter_add,
                               adjoint_dtype, block_offsets, merged_axes, run_sum, scalar_adjoint, sum_all,
                               unbroadcast)

__all__ = [
    "sum_reduce",
    "sum_expand",
    "mean_reduce",
    "reduce_count",
    "prod_reduce",
    "lone_zero",
    "max_reduce",
    "min_reduce",
    "extremum_mask",
    "extremum_adjoint",
    "center",
    "var_reduce",
    "std_reduce",
    "cumsum_axis",
    "cumsum_adjoint",
    "cumprod_axis",
    "first_zero",
    "diff_axis",
    "diff_adjoint",
    "trace_adjoint",
    "norm_op",
    "norm_grad",
    "norm_smooth",
]

SUM, PROD, MAX, MIN = 0, 1, 2, 3


# ---------------------------------------------------------------------------
# shared utilities: which axes a reduction removes
# ---------------------------------------------------------------------------

def _axes(ndim, axis):
    """The sorted, non-negative axes that `axis` (None, an int or a tuple of ints) names."""
    if axis is None:
        return tuple(range(ndim))
    out = []
    for a in axis if isinstance(axis, (tuple, list)) else (axis,):
        b = int(a) + ndim if a < 0 else int(a)
        if b < 0 or b >= ndim or b in out:
            raise ValueError(f"axis {axis} is out of range or repeated for {ndim} dimensions")
        out.append(b)
    return tuple(sorted(out))


def _kept_shape(x, axis):
    """x's shape with the reduced axes set to 1 (the `keepdims=True` shape)."""
    red = _axes(x.ndim, axis)
    return tuple(1 if i in red else n for i, n in enumerate(x.shape))


def _ones_where(cond, like):
    """1.0 where `cond`, 0.0 elsewhere, in the adjoint precision of `like`."""
    if isinstance(cond, np.ndarray):
        return cond.astype(adjoint_dtype(like))
    return scalar_adjoint(cond, like)


def _red_flags(n, axis):
    """Boolean array: True for each of the n axes that `axis` reduces (numba only)."""
    raise NotImplementedError


def _int_tuple_values(t):
    """The values of a tuple type of integer literals, or None."""
    if isinstance(t, types.BaseTuple) and all(isinstance(e, types.IntegerLiteral) for e in t):
        return tuple(e.literal_value for e in t)
    return None


@njit
def _flags(n, axes):
    f = np.zeros(n, np.bool_)
    for a in axes:
        b = a + n if a < 0 else a
        if b < 0 or b >= n or f[b]:
            raise ValueError("axis out of range or repeated")
        f[b] = True
    return f


@overload(_red_flags)
def _ol_red_flags(n, axis):
    if _is_none_type(axis):
        return lambda n, axis: np.ones(n, np.bool_)
    if isinstance(axis, types.Integer):
        return lambda n, axis: _flags(n, (axis,))
    values = _int_tuple_values(axis)
    if values is not None:
        return lambda n, axis: _flags(n, values)
    if isinstance(axis, types.UniTuple) and isinstance(axis.dtype, types.Integer):
        return lambda n, axis: _flags(n, axis)
    raise TypingError(f"axis must be None, an int or a tuple of ints, not {axis}")


def _n_reduced(axis, ndim):
    """How many axes a numba `axis` type removes (typing time)."""
    if _is_none_type(axis):
        return ndim
    if isinstance(axis, types.Integer):
        return 1
    if isinstance(axis, types.BaseTuple) and all(isinstance(e, types.Integer) for e in axis):
        return len(axis)
    raise TypingError(f"axis must be None, an int or a tuple of ints, not {axis}")


def _literal_bool(t, what):
    """The value of a constant bool argument type (typing time)."""
    if t is None or isinstance(t, bool):
        return bool(t)
    if isinstance(t, types.Omitted):
        return bool(t.value)
    if isinstance(t, (types.BooleanLiteral, types.IntegerLiteral)):
        return bool(t.literal_value)
    raise TypingError(f"{what} must be a constant True/False under numba")


def _block_axes(ndim, axis):
    """Typing time: (first, last), the axes a constant `axis` reduces when they are consecutive (None,
    an int literal, a tuple of int literals in a run); None where only run time tells. Compiled code
    then takes one path, through the block loops below, and none of the loops for scattered axes."""
    if _is_none_type(axis):
        return 0, ndim - 1
    if isinstance(axis, types.IntegerLiteral):
        values = (axis.literal_value,)
    else:
        values = _int_tuple_values(axis)
    if not values:
        return None
    axes = sorted(a + ndim if a < 0 else a for a in values)
    if axes[0] < 0 or axes[-1] >= ndim or axes != list(range(axes[0], axes[-1] + 1)):
        return None  # out of range or repeated: the general path raises NumPy's error at run time
    return axes[0], axes[-1]


@njit
def _block_sizes(shape, first, last):
    """(outer, n, inner): the sizes of the axes before `first`, from `first` to `last`, and after."""
    outer, n, inner = 1, 1, 1
    for i in range(len(shape)):
        if i < first:
            outer *= shape[i]
        elif i > last:
            inner *= shape[i]
        else:
            n *= shape[i]
    return outer, n, inner


@njit
def _kept_dims(shape, first, last, keep):
    """The shape of a reduction over axes `first`..`last`: those axes dropped, or (keep) set to 1."""
    out = np.empty(len(shape) - (0 if keep else last - first + 1), np.int64)
    j = 0
    for i in range(len(shape)):
        if i < first or i > last:
            out[j] = shape[i]
            j += 1
        elif keep:
            out[j] = 1
            j += 1
    return out


@njit
def _shape_arr(x):
    out = np.empty(x.ndim, np.int64)
    for i in range(x.ndim):
        out[i] = x.shape[i]
    return out


@njit
def _reduce_flat(xf, shape, red, op, out):
    """out[j] = op over the entries i of xf (C-ordered, `shape`) whose kept indices flatten to j."""
    nd = shape.size
    sstr = np.zeros(nd, np.int64)
    s = 1
    for i in range(nd - 1, -1, -1):
        if not red[i]:
            sstr[i] = s
            s *= shape[i]
    if xf.size == 0:
        return
    if op == SUM:
        _scatter_add(xf, out, shape, sstr)
        return
    extents, strides = merged_axes(shape, sstr)
    inner, step = extents[-1], strides[-1]
    starts = block_offsets(extents, strides)
    seen = np.zeros(out.size, np.bool_)
    for r in range(starts.size):
        k, off = r * inner, starts[r]
        for j in range(inner):
            v = xf[k + j]
            o = off + j * step
            if op == PROD:
                out[o] *= v
            elif not seen[o] or (v > out[o] if op == MAX else v < out[o]) or v != v:  # nan wins, as in NumPy
                out[o] = v
            seen[o] = True


@njit
def _out_shape(shape, red, keep):
    m = 0
    for i in range(shape.size):
        if keep or not red[i]:
            m += 1
    out = np.empty(m, np.int64)
    j = 0
    for i in range(shape.size):
        if keep:
            out[j] = 1 if red[i] else shape[i]
            j += 1
        elif not red[i]:
            out[j] = shape[i]
            j += 1
    return out


def _reduce_dtype(dtype, op):
    """NumPy dtype of a sum/product/max/min of entries of numba dtype `dtype`."""
    if isinstance(dtype, (types.Float, types.Complex)) or op in (MAX, MIN):
        return as_dtype(dtype)
    return np.dtype(np.int64)  # sums and products of ints and bools, as NumPy on 64-bit platforms


@njit
def _reduce(x, red, op, keep, out):
    """Reduce x into `out` (flat, filled with the identity); return `out` and the result's shape."""
    if x.size == 0 and (op == MAX or op == MIN):
        raise ValueError("zero-size array to reduction operation which has no identity")
    shape = _shape_arr(x)
    outer, n, inner = _block(shape, red)
    if op == SUM and n >= 0:
        sum_block(_flat(x), out, outer, n, inner)
    elif op == MAX and n >= 0:
        max_block(_flat(x), out, outer, n, inner)
    elif op == MIN and n >= 0:
        min_block(_flat(x), out, outer, n, inner)
    else:
        _reduce_flat(_flat(x), shape, red, op, out)
    return out, _out_shape(shape, red, keep)


# ---------------------------------------------------------------------------
# sums, max, min and the max's adjoint over consecutive axes (the usual case: one axis, or all): x
# viewed as (outer, n, inner), reduced over the middle axis. The passes above, which handle any set of
# axes (axis=(0, 2)), keep an index per axis and run slower. The loops index flat arrays: numba's 3-D
# indexing of a reshaped array dominates where inner loops run once or twice.
# ---------------------------------------------------------------------------

@njit
def _block(shape, red):
    """(outer, n, inner): the sizes of the kept axes before the reduced ones, the reduced ones, and
    the kept ones after; n is -1 where a kept axis lies between two reduced ones."""
    first, last = shape.size, -1
    for i in range(shape.size):
        if red[i]:
            first, last = min(first, i), i
    outer, n, inner = 1, 1, 1
    for i in range(shape.size):
        if i < first:
            outer *= shape[i]
        elif i > last:
            inner *= shape[i]
        elif red[i]:
            n *= shape[i]
        else:
            return 0, -1, 0
    return outer, n, inner


@njit
def _sum_runs(xf, out, outer, n):
    """out[o] += the sum of the run xf[o*n:(o + 1)*n] (`run_sum`). Runs of 2 and 3 (points in the
    plane and in space) have loops of their own, in the same order: the general loop's setup would dominate them."""
    if n == 2:
        for o in range(outer):
            out[o] = (out[o] + xf[2 * o]) + xf[2 * o + 1]
        return
    if n == 3:
        for o in range(outer):
            out[o] = ((out[o] + xf[3 * o]) + xf[3 * o + 1]) + xf[3 * o + 2]
        return
    for o in range(outer):
        out[o] = run_sum(xf, o * n, n, out[o])


@njit
def _sum_block(xf, out, outer, n, inner):
    """out[o*inner + i] += the sum over r of xf[(o*n + r)*inner + i]."""
    if inner == 1:
        _sum_runs(xf, out, outer, n)
        return
    for o in range(outer):
        base = o * n * inner
        row = o * inner
        for r in range(n):
            at = base + r * inner
            for i in range(inner):
                out[row + i] += xf[at + i]


def _extremum_pick(largest: bool):
    """pick(m, v): the larger (smaller) of two values, nan if either is nan, as NumPy's max (min).

    For two float64s (or two float32s), LLVM's `maximum`/`minimum` (also -0.0 below 0.0): as a compare
    and a select, a running maximum stays scalar code; as this intrinsic LLVM vectorizes it, reductions
    included."""
    name = "llvm.maximum" if largest else "llvm.minimum"

    @intrinsic
    def ieee(typingctx, m, v):
        def codegen(context, builder, signature, args):
            real = context.get_value_type(signature.return_type)
            fn = builder.module.declare_intrinsic(name, [real], ir.FunctionType(real, [real, real]))
            return builder.call(fn, args)
        return m(m, m), codegen

    def pick(m, v):
        raise NotImplementedError("compiled only")

    @overload(pick, inline="always")
    def _ol_pick(m, v):
        if m == v and m in (types.float32, types.float64):
            return lambda m, v: ieee(m, v)
        if largest:
            return lambda m, v: v if (v > m or v != v) else m
        return lambda m, v: v if (v < m or v != v) else m

    return pick


def _extremum_block_for(largest: bool):
    """The max (largest) or min loop: out[o*inner + i] = extremum over r of xf[(o*n + r)*inner + i],
    nan where any entry is nan (as NumPy); n > 0. `largest` is a constant of the compiled loop. Rows
    are slices, so each loop's index starts at 0: LLVM vectorizes no loop indexed `base + r`."""
    pick = _extremum_pick(largest)

    @njit
    def run(row):
        m = row[0]
        for r in range(1, row.size):
            m = pick(m, row[r])
        return m

    @njit
    def block(xf, out, outer, n, inner):
        for o in range(outer):
            base = o * n * inner
            if inner == 1:  # the last axis reduced: one run of memory
                out[o] = run(xf[base:base + n])
                continue
            row = out[o * inner:(o + 1) * inner]
            for i in range(inner):  # not `row[:] = ...`: numba compiles a shape-mismatch message for that
                row[i] = xf[base + i]
            for r in range(1, n):
                entries = xf[base + r * inner:base + (r + 1) * inner]
                for i in range(inner):
                    row[i] = pick(row[i], entries[i])
    return block


_max_block = _extremum_block_for(True)
_min_block = _extremum_block_for(False)


# The block loops with C arguments (pointers, xf's size, then outer, n, inner), compiled once per machine
# as C functions (runtime.native): numba would otherwise compile each loop again into every generated
# function that reduces along an axis.
def sum_block_c(xf, out, size, outer, n, inner):
    _sum_block(carray(xf, size), carray(out, outer * inner), outer, n, inner)


def max_block_c(xf, out, size, outer, n, inner):
    _max_block(carray(xf, size), carray(out, outer * inner), outer, n, inner)


def min_block_c(xf, out, size, outer, n, inner):
    _min_block(carray(xf, size), carray(out, outer * inner), outer, n, inner)


def _block_kernel(jitted, c_body):
    """`jitted(xf, out, outer, n, inner)` for compiled callers: through `c_body`'s C function where xf and
    out are C-contiguous float64 or float32 arrays of one dtype, else the jitted loop itself."""
    c_functions = native.declare(c_body, (native.DATA, native.DATA) + (native.COUNT,) * 4)

    def kernel(xf, out, outer, n, inner):
        jitted(xf, out, outer, n, inner)

    @overload(kernel)
    def _ol_kernel(xf, out, outer, n, inner):
        c_function = native.chosen(c_functions, xf.dtype, xf, out)
        if c_function is None:
            return lambda xf, out, outer, n, inner: jitted(xf, out, outer, n, inner)
        return lambda xf, out, outer, n, inner: c_function(xf.ctypes, out.ctypes, xf.size, outer, n, inner)
    return kernel


sum_block = _block_kernel(_sum_block, sum_block_c)
max_block = _block_kernel(_max_block, max_block_c)
min_block = _block_kernel(_min_block, min_block_c)


@njit
def _extremum_share(gf, x, of, red):
    """gf (flat, one entry per group) shared equally by the entries of each group of x equal to its
    value in `of`; flat like x."""
    outer, n, inner = _block(_shape_arr(x), red)
    if n < 0:
        grp, groups = _groups(x, red)
        return _ext_adjoint(gf, _flat(x), of, grp, groups)
    return _shared_into(np.zeros(x.size, gf.dtype), gf, x, of, outer, n, inner)


@njit
def _n_kept(x, red):
    n = 1
    for i in range(x.ndim):
        if not red[i]:
            n *= x.shape[i]
    return n


@njit
def _groups(x, red):
    """For each entry of x (C order), the flat index of the reduction result it belongs to; and their number."""
    shape = _shape_arr(x)
    nd = shape.size
    sstr = np.zeros(nd, np.int64)
    s = 1
    for i in range(nd - 1, -1, -1):
        if not red[i]:
            sstr[i] = s
            s *= shape[i]
    grp = np.empty(x.size, np.int64)
    idx = np.zeros(nd, np.int64)
    off = 0
    for k in range(x.size):
        grp[k] = off
        d = nd - 1
        while d >= 0:
            idx[d] += 1
            off += sstr[d]
            if idx[d] < shape[d]:
                break
            off -= sstr[d] * shape[d]
            idx[d] = 0
            d -= 1
    return grp, s


def _flat_of(v, dt):
    """numba only: v as a flat array of dtype dt (a scalar gives one entry)."""
    raise NotImplementedError


@overload(_flat_of)
def _ol_flat_of(v, dt):
    if _is_scalar_type(v):
        return lambda v, dt: np.full(1, v, dt)
    return lambda v, dt: np.ascontiguousarray(v).reshape(v.size).astype(dt)


@njit
def _flat(x):
    return np.ascontiguousarray(x).reshape(x.size)


@njit
def _ext_mask(xf, of, grp, n):
    """1/k on the k entries of each group equal to its value in `of`, 0 elsewhere; of's dtype."""
    count = np.zeros(n, of.dtype)
    m = np.zeros(xf.size, of.dtype)
    for k in range(xf.size):
        if xf[k] == of[grp[k]]:
            count[grp[k]] += 1.0
            m[k] = 1.0
    for k in range(xf.size):
        if m[k] > 0.0:
            m[k] /= count[grp[k]]
    return m


@njit
def _lone_zero(xf, grp, n, dt):
    count = np.zeros(n, np.int64)
    for k in range(xf.size):
        if xf[k] == 0:
            count[grp[k]] += 1
    m = np.zeros(xf.size, dt)
    for k in range(xf.size):
        if xf[k] == 0 and count[grp[k]] == 1:
            m[k] = 1.0
    return m


@njit
def _moments(xf, grp, n, ddof, root, dt):
    """Per group: the centred entries (flat, like xf) and the variance (or, root, the standard deviation),
    computed in the float dtype `dt`, as NumPy computes np.var in x's precision. The counts are integers:
    a float32 count stops at 2**24."""
    mean = np.zeros(n, dt)
    count = np.zeros(n, np.int64)
    for k in range(xf.size):
        mean[grp[k]] += xf[k]
        count[grp[k]] += 1
    for j in range(n):
        mean[j] /= count[j]
    c = np.empty(xf.size, dt)
    ss = np.zeros(n, dt)
    for k in range(xf.size):
        c[k] = xf[k] - mean[grp[k]]
        ss[grp[k]] += c[k] * c[k]
    for j in range(n):
        ss[j] /= count[j] - ddof
        if root:
            ss[j] = np.sqrt(ss[j])
    return c, ss


@njit
def _moments_block(xf, outer, n, inner, ddof, root, dt):
    """`_moments` over the consecutive axes of (outer, n, inner): the groups are (o, i), each summed in
    the order `_moments` sums it."""
    groups = outer * inner
    mean = np.zeros(groups, dt)
    for o in range(outer):
        for r in range(n):
            at = (o * n + r) * inner
            for i in range(inner):
                mean[o * inner + i] += xf[at + i]
    for j in range(groups):
        mean[j] /= n
    c = np.empty(xf.size, dt)
    ss = np.zeros(groups, dt)
    for o in range(outer):
        for r in range(n):
            at = (o * n + r) * inner
            for i in range(inner):
                j = o * inner + i
                c[at + i] = xf[at + i] - mean[j]
                ss[j] += c[at + i] * c[at + i]
    for j in range(groups):
        ss[j] /= n - ddof
        if root:
            ss[j] = np.sqrt(ss[j])
    return c, ss


def _reduce_impl(op, x, axis, keepdims, name):
    """The numba implementation of reduction `op` for these argument types."""
    if _is_scalar_type(x):
        return lambda x, axis=None, keepdims=False: x
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"{name}: unsupported type {x}")
    keep = _literal_bool(keepdims, f"{name}: keepdims")
    N = x.ndim
    M = N if keep else N - _n_reduced(axis, N)
    dt = _reduce_dtype(x.dtype, op)
    init = 1 if op == PROD else 0
    block = _block_axes(N, axis)
    if block is not None and op != PROD:
        return _block_reduce_impl(op, block, keep, M, dt)

    if M == 0:
        def scalar(x, axis=None, keepdims=False):
            red = _red_flags(N, axis)
            return _reduce(x, red, op, keep, np.full(_n_kept(x, red), init, dt))[0][0]
        return scalar

    def impl(x, axis=None, keepdims=False):
        red = _red_flags(N, axis)
        out, oshape = _reduce(x, red, op, keep, np.full(_n_kept(x, red), init, dt))
        return out.reshape(to_fixed_tuple(oshape, M))
    return impl


def _block_reduce_impl(op, block, keep, M, dt):
    """The sum, max or min over the consecutive axes `block` = (first, last): one block loop, shared by
    every rank and axis of one dtype."""
    first, last = block
    kernel = {SUM: sum_block, MAX: max_block, MIN: min_block}[op]
    extremum = op != SUM

    @njit
    def reduced(x):
        outer, n, inner = _block_sizes(x.shape, first, last)
        if extremum and x.size == 0:
            raise ValueError("zero-size array to reduction operation which has no identity")
        out = np.zeros(outer * inner, dt)
        kernel(_flat(x), out, outer, n, inner)
        return out

    if M == 0:
        return lambda x, axis=None, keepdims=False: reduced(x)[0]
    return lambda x, axis=None, keepdims=False: \
        reduced(x).reshape(to_fixed_tuple(_kept_dims(x.shape, first, last, keep), M))


# ---------------------------------------------------------------------------
# sums and means
# ---------------------------------------------------------------------------

def sum_reduce(x, axis=None, keepdims=False):
    """np.sum(x, axis, keepdims=...) with axis None/int/tuple; a scalar is its own sum."""
    if not isinstance(x, np.ndarray):
        return x
    return np.sum(x, axis=axis, keepdims=keepdims)


@overload(sum_reduce, prefer_literal=True)
def _ol_sum_reduce(x, axis=None, keepdims=False):
    if isinstance(x, types.Array) and x.ndim > 0 and not _literal_bool(keepdims, "sum_reduce: keepdims"):
        if _is_none_type(axis):
            return lambda x, axis=None, keepdims=False: sum_all(x)
        if isinstance(axis, types.Integer) and x.ndim == 1:
            return lambda x, axis=None, keepdims=False: np.sum(x, axis=axis)
        last = isinstance(axis, types.IntegerLiteral) and axis.literal_value in (-1, x.ndim - 1)
        if isinstance(axis, types.IntegerLiteral) and not last:
            # a constant axis (prefer_literal) compiles only the way it takes, here numba's np.sum; a
            # constant last axis takes _reduce_impl's loops alone (otherwise numba's np.sum with an axis
            # would compile beside them, for nothing, for every sum of GMM's)
            return lambda x, axis=None, keepdims=False: np.sum(x, axis=axis)
        if isinstance(axis, types.Integer) and not last:
            N, M, dt = x.ndim, x.ndim - 1, _reduce_dtype(x.dtype, SUM)

            def by_axis(x, axis=None, keepdims=False):
                if axis != -1 and axis != N - 1:
                    return np.sum(x, axis=axis)
                red = _red_flags(N, axis)  # numba's sum along the last axis adds in one chain
                out, shape = _reduce(x, red, SUM, False, np.zeros(_n_kept(x, red), dt))
                return out.reshape(to_fixed_tuple(shape, M))
            return by_axis
    return _reduce_impl(SUM, x, axis, keepdims, "sum_reduce")


def sum_expand(g, x, axis=None, keepdims=False):
    """Adjoint of sum_reduce: `g` (shaped like the sum) copied back along the reduced axes, as a float array
    shaped like `x` (a float for scalar `x`)."""
    view = sum_expand_view(g, x, axis, keepdims)
    return view.copy() if isinstance(view, np.ndarray) else view


@overload(sum_expand, prefer_literal=True)
def _ol_sum_expand(g, x, axis=None, keepdims=False):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        if _is_scalar_type(g):
            return lambda g, x, axis=None, keepdims=False: cast(g)
        return lambda g, x, axis=None, keepdims=False: cast(np.sum(g))
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"sum_expand: unsupported type {x}")
    dt = _nb_adj_dtype(x.dtype)
    if _is_scalar_type(g):
        return lambda g, x, axis=None, keepdims=False: np.full(x.shape, dt.type(g))
    if not isinstance(g, types.Array):
        raise TypingError(f"sum_expand: unsupported type {g}")
    N = x.ndim
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        def by_block(g, x, axis=None, keepdims=False):
            outer, n, inner = _block_sizes(x.shape, first, last)
            if g.size != outer * inner:
                raise ValueError("sum_expand: g does not have the reduced shape")
            out = np.empty(x.size, dt)
            _expand_block(np.ascontiguousarray(g).reshape(g.size), out, outer, n, inner)  # converts as it copies
            return out.reshape(x.shape)
        return by_block

    def impl(g, x, axis=None, keepdims=False):
        red = _red_flags(N, axis)
        shape = _shape_arr(x)
        sstr = np.zeros(N, np.int64)
        s = 1
        for i in range(N - 1, -1, -1):
            if not red[i]:
                sstr[i] = s
                s *= shape[i]
        if s != g.size:
            raise ValueError("sum_expand: g does not have the reduced shape")
        out = np.empty(x.size, dt)
        _gather(out, np.ascontiguousarray(g).reshape(g.size), shape, sstr)  # converts as it copies
        return out.reshape(x.shape)
    return impl


@njit
def _expand_block(gf, out, outer, n, inner):
    """out[(o*n + r)*inner + i] = gf[o*inner + i]: the reduced values copied back along the block's axes."""
    for o in range(outer):
        row = gf[o * inner:(o + 1) * inner]
        for r in range(n):
            at = (o * n + r) * inner
            for i in range(inner):
                out[at + i] = row[i]


def sum_expand_view(g, x, axis=None, keepdims=False):
    """`sum_expand`'s values as a read-only view shaped like `x`, stride 0 along the summed axes: for
    a value only read (codegen.views), nothing is copied. A float for scalar `x`, as sum_expand."""
    if not isinstance(x, np.ndarray):
        return scalar_adjoint(np.sum(g), x)
    g = np.reshape(np.asarray(g, dtype=adjoint_dtype(x)), _kept_shape(x, axis))
    return np.broadcast_to(g, x.shape)


@overload(sum_expand_view, prefer_literal=True)
def _ol_sum_expand_view(g, x, axis=None, keepdims=False):
    if _is_scalar_type(x) or not (isinstance(x, types.Array) and x.ndim > 0):
        return lambda g, x, axis=None, keepdims=False: sum_expand(g, x, axis, keepdims)
    dt = _nb_adj_dtype(x.dtype)
    if _is_scalar_type(g):
        return lambda g, x, axis=None, keepdims=False: np.broadcast_to(dt.type(g), x.shape)
    if not (isinstance(g, types.Array) and g.dtype == from_dtype(dt)):  # a view of g only in x's adjoint dtype
        return lambda g, x, axis=None, keepdims=False: sum_expand(g, x, axis, keepdims)
    N = x.ndim
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        def by_block(g, x, axis=None, keepdims=False):
            kept = _kept_dims(x.shape, first, last, True)
            if kept.prod() != g.size:
                raise ValueError("sum_expand: g does not have the reduced shape")
            return np.broadcast_to(np.ascontiguousarray(g).reshape(to_fixed_tuple(kept, N)), x.shape)
        return by_block

    def impl(g, x, axis=None, keepdims=False):
        red = _red_flags(N, axis)
        kept = _shape_arr(x)
        for i in range(N):
            if red[i]:
                kept[i] = 1
        if kept.prod() != g.size:
            raise ValueError("sum_expand: g does not have the reduced shape")
        return np.broadcast_to(np.ascontiguousarray(g).reshape(to_fixed_tuple(kept, N)), x.shape)
    return impl


def reduce_count(x, axis=None):
    """How many entries of `x` each result of a reduction over `axis` combines, as a float in x's adjoint
    precision (a float64 count would make a float32 mean, and its adjoint, float64 under numba)."""
    if not isinstance(x, np.ndarray):
        return scalar_adjoint(1.0, x)
    return scalar_adjoint(np.prod([x.shape[a] for a in _axes(x.ndim, axis)]), x)


@overload(reduce_count, prefer_literal=True)
def _ol_reduce_count(x, axis=None):
    cast = _nb_adj_scalar(x)
    if _is_scalar_type(x):
        return lambda x, axis=None: cast(1.0)
    N = x.ndim
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block
        return lambda x, axis=None: cast(float(_block_sizes(x.shape, first, last)[1]))

    def impl(x, axis=None):
        red = _red_flags(N, axis)
        n = 1.0
        for i in range(N):
            if red[i]:
                n *= x.shape[i]
        return cast(n)
    return impl


def mean_reduce(x, axis=None, keepdims=False):
    """np.mean(x, axis, keepdims=...) with axis None/int/tuple; a scalar is its own mean."""
    if not isinstance(x, np.ndarray):
        return x
    return np.mean(x, axis=axis, keepdims=keepdims)


@overload(mean_reduce, prefer_literal=True)
def _ol_mean_reduce(x, axis=None, keepdims=False):
    if _is_scalar_type(x):
        return lambda x, axis=None, keepdims=False: x
    return lambda x, axis=None, keepdims=False: sum_reduce(x, axis, keepdims) / reduce_count(x, axis)


def center(x, axis=None):
    """x minus its mean over `axis`. An orthogonal projection: its own adjoint."""
    return x - sum_expand(mean_reduce(x, axis), x, axis)


@overload(center, prefer_literal=True)
def _ol_center(x, axis=None):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda x, axis=None: cast(0.0)
    N, dt = x.ndim, _nb_adj_dtype(x.dtype)
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        def by_block(x, axis=None):
            outer, n, inner = _block_sizes(x.shape, first, last)
            return _moments_block(_flat(x), outer, n, inner, 0, False, dt)[0].reshape(x.shape)
        return by_block

    def impl(x, axis=None):
        grp, n = _groups(x, _red_flags(N, axis))
        return _moments(_flat(x), grp, n, 0, False, dt)[0].reshape(x.shape)
    return impl


def var_reduce(x, axis=None, ddof=0, keepdims=False):
    """np.var(x, axis, ddof=..., keepdims=...)."""
    if not isinstance(x, np.ndarray):
        return scalar_adjoint(0.0, x)
    return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)


@njit
def _moment(x, red, ddof, root, keep, dt):
    """Variance (or, root, standard deviation) of x over the `red` axes, in dtype dt: (flat result, result shape)."""
    grp, n = _groups(x, red)
    return _moments(_flat(x), grp, n, ddof, root, dt)[1], _out_shape(_shape_arr(x), red, keep)


def _moment_impl(x, axis, keepdims, root, name):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda x, axis=None, ddof=0, keepdims=False: cast(0.0)
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"{name}: unsupported type {x}")
    keep = _literal_bool(keepdims, f"{name}: keepdims")
    N, dt = x.ndim, _nb_adj_dtype(x.dtype)
    M = N if keep else N - _n_reduced(axis, N)
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        @njit
        def spread(x, ddof):
            outer, n, inner = _block_sizes(x.shape, first, last)
            return _moments_block(_flat(x), outer, n, inner, ddof, root, dt)[1]

        if M == 0:
            return lambda x, axis=None, ddof=0, keepdims=False: spread(x, ddof)[0]
        return lambda x, axis=None, ddof=0, keepdims=False: \
            spread(x, ddof).reshape(to_fixed_tuple(_kept_dims(x.shape, first, last, keep), M))
    if M == 0:
        return lambda x, axis=None, ddof=0, keepdims=False: \
            _moment(x, _red_flags(N, axis), ddof, root, keep, dt)[0][0]

    def impl(x, axis=None, ddof=0, keepdims=False):
        out, oshape = _moment(x, _red_flags(N, axis), ddof, root, keep, dt)
        return out.reshape(to_fixed_tuple(oshape, M))
    return impl


@overload(var_reduce, prefer_literal=True)
def _ol_var_reduce(x, axis=None, ddof=0, keepdims=False):
    return _moment_impl(x, axis, keepdims, False, "var_reduce")


def std_reduce(x, axis=None, ddof=0, keepdims=False):
    """np.std(x, axis, ddof=..., keepdims=...)."""
    if not isinstance(x, np.ndarray):
        return scalar_adjoint(0.0, x)
    return np.std(x, axis=axis, ddof=ddof, keepdims=keepdims)


@overload(std_reduce, prefer_literal=True)
def _ol_std_reduce(x, axis=None, ddof=0, keepdims=False):
    return _moment_impl(x, axis, keepdims, True, "std_reduce")


# ---------------------------------------------------------------------------
# products, maxima and minima
# ---------------------------------------------------------------------------

def prod_reduce(x, axis=None, keepdims=False):
    """np.prod(x, axis, keepdims=...) with axis None/int/tuple."""
    if not isinstance(x, np.ndarray):
        return x
    return np.prod(x, axis=axis, keepdims=keepdims)


@overload(prod_reduce)
def _ol_prod_reduce(x, axis=None, keepdims=False):
    return _reduce_impl(PROD, x, axis, keepdims, "prod_reduce")


def lone_zero(x, axis=None):
    """1.0 where an entry of `x` is the only zero among the entries a reduction over `axis` combines, else 0.0."""
    zero = _ones_where(x == 0, x)
    return zero * (sum_expand(sum_reduce(zero, axis), x, axis) == 1.0)


@overload(lone_zero)
def _ol_lone_zero(x, axis=None):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda x, axis=None: cast(1.0 if x == 0 else 0.0)
    N, dt = x.ndim, _nb_adj_dtype(x.dtype)

    def impl(x, axis=None):
        grp, n = _groups(x, _red_flags(N, axis))
        return _lone_zero(_flat(x), grp, n, dt).reshape(x.shape)
    return impl


def max_reduce(x, axis=None, keepdims=False):
    """np.max(x, axis, keepdims=...) with axis None/int/tuple."""
    if not isinstance(x, np.ndarray):
        return x
    return np.max(x, axis=axis, keepdims=keepdims)


@overload(max_reduce, prefer_literal=True)
def _ol_max_reduce(x, axis=None, keepdims=False):
    return _reduce_impl(MAX, x, axis, keepdims, "max_reduce")


def min_reduce(x, axis=None, keepdims=False):
    """np.min(x, axis, keepdims=...) with axis None/int/tuple."""
    if not isinstance(x, np.ndarray):
        return x
    return np.min(x, axis=axis, keepdims=keepdims)


@overload(min_reduce, prefer_literal=True)
def _ol_min_reduce(x, axis=None, keepdims=False):
    return _reduce_impl(MIN, x, axis, keepdims, "min_reduce")


def extremum_mask(x, out, axis=None, keepdims=False):
    """d max/d x (or d min/d x) for `out` = the max (min) of `x` over `axis`: 1/k on each of the k entries
    equal to the extremum (ties share the gradient equally), 0 elsewhere."""
    hit = _ones_where(x == sum_expand(out, x, axis, keepdims), x)
    return hit / sum_expand(sum_reduce(hit, axis), x, axis)


@overload(extremum_mask, prefer_literal=True)
def _ol_extremum_mask(x, out, axis=None, keepdims=False):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda x, out, axis=None, keepdims=False: cast(1.0 if x == out else 0.0)
    dt = _nb_adj_dtype(x.dtype)
    if _is_none_type(axis):  # over every entry: one group of one run, none of the machinery for groups along axes
        def over_all(x, out, axis=None, keepdims=False):
            result = np.zeros(x.size, dt)
            share_block_into(np.ones(1, dt), _flat(x), _flat_of(out, dt), result, 1, x.size, 1)
            return result.reshape(x.shape)
        return over_all
    N = x.ndim
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        def by_block(x, out, axis=None, keepdims=False):
            outer, n, inner = _block_sizes(x.shape, first, last)
            return _shared_by_block(np.ones(outer * inner, dt), x, _flat_of(out, dt), outer, n, inner)
        return by_block

    def impl(x, out, axis=None, keepdims=False):
        red = _red_flags(N, axis)
        return _extremum_share(np.ones(_n_kept(x, red), dt), x, _flat_of(out, dt), red).reshape(x.shape)
    return impl


def extremum_adjoint(g, x, out, axis=None, keepdims=False):
    """The adjoint of `out` = max (min) of `x` over `axis`: `g` (shaped like `out`) shared equally by
    the k entries of each group equal to its extremum, 0 elsewhere. One pass, where
    `sum_expand(g, x, ...) * extremum_mask(x, out, ...)` writes three arrays of x's size."""
    return sum_expand(g, x, axis, keepdims) * extremum_mask(x, out, axis, keepdims)


@overload(extremum_adjoint, prefer_literal=True)
def _ol_extremum_adjoint(g, x, out, axis=None, keepdims=False):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda g, x, out, axis=None, keepdims=False: cast(g if x == out else 0.0 * g)
    dt = _nb_adj_dtype(x.dtype)
    if _is_none_type(axis):
        def over_all(g, x, out, axis=None, keepdims=False):
            result = np.zeros(x.size, dt)
            share_block_into(_flat_of(g, dt), _flat(x), _flat_of(out, dt), result, 1, x.size, 1)
            return result.reshape(x.shape)
        return over_all
    N = x.ndim
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        def by_block(g, x, out, axis=None, keepdims=False):
            outer, n, inner = _block_sizes(x.shape, first, last)
            return _shared_by_block(_flat_of(g, dt), x, _flat_of(out, dt), outer, n, inner)
        return by_block

    def impl(g, x, out, axis=None, keepdims=False):
        return _extremum_share(_flat_of(g, dt), x, _flat_of(out, dt), _red_flags(N, axis)).reshape(x.shape)
    return impl


@njit
def _shared_by_block(gf, x, of, outer, n, inner):
    """`_extremum_share` over the consecutive axes of (outer, n, inner), shaped like x."""
    return _shared_into(np.zeros(x.shape, gf.dtype), gf, x, of, outer, n, inner)


def extremum_adjoint_into(target, g, x, out, axis=None, keepdims=False):
    """`target += unbroadcast(extremum_adjoint(g, x, out, axis, keepdims), target)`; returns target.
    What `codegen.into` makes of that line in compiled text: compiled, each group's share is added
    where it lands when target is a float64 or float32 array shaped like x, without the adjoint array
    between (the shares in target's dtype)."""
    target += unbroadcast(extremum_adjoint(g, x, out, axis, keepdims), target)
    return target


@njit
def _as_written_into(target, g, x, out, axis, keepdims):
    target += unbroadcast(extremum_adjoint(g, x, out, axis, keepdims), target)
    return target


@overload(extremum_adjoint_into, prefer_literal=True)
def _ol_extremum_adjoint_into(target, g, x, out, axis=None, keepdims=False):
    def as_written(target, g, x, out, axis=None, keepdims=False):
        return _as_written_into(target, g, x, out, axis, keepdims)

    if not (isinstance(target, types.Array) and isinstance(x, types.Array) and target.ndim == x.ndim
            and target.dtype in (types.float64, types.float32) and target.layout == "C"):
        return as_written
    dt = as_dtype(target.dtype)
    if _is_none_type(axis):
        def over_all(target, g, x, out, axis=None, keepdims=False):
            if target.shape != x.shape:
                return _as_written_into(target, g, x, out, axis, keepdims)
            share_block_into(_flat_of(g, dt), _flat(x), _flat_of(out, dt), target.reshape(target.size), 1, x.size, 1)
            return target
        return over_all
    N = x.ndim
    block = _block_axes(N, axis)
    if block is not None:
        first, last = block

        def by_block(target, g, x, out, axis=None, keepdims=False):
            if target.shape != x.shape:
                return _as_written_into(target, g, x, out, axis, keepdims)
            outer, n, inner = _block_sizes(x.shape, first, last)
            return _shared_into(target, _flat_of(g, dt), x, _flat_of(out, dt), outer, n, inner)
        return by_block

    def impl(target, g, x, out, axis=None, keepdims=False):
        red = _red_flags(N, axis)
        outer, n, inner = _block(_shape_arr(x), red)
        if target.shape != x.shape or n < 0:
            return _as_written_into(target, g, x, out, axis, keepdims)
        return _shared_into(target, _flat_of(g, dt), x, _flat_of(out, dt), outer, n, inner)
    return impl


@njit
def _shared_into(target, gf, x, of, outer, n, inner):
    """`target` (C-contiguous, x's size) plus `_extremum_share`'s shares, added where they land."""
    if gf.size != outer * inner or of.size != outer * inner:
        raise ValueError("extremum adjoint: g or out does not have the reduced shape")
    share_block_into(gf, _flat(x), of, target.reshape(target.size), outer, n, inner)
    return target


@njit
def _share_block_into(gf, xf, of, result, outer, n, inner):
    """result += gf[group] / k on the k entries of each group equal to of[group] (flat, like xf); the
    shares in result's dtype (the float64 share of a float32 g would make the loops convert)."""
    real = result.dtype.type
    zero = real(0)
    if inner == 1:  # the last axis reduced: each group is one run of memory (slices: loops from 0 vectorize)
        for o in range(outer):
            row, into, m, k = xf[o * n:(o + 1) * n], result[o * n:(o + 1) * n], of[o], 0
            for r in range(n):
                k += row[r] == m  # an integer count: LLVM does not reorder a float sum
            share = real(gf[o]) / real(k) if k > 0 else zero
            for r in range(n):
                into[r] += share if row[r] == m else zero
        return
    for o in range(outer):
        base = o * n * inner
        for i in range(inner):
            m, k = of[o * inner + i], zero
            for r in range(n):
                k += real(1) if xf[base + r * inner + i] == m else zero
            share = real(gf[o * inner + i]) / k if k > 0 else zero
            for r in range(n):
                at = base + r * inner + i
                result[at] += share if xf[at] == m else zero


def share_block_into_c(gf, xf, of, result, size, outer, n, inner):
    """`_share_block_into` with C arguments (pointers, xf's size, outer, n, inner), compiled once per
    machine as a C function (runtime.native)."""
    groups = outer * inner
    _share_block_into(carray(gf, groups), carray(xf, size), carray(of, groups), carray(result, size), outer, n, inner)


_SHARE_BLOCK_INTO_C = native.declare(share_block_into_c, (native.DATA,) * 4 + (native.COUNT,) * 4)


def share_block_into(gf, xf, of, result, outer, n, inner):
    _share_block_into(gf, xf, of, result, outer, n, inner)


@overload(share_block_into)
def _ol_share_block_into(gf, xf, of, result, outer, n, inner):
    c_function = native.chosen(_SHARE_BLOCK_INTO_C, xf.dtype, gf, xf, of, result)
    if c_function is None:
        return lambda gf, xf, of, result, outer, n, inner: _share_block_into(gf, xf, of, result, outer, n, inner)
    return lambda gf, xf, of, result, outer, n, inner: c_function(gf.ctypes, xf.ctypes, of.ctypes, result.ctypes,
                                                                  xf.size, outer, n, inner)


@njit
def _ext_adjoint(gf, xf, of, grp, n):
    """gf[group] / k on the k entries of each group equal to its value in `of`, 0 elsewhere; gf's dtype."""
    count = np.zeros(n, gf.dtype)
    for k in range(xf.size):
        if xf[k] == of[grp[k]]:
            count[grp[k]] += 1.0
    result = np.zeros(xf.size, gf.dtype)
    for k in range(xf.size):
        if xf[k] == of[grp[k]]:
            result[k] = gf[grp[k]] / count[grp[k]]
    return result


# ---------------------------------------------------------------------------
# cumulative sums and products: along `axis`, or along the flattened array when axis is None
# ---------------------------------------------------------------------------

@njit
def _split(shape, axis):
    """(outer, n, inner) sizes viewing a C-ordered array as (before axis, along axis, after axis)."""
    outer, inner = 1, 1
    for i in range(axis):
        outer *= shape[i]
    for i in range(axis + 1, shape.size):
        inner *= shape[i]
    return outer, shape[axis], inner


@njit
def _cumulate(a3, op, reverse):
    """In place, along the middle axis of a 3-D array: running sums (op SUM) or products (op PROD)."""
    n = a3.shape[1]
    for j in range(1, n):
        k, prev = (n - 1 - j, n - j) if reverse else (j, j - 1)
        if op == SUM:
            a3[:, k, :] += a3[:, prev, :]
        else:
            a3[:, k, :] *= a3[:, prev, :]


@njit
def _cum_along(out, shape, axis, op, reverse):
    """Cumulate `out` (C-contiguous, `shape`) in place along `axis`."""
    a = axis + shape.size if axis < 0 else axis
    if a < 0 or a >= shape.size:
        raise ValueError("axis out of range")
    _cumulate(out.reshape(_split(shape, a)), op, reverse)
    return out


def _cum_impl(op, x, axis, name):
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"{name}: unsupported type {x}")
    dt = _reduce_dtype(x.dtype, op)
    if _is_none_type(axis):
        def flat(x, axis=None):
            out = np.ascontiguousarray(x).reshape(x.size).astype(dt)
            return _cum_along(out, _shape_arr(out), 0, op, False)
        return flat
    if not isinstance(axis, types.Integer):
        raise TypingError(f"{name}: axis must be None or an int, not {axis}")
    return lambda x, axis=None: _cum_along(np.ascontiguousarray(x).astype(dt), _shape_arr(x), axis, op, False)


def cumsum_axis(x, axis=None):
    """np.cumsum(x, axis)."""
    return np.cumsum(x, axis=axis)


@overload(cumsum_axis)
def _ol_cumsum_axis(x, axis=None):
    return _cum_impl(SUM, x, axis, "cumsum_axis")


def cumsum_adjoint(g, x, axis=None):
    """Adjoint of cumsum_axis: reverse cumulative sums of `g`, shaped like `x`."""
    flip = (lambda a: a[::-1]) if axis is None else (lambda a: np.flip(a, axis))
    return flip(np.cumsum(flip(np.asarray(g, dtype=adjoint_dtype(x))), axis=axis)).reshape(x.shape)


@overload(cumsum_adjoint)
def _ol_cumsum_adjoint(g, x, axis=None):
    if not isinstance(g, types.Array) or g.ndim == 0:
        raise TypingError(f"cumsum_adjoint: unsupported type {g}")
    dt = _nb_adj_dtype(x.dtype)
    if _is_none_type(axis):
        def flat(g, x, axis=None):
            out = np.ascontiguousarray(g).reshape(g.size).astype(dt)
            return _cum_along(out, _shape_arr(out), 0, SUM, True).reshape(x.shape)
        return flat

    def along(g, x, axis=None):
        return _cum_along(np.ascontiguousarray(g).astype(dt), _shape_arr(g), axis, SUM, True).reshape(x.shape)
    return along


def cumprod_axis(x, axis=None):
    """np.cumprod(x, axis)."""
    return np.cumprod(x, axis=axis)


@overload(cumprod_axis)
def _ol_cumprod_axis(x, axis=None):
    return _cum_impl(PROD, x, axis, "cumprod_axis")


def first_zero(x, axis=None):
    """1.0 at the first zero along `axis` (C order for None), else 0.0; x's shape."""
    zero = x == 0
    return _ones_where(zero & (cumsum_axis(zero, axis).reshape(x.shape) == 1), x)


@njit
def _first_zero(x3, dt):
    m = np.zeros(x3.shape, dt)
    for o in range(x3.shape[0]):
        for i in range(x3.shape[2]):
            for j in range(x3.shape[1]):
                if x3[o, j, i] == 0:
                    m[o, j, i] = 1.0
                    break
    return m


@overload(first_zero)
def _ol_first_zero(x, axis=None):
    dt = _nb_adj_dtype(x.dtype)
    if _is_none_type(axis):
        return lambda x, axis=None: _first_zero(_flat(x).reshape((1, x.size, 1)), dt).reshape(x.shape)
    N = x.ndim

    def impl(x, axis=None):
        a = axis + N if axis < 0 else axis
        if a < 0 or a >= N:
            raise ValueError("axis out of range")
        return _first_zero(np.ascontiguousarray(x).reshape(_split(_shape_arr(x), a)), dt).reshape(x.shape)
    return impl


# ---------------------------------------------------------------------------
# differences and traces
# ---------------------------------------------------------------------------

def diff_axis(x, n=1, axis=-1):
    """np.diff(x, n, axis)."""
    return np.diff(x, n=n, axis=axis)


@njit
def _diff_once(a3, transpose):
    """np.diff along the middle axis of a 3-D array, or (transpose) the adjoint of one."""
    outer, m, inner = a3.shape
    out = np.zeros((outer, m + 1 if transpose else m - 1, inner), a3.dtype)
    if transpose:
        out[:, :m, :] -= a3
        out[:, 1:, :] += a3
    else:
        out[:, :, :] = a3[:, 1:, :] - a3[:, :-1, :]
    return out


@njit
def _diff_apply(x, n, axis, transpose):
    """np.diff (or, transpose, its adjoint) n times along `axis` of C-contiguous x: (3-D result, result shape)."""
    if n < 0:
        raise ValueError("order must be non-negative")
    shape = _shape_arr(x)
    a = axis + shape.size if axis < 0 else axis
    if a < 0 or a >= shape.size:
        raise ValueError("axis out of range")
    a3 = x.reshape(_split(shape, a))
    for _ in range(n):
        a3 = _diff_once(a3, transpose)
    shape[a] = a3.shape[1]
    return a3, shape


@overload(diff_axis)
def _ol_diff_axis(x, n=1, axis=-1):
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"diff_axis: unsupported type {x}")
    N, dt = x.ndim, _reduce_dtype(x.dtype, SUM)

    def impl(x, n=1, axis=-1):
        a3, shape = _diff_apply(np.ascontiguousarray(x).astype(dt), n, axis, False)
        return a3.reshape(to_fixed_tuple(shape, N))
    return impl


def diff_adjoint(g, x, n=1, axis=-1):
    """Adjoint of diff_axis(x, n, axis): the transposed difference applied n times to `g`; x's shape."""
    g = np.moveaxis(np.asarray(g, dtype=adjoint_dtype(x)), axis, -1)
    for _ in range(n):
        r = np.zeros(g.shape[:-1] + (g.shape[-1] + 1,), g.dtype)
        r[..., :-1] -= g
        r[..., 1:] += g
        g = r
    return np.moveaxis(g, -1, axis).reshape(x.shape)


@overload(diff_adjoint)
def _ol_diff_adjoint(g, x, n=1, axis=-1):
    if not isinstance(g, types.Array) or g.ndim == 0:
        raise TypingError(f"diff_adjoint: unsupported type {g}")
    dt = _nb_adj_dtype(x.dtype)

    def impl(g, x, n=1, axis=-1):
        a3, shape = _diff_apply(np.ascontiguousarray(g).astype(dt), n, axis, True)
        return a3.reshape(x.shape)
    return impl


def trace_adjoint(g, x, offset=0):
    """Adjoint of np.trace(x, offset) for 2-D x: `g` on that diagonal, zeros elsewhere."""
    out = np.eye(x.shape[0], x.shape[1], offset, adjoint_dtype(x))
    out *= g  # in place: x's dtype, whatever g's
    return out


@overload(trace_adjoint)
def _ol_trace_adjoint(g, x, offset=0):
    dt = _nb_adj_dtype(x.dtype)

    def impl(g, x, offset=0):
        out = np.eye(x.shape[0], x.shape[1], offset, dt)
        out *= g
        return out
    return impl


# ---------------------------------------------------------------------------
# np.linalg.norm: vector norms (ord None, 2, 1, inf; axis None or int) and the Frobenius norm
# ---------------------------------------------------------------------------

EUCLID, TAXICAB, MAXABS = 2, 1, -1


def _norm_kind(x, ord, axis):
    """Which norm np.linalg.norm(x, ord, axis) computes: EUCLID (2-norm of the entries), TAXICAB or MAXABS."""
    ndim = np.ndim(x)
    vector = isinstance(axis, int) or (axis is None and ndim == 1)
    matrix = (axis is None and ndim == 2) or (isinstance(axis, tuple) and len(axis) == 2)
    if ord is None or (ord == "fro" and matrix) or (vector and not isinstance(ord, str) and ord == 2):
        return EUCLID
    if vector and not isinstance(ord, str) and ord == 1:
        return TAXICAB
    if vector and not isinstance(ord, str) and ord == np.inf:
        return MAXABS
    raise NotImplementedError(f"s2sad differentiates np.linalg.norm with ord None, 2, 1 or inf for vectors "
                              f"and ord None or 'fro' for matrices, not ord={ord!r} here")


@overload(_norm_kind)
def _ol_norm_kind(x, ord, axis):
    ndim = x.ndim if isinstance(x, types.Array) else 0
    vector = isinstance(axis, types.Integer) or (_is_none_type(axis) and ndim == 1)
    matrix = (_is_none_type(axis) and ndim == 2) or (isinstance(axis, types.BaseTuple) and len(axis) == 2)
    if _is_none_type(ord):
        return lambda x, ord, axis: EUCLID
    if isinstance(ord, (types.UnicodeType, types.StringLiteral)):
        def by_name(x, ord, axis):
            if ord == "fro" and matrix:
                return EUCLID
            raise NotImplementedError("s2sad differentiates np.linalg.norm(x, 'fro') for matrices only")
        return by_name
    if isinstance(ord, types.Number):
        def by_number(x, ord, axis):
            if vector and ord == 2:
                return EUCLID
            if vector and ord == 1:
                return TAXICAB
            if vector and ord == np.inf:
                return MAXABS
            raise NotImplementedError("s2sad differentiates np.linalg.norm with ord None, 2, 1 or inf for "
                                      "vectors and ord None or 'fro' for matrices")
        return by_number
    raise TypingError(f"np.linalg.norm: unsupported ord type {ord}")


def norm_op(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm(x, ord, axis, keepdims) for the norms s2sad differentiates."""
    _norm_kind(x, ord, axis)
    return np.linalg.norm(x, ord, axis, keepdims)


@njit
def _norm_terms(xf, kind, dt):
    """x*x (2-norm) or |x| (1-norm, max-norm), flat, of dtype dt."""
    out = np.empty(xf.size, dt)
    for k in range(xf.size):
        out[k] = xf[k] * xf[k] if kind == EUCLID else abs(xf[k])
    return out


@njit
def _norm(x, kind, red, keep, dt):
    """The norm of x over the `red` axes, computed in dtype dt (x's precision, as NumPy's): (flat result, shape)."""
    terms = _norm_terms(_flat(x), kind, dt).reshape(x.shape)
    out, oshape = _reduce(terms, red, MAX if kind == MAXABS else SUM, keep, np.zeros(_n_kept(x, red), dt))
    if kind == EUCLID:
        for j in range(out.size):
            out[j] = np.sqrt(out[j])
    return out, oshape


@overload(norm_op)
def _ol_norm_op(x, ord=None, axis=None, keepdims=False):
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"np.linalg.norm: unsupported type {x}")
    keep = _literal_bool(keepdims, "np.linalg.norm: keepdims")
    N, dt = x.ndim, _nb_adj_dtype(x.dtype)
    M = N if keep else N - _n_reduced(axis, N)
    if M == 0:
        return lambda x, ord=None, axis=None, keepdims=False: \
            _norm(x, _norm_kind(x, ord, axis), _red_flags(N, axis), keep, dt)[0][0]

    def impl(x, ord=None, axis=None, keepdims=False):
        out, oshape = _norm(x, _norm_kind(x, ord, axis), _red_flags(N, axis), keep, dt)
        return out.reshape(to_fixed_tuple(oshape, M))
    return impl


def norm_grad(x, norm, ord=None, axis=None, keepdims=False):
    """d norm / d x, shaped like x, given `norm` = norm_op(x, ord, axis, keepdims). For ord=inf, ties
    share the gradient equally (see extremum_mask). At a zero vector the 2-norm's gradient is the
    subgradient 0 (distances of a particle to itself, masked out afterwards, add nothing)."""
    kind = _norm_kind(x, ord, axis)
    if kind == EUCLID:
        return x / sum_expand(norm + (norm == 0.0), x, axis, keepdims)
    if kind == TAXICAB:
        return np.sign(x) * 1.0
    return np.sign(x) * extremum_mask(np.abs(x), norm, axis, keepdims)


@njit
def _norm_grad(xf, nf, grp, n, kind):
    out = np.empty(xf.size, nf.dtype)
    if kind == MAXABS:
        mask = _ext_mask(np.abs(xf), nf, grp, n)
    for k in range(xf.size):
        if kind == EUCLID:
            out[k] = xf[k] / nf[grp[k]] if nf[grp[k]] != 0.0 else 0.0
        elif kind == TAXICAB:
            out[k] = np.sign(xf[k])
        else:
            out[k] = np.sign(xf[k]) * mask[k]
    return out


@overload(norm_grad)
def _ol_norm_grad(x, norm, ord=None, axis=None, keepdims=False):
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"norm_grad: unsupported type {x}")
    N, dt = x.ndim, _nb_adj_dtype(x.dtype)

    def impl(x, norm, ord=None, axis=None, keepdims=False):
        kind = _norm_kind(x, ord, axis)
        grp, n = _groups(x, _red_flags(N, axis))
        return _norm_grad(_flat(x), _flat_of(norm, dt), grp, n, kind).reshape(x.shape)
    return impl


def norm_smooth(x, ord=None, axis=None):
    """1.0 for the norms with a nonzero second derivative (the 2-norm and Frobenius norm), else 0.0; in x's
    adjoint precision, as the factor of an adjoint."""
    return scalar_adjoint(1.0 if _norm_kind(x, ord, axis) == EUCLID else 0.0, x)


@overload(norm_smooth)
def _ol_norm_smooth(x, ord=None, axis=None):
    cast = _nb_adj_scalar(x)
    return lambda x, ord=None, axis=None: cast(1.0 if _norm_kind(x, ord, axis) == EUCLID else 0.0)

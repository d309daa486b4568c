"""Runtime helpers for the shape rules: NumPy shape functions in forms numba lacks, and their transposes.

Each helper is a plain Python function (what generated code calls when it runs uncompiled) with a
``numba.extending.overload`` that picks an implementation from the argument types. Shapes, axes,
shifts and repetition counts are ints or tuples of ints. Array helpers accept any memory layout.
"""

import numpy as np
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import overload
from numba.np.numpy_support import as_dtype
from numba.np.unsafe.ndarray import to_fixed_tuple

from s2sad.runtime.core import (_is_none_type, _is_scalar_type, _nb_adj_dtype, _nb_adj_of, _nb_adj_scalar,
                                _np_adj_dtype, adjoint_dtype, scalar_adjoint)

__all__ = [
    "same_shape",
    "reshape_any",
    "reshape_like",
    "untranspose",
    "squeeze_any",
    "expand_dims_any",
    "flip_any",
    "roll_any",
    "tile_any",
    "tile_adjoint",
    "repeat_any",
    "repeat_adjoint",
    "pad_any",
    "unpad",
    "concatenate2",
    "concat_part",
    "concat_embed",
    "atleast_1d",
    "atleast_2d",
    "np_size",
    "atleast_3d",
    "as_float",
    "as_float32",
    "number_like",
    "if_inexact",
    "only_item",
    "item_adjoint",
    "diag_adjoint",
    "diagonal_2d",
    "linspace_any",
    "unit_like",
    "set_column",
    "square_block",
]


# ---------------------------------------------------------------------------
# shared utilities
# ---------------------------------------------------------------------------

def _is_int_tuple(t):
    return isinstance(t, types.UniTuple) and isinstance(t.dtype, types.Integer)


def _require_array(name, x):
    if not isinstance(x, types.Array):
        raise TypingError(f"{name}: an array is required, got {x}")


def _in_dtype(a, dtype):
    """Array `a` in `dtype`: `a` itself when it has it already, else a converted copy (Python and numba;
    under numba the copy is C-contiguous, so it reshapes)."""
    return a if a.dtype == dtype else a.astype(dtype)


@overload(_in_dtype)
def _ol_in_dtype(a, dtype):
    _require_array("_in_dtype", a)
    target = dtype.dtype if isinstance(dtype, (types.DType, types.NumberClass)) else None
    if target is None:
        raise TypingError(f"_in_dtype: a dtype is required, got {dtype}")
    if a.dtype == target:
        return lambda a, dtype: a
    return lambda a, dtype: np.ascontiguousarray(a.astype(dtype))


@njit
def _axis(axis, ndim):
    """A possibly negative axis as an index in range(ndim)."""
    a = axis + ndim if axis < 0 else axis
    if a < 0 or a >= ndim:
        raise ValueError("axis out of range")
    return a


@njit
def _shape_array(shape):
    out = np.empty(len(shape), np.int64)
    for i in range(len(shape)):
        out[i] = shape[i]
    return out


@njit
def _flat(x):
    """The elements of array `x` in C order, as a 1-d array."""
    return np.ascontiguousarray(x).reshape(x.size)


@njit
def _block_offsets(big, small, start):
    """Flat C-order offset in an array of shape `big` of each element of a `small` block placed at `start`."""
    d = big.size
    stride = np.empty(d, np.int64)
    s = 1
    off = 0
    for i in range(d - 1, -1, -1):
        stride[i] = s
        off += start[i] * s
        s *= big[i]
    n = 1
    for i in range(d):
        n *= small[i]
    offsets = np.empty(n, np.int64)
    idx = np.zeros(d, np.int64)
    for k in range(n):
        offsets[k] = off
        i = d - 1
        while i >= 0:
            idx[i] += 1
            off += stride[i]
            if idx[i] < small[i]:
                break
            off -= stride[i] * small[i]
            idx[i] = 0
            i -= 1
    return offsets


def _ints(v):
    """An int or a tuple of ints as an int64 array (Python and numba)."""
    return np.atleast_1d(np.asarray(v, dtype=np.int64))


@overload(_ints)
def _ol_ints(v):
    if isinstance(v, types.Integer):
        return lambda v: np.full(1, v, np.int64)
    if _is_int_tuple(v) or (isinstance(v, types.BaseTuple) and len(v) == 0):
        return lambda v: _shape_array(v)
    raise TypingError(f"expected an int or a tuple of ints, got {v}")


# ---------------------------------------------------------------------------
# reshapes: reshape_any, reshape_like, squeeze_any, expand_dims_any, atleast_1d, atleast_2d
# ---------------------------------------------------------------------------

def same_shape(shape, other):
    """`x.shape == (n, 1)`: tuples of different lengths differ (numba: decided when it compiles)."""
    return tuple(shape) == tuple(other)


@overload(same_shape)
def _ol_same_shape(shape, other):
    if len(shape) != len(other):
        return lambda shape, other: False
    return lambda shape, other: shape == other


def reshape_any(x, shape):
    """np.reshape(x, shape) for scalars and arrays of any layout (numba reshapes only contiguous arrays)."""
    return np.reshape(x, shape)


@overload(reshape_any)
def _ol_reshape_any(x, shape):
    if _is_scalar_type(x):
        return lambda x, shape: np.full(1, x).reshape(shape)
    _require_array("reshape", x)
    return lambda x, shape: np.ascontiguousarray(x).reshape(shape)


def reshape_like(t, like):
    """`t` reshaped to the shape of `like`, as `like`'s adjoint: in its precision, a scalar when `like` is
    one (the transpose of any reshape)."""
    if isinstance(like, np.ndarray):
        return _in_dtype(np.reshape(t, like.shape), _np_adj_dtype(like.dtype))
    return scalar_adjoint(np.reshape(t, ()), like)


@overload(reshape_like)
def _ol_reshape_like(t, like):
    if _is_scalar_type(like):
        cast = _nb_adj_scalar(like)
        if _is_scalar_type(t):
            return lambda t, like: cast(t)

        def to_scalar(t, like):
            if t.size != 1:
                raise ValueError("reshape_like: cannot reshape an array of size > 1 to a scalar")
            return cast(_flat(t)[0])
        return to_scalar
    _require_array("reshape_like", like)
    dt = _nb_adj_dtype(like.dtype)
    if _is_scalar_type(t):
        def from_scalar(t, like):
            if like.size != 1:
                raise ValueError("reshape_like: cannot reshape a scalar to an array of size > 1")
            return np.full(like.shape, t, dt)
        return from_scalar
    return lambda t, like: np.ascontiguousarray(_in_dtype(t, dt)).reshape(like.shape)


def squeeze_any(x, axis=None):
    """np.squeeze(x, axis). Under numba `axis` must be given: the result's rank must be known when compiling."""
    return np.squeeze(x, axis)


@overload(squeeze_any)
def _ol_squeeze_any(x, axis=None):
    _require_array("squeeze", x)
    if _is_none_type(axis):
        raise TypingError("np.squeeze without `axis` of an array whose shape s2sad cannot tell when it generates "
                          "the code: give `axis` (numba compiles for one result rank)")
    if not (isinstance(axis, types.Integer) or _is_int_tuple(axis)):
        raise TypingError(f"np.squeeze: axis must be an int or a tuple of ints, got {axis}")
    N = x.ndim
    M = N - (1 if isinstance(axis, types.Integer) else len(axis))

    def impl(x, axis=None):
        drop = np.zeros(N, np.bool_)
        for ax in _ints(axis):
            a = _axis(ax, N)
            if x.shape[a] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
            drop[a] = True
        shape = np.empty(M, np.int64)
        j = 0
        for i in range(N):
            if not drop[i]:
                shape[j] = x.shape[i]
                j += 1
        return np.ascontiguousarray(x).reshape(to_fixed_tuple(shape, M))
    return impl


def expand_dims_any(x, axis):
    """np.expand_dims(x, axis), also for scalars (a scalar becomes an array of shape (1,))."""
    return np.expand_dims(x, axis)


@overload(expand_dims_any)
def _ol_expand_dims_any(x, axis):
    if not (isinstance(axis, types.Integer) or _is_int_tuple(axis)):
        raise TypingError(f"np.expand_dims: axis must be an int or a tuple of ints, got {axis}")
    if _is_scalar_type(x):
        return lambda x, axis: expand_dims_any(np.full((), x), axis)
    _require_array("np.expand_dims", x)
    if isinstance(axis, types.Integer) and x.ndim > 0:
        return lambda x, axis: np.expand_dims(x, axis)
    N = x.ndim
    M = N + (1 if isinstance(axis, types.Integer) else len(axis))

    def impl(x, axis):
        new = np.zeros(M, np.bool_)
        for ax in _ints(axis):
            a = _axis(ax, M)
            if new[a]:
                raise ValueError("repeated axis")
            new[a] = True
        shape = np.ones(M, np.int64)
        j = 0
        for i in range(M):
            if not new[i]:
                shape[i] = x.shape[j]
                j += 1
        return np.ascontiguousarray(x).reshape(to_fixed_tuple(shape, M))
    return impl


def atleast_1d(x):
    """np.atleast_1d(x) of one operand: scalars become arrays of shape (1,)."""
    return np.atleast_1d(x)


@overload(atleast_1d)
def _ol_atleast_1d(x):
    if _is_scalar_type(x):
        return lambda x: np.full(1, x)
    _require_array("np.atleast_1d", x)
    if x.ndim == 0:
        return lambda x: np.ascontiguousarray(x).reshape(1)
    return lambda x: x


def np_size(x, axis=None):
    """np.size(x) or np.size(x, axis) (`T = np.size(data, 0)`); numba has neither the axis nor a number's size."""
    return np.size(x, axis)


@overload(np_size)
def _ol_np_size(x, axis=None):
    if _is_scalar_type(x):
        return lambda x, axis=None: 1
    _require_array("np.size", x)
    if _is_none_type(axis):
        return lambda x, axis=None: x.size
    return lambda x, axis=None: x.shape[axis]


def atleast_2d(x):
    """np.atleast_2d(x) of one operand: scalars become (1, 1), vectors rows of shape (1, n)."""
    return np.atleast_2d(x)


@overload(atleast_2d)
def _ol_atleast_2d(x):
    if _is_scalar_type(x):
        return lambda x: np.full((1, 1), x)
    _require_array("np.atleast_2d", x)
    if x.ndim == 0:
        return lambda x: np.ascontiguousarray(x).reshape((1, 1))
    if x.ndim == 1:
        return lambda x: np.expand_dims(x, 0)
    return lambda x: x


def atleast_3d(x):
    """np.atleast_3d(x): scalars become (1, 1, 1), vectors (1, n, 1), matrices (m, n, 1)."""
    return np.atleast_3d(x)


@overload(atleast_3d)
def _ol_atleast_3d(x):
    if _is_scalar_type(x):
        return lambda x: np.full((1, 1, 1), x)
    _require_array("np.atleast_3d", x)
    if x.ndim == 0:
        return lambda x: np.ascontiguousarray(x).reshape((1, 1, 1))
    if x.ndim == 1:
        return lambda x: np.ascontiguousarray(x).reshape((1, x.shape[0], 1))
    if x.ndim == 2:
        return lambda x: np.ascontiguousarray(x).reshape((x.shape[0], x.shape[1], 1))
    return lambda x: x


# ---------------------------------------------------------------------------
# diagonals and evenly spaced values
# ---------------------------------------------------------------------------

def diag_adjoint(t, like, k=0):
    """The transpose of np.diag(like, k), in `like`'s precision: for a matrix `like`, zeros of its shape with
    `t` on diagonal k; for a vector `like`, diagonal k of the matrix `t`."""
    dt = adjoint_dtype(like)
    if np.ndim(like) == 1:
        return np.diag(t, k).astype(dt)
    out = np.zeros(np.shape(like), dt)
    _put_diagonal(out, t, k)
    return out


def _put_diagonal(out, t, k):
    row, col = max(-k, 0), max(k, 0)
    for i in range(t.shape[0]):
        out[row + i, col + i] = t[i]


_put_diagonal_compiled = njit(_put_diagonal)


@overload(diag_adjoint)
def _ol_diag_adjoint(t, like, k=0):
    _require_array("diag_adjoint", like)
    dt = _nb_adj_dtype(like.dtype)
    if like.ndim == 1:
        return lambda t, like, k=0: _in_dtype(np.diag(t, k), dt)

    def embed(t, like, k=0):
        out = np.zeros(like.shape, dt)
        _put_diagonal_compiled(out, t, k)
        return out
    return embed


def diagonal_2d(x, offset=0):
    """np.diagonal(x, offset) of a matrix (numba lacks np.diagonal; np.diag of a matrix is the same)."""
    if np.ndim(x) != 2:
        raise ValueError(f"np.diagonal is supported for 2-D arrays, got {np.ndim(x)}-D")
    return np.diagonal(x, offset)


@overload(diagonal_2d)
def _ol_diagonal_2d(x, offset=0):
    if not (isinstance(x, types.Array) and x.ndim == 2):
        raise TypingError(f"np.diagonal is supported for 2-D arrays, got {x}")
    return lambda x, offset=0: np.diag(x, offset)


def linspace_any(start, stop, num=50, endpoint=True):
    """np.linspace(start, stop, num, endpoint) (numba's np.linspace has no `endpoint`)."""
    return np.linspace(start, stop, num, endpoint)


@overload(linspace_any)
def _ol_linspace_any(start, stop, num=50, endpoint=True):
    def impl(start, stop, num=50, endpoint=True):
        if endpoint:
            return np.linspace(start, stop, num)
        return np.linspace(start, stop, num + 1)[:num] if num > 0 else np.linspace(start, stop, 0)
    return impl


def as_float(x):
    """`x.astype(float)`: a float64 copy of an array, float(x) for a scalar."""
    return x.astype(np.float64) if isinstance(x, np.ndarray) else float(x)


@overload(as_float)
def _ol_as_float(x):
    if _is_scalar_type(x):
        return lambda x: float(x)
    _require_array("as_float", x)
    return lambda x: x.astype(np.float64)


def number_like(value, like):
    """`like.dtype.type(value)`: `value` as a number of the dtype of `like` (an array or a NumPy number)."""
    return np.result_type(like).type(value)


def _nb_dtype_of(like):
    """numba: the NumPy dtype of the items of `like`, an array or a number."""
    return as_dtype(like.dtype if isinstance(like, types.Array) else like)


@overload(number_like)
def _ol_number_like(value, like):
    kind = _nb_dtype_of(like).type
    return lambda value, like: kind(value)


def if_inexact(g, like):
    """`g` where `like` holds floats, else zero: the derivative of number_like(value, like), which truncates
    `value` to an integer or bool dtype."""
    return g if np.result_type(like).kind in "fc" else np.zeros_like(g)[()]  # zeros even where g is inf or nan


@overload(if_inexact)
def _ol_if_inexact(g, like):
    if _nb_dtype_of(like).kind in "fc":
        return lambda g, like: g
    if isinstance(g, types.Array):
        return lambda g, like: np.zeros_like(g)
    zero = as_dtype(g).type(0)
    return lambda g, like: zero


def only_item(x):
    """`x.item()`: the one entry of a size-1 array, as a number (a number is its own item)."""
    if isinstance(x, np.ndarray):
        if x.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return x.reshape(1)[0]
    return x


@overload(only_item)
def _ol_only_item(x):
    if _is_scalar_type(x):
        return lambda x: x
    _require_array("only_item", x)

    def impl(x):
        if x.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return np.ravel(x)[0]
    return impl


def item_adjoint(g, x):
    """The adjoint of `only_item`: `g` in an array shaped like `x`, which must hold one entry (a float for a
    number `x`). It checks the size as `x.item()` does: a gradient that never computes the item still fails."""
    if isinstance(x, np.ndarray):
        if x.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return np.full(x.shape, g, dtype=adjoint_dtype(x))
    return scalar_adjoint(g, x)


@overload(item_adjoint)
def _ol_item_adjoint(g, x):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda g, x: cast(g)
    _require_array("item_adjoint", x)
    dt = _nb_adj_dtype(x.dtype)

    def impl(g, x):
        if x.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return np.full(x.shape, g, dt)
    return impl


def as_float32(x):
    """`x.astype(np.float32)`: a float32 copy of an array, np.float32(x) for a scalar."""
    return x.astype(np.float32) if isinstance(x, np.ndarray) else np.float32(x)


@overload(as_float32)
def _ol_as_float32(x):
    if _is_scalar_type(x):
        return lambda x: np.float32(x)
    _require_array("as_float32", x)
    return lambda x: x.astype(np.float32)


# ---------------------------------------------------------------------------
# permutations: untranspose, flip_any, roll_any
# ---------------------------------------------------------------------------

def untranspose(t, axes=None):
    """The inverse of np.transpose(., axes): `t` transposed by the inverse permutation of `axes`."""
    if axes is None:
        return np.transpose(t)
    n = np.ndim(t)
    return np.transpose(t, np.argsort([a % n for a in axes]))


@overload(untranspose)
def _ol_untranspose(t, axes=None):
    _require_array("untranspose", t)
    if _is_none_type(axes):
        return lambda t, axes=None: np.transpose(t)
    if not _is_int_tuple(axes):
        raise TypingError(f"np.transpose: axes must be a tuple of ints, got {axes}")
    N = len(axes)

    def impl(t, axes=None):
        inverse = np.empty(N, np.int64)
        for i in range(N):
            inverse[_axis(axes[i], N)] = i
        return np.transpose(t, to_fixed_tuple(inverse, N))
    return impl


def flip_any(x, axis=None):
    """np.flip(x, axis) with axis None, an int or a tuple of ints (numba's np.flip takes no axis)."""
    return np.flip(x, axis)


@overload(flip_any)
def _ol_flip_any(x, axis=None):
    _require_array("np.flip", x)
    if _is_none_type(axis):
        return lambda x, axis=None: np.flip(x)
    if not (isinstance(axis, types.Integer) or _is_int_tuple(axis)):
        raise TypingError(f"np.flip: axis must be an int or a tuple of ints, got {axis}")
    N = x.ndim

    def impl(x, axis=None):
        v = np.swapaxes(x, 0, 0)  # a view of layout 'A', like every flipped view below
        for ax in _ints(axis):
            a = _axis(ax, N)
            v = np.swapaxes(np.swapaxes(v, 0, a)[::-1], 0, a)
        return v
    return impl


def roll_any(x, shift, axis=None):
    """np.roll(x, shift, axis) with an int shift and axis None or an int (numba's np.roll takes no axis)."""
    return np.roll(x, shift, axis)


@overload(roll_any)
def _ol_roll_any(x, shift, axis=None):
    _require_array("np.roll", x)
    if not isinstance(shift, types.Integer):
        raise TypingError(f"np.roll: shift must be an int, got {shift}")
    if _is_none_type(axis):
        return lambda x, shift, axis=None: np.roll(x, shift)
    if not isinstance(axis, types.Integer):
        raise TypingError(f"np.roll: axis must be None or an int, got {axis}")
    N = x.ndim

    def impl(x, shift, axis=None):
        a = _axis(axis, N)
        out = np.empty(x.shape, x.dtype)
        n = x.shape[a]
        if n == 0:
            return out
        s = shift % n
        src, dst = np.swapaxes(x, 0, a), np.swapaxes(out, 0, a)
        dst[s:] = src[:n - s]
        dst[:s] = src[n - s:]
        return out
    return impl


# ---------------------------------------------------------------------------
# repetitions: tile_any / tile_adjoint, repeat_any / repeat_adjoint
# ---------------------------------------------------------------------------

def _tile_shapes(x_shape, reps):
    """x's shape and reps, both padded with leading ones to the tiled rank."""
    d = max(len(x_shape), len(reps))
    return (1,) * (d - len(x_shape)) + tuple(x_shape), (1,) * (d - len(reps)) + tuple(reps)


@njit
def _tile_sources(out_shape, x_shape):
    """Flat C-order index into x of each element of np.tile(x, reps), both shapes padded to one rank."""
    d = out_shape.size
    stride = np.empty(d, np.int64)
    s = 1
    for i in range(d - 1, -1, -1):
        stride[i] = s
        s *= x_shape[i]
    n = 1
    for i in range(d):
        n *= out_shape[i]
    sources = np.empty(n, np.int64)
    idx = np.zeros(d, np.int64)
    for k in range(n):
        off = 0
        for i in range(d):
            off += (idx[i] % x_shape[i]) * stride[i]
        sources[k] = off
        i = d - 1
        while i >= 0:
            idx[i] += 1
            if idx[i] < out_shape[i]:
                break
            idx[i] = 0
            i -= 1
    return sources


@njit
def _padded(values, d):
    """`values` with leading ones up to length d."""
    out = np.ones(d, np.int64)
    out[d - values.size:] = values
    return out


def tile_any(x, reps):
    """np.tile(x, reps) with reps an int or a tuple of ints, for scalars and arrays (numba lacks np.tile)."""
    return np.tile(x, reps)


@overload(tile_any)
def _ol_tile_any(x, reps):
    if not (isinstance(reps, types.Integer) or _is_int_tuple(reps)):
        raise TypingError(f"np.tile: reps must be an int or a tuple of ints, got {reps}")
    if _is_scalar_type(x):
        return lambda x, reps: tile_any(np.full((), x), reps)
    _require_array("np.tile", x)
    N = x.ndim
    D = max(N, 1 if isinstance(reps, types.Integer) else len(reps))

    def impl(x, reps):
        x_shape = _padded(_shape_array(x.shape), D)
        out_shape = x_shape * _padded(_ints(reps), D)
        out = np.empty(to_fixed_tuple(out_shape, D), x.dtype)
        out.reshape(out.size)[:] = _flat(x)[_tile_sources(out_shape, x_shape)]
        return out
    return impl


def tile_adjoint(t, x, reps):
    """The transpose of np.tile(., reps): the tiles of `t` summed into the shape and precision of `x` (a
    scalar for scalar x)."""
    x_shape, r = _tile_shapes(np.shape(x), (reps,) if np.ndim(reps) == 0 else reps)
    split = [n for pair in zip(r, x_shape) for n in pair]  # (r0, n0, r1, n1, ...)
    s = np.reshape(t, split).sum(axis=tuple(range(0, 2 * len(r), 2)))
    return reshape_like(s, x)


@overload(tile_adjoint)
def _ol_tile_adjoint(t, x, reps):
    _require_array("tile_adjoint", t)
    if not (isinstance(reps, types.Integer) or _is_int_tuple(reps)):
        raise TypingError(f"tile_adjoint: reps must be an int or a tuple of ints, got {reps}")
    N = x.ndim if isinstance(x, types.Array) else 0
    D = max(N, 1 if isinstance(reps, types.Integer) else len(reps))
    dt = _nb_adj_of(x)

    def impl(t, x, reps):
        x_shape = _padded(_shape_array(np.shape(x)), D)
        out_shape = x_shape * _padded(_ints(reps), D)
        if t.size != np.prod(out_shape):
            raise ValueError("tile_adjoint: t has the wrong size")
        sums = np.zeros(np.prod(x_shape), dt)
        flat_t = _flat(t)
        sources = _tile_sources(out_shape, x_shape)
        for k in range(sources.size):
            sums[sources[k]] += flat_t[k]
        return reshape_like(sums, x)
    return impl


def repeat_any(x, repeats, axis=None):
    """np.repeat(x, repeats, axis) with an int count and axis None or an int (numba's np.repeat takes no axis)."""
    return np.repeat(x, repeats, axis)


@overload(repeat_any)
def _ol_repeat_any(x, repeats, axis=None):
    if not isinstance(repeats, types.Integer):
        raise TypingError(f"np.repeat: repeats must be an int, got {repeats}")
    if _is_scalar_type(x):
        if not _is_none_type(axis):
            raise TypingError("np.repeat of a scalar takes no axis")
        return lambda x, repeats, axis=None: np.full(repeats, x)
    _require_array("np.repeat", x)
    if _is_none_type(axis):
        return lambda x, repeats, axis=None: np.repeat(x, repeats)
    if not isinstance(axis, types.Integer):
        raise TypingError(f"np.repeat: axis must be None or an int, got {axis}")
    N = x.ndim

    def impl(x, repeats, axis=None):
        a = _axis(axis, N)
        shape = _shape_array(x.shape)
        shape[a] *= repeats
        out = np.empty(to_fixed_tuple(shape, N), x.dtype)
        src, dst = np.swapaxes(x, 0, a), np.swapaxes(out, 0, a)
        for i in range(x.shape[a]):
            for r in range(repeats):
                dst[i * repeats + r] = src[i]
        return out
    return impl


def repeat_adjoint(t, x, repeats, axis=None):
    """The transpose of np.repeat(., repeats, axis): runs of `repeats` entries of `t` summed, shaped like x
    and in its precision."""
    if axis is None:
        return reshape_like(np.reshape(t, (-1, repeats)).sum(axis=1), x)
    a = axis % np.ndim(x)
    shape = x.shape[:a] + (x.shape[a], repeats) + x.shape[a + 1:]
    return _in_dtype(np.reshape(t, shape).sum(axis=a + 1), adjoint_dtype(x))


@overload(repeat_adjoint)
def _ol_repeat_adjoint(t, x, repeats, axis=None):
    _require_array("repeat_adjoint", t)
    dt = _nb_adj_of(x)
    if _is_none_type(axis):
        def flat_impl(t, x, repeats, axis=None):
            n = np.size(x)
            if t.size != n * repeats:
                raise ValueError("repeat_adjoint: t has the wrong size")
            sums = np.zeros(n, dt)
            flat_t = _flat(t)
            for i in range(n):
                for r in range(repeats):
                    sums[i] += flat_t[i * repeats + r]
            return reshape_like(sums, x)
        return flat_impl
    _require_array("repeat_adjoint", x)
    N = x.ndim

    def impl(t, x, repeats, axis=None):
        a = _axis(axis, N)
        out = np.zeros(x.shape, dt)
        src, dst = np.swapaxes(t, 0, a), np.swapaxes(out, 0, a)
        for i in range(x.shape[a]):
            for r in range(repeats):
                dst[i] += src[i * repeats + r]
        return out
    return impl


# ---------------------------------------------------------------------------
# blocks: pad_any / unpad, concatenate2 and its parts
# ---------------------------------------------------------------------------

def _pad_widths(pad_width, n):
    """Before and after widths per axis from np.pad's pad_width (an int, a pair, or pairs per axis)."""
    w = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (n, 2))
    return w[:, 0].copy(), w[:, 1].copy()


@overload(_pad_widths)
def _ol_pad_widths(pad_width, n):
    if isinstance(pad_width, types.Integer):
        return lambda pad_width, n: (np.full(n, pad_width, np.int64), np.full(n, pad_width, np.int64))
    if _is_int_tuple(pad_width) and len(pad_width) in (1, 2):
        last = len(pad_width) - 1
        return lambda pad_width, n: (np.full(n, pad_width[0], np.int64), np.full(n, pad_width[last], np.int64))
    if isinstance(pad_width, types.UniTuple) and _is_int_tuple(pad_width.dtype) and len(pad_width.dtype) in (1, 2):
        last = len(pad_width.dtype) - 1
        count = len(pad_width)

        def per_axis(pad_width, n):
            if count != 1 and count != n:
                raise ValueError("np.pad: pad_width does not match the array's rank")
            before, after = np.empty(n, np.int64), np.empty(n, np.int64)
            for i in range(n):
                pair = pad_width[0 if count == 1 else i]
                before[i], after[i] = pair[0], pair[last]
            return before, after
        return per_axis
    raise TypingError(f"np.pad: unsupported pad_width {pad_width}")


def pad_any(x, pad_width, mode="constant", constant_values=0):
    """np.pad(x, pad_width, mode="constant", constant_values=c) (numba lacks np.pad)."""
    if mode != "constant":
        raise ValueError(f"np.pad: s2sad supports mode='constant' only, not {mode!r}")
    return np.pad(x, pad_width, mode="constant", constant_values=constant_values)


@overload(pad_any)
def _ol_pad_any(x, pad_width, mode="constant", constant_values=0):
    _require_array("np.pad", x)
    if isinstance(mode, types.StringLiteral) and mode.literal_value != "constant":
        raise TypingError(f"np.pad: s2sad supports mode='constant' only, not {mode.literal_value!r}")
    N = x.ndim

    def impl(x, pad_width, mode="constant", constant_values=0):
        if mode != "constant":
            raise ValueError("np.pad: s2sad supports mode='constant' only")
        before, after = _pad_widths(pad_width, N)
        x_shape = _shape_array(x.shape)
        shape = before + x_shape + after
        out = np.full(to_fixed_tuple(shape, N), constant_values, x.dtype)
        out.reshape(out.size)[_block_offsets(shape, x_shape, before)] = _flat(x)
        return out
    return impl


def unpad(t, pad_width):
    """The transpose of np.pad(., pad_width): the interior of `t` without the padding."""
    before, after = _pad_widths(pad_width, np.ndim(t))
    return t[tuple(slice(b, n - a) for b, a, n in zip(before, after, np.shape(t)))]


@overload(unpad)
def _ol_unpad(t, pad_width):
    _require_array("unpad", t)
    N = t.ndim

    def impl(t, pad_width):
        before, after = _pad_widths(pad_width, N)
        t_shape = _shape_array(t.shape)
        shape = t_shape - before - after
        return _flat(t)[_block_offsets(t_shape, shape, before)].reshape(to_fixed_tuple(shape, N))
    return impl


def concatenate2(a, b, axis=0):
    """np.concatenate((a, b), axis=axis): hstack, vstack and concatenate of n arrays are chains of it."""
    return np.concatenate((a, b), axis=axis)


@overload(concatenate2)
def _ol_concatenate2(a, b, axis=0):
    _require_array("np.concatenate", a)
    _require_array("np.concatenate", b)
    return lambda a, b, axis=0: np.concatenate((a, b), axis=axis)


def _part_index(big_shape, n, axis, at_end):
    """The index of a block of n entries at the start or end of `axis` in an array of shape big_shape."""
    a = axis % len(big_shape)
    start = big_shape[a] - n if at_end else 0
    return tuple(slice(start, start + n) if i == a else slice(None) for i in range(len(big_shape)))


def concat_part(t, like, axis, at_end):
    """The first (at_end=0) or last (at_end=1) like.shape[axis] entries of `t` along axis, in `like`'s precision
    (concatenate's adjoint)."""
    index = _part_index(np.shape(t), np.shape(like)[axis], axis, at_end)
    return _in_dtype(t[index], adjoint_dtype(like))


def concat_embed(h, like, axis, at_end):
    """Zeros shaped like `like` and in its precision, `h` at the start (at_end=0) or end (at_end=1) along axis:
    concat_part's transpose."""
    out = np.zeros(np.shape(like), adjoint_dtype(like))
    index = _part_index(np.shape(like), np.shape(h)[axis], axis, at_end)
    out[index] = h
    return out


@njit
def _part_start(big, small, axis, at_end):
    """Block start in `big` for a block `small` at the start or end of `axis` (other extents equal)."""
    a = _axis(axis, big.size)
    for i in range(big.size):
        if i != a and big[i] != small[i]:
            raise ValueError("concatenate: shapes differ outside the concatenation axis")
    start = np.zeros(big.size, np.int64)
    if at_end:
        start[a] = big[a] - small[a]
    return start


@overload(concat_part)
def _ol_concat_part(t, like, axis, at_end):
    _require_array("concat_part", t)
    _require_array("concat_part", like)
    N = t.ndim
    dt = _nb_adj_dtype(like.dtype)

    def impl(t, like, axis, at_end):
        big = _shape_array(t.shape)
        small = big.copy()
        a = _axis(axis, N)
        small[a] = like.shape[a]
        offsets = _block_offsets(big, small, _part_start(big, small, a, at_end))
        return _in_dtype(_flat(t)[offsets], dt).reshape(to_fixed_tuple(small, N))
    return impl


@overload(concat_embed)
def _ol_concat_embed(h, like, axis, at_end):
    _require_array("concat_embed", h)
    _require_array("concat_embed", like)
    dt = _nb_adj_dtype(like.dtype)

    def impl(h, like, axis, at_end):
        big, small = _shape_array(like.shape), _shape_array(h.shape)
        out = np.zeros(like.shape, dt)
        out.reshape(out.size)[_block_offsets(big, small, _part_start(big, small, axis, at_end))] = _flat(h)
        return out
    return impl


def unit_like(x, k):
    """The k-th unit vector in the shape and precision of `x`, 1.0 for a scalar: the tangent a built
    hessian's loop seeds, in code numba compiles for a float `x` as for an array."""
    if np.ndim(x) == 0:
        return scalar_adjoint(1.0, x)
    e = np.zeros(np.size(x), adjoint_dtype(x))
    e[k] = 1.0
    return e.reshape(np.shape(x))


@overload(unit_like)
def _ol_unit_like(x, k):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda x, k: cast(1.0)
    dt = _nb_adj_dtype(x.dtype)

    def impl(x, k):
        e = np.zeros(x.size, dt)
        e[k] = 1.0
        return e.reshape(x.shape)
    return impl


def set_column(h, k, t):
    """h[:, k] = the elements of `t` (an array or a float): a built hessian's column."""
    h[:, k] = np.ravel(t)


@overload(set_column)
def _ol_set_column(h, k, t):
    if _is_scalar_type(t):
        def scalar(h, k, t):
            h[:, k] = t
        return scalar

    def impl(h, k, t):
        h[:, k] = np.ravel(t)
    return impl


def square_block(h, x):
    """The (size, size) matrix `h` of second derivatives in the shape x.shape + x.shape and the precision
    of `x` (a scalar for a scalar `x`)."""
    if np.ndim(x):
        return _in_dtype(h.reshape(np.shape(x) * 2), adjoint_dtype(x))
    return scalar_adjoint(h[0, 0], x)


@overload(square_block)
def _ol_square_block(h, x):
    if _is_scalar_type(x):
        cast = _nb_adj_scalar(x)
        return lambda h, x: cast(h[0, 0])
    dt = _nb_adj_dtype(x.dtype)
    return lambda h, x: np.ascontiguousarray(_in_dtype(h, dt)).reshape(x.shape + x.shape)

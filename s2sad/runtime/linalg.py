"""Runtime helpers for the linalg rules (plain Python, plus numba overloads).

numba has no np.einsum, np.tensordot or np.inner, and np.vdot only for 1-D arrays. Contractions run
through one kernel, `_contract`, that loops over every combination of subscript values: einsum_op
(np.einsum with one or two operands and letter subscripts), tensordot_op and inner_op (which build
their subscripts with tensordot_spec), and einsum_into, the form their derivatives take: it also
allows output subscripts that repeat (writing a diagonal) or that no operand has (broadcasting; the
sizes come from `like`, whose shape the result takes). Under numba, einsum_op's subscripts and
tensordot_op's `axes` must be constants: they fix the result's rank.
"""

import operator

import numpy as np
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numba.np.unsafe.ndarray import to_fixed_tuple

from s2sad.runtime import contract
from s2sad.runtime.core import (_is_none_type, _is_scalar_type, _nb_adj_dtype, _nb_adj_scalar, adjoint_dtype,
                                scalar_adjoint)
from s2sad.runtime.reductions import _int_tuple_values, _shape_arr
from s2sad.runtime.shapes import _in_dtype

__all__ = [
    "logabsdet",
    "slogdet_sign",
    "matrix_t",
    "tril_half",
    "sym_lower",
    "eigh_vectors",
    "eig_gaps",
    "vdot_flat",
    "kron_adjoint_a",
    "kron_adjoint_b",
    "inner_op",
    "tensordot_op",
    "tensordot_spec",
    "einsum_op",
    "einsum_into",
    "einsum_swap",
]


# ---------------------------------------------------------------------------
# transposes and triangles (for the matrix-function rules)
# ---------------------------------------------------------------------------

def matrix_t(x):
    """x with its last two axes swapped, as a new C-contiguous array."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


@overload(matrix_t)
def _ol_matrix_t(x):
    if not isinstance(x, types.Array) or x.ndim != 2:
        raise TypingError(f"matrix_t: a 2-D array is required under numba, not {x}")
    return lambda x: np.ascontiguousarray(x.T)


def tril_half(x):
    """The lower triangle of a 2-D array with its diagonal halved. Elementwise, so its own adjoint."""
    dt = adjoint_dtype(x)
    return x * (np.tril(np.ones(x.shape, dt)) - 0.5 * np.eye(x.shape[0], x.shape[1], dtype=dt))


@overload(tril_half)
def _ol_tril_half(x):
    dt = _nb_adj_dtype(x.dtype)
    half = dt.type(0.5)  # numba makes a float32 array times a float (float64) float64
    return lambda x: x * (np.tril(np.ones(x.shape, dt)) - half * np.eye(x.shape[0], x.shape[1], 0, dt))


def sym_lower(x):
    """The symmetric matrix whose lower triangle is x's (what np.linalg.cholesky reads)."""
    return np.tril(x) + np.ascontiguousarray(np.tril(x, -1).T)


@overload(sym_lower)
def _ol_sym_lower(x):
    return sym_lower


def eigh_vectors(a):
    """The eigenvectors np.linalg.eigh gives, in columns (np.linalg.eigvalsh's rule needs them)."""
    return np.linalg.eigh(a)[1]


@overload(eigh_vectors)
def _ol_eigh_vectors(a):
    if not isinstance(a, types.Array) or a.ndim != 2:
        raise TypingError(f"eigh_vectors: a 2-D array is required under numba, not {a}")
    return lambda a: np.linalg.eigh(np.ascontiguousarray(a))[1]


def eig_gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]), 0 where the two are equal (on the diagonal): how the eigenvectors of a
    symmetric matrix turn, V^T dV = F * (V^T dS V)."""
    d = np.expand_dims(w, 0) - np.expand_dims(w, 1)
    return np.where(d == 0.0, 0.0, 1.0 / np.where(d == 0.0, 1.0, d))


@overload(eig_gaps)
def _ol_eig_gaps(w):
    if not isinstance(w, types.Array) or w.ndim != 1:
        raise TypingError(f"eig_gaps: a 1-D array is required under numba, not {w}")

    def impl(w):
        n = w.shape[0]
        out = np.zeros((n, n), w.dtype)
        for i in range(n):
            for j in range(n):
                if w[j] != w[i]:
                    out[i, j] = 1.0 / (w[j] - w[i])
        return out
    return impl


# ---------------------------------------------------------------------------
# kron
# ---------------------------------------------------------------------------

def kron_adjoint_a(g, a, b):
    """The adjoint of `a` in `out = np.kron(a, b)`, operands of one or two axes: a 1-D operand is a row, as
    np.kron pads it, and `out` is then (rows of a, rows of b, columns of a, columns of b) end to end."""
    return _kron_share(_kron_blocks(g, a, b), np.atleast_2d(b)).reshape(np.shape(a))


def kron_adjoint_b(g, a, b):
    """The adjoint of `b` in `out = np.kron(a, b)`: `a`'s in np.kron(b, a), whose blocks are g's transposed."""
    return _kron_share(_kron_blocks(g, a, b).transpose(1, 0, 3, 2), np.atleast_2d(a)).reshape(np.shape(b))


def _kron_blocks(g, a, b):
    """g as (rows of a, rows of b, columns of a, columns of b)."""
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise ValueError("s2sad differentiates np.kron of operands with one or two axes")
    (m, n), (p, q) = np.atleast_2d(a).shape, np.atleast_2d(b).shape
    return np.reshape(g, (m, p, n, q))


def _kron_share(blocks, other):
    """share[i, j] = the sum over k, l of blocks[i, k, j, l] * other[k, l]."""
    return np.einsum("ikjl,kl->ij", blocks, other)


@overload(kron_adjoint_a)
def _ol_kron_adjoint_a(g, a, b):
    _require_kron_operands(a, b)
    return lambda g, a, b: _kron_share_nb(_kron_blocks_nb(g, a, b), np.atleast_2d(b)).reshape(a.shape)


@overload(kron_adjoint_b)
def _ol_kron_adjoint_b(g, a, b):
    _require_kron_operands(a, b)
    return lambda g, a, b: _kron_share_nb(_kron_blocks_nb(g, a, b).transpose(1, 0, 3, 2),
                                          np.atleast_2d(a)).reshape(b.shape)


def _require_kron_operands(a, b):
    if not all(isinstance(x, types.Array) and 1 <= x.ndim <= 2 for x in (a, b)):
        raise TypingError(f"s2sad differentiates np.kron of arrays with one or two axes, not {a} and {b}")


@njit
def _kron_blocks_nb(g, a, b):
    (m, n), (p, q) = np.atleast_2d(a).shape, np.atleast_2d(b).shape
    return np.ascontiguousarray(g).reshape((m, p, n, q))


@njit
def _kron_share_nb(blocks, other):
    """`_kron_share` as loops (numba has no einsum)."""
    m, p, n, q = blocks.shape
    share = np.zeros((m, n))
    for i in range(m):
        for k in range(p):
            for j in range(n):
                for l in range(q):
                    share[i, j] += blocks[i, k, j, l] * other[k, l]
    return share


# ---------------------------------------------------------------------------
# vdot
# ---------------------------------------------------------------------------

def vdot_flat(x, y):
    """np.vdot(x, y) for real arrays of any (equal) size."""
    return np.vdot(x, y)


@overload(vdot_flat)
def _ol_vdot_flat(x, y):
    if not (isinstance(x, types.Array) and isinstance(y, types.Array)):
        raise TypingError("vdot_flat: arrays required")
    return lambda x, y: np.vdot(np.ascontiguousarray(x).reshape(x.size), np.ascontiguousarray(y).reshape(y.size))


# ---------------------------------------------------------------------------
# the contraction kernel
# ---------------------------------------------------------------------------

NLABELS = 58  # label id = ord(letter) - ord("A"), so 'A'..'Z' and 'a'..'z' fit (in code-point order)
MAXDIMS = 32


@njit
def _parse(spec):
    """Label ids of operand 0 (row 0), operand 1 (row 1) and the output (row 2), their counts and the
    number of operands. Without '->', the output is the labels seen once, in alphabetical order (as NumPy)."""
    labels = np.full((3, MAXDIMS), -1, np.int64)
    counts = np.zeros(3, np.int64)
    part, nops, explicit = 0, 1, False
    i, n = 0, len(spec)
    while i < n:
        c = spec[i]
        if c == ",":
            if part != 0:
                raise ValueError("einsum: s2sad supports one or two operands")
            part, nops = 1, 2
        elif c == "-":
            if explicit or i + 1 >= n or spec[i + 1] != ">":
                raise ValueError("einsum: malformed subscripts")
            i += 1
            part, explicit = 2, True
        elif c != " ":
            code = ord(c) - 65
            if code < 0 or code >= NLABELS or 26 <= code < 32:
                raise ValueError("einsum: subscripts must be letters (s2sad does not support '...')")
            if counts[part] >= MAXDIMS:
                raise ValueError("einsum: too many subscripts")
            labels[part, counts[part]] = code
            counts[part] += 1
        i += 1
    if not explicit:
        seen = np.zeros(NLABELS, np.int64)
        for k in range(nops):
            for d in range(counts[k]):
                seen[labels[k, d]] += 1
        for lab in range(NLABELS):
            if seen[lab] == 1:
                labels[2, counts[2]] = lab
                counts[2] += 1
    return labels, counts, nops


@njit
def _contract(labels, counts, nops, xf, xsh, yf, ysh, osh, out_known):
    """out[output labels] = sum over the other labels of x[x labels] * y[y labels] (flat, C order).

    `osh` is the output shape when `out_known`; else it is computed (every output label must then
    appear in an operand). Returns the flat result and its shape."""
    size = np.full(NLABELS, -1, np.int64)
    st = np.zeros((3, NLABELS), np.int64)
    for k in range(nops):
        sh = xsh if k == 0 else ysh
        if counts[k] != sh.size:
            raise ValueError("einsum: an operand's subscripts do not match its number of dimensions")
        s = 1
        for d in range(sh.size - 1, -1, -1):
            lab = labels[k, d]
            if size[lab] == -1:
                size[lab] = sh[d]
            elif size[lab] != sh[d]:
                raise ValueError("einsum: a subscript has two different sizes")
            st[k, lab] += s
            s *= sh[d]
    no = counts[2]
    if out_known:
        if no != osh.size:
            raise ValueError("einsum: output subscripts do not match the output's dimensions")
        for d in range(no):
            lab = labels[2, d]
            if size[lab] == -1:
                size[lab] = osh[d]
            elif size[lab] != osh[d]:
                raise ValueError("einsum: a subscript has two different sizes")
    else:
        osh = np.empty(no, np.int64)
        for d in range(no):
            lab = labels[2, d]
            if size[lab] == -1:
                raise ValueError("einsum: an output subscript appears in no operand")
            osh[d] = size[lab]
    s = 1
    for d in range(no - 1, -1, -1):
        st[2, labels[2, d]] += s
        s *= osh[d]
    out = np.zeros(s, xf.dtype)
    used = np.empty(NLABELS, np.int64)
    n_used, total = 0, 1
    for lab in range(NLABELS):
        if size[lab] >= 0:
            used[n_used] = lab
            n_used += 1
            total *= size[lab]
    idx = np.zeros(n_used, np.int64)
    ox, oy, oo = 0, 0, 0
    for _ in range(total):
        v = xf[ox]
        if nops == 2:
            v *= yf[oy]
        out[oo] += v
        d = n_used - 1
        while d >= 0:
            lab = used[d]
            idx[d] += 1
            ox += st[0, lab]
            oy += st[1, lab]
            oo += st[2, lab]
            if idx[d] < size[lab]:
                break
            ox -= st[0, lab] * size[lab]
            oy -= st[1, lab] * size[lab]
            oo -= st[2, lab] * size[lab]
            idx[d] = 0
            d -= 1
    return out, osh


def _compute_dtype(x, y=None):
    """The dtype a contraction of the operands x[, y] computes in (Python): float32 when every operand is
    float32, as NumPy's result would be, else float64."""
    dtypes = [np.asarray(v).dtype for v in (x, y) if v is not None]
    return np.dtype(np.float32 if all(d == np.float32 for d in dtypes) else np.float64)


def _nb_compute_dtype(*operands):
    """`_compute_dtype` for numba types (typing time); an omitted operand is None or types.none."""
    dtypes = [None if _is_none_type(t) else t.dtype if isinstance(t, types.Array) else t for t in operands]
    return np.dtype(np.float32 if all(d is None or d == types.float32 for d in dtypes) else np.float64)


def _flat(x, dtype):
    """(flat copy in `dtype`, shape as an int64 array) of an operand; None stands for a missing operand."""
    if x is None:
        return np.ones(1, dtype), np.zeros(0, np.int64)
    a = np.asarray(x, dtype=dtype)
    return np.ascontiguousarray(a).reshape(a.size), np.array(a.shape, dtype=np.int64)


@overload(_flat)
def _ol_flat(x, dtype):
    if _is_none_type(x):
        return lambda x, dtype: (np.ones(1, dtype), np.zeros(0, np.int64))
    if _is_scalar_type(x):
        return lambda x, dtype: (np.full(1, x, dtype), np.zeros(0, np.int64))
    if isinstance(x, types.Array) and x.ndim == 0:
        return lambda x, dtype: (np.full(1, np.sum(x), dtype), np.zeros(0, np.int64))
    if isinstance(x, types.Array):
        return lambda x, dtype: (np.ascontiguousarray(x).reshape(x.size).astype(dtype), _shape_arr(x))
    raise TypingError(f"einsum: unsupported operand type {x}")


def _operands_dtype(x, y):
    """numba only: the np.dtype a contraction of x and y (y may be None) computes in."""
    raise NotImplementedError


@overload(_operands_dtype)
def _ol_operands_dtype(x, y):
    dt = _nb_compute_dtype(x, y)
    return lambda x, y: dt


@njit
def _label_row(labels, counts, r):
    s = ""
    for d in range(counts[r]):
        s += chr(labels[r, d] + 65)
    return s


@njit
def _swap(spec, k):
    labels, counts, nops = _parse(spec)
    if k == 0:
        ins = _label_row(labels, counts, 2)
        if nops == 2:
            ins += "," + _label_row(labels, counts, 1)
        return ins + "->" + _label_row(labels, counts, 0)
    if k == 1 and nops == 2:
        ins = _label_row(labels, counts, 0) + "," + _label_row(labels, counts, 2)
        return ins + "->" + _label_row(labels, counts, 1)
    raise ValueError("einsum_swap: no such operand")


@njit
def _check_numpy_output(labels, counts):
    """np.einsum's rule: output subscripts appear once each (and in some operand: _contract checks)."""
    seen = np.zeros(NLABELS, np.int64)
    for d in range(counts[2]):
        seen[labels[2, d]] += 1
        if seen[labels[2, d]] > 1:
            raise ValueError("einsum: an output subscript appears more than once")



# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------

def einsum_op(subscripts, x, y=None):
    """np.einsum(subscripts, x[, y]) with letter subscripts, always a new array (as compiled code gives)."""
    operands = (x,) if y is None else (x, y)
    return _fresh(np.einsum(subscripts, *operands, optimize=_worth_a_path(operands)), x, y)


def _worth_a_path(operands) -> bool:
    """Whether np.einsum should plan its contraction (BLAS where it can): several times faster on large
    operands, and a fixed cost of tens of microseconds that small ones would feel."""
    return len(operands) == 2 and sum(np.size(v) for v in operands) > 4096


def _fresh(value, *operands):
    """`value`, copied where np.einsum returned a view of an operand ('ij->ji', 'ii->i')."""
    if any(v is not None and np.shares_memory(value, v) for v in operands):
        return value.copy()
    return value


def _n_out(spec):
    """The number of output subscripts of constant subscripts `spec` (typing time, plain Python)."""
    return len(contract.parse_spec(spec)[1])


@njit
def _einsum(spec, x, y, osh, out_known, numpy_rules):
    labels, counts, nops = _parse(spec)
    if numpy_rules:
        _check_numpy_output(labels, counts)
    dtype = _operands_dtype(x, y)
    xf, xsh = _flat(x, dtype)
    yf, ysh = _flat(y, dtype)
    return _contract(labels, counts, nops, xf, xsh, yf, ysh, osh, out_known)


def _specialised(spec, operands, like=None):
    """The loop-nest kernel for constant subscripts `spec` (contract.py), or None: the generic kernel
    then runs (other operand types, or subscripts it rejects with NumPy's errors). Its result has
    `like`'s adjoint dtype, or without `like` the dtype the operands compute in."""
    arrays = [t for t in operands if not _is_none_type(t)]
    if like is not None:
        arrays.append(like)
    if not (isinstance(spec, types.StringLiteral)
            and all(isinstance(t, types.Array) and isinstance(t.dtype, (types.Float, types.Integer)) for t in arrays)):
        return None
    if not contract.specialisable(spec.literal_value, tuple(t.ndim for t in arrays), like is not None):
        return None
    dt = _nb_compute_dtype(*operands) if like is None else _nb_adj_dtype(like.dtype)
    return contract.kernel(spec.literal_value, like is not None, dt.name)


@overload(einsum_op, prefer_literal=True)
def _ol_einsum_op(subscripts, x, y=None):
    if not isinstance(subscripts, types.StringLiteral):
        raise TypingError("einsum: under numba the subscripts must be a string constant")
    kern = _specialised(subscripts, [x, y])
    if kern is not None:
        if _is_none_type(y):
            return lambda subscripts, x, y=None: kern(x)
        return lambda subscripts, x, y=None: kern(x, y)
    K = _n_out(subscripts.literal_value)
    if K == 0:
        return lambda subscripts, x, y=None: _einsum(subscripts, x, y, np.zeros(0, np.int64), False, True)[0][0]

    def impl(subscripts, x, y=None):
        out, osh = _einsum(subscripts, x, y, np.zeros(0, np.int64), False, True)
        return out.reshape(to_fixed_tuple(osh, K))
    return impl


def einsum_into(spec, like, x, y=None):
    """einsum(spec, x[, y]) shaped like `like`, and in its adjoint's precision (`like` is the operand whose
    adjoint this is): output subscripts may repeat (the result is zero off that diagonal) or appear in no
    operand (the result is broadcast along them). In Python it is np.einsum: the python backend compiles
    nothing."""
    operands, out = contract.parse_spec(spec)
    dtype = _compute_dtype(x, y)
    arrays = [np.asarray(v, dtype=dtype) for v in (x, y) if v is not None]
    if len(operands) != len(arrays):
        raise ValueError("einsum: the subscripts name a different number of operands")
    given = set("".join(operands))
    kept = "".join(dict.fromkeys(c for c in out if c in given))
    value = _fresh(np.einsum(",".join(operands) + "->" + kept, *arrays, optimize=_worth_a_path(arrays)), *arrays)
    shape = np.shape(like)
    if len(shape) != len(out):
        raise ValueError("einsum: the output subscripts do not match the adjoint's rank")
    result = _placed(value, kept, out, shape)
    if isinstance(like, np.ndarray):
        return _in_dtype(result, adjoint_dtype(like))
    return scalar_adjoint(result.reshape(()).item(), like)


def _placed(value, kept, out, shape):
    """`value` (subscripts `kept`, each once) written into an array of `shape` with subscripts `out`:
    broadcast along the subscripts `kept` lacks, zero off the diagonals where `out` repeats one."""
    if out == kept:
        return value
    index = np.indices(shape, sparse=True)
    first = {c: out.index(c) for c in out}
    result = value[tuple(index[first[c]] for c in kept)] if kept else value
    on_diagonal = np.ones((1,) * len(shape), bool)
    for axis, c in enumerate(out):
        if first[c] != axis:
            on_diagonal = on_diagonal & (index[axis] == index[first[c]])
    return np.broadcast_to(np.where(on_diagonal, result, 0), shape).copy()


@overload(einsum_into, prefer_literal=True)
def _ol_einsum_into(spec, like, x, y=None):
    kern = _specialised(spec, [x, y], like)
    if kern is not None:
        if _is_none_type(y):
            return lambda spec, like, x, y=None: kern(like, x)
        return lambda spec, like, x, y=None: kern(like, x, y)
    if isinstance(like, types.Array) and like.ndim > 0:
        dt = _nb_adj_dtype(like.dtype)
        return lambda spec, like, x, y=None: _in_dtype(
            _einsum(spec, x, y, _shape_arr(like), True, False)[0], dt).reshape(like.shape)
    if _is_scalar_type(like) or isinstance(like, types.Array):
        cast = _nb_adj_scalar(like)
        return lambda spec, like, x, y=None: cast(_einsum(spec, x, y, np.zeros(0, np.int64), True, False)[0][0])
    raise TypingError(f"einsum_into: unsupported type {like}")


def einsum_swap(spec, k):
    """The subscripts of the adjoint of operand k of einsum(spec, ...): the output's subscripts take
    operand k's place, and operand k's become the output's ('ij,jk->ik', 0 gives 'ik,jk->ij')."""
    return contract.swap_text(spec, k)


@overload(einsum_swap)
def _ol_einsum_swap(spec, k):
    return lambda spec, k: _swap(spec, k)


# ---------------------------------------------------------------------------
# tensordot and inner
# ---------------------------------------------------------------------------

@register_jitable  # plain Python in the python backend, which compiles nothing
def _tdot_spec(nx, ny, axa, axb):
    """einsum subscripts for tensordot: x's axes axa contract with y's axes axb."""
    if axa.size != axb.size:
        raise ValueError("tensordot: axes lists must have the same length")
    if nx + ny > 26:
        raise ValueError("tensordot: too many dimensions")
    ycode = np.full(ny, -1, np.int64)
    xfree = np.ones(nx, np.bool_)
    for i in range(axa.size):
        a = axa[i] + nx if axa[i] < 0 else axa[i]
        b = axb[i] + ny if axb[i] < 0 else axb[i]
        if a < 0 or a >= nx or b < 0 or b >= ny or ycode[b] != -1 or not xfree[a]:
            raise ValueError("tensordot: axes out of range or repeated")
        ycode[b] = a
        xfree[a] = False
    xs, ys, outs = "", "", ""
    for i in range(nx):
        xs += chr(97 + i)
        if xfree[i]:
            outs += chr(97 + i)
    for j in range(ny):
        if ycode[j] == -1:
            ys += chr(97 + nx + j)
            outs += chr(97 + nx + j)
        else:
            ys += chr(97 + ycode[j])
    return xs + "," + ys + "->" + outs


def _tdot_axes(nx, axes):
    """(x axes, y axes) of a tensordot `axes` argument, as int64 arrays."""
    if isinstance(axes, (int, np.integer)):
        return np.arange(nx - axes, nx), np.arange(axes)
    a, b = axes
    return np.atleast_1d(np.asarray(a, dtype=np.int64)), np.atleast_1d(np.asarray(b, dtype=np.int64))


def _side(s):
    """numba only: one side of a tensordot axes pair (an int or a tuple of ints) as an int64 array."""
    raise NotImplementedError


@overload(_side)
def _ol_side(s):
    if isinstance(s, types.Integer):
        return lambda s: np.full(1, s, np.int64)
    values = _int_tuple_values(s)
    if values is not None:
        return lambda s: np.array(values, np.int64)
    if isinstance(s, types.UniTuple) and isinstance(s.dtype, types.Integer):
        def conv(s):
            out = np.empty(len(s), np.int64)
            for i in range(len(s)):
                out[i] = s[i]
            return out
        return conv
    raise TypingError(f"tensordot: unsupported axes entry {s}")


def _n_contracted(axes):
    """numba: how many axes pairs a tensordot `axes` type contracts (None: not known when typing)."""
    if isinstance(axes, types.Omitted) or isinstance(axes, int):
        return axes.value if isinstance(axes, types.Omitted) else axes
    if isinstance(axes, types.IntegerLiteral):
        return axes.literal_value
    if isinstance(axes, types.Integer):
        return None
    if isinstance(axes, types.BaseTuple) and len(axes) == 2:
        return 1 if isinstance(axes[0], types.Integer) else len(axes[0])
    raise TypingError(f"tensordot: axes must be an int or a pair, not {axes}")


def tensordot_spec(x, y, axes=2):
    """The einsum subscripts of np.tensordot(x, y, axes) ('ab,bc->ac' for 2-D x, y and axes=1)."""
    axa, axb = _tdot_axes(np.ndim(x), axes)
    return _tdot_spec(np.ndim(x), np.ndim(y), axa, axb)


@overload(tensordot_spec)
def _ol_tensordot_spec(x, y, axes=2):
    nx, ny = x.ndim, y.ndim
    if isinstance(axes, types.Omitted) or isinstance(axes, int):
        v = axes.value if isinstance(axes, types.Omitted) else axes
        return lambda x, y, axes=2: _tdot_spec(nx, ny, np.arange(nx - v, nx), np.arange(v))
    if isinstance(axes, types.Integer):
        return lambda x, y, axes=2: _tdot_spec(nx, ny, np.arange(nx - axes, nx), np.arange(axes))
    if isinstance(axes, types.BaseTuple) and len(axes) == 2:
        return lambda x, y, axes=2: _tdot_spec(nx, ny, _side(axes[0]), _side(axes[1]))
    raise TypingError(f"tensordot: axes must be an int or a pair, not {axes}")


def tensordot_op(x, y, axes=2):
    """np.tensordot(x, y, axes)."""
    return np.tensordot(x, y, axes)


@njit
def _contracted(spec, x, y):
    return _einsum(spec, x, y, np.zeros(0, np.int64), False, False)


@overload(tensordot_op)
def _ol_tensordot_op(x, y, axes=2):
    if not (isinstance(x, types.Array) and isinstance(y, types.Array)):
        raise TypingError("tensordot: arrays required")
    k = _n_contracted(axes)
    if k is None:
        raise TypingError("tensordot: under numba `axes` must be a constant")
    K = x.ndim + y.ndim - 2 * k
    if K == 0:
        return lambda x, y, axes=2: _contracted(tensordot_spec(x, y, axes), x, y)[0][0]

    def impl(x, y, axes=2):
        out, osh = _contracted(tensordot_spec(x, y, axes), x, y)
        return out.reshape(to_fixed_tuple(osh, K))
    return impl


def inner_op(x, y):
    """np.inner(x, y) for arrays of at least one dimension."""
    return np.inner(x, y)


@overload(inner_op)
def _ol_inner_op(x, y):
    if not (isinstance(x, types.Array) and isinstance(y, types.Array) and x.ndim > 0 and y.ndim > 0):
        raise TypingError("inner: arrays of at least one dimension required")
    K = x.ndim + y.ndim - 2
    if K == 0:
        return lambda x, y: _contracted(tensordot_spec(x, y, (-1, -1)), x, y)[0][0]

    def impl(x, y):
        out, osh = _contracted(tensordot_spec(x, y, (-1, -1)), x, y)
        return out.reshape(to_fixed_tuple(osh, K))
    return impl


def logabsdet(a):
    """log|det(a)|: the second half of np.linalg.slogdet (the frontend splits slogdet in two)."""
    return np.linalg.slogdet(a)[1]


# numba's slogdet of a float32 matrix is float64, NumPy's float32

@overload(logabsdet)
def _ol_logabsdet(a):
    cast = _nb_adj_scalar(a)
    return lambda a: cast(np.linalg.slogdet(a)[1])


def slogdet_sign(a):
    """The sign of det(a): the first half of np.linalg.slogdet."""
    return np.linalg.slogdet(a)[0]


@overload(slogdet_sign)
def _ol_slogdet_sign(a):
    cast = _nb_adj_scalar(a)
    return lambda a: cast(np.linalg.slogdet(a)[0])


# ---------------------------------------------------------------------------
# products of arrays of two dtypes
# ---------------------------------------------------------------------------

# numba's BLAS-backed products and solves refuse operands of different dtypes; NumPy promotes them
# (`A32 @ np.eye(3)` is float64). These overloads match only such mixed pairs, cast both operands to
# NumPy's result dtype and call numba's own implementation.

def _promoted_pair(a, b):
    """NumPy's result dtype for two real arrays of different dtypes, else None (numba's own overload)."""
    real = (types.Float, types.Integer)
    if not (isinstance(a, types.Array) and isinstance(b, types.Array) and a.dtype != b.dtype
            and isinstance(a.dtype, real) and isinstance(b.dtype, real)):
        return None
    return np.result_type(np.dtype(str(a.dtype)), np.dtype(str(b.dtype)))


def _promote_mixed_operands(fn):
    @overload(fn)
    def _ol_mixed(a, b):
        dtype = _promoted_pair(a, b)
        if dtype is None:
            return None
        return lambda a, b: fn(a.astype(dtype), b.astype(dtype))
    return _ol_mixed


for _product in (operator.matmul, np.dot, np.vdot, np.linalg.solve, np.linalg.lstsq):
    _promote_mixed_operands(_product)


# NumPy's np.dot of a number and an array is their product (`np.dot(px, c)` of a density's constant); numba's
# np.dot takes arrays only.

@overload(np.dot)
def _ol_dot_with_a_number(a, b):
    if not (_is_scalar_type(a) or _is_scalar_type(b)):
        return None
    return lambda a, b: a * b

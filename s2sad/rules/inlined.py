"""Library functions s2sad inlines as Python written with NumPy functions that have rules.

np.linalg.matrix_power (a constant power) and multi_dot are products written out; np.append is
np.concatenate; np.interp is np.searchsorted, then the line through the segment's ends; np.convolve adds shifted copies
of one vector scaled by the other's items, and np.correlate is np.convolve with one reversed; np.nansum and
np.nanmean are sums of np.where(np.isnan(a), 0.0, a), and the other nan-functions alike. np.sort takes
the items in np.argsort's order, and np.median and np.quantile read the sorted items (nan, which sorts
last, makes them nan, as in NumPy); np.delete reads the items it keeps, and np.insert writes them around
the new ones. Flips, quarter turns, np.take and np.take_along_axis are views and index reads; np.resize
tiles the flattened items; np.bincount adds its weights with np.add.at; np.trapezoid, np.polyval, np.cross, np.gradient and np.meshgrid are their
arithmetic. A two-operand ufunc's `outer` (np.subtract.outer) is the ufunc of a column and a row, reshaped.

scipy.stats.poisson's and nbinom's pmf and logpmf, and gamma's pdf and logpdf, are their formulas with
scipy.special's gammaln and xlogy (-inf off the support, as SciPy gives). scipy.special's softmax and
log_softmax, and logsumexp with weights `b=`, shift by the largest item; scipy.spatial.distance's cdist
and pdist are the rows' differences reduced by the metric, and squareform writes or reads the upper
triangle. np.nan_to_num is np.where; math.fsum is a sum; np.apply_along_axis calls its function on each
row or column of a matrix, filling an array; np.linalg.lstsq solves the normal equations (a matrix of
full column rank). Other scipy.stats densities and scipy.special functions are in distributions.py.

scipy.linalg's Cholesky factor and triangular solves are NumPy's, restricted to a triangle; written
out here, they differentiate and compile (numba has no SciPy) through the rules of np.linalg.cholesky,
np.linalg.solve, np.tril and np.triu. A caller's flags (`lower=True`) are constants when the code is
generated, so each `if` below is decided then. Parameters that only tune SciPy's own work
(`overwrite_a`, `check_finite`) are accepted and change nothing.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from s2sad.rules import distributions
from s2sad.runtime import stop_gradient


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    if lower:  # NumPy reads the lower triangle; SciPy reads the one it is asked for
        return np.linalg.cholesky(a)
    return np.linalg.cholesky(a.T).T


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    return cholesky(a, lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    if lower:
        factor = np.tril(c)
    else:
        factor = np.triu(c).T
    return np.linalg.solve(factor.T, np.linalg.solve(factor, b))


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    if unit_diagonal:
        raise NotImplementedError("s2sad: solve_triangular with unit_diagonal=True")
    if lower:
        triangle = np.tril(a)
    else:
        triangle = np.triu(a)
    if trans in (1, "T", "C"):
        triangle = triangle.T
    return np.linalg.solve(triangle, b)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True, assume_a=None,
          transposed=False):
    if transposed:
        return np.linalg.solve(a.T, b)
    return np.linalg.solve(a, b)


def inv(a, overwrite_a=False, check_finite=True):
    return np.linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    return np.linalg.det(a)


def matrix_power(a, n):
    """np.linalg.matrix_power with a constant `n`: unrolled by squaring (a negative `n` inverts first)."""
    if n < 0:
        return matrix_power(np.linalg.inv(a), -n)
    if n == 0:
        return np.eye(a.shape[0])
    if n == 1:
        return a
    half = matrix_power(a, n // 2)
    if n % 2 == 0:
        return half @ half
    return half @ half @ a


def multi_dot(arrays, out=None):
    if len(arrays) == 1:
        return arrays[0]
    return np.dot(multi_dot(arrays[:-1]), arrays[-1])


def append(arr, values, axis=None):
    """np.append: np.concatenate of the two, flattened first where no axis is given (values may be a list)."""
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(np.array(values))))
    return np.concatenate((arr, np.array(values)), axis=axis)


def interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp: the segment of `xp` that holds x, found by np.searchsorted, then the straight line between its
    ends. Beyond xp[0] and xp[-1] the position along the segment is clipped, so x there takes fp's first or last
    value (or `left`, `right`) and gets no gradient, as in NumPy."""
    if period is not None:
        raise NotImplementedError("s2sad: np.interp with period=")
    if np.ndim(x) > 1:  # numba gathers with 1-D index arrays
        return np.reshape(_interp_segments(np.ravel(x), xp, fp, left, right), np.shape(x))
    return _interp_segments(x, xp, fp, left, right)


def convolve(a, v, mode="full"):
    """np.convolve of two vectors: each item of one scales the other, shifted by its position, into the full
    result; 'same' and 'valid' are its middle, centred on the longer vector as NumPy centres them."""
    n = a.shape[0]
    m = v.shape[0]
    full = np.zeros(n + m - 1)
    for j in range(m):
        full[j:j + n] += v[j] * a
    if mode == "full":
        return full
    if mode == "same":
        start = (min(n, m) - 1) // 2
        return full[start:start + max(n, m)]
    if mode == "valid":
        return full[min(n, m) - 1:max(n, m)]
    raise ValueError("s2sad: np.convolve's mode is 'full', 'same' or 'valid'")


def correlate(a, v, mode="valid"):
    """np.correlate of two real vectors: the convolution with `v` reversed. NumPy correlates the longer with
    the shorter, then reverses the result: that decides where 'same' is centred."""
    if a.shape[0] < v.shape[0]:
        return convolve(v, a[::-1], mode)[::-1]
    return convolve(a, v[::-1], mode)


def softmax(x, axis=None):
    """scipy.special.softmax: the exponentials of x, shifted by its largest item, over their sum."""
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: x less the log of the sum of its exponentials, shifted by its largest item."""
    top = np.max(x, axis=axis, keepdims=True)
    return x - top - np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))


def cdist(XA, XB, metric="euclidean", out=None):
    """scipy.spatial.distance.cdist: the distance of each row of XA to each row of XB."""
    return _distances(XA[:, None, :] - XB[None, :, :], metric)


def pdist(X, metric="euclidean", out=None):
    """scipy.spatial.distance.pdist: the distance of each pair of rows i < j, in the order of np.triu_indices."""
    return _distances(X[:, None, :] - X[None, :, :], metric)[np.triu_indices(X.shape[0], 1)]


def squareform(X, force="no", checks=True):
    """scipy.spatial.distance.squareform: a condensed vector of pair distances written into both triangles of a
    square matrix with a zero diagonal; a square matrix read back into its condensed upper triangle."""
    if X.ndim == 1:
        n = int(np.ceil(np.sqrt(X.shape[0] * 2)))
        out = np.zeros((n, n))
        out[np.triu_indices(n, 1)] = X
        return out + out.T
    return X[np.triu_indices(X.shape[0], 1)]


def logsumexp_weighted(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp(a, b=b): the log of the sum of b * exp(a), each exponential shifted by a's largest
    item along the axes summed."""
    if return_sign:
        raise NotImplementedError("s2sad: scipy.special.logsumexp with return_sign=True")
    if axis is None and not keepdims:
        top = np.max(a)
        return np.log(np.sum(b * np.exp(a - top))) + top
    top = np.max(a, axis=axis, keepdims=True)
    total = np.log(np.sum(b * np.exp(a - top), axis=axis, keepdims=True)) + top
    if keepdims:
        return total
    return np.squeeze(total, axis=axis)


def _distances(differences, metric):
    if metric == "sqeuclidean":
        return np.sum(differences ** 2, axis=-1)
    if metric == "euclidean":
        return np.sqrt(np.sum(differences ** 2, axis=-1))
    if metric == "cityblock":
        return np.sum(np.abs(differences), axis=-1)
    raise NotImplementedError("s2sad: scipy's distances with metric 'euclidean', 'sqeuclidean' or 'cityblock'")


def _interp_segments(x, xp, fp, left, right):
    j = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, len(xp) - 2)
    x0 = xp[j]
    f0 = fp[j]
    t = np.clip((x - x0) / (xp[j + 1] - x0), 0.0, 1.0)
    y = f0 + t * (fp[j + 1] - f0)
    if left is not None:
        y = np.where(x < xp[0], left, y)
    if right is not None:
        y = np.where(x > xp[-1], right, y)
    return y


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nansum: nan items count as zero. Written with np.isnan, so that s2sad sees the function test for nan,
    and the zero cotangent of a nan item meets no 0 * nan on its way back."""
    if dtype is not None or out is not None:
        raise NotImplementedError("s2sad: np.nansum with dtype= or out=")
    return np.sum(np.where(np.isnan(a), 0.0, a), axis=axis, keepdims=keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nanmean: the mean of the items that are not nan."""
    if dtype is not None or out is not None:
        raise NotImplementedError("s2sad: np.nanmean with dtype= or out=")
    kept = ~np.isnan(a)
    return np.sum(np.where(kept, a, 0.0), axis=axis, keepdims=keepdims) / np.sum(kept, axis=axis, keepdims=keepdims)


def fabs(x):
    return np.abs(x)


def rad2deg(x):
    return x * (180.0 / np.pi)


def sinc(x):
    """np.sinc: sin(pi x) / (pi x), and 1 at 0 (where its slope is 0)."""
    z = np.pi * np.where(x == 0.0, 1.0, x)
    return np.where(x == 0.0, 1.0, np.sin(z) / z)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """np.trapezoid (np.trapz): the sum of the trapezoids between neighbours along `axis`."""
    y = np.moveaxis(y, axis, -1)
    mid = (y[..., 1:] + y[..., :-1]) * 0.5
    if x is None:
        return np.sum(mid, axis=-1) * dx
    if np.ndim(x) > 1:  # sample points for each item: along the same axis
        x = np.moveaxis(x, axis, -1)
    return np.sum(mid * np.diff(x), axis=-1)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross of 3-vectors along the last axis."""
    if axisa != -1 or axisb != -1 or axisc != -1 or axis is not None:
        raise NotImplementedError("s2sad: np.cross along an axis other than the last")
    a, b = np.asarray(a), np.asarray(b)  # a list, `np.cross([0, 0, 1], h)`, as NumPy takes it
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def polyval(p, x):
    """np.polyval by Horner's rule: p[0] is the highest power's coefficient."""
    y = p[0] + 0.0 * x
    for i in range(1, len(p)):
        y = y * x + p[i]
    return y


def sort(a, axis=-1, kind=None, order=None, stable=None):
    """np.sort: the items taken in np.argsort's order (their gradients go back to where each item came from); a
    matrix's rows one at a time (numba's np.argsort takes 1-D arrays), its columns as its transpose's rows."""
    if order is not None:
        raise NotImplementedError("s2sad: np.sort with order=")
    if axis is None:
        return _sorted(np.ravel(a))
    if np.ndim(a) > 2:
        raise NotImplementedError("s2sad: np.sort of an array of more than two axes")
    if np.ndim(a) == 2 and (axis == 0 or axis == -2):
        return _sorted(a.T).T
    return _sorted(a)


def _sorted(a):
    """A 1-D array sorted, or each row of a matrix."""
    if np.ndim(a) == 1:
        return a[np.argsort(a)]
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i][np.argsort(a[i])]
    return out


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, dtype=None):
    """np.cov: the centred rows' products, averaged over N - ddof observations (N - 1 unless bias or ddof say
    otherwise); with rowvar=False the columns are the variables."""
    if fweights is not None or aweights is not None or dtype is not None:
        raise NotImplementedError("s2sad: np.cov with fweights=, aweights= or dtype=")
    x = _variables_as_rows(m, rowvar)
    if y is not None:
        x = np.concatenate((x, _variables_as_rows(y, rowvar)), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    centred = x - np.mean(x, axis=1, keepdims=True)
    c = centred @ centred.T / (x.shape[1] - ddof)
    if np.ndim(m) == 1 and y is None:  # one variable: a number, as NumPy squeezes it
        return c[0, 0]
    if x.shape[0] == 1:  # NumPy's squeeze gives a number here, generated code compiles for one rank
        raise NotImplementedError("s2sad: np.cov of one variable in a 2-D array: pass it as a 1-D array")
    return c


def _variables_as_rows(m, rowvar):
    """np.cov's observations as a matrix with one variable per row (a 1-D array is one variable)."""
    x = np.atleast_2d(m)
    if not rowvar and np.ndim(m) == 2:
        return x.T
    return x


def corrcoef(x, y=None, rowvar=True, bias=None, ddof=None, dtype=None):
    """np.corrcoef: the covariance scaled by the standard deviations, clipped to [-1, 1] as NumPy clips it
    (bias and ddof have no effect, as in NumPy)."""
    if dtype is not None:
        raise NotImplementedError("s2sad: np.corrcoef with dtype=")
    c = cov(x, y, rowvar)
    if np.ndim(c) == 0:
        return c / c
    scale = np.sqrt(np.diag(c))
    return np.clip(c / scale[:, None] / scale[None, :], -1.0, 1.0)


def select(condlist, choicelist, default=0):
    """np.select: where several conditions hold, the first one's choice."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    return _selected(condlist, choicelist, default, 0)


def _selected(condlist, choicelist, default, k):
    """np.select from case k on (unrolled: k is a constant)."""
    if k == len(condlist):
        return default
    return np.where(condlist[k], choicelist[k], _selected(condlist, choicelist, default, k + 1))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """np.trace of any rank: the sum of the diagonal of axes axis1 and axis2 (the first two unless told), the other
    axes kept. A matrix's is np.trace itself; otherwise those axes move to the front, the offset's rows or columns
    are sliced off, and the square left is traced by np.einsum."""
    if out is not None:
        raise NotImplementedError("s2sad: np.trace with out=")
    if dtype is not None:
        a = a.astype(dtype)
    if np.ndim(a) == 2 and axis1 % 2 == 0 and axis2 % 2 == 1:
        return np.trace(a, offset)
    a = np.moveaxis(a, (axis1, axis2), (0, 1))
    if offset >= 0:
        a = a[:, offset:]
    else:
        a = a[-offset:]
    k = min(a.shape[0], a.shape[1])
    return np.einsum("ii...->...", a[:k, :k])


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    if axis is not None or out is not None or keepdims:
        raise NotImplementedError("s2sad: np.median with axis=, out= or keepdims=")
    s = sort(np.ravel(a))
    n = s.shape[0]
    return np.where(np.isnan(s[n - 1]), np.nan, 0.5 * (s[(n - 1) // 2] + s[n // 2]))  # nan sorts last


def ptp(a, axis=None, out=None, keepdims=False):
    if out is not None:
        raise NotImplementedError("s2sad: np.ptp with out=")
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    if returned:
        raise NotImplementedError("s2sad: np.average with returned=True")
    if weights is None:
        return np.mean(a, axis=axis, keepdims=keepdims)
    if axis is not None and np.ndim(weights) == 1 and np.ndim(a) > 1:
        raise NotImplementedError("s2sad: np.average with 1-D weights along one axis of a larger array")
    return np.sum(a * weights, axis=axis, keepdims=keepdims) / np.sum(weights * np.ones_like(a), axis=axis,
                                                                      keepdims=keepdims)


def take(a, indices, axis=None, out=None, mode="raise"):
    if out is not None or mode != "raise":
        raise NotImplementedError("s2sad: np.take with out= or mode=")
    if axis is None:
        return np.ravel(a)[indices]
    if np.ndim(indices) == 0:  # one index: the axis goes
        return np.moveaxis(a, axis, 0)[indices]
    return np.moveaxis(np.moveaxis(a, axis, 0)[indices], 0, axis)


def resize(a, new_shape):
    """np.resize: a's items in order, repeated as often as the new shape needs and cut to its size."""
    flat = np.ravel(a)
    size = np.empty(new_shape).size  # an int or a tuple
    return np.reshape(np.tile(flat, -(-size // flat.size))[:size], new_shape)


def pad_pairs(pad_width, ndim: int) -> tuple:
    """np.pad's pad_width (w, (w,), (before, after), or one of those per axis) as (before, after) per axis."""
    if isinstance(pad_width, int):
        return ((pad_width, pad_width),) * ndim
    if len(pad_width) == 1:
        return pad_pairs(pad_width[0], ndim)
    if isinstance(pad_width[0], int):
        return ((pad_width[0], pad_width[-1]),) * ndim
    if len(pad_width) != ndim:
        raise ValueError(f"np.pad: {len(pad_width)} pairs of widths for an array of {ndim} axes")
    return tuple(pad_pairs(pair, 1)[0] for pair in pad_width)


@functools.cache
def padded_in_mode(pairs: tuple, mode: str):
    """np.pad(array, pairs, mode) for 'edge', 'wrap', 'reflect' and 'symmetric': along each axis, a read of the
    items at the indices the mode repeats (np.take), so each padded item's adjoint adds into the item it copies."""
    axes = tuple((axis, before, after) for axis, (before, after) in enumerate(pairs))

    def pad(array):
        for axis, before, after in axes:
            array = np.take(array, _pad_indices(array.shape[axis], before, after, mode), axis=axis)
        return array
    return pad


def _pad_indices(n, before, after, mode):
    """The item each position of the padded axis copies: positions -before .. n + after - 1 of an axis of n."""
    i = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return i % n
    if mode == "reflect":  # mirrored about the first and last items, which are not repeated
        j = np.abs(i) % max(2 * n - 2, 1)  # one item: itself
        return np.where(j >= n, 2 * n - 2 - j, j)
    j = np.where(i < 0, -i - 1, i) % (2 * n)  # symmetric: the edge items repeated
    return np.where(j >= n, 2 * n - 1 - j, j)


def delete(arr, obj, axis=None):
    """np.delete of items of the flattened array (axis=None) or of a 1-D array: the kept items, read by
    index, as NumPy returns them (a new array)."""
    if axis is not None and not (axis in (0, -1) and np.ndim(arr) == 1):
        raise NotImplementedError("s2sad: np.delete along an axis of an array of more than one axis")
    a = np.ravel(arr)
    keep = np.ones(a.shape[0], dtype=np.bool_)
    keep[obj] = False  # an index, negative ones from the end, or an array of them, as in NumPy
    return a[keep]


def insert(arr, obj, values, axis=None):
    """np.insert of values before one index of the flattened array (axis=None) or of a 1-D array: a new
    array of arr's dtype, written in three parts (the values converted to that dtype, as in NumPy)."""
    if axis is not None and not (axis in (0, -1) and np.ndim(arr) == 1):
        raise NotImplementedError("s2sad: np.insert along an axis of an array of more than one axis")
    if np.ndim(obj) != 0:
        raise NotImplementedError("s2sad: np.insert at several indices")
    a = np.ravel(arr)
    n = a.shape[0]
    at = obj + n if obj < 0 else obj
    if at < 0 or at > n:
        raise IndexError("index is out of bounds for np.insert")
    added = np.ravel(np.atleast_1d(values))
    k = added.shape[0]
    out = np.empty(n + k, dtype=a.dtype)
    out[:at] = a[:at]
    out[at:at + k] = 0.5
    if k > 0 and out[at] != 0.5:  # arr holds ints or bools: the values are truncated to them, with no derivative
        added = stop_gradient(added)
    out[at:at + k] = added
    out[at + k:] = a[at:]
    return out


def flipud(m):
    return m[::-1]


def fliplr(m):
    return m[:, ::-1]


def rot90(m, k=1, axes=(0, 1)):
    """np.rot90 of the first two axes: k quarter turns counterclockwise."""
    if len(axes) != 2 or axes[0] != 0 or axes[1] != 1:
        raise NotImplementedError("s2sad: np.rot90 with axes other than (0, 1)")
    k = k % 4
    if k == 0:
        return m[:, :]
    if k == 1:
        return np.swapaxes(m, 0, 1)[::-1]
    if k == 2:
        return m[::-1, ::-1]
    return np.swapaxes(m[::-1], 0, 1)


def real(val):
    """Of real values, as s2sad differentiates them (np.conj is the identity likewise)."""
    return val


def imag(val):
    """Of real values: zeros."""
    return np.zeros_like(val)


def column_stack(tup):
    return np.concatenate([np.reshape(t, (-1, 1)) if np.ndim(t) == 1 else t for t in tup], axis=1)


def ediff1d(ary, to_end=None, to_begin=None):
    if to_end is not None or to_begin is not None:
        raise NotImplementedError("s2sad: np.ediff1d with to_end= or to_begin=")
    flat = np.ravel(ary)
    return flat[1:] - flat[:-1]


def nanmax(a, axis=None, out=None, keepdims=False):
    """np.nanmax: the max of the items that are not nan."""
    if out is not None:
        raise NotImplementedError("s2sad: np.nanmax with out=")
    return np.max(np.where(np.isnan(a), -np.inf, a), axis=axis, keepdims=keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    if out is not None:
        raise NotImplementedError("s2sad: np.nanmin with out=")
    return np.min(np.where(np.isnan(a), np.inf, a), axis=axis, keepdims=keepdims)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    """np.quantile of all items (NumPy's default method): the sorted items' values at position q * (n - 1),
    interpolated between the two neighbours."""
    if axis is not None or out is not None or keepdims or method != "linear" or np.ndim(q) != 0:
        raise NotImplementedError("s2sad: np.quantile of all items, method='linear', at a number q or a list of them")
    s = sort(np.ravel(a))
    at = q * (s.shape[0] - 1)
    below = int(np.floor(at))
    above = min(below + 1, s.shape[0] - 1)
    return np.where(np.isnan(s[-1]), np.nan, s[below] + (at - below) * (s[above] - s[below]))  # nan sorts last


def quantiles(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    """np.quantile of all items at each of several q (a list or tuple known when the code is generated)."""
    return np.array([quantile(a, p, axis, out, overwrite_input, method, keepdims) for p in q])


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    return quantile(a, q / 100.0, axis, out, overwrite_input, method, keepdims)


def percentiles(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    return quantiles(a, [p / 100.0 for p in q], axis, out, overwrite_input, method, keepdims)


AT_SEVERAL = {quantile: quantiles, percentile: percentiles}  # for q a list or tuple


def gradient(f, *varargs, axis=None, edge_order=1):
    """np.gradient of a 1-D array with a constant spacing: central differences inside, one-sided at the ends."""
    if np.ndim(f) != 1 or axis is not None or edge_order != 1 or len(varargs) > 1:
        raise NotImplementedError("s2sad: np.gradient of a 1-D array with one constant spacing")
    h = varargs[0] if len(varargs) == 1 else 1.0
    if np.ndim(h) != 0:
        raise NotImplementedError("s2sad: np.gradient with sample coordinates (an array) in place of a spacing")
    inner = (f[2:] - f[:-2]) / (2.0 * h)
    return np.concatenate((np.reshape((f[1] - f[0]) / h, (1,)), inner, np.reshape((f[-1] - f[-2]) / h, (1,))))


def meshgrid(x, y, indexing="xy"):
    """np.meshgrid of two 1-D arrays: each broadcast over the other's axis."""
    if indexing == "xy":
        return np.ones((y.shape[0], 1)) * x, np.reshape(y, (-1, 1)) * np.ones(x.shape[0])
    return np.reshape(x, (-1, 1)) * np.ones(y.shape[0]), np.ones((x.shape[0], 1)) * y


def vecdot(x1, x2, axis=-1):
    return np.sum(x1 * x2, axis=axis)


def vector_norm(x, axis=None, keepdims=False, ord=2):
    return np.linalg.norm(x if axis is not None else np.ravel(x), ord=ord, axis=axis, keepdims=keepdims)


def diagflat(v, k=0):
    return np.diag(np.ravel(v), k)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    if equal_nan:
        raise NotImplementedError("s2sad: np.isclose with equal_nan=True")
    return np.abs(a - b) <= atol + rtol * np.abs(b)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(np.all(isclose(a, b, rtol, atol, equal_nan)))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """np.nanvar: the variance of the items that are not nan."""
    if dtype is not None or out is not None:
        raise NotImplementedError("s2sad: np.nanvar with dtype= or out=")
    kept = ~np.isnan(a)
    mean = np.sum(np.where(kept, a, 0.0), axis=axis, keepdims=True) / np.sum(kept, axis=axis, keepdims=True)
    centered = np.where(kept, a - mean, 0.0)
    return np.sum(centered * centered, axis=axis, keepdims=keepdims) / (np.sum(kept, axis=axis, keepdims=keepdims)
                                                                          - ddof)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """np.nanstd; where the variance is 0 (one item), its derivative is 0, as np.std's rule makes it."""
    v = nanvar(a, axis, dtype, out, ddof, keepdims)
    positive = v > 0.0
    return np.where(positive, np.sqrt(np.where(positive, v, 1.0)), 0.0)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    if dtype is not None or out is not None:
        raise NotImplementedError("s2sad: np.nanprod with dtype= or out=")
    return np.prod(np.where(np.isnan(a), 1.0, a), axis=axis, keepdims=keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    if dtype is not None or out is not None:
        raise NotImplementedError("s2sad: np.nancumsum with dtype= or out=")
    return np.cumsum(np.where(np.isnan(a), 0.0, a), axis=axis)


def dstack(tup):
    return np.concatenate([np.reshape(t, (1, -1, 1)) if np.ndim(t) == 1 else
                           (np.reshape(t, t.shape + (1,)) if np.ndim(t) == 2 else t) for t in tup], axis=2)


def take_along_axis(arr, indices, axis=-1):
    """np.take_along_axis of a 1-D or 2-D array."""
    if np.ndim(arr) == 1:
        return arr[indices]
    if np.ndim(arr) != 2:
        raise NotImplementedError("s2sad: np.take_along_axis of an array of more than two axes")
    if axis in (1, -1):  # row by row: numba indexes with one array at a time
        out = np.empty(indices.shape)
        for i in range(indices.shape[0]):
            out[i] = arr[i][indices[i]]
        return out
    return take_along_axis(arr.T, indices.T, 1).T


def bincount(x, weights=None, minlength=0):
    """np.bincount of a 1-D array of non-negative ints: with weights, each weight added into its bin (a bin
    named again adds again, as np.add.at does, so a weight's adjoint is its bin's), float64 as in NumPy;
    without, the counts, ints with no derivative. max(x) + 1 bins, or minlength where that is more."""
    if np.ndim(x) != 1:
        raise ValueError("object too deep for desired array")
    n = minlength
    if x.shape[0] > 0:
        if np.min(x) < 0:
            raise ValueError("'list' argument must have no negative elements")
        n = max(np.max(x) + 1, minlength)
    if weights is None:
        counts = np.zeros(n, dtype=np.int64)
        for i in range(x.shape[0]):
            counts[x[i]] += 1
        return counts
    out = np.zeros(n)
    np.add.at(out, x, weights)
    return out


def angle(z, deg=False):
    """np.angle of real numbers: 0 or pi, a step whose derivative is zero."""
    half_turn = 180.0 if deg else np.pi
    return np.where(z < 0, half_turn, 0.0) + 0.0 * z


def norm_of_sums(x, ord, axis=None, keepdims=False):
    """np.linalg.norm of a matrix with ord 1 or -1 (the largest or smallest sum of a column's absolute values) or
    inf or -inf (of a row's)."""
    if ord == 1 or ord == -1:
        sums = np.sum(np.abs(x), axis=0, keepdims=keepdims)
    else:
        sums = np.sum(np.abs(x), axis=1, keepdims=keepdims)
    if ord > 0:
        return np.max(sums, keepdims=keepdims)
    return np.min(sums, keepdims=keepdims)


def matrix_norm(x, keepdims=False, ord="fro"):
    if ord != "fro":
        raise NotImplementedError("s2sad: np.linalg.matrix_norm other than ord='fro'")
    return np.sqrt(np.sum(x * x, axis=(-2, -1), keepdims=keepdims))


def poisson_logpmf(k, mu, loc=0):
    """scipy.stats.poisson.logpmf: k log(mu) - log(k!) - mu at the integers k >= 0, -inf elsewhere."""
    from scipy.special import gammaln, xlogy
    k = k - loc
    return np.where((k >= 0) & (k == np.floor(k)), xlogy(k, mu) - gammaln(k + 1.0) - mu, -np.inf)


def nbinom_logpmf(k, n, p, loc=0):
    """scipy.stats.nbinom.logpmf: log C(k + n - 1, k) + n log(p) + k log(1 - p) at the integers k >= 0."""
    from scipy.special import gammaln, xlogy
    k = k - loc
    value = gammaln(n + k) - gammaln(k + 1.0) - gammaln(n) + n * np.log(p) + xlogy(k, 1.0 - p)
    return np.where((k >= 0) & (k == np.floor(k)), value, -np.inf)


def gamma_logpdf(x, a, loc=0.0, scale=1.0):
    """scipy.stats.gamma.logpdf: (a - 1) log(y) - y - log(Gamma(a)) - log(scale), y = (x - loc) / scale >= 0."""
    from scipy.special import gammaln, xlogy
    y = (x - loc) / scale
    return np.where(y >= 0, xlogy(a - 1.0, y) - y - gammaln(a) - np.log(scale), -np.inf)


def gamma_pdf(x, a, loc=0.0, scale=1.0):
    return np.exp(gamma_logpdf(x, a, loc, scale))


def poisson_pmf(k, mu, loc=0):
    return np.exp(poisson_logpmf(k, mu, loc))


def nbinom_pmf(k, n, p, loc=0):
    return np.exp(nbinom_logpmf(k, n, p, loc))


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """np.apply_along_axis over a matrix's rows (axis 1) or columns (axis 0): func1d of each, stacked where the
    axis was, as NumPy places a result that is a vector."""
    if np.ndim(arr) != 2 or axis not in (0, 1, -1, -2):
        raise NotImplementedError("s2sad: np.apply_along_axis along axis 0 or 1 of a 2-D array")
    lines = arr if axis == 1 or axis == -1 else arr.T
    first = func1d(lines[0], *args, **kwargs)
    out = np.empty(lines.shape[0]) if np.ndim(first) == 0 else np.empty((lines.shape[0],) + first.shape)
    out[0] = first
    for i in range(1, lines.shape[0]):
        out[i] = func1d(lines[i], *args, **kwargs)
    return out if axis == 1 or axis == -1 else out.T


def lstsq(a, b, rcond=None):
    """The x minimizing |a x - b|, for a matrix of full column rank: the normal equations' solution, with
    NumPy's residuals (their squared sum per column of b), rank and singular values."""
    if a.shape[0] < a.shape[1]:
        raise NotImplementedError("s2sad: np.linalg.lstsq of a matrix with at least as many rows as columns")
    x = np.linalg.solve(a.T @ a, a.T @ b)
    r = a @ x - b
    residuals = np.array([np.sum(r * r)]) if np.ndim(b) == 1 else np.sum(r * r, axis=0)
    singular = np.sqrt(np.maximum(np.linalg.eigvalsh(a.T @ a), 0.0))[::-1]  # largest first, as NumPy's svd
    return x, residuals, np.linalg.matrix_rank(a), singular


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """nan, inf and -inf replaced (by default with 0 and the dtype's largest and smallest values); the other
    items pass through with their derivatives."""
    big = np.finfo(x.dtype).max if posinf is None else posinf
    small = -np.finfo(x.dtype).max if neginf is None else neginf
    return np.where(np.isnan(x), nan, np.where(x == np.inf, big, np.where(x == -np.inf, small, x)))


def fsum(seq):
    """math.fsum: the sum (a float's rounding aside, which has no derivative)."""
    return float(np.sum(np.asarray(seq)))


_SCIPY_LINALG = {f.__name__: f for f in (cholesky, cho_factor, cho_solve, solve_triangular, solve, inv, det)}
_SCIPY_WRITTEN = {("special", "softmax"): softmax, ("special", "log_softmax"): log_softmax,
                  ("spatial", "cdist"): cdist, ("spatial", "pdist"): pdist, ("spatial", "squareform"): squareform}
_SCIPY_STATS = {("poisson_gen", "logpmf"): poisson_logpmf, ("poisson_gen", "pmf"): poisson_pmf,
                ("nbinom_gen", "logpmf"): nbinom_logpmf, ("nbinom_gen", "pmf"): nbinom_pmf,
                ("gamma_gen", "logpdf"): gamma_logpdf, ("gamma_gen", "pdf"): gamma_pdf, **distributions.STATS}
_MATH = {math.fsum: fsum}
_NUMPY = {np.nan_to_num: nan_to_num, np.apply_along_axis: apply_along_axis, np.linalg.lstsq: lstsq,
          np.linalg.matrix_power: matrix_power, np.linalg.multi_dot: multi_dot, np.append: append, np.interp: interp,
          np.nansum: nansum, np.nanmean: nanmean, np.nanvar: nanvar, np.nanstd: nanstd, np.nanprod: nanprod,
          np.nancumsum: nancumsum, np.nanmax: nanmax, np.nanmin: nanmin, np.fabs: fabs, np.rad2deg: rad2deg,
          np.degrees: rad2deg, np.sinc: sinc, np.cross: cross, np.polyval: polyval, np.sort: sort, np.median: median,
          np.quantile: quantile, np.percentile: percentile, np.ptp: ptp, np.average: average, np.take: take,
          np.delete: delete, np.insert: insert, np.take_along_axis: take_along_axis, np.flipud: flipud,
          np.fliplr: fliplr, np.rot90: rot90, np.real: real, np.cov: cov, np.corrcoef: corrcoef, np.select: select,
          np.imag: imag, np.angle: angle, np.column_stack: column_stack, np.dstack: dstack, np.ediff1d: ediff1d,
          np.gradient: gradient, np.meshgrid: meshgrid, np.bincount: bincount, np.diagflat: diagflat,
          np.isclose: isclose, np.allclose: allclose, np.resize: resize, np.convolve: convolve,
          np.correlate: correlate}
# NumPy 2's spellings, where this NumPy has them (np.trapz is NumPy 1's)
_NUMPY.update({getattr(np, name, None): fn for name, fn in (("trapezoid", trapezoid), ("trapz", trapezoid),
                                                           ("vecdot", vecdot))})
_NUMPY.update({getattr(np.linalg, name, None): fn for name, fn in (("vector_norm", vector_norm),
                                                                  ("matrix_norm", matrix_norm))})
_NUMPY.pop(None, None)


_REDUCTIONS = {np.add: np.sum, np.multiply: np.prod, np.maximum: np.max, np.minimum: np.min, np.logical_and: np.all,
               np.logical_or: np.any}
_ACCUMULATIONS = {np.add: np.cumsum, np.multiply: np.cumprod}
_RUNNING = {np.maximum: np.maximum, np.minimum: np.minimum}


@functools.cache
def _reduce_of(ufunc):
    """`np.add.reduce(a)` and the other ufuncs' reduce: NumPy's reduction for that ufunc (np.sum, np.prod, np.max,
    ...) along axis 0 unless told. np.logaddexp.reduce is the log of the sum of exponentials, each shifted by the
    largest item."""
    if ufunc is np.logaddexp:
        def reduce(array, axis=0, keepdims=False):
            if axis is None:
                return reduce(np.ravel(array), 0, keepdims)
            top = np.max(array, axis=axis, keepdims=True)
            total = np.log(np.sum(np.exp(array - top), axis=axis, keepdims=True)) + top
            if keepdims:
                return total
            return np.squeeze(total, axis=axis)
        return reduce
    reduction = _REDUCTIONS[ufunc]

    def reduce(array, axis=0, keepdims=False):
        return reduction(array, axis=axis, keepdims=keepdims)
    return reduce


@functools.cache
def _accumulate_of(ufunc):
    """`np.add.accumulate(a)` is np.cumsum along axis 0 unless told, `np.multiply.accumulate` np.cumprod."""
    if ufunc in _RUNNING:
        return _running(_RUNNING[ufunc])
    accumulation = _ACCUMULATIONS[ufunc]

    def accumulate(array, axis=0):
        return accumulation(array, axis=axis)
    return accumulate


def _running(combine):
    """`np.maximum.accumulate(a)` (a drawdown's running peak) and np.minimum's: each row combined with the
    result so far, down axis 0."""
    def accumulate(array, axis=0):
        if axis != 0:
            raise NotImplementedError("s2sad: a running maximum or minimum along an axis other than 0")
        out = array.copy()
        for i in range(1, array.shape[0]):
            out[i] = combine(out[i - 1], array[i])
        return out
    return accumulate


@functools.cache
def _with_initial_or_where(reduction, identity, combine):
    """`np.sum(a, where=m, initial=v)` and the like: the items `where` leaves out count as the reduction's
    identity (NumPy asks max and min for `initial` there), and `initial` joins the result."""
    def reduce(a, axis=None, keepdims=False, initial=None, where=None):
        if where is not None:
            a = np.where(where, a, identity)
        result = reduction(a, axis=axis, keepdims=keepdims)
        if initial is None:
            return result
        return combine(result, initial)
    return reduce


def cholesky_upper(a, upper=False):
    """np.linalg.cholesky(a, upper=True): U with a = U^T U, read from a's upper triangle, is the lower factor of
    a's transpose, transposed."""
    if not upper:
        return np.linalg.cholesky(a)
    return np.swapaxes(np.linalg.cholesky(np.swapaxes(a, -1, -2)), -1, -2)


def mean_where(a, axis=None, keepdims=False, where=None):
    """np.mean(a, where=m): the sum of the items kept over their count."""
    kept = np.where(where, 1.0, 0.0) + 0.0 * a  # the mask broadcast to a's shape
    return np.sum(np.where(where, a, 0.0), axis=axis, keepdims=keepdims) / np.sum(kept, axis=axis, keepdims=keepdims)


def diff_with_ends(a, n=1, axis=-1, prepend=None, append=None):
    """np.diff(a, n, axis, prepend=p, append=q): the differences of `a` with p joined before it and q after it
    along `axis`, where a number stands for a slice of one item."""
    b = np.swapaxes(a, axis, -1)
    if prepend is not None:
        b = np.concatenate((_end_along(b, prepend, axis), b), axis=-1)
    if append is not None:
        b = np.concatenate((b, _end_along(b, append, axis)), axis=-1)
    return np.swapaxes(np.diff(b, n, axis=-1), axis, -1)


def _end_along(b, value, axis):
    """`value` as a slice to join to `b` (whose last axis is the user's `axis`); NumPy broadcasts a number."""
    if np.ndim(value) == 0:
        return np.zeros_like(b[..., :1]) + value
    return np.swapaxes(value, axis, -1)


_KEYWORD_STAND_INS = {np.sum: (np.sum, 0.0, np.add), np.prod: (np.prod, 1.0, np.multiply),
                      np.max: (np.max, -np.inf, np.maximum), np.min: (np.min, np.inf, np.minimum),
                      np.amax: (np.max, -np.inf, np.maximum), np.amin: (np.min, np.inf, np.minimum)}


@functools.cache
def _outer_of(ufunc):
    """`np.subtract.outer(a, b)` and the other two-operand ufuncs' outer: every item of `a` with every item of
    `b`, shaped a.shape + b.shape."""
    def outer(a, b):
        if np.ndim(a) == 0 or np.ndim(b) == 0:  # a number: every item with it is the ufunc itself
            return ufunc(a, b)
        return ufunc(np.ravel(a)[:, None], np.ravel(b)[None, :]).reshape(np.shape(a) + np.shape(b))
    return outer


def stand_in(fn, keywords: frozenset = frozenset()):
    """The function above that s2sad inlines for library function `fn` called with these keyword arguments,
    or None."""
    if isinstance(fn, np.ufunc) and fn is getattr(sys.modules.get("scipy.special"), fn.__name__, None):
        return distributions.SPECIAL.get(fn.__name__)  # scipy.special.log_ndtr
    ufunc = getattr(fn, "__self__", None)
    if isinstance(ufunc, np.ufunc):
        method = getattr(fn, "__name__", None)
        if method == "outer" and ufunc.nin == 2:
            return _outer_of(ufunc)
        if method == "reduce" and (ufunc in _REDUCTIONS or ufunc is np.logaddexp):
            return _reduce_of(ufunc)
        if method == "accumulate" and (ufunc in _ACCUMULATIONS or ufunc in _RUNNING):
            return _accumulate_of(ufunc)
    if fn is np.linalg.cholesky and "upper" in keywords:
        return cholesky_upper
    if fn is np.mean and "where" in keywords:
        return mean_where
    if fn is np.diff and keywords & {"prepend", "append"}:
        return diff_with_ends
    if keywords & {"initial", "where"} and _hashable(fn) and fn in _KEYWORD_STAND_INS:
        return _with_initial_or_where(*_KEYWORD_STAND_INS[fn])
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("scipy.linalg"):
        return _SCIPY_LINALG.get(getattr(fn, "__name__", None))
    if module.startswith("scipy.special") and getattr(fn, "__name__", None) == "logsumexp" and "b" in keywords:
        return logsumexp_weighted
    if module.startswith(("scipy.special", "scipy.spatial")):
        return _SCIPY_WRITTEN.get((module.split(".")[1], getattr(fn, "__name__", None)))
    if module == "math":
        return _MATH.get(fn)
    if module.startswith("scipy.stats"):  # a method of a distribution instance, `scipy.stats.poisson.logpmf`
        return _SCIPY_STATS.get((type(getattr(fn, "__self__", None)).__name__, getattr(fn, "__name__", None)))
    try:
        return _NUMPY.get(fn)
    except TypeError:  # not hashable
        return None


def written_out_distribution(obj) -> bool:
    """A scipy.stats distribution (`scipy.stats.t`) some of whose methods are written out here."""
    return any(type(obj).__name__ == owner for owner, _ in _SCIPY_STATS)


def _hashable(fn) -> bool:
    try:
        hash(fn)
    except TypeError:
        return False
    return True


def spelled() -> list[str]:
    """How users write the functions written out here, for the README's table of supported functions."""
    numpy = [f"np.{'linalg.' if fn.__module__.endswith('linalg') else ''}{fn.__name__}" for fn in _NUMPY]
    ufuncs = ["np.pad(..., mode='edge'/'wrap'/'reflect'/'symmetric')", "np.<ufunc>.outer", "np.add/multiply/maximum/minimum/logaddexp.reduce", "np.add/multiply/maximum/minimum.accumulate",
              "np.sum/prod/max/min(..., initial=, where=)",
              "np.mean(..., where=)", "np.linalg.cholesky(..., upper=True)", "scipy.special.logsumexp(..., b=)",
              "np.diff(..., prepend=, append=)"]
    stats = [f"scipy.stats.{owner[:-4]}.{method}" for owner, method in _SCIPY_STATS]
    written = [f"scipy.{'spatial.distance' if owner == 'spatial' else owner}.{name}" for owner, name in _SCIPY_WRITTEN]
    special = [f"scipy.special.{name}" for name in distributions.SPECIAL]
    return (sorted(numpy) + ufuncs + [f"scipy.linalg.{name}" for name in _SCIPY_LINALG] + stats + written + special
            + [f"math.{fn.__name__}" for fn in _MATH])

"""Boolean-mask indexing of arrays of two or more dimensions under numba (`x[x > 0]`, `y[m] = 0.0`).

numba indexes with a boolean array only when both are 1-D. These overloads add the case of a mask with
the array's own shape, which NumPy reads in C order whatever the layout; generated code then indexes
with masks as the user wrote them, and their adjoints (add_at, mask_last) take the same masks.
"""

import operator

import numpy as np
from numba import types
from numba.extending import overload, register_jitable


def _nd_mask(a, idx) -> bool:
    return (isinstance(a, types.Array) and isinstance(idx, types.Array) and isinstance(idx.dtype, types.Boolean)
            and a.ndim > 1 and idx.ndim == a.ndim)


@register_jitable
def _same_shape(a, idx):
    if a.shape != idx.shape:  # NumPy's IndexError; numba would read past the mask (np.diag_indices(3) of a 4x4 array)
        raise IndexError("boolean index did not match indexed array")


@overload(operator.getitem)
def _ol_mask_read(a, idx):
    if not _nd_mask(a, idx):
        return None

    def read(a, idx):
        _same_shape(a, idx)
        out = np.empty(np.count_nonzero(idx), a.dtype)
        k = 0
        for ix in np.ndindex(a.shape):
            if idx[ix]:
                out[k] = a[ix]
                k += 1
        return out
    return read


@overload(operator.setitem)
def _ol_mask_write(a, idx, v):
    if not _nd_mask(a, idx):
        return None
    if isinstance(v, types.Array):
        def write_each(a, idx, v):
            _same_shape(a, idx)
            k = 0
            for ix in np.ndindex(a.shape):
                if idx[ix]:
                    a[ix] = v[k]
                    k += 1
        return write_each

    def write_one(a, idx, v):
        _same_shape(a, idx)
        for ix in np.ndindex(a.shape):
            if idx[ix]:
                a[ix] = v
    return write_one

"""Array creation and shape queries (no derivative, but for np.linspace's endpoints)."""

import numpy as np

from s2sad.rules.registry import Check, defrule, nondiff
from s2sad.runtime import linspace_any, np_size, sum_reduce, unbroadcast

nondiff(np.shape, name="shape", shape_only=(0,), attribute=True)
nondiff(np.size, np_size, name="size", print_as="np_size", shape_only=(0,), int_result=True,
        attribute=True)  # numba lacks np.size(x, axis)
nondiff(np.ndim, name="ndim", shape_only=(0,), int_result=True, attribute=True)
nondiff(np.isscalar, name="isscalar", bool_result=True)
nondiff(np.any, name="any_true", bool_result=True)  # of floats too: `x.any()` tests, it has no derivative
nondiff(np.all, name="all_true", bool_result=True)
nondiff(len, name="len", shape_only=(0,), int_result=True)
nondiff(np.zeros, name="zeros", fills=0.0, shape_arg=0, dtype_from=())
nondiff(np.ones, name="ones", fills=1.0, shape_arg=0, dtype_from=())
nondiff(np.empty, name="empty", shape_arg=0, dtype_from=())
nondiff(np.zeros_like, name="zeros_like", shape_only=(0,), shaped_like=0, precision_of=0)
nondiff(np.ones_like, name="ones_like", shape_only=(0,), shaped_like=0, precision_of=0)
nondiff(np.empty_like, name="empty_like", shape_only=(0,), shaped_like=0, precision_of=0)
nondiff(np.arange, name="arange", dtype_from=(0, 1, 2))
nondiff(np.eye, name="eye", dtype_from=())
nondiff(np.identity, name="identity", dtype_from=())
nondiff(slice, name="slice")  # a slice object in an index generated code hands to add_at / mask_last
nondiff(np.diag_indices, name="diag_indices")  # as an index: lowered to a diagonal_mask (normalize/calls.py)
nondiff(np.diag_indices_from, name="diag_indices_from")
nondiff(np.triu_indices, name="triu_indices")  # as an index: lowered to a triangle_mask (normalize/calls.py)
nondiff(np.tril_indices, name="tril_indices")
nondiff(np.triu_indices_from, name="triu_indices_from")
nondiff(np.tril_indices_from, name="tril_indices_from")


def linspace_tangent(g, out, start, stop, num=50, endpoint=True):
    return linspace_any(g, 0.0, num, endpoint), linspace_any(0.0, g, num, endpoint), None, None


# linspace is linear in (start, stop): start + (stop - start) * t = linspace(start, 0) + linspace(0, stop)
@defrule(np.linspace, linspace_any, elementwise=False, print_as="linspace_any", tangent=linspace_tangent, dtype_from=(),
         checks=[Check("np.linspace(a, b, 5)", shapes=((),)),
                 Check("np.linspace(a, b, 4, endpoint=False)", shapes=((),)),
                 Check("np.linspace(a, 2.0, 1)", shapes=((),)), Check("np.linspace(-1.0, b)", shapes=((),))])
def linspace(g, out, start, stop, num=50, endpoint=True):
    g = unbroadcast(g, out)
    return (sum_reduce(g * linspace_any(1.0, 0.0, num, endpoint)),
            sum_reduce(g * linspace_any(0.0, 1.0, num, endpoint)), None, None)

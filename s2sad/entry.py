"""Entry functions: a call's checks, flattening and rebuilding, written out for one argument structure.

The general path of `grad(f)(*args)` binds the arguments, flattens pytrees, looks their structure
up, checks every differentiated leaf and the ranks the output check has seen, calls the compiled
code and rebuilds the gradients into the structure of the arguments: Python work paid on every
call, more the bigger the containers. A later call with the same containers (types, lengths, dict
keys), the same leaf types and the same array ranks passes the same checks, so after one call has
passed them an entry function written out for its structure only confirms that and calls the
compiled code:

    def entry(args):
        if len(args) != 3:
            return None
        a0, a1, a2, = args
        if type(a0) is not list or len(a0) != 2:
            return None
        v0 = a0[0]
        if type(v0) is not dict or len(v0) != 2:
            return None
        v1 = v0.get('W', MISSING)
        ...
        if type(v1) is not ndarray or v1.ndim != 2 or v1.dtype.char != 'd':
            return None
        ...
        try:
            res = compiled(v1, v2, v4, v5, a1, a2)
        except MemoryError:
            raise transform.tape_error() from None
        return [{'W': res[0], 'b': res[1]}, {'W': res[2], 'b': res[3]}]

None back means "not this structure": the caller takes the general path, which handles (and
explains) everything else.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from s2sad import hidden
from s2sad.backend import float32_results
from s2sad.tree import LEAF, PyTreeDef, builder_expression

_BY_IDENTITY = {float: "float", int: "int", bool: "bool", np.float64: "np.float64", np.float32: "np.float32",
                np.int64: "np.int64", np.int32: "np.int32", np.bool_: "np.bool_"}  # leaf types checked by `is`
_DIFFERENTIABLE = (float, np.float64, np.float32)


class _Unsupported(Exception):
    """A node or leaf the entry cannot check; the general path handles every call of this structure."""


def entry_function(transform: Any, leaves: tuple) -> Callable[[tuple], Any] | None:
    """An entry for calls shaped like the one whose flattened arguments are `leaves`, which passed
    every check of `transform` (a specialized _Reverse of grad or value_and_grad, its `what`); None
    where a node or a leaf needs the general path (a namedtuple, a registered class, an array
    subclass, a dict with non-string keys)."""
    fn = transform.compiled("wrapper") if transform.what == "grad" else transform.vjp_fn
    outside = transform.generated.fn.hidden
    seed = (1.0,) if transform.what == "value_and_grad" else ()
    single = float32_results(fn, tuple(leaves) + tuple(hidden.values(outside)) + seed)
    try:
        source = "\n".join(_entry_lines(transform, leaves, single))
    except _Unsupported:
        return None
    namespace = {"ndarray": np.ndarray, "np": np, "MISSING": object(), "compiled": fn,
                 "transform": transform, "outside": lambda: hidden.values(outside)}
    exec(compile(source, f"<s2sad entry for {transform.fun.__name__}>", "exec"), namespace)  # noqa: S102
    return namespace["entry"]


def _entry_lines(transform: Any, leaves: tuple, single: tuple[int, ...] = ()) -> list[str]:
    """The entry's lines; `single`: the positions of the compiled result that numba types float32, which
    the entry gives back as np.float32 (numba returns Python floats)."""
    defs = transform.defs or (LEAF,) * len(leaves)
    differentiated = set(transform.flat_argnums)
    params = [f"a{i}" for i in range(len(defs))]
    body = [f"if len(args) != {len(defs)}:", "    return None", f"{''.join(p + ', ' for p in params)}= args"]
    leaf_vars: list[str] = []
    fresh = (f"v{k}" for k in range(10**9))
    for name, treedef in zip(params, defs):
        _unpack(name, treedef, body, leaf_vars, fresh)
    by_shape = transform.kinds is not None and transform.generated.fn.fixes_unit_axes
    for i, (var, value) in enumerate(zip(leaf_vars, leaves)):
        body += [f"if {_leaf_differs(var, value, i in differentiated, by_shape)}:", "    return None"]
    call = ", ".join(leaf_vars + (["*outside()"] if transform.generated.fn.hidden else []))
    n = len(transform.flat_argnums)
    if transform.what == "grad":
        body += ["try:", f"    res = compiled({call})", "except MemoryError:",
                 "    raise transform.tape_error() from None"]
        outputs = [f"res[{k}]" for k in range(n)] if n > 1 else ["res"]
        outputs = [f"np.float32({out})" if k in single else out for k, out in enumerate(outputs)]
    elif transform.what == "value_and_grad":
        body += ["try:", f"    res = compiled({call}, 1.0)", "except MemoryError:",
                 "    raise transform.tape_error() from None", "except Exception:",
                 f"    transform.check_output(({call},))", "    raise", "transform.check_scalar(res[0])"]
        outputs = [f"np.float32(res[{k}])" if k in single else f"res[{k}]" for k in range(1, n + 1)]
    else:
        raise _Unsupported(transform.what)  # vjp, hessian, ...: the general path
    grads = _rebuilt(transform, defs, outputs)
    value = "np.float32(res[0])" if 0 in single else "res[0]"
    body.append(f"return {grads}" if transform.what == "grad" else f"return {value}, {grads}")
    return ["def entry(args):", *("    " + line for line in body)]


def _unpack(var: str, treedef: PyTreeDef, body: list[str], leaf_vars: list[str], fresh) -> None:
    """Lines checking that `var` has the node types, lengths and keys of `treedef`, naming its leaves."""
    if treedef.kind == "leaf":
        leaf_vars.append(var)
        return
    if treedef.kind == "none":
        body += [f"if {var} is not None:", "    return None"]
        return
    if treedef.kind == "str":
        body += [f"if {var} != {treedef.aux!r}:", "    return None"]
        return
    if treedef.kind in ("list", "tuple"):
        items = [f"{var}[{j}]" for j in range(len(treedef.children))]
    elif treedef.kind == "dict" and all(type(k) is str for k in treedef.aux):
        items = [f"{var}.get({k!r}, MISSING)" for k in treedef.aux]  # MISSING fails the child's own check
    else:
        raise _Unsupported(treedef.kind)
    body += [f"if type({var}) is not {treedef.kind} or len({var}) != {len(items)}:", "    return None"]
    for item, child in zip(items, treedef.children):
        name = next(fresh)
        body.append(f"{name} = {item}")
        _unpack(name, child, body, leaf_vars, fresh)


def _leaf_differs(var: str, value: Any, differentiated: bool, by_shape: bool = False) -> str:
    """A test true when `var` is not a leaf of `value`'s type (an array's rank and dtype too: the dtype
    picks the compiled code, and so which results are float32) that passes the same checks; `by_shape`:
    nor one whose axes of length one are the same (the code `np.squeeze` removes them from)."""
    kind = type(value)
    if kind is np.ndarray:
        test = f"type({var}) is not ndarray or {var}.ndim != {value.ndim}"
        if by_shape:
            test += "".join(f" or ({var}.shape[{k}] == 1) is not {n == 1}" for k, n in enumerate(value.shape))
        return test + f" or {var}.dtype.char != {value.dtype.char!r}"
    if kind not in _BY_IDENTITY or (differentiated and kind not in _DIFFERENTIABLE):
        raise _Unsupported(kind.__name__)
    return f"type({var}) is not {_BY_IDENTITY[kind]}"


def _rebuilt(transform: Any, defs: tuple, outputs: list[str]) -> str:
    """The gradients `outputs` (one per differentiated leaf) rebuilt into the structure of each argnum."""
    parts, k = [], 0
    for i in transform.argnums:
        count = defs[i].num_leaves
        part = builder_expression(defs[i], iter(outputs[k:k + count]))
        if part is None:
            raise _Unsupported(repr(defs[i]))
        parts.append(part)
        k += count
    return parts[0] if transform.single else "(" + "".join(p + ", " for p in parts) + ")"

"""Fused elementwise expressions as explicit loops: how numba runs a generated line like
`Lx = Qdiags_expanded * xcentered + einsum2`.

numba compiles an array expression to a loop nest that checks broadcasting per axis and element:
over GMM's (n, K, 2) arrays that costs several times a flat loop. Here the walk is planned
once per call (`ewise_plan`: the fewest axes that step together, as `core.merged_axes` merges
them, with one flat offset per operand) and the expression runs as one plain loop per run of
the last axis (`ewise`).

Generated source never spells these calls: `codegen.lower` rewrites the compiled text, line for
line, so `s2sad show` and the files on disk keep the readable source:

    Lx = Qdiags_expanded * xcentered + einsum2
    -> Lx = ewise('_0 * _1 + _2', ewise_plan(Qdiags_expanded, xcentered, einsum2), Qdiags_expanded, ...)
    x_bar += unbroadcast(g * w, x_bar)
    -> x_bar = ewise_into_finish(x_bar, ewise_into('_0 * _1', ewise_into_plan(x_bar, g, w), g, w))
    Q_bar = unbroadcast(g * xc, Q)
    -> Q_bar = ewise_sum('_0 * _1', ewise_sum_plan(Q, g, xc), Q, g, xc)

A target of size 1 along an axis the operands run along (x_bar of shape (1, K, d) under (n, K, d)
operands) adds each element where it lands: the sum builds up in one pass, without the full-size
value that `unbroadcast` would sum down.

The plan depends only on the operands' types, so numba compiles it once per process and kind of
call; only the loop is compiled per expression, and it calls nothing (a compiled callee is
optimized again inside every caller, so a plan in each expression's loop would add its compile
to each). Operands other than float64 arrays and real scalars, and expressions of at most 1-d
arrays (numba's own loop is as fast there), get the expression as written: results never
differ from the line as written.
"""

from __future__ import annotations

import ast

import numpy as np
from numba import njit, types
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload
from numba.np.arrayobj import make_array, populate_array
from numba.np.unsafe.ndarray import to_fixed_tuple

from s2sad.runtime.core import merged_axes_rows, unbroadcast

__all__ = ["ewise", "ewise_plan", "ewise_into", "ewise_into_plan", "ewise_into_finish", "ewise_sum",
           "ewise_sum_plan"]

MAX_OPERANDS = 8  # codegen.lower leaves an expression of more names as written
SHORT_AXIS = 8  # a last axis shorter than this trades places with the longest (`_merge`): each run costs a loop
_PARAMS = ", ".join(f"_{i}=None" for i in range(MAX_OPERANDS))


# ---------------------------------------------------------------- uncompiled (backend="python")

def ewise_plan(_0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    """How `ewise` walks these operands (compiled); None uncompiled, where NumPy does the work."""
    return None


def ewise(template: str, plan, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    """`template` evaluated on the operands named in it (_0, _1, ...), with NumPy broadcasting."""
    names = {"_0": _0, "_1": _1, "_2": _2, "_3": _3, "_4": _4, "_5": _5, "_6": _6, "_7": _7}
    return eval(template, {"np": np}, names)


def ewise_into_plan(target, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    """How `ewise_into` adds into `target` (compiled); None uncompiled."""
    return None


def ewise_into(template: str, plan, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    """(whether `template` was added into the plan's target in place, what is left to add).
    Uncompiled: (False, the value of `template`)."""
    return False, ewise(template, plan, _0, _1, _2, _3, _4, _5, _6, _7)


def ewise_into_finish(target, done):
    """`target += unbroadcast(value, target)` for `done` = (in place already, value) from `ewise_into`."""
    added, value = done
    if isinstance(target, np.ndarray):
        if not added:
            target += unbroadcast(value, target)
        return target
    return target + unbroadcast(value, target)


def ewise_sum_plan(like, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    """How `ewise_sum` sums into a new array shaped like `like` (compiled); None uncompiled."""
    return None


def ewise_sum(template: str, plan, like, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    """`unbroadcast(template, like)`: compiled, the sum builds up in one pass, without the full-size value."""
    return unbroadcast(ewise(template, plan, _0, _1, _2, _3, _4, _5, _6, _7), like)


# ---------------------------------------------------------------- compiled: plans (shared)

# The plans and the finishing add are inlined into the generated function: compiled on their own,
# each kind of call would optimize its callees (_walk, unbroadcast, ...) once more, a compile each.
@overload(ewise_plan, inline="always")
def _ol_ewise_plan(_0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    ndims = _loop_ndims(_given(_0, _1, _2, _3, _4, _5, _6, _7))
    if ndims is None:
        return _compiled(f"def impl({_PARAMS}):\n    return None\n")
    arrays = [(f"_{i}", k) for i, k in enumerate(ndims) if k is not None]
    nd = max(k for _, k in arrays)
    return _compiled(f"def impl({_PARAMS}):\n"
                     f"{_walk_call(arrays, nd, 'False, True')}\n"
                     f"    result = np.empty(to_fixed_tuple(ext, {nd}))\n"
                     f"    return at, inner, step, result, _contiguous_view(result), {_views(arrays)}\n")


@overload(ewise_into_plan, inline="always")
def _ol_ewise_into_plan(target, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    arrays = _arrays_into(target, (_0, _1, _2, _3, _4, _5, _6, _7))
    if arrays is None:
        return _compiled(f"def impl(target, {_PARAMS}):\n    return None\n")
    nd = target.ndim
    walk = _walk_call(arrays + [("target", nd)], nd, "True, target.flags.c_contiguous")
    return _compiled(f"def impl(target, {_PARAMS}):\n"  # straight-line code: inlined (numba's SSA check warns else)
                     f"{walk}\n"
                     f"    fresh = np.zeros(to_fixed_tuple(_fresh_shape(ext, in_place), {nd}))  # empty when in place\n"
                     f"    out = _pick(in_place, _contiguous_view(target), _contiguous_view(fresh))\n"
                     f"    return at, inner, step, fresh, out, {_views(arrays)}, in_place\n")


@overload(ewise_sum_plan, inline="always")
def _ol_ewise_sum_plan(like, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    arrays = _arrays_into(like, (_0, _1, _2, _3, _4, _5, _6, _7))
    if arrays is None:
        return _compiled(f"def impl(like, {_PARAMS}):\n    return None\n")
    nd = like.ndim
    return _compiled(f"def impl(like, {_PARAMS}):\n"
                     f"    result = np.empty(like.shape)\n"
                     f"{_walk_call(arrays + [('result', nd)], nd, 'True, True')}\n"
                     f"    sums = _sums_into(walk_of)\n"
                     f"    out = _contiguous_view(result)\n"
                     f"    _zero_if(out, sums)\n"
                     f"    return at, inner, step, result, out, {_views(arrays)}, sums\n")


def _arrays_into(target, operands):
    """(name, ndim) of each array operand when the loop can write into a float64 array shaped like
    `target` (2 or more dimensions, none fewer than an operand's); None where the expression stays
    as written."""
    ndims = _loop_ndims(_given(*operands))
    if ndims is None or not _fast_array(target) or target.ndim < 2 or any((k or 0) > target.ndim for k in ndims):
        return None
    return [(f"_{i}", k) for i, k in enumerate(ndims) if k is not None]


def _walk_call(arrays: list, nd: int, flags: str) -> str:
    """Statements filling `walk_of`: per (name, ndim) array a row of its shape and byte strides
    (padded to nd axes) and its data address; then `_walk` on it. Rows in an array, not tuples:
    `_walk` is compiled once per process, not once per number and rank of operands."""
    lines = [f"    walk_of = np.empty(({len(arrays)}, {2 * nd + 1}), np.int64)"]
    for row, (name, k) in enumerate(arrays):
        for j in range(nd):
            axis = j - (nd - k)
            lines.append(f"    walk_of[{row}, {j}] = {f'{name}.shape[{axis}]' if axis >= 0 else 1}")
            lines.append(f"    walk_of[{row}, {nd + j}] = {f'{name}.strides[{axis}]' if axis >= 0 else 0}")
        lines.append(f"    walk_of[{row}, {2 * nd}] = {name}.ctypes.data")
    lines.append(f"    ext, at, inner, step, lo, length, in_place = _walk(walk_of, {flags})")
    return "\n".join(lines)


def _views(arrays: list) -> str:
    return "(" + "".join(f"_view({name}, lo[{row}], length[{row}]), " for row, (name, _) in enumerate(arrays)) + ")"


@overload(ewise_into_finish)
def _ol_ewise_into_finish(target, done):
    if not isinstance(target, types.Array):
        return lambda target, done: target + unbroadcast(done[1], target)

    def impl(target, done):
        if not done[0]:
            target += unbroadcast(done[1], target)
        return target

    return impl


@njit
def _sums_into(walk_of) -> bool:
    """Whether the last row (a result shaped like `like`) sums over an axis of the others' broadcast;
    raises as unbroadcast does where it is larger than the operands' broadcast along an axis."""
    k, nd = walk_of.shape[0] - 1, (walk_of.shape[1] - 1) // 2
    sums = False
    for j in range(nd):
        along = 1  # the operands' broadcast along axis j (0 where one is empty)
        for i in range(k):
            if walk_of[i, j] != 1:
                along = walk_of[i, j]
        if walk_of[k, j] != along:
            if walk_of[k, j] != 1:
                raise ValueError("unbroadcast: shapes are not broadcast-compatible")
            sums = True
    return sums


@njit
def _zero_if(flat, condition):
    if condition:
        flat[:] = 0.0


# ---------------------------------------------------------------- compiled: loops (per expression)

def _straight_line(expr, caller_info, callee_info) -> bool:
    """Inline the expression as written (no loop) where it is called, as it was before lowering."""
    return len(callee_info.func_ir.blocks) == 1


@overload(ewise, prefer_literal=True, inline=_straight_line)
def _ol_ewise(template, plan, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    return _expression(template, plan, (_0, _1, _2, _3, _4, _5, _6, _7), "=", "plan[3]", "{}")


@overload(ewise_into, prefer_literal=True, inline=_straight_line)
def _ol_ewise_into(template, plan, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    return _expression(template, plan, (_0, _1, _2, _3, _4, _5, _6, _7), "+=", "plan[6], plan[3]", "False, {}")


@overload(ewise_sum, prefer_literal=True, inline=_straight_line)
def _ol_ewise_sum(template, plan, like, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None):
    text = _template_text(template)
    if isinstance(plan, types.NoneType):
        return _compiled(f"def impl(template, plan, like, {_PARAMS}):\n    return unbroadcast({text}, like)\n")
    return _compiled(_sum_source(text, _loop_ndims(_given(_0, _1, _2, _3, _4, _5, _6, _7))))


def _expression(template, plan, operands, assign: str, result: str, as_written: str):
    """The implementation: the expression as written where there is no plan, else its loop."""
    text = _template_text(template)
    if isinstance(plan, types.NoneType):
        return _compiled(f"def impl(template, plan, {_PARAMS}):\n    return {as_written.format(text)}\n")
    return _compiled(_loop_source(text, _loop_ndims(_given(*operands)), assign, result))


def _loop_source(text: str, ndims: list, assign: str, result: str) -> str:
    """The loop of `text` over the plan's runs: out[each element] (assign) text at its operands."""
    setup, runs = _loop_head(ndims, into=assign == "+=")
    element = _element_text(text, ndims)
    return "\n".join(setup + runs + _runs(element, assign, "        ") + [f"    return {result}"]) + "\n"


def _sum_source(text: str, ndims: list) -> str:
    """ewise_sum's loop: added into the zeroed result where it sums along an axis, else set."""
    setup, runs = _loop_head(ndims, into=True, like=True)
    element = _element_text(text, ndims)
    nested = ["    " + line for line in runs]
    return "\n".join(setup + ["    if plan[6]:  # sums along some axis"] + nested + _runs(element, "+=", " " * 12)
                     + ["    else:"] + nested + _runs(element, "=", " " * 12) + ["    return plan[3]"]) + "\n"


def _loop_head(ndims: list, into: bool, like: bool = False) -> tuple[list[str], list[str]]:
    """(lines that unpack the plan, lines that start the loop over runs)."""
    arrays = [i for i, k in enumerate(ndims) if k is not None]
    rows = len(arrays) + 2 if into else len(arrays) + 1  # into: the target has a row too
    setup = [f"def impl(template, plan, {'like, ' if like else ''}{_PARAMS}):",
             "    at, inner, step, out = plan[0], plan[1], plan[2], plan[4]"]
    setup += [f"    f{i} = plan[5][{row}]" for row, i in enumerate(arrays)]
    setup += [f"    t{i} = step[{row}]" for row, i in enumerate(arrays)]
    setup.append(f"    to = step[{rows - 1}]")
    runs = ["    for r in range(at.shape[1]):"]
    runs += [f"        o{i} = at[{row}, r]" for row, i in enumerate(arrays)]
    runs.append(f"        oo = at[{rows - 1}, r]")
    return setup, runs


def _runs(element: str, assign: str, ind: str) -> list[str]:
    """The loop over one run: out[each element] (assign) element."""
    lines = [f"{ind}if to == 1:  # the result's run is contiguous: stores stay vectorizable",
             f"{ind}    for j in range(inner):",
             f"{ind}        out[oo + j] {assign} {element}"]
    if assign == "+=":  # into a target that sums along the run: one add per run
        lines += [f"{ind}elif to == 0:",
                  f"{ind}    acc = 0.0",
                  f"{ind}    for j in range(inner):",
                  f"{ind}        acc += {element}",
                  f"{ind}    out[oo] += acc"]
    return lines + [f"{ind}else:",
                    f"{ind}    for j in range(inner):",
                    f"{ind}        out[oo + j * to] {assign} {element}"]


def _element_text(text: str, ndims: list) -> str:
    """`text` with each array operand _i read at its current element."""

    class Elements(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id.startswith("_") and node.id[1:].isdigit() and ndims[int(node.id[1:])] is not None:
                i = node.id[1:]
                return ast.parse(f"f{i}[o{i} + j * t{i}]", mode="eval").body
            return node

    return ast.unparse(Elements().visit(ast.parse(text, mode="eval")))


# ---------------------------------------------------------------- typing helpers

def _template_text(template) -> str:
    if not isinstance(template, types.StringLiteral):
        raise TypingError("ewise: the template must be a string literal")
    text = template.literal_value
    ast.parse(text, mode="eval")  # written by codegen.lower; a bad one should fail here, loudly
    return text


def _given(*operand_types):
    return [t for t in operand_types if not (t is None or isinstance(t, (types.Omitted, types.NoneType)))]


def _fast_array(t) -> bool:
    return isinstance(t, types.Array) and t.dtype == types.float64 and t.ndim > 0


def _loop_ndims(operands):
    """Per operand: its ndim (a float64 array) or None (a real scalar); None for the whole when the
    expression stays as written (another operand type, or no array of 2 or more dimensions)."""
    ndims = []
    for t in operands:
        if _fast_array(t):
            ndims.append(t.ndim)
        elif isinstance(t, (types.Integer, types.Float, types.Boolean)):
            ndims.append(None)
        else:
            return None
    return ndims if max((k or 0) for k in ndims) >= 2 else None


def _compiled(source: str):
    namespace = {"np": np, "to_fixed_tuple": to_fixed_tuple, "_walk": _walk, "_view": _view, "_pick": _pick,
                 "_contiguous_view": _contiguous_view, "_fresh_shape": _fresh_shape, "unbroadcast": unbroadcast,
                 "_sums_into": _sums_into, "_zero_if": _zero_if}
    exec(source, namespace)
    return namespace["impl"]


# ---------------------------------------------------------------- compiled helpers

@njit
def _walk(walk_of, into, target_contiguous):
    """How to walk the broadcast of k arrays, given per array (a row of `walk_of`) its shape and byte
    strides (nd each, leading axes padded) and its data address; with `into`, the last row is the
    target added into.

    Returns (result extents, where each run of the last merged axis starts for every array and the
    result, the run length, each one's stride along a run, each array's lowest element as an offset
    from its first (<= 0: negative strides), how many elements its memory spans, and whether the
    result can add into the target in place). Offsets count from each array's lowest element, in
    unsigned arithmetic: a negative stride wraps around and lands right."""
    k, nd = walk_of.shape[0], (walk_of.shape[1] - 1) // 2
    ext = np.ones(nd, np.int64)
    for i in range(k):
        for j in range(nd):
            ext[j] = _broadcast(ext[j], walk_of[i, j])
    st = np.zeros((k + 1, nd), np.int64)  # element strides, 0 along broadcast axes
    lo = np.zeros(k, np.int64)
    length = np.zeros(k, np.int64)
    for i in range(k):
        hi, empty = 0, False
        for j in range(nd):
            empty |= walk_of[i, j] == 0
            if walk_of[i, j] != 1:
                st[i, j] = walk_of[i, nd + j] // 8
                reach = (walk_of[i, j] - 1) * st[i, j]
                lo[i] += min(reach, 0)
                hi += max(reach, 0)
        length[i] = 0 if empty else hi - lo[i] + 1
    # In place, a target of size 1 along an axis the operands run along sums over it (unbroadcast):
    # then no operand may share its memory, not even element for element.
    sums = into and not _fits(ext, walk_of[k - 1, :nd])
    in_place = into and target_contiguous and not _clashes(st, lo, length, walk_of[:, 2 * nd], sums)
    shape = walk_of[k - 1, :nd] if in_place else ext
    step = 1
    for j in range(nd - 1, -1, -1):
        st[k, j] = step if shape[j] != 1 else 0
        step *= shape[j]
    E, S, m = _merge(ext, st)
    at = _run_offsets(E, S, m)
    for i in range(k):
        for r in range(at.shape[1]):
            at[i, r] += np.uint64(-lo[i])
    return ext, at, np.uint64(E[m - 1]), S[:, m - 1].astype(np.uint64), lo, length, in_place


@njit
def _fresh_shape(ext, in_place):
    """The extents of the array a result goes to first when it cannot add in place (none when it can)."""
    return ext * 0 if in_place else ext


@njit
def _fits(ext, shape) -> bool:
    for j in range(ext.size):
        if ext[j] != shape[j]:
            return False
    return True


@njit
def _clashes(st, lo, length, addresses, strict) -> bool:
    """Does an operand's memory overlap the target's (the last array) other than element for element
    (strict: at all)?"""
    t = addresses.size - 1
    t_lo = addresses[t] + 8 * lo[t]
    t_hi = t_lo + 8 * length[t]
    for i in range(t):
        a_lo = addresses[i] + 8 * lo[i]
        a_hi = a_lo + 8 * length[i]
        if length[i] == 0 or length[t] == 0 or a_hi <= t_lo or t_hi <= a_lo:
            continue
        same = addresses[i] == addresses[t]
        for j in range(st.shape[1]):
            same &= st[i, j] == st[t, j]
        if strict or not same:
            return True
    return False


@njit
def _broadcast(current, extent):
    """The result's extent on an axis after an operand of `extent` joins it."""
    if extent == 1:
        return current
    if current != 1 and current != extent:
        raise ValueError("operands could not be broadcast together")
    return extent


@njit
def _merge(ext, st):
    """`core.merged_axes_rows`, then a short last axis trades places with the longest: runs of 2 cost
    a loop each, and the elements are independent, so any order gives the same result."""
    E, S, m = merged_axes_rows(ext, st)
    longest = 0
    for d in range(m):
        if E[d] > E[longest]:
            longest = d
    if E[m - 1] < SHORT_AXIS and longest != m - 1:
        E[m - 1], E[longest] = E[longest], E[m - 1]
        for r in range(S.shape[0]):
            S[r, m - 1], S[r, longest] = S[r, longest], S[r, m - 1]
    return E, S, m


@njit
def _run_offsets(E, S, m):
    """Per row of `S`: the offset where each run of the last of the `m` merged axes starts, C order.

    Unsigned, and kept apart from the loop over elements: with signed offsets, or offsets advanced
    in that loop (an index per axis), LLVM does not vectorize it."""
    rows = S.shape[0]
    runs = 1
    for d in range(m - 1):
        runs *= E[d]
    at = np.zeros((rows, runs), np.uint64)  # unsigned: indexing skips the negative-index check
    if m <= 2:  # multiples of one stride: no index per axis
        for k in range(rows):
            for r in range(runs):
                at[k, r] = r * S[k, 0]
        return at
    idx = np.zeros(m - 1, np.int64)
    for r in range(1, runs):
        d = m - 2
        for k in range(rows):
            at[k, r] = at[k, r - 1]
        while d >= 0:
            idx[d] += 1
            for k in range(rows):
                at[k, r] += S[k, d]
            if idx[d] < E[d]:
                break
            for k in range(rows):
                at[k, r] -= S[k, d] * E[d]
            idx[d] = 0
            d -= 1
    return at


@intrinsic
def _contiguous_view(typingctx, a):
    """A 1-d C array over `a`'s memory (only meaningful where `a` is C-contiguous)."""
    result = types.Array(a.dtype, 1, "C")

    def codegen(context, builder, signature, args):
        source = make_array(signature.args[0])(context, builder, args[0])
        view = make_array(result)(context, builder)
        populate_array(view, data=source.data, shape=[source.nitems], strides=[source.itemsize],
                       itemsize=source.itemsize, meminfo=source.meminfo, parent=source.parent)
        return impl_ret_borrowed(context, builder, result, view._getvalue())

    return result(a), codegen


@intrinsic
def _view(typingctx, a, lo, length):
    """1-d C array of `length` elements of `a`'s memory, from `lo` elements before its first one."""
    result = types.Array(a.dtype, 1, "C")

    def codegen(context, builder, signature, args):
        source = make_array(signature.args[0])(context, builder, args[0])
        view = make_array(result)(context, builder)
        populate_array(view, data=builder.gep(source.data, [args[1]]), shape=[args[2]], strides=[source.itemsize],
                       itemsize=source.itemsize, meminfo=source.meminfo, parent=source.parent)
        return impl_ret_borrowed(context, builder, result, view._getvalue())

    return result(a, types.int64, types.int64), codegen


@intrinsic
def _pick(typingctx, condition, a, b):
    """`a` if condition else `b` (two arrays of one type), without a branch: callers stay one block."""

    def codegen(context, builder, signature, args):
        chosen = builder.select(args[0], args[1], args[2])
        return impl_ret_borrowed(context, builder, signature.return_type, chosen)

    return a(types.boolean, a, b), codegen

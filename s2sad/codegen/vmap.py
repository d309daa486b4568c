"""vmap: batch a function by generating the loop over the batch, not by a batching interpreter.

The module holds the per-example function (the lowered primal of whatever is batched, e.g. a
generated gradient) and a batch function that calls it once per example:

    def f_batched(x, w):
        n = len(x)
        first = f(x[0], w)
        out = batch_empty(n, first)
        out[0] = first
        for b in prange(1, n):      # `range` for target="cpu"
            out[b] = f(x[b], w)
        return out

Batched arguments are indexed along axis 0 (the API moves other `in_axes` there first), and
arguments with in_axes None are passed whole. The batch function is s2sad input like any
generated code, so `grad` of a function that uses `vmap` differentiates the loop.
"""

from __future__ import annotations

from s2sad import ir
from s2sad.codegen.module import Generated, assemble
from s2sad.names import Names

TARGETS = ("cpu", "parallel")


def vmap_module(fn: ir.Function, batched: list[bool], target: str) -> Generated:
    """The per-example primal of `fn` and `<name>_batched`, looping over axis 0 of the batched parameters."""
    if target not in TARGETS:
        raise ValueError(f"vmap target must be one of {TARGETS}, got {target!r}")
    names = Names(fn.user_names | fn.temps | {"prange", "batch_empty"})
    params = list(fn.params)  # a scope of its own: the per-example names read best
    first_batched = params[batched.index(True)]
    b, n = names.fresh("b"), names.fresh("n")
    n_out = len(fn.outputs)
    firsts = [names.fresh("first") for _ in range(n_out)]
    outs = [names.fresh("out") for _ in range(n_out)]
    items = [names.fresh("item") for _ in range(n_out)]

    def call(index: str) -> str:
        args = [f"{p}[{index}]" if is_b else p for p, is_b in zip(params, batched)]
        return f"{fn.name}({', '.join(args)})"

    loop = "prange" if target == "parallel" else "range"
    name = names.fresh(fn.name + "_batched")
    lines = [f"def {name}({', '.join(params)}):",
             f"    {n} = len({first_batched})",
             f"    {', '.join(firsts)}{',' if n_out == 1 and fn.returns_tuple else ''} = {call('0')}"]
    lines += [f"    {o} = batch_empty({n}, {f})" for o, f in zip(outs, firsts)]
    lines += [f"    {o}[0] = {f}" for o, f in zip(outs, firsts)]
    lines.append(f"    for {b} in {loop}(1, {n}):")
    if n_out == 1 and not fn.returns_tuple:
        lines.append(f"        {outs[0]}[{b}] = {call(b)}")
    else:
        lines.append(f"        {', '.join(items)}{',' if n_out == 1 else ''} = {call(b)}")
        lines += [f"        {o}[{b}] = {i}" for o, i in zip(outs, items)]
    result = ", ".join(outs) + ("," if n_out == 1 and fn.returns_tuple else "")
    lines.append(f"    return {result}")
    batch_text = "\n".join(lines) + "\n"
    what = f"Batched ({target}, axis 0 of {', '.join(p for p, is_b in zip(fn.params, batched) if is_b)})"
    return assemble(fn, what, batch_text, name, (name, ""))

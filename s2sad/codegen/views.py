"""The text numba compiles: the adjoint of a sum as a broadcast view where only arithmetic reads it.

    mul2_bar = sum_expand(unbroadcast(-inner_bar * 0.5, sqsum), mul2, 2, False)
    -> mul2_bar = sum_expand_view(unbroadcast(-inner_bar * 0.5, sqsum), mul2, 2, False)

`sum_expand` copies the sum's adjoint out along the summed axes: an array the size of the sum's
operand, written once and then read by the line that uses it. `sum_expand_view` returns the same
values as a read-only view with stride 0 along those axes, so nothing is written: over GMM's
(n, K, d) operand, one pass and one allocation fewer.

A view may only be read. It is used where every read of the name (or of a plain alias, `u = t`,
bound once) is an operand of arithmetic, which makes a new array, or the right side of `+=`; a
name bound twice, written into, returned or passed to a helper (`unbroadcast` may hand its argument
back) keeps its copy. Like `codegen.lower`, only the compiled text changes, line for line.
"""

from __future__ import annotations

import ast
from collections import Counter

from s2sad.codegen.arithmetic import is_arithmetic
from s2sad.codegen.lower import import_beside_numpy

COPY, VIEW = "sum_expand", "sum_expand_view"
IMPORT = f"from s2sad.runtime.reductions import {VIEW}"


def expand_views(source: str) -> str:
    """`source` with each `t = sum_expand(...)` whose value is only read by arithmetic as `sum_expand_view`."""
    if f"{COPY}(" not in source:
        return source
    lines = source.split("\n")
    calls = [call for fn in ast.walk(ast.parse(source)) if isinstance(fn, ast.FunctionDef)
             for call in _viewable(fn)]
    if not calls:
        return source
    for call in calls:  # `sum_expand(` holds no multi-byte characters: ast's byte columns are str columns
        row, col = call.func.lineno - 1, call.func.col_offset
        lines[row] = lines[row][:col] + VIEW + lines[row][col + len(COPY):]
    return import_beside_numpy(lines, IMPORT)


def _viewable(fn: ast.FunctionDef) -> list[ast.Call]:
    """The `sum_expand` calls of `fn` whose value only arithmetic reads."""
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    bound = Counter(n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    reads: dict[str, list[ast.Name]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            reads.setdefault(n.id, []).append(n)
    found = []
    for stmt in ast.walk(fn):
        call = stmt.value if isinstance(stmt, ast.Assign) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == COPY
                and _sole_binding(stmt, bound) and _only_arithmetic_reads(stmt.targets[0].id, reads, parents, bound)):
            found.append(call)
    return found


def _sole_binding(stmt: ast.Assign, bound: Counter) -> bool:
    """`name = value` on one line, the only place the function binds `name`."""
    return (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.lineno == stmt.end_lineno
            and bound[stmt.targets[0].id] == 1)


def _only_arithmetic_reads(name: str, reads: dict, parents: dict, bound: Counter) -> bool:
    """Whether every read of `name`, and of each alias bound once to it, is an operand of arithmetic."""
    pending, seen = [name], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for read in reads.get(current, []):
            parent = parents[read]
            if isinstance(parent, ast.Assign) and parent.value is read and _sole_binding(parent, bound):
                pending.append(parent.targets[0].id)
            elif not _reads_as_operand(read, parent):
                return False
    return True


def _reads_as_operand(read: ast.Name, parent: ast.AST) -> bool:
    if isinstance(parent, (ast.BinOp, ast.Compare)):
        return not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult))
    if isinstance(parent, ast.UnaryOp):
        return True
    if isinstance(parent, ast.AugAssign):
        return parent.value is read
    return isinstance(parent, ast.Call) and read in parent.args and _ufunc(parent)


def _ufunc(call: ast.Call) -> bool:
    """A NumPy ufunc as `codegen.fuse` folds it (np.exp, np.tanh, ...), whatever its arguments."""
    bare = ast.Call(func=call.func, args=[ast.Name(id="_", ctx=ast.Load()) for _ in call.args],
                    keywords=call.keywords)
    return is_arithmetic(bare)

"""The text numba compiles: the adjoint of a max or min added into its operand's adjoint in one pass.

    inner_bar += unbroadcast(extremum_adjoint(unbroadcast(m2_bar, m2), inner, m2, axis2, True), inner_bar)
    -> inner_bar = extremum_adjoint_into(inner_bar, unbroadcast(m2_bar, m2), inner, m2, axis2, True)

As written, numba builds the max's adjoint (an array the size of its operand, zero but at each
group's extremum) and then adds it: an allocation and two passes. `runtime.reductions.
extremum_adjoint_into` adds each group's share where it lands, with no allocation and in one
pass, and runs the line as written where the target is not a float64 array
shaped like the operand. Like `codegen.lower`, only the compiled text changes, line for line.
"""

from __future__ import annotations

import ast

from s2sad.codegen.lower import import_beside_numpy
from s2sad.runtime.chains import is_unbroadcast

IMPORT = "from s2sad.runtime.reductions import extremum_adjoint_into"


def added_in_place(source: str) -> str:
    """`source` with each one-line `x += unbroadcast(extremum_adjoint(...), x)` as one
    `x = extremum_adjoint_into(x, ...)` call."""
    if "extremum_adjoint(" not in source:
        return source
    lines = source.split("\n")
    changed = False
    for stmt in ast.walk(ast.parse(source)):
        adjoint = _added_extremum_adjoint(stmt)
        if adjoint is not None:
            target = stmt.target.id
            args = ", ".join(ast.unparse(a) for a in adjoint.args)
            line = lines[stmt.lineno - 1]
            lines[stmt.lineno - 1] = f"{line[:stmt.col_offset]}{target} = extremum_adjoint_into({target}, {args})"
            changed = True
    return import_beside_numpy(lines, IMPORT) if changed else source


def _added_extremum_adjoint(stmt: ast.AST) -> ast.Call | None:
    """The `extremum_adjoint(...)` call of `x += unbroadcast(extremum_adjoint(...), x)`, on one line."""
    if not (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Name)
            and stmt.lineno == stmt.end_lineno):
        return None
    call = stmt.value
    if not (is_unbroadcast(call) and call.args[1].id == stmt.target.id):
        return None
    adjoint = call.args[0]
    if (isinstance(adjoint, ast.Call) and isinstance(adjoint.func, ast.Name) and adjoint.func.id == "extremum_adjoint"
            and 3 <= len(adjoint.args) <= 5 and not adjoint.keywords
            and not any(isinstance(a, ast.Starred) for a in adjoint.args)):
        return adjoint
    return None

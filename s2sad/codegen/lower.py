"""The text numba compiles: each elementwise expression of a generated module as a loop call.

numba turns `a * b + c` over arrays into one loop nest that checks broadcasting per axis and
element: 4 ns an element over (n, K, 2) arrays, where `runtime.fused.ewise` runs 0.5-1 ns. This
pass rewrites, line for line (tracebacks, numba's cache and the frontend reading the source back
for higher derivatives all go by line numbers):

    Lx = Qdiags_expanded * xcentered + einsum2
    -> Lx = ewise('_0 * _1 + _2', ewise_plan(Qdiags_expanded, xcentered, einsum2), Qdiags_expanded, ...)
    x_bar += unbroadcast(g * w, x_bar)
    -> x_bar = ewise_into_finish(x_bar, ewise_into('_0 * _1', ewise_into_plan(x_bar, g, w), g, w))

Only the compiled text changes: `s2sad show`, the disk cache's `.py` files and `s2sad build`
keep the readable source. Every rewritten expression is arithmetic on names and number constants
(the operators and NumPy ufuncs `codegen.fuse` folds), and `ewise` keeps the expression as
written for anything but float64 arrays of 2 or more dimensions and real scalars.
"""

from __future__ import annotations

import ast

from s2sad.codegen.fuse import _arithmetic
from s2sad.runtime.fused import MAX_OPERANDS

IMPORT = "from s2sad.runtime.fused import ewise, ewise_plan, ewise_into, ewise_into_plan, ewise_into_finish"


NEW_AXIS = "expand_dims_any("  # how `x[:, None, :]` reads in generated code


def elementwise_loops(source: str) -> str:
    """`source` (a generated module) with the elementwise expressions of its functions' top-level
    statements as loop calls, where it pays: in modules that broadcast arrays along new axes.

    Each rewritten expression compiles a loop of its own (0.2 s; 0.02 s for scalars, which gain
    nothing). Broadcasting along a new axis (`x[:, None, :] - m[None, :, :]`) is where numba's
    array expressions are slowest, 4-8x (short inner axes of 3-d arrays); over 1-d and 2-d arrays
    they are within 1.3x of the loops, so elsewhere the module stays as written, compiles as fast
    as before, and gives the same results either way. Statements in loops and branches stay as
    written too: mostly scalars."""
    if NEW_AXIS not in source:
        return source
    lines = source.split("\n")
    changed = False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            for stmt in node.body:
                changed |= _rewrite(stmt, lines)
    if not changed:
        return source
    for i, line in enumerate(lines):
        if line == "import numpy as np":
            lines[i] = f"{line}; {IMPORT}"
            return "\n".join(lines)
    raise ValueError("generated module without `import numpy as np`")


def _rewrite(stmt: ast.stmt, lines: list[str]) -> bool:
    if stmt.lineno != stmt.end_lineno or not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Return)):
        return False
    text = _accumulation(stmt) or _with_loops(stmt)
    if text is None:
        return False
    line = lines[stmt.lineno - 1]
    lines[stmt.lineno - 1] = line[:stmt.col_offset] + text + line[stmt.end_col_offset:]
    return True


def _accumulation(stmt) -> str | None:
    """`x += unbroadcast(E, x)` (or -=), E elementwise: added in place where the shapes allow."""
    if not (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub))
            and isinstance(stmt.target, ast.Name)):
        return None
    call = stmt.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "unbroadcast"
            and len(call.args) == 2 and not call.keywords and isinstance(call.args[1], ast.Name)
            and call.args[1].id == stmt.target.id and _elementwise(call.args[0])):
        return None
    value = call.args[0]
    if isinstance(stmt.op, ast.Sub):
        value = ast.UnaryOp(op=ast.USub(), operand=value)
    template, operands = _template(value)
    if len(operands) > MAX_OPERANDS:
        return None
    x, names = stmt.target.id, ", ".join(operands)
    return f"{x} = ewise_into_finish({x}, ewise_into({template!r}, ewise_into_plan({x}, {names}), {names}))"


def _with_loops(stmt) -> str | None:
    class Loops(ast.NodeTransformer):
        found = False

        def visit(self, node):
            if isinstance(node, ast.expr) and _elementwise(node) and not isinstance(node, (ast.Name, ast.Constant)):
                template, operands = _template(node)
                if len(operands) <= MAX_OPERANDS:
                    Loops.found = True
                    names = ", ".join(operands)
                    return ast.parse(f"ewise({template!r}, ewise_plan({names}), {names})", mode="eval").body
            return self.generic_visit(node)

    stmt.value = Loops().visit(stmt.value)  # the tree is parsed per call: changing it is harmless
    return ast.unparse(stmt) if Loops.found else None


def _elementwise(node: ast.AST) -> bool:
    """Arithmetic (as `codegen.fuse` folds it) on names and number constants, with at least one name."""
    leaves = list(ast.walk(node))
    numbers = all(isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
                  for n in leaves if isinstance(n, ast.Constant))
    return numbers and _arithmetic(node) and any(isinstance(n, ast.Name) and n.id != "np" for n in leaves)


def _template(node: ast.expr) -> tuple[str, list[str]]:
    """("_0 * _1 + _0", ["a", "b"]) for `a * b + a`: each distinct name once, in order."""
    order: dict[str, int] = {}

    class Placeholders(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.Name(id=f"_{order.setdefault(n.id, len(order))}", ctx=ast.Load())

        def visit_Attribute(self, n):
            return n  # np.exp: a function, not an operand

    template = ast.unparse(Placeholders().visit(_copy(node)))
    return template, list(order)


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body

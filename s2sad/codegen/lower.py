"""The text numba compiles: each elementwise expression of a generated module as a loop call.

numba turns `a * b + c` over arrays into one loop nest that checks broadcasting per axis and
element, several times slower over (n, K, 2) arrays than `runtime.fused.ewise`'s plain loop. This
pass rewrites, line for line (tracebacks, numba's cache and the frontend reading the source back
for higher derivatives all go by line numbers):

    Lx = Qdiags_expanded * xcentered + einsum2
    -> Lx = ewise('_0 * _1 + _2', ewise_plan(Qdiags_expanded, xcentered, einsum2), Qdiags_expanded, ...)
    x_bar += unbroadcast(g * w, x_bar)
    -> x_bar = ewise_into_finish(x_bar, ewise_into('_0 * _1', ewise_into_plan(x_bar, g, w), g, w))
    Q_bar = unbroadcast(g * xc, Q)
    -> Q_bar = ewise_sum('_0 * _1', ewise_sum_plan(Q, g, xc), Q, g, xc)

Only the compiled text changes: `s2sad show`, the disk cache's `.py` files and `s2sad build`
keep the readable source. Every rewritten expression is arithmetic on names and number constants
(the operators and NumPy ufuncs `codegen.fuse` folds), and `ewise` keeps the expression as
written for anything but float64 arrays of 2 or more dimensions and real scalars.
"""

from __future__ import annotations

import ast

from s2sad.codegen.arithmetic import is_arithmetic, vectorized_call
from s2sad.codegen.ufuncs import SHAPE_OF  # runtime helpers shaped like an argument: name -> its position
from s2sad.runtime.fused import MAX_OPERANDS

IMPORT = ("from s2sad.runtime.fused import ewise, ewise_plan, ewise_into, ewise_into_plan, ewise_into_finish, "
          "ewise_sum, ewise_sum_plan")


NEW_AXIS = "expand_dims_any("  # how `x[:, None, :]` reads in generated code
MIN_RANK = 3  # over 1-d and 2-d arrays numba's array expressions run about as fast as a loop
MIN_RANK_INTO = 2  # `x += unbroadcast(E, x)` builds E, then adds it: from 2-d on, one loop saves that pass


def elementwise_loops(source: str) -> str:
    """`source` (a generated module) with the elementwise expressions of its functions' top-level
    statements as loop calls, where it pays: expressions over arrays of 3 or more dimensions
    made by broadcasting along new axes, and additions into 2-d or larger arrays there.

    Each rewritten expression compiles a loop of its own (less for scalars, which gain nothing).
    Broadcasting along a new axis (`x[:, None, :] - m[None, :, :]`) is where numba's array
    expressions are slowest (short inner axes of 3-d arrays); over 1-d and 2-d arrays they run about as
    fast as the loops (faster where they broadcast a column, as (64, 128) * (64, 1)), so other
    expressions stay as written, compile no loop of their own, and give the same results either
    way. An addition `x += unbroadcast(E, x)` as written makes E, then adds it; the loop adds in one
    pass, which pays from 2-d arrays on. Which arrays have how many dimensions is read from the text (`rank_bounds`).
    An expression holding exp, log, log1p or tanh stays outside the loop (its arguments may not):
    `codegen.vmath`'s kernels vectorize where the loop calls the C library per element. Statements
    in loops and branches stay as written too: mostly scalars."""
    if NEW_AXIS not in source:
        return source
    lines = source.split("\n")
    changed = False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            ranks = rank_bounds(node)
            if max(ranks.values(), default=0) >= MIN_RANK_INTO:
                for stmt in node.body:
                    changed |= _rewrite(stmt, lines, ranks)
    if not changed:
        return source
    return import_beside_numpy(lines, IMPORT)


def import_beside_numpy(lines: list[str], statement: str) -> str:
    """The module's text with `statement` on its `import numpy as np` line (so no line moves); the
    compiled-text passes (this one, codegen.vmath) add what their rewritten lines call this way."""
    for i, line in enumerate(lines):
        if line.startswith("import numpy as np"):
            lines[i] = f"{line}; {statement}"
            return "\n".join(lines)
    raise ValueError("generated module without `import numpy as np`")


def _rewrite(stmt: ast.stmt, lines: list[str], ranks: dict[str, int]) -> bool:
    if stmt.lineno != stmt.end_lineno or not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Return)):
        return False
    text = _accumulation(stmt, ranks) or _with_loops(stmt, ranks)
    if text is None:
        return False
    line = lines[stmt.lineno - 1]
    lines[stmt.lineno - 1] = line[:stmt.col_offset] + text + line[stmt.end_col_offset:]
    return True


def _accumulation(stmt, ranks: dict[str, int]) -> str | None:
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
    if len(operands) > MAX_OPERANDS or max(ranks.get(n, 0) for n in [stmt.target.id, *operands]) < MIN_RANK_INTO:
        return None
    x, names = stmt.target.id, ", ".join(operands)
    return f"{x} = ewise_into_finish({x}, ewise_into({template!r}, ewise_into_plan({x}, {names}), {names}))"


def _with_loops(stmt, ranks: dict[str, int]) -> str | None:
    class Loops(ast.NodeTransformer):
        found = False

        def visit(self, node):
            summed = _summed(node, ranks)
            if summed is not None:
                Loops.found = True
                return summed
            if isinstance(node, ast.expr) and _elementwise(node) and not isinstance(node, (ast.Name, ast.Constant)) \
                    and not any(vectorized_call(n) for n in ast.walk(node)):
                template, operands = _template(node)
                if len(operands) <= MAX_OPERANDS and max(ranks.get(n, 0) for n in operands) >= MIN_RANK:
                    Loops.found = True
                    names = ", ".join(operands)
                    return ast.parse(f"ewise({template!r}, ewise_plan({names}), {names})", mode="eval").body
            return self.generic_visit(node)

    stmt.value = Loops().visit(stmt.value)  # the tree is parsed per call: changing it is harmless
    return ast.unparse(stmt) if Loops.found else None


def _summed(node: ast.AST, ranks: dict[str, int]) -> ast.expr | None:
    """`unbroadcast(E, like)`, E elementwise, as one pass that sums E into an array shaped like `like`
    (`Qdiags_bar = unbroadcast(mul_bar * xcentered, Qdiags)` never builds the (n, K, d) product)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "unbroadcast"
            and len(node.args) == 2 and not node.keywords and isinstance(node.args[1], ast.Name)):
        return None
    value, like = node.args[0], node.args[1].id
    if isinstance(value, (ast.Name, ast.Constant)) or not _elementwise(value):
        return None
    template, operands = _template(value)
    if len(operands) > MAX_OPERANDS or max(ranks.get(n, 0) for n in operands) < MIN_RANK:
        return None
    names = ", ".join(operands)
    return ast.parse(f"ewise_sum({template!r}, ewise_sum_plan({like}, {names}), {like}, {names})", mode="eval").body


def _elementwise(node: ast.AST) -> bool:
    """Arithmetic (as `codegen.fuse` folds it) on names and number constants, with at least one name."""
    leaves = list(ast.walk(node))
    numbers = all(isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
                  for n in leaves if isinstance(n, ast.Constant))
    return numbers and is_arithmetic(node) and any(isinstance(n, ast.Name) and n.id != "np" for n in leaves)


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


# ---------------------------------------------------------------- ranks, as far as the text tells

def rank_bounds(fn: ast.FunctionDef) -> dict[str, int]:
    """A lower bound on the number of dimensions of each local array of a generated function, read
    from the text alone: `x[:, :]` has at least 2, `expand_dims_any(a, 1)` one more than `a`,
    arithmetic the most of its operands, an einsum as many as its output letters (a name assigned
    more than once: the most of its assignments). Unknown is 0: an expression this misses stays as
    numba compiles it (slower, never different)."""
    ranks: dict[str, int] = {}
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name)]
    for node in sorted(assigns, key=lambda n: n.lineno):  # in generated code a name is defined before use
        name = node.targets[0].id
        ranks[name] = max(ranks.get(name, 0), _rank(node.value, ranks))
    return ranks


def _rank(node: ast.expr, ranks: dict[str, int]) -> int:
    if isinstance(node, ast.Name):
        return ranks.get(node.id, 0)
    if isinstance(node, ast.BinOp):
        return max(_rank(node.left, ranks), _rank(node.right, ranks))
    if isinstance(node, ast.UnaryOp):
        return _rank(node.operand, ranks)
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return sum(isinstance(p, ast.Slice) for p in parts)
    if isinstance(node, ast.Call):
        return _call_rank(node, ranks)
    return 0


def _call_rank(call: ast.Call, ranks: dict[str, int]) -> int:
    args = call.args
    if is_arithmetic(call):  # np.exp(a), np.maximum(a, b): the ufuncs codegen.fuse folds
        return max((_rank(a, ranks) for a in args), default=0)
    name = call.func.id if isinstance(call.func, ast.Name) else ""
    if name == "expand_dims_any" and len(args) == 2:
        return _rank(args[0], ranks) + (len(args[1].elts) if isinstance(args[1], ast.Tuple) else 1)
    if name in ("einsum_op", "einsum_into") and args and isinstance(args[0], ast.Constant) \
            and isinstance(args[0].value, str) and "->" in args[0].value:
        return len(args[0].value.split("->")[1].strip())
    if name in SHAPE_OF and len(args) > SHAPE_OF[name]:
        return _rank(args[SHAPE_OF[name]], ranks)
    return 0

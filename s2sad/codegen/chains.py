"""The text numba compiles: runs of elementwise lines as one loop.

Each line of generated code is a pass over memory; a run of them over arrays of one shape is one
loop, which reads each input once. A run is consecutive
top-level lines of a function, each `name = E`, `name = unbroadcast(E, like)`, `name += E` or
`name += unbroadcast(E, name)` (or -=) with E arithmetic on names and numbers (+ - * / **, unary
minus, and the ufuncs `codegen.fuse` folds), holding at most one call of a math function: a loop
holding two of `runtime.vmath`'s kernels is not vectorized, and two loops are faster.

Two forms, both planned by `runtime.chains._Plan` from the operands' numba types:

- `typed_module`, for a function the backend compiles for one signature: numba's type inference of
  the function as written gives the types, and each run whose types allow it is written out where it
  stood as `if <the shapes allow>: <the loop> else: <the lines>`, in a module compiled as printed.

      add3_bar = log2_bar / add3                  if add3.size > 0 and ...:
      p_bar = unbroadcast(-add3_bar * sub2, p)  ->     for _c0_i in range(_c0_size): ...
      b_bar += unbroadcast(p_bar, b_bar)          else:
                                                      add3_bar = log2_bar / add3 ...

- `fused_chains`, for modules `s2sad build` writes, whose types are unknown until numba compiles
  them: the run becomes one `chain('def _(...): ...', operands)` call on its first line and `pass` on
  the others (line for line, like `codegen.lower`), which `runtime.chains` plans when numba types it.
"""

from __future__ import annotations

import ast
import functools

from s2sad.codegen.arithmetic import is_arithmetic
from s2sad.codegen.lower import import_beside_numpy
from s2sad.runtime.chains import KERNELS, MAX_OPERANDS, MIN_PASSES, _Plan, is_unbroadcast

IMPORT = "from s2sad.runtime.chains import chain"
CHEAP = {"sqrt", "abs", "negative", "square"}  # ufuncs that compile to arithmetic, not a math call
MIN_LINES = MIN_PASSES  # lines that compute (aliases `a = b` do not count): fewer can never fuse


def fused_chains(source: str) -> str:
    """`source` with each run of at least MIN_LINES elementwise lines as one `chain` call."""
    if "def " not in source:
        return source
    lines = source.split("\n")
    changed = False
    for fn in ast.parse(source).body:
        if isinstance(fn, ast.FunctionDef):
            for run in _runs(fn.body):
                changed |= _replace(run, fn, lines)
    return import_beside_numpy(lines, IMPORT) if changed else source


def _runs(body: list[ast.stmt]) -> list[list[ast.stmt]]:
    runs, current, calls = [], [], 0
    for stmt in body + [None]:
        math = _math_calls(stmt) if stmt is not None and _elementwise(stmt) and _reads_names(stmt) else None
        if math is None or calls + math > 1:
            if sum(not _alias(s) for s in current) >= MIN_LINES and _likely_arrays(current):
                runs.append(current)
            current, calls = [], 0
            if math is None:
                continue
        current.append(stmt)
        calls += math
    return runs


def _elementwise(stmt: ast.stmt) -> bool:
    if stmt.lineno != stmt.end_lineno:
        return False
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        target, value = stmt.targets[0].id, stmt.value
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub)) and isinstance(stmt.target, ast.Name):
        target, value = stmt.target.id, stmt.value
    else:
        return False
    if is_unbroadcast(value):
        like = value.args[1]
        if isinstance(stmt, ast.AugAssign) and like.id != target:
            return False
        value = value.args[0]
    return _operations(value)


def _operations(node: ast.AST) -> bool:
    """Arithmetic `runtime.chains` writes per element: + - * / **, unary signs, ufuncs of one argument."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and not isinstance(sub.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            return False
        if isinstance(sub, ast.UnaryOp) and not isinstance(sub.op, (ast.USub, ast.UAdd)):
            return False
        if isinstance(sub, ast.Call) and (len(sub.args) != 1 or sub.keywords):
            return False
        if isinstance(sub, ast.Constant) and not isinstance(sub.value, (int, float)):
            return False
    return is_arithmetic(node, KERNELS)


def _math_calls(stmt: ast.stmt) -> int:
    return sum(1 for sub in ast.walk(stmt) if isinstance(sub, ast.Call) and not is_unbroadcast(sub)
               and not (isinstance(sub.func, ast.Attribute) and sub.func.attr in CHEAP))


def _likely_arrays(run: list[ast.stmt]) -> bool:
    """Whether a line of the run calls `unbroadcast` (an adjoint summed to its variable's shape) or a
    ufunc: the text's signs of array work. Runs of plain scalar arithmetic are left as they are: each
    run costs a compile, even at numba's -O0, and types decide the loop only when numba compiles."""
    return any(isinstance(n, ast.Call) for s in run for n in ast.walk(s.value))


def _reads_names(stmt: ast.stmt) -> bool:
    """Whether the line reads a name: constants (`axis2 = 1`) stay outside runs, where numba sees them
    as literals (an axis must be one)."""
    return any(isinstance(n, ast.Name) for n in ast.walk(stmt.value) if not _named_call(n))


def _named_call(name: ast.AST) -> bool:
    return isinstance(name, ast.Name) and (name.id in KERNELS or name.id in ("np", "unbroadcast"))


def _alias(stmt: ast.stmt) -> bool:
    """`a = b`, or `a = unbroadcast(b, like)` (which hands b back where the shapes agree, as
    `runtime.chains` assumes): no pass over memory of its own."""
    if not isinstance(stmt, ast.Assign):
        return False
    value = stmt.value.args[0] if is_unbroadcast(stmt.value) else stmt.value
    return isinstance(value, ast.Name)


def _replace(run: list[ast.stmt], fn: ast.FunctionDef, lines: list[str]) -> bool:
    found = _program(run, fn)
    if found is None:
        return False
    operands, results, program = found
    call = f"chain({program!r}, {', '.join(operands)})"
    first = run[0].lineno - 1
    indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
    lines[first] = f"{indent}{''.join(r + ', ' for r in results)}= {call}" if results else f"{indent}{call}"
    for stmt in run[1:]:
        lines[stmt.lineno - 1] = f"{indent}pass"
    return True


def _program(run: list[ast.stmt], fn: ast.FunctionDef) -> tuple[list[str], list[str], str] | None:
    """(the names the run reads before binding them, the names it binds that are read after it, the
    run as the text of `def _(operands): ...; return (results)`); None past MAX_OPERANDS."""
    operands, bound = [], set()
    for stmt in run:
        names = sorted((n for n in ast.walk(stmt.value) if isinstance(n, ast.Name)), key=lambda n: n.col_offset)
        reads = [n.id for n in names if not _named_call(n)]
        if isinstance(stmt, ast.AugAssign):
            reads.append(stmt.target.id)
        for name in reads:
            if name not in bound and name not in operands:
                operands.append(name)
        bound.add(stmt.target.id if isinstance(stmt, ast.AugAssign) else stmt.targets[0].id)
    if len(operands) > MAX_OPERANDS:
        return None
    later = _read_after(fn, run[-1].end_lineno)
    results = [name for name in _bound_in_order(run) if name in later]
    text = "\n".join(f"    {ast.unparse(s)}" for s in run)
    return operands, results, f"def _({', '.join(operands)}):\n{text}\n    return ({''.join(r + ', ' for r in results)})\n"


def _bound_in_order(run: list[ast.stmt]) -> list[str]:
    seen = []
    for stmt in run:
        name = stmt.target.id if isinstance(stmt, ast.AugAssign) else stmt.targets[0].id
        if name not in seen:
            seen.append(name)
    return seen


def _read_after(fn: ast.FunctionDef, line: int) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.lineno > line}


FUSION_IMPORTS = ("import numpy as np",
                  "from s2sad.runtime.chains import byte_extent, extents_disjoint, sums_down_to",
                  "from s2sad.runtime.core import sum_all, unbroadcast",
                  "from s2sad.runtime.vmath import exp_real, log1p_real, log_real, tanh_real")


def typed_module(text: str, function: str, types_of, home: str) -> str | None:
    """A module for `function` of the module `text` (imported as `home`) compiled for one signature:
    each run of elementwise lines whose operands' types allow it as one loop, written where the run
    stood, with the run as written for shapes the loop does not take. `types_of(name)` is numba's
    type of a name at the run (None: unknown). The module imports the other functions from `home`.
    None where no run fuses."""
    tree = ast.parse(text)
    lines = text.split("\n")
    fn = next((d for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == function), None)
    if fn is None:
        return None
    body = _fused_lines(fn, lines, types_of)
    return None if body is None else module_of(tree, lines, function, body, home)


def module_of(tree: ast.Module, lines: list[str], function: str, body: list[str], home: str) -> str:
    """A module of `function`'s lines `body`, with the imports of the module `tree` (text `lines`, imported
    as `home`), the helpers the written-out loops call, and the module's other functions from `home`."""
    head = list(dict.fromkeys(line for stmt in tree.body if not isinstance(stmt, ast.FunctionDef)
                              for line in lines[stmt.lineno - 1:stmt.end_lineno]))  # `import a; import b`: one line
    others = [d.name for d in tree.body if isinstance(d, ast.FunctionDef) and d.name != function]
    head += [*FUSION_IMPORTS, *([f"from {home} import {', '.join(others)}"] if others else [])]
    return "\n".join(head + ["", ""] + body) + "\n"


def _fused_lines(fn: ast.FunctionDef, lines: list[str], types_of) -> list[str] | None:
    """`fn`'s lines with each run its operands' types let fuse written out as a loop; None if none does."""
    out = lines[fn.lineno - 1:fn.end_lineno]
    start, fused = fn.lineno, 0
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    for k, run in reversed(list(enumerate(_runs(fn.body)))):  # from the end: earlier line numbers stay put
        found = _program(run, fn)
        if found is None:
            continue
        operands, _, program = found
        operand_types = [types_of(name) for name in operands]
        if any(t is None for t in operand_types):
            continue
        plan = _Plan(ast.parse(program).body[0], operand_types, prefix=_free_prefix(f"_c{k}", taken))
        if not plan.fusable:
            continue
        first, last = run[0].lineno - start, run[-1].end_lineno - start
        indent = out[first][:len(out[first]) - len(out[first].lstrip())]
        as_written = [line[len(indent):] for line in out[first:last + 1]]
        out[first:last + 1] = [indent + line for line in plan.inline(as_written)]
        fused += 1
    return out if fused else None


def _free_prefix(stem: str, taken: set[str]) -> str:
    """`stem_`, with more underscores while a name of the function starts with it: the loop's names stay apart."""
    prefix = stem + "_"
    while any(name.startswith(prefix) for name in taken):
        prefix += "_"
    return prefix


def has_runs(text: str, function: str) -> bool:
    """Whether `function` of the module `text` has a run of elementwise lines `typed_module` may fuse."""
    return function in _functions_with_runs(text)


@functools.lru_cache(maxsize=32)
def _functions_with_runs(text: str) -> frozenset:
    return frozenset(d.name for d in ast.parse(text).body if isinstance(d, ast.FunctionDef) and _runs(d.body))

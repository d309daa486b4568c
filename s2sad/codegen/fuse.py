"""Elementwise fusion: fold single-use arithmetic temporaries into the line that uses them.

Generated code names every intermediate (`mul = a * b`, `add = mul + c`), and numba fuses array
arithmetic only within one statement, so each named intermediate costs a pass over memory and an
allocation. `a * b + c` written as one expression runs as one loop, with no temporary.

A temporary `t = EXPR` at the top level of the function is folded into its single later use when
EXPR is arithmetic on names and constants (operators and NumPy ufuncs), `t` is read nowhere else,
and nothing between the two lines rebinds or changes what EXPR reads. Lines inside loops and branches
stay as they are (they may run again).

The fold is decided on parsed statements (statements.py): the use is the one read of `t` (outside
comprehensions and lambdas) in the one later line that mentions `t`. EXPR's text takes the place of
that read, bare where Python parses the result as the line with the read replaced by EXPR's tree,
else in parentheses: Python's own grammar, not a table of precedences, decides. The rest of the line
keeps its text.
"""

from __future__ import annotations

import ast
import copy

from s2sad.codegen.arithmetic import is_arithmetic
from s2sad.codegen.statements import Line, name_loads, name_nodes, parse

MAX_LENGTH = 110  # keep lines readable: a fold that would make a longer line is skipped


def fuse_elementwise(lines: list[str], temporaries: set[str]) -> list[str]:
    """`lines` (a function's body, 4-space top level) with single-use arithmetic temporaries folded in."""
    out: list[Line | None] = [parse(line) for line in lines]
    memory = _memory_groups(out)
    for k in range(len(out)):
        line = out[k]
        if line is None or not line.top_level or not line.binding:
            continue
        name, value = line.binding
        if name not in temporaries or not _fusable(value):
            continue
        use = _single_use(out, k, name)
        if use is None or not out[use].top_level:
            continue
        reads = {memory(n.id) for n in name_nodes(value)}
        if any(out[j] is not None and _touches(out[j], reads, memory) for j in range(k + 1, use)):
            continue
        folded = _fold(out[use], name, value, line.segment(value))
        if folded is None or len(folded.text) > MAX_LENGTH:
            continue
        out[use], out[k] = folded, None
    return _without_orphan_comments([line for line in out if line is not None])


def _fold(use: Line, name: str, value: ast.expr, text: str) -> Line | None:
    """`use` with its one read of `name` replaced by `value` (written `text`): bare where Python reads
    it so, else in parentheses."""
    read = name_loads(use.node, name)[1][0]
    expected = ast.dump(_Replace(read, value).visit(copy.deepcopy(use.node)))
    code = use.code.encode()
    signed = isinstance(value, ast.UnaryOp) and _after_sign(use.node, read)  # `-(-a)` reads better than `--a`
    for spelled in ([] if signed else [text]) + [f"({text})"]:
        written = code[:read.col_offset] + spelled.encode() + code[read.end_col_offset:]  # offsets count bytes
        folded = parse(" " * use.indent + written.decode())
        if folded.node is not None and ast.dump(folded.node) == expected:
            return folded
    return None


def _after_sign(node: ast.AST, read: ast.Name) -> bool:
    """Is `read` the operand of a unary operator in `node`?"""
    return any(isinstance(n, ast.UnaryOp) and n.operand is read for n in ast.walk(node))


class _Replace(ast.NodeTransformer):
    """Replaces the Name node at `read`'s position by `value`."""

    def __init__(self, read: ast.Name, value: ast.expr):
        self.read, self.value = read, value

    def visit_Name(self, node: ast.Name):
        same = (node.lineno, node.col_offset, node.end_col_offset) == \
            (self.read.lineno, self.read.col_offset, self.read.end_col_offset)
        return self.value if same else node


def _without_orphan_comments(lines: list[Line]) -> list[str]:
    """Drop a `# source line` comment whose statements were all folded into later lines."""
    kept = []
    for i, line in enumerate(lines):
        if _is_comment(line) and " sweep " not in line.code and i + 1 < len(lines):
            following = lines[i + 1]
            if _is_comment(following) and following.indent == line.indent:
                continue
        kept.append(line.text)
    return kept


def _is_comment(line: Line) -> bool:
    return line.node is None and line.code.startswith("#")


def _single_use(lines: list[Line | None], k: int, name: str) -> int | None:
    """The index of the one line after k that reads `name`, when nothing else mentions it."""
    found = None
    for j, line in enumerate(lines):
        if j == k or line is None or name not in line.names:
            continue
        mentions, reads = name_loads(line.node, name)
        if j < k or mentions > 1 or len(reads) != 1 or found is not None or name in line.changes:
            return None  # read before, read twice, bound again, changed in place or read in a comprehension
        found = j
    return found


def _touches(line: Line, memories: set[str], memory) -> bool:
    """Does `line` rebind or change in place a name sharing one of `memories`, or start a block (which may)?"""
    if line.opens_block:
        return True  # a loop or branch header: what runs inside may run again
    written = line.bound | line.changes
    if written:
        return bool({memory(name) for name in written} & memories)
    if isinstance(line.node, ast.Expr):  # a call run for its effect (`t.append(x)`) may change what it is given
        return bool({memory(name) for name in line.reads} & memories)
    return False


def _memory_groups(lines: list[Line]):
    """name -> a representative of the names whose arrays may be one memory: the sweeps bind one adjoint
    to another (`mul_bar = b_bar`) or to a helper that may hand its argument back (`unbroadcast(b_bar, x)`),
    so `x_bar += ...` changes `mul_bar` too, and a fold must not carry a read of it past that line."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    for line in lines:
        if line.binding:
            for source in line.memory:
                parent[find(source)] = find(line.binding[0])
    return find


def _fusable(value: ast.expr) -> bool:
    return isinstance(value, (ast.BinOp, ast.UnaryOp)) and is_arithmetic(value)

"""Elementwise fusion: fold single-use arithmetic temporaries into the line that uses them.

Generated code names every intermediate (`mul = a * b`, `add = mul + c`), and numba fuses array
arithmetic only within one statement, so each named intermediate costs a pass over memory and an
allocation. `a * b + c` written as one expression runs as one loop, with no temporary.

A temporary `t = EXPR` at the top level of the function is folded into its single later use when
EXPR is arithmetic on names and constants (operators and NumPy ufuncs), `t` is read nowhere else,
and nothing between the two lines rebinds or changes what EXPR reads. Lines inside loops and branches
stay as they are (they may run again).
"""

from __future__ import annotations

import ast
import keyword
import re

from s2sad.codegen.arithmetic import is_arithmetic
from s2sad.codegen.prune import memory_of, names_read

_DEF = re.compile(r"^    ([A-Za-z_]\w*) = (.+)$")
_BIND_ANY = re.compile(r"^\s*([A-Za-z_]\w*) = (.+)$")
MAX_LENGTH = 110  # keep lines readable: a fold that would make a longer line is skipped


def fuse_elementwise(lines: list[str], temporaries: set[str]) -> list[str]:
    """`lines` (a function's body, 4-space top level) with single-use arithmetic temporaries folded in."""
    out = list(lines)
    memory = _memory_groups(lines)
    for k in range(len(out)):
        line = out[k]
        if line is None:
            continue
        m = _DEF.match(line)
        if not m or m.group(1) not in temporaries or not _fusable(m.group(2)):
            continue
        name, expr = m.groups()
        use = _single_use(out, k, name)
        if use is None or out[use][:4] != "    " or out[use][4:5].isspace():
            continue
        reads = {memory(n) for n in names_read([expr])}
        if any(_touches(out[j], reads, memory) for j in range(k + 1, use) if out[j] is not None):
            continue
        at = re.search(rf"\b{name}\b", out[use])
        text = _in_context(expr, out[use][:at.start()], out[use][at.end():])
        folded = out[use][:at.start()] + text + out[use][at.end():]
        if len(folded) > MAX_LENGTH:
            continue
        out[use], out[k] = folded, None
    return _without_orphan_comments([line for line in out if line is not None])


def _without_orphan_comments(lines: list[str]) -> list[str]:
    """Drop a `# source line` comment whose statements were all folded into later lines."""
    kept = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#") and " sweep " not in line and i + 1 < len(lines):
            following = lines[i + 1]
            indent = len(line) - len(line.lstrip())
            if following.lstrip().startswith("#") and len(following) - len(following.lstrip()) == indent:
                continue
        kept.append(line)
    return kept


def _single_use(lines: list, k: int, name: str) -> int | None:
    """The index of the one line after k that reads `name`, when nothing else mentions it."""
    pattern = re.compile(rf"\b{name}\b")
    found = None
    for j, line in enumerate(lines):
        if j == k or line is None:
            continue
        code = line.split("#", 1)[0]
        hits = len(pattern.findall(code))
        if hits == 0:
            continue
        if j < k or hits > 1 or found is not None or re.match(rf"^\s*{name}\b\s*(\[.*\])?\s*[-+*/]?=(?!=)", code):
            return None  # read before, read twice, or bound again
        found = j
    return found


def _touches(line: str, memories: set[str], memory) -> bool:
    """Does `line` rebind or change in place a name sharing one of `memories`, or start a block (which may)?"""
    code = line.split("#", 1)[0].strip()
    if not code:
        return False
    if code.endswith(":"):
        return True  # a loop or branch header: what runs inside may run again
    target = re.match(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:\[.*\])?\s*[-+*/]?=(?!=)", code)
    if target:
        return bool({memory(t.strip()) for t in target.group(1).split(",")} & memories)
    return bool(re.search(r"\.(append|pop)\(", code) and {memory(n) for n in names_read([code])} & memories)


def _memory_groups(lines: list[str]):
    """name -> a representative of the names whose arrays may be one memory: the sweeps bind one adjoint
    to another (`mul_bar = b_bar`) or to a helper that may hand its argument back (`unbroadcast(b_bar, x)`),
    so `x_bar += ...` changes `mul_bar` too, and a fold must not carry a read of it past that line."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    for line in lines:
        bind = _BIND_ANY.match(line.split("#", 1)[0])
        if bind:
            for source in memory_of(bind.group(2)):
                parent[find(source)] = find(bind.group(1))
    return find


def _fusable(expr: str) -> bool:
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.BinOp, ast.UnaryOp)) and is_arithmetic(node)


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "@": 2, "**": 3}
_OPERATOR_PRECEDENCE = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.Mod: 2, ast.FloorDiv: 2, ast.Pow: 3}
_UNARY = 2.5  # `-x` binds tighter than `*` and `//`, looser than `**`


def _is_sign(left: str) -> bool:
    """Is the `-`, `+` or `~` that `left` ends with a sign (`= -t`, `** -t`, `return -t`) rather than an operator?"""
    if left[-1:] not in ("-", "+", "~"):
        return False
    rest = left[:-1].rstrip()
    word = re.search(r"[A-Za-z_]\w*$", rest)
    return not rest or word is not None and keyword.iskeyword(word.group()) or rest[-1] in "=([{,+-*/%@<>~:&|^"


def _in_context(expr: str, before: str, after: str) -> str:
    """`expr` as it must be written between `before` and `after`: in parentheses unless it binds
    tighter than the operators on both sides (`a - b * c`, `np.log(a * b)`, `x = a + b`)."""
    node = ast.parse(expr, mode="eval").body
    own = _OPERATOR_PRECEDENCE.get(type(node.op), 0) if isinstance(node, ast.BinOp) else _UNARY
    left, right = before.rstrip(), after.lstrip()
    left_op = "**" if left.endswith("**") else left[-1:]
    right_op = "**" if right.startswith("**") else right[:1]
    left_need = 0 if left_op in ("", "(", ",", "=", "[") else _UNARY if _is_sign(left) else _PRECEDENCE.get(left_op, 9)
    right_need = 0 if right_op in ("", ")", ",", "]") else _PRECEDENCE.get(right_op, 9)
    # on the left of an equal-precedence operator no parentheses are needed ((a - b) - c), except for **
    bare = own > left_need and (own > right_need or (own == right_need and own in (1, 2)))
    return expr if bare else f"({expr})"

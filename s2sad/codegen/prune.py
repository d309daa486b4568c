"""Work the generated adjoint need not do: passes over the emitted lines of a reverse-mode function.

- `live_statements` (with `names_read_first`): `grad` throws the function's value away, so the
  primal sweep of the generated gradient keeps only the statements whose results the adjoint sweep
  reads, and what those read in turn. In the extended Rosenbrock loop that is nothing: the sum `s`
  is never read backwards, so the whole primal loop goes (LLVM cannot delete it across a call).
- `drop_dead_adjoints`: adjoints nothing reads later (an undifferentiated input's).
- `share_unchanged_adjoints`: `a_bar = copy_adj(b_bar)` without the copy where neither changes later.
- `start_from_first_contribution`: no zeros written just to add the first contribution to them.
- `negate_after_summing` (run after fusion): `unbroadcast(-g, a)` as `-unbroadcast(g, a)`, or a
  subtraction.

The adjoint-sweep passes touch top-level lines only: a line in a loop or branch may run again. They
decide from each line's parsed statement (statements.py); a line they rewrite is printed from its new
statement, and every other line keeps its text.
"""

from __future__ import annotations

import ast

from s2sad import ir
from s2sad.codegen.statements import NEW_ARRAY_CALLS, Line, call_args, memory_of, name_nodes, parse, print_line
from s2sad.ir import Assign, Effect, Prim, Push, Store, While
from s2sad.rules.registry import Opaque


def names_read(lines: list[str]) -> set[str]:
    """Every name the generated code lines mention (an extra name only keeps more)."""
    return set().union(*(parse(line).names for line in lines))


def names_read_first(lines: list[str]) -> set[str]:
    """Names the lines read before they assign them, block by block: what they need from code
    before them. The reverse sweep recomputes ("replays") loop temporaries just before reading them;
    those need no primal value. An assignment counts for later lines of its own block only (a branch
    may not run; a loop's target, for its body), and an extra name only keeps more."""
    needed: set[str] = set()
    scopes: list[tuple[int, set[str]]] = [(-1, set())]
    header_bound: frozenset[str] = frozenset()
    for line in map(parse, lines):
        if line.node is None and not line.opens_block:
            continue
        while scopes[-1][0] > line.indent:
            scopes.pop()
        if scopes[-1][0] < line.indent:
            scopes.append((line.indent, set(header_bound)))
        needed |= line.reads - set().union(*(names for _, names in scopes))
        if not line.opens_block:
            scopes[-1][1].update(line.bound)
        header_bound = line.bound if line.opens_block else frozenset()
    return needed


def live_statements(body: list, roots: set[str], counted: set[int]) -> set[int]:
    """ids of the statements of `body` that compute `roots`, transitively (flow-insensitive: every
    definition of a live variable stays). Stores and tape pushes always stay (arrays may alias), and
    so do the `counted` while loops (the adjoint sweep replays them by their trip count), effects
    (`print`, `raise`) and random draws (a draw left out would shift the ones after it)."""
    live, kept = set(roots), set()
    changed = True
    while changed:
        changed = False
        for s, _, _ in ir.walk(body):
            if id(s) not in kept and _needed(s, live, kept, counted):
                kept.add(id(s))
                live.update(ir.stmt_reads(s))
                changed = True
    return kept


def _needed(s, live: set[str], kept: set[int], counted: set[int]) -> bool:
    if isinstance(s, (Store, Push, Effect)):
        return True
    if isinstance(s, Assign):
        return s.target in live or isinstance(s.value, Prim) and isinstance(s.value.rule, Opaque) \
            and s.value.rule.impure
    if isinstance(s, While) and id(s) in counted:
        return True
    return any(id(c) in kept for child in ir.children(s) for c, _, _ in ir.walk(child))


def _update(line: Line) -> tuple[str, bool] | None:
    """(name, whether it is bound anew) for a top-level `name = ...` or `name += ...`."""
    if not line.top_level:
        return None
    if line.binding:
        return line.binding[0], True
    if isinstance(line.node, ast.AugAssign) and isinstance(line.node.target, ast.Name):
        return line.node.target.id, False
    return None


def drop_dead_adjoints(lines: list[str], droppable: set[str], returned: set[str]) -> list[str]:
    """The adjoint sweep without top-level assignments to adjoints (or template locals) that nothing
    later reads: the adjoint an unrolled MLP sends to its input `x` (a whole `W.T @ g`), which is
    not differentiated. Lines inside loops and branches stay (they may run again)."""
    live, kept = set(returned), []
    for text in reversed(lines):
        line = parse(text)
        update = _update(line)
        if update and update[0] in droppable and update[0] not in live:
            continue  # dead: its value is never read again
        if update and update[1]:
            live.discard(update[0])  # rebound here: earlier values are dead unless read below
        kept.append(text)
        live |= line.reads
    return kept[::-1]


def _copy(line: Line) -> tuple[str, str] | None:
    """(a, b) for a top-level `a = copy_adj(b)`."""
    if line.top_level and line.binding:
        args = call_args(line.binding[1], "copy_adj", 1)
        if args and isinstance(args[0], ast.Name):
            return line.binding[0], args[0].id
    return None


def share_unchanged_adjoints(lines: list[str], droppable: set[str], returned: set[str]) -> list[str]:
    """`a_bar = copy_adj(b_bar)` becomes `a_bar = b_bar` where neither changes in place afterwards.

    The copy keeps a later `b_bar += ...` from reaching `a_bar`. A top-level line runs once, so when no
    later line changes either name, or any name that may share memory with them (anything assigned
    from an expression that mentions them, counted conservatively), the copy is a pass over memory
    for nothing: GMM's `mul_bar = copy_adj(Lx_bar)` would copy 20 MB twice per call."""
    parent: dict[str, str] = {}

    def find(n: str) -> str:
        while parent.get(n, n) != n:
            n = parent[n]
        return n

    parsed = [parse(line) for line in lines]
    copies = [k for k, line in enumerate(parsed) if _copy(line)]
    for k, line in enumerate(parsed):
        if line.binding and k not in copies and line.binding[0] in droppable:
            for name in _names(line.binding[1]) & droppable:
                parent[find(line.binding[0])] = find(name)
    changes = [(k, name) for k, line in enumerate(parsed) for name in line.changes]
    out = list(lines)
    for k in copies:
        a, b = _copy(parsed[k])
        if a not in droppable or b not in droppable:
            continue
        group = {find(a), find(b)}
        if any(find(n) in group for j, n in changes if j > k) or sum(find(n) in group for n in returned) > 1:
            continue
        parent[find(a)] = find(b)
        shared = ast.Assign([_name(a, ast.Store())], _name(b), lineno=0)
        out[k] = print_line(parsed[k].indent, shared, parsed[k].comment)
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in name_nodes(node)}


def _name(name: str, ctx=None) -> ast.Name:
    return ast.Name(name, ctx or ast.Load())


def _negated_name(node: ast.expr) -> str | None:
    """`g` of `-g`."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name):
        return node.operand.id
    return None


def _summed_negation(node: ast.expr) -> tuple[str, str] | None:
    """(g, like) of `unbroadcast(-g, like)`."""
    args = call_args(node, "unbroadcast", 2)
    if args and _negated_name(args[0]) and isinstance(args[1], ast.Name):
        return _negated_name(args[0]), args[1].id
    return None


def _sum(g: str, like: str) -> ast.Call:
    return ast.Call(_name("unbroadcast"), [_name(g), _name(like)], [])


def _negated_after_summing(node: ast.stmt) -> ast.stmt | None:
    """The statement with the sign moved out of `unbroadcast(-g, ...)` (see negate_after_summing), or None."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
        summed = _summed_negation(node.value)
        if summed and summed[1] == node.target.id:
            return ast.AugAssign(node.target, ast.Sub(), _sum(*summed))
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        summed, reshaped = _summed_negation(node.value), call_args(node.value, "reshape_like", 2)
        if summed:
            return ast.Assign(node.targets, ast.UnaryOp(ast.USub(), _sum(*summed)), lineno=0)
        if reshaped and (summed := _summed_negation(reshaped[0])) and isinstance(reshaped[1], ast.Name):
            value = ast.Call(_name("reshape_like"), [_sum(*summed), reshaped[1]], [])
            return ast.Assign(node.targets, ast.UnaryOp(ast.USub(), value), lineno=0)
    return None


def negate_after_summing(lines: list[str]) -> list[str]:
    """`a_bar += unbroadcast(-g, a_bar)` becomes `a_bar -= unbroadcast(g, a_bar)`, and
    `a_bar = unbroadcast(-g, a)` becomes `a_bar = -unbroadcast(g, a)`: the sum over broadcast axes is
    linear, so the sign can wait until after it. That skips a pass writing `-g` at g's (bigger) size;
    GMM's `means` adjoint would negate a 20 MB array just to sum it to (K, d). Only for a bare name `g`:
    the sign of a fused expression costs nothing inside it and a pass outside."""
    out = []
    for text in lines:
        line = parse(text)
        negated = _negated_after_summing(line.node) if isinstance(line.node, (ast.Assign, ast.AugAssign)) else None
        out.append(print_line(line.indent, negated, line.comment) if negated else text)
    return out


def _zeros(line: Line) -> tuple[str, str] | None:
    """(bar, like) for a top-level `bar = zeros_like_adj(like)`."""
    if line.top_level and line.binding:
        args = call_args(line.binding[1], "zeros_like_adj", 1)
        if args and isinstance(args[0], ast.Name):
            return line.binding[0], args[0].id
    return None


def _contribution(line: Line, bar: str) -> ast.expr | None:
    """T of a top-level `bar += unbroadcast(T, bar)`."""
    node = line.node
    if line.top_level and isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) \
            and isinstance(node.target, ast.Name) and node.target.id == bar:
        args = call_args(node.value, "unbroadcast", 2)
        if args and isinstance(args[1], ast.Name) and args[1].id == bar:
            return args[0]
    return None


def start_from_first_contribution(lines: list[str], droppable: set[str], returned: set[str] = frozenset()) -> list[str]:
    """`x_bar = zeros_like_adj(x)` ... `x_bar += unbroadcast(T, x_bar)`, with nothing reading `x_bar`
    or changing `x` in between, becomes `x_bar = unbroadcast(T, x)`: no pass writing zeros and one
    reading them. Where T is arithmetic (`g * y`, `-g`) or a helper that allocates, `x_bar` owns a new
    array. Where T may hand back memory of other adjoints (`g`, `reshape_like(g, x)`), `x_bar` shares it,
    so only where none of them is changed in place later, nor read once `x_bar` is (`_may_share`, on
    the lines as rewritten so far: two adjoints that took one array share it with each other)."""
    parsed = [parse(line) for line in lines]
    out: list[Line | None] = list(parsed)
    for i, line in enumerate(parsed):
        zeros = _zeros(line)
        if not zeros or zeros[0] not in droppable:
            continue
        bar, like = zeros
        for j in range(i + 1, len(parsed)):
            later = parsed[j]
            contribution = _contribution(later, bar)
            if contribution is not None:
                if bar not in _names(contribution) and (_is_arithmetic(contribution) or _may_share(
                        contribution, bar, [k or parse("") for k in out], j, droppable, returned)):
                    out[i] = None
                    # T keeps its text as written
                    text = f"{' ' * later.indent}{bar} = unbroadcast({later.segment(contribution)}, {like})"
                    out[j] = parse(text + (f"  {later.comment}" if later.comment else ""))
                break
            if bar in later.names or _rebinds(later, like):
                break
    return [line.text for line in out if line is not None]


def _may_share(contribution: ast.expr, bar: str, lines: list[Line], j: int, droppable: set[str],
               returned: set[str]) -> bool:
    """Whether `bar` may take line j's contribution's memory. The names that may share it (bound from
    it, or it from them, closed over all the lines) must be locals of the sweep bound by top-level
    lines only, none changed in place after line j, none read once `bar` is, and none returned."""
    memory = memory_of(contribution)
    if not memory:
        return True  # a new array
    bound = [(k, line.binding[0], line.memory) for k, line in enumerate(lines) if k != j and line.binding]
    group, grew = set(memory), True
    while grew:  # what shares memory with the contribution, in either direction
        grew = False
        for _, name, sources in bound:
            if (name in group or sources & group) and not ({name} | sources) <= group:
                group |= {name} | sources
                grew = True
    if any(name in group and not lines[k].top_level for k, name, _ in bound):
        return False  # bound in a loop or branch
    if not group <= droppable or not group <= {name for _, name, _ in bound} or group & returned:
        return False  # a parameter, a primal value, a tape's: not the sweep's to share
    changed_at = next((k for k in range(j + 1, len(lines)) if bar in lines[k].changes), len(lines))
    return not any(lines[k].changes & group or (k >= changed_at and lines[k].names & group)
                   for k in range(j + 1, len(lines)))


def _rebinds(line: Line, name: str) -> bool:
    """Does `line` give `name` a new value, or change its array in place?"""
    return name in line.bound or name in line.changes


def _is_arithmetic(node: ast.expr) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in NEW_ARRAY_CALLS
    return isinstance(node, (ast.BinOp, ast.UnaryOp))

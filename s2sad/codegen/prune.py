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

The adjoint-sweep passes touch top-level lines only: a line in a loop or branch may run again.
"""

from __future__ import annotations

import ast
import functools
import re

from s2sad import ir
from s2sad.ir import Assign, Effect, Prim, Push, Store, While
from s2sad.rules.registry import Opaque

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=(?!=)")


def names_read(lines: list[str]) -> set[str]:
    """Every identifier in generated code lines (comments skipped; an extra name only keeps more)."""
    found: set[str] = set()
    for line in lines:
        found.update(_NAME.findall(line.split("#", 1)[0]))
    return found


def names_read_first(lines: list[str]) -> set[str]:
    """Identifiers the lines read before they assign them, block by block: what they need from code
    before them. The reverse sweep recomputes ("replays") loop temporaries just before reading them;
    those need no primal value. An assignment counts for later lines of its own block only (a branch
    may not run), and an extra name only keeps more."""
    needed: set[str] = set()
    scopes: list[tuple[int, set[str]]] = [(-1, set())]
    for line in lines:
        code = line.split("#", 1)[0].rstrip()
        if not code:
            continue
        indent = len(code) - len(code.lstrip())
        while scopes[-1][0] > indent:
            scopes.pop()
        if scopes[-1][0] < indent:
            scopes.append((indent, set()))
        assigned = _ASSIGNED.match(code)
        reads = code[assigned.end():] if assigned else code
        needed |= set(_NAME.findall(reads)) - set().union(*(names for _, names in scopes))
        if assigned:
            scopes[-1][1].update(t.strip() for t in assigned.group(1).split(","))
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


_UPDATE = re.compile(r"^    ([A-Za-z_]\w*) (\+?=) ")


def drop_dead_adjoints(lines: list[str], droppable: set[str], returned: set[str]) -> list[str]:
    """The adjoint sweep without top-level assignments to adjoints (or template locals) that nothing
    later reads: the adjoint an unrolled MLP sends to its input `x` (a whole `W.T @ g`), which is
    not differentiated. Lines inside loops and branches stay (they may run again)."""
    live, kept = set(returned), []
    for line in reversed(lines):
        update = _UPDATE.match(line)
        if update and update.group(1) in droppable and update.group(1) not in live:
            continue  # dead: its value is never read again
        if update and update.group(2) == "=":
            live.discard(update.group(1))  # rebound here: earlier values are dead unless read below
        kept.append(line)
        live |= names_read([line[update.end():]] if update and update.group(2) == "=" else [line])
    return kept[::-1]


_COPY = re.compile(r"^    ([A-Za-z_]\w*) = copy_adj\(([A-Za-z_]\w*)\)$")
_BIND = re.compile(r"^\s*([A-Za-z_]\w*) = (.*)$")
_CHANGES = (re.compile(r"^\s*([A-Za-z_]\w*)\s*[-+*/]="),  # x_bar += ...
            re.compile(r"^\s*([A-Za-z_]\w*)\[.*\]\s*[-+*/]?=(?!=)"),  # x_bar[i] = 0.0, x_bar[i] += ...
            re.compile(r"^\s*([A-Za-z_]\w*) = add_at\("))  # may add in place


def _changed(line: str) -> str | None:
    """The name whose array `line` changes in place, if any."""
    for pattern in _CHANGES:
        m = pattern.match(line)
        if m:
            return m.group(1)
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

    copies = [k for k, line in enumerate(lines) if _COPY.match(line)]
    for k, line in enumerate(lines):
        bind = _BIND.match(line.split("#", 1)[0])
        if bind and k not in copies and bind.group(1) in droppable:
            for name in names_read([bind.group(2)]) & droppable:
                parent[find(bind.group(1))] = find(name)
    changes = [(k, name) for k, line in enumerate(lines) if (name := _changed(line))]
    out = list(lines)
    for k in copies:
        a, b = _COPY.match(lines[k]).groups()
        if a not in droppable or b not in droppable:
            continue
        group = {find(a), find(b)}
        if any(find(n) in group for j, n in changes if j > k) or sum(find(n) in group for n in returned) > 1:
            continue
        parent[find(a)] = find(b)
        out[k] = f"    {a} = {b}"
    return out


_ADD_NEGATED = re.compile(r"^(\s*)([A-Za-z_]\w*) \+= unbroadcast\(-([A-Za-z_]\w*), \2\)$")
_SET_NEGATED = re.compile(r"^(\s*)([A-Za-z_]\w*) = (reshape_like\()?unbroadcast\(-([A-Za-z_]\w*), ([A-Za-z_]\w*)\)"
                          r"(, [A-Za-z_]\w*\))?$")


def negate_after_summing(lines: list[str]) -> list[str]:
    """`a_bar += unbroadcast(-g, a_bar)` becomes `a_bar -= unbroadcast(g, a_bar)`, and
    `a_bar = unbroadcast(-g, a)` becomes `a_bar = -unbroadcast(g, a)`: the sum over broadcast axes is
    linear, so the sign can wait until after it. That skips a pass writing `-g` at g's (bigger) size;
    GMM's `means` adjoint would negate a 20 MB array just to sum it to (K, d). Only for a bare name `g`:
    the sign of a fused expression costs nothing inside it and a pass outside."""
    out = []
    for line in lines:
        add, set_ = _ADD_NEGATED.match(line), _SET_NEGATED.match(line)
        if add:
            indent, bar, g = add.groups()
            line = f"{indent}{bar} -= unbroadcast({g}, {bar})"
        elif set_ and bool(set_.group(3)) == bool(set_.group(6)):
            indent, bar, reshape, g, like, shaped = set_.groups()
            inner = f"unbroadcast({g}, {like})"
            line = f"{indent}{bar} = -{'reshape_like(' + inner + shaped if reshape else inner}"
        out.append(line)
    return out


_ZEROS = re.compile(r"^    ([A-Za-z_]\w*) = zeros_like_adj\(([A-Za-z_]\w*)\)$")


def start_from_first_contribution(lines: list[str], droppable: set[str], returned: set[str] = frozenset()) -> list[str]:
    """`x_bar = zeros_like_adj(x)` ... `x_bar += unbroadcast(T, x_bar)`, with nothing reading `x_bar`
    or changing `x` in between, becomes `x_bar = unbroadcast(T, x)`: no pass writing zeros and one
    reading them. Where T is arithmetic (`g * y`, `-g`) or a helper that allocates, `x_bar` owns a new
    array. Where T may hand back memory of other adjoints (`g`, `reshape_like(g, x)`), `x_bar` shares it,
    so only where none of them is changed in place later, nor read once `x_bar` is (`_may_share`, on
    the lines as rewritten so far: two adjoints that took one array share it with each other)."""
    out = list(lines)
    for i, line in enumerate(lines):
        zeros = _ZEROS.match(line)
        if not zeros or zeros.group(1) not in droppable:
            continue
        bar, like = zeros.groups()
        first = f"    {bar} += unbroadcast("
        for j in range(i + 1, len(lines)):
            later = lines[j]
            if later.startswith(first) and later.endswith(f", {bar})"):
                contribution = later[len(first):-len(f", {bar})")]
                if bar not in names_read([contribution]) and (
                        _is_arithmetic(contribution) or _may_share(contribution, bar, [k or "" for k in out], j, droppable, returned)):
                    out[i] = None
                    out[j] = f"    {bar} = unbroadcast({contribution}, {like})"
                break
            if bar in names_read([later]) or _rebinds(later, like):
                break
    return [line for line in out if line is not None]


_MODULES = {"np", "math"}
# Calls whose result may be (a view of) their first argument besides the rules with `views`: adjoint helpers
# that hand back `g` itself where the shapes agree (`views` on them would make sharing.py take their results
# for views, for certain, in the derivative of a derivative), and NumPy functions that have no rule.
_ALSO_VIEWS = {"unbroadcast", "reshape_like", "np.asanyarray", "np.fliplr", "np.flipud", "np.real", "np.imag"}


@functools.cache
def _view_calls() -> tuple[frozenset, frozenset]:
    """The names called bare (runtime helpers) and the np.<name>s whose result may be their first argument."""
    from s2sad.rules import all_rules
    from s2sad.rules.registry import spellings

    names = set(_ALSO_VIEWS).union(*(spellings(r) | {r.print_as} for r in all_rules() if r.views)) - {None}
    return (frozenset(n for n in names if "." not in n),
            frozenset(n.removeprefix("np.") for n in names if n.startswith("np.") and n.count(".") == 1))


@functools.lru_cache(maxsize=4096)
def memory_of(text: str) -> frozenset[str]:
    """The names whose arrays an expression's value may share memory with: none for arithmetic or an
    allocating helper, the first argument's for a helper that may hand it back, every name read for
    anything else."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return frozenset(names_read([text]))

    def sources(n) -> frozenset[str]:
        if isinstance(n, ast.Name):
            return frozenset([n.id])
        if isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp)):
            return frozenset()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id in _NEW_ARRAY_CALLS | {"zeros_like_adj", "copy_adj", "sum_expand"}:
                return frozenset()
            if n.func.id in _view_calls()[0] and n.args:
                return sources(n.args[0])
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id in _MODULES and n.func.attr not in _view_calls()[1]:
            return frozenset()  # a ufunc's or math's result: a new array or a number
        return frozenset(m.id for m in ast.walk(n) if isinstance(m, ast.Name) and m.id not in _MODULES)

    return sources(node)


def _may_share(contribution: str, bar: str, lines: list[str], j: int, droppable: set[str], returned: set[str]) -> bool:
    """Whether `bar` may take line j's contribution's memory. The names that may share it (bound from
    it, or it from them, closed over all the lines) must be locals of the sweep bound by top-level
    lines only, none changed in place after line j, none read once `bar` is, and none returned."""
    memory = memory_of(contribution)
    if not memory:
        return True  # a new array
    bound = [(k, bind.group(1), memory_of(bind.group(2))) for k, line in enumerate(lines)
             if k != j and (bind := _BIND.match(line.split("#", 1)[0]))]
    group, grew = set(memory), True
    while grew:  # what shares memory with the contribution, in either direction
        grew = False
        for _, name, sources in bound:
            if (name in group or sources & group) and not ({name} | sources) <= group:
                group |= {name} | sources
                grew = True
    if any(name in group and lines[k][4:5] == " " for k, name, _ in bound):
        return False  # bound in a loop or branch
    if not group <= droppable or not group <= {name for _, name, _ in bound} or group & returned:
        return False  # a parameter, a primal value, a tape's: not the sweep's to share
    changed_at = next((k for k in range(j + 1, len(lines)) if _changed(lines[k]) == bar), len(lines))
    return not any(_changed(lines[k]) in group or (k >= changed_at and names_read([lines[k]]) & group)
                   for k in range(j + 1, len(lines)))


_LOOP_TARGET = re.compile(r"^\s*for (.*?) in ")


def _rebinds(line: str, name: str) -> bool:
    """Does `line` give `name` a new value, or change its array in place?"""
    code = line.split("#", 1)[0]
    bound = _ASSIGNED.match(code) or _LOOP_TARGET.match(code)
    targets = {t.strip() for t in bound.group(1).split(",")} if bound else set()
    return name in targets or _changed(code) == name


def _is_arithmetic(text: str) -> bool:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in _NEW_ARRAY_CALLS
    return isinstance(node, (ast.BinOp, ast.UnaryOp))


_NEW_ARRAY_CALLS = {"matmul_adjoint_a", "matmul_adjoint_b", "einsum_into"}  # runtime helpers that allocate

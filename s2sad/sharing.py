"""Refuse programs whose arrays share memory in a way generated code cannot follow.

In s2sad's IR every binding is a value. NumPy makes a slice, a reshape or a transpose a view of
its operand, and `a += b` on an array writes into `a`'s memory, so after an in-place write every
name sharing that memory holds the new values: a view of the array written, the array a written
view came from, another name for the same array. Generated code would still read the values from
before the write, and the result and its derivative would differ from NumPy's without a word.
This pass finds an in-place write (an element or slice store, or an augmented assignment of an
array) after which another name sharing the memory may be read, and raises a located error that
says how to break the sharing.

Only names known to be arrays take part: a store's base, a name bound to a slice or to a view
function's result (a rule with `views`), an array lowering knows (made by NumPy, an argument whose type is known,
a row `m[i]` of an array whose rank it knows), a plain copy of one of those, and what an augmented
assignment of one of those makes. An element read whose rank lowering cannot tell may be a row: where
that would be refused, code made without the argument types asks for them. A double buffer's next
array, made anew before each write, ends the sharing with the name the last pass handed it to. Reads
are ordered by position in the program: a read in the other branch of an `if` counts as later, which
can only refuse more, never less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from s2sad import ir
from s2sad.errors import TypesNeeded, UnsupportedError, located_at
from s2sad.ir import Assign, Const, Copy, For, Load, Prim, Slice, Store, Var, While

OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
             "matmul": "@"}
_BEFORE_ALL, _AFTER_ALL = -1, float("inf")  # where a parameter is bound, where the outputs are read


def check_shared_memory(fn: ir.Function) -> None:
    """Raise UnsupportedError at the first in-place write that a name sharing its memory reads past.
    An element read `r = m[i]` whose rank lowering could not tell may be a row of `m`: where that would
    be refused, code made without the argument types asks for them (TypesNeeded), and code made with
    them is refused."""
    _check(_Program(fn))
    if any(True for _ in _maybe_rows(fn)):
        try:
            _check(_Program(fn, rows_unknown=True))
        except UnsupportedError as exc:
            if not fn.typed:
                raise TypesNeeded(f"whether an element read is a row (a view) decides the code: {exc}") from None
            raise


def _check(program: "_Program") -> None:
    for s, _, _ in ir.walk(program.fn.body):
        written = program.written_through(s)
        if written is not None:
            program.check_write(s, written)


def _maybe_rows(fn: ir.Function):
    """`r = m[i]` (no slice, no array index) where lowering knows neither that r is a number nor an array."""
    for s, _, _ in ir.walk(fn.body):
        if isinstance(s, Assign) and isinstance(s.value, Load) and s.target not in fn.arrays \
                and s.target not in fn.elements and viewed_base(s.value, fn.arrays) is not None:
            yield s


def viewed_base(value, arrays: frozenset) -> str | None:
    """The name whose memory a right-hand side may be a view of: `view_source`'s, and the base of an
    element read `m[i]`, which is a row of `m` where `m` has more axes than the index (an index that is an
    array makes a copy)."""
    source = view_source(value)
    if source is None and isinstance(value, Load) and not any(isinstance(i, Var) and i.name in arrays
                                                              for i in value.index):
        return value.base.name
    return source


def may_share(value) -> bool:
    """May this right-hand side share memory with another name (a plain copy of a name, or a view)?"""
    if isinstance(value, Copy):
        return isinstance(value.value, Var)
    return isinstance(value, Load) or isinstance(value, Prim) and value.rule.views


def view_source(value) -> str | None:
    """The name whose memory a right-hand side is certainly a view of (a slice, a view function), else None."""
    if isinstance(value, Load) and any(isinstance(i, Slice) or i == Const(Ellipsis) for i in value.index):
        return value.base.name
    if isinstance(value, Prim) and value.rule.views and value.args and isinstance(value.args[0], Var):
        return value.args[0].name
    return None


@dataclass
class _Program:
    fn: ir.Function
    rows_unknown: bool = False  # take every element read whose rank is unknown for a row (a view)
    order: dict = field(default_factory=dict)  # id(stmt) -> position in a walk of the program, outer first
    loops: dict = field(default_factory=dict)  # id(stmt) -> loops around it, outermost first
    blocks: dict = field(default_factory=dict)  # id(stmt) -> ids of the blocks around it, outermost first
    defs: dict = field(default_factory=dict)  # name -> [Assign]
    uses: dict = field(default_factory=dict)  # name -> [stmt reading it]
    parent: dict = field(default_factory=dict)  # union-find over names sharing memory
    arrays: set = field(default_factory=set)  # names certainly bound to arrays
    guards: dict = field(default_factory=dict)  # id(stmt) -> {exit flag: position of an `if` skipping it once set}
    exits_set: list = field(default_factory=list)  # (flag, Assign setting it) for each `return`
    owner: dict = field(default_factory=dict)  # id(block) -> the compound statement it belongs to
    following: dict = field(default_factory=dict)  # id(stmt) -> the statement after it in its block

    def __post_init__(self):
        self._index(self.fn.body, (), (), {})
        # an array updated in place is one (`x2 = x.copy(); x2 += ...`), except a row `r = m[i]; r += ...`,
        # which lowering writes back into `m` (a row is only seen where it is sliced or written into, below)
        self.arrays |= {n for n in self.fn.arrays if n in self.fn.params or all(
            not isinstance(d.value, Copy) and not (d.in_place and self._is_row(n)) for d in self.defs.get(n, []))}
        for s in self._stmts():
            if isinstance(s, Store):
                self.arrays.add(s.base)
            if isinstance(s, Assign) and (source := view_source(s.value)) is not None:
                self._share(source, s.target)
        for s in self._stmts():  # `row = m[i]` whose result is sliced or written into: a row, a view of `m`
            if isinstance(s, Assign) and isinstance(s.value, Load) and s.target in self.arrays:
                self._share(s.value.base.name, s.target)
        if self.rows_unknown:
            for s in _maybe_rows(self.fn):
                self._share(s.value.base.name, s.target)
        grown = True
        while grown:  # plain copies and in-place updates of arrays are arrays sharing the same memory
            grown = False
            for s in self._stmts():
                source = self._copied_or_updated(s)
                if source in self.arrays and self._find(source) != self._find(s.target):
                    self._share(source, s.target)
                    grown = True

    def _is_row(self, name: str) -> bool:
        return any(isinstance(d.value, Load) for d in self.defs.get(name, []))

    def _index(self, block, loops, blocks, guards):
        blocks = blocks + (id(block),)
        self.following.update((id(s), t) for s, t in zip(block, block[1:]))
        for s in block:
            self.order[id(s)] = len(self.order)
            self.loops[id(s)] = loops
            self.blocks[id(s)] = blocks
            self.guards[id(s)] = guards
            if isinstance(s, Assign):
                self.defs.setdefault(s.target, []).append(s)
                if s.target in self.fn.exits and s.value == Copy(Const(True)):
                    self.exits_set.append((s.target, s))
            for name in set(ir.stmt_reads(s)) - _shape_reads_only(s):
                self.uses.setdefault(name, []).append(s)
            inner = loops + (s,) if isinstance(s, (For, While)) else loops
            for k, child in enumerate(ir.children(s)):
                self.owner[id(child)] = s
                skipped = self._skipped_by(s.test) if isinstance(s, ir.If) and k == 0 else ()
                self._index(child, inner, blocks, {**guards, **{f: self.order[id(s)] for f in skipped}})

    def _skipped_by(self, test) -> set[str]:
        """The exit flags whose being set makes `test` false: `go = not (returned or ...)`."""
        defs = self.defs.get(getattr(test, "name", None), [])
        if len(defs) != 1 or not (isinstance(defs[0].value, Prim) and defs[0].value.rule.name == "not"):
            return set()
        flags, atoms = set(), [defs[0].value.args[0]]
        while atoms:
            atom = atoms.pop()
            if isinstance(atom, Var) and atom.name in self.fn.exits:
                flags.add(atom.name)
            elif isinstance(atom, Var) and len(made := self.defs.get(atom.name, [])) == 1 \
                    and isinstance(made[0].value, Prim) and made[0].value.rule.name == "or":
                atoms.extend(made[0].value.args)
        return flags

    def _exclusive(self, bound, write) -> bool:
        """Does every run that makes binding `bound` then set an exit flag that skips `write`? (A helper's
        early `return out` and the write into `out` after it never both happen.)"""
        if bound is None:
            return False
        at_bound, around = self.order[id(bound)], self.blocks[id(bound)]
        return self._other_branch(bound, write) or any(
            at_bound < self.order[id(s)] < self.guards[id(write)].get(flag, -1)
            and self.blocks[id(s)][-1] in around for flag, s in self.exits_set)

    def _other_branch(self, bound, write) -> bool:
        """Are `bound` and `write` in the two branches of one `if` (`if short: return out` taking the rest
        as its else), which no pass of a loop around it joins: it runs once, or each pass writes into
        an array made anew before it?"""
        outer, inner = self.blocks[id(bound)], self.blocks[id(write)]
        n = next((k for k, (a, b) in enumerate(zip(outer, inner)) if a != b), min(len(outer), len(inner)))
        if n in (len(outer), len(inner)):
            return False
        branch = self.owner[outer[n]]
        if not isinstance(branch, ir.If) or branch is not self.owner[inner[n]]:
            return False
        if not self.loops[id(branch)]:
            return True
        name = write.base if isinstance(write, Store) else self._copied_or_updated(write)
        return any(not may_share(d.value) and self.blocks[id(d)][-1] == outer[n - 1]
                   and self.order[id(d)] < self.order[id(branch)] for d in self.defs.get(name, []))

    def _stmts(self):
        return (s for s, _, _ in ir.walk(self.fn.body))

    @staticmethod
    def _copied_or_updated(s) -> str | None:
        if not isinstance(s, Assign):
            return None
        if isinstance(s.value, Copy) and isinstance(s.value.value, Var):
            return s.value.value.name
        if s.in_place and isinstance(s.value, Prim) and isinstance(s.value.args[0], Var):
            return s.value.args[0].name
        return None

    def _find(self, name):
        while self.parent.get(name, name) != name:
            name = self.parent[name]
        return name

    def _share(self, a, b):
        self.arrays.update((a, b))
        self.parent[self._find(b)] = self._find(a)

    def written_through(self, s) -> str | None:
        """The array whose memory statement `s` writes into, if it shares that memory with another name."""
        if isinstance(s, Store):
            name = s.base
        elif isinstance(s, Assign) and s.in_place and self._copied_or_updated(s) in self.arrays:
            name = self._copied_or_updated(s)
        else:
            return None
        return name if any(self._find(n) == self._find(name) and n != name for n in self.arrays) else None

    def check_write(self, write, name: str) -> None:
        # after a store its base holds the new values in generated code too, and so does the new name
        # an augmented assignment binds; every other name sharing the memory would hold the old ones
        current = write.base if isinstance(write, Store) else write.target
        reached = self._sources(name)
        for other in sorted(n for n in self.arrays if self._find(n) == self._find(name) and n != current):
            if self._read_again(other, write):
                continue
            for bound in self.defs.get(other, []) + ([None] if other in self.fn.params else []):
                if other not in reached and self._own_memory(bound) or self._renewed_between(name, bound, write):
                    continue  # `u = u0 * 1.0` then `u = out` each pass: `out`'s memory is never that first array
                for read in self.uses.get(other, []) + ([None] if other in self.fn.outputs else []):
                    if read is not write and self._reads_after(bound, write, read) \
                            and not self._bound_again_between(other, write, read) and not self._exclusive(bound, write):
                        raise self._error(write, name, other, bound, read)

    def _read_again(self, name: str, write) -> bool:
        """Is `name` bound again right after `write`, to what it views read anew (lowering reads a view back
        after a write through it, `col = m[:, j]` after `m[k, j] = v`): every later read sees the new values."""
        after = self.following.get(id(write))
        return isinstance(after, Assign) and after.target == name and isinstance(after.value, Load) \
            and isinstance(write, Store) and after.value.base.name == write.base

    def _sources(self, name: str) -> set[str]:
        """The names whose memory `name` may hold: those it is bound to as a copy, a view, a row (`m[i]`)
        or an in-place update of, and theirs in turn."""
        found, todo = set(), [name]
        while todo:
            for d in self.defs.get(todo.pop(), []):
                source = self._copied_or_updated(d) or (d.value.base.name if isinstance(d.value, Load)
                                                        else view_source(d.value))
                if source is not None and source not in found:
                    found.add(source)
                    todo.append(source)
        return found

    def _renewed_between(self, name: str, bound, write) -> bool:
        """Is `name` given memory of its own on every way from `bound` to `write`, and not bound to shared
        memory again before the write? A double buffer's `out = np.empty_like(u)` at the top of each pass,
        after the last pass's `u = out`, leaves `u` on the array the write no longer reaches."""
        at_bound, at_write = self.order[id(bound)] if bound is not None else _BEFORE_ALL, self.order[id(write)]
        loops = _common_prefix(() if bound is None else self.loops[id(bound)], self.loops[id(write)])
        own, shared = [], []
        for d in self.defs.get(name, []):
            at = self._on_the_way(d, at_bound, at_write, loops)
            if at is not None and not self._own_memory(d):
                shared.append(at)
            elif at is not None and self.blocks[id(d)][-1] in self.blocks[id(write)]:
                own.append(at)
        return bool(own) and max(own) > max(shared, default=-_AFTER_ALL)

    def _on_the_way(self, d, start: float, end: float, loops: tuple) -> float | None:
        """Where statement `d` runs on the way from position `start` to position `end` (later is larger), or
        None if it does not: straight on where `start < end`, else through the next pass of the innermost
        of `loops` (the loops around both)."""
        at = self.order[id(d)]
        if start < end:
            return at if start < at < end else None
        if not loops or not any(loop is loops[-1] for loop in self.loops[id(d)]):
            return None
        return at if at < end else at - len(self.order) if at > start else None

    @staticmethod
    def _own_memory(bound) -> bool:
        """Does this binding give its name memory no other name had: a parameter (None: the caller's
        array), a new array, arithmetic?"""
        return bound is None or not (may_share(bound.value) or bound.in_place)

    def _reads_after(self, bound, write, read) -> bool:
        """Can `read` see the binding made at `bound` after `write` wrote into its memory, with no new
        binding in between? None for `bound`: a parameter; None for `read`: the function's result."""
        at_bound = _BEFORE_ALL if bound is None else self.order[id(bound)]
        at_write = self.order[id(write)]
        at_read = _AFTER_ALL if read is None else self.order[id(read)]
        loops_bound = () if bound is None else self.loops[id(bound)]
        shared = _common_prefix(self.loops[id(write)], () if read is None else self.loops[id(read)])
        for loop in shared:
            if not any(loop is b for b in loops_bound):  # the binding stays while the loop repeats both
                return at_bound < self.order[id(loop)]
        if shared:  # one pass of the innermost loop around all three, then the next: cyclic order
            return (at_bound < at_write < at_read or at_write < at_read < at_bound
                    or at_read < at_bound < at_write)
        return at_bound < at_write < at_read

    def _bound_again_between(self, name, write, read) -> bool:
        """Is `name` bound anew after `write` on every way to `read` (in a block around `read`, between them,
        or before `read` on the next pass of a loop around both)?"""
        at_read, at_write = _AFTER_ALL if read is None else self.order[id(read)], self.order[id(write)]
        around = (id(self.fn.body),) if read is None else self.blocks[id(read)]
        loops = _common_prefix(self.loops[id(write)], () if read is None else self.loops[id(read)])
        return any(self.blocks[id(d)][-1] in around and self._on_the_way(d, at_write, at_read, loops) is not None
                   for d in self.defs.get(name, []))

    def _error(self, write, name, other, bound, read) -> UnsupportedError:
        spelled = self.fn.spelled
        user, other_user = spelled.get(name, name), spelled.get(other, other)
        where = f" at line {bound.loc.line}" if bound is not None and bound.loc else ""
        if bound is None:
            how = "an argument"
        elif view_source(bound.value) is not None:
            how = f"a view taken{where}"
        elif isinstance(bound.value, Load):
            how = f"a row taken{where}, a view"
        elif isinstance(bound.value, Copy) or bound.in_place:
            how = f"another name for the array, bound{where}"
        elif any(isinstance(d.value, Copy) for d in self.defs.get(name, [])):
            how = f"`{user}` names the same array, bound{where}"
        else:
            how = f"the array a view was taken of, bound{where}"
        later = f"line {read.loc.line}" if read is not None and read.loc else "the result"
        kind = "augmented assignment of" if isinstance(write, Assign) else "in-place write to"
        message = (f"{kind} `{user}` changes memory that `{other_user}` shares ({how}), and {later} reads "
                   f"`{other_user}` afterwards: NumPy shows it the new values, generated code would not")
        hint = f"copy the array before writing into it: `{user} = {user}.copy()`"
        if bound is not None and viewed_base(bound.value, self.fn.arrays) is not None:
            text = bound.loc.text if bound.loc else ""
            copied = f"`{text}.copy()`" if text.startswith(f"{other_user} = ") and "#" not in text else "`.copy()`"
            hint = f"end the sharing where `{other_user}` is bound: {copied}"
        if isinstance(write, Assign):
            op = OPERATORS.get(write.value.rule.name, "<op>")
            hint += f", or rebind instead of updating: `{user} = {user} {op} ...`"
        return UnsupportedError(located_at(message, write.loc, hint))


def _shape_reads_only(s) -> set[str]:
    """The names statement `s` reads only for their shapes."""
    if not (isinstance(s, Assign) and isinstance(s.value, Prim)):
        return set()
    positions = s.value.rule.shape_only
    shaped = {a.name for i, a in enumerate(s.value.args) if i in positions and isinstance(a, Var)}
    valued = {a.name for i, a in enumerate(s.value.args) if i not in positions and isinstance(a, Var)}
    valued |= {a.name for _, a in s.value.kwargs if isinstance(a, Var)}
    return shaped - valued


def _common_prefix(a: tuple, b: tuple) -> tuple:
    n = 0
    while n < min(len(a), len(b)) and a[n] is b[n]:
        n += 1
    return a[:n]

"""What the reverse sweep needs to know about a normalized function.

- activity: which variables carry derivatives (depend on the inputs differentiated *and*
  reach the differentiated output); only active statements get adjoint code;
- replay: single-definition temporaries inside loops that the reverse sweep recomputes
  cheaply instead of taping them; `popped` are those of libm calls (sin, exp, ...), which
  are pushed once and popped once per iteration instead (a push and a pop cost less);
- needed/saved: which values the reverse sweep reads, and which of those the primal sweep
  overwrites (those get a tape, or for write-once arrays a cheap refill);
- homes: where each adjoint variable is set to zero in the reverse sweep;
- collapsed: loops that overwrite a taped value the reverse sweep never reads inside them:
  such a loop pushes the value once, after it, as if it were one assignment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from s2sad import ir
from s2sad.errors import NoRuleError, TypesNeeded, UnsupportedError, located_at
from s2sad.ir import Assign, Const, Copy, Effect, For, If, Load, Prim, Push, Store, Var, While
from s2sad.rules.registry import Opaque
from s2sad.sharing import check_shared_memory, may_share, view_source

def diff_positions(prim: Prim) -> list[int]:
    if not prim.rule.differentiable:
        return []
    return [i for i in prim.rule.template().differentiable_positions() if i < len(prim.args)]


def diff_operands(expr) -> list[str]:
    """Variables whose adjoint this expression's adjoint writes to."""
    if isinstance(expr, Prim) and expr.rule.reads_tape:
        return ir.atom_vars(expr.args)
    if isinstance(expr, Prim):
        return [expr.args[i].name for i in diff_positions(expr) if isinstance(expr.args[i], Var)]
    if isinstance(expr, Load):
        return [expr.base.name]
    return ir.atom_vars([expr.value])


def template_mapping(prim: Prim, g: str | None, out: str, t=None) -> dict[str, str]:
    """Template parameter -> the text it stands for in `prim`'s adjoint (or tangent template `t`):
    its operands, out and (unless None) g."""
    from s2sad.codegen.emit import atom, const_text

    t = t or prim.rule.template()
    mapping = {t.params[1]: out} if g is None else {t.params[0]: g, t.params[1]: out}
    for param, arg in zip(t.params[2:], prim.args):
        mapping[param] = atom(arg)
    kwargs = dict(prim.kwargs)
    for param in t.params[2 + len(prim.args):]:
        mapping[param] = atom(kwargs[param]) if param in kwargs else const_text(t.defaults.get(param))
    return mapping


def call_spellings(value) -> set[str]:
    """How generated code spells the call `value` (a Prim of a function, not an operator), in the
    primal and in rule templates (`math.cos(E)` there is `np.cos(E)` here)."""
    from s2sad.codegen.emit import atom, expr_text

    if not isinstance(value, Prim) or value.rule.operator or value.kwargs:
        return set()
    args = ", ".join(atom(a) for a in value.args)
    return {expr_text(value), f"{value.rule.spelled}({args})"}


def reuse_pattern(calls: dict[str, str]) -> re.Pattern:
    """Matches the call texts of `calls` where they start a call (not `x.np.cos(E)`, `cnp.cos(E)`)."""
    return re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(calls, key=len, reverse=True))) + ")")


def template_reads(prim: Prim, positions: list[int]) -> set[str]:
    """Template parameter names the contributions for `positions` read (besides g)."""
    import libcst as cst

    t = prim.rule.template()
    names: set[str] = set()

    def collect(node):
        class V(cst.CSTVisitor):
            def visit_Name(self, n):
                names.add(n.value)

        node.visit(V())

    for i in positions:
        collect(t.results[i])
    for stmt in t.statements:  # locals: count what they read too (conservative)
        collect(stmt)
    return names & set(t.params)


@dataclass
class Analysis:
    fn: ir.Function
    wrt: list[str]
    active: set = field(default_factory=set)
    varied: set = field(default_factory=set)
    depth: dict = field(default_factory=dict)  # id(stmt) -> loop depth
    block_of: dict = field(default_factory=dict)  # id(stmt) -> the block list holding it
    path: dict = field(default_factory=dict)  # id(stmt) -> ids of enclosing blocks, outermost first
    owner: dict = field(default_factory=dict)  # id(block) -> statement owning it (None for the body)
    defs: dict = field(default_factory=dict)  # name -> [Assign|For] writing it
    stores: dict = field(default_factory=dict)  # name -> [Store]
    _same_arrays: dict | None = None  # name -> the names plain copies tie to it (same_array)
    uses: dict = field(default_factory=dict)  # name -> [stmt reading it directly]
    replay: dict = field(default_factory=dict)  # name -> defining Assign
    popped: dict = field(default_factory=dict)  # replay names whose values come off a tape (costly rules)
    recompute_libm: bool = False  # no popped values: a CUDA thread cannot keep a tape
    direct: set = field(default_factory=set)
    needed: set = field(default_factory=set)
    saved: set = field(default_factory=set)
    collapsed: dict = field(default_factory=dict)  # id(loop) -> saved names it pushes once, after it
    quiet_defs: set = field(default_factory=set)  # ids of Assigns inside those loops: no push, no restore
    store_fill: dict = field(default_factory=dict)  # id(Store) -> fill value restoring it
    homes: dict = field(default_factory=dict)  # id(block) -> [names zeroed there]
    home_defs: set = field(default_factory=set)  # ids of Assigns that need no adjoint reset
    working: set = field(default_factory=set)  # ids of statements whose reverse is not empty
    readers: dict = field(default_factory=dict)  # name -> {id: statement whose reverse reads its primal value}
    run_time_dtype: set = field(default_factory=set)  # arrays of a dtype known at run time: maybe ints
    top: dict = field(default_factory=dict)  # id(stmt) -> position of its top-level statement in the body
    _reverse_reads: dict = field(default_factory=dict)  # id(stmt) -> reverse_reads(stmt)

    # ------------------------------------------------------------ structure
    def index(self):
        def visit(block, depth, path, owner):
            self.owner[id(block)] = owner
            path = path + [id(block)]
            for s in block:
                self.depth[id(s)] = depth
                self.block_of[id(s)] = block
                self.path[id(s)] = path
                for name in ir.stmt_reads(s):
                    self.uses.setdefault(name, []).append(s)
                if isinstance(s, (Assign, For)):
                    self.defs.setdefault(s.target, []).append(s)
                if isinstance(s, Store):
                    self.stores.setdefault(s.base, []).append(s)
                inner = depth + isinstance(s, (For, While))
                for child in ir.children(s):
                    visit(child, inner, path, s)

        visit(self.fn.body, 0, [], None)
        for i, t in enumerate(self.fn.body):
            for s, _, _ in ir.walk([t]):
                self.top[id(s)] = i

    def stmts(self):
        for s, _, _ in ir.walk(self.fn.body):
            yield s

    # -------------------------------------------------------------- activity
    def activity(self, outs: list[str]):
        varied = set(self.wrt)
        useful = set(outs)
        discrete = self.discrete_arrays()
        changed = True
        while changed:
            changed = False
            for s in self.stmts():
                if isinstance(s, Assign) and s.target not in varied and set(diff_operands(s.value)) & varied:
                    varied.add(s.target)
                    changed = True
                if isinstance(s, (Store, Push)) and s.value in [Var(v) for v in varied]:
                    written = ir.stmt_writes(s)[0]
                    if written not in varied and written not in discrete:
                        varied.add(written)
                        changed = True
                if isinstance(s, Assign) and s.target in useful:
                    new = set(diff_operands(s.value)) - useful
                elif isinstance(s, (Store, Push)) and ir.stmt_writes(s)[0] in useful - discrete:
                    new = set(ir.atom_vars([s.value])) - useful
                else:
                    new = set()
                if new:
                    useful |= new
                    changed = True
        self.varied = varied
        self.active = varied & useful
        self.run_time_dtype = self.arrays_of_run_time_dtype() & self.active
        self.check_opaque(useful)

    def discrete_arrays(self) -> set[str]:
        """Names bound only to arrays of bools or ints made here (`np.zeros(shape, dtype=np.bool_)`), or to
        views and other names of them: a value written into one is cast to its dtype, with no derivative."""
        found: set = set()
        changed = True
        while changed:
            changed = False
            for name, defs in self.defs.items():
                if name not in found and name not in self.fn.params and all(
                        isinstance(d, Assign) and self.discrete(d.value, found) for d in defs):
                    found.add(name)
                    changed = True
        return found

    def discrete(self, value, found: set) -> bool:
        """Does this right-hand side give an array of bools or ints: made with such a dtype (`np.zeros(n, dtype=int)`,
        `x.astype(np.int64)`), np.full of an int, np.arange of ints, or a copy or view of an array in `found`?"""
        if isinstance(value, Copy):
            return isinstance(value.value, Var) and value.value.name in found
        if isinstance(value, Load):
            return value.base.name in found and any(isinstance(i, ir.Slice) for i in value.index)
        if not isinstance(value, Prim):
            return False
        dtypes = [a.value for a in value.args[1:] + tuple(v for k, v in value.kwargs if k == "dtype")
                  if isinstance(a, Const) and isinstance(a.value, np.dtype)]
        if dtypes:
            return dtypes[0].kind in "biu"
        if not value.args:
            return False
        name, first = value.rule.name, value.args[0]
        if name == "arange":
            return all(self.known_int(a.name) if isinstance(a, Var) else type(a.value) is int for a in value.args)
        if name == "full" and len(value.args) == 2:  # np.full(n, 0): the fill's type
            return isinstance(value.args[1], Const) and type(value.args[1].value) in (int, bool)
        return name in _MADE_LIKE and isinstance(first, Var) and first.name in found

    def arrays_of_run_time_dtype(self) -> set[str]:
        """Names bound only to arrays whose dtype is that of a parameter not differentiated (`np.zeros_like(k)`,
        `np.empty(n, dtype=k.dtype)`), views and copies of them: it may be an integer dtype, so a value stored into
        one carries its derivative only where the array holds floats (decided where the code runs, if_inexact)."""
        found = {p for p in self.fn.params if p not in self.varied}
        changed = True
        while changed:
            changed = False
            for name, defs in self.defs.items():
                if name not in found and all(isinstance(d, Assign) and self.dtype_of_one_in(d.value, found)
                                             for d in defs):
                    found.add(name)
                    changed = True
        return found - set(self.fn.params)

    def dtype_of_one_in(self, value, found: set) -> bool:
        """Does this right-hand side give an array with the dtype of an array in `found` (or one named by a dtype
        that is not a constant)?"""
        if isinstance(value, (Copy, Load)):
            return self.discrete(value, found)  # a copy or a view
        if not isinstance(value, Prim) or value.rule.name not in _DTYPE_AT:
            return False
        at = _DTYPE_AT[value.rule.name]
        dtype = dict(value.kwargs).get("dtype", value.args[at] if len(value.args) > at else None)
        if isinstance(dtype, Var):  # `dtype=k.dtype`
            return self.names_dtype_of_one_in(dtype.name, found)
        first = value.args[0] if value.args else None
        return dtype is None and value.rule.name in _MADE_LIKE and isinstance(first, Var) and first.name in found

    def names_dtype_of_one_in(self, name: str, found: set) -> bool:
        """Is `name` the dtype of an array in `found` (`k.dtype`), or a dtype not known here (a parameter)?"""
        defs = self.defs.get(name, [])
        if not defs:
            return name in self.fn.params
        return all(isinstance(d, Assign) and isinstance(d.value, Prim) and isinstance(d.value.rule, Opaque)
                   and d.value.spelled == "dtype" and isinstance(d.value.args[0], Var)
                   and d.value.args[0].name in found for d in defs)

    def check_opaque(self, useful: set):
        """A call with no rule was kept as written on the promise that it is inactive: refuse it where its
        result reaches the differentiated output and an operand depends on a differentiated input."""
        for s in self.stmts():
            if isinstance(s, Assign) and isinstance(s.value, Prim) and isinstance(s.value.rule, Opaque) \
                    and s.target in useful and set(ir.atom_vars(ir.expr_operands(s.value))) & self.varied:
                raise NoRuleError(s.value.rule.refusal)
            if isinstance(s, Effect) and not s.raises and isinstance(s.call.rule, Opaque) and s.call.rule.name != "print":
                operands = set(ir.atom_vars(ir.expr_operands(s.call)))
                if operands & self.varied and self.sharing_memory(operands) & useful:
                    spelled = s.call.spelled or s.call.rule.name
                    raise UnsupportedError(located_at(
                        f"`{spelled}` is called for its effect on arrays, one of which depends on a differentiated "
                        "input: s2sad cannot see what it writes, and the derivative would leave that out", s.loc,
                        "write the change as an assignment (`a[idx] = v` for np.put(a, idx, v), `a[mask] = v` for "
                        "np.putmask), or assign a function's result (`y = f(x)`)"))

    def sharing_memory(self, names: set) -> set:
        """`names` and every name that may share memory with one of them (copies and views, either way)."""
        links = [(s.target, view) for s in self.stmts() if isinstance(s, Assign) and may_share(s.value)
                 for view in ir.atom_vars(ir.expr_operands(s.value))]
        group, grew = set(names), True
        while grew:
            grew = False
            for a, b in links:
                if (a in group) != (b in group):
                    group |= {a, b}
                    grew = True
        return group

    def known_int(self, name: str, seen: frozenset = frozenset()) -> bool:
        """Is `name` surely an integer scalar (a loop counter, a length, int arithmetic on those)?"""
        defs = self.defs.get(name, [])
        if not defs or name in self.fn.params:
            return False
        if name in seen:  # a counter's own update (k = k + 1): int if its other definitions are
            return True
        return all(self.int_def(d, seen | {name}) for d in defs)

    def int_def(self, d, seen) -> bool:
        if isinstance(d, For):
            return True
        v = d.value
        if isinstance(v, Load):  # an item of a shape tuple
            base_defs = self.defs.get(v.base.name, [])
            return bool(base_defs) and all(isinstance(b, Assign) and isinstance(b.value, Prim)
                                           and b.value.rule.name == "shape" for b in base_defs)
        operands = ir.expr_operands(v)
        if isinstance(v, Prim) and v.rule.int_result:
            return True
        if isinstance(v, Prim) and not v.rule.keeps_int:
            return False
        return all(self.known_int(a.name, seen) if isinstance(a, Var) else
                   isinstance(a.value, int) and not isinstance(a.value, bool) for a in operands)

    def fancy(self, index) -> bool:
        """An index with an item that may be an integer array (`x[idx]`, `y[I, J]`): a position may repeat, so
        its reads need a scatter-add adjoint and its writes keep only the last."""
        return any(isinstance(i, Var) and not self.known_int(i.name) for i in index)

    def has_adjoint(self, s) -> bool:
        """Does the statement pass derivatives to its operands (or kill an adjoint)?"""
        if isinstance(s, Assign):
            return s.target in self.active and bool(set(diff_operands(s.value)) & self.active)
        if isinstance(s, Store):
            return s.base in self.active
        if isinstance(s, Push):
            return s.tape in self.active
        return False

    # ---------------------------------------------------------------- replay
    def find_replay(self):
        params, outs = set(self.fn.params), set(self.fn.outputs)
        cands = {}
        for name, defs in self.defs.items():
            s = defs[0]
            if len(defs) != 1 or not isinstance(s, Assign) or name in params or name in outs or name in self.stores:
                continue
            if self.depth[id(s)] == 0 or (isinstance(s.value, Prim) and not s.value.rule.cheap):
                continue
            if isinstance(s.value, Prim) and s.value.rule.reads_tape:
                continue  # not pure: a replay would pop the tape again
            block = self.block_of[id(s)]
            pos = _position(block, s)
            uses = self.uses.get(name, [])
            if not all(isinstance(u, (Assign, Store)) and self.block_of[id(u)] is block
                       and _position(block, u) > pos for u in uses):
                continue
            cands[name] = s
        self.popped = {} if self.recompute_libm else {
            n: s for n, s in cands.items() if isinstance(s.value, Prim) and s.value.rule.costly
            and not any(isinstance(u, Store) for u in self.uses.get(n, []))}  # an array keeps it
        changed = True
        while changed:
            changed = False
            memo: dict[str, int] = {}
            for name, s in list(cands.items()):
                if name in self.popped:
                    continue  # its value comes off a tape: its operands may change
                block = self.block_of[id(s)]
                last = self.last_replay_point(name, cands, block, memo)
                operands = set(ir.atom_vars(ir.expr_operands(s.value)))
                between = block[_position(block, s) + 1:last]
                if any(ir.all_writes(b) & operands for b in between):
                    del cands[name]
                    changed = True
        self.replay = cands

    def replay_operands(self, name) -> set[str]:
        """What recomputing the replay temporary `name` reads (nothing when it is popped off a tape)."""
        if name in self.popped:
            return set()
        return set(ir.atom_vars(ir.expr_operands(self.replay[name].value)))

    def reused_calls(self, s) -> dict[str, str]:
        """Calls in the adjoint of `s` whose value a popped temporary of its block holds there:
        call text -> temporary. `np.cos(E)` in the adjoint of `y = np.sin(E)` is `c` when the primal
        computed `c = np.cos(E)` in the same block and E does not change between the two."""
        block = self.block_of[id(s)]
        calls = {}
        for name, d in self.popped.items():
            if d is s or self.block_of[id(d)] is not block:
                continue
            operands = set(ir.atom_vars(ir.expr_operands(d.value)))
            lo, hi = sorted((_position(block, d), _position(block, s)))
            if operands & ir.all_writes(s) or any(operands & ir.all_writes(b) for b in block[lo + 1:hi]):
                continue
            for text in call_spellings(d.value):
                calls[text] = name
        return calls

    def last_replay_point(self, name, cands, block, memo: dict) -> int:
        """Position of the last statement whose adjoint recomputes `name`: one that reads it backwards,
        or that replays another candidate computed from it (at the latest where that one's own adjoint reads
        it back, as np.sqrt's and np.exp's do). Its operands must not change before there.
        (Uses whose adjoints ignore the value, like `u = u + k` for k, do not count: RK4's stages
        replay instead of filling five tapes per step.) Candidates only feed later statements of
        their block, so the recursion ends; `memo` keeps it linear."""
        if name not in memo:
            own = cands.get(name)  # `e = np.exp(a)`: its own adjoint reads `e`, recomputed there
            last = _position(block, own) if own is not None and name in self.reverse_reads(own) else -1
            for u in self.uses.get(name, []):
                if name in self.reverse_reads(u):
                    last = max(last, _position(block, u))
                if isinstance(u, Assign) and u.target in cands:
                    last = max(last, self.last_replay_point(u.target, cands, block, memo))
            memo[name] = last
        return memo[name]

    def find_direct(self):
        params, outs = set(self.fn.params), set(self.fn.outputs)
        for name, defs in self.defs.items():
            uses = self.uses.get(name, [])
            if len(defs) != 1 or not isinstance(defs[0], Assign) or name in params or name in outs:
                continue
            if len(uses) != 1 or not isinstance(uses[0], (Assign, Store)) or name in self.stores:
                continue
            if isinstance(uses[0], Assign) and isinstance(uses[0].value, Load) and uses[0].value.base.name == name:
                continue  # indexed reads accumulate into a whole adjoint array
            block = self.block_of[id(defs[0])]
            if self.block_of[id(uses[0])] is block and _position(block, uses[0]) > _position(block, defs[0]):
                self.direct.add(name)

    # ---------------------------------------------------- needed and saved
    def reverse_reads(self, s) -> set[str]:
        """Primal variables the adjoint of `s` reads (fixed once activity is known: kept per statement)."""
        found = self._reverse_reads.get(id(s))
        if found is None:
            found = self._reverse_reads[id(s)] = self._find_reverse_reads(s)
        return found

    def _find_reverse_reads(self, s) -> set[str]:
        if not self.has_adjoint(s) or isinstance(s, Push):
            return set()
        if isinstance(s, Store):
            return set(ir.atom_vars(ir.index_atoms(s.index)))
        v = s.value
        if isinstance(v, Load):
            reads = set(ir.atom_vars(ir.index_atoms(v.index)))
            # `c = c[1:]` (in a loop, say): the adjoint of the old `c` takes its shape from its value
            return reads | {s.target} if v.base.name == s.target else reads
        if isinstance(v, Prim) and v.rule.reads_tape:
            return set()  # their adjoints read the adjoint tape's length, not the tape
        if isinstance(v, Prim):
            positions = [i for i in diff_positions(v) if isinstance(v.args[i], Var) and v.args[i].name in self.active]
            calls = self.reused_calls(s) if positions else {}
            if calls:
                return self.reads_with_reuse(s, positions, calls)
            names = template_reads(v, positions)
            t = v.rule.template()
            bound = dict(zip(t.params[2:], v.args))
            bound.update(dict(v.kwargs))
            out = {bound[n].name for n in names if n in bound and isinstance(bound[n], Var)}
            if t.params[1] in names:
                out.add(s.target)
            return out
        return set()

    def reads_with_reuse(self, s: Assign, positions: list[int], calls: dict[str, str]) -> set[str]:
        """reverse_reads of `s` when its adjoint's calls in `calls` read popped temporaries instead."""
        from s2sad.codegen.emit import instantiate

        g, out = "g_placeholder_", "out_placeholder_"
        t = s.value.rule.template()
        mapping = template_mapping(s.value, g, out)
        texts = [instantiate(t.results[i], mapping) for i in positions]
        texts += [instantiate(stmt.value, mapping) for stmt in t.statements]
        pattern = reuse_pattern(calls)
        reads = set()
        for text in texts:
            reads |= {calls[m] for m in pattern.findall(text)}
            reads |= set(re.findall(r"[A-Za-z_]\w*", pattern.sub("", text)))
        operands = set(ir.atom_vars(s.value.args)) | {a.name for _, a in s.value.kwargs if isinstance(a, Var)}
        found = reads & (operands | set(calls.values()))
        if out in reads:
            found.add(s.target)
        return found

    def save_kind(self, name) -> bool:
        if name in self.replay:
            return False
        defs = [d for d in self.defs.get(name, []) if isinstance(d, Assign)]
        if self.final_value_only(name, defs):
            return False
        if name in self.fn.params:
            return bool(defs)
        return len(defs) > 1 or any(self.depth[id(d)] > 0 for d in defs)

    def final_value_only(self, name, defs) -> bool:
        """Every reverse-sweep read of `name` comes after all its writes (in later top-level statements):
        the reverse reaches those reads first, while `name` still holds its last value, so no tape."""
        last_def = max((self.top[id(d)] for d in defs), default=-1)
        return all(self.top[id(r)] > last_def for r in self.readers.get(name, {}).values())

    def read_back(self, names, reader):
        for name in names:
            self.readers.setdefault(name, {})[id(reader)] = reader
        self.needed |= names

    def needs(self):
        changed = True
        while changed:
            before = (len(self.needed), len(self.working), sum(map(len, self.readers.values())))
            for s in self.stmts():
                if self.has_adjoint(s):
                    self.read_back(self.reverse_reads(s), s)
            for name in list(self.needed):
                if name in self.replay:
                    self.read_back(self.replay_operands(name), self.replay[name])
            self.saved = {n for n in self.needed if self.save_kind(n)}
            for name in self.stores:
                if self.same_array(name) & self.needed:
                    self.plan_stores(name)
            self.working = set()
            self.mark_working(self.fn.body)
            for s in self.stmts():
                if id(s) in self.working and isinstance(s, (If, For)):  # a While replays by its trip count
                    self.read_back(set(ir.stmt_reads(s)), s)
            changed = (len(self.needed), len(self.working), sum(map(len, self.readers.values()))) != before

    def same_array(self, name: str) -> set[str]:
        """`name` and the names plain copies tie to it (`w = v`, a swap's `v_old = v`): a store through one
        changes the values every other one reads, so a store is restored where any of them is needed."""
        if self._same_arrays is None:
            group: dict = {}
            for s in self.stmts():
                if isinstance(s, Assign) and isinstance(s.value, Copy) and isinstance(s.value.value, Var):
                    joined = group.get(s.target, {s.target}) | group.get(s.value.value.name, {s.value.value.name})
                    for n in joined:
                        group[n] = joined
            self._same_arrays = group
        return self._same_arrays.get(name, {name})

    def collapse_loops(self):
        """Newton's `E` is read by the reverse sweep only after its while loop, so the loop pushes it
        once (after it) and the reverse restores it once, after the loop's adjoint: one push per solve,
        not one per step. The outermost such loop of each name; never a loop whose adjoint zeroes the
        name's adjoint (that reads its shape), nor names written by stores or as loop targets."""
        loop_targets = {s.target for s in self.stmts() if isinstance(s, For)}
        for name in sorted(self.saved - loop_targets - set(self.stores)):
            readers = set(self.readers.get(name, {}))
            homes = {block for block, names in self.homes.items() if name in names}
            self.collapse_in(self.fn.body, name, readers | homes)
            for block in [self.fn.body] + [c for s in self.stmts() for c in ir.children(s)]:
                self.skip_overwritten(block, name, readers | homes)

    def skip_overwritten(self, block, name, touched: set):
        """An assignment of `name` that a later one of its block overwrites (pushing it, or skipped in
        turn), with no reverse-sweep read of `name` in between, neither pushes nor restores: the value
        it wrote is never read backwards (Newton's `E = M[i]`, overwritten by the loop after it)."""
        covered = False  # walking back: a later statement overwrites `name`, and the tape holds that
        for s in reversed(block):
            if _inside(s) & touched:
                covered = False
            elif isinstance(s, Assign) and s.target == name:
                if covered:
                    self.quiet_defs.add(id(s))
                covered = True
            elif name in self.collapsed.get(id(s), []):
                covered = True
            elif name in ir.all_writes(s):
                covered = False

    def collapse_in(self, block, name, touched: set):
        for s in block:
            if not ir.children(s) or name not in ir.all_writes(s):
                continue
            inside = _inside(s)
            if isinstance(s, (For, While)) and not inside & touched:
                self.collapsed.setdefault(id(s), []).append(name)
                self.quiet_defs |= {id(d) for d in self.defs.get(name, []) if id(d) in inside}
                continue
            for child in ir.children(s):
                self.collapse_in(child, name, touched)

    def mark_working(self, block) -> bool:
        any_work = False
        for s in block:
            work = self.has_adjoint(s)
            work |= isinstance(s, Assign) and s.target in self.saved
            work |= isinstance(s, Store) and id(s) in self.store_fill
            work |= isinstance(s, Assign) and s.target in self.active and id(s) not in self.home_defs
            for child in ir.children(s):
                work |= self.mark_working(child)
            if work:
                self.working.add(id(s))
                any_work = True
        return any_work

    def plan_stores(self, name):
        stores = self.stores[name]
        fill = self.write_once_fill(name, stores)
        for s in stores:
            self.store_fill[id(s)] = fill

    def write_once_fill(self, name, stores):
        """The fill value when every element of `name` is written at most once, else None."""
        defs = self.defs.get(name, [])
        if len(defs) != 1 or not isinstance(defs[0], Assign) or self.depth[id(defs[0])] != 0:
            return None
        value = defs[0].value
        if not (isinstance(value, Prim) and value.rule.fills is not None):
            return None
        if any(isinstance(s, Assign) and isinstance(s.value, Copy) and s.value.value == Var(name)
               for s in self.stmts()):
            return None  # aliased
        consts, loops = [], []
        for s in stores:
            if self.depth[id(s)] == 0 and all(isinstance(i, Const) and isinstance(i.value, int) for i in s.index):
                consts.append(tuple(i.value for i in s.index))
                continue
            loop = self.enclosing_loops(s)
            if len(loop) != 1 or not isinstance(loop[0], For) or s.index != (Var(loop[0].target),):
                return None
            f = loop[0]
            if not (isinstance(f.start, Const) and isinstance(f.step, Const) and f.step.value > 0):
                return None
            if len(self.defs.get(f.target, [])) != 1:
                return None
            loops.append(f)
        if len(loops) > 1 or len(set(consts)) != len(consts):
            return None
        if loops and any(len(c) != 1 or c[0] >= loops[0].start.value or c[0] < 0 for c in consts):
            return None
        return value.rule.fills

    def enclosing_loops(self, s) -> list:
        loops = []
        for block_id in self.path[id(s)]:
            owner = self.owner[block_id]
            if isinstance(owner, (For, While)):
                loops.append(owner)
        return loops

    # ------------------------------------------------------------------ homes
    def place_homes(self):
        body = self.fn.body
        for name in sorted(self.active):
            if name in self.direct:
                continue
            refs = [s for s in self.stmts() if name in ir.stmt_reads(s) or name in ir.stmt_writes(s)]
            if name in self.fn.params or not refs:
                self.homes.setdefault(id(body), []).append(name)
                continue
            common = _common_prefix([self.path[id(s)] for s in refs])
            block = body if name in self.fn.outputs else self.block_by_id(common[-1])
            branches = None
            while True:
                first = next(s for s in block if name in ir.all_reads(s) | ir.all_writes(s))
                if _defines_first(first, name):  # so the block's adjoint may start `name`'s from zero
                    if isinstance(first, Assign):
                        self.home_defs.add(id(first))
                    break
                if name not in self.fn.outputs and (branches := _branch_homes(block, name)) is not None:
                    break
                if block is body or not self.enclosing_loops(first):
                    break  # every use of `name` is in this block, and no loop carries a value of it into it
                block = self.block_of[id(self.owner[id(block)])]
            for home, first in branches if branches is not None else [(block, None)]:
                if isinstance(first, Assign):
                    self.home_defs.add(id(first))
                self.homes.setdefault(id(home), []).append(name)

    def reread_varying_homes(self):
        """A name zeroed at the top of a loop's reversed body takes its shape from its primal value,
        which there must be this iteration's: where the shape may change between iterations
        (`cov[i:, i] = data[:, i] @ data[:, i:]`), the value is saved, never recomputed."""
        varying = set()
        for s in self.stmts():
            if isinstance(s, (For, While)):
                varying |= shape_varying(s)
        for block_id, names in self.homes.items():
            if block_id == id(self.fn.body):
                continue
            for name in set(names) & varying:
                self.replay.pop(name, None)
                self.popped.pop(name, None)
                first = next(s for s in self.block_by_id(block_id) if name in ir.all_reads(s) | ir.all_writes(s))
                self.read_back({name}, first)

    def block_by_id(self, block_id):
        if block_id == id(self.fn.body):
            return self.fn.body
        for s in self.stmts():
            for child in ir.children(s):
                if id(child) == block_id:
                    return child
        raise KeyError(block_id)

    def aliased_at_store(self, name: str) -> bool:
        """May an in-place write into `name` reach an argument's array or another name's?

        Safe: a local created inside the function, or an argument / copied name that the top
        level rebinds to a fresh array (`x = copy_adj(x)`, as generated adjoint code does)
        before any write into it, or one that becomes another name only after its writes (as
        `h = h_new` late in generated tangent code).
        """
        copies = [d for d in self.defs.get(name, []) if isinstance(d, Assign) and may_share(d.value)
                  and not self.handed_over(d)]
        if name not in self.fn.params and not copies:
            return False
        aliasing = [self.top[id(d)] for d in copies] + ([-1] if name in self.fn.params else [])
        fresh = [i for i, s in enumerate(self.fn.body) if isinstance(s, Assign) and s.target == name
                 and isinstance(s.value, Prim) and s.value.rule.fresh]
        for store in self.stores[name]:
            if self.made_fresh_before(store, name):
                continue
            at = self.top[id(store)]
            # an aliasing binding reaches this write unless it comes later (in a later top-level
            # statement) or a top-level fresh rebinding sits between the two
            if any(a <= at and not any(a < f < at for f in fresh) for a in aliasing):
                return True
        return False

    def made_fresh_before(self, store, name: str) -> bool:
        """Is `name` last bound, before `store` in the store's own block, to a new array (`u = u.copy()`,
        what the refusal's hint asks for), with no binding of it nested in between?"""
        block = self.block_of[id(store)]
        for s in reversed(block[:_position(block, store)]):
            binds = [t for t, _, _ in ir.walk([s]) if isinstance(t, (Assign, For)) and t.target == name]
            if binds:
                return binds == [s] and isinstance(s.value, Prim) and s.value.rule.fresh
        return False

    def handed_over(self, d: Assign, seen: frozenset = frozenset()) -> bool:
        """`x = y`, or a view of `y` (`x = y.T`, `x = y[1:]`), where `y` is a new array (or a name it
        was handed over to: an inlined helper's `return 2.0 * np.outer(x, x)`) used before only to
        compute values or to be filled (as `x = x_new` in generated tangent code, or `out[i] = ...` then
        `u = out` in a time step) and never after: the buffer keeps one live name, so a write through
        `x` reaches no one else. In a loop, `y` must be made anew in the same pass, before it is filled."""
        y = d.value.value.name if isinstance(d.value, Copy) and isinstance(d.value.value, Var) else view_source(d.value)
        if y is None or id(d) in seen:
            return False
        defs, block = self.defs.get(y, []), self.block_of[id(d)]
        if y in self.fn.params or not defs or not all(
                isinstance(e, Assign) and (isinstance(e.value, Prim) and not may_share(e.value) or _constant(e.value)
                                           or self.handed_over(e, seen | {id(d)})) for e in defs):
            return False
        at = _position(block, d)
        made = [_position(block, e) for e in defs if self.block_of[id(e)] is block and _position(block, e) < at]
        for u in self.uses.get(y, []):
            if u is d:
                continue
            top = self.ancestor_in(block, u)
            if top is None or _position(block, top) >= at or isinstance(u, Assign) and may_share(u.value):
                return False
            if top is not u and not (isinstance(u, (Assign, Store)) and made and min(made) < _position(block, top)):
                return False  # filled in a nested block: only a buffer made anew in this pass, before it
        return True

    def ancestor_in(self, block, s):
        """The statement of `block` that is `s` or holds it; None if `s` is outside `block`."""
        while self.block_of[id(s)] is not block:
            s = self.owner[id(self.block_of[id(s)])]
            if s is None:
                return None
        return s

    def check_tuples(self):
        """`np.sin((a, b))` with differentiated a, b: the tuple is built by a primitive with no derivative."""
        for s in self.stmts():
            if isinstance(s, Assign) and isinstance(s.value, Prim) and s.value.rule.name == "make_tuple" \
                    and set(ir.atom_vars(s.value.args)) & self.varied:
                raise UnsupportedError(located_at(
                    "a tuple or list of differentiated values cannot be passed to a NumPy function here", s.loc,
                    "make it an array first: np.array([a, b]) or np.stack(...)"))

    def check_sharing(self):
        """Refuse writes through names that share memory. Code made without the argument types may have
        bound a helper's parameter as a copy where the argument is an array it writes into (`out *= 0.5` of
        madmom's `_sigmoid(x, out)`): its refusal asks for the types, and the code made for them decides."""
        try:
            self.check_stores()
            if not self.fn.generated:
                check_shared_memory(self.fn)
        except TypesNeeded:
            raise
        except UnsupportedError as exc:
            if self.fn.asks_types and not self.fn.typed:
                raise TypesNeeded(f"the arguments' types decide whether arrays share memory: {exc}") from None
            raise

    def check_stores(self):
        for name, stores in self.stores.items():
            if self.aliased_at_store(name):
                loc, user = stores[0].loc, self.fn.spelled.get(name, name)
                if name in self.fn.params:
                    msg = (f"in-place write to `{user}`, an argument: its derivative is with respect to the values "
                           "passed in, and the caller's array must not change")
                else:
                    msg = (f"in-place write to `{user}`, which is another name for an array or a view of one (a slice, "
                           "reshape, transpose, np.asarray, ...)")
                raise UnsupportedError(located_at(msg, loc, f"give `{user}` memory of its own before the first write: "
                                                            f"`{user} = {user}.copy()`"))


def _constant(value) -> bool:
    """A tuple of numbers known when the code is generated (`np.array([[1.0, 0.0], [0.0, 1.0]])`'s table): it
    holds no array memory, so an array made from it is new."""
    return isinstance(value, Copy) and isinstance(value.value, Const)


_MADE_LIKE = ("zeros_like", "ones_like", "empty_like", "full_like", "copy")  # an array of the operand's dtype
_DTYPE_AT = {"zeros": 1, "ones": 1, "empty": 1, "full": 2, "zeros_like": 1, "ones_like": 1, "empty_like": 1,
             "full_like": 2, "copy": 1}  # where these take a dtype by position


def shape_varying(loop) -> set[str]:
    """Names written in `loop` whose shape may differ from one iteration to the next: slices with
    bounds the loop changes, and what is computed from them. Integers derived from loop counters
    (`k = i + 1`) change shapes where they size an array (`np.zeros(k)`), not under elementwise
    arithmetic."""
    body = [s for s, _, _ in ir.walk(ir.children(loop)[-1])] + \
        ([s for s, _, _ in ir.walk(loop.test_body)] if isinstance(loop, While) else [])
    written = ir.all_writes(loop)
    counters = {loop.target} if isinstance(loop, For) else set()
    counters |= {s.target for s in body if isinstance(s, For)}
    varying: set[str] = set()
    changed = True
    while changed:
        changed = False
        for s in body:
            if not isinstance(s, Assign):
                continue
            operands = set(ir.atom_vars(ir.expr_operands(s.value)))
            if _varies(s.value, operands, written, counters, varying) and s.target not in varying:
                varying.add(s.target)
                changed = True
            elif operands & counters and _counts(s.value) and s.target not in counters:
                counters.add(s.target)
                changed = True
    return varying


def _counts(value) -> bool:
    """Does this keep an integer derived from a loop counter an integer (arithmetic, `int`, `len`)?"""
    if isinstance(value, Copy):
        return True
    return isinstance(value, Prim) and (value.rule.keeps_int or value.rule.int_result
                                        or not value.rule.differentiable)


def _varies(value, operands: set, written: set, counters: set, varying: set) -> bool:
    if operands & varying:
        return True
    if isinstance(value, Load):
        bounds = [p for item in value.index if isinstance(item, ir.Slice) for p in (item.lower, item.upper, item.step)]
        return bool(set(ir.atom_vars([b for b in bounds if b is not None])) & written)
    if isinstance(value, Prim) and not value.rule.elementwise:
        return bool(operands & counters)
    return False


def _defines_first(s, name: str) -> bool:
    """Does every path through statement `s` assign `name` before reading it?"""
    if isinstance(s, Assign):
        return s.target == name and name not in ir.atom_vars(ir.expr_operands(s.value))
    if isinstance(s, If) and name not in ir.atom_vars([s.test]):
        return all(_defined_first(b, name) for b in (s.body, s.orelse))
    return False


def _branch_homes(block, name: str) -> list | None:
    """Where `name` is last used in `block` by an `if` whose branches each assign it before reading it or leave
    it alone (poliastro's `D = nu_to_D(nu)` in two of farnocchia's branches, nested at different depths): the
    branches that assign it, each with that first statement, where its adjoint starts from zero; None where
    there is no such `if`. Zeroed above the `if`, the adjoint would read a value the other branches never bind."""
    uses = [s for s in block if name in ir.all_reads(s) | ir.all_writes(s)]
    if len(uses) != 1 or not isinstance(uses[0], If) or name in ir.atom_vars([uses[0].test]):
        return None
    homes = []
    for branch in (uses[0].body, uses[0].orelse):
        first = next((s for s in branch if name in ir.all_reads(s) | ir.all_writes(s)), None)
        if first is None:
            continue
        if _defines_first(first, name):
            homes.append((branch, first))
        elif (inner := _branch_homes(branch, name)) is not None:
            homes += inner
        else:
            return None
    return homes


def _defined_first(block, name: str) -> bool:
    first = next((s for s in block if name in ir.all_reads(s) | ir.all_writes(s)), None)
    return first is not None and _defines_first(first, name)


def _inside(stmt) -> set[int]:
    """ids of `stmt`, of the statements within it and of their blocks."""
    ids = {id(stmt)}
    for child in ir.children(stmt):
        ids.add(id(child))
        for b, _, _ in ir.walk(child):
            ids |= {id(b)} | {id(c) for c in ir.children(b)}
    return ids


def _position(block, stmt) -> int:
    for i, s in enumerate(block):
        if s is stmt:
            return i
    raise ValueError("statement not in block")


def _common_prefix(paths):
    prefix = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(prefix), len(p)) and prefix[n] == p[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def analyze_forward(fn: ir.Function, wrt: list[str]) -> Analysis:
    """Activity for forward mode: what depends on `wrt` and reaches any output."""
    a = Analysis(fn, wrt)
    a.index()
    a.check_sharing()
    a.activity(fn.outputs)
    a.check_tuples()
    return a


def analyze(fn: ir.Function, wrt: list[str], recompute_libm: bool = False) -> Analysis:
    """What the reverse sweep of `fn` (differentiating its first output) needs; `recompute_libm`:
    recompute the values of libm calls in loops rather than tape them (for CUDA kernels)."""
    a = Analysis(fn, wrt, recompute_libm=recompute_libm)
    a.index()
    a.check_sharing()
    a.activity(fn.outputs[:1])
    a.check_tuples()
    a.find_replay()
    a.find_direct()
    a.place_homes()
    a.reread_varying_homes()
    a.needs()
    a.collapse_loops()
    return a

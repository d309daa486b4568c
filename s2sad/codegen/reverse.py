"""Reverse mode: a primal sweep (with tapes where the analysis asks) then an adjoint sweep.

The adjoint sweep walks the program backwards, restoring every overwritten value it needs
from its tape as it passes the statement that overwrote it, so each statement's adjoint sees
exactly the values its primal saw. Cheap temporaries inside loops are recomputed ("replayed")
instead of taped; the values of libm calls among them are popped off a tape instead, and a rule's
own call (the `np.cos(x)` in sin's adjoint) reads such a value where the primal computed it too.
"""

from __future__ import annotations

from s2sad import ir
from s2sad.analyze import Analysis, diff_positions, reuse_pattern, template_mapping, template_reads
from s2sad.codegen.emit import Writer, atom, const_text, effect_text, expr_text, index_text, index_value_text, instantiate
from s2sad.codegen.fuse import fuse_elementwise
from s2sad.codegen.prune import (drop_dead_adjoints, live_statements, names_read, names_read_first,
                                 negate_after_summing, share_unchanged_adjoints,
                                 start_from_first_contribution)
from s2sad.codegen.statements import parsed_once
from s2sad.ir import Assign, Const, Copy, Effect, For, If, Load, Prim, Push, Store, Var, While
from s2sad.names import Names
from s2sad.sharing import viewed_base
from s2sad.units import pointwise


class ReverseGen:
    def __init__(self, fn: ir.Function, analysis: Analysis):
        self.fn = fn
        self.a = analysis
        self.names = Names(fn.user_names | fn.temps)
        self._bars: dict[str, str] = {}
        self.tapes: dict = {}  # var name or id(stmt) -> tape variable
        self.iters: dict = {}  # id(While) -> trip counter variable
        self.keep: set[int] | None = None  # primal statements to write (None: all); see prune.py
        self.entry_guards: dict[int, str] = {}  # id(Assign) -> condition, see first_iteration_dead
        self.guarded: dict[str, str] = {}  # name -> condition its adjoint contributions run under
        self.template_locals: set[str] = set()  # names rule templates' local assignments got
        self.zero_safe = ir.masks_nonfinite(fn)  # pointwise contributions are 0 where the cotangent is 0
        self.written_in_place = ir.written_in_place(fn)

    def bar(self, name: str) -> str:
        if name not in self._bars:
            self._bars[name] = self.names.fresh(name + "_bar")
        return self._bars[name]

    def tape(self, key, hint: str) -> str:
        if key not in self.tapes:
            self.tapes[key] = self.names.fresh(hint + "_tape")
        return self.tapes[key]

    # -------------------------------------------------------------- primal
    def primal_block(self, w: Writer, block):
        for s in block:
            if self.keep is not None and id(s) not in self.keep:
                continue
            w.comment(s.loc)
            if isinstance(s, Assign):
                text = expr_text(s.value)
                w.line(f"{s.target} = {f'copy_adj({text})' if self.snapshot(s) else text}")
                if (s.target in self.a.saved and id(s) not in self.a.quiet_defs) or s.target in self.popped():
                    w.line(f"{self.tape(s.target, s.target)}.append({s.target})")
            elif isinstance(s, Store):
                target = f"{s.base}[{index_text(s.index)}]"
                if self.a.store_fill.get(id(s), "none") is None:
                    w.line(f"{self.tape(id(s), s.base)}.append(copy_adj({target}))")
                w.line(f"{target} = {atom(s.value)}")
            elif isinstance(s, Push):
                w.line(f"{s.tape}.append({atom(s.value)})")
            elif isinstance(s, Effect):
                w.line(effect_text(s))
            elif isinstance(s, If):
                w.line(f"if {atom(s.test)}:")
                self.sub_block(w, s.body, self.primal_block)
                if s.orelse:
                    w.line("else:")
                    self.sub_block(w, s.orelse, self.primal_block)
            elif isinstance(s, For):
                w.line(f"for {s.target} in {range_text(s.start, s.stop, s.step)}:")
                self.sub_block(w, s.body, self.primal_block)
            elif isinstance(s, While):
                self.primal_while(w, s)
            for name in self.a.collapsed.get(id(s), []):  # the loop as one assignment of `name`
                w.line(f"{self.tape(name, name)}.append({name})")

    def snapshot(self, s: Assign) -> bool:
        """Is `s` a slice, a row (or reshape...) of an array the function writes into, whose value the adjoint
        reads (through it or a plain copy of it)? NumPy's slice is a view, which the write would change under
        the adjoint: it takes a copy (of an element whose rank is not known: the number itself)."""
        if s.target in self.fn.elements and s.target not in self.fn.arrays:
            return False  # a number: the write cannot change it
        return bool(self.a.same_array(s.target) & self.a.needed) \
            and viewed_base(s.value, self.fn.arrays) in self.written_in_place

    def primal_while(self, w: Writer, s: While):
        counted = id(s) in self.a.working
        if counted:
            n = self.iters.get(id(s)) or self.names.fresh("iterations")
            self.iters[id(s)] = n
            w.line(f"{n} = 0")
        self.primal_block(w, s.test_body)
        w.line(f"while {atom(s.test)}:")
        with w.block():
            self.primal_block(w, s.body)
            self.primal_block(w, s.test_body)
            if counted:
                w.line(f"{n} += 1")
            if not w.lines[-1].strip() or w.lines[-1].rstrip().endswith(":"):
                w.line("pass")
        if counted and self.a.depth[id(s)] > 0:
            w.line(f"{self.tape(id(s), n)}.append({n})")

    def sub_block(self, w: Writer, block, fn):
        with w.block():
            mark = w.mark()
            fn(w, block)
            if w.empty_since(mark):
                w.line("pass")

    # ------------------------------------------------------------- adjoint
    def reverse_block(self, w: Writer, block):
        for name in self.a.homes.get(id(block), []):
            if block is not self.fn.body:
                w.line(f"{self.bar(name)} = zeros_like_adj({name})")
        replayed: set = set()
        for s in reversed(block):
            if id(s) not in self.a.working:
                continue
            if isinstance(s, Assign):
                self.reverse_assign(w, s, block, replayed)
            elif isinstance(s, Store):
                self.reverse_store(w, s, block, replayed)
            elif isinstance(s, Push):
                self.reverse_push(w, s)
            elif isinstance(s, If):
                self.reverse_if(w, s)
            elif isinstance(s, For):
                self.reverse_for(w, s)
            elif isinstance(s, While):
                self.reverse_while(w, s)

    def popped(self) -> set[str]:
        """Loop temporaries the primal sweep pushes and the adjoint sweep pops (analysis.popped)."""
        return self.a.popped.keys() & self.a.needed

    def replay_for(self, w: Writer, s, block, replayed: set):
        """Recompute (or pop) the loop temporaries `s`'s adjoint reads, in program order."""
        want = self.a.reverse_reads(s) & set(self.a.replay)
        todo = list(want)
        while todo:
            name = todo.pop()
            for dep in self.a.replay_operands(name):
                if dep in self.a.replay and dep not in want:
                    want.add(dep)
                    todo.append(dep)
        order = {id(st): i for i, st in enumerate(block)}
        for name in sorted(want - replayed, key=lambda n: order[id(self.a.replay[n])]):
            self.replay(w, name, replayed)

    def replay(self, w: Writer, name: str, replayed: set):
        value = f"{self.tapes[name]}.pop()" if name in self.a.popped else expr_text(self.a.replay[name].value)
        w.line(f"{name} = {value}")
        replayed.add(name)

    def reuse(self, w: Writer, s, replayed: set):
        """A function rewriting `s`'s adjoint text so that the calls analysis.reused_calls finds read
        their popped temporaries (popped here if no reader came before, walking back)."""
        calls = self.a.reused_calls(s)
        if not calls:
            return lambda text: text
        pattern = reuse_pattern(calls)

        def rewrite(text: str) -> str:
            def use(m):
                name = calls[m.group(1)]
                if name not in replayed:
                    self.replay(w, name, replayed)
                return name
            return pattern.sub(use, text)
        return rewrite

    def reverse_assign(self, w: Writer, s: Assign, block, replayed):
        x, a = s.target, self.a
        w.comment(s.loc)
        has_adj = a.has_adjoint(s)
        out_text = x
        if x in a.saved and id(s) not in a.quiet_defs:
            if has_adj and isinstance(s.value, Prim) and s.value.rule.differentiable and \
                    s.value.rule.template().params[1] in template_reads(s.value, diff_positions(s.value)):
                out_text = self.names.fresh(x + "_out")
                w.line(f"{out_text} = {x}")
            w.line(f"{x} = restore({self.tapes[x]}, {x})")
        operands = set()
        if has_adj and isinstance(s.value, Prim) and s.value.rule.reads_tape:
            self.reverse_tape_read(w, s)
            return
        if has_adj:
            self.replay_for(w, s, block, replayed)
            contributions = self.contributions(w, s, out_text, self.reuse(w, s, replayed))
            operands = set(contributions)
            self.accumulate(w, contributions, exclude=x)
            if x in contributions and contributions[x] != self.bar(x):
                # `z = z.T`: the restored `z` has the old value's shape, which the adjoint takes on
                like = x if x in a.saved and id(s) not in a.quiet_defs else self.bar(x)
                w.line(f"{self.bar(x)} = unbroadcast({contributions[x]}, {like})")
        if x not in operands:
            guard = self.entry_guards.get(id(s))
            if guard is None:
                self.kill(w, s)
                return
            inner = Writer(w.level + 1)
            self.kill(inner, s)
            if inner.lines:
                w.line(f"if {guard}:")
                w.lines += inner.lines
            self.guarded[x] = guard

    def kill(self, w: Writer, s: Assign):
        """`x` was overwritten by `s`: the adjoint of its old value starts from zero."""
        x = s.target
        if x in self.a.active and x not in self.a.direct and id(s) not in self.a.home_defs:
            # A restored `x` holds its old value: its shape is right even where assignments change it.
            like = x if x in self.a.saved and id(s) not in self.a.quiet_defs else self.bar(x)
            w.line(f"{self.bar(x)} = zeros_like_adj({like})")

    # Tapes of generated code (reverse over reverse). The adjoint tape `t_bar` mirrors `t`:
    # walking back, it holds the adjoint of each element `t` held at that point.
    def reverse_tape_read(self, w: Writer, s: Assign):
        x, p = s.target, s.value
        tape_bar = self.bar(p.args[0].name)
        if p.rule.name == "tape_pop":  # `x = t.pop()`: x's adjoint goes back onto the tape
            w.line(f"{tape_bar}.append(copy_adj({self.bar(x)}))")
            self.kill(w, s)
            return
        # `x = restore(t, current)` popped the top element, then read the new top (or `current`)
        restored = self.names.fresh(x + "_restored_bar")
        top = self.names.fresh(p.args[0].name + "_top_bar")
        w.line(f"{restored} = copy_adj({self.bar(x)})")
        self.kill(w, s)
        w.line(f"if len({tape_bar}) > 0:")
        w.line(f"    {top} = {tape_bar}.pop()")
        w.line(f"    {tape_bar}.append({top} + {restored})")
        current = p.args[1]
        if isinstance(current, Var) and current.name in self.a.active:
            w.line("else:")
            w.line(f"    {self.bar(current.name)} += unbroadcast({restored}, {self.bar(current.name)})")
        w.line(f"{tape_bar}.append(zeros_like_adj({restored}))")

    def reverse_push(self, w: Writer, s: Push):
        """`t.append(v)`: the element's adjoint comes off the adjoint tape into `v`."""
        w.comment(s.loc)
        popped = self.names.fresh(s.tape + "_popped_bar")
        w.line(f"{popped} = {self.bar(s.tape)}.pop()")
        v = s.value
        if isinstance(v, Var) and v.name in self.a.active:
            self.accumulate(w, {v.name: popped})

    def contributions(self, w: Writer, s: Assign, out_text: str, reuse=lambda text: text) -> dict[str, str]:
        """name -> source text of the adjoint this statement sends to that operand."""
        g, v, found = self.bar(s.target), s.value, {}
        if isinstance(v, Copy):
            found = [(v.value.name, g)]
        elif isinstance(v, Load):
            base = self.bar(v.base.name)
            if v.base.name == s.target and s.target in self.a.saved and id(s) not in self.a.quiet_defs:
                # `z = z[:, 0]`: the adjoint of the old `z` (restored above) has its shape, not the read's
                base = self.names.fresh(s.target + "_read_bar")
                w.line(f"{base} = zeros_like_adj({s.target})")
                found = [(s.target, base)]
            if self.a.fancy(v.index):  # maybe an integer array: repeated indices must accumulate
                g = f"unbroadcast({g}, {base}[{index_text(v.index)}])"  # an elementwise g may be broadcast bigger
                w.line(f"{base} = add_at({base}, {index_value_text(v.index)}, {g})")
            else:
                slot = f"{base}[{index_text(v.index)}]"
                w.line(f"{slot} += unbroadcast({g}, {slot})")
            if not found:
                return {}
        else:
            found = self.prim_contributions(w, v, g, out_text, reuse)
        merged: dict[str, str] = {}
        for name, text in found:
            if name in self.a.active:
                merged[name] = f"{merged[name]} + {text}" if name in merged else text
        return merged

    def prim_contributions(self, w: Writer, p: Prim, g: str, out_text: str, reuse):
        t = p.rule.template()
        mapping = template_mapping(p, g, out_text)
        for stmt in t.statements:
            target = stmt.targets[0].target.value
            local = self.names.fresh(f"{p.rule.name}_{target}")
            self.template_locals.add(local)
            w.line(f"{local} = {reuse(instantiate(stmt.value, mapping))}")
            mapping[target] = local
        found = []
        for i in diff_positions(p):
            arg = p.args[i]
            if isinstance(arg, Var) and arg.name in self.a.active:
                text = reuse(instantiate(t.results[i], mapping))
                if self.zero_safe and pointwise(p.rule) and text != g:
                    text = f"cotangent_only({g}, {text})"
                found.append((arg.name, text))
        return found

    def accumulate(self, w: Writer, contributions: dict[str, str], exclude=None):
        for name, text in contributions.items():
            if name == exclude:
                continue
            if name in self.a.direct:  # a bare adjoint name is copied: `x_bar += ...` later must not change it
                line = f"{self.bar(name)} = {f'copy_adj({text})' if text.isidentifier() else text}"
            else:
                line = f"{self.bar(name)} += unbroadcast({text}, {self.bar(name)})"
            if name in self.guarded:
                w.line(f"if {self.guarded[name]}:")
                line = "    " + line
            w.line(line)

    def reverse_store(self, w: Writer, s: Store, block, replayed):
        a = self.a
        w.comment(s.loc)
        self.replay_for(w, s, block, replayed)
        target = f"{s.base}[{index_text(s.index)}]"
        if a.has_adjoint(s):
            slot = f"{self.bar(s.base)}[{index_text(s.index)}]"
            v = s.value
            read = f"mask_last({slot}, {index_value_text(s.index)})" if a.fancy(s.index) else slot
            if s.base in a.run_time_dtype:  # an integer dtype truncates the value: no derivative then
                read = f"if_inexact({read}, {s.base})"
            if isinstance(v, Var) and v.name in a.active:  # repeated indices: only the last write counts
                slot = read
                if v.name in a.direct:
                    w.line(f"{self.bar(v.name)} = copy_adj({slot})")
                else:
                    w.line(f"{self.bar(v.name)} += unbroadcast({slot}, {self.bar(v.name)})")
            w.line(f"{self.bar(s.base)}[{index_text(s.index)}] = 0.0")
        if id(s) in a.store_fill:
            fill = a.store_fill[id(s)]
            w.line(f"{target} = {self.tapes[id(s)]}.pop()" if fill is None else f"{target} = {const_text(fill)}")

    def reverse_if(self, w: Writer, s: If):
        body, orelse = self.capture(w, s.body), self.capture(w, s.orelse)
        if not body and not orelse:
            return
        w.comment(s.loc, "  (reversed)")
        test = atom(s.test)
        if body:
            w.line(f"if {test}:")
            w.lines += body
            if orelse:
                w.line("else:")
                w.lines += orelse
        else:
            w.line(f"if not {test}:")
            w.lines += orelse

    def capture(self, w: Writer, block) -> list[str]:
        inner = Writer(w.level + 1)
        self.reverse_block(inner, block)
        return inner.lines if not inner.empty_since(0) else []

    def reverse_for(self, w: Writer, s: For):
        dead = self.first_iteration_dead(s)
        self.entry_guards.update(dead)
        body = self.capture(w, s.body)
        for x in [d.target for d in s.body if id(d) in dead]:
            self.guarded.pop(x, None)
        if body:
            w.comment(s.loc, "  (reversed)")
            w.line(f"for {s.target} in {reversed_range_text(s.start, s.stop, s.step)}:")
            w.lines += body
        self.restore_collapsed(w, s)

    def restore_collapsed(self, w: Writer, s):
        """Loop `s` pushed these once, after it: their values from before it."""
        names = self.a.collapsed.get(id(s), [])
        if names:
            w.comment(s.loc, f"  (before it: {', '.join(names)})")
        for name in names:
            w.line(f"{name} = restore({self.tapes[name]}, {name})")

    def first_iteration_dead(self, s: For) -> dict[int, str]:
        """Rebindings in loop `s` of a parameter that is not differentiated (an MLP's `x = tanh(W @ x + b)`):
        in the first iteration the old value is that parameter, whose adjoint nobody asks for, so the
        adjoint sent to it (a whole `W.T @ g` per layer) runs only when `s`'s target is not `start`.
        id(Assign) -> that condition; only for top-level loops (a nested one restarts from later values)."""
        a, body_writes = self.a, set()
        for b, _, _ in ir.walk(s.body):
            body_writes.update(ir.stmt_writes(b))
        if a.depth[id(s)] != 0 or s.target in body_writes:
            return {}
        cond = f"{s.target} != {atom(s.start)}"
        return {id(b): cond for b in s.body
                if isinstance(b, Assign) and b.target in self.fn.params and b.target not in a.wrt
                and b.target in a.active and b.target not in a.stores and len(a.defs.get(b.target, [])) == 1}

    def reverse_while(self, w: Writer, s: While):
        n = self.iters[id(s)]
        w.comment(s.loc, "  (reversed)")
        if self.a.depth[id(s)] > 0:
            w.line(f"{n} = {self.tapes[id(s)]}.pop()")
        body = self.capture(w, s.body)
        test = self.capture(w, s.test_body)
        if body or test:
            w.line(f"for _ in range({n}):")
            w.lines += test + body
        w.lines += [ln[4:] for ln in test]
        self.restore_collapsed(w, s)

    # ------------------------------------------------------------ function
    @parsed_once()  # the clean-up passes share one parse of each line
    def generate(self, wrt: list[str], n_outputs: int, gradient: str | None = None) -> tuple[str, str]:
        """`f_vjp(params..., out_bar)` returning (the first `n_outputs` outputs..., adjoints of `wrt`...).

        With `gradient` (a name): `gradient(params...)` seeded with 1.0, returning (adjoints...,
        outputs[1:n_outputs]...) as `grad` does, with its primal sweep pruned to what the adjoint
        sweep and those outputs read (the value itself is not computed)."""
        fn, a = self.fn, self.a
        name = self.names.fresh(gradient or fn.name + "_vjp")
        out = fn.outputs[0]
        seed = self.bar(out)
        params = ", ".join(fn.params + ([] if gradient else [seed]))
        primal = Writer()
        self.primal_block(primal, fn.body)  # names the tapes the adjoint sweep pops
        adjoint = Writer()
        for v in sorted(set(wrt) | set(a.homes.get(id(fn.body), [])), key=self.home_order(wrt)):
            if v == out:
                adjoint.line(f"{seed} = {'1.0' if gradient else f'copy_adj({seed})'}")
            else:
                adjoint.line(f"{self.bar(v)} = zeros_like_adj({v})")
        self.reverse_block(adjoint, fn.body)
        adjoints = [self.bar(v) for v in wrt]
        own = (set(self._bars.values()) | self.template_locals) - set(fn.params) - {seed}
        adjoint.lines = drop_dead_adjoints(adjoint.lines, own, set(adjoints))
        adjoint.lines = share_unchanged_adjoints(adjoint.lines, own, set(adjoints))
        adjoint.lines = start_from_first_contribution(adjoint.lines, own, set(adjoints))
        outputs = fn.outputs[1 if gradient else 0:n_outputs]
        if gradient:
            roots = names_read_first(adjoint.lines) | set(outputs) | self.popped()
            self.keep = live_statements(fn.body, roots, set(self.iters))
            primal = Writer()
            self.primal_block(primal, fn.body)
            self.keep = None
        results = []
        for o in outputs:
            if o in a.saved:  # the adjoint sweep rewinds it: keep the final value
                kept = self.names.fresh(o + "_final")
                primal.line(f"{kept} = {o}")
                o = kept
            results.append(o)
        head = [f"def {name}({params}):", "    # primal sweep " + "-" * 60]
        written = names_read(primal.lines) if gradient else None
        for key, tape in self.tapes.items():
            if written is None or tape in written:  # a pruned gradient may not fill every tape
                head.append(f"    {tape} = List()")
        for p in fn.params:
            if p in a.saved:
                head.append(f"    {self.tapes[p]}.append({p})")
        results = ", ".join(adjoints + results if gradient else results + adjoints)
        body = head[1:] + primal.lines + ["    # adjoint sweep " + "-" * 59] + adjoint.lines + [f"    return {results}"]
        # after fusion, so the sign is moved only off a bare name, never off a fused expression
        lines = head[:1] + negate_after_summing(fuse_elementwise(body, (fn.temps | own) - set(adjoints)))
        return "\n".join(lines) + "\n", name

    def home_order(self, wrt):
        order = {v: i for i, v in enumerate(self.fn.outputs + wrt)}
        return lambda v: (order.get(v, len(order)), v)


def range_text(start, stop, step) -> str:
    if step == Const(1):
        return f"range({atom(stop)})" if start == Const(0) else f"range({atom(start)}, {atom(stop)})"
    return f"range({atom(start)}, {atom(stop)}, {atom(step)})"


def reversed_range_text(start, stop, step) -> str:
    if step == Const(1):
        first = f"{atom(stop)} - 1" if isinstance(stop, Var) else str(stop.value - 1)
        end = str(start.value - 1) if isinstance(start, Const) else f"{atom(start)} - 1"
        return f"range({first}, {end}, -1)"
    s = atom(step)
    neg = const_text(-step.value) if isinstance(step, Const) else f"-{s}"
    return f"range(range_last({atom(start)}, {atom(stop)}, {s}), {atom(start)} - {s}, {neg})"

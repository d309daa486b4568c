"""Forward mode: the primal program with each active statement followed by its tangent.

The tangent of `x` is `x_dot`. Tangents flow in program order, so loops, branches and
`while` loops keep their shape and no tape is needed. A rule's tangent template gives each
active operand's contribution (J_i @ operand_dot); the contributions are summed.
"""

from __future__ import annotations

from s2sad import ir
from s2sad.analyze import Analysis, diff_positions, template_mapping
from s2sad.codegen.emit import Writer, atom, effect_text, expr_text, index_text, instantiate
from s2sad.codegen.reverse import range_text
from s2sad.ir import Assign, Copy, Effect, For, If, Load, Prim, Push, Store, Var, While
from s2sad.names import Names


class ForwardGen:
    def __init__(self, fn: ir.Function, analysis: Analysis):
        self.fn = fn
        self.a = analysis
        self.names = Names(fn.user_names | fn.temps)
        self._dots: dict[str, str] = {}

    def dot(self, name: str) -> str:
        if name not in self._dots:
            self._dots[name] = self.names.fresh(name + "_dot")
        return self._dots[name]

    def active(self, a) -> bool:
        return isinstance(a, Var) and a.name in self.a.active

    def dot_or_zero(self, a) -> str:
        return self.dot(a.name) if self.active(a) else f"zeros_like_adj({atom(a)})"

    # ------------------------------------------------------------ statements
    def block(self, w: Writer, block):
        for s in block:
            w.comment(s.loc)
            if isinstance(s, Assign):
                self.assign(w, s)
            elif isinstance(s, Store):
                self.store(w, s)
            elif isinstance(s, Push):
                w.line(f"{s.tape}.append({atom(s.value)})")
                if s.tape in self.a.active:
                    w.line(f"{self.dot(s.tape)}.append({self.dot_or_zero(s.value)})")
            elif isinstance(s, Effect):
                w.line(effect_text(s))
            elif isinstance(s, If):
                w.line(f"if {atom(s.test)}:")
                self.sub_block(w, s.body)
                if s.orelse:
                    w.line("else:")
                    self.sub_block(w, s.orelse)
            elif isinstance(s, For):
                w.line(f"for {s.target} in {range_text(s.start, s.stop, s.step)}:")
                self.sub_block(w, s.body)
            elif isinstance(s, While):
                self.block(w, s.test_body)
                w.line(f"while {atom(s.test)}:")
                self.sub_block(w, s.body + s.test_body)

    def sub_block(self, w: Writer, block):
        with w.block():
            mark = w.mark()
            self.block(w, block)
            if w.empty_since(mark):
                w.line("pass")

    def assign(self, w: Writer, s: Assign):
        x, v = s.target, s.value
        if x not in self.a.active:
            w.line(f"{x} = {expr_text(v)}")
            return
        if isinstance(v, Prim) and v.rule.reads_tape:
            self.tape_read(w, s)
            return
        tangent = self.tangent_text(s)
        if tangent is None:
            w.line(f"{x} = {expr_text(v)}")
            zero = "List()" if isinstance(v, Prim) and v.rule.name == "tape" else f"zeros_like_adj({x})"
            w.line(f"{self.dot(x)} = {zero}")
            return
        if isinstance(v, Prim) and tangent.isidentifier() and (x in self.a.stores or self.may_change(tangent)):
            tangent = f"copy_adj({tangent})"  # the primal result is a new array: so is its tangent
        reads_out = isinstance(v, Prim) and self.out_name in tangent
        if x in ir.atom_vars(ir.expr_operands(v)) and reads_out:
            new = self.names.fresh(x + "_new")  # the tangent needs both the old `x` and the result
            w.line(f"{new} = {expr_text(v)}")
            w.line(f"{self.dot(x)} = {tangent.replace(self.out_name, new)}")
            w.line(f"{x} = {new}")
        elif reads_out or x not in ir.atom_vars(ir.expr_operands(v)):
            w.line(f"{x} = {expr_text(v)}")
            w.line(f"{self.dot(x)} = {tangent.replace(self.out_name, x)}")
        else:  # `x = x * y`: the tangent reads the old `x`, so it goes first
            w.line(f"{self.dot(x)} = {tangent}")
            w.line(f"{x} = {expr_text(v)}")

    out_name = "__out__"  # placeholder for the result inside tangent text, replaced once placed

    def tangent_text(self, s: Assign) -> str | None:
        """The tangent of `s`'s value as source text, or None when no operand is active."""
        v = s.value
        if isinstance(v, Copy):
            return self.dot(v.value.name) if self.active(v.value) else None
        if isinstance(v, Load):
            return f"{self.dot(v.base.name)}[{index_text(v.index)}]" if self.active(v.base) else None
        positions = [i for i in diff_positions(v) if self.active(v.args[i])]
        if not positions:
            return None
        t = v.rule.tangent_template()
        mapping = template_mapping(v, None, self.out_name, t)
        terms = [instantiate(t.results[i], {**mapping, t.params[0]: self.dot(v.args[i].name)}) for i in positions]
        text = " + ".join(terms)
        if self.may_broadcast(v, positions):
            text = f"broadcast_like({text}, {self.out_name})"
        return text

    def may_change(self, tangent: str) -> bool:
        """Could the array behind this tangent variable be written in place later (or be a view of one)?"""
        name = next((n for n, d in self._dots.items() if d == tangent), None)
        if name is None:
            return False
        return name in self.a.stores or any(isinstance(d, Assign) and isinstance(d.value, (Load, Copy))
                                            for d in self.a.defs.get(name, []))

    def may_broadcast(self, p: Prim, positions: list[int]) -> bool:
        """Could an inactive array operand make the result bigger than the active ones' tangents?"""
        if not p.rule.elementwise or len(p.args) < 2:
            return False
        return any(isinstance(a, Var) and i not in positions for i, a in enumerate(p.args))

    def tape_read(self, w: Writer, s: Assign):
        """`x = tape.pop()` / `x = restore(tape, x)`: the tangent comes out of the tangent tape."""
        x, p = s.target, s.value
        tape = p.args[0].name
        w.line(f"{x} = {expr_text(p)}")
        if tape in self.a.active and p.rule.name == "tape_pop":
            w.line(f"{self.dot(x)} = {self.dot(tape)}.pop()")
        elif tape in self.a.active:
            w.line(f"{self.dot(x)} = restore({self.dot(tape)}, {self.dot_or_zero(p.args[1])})")
        elif p.args[1:] and self.active(p.args[1]):  # an inactive tape: only `current` carries a tangent
            w.line(f"{self.dot(x)} = zeros_like_adj({x}) if len({tape}) > 0 else {self.dot(p.args[1].name)}")
        else:
            w.line(f"{self.dot(x)} = zeros_like_adj({x})")

    def store(self, w: Writer, s: Store):
        index = index_text(s.index)
        w.line(f"{s.base}[{index}] = {atom(s.value)}")
        if s.base in self.a.active:
            dot = self.dot(s.value.name) if self.active(s.value) else "0.0"
            if s.base in self.a.run_time_dtype:  # an integer dtype truncates the value: no derivative then
                dot = f"if_inexact({dot}, {s.base})"
            w.line(f"{self.dot(s.base)}[{index}] = {dot}")

    # -------------------------------------------------------------- function
    def generate(self, wrt: list[str]) -> tuple[str, str]:
        fn = self.fn
        name = self.names.fresh(fn.name + "_jvp")
        params = fn.params + [self.dot(p) for p in wrt]
        w = Writer()
        for p in fn.params:
            if p in self.a.active and p not in wrt:
                w.line(f"{self.dot(p)} = zeros_like_adj({p})")
        self.block(w, fn.body)
        outs = [Var(o) for o in fn.outputs]
        results = [atom(o) for o in outs] + [self.dot_or_zero(o) for o in outs]
        lines = [f"def {name}({', '.join(params)}):", *w.lines, f"    return {', '.join(results)}"]
        return "\n".join(lines) + "\n", name

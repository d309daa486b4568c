"""User derivative overrides: `custom_jvp` and `custom_vjp`, as in JAX.

A call to an overridden function becomes one primitive in the caller's code. Its rule is made
from the user's functions: they are lowered like any s2sad input and printed into the
generated module next to the derivative that uses them ("siblings"), so the generated code
shows the override, compiles with numba, and differentiates again for higher orders (the
second derivative of a custom_jvp function differentiates its jvp rule, as in JAX).

- custom_jvp: the tangent is the user's rule; the adjoint is the transpose of that rule's
  tangent map, made by reverse mode over it (the rule is linear in the tangents).
- custom_vjp: the adjoint runs the user's `fwd` for the residuals, then `bwd`. Forward mode
  of a custom_vjp function is refused, as in JAX.
"""

from __future__ import annotations

from typing import Callable

from s2sad import ir, synthesize
from s2sad.analyze import analyze
from s2sad.codegen.module import primal_source, siblings_in
from s2sad.codegen.reverse import ReverseGen
from s2sad.normalize import normalize
from s2sad.rules.registry import Custom, Rule, Template


class _Custom(Custom):
    """What custom_jvp and custom_vjp share: their rules' functions, lowered and printed as siblings."""

    def lower(self, fn) -> ir.Function:
        """Lower a sibling, inlining calls to this function itself as its plain primal."""
        return normalize(fn, plain=frozenset({self}))

    def primal_sibling(self) -> tuple[str, str]:
        name = f"{self.name}_primal"
        return name, primal_source(self.lower(self.fun), name)

    def new_rule(self, adjoint: str, tangent: str | None, siblings: list) -> Rule:
        primal_name, primal_text = self.primal_sibling()
        rule = Rule(f"custom_{self.name}", self, elementwise=False, cheap=False, print_as=primal_name,
                    tangent=self if tangent else None)
        rule._template = Template.from_source(adjoint)
        if tangent:
            rule._tangent_template = Template.from_source(tangent)
        else:
            rule.tangent_error = (f"`{self.name}` is a custom_vjp function: it has a reverse-mode rule only (as in JAX). "
                                  "Use grad/vjp, or give it a forward rule with s2sad.custom_jvp")
        rule.siblings = [(primal_name, primal_text)] + siblings
        return rule


class custom_jvp(_Custom):
    """A function with a user-written forward-mode rule.

        @s2sad.custom_jvp
        def log1pexp(x):
            return np.log(1.0 + np.exp(x))

        @log1pexp.defjvp
        def log1pexp_jvp(primals, tangents):
            (x,), (x_dot,) = primals, tangents
            return log1pexp(x), (1.0 - 1.0 / (1.0 + np.exp(x))) * x_dot
    """

    def __init__(self, fun: Callable):
        super().__init__(fun)
        self.jvp_rule: Callable | None = None

    def defjvp(self, jvp_rule: Callable) -> Callable:
        """Set the rule `jvp_rule(primals, tangents) -> (out, tangent_out)`; returns it (decorator use)."""
        self.jvp_rule = jvp_rule
        self._rule = None
        return jvp_rule

    def make_rule(self) -> Rule:
        if self.jvp_rule is None:
            raise TypeError(f"custom_jvp function `{self.name}` has no rule: decorate one with @{self.name}.defjvp")
        xs, dots = self.params, [p + "_dot" for p in self.params]
        call = f"rule(({', '.join(xs)},), ({', '.join(dots)},))"
        jvp_fn = synthesize.function(f"{self.name}_custom_jvp", xs + dots, [f"return {call}"],
                                     {"rule": self.jvp_rule})
        jvp_name = jvp_fn.__name__
        jvp_text = primal_source(self.lower(jvp_fn), jvp_name)
        lin_fn = synthesize.function(f"{self.name}_custom_lin", xs + dots,
                                     [f"out, out_dot = {call}", "return out_dot"], {"rule": self.jvp_rule})
        lin_ir = self.lower(lin_fn)
        wrt = lin_ir.params[len(xs):]
        lin_text, lin_name = ReverseGen(lin_ir, analyze(lin_ir, wrt)).generate(wrt, 1)
        zeros = ", ".join(f"zeros_like_adj({x})" for x in xs)
        n = len(xs)
        adjoint = (f"def adjoint(g, out, {', '.join(xs)}):\n"
                   f"    r = {lin_name}({', '.join(xs)}, {zeros}, g)\n"
                   f"    return {', '.join(f'r[{i + 1}]' for i in range(n))}\n")
        terms = []
        for i in range(n):
            tangents = ["g" if j == i else f"zeros_like_adj({x})" for j, x in enumerate(xs)]
            terms.append(f"{jvp_name}({', '.join(xs)}, {', '.join(tangents)})[1]")
        tangent = f"def tangent(g, out, {', '.join(xs)}):\n    return {', '.join(terms)}\n"
        nested = siblings_in(lin_ir) + siblings_in(self.lower(jvp_fn))
        return self.new_rule(adjoint, tangent, nested + [(jvp_name, jvp_text), (lin_name, lin_text)])


class custom_vjp(_Custom):
    """A function with a user-written reverse-mode rule.

        @s2sad.custom_vjp
        def clip_gradient(x):
            return x

        def clip_fwd(x):
            return x, ()

        def clip_bwd(residuals, g):
            return (np.clip(g, -1.0, 1.0),)

        clip_gradient.defvjp(clip_fwd, clip_bwd)
    """

    def __init__(self, fun: Callable):
        super().__init__(fun)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """`fwd(*primals) -> (out, residuals)`; `bwd(residuals, g) -> (one cotangent per primal)`."""
        self.fwd, self.bwd = fwd, bwd
        self._rule = None

    def make_rule(self) -> Rule:
        if self.fwd is None:
            raise TypeError(f"custom_vjp function `{self.name}` has no rule: call {self.name}.defvjp(fwd, bwd)")
        xs = self.params
        fwd_fn = synthesize.function(f"{self.name}_custom_fwd", xs, [f"return fwd({', '.join(xs)})"],
                                     {"fwd": self.fwd})
        fwd_ir = self.lower(fwd_fn)
        n_res = len(fwd_ir.outputs) - 1
        res = [f"r{i}" for i in range(n_res)]
        res_tuple = f"({', '.join(res)},)" if res else "()"
        bwd_fn = synthesize.function(f"{self.name}_custom_bwd", res + ["g"], [f"return bwd({res_tuple}, g)"],
                                     {"bwd": self.bwd})
        fwd_name, bwd_name = fwd_fn.__name__, bwd_fn.__name__
        residuals = ", ".join(f"r[{i + 1}]" for i in range(n_res))
        adjoint = (f"def adjoint(g, out, {', '.join(xs)}):\n"
                   f"    r = {fwd_name}({', '.join(xs)})\n"
                   f"    c = {bwd_name}({residuals + ', ' if residuals else ''}g)\n"
                   f"    return {', '.join(f'c[{i}]' for i in range(len(xs)))}\n")
        bwd_ir = self.lower(bwd_fn)
        siblings = siblings_in(fwd_ir) + siblings_in(bwd_ir) + [
            (fwd_name, primal_source(fwd_ir, fwd_name)), (bwd_name, primal_source(bwd_ir, bwd_name))]
        return self.new_rule(adjoint, None, siblings)

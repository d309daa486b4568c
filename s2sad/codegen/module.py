"""Assemble a generated module: header, imports, the primal, its derivative, and a wrapper.

The wrapper (`f_grad`, `f_jvp_tangent`, ...) has the signature and result of the public
transformation, so the module is itself s2sad input: transforming `grad(f)` again parses it.
"""

from __future__ import annotations

from s2sad import ir
from s2sad.analyze import Analysis, analyze, analyze_forward
from s2sad.codegen.emit import Writer, header_imports
from s2sad.codegen.forward import ForwardGen
from s2sad.codegen.reverse import ReverseGen
from s2sad.frontend import GENERATED_MARK
from s2sad.gencache import Generated


def header(fn: ir.Function, what: str) -> str:
    from s2sad import __version__

    return (
        f'"""{what} of `{fn.name}` ({fn.filename}:{fn.firstline}), {GENERATED_MARK} {__version__}.\n\n'
        f"Source hash {fn.source_hash}. Do not edit: regenerate with `s2sad show`.\n"
        '"""\n'
    )


def primal_source(fn: ir.Function, name: str) -> str:
    gen = ReverseGen(fn, Analysis(fn, []))
    w = Writer()
    gen.primal_block(w, fn.body)
    outs = ", ".join(fn.outputs) + ("," if fn.returns_tuple and len(fn.outputs) == 1 else "")
    return "\n".join([f"def {name}({', '.join(fn.params)}):", *w.lines, f"    return {outs}"]) + "\n"


def third_party_imports(fn: ir.Function) -> list[str]:
    """`import mod` lines for callees registered from other packages (`s2sad.rules.defrule(mod.f)`)."""
    from s2sad.rules.registry import import_of

    found = set()
    for s, _, _ in ir.walk(fn.body):
        p = s.value if isinstance(s, ir.Assign) else s.call if isinstance(s, ir.Effect) else None
        if isinstance(p, ir.Prim):
            line = import_of(p.rule.print_as or p.spelled or p.rule.spelled or "")
            if line:
                found.add(line)
    return sorted(found)


def siblings_in(fn: ir.Function) -> list[tuple[str, str]]:
    """The sibling functions the custom rules used in `fn` need, each once, in a stable order."""
    found: dict[str, str] = {}
    for s, _, _ in ir.walk(fn.body):
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Prim):
            for name, text in s.value.rule.siblings:
                found.setdefault(name, text)
    return list(found.items())


def hidden_last(fn: ir.Function, extra: list[str]) -> list[str]:
    """A wrapper's parameters: the function's own, `extra` (tangents, a cotangent), then the hidden ones
    (arrays read from outside): a transformation of the wrapper takes those as hidden parameters too."""
    hidden = [name for name, _ in fn.hidden]
    return [p for p in fn.params if p not in hidden] + extra + hidden


def _wrapper(name: str, params: list[str], call: str, results: list[str], keep: list[str]) -> str:
    """`def name(params): results = call; return keep`."""
    lines = [f"def {name}({', '.join(params)}):",
             f"    {', '.join(results)} = {call}",
             f"    return {', '.join(keep)}"]
    return "\n".join(lines) + "\n"


def assemble(fn: ir.Function, what: str, derivative: str, derivative_name: str,
              wrapper: tuple[str, str]) -> Generated:
    # The derivative's and wrapper's names were made fresh against the user's, so `fn.name` is free.
    overrides = [text for _, text in siblings_in(fn)]  # the user's custom_jvp / custom_vjp rules, lowered
    imports = "".join(line + "\n" for line in third_party_imports(fn))
    body = [*overrides, primal_source(fn, fn.name)] + [part for part in (derivative, wrapper[1]) if part]
    code = "\n\n".join(body)
    top = header(fn, what) + header_imports(code) + imports
    return Generated(top + "\n\n" + code, fn.name, fn.name, derivative_name, wrapper[0], fn)


def jacobian_driver(g: Generated, kind: str, name: str, wrt: tuple[int, ...], single: bool) -> str:
    """The loop `s2sad.jacfwd`, `jacrev` or `hessian` runs in Python over `g`'s compiled functions, as
    source: printed after `g`'s module, so that `source()` shows the whole program."""
    fn = g.fn
    params = ", ".join(fn.params)
    args = params + ("," if len(fn.params) == 1 else "")
    tuple_out = fn.returns_tuple or len(fn.outputs) > 1
    if kind == "jacrev":
        blocks, per = f"[jacobians.by_vjps({fn.name}, {g.derivative}, ({args}), {wrt!r})]", "output"
    else:
        blocks, per = f"jacobians.by_jvps({fn.name}, {g.derivative}, ({args}), {wrt!r}, {tuple_out})", "input"
    lines = ["from s2sad import jacobians", "", "",
             f"def {name}({params}):",
             f"    # s2sad.{kind} runs this in Python: one {g.derivative} per {per} element, stacked",
             f"    blocks = {blocks}",
             f"    return jacobians.as_returned(blocks, {single}, {tuple_out and kind != 'jacrev'})"]
    return "\n".join(lines) + "\n"


def primal_module(fn: ir.Function) -> Generated:
    """`fn` alone, as written: what `@s2sad.differentiate` runs when the function is called plainly."""
    return assemble(fn, "The function as written", "", fn.name, (fn.name, None))


def vjp_module(fn: ir.Function, wrt: list[str], kind: str = "grad", recompute_libm: bool = False) -> Generated:
    """`fn`'s primal, its vjp with respect to `wrt`, and a `kind` wrapper.

    kind: "grad" (returns the gradients, then aux; the module then has no vjp: `f_grad` is the
    adjoint itself), "value_and_grad" (value, aux, gradients) or "vjp" (takes the cotangent last,
    returns the cotangents). recompute_libm: see analyze.
    """
    gen = ReverseGen(fn, analyze(fn, wrt, recompute_libm))
    what = f"Adjoint (reverse mode, with respect to {', '.join(wrt)})"
    if kind == "grad":  # one function, seeded with 1.0; it skips the primal work only the value needed
        text, name = gen.generate(wrt, len(fn.outputs), gradient=f"{fn.name}_grad")
        return assemble(fn, what, text, name, (name, None))
    vjp_text, vjp_name = gen.generate(wrt, len(fn.outputs))
    names = gen.names
    values = [names.fresh("value")] + [names.fresh("aux") for _ in fn.outputs[1:]]
    grads = [names.fresh(p + "_grad") for p in wrt]
    cotangent = [names.fresh("cotangent")] if kind == "vjp" else []
    keep = grads if kind == "vjp" else values + grads
    call = f"{vjp_name}({', '.join(fn.params + (cotangent or ['1.0']))})"
    name = names.fresh(f"{fn.name}_{kind}")
    wrapper = _wrapper(name, hidden_last(fn, cotangent), call, values + grads, keep)
    return assemble(fn, what, vjp_text, vjp_name, (name, wrapper))


def jvp_module(fn: ir.Function, wrt: list[str]) -> Generated:
    """`fn`'s primal, its jvp with respect to `wrt`, and `f_jvp_tangent` returning only the tangents."""
    gen = ForwardGen(fn, analyze_forward(fn, wrt))
    jvp_text, jvp_name = gen.generate(wrt)
    names = gen.names
    dots = [gen.dot(p) for p in wrt]
    values = [names.fresh("value") for _ in fn.outputs]
    tangents = [names.fresh("tangent") for _ in fn.outputs]
    name = names.fresh(f"{fn.name}_jvp_tangent")
    call = f"{jvp_name}({', '.join(fn.params + dots)})"
    wrapper = _wrapper(name, hidden_last(fn, dots), call, values + tangents, tangents)
    what = f"Tangent (forward mode, with respect to {', '.join(wrt)})"
    return assemble(fn, what, jvp_text, jvp_name, (name, wrapper))

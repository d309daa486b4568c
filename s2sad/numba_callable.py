"""s2sad's functions inside numba code: `grad(f)` and the others typed by numba as its own dispatchers.

numba types a global, a closure variable or an argument by `typeof`. For a function s2sad returned,
that is the type of a small numba dispatcher, its *trampoline*, written for it once:

    def f(x, y):                  # f's own parameters
        return select(x, y)

`select` is a stub whose numba overload runs when numba types a call with concrete argument types:
it specializes the transform to them (ranks and types, where the generated code reads them), checks
once what the Python path checks on every call (differentiated arguments are floats, the output is
a scalar) and writes the implementation for those types, e.g.

    def f_grad(x, y):
        return compiled(x, y)     # the generated njit gradient; arrays read from globals are frozen

So a gradient called in an `@njit` loop is a direct call of the generated code (LLVM inlines it), it
can be passed to njit functions and closed over like any dispatcher, and `s2sad.jit(grad(f))` is a
trampoline of its own: called from Python it costs numba's dispatch (calls numba cannot type, such as
pytrees, take the Python path). Arguments numba code cannot pass (pytrees) are refused with a message
naming `g.numba(*examples)`, the flat entry point taking leaves. An `@s2sad.differentiate` function
has a numba type of its own whose methods are these trampolines. numba never caches code that calls
a trampoline (see _function).
"""

from __future__ import annotations

import copy
import functools
import threading
import types as pytypes
from typing import Any, Callable

import numpy as np
from numba import njit, typeof
from numba.core import types as nb
from numba.core.datamodel import models
from numba.extending import (NativeValue, infer_getattr, intrinsic, lower_getattr_generic, overload, register_model,
                             typeof_impl, unbox)
from numba.core.typing.templates import AttributeTemplate

from s2sad import synthesize

_LOCK = threading.RLock()
_JIT = {"error_model": "numpy"}  # as generated code is compiled: NumPy's float semantics


class NotNumbaCallable(TypeError):
    """A call numba code cannot make (a pytree argument, an option only Python handles)."""


class Spec:
    """What a public function computes, for writing its numba implementation: kind is "grad",
    "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap", "jvp", "call" (an @differentiate function itself)
    or "flat" (leaves in, leaves out)."""

    for_python = False  # the trampoline s2sad.jit returns (see _frozen)

    def __init__(self, kind: str, transform: Any, params: list[str], name: str, **options):
        self.kind, self.transform, self.params, self.name, self.options = kind, transform, params, name, options


def attach(public: Callable, kind: str, transform: Any, params: list[str] | None = None, **options) -> Callable:
    """Mark `public` (a function s2sad returns) as numba-callable; give it `.numba`, its flat entry point."""
    params = list(transform.params) if params is None else params
    public.__s2sad_numba__ = Spec(kind, transform, params, transform.fun.__name__, **options)
    public._s2sad_dispatcher = public._s2sad_jitted = None  # (functools.wraps may have copied an inner function's)
    public.numba = functools.partial(flat_entry, public)
    return public


def dispatcher_of(public: Callable, for_python: bool = False):
    """The trampoline: a numba dispatcher with `public`'s parameters, specialized per argument types.
    for_python: the one s2sad.jit returns, which never freezes arrays read from outside the arguments
    (Python calls read them again each time; see _frozen)."""
    attr = "_s2sad_jitted" if for_python else "_s2sad_dispatcher"
    found = getattr(public, attr, None)
    if found is not None:
        return found
    with _LOCK:  # one trampoline per function, however many threads ask at once
        found = getattr(public, attr, None)
        if found is None:
            found = _trampoline(public, for_python)
            if for_python:
                _fall_back_to_python(found, public)
            setattr(public, attr, found)
        return found


def _trampoline(public: Callable, for_python: bool):
    spec: Spec = copy.copy(public.__s2sad_numba__)
    spec.for_python = for_python
    args = ", ".join(spec.params)
    stub = synthesize.function(f"{spec.name}_select", spec.params, ["raise TypeError('called only by numba')"], {},
                               in_memory=True)
    overload(stub, jit_options=_JIT, strict=False)(lambda *argtypes: implementation(spec, argtypes))
    trampoline = synthesize.function(spec.name, spec.params, [f"return select({args})"], {"select": stub},
                                     in_memory=True)
    trampoline.__defaults__ = _defaults(spec) or None
    found = njit(**_JIT)(trampoline)
    if hasattr(public, "__s2sad_transform__"):  # source(), and transformations of it, see through it
        found.__s2sad_transform__ = public.__s2sad_transform__
    found.__s2sad_public__ = public
    return found


def _defaults(spec: Spec) -> tuple:
    """The defaults of the function's last parameters that numba passes as constants (numbers and bools), so
    that numba code may leave them out as Python code may."""
    signature = getattr(spec.transform, "signature", None)
    if signature is None or list(signature.parameters) != spec.params:
        return ()
    found = []
    for p in reversed(signature.parameters.values()):
        if type(p.default) not in (int, float, bool, str):  # a string: refused by _checked, with a hint
            break
        found.append(p.default)
    return tuple(reversed(found))


def jitted(public: Callable):
    """`s2sad.jit(public)`: a trampoline of its own for Python callers. A call numba cannot type (pytrees)
    or the code cannot serve (see NotNumbaCallable) takes the Python path; a new type runs it once first,
    so its checks and errors are the Python path's."""
    return dispatcher_of(public, for_python=True)


def _fall_back_to_python(d, public: Callable) -> None:
    compile_for_args = d._compile_for_args
    refused: set = set()

    def compile_or_python(*args, **kwargs):
        if kwargs or not all(type(a) in _PLAIN for a in args):
            return public
        key = tuple(type(a) if type(a) is not np.ndarray else (a.ndim, a.dtype, a.flags.c_contiguous) for a in args)
        if key in refused:
            return public
        public(*args)  # the Python path's checks, once per new type
        try:
            return compile_for_args(*args)
        except NotNumbaCallable:
            refused.add(key)
            return public

    d._compile_for_args = compile_or_python  # reached only where no compiled version matches (C dispatch)


_PLAIN = (float, int, bool, np.float64, np.float32, np.int64, np.ndarray)


def flat_entry(public: Callable, *examples):
    """`g.numba(*examples)`: what numba code calls for arguments structured like `examples`. Floats and
    arrays (or no examples): `g`'s trampoline. Pytrees (grad and value_and_grad): a dispatcher taking the
    leaves of the arguments (s2sad.tree.tree_flatten order) and returning the gradient leaves (after the
    value, for value_and_grad)."""
    spec: Spec = public.__s2sad_numba__
    if all(type(a) in _PLAIN for a in examples):
        return dispatcher_of(public)
    if spec.kind not in ("grad", "value_and_grad") or spec.transform.has_aux:
        raise NotNumbaCallable(f"{spec.name}: a flat entry point for pytree arguments is written for grad and "
                               f"value_and_grad; pass the leaves as separate arguments to {spec.kind}")
    t = spec.transform
    r, leaves = t.specialize(t.bind(examples, {}))
    r.check(leaves)
    key = ("numba flat", r.defs)
    flat = t.made.flat_entries.get(key)
    if flat is None:
        params = list(r.generated.fn.params)[:len(leaves) - len(r.generated.fn.hidden)]
        flat = synthesize.function(f"{spec.name}_flat", params, ["raise TypeError('call it from numba code')"], {},
                                   in_memory=True)
        flat.__s2sad_transform__ = r
        flat.__s2sad_numba__ = Spec("flat", r, params, spec.name, what=spec.kind)
        flat._s2sad_dispatcher = None
        t.made.flat_entries[key] = flat
    return dispatcher_of(flat)


# --- numba's types of the arguments ---------------------------------------------------------------------


def _is_leaf(t) -> bool:
    return isinstance(t, (nb.Float, nb.Integer, nb.Boolean, nb.NumPyRandomGeneratorType)) or (
        isinstance(t, nb.Array) and isinstance(t.dtype, (nb.Float, nb.Integer, nb.Boolean)))


def _is_float(t) -> bool:
    return isinstance(t, nb.Float) or (isinstance(t, nb.Array) and isinstance(t.dtype, nb.Float))


def _kind(param: str, t) -> tuple:
    """(param, ndim, type, unit axes, dtype) as api._arg_kinds gives them for a value of numba type `t` (its
    length-one axes unknown: none assumed, and code that depends on them is refused)."""
    try:
        dtype = np.dtype(str(t.dtype if isinstance(t, nb.Array) else t))
    except TypeError:  # a type NumPy does not name (numba's checks refuse it with a message of their own)
        dtype = None
    if isinstance(t, nb.Array):
        return (param, t.ndim, np.ndarray, (False,) * t.ndim, dtype)
    if isinstance(t, nb.NumPyRandomGeneratorType):  # drawn from, as the function draws from its argument
        return (param, 0, np.random.Generator, (), None)
    return (param, 0, bool if isinstance(t, nb.Boolean) else int if isinstance(t, nb.Integer) else float, (), dtype)


def _checked(spec: Spec, argtypes: tuple, differentiated) -> None:
    """Every argument a float, an int, a bool or an array of them; the differentiated ones floats."""
    for i, (p, t) in enumerate(zip(spec.params, argtypes)):
        if isinstance(t, (nb.UnicodeType, nb.StringLiteral)):
            others = ", ".join(q for q in spec.params if q != p)
            signature = getattr(spec.transform, "signature", None)
            default = signature.parameters[p].default if signature is not None and p in signature.parameters else None
            value = repr(default) if isinstance(default, str) else "'...'"
            raise NotNumbaCallable(
                f"{spec.name}: argument {i} (`{p}`) is a string, which decides the code s2sad generates; inside "
                f"numba code, bind it in Python first: "
                f"s2sad.{spec.kind}(lambda {others}: {spec.name}({others}, {p}={value}))")
        if not _is_leaf(t):
            raise NotNumbaCallable(
                f"{spec.name}: argument {i} (`{p}`) has numba type {t}; inside numba code s2sad's functions take "
                f"floats, arrays and random generators. For pytree arguments, take the flat entry point once in "
                f"Python, "
                f"flat = g.numba(*example_args), and call flat(*leaves) in numba code (the leaves in "
                f"s2sad.tree.tree_flatten order)")
    for i in differentiated:
        if not _is_float(argtypes[i]):
            raise TypeError(f"{spec.kind} of {spec.name} requires float inputs, but argument {i} "
                            f"(`{spec.params[i]}`) has numba type {argtypes[i]}; pass a float or a float array")


def _specialized(t, params: list[str], argtypes: tuple):
    """The transform `t` for arguments of these numba types (`t` itself where its code reads no kinds)."""
    if not t.reads_kinds():
        return t
    found = t.with_kinds(tuple(_kind(p, a) for p, a in zip(params, argtypes)))
    if found.generated.fn.fixes_unit_axes:
        raise NotNumbaCallable(f"{t.fun.__name__}: its code depends on which axes of the arguments have length one "
                               "(np.squeeze), which numba's types do not say; call it from Python")
    return found


def _scalar_output(r, argtypes: tuple) -> None:
    """The check `grad` makes once per argument ranks: the primal returns a scalar (type inference only)."""
    from s2sad.backend import inferred_return_type

    out = inferred_return_type(r.primal_fn, (), tuple(argtypes) + tuple(_hidden_types(r)))
    if out is not None and not isinstance(out, (nb.Number, nb.Boolean)) and not (
            isinstance(out, nb.Array) and out.ndim == 0):
        raise TypeError(f"{r.what} requires a scalar output, but {r.fun.__name__} returns {out} for arguments of "
                        f"numba types ({', '.join(map(str, argtypes))}); use jacfwd or jacrev for the Jacobian, or "
                        "reduce the output (e.g. .sum()) first")


def _hidden_types(t) -> list:
    return [typeof(v) for v in t.hidden_args()]


# --- the implementation for one tuple of argument types -----------------------------------------------------


def implementation(spec: Spec, argtypes: tuple) -> Callable:
    """A Python function numba compiles for a call of `spec`'s function with arguments of these types."""
    if len(argtypes) != len(spec.params):
        raise NotNumbaCallable(f"{spec.name} takes {len(spec.params)} arguments ({', '.join(spec.params)}) inside "
                               f"numba code, got {len(argtypes)}")
    if spec.transform.backend != "numba":
        raise NotNumbaCallable(f"{spec.name} runs uncompiled (backend='python'); numba code calls the default backend")
    argtypes = tuple(typeof(t.value) if isinstance(t, nb.Omitted) else t for t in argtypes)  # a default left out
    body, closure = _WRITERS[spec.kind](spec, argtypes)
    return _function(f"{spec.name}_{spec.kind}", spec.params, body, closure)


def _function(name: str, params: list[str], body: list[str], closure: dict) -> Callable:
    """The implementation as a function, marked so that numba never caches code that calls it: the
    generated modules it calls live in s2sad's cache, which a later process has not imported when
    numba loads its cache (numba would fail to rebuild their environments). numba warns instead:
    "Cannot cache compiled function ... as it uses dynamic globals"."""
    mark = "uncached"
    while mark in params or mark in closure:
        mark += "_"
    lines = [f"if {mark}() == 0:", "    raise RuntimeError('unreachable')", *body]
    return synthesize.function(name, params, lines, {**closure, mark: _uncached}, in_memory=True)


_MARK = object()


@intrinsic
def _uncached(typingctx):
    """A load of a dynamic global (never 0): numba's cache refuses the code it is linked into."""
    def codegen(context, builder, sig, args):
        ptr = context.add_dynamic_addr(builder, id(_MARK), info="s2sad: generated code held in memory")
        return builder.ptrtoint(ptr, context.get_value_type(nb.uintp))
    return nb.uintp(), codegen


class _Names:
    """Closure names that none of the parameters use."""

    def __init__(self, spec: Spec, params: list[str]):
        self.taken, self.closure, self.for_python = set(params), {}, spec.for_python

    def bind(self, base: str, value) -> str:
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        self.closure[name] = value
        return name


def _call(names: _Names, fn, args: list[str], hidden: tuple, extra: list[str] = ()) -> str:
    """`fn(args, hidden arrays, extra)`."""
    callee = names.bind("compiled", fn)
    return f"{callee}({', '.join(list(args) + _frozen(names, hidden) + list(extra))})"


def _frozen(names: _Names, hidden: tuple) -> list[str]:
    """Names for the arrays generated code reads from globals, closures and objects: constants of the
    compiled code, as numba freezes its own globals. Not in what s2sad.jit returns, whose Python calls
    read them again each time (hidden.py): there the Python path serves the call."""
    if hidden and names.for_python:
        raise NotNumbaCallable("it reads arrays from outside its arguments, which a Python call reads again: call the "
                               "function s2sad returned itself in numba code (numba freezes those arrays there)")
    return [names.bind(f"outside{k}", v) for k, v in enumerate(hidden)]


def _reverse_ready(spec: Spec, argtypes: tuple):
    t = spec.transform
    if t.has_aux:
        raise NotNumbaCallable(f"{spec.name}: has_aux=True returns a pytree; inside numba code call a gradient "
                               "without aux")
    _checked(spec, argtypes, t.argnums)
    r = _specialized(t, spec.params, argtypes)
    _scalar_output(r, argtypes)
    return r


def _grads(r, parts: list[str]) -> str:
    return parts[0] if r.single else "(" + "".join(p + ", " for p in parts) + ")"


def _write_grad(spec: Spec, argtypes: tuple):
    r = _reverse_ready(spec, argtypes)
    names = _Names(spec, spec.params)
    call = _call(names, r.compiled("wrapper"), spec.params, r.hidden_args())
    n = len(r.flat_argnums)
    if n == 1:
        return [f"return {_grads(r, [call])}"], names.closure
    return [f"res = {call}", f"return {_grads(r, [f'res[{k}]' for k in range(n)])}"], names.closure


def _write_value_and_grad(spec: Spec, argtypes: tuple):
    r = _reverse_ready(spec, argtypes)
    names = _Names(spec, spec.params + ["res"])
    call = _call(names, r.vjp_fn, spec.params, r.hidden_args(), ["1.0"])
    grads = _grads(r, [f"res[{k}]" for k in range(1, len(r.flat_argnums) + 1)])
    return [f"res = {call}", f"return res[0], {grads}"], names.closure


def _write_flat(spec: Spec, argtypes: tuple):
    """Leaves in; the gradient leaves (grad) or the value then them (value_and_grad) out, as a tuple."""
    r = spec.transform
    _checked(spec, argtypes, r.flat_argnums)
    _scalar_output(r, argtypes)
    names = _Names(spec, spec.params + ["res"])
    n = len(r.flat_argnums)
    if spec.options["what"] == "grad":
        call = _call(names, r.compiled("wrapper"), spec.params, r.hidden_args())
        return [f"return {call}"], names.closure
    call = _call(names, r.vjp_fn, spec.params, r.hidden_args(), ["1.0"])
    return [f"res = {call}", "return (" + "".join(f"res[{k}], " for k in range(n + 1)) + ")"], names.closure


def _jacobian_lines(names: _Names, fwd, args: list[str], ranks: list[int], out_rank: int) -> tuple[list[str], list]:
    """Lines computing one Jacobian block per differentiated argument by jvps along unit vectors."""
    jvp = names.bind("jvp", fwd.jvp_fn)
    frozen = _frozen(names, fwd.hidden_args())
    primal = names.bind("primal", fwd.primal_fn)
    lines = [f"value = {primal}({', '.join(args + frozen)})"]
    wrt = list(fwd.flat_argnums)
    zeros = [f"np.zeros({args[i]}.shape)" if ranks[i] else "0.0" for i in wrt]
    blocks = []
    for pos, i in enumerate(wrt):
        x, block = args[i], f"block{pos}"
        tangents = list(zeros)
        if ranks[i] == 0:
            tangents[pos] = "1.0"
            lines.append(f"{block} = {jvp}({', '.join(args + frozen + tangents)})[1]")
        else:
            tangents[pos] = f"unit.reshape({x}.shape)"
            shape = f"(value.size, {x}.size)" if out_rank else f"{x}.size"
            column = f"{block}[:, k] = np.ravel(tangent)" if out_rank else f"{block}[k] = tangent"
            final = f"value.shape + {x}.shape" if out_rank else f"{x}.shape"
            lines += [f"{block} = np.empty({shape})", f"for k in range({x}.size):",
                      f"    unit = np.zeros({x}.size)", "    unit[k] = 1.0",
                      f"    tangent = {jvp}({', '.join(args + frozen + tangents)})[1]",
                      f"    {column}", f"{block} = {block}.reshape({final})"]
        blocks.append(block)
    return lines, blocks


def _forward_ready(spec: Spec, fwd0, argtypes: tuple):
    _checked(spec, argtypes, fwd0.argnums)
    fwd = _specialized(fwd0, spec.params, argtypes)
    return fwd, _output_rank(spec, fwd, argtypes)


def _output_rank(spec: Spec, t, argtypes: tuple) -> int:
    """The rank of the one output of `t` (specialized) for arguments of these types: a Jacobian's rows."""
    from s2sad.backend import inferred_return_type

    if t.generated.fn.returns_tuple or len(t.generated.fn.outputs) > 1:
        raise NotNumbaCallable(f"{spec.name} returns a tuple; inside numba code {spec.kind} takes a function of "
                               "one output")
    out = inferred_return_type(t.primal_fn, (), tuple(argtypes) + tuple(_hidden_types(t)))
    if out is None or not isinstance(out, (nb.Number, nb.Array)):
        raise NotNumbaCallable(f"{spec.name}: numba could not type its output for arguments of types {argtypes}")
    return out.ndim if isinstance(out, nb.Array) else 0


def _write_jacfwd(spec: Spec, argtypes: tuple):
    fwd, out_rank = _forward_ready(spec, spec.transform, argtypes)
    names = _Names(spec, spec.params + ["value", "k", "unit", "tangent", "np"] +
                   [f"block{k}" for k in range(len(fwd.flat_argnums))])
    names.closure["np"] = np
    ranks = [t.ndim if isinstance(t, nb.Array) else 0 for t in argtypes]
    lines, blocks = _jacobian_lines(names, fwd, spec.params, ranks, out_rank)
    return lines + [f"return {_grads(fwd, blocks)}"], names.closure


def _write_jacrev(spec: Spec, argtypes: tuple):
    """One vjp per output element, each giving a row of every block (jacobians.by_vjps, written out); of a
    scalar output, one vjp: the gradient."""
    r0 = spec.transform
    if r0.has_aux:
        raise NotNumbaCallable(f"{spec.name}: has_aux=True returns a pytree; inside numba code call jacrev without aux")
    _checked(spec, argtypes, r0.argnums)
    r = _specialized(r0, spec.params, argtypes)
    out_rank = _output_rank(spec, r, argtypes)
    blocks = [f"block{p}" for p in range(len(r.flat_argnums))]
    names = _Names(spec, spec.params + ["value", "k", "unit", "res", "np"] + blocks)
    names.closure["np"] = np
    args = spec.params + _frozen(names, r.hidden_args())
    vjp = names.bind("vjp", r.vjp_fn)
    rows = [f"res[{p + 1}]" for p in range(len(blocks))]
    if out_rank == 0:
        return [f"res = {vjp}({', '.join(args + ['1.0'])})", f"return {_grads(r, rows)}"], names.closure
    xs = [spec.params[i] if isinstance(argtypes[i], nb.Array) else None for i in r.flat_argnums]  # None: a float
    lines = [f"value = {names.bind('primal', r.primal_fn)}({', '.join(args)})"]
    lines += [f"{b} = np.empty((value.size, {x}.size))" if x else f"{b} = np.empty(value.size)"
              for b, x in zip(blocks, xs)]
    lines += ["for k in range(value.size):", "    unit = np.zeros(value.size)", "    unit[k] = 1.0",
              f"    res = {vjp}({', '.join(args + ['unit.reshape(value.shape)'])})"]
    lines += [f"    {b}[k, :] = np.ravel({row})" if x else f"    {b}[k] = {row}" for b, x, row in zip(blocks, xs, rows)]
    shaped = [f"{b}.reshape(value.shape + {x}.shape)" if x else f"{b}.reshape(value.shape)" for b, x in zip(blocks, xs)]
    return lines + [f"return {_grads(r, shaped)}"], names.closure


def _write_hessian(spec: Spec, argtypes: tuple):
    r = _reverse_ready(spec, argtypes)
    if len(r.flat_argnums) != 1:
        raise NotNumbaCallable(f"{spec.name}: inside numba code hessian differentiates one argument; "
                               "take tuple argnums from Python")
    names = _Names(spec, spec.params)
    jacobian = names.bind("jacobian", dispatcher_of(spec.options["jacobian"](r), spec.for_python))
    return [f"return {jacobian}({', '.join(spec.params)})"], names.closure


def _write_vmap(spec: Spec, argtypes: tuple):
    b = spec.transform
    axes, out_axes = spec.options["in_axes"], spec.options["out_axes"]
    if any(a not in (0, None) for a in axes) or out_axes != 0:
        raise NotNumbaCallable(f"{spec.name}: inside numba code vmap maps axis 0 (in_axes entries 0 or None, "
                               "out_axes=0); move the axis first")
    _checked(spec, argtypes, ())
    for i, (a, t) in enumerate(zip(axes, argtypes)):
        if a is not None and not isinstance(t, nb.Array):
            raise NotNumbaCallable(f"{spec.name}: argument {i} (`{spec.params[i]}`) is batched but has numba type {t}")
    inner = getattr(spec.options["fun"], "__s2sad_transform__", None)
    if inner is not None and hasattr(inner, "argnums") and inner.what in ("grad", "value_and_grad", "jvp", "jacfwd"):
        for i in inner.argnums:
            if not _is_float(argtypes[i]):
                raise TypeError(f"vmap({inner.what}) of {spec.name} requires float inputs, but argument {i} "
                                f"(`{spec.params[i]}`) has numba type {argtypes[i]}")
    names = _Names(spec, spec.params)
    return [f"return {_call(names, b.compiled('derivative'), spec.params, b.hidden_args())}"], names.closure


def _write_jvp(spec: Spec, argtypes: tuple):
    """`jvp(primals, tangents)` (a method of @differentiate) or `s2sad.jvp(f, primals, tangents)`."""
    primals, tangents = argtypes[-2], argtypes[-1]
    if not isinstance(primals, nb.BaseTuple) or not isinstance(tangents, nb.BaseTuple) or \
            len(primals) != len(tangents):
        raise NotNumbaCallable(f"jvp of {spec.name} takes a tuple of primals and a tuple of as many tangents")
    fwd0 = spec.options["forward"](len(primals))
    inner = Spec("jvp", fwd0, list(fwd0.params), spec.name)
    _checked(inner, tuple(primals), ())
    positions = tuple(i for i, t in enumerate(primals) if _is_float(t))
    if not positions:
        raise TypeError("jvp needs at least one float primal to differentiate")
    fwd = _specialized(fwd0, inner.params, tuple(primals))
    if fwd.flat_argnums != positions:
        fwd = fwd.with_wrt(positions)
    p, tn = spec.params[-2], spec.params[-1]
    names = _Names(spec, spec.params + ["res"])
    call = _call(names, fwd.jvp_fn, [f"{p}[{i}]" for i in range(len(primals))], fwd.hidden_args(),
                 [f"{tn}[{i}]" for i in positions])
    fn = fwd.generated.fn
    n = len(fn.outputs)
    if fn.returns_tuple:
        out = "(" + "".join(f"res[{k}], " for k in range(n)) + ")"
        tangent = "(" + "".join(f"res[{n + k}], " for k in range(n)) + ")"
    else:
        out, tangent = "res[0]", "res[1]"
    return [f"res = {call}", f"return {out}, {tangent}"], names.closure


def _write_call(spec: Spec, argtypes: tuple):
    """An @differentiate function called plainly: its compiled primal, as written."""
    _checked(spec, argtypes, ())
    r = _specialized(spec.transform, spec.params, argtypes)
    names = _Names(spec, spec.params)
    return [f"return {_call(names, r.primal_fn, spec.params, r.hidden_args())}"], names.closure


_WRITERS = {"call": _write_call, "grad": _write_grad, "value_and_grad": _write_value_and_grad, "flat": _write_flat,
            "jacfwd": _write_jacfwd, "jacrev": _write_jacrev, "hessian": _write_hessian, "vmap": _write_vmap, "jvp": _write_jvp}


# --- numba's typeof for s2sad's objects ------------------------------------------------------------------------

_generic_typeof = typeof_impl.dispatch(object)


@typeof_impl.register(pytypes.FunctionType)
def _typeof_function(val, c):
    if getattr(val, "__s2sad_numba__", None) is not None:
        return nb.Dispatcher(dispatcher_of(val))
    return _generic_typeof(val, c)


_DIFFERENTIATE: list[type] = []  # the class of @s2sad.differentiate, given by install()


@typeof_impl.register(pytypes.MethodType)
def _typeof_method(val, c):
    if isinstance(val.__self__, tuple(_DIFFERENTIATE)) and val.__func__.__name__ in val.__self__.NUMBA_METHODS:
        return nb.Dispatcher(dispatcher_of(val.__self__.public(val.__func__.__name__)))
    return _generic_typeof(val, c)


class DifferentiateType(nb.Callable, nb.Opaque):
    """An `@s2sad.differentiate` function in numba code: its methods are typed as their trampolines, and
    a call of it as a call of the trampoline of its compiled primal (as numba types a dispatcher)."""

    def __init__(self, obj):
        self.obj = obj
        super().__init__(name=f"s2sad.differentiate({obj.__s2sad_fun__.__name__})")

    @property
    def key(self):
        return self.obj  # one type per decorated function (two may share a name)

    def _primal(self):
        return nb.Dispatcher(dispatcher_of(self.obj.public("__call__")))

    def get_call_type(self, context, args, kws):
        return self._primal().get_call_type(context, args, kws)

    def get_call_signatures(self):
        return self._primal().get_call_signatures()

    def get_impl_key(self, sig):
        return self._primal().get_impl_key(sig)


register_model(DifferentiateType)(models.OpaqueModel)


@unbox(DifferentiateType)
def _unbox_differentiate(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


@infer_getattr
class _DifferentiateAttributes(AttributeTemplate):
    key = DifferentiateType

    def generic_resolve(self, typ, attr):
        if attr in type(typ.obj).NUMBA_METHODS:
            return nb.Dispatcher(dispatcher_of(typ.obj.public(attr)))
        return None


@lower_getattr_generic(DifferentiateType)
def _lower_method(context, builder, typ, value, attr):
    return context.get_dummy_value()


def install(differentiate: type, jvp: Callable, jvp_function: Callable[[Callable], Callable]) -> None:
    """Called once by api.py, which defines these (passed in, so this module never imports api):
    `differentiate`, whose methods numba code calls; `s2sad.jvp(f, primals, tangents)` in numba code, for
    `f` an njit function or an @differentiate one; `jvp_function(f)`, what numba code calls for jvp of `f`."""
    _DIFFERENTIATE.append(differentiate)

    def typer(fun, primals, tangents, backend=None):
        if isinstance(fun, DifferentiateType):
            public = fun.obj.public("jvp")
        elif isinstance(fun, nb.Dispatcher):
            public = jvp_function(getattr(fun.dispatcher, "__s2sad_public__", None) or fun.dispatcher.py_func)
        else:
            raise NotNumbaCallable(f"s2sad.jvp in numba code takes an njit function or an @s2sad.differentiate one "
                                   f"as its first argument, got {fun}")
        spec = public.__s2sad_numba__
        params = ["fun", "primals", "tangents"] + (["backend"] if backend is not None else [])
        body, closure = _write_jvp(Spec("jvp", spec.transform, params[:3], spec.name, **spec.options),
                                   (primals, tangents))
        return _function(f"{spec.name}_jvp", params, body, closure)

    overload(jvp, jit_options=_JIT, strict=False)(typer)

"""vmap on the GPU: the per-example function as one numba.cuda kernel, one thread per example.

A CUDA thread cannot allocate arrays on the heap, call NumPy's array functions or grow a tape,
so the per-example body (already lowered: one primitive per statement) is specialised to the
per-example shapes of the arguments it is called with. Every array it makes gets a static size
and lives in the thread's local memory (`cuda.local.array`); elementwise NumPy on such arrays,
`sum`/`mean` and 1-D `dot`/`@` become explicit loops; scalar NumPy functions are spelled with
`math`. What does not fit (tapes, arrays of unknown size, matrix products, most NumPy calls on
arrays) is refused with the statement's location and the reason.

    @cuda.jit
    def loss_grad_kernel(w, x_batch, y_batch, out):
        b = cuda.grid(1)
        if b < out.shape[0]:
            x = x_batch[b]
            y = y_batch[b]
            ...                       # the per-example body
            for i in range(3):
                out[b, i] = w_grad[i]

    def loss_grad_batched(w, x, y):
        return launch(loss_grad_kernel, len(x), (w, x, y), ((3,),), False, (False, True, True))
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from s2sad import ir
from s2sad.codegen.emit import Writer, atom, effect_text, index_text as _index, prim_text
from s2sad.codegen.module import Generated, header
from s2sad.codegen.precision import single_precision_text
from s2sad.errors import UnsupportedError, located
from s2sad.names import Names

Shape = tuple  # () for a scalar; dims are ints, or None where not known before the call


@dataclass(frozen=True)
class ShapeTuple:
    """The value of `a.shape`: a tuple whose entries are known when the code is generated."""

    dims: tuple


IDENTITY = "{0}"  # a rule's `cuda` form for what returns its first operand: with no shape change, the operand itself
# What this pass implements itself, by rule name, rather than facts of the rules: the allocations it writes
# as thread-local arrays, with the fill `allocation` spells for each (the *_like ones carry no `fills`,
# which the analysis reads for write-once arrays), and the totals `reduction` writes as one loop (a sum or
# mean of all elements, a 1-D dot product), where the rules' `reduces` marks every NumPy reduction.
ALLOCATIONS = {"zeros_like_adj", "zeros_like", "zeros", "empty", "empty_like", "ones", "ones_like"}
REDUCTIONS = {"sum", "mean", "dot", "vdot", "inner", "matmul"}


def _tape_error(stmt) -> UnsupportedError:
    return _unsupported(stmt, "the function keeps a tape (a value overwritten in a loop is saved for the "
                              "reverse sweep), and a CUDA thread cannot grow a list",
                        "use target='parallel', or write the loop so each value is stored once "
                        "(e.g. into an array indexed by the iteration)")


def _unsupported(stmt, why: str, hint: str) -> UnsupportedError:
    loc = getattr(stmt, "loc", None)
    if loc is None:
        return UnsupportedError(f"vmap(target='cuda'): {why}\n  hint: {hint}")
    return UnsupportedError(located(f"vmap(target='cuda'): {why}", loc.filename, loc.line, loc.col, loc.text, hint))


class KernelWriter:
    """Writes the kernel body statement by statement, tracking the static shape of every variable."""

    def __init__(self, fn: ir.Function, shapes: dict[str, Shape], names: Names, dtype: str = "float64"):
        self.fn, self.names, self.dtype = fn, names, dtype
        self.shape: dict[str, Shape | ShapeTuple] = dict(shapes)
        self.local: set[str] = set()  # variables holding a buffer this thread allocated
        self.uses_range_last = False
        self.w = Writer(indent=2)
        self.in_loop = {id(st) for st, depth, _ in ir.walk(fn.body) if depth}
        self.rewritten = _rewritten(fn.body)

    # --- statements -----------------------------------------------------------------------
    def block(self, stmts):
        for s in stmts:
            self.w.comment(s.loc)
            if isinstance(s, ir.Assign):
                self.assign(s)
            elif isinstance(s, ir.Store):
                self.store(s)
            elif isinstance(s, ir.If):
                self.w.line(f"if {atom(s.test)}:")
                self.nested(s.body)
                if s.orelse:
                    self.w.line("else:")
                    self.nested(s.orelse)
            elif isinstance(s, ir.For):
                self.shape[s.target] = ()
                self.w.line(f"for {s.target} in range({atom(s.start)}, {atom(s.stop)}, {atom(s.step)}):")
                self.nested(s.body)
            elif isinstance(s, ir.While):
                self.block(s.test_body)
                self.w.line(f"while {atom(s.test)}:")
                self.nested(s.body + s.test_body)
            elif isinstance(s, ir.Effect):  # print, raise: numba.cuda compiles them as written
                self.w.line(effect_text(s))
            else:
                raise _tape_error(s)

    def nested(self, stmts):
        with self.w.block():
            mark = self.w.mark()
            self.block(stmts)
            if self.w.empty_since(mark):
                self.w.line("pass")

    def store(self, s: ir.Store):
        view, value = _view_shape(self.of(ir.Var(s.base)), s.index), self.of(s.value)
        if view == ():
            self.w.line(f"{s.base}[{_index(s.index)}] = {atom(s.value)}")
            return
        self.known(s, view)
        self.loops(view, lambda i: f"{s.base}[{_index(s.index)}][{i}] = {_element(s.value, value, view, i)}")

    def assign(self, s: ir.Assign):
        v, target = s.value, s.target
        if isinstance(v, ir.Copy):
            self.copy_or_alias(s, target, v.value)
        elif isinstance(v, ir.Load):
            self.load(s, target, v)
        else:
            self.prim(s, target, v)

    def copy_or_alias(self, s, target: str, value):
        """`target = value`; for a local buffer, a copy unless a second name for it is surely safe.

        Local buffers live in the thread's local memory, so each copy is traffic to memory: a
        per-example gradient that went buffer -> adjoint -> output copied each vector twice. An alias
        is safe when neither name is ever written in place or bound again, and the statement is in
        no loop (a later iteration would refill the buffer under the alias)."""
        shape = self.of(value)
        if isinstance(value, ir.Var) and value.name in self.local and shape != ():
            if id(s) in self.in_loop or {target, value.name} & self.rewritten:
                self.allocate(s, target, shape)
                self.loops(shape, lambda i: f"{target}[{i}] = {value.name}[{i}]")
                return
            self.local.add(target)
        self.w.line(f"{target} = {atom(value)}")
        self.shape[target] = shape

    def load(self, s, target: str, v: ir.Load):
        base = self.shape.get(v.base.name)
        if isinstance(base, ShapeTuple):
            self.w.line(f"{target} = {v.base.name}[{_index(v.index)}]")
            self.shape[target] = ()
            return
        shape = _view_shape(base or (), v.index)
        if shape and v.base.name in self.local:  # a view into a local buffer: copy it, as above
            self.allocate(s, target, shape)
            self.loops(shape, lambda i: f"{target}[{i}] = {v.base.name}[{_index(v.index)}][{i}]")
            return
        self.w.line(f"{target} = {v.base.name}[{_index(v.index)}]")
        self.shape[target] = shape

    def prim(self, s, target: str, p: ir.Prim):
        name, shapes = p.rule.name, [self.of(a) for a in p.args]
        if name in ("shape",):
            self.w.line(f"{target} = {atom(p.args[0])}.shape")
            self.shape[target] = ShapeTuple(shapes[0])
        elif name in ("len", "size", "ndim"):
            self.w.line(f"{target} = {prim_text(p)}")
            self.shape[target] = ()
        elif name == "range_last":
            self.w.line(f"{target} = range_last({', '.join(atom(a) for a in p.args)})")
            self.uses_range_last = True
            self.shape[target] = ()
        elif name in ("tape", "tape_pop", "restore"):
            raise _tape_error(s)
        elif name in ALLOCATIONS:
            self.allocation(s, target, p, shapes)
        elif name in REDUCTIONS and any(shapes):
            self.reduction(s, target, p, shapes)
        elif name in ("matmul_adjoint_a", "matmul_adjoint_b") and shapes[1:] == [shapes[1], shapes[1]] and \
                len(shapes[1]) == 1 and shapes[0] == ():
            other = p.args[2] if name == "matmul_adjoint_a" else p.args[1]  # d(x.w)/dx = w, d/dw = x
            self.elementwise(s, target, [p.args[0], other], lambda g, o: f"{g} * {o}")
        elif name == "sum_expand" and shapes[0] == () and _no_axis(p.args[2:3]):
            self.elementwise(s, target, list(p.args[:2]), lambda g, like: g)  # d sum(x) / dx: g everywhere
        elif name == "reduce_count" and _no_axis(p.args[1:2]):
            self.known(s, shapes[0])
            self.w.line(f"{target} = {_size(shapes[0])}")
            self.shape[target] = ()
        elif name in ("unbroadcast", "broadcast_like") and shapes[0] != shapes[1] and shapes[1] == ():
            self.reduction(s, target, ir.Prim(p.rule, (p.args[0],)), [shapes[0]], total="sum")
        elif p.rule.cuda == IDENTITY and len(p.args) <= 2 and all(sh == shapes[0] for sh in shapes):
            self.copy_or_alias(s, target, p.args[0])  # unbroadcast(g, like) of equal shapes: g itself
        elif p.rule.operator or p.rule.cuda:
            self.elementwise(s, target, list(p.args), lambda *args: _scalar_call(p, list(args)))
        else:
            raise _unsupported(s, f"`{prim_text(p)}` has no CUDA form in s2sad (only scalar math, elementwise "
                                  "NumPy on arrays of static size, sum/mean and 1-D dot run in a thread)",
                               "write it as a loop over elements, or use target='parallel'")

    # --- arrays as loops ------------------------------------------------------------------
    def elementwise(self, s, target: str, args: list, scalar):
        shapes = [self.of(a) for a in args]
        out = _broadcast(shapes)
        if out == ():
            self.w.line(f"{target} = {scalar(*[atom(a) for a in args])}")
            self.shape[target] = ()
            return
        operands = [lambda i, a=a, sh=sh: _element(a, sh, out, i) for a, sh in zip(args, shapes)]
        reads_target = target in ir.atom_vars(args)
        if reads_target and target in self.local and self.shape[target] == out:
            buffer = target  # x = x + g on a buffer of ours: update it in place, element by element
        else:
            buffer = self.names.fresh(target) if reads_target else target
            self.allocate(s, buffer, out)
        self.loops(out, lambda i: f"{buffer}[{i}] = {scalar(*[op(i) for op in operands])}")
        if buffer != target:
            self.w.line(f"{target} = {buffer}")
            self.shape[target] = out
            self.local.add(target)

    def reduction(self, s, target: str, p: ir.Prim, shapes, total: str | None = None):
        name = total or p.rule.name
        if p.kwargs or (name in ("sum", "mean") and len(p.args) != 1):
            raise _unsupported(s, f"`{prim_text(p)}` reduces along an axis", "sum in a loop")
        if name in ("dot", "vdot", "inner", "matmul") and not (len(shapes[0]) == 1 and shapes[0] == shapes[1]):
            raise _unsupported(s, f"`{prim_text(p)}` is a matrix product; only 1-D dot products run in a thread",
                               "write the product as loops")
        self.known(s, shapes[0])
        a = p.args[0].name
        total = self.names.fresh(target) if target in ir.atom_vars(p.args) else target
        self.w.line(f"{total} = 0.0")
        if name == "sum" or name == "mean":
            self.loops(shapes[0], lambda i: f"{total} += {a}[{i}]")
        else:
            b = atom(p.args[1])
            self.loops(shapes[0], lambda i: f"{total} += {a}[{i}] * {b}[{i}]")
        if name == "mean":
            self.w.line(f"{total} = {total} / {_size(shapes[0])}")
        if total != target:
            self.w.line(f"{target} = {total}")
        self.shape[target] = ()

    def allocation(self, s, target: str, p: ir.Prim, shapes):
        name = p.rule.name
        if name.endswith("_like") or name == "zeros_like_adj":
            shape = shapes[0]
        else:
            shape = self.shape_argument(s, p.args[0])
        fill = {"zeros": "0.0", "ones": "1.0"}.get(name.split("_")[0])
        if shape == ():
            self.w.line(f"{target} = {fill or '0.0'}")
            self.shape[target] = ()
            return
        self.allocate(s, target, shape)
        if fill:
            self.loops(shape, lambda i: f"{target}[{i}] = {fill}")

    def shape_argument(self, s, a) -> Shape:
        if isinstance(a, ir.Const):
            return tuple(a.value) if isinstance(a.value, tuple) else (a.value,)
        known = self.shape.get(a.name)
        if isinstance(known, ShapeTuple):
            return known.dims
        raise _unsupported(s, f"the size of this array (`{self.fn.spelled.get(a.name, a.name)}`) is only known at run time",
                           "allocate arrays with a constant size or the shape of an argument")

    def allocate(self, s, target: str, shape: Shape):
        self.known(s, shape)
        self.w.line(f"{target} = cuda.local.array({shape if len(shape) > 1 else shape[0]}, np.{self.dtype})")
        self.shape[target] = shape
        self.local.add(target)

    def known(self, s, shape: Shape):
        if None in shape:
            raise _unsupported(s, "the size of this array (a slice) is only known at run time",
                               "index elements in a loop instead of slicing")

    def loops(self, shape: Shape, body):
        """Nested loops over `shape`, running `body(index_text)` innermost."""
        idx = [self.names.fresh(f"i{k}") for k in range(len(shape))]
        for k, (i, n) in enumerate(zip(idx, shape)):
            self.w.line(f"for {i} in range({n}):")
            self.w.level += 1
        self.w.line(body(", ".join(idx)))
        self.w.level -= len(shape)

    def of(self, a) -> Shape:
        if isinstance(a, ir.Const) or a.name not in self.shape:
            return ()
        found = self.shape[a.name]
        return () if isinstance(found, ShapeTuple) else found


def _rewritten(body) -> set[str]:
    """Names some statement writes in place (a store, `x = x + g` on a buffer) or binds more than once."""
    bound: set[str] = set()
    out: set[str] = set()
    for st, _, _ in ir.walk(body):
        if isinstance(st, ir.Store):
            out.add(st.base)
        elif isinstance(st, (ir.Assign, ir.For)):
            if st.target in bound or (isinstance(st, ir.Assign) and st.target in ir.stmt_reads(st)):
                out.add(st.target)
            bound.add(st.target)
    return out


def _view_shape(base: Shape, index) -> Shape:
    """The shape of `a[index]` for `a` of shape `base` (integer indices drop an axis, slices keep one)."""
    out = [_slice_length(item, n) for item, n in zip(index, base) if isinstance(item, ir.Slice)]
    return tuple(out) + tuple(base[len(index):])


def _no_axis(args) -> bool:
    return not args or (isinstance(args[0], ir.Const) and args[0].value is None)


def _slice_length(item: ir.Slice, n: int | None) -> int | None:
    """How many elements `[lower:upper:step]` takes from an axis of length `n`, if known now."""
    bounds = [item.lower, item.upper, item.step]
    if n is None or not all(b is None or isinstance(b, ir.Const) for b in bounds):
        return None
    return len(range(*slice(*(None if b is None else b.value for b in bounds)).indices(n)))


def _size(shape: Shape) -> str:
    out = 1
    for n in shape:
        out *= n
    return f"{float(out)!r}"


def _broadcast(shapes: list[Shape]) -> Shape:
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        out.append(dims.pop() if len(dims) == 1 else (1 if not dims else None))
    return tuple(out)


def _element(a, shape: Shape, out: Shape, index: str) -> str:
    """`a`'s element at the broadcast position `index` of an `out`-shaped result."""
    if shape == ():
        return atom(a)
    parts = index.split(", ")[len(out) - len(shape):]
    return f"{a.name}[{', '.join('0' if n == 1 else i for n, i in zip(shape, parts))}]"


def _scalar_call(p: ir.Prim, args: list[str]) -> str:
    """`p` on scalar operands `args` as device code: its operator, or its rule's `cuda` callee or format."""
    if p.rule.operator:
        return prim_text(ir.Prim(p.rule, tuple(ir.Var(f"({a})" if " " in a else a) for a in args)))
    form = p.rule.cuda
    return form.format(*args) if "{" in form else f"{form}({', '.join(args)})"


def kernel_module(fn: ir.Function, batched: list[bool], shapes: list[Shape], dtype: str = "float64") -> Generated:
    """`<name>_kernel` (the body for one example per thread) and `<name>_batched`, which launches it; for
    float32 arguments (`dtype`), its arrays, results and constants are float32 (codegen.precision)."""
    names = Names(fn.user_names | fn.temps | {"cuda", "launch", "range_last"})
    params = list(fn.params)
    outer = [names.fresh(p + "_batch") if is_b else p for p, is_b in zip(params, batched)]
    outs = [names.fresh("out") for _ in fn.outputs]
    b = names.fresh("b")
    body = KernelWriter(fn, dict(zip(params, shapes)), names, dtype)
    for p, o, is_b in zip(params, outer, batched):
        if is_b:
            body.w.line(f"{p} = {o}[{b}]")
    body.block(fn.body)
    out_shapes = []
    for o, v in zip(outs, fn.outputs):
        shape = body.of(ir.Var(v))
        body.known(None, shape)
        out_shapes.append(shape)
        if shape == ():
            body.w.line(f"{o}[{b}] = {v}")
        else:
            body.loops(shape, lambda i, o=o, v=v: f"{o}[{b}, {i}] = {v}[{i}]")
    kernel = names.fresh(fn.name + "_kernel")
    batch = names.fresh(fn.name + "_batched")
    first = params[batched.index(True)]
    lines = ["@cuda.jit", f"def {kernel}({', '.join(outer + outs)}):", f"    {b} = cuda.grid(1)",
             f"    if {b} < {outs[0]}.shape[0]:", *body.w.lines, "", "",
             f"def {batch}({', '.join(params)}):",
             f"    return launch({kernel}, len({first}), ({', '.join(params)},), {tuple(out_shapes)!r}, "
             f"{fn.returns_tuple}, {tuple(batched)!r}, np.{dtype})"]
    sizes = ", ".join(f"{p}: {s}" for p, s in zip(params, shapes))
    what = f"CUDA kernel (one thread per example along axis 0 of " \
           f"{', '.join(p for p, is_b in zip(params, batched) if is_b)}; per-example shapes {sizes})"
    helpers = ["@cuda.jit(device=True)\n" + inspect.getsource(_range_last())] if body.uses_range_last else []
    code = "\n\n".join([*helpers, "\n".join(lines) + "\n"])
    if dtype == "float32":
        code = single_precision_text(code, kernel)
    top = header(fn, what) + "import math\nimport numpy as np\nfrom numba import cuda\n\n" \
        "from s2sad.runtime.cuda import launch\n"
    return Generated(top + "\n\n" + code, fn.name + "_cuda", kernel, batch, batch, fn)


def _range_last():
    from s2sad.runtime.core import range_last

    return range_last

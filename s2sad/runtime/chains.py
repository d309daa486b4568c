"""Runs of elementwise lines as one loop: the plan (`_Plan`) that `codegen.chains.typed_module`
writes out for a signature, and `chain`, which runs the plan when numba types a call that
`codegen.chains.fused_chains` wrote (modules `s2sad build` writes, whose types are unknown before).

Generated code names every intermediate and numba runs each line as its own pass over memory:
logistic regression's adjoint is ten passes over (10^4,) arrays, where one loop reading each input
once does the same work. `codegen.chains` hands such a run of
lines to `chain` as the text of a function, with the names it reads and returns:

    add3_bar = log2_bar / add3                               add3_bar, b_bar = chain(
    p_bar = unbroadcast(-add3_bar * sub2, p)          ->         'def _(log2_bar, add3, sub2, p, b_bar):\\n ...',
    b_bar += unbroadcast(p_bar, b_bar)                           log2_bar, add3, sub2, p, b_bar)

Compiled, `chain` writes one loop over the elements (`_Plan.source`) when every array operand is
float64 of one rank, and runs it when, at run time, the arrays have one shape, the ones written
in place share no memory with the others, and each array that is not C-contiguous holds one value
(a sum's adjoint as a stride-0 view), or one value per row of the last axis (a row sum's adjoint,
`g[:, None] * p`: then the loop runs by rows). An operand the lines only add into (`b_bar += unbroadcast(g, b_bar)`,
or -=) may be narrower, as a bias's adjoint is: the loop then writes what it adds to a scratch array,
summed down into the operand after the loop. Otherwise it runs the lines as written. A line summing down to
a scalar (`unbroadcast(v, scalar)`) writes `v` out and sums it after the loop (`sum_all`), so
no line of the chain may read that sum. The results equal the lines as written up to rounding:
the loop calls `runtime.vmath`'s kernels, as the lines do, and only sums group differently.
"""

from __future__ import annotations

import ast
import functools
import re

import numpy as np
from numba import njit, types
from numba.extending import overload

from s2sad.runtime.core import sum_all, unbroadcast
from s2sad.runtime.vmath import exp_real, log1p_real, log_real, tanh_real, vexp, vlog, vlog1p, vtanh

__all__ = ["byte_extent", "chain", "extents_disjoint", "sums_down_to"]

KERNELS = {"vexp": "exp_real", "vlog": "log_real", "vlog1p": "log1p_real", "vtanh": "tanh_real"}
MIN_PASSES = 3  # array lines a loop must merge to be worth its compile: a loop of two compiles longer than it saves
MAX_OPERANDS = 16  # named parameters, not *operands: numba inlines no call with star arguments
_SLOTS = [f"_{i}" for i in range(MAX_OPERANDS)]
_PARAMS = ", ".join(f"{slot}=None" for slot in _SLOTS)


def chain(program: str, *operands):
    """The results of `program` (the text of `def _(<operands>): <lines>; return <results>`) on `operands`."""
    return _as_function(program)(*operands)


@njit
def extents_disjoint(span_a, span_b) -> bool:
    """Whether two byte extents, `byte_extent`s of two arrays, are disjoint (conservative for strided arrays).
    On extents, not arrays: compiled once, where a pair of arrays compiles once per pair of types."""
    return span_a[1] <= span_b[0] or span_b[1] <= span_a[0]


@njit
def byte_extent(a) -> tuple[int, int]:
    """The first byte `a` reaches and one past its last."""
    start = end = a.ctypes.data
    end += a.itemsize
    for k in range(a.ndim):
        if a.strides[k] < 0:
            start += (a.shape[k] - 1) * a.strides[k]
        else:
            end += (a.shape[k] - 1) * a.strides[k]
    return start, end


@njit
def sums_down_to(shape, loop_shape) -> bool:
    """Whether an array of `shape` is what `unbroadcast` sums an array of `loop_shape` down to (as many
    axes or fewer, each of size 1 or the loop's)."""
    lead = len(loop_shape) - len(shape)
    if lead < 0:
        return False
    for k in range(len(shape)):
        if shape[k] != 1 and shape[k] != loop_shape[lead + k]:
            return False
    return True


_AS_WRITTEN = {"np": np, "unbroadcast": unbroadcast, "vexp": vexp, "vlog": vlog, "vlog1p": vlog1p, "vtanh": vtanh}
_LOOP = {**_AS_WRITTEN, "sum_all": sum_all, "extents_disjoint": extents_disjoint, "byte_extent": byte_extent, "sums_down_to": sums_down_to, "exp_real": exp_real,
         "log_real": log_real, "log1p_real": log1p_real, "tanh_real": tanh_real}


@functools.lru_cache(maxsize=256)
def _as_function(program: str):
    namespace = dict(_AS_WRITTEN)
    exec(program, namespace)  # written by codegen.chains from generated lines
    return namespace["_"]


# error_model: python's checks every division for zero, which stops the vectorizer (generated code
# compiles with NumPy's model too). Not inlined, even as written: numba types an inlined overload
# twice, which lengthens a cold compile.
@overload(chain, prefer_literal=True, jit_options={"error_model": "numpy"})
def _ol_chain(program, _0=None, _1=None, _2=None, _3=None, _4=None, _5=None, _6=None, _7=None, _8=None, _9=None,
              _10=None, _11=None, _12=None, _13=None, _14=None, _15=None):
    if not isinstance(program, types.StringLiteral):
        return None
    text = program.literal_value
    fn = ast.parse(text).body[0]
    operands = (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15)[:len(fn.args.args)]
    plan = _Plan(fn, operands)
    source = plan.source() if plan.fusable else _as_written_source(fn)
    namespace = dict(_LOOP)
    exec(source, namespace)
    return namespace["impl"]


def _as_written_source(fn: ast.FunctionDef) -> str:
    body = "\n".join("    " + ast.unparse(s) for s in fn.body)
    return f"def impl(program, {_PARAMS}):\n{_unpack(fn)}{body}\n"


def _unpack(fn: ast.FunctionDef) -> str:
    return "".join(f"    {a.arg} = {slot}\n" for a, slot in zip(fn.args.args, _SLOTS))


class _Plan:
    """What each name of the chain is (an array's storage, a scalar, or a sum after the loop) and the
    loop's text; `fusable` is False where the lines must run as written."""

    def __init__(self, fn: ast.FunctionDef, operand_types, prefix: str = "_c_"):
        self.fn = fn
        self.p = prefix  # of every name the loop binds: apart from the chain's own names
        self.params = [a.arg for a in fn.args.args]
        self.outputs = [e.id for e in fn.body[-1].value.elts]
        self.fusable = True
        self.arrays: list[str] = []  # array operands, C-contiguous
        self.scalar_params: list[str] = []
        self.uniform: list[str] = []  # array operands read as one value (stride 0 at run time)
        self.written: dict[str, int] = {}  # array operands written in place -> their storage
        self.prelude: list[str] = []  # scalar lines, before the loop
        self.body: list[str] = []  # per element
        self.after: list[str] = []  # sums, after the loop
        self.temps: list[str] = []  # per-element values a sum needs
        self.store: dict[int, str] = {}  # storage -> its current element value
        self.kind: dict[str, tuple] = {}  # name -> ("array", storage) | ("scalar", var) | ("sum", var)
        self.operand_storage: dict[int, str] = {}
        self.counter = 0
        self.passes = 0  # lines that compute array elements
        self.nd = None
        self.sinks = _sinks(fn) & set(self.params)  # array operands only summed into: any shape they broadcast to
        self.sink_arrays: list[str] = []  # those of them that are C-contiguous float64 arrays
        for name, t in zip(self.params, operand_types):
            self._operand(name, t)
        if self.nd is None:
            self.fusable = False
        for stmt in fn.body[:-1]:
            if self.fusable:
                self._statement(stmt)
        if self.passes < MIN_PASSES:
            self.fusable = False  # one pass over memory saves nothing, and the loop costs a compile

    def fresh(self, stem: str) -> str:
        """A name for a value of the loop, apart from the chain's own (which never start with _c_)."""
        self.counter += 1
        return f"{self.p}{stem.removeprefix(self.p)}_{self.counter}"

    def _operand(self, name: str, t):
        if isinstance(t, types.Array) and name in self.sinks and t.dtype == types.float64 and t.layout == "C":
            self.sink_arrays.append(name)  # its rank is checked against the loop's when it runs
            storage = self.counter = self.counter + 1
            self.operand_storage[storage] = name
            self.store[storage] = None
            self.kind[name] = ("array", storage)
            return
        if isinstance(t, types.Array):
            if t.dtype != types.float64 or t.ndim == 0 or (self.nd is not None and t.ndim != self.nd):
                self.fusable = False
                return
            self.nd = t.ndim
            storage = self.counter = self.counter + 1
            self.operand_storage[storage] = name
            if t.layout == "C":
                self.arrays.append(name)
                self.store[storage] = None  # loaded on first read
            else:
                self.uniform.append(name)
                self.store[storage] = f"{self.p}{name}_one"
            self.kind[name] = ("array", storage)
        elif isinstance(t, (types.Float, types.Integer)) and not isinstance(t, types.Boolean):
            self.kind[name] = ("scalar", name)
            self.scalar_params.append(name)
        else:
            self.fusable = False

    def _value(self, name: str) -> str:
        kind = self.kind.get(name)
        if kind is None or kind[0] == "sum":
            raise _Unfusable(name)
        if kind[0] == "scalar":
            return kind[1]
        storage = kind[1]
        if self.store[storage] is None:  # an operand's element, loaded where first read
            var = self.fresh(f"{self.operand_storage[storage]}_e")
            self.body.append(f"{var} = {self.p}{self.operand_storage[storage]}_f[{self.p}i]")
            self.store[storage] = var
        return self.store[storage]

    def _expr(self, node: ast.AST) -> tuple[str, bool]:
        """(element code, whether it reads an array)."""
        if isinstance(node, ast.Name):
            return self._value(node.id), self.kind[node.id][0] == "array"
        if isinstance(node, ast.Constant) and np.isfinite(node.value):  # repr(inf) is no literal
            return repr(node.value), False
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            (left, a), (right, b) = self._expr(node.left), self._expr(node.right)
            return f"({left} {_OPS[type(node.op)]} {right})", a or b
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand, a = self._expr(node.operand)
            return f"({'-' if isinstance(node.op, ast.USub) else '+'}{operand})", a
        if isinstance(node, ast.Call) and len(node.args) == 1:
            arg, a = self._expr(node.args[0])
            if isinstance(node.func, ast.Name) and node.func.id in KERNELS:
                return f"{KERNELS[node.func.id]}(np.float64({arg}))", a
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id == "np":
                return f"np.{node.func.attr}({arg})", a
        raise _Unfusable(ast.unparse(node))

    def _statement(self, stmt: ast.stmt):
        try:
            if isinstance(stmt, ast.AugAssign):
                self._add_into(stmt.target.id, stmt.value, isinstance(stmt.op, ast.Sub))
            else:
                self._assign(stmt.targets[0].id, stmt.value)
        except _Unfusable:
            self.fusable = False

    def _assign(self, name: str, value: ast.AST):
        like = None
        if is_unbroadcast(value):
            value, like = value.args
            if self.kind.get(like.id, ("sum",))[0] == "sum":
                raise _Unfusable(like.id)
        if isinstance(value, ast.Name) and (like is None or self.kind[like.id][0] == "array"):
            if self.kind.get(value.id, ("sum",))[0] == "sum":
                raise _Unfusable(value.id)
            if self.kind[value.id][0] == "array" or like is None:
                self.kind[name] = self.kind[value.id]  # an alias: the same array (unbroadcast hands its argument back)
                return
        code, reads_array = self._expr(value)
        if like is not None and self.kind[like.id][0] == "scalar" and reads_array:
            self.kind[name] = ("sum", self._summed(code, None))
        elif reads_array or (like is not None and self.kind[like.id][0] == "array"):
            self._new_array(name, code)
        else:
            var = self.fresh(name)
            self.prelude.append(f"{var} = {code}")
            self.kind[name] = ("scalar", var)

    def _add_into(self, name: str, value: ast.AST, subtract: bool = False):
        summed = is_unbroadcast(value)
        if summed:
            value = value.args[0]
        code, reads_array = self._expr(value)
        if subtract:
            code = f"(-{code})"
        kind = self.kind.get(name)
        if kind is None or kind[0] == "sum":
            raise _Unfusable(name)
        if name in self.sink_arrays and not reads_array:
            raise _Unfusable(name)  # a value the loop repeats: summed into a narrower sink, counted once per element
        if kind[0] == "array":
            storage = kind[1]
            if storage in self.operand_storage:
                if self.operand_storage[storage] in self.uniform:
                    raise _Unfusable(name)  # a view: read-only
                self.written[self.operand_storage[storage]] = storage
            previous = self._value(name)
            self.passes += 1
            var = self.fresh(name)
            self.body.append(f"{var} = {previous} + {code}")
            self.store[storage] = var
        elif reads_array and summed:
            self.kind[name] = ("sum", self._summed(code, kind[1]))
        elif reads_array:
            self._new_array(name, f"{kind[1]} + {code}")
        else:
            var = self.fresh(name)
            self.prelude.append(f"{var} = {kind[1]} + {code}")
            self.kind[name] = ("scalar", var)

    def _new_array(self, name: str, code: str):
        self.passes += 1
        var = self.fresh(name)
        self.body.append(f"{var} = {code}")
        self.counter += 1
        self.store[self.counter] = var
        self.kind[name] = ("array", self.counter)

    def _summed(self, code: str, start: str | None) -> str:
        self.passes += 1
        temp = self.fresh("summed")
        self.temps.append(temp)
        self.body.append(f"{temp}_f[{self.p}i] = {code}")
        var = self.fresh("sum")
        self.after.append(f"{var} = {'' if start is None else start + ' + '}sum_all({temp}_f)")
        return var

    def branches(self) -> list[tuple[list[str], list[str], list[str]]]:
        """(run-time checks, the loop's lines, what holds each output) per way to run the chain as a loop.

        Two loops where a view may vary along leading axes (nd >= 2): the flat loop where every view
        holds one value, and a loop by rows of the last axis where each view holds one value per row
        (`g[:, None] * p`, a softmax's adjoint, as `codegen.views` leaves it: strides (8, 0))."""
        first = (self.arrays + self.uniform)[0]
        shaped = [f"{first}.size > 0"] + [f"{a}.shape == {first}.shape" for a in self.arrays + self.uniform if a != first]
        shaped += [f"extents_disjoint(byte_extent({w}), byte_extent({a}))" for w in sorted(self.written) for a in self.arrays + self.uniform
                   + self.sink_arrays if a != w]
        shaped += [f"sums_down_to({a}.shape, {first}.shape)" for a in self.sink_arrays]
        flat = shaped + [f"{a}.strides[{k}] == 0" for a in self.uniform for k in range(self.nd)]
        branches = [(flat, *self._fused(first, rows=False))]
        if self.uniform and self.nd >= 2:
            last = self.nd - 1
            by_rows = shaped + [f"({a}.strides[{last}] == 0 or {a}.shape[{last}] == 1)" for a in self.uniform]
            branches.append((by_rows, *self._fused(first, rows=True)))
        return branches

    def source(self) -> str:
        """`impl`, the overload's implementation: the loop where the operands allow it, else the lines."""
        lines = [f"def impl(program, {_PARAMS}):", _unpack(self.fn).rstrip("\n")]
        for k, (checks, fused, results) in enumerate(self.branches()):
            lines += [f"    {'if' if k == 0 else 'elif'} {' and '.join(checks)}:", *[f"        {line}" for line in fused],
                      f"        return ({''.join(r + ', ' for r in results)})"]
        return "\n".join(lines + ["    " + ast.unparse(s) for s in self.fn.body]) + "\n"

    def inline(self, as_written: list[str]) -> list[str]:
        """The chain where its lines stood, for a function compiled for the operands' types: the loop
        where the operands' shapes allow it, else `as_written` (the run's lines)."""
        lines = []
        for k, (checks, fused, results) in enumerate(self.branches()):
            bound = [f"{name} = {held}" for name, held in zip(self.outputs, results) if name != held]
            lines += [f"{'if' if k == 0 else 'elif'} {' and '.join(checks)}:", *[f"    {line}" for line in fused + bound]]
        return lines + ["else:", *[f"    {line}" for line in as_written]]

    def _rows_head(self, first: str, body: list[str]) -> tuple[list[str], str]:
        """(loops over the leading axes, each view's value for the row, then the loop along the row;
        the indent of its body)."""
        lead = [f"{self.p}r{k}" for k in range(self.nd - 1)]
        head = [f"{self.p}inner = {first}.shape[{self.nd - 1}]", f"{self.p}base = 0"]
        head += ["    " * k + f"for {r} in range({first}.shape[{k}]):" for k, r in enumerate(lead)]
        ind = "    " * len(lead)
        head += [f"{ind}{self.p}{u}_one = {u}[{', '.join(lead)}, 0]" for u in self.uniform]
        flat = re.compile(rf"\b(\w+_f)\[{self.p}i\]")
        head += [f"{ind}{a}_r = {a}[{self.p}base:{self.p}base + {self.p}inner]" for a in sorted(set(flat.findall("\n".join(body))))]
        return head + [f"{ind}for {self.p}j in range({self.p}inner):"], ind + "    "

    def _fused(self, first: str, rows: bool) -> tuple[list[str], list[str]]:
        """(the lines that run the chain as one loop over the flat index _c_i, or (rows) by rows of the
        last axis, each array's row a slice read at _c_j; what holds each output after them). The loop's
        own names start with the prefix (_c_), as `fresh` names do: the chain's operands (a scalar `i`,
        an array `size`) keep theirs."""
        zero = ", ".join(["0"] * self.nd)
        stored = {}  # storage -> output array holding it
        for name in self.outputs:
            kind = self.kind[name]
            if kind[0] == "array" and kind[1] not in self.operand_storage and kind[1] not in stored:
                stored[kind[1]] = self.fresh("out")
        body = list(self.body)
        body += [f"{out}_f[{self.p}i] = {self.store[storage]}" for storage, out in stored.items()]
        body += [f"{self.p}{name}_f[{self.p}i] = {self.store[storage]}" for name, storage in sorted(self.written.items())]
        results = []
        for name in self.outputs:
            kind = self.kind[name]
            if kind[0] != "array":
                results.append(kind[1])
            elif kind[1] in self.operand_storage:
                results.append(self.operand_storage[kind[1]])
            else:
                results.append(stored[kind[1]])
        sinks = [a for a in self.sink_arrays if a in self.written]
        if rows:
            loop_head, body_indent = self._rows_head(first, body)
            flat = re.compile(rf"\b(\w+_f)\[{self.p}i\]")  # an array of the loop at the flat index
            body = [flat.sub(rf"\1_r[{self.p}j]", line) for line in body]
        else:
            loop_head, body_indent = [f"for {self.p}i in range({self.p}size):"], "    "
        return [
            f"{self.p}size = {first}.size",
            *[f"{self.p}{a}_f = {a}.reshape({self.p}size)" for a in self.arrays],
            *[f"{self.p}{a}_in_place = {a}.shape == {first}.shape" for a in sinks],
            *[f"{self.p}{a}_f = {a}.reshape({self.p}size) if {self.p}{a}_in_place else np.zeros({self.p}size)" for a in sinks],
            *([] if rows else [f"{self.p}{u}_one = {u}[{zero}]" for u in self.uniform]),
            *[f"{o} = np.empty({first}.shape)" for o in stored.values()],
            *[f"{o}_f = {o}.reshape({self.p}size)" for o in stored.values()],
            *[f"{t}_f = np.empty({self.p}size)" for t in self.temps],
            *self.prelude,
            *loop_head,
            *[f"{body_indent}{line}" for line in body],
            *([body_indent[:-4] + f"{self.p}base += {self.p}inner"] if rows else []),
            *self.after,
            *[line for a in sinks for line in (
                f"if not {self.p}{a}_in_place:", f"    {a} += unbroadcast({self.p}{a}_f.reshape({first}.shape), {a})")],
        ], results


def _sinks(fn: ast.FunctionDef) -> set[str]:
    """Names the chain only adds into, each line `x += unbroadcast(E, x)` (or -=) with x not in E: such
    an operand may be narrower than the loop (a bias's adjoint), summed down after it."""
    sinks, other = set(), set()
    for stmt in fn.body[:-1]:
        if isinstance(stmt, ast.AugAssign) and is_unbroadcast(stmt.value) and stmt.value.args[1].id == stmt.target.id:
            sinks.add(stmt.target.id)
            other.update(n.id for n in ast.walk(stmt.value.args[0]) if isinstance(n, ast.Name))
        else:
            other.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name))
    return sinks - other


class _Unfusable(Exception):
    """A line the loop cannot run (it reads a sum made in the chain, or writes into a view)."""


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//"}


def is_unbroadcast(node: ast.AST) -> bool:
    """`unbroadcast(E, like)` with `like` a name: the one call a chain's lines make besides ufuncs
    (codegen.chains picks the lines by it too)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "unbroadcast"
            and len(node.args) == 2 and not node.keywords and isinstance(node.args[1], ast.Name))

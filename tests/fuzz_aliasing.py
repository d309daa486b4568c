"""Random NumPy programs that share memory: views, aliases, rebinding and in-place writes.

`aliasing_program(seed)` deterministically writes one function of a 1-D float array `x` (length
4-6) and sometimes a 2-D `m` (3 x n), returning a scalar. Its body mixes fresh arrays
(`np.zeros(n)`, `x * 1.0`, `x.copy()`, `np.ones((3, n))`), views (`a[1:4]`, `a[::2]`, `m[0]`,
`m[:, 1]`, `a.T`, `a.reshape(...)`), aliases (`b = a`), rebinding, in-place updates through any
name (`+=`, `-=`, `*=`, `a[i] = ...`, `a[lo:hi] = ...`), double buffers (`u, un = un, u`, or
`u = out` after filling a fresh `out`), writes into the argument `x` itself, helpers that return
fresh arrays, their argument or a view of it, or write into it, `for` loops over `range` and `if`
branches on the data. Every program is valid NumPy for its arguments (shapes are tracked, every
index is in range) and every value stays finite (updates are bounded: sin, tanh, cos, halving).

NumPy is the oracle: s2sad must return NumPy's value and a gradient (with respect to the values
on entry) matching finite differences, or refuse the program with a located UnsupportedError.
`load(source, name)` writes the source to a real module file (s2sad reads source) and imports it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from fuzz_programs import load

Shape = tuple  # () for a float, (L,) or (r, c) for arrays

HELPERS = {
    "_sin_copy": "def _sin_copy(a):\n    out = np.empty_like(a)\n    out[:] = np.sin(a)\n    return out\n",
    "_same": "def _same(a):\n    return a\n",
    "_tail": "def _tail(a):\n    return a[1:]\n",
    "_bump": "def _bump(p, v):\n    p += 0.5 * v\n",
    "_fill": "def _fill(out, a):\n    for i in range(out.shape[0]):\n        out[i] = np.tanh(a[i])\n",
    "_smooth": ("def _smooth(u):\n    out = np.zeros(u.shape[0])\n    out[0] = u[0]\n"
                "    out[1:] = 0.5 * (u[1:] + np.sin(u[:-1]))\n    return out\n"),
}


@dataclass
class Scope:
    """What is visible at a point of the body: array and float names with their shapes, loop indices."""

    shapes: dict[str, Shape]
    views: set[str] = field(default_factory=set)  # names last bound to a view or alias (favoured as write targets)
    indices: list[tuple[str, int]] = field(default_factory=list)  # (loop variable, exclusive bound)
    depth: int = 0  # block nesting; 0 at the top of the function

    def child(self, **changes) -> "Scope":
        fields = dict(shapes=dict(self.shapes), views=set(self.views), indices=list(self.indices), depth=self.depth + 1)
        fields.update(changes)
        return Scope(**fields)

    def arrays(self, ndim: int | None = None) -> list[str]:
        return [v for v, s in self.shapes.items() if len(s) > 0 and (ndim is None or len(s) == ndim)]

    def floats(self) -> list[str]:
        return [v for v, s in self.shapes.items() if s == ()]


@dataclass(frozen=True)
class AliasingProgram:
    seed: int
    name: str
    source: str
    n: int
    has_m: bool

    def arguments(self) -> tuple:
        rng = np.random.default_rng([self.seed, 1])
        x = rng.uniform(-1.5, 1.5, self.n)
        return (x, rng.uniform(-1.0, 1.0, (3, self.n))) if self.has_m else (x,)

    def function(self) -> Callable:
        return load(self.source, self.name, Path(tempfile.gettempdir()) / f"s2sad_aliasfuzz_{os.getuid()}")


def _atom(expr: str) -> str:
    """`expr` safe as an operand of `*` or `+`: parenthesized unless it is a name, a call or a subscript."""
    depth = 0
    for ch in expr:
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        if depth == 0 and ch == " ":
            return f"({expr})"
    return f"({expr})" if expr.startswith("-") else expr


class _Writer:
    def __init__(self, rng: np.random.Generator, n: int):
        self.rng, self.n = rng, n
        self.lines: list[str] = []
        self.count = 0
        self.budget = 0
        self.helpers: set[str] = set()

    # -- drawing -------------------------------------------------------------------------------
    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    # -- indices and slices --------------------------------------------------------------------
    def index(self, scope: Scope, length: int) -> str:
        loops = [v for v, bound in scope.indices if bound <= length]
        shifted = [f"{v} + 1" for v, bound in scope.indices if bound + 1 <= length]
        mirrored = [f"{length - 1} - {v}" for v, bound in scope.indices if bound <= length]
        if (loops or shifted) and self.chance(0.7):
            return self.pick(loops * 2 + shifted + mirrored)
        k = int(self.rng.integers(length))
        return str(k - length) if self.chance(0.2) else str(k)

    def window(self, scope: Scope, length: int, width: int) -> str:
        """A slice of `width` items out of `length`."""
        loops = [v for v, bound in scope.indices if bound - 1 + width <= length]
        if loops and self.chance(0.4):
            i = self.pick(loops)
            return f"{i}:{i} + {width}"
        lo = int(self.rng.integers(length - width + 1))
        hi = lo + width
        forms = [f"{lo}:{hi}"]
        if lo == 0:
            forms.append(f":{hi}")
        forms.append(f"{lo}:" if hi == length else f"{lo}:{hi - length}")
        return self.pick(forms)

    # -- values --------------------------------------------------------------------------------
    def ref(self, scope: Scope, shape: Shape) -> str:
        """A read of existing memory with exactly `shape` (a name, a slice, a row, a column)."""
        if shape == ():
            return self.scalar_ref(scope)
        options: list[str] = []
        for v, s in scope.shapes.items():
            if s == shape:
                options += [v] * 3
            if len(shape) == 1:
                (k,) = shape
                if len(s) == 1 and s[0] > k:
                    options.append(f"{v}[{self.window(scope, s[0], k)}]")
                    if (s[0] + 1) // 2 == k:
                        options.append(f"{v}[::2]")
                if len(s) == 1 and s[0] == k and k > 1:
                    options.append(f"{v}[::-1]")
                if len(s) == 2 and s[1] == k:
                    options.append(f"{v}[{self.index(scope, s[0])}]")
                if len(s) == 2 and s[0] == k:
                    options.append(f"{v}[:, {self.index(scope, s[1])}]")
            if len(shape) == 2 and len(s) == 2 and s == shape[::-1]:
                options.append(f"{v}.T")
            if len(shape) == 2 and len(s) == 1 and s[0] == shape[0] * shape[1] and shape[0] > 1:
                options.append(f"{v}.reshape({shape[0]}, {shape[1]})")
        if not options:
            return f"np.full({shape if len(shape) > 1 else shape[0]}, 0.5)"
        return self.pick(options)

    def scalar_ref(self, scope: Scope) -> str:
        options = [str(self.pick([0.5, 0.25, 1.5, -0.75]))]
        options += scope.floats() * 2
        for v, s in scope.shapes.items():
            if len(s) == 1:
                options += [f"{v}[{self.index(scope, s[0])}]"] * 2
            elif len(s) == 2:
                options.append(f"{v}[{self.index(scope, s[0])}, {self.index(scope, s[1])}]")
        if self.chance(0.15):
            return f"np.tanh(np.sum({self.pick(scope.arrays())}))"
        return self.pick(options)

    def value(self, scope: Scope, shape: Shape, depth: int = 2) -> str:
        """A bounded expression of `shape` (its size is at most a small multiple of what it reads)."""
        def operand() -> str:
            return self.value(scope, shape, depth - 1) if depth > 1 and self.chance(0.3) else self.ref(scope, shape)

        templates = ["np.sin({a})", "np.tanh({a})", "np.cos({a})", "0.5 * {A}", "np.tanh({a}) * {B}",
                     "{A} + 0.25 * np.sin({b})", "{S} * np.cos({a})", "{A} - 0.5 * {B}"]
        if scope.depth == 0:
            templates.append("{A} * {B}")
        template = self.pick(templates)
        a = operand() if "{a}" in template or "{A}" in template else ""
        b = operand() if "{b}" in template or "{B}" in template else ""
        s = self.scalar_ref(scope) if "{S}" in template else ""
        return template.format(a=a, A=_atom(a), b=b, B=_atom(b), S=_atom(s))

    def factor(self, scope: Scope, shape: Shape) -> str:
        """A multiplier bounded by 1 in size, for `*=`."""
        return self.pick(["0.5", f"np.cos({self.ref(scope, shape)})", f"np.tanh({self.ref(scope, shape)})",
                          f"0.5 * np.sin({self.ref(scope, shape)})"])

    def condition(self, scope: Scope) -> str:
        arrays = scope.arrays()
        return self.pick([f"np.sum({self.pick(arrays)}) > {self.pick(['0.0', '0.5', '-0.5'])}",
                          f"{self.scalar_ref(scope)} > {self.scalar_ref(scope)}",
                          f"{self.scalar_ref(scope)} < 0.25"])

    # -- statements ----------------------------------------------------------------------------
    def bind(self, scope: Scope, indent: int, shape: Shape, rhs: str, view: bool) -> str:
        """Bind a fresh name (or, at the top level or with an equal shape, an existing one) to `rhs`."""
        rebindable = [v for v, s in scope.shapes.items() if v not in ("x", "m") and (scope.depth == 0 or s == shape)]
        target = self.pick(rebindable) if rebindable and self.chance(0.25) else self.fresh(self.pick("abcuvw"))
        self.emit(indent, f"{target} = {rhs}")
        scope.shapes[target] = shape
        (scope.views.add if view else scope.views.discard)(target)
        return target

    def stmt_fresh(self, scope: Scope, indent: int) -> None:
        n = self.n
        options = [((n,), "np.zeros(n)"), ((n,), "x * 1.0"), ((n,), "x.copy()"), ((n,), "np.zeros_like(x)"),
                   ((n,), self.value(scope, (n,))), ((3, n), "np.ones((3, n))"), ((3, n), "np.zeros((3, n))"),
                   ((3, n), f"np.ones((3, n)) * {_atom(self.ref(scope, (n,)))}")]
        if "m" in scope.shapes:
            options += [((3, n), "m.copy()"), ((3, n), "m * 1.0")]
        if self.chance(0.1):
            options = [((), self.scalar_ref(scope)), ((), f"np.sum({self.pick(scope.arrays())})")]
        shape, rhs = self.pick(options)
        self.bind(scope, indent, shape, rhs, view=False)

    def stmt_view(self, scope: Scope, indent: int) -> None:
        base = self.pick(scope.arrays())
        shape = scope.shapes[base]
        options: list[tuple[Shape, str]] = [(shape, base), (shape[::-1], f"{base}.T")]
        if len(shape) == 1:
            (L,) = shape
            width = int(self.rng.integers(1, L)) if L > 1 else 1
            options += [((width,), f"{base}[{self.window(scope, L, width)}]") for _ in range(2)]
            options += [((L,), f"{base}[:]"), (((L + 1) // 2,), f"{base}[::2]")]
            if L > 1:
                options += [((L,), f"{base}[::-1]"), ((L // 2,), f"{base}[1::2]")]
            for r in (2, 3, 1):
                if L % r == 0 and L > 1:
                    options.append(((r, L // r), f"{base}.reshape({r}, {L // r})"))
        else:
            r, c = shape
            options += [((c,), f"{base}[{self.index(scope, r)}]"), ((c,), f"{base}[{self.index(scope, r)}]"),
                        ((r,), f"{base}[:, {self.index(scope, c)}]"), ((r * c,), f"{base}.reshape({r * c})"),
                        ((r * c,), f"{base}.ravel()")]
            if r > 1:
                options.append(((r - 1, c), f"{base}[1:]"))
            if c > 2:
                options.append(((r, c - 2), f"{base}[:, 1:-1]"))
        shape, rhs = self.pick(options)
        self.bind(scope, indent, shape, rhs, view=True)

    def stmt_rebind(self, scope: Scope, indent: int) -> None:
        """`x = f(x)` style rebinding of an existing name to new memory of the same shape."""
        target = self.pick(scope.arrays())
        shape = scope.shapes[target]
        self.emit(indent, f"{target} = {self.value(scope, shape)}")
        scope.views.discard(target)

    def target(self, scope: Scope) -> str:
        names = scope.arrays()
        weights = np.array([3.0 if v in scope.views else 2.0 if v in ("x", "m") else 1.0 for v in names])
        return names[int(self.rng.choice(len(names), p=weights / weights.sum()))]

    def stmt_inplace(self, scope: Scope, indent: int) -> None:
        if scope.floats() and self.chance(0.08):
            s = self.pick(scope.floats())
            self.emit(indent, f"{s} += {self.value(scope, ())}")
            return
        t = self.target(scope)
        shape = scope.shapes[t]
        op = self.pick(["+=", "-=", "*=", "=", "=", "+="])

        def rhs(sub_shape: Shape) -> str:
            if op == "*=":
                return self.factor(scope, sub_shape)
            return self.value(scope, sub_shape)

        if len(shape) == 1:
            (L,) = shape
            form = self.pick(["whole", "item", "item", "slice", "slice", "all"])
            if form == "whole" and op != "=":
                self.emit(indent, f"{t} {op} {rhs(shape)}")
            elif form == "item":
                self.emit(indent, f"{t}[{self.index(scope, L)}] {op} {rhs(())}")
            elif form == "slice" and L > 1:
                width = int(self.rng.integers(1, L))
                self.emit(indent, f"{t}[{self.window(scope, L, width)}] {op} {rhs((width,))}")
            else:
                self.emit(indent, f"{t}[:] {op} {rhs(shape) if self.chance(0.8) else rhs(())}")
        else:
            r, c = shape
            form = self.pick(["whole", "whole_row", "item", "row", "column", "chained"])
            if form == "whole" and op != "=":
                self.emit(indent, f"{t} {op} {rhs(shape)}")
            elif form == "whole_row" and op != "=":
                self.emit(indent, f"{t} {op} {rhs((c,))}")  # broadcast along the rows
            elif form == "item":
                self.emit(indent, f"{t}[{self.index(scope, r)}, {self.index(scope, c)}] {op} {rhs(())}")
            elif form == "row":
                self.emit(indent, f"{t}[{self.index(scope, r)}] {op} {rhs((c,))}")
            elif form == "column":
                self.emit(indent, f"{t}[:, {self.index(scope, c)}] {op} {rhs((r,))}")
            else:
                width = int(self.rng.integers(1, c + 1))
                self.emit(indent, f"{t}[{self.index(scope, r)}][{self.window(scope, c, width)}] {op} {rhs((width,))}")

    def stmt_swap(self, scope: Scope, indent: int) -> None:
        arrays = scope.arrays()
        pairs = [(a, b) for a in arrays for b in arrays if a < b and "x" not in (a, b) and "m" not in (a, b)
                 and (scope.depth == 0 or scope.shapes[a] == scope.shapes[b])]
        if not pairs:
            return self.stmt_view(scope, indent)
        a, b = self.pick(pairs)
        if self.chance(0.7):
            self.emit(indent, f"{a}, {b} = {b}, {a}")
        else:
            tmp = self.fresh("tmp")
            self.emit(indent, f"{tmp} = {a}")
            self.emit(indent, f"{a} = {b}")
            self.emit(indent, f"{b} = {tmp}")
            scope.shapes[tmp] = scope.shapes[a]
            scope.views.add(tmp)
        scope.shapes[a], scope.shapes[b] = scope.shapes[b], scope.shapes[a]
        self.budget -= 1

    def stmt_double_buffer(self, scope: Scope, indent: int) -> None:
        """A time-stepping loop: `u, un = un, u` after filling `un`, or `u = out` after filling a fresh `out`."""
        n = self.n
        u = self.fresh("u")
        self.emit(indent, f"{u} = {self.pick(['x * 1.0', 'x.copy()', 'np.sin(x)'])}")
        steps = int(self.rng.integers(1, 4))
        t = self.fresh("t")
        update = self.pick(["{u}[1:-1] + 0.1 * ({u}[:-2] - 2.0 * {u}[1:-1] + {u}[2:])",
                            "np.tanh({u}[1:-1]) + 0.25 * {u}[2:]", "0.5 * ({u}[:-2] + np.sin({u}[2:]))"])
        edge = self.pick(["{u}[0]", "np.sin({u}[0])", "0.0"])
        style = self.pick(["swap", "swap", "out", "out_loop", "helper"])
        if style == "swap":
            un = self.fresh("un")
            self.emit(indent, f"{un} = np.zeros(n)")
            self.emit(indent, f"for {t} in range({steps}):")
            self.emit(indent + 1, f"{un}[1:-1] = {update.format(u=u)}")
            self.emit(indent + 1, f"{un}[0] = {edge.format(u=u)}")
            self.emit(indent + 1, f"{un}[-1] = {u}[-1]")
            self.emit(indent + 1, f"{u}, {un} = {un}, {u}")
            scope.shapes[un] = (n,)
        elif style == "out":
            out = self.fresh("out")
            self.emit(indent, f"for {t} in range({steps}):")
            self.emit(indent + 1, f"{out} = np.zeros(n)")
            self.emit(indent + 1, f"{out}[1:-1] = {update.format(u=u)}")
            self.emit(indent + 1, f"{out}[0] = {edge.format(u=u)}")
            self.emit(indent + 1, f"{u} = {out}")
        elif style == "out_loop":
            out, i = self.fresh("out"), self.fresh("i")
            self.emit(indent, f"for {t} in range({steps}):")
            self.emit(indent + 1, f"{out} = np.zeros(n)")
            self.emit(indent + 1, f"{out}[0] = {edge.format(u=u)}")
            self.emit(indent + 1, f"for {i} in range(1, n):")
            self.emit(indent + 2, f"{out}[{i}] = np.tanh({u}[{i}] + 0.5 * {u}[{i} - 1])")
            self.emit(indent + 1, f"{u} = {out}")
        else:
            self.helpers.add("_smooth")
            self.emit(indent, f"for {t} in range({steps}):")
            self.emit(indent + 1, f"{u} = _smooth({u})")
        scope.shapes[u] = (n,)
        self.budget -= 3

    def stmt_helper(self, scope: Scope, indent: int) -> None:
        arrays = scope.arrays()
        a = self.pick(arrays)
        shape = scope.shapes[a]
        kind = self.pick(["_sin_copy", "_same", "_tail", "_bump", "_fill", "_smooth"])
        if kind == "_tail" and shape[0] < 2:
            kind = "_same"
        if kind in ("_fill", "_smooth") and len(shape) != 1:
            kind = "_bump"
        if kind == "_smooth" and shape[0] < 2:
            kind = "_sin_copy"
        self.helpers.add(kind)
        if kind == "_bump":
            self.emit(indent, f"_bump({a}, {self.value(scope, shape)})")
        elif kind == "_fill":
            if self.chance(0.5):
                a = self.bind(scope, indent, shape, "np.zeros(n)" if shape == (self.n,) else f"np.zeros({shape[0]})",
                              view=False)
            self.emit(indent, f"_fill({a}, {self.ref(scope, shape)})")
        else:
            result = {"_sin_copy": shape, "_same": shape, "_tail": (shape[0] - 1,) + shape[1:], "_smooth": shape}[kind]
            self.bind(scope, indent, result, f"{kind}({a})", view=kind in ("_same", "_tail"))

    def stmt_for(self, scope: Scope, indent: int) -> None:
        i = self.fresh("i")
        bound = int(self.rng.integers(1, self.n + 1))
        text = "n" if bound == self.n and self.chance(0.5) else str(bound)
        self.emit(indent, f"for {i} in range({text}):")
        body = scope.child(indices=scope.indices + [(i, bound)])
        self.block(body, indent + 1, int(self.rng.integers(1, 4)))
        self.merge(scope, body)

    def stmt_if(self, scope: Scope, indent: int) -> None:
        self.emit(indent, f"if {self.condition(scope)}:")
        body = scope.child()
        self.block(body, indent + 1, int(self.rng.integers(1, 3)))
        self.merge(scope, body)
        if self.chance(0.5):
            self.emit(indent, "else:")
            other = scope.child()
            self.block(other, indent + 1, int(self.rng.integers(1, 3)))
            self.merge(scope, other)

    def merge(self, scope: Scope, body: Scope) -> None:
        """After a block: names it made are dropped; names it rebound may now be views."""
        for v in scope.shapes:
            assert body.shapes[v] == scope.shapes[v], (v, body.shapes[v], scope.shapes[v])
            if v in body.views:
                scope.views.add(v)

    def statement(self, scope: Scope, indent: int) -> None:
        self.budget -= 1
        kinds = ["fresh", "view", "view", "inplace", "inplace", "inplace", "inplace", "rebind", "swap", "helper"]
        if scope.depth < 2 and self.budget > 1:
            kinds += ["for", "for", "if"]
        if scope.depth == 0 and self.budget > 3:
            kinds += ["double_buffer"]
        getattr(self, f"stmt_{self.pick(kinds)}")(scope, indent)

    def block(self, scope: Scope, indent: int, count: int) -> None:
        for _ in range(count):
            if self.budget <= 0 and _ > 0:
                break
            self.statement(scope, indent)

    def result(self, scope: Scope) -> str:
        arrays = scope.arrays()
        chosen = [arrays[k] for k in self.rng.permutation(len(arrays))[: int(self.rng.integers(2, 6))]]
        if "x" not in chosen and self.chance(0.5):
            chosen.append("x")
        terms = [self.pick(["np.sum({v} * {v})", "np.sum(np.sin({v}))", "np.sum({v})"]).format(v=v) for v in chosen]
        terms += [f for f in scope.floats()[-2:]]
        return " + ".join(terms)


def aliasing_program(seed: int) -> tuple[str, str, tuple]:
    """(source text, function name, arguments) of the program drawn by `seed`."""
    program = draw_program(seed)
    return program.source, program.name, program.arguments()


def draw_program(seed: int) -> AliasingProgram:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 7))
    has_m = bool(rng.random() < 0.35)
    writer = _Writer(rng, n)
    writer.budget = int(rng.integers(5, 13))
    scope = Scope(shapes={"x": (n,), **({"m": (3, n)} if has_m else {})})
    writer.emit(1, "n = x.shape[0]")
    while writer.budget > 0:
        writer.statement(scope, 1)
    writer.emit(1, f"return {writer.result(scope)}")
    name = f"alias_{seed}"
    params = "x, m" if has_m else "x"
    helpers = "".join(f"{HELPERS[h]}\n\n" for h in sorted(writer.helpers))
    source = f"import numpy as np\n\n\n{helpers}def {name}({params}):\n" + "\n".join(writer.lines) + "\n"
    return AliasingProgram(seed, name, source, n, has_m)


if __name__ == "__main__":  # print programs: python tests/fuzz_aliasing.py [FIRST_SEED [COUNT]]
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    for s in range(first, first + (int(sys.argv[2]) if len(sys.argv) > 2 else 5)):
        print(draw_program(s).source)

"""Random straight-line NumPy programs over 2-D arrays that broadcast: a hypothesis strategy.

The python and numba backends run the same generated source, but numba runs it after the
compiled-text rewrites (elementwise loops and their walk plans, chains of elementwise lines,
additions in place, sums as views, vectorized exp/log/tanh) and through runtime helpers
specialized by layout. Those act on arrays of two or more axes that broadcast, which
tests/fuzz_programs.py (floats and 1-D vectors) never writes. A program here is made of what
GMM-, MLP- and softmax-like code is made of: elementwise expressions mixing (n, m), (n, 1),
(1, m), (m,) and scalar operands, sums/means/maxima along an axis with and without keepdims,
logsumexp and softmax over rows or columns, pairwise `a[:, None, :] - B[None, :, :]` terms
reduced along the new axis, matrix products, and an accumulator added into in place.

Shapes are tracked symbolically (tuples of "n", "m", "1"); every operand pair broadcasts by
construction, and every expression stays finite (exponentials see bounded arguments or a
row's maximum subtracted, denominators and logs see positive expressions). `n` and `m` are
drawn different so that a transposed or mis-broadcast result cannot pass by accident; either
may be 1, where broadcasting is most ambiguous.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from fuzz_programs import POSITIVE, UNARY, _atom, load

Shape = tuple[str, ...]
NM: Shape = ("n", "m")
SCALAR: Shape = ()

# parameter name -> symbolic shape; "B" is square (m, m) and only meets the others through products
PARAMETERS = {"X": NM, "c": ("n", "1"), "r": ("m",), "rk": ("1", "m"), "s": SCALAR, "B": ("m", "m")}
AXIS_REDUCTIONS = ["sum", "sum", "mean", "max", "min"]


def broadcast(a: Shape, b: Shape) -> Shape:
    """NumPy's broadcast of two symbolic shapes (never "n" against "m": the strategy avoids it)."""
    width = max(len(a), len(b))
    a, b = ("1",) * (width - len(a)) + a, ("1",) * (width - len(b)) + b
    out = []
    for x, y in zip(a, b):
        assert x == y or "1" in (x, y), (a, b)
        out.append(y if x == "1" else x)
    return tuple(out)


@dataclass(frozen=True)
class BroadcastProgram:
    name: str
    source: str
    params: tuple[str, ...]
    n: int
    m: int

    def shape(self, param: str) -> tuple[int, ...]:
        sizes = {"n": self.n, "m": self.m, "1": 1}
        return tuple(sizes[axis] for axis in PARAMETERS[param])

    def arguments(self, rng: np.random.Generator) -> tuple:
        return tuple(float(rng.uniform(-1.5, 1.5)) if not self.shape(p) else rng.uniform(-1.5, 1.5, self.shape(p))
                     for p in self.params)

    def function(self) -> Callable:
        return load(self.source, self.name)


class _Writer:
    def __init__(self, draw, params: tuple[str, ...]):
        self.draw = draw
        self.lines: list[str] = []
        self.shapes: dict[str, Shape] = {p: PARAMETERS[p] for p in params if p != "B"}
        self.square = "B" in params
        self.count = 0
        self.accumulator: str | None = None

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.floats(0, 1)) < p

    def fresh(self, stem: str = "t") -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def assign(self, shape: Shape, expr: str, stem: str = "t") -> str:
        if expr == self.accumulator:  # another name for it would see its later in-place updates (s2sad refuses)
            expr = f"{expr}.copy()"
        name = self.fresh(stem)
        self.lines.append(f"    {name} = {expr}")
        self.shapes[name] = shape
        return name

    def names(self, want: Callable[[Shape], bool]) -> list[str]:
        return [name for name, shape in self.shapes.items() if want(shape)]

    # -- expressions ------------------------------------------------------------------------------
    def elementwise(self, depth: int, leaves: dict[str, Shape] | None = None) -> tuple[str, Shape]:
        """An elementwise expression of `leaves` (expression -> shape; by default the names of at most 2 axes:
        (n, m, m) blocks meet B only)."""
        if leaves is None:
            leaves = {name: shape for name, shape in self.shapes.items() if len(shape) <= 2}
        if depth <= 0 or self.chance(0.25):
            if self.chance(0.15):
                return self.choice(["0.5", "2.0", "-1.5"]), SCALAR
            leaf = self.choice(sorted(leaves))
            return leaf, leaves[leaf]
        kind = self.choice(["binop", "binop", "binop", "unary", "unary", "div", "square", "where", "extremum"])
        a, sa = self.elementwise(depth - 1, leaves)
        if kind == "unary":
            return self.choice(UNARY).format(a=a), sa
        if kind == "square":
            return f"{_atom(a)} ** 2", sa
        b, sb = self.elementwise(depth - 1, leaves)
        shape = broadcast(sa, sb)
        if kind == "binop":
            return f"({a} {self.choice(['+', '-', '*'])} {b})", shape
        if kind == "div":
            return f"({a} / {self.choice(POSITIVE).format(a=b)})", shape
        if kind == "where":
            return f"np.where({a} > {b}, {a}, 0.5 * {b})", shape
        return f"np.{self.choice(['maximum', 'minimum'])}({a}, {b})", shape

    def full(self, depth: int) -> str:
        """An (n, m) expression: an elementwise one, broadcast against an (n, m) name where it is narrower."""
        expr, shape = self.elementwise(depth)
        if broadcast(shape, NM) != shape:
            expr = f"({expr} {self.choice(['+', '*'])} {self.choice(self.names(lambda s: s == NM))})"
        return expr

    # -- statements -------------------------------------------------------------------------------
    def statement(self) -> None:
        kinds = ["elementwise"] * 4 + ["reduce"] * 2 + ["logsumexp", "softmax", "total"]
        kinds += ["pairwise", "product", "block", "block", "triangle"] * self.square + ["accumulate"] * 2
        kinds += ["vector_product"] * ("r" in self.shapes or "c" in self.shapes) + ["view", "rows_loop"]
        kind = self.choice(kinds)
        getattr(self, f"write_{kind}")()

    def write_elementwise(self) -> None:
        expr, shape = self.elementwise(self.draw(st.integers(1, 3)))
        self.assign(shape, expr)

    def write_reduce(self) -> None:
        what, axis = self.choice(AXIS_REDUCTIONS), self.choice([0, 1])
        operand = self.full(self.draw(st.integers(0, 2)))
        form = self.choice(["keepdims", "keepdims", "plain", "method"])
        if form == "keepdims":
            self.assign(("n", "1") if axis == 1 else ("1", "m"), f"np.{what}({operand}, axis={axis}, keepdims=True)")
        elif axis == 0:
            call = f"np.{what}({operand}, axis=0)" if form == "plain" else f"{_atom(operand)}.{what}(axis=0)"
            self.assign(("m",), call)
        else:  # a row reduction as a column again
            self.assign(("n", "1"), f"np.{what}({operand}, axis=1)[:, None]")

    def write_total(self) -> None:
        expr, _ = self.elementwise(self.draw(st.integers(0, 2)))
        self.assign(SCALAR, f"np.{self.choice(['sum', 'mean', 'max'])}({expr})")

    def write_logsumexp(self) -> None:
        axis = self.choice([0, 1])
        shape = ("n", "1") if axis == 1 else ("1", "m")
        a = self.assign(NM, self.full(self.draw(st.integers(0, 2))), stem="z")
        top = self.assign(shape, f"np.max({a}, axis={axis}, keepdims=True)", stem="top")
        self.assign(shape, f"np.log(np.sum(np.exp({a} - {top}), axis={axis}, keepdims=True)) + {top}", stem="lse")

    def write_softmax(self) -> None:
        axis = self.choice([0, 1])
        a = self.full(self.draw(st.integers(0, 2)))
        e = self.assign(NM, f"np.exp({_atom(a)} - np.max({a}, axis={axis}, keepdims=True))", stem="e")
        self.assign(NM, f"{e} / np.sum({e}, axis={axis}, keepdims=True)", stem="p")

    def write_pairwise(self) -> None:
        a = self.choice(self.names(lambda s: s == NM))
        op = self.choice(["-", "*", "+"])
        inner = f"{a}[:, None, :] {op} B[None, :, :]"
        wrap = self.choice(["({i}) ** 2", "np.tanh({i})", "np.exp(-0.5 * ({i}) ** 2)", "{i}"])
        reduce = self.choice(["np.sum", "np.sum", "np.max"])
        self.assign(NM, f"{reduce}({wrap.format(i=inner)}, axis=2)")

    def write_product(self) -> None:
        a = self.choice(self.names(lambda s: s == NM))
        form = self.choice(["{a} @ B", "{a} @ B.T", "np.einsum('ij,kj->ik', {a}, B)", "np.dot(np.tanh({a}), B)"])
        self.assign(NM, form.format(a=a))

    def write_view(self) -> None:
        """Reversed and flipped views: negative strides, read by the runtime's layout-general paths."""
        a = self.choice([n for n in self.names(lambda s: s == NM) if n != self.accumulator])  # as above
        form = self.choice(["{a}[::-1, :]", "{a}[:, ::-1]", "{a}[::-1, ::-1]", "np.flip({a}, axis=1)",
                            "np.ascontiguousarray({a}[::-1])", "{a}.T.T"])
        self.assign(NM, form.format(a=a), stem="v")

    def write_rows_loop(self) -> None:
        """A loop over rows writing the accumulator's row i from row i of the operands."""
        acc = self.start_accumulator()
        rows = {}
        for name, shape in self.shapes.items():
            row = {NM: (f"{name}[i, :]", ("m",)), ("n", "1"): (f"{name}[i, 0]", SCALAR), ("m",): (name, ("m",)),
                   ("1", "m"): (f"{name}[0, :]", ("m",)), SCALAR: (name, SCALAR)}.get(shape)
            if row and name != acc:
                rows[row[0]] = row[1]
        expr, _ = self.elementwise(self.draw(st.integers(1, 3)), rows)
        update = self.choice([f"{acc}[i, :] += {expr}", f"{acc}[i] = 0.5 * {acc}[i] + {expr}",
                              f"{acc}[i, :] = {acc}[i, :] * np.tanh({expr})"])
        self.lines += ["    for i in range(X.shape[0]):", f"        {update}"]
        self.shapes[acc] = NM

    def start_accumulator(self) -> str:
        if self.accumulator is None:
            self.accumulator = self.fresh("acc")
            start = self.choice(["np.zeros_like(X)", "X.copy()", "np.zeros((X.shape[0], X.shape[1]))"])
            self.lines.append(f"    {self.accumulator} = {start}")
        return self.accumulator

    def write_vector_product(self) -> None:
        """Matrix-vector products, turned back into a column or a row."""
        a = self.choice(self.names(lambda s: s == NM))
        forms = [("({a} @ r)[:, None]", ("n", "1"))] * ("r" in self.shapes)
        forms += [("(c.T @ {a})", ("1", "m")), ("({a}.T @ np.tanh(c)).T", ("1", "m"))] * ("c" in self.shapes)
        form, shape = self.choice(forms)
        self.assign(shape, form.format(a=a))

    def write_block(self) -> None:
        """GMM's shape of work: (n, m, m) values from an (n, m) name and B, then reduced along an axis."""
        a = self.choice(self.names(lambda s: s == NM))
        block = self.assign(("n", "m", "m"), f"{a}[:, None, :] {self.choice(['-', '*'])} B[None, :, :]", stem="q")
        for _ in range(self.draw(st.integers(0, 2))):
            other = self.choice([block, "B[None, :, :]", f"{a}[:, None, :]"] + [f"{c}[:, :, None]" for c in
                                                                                self.names(lambda s: s == ("n", "1"))])
            expr = self.choice(["{q} * {o}", "{q} - {o}", "np.tanh({q}) * {o}", "({q}) ** 2 + {o}",
                                "np.exp(-0.5 * ({q}) ** 2) * {o}"])
            block = self.assign(("n", "m", "m"), expr.format(q=block, o=other), stem="q")
        reduce, axis = self.choice(["np.sum", "np.sum", "np.max"]), self.choice([1, 2])
        self.assign(NM, f"{reduce}({block}, axis={axis})")

    def write_triangle(self) -> None:
        """A local matrix filled by slice writes from B (GMM's triangular factor), then a product with it."""
        tri = self.fresh("L")
        self.lines += [f"    {tri} = np.zeros_like(B)",
                       f"    {tri}[0, :] = np.exp(B[0, :])",
                       f"    {tri}[1:, 0] = {self.choice(['2.0 * B[1:, 0]', 'np.tanh(B[1:, 0])'])}",
                       f"    {tri}[1:, 1:] = {self.choice(['B[1:, 1:] ** 2', 'np.sin(B[1:, 1:])'])}"]
        a = self.choice(self.names(lambda s: s == NM))
        self.assign(NM, self.choice([f"{a} @ {tri}", f"np.einsum('ij,kj->ik', {a}, {tri})"]))

    def write_accumulate(self) -> None:
        acc = self.start_accumulator()
        expr, _ = self.elementwise(self.draw(st.integers(1, 3)))
        self.lines.append(f"    {acc} {self.choice(['+=', '-='])} {expr}")
        self.shapes[acc] = NM  # readable from here on, after its first addition

    def result(self) -> str:
        """A scalar that reads the last few values (earlier ones reach it through them or not at all)."""
        recent = [name for name in self.shapes if name not in PARAMETERS][-3:] or ["X"]
        terms = [f"np.sum({_atom(name)} * {_atom(name)})" if self.chance(0.3) else f"np.sum({name})"
                 for name in recent]
        return " + ".join(terms)


@st.composite
def broadcast_programs(draw, max_statements: int = 6) -> BroadcastProgram:
    """A straight-line function of X (n, m) and some of c (n, 1), r (m,), rk (1, m), s, B (m, m)."""
    n, m = draw(st.sampled_from([(3, 2), (5, 4), (17, 9), (1, 4), (6, 1), (2, 11), (12, 3)]))
    extra = draw(st.lists(st.sampled_from(["c", "r", "rk", "s", "B"]), unique=True, max_size=3))
    params = ("X", *sorted(extra))
    writer = _Writer(draw, params)
    for _ in range(draw(st.integers(1, max_statements))):
        writer.statement()
    writer.lines.append(f"    return {writer.result()}")
    body = "\n".join(writer.lines)
    name = "bfuzz_" + hashlib.sha1(f"{n},{m}\n{body}".encode()).hexdigest()[:10]
    source = f"import numpy as np\n\n\ndef {name}({', '.join(params)}):\n{body}\n"
    return BroadcastProgram(name, source, params, n, m)

"""Random well-typed Python/NumPy programs for fuzzing s2sad's derivatives: a hypothesis strategy.

`programs()` draws a `Program`: the source text of one function of float, 1-D float array and
int arguments, written with the constructs s2sad accepts (arithmetic, elementwise NumPy,
reductions, `if`, bounded `for`/`while` loops with data-dependent exits, `break`/`continue`,
element and slice writes into arrays the function owns). Every expression stays finite for any
finite input: logs, square roots, fractional powers and divisions only see expressions bounded
away from zero, and exponentials only see bounded arguments. `Program.function()` writes the
source to a real module file (the frontend reads source) and imports it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import string
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from hypothesis import strategies as st

FLOAT, VECTOR, INT = "float", "vector", "int"

# Elementwise templates, finite for every finite `{a}` (scalar or vector).
UNARY = ["np.sin({a})", "np.cos({a})", "np.tanh({a})", "np.arctan({a})", "-{a}", "({a}) ** 2", "({a}) ** 3",
         "np.square({a})", "np.exp(np.tanh({a}))", "np.exp(-0.5 * ({a}) ** 2)", "np.log(1.0 + ({a}) ** 2)",
         "np.log1p(({a}) ** 2)", "np.sqrt(2.0 + np.sin({a}))", "np.abs({a})", "np.sinh(np.tanh({a}))",
         "np.arcsinh({a})", "np.logaddexp(0.0, np.tanh({a}))", "np.cbrt(3.0 + np.cos({a}))"]
# Templates of positive expressions (at least 0.5): denominators and bases of fractional powers.
POSITIVE = ["(1.0 + ({a}) ** 2)", "(2.0 + np.sin({a}))", "(1.5 + np.tanh({a}))", "np.exp(np.cos({a}))",
            "np.sqrt(1.0 + ({a}) ** 2)", "np.cosh(np.tanh({a}))", "np.hypot(1.0, {a})"]
POWERS = ["0.5", "1.5", "-1", "-0.5", "2", "3"]
BINARY = ["np.maximum({a}, {b})", "np.minimum({a}, {b})", "np.arctan2({a}, {p})", "np.hypot({a}, {p})",
          "np.where({a} > {b}, {a}, 0.5 * {b})"]
REDUCTIONS = ["np.sum({v})", "np.mean({v})", "np.max({v})", "np.min({v})", "np.prod(np.tanh({v}))",
              "np.sum({v} * {w})", "np.dot({v}, {w})", "{v} @ {w}", "np.sum({v}[1:] * {w}[:-1])",
              "np.var({v})", "np.std({p})", "np.linalg.norm({p})", "{v}.sum()", "np.cumsum({v})[-1]",
              "np.sum(np.diff({v}) ** 2)"]
# Vector-to-vector maps that keep the length n.
SHAPED = ["np.flip({v})", "{v}[::-1]", "np.roll({v}, 1)", "np.cumsum({v}) / {n}.0",
          "np.concatenate(({v}[1:], {v}[:1]))", "np.copy({v})", "np.clip({v}, -1.0, 1.0)"]


@dataclass
class Scope:
    """Names visible at a point of the program, by type."""

    floats: list[str]
    vectors: list[str]
    owned: set[str]  # vectors created by the function itself: element writes and `+=` are allowed
    indices: list[str] = field(default_factory=list)  # ints in [0, n): loop variables and counters
    ints: list[str] = field(default_factory=list)  # int parameters (loop bounds, 1..3)
    in_loop: bool = False

    def child(self, **changes) -> "Scope":
        fields = dict(floats=list(self.floats), vectors=list(self.vectors), owned=set(self.owned),
                      indices=list(self.indices), ints=list(self.ints), in_loop=self.in_loop)
        fields.update(changes)
        return Scope(**fields)


@dataclass(frozen=True)
class Program:
    name: str
    source: str
    params: tuple[tuple[str, str], ...]  # (name, FLOAT | VECTOR | INT)
    n: int  # length of every vector
    int_values: tuple[int, ...]  # values of the INT parameters, in order

    def arguments(self, rng: np.random.Generator) -> tuple:
        ints = iter(self.int_values)
        values = {FLOAT: lambda: float(rng.uniform(-1.5, 1.5)), VECTOR: lambda: rng.uniform(-1.5, 1.5, self.n),
                  INT: lambda: next(ints)}
        return tuple(values[kind]() for _, kind in self.params)

    def function(self) -> Callable:
        return load(self.source, self.name)


def load(source: str, name: str, folder: Path | None = None) -> Callable:
    """Import `source` from a real file (named by its hash) and return its function `name`."""
    folder = folder or Path(tempfile.gettempdir()) / f"s2sad_fuzz_{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    module_name = f"{name}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
    path = folder / f"{module_name}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        tmp.replace(path)
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return getattr(sys.modules[module_name], name)


def fill(template: str, **makers: Callable[[], str]) -> str:
    """`template` with each `{name}` it uses drawn once by `makers[name]()` (only the ones it uses)."""
    used = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    return template.format(**{name: _atom(makers[name]()) for name in sorted(used)})


def _atom(expr: str) -> str:
    """`expr` safe to subscript or call a method on: parenthesized unless it is a name."""
    return expr if expr.isidentifier() else f"({expr})"


class _Writer:
    """Draws the statements and expressions of one function body."""

    def __init__(self, draw, n: int):
        self.draw, self.n = draw, n
        self.lines: list[str] = []
        self.count = 0
        self.budget = 14  # statements left to write, nested ones included

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.floats(0, 1)) < p

    # -- expressions ---------------------------------------------------------------------------
    def scalar(self, scope: Scope, depth: int) -> str:
        if depth <= 0 or self.chance(0.2):
            return self.scalar_leaf(scope)
        kind = self.choice(["binop", "binop", "unary", "unary", "div", "pow", "binary", "reduce", "reduce", "ifexp"])
        return self.compound(kind, scope, depth, self.scalar)

    def scalar_leaf(self, scope: Scope) -> str:
        options = ["const"] + ["float"] * 3 * bool(scope.floats) + ["element"] * 2 * bool(scope.vectors)
        options += ["index"] * bool(scope.indices)
        kind = self.choice(options)
        if kind == "const":
            return self.choice(["0.5", "1.0", "2.0", "-0.75", "3.0", "0.1"])
        if kind == "float":
            return self.choice(scope.floats)
        if kind == "index":
            return f"({self.choice(scope.indices)} + 1.0)"
        return f"{self.choice(scope.vectors)}[{self.index(scope)}]"

    def index(self, scope: Scope) -> str:
        constants = [str(k) for k in range(self.n)] + ["-1", f"-{self.n}"]
        return self.choice(scope.indices * 4 + constants) if scope.indices else self.choice(constants)

    def vector(self, scope: Scope, depth: int) -> str:
        if depth <= 0 or self.chance(0.15):
            return self.choice(scope.vectors)
        kind = self.choice(["binop", "binop", "mixed", "unary", "unary", "div", "pow", "binary", "shaped"])
        if kind == "mixed":  # scalar and vector operands broadcast
            a, b = self.scalar(scope, depth - 1), self.vector(scope, depth - 1)
            a, b = (a, b) if self.chance(0.5) else (b, a)
            return f"({a} {self.choice(['+', '-', '*'])} {b})"
        if kind == "shaped":
            v = self.vector(scope, depth - 1)
            return self.choice(SHAPED).format(v=_atom(v), n=self.n)
        return self.compound(kind, scope, depth, self.vector)

    def compound(self, kind: str, scope: Scope, depth: int, same: Callable) -> str:
        """An operation whose result has the type `same` draws; operands one level shallower."""
        a = same(scope, depth - 1)
        if kind == "binop":
            return f"({a} {self.choice(['+', '-', '*'])} {same(scope, depth - 1)})"
        if kind == "unary":
            return self.choice(UNARY).format(a=a)
        if kind == "div":
            return f"({a} / {self.positive(scope, depth - 1)})"
        if kind == "pow":
            power = self.choice(POWERS)
            positive = self.positive_vector if same == self.vector else self.positive
            base = positive(scope, depth - 1) if "." in power or "-" in power else f"({a})"
            return f"{base} ** {power}"
        if kind == "binary":
            return fill(self.choice(BINARY), a=lambda: a, b=lambda: same(scope, depth - 1),
                        p=lambda: self.positive(scope, depth - 1))
        if kind == "reduce":
            template = self.choice(REDUCTIONS if scope.vectors else ["({a})"])
            return fill(template, v=lambda: self.vector(scope, depth - 1), w=lambda: self.vector(scope, depth - 1),
                        p=lambda: self.positive_vector(scope, depth - 1), a=lambda: a)
        # ifexp
        return f"({a} if {self.condition(scope, depth - 1)} else {same(scope, depth - 1)})"

    def positive(self, scope: Scope, depth: int) -> str:
        return self.choice(POSITIVE).format(a=self.scalar(scope, depth))

    def positive_vector(self, scope: Scope, depth: int) -> str:
        return self.choice(POSITIVE).format(a=self.vector(scope, depth))

    def condition(self, scope: Scope, depth: int) -> str:
        left = self.scalar(scope, max(depth, 1))
        test = f"{left} {self.choice(['>', '<', '>=', '<='])} {self.scalar(scope, depth)}"
        if self.chance(0.15):
            return f"{test} {self.choice(['and', 'or'])} {self.scalar(scope, 1)} > {self.choice(['0.0', '-0.5'])}"
        return f"not {test}" if self.chance(0.1) else test

    # -- statements ----------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def block(self, scope: Scope, indent: int, size: int) -> None:
        """`size` statements; names bound here live on in `scope` (the caller passes a child for nested blocks)."""
        for _ in range(size):
            self.statement(scope, indent)

    def statement(self, scope: Scope, indent: int) -> None:
        self.budget -= 1
        options = ["new_float"] * 3 + ["new_vector"] * 2 * bool(scope.vectors) + ["update"] * 3
        options += ["augment"] * 2 + ["write"] * 2 * bool(scope.owned)
        if indent <= 2 and self.budget > 0:  # at most two levels of nesting
            options += ["if"] * 2 + ["for"] * 2 + ["while"] + ["for_each"] * bool(scope.vectors)
            options += ["build"] * bool(scope.vectors)
        if scope.in_loop:
            options += ["exit"]
        kind = self.choice(options)
        getattr(self, "stmt_" + kind)(scope, indent)

    def stmt_new_float(self, scope: Scope, indent: int) -> None:
        name = self.fresh("s")
        self.emit(indent, f"{name} = {self.scalar(scope, self.depth())}")
        scope.floats.append(name)

    def stmt_new_vector(self, scope: Scope, indent: int) -> None:
        name = self.fresh("v")
        expr = self.own(self.vector(scope, self.depth()))
        if self.chance(0.15):
            expr = self.choice([f"np.zeros({self.n})", f"np.ones_like({self.choice(scope.vectors)})",
                                f"np.full({self.n}, {self.scalar(scope, 1)})"])
        self.emit(indent, f"{name} = {expr}")
        scope.vectors.append(name)
        scope.owned.add(name)

    def own(self, expr: str) -> str:
        """`expr` as a new array (names, slices and np.flip may be views of an argument)."""
        if expr.startswith("(") and not expr.endswith("]"):
            return expr
        return f"np.copy({expr})" if self.chance(0.5) else f"({expr} * 1.0)"

    def stmt_update(self, scope: Scope, indent: int) -> None:
        """Rebind an existing name (a loop-carried value inside loops), damped to keep it bounded."""
        if scope.vectors and self.chance(0.4):
            name = self.choice(scope.vectors)
            value = self.vector(scope, self.depth())
        else:
            if not scope.floats:
                return self.stmt_new_float(scope, indent)
            name = self.choice(scope.floats)
            value = self.scalar(scope, self.depth())
        form = self.choice(["np.tanh({v})", "0.5 * {x} + 0.5 * np.sin({v})", "{x} + 0.25 * np.cos({v})", "{v}"])
        if form == "{v}" and name in scope.vectors:
            value = self.own(value)
        self.emit(indent, f"{name} = {form.format(x=name, v=value)}")

    def stmt_augment(self, scope: Scope, indent: int) -> None:
        if scope.owned and self.chance(0.4):
            name, value = self.choice(sorted(scope.owned)), self.scalar_or_vector(scope)
        elif scope.floats:
            name, value = self.choice(scope.floats), self.scalar(scope, self.depth())
        else:
            return self.stmt_new_float(scope, indent)
        op = self.choice(["+=", "-=", "*=", "/="])
        if op == "*=":
            value = f"np.tanh({value})"
        if op == "/=":
            value = self.choice(POSITIVE).format(a=value)
        self.emit(indent, f"{name} {op} {value}")

    def scalar_or_vector(self, scope: Scope) -> str:
        return self.vector(scope, self.depth()) if self.chance(0.5) else self.scalar(scope, self.depth())

    def stmt_write(self, scope: Scope, indent: int) -> None:
        name = self.choice(sorted(scope.owned))
        if self.chance(0.25):
            start = self.draw(st.integers(0, self.n - 1))
            stop = self.draw(st.integers(start + 1, self.n))
            value = self.vector(scope, self.depth())
            self.emit(indent, f"{name}[{start}:{stop}] {self.choice(['=', '+='])} ({value})[{start}:{stop}]")
            return
        self.emit(indent, f"{name}[{self.index(scope)}] {self.choice(['=', '+=', '-=', '*='])} "
                          f"{self.scalar(scope, self.depth())}")

    def stmt_build(self, scope: Scope, indent: int) -> None:
        """h = np.zeros(n); for i in range(k, n): h[i] = f(h[i - k], ...): a recurrence written in place."""
        name, i = self.fresh("h"), self.fresh("i")
        first = self.draw(st.integers(0, 1))
        self.emit(indent, f"{name} = np.zeros({self.n})" if first == 0 or self.chance(0.5)
                  else f"{name} = np.copy({self.choice(scope.vectors)})")
        bound = self.choice([f"{self.choice(scope.vectors)}.shape[0]", f"len({self.choice(scope.vectors)})",
                             str(self.n)])
        self.emit(indent, f"for {i} in range({first}, {bound}):" if first else f"for {i} in range({bound}):")
        body = scope.child(indices=scope.indices + [i], in_loop=True)
        value = self.scalar(body, self.depth())
        if first:
            value = f"{self.choice(['np.tanh', 'np.sin', ''])}(0.5 * {name}[{i} - 1] + {value})"
        self.emit(indent + 1, f"{name}[{i}] {self.choice(['=', '+='])} {value}")
        if self.chance(0.3):
            self.block(body, indent + 1, 1)
        scope.vectors.append(name)
        scope.owned.add(name)

    def stmt_if(self, scope: Scope, indent: int) -> None:
        self.emit(indent, f"if {self.condition(scope, self.depth())}:")
        self.block(scope.child(), indent + 1, self.draw(st.integers(1, 2)))
        if self.chance(0.3):
            self.emit(indent, f"elif {self.condition(scope, 1)}:")
            self.block(scope.child(), indent + 1, 1)
        if self.chance(0.6):
            self.emit(indent, "else:")
            self.block(scope.child(), indent + 1, self.draw(st.integers(1, 2)))

    def stmt_for(self, scope: Scope, indent: int) -> None:
        i = self.fresh("i")
        bounds = [str(k) for k in range(1, self.n + 1)] + [f"{v}.shape[0]" for v in scope.vectors[:2]]
        bound = self.choice(bounds + scope.ints * 3)
        if self.chance(0.2):
            bound = f"1, {bound}"
        self.emit(indent, f"for {i} in range({bound}):")
        self.block(scope.child(indices=scope.indices + [i], in_loop=True), indent + 1, self.draw(st.integers(1, 3)))

    def stmt_while(self, scope: Scope, indent: int) -> None:
        """A bounded while loop whose exit may also depend on the data; the counter moves first (so `continue` is safe)."""
        k = self.fresh("k")
        self.emit(indent, f"{k} = 0")
        limit = self.draw(st.integers(1, self.n))
        test = f"{k} < {limit}"
        if self.chance(0.6):
            test += f" and {self.scalar(scope, 1)} < {self.choice(['1.0', '2.0', '0.5'])}"
        self.emit(indent, f"while {test}:")
        self.emit(indent + 1, f"{k} += 1")
        body = scope.child(indices=scope.indices + [f"({k} - 1)"], in_loop=True)
        self.block(body, indent + 1, self.draw(st.integers(1, 3)))

    def stmt_for_each(self, scope: Scope, indent: int) -> None:
        item = self.fresh("e")
        vector = self.choice(scope.vectors)
        if self.chance(0.3):
            j = self.fresh("j")
            self.emit(indent, f"for {j}, {item} in enumerate({vector}):")
            body = scope.child(floats=scope.floats + [item], indices=scope.indices + [j], in_loop=True)
        else:
            self.emit(indent, f"for {item} in {vector}:")
            body = scope.child(floats=scope.floats + [item], in_loop=True)
        body.owned.discard(vector)  # writes into the array being iterated over are NumPy's business
        self.block(body, indent + 1, self.draw(st.integers(1, 2)))

    def stmt_exit(self, scope: Scope, indent: int) -> None:
        self.emit(indent, f"if {self.condition(scope, 1)}:")
        self.emit(indent + 1, self.choice(["break", "continue"]))

    def depth(self) -> int:
        return self.draw(st.integers(1, 3))

    # -- the function --------------------------------------------------------------------------
    def result(self, scope: Scope, output: str) -> str:
        terms = [s for s in scope.floats[-3:]]
        terms += [self.choice(["np.sum({v})", "np.mean({v} * {v})", "np.sum(np.sin({v}))"]).format(v=v)
                  for v in scope.vectors[-3:]]
        scalar = " + ".join(terms + [self.scalar(scope, 2)])
        if output == FLOAT:
            return scalar
        vector = " + ".join(scope.vectors[-3:] + [self.vector(scope, 2)])
        return vector if output == VECTOR else f"{scalar}, {vector}"


@st.composite
def programs(draw, max_statements: int = 6) -> Program:
    """A random function of floats, 1-D arrays of one length n, and small int loop bounds."""
    n = draw(st.integers(3, 5))
    kinds = draw(st.lists(st.sampled_from([FLOAT, FLOAT, VECTOR, VECTOR, INT]), min_size=1, max_size=4))
    if all(kind == INT for kind in kinds):
        kinds[0] = FLOAT
    params = tuple((f"{'x' if kind == FLOAT else 'v' if kind == VECTOR else 'm'}{k}", kind)
                   for k, kind in enumerate(kinds))
    int_values = tuple(draw(st.integers(0, 3)) for kind in kinds if kind == INT)
    writer = _Writer(draw, n)
    writer.count = len(params)  # fresh names never shadow a parameter
    scope = Scope(floats=[p for p, kind in params if kind == FLOAT], vectors=[p for p, kind in params if kind == VECTOR],
                  owned=set(), ints=[p for p, kind in params if kind == INT])
    output = draw(st.sampled_from([FLOAT] * 6 + [VECTOR] * bool(scope.vectors) * 2 + ["tuple"] * bool(scope.vectors)))
    writer.block(scope, 1, draw(st.integers(1, max_statements)))
    if draw(st.integers(0, 9)) == 0:  # an early return
        writer.emit(1, f"if {writer.condition(scope, 1)}:")
        writer.emit(2, f"return {writer.result(scope, output)}")
    writer.emit(1, f"return {writer.result(scope, output)}")
    body = "\n".join(writer.lines)
    name = "fuzz_" + hashlib.sha1(body.encode()).hexdigest()[:10]
    header = f"def {name}({', '.join(p for p, _ in params)}):"
    source = f"import numpy as np\n\n\n{header}\n{body}\n"
    return Program(name, source, params, n, int_values)

"""The normalized form every pass works on: one primitive per statement, structured control.

Expressions are atoms (a variable or a constant) or a single primitive applied to atoms.
Control flow is only `If`, `For` over a range, and `While`; `break`, `continue` and early
`return` have been turned into flags by normalize, so every block has a single exit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Loc:
    """Where a statement came from in the user's file."""

    filename: str
    line: int
    col: int
    text: str  # the user's source line, stripped


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Const:
    value: Any


Atom = Union[Var, Const]


@dataclass(frozen=True)
class Slice:
    lower: Atom | None
    upper: Atom | None
    step: Atom | None


Index = tuple  # of Atom | Slice


@dataclass
class Prim:
    """A call of a registered primitive: `rule` says how to differentiate and print it."""

    rule: Any
    args: tuple
    kwargs: tuple = ()  # ((name, Atom), ...)
    spelled: str | None = None  # how the user's callee is named in generated code, e.g. "math.exp"


@dataclass
class Load:
    """`base[index]`: a read of an element or a slice."""

    base: Var
    index: Index


@dataclass
class Copy:
    value: Atom


Expr = Union[Prim, Load, Copy]


@dataclass(eq=False)
class Assign:
    target: str
    value: Expr
    loc: Loc | None
    in_place: bool = False  # `x op= v` in the user's code: NumPy updates an array x in its memory


@dataclass(eq=False)
class Store:
    """`base[index] = value`: an in-place write."""

    base: str
    index: Index
    value: Atom
    loc: Loc | None


@dataclass(eq=False)
class Push:
    """`tape.append(value)`: how generated adjoint code saves a value for later (closure)."""

    tape: str
    value: Atom
    loc: Loc | None


@dataclass(eq=False)
class If:
    test: Atom
    body: list
    orelse: list
    loc: Loc | None


@dataclass(eq=False)
class For:
    target: str
    start: Atom
    stop: Atom
    step: Atom
    body: list
    loc: Loc | None


@dataclass(eq=False)
class While:
    """`test_body` computes `test`; it runs before every check of the condition."""

    test_body: list
    test: Atom
    body: list
    loc: Loc | None


@dataclass(eq=False)
class Effect:
    """A call run for its effect alone (`print(x)`, `np.random.seed(0)`), or with `raises` the exception
    `raise ValueError("...")` makes: kept in the primal as the user wrote it, it writes no variable and
    has no derivative."""

    call: Prim
    loc: Loc | None
    raises: bool = False


Stmt = Union[Assign, Store, Push, If, For, While, Effect]


class Record(tuple):
    """A static namedtuple / registered dataclass while lowering: items by index, and by name.

    It sits here, with Function, because a Function's `output_shape` holds it, and the generation
    cache (gencache) saves and restores that shape without lowering anything."""

    def __new__(cls, items, names):
        self = super().__new__(cls, items)
        self.names = tuple(names) if names is not None else None
        return self

    def field(self, name: str):
        if self.names is None or name not in self.names:
            raise KeyError(name)
        return self[self.names.index(name)]


@dataclass
class Function:
    name: str
    params: list[str]
    body: list
    outputs: list[str]  # variables holding the results: [value] or [value, aux...]
    filename: str
    firstline: int
    source_hash: str
    user_names: set[str] = field(default_factory=set)
    temps: set[str] = field(default_factory=set)
    returns_tuple: bool = False
    output_shape: Any = None  # the returned structure, leaves as None (None: one value); see normalize.flatten
    spelled: dict[str, str] = field(default_factory=dict)  # how the user spells a renamed variable (x2: x)
    generated: bool = False  # s2sad's own generated code, differentiated again (it keeps its own sharing rules)
    copied: tuple = ()  # parameters the function writes into: the body works on copies (normalize)
    hidden: tuple = ()  # ((parameter, Hidden), ...): arrays read from outside, the last parameters (hidden.py)
    asks_types: bool = False  # reads `x.ndim` of an argument: a caller that knows the types may specialize
    fixes_unit_axes: bool = False  # `np.squeeze(x)` removes axes decided from the arguments' shapes (units.py)
    arrays: frozenset = frozenset()  # names lowering knows hold arrays (made by NumPy; arguments, where types are known)
    elements: frozenset = frozenset()  # names an element read `x[i]` binds to a number, where x's rank is known
    typed: bool = False  # generated for the arguments' ranks and types (api.with_kinds)
    exits: frozenset = frozenset()  # flags a `return` sets: once one is set, no code it guards runs again


def places(fn) -> list[Loc]:
    """The user lines a function's statements came from, each once, in order (a saved Summary keeps them)."""
    if not hasattr(fn, "body"):
        return list(getattr(fn, "places", []))
    return list(dict.fromkeys(s.loc for s, _, _ in walk(fn.body) if s.loc is not None))


def atom_vars(atoms) -> list[str]:
    return [a.name for a in atoms if isinstance(a, Var)]


def index_atoms(index: Index) -> list[Atom]:
    out = []
    for item in index:
        if isinstance(item, Slice):
            out += [p for p in (item.lower, item.upper, item.step) if p is not None]
        else:
            out.append(item)
    return out


def expr_operands(expr: Expr) -> list[Atom]:
    """Every atom an expression reads, in order."""
    if isinstance(expr, Prim):
        return list(expr.args) + [a for _, a in expr.kwargs]
    if isinstance(expr, Load):
        return [expr.base] + index_atoms(expr.index)
    return [expr.value]


def stmt_reads(stmt) -> list[str]:
    """Variables a simple statement reads (compound statements: their own test/bounds)."""
    if isinstance(stmt, Assign):
        return atom_vars(expr_operands(stmt.value))
    if isinstance(stmt, Store):
        return [stmt.base] + atom_vars(index_atoms(stmt.index) + [stmt.value])
    if isinstance(stmt, Push):
        return [stmt.tape] + atom_vars([stmt.value])
    if isinstance(stmt, If):
        return atom_vars([stmt.test])
    if isinstance(stmt, For):
        return atom_vars([stmt.start, stmt.stop, stmt.step])
    if isinstance(stmt, While):
        return atom_vars([stmt.test])
    if isinstance(stmt, Effect):
        return atom_vars(expr_operands(stmt.call))
    return []


def stmt_writes(stmt) -> list[str]:
    if isinstance(stmt, Assign):
        return [stmt.target]
    if isinstance(stmt, (Store, Push)):
        return [stmt.base if isinstance(stmt, Store) else stmt.tape]
    if isinstance(stmt, For):
        return [stmt.target]
    return []


def children(stmt) -> list[list]:
    if isinstance(stmt, If):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, For):
        return [stmt.body]
    if isinstance(stmt, While):
        return [stmt.test_body, stmt.body]
    return []


def walk(block, depth=0):
    """Yield (stmt, loop_depth, block) for every statement, outer first."""
    for stmt in block:
        yield stmt, depth, block
        inner = depth + (1 if isinstance(stmt, (For, While)) else 0)
        for child in children(stmt):
            yield from walk(child, inner)


def all_reads(stmt) -> set[str]:
    out = set(stmt_reads(stmt))
    for child in children(stmt):
        for s, _, _ in walk(child):
            out.update(stmt_reads(s))
    return out


def all_writes(stmt) -> set[str]:
    out = set(stmt_writes(stmt))
    for child in children(stmt):
        for s, _, _ in walk(child):
            out.update(stmt_writes(s))
    return out


NONFINITE_TESTS = ("isnan", "isinf", "isfinite")


def masks_nonfinite(fn: Function) -> bool:
    """Does the function test its values for nan or inf, or store nan or inf into an array? Then some of
    its intermediate values are nan where a later mask drops them (`d[d == 0] = None`, then
    `e[np.isnan(e)] = 0`), and a zero cotangent must not meet them as 0 * nan."""
    for stmt, _, _ in walk(fn.body):
        if isinstance(stmt, Assign) and isinstance(stmt.value, Prim) and stmt.value.rule.name in NONFINITE_TESTS:
            return True
        if isinstance(stmt, Store) and isinstance(stmt.value, Const) and isinstance(stmt.value.value, float) \
                and not math.isfinite(stmt.value.value):
            return True
    return False


def written_in_place(fn: Function) -> set[str]:
    """The arrays the function writes into: stores' bases, and the operands of augmented assignments on arrays."""
    found = set()
    for stmt, _, _ in walk(fn.body):
        if isinstance(stmt, Store):
            found.add(stmt.base)
        elif isinstance(stmt, Assign) and stmt.in_place and isinstance(stmt.value, Prim) and stmt.value.args \
                and isinstance(stmt.value.args[0], Var):
            found.add(stmt.value.args[0].name)
    return found

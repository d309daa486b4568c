"""What lowering keeps besides the IR: functions and objects names stand for (StaticRef), nested
functions, views, np.where's positions, the hidden parameters, records of loops, walks, returns and
lists grown in loops, and the exceptions that cut a block short or start lowering again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from s2sad.hidden import Hidden
from s2sad.names import Names
from s2sad.ir import Slice, Var

if TYPE_CHECKING:
    from s2sad.normalize import Lowerer  # NestedFunction's annotation only: lowerer.py imports this module


@dataclass
class Loop:
    brk: str | None = None
    cont: str | None = None


@dataclass
class Growth:
    """A list a runtime loop appends to, lowered as an array: where the pass's item goes."""

    buffer: str  # the array's IR name
    prefix: int  # items the list held before the loop
    start: Any  # the loop counter's first value
    counter: str
    count: Any  # how many items the list holds after the loop
    before: list  # the statements before the loop, where numbers' array is allocated
    made: bool = False  # allocated: before the loop, or (arrays appended to an empty list) by the first pass
    width: int | None = None  # items appended as tuples of numbers: how many numbers each row holds


@dataclass
class Walk:
    """A run-time iteration: `length` items, the k-th built by `item(k, out)` as a tree whose leaves are IR
    expressions (a row of an array, the counter, `start + k * step` of a range)."""
    length: Any
    item: Any
    counts: bool = False  # the first item is the counter itself (enumerate from 0)


@dataclass
class Returns:
    outputs: list[str] | None = None
    flag: str | None = None
    simple: bool = True  # a single `return` at the end of the body
    is_tuple: bool = False
    shape: Any = None  # the returned structure with leaves as None (None: a single value)
    static: Any = None  # what a helper returns when it holds a function or object (a factory's lambda)


_NOT_STATIC = object()


NEWAXIS = object()  # a `None` item in an index, while lowering


@dataclass(frozen=True)
class StaticRef:
    """A function or object a name stands for while lowering (a callback, a method's `self`), and where
    it lives (None: nowhere a later call can read it again)."""

    obj: Any
    where: Hidden | None


@dataclass(frozen=True)
class NumberType:
    """`type(z)` of a number `z` (numba_stats' `T = type(z)`): calling it, `T(0.5)`, gives a number of z's
    precision."""

    like: Any


@dataclass(frozen=True, eq=False)
class View:
    """What a name read by basic indexing views: `root[index]`, read in the block `out`."""

    root: str
    index: tuple
    out: list

    def names(self) -> set[str]:
        items = [b for i in self.index for b in ((i.lower, i.upper, i.step) if isinstance(i, Slice) else (i,))]
        return {self.root} | {a.name for a in items if isinstance(a, Var)}


@dataclass(frozen=True)
class Positions:
    """What `np.where(c)` with one argument gives while lowering: the positions where the mask holds."""

    mask: Any


@dataclass(eq=False)
class PositionsAxis:
    """One of np.where's index arrays, unpacked (`i, j = np.triu_indices(n)`): it indexes only with the others,
    in order (`x[i, j]`), which is x[mask]."""

    positions: Positions
    axis: int
    names: tuple  # how the user spelled all of them, in order


@dataclass(eq=False)
class NestedFunction:
    """A `def` or `lambda` inside the function being lowered, and the Lowerer of the function that made it."""

    node: cst.FunctionDef
    positions: Any  # where its nodes are in the user's file
    enclosing: Lowerer

    @property
    def name(self) -> str:
        return self.node.name.value


@dataclass
class HiddenParams:
    """The hidden parameters of a function being lowered (hidden.py), shared with every callee it inlines."""

    names: Names
    free: set  # names no variable of generated code takes: a hidden parameter may take one as it is
    own: set  # the top function's variables and the names generated code calls
    params: dict = field(default_factory=dict)  # Hidden -> parameter name
    written: dict = field(default_factory=dict)  # id of an outside object whose attributes are assigned -> LocalObject
    varying: set = field(default_factory=set)  # changed at run time: (class, attribute); loop ranks, or one name's
    pins_units: bool = False  # `np.squeeze` decided on the length-one axes of the arrays: checked at each call

    def listed(self) -> tuple:
        """((parameter, Hidden), ...), in the order generated code takes them."""
        return tuple((name, where.with_units() if self.pins_units else where) for where, name in self.params.items())

    def var(self, where: Hidden) -> str:
        if where not in self.params:
            hint = where.hint
            taken = set(self.params.values())
            if hint in self.free and hint not in taken:
                self.params[where] = hint
            else:
                self.params[where] = self.names.fresh(hint)
        return self.params[where]


class UnknownKinds(dict):
    """The argument types while lowering without them: empty, and noting whether the code asked."""

    asked = False


class RaisesHere(Exception):
    """The statement being lowered always raises where it runs: the rest of its block is left out."""


class ChangesAtRunTime(Exception):
    """An int attribute of an object, kept as a constant, is changed where the change runs conditionally
    or repeatedly: lowering starts again, with the attribute a variable from the start."""

    def __init__(self, *keys):
        super().__init__(*keys)
        self.keys = keys

"""Lower a parsed function to the normalized IR (see ir.py).

One primitive per statement with fresh temporaries; `x += e` made explicit; tuple unpacking,
conditional expressions and short-circuit `and`/`or` turned into plain statements and `If`s;
`break`, `continue` and early `return` turned into boolean flags that guard the rest of their
block, so every block has a single exit; calls to other user functions inlined.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import enum
import functools
import importlib
import inspect
import math
import operator
import random
import re
import sys
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import libcst as cst
import numba
import numpy as np

from s2sad import gencache, hidden, ir, rules
from s2sad.backend import load_module
from s2sad.decided import decide_constant_branches
from s2sad.errors import TypesNeeded, UnsupportedError, located_at
from s2sad.frontend import Parsed, parse_function, unwrap, written_by_s2sad
from s2sad.hidden import Hidden, is_hidden_array
from s2sad.names import Names
from s2sad.ir import Assign, Const, Copy, Effect, For, If, Load, Prim, Push, Record, Slice, Store, Var, While
from s2sad.objects import MISSING, LocalObject, after_in_mro, builds_object, dataclass_init, defining_class, is_namedtuple
from s2sad.rules import inlined
from s2sad.rules.registry import Custom, Opaque, spelling
from s2sad.runtime.shapes import only_item
from s2sad.swaps import copy_swapped_buffers
from s2sad.units import of_shape, pointwise, unit_axes

BINOPS = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "truediv",
    cst.FloorDivide: "floordiv", cst.Modulo: "mod", cst.Power: "pow", cst.MatrixMultiply: "matmul",
    cst.BitAnd: "bitand", cst.BitOr: "bitor", cst.BitXor: "bitxor",  # masks: `(r > 0) & (r < cut)`
}
AUGOPS = {
    cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul", cst.DivideAssign: "truediv",
    cst.FloorDivideAssign: "floordiv", cst.ModuloAssign: "mod", cst.PowerAssign: "pow",
    cst.MatrixMultiplyAssign: "matmul", cst.BitAndAssign: "bitand", cst.BitOrAssign: "bitor",
    cst.BitXorAssign: "bitxor",
}
COMPARED = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
            "ne": operator.ne}
COMPARE = {
    cst.LessThan: "lt", cst.LessThanEqual: "le", cst.GreaterThan: "gt", cst.GreaterThanEqual: "ge",
    cst.Equal: "eq", cst.NotEqual: "ne",
}
METHODS = {"sum": np.sum, "mean": np.mean, "copy": np.copy, "dot": np.dot, "reshape": np.reshape,
           "transpose": np.transpose, "ravel": np.ravel, "flatten": np.ravel, "max": np.max, "min": np.min,
           "prod": np.prod, "var": np.var, "std": np.std, "cumsum": np.cumsum, "cumprod": np.cumprod,
           "squeeze": np.squeeze, "trace": np.trace, "diagonal": np.diagonal, "clip": np.clip, "argmax": np.argmax,
           "argmin": np.argmin, "item": only_item, "conj": np.conjugate, "conjugate": np.conjugate}
TUNING_KEYWORDS = {np.einsum: ("optimize",)}  # change how NumPy computes, not what: the runtime picks its own way
VARARG_METHODS = ("reshape", "transpose")  # x.reshape(2, 3) means np.reshape(x, (2, 3))
ATTRIBUTES = {"shape": np.shape, "size": np.size, "ndim": np.ndim, "T": np.transpose, "flat": np.ravel}
SHAPE_FIRST = (np.zeros, np.ones, np.empty, np.full)  # a list first argument is a shape, not data
SEQUENCE_CALLS = (np.concatenate, np.stack, np.hstack, np.vstack, np.array, np.split)
HINT_RULE = ("three ways out: wrap it in a function decorated with @s2sad.custom_jvp (give the tangent) or "
             "@s2sad.custom_vjp (give the cotangent), or register a rule for it once with "
             "@s2sad.rules.defrule(the_function, checks=[...]) (see the README, 'Rules')")
STATEMENT_HINTS = {  # what to write instead of a statement s2sad refuses
    "With": "open resources outside the function and pass the values in as arguments",
    "ClassDef": "define the class at module level",
    "FunctionDef": "define the helper at module level: s2sad inlines calls to module-level functions",
    "Match": "use if/elif on the value",
    "Global": "return the new value instead of assigning to a global",
    "Nonlocal": "return the new value instead of assigning to an enclosing function's variable",
    "Del": "rebind the name, or simply stop using it",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
}
EXPRESSION_HINTS = {  # expressions s2sad refuses: what to write instead
    "Lambda": "define the function with `def` at module level and call it",
    "ListComp": "write a for loop over range(n) that fills an array (out = np.zeros(n); out[i] = ...)",
    "GeneratorExp": "write a for loop over range(n) that fills an array, then reduce it with np.sum",
    "SetComp": "write a for loop over range(n) that fills an array",
    "DictComp": "write the dict literally, {'key': value, ...}",
    "Set": "use a tuple (x, y) or an array np.array([x, y])",
    "NamedExpr": "assign the value on its own line first",
    "Imaginary": "s2sad differentiates real floats: carry the real and imaginary parts as two float arrays",
    "FormattedString": "strings are not differentiable: format values outside the function",
    "Await": "differentiate a plain `def` function, and await outside it",
}
METHOD_HINT = (f"s2sad knows the array methods .{', .'.join(sorted(METHODS))} and .astype; call the NumPy function "
               "instead (`np.sort(x)` for `x.sort()`), or a function of your own")
DRAW_HINT = ("a random draw has no derivative with respect to its parameters: draw from constants and transform "
             "the draw, e.g. `mu + sigma * np.random.normal(0.0, 1.0, n)`")
NO_DERIVATIVE_OPERATOR = ("shift operators have no derivative: use `and`/`or`/`not` in conditions, `&`, `|`, `~` "
                          "on masks, or arithmetic")
BITWISE = ("bitand", "bitor", "bitxor")
BITWISE_HINT = ("bitwise operators have no derivative, and take booleans and ints only: use `and`/`or`/`not` in "
                "conditions, `&`, `|`, `~` on masks, or arithmetic")
BUILTIN_HINTS = {  # builtins with no derivative: what to use instead
    "print": "call print as a statement of its own (`print(x)`): its value is None",
    "isinstance": "test an argument of the function itself (`isinstance(x, np.ndarray)`): s2sad decides it per "
                  "argument type when it generates code",
    "type": "s2sad specializes code on argument structure, not on types: branch outside the function",
    "eval": "write the expression itself in the function",
    "exec": "write the statements themselves in the function",
    "str": "strings are not differentiable: format values outside the function",
    "repr": "strings are not differentiable: format values outside the function",
    "format": "strings are not differentiable: format values outside the function",
    "sum": "use np.sum(...)",
    "getattr": "pass the value itself as an argument",
    "setattr": "return the new value instead of storing it on an object",
    "map": "reduce it or list it where it is made (sum(map(f, x)), np.array(list(map(f, x)))), or write the "
           "comprehension: [f(v) for v in x]",
}

REDUCERS = {  # builtin reductions: the operation folding two items, how it is spelled, a name for the result
    "sum": ("add", None, "total"), "max": (max, "max", "largest"), "min": (min, "min", "smallest"),
    "any": ("or", None, "any_true"), "all": ("and", None, "all_true"), "prod": ("mul", None, "product"),
}
REDUCER_START = {"sum": 0, "max": -math.inf, "min": math.inf, "any": False, "all": True, "prod": 1}
UNROLL_RANGE = 16  # a comprehension over a constant range up to this long is unrolled (RK stages, x/y/z)
INT_ARITHMETIC = {cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul}
RECURSION_DEPTH = 32  # recursion deeper than this, with constant arguments, is refused


@dataclass
class Transformations:
    """s2sad's own transformations, as user code calls them inside a function it lowers (`s2sad.grad(g)(x)`,
    `s2sad.jvp(f, (x,), (dx,))`). api.py defines them and lowers functions, so it sits above this module:
    it hands them down at import (`register_transformations`) rather than this module importing it."""

    evaluated: tuple = ()  # grad, value_and_grad, vmap: called while lowering; the function they return is inlined
    jvp: Any = None  # s2sad.jvp: the tangent function of its first argument is inlined
    tangent: Callable | None = None  # (fn, n) -> the Generated forward module of `fn` in its first n arguments

    def is_jvp(self, fn) -> bool:
        return self.jvp is not None and fn is self.jvp


TRANSFORMATIONS = Transformations()


def register_transformations(evaluated: tuple, jvp: Callable, tangent: Callable) -> None:
    """Called once by api.py, which defines them: see Transformations."""
    TRANSFORMATIONS.evaluated, TRANSFORMATIONS.jvp, TRANSFORMATIONS.tangent = evaluated, jvp, tangent


# Fields of libcst nodes that hold only punctuation, whitespace and comments: no walk below asks about them.
_PUNCTUATION = frozenset({
    "asynchronous", "colon", "comma", "comment", "dot", "empty_lines", "equal", "first_colon", "footer", "header",
    "lbrace", "lbracket", "leading_lines", "lines_after_decorators", "lpar", "newline", "operator", "posonly_ind",
    "rbrace", "rbracket", "rpar", "second_colon", "semicolon", "trailing_comma", "trailing_whitespace"})


@functools.cache
def _syntax_fields(node_type: type) -> tuple[str, ...]:
    return tuple(f for f in node_type.__dataclass_fields__
                 if f not in _PUNCTUATION and not f.startswith("whitespace"))


@functools.cache
def _is_node(value_type: type) -> bool:
    return issubclass(value_type, cst.CSTNode)  # an ABC: isinstance on each value costs more than the lookup


@functools.lru_cache(maxsize=512)
def _walk(node: cst.CSTNode, skip: tuple = ()) -> tuple:
    """`node` and every node under it, in source order, not going inside nodes of the types in `skip`
    (other than `node` itself), nor into whitespace and punctuation. A walk over the dataclass fields:
    a libcst visitor rebuilds each node it passes. Normalize asks several such questions of every
    function (names, assignments, yields, returns, writes), and libcst's nodes are immutable and hashed
    by identity: one walk of a tree serves them all."""
    return tuple(_nodes_under(node, skip))


def _nodes_under(node: cst.CSTNode, skip: tuple):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if n is not node and isinstance(n, skip):
            continue
        children = []
        for name in _syntax_fields(type(n)):
            value = getattr(n, name)
            value_type = type(value)
            if value_type is tuple or value_type is list:
                children.extend(v for v in value if _is_node(type(v)))
            elif _is_node(value_type):
                children.append(value)
        stack.extend(reversed(children))


def user_names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if isinstance(n, cst.Name)}


def _assign_targets(node: cst.CSTNode) -> list[cst.AssignTarget]:
    return [n for n in _walk(node) if isinstance(n, cst.AssignTarget)]


def assigned_names(func: cst.FunctionDef) -> set[str]:
    """Names Python treats as local: parameters and every assignment/loop target."""
    params = {p.name.value for p in func.params.params + func.params.kwonly_params}
    return params | _bound_by(func, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For))


def _bound_by(func: cst.FunctionDef, statements: tuple) -> set[str]:
    """The names the targets of these kinds of statement bind (a nested function's names are its own)."""
    return set().union(*(_target_names(n.target) for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda))
                         if isinstance(n, statements)))


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


@dataclass
class Lowerer:
    parsed: Parsed
    names: Names
    temps: set
    stack: list  # functions being inlined (recursion check)
    scope: dict = field(default_factory=dict)  # user name -> IR name
    locals: set = field(default_factory=set)
    loops: list = field(default_factory=list)
    ret: Returns = field(default_factory=Returns)
    loc: ir.Loc | None = None
    trees: dict = field(default_factory=dict)  # user name -> static tuple/list/dict of atoms (or of trees)
    plain: frozenset = frozenset()  # custom_jvp/custom_vjp functions to inline as plain code (inside their rules)
    arg_trees: dict = field(default_factory=dict)  # parameter -> PyTreeDef of a pytree argument (top level)
    branch_depth: int = 0  # inside how many `if`s / runtime loops (trees must not depend on them)
    nested: int = 0  # the same, counting the rest of a block after an early exit: 0 in straight-line code
    spelled: dict = field(default_factory=dict)  # IR name -> the user's name, where the two differ
    hidden: HiddenParams | None = None  # arrays read from outside the function (shared with callees)
    objects: dict = field(default_factory=dict)  # user name -> StaticRef: a callback, a method's `self`
    copied: list = field(default_factory=list)  # arguments the function writes into, copied on entry
    copy_arguments: bool = True
    enclosing: Lowerer | None = None  # a nested def's or lambda's: where its free names live
    arrays: set = field(default_factory=set)  # IR names known to hold arrays (made by NumPy, sliced, computed)
    elements: set = field(default_factory=set)  # IR names an element read `x[i]` bound to a number (x's rank known)
    exits: set = field(default_factory=set)  # flags `return` sets (shared): once set, nothing they guard runs again
    growing: dict = field(default_factory=dict)  # user name -> Growth: a list a runtime loop appends to, as an array
    ints: set = field(default_factory=set)  # IR names known to hold one int (loop counters, their arithmetic)
    written_lists: set = field(default_factory=set)  # user names of lists written item by item at run time
    slots: dict = field(default_factory=dict)  # user name -> variables of a tuple bound again on each pass
    views: dict = field(default_factory=dict)  # IR name -> View: a basic-indexing read of another array
    ranks: dict = field(default_factory=dict)  # IR name -> ndim of an array whose rank lowering knows
    units: dict = field(default_factory=dict)  # IR name -> which axes have length one, where known (units.py)
    lengths: dict = field(default_factory=dict)  # IR name -> length of a shape tuple made in the function
    updates_callers: set = field(default_factory=set)  # parameters a helper updates in place: the caller's arrays
    jumped_statically: bool = False  # the last statement was an `if` on a constant whose branch ends in a jump
    kinds: dict = field(default_factory=dict)  # variable -> (ndim, type, unit axes) of an argument not rebound yet
    arguments: set = field(default_factory=set)  # IR names of the outermost function's parameters (shared)
    outer_conditional: bool = False  # inlined at a call that runs conditionally or repeatedly

    # ---------------------------------------------------------------- helpers
    def err(self, node, message, hint=""):
        if node not in self.parsed.positions and self.loc is not None:  # a node s2sad built: point at the line
            loc = self.loc
            return UnsupportedError(located_at(message, loc, hint))
        return self.parsed.error(node, message, hint)

    def temp(self, hint: str) -> str:
        name = self.names.fresh(hint)
        self.temps.add(name)
        return name

    def var(self, user_name: str) -> str:
        if user_name not in self.scope:
            self.scope[user_name] = self.renamed(user_name) if self.stack[1:] else user_name
        return self.scope[user_name]

    def renamed(self, user_name: str) -> str:
        name = self.names.fresh(user_name)
        self.spelled[name] = user_name
        return name

    def emit(self, out, target, value):
        if self.kinds:
            self.kinds.pop(target, None)  # bound anew: no longer the argument whose type is known
        out.append(Assign(target, value, self.loc))
        if _makes_array(value, self.arrays):
            self.arrays.add(target)
        if _gives_int(value, self.ints):
            self.ints.add(target)
        else:
            self.ints.discard(target)
        rank = _rank(value, self.ranks, self.ints, self.lengths)
        if rank is None:
            self.ranks.pop(target, None)
        else:
            self.ranks[target] = rank
        if isinstance(value, Load) and rank is not None:  # a row `m[i]` is a view of m; an element is not
            (self.arrays if rank > 0 else self.elements).add(target)
        pattern = unit_axes(value, self.units, self.ints)
        if pattern is None:
            self.units.pop(target, None)
        else:
            self.units[target] = pattern
        length = _length(value, self.ranks, self.lengths)
        if length is None:
            self.lengths.pop(target, None)
        else:
            self.lengths[target] = length
        self.note_view(out, target, value)
        return Var(target)

    # ------------------------------------------- writes through views (`p = m[i][:3]; p += v * dt`)
    def note_view(self, out, target, value):
        """Keep `target = m[i, :3]` (or a plain copy of such a name) as a view of `m` while `m`, `i` and the
        bounds keep their values, in this block: a write through it can then be a write into `m`."""
        for name in [n for n, v in self.views.items() if n == target or target in v.names()]:
            del self.views[name]  # rebound: the name, the array or an index no longer is what the view read
        if isinstance(value, Copy) and isinstance(value.value, Var) and value.value.name in self.views:
            self.views[target] = self.views[value.value.name]
            return
        if not isinstance(value, Load) or not all(self.fixed_item(i) for i in value.index):
            return
        root, index = value.base.name, value.index
        prior = self.views.get(root)
        if prior is not None and prior.out is out and not any(isinstance(i, Slice) for i in prior.index):
            root, index = prior.root, prior.index + index  # `m[i][:3]` is `m[i, :3]`
        self.views[target] = View(root, index, out)

    def fixed_item(self, item) -> bool:
        """An index item of basic indexing: a slice of ints, an int constant, a variable holding one int."""
        if isinstance(item, Slice):
            return all(b is None or self.fixed_item(b) for b in (item.lower, item.upper, item.step))
        return isinstance(item, Const) and type(item.value) is int or isinstance(item, Var) and item.name in self.ints

    def written_view(self, node, name: str, out) -> "View | None":
        """The view `name` holds, where a write into it is a write into the array it views (not a number)."""
        view = self.views.get(name)
        if view is None or view.out is not out:
            return None
        if any(isinstance(i, Slice) for i in view.index):
            return view
        rank = self.ranks.get(view.root)
        if rank is None and isinstance(self.kinds, UnknownKinds):
            self.kinds.asked = True  # `row = m[i]`: a row of a matrix or a number of a vector, by m's type
            return None
        if rank is None and (view.root in self.arrays or view.root in self.arguments):
            user, root = self.spelled.get(name, name), self.spelled.get(view.root, view.root)
            op = cst.Module([]).code_for_node(node.operator).strip()
            raise self.err(node, f"`{user} {op} ...` of `{user} = {root}[...]`: s2sad cannot tell whether `{user}` is a "
                                 f"row of `{root}` (NumPy then writes into `{root}`) or a number",
                           f"write into the array itself (`{root}[i] {op} ...`), or take a copy: "
                           f"`{user} = {root}[i].copy()`")
        return view if rank is not None and rank > len(view.index) else None

    def write_through(self, name: str, view: "View", new, out):
        """`p op= e` of a view: the new values go into the viewed array, and `p` reads them back from it."""
        out.append(Store(view.root, view.index, new, self.loc))
        target = self.var(name)
        version = self.new_version(name)
        self.emit(out, version or target, Load(Var(view.root), view.index))
        if version:
            self.scope[name] = version

    def prim(self, out, key, args, kwargs=(), target=None, hint=None):
        folded = _fold_ints(key, args) if not kwargs else None
        if folded is not None:  # `n - 1`, `n == 0` of constant ints: what unrolled recursion decides on
            return self.emit(out, target, Copy(folded)) if target else folded
        if key == "pow" and args[1] == Const(0.5):  # `r = (dx * dx) ** 0.5`: np.sqrt's rule keeps r = 0 finite
            key, args = "sqrt", args[:1]
        rule = rules.lookup(key) if isinstance(key, str) else key
        target = target or self.temp(hint or rule.name)
        return self.emit(out, target, Prim(rule, tuple(args), tuple(kwargs)))

    def set_loc(self, node):
        line, col, text = self.parsed.where(node)
        self.loc = ir.Loc(self.parsed.filename, line, col, text.strip())

    def conditional(self) -> bool:
        """Does the statement being lowered run conditionally or repeatedly (in a branch or a runtime loop,
        after an early exit), here or at the call that inlined this function?"""
        return bool(self.nested or self.outer_conditional)

    # ------------------------------------------------------------ statements
    def block(self, stmts, out) -> set:
        """Lower a list of libcst statements into `out`; return the flags they may set."""
        flags: set = set()
        for i, node in enumerate(stmts):
            try:
                new = self.stmt(node, out)
            except RaisesHere:  # the statement always raises: the rest of the block never runs
                break
            if self.jumped_statically:  # `if n == 0: return x` with a constant n: the rest never runs
                self.jumped_statically = False
                flags |= new
                break
            if new:
                flags |= new
                rest = stmts[i + 1:]
                if rest and not self.always_jumps(node):
                    guarded: list = []
                    self.nested += 1
                    flags |= self.block(rest, guarded)
                    self.nested -= 1
                    jumping = self.jumping_if(node, out, guarded)
                    if jumping is not None:
                        jumping.orelse.extend(guarded)
                    elif guarded:
                        self.loc = guarded[0].loc
                        go = self.none_set(sorted(new), out)
                        out.append(If(go, guarded, [], self.loc))
                break
        return flags

    def jumping_if(self, node, out, rest: list) -> If | None:
        """`if c: ...; return a` then more statements: the lowered `if`, which takes them as its `else`
        (readable, no flag to test, and every path through it visibly defines the result); None where
        its test may change in them, or its body may fall through."""
        if not (isinstance(node, cst.If) and node.orelse is None and self.always_jumps(node.body.body[-1])):
            return None
        lowered = out[-1] if out else None
        if not isinstance(lowered, If) or lowered.orelse:
            return None
        test = lowered.test
        if isinstance(test, Var) and (test.name not in self.temps
                                      or any(test.name in ir.all_writes(s) for s in rest)):
            return None
        return lowered

    def branch(self, stmts, out, loop=None) -> set:
        """Lower statements that run conditionally, or repeatedly: the body of `loop`."""
        self.branch_depth += 1
        self.nested += 1
        kept = self.loop_ranks(loop, stmts) if loop is not None else {}
        self.forget_units(stmts)
        try:
            flags = self.block(stmts, out)
        except TypesNeeded:
            raise
        except UnsupportedError:
            if kept:  # perhaps refused for a rank taken from the start of the pass: lower the loop without them
                raise ChangesAtRunTime(self.loop_key(loop)) from None
            raise
        finally:
            self.branch_depth -= 1
            self.nested -= 1
        changed = sorted(name for name, rank in kept.items() if self.ranks.get(name) != rank)
        if changed:  # lowered again with these ranks forgotten at the start of a pass, the others kept
            raise ChangesAtRunTime(*(self.loop_key(loop) + (name,) for name in changed))
        self.forget_units(stmts)
        return flags

    def forget_units(self, stmts):
        """Statements that run conditionally or repeatedly leave the names they bind with patterns that
        depend on the path taken: forgotten before (a loop's first reads see the last pass) and after."""
        for name in self.bound_in(stmts):
            self.units.pop(name, None)

    def bound_in(self, stmts) -> set[str]:
        """The variables the statements bind."""
        body = cst.FunctionDef(cst.Name("f"), cst.Parameters(), cst.IndentedBlock(list(stmts)))
        return {self.scope.get(user, user) for user in assigned_names(body)}

    def loop_key(self, loop) -> tuple:
        return ("ranks", self.parsed.filename) + self.parsed.where(loop)[:2]

    def loop_ranks(self, loop, stmts) -> dict:
        """A loop body's first reads may see the last pass's values. The ranks of the names it binds are
        kept where each pass ends with the rank it started with (checked after the body: lowering starts
        again, with the ranks that changed forgotten), so `x.ndim` of a filter's state folds in its loop,
        and a row read from an array stays a row where another name's rank is unknown."""
        bound = self.bound_in(stmts)
        for name in bound:
            self.kinds.pop(name, None)
        key = self.loop_key(loop)
        kept = {} if key in self.hidden.varying else {
            name: self.ranks[name] for name in bound if name in self.ranks and key + (name,) not in self.hidden.varying}
        for name in bound - set(kept):
            self.ranks.pop(name, None)
        return kept

    @staticmethod
    def always_jumps(node) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            return any(isinstance(s, (cst.Return, cst.Break, cst.Continue)) for s in node.body)
        return isinstance(node, (cst.Return, cst.Break, cst.Continue))  # a one-line body's statement

    def none_set(self, flags, out) -> Var:
        """A variable that is True when none of `flags` is set."""
        acc = Var(flags[0])
        for f in flags[1:]:
            acc = self.prim(out, "or", (acc, Var(f)), hint="jumped")
        return self.prim(out, "not", (acc,), hint="go")

    def stmt(self, node, out) -> set:
        self.set_loc(node)
        if isinstance(node, cst.SimpleStatementLine):
            flags = set()
            for small in node.body:
                flags |= self.small(small, out)
            return flags
        if isinstance(node, cst.BaseSmallStatement):  # `def f(x): return x * x`, `if c: y = 0`: no line of its own
            return self.small(node, out)
        if isinstance(node, cst.If):
            return self.if_stmt(node, out)
        if isinstance(node, cst.For):
            return self.for_stmt(node, out)
        if isinstance(node, cst.While):
            return self.while_stmt(node, out)
        if isinstance(node, cst.FunctionDef) and not node.decorators and node.asynchronous is None:
            self.bind(node.name, StaticRef(NestedFunction(node, self.parsed.positions, self), None), out)
            return set()
        if isinstance(node, cst.Try):
            return self.try_stmt(node, out)
        if isinstance(node, cst.With) and self.only_quiets(node):
            return self.block(node.body.body, out)
        kind = type(node).__name__
        raise self.err(node, f"`{kind}` statements are not supported inside differentiated functions",
                       STATEMENT_HINTS.get(kind.replace("Star", ""), "restructure with if/for/while"))

    def only_quiets(self, node: cst.With) -> bool:
        """`with np.errstate(divide="ignore"):`, `with warnings.catch_warnings():`: contexts that only change
        which warnings NumPy and Python print. The body runs as written (compiled code prints none)."""
        return node.asynchronous is None and all(
            isinstance(item.item, cst.Call) and item.asname is None
            and self.static_value(item.item.func) in QUIET_CONTEXTS for item in node.items)

    def import_stmt(self, node: cst.Import | cst.ImportFrom):
        """`from scipy.special import loggamma` in the function: imported when the code is generated."""
        if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
            raise self.err(node, "`from ... import *` is not supported inside differentiated functions",
                           "import the names you use, or import at module level")
        try:
            for alias in node.names:
                name = _dotted(alias.name)
                if isinstance(node, cst.Import):
                    module = importlib.import_module(name)
                    value = module if alias.asname else importlib.import_module(name.split(".")[0])
                    bound = alias.asname.name.value if alias.asname else name.split(".")[0]
                else:
                    package = getattr(sys.modules.get(self.parsed.fn.__module__), "__package__", None)
                    source = "." * len(node.relative) + (_dotted(node.module) if node.module else "")
                    module = importlib.import_module(source, package)
                    value = getattr(module, name) if hasattr(module, name) else \
                        importlib.import_module(f"{module.__name__}.{name}")
                    bound = alias.asname.name.value if alias.asname else name
                self.objects[bound] = StaticRef(value, None)
        except ImportError as exc:
            raise self.err(node, f"this import fails when the code is generated: {exc}",
                           "the function fails the same way run as Python: install the module or fix its name") from None

    def try_stmt(self, node: cst.Try, out) -> set:
        """`try: A except: B else: C finally: D` runs A, C and D: differentiated code takes the path on which
        nothing raises (filterpy's `try: K = P @ inv(S) except: ...`). Where A does raise, the error reaches
        the caller instead of running B."""
        body = list(node.body.body) + (list(node.orelse.body.body) if node.orelse else []) + \
            (list(node.finalbody.body.body) if node.finalbody else [])
        return self.block(body, out)

    def small(self, node, out) -> set:
        if isinstance(node, cst.Assign):
            self.assign(node, out)
        elif isinstance(node, cst.AugAssign):
            self.aug_assign(node, out)
        elif isinstance(node, cst.AnnAssign):
            if node.value is None:
                return set()
            self.assign_to(node.target, node.value, out)
        elif isinstance(node, cst.Return):
            return self.return_stmt(node, out)
        elif isinstance(node, cst.Break):
            return {self.loop_flag(node, "brk", out)}
        elif isinstance(node, cst.Continue):
            return {self.loop_flag(node, "cont", out)}
        elif isinstance(node, cst.Pass):
            pass
        elif isinstance(node, cst.Del) and _deletes_only_names(node.target):
            pass  # `del t`: code that runs never reads `t` again before rebinding it
        elif isinstance(node, cst.Expr) and isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString)):
            pass  # docstring
        elif isinstance(node, cst.Expr) and self.is_list_append(node.value) \
                and node.value.func.value.value in self.growing:
            self.grow(node.value, out)
        elif isinstance(node, cst.Expr) and self.is_push(node.value):
            tape = self.var(node.value.func.value.value)
            out.append(Push(tape, self.expr(node.value.args[0].value, out), self.loc))
        elif isinstance(node, cst.Expr) and self.calls_python_function(node.value):
            self.value(node.value, out)  # inlined: its writes into the caller's arrays are the caller's
        elif isinstance(node, cst.Expr) and self.grows_attribute_list(node.value):  # `self.grads.append(g)`
            held = node.value.func.value
            items = self.tree_of(held) + [self.value(node.value.args[0].value, out)]
            self.set_attribute(self.written_object(held.value), held.attr.value, items, held, out)
        elif isinstance(node, cst.Expr) and self.grows_static_list(node.value):
            name = node.value.func.value.value
            self.trees[name] = self.trees[name] + [self.value(node.value.args[0].value, out)]
        elif isinstance(node, cst.Expr) and self.is_list_append(node.value):
            raise self.err(node, "a list cannot grow inside a differentiated function: s2sad fixes lists when it "
                                 "generates code", "preallocate an array (out = np.zeros(n)) and write out[i] = ...")
        elif isinstance(node, cst.Expr):
            self.expression_statement(node, out)
        elif isinstance(node, cst.Raise):
            self.raise_stmt(node, out)
        elif isinstance(node, cst.Assert):
            self.assert_stmt(node, out)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            self.import_stmt(node)
        else:
            kind = type(node).__name__
            raise self.err(node, f"`{kind}` is not supported inside differentiated functions",
                           STATEMENT_HINTS.get(kind, "restructure with assignments, if/for/while and return"))
        return set()

    def calls_python_function(self, node) -> bool:
        """A call of a Python function or method (inlined), as a statement: `kernel(out, a, b)`."""
        if not isinstance(node, cst.Call) or isinstance(node.func, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call):
            return self.callee_is(node.func.value.func, super)  # `super().__init__(k)`
        ref = self.static_ref(node.func)
        fn = None if ref is None else ref.obj
        if isinstance(fn, (NestedFunction, LocalObject)):
            return True
        if fn is None or rules.lookup_object(fn) is not None:
            return False
        inner = unwrap(fn.__func__ if isinstance(fn, types.MethodType) else fn)
        return isinstance(inner, types.FunctionType) and not _in_library(inner) and _module_of(inner) != "s2sad"

    def grows_static_list(self, node) -> bool:
        """`heads.append(h)` on a list made in this function, in straight-line code or a loop unrolled
        because of it: the list stays static, one item longer."""
        return self.is_list_append(node) and not self.branch_depth and len(node.args) == 1 \
            and isinstance(self.trees.get(node.func.value.value), list) and node.args[0].keyword is None

    def grows_attribute_list(self, node) -> bool:
        """`self.grads.append(g)` on an object's list attribute, in straight-line code: one item longer."""
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "append" and isinstance(node.func.value, cst.Attribute) \
            and not self.branch_depth and len(node.args) == 1 and node.args[0].keyword is None \
            and isinstance(self.tree_of(node.func.value), list)

    def is_push(self, node) -> bool:
        """`tape.append(value)` on a local list (the tapes of generated adjoint code)."""
        return self.is_list_append(node) and node.func.value.value in self.locals \
            and node.func.value.value not in self.trees and node.func.value.value not in _param_names(self.parsed.node) \
            and len(node.args) == 1 and node.args[0].keyword is None

    @staticmethod
    def is_list_append(node) -> bool:
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "append" and isinstance(node.func.value, cst.Name)

    def loop_flag(self, node, kind, out) -> str:
        if not self.loops:
            raise self.err(node, f"`{'break' if kind == 'brk' else 'continue'}` outside a loop")
        loop = self.loops[-1]
        if getattr(loop, kind) == "":
            raise self.err(node, "`break` / `continue` inside a loop over a tuple/list/dict is not supported",
                           "loop over range(len(...)) of an array instead")
        if getattr(loop, kind) is None:
            setattr(loop, kind, self.names.fresh("broke" if kind == "brk" else "skip"))
        name = getattr(loop, kind)
        self.emit(out, name, Copy(Const(True)))
        return name

    def assign(self, node: cst.Assign, out):
        if len(node.targets) == 1:
            return self.assign_to(node.targets[0].target, node.value, out)
        # `a[i, j] = a[j, i] = v`: v once, then each target from left to right, as Python does
        stash = self.names.fresh("chained")
        self.trees[stash] = self.value(node.value, out)
        for t in node.targets:
            self.assign_to(t.target, cst.Name(stash), out)

    def assign_to(self, target, value, out):
        if isinstance(target, cst.Name) and isinstance(value, cst.Name) and value.value == "None":
            self.bind(target, Const(None), out)
        elif isinstance(target, cst.Name) and isinstance(value, (cst.List, cst.ListComp)) \
                and target.value in self.written_lists:
            self.bind(target, self.list_array(value, out), out)
        elif isinstance(target, cst.Name):
            version = None if _reads_a_tape(value) else self.new_version(target.value)
            lowered = self.value(value, out, target=version or self.local_var(target))
            if version and not is_tree(lowered):
                self.scope[target.value] = version
            self.bind(target, lowered, out)
        elif isinstance(target, (cst.Tuple, cst.List)):
            self.unpack(target, value, out)
        elif isinstance(target, cst.Subscript) and isinstance(table := self.tree_of(target.value), dict):
            self.set_item(table, target, self.value(value, out))
        elif isinstance(target, cst.Subscript) and isinstance(table := self.tree_of(target.value), list):
            self.set_list_item(table, target, self.value(value, out))
        elif isinstance(target, cst.Subscript) and _through_transpose(target):
            self.write_transposed(target, None, self.expr(value, out), out)
        elif isinstance(target, cst.Subscript):
            target = self.merged_rows(target, out)
            base = self.array_base(target.value, out)
            index = self.index(target, out)
            val = self.stored(value, self.value(value, out), out)
            if val == Const(None):  # NumPy stores None into a float array as nan
                val = Const(math.nan)
            out.append(Store(base, index, val, self.loc))
        elif isinstance(target, cst.Attribute):  # `self.W = W`, `model.w_q = w_q`
            obj = self.written_object(target.value)
            self.set_attribute(obj, target.attr.value, self.value(value, out), target, out)
        else:
            raise self.err(target, "only names, tuples of names, subscripts and attributes can be assigned to")

    def set_item(self, table: dict, target: cst.Subscript, value):
        """`cache["z"] = z`: the dict while lowering gets the item, as Python's does (every name for it sees it)."""
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            raise self.err(target, "index a dict with a single constant key")
        key = self.static_key(target.slice[0].slice.value)
        if self.conditional() and table.get(key, MISSING) is not value:
            raise self.err(target, "a dict item cannot be set inside `if` or a runtime loop: s2sad fixes dicts when "
                                   "it generates code", "set it before the branch, or keep the value in an array")
        table[key] = value

    def fills_slots(self, name: str, value, before, out) -> bool:
        """`idx = clamp(i, ...), clamp(j, ...)` in a loop: a flat tuple of numbers bound again on each pass
        lives in one variable per item (`idx_0`, `idx_1`), the same every pass; False where it cannot."""
        if not isinstance(value, tuple) or not value or any(is_tree(v) or not isinstance(v, (Var, Const))
                                                          for v in value):
            return False
        slots = self.slots.get(name)
        if slots is None and before is None:
            slots = self.slots[name] = tuple(Var(self.names.fresh(f"{name}_{k}")) for k in range(len(value)))
            self.ints.update(s.name for s, v in zip(slots, value) if _is_int_atom(v, self.ints))
        if slots is None or before not in (None, slots) or len(slots) != len(value):
            return False
        for slot, item in zip(slots, value):
            self.emit(out, slot.name, Copy(item))
            if not _is_int_atom(item, self.ints):
                self.ints.discard(slot.name)
        self.trees[name] = slots
        return True

    def merged_rows(self, target: cst.Subscript, out) -> cst.Subscript:
        """`force[i][1]` with `i` an int: `force[i, 1]`, the same item (an int index gives a view of a row),
        so the write reaches `force`."""
        inner = target.value
        while isinstance(inner, cst.Subscript) and self.tree_of(inner.value) is None and all(
                isinstance(e.slice, cst.Index) and self.is_int(e.slice.value, out) for e in inner.slice):
            target = target.with_changes(value=inner.value, slice=list(inner.slice) + list(target.slice))
            inner = target.value
        return target

    def is_int(self, node, out) -> bool:
        """Is this index expression one int (a literal, a loop counter, an int argument)?"""
        if isinstance(node, cst.Integer) or isinstance(node, cst.UnaryOperation) and \
                isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
            return True
        if not isinstance(node, cst.Name) or is_tree(self.trees.get(node.value)):
            return False
        atom = self.expr(node, out)
        if isinstance(atom, Const):
            return type(atom.value) is int
        if atom.name in self.ints:
            return True
        return atom.name in self.arguments and (self.kind_of(atom, required=True) or (None, None))[1] is int

    def set_list_item(self, table: list, target: cst.Subscript, value):
        """`t[0] = x[0]` in straight-line code: the list while lowering gets the item, as Python's does."""
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            raise self.err(target, "index a list with a single constant here", "or make it an array: np.array([...])")
        table[self.static_key(target.slice[0].slice.value)] = value

    def list_array(self, node, out) -> Var:
        """A list of numbers written item by item in a branch or loop (`t = [0.0, 0.0]; if ...: t[0] = v`):
        an array, which NumPy code reads as it reads the list."""
        items = self.value(node, out)
        if isinstance(items, list) and items and all(isinstance(row, list) for row in items):
            return self.table_of_rows(node, items, out)
        return self.array_of_list(node, items, out)

    def table_of_rows(self, node, rows: list, out) -> Var:
        """A list of lists of numbers, written item by item (`v[i][j] = ...`): a 2-D array, its rows padded
        with zeros to the longest (a binomial tree's triangle is a square); `v[i][j]` reads it as before."""
        items = [item for row in rows for item in row]
        if not items or any(is_tree(i) or isinstance(i, Var) and i.name in self.arrays for i in items):
            raise self.err(node, "a list of lists written item by item in a branch or loop holds numbers here",
                           "make it an array: np.zeros((n, m))")
        self.refuse_int_items(node, items)
        shape = Const((len(rows), max(len(row) for row in rows)))
        table = self.prim(out, "zeros", (shape,), hint="table")
        for i, row in enumerate(rows):
            for j, item in enumerate(row):
                if not (isinstance(item, Const) and item.value == 0):
                    out.append(Store(table.name, (Const(i), Const(j)), item, self.loc))
        return table

    def refuse_int_items(self, node, items: list):
        if all(_is_int_atom(i, self.ints) for i in items):
            raise self.err(node, "a list of ints written item by item in a branch or loop becomes an array here, "
                                 "and an array of ints would round the floats written into it",
                           "write its items as floats (`[0.0, 0.0]`), or np.zeros(n, dtype=np.int64) for counts")

    def array_of_list(self, node, items: list, out) -> Var:
        if not items or any(is_tree(i) for i in items):
            raise self.err(node, "a list written item by item in a branch or loop holds numbers here",
                           "make it an array: np.zeros(n), or np.array([...])")
        self.refuse_int_items(node, items)
        return self.stack_items([Const(float(i.value)) if isinstance(i, Const) and type(i.value) in (int, bool) else i
                                 for i in items], out)

    def local_var(self, target: cst.Name) -> str | None:
        return self.var(target.value) if target.value not in self.trees else None

    def new_version(self, user_name: str) -> str | None:
        """A new name for rebinding `user_name` in straight-line code (no runtime branch or loop around
        it, no early exit before it): every later read sees the new name, so the adjoint sweep finds
        the old value still in its variable, where a name that kept one variable needs a tape. An
        inlined helper counts from 0 even inside a caller's loop: each call binds all its names afresh
        before reading them, so none carries a value from one iteration to the next."""
        if self.nested or user_name not in self.scope or user_name in self.updates_callers:
            return None
        return self.renamed(user_name)

    def bind(self, target, value, out):
        """Give the name (or names, for a tuple target) `target` the atom or static tree `value`."""
        if isinstance(target, cst.Name):
            if isinstance(value, StaticRef):
                made_here = isinstance(value.obj, LocalObject) and target.value not in self.objects
                if self.branch_depth and self.objects.get(target.value) != value and not made_here:
                    raise self.err(target, "a function or object cannot be (re)bound inside `if` or a runtime loop",
                                   "bind it before the branch")
                self.objects[target.value] = value
                return
            self.objects.pop(target.value, None)
            if (isinstance(value, Const) and value.value is None) != _is_none(self.trees.get(target.value)) \
                    and self.branch_depth:
                raise self.err(target, f"`{target.value}` is None on one path and a value on another",
                               "give it a value of one type before the branch (numba compiles one type per name)")
            if isinstance(value, Const) and value.value is None or isinstance(value, (Positions, PositionsAxis)):
                self.trees[target.value] = value  # `H = None`: `H is None` is decided when the code is generated
                return
            if isinstance(value, Const) and isinstance(value.value, str) and \
                    (not self.branch_depth or isinstance(self.trees.get(target.value), Const)):
                if self.branch_depth and self.trees[target.value] != value:
                    raise self.err(target, f"`{target.value}` is a string fixed when the code is generated: it cannot "
                                           "change inside `if` or a runtime loop", "decide it before the branch")
                self.trees[target.value] = value  # `mode = "train"`: `mode == "train"` is decided now
                return
            if is_tree(value):
                before = self.trees.get(target.value)
                # a table of numbers is the same every pass; so is generated code's `dims = (4, n)`, read at once
                same = all(isinstance(a, Const) for a in flatten(value)[0]) or written_by_s2sad(self.parsed.fn)
                if self.branch_depth and before is not value and not (same and before in (None, value)):
                    if self.fills_slots(target.value, value, before, out):
                        return
                    raise self.err(target, "a tuple/list/dict cannot be (re)bound inside `if` or a runtime loop",
                                   "bind it before the branch, or return arrays instead")
                self.trees[target.value] = value
                return
            self.trees.pop(target.value, None)
            var = self.var(target.value)
            if isinstance(value, Var) and value.name not in self.arrays and isinstance(self.kinds, UnknownKinds):
                self.kinds.asked = True  # `q = p`: whether `q += ...` writes into `p` depends on the argument types
            if not (isinstance(value, Var) and value.name == var):
                self.emit(out, var, Copy(value))
            return
        if not isinstance(target, (cst.Tuple, cst.List)):
            raise self.err(target, "only names can be unpacked into")
        names = [el.value for el in target.elements]
        if any(isinstance(el, cst.StarredElement) for el in target.elements):
            raise self.err(target, "starred assignment is not supported", "unpack every item: `a, b, c = t`")
        if isinstance(value, Var):  # unpack the first axis of an array
            value = tuple(self.emit(out, self.temp(f"{value.name}_{i}"), Load(value, (Const(i),)))
                          for i in range(len(names)))
        if isinstance(value, Positions):
            value = self.unpacked_positions(target, value, names)
        if not isinstance(value, (tuple, list)) or len(value) != len(names):
            size = len(value) if is_tree(value) else "a non-tuple"
            raise self.err(target, f"cannot unpack {size} values into {len(names)} names")
        for name, item in zip(names, value):
            if isinstance(name, cst.Attribute):  # `self.x, self.P = predict(...)`
                self.set_attribute(self.written_object(name.value), name.attr.value, item, name, out)
            elif isinstance(name, cst.Subscript) and isinstance(table := self.tree_of(name.value), dict):
                self.set_item(table, name, item)
            elif isinstance(name, cst.Subscript):  # `a[0], a[1] = y, x`
                base = self.array_base(name.value, out)
                out.append(Store(base, self.index(name, out), self.stored(name, item, out), self.loc))
            else:
                self.bind_again(name, item, out)

    def bind_again(self, target, value, out):
        """`bind`, where a name bound again in straight-line code gets a new variable (`new_version`)."""
        if isinstance(target, cst.Name) and not is_tree(value):
            version = self.new_version(target.value)
            if version:
                self.scope[target.value] = version
        self.bind(target, value, out)

    def unpack(self, target, value, out):
        if isinstance(value, (cst.Tuple, cst.List)) and isinstance(target, (cst.Tuple, cst.List)) and \
                len(value.elements) == len(target.elements):  # `a, b = b, a`: read every value first
            items = [self.value(el.value, out) for el in value.elements]
            written = {self.var(n.value.value) for n in target.elements if isinstance(n.value, cst.Name)
                       and n.value.value not in self.trees}
            items = tuple(self.emit(out, self.temp(a.name + "_old"), Copy(a)) if isinstance(a, Var)
                          and a.name in written else a for a in items)
            self.bind(target, items, out)
        else:
            self.bind(target, self.value(value, out), out)

    def array_base(self, node, out) -> str:
        if isinstance(node, cst.Name) and node.value not in self.locals and self.enclosing is not None \
                and self.enclosing.knows(node.value):
            return self.enclosing.array_base(node, out)  # a nested function writing into its enclosing function's array
        if isinstance(node, cst.Attribute):
            return self.attribute_array(node, out)
        if isinstance(node, cst.Subscript):
            raise self.err(node, "a write into `a[k][...]` is refused where `k` is not one int: NumPy writes into a "
                                 "view of `a` only after an int or slice index, and s2sad merges only ints",
                           "index once, `a[k, ...] = ...`")
        if not isinstance(node, cst.Name) or node.value not in self.locals:
            raise self.err(node, "in-place writes need a local array variable on the left",
                           "create the array inside the function (e.g. np.zeros) and write into it")
        return self.var(node.value)

    def write_transposed(self, target: cst.Subscript, op, rhs, out):
        """`D.T[:] -= x.T` writes into `D` through its transposed view: D's items become (D.T - x.T).T."""
        if not all(i == Slice(None, None, None) for i in self.index(target, out)):
            raise self.err(target, "a write through `.T` is supported with full slices (`D.T[:] -= ...`)",
                           "write into the array itself with the index reversed: `D[j, i] = ...`")
        base = self.array_base(target.value.value, out)
        old = self.prim(out, "transpose", (Var(base),), hint=base + "_T")
        new = self.prim(out, op, (old, rhs)) if op else \
            self.prim(out, "broadcast_to", (rhs, self.prim(out, "shape", (old,))), hint="written")
        out.append(Store(base, (Slice(None, None, None),), self.prim(out, "transpose", (new,)), self.loc))

    def attribute_array(self, node: cst.Attribute, out) -> str:
        """The array `self.b[...] = ...` writes into: the attribute's variable. An outside object's array is
        copied at the first write, so the caller's object keeps its own (as `grad` keeps arguments)."""
        obj, name = self.written_object(node.value), node.attr.value
        current = self.expr(node, out)
        if not isinstance(current, Var):
            raise self.err(node, f"`{name}` is not an array attribute: only arrays can be written into")
        if obj.outside is not None and name not in obj.fields:
            if self.conditional():
                raise self.err(node, f"the first write into the outside object's array `{name}` runs conditionally "
                                     "or repeatedly here", f"copy it first, before the loop or branch: "
                                                           f"`self.{name} = self.{name}.copy()`")
            current = self.prim(out, "copy", (current,), target=self.names.fresh(f"{obj.hint}_{name}"))
            obj.fields[name] = current
        return current.name

    def aug_assign(self, node: cst.AugAssign, out):
        op = AUGOPS.get(type(node.operator))
        if op is None:
            raise self.err(node, f"augmented operator `{_spelled(node.operator)}` is not supported",
                           NO_DERIVATIVE_OPERATOR)
        rhs = self.expr(node.value, out)
        if isinstance(node.target, cst.Name):
            name = node.target.value
            if name not in self.locals:
                raise self.err(node.target, f"`{name}` is not a local variable")
            v = self.var(name)
            view = self.written_view(node, v, out)
            if view is not None:
                return self.write_through(name, view, self.prim(out, op, (Var(v), rhs)), out)
            version = self.new_version(name)
            rank = self.ranks.get(v)
            self.prim(out, op, (Var(v), rhs), target=version or v)
            out[-1].in_place = True
            if rank:  # NumPy updates an array in place: its shape stays
                self.ranks[version or v] = rank
            if version:
                self.scope[name] = version
        elif isinstance(node.target, cst.Subscript) and _through_transpose(node.target):
            self.write_transposed(node.target, op, rhs, out)
        elif isinstance(node.target, cst.Subscript):
            target = self.merged_rows(node.target, out)
            base = self.array_base(target.value, out)
            index = self.index(target, out)
            old = self.emit(out, self.temp(self.load_hint(base, index)), Load(Var(base), index))
            new = self.prim(out, op, (old, rhs))
            out.append(Store(base, index, new, self.loc))
        elif isinstance(node.target, cst.Attribute):  # `self.t += dt`: NumPy updates an array attribute in place
            obj, name = self.written_object(node.target.value), node.target.attr.value
            old = self.expr(node.target, out)
            if not isinstance(old, Var):  # a static number: `self.step += 1` folds
                return self.set_attribute(obj, name, self.prim(out, op, (old, rhs)), node.target, out)
            own = old.name if self.conditional() else self.names.fresh(f"{obj.hint}_{name}")
            obj.fields[name] = self.prim(out, op, (old, rhs), target=own)
            out[-1].in_place = True
        else:
            raise self.err(node.target, "only names and subscripts can be updated in place")

    def return_stmt(self, node: cst.Return, out) -> set:
        if self.stack[1:] and (node.value is None or (isinstance(node.value, cst.Name) and node.value.value == "None")):
            return self.return_nothing(node, out)
        if node.value is None:
            raise self.err(node, "a differentiated function must return a value")
        value = self.value(node.value, out)
        atoms, shape = flatten(value)
        if self.stack[1:] and any(isinstance(a, StaticRef) for a in atoms):
            return self.return_static(node, value)
        if any(isinstance(a, Const) and (isinstance(a.value, str) or (a.value is None and shape is None))
               for a in atoms):
            raise self.err(node, "a differentiated function must return numbers or arrays (this returns "
                                 f"{'None' if shape is None and atoms[0].value is None else 'a string'})",
                           "return the value to differentiate, e.g. a float or np.sum(...)")
        r = self.ret
        if r.outputs is None:
            r.shape = shape
            r.is_tuple = is_tree(shape)
            if r.simple and shape is None and isinstance(atoms[0], Var) and atoms[0].name not in self.params \
                    and not self.stack[1:]:
                r.outputs = [atoms[0].name]
                return set()
            base = "out" if not self.stack[1:] else f"{self.parsed.name}_out"
            r.outputs = [self.names.fresh(base) for _ in atoms]
        if shape != r.shape:
            raise self.err(node, "every `return` must give values of the same structure")
        for name, atom in zip(r.outputs, atoms):
            if not (isinstance(atom, Var) and atom.name == name):
                self.emit(out, name, Copy(atom))
        if r.simple:
            return set()
        self.emit(out, r.flag, Copy(Const(True)))
        return {r.flag}

    def return_static(self, node, value) -> set:
        """`return lambda x: f(x, k)` in a helper (a factory): the caller gets the function itself."""
        if self.nested or self.ret.outputs is not None:
            raise self.err(node, "a helper returning a function or object must decide which when the code is "
                                 "generated, not at run time", "branch on constants (`if name == 'tanh':`) only")
        self.ret.static, self.ret.outputs = value, []
        return set()

    def return_nothing(self, node, out) -> set:
        """`return` in a helper called for its writes into the caller's arrays."""
        r = self.ret
        if r.outputs is None:
            r.outputs = []
        elif r.outputs:
            raise self.err(node, "every `return` must give values of the same structure")
        if r.simple:
            return set()
        self.emit(out, r.flag, Copy(Const(True)))
        return {r.flag}

    def if_stmt(self, node: cst.If, out) -> set:
        test = self.expr(node.test, out)
        if isinstance(test, Const) and test.value is not None and not isinstance(test.value, str):
            return self.static_if(node, bool(test.value), out)
        loc = self.loc
        body, orelse = [], []
        before = dict(self.ranks)
        flags = self.branch(node.body.body, body)
        after_body = self.restore_ranks(before)
        if node.orelse is not None:
            self.loc = loc
            if isinstance(node.orelse, cst.If):  # elif
                flags |= self.if_stmt(node.orelse, orelse)
                self.jumped_statically = False  # reached only when the run-time test above is false
            else:
                flags |= self.branch(node.orelse.body.body, orelse)
        self.restore_ranks({k: r for k, r in after_body.items() if self.ranks.get(k) == r})
        out.append(If(self.stable_test(test, body + orelse, out), body, orelse, loc))
        return flags

    def restore_ranks(self, ranks: dict) -> dict:
        """Set the known ranks (a dict callees share) to `ranks`; give back the ones replaced."""
        replaced = dict(self.ranks)
        self.ranks.clear()
        self.ranks.update(ranks)
        return replaced

    def stable_test(self, test, inner, out):
        """Copy a test variable the guarded code overwrites, so the reverse sweep can reread it."""
        if isinstance(test, Var) and test.name in ir.all_writes(If(test, inner, [], None)):
            return self.emit(out, self.temp(test.name + "_was"), Copy(test))
        return test

    def range_args(self, node: cst.Call, out):
        args = [self.expr(a.value, out) for a in node.args]
        if not 1 <= len(args) <= 3 or any(a.keyword for a in node.args):
            raise self.err(node, "range() takes 1 to 3 positional arguments")
        if len(args) == 1:
            return Const(0), args[0], Const(1)
        return args[0], args[1], (args[2] if len(args) == 3 else Const(1))

    def counts_like_range(self, it: cst.Call, target) -> bool:
        """`for i in np.arange(n + 1)` with bounds that are ints known now: a range loop (an int counter)."""
        return self.static_value(it.func) is np.arange and isinstance(target, cst.Name) \
            and 1 <= len(it.args) <= 3 and all(a.keyword is None and not a.star and self.is_static_key(a.value)
                                               and type(self.static_key(a.value)) is int for a in it.args)

    def for_stmt(self, node: cst.For, out) -> set:
        if node.orelse is not None:
            raise self.err(node, "`for ... else` is not supported", "set a flag before `break` and test it after the loop")
        it = node.iter
        loc = self.loc
        pre = None  # binds the target to each iteration's item (zip, enumerate, an array's rows)
        if isinstance(it, cst.Call) and (self.static_value(it.func) in (range, numba.prange)
                                         or self.counts_like_range(it, node.target)):
            if not isinstance(node.target, cst.Name):
                raise self.err(node.target, "a range loop needs a single loop variable")
            start, stop, step = self.range_args(it, out)
            user_target = node.target.value
            if all(isinstance(b, Const) and type(b.value) is int for b in (start, stop, step)) \
                    and self.appends_to_static_list(node.body):  # one head per iteration: `heads.append(h)`
                return self.unrolled_loop(node, [Const(k) for k in range(start.value, stop.value, step.value)], out)
        elif (items := self.static_items(it, out)) is not None:
            return self.unrolled_loop(node, items, out)
        else:
            start, stop, step, user_target, pre = self.iter_loop(node, out)
        bounds = []
        for a in (start, stop, step):
            bounds.append(a)
        loop = Loop()
        self.loops.append(loop)
        body: list = []
        private = user_target and self.private_to(node, user_target)
        counter = self.var(user_target) if private else self.names.fresh(user_target or "i")
        self.ints.add(counter)
        if user_target and not private:
            self.emit(body, self.var(user_target), Copy(Var(counter)))
        if pre is not None:
            self.loc = loc
            pre(Var(counter), body)
        grown = self.grown_lists(node, start, stop, step, counter, out)
        flags = self.branch(node.body.body, body, loop=node)
        for name in grown:
            del self.growing[name]
        self.loops.pop()
        self.loc = loc
        if loop.cont:
            body.insert(0, Assign(loop.cont, Copy(Const(False)), loc))
        stop_flags = [f for f in (loop.brk, *(flags - {loop.cont, loop.brk})) if f]
        bounds = [self.stable_bound(a, body, out) for a in bounds]
        if not stop_flags:
            out.append(For(counter, *bounds, body, loc))
            return set()
        return self.for_as_while(node, counter, bounds, body, loop, stop_flags, out) | (flags - {loop.cont, loop.brk})

    def static_items(self, it, out):
        """The items of a loop over a static tuple/list/dict (or its .items()/.keys()/.values(), or
        enumerate of one), else None."""
        if isinstance(it, cst.Call) and self.callee_is(it.func, enumerate) and 1 <= len(it.args) <= 2:
            inner = self.static_items(it.args[0].value, out)
            start = self.static_key(it.args[1].value) if len(it.args) == 2 else 0
            return None if inner is None else [(Const(i), item) for i, item in enumerate(inner, start)]
        if isinstance(it, cst.Call) and self.callee_is(it.func, zip):
            return self.static_zip(it, out)
        if isinstance(it, cst.Call) and len(it.args) == 1 and \
                any(self.static_value(it.func) is f for f in (reversed, list, tuple)):
            inner = self.static_items(it.args[0].value, out)
            return None if inner is None else inner[::-1] if self.callee_is(it.func, reversed) else inner
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args and \
                it.func.attr.value in ("items", "keys", "values"):
            base = self.tree_of(it.func.value)
            if isinstance(base, dict):
                keys = [Const(k) for k in base]
                return {"items": list(zip(keys, base.values())), "keys": keys, "values": list(base.values())}[
                    it.func.attr.value]
            return None
        if isinstance(it, (cst.Tuple, cst.List)):
            return list(self.value(it, out))
        base = self.tree_of(it)
        if isinstance(base, dict):
            return [Const(k) for k in base]
        return list(base) if base is not None else None

    def tree_of(self, node):
        """The static tree a name (or a constant subscript chain of one) is bound to, else None."""
        if isinstance(node, cst.Name):
            if node.value in self.trees or node.value in self.locals:
                tree = self.trees.get(node.value)
                return tree if is_tree(tree) else None  # not a comprehension's constant index
            if self.enclosing is not None and self.enclosing.knows(node.value):
                return self.enclosing.tree_of(node)
            ref = self.static_ref(node)
            return self.outside_tree(ref.obj, ref.where) if is_tree(ref.obj) else None
        if isinstance(node, cst.Attribute):
            base = self.tree_of(node.value)
            if isinstance(base, Record) and base.names and node.attr.value in base.names:
                item = base.field(node.attr.value)
                return item if is_tree(item) else None
            obj = self.local_object(node.value)
            item = obj.fields.get(node.attr.value) if obj is not None else None
            return item if is_tree(item) else None
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            base = self.tree_of(node.value)
            if is_tree(base) and self.is_static_key(node.slice[0].slice.value):
                try:
                    item = base[self.static_key(node.slice[0].slice.value)]
                except (KeyError, IndexError, TypeError):
                    return None
                return item if is_tree(item) else None
        return None

    def unrolled_loop(self, node: cst.For, items, out) -> set:
        """A loop over a static container runs at generation time: its body is repeated per item."""
        self.loops.append(Loop(brk="", cont=""))  # sentinels: break/continue are refused below
        for item in items:
            self.bind_again(node.target, item, out)
            if self.block(node.body.body, out):
                raise self.err(node, "`break`, `continue` or `return` inside a loop over a tuple/list/dict is "
                                     "not supported", "loop over range(len(...)) of an array instead")
        self.loops.pop()
        return set()

    def appends_to_static_list(self, body) -> bool:
        return any(isinstance(n, cst.Call) and self.is_list_append(n) and isinstance(self.trees.get(n.func.value.value), list)
                   for n in _walk(body, skip=(cst.FunctionDef, cst.Lambda)))

    def grown_lists(self, loop: cst.For, start, stop, step, counter: str, out) -> list[str]:
        """Lists made before `loop` that each pass appends one item to (`llk.append(...)`, a top-level
        statement of a body with no break, continue or return): they become arrays of one row per item,
        allocated here for the items the list holds already plus one per pass."""
        appended = [n.value.func.value.value for n in loop.body.body if isinstance(n, cst.SimpleStatementLine)
                    for n in n.body if isinstance(n, cst.Expr) and self.is_list_append(n.value)]
        jumps = any(isinstance(n, (cst.Break, cst.Continue, cst.Return))
                    for n in _walk(loop.body, skip=(cst.FunctionDef, cst.Lambda)))
        names = [name for name in appended if appended.count(name) == 1 and not jumps
                 and isinstance(self.trees.get(name), list) and _count_names(loop.body, name) == 1
                 and step == Const(1) and all(isinstance(a, (Const, Var)) for a in self.trees[name])]
        for name in names:
            prefix = self.trees.pop(name)
            count = self.prim(out, "sub", (stop, start), hint="passes") if start != Const(0) else stop
            count = self.prim(out, "add", (count, Const(len(prefix))), hint="items") if prefix else count
            first_rank = None if not prefix else 0 if isinstance(prefix[0], Const) else self.ranks.get(prefix[0].name)
            if prefix and first_rank is None and isinstance(self.kinds, UnknownKinds):
                self.kind_of(prefix[0], required=True)  # `ys = [y0]` of an argument: its rank comes with its type
            shape = () if not prefix or first_rank == 0 else self.items_of(self.prim(out, "shape", (prefix[0],)), out)
            if shape is None:
                raise self.err(loop, f"`{name}` grows by one item per pass: s2sad makes it an array, and needs the "
                                     f"rank of its first item", "call grad(f) on arguments, or preallocate an array")
            growth = Growth(self.var(name), len(prefix), start, counter, count, out)
            if prefix:
                self.allocate(growth, shape, out)
            for k, item in enumerate(prefix):
                out.append(Store(growth.buffer, (Const(k),), item, self.loc))
            self.growing[name] = growth
        return names

    def allocate(self, growth: "Growth", shape, out):
        dims = self.prim(out, "make_tuple", (growth.count, *shape), hint="dims")
        self.prim(out, "zeros", (dims,), target=growth.buffer)
        growth.made = True

    def grow(self, call: cst.Call, out):
        """`llk.append(v)` in a loop that makes `llk` an array: the pass's row of it."""
        growth = self.growing[call.func.value.value]
        item = self.expr(call.args[0].value, out)
        rank = 0 if isinstance(item, Const) else self.ranks.get(item.name)
        if rank is None and isinstance(self.kinds, UnknownKinds):
            self.kind_of(item, required=True)
        if not growth.made and rank == 0:
            self.allocate(growth, (), growth.before)
        elif not growth.made:  # arrays: the first pass allocates, with its item's shape
            shape = None if rank is None else self.items_of(self.prim(out, "shape", (item,)), out)
            if shape is None:
                raise self.err(call, f"`{call.func.value.value}` grows by one item per pass, and s2sad makes it an "
                                     "array: it needs the rank of the items", "preallocate: `out = np.zeros((n, m))`")
            first = self.prim(out, "eq", (Var(growth.counter), growth.start), hint="first")
            allocation: list = []
            self.allocate(growth, shape, allocation)
            out.append(If(first, allocation, [], self.loc))
        index = Var(growth.counter)
        if growth.start != Const(0):
            index = self.prim(out, "sub", (index, growth.start), hint="row")
        if growth.prefix:
            index = self.prim(out, "add", (index, Const(growth.prefix)), hint="row")
        out.append(Store(growth.buffer, (index,), item, self.loc))

    def private_to(self, loop: cst.For, name: str) -> bool:
        """Is `name` used only inside `loop`'s body and never assigned there?"""
        inside = _count_names(loop.body, name)
        assigned = name in assigned_names(cst.FunctionDef(cst.Name("f"), cst.Parameters(), loop.body))
        return not assigned and inside == _count_names(self.parsed.node.body, name) - 1

    def stable_bound(self, atom, body, out):
        writes = set()
        for s, _, _ in ir.walk(body):
            writes.update(ir.stmt_writes(s))
        if isinstance(atom, Var) and atom.name in writes:
            return self.emit(out, self.temp(atom.name + "_bound"), Copy(atom))
        return atom

    def for_as_while(self, node, counter, bounds, body, loop, stop_flags, out) -> set:
        """A `for` that can stop early becomes a `while` over an explicit counter."""
        start, stop, step = bounds
        if not isinstance(step, Const):
            raise self.err(node, "a loop with `break` or `return` inside needs a constant range step")
        loc = self.loc
        if loop.brk:
            self.emit(out, loop.brk, Copy(Const(False)))
        self.emit(out, counter, Copy(start))
        test_body: list = []
        more = self.prim(test_body, "lt" if step.value > 0 else "gt", (Var(counter), stop), hint="more")
        go = self.none_set(stop_flags, test_body)
        test = self.prim(test_body, "and", (more, go), hint="go_on")
        self.prim(body, "add", (Var(counter), step), target=counter)
        out.append(While(test_body, test, body, loc))
        return set()

    def iter_loop(self, node: cst.For, out):
        """`for v in array`, `for a, b in zip(x, y)`, `for i, (a, b) in enumerate(zip(x, y))`: a loop over a
        counter, binding the target to the counter's item of every array and range."""
        walk = self.walk(node.iter, out, node, node.target)
        first = node.target.elements[0].value if isinstance(node.target, cst.Tuple) and node.target.elements else None
        index = first.value if walk.counts and isinstance(first, cst.Name) and self.private_to(node, first.value) \
            else None  # enumerate's index, read only in the body: the loop's own counter
        return Const(0), walk.length, Const(1), index, \
            lambda k, body: self.bind_item(node.target, walk.item(k, body), body)

    def iterated(self, loop: cst.For, it, out):
        """The array a loop walks: the object bound before the loop, even where the body rebinds its name."""
        arr = self.expr(it, out)
        rebound = {t.target.value for t in _assign_targets(loop.body) if isinstance(t.target, cst.Name)}
        if isinstance(arr, Var) and isinstance(it, cst.Name) and it.value in rebound:
            return self.emit(out, self.temp(it.value + "_iterated"), Copy(arr))
        return arr

    def while_stmt(self, node: cst.While, out) -> set:
        if node.orelse is not None:
            raise self.err(node, "`while ... else` is not supported", "set a flag before `break` and test it after the loop")
        loc = self.loc
        loop = Loop()
        self.loops.append(loop)
        body: list = []
        flags = self.branch(node.body.body, body, loop=node)
        self.loops.pop()
        self.loc = loc
        if loop.cont:
            body.insert(0, Assign(loop.cont, Copy(Const(False)), loc))
        stop_flags = sorted(f for f in (loop.brk, *(flags - {loop.cont, loop.brk})) if f)
        test_body: list = []
        if stop_flags:
            self.emit(out, loop.brk, Copy(Const(False))) if loop.brk else None
            go = self.none_set(stop_flags, test_body)
            test = Var(self.temp("go_on"))
            self.emit(test_body, test.name, Copy(go))
            inner: list = []
            self.expr(node.test, inner, target=test.name)
            test_body.append(If(go, inner, [], loc))
        else:
            test = self.expr(node.test, test_body)
        out.append(While(test_body, test, body, loc))
        return flags - {loop.cont, loop.brk}

    # ----------------------------------------------------------- expressions
    def value(self, node, out, target: str | None = None):
        """Lower an expression to an atom, or to a static tree (tuple/list/dict) of atoms."""
        if (field := self.object_field(node, out)) is not _NOT_STATIC:
            return field if target is None or not isinstance(field, (Var, Const)) else self.emit(out, target, Copy(field))
        if isinstance(node, (cst.Tuple, cst.List)):
            if any(isinstance(el, cst.StarredElement) for el in node.elements):
                raise self.err(node, "`*` unpacking in a tuple or list is not supported")
            items = [self.value(el.value, out) for el in node.elements]
            return tuple(items) if isinstance(node, cst.Tuple) else items
        if isinstance(node, cst.Dict):
            out_dict = {}
            for el in node.elements:
                if not isinstance(el, cst.DictElement):
                    raise self.err(el, "`**` in a dict is not supported")
                out_dict[self.static_key(el.key)] = self.value(el.value, out)
            return out_dict
        if isinstance(node, cst.Name) and node.value in self.trees:
            return self.trees[node.value]
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return self.list_comp(node, out)
        if isinstance(node, cst.Lambda):
            return StaticRef(NestedFunction(*_lambda_def(node, self.parsed), self), None)
        if isinstance(node, cst.Name) and node.value not in self.locals and self.tree_of(node) is not None:
            return self.tree_of(node)
        if isinstance(node, (cst.Name, cst.Attribute)):
            ref = self.static_ref(node)
            if ref is not None and is_tree(ref.obj):
                return self.outside_tree(ref.obj, ref.where)
            if ref is not None and _is_static_object(ref.obj):
                return ref
        if isinstance(node, cst.Call):
            return self.call(node, out, target)
        if isinstance(node, cst.Subscript):
            return self.subscript(node, out, target)
        if isinstance(node, cst.Attribute) and isinstance(self.tree_of(node.value), Record):
            return self.record_field(node)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) \
                and any(self.is_sequence(side) for side in (node.left, node.right)):
            return self.joined(node, out)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) \
                and any(self.names_a_container(side) for side in (node.left, node.right)):
            return self.repeated(node, out)
        return self.expr(node, out, target)

    def repeated(self, node: cst.BinaryOperation, out):
        """`[0.0] * n`, `(1,) * 3`: a tuple or list repeated a number of times known when the code is generated."""
        seq, count = (node.left, node.right) if self.names_a_container(node.left) else (node.right, node.left)
        items = self.value(seq, out)
        try:
            n = self.static_key(count)
        except UnsupportedError:
            n = None
        if not isinstance(n, int):
            raise self.err(node, "a list or tuple is repeated here a number of times known only at run time",
                           "make an array: np.zeros(n), np.full(n, value)")
        return type(items)(list(items) * n)

    def is_sequence(self, node) -> bool:
        return isinstance(node, (cst.Tuple, cst.List)) or isinstance(self.tree_of(node), (tuple, list))

    def joined(self, node: cst.BinaryOperation, out):
        """`(n,) + x.shape`: a tuple (or list) joined when the code is generated, item by item."""
        left, right = (self.items_of(self.value(side, out), out) for side in (node.left, node.right))
        if (left is None or right is None) and isinstance(self.kinds, UnknownKinds):
            self.kinds.asked = True
            raise TypesNeeded(f"the length of `{cst.Module([]).code_for_node(node)}` follows the arguments' ranks: "
                              "s2sad generates the code per argument type when the function is called, so "
                              "`s2sad.source(f)` cannot read it; call grad(f) on arguments")
        if left is None or right is None:
            raise self.err(node, "a tuple or list is joined here only with another one, or with an array's "
                                 "`.shape` whose rank s2sad knows", "write the items out: `(n, m, k)`")
        return type(left)([*left, *right]) if isinstance(left, list) else (*left, *right)

    def items_of(self, value, out):
        """A static tuple/list as it is, a shape tuple of known length as its items, else None."""
        if isinstance(value, (tuple, list)):
            return value
        if isinstance(value, Var) and value.name in self.lengths:
            return tuple(self.emit(out, self.temp(f"{value.name}_{k}"), Load(value, (Const(k),)))
                         for k in range(self.lengths[value.name]))
        return None

    def outside_tree(self, value, where: Hidden | None):
        """A tuple, list or dict read from outside the function as a static tree: numbers are constants,
        arrays hidden parameters, anything else an object (its structure is fixed when the code is generated)."""
        if isinstance(value, (tuple, list)):
            items = [self.outside_tree(v, where and where.then("item", i)) for i, v in enumerate(value)]
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, dict):
            return {k: self.outside_tree(v, where and where.then("item", k)) for k, v in value.items()}
        if isinstance(value, (bool, int, float, np.floating, np.integer)):
            return Const(value.item() if isinstance(value, np.generic) else value)
        if is_hidden_array(value) and where is not None:
            return self.hidden_var(where)
        return StaticRef(value, where)

    def hidden_var(self, where: Hidden) -> Var:
        value = where.get()
        if isinstance(value, np.ndarray):  # generated for this rank: hidden.values checks it at each call
            where = Hidden(where.owner, where.steps, value.ndim)
        name = self.hidden.var(where)
        if where.ndim is not None:
            self.ranks[name] = where.ndim
            self.units[name] = of_shape(value.shape)
        self.arrays.add(name)
        return Var(name)

    def record_field(self, node: cst.Attribute):
        record = self.tree_of(node.value)
        try:
            return record.field(node.attr.value)
        except KeyError:
            names = ", ".join(record.names or ())
            raise self.err(node, f"no field `{node.attr.value}` here (fields: {names or 'none by name'})") from None

    def static_key(self, node):
        """A constant dict key or tuple/list index: a string or an int."""
        if isinstance(node, (cst.SimpleString, cst.Integer)):
            return node.evaluated_value
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
                isinstance(node.expression, cst.Integer):
            return -node.expression.evaluated_value
        if isinstance(node, cst.BinaryOperation) and self.is_static_key(node):  # `i + 1` of an unrolled `i`
            return INT_ARITHMETIC[type(node.operator)](self.static_key(node.left), self.static_key(node.right))
        if self.is_static_key(node) and isinstance(node, cst.Name) and node.value in self.trees:
            return self.trees[node.value].value  # the index of an unrolled comprehension
        value = self.static_value(node) if isinstance(node, (cst.Name, cst.Attribute)) else _NOT_STATIC
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value
        raise self.err(node, "a tuple/list/dict can only be indexed with a constant (a literal, or a global int/str)",
                       "s2sad resolves containers when it generates code")

    def subscript(self, node: cst.Subscript, out, target):
        base = self.value(node.value, out)
        if isinstance(base, PositionsAxis):
            raise self.unpacked_misused(node, base)
        if isinstance(base, Positions):
            raise self.positions_misused(node)
        if is_tree(base):
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice) and isinstance(base, (tuple, list)):
                return self.static_slice(node, base, out)
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                raise self.err(node, "index a tuple/list/dict with a single constant")
            if not self.is_static_key(node.slice[0].slice.value):
                return self.runtime_item(node, base, node.slice[0].slice.value, out, target)
            key = self.static_key(node.slice[0].slice.value)
            try:
                return base[key]
            except (KeyError, IndexError, TypeError):
                raise self.err(node, f"no item {key!r} in this {type(base).__name__}") from None
        if not isinstance(base, Var):
            raise self.err(node, "can only index variables")
        return self.load(node, base, out, target)

    def expr(self, node, out, target: str | None = None):
        atom = self.refuse_non_atom(node, self._expr(node, out, target))
        if target is not None and not (isinstance(atom, Var) and atom.name == target):
            return self.emit(out, target, Copy(atom))
        return atom

    def stored(self, node, value, out):
        """What a store writes: a number or array; a list or tuple of them (`X[0] = [x0, y0]`) as the array NumPy
        makes of it."""
        if isinstance(value, (tuple, list)) and value and all(isinstance(a, (Var, Const)) for a in flatten(value)[0]):
            return self.nested_array(node, value, out, None)
        return self.refuse_non_atom(node, value)

    def refuse_non_atom(self, node, value):
        """`value` if it is a number or array (an atom); a located error for a tuple, list or np.where's positions."""
        if isinstance(value, PositionsAxis):
            raise self.unpacked_misused(node, value)
        if isinstance(value, Positions):
            raise self.positions_misused(node)
        if is_tree(value):
            raise self.err(node, f"a {type(value).__name__} cannot be used as a number or array here",
                           "unpack it, index it with a constant, pass it to a Python function or return it")
        return value

    def unpacked_misused(self, node, part: "PositionsAxis"):
        together = ", ".join(part.names)
        other_order = "`x.T[{}]`".format(together) if len(part.names) == 2 else "np.transpose(x, axes) first"
        return self.err(node, f"`{part.names[part.axis]}` is one of the index arrays `{together}` unpacked from "
                              "np.where / np.nonzero / np.*_indices: they index only all together, in that order",
                        f"write `x[{together}]`; for the items in another order, {other_order}")

    def positions_misused(self, node):
        return self.err(node, "the index arrays of np.where(condition) / np.nonzero / np.diag_indices serve here only "
                              "to index an array (`x[np.where(c)]`, `x[np.diag_indices_from(x)]`)",
                        "index with them whole, or with the condition itself: `x[c]`")

    def _expr(self, node, out, target):
        if isinstance(node, cst.Name):
            return self.name(node)
        if isinstance(node, (cst.Integer, cst.Float)):
            return Const(node.evaluated_value)
        if isinstance(node, cst.SimpleString):
            return Const(node.evaluated_value)
        if isinstance(node, cst.UnaryOperation):
            return self.unary(node, out, target)
        if isinstance(node, cst.BinaryOperation):
            op = BINOPS.get(type(node.operator))
            if op is None:
                raise self.err(node, f"operator `{_spelled(node.operator)}` is not supported", NO_DERIVATIVE_OPERATOR)
            a = self.expr(node.left, out)
            b = self.expr(node.right, out)
            if Const(None) in (a, b):
                return self.none_operand(node, out, target)
            if op in BITWISE and any(self.is_float_number(v) for v in (a, b)):
                raise self.err(node, f"operator `{_spelled(node.operator)}` is not supported on floats",
                               BITWISE_HINT)
            return self.prim(out, op, (a, b), target=target)
        if isinstance(node, cst.Comparison):
            return self.comparison(node, out, target)
        if isinstance(node, cst.BooleanOperation):
            return self.boolean(node, out, target)
        if isinstance(node, cst.IfExp):
            return self.if_exp(node, out, target)
        if isinstance(node, cst.Call):
            return self.call(node, out, target)
        if isinstance(node, cst.Attribute):
            return self.attribute(node, out, target)
        if isinstance(node, cst.Subscript):
            return self.subscript(node, out, target)
        if isinstance(node, cst.Tuple) and all(isinstance(e.value, (cst.Integer, cst.UnaryOperation))
                                               for e in node.elements):
            atoms = [self.expr(e.value, out) for e in node.elements]
            if all(isinstance(a, Const) for a in atoms):
                return Const(tuple(a.value for a in atoms))
        raise self.err(node, f"`{type(node).__name__}` expressions are not supported here",
                       EXPRESSION_HINTS.get(type(node).__name__,
                                            "use arithmetic, NumPy calls, indexing and calls to other Python functions"))

    def load_hint(self, base: str, index) -> str:
        parts = [base]
        for item in index:
            if isinstance(item, Var):
                parts.append(item.name)
            elif item is NEWAXIS:
                parts.append("new")
            elif isinstance(item, Const) and isinstance(item.value, int):
                parts.append(str(item.value))
            else:
                parts.append("s")
        return "_".join(parts)

    def name(self, node: cst.Name):
        n = node.value
        if n in self.trees:
            return self.trees[n]
        if n in self.locals and n not in self.objects:
            return Var(self.var(n))
        if self.enclosing is not None and n not in self.objects and self.enclosing.knows(n):
            return self.enclosing.name(node)
        if n in ("True", "False", "None"):
            return Const({"True": True, "False": False, "None": None}[n])
        return self.constant(node, self.static_ref(node))

    def constant(self, node, ref: "StaticRef"):
        """A number (or a string, to compare: `option_type == 'call'`) read from outside the function, or
        the hidden parameter of an array read there."""
        value = ref.obj
        if isinstance(value, (bool, int, float, str, np.floating, np.integer)) or value is None:
            return Const(value.item() if isinstance(value, np.generic) else value)
        if is_hidden_array(value) and ref.where is not None:
            return self.hidden_var(ref.where)
        what = cst.Module([]).code_for_node(node)
        kind = "function" if callable(value) else type(value).__name__
        raise self.err(node, f"`{what}` is a {kind}, which cannot be used as a number or array here",
                       "call it, pass it to a Python function that calls it, or read its array and number attributes")

    def is_float_number(self, atom) -> bool:
        """Is `atom` a float (a constant, or an argument passed a float), which `&`, `|`, `^` do not take?"""
        kind = self.kind_of(atom)
        return kind is not None and kind[0] == 0 and issubclass(kind[1], (float, np.floating))

    def unary(self, node, out, target):
        op = node.operator
        if isinstance(op, cst.Not):
            operand = self.expr(node.expression, out)
            if isinstance(operand, Const) and isinstance(operand.value, bool):
                return Const(not operand.value)
            return self.prim(out, "not", (operand,), target=target)
        if isinstance(op, (cst.Minus, cst.Plus)):
            a = self.expr(node.expression, out)
            if isinstance(a, Const) and isinstance(a.value, (int, float)):
                return Const(-a.value if isinstance(op, cst.Minus) else a.value)
            return self.prim(out, "neg" if isinstance(op, cst.Minus) else "pos", (a,), target=target)
        operand = self.expr(node.expression, out)  # `~mask`
        if self.is_float_number(operand):
            raise self.err(node, "operator `~` is not supported on floats", BITWISE_HINT)
        return self.prim(out, "invert", (operand,), target=target)

    def comparison(self, node: cst.Comparison, out, target):
        decided = self.static_comparison(node, out)
        if decided is not None:
            return decided
        left = self.expr(node.left, out)
        parts = []
        for comp in node.comparisons:
            op = COMPARE.get(type(comp.operator))
            if op is None:
                raise self.err(node, f"comparison `{_spelled(comp.operator)}` is not supported",
                               "compare numbers with ==, !=, <, <=, > or >=; s2sad specializes code on argument "
                               "structure, so decide `is None` / `in` outside the function")
            parts.append((op, comp.comparator))
        if len(parts) == 1 and parts[0][0] in ("eq", "ne") and self.names_a_container(parts[0][1]):
            return self.shape_comparison(left, parts[0], out, target)
        if len(parts) == 1:
            right = self.expr(parts[0][1], out)
            if isinstance(left, Const) and isinstance(right, Const):
                return Const(bool(COMPARED[parts[0][0]](left.value, right.value)))  # `x.ndim == 0`, folded
            return self.prim(out, parts[0][0], (left, right), target=target)
        result = self.temp("cmp")
        self.chain(left, parts, out, result)
        return Var(result)

    def shape_comparison(self, left, part, out, target):
        """`z.shape != (dim_z, 1)`: a shape against a tuple built in the function."""
        op, node = part
        items = self.value(node, out)
        if any(is_tree(i) for i in items):
            raise self.err(node, "compare a shape with a flat tuple of numbers")
        other = self.prim(out, "make_tuple", tuple(items), hint="dims")
        same = self.prim(out, "same_shape", (left, other), target=target if op == "eq" else None, hint="same")
        return same if op == "eq" else self.prim(out, "not", (same,), target=target)

    def static_comparison(self, node: cst.Comparison, out) -> Const | None:
        """`z is None`, `H is not None`, `name in ("tanh", "relu")`: decided when the code is generated, as
        an argument's structure is (a number or array is never None)."""
        if len(node.comparisons) != 1:
            return None
        op, right = node.comparisons[0].operator, node.comparisons[0].comparator
        if isinstance(op, (cst.Is, cst.IsNot)):
            sides = [n for n in (node.left, right) if not (isinstance(n, cst.Name) and n.value == "None")]
            if len(sides) > 1:
                return Const(self.same_object(*sides, out) == isinstance(op, cst.Is))
            none = not sides or _is_none(self.value(sides[0], out))
            return Const(none == isinstance(op, cst.Is))
        if isinstance(op, (cst.In, cst.NotIn)):
            item, container = self.value(node.left, out), self.value(right, out)
            if not (isinstance(item, Const) and is_tree(container)):
                return None
            keys = container if isinstance(container, dict) else flatten(container)[0]
            if not all(isinstance(k, (Const, str)) for k in keys):
                return None
            found = item.value in [k.value if isinstance(k, Const) else k for k in keys]
            return Const(found == isinstance(op, cst.In))
        if isinstance(op, (cst.Equal, cst.NotEqual)):
            return self.enum_comparison(node.left, right, isinstance(op, cst.Equal))
        return None

    def enum_comparison(self, left, right, equal: bool) -> Const | None:
        """`option_type == OptionTypes.EUROPEAN_CALL`: an enum member (an argument or a global) compared with
        another, decided when the code is generated, as `is` is."""
        refs = [self.static_ref(n) if isinstance(n, (cst.Name, cst.Attribute)) else None for n in (left, right)]
        if None in refs or not any(isinstance(r.obj, enum.Enum) for r in refs):
            return None
        return Const((refs[0].obj == refs[1].obj) == equal)

    def same_object(self, left, right, out) -> bool:
        """`F is K`: the same variable (or function, object, constant) while lowering. Two variables are two
        objects, as two arguments traced by JAX are."""
        a, b = self.value(left, out), self.value(right, out)
        if isinstance(a, StaticRef) and isinstance(b, StaticRef):
            return a.obj is b.obj
        if isinstance(a, Const) and isinstance(b, Const):
            return a.value is b.value
        return a == b if isinstance(a, Var) and isinstance(b, Var) else a is b

    def chain(self, left, parts, out, result):
        op, node = parts[0]
        right = self.expr(node, out)
        self.prim(out, op, (left, right), target=result)
        if parts[1:]:
            inner: list = []
            self.chain(right, parts[1:], inner, result)
            out.append(If(self.stable_test(Var(result), inner, out), inner, [], self.loc))

    def boolean(self, node: cst.BooleanOperation, out, target):
        result = self.temp("cond")
        self.expr(node.left, out, target=result)
        if isinstance(out[-1], Assign) and out[-1].target == result and isinstance(out[-1].value, Copy) \
                and isinstance(out[-1].value.value, Const):  # decided when the code is generated (argument types)
            left = out.pop().value.value
            decided = not left.value if isinstance(node.operator, cst.And) else bool(left.value)
            return left if decided else self.expr(node.right, out, target)
        inner: list = []
        self.expr(node.right, inner, target=result)
        test = self.stable_test(Var(result), inner, out)  # `inner` overwrites `result`
        if isinstance(node.operator, cst.And):
            out.append(If(test, inner, [], self.loc))
        else:
            out.append(If(test, [], inner, self.loc))
        return Var(result)

    def if_exp(self, node: cst.IfExp, out, target):
        test = self.expr(node.test, out)
        if isinstance(test, Const) and test.value is not None and not isinstance(test.value, str):
            return self.expr(node.body if test.value else node.orelse, out, target)  # decided now
        result = target or self.temp("choice")
        body, orelse = [], []
        self.expr(node.body, body, target=result)
        self.expr(node.orelse, orelse, target=result)
        out.append(If(self.stable_test(test, body + orelse, out), body, orelse, self.loc))
        return Var(result)

    def attribute(self, node: cst.Attribute, out, target):
        if (field := self.object_field(node, out)) is not _NOT_STATIC:
            return field
        ref = self.static_ref(node)
        if ref is not None:
            return self.constant(node, ref)
        folded = self.constant_attribute(node)
        if folded is not None:
            return folded
        if isinstance(self.tree_of(node.value), Record):
            return self.record_field(node)
        base = self.expr(node.value, out)
        attr = node.attr.value
        if attr == "ndim":
            return self.ndim_of(base, out, target)
        if attr in ATTRIBUTES:
            found = rules.lookup_object(ATTRIBUTES[attr])
            return self.prim(out, found[0], (base,), target=target, hint=f"{getattr(base, 'name', 'x')}_{attr}")
        return self.opaque_attribute(node, base, out, target)

    def ndim_of(self, base, out, target):
        """`x.ndim` / `np.ndim(x)`: a constant where the argument's type or the array's rank is known."""
        if self.kind_of(base) is not None:
            return Const(self.kind_of(base)[0])
        if isinstance(base, Var) and base.name in self.ranks:  # `z.ndim` of a row of an argument
            return Const(self.ranks[base.name])
        found = rules.lookup_object(np.ndim)
        return self.prim(out, found[0], (base,), target=target, hint=f"{getattr(base, 'name', 'x')}_ndim")

    def static_value(self, node):
        """The object an attribute chain such as `np.linalg.norm` names, or _NOT_STATIC."""
        ref = self.static_ref(node)
        return _NOT_STATIC if ref is None else ref.obj

    def static_ref(self, node) -> "StaticRef | None":
        """What a name or attribute chain not bound in the function stands for (a module, a function, a
        global array, an object's attribute) and where it lives; None for the function's own values."""
        if isinstance(node, cst.Name):
            if node.value in self.objects:
                return self.seen(self.objects[node.value])
            if node.value in self.locals or node.value in self.trees:
                return None
            if self.enclosing is not None and self.enclosing.knows(node.value):
                return self.enclosing.static_ref(node)
            try:
                obj = self.parsed.resolve(node.value)
            except KeyError:
                raise self.err(node, f"name `{node.value}` is not defined") from None
            return self.seen(StaticRef(obj, Hidden(self.parsed.fn, (("name", node.value),))))
        if isinstance(node, cst.Attribute):
            base = self.static_ref(node.value)
            if base is not None and isinstance(base.obj, LocalObject):
                return self.object_ref(node, base.obj)
            if base is None or not _has_static_attributes(base.obj):
                return None
            try:
                found = getattr(base.obj, node.attr.value)
            except AttributeError:
                owner = getattr(base.obj, "__name__", None) or f"this {type(base.obj).__name__}"
                raise self.err(node, f"`{node.attr.value}` is not an attribute of {owner}") from None
            from_name = isinstance(node.value, cst.Name) and node.value.value not in self.objects
            gencache.note(self.parsed.fn, _dotted(node), found if from_name or isinstance(
                base.obj, (types.ModuleType, type)) else _NOT_STATIC)
            return self.seen(StaticRef(found, base.where.then("attr", node.attr.value) if base.where else None))
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and self.is_static_key(node.slice[0].slice.value):  # `self.layers[0]`: an object in a list
            base = self.tree_of(node.value)
            try:
                item = base[self.static_key(node.slice[0].slice.value)] if is_tree(base) else None
            except (KeyError, IndexError, TypeError):
                return None
            return self.seen(item) if isinstance(item, StaticRef) else None
        return None

    # ------------------------------------------- objects built or changed in the function (objects.py)
    def seen(self, ref: StaticRef | None) -> StaticRef | None:
        """`ref`, or the LocalObject standing for its object where the function has assigned its attributes."""
        if ref is None or self.hidden is None or id(ref.obj) not in self.hidden.written:
            return ref
        return StaticRef(self.hidden.written[id(ref.obj)], ref.where)

    def local_object(self, node) -> LocalObject | None:
        """The object built or changed in the function that a name or attribute chain stands for."""
        if not isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
            return None
        ref = self.static_ref(node)
        return ref.obj if ref is not None and isinstance(ref.obj, LocalObject) else None

    def object_ref(self, node: cst.Attribute, obj: LocalObject) -> StaticRef | None:
        """`obj.name` where it is a function or object (a method, a callback stored on it, a class constant,
        an attribute of the outside object not assigned in the function); None for its values."""
        name = node.attr.value
        if name in obj.fields:
            found = obj.fields[name]
            return found if isinstance(found, StaticRef) else None
        outside = obj.outside
        if outside is not None and name in getattr(outside.obj, "__dict__", ()):
            return self.seen(StaticRef(getattr(outside.obj, name), outside.where and outside.where.then("attr", name)))
        found = obj.class_attribute(name)
        if found is MISSING:
            raise self.err(node, f"this {obj.cls.__name__} has no attribute `{name}` (assign it first)")
        if isinstance(found, property):
            return None
        return StaticRef(found, obj.where and obj.where.then("attr", name))

    def object_field(self, node, out):
        """`obj.name` of an object built or changed in the function, where it is a value (an atom or a
        static tree; a property's value); _NOT_STATIC otherwise."""
        obj = self.local_object(node.value) if isinstance(node, cst.Attribute) else None
        if obj is None:
            return _NOT_STATIC
        name = node.attr.value
        if name in obj.fields and not isinstance(obj.fields[name], StaticRef):
            return obj.fields[name]
        found = obj.class_attribute(name) if name not in obj.fields else None
        if isinstance(found, property) and found.fget is not None:
            return self.inline(cst.Call(node), found.fget, [StaticRef(obj, None)], out, None)
        return _NOT_STATIC

    def construct(self, node: cst.Call, ref: StaticRef, out):
        """`LayerNorm(4)`, `SimpleNamespace(F=F, Q=Q)`, `Params(w, b)`: a LocalObject (a Record for a
        namedtuple), its `__init__` inlined with it as `self`."""
        cls = ref.obj
        if is_namedtuple(cls):
            args = [self.value(a.value, out) for a in node.args if a.keyword is None]
            kwargs = {a.keyword.value: self.value(a.value, out) for a in node.args if a.keyword is not None}
            defaults = {k: self.outside_tree(v, None) for k, v in cls._field_defaults.items()}
            try:
                bound = inspect.signature(cls).bind(*args, **kwargs).arguments
                return Record([bound.get(f, defaults.get(f)) for f in cls._fields], cls._fields)
            except TypeError as exc:
                raise self.err(node, f"bad call to `{cls.__name__}`: {exc}") from None
        obj = LocalObject(cls, cls.__name__.lower(), ref.where)
        made = StaticRef(obj, None)
        if cls is types.SimpleNamespace:
            if any(a.keyword is None for a in node.args):
                raise self.err(node, "SimpleNamespace takes keyword arguments only")
            for a in node.args:
                self.set_attribute(obj, a.keyword.value, self.value(a.value, out), node, out)
            return made
        fields = dataclass_init(cls)
        if fields is not None:
            self.dataclass_init(node, obj, fields, out)
            post_init = getattr(cls, "__post_init__", None)
            if post_init is not None:
                self.inline(cst.Call(node.func), post_init, [made], out, None)
        elif cls.__init__ is not object.__init__:
            self.inline(node, cls.__init__, [made], out, None)
        elif node.args:
            raise self.err(node, f"`{cls.__name__}()` takes no arguments")
        return made

    def dataclass_init(self, node: cst.Call, obj: LocalObject, fields, out):
        """What a dataclass's generated `__init__` does: each field from its argument or its default."""
        taken = [f for f in fields if f.init]
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a for a in node.args if a.keyword is not None}
        if len(positional) > len(taken) or set(keywords) - {f.name for f in taken}:
            raise self.err(node, f"bad call to `{obj.cls.__name__}`: its fields are "
                                 f"{', '.join(f.name for f in taken)}")
        given = {f.name: a for f, a in zip(taken, positional)} | keywords
        for f in fields:
            if f.name in given:
                value = self.value(given[f.name].value, out)
            elif f.default is not dataclasses.MISSING:
                value = self.outside_tree(f.default, None)
            elif f.default_factory is not dataclasses.MISSING and not is_hidden_array(f.default_factory()):
                value = self.outside_tree(f.default_factory(), None)
            elif not f.init:  # `q: float = field(init=False)`: __init__ leaves it unset, __post_init__ may set it
                continue
            else:
                raise self.err(node, f"`{obj.cls.__name__}` needs its field `{f.name}` here",
                               "pass it, or give the field a number default")
            self.set_attribute(obj, f.name, value, node, out)

    def written_object(self, node) -> LocalObject:
        """The object whose attribute `node.attr = ...` assigns: one built in the function, or an outside
        plain object, from now on seen through a LocalObject (the outside object itself is left as it is)."""
        obj = self.local_object(node)
        if obj is not None:
            return obj
        ref = self.static_ref(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if ref is None or not _user_class(type(ref.obj)) or self.hidden is None:
            what = cst.Module([]).code_for_node(node)
            raise self.err(node, f"only attributes of objects can be assigned (`{what}` is not a plain object)",
                           "return the new value instead")
        obj = LocalObject(type(ref.obj), type(ref.obj).__name__.lower(), None, outside=ref)
        self.hidden.written[id(ref.obj)] = obj
        return obj

    def set_attribute(self, obj: LocalObject, name: str, value, node, out):
        """`obj.name = value`. A number or array gets a variable of its own: a new one in straight-line code,
        the same one where the assignment runs conditionally or repeatedly. A static value (an int, a
        string, a tuple, a function or object) is kept while lowering, and cannot change at run time."""
        old, conditional = obj.fields.get(name, MISSING), self.conditional()
        varying = isinstance(value, Var) or _is_number(value) and (
            isinstance(value.value, float) or (obj.cls, name) in self.hidden.varying)
        if conditional and _is_number(old) and type(old.value) is int and old != value:
            raise ChangesAtRunTime((obj.cls, name))  # `self.t += 1` in a loop: `t` is a variable after all
        if conditional and isinstance(old, Var) and isinstance(value, (Var, Const)):
            pass  # the attribute's own variable, assigned again
        elif varying and (not conditional or old is MISSING):
            old = Var(self.names.fresh(f"{obj.hint}_{name}"))
        elif conditional and old is not value and old != value and \
                (old is not MISSING or any(isinstance(a, Var) for a in flatten(value)[0])):
            raise self.err(node, f"attribute `{name}` would change from one static value to another at run time "
                                 "(in a branch or a loop)", "keep numbers and arrays in the attributes that change; "
                                                            "set the others before the branch or loop")
        else:
            obj.fields[name] = value
            return
        obj.fields[name] = old
        self.spelled.setdefault(old.name, f"self.{name}")
        if not (isinstance(value, Var) and value.name == old.name):
            self.emit(out, old.name, Copy(value))

    def super_method(self, node: cst.Attribute) -> StaticRef | None:
        """`super().__init__` in a method of an object built or changed in the function (None: object's)."""
        fn = self.stack[-1]
        start = defining_class(fn)
        first = self.parsed.node.params.params[0].name.value if self.parsed.node.params.params else None
        obj = self.local_object(cst.Name(first)) if first is not None and start is not None else None
        if obj is None:
            raise self.err(node, "super() is supported in methods of objects the function builds or changes")
        found = after_in_mro(obj.cls, start, node.attr.value)
        if isinstance(found, types.FunctionType):
            return StaticRef(types.MethodType(found, obj), None)
        if found is MISSING or found is object.__init__ and node.attr.value == "__init__":
            return None  # object's own __init__: nothing to do
        raise self.err(node, f"super().{node.attr.value} is not a method s2sad can inline")

    def kept(self, made: StaticRef) -> cst.Name:
        """A name no user code has, standing for a function or object a call made."""
        name = self.names.fresh("made")
        self.objects[name] = made
        return cst.Name(name)

    def makes_object(self, node) -> bool:
        """Is `node` a call that builds an object, or calls a Python function (which may return one)?"""
        if not isinstance(node, cst.Call) or isinstance(node.func, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and self.makes_object(node.func.value):
            return True  # `KDE(h).fit(x)`: a method of an object a call made
        ref = self.static_ref(node.func) if isinstance(node.func, (cst.Name, cst.Attribute)) else None
        built = ref is not None and _user_class(ref.obj) and rules.lookup_object(ref.obj) is None
        return built or self.calls_python_function(node)

    def callee_is(self, func_node, obj) -> bool:
        return self.static_value(func_node) is obj

    def call(self, node: cst.Call, out, target):
        if any(a.star for a in node.args):
            node = self.spread(node, out)
        if isinstance(node.func, cst.Call) and self.makes_object(node.func):  # `make_loss(k)(x)`, `Model(w)(x)`
            made = self.value(node.func, out)
            if isinstance(made, StaticRef):
                node = node.with_changes(func=self.kept(made))
        if isinstance(node.func, cst.Attribute) and self.makes_object(node.func.value):  # `KDE(h).fit(x)`
            made = self.value(node.func.value, out)
            if isinstance(made, StaticRef):
                node = node.with_changes(func=node.func.with_changes(value=self.kept(made)))
        if isinstance(node.func, cst.Call):  # `s2sad.grad(g, argnums=1)(x, y)`
            return self.apply(node, self.static_transform(node.func), [], out, target)
        if self.is_frozen_distribution(node.func):  # `norm(mu, s).logpdf(x)` is `norm.logpdf(x, mu, s)`
            frozen = node.func.value
            node = node.with_changes(func=node.func.with_changes(value=frozen.func), args=[*node.args, *frozen.args])
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call) and \
                self.callee_is(node.func.value.func, super):  # `super().__init__(d)`
            method = self.super_method(node.func)
            if method is None:
                return Const(None)
            return self.inline(node, method.obj.__func__, [StaticRef(method.obj.__self__, None)], out, target)
        ref = self.static_ref(node.func)
        fn = _NOT_STATIC if ref is None else ref.obj
        if isinstance(fn, LocalObject):  # `model(x)` of an object the function built, with a `__call__`
            ref = StaticRef(fn.class_attribute("__call__"), None)
            fn = ref.obj
        if (_user_class(fn) or is_namedtuple(fn)) and rules.lookup_object(fn) is None:
            return self.construct(node, ref, out)
        if isinstance(fn, NestedFunction):
            return self.inline_nested(node, fn, out, target)
        if fn is np.ndim and len(node.args) == 1 and node.args[0].keyword is None:  # as `x.ndim` reads it
            return self.ndim_of(self.expr(node.args[0].value, out), out, target)
        if (written := inlined.stand_in(fn)) is not None:  # scipy.linalg.cho_solve: NumPy written out
            return self.inline(node, written, [], out, target)
        if calls_its_call_method(fn):  # `loss_fn(x)` of an object with a Python `__call__`
            ref = StaticRef(fn.__call__, ref.where.then("attr", "__call__") if ref.where else None)
            fn = ref.obj
        if isinstance(fn, types.MethodType) and isinstance(unwrap(fn.__func__), types.FunctionType) \
                and rules.lookup_object(fn) is None and not _in_library(unwrap(fn.__func__)):  # (norm.cdf has a rule)
            owner = self.seen(StaticRef(fn.__self__, ref.where.then("attr", "__self__") if ref.where else None))
            return self.inline(node, unwrap(fn.__func__), [owner], out, target)
        if TRANSFORMATIONS.is_jvp(fn):
            return self.inline_jvp(node, out, target)
        if fn is _NOT_STATIC:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and \
                    isinstance(table := self.tree_of(node.func.value), dict):  # `params.get("eps", 1e-5)`
                return self.dict_get(node, table, out)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" and node.args:
                return self.item_at(node, out, target)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in METHODS:
                receiver = self.expr(node.func.value, out)
                method = node.func.attr.value
                positional = [a for a in node.args if a.keyword is None]
                if method in VARARG_METHODS and len(positional) > 1:
                    packed = cst.Arg(cst.Tuple([cst.Element(a.value) for a in positional]))
                    node = node.with_changes(args=[packed] + [a for a in node.args if a.keyword is not None])
                return self.apply(node, METHODS[method], [receiver], out, target)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "astype":
                return self.astype(node, out, target)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "pop" and not node.args \
                    and isinstance(node.func.value, cst.Name) and node.func.value.value in self.locals:
                return self.prim(out, "tape_pop", (Var(self.var(node.func.value.value)),), target=target,
                                 hint="popped")
            what = cst.Module([]).code_for_node(node.func)
            raise self.err(node, f"cannot call `{what}`: s2sad only calls NumPy/math functions with rules "
                                 "and other Python functions", METHOD_HINT)
        written = _output_argument(node, fn)
        if written is not None:
            return self.into_output(node, fn, written, out)
        result = self.apply(node, fn, [], out, target)
        return result

    def item_at(self, node: cst.Call, out, target):
        """`x.item(k)`, the k-th entry of x in C order, is `np.ravel(x)[k]`; `x.item(i, j)` is `x[i, j]`."""
        if any(a.keyword is not None or a.star for a in node.args):
            raise self.err(node, "write .item() with positions alone", "x.item(0), x.item(i, j)")
        receiver = self.expr(node.func.value, out)
        if len(node.args) > 1:
            base = receiver
        else:  # a NumPy number has .item(0) too
            base = self.prim(out, "ravel", (self.prim(out, "atleast_1d", (receiver,)),), hint="flat")
        positions = [cst.SubscriptElement(cst.Index(a.value)) for a in node.args]
        return self.load(cst.Subscript(node.func.value, positions), base, out, target)

    def dict_get(self, node: cst.Call, table: dict, out):
        if not 1 <= len(node.args) <= 2 or any(a.keyword for a in node.args):
            raise self.err(node, "dict.get takes a key and an optional default")
        key = self.static_key(node.args[0].value)
        if key in table:
            return table[key]
        return self.value(node.args[1].value, out) if len(node.args) == 2 else Const(None)

    def into_output(self, node: cst.Call, fn, written: cst.Arg, out):
        """`np.add(a, b, out)`, `np.sqrt(d, out=d)`, `np.dot(a, b, c)`: the result is written into the
        output array, and the call's value is that array, as NumPy does. `out=np.zeros_like(a)` is a fresh
        array; a ufunc's `where=mask` keeps the output's items where the mask is false."""
        local = isinstance(written.value, cst.Name) and written.value.value in self.locals
        fresh = isinstance(written.value, cst.Call) and self.static_value(written.value.func) in FRESH_OUTPUTS
        if not local and not fresh:
            raise self.err(written, "an output argument must be a local array variable (`out=d`) or a new array",
                           "assign the result instead: `d[:] = np.sqrt(d)`")
        where = next((a for a in node.args if a.keyword is not None and a.keyword.value == "where"), None)
        rest = node.with_changes(args=[a for a in node.args if a is not written and a is not where])
        mask = None if where is None else self.masked_inputs(where, rest, fn, out)
        result = self.apply(rest, fn, [], out, None) if mask is None else \
            self.apply(rest.with_changes(args=rest.args[fn.nin:]), fn, mask[1], out, None)
        if is_tree(result):
            raise self.err(written, "only functions with one result can write into an output argument")
        kept = Var(self.var(written.value.value)) if local else self.expr(written.value, out)
        if mask is not None:
            result = self.prim(out, "where", (mask[0], result, kept))
        if not local:
            return result
        out.append(Store(kept.name, (ir.Slice(None, None, None),), result, self.loc))
        return kept

    def masked_inputs(self, where: cst.Arg, call: cst.Call, fn, out):
        """`where=mask` of a ufunc: the mask, and the inputs with 1.0 where it is false, so that the items
        NumPy skips (`b == 0` in `np.divide(a, b, where=b != 0)`) send no inf or nan into the derivative."""
        inputs = [a for a in call.args[:getattr(fn, "nin", 0)] if a.keyword is None and not a.star]
        if not isinstance(fn, np.ufunc) or len(inputs) != fn.nin:
            raise self.err(where, "`where=` is an argument of NumPy's ufuncs, with their inputs given by position")
        mask = self.expr(where.value, out)
        return mask, [self.prim(out, "where", (mask, self.expr(a.value, out), Const(1.0)), hint="kept") for a in inputs]

    def spread(self, node: cst.Call, out) -> cst.Call:
        """`f(x, *args, **options)` with a static tuple and dict: one argument per item, each read from the
        lowered container (kept under a name no user code has)."""
        args = []
        for a in node.args:
            if not a.star:
                args.append(a)
                continue
            value = self.value(a.value, out)
            if not (isinstance(value, dict) if a.star == "**" else isinstance(value, (tuple, list))):
                kind = "dict" if a.star == "**" else "tuple or list"
                raise self.err(a, f"`{a.star}` unpacks a {kind} whose items s2sad knows when it generates code",
                               "pass the arguments one by one")
            name = self.names.fresh("spread")
            self.trees[name] = value
            items = list(value) if a.star == "**" else range(len(value))
            for key in items:
                index = cst.SimpleString(repr(key)) if a.star == "**" else cst.Integer(str(key))
                item = cst.Subscript(cst.Name(name), [cst.SubscriptElement(cst.Index(index))])
                args.append(cst.Arg(item, keyword=cst.Name(key) if a.star == "**" else None))
        return node.with_changes(args=args)

    def is_frozen_distribution(self, func) -> bool:
        """`dist(...).method`, where `dist` is an object whose methods have rules (scipy.stats.norm)."""
        return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call) \
            and rules.registry.is_namespace(self.static_value(func.value.func))

    def static_transform(self, node: cst.Call):
        """Evaluate `s2sad.grad(g, ...)` now: its generated wrapper is then inlined like any callee."""
        fn = self.static_value(node.func)
        if fn not in TRANSFORMATIONS.evaluated:
            raise self.err(node, "a called expression must be a function name, `s2sad.grad(...)`, "
                                 "`s2sad.value_and_grad(...)` or `s2sad.vmap(...)`")
        try:
            args = [self.static_arg(a.value) for a in node.args if a.keyword is None]
            kwargs = {a.keyword.value: self.static_arg(a.value) for a in node.args if a.keyword is not None}
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise self.err(node, f"bad transformation inside the function: {exc}") from None

    def static_arg(self, node):
        """A value known when the code is generated: a global/closure name, a number, a tuple of them."""
        if isinstance(node, (cst.Tuple, cst.List)):
            return tuple(self.static_arg(e.value) for e in node.elements)
        if isinstance(node, (cst.Integer, cst.Float)):
            return node.evaluated_value
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return -self.static_arg(node.expression)
        value = self.static_value(node)
        if value is _NOT_STATIC:
            raise self.err(node, "arguments of a transformation must be known when the code is generated "
                                 "(a function, an int, a tuple of ints, True/False), not local values")
        return value

    def inline_jvp(self, node: cst.Call, out, target):
        """`s2sad.jvp(f, (x, ...), (dx, ...))`: inline f's generated tangent function."""
        if len(node.args) != 3 or any(a.keyword for a in node.args) or \
                not all(isinstance(a.value, cst.Tuple) for a in node.args[1:]):
            raise self.err(node, "inside a differentiated function, write `s2sad.jvp(f, (x, ...), (dx, ...))`")
        fn = self.static_arg(node.args[0].value)
        primals, tangents = (node.args[i].value.elements for i in (1, 2))
        if len(primals) != len(tangents):
            raise self.err(node, "jvp needs as many tangents as primals")
        n = len(primals)
        g = TRANSFORMATIONS.tangent(fn, n)
        if g.fn.returns_tuple:
            raise self.err(node, "jvp of a tuple-valued function is not supported inside a differentiated function")
        tangent_fn = getattr(load_module(g.source, g.stem, "python"), g.derivative)
        call = node.with_changes(func=cst.Name(tangent_fn.__name__), args=[
            cst.Arg(e.value) for e in list(primals) + list(tangents)])
        return self.inline(call, tangent_fn, [], out, target)

    def apply(self, node, fn, leading, out, target):
        if not leading and any(fn is b for b in (max, min, sum, any, all, math.prod, list, tuple, dict)):
            return self.builtin_call(node, fn, out, target)
        if fn is len and len(node.args) == 1 and not leading:
            value = self.value(node.args[0].value, out)
            if is_tree(value):
                return Const(len(value))
            return self.prim(out, "len", (value,), target=target, hint="n")
        if fn is range:  # `p[range(m), y]`: the integers as an index array
            fn = np.arange
        if isinstance(fn, Custom):
            if fn in self.plain:
                return self.inline(node, fn.fun, leading, out, target)
            if any(a.keyword for a in node.args) or leading:
                raise self.err(node, f"call custom function `{fn.name}` with positional arguments")
            args = [self.expr(a.value, out) for a in node.args]
            if len(args) != len(fn.params):
                raise self.err(node, f"`{fn.name}` takes {len(fn.params)} arguments, got {len(args)}")
            return self.emit(out, target or self.temp(fn.name), Prim(fn.rule(), tuple(args)))
        if (fn is np.where or fn is np.nonzero) and len(node.args) == 1 and not leading:
            return self.positions(node.args[0].value, out)
        if fn is np.where and len(node.args) == 3 and not leading and not any(a.keyword or a.star for a in node.args):
            return self.guarded_where(node, out, target)
        if fn in (np.diag_indices, np.diag_indices_from) and not leading:
            return self.diagonal_positions(node, fn, out)
        if fn in TRIANGLES and not leading:
            return self.triangle_positions(node, fn, out)
        if fn in (np.asarray, np.asanyarray) and len(node.args) == 1 and self.names_a_container(node.args[0].value):
            fn = np.array  # `np.asarray(args)` of a tuple of numbers (`*args`): a new array
        if fn in SEQUENCE_CALLS:
            return self.sequence_call(node, fn, out, target)
        if fn is np.linalg.slogdet:  # a tuple-valued primitive: two primitives, paired statically
            if len(node.args) != 1 or node.args[0].keyword is not None:
                raise self.err(node, "np.linalg.slogdet takes one matrix")
            a = self.expr(node.args[0].value, out)
            return (self.prim(out, "slogdet_sign", (a,), hint="sign"),
                    self.prim(out, "logabsdet", (a,), hint="logdet"))
        if fn is np.ndarray:  # `np.ndarray(shape, dtype)` makes an uninitialized array, as np.empty does
            fn = np.empty
        if fn in SHAPE_FIRST and node.args and isinstance(node.args[0].value, cst.List):  # np.zeros([n, m])
            shape = node.args[0].value
            node = node.with_changes(args=[node.args[0].with_changes(value=cst.Tuple(shape.elements)), *node.args[1:]])
        if fn is np.isscalar and len(node.args) == 1 and not leading and node.args[0].keyword is None:
            return self.isscalar_call(node.args[0].value, out, target)
        if fn is np.float_power and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args):
            base = self.prim(out, "as_float", (self.prim_arg(node.args[0].value, out),), hint="base")
            return self.prim(out, "pow", (base, self.prim_arg(node.args[1].value, out)), target=target)  # in float64
        found = rules.lookup_object(fn)
        if found is not None:
            if any(a.star for a in node.args):
                raise self.err(node, "`*args` / `**kwargs` in calls are not supported")
            args = leading + [self.prim_arg(a.value, out) for a in node.args if a.keyword is None]
            kwargs = [(a.keyword.value, self.prim_arg(a.value, out)) for a in node.args if a.keyword is not None
                      and a.keyword.value not in TUNING_KEYWORDS.get(fn, ())]
            rule = found[0]
            if rule.operator and kwargs:
                op = rules.registry.OPERATORS[rule.operator][0]
                raise self.err(node, f"{found[1]}() with keyword arguments ({kwargs[0][0]}=...) is not supported",
                               f"write the operator `{op}` and assign the result")
            if rule.differentiable:
                t = rule.template()
                n_pos, given = len(t.params) - 2, len(args) + len(kwargs)
                required = [p for p in t.params[2 + len(args):] if p not in t.defaults and p not in dict(kwargs)]
                if len(args) > n_pos:
                    raise self.err(node, f"{found[1]}() takes at most {n_pos} positional arguments here")
                if required and given < n_pos:
                    raise self.err(node, f"{found[1]}() is missing argument(s) {', '.join(required)}")
                args, kwargs = _keywords_in_place(t, args, kwargs)
            folded = _folded(fn, args, kwargs)
            if folded is not None:  # `dot(B, u)` of filterpy's defaults B=1, u=0: a number now
                return self.expr_result(folded, out, target)
            if rule.name == "squeeze" and len(args) == 1 and not kwargs:
                args.append(self.unit_axes_of(args[0]))
                if args[1].value == ():  # no axis of length one: the array itself
                    return self.expr_result(args[0], out, target)
            return self.emit(out, target or self.temp(rule.name), Prim(rule, tuple(args), tuple(kwargs), found[1]))
        scalar_code = getattr(getattr(fn, "_dispatcher", None), "py_func", None)  # a numba.vectorize ufunc
        if isinstance(scalar_code, types.FunctionType) and _gufunc_layout(fn) is not None:
            return self.gufunc_call(node, fn, scalar_code, leading, out, target)
        if isinstance(scalar_code, types.FunctionType):
            return self.vectorized(node, scalar_code, leading, out, target)
        inner = unwrap(fn)
        if isinstance(inner, types.FunctionType) and not _in_library(inner):
            return self.inline(node, inner, leading, out, target)
        return self.opaque_call(node, fn, out, target)

    def vectorized(self, node: cst.Call, fn, leading, out, target):
        """A `@numba.vectorize` function: its scalar code inlined on numbers, and on arrays run item by item
        in a loop over the items (operands of one shape, or numbers), as the ufunc numba builds does."""
        if any(a.keyword or a.star for a in node.args):
            raise self.err(node, f"call the vectorized function `{fn.__name__}` with positional arguments")
        args = leading + [self.expr(a.value, out) for a in node.args]
        ranks = [0 if isinstance(a, Const) else self.ranks.get(a.name) for a in args]
        if None in ranks and isinstance(self.kinds, UnknownKinds):
            self.kind_of(args[ranks.index(None)], required=True)
        if None in ranks:
            raise self.err(node, f"`{fn.__name__}` is vectorized: s2sad needs to know which operands are arrays",
                           "pass arrays made with NumPy, or call grad(f) on arguments")
        call = node.with_changes(args=[])
        if not any(ranks):
            return self.inline(call, fn, args, out, target)
        arrays = [a for a, r in zip(args, ranks) if r]
        shape = self.prim(out, "shape", (arrays[0],))
        flat = {a.name: self.prim(out, "ravel", (a if k == 0 else self.prim(out, "broadcast_to", (a, shape)),),
                                  hint=a.name + "_items") for k, a in enumerate(arrays)}
        n = self.prim(out, "len", (flat[arrays[0].name],), hint="n")
        results = self.prim(out, "empty", (n,), hint=fn.__name__ + "_items")
        counter = self.names.fresh("k")
        self.ints.add(counter)
        body: list = []
        self.branch_depth += 1
        self.nested += 1
        try:
            items = [self.emit(body, self.temp(a.name + "_item"), Load(flat[a.name], (Var(counter),)))
                     if r else a for a, r in zip(args, ranks)]
            value = self.inline(call, fn, items, body, None)
            body.append(Store(results.name, (Var(counter),), self.refuse_non_atom(node, value), self.loc))
        finally:
            self.branch_depth -= 1
            self.nested -= 1
        out.append(For(counter, Const(0), n, Const(1), body, self.loc))
        return self.prim(out, "reshape", (results, shape), target=target, hint=fn.__name__)

    def gufunc_call(self, node: cst.Call, fn, code, leading, out, target):
        """A `@numba.guvectorize` function called with its inputs, as NumPy calls a gufunc: its outputs made here
        (float64, of the core shapes its layout names), and its Python code run on the core of each operand,
        once, or for each item along one leading loop axis. A `()` operand reaches the code as an array of one
        item, as numba passes it."""
        ins, outs = _gufunc_layout(fn)
        name = getattr(fn, "__name__", "gufunc")
        if any(a.keyword or a.star for a in node.args):
            raise self.err(node, f"call the @guvectorize function `{name}` with positional arguments")
        if len(leading) + len(node.args) != len(ins):
            raise self.err(node, f"`{name}` is a @guvectorize function: s2sad calls it with its {len(ins)} input(s) "
                                 f"and returns its output(s), as NumPy calls a gufunc",
                           "leave the output arguments out: `y = f(x)` rather than `f(x, y)`")
        if any(t.split("->")[1] != "d" * len(outs) for t in fn.types):
            raise self.err(node, f"`{name}` is a @guvectorize function whose outputs are not all float64",
                           "declare float64 outputs")
        args = leading + [self.expr(a.value, out) for a in node.args]
        ranks = [0 if isinstance(a, Const) else self.ranks.get(a.name) for a in args]
        if None in ranks and isinstance(self.kinds, UnknownKinds):
            self.kind_of(args[ranks.index(None)], required=True)
        if None in ranks:
            raise self.err(node, f"`{name}` is a gufunc: s2sad needs to know the ranks of its operands",
                           "pass arrays made with NumPy, or call grad(f) on arguments")
        loops = [r - len(core) for r, core in zip(ranks, ins)]
        lead = max(loops)
        if min(loops) < 0 or lead > 1 or any(k not in (0, lead) for k in loops):
            raise self.err(node, f"s2sad runs the gufunc `{name}` on operands with at most one leading axis beyond "
                                 "the core axes of its layout, that axis the same for all that have it",
                           "reshape the operands to (n, *core), or loop over them")
        sizes: dict = {}
        for a, core, k in zip(args, ins, loops):
            if any(d not in sizes for d in core):
                shape = self.prim(out, "shape", (a,), hint="shape")
                for axis, d in enumerate(core):
                    sizes.setdefault(d, self.emit(out, self.temp(f"{d}_dim"), Load(shape, (Const(k + axis),))))
        if any(d not in sizes for core in outs for d in core):
            raise self.err(node, f"an output axis of the gufunc `{name}` is named by no input, so its length is "
                                 "not known", "call it with an output argument of your own, outside s2sad")

        declared = _gufunc_operand_types(fn)
        as_array = [not core and (declared is None or hasattr(declared[i], "ndim")) for i, core in enumerate(ins)]

        def one_item(v, body):  # a `()` operand declared an array (`intp[:]`): an array of one item
            return self.prim(body, "expand_dims_any", (v, Const(0)), hint="item")

        def made_outputs(body, extra=()):
            return [self.prim(body, "zeros", (self.prim(body, "make_tuple", (*extra, *(sizes[d] for d in core)),
                                                        hint="dims"),), hint=f"{name}_out")
                    if core or extra else self.prim(body, "zeros", (Const(1),), hint=f"{name}_out") for core in outs]

        call = node.with_changes(args=[])
        fixed = [one_item(a, out) if wrap and not k else a for a, wrap, k in zip(args, as_array, loops)]
        if not lead:
            made = made_outputs(out)
            self.inline(call, code, fixed + made, out, None)
            results = [m if core else self.emit(out, self.temp(name), Load(m, (Const(0),))) for m, core in zip(made, outs)]
        else:
            n = self.prim(out, "len", (args[loops.index(1)],), hint="n")
            results = made_outputs(out, (n,))
            counter = self.names.fresh("k")
            self.ints.add(counter)
            body: list = []
            with self.inside_loop():
                items = [self.emit(body, self.temp(f"{a.name}_row"), Load(a, (Var(counter),))) if k else f
                         for a, f, k in zip(args, fixed, loops)]
                items = [one_item(v, body) if k and wrap else v for v, wrap, k in zip(items, as_array, loops)]
                made = made_outputs(body)
                self.inline(call, code, items + made, body, None)
                for r, m, core in zip(results, made, outs):
                    value = m if core else self.emit(body, self.temp(name), Load(m, (Const(0),)))
                    body.append(Store(r.name, (Var(counter),), value, self.loc))
            out.append(For(counter, Const(0), n, Const(1), body, self.loc))
        value = results[0] if len(results) == 1 else tuple(results)
        return self.emit(out, target, Copy(value)) if target is not None and len(results) == 1 else value

    def isscalar_call(self, node, out, target):
        """`np.isscalar(H)`: decided when the code is generated for numbers, containers and arrays (filterpy's
        `if np.isscalar(H): H = np.array([H])` then keeps one side, and numba sees one rank for `H`)."""
        value = self.value(node, out)
        if is_tree(value) or isinstance(value, Const):
            return self.expr_result(Const(bool(np.isscalar(value.value)) if isinstance(value, Const) else False),
                                    out, target)
        kind = self.kind_of(value) if value.name in self.arguments else None
        if value.name in self.arrays or (self.ranks.get(value.name) or 0) > 0 or kind is not None and kind[0] > 0:
            return self.expr_result(Const(False), out, target)
        return self.prim(out, "isscalar", (value,), target=target)

    def prim_arg(self, node, out):
        """An operand of a primitive: an atom; a tuple of ints (a shape, axes) becomes one value."""
        dtype = self.static_dtype(node)
        if dtype is not None:
            return Const(dtype)
        self.refuse_generator(node)
        node = self.list_call_as_comprehension(node)
        if isinstance(node, cst.ListComp):  # NumPy makes the list an array anyway
            if not self.is_static_comprehension(node):
                return self.filled_array(node, out, None)
            return self.array_of(node, self.list_comp(node, out), out)
        value = self.value(node, out)
        if not is_tree(value):
            return value
        leaves, _ = flatten(value)
        if all(isinstance(v, Const) for v in leaves) and not isinstance(value, dict):
            return Const(_constant_tuple(value))  # e.g. pad widths ((1, 0), (0, 2))
        if type(value) is tuple and all(type(v) is tuple and not any(is_tree(w) for w in v) for v in value):
            # pad widths from run-time ints: `((0, 0), (pad, pad))`
            pairs = tuple(self.prim(out, "make_tuple", tuple(v), hint="dims") for v in value)
            return self.prim(out, "make_tuple", pairs, hint="dims")
        if not isinstance(value, (tuple, list)) or any(is_tree(v) for v in value):
            raise self.err(node, "a NumPy function takes numbers, arrays, or a tuple of ints here")
        if type(value) is list:  # `np.sum([1.0, a * a, b])`: NumPy makes a list an array (a tuple is a shape)
            return self.array_of(node, value, out)
        return self.prim(out, "make_tuple", tuple(value), hint="dims")

    def guarded_where(self, node: cst.Call, out, target):
        """`np.where(x > 0, np.sqrt(x), 0.0)`: a side that may divide by zero or leave a function's domain
        (`/`, sqrt, log, ...) and is computed item by item reads its variables as 1.0 where the other side is
        picked. NumPy's result is the same, and the derivative gets 0 there, not `0 * inf` (nan)."""
        cond = self.expr(node.args[0].value, out)
        sides = []
        for k, arg in enumerate(node.args[1:]):
            names = self.guarded_names(arg.value)
            saved = {n: self.scope[n] for n in names}
            for n in names:
                picked = (cond, Var(saved[n]), Const(1.0)) if k == 0 else (cond, Const(1.0), Var(saved[n]))
                self.scope[n] = self.prim(out, "where", picked, hint=f"{n}_kept").name
            try:
                sides.append(self.expr(arg.value, out))
            finally:
                self.scope.update(saved)
        return self.prim(out, "where", (cond, *sides), target=target)

    def guarded_names(self, node) -> set[str]:
        """The local variables of an np.where side that is computed item by item and may be singular; none
        for any other side."""
        names, singular = set(), False
        for n in _walk(node):
            if isinstance(n, cst.Call):
                fn = self.static_value(n.func)
                found = rules.lookup_object(fn) if callable(fn) else None
                if found is None or not pointwise(found[0]) or any(a.keyword or a.star for a in n.args):
                    return set()
                singular |= found[0].singular
            elif isinstance(n, cst.BinaryOperation):
                if not isinstance(n.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)):
                    return set()
                singular |= isinstance(n.operator, (cst.Divide, cst.Power))
            elif isinstance(n, (cst.Subscript, cst.Lambda, cst.Comparison, cst.BooleanOperation, cst.IfExp,
                                cst.ListComp, cst.GeneratorExp, cst.Tuple, cst.List, cst.Dict)):
                return set()
            elif isinstance(n, cst.Name) and n.value in self.scope and n.value not in self.trees:
                names.add(n.value)
        return {n for n in names if self.scope[n] not in self.ints} if singular else set()

    def positions(self, node, out) -> "Positions":
        """`np.where(c)` / `np.nonzero(c)`: the index arrays of c's true (nonzero) items. s2sad keeps the
        condition: `x[np.where(c)]` reads and writes what the boolean mask `x[c]` does, in the same order."""
        mask = self.expr(node, out)
        if not isinstance(node, cst.Comparison):
            mask = self.prim(out, "ne", (mask, Const(0)), hint="nonzero")
        return Positions(mask)

    def diagonal_positions(self, node, fn, out) -> "Positions":
        """`np.diag_indices(n, ndim=2)` / `np.diag_indices_from(a)`: a main diagonal's index arrays, kept as the
        boolean mask that reads and writes the same items in the same order, as np.where's are (numba lacks both)."""
        if not node.args or any(a.keyword or a.star for a in node.args) or len(node.args) > 1 + (fn is np.diag_indices):
            raise self.err(node, "write np.diag_indices(n), np.diag_indices(n, ndim) or np.diag_indices_from(a), "
                                 "with positional arguments")
        first = self.expr(node.args[0].value, out)
        if fn is np.diag_indices_from:
            return Positions(self.prim(out, "diagonal_mask", (self.prim(out, "shape", (first,)),), hint="diagonal"))
        ndim = self.expr(node.args[1].value, out) if len(node.args) == 2 else Const(2)
        if not (isinstance(ndim, Const) and type(ndim.value) is int):
            raise self.err(node.args[1], "np.diag_indices' ndim must be a constant int")
        shape = self.prim(out, "make_tuple", (first,) * ndim.value, hint="shape")
        return Positions(self.prim(out, "diagonal_mask", (shape,), hint="diagonal"))

    def triangle_positions(self, node, fn, out) -> "Positions":
        """`np.triu_indices(n, k=0, m=None)`, `np.tril_indices_from(a, k=0)`, ...: a triangle's index arrays,
        kept as the boolean mask that picks the same items in the same (C) order."""
        try:
            bound = inspect.signature(fn).bind(*[a.value for a in node.args if a.keyword is None],
                                               **{a.keyword.value: a.value for a in node.args if a.keyword})
        except TypeError as exc:
            raise self.err(node, f"{fn.__name__}(...): {exc}") from None
        args = {name: self.expr(value, out) for name, value in bound.arguments.items()}
        k = args.get("k", Const(0))
        if "arr" in args:
            n, m = self.dims_of(self.prim(out, "shape", (args["arr"],), hint="shape"), 2, out)
        else:
            n = args["n"]
            m = args.get("m", Const(None))
            m = n if m == Const(None) else m
        upper = Const(fn in (np.triu_indices, np.triu_indices_from))
        return Positions(self.prim(out, "triangle_mask", (n, m, k, upper), hint="triangle"))

    def names_a_container(self, node) -> bool:
        return isinstance(node, (cst.Tuple, cst.List)) or isinstance(node, cst.Name) and node.value in self.trees \
            and is_tree(self.trees[node.value])

    def sequence_call(self, node: cst.Call, fn, out, target):
        """np.concatenate / stack / hstack / vstack / array of a tuple or list, and np.split."""
        if fn is np.split:
            return self.split(node, out)
        if not node.args or node.args[0].keyword is not None:
            raise self.err(node, "pass the arrays as a tuple or list first")
        first = self.list_call_as_comprehension(node.args[0].value)
        self.refuse_generator(first)
        if fn in (np.array, np.stack) and len(node.args) == 1 and isinstance(first, cst.ListComp) \
                and not self.is_static_comprehension(first):
            return self.filled_array(first, out, target)
        items = self.value(first, out)
        as_float = fn is np.array and self.float_dtype(node)
        if as_float:
            node = node.with_changes(args=node.args[:1])  # `dtype=float`: what stacking numbers gives
        if fn is np.array and isinstance(items, Var) and len(node.args) == 1:  # np.array(x) of an array: a copy
            rule, spelled = rules.lookup_object(np.copy)
            return self.emit(out, target or self.temp("array"), Prim(rule, (items,), (), spelled))
        if fn is np.array and len(node.args) == 1 and is_tree(items) and any(is_tree(i) for i in items):
            return self.nested_array(node, items, out, target, as_float)
        if isinstance(items, (tuple, list)) and fn is not np.array:  # `np.concatenate(([0.0], np.cumsum(x)))`
            items = [self.nested_array(node, i, out, None) if _numbers_tree(i) else i for i in items]
        if not isinstance(items, (tuple, list)) or not items or any(is_tree(i) for i in items):
            raise self.err(node, "pass a tuple or list of arrays (a literal, or one built in the function)",
                           "an item may also be a list of numbers, `[0.0]`" if isinstance(items, (tuple, list))
                           else "")
        axis_nodes = [a.value for a in node.args[1:] if a.keyword is None or a.keyword.value == "axis"]
        axis = self.expr(axis_nodes[0], out) if axis_nodes else Const(0)
        if fn is np.array:
            if len(node.args) > 1:
                raise self.err(node, "np.array([...]) of numbers or arrays takes no other arguments here")
            fn = np.stack
        if fn in (np.stack, np.array):
            items = [self.prim(out, "expand_dims_any", (i, axis), hint="item") for i in items]
        elif fn is np.vstack:
            items, axis = [self.prim(out, "atleast_2d", (i,), hint="row") for i in items], Const(0)
        elif fn is np.hstack:
            items = [self.prim(out, "atleast_1d", (i,), hint="item") for i in items]
            axis = self.prim(out, "hstack_axis", (items[0],), hint="axis")
        result = items[0]
        for item in items[1:]:
            result = self.prim(out, "concatenate2", (result, item, axis), hint="joined")
        if target is not None:
            return self.emit(out, target, Copy(result))
        return result

    def float_dtype(self, node: cst.Call) -> bool:
        """Does `np.array(rows, dtype=...)` ask for float64?"""
        dtype = [a.value for a in node.args[1:] if a.keyword is None or a.keyword.value == "dtype"]
        return len(node.args) == 2 and len(dtype) == 1 and self.static_dtype(dtype[0]) == np.float64

    def nested_array(self, node: cst.Call, rows, out, target, as_float=False):
        """`np.array([[c, -s], [s, c]])`: each row made an array, then the rows stacked. Rows of numbers
        known when the code is generated are one constant table."""
        leaves = flatten(rows)[0]
        if all(isinstance(a, Const) and type(a.value) in (int, float, bool) for a in leaves):
            if as_float:
                rows = unflatten(flatten(rows)[1], [Const(float(a.value)) for a in leaves])
            table = self.constant_table(node, rows, out)
            return self.prim(out, "asarray", (table,), target=target, hint="array")
        if len({len(r) if is_tree(r) else None for r in rows}) != 1:
            raise self.err(node, "np.array([...]) of rows needs rows of equal length")
        made = [self.nested_array(node, r, out, None) if is_tree(r) and any(is_tree(i) for i in r)
                else self.stack_items(r, out) if is_tree(r) else r for r in rows]
        result = self.stack_items(made, out)
        return self.emit(out, target, Copy(result)) if target is not None else result

    def stack_items(self, items, out):
        """np.stack(items) of numbers or arrays of one shape, along a new first axis."""
        items = [self.prim(out, "expand_dims_any", (i, Const(0)), hint="item") for i in items]
        result = items[0]
        for item in items[1:]:
            result = self.prim(out, "concatenate2", (result, item, Const(0)), hint="joined")
        return result

    def split(self, node: cst.Call, out):
        """np.split(x, n) / np.split(x, [i, j]) along axis 0: a tuple of slices."""
        if len(node.args) != 2 or node.args[1].keyword is not None:
            raise self.err(node, "np.split(x, sections) is supported along axis 0")
        x = self.expr(node.args[0].value, out)
        spec = node.args[1].value
        if isinstance(spec, (cst.List, cst.Tuple)):
            cuts = [Const(self.static_key(e.value)) for e in spec.elements]
            bounds = [None] + cuts + [None]
        else:
            sections = self.static_key(spec)
            n = self.prim(out, "len", (x,), hint="n")
            step = self.prim(out, "floordiv", (n, Const(sections)), hint="part")
            bounds = [None] + [self.prim(out, "mul", (step, Const(k)), hint="cut") for k in range(1, sections)] + [None]
        return tuple(self.emit(out, self.temp(f"{x.name}_part"), Load(x, (Slice(lo, hi, None),)))
                     for lo, hi in zip(bounds[:-1], bounds[1:]))

    def inline(self, node, fn, leading, out, target):
        args = leading + [self.value(a.value, out) for a in node.args if a.keyword is None]
        kwargs = {a.keyword.value: self.value(a.value, out) for a in node.args if a.keyword is not None}
        if fn in self.stack:
            self.check_recursion(node, fn, args + list(kwargs.values()))
        parsed = parse_function(fn)
        mentioned = user_names(parsed.node)
        self.names.taken |= mentioned  # fresh temps must not shadow the callee's globals
        self.hidden.free |= mentioned - self.hidden.own  # fresh never hands these out: a hidden parameter may
        callee = Lowerer(parsed, self.names, self.temps, self.stack + [fn], plain=self.plain, spelled=self.spelled,
                         hidden=self.hidden, arrays=self.arrays, elements=self.elements, exits=self.exits, kinds=self.kinds, ints=self.ints, views=self.views, ranks=self.ranks, units=self.units, lengths=self.lengths,
                         arguments=self.arguments, outer_conditional=self.conditional())
        callee.loc = self.loc
        try:
            args = self.with_hidden(fn, args)
            bound = _bind(fn, args, kwargs)
        except TypeError as exc:
            raise self.err(node, f"bad call to `{fn.__name__}`: {exc}") from None
        self.lists_to_arrays(node, bound, _written_at_run_time(parsed.node), out)
        return self.result_of(callee, callee.lower_body(bound, out), out, target)

    def lists_to_arrays(self, node: cst.Call, bound: dict, written: set, out):
        """A list the callee writes item by item in a loop (`kernel(w, ...)` with `w = [0.0] * n`, as
        polybench's list kernels do): an array, for the callee and, under the same name, for the caller."""
        for param in written & set(bound):
            items = bound[param]
            if not isinstance(items, list):
                continue
            bound[param] = self.array_of_list(node, items, out)
            for arg in node.args:
                if isinstance(arg.value, cst.Name) and self.trees.get(arg.value.value) is items:
                    del self.trees[arg.value.value]
                    self.bind(arg.value, bound[param], out)
                    bound[param] = Var(self.var(arg.value.value))

    def inline_nested(self, node, fn: "NestedFunction", out, target):
        """A call of a `def` or `lambda` made inside the function: inlined, its free names read in the
        function that made it, as they are when it is called."""
        if fn in self.stack:
            raise self.err(node, f"recursive call to `{fn.name}` is not supported", "write it as a loop")
        args = [self.value(a.value, out) for a in node.args if a.keyword is None]
        kwargs = {a.keyword.value: self.value(a.value, out) for a in node.args if a.keyword is not None}
        maker = fn.enclosing
        parsed = dataclasses.replace(maker.parsed, node=fn.node, name=fn.name, positions=fn.positions)
        callee = Lowerer(parsed, self.names, self.temps, self.stack + [fn], plain=self.plain, spelled=self.spelled,
                         hidden=self.hidden, enclosing=maker, arrays=self.arrays, elements=self.elements, exits=self.exits, kinds=self.kinds, ints=self.ints, views=self.views, ranks=self.ranks, units=self.units, lengths=self.lengths,
                         arguments=self.arguments, outer_conditional=self.conditional())
        callee.loc = self.loc
        try:
            bound = _bind_parameters(fn.node, args, kwargs)
        except TypeError as exc:
            raise self.err(node, f"bad call to `{fn.name}`: {exc}") from None
        for name, default in list(bound.items()):
            if isinstance(default, cst.BaseExpression):  # a default: evaluated where the function was made
                bound[name] = maker.value(default, out)
        return self.result_of(callee, callee.lower_body(bound, out), out, target)

    def result_of(self, callee: "Lowerer", outputs, out, target):
        """What an inlined call gives its caller."""
        if callee.ret.static is not None:
            return callee.ret.static
        if not outputs:  # a helper that returns nothing: it ran for its writes into the caller's arrays
            return Const(None)
        if callee.ret.is_tuple:
            return unflatten(callee.ret.shape, [Var(o) for o in outputs])
        result = Var(outputs[0])
        if target is not None:
            return self.emit(out, target, Copy(result))
        return result

    def knows(self, name: str) -> bool:
        """Is `name` bound in this function (or in the one that made it)?"""
        return name in self.locals or name in self.trees or name in self.objects or \
            (self.enclosing is not None and self.enclosing.knows(name))

    def with_hidden(self, fn, args: list) -> list:
        """`args` with the hidden parameters of generated code (hidden.py) put in their places."""
        marked = dict(hidden.marked(fn))
        if not marked:
            return args
        given = iter(args)
        placed = [Var(self.hidden.var(marked[p])) if p in marked else next(given, _NOT_STATIC)
                  for p in fn.__code__.co_varnames[:fn.__code__.co_argcount]]
        return [a for a in placed if a is not _NOT_STATIC] + list(given)

    def unpacked_positions(self, target, positions: Positions, names: list) -> tuple:
        rank = self.ranks.get(positions.mask.name) if isinstance(positions.mask, Var) else None
        if rank is not None and rank != len(names):
            raise self.err(target, f"cannot unpack {rank} index arrays into {len(names)} names")
        spelled = tuple(cst.Module([]).code_for_node(n) for n in names)
        return tuple(PositionsAxis(positions, k, spelled) for k in range(len(names)))

    def index(self, node: cst.Subscript, out, allow_newaxis: bool = False):
        """The index of `x[...]`: atoms and Slices; `None` items as NEWAXIS when allowed."""
        items, k = [], 0
        while k < len(node.slice):
            s = node.slice[k].slice
            k += 1
            unpacked = self.unpacked_positions_at(node.slice, k - 1)
            if unpacked is not None:  # x[i, j] of `i, j = np.where(c)` is x[c]
                items.append(unpacked.positions.mask)
                k += len(unpacked.names) - 1
            elif isinstance(s, cst.Index):
                if isinstance(s.value, cst.Name) and s.value.value == "None" or self.is_newaxis(s.value):
                    if not allow_newaxis:
                        raise self.err(s, "`None` (newaxis) is not supported in an in-place write")
                    items.append(NEWAXIS)
                elif isinstance(s.value, cst.Ellipsis):
                    items.append(Const(Ellipsis))
                elif isinstance(s.value, cst.List):  # x[[0, 2, 2]]: a constant integer-array index
                    values = tuple(self.static_key(e.value) for e in s.value.elements)
                    items.append(self.prim(out, "index_array", (Const(values),), hint="index"))
                else:
                    items.extend(self.index_item(s.value, out))
            else:
                parts = [None if p is None else self.expr(p, out) for p in (s.lower, s.upper, s.step)]
                items.append(Slice(*parts))
        return tuple(items)

    def unpacked_positions_at(self, elements, k: int) -> "PositionsAxis | None":
        """The first of the unpacked index arrays `elements[k:]` begin with, all of them in order (`x[i, j]`
        of `i, j = np.where(c)`), or None where item k is not one; any other use of them is refused."""
        value = getattr(elements[k].slice, "value", None)
        part = self.trees.get(value.value) if isinstance(value, cst.Name) else None
        if not isinstance(part, PositionsAxis):
            return None
        run = [getattr(el.slice, "value", None) for el in elements[k:k + len(part.names)]]
        parts = [self.trees.get(n.value) if isinstance(n, cst.Name) else None for n in run]
        if part.axis != 0 or len(parts) != len(part.names) or any(
                not isinstance(p, PositionsAxis) or p.positions is not part.positions or p.axis != d
                for d, p in enumerate(parts)):
            raise self.unpacked_misused(value, part)
        return part

    def index_item(self, node, out) -> tuple:
        """The index items one subscript item stands for: an atom, or a tuple's (`out[i]` of np.ndindex's `i`)."""
        item = self._expr(node, out, None)
        if isinstance(item, Positions):  # x[np.where(c)] is x[c]
            return (item.mask,)
        if isinstance(item, tuple) and item and all(isinstance(i, (Var, Const)) for i in item):
            return item
        return (self.refuse_non_atom(node, item),)

    def is_newaxis(self, node) -> bool:
        return isinstance(node, cst.Attribute) and self.static_value(node) is None

    def load(self, node: cst.Subscript, base: Var, out, target):
        """`base[index]`; `None` items become expand_dims of the read (numba writes no newaxis)."""
        index = self.index(node, out, allow_newaxis=True)
        if NEWAXIS not in index:
            return self.emit(out, target or self.temp(self.load_hint(base.name, index)), Load(base, index))
        if any(not (isinstance(i, Slice) or i is NEWAXIS or (isinstance(i, Const) and isinstance(i.value, int)))
               for i in index):
            raise self.err(node, "`None` (newaxis) can only be combined with slices and constant integers here",
                           "use np.expand_dims or np.reshape")
        kept = tuple(i for i in index if i is not NEWAXIS)
        value = self.emit(out, self.temp(self.load_hint(base.name, kept)), Load(base, kept)) if kept else base
        axis = 0
        for item in index:
            if item is NEWAXIS:
                value = self.prim(out, "expand_dims_any", (value, Const(axis)), hint=f"{base.name}_expanded")
            if item is NEWAXIS or isinstance(item, Slice):
                axis += 1
        if target is not None:
            return self.emit(out, target, Copy(value))
        return value

    def leaf_tree(self, treedef, path: str):
        """A static tree of fresh leaf parameters named after their path (`params_0_W`)."""
        if treedef.kind == "leaf":
            name = self.names.fresh(path)
            self._params.append(name)
            return Var(name)
        if treedef.kind == "none":
            return Const(None)
        if treedef.kind == "str":
            return Const(treedef.aux)
        if treedef.kind == "dict":
            return {k: self.leaf_tree(c, f"{path}_{k}") for k, c in zip(treedef.aux, treedef.children)}
        if treedef.kind == "namedtuple":
            fields = treedef.aux._fields
            return Record([self.leaf_tree(c, f"{path}_{f}") for f, c in zip(fields, treedef.children)], fields)
        if treedef.kind == "custom":
            cls, aux = treedef.aux
            fields = getattr(cls, "__dataclass_fields__", None)
            names = list(fields) if fields and len(fields) == len(treedef.children) else None
            labels = names or range(len(treedef.children))
            return Record([self.leaf_tree(c, f"{path}_{n}") for n, c in zip(labels, treedef.children)], names)
        items = [self.leaf_tree(c, f"{path}_{i}") for i, c in enumerate(treedef.children)]
        return tuple(items) if treedef.kind == "tuple" else items

    # ------------------------------------------- iteration: zip, enumerate, comprehensions, builtins
    def walk(self, it, out, loop: cst.For | None = None, target=None) -> Walk:
        """A run-time iteration over `it`: an array's first axis, a range, np.ndindex, or zip / enumerate of
        those. `target`: what each item is bound to (np.ndindex of a shape variable takes its rank from it)."""
        fn = self.static_value(it.func) if isinstance(it, cst.Call) else _NOT_STATIC
        if fn is zip:
            return self.zip_walk(it, out, loop, target)
        if fn is enumerate:
            return self.enumerate_walk(it, out, loop, target)
        if fn is range or fn is numba.prange:
            return self.range_walk(it, out)
        if fn is np.ndindex:
            return self.ndindex_walk(it, out, target)
        if fn is np.ndenumerate:
            return self.ndenumerate_walk(it, out, target)
        if fn is reversed and len(it.args) == 1:
            inner = self.walk(it.args[0].value, out, loop, target)
            last = self.prim(out, "sub", (inner.length, Const(1)), hint="last")
            return Walk(inner.length, lambda k, body: inner.item(self.prim(body, "sub", (last, k), hint="back"), body))
        if self.is_static_iterable(it):
            raise self.err(it, "a tuple/list/dict is unrolled when the code is generated; here it is mixed with "
                               "arrays or ranges, whose length is only known at run time",
                           "loop over the tuple/list and index the array with its position: "
                           "`for k, w in enumerate(ws): v = x[k]`")
        arr = self.iterated(loop, it, out) if loop is not None else self.expr(it, out)
        if not isinstance(arr, Var):
            raise self.err(it, "cannot loop over a number",
                           "loop over range(...), an array, a tuple/list, or zip / enumerate of those")
        n = self.prim(out, "len", (arr,), hint="n")
        return Walk(n, lambda k, body: Load(arr, (k,)))

    def zip_walk(self, it, out, loop, target) -> Walk:
        if not it.args or any(a.keyword for a in it.args):
            raise self.err(it, "zip() takes the iterables as positional arguments here")
        parts = _parts(target, len(it.args))
        walks = [self.walk(a.value, out, loop, t) for a, t in zip(it.args, parts)]
        n = walks[0].length
        for w in walks[1:]:  # the shortest wins, as in Python
            n = self.emit(out, self.temp("n"), Prim(rules.lookup_object(min)[0], (n, w.length), (), "min"))
        return Walk(n, lambda k, body: tuple(w.item(k, body) for w in walks))

    def enumerate_walk(self, it, out, loop, target) -> Walk:
        if not 1 <= len(it.args) <= 2 or it.args[0].keyword or any(a.keyword and a.keyword.value != "start"
                                                                    for a in it.args[1:]):
            raise self.err(it, "enumerate() takes an iterable and an optional start here")
        inner = self.walk(it.args[0].value, out, loop, _parts(target, 2)[1])
        start = self.expr(it.args[1].value, out) if len(it.args) == 2 else Const(0)
        counts = start == Const(0)
        index = (lambda k: Copy(k)) if counts else (lambda k: Prim(rules.lookup("add"), (k, start)))
        return Walk(inner.length, lambda k, body: (index(k), inner.item(k, body)), counts)

    def range_walk(self, it, out) -> Walk:
        """range(start, stop, step) as the k-th item `start + k * step`, k < its length."""
        start, stop, step = self.range_args(it, out)
        if not (isinstance(step, Const) and isinstance(step.value, int) and step.value):
            raise self.err(it, "a range inside zip() or enumerate() needs a constant, nonzero step")
        s = step.value
        if isinstance(start, Const) and isinstance(stop, Const):
            n = Const(len(range(start.value, stop.value, s)))
        elif start == Const(0) and s > 0:
            n = stop
        else:
            n = self.prim(out, "sub", (stop, start) if s > 0 else (start, stop), hint="n")
        if abs(s) != 1 and not isinstance(n, Const):  # a negative length runs no iteration, as an empty range
            n = self.prim(out, "floordiv", (self.prim(out, "add", (n, Const(abs(s) - 1)), hint="n"), Const(abs(s))),
                          hint="n")
        return Walk(n, lambda k, body: self.range_item(start, step, k, body))

    def ndindex_walk(self, it, out, target) -> Walk:
        """np.ndindex(shape): one counter over the product of the dimensions, split into an index per axis."""
        if any(a.keyword for a in it.args) or not it.args:
            raise self.err(it, "np.ndindex() takes a shape here")
        dims = [self.value(a.value, out) for a in it.args]
        if len(dims) == 1 and is_tree(dims[0]):
            dims = list(dims[0])
        elif len(dims) == 1:  # a shape variable (x.shape): its rank is known, or comes from the loop target
            rank = len(target.elements) if isinstance(target, (cst.Tuple, cst.List)) \
                else self.lengths.get(getattr(dims[0], "name", None))
            if rank is None and isinstance(self.kinds, UnknownKinds):
                self.kind_of(dims[0], required=True)
            if rank is None:
                raise self.err(it, "the rank of this shape is known only at run time",
                               "unpack the index: `for i, j in np.ndindex(x.shape)`")
            dims = self.dims_of(dims[0], rank, out)
        if any(is_tree(d) for d in dims):
            raise self.err(it, "np.ndindex() takes a shape: ints, or a tuple of ints")
        return self.index_walk(dims, out)

    def ndenumerate_walk(self, it, out, target) -> Walk:
        """np.ndenumerate(x): np.ndindex(x.shape), each index with the item of `x` there."""
        if len(it.args) != 1 or it.args[0].keyword:
            raise self.err(it, "np.ndenumerate() takes one array here")
        arr = self.expr(it.args[0].value, out)
        index_target = _parts(target, 2)[0]
        rank = self.ranks.get(getattr(arr, "name", None))
        if rank is None and isinstance(index_target, (cst.Tuple, cst.List)):
            rank = len(index_target.elements)
        if rank is None:
            self.kind_of(arr, required=True)
            raise self.err(it, "the rank of this array is known only at run time",
                           "unpack the index: `for (i, j), v in np.ndenumerate(x)`")
        positions = self.index_walk(self.dims_of(self.prim(out, "shape", (arr,), hint="shape"), rank, out), out)

        def item(k, body):
            index = tuple(self.emit(body, self.temp("i"), e) for e in positions.item(k, body))
            return tuple(Copy(i) for i in index), Load(arr, index)
        return Walk(positions.length, item)

    def dims_of(self, shape: Var, rank: int, out) -> list[Var]:
        """The first `rank` lengths of a shape tuple, each a variable."""
        return [self.emit(out, self.temp("dim"), Load(shape, (Const(d),))) for d in range(rank)]

    def index_walk(self, dims: list, out) -> Walk:
        """Every index of an array of shape `dims`, in C order: one counter, split into an index per axis."""
        strides = [Const(1)]
        for axis in reversed(range(len(dims))):
            d = dims[axis]
            strides.insert(0, d if strides[0] == Const(1) else
                           self.prim(out, "mul", (strides[0], d), hint="stride" if axis else "n"))
        n, strides = strides[0], strides[1:]

        def item(k, body):
            index = []
            for axis, (d, stride) in enumerate(zip(dims, strides)):
                if axis == 0:
                    index.append(Copy(k) if stride == Const(1) else Prim(rules.lookup("floordiv"), (k, stride)))
                    continue
                q = k if stride == Const(1) else self.prim(body, "floordiv", (k, stride), hint="q")
                index.append(Prim(rules.lookup("mod"), (q, d)))
            return tuple(index)
        return Walk(n, item)

    def range_item(self, start, step, k, body):
        offset = k if step == Const(1) else self.prim(body, "mul", (k, step), hint="offset")
        return Copy(offset) if start == Const(0) else Prim(rules.lookup("add"), (start, offset))

    def static_zip(self, it, out):
        """zip of static tuples/lists (and ranges with constant bounds) as a list of tuples; None when no
        argument is static."""
        parts = []
        for arg in it.args:
            node = arg.value
            if arg.keyword or arg.star:
                raise self.err(it, "zip() takes the iterables as positional arguments here")
            if isinstance(node, cst.Call) and self.static_value(node.func) is range:
                parts.append(node)
            elif self.is_static_iterable(node):
                parts.append(self.static_items(node, out))
            else:
                parts.append(None)
        if all(p is None or isinstance(p, cst.Call) for p in parts):
            return None
        for i, (p, arg) in enumerate(zip(parts, it.args)):
            if isinstance(p, cst.Call):
                bounds = [self.expr(a.value, out) for a in p.args]
                if all(isinstance(b, Const) and isinstance(b.value, int) for b in bounds):
                    parts[i] = [Const(v) for v in range(*(b.value for b in bounds))]
            if not isinstance(parts[i], list):
                raise self.err(arg.value, "zip() of a tuple/list with an array or a run-time range: the tuple/list is "
                                          "unrolled when the code is generated, the array's length is only known at "
                                          "run time", "loop over the tuple/list and index the array with its "
                                                      "position: `for k, w in enumerate(ws): v = x[k]`")
        return [tuple(items) for items in zip(*parts)]

    def is_static_iterable(self, it) -> bool:
        """Does `it` name a static tuple/list/dict (or zip / enumerate / .items() of one), known without
        lowering it?"""
        if isinstance(it, (cst.Tuple, cst.List)):
            return True
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and \
                it.func.attr.value in ("items", "keys", "values") and not it.args:
            return isinstance(self.tree_of(it.func.value), dict)
        if isinstance(it, cst.Call) and it.args:
            fn = self.static_value(it.func)
            if any(fn is f for f in (enumerate, list, tuple, reversed)):
                return self.is_static_iterable(it.args[0].value)
            if fn is zip:
                return any(self.is_static_iterable(a.value) for a in it.args)
            return False
        return self.tree_of(it) is not None

    def bind_item(self, target, item, body):
        """Bind a loop or comprehension target to a run-time item: a tree whose leaves are IR expressions."""
        if isinstance(target, cst.Name):
            name = target.value
            if isinstance(item, tuple):  # `for pair in zip(x, y)`: a tuple of this iteration's values
                self.trees[name] = self.item_atoms(item, name, body)
                return
            self.trees.pop(name, None)
            var = self.var(name)
            if item != Copy(Var(var)):  # enumerate's index that is the loop counter itself
                self.emit(body, var, item)
            return
        if not isinstance(target, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement)
                                                                 for e in target.elements):
            raise self.err(target, "a loop target is a name or a tuple of names", "`for a, (b, c) in ...`")
        names = [e.value for e in target.elements]
        if isinstance(item, Load):  # `for a, b in pairs`: unpack the row of a 2-D array
            item = tuple(Load(item.base, item.index + (Const(j),)) for j in range(len(names)))
        if not isinstance(item, tuple):
            raise self.err(target, "cannot unpack a number into several names")
        if len(item) != len(names):
            raise self.err(target, f"cannot unpack {len(item)} values into {len(names)} names")
        for name, part in zip(names, item):
            self.bind_item(name, part, body)

    def item_atoms(self, item, hint, body):
        if isinstance(item, tuple):
            return tuple(self.item_atoms(part, hint, body) for part in item)
        return self.emit(body, self.temp(hint), item)

    def builtin_call(self, node: cst.Call, fn, out, target):
        """max / min / sum / any / all of several values, of a tuple/list, an array or a comprehension;
        list / tuple / dict of static containers."""
        positional = [self.map_as_generator(a.value) for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        name = fn.__name__
        if fn in (list, tuple, dict):
            return self.container_call(node, fn, positional, keywords, out)
        if set(keywords) - ({"start"} if fn in (sum, math.prod) else set()):
            raise self.err(node, f"{name}() with `{next(iter(keywords))}=` is not supported here",
                           "write the loop that computes it")
        if fn is sum and len(positional) == 2 and not keywords:
            keywords["start"] = positional.pop()
        if not positional or (len(positional) > 1 and fn not in (max, min)):
            raise self.err(node, f"{name}() takes {'one iterable' if fn not in (max, min) else 'arguments'} here")
        start = self.expr(keywords["start"], out) if "start" in keywords else None
        if len(positional) > 1:
            items = [self.expr(p, out) for p in positional]
        elif isinstance(positional[0], (cst.GeneratorExp, cst.ListComp)):
            return self.comprehension_reduce(positional[0], fn, start, out, target)
        elif self.is_static_iterable(positional[0]):
            items = self.static_items(positional[0], out)
            if any(is_tree(i) for i in items):
                raise self.err(node, f"{name}() of a tuple/list of tuples/lists is not supported")
        elif fn in (any, all):  # an array: walk its first axis
            gen = cst.GeneratorExp(cst.Name("v"), cst.CompFor(cst.Name("v"), positional[0]))
            return self.comprehension_reduce(gen, fn, start, out, target)
        else:  # an array: Python walks its first axis, NumPy reduces it
            x = self.expr(positional[0], out)
            found = rules.lookup_object({sum: np.sum, max: np.max, min: np.min, math.prod: np.prod}[fn])
            axis = (("axis", Const(0)),) if fn in (sum, math.prod) else ()
            total = self.emit(out, target or self.temp(found[0].name), Prim(found[0], (x,), axis, found[1]))
            return total if start is None else self.prim(out, "add", (start, total), target=target)
        return self.fold(node, fn, items if start is None else [start] + items, out, target)

    def map_as_generator(self, node):
        """`map(f, xs, ys)` as the generator `(f(a, b) for a, b in zip(xs, ys))`, and `map(lambda i: e, xs)`
        as `(e for i in xs)`, which the reductions and list()/tuple() take; any other node as it is."""
        if not (isinstance(node, cst.Call) and self.callee_is(node.func, map)) or len(node.args) < 2 \
                or any(a.keyword or a.star for a in node.args):
            return node
        func, iterables = node.args[0].value, [a.value for a in node.args[1:]]
        source = iterables[0] if len(iterables) == 1 else cst.Call(cst.Name("zip"), [cst.Arg(i) for i in iterables])
        if _plain_lambda(func, len(iterables)):
            names = [p.name for p in func.params.params]
            return cst.GeneratorExp(func.body, cst.CompFor(_target_of(names), source))
        names = [cst.Name(f"map_item{k}") for k in range(len(iterables))]
        return cst.GeneratorExp(cst.Call(func, [cst.Arg(n) for n in names]), cst.CompFor(_target_of(names), source))

    def list_call_as_comprehension(self, node):
        """`list(<generator or map>)` as the list comprehension it equals; any other node as it is."""
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword \
                and not node.args[0].star and self.callee_is(node.func, list):
            inner = self.map_as_generator(node.args[0].value)
            if isinstance(inner, (cst.GeneratorExp, cst.ListComp)):
                return cst.ListComp(inner.elt, inner.for_in)
        return node

    def fold(self, node, fn, items, out, target):
        """The reduction of values known one by one when the code is generated: a chain of operations."""
        if not items:
            if fn in (max, min):
                raise self.err(node, f"{fn.__name__}() of an empty sequence")
            return Const({sum: 0, any: False, all: True, math.prod: 1}[fn])
        op, spelled = REDUCERS[fn.__name__][:2]
        rule = rules.lookup(op) if isinstance(op, str) else rules.lookup_object(op)[0]
        acc = self.truth(items[0], fn, out)
        for item in items[1:]:
            acc = self.emit(out, self.temp(REDUCERS[fn.__name__][2]), Prim(rule, (acc, self.truth(item, fn, out)), (),
                                                                          spelled))
        return self.expr_result(acc, out, target)

    def expr_result(self, atom, out, target):
        if target is not None and atom != Var(target):
            return self.emit(out, target, Copy(atom))
        return atom

    def truth(self, atom, fn, out, boolean=False):
        """any / all combine truth values: a number becomes bool(number)."""
        if fn not in (any, all) or boolean or isinstance(atom, Const) and isinstance(atom.value, bool):
            return atom
        return self.emit(out, self.temp("truth"), Prim(rules.lookup_object(bool)[0], (atom,), (), "bool"))

    def comprehension_reduce(self, comp, fn, start, out, target):
        """sum / max / min / any / all of a comprehension: unrolled over static containers, else an
        accumulator updated in a loop."""
        name = fn.__name__
        op, spelled, hint = REDUCERS[name]
        rule = rules.lookup(op) if isinstance(op, str) else rules.lookup_object(op)[0]
        mark, loc, values, acc = len(out), self.loc, [], []
        boolean = isinstance(comp.elt, (cst.Comparison, cst.BooleanOperation)) or \
            isinstance(comp.elt, cst.UnaryOperation) and isinstance(comp.elt.operator, cst.Not)

        def visit(body, dynamic):
            value = self.truth(self.expr(comp.elt, body), fn, body, boolean)
            if not dynamic:
                values.append(value)
                return
            if not acc:  # the accumulator starts before the outermost loop
                init = start if start is not None else Const(REDUCER_START[name])
                acc.append(self.temp(hint))
                out.insert(mark, Assign(acc[0], Copy(init), loc))
            self.emit(body, acc[0], Prim(rule, (Var(acc[0]), value), (), spelled))

        self.comprehension(comp, out, visit)
        if acc:
            return self.expr_result(Var(acc[0]), out, target)
        return self.fold(comp, fn, values if start is None else [start] + values, out, target)

    def comprehension(self, comp, out, visit):
        """Call `visit(out, dynamic)` once per item of a comprehension, with its targets bound in a scope
        of their own: static containers are unrolled, anything else is a loop (`dynamic`: inside a loop
        or an `if` on run-time values)."""
        with self.comprehension_scope(comp, out) as comp:
            self.comprehension_for(comp.for_in, out, visit, False)

    def outer_iterable_read(self, comp, out):
        """Python reads a comprehension's first iterable outside it: in `(x * x for x in x)` (what
        `map(lambda x: x * x, x)` is) the iterable is the function's `x`. That `x` is read now, under a
        name of its own that the comprehension's targets cannot hide. Returns the comprehension reading that name, and the name."""
        first = comp.for_in
        targets, level = set(), first
        while level is not None:
            targets |= _target_names(level.target)
            level = level.inner_for_in
        if not isinstance(first.iter, cst.Name) or first.iter.value not in targets:
            return comp, None
        alias = self.names.fresh(first.iter.value + "_outer")
        self.trees[alias] = self.value(first.iter, out)
        return comp.with_changes(for_in=first.with_changes(iter=cst.Name(alias))), alias

    @contextlib.contextmanager
    def comprehension_scope(self, comp, out):
        """The scope of a comprehension's targets; yields the comprehension to lower in it."""
        comp, alias = self.outer_iterable_read(comp, out)
        names, level = set(), comp.for_in
        while level is not None:
            names |= _target_names(level.target)
            level = level.inner_for_in
        saved = {n: (self.scope.get(n), self.trees.get(n)) for n in names}
        locals_ = self.locals
        self.locals = locals_ | names
        for n in names:  # the user's name where no other variable of the function has it
            self.scope[n] = n if n not in locals_ and n not in self.scope and not self.stack[1:] else self.renamed(n)
            self.trees.pop(n, None)
        try:
            yield comp
        finally:
            self.trees.pop(alias, None)
            self.locals = locals_
            for n, (var, tree) in saved.items():
                for table, value in ((self.scope, var), (self.trees, tree)):
                    if value is None:
                        table.pop(n, None)
                    else:
                        table[n] = value

    def comprehension_for(self, level, out, visit, dynamic):
        if level.asynchronous is not None:
            raise self.err(level, "`async for` cannot be differentiated")
        items = self.small_range(level.iter)
        if items is not None or self.is_static_iterable(level.iter):
            for item in items if items is not None else self.static_items(level.iter, out):
                self.bind_unrolled(level.target, item, out)
                self.comprehension_ifs(level, 0, out, visit, dynamic)
            return
        loc, body = self.loc, []
        it = level.iter
        with self.inside_loop():
            if isinstance(it, cst.Call) and self.static_value(it.func) is range and isinstance(level.target, cst.Name):
                bounds = self.range_args(it, out)
                counter = self.var(level.target.value)
            else:
                walk = self.walk(it, out, target=level.target)
                counter = self.names.fresh("k")
                bounds = (Const(0), walk.length, Const(1))
                self.bind_item(level.target, walk.item(Var(counter), body), body)
            self.comprehension_ifs(level, 0, body, visit, True)
        self.loc = loc
        out.append(For(counter, *bounds, body, loc))

    def bind_unrolled(self, target, item, out):
        """Bind an unrolled comprehension's target; an int stays a constant, so that `b[s]` picks an item."""
        if isinstance(target, cst.Name) and isinstance(item, Const) and type(item.value) is int:
            self.trees[target.value] = item
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(item, tuple) and len(item) == len(target.elements):
            for element, part in zip(target.elements, item):
                self.bind_unrolled(element.value, part, out)
        else:
            self.bind_again(target, item, out)

    def comprehension_ifs(self, level, i, out, visit, dynamic):
        if i == len(level.ifs):
            if level.inner_for_in is not None:
                self.comprehension_for(level.inner_for_in, out, visit, dynamic)
            else:
                visit(out, dynamic)
            return
        test = self.expr(level.ifs[i].test, out)
        if isinstance(test, Const):  # decided when the code is generated
            if test.value:
                self.comprehension_ifs(level, i + 1, out, visit, dynamic)
            return
        loc, inner = self.loc, []
        with self.inside_loop():
            self.comprehension_ifs(level, i + 1, inner, visit, True)
        out.append(If(self.stable_test(test, inner, out), inner, [], loc))

    @contextlib.contextmanager
    def inside_loop(self):
        self.branch_depth += 1
        self.nested += 1
        try:
            yield
        finally:
            self.branch_depth -= 1
            self.nested -= 1

    def list_comp(self, comp, out):
        """A list comprehension over static containers: a static list, unrolled."""
        items = []

        def visit(body, dynamic):
            if dynamic:
                raise self.err(comp, "this comprehension's length is only known at run time (it loops over a "
                                     "range or an array, or filters with an `if` on run-time values)",
                               "np.array([...]) of it makes an array, sum(...), max(...), any(...) reduce it; or "
                               "write the loop: out = np.zeros(n); for i in range(n): out[i] = ...")
            items.append(self.value(comp.elt, body))

        self.comprehension(comp, out, visit)
        return items

    def is_static_comprehension(self, comp) -> bool:
        it = comp.for_in.iter
        return (self.is_static_iterable(it) or self.small_range(it) is not None) and comp.for_in.inner_for_in is None

    def small_range(self, it):
        """The items of `range(...)` (or `np.arange` of ints) with constant bounds and at most UNROLL_RANGE
        items, else None: a comprehension over it is unrolled, so that it can make a list, or add arrays."""
        if not (isinstance(it, cst.Call) and self.static_value(it.func) in (range, np.arange) and 1 <= len(it.args) <= 3
                and all(a.keyword is None and self.is_static_key(a.value) for a in it.args)):
            return None
        bounds = [self.static_key(a.value) for a in it.args]
        if not all(isinstance(b, int) for b in bounds) or len(range(*bounds)) > UNROLL_RANGE:
            return None
        return [Const(v) for v in range(*bounds)]

    def filled_array(self, comp, out, target):
        """np.array([f(x) for x in ...]) of a run-time length: fill a preallocated array of numbers."""
        level = comp.for_in
        if level.inner_for_in is not None or level.ifs:
            return self.list_comp(comp, out)  # static, or an error that says why not
        loc = self.loc
        with self.comprehension_scope(comp, out) as comp:
            level = comp.for_in
            walk = self.walk(level.iter, out, target=level.target)
            zeros = rules.lookup_object(np.zeros)
            filled = self.emit(out, target or self.temp("filled"), Prim(zeros[0], (walk.length,), (), zeros[1]))
            k, body = self.names.fresh("k"), []
            with self.inside_loop():
                item = walk.item(Var(k), body)
                if isinstance(level.target, cst.Name) and item == Copy(Var(k)):  # range(n): count with the target
                    k = self.var(level.target.value)
                else:
                    self.bind_item(level.target, item, body)
                body.append(Store(filled.name, (Var(k),), self.expr(comp.elt, body), self.loc))
        self.loc = loc
        out.append(For(k, Const(0), walk.length, Const(1), body, loc))
        return filled

    def refuse_generator(self, node):
        if isinstance(node, cst.GeneratorExp):
            raise self.err(node, "NumPy functions refuse generator expressions (np.sum(x for ...) raises TypeError)",
                           "write the builtin sum(...), max(...), min(...), or a list: np.sum([... for ...])")

    def array_of(self, node, items, out):
        """np.array(items) of numbers, or of arrays of one shape: stacked along a new first axis."""
        if not items or any(is_tree(i) for i in items):
            raise self.err(node, "NumPy takes numbers or arrays here; this comprehension makes "
                                 f"{'no items' if not items else 'tuples/lists'}")
        return self.stack_items(items, out)

    def dict_call(self, node, positional, keywords, out):
        """dict(a=..., b=...), dict(zip(keys, values)), dict(other, key=...): a static dict."""
        if len(positional) > 1:
            raise self.err(node, "dict() takes one dict or iterable of pairs here")
        items = {}
        if positional:
            arg = positional[0]
            if isinstance(arg, cst.Dict) or isinstance(self.tree_of(arg), dict) or \
                    isinstance(arg, cst.Call) and self.static_value(arg.func) is dict:
                items.update(self.value(arg, out))
            else:
                pairs = self.static_items(arg, out) if self.is_static_iterable(arg) else None
                if pairs is None or any(not (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], Const))
                                        for p in pairs):
                    raise self.err(node, "dict() takes a dict, constant (key, value) pairs or keyword arguments here")
                items.update({k.value: v for k, v in pairs})
        items.update({k: self.value(v, out) for k, v in keywords.items()})
        return items

    def container_call(self, node, fn, positional, keywords, out):
        """list(...), tuple(...) and dict(...) of static containers: static containers again."""
        if fn is dict:
            return self.dict_call(node, positional, keywords, out)
        if keywords or len(positional) > 1:
            raise self.err(node, f"{fn.__name__}() takes one iterable here")
        if not positional:
            return fn()
        arg = self.map_as_generator(positional[0])
        if isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            return fn(self.list_comp(arg, out))
        if isinstance(arg, cst.Call) and self.static_value(arg.func) is range:
            bounds = [self.expr(a.value, out) for a in arg.args]
            if all(isinstance(b, Const) and isinstance(b.value, int) for b in bounds):
                return fn(Const(v) for v in range(*(b.value for b in bounds)))
        if not self.is_static_iterable(arg):
            raise self.err(node, f"{fn.__name__}() of an array or a run-time range: its length is only known at run "
                                 "time, and s2sad fixes tuples and lists when it generates code",
                           "index the array itself, or np.array(...) / x.copy() for a copy")
        return fn(self.static_items(arg, out))

    def is_static_key(self, node) -> bool:
        """Is `node` an index known when the code is generated (what static_key accepts)?"""
        if isinstance(node, (cst.SimpleString, cst.Integer)):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return isinstance(node.expression, cst.Integer)
        if isinstance(node, cst.Name) and node.value in self.trees:
            value = self.trees[node.value]
            return isinstance(value, Const) and type(value.value) is int
        if isinstance(node, cst.BinaryOperation):
            return type(node.operator) in INT_ARITHMETIC and all(
                self.is_static_key(side) and type(self.static_key(side)) is int for side in (node.left, node.right))
        value = self.static_value(node) if isinstance(node, (cst.Name, cst.Attribute)) else _NOT_STATIC
        return isinstance(value, (str, int)) and not isinstance(value, bool)

    def runtime_item(self, node, items, index_node, out, target):
        """`coeffs[i]` of a static tuple/list with a run-time index `i`: a constant table of numbers, or a
        chain of `if`s choosing among numbers and arrays."""
        if isinstance(items, dict):
            raise self.err(node, "a dict is indexed with a constant key", "use a tuple, or an array, for run-time indices")
        if not items:
            raise self.err(node, "index into an empty tuple/list")
        i = self.expr(index_node, out)
        leaves, _ = flatten(items)
        if all(isinstance(v, Const) and type(v.value) in (int, float) for v in leaves):
            return self.emit(out, target or self.temp("coeff"), Load(self.constant_table(node, items, out), (i,)))
        if any(is_tree(v) for v in items):
            raise self.err(node, "a run-time index picks a number or an array here; these items are tuples/lists",
                           "index with a constant, or make the items arrays (np.array(...))")
        result = target or self.temp("item")
        tests = [self.prim(out, "eq", (i, Const(k)), hint="is_item") for k in range(len(items) - 1)]
        self.choose(tests, list(items), result, out)
        return Var(result)

    def constant_table(self, node, items, out) -> Var:
        """A static tuple/list of numbers (nested: rows of equal length) as one constant tuple variable."""
        try:
            table = np.array(_constant_tuple(items))
        except ValueError:  # ragged rows
            table = None
        if table is None or table.dtype.kind not in "iuf" or table.ndim != _depth(items):
            raise self.err(node, "a table indexed at run time needs rows of equal length",
                           "pad the shorter rows with 0.0")
        return self.emit(out, self.temp("table"), Copy(Const(_nested_tuple(table.tolist()))))

    def choose(self, tests, items, result, out):
        """`result = items[i]` as `if i == 0: ... else: if i == 1: ...` (the last item: any other i). The
        tests are computed before the chain, so every one of them has a value in every pass of a loop."""
        if not tests:
            self.emit(out, result, Copy(items[0]))
            return
        body, orelse = [], []
        self.emit(body, result, Copy(items[0]))
        self.choose(tests[1:], items[1:], result, orelse)
        out.append(If(tests[0], body, orelse, self.loc))

    def static_if(self, node: cst.If, taken: bool, out) -> set:
        """An `if` whose test is a constant when the code is generated: only the branch it takes."""
        orelse = node.orelse
        if taken or orelse is None:
            stmts = node.body.body if taken else []
        elif isinstance(orelse, cst.If):  # elif
            return self.stmt(orelse, out)
        else:
            stmts = orelse.body.body
        flags = self.block(stmts, out)
        self.jumped_statically = bool(stmts) and self.always_jumps(stmts[-1])
        return flags

    def check_recursion(self, node, fn, args):
        """A recursive call is unrolled when a constant argument (an int, a tuple/list) can end it: the
        depth is then fixed when the code is generated."""
        if not any(isinstance(a, Const) and type(a.value) is int or is_tree(a) for a in args):
            raise self.err(node, f"recursive call to `{fn.__name__}` with arguments known only at run time: s2sad "
                                 "unrolls recursion only where constant arguments fix its depth",
                           "write it as a loop, or pass the depth as a constant (a literal or a global int)")
        if self.stack.count(fn) >= RECURSION_DEPTH:
            raise self.err(node, f"recursive call to `{fn.__name__}` still recurses after {RECURSION_DEPTH} levels "
                                 "when the code is generated", "write it as a loop")

    def static_slice(self, node, items, out):
        """`xs[a:b]` of a static tuple/list, with bounds known when the code is generated."""
        part = node.slice[0].slice
        bounds = [None if b is None else self.expr(b, out) for b in (part.lower, part.upper, part.step)]
        if any(b is not None and not (isinstance(b, Const) and type(b.value) is int) for b in bounds):
            raise self.err(node, "a tuple/list is sliced with constant bounds",
                           "s2sad resolves tuples and lists when it generates code")
        return items[slice(*(None if b is None else b.value for b in bounds))]
    # ------------------------------------------------------ argument types
    # Code is generated per argument rank and type where the function asks for them: `x.ndim` and
    # `isinstance(x, ...)` of an argument are constants then, and a branch on them keeps only its live side.
    def kind_of(self, atom, required: bool = False) -> tuple | None:
        """(ndim, type) of an argument not rebound yet, else None. While the argument types are unknown,
        the function is marked as asking for them, and what cannot do without (`required`) raises
        TypesNeeded."""
        if isinstance(atom, Const) and isinstance(atom.value, (bool, int, float)):
            return 0, type(atom.value)  # a constant (an int a caller passed an inlined helper): its own type
        if not isinstance(atom, Var):
            return None
        if isinstance(self.kinds, UnknownKinds):
            self.kinds.asked = True
            if not required:
                return None
            raise TypesNeeded(f"`{self.spelled.get(atom.name, atom.name)}`'s type decides the code: s2sad generates "
                              "it per argument type when the function is called, so `s2sad.source(f)` and a "
                              "transformation of a transformed function (grad(grad(f))) cannot read it; call "
                              "grad(f) or jacfwd/hessian on arguments, or branch outside the function")
        return self.kinds.get(atom.name)

    def unit_axes_of(self, atom) -> Const:
        """The axes `np.squeeze(x)` removes, decided now (numba compiles for one result rank): from the
        arguments' shapes, which the code is then generated for, and the operations since. Where they
        cannot be told, None: NumPy decides at run time, and numba refuses with a located message."""
        pattern = unit_axes(Copy(atom), self.units, self.ints)
        if pattern is None and isinstance(self.kinds, UnknownKinds):
            self.kinds.asked = True  # a call specializes; code made without arguments squeezes at run time
        if pattern is None:
            return Const(None)
        self.hidden.pins_units = True  # (the pattern may follow from an array read from outside)
        return Const(tuple(axis for axis, unit in enumerate(pattern) if unit))

    def holds_array(self, var: Var) -> bool:
        """Is `var` surely an array: made by NumPy here, or an argument whose type says so (asked for)?"""
        if var.name in self.arrays:
            return True
        if var.name not in self.arguments:
            return False
        kind = self.kind_of(var, required=True)
        return kind is not None and kind[0] > 0

    def type_test(self, node: cst.Call, out, target):
        """`isinstance(x, np.ndarray)` of an argument: a constant for the argument types the code is for."""
        if len(node.args) != 2 or any(a.keyword or a.star for a in node.args):
            raise self.err(node, "isinstance takes an argument and a class (or a tuple of classes) here")
        classes = self.static_arg(node.args[1].value)
        kind = self.kind_of(self.expr(node.args[0].value, out), required=True)
        if kind is None or not all(isinstance(c, type) for c in np.atleast_1d(np.array(classes, dtype=object))):
            raise self.err(node, "isinstance is decided when the code is generated: it needs an argument of the "
                                 "function, not rebound before, and classes", BUILTIN_HINTS["isinstance"])
        return self.expr_target(Const(issubclass(kind[1], classes)), out, target)

    # ----------------------------------------------------------- inactive code
    # Code that does not touch a differentiated value needs no rule: it stays in the primal as written.
    def expression_statement(self, node: cst.Expr, out):
        """`print(x)`, `np.random.seed(0)`: a call made for its effect runs as written."""
        call = node.value if isinstance(node.value, cst.Call) else None
        fn = self.static_value(call.func) if call is not None else _NOT_STATIC
        if fn is print:
            return self.print_call(call, out)
        if fn is _NOT_STATIC and _fills(call):  # `arr.fill(v)`: `arr[:] = v`, every item (numba indexes no `...`)
            every = cst.Subscript(call.func.value, [cst.SubscriptElement(cst.Slice(None, None))])
            return self.assign_to(every, call.args[0].value, out)
        if _module_of(fn) in DIAGNOSTICS:  # `logger.debug(f"...")`: no part of the computation
            return
        if fn is not _NOT_STATIC and _output_argument(call, fn) is not None:
            self.value(call, out)  # `np.sqrt(d, d)`: it writes into `d`
            return
        if fn is not _NOT_STATIC and _gufunc_layout(fn) is not None:  # `move_mean(x, 3, out)`: refused there
            self.value(call, out)
            return
        if fn is not _NOT_STATIC and self.runs_as_written(fn) and self.builtin_name(fn) not in BUILTIN_HINTS:
            value = self.opaque_call(call, fn, out, None, effect=True)
            out.append(Effect(out.pop().value, self.loc))  # the call opaque_call emitted, without a result
            return
        raise self.err(node, "an expression statement has no effect s2sad can differentiate",
                       self.unused_hint(call, fn))

    def unused_hint(self, call, fn) -> str:
        if fn is not _NOT_STATIC and self.builtin_name(fn) in BUILTIN_HINTS:
            return BUILTIN_HINTS[self.builtin_name(fn)]
        if call is None or fn is _NOT_STATIC and isinstance(call.func, cst.Attribute):
            return ("assign the result of a NumPy function instead of changing an array by a method "
                    "(`x = np.sort(x)` for `x.sort()`), or remove the line")
        if isinstance(unwrap(fn), types.FunctionType):
            name = unwrap(fn).__name__
            return (f"s2sad differentiates the values functions return: make `{name}` return the array it fills "
                    f"and assign it (`out = {name}(...)`)")
        return "its value is unused: assign it (`y = ...`) or remove the line"

    @staticmethod
    def runs_as_written(fn) -> bool:
        """A callee with no rule that is not a Python function s2sad inlines: kept as a call."""
        return rules.lookup_object(fn) is None and not isinstance(fn, Custom) and callable(fn) \
            and not isinstance(unwrap(fn), types.FunctionType)

    def print_call(self, call: cst.Call, out):
        """`print(a, f"x = {x}")` as numba prints: positional operands; an f-string as its pieces."""
        args = []
        for a in call.args:
            if a.keyword is not None or a.star:
                raise self.err(a, "print takes only positional arguments here (numba has no sep=, end=, file=)",
                               "print the pieces as positional arguments: print(a, b)")
            if isinstance(a.value, cst.FormattedString):
                for part in a.value.parts:
                    if isinstance(part, cst.FormattedStringText):  # print puts the spaces back
                        args += [Const(part.value.strip())] if part.value.strip() else []
                    else:
                        args.append(self.expr(part.expression, out))
            else:
                args.append(self.expr(a.value, out))
        out.append(Effect(Prim(Opaque("print", spelled="print"), tuple(args), (), "print"), self.loc))

    def raise_stmt(self, node: cst.Raise, out):
        """`raise ValueError("...")` runs as written; numba raises only constant messages, so a message
        made at run time (an f-string, a variable) is its source text."""
        if node.exc is None:
            raise self.err(node, "a bare `raise` (re-raising an exception) is not supported",
                           'raise a new exception: raise ValueError("...")')
        call = node.exc if isinstance(node.exc, cst.Call) else None
        cls = self.static_value(call.func if call is not None else node.exc)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise self.err(node.exc, "only an exception class, or a call of one, can be raised here",
                           'raise ValueError("...") or another exception class')
        if call is not None and any(a.keyword is not None or a.star for a in call.args):
            raise self.err(call, "exception arguments must be positional", 'raise ValueError("message")')
        args = tuple(Const(self.message(a.value)) for a in call.args) if call is not None else ()
        rule = self.exception_rule(node.exc, cls)
        out.append(Effect(Prim(rule, args, (), rule.spelled), self.loc, raises=True))

    def assert_stmt(self, node: cst.Assert, out):
        """`assert test, "message"` as `if not test: raise AssertionError("message")`."""
        test = self.expr(node.test, out)
        failed = self.prim(out, "not", (test,), hint="failed")
        args = (Const(self.message(node.msg)),) if node.msg is not None else ()
        rule = self.exception_rule(node, AssertionError)
        out.append(If(failed, [Effect(Prim(rule, args, (), rule.spelled), self.loc, raises=True)], [], self.loc))

    def none_operand(self, node: cst.BinaryOperation, out, target):
        """Arithmetic on None (`ylast * (1 - alpha)` where `ylast=None`): Python raises TypeError. On a path
        that runs conditionally that is what generated code does there (numba compiles every path)."""
        what = cst.Module([]).code_for_node(node)
        if not self.conditional():
            raise self.err(node, f"`{what}` computes with None: Python raises TypeError here",
                           "give the value a number before this line")
        rule = self.exception_rule(node, TypeError)
        out.append(Effect(Prim(rule, (Const(f"unsupported operand None in `{what}`"),), (), rule.spelled),
                          self.loc, raises=True))
        raise RaisesHere()

    def exception_rule(self, node, cls) -> Opaque:
        if getattr(builtins, cls.__name__, None) is cls:
            return Opaque(cls.__name__, spelled=cls.__name__)
        if cls.__module__ in ("__main__", "builtins") or "<" in cls.__qualname__:
            raise self.err(node, f"the exception class `{cls.__qualname__}` cannot be named from generated code",
                           "define it at module level in an importable module, or raise a built-in exception")
        return Opaque(cls.__name__, spelled=f"{cls.__module__}.{cls.__qualname__}")

    @staticmethod
    def message(node) -> Any:
        """A constant exception argument: a literal as it is, anything else as its source text."""
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
            value = node.evaluated_value
            if value is not None:
                return value
        if isinstance(node, cst.FormattedString):
            return "".join(p.value if isinstance(p, cst.FormattedStringText)
                           else "{" + cst.Module([]).code_for_node(p.expression) + "}" for p in node.parts)
        return cst.Module([]).code_for_node(node)

    def opaque_call(self, node: cst.Call, fn, out, target, effect=False):
        """A call with no rule runs as written while its result does not depend on a differentiated
        input (the analysis refuses it otherwise); on constants, a pure one is evaluated now."""
        if fn is isinstance:
            return self.type_test(node, out, target)
        refusal = self.refusal(node, fn)
        if not self.runs_as_written(fn) or self.builtin_name(fn) in BUILTIN_HINTS or \
                isinstance(fn, type) and not (fn.__module__ or "").startswith("numpy"):
            raise UnsupportedError(refusal)
        spelled = self.callee_spelling(node.func, fn)
        if spelled is None:
            raise UnsupportedError(refusal)
        args = [self.prim_arg(a.value, out) for a in node.args if a.keyword is None]
        kwargs = [(a.keyword.value, self.prim_arg(a.value, out)) for a in node.args if a.keyword is not None]
        args, kwargs = _positional(fn, args, kwargs)
        if not effect and _pure(fn) and all(isinstance(a, Const) for a in args + [v for _, v in kwargs]):
            folded = _evaluate(fn, args, kwargs)
            if folded is not None:
                return self.expr_target(folded, out, target)
        rule = Opaque(spelled, refusal=refusal, impure=_draws(fn), spelled=spelled)
        name = target or self.temp(spelled.rsplit(".", 1)[-1])
        return self.emit(out, name, Prim(rule, tuple(args), tuple(kwargs), spelled))

    def message_at(self, node, message, hint="") -> str:
        """The located text of `self.err(node, message, hint)`, for an error raised later (errors.Located)."""
        return self.err(node, message, hint).args[0]

    def expr_target(self, atom, out, target):
        return self.emit(out, target, Copy(atom)) if target is not None else atom

    def refusal(self, node: cst.Call, fn) -> str:
        """The error for a call with no rule whose result turns out to depend on a differentiated input."""
        name = getattr(fn, "__name__", None)
        if name is None:  # a callable object
            what = cst.Module([]).code_for_node(node.func)
            if type(fn).__name__ == "StencilFunc":
                return self.message_at(node, f"`{what}` is a numba @stencil, which s2sad does not differentiate",
                                       "write its loop out: `out = np.zeros_like(a)`, then `out[i, j] = ...` over "
                                       "the interior, reading `a[i, j + 1]` for the stencil's `a[0, 1]`")
            return self.message_at(node, f"no derivative rule for `{what}`, a {type(fn).__name__} object", HINT_RULE)
        if self.builtin_name(fn):
            return self.message_at(node, f"the builtin `{name}` has no derivative rule",
                                   BUILTIN_HINTS.get(name, "use a NumPy or math function with a rule, or arithmetic"))
        if not callable(fn) or isinstance(fn, type) and not (fn.__module__ or "").startswith("numpy"):
            return self.message_at(node, f"cannot call `{name}` here",
                                   "call NumPy/math functions or plain Python functions")
        if _draws(fn):
            return self.message_at(node, f"`{name}` draws random numbers from differentiated parameters", DRAW_HINT)
        return self.message_at(node, f"no derivative rule for `{name}`", HINT_RULE)

    @staticmethod
    def builtin_name(fn) -> str:
        name = getattr(fn, "__name__", None)
        return name if name and getattr(builtins, name, None) is fn else ""

    def callee_spelling(self, func, fn) -> str | None:
        """How generated code names a callee with no rule: the user's dotted path from a module
        (`np.random.normal`, `scipy.special.gammaln`), else the function's own module and name."""
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root is not func:
            module = self.static_value(root)
            if isinstance(module, types.ModuleType):
                path = module.__name__ + _dotted(func)[len(root.value):]
                return "np" + path[len("numpy"):] if path.startswith("numpy.") else path
        if isinstance(getattr(fn, "__self__", None), np.random.RandomState):
            return "np.random." + fn.__name__
        try:
            return spelling(fn)
        except (ValueError, AttributeError):
            return None

    def constant_attribute(self, node: cst.Attribute):
        """`np.finfo(float).eps`: an attribute of a pure call on constants, evaluated now (else None)."""
        call = node.value
        if not isinstance(call, cst.Call) or any(a.star for a in call.args):
            return None
        fn = self.static_value(call.func)
        if fn is _NOT_STATIC or not _pure(fn):
            return None
        values = [self.static_operand(a.value) for a in call.args]
        if any(v is _NOT_STATIC for v in values):
            return None
        args = [Const(v) for a, v in zip(call.args, values) if a.keyword is None]
        kwargs = [(a.keyword.value, Const(v)) for a, v in zip(call.args, values) if a.keyword is not None]
        found = _evaluate(fn, args, kwargs, lambda obj: getattr(obj, node.attr.value))
        return found

    def static_operand(self, node):
        """A literal number or string, or a dtype (`float`, `np.float32`), known without lowering."""
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
            return node.evaluated_value
        dtype = self.static_dtype(node)
        return dtype if dtype is not None else _NOT_STATIC

    def static_dtype(self, node) -> np.dtype | None:
        """The dtype a name such as `float`, `np.float32` or `np.dtype("int64")` stands for, else None."""
        if not isinstance(node, (cst.Name, cst.Attribute)) or isinstance(node, cst.Name) and node.value in self.locals:
            return None
        value = self.static_value(node)
        if isinstance(value, np.dtype):
            return value
        if isinstance(value, type) and (value in (float, int, bool, complex) or issubclass(value, np.generic)):
            return np.dtype(value)
        return None

    def opaque_attribute(self, node: cst.Attribute, base, out, target):
        """`x.dtype`, `np.finfo(d).eps`: an attribute with no rule is read as written, on inactive values."""
        attr = node.attr.value
        refusal = self.message_at(node, f"attribute `.{attr}` has no derivative rule",
                                  "on differentiated values s2sad reads .shape, .size, .ndim and .T")
        rule = Opaque(f"attribute {attr}", refusal=refusal, form="attribute", spelled=attr)
        hint = f"{base.name}_{attr}" if isinstance(base, Var) else attr
        return self.emit(out, target or self.temp(hint), Prim(rule, (base,), (), attr))

    def astype(self, node: cst.Call, out, target):
        """`x.astype(float)` and `x.astype(np.float32)` are differentiable copies; other dtypes are read as
        written, on inactive values."""
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword not in (None,) and \
                node.args[0].keyword.value != "dtype":
            raise self.err(node, "write .astype(dtype) with the dtype alone", "x.astype(np.float64)")
        x = self.expr(node.func.value, out)
        dtype = self.prim_arg(node.args[0].value, out)
        if dtype == Const(np.dtype(np.float64)):
            return self.prim(out, "as_float", (x,), target=target)
        if dtype == Const(np.dtype(np.float32)):
            return self.prim(out, "as_float32", (x,), target=target)
        refusal = self.message_at(node, "`.astype` to a dtype other than float64 or float32 has no derivative here",
                                  "differentiated values stay floats: use .astype(float) or .astype(np.float32)")
        rule = Opaque("astype", refusal=refusal, form="method", spelled="astype")
        hint = f"{x.name}_cast" if isinstance(x, Var) else "cast"
        return self.emit(out, target or self.temp(hint), Prim(rule, (x, dtype), (), "astype"))

    # -------------------------------------------------------------- function
    @property
    def params(self):
        return self._params

    def copy_argument(self, func, name: str, out):
        """An argument the function writes into: derivatives are of the values it had on entry, and the
        caller's array is left as it was, so the body works on a copy."""
        self.set_loc(func)
        copy = self.renamed(name)
        self.scope[name] = copy
        rule, spelled = rules.lookup_object(np.copy)
        self.emit(out, copy, Prim(rule, (Var(name),), (), spelled))
        self.copied.append(name)

    def check_signature(self, func: cst.FunctionDef):
        """Refuse what a plain `def` returning a value does not have: async, yield."""
        if func.asynchronous is not None:
            raise self.err(func, "`async def` functions cannot be differentiated",
                           "differentiate a plain `def` function, and await outside it")
        if func.params.posonly_params:
            raise self.err(func.params.posonly_params[0], "positional-only parameters (`/`) are not supported",
                           "remove the `/` from the signature")
        yields = _find_yields(func)
        if yields:
            raise self.err(yields[0], "generator functions (`yield`) cannot be differentiated",
                           "collect the values in an array (out = np.zeros(n); out[i] = ...) and return it")

    def lower_body(self, bound: dict | None, out) -> list[str]:
        """Lower the function's body into `out`; return the names holding its results."""
        func = self.parsed.node
        self.locals = assigned_names(func)
        self.written_lists = _written_at_run_time(func)
        self.check_signature(func)
        self._params = []
        rebound = assigned_names(func.with_changes(params=cst.Parameters())) if bound is not None else set()
        marked = dict(hidden.marked(self.parsed.fn)) if bound is None else {}
        for p in _gathering_params(func):
            if bound is not None:  # `*args` of an inlined helper: a static tuple
                self.trees[p.name.value] = bound[p.name.value]
        written = updated = set()
        if bound is None and self.copy_arguments:
            written = _written_arguments(self.parsed.fn, func)
            updated = _written_arguments(self.parsed.fn, func, updates=True) - written
        for p in _params_in_order(func, with_gathering=bound is None):
            if p.name.value in marked:  # generated code read again: its hidden parameters stay hidden
                self.hidden.params[marked[p.name.value]] = self.var(p.name.value)
                continue
            if bound is not None and isinstance(bound[p.name.value], StaticRef):
                ref = bound[p.name.value]
                if is_hidden_array(ref.obj) and ref.where is not None:
                    bound[p.name.value] = self.hidden_var(ref.where)
                else:
                    self.objects[p.name.value] = ref
                    continue
            if bound is not None and is_tree(bound[p.name.value]):
                self.trees[p.name.value] = bound[p.name.value]
                continue
            if p.name.value in self.arg_trees and self.arg_trees[p.name.value].kind == "static":
                obj = self.arg_trees[p.name.value].aux  # a function or object: part of the code's structure
                self.objects[p.name.value] = StaticRef(obj, Hidden(obj, (("object", None),)))
                continue
            if p.name.value in self.arg_trees:  # a pytree argument: the generated code takes its leaves
                self.trees[p.name.value] = self.leaf_tree(self.arg_trees[p.name.value], p.name.value)
                continue
            value = bound[p.name.value] if bound is not None else None
            if isinstance(value, Var) and p.name.value not in rebound:
                self.scope[p.name.value] = value.name  # an inlined callee reads the caller's variable itself
                continue
            if isinstance(value, Var) and p.name.value in _updated_only(func) and self.holds_array(value):
                self.scope[p.name.value] = value.name  # `force += ...` on the caller's array: NumPy writes into it
                self.updates_callers.add(p.name.value)
                continue
            if isinstance(value, Var) and p.name.value in _updated_only(func) and value.name not in self.ranks \
                    and isinstance(self.kinds, UnknownKinds):
                self.kinds.asked = True  # an array or a number? A call specializes to the argument types
            if isinstance(value, Const) and (type(value.value) in (int, bool, str) and p.name.value not in rebound
                                             or value.value is None):
                self.trees[p.name.value] = value  # `n - 1`, `n == 0`, `name == "tanh"`, `H is None` are decided now
                continue
            name = self.var(p.name.value)
            self._params.append(name)
            if bound is None:
                self.arguments.add(name)
                if not isinstance(self.kinds, UnknownKinds) and name in self.kinds:
                    self.ranks[name] = self.kinds[name][0]
                    self.units[name] = self.kinds[name][2]
                    if self.kinds[name][0] > 0:
                        self.arrays.add(name)
            if bound is not None:
                self.set_loc(func)
                self.emit(out, name, Copy(value))
            if name in written or name in updated and self.holds_array(Var(name)):
                self.copy_argument(func, name, out)
        returns = [n for n in _find_returns(func)]
        last = func.body.body[-1] if func.body.body else None
        self.ret.simple = len(returns) == 1 and isinstance(last, cst.SimpleStatementLine) \
            and any(isinstance(s, cst.Return) for s in last.body)
        if not returns and bound is None:
            raise self.err(func, "a differentiated function must return a value",
                           "return the value to differentiate; a helper it calls may write into arrays "
                           "and return nothing")
        self.ret.simple = self.ret.simple or not returns
        if not self.ret.simple:
            self.ret.flag = self.names.fresh("returned")
            self.exits.add(self.ret.flag)
            self.set_loc(func)
            self.emit(out, self.ret.flag, Copy(Const(False)))
        self.block(func.body.body, out)
        return self.ret.outputs


_NOT_STATIC = object()
NEWAXIS = object()  # a `None` item in an index, while lowering


@dataclass(frozen=True)
class StaticRef:
    """A function or object a name stands for while lowering (a callback, a method's `self`), and where
    it lives (None: nowhere a later call can read it again)."""

    obj: Any
    where: Hidden | None


def _has_static_attributes(obj) -> bool:
    """Are `obj`'s attributes read when the code is generated? Modules, classes and plain objects (a
    dataclass, `self`) are; arrays, numbers and containers are the function's data."""
    return not isinstance(obj, (np.ndarray, np.generic, bool, int, float, complex, str, bytes, tuple, list,
                                dict, types.FunctionType, types.BuiltinFunctionType, types.MethodType))


def _is_static_object(obj) -> bool:
    """A value that stays an object while lowering (not a number, an array or a container)."""
    return not isinstance(obj, (np.ndarray, np.generic, bool, int, float, complex, str, bytes, tuple, list,
                                dict, type(None)))


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


def _lambda_def(node: cst.Lambda, parsed: Parsed):
    """`lambda t: e` as `def lambda_<line>(t): return e`, and positions that place its made nodes where
    the lambda is."""
    line = parsed.where(node)[0]
    statement = cst.Return(value=node.body)
    simple = cst.SimpleStatementLine(body=[statement])
    block = cst.IndentedBlock(body=[simple])
    made = cst.FunctionDef(name=cst.Name(f"lambda_{line}"), params=node.params, body=block)
    where = parsed.positions[node]
    return made, collections.ChainMap({n: where for n in (statement, simple, block, made, made.name)}, parsed.positions)


def _bind_parameters(func: cst.FunctionDef, args: list, kwargs: dict) -> dict:
    """A nested function's parameters bound like Python binds them; an unpassed default stays its expression."""
    p = func.params
    if p.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or p.star_kwarg is not None:
        raise TypeError("*args and **kwargs parameters are not supported")
    positional = list(p.posonly_params) + list(p.params)
    if len(args) > len(positional):
        raise TypeError(f"takes {len(positional)} positional arguments but {len(args)} were given")
    bound = {q.name.value: a for q, a in zip(positional, args)}
    for q in positional[len(args):] + list(p.kwonly_params):
        name = q.name.value
        if name in kwargs:
            bound[name] = kwargs.pop(name)
        elif q.default is not None:
            bound[name] = q.default
        else:
            raise TypeError(f"missing argument `{name}`")
    if kwargs:
        raise TypeError(f"unexpected argument(s) {', '.join(kwargs)}")
    return bound


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


def _gathering_params(func: cst.FunctionDef) -> list[cst.Param]:
    """The `*args` and `**kwargs` parameters of `func`."""
    return [p for p in (func.params.star_arg, func.params.star_kwarg) if isinstance(p, cst.Param)]


def _params_in_order(func: cst.FunctionDef, with_gathering: bool) -> list[cst.Param]:
    """`func`'s parameters in the order its signature lists them; `*args` and `**kwargs` (which the
    transformed function takes as a tuple and a dict) only `with_gathering`."""
    star, star_kwarg = func.params.star_arg, func.params.star_kwarg
    gathering = with_gathering and isinstance(star, cst.Param)
    return (list(func.params.params) + ([star] if gathering else []) + list(func.params.kwonly_params)
            + ([star_kwarg] if with_gathering and star_kwarg is not None else []))


def _plain_lambda(node, arity: int) -> bool:
    """A `lambda a, b: ...` of `arity` positional parameters, without defaults, stars or keywords."""
    if not isinstance(node, cst.Lambda):
        return False
    params = node.params
    return len(params.params) == arity and all(p.default is None for p in params.params) and not (
        params.posonly_params or params.kwonly_params or isinstance(params.star_arg, cst.Param)
        or params.star_kwarg)


def _target_of(names: list) -> cst.BaseAssignTargetExpression:
    return names[0] if len(names) == 1 else cst.Tuple([cst.Element(n) for n in names])


def _is_number(value) -> bool:
    return isinstance(value, Const) and type(value.value) in (int, float)


def _constant_tuple(value):
    """A static tuple/list of Consts as a plain (nested) tuple of Python values."""
    if isinstance(value, (tuple, list)):
        return tuple(_constant_tuple(v) for v in value)
    return value.value


def is_tree(value) -> bool:
    """Is `value` a static container (lowering keeps tuples/lists/dicts of atoms as Python objects)?"""
    return isinstance(value, (tuple, list, dict))


def _gufunc_layout(fn) -> tuple[list, list] | None:
    """The core axes of a numba gufunc's inputs and outputs, from its layout `(n),()->(n)`; None for other objects."""
    layout = getattr(fn, "signature", None)
    if type(fn).__name__ != "GUFunc" or not isinstance(layout, str) or "->" not in layout:
        return None

    def operands(part):
        return [tuple(d.strip() for d in group.split(",") if d.strip()) for group in re.findall(r"\(([^)]*)\)", part)]

    ins, outs = layout.replace(" ", "").split("->")
    return operands(ins), operands(outs)


def _gufunc_operand_types(fn) -> tuple | None:
    """The numba types a gufunc's first signature declares for its operands (a `()` operand may be declared a
    number, `float64`, or an array of one item, `intp[:]`), or None where numba keeps them elsewhere."""
    try:
        return tuple(fn.gufunc_builder._sigs[0].args)
    except (AttributeError, IndexError, TypeError):
        return None


def _numbers_tree(value) -> bool:
    """A non-empty static list/tuple (rows of them) of numbers: what NumPy makes an array of where it wants one."""
    if not isinstance(value, (tuple, list)) or not value:
        return False
    leaves = flatten(value)[0]
    return all(isinstance(a, Var) or isinstance(a, Const) and type(a.value) in (int, float, bool) for a in leaves)


def _is_none(value) -> bool:
    if isinstance(value, StaticRef):
        return value.obj is None
    return isinstance(value, Const) and value.value is None


def flatten(value) -> tuple[list, Any]:
    """The leaves of a static tree in order, and its shape (the tree with None leaves; None for a leaf)."""
    if isinstance(value, dict):
        pairs = [flatten(v) for v in value.values()]
        return [a for leaves, _ in pairs for a in leaves], {k: shape for k, (_, shape) in zip(value, pairs)}
    if isinstance(value, (tuple, list)):
        pairs = [flatten(v) for v in value]
        shapes = [shape for _, shape in pairs]
        shape = Record(shapes, value.names) if isinstance(value, Record) else type(value)(shapes)
        return [a for leaves, _ in pairs for a in leaves], shape
    return [value], None


def unflatten(shape, leaves: list):
    """Rebuild a tree of `shape` from its leaves (the inverse of flatten)."""
    it = iter(leaves)

    def build(s):
        if isinstance(s, dict):
            return {k: build(v) for k, v in s.items()}
        if isinstance(s, Record):
            return Record([build(v) for v in s], s.names)
        if isinstance(s, (tuple, list)):
            return type(s)(build(v) for v in s)
        return next(it)

    return build(shape)


def _spelled(operator: cst.CSTNode) -> str:
    """How an operator node reads in source: `is not`, `<<`, `&=`."""
    return cst.Module([]).code_for_node(operator).strip()


def _reads_a_tape(node) -> bool:
    """`restore(t, x)` or `t.pop()`: a line of generated code, read again for a higher derivative. Its
    reverse has to run in step with the tape's pushes even where nothing reads the value, so the name
    it assigns keeps its variable (not `new_version`): the analysis then sees an overwrite."""
    if not isinstance(node, cst.Call):
        return False
    f = node.func
    return (isinstance(f, cst.Name) and f.value == "restore") or \
        (isinstance(f, cst.Attribute) and f.attr.value == "pop" and not node.args)


def _param_names(func: cst.FunctionDef) -> set[str]:
    return {p.name.value for p in func.params.params + func.params.kwonly_params}


INT_FOLDS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
             "mod": operator.mod, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
             "gt": operator.gt, "ge": operator.ge, "not": operator.not_}


def _fold_ints(key, args) -> Const | None:
    """The result of an operation on constant ints and bools (exact, so computed now), else None."""
    if not (isinstance(key, str) and key in INT_FOLDS and args
            and all(isinstance(a, Const) and type(a.value) in (int, bool) for a in args)):
        return None
    values = [a.value for a in args]
    if key in ("floordiv", "mod") and values[1] == 0:
        return None
    return Const(INT_FOLDS[key](*values))


def _parts(target, n: int) -> list:
    """The sub-targets of a tuple target with n items (None where it has no such parts)."""
    if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == n:
        return [e.value for e in target.elements]
    return [None] * n


def _depth(value) -> int:
    return 1 + _depth(value[0]) if isinstance(value, (tuple, list)) and value else 0


def _nested_tuple(value):
    return tuple(_nested_tuple(v) for v in value) if isinstance(value, list) else value


def _target_names(target) -> set[str]:
    """The names a loop or comprehension target binds: `i`, `(a, (b, c))`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_target_names(e.value) for e in target.elements))
    return set()


def _count_names(node, name) -> int:
    return sum(isinstance(n, cst.Name) and n.value == name for n in _walk(node))


def _find_yields(func) -> list:
    return [n for n in _walk(func, skip=(cst.FunctionDef, cst.Lambda)) if isinstance(n, cst.Yield)]


def _find_returns(func):
    return [n for n in _walk(func, skip=(cst.FunctionDef,)) if isinstance(n, cst.Return)]


_LIBRARIES = frozenset({"numpy", "scipy", "numba", "math"})
DIAGNOSTICS = frozenset({"logging", "warnings", "_warnings"})  # statements calling these are left out of generated code


def calls_its_call_method(obj) -> bool:
    """Is `obj` an instance of a user's class with a Python `__call__` (not a function, class or ufunc)?"""
    call = getattr(type(obj), "__call__", None)
    return isinstance(call, types.FunctionType) and not isinstance(obj, type) and not _in_library(call) \
        and _module_of(call) != "s2sad" and unwrap(obj) is obj and rules.lookup_object(obj) is None


def _module_of(fn) -> str:
    """The top-level package a function (or a bound method's function) comes from."""
    inner = getattr(fn, "__func__", fn)
    return (getattr(inner, "__module__", None) or "").split(".")[0]


def _in_library(fn: types.FunctionType) -> bool:
    """Is `fn` NumPy's, SciPy's, numba's or the standard library's own Python code (`logger.debug`,
    `copy.deepcopy`)? It is called as a library function (with a rule, or on values that need none), never
    inlined: its source is no place to point a user at."""
    top = (getattr(fn, "__module__", None) or "").split(".")[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names


def _user_class(cls) -> bool:
    """A class whose instances s2sad builds as variables: a user's plain class (objects.py), or SimpleNamespace;
    never a library's (its `__init__` is no place to point a user at)."""
    return builds_object(cls) and (cls is types.SimpleNamespace or not _in_library(cls) and _module_of(cls) != "s2sad")


_ARRAY_MAKERS = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "copy", "eye",
                           "arange", "linspace", "tile", "ascontiguousarray", "asfortranarray"})
_ARRAY_ARITHMETIC = frozenset({"add", "sub", "mul", "truediv", "pow", "neg", "pos", "matmul"})


def _makes_array(value, arrays: set) -> bool:
    """Does this right-hand side surely give an array? (made by NumPy, a slice of an array, or arithmetic
    with one): what a helper's `x += ...` on its parameter needs to know to write into the caller's array."""
    if isinstance(value, Copy):
        return isinstance(value.value, Var) and value.value.name in arrays
    if isinstance(value, Load):
        return any(isinstance(i, Slice) for i in value.index)
    if isinstance(value, Prim):
        name = value.rule.name
        return name in _ARRAY_MAKERS or ((name in _ARRAY_ARITHMETIC or pointwise(value.rule)) and any(
            isinstance(a, Var) and a.name in arrays for a in value.args))
    return False


def _gives_int(value, ints: set) -> bool:
    """Does this right-hand side surely give one int (a loop counter, arithmetic of ints, a length)?"""
    if isinstance(value, Copy):
        return _is_int_atom(value.value, ints)
    if isinstance(value, Prim) and value.rule.name in ("add", "sub", "mul", "floordiv", "mod", "neg"):
        return all(_is_int_atom(a, ints) for a in value.args)
    return isinstance(value, Prim) and value.rule.name == "len"


def _rank(value, ranks: dict, ints: set, lengths: dict) -> int | None:
    """The ndim of the array a right-hand side gives, where it follows from ranks and shape lengths
    already known; None where lowering cannot tell."""
    if isinstance(value, Copy) and isinstance(value.value, Var):
        return ranks.get(value.value.name)
    if isinstance(value, Copy) and type(value.value.value) in (int, float, bool):
        return 0
    if isinstance(value, Load):
        base = ranks.get(value.base.name)
        fixed = [i for i in value.index if not isinstance(i, Slice)]
        if base is None or not all(isinstance(i, Const) and type(i.value) is int or isinstance(i, Var) and i.name in ints
                                   for i in fixed):
            return None
        return base - len(fixed)
    if not isinstance(value, Prim) or not value.args:
        return None
    name, first = value.rule.name, value.args[0]
    if name in ("zeros", "ones", "empty", "full"):
        if isinstance(first, Const):
            return len(first.value) if isinstance(first.value, tuple) else 1
        return 1 if first.name in ints else lengths.get(first.name)
    if name in ("copy", "zeros_like", "ones_like", "empty_like", "full_like", "neg", "inv") \
            or name == "transpose" and len(value.args) == 1:
        return ranks.get(first.name) if isinstance(first, Var) else None
    if name in ("eye", "identity"):
        return 2
    if name in ("atleast_1d", "atleast_2d", "atleast_3d") and len(value.args) == 1:
        rank = 0 if isinstance(first, Const) else ranks.get(first.name)
        return None if rank is None else max(rank, int(name[-2]))
    if name == "outer":
        return 2
    if name == "squeeze" and len(value.args) == 2 and isinstance(value.args[1], Const) and isinstance(first, Var) \
            and value.args[1].value is not None and first.name in ranks:
        axes = value.args[1].value
        return ranks[first.name] - (len(axes) if isinstance(axes, tuple) else 1)
    if name == "reshape" and len(value.args) == 2:  # the new shape's length
        shape = value.args[1]
        if isinstance(shape, Const):
            return len(shape.value) if isinstance(shape.value, tuple) else 1
        return 1 if shape.name in ints else lengths.get(shape.name)
    if value.rule.reduces:
        return _reduced_rank(value, ranks)
    operands = [0 if isinstance(a, Const) and type(a.value) in (int, float, bool)
                else ranks.get(getattr(a, "name", None)) for a in value.args]
    if pointwise(value.rule) and None not in operands:
        return max(operands)  # broadcasting
    operands = operands[:2]
    if name == "matmul" and None not in operands and min(operands) >= 1:
        return max(operands) if min(operands) > 1 else max(operands) - 1
    if name == "dot" and None not in operands:  # a sum over a's last axis and b's second-to-last
        return max(operands) if min(operands) == 0 else operands[0] + operands[1] - 2
    return None


def _reduced_rank(value: Prim, ranks: dict) -> int | None:
    """The rank of a NumPy reduction's result, given constant `axis` and `keepdims`: 0 over every axis,
    one less per axis reduced, the operand's own with keepdims."""
    first, kwargs = value.args[0], dict(value.kwargs)
    rank = 0 if isinstance(first, Const) else ranks.get(first.name)
    axis = value.args[1] if len(value.args) == 2 else kwargs.get("axis", Const(None))
    keep = kwargs.get("keepdims", Const(False))
    if rank is None or len(value.args) > 2 or not isinstance(axis, Const) or not isinstance(keep, Const):
        return None
    if keep.value:
        return rank
    if axis.value is None:
        return 0
    return rank - (len(axis.value) if isinstance(axis.value, tuple) else 1)


def _is_int_atom(atom, ints: set) -> bool:
    return isinstance(atom, Const) and type(atom.value) is int or isinstance(atom, Var) and atom.name in ints


def _fills(call) -> bool:
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "fill" \
        and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star


def _written_at_run_time(func: cst.FunctionDef) -> set[str]:
    """Names whose items are set in a branch or loop (`t[0] = v` under `if`), or updated (`t[k] += v`):
    bound to a list, such a name is an array (a list's items are fixed when the code is generated)."""
    found = set()
    for node in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda)):
        if isinstance(node, (cst.If, cst.For, cst.While, cst.Try, cst.With)):
            found |= {_subscripted_name(t.target) for t in _walk(node, skip=(cst.FunctionDef, cst.Lambda))
                      if isinstance(t, cst.AssignTarget)}
        elif isinstance(node, cst.AugAssign):
            found.add(_subscripted_name(node.target))
    return found - {None}


def _subscripted_name(target) -> str | None:
    """`t` of a target `t[i]` or `t[i][j]`; None for any other target."""
    if not isinstance(target, cst.Subscript):
        return None
    while isinstance(target, cst.Subscript):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


def _through_transpose(target: cst.Subscript) -> bool:
    return isinstance(target.value, cst.Attribute) and target.value.attr.value == "T"


def _length(value, ranks: dict, lengths: dict) -> int | None:
    """How many items a tuple-valued right-hand side has, where lowering knows: `(a, b)`, `x.shape`,
    `x.shape[:2]`."""
    if isinstance(value, Prim) and value.rule.name == "make_tuple":
        return len(value.args)
    if isinstance(value, Prim) and value.rule.name == "shape" and isinstance(value.args[0], Var):
        return ranks.get(value.args[0].name)
    if isinstance(value, Load) and len(value.index) == 1 and isinstance(value.index[0], Slice) \
            and value.base.name in lengths:
        bounds = (value.index[0].lower, value.index[0].upper, value.index[0].step)
        if all(b is None or isinstance(b, Const) and type(b.value) is int for b in bounds):
            return len(range(lengths[value.base.name])[slice(*(b and b.value for b in bounds))])
    return None


def _updated_only(func: cst.FunctionDef) -> set[str]:
    """Names the function only updates in place (`x += ...`), never binds anew."""
    updated = {n.target.value for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda))
               if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)}
    return updated - _bound_by(func, (cst.AssignTarget, cst.AnnAssign, cst.For))


QUIET_CONTEXTS = (np.errstate, warnings.catch_warnings, np.printoptions)
TRIANGLES = (np.triu_indices, np.tril_indices, np.triu_indices_from, np.tril_indices_from)
FRESH_OUTPUTS = (np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.zeros, np.ones, np.empty, np.full, np.array,
                 np.copy)


def _output_argument(call: cst.Call, fn) -> cst.Arg | None:
    """The argument a NumPy call writes its result into: `out=`, a ufunc's operand after its inputs
    (`np.add(a, b, c)`), or the one NumPy's signature puts after the inputs (`np.dot(a, b, out)`,
    `np.clip(a, lo, hi, out)`)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "out":
            return a
    positional = [a for a in call.args if a.keyword is None and not a.star]
    inputs = fn.nin if isinstance(fn, np.ufunc) or _numba_ufunc(fn) else _OUT_AFTER.get(fn)
    return positional[inputs] if inputs is not None and len(positional) > inputs else None


def _numba_ufunc(fn) -> bool:
    """A `@numba.vectorize` function, a ufunc of numba's: `f(x, y, out)` writes into `out`, as NumPy's do."""
    return isinstance(getattr(getattr(fn, "_dispatcher", None), "py_func", None), types.FunctionType) \
        and _gufunc_layout(fn) is None and isinstance(getattr(fn, "nin", None), int)


_OUT_AFTER = {np.dot: 2, np.clip: 3}  # NumPy functions (not ufuncs) whose output argument may come by position


def _written_arguments(fn, func: cst.FunctionDef, depth: int = 0, updates: bool = False) -> set[str]:
    """Parameters of `fn` (its syntax tree `func`) that it writes into (`x[i] = ...`, `x[i] += ...`), or
    that a Python helper it calls writes into, as far as a few calls deep. With `updates`: also those a
    helper updates with `x += ...` (which writes into an array, and rebinds a number)."""
    params = _param_names(func)

    def base(node):
        while isinstance(node, cst.Subscript):
            node = node.value
        return node.value if isinstance(node, cst.Name) else None

    found = set()
    viewed = {}  # `p = position[i][:3]`: p may view a parameter, and `p += ...` write into it
    for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda)):
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name) \
                and isinstance(n.value, cst.Subscript) and base(n.value) in params:
            viewed[n.targets[0].target.value] = base(n.value)
    for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda)):
        if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value in viewed:
            found.add(viewed[n.target.value])
        if isinstance(n, (cst.AssignTarget, cst.AugAssign)):
            found |= {base(t) for t in _unpacked(n.target) if isinstance(t, cst.Subscript)}  # `a[0], b[0] = ...` too
        elif isinstance(n, cst.Call) and (written := _output_argument(n, _resolved(fn, n.func))) is not None:
            found.add(base(written.value))
        elif isinstance(n, cst.Call) and depth < 4:
            found |= _written_through_call(fn, n, depth, updates)
    if updates and depth:
        found |= _updated_only(func)
    return found & params


def _unpacked(target) -> list:
    """The targets an assignment target names: itself, or those of a tuple or list, however nested."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [t for el in target.elements for t in _unpacked(el.value)]
    return [target]


def _written_through_call(fn, call: cst.Call, depth: int, updates: bool) -> set[str]:
    """The caller's names a call hands to parameters its (Python) callee writes into."""
    callee = _callee(fn, call.func)
    if callee is None:
        return set()
    try:
        node = parse_function(callee).node
    except Exception:  # no source, no `def`: inlining says so where it matters
        return set()
    method = _resolved(fn, call.func)
    bound = isinstance(method, types.MethodType)  # `obj.step(x)`, or the method a wrapper of `grad(obj.step)` calls
    written = _written_arguments(method if bound else callee, node, depth + 1, updates)
    positional = [p.name.value for p in node.params.params][1 if bound else 0:]
    handed = {}
    for k, a in enumerate(call.args):
        if isinstance(a.value, cst.Name) and not a.star:
            name = a.keyword.value if a.keyword is not None else (positional[k] if k < len(positional) else None)
            handed[name] = a.value.value
    return {handed[p] for p in written if p in handed}


def _resolved(fn, func):
    """What a call's `f` or `module.f` names in `fn`'s scope (None: unknown, or a local); in a bound
    method, `self.f` too."""
    try:
        if isinstance(func, cst.Name):
            return _name_in(fn, func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            return getattr(_name_in(fn, func.value.value), func.attr.value)
    except (KeyError, AttributeError):
        pass
    return None


def _name_in(fn, name: str):
    if isinstance(fn, types.MethodType):
        first = next(iter(inspect.signature(fn.__func__).parameters), None)
        if name == first:
            return fn.__self__
        fn = fn.__func__
    return Parsed.resolve_in(fn, name)


def _callee(fn, func) -> types.FunctionType | None:
    """The Python function a call's `f` or `module.f` names in `fn`'s scope, if any (not a library's)."""
    obj = _resolved(fn, func)
    obj = obj.__func__ if isinstance(obj, types.MethodType) else obj
    obj = unwrap(obj) if obj is not None else None
    if not isinstance(obj, types.FunctionType) or _in_library(obj) or rules.lookup_object(obj) is not None:
        return None
    return obj


def _deletes_only_names(target) -> bool:
    """`del t` or `del a, b`: unbinding locals, not removing items or attributes."""
    if isinstance(target, cst.Tuple):
        return all(_deletes_only_names(element.value) for element in target.elements)
    return isinstance(target, cst.Name)


def _dotted(node) -> str:
    """`np.linalg.norm` for the attribute chain naming it."""
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value


def _keywords_in_place(t, args: list, kwargs: list) -> tuple[list, list]:
    """Keyword operands a rule differentiates (`norm.logpdf(x, loc=mu, scale=s)`) become positional, with
    the defaults of any skipped before them: only positional operands get derivatives."""
    params, named = t.params[2:], dict(kwargs)
    moved = [i for i in t.differentiable_positions() if i >= len(args) and params[i] in named]
    if not moved:
        return args, kwargs
    for param in params[len(args):max(moved) + 1]:
        args = args + [named.pop(param) if param in named else Const(t.defaults[param])]
    return args, [(k, v) for k, v in kwargs if k in named]


def _bind(fn, args, kwargs) -> dict:
    """The callee's parameters bound to the caller's atoms, trees and objects; defaults read where they live."""
    import inspect

    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    for name, p in sig.parameters.items():
        if name not in bound.arguments and p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            bound.arguments[name] = () if p.kind is p.VAR_POSITIONAL else {}  # `*args`, `**options` left empty
        elif name not in bound.arguments:
            default = p.default
            if isinstance(default, (int, float, bool, type(None))):
                bound.arguments[name] = Const(default)
            else:
                gencache.note(fn, name, _NOT_STATIC)  # a default is no name a later process can look up
                bound.arguments[name] = StaticRef(default, Hidden(fn, (("default", name),)))
    return dict(bound.arguments)


def _draws(fn) -> bool:
    """Does calling `fn` draw random numbers (so it runs once, where the user wrote it)?"""
    owner = getattr(fn, "__self__", None)
    module = getattr(fn, "__module__", None) or ""
    return isinstance(owner, (np.random.RandomState, np.random.Generator, random.Random)) or \
        module == "random" or module.startswith("numpy.random")


def _pure(fn) -> bool:
    """May a call of `fn` on constants be evaluated when the code is generated? (math, NumPy, SciPy)"""
    module = getattr(fn, "__module__", None) or ""
    return not _draws(fn) and (isinstance(fn, np.ufunc) or module.split(".")[0] in ("math", "numpy", "scipy"))


def _folded(fn, args, kwargs) -> Const | None:
    """A pure NumPy/math call on numbers known when the code is generated, as a number (else None)."""
    atoms = list(args) + [a for _, a in kwargs]
    if not _pure(fn) or not all(isinstance(a, Const) and type(a.value) in (int, float) for a in atoms):
        return None
    with np.errstate(all="ignore"):
        try:
            value = fn(*(a.value for a in args), **{k: a.value for k, a in kwargs})
        except Exception:  # let the call run where the user wrote it, and fail there
            return None
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 and value.dtype in (np.float64, np.int64):
        return Const(value.item())  # (a float32 stays a call: its type is its point)
    return Const(value) if type(value) in (int, float) else None


def _evaluate(fn, args, kwargs, then=lambda value: value):
    """`then(fn(*args, **kwargs))` on constant atoms, as a Const when it is a number; else None."""
    try:
        value = then(fn(*[a.value for a in args], **{k: v.value for k, v in kwargs}))
    except Exception:  # left to the call at run time, which raises the same error where the user expects it
        return None
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return Const(value.item() if isinstance(value, np.generic) else value)
    return None


def _positional(fn, args: list, kwargs: list) -> tuple[list, list]:
    """Keyword operands as positional ones, defaults filled in before them (`np.random.normal(size=n)`
    as `np.random.normal(0.0, 1.0, n)`): numba's versions of many NumPy functions take no keywords."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    names = [p.name for p in params]
    given = dict(kwargs)
    if not kwargs or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params) or \
            not set(given) <= set(names[len(args):]):
        return args, kwargs
    last = max(names.index(k) for k in given)
    filled = list(args)
    for p in params[len(args):last + 1]:
        if p.name in given:
            filled.append(given[p.name])
        elif p.default is not p.empty and isinstance(p.default, (int, float, bool, type(None))):
            filled.append(Const(p.default))
        else:
            return args, kwargs
    return filled, []


class RaisesHere(Exception):
    """The statement being lowered always raises where it runs: the rest of its block is left out."""


class ChangesAtRunTime(Exception):
    """An int attribute of an object, kept as a constant, is changed where the change runs conditionally
    or repeatedly: lowering starts again, with the attribute a variable from the start."""

    def __init__(self, *keys):
        super().__init__(*keys)
        self.keys = keys


def normalize(fn, plain: frozenset = frozenset(), arg_trees: dict | None = None,
              arg_kinds: dict | None = None, copy_arguments: bool = True) -> ir.Function:
    """Lower `fn`; calls to the custom functions in `plain` are inlined as their primal code.

    `copy_arguments`: the body works on copies of the arguments it writes into (what derivatives need);
    False for the function as written, which writes into its caller's arrays as NumPy does.

    `arg_trees` maps parameters that receive pytrees to their structure: the lowered function
    takes their leaves instead, and the code is specialized to that structure. `arg_kinds` maps
    the other parameters to (ndim, type) of their arguments, for code that asks (`x.ndim`,
    `isinstance`); without it such code raises TypesNeeded, and the caller specializes.
    """
    varying: set = set()
    while True:
        try:
            return _normalize(fn, plain, arg_trees, arg_kinds, copy_arguments, varying)
        except ChangesAtRunTime as again:
            varying.update(again.keys)


def _normalize(fn, plain, arg_trees, arg_kinds, copy_arguments, varying: set) -> ir.Function:
    from s2sad import runtime

    parsed = parse_function(fn)
    # Generated code also calls numpy, math, the tape type and the runtime helpers: never shadow them.
    reserved = set(runtime.__all__) | {"np", "math", "List"}
    names = Names(user_names(parsed.node) | reserved)
    temps: set = set()
    own = assigned_names(parsed.node) | reserved
    outside = HiddenParams(names, user_names(parsed.node) - own, own, varying=varying)
    lw = Lowerer(parsed, names, temps, [parsed.fn], plain=plain, arg_trees=arg_trees or {}, hidden=outside,
                 copy_arguments=copy_arguments, kinds=dict(arg_kinds) if arg_kinds is not None else UnknownKinds())
    body: list = []
    outputs = lw.lower_body(None, body)
    function = ir.Function(
        name=parsed.name, params=lw.params + list(outside.params.values()), body=body, outputs=outputs,
        hidden=outside.listed(), copied=tuple(lw.copied), fixes_unit_axes=outside.pins_units,
        filename=parsed.filename, firstline=parsed.line, source_hash=parsed.source_hash, user_names=set(names.taken) - temps,
        temps=temps, returns_tuple=lw.ret.is_tuple, output_shape=lw.ret.shape, spelled=lw.spelled,
        generated=written_by_s2sad(parsed.fn), asks_types=isinstance(lw.kinds, UnknownKinds) and lw.kinds.asked,
        arrays=frozenset(lw.arrays | {p for p, kind in (arg_kinds or {}).items() if kind and kind[0] > 0}),
        elements=frozenset(lw.elements), typed=arg_kinds is not None,
        exits=frozenset(lw.exits),
    )
    decide_constant_branches(function)
    if copy_arguments:  # derivatives follow values: a double buffer's exchange becomes copies
        copy_swapped_buffers(function)
    return function

"""The Lowerer: the state of one function's lowering, the facts every emitted statement updates
(arrays, ints, ranks, unit axes, tuple lengths, views), inlining (each callee gets a Lowerer of its own,
sharing those facts), and the entry that binds a function's parameters and lowers its body. Its methods
for each kind of syntax come from the mixins it combines, one module each.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from dataclasses import dataclass, field

import libcst as cst
import numpy as np

from s2sad import gencache, hidden, ir, rules
from s2sad.errors import SourceUnavailableError, UnsupportedError, located_at
from s2sad.frontend import Parsed, parse_function
from s2sad.hidden import Hidden, is_hidden_array
from s2sad.names import Names
from s2sad.tree import static_object
from s2sad.ir import Assign, Const, Copy, Load, Prim, Slice, Store, Var
from s2sad.units import unit_axes
from s2sad.normalize.assignments import AssignmentsMixin
from s2sad.normalize.calls import CallsMixin, _output_argument
from s2sad.normalize.expressions import ExpressionsMixin
from s2sad.normalize.facts import (_fold_ints, _gives_int, _kept_dtype, _length, _makes_array, _makes_float32,
                                   _makes_generator, _rank)
from s2sad.normalize.inactive import InactiveMixin
from s2sad.normalize.iteration import IterationMixin
from s2sad.normalize.pytrees import PytreesMixin, is_tree, unflatten
from s2sad.normalize.state import _NOT_STATIC, HiddenParams, NestedFunction, Returns, StaticRef, UnknownKinds, View
from s2sad.normalize.statements import StatementsMixin
from s2sad.normalize.static import StaticMixin, _callee, _resolved
from s2sad.normalize.syntax import (_bind_parameters, _bound_by, _find_returns, _find_yields, _gathering_params,
                                    _param_names, _params_in_order, _unpacked, _updated_only, _walk,
                                    _written_at_run_time, assigned_names, user_names)
from s2sad.normalize.tables import RECURSION_DEPTH


@dataclass
class Lowerer(StatementsMixin, AssignmentsMixin, IterationMixin, ExpressionsMixin, PytreesMixin, StaticMixin,
              CallsMixin, InactiveMixin):
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
    singles: set = field(default_factory=set)  # IR names of arrays made float32 here (np.zeros(3, dtype=np.float32))
    dtypes: dict = field(default_factory=dict)  # IR name -> dtype of an argument's view or copy (`x.dtype == ...`)
    exits: set = field(default_factory=set)  # flags `return` sets (shared): once set, nothing they guard runs again
    growing: dict = field(default_factory=dict)  # user name -> Growth: a list a runtime loop appends to, as an array
    ints: set = field(default_factory=set)  # IR names known to hold one int (loop counters, their arithmetic)
    written_lists: set = field(default_factory=set)  # user names of lists written item by item at run time
    slots: dict = field(default_factory=dict)  # user name -> variables of a tuple bound again on each pass
    views: dict = field(default_factory=dict)  # IR name -> View: a basic-indexing read of another array
    ranks: dict = field(default_factory=dict)  # IR name -> ndim of an array whose rank lowering knows
    units: dict = field(default_factory=dict)  # IR name -> which axes have length one, where known (units.py)
    lengths: dict = field(default_factory=dict)  # IR name -> length of a shape tuple made in the function
    shapes: set = field(default_factory=set)  # IR names of `x.shape` tuples: their items are ints
    generators: set = field(default_factory=set)  # IR names of random generators made here (np.random.default_rng())
    updates_callers: set = field(default_factory=set)  # parameters a helper updates in place: the caller's arrays
    passed_views: set = field(default_factory=set)  # parameters a helper never rebinds, passed a view of an array
    jumped_statically: bool = False  # the last statement was an `if` on a constant whose branch ends in a jump
    kinds: dict = field(default_factory=dict)  # variable -> (ndim, type, unit axes, dtype) of an argument not rebound
    arguments: set = field(default_factory=set)  # IR names of the outermost function's parameters (shared)
    outer_conditional: bool = False  # inlined at a call that runs conditionally or repeatedly
    stand_in_call: tuple | None = None  # (caller, call node) of the NumPy call a stand-in of rules.inlined lowers

    # ---------------------------------------------------------------- helpers
    def err(self, node, message, hint=""):
        if node not in self.parsed.positions and self.loc is not None:  # a node s2sad built: point at the line
            loc = self.loc
            return UnsupportedError(located_at(message, loc, hint))
        return self.parsed.error(node, message, hint)

    def dtype_of(self, atom):
        """The dtype of an argument (where the code is generated for argument types), or of a view or copy of
        one; else None."""
        if not isinstance(atom, Var):
            return None
        if atom.name in self.dtypes:
            return self.dtypes[atom.name]
        kind = None if isinstance(self.kinds, UnknownKinds) else self.kinds.get(atom.name)
        return kind[3] if kind is not None and len(kind) > 3 else None

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
        if _makes_float32(value, self.singles):
            self.singles.add(target)
        else:
            self.singles.discard(target)
        dtype = _kept_dtype(value, self.dtype_of)
        if dtype is None:
            self.dtypes.pop(target, None)
        else:
            self.dtypes[target] = dtype
        if isinstance(value, Prim) and value.rule.name == "shape":
            self.shapes.add(target)
        else:
            self.shapes.discard(target)
        if _makes_generator(value, self.generators):
            self.generators.add(target)
        else:
            self.generators.discard(target)
        if _gives_int(value, self.ints, self.shapes):
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

    def stored_view(self, node, base: str, index: tuple, out) -> "tuple | None":
        """`col[k] = v` where `col` views an array along whole axes and ints (`col = m[:, j]`, `row = m[i]`):
        the store's place in the viewed array, (root, index), or None. The view was read in this block, or
        handed to this helper's parameter, which it never rebinds: the caller's names it was read with keep
        their values while the helper runs."""
        view = self.views.get(base)
        name = node.value if isinstance(node, cst.Name) else None
        if view is None or name is None or view.out is not out and name not in self.passed_views \
                or view.root in self.arguments:  # the caller's array, which a write must leave alone
            return None
        whole = Slice(None, None, None)
        if not all(i == whole or self.fixed_item(i) and not isinstance(i, Slice) for i in view.index) or \
                not all(self.fixed_item(i) for i in index):
            return None
        rank = self.ranks.get(view.root)
        if whole not in view.index and (rank is None or rank <= len(view.index)):
            return None  # `x = v[i]` of a vector is a number, not a view
        items = iter(index)
        placed = tuple(next(items, i) if i == whole else i for i in view.index)
        return view.root, placed + tuple(items)

    def write_through(self, name: str, view: "View", new, out):
        """`p op= e` of a view: the new values go into the viewed array, and `p` reads them back from it."""
        out.append(Store(view.root, view.index, new, self.loc))
        target = self.var(name)
        version = self.new_version(name)
        self.emit(out, version or target, Load(Var(view.root), view.index))
        if version:
            self.scope[name] = version

    def bound_arguments(self, call: cst.Call, fn) -> dict:
        """The call's argument nodes by `fn`'s parameter names (unset ones absent)."""
        if any(a.star for a in call.args):
            raise self.err(call, "pass the arguments one by one here, without `*` or `**`")
        try:
            keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}  # NumPy's own
            return dict(inspect.signature(fn).bind(*[a.value for a in call.args if a.keyword is None], **keywords)
                        .arguments)
        except TypeError as exc:
            raise self.err(call, f"these arguments do not fit `{fn.__name__}`: {exc}") from None

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

    # ------------------------------------------- inlining: a callee gets a Lowerer of its own
    def inline(self, node, fn, leading, out, target):
        args = leading + [self.value(a.value, out) for a in node.args if a.keyword is None]
        kwargs = {a.keyword.value: self.value(a.value, out) for a in node.args if a.keyword is not None}
        if fn in self.stack:
            self.check_recursion(node, fn, args + list(kwargs.values()))
        try:
            parsed = parse_function(fn)
        except SourceUnavailableError as exc:  # a wrapper made by exec(), as numba_stats makes norm.logpdf
            called = self.err(node, f"`{cst.Module([]).code_for_node(node.func)}` is called here: {exc}",
                              "call the function it wraps, or give it a rule (s2sad.custom_vjp)")
            raise SourceUnavailableError(str(called)) from None
        mentioned = user_names(parsed.node)
        self.names.taken |= mentioned  # fresh temps must not shadow the callee's globals
        self.hidden.free |= mentioned - self.hidden.own  # fresh never hands these out: a hidden parameter may
        callee = Lowerer(parsed, self.names, self.temps, self.stack + [fn], plain=self.plain, spelled=self.spelled,
                         hidden=self.hidden, **self.shared_facts(), outer_conditional=self.conditional())
        callee.loc = self.loc
        callee.stand_in_call = self.stand_in_call or ((self, node) if _is_stand_in(fn) else None)
        try:
            args = self.with_hidden(fn, args)
            bound = _bind(fn, args, kwargs)
        except TypeError as exc:
            raise self.err(node, f"bad call to `{fn.__name__}`: {exc}") from None
        self.lists_to_arrays(node, bound, _written_at_run_time(parsed.node), out)
        return self.result_of(callee, callee.lower_body(bound, out), out, target)

    def shared_facts(self) -> dict:
        """What an inlined callee's lowerer shares with this one: what is known of the IR names both write."""
        return dict(arrays=self.arrays, elements=self.elements, exits=self.exits, kinds=self.kinds, ints=self.ints,
                    views=self.views, ranks=self.ranks, units=self.units, lengths=self.lengths,
                    generators=self.generators, arguments=self.arguments, dtypes=self.dtypes)

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
                         hidden=self.hidden, enclosing=maker, **self.shared_facts(),
                         outer_conditional=self.conditional())
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
        live = _live_branches(func, bound) if bound is not None else func
        rebound = assigned_names(live.with_changes(params=cst.Parameters())) if bound is not None else set()
        updated_only = _updated_only(live)
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
                obj = static_object(self.arg_trees[p.name.value])  # a function or object: part of the structure
                self.objects[p.name.value] = StaticRef(obj, Hidden(obj, (("object", None),)))
                continue
            if p.name.value in self.arg_trees:  # a pytree argument: the generated code takes its leaves
                self.trees[p.name.value] = self.leaf_tree(self.arg_trees[p.name.value], p.name.value)
                continue
            value = bound[p.name.value] if bound is not None else None
            if isinstance(value, Var) and p.name.value not in rebound:
                self.scope[p.name.value] = value.name  # an inlined callee reads the caller's variable itself
                if value.name in self.temps:  # `fill(c[:, j])`: messages name the parameter, not the temporary
                    self.spelled.setdefault(value.name, p.name.value)
                if value.name in self.views:
                    self.passed_views.add(p.name.value)
                continue
            if isinstance(value, Var) and p.name.value in updated_only and self.holds_array(value):
                self.scope[p.name.value] = value.name  # `force += ...` on the caller's array: NumPy writes into it
                self.updates_callers.add(p.name.value)
                continue
            if isinstance(value, Var) and p.name.value in updated_only and value.name not in self.ranks \
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
                if isinstance(value, Var) and not isinstance(self.kinds, UnknownKinds) and value.name in self.kinds:
                    self.kinds[name] = self.kinds[value.name]  # a helper's copy of an argument: its type is known
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


def _live_branches(func: cst.FunctionDef, bound: dict) -> cst.FunctionDef:
    """`func` without the branches that its parameters' bindings decide, as `static_comparison` decides
    them while lowering: `p is None` of a parameter bound to the caller's variable or a constant (never None) or
    to None,
    `p is q` of two parameters bound to one variable. What a dead branch assigns does not rebind the
    parameter, so `if out is None: out = np.empty_like(x)` called with the caller's buffer (madmom's
    `_sigmoid(x, out=buf)`) writes into that buffer. A test is decided only for parameters the live code
    never rebinds (not even with `p += ...` for `is` between two), so the lowering decides it alike."""
    if not any(isinstance(n, cst.ComparisonTarget) and isinstance(n.operator, (cst.Is, cst.IsNot))
               for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda))):
        return func
    identity_tests = {p for p, v in bound.items() if isinstance(v, Var) or isinstance(v, Const) and v.value is None}
    none_tests = identity_tests | {p for p, v in bound.items() if isinstance(v, Const)}  # "wrap" is not None
    while True:
        decider = _DecidedBranches(bound, none_tests, identity_tests)
        live = func.with_changes(body=func.body.visit(decider))
        if not decider.used:
            return func
        rebinds = _bound_by(live, (cst.AssignTarget, cst.AnnAssign, cst.For, cst.NamedExpr))
        updates = _bound_by(live, (cst.AugAssign,))
        stale = decider.used & rebinds | decider.used_as_identity & updates
        if not stale:
            return live
        none_tests -= rebinds
        identity_tests -= rebinds | updates


class _DecidedBranches(cst.CSTTransformer):
    """Replaces each `if` whose test `_live_branches` decides by the branch that runs."""

    def __init__(self, bound: dict, none_tests: set, identity_tests: set):
        super().__init__()
        self.bound, self.none_tests, self.identity_tests = bound, none_tests, identity_tests
        self.used, self.used_as_identity = set(), set()

    def visit_FunctionDef(self, node) -> bool:
        return False  # a nested function's names are its own

    def visit_Lambda(self, node) -> bool:
        return False

    def decide(self, test) -> bool | None:
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
                not isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)):
            return None
        sides = [test.left, test.comparisons[0].comparator]
        if not all(isinstance(n, cst.Name) for n in sides):
            return None
        names = [n.value for n in sides if n.value != "None"]
        if len(names) == 1 and names[0] in self.none_tests:
            self.used.add(names[0])
            same = self.bound[names[0]] == Const(None)
        elif len(names) == 2 and set(names) <= self.identity_tests:
            self.used.update(names)
            self.used_as_identity.update(names)
            a, b = (self.bound[n] for n in names)
            same = a == b if isinstance(a, Var) and isinstance(b, Var) else \
                isinstance(a, Const) and isinstance(b, Const)  # None is None; a variable is not None
        else:
            return None
        return same == isinstance(test.comparisons[0].operator, cst.Is)

    def leave_If(self, original, updated):
        taken = self.decide(updated.test)
        if taken is None:
            return updated
        if taken:
            return cst.FlattenSentinel(updated.body.body)
        if updated.orelse is None:
            return cst.RemoveFromParent()
        if isinstance(updated.orelse, cst.If):
            return updated.orelse
        return cst.FlattenSentinel(updated.orelse.body.body)


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


def _bind(fn, args, kwargs) -> dict:
    """The callee's parameters bound to the caller's atoms, trees and objects; defaults read where they live."""
    import inspect

    sig = inspect.signature(fn, follow_wrapped=False)
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


def _is_stand_in(fn) -> bool:
    """Is `fn` one of the functions s2sad writes NumPy and SciPy functions out as (rules/inlined.py)?"""
    return getattr(fn, "__module__", None) == rules.inlined.__name__

"""Statements and control flow: blocks, `if` (a constant test keeps one branch), `for` and `while`
(lists a run-time loop grows become arrays), `return`, `break` and `continue` as flags that guard the
rest of their block, `try`, `with` of contexts that only quiet warnings (np.errstate), and imports
inside the function.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings

import libcst as cst
import numba
import numpy as np

from s2sad import ir, rules
from s2sad.errors import TypesNeeded, UnsupportedError
from s2sad.frontend import unwrap
from s2sad.ir import Assign, Const, Copy, For, If, Push, Store, Var, While
from s2sad.objects import LocalObject
from s2sad.normalize.pytrees import flatten, is_tree
from s2sad.normalize.state import ChangesAtRunTime, Growth, Loop, NestedFunction, RaisesHere, StaticRef, UnknownKinds
from s2sad.normalize.static import _in_library, _module_of
from s2sad.normalize.syntax import _count_names, _deletes_only_names, _dotted, _param_names, _walk, assigned_names
from s2sad.normalize.tables import STATEMENT_HINTS


class StatementsMixin:
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
        elif isinstance(node, (cst.Global, cst.Nonlocal)) and not {n.name.value for n in node.names} & self.locals:
            pass  # declares names the function only reads: they read as they would without it
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

    def return_stmt(self, node: cst.Return, out) -> set:
        if self.stack[1:] and (node.value is None or (isinstance(node.value, cst.Name) and node.value.value == "None")):
            return self.return_nothing(node, out)
        if node.value is None:
            raise self.err(node, "a differentiated function must return a value")
        value = self.value(node.value, out)
        atoms, shape = flatten(value)
        if self.stack[1:] and any(isinstance(a, StaticRef) for a in atoms):
            return self.return_static(node, value)
        if any(isinstance(a, StaticRef) for a in atoms):
            kind = next(a.obj for a in atoms if isinstance(a, StaticRef))
            raise self.err(node, f"a differentiated function must return numbers or arrays (this returns "
                                 f"{getattr(kind, '__name__', type(kind).__name__)!r}, an object)",
                           "raise an error where no value exists (`raise RuntimeError(...)`), or return the value")
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
                 and step == Const(1) and all(isinstance(a, (Const, Var)) or self.numbers_row(a) is not None
                                              for a in self.trees[name])]
        for name in names:
            prefix = self.trees.pop(name)
            count = self.prim(out, "sub", (stop, start), hint="passes") if start != Const(0) else stop
            count = self.prim(out, "add", (count, Const(len(prefix))), hint="items") if prefix else count
            first_rank = None if not prefix else 0 if isinstance(prefix[0], Const) else \
                1 if isinstance(prefix[0], (tuple, list)) else self.ranks.get(prefix[0].name)
            if prefix and first_rank is None and isinstance(self.kinds, UnknownKinds):
                self.kind_of(prefix[0], required=True)  # `ys = [y0]` of an argument: its rank comes with its type
            shape = () if not prefix or first_rank == 0 else (Const(len(prefix[0])),) \
                if isinstance(prefix[0], (tuple, list)) else self.items_of(self.prim(out, "shape", (prefix[0],)), out)
            if shape is None:
                raise self.err(loop, f"`{name}` grows by one item per pass: s2sad makes it an array, and needs the "
                                     f"rank of its first item", "call grad(f) on arguments, or preallocate an array")
            growth = Growth(self.var(name), len(prefix), start, counter, count, out)
            widths = {len(item) if isinstance(item, (tuple, list)) else None for item in prefix}
            if len(widths) > 1:
                raise self.err(loop, f"`{name}` grows by one item per pass, and s2sad makes it an array: its items "
                                     "before the loop are rows of one length", "preallocate: `out = np.zeros((n, m))`")
            growth.width = next(iter(widths), None)
            if prefix:
                self.allocate(growth, shape, out)
            for k, item in enumerate(prefix):
                for index, value in self.row_items((Const(k),), item):
                    out.append(Store(growth.buffer, index, value, self.loc))
            self.growing[name] = growth
        return names

    def numbers_row(self, item) -> list | None:
        """The numbers of a tuple or list item, `(x, y)`, which a list grown into an array holds as a row."""
        if not isinstance(item, (tuple, list)) or not item:
            return None
        scalar = all(isinstance(e, Const) and type(e.value) in (int, float, bool)
                     or isinstance(e, Var) and self.ranks.get(e.name, 0) == 0 for e in item)  # (unknown: an item)
        return list(item) if scalar else None

    @staticmethod
    def row_items(at: tuple, item) -> list:
        """Where each number of a list's item goes: the item itself at `at`, or a tuple's numbers along its row."""
        if isinstance(item, (tuple, list)):
            return [(at + (Const(j),), value) for j, value in enumerate(item)]
        return [(at, item)]

    def allocate(self, growth: "Growth", shape, out):
        dims = self.prim(out, "make_tuple", (growth.count, *shape), hint="dims")
        self.prim(out, "zeros", (dims,), target=growth.buffer)
        growth.made = True

    def grow(self, call: cst.Call, out):
        """`llk.append(v)` in a loop that makes `llk` an array: the pass's row of it."""
        growth = self.growing[call.func.value.value]
        if isinstance(call.args[0].value, (cst.Tuple, cst.List)):  # `positions.append((x, y))`: a row of numbers
            row = self.numbers_row(self.value(call.args[0].value, out))
            if row is None:
                raise self.err(call.args[0].value, f"`{call.func.value.value}` grows by one item per pass, and s2sad "
                                                   "makes it an array: a tuple or list appended holds numbers here",
                               "append one array (np.concatenate of the parts), or preallocate: "
                               "`out = np.zeros((n, m))`")
            if growth.made and growth.width != len(row):
                raise self.err(call.args[0].value, f"`{call.func.value.value}` grows by one item per pass, and s2sad "
                                                   "makes it an array: the rows appended have the length of its items",
                               "append rows of one length, or preallocate: `out = np.zeros((n, m))`")
            if not growth.made:
                self.allocate(growth, (Const(len(row)),), growth.before)
                growth.width = len(row)
            index = self.grown_row(growth, out)
            for at, value in self.row_items((index,), row):
                out.append(Store(growth.buffer, at, value, self.loc))
            return
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
        out.append(Store(growth.buffer, (self.grown_row(growth, out),), item, self.loc))

    def grown_row(self, growth: "Growth", out):
        """The row this pass appends: the pass's number, after the items the list held before the loop."""
        index = Var(growth.counter)
        if growth.start != Const(0):
            index = self.prim(out, "sub", (index, growth.start), hint="row")
        if growth.prefix:
            index = self.prim(out, "add", (index, Const(growth.prefix)), hint="row")
        return index

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

    def while_stmt(self, node: cst.While, out) -> set:
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
        flags -= {loop.cont, loop.brk}
        return flags if node.orelse is None else flags | self.loop_else(node.orelse, stop_flags, out)

    def loop_else(self, orelse: cst.Else, stop_flags: list, out) -> set:
        """A loop's `else`, run where no `break` (nor `return`) ended the loop: poliastro's vallado raises
        there when Newton's iterations run out."""
        loc = self.loc
        body: list = []
        flags = self.branch(orelse.body.body, body)
        self.loc = loc
        if not stop_flags:
            out.extend(body)
        else:
            out.append(If(self.none_set(stop_flags, out), body, [], loc))
        return flags

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


QUIET_CONTEXTS = (np.errstate, warnings.catch_warnings, np.printoptions)

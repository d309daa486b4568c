"""Iteration: loops and comprehensions over static containers are unrolled; run-time loops walk
arrays, ranges, zip, enumerate, reversed and np.ndindex by a counter; the builtin reductions (sum, max,
min, any, all, math.prod) and list(), tuple(), dict() of static containers.
"""

from __future__ import annotations

import contextlib
import math

import libcst as cst
import numba
import numpy as np

from s2sad import rules
from s2sad.ir import Assign, Const, Copy, For, If, Load, Prim, Store, Var
from s2sad.normalize.pytrees import is_tree
from s2sad.normalize.state import _NOT_STATIC, Loop, UnknownKinds, Walk
from s2sad.normalize.syntax import _assign_targets, _parts, _plain_lambda, _target_names, _target_of
from s2sad.normalize.tables import REDUCER_START, REDUCERS, UNROLL_RANGE


class IterationMixin:
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
                any(self.static_value(it.func) is f for f in (reversed, list, tuple, numba.literal_unroll)):
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
        text = self.static_string(it)
        if text is not None:  # `for ii, vtype in enumerate(var_type)` of var_type='cc': one pass per character
            return [Const(c) for c in text]
        base = self.tree_of(it)
        if isinstance(base, dict):
            return [Const(k) for k in base]
        return list(base) if base is not None else None

    def static_string(self, node) -> str | None:
        """A string known when the code is generated: a literal, a parameter passed one, a global."""
        if isinstance(node, cst.SimpleString):
            return node.evaluated_value
        if isinstance(node, cst.Name) and node.value in self.trees:
            value = self.trees[node.value]
            return value.value if isinstance(value, Const) and isinstance(value.value, str) else None
        value = self.static_value(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        return value if isinstance(value, str) else None

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

    def folded_call(self, node: cst.Call, out, target):
        """`functools.reduce(f, (a, b, c))` of a tuple/list made when the code is generated: `f(f(a, b), c)`,
        `reduce(f, items, start)` starting from `start`."""
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        if len(positional) != len(node.args) or len(positional) not in (2, 3) \
                or not self.is_static_iterable(positional[1]):
            raise self.err(node, "functools.reduce is supported of a function and a tuple or list made in the code",
                           "write the calls out: f(f(a, b), c)")
        items = list(self.static_items(positional[1], out))
        if len(positional) == 3:
            items.insert(0, self.value(positional[2], out))
        if not items:
            raise self.err(node, "reduce() of an empty sequence with no initial value")
        folded = self.stashed(items[0])
        for k, item in enumerate(items[1:], 2):
            call = cst.Call(positional[0], [cst.Arg(cst.Name(folded)), cst.Arg(cst.Name(self.stashed(item)))])
            if k == len(items):
                return self.value(call, out, target)
            folded = self.stashed(self.value(call, out))
        return items[0]

    def stashed(self, value) -> str:
        """A fresh name that reads `value` (an atom or a static tree) where made syntax names it."""
        name = self.names.fresh("item")
        self.trees[name] = value
        return name

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
        if not self.is_static_iterable(arg) and fn in (list, tuple) and self.names_a_shape(arg):
            return fn(self.shape_items(arg, out))
        if not self.is_static_iterable(arg):
            raise self.err(node, f"{fn.__name__}() of an array or a run-time range: its length is only known at run "
                                 "time, and s2sad fixes tuples and lists when it generates code",
                           "index the array itself, or np.array(...) / x.copy() for a copy")
        return fn(self.static_items(arg, out))

    @staticmethod
    def names_a_shape(node) -> bool:
        """`x.shape` or `np.shape(x)`: a tuple whose length is the array's rank."""
        return isinstance(node, cst.Attribute) and node.attr.value == "shape" or isinstance(node, cst.Call) and \
            isinstance(node.func, cst.Attribute) and node.func.attr.value == "shape"

    def shape_items(self, node, out) -> tuple:
        """`list(x.shape)`: the shape's items, one per axis, where the array's rank is known (per argument
        rank, as `(n,) + x.shape` is)."""
        items = self.items_of(self.value(node, out), out)
        if items is None:
            self.ask_for_ranks(node)
            raise self.err(node, "a list of an array's shape needs the array's rank, which s2sad does not know here",
                           "index the shape: `n, m = x.shape`, then `[n, m]`")
        return items

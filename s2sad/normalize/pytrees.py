"""Static trees: tuples, lists, dicts and records that lowering keeps as Python containers of atoms.
flatten and unflatten take them apart and back; the methods read, join, repeat and index them, and make
a pytree argument's leaf parameters.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
import numpy as np

from s2sad.errors import TypesNeeded, UnsupportedError
from s2sad.ir import Const, Copy, If, Load, Record, Var
from s2sad.normalize.state import StaticRef, UnknownKinds
from s2sad.normalize.syntax import _count_names, _walk

# operators a list meets only an array with (a list joins or repeats with `+` and `*`)
ARRAY_OPERATORS = (cst.Subtract, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power, cst.MatrixMultiply)


class PytreesMixin:
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
            if obj is None and isinstance(base := self.static_ref(node), StaticRef) and is_tree(base.obj):
                return self.outside_tree(base.obj, base.where)  # `self.layers` of an object made outside
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

    def repeated(self, node: cst.BinaryOperation, out):
        """`[0.0] * n`, `(1,) * 3`: a tuple or list repeated a number of times known when the code is generated."""
        seq, count = (node.left, node.right) if self.names_a_container(node.left) else (node.right, node.left)
        items = self.value(seq, out)
        try:
            n = self.static_key(count)
        except UnsupportedError:
            lowered = self.expr(count, out)  # `[(1, 1)] * x.ndim`: a rank known for the argument types
            n = lowered.value if isinstance(lowered, Const) else lowered
        if not isinstance(n, int) and self.repeats_into_an_array(node, items):
            return self.prim(out, "full", (n if isinstance(n, Var) else self.expr(count, out), items[0]), hint="items")
        if not isinstance(n, int) and isinstance(self.kinds, UnknownKinds) and self.kinds.asked:
            self.ask_for_ranks(node)  # the count read a rank
        if not isinstance(n, int):
            raise self.err(node, "a list or tuple is repeated here a number of times known only at run time",
                           "make an array: np.zeros(n), np.full(n, value)")
        return type(items)(list(items) * n)

    def repeats_into_an_array(self, node: cst.BinaryOperation, items) -> bool:
        """Can `out = [0.0] * n`, n known at run time, be an array of n copies of the number? Where `out` is
        bound here only and read only where a list and an array agree: one item at a time (`out[i]`,
        written or read), measured (`len`), summed (`sum`, `np.sum`), made an array (`np.array`,
        `np.asarray`) or returned. A list repeated or joined again, grown, sliced or walked stays refused."""
        if not (isinstance(items, list) and len(items) == 1 and isinstance(items[0], Const)
                and type(items[0].value) is float):
            return False
        nodes = _walk(self.parsed.node)
        binding = [n for n in nodes if isinstance(n, cst.Assign) and n.value is node and len(n.targets) == 1
                   and isinstance(n.targets[0].target, cst.Name)]
        if not binding:
            return False
        name = binding[0].targets[0].target.value

        def names_it(n) -> bool:
            return isinstance(n, cst.Name) and n.value == name

        readers = (len, sum, np.sum, np.array, np.asarray)
        uses = [n for n in nodes if isinstance(n, cst.Subscript) and names_it(n.value) and len(n.slice) == 1
                and isinstance(n.slice[0].slice, cst.Index)] + \
               [n for n in nodes if isinstance(n, cst.Call) and len(n.args) == 1 and names_it(n.args[0].value)
                and any(self.callee_is(n.func, f) for f in readers)] + \
               [n for n in nodes if isinstance(n, cst.Return) and names_it(n.value)]
        return len(uses) + 1 == _count_names(self.parsed.node, name)

    def read_as_an_array(self, name: str) -> bool:
        """Is the list `name`, bound once (`x = [item[0] for item in face]`), read only where NumPy takes it as
        an array: passed to NumPy functions (`np.dot(x, np.roll(y, -1))`), measured, or read an item at a time?"""
        nodes = _walk(self.parsed.node)

        def names_it(n) -> bool:
            return isinstance(n, cst.Name) and n.value == name

        def numpy_reads(call) -> bool:
            fn = self.static_value(call.func)
            module = getattr(fn, "__module__", None)
            return fn is len or isinstance(fn, np.ufunc) or isinstance(module, str) and module.split(".")[0] == "numpy"

        bindings = [n for n in nodes if isinstance(n, cst.Assign) and any(names_it(t.target) for t in n.targets)]
        uses = [n for n in nodes if isinstance(n, cst.Subscript) and names_it(n.value) and len(n.slice) == 1
                and isinstance(n.slice[0].slice, cst.Index)] + \
               [a for n in nodes if isinstance(n, cst.Call) and numpy_reads(n) for a in n.args if names_it(a.value)] + \
               [n for n in nodes if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, ARRAY_OPERATORS)
                and names_it(n.left) != names_it(n.right)]  # `e - x`: a list meets an array here, or Python raises
        return len(bindings) == 1 and len(uses) + 1 == _count_names(self.parsed.node, name)

    def is_sequence(self, node) -> bool:
        return isinstance(node, (cst.Tuple, cst.List)) or isinstance(self.tree_of(node), (tuple, list))

    def joined(self, node: cst.BinaryOperation, out):
        """`(n,) + x.shape`: a tuple (or list) joined when the code is generated, item by item."""
        left, right = (self.items_of(self.value(side, out), out) for side in (node.left, node.right))
        if left is None or right is None:
            self.ask_for_ranks(node)
            raise self.err(node, "a tuple or list is joined here only with another one, or with an array's "
                                 "`.shape` whose rank s2sad knows", "write the items out: `(n, m, k)`")
        return type(left)([*left, *right]) if isinstance(left, list) else (*left, *right)

    def ask_for_ranks(self, node) -> None:
        """Where the code is made without the arguments' kinds (`s2sad.source(f)`), a length that follows
        their ranks asks for them: the caller generates the code again per argument type."""
        if isinstance(self.kinds, UnknownKinds):
            self.kinds.asked = True
            raise TypesNeeded(f"the length of `{cst.Module([]).code_for_node(node)}` follows the arguments' ranks: "
                              "s2sad generates the code per argument type when the function is called, so "
                              "`s2sad.source(f)` cannot read it; call grad(f) on arguments")

    def items_of(self, value, out):
        """A static tuple/list as it is, a shape tuple of known length as its items, else None."""
        if isinstance(value, (tuple, list)):
            return value
        if isinstance(value, Var) and value.name in self.lengths:
            return tuple(self.emit(out, self.temp(f"{value.name}_{k}"), Load(value, (Const(k),)))
                         for k in range(self.lengths[value.name]))
        return None

    def record_field(self, node: cst.Attribute, record=None):
        record = self.tree_of(node.value) if record is None else record
        try:
            return record.field(node.attr.value)
        except KeyError:
            names = ", ".join(record.names or ())
            raise self.err(node, f"no field `{node.attr.value}` here (fields: {names or 'none by name'})") from None

    def names_a_container(self, node) -> bool:
        return isinstance(node, (cst.Tuple, cst.List)) or isinstance(node, cst.Name) and node.value in self.trees \
            and is_tree(self.trees[node.value])

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

    def runtime_item(self, node, items, index_node, out, target):
        """`coeffs[i]` of a static tuple/list with a run-time index `i`: a constant table of numbers, or a
        chain of `if`s choosing among numbers and arrays."""
        if isinstance(items, dict):
            raise self.err(node, "a dict is indexed here with a key known only at run time",
                           "index it with a constant (a literal, or a str/int argument or global), or use a tuple")
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

    def static_slice(self, node, items, out):
        """`xs[a:b]` of a static tuple/list, with bounds known when the code is generated."""
        part = node.slice[0].slice
        bounds = [None if b is None else self.expr(b, out) for b in (part.lower, part.upper, part.step)]
        if any(b is not None and not (isinstance(b, Const) and type(b.value) is int) for b in bounds):
            raise self.err(node, "a tuple/list is sliced with constant bounds",
                           "s2sad resolves tuples and lists when it generates code")
        return items[slice(*(None if b is None else b.value for b in bounds))]


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


def _depth(value) -> int:
    return 1 + _depth(value[0]) if isinstance(value, (tuple, list)) and value else 0


def _nested_tuple(value):
    return tuple(_nested_tuple(v) for v in value) if isinstance(value, list) else value

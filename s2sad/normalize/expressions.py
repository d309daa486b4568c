"""Expressions: names, constants, operators, comparisons (those decided when the code is generated
folded), `and`/`or` and `a if c else b` as `If`s, attributes, and subscripts (index items, loads,
np.where's positions unpacked).
"""

from __future__ import annotations

import enum

import libcst as cst
import numpy as np

from s2sad import rules
from s2sad.hidden import is_hidden_array
from s2sad.ir import Assign, Const, Copy, If, Load, Prim, Record, Slice, Var
from s2sad.normalize.pytrees import _is_none, flatten, is_tree
from s2sad.normalize.state import _NOT_STATIC, NEWAXIS, NestedFunction, NumberType, Positions, PositionsAxis, StaticRef
from s2sad.normalize.static import _is_static_object
from s2sad.normalize.syntax import _lambda_def, _spelled
from s2sad.normalize.tables import (ATTRIBUTES, BINOPS, BITWISE, BITWISE_HINT, COMPARE, COMPARED, EXPRESSION_HINTS,
                                    NO_DERIVATIVE_OPERATOR)


class ExpressionsMixin:
    # ----------------------------------------------------------- expressions
    def value(self, node, out, target: str | None = None):
        """Lower an expression to an atom, or to a static tree (tuple/list/dict) of atoms."""
        if (field := self.object_field(node, out)) is not _NOT_STATIC:
            return field if target is None or not isinstance(field, (Var, Const)) else self.emit(out, target, Copy(field))
        if isinstance(node, (cst.Tuple, cst.List)):
            items = [item for el in node.elements for item in self.element_items(el, out)]
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
        if isinstance(node, cst.Call) and self.callee_is(node.func, map) and \
                isinstance(comp := self.map_as_generator(node), cst.GeneratorExp):
            return self.list_comp(cst.ListComp(comp.elt, comp.for_in), out)  # `a, b = map(np.array, (a, b))`
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

    def element_items(self, el, out) -> list:
        """The items an element of a tuple or list literal gives: itself, or (`(2 * d, *x.shape)`) the items
        of the tuple, list or shape it unpacks."""
        if not isinstance(el, cst.StarredElement):
            return [self.value(el.value, out)]
        items = self.items_of(self.value(el.value, out), out)
        if items is None:
            self.ask_for_ranks(el)
            raise self.err(el, "`*` unpacks here a tuple or list, or an array's `.shape` whose rank s2sad knows",
                           "write the items out: `(n, m, k)`")
        return list(items)

    def subscript(self, node: cst.Subscript, out, target):
        node = self.through_flat(node, out)
        base = self.value(node.value, out)
        if isinstance(base, PositionsAxis):
            raise self.unpacked_misused(node, base)
        if isinstance(base, Positions) and self.picks_the_only_axis(node, base, out):
            return self.flat_positions(node, base, out, target)
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

    def picks_the_only_axis(self, node: cst.Subscript, positions: Positions, out) -> bool:
        """`np.where(c)[0]` of a 1-D condition: the positions as one array of indices."""
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index) or \
                not self.is_static_key(node.slice[0].slice.value) or self.static_key(node.slice[0].slice.value) != 0:
            return False
        return self.operand_ranks(node, [positions.mask], "np.where(c)[0] needs the rank of c") == [1]

    def flat_positions(self, node: cst.Subscript, positions: Positions, out, target):
        """The indices of a 1-D mask's true items, np.flatnonzero's (numba has it): an index array like any other."""
        refusal = self.message_at(node, "np.where(c)[0] has no derivative")
        rule = rules.registry.Opaque("np.flatnonzero", refusal=refusal, spelled="np.flatnonzero")
        return self.emit(out, target or self.temp("positions"), Prim(rule, (positions.mask,), (), "np.flatnonzero"))

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
        if isinstance(node, cst.NamedExpr):  # `(n := n + 1) > 100`: the assignment, then its value
            return self.assignment_expression(node, out)
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
        if len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, (cst.In, cst.NotIn)):
            return self.membership(node, out, target)
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

    def membership(self, node: cst.Comparison, out, target):
        """`prob in (0, 1)`: a number known only at run time against a tuple or list of numbers made when the code
        is generated, as Python tests it: `==` with each item until one holds."""
        comp = node.comparisons[0]
        container, item = self.value(comp.comparator, out), self.expr(node.left, out)
        items = flatten(container)[0] if is_tree(container) and not isinstance(container, dict) else None
        refused = f"comparison `{_spelled(comp.operator)}` is supported of a number and a tuple or list of numbers"
        if items is None or not all(isinstance(a, (Const, Var)) for a in [item, *items]) or \
                any(self.operand_ranks(node, [item, *items], refused)):
            raise self.err(node, refused, "compare numbers with ==, !=, <, <=, > or >=; s2sad specializes code on "
                                          "argument structure, so decide `is None` / `in` outside the function")
        inside = isinstance(comp.operator, cst.In)
        if not items:
            return Const(not inside)
        result = target or self.temp("isin")
        op = "eq" if inside else "ne"
        self.prim(out, op, (item, items[0]), target=result)
        block = out
        for k in items[1:]:
            inner: list = []
            self.prim(inner, op, (item, k), target=result)
            test = self.stable_test(Var(result), inner, block)
            block.append(If(test, [], inner, self.loc) if inside else If(test, inner, [], self.loc))
            block = inner
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
        if isinstance(op, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)) and _reads_dtype(node.left):
            return self.dtype_comparison(node.left, op, right, out)
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

    def dtype_comparison(self, left: cst.Attribute, op, right, out) -> Const:
        """`x.dtype == np.float32`, `x.dtype not in (np.float32, np.float64)` of an argument: decided for the
        argument types the code is generated for."""
        dtype = self.argument_dtype(left, out)
        others = self.argument_dtype(right, out) if _reads_dtype(right) else self.static_arg(right)
        found = any(dtype == np.dtype(c) for c in (others if isinstance(others, tuple) else (others,)))
        return Const(found == isinstance(op, (cst.Equal, cst.In)))

    def argument_dtype(self, node: cst.Attribute, out) -> np.dtype:
        """The dtype of an argument, or of a view or copy of one, for the argument types the code is for."""
        atom = self.expr(node.value, out)
        if self.dtype_of(atom) is None:
            self.kind_of(atom, required=True)  # asks for the argument types while they are unknown
        if self.dtype_of(atom) is None:
            raise self.err(node, "a comparison of `.dtype` is decided when the code is generated: it reads the dtype "
                                 "of an argument of the function, or of a view or copy of one",
                           "decide it outside the function")
        return self.dtype_of(atom)

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
        if any(isinstance(v, StaticRef) and isinstance(v.obj, NumberType) for v in (a, b)):
            raise self.err(left, "a number's type() is compared here: Python and numba give different types "
                                 "(float, np.float64)", "test the kind instead: `isinstance(z, float)`")
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

    def assignment_expression(self, node: cst.NamedExpr, out):
        """The name keeps its variable (no new version, as in straight-line code): behind `and`, `or` or a
        conditional expression the assignment may not run, and the name is read after it either way."""
        self.nested += 1
        try:
            self.assign_to(node.target, node.value, out)
        finally:
            self.nested -= 1
        return self.expr(node.target, out)

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
        if isinstance(node.value, cst.Call):  # `newton(f, x0, fprime).root`: a field of the namedtuple a call returns
            made = self.value(node.value, out)
            if isinstance(made, Record):
                return self.record_field(node, made)
            base = self.refuse_non_atom(node.value, made)
        else:
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
        if (rank := self.known_rank(base)) is not None:
            return Const(rank)
        found = rules.lookup_object(np.ndim)
        return self.prim(out, found[0], (base,), target=target, hint=f"{getattr(base, 'name', 'x')}_ndim")

    def through_flat(self, node: cst.Subscript, out) -> cst.Subscript:
        """`x.flat[k]`, k an int, as the item it names in C order: `x[k]` of a vector, `x[k // n, k % n]` of an
        n-column matrix, and so on (x's rank known when the code is generated); other subscripts unchanged."""
        flat = node.value
        if not (isinstance(flat, cst.Attribute) and flat.attr.value == "flat" and self.tree_of(flat.value) is None):
            return node
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            raise self.err(node, "x.flat is read and written here one item at a time, at an int index",
                           "x.ravel()[a:b] reads a run of items")
        rank = self.known_rank(self.expr(flat.value, out), required=True)
        if rank is None:
            raise self.err(node, "x.flat[k] needs x's rank when the code is generated", "index x itself: x[i, j]")
        code = cst.Module([]).code_for_node
        array, k = code(flat.value), f"({code(node.slice[0].slice.value)})"
        items = []
        for d in range(rank):
            inner = "".join(f" * {array}.shape[{e}]" for e in range(d + 1, rank))[3:]
            item = f"{k} // ({inner})" if inner else k
            items.append(f"({item}) % {array}.shape[{d}]" if d else item)
        return node.with_changes(value=flat.value, slice=[cst.SubscriptElement(cst.Index(cst.parse_expression(i)))
                                                          for i in items])

    def known_rank(self, atom, required: bool = False) -> int | None:
        """The ndim of an argument whose type is known, or of an array whose rank lowering follows (a row of an
        argument), else None. `required`: an argument's type is asked for (kind_of)."""
        if isinstance(atom, Var) and atom.name in self.ranks:
            return self.ranks[atom.name]
        kind = self.kind_of(atom, required)
        return None if kind is None else kind[0]

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

    def ellipsis_as_slices(self, node: cst.Subscript, base: Var, index: tuple) -> tuple:
        """`y[..., None]`: the ellipsis as a whole slice per axis it stands for, from the rank of `y`."""
        rank = self.known_rank(base, required=True)
        if rank is None or index.count(Const(Ellipsis)) > 1:
            raise self.err(node, "`...` with `None` (newaxis) needs the array's rank when the code is generated",
                           "write a slice per axis, `y[:, :, None]`, or np.expand_dims(y, -1)")
        taken = sum(1 for i in index if i is not NEWAXIS and i != Const(Ellipsis))
        at = index.index(Const(Ellipsis))
        return index[:at] + (Slice(None, None, None),) * (rank - taken) + index[at + 1:]

    def is_newaxis(self, node) -> bool:
        return isinstance(node, cst.Attribute) and self.static_value(node) is None

    def load(self, node: cst.Subscript, base: Var, out, target):
        """`base[index]`; `None` items become expand_dims of the read (numba writes no newaxis)."""
        index = self.index(node, out, allow_newaxis=True)
        if NEWAXIS not in index:
            return self.emit(out, target or self.temp(self.load_hint(base.name, index)), Load(base, index))
        if Const(Ellipsis) in index:
            index = self.ellipsis_as_slices(node, base, index)
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


def _reads_dtype(node) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "dtype"

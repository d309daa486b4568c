"""Assignments: a name bound again in straight-line code gets a new variable, tuples unpack, stores
write into arrays, dict and list items and object attributes, and `x op= e` becomes explicit (a write
through a view reaches the viewed array).
"""

from __future__ import annotations

import math

import libcst as cst
import numpy as np

from s2sad.frontend import written_by_s2sad
from s2sad.ir import Const, Copy, Load, Slice, Store, Var
from s2sad.objects import MISSING, LocalObject
from s2sad.normalize.facts import _is_int_atom
from s2sad.normalize.pytrees import _is_none, flatten, is_tree
from s2sad.normalize.state import Positions, PositionsAxis, StaticRef, UnknownKinds
from s2sad.normalize.syntax import (_reads_a_tape, _spelled, _through_transpose, bound_once, bound_to_an_int,
                                   reads_a_rank)
from s2sad.normalize.tables import AUGOPS, NO_DERIVATIVE_OPERATOR


class AssignmentsMixin:
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
        elif isinstance(target, cst.Name) and isinstance(value, cst.ListComp) \
                and not self.is_static_comprehension(value) and self.read_as_an_array(target.value):
            self.bind(target, self.filled_array(value, out, self.local_var(target)), out)  # `np.dot(x, w)` reads it
        elif isinstance(target, cst.Name):
            if reads_a_rank(value) and not self.branch_depth and bound_once(self.parsed.node, target.value):
                rank = self.value(value, out)
                if isinstance(rank, Const):  # `n = x.ndim` of a known rank: `if n == 2` is decided now
                    self.trees[target.value] = rank
                else:
                    self.bind(target, rank, out)
                return
            version = None if _reads_a_tape(value) else self.new_version(target.value)
            lowered = self.value(value, out, target=version or self.local_var(target))
            if version and not is_tree(lowered):
                self.scope[target.value] = version
            self.bind(target, lowered, out)
        elif isinstance(target, (cst.Tuple, cst.List)):
            self.unpack(target, value, out)
        elif isinstance(target, cst.Subscript) and target is not (flat := self.through_flat(target, out)):
            self.assign_to(flat, value, out)  # `out.flat[k] = v`
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
            self.store(target.value, base, index, val, out)
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
        """`t[0] = x[0]` in straight-line code: the list while lowering gets the item, as Python's does. The
        index may be a local name bound to an int constant (`axis = -1; shape[axis] = n`)."""
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            raise self.err(target, "index a list with a single constant here", "or make it an array: np.array([...])")
        index = target.slice[0].slice.value
        bound = bound_to_an_int(self.parsed.node, index.value) if isinstance(index, cst.Name) else None
        table[self.static_key(index) if bound is None else bound] = value

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
        starred = [k for k, el in enumerate(target.elements) if isinstance(el, cst.StarredElement)]
        if starred:  # `coef, *_ = np.linalg.lstsq(...)`, `first, *rest = items`: the rest as a list
            if not isinstance(value, (tuple, list)) or len(value) < len(names) - 1:
                raise self.err(target, "starred assignment unpacks a tuple or list known when the code is generated",
                               "unpack every item: `a, b, c = t`, or index the array: `first, rest = x[0], x[1:]`")
            k, after = starred[0], len(names) - 1 - starred[0]
            value = (*value[:k], list(value[k:len(value) - after]), *value[len(value) - after:])
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
                self.store(name.value, base, self.index(name, out), self.stored(name, item, out), out)
            else:
                self.bind_again(name, item, out)

    def store(self, node, base: str, index: tuple, value, out):
        """`base[index] = value`; through a view (`col[k] = v` of `col = m[:, j]`), into the array it views, and
        `col` read again from it, as NumPy's view sees the write."""
        place = self.stored_view(node, base, index, out)
        if place is None:
            out.append(Store(base, index, self.without_leading_units(base, index, value, out), self.loc))
            return
        root, at = place
        out.append(Store(root, at, self.without_leading_units(root, at, value, out), self.loc))
        version = self.new_version(node.value)
        self.emit(out, version or base, Load(Var(root), self.views[base].index))
        if version:
            self.scope[node.value] = version

    def without_leading_units(self, base: str, index: tuple, value, out):
        """NumPy stores a value with more axes than the slot where the extra leading ones have length one
        (`delta[i] = np.dot(row, col)`, a (1, 1) product into one item of a column): those axes are squeezed away
        first, so that the value's adjoint, read from the slot, has the value's shape."""
        rank = self.ranks.get(value.name) if isinstance(value, Var) else None
        slot = self.ranks.get(base)
        for item in index:
            if slot is None or isinstance(item, Slice):
                continue
            slot = slot - 1 if isinstance(item, Const) and type(item.value) is int or \
                isinstance(item, Var) and item.name in self.ints else None
        if rank is None or slot is None or rank <= slot:
            return value
        return self.prim(out, "squeeze", (value, Const(tuple(range(rank - slot)))), hint=f"{value.name}_fit")

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
        if isinstance(node.target, cst.Subscript) and node.target is not (flat := self.through_flat(node.target, out)):
            return self.aug_assign(node.with_changes(target=flat), out)  # `acc.flat[k] += v`
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
            if v in self.singles:  # a float32 array keeps its dtype whatever is added: a write into its memory
                out.append(Store(v, (Slice(None, None, None),), self.prim(out, op, (Var(v), rhs)), self.loc))
                return
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
            self.store(target.value, base, index, self.prim(out, op, (old, rhs)), out)
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

    # ------------------------------------------------ NumPy functions that write
    def copy_into(self, call: cst.Call, out):
        """`np.copyto(dst, src)` is the write `dst[:] = src`, broadcast as NumPy broadcasts it; with
        `where=mask`, `dst[:] = np.where(mask, src, dst)`. `casting=` only decides what NumPy refuses."""
        bound = self.bound_arguments(call, np.copyto)
        every = cst.Subscript(bound["dst"], [cst.SubscriptElement(cst.Slice(None, None))])
        if bound.get("where") is None:
            return self.assign_to(every, bound["src"], out)
        base = self.array_base(bound["dst"], out)
        mask, src = self.expr(bound["where"], out), self.expr(bound["src"], out)
        kept = self.prim(out, "where", (mask, src, Var(base)))
        out.append(Store(base, (Slice(None, None, None),), kept, self.loc))

    def fill_diagonal(self, call: cst.Call, out):
        """`np.fill_diagonal(a, val)` of a 2-D `a` is the write `a[mask] = val`, the mask true where the row and
        column indices are equal (min(n, m) items, in order, as NumPy fills them without `wrap`)."""
        bound = self.bound_arguments(call, np.fill_diagonal)
        if "wrap" in bound and self.static_value(bound["wrap"]) is not False:
            raise self.err(bound["wrap"], "np.fill_diagonal's wrap=True is not supported",
                           "write the diagonal items out: `a[i, i] = v` over the rows")
        n, m = self.dims_of(self.prim(out, "shape", (self.expr(bound["a"], out),), hint="shape"), 2, out)
        upper, lower = (self.prim(out, "triangle_mask", (n, m, Const(0), Const(side)), hint="triangle")
                        for side in (True, False))
        diagonal = self.names.fresh("diagonal")
        self.trees[diagonal] = self.prim(out, "bitand", (upper, lower), hint="diagonal")
        target = cst.Subscript(bound["a"], [cst.SubscriptElement(cst.Index(cst.Name(diagonal)))])
        return self.assign_to(target, bound["val"], out)

    def add_at(self, call: cst.Call, ufunc, out):
        """`np.add.at(a, idx, v)` adds `v` at `idx`, repeated indices adding again: `a += add_at(zeros_like(a),
        idx, v)` with the runtime's `add_at` (numba lacks `np.add.at`), an update in place as `+=` is;
        np.subtract.at is `-=`. `idx` is read as `a[idx]` reads it."""
        if len(call.args) != 3 or any(a.keyword is not None or a.star for a in call.args):
            raise self.err(call, f"np.{ufunc.__name__}.at takes the array, the indices and the values, by position")
        a, idx, v = (arg.value for arg in call.args)
        elements = [e.value for e in idx.elements] if isinstance(idx, cst.Tuple) else [idx]
        items = self.index(cst.Subscript(a, [cst.SubscriptElement(cst.Index(e)) for e in elements]), out)
        index = items[0] if len(items) == 1 else self.prim(out, "make_tuple", items)
        zeros = self.prim(out, "zeros_like", (self.expr(a, out),))
        scattered = self.names.fresh("scattered")
        self.trees[scattered] = self.prim(out, "add_at", (zeros, index, self.expr(v, out)), hint="scattered")
        update = cst.AddAssign() if ufunc is np.add else cst.SubtractAssign()
        self.aug_assign(cst.AugAssign(a, update, cst.Name(scattered)), out)

"""Static resolution: what names and attribute chains stand for when the code is generated (modules,
functions, numbers and arrays read from outside, constant keys, dtypes), objects built or changed in
the function (objects.py), argument types the code is generated for, and pure calls on constants
evaluated now.
"""

from __future__ import annotations

import dataclasses
import inspect
import random
import sys
import types

import libcst as cst
import numba
import numpy as np

from s2sad import gencache, rules
from s2sad.errors import TypesNeeded
from s2sad.frontend import Parsed, unwrap
from s2sad.hidden import RANDOM_GENERATORS, Hidden, is_hidden_array
from s2sad.ir import Const, Copy, Record, Var
from s2sad.objects import (MISSING, LocalObject, after_in_mro, builds_object, dataclass_init, defining_class,
                           is_namedtuple)
from s2sad.units import of_shape, unit_axes
from s2sad.normalize.pytrees import _is_number, flatten, is_tree
from s2sad.normalize.state import _NOT_STATIC, ChangesAtRunTime, StaticRef, UnknownKinds
from s2sad.normalize.syntax import _dotted
from s2sad.normalize.tables import BUILTIN_HINTS, INT_ARITHMETIC


class StaticMixin:
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

    def hidden_generator(self, where: Hidden) -> Var:
        """A random generator read from outside the function, taken as a hidden parameter: generated code
        draws from the user's generator and advances it, as the function does."""
        name = self.hidden.var(where)
        self.generators.add(name)
        return Var(name)

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
        ref = self.static_ref(node) if isinstance(node, (cst.Name, cst.Attribute)) else self.object_in_tree(node)
        if ref is None or not _user_class(type(ref.obj)) or self.hidden is None:
            what = cst.Module([]).code_for_node(node)
            raise self.err(node, f"only attributes of objects can be assigned (`{what}` is not a plain object)",
                           "return the new value instead")
        obj = LocalObject(type(ref.obj), type(ref.obj).__name__.lower(), None, outside=ref)
        self.hidden.written[id(ref.obj)] = obj
        return obj

    def object_in_tree(self, node) -> StaticRef | None:
        """The object `layers[0]` stands for, an item at a constant index of a static list, tuple or dict."""
        if not (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                and self.is_static_key(node.slice[0].slice.value)):
            return None
        base = self.tree_of(node.value)
        try:
            item = base[self.static_key(node.slice[0].slice.value)] if base is not None else None
        except (KeyError, IndexError, TypeError):
            return None
        return item if isinstance(item, StaticRef) else None

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
        """`super().forward` in a method: the method after the defining class in the object's MRO, bound to the
        object (None: object's own __init__)."""
        fn = self.stack[-1]
        start = defining_class(fn)
        first = self.parsed.node.params.params[0].name.value if self.parsed.node.params.params else None
        obj = self.local_object(cst.Name(first)) if first is not None and start is not None else None
        outside = self.static_ref(cst.Name(first)) if obj is None and first is not None and start is not None else None
        if obj is None and outside is not None and not isinstance(outside.obj, LocalObject):
            found = after_in_mro(type(outside.obj), start, node.attr.value)
            if isinstance(found, types.FunctionType):  # its `self` is read where the object lives, as the method's
                return StaticRef(types.MethodType(found, outside.obj),
                                 outside.where and outside.where.then("attr", node.attr.value))
        if obj is None:
            raise self.err(node, "super() is supported in methods of objects the function builds, changes or reads")
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

    def is_static_key(self, node) -> bool:
        """Is `node` an index known when the code is generated (what static_key accepts)?"""
        if isinstance(node, (cst.SimpleString, cst.Integer)):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return isinstance(node.expression, cst.Integer)
        if isinstance(node, cst.Name) and node.value in self.trees:
            value = self.trees[node.value]
            return isinstance(value, Const) and type(value.value) in (int, str)
        if isinstance(node, cst.BinaryOperation):
            return type(node.operator) in INT_ARITHMETIC and all(
                self.is_static_key(side) and type(self.static_key(side)) is int for side in (node.left, node.right))
        value = self.static_value(node) if isinstance(node, (cst.Name, cst.Attribute)) else _NOT_STATIC
        return isinstance(value, (str, int)) and not isinstance(value, bool)

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
        value = self.value(node.args[0].value, out)
        if isinstance(value, (tuple, list, dict)):  # a tuple/list/dict made when the code is generated
            return self.expr_target(Const(isinstance(value, classes)), out, target)
        kind = self.kind_of(self.refuse_non_atom(node.args[0].value, value), required=True)
        if kind is None or not all(isinstance(c, type) for c in np.atleast_1d(np.array(classes, dtype=object))):
            raise self.err(node, "isinstance is decided when the code is generated: it needs an argument of the "
                                 "function, not rebound before, and classes", BUILTIN_HINTS["isinstance"])
        return self.expr_target(Const(issubclass(kind[1], classes)), out, target)

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

    def static_number(self, node) -> int | float | None:
        """A number known when the code is generated (a literal, np.inf, -np.inf, a global), else None."""
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            value = self.static_number(node.expression)
            return None if value is None else -value
        if isinstance(node, (cst.Integer, cst.Float)):
            return node.evaluated_value
        value = self.static_value(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

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
        if isinstance(value, (numba.types.Number, numba.types.Boolean)):  # `from numba import float64`
            return numba.np.numpy_support.as_dtype(value)
        return None


def _has_static_attributes(obj) -> bool:
    """Are `obj`'s attributes read when the code is generated? Modules, classes and plain objects (a
    dataclass, `self`) are; arrays, numbers and containers are the function's data."""
    return not isinstance(obj, (np.ndarray, np.generic, bool, int, float, complex, str, bytes, tuple, list,
                                dict, types.FunctionType, types.BuiltinFunctionType, types.MethodType))


def _is_static_object(obj) -> bool:
    """A value that stays an object while lowering (not a number, an array or a container)."""
    return not isinstance(obj, (np.ndarray, np.generic, bool, int, float, complex, str, bytes, tuple, list,
                                dict, type(None)))


_LIBRARIES = frozenset({"numpy", "scipy", "numba", "math"})


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


def _draws(fn) -> bool:
    """Does calling `fn` draw random numbers (so it runs once, where the user wrote it)?"""
    owner = getattr(fn, "__self__", None)
    module = getattr(fn, "__module__", None) or ""
    return isinstance(owner, (np.random.RandomState, np.random.Generator, random.Random)) or \
        module == "random" or module.startswith("numpy.random")


def _is_own_generator(obj) -> bool:
    """A random generator the user made (`np.random.default_rng(7)`), not NumPy's global one behind
    `np.random.normal`: its draws must advance its own stream."""
    return isinstance(obj, RANDOM_GENERATORS) and obj is not np.random.mtrand._rand


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

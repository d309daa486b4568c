"""Objects a differentiated function builds or changes, while it is lowered (normalize/static.py).

An instance of a plain Python class made inside the function (`ln = LayerNorm(4)`), and an outside
object whose attributes the function assigns (`model.W = W`), are kept as a `LocalObject`: one
variable of the generated code per attribute, and the class, whose methods are inlined with the object
as `self`. Nothing of the object exists at run time: the compiled code sees only its attributes.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import types
from dataclasses import dataclass, field
from typing import Any

from s2sad.hidden import Hidden


@dataclass(eq=False)
class LocalObject:
    """An object while lowering: its attributes (atoms, static trees, functions or other objects) by name."""

    cls: type
    hint: str  # the stem of its attributes' variable names
    where: Hidden | None  # where its class lives: a class attribute that is an array is read from there
    fields: dict = field(default_factory=dict)
    outside: Any = None  # the outside object (a StaticRef) whose attributes the function writes: the rest read through
    building: bool = False  # its `__init__` is being inlined: each build sets its attributes afresh

    def class_attribute(self, name: str):
        """What `name` is on the class (a method bound to this object, a static or class method, a
        property, a constant), or MISSING."""
        try:
            found = inspect.getattr_static(self.cls, name)
        except AttributeError:
            return MISSING
        if isinstance(found, staticmethod):
            return found.__func__
        if isinstance(found, classmethod):
            return types.MethodType(found.__func__, self.cls)
        if isinstance(found, types.FunctionType):
            return types.MethodType(found, self)
        return found


MISSING = object()  # an attribute the class does not have


def builds_object(cls) -> bool:
    """Could calling `cls` build an object whose attributes s2sad keeps as variables? A plain Python class
    (or a dataclass) with the default `__new__`, or `types.SimpleNamespace` (whose code it is, a user's or a
    library's, normalize decides)."""
    if cls is types.SimpleNamespace:
        return True
    return isinstance(cls, type) and type(cls) in (type, abc.ABCMeta) and cls.__new__ is object.__new__ \
        and not issubclass(cls, BaseException)


def is_namedtuple(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def dataclass_init(cls) -> list[dataclasses.Field] | None:
    """The fields a dataclass's generated `__init__` sets, or None where `__init__` is Python source."""
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    if dataclasses.is_dataclass(cls) and code is not None and code.co_filename == "<string>":
        return list(dataclasses.fields(cls))
    return None


def defining_class(fn) -> type | None:
    """The class whose body defines the method `fn` (its `__class__` cell: what `super()` starts from)."""
    code = getattr(fn, "__code__", None)
    if code is None or "__class__" not in code.co_freevars:
        return None
    return fn.__closure__[code.co_freevars.index("__class__")].cell_contents


def after_in_mro(cls: type, start: type, name: str):
    """`super(start, instance_of_cls).name` as found in the class dictionaries, or MISSING."""
    mro = cls.__mro__
    for klass in mro[mro.index(start) + 1:]:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING

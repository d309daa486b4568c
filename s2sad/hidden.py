"""Values generated code reads from outside its arguments: arrays in globals, closures, defaults and objects.

Such an array is a constant of the derivative. Generated code takes it as an extra parameter, after
the function's own, and every call reads it again where it lives (a `Hidden`), so an array changed
or a name rebound between two calls is seen at the next call, without generating or compiling again
(numba compiles again only when the array's type changes).
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from s2sad.units import of_shape


@dataclass(frozen=True, eq=False)
class Hidden:
    """Where a value lives: a name in `owner`'s scope, then attributes, items or a parameter's default.

    Steps: ("name", "X") (a closure cell, global or builtin of the function `owner`), ("default", "w")
    (the default of its parameter w) or ("object", None) (`owner` itself: an object passed as an
    argument), then any of ("attr", "W") and ("item", key). Two are equal when they name the same place."""

    owner: Any
    steps: tuple
    ndim: int | None = None  # the rank of the array generated code was made for (not part of equality)
    units: tuple | None = None  # its length-one axes, where `np.squeeze` decided on them (units.py)

    def __eq__(self, other) -> bool:
        return isinstance(other, Hidden) and self.owner is other.owner and self.steps == other.steps

    def __hash__(self) -> int:
        return hash((id(self.owner), self.steps))

    def get(self) -> Any:
        kind, key = self.steps[0]
        if kind == "object":
            obj = self.owner
        else:
            obj = _default_of(self.owner, key) if kind == "default" else resolve_name(self.owner, key)
        for kind, key in self.steps[1:]:
            obj = getattr(obj, key) if kind == "attr" else obj[key]
        return obj

    def with_units(self) -> "Hidden":
        """The same place, its array's length-one axes checked at each call (the code depends on them)."""
        value = self.get()
        return dataclasses.replace(self, units=of_shape(value.shape)) if isinstance(value, np.ndarray) else self

    def then(self, kind: str, key) -> "Hidden":
        return Hidden(self.owner, self.steps + ((kind, key),))

    @property
    def spelled(self) -> str:
        """How the user's code reaches it: `model.W`, `layers[0]`, the default of `w`."""
        kind, key = self.steps[0]
        text = {"name": key, "default": f"the default of `{key}`", "object": "the object"}[kind]
        for kind, key in self.steps[1:]:
            text += f".{key}" if kind == "attr" else f"[{key!r}]"
        return text

    @property
    def hint(self) -> str:
        """A name for the parameter in generated code: `model_W`, `layers_0`."""
        parts = [str(key) for kind, key in self.steps if kind != "object"]
        name = "_".join("".join(c if c.isalnum() or c == "_" else "_" for c in p) for p in parts).strip("_")
        return name if name and not name[0].isdigit() else f"g_{name}"


MARK = "__s2sad_hidden__"  # on a generated function: ((parameter, Hidden), ...), its last parameters


def marked(fn) -> tuple:
    """The hidden parameters of a generated function, ((parameter, Hidden), ...); () for any other."""
    return getattr(fn, MARK, ())


def call(fn, args) -> Any:
    """Call a function s2sad generated in Python, its hidden parameters read where they live."""
    return fn(*args, *values(marked(fn)))


def resolve_name(owner: types.FunctionType, name: str) -> Any:
    """The object a free name of `owner` refers to: closure cell, module global or builtin."""
    code = owner.__code__
    if owner.__closure__ and name in code.co_freevars:
        return owner.__closure__[code.co_freevars.index(name)].cell_contents
    if name in owner.__globals__:
        return owner.__globals__[name]
    if hasattr(builtins, name):
        return getattr(builtins, name)
    raise KeyError(name)


def _default_of(owner: types.FunctionType, param: str) -> Any:
    return inspect.signature(owner).parameters[param].default


def values(hidden: tuple) -> tuple:
    """What each hidden parameter, ((parameter, Hidden), ...), holds now."""
    found = tuple([where.get() for _, where in hidden])
    for (_, where), value in zip(hidden, found):
        if where.ndim is not None and getattr(value, "ndim", None) != where.ndim:
            raise RankChangedError(where, value)
        if where.units is not None and of_shape(value.shape) != where.units:
            raise UnitAxesChangedError(where, value)
    return found


class RankChangedError(TypeError):
    """An array read from outside the arguments has another rank than the one its code was generated for."""

    def __init__(self, where: Hidden, value: Any):
        now = f"is {value.ndim}-D now" if isinstance(value, np.ndarray) else f"is a {type(value).__name__} now"
        owner = getattr(where.owner, "__qualname__", type(where.owner).__name__)
        super().__init__(
            f"`{where.spelled}`, read by `{owner}` from outside its arguments, was a {where.ndim}-D array when s2sad "
            f"generated code for it and {now}; generated code is made for the rank of each such array: pass it "
            "as an argument to use arrays of several ranks")


class UnitAxesChangedError(TypeError):
    """An array read from outside the arguments has length-one axes elsewhere than when `np.squeeze`
    decided which axes to remove."""

    def __init__(self, where: Hidden, value: Any):
        owner = getattr(where.owner, "__qualname__", type(where.owner).__name__)
        super().__init__(
            f"`{where.spelled}`, read by `{owner}` from outside its arguments, has shape {value.shape} now: the code "
            "s2sad generated for it squeezes out the axes that had length one then; pass it as an argument, or "
            "give np.squeeze an `axis`")


# Random generators are passed to generated code as they are: it draws from the user's own and moves it on.
RANDOM_GENERATORS = (np.random.Generator, np.random.RandomState)


def is_hidden_array(value: Any) -> bool:
    """The values generated code takes as hidden parameters: NumPy arrays (of any dtype)."""
    return type(value) is np.ndarray

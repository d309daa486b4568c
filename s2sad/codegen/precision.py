"""float32 signatures: the module each compiles from, with NumPy's promotion of Python numbers written out.

NumPy reads a Python number as "weak" (NEP 50): `x * 0.5`, `1.0 - x`, `x[i] * i` and `lam * x` keep a float32
`x` float32. numba types them float64 and int64 and promotes the result, so a float32 function would compute,
and return its gradients, in float64. For a signature with a float32 argument the backend compiles the
function from a module of its own, in which each Python number that meets a float32 value is
`np.float32(...)` (codegen.weak decides which, value by value):

    sum2_bar = 1.0                              sum2_bar = 1.0
    x_bar = mul_bar * (1.0 - tanh2 * tanh2)  -> x_bar = mul_bar * (np.float32(1.0) - tanh2 * tanh2)

Python numbers among themselves, a NumPy function of one (`np.sqrt(T)`, a float64) and constants that set an
array's dtype (`np.full(n, 0.0)`) stay as written, as NumPy computes them. A CUDA kernel for a float32 batch
takes every float constant as float32 (`single_precision_text`).
"""

from __future__ import annotations

import ast

import libcst as cst
from numba.core import types

from s2sad.codegen.chains import module_of
from s2sad.codegen.weak import CONSTANTS, called, creators, float32_of, weak_text



def single_precision(argtypes: tuple) -> bool:
    """Does a signature (numba types) have a float32 argument, array or scalar: the function then compiles
    from a module with NumPy's promotion of Python numbers written out (codegen.weak)."""
    return any((t.dtype if isinstance(t, types.Array) else t) == types.float32 for t in argtypes)


def single_precision_module(text: str, function: str, home: str, argtypes: tuple) -> str | None:
    """A module for `function` of the module `text` (imported as `home`) compiled for arguments of the numba
    types `argtypes`, in which each Python number that meets a float32 value is float32, as in NumPy; None if
    nothing changes. A float64 scalar argument is taken for a Python float (numba cannot tell them apart)."""
    tree = ast.parse(text)
    fn = next(d for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == function)
    names = [a.arg for a in fn.args.args]
    param_types = dict(zip(names, argtypes))
    weak_floats = {name for name, t in param_types.items() if t == types.float64}
    changed_text = weak_text(text, function, param_types, weak_floats)
    if changed_text == text:
        return None
    tree = ast.parse(changed_text)
    lines = changed_text.split("\n")
    fn = next(d for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == function)
    return module_of(tree, lines, function, lines[fn.lineno - 1:fn.end_lineno], home)


def single_precision_text(text: str, function: str) -> str:
    """The module `text` with every float constant of `function` in float32: a CUDA kernel for a float32 batch,
    whose every float value is float32."""
    rewrite = _Single(function)
    changed = cst.parse_module(text).visit(rewrite)
    return changed.code if rewrite.count else text


class _Single(cst.CSTTransformer):
    """Float constants, `math.pi`-like names and `float(v)` in one function, as float32."""

    def __init__(self, function: str):
        self.function = function
        self.inside = 0
        self.kept: set[int] = set()  # ids of constants whose float64 sets an array's dtype
        self.count = 0

    def visit_FunctionDef(self, node):
        self.inside += node.name.value == self.function
        return True

    def leave_FunctionDef(self, original, updated):
        self.inside -= original.name.value == self.function
        return updated

    def visit_Parameters(self, node):
        return False  # defaults stay as written

    def visit_Call(self, node):
        if called(node.func)[1] in creators():  # their constants set an array's dtype
            for arg in node.args:
                for item in (arg.value.elements if isinstance(arg.value, (cst.List, cst.Tuple)) else [arg]):
                    value = item.value
                    if isinstance(value, cst.UnaryOperation):
                        value = value.expression
                    self.kept.add(id(value))
        return True

    def leave_Float(self, original, updated):
        return self._single(original, updated)

    def leave_Attribute(self, original, updated):
        if isinstance(original.value, cst.Name) and original.value.value in ("math", "np", "numpy") \
                and original.attr.value in CONSTANTS:
            return self._single(original, updated)
        return updated

    def leave_Call(self, original, updated):
        if self.inside and isinstance(original.func, cst.Name) and original.func.value == "float" \
                and len(original.args) == 1:
            self.count += 1
            return updated.with_changes(func=cst.Attribute(cst.Name("np"), cst.Name("float32")))
        return updated

    def _single(self, original, updated):
        if not self.inside or id(original) in self.kept:
            return updated
        self.count += 1
        return float32_of(updated)

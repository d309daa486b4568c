"""Float constants in single precision, for a function compiled for float32 arguments.

NumPy reads a Python float as "weak" (NEP 50): `x * 0.5`, `1.0 - x` and `x[i] + 0.5` keep a float32 `x`
float32. numba types the constant float64 and promotes the result, so a float32 function would compute,
and return its gradients, in float64. For a signature whose floating arguments are float32, the backend
compiles the function from a module of its own in which each float constant the user or a rule wrote is
`np.float32(c)`, `float(v)` is `np.float32(v)`, and a Python float argument (float64 to numba, weak to
NumPy) is made float32 on entry. An integer constant beside a float variable (`g * 2 * x`, numba's float32
times int64 being float64) is a float32 too; an exponent stays an integer:

    sum2_bar = 1.0                              sum2_bar = np.float32(1.0)
    x_bar = mul_bar * (1.0 - tanh2 * tanh2)  -> x_bar = mul_bar * (np.float32(1.0) - tanh2 * tanh2)

A float32 constant meeting a float64 value gives float64, as NumPy's weak float does. Constants that set an
array's dtype where NumPy reads them (`np.full(n, 0.0)`, `np.array([1.0, 2.0])`) stay float64.
"""

from __future__ import annotations

import ast

import libcst as cst
from numba.core import types

from s2sad.codegen.chains import module_of

CREATORS = {"full", "array", "asarray", "linspace", "arange", "logspace", "geomspace"}  # dtype from their values
CONSTANTS = {"pi", "e", "tau", "inf", "nan"}  # math.pi, np.inf, ...
ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def single_precision(argtypes: tuple) -> bool:
    """Does a signature (numba types) compile with single-precision constants: a float32 argument (array or
    scalar), and no float64 or complex array, whose precision the constants would lower."""
    dtypes = [t.dtype if isinstance(t, types.Array) else t for t in argtypes]
    wide = any(isinstance(t, types.Array) and t.dtype in (types.float64, types.complex128) for t in argtypes)
    return types.float32 in dtypes and not wide


def single_precision_module(text: str, function: str, home: str, floats: tuple = (),
                            types_of=lambda name: None) -> str | None:
    """A module for `function` of the module `text` (imported as `home`) with its float constants, and its
    parameters at the positions `floats` (Python floats), in float32; None if there are none. `types_of(name)`
    is numba's type of a variable as written (None: unknown), which tells a float's neighbour."""
    changed_text = single_precision_text(text, function, floats, types_of)
    if changed_text == text:
        return None
    tree = ast.parse(changed_text)
    lines = changed_text.split("\n")
    fn = next(d for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == function)
    return module_of(tree, lines, function, lines[fn.lineno - 1:fn.end_lineno], home)


def single_precision_text(text: str, function: str, floats: tuple = (), types_of=lambda name: None) -> str:
    """The module `text` with the float constants of `function` (and its parameters at `floats`) in float32."""
    rewrite = _Single(function, floats, text, types_of)
    changed = cst.parse_module(text).visit(rewrite)
    return changed.code if rewrite.count else text


def _float32(value: cst.BaseExpression) -> cst.Call:
    return cst.Call(cst.Attribute(cst.Name("np"), cst.Name("float32")), [cst.Arg(value)])


class _Single(cst.CSTTransformer):
    """Float constants, `math.pi`-like names and `float(v)` in one function, as float32."""

    def __init__(self, function: str, floats: tuple = (), text: str = "", types_of=lambda name: None):
        self.function, self.floats, self.text, self.types_of = function, floats, text, types_of
        self.inside = 0
        self.kept: set[int] = set()  # ids of constants whose float64 sets an array's dtype
        self.count = 0

    def visit_FunctionDef(self, node):
        self.inside += node.name.value == self.function
        return True

    def leave_FunctionDef(self, original, updated):
        if original.name.value != self.function:
            return updated
        self.inside -= 1
        params, entry = list(updated.params.params), []
        for k in self.floats:
            name = params[k].name.value
            given = name + "_float64"
            while given in self.text:
                given += "_"
            params[k] = params[k].with_changes(name=cst.Name(given))
            entry.append(cst.parse_statement(f"{name} = np.float32({given})"))
            self.count += 1
        if not entry:
            return updated
        body = updated.body.with_changes(body=[*entry, *updated.body.body])
        return updated.with_changes(params=updated.params.with_changes(params=params), body=body)

    def visit_Parameters(self, node):
        return False  # defaults stay as written

    def visit_Call(self, node):
        if _called_name(node.func) in CREATORS:
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

    def leave_BinaryOperation(self, original, updated):
        if not self.inside or not isinstance(original.operator, ARITHMETIC):
            return updated
        left, right = updated.left, updated.right
        if isinstance(left, cst.Integer) and self._is_float(original.right):
            left = self._single(original.left, left)
        elif isinstance(right, cst.Integer) and self._is_float(original.left):
            right = self._single(original.right, right)
        return updated.with_changes(left=left, right=right)

    def _is_float(self, node) -> bool:
        """A float variable as written, or an arithmetic expression on one (`g * 2` of `g * 2 * x`)."""
        if isinstance(node, cst.Name):
            return isinstance(self.types_of(node.value), types.Float)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, ARITHMETIC):
            return self._is_float(node.left) or self._is_float(node.right)
        return False

    def _single(self, original, updated):
        if not self.inside or id(original) in self.kept:
            return updated
        self.count += 1
        return _float32(updated)


def _called_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("np", "numpy"):
        return func.attr.value
    return None

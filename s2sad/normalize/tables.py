"""Tables lowering reads: operators, array methods and attributes, NumPy calls that take shapes or
sequences, and the hints that refusals give.
"""

from __future__ import annotations

import math
import operator

import libcst as cst
import numpy as np

from s2sad.runtime.shapes import only_item


BINOPS = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "truediv",
    cst.FloorDivide: "floordiv", cst.Modulo: "mod", cst.Power: "pow", cst.MatrixMultiply: "matmul",
    cst.BitAnd: "bitand", cst.BitOr: "bitor", cst.BitXor: "bitxor",  # masks: `(r > 0) & (r < cut)`
}


AUGOPS = {
    cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul", cst.DivideAssign: "truediv",
    cst.FloorDivideAssign: "floordiv", cst.ModuloAssign: "mod", cst.PowerAssign: "pow",
    cst.MatrixMultiplyAssign: "matmul", cst.BitAndAssign: "bitand", cst.BitOrAssign: "bitor",
    cst.BitXorAssign: "bitxor",
}


COMPARED = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
            "ne": operator.ne}


COMPARE = {
    cst.LessThan: "lt", cst.LessThanEqual: "le", cst.GreaterThan: "gt", cst.GreaterThanEqual: "ge",
    cst.Equal: "eq", cst.NotEqual: "ne",
}


METHODS = {"sum": np.sum, "mean": np.mean, "copy": np.copy, "dot": np.dot, "reshape": np.reshape,
           "transpose": np.transpose, "ravel": np.ravel, "flatten": np.ravel, "max": np.max, "min": np.min,
           "prod": np.prod, "var": np.var, "std": np.std, "cumsum": np.cumsum, "cumprod": np.cumprod,
           "squeeze": np.squeeze, "trace": np.trace, "diagonal": np.diagonal, "clip": np.clip, "argmax": np.argmax,
           "argmin": np.argmin, "item": only_item, "conj": np.conjugate, "conjugate": np.conjugate,
           "swapaxes": np.swapaxes, "round": np.round, "repeat": np.repeat, "take": np.take, "argsort": np.argsort,
           "all": np.all, "any": np.any}


TUNING_KEYWORDS = {np.einsum: ("optimize",)}  # change how NumPy computes, not what: the runtime picks its own way


VARARG_METHODS = ("reshape", "transpose")  # x.reshape(2, 3) means np.reshape(x, (2, 3))


ATTRIBUTES = {"shape": np.shape, "size": np.size, "ndim": np.ndim, "T": np.transpose, "flat": np.ravel}


SHAPE_FIRST = (np.zeros, np.ones, np.empty, np.full)  # a list first argument is a shape, not data


SEQUENCE_CALLS = (np.concatenate, np.stack, np.hstack, np.vstack, np.array, np.split)


HINT_RULE = ("three ways out: wrap it in a function decorated with @s2sad.custom_jvp (give the tangent) or "
             "@s2sad.custom_vjp (give the cotangent), or register a rule for it once with "
             "@s2sad.rules.defrule(the_function, checks=[...]) (see the README, 'Rules')")


STATEMENT_HINTS = {  # what to write instead of a statement s2sad refuses
    "With": "open resources outside the function and pass the values in as arguments",
    "ClassDef": "define the class at module level",
    "FunctionDef": "define the helper at module level: s2sad inlines calls to module-level functions",
    "Match": "use if/elif on the value",
    "Global": "return the new value instead of assigning to a global",
    "Nonlocal": "return the new value instead of assigning to an enclosing function's variable",
    "Del": "rebind the name, or simply stop using it",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
}


EXPRESSION_HINTS = {  # expressions s2sad refuses: what to write instead
    "Lambda": "define the function with `def` at module level and call it",
    "ListComp": "write a for loop over range(n) that fills an array (out = np.zeros(n); out[i] = ...)",
    "GeneratorExp": "write a for loop over range(n) that fills an array, then reduce it with np.sum",
    "SetComp": "write a for loop over range(n) that fills an array",
    "DictComp": "write the dict literally, {'key': value, ...}",
    "Set": "use a tuple (x, y) or an array np.array([x, y])",
    "Imaginary": "s2sad differentiates real floats: carry the real and imaginary parts as two float arrays",
    "FormattedString": "strings are not differentiable: format values outside the function",
    "Await": "differentiate a plain `def` function, and await outside it",
}


# NumPy functions with no rule (run as written on values not differentiated) whose result is always 1-D
FLAT_RESULTS = (np.unique, np.flatnonzero)


METHOD_HINT = (f"s2sad knows the array methods .{', .'.join(sorted(METHODS))} and .astype; call the NumPy function "
               "instead (`np.sort(x)` for `x.sort()`), or a function of your own")


STAND_IN_HINT = ("s2sad writes this function out with NumPy functions it differentiates, for its common arguments "
                 "only: compute it another way (np.moveaxis, a reshape, a loop), or wrap the call in a function "
                 "decorated with @s2sad.custom_vjp (give the cotangent)")


DRAW_HINT = ("a random draw has no derivative with respect to its parameters: draw from constants and transform "
             "the draw, e.g. `mu + sigma * np.random.normal(0.0, 1.0, n)`")


NO_DERIVATIVE_OPERATOR = ("shift operators have no derivative: use `and`/`or`/`not` in conditions, `&`, `|`, `~` "
                          "on masks, or arithmetic")


BITWISE = ("bitand", "bitor", "bitxor")


BITWISE_HINT = ("bitwise operators have no derivative, and take booleans and ints only: use `and`/`or`/`not` in "
                "conditions, `&`, `|`, `~` on masks, or arithmetic")


BUILTIN_HINTS = {  # builtins with no derivative: what to use instead
    "print": "call print as a statement of its own (`print(x)`): its value is None",
    "isinstance": "test an argument of the function itself (`isinstance(x, np.ndarray)`): s2sad decides it per "
                  "argument type when it generates code",
    "type": "s2sad specializes code on argument structure, not on types: branch outside the function",
    "eval": "write the expression itself in the function",
    "exec": "write the statements themselves in the function",
    "str": "strings are not differentiable: format values outside the function",
    "repr": "strings are not differentiable: format values outside the function",
    "format": "strings are not differentiable: format values outside the function",
    "sum": "use np.sum(...)",
    "getattr": "pass the value itself as an argument",
    "setattr": "return the new value instead of storing it on an object",
    "map": "reduce it or list it where it is made (sum(map(f, x)), np.array(list(map(f, x)))), or write the "
           "comprehension: [f(v) for v in x]",
}


REDUCERS = {  # builtin reductions: the operation folding two items, how it is spelled, a name for the result
    "sum": ("add", None, "total"), "max": (max, "max", "largest"), "min": (min, "min", "smallest"),
    "any": ("or", None, "any_true"), "all": ("and", None, "all_true"), "prod": ("mul", None, "product"),
}


REDUCER_START = {"sum": 0, "max": -math.inf, "min": math.inf, "any": False, "all": True, "prod": 1}


UNROLL_RANGE = 16  # a comprehension over a constant range up to this long is unrolled (RK stages, x/y/z)


INT_ARITHMETIC = {cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul}


RECURSION_DEPTH = 32  # recursion deeper than this, with constant arguments, is refused

"""Which expressions of generated code are elementwise arithmetic (shared by the codegen passes)."""

from __future__ import annotations

import ast

UFUNCS = {"exp", "log", "tanh", "sin", "cos", "sqrt", "abs", "negative", "square", "log1p", "expm1",
          "sinh", "cosh", "arctan", "tan", "exp2", "log2", "log10"}


def is_arithmetic(node: ast.AST) -> bool:
    """Whether `node` is names and constants under operators (not @) and the NumPy ufuncs in UFUNCS."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.BinOp):
        return not isinstance(node.op, ast.MatMult) and is_arithmetic(node.left) and is_arithmetic(node.right)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and is_arithmetic(node.operand)
    if isinstance(node, ast.Call) and not node.keywords and isinstance(node.func, ast.Attribute):
        func = node.func
        return (isinstance(func.value, ast.Name) and func.value.id == "np" and func.attr in UFUNCS
                and all(is_arithmetic(a) for a in node.args))
    return False

"""Which expressions of generated code are elementwise arithmetic (shared by the codegen passes)."""

from __future__ import annotations

import ast

from s2sad.codegen.ufuncs import UFUNCS, VECTORIZED  # noqa: F401 (the passes import them from here)


def vectorized_call(node: ast.AST) -> bool:
    """Whether `node` is `np.exp(x)`, `np.log(x)`, `np.log1p(x)` or `np.tanh(x)`: a call codegen.vmath
    points at runtime.vmath's kernels, whose loops vectorize."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in VECTORIZED
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "np" and len(node.args) == 1
            and not isinstance(node.args[0], ast.Starred) and not node.keywords)


def is_arithmetic(node: ast.AST, kernels=()) -> bool:
    """Whether `node` is names and constants under operators (not @), the NumPy ufuncs in UFUNCS and
    calls of the functions named in `kernels` (runtime.vmath's, which stand for ufuncs)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.BinOp):
        return (not isinstance(node.op, ast.MatMult) and is_arithmetic(node.left, kernels)
                and is_arithmetic(node.right, kernels))
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and is_arithmetic(node.operand, kernels)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        ufunc = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "np"
                 and func.attr in UFUNCS) or (isinstance(func, ast.Name) and func.id in kernels)
        return ufunc and all(is_arithmetic(a, kernels) for a in node.args)
    return False

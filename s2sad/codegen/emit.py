"""Printing: atoms, primitives and rule templates as Python source; an indenting line writer."""

from __future__ import annotations

import math
from contextlib import contextmanager

import libcst as cst
import numpy as np

from s2sad.ir import Const, Copy, Load, Prim, Slice, Var
from s2sad.rules.registry import OPERATORS, Opaque


def header_imports(code: str) -> str:
    """The imports a generated module needs: math, numpy, and the numba/runtime names `code` uses."""
    import re

    from s2sad import runtime

    used = set(re.findall(r"\b\w+\b", "\n".join(ln.split("#")[0] for ln in code.splitlines())))
    lines = ["import math", "import numpy as np"]
    if "prange" in used:
        lines.append("from numba import prange")
    if "List" in used:
        lines.append("from numba.typed import List")
    names = [n for n in runtime.__all__ if n in used and n != "PythonTape"]
    if names:
        line, indent = "from s2sad.runtime import (", " " * len("from s2sad.runtime import (")
        for i, name in enumerate(names):
            piece = name + (", " if i < len(names) - 1 else ")")
            if len(line) + len(piece.rstrip()) > 110:
                lines.append(line.rstrip())
                line = indent
            line += piece
        lines.append(line)
    return "\n".join(lines) + "\n"


def const_text(value) -> str:
    if value is Ellipsis:
        return "..."
    if isinstance(value, np.dtype):  # `dtype=float`, `x.astype(np.float32)`
        return "np.bool_" if value == np.bool_ else f"np.{value.name}"
    if isinstance(value, float):
        if math.isnan(value):
            return "np.nan"
        if math.isinf(value):
            return "np.inf" if value > 0 else "-np.inf"
    return repr(value)


def atom(a) -> str:
    return a.name if isinstance(a, Var) else const_text(a.value)


def operand(a) -> str:
    """An atom as an operator operand: negative constants get parentheses."""
    text = atom(a)
    return f"({text})" if text.startswith("-") else text


def index_text(index) -> str:
    parts = []
    for item in index:
        if isinstance(item, Slice):
            lo, hi, st = (atom(p) if p is not None else "" for p in (item.lower, item.upper, item.step))
            parts.append(f"{lo}:{hi}" + (f":{st}" if st else ""))
        else:
            parts.append(atom(item))
    return ", ".join(parts) if parts else "()"


def index_value_text(index) -> str:
    """An index as a value a runtime helper takes (`add_at(g, (i, j), v)`): one item as itself, several as a
    tuple, a slice as `slice(...)`; full slices after the last other item are left out (`x[idx, :]` is x[idx])."""
    items = list(index)
    while len(items) > 1 and items[-1] == Slice(None, None, None):
        items.pop()
    texts = [f"slice({', '.join(atom(p) if p is not None else 'None' for p in (i.lower, i.upper, i.step))})"
             if isinstance(i, Slice) else atom(i) for i in items]
    return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"


def effect_text(s) -> str:
    """An Effect statement as the user wrote it: `print(x)`, `raise ValueError('...')`."""
    return ("raise " if s.raises else "") + prim_text(s.call)


def expr_text(expr) -> str:
    if isinstance(expr, Copy):
        return atom(expr.value)
    if isinstance(expr, Load):
        return f"{expr.base.name}[{index_text(expr.index)}]"
    return prim_text(expr)


def prim_text(p: Prim) -> str:
    rule = p.rule
    if rule.operator:
        op, _ = OPERATORS[rule.operator]
        if len(p.args) == 1:
            return f"{op} {operand(p.args[0])}" if op == "not" else f"{op}{operand(p.args[0])}"
        return f"{operand(p.args[0])} {op} {operand(p.args[1])}"
    if rule.name == "tape_pop":
        return f"{atom(p.args[0])}.pop()"
    if rule.name == "make_tuple":
        return "(" + "".join(f"{atom(a)}, " for a in p.args).rstrip(" ") + ")"
    if rule.attribute and len(p.args) == 1 and not p.kwargs and not (p.spelled and rule.print_as):
        return f"{atom(p.args[0])}.{rule.name}"  # (a call where the rule has a stand-in: `np_size(mu)` of a number)
    args = [atom(a) for a in p.args] + [f"{k}={atom(v)}" for k, v in p.kwargs]
    if isinstance(rule, Opaque) and rule.form != "call":  # `x.astype(np.int64)`, `x.dtype`
        rest = f"({', '.join(args[1:])})" if rule.form == "method" else ""
        return f"{args[0]}.{p.spelled}{rest}"
    plain = rule.print_plain and p.spelled and len(p.args) == 1 and not p.kwargs
    return f"{(p.spelled if plain else rule.print_as) or p.spelled or rule.spelled}({', '.join(args)})"


class _Rename(cst.CSTTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def leave_Name(self, original, updated):
        text = self.mapping.get(original.value)
        if text is None:
            return updated
        simple = text.replace("_", "a").isalnum() or _is_plain_number(text)
        return cst.parse_expression(text if simple else f"({text})")


def _is_plain_number(text: str) -> bool:
    try:
        float(text)
        return not text.startswith("-")
    except ValueError:
        return False


_MODULE = cst.Module([])


class _Fold(cst.CSTTransformer):
    """Constant folding of what a template's substitution leaves behind, for speed and reading:
    `2 - 1` -> `1`; `x ** 1` -> `x` inside a larger arithmetic expression (which makes the fresh
    array, so nothing aliases `x`); `einsum_swap('ij,jk->ik', 0)` -> `'ik,jk->ij'` (which also hands
    numba constant subscripts, for a specialised contraction)."""

    _INT_OPS = {cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b}

    def leave_BinaryOperation(self, original, updated):
        op = self._INT_OPS.get(type(updated.operator))
        if op and isinstance(updated.left, cst.Integer) and isinstance(updated.right, cst.Integer):
            value = op(updated.left.evaluated_value, updated.right.evaluated_value)
            return cst.parse_expression(str(value) if value >= 0 else f"({value})")
        if isinstance(updated.operator, cst.Power):
            return updated
        return updated.with_changes(left=_drop_power_one(updated.left), right=_drop_power_one(updated.right))

    def leave_Call(self, original, updated):
        if not (isinstance(updated.func, cst.Name) and updated.func.value == "einsum_swap" and len(updated.args) == 2):
            return updated
        spec, k = (a.value for a in updated.args)
        if not (isinstance(spec, cst.SimpleString) and isinstance(k, cst.Integer)):
            return updated
        from s2sad.runtime.contract import swap_text

        try:
            return cst.SimpleString(repr(swap_text(spec.evaluated_value, int(k.value))))
        except ValueError:  # malformed subscripts: left to the call, which raises NumPy's error when run
            return updated


def _drop_power_one(node: cst.BaseExpression) -> cst.BaseExpression:
    if (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power)
            and isinstance(node.right, cst.Integer) and node.right.value == "1"):
        return node.left
    return node


def instantiate(node: cst.CSTNode, mapping: dict[str, str]) -> str:
    """Template expression/statement text with its parameter names replaced (and constants folded)."""
    return _MODULE.code_for_node(node.visit(_Rename(mapping)).visit(_Fold())).strip()


class Writer:
    """Collects indented lines; `comment` prints a user line once per run of statements."""

    def __init__(self, indent: int = 1):
        self.lines: list[str] = []
        self.level = indent
        self.last_loc = None

    def line(self, text: str):
        self.lines.append("    " * self.level + text)

    def comment(self, loc, suffix=""):
        if loc is not None and (loc != self.last_loc or suffix):
            self.line(f"# {loc.text}{suffix}")
            self.last_loc = loc

    @contextmanager
    def block(self):
        self.level += 1
        self.last_loc = None
        try:
            yield
        finally:
            self.level -= 1
            self.last_loc = None

    def mark(self) -> int:
        return len(self.lines)

    def empty_since(self, mark: int) -> bool:
        return all(ln.strip().startswith("#") for ln in self.lines[mark:])

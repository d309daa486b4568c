"""Find a function's source, parse it with libcst, and resolve the names it uses."""

from __future__ import annotations

import builtins
import hashlib
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from s2sad import gencache
from s2sad.errors import SourceUnavailableError, UnsupportedError, located


@dataclass
class Parsed:
    """A user function's syntax tree plus what is needed to locate errors and resolve names."""

    fn: Any
    node: cst.FunctionDef
    positions: Any  # node -> CodeRange (relative to the dedented snippet)
    filename: str
    firstline: int  # line number of the snippet's first line in the file
    indent: int  # columns removed by dedent
    lines: list[str]  # the file's lines of the snippet (not dedented)
    source_hash: str
    name: str = ""  # what generated code calls it: fn.__name__, or lambda_<line> for a lambda
    line: int = 0  # where the function starts in its file (firstline, or the lambda's line)

    def __post_init__(self):
        self.name = self.name or self.fn.__name__
        self.line = self.line or self.firstline

    def where(self, node: cst.CSTNode) -> tuple[int, int, str]:
        pos = self.positions[node].start
        return self.firstline + pos.line - 1, pos.column + self.indent, self.lines[pos.line - 1]

    def error(self, node: cst.CSTNode, message: str, hint: str = "", cls=UnsupportedError):
        line, col, text = self.where(node)
        return cls(located(message, self.filename, line, col, text, hint))

    def resolve(self, name: str) -> Any:
        """The object a free name refers to: closure cell, module global or builtin."""
        found = self.resolve_in(self.fn, name)
        gencache.note(self.fn, name, found)
        return found

    @staticmethod
    def resolve_in(fn: types.FunctionType, name: str) -> Any:
        code = fn.__code__
        if fn.__closure__ and name in code.co_freevars:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        if name in fn.__globals__:
            return fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise KeyError(name)


def unwrap(fn: Any) -> Any:
    """The plain Python function behind numba dispatchers and s2sad wrappers.

    A function s2sad returned (grad(f), ...) unwraps to its generated wrapper function, whose
    source is valid s2sad input: that is how transformations compose.
    """
    for _ in range(10):
        if hasattr(fn, "__s2sad_transform__"):
            fn = fn.__s2sad_transform__.source_function()
        elif hasattr(fn, "__s2sad_fun__"):
            fn = fn.__s2sad_fun__
        elif hasattr(fn, "py_func"):
            fn = fn.py_func
        else:
            break
    return fn


def parse_function(fn: Any) -> Parsed:
    fn = unwrap(fn)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"s2sad differentiates Python functions, got {type(fn).__name__} {fn!r}")
    try:
        lines, firstline = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise SourceUnavailableError(
            f"cannot find the source of {fn.__qualname__}: s2sad reads a function's source text, "
            "and Python keeps none for functions made by exec() or typed at a plain `python -c` / "
            "stdin prompt. Define it in a file, a notebook cell or IPython."
        ) from exc
    if fn.__name__ == "<lambda>":
        return _parse_lambda(fn, firstline)
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
    positions, module = _positions(cst.parse_module(dedented))
    node = next((n for n in module.body if isinstance(n, cst.FunctionDef)), None)
    if node is None:
        raise SourceUnavailableError(f"the source of {fn.__qualname__} is not a `def` statement")
    filename = fn.__code__.co_filename
    digest = hashlib.sha256(dedented.encode()).hexdigest()[:16]
    return Parsed(fn, node, positions, filename, firstline, indent, [ln.rstrip("\n") for ln in lines], digest)


# libcst's step that computes one provider's metadata. `MetadataWrapper.resolve` runs it too, but first
# an empty batch of visitors over the whole tree, which costs as much as the positions themselves.
_PROVIDER_STEP = "_gen"


def _positions(module: cst.Module):
    """Each node's place in `module`'s text, and `module` itself. The tree is ours alone, so the
    wrapper need not copy it (normalize parses every function it inlines: this is on its hot path)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    step = getattr(PositionProvider(), _PROVIDER_STEP, None)
    positions = step(wrapper) if step is not None else wrapper.resolve(PositionProvider)
    return positions, wrapper.module


def _parse_lambda(fn: types.FunctionType, firstline: int) -> Parsed:
    """A lambda as the `def` it stands for: `lambda x: x * x` on line 7 reads as
    `def lambda_7(x): return x * x`, its nodes placed where the lambda is (errors point into it).

    The lambda is found in the whole file, so a statement split over lines parses; the one meant is
    the lambda on its first line with its parameters (and, among equals, where its body starts)."""
    code = fn.__code__
    filename = code.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    try:
        positions, _ = _positions(cst.parse_module("".join(lines)))
    except cst.ParserSyntaxError as exc:
        raise SourceUnavailableError(f"cannot parse {filename}, which holds the lambda {fn.__qualname__} "
                                     f"({exc.message}); define the function with `def`") from None
    positions = dict(positions)
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    found = [n for n in positions if isinstance(n, cst.Lambda) and positions[n].start.line == firstline
             and _lambda_params(n) == params]
    if len(found) > 1:  # its instructions sit in its own body, so one of them starts where that body does
        columns = {col for line, _, col, _ in code.co_positions() if line == firstline}
        found = [n for n in found if positions[n.body].start.column in columns]
    if len(found) != 1:
        text = lines[firstline - 1].rstrip("\n") if firstline <= len(lines) else ""
        raise UnsupportedError(located(f"cannot tell which lambda on this line is {fn.__qualname__}", filename,
                                       firstline, 0, text, "define the function with `def`"))
    lam = found[0]
    name = f"lambda_{firstline}"
    statement = cst.Return(value=lam.body)
    line = cst.SimpleStatementLine(body=[statement])
    block = cst.IndentedBlock(body=[line])
    node = cst.FunctionDef(name=cst.Name(name), params=lam.params, body=block)
    for made in (statement, line, block, node, node.name):
        positions[made] = positions[lam]
    digest = hashlib.sha256(f"{firstline}:{cst.Module([]).code_for_node(lam)}".encode()).hexdigest()[:16]
    return Parsed(fn, node, positions, filename, 1, 0, [ln.rstrip("\n") for ln in lines], digest, name, firstline)


def _lambda_params(node: cst.Lambda) -> list[str]:
    p = node.params
    return [q.name.value for q in [*p.posonly_params, *p.params, *p.kwonly_params]]

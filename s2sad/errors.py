"""Errors about the user's code, located like a compiler's: file:line:col, the line, a caret."""

from __future__ import annotations

import types


class Located(str):
    """A message about a place in the user's code, which it remembers (see `at_user_line`)."""

    def __new__(cls, text: str, filename: str, line: int):
        self = super().__new__(cls, text)
        self.filename, self.line = filename, line
        return self


class S2SADError(Exception):
    """Base class of every error s2sad raises about user code."""

    def __init__(self, *args):
        super().__init__(*args)
        self.place = (args[0].filename, args[0].line) if args and isinstance(args[0], Located) else None


class UnsupportedError(S2SADError, NotImplementedError):
    """The function uses Python that s2sad cannot differentiate."""


class NoRuleError(UnsupportedError):
    """A call kept as written because it has no derivative rule turns out to depend on a differentiated input."""


class TypesNeeded(UnsupportedError):
    """The function branches on its arguments' ranks or types (`x.ndim`, `isinstance`): its code is
    generated per argument types, which only a call provides."""


class SourceUnavailableError(S2SADError, OSError):
    """The function's source text cannot be found (e.g. defined in `python -c`)."""


class TupleOutputError(S2SADError, TypeError):
    """A gradient (or Hessian) of a function that returns a tuple: it needs one output, or has_aux=True."""


def located(message: str, filename: str, line: int, col: int, text: str, hint: str = "") -> str:
    """Format `message` pointing at `text` (the source line) with a caret under column `col`."""
    stripped = text.rstrip("\n")
    caret = " " * col + "^"
    out = f"{filename}:{line}:{col + 1}: {message}\n    {stripped}\n    {caret}"
    if hint:
        out += f"\n  hint: {hint}"
    return Located(out, filename, line)


def located_at(message: str, loc, hint: str = "") -> str:
    """`located` for an IR statement's `ir.Loc`: its text is the stripped line, its column the indentation."""
    return located(message, loc.filename, loc.line, loc.col, " " * loc.col + loc.text, hint)


def _raise(error):
    raise (  # over two lines: Python's traceback then underlines nothing in the user's line it points at
        error)


def at_user_line(error: S2SADError) -> S2SADError:
    """`error` with a traceback of one frame, at the user's line it is about (none where it names no
    line): raised again at the API, the user reads their call, then their line, not s2sad's internals."""
    error = error.with_traceback(None)
    if error.place is None or error.place[1] < 2:
        return error
    filename, line = error.place
    code = _raise.__code__.replace(co_filename=filename, co_firstlineno=line - 1, co_name="<differentiated>")
    try:
        types.FunctionType(code, {})(error)
    except S2SADError as raised:
        return error.with_traceback(raised.__traceback__.tb_next)  # without this function's own frame
    return error

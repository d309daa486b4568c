"""Errors about the user's code, located like a compiler's: file:line:col, the line, a caret."""

from __future__ import annotations


class S2SADError(Exception):
    """Base class of every error s2sad raises about user code."""


class UnsupportedError(S2SADError, NotImplementedError):
    """The function uses Python that s2sad cannot differentiate."""


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
    return out


def located_at(message: str, loc, hint: str = "") -> str:
    """`located` for an IR statement's `ir.Loc`: its text is the stripped line, its column the indentation."""
    return located(message, loc.filename, loc.line, loc.col, " " * loc.col + loc.text, hint)

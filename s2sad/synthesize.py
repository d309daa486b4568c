"""Small Python functions s2sad writes for itself around user callables (wrappers, flat signatures).

They are written to real files in the cache directory, like generated modules, so the frontend
can read their source; the callables they wrap reach them as closure variables, which the
frontend resolves like any closure.
"""

from __future__ import annotations

import types
from typing import Any

from s2sad.backend import load_module

_TEMPLATE = """{imports}def make({closure}):
    def {name}({params}):
{body}
    return {name}
"""


def function(name: str, params: list[str], body: list[str], closure: dict[str, Any],
             imports: str = "", in_memory: bool = False) -> types.FunctionType:
    """`def name(params): body` with the names in `closure` bound to the given objects.

    in_memory: keep its source in memory only (linecache), not as a file in the cache directory: for
    the short-lived trampolines numba_callable.py writes per argument type, which nothing re-reads."""
    name = _identifier(name)
    text = _TEMPLATE.format(imports=imports + "\n\n" if imports else "", closure=", ".join(closure), name=name,
                            params=", ".join(params), body="\n".join("        " + line for line in body))
    return load_module(text, name, "python", in_memory=in_memory).make(*closure.values())


def _identifier(name: str) -> str:
    """`name` as a Python identifier: a lambda's `<lambda>` (and the names made from it) becomes `_lambda_`."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)

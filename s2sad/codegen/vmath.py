"""The text numba compiles: NumPy's exp, log, log1p and tanh as `runtime.vmath`'s vectorizable
functions, and whole-array sums as `runtime.core.sum_all`.

    tanh2 = np.tanh(0.5 * (matmul + b))  ->  tanh2 = vtanh(0.5 * (matmul + b))
    total = np.sum(log2)                 ->  total = sum_all(log2)

numba compiles `np.tanh` over an array to a scalar C-library call per element, which does not
vectorize; `vtanh` is arithmetic numba's loop vectorizes, within 2 ulp of NumPy. numba's
`np.sum(x)` adds in one chain, each addition waiting on the last; `sum_all` keeps four partial
sums, which vectorize. Like `codegen.lower`, this changes only what numba compiles, line for line: `s2sad show`,
the disk cache's `.py` files and `s2sad build` keep NumPy's names. Calls inside string literals
(the templates `codegen.lower` writes) stay as written.
"""

from __future__ import annotations

import ast

from s2sad.codegen.arithmetic import VECTORIZED
from s2sad.codegen.lower import import_beside_numpy

REPLACED = {**VECTORIZED, "sum": "sum_all"}
IMPORTS = {"from s2sad.runtime.vmath import ": sorted(VECTORIZED.values()), "from s2sad.runtime.core import ": ["sum_all"]}


def vectorized_math(source: str) -> str:
    """`source` with each `np.exp(x)`, `np.log(x)`, `np.log1p(x)`, `np.tanh(x)` and `np.sum(x)` in its
    code as vexp, vlog, vlog1p, vtanh and sum_all (one argument, no keywords: `axis=`, `out=` and the
    like stay NumPy's)."""
    if not any(f"np.{name}(" in source for name in REPLACED):
        return source
    spans = _calls(source)
    if not spans:
        return source
    lines = [line.encode() for line in source.split("\n")]  # ast's columns count UTF-8 bytes
    for row, start, end, name in sorted(spans, reverse=True):  # right to left: earlier columns stay valid
        lines[row - 1] = lines[row - 1][:start] + REPLACED[name].encode() + lines[row - 1][end:]
    used = {REPLACED[name] for *_, name in spans}
    imports = [f"{line}{', '.join(n for n in names if n in used)}" for line, names in IMPORTS.items()
               if used.intersection(names)]
    return import_beside_numpy([line.decode() for line in lines], "; ".join(imports))


def _calls(source: str) -> list[tuple[int, int, int, str]]:
    """(line, first and end column of `np.<name>`, name) of each call to rewrite."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REPLACED
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "np"
                and len(node.args) == 1 and not isinstance(node.args[0], ast.Starred) and not node.keywords):
            found.append((node.func.lineno, node.func.col_offset, node.func.end_col_offset, node.func.attr))
    return found

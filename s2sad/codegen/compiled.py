"""What numba compiles for a generated module: its text after rewrites that keep every line where it is.

Standard library only (and the runtime's constants): `s2sad build` vendors these passes with the runtime,
so a built module compiles the same text at import that `s2sad.grad` compiles, while the file it ships
stays the readable source.
"""

from __future__ import annotations

import ast

from s2sad.codegen.chains import fused_chains
from s2sad.codegen.into import added_in_place
from s2sad.codegen.lower import elementwise_loops
from s2sad.codegen.views import expand_views
from s2sad.codegen.vmath import vectorized_math


def compiled_text(source: str, chains_when_typed: bool = True) -> str:
    """What numba compiles for a generated module: the same lines, tapes as numba lists, the
    adjoints of sums that only arithmetic reads as broadcast views (codegen.views), a max's adjoint
    added in one pass (codegen.into), elementwise expressions as loops (codegen.lower), exp, log,
    log1p, tanh as loops that vectorize (codegen.vmath) and runs of elementwise lines as one `chain`
    call, which numba's typing makes a loop (codegen.chains).

    Without `chains_when_typed` the runs stay as written: the backend writes them out as loops itself,
    for each signature it compiles (backend._fuse_for_each_signature; codegen.chains.typed_module)."""
    text = vectorized_math(elementwise_loops(added_in_place(expand_views(native_tapes(source)))))
    return fused_chains(text) if chains_when_typed else text


def native_tapes(source: str) -> str:
    """Tapes compiled as numba's own lists: `t = List()` becomes `t = new_tape()` and `x = t.pop()`
    `x = tape_pop(t)`, line for line.

    numba inlines push and pop on its reflected lists where a numba.typed.List goes through C
    helpers: the difference between a loop adjoint at the speed of a hand-written one and several
    times slower. `new_tape` and `tape_pop` (runtime.core) make the list with room for a short tape and
    pop without the realloc that shrinks it on the way down. The source keeps `List()` and `.pop()`,
    which read (and parse back, for higher derivatives) as a tape; a tape never leaves the function
    that makes it. A module that imports nothing from the runtime gets `[]` and keeps `list.pop`."""
    tree = ast.parse(source)
    tapes = {node.targets[0].id for node in ast.walk(tree) if _makes_tape(node)}
    if not tapes:
        return source
    runtime_import = next((node for node in tree.body if _imports_the_runtime(node)), None)
    edits = []
    for node in ast.walk(tree):
        if _makes_tape(node):
            edits.append((node.value, "[]" if runtime_import is None else "new_tape()"))
        elif runtime_import is not None and _pops_a_tape(node, tapes):
            edits.append((node.value, f"tape_pop({node.value.func.value.id})"))
    lines = source.split("\n")
    for value, text in sorted(edits, key=lambda edit: (edit[0].lineno, edit[0].col_offset), reverse=True):
        _replace(lines, value.lineno, value.col_offset, value.end_col_offset, text)
    if runtime_import is not None:
        names = ["new_tape"] + (["tape_pop"] if any(text.startswith("tape_pop") for _, text in edits) else [])
        line = lines[runtime_import.lineno - 1]
        at = line.index(" import ") + len(" import ")
        at += line[at] == "("
        lines[runtime_import.lineno - 1] = line[:at] + "".join(name + ", " for name in names) + line[at:]
    return "\n".join(lines)


def _makes_tape(node: ast.AST) -> bool:
    """`t = List()`, on one line."""
    return (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "List" and not node.value.args and not node.value.keywords
            and node.value.lineno == node.value.end_lineno)


def _pops_a_tape(node: ast.AST, tapes: set[str]) -> bool:
    """`x = t.pop()` for a tape `t`, on one line."""
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    return (isinstance(call.func, ast.Attribute) and call.func.attr == "pop" and isinstance(call.func.value, ast.Name)
            and call.func.value.id in tapes and not call.args and not call.keywords
            and call.lineno == call.end_lineno)


def _imports_the_runtime(node: ast.AST) -> bool:
    """`from s2sad.runtime import (...)`, or from the runtime copy a built package ships (`from .pkg import (...)`)."""
    if not isinstance(node, ast.ImportFrom) or node.module is None:
        return False
    return (node.level, node.module) == (0, "s2sad.runtime") or (node.level == 1 and "." not in node.module)


def vendored_imports(code: str, package: str) -> str:
    """`code` importing the runtime from `package`, a copy of s2sad.runtime beside it (what `s2sad build`
    ships), not from s2sad; the passes above add their imports to the `import numpy as np` line."""
    lines = code.split("\n")
    imports = [node for node in ast.walk(ast.parse(code))
               if isinstance(node, ast.ImportFrom) and node.level == 0 and _in_the_runtime(node.module)]
    for node in sorted(imports, key=lambda node: (node.lineno, node.col_offset), reverse=True):  # a line's last first
        start, end = node.col_offset, node.col_offset + len(_FROM_RUNTIME)
        if lines[node.lineno - 1].encode()[start:end] != _FROM_RUNTIME:
            raise ValueError(f"line {node.lineno}: generated imports are written `from s2sad.runtime...`")
        _replace(lines, node.lineno, start, end, f"from .{package}")
    return "\n".join(lines)


_FROM_RUNTIME = b"from s2sad.runtime"


def _replace(lines: list[str], lineno: int, start: int, end: int, text: str) -> None:
    """Columns `start:end` of line `lineno` (1-based, as ast counts them: in UTF-8 bytes) become `text`."""
    line = lines[lineno - 1].encode()
    lines[lineno - 1] = (line[:start] + text.encode() + line[end:]).decode()


def _in_the_runtime(module: str | None) -> bool:
    return module is not None and (module == "s2sad.runtime" or module.startswith("s2sad.runtime."))


def use_compiled_text(namespace: dict, package: str) -> None:
    """Rebind the numba functions of a module that `s2sad build` wrote (its `globals()`) to the same
    functions compiled from the module's compiled text, as `s2sad.grad` compiles them; `package` is
    the runtime copy beside it, which the text's imports name.

    The file stays the readable source (what a reader, or a further transformation, sees); numba gets
    the rewritten lines, which keep their line numbers, so tracebacks and numba's disk cache still
    point into the file. The compiled copy runs in a namespace of its own and calls its own functions."""
    if namespace.get("__s2sad_compiled_text__"):
        return  # this is the compiled copy itself, running these lines
    from numba.core.registry import CPUDispatcher

    from s2sad.runtime import native

    if not any(isinstance(value, CPUDispatcher) for value in namespace.values()):
        return  # NUMBA_DISABLE_JIT: Python runs the readable functions
    name, path = namespace["__name__"], namespace["__file__"]
    loader = namespace.get("__loader__")
    source = loader.get_source(name) if loader is not None and hasattr(loader, "get_source") else None
    if source is None:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    compiled = {key: namespace[key] for key in ("__name__", "__package__", "__file__", "__spec__", "__loader__",
                                                "__builtins__") if key in namespace}
    compiled["__s2sad_compiled_text__"] = True
    exec(compile(vendored_imports(compiled_text(source), package), path, "exec"), compiled)
    for key, value in list(namespace.items()):
        if isinstance(value, CPUDispatcher) and isinstance(compiled.get(key), CPUDispatcher):
            native.cache_registering(compiled[key])
            namespace[key] = compiled[key]

"""What numba compiles for a generated module: its text after rewrites that keep every line where it is.

Standard library only (and the runtime's constants): `s2sad build` vendors these passes with the runtime,
so a built module compiles the same text at import that `s2sad.grad` compiles, while the file it ships
stays the readable source.
"""

from __future__ import annotations

import re

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
    """Tapes compiled as numba's own lists: `t = List()` lines become `t = []` and `x = t.pop()` lines
    `x = tape_pop(t)`, line for line.

    numba inlines push and pop on its reflected lists where a numba.typed.List goes through C
    helpers: the difference between a loop adjoint at the speed of a hand-written one and several
    times slower. `tape_pop` (runtime.core) is numba's pop without the
    realloc that shrinks the list on the way down. The source keeps `List()` and `.pop()`, which read
    (and parse back, for higher derivatives) as a tape; a tape never leaves the function that makes it."""
    tapes = {name for _, name in _TAPE_LINE.findall(source)}
    source = _TAPE_LINE.sub(r"\1\2 = []", source)
    runtime_import = _RUNTIME_IMPORT.search(source)
    if runtime_import is None:  # nothing imported from the runtime: keep list.pop
        return source
    popped = 0

    def pop_line(m: re.Match) -> str:
        nonlocal popped
        if m.group(3) not in tapes:
            return m.group(0)
        popped += 1
        return f"{m.group(1)}{m.group(2)} = tape_pop({m.group(3)})"

    source = _POP_LINE.sub(pop_line, source)
    if popped:
        at = runtime_import.end()
        source = source[:at] + "tape_pop, " + source[at:]
    return source


_TAPE_LINE = re.compile(r"^(\s*)(\w+) = List\(\)$", re.M)
_POP_LINE = re.compile(r"^(\s*)(\w+) = (\w+)\.pop\(\)$", re.M)
_RUNTIME_IMPORT = re.compile(r"^from (?:s2sad\.runtime|\.\w+) import \(", re.M)


def vendored_imports(code: str, package: str) -> str:
    """`code` importing the runtime from `package`, a copy of s2sad.runtime beside it (what `s2sad build`
    ships), not from s2sad; the passes above add their imports to the `import numpy as np` line."""
    return re.sub(r"(^|; )from s2sad\.runtime(\.\w+)? import", rf"\1from .{package}\2 import", code, flags=re.M)


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

"""Runtime helpers compiled once per machine as C functions, which compiled code calls by name.

numba links a copy of every jitted helper a function calls into that function's own module and emits
its machine code again there: a large helper costs its compile in every generated function that calls
it, even on a path that never runs (benchmarks/link_cost.py: 0.29 s per caller of `unbroadcast` at
-O3). A helper declared here is compiled once, as a C function (`numba.cfunc`) cached on disk, and
registered under a symbol name with llvmlite; a caller declares the symbol and compiles the call alone.

LLVM aborts the process on a symbol it cannot resolve, so a symbol is registered before any code that
calls it is compiled (`needed`, when numba types the call) or loaded from a cache: the caches of
generated code (`RegisteringImpl`: s2sad's, and a built package's through its compiled-text pass)
register the symbols a cached object file names before numba links it. numba code of one's own that
calls these helpers and is kept in numba's plain cache must be loaded after `register()`.
"""

from __future__ import annotations

from typing import Callable

from numba import types
from numba.core import caching

# How C functions are cached: "numba" keeps numba's own `cache=True` files (the vendored runtime, as its
# other helpers do); a callable makes the cache object for a function (s2sad.backend sets its private,
# checked cache); None compiles in memory.
CACHE: Callable | str | None = None

_DECLARED: dict[str, tuple[Callable, types.Signature]] = {}  # symbol -> (body, C signature)
_REGISTERED: dict[str, object] = {}  # symbol -> its compiled numba CFunc, kept alive with its code


FLOATS = (types.float64, types.float32)
# The kinds of a C function's parameters: a pointer to the floats it works on, a pointer to int64
# indices, a count (intp).
DATA, INDICES, COUNT = "data", "indices", "count"


def declare(body: Callable, parameters: tuple) -> dict:
    """`body` declared as a C function for each dtype of FLOATS, its parameters of the kinds
    `parameters` names, for jitted code to call by the symbol `s2sad_<body's name>_<dtype>`: dtype ->
    numba's type for the call. `body` is a module-level function (numba keys a closure's cache by its
    cells, which differ per process)."""
    found = {}
    for dtype in FLOATS:
        kinds = {DATA: types.CPointer(dtype), INDICES: types.CPointer(types.int64), COUNT: types.intp}
        signature = types.void(*[kinds[p] for p in parameters])
        symbol = f"s2sad_{body.__name__}_{dtype}"
        _DECLARED[symbol] = (body, signature)
        found[dtype] = types.ExternalFunction(symbol, signature)
    return found


def chosen(c_functions: dict, dtype, *arrays) -> types.ExternalFunction | None:
    """For numba's typing: the C function of `c_functions` (from `declare`) for `dtype`, registered,
    where every array of `arrays` (numba types, passed as pointers) is C-contiguous of that dtype;
    None where there is none, and the caller compiles its jitted loop instead."""
    found = c_functions.get(dtype)
    if found is None or any(a.dtype != dtype or a.layout != "C" for a in arrays):
        return None
    needed(found.symbol)
    return found


def compiled(symbol: str):
    """The registered C function (numba's CFunc) of `symbol`, or None."""
    return _REGISTERED.get(symbol)


def needed(symbol: str) -> None:
    """Register `symbol` (compiled, or loaded from the cache) before numba compiles a call of it."""
    if symbol not in _REGISTERED:
        _register(symbol)


def register() -> None:
    """Register every declared C function, compiling those the cache does not hold."""
    for symbol in _DECLARED:
        needed(symbol)


def register_called_by(object_code: bytes) -> None:
    """Register the C functions that compiled code calls, before numba links it: an object file names
    each symbol it calls from outside."""
    for symbol in _DECLARED:
        if symbol.encode() in object_code:
            needed(symbol)


class RegisteringImpl(caching.CompileResultCacheImpl):
    """numba's cache of compiled functions, except that the C functions the cached code calls are
    registered before numba links it."""

    def rebuild(self, target_context, payload):
        try:
            object_code = payload[0][2][0]  # CompileResult._reduce: (library: (name, "object", (code, bitcode)), ...)
        except (IndexError, TypeError):
            register()
        else:
            register_called_by(object_code)
        return super().rebuild(target_context, payload)


class RegisteringCache(caching.FunctionCache):
    _impl_class = RegisteringImpl


def cache_registering(dispatcher) -> None:
    """Give a dispatcher made with `cache=True` a cache that registers the C functions its cached code calls."""
    if isinstance(dispatcher._cache, caching.FunctionCache) and not isinstance(dispatcher._cache, RegisteringCache):
        dispatcher._cache = RegisteringCache(dispatcher.py_func)


def _register(symbol: str) -> None:
    import llvmlite.binding as llvm
    from numba.core import config, sigutils
    from numba.core.ccallback import CFunc

    if config.DISABLE_JIT:
        return
    body, signature = _DECLARED[symbol]
    compiled = CFunc(body, sigutils.normalize_signature(signature), locals={}, options={})
    if CACHE == "numba":
        compiled.enable_caching()
    elif CACHE is not None:
        compiled._cache = CACHE(body)
    compiled.compile()
    llvm.add_symbol(symbol, compiled.address)
    _REGISTERED[symbol] = compiled

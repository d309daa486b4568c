"""Turn generated source into callables: numba-compiled (default) or plain Python."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import sys
import types
from pathlib import Path

from s2sad.cache import cache_dir, ensure_file
from s2sad.runtime import PythonTape

BACKENDS = ("numba", "python")
_LOADED: dict[tuple[str, str], types.ModuleType] = {}


@functools.lru_cache(maxsize=1)
def toolchain_digest() -> str:
    """A hash of what compiled generated code depends on besides its text: the runtime helpers
    (numba overloads), the rules, and the versions of s2sad and numba. Part of every module's
    name, so editing a helper never reuses stale compiled code from the disk cache."""
    import numba

    from s2sad import __version__

    root = Path(__file__).resolve().parent
    h = hashlib.sha256(f"{__version__}\n{numba.__version__}\n".encode())
    for path in sorted([*(root / "runtime").glob("*.py"), *(root / "rules").glob("*.py")]):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def module_name(source: str, stem: str) -> str:
    digest = hashlib.sha256(f"{toolchain_digest()}\n{source}".encode()).hexdigest()[:20]
    return f"s2sad_gen_{stem}_{digest}"


def load_module(source: str, stem: str, backend: str) -> types.ModuleType:
    """Import `source` from a file in the cache dir (named by its hash, so never stale)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    name = module_name(source, stem)
    key = (name, backend)
    if key in _LOADED:
        return _LOADED[key]
    path = cache_dir() / f"{name}.py"
    ensure_file(path, source)
    if backend == "python":
        module = types.ModuleType(name + "_py")
        module.__file__ = str(path)
        exec(compile(source, str(path), "exec"), module.__dict__)
        module.List = PythonTape  # tapes as plain lists when running uncompiled
    else:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before exec: numba's cache locates functions through it
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    _LOADED[key] = module
    return module


def compile_function(source: str, stem: str, func: str, backend: str):
    """The function `func` defined in `source`, compiled for `backend`."""
    module = load_module(source, stem, backend)
    if backend == "numba" and module.__name__ not in _JITTED:
        _jit_module(module)
    return getattr(module, func)


_JITTED: set[str] = set()


def _jit_module(module: types.ModuleType) -> None:
    """Replace every function the module defines by its numba dispatcher, so they can call each other."""
    import numba

    for name, obj in list(vars(module).items()):
        if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
            parallel = "prange" in obj.__code__.co_names  # a vmap batch loop for target="parallel"
            setattr(module, name, numba.njit(cache=True, parallel=parallel)(obj))
    _JITTED.add(module.__name__)

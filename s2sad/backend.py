"""Turn generated source into callables: numba-compiled (default) or plain Python."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import importlib.abc
import importlib.util
import linecache
import os
import pickle
import re
import sys
import threading
import types
import warnings
from pathlib import Path

from numba.core import caching
from numba.core.caching import FunctionCache, IndexDataCacheFile

from s2sad import background
from s2sad.cache import (OWN_PREFIX, CacheWarning, cache_dir, ensure_file, mark_unusable, numba_dir, read_checked,
                         read_private, replacing, trusted_numba_dir, write_atomic, write_checked)
from s2sad.codegen import chains, precision
from s2sad.codegen.compiled import compiled_text
from s2sad.runtime import PythonTape, native

BACKENDS = ("numba", "python")
CACHE_FORMAT = 6  # part of every module name: bump it when the files' layout changes, so old ones are never read
_LOADED: dict[tuple[str, str], types.ModuleType] = {}
_TEXT = "__s2sad_numba_text__"  # a module global: the text numba compiles the module's functions from
_LOCK = threading.RLock()  # one import and one jit per module, however many threads ask at once
_PACKAGE_ROOT = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def toolchain_digest() -> str:
    """A hash of what compiled generated code depends on besides its text: the runtime helpers
    (numba overloads), the rules, the codegen passes (among them the compiled-text rewrites, whose
    output numba compiles while its cache is keyed by the readable file) and the versions of s2sad
    and numba. Part of every module's name, so editing any of them never reuses stale compiled code
    from the disk cache."""
    import numba

    from s2sad import __version__

    root = _PACKAGE_ROOT
    # numba's cache index ignores the optimization level: code compiled at NUMBA_OPT=0 (the tests) must
    # never be loaded where the default -O3 is expected (benchmarks, users)
    h = hashlib.sha256(f"{__version__}\n{numba.__version__}\n{CACHE_FORMAT}\n{numba.config.OPT}\n".encode())
    h.update(files_stamp(root, [path for folder in ("runtime", "rules", "codegen")
                                for path in (root / folder).glob("*.py")]))
    return h.hexdigest()[:16]


def files_stamp(root: Path, paths) -> bytes:
    """What tells an edit of these source files: each one's path, size and modification time, which is
    what Python's own bytecode cache trusts. Reading the files would cost every warm process a pass
    over the package's source before its first call."""
    stamps = []
    for path in sorted(paths):
        found = path.stat()
        stamps.append(f"{path.relative_to(root)} {found.st_size} {found.st_mtime_ns}")
    return "\n".join(stamps).encode()


def module_name(source: str, stem: str) -> str:
    digest = hashlib.sha256(f"{toolchain_digest()}\n{source}".encode()).hexdigest()[:20]
    return f"s2sad_gen_{stem}_{digest}"


def load_module(source: str, stem: str, backend: str, in_memory: bool = False) -> types.ModuleType:
    """Import `source`, written to a file in the cache dir named by its hash (so never stale); with
    `in_memory`, held only in linecache (see _source_file).

    Thread-safe: concurrent first calls get the same module. The code always comes from `source`
    itself, never from the file (nor a .pyc), so a damaged file can only cost a rewrite."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    name = module_name(source, stem)
    key = (name, backend)
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = _import(name, source, backend, in_memory)
        return _LOADED[key]


def _import(name: str, source: str, backend: str, in_memory: bool = False) -> types.ModuleType:
    path = _source_file(name, source, in_memory)
    if backend == "python":
        module = types.ModuleType(name + "_py")
        module.__file__ = str(path)
    else:  # numba, or "typed" (a module typed_module wrote, for one signature)
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path))
        sys.modules[name] = module  # before exec: numba's cache locates functions through it
    try:
        text = _numba_text(name, source) if backend == "numba" else source  # "typed": the text itself
        exec(compile(text, str(path), "exec"), module.__dict__)
        module.__dict__[_TEXT] = text
    except BaseException:
        if backend != "python":
            del sys.modules[name]
        raise
    if backend == "python":
        module.List = PythonTape  # tapes as plain lists when running uncompiled
    return module


def _source_file(name: str, source: str, in_memory: bool = False) -> Path:
    """Where `source` lives: a file in the cache dir, or (no usable cache dir, or `in_memory`) a name
    only in memory.

    Either way linecache holds its lines, so the frontend can read it back (grad of grad) even if
    another process clears the cache meanwhile."""
    folder = None if in_memory else cache_dir()
    if folder is not None:
        try:
            ensure_file(folder / f"{name}.py", source)
        except OSError as exc:
            mark_unusable(folder, exc)
            folder = None
    path = folder / f"{name}.py" if folder is not None else Path(f"<s2sad-memory>/{name}.py")
    lines = source.splitlines(keepends=True)
    linecache.cache[str(path)] = (len(source), None, lines, str(path))  # mtime None: never re-read from disk
    return path


def _numba_text(name: str, source: str) -> str:
    """`compiled_text(source)`, kept in the cache dir beside the module: a process that finds it skips
    the rewrite passes, a noticeable part of a warm first call.

    The module's name hashes its source and every pass (toolchain_digest), so a saved text can only be
    stale if damaged; a SHA-256 first line catches that, and the text is then made and saved again. The
    text is run: one that someone else could have written is never read (`read_private`)."""
    folder = cache_dir()
    path = None if folder is None else folder / f"{name}.compiled"
    if path is not None:
        saved = read_checked(path)
        if saved is not None:
            return saved
    text = compiled_text(source, chains_when_typed=False)
    if path is not None:
        try:
            write_checked(path, text)
        except OSError:  # an unwritable cache dir costs the rewrite again next time, nothing more
            pass
    return text


def _checks_file(source: str, stem: str) -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / f"{module_name(source, stem)}.checked"


def inferred_return_type(dispatcher, args: tuple, argtypes: tuple | None = None):
    """numba's type for what `dispatcher` returns on `args`, from type inference alone: the function
    itself is neither lowered nor optimized (the helpers it calls are compiled, as typing needs).
    None where inference fails or numba's compiler pipeline is not the one this was written for.

    `grad` checks once that the output is a scalar; compiling and running the primal for that would
    add the primal's own compile to the cold first call.

    The flags are the dispatcher's own, as its compile would set them: numba keys each helper it
    compiles for typing by the caller's flags, so the gradient (compiled with the same options) reuses
    every helper typed here instead of compiling it again.

    `argtypes`: numba's types of the arguments, where they are known instead of values (numba_callable)."""
    import numba

    try:
        argtypes = tuple(numba.typeof(a) for a in args) if argtypes is None else argtypes
    except (TypeError, ValueError):  # a value numba has no type for
        return None
    found = inferred_types(dispatcher, argtypes)
    return None if found is None else found[0]


def float32_results(dispatcher, args: tuple) -> tuple[int, ...]:
    """Positions of the scalars that `dispatcher`'s compiled code for `args` types float32 (all of a
    tuple result, or (0,) for a single scalar): numba returns them as Python floats, where NumPy gives
    np.float32. Empty on the python backend and where no code is compiled for `args`."""
    from numba.core import types as nbtypes

    overloads = getattr(dispatcher, "overloads", None)
    if not overloads:
        return ()
    try:
        compiled = overloads.get(tuple(dispatcher.typeof_pyval(a) for a in args))
    except (TypeError, ValueError):
        return ()
    if compiled is None:
        return ()
    result = compiled.signature.return_type
    items = result.types if isinstance(result, nbtypes.BaseTuple) else (result,)
    return tuple(k for k, t in enumerate(items) if t == nbtypes.float32)


def inferred_types(dispatcher, argtypes: tuple) -> tuple | None:
    """(the return type, numba's type of each variable of `dispatcher`'s function) for arguments of
    `argtypes`, from type inference alone (see inferred_return_type); None where inference fails.
    Variables are keyed as numba names them: a name bound more than once also as `name.1`, ..."""
    from numba.core import compiler, errors
    from numba.core.compiler_lock import global_compiler_lock

    try:
        flags = compiler.Flags()
        dispatcher.targetdescr.options.parse_as_flags(flags, dispatcher.targetoptions)
        flags = dispatcher._compiler._customize_flags(flags)
        typing, target = dispatcher.targetdescr.typing_context, dispatcher.targetdescr.target_context
        with global_compiler_lock:  # as a dispatcher compiles: other threads may be typing too
            typing.refresh()
            return compiler.compile_extra(typing, target, dispatcher.py_func, argtypes, None, flags,
                                          dispatcher.locals, pipeline_class=_typing_pipeline())
    except (errors.NumbaError, AttributeError, ImportError, TypeError, ValueError):
        return None


@functools.cache
def _typing_pipeline():
    """A numba compiler that stops after type inference and returns the inferred return type and
    type map (the pipeline API numba documents for custom compilers, plus its early-completion exception)."""
    from numba.core.compiler import CompilerBase, DefaultPassBuilder, _EarlyPipelineCompletion
    from numba.core.compiler_machinery import FunctionPass, register_pass
    from numba.core.typed_passes import NopythonTypeInference

    @register_pass(mutates_CFG=False, analysis_only=True)
    class ReturnInferredType(FunctionPass):
        _name = "s2sad_return_inferred_type"

        def __init__(self):
            FunctionPass.__init__(self)

        def run_pass(self, state):
            raise _EarlyPipelineCompletion((state.return_type, dict(state.typemap)))

    class TypingOnly(CompilerBase):
        def define_pipelines(self):
            pm = DefaultPassBuilder.define_untyped_pipeline(self.state)
            pm.add_pass(NopythonTypeInference, "nopython frontend")
            pm.add_pass(ReturnInferredType, "return the inferred type")
            pm.finalize()
            return [pm]

    return TypingOnly


def passed_check(source: str, stem: str, key: str) -> bool:
    """Has a check keyed `key` (one line) passed for the compiled module of `source`, in any process?

    The file sits beside the module, named by the same hash, so it can never describe other code.
    Used for the scalar-output check of grad: with it, a warm process need not load and run the primal."""
    path = _checks_file(source, stem)
    try:
        found = read_private(path) if path is not None else None
        return found is not None and key in found.decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False


def record_check(source: str, stem: str, key: str) -> None:
    """Remember that check `key` passed (best effort: a lost race or an unwritable dir only costs a re-check)."""
    path = _checks_file(source, stem)
    if path is None or passed_check(source, stem, key):
        return
    try:
        found = (read_private(path) or b"").decode("utf-8")
        write_atomic(path, found + key + "\n")
    except (OSError, UnicodeDecodeError):
        pass


def remember_lowered(source: str, stem: str, fn) -> None:
    """`fn` is the lowered function `source` was generated from: numba's errors about the module's
    lines are then placed at the user's lines (its statements' locations)."""
    _LOWERED[module_name(source, stem)] = fn


def compile_function(source: str, stem: str, func: str, backend: str):
    """The function `func` defined in `source`, compiled for `backend`."""
    with _LOCK:
        module = load_module(source, stem, backend)
        if backend == "numba" and module.__name__ not in _JITTED:
            _jit_module(module, source, stem)
        return getattr(module, func)


_JITTED: set[str] = set()
_LOWERED: dict[str, object] = {}  # a generated module's name -> the ir.Function it was generated from


def _jit_module(module: types.ModuleType, source: str, stem: str) -> None:
    """Replace every function the module defines by its numba dispatcher, so they can call each other."""
    import numba

    on_disk = Path(module.__file__).is_file()
    if on_disk:
        _cache_runtime()
    for name, obj in list(vars(module).items()):
        if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
            parallel = "prange" in obj.__code__.co_names  # a vmap batch loop for target="parallel"
            # NumPy's float semantics (1/0 is inf, not ZeroDivisionError), as NumPy and the python backend give
            dispatcher = numba.njit(parallel=parallel, error_model="numpy")(obj)
            if on_disk:
                _enable_disk_cache(dispatcher)
            _translate_errors(dispatcher)
            _fuse_for_each_signature(dispatcher, module)
            if on_disk:
                _compile_in_background(dispatcher, source, stem)
            setattr(module, name, dispatcher)
    _JITTED.add(module.__name__)


def _fuse_for_each_signature(dispatcher, module: types.ModuleType) -> None:
    """Compile `dispatcher` for each signature from a module of its own, in which the runs of
    elementwise lines the signature's types allow are written out as loops (codegen.chains.typed_module),
    or, for float32 arguments, the float constants are float32 (codegen.precision): numba compiles that
    text as printed, once. The types come from numba's type inference of the function as written (which
    compiles the helpers both texts call); the module's text is kept in the cache, so a later process
    loads it and numba's cached code without typing again. Where neither applies, the dispatcher
    compiles as written."""
    from numba.core import sigutils
    from numba.core.compiler_lock import global_compiler_lock

    compile_as_written = dispatcher.compile

    def compile(sig):
        args = tuple(sigutils.normalize_signature(sig)[0])
        with global_compiler_lock:
            if args not in dispatcher.overloads:
                typed = _typed_dispatcher(dispatcher, module, args)
                if typed is not None:
                    typed.compile(args)
                    dispatcher.add_overload(typed.overloads[args])
                    # numba's disk cache serves the typed module: its hits and misses count as this function's
                    dispatcher._cache_hits[args] += typed._cache_hits[args]
                    dispatcher._cache_misses[args] += typed._cache_misses[args]
            return compile_as_written(sig)  # the overload just added, or the function as written

    dispatcher.compile = compile


def _compile_in_background(dispatcher, source: str, stem: str) -> None:
    """A call from Python that finds no compiled code for its types, and none on disk, runs the python
    backend's function while a worker process compiles, where Python answers quickly (s2sad.background)."""
    compile_now = dispatcher._compile_for_args
    function = dispatcher.py_func.__name__
    module = module_name(source, stem)

    def compile_or_run_uncompiled(*args, **kwargs):
        if kwargs:
            return compile_now(*args, **kwargs)
        try:
            argtypes = tuple(dispatcher.typeof_pyval(a) for a in args)
        except Exception:  # numba's compile says what it cannot type
            return compile_now(*args)
        key = f"compiled {function} {argtypes}"

        def compile_here(*args):
            compiled = compile_now(*args)
            record_check(source, stem, key)  # a later process loads it from the disk cache, running no Python
            return compiled

        if not background.enabled():  # (a process with it on may read this one's marker)
            return compile_here(*args)
        job = background.job_of((module, key))
        if job is not None:
            if job.state == "compiling":
                return lambda *a: background.run_while_compiling(job, dispatcher, a)
            job.install()
            return compile_here(*args)  # loaded (numba finds it), or failed (numba's error, raised here)
        if background.in_process(module) or not background.alarm_free() or passed_check(source, stem, key):
            return compile_here(*args)  # Python is slow here, or cannot be stopped, or the disk cache has it

        def new_job() -> background.CompileJob:
            def load() -> None:
                dispatcher.compile(argtypes)
                record_check(source, stem, key)

            return background.CompileJob(source, stem, function, argtypes, load,
                                         lambda: getattr(load_module(source, stem, "python"), function))

        return lambda *a: background.first_call((module, key), module, new_job, dispatcher, a)

    dispatcher._compile_for_args = compile_or_run_uncompiled


def serve_compiles() -> None:
    """The background worker's main (s2sad.background): compile each job it is sent into the disk cache."""

    def compile_one(source: str, stem: str, function: str, argtypes: tuple) -> None:
        with collector_paused():
            compile_function(source, stem, function, "numba").compile(argtypes)
        record_check(source, stem, f"compiled {function} {argtypes}")

    background.serve(compile_one)


def _typed_dispatcher(dispatcher, module: types.ModuleType, args: tuple):
    """The dispatcher of the module `_fuse_for_each_signature` compiles `dispatcher` for `args` from, or
    None where no run fuses (said in the cache too: an empty text) or numba cannot type the function."""
    function = dispatcher.py_func.__name__
    name = f"{module.__name__}_{function}_{hashlib.sha256(str(args).encode()).hexdigest()[:12]}"
    folder = cache_dir()
    saved = None if folder is None else folder / f"{name}.compiled"
    text = None if saved is None else read_checked(saved)
    if text is None:
        text = _typed_text(dispatcher, module, args)
        if text is None:
            return None
        if saved is not None:
            try:
                write_checked(saved, text)
            except OSError:  # an unwritable cache dir costs the typing again next time, nothing more
                pass
    return _load_typed(name, text, dispatcher, module) if text else None


def _typed_text(dispatcher, module: types.ModuleType, args: tuple) -> str | None:
    """The text of the module `dispatcher`'s function compiles from for `args` ("": as written), or None
    where numba cannot type the function."""

    function, text = dispatcher.py_func.__name__, module.__dict__[_TEXT]
    if precision.single_precision(args):
        return precision.single_precision_module(text, function, module.__name__, args) or ""
    if not chains.has_runs(text, function):
        return ""  # said in the cache too: a later process reads that, where finding runs parses the text
    found = inferred_types(dispatcher, args)
    if found is None:
        return None
    return chains.typed_module(text, function, _type_by_name(found[1]), module.__name__) or ""


def _load_typed(name: str, text: str, dispatcher, module: types.ModuleType):
    """`dispatcher`'s function compiled from `text`, the module `name` typed_module wrote for one signature."""
    import numba

    function = dispatcher.py_func.__name__
    with _LOCK:
        key = (name, "numba")
        if key not in _LOADED:
            _LOADED[key] = _import(name, text, "typed", in_memory=not Path(module.__file__).is_file())
        typed = getattr(_LOADED[key], function)
        if not isinstance(typed, numba.core.registry.CPUDispatcher):
            options = {k: v for k, v in dispatcher.targetoptions.items() if k != "nopython"}
            typed = numba.njit(**options)(typed)
            if Path(typed.py_func.__code__.co_filename).is_file():
                _enable_disk_cache(typed)
            _translate_errors(typed)
            setattr(_LOADED[key], function, typed)
        return typed


class _TypedModuleFinder(importlib.abc.MetaPathFinder):
    """Imports a module typed_module wrote, by name, from its text in the cache dir.

    numba's cache names a callee by its module: a function whose cached code calls another generated
    function compiled for one signature names that signature's module (`<module>_<function>_<hash>`),
    which a later process has not made yet when it loads the caller. Its home module, imported first
    (the caller's module imports it), has the dispatcher it was typed from."""

    _NAME = re.compile(r"(s2sad_gen_\w+_[0-9a-f]{20})_(\w+)_[0-9a-f]{12}")

    def find_spec(self, fullname: str, path=None, target=None):
        found = self._NAME.fullmatch(fullname)
        home = sys.modules.get(found.group(1)) if found else None
        folder = cache_dir() if home is not None else None
        dispatcher = getattr(home, found.group(2), None) if folder is not None else None
        text = read_checked(folder / f"{fullname}.compiled") if dispatcher is not None else None
        if not text or not hasattr(dispatcher, "py_func"):
            return None
        _load_typed(fullname, text, dispatcher, home)
        return importlib.util.spec_from_loader(fullname, _Loaded(sys.modules[fullname]))


class _Loaded(importlib.abc.Loader):
    """The loader of a module made already: importing it changes nothing."""

    def __init__(self, module: types.ModuleType):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module) -> None:
        pass


sys.meta_path.append(_TypedModuleFinder())


def _type_by_name(typemap: dict):
    """`types_of(name)` for codegen.chains: numba's type of a variable, where every binding of the name
    has that one type."""
    found: dict[str, set] = {}
    for var, t in typemap.items():
        if not var.startswith(("$", "arg.")):
            found.setdefault(var.split(".")[0], set()).add(t)
    return lambda name: next(iter(found[name])) if len(found.get(name, ())) == 1 else None


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused while numba compiles. A compile makes hundreds of
    thousands of short-lived objects, and each pass of the collector walks every object the process
    holds, numba's compiled functions among them: in a process that has compiled much, up to a fifth of
    a compile's time goes to passes that find little. What a compile leaves behind is collected at the
    first pass after it."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _translate_errors(dispatcher) -> None:
    """numba compiles a function when a call finds no compiled version for its arguments; an error
    from that compile (typing, mostly) reaches the user as an error about their own line. The call path itself is C
    and looks the method up on the instance, so compiled calls pay nothing."""
    from numba.core.errors import NumbaError

    compile_for_args = dispatcher._compile_for_args

    def compile_for_user(*args, **kwargs):
        try:
            with collector_paused():
                return compile_for_args(*args, **kwargs)
        except NumbaError as exc:
            found = user_typing_error(exc)
            if found is None:
                raise
            raise found from None
        except NotImplementedError as exc:  # lowering, which names no line (keyword arguments of a ufunc)
            raise _lowering_error(dispatcher, exc) from None
        except AssertionError as exc:  # numba's own checks, where its typing meets what it does not support
            raise _lowering_error(dispatcher, exc) from exc

    dispatcher._compile_for_args = compile_for_user


_NUMBA_HINT = ('rewrite the line with what numba compiles (its documentation lists the "Supported NumPy features"), '
               'or run it uncompiled with backend="python"; s2sad.source(f) shows the generated code')


_GENERATOR_HINT = ("numba makes no random generator in compiled code, but draws from one it is given: take it as an "
                   "argument (`def f(x, rng)`, called with `np.random.default_rng(12)`), or run it uncompiled with "
                   'backend="python"')


def _lowering_error(dispatcher, exc) -> Exception:
    """numba's NotImplementedError while lowering generated code, placed at the user's function's first
    line: numba names no line for it."""
    from s2sad import ir
    from s2sad.errors import UnsupportedError, located_at

    fn = _LOWERED.get(Path(dispatcher.py_func.__code__.co_filename).stem)
    lines = ir.places(fn) if fn is not None else []
    message = (f"numba cannot compile the code generated for `{getattr(fn, 'name', dispatcher.py_func.__name__)}` "
               f"(it names no line): {str(exc) or f'an internal check failed ({type(exc).__name__})'}")
    return UnsupportedError(located_at(message, lines[0], _NUMBA_HINT) if lines else f"{message}\n  hint: {_NUMBA_HINT}")


def user_typing_error(exc) -> Exception | None:
    """numba's error (a TypingError, mostly) about a line of generated code as an error located at the
    user's line it came from (the comment above it quotes that line), or None where that line is unknown."""
    from s2sad import ir
    from s2sad.errors import UnsupportedError, located_at

    loc = getattr(exc, "loc", None)
    fn = _LOWERED.get(Path(getattr(loc, "filename", None) or "").stem)
    if fn is None or not loc.line:
        return None
    lines = linecache.getlines(loc.filename)
    quoted = next((ln.strip()[2:] for ln in reversed(lines[:loc.line]) if ln.strip().startswith("# ")), "")
    user = next((place for place in ir.places(fn) if quoted.startswith(place.text)
                 and quoted[len(place.text):] in ("", "  (reversed)")), None)
    if user is None:
        return None
    generated = lines[loc.line - 1].strip() if loc.line <= len(lines) else ""
    hint = _GENERATOR_HINT if "np.random.default_rng(" in generated else _NUMBA_HINT
    return UnsupportedError(located_at(
        f"numba cannot compile the code generated for this line (`{generated}`): {_reason(str(exc))}", user, hint))


def _reason(message: str) -> str:
    """The lines of numba's message that say what is wrong, without its pipeline header and the places;
    where one of s2sad's runtime functions refused its argument types, what that function said."""
    refused = message.partition("raised a specific error:\n")[2].strip().split("\n", 1)[0]
    if refused:
        return refused.partition(": ")[2] or refused
    kept = []
    for line in message.splitlines()[1:]:
        if line.startswith(("File ", "During:", "There are ")):
            break
        if line.strip():
            kept.append(line.strip())
    return " ".join(kept)[:400]


def _enable_disk_cache(dispatcher) -> None:
    """`cache=True`, with numba's files checked by a hash before they are loaded, in a folder only the
    user can write (else numba compiles in memory)."""
    root = Path(dispatcher.py_func.__code__.co_filename).parent
    try:
        numba_dir(root).mkdir(mode=0o700, parents=True, exist_ok=True)  # before numba makes it with the umask's mode
    except OSError:  # numba's locators then try their next place
        pass
    try:
        checked = _CheckedFunctionCache(dispatcher.py_func)
    except (OSError, RuntimeError) as exc:  # RuntimeError: numba found no writable place for it
        mark_unusable(root, exc)
        return
    if trusted_numba_dir(Path(checked.cache_path)):
        dispatcher._cache = checked


_RUNTIME_CACHED: list[Path] = []  # the folder the runtime's helpers are cached in, once chosen


def _cache_runtime() -> None:
    """numba's disk cache for the runtime's compiled helpers (its module-level functions), beside the
    generated modules' files: a process compiles only the helpers no process on this machine compiled
    before for the same types. The files are checked as the modules' are (`_CheckedFunctionCache`) and
    stamped with a digest of the runtime's files, numba's version and its optimization level, so an
    edit of any helper recompiles them all (numba's own stamp is the function's file alone, though a
    helper calls helpers of other files)."""
    import numba

    folder = cache_dir()
    if folder is None:
        return
    numba_folder = numba_dir(folder)
    if numba_folder in _RUNTIME_CACHED:
        return
    _RUNTIME_CACHED.append(numba_folder)
    try:
        numba_folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        mark_unusable(numba_folder, exc)
        return
    if not trusted_numba_dir(numba_folder):
        return
    import s2sad.runtime as runtime

    _RuntimeFunctionCache.folder = numba_folder
    native.CACHE = _RuntimeFunctionCache
    for module in [m for name, m in sorted(sys.modules.items()) if name.startswith(runtime.__name__ + ".")]:
        for name, obj in list(vars(module).items()):
            # a function defined at the module's top level: numba names its files by the qualified name,
            # which the functions a factory makes (`_max_block`, `_min_block`) share
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.py_func.__module__ == module.__name__ \
                    and obj.py_func.__qualname__ == name:
                obj._cache = _RuntimeFunctionCache(obj.py_func)


@functools.lru_cache(maxsize=1)
def _runtime_digest() -> str:
    import numba

    h = hashlib.sha256(f"{numba.__version__}\n{numba.config.OPT}\n".encode())
    h.update(files_stamp(_PACKAGE_ROOT, (_PACKAGE_ROOT / "runtime").glob("*.py")))
    return h.hexdigest()[:16]


class _DamagedCacheFile(ValueError):
    pass


def _verified(raw: bytes, path: str) -> bytes:
    digest, payload = raw[:32], raw[32:]
    if hashlib.sha256(payload).digest() != digest:
        raise _DamagedCacheFile(f"{path}: checksum mismatch (truncated or overwritten)")
    return payload


class _CheckedCacheFile(IndexDataCacheFile):
    """numba's index and data files, each payload preceded by its SHA-256: damage is detected, never loaded.
    Nothing is unpickled before its checksum is verified (numba's index starts with a pickled version:
    here it is a plain first line inside the checked part), nor from a file someone else could have
    written (`read_private`); files are written with mode 0600.

    Each data file also holds its index key: two processes compiling different signatures at once
    can leave an index naming the other one's data file, which is then a miss, not the wrong code."""

    def save(self, key, data) -> None:
        super().save(key, (key, data))

    def load(self, key):
        found = super().load(key)
        if found is None or found[0] != key:
            return None
        return found[1]

    def _dump(self, obj) -> bytes:
        payload = super()._dump(obj)
        return hashlib.sha256(payload).digest() + payload

    def _save_index(self, overloads: dict) -> None:
        payload = self._version.encode() + b"\n" + super()._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            f.write(hashlib.sha256(payload).digest() + payload)

    def _load_index(self) -> dict:
        raw = read_private(Path(self._index_path))
        if raw is None:
            return {}
        version, _, pickled = _verified(raw, self._index_path).partition(b"\n")
        if version != self._version.encode():
            return {}
        stamp, overloads = pickle.loads(pickled)
        return overloads if stamp == self._source_stamp else {}

    def _load_data(self, name: str):
        path = self._data_path(name)
        raw = read_private(Path(path))
        return None if raw is None else pickle.loads(_verified(raw, path))

    def _open_for_write(self, filepath: str):
        return replacing(Path(filepath))


class _CheckedFunctionCache(FunctionCache):
    """numba's `cache=True`, except that a damaged file means a warning and a recompile, not a crash, and
    that the runtime's C functions the cached code calls are registered before numba links it
    (runtime.native: LLVM aborts the process on a symbol it cannot resolve)."""

    _impl_class = native.RegisteringImpl

    def __init__(self, py_func):
        super().__init__(py_func)
        plain = self._cache_file
        self._cache_file = _CheckedCacheFile(self._cache_path, self._impl.filename_base, plain._source_stamp)

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # unpickling or rebuilding damaged bytes can fail in any way
            warnings.warn(f"s2sad: numba's cache of {self._py_func.__qualname__} in {self._cache_path} is damaged "
                          f"({type(exc).__name__}: {exc}); recompiling", CacheWarning, stacklevel=2)
            self._discard_index()
            return None

    def save_overload(self, sig, data) -> None:
        try:
            super().save_overload(sig, data)
        except Exception as exc:  # e.g. a full disk: the compiled code is fine, only not kept
            warnings.warn(f"s2sad: could not save numba's cache of {self._py_func.__qualname__} ({exc})",
                          CacheWarning, stacklevel=2)

    def _discard_index(self) -> None:
        try:
            os.unlink(self._cache_file._index_path)
        except OSError:
            pass


class _RuntimeLocator(caching._CacheLocator):
    """Where `_cache_runtime` keeps a runtime helper: one folder for all of them, files named with
    OWN_PREFIX (so `s2sad cache clear` removes them), stamped with `_runtime_digest`."""

    def __init__(self, folder: Path, py_file: str):
        self._folder = folder
        self._py_file = py_file  # where numba places its warning about a function it cannot cache

    def ensure_cache_path(self) -> None:
        self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def get_cache_path(self) -> str:
        return str(self._folder)

    def get_source_stamp(self) -> str:
        return _runtime_digest()

    def get_disambiguator(self) -> str:
        return "runtime"

    @classmethod
    def from_function(cls, py_func, py_file):
        return cls(_RuntimeFunctionCache.folder, py_file)


class _RuntimeCacheImpl(native.RegisteringImpl):
    _locator_classes = [_RuntimeLocator]

    def get_filename_base(self, fullname: str, abiflags: str) -> str:
        return f"{OWN_PREFIX}runtime_{super().get_filename_base(fullname, abiflags)}"


class _RuntimeFunctionCache(_CheckedFunctionCache):
    """A runtime helper's cache, set up when numba first asks it something: a process loads or compiles
    few of the runtime's helpers, and setting one up reads its file's stamp."""

    _impl_class = _RuntimeCacheImpl
    folder: Path  # set by _cache_runtime: numba builds the locator from the function alone

    def __init__(self, py_func):
        self._pending = py_func

    def __getattr__(self, name: str):
        pending = self.__dict__.pop("_pending", None)
        if pending is None:
            raise AttributeError(name)
        super().__init__(pending)
        return getattr(self, name)

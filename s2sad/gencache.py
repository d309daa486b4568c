"""Generated source kept on disk with what it was made from, so a new process skips code generation.

Without it, a warm process would parse, lower and differentiate a function again only to learn the
name of the module it compiled the day before, a large part of its first call. `generate` saves
each generated module beside the compiled code, with everything generation read: the source
text of the function and of every function it inlined, and what each name they use resolved to (a
number's value, a module, a rule, another function). A later process resolves those names again and
uses the saved module only if every answer is the same; anything it cannot describe that way (custom
rules, transformed functions, objects) is never saved, and generation runs in full each time.
"""

from __future__ import annotations

import builtins
import contextvars
import functools
import hashlib
import inspect
import json
import textwrap
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from s2sad import hidden, ir
from s2sad.cache import OWN_PREFIX, cache_dir, read_checked, write_checked

FORMAT = 2  # JSON after a SHA-256 line; part of generator_digest, so files of format 1 (a pickle) are stale
_PACKAGE_ROOT = Path(__file__).resolve().parent
_UNREADABLE = "unreadable"
_recording: contextvars.ContextVar[list | None] = contextvars.ContextVar("s2sad_gencache", default=None)


@dataclass(frozen=True)
class Summary:
    """What callers of a Generated read of its IR function (`Generated.fn`) once it is generated."""

    name: str
    params: list
    outputs: list
    output_shape: Any
    returns_tuple: bool
    hidden: tuple = ()  # never saved: a module with hidden parameters is generated in every process
    places: list = field(default_factory=list)  # the user lines' ir.Locs (numba errors point there)
    asks_types: bool = False
    fixes_unit_axes: bool = False


@dataclass
class Generated:
    """A generated module and the names callers look up in it. It is defined here, below code generation,
    because this module saves and restores it (`fn` is then a Summary) without generating anything."""

    source: str
    stem: str  # file-name friendly name of the user function
    primal: str  # name of the primal function in `source`
    derivative: str  # name of the vjp (reverse) or jvp (forward) function in `source`
    wrapper: str  # name of the function with the public transformation's signature
    fn: ir.Function | Summary


@functools.lru_cache(maxsize=1)
def generator_digest() -> str:
    """A hash of every s2sad source file: any change to the generator makes every saved module stale."""
    from s2sad.backend import files_stamp, toolchain_digest

    h = hashlib.sha256(f"{FORMAT}\n{toolchain_digest()}\n".encode())
    h.update(files_stamp(_PACKAGE_ROOT, _PACKAGE_ROOT.rglob("*.py")))
    return h.hexdigest()[:16]


def note(owner: Any, path: str, obj: Any) -> None:
    """Generation resolved the name (or attribute chain) `path` in `owner`'s scope to `obj`."""
    found = _recording.get()
    if found is not None:
        found.append((owner, path, obj))


@contextmanager
def recording():
    """Collect every `note` made inside (this thread or task only)."""
    found: list = []
    token = _recording.set(found)
    try:
        yield found
    finally:
        _recording.reset(token)


def source_digest(fn: types.FunctionType) -> str:
    """The function's source text where it is now, and its compiled code: two lambdas on one line
    share the text and differ in the code."""
    lines, first = inspect.getsourcelines(fn.__code__)
    h = hashlib.sha256(f"{fn.__code__.co_filename}:{first}\n{textwrap.dedent(''.join(lines))}".encode())
    _hash_code(h, fn.__code__)
    return h.hexdigest()


def _hash_code(h, code: types.CodeType) -> None:
    h.update(code.co_code + repr(code.co_names).encode() + repr(code.co_varnames).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(h, const)
        else:
            h.update(repr(const).encode())


def describe(obj: Any) -> tuple | None:
    """What generation did with `obj` depends only on this; None: nothing that can be compared later."""
    from s2sad.rules import registry

    if obj is None or isinstance(obj, (bool, int, float, complex, str, np.generic)):
        return ("value", type(obj).__module__, type(obj).__qualname__, repr(obj))
    if type(obj) is tuple:
        parts = tuple(map(describe, obj))
        return None if None in parts else ("tuple", parts)
    if isinstance(obj, types.ModuleType):
        return ("module", obj.__name__)
    if isinstance(obj, type):
        return ("type", obj.__module__, obj.__qualname__)
    if isinstance(obj, registry.Custom) or hasattr(obj, "__s2sad_transform__") or hasattr(obj, "__s2sad_fun__"):
        return None
    try:
        found = registry.lookup_object(obj)
    except TypeError:  # unhashable
        return None
    if found is not None:
        rule, spelling = found
        templates = [_template_digest(t) for t in (rule.adjoint, rule.tangent)]
        return None if _UNREADABLE in templates else ("rule", rule.name, spelling, *templates)
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and getattr(builtins, name, None) is obj:
        return ("builtin", name)
    fn = getattr(obj, "py_func", obj)  # a numba dispatcher: generation reads its Python function
    if isinstance(fn, types.FunctionType):
        try:
            digest = source_digest(fn)
        except (OSError, TypeError):
            return None
        return ("function", fn.__module__, fn.__qualname__, digest, repr(fn.__defaults__), repr(fn.__kwdefaults__))
    return None


def _template_digest(template: Callable | None) -> str | None:
    """A rule a user registered is generated from their template: its source counts. (s2sad's own
    rules are part of the generator's digest.)"""
    if not isinstance(template, types.FunctionType) or template.__module__.startswith("s2sad."):
        return None
    try:
        return source_digest(template)
    except (OSError, TypeError):
        return _UNREADABLE


def _resolve(owner: types.FunctionType, path: str) -> Any:
    """What `path` names in `owner`'s scope now, found as the frontend found it (`Parsed.resolve`)."""
    first, *attrs = path.split(".")
    obj = hidden.resolve_name(owner, first)
    for attr in attrs:
        obj = getattr(obj, attr)
    return obj


def dependencies(top: types.FunctionType, notes: list) -> list | None:
    """`notes` as (owner index, path, description) rows; owner 0 is `top`, owner k the k-th other
    function a note resolved to. None when some object cannot be described."""
    owners = [top]
    rows = []
    for owner, path, obj in notes:
        desc = describe(obj)
        index = next((i for i, f in enumerate(owners) if f is owner), None)
        if desc is None or index is None:
            return None
        rows.append((index, path, desc))
        fn = getattr(obj, "py_func", obj)
        if isinstance(fn, types.FunctionType) and all(fn is not f for f in owners):
            owners.append(fn)
    return rows


def still_valid(top: types.FunctionType, rows: list) -> bool:
    """Resolve every name again, in the order generation did; True when each gives the same answer."""
    owners = [top]
    for index, path, desc in rows:
        if index >= len(owners):
            return False
        try:
            obj = _resolve(owners[index], path)
        except (KeyError, AttributeError):
            return False
        if describe(obj) != desc:
            return False
        fn = getattr(obj, "py_func", obj)
        if isinstance(fn, types.FunctionType) and all(fn is not f for f in owners):
            owners.append(fn)
    return True


def _path(key: str, stem: str) -> Path | None:
    folder = cache_dir()
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)  # <lambda>
    return None if folder is None else folder / f"{OWN_PREFIX}{safe}_{key}.gen"


def cached_generate(key_parts: tuple, top: types.FunctionType, stem: str, make: Callable[[], Any]):
    """The Generated for `key_parts` (what is generated from `top`): the saved one when every
    dependency is unchanged, else `make()`, saved for the next process when it can be."""
    top_desc = describe(top)
    if top_desc is None:
        return make()
    key = hashlib.sha256(repr((generator_digest(), top_desc, key_parts)).encode()).hexdigest()[:24]
    path = _path(key, stem)
    if path is not None:
        found = _load(path, top)
        if found is not None:
            return found
    with recording() as notes:
        generated = make()
    rows = dependencies(top, notes)
    if path is not None and rows is not None and not generated.fn.hidden:
        _save(path, generated, rows)
    return generated


def _load(path: Path, top: types.FunctionType):
    """The saved Generated, or None when missing, damaged, not the user's alone (`read_checked`), or
    stale. The file is JSON: reading it runs nothing, and the source it holds is run only from a file
    only the user could have written."""
    text = read_checked(path)
    if text is None:
        return None
    try:
        saved = _from_json(json.loads(text))
        rows, fields, summary = saved["rows"], saved["generated"], Summary(**saved["fn"])
        generated = Generated(**fields, fn=summary)
    except (ValueError, KeyError, TypeError):  # from another format: generate again (and overwrite it)
        return None
    return generated if still_valid(top, rows) else None


def _save(path: Path, generated, rows: list) -> None:
    fn = generated.fn
    saved = {"rows": rows,
             "generated": {k: getattr(generated, k) for k in ("source", "stem", "primal", "derivative", "wrapper")},
             "fn": {"name": fn.name, "params": list(fn.params), "outputs": list(fn.outputs),
                    "output_shape": fn.output_shape, "returns_tuple": fn.returns_tuple, "places": ir.places(fn),
                    "asks_types": fn.asks_types, "fixes_unit_axes": fn.fixes_unit_axes}}
    try:
        write_checked(path, json.dumps(_to_json(saved)))
    except (TypeError, OSError):  # a structure it cannot hold, a full disk: the next process generates again
        pass


def _to_json(value):
    """`value` as JSON data that says which container each was: tuples, dicts with any keys, records and
    source places are tagged objects, lists are arrays. Anything else is a TypeError."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is list:
        return [_to_json(v) for v in value]
    if type(value) is tuple:
        return {"tuple": [_to_json(v) for v in value]}
    if type(value) is dict:
        return {"dict": [[_to_json(k), _to_json(v)] for k, v in value.items()]}
    if type(value) is ir.Record:
        return {"record": [_to_json(v) for v in value], "names": _to_json(value.names)}
    if type(value) is ir.Loc:
        return {"loc": [value.filename, value.line, value.col, value.text]}
    raise TypeError(f"cannot save a {type(value).__name__}")


def _from_json(data):
    """The value `_to_json` wrote (a ValueError where the data is not of its making)."""
    if not isinstance(data, (list, dict)):
        return data
    if isinstance(data, list):
        return [_from_json(v) for v in data]
    (tag, items), *names = data.items()
    if tag == "tuple":
        return tuple(_from_json(v) for v in items)
    if tag == "dict":
        return {_from_json(k): _from_json(v) for k, v in items}
    if tag == "record" and [name for name, _ in names] == ["names"]:
        return ir.Record([_from_json(v) for v in items], _from_json(names[0][1]))
    if tag == "loc":
        return ir.Loc(*items)
    raise ValueError(f"not a saved value: {tag!r}")

"""Build-time generation: derivative modules written into a package, importable without s2sad.

`s2sad build` (or the hatchling hook) writes, into one output folder:

    __init__.py            exports each entry point (`energy_grad`, `energy_hessian`, ...)
    energy_grad.py         one module per (function, transformation), numba-compiled on first call
    _s2sad_runtime/        a copy of s2sad.runtime, the only helpers generated code calls

The files import numpy, numba and that copy only: no libcst, no transformer at run time.
Output is a pure function of the sources, the transformations and the s2sad version, so
`s2sad build --check` can regenerate in memory and compare bytes.

A transformation is written like the Python API call it stands for, without the function:
`grad`, `grad(argnums=(0, 1))`, `value_and_grad(has_aux=True)`, `jvp(argnums=1)`, `hessian`,
`vmap(grad, in_axes=(None, 0, 0), target="parallel")`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import os
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from s2sad.codegen.compiled import native_tapes, vendored_imports
from s2sad.errors import S2SADError
from s2sad.frontend import GENERATED_MARK

RUNTIME_PACKAGE = "_s2sad_runtime"
PASSES = "passes"  # _s2sad_runtime/passes: the compiled-text rewrites (s2sad/codegen/compiled.py and what it imports)
# The last lines of every built module: numba compiles its functions after the rewrites s2sad.grad makes
COMPILED_TEXT_HOOK = f"""

# numba compiles the functions above as s2sad.grad does: after the line-keeping rewrites of
# {RUNTIME_PACKAGE}/{PASSES}/compiled.py (fused elementwise loops, vectorized exp/log/tanh); this file stays the source
from .{RUNTIME_PACKAGE}.{PASSES}.compiled import use_compiled_text  # noqa: E402
use_compiled_text(globals(), "{RUNTIME_PACKAGE}")
"""
MARKER = GENERATED_MARK  # in the first line of every file s2sad build writes
KINDS = ("grad", "value_and_grad", "jvp", "hessian", "vmap")
_OPTIONS = {"grad": {"argnums", "has_aux"}, "value_and_grad": {"argnums", "has_aux"}, "jvp": {"argnums"},
            "hessian": {"argnums"}, "vmap": {"in_axes", "target"}}


class BuildError(S2SADError):
    """A build configuration or target that cannot be generated."""


@dataclass(frozen=True)
class Transform:
    """One transformation of a function, as parsed from `grad(argnums=(0, 1))` and friends."""

    kind: str
    argnums: int | tuple[int, ...] = 0
    has_aux: bool = False
    inner: "Transform | None" = None  # vmap: the transformation batched (None: the function itself)
    in_axes: int | tuple = 0
    target: str = "cpu"

    def text(self) -> str:
        """The canonical spelling (what headers show and `parse_transform` reads back)."""
        args = []
        if self.kind == "vmap":
            if self.inner:
                args.append(self.inner.text())
            if self.in_axes != 0:
                args.append(f"in_axes={self.in_axes!r}")
            if self.target != "cpu":
                args.append(f"target={self.target!r}")
        else:
            if self.argnums != 0:
                args.append(f"argnums={self.argnums!r}")
            if self.has_aux:
                args.append("has_aux=True")
        return f"{self.kind}({', '.join(args)})" if args else self.kind

    def tag(self) -> str:
        """File-name suffix: `grad`, `grad_0_1`, `vmap_grad_parallel_over_1_2`."""
        if self.kind == "vmap":
            parts = ["vmap"] + ([self.inner.tag()] if self.inner else [])
            parts += ["parallel"] if self.target == "parallel" else []
            if isinstance(self.in_axes, tuple):
                parts.append("over_" + "_".join(str(i) for i, a in enumerate(self.in_axes) if a is not None))
            return "_".join(parts)
        nums = self.argnums if isinstance(self.argnums, tuple) else ((self.argnums,) if self.argnums else ())
        return "_".join([self.kind, *map(str, nums)] + (["aux"] if self.has_aux else []))


def parse_transform(text: str) -> Transform:
    """`grad(argnums=(0, 1))` -> Transform; BuildError naming what is wrong otherwise."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise BuildError(f"transformation {text!r} is not of the form kind(option=value, ...)") from None
    return _transform_from(node, text)


def _transform_from(node: ast.expr, text: str) -> Transform:
    call = node if isinstance(node, ast.Call) else None
    name = call.func if call else node
    if not isinstance(name, ast.Name) or name.id not in KINDS:
        raise BuildError(f"transformation {text!r}: expected one of {', '.join(KINDS)}")
    kind, options = name.id, {}
    positional = list(call.args) if call else []
    if kind == "vmap" and positional:
        options["inner"] = _transform_from(positional.pop(0), text)
        if options["inner"].kind not in ("grad", "value_and_grad"):
            raise BuildError(f"transformation {text!r}: vmap batches the function itself, grad or value_and_grad")
    if positional:
        raise BuildError(f"transformation {text!r}: write options by name, e.g. {kind}(argnums=1)")
    for kw in call.keywords if call else []:
        if kw.arg not in _OPTIONS[kind]:
            raise BuildError(f"transformation {text!r}: {kind} takes {', '.join(sorted(_OPTIONS[kind]))}, not {kw.arg}")
        try:
            options[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise BuildError(f"transformation {text!r}: the value of {kw.arg} must be a literal") from None
    if isinstance(options.get("argnums"), list):
        options["argnums"] = tuple(options["argnums"])
    return _validated(Transform(kind, **options), text)


def _validated(t: Transform, text: str) -> Transform:
    nums = t.argnums if isinstance(t.argnums, tuple) else (t.argnums,)
    if not nums or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nums):
        raise BuildError(f"transformation {text!r}: argnums must be a non-negative int or a tuple of them")
    if t.kind == "hessian" and not isinstance(t.argnums, int):
        raise BuildError(f"transformation {text!r}: a built hessian takes one argnum (an int)")
    if t.kind == "vmap":
        axes = t.in_axes if isinstance(t.in_axes, tuple) else (t.in_axes,)
        if any(a not in (0, None) for a in axes) or all(a is None for a in axes):
            raise BuildError(f"transformation {text!r}: in_axes entries must be 0 or None (at least one 0)")
        if t.target not in ("cpu", "parallel"):
            raise BuildError(f"transformation {text!r}: target must be 'cpu' or 'parallel'")
    return t


@dataclass(frozen=True)
class Target:
    """A function to generate derivatives of: `module:name`, and the transformations wanted."""

    module: str
    name: str
    transforms: tuple[Transform, ...]


@dataclass
class Config:
    output: Path
    targets: list[Target]
    paths: list[Path] = field(default_factory=list)  # put on sys.path to import the targets' modules


def load_config(path: str | os.PathLike) -> Config:
    """The `[tool.s2sad]` table of a TOML file (a pyproject.toml); paths in it are relative to the file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"{path}: cannot read the configuration: {exc}") from None
    return config_from_table(data.get("tool", {}).get("s2sad"), path)


def config_from_table(table: Any, path: Path) -> Config:
    if not isinstance(table, dict):
        raise BuildError(f"{path}: no [tool.s2sad] table (it lists the functions to generate and `output`)")
    unknown = set(table) - {"output", "paths", "functions"}
    if unknown:
        raise BuildError(f"{path}: unknown [tool.s2sad] key(s) {', '.join(sorted(unknown))} "
                         "(expected output, paths, functions)")
    if not isinstance(table.get("output"), str):
        raise BuildError(f'{path}: [tool.s2sad] needs output = "folder/for/generated/modules"')
    functions = table.get("functions")
    if not isinstance(functions, dict) or not functions:
        raise BuildError(f'{path}: [tool.s2sad.functions] must map "module:function" (or "module") '
                         'to a list of transformations, e.g. "pkg.mod:loss" = ["grad"]')
    root = path.parent
    paths = table.get("paths")
    if paths is None:
        paths = [p for p in (".", "src") if (root / p).is_dir()]
    paths = [root / p for p in paths]
    add_to_path(paths)
    targets = [target_from(spec, _spec_list(specs, spec, path)) for spec, specs in functions.items()]
    return Config(root / table["output"], [t for group in targets for t in group], paths)


def _spec_list(specs: Any, key: str, path: Path) -> list[str]:
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise BuildError(f'{path}: [tool.s2sad.functions] "{key}" must be a list of strings, e.g. ["grad"]')
    return specs


def target_from(spec: str, transforms: list[str]) -> list[Target]:
    """`pkg.mod:func` with `transforms` (default `grad`), or `pkg.mod`: its @s2sad.differentiate functions."""
    parsed = tuple(parse_transform(t) for t in transforms)
    module, _, name = spec.partition(":")
    if not module or (spec.count(":") > 1) or (":" in spec and not name):
        raise BuildError(f"expected MODULE:FUNCTION or MODULE, got {spec!r}")
    if name:
        return [Target(module, name, parsed or (Transform("grad"),))]
    from s2sad.api import differentiate

    marked = sorted((attr, obj) for attr, obj in vars(import_module(module)).items()
                    if isinstance(obj, differentiate) and getattr(obj, "__module__", None) == module)
    if not marked:
        raise BuildError(f"module {module!r} has no function decorated with @s2sad.differentiate; "
                         f"name one as {module}:FUNCTION")
    return [Target(module, attr, parsed or (_decorator_default(obj),)) for attr, obj in marked]


def _decorator_default(marked) -> Transform:
    options = marked._options
    argnums = tuple(options["argnums"]) if isinstance(options["argnums"], list) else options["argnums"]
    return _validated(Transform("grad", argnums=argnums, has_aux=options["has_aux"]), "@s2sad.differentiate")


def add_to_path(paths: list[Path]) -> None:
    for p in reversed(paths):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


def import_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise BuildError(f"cannot import module {name!r}: {exc} (add its folder to [tool.s2sad] paths)") from None


def resolve(target: Target) -> Callable:
    obj = import_module(target.module)
    for part in target.name.split("."):
        if not hasattr(obj, part):
            raise BuildError(f"module {target.module!r} has no attribute {target.name!r}")
        obj = getattr(obj, part)
    return obj


# ---------------------------------------------------------------------------------------------
# Generating one module
# ---------------------------------------------------------------------------------------------

_WHAT = {"grad": "Gradient", "value_and_grad": "Value and gradient", "jvp": "Forward-mode derivative (jvp)",
         "hessian": "Hessian", "vmap": "Batched loop (vmap)"}


def generate_file(target: Target, t: Transform) -> tuple[str, str, str]:
    """(file name, text, entry-point name) of `t` applied to `target`."""
    fun = resolve(target)
    code, entry = _generated_code(fun, t)
    outside = _hidden_parameters(fun)
    if outside:
        raise BuildError(f"{target.name}: {t.text()}: reads arrays from outside its arguments ({', '.join(outside)}), "
                         "which a built module cannot look up; pass them as arguments")
    stem = f"{target.name}_{t.tag()}"
    code = _compiled_with_numba(native_tapes(_vendored_imports(code)), skip=set())
    if entry != stem:
        code += f"\n\n{stem} = {entry}  # the name of this file: every generated module defines one\n"
    code += COMPILED_TEXT_HOOK
    params = _params_of(code, entry)
    return f"{stem}.py", _header(target, t, fun, stem, params) + code, stem


def _generated_code(fun: Callable, t: Transform) -> tuple[str, str]:
    """The generated module's code (its s2sad header dropped) and the name of its entry point."""
    from s2sad import api

    try:
        if t.kind in ("grad", "value_and_grad"):
            g = api._Reverse(fun, t.argnums, t.has_aux, "python", t.kind).generated
            return _body(g.source), g.wrapper
        if t.kind == "jvp":
            g = api._Forward(fun, t.argnums, "python").generated
            return _body(g.source), g.derivative
        if t.kind == "hessian":
            return _hessian_code(fun, t.argnums)
        inner = fun if t.inner is None else getattr(api, t.inner.kind)(fun, t.inner.argnums, t.inner.has_aux,
                                                                           backend="python")
        n_params = len(api._Batched(inner, (True,), "cpu", "python").params)  # the signature, nothing generated
        axes = t.in_axes if isinstance(t.in_axes, tuple) else (t.in_axes,) * n_params
        if len(axes) != n_params:
            raise BuildError(f"in_axes has {len(axes)} entries but the function takes {n_params} arguments")
        g = api._Batched(inner, tuple(a is not None for a in axes), t.target, "python").generated
        return _body(g.source), g.wrapper
    except (TypeError, ValueError) as exc:  # argnums out of range, tuple outputs, ...
        raise BuildError(f"{getattr(fun, '__name__', fun)}: {t.text()}: {exc}") from None


def _hidden_parameters(fun: Callable) -> list[str]:
    """How the function reaches the arrays it reads from globals, closures and objects (hidden.py)."""
    from s2sad import api

    return [where.spelled for _, where in api._Forward(fun, 0, "python").ir.hidden]  # (the IR is the same for any argnums)


def _hessian_code(fun: Callable, argnum: int) -> tuple[str, str]:
    """Forward mode over the generated gradient, and a loop of jvps along the basis vectors."""
    from s2sad import api

    gradient = api._Reverse(fun, argnum, False, "python", "grad").source_function()
    g = api._Forward(gradient, argnum, "python").generated
    params = list(inspect.signature(gradient).parameters)
    x, name = params[argnum], f"{api._as_function(fun).__name__}_hessian"
    size, hessian, k = _fresh(["size", "hessian", "k"], set(params))
    tangent_args = ", ".join(params + [f"unit_like({x}, {k})"])
    wrapper = textwrap.dedent(f'''\
        def {name}({', '.join(params)}):
            """d2 / d{x}2, shape {x}.shape + {x}.shape: one jvp of the gradient per element of `{x}`."""
            {size} = np.size({x})
            {hessian} = np.empty(({size}, {size}))
            for {k} in range({size}):
                set_column({hessian}, {k}, {g.wrapper}({tangent_args}))
            return square_block({hessian}, {x})
        ''')
    lines = _body(g.source).splitlines()
    last_import = max(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
    lines.insert(last_import + 1, "from s2sad.runtime import set_column, square_block, unit_like")
    return "\n".join(lines) + "\n\n\n" + wrapper, name


def _fresh(wanted: list[str], taken: set[str]) -> list[str]:
    """`wanted` names, each suffixed with a number if the user's parameters already use it."""
    out = []
    for base in wanted:
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}{n}"
        out.append(name)
    return out


def _body(source: str) -> str:
    """The generated module without its docstring (which names the absolute path of a file)."""
    tree = ast.parse(source)
    first = tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        source = "\n".join(source.splitlines()[first.end_lineno:]) + "\n"
    return source


def _vendored_imports(code: str) -> str:
    code = vendored_imports(code, RUNTIME_PACKAGE)
    for node in ast.walk(ast.parse(code)):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        if any(name == "s2sad" or name.startswith("s2sad.") for name in names):
            raise BuildError(f"generated code imports s2sad beyond its runtime: {ast.get_source_segment(code, node)!r}")
    return code


def _compiled_with_numba(code: str, skip: set[str]) -> str:
    """Decorate each top-level function with numba.njit (parallel=True where it loops with prange)."""
    lines = code.splitlines()
    functions = [n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name not in skip]
    for node in reversed(functions):
        uses_prange = any(isinstance(n, ast.Name) and n.id == "prange" for n in ast.walk(node))
        options = "cache=True, error_model=\"numpy\"" + (", parallel=True" if uses_prange else "")
        lines.insert(node.lineno - 1, f"@njit({options})")
    code = "\n".join(lines) + "\n"
    if "\nfrom numba import prange\n" in code:
        return code.replace("\nfrom numba import prange\n", "\nfrom numba import njit, prange\n", 1)
    return code.replace("\nimport numpy as np\n", "\nimport numpy as np\nfrom numba import njit\n", 1)


def _params_of(code: str, name: str) -> list[str]:
    node = next(n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in node.args.args]


def source_hash(fun: Callable) -> str:
    """sha256 (16 hex digits) of the function's own source text, as s2sad's frontend hashes it."""
    from s2sad.frontend import unwrap

    inner = unwrap(fun)
    inner = getattr(inner, "fun", inner)  # custom_jvp / custom_vjp: the primal
    return hashlib.sha256(textwrap.dedent(inspect.getsource(inner)).encode()).hexdigest()[:16]


def _header(target: Target, t: Transform, fun: Callable, stem: str, params: list[str]) -> str:
    from s2sad import __version__

    spec = f"{target.module}:{target.name}"
    return (f'"""{_WHAT[t.kind]} of `{spec}`, {MARKER} {__version__}. Do not edit.\n\n'
            f"Transformation: {t.text()}\n"
            f"Entry point: {stem}({', '.join(params)})\n"
            f"Source hash: {source_hash(fun)} (sha256 of `{target.name}`'s source)\n"
            f"Regenerate: s2sad build (configured in [tool.s2sad]), or s2sad build {spec} -t \"{t.text()}\" -o DIR;\n"
            f"`s2sad build --check` fails while this file is stale.\n"
            '"""\n')


# ---------------------------------------------------------------------------------------------
# The output folder
# ---------------------------------------------------------------------------------------------

def plan(targets: list[Target]) -> dict[str, str]:
    """Every file of the output folder: relative path -> text."""
    from s2sad import __version__

    files: dict[str, str] = {}
    origin: dict[str, str] = {}
    entries = []
    for target in targets:
        for t in target.transforms:
            name, text, entry = generate_file(target, t)
            if name in files:
                raise BuildError(f"{target.module}:{target.name} {t.text()} and {origin[name]} both write {name}; "
                                 "give them different output folders")
            files[name], origin[name] = text, f"{target.module}:{target.name} {t.text()}"
            entries.append(entry)
    init = [f'"""Derivatives {MARKER} {__version__}. Do not edit: regenerate with `s2sad build`."""\n']
    init += [f"from .{e} import {e}  # noqa: F401" for e in sorted(entries)]
    init.append(f"\n__all__ = {sorted(entries)!r}")
    files["__init__.py"] = "\n".join(init) + "\n"
    files.update(vendored_runtime())
    return files


def vendored_runtime() -> dict[str, str]:
    """s2sad.runtime (the submodules its __init__ and the compiled-text passes import) as
    `_s2sad_runtime/*.py`, and the passes as `_s2sad_runtime/passes/*.py`, their imports made relative."""
    root = Path(__file__).resolve().parent
    passes = _vendored(root / "codegen", ["compiled"], f"{RUNTIME_PACKAGE}/{PASSES}", {
        r"from s2sad\.codegen\.": "from .", r"from s2sad\.runtime\.": "from ..", r"from s2sad\.runtime import": "from .. import"})
    passes[f"{RUNTIME_PACKAGE}/{PASSES}/__init__.py"] = _marked("codegen", '"""The compiled-text passes."""\n')
    wanted = ["__init__", *_modules_compiled_text_imports()]
    wanted += sorted({m for text in passes.values() for m in re.findall(r"^\s*from \.\.(\w+) import", text, flags=re.M)})
    runtime = _vendored(root / "runtime", wanted, RUNTIME_PACKAGE, {
        r"from s2sad\.runtime\.": "from .", r"from s2sad\.runtime import": "from . import"})
    runtime[f"{RUNTIME_PACKAGE}/__init__.py"] += _NATIVE_CACHE
    return dict(sorted({**runtime, **passes}.items()))


# The vendored runtime keeps its C functions (runtime.native) in numba's own cache, as its other helpers.
_NATIVE_CACHE = """
native.CACHE = "numba"  # where the runtime's C functions are cached (runtime.native)
"""


def _vendored(folder: Path, todo: list[str], package: str, relative: dict[str, str]) -> dict[str, str]:
    """The modules `todo` of `folder` and the ones of it they import, for `package`, with the imports
    that `relative` names rewritten (and no other import of s2sad left)."""
    out: dict[str, str] = {}
    inside = rf"s2sad\.{folder.name}"
    while todo:
        stem = todo.pop()
        written = _WRITTEN_AT_BUILD.get(f"{folder.name}.{stem}")
        text = written() if written else (folder / f"{stem}.py").read_text(encoding="utf-8")
        for names in re.findall(rf"^\s*from {inside} import ([\w, ]+)$", text, flags=re.M):
            todo += [n.strip() for n in names.split(",")]
        todo += re.findall(rf"^\s*from {inside}\.(\w+) import", text, flags=re.M)
        for pattern, replacement in relative.items():
            text = re.sub(rf"^(\s*){pattern}", rf"\1{replacement}", text, flags=re.M)
        if re.search(r"^\s*(from|import) s2sad\b", text, flags=re.M):
            raise BuildError(f"s2sad/{folder.name}/{stem}.py imports s2sad beyond what is vendored: it cannot be vendored")
        out[f"{package}/{stem}.py"] = _marked(f"{folder.name}.{stem}", text)
        todo = [t for t in todo if f"{package}/{t}.py" not in out]
    return out


def _ufunc_tables() -> str:
    from s2sad.codegen.ufuncs import literal_module

    return literal_module()


# Modules the vendored passes import whose own text reads the rules: written out as their values instead.
_WRITTEN_AT_BUILD = {"codegen.ufuncs": _ufunc_tables}


def _marked(what: str, text: str) -> str:
    from s2sad import __version__

    return f"# s2sad.{what}, {MARKER} {__version__}. Do not edit.\n" + text


def _modules_compiled_text_imports() -> list[str]:
    """The runtime modules whose helpers the compiled-text passes make generated code call."""
    from s2sad.codegen import chains, lower, views, vmath

    statements = [chains.IMPORT, lower.IMPORT, views.IMPORT, *vmath.IMPORTS]
    return sorted({m for s in statements for m in re.findall(r"from s2sad\.runtime\.(\w+) import", s)})


def _existing(out_dir: Path) -> set[str]:
    """Files in `out_dir` that s2sad build wrote (their first line carries the marker)."""
    found = set()
    for path in [*out_dir.glob("*.py"), *(out_dir / RUNTIME_PACKAGE).rglob("*.py")]:
        with path.open(encoding="utf-8", errors="replace") as f:
            if MARKER in f.readline():
                found.add(path.relative_to(out_dir).as_posix())
    return found


def stale(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Paths (relative) that are missing, differ from `files`, or were generated but are no longer wanted."""
    changed = [name for name, text in files.items() if _read(out_dir / name) != text]
    return sorted(changed + [name for name in _existing(out_dir) if name not in files])


def write(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Bring `out_dir` up to date; returns the paths written or removed."""
    from s2sad.cache import write_atomic

    changed = stale(out_dir, files)
    mode = _plain_file_mode()
    for name in changed:
        path = out_dir / name
        if name in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, files[name])
            os.chmod(path, mode)  # package files, not the cache's private ones: readable as the umask allows
        else:
            path.unlink()
    return changed


def _plain_file_mode() -> int:
    """The mode `open()` gives a new file under the process's umask (0644 under the usual 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def build(config: Config, check: bool = False) -> list[str]:
    """Write (or, with `check`, only compare) the generated folder; returns the stale or changed paths."""
    add_to_path(config.paths)
    files = plan(config.targets)
    return stale(config.output, files) if check else write(config.output, files)

"""Command line: print generated code (`show`), generate modules into a package (`build`), manage the
disk cache (`cache info|clear`) and list the supported functions (`rules`).

Exit status: 0 success, 1 an error in the user's code or configuration (or `build --check` found
stale files), 2 bad command-line usage. Errors go to stderr.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys
from pathlib import Path
from typing import Callable

from s2sad.errors import S2SADError

EPILOG = {
    "show": "example: s2sad show examples/demo.py:loss --argnums 0,1 --signature 'f8[:], f8, f8[:, :], f8[:]'",
    "build": ('examples: s2sad build                      (the [tool.s2sad] table of ./pyproject.toml)\n'
              '          s2sad build pkg.mod:loss -t grad -t "hessian(argnums=1)" -o pkg/_generated\n'
              '          s2sad build --check            (exit 1 when generated files are stale: for CI)'),
}


class UsageError(Exception):
    """A command line that names something that does not exist (exit status 1, message to stderr)."""


class CommandLineError(UsageError):
    """A malformed command line: argparse's usage and the message on stderr, exit status 2."""


def _load(target: str):
    """`pkg.mod:func` or `path/to/file.py:func` -> the object."""
    module_name, _, attr = target.rpartition(":")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise UsageError(f"no such file: {module_name}")
        sys.path.insert(0, str(path.resolve().parent))
        module_name = path.stem
    else:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def _function_target(text: str) -> str:
    if ":" not in text:
        raise argparse.ArgumentTypeError(f"expected MODULE:FUNC or FILE.py:FUNC, got {text!r}")
    return text


def _numba_signature(text: str) -> str:
    from numba.core import sigutils

    try:
        sigutils.normalize_signature(f"({text},)")
    except Exception as exc:  # numba raises several kinds for a malformed string
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numba types such as 'f8[:], f8': {exc}") from None
    return text


TRANSFORMS = ("grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap", "jit")


def _transform_spec(text: str) -> Callable:
    """`"vmap(grad(argnums=1))"` -> a function applying that transformation (innermost first)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        return _transformation(node)
    except (SyntaxError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a transformation written like the API call, such as "
                                         f"grad, \"vmap(grad)\" or \"jacfwd(argnums=(0, 1))\": {exc}") from None


def _transformation(node: ast.expr) -> Callable:
    call = node if isinstance(node, ast.Call) else None
    name = call.func if call else node
    if not isinstance(name, ast.Name) or name.id not in TRANSFORMS:
        raise ValueError(f"expected one of {', '.join(TRANSFORMS)}")
    if call and len(call.args) > 1:
        raise ValueError(f"{name.id} takes one transformation by position (the one it applies to)")
    inner = _transformation(call.args[0]) if call and call.args else (lambda fun: fun)
    options = {kw.arg: ast.literal_eval(kw.value) for kw in (call.keywords if call else [])}

    def apply(fun):
        from s2sad import api

        return getattr(api, name.id)(inner(fun), **options)

    return apply


def _argnums(text: str):
    try:
        nums = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"argnums must be comma-separated integers, got {text!r}") from None
    return nums[0] if len(nums) == 1 else nums


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="s2sad", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{show,build,cache,rules}")
    _add_show(sub)
    _add_build(sub)
    cache = sub.add_parser("cache", help="where the disk cache of compiled modules is, its size; clear it",
                           description="The disk cache holds the generated modules s2sad compiles at run time "
                                       "(and numba's compiled code for them). $S2SAD_CACHE_DIR moves it.")
    cache.set_defaults(command_parser=cache)
    cache.add_argument("action", choices=("info", "clear"), help="info: location, size, entries; clear: delete them")
    table = sub.add_parser("rules", help="print the table of supported functions (markdown)")
    table.set_defaults(command_parser=table)
    table.add_argument("--update-readme", metavar="PATH", help="rewrite the table inside PATH instead")
    return parser


def _add_show(sub) -> None:
    show = sub.add_parser("show", help="print the generated source of a function's derivative",
                          description="Print the module s2sad generates (and compiles) for a derivative of FUNC.",
                          epilog=EPILOG["show"], formatter_class=argparse.RawDescriptionHelpFormatter)
    show.set_defaults(command_parser=show)
    show.add_argument("target", metavar="MODULE:FUNC", type=_function_target, help="e.g. mypkg.losses:loss or path/to/file.py:loss")
    show.add_argument("--transform", metavar="SPEC", type=_transform_spec,
                      help='print the program of this transformation of FUNC, written like the API call: grad, '
                           '"vmap(grad)", "jacfwd(argnums=(0, 1))", hessian (as s2sad.source of that function); '
                           "without it, FUNC's derivative code as --argnums, --mode and --order choose")
    show.add_argument("--argnums", type=_argnums, default=0, help="arguments to differentiate, e.g. 0,1")
    show.add_argument("--has-aux", action="store_true", help="the function returns (value, aux)")
    show.add_argument("--mode", choices=("rev", "fwd"), default="rev",
                      help="rev: adjoint (vjp) code, the default; fwd: tangent (jvp) code")
    show.add_argument("--order", type=int, default=1,
                      help="derivative order: N > 1 shows the code that differentiates the order N-1 code")
    show.add_argument("--vmap", choices=("cpu", "parallel"), metavar="TARGET",
                      help="show the batch loop of vmap(FUNC) (axis 0 of every argument) for TARGET: cpu or parallel")
    show.add_argument("--signature", metavar="TYPES", type=_numba_signature,
                      help="also compile the shown module's entry point (its last numba function) with numba for these "
                           "argument types, e.g. 'f8[:], f8', and print the signature numba inferred")
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                      help="syntax highlighting (needs `rich`): auto = only on a terminal, and not with $NO_COLOR")


def _add_build(sub) -> None:
    build = sub.add_parser("build", help="write generated derivative modules into a package (build time)",
                           description="Write the derivatives of TARGETs as plain Python + numba modules that "
                                       "import no libcst and no s2sad transformer. Without TARGETs, read the "
                                       "[tool.s2sad] table of --config (default ./pyproject.toml).",
                           epilog=EPILOG["build"], formatter_class=argparse.RawDescriptionHelpFormatter)
    build.set_defaults(command_parser=build)
    build.add_argument("targets", nargs="*", metavar="TARGET",
                       help="MODULE:FUNC, or MODULE for each of its @s2sad.differentiate functions")
    build.add_argument("-t", "--transform", action="append", default=[], metavar="SPEC",
                       help='a transformation, written like the API call: grad, "grad(argnums=(0, 1))", jvp, '
                            '"hessian(argnums=1)", "vmap(grad, in_axes=(None, 0), target=\'parallel\')"; '
                            "repeatable; default grad")
    build.add_argument("-o", "--output", metavar="DIR", help="output folder (a package); required with TARGETs")
    build.add_argument("--config", metavar="PATH",
                       help="TOML file with a [tool.s2sad] table (default ./pyproject.toml)")
    build.add_argument("--check", action="store_true",
                       help="write nothing; exit 1 if any generated file is missing or stale")


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return {"show": _show, "build": _build, "cache": _cache, "rules": _rules}[args.command](args)
    except CommandLineError as exc:
        args.command_parser.error(str(exc))  # exits 2
    except (S2SADError, UsageError, TypeError, ValueError) as exc:
        print(f"s2sad: {exc}", file=sys.stderr)
        return 1


def _show(args) -> int:
    from s2sad import api

    if args.transform and (args.vmap or args.has_aux or args.argnums != 0 or args.mode != "rev" or args.order != 1):
        raise CommandLineError("--transform names the whole transformation: write its options inside it, "
                               'e.g. --transform "vmap(grad(argnums=1))"')
    fun = _load(args.target)
    if args.transform:
        try:
            transformed = args.transform(fun)
        except TypeError as exc:  # an option the transformation does not take: a malformed line
            raise CommandLineError(str(exc)) from None
        text = api.source(transformed)
    else:
        if args.vmap:
            text = api.source(api.vmap(fun, target=args.vmap))
        else:
            text = api.source(fun, argnums=args.argnums, has_aux=args.has_aux, mode=args.mode, order=args.order)
    if args.signature:
        text += f"\n# numba: {_compile_entry(text, args.signature)}\n"
    _print_code(text, args.color)
    return 0


def _compile_entry(source: str, signature: str) -> str:
    """Compile the entry of `source` (its last numba function) for the numba types in `signature`; its
    full signature."""
    import numba
    from numba.core import sigutils

    from s2sad.backend import compile_function

    entry = _compiled_entry(ast.parse(source).body)
    argtypes = sigutils.normalize_signature(f"({signature},)")[0]  # checked by _numba_signature
    dispatcher = compile_function(source, "show", entry, "numba")
    try:
        dispatcher.compile(argtypes)
    except numba.core.errors.TypingError as exc:
        raise UsageError(f"{entry} does not compile for ({signature}):\n{exc}") from None
    except TypeError as exc:  # numba's "Signature mismatch": a count of types the entry does not take
        raise UsageError(f"--signature is for the entry point {entry}: {exc}") from None
    sig = dispatcher.overloads[argtypes].signature
    return f"{entry}({', '.join(map(str, sig.args))}) -> {sig.return_type}"


def _compiled_entry(body: list) -> str:
    """The last function numba compiles: the one before a Jacobian's Python driver (which follows its
    `from s2sad import jacobians`), if the program has one."""
    names = []
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module == "s2sad" and any(a.name == "jacobians" for a in node.names):
            break
        if isinstance(node, ast.FunctionDef):
            names.append(node.name)
    return names[-1]


def _print_code(text: str, color: str) -> None:
    """Python source, highlighted by rich on a terminal (plain when piped, with NO_COLOR, or without rich)."""
    wanted = color == "always" or (color == "auto" and sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    if wanted:
        try:
            from rich.console import Console
            from rich.syntax import Syntax
        except ImportError:
            wanted = False
    if not wanted:
        sys.stdout.write(text)
        return
    Console(force_terminal=True, soft_wrap=True).print(Syntax(text.rstrip("\n"), "python", background_color="default"))


def _build(args) -> int:
    from s2sad import build

    config = _build_config(args)
    paths = build.build(config, check=args.check)
    where = config.output
    if args.check:
        if paths:
            again = " ".join(["s2sad build", *(["--config", args.config] if args.config else [])])
            print(f"s2sad: {len(paths)} generated file(s) in {where} are stale; run `{again}` to regenerate "
                  "(with the same TARGETs and options, if you gave them):\n" + "\n".join(f"  {p}" for p in paths),
                  file=sys.stderr)
            return 1
        print(f"s2sad: {where} is up to date")
        return 0
    print(f"s2sad: {where}: " + (f"wrote {len(paths)} file(s)" if paths else "already up to date"))
    return 0


def _build_config(args):
    """The build's Config: from TARGETs and options, or from the [tool.s2sad] table of a TOML file."""
    from s2sad import build

    if not args.targets:
        if args.transform or args.output:
            raise CommandLineError("-t/--transform and -o/--output go with TARGETs; a config file sets them in "
                                   "[tool.s2sad]")
        return build.load_config(args.config or "pyproject.toml")
    if not args.output:
        raise CommandLineError("build with TARGETs needs -o/--output DIR")
    if args.config:
        raise CommandLineError("give TARGETs or --config, not both")
    build.add_to_path([Path.cwd()])
    targets = [t for spec in args.targets for t in build.target_from(spec, args.transform)]
    return build.Config(Path(args.output), targets, [Path.cwd()])


def _cache(args) -> int:
    from s2sad import cache

    if args.action == "clear":
        path = cache.cache_info()["path"] or "(no usable cache dir)"
        print(f"s2sad: removed {cache.clear_cache()} file(s) from {path}")
        return 0
    info = cache.cache_info()
    info["size"] = f"{info['bytes'] / 2**20:.1f} MiB"
    print("\n".join(f"{k}: {v}" for k, v in info.items()))
    return 0


def _rules(args) -> int:
    from s2sad.rules import catalog

    if args.update_readme:
        changed = catalog.update_readme(args.update_readme)
        print(f"s2sad: {args.update_readme} {'updated' if changed else 'already up to date'}")
    else:
        print(catalog.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: `s2sad show MODULE:FUNC [--mode fwd|rev] [--order N]` prints the code s2sad generates."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from s2sad.errors import S2SADError


def _load(target: str):
    if ":" not in target:
        raise SystemExit(f"s2sad: expected MODULE:FUNC, got {target!r}")
    module_name, _, attr = target.partition(":")
    sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"s2sad: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"s2sad: {module_name!r} has no attribute {attr!r}") from None
    return obj


def _argnums(text: str):
    try:
        nums = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"argnums must be comma-separated integers, got {text!r}") from None
    return nums[0] if len(nums) == 1 else nums


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="s2sad", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print the generated source of a function's derivative")
    show.add_argument("target", metavar="MODULE:FUNC", help="e.g. mypkg.losses:loss")
    show.add_argument("--argnums", type=_argnums, default=0, help="arguments to differentiate, e.g. 0,1")
    show.add_argument("--has-aux", action="store_true", help="the function returns (value, aux)")
    show.add_argument("--mode", choices=("rev", "fwd"), default="rev",
                      help="rev: adjoint (vjp) code, the default; fwd: tangent (jvp) code")
    show.add_argument("--order", type=int, default=1,
                      help="derivative order: N > 1 shows the code that differentiates the order N-1 code")
    show.add_argument("--vmap", choices=("cpu", "parallel"), metavar="TARGET",
                      help="show the batch loop of vmap(FUNC) (over axis 0 of every argument) for TARGET")
    table = sub.add_parser("rules", help="print the table of supported functions (markdown)")
    table.add_argument("--update-readme", metavar="PATH", help="rewrite the table inside PATH instead")
    args = parser.parse_args(argv)
    if args.command == "rules":
        from s2sad.rules import catalog

        if args.update_readme:
            changed = catalog.update_readme(args.update_readme)
            print(f"s2sad: {args.update_readme} {'updated' if changed else 'already up to date'}")
        else:
            print(catalog.markdown())
        return 0
    from s2sad import api

    try:
        fun = _load(args.target)
        if args.vmap:
            fun = api.vmap(fun, target=args.vmap)
        print(api.source(fun, args.argnums, args.has_aux, args.mode, args.order), end="")
    except (S2SADError, TypeError, ValueError) as exc:
        print(f"s2sad: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

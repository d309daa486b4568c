"""Differentiation rules, one place per primitive. Importing this package registers them all (SciPy's on first use)."""

import importlib
import sys

from s2sad.rules.registry import (Check, Rule, alias, all_rules, defrule, lookup, lookup_object, nondiff,
                                  register)

# family title -> module; each module's registrations are recorded under its family (for the README table)
FAMILIES = {"Operators": "arithmetic", "Elementwise": "elementwise", "Reductions": "reductions",
            "Linear algebra": "linalg", "Shapes and joining": "shapes", "Array creation and shape queries": "arrays",
            "SciPy (scipy.special, scipy.stats.norm)": "special", "Runtime helpers (generated code)": "helpers"}
OPTIONAL = {"special"}  # they import SciPy: loaded by load_optional when a program first names a SciPy function
FAMILY_OF: dict[str, str] = {}  # rule name -> family title


def _load(title: str, module: str) -> None:
    before = {r.name for r in all_rules()}
    importlib.import_module(f"s2sad.rules.{module}")
    FAMILY_OF.update((r.name, title) for r in all_rules() if r.name not in before)


def optional_loaded() -> bool:
    return all(f"s2sad.rules.{m}" in sys.modules for m in OPTIONAL)


def load_optional() -> None:
    """Register the rules for functions of optional packages (SciPy), where the package is installed."""
    for title, module in FAMILIES.items():
        if module in OPTIONAL and f"s2sad.rules.{module}" not in sys.modules:
            try:
                _load(title, module)
            except ModuleNotFoundError as exc:
                if exc.name is None or not exc.name.startswith("scipy"):
                    raise
                sys.modules[f"s2sad.rules.{module}"] = None  # not installed: its functions have no rules


for _title, _module in FAMILIES.items():
    if _module not in OPTIONAL:
        _load(_title, _module)

__all__ = ["Check", "Rule", "alias", "all_rules", "defrule", "load_optional", "lookup", "lookup_object", "nondiff",
           "register"]

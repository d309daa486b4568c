"""Differentiation rules, one place per primitive. Importing this package registers them all."""

import importlib

from s2sad.rules.registry import (Check, Rule, alias, all_rules, defrule, lookup, lookup_object, nondiff,
                                  register)

# family title -> module; each module's registrations are recorded under its family (for the README table)
FAMILIES = {"Operators": "arithmetic", "Elementwise": "elementwise", "Reductions": "reductions",
            "Linear algebra": "linalg", "Shapes and joining": "shapes", "Array creation and shape queries": "arrays",
            "Runtime helpers (generated code)": "helpers"}
FAMILY_OF: dict[str, str] = {}  # rule name -> family title
for _title, _module in FAMILIES.items():
    _before = {r.name for r in all_rules()}
    importlib.import_module(f"s2sad.rules.{_module}")
    FAMILY_OF.update((r.name, _title) for r in all_rules() if r.name not in _before)

__all__ = ["Check", "Rule", "alias", "all_rules", "defrule", "lookup", "lookup_object", "nondiff", "register"]

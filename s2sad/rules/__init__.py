"""Differentiation rules, one place per primitive. Importing this package registers them all."""

from s2sad.rules.registry import (Check, Rule, alias, all_rules, defrule, lookup, lookup_object, nondiff,
                                  register)
from s2sad.rules import arithmetic, arrays, elementwise, helpers, linalg, reductions, shapes  # noqa: F401  (registration side effects)

__all__ = ["Check", "Rule", "alias", "all_rules", "defrule", "lookup", "lookup_object", "nondiff", "register"]

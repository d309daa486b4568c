"""The registry's finite-difference checks as test cases: each differentiable rule's `Check`s, their operands'
sample values and the functions they call (tests/test_rules.py, tests/test_forward_closure.py)."""

import importlib.util
import re
import sys
import zlib

import numpy as np

import third_party  # noqa: F401  (rules registered as a user registers them: checked with s2sad's own)
from s2sad.rules import all_rules, load_optional

load_optional()  # SciPy's rules, which s2sad otherwise loads when a program first names a SciPy function
OPERANDS = "abc"
RULES = [r for r in all_rules() if r.differentiable]
CASES = [(rule, check, shape) for rule in RULES for check in rule.checks for shape in check.shapes]


def operands(expr):
    return [c for c in OPERANDS if re.search(rf"\b{c}\b", expr)]


def shapes(shape, n):
    per_operand = len(shape) > 0 and all(isinstance(s, tuple) for s in shape)
    return list(shape) if per_operand else [shape] * n


def sample(rng, shape, domain):
    """Operand values for a check: `domain` keeps them where the function is smooth."""
    size = shape if shape else None
    if domain == "positive":
        x = rng.uniform(0.5, 2.0, size)
    elif domain == "unit":  # |x| < 1
        x = rng.uniform(-0.8, 0.8, size)
    elif domain == "nonzero":
        x = rng.choice([-1.0, 1.0], size) * rng.uniform(0.5, 1.5, size)
    elif domain == "above_one":
        x = rng.uniform(1.2, 3.0, size)
    elif domain == "distinct":  # no ties, gaps much larger than the finite-difference step
        n = int(np.prod(shape)) if shape else 1
        x = (rng.permutation(n) * 0.37 + rng.uniform(-0.05, 0.05, n) - 0.5 * n * 0.37).reshape(shape)
    elif domain == "spd":  # symmetric positive definite in the last two axes
        m = rng.normal(size=shape)
        x = m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])
    else:
        x = rng.normal(size=size) * 0.8
    return float(x) if not shape else x


def case_args(case, salt=""):
    """The operands of a case: the same values in every run."""
    rule, check, shape = case
    rng = case_rng(salt + case_id(case))
    return [sample(rng, s, check.domain) for s in shapes(shape, len(operands(check.expr)))]


_MODULES = {}


def check_function(expr, names, tmp_path_factory, body="return {expr}"):
    """`def f(a, b): <body>` in a module of its own (s2sad reads the source), `{expr}` the check's call."""
    key = (expr, tuple(names), body)
    if key not in _MODULES:
        folder = tmp_path_factory.mktemp("rulecheck")
        header = "import math\nimport numpy as np\nimport scipy.special\nimport scipy.stats\nimport third_party  # noqa: F401\nfrom s2sad.runtime import *  # noqa\n"
        lines = "".join(f"    {line}\n" for line in body.format(expr=expr).splitlines())
        src = f"{header}\n\ndef f({', '.join(names)}):\n{lines}"
        path = folder / "rulecheck_mod.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(f"rulecheck_{len(_MODULES)}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _MODULES[key] = module.f
    return _MODULES[key]


def case_id(case):
    rule, check, shape = case
    return f"{rule.name}:{check.expr}:{shape}"


def case_rng(text):
    """The same samples in every run (str hashes differ between processes unless PYTHONHASHSEED is set)."""
    return np.random.default_rng(zlib.crc32(text.encode()))

"""The rules' facts the compiled-text passes read: the ufuncs they treat as arithmetic, helpers shaped like an operand.

`s2sad build` vendors the passes into the packages it writes, without the rules: there this module
is `literal_module()`'s text, the same tables written out.
"""

from __future__ import annotations

from s2sad import runtime
from s2sad.rules import all_rules
from s2sad.rules.registry import spellings

# Rules of optional packages (SciPy) print as runtime stand-ins, never as np.<name>.
UFUNCS = {s.removeprefix("np.") for r in all_rules() if r.fuses for s in spellings(r) if s.startswith("np.")}
VECTORIZED = {s.removeprefix("np."): r.vmath for r in all_rules() if r.vmath  # runtime.vmath's kernels, by NumPy name
              for s in spellings(r) if s.startswith("np.")}
# runtime helpers whose result has an operand's shape: name -> that operand's position
SHAPE_OF = {s: r.shaped_like for r in all_rules() if r.shaped_like is not None
            for s in spellings(r) | {r.print_as} if s in runtime.__all__}


def literal_module() -> str:
    """This module as the vendored passes import it: the tables alone."""
    names = ", ".join(repr(name) for name in sorted(UFUNCS))
    return (f'"""{__doc__.splitlines()[0]}"""\n\nUFUNCS = {{{names}}}\n'
            f"VECTORIZED = {dict(sorted(VECTORIZED.items()))!r}\n"
            f"SHAPE_OF = {dict(sorted(SHAPE_OF.items()))!r}\n")

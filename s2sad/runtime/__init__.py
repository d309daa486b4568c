"""Type-directed helpers that generated code calls; each works in Python and under numba.

Generated modules import every name in `__all__` (see codegen/emit.py), so a helper added to a
submodule's `__all__` is available to rule templates at once. Every module that declares C functions
(runtime.native) is imported here, so that registering them all registers each.
"""

# naming first: every runtime helper compiles under names no other process gives to other code
from s2sad.runtime import naming
from s2sad.runtime import core, elementwise, fused, linalg, masks, memory, native, reductions, shapes, special, vmath
from s2sad.runtime.core import *  # noqa: F401,F403
from s2sad.runtime.elementwise import *  # noqa: F401,F403
from s2sad.runtime.fused import *  # noqa: F401,F403
from s2sad.runtime.linalg import *  # noqa: F401,F403
from s2sad.runtime.reductions import *  # noqa: F401,F403
from s2sad.runtime.shapes import *  # noqa: F401,F403
from s2sad.runtime.special import *  # noqa: F401,F403

memory.tune_malloc()

__all__ = sorted(set(core.__all__ + elementwise.__all__ + fused.__all__ + linalg.__all__ + reductions.__all__
                     + shapes.__all__ + special.__all__))

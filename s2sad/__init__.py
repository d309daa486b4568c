"""s2sad: source-to-source automatic differentiation for Python/NumPy, compiled by numba."""

__version__ = "0.1.0"

from s2sad.api import (differentiate, grad, hessian, jacfwd, jacrev, jit, jvp, source, stop_gradient,  # noqa: E402
                       value_and_grad, vjp, vmap)
from s2sad.background import wait_for_compiles  # noqa: E402
from s2sad.check import check_grads  # noqa: E402
from s2sad.custom import custom_jvp, custom_vjp  # noqa: E402
from s2sad import tree  # noqa: E402
from s2sad.errors import S2SADError, SourceUnavailableError, UnsupportedError  # noqa: E402
from s2sad.cache import CacheWarning  # noqa: E402

__all__ = ["check_grads", "custom_jvp", "custom_vjp", "differentiate", "grad", "hessian", "jacfwd", "jacrev", "jit", "jvp", "source", "stop_gradient",
           "value_and_grad", "vjp", "vmap", "wait_for_compiles",
           "tree", "CacheWarning", "S2SADError", "SourceUnavailableError", "UnsupportedError", "__version__"]

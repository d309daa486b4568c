"""Keep freed array memory in the process, so the next gradient call does not fault it back in.

Generated code allocates whole arrays per operation, as NumPy code does, and numba takes that memory
from malloc. glibc serves large blocks with fresh mmap pages and returns freed memory to the system
beyond a small threshold, so every call of a vectorized gradient pays the kernel to zero its pages
again, a large part of a gradient call over large arrays (as the GMM benchmark's).

`tune_malloc` raises glibc's two thresholds, once per process: blocks up to 32 MiB (glibc's maximum)
come from the heap, and up to 256 MiB of freed memory stays there for reuse. Set the environment
variable S2SAD_MALLOC_TUNING=0 to leave malloc as it is. Elsewhere (not glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20

_tuned: bool | None = None


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module docstring); True when they are set."""
    global _tuned
    if _tuned is None:
        _tuned = _set_thresholds()
    return _tuned


def _set_thresholds() -> bool:
    if not sys.platform.startswith("linux") or os.environ.get("S2SAD_MALLOC_TUNING", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: other C libraries spell these parameters differently
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

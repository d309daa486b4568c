"""Launching generated CUDA kernels (vmap(target="cuda")): data to the device, a grid, results back.

Imported only by generated CUDA modules, so `numba.cuda` (the `numba-cuda` package,
`pip install s2sad[cuda]`) is needed only when that target is used.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

THREADS_PER_BLOCK = 128


def on_device(a) -> bool:
    return hasattr(a, "__cuda_array_interface__") or hasattr(a, "copy_to_host")  # numba's (or the simulator's), CuPy, ...


def launch(kernel, n: int, args: tuple, out_shapes: tuple, returns_tuple: bool):
    """Run `kernel[grid, block](*args, *outs)` with one thread per example; outs have shape (n,) + out_shape.

    Arrays already on the device are used as they are (no copy) and the results then stay on the
    device; host arrays are copied over and the results copied back.
    """
    keep_on_device = any(on_device(a) for a in args)
    moved = tuple(cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in args)
    outs = [cuda.device_array((n, *shape), dtype=np.float64) for shape in out_shapes]
    if n > 0:
        blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        kernel[blocks, THREADS_PER_BLOCK](*moved, *outs)
    results = outs if keep_on_device else [o.copy_to_host() for o in outs]
    return tuple(results) if returns_tuple or len(results) > 1 else results[0]

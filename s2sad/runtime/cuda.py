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


def launch(kernel, n: int, args: tuple, out_shapes: tuple, returns_tuple: bool, batched: tuple | None = None,
           dtype=np.float64):
    """Run `kernel[grid, block](*args, *outs)` with one thread per example; outs have shape (n,) + out_shape
    and `dtype`.

    Arrays already on the device are used as they are and the results then stay on the device; host
    arrays are copied over and the results copied back. A batch of vectors (an (n, m) float array
    mapped over its rows, marked in `batched`) is handed to the kernel in column-major order, and
    vector results come back in it: neighbouring threads then read and write neighbouring addresses,
    which the GPU merges into few memory transactions. Row-major, each thread's row is m * 8 bytes
    from the next thread's, and every load touches as many cache lines as the warp has threads.
    """
    keep_on_device = any(on_device(a) for a in args)
    batched = batched or (False,) * len(args)
    moved = tuple(_column_major(a) if is_b and _is_vector_batch(a) else _to_device(a)
                  for a, is_b in zip(args, batched))
    outs = [cuda.device_array((n, *shape), dtype=dtype, order="F" if len(shape) == 1 else "C")
            for shape in out_shapes]
    if n > 0:
        blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        kernel[blocks, THREADS_PER_BLOCK](*moved, *outs)
    results = outs if keep_on_device else [o.copy_to_host() for o in outs]
    return tuple(results) if returns_tuple or len(results) > 1 else results[0]


def _to_device(a):
    return cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a


def _is_vector_batch(a) -> bool:
    return len(getattr(a, "shape", ())) == 2 and getattr(a, "dtype", None) in (np.float64, np.float32)


def _column_major(a):
    """An (n, m) float array on the device in column-major (Fortran) order, with a's values."""
    if isinstance(a, np.ndarray) and a.flags.f_contiguous:
        return cuda.to_device(a)
    if isinstance(a, np.ndarray):
        rows = _to_device(a)
    else:  # numba's device arrays (or the simulator's) as they are, others (CuPy) through their interface
        rows = a if hasattr(a, "is_f_contiguous") else cuda.as_cuda_array(a)
    if rows.is_f_contiguous():
        return rows
    out = cuda.device_array(rows.shape, dtype=rows.dtype, order="F")
    n, m = rows.shape
    if n and m:
        _relayout[((n + TILE - 1) // TILE, (m + TILE - 1) // TILE), (TILE, TILE_ROWS)](rows, out)
    return out


TILE, TILE_ROWS = 32, 8  # a 32 x 32 tile through shared memory, 8 rows of threads
TILE_SHAPE = (32, 33)  # + 1 column: no shared-memory bank conflicts (a literal: the GPU compiler needs one)


@cuda.jit
def _relayout(src, dst):
    """dst[:] = src[:] for arrays of one shape in different memory orders, coalesced both ways: a
    tile is read along src's rows into shared memory, then written along dst's columns."""
    tile = cuda.shared.array(TILE_SHAPE, np.float64)
    r0, c0 = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for k in range(0, TILE, TILE_ROWS):
        r, c = r0 + ty + k, c0 + tx
        if r < src.shape[0] and c < src.shape[1]:
            tile[ty + k, tx] = src[r, c]
    cuda.syncthreads()
    for k in range(0, TILE, TILE_ROWS):
        r, c = r0 + tx, c0 + ty + k
        if r < dst.shape[0] and c < dst.shape[1]:
            dst[r, c] = tile[tx, ty + k]

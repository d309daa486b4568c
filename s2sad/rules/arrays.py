"""Array creation and shape queries (no derivative)."""

import numpy as np

from s2sad.rules.registry import nondiff

nondiff(np.shape, name="shape")
nondiff(np.size, name="size")
nondiff(np.ndim, name="ndim")
nondiff(len, name="len")
nondiff(np.zeros, name="zeros")
nondiff(np.ones, name="ones")
nondiff(np.empty, name="empty")
nondiff(np.zeros_like, name="zeros_like")
nondiff(np.ones_like, name="ones_like")
nondiff(np.empty_like, name="empty_like")
nondiff(np.arange, name="arange")
nondiff(np.eye, name="eye")

"""The potential energy of a chain of springs: plain NumPy, differentiated at build time.

This module must import without the generated folder (s2sad imports it to generate that folder).
"""

import numpy as np


def energy(x, k, rest):
    """Springs of stiffness `k` and rest length `rest` between neighbours, and a soft wall at 0."""
    total = 0.0
    for i in range(x.shape[0] - 1):
        stretch = x[i + 1] - x[i] - rest
        total += 0.5 * k * stretch * stretch
    return total + np.sum(np.exp(-x))

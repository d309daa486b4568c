import os
from pathlib import Path

import numpy as np
import pytest

# Generated modules and numba's compiled code go to one cache shared by the whole run (and by
# later runs on the same checkout), never to the user's own cache.
os.environ.setdefault("S2SAD_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".s2sad-test-cache"))

BACKENDS = ["python", "numba"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)

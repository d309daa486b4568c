import os
import time
from pathlib import Path

import numpy as np
import pytest

# Generated modules and numba's compiled code go to one cache shared by the whole run (and by
# later runs on the same checkout), never to the user's own cache.
os.environ.setdefault("S2SAD_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".s2sad-test-cache"))
# When the run began (xdist workers inherit it from the controller): test_zz_closure re-reads what was generated since.
os.environ.setdefault("S2SAD_TEST_RUN_START", str(time.time() - 1.0))
# Correctness does not depend on LLVM's optimization level, and compiling at -O1 takes half the time of
# numba's default -O3 (benchmarks/ measure speed at the default). Not -O0: there numba cannot cache
# functions that call a helper which raises, and the disk-cache tests need the cache.
os.environ.setdefault("NUMBA_OPT", "1")
# vmap(target="cuda") runs on numba's CUDA simulator unless told otherwise (NUMBA_ENABLE_CUDASIM=0 on a GPU machine).
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

BACKENDS = ["python", "numba"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)

"""The environment every test process starts from; set before numba is imported (it reads NUMBA_OPT then)."""

import os
from pathlib import Path

# Generated modules and numba's compiled code go to one cache shared by the whole run (and by
# later runs on the same checkout), never to the user's own cache.
os.environ.setdefault("S2SAD_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".s2sad-test-cache"))
# Correctness does not depend on LLVM's optimization level, and -O0 compiles fastest: -O1 costs the suite
# 25-50% more, numba's default -O3 about twice as much (benchmarks/ measure speed at the default, and
# test_demo runs the demo at it). The disk-cache tests compile at -O1 (`numba_caches`), as users do.
os.environ.setdefault("NUMBA_OPT", "0")
# vmap(target="cuda") runs on numba's CUDA simulator unless told otherwise (NUMBA_ENABLE_CUDASIM=0 on a GPU machine).
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# A first call compiles in-process, as every test but test_background's expects (an error of numba's at the
# first call, compiled code right after it); test_background runs the worker in processes of its own.
os.environ["S2SAD_BACKGROUND_COMPILE"] = "0"


def _dead_callee_constants_removed() -> None:
    """At -O0 a call of another jitted function leaves a dead load of the callee's address in the caller,
    which numba takes for a "dynamic global" and refuses to cache; LLVM's dead-code passes, which -O1 runs,
    remove it. With them the runtime's module-level helpers (numba's overloads are never cached) and the
    generated functions go to the suite's disk cache, so a part loads what an earlier part compiled."""
    from numba.core import codegen, config

    module_passes = codegen.CPUCodegen._module_pass_manager

    def with_dead_code_removed(self, **kwargs):
        manager, builder = module_passes(self, **kwargs)
        if config.OPT == 0:
            manager.add_dead_code_elimination_pass()
            manager.add_global_dead_code_eliminate_pass()
        return manager, builder

    codegen.CPUCodegen._module_pass_manager = with_dead_code_removed


_dead_callee_constants_removed()

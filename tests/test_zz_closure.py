"""Closure: every module the test suite generated is itself valid s2sad input.

Runs last (pytest collects files by name, and xdist schedules tests in collection order): it
re-reads each generated file of the run and lowers every function in it through the frontend and
normalize, then generates its forward-mode code, exactly as `jvp(grad(f))` would.
"""

import importlib.util
import inspect
import os
from pathlib import Path

import pytest

import s2sad
from s2sad import backend
from s2sad.cache import cache_dir
from s2sad.errors import NoRuleError, UnsupportedError
from s2sad.analyze import analyze_forward
from s2sad.codegen.forward import ForwardGen
from s2sad.normalize import normalize

def _generated_files():
    """Every module this test run generated: loaded by this process, or written by any worker since the run began."""
    loaded = {Path(m.__file__) for m in backend._LOADED.values()}
    start = float(os.environ.get("S2SAD_TEST_RUN_START", "inf"))
    written = {p for p in cache_dir().glob("s2sad_gen_*.py") if p.stat().st_mtime >= start}
    files = sorted(p for p in loaded | written
                   if p.name.startswith("s2sad_gen_") and "_cuda_" not in p.name and p.exists())  # (tmp caches go)
    fuzz = [p for p in files if p.name.startswith("s2sad_gen_fuzz_")]
    return [p for p in files if p not in fuzz] + fuzz[:FUZZ_SAMPLE]


# CUDA modules are kernels and their launchers, not differentiable code. The fuzzer's random programs
# add hundreds of modules; a fixed sample of them keeps this test's time bounded.
FUZZ_SAMPLE = 25


def _functions(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_closure_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, obj in vars(module).items():
        if inspect.isfunction(obj) and obj.__code__.co_filename == str(path) and name != "make":
            yield obj


def _differentiable(fn_ir, param: str) -> bool:
    """False for a parameter a call with no rule reads (`math.lgamma(n + 1.0)` of data `n`, a seed), or
    that sizes arrays (`np.zeros((n, 2))`): such code is s2sad input, differentiated with respect to the
    other parameters."""
    try:
        analyze_forward(fn_ir, [param])
    except (NoRuleError, UnsupportedError):
        return False
    return True


SHARDS = 2  # the last tests of the run: one shard per xdist worker, so neither core waits idle


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_generated_module_is_s2sad_input(shard):
    from programs import newton_sqrt

    s2sad.grad(s2sad.grad(newton_sqrt, backend="python"), backend="python")(2.0)  # at least these, run alone
    files = _generated_files()[shard::SHARDS]
    checked = 0
    for path in files:
        for fn in _functions(path):
            fn_ir = normalize(fn)
            floats = [p for p in fn_ir.params if _differentiable(fn_ir, p)]
            ForwardGen(fn_ir, analyze_forward(fn_ir, floats)).generate(floats)
            checked += 1
    print(f"\n{checked} generated functions from {len(files)} modules re-parsed and differentiated")
    assert checked >= len(files)

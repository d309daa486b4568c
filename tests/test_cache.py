"""Compiled gradients are cached by signature in memory and on disk; edits never reuse stale code."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad.cache import cache_info, clear_cache, numba_dir
from programs import recurrence

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.usefixtures("numba_caches")  # these tests read what numba wrote to disk


def test_second_call_compiles_nothing():
    g = s2sad.grad(recurrence, argnums=(0, 1))
    g(np.ones(4), 0.5)
    dispatcher = g.__s2sad_transform__.vjp_fn
    n = len(dispatcher.signatures)
    g(np.arange(6.0), 0.25)
    assert len(dispatcher.signatures) == n
    g2 = s2sad.grad(recurrence, argnums=(0, 1))  # a new grad object reuses the same compiled code
    g2(np.ones(3), 0.1)
    assert g2.__s2sad_transform__.vjp_fn is dispatcher and len(dispatcher.signatures) == n


def test_new_process_reuses_disk_cache(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, s2sad
        from programs import recurrence
        g = s2sad.grad(recurrence, argnums=(0, 1))
        print(g(np.ones(4), 0.5)[1])
        stats = g.__s2sad_transform__.vjp_fn.stats
        print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
    """)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], cwd=HERE, env=env, capture_output=True, text=True,
                           check=True).stdout.split("\n") for _ in range(2)]
    assert runs[0][0] == runs[1][0]
    hits0, misses0 = (int(v) for v in runs[0][1].split())
    hits1, misses1 = (int(v) for v in runs[1][1].split())
    assert (hits0, misses0) == (0, 1)
    assert (hits1, misses1) == (1, 0)
    assert not list(tmp_path.glob("*.tmp"))


def test_a_new_process_loads_the_runtimes_helpers_from_disk_and_clear_removes_them(tmp_path, monkeypatch):
    script = textwrap.dedent("""
        import sys
        import numpy as np, s2sad
        from s2sad.runtime.core import sum_flat
        def f(x):
            return np.sum(np.exp(x) * x)
        x = np.linspace(0.0, 1.0, 5)
        print(float(np.max(np.abs(s2sad.grad(f)(x) - np.exp(x) * (1.0 + x)))))
        print(sum(sum_flat.stats.cache_hits.values()), sum(sum_flat.stats.cache_misses.values()))
    """)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for k in range(2):
        path = tmp_path / f"run{k}.py"  # s2sad reads the function's source: a file, not `-c`
        path.write_text(script)
        runs.append(subprocess.run([sys.executable, str(path)], cwd=HERE, env=env, capture_output=True, text=True,
                                   check=True).stdout.split("\n"))
    assert all(float(run[0]) < 1e-12 for run in runs)
    assert runs[0][1] == "0 1" and runs[1][1] == "1 0"  # compiled once on this machine, then loaded
    helpers = list(numba_dir(tmp_path).glob("s2sad_gen_runtime_core.sum_flat-*"))
    assert {p.suffix for p in helpers} == {".nbi", ".nbc"}
    assert all((p.stat().st_mode & 0o077) == 0 for p in helpers)
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    clear_cache()
    assert not list(numba_dir(tmp_path).glob("s2sad_gen_runtime_*"))


def test_a_new_process_registers_the_runtimes_c_functions_before_it_loads_code_that_calls_them(tmp_path):
    # The sum back to b's shape is a C function (runtime.native) the cached gradient calls by name: a
    # process loading that code without it registered would abort in LLVM, not raise.
    script = textwrap.dedent("""
        import numpy as np, s2sad
        from s2sad.runtime import native
        def f(x, b):
            return np.sum(np.tanh(x + b) * x)
        x, b = np.linspace(-1.0, 1.0, 12).reshape(4, 3), np.array([0.1, -0.2, 0.3])
        exact = np.sum((1.0 - np.tanh(x + b) ** 2) * x, axis=0)
        print(float(np.max(np.abs(s2sad.grad(f, argnums=1)(x, b) - exact))))
        print(native.compiled("s2sad_sum_into_c_float64").cache_hits)
    """)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path), S2SAD_BACKGROUND_COMPILE="0", NUMBA_OPT="1")
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for k in range(2):
        path = tmp_path / f"run{k}.py"
        path.write_text(script)
        runs.append(subprocess.run([sys.executable, str(path)], cwd=HERE, env=env, capture_output=True, text=True,
                                   check=True).stdout.split("\n"))
    assert all(float(run[0]) < 1e-12 for run in runs)
    assert [run[1] for run in runs] == ["0", "1"]  # compiled once on this machine, then loaded


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the processes are forked")
def test_cached_code_from_forked_processes_calls_the_helpers_it_was_compiled_with(tmp_path):
    # vmath's overloads of exp and tanh return closures of one qualified name for one argument type; numba
    # tells such functions apart by a count of its process's compiles, which forked processes share. Each
    # gradient is cached by a child of its own, and a third loads both: at -O0, where the closures stay
    # calls (LLVM's dead-code passes let numba cache them there), tanh's gradient called exp's closure.
    script = textwrap.dedent("""
        import os
        import numpy as np
        from numba.core import codegen, config

        module_passes = codegen.CPUCodegen._module_pass_manager

        def with_dead_code_removed(self, **kwargs):
            manager, builder = module_passes(self, **kwargs)
            manager.add_dead_code_elimination_pass()
            manager.add_global_dead_code_eliminate_pass()
            return manager, builder

        codegen.CPUCodegen._module_pass_manager = with_dead_code_removed
        import s2sad

        def in_a_child(job):
            pid = os.fork()
            if pid == 0:
                try:
                    job()
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)

        in_a_child(lambda: s2sad.grad(np.exp)(0.5))
        in_a_child(lambda: s2sad.grad(np.tanh)(0.5))
        in_a_child(lambda: print(s2sad.grad(np.exp)(0.5), s2sad.grad(np.tanh)(0.5), flush=True))
    """)
    path = tmp_path / "forks.py"
    path.write_text(script)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path / "cache"), S2SAD_BACKGROUND_COMPILE="0", NUMBA_OPT="0")
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, str(path)], cwd=HERE, env=env, capture_output=True, text=True, check=True)
    exp_slope, tanh_slope = map(float, out.stdout.split())
    assert exp_slope == pytest.approx(np.exp(0.5), rel=1e-12)
    assert tanh_slope == pytest.approx(1.0 - np.tanh(0.5) ** 2, rel=1e-12)
    assert len(list((tmp_path / "cache").rglob("*tanh_grad*.nbc"))) == 1  # cached by the second child


def test_only_helpers_defined_at_a_modules_top_level_are_cached():
    from s2sad import backend
    from s2sad.runtime import reductions

    s2sad.grad(doubled)(1.0)  # a compiled gradient: the runtime's cache is set up
    assert isinstance(reductions._reduce._cache, backend._RuntimeFunctionCache)
    # made by one factory, both named `_extremum_block_for.<locals>.block`: one file would hold both
    assert not isinstance(reductions._max_block._cache, backend._RuntimeFunctionCache)
    assert not isinstance(reductions._min_block._cache, backend._RuntimeFunctionCache)


def test_edited_function_gets_new_code(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "edited_mod.py"
    results = []
    for body in ("x * x", "x * x * x"):
        module.write_text(f"def f(x):\n    return {body}\n")
        namespace = {}
        code = compile(module.read_text(), str(module), "exec")
        exec(code, namespace)
        import linecache

        linecache.checkcache(str(module))
        results.append(s2sad.grad(namespace["f"])(2.0))
    assert results == [4.0, 12.0]


def doubled(x):
    return 2.0 * x


def doubled_with_aux(x):
    return 2.0 * x, x * x


def test_the_scalar_output_check_runs_once_per_argument_ranks_across_processes(tmp_path, monkeypatch):
    """grad checks that the output is a scalar from numba's type of the primal's result (running the
    primal only to name a wrong output); a file beside the cached module remembers the ranks it passed
    for, so a later process (here: a new grad object) loads no primal."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    first = s2sad.grad(doubled)
    assert first(3.0) == 2.0
    assert not first.__s2sad_transform__.made.compiled["primal"].signatures  # typed, never compiled
    assert [p.suffix for p in tmp_path.glob("s2sad_gen_doubled_*.checked")] == [".checked"]
    later = s2sad.grad(doubled)
    assert later(5.0) == 2.0
    assert "primal" not in later.__s2sad_transform__.made.compiled
    with pytest.raises(TypeError, match=r"requires a scalar output.*shape \(3,\)"):
        later(np.ones(3))  # other ranks: checked, and refused
    with_aux = s2sad.grad(doubled_with_aux, has_aux=True)
    assert with_aux(3.0) == (2.0, 9.0)
    assert not with_aux.__s2sad_transform__.made.compiled["primal"].signatures
    own = {p for folder in (tmp_path, numba_dir(tmp_path)) for p in folder.rglob("*") if p.is_file()}
    assert cache_info()["files"] == len(own)  # cleared with the rest (numba's too, wherever NUMBA_CACHE_DIR puts them)


def test_the_scalar_output_check_runs_the_primal_where_numba_typing_alone_is_unavailable(tmp_path, monkeypatch):
    from s2sad import backend

    def missing():
        raise AttributeError("numba without this compiler pipeline")

    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backend, "_typing_pipeline", missing)
    g = s2sad.grad(doubled)
    assert g(3.0) == 2.0
    assert g.__s2sad_transform__.made.compiled["primal"].signatures  # checked the old way: compiled and run
    with pytest.raises(TypeError, match=r"requires a scalar output.*shape \(3,\)"):
        g(np.ones(3))


def test_a_new_process_loads_a_caller_of_a_function_compiled_per_signature(tmp_path):
    """hessian(f) and vmap(grad(f)) call f_grad, which numba compiles from a module of its own for its
    signature (its runs written out as loops): numba's cached callers name that module, which a later
    process makes from the cache when it loads them, without a warning and without compiling again."""
    script = textwrap.dedent("""
        import numpy as np, s2sad
        def f(x, w):
            return np.sum(np.tanh(x * w) ** 2) + 0.5 * np.sum(w * w)
        x, w = np.linspace(0.0, 1.0, 5), np.ones(5)
        X = np.linspace(-1.0, 1.0, 40).reshape(8, 5)
        t = np.tanh(x * w)
        value, (gx, gw) = s2sad.value_and_grad(f, (0, 1))(x, w)
        primal_out, tangent = s2sad.jvp(f, (x, w), (np.ones(5), np.zeros(5)))
        H = s2sad.hessian(f)(x, w)
        expected_H = np.diag(2.0 * w * w * (1.0 - t ** 2) * (1.0 - 3.0 * t ** 2))
        per_example = s2sad.vmap(s2sad.grad(f), in_axes=(0, None))(X, w)
        T = np.tanh(X * w)
        expected = 2.0 * T * (1.0 - T ** 2) * w
        print(max(float(np.max(np.abs(H - expected_H))), float(np.max(np.abs(per_example - expected)))))
    """)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    path = tmp_path / "session.py"  # one file: the same function, so the second run reuses the first's code
    path.write_text(script)
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(path)], cwd=HERE, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "CacheWarning" not in proc.stderr
        assert float(proc.stdout.split()[0]) < 1e-12

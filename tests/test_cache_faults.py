"""The disk cache under faults: concurrent users, damaged or foreign files, unusable directories.

Every test runs on its own cache dir with s2sad's in-process module tables emptied, so what it
loads comes from that dir (or is compiled anew), never from what earlier tests left in memory.
"""

import hashlib
import importlib.util
import os
import py_compile
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import backend, cache
from s2sad.cache import CacheWarning, cache_info, clear_cache

pytestmark = pytest.mark.usefixtures("numba_caches")  # these tests read what numba wrote to disk

LOOP = """
import numpy as np


def sq(x):
    return x * x


def f(x, w):
    for i in range(3):
        x = np.sin(x) * w
    return sq(x) * 0.5
"""


def loop_grad(x, w, n=3, power=2):
    """Closed form of d/dx, d/dw of  sq(x_n)/2 (power 2) or x_n**3/2 (power 3),  x_{k+1} = sin(x_k) w."""
    dx, dw = 1.0, 0.0
    for _ in range(n):
        dx, dw, x = np.cos(x) * w * dx, np.cos(x) * w * dw + np.sin(x), np.sin(x) * w
    outer = x if power == 2 else 1.5 * x * x
    return outer * dx, outer * dw


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache dir, and s2sad's module tables emptied so nothing comes from memory.

    numba's files for it are in `numba_files(path)`: beside the modules, or under the user's NUMBA_CACHE_DIR."""
    path = tmp_path / "cache"
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(path))
    forget_loaded_modules(monkeypatch)
    monkeypatch.setattr(cache, "_usable", set())
    monkeypatch.setattr(cache, "_unusable", set())
    return path


@pytest.fixture
def digest_reset():
    """Tests that fake versions or rule files recompute the toolchain digest afterwards."""
    yield
    backend.toolchain_digest.cache_clear()


def numba_files(root: Path) -> Path:
    """Where numba keeps its files for the modules in `root` (root/__pycache__ unless NUMBA_CACHE_DIR is set)."""
    return cache.numba_dir(root)


def copy_cache(root: Path, to: Path) -> None:
    """Copy the cache dir and numba's folder for it (the same one, or one under NUMBA_CACHE_DIR)."""
    shutil.copytree(root, to / "cache")
    shutil.copytree(numba_files(root), to / "numba")


def restore_cache(root: Path, saved: Path) -> None:
    for folder in (root, numba_files(root)):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(saved / "cache", root)
    shutil.copytree(saved / "numba", numba_files(root), dirs_exist_ok=True)


def forget_loaded_modules(monkeypatch):
    monkeypatch.setattr(backend, "_LOADED", {})
    monkeypatch.setattr(backend, "_JITTED", set())


def user_module(tmp_path, monkeypatch, text, name="user_mod"):
    """Write `text` to a module file and import it fresh (as an edited, re-imported module would be)."""
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def grad_and_dispatcher(f, x=0.3, w=1.1):
    g = s2sad.grad(f, argnums=(0, 1))
    result = g(x, w)
    np.testing.assert_allclose(result, loop_grad(x, w), rtol=1e-12)
    return result, g.__s2sad_transform__.vjp_fn


def disk_stats(dispatcher):
    return sum(dispatcher.stats.cache_hits.values()), sum(dispatcher.stats.cache_misses.values())


# ---- concurrent users -------------------------------------------------------------------------------


def test_threads_share_one_compilation(fresh_cache, tmp_path, monkeypatch):
    f = user_module(tmp_path, monkeypatch, LOOP).f
    start = threading.Barrier(6)
    results, dispatchers, errors = [], [], []

    def first_call():
        try:
            start.wait()
            result, dispatcher = grad_and_dispatcher(f)  # a grad object per thread: each generates and compiles
            results.append(result)
            dispatchers.append(dispatcher)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 6 and all(r == results[0] for r in results)
    assert all(d is dispatchers[0] for d in dispatchers)
    assert len(dispatchers[0].signatures) == 1
    assert disk_stats(dispatchers[0]) == (0, 1)  # compiled once, by one thread


PROCESS_SCRIPT = """
import sys, time, warnings
from pathlib import Path
import s2sad
from s2sad.cache import CacheWarning
import user_mod

warnings.simplefilter("error", CacheWarning)
ready, n = Path(sys.argv[1]), int(sys.argv[2])
(ready / sys.argv[3]).touch()
deadline = time.time() + 60
while len(list(ready.iterdir())) < n and time.time() < deadline:  # all start compiling together
    time.sleep(0.005)
g = s2sad.grad(user_mod.f, argnums=(0, 1))
dx, dw = g(0.3, 1.1)
stats = g.__s2sad_transform__.vjp_fn.stats
print(repr(dx), repr(dw), sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
"""


def test_processes_compile_at_most_once_each(fresh_cache, tmp_path):
    (tmp_path / "user_mod.py").write_text(LOOP)
    ready = tmp_path / "ready"
    ready.mkdir()
    env = dict(os.environ, S2SAD_CACHE_DIR=str(fresh_cache), PYTHONPATH=str(tmp_path))
    n = 3
    procs = [subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, str(ready), str(n), str(i)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    outputs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err  # a half-written file would crash it, a damaged one warn (an error here)
    rows = [out.split() for out, _ in outputs]
    for dx, dw, hits, misses in rows:
        np.testing.assert_allclose((float(dx), float(dw)), loop_grad(0.3, 1.1), rtol=1e-12)
        assert int(hits) + int(misses) == 1  # each process compiled at most once (or loaded)
    assert not list(fresh_cache.rglob("*.tmp*")) and not list(numba_files(fresh_cache).glob("*.tmp*"))


# ---- damaged files ---------------------------------------------------------------------------------


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_bytes(path):
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 3, len(data), 997):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def scribble(path):
    path.write_text("def f_grad(x, w):\n    return 0.0, 0.0\n")


GRAD_FILES = "*.f_grad-*"  # numba's files for the gradient (the primal has its own: grad checks the output)
DAMAGES = [("*.py", scribble), (GRAD_FILES + ".nbi", truncate), (GRAD_FILES + ".nbc", truncate),
           (GRAD_FILES + ".nbc", flip_bytes), (GRAD_FILES + ".nbi", flip_bytes)]


def cache_file(root: Path, pattern: str) -> Path:
    """The one file matching `pattern`: a generated module's file in `root`, or one of numba's for it."""
    (found,) = (root if pattern.endswith(".py") else numba_files(root)).glob(pattern)
    return found


def test_damaged_files_are_detected_and_recompiled(fresh_cache, tmp_path, monkeypatch):
    f = user_module(tmp_path, monkeypatch, LOOP).f
    good, _ = grad_and_dispatcher(f)
    pristine = tmp_path / "pristine"
    copy_cache(fresh_cache, pristine)
    for pattern, damage in DAMAGES:
        restore_cache(fresh_cache, pristine)
        damage(cache_file(fresh_cache, pattern))
        forget_loaded_modules(monkeypatch)
        with pytest.warns(CacheWarning, match="damaged"):
            result, dispatcher = grad_and_dispatcher(f)
        assert result == good, (pattern, damage)
        assert disk_stats(dispatcher) == ((1, 0) if pattern == "*.py" else (0, 1)), (pattern, damage)
        forget_loaded_modules(monkeypatch)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheWarning)  # repaired: the next load is clean
            result, dispatcher = grad_and_dispatcher(f)
        assert result == good and disk_stats(dispatcher) == (1, 0)


def saved_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest() + "\n" + text


def test_compiled_text_is_saved_used_and_remade_when_damaged(fresh_cache, tmp_path, monkeypatch):
    from s2sad.codegen.compiled import compiled_text

    f = user_module(tmp_path, monkeypatch, LOOP).f
    good, _ = grad_and_dispatcher(f)
    (py,) = fresh_cache.glob("s2sad_gen_*.py")
    saved = py.with_suffix(".compiled")  # beside it, each function's own text for its signature ("": as written)
    expected = saved_text(compiled_text(py.read_text()))
    assert saved.read_text() == expected

    saved.write_text(saved_text(compiled_text(py.read_text()) + "\nSAVED_TEXT_WAS_USED = True\n"))
    forget_loaded_modules(monkeypatch)
    result, dispatcher = grad_and_dispatcher(f)  # a warm process: the rewrite passes do not run
    assert result == good and dispatcher.py_func.__globals__.get("SAVED_TEXT_WAS_USED") is True

    for damage in (truncate, flip_bytes):
        saved.write_text(expected)
        damage(saved)
        forget_loaded_modules(monkeypatch)
        result, dispatcher = grad_and_dispatcher(f)
        assert result == good and "SAVED_TEXT_WAS_USED" not in dispatcher.py_func.__globals__
        assert saved.read_text() == expected, damage  # made again from the source, and saved again


SUM = """
import numpy as np


def h(x):
    return np.sum(np.sin(x) * x)
"""


def swap_index_entries(index: Path) -> None:
    """What two processes saving different signatures at once can leave: each key names the other's data."""
    import pickle

    from numba.core.serialize import dumps

    raw = index.read_bytes()
    version, _, pickled = raw[32:].partition(b"\n")  # s2sad's index: SHA-256, then the numba version line
    stamp, overloads = pickle.loads(pickled)
    (k1, d1), (k2, d2) = overloads.items()
    payload = version + b"\n" + dumps((stamp, {k1: d2, k2: d1}))
    index.write_bytes(hashlib.sha256(payload).digest() + payload)


def test_index_naming_another_signatures_data_is_a_miss(fresh_cache, tmp_path, monkeypatch):
    h = user_module(tmp_path, monkeypatch, SUM).h
    vector, matrix = np.linspace(0.1, 0.5, 3), np.linspace(0.1, 0.5, 4).reshape(2, 2)
    for x in (vector, matrix):
        s2sad.grad(h)(x)  # two signatures, two data files
    index = cache_file(fresh_cache, "*.h_grad-*.nbi")
    swap_index_entries(index)
    forget_loaded_modules(monkeypatch)
    g = s2sad.grad(h)
    np.testing.assert_allclose(g(vector), np.sin(vector) + vector * np.cos(vector), rtol=1e-12)
    assert disk_stats(g.__s2sad_transform__.vjp_fn) == (0, 1)


def plant_stale_bytecode(py: Path, stale_source: str) -> None:
    """A .pyc for `py` whose header (mtime, size) matches it but whose code is `stale_source`."""
    size = py.stat().st_size
    stale = stale_source + "#" * (size - len(stale_source) - 1) + "\n"
    decoy = py.with_name("decoy.py")
    decoy.write_text(stale)
    os.utime(decoy, ns=(py.stat().st_atime_ns, py.stat().st_mtime_ns))
    py_compile.compile(str(decoy), cfile=importlib.util.cache_from_source(str(py)), doraise=True)
    decoy.unlink()


def test_stale_bytecode_next_to_a_module_is_never_run(fresh_cache, tmp_path, monkeypatch):
    f = user_module(tmp_path, monkeypatch, LOOP).f
    good = s2sad.grad(f, argnums=(0, 1), backend="python")(0.3, 1.1)
    (py,) = fresh_cache.glob("s2sad_gen_*.py")
    plant_stale_bytecode(py, "def f_vjp(x, w, seed):\n    return 0.0, 0.0, 0.0\n")
    spec = importlib.util.spec_from_file_location("plain_import", py)
    plain = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plain)
    assert plain.f_vjp(0.3, 1.1, 1.0) == (0.0, 0.0, 0.0)  # a plain import would run the planted code
    forget_loaded_modules(monkeypatch)
    assert s2sad.grad(f, argnums=(0, 1), backend="python")(0.3, 1.1) == good


# ---- unusable cache directories ----------------------------------------------------------------------


def unwritable_dir(tmp_path, kind):
    if kind == "under_a_file":
        (tmp_path / "a_file").write_text("")
        return tmp_path / "a_file" / "cache"
    path = tmp_path / "read_only"
    path.mkdir()
    path.chmod(0o555)
    try:
        (path / "probe").touch()  # root ignores permissions: use a directory nobody may write
    except OSError:
        return path
    if not Path("/proc/self").is_dir():
        pytest.skip("running as root without /proc: no read-only directory to test with")
    return Path("/proc/self")


@pytest.mark.parametrize("kind", ["under_a_file", "read_only"])
def test_unusable_cache_dir_falls_back_to_memory_with_one_warning(fresh_cache, tmp_path, monkeypatch, kind):
    path = unwritable_dir(tmp_path, kind)
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(path))
    other = user_module(tmp_path, monkeypatch, LOOP.replace("* 0.5", "* 0.25"), name="other_mod")
    f = user_module(tmp_path, monkeypatch, LOOP).f
    with pytest.warns(CacheWarning, match="cannot write its cache dir") as caught:
        result, dispatcher = grad_and_dispatcher(f)
        assert dispatcher.stats.cache_path is None  # numba, with no disk cache
        dx, dw = s2sad.grad(other.f, argnums=(0, 1), backend="python")(0.3, 1.1)
        second = s2sad.grad(s2sad.grad(f, backend="python"), backend="python")(0.3, 1.1)  # reads generated source
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    np.testing.assert_allclose((dx, dw), np.array(loop_grad(0.3, 1.1)) / 2, rtol=1e-12)
    h = 1e-5
    fd = (s2sad.grad(f, backend="python")(0.3 + h, 1.1) - s2sad.grad(f, backend="python")(0.3 - h, 1.1)) / (2 * h)
    np.testing.assert_allclose(second, fd, rtol=1e-6)
    assert cache_info() == {"path": None, "numba_path": None, "entries": 0, "files": 0, "bytes": 0}
    assert clear_cache() == 0


# ---- invalidation -------------------------------------------------------------------------------------


def generated_names(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("s2sad_gen_*.py")}


def test_other_versions_are_never_reused(fresh_cache, tmp_path, monkeypatch, digest_reset):
    import numba

    f = user_module(tmp_path, monkeypatch, LOOP).f
    expected = loop_grad(0.3, 1.1)
    names = []
    for target, attr, value in [(None, None, None), (s2sad, "__version__", "0.0.0+other"),
                                (numba, "__version__", "0.1.0+other")]:
        if target is not None:
            monkeypatch.setattr(target, attr, value)
        backend.toolchain_digest.cache_clear()
        forget_loaded_modules(monkeypatch)
        before = generated_names(fresh_cache)
        np.testing.assert_allclose(s2sad.grad(f, argnums=(0, 1), backend="python")(0.3, 1.1), expected, rtol=1e-12)
        names.append(generated_names(fresh_cache) - before)  # files written afresh
    assert all(len(new) == 1 for new in names)
    assert len(set.union(*names)) == 3


def test_edits_to_function_callee_or_rule_make_new_modules(fresh_cache, tmp_path, monkeypatch, digest_reset):
    edits = [LOOP, LOOP.replace("return x * x", "return x * x * x"),  # the callee
             LOOP.replace("return x * x", "return x * x * x").replace("range(3)", "range(4)")]  # the function
    powers_steps = [(2, 3), (3, 3), (3, 4)]
    seen: set[str] = set()
    for text, (power, steps) in zip(edits, powers_steps):
        f = user_module(tmp_path, monkeypatch, text).f  # rewritten on disk, imported again
        got = s2sad.grad(f, argnums=(0, 1), backend="python")(0.3, 1.1)
        np.testing.assert_allclose(got, loop_grad(0.3, 1.1, steps, power), rtol=1e-12)
        new = generated_names(fresh_cache) - seen
        assert new, "an edit reused an old module"
        seen |= new

    package = tmp_path / "package"  # a copy of s2sad's rules, runtime and codegen passes, to edit them
    for sub in ("rules", "runtime", "codegen"):
        shutil.copytree(backend._PACKAGE_ROOT / sub, package / sub)
    monkeypatch.setattr(backend, "_PACKAGE_ROOT", package)
    digests = []
    # a rule, then a compiled-text pass: numba's cache is keyed by the readable file, which such an edit
    # leaves unchanged, so only the module name can keep it from loading code compiled from the old text
    for edited in ("rules/elementwise.py", "codegen/lower.py", None):
        backend.toolchain_digest.cache_clear()
        digests.append(backend.module_name("source", "f"))
        if edited is not None:
            with open(package / edited, "a") as rule:
                rule.write("\n# an edit\n")
    backend.toolchain_digest.cache_clear()
    f = user_module(tmp_path, monkeypatch, LOOP).f
    forget_loaded_modules(monkeypatch)
    np.testing.assert_allclose(s2sad.grad(f, argnums=(0, 1), backend="python")(0.3, 1.1), loop_grad(0.3, 1.1))
    assert len(set(digests)) == 3
    assert generated_names(fresh_cache) - seen, "an edited rule reused an old module"


# ---- cache_info / clear_cache -------------------------------------------------------------------------


def test_info_and_clear_touch_only_s2sads_files(fresh_cache, tmp_path, monkeypatch):
    assert cache_info() == {"path": str(fresh_cache), "numba_path": str(numba_files(fresh_cache)), "entries": 0,
                            "files": 0, "bytes": 0}
    f = user_module(tmp_path, monkeypatch, LOOP).f
    grad_and_dispatcher(f)
    inner = s2sad.grad(f, backend="python")
    inner(0.3, 1.1)  # its module is loaded now; clear_cache will remove its file
    own = {p for folder in (fresh_cache, numba_files(fresh_cache)) for p in folder.rglob("s2sad_gen_*") if p.is_file()}
    info = cache_info()
    assert info["entries"] == len(list(fresh_cache.glob("s2sad_gen_*.py"))) >= 1
    assert info["files"] == len(own) >= 3  # the module, numba's index and data
    assert info["bytes"] == sum(p.stat().st_size for p in own)

    foreign = [fresh_cache / "notes.txt", numba_files(fresh_cache) / "mine.cpython-311.pyc"]
    for p in foreign:
        p.write_text("not s2sad's")
    in_progress = fresh_cache / "s2sad_gen_x_0.py.abc.tmp"  # another process is writing it
    abandoned = fresh_cache / "s2sad_gen_y_0.py.def.tmp"  # left by a killed process
    in_progress.write_text("")
    abandoned.write_text("")
    os.utime(abandoned, (time.time() - 7200, time.time() - 7200))

    counts = []
    clearers = [threading.Thread(target=lambda: counts.append(clear_cache())) for _ in range(2)]
    for t in clearers:
        t.start()
    for t in clearers:
        t.join()
    assert sum(counts) == len(own) + 1
    assert all(p.exists() for p in foreign) and in_progress.exists() and not abandoned.exists()
    assert cache_info()["entries"] == 0

    # this process keeps working (grad of grad reads the removed module's source from memory) ...
    second = s2sad.grad(inner, backend="python")(0.3, 1.1)
    h = 1e-5
    fd = (inner(0.3 + h, 1.1) - inner(0.3 - h, 1.1)) / (2 * h)
    np.testing.assert_allclose(second, fd, rtol=1e-6)
    forget_loaded_modules(monkeypatch)  # ... and a fresh start recompiles
    _, dispatcher = grad_and_dispatcher(f)
    assert disk_stats(dispatcher) == (0, 1)


def test_info_and_clear_find_numbas_files_under_numba_cache_dir(fresh_cache, tmp_path, monkeypatch):
    from numba.core import config as numba_config

    numba_root = tmp_path / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(numba_root))  # numba reads it again when a NUMBA_ variable changes
    monkeypatch.setattr(numba_config, "CACHE_DIR", str(numba_root))  # what it set when numba was imported
    _, dispatcher = grad_and_dispatcher(user_module(tmp_path, monkeypatch, LOOP).f)
    assert dispatcher.stats.cache_path == str(numba_files(fresh_cache))  # where numba's locator put them
    assert not (fresh_cache / "__pycache__").exists()
    own = [p for folder in (fresh_cache, numba_root) for p in folder.rglob("s2sad_gen_*") if p.is_file()]
    assert any(p.suffix == ".nbc" for p in own)
    info = cache_info()
    assert info["numba_path"] == dispatcher.stats.cache_path
    assert (info["files"], info["bytes"]) == (len(own), sum(p.stat().st_size for p in own))
    assert clear_cache() == len(own)
    assert not list(numba_root.rglob("s2sad_gen_*"))


# ---- tape resource bounds -----------------------------------------------------------------------------

TAPE_SCRIPT = """
import resource, sys
import numpy as np
import s2sad
import user_mod

g = s2sad.grad(user_mod.f, argnums=(0, 1))
print(*g(0.3, 1.5, 10_000_000))  # a scalar tape of 10^7 entries
g.__s2sad_transform__.primal_fn(0.3, 1.5, 10)  # compiled now: grad reruns it after an error
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + 32 * 2**20, resource.RLIM_INFINITY))
try:
    g(0.3, 1.5, 20_000_000)  # 160 MB of tape
except MemoryError as exc:
    print("MemoryError", exc)
"""

TAPED_LOOP = """
import numpy as np


def f(x, w, n):
    for i in range(n):
        x = np.sin(x) * w
    return x
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc (Linux)")
def test_long_taped_loop_completes_and_an_oversized_tape_is_a_memory_error(fresh_cache, tmp_path):
    (tmp_path / "user_mod.py").write_text(TAPED_LOOP)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(fresh_cache), PYTHONPATH=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", TAPE_SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr  # not a crash (a segfault is -11)
    grads, error = run.stdout.splitlines()
    x, w = 0.3, 1.5
    for _ in range(200):  # the loop's fixed point x = w sin(x) (a contraction here: |w cos x| < 0.12)
        x = w * np.sin(x)
    dx, dw = (float(v) for v in grads.split())
    assert abs(dx) < 1e-300  # d x_n / d x_0 is a product of 10^7 factors w cos(x_k)
    np.testing.assert_allclose(dw, np.sin(x) / (1 - w * np.cos(x)), rtol=1e-12)  # implicit function theorem
    # sin(x)'s values are taped too, so the reverse sweep calls no sin
    assert error.startswith("MemoryError grad of f ran out of memory in the reverse sweep: "
                            "its tapes (sin2_tape, x_tape)")
    assert "forward mode (jvp/jacfwd)" in error

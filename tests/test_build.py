"""`s2sad build`: generated modules in a package folder, deterministic, checked for staleness, shipped in a wheel."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest

import s2sad
from s2sad import build
from s2sad.build import BuildError, Transform, parse_transform

REPO = Path(__file__).resolve().parent.parent
EPS = 1e-6

SOURCE = '''\
import numpy as np


def chain(x, k):
    total = 0.0
    for i in range(x.shape[0] - 1):  # `k`, `size`: names the generated hessian loop must not shadow
        d = x[i + 1] - x[i] - 1.0
        size = k * d * d
        total += size
    return total + np.sum(np.exp(-x))


def two(x, y):
    return np.sum(np.sin(x) * y) + np.sum(y * y * y)
'''

CONFIG = '''\
[tool.s2sad]
output = "gen"
paths = ["."]

[tool.s2sad.functions]
"{module}:chain" = ["grad", "hessian", "jvp"]
"{module}:two" = ["grad(argnums=(0, 1))", "value_and_grad(argnums=1)", "vmap(grad, in_axes=(0, None))"]
'''


@pytest.fixture
def project(tmp_path, request):
    """A tmp folder with a module (named per test: imports are cached) and a pyproject.toml using it."""
    module = f"bmod_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(SOURCE)
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(module=module))
    yield tmp_path, module
    sys.modules.pop(module, None)


def fd_grad(f, x, *rest):
    x = np.asarray(x, dtype=float)
    return np.array([(f(x + EPS * e, *rest) - f(x - EPS * e, *rest)) / (2 * EPS) for e in np.eye(x.size)])


def import_plain(out_dir: Path, monkeypatch):
    """The generated package imported with numba.njit as the identity: the same code, run by Python."""
    monkeypatch.setattr(numba, "njit", lambda *a, **k: (lambda f: f))
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)  # no C functions either (runtime.native)
    monkeypatch.syspath_prepend(str(out_dir.parent))
    for name in [m for m in sys.modules if m == out_dir.name or m.startswith(out_dir.name + ".")]:
        del sys.modules[name]
    return importlib.import_module(out_dir.name)


# --- transformations ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("grad", Transform("grad")),
    ("grad(argnums=(0, 1))", Transform("grad", argnums=(0, 1))),
    ("value_and_grad(argnums=[1], has_aux=True)", Transform("value_and_grad", argnums=(1,), has_aux=True)),
    ("hessian(argnums=2)", Transform("hessian", argnums=2)),
    ("vmap(grad(argnums=1), in_axes=(None, 0), target='parallel')",
     Transform("vmap", inner=Transform("grad", argnums=1), in_axes=(None, 0), target="parallel")),
])
def test_transform_round_trips(text, expected):
    assert parse_transform(text) == expected
    assert parse_transform(expected.text()) == expected


@pytest.mark.parametrize("text, message", [
    ("gradient", "expected one of grad"),
    ("grad(1)", "write options by name"),
    ("grad(target='cpu')", "grad takes argnums, has_aux, not target"),
    ("hessian(argnums=(0, 1))", "one argnum"),
    ("vmap(jvp)", "vmap batches"),
    ("vmap(in_axes=(1, 0))", "in_axes entries must be 0 or None"),
    ("grad(argnums=x)", "must be a literal"),
    ("grad(", "is not of the form"),
])
def test_bad_transforms_say_what_is_wrong(text, message):
    with pytest.raises(BuildError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_transform(text)


# --- the output folder -------------------------------------------------------------------------

def test_generated_derivatives_match_finite_differences(project, monkeypatch):
    root, module = project
    changed = build.build(build.load_config(root / "pyproject.toml"))
    assert {"chain_grad.py", "chain_hessian.py", "chain_jvp.py", "two_grad_0_1.py", "two_value_and_grad_1.py",
            "two_vmap_grad_over_0.py", "__init__.py", "_s2sad_runtime/core.py"} <= set(changed)
    gen = import_plain(root / "gen", monkeypatch)
    src = importlib.import_module(module)
    x, k = np.array([0.3, 1.1, 2.4, 3.0]), 1.5
    assert np.allclose(gen.chain_grad(x, k), fd_grad(src.chain, x, k), atol=1e-7)
    exact_h = np.diag(np.exp(-x)) + 2 * k * (np.diag([1, 2, 2, 1]) - np.eye(4, k=1) - np.eye(4, k=-1))
    assert np.allclose(gen.chain_hessian(x, k), exact_h, atol=1e-10)
    v = np.array([1.0, -2.0, 0.5, 0.25])
    value, tangent = gen.chain_jvp(x, k, v)
    assert value == pytest.approx(src.chain(x, k))
    assert tangent == pytest.approx((src.chain(x + EPS * v, k) - src.chain(x - EPS * v, k)) / (2 * EPS), rel=1e-7)
    y = np.array([0.5, -1.0, 2.0, 0.1])
    gx, gy = gen.two_grad_0_1(x, y)
    assert np.allclose(gx, np.cos(x) * y) and np.allclose(gy, np.sin(x) + 3 * y * y)
    value, gy2 = gen.two_value_and_grad_1(x, y)
    assert value == pytest.approx(src.two(x, y)) and np.allclose(gy2, np.sin(x) + 3 * y * y)
    xs = np.arange(6.0).reshape(3, 2)
    assert np.allclose(gen.two_vmap_grad_over_0(xs, np.array([2.0, -1.0])), np.cos(xs) * [2.0, -1.0])


def test_output_is_byte_identical_and_names_no_machine_paths(project, tmp_path_factory):
    root, _ = project
    config = build.load_config(root / "pyproject.toml")
    first = build.plan(config.targets)
    build.write(config.output, first)
    again = build.plan(config.targets)
    assert first == again
    assert build.write(config.output, again) == []  # nothing to rewrite
    for text in first.values():
        assert str(root) not in text and str(Path.home()) not in text and "libcst" not in text
    header = first["chain_grad.py"].split('"""')[1]
    assert f"generated by s2sad {s2sad.__version__}" in header and "Source hash: " in header
    assert "Entry point: chain_grad(x, k)" in header and "s2sad build" in header


def test_check_finds_source_edits_version_changes_and_leftovers(project, monkeypatch):
    root, module = project
    config = build.load_config(root / "pyproject.toml")
    build.build(config)
    assert build.build(config, check=True) == []
    (root / f"{module}.py").write_text(SOURCE.replace("k * d * d", "k * d * d * 0.5"))
    sys.modules.pop(module)
    config = build.load_config(root / "pyproject.toml")
    assert build.build(config, check=True) == ["chain_grad.py", "chain_hessian.py", "chain_jvp.py"]
    build.build(config)
    monkeypatch.setattr(s2sad, "__version__", "99.0")
    assert "__init__.py" in build.build(config, check=True)
    monkeypatch.undo()
    (root / "gen" / "old_grad.py").write_text('"""Gradient of `x`, generated by s2sad 0.0.1."""\n')
    (root / "gen" / "handwritten.py").write_text("VALUE = 1\n")
    assert build.build(config, check=True) == ["old_grad.py"]  # a file s2sad did not write is left alone
    build.build(config)
    assert not (root / "gen" / "old_grad.py").exists() and (root / "gen" / "handwritten.py").exists()


def test_whole_module_builds_its_differentiate_functions(tmp_path, monkeypatch):
    (tmp_path / "marked_mod.py").write_text(textwrap.dedent('''\
        import numpy as np
        import s2sad

        @s2sad.differentiate(argnums=1)
        def weighted(x, w):
            return np.sum(w * x * x)

        def unmarked(x):
            return x
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    targets = build.target_from("marked_mod", [])
    assert targets == [build.Target("marked_mod", "weighted", (Transform("grad", argnums=1),))]
    build.build(build.Config(tmp_path / "gen_marked", targets))
    gen = import_plain(tmp_path / "gen_marked", monkeypatch)
    assert np.allclose(gen.weighted_grad_1(np.array([1.0, 2.0]), np.array([3.0, 4.0])), [1.0, 4.0])


def test_built_tapes_pop_through_the_vendored_runtime_under_numba(tmp_path, monkeypatch):
    """A loop adjoint that pops a tape: the built file calls `new_tape` and `tape_pop` from its own runtime copy,
    and numba compiles it (the other tests here run the built code as plain Python)."""
    (tmp_path / "waves_mod.py").write_text(textwrap.dedent('''\
        import numpy as np

        def waves(x, n):
            y = x
            for _ in range(n):
                s = np.sin(y)
                y = y + 0.1 * s * x
            return np.sum(y * y)
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "gen_waves"
    build.build(build.Config(out, build.target_from("waves_mod:waves", ["grad"])))
    text = (out / "waves_grad.py").read_text()
    assert "from ._s2sad_runtime import (new_tape, tape_pop, " in text and "= tape_pop(" in text and ".pop()" not in text
    assert "= new_tape()" in text and "List()" not in text
    gen = importlib.import_module("gen_waves.waves_grad")
    assert isinstance(gen.waves_grad, numba.core.registry.CPUDispatcher)
    import waves_mod

    x = np.array([0.3, -1.2, 2.0])
    assert np.allclose(gen.waves_grad(x, 6), fd_grad(waves_mod.waves, x, 6), atol=1e-7)
    for name in [m for m in sys.modules if m.startswith(("gen_waves", "waves_mod"))]:
        del sys.modules[name]


def test_built_modules_compile_what_s2sad_grad_compiles(tmp_path, monkeypatch):
    """The file ships the readable adjoint; numba compiles it after the compiled-text rewrites
    (vectorized tanh, a run of elementwise lines as one loop), as `s2sad.grad` does."""
    (tmp_path / "squash_mod.py").write_text(textwrap.dedent('''\
        import numpy as np

        def squash(w, x):
            z = x * w
            a = np.tanh(z)
            b = a * a + z
            c = b * x - a
            return np.sum(c * c)
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "gen_squash"
    build.build(build.Config(out, build.target_from("squash_mod:squash", ["grad"])))
    text = (out / "squash_grad.py").read_text()
    assert "np.tanh(" in text and "vtanh(" not in text and "chain(" not in text
    gen = importlib.import_module("gen_squash.squash_grad")
    compiled = gen.squash_grad.py_func
    assert isinstance(gen.squash_grad, numba.core.registry.CPUDispatcher)
    assert compiled.__globals__["__s2sad_compiled_text__"] and compiled.__code__.co_filename == str(out / "squash_grad.py")
    assert "chain" in compiled.__code__.co_names and "vtanh" in compiled.__globals__  # (the run calls it)
    import squash_mod

    x = np.linspace(-1.0, 1.5, 7)
    assert np.allclose(gen.squash_grad(0.8, x), fd_grad(squash_mod.squash, 0.8, x), atol=1e-7)
    for name in [m for m in sys.modules if m.startswith(("gen_squash", "squash_mod"))]:
        del sys.modules[name]


@pytest.mark.parametrize("table, message", [
    ("", "no [tool.s2sad] table"),
    ("[tool.s2sad]\nfunctions = {'m:f' = ['grad']}", "needs output"),
    ("[tool.s2sad]\noutput = 'gen'\nfunctions = {'m:f' = 'grad'}", "must be a list of strings"),
    ("[tool.s2sad]\noutput = 'gen'\nfunction = {}", "unknown [tool.s2sad] key(s) function"),
    ("[tool.s2sad]\noutput = 'gen'\nfunctions = {'no_such_module_xyz' = []}", "cannot import module"),
])
def test_bad_configuration_is_reported_with_the_file(tmp_path, table, message):
    (tmp_path / "pyproject.toml").write_text(table)
    with pytest.raises(BuildError) as info:
        build.load_config(tmp_path / "pyproject.toml")
    assert str(tmp_path / "pyproject.toml") in str(info.value) or "cannot import" in message
    assert message in str(info.value)


def test_clashing_file_names_are_refused(project, monkeypatch):
    root, module = project
    monkeypatch.syspath_prepend(str(root))
    targets = build.target_from(f"{module}:chain", ["grad"]) * 2
    with pytest.raises(BuildError, match="both write chain_grad.py"):
        build.plan(targets)


def test_repo_generated_folder_is_up_to_date():
    """generated/ holds the README/demo examples' derivatives; regenerate with the command below."""
    from s2sad.cli import main

    assert main(["build", "--config", str(REPO / "generated" / "s2sad.toml"), "--check"]) == 0


# --- a wheel with generated derivatives, installed where there is no libcst ----------------------

RUN_IN_FRESH_VENV = '''
import importlib.util, json, sys
import numpy as np
from springs.dynamics import forces, stiffness
x = np.array([0.2, 1.3, 2.1, 3.4])
what = forces if sys.argv[1] == "forces" else stiffness
print(json.dumps({"libcst": importlib.util.find_spec("libcst") is not None,
                  "s2sad": importlib.util.find_spec("s2sad") is not None, "value": what(x, 2.0, 1.0).tolist()}))
'''


def _run_in(python: Path, what: str, **env) -> dict:
    out = subprocess.run([str(python), "-c", RUN_IN_FRESH_VENV, what], capture_output=True, text=True,
                         cwd=python.parent, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["libcst"] is False and result["s2sad"] is False
    return result["value"]


def _venv_without_libcst(where: Path) -> Path:
    """A fresh virtualenv that sees numpy, numba and llvmlite from ours, and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    ours = Path(np.__file__).parent.parent
    linked = where / "linked"
    linked.mkdir()
    for entry in ours.iterdir():
        if entry.name.split("-")[0].split(".")[0] in ("numpy", "numba", "llvmlite") and "cuda" not in entry.name:
            (linked / entry.name).symlink_to(entry)
    (site / "deps.pth").write_text(str(linked) + "\n")
    return python


@pytest.mark.slow
def test_example_wheel_runs_its_gradients_without_libcst(tmp_path):
    project = tmp_path / "springs"
    shutil.copytree(REPO / "examples" / "springs", project, ignore=shutil.ignore_patterns("_generated", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                    "-w", str(tmp_path / "dist"), str(project)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("springs-*.whl"))
    python = _venv_without_libcst(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True)
    # numba-compiled (at -O1, where numba caches code that calls other jitted code), then loaded from numba's
    # cache by a second process, which registers the runtime copy's C functions before that code links
    forces = _run_in(python, "forces", NUMBA_OPT="1")
    assert _run_in(python, "forces", NUMBA_OPT="1") == forces
    stiffness = _run_in(python, "stiffness", NUMBA_DISABLE_JIT="1")  # the same shipped code, run by Python
    sys.path.insert(0, str(project / "src"))
    try:
        from springs.energy import energy
    finally:
        sys.path.remove(str(project / "src"))
    x, k = np.array([0.2, 1.3, 2.1, 3.4]), 2.0
    assert np.allclose(forces, -fd_grad(energy, x, k, 1.0), atol=1e-7)
    exact = np.diag(np.exp(-x)) + k * (np.diag([1, 2, 2, 1]) - np.eye(4, k=1) - np.eye(4, k=-1))
    assert np.allclose(stiffness, exact, atol=1e-10)


def test_a_function_reading_a_global_array_is_refused_by_name(tmp_path, monkeypatch):
    (tmp_path / "global_mod.py").write_text(textwrap.dedent('''\
        import numpy as np

        DATA = np.ones(3)

        def fit(w):
            return np.sum((DATA * w) ** 2)
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BuildError, match=r"fit: grad: reads arrays from outside its arguments \(DATA\)"):
        build.build(build.Config(tmp_path / "gen_global", build.target_from("global_mod:fit", ["grad"])))
    assert not (tmp_path / "gen_global").exists()


def test_vendored_imports_rewrite_each_runtime_import_and_nothing_else():
    """Several imports on one line (the compiled-text passes add theirs to the numpy line), one spanning
    lines, and a string that only looks like an import."""
    from s2sad.codegen.compiled import vendored_imports

    code = ("import numpy as np; from s2sad.runtime.fused import ewise; from s2sad.runtime.vmath import vexp\n"
            "from s2sad.runtime import (copy_adj,\n    restore)\n"
            "note = 'é from s2sad.runtime import y'\n")
    assert vendored_imports(code, "_rt") == (
        "import numpy as np; from ._rt.fused import ewise; from ._rt.vmath import vexp\n"
        "from ._rt import (copy_adj,\n    restore)\n"
        "note = 'é from s2sad.runtime import y'\n")


@pytest.mark.parametrize("line", ["import s2sad.api", "import numpy as np; from s2sad import grad"])
def test_a_generated_import_of_s2sad_beyond_its_runtime_is_refused(line):
    with pytest.raises(BuildError, match="imports s2sad beyond its runtime"):
        build._vendored_imports(f"{line}\nfrom s2sad.runtime import (copy_adj)\n")

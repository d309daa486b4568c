"""SPEC.md's error cases: located, saying what is wrong and what to write instead."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bad_functions
import s2sad
from seed_functions import product

HERE = Path(__file__).resolve().parent


def _located(exc_info, func_line_offset, snippet):
    text = str(exc_info.value)
    path = re.escape(bad_functions.__file__)
    m = re.match(rf"{path}:(\d+):(\d+): ", text)
    assert m, text
    lines = Path(bad_functions.__file__).read_text().splitlines()
    line = int(m.group(1))
    assert snippet in lines[line - 1]
    assert snippet in text and "^" in text
    return text


def test_unsupported_statement_is_located():
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(bad_functions.uses_with)(1.0)
    text = _located(info, 0, "with open(")
    assert "`With` statements are not supported" in text


def test_errors_are_located_with_libcst_public_resolve_too(monkeypatch):
    from s2sad import frontend

    monkeypatch.setattr(frontend, "_PROVIDER_STEP", "_no_such_step")  # a libcst without the private step
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(bad_functions.uses_with, backend="python")(1.0)
    assert "`With` statements are not supported" in _located(info, 0, "with open(")


def test_call_without_rule_suggests_custom_rules():
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(bad_functions.calls_unknown)(1.0)
    text = _located(info, 0, "np.i0(y)")
    assert "no derivative rule for `i0`" in text and "custom_jvp" in text
    col = int(re.match(r".*?:\d+:(\d+):", text).group(1))
    assert Path(bad_functions.__file__).read_text().splitlines()[int(re.match(r".*?:(\d+):", text).group(1)) - 1][
        col - 1:].startswith("np.i0")


def test_print_statement_runs_as_written(capsys):
    assert s2sad.grad(bad_functions.prints)(1.5) == 1.0  # d/dx x, closed form
    assert "1.5" in capsys.readouterr().out


@pytest.mark.parametrize("argnums", [2, -3, (0, 5)])
def test_argnums_out_of_range(argnums):
    with pytest.raises(ValueError, match=r"out of range: product takes 2 argument\(s\) \(x, y\)"):
        s2sad.grad(product, argnums=argnums)


def test_argnums_that_is_not_ints():  # source(f, 0.3) passes 0.3 as argnums: example arguments belong to grad(f)
    with pytest.raises(TypeError, match=r"argnums must be an int or a tuple of ints, got 0.3"):
        s2sad.source(product, 0.3)


def test_integer_input_is_refused():
    with pytest.raises(TypeError, match=r"argument 0 \(`x`\) of product is int 3.*3\.0"):
        s2sad.grad(product)(3, 4.0)
    with pytest.raises(TypeError, match=r"argument 1 \(`y`\) .*array of dtype int64"):
        s2sad.grad(product, argnums=1)(3.0, np.arange(3))
    with pytest.raises(TypeError, match="bool"):
        s2sad.grad(product)(True, 4.0)
    assert s2sad.grad(product)(3.0, 4) == 4.0  # integers are fine where nothing is differentiated


def test_source_unavailable():
    namespace = {}
    exec("def made_by_exec(x):\n    return x * x\n", namespace)
    with pytest.raises(s2sad.SourceUnavailableError, match="cannot find the source of made_by_exec"):
        s2sad.grad(namespace["made_by_exec"])(1.0)


def test_errors_leave_no_files_behind(tmp_path):
    script = (
        "import s2sad, bad_functions\n"
        "for f in (bad_functions.uses_with, bad_functions.calls_unknown, bad_functions.writes_global):\n"
        "    try:\n"
        "        s2sad.grad(f)(1.0)\n"
        "    except s2sad.UnsupportedError:\n"
        "        pass\n"
    )
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", script], check=True, cwd=HERE, env=env)
    assert list(tmp_path.iterdir()) == []


def test_cli_show_prints_adjoint():
    out = subprocess.run([sys.executable, "-m", "s2sad", "show", "programs:recurrence", "--argnums", "0,1"],
                         cwd=HERE, capture_output=True, text=True, check=True).stdout
    assert "def recurrence_grad(x, w" in out and "for t in range(n - 1, 0, -1):" in out
    assert "# h[t] = np.tanh(w * h[t - 1] + x[t])" in out


def test_cli_show_modes_and_orders():
    def show(*options):
        return subprocess.run([sys.executable, "-m", "s2sad", "show", "programs:newton_sqrt", *options],
                              cwd=HERE, capture_output=True, text=True, check=True).stdout

    fwd = show("--mode", "fwd")
    assert "def newton_sqrt_jvp(a, a_dot):" in fwd and "x_dot = add_dot * 0.5" in fwd
    second = show("--mode", "rev", "--order", "2")
    assert "def newton_sqrt_grad_grad(a" in second and ".pop()" in second  # reverse through x's tape
    assert "def newton_sqrt_jvp_tangent_jvp(a, a_dot, " in show("--mode", "fwd", "--order", "2")
    bad = subprocess.run([sys.executable, "-m", "s2sad", "show", "programs:newton_sqrt", "--order", "0"],
                         cwd=HERE, capture_output=True, text=True)
    assert bad.returncode == 1 and "order must be a positive int" in bad.stderr


def test_cli_show_reports_errors_on_stderr():
    res = subprocess.run([sys.executable, "-m", "s2sad", "show", "bad_functions:uses_with"],
                         cwd=HERE, capture_output=True, text=True)
    assert res.returncode == 1 and res.stdout == ""
    assert "bad_functions.py" in res.stderr and "With" in res.stderr


def _power_with_dtype(x):
    return np.sum(np.power(x, 2, dtype=np.float64))


def test_a_numba_lowering_error_is_located_at_the_users_function():
    """numba lowers no keyword argument of a ufunc and raises a bare NotImplementedError, with no line."""
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(_power_with_dtype, backend="numba")(np.array([1.0, 2.0]))
    header = str(info.value).splitlines()[0]
    assert header.startswith(f"{__file__}:") and "`_power_with_dtype`" in header and "keyword arguments" in header
    assert 'backend="python"' in str(info.value)
    np.testing.assert_allclose(s2sad.grad(_power_with_dtype, backend="python")(np.array([1.0, 2.0])), [2.0, 4.0])

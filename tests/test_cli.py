"""The command line: help for every command, exit codes, errors on stderr, highlighting only on a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from s2sad import backend
from s2sad.cli import main

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")
UNSUPPORTED = "def f(x):\n    with open('w.txt') as w:\n        return x * 2\n"


@pytest.mark.parametrize("command, says", [
    ([], "show,build,cache,rules"), (["show"], "--signature"), (["build"], "--check"),
    (["cache"], "info: location, size, entries"), (["rules"], "--update-readme"),
])
def test_every_command_has_help(command, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(command + ["--help"])
    assert exit_.value.code == 0
    assert says in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv, says", [
    ([], "required"), (["bogus"], "invalid choice"), (["show"], "required"), (["cache", "size"], "invalid choice"),
    (["show", "m:f", "--mode", "sideways"], "invalid choice"),
    (["show", "examples/demo.py"], "expected MODULE:FUNC or FILE.py:FUNC, got 'examples/demo.py'"),
    (["show", "examples/demo.py:sigmoid", "--signature", "f8[:"], "'f8[:' is not a list of numba types"),
    (["build", "m:f"], "needs -o/--output DIR"),
    (["build", "-t", "grad"], "-t/--transform and -o/--output go with TARGETs"),
    (["build", "m:f", "-o", "out", "--config", "pyproject.toml"], "give TARGETs or --config, not both"),
])
def test_a_malformed_command_line_exits_2_with_usage_on_stderr(argv, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # nothing is read: the line is refused before
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    out = capsys.readouterr()
    assert "usage: s2sad" in out.err and says in " ".join(out.err.split()) and out.out == ""


def test_errors_in_user_code_exit_1_with_a_located_message(tmp_path, capsys):
    (tmp_path / "unsupported_fn.py").write_text(UNSUPPORTED)
    assert main(["show", f"{tmp_path / 'unsupported_fn.py'}:f"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert f"{tmp_path / 'unsupported_fn.py'}:2:5: `With` statements are not supported" in out.err
    assert main(["show", "examples/demo.py:no_such_function"]) == 1
    assert "has no attribute 'no_such_function'" in capsys.readouterr().err
    assert main(["show", "no_such_file.py:f"]) == 1
    assert "no such file: no_such_file.py" in capsys.readouterr().err


def test_show_prints_plain_text_when_piped():
    out = subprocess.run([sys.executable, "-m", "s2sad", "show", "examples/demo.py:loss", "--mode", "rev"],
                         cwd=REPO, capture_output=True, text=True, env=_env())
    assert out.returncode == 0, out.stderr
    assert "\x1b[" not in out.stdout
    assert "def loss_grad(W, b, inputs, targets):" in out.stdout


def test_show_highlights_on_a_terminal():
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "s2sad", "show", "examples/demo.py:loss", "--mode", "rev"],
                            cwd=REPO, stdout=follower, stderr=subprocess.PIPE, env=_env())
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait() == 0, proc.stderr.read()
    text = b"".join(chunks).decode()
    assert "\x1b[" in text  # rich's colours
    assert "def loss_grad(W, b, inputs, targets):" in ANSI.sub("", text)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return {**env, "TERM": "xterm-256color", "COLUMNS": "200"}


def test_color_always_and_never(capsys):
    assert main(["show", "examples/demo.py:sigmoid", "--color", "always"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    assert main(["show", "examples/demo.py:sigmoid", "--color", "never", "--mode", "fwd", "--order", "2"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out and "def sigmoid_jvp_tangent_jvp(" in out


def test_show_compiles_for_a_signature(capsys):
    assert main(["show", "examples/demo.py:sigmoid", "--signature", "f8[:]"]) == 0
    assert capsys.readouterr().out.endswith("# numba: sigmoid_grad(array(float64, 1d, A)) -> array(float64, 1d, C)\n")


def test_show_vmap_target(capsys):
    assert main(["show", "examples/demo.py:sigmoid", "--vmap", "parallel"]) == 0
    assert "for b in prange(1, n):" in capsys.readouterr().out


def test_build_writes_checks_and_reports_staleness(tmp_path, monkeypatch, capsys):
    module = tmp_path / "cli_build_mod.py"
    module.write_text("import numpy as np\n\n\ndef cube_sum(x):\n    return np.sum(x * x * x)\n")
    monkeypatch.chdir(tmp_path)
    argv = ["build", "cli_build_mod:cube_sum", "-t", "grad", "-t", "jvp", "-o", "out"]
    assert main(argv) == 0
    assert re.search(r"out: wrote \d+ file\(s\)", capsys.readouterr().out)
    assert (tmp_path / "out" / "cube_sum_grad.py").is_file() and (tmp_path / "out" / "_s2sad_runtime").is_dir()
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "out" / "cube_sum_grad.py").stat().st_mode & 0o777 == 0o666 & ~umask  # not the cache's 0600
    first = {p: p.read_bytes() for p in (tmp_path / "out").rglob("*.py")}
    assert main(argv) == 0
    assert "already up to date" in capsys.readouterr().out
    assert first == {p: p.read_bytes() for p in (tmp_path / "out").rglob("*.py")}
    assert main(argv + ["--check"]) == 0
    module.write_text(module.read_text().replace("x * x * x", "x * x"))
    sys.modules.pop("cli_build_mod")
    assert main(argv + ["--check"]) == 1
    err = capsys.readouterr().err
    assert "2 generated file(s) in out are stale" in err and "cube_sum_grad.py" in err and "cube_sum_jvp.py" in err
    sys.modules.pop("cli_build_mod")


@pytest.mark.parametrize("argv, message", [
    (["build", "--config", "missing.toml"], "missing.toml: cannot read the configuration"),
    (["build", "m:f", "-t", "hessian(argnums=(0, 1))", "-o", "out"], "a built hessian takes one argnum"),
])
def test_build_errors_exit_1(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path))
    backend.load_module("def f(x):\n    return x\n", "cli_cache_probe", "python")
    assert main(["cache", "info"]) == 0
    info = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert info["path"] == str(tmp_path) and int(info["entries"]) >= 1 and int(info["bytes"]) > 0
    assert main(["cache", "clear"]) == 0
    removed = re.fullmatch(r"s2sad: removed (\d+) file\(s\) from (.*)\n", capsys.readouterr().out)
    assert int(removed[1]) >= 1 and removed[2] == str(tmp_path)
    assert not list(tmp_path.glob("s2sad_gen_*.py"))

"""The README's "Three ways in" runs as written: its Python blocks (as one file), its `s2sad` commands,
and its `[tool.s2sad]` table, which must be the one the tested example package uses."""

from __future__ import annotations

import re
import runpy
import shlex
import tomllib
from pathlib import Path

import numba
import numpy as np
import pytest

from s2sad import api, backend, build
from s2sad.cli import main

REPO = Path(__file__).resolve().parent.parent
EPS = 1e-6


def section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


@pytest.fixture
def uncompiled(monkeypatch):
    """Run the same generated code by Python (numba compiles would dominate this test's time)."""
    monkeypatch.setattr(api, "compile_function", lambda src, stem, func, _: backend.compile_function(src, stem, func,
                                                                                                    "python"))
    monkeypatch.setattr(numba, "njit", lambda *a, **k: (lambda f: f))  # for the modules `s2sad build` wrote


def test_python_blocks_run_and_their_derivatives_are_right(tmp_path, monkeypatch, uncompiled):
    code = "\n\n".join(blocks(section("Three ways in"), "python"))
    script = tmp_path / "readme_three_ways.py"
    script.write_text(code)  # a real file: s2sad reads the functions' source
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(REPO))
    ns = runpy.run_path(str(script))
    recur, x = ns["recur"].__wrapped__, ns["x"]
    fd = np.array([(recur(x + EPS * e, 0.7) - recur(x - EPS * e, 0.7)) / (2 * EPS) for e in np.eye(x.size)])
    assert np.allclose(ns["dx"], fd, atol=1e-8)
    assert ns["dw"] == pytest.approx((recur(x, 0.7 + EPS) - recur(x, 0.7 - EPS)) / (2 * EPS), rel=1e-7)
    assert ns["value"] == pytest.approx(recur(x, 0.7))
    assert np.allclose(ns["dx_built"], ns["dx"]) and ns["dw_built"] == pytest.approx(ns["dw"])
    grad_x = ns["recur_grad_0_1"]
    fd_h = np.array([(grad_x(x + EPS * e, 0.7)[0] - grad_x(x - EPS * e, 0.7)[0]) / (2 * EPS) for e in np.eye(x.size)])
    assert np.allclose(ns["H"], fd_h.T, atol=1e-6)


def test_shell_commands_succeed(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    commands = [line.split("#")[0] for block in blocks(section("Three ways in"), "bash") for line in block.splitlines()]
    commands = [shlex.split(c) for c in commands if c.strip()]
    assert len(commands) >= 3 and all(c[0] == "s2sad" for c in commands)
    for argv in commands:
        assert main(argv[1:]) == 0, f"{' '.join(argv)}: {capsys.readouterr().err}"


def test_toml_block_is_the_example_packages_configuration():
    (readme_toml,) = blocks(section("Three ways in"), "toml")
    example = tomllib.loads((REPO / "examples" / "springs" / "pyproject.toml").read_text())
    assert tomllib.loads(readme_toml)["tool"]["s2sad"] == example["tool"]["s2sad"]
    for specs in example["tool"]["s2sad"]["functions"].values():
        assert all(build.parse_transform(s) for s in specs)

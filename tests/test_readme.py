"""The README runs as printed: each of its Python blocks, alone and compiled by numba (nothing patched out),
gives the numbers it claims (checked against central finite differences or closed forms); its `s2sad`
commands succeed; its `[tool.s2sad]` table is the one the tested example package uses.

A block that is not a program (an excerpt of printed output, a sketch of s2sad's own source) is marked by a
`<!-- not run: reason -->` line just above it, and NOT_RUN lists those: a new one fails the test until listed.

All the blocks run in one fresh process (python's own start and numba's are paid once), each from a file of its
own (s2sad reads functions' source) run as `python block.py` runs it, with the repository's root as the
current directory and first on the path (the build block imports the `generated` package from there). The
checks run in that process too, on each block's globals and printed output; this file is their module.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BLOCK = re.compile(r"^(?:<!-- not run: (.*?) -->\n)?```python\n(.*?)^```", flags=re.M | re.S)

NOT_RUN = {"30 seconds #1", "30 seconds #2", "How it works #0"}


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def python_blocks() -> dict[str, tuple[str | None, str]]:
    """'<section> #<n>' (the n-th Python block under that `## ` heading) -> (why it is not run or None, code)."""
    text = README.read_text(encoding="utf-8")
    found, counts = {}, {}
    for m in BLOCK.finditer(text):
        headings = re.findall(r"^## (.*)$", text[:m.start()], flags=re.M)
        title = headings[-1] if headings else "(top)"
        key = f"{title} #{counts.setdefault(title, 0)}"
        counts[title] += 1
        found[key] = (m.group(1), m.group(2))
    return found


# --- the checks, run in the blocks' process: `ns` is a block's globals, `out` what it printed ---------------

EPS = 1e-6


def assert_close(actual, expected, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(actual, dtype=float), np.asarray(expected, dtype=float), rtol=rtol,
                               atol=atol)


def fd(f, x, eps=EPS):
    """Central finite differences of scalar- or array-valued `f` at `x` (a float or an array): the derivative
    with respect to each element of `x`, on the last axes."""
    if np.ndim(x) == 0:
        return (np.asarray(f(x + eps)) - np.asarray(f(x - eps))) / (2 * eps)
    x = np.asarray(x, dtype=float)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(cols[0]) + x.shape)


def recur_reference(x, w):
    """examples/demo.py's and the README's `recur`, for the blocks that use the built modules."""
    h = np.zeros(x.shape[0])
    h[0] = x[0]
    for t in range(1, x.shape[0]):
        h[t] = np.tanh(w * h[t - 1] + x[t])
    return np.sum(h * h)


def printed_excerpt(key: str) -> list[str]:
    """The lines of a not-run block that shows printed code (its `...` lines and calls left out)."""
    _, code = python_blocks()[key]
    return [line.strip() for line in code.splitlines()
            if line.strip() and line.strip() != "..." and not line.startswith("print(")]


def check_thirty_seconds(ns, out):
    import s2sad

    recur, x = ns["recur"], ns["x"]
    assert_close(ns["dx"], fd(lambda v: recur(v, 0.7), x))
    assert_close(ns["dw"], fd(lambda w: recur(x, w), 0.7))
    assert "x_bar" in out
    for line in printed_excerpt("30 seconds #1"):  # the printed adjoint, as the README quotes it
        assert line in out, f"the README quotes `{line}`, which `s2sad.source` no longer prints"
    tangent_code = s2sad.source(recur, argnums=(0, 1), mode="fwd")
    for line in printed_excerpt("30 seconds #2"):
        assert line in tangent_code, f"the README quotes `{line}`, which the forward-mode source no longer has"


def check_composition(ns, out):
    recur, x = ns["recur"], ns["x"]
    t = np.tanh(0.5)
    assert_close(ns["d3"], -2.0 * (1 - t * t) * (1 - 3 * t * t), rtol=1e-12)  # the third derivative of tanh
    h = 1e-4  # the Hessian by second differences of the function itself
    n = x.size
    hessian = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = h * np.eye(n)[i], h * np.eye(n)[j]
            hessian[i, j] = (recur(x + ei + ej, 0.7) - recur(x + ei - ej, 0.7) - recur(x - ei + ej, 0.7)
                             + recur(x - ei - ej, 0.7)) / (4 * h * h)
    assert_close(ns["H"], hessian, rtol=1e-5, atol=1e-6)
    assert_close(ns["dx"], fd(ns["uses_grad"], x))


def check_three_ways(ns, out):
    recur, x = ns["recur"].__wrapped__, ns["x"]
    assert ns["value"] == recur(x, 0.7)
    assert_close(ns["dx"], fd(lambda v: recur(v, 0.7), x))
    assert_close(ns["dw"], fd(lambda w: recur(x, w), 0.7))
    assert "def recur_jvp" in out and "x_dot" in out


def check_built(ns, out):
    x = ns["x"]
    assert_close(ns["dx_built"], fd(lambda v: recur_reference(v, 0.7), x))
    assert_close(ns["dw_built"], fd(lambda w: recur_reference(x, w), 0.7))
    assert_close(ns["H"], fd(lambda v: ns["recur_grad_0_1"](v, 0.7)[0], x), atol=1e-6)


def check_vmap(ns, out):
    loss, w, X, y, G = ns["loss"], ns["w"], ns["X"], ns["y"], ns["G"]
    assert G.shape == X.shape
    assert_close(G, [fd(lambda v: loss(v, X[i], y[i]), w) for i in range(len(X))])
    assert "prange" in out


def check_pytrees(ns, out):
    mlp, params, x, grads = ns["mlp"], ns["params"], ns["x"], ns["grads"]
    assert [sorted(g) for g in grads] == [["W", "b"], ["W", "b"]]
    for layer in range(2):
        for name in ("W", "b"):
            def at(leaf):
                changed = [dict(p) for p in params]
                changed[layer][name] = leaf
                return mlp(changed, x)

            assert_close(grads[layer][name], fd(at, params[layer][name]))


def check_rules(ns, out):
    import s2sad

    x = ns["x"]
    assert_close(ns["d1"], 1.0 / (1.0 + np.exp(-x)))
    assert_close(ns["d2"], np.ones_like(x))  # 5.0, clipped by the custom vjp
    assert_close(ns["d3"], 1.0 / (1.0 + np.abs(x)) ** 2)
    assert s2sad.rules.lookup_object(ns["softsign"])[0].name == "softsign_rule"


def check_sharing(ns, out):
    first, second = out.splitlines()[:2]
    assert "augmented assignment of `a` changes memory that `b` shares" in first and ":8:" in first, first
    x = np.array([1.0, 2.0, 3.0])
    assert_close(ns["s2sad"].grad(ns["explicit_step"])(x), fd(ns["explicit_step"], x))
    assert second.startswith("[")


def check_float32(ns, out):
    assert out.strip() == "float32", out
    w = ns["w"]
    g = ns["s2sad"].grad(ns["loss"])(w)
    assert g.dtype == np.float32
    assert_close(g, fd(ns["loss"], w.astype(np.float64)), rtol=1e-3, atol=1e-4)


def check_numba(ns, out):
    import numba

    import s2sad

    rosenbrock, p, root, f = ns["rosenbrock"], ns["p"], ns["root"], ns["circle_and_line"]
    gradient, x = ns["rosenbrock_grad"], np.array([0.3, -0.4])
    assert_close(numba.njit(lambda v: gradient(v))(x), fd(rosenbrock, x))  # called by numba code
    assert_close(p, [1.0, 1.0], rtol=1e-3)
    assert_close(root, [np.sqrt(2.0), np.sqrt(2.0)], rtol=1e-12)
    jacobian = s2sad.jacfwd(f)
    assert_close(numba.njit(lambda y: jacobian(y))(root), fd(f, root))


CHECKS = {
    "30 seconds #0": check_thirty_seconds,
    "30 seconds #3": check_composition,
    "Three ways in #0": check_three_ways,
    "Three ways in #1": check_built,
    "API #0": check_numba,
    "Batches: vmap #0": check_vmap,
    "Pytrees #0": check_pytrees,
    "Rules for your own functions #0": check_rules,
    "Python you can differentiate #0": check_sharing,
    "Python you can differentiate #1": check_float32,
}

RUNNER = """
import contextlib, importlib.util, io, json, runpy, sys, traceback

spec = importlib.util.spec_from_file_location("readme_checks", sys.argv[1])
checks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checks)
results = {}
for key, path in json.loads(sys.argv[2]):
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            ns = runpy.run_path(path, run_name="__main__")
        checks.CHECKS[key](ns, printed.getvalue())
        results[key] = None
    except BaseException:
        results[key] = traceback.format_exc()
with open(sys.argv[3], "w") as f:
    json.dump(results, f)
"""


# --- the tests ----------------------------------------------------------------------------------------------


def test_blocks_not_run_are_marked_and_listed_and_every_other_block_is_checked():
    found = python_blocks()
    marked = {key for key, (why, _) in found.items() if why is not None}
    assert marked == NOT_RUN, f"marked `not run` in README.md: {sorted(marked)}; listed here: {sorted(NOT_RUN)}"
    run = set(found) - marked
    assert run == set(CHECKS), f"blocks without a check: {sorted(run - set(CHECKS))}; " \
                               f"checks without a block: {sorted(set(CHECKS) - run)}"


def test_python_blocks_run_as_printed(tmp_path):
    to_run = []
    for key, (why, code) in python_blocks().items():
        if why is None:
            path = tmp_path / f"readme_{re.sub(r'[^a-z0-9]+', '_', key.lower()).strip('_')}.py"
            path.write_text(code, encoding="utf-8")  # a real file: s2sad reads the functions' source
            to_run.append((key, str(path)))
    assert len(to_run) == len(CHECKS)
    results = tmp_path / "results.json"
    # `python -c` puts the current directory first on the path, as running a file from the root would
    done = subprocess.run([sys.executable, "-c", RUNNER, __file__, json.dumps(to_run), str(results)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    failed = {key: trace for key, trace in json.loads(results.read_text()).items() if trace is not None}
    assert not failed, "\n\n".join(f"README block {key}:\n{trace}" for key, trace in failed.items())


def test_shell_commands_succeed(monkeypatch, capsys):
    from s2sad.cli import main

    monkeypatch.chdir(REPO)
    commands = [line.split("#")[0] for block in blocks(section("Three ways in"), "bash") for line in block.splitlines()]
    commands = [shlex.split(c) for c in commands if c.strip()]
    assert len(commands) >= 3 and all(c[0] == "s2sad" for c in commands)
    for argv in commands:
        assert main(argv[1:]) == 0, f"{' '.join(argv)}: {capsys.readouterr().err}"


def test_toml_block_is_the_example_packages_configuration():
    from s2sad import build

    (readme_toml,) = blocks(section("Three ways in"), "toml")
    example = tomllib.loads((REPO / "examples" / "springs" / "pyproject.toml").read_text())
    assert tomllib.loads(readme_toml)["tool"]["s2sad"] == example["tool"]["s2sad"]
    for specs in example["tool"]["s2sad"]["functions"].values():
        assert all(build.parse_transform(s) for s in specs)

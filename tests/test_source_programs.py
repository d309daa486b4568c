"""`s2sad.source(g)` of a function s2sad returned prints the program `g` runs: executing the printed
text gives `g`'s results, which match finite differences."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from s2sad.cli import main
from s2sad.errors import TypesNeeded

X = np.array([0.3, -0.7, 1.1])


def activate(x):
    return np.sum(np.tanh(x) * x)


def scaled(x, a):
    return np.tanh(x) * a


def by_type(x):
    if isinstance(x, float):
        return np.sin(x) * x
    return np.sum(np.sin(x) * x[0])


def run_printed(text: str, name: str, *args):
    """Execute the printed program and call `name` in it."""
    namespace = {"__name__": "printed_program"}
    exec(compile(text, "<printed>", "exec"), namespace)  # noqa: S102
    return namespace[name](*args)


def fd_jacobian(f, args, i):
    """Central differences of every output element of f with respect to args[i]: out.shape + arg.shape."""
    out = np.asarray(f(*args))
    rows = [fd_grad(lambda *a, j=j: np.asarray(f(*a)).flat[j], args, i) for j in range(out.size)]
    return np.array(rows).reshape(out.shape + np.shape(args[i]))


def test_source_of_grad_is_the_gradient_it_runs(backend):
    g = s2sad.grad(activate, backend=backend)
    text = s2sad.source(g)
    assert "def activate_grad(x):" in text and "of `activate_grad`" not in text
    printed = run_printed(text, "activate_grad", X)
    assert_close(printed, g(X), rtol=1e-12)
    assert_close(printed, fd_grad(activate, (X,), 0))


def test_source_of_value_and_grad(backend):
    vg = s2sad.value_and_grad(activate, backend=backend)
    value, gradient = run_printed(s2sad.source(vg), "activate_value_and_grad", X)
    want_value, want_gradient = vg(X)
    assert value == pytest.approx(activate(X)) and value == pytest.approx(want_value)
    assert_close(gradient, want_gradient, rtol=1e-12)


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev"])
def test_source_of_a_jacobian_prints_the_loop_it_runs(kind, backend):
    argnums = (0, 1) if kind == "jacfwd" else 0
    jac = getattr(s2sad, kind)(scaled, argnums=argnums, backend=backend)
    text = s2sad.source(jac)
    assert f"def scaled_{kind}(x, a):" in text
    printed = run_printed(text, f"scaled_{kind}", X, 0.8)
    ran = jac(X, 0.8)
    if kind == "jacfwd":
        for p, r, i in zip(printed, ran, (0, 1)):
            assert_close(p, r, rtol=1e-12)
            assert_close(p, fd_jacobian(scaled, (X, 0.8), i))
    else:
        assert_close(printed, ran, rtol=1e-12)
        assert_close(printed, fd_jacobian(scaled, (X, 0.8), 0))


def test_source_of_hessian_prints_the_jvp_of_the_gradient_and_its_loop(backend):
    h = s2sad.hessian(activate, backend=backend)
    text = s2sad.source(h)
    assert "def activate_grad_jvp(" in text and "def activate_hessian(x):" in text
    printed = run_printed(text, "activate_hessian", X)
    assert_close(printed, h(X), rtol=1e-12)
    gradient = s2sad.grad(activate, backend="python")
    assert_close(printed, fd_jacobian(gradient, (X,), 0))


def test_source_of_vmap_of_grad_is_its_batch_loop(backend):
    batch = np.array([[0.3, -0.7, 1.1], [0.5, 0.2, -0.4]])
    v = s2sad.vmap(s2sad.grad(activate), backend=backend)
    text = s2sad.source(v)
    printed = run_printed(text, "activate_grad_batched", batch)
    assert_close(printed, v(batch), rtol=1e-12)
    assert_close(printed[1], fd_grad(activate, (batch[1],), 0))


def test_source_of_jit_is_the_function_numba_compiles():
    text = s2sad.source(s2sad.jit(activate))
    assert text.startswith("def activate(x):")
    assert run_printed("import numpy as np\n" + text, "activate", X) == pytest.approx(activate(X))


def test_source_of_differentiate_methods_is_what_each_method_runs():
    loss = s2sad.differentiate(activate, backend="python")
    assert s2sad.source(loss.grad) == s2sad.source(s2sad.grad(activate))
    assert s2sad.source(loss.value_and_grad) == s2sad.source(s2sad.value_and_grad(activate))
    assert s2sad.source(loss.hessian) == s2sad.source(s2sad.hessian(activate))
    out, tangent = run_printed(s2sad.source(loss.jvp), "activate_jvp", X, np.ones(3))
    assert tangent == pytest.approx(float(np.sum(fd_grad(activate, (X,), 0))))
    assert loss.source() == s2sad.source(activate)  # the method keeps the derivative shorthand


def test_code_that_needs_types_asks_for_a_call_or_example_arguments():
    g = s2sad.grad(by_type, backend="python")
    with pytest.raises(TypesNeeded, match=r"call by_type\(\.\.\.\) once first, or pass example arguments"):
        s2sad.source(g)
    with_example = s2sad.source(g, 0.4)
    assert run_printed(with_example, "by_type_grad", 0.4) == pytest.approx(fd_grad(by_type, (0.4,), 0))
    g(X)  # a call generates the code for a vector
    after_call = s2sad.source(g)
    assert_close(run_printed(after_call, "by_type_grad", X), fd_grad(by_type, (X,), 0))


def test_a_plain_function_keeps_the_derivative_shorthand():
    assert "def scaled_grad(x, a):" not in s2sad.source(activate)
    assert "def activate_grad(x):" in s2sad.source(activate)
    assert "def scaled_jvp(x, a, x_dot, a_dot):" in s2sad.source(scaled, (0, 1), mode="fwd")
    second = s2sad.source(s2sad.grad(activate), argnums=0)  # options given: the derivative of the gradient
    assert "of `activate_grad`" in second
    with pytest.raises(TypeError, match="both by position and by name"):
        s2sad.source(activate, 0, argnums=0)


def test_cli_show_transform_prints_the_same_program(tmp_path, monkeypatch, capsys):
    module = tmp_path / "show_transform_mod.py"
    module.write_text("import numpy as np\n\n\ndef activate(x):\n    return np.sum(np.tanh(x) * x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import show_transform_mod

    assert main(["show", f"{module}:activate", "--transform", "vmap(grad)", "--color", "never"]) == 0
    assert capsys.readouterr().out == s2sad.source(s2sad.vmap(s2sad.grad(show_transform_mod.activate)))
    assert main(["show", f"{module}:activate", "--transform", "hessian", "--color", "never"]) == 0
    assert "def activate_hessian(x):" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["show", f"{module}:activate", "--transform", "grad", "--mode", "fwd"])
    assert exit_.value.code == 2
    # --signature compiles the program's numba entry, not the Jacobian's Python loop after it
    assert main(["show", f"{module}:activate", "--transform", "jacfwd", "--signature", "f8[:], f8[:]",
                 "--color", "never"]) == 0
    assert capsys.readouterr().out.endswith("# numba: activate_jvp_tangent(array(float64, 1d, A), "
                                            "array(float64, 1d, A)) -> float64\n")
    assert main(["show", f"{module}:activate", "--transform", "jacfwd", "--signature", "f8[:]"]) == 1
    assert "--signature is for the entry point activate_jvp_tangent" in capsys.readouterr().err

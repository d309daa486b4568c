"""vmap: generated batch loops (serial and numba prange), per-example gradients, composition."""

import numpy as np
import pytest

import s2sad
from helpers import assert_close, fd_grad
from vmap_functions import (batch_loss, example_losses, margin_loss, matrix_loss, pair_energy, per_example_loss,
                            row_energy, row_norms, running_max, scaled_energy, tree_loss, two_outputs, window_sum, half_sum,
                            peak)

R = np.random.default_rng(11)
W, B = R.normal(size=3), 0.1
X, Y = R.normal(size=(7, 3)), (R.uniform(size=7) > 0.5).astype(float)
TARGETS = ["cpu", "parallel", "cuda"]  # cuda: numba's simulator in CI (tests/conftest.py), a GPU where one is


@pytest.mark.parametrize("target", TARGETS)
def test_per_example_gradient_of_tanh(target, backend):
    x = np.linspace(-2.0, 2.0, 5)
    with pytest.raises(TypeError, match=r"shape \(5,\).*vmap"):
        s2sad.grad(np.tanh, backend=backend)(x)
    per_example = s2sad.vmap(s2sad.grad(np.tanh, backend=backend), target=target, backend=backend)
    assert_close(per_example(x), 1.0 - np.tanh(x) ** 2, rtol=1e-12)
    assert_close(s2sad.jit(per_example)(x), 1.0 - np.tanh(x) ** 2, rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_per_example_logistic_gradients_are_the_rows_of_jacrev(target, backend):
    grads = s2sad.vmap(s2sad.grad(per_example_loss, argnums=(0, 1), backend=backend), in_axes=(None, None, 0, 0),
                       target=target, backend=backend)(W, B, X, Y)
    jac_W, jac_b = s2sad.jacrev(example_losses, argnums=(0, 1), backend=backend)(W, B, X, Y)
    assert grads[0].shape == (7, 3) and grads[1].shape == (7,)
    assert_close(grads[0], jac_W, rtol=1e-10)
    assert_close(grads[1], jac_b, rtol=1e-10)
    assert_close(grads[0][2], fd_grad(per_example_loss, (W, B, X[2], Y[2]), 0))


def test_grad_of_a_function_that_uses_vmap(backend):
    g = s2sad.grad(batch_loss, argnums=(0, 1), backend=backend)(W, B, X, Y)
    for i in (0, 1):
        assert_close(g[i], fd_grad(batch_loss, (W, B, X, Y), i))
    m = R.normal(size=(4, 3))
    assert_close(s2sad.jacfwd(row_norms, backend=backend)(m).sum(axis=0), fd_grad(lambda a: np.sum(row_norms(a)),
                                                                                   (m,), 0))


def test_vmap_of_jvp_and_nested_vmap(backend):
    tangent = s2sad.api._tangent_function(row_energy, 0)  # (row, row_dot) -> directional derivative
    m, v = R.normal(size=(4, 3)), R.normal(size=(4, 3))
    directional = s2sad.vmap(tangent, backend=backend)(m, v)
    assert_close(directional, np.sum(2.0 * np.sin(m) * np.cos(m) * v, axis=1), rtol=1e-12)
    nested = s2sad.vmap(s2sad.vmap(two_outputs, in_axes=(0, None), backend=backend), in_axes=(None, 0),
                        backend=backend)(np.arange(3.0), np.arange(2.0))
    assert nested[0].shape == (2, 3) and nested[1].shape == (2, 3)
    assert_close(nested[0], np.outer(np.arange(2.0), np.arange(3.0)), rtol=0)


def test_in_axes_out_axes_and_errors():
    m = R.normal(size=(3, 4))
    assert_close(s2sad.vmap(row_energy, in_axes=1)(m), np.sum(np.sin(m) ** 2, axis=0), rtol=1e-12)
    out = s2sad.vmap(np.tanh, out_axes=1)(m)  # rows in, rows mapped, the batch axis put last
    assert_close(out, np.tanh(m).T, rtol=1e-12)
    with pytest.raises(ValueError, match="same batch size.*`x` has 7.*`y` has 4"):
        s2sad.vmap(per_example_loss, in_axes=(None, None, 0, 0))(W, B, X, Y[:4])
    with pytest.raises(ValueError, match="target must be one of.*cuda"):
        s2sad.vmap(np.tanh, target="gpu-please")
    with pytest.raises(ValueError, match="in_axes has 2 entries"):
        s2sad.vmap(row_energy, in_axes=(0, 0))


def test_source_shows_the_batch_loop():
    text = s2sad.source(s2sad.vmap(per_example_loss, in_axes=(None, None, 0, 0), target="parallel"))
    assert "def per_example_loss_batched(W, b, x, y):" in text
    assert "for b2 in prange(1, n):" in text and "per_example_loss(W, b, x[b2], y[b2])" in text


def test_cuda_kernel_runs_loops_branches_and_while_per_thread():
    w, X2 = R.normal(size=4), R.normal(size=(9, 4)) * 2.0
    Y2 = (R.uniform(size=9) > 0.5).astype(float)
    per_example = s2sad.vmap(s2sad.grad(margin_loss, argnums=(0, 1)), in_axes=(None, 0, 0), target="cuda")
    gw, gx = per_example(w, X2, Y2)
    for i in (0, 4, 8):
        assert_close(gw[i], fd_grad(margin_loss, (w, X2[i], Y2[i]), 0))
        assert_close(gx[i], fd_grad(margin_loss, (w, X2[i], Y2[i]), 1))
    text = s2sad.source(per_example)
    assert "@cuda.jit" in text and "cuda.grid(1)" in text and "cuda.local.array(4, np.float64)" in text
    kernel_code = [ln.split("#")[0] for ln in text.split("@cuda.jit")[-1].splitlines()]
    assert not any("np." in ln.replace("np.float64", "") for ln in kernel_code)  # math, not NumPy, in a thread


def wave_energy(w, x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(w[i] * x[i]) * w[i]  # sin's value is read by the product's adjoint
    return s


def test_cuda_kernels_recompute_the_libm_values_cpu_code_tapes():
    """On the CPU the adjoint pops sin's values off a tape; a CUDA thread keeps no tape, so the code a
    kernel batches recomputes them instead."""
    assert "sin2_tape = List()" in s2sad.source(wave_energy)
    w, X2 = R.normal(size=4), R.normal(size=(6, 4))
    per_example = s2sad.vmap(s2sad.grad(wave_energy), in_axes=(None, 0), target="cuda")
    gw = per_example(w, X2)
    for i in (0, 5):
        assert_close(gw[i], fd_grad(wave_energy, (w, X2[i]), 0))
    assert "sin2_tape" not in s2sad.source(per_example)


def test_cuda_device_arrays_stay_on_the_device():
    from numba import cuda

    x = np.linspace(-1.0, 1.0, 300)  # more examples than one block of threads
    per_example = s2sad.vmap(s2sad.grad(np.tanh), target="cuda")
    out = per_example(cuda.to_device(x))
    assert hasattr(out, "copy_to_host")
    assert_close(out.copy_to_host(), 1.0 - np.tanh(x) ** 2, rtol=1e-12)


@pytest.mark.parametrize("fun, args, message", [
    (running_max, (np.ones(3), np.ones((2, 3))), r"keeps a tape.*cannot grow a list.*m_tape = List"),
    (matrix_loss, (np.ones((2, 3)), np.ones((2, 3))), r"matrix product.*W @ x"),
    (half_sum, (np.ones(3), np.ones((2, 3))), "only known at run time"),
])
def test_cuda_refuses_what_a_thread_cannot_do_with_the_line(fun, args, message):
    with pytest.raises(s2sad.errors.UnsupportedError, match=rf"(?s)\.py:\d+:\d+: vmap\(target='cuda'\): .*{message}"):
        s2sad.vmap(s2sad.grad(fun), in_axes=(None, 0), target="cuda")(*args)


def test_cuda_refuses_a_reduction_it_has_no_loop_for():
    with pytest.raises(s2sad.errors.UnsupportedError, match=r"vmap_functions\.py:\d+:\d+: vmap\(target='cuda'\): `np\.max\(mul\)` has no CUDA form"):
        s2sad.vmap(peak, in_axes=(None, 0), target="cuda")(np.ones(3), np.ones((2, 3)))


def test_cuda_kernel_sizes_come_from_the_first_call():
    per_example = s2sad.vmap(s2sad.grad(window_sum), in_axes=(None, 0), target="cuda")
    with pytest.raises(ValueError, match="call the vmapped function once"):
        s2sad.source(per_example)
    w, x = R.normal(size=4), R.normal(size=(3, 4))
    assert_close(per_example(w, x), np.where(np.arange(4) > 0, x, 0.0), rtol=1e-12)
    assert "cuda.local.array(3, np.float64)" in s2sad.source(per_example)  # w[1:] of a 4-vector


def test_cuda_batches_of_vectors_travel_column_major():
    """Rows of a batch go to neighbouring threads; in column-major order their loads coalesce on a GPU.
    Rows longer and more numerous than the 32 x 32 tiles that reorder them, C and Fortran, host and device."""
    from numba import cuda

    per_example = s2sad.vmap(s2sad.grad(row_energy), target="cuda")
    x = R.normal(size=(70, 40))
    want = np.sin(2.0 * x)  # d/dx sin(x)^2
    for given in (x, np.asfortranarray(x), cuda.to_device(x), cuda.to_device(np.asfortranarray(x))):
        got = per_example(given)
        host = got.copy_to_host() if hasattr(got, "copy_to_host") else got
        assert host.shape == (70, 40) and host.flags.f_contiguous
        assert_close(host, want, rtol=1e-12)
    assert "launch(" in s2sad.source(per_example) and "(True,), np.float64)" in s2sad.source(per_example)


def test_cuda_kernel_shares_buffers_it_can_and_copies_those_it_must():
    """Local arrays live in memory: the kernel names a buffer twice instead of copying it where neither
    name changes later, and still copies an adjoint that later contributions add to."""
    per_example = s2sad.vmap(s2sad.grad(per_example_loss, argnums=(0, 1)), in_axes=(None, None, 0, 0),
                             target="cuda")
    per_example(W, B, X, Y)
    assert s2sad.source(per_example).count("cuda.local.array(") == 1  # g * x, then straight out
    w, x = R.normal(size=5), R.normal(size=(4, 5))
    y = x * w
    got = s2sad.vmap(s2sad.grad(scaled_energy), in_axes=(None, 0), target="cuda")(w, x)
    assert_close(got, 2.0 * y * x + np.cos(y) * x, rtol=1e-12)
    assert_close(got[1], fd_grad(scaled_energy, (w, x[1]), 0))


@pytest.mark.parametrize("shape", [(33, 35), (1, 5), (5, 1), (0, 3)])
def test_cuda_relayout_keeps_every_value(shape):
    from numba import cuda

    from s2sad.runtime.cuda import _column_major

    a = R.normal(size=shape)
    device = cuda.to_device(a)
    out = _column_major(device)
    assert out.is_f_contiguous()
    assert np.array_equal(out.copy_to_host(), a) and np.array_equal(device.copy_to_host(), a)


def test_pytree_in_axes():
    params = {"w": R.normal(size=3), "b": 0.3}
    expected = np.array([tree_loss(params, X[i], Y[i]) for i in range(len(X))])
    assert_close(s2sad.vmap(tree_loss, in_axes=(None, 0, 0))(params, X, Y), expected, rtol=1e-12)
    assert_close(s2sad.vmap(tree_loss, in_axes=({"w": None, "b": None}, 0, 0))(params, X, Y), expected, rtol=1e-12)
    a, b = R.normal(size=(4, 3)), R.normal(size=3)
    assert_close(s2sad.vmap(pair_energy, in_axes=((0, None),))((a, b)), np.sum(np.sin(a) * b, axis=1), rtol=1e-12)
    grads = s2sad.vmap(s2sad.grad(tree_loss), in_axes=(None, 0, 0))(params, X, Y)
    assert set(grads) == {"w", "b"} and grads["w"].shape == (len(X), 3)
    for i in (0, 3):
        assert_close(grads["b"][i], fd_grad(lambda b: tree_loss({"w": params["w"], "b": b}, X[i], Y[i]), (0.3,), 0))
        assert_close(grads["w"][i], fd_grad(lambda w: tree_loss({"w": w, "b": 0.3}, X[i], Y[i]), (params["w"],), 0))
    with pytest.raises(ValueError, match=r"in_axes for argument 0 \(`params`\).*does not match"):
        s2sad.vmap(tree_loss, in_axes=((0, 1), 0, 0))(params, X, Y)

"""float32 in, float32 out: gradients keep their arguments' precision on both backends, computed in it."""

import numpy as np
import pytest
from numba.core import types

import s2sad
from s2sad.codegen.precision import single_precision, single_precision_module

R = np.random.default_rng(3)
X = R.normal(size=6)
W = R.normal(size=(4, 3))


def tanh_weighted(x):
    return np.sum(np.tanh(x) * x)


def rosenbrock_loop(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def layer(W, x):
    h = np.tanh(W @ x + 0.5)
    return np.mean(h ** 2) + 0.1 * np.max(h)


def axis_stats(m):
    return np.sum(np.mean(m, axis=0) ** 2) - np.sum(np.sum(m, axis=1)) * 0.25


def mixed(w, x):
    return np.sum(w * x) + 2.0 * np.sum(x * x)


FUNCTIONS = [(tanh_weighted, (X,)), (rosenbrock_loop, (X,)), (layer, (W, X[:3])), (axis_stats, (W,))]


def _fd(f, args, i, eps=1e-6):
    """Central differences of `f` in float64 with respect to argument i."""
    x = np.array(args[i], dtype=np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[k] += eps
        down[k] -= eps
        g[k] = (f(*args[:i], up, *args[i + 1:]) - f(*args[:i], down, *args[i + 1:])) / (2 * eps)
    return g


@pytest.mark.parametrize("f, args", FUNCTIONS, ids=[f.__name__ for f, _ in FUNCTIONS])
def test_float32_arguments_give_float32_gradients(f, args, backend):
    single = tuple(a.astype(np.float32) for a in args)
    argnums = tuple(range(len(args)))
    grads = s2sad.grad(f, argnums=argnums, backend=backend)(*single)
    for i, g in enumerate(grads):
        assert g.dtype == np.float32, f"gradient {i} is {g.dtype}"
        np.testing.assert_allclose(g, _fd(f, [np.float64(a) if np.ndim(a) == 0 else a for a in args], i),
                                   rtol=2e-3, atol=2e-3)


def test_float64_arguments_stay_float64(backend):
    g = s2sad.grad(layer, argnums=(0, 1), backend=backend)(W, X[:3])
    assert [a.dtype for a in g] == [np.float64, np.float64]
    np.testing.assert_allclose(g[0], _fd(layer, (W, X[:3]), 0), rtol=1e-6, atol=1e-8)


def test_each_gradient_has_its_arguments_precision(backend):
    w, x = X.astype(np.float32), X.copy()
    gw, gx = s2sad.grad(mixed, argnums=(0, 1), backend=backend)(w, x)
    assert (gw.dtype, gx.dtype) == (np.float32, np.float64)
    np.testing.assert_allclose(gx, w.astype(np.float64) + 4.0 * x, rtol=1e-6)
    np.testing.assert_allclose(gw, x, rtol=1e-6)


def test_vmap_of_grad_and_jvp_keep_float32(backend):
    batch = R.normal(size=(5, 4)).astype(np.float32)
    g = s2sad.vmap(s2sad.grad(tanh_weighted, backend=backend), backend=backend)(batch)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.tanh(batch) + batch * (1 - np.tanh(batch) ** 2), rtol=1e-5, atol=1e-6)
    x = X.astype(np.float32)
    _, t = s2sad.jvp(lambda v: np.tanh(v) * 2.0, (x,), (np.ones_like(x),), backend=backend)
    assert t.dtype == np.float32
    np.testing.assert_allclose(t, 2.0 * (1 - np.tanh(x) ** 2), rtol=1e-5)


def test_python_numbers_meeting_float32_values_are_written_float32():
    text = ("import numpy as np\nimport math\n\n\ndef helper(x):\n    return x * 2.0\n\n\n"
            "def f(x, n):\n    y = 1.0 - x * math.pi\n    z = np.full(n, 0.0) + np.array([1.0, -2.0])\n"
            "    return y * float(n) + z[0] + x ** 2\n")
    module = single_precision_module(text, "f", "home", (types.float32[:], types.int64))
    assert "np.float32(1.0) - x * np.float32(math.pi)" in module
    assert "np.full(n, 0.0) + np.array([1.0, -2.0])" in module  # NumPy gives these arrays float64
    assert "y * np.float32(float(n))" in module and "x ** 2\n" in module  # an exponent stays an integer
    assert "from home import helper" in module and "def helper" not in module
    assert single_precision_module("def f(x):\n    return x * 2\n", "f", "home", (types.float64[:],)) is None


def test_which_signatures_take_float32_constants():
    f32, f64 = types.float32[:], types.float64[:]
    assert single_precision((f32, types.int64, types.float64)) and single_precision((f32, f64))
    assert single_precision((types.float32,))
    assert not single_precision((f64,)) and not single_precision((f64, types.float64))


def test_python_numbers_follow_numpy_promotion_value_by_value():
    """NEP 50: Python numbers among themselves compute as Python numbers, a NumPy function of one is a float64
    that widens what it meets, a loop index or an accumulator meeting float32 values is float32."""
    text = ("import numpy as np\n\n\ndef f(x, lam, T, w):\n    s = 0.0\n    for i in range(x.shape[0]):\n"
            "        s += x[i] * i\n    r = np.sqrt(T) * x\n    q = lam * T * x + np.maximum(x, 0.5)\n"
            "    return s + np.sum(r) + np.sum(q) + np.sum(w * 0.5)\n")
    module = single_precision_module(text, "f", "home", (types.float32[:], types.float64, types.float64,
                                                         types.float64[:]))
    assert "s = np.float32(0.0)" in module and "s += x[i] * np.float32(i)" in module
    assert "r = np.sqrt(T) * x" in module  # float64, as in NumPy
    assert "q = np.float32(lam * T) * x + np.maximum(x, np.float32(0.5))" in module
    assert "np.sum(w * 0.5)" in module  # a float64 array keeps its Python float


def black_scholes_call(S, T, K, sigma, r):
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    return np.sum(S * np.tanh(d1) - K * np.exp(-r * T) * np.tanh(d2))


def test_a_numpy_function_of_a_python_float_widens_float32_as_in_numpy(backend):
    S = np.array([90.0, 100.0, 110.0], dtype=np.float32)
    value, g = s2sad.value_and_grad(black_scholes_call, backend=backend)(S, 0.5, 100.0, 0.2, 0.03)
    expected = black_scholes_call(S, 0.5, 100.0, 0.2, 0.03)
    assert np.asarray(value).dtype == np.asarray(expected).dtype == np.float64 and g.dtype == np.float32
    np.testing.assert_allclose(value, expected, rtol=1e-6)  # numba's log of S / K is within 2 float32 ulp
    exact = (np.float64(S), 0.5, 100.0, 0.2, 0.03)
    np.testing.assert_allclose(g, _fd(black_scholes_call, exact, 0), rtol=1e-5)


def wave(w, x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(w[i] * x[i]) * w[i] + 0.5 * x[i] ** 2
    return s


def test_cuda_kernels_compute_float32_in_float32():
    """On numba's CUDA simulator in CI, on a GPU where one is lent."""
    w, xs = X[:4].astype(np.float32), R.normal(size=(7, 4)).astype(np.float32)
    per_example = s2sad.vmap(s2sad.grad(wave, argnums=(0, 1)), in_axes=(None, 0), target="cuda")
    gw, gx = per_example(w, xs)
    assert (gw.dtype, gx.dtype) == (np.float32, np.float32)
    for i in (0, 6):
        np.testing.assert_allclose(gx[i], _fd(wave, (w.astype(np.float64), xs[i].astype(np.float64)), 1), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(gw[i], _fd(wave, (w.astype(np.float64), xs[i].astype(np.float64)), 0), rtol=1e-3, atol=1e-4)
    text = s2sad.source(per_example)
    assert "np.float64" not in text.split("@cuda.jit")[-1] and "np.float32(0.5)" in text
    g64 = per_example(w.astype(np.float64), xs.astype(np.float64))  # float64 arguments: a kernel of their own
    assert g64[0].dtype == np.float64
    np.testing.assert_allclose(g64[1], gx, rtol=1e-4, atol=1e-5)


def ridge(w, lam):
    return np.sum((np.tanh(w) - 0.5) ** 2) + lam * np.sum(w * w)


def test_python_floats_beside_float32_arrays_are_weak(backend):
    """NumPy keeps `lam * w` float32 for a Python float `lam`; compiled code takes `lam` as float32 too."""
    w = X.astype(np.float32)
    value, g = s2sad.value_and_grad(ridge, backend=backend)(w, 0.25)
    assert g.dtype == np.float32
    np.testing.assert_allclose(value, ridge(X, 0.25), rtol=1e-5)
    np.testing.assert_allclose(g, _fd(ridge, (X, 0.25), 0), rtol=2e-3, atol=2e-3)
    gl = s2sad.grad(ridge, argnums=1, backend=backend)(w, 0.25)
    np.testing.assert_allclose(gl, np.sum(X * X), rtol=1e-5)


def test_python_float_parameters_made_float32_are_converted_on_entry():
    text = "import numpy as np\n\n\ndef f(x, lam):\n    for i in range(3):\n        lam = lam * x[i]\n    return lam\n"
    module = single_precision_module(text, "f", "home", (types.float32[:], types.float64))
    assert "def f(x, lam_float64):\n    lam = np.float32(lam_float64)\n" in module


def log_sum_exp(x):
    return np.log(np.sum(np.exp(x))) + 0.5 * np.sum(x * x)


def test_hessians_and_jacobians_of_float32_are_float32(backend):
    x = X[:4]
    h = s2sad.hessian(log_sum_exp, backend=backend)(x.astype(np.float32))
    p = np.exp(x) / np.sum(np.exp(x))
    assert h.dtype == np.float32
    np.testing.assert_allclose(h, np.diag(p) - np.outer(p, p) + np.eye(4), rtol=1e-5, atol=1e-6)
    jf = s2sad.jacfwd(np.tanh, backend=backend)(x.astype(np.float32))
    jr = s2sad.jacrev(np.tanh, backend=backend)(x.astype(np.float32))
    assert jf.dtype == jr.dtype == np.float32
    np.testing.assert_allclose(jf, np.diag(1 - np.tanh(x) ** 2), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(jr, jf, rtol=1e-6)


def test_integers_beside_float_variables_become_float32():
    text = "import numpy as np\n\n\ndef f(g, x, i):\n    a = g * 2 * x\n    b = x[i + 1] ** 2\n    return a + b / 3\n"
    module = single_precision_module(text, "f", "home", (types.float32, types.float32[:], types.int64))
    assert "a = g * np.float32(2) * x" in module and "x[i + 1] ** 2" in module and "b / np.float32(3)" in module


def scaled_wave(w, c, x):
    return c * wave(w, x)


def test_cuda_device_arrays_beside_a_numpy_float32_scalar():
    from numba import cuda

    w, xs = X[:4].astype(np.float32), R.normal(size=(5, 4)).astype(np.float32)
    per_example = s2sad.vmap(s2sad.grad(scaled_wave), in_axes=(None, None, 0), target="cuda")
    on_device = per_example(cuda.to_device(w), np.float32(0.5), cuda.to_device(xs)).copy_to_host()
    assert on_device.dtype == np.float32
    np.testing.assert_allclose(on_device, per_example(w, np.float32(0.5), xs), rtol=1e-6)


def scaled_tanh(x, a):
    return np.sum(np.tanh(x) * x) * a


def test_float32_scalars_come_back_as_numpy_float32(backend):
    """numba returns a float32 scalar as a Python float; s2sad gives NumPy's np.float32, on the first call (the
    general path) and on later ones (the entry written for the call's structure)."""
    x, a = X.astype(np.float32), np.float32(1.5)
    expected = scaled_tanh(x, a)
    assert type(expected) is np.float32
    vg = s2sad.value_and_grad(scaled_tanh, argnums=(0, 1), backend=backend)
    for _ in range(3):
        value, (gx, ga) = vg(x, a)
        assert (type(value), gx.dtype, type(ga)) == (np.float32, np.float32, np.float32)
        np.testing.assert_allclose(value, expected, rtol=1e-6)
        np.testing.assert_allclose(ga, _fd(scaled_tanh, (X, 1.5), 1), rtol=1e-5)
        np.testing.assert_allclose(gx, _fd(scaled_tanh, (X, 1.5), 0), rtol=2e-3, atol=2e-3)
    value, (gx, ga) = vg(X, 1.5)  # a float64 call beside it keeps float64
    assert gx.dtype == np.float64 and np.asarray(value).dtype == np.float64 and np.asarray(ga).dtype == np.float64
    square = s2sad.grad(lambda s: s * s * 3.0, backend=backend)
    for _ in range(2):
        g = square(np.float32(2.0))
        assert type(g) is np.float32 and g == np.float32(12.0)
    out, tangent = s2sad.jvp(scaled_tanh, (x, a), (np.ones_like(x), np.float32(0.0)), backend=backend)
    assert (type(out), type(tangent)) == (np.float32, np.float32)
    np.testing.assert_allclose(tangent, a * np.sum(_fd(tanh_weighted, (X,), 0)), rtol=2e-3)


def ridge_solve(A, b, lam):
    """np.eye is float64: NumPy solves this float32 system in float64, where numba's solve refuses mixed dtypes."""
    n = A.shape[1]
    x = np.linalg.solve(A.T @ A + lam * np.eye(n), A.T @ b)
    r = A @ x - b
    return r @ r + lam * (x @ x)


def test_products_and_solves_of_two_dtypes_promote_as_numpy_does(backend):
    A64, b64 = R.normal(size=(6, 3)), R.normal(size=6)
    A, b = A64.astype(np.float32), b64.astype(np.float32)
    value, (gA, gb) = s2sad.value_and_grad(ridge_solve, argnums=(0, 1), backend=backend)(A, b, 0.3)
    assert np.asarray(value).dtype == np.asarray(ridge_solve(A, b, 0.3)).dtype == np.float64
    assert (gA.dtype, gb.dtype) == (np.float32, np.float32)
    np.testing.assert_allclose(value, ridge_solve(A, b, 0.3), rtol=1e-12)
    exact = [np.float64(A), np.float64(b), 0.3]  # the float32 values, differentiated in float64
    np.testing.assert_allclose(gA, _fd(ridge_solve, exact, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, _fd(ridge_solve, exact, 1), rtol=1e-4, atol=1e-4)
    g = s2sad.grad(lambda x, M: np.sum(np.tanh(x @ M)), backend=backend)(X[:4].astype(np.float32), W)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, _fd(lambda x, M: np.sum(np.tanh(x @ M)), (X[:4], W), 0), rtol=1e-4, atol=1e-5)


def cast_then_tanh(x):
    h = (x * 2.0).astype(np.float32)
    return np.sum(np.tanh(h)) + np.float32(0.5) * np.sum(x)


def test_astype_float32_is_a_differentiable_copy(backend):
    """`.astype(np.float32)` rounds, and passes the gradient back in the precision of what it copied."""
    for x in (X[:5], X[:5].astype(np.float32)):
        value, g = s2sad.value_and_grad(cast_then_tanh, backend=backend)(x)
        assert np.asarray(value).dtype == np.asarray(cast_then_tanh(x)).dtype and g.dtype == x.dtype
        np.testing.assert_allclose(value, cast_then_tanh(x), rtol=1e-6)
        np.testing.assert_allclose(g, 2.0 * (1.0 - np.tanh(2.0 * X[:5]) ** 2) + 0.5, rtol=1e-5)


def smooth_in_float64_buffers(x):
    """`u` is float32, then a float64 buffer: NumPy changes its dtype, numba needs one (float64 here)."""
    n = x.shape[0]
    u = x.copy()
    for _ in range(2):
        out = np.zeros(n)
        for i in range(1, n):
            out[i] = np.tanh(u[i] + 0.5 * u[i - 1])
        u = out
    return np.sum(u * u)


def test_a_variable_rebound_from_float32_to_float64_compiles_as_numpy_computes_it(backend):
    x = X.astype(np.float32)
    value, g = s2sad.value_and_grad(smooth_in_float64_buffers, backend=backend)(x)
    expected = smooth_in_float64_buffers(x)
    assert np.asarray(value).dtype == np.asarray(expected).dtype == np.float64 and g.dtype == np.float32
    # under numba `u` is float64 from the start: its first pass rounds as float64, NumPy's as float32
    np.testing.assert_allclose(value, expected, rtol=1e-12 if backend == "python" else 1e-6)
    np.testing.assert_allclose(g, _fd(smooth_in_float64_buffers, (np.float64(x),), 0), rtol=1e-5, atol=1e-6)


def float_power_sum(x):
    return np.sum(np.float_power(x, 2.5) - x)


def test_float_power_computes_in_float64_as_numpy_does(backend):
    x = np.linspace(0.5, 2.0, 4, dtype=np.float32)
    value, g = s2sad.value_and_grad(float_power_sum, backend=backend)(x)
    assert np.asarray(value).dtype == np.asarray(float_power_sum(x)).dtype == np.float64 and g.dtype == np.float32
    np.testing.assert_allclose(value, float_power_sum(x), rtol=1e-12)
    np.testing.assert_allclose(g, 2.5 * np.float64(x) ** 1.5 - 1.0, rtol=1e-6)


def gathered_squares(x, idx):
    return np.sum(x[idx] ** 2)


def test_a_gather_scatters_its_float32_gradient_in_float32(backend):
    """The adjoint adds into x_bar at integer indices: the index array says nothing of the precision."""
    x, idx = X.astype(np.float32), np.array([0, 2, 2, 5])
    g = s2sad.grad(gathered_squares, backend=backend)(x, idx)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [2 * x[0], 0, 4 * x[2], 0, 0, 2 * x[5]], rtol=1e-6)


def floor_binned(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.floor_divide(x[i], 0.01) * x[i]
    return s


def test_floor_divide_of_floats_keeps_their_precision(backend):
    """np.floor_divide of float32 values is float32, as `//` is: the weak 0.01 meets x[i] in float32, and
    float32(0.01) // 0.01 is 1 where the float64 quotient of the same bits floors to 0."""
    x = np.array([0.01, 0.5, 22.23], dtype=np.float32)
    value, g = s2sad.value_and_grad(floor_binned, backend=backend)(x)
    expected = floor_binned(x)
    assert np.asarray(value).dtype == np.asarray(expected).dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_array_equal(g, np.floor_divide(x, 0.01))
    np.testing.assert_allclose(value, expected, rtol=1e-6)

"""Runs of elementwise lines as one loop (codegen/chains.py, runtime/chains.py): which lines the
compiled text hands to `chain`, that the loop gives what the lines give as written (NumPy), when it
falls back to them, and gradients through it against finite differences."""

import ast
import copy

import numba
import numpy as np
import pytest
from numba import types

import s2sad
from s2sad import backend
from s2sad.codegen.compiled import compiled_text
from s2sad.codegen.chains import fused_chains, typed_module
from s2sad.runtime.chains import _Plan, chain
from s2sad.runtime.reductions import sum_expand_view

pytestmark = pytest.mark.slow


def _module(*body: str, params: str = "x, y, b") -> str:
    return f"import numpy as np\n\n\ndef f({params}):\n" + "".join(f"    {line}\n" for line in body)


def _calls(source: str) -> list[str]:
    return [line.strip() for line in fused_chains(source).split("\n") if "chain(" in line]


def _program(line: str) -> str:
    return ast.literal_eval(ast.parse(line.split("= ", 1)[-1]).body[0].value.args[0])


# ---------------------------------------------------------------- the rewritten text

def test_a_run_becomes_one_call_line_for_line():
    source = _module("a = x * y + b", "c = a - 1.0", "d = c * c", "e = unbroadcast(d, b)", "return c, e")
    out = fused_chains(source).split("\n")
    assert len(out) == len(source.split("\n"))
    assert out[0] == "import numpy as np; from s2sad.runtime.chains import chain"
    assert out[4].startswith("    c, e, = chain('def _(x, y, b):")
    assert out[4].endswith("', x, y, b)")
    assert out[5:8] == ["    pass"] * 3
    assert out[8] == "    return c, e"
    assert _program(out[4]).splitlines()[-1] == "    return (c, e, )"


def test_the_run_returns_only_what_later_lines_read_and_takes_what_it_reads_first():
    (line,) = _calls(_module("b += unbroadcast(x * y, b)", "t = b * 2.0", "s = t + y", "return s"))
    program = _program(line)
    assert program.startswith("def _(x, y, b):")
    assert program.splitlines()[-1] == "    return (s, )"


def test_a_second_math_call_starts_a_new_run():
    source = _module("a = np.exp(x)", "c = a * y", "f = c + b", "d = np.log(c)", "e = d + y", "g = e * f",
                     "return g")
    assert [_program(c).splitlines()[1:-1] for c in _calls(source)] == [
        ["    a = np.exp(x)", "    c = a * y", "    f = c + b"], ["    d = np.log(c)", "    e = d + y", "    g = e * f"]]
    cheap = _module("a = np.sqrt(x)", "c = np.abs(a) * y", "d = c + b", "return d")
    assert len(_calls(cheap)) == 1  # arithmetic, not calls


def test_short_runs_and_runs_without_signs_of_arrays_stay():
    assert _calls(_module("a = x * y", "c = unbroadcast(a, b)", "return c")) == []  # two lines: one pass saved at most
    assert _calls(_module("a = x * y", "c = a + b", "d = c * c", "return d")) == []  # plain arithmetic: maybe scalars


@pytest.mark.parametrize("breaker", [
    "z = x @ y", "z = x[0]", "z = x > y", "z = f2(x)", "z = np.maximum(x, y)", "z += unbroadcast(x, y)",
    "z = x // y", "z = 'a' * 2",
])
def test_other_lines_end_a_run(breaker):
    source = _module("a = x * y", breaker, "c = a + 1.0", "d = np.exp(c)", "return d")
    assert _calls(source) == []


def test_lines_in_loops_stay_and_aliases_do_not_count():
    loop = _module("for i in range(3):", "    a = x * y", "    c = a + 1.0", "    d = np.exp(c)", "return d")
    assert fused_chains(loop) == loop
    aliases = _module("a = x * y", "c = a", "d = np.exp(c)", "e = d", "return e")
    assert fused_chains(aliases) == aliases


# ---------------------------------------------------------------- the loop against the lines as written

def _compiled(program: str):
    """A numba function calling `chain` with `program` as a literal, as generated code does."""
    params = ", ".join(a.arg for a in ast.parse(program).body[0].args.args)
    namespace = {"chain": chain}
    exec(f"def run({params}):\n    return chain({program!r}, {params})\n", namespace)
    return numba.njit(namespace["run"])


def _inline(program: str, *operands):
    """`program`'s results from the function the backend compiles for the operands' types, its run
    written out where it stands (codegen.chains.typed_module); None where the run does not fuse."""
    fn = ast.parse(program).body[0]
    params = [a.arg for a in fn.args.args]
    text = "\n".join(["import numpy as np", "from s2sad.runtime.vmath import vexp, vlog, vlog1p, vtanh", "", "",
                      f"def run({', '.join(params)}):", *["    " + ast.unparse(s) for s in fn.body]])
    argtypes = dict(zip(params, map(numba.typeof, operands)))
    module = typed_module(text, "run", argtypes.get, "unused")
    if module is None:
        return None
    namespace = {}
    exec(module, namespace)
    return numba.njit(error_model="numpy")(namespace["run"])(*operands)


def _shared(operands) -> bool:
    arrays = [o for o in operands if isinstance(o, np.ndarray)]
    return any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def _run(program: str, *operands):
    """(the compiled chain's results, the lines' results run as written by NumPy); the function
    compiled for the operands' types, where its run fuses, must give the compiled chain's."""
    inline = None if _shared(operands) else _inline(program, *copy.deepcopy(operands))
    got, want = _compiled(program)(*operands), chain(program, *operands)
    if inline is not None:
        _same(inline, got)
    return got, want


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


FORWARD = '''def _(m, b, y):
    t = vtanh(0.5 * (m + b))
    p = 0.5 * (t + 1.0)
    s = 1.0 - y
    q = p * y + (1.0 - p) * s
    return (t, p, s, q, )
'''

BACKWARD = '''def _(g, q, s, p, y, t, b_bar, m):
    q_bar = g / q
    u = q_bar
    p_bar = unbroadcast(-u * s, p)
    p_bar += unbroadcast(q_bar * y, p_bar)
    a_bar = p_bar * 0.5 * (1.0 - t * t) * 0.5
    b_bar += unbroadcast(a_bar, b_bar)
    m_g = unbroadcast(a_bar, m)
    return (b_bar, m_g, u, q_bar, )
'''


@pytest.mark.parametrize("shape", [(1000,), (30, 7), (2, 3, 4)])
def test_the_loop_gives_the_lines_results(shape):
    rng = np.random.default_rng(0)
    m, y = rng.normal(size=shape), (rng.uniform(size=shape) < 0.5) * 1.0
    got, want = _run(FORWARD, m, 0.3, y)
    _same(got, want)
    t, p, s, q = want
    got, want = _run(BACKWARD, rng.normal(size=shape), q, s, p, y, t, 0.25, m)
    _same(got, want)
    assert np.shares_memory(got[2], got[3])  # an alias stays one array


def test_the_loop_is_chosen_by_types():
    fn = ast.parse(BACKWARD).body[0]
    vec, mat = types.float64[::1], types.float64[:, ::1]
    assert _Plan(fn, (vec,) * 6 + (types.float64, vec)).fusable
    assert not _Plan(fn, (vec,) * 5 + (mat, types.float64, vec)).fusable  # ranks differ
    assert not _Plan(fn, (types.int64[::1],) + (vec,) * 5 + (types.float64, vec)).fusable  # not float64
    assert not _Plan(fn, (types.float64,) * 8).fusable  # no arrays


def test_a_stride_0_view_is_read_as_one_value_and_a_strided_array_runs_as_written():
    rng = np.random.default_rng(1)
    q, s, p, y, t, m = (rng.uniform(0.5, 1.5, size=500) for _ in range(6))
    view = numba.njit(lambda g, like: sum_expand_view(g, like, None, False))(-1.0, m)
    _same(*_run(BACKWARD, view, q, s, p, y, t, 0.0, m))
    strided = rng.normal(size=1000)[::2]
    _same(*_run(BACKWARD, strided, q, s, p, y, t, 0.0, m))


SOFTMAX_BAR = '''def _(g_rows, p, x_bar, m_bar):
    s_bar = g_rows * p
    x_bar += unbroadcast(s_bar, x_bar)
    m_bar -= unbroadcast(s_bar, m_bar)
    return (x_bar, m_bar, )
'''


@pytest.mark.parametrize("shape", [(40, 5), (7, 33), (3, 4, 6), (1, 9), (9, 1)])
def test_a_view_holding_one_value_per_row_runs_by_rows(shape):
    """A logsumexp's adjoint: `g[:, None] * p` reads g as a stride-0 view along the last axis."""
    fn = ast.parse(SOFTMAX_BAR).body[0]
    nd = len(shape)
    c, view = types.Array(types.float64, nd, "C"), types.Array(types.float64, nd, "A", readonly=True)
    assert "for _c_r0 in range" in _Plan(fn, (view, c, c, c)).source()
    assert "for _c_r0 in range" not in _Plan(fn, (c, c, c, c)).source()  # no view: one flat loop
    rng = np.random.default_rng(11)
    g = rng.normal(size=shape[:-1])
    p, x_bar = rng.uniform(size=shape), rng.normal(size=shape)
    m_bar = rng.normal(size=shape[:-1] + (1,))
    rows = numba.njit(lambda g, like: sum_expand_view(g, like, nd - 1, False))(g, p)
    assert rows.strides[-1] == 0 or shape[-1] == 1
    want_x, want_m = x_bar + g[..., None] * p, m_bar - (g[..., None] * p).sum(axis=-1, keepdims=True)
    got_x, got_m = _compiled(SOFTMAX_BAR)(rows, p, x_bar, m_bar)
    np.testing.assert_allclose(x_bar, want_x, rtol=1e-14)  # in place
    np.testing.assert_allclose(m_bar, want_m, rtol=1e-13, atol=1e-13)
    assert got_x is x_bar or np.shares_memory(got_x, x_bar)


@pytest.mark.parametrize("by_rows", [False, True])
def test_operands_named_like_the_loops_own_variables_keep_their_values(by_rows):
    """A scalar `i` or an array `size` from the user's code is an operand like any other."""
    program = '''def _(g, size, i, j, base, inner):
    t = g * size * i
    u = t + j * base
    inner += unbroadcast(u * size, inner)
    return (inner, t, )
'''
    rng = np.random.default_rng(13)
    size, base = rng.normal(size=(5, 6)), 0.5
    g = numba.njit(lambda g, like: sum_expand_view(g, like, 1, False))(rng.normal(size=5), size) if by_rows \
        else rng.normal(size=(5, 6))
    inner = rng.normal(size=(5, 6))
    want_t = g * size * 3.0
    want_inner = inner + (want_t + 2.0 * base) * size
    got_inner, got_t = _compiled(program)(g, size, 3.0, 2.0, base, inner)
    np.testing.assert_allclose(got_t, want_t, rtol=1e-14)
    np.testing.assert_allclose(inner, want_inner, rtol=1e-14)


def test_a_view_varying_along_the_last_axis_runs_as_written():
    rng = np.random.default_rng(12)
    p, x_bar, m_bar = rng.uniform(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 1))
    columns = np.broadcast_to(rng.normal(size=(1, 4)), (6, 4))  # strides (0, 8): one value per column
    want_x, want_m = x_bar + columns * p, m_bar - (columns * p).sum(axis=1, keepdims=True)
    _compiled(SOFTMAX_BAR)(columns, p, x_bar, m_bar)
    np.testing.assert_allclose(x_bar, want_x, rtol=1e-14)
    np.testing.assert_allclose(m_bar, want_m, rtol=1e-13)


def test_arrays_of_other_shapes_run_as_written():
    rng = np.random.default_rng(2)
    m, y = rng.normal(size=(4, 5)), rng.normal(size=(1, 5))
    _same(*_run(FORWARD, m, 0.1, y))


def test_empty_arrays():
    _same(*_run(FORWARD, np.zeros(0), 0.1, np.zeros(0)))


ADD_INTO = '''def _(acc, x, y):
    acc += unbroadcast(x * y, acc)
    z = acc * 2.0
    return (z, )
'''


def test_adding_into_an_operand_writes_it_in_place():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=100), rng.normal(size=100)
    acc = rng.normal(size=100)
    acc2 = acc.copy()
    compiled = _compiled(ADD_INTO)
    (z,) = compiled(acc, x, y)
    np.testing.assert_allclose(acc, acc2 + x * y, rtol=1e-15)
    np.testing.assert_allclose(z, 2.0 * acc, rtol=1e-15)


def test_an_operand_written_in_place_that_shares_memory_runs_as_written():
    program = '''def _(acc, x, y):
    acc += unbroadcast(x * y, acc)
    z = x * 2.0
    return (z, )
'''
    rng = np.random.default_rng(4)
    y = rng.normal(size=100)
    acc = rng.normal(size=100)
    want = 2.0 * (acc + acc * y)  # x is acc: as written, z reads what += wrote
    (z,) = _compiled(program)(acc, acc, y)
    np.testing.assert_allclose(z, want, rtol=1e-15)


def test_an_operand_written_in_place_then_rebound_keeps_what_was_written():
    program = '''def _(acc, x, y):
    acc += unbroadcast(x * y, acc)
    acc = acc * 2.0 + x
    z = acc - y
    return (z, )
'''
    rng = np.random.default_rng(6)
    acc, x, y = (rng.normal(size=50) for _ in range(3))
    written = acc + x * y
    (z,) = _compiled(program)(acc, x, y)
    np.testing.assert_allclose(acc, written, rtol=1e-15)  # the caller's array holds the += ...
    np.testing.assert_allclose(z, 2.0 * written + x - y, rtol=1e-14)  # ... and the rebound name the rest


SINK = '''def _(g, e, acc, bias_bar):
    d = g * e
    acc += unbroadcast(d, acc)
    bias_bar -= unbroadcast(d * 2.0, bias_bar)
    bias_bar += unbroadcast(e, bias_bar)
    return (acc, bias_bar, )
'''


@pytest.mark.parametrize("sink_shape", [(30, 1), (1, 7), (7,), (30, 7), (1,)])
def test_an_operand_only_summed_into_may_be_narrower_than_the_loop(sink_shape):
    """A bias's adjoint, (30, 1) under (30, 7) arrays: summed down after the loop, in the caller's array."""
    fn = ast.parse(SINK).body[0]
    mat = types.float64[:, ::1]
    sink_type = types.Array(types.float64, len(sink_shape), "C")
    assert _Plan(fn, (mat, mat, mat, sink_type)).fusable
    rng = np.random.default_rng(7)
    g, e, acc = (rng.normal(size=(30, 7)) for _ in range(3))
    bias_bar = rng.normal(size=sink_shape)
    want_acc, want_bias = acc + g * e, bias_bar.copy()
    want_bias -= unbroadcast_np(2.0 * g * e - e, sink_shape)
    got_acc, got_bias = _compiled(SINK)(g, e, acc, bias_bar)
    np.testing.assert_allclose(acc, want_acc, rtol=1e-14)
    np.testing.assert_allclose(bias_bar, want_bias, rtol=1e-12, atol=1e-12)  # written in place
    assert got_bias is bias_bar or np.shares_memory(got_bias, bias_bar)


def unbroadcast_np(value, shape):
    lead = value.ndim - len(shape)
    summed = value.sum(axis=tuple(range(lead))) if lead else value
    return summed.sum(axis=tuple(k for k, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)


def test_a_sink_that_does_not_fit_raises_as_written_and_a_repeated_value_stays_as_written():
    rng = np.random.default_rng(8)
    g, e, acc = (rng.normal(size=(30, 7)) for _ in range(3))
    with pytest.raises(ValueError, match="unbroadcast"):
        _compiled(SINK)(g, e, acc, np.zeros((3, 1)))
    repeated = '''def _(x, y, s, b_bar):
    z = x * y
    w = z + x
    s += unbroadcast(w, s)
    b_bar += unbroadcast(2.0, b_bar)
    return (s, b_bar, )
'''
    mat = types.float64[:, ::1]
    assert not _Plan(ast.parse(repeated).body[0], (mat, mat, mat, types.float64[:, ::1])).fusable
    b_bar = np.zeros((30, 1))
    _compiled(repeated)(g, e, acc, b_bar)
    np.testing.assert_allclose(b_bar, np.full((30, 1), 2.0))  # as written: 2.0 once (a loop would add it 7 times)


def test_subtracting_lines_join_a_run():
    source = _module("a = x * y", "b -= unbroadcast(a, b)", "c = a * 2.0", "d = np.exp(c)", "return b, d")
    (line,) = _calls(source)
    assert "    b -= unbroadcast(a, b)" in _program(line).splitlines()


def test_a_line_reading_a_sum_of_the_run_runs_as_written():
    program = '''def _(x, s):
    s += unbroadcast(x * x, s)
    y = x * s
    return (y, s, )
'''
    assert not _Plan(ast.parse(program).body[0], (types.float64[::1], types.float64)).fusable
    x = np.arange(5.0)
    _same(*_run(program, x, 1.0))


def test_scalars_only_and_integer_scalars():
    program = '''def _(n, x):
    k = n * 2
    y = x * k + n
    return (k, y, )
'''
    got, want = _run(program, 3, np.arange(4.0))
    assert got[0] == 6 and isinstance(got[0], int)
    _same(got, want)


# ---------------------------------------------------------------- gradients through it

def test_a_logistic_regression_gradient_runs_through_chains_and_matches_finite_differences():
    def loss(w, b, X, y):
        p = 0.5 * (np.tanh(0.5 * (X @ w + b)) + 1.0)
        return -np.sum(np.log(p * y + (1.0 - p) * (1.0 - y)))

    rng = np.random.default_rng(5)
    w, b, X = 0.3 * rng.normal(size=4), 0.1, rng.normal(size=(60, 4))
    y = (rng.uniform(size=60) < 0.5) * 1.0
    g = s2sad.grad(loss, argnums=(0, 1))
    gw, gb = g(w, b, X, y)
    assert compiled_text(g.__s2sad_transform__.generated.source).count("chain(") >= 2
    h = 1e-6
    fd = [(loss(w + h * e, b, X, y) - loss(w - h * e, b, X, y)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(gw, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, (loss(w, b + h, X, y) - loss(w, b - h, X, y)) / (2 * h), rtol=1e-6)


# ---------------------------------------------------------------- written out for one signature

def _as_module(program: str) -> str:
    fn = ast.parse(program).body[0]
    return "\n".join(["import numpy as np", "from s2sad.runtime.vmath import vtanh", "", "",
                      f"def run({', '.join(a.arg for a in fn.args.args)}):",
                      *["    " + ast.unparse(s) for s in fn.body]])


def test_the_function_compiled_for_one_signature_writes_its_runs_out_as_loops():
    vec = types.float64[::1]
    argtypes = {"m": vec, "b": types.float64, "y": vec}
    module = typed_module(_as_module(FORWARD), "run", argtypes.get, "home")
    assert "chain(" not in module and "for _c0_i in range(_c0_size):" in module
    assert "if m.size > 0 and y.shape == m.shape:" in module  # other shapes: the lines as written, after `else:`
    assert module.rstrip().endswith("return (t, p, s, q)")
    assert typed_module(_as_module(FORWARD), "run", {"m": types.int64[::1], "b": types.float64, "y": vec}.get,
                        "home") is None  # not float64: nothing fuses
    assert typed_module(_as_module(FORWARD), "run", {"m": vec, "y": vec}.get, "home") is None  # a type unknown
    two = _as_module(FORWARD).replace("def run(m, b, y):", "def helper(m):\n    return m\n\n\ndef run(m, b, y):")
    assert "from home import helper" in typed_module(two, "run", argtypes.get, "home")


def test_gradients_through_loops_written_for_the_signature_and_through_the_lines_as_written():
    def loss(w, b, x):
        z = np.tanh(w * x + b)
        return np.sum(z * z * x - b * z)

    rng = np.random.default_rng(2)
    g = s2sad.grad(loss, argnums=(0, 1))
    for w, b, x in [(rng.normal(size=9), rng.normal(size=9), rng.normal(size=9)),  # one shape: the loops
                    (rng.normal(size=9), rng.normal(size=1), rng.normal(size=9)),  # broadcast: as written
                    (rng.normal(size=(3, 4)), 0.4 * np.ones((1, 4)), rng.normal(size=(3, 4)))]:
        for i, got in enumerate(g(w, b, x)):
            args = [w, b, x]

            def along(e, i=i, args=args):
                return [a + e if k == i else a for k, a in enumerate(args)]
            h, fd = 1e-6, np.zeros_like(args[i])
            for k in np.ndindex(fd.shape):
                e = np.zeros_like(args[i])
                e[k] = h
                fd[k] = (loss(*along(e)) - loss(*along(-e))) / (2 * h)
            np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    texts = [m.__s2sad_numba_text__ for (name, _), m in backend._LOADED.items() if "_loss_grad_" in name]
    assert any("for _c0_i in range(_c0_size):" in text for text in texts)


def test_the_loops_names_stay_apart_from_the_functions_own():
    vec = types.float64[::1]
    clash = FORWARD.replace("def _(m, b, y):", "def _(m, b, _c0_size):").replace("y", "_c0_size")
    module = typed_module(_as_module(clash), "run", {"m": vec, "b": types.float64, "_c0_size": vec}.get, "home")
    assert "for _c0__i in range(_c0__size):" in module
    m, size = np.linspace(-1.0, 1.0, 6), np.linspace(0.0, 1.0, 6)
    namespace = {}
    exec(module, namespace)
    got = numba.njit(namespace["run"])(m, 0.3, size)
    t = np.tanh(0.5 * (m + 0.3))
    p = 0.5 * (t + 1.0)
    _same(got, (t, p, 1.0 - size, p * size + (1.0 - p) * (1.0 - size)))

"""The generated gradient does no work it need not, and stays right:
- `grad` skips primal work only the value needed (prune.py), yet still refuses non-scalar outputs;
- loop temporaries whose operands change later in the iteration are recomputed, not taped, except
  libm calls (sin, exp, ...), whose values are popped, and which the rules' own calls then reuse;
- a loop rebinding an undifferentiated parameter skips that parameter's adjoint in its first iteration.
Each derivative is checked against central differences."""

import numpy as np
import pytest

import s2sad
from s2sad.codegen.compiled import compiled_text, native_tapes
from helpers import RTOL_FD, assert_close, fd_grad


def chain(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def euler(theta, u0, dt, steps):
    u = u0
    for _ in range(steps):
        k1 = theta[0] * u - theta[1] * u * u
        k2 = theta[0] * (u + dt * k1) - theta[1] * (u + dt * k1) ** 2
        u = u + 0.5 * dt * (k1 + k2)
    return u * u


def layers(Ws, x):
    for W in Ws:
        x = np.tanh(W @ x)
    return np.sum(x ** 2)


def with_aux(x):
    total = 0.0
    for i in range(x.shape[0]):
        total += np.sin(x[i])
    return total, x.shape[0] * 2.0


def vector_out(x):
    return np.sin(x)


def test_grad_computes_no_primal_work_the_adjoint_does_not_read(backend):
    text = s2sad.source(chain)
    primal_sweep = text[text.index("def chain_grad"):text.index("# adjoint sweep")]
    assert "    for i in range" not in primal_sweep  # the loop only summed the (unused) value
    x = np.linspace(-1.2, 1.3, 7)
    assert_close(s2sad.grad(chain, backend=backend)(x), fd_grad(chain, (x,), 0), rtol=RTOL_FD)


def test_grad_still_refuses_a_vector_output(backend):
    g = s2sad.grad(vector_out, backend=backend)
    for _ in range(2):  # also once the signature is compiled
        with pytest.raises(TypeError, match="scalar output"):
            g(np.array([0.1, 0.2]))
    assert g(np.float64(0.3)) == pytest.approx(np.cos(0.3))


def test_grad_with_aux_keeps_the_aux(backend):
    x = np.array([0.2, -0.4, 0.9])
    g, aux = s2sad.grad(with_aux, has_aux=True, backend=backend)(x)
    assert aux == 6.0
    assert_close(g, np.cos(x), rtol=1e-12)


def test_loop_temporaries_are_recomputed_not_taped(backend):
    text = s2sad.source(euler)
    assert text.count("List()") == 1  # u's tape only: k1, k2 and friends are recomputed backwards
    theta = np.array([1.1, 0.4])
    args = (theta, 0.7, 0.01, 50)
    assert_close(s2sad.grad(euler, backend=backend)(*args), fd_grad(euler, args, 0), rtol=RTOL_FD)
    s2sad.check_grads(euler, args, modes=("rev",), backend=backend)


def code(text: str) -> str:
    """Generated text without its docstring (which names the user's file) and comments (which quote the
    user's lines)."""
    body = text.split('"""', 2)[2] if text.startswith('"""') else text
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))


def kepler(M, e):
    s = 0.0
    for i in range(M.shape[0]):
        E = M[i]
        step = 1.0
        while abs(step) > 1e-12:
            step = (E - e * np.sin(E) - M[i]) / (1.0 - e * np.cos(E))
            E = E - step
        s += np.sin(E)
    return s


def test_libm_values_are_popped_and_reused_by_the_rules(backend):
    """sin(E) and cos(E) are pushed once per Newton step; the adjoint sweep calls neither: the rule
    for sin reads the popped cos(E), and cos's rule the popped sin(E)."""
    text = s2sad.source(kepler, argnums=(0, 1))
    newton_adjoint = text[text.index("(reversed)", text.index("# adjoint sweep")):]
    newton_adjoint = code(newton_adjoint[newton_adjoint.index("for _ in range"):newton_adjoint.index("# step = 1.0")])
    assert "sin2 = sin2_tape.pop()" in newton_adjoint and "cos2 = cos2_tape.pop()" in newton_adjoint
    assert "np.sin(" not in newton_adjoint and "np.cos(" not in newton_adjoint
    # E is read backwards only after its while loop: pushed once per solve, after the loop
    primal_sweep = code(text[text.index("def kepler_grad"):text.index("# adjoint sweep")])
    assert primal_sweep.count("E_tape.append(E)") == 1
    assert "\n        iterations_tape.append(iterations)\n        E_tape.append(E)\n" in primal_sweep
    M, e = np.array([0.3, 1.7, 4.0]), 0.4
    gM, ge = s2sad.grad(kepler, argnums=(0, 1), backend=backend)(M, e)
    assert_close(gM, fd_grad(kepler, (M, e), 0), rtol=RTOL_FD)
    assert_close(ge, fd_grad(kepler, (M, e), 1), rtol=RTOL_FD)
    E = np.array([1.0])
    for _ in range(60):  # the implicit function theorem: dE/dM = 1 / (1 - e cos E)
        E = M + e * np.sin(E)
    assert_close(gM, np.cos(E) / (1.0 - e * np.cos(E)), rtol=1e-10)


def test_numba_pops_the_tapes_without_shrinking_them():
    """The compiled text pops tapes with runtime.tape_pop, line for line; the shown source keeps `.pop()`."""
    text = s2sad.source(kepler, argnums=(0, 1))
    compiled = compiled_text(text)
    assert len(compiled.split("\n")) == len(text.split("\n"))
    assert "sin2 = tape_pop(sin2_tape)" in compiled and "iterations = tape_pop(iterations_tape)" in compiled
    assert ".pop()" not in code(compiled) and "tape_pop" not in text
    assert "import (new_tape, tape_pop, " in compiled and "    sin2_tape = new_tape()" in compiled


def test_only_tapes_are_popped_with_tape_pop():
    """A list the user's code made keeps its own `pop`; a module importing nothing from the runtime keeps
    `list.pop` (tape_pop would be undefined there)."""
    body = "def f(xs):\n    t = List()\n    t.append(1.0)\n    a = xs.pop()\n    b = t.pop()\n    return a + b\n"
    with_runtime = "import numpy as np\nfrom s2sad.runtime import (copy_adj)\n" + body
    out = native_tapes(with_runtime)
    assert "a = xs.pop()" in out and "b = tape_pop(t)" in out and "    t = new_tape()" in out
    assert "from s2sad.runtime import (new_tape, tape_pop, copy_adj)" in out
    bare = native_tapes("import numpy as np\n" + body)
    assert "b = t.pop()" in bare and "    t = []" in bare and "tape" not in bare.split("\n")[0]


def sines(x, steps):
    y = x
    for _ in range(steps):
        s = np.sin(y)
        c = np.cos(y)
        y = y + 0.1 * s * c
    return np.sum(y * y)


def test_popped_values_have_second_derivatives(backend):
    x = np.array([0.4, -1.2])
    adjoint_sweep = code(s2sad.source(sines).split("# adjoint sweep")[1])
    assert "s = s_tape.pop()" in adjoint_sweep and "np.sin(" not in adjoint_sweep and "np.cos(" not in adjoint_sweep
    s2sad.check_grads(sines, (x, 5), order=2, modes=("rev",), backend=backend)
    assert_close(s2sad.grad(sines, backend=backend)(x, 5), fd_grad(sines, (x, 5), 0), rtol=RTOL_FD)


def test_values_pushed_once_per_loop_have_second_derivatives(backend):
    from programs import loop_overwrites_before_a_read, nested_overwriting_loops

    text = code(s2sad.source(nested_overwriting_loops, (0, 1)))
    assert text.count("z_tape.append(z)") == 1 and text.count("z = restore(z_tape, z)") == 1
    s2sad.check_grads(nested_overwriting_loops, (0.6, 1.3), order=2, modes=("rev",), backend=backend)
    x = np.array([0.3, -0.8, 1.1])
    for n in (0, 2):
        s2sad.check_grads(loop_overwrites_before_a_read, (x, n), order=2, modes=("rev",), backend=backend)


def test_first_iteration_skips_the_adjoint_of_an_undifferentiated_input(backend):
    rng = np.random.default_rng(4)
    Ws = [rng.normal(size=(4, 5)), rng.normal(size=(3, 4))]
    x = rng.normal(size=(5, 2))
    assert "if i != 0:" in s2sad.source(layers)
    gW = s2sad.grad(layers, backend=backend)(Ws, x)
    for k in range(2):
        def f(Wk, k=k):
            return layers([Wk if j == k else W for j, W in enumerate(Ws)], x)
        assert_close(gW[k], fd_grad(f, (Ws[k],), 0))
    # differentiated with respect to x too: nothing is skipped
    assert "if i != 0:" not in s2sad.source(layers, argnums=(0, 1))
    _, gx = s2sad.grad(layers, argnums=(0, 1), backend=backend)(Ws, x)
    assert_close(gx, fd_grad(lambda x: layers(Ws, x), (x,), 0))


def test_unrolled_layers_drop_the_dead_adjoint_of_the_input():
    """With the list's structure known the loop unrolls; the adjoint sent to the first layer's input
    `x` is then never read, and is not computed (one `W.T @ g`, for the second layer, remains).
    Each layer's `W` and `x` are variables of their own (W, W2; x2, x3): no tape."""
    rng = np.random.default_rng(5)
    Ws, x = [rng.normal(size=(4, 5)), rng.normal(size=(3, 4))], rng.normal(size=(5, 2))
    rev = s2sad.grad(layers).__s2sad_transform__
    text = rev.specialize((Ws, x))[0].generated.source
    assert text.count("matmul_adjoint_b(") == 1
    assert "List()" not in text and "restore(" not in text and "W2 = Ws_1" in text
    g = s2sad.grad(layers)(Ws, x)
    assert_close(g[0], fd_grad(lambda W: layers([W, Ws[1]], x), (Ws[0],), 0))
    assert_close(g[1], fd_grad(lambda W: layers([Ws[0], W], x), (Ws[1],), 0))


# ---- the text passes on the adjoint sweep (s2sad/codegen/prune.py) --------------------------------

from s2sad.codegen.prune import (  # noqa: E402
    negate_after_summing, share_unchanged_adjoints, start_from_first_contribution)

OWN = {"a_bar", "b_bar", "v_bar", "g_bar"}


def test_a_copy_stays_where_either_side_changes_later():
    lines = ["    a_bar = copy_adj(b_bar)", "    b_bar += unbroadcast(g_bar, b_bar)", "    y = a_bar * 2.0"]
    assert share_unchanged_adjoints(lines, OWN, set()) == lines
    via_view = ["    a_bar = copy_adj(b_bar)", "    v_bar = reshape_like(b_bar, x)", "    v_bar[0] = 0.0"]
    assert share_unchanged_adjoints(via_view, OWN, set()) == via_view
    in_loop = ["    a_bar = copy_adj(b_bar)", "    for i in range(3):", "        a_bar[i] += 1.0"]
    assert share_unchanged_adjoints(in_loop, OWN, set()) == in_loop


def test_a_copy_goes_where_nothing_changes_later():
    lines = ["    a_bar = copy_adj(b_bar)", "    y = a_bar * 2.0", "    return y"]
    assert share_unchanged_adjoints(lines, OWN, set())[0] == "    a_bar = b_bar"
    both_returned = ["    a_bar = copy_adj(b_bar)", "    return a_bar, b_bar"]
    assert share_unchanged_adjoints(both_returned, OWN, {"a_bar", "b_bar"}) == both_returned


def test_zeros_then_first_contribution_becomes_one_assignment():
    lines = ["    a_bar = zeros_like_adj(a)", "    y = 1.0", "    a_bar += unbroadcast(g_bar * w, a_bar)"]
    assert start_from_first_contribution(lines, OWN) == ["    y = 1.0", "    a_bar = unbroadcast(g_bar * w, a)"]
    bare = ["    a_bar = zeros_like_adj(a)", "    a_bar += unbroadcast(g_bar, a_bar)"]
    assert start_from_first_contribution(bare, OWN) == bare  # a_bar would alias g_bar
    restored = ["    a_bar = zeros_like_adj(a)", "    a = restore(a_tape, a)", "    a_bar += unbroadcast(-g_bar, a_bar)"]
    assert start_from_first_contribution(restored, OWN) == restored  # `a` changed in between
    in_place = ["    a_bar = zeros_like_adj(a)", "    a[0] = 2.0", "    a_bar += unbroadcast(g_bar * w, a_bar)"]
    assert start_from_first_contribution(in_place, OWN) == in_place
    looped = ["    a_bar = zeros_like_adj(a)", "    for a in b:", "        y = a", "    a_bar += unbroadcast(-w, a_bar)"]
    assert start_from_first_contribution(looped, OWN) == looped
    read = ["    a_bar = zeros_like_adj(a)", "    y = a_bar", "    a_bar += unbroadcast(g_bar * w, a_bar)"]
    assert start_from_first_contribution(read, OWN) == read


def test_reading_the_primal_in_between_does_not_keep_the_zeros():
    lines = ["    a_bar = zeros_like_adj(a)", "    b_bar = einsum_into('ij,j->i', a, g_bar, x)",
             "    a_bar += unbroadcast(einsum_into('ij,i->j', x, a, g_bar), a_bar)"]
    assert start_from_first_contribution(lines, OWN) == [
        lines[1], "    a_bar = unbroadcast(einsum_into('ij,i->j', x, a, g_bar), a)"]


SHARED = ["    a_bar = zeros_like_adj(a)", "    s_bar = g_bar * w", "    a_bar += unbroadcast(s_bar, a_bar)",
          "    m_bar -= unbroadcast(s_bar, m_bar)", "    a_bar += unbroadcast(q * 2.0, a_bar)"]
OWN_SHARED = OWN | {"s_bar", "t_bar", "m_bar"}


def test_a_first_contribution_naming_a_new_array_shares_it_while_nothing_else_sees_a_change():
    want = [SHARED[1], "    a_bar = unbroadcast(s_bar, a)", *SHARED[3:]]
    assert start_from_first_contribution(SHARED, OWN_SHARED, {"a_bar"}) == want  # s_bar is last read before a_bar changes
    via_view = ["    a_bar = zeros_like_adj(a)", "    s_bar = sum_expand(g_bar, x)", "    t_bar = s_bar",
                "    a_bar += unbroadcast(reshape_like(s_bar, a), a_bar)", "    y = t_bar * 2.0", "    a_bar -= unbroadcast(q, a_bar)"]
    assert start_from_first_contribution(via_view, OWN_SHARED)[2] == "    a_bar = unbroadcast(reshape_like(s_bar, a), a)"


def test_two_first_contributions_of_one_array_share_it_once():
    """a_bar takes s_bar's array; t_bar then would share it with a_bar, which changes later."""
    lines = ["    a_bar = zeros_like_adj(a)", "    t_bar = zeros_like_adj(t)", "    s_bar = g_bar * w",
             "    a_bar += unbroadcast(s_bar, a_bar)", "    t_bar += unbroadcast(s_bar, t_bar)", "    a_bar += unbroadcast(q, a_bar)"]
    assert start_from_first_contribution(lines, OWN_SHARED) == [
        lines[1], lines[2], "    a_bar = unbroadcast(s_bar, a)", *lines[4:]]


def sum_of_copies(v):
    c = np.copy(v)
    return v + c + (v + c)


def test_two_adjoints_from_one_sum_against_finite_differences(backend):
    """The adjoint of `v + c` goes to v_bar and c_bar: at most one of them may take its array."""
    v, u = np.random.default_rng(10).normal(size=(2, 3))
    _, pullback = s2sad.vjp(sum_of_copies, v, backend=backend)
    assert_close(pullback(u)[0], fd_grad(lambda v: np.dot(u, sum_of_copies(v)), (v,), 0))


@pytest.mark.parametrize("why, lines, returned", [
    ("read after a_bar changes", SHARED + ["    y = s_bar * 2.0"], set()),
    ("an alias bound earlier, read after", SHARED[:2] + ["    t_bar = s_bar"] + SHARED[2:] + ["    y = t_bar * 2.0"], set()),
    ("changed in place later", SHARED[:3] + ["    s_bar += unbroadcast(q, s_bar)"], set()),
    ("returned with a_bar", SHARED, {"a_bar", "s_bar"}),
    ("not made by the sweep", ["    a_bar = zeros_like_adj(a)", "    a_bar += unbroadcast(g_bar, a_bar)"], set()),
    ("a primal value's memory", ["    a_bar = zeros_like_adj(a)", "    s_bar = reshape_like(x, a)",
                                 "    a_bar += unbroadcast(s_bar, a_bar)"], set()),
    ("bound in a loop", ["    a_bar = zeros_like_adj(a)", "    for i in range(3):", "        s_bar = g_bar * i",
                         "    a_bar += unbroadcast(s_bar, a_bar)"], set()),
])
def test_a_first_contribution_that_others_may_still_see_keeps_the_zeros(why, lines, returned):
    assert start_from_first_contribution(lines, OWN_SHARED, returned) == lines, why


def logsumexp_rows(x, b):
    z = x * b[None, :]
    m = np.max(z, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(z - m), axis=1)) + np.squeeze(m, axis=1)) + np.sum(np.max(b) * z)


def test_shared_first_contributions_in_a_logsumexp_against_finite_differences(backend):
    rng = np.random.default_rng(9)
    x, b = rng.normal(size=(6, 4)), rng.normal(size=4)
    text = s2sad.source(logsumexp_rows)
    assert "m_bar = zeros_like_adj" not in text  # its first contribution is the squeezed sum's adjoint
    g = s2sad.grad(logsumexp_rows, argnums=(0, 1), backend=backend)(x, b)
    for k in range(2):
        assert_close(g[k], fd_grad(logsumexp_rows, (x, b), k))


def test_a_negated_contribution_is_summed_first_then_subtracted():
    assert negate_after_summing(["    a_bar += unbroadcast(-g_bar, a_bar)"]) == ["    a_bar -= unbroadcast(g_bar, a_bar)"]
    assert negate_after_summing(["        m = unbroadcast(-g_bar, like)"]) == ["        m = -unbroadcast(g_bar, like)"]
    assert negate_after_summing(["    v_bar = reshape_like(unbroadcast(-g_bar, e), v)"]) == [
        "    v_bar = -reshape_like(unbroadcast(g_bar, e), v)"]
    untouched = ["    a_bar += unbroadcast(-g_bar * w, a_bar)",  # the sign is only part of the operand
                 "    a_bar += unbroadcast(-g_bar, b_bar)",  # summed to another adjoint's shape
                 "    y = unbroadcast(-g_bar, like) ** 2", "    y = reshape_like(unbroadcast(-g_bar, e), v) + 1.0"]
    assert negate_after_summing(untouched) == untouched


def gmm_like(means, x, w):
    centered = x[:, None, :] - means[None, :, :]
    return np.sum(w * np.log(1.0 + np.sum(centered * centered, axis=2)))


def test_negated_and_first_contributions_in_a_broadcasting_model(backend):
    rng = np.random.default_rng(8)
    means, x, w = rng.normal(size=(3, 2)), rng.normal(size=(5, 2)), rng.uniform(size=3)
    text = s2sad.source(gmm_like)
    assert "-reshape_like(unbroadcast(centered_bar" in text and "unbroadcast(-" not in text
    assert_close(s2sad.grad(gmm_like, backend=backend)(means, x, w), fd_grad(gmm_like, (means, x, w), 0))


def softmax_xent(W, x, y):
    z = W @ x
    z = z - np.max(z)
    p = np.exp(z) / np.sum(np.exp(z))
    return -np.sum(y * np.log(p)) + 0.1 * np.sum(W * W)


def test_lean_adjoint_of_softmax_cross_entropy_against_finite_differences(backend):
    rng = np.random.default_rng(6)
    W, x, y = rng.normal(size=(4, 3)), rng.normal(size=3), np.eye(4)[1]
    g = s2sad.grad(softmax_xent, backend=backend)(W, x, y)
    assert_close(g, fd_grad(softmax_xent, (W, x, y), 0))
    # Second order on the python backend, which runs the same generated source: numba compiles the
    # second derivatives of a softmax cross-entropy in test_higher_order's hessian test, and those of
    # this one cost four compiles (~140 s of CI).
    s2sad.check_grads(softmax_xent, (W, x, y), order=2 if backend == "python" else 1, backend=backend)


# ---- elementwise fusion (s2sad/codegen/fuse.py) ---------------------------------------------------

from s2sad.codegen.fuse import fuse_elementwise  # noqa: E402

TEMPS = {"t", "u", "v"}


def test_single_use_arithmetic_folds_into_its_use_with_the_parentheses_it_needs():
    lines = ["    t = a * b", "    u = c - t", "    v = u - d", "    w = np.log(v)"]
    assert fuse_elementwise(lines, TEMPS) == ["    w = np.log(c - a * b - d)"]
    assert fuse_elementwise(["    t = a - b", "    w = c - t"], TEMPS) == ["    w = c - (a - b)"]
    assert fuse_elementwise(["    t = a * b", "    w = c / t"], TEMPS) == ["    w = c / (a * b)"]
    assert fuse_elementwise(["    t = -a", "    w = t ** 2"], TEMPS) == ["    w = (-a) ** 2"]
    # after a sign: -(a // b) is not (-a) // b, nor x ** -(a * b) (x ** -a) * b
    assert fuse_elementwise(["    t = a // b", "    w = -t"], TEMPS) == ["    w = -(a // b)"]
    assert fuse_elementwise(["    t = a * b", "    w = x ** -t"], TEMPS) == ["    w = x ** -(a * b)"]
    assert fuse_elementwise(["    t = a % b", "    w = c - t"], TEMPS) == ["    w = c - a % b"]


@pytest.mark.parametrize("lines", [
    ["    t = a * b", "    a = restore(a_tape, a)", "    w = t + 1.0"],  # an operand changes in between
    ["    t = a * b", "    a[0] += 1.0", "    w = t + 1.0"],  # ... in place
    ["    t = a * b", "    w = t + t"],  # read twice
    ["    t = a * b", "    w = t + 1.0", "    z = t"],  # read by two lines
    ["    t = a * b", "    for i in range(3):", "        w = t + 1.0"],  # read in a loop
    ["    t = sum_reduce(a, axis=1)", "    w = t + 1.0"],  # not elementwise arithmetic
    ["    t = a @ b", "    w = t + 1.0"],  # a product numba does not fuse
    ["    t = a * b", "    t = c"],  # bound again
])
def test_what_does_not_fold(lines):
    assert fuse_elementwise(lines, TEMPS) == lines


# ------------------------------------------------------------------ rebinding in straight-line code
# A name bound again outside any loop or branch gets a new variable (x, x2, x3...): the adjoint sweep
# finds every old value where it was left, so no tape, no `restore`. Inside loops and branches and
# after an early `return` a name keeps its one variable. A helper's own names are new at every call (it
# binds them all before reading them), so they get new variables even where the call sits in a loop.


def two_layers(W, x):
    x = np.tanh(W @ x)
    x = np.tanh(W @ x)
    return np.sum(x ** 2)


def test_straight_line_rebinding_needs_no_tape(backend):
    text = s2sad.source(two_layers, argnums=(0, 1))
    assert "List()" not in text and "restore(" not in text
    assert "x2 = np.tanh(" in text and "x3 = np.tanh(" in text
    rng = np.random.default_rng(3)
    W, x = rng.normal(size=(4, 4)) / 2, rng.normal(size=(4, 2))
    gW, gx = s2sad.grad(two_layers, argnums=(0, 1), backend=backend)(W, x)
    assert_close(gW, fd_grad(two_layers, (W, x), 0), rtol=RTOL_FD)
    assert_close(gx, fd_grad(two_layers, (W, x), 1), rtol=RTOL_FD)


def rebind_after_early_return(x):
    y = x * 2.0
    if x > 1.0:
        return y * y
    y = np.sin(y)
    y = y * x
    return y


def rebind_by_unpacking(a, b):
    a, b = b, a * b
    a, b = b, a + b
    return a * np.sin(b)


def rebind_in_place(x):
    y = x * x
    y += np.sin(x)
    y *= x
    return y


def _damped_step(u, h):
    u = u + h * np.sin(u)
    u = u * 0.99
    return u


def rebind_in_a_helper_inside_a_loop(x):
    u = x
    for _ in range(4):
        u = _damped_step(u, 0.3)
    return u * u


def rebind_around_a_loop(x):
    s = x * x
    s = np.sin(s)
    for _ in range(3):
        s = s * x + 1.0
    s = np.cos(s)
    return s


def rebind_an_array_then_write_into_it(x):
    a = np.zeros(3)
    a[0] = x[0]
    a = a * x + 1.0
    a[1] = a[1] * x[2]
    return np.sum(a * a)


@pytest.mark.parametrize("fun, args", [
    (rebind_after_early_return, (0.4,)), (rebind_after_early_return, (1.3,)),
    (rebind_by_unpacking, (0.7, -1.2)), (rebind_in_place, (0.8,)),
    (rebind_in_a_helper_inside_a_loop, (0.6,)), (rebind_around_a_loop, (0.9,)),
    (rebind_an_array_then_write_into_it, (np.array([0.5, -0.3, 1.1]),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_rebinding_keeps_every_derivative_right(fun, args, backend):
    argnums = tuple(range(len(args)))
    grads = s2sad.grad(fun, argnums=argnums, backend=backend)(*args)
    for i, g in enumerate(grads):
        assert_close(g, fd_grad(fun, args, i), rtol=RTOL_FD)


def test_rebinding_in_loops_and_after_an_early_exit_keeps_one_variable():
    after_return = code(s2sad.source(rebind_after_early_return))
    assert "y2 =" not in after_return  # the lines after `return` run only where it did not
    around = code(s2sad.source(rebind_around_a_loop))  # s, s2 = sin(s); the loop keeps s2; s3 = cos(s2)
    assert "s2 = np.sin(s)" in around and "s3 = np.cos(s2)" in around and "s4" not in around
    in_helper = code(s2sad.source(rebind_in_a_helper_inside_a_loop))
    # the helper's u (u2) is bound three times per call: u2, u3, u4, untaped; only the loop-carried u
    # keeps a tape
    assert in_helper.count("List()") == 1 and "u_tape = List()" in in_helper
    assert "u3 = u2 + mul" in in_helper and "u4 = u3 * 0.99" in in_helper
    straight = code(s2sad.source(rebind_in_place))
    assert "y2 = " in straight and "y3 = " in straight

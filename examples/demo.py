"""A tour of s2sad: source-to-source AD for plain Python/NumPy.

For three small but real functions this script shows
  * the function as you wrote it,
  * the adjoint (gradient) code s2sad generates from it -- ordinary, readable Python
    that numba then compiles,
  * the gradient it computes, checked against central finite differences.

Then forward-mode code, second derivatives through a while loop's tape, a Hessian, a
custom_jvp rule, pytree parameters and per-example gradients with vmap.

Run it with:   .venv/bin/python examples/demo.py
It exits with status 1 if any gradient disagrees with finite differences.
"""

import inspect
import sys
import time

import numpy as np

import s2sad

TOLERANCE = 1e-5  # largest acceptable relative error against finite differences
EPS = 1e-6        # finite-difference step


# ---------------------------------------------------------------------------
# The functions we differentiate: plain Python + NumPy, nothing s2sad-specific.
# ---------------------------------------------------------------------------

def sigmoid(x):
    return 0.5 * (np.tanh(x / 2) + 1)


def loss(W, b, inputs, targets):
    """Negative log-likelihood of a logistic-regression model."""
    preds = sigmoid(inputs @ W + b)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probs))


def newton_sqrt(a):
    """sqrt(a) by Newton's method: the loop runs until the iterate has converged."""
    x = a
    while abs(x * x - a) > 1e-13:
        x = 0.5 * (x + a / x)
    return x


def recur(x, w):
    """A tiny recurrent net that writes its hidden states into an array in place."""
    n = x.shape[0]
    h = np.zeros(n)
    h[0] = x[0]
    for t in range(1, n):
        h[t] = np.tanh(w * h[t - 1] + x[t])
    return np.sum(h * h)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def finite_difference_grad(f, args, argnum, eps=EPS):
    """Central finite differences of scalar f(*args) with respect to args[argnum]."""
    args = list(args)
    x = args[argnum]
    if np.ndim(x) == 0:
        def at(v):
            return f(*args[:argnum], v, *args[argnum + 1:])
        return (at(x + eps) - at(x - eps)) / (2 * eps)
    x = np.array(x, dtype=float)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        args[argnum] = plus
        f_plus = f(*args)
        args[argnum] = minus
        f_minus = f(*args)
        grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad


def relative_error(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), np.max(np.abs(b)), 1e-12))


def adjoint_part(module_source, marker="_grad("):
    """Just the generated `*_grad` (or `*_jvp`) function out of the module s2sad.source() returns."""
    lines = module_source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def ") and marker in line)
    end = next((j for j in range(start + 1, len(lines))
                if lines[j] and not lines[j][0].isspace() and not lines[j].startswith(("#", ")"))),
               len(lines))
    return "\n".join(lines[start:end]).rstrip()


def heading(title):
    print()
    print("=" * 78)
    print(title)
    print("=" * 78)


def indented(text):
    return "\n".join("    " + line if line else "" for line in text.rstrip().splitlines())


failures = []


def show(title, f, args, argnums, names, extra=None):
    """Print f's source, its generated adjoint, its gradient, and the finite-difference check."""
    heading(title)
    print("\nYour code:\n")
    print(indented(inspect.getsource(f)))
    if f is loss:  # loss calls a helper, which s2sad differentiates too
        print()
        print(indented(inspect.getsource(sigmoid)))

    print("\nGenerated adjoint (s2sad.source):\n")
    print(indented(adjoint_part(s2sad.source(f, argnums))))

    start = time.perf_counter()
    grads = s2sad.grad(f, argnums)(*args)
    elapsed = time.perf_counter() - start
    if isinstance(argnums, int):
        argnums, names, grads = (argnums,), (names,), (grads,)

    print(f"\nGradient (first call, including numba compile: {elapsed:.1f}s):")
    for argnum, name, g in zip(argnums, names, grads):
        fd = finite_difference_grad(f, args, argnum)
        err = relative_error(g, fd)
        ok = err <= TOLERANCE
        if not ok:
            failures.append(f"{f.__name__} w.r.t. {name}")
        with np.printoptions(precision=6, suppress=True):
            print(f"  d{f.__name__}/d{name} = {np.asarray(g)}")
            print(f"  finite differences  = {np.asarray(fd)}")
        print(f"  relative error: {err:.2e}  {'OK' if ok else 'MISMATCH'}")
    if extra is not None:
        extra(grads)


# ---------------------------------------------------------------------------
# The demo
# ---------------------------------------------------------------------------

@s2sad.custom_jvp
def log1pexp(x):
    return np.log(1.0 + np.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return log1pexp(x), (1.0 - 1.0 / (1.0 + np.exp(x))) * x_dot


def mlp(params, x):
    for p in params:
        x = np.tanh(p["W"] @ x + p["b"])
    return np.sum(x ** 2)


def overrides_pytrees_and_vmap(rng):
    heading("5. A custom_jvp rule, pytree parameters and per-example gradients (vmap)")
    with np.errstate(over="ignore", invalid="ignore"):
        plain = s2sad.grad(plain_log1pexp)(1000.0)
    fixed = s2sad.grad(log1pexp)(1000.0)
    check("custom_jvp log1pexp at 1000", fixed, 1.0)
    print(f"\n  d/dx log(1 + exp(x)) at 1000: plain {plain}, with the custom_jvp rule {fixed}")
    params = [{"W": rng.standard_normal((4, 3)) / 2, "b": np.zeros(4)}, {"W": rng.standard_normal((2, 4)) / 2,
                                                                           "b": np.zeros(2)}]
    x = rng.standard_normal(3)
    grads = s2sad.grad(mlp)(params, x)
    v = [{k: rng.standard_normal(np.shape(p[k])) for k in p} for p in params]
    directional = sum(float(np.sum(g[k] * d[k])) for g, d in zip(grads, v) for k in g)
    shift = [[{k: p[k] + s * d[k] for k in p} for p, d in zip(params, v)] for s in (EPS, -EPS)]
    fd = (mlp(shift[0], x) - mlp(shift[1], x)) / (2 * EPS)
    check("mlp pytree gradient", directional, fd)
    print(f"  grad(mlp) has the params' structure: {[sorted(g) for g in grads]}; "
          f"<grad, v> = {directional:.10f}, finite differences {fd:.10f}")
    xs = np.linspace(-2.0, 2.0, 5)
    per_example = s2sad.vmap(s2sad.grad(np.tanh), target="parallel")(xs)
    check("vmap(grad(tanh))", per_example, 1.0 - np.tanh(xs) ** 2)
    print(f"  vmap(grad(tanh), target='parallel') at {xs}: {np.round(per_example, 6)}")


def plain_log1pexp(x):
    return np.log(1.0 + np.exp(x))


def higher_order(f, x, w, a):
    heading("4. Forward mode and second derivatives")
    print("\nGenerated tangent code for recur (s2sad.source(recur, (0, 1), mode='fwd')):\n")
    print(indented(adjoint_part(s2sad.source(f, (0, 1), mode="fwd"), "_jvp(")))
    v = np.linspace(-1.0, 1.0, x.size)
    _, tangent = s2sad.jvp(f, (x, w), (v, 0.0))
    fd = (f(x + EPS * v, w) - f(x - EPS * v, w)) / (2 * EPS)
    check("jvp of recur", tangent, fd)
    print(f"\n  jvp along v: {tangent:.12f}   finite differences: {fd:.12f}")
    second = s2sad.grad(s2sad.grad(newton_sqrt))(a)  # reverse over reverse, through the while loop's tape
    exact = -0.25 * a ** -1.5
    check("grad(grad(newton_sqrt))", second, exact)
    print(f"  grad(grad(newton_sqrt))({a}) = {second:.12f}   closed form -a**-1.5/4 = {exact:.12f}")
    H = s2sad.hessian(f)(x, w)  # forward over reverse
    g = s2sad.grad(f)
    fd_H = np.array([(g(x + EPS * e, w) - g(x - EPS * e, w)) / (2 * EPS) for e in np.eye(x.size)])
    check("hessian of recur", H, fd_H)
    print(f"  hessian(recur) is {H.shape}, symmetric: {np.allclose(H, H.T)}, "
          f"relative error vs finite differences of grad: {relative_error(H, fd_H):.2e}")


def check(what, actual, expected):
    if relative_error(actual, expected) > TOLERANCE:
        failures.append(what)


def main():
    rng = np.random.default_rng(0)

    # (a) logistic regression: gradient with respect to the weights and the bias
    inputs = np.array([[0.52, 1.12, 0.77],
                       [0.88, -1.08, 0.15],
                       [0.52, 0.06, -1.30],
                       [0.74, -2.49, 1.39]])
    targets = np.array([1.0, 1.0, 0.0, 1.0])
    W = rng.standard_normal(3)
    b = 0.1
    show("1. Logistic regression: loss(W, b, inputs, targets), gradient w.r.t. (W, b)",
         loss, (W, b, inputs, targets), (0, 1), ("W", "b"))

    # (b) a while loop whose trip count depends on the data
    a = 2.0

    def closed_form(grads):
        exact = 1 / (2 * np.sqrt(a))
        err = relative_error(grads[0], exact)
        if err > TOLERANCE:
            failures.append("newton_sqrt vs closed form")
        print(f"  closed form 1/(2*sqrt(a)) = {exact:.12f}  (relative error {err:.2e})")

    show(f"2. Newton's square root: a while loop with a data-dependent exit, at a = {a}",
         newton_sqrt, (a,), 0, "a", extra=closed_form)

    # (c) a recurrence written with in-place array updates
    x = rng.standard_normal(6)
    w = 0.7
    show("3. A recurrence with in-place writes: recur(x, w), gradient w.r.t. (x, w)",
         recur, (x, w), (0, 1), ("x", "w"))

    higher_order(recur, x, w, a)
    overrides_pytrees_and_vmap(rng)

    print()
    if failures:
        print("GRADIENT MISMATCH: " + ", ".join(failures))
        return 1
    print("Summary: all gradients match finite differences.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

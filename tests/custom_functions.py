"""custom_jvp / custom_vjp functions for the override tests (s2sad reads their source)."""

import numpy as np

import s2sad


@s2sad.custom_jvp
def log1pexp(x):
    return np.log(1.0 + np.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = log1pexp(x)
    ans_dot = (1.0 - 1.0 / (1.0 + np.exp(x))) * x_dot
    return ans, ans_dot


def softplus_loss(w, x):
    return np.sum(log1pexp(w * x))


@s2sad.custom_vjp
def clip_gradient(x):
    return x


def clip_gradient_fwd(x):
    return x, ()


def clip_gradient_bwd(residuals, g):
    return (np.clip(g, -1.0, 1.0),)


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def clipped_loss(x):
    return np.sum(clip_gradient(x) * 3.0)


@s2sad.custom_vjp
def norm(x):
    return np.sqrt(np.sum(x * x))


def norm_fwd(x):
    n = np.sqrt(np.sum(x * x))
    return n, (x, n)


def norm_bwd(residuals, g):
    x, n = residuals
    return (g * x / n,)


norm.defvjp(norm_fwd, norm_bwd)


def normalized_energy(x, w):
    return norm(x * w) ** 2 + w


@s2sad.custom_jvp
def scaled_product(x, y):
    return 2.0 * x * y


@scaled_product.defjvp
def scaled_product_jvp(primals, tangents):
    x, y = primals
    x_dot, y_dot = tangents
    return scaled_product(x, y), 2.0 * (x_dot * y + x * y_dot)


def uses_erfcx(x):
    import_free = x * 2.0
    return scipy.special.erfcx(import_free)


import scipy.special  # noqa: E402  (after the function on purpose: s2sad resolves globals when it runs)

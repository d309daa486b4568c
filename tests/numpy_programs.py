"""NumPy-heavy programs: indexing forms, array methods, joining, and small real models."""

import numpy as np


def gather(x, idx):
    return np.sum(x[idx] ** 2)


def gather_constant_list(x):
    y = x[[0, 2, 2]]
    return np.sum(y * y * x[1])


def newaxis_outer(v, w):
    m = v[:, None] * w[None, :]
    return np.sum(np.sin(m)) + np.sum(v[None] * 2.0)


def ellipsis_and_reversed(m):
    return np.sum(m[..., 0] ** 3) + np.sum(m[::-1, 1] * m[:, 0])


def methods_and_joining(x, m):
    n = x.shape[0]
    y = x.reshape(2, 3).T
    z = np.reshape(x, (n // 3, 3))
    s = y.sum(axis=1) @ z.sum(axis=0) + m.T.ravel() @ np.arange(6.0)
    parts = np.split(x, 3)
    joined = np.concatenate((parts[2], parts[0] * 2.0), axis=0)
    stacked = np.stack([x[0], x[1] * x[2]])
    grid = np.vstack((x[:3], x[3:]))
    row = np.hstack((x[:2], x[4:]))
    total = np.sum(joined ** 2) + np.sum(stacked ** 3) + np.sum(grid * m) + np.sum(row ** 2)
    return s + total + np.sum(x.astype(float))


def logsumexp(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(a - m), axis=axis)) + np.squeeze(m, axis=axis)


def gmm_log_likelihood(means, log_weights, x):
    """Mixture of unit-variance Gaussians: sum_i log sum_k w_k N(x_i; mu_k, I)."""
    d = x.shape[1]
    diff = x[:, None, :] - means[None, :, :]
    log_norm = log_weights - logsumexp(log_weights, 0) - 0.5 * d * np.log(2.0 * np.pi)
    log_p = log_norm[None, :] - 0.5 * np.sum(diff * diff, axis=2)
    return np.sum(logsumexp(log_p, 1))


def softmax_cross_entropy(W, x, labels):
    logits = x @ W
    log_probs = logits - logsumexp(logits, 1)[:, None]
    return -np.sum(labels * log_probs) / x.shape[0]


def contiguous_normal_equations(A, b):
    """numba's advice for a product with a transpose: make it contiguous first."""
    At = np.ascontiguousarray(A.T)
    return np.sum((At @ A) ** 2) + np.sum(np.asfortranarray(At) @ b) + np.sum(np.asarray(b) ** 3)


def least_squares(A, b, lam):
    n = A.shape[1]
    x = np.linalg.solve(A.T @ A + lam * np.eye(n), A.T @ b)
    r = A @ x - b
    return r @ r + lam * (x @ x)


def gaussian_log_density(L_raw, mu, x):
    n = x.shape[0]
    cov = L_raw @ L_raw.T + n * np.eye(n)
    L = np.linalg.cholesky(cov)
    z = np.linalg.solve(L, x - mu)
    log_det = 0.0
    for i in range(n):
        log_det += 2.0 * np.log(L[i, i])
    return -0.5 * (z @ z) - 0.5 * log_det - 0.5 * n * np.log(2.0 * np.pi)


def gaussian_log_density_slogdet(M, mu, x):
    n = x.shape[0]
    cov = M @ M.T + n * np.eye(n)
    sign, log_det = np.linalg.slogdet(cov)
    r = x - mu
    return -0.5 * (r @ np.linalg.solve(cov, r)) - 0.5 * sign * log_det


def scatter_writes(x, idx):
    y = np.zeros(4)
    y[idx] = x * 2.0
    y[idx] += np.sin(x)
    return np.sum(y ** 2)

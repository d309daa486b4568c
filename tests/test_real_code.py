"""Plumbing real kernels are written with (npbench, polybench, numba-examples shapes), against finite differences."""

import numpy as np

import s2sad
from helpers import assert_close, fd_grad


def covariance(data):
    M = data.shape[1]
    N = data.shape[0]
    mean = np.sum(data, axis=0) / N
    data = data - mean
    cov = np.zeros((M, M))
    for i in range(M):
        for j in range(i, M):
            cov[i, j] = cov[j, i] = np.sum(data[:, i] * data[:, j]) / (N - 1.0)
    return np.sum(cov * cov)


def chained_names(x):
    a = b = x * 2.0
    return np.sum(a * b)


def test_chained_assignment_fills_both_targets_with_one_value(backend):
    data = np.random.default_rng(0).normal(size=(5, 3))
    assert_close(s2sad.grad(covariance, backend=backend)(data), fd_grad(covariance, (data,), 0))
    x = np.array([0.5, -1.0])
    assert_close(s2sad.grad(chained_names, backend=backend)(x), 8.0 * x, rtol=1e-12)


def lennard_jones_masked(cluster):
    diff = cluster[:, np.newaxis, :] - cluster[np.newaxis, :, :]
    d = np.sqrt((diff * diff).sum(-1))
    upper = np.triu(d)
    r = upper[upper > 1e-6]
    sr6 = (1.0 / r) ** 6
    return np.sum(4.0 * (sr6 * sr6 - sr6))


def test_a_masked_zero_of_sqrt_adds_nothing_to_the_gradient(backend):
    cluster = np.array([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [0.0, 1.2, 0.1], [0.3, 0.2, 1.15]])
    g = s2sad.grad(lennard_jones_masked, backend=backend)(cluster)
    assert np.all(np.isfinite(g))
    assert_close(g, fd_grad(lennard_jones_masked, (cluster,), 0))


def sum_of_a_list(a):
    b = [1.0, a * a, 2.0]
    return np.sum(b) + np.sum(np.array(np.array([a, 2.0 * a])))


def test_a_list_handed_to_numpy_is_an_array_and_np_array_of_an_array_a_copy(backend):
    assert_close(s2sad.grad(sum_of_a_list, backend=backend)(1.5), 2.0 * 1.5 + 3.0, rtol=1e-12)


def sines_of_a_list(x):
    return np.sum(np.sin(x))


def test_a_list_argument_handed_to_numpy_is_an_array(backend):
    g = s2sad.grad(sines_of_a_list, backend=backend)([1.0, 2.0])
    assert isinstance(g, list)
    assert_close(g, np.cos([1.0, 2.0]), rtol=1e-12)

"""numba-style kernels that write into arrays and return nothing, and functions that write into their arguments."""

import numpy as np


def squares_into(out, a):
    for i in range(a.shape[0]):
        out[i] = a[i] * a[i]


def relu_scaled_into(out, a, scale):
    for i in range(a.shape[0]):
        if a[i] < 0.0:
            out[i] = 0.0
            continue
        out[i] = a[i] * scale
    return


def through_kernels(a, scale):
    tmp = np.empty_like(a)
    squares_into(tmp, a)
    out = np.zeros_like(a)
    relu_scaled_into(out, tmp - 0.05, scale)
    return np.sum(np.sin(out))


def sets_first(x):
    x[0] = x[1] * x[2]
    return np.sum(x ** 2)


def scale_in_place(v, s):
    for i in range(v.shape[0]):
        v[i] *= s


def smooths_its_argument(x, s):
    scale_in_place(x, s)
    x[1:] += x[:-1]
    return np.sum(np.sin(x))


class Model:
    def __init__(self):
        self.w = 2.0

    def forward(self, x):
        return x * self.w


MODEL = Model()


def calls_method(x):
    return MODEL.forward(x)


def orthonormalize(A):
    Q = np.zeros_like(A)
    R = np.zeros((A.shape[1], A.shape[1]))
    for k in range(A.shape[1]):
        R[k, k] = np.sqrt(np.dot(A[:, k], A[:, k]))
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, A.shape[1]):
            R[k, j] = np.dot(Q[:, k], A[:, j])
            A[:, j] -= Q[:, k] * R[k, j]
    return Q, R


def gram_schmidt_loss(A):
    Q, R = orthonormalize(A)
    return np.sum(Q * np.arange(A.size).reshape(A.shape)) + np.sum(R ** 2)


# Library calls made for their effect alone. s2sad keeps such a call as written and cannot see what it
# writes: with an operand that depends on a differentiated input, its derivative would be left out.

def puts_in(x):
    y = np.zeros(3)
    np.put(y, [0, 2], x[:2] * 3.0)
    return np.sum(y * x)


def puts_into_a_view(x):
    out = np.zeros(3)
    tail = out[1:]
    np.putmask(tail, tail < 1.0, x[1:])  # `out`, read below, changes through the view
    return np.sum(out * x)


def puts_constants(x):
    y = np.zeros(3)
    np.put(y, [0, 2], 2.0)  # nothing differentiated goes in or out: runs as written
    return np.sum(x * y)


def puts_into_scratch(x):
    scratch = x * 2.0
    np.put(scratch, [0], 0.0)  # differentiated, but nothing reads `scratch` afterwards
    return np.sum(x * x)


# NumPy's writes s2sad differentiates: np.copyto is `dst[:] = src`, np.fill_diagonal writes the diagonal's
# items, np.add.at / np.subtract.at add into the array in place, a repeated index adding again.

def copies_in(x):
    out = np.zeros(3)
    np.copyto(out, x * 2.0)
    return np.sum(out * x)


def copies_across_rows(x):
    out = np.ones((2, 3))
    np.copyto(out, np.sin(x))  # broadcast to every row
    return np.sum(out * out)


def copies_where(x):
    out = x * 1.0
    np.copyto(out, x * x, where=x > 0.5)
    return np.sum(out * x)


def fills_the_diagonal(x):
    A = np.outer(x, x)
    np.fill_diagonal(A, 0.0)
    return np.sum(A * np.arange(9.0).reshape(3, 3))


def regularizes_a_kernel(x):
    K = np.exp(-np.subtract.outer(x, x) ** 2)
    np.fill_diagonal(K, K.diagonal() + 0.1 * x)
    return np.sum(np.linalg.solve(K, x))


def fills_a_tall_diagonal(x):
    A = np.ones((4, 3)) * x
    np.fill_diagonal(A, x * x)  # three items: NumPy stops at the last column
    return np.sum(A * A)


def scatters(x):
    y = np.zeros(3)
    np.add.at(y, [0, 0, 2], x)  # items 0 and 1 of x both land at 0
    return np.sum(y * y)


def scatters_rows_and_subtracts(x):
    y = np.zeros((3, 2))
    np.add.at(y, np.array([2, 0, 2]), np.outer(x, x)[:, :2])
    np.subtract.at(y, ([0, 1, 0], [1, 1, 1]), x * x)
    return np.sum(y * y)


def scatters_a_slice(x):
    y = np.zeros(3)
    np.add.at(y, slice(0, 2), x[:2])
    return np.sum(y * y * x)


# np.copyto into a view of another array is refused at the line, as `tail[:] = v` is; np.add.at into one
# adds through it, as `head += v` does.

def copies_into_a_view(x):
    out = np.zeros(3)
    tail = out[1:]
    np.copyto(tail, x[1:] * x[0])
    return np.sum(out * x)


def scatters_through_a_view(x):
    y = np.ones(4)
    head = y[:3]
    np.add.at(head, np.array([0, 2]), x[:2])
    return np.sum(y * np.arange(1.0, 5.0))

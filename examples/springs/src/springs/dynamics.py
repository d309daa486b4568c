"""Forces and stiffness of the chain, from the gradient and Hessian that `s2sad build` generated."""

from springs._generated import energy_grad, energy_hessian


def forces(x, k, rest):
    """-dE/dx for each mass."""
    return -energy_grad(x, k, rest)


def stiffness(x, k, rest):
    """d2E/dx2: the stiffness matrix (its eigenvalues are the squared normal-mode frequencies)."""
    return energy_hessian(x, k, rest)

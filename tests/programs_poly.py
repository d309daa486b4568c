def cubic(x):
    return x ** 3 + 2.0 * x ** 2 - 3.0 * x + 1.0


def two_x_cubed(x):
    return 2.0 * x ** 3

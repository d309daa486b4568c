"""Runtime helpers for the shapes rules (plain Python, plus numba overloads)."""

__all__: list[str] = []

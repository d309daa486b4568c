"""Runtime helpers for the elementwise rules (plain Python, plus numba overloads)."""

__all__: list[str] = []

"""Runtime helpers for the linalg rules (plain Python, plus numba overloads)."""

__all__: list[str] = []

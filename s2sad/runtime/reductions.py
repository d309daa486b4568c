"""Runtime helpers for the reductions rules (plain Python, plus numba overloads)."""

__all__: list[str] = []

"""springs: a chain of springs. `springs.dynamics` holds its forces and stiffness, derived by s2sad at build time."""

from springs.energy import energy

__all__ = ["energy"]

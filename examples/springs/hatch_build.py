"""Regenerate src/springs/_generated (see [tool.s2sad] in pyproject.toml) before each build."""

from s2sad.hatch_hook import S2sadBuildHook  # noqa: F401  (hatchling picks up the hook class found here)

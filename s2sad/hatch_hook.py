"""hatchling build hook: `s2sad build` before hatchling builds a wheel or sdist.

Regenerates the folder named by `[tool.s2sad] output` in the project's pyproject.toml and ships
it (even when it is git-ignored). Use it either as a named plugin (s2sad registers the entry
point `hatch: s2sad`):

    [tool.hatch.build.hooks.s2sad]

or, without relying on the entry point, through a one-line `hatch_build.py` next to pyproject.toml:

    [tool.hatch.build.hooks.custom]          # hatch_build.py: from s2sad.hatch_hook import S2sadBuildHook
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.plugin import hookimpl


class S2sadBuildHook(BuildHookInterface):
    PLUGIN_NAME = "s2sad"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        from s2sad import build

        root = Path(self.root)
        config = build.load_config(root / "pyproject.toml")
        changed = build.build(config)
        output = config.output.resolve().relative_to(root.resolve()).as_posix()
        self.app.display_info(f"s2sad: {output}: " + (f"wrote {len(changed)} file(s)" if changed else "up to date"))
        build_data["artifacts"].append(f"/{output}/**/*.py")  # shipped even when git-ignored


@hookimpl
def hatch_register_build_hook() -> type[BuildHookInterface]:
    return S2sadBuildHook

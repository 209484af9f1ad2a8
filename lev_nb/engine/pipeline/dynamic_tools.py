"""``dynamic_tools = true``: script tools the agent writes into its workdir's ``tools/`` folder
mid-run become callable on the next inference, once they compile cleanly.

Before each model call of such an agent the folder is looked at (one ``stat`` per file); when a
file was added or changed, the folder's tools are compiled again and registered, and the stage
advertises them beside its own. A tool cannot take the name of a built-in, one of the agent's own
or a global tool; a file that does not compile, or that lies outside the workdir (a symlink), is
named in a warning and not offered. Off (the default), an agent cannot grow its own capabilities.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lev_nb.workspace import PathEscape, confine

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState
    from lev_nb.tools.registry import ToolRegistry

DYNAMIC_TOOLS_DIR = "tools"


class DynamicTools:
    """The tools a run's agent wrote for itself (see the module docstring)."""

    def __init__(self, state: RunState, registry: ToolRegistry) -> None:
        self.state = state
        self.registry = registry
        self.enabled = bool(state.plan.dynamic_tools)
        # Worked out only for a blueprint that asks for dynamic tools: every run makes this object.
        self.folder = Path(state.workdir) / DYNAMIC_TOOLS_DIR if self.enabled else Path()
        self.reserved = set(registry.names()) | {"bash"} if self.enabled else set()
        self.names: list[str] = []
        self.version = 0  # changes whenever the advertised tools may have
        self._stamp: dict[str, int] = {}
        self._warned: set[tuple[str, str]] = set()

    def refresh(self) -> None:
        """Register what the folder holds now (cheap when nothing changed)."""
        if not self.enabled:
            return
        try:
            stamp = {str(p): p.stat().st_mtime_ns for p in sorted(self.folder.glob("*.rhai")) if p.is_file()}
        except OSError:
            return
        if stamp == self._stamp:
            return
        self._stamp = stamp
        from lev_nb.scripting import discover_tools
        from lev_nb.tools.scripts import script_tool_def

        found, skipped = discover_tools([self.folder], reserved=tuple(sorted(self.reserved)))
        for item in skipped:
            self._warn(str(item.path), item.reason)
        for tool in found.values():
            try:
                confine(self.state.workdir, tool.path or "")
            except PathEscape:
                self._warn(str(tool.path), "it lies outside the working directory")
                continue
            self.registry.register(script_tool_def(tool))
            if tool.name not in self.names:
                self.names.append(tool.name)
        self.version += 1

    def _warn(self, path: str, reason: str) -> None:
        if (path, reason) not in self._warned:
            self._warned.add((path, reason))
            self.state.warn(f"the agent's tool script {path} is not offered: {reason}")

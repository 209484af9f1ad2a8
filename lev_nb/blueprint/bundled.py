"""The agents that ship inside the package (``lev_nb/agents/<name>/agent.leviath``), found by name.

They are package data beside this package's modules, so an installed wheel finds them as a source
checkout does (where ``blueprints/`` at the top of the repository points at the same folder). The
package is always on disk (its native module cannot be imported from a zip), so the folder is found
from this file's own path: ``importlib.resources`` would cost a first run a few milliseconds of imports.
Fan-out workers name an agent; :func:`bundled_agent` is the last place that name is looked for.
"""

from __future__ import annotations

from pathlib import Path

from lev_nb.blueprint.constants import MANIFEST_NAME

__all__ = ["bundled_agents_dir", "bundled_agent", "bundled_agent_names"]

_AGENTS = Path(__file__).parent.parent / "agents"


def bundled_agents_dir() -> Path:
    """The folder that holds the bundled agents, one subfolder each."""
    return _AGENTS


def bundled_agent(name: str) -> Path | None:
    """The agent.leviath of the bundled agent ``name``, or None when there is no such agent."""
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        return None
    manifest = bundled_agents_dir() / name / MANIFEST_NAME
    return manifest if manifest.is_file() else None


def bundled_agent_names() -> list[str]:
    """The names of every bundled agent, sorted."""
    folder = bundled_agents_dir()
    if not folder.is_dir():
        return []
    return sorted(child.name for child in folder.iterdir() if (child / MANIFEST_NAME).is_file())

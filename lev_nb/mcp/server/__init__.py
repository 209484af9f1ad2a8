"""``lev mcp serve``: agents as MCP tools. Sits above the engine (it starts runs), below the CLI."""

from __future__ import annotations

from lev_nb.mcp.server.agents import ServeError, ServedAgent, served_agents
from lev_nb.mcp.server.serve import build_server, run_agent, serve

__all__ = ["ServeError", "ServedAgent", "build_server", "run_agent", "serve", "served_agents"]

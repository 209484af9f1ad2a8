"""MCP servers as tool sources: the process's broker, tool naming, results, a run's MCP tools.

Sits beside :mod:`lev_nb.tools` (its tools are ToolDefs) and below the engine, which asks
:func:`resolve_for_run` for a run's MCP tools. Needs the ``mcp`` package (``pip install
'lev_nb[mcp]'``) only when a server is actually started.
"""

from __future__ import annotations

from lev_nb.mcp.client.broker import McpBroker, ServerStatus, ToolInfo, broker
from lev_nb.mcp.client.connection import McpUnavailable, expand_vars, missing_vars
from lev_nb.blueprint.mcp_names import qualified, sanitize, server_prefixes, split_qualified
from lev_nb.mcp.client.run_tools import RunMcp, mcp_names, resolve_for_run
from lev_nb.mcp.client.stderr import stderr_log_path

__all__ = [
    "McpBroker",
    "McpUnavailable",
    "RunMcp",
    "ServerStatus",
    "ToolInfo",
    "broker",
    "expand_vars",
    "mcp_names",
    "missing_vars",
    "qualified",
    "resolve_for_run",
    "sanitize",
    "server_prefixes",
    "split_qualified",
    "stderr_log_path",
]

"""MCP (Model Context Protocol), on the official ``mcp`` SDK, in two rooms on either side of the engine.

- :mod:`lev_nb.mcp.client` sits beside ``tools``: configured servers become tool sources. One
  broker per process connects to them on its own event-loop thread, and their tools are ordinary
  :class:`~lev_nb.tools.ToolDef` s that go through the same policy, hooks and approvals.
- :mod:`lev_nb.mcp.server` sits above the engine: ``lev mcp serve`` offers agents as MCP tools.

This package imports neither, so that each keeps its own place in the layers.
"""

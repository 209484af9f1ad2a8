"""The MCP tools of one run: which servers its blueprint names, and their tools as ToolDefs.

A stage names a single tool as ``<server>__<tool>`` in ``available_tools`` and a whole server in
``available_connectors``. :func:`resolve_for_run` starts the servers those names point at (through
the process's broker), and returns a :class:`~lev_nb.tools.ToolDef` per tool: the server's name
for it qualified by the server, its description and input schema as given, the ``ask`` default
policy, and a handler that calls it through the broker. A name whose server is not configured,
did not start, or does not offer the tool gets a warning; a tool of a server that did not start
stays registered (not advertised), so a call to it anyway is answered with the cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.records import record
from lev_nb.settings.mcp_servers import McpServer
from lev_nb.tools.context import ToolContext
from lev_nb.tools.registry import Handler, ToolDef
from lev_nb.mcp.client.broker import ServerStatus, broker
from lev_nb.blueprint.mcp_names import qualified, server_prefixes, split_qualified

__all__ = ["RunMcp", "mcp_names", "resolve_for_run"]


@record(frozen=False)
class RunMcp:
    """What a run gets from MCP: ``tools`` to register, the names of those not to advertise
    (``hidden``: their server is not there), each connector's tool names, the servers' statuses
    (for the run view) and the warnings to give."""

    tools: list[ToolDef] = field(default_factory=list)
    hidden: set[str] = field(default_factory=set)
    connectors: dict[str, list[str]] = field(default_factory=dict)
    statuses: list[ServerStatus] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def mcp_names(tool_names: Iterable[str]) -> list[str]:
    """The names among ``tool_names`` spelled as MCP tools (``server__tool``)."""
    return [n for n in tool_names if split_qualified(n) is not None]


def _call_handler(server: str, tool: str, shown: str, timeout: float) -> Handler:
    async def handle(ctx: ToolContext, args: dict[str, Any]) -> str:
        return await broker().call(server, tool, args, timeout=timeout, shown_as=shown)
    return handle


def _failing_handler(shown: str, cause: str) -> Handler:
    async def handle(ctx: ToolContext, args: dict[str, Any]) -> str:
        return f"[error] {shown}: {cause}"
    return handle


def _unavailable(name: str, cause: str) -> ToolDef:
    return ToolDef(name=name, description=f"(unavailable: {cause})",
                   parameters={"type": "object"}, handler=_failing_handler(name, cause))


async def resolve_for_run(tool_names: Iterable[str], connectors: Iterable[str], servers: tuple[McpServer, ...], *,
                          run_id: str, run_dir: Path, call_timeout: float, connect_timeout: float,
                          max_restarts: int) -> RunMcp:
    """Start the servers a run's stages name and return its MCP tools (see the module docstring).

    ``tool_names`` are every stage's ``available_tools`` and ``connectors`` every stage's
    ``available_connectors``; ``servers`` is the configuration's ``[[mcp_servers]]``.
    """
    out = RunMcp()
    explicit = sorted(set(mcp_names(tool_names)))
    connector_names = sorted(set(connectors))
    if not explicit and not connector_names:
        return out
    prefixes = server_prefixes(s.name for s in servers)
    by_prefix = {prefixes[s.name]: s for s in servers}
    by_name = {s.name: s for s in servers}
    wanted: dict[str, McpServer] = {}
    named_tools: list[tuple[str, McpServer, str]] = []  # (advertised name, server, tool part)
    for name in explicit:
        prefix, tool = split_qualified(name) or ("", "")
        server = by_prefix.get(prefix) or by_name.get(prefix)
        if server is None:
            out.warnings.append(f"the blueprint grants '{name}', but no MCP server '{prefix}' is configured "
                                "([[mcp_servers]] in config.toml; see lev mcp add), so it is not offered")
            continue
        wanted[server.name] = server
        named_tools.append((name, server, tool))
    for name in connector_names:
        server = by_name.get(name) or by_prefix.get(name)
        if server is None:
            out.warnings.append(f"the blueprint names the connector '{name}', but no MCP server '{name}' is "
                                "configured ([[mcp_servers]] in config.toml), so it grants nothing")
            continue
        wanted[server.name] = server
    if not wanted:
        return out
    hub = broker()
    hub.attach(run_id, run_dir)
    out.statuses = await hub.start(wanted.values(), connect_timeout=connect_timeout, max_restarts=max_restarts)
    status_of = {s.name: s for s in out.statuses}
    registered: set[str] = set()
    for status in out.statuses:
        if status.error is not None:
            out.warnings.append(f"{status.error}; its tools are not offered")
            continue
        prefix = prefixes[status.name]
        names = []
        for info in status.tools:
            shown = qualified(prefix, info.name)
            names.append(shown)
            if shown in registered:
                continue
            registered.add(shown)
            out.tools.append(ToolDef(
                name=shown, description=info.description or f"Tool '{info.name}' of MCP server '{status.name}'.",
                parameters=info.input_schema, readonly=info.read_only,
                handler=_call_handler(status.name, info.name, shown, call_timeout)))
        out.connectors[status.name] = out.connectors[prefix] = names
    for name, server, tool in named_tools:
        status = status_of[server.name]
        if status.error is not None:
            out.tools.append(_unavailable(name, status.error))
            out.hidden.add(name)
        elif name not in registered and qualified(prefixes[server.name], tool) not in registered:
            offered = ", ".join(t.name for t in status.tools) or "none"
            cause = f"MCP server '{server.name}' offers no tool '{tool}' (it offers: {offered})"
            out.warnings.append(f"the blueprint grants '{name}', but {cause}")
            out.tools.append(_unavailable(name, cause))
            out.hidden.add(name)
    return out

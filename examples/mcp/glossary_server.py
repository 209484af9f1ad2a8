"""A small MCP server: a glossary of lev_nb's terms, and a unit converter. Offline, no key.

Written with the official SDK's FastMCP (called ``MCPServer`` since mcp 2). Run it over stdio, as
``lev`` starts it from ``[[mcp_servers]]``::

    lev mcp add glossary --command python --arg examples/mcp/glossary_server.py
    lev mcp test glossary

or over streamable HTTP on 127.0.0.1 (``--port 8765``; the endpoint is ``/mcp``).
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("glossary", instructions="Look up lev_nb terms; convert units.")

TERMS = {
    "blueprint": "A TOML file (agent.leviath) describing an agent as a graph of stages.",
    "stage": "One step of an agent, with its own model, tools, context and transitions.",
    "context region": "A named part of the model's context with its own budget and eviction rule.",
    "transition": "An edge between stages, chosen by the model (a hint) or fired by the runtime (a condition).",
    "connector": "An MCP server granted to a stage as a whole: every tool it advertises.",
    "final output": "The validated answer a run ends with, submitted through submit_output.",
}

FACTORS = {("km", "mi"): 0.621371, ("mi", "km"): 1.609344, ("kg", "lb"): 2.204623, ("lb", "kg"): 0.453592}


@server.tool()
def define(term: str) -> str:
    """The meaning of a lev_nb term (blueprint, stage, context region, transition, connector, final output)."""
    meaning = TERMS.get(term.strip().lower())
    if meaning is None:
        raise ToolError(f"'{term}' is not in the glossary; known terms: {', '.join(sorted(TERMS))}")
    return meaning


@server.tool()
def terms() -> list[str]:
    """Every term the glossary knows."""
    return sorted(TERMS)


@server.tool()
def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a value between km and mi, or kg and lb."""
    factor = FACTORS.get((from_unit.lower(), to_unit.lower()))
    if factor is None:
        raise ToolError(f"cannot convert {from_unit} to {to_unit}")
    return round(value * factor, 4)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    options = parser.parse_args()
    if options.port:
        server.run("streamable-http", host="127.0.0.1", port=options.port)
    else:
        server.run()

"""An MCP server written with the SDK (MCPServer, the SDK's FastMCP) for the MCP tests.

``python probe_server.py`` serves stdio; ``--http PORT`` serves streamable HTTP and ``--sse PORT``
the legacy HTTP+SSE transport, both on 127.0.0.1. Its tools misbehave on demand: ``crash`` exits
mid-call, ``hang`` never answers, ``noisy`` writes lines that are not JSON-RPC onto stdout before
it answers. ``whoami`` answers with the Authorization header an HTTP client sent.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import time

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("probe")
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def forecast(city: str) -> dict[str, object]:
    """A made-up forecast for a city, as structured content."""
    return {"city": city, "sky": "clear", "high_c": 21}


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PIXEL, format="png")


@server.tool()
def fail(reason: str) -> str:
    """Fail with the given reason."""
    raise ToolError(reason)


@server.tool()
def crash() -> str:
    """Exit the whole server in the middle of the call."""
    print("probe: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    time.sleep(3600)
    return "woke up"


@server.tool()
def noisy() -> str:
    """Write lines that are not JSON-RPC onto stdout, then answer."""
    os.write(1, b"this is not JSON-RPC\n{broken json\n")
    return "answered after the noise"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress, then answer."""
    await ctx.report_progress(0, seconds)
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header of the HTTP request (empty on stdio)."""
    headers = ctx.request_context.request.headers if ctx.request_context.request is not None else {}
    return headers.get("authorization", "")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    options = parser.parse_args()
    print(f"probe: started (pid {os.getpid()})", file=sys.stderr, flush=True)
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    elif options.sse:
        server.run("sse", host="127.0.0.1", port=options.sse)
    else:
        server.run()

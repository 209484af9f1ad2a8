"""``lev mcp serve``: an MCP server whose tools are agents, on the SDK's low-level ``Server``
(each tool's schema is the blueprint's own inputs, known only at start, so no decorator fits).

A call starts a run of the agent on the engine thread with the launch options of ``serve``
(``--model``, ``--allow``, ``--yolo``; nobody is there to approve, so an ``ask`` tool is denied
unless allowed), reports progress as the run enters stages and calls tools, and answers with the
run's final output (an error result when the run does not complete). A cancelled request cancels
its run. Served over stdio (stdout is the protocol: nothing else may print there) or streamable
HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from lev_nb.mcp.server.agents import ServedAgent, ServeError, served_agents

__all__ = ["build_server", "serve"]


def _text_result(text: str, *, error: bool = False, meta: dict[str, Any] | None = None) -> Any:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error,
                          structured_content=meta)


def _progress_line(event: Any) -> str | None:
    kind = event.kind
    if kind == "stage_entered":
        return f"stage '{event.stage}'" + (f" (visit {event.visit})" if event.visit > 1 else "")
    if kind == "tool_started":
        return f"[{event.stage}] tool {event.tool}"
    if kind == "warning":
        return f"warning: {event.message}"
    return None


async def run_agent(agent: ServedAgent, arguments: dict[str, Any], report: Any, *, model: str | None,
                    allow: Iterable[str], yolo: bool, workdir: str | None) -> Any:
    """Run ``agent`` on ``arguments`` and answer as a ``CallToolResult``; ``report(step, message)``
    is awaited for each progress step."""
    from lev_nb.engine.api import start_run
    from lev_nb.errors import UsageError
    from lev_nb.scripting import ScriptError

    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        return _text_result("give the agent a task (the 'task' argument)", error=True)
    inputs: dict[str, Any] = {k: str(v) for k, v in arguments.items()
                              if k != "task" and any(k == key for key, _ in agent.inputs)}
    try:
        run = start_run(agent.blueprint, task=task, model=model, workdir=workdir, allow=list(allow) or None,
                        yolo=yolo, interactive=False, **inputs)
    except (UsageError, ScriptError, ValueError) as exc:
        return _text_result(f"the run could not start: {exc}", error=True)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue()

    def on_event(event: Any) -> None:  # on the engine thread
        line = _progress_line(event)
        if line is not None:
            loop.call_soon_threadsafe(queue.put_nowait, line)

    run.events.subscribe(on_event)

    async def pump() -> None:
        step = 0
        while True:
            line = await queue.get()
            step += 1
            try:
                await report(step, line)
            except Exception:  # a client that went away does not stop the run
                pass

    pumping = asyncio.ensure_future(pump())
    try:
        await run
    except asyncio.CancelledError:
        run.cancel()
        raise
    finally:
        run.events.unsubscribe(on_event)
        await asyncio.sleep(0)  # let the last progress lines out
        pumping.cancel()
    meta = {"run_id": run.run_id, "status": run.status, "agent": agent.blueprint.name}
    if run.status != "complete":
        return _text_result(f"the run {run.run_id} ended {run.status}: {run.error or 'no reason given'}",
                            error=True, meta=meta)
    output = run.result
    if output is None:
        return _text_result(f"the run {run.run_id} completed without a final output", meta=meta)
    meta["format"] = output.format
    return _text_result(output.content, meta=meta)


def build_server(agents: list[ServedAgent], *, model: str | None = None, allow: Iterable[str] = (),
                 yolo: bool = False, workdir: str | None = None) -> Any:
    """The low-level MCP ``Server`` offering ``agents`` as tools."""
    from mcp.server import Server
    from mcp.types import ListToolsResult, Tool

    from lev_nb.version import __version__

    by_name = {a.name: a for a in agents}
    allowed = list(allow)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return ListToolsResult(tools=[Tool(name=a.name, description=a.description, input_schema=a.input_schema())
                                      for a in agents])

    async def call_tool(ctx: Any, params: Any) -> Any:
        agent = by_name.get(params.name)
        if agent is None:
            return _text_result(f"no agent named '{params.name}' is served here (tools: {', '.join(by_name)})",
                                error=True)

        async def report(step: int, message: str) -> None:
            await ctx.session.report_progress(step, None, message)

        return await run_agent(agent, dict(params.arguments or {}), report, model=model, allow=allowed, yolo=yolo,
                               workdir=workdir)

    return Server("lev_nb", version=__version__, instructions="Each tool runs a lev_nb agent on a task.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(specs: list[str], *, port: int | None = None, model: str | None = None, allow: Iterable[str] = (),
          yolo: bool = False, workdir: str | None = None) -> None:
    """Serve the agents named by ``specs`` until the client goes away (stdio) or Ctrl-C (``port``:
    streamable HTTP on 127.0.0.1:PORT/mcp). Raises :class:`ServeError` for what cannot start."""
    import anyio

    agents = served_agents(specs)
    server = build_server(agents, model=model, allow=allow, yolo=yolo, workdir=workdir)
    if port is None:
        from mcp.server.stdio import stdio_server

        async def over_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(over_stdio)
        return
    import socket
    import sys

    import uvicorn

    with socket.socket() as probe:  # uvicorn would exit the process on a taken port
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ServeError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    app = server.streamable_http_app(host="127.0.0.1")
    print(f"lev mcp serve: {', '.join(a.name for a in agents)} on http://127.0.0.1:{port}/mcp", file=sys.stderr)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    uvicorn.Server(config).run()

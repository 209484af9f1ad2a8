"""One configured MCP server, live on the broker's loop: started on demand, restarted a bounded
number of times, and every failure turned into a message that names the server and the cause.

The SDK's ``Client`` is entered and left by one long-lived task (its transport's task groups must
be), which holds the connection until it is stopped; calls from any task on the broker's loop use
it meanwhile. A stdio server talks JSON-RPC on stdout; its stderr goes to a :class:`StderrTee`.
An HTTP server is tried as streamable HTTP first and, if that is refused, as the legacy HTTP+SSE
transport. ``${VAR}`` in ``env`` and ``headers`` is expanded when the connection is made.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from lev_nb.errors import CALLEE_ERRORS
from lev_nb.settings.mcp_servers import McpServer
from lev_nb.mcp.client.stderr import StderrTee

__all__ = ["McpUnavailable", "ServerConnection", "expand_vars"]

log = logging.getLogger(__name__)
LAST_WORDS_WAIT_S = 3.0  # how long a crash's report waits for the rest of the server's stderr
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpUnavailable(Exception):
    """A server cannot answer: it did not start, crashed, timed out or said something unreadable.
    The message names the server and the cause, for the tool result and the run's warnings."""


def expand_vars(value: str, environ: dict[str, str] | None = None) -> str:
    """``value`` with each ``${VAR}`` replaced by the environment variable (empty when unset)."""
    env = os.environ if environ is None else environ
    return _VAR.sub(lambda m: env.get(m.group(1), ""), value)


def missing_vars(values: dict[str, str] | Any) -> list[str]:
    """The ``${VAR}`` names in ``values`` that the environment does not set."""
    return sorted({m.group(1) for v in values.values() for m in _VAR.finditer(v) if m.group(1) not in os.environ})


def _cause(exc: BaseException) -> str:
    """The readable cause inside an exception (an ExceptionGroup from a task group included)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    text = str(exc).strip()
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        text = message
    return text or type(exc).__name__


class ServerConnection:
    """The live connection to one server (used only on the broker's loop).

    ``tools`` is the server's tool list (``mcp.types.Tool``) once started. ``runs`` and ``lock`` are
    the broker's attached runs (their folders receive the stderr).
    """

    def __init__(self, server: McpServer, *, connect_timeout: float, max_restarts: int,
                 runs: dict[str, Path], lock: threading.Lock) -> None:
        self.server = server
        self.connect_timeout = connect_timeout
        self.max_restarts = max_restarts
        self.tools: list[Any] = []
        self.error: str | None = None
        self.starts = 0
        self._runs = runs
        self._lock = lock
        self._client: Any = None
        self._ready: asyncio.Future[None] | None = None
        self._life: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._tee: StderrTee | None = None

    # -- starting ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The server's configured name."""
        return self.server.name

    @property
    def alive(self) -> bool:
        """True while a started connection is held."""
        return self._client is not None

    async def ensure(self) -> None:
        """Start the server unless it is running; concurrent callers share one start.

        Raises :class:`McpUnavailable` when it cannot be started (or was restarted too often).
        """
        if self._client is not None:
            return
        if self._ready is None or (self._ready.done() and self._client is None):
            if self.starts > self.max_restarts:
                raise McpUnavailable(
                    f"MCP server '{self.name}' stopped {self.starts} times and is not started again in this "
                    f"process ({self.error or 'no cause known'})")
            self.starts += 1
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._closing = asyncio.Event()
            self._life = loop.create_task(self._hold(self._ready, self._closing))
        ready = self._ready
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except asyncio.TimeoutError:
            self._fail(f"MCP server '{self.name}' did not answer within {self.connect_timeout:g}s of starting"
                       f"{self._stderr_hint()}")
            if self._life is not None:
                self._life.cancel()
            raise McpUnavailable(self.error) from None

    def _fail(self, message: str) -> None:
        """Record why the connection is gone and let its holder close it."""
        self.error = message
        self._client = None
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(McpUnavailable(message))
            self._ready.exception()  # retrieved: a start nobody awaits any more must not warn
        if self._closing is not None:
            self._closing.set()

    def _stderr_hint(self) -> str:
        line = self._tee.last_line() if self._tee is not None else None
        return f"; its last stderr line: {line.strip()[:300]}" if line else ""

    async def _hold(self, ready: asyncio.Future[None], closing: asyncio.Event) -> None:
        """Enter the SDK client, list the tools, hold the connection until asked to close.

        Each start is one life with its own stderr pipe: what an earlier life does as it ends (its
        pipe closing, its ``finally``) never touches a later one.
        """
        life = self.starts
        tee = None
        if self.server.transport == "stdio":
            tee = self._tee = StderrTee(self.name, self._runs, self._lock, lambda: self._process_ended(life))
        client = None
        try:
            async with AsyncExitStack() as stack:
                client = await self._connect(stack, tee)
                tools = await self._list_tools(client)
                if ready.done():  # timed out meanwhile
                    return
                self.tools, self._client, self.error = tools, client, None
                ready.set_result(None)
                await closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(McpUnavailable(f"MCP server '{self.name}' was stopped while starting"))
                ready.exception()
            raise
        except (Exception, BaseExceptionGroup) as exc:  # whatever the server did, it is a cause, not a crash
            log.debug("MCP server %s failed", self.name, exc_info=True)
            if not ready.done():
                self._fail(f"MCP server '{self.name}' could not be started: {_cause(exc)}{self._stderr_hint()}")
        finally:
            if client is not None and self._client is client:
                self._client = None
            if tee is not None:
                tee.spawned()

    async def _connect(self, stack: AsyncExitStack, tee: StderrTee | None) -> Any:
        try:
            from mcp import Client
        except ImportError:
            raise RuntimeError("the mcp package is not installed (pip install 'lev_nb[mcp]')") from None
        from mcp.types import Implementation

        from lev_nb.version import __version__

        info = Implementation(name="lev_nb", version=__version__)
        if self.server.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            assert tee is not None and tee.writer is not None
            params = StdioServerParameters(
                command=str(self.server.command), args=list(self.server.args),
                env={k: expand_vars(v) for k, v in self.server.env.items()} or None)
            client = Client(stdio_client(params, errlog=tee.writer), client_info=info)
            try:
                return await stack.enter_async_context(client)
            finally:
                tee.spawned()
        headers = {k: expand_vars(v) for k, v in self.server.headers.items()}
        url = str(self.server.url)
        try:
            return await self._enter_streamable(stack, url, headers, info)
        except (Exception, BaseExceptionGroup) as first:
            if isinstance(first, (ConnectionError, OSError)) or "connect" in type(_inner(first)).__name__.lower():
                raise  # nothing listens there: SSE would not do better
            try:
                return await self._enter_sse(stack, url, headers, info)
            except (Exception, BaseExceptionGroup):
                raise first from None

    async def _enter_streamable(self, stack: AsyncExitStack, url: str, headers: dict[str, str], info: Any) -> Any:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        inner = AsyncExitStack()
        await inner.__aenter__()
        try:
            http = await inner.enter_async_context(create_mcp_http_client(headers=headers or None))
            client = await inner.enter_async_context(
                Client(streamable_http_client(url, http_client=http), client_info=info))
        except BaseException:
            await inner.__aexit__(*sys.exc_info())
            raise
        stack.push_async_exit(inner)
        return client

    async def _enter_sse(self, stack: AsyncExitStack, url: str, headers: dict[str, str], info: Any) -> Any:
        from mcp import Client
        from mcp.client.sse import sse_client

        return await stack.enter_async_context(
            Client(sse_client(url, headers=headers or None), client_info=info, mode="legacy"))

    async def _list_tools(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang the start
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    def _process_ended(self, life: int) -> None:
        """Called from the stderr thread when the process of start number ``life`` has gone."""
        loop = self._life.get_loop() if self._life is not None else None
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._ended, life)
        except RuntimeError:
            pass

    def _ended(self, life: int) -> None:
        if life == self.starts and self._client is not None:  # the current process, not an earlier one
            self._fail(f"MCP server '{self.name}' exited{self._stderr_hint()}")

    # -- calling ----------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        """Call ``tool`` and return its ``CallToolResult``; raises :class:`McpUnavailable` (and
        ``TimeoutError`` for a call the server did not answer in ``timeout`` seconds)."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        await self.ensure()
        client = self._client
        if client is None:
            raise McpUnavailable(self.error or f"MCP server '{self.name}' is not running")
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments, read_timeout_seconds=timeout),
                                          timeout + 5)
        except asyncio.TimeoutError:
            raise TimeoutError from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise TimeoutError from None
            if exc.code == CONNECTION_CLOSED:
                tee = self._tee
                if tee is not None:  # its last words explain the crash: wait (briefly) for them
                    await asyncio.to_thread(tee.ended.wait, LAST_WORDS_WAIT_S)
                message = f"MCP server '{self.name}' closed the connection during the call{self._stderr_hint()}"
                if self._client is client:  # not a connection started again meanwhile
                    self._fail(message)
                raise McpUnavailable(message) from None
            raise McpUnavailable(f"MCP server '{self.name}' refused the call: {exc.message}") from None
        except CALLEE_ERRORS as exc:
            raise McpUnavailable(f"MCP server '{self.name}' gave an answer that could not be read: "
                                 f"{_cause(exc)}") from None

    async def stop(self) -> None:
        """Close the connection (a stdio server is stopped: stdin closed, then terminated)."""
        if self._closing is not None:
            self._closing.set()
        if self._life is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._life), 10)
            except (asyncio.TimeoutError, Exception):
                self._life.cancel()
        self._client = None


def _inner(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc

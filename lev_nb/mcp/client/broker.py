"""The process's one MCP broker: every server connection, on an event loop of its own.

The engine's loop is shared by every run of the process, so nothing an MCP server does may hold
it: the broker runs its connections on a daemon thread with its own asyncio loop, and the engine
awaits them through ``asyncio.wrap_future``. A server starts when a run first needs it, is shared
by every later run of the process (keyed by its configuration, so an edited entry starts afresh),
and is stopped when the process ends. Runs attach their folders to receive the stderr of the
stdio servers they use.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from lev_nb.records import record
from lev_nb.settings.mcp_servers import McpServer
from lev_nb.mcp.client.connection import McpUnavailable, ServerConnection
from lev_nb.mcp.client.results import result_text

__all__ = ["McpBroker", "ServerStatus", "ToolInfo", "broker"]

T = TypeVar("T")
log = logging.getLogger(__name__)


@record
class ToolInfo:
    """One tool a server offers, as it describes it (its schema goes to the model unchanged)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False


@record
class ServerStatus:
    """A server after a start attempt: its tools, or why it has none (``error``)."""

    name: str
    transport: str
    tools: tuple[ToolInfo, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``lev mcp test --json``, the run's ``mcp_servers`` event)."""
        return {"name": self.name, "transport": self.transport, "error": self.error,
                "tools": [t.name for t in self.tools]}


def _quiet_sdk_logs() -> None:
    """The SDK logs a server's garbage line with a traceback; it is the server's fault, reported
    as a tool error, and must not print into the user's terminal or notebook."""
    for name in ("mcp", "httpx2", "httpx"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


class McpBroker:
    """Connections to the configured servers, run on a loop thread of their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._runs: dict[str, Path] = {}  # run id -> run folder (receives stdio stderr)

    # -- the loop ---------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                _quiet_sdk_logs()
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="lev-mcp-broker", daemon=True)
                self._thread.start()
                started.wait()
                self._loop = loop
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the broker's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    async def _on_broker(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the broker's loop from any other loop (the caller's loop stays free)."""
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the broker's loop and wait for it (for the CLI, never on the engine loop)."""
        return self.submit(coro).result(timeout)

    # -- runs -------------------------------------------------------------------------------
    def attach(self, run_id: str, run_dir: Path) -> None:
        """Let ``run_dir`` receive the stderr of the stdio servers from now on."""
        with self._lock:
            self._runs[run_id] = run_dir

    def detach(self, run_id: str) -> None:
        """The run has ended: its folder receives nothing more."""
        with self._lock:
            self._runs.pop(run_id, None)

    # -- servers ----------------------------------------------------------------------------
    def _connection(self, server: McpServer, connect_timeout: float, max_restarts: int) -> ServerConnection:
        conn = self._connections.get(server.name)
        if conn is None or conn.server != server:
            if conn is not None:
                asyncio.get_running_loop().create_task(conn.stop())  # the entry was edited
            conn = ServerConnection(server, connect_timeout=connect_timeout, max_restarts=max_restarts,
                                    runs=self._runs, lock=self._lock)
            self._connections[server.name] = conn
        conn.connect_timeout, conn.max_restarts = connect_timeout, max_restarts
        return conn

    async def start(self, servers: Iterable[McpServer], *, connect_timeout: float = 30,
                    max_restarts: int = 3) -> list[ServerStatus]:
        """Start ``servers`` (those not running yet), all at once; a status for each, in order.

        Awaitable from any loop. A server that cannot start has ``error`` set; nothing raises.
        """
        return await self._on_broker(self._start(list(servers), connect_timeout, max_restarts))

    async def _start(self, servers: list[McpServer], connect_timeout: float, max_restarts: int) -> list[ServerStatus]:
        conns = [self._connection(s, connect_timeout, max_restarts) for s in servers]
        outcomes = await asyncio.gather(*(c.ensure() for c in conns), return_exceptions=True)
        statuses = []
        for conn, outcome in zip(conns, outcomes):
            error = None
            if isinstance(outcome, BaseException):
                error = str(outcome) if isinstance(outcome, McpUnavailable) else (
                    f"MCP server '{conn.name}' could not be started: {outcome}")
            statuses.append(ServerStatus(
                name=conn.name, transport=conn.server.transport, error=error,
                tools=() if error else tuple(_info(t) for t in conn.tools)))
        return statuses

    async def call(self, server: str, tool: str, arguments: dict[str, Any], *, timeout: float,
                   shown_as: str) -> str:
        """Call ``tool`` on ``server`` and return the tool-result text (``shown_as`` is the name the
        model called it by). Never raises for anything the server does: a failure is an
        ``[error]`` or ``[timed out]`` result naming the server and the cause."""
        return await self._on_broker(self._call(server, tool, arguments, timeout, shown_as))

    async def _call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float, shown_as: str) -> str:
        conn = self._connections.get(server)
        if conn is None:
            return f"[error] {shown_as}: MCP server '{server}' was never started in this process"
        try:
            result = await conn.call(tool, arguments, timeout)
        except TimeoutError:
            return (f"[timed out] {shown_as}: MCP server '{server}' did not answer within {timeout:g}s "
                    "([limits] mcp_call_timeout_secs)")
        except McpUnavailable as exc:
            return f"[error] {shown_as}: {exc}"
        try:
            return result_text(shown_as, result)
        except Exception as exc:  # a result shape the SDK accepted but we cannot read
            return f"[error] {shown_as}: MCP server '{server}' answered with a result that could not be read: {exc}"

    def running(self) -> list[str]:
        """Names of the servers with a live connection."""
        return [name for name, conn in self._connections.items() if conn.alive]

    async def _stop_all(self) -> None:
        conns = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.stop() for c in conns), return_exceptions=True)

    def shutdown(self, timeout: float = 15) -> None:
        """Stop every server and the loop (at process exit; a later call starts afresh)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError, Exception):
            log.debug("MCP servers did not all stop in time", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=2)


def _info(tool: Any) -> ToolInfo:
    annotations = getattr(tool, "annotations", None)
    return ToolInfo(name=str(tool.name), description=str(tool.description or tool.title or ""),
                    input_schema=dict(tool.input_schema or {"type": "object", "properties": {}}),
                    read_only=bool(annotations is not None and annotations.read_only_hint))


_BROKER: McpBroker | None = None
_BROKER_LOCK = threading.Lock()


def broker() -> McpBroker:
    """The process's broker (made on first use; its servers stop when the process ends)."""
    global _BROKER
    with _BROKER_LOCK:
        if _BROKER is None:
            _BROKER = McpBroker()
            atexit.register(_BROKER.shutdown)
        return _BROKER

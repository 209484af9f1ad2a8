"""Script HTTP on the event loop, for provider scripts the loop serves (``Engine.call_async``).

The rules are :mod:`lev_nb.providers.script_http`'s, taken from there: the address policy checked
for every address of every hop, at most five redirects with the credential headers dropped when
the origin changes, one deadline for the whole call (every hop, retry and read, and an event stream
to its end), two retries on transport faults, the body limits and the failure kinds a script sees.
What differs is only the transport: asyncio streams, with h11 reading and writing HTTP/1.1, so a
call waiting on the network holds no thread and costs its loop a wake-up when bytes arrive.
Connections go to the checked address (the host name kept for the Host header and TLS) and are
kept alive per loop (:class:`_Pool`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

import h11

from lev_nb.providers.script_http import (
    BODY_LIMIT,
    ERROR_BODY_LIMIT,
    KEEP_IDLE_S,
    MAX_REDIRECTS,
    POOL_MAX,
    EventStream,
    ScriptHttpError,
    _Target,
    admit,
    body_text,
    content_error,
    keep_addresses,
    known_addresses,
    parse_url,
    redirect,
    resolve_error,
    retry_pause,
    status_error,
    timeout_error,
    tls_context,
)

__all__ = ["check_url", "request", "sse_payloads"]

_READ = 65536
# Bytes read from a connection but not yet handed to h11, past which reading pauses.
_PENDING_MAX = 4 * _READ
# What the connection may throw when the server or the network fails it.
_TRANSPORT_FAULTS = (OSError, h11.RemoteProtocolError, ssl.SSLError, EOFError)


class _Connection(asyncio.BufferedProtocol):
    """One kept-alive HTTP/1.1 connection to a checked address: the loop's protocol for it, read
    into h11 as the exchange asks.

    The loop reads into the receive buffer its pool shares (``get_buffer``; each read is copied
    out before the loop reads again): asyncio streams read into a fresh 256 KiB allocation for
    every read, which the C library maps and unmaps, three system calls on every answer.
    """

    __slots__ = ("_buffer", "_eof", "_error", "_pending", "_pending_size", "_paused", "_waiter", "http",
                 "transport")

    def __init__(self, buffer: memoryview) -> None:
        self._buffer = buffer
        self.http = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._paused = False
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    # -- the loop's side ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102 (asyncio's)
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:  # noqa: D102 (asyncio's)
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:  # noqa: D102 (asyncio's)
        self._pending.append(bytes(self._buffer[:nbytes]))
        self._pending_size += nbytes
        if self._pending_size > _PENDING_MAX and self.transport is not None and not self._paused:
            self._paused = True  # nobody is reading: the server waits, as it would for a stream
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:  # noqa: D102 (asyncio's)
        self._eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102 (asyncio's)
        if exc is not None and self._error is None:
            self._error = exc
        self._eof = True
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the exchange's side --------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Send ``data`` (a request is small: the transport buffers what the socket does not take)."""
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        self.transport.write(data)

    async def next_event(self) -> Any:
        """The next thing the server said (h11's events), reading as needed."""
        while True:
            event = self.http.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self._pending:
                chunks, self._pending, self._pending_size = self._pending, [], 0
                self.http.receive_data(chunks[0] if len(chunks) == 1 else b"".join(chunks))
                if self._paused and self.transport is not None:
                    self._paused = False
                    self.transport.resume_reading()
            elif self._error is not None:
                raise self._error
            elif self._eof:
                self.http.receive_data(b"")  # h11 says whether the answer was whole
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter

    def reusable(self) -> bool:
        """Whether the exchange ended cleanly and both sides keep the connection; if so it is
        made ready for the next one."""
        if self.http.our_state is h11.DONE and self.http.their_state is h11.DONE and not self._eof:
            self.http.start_next_cycle()
            return True
        return False

    def closing(self) -> bool:
        """Whether the connection is closed or closing (a kept one the server hung up on)."""
        return self.transport is None or self.transport.is_closing() or self._eof

    def close(self) -> None:
        """Drop the connection at once."""
        if self.transport is not None:
            self.transport.abort()


_Key = tuple[str, str, int, str]


class _Pool:
    """Idle keep-alive connections of one loop, by (scheme, host, port, checked address)."""

    def __init__(self) -> None:
        self.idle: dict[_Key, list[tuple[_Connection, float]]] = {}
        # The receive buffer of every connection of the loop, as a view: asyncio's TLS reader fills
        # the rest of a buffer through a slice of it, which must be a view, not a copy.
        self.buffer = memoryview(bytearray(_READ))

    def take(self, key: _Key) -> _Connection | None:
        """An idle connection for ``key`` not older than ``KEEP_IDLE_S``, or None."""
        idle = self.idle.get(key)
        now = time.monotonic()
        while idle:
            connection, since = idle.pop()
            if now - since < KEEP_IDLE_S and not connection.closing():
                return connection
            connection.close()
        return None

    def give(self, key: _Key, connection: _Connection) -> None:
        """Keep ``connection`` for the next call to ``key`` (closed when enough are kept)."""
        idle = self.idle.setdefault(key, [])
        if len(idle) < POOL_MAX:
            idle.append((connection, time.monotonic()))
        else:
            connection.close()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = weakref.WeakKeyDictionary()


def _pool() -> _Pool:
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool()
    return pool


class _Exchange:
    """One call in progress: its deadline, and the connection answering it."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.at = asyncio.get_running_loop().time() + timeout if timeout else None
        self.key: _Key | None = None
        self.connection: _Connection | None = None

    def within(self) -> asyncio.Timeout:
        """A scope that ends with a TimeoutError when the call's time is up."""
        return asyncio.timeout_at(self.at)

    def remaining(self) -> float:
        """Seconds left (a large number without a deadline)."""
        return 3600.0 if self.at is None else max(0.0, self.at - asyncio.get_running_loop().time())

    def done(self, whole: bool) -> None:
        """The answer was read (``whole``: to its end): the connection goes back to the pool
        when both sides keep it, else it is closed."""
        connection, self.connection = self.connection, None
        if connection is None:
            return
        if whole and self.key is not None and connection.reusable():
            _pool().give(self.key, connection)
        else:
            connection.close()


async def check_url(url: str, *, allow_local: bool) -> _Target:
    """``script_http.check_url`` on the loop: the resolver, when asked, runs off the loop."""
    target = parse_url(url)
    addresses = known_addresses(target.host, target.port)
    if addresses is None:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise resolve_error(target.host, exc) from None
        addresses = keep_addresses(target.host, target.port, infos)
    return admit(target, addresses, allow_local=allow_local)


def _host_header(target: _Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = 443 if target.scheme == "https" else 80
    return host if target.port == default else f"{host}:{target.port}"


def _request(method: str, target: _Target, body: bytes | None, headers: dict[str, str]) -> h11.Request:
    """The request's head (refused as an ``api`` failure when a header cannot be sent)."""
    names = {name.lower() for name in headers}
    fields: list[tuple[bytes, bytes]] = []
    if "host" not in names:
        fields.append((b"Host", _host_header(target).encode("idna")))
    try:
        for name, value in headers.items():
            if name.lower() not in ("content-length", "transfer-encoding"):
                fields.append((name.encode("ascii"), value.encode("latin-1")))
        if "accept-encoding" not in names:
            fields.append((b"Accept-Encoding", b"identity"))
        if body is not None:
            fields.append((b"Content-Length", str(len(body)).encode()))
        return h11.Request(method=method, target=target.path.encode("utf-8"), headers=fields)
    except (UnicodeError, h11.LocalProtocolError) as exc:
        raise ScriptHttpError("api", f"invalid request: {exc}") from None


async def _connect(target: _Target) -> _Connection:
    tls = tls_context() if target.scheme == "https" else None
    buffer = _pool().buffer
    _transport, connection = await asyncio.get_running_loop().create_connection(
        lambda: _Connection(buffer), target.addresses[0], target.port, ssl=tls,
        server_hostname=target.host if tls else None)
    return connection


async def _send(exchange: _Exchange, target: _Target, method: str, body: bytes | None,
                headers: dict[str, str]) -> h11.Response:
    """Send the request to the first checked address, on a kept connection when there is one,
    retrying transport faults twice (a kept connection the server closed meanwhile is replaced
    without counting); the answer's head."""
    head = _request(method, target, body, headers)
    key: _Key = (target.scheme, target.host, target.port, target.addresses[0])
    pool = _pool()
    kept = pool.take(key)
    attempt = 0
    while True:
        reused = kept is not None
        connection = kept
        kept = None
        try:
            if connection is None:
                connection = await _connect(target)
            data = connection.http.send(head) or b""
            if body:
                data += connection.http.send(h11.Data(data=body)) or b""
            connection.write(data + (connection.http.send(h11.EndOfMessage()) or b""))
            while True:
                event = await connection.next_event()
                if isinstance(event, h11.Response):
                    exchange.key, exchange.connection = key, connection
                    return event
                if not isinstance(event, h11.InformationalResponse):
                    raise h11.RemoteProtocolError(f"unexpected {type(event).__name__} before the answer")
        except _TRANSPORT_FAULTS as exc:
            if connection is not None:
                connection.close()
            if reused:
                kept = pool.take(key)
                continue
            pause = retry_pause(exc, attempt)
            attempt += 1
            await asyncio.sleep(min(pause, exchange.remaining()))
        except BaseException:  # the deadline (a cancellation here) or the caller's cancellation
            if connection is not None:
                connection.close()
            raise


async def _read_body(exchange: _Exchange, limit: int) -> tuple[bytes, bool]:
    """The answer's body, up to a little past ``limit`` bytes, and whether it was read whole."""
    connection = exchange.connection
    assert connection is not None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await connection.next_event()
        if isinstance(event, h11.Data):
            chunks.append(bytes(event.data))
            size += len(event.data)
            if size > limit:
                return b"".join(chunks), False
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            return b"".join(chunks), True


def _header(response: h11.Response, name: bytes) -> str | None:
    for key, value in response.headers:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _open(exchange: _Exchange, method: str, url: str, body: str | None, headers: dict[str, str],
                allow_local: bool) -> h11.Response:
    """Send the request, following redirects (each hop checked, the credential rule applied);
    the final answer's head, its connection held by ``exchange``. (The caller bounds it, and
    every step below, by the call's deadline: one scope for the whole call.)"""
    origin = None
    for _hop in range(MAX_REDIRECTS + 1):
        target = await check_url(url, allow_local=allow_local)
        origin = origin or target.origin
        payload = body.encode("utf-8") if body is not None else None
        response = await _send(exchange, target, method, payload, headers)
        hop = redirect(url, response.status_code, _header(response, b"location"), method, body, headers, origin)
        if hop is None:
            return response
        _data, whole = await _read_body(exchange, BODY_LIMIT)
        exchange.done(whole)
        url, method, body, headers = hop
    raise ScriptHttpError("api", f"more than {MAX_REDIRECTS} redirects, the last to {url}")


async def _check_status(exchange: _Exchange, response: h11.Response) -> None:
    if 200 <= response.status_code < 300:
        return
    data, _whole = await _read_body(exchange, ERROR_BODY_LIMIT * 2)
    exchange.done(False)
    raise status_error(response.status_code, data.decode("utf-8", "replace"), _header(response, b"retry-after"))


async def request(method: str, url: str, body: str | None = None, headers: dict[str, str] | None = None, *,
                  timeout: float | None = 30.0, allow_local: bool = False) -> str:
    """``script_http.request`` on the loop: the body as text; ScriptHttpError on any failure, a
    ``transport`` one when the whole call takes longer than ``timeout`` seconds."""
    exchange = _Exchange(timeout)
    whole = False
    try:
        async with exchange.within():
            response = await _open(exchange, method, url, body, dict(headers or {}), allow_local)
            await _check_status(exchange, response)
            refused = content_error(_header(response, b"content-type"), _header(response, b"content-length"))
            if refused is not None:
                raise refused
            data, whole = await _read_body(exchange, BODY_LIMIT)
    except TimeoutError:
        raise timeout_error(timeout) from None
    except _TRANSPORT_FAULTS as exc:
        raise ScriptHttpError("transport", f"request failed: {type(exc).__name__}: {exc}") from None
    finally:
        exchange.done(whole)
    return body_text(data)


async def sse_payloads(url: str, body: str, headers: dict[str, str] | None = None, *,
                       timeout: float | None = 30.0, allow_local: bool = False) -> AsyncIterator[str]:
    """``script_http.sse_payloads`` on the loop: POST ``body`` and yield each event's ``data``
    as it arrives; the deadline covers the whole stream, a cut stream is a ``transport`` failure."""
    exchange = _Exchange(timeout)
    try:
        try:
            async with exchange.within():
                response = await _open(exchange, "POST", url, body, dict(headers or {}), allow_local)
                await _check_status(exchange, response)
        except TimeoutError:
            raise timeout_error(timeout) from None
        except _TRANSPORT_FAULTS as exc:
            raise ScriptHttpError("transport", f"request failed: {type(exc).__name__}: {exc}") from None
        connection = exchange.connection
        assert connection is not None
        events = EventStream()
        while not events.done:
            try:
                async with exchange.within():
                    event = await connection.next_event()
            except TimeoutError:
                raise timeout_error(timeout) from None
            except _TRANSPORT_FAULTS as exc:
                raise ScriptHttpError("transport", f"the event stream broke off: {type(exc).__name__}: {exc}") from None
            if isinstance(event, h11.Data):
                for payload in events.feed(bytes(event.data)):
                    yield payload
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                for payload in events.end():
                    yield payload
    finally:
        exchange.done(False)

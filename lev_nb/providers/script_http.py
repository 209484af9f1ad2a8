"""HTTP for Rhai provider scripts, held to an address policy (docs/rhai.md#host-functions).

Only http and https. Every address a host resolves to is checked, and so is every redirect hop (at
most five): loopback, private (RFC 1918), link-local (169.254.0.0/16 with the cloud metadata
address, fe80::/10), carrier-grade NAT, unspecified, multicast, broadcast, documentation and
benchmarking ranges, 192.0.0.0/24, 240.0.0.0/4, IPv6 unique-local, and the IPv4-mapped and NAT64
forms of all of these are refused unless the user sets ``[security] allow_local_network = true``.
The connection then goes to the address that was checked (the host name is kept for the Host
header and TLS), so a name cannot resolve to a public address for the check and a private one for
the connection.
A name's addresses are kept for 30 seconds (an IP literal is not looked up at all), and checked
again on every call all the same.

``timeout`` bounds the whole call (every hop, retry and read), not each read: a server that drips
a byte at a time cannot hold a run past it. A redirect to another origin (scheme, host or port)
loses the request's credential headers (``Authorization``, ``x-api-key``, ...), so a key meant for
one server never reaches another. (Event streams are a provider script's, read on the loop by
:mod:`lev_nb.providers.script_http_async` with :class:`EventStream` from here.)

Connections are kept alive between calls to the same checked address (:class:`_Pool`), and one
watcher thread expires every call's deadline.

Failures are :class:`ScriptHttpError` with the ``kind`` a provider script sees in the map it can
catch: ``rate_limited`` (429, with ``retry_after``), ``api`` (another non-2xx status, a refused
address, an unreadable body) or ``transport`` (the connection failed; retried twice first).
"""

from __future__ import annotations

import heapq
import http.client
import ipaddress
import itertools
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import field
from typing import Any

from lev_nb.records import record

__all__ = [
    "BODY_LIMIT",
    "CREDENTIAL_HEADERS",
    "MAX_REDIRECTS",
    "ScriptHttpError",
    "address_refusal",
    "check_url",
    "request",
]

MAX_REDIRECTS = 5
TRANSPORT_RETRIES = 2
# Under the provider engine's 2 MB string limit, so a large body cannot trip the (uncatchable) limit.
BODY_LIMIT = 1_900_000
DECLARED_LIMIT = 32 * 1024 * 1024
ERROR_BODY_LIMIT = 2000
_NON_TEXT_PREFIXES = ("image/", "audio/", "video/", "font/")
_NON_TEXT_TYPES = (
    "application/octet-stream", "application/pdf", "application/zip", "application/gzip", "application/x-tar",
    "application/x-bzip", "application/wasm", "application/vnd.", "application/msword",
)
# Headers that carry a credential: dropped when a redirect leaves the origin the call was made to.
CREDENTIAL_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_EXTRA_REFUSED = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32", "fc00::/7", "fe80::/10", "2001:db8::/32",
))


class ScriptHttpError(Exception):
    """A failed script HTTP call, as the map a script can catch: ``kind``, ``message``, ``retry_after``."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after

    def to_map(self) -> dict[str, Any]:
        """The map thrown into the script (``#{kind, message, retry_after?}``)."""
        data: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.retry_after is not None:
            data["retry_after"] = int(self.retry_after)
        return data


def timeout_error(timeout: float | None) -> ScriptHttpError:
    """The failure of a call with no complete answer within its ``timeout`` seconds."""
    return ScriptHttpError("transport", f"request failed: no complete answer within {timeout or 0:g} s")


def address_refusal(address: str) -> str | None:
    """Why a script may not reach ``address`` (an IP literal), or None when it is public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return address_refusal(str(ip.ipv4_mapped))
        if ip in _NAT64:
            return address_refusal(str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
        if ip.sixtofour is not None:
            return address_refusal(str(ip.sixtofour))
    checks = (
        ("loopback", ip.is_loopback), ("link-local", ip.is_link_local), ("private", ip.is_private),
        ("unspecified", ip.is_unspecified), ("multicast", ip.is_multicast), ("reserved", ip.is_reserved),
    )
    for label, hit in checks:
        if hit:
            return label
    if any(ip.version == net.version and ip in net for net in _EXTRA_REFUSED):
        return "not public"
    if not ip.is_global:
        return "not public"
    return None


@record(frozen=False)
class _Target:
    scheme: str
    host: str
    port: int
    path: str
    addresses: list[str] = field(default_factory=list)

    @property
    def origin(self) -> tuple[str, str, int | None]:
        """(scheme, host, port), as :func:`_origin` gives it for the URL."""
        return self.scheme.lower(), self.host.lower(), self.port


# Resolved addresses by (host, port), kept RESOLVED_S: a provider script calls the same host on
# every model call, and asking the resolver each time cost more than the rest of the call. Every
# address is still checked on every call (check_url), and connections go to checked addresses.
RESOLVED_S = 30.0
_RESOLVED_MAX = 256
_resolved: dict[tuple[str, int], tuple[list[str], float]] = {}


def _addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (an IP literal is its own), from the cache when fresh."""
    known = known_addresses(host, port)
    if known is not None:
        return known
    return keep_addresses(host, port, socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def parse_url(url: str) -> _Target:
    """The scheme, host, port and path of ``url`` (its addresses still to find); ScriptHttpError
    when it is not an http(s) URL with a host."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ScriptHttpError("api", f"only http and https URLs may be fetched, not '{parts.scheme or url}'")
    host = parts.hostname
    if not host:
        raise ScriptHttpError("api", f"the URL '{url}' names no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ScriptHttpError("api", f"the URL '{url}' has an invalid port") from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return _Target(parts.scheme, host, port, path)


def known_addresses(host: str, port: int) -> list[str] | None:
    """``host``'s addresses without asking the resolver: an IP literal's own, or the ones kept
    from a lookup less than :data:`RESOLVED_S` ago; None when the resolver must be asked."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    kept = _resolved.get((host, port))
    return kept[0] if kept is not None and kept[1] > time.monotonic() else None


def keep_addresses(host: str, port: int, infos: list[Any]) -> list[str]:
    """The addresses of a resolver answer (``getaddrinfo``'s list), kept for the next call."""
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if len(_resolved) >= _RESOLVED_MAX:
        _resolved.clear()
    _resolved[(host, port)] = (addresses, time.monotonic() + RESOLVED_S)
    return addresses


def resolve_error(host: str, exc: OSError) -> ScriptHttpError:
    """The failure of a host name that does not resolve."""
    return ScriptHttpError("transport", f"request failed: cannot resolve '{host}': {exc}")


def admit(target: _Target, addresses: list[str], *, allow_local: bool) -> _Target:
    """``target`` with its ``addresses``, each checked by the address policy (ScriptHttpError
    naming the first one refused)."""
    if not allow_local:
        for address in addresses:
            why = address_refusal(address)
            if why is not None:
                raise ScriptHttpError(
                    "api",
                    f"[denied] '{target.host}' resolves to {address} ({why}): script HTTP may reach public "
                    "addresses only; set [security] allow_local_network = true to allow local and private servers",
                )
    target.addresses = addresses
    return target


def check_url(url: str, *, allow_local: bool) -> _Target:
    """Parse ``url`` and resolve its host; ScriptHttpError when the URL or an address is refused."""
    target = parse_url(url)
    try:
        addresses = _addresses(target.host, target.port)
    except OSError as exc:
        raise resolve_error(target.host, exc) from None
    return admit(target, addresses, allow_local=allow_local)


class _Deadline:
    """One deadline for a whole call. Reads block on a socket; when the deadline passes, the
    watcher thread (one for the process, :class:`_Watcher`) shuts down the sockets of the call's
    connections, which wakes any read or write at once."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.at = time.monotonic() + timeout if timeout else None
        self.expired = False
        self.closed = False
        self._lock = threading.Lock()
        self._connections: list[http.client.HTTPConnection] = []
        if self.at is not None:
            WATCHER.add(self)

    def remaining(self) -> float | None:
        """Seconds left (None: no deadline); a ``transport`` ScriptHttpError once none are."""
        if self.at is None:
            return None
        left = self.at - time.monotonic()
        if left <= 0 or self.expired:
            raise self.error()
        return left

    def error(self) -> ScriptHttpError:
        """The failure a call that ran out of time ends with."""
        return timeout_error(self.timeout)

    def watch(self, connection: http.client.HTTPConnection) -> None:
        """Shut ``connection`` down when the deadline passes (at once if it has)."""
        with self._lock:
            self._connections.append(connection)
            if not self.expired:
                return
        _shut(connection)

    def expire(self) -> None:
        """The deadline passed (called by the watcher): shut the call's connections down."""
        with self._lock:
            if self.closed:
                return
            self.expired = True
            connections = list(self._connections)
        for connection in connections:
            _shut(connection)

    def close(self) -> None:
        """The call is over: its connections are no longer this deadline's to shut."""
        with self._lock:
            self.closed = True
            self._connections.clear()


class _Watcher:
    """The one thread that expires deadlines, earliest first (a timer thread per call cost more
    than the call's own work)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._wake = threading.Condition()
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, deadline: _Deadline) -> None:
        """Expire ``deadline`` when its time comes (unless it is closed first)."""
        assert deadline.at is not None
        with self._wake:
            heapq.heappush(self._heap, (deadline.at, next(self._count), deadline))
            if len(self._heap) % 4096 == 0:  # finished calls leave entries behind: drop them now and then
                self._heap = [entry for entry in self._heap if not entry[2].closed]
                heapq.heapify(self._heap)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lev-http-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is deadline:
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._heap and self._heap[0][2].closed:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                due = heapq.heappop(self._heap)[2]
            due.expire()


WATCHER = _Watcher()


def _shut(connection: http.client.HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def _without_credentials(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.lower() not in CREDENTIAL_HEADERS}


class _OneWrite:
    """Sends a request's head and body in one write: http.client writes them apart, and each write
    costs a system call and a hand-back of the GIL."""

    sock: Any
    head: bytes | None = None
    body_follows = False

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        """http.client's request, with its head held back until the body (if any) joins it."""
        self.body_follows, self.head = body is not None, None
        super().request(method, url, body, headers or {}, **kwargs)  # type: ignore[misc]

    def send(self, data: Any) -> None:
        if self.body_follows and self.head is None and isinstance(data, bytes):
            self.head = data
            return
        if self.head is not None:
            data, self.head = self.head + bytes(data), None
        super().send(data)  # type: ignore[misc]


class _PinnedHTTPConnection(_OneWrite, http.client.HTTPConnection):
    """An HTTP connection to an address already checked, whatever the name resolves to now."""

    def __init__(self, host: str, port: int, address: str, timeout: float | None) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = _connect(self._address, self.port, self.timeout)
        # Connected: from here the call's deadline (its watcher shuts the socket) bounds every
        # read and write. A socket timeout would add a wait (poll) before each, and each system
        # call hands the GIL back and forth once more.
        self.sock.settimeout(None)


class _PinnedHTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    """An HTTPS connection to a checked address; the certificate is verified for the host name."""

    def __init__(self, host: str, port: int, address: str, timeout: float | None) -> None:
        super().__init__(host, port, timeout=timeout, context=tls_context())
        self._address = address

    def connect(self) -> None:
        sock = _connect(self._address, self.port, self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]
        self.sock.settimeout(None)  # after the handshake, which the timeout still bounds (as above)


_tls: ssl.SSLContext | None = None
_tls_lock = threading.Lock()


def tls_context() -> ssl.SSLContext:
    """The process's one TLS client context (the system's trusted certificates, host names
    checked), made on first use and shared by every script HTTP connection and every webhook
    delivery: making one loads the whole certificate store, about 35 ms of CPU, which every new
    connection paid."""
    global _tls
    if _tls is None:
        with _tls_lock:
            if _tls is None:
                _tls = ssl.create_default_context()
    return _tls


def _connect(address: str, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to a checked address, with Nagle's algorithm off, as http.client's own
    connect() does: it sends a request's headers and body in two writes, and with Nagle on the
    body waits for the server to acknowledge the headers, which a server delaying its ACKs holds
    up to 40 ms on every call."""
    sock = socket.create_connection((address, port), timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # a platform without it: slower, not broken
        pass
    return sock


class _Pool:
    """Idle keep-alive connections, by (scheme, host, port, checked address): a provider script's
    next call to the same server skips the TCP (and TLS) handshake. A connection goes back only
    after its answer was read whole and the server did not ask to close it; one idle longer than
    :data:`KEEP_IDLE_S` is dropped, and one the server closed meanwhile is replaced on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, int, str], list[tuple[http.client.HTTPConnection, float]]] = {}

    def take(self, key: tuple[str, str, int, str]) -> http.client.HTTPConnection | None:
        """An idle connection for ``key``, or None."""
        now = time.monotonic()
        stale = []
        found = None
        with self._lock:
            idle = self._idle.get(key)
            while idle:
                connection, since = idle.pop()
                if now - since < KEEP_IDLE_S:
                    found = connection
                    break
                stale.append(connection)
        for connection in stale:
            connection.close()
        return found

    def give(self, key: tuple[str, str, int, str], connection: http.client.HTTPConnection) -> None:
        """Keep ``connection`` for the next call to ``key`` (closed when enough are kept)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < POOL_MAX:
                idle.append((connection, time.monotonic()))
                return
        connection.close()


KEEP_IDLE_S = 30.0
POOL_MAX = 256  # idle connections kept per server address
POOL = _Pool()


def _release(response: http.client.HTTPResponse, reusable: bool) -> None:
    """Done with ``response``: its connection back to the pool when ``reusable`` and the answer
    was read to its end on a connection the server keeps open, else closed."""
    key, connection = getattr(response, "lev_connection", (None, None))
    if connection is None:
        return
    response.lev_connection = (None, None)  # type: ignore[attr-defined]
    if reusable and key is not None and response.isclosed() and not response.will_close and connection.sock:
        POOL.give(key, connection)
    else:
        connection.close()


def _open(method: str, url: str, body: str | None, headers: dict[str, str], *, deadline: _Deadline,
          allow_local: bool) -> http.client.HTTPResponse:
    """Send the request, following redirects (each hop checked; credentials kept only while the
    origin stays the same); the final response, unread."""
    origin = None
    for _hop in range(MAX_REDIRECTS + 1):
        target = check_url(url, allow_local=allow_local)
        origin = origin or target.origin
        response = _send(target, method, body, headers, deadline)
        hop = redirect(url, response.status, response.getheader("location"), method, body, headers, origin)
        if hop is None:
            return response
        try:
            response.read()
            response.close()
        finally:
            _release(response, not deadline.expired)
        url, method, body, headers = hop
    raise ScriptHttpError("api", f"more than {MAX_REDIRECTS} redirects, the last to {url}")


def _send(target: _Target, method: str, body: str | None, headers: dict[str, str],
          deadline: _Deadline) -> http.client.HTTPResponse:
    """One request to the first checked address, on a kept connection when there is one, with two
    retries on transport faults (all within the call's deadline). A kept connection the server has
    closed meanwhile is replaced by a new one without counting as a retry."""
    cls = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    payload = body.encode("utf-8") if body is not None else None
    key = (target.scheme, target.host, target.port, target.addresses[0])
    kept = POOL.take(key)
    attempt = 0
    while True:
        remaining = deadline.remaining()
        if kept is not None:
            connection, kept, reused = kept, None, True
        else:
            connection, reused = cls(target.host, target.port, target.addresses[0], remaining), False
        deadline.watch(connection)
        try:
            connection.request(method, target.path, body=payload, headers=headers)
            response = connection.getresponse()
            response.lev_connection = (key, connection)  # type: ignore[attr-defined]
            return response
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            if deadline.expired:
                raise deadline.error() from None
            if reused:
                kept = POOL.take(key)
                continue
            pause = retry_pause(exc, attempt)
            attempt += 1
            time.sleep(min(pause, deadline.remaining() or 1.0))


def retry_pause(fault: BaseException, attempt: int) -> float:
    """Seconds to wait before retrying a request that failed with a transport ``fault`` on its
    ``attempt``-th retry (0 for the first try); the ``transport`` failure once the retries are spent."""
    if attempt >= TRANSPORT_RETRIES:
        raise ScriptHttpError("transport", f"request failed: {type(fault).__name__}: {fault}") from None
    return 0.2 * (attempt + 1)


def status_error(status: int, text: str, retry_after: str | None) -> ScriptHttpError:
    """The failure of a non-2xx answer: ``rate_limited`` (with the seconds of ``Retry-After``)
    for 429, else ``api`` naming the status and the start of the body ``text``."""
    if status == 429:
        try:
            seconds = float(retry_after) if retry_after else None
        except ValueError:
            seconds = None
        return ScriptHttpError("rate_limited", "rate limit exceeded", seconds)
    return ScriptHttpError("api", f"HTTP {status}: {text.strip()[:ERROR_BODY_LIMIT]}")


def content_error(content_type: str | None, declared: str | None) -> ScriptHttpError | None:
    """Why an answer with these headers cannot be read as text (binary content, or declared
    larger than 32 MiB), or None."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind.startswith(_NON_TEXT_PREFIXES) or kind.startswith(_NON_TEXT_TYPES):
        return ScriptHttpError("api", f"unreadable body: non-text content ({kind})")
    if declared and declared.isdigit() and int(declared) > DECLARED_LIMIT:
        return ScriptHttpError("api", f"unreadable body: {int(declared)} bytes is more than 32 MiB")
    return None


def body_text(data: bytes) -> str:
    """A whole answer's body as text; ScriptHttpError when it is over :data:`BODY_LIMIT` or does
    not decode."""
    if len(data) > BODY_LIMIT:
        raise ScriptHttpError("api", f"unreadable body: the response is larger than {BODY_LIMIT} bytes")
    text = data.decode("utf-8", "replace")
    if text and text.count("\ufffd") * 10 >= len(text):
        raise ScriptHttpError("api", "unreadable body: body did not decode as text")
    return text


def redirect(url: str, status: int, location: str | None, method: str, body: str | None,
             headers: dict[str, str], origin: tuple[str, str, int | None]) -> tuple[str, str, str | None, dict[str, str]] | None:
    """Where a redirect answer sends the call: (url, method, body, headers) of the next hop, with
    a 301/302/303 turning a non-GET into a body-less GET and the credential headers dropped once
    the origin changes; None when the answer is not a redirect."""
    if status not in (301, 302, 303, 307, 308) or not location:
        return None
    if status in (301, 302, 303) and method != "GET":
        method, body = "GET", None
    url = urllib.parse.urljoin(url, location)
    if _origin(url) != origin:
        headers = _without_credentials(headers)
    return url, method, body, headers


def _check_status(response: http.client.HTTPResponse) -> None:
    if 200 <= response.status < 300:
        return
    text = response.read(ERROR_BODY_LIMIT * 2).decode("utf-8", "replace")
    response.close()
    raise status_error(response.status, text, response.getheader("retry-after"))


def _check_content(response: http.client.HTTPResponse) -> None:
    error = content_error(response.getheader("content-type"), response.getheader("content-length"))
    if error is not None:
        response.close()
        raise error


def request(method: str, url: str, body: str | None = None, headers: dict[str, str] | None = None, *,
            timeout: float | None = 30.0, allow_local: bool = False) -> str:
    """Fetch ``url`` and return the body as text; ScriptHttpError on any failure, a ``transport``
    one when the whole call takes longer than ``timeout`` seconds."""
    deadline = _Deadline(timeout)
    response = None
    whole = False
    try:
        response = _open(method, url, body, dict(headers or {}), deadline=deadline, allow_local=allow_local)
        _check_status(response)
        _check_content(response)
        data = response.read(BODY_LIMIT + 1)
        response.close()
        whole = len(data) <= BODY_LIMIT
    except (OSError, http.client.HTTPException) as exc:
        if deadline.expired:
            raise deadline.error() from None
        raise ScriptHttpError("transport", f"request failed: {type(exc).__name__}: {exc}") from None
    finally:
        deadline.close()
        if response is not None:
            _release(response, whole and not deadline.expired)
    if deadline.expired:  # a body read to the connection's close: cut short, not whole
        raise deadline.error()
    return body_text(data)


class EventStream:
    """Server-sent events read from the bytes of a stream: each event's ``data`` lines joined,
    until ``[DONE]`` (then ``done``) or the stream's end."""

    def __init__(self) -> None:
        self.pending = b""
        self.data: list[str] = []
        self.done = False

    def feed(self, block: bytes) -> list[str]:
        """The payloads of the events ``block`` completes (none once ``done``)."""
        self.pending += block
        found: list[str] = []
        while b"\n" in self.pending and not self.done:
            raw, self.pending = self.pending.split(b"\n", 1)
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if not line:
                if self.data:
                    payload = "\n".join(self.data)
                    self.data = []
                    if payload.strip() == "[DONE]":
                        self.done = True
                    else:
                        found.append(payload)
            elif line.startswith("data:"):
                self.data.append(line[5:].lstrip(" "))
        return found

    def end(self) -> list[str]:
        """The payload of an event the stream's end cut off without its blank line, if any."""
        if self.done:
            return []
        self.done = True
        if self.pending.strip().startswith(b"data:"):
            self.data.append(self.pending.decode("utf-8", "replace").strip()[5:].lstrip(" "))
        payload = "\n".join(self.data)
        return [payload] if self.data and payload.strip() != "[DONE]" else []

"""Issue 26: script HTTP's timeout bounds the whole call, and credentials stay with their origin.

Each rule is checked on both transports: the blocking one (script tools, calls from a thread) and
the one on the event loop (provider scripts served by the engine's loop, issue 29).

A server on 127.0.0.1 that drips its answer a byte at a time (each read well inside any per-read
timeout) must not hold a call past its deadline, for a plain body and for an event stream. A
redirect to another origin (another port, another host name) loses ``Authorization`` and
``x-api-key``; a redirect on the same origin keeps them."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lev_nb.providers import script_http, script_http_async
from lev_nb.providers.script_http import ScriptHttpError

BODY = b"x" * 200  # dripped a byte every 0.1 s: 20 s to send whole


class Drip:
    """A raw HTTP server that sends its headers, then the body one byte every 0.1 s."""

    def __init__(self, content_type: str = "text/plain", body: bytes = BODY) -> None:
        self.content_type = content_type
        self.body = body
        self.stop = threading.Event()
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/drip"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {self.content_type}\r\n"
                         f"Content-Length: {len(self.body)}\r\n\r\n".encode())
            for byte in self.body:
                if self.stop.wait(0.1):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the client gave up
                    return

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.fixture
def drip() -> Iterator[Drip]:
    server = Drip()
    yield server
    server.close()


class OnLoop:
    """The event-loop transport behind the blocking one's signatures (one loop per call)."""

    @staticmethod
    def request(*args: Any, **kwargs: Any) -> str:
        return asyncio.run(script_http_async.request(*args, **kwargs))

    @staticmethod
    def sse_payloads(*args: Any, **kwargs: Any) -> list[str]:
        async def drain() -> list[str]:
            return [payload async for payload in script_http_async.sse_payloads(*args, **kwargs)]

        return asyncio.run(drain())


@pytest.fixture(params=["blocking", "loop"])
def http(request: pytest.FixtureRequest) -> Any:
    """Each transport in turn, as a module with ``request``."""
    return script_http if request.param == "blocking" else OnLoop


def test_a_dripping_server_cannot_hold_a_call_past_its_timeout(drip: Drip, http: Any) -> None:
    with pytest.raises(ScriptHttpError) as info:
        http.request("GET", drip.url, timeout=1, allow_local=True)
    assert info.value.kind == "transport" and "within 1 s" in info.value.message


def test_a_dripping_event_stream_is_bounded_too() -> None:
    http = OnLoop  # event streams are a provider script's, served on the loop
    server = Drip("text/event-stream", b"data: " + b"y" * 200 + b"\n\n")
    try:
        with pytest.raises(ScriptHttpError) as info:
            list(http.sse_payloads(server.url, "{}", timeout=1, allow_local=True))
        assert info.value.kind == "transport" and "within 1 s" in info.value.message
    finally:
        server.close()


def test_a_call_inside_its_timeout_is_untouched(http: Any) -> None:
    server = Drip(body=b"ok")
    try:
        assert http.request("GET", server.url, timeout=30, allow_local=True) == "ok"
    finally:
        server.close()


class CountingSocket:
    """A connected socket that counts its writes (and otherwise is the socket)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.writes: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def test_a_request_leaves_in_one_write_on_a_blocking_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each write, and each wait a socket timeout adds before it, hands the GIL back and forth:
    # the head and body go out together, and the deadline watcher (not a socket timeout) bounds
    # the reads.
    opened: list[CountingSocket] = []
    connect = script_http._connect

    def counting(address: str, port: int, timeout: float | None) -> Any:
        opened.append(CountingSocket(connect(address, port, timeout)))
        return opened[-1]

    monkeypatch.setattr(script_http, "_connect", counting)
    server = Drip(body=b"ok")
    try:
        assert script_http.request("POST", server.url, body='{"q": 1}', timeout=30, allow_local=True) == "ok"
    finally:
        server.close()
    [sock] = opened
    [write] = sock.writes
    assert write.startswith(b"POST /drip HTTP/1.1\r\n") and write.endswith(b'\r\n\r\n{"q": 1}')
    assert sock.gettimeout() is None


class Recorder:
    """An HTTP server that records each request's headers; ``/go?to=URL`` redirects there (302)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.seen.append({k.lower(): v for k, v in self.headers.items()})
                if self.path.startswith("/go?to="):
                    self.send_response(302)
                    self.send_header("Location", self.path[len("/go?to="):])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "4")
                self.end_headers()
                self.wfile.write(b"done")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    first, second = Recorder(), Recorder()
    yield first, second
    first.close()
    second.close()


SECRETS = {"Authorization": "Bearer sk-secret-0123456789", "x-api-key": "sk-secret-0123456789",
           "Accept": "text/plain"}


@pytest.mark.parametrize("where", ["port", "host"])
def test_credentials_do_not_follow_a_redirect_to_another_origin(servers: tuple[Recorder, Recorder], where: str,
                                                                http: Any) -> None:
    first, second = servers
    target = (f"http://127.0.0.1:{second.port}/landing" if where == "port"
              else f"http://localhost:{first.port}/landing")
    landing = second if where == "port" else first
    text = http.request("GET", f"http://127.0.0.1:{first.port}/go?to={target}", headers=SECRETS, allow_local=True)
    assert text == "done"
    assert first.seen[0]["authorization"].startswith("Bearer") and first.seen[0]["x-api-key"]
    arrived = landing.seen[-1]
    assert "authorization" not in arrived and "x-api-key" not in arrived
    assert arrived["accept"] == "text/plain"  # other headers travel on


def test_credentials_follow_a_redirect_on_the_same_origin(servers: tuple[Recorder, Recorder], http: Any) -> None:
    first, _ = servers
    http.request("GET", f"http://127.0.0.1:{first.port}/go?to=/landing", headers=SECRETS, allow_local=True)
    assert first.seen[-1]["x-api-key"] == "sk-secret-0123456789"
    assert first.seen[-1]["authorization"] == "Bearer sk-secret-0123456789"


class Canned:
    """An HTTP/1.1 server with one canned answer per path (see ``ANSWERS``); counts connections."""

    ANSWERS: dict[str, bytes] = {
        "/limited": b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\nslow",
        "/missing": b"HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\n\r\nno such model",
        "/picture": b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 4\r\n\r\n\x89PNG",
        "/huge": (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
                  % (script_http.BODY_LIMIT + 10)) + b"z" * (script_http.BODY_LIMIT + 10),
        "/events": (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"1b\r\ndata: {\"a\": 1}\n\ndata: two\n\n\r\n" b"e\r\ndata: [DONE]\n\n\r\n" b"0\r\n\r\n"),
        "/cut": (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"d\r\ndata: first\n\n\r\n" b"40\r\ndata: the rest never co"),
        "/around": b"HTTP/1.1 302 Found\r\nLocation: /around\r\nContent-Length: 0\r\n\r\n",
        "/ok": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
    }

    def __init__(self) -> None:
        self.connections = 0
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            pending = b""
            while True:
                while b"\r\n\r\n" not in pending:
                    data = conn.recv(65536)
                    if not data:
                        return
                    pending += data
                head, pending = pending.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(pending) < length:
                    pending += conn.recv(65536)
                pending = pending[length:]
                path = head.split(b" ")[1].decode()
                conn.sendall(self.ANSWERS[path])
                if path == "/cut":
                    return

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def canned() -> Iterator[Canned]:
    server = Canned()
    yield server
    server.close()


def test_answers_are_read_by_the_same_rules_on_both_transports(canned: Canned, http: Any) -> None:
    def failure(path: str) -> ScriptHttpError:
        with pytest.raises(ScriptHttpError) as info:
            http.request("GET", canned.url + path, timeout=10, allow_local=True)
        return info.value

    limited = failure("/limited")
    assert (limited.kind, limited.retry_after) == ("rate_limited", 7)
    assert failure("/missing").to_map() == {"kind": "api", "message": "HTTP 404: no such model"}
    assert "non-text content (image/png)" in failure("/picture").message
    assert "larger than" in failure("/huge").message
    assert "more than 5 redirects" in failure("/around").message
    assert http.request("POST", canned.url + "/ok", body="{}", timeout=10, allow_local=True) == "ok"


def test_event_streams_end_at_done_and_a_cut_one_fails(canned: Canned) -> None:
    http = OnLoop  # event streams are a provider script's, served on the loop
    assert list(http.sse_payloads(canned.url + "/events", "{}", timeout=10, allow_local=True)) == ['{"a": 1}', "two"]
    with pytest.raises(ScriptHttpError) as info:
        list(http.sse_payloads(canned.url + "/cut", "{}", timeout=10, allow_local=True))
    assert info.value.kind == "transport" and "broke off" in info.value.message


def test_local_addresses_are_refused_without_the_grant_on_both_transports(canned: Canned, http: Any) -> None:
    with pytest.raises(ScriptHttpError) as info:
        http.request("GET", canned.url + "/ok", timeout=10)
    assert info.value.kind == "api" and info.value.message.startswith("[denied] '127.0.0.1' resolves to 127.0.0.1")
    assert canned.connections == 0


def test_on_the_loop_one_kept_connection_serves_call_after_call(canned: Canned) -> None:
    async def calls() -> list[str]:
        return [await script_http_async.request("GET", canned.url + "/ok", timeout=10, allow_local=True)
                for _ in range(5)]

    assert asyncio.run(calls()) == ["ok"] * 5
    assert canned.connections == 1


def test_on_the_loop_a_header_that_cannot_be_sent_is_refused(canned: Canned) -> None:
    with pytest.raises(ScriptHttpError) as info:
        OnLoop.request("GET", canned.url + "/ok", headers={"x-note": "two\r\nlines"}, timeout=10, allow_local=True)
    assert info.value.kind == "api" and "invalid request" in info.value.message
    assert canned.connections == 0


class Whole(Canned):
    """A raw HTTP/1.1 server answering every request with ``body``, over TLS with ``certificate``,
    closing each connection after its answer when ``hang_up`` (without saying so in a header)."""

    def __init__(self, body: bytes, certificate: Any = None, hang_up: bool = False) -> None:
        import ssl

        self.body, self.hang_up, self.context = body, hang_up, None
        if certificate is not None:
            self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            certificate.configure_cert(self.context)
        super().__init__()
        self.url = self.url.replace("http:", "https:" if certificate is not None else "http:") + "/whole"

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
            with conn:
                while True:
                    pending = b""
                    while b"\r\n\r\n" not in pending:
                        data = conn.recv(65536)
                        if not data:
                            return
                        pending += data
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(self.body) + self.body)
                    if self.hang_up:
                        return
        except OSError:
            return


def test_on_the_loop_a_large_answer_over_tls_arrives_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio's TLS reader fills the loop's shared receive buffer a TLS record at a time, the rest
    of it through a slice: every byte of an answer many buffers long must arrive, in order."""
    import ssl

    import trustme

    authority = trustme.CA()
    body = bytes(range(97, 123)) * 60_000  # 1.5 MB: many TLS records, many buffers
    server = Whole(body, certificate=authority.issue_cert("127.0.0.1"))
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    monkeypatch.setattr(script_http, "_tls", trusting)
    try:
        async def twice() -> list[str]:
            return [await script_http_async.request("GET", server.url, timeout=30, allow_local=True) for _ in range(2)]

        assert asyncio.run(twice()) == [body.decode()] * 2
        assert server.connections == 1  # kept alive over TLS too
    finally:
        server.close()


def test_on_the_loop_an_answer_larger_than_what_is_read_ahead_arrives_whole() -> None:
    """Reading pauses while more than a few buffers wait for the exchange, and resumes as it reads."""
    body = b"0123456789abcdef" * 110_000  # 1.76 MB, under the body limit
    server = Whole(body)
    try:
        assert OnLoop.request("GET", server.url, timeout=30, allow_local=True) == body.decode()
    finally:
        server.close()


def test_on_the_loop_a_kept_connection_the_server_hung_up_is_replaced() -> None:
    server = Whole(b"ok", hang_up=True)
    try:
        async def calls() -> list[str]:
            answers = []
            for _ in range(3):
                answers.append(await script_http_async.request("GET", server.url, timeout=10, allow_local=True))
                await asyncio.sleep(0.05)  # the hang-up reaches the loop
            return answers

        assert asyncio.run(calls()) == ["ok"] * 3
        assert server.connections == 3
    finally:
        server.close()

"""Issue 26: script HTTP's timeout bounds the whole call, and credentials stay with their origin.

A server on 127.0.0.1 that drips its answer a byte at a time (each read well inside any per-read
timeout) must not hold a call past its deadline, for a plain body and for an event stream. A
redirect to another origin (another port, another host name) loses ``Authorization`` and
``x-api-key``; a redirect on the same origin keeps them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lev_nb.providers import script_http
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


def test_a_dripping_server_cannot_hold_a_call_past_its_timeout(drip: Drip) -> None:
    with pytest.raises(ScriptHttpError) as info:
        script_http.request("GET", drip.url, timeout=1, allow_local=True)
    assert info.value.kind == "transport" and "within 1 s" in info.value.message


def test_a_dripping_event_stream_is_bounded_too() -> None:
    server = Drip("text/event-stream", b"data: " + b"y" * 200 + b"\n\n")
    try:
        with pytest.raises(ScriptHttpError) as info:
            list(script_http.sse_payloads(server.url, "{}", timeout=1, allow_local=True))
        assert info.value.kind == "transport" and "within 1 s" in info.value.message
    finally:
        server.close()


def test_a_call_inside_its_timeout_is_untouched() -> None:
    server = Drip(body=b"ok")
    try:
        assert script_http.request("GET", server.url, timeout=30, allow_local=True) == "ok"
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
def test_credentials_do_not_follow_a_redirect_to_another_origin(servers: tuple[Recorder, Recorder], where: str) -> None:
    first, second = servers
    target = (f"http://127.0.0.1:{second.port}/landing" if where == "port"
              else f"http://localhost:{first.port}/landing")
    landing = second if where == "port" else first
    text = script_http.request("GET", f"http://127.0.0.1:{first.port}/go?to={target}", headers=SECRETS,
                               allow_local=True)
    assert text == "done"
    assert first.seen[0]["authorization"].startswith("Bearer") and first.seen[0]["x-api-key"]
    arrived = landing.seen[-1]
    assert "authorization" not in arrived and "x-api-key" not in arrived
    assert arrived["accept"] == "text/plain"  # other headers travel on


def test_credentials_follow_a_redirect_on_the_same_origin(servers: tuple[Recorder, Recorder]) -> None:
    first, _ = servers
    script_http.request("GET", f"http://127.0.0.1:{first.port}/go?to=/landing", headers=SECRETS, allow_local=True)
    assert first.seen[-1]["x-api-key"] == "sk-secret-0123456789"
    assert first.seen[-1]["authorization"] == "Bearer sk-secret-0123456789"

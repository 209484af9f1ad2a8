"""A Messages API stand-in on 127.0.0.1 for the provider tests (``from standin import ...``).

It records every request (path, headers, JSON body) and answers with canned replies: queued ones
first, else ``responder(request)``, else a 500. A request with ``"stream": true`` gets the reply as
a server-sent-event stream built from the same message body (``message_start``, one
``content_block_*`` run per block with the text and the tool input cut into deltas,
``message_delta``, ``message_stop``), over chunked transfer encoding as the real API sends it.
``Reply.cut_after`` closes the connection after that many events, mid-body; ``Reply.sse`` sends
hand-written events instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-test-key"


@dataclass
class Reply:
    """One canned HTTP answer; a dict body is sent as JSON (or as SSE to a streaming request)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    hold: threading.Event | None = None  # wait for this before answering (timeout tests)
    cut_after: int | None = None  # streaming: drop the connection after this many events
    sse: list[tuple[str, dict[str, Any]]] | None = None  # streaming: send exactly these events
    chunk_chars: int = 4  # streaming: text and tool input are cut into deltas of this size


@dataclass
class Recorded:
    """One request as the stand-in saw it."""

    path: str
    headers: dict[str, str]
    body: Any
    raw_bytes: int = 0


def message(*content: dict[str, Any], stop: str | None = "end_turn", usage: dict[str, Any] | None = None,
            model: str = "claude-sonnet-4-6") -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(id_: str, name: str, input_: dict[str, Any]) -> dict[str, Any]:
    """A tool_use content block."""
    return {"type": "tool_use", "id": id_, "name": name, "input": input_}


def error_body(kind: str, detail: str) -> dict[str, Any]:
    """A Messages API error body."""
    return {"type": "error", "error": {"type": kind, "message": detail}}


def _pieces(value: str, size: int) -> list[str]:
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def sse_events(body: dict[str, Any], chunk_chars: int = 4) -> list[tuple[str, dict[str, Any]]]:
    """The event stream the Messages API sends for the message ``body``."""
    usage = dict(body.get("usage") or {})
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    start_usage["output_tokens"] = 1
    started = {**body, "content": [], "stop_reason": None, "usage": start_usage}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": started})]
    for index, block in enumerate(body.get("content") or []):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": piece}})
                       for piece in _pieces(block["text"], chunk_chars)]
        elif block["type"] == "tool_use":
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "input_json_delta", "partial_json": piece}})
                       for piece in _pieces(json.dumps(block["input"]), chunk_chars)]
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": None},
                                     "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class StandIn:
    """A Messages API stand-in: queued replies first, else ``responder(request)``, else a 500."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.responder: Callable[[Recorded], Reply] | None = None
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stream_chunks(self, reply: Reply, request: Any = None) -> list[bytes]:
        """The server-sent events of a streamed 200 ``reply`` to the JSON body ``request``, one
        chunk each (Messages API form)."""
        events = reply.sse if reply.sse is not None else sse_events(reply.body, reply.chunk_chars)
        return [f"event: {event}\ndata: {json.dumps(data)}\n\n".encode("utf-8") for event, data in events]

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        self.replies.extend(replies)

    def _answer(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self.replies:
                return self.replies.pop(0)
        if self.responder is not None:
            return self.responder(recorded)
        return Reply(500, {"type": "error", "error": {"type": "api_error", "message": "stand-in: no reply queued"}})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = stand_in._answer(Recorded(self.path, headers, body, len(raw)))
                if reply.hold is not None:
                    reply.hold.wait(30)
                streaming = isinstance(body, dict) and body.get("stream") is True
                try:
                    if streaming and reply.status == 200 and (isinstance(reply.body, dict) or reply.sse is not None):
                        self._stream(reply, body)
                    else:
                        self._plain(reply)
                except OSError:  # the client gave up (timeout test)
                    pass

            def _plain(self, reply: Reply) -> None:
                data = reply.body if isinstance(reply.body, (bytes, str)) else json.dumps(reply.body)
                payload = data.encode("utf-8") if isinstance(data, str) else data
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("content-length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, reply: Reply, request: Any) -> None:
                chunks = stand_in.stream_chunks(reply, request)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for number, chunk in enumerate(chunks):
                    if reply.cut_after is not None and number >= reply.cut_after:
                        self.wfile.flush()
                        self.close_connection = True
                        # Drop the connection without the closing chunk: a body cut short.
                        self.connection.shutdown(2)
                        return
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                return

        return Handler

    def close(self) -> None:
        """Stop serving and free the port."""
        self.server.shutdown()
        self.server.server_close()


def serve() -> Iterator[StandIn]:
    """A stand-in for one test (use as a fixture body)."""
    server = StandIn()
    try:
        yield server
    finally:
        server.close()

"""An OTLP/HTTP collector stand-in on 127.0.0.1 (``from collector import serve_collector``): it
accepts ``POST /v1/traces`` protobuf, decodes each request with opentelemetry-proto, and keeps the
spans it received with their service name."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


@dataclass
class Received:
    """One span as the collector got it."""

    service: str
    name: str
    span_id: bytes
    parent_span_id: bytes
    trace_id: bytes
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    events: list[str]


class Collector:
    """The stand-in: ``url`` to point an exporter at, ``spans`` received so far, ``paths`` posted to."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with collector._lock:
                    collector.paths.append(self.path)
                    collector.content_types.append(self.headers.get("Content-Type", ""))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector._keep(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        return Handler

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(Received(
                        service=resource.get("service.name", ""), name=span.name, span_id=span.span_id,
                        parent_span_id=span.parent_span_id, trace_id=span.trace_id,
                        start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        status_code=span.status.code, events=[e.name for e in span.events],
                    ))
        with self._lock:
            self.spans.extend(received)

    def named(self, name: str) -> list[Received]:
        """The spans received with this name."""
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serve_collector() -> Iterator[Collector]:
    """A running collector stand-in, closed afterwards."""
    collector = Collector()
    try:
        yield collector
    finally:
        collector.close()

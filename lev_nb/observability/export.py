"""Where the spans go: one OpenTelemetry SDK ``TracerProvider`` per tracing configuration in this
process, with the exporter ``[observability]`` names (upstream docs, observability page).

``otlp`` is the SDK's OTLP/HTTP (protobuf) exporter behind a batch processor, so a model call never
waits for the network (an export gives up after EXPORT_TIMEOUT_S, so a collector that is down
costs a short ``lev run`` at most that at its exit); ``stdout`` writes one line per span to stderr as it ends. The provider is
made on the first traced run and kept: the SDK flushes and shuts it down when the process exits
(``lev run``), and :func:`flush` sends what is queued before a batch worker returns its share.
"""

from __future__ import annotations

import os
import sys
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

from lev_nb.observability.config import TraceConfig
from lev_nb.version import __version__

# The instrumentation scope every lev_nb span carries.
SCOPE = "lev_nb"
# How long one OTLP export may take, its retries included, when no OTEL_ variable says.
EXPORT_TIMEOUT_S = 3.0
_TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")

_PROVIDERS: dict[TraceConfig, TracerProvider] = {}
_LOCK = threading.Lock()


def tracer_for(config: TraceConfig) -> trace.Tracer:
    """The tracer of ``config``'s provider (made on first use, then kept for the process)."""
    with _LOCK:
        provider = _PROVIDERS.get(config)
        if provider is None:
            provider = _PROVIDERS[config] = _provider(config)
    return provider.get_tracer(SCOPE, __version__)


def flush(timeout_s: float = 10.0) -> bool:
    """Export every span ended so far, waiting up to ``timeout_s`` per provider; False when a
    provider could not finish in time."""
    with _LOCK:
        providers = list(_PROVIDERS.values())
    return all(provider.force_flush(int(timeout_s * 1000)) for provider in providers)


def _provider(config: TraceConfig) -> TracerProvider:
    resource = Resource.create({"service.name": config.service_name, "service.version": __version__})
    provider = TracerProvider(resource=resource)
    if config.exporter == "stdout":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr, formatter=span_line)))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # An unreachable collector holds a process's exit for the export's whole deadline, retries
        # included (the SDK's default is 10 s): lev_nb's is shorter unless the variables set one.
        timeout = None if any(os.environ.get(name) for name in _TIMEOUT_VARIABLES) else EXPORT_TIMEOUT_S
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.endpoint, timeout=timeout)))
    return provider


def span_line(span: ReadableSpan) -> str:
    """One readable line for a span: its name, length, status and attributes (the stdout exporter)."""
    start, end = span.start_time or 0, span.end_time or 0
    parts = [f"span {span.name}", f"{(end - start) / 1e9:.3f}s"]
    if not span.status.is_ok:
        parts.append(f"ERROR({span.status.description or ''})")
    parts.extend(key + "=" + str(value) for key, value in (span.attributes or {}).items())
    return " ".join(parts) + "\n"

"""Fixtures of the tracing tests: the SDK's in-memory exporter behind ``use_tracer_provider``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every run started in the test is traced into this exporter (``spans.get_finished_spans()``)."""
    from lev_nb.observability import use_tracer_provider

    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    use_tracer_provider(provider)
    yield exporter
    use_tracer_provider(None)
    provider.shutdown()

"""Fixtures of the tracing tests: the SDK's in-memory exporter behind ``use_tracer_provider``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """An SDK TracerProvider that every run started in the test is traced into."""
    from lev_nb.observability import use_tracer_provider

    made = TracerProvider(shutdown_on_exit=False)
    use_tracer_provider(made)
    yield made
    use_tracer_provider(None)
    made.shutdown()


@pytest.fixture
def spans(provider: TracerProvider) -> InMemorySpanExporter:
    """The spans of the test's runs, as they end (``spans.get_finished_spans()``)."""
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter

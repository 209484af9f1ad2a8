"""OpenTelemetry traces of runs (issue 21; upstream docs, observability page): the optional
``lev_nb[otel]`` extra on the official ``opentelemetry-sdk``.

A layer of its own between ``batch`` and ``engine``: it reads the engine's events and nothing in
the engine imports it. The package facade hands :func:`observe_run` to the engine's
``RUN_OBSERVER`` slot, so every run, as it is created, asks it whether to trace; when tracing is not
configured the answer is None after a few dictionary reads, and OpenTelemetry is never imported.

- :mod:`~lev_nb.observability.config`: ``[observability]`` over the ``OTEL_*`` variables (no otel);
- :mod:`~lev_nb.observability.spans`: a run's events -> its spans;
- :mod:`~lev_nb.observability.export`: the SDK provider and exporter per configuration.

Python users with an OpenTelemetry setup of their own call :func:`use_tracer_provider` to send
every run's spans there instead.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lev_nb.observability.config import TraceConfig, check_installed, trace_config

if TYPE_CHECKING:
    from lev_nb.engine.events import Event
    from lev_nb.settings import Settings

__all__ = ["TraceConfig", "flush", "observe_run", "trace_config", "use_tracer_provider"]

_LOCK = threading.Lock()
_provider: Any = None  # a TracerProvider handed in by use_tracer_provider, or None
_checked: set[TraceConfig] = set()  # configurations whose packages were found installed


def use_tracer_provider(provider: Any) -> None:
    """Trace every run started from now on into ``provider`` (an OpenTelemetry ``TracerProvider``,
    e.g. ``opentelemetry.trace.get_tracer_provider()``), whatever ``[observability]`` says;
    ``None`` goes back to the configuration."""
    global _provider
    with _LOCK:
        _provider = provider


def observe_run(settings: Settings, run_id: str, parent_run_id: str | None) -> Callable[[Event], None] | None:
    """The event subscriber that traces run ``run_id``, or None when tracing is off.

    Raises ConfigError when tracing is configured but its packages are not installed (before the
    run's record exists, so the run does not start).
    """
    provider = _provider
    if provider is not None:
        return _run_tracer(provider.get_tracer("lev_nb"), run_id, parent_run_id)
    config = trace_config(settings)
    if config is None:
        return None
    if config not in _checked:
        check_installed(config)
        _checked.add(config)
    from lev_nb.observability.export import tracer_for

    return _run_tracer(tracer_for(config), run_id, parent_run_id)


def _run_tracer(tracer: Any, run_id: str, parent_run_id: str | None) -> Callable[[Event], None]:
    from opentelemetry import context, trace

    from lev_nb.observability.spans import RunTracer

    # A root run nests under the span that is current where it was started (the caller's thread).
    caller = context.get_current() if parent_run_id is None and trace.get_current_span().is_recording() else None
    return RunTracer(tracer, run_id, parent_run_id, caller)


def flush(timeout_s: float = 10.0) -> bool:
    """Send every span ended so far to its exporter, waiting up to ``timeout_s``; free (and True)
    when nothing was ever traced. A batch worker calls it before it returns its share, since a
    pool's worker process exits without the interpreter's exit handlers."""
    ok = True
    provider = _provider
    if provider is not None and hasattr(provider, "force_flush"):
        ok = bool(provider.force_flush(int(timeout_s * 1000)))
    export = sys.modules.get("lev_nb.observability.export")
    if export is not None:
        ok = export.flush(timeout_s) and ok
    return ok

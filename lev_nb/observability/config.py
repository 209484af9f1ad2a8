"""Whether runs are traced, and where the spans go: ``[observability]`` in config.toml over the
standard ``OTEL_*`` environment variables (upstream docs, observability and configuration pages).

Pure reading, no OpenTelemetry import: this is what a run asks when tracing is off, so it must stay
cheap. The rules, in one place:

- ``OTEL_SDK_DISABLED=true`` turns tracing off, whatever else is set (the standard switch).
- ``enabled`` decides when the file (or ``lev_nb.configure``) sets it. Left out, tracing is on when
  the table names an ``exporter`` or an ``endpoint``, or ``OTEL_TRACES_EXPORTER`` names an exporter;
  otherwise off.
- ``exporter``: the table's value, else ``OTEL_TRACES_EXPORTER`` (``console`` is ``stdout``), else
  ``otlp``. ``none`` is off.
- ``endpoint``: the table's value (the collector's base address; ``/v1/traces`` is added), else the
  SDK's own reading of ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` then ``OTEL_EXPORTER_OTLP_ENDPOINT``,
  else ``http://localhost:4318``. Headers, timeout and compression come from their ``OTEL_`` variables.
- ``service_name``: the table's value, else ``OTEL_SERVICE_NAME``, else ``lev_nb``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from lev_nb.environ import env_value
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.settings import Settings

DEFAULT_SERVICE_NAME = "lev_nb"
TRACES_PATH = "/v1/traces"
# OTEL_TRACES_EXPORTER's names -> [observability] exporter names
_ENV_EXPORTERS = {"otlp": "otlp", "console": "stdout", "none": "none"}
# What each exporter needs installed (the lev_nb[otel] extra brings both)
_NEEDS = {"otlp": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"), "stdout": ("opentelemetry.sdk",)}


@record
class TraceConfig:
    """Tracing that is on: the exporter (``otlp`` | ``stdout``), the OTLP traces URL (None: the SDK
    reads it from the environment), the service name, and where "on" was said (for messages)."""

    exporter: str
    endpoint: str | None
    service_name: str
    origin: str


def trace_config(settings: Settings, environ: Mapping[str, str] | None = None) -> TraceConfig | None:
    """The tracing these settings and this environment ask for, or None when it is off.

    Raises ConfigError for an ``OTEL_TRACES_EXPORTER`` lev_nb has no exporter for.
    """
    env: Callable[[str], str | None] = env_value if environ is None else environ.get
    if (env("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return None
    table = settings.observability
    if table.enabled is False:
        return None
    if table.enabled:
        origin = str(settings.source("observability.enabled"))
    elif table.exporter is not None or table.endpoint is not None:
        origin = str(settings.source("observability.exporter" if table.exporter else "observability.endpoint"))
    elif _env_exporter(env, strict=False) is not None:
        origin = "environment variable OTEL_TRACES_EXPORTER"
    else:
        return None
    exporter = table.exporter or _env_exporter(env, strict=True) or "otlp"
    if exporter == "none":
        return None
    service = table.service_name or (env("OTEL_SERVICE_NAME") or "").strip() or DEFAULT_SERVICE_NAME
    return TraceConfig(exporter=exporter, endpoint=traces_url(table.endpoint) if table.endpoint else None,
                       service_name=service, origin=origin)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base address (kept as it is when it names the path)."""
    endpoint = endpoint.strip()
    if endpoint.rstrip("/").endswith(TRACES_PATH):
        return endpoint
    return endpoint.rstrip("/") + TRACES_PATH


def check_installed(config: TraceConfig) -> None:
    """Raise ConfigError, saying where tracing was turned on and what to install, when the
    packages its exporter needs are missing."""
    missing = [name for name in _NEEDS[config.exporter] if not _importable(name)]
    if not missing:
        return
    from lev_nb.settings import ConfigError

    raise ConfigError(
        f"tracing is on ({config.exporter} exporter) but {', '.join(missing)} is not installed",
        origin=config.origin, key_path="observability",
        hint="install the extra: pip install 'lev_nb[otel]'; or set enabled = false under [observability]",
    )


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False


def _env_exporter(env: Callable[[str], str | None], strict: bool) -> str | None:
    """The exporter ``OTEL_TRACES_EXPORTER`` names (its first entry), or None when it is unset.

    A name lev_nb has no exporter for (``zipkin``, set for another program) does not turn tracing
    on (``strict`` False); once the table has turned it on, it is a ConfigError (``strict``).
    """
    raw = (env("OTEL_TRACES_EXPORTER") or "").strip().lower()
    if not raw:
        return None
    first = raw.split(",")[0].strip()
    if first in _ENV_EXPORTERS:
        return _ENV_EXPORTERS[first]
    if not strict:
        return None
    from lev_nb.settings import ConfigError

    raise ConfigError(
        f"'{first}' is not an exporter lev_nb has", origin="environment variable OTEL_TRACES_EXPORTER",
        hint=f"use one of {', '.join(_ENV_EXPORTERS)} (otlp is OTLP over HTTP/protobuf)",
    )

"""Whether runs are traced and where to (lev_nb.observability.config): ``[observability]`` as the
upstream names its keys, over the standard OTEL_* variables, a value in the file winning."""

from __future__ import annotations

from pathlib import Path

import pytest

from lev_nb.observability import trace_config
from lev_nb.settings import ConfigError, load


def settings(tmp_path: Path, table: str = "") -> object:
    path = tmp_path / "config.toml"
    path.write_text(f"[observability]\n{table}\n" if table else "", encoding="utf-8")
    return load(path, environ={})


def test_off_without_the_table_or_the_variables(tmp_path: Path) -> None:
    assert trace_config(settings(tmp_path), {}) is None
    # The endpoint or service name alone says where, not whether (as for any OTel-aware program).
    assert trace_config(settings(tmp_path), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                             "OTEL_SERVICE_NAME": "x"}) is None


def test_enabled_alone_exports_otlp_with_the_sdk_reading_the_endpoint(tmp_path: Path) -> None:
    config = trace_config(settings(tmp_path, "enabled = true"), {})
    assert config is not None
    assert (config.exporter, config.endpoint, config.service_name) == ("otlp", None, "lev_nb")
    assert config.origin.endswith("config.toml:2")


def test_the_upstream_block_as_written(tmp_path: Path) -> None:
    table = 'enabled = true\nexporter = "otlp"\nendpoint = "http://localhost:4318"\nservice_name = "leviath"'
    config = trace_config(settings(tmp_path, table), {})
    assert config is not None
    assert (config.exporter, config.endpoint, config.service_name) == (
        "otlp", "http://localhost:4318/v1/traces", "leviath")


@pytest.mark.parametrize("endpoint, url", [
    ("http://c:4318", "http://c:4318/v1/traces"),
    ("http://c:4318/", "http://c:4318/v1/traces"),
    ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
    ("https://gw.example/otel", "https://gw.example/otel/v1/traces"),
])
def test_the_endpoint_is_the_collectors_base_address(tmp_path: Path, endpoint: str, url: str) -> None:
    config = trace_config(settings(tmp_path, f'endpoint = "{endpoint}"'), {})
    assert config is not None and config.endpoint == url


def test_a_value_in_the_file_beats_the_environment(tmp_path: Path) -> None:
    env = {"OTEL_SERVICE_NAME": "from-env", "OTEL_TRACES_EXPORTER": "console"}
    config = trace_config(settings(tmp_path, 'exporter = "otlp"\nservice_name = "from-file"'), env)
    assert config is not None and (config.exporter, config.service_name) == ("otlp", "from-file")
    config = trace_config(settings(tmp_path, "enabled = true"), env)
    assert config is not None and (config.exporter, config.service_name) == ("stdout", "from-env")


def test_otel_traces_exporter_alone_turns_tracing_on(tmp_path: Path) -> None:
    config = trace_config(settings(tmp_path), {"OTEL_TRACES_EXPORTER": "otlp"})
    assert config is not None and config.exporter == "otlp"
    assert config.origin == "environment variable OTEL_TRACES_EXPORTER"
    assert trace_config(settings(tmp_path), {"OTEL_TRACES_EXPORTER": "none"}) is None


def test_off_switches_win(tmp_path: Path) -> None:
    on = {"OTEL_TRACES_EXPORTER": "otlp"}
    assert trace_config(settings(tmp_path, "enabled = false"), on) is None
    assert trace_config(settings(tmp_path, 'enabled = true\nexporter = "none"'), {}) is None
    assert trace_config(settings(tmp_path, "enabled = true"), {"OTEL_SDK_DISABLED": "true"}) is None


def test_an_exporter_lev_nb_lacks_in_the_environment(tmp_path: Path) -> None:
    # Set for another program, it does not turn tracing on here...
    assert trace_config(settings(tmp_path), {"OTEL_TRACES_EXPORTER": "zipkin"}) is None
    # ...but once the file turns tracing on, it cannot be honoured: said, with where it came from.
    with pytest.raises(ConfigError) as caught:
        trace_config(settings(tmp_path, "enabled = true"), {"OTEL_TRACES_EXPORTER": "zipkin"})
    assert "OTEL_TRACES_EXPORTER" in str(caught.value) and "'zipkin'" in str(caught.value)


def test_a_misspelt_exporter_in_the_file_is_located(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(tmp_path, 'enabled = true\nexporter = "otpl"')
    error = caught.value
    assert (error.key_path, error.line) == ("observability.exporter", 3)
    assert "did you mean 'otlp'?" in str(error)


def test_an_unknown_key_in_the_table_gets_a_did_you_mean(tmp_path: Path) -> None:
    (warning,) = settings(tmp_path, 'endpiont = "http://c:4318"').warnings  # a warning: the file still loads
    assert "unknown key 'observability.endpiont' is ignored (did you mean 'endpoint'?)" in warning

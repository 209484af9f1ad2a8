"""Issue 25: an upstream ``config.toml`` is read as the upstream documents it.

Unknown keys are one warning with a "did you mean" and the file still loads (the upstream warns
and goes on); an upstream key lev_nb reads under another name is read as that key; every other
upstream key is named as ignored, with why; a value of the wrong type is still an error with
file:line:col. LEVIATH_HOME and LEVIATH_CONFIG_PATH are read when ours are not set."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import lev_nb
from lev_nb.providers.circuit import CircuitBreakers
from lev_nb.providers.base import ProviderError
from lev_nb.settings import ConfigError, ConfigWarning, load
from lev_nb.settings.paths import config_path, lev_home
from lev_nb.settings.upstream import ALIASES, IGNORED

UPSTREAM_EXAMPLE = Path(__file__).resolve().parents[3] / "shared" / "upstream-docs" / "schema" / "config.example.toml"

# A configuration as an upstream user writes it: keys of every kind the upstream documents.
UPSTREAM_STYLE = """\
default_provider = "anthropic"
agent_paths = ["~/work/agents"]
request_timeout_secs = 600
taint_tracking = false
[providers]
anthropic_cache_ttl = "1h"
claude_code_enabled = false
[limits]
max_concurrent_inferences = 4
provider_failures_before_open = 0
provider_circuit_cooldown_secs = 30
wedge_timeout_secs = 120
[security]
shell_env = "strict"
[webhook]
max_retries = 5
[title]
enabled = true
[sandbox]
kind = "namespace"
[[mcp_servers]]
name = "files"
command = "npx"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_an_upstream_configuration_loads_and_names_what_it_ignores(tmp_path: Path) -> None:
    settings = load(_write(tmp_path, UPSTREAM_STYLE))
    assert settings.default_provider == "anthropic" and settings.agent_paths == ("~/work/agents",)
    assert settings.limits.max_concurrent_inferences == 4
    # Aliases are read with the upstream's meaning, and remember the line they came from.
    assert settings.limits.request_timeout_secs == 600
    assert settings.source("limits.request_timeout_secs").line == 3
    assert settings.providers.provider_failures_before_open == 0  # 0: the breaker is off
    assert settings.providers.provider_circuit_cooldown_secs == 30
    ignored = "\n".join(settings.warnings)
    assert settings.taint_tracking is False and "taint_tracking" not in "\n".join(settings.warnings)  # read, not ignored
    for key in ("providers.anthropic_cache_ttl", "providers.claude_code_enabled", "limits.wedge_timeout_secs"):
        assert f": {key} is an upstream setting lev_nb ignores: " in ignored, key
    assert f"{tmp_path / 'config.toml'}:6: providers.anthropic_cache_ttl" in ignored  # file:line
    assert len(settings.warnings) == 3
    assert settings.security.shell_env == "strict"  # honoured, not ignored
    assert [server.name for server in settings.mcp_servers] == ["files"]
    assert settings.webhook.max_retries == 5
    assert settings.sandbox.kind == "namespace"  # the machine-wide sandbox is read and applied


@pytest.mark.skipif(not UPSTREAM_EXAMPLE.is_file(), reason="the upstream's example configuration is not beside the repository")
def test_the_upstream_example_configuration_loads() -> None:
    settings = load(UPSTREAM_EXAMPLE)
    assert settings.file_exists and settings.warnings
    for message in settings.warnings:
        assert "unknown key" not in message or "model_providers." in message, message


def test_a_misspelt_key_warns_and_a_wrong_type_is_still_an_error(tmp_path: Path) -> None:
    settings = load(_write(tmp_path, "[limits]\nmax_concurent_inferences = 4\n"))
    (message,) = settings.warnings
    assert message.endswith("unknown key 'limits.max_concurent_inferences' is ignored "
                            "(did you mean 'max_concurrent_inferences'?)")
    assert settings.limits.max_concurrent_inferences == 8
    with pytest.raises(ConfigError, match="expected a whole number") as info:
        load(_write(tmp_path, '[limits]\nmax_concurrent_inferences = "four"\n'))
    assert info.value.line == 2 and info.value.column == 1
    with pytest.raises(ConfigError, match="expected a whole number"):  # an alias is checked as its key
        load(_write(tmp_path, 'request_timeout_secs = "soon"\n'))


def test_overrides_still_refuse_an_unknown_key() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'max_concurent_inferences'"):
        lev_nb.configure(max_concurent_inferences=2)
    with pytest.raises(ConfigError, match="unknown key"):
        load(Path("/nonexistent/config.toml"), session={"limits": {"wedge_timeout_secs": 1}})


def test_the_person_is_told_once(lev, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(UPSTREAM_STYLE)
    done = lev("validate", "triage")
    assert done.returncode == 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("lev: warning:")]
    assert len(lines) == 1 and "3 keys nothing reads are ignored" in lines[0] and "`lev config`" in lines[0]
    shown = lev("config").stdout
    assert shown.count("# ignored: ") == 3 and "wedge_timeout_secs is an upstream setting lev_nb ignores" in shown
    (home / "config.toml").write_text("[limits]\nmax_concurent_inferences = 4\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lev_nb.config()
        lev_nb.config()
    told = [w for w in caught if issubclass(w.category, ConfigWarning)]
    assert len(told) == 1 and "did you mean 'max_concurrent_inferences'" in str(told[0].message)


def test_the_upstream_environment_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEV_HOME", raising=False)
    monkeypatch.setenv("LEVIATH_HOME", str(tmp_path / "leviath"))
    assert lev_home() == tmp_path / "leviath" and config_path() == tmp_path / "leviath" / "config.toml"
    monkeypatch.setenv("LEVIATH_CONFIG_PATH", str(tmp_path / "up.toml"))
    assert config_path() == tmp_path / "up.toml"
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "ours"))
    monkeypatch.setenv("LEV_CONFIG", str(tmp_path / "ours.toml"))
    assert lev_home() == tmp_path / "ours" and config_path() == tmp_path / "ours.toml"  # ours win


def test_a_breaker_set_to_zero_never_opens() -> None:
    board = CircuitBreakers()
    error = ProviderError("credits", "out of credits")
    assert error.unusable_reason is not None
    for _ in range(5):
        assert not board.failure("anthropic/x", error, 0, 30)
    assert board.before_call("anthropic/x", 0) is None
    assert board.failure("anthropic/y", error, 1, 30) and board.before_call("anthropic/y", 1) is not None


def test_the_tables_of_upstream_keys_do_not_shadow_our_own() -> None:
    from lev_nb.settings.schema import static_keys

    from lev_nb.settings.schema import SCHEMA

    ours = {".".join(k) for k, _ in static_keys()} | set(SCHEMA.fields)
    assert not [k for k in IGNORED if k in ours], "an ignored upstream key is now read: drop it from IGNORED"
    assert all(target in ours for target in ALIASES.values())

"""One precedence order for every key: launch option > session (configure) > environment > file > default."""

from __future__ import annotations

from pathlib import Path

import pytest

import lev_nb
from lev_nb.settings import ConfigError, configure, current, launch_options
from lev_nb.settings.loader import parse_assignments, session_overrides
from lev_nb.settings.schema import ENVIRONMENT

KEY = "limits.max_concurrent_inferences"


@pytest.fixture
def config_file(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text("[limits]\nmax_concurrent_inferences = 3\n")
    return path


def test_every_level_overrides_the_one_below(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = current()
    assert s.limits.max_concurrent_inferences == 3 and s.source(KEY).kind == "file"

    monkeypatch.setenv("LEV_MAX_CONCURRENT_INFERENCES", "5")
    s = current()
    assert s.limits.max_concurrent_inferences == 5
    assert s.source(KEY).kind == "env" and s.source(KEY).env == "LEV_MAX_CONCURRENT_INFERENCES"

    s = configure(max_concurrent_inferences=7)
    assert s.limits.max_concurrent_inferences == 7 and str(s.source(KEY)) == "session (lev_nb.configure)"

    with launch_options(parse_assignments([f"{KEY}=9"])):
        s = current()
        assert s.limits.max_concurrent_inferences == 9 and str(s.source(KEY)) == "launch option (-c)"
    assert current().limits.max_concurrent_inferences == 7  # the launch layer lasts one command

    configure(max_concurrent_inferences=None)  # None removes the override
    assert current().limits.max_concurrent_inferences == 5
    monkeypatch.delenv("LEV_MAX_CONCURRENT_INFERENCES")
    assert current().limits.max_concurrent_inferences == 3
    config_file.unlink()
    s = current()
    assert s.limits.max_concurrent_inferences == 8 and s.source(KEY).kind == "default"


def test_an_edited_file_is_read_again(config_file: Path) -> None:
    assert current().limits.max_concurrent_inferences == 3
    config_file.write_text("[limits]\nmax_concurrent_inferences = 12\n")
    assert current().limits.max_concurrent_inferences == 12


def test_every_environment_variable_names_a_real_key(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [var for var, _ in ENVIRONMENT]
    assert len(names) == len(set(names))
    assert {"LEV_DEFAULT_PROVIDER", "LEV_DEFAULT_MODEL", "LEV_MAX_CONCURRENT_INFERENCES",
            "LEV_DEFAULT_MAX_ITERATIONS", "LEV_INTERACTION_TIMEOUT_SECS", "LEV_REQUEST_TIMEOUT_SECS",
            "LEV_NOTEBOOK_MODEL", "ANTHROPIC_BASE_URL"} <= set(names)
    monkeypatch.setenv("LEV_DEFAULT_MODEL", "claude-haiku")
    monkeypatch.setenv("LEV_NOTEBOOK_MODEL", "mock")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("LEV_DEFAULT_MAX_ITERATIONS", " ")  # blank counts as unset
    s = current()
    assert s.default_model == "claude-haiku" and s.notebook.model == "mock"
    assert s.provider("anthropic").base_url == "http://127.0.0.1:1"
    assert s.source("model_providers.anthropic.base_url").env == "ANTHROPIC_BASE_URL"
    assert s.limits.default_max_iterations == 50


def test_a_bad_environment_value_names_the_variable(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEV_REQUEST_TIMEOUT_SECS", "soon")
    with pytest.raises(ConfigError) as info:
        current()
    assert str(info.value) == ("environment variable LEV_REQUEST_TIMEOUT_SECS: limits.request_timeout_secs: "
                               "expected a whole number, got 'soon'")


# ------------------------------------------------------------------------------------------------
# lev_nb.config() / lev_nb.configure()
# ------------------------------------------------------------------------------------------------
def test_the_public_api(home: Path) -> None:
    assert lev_nb.config() == current()
    assert lev_nb.configure is configure and lev_nb.ConfigError is ConfigError
    s = lev_nb.configure(default_model="claude-x", limits={"default_max_iterations": 20},
                         **{"security.read_paths": ["/srv/docs"]})
    assert s.default_model == "claude-x" and s.limits.default_max_iterations == 20
    assert s.security.read_paths == ("/srv/docs",) and lev_nb.config() == s
    assert session_overrides() == {"default_model": "claude-x", "limits": {"default_max_iterations": 20},
                                   "security": {"read_paths": ["/srv/docs"]}}


def test_configure_merges_sections_and_maps(home: Path) -> None:
    configure(tool_permissions={"shell": "deny"})
    s = configure(tool_permissions={"write_file": "ALLOW"}, limits={"max_concurrent_tools": 2})
    assert dict(s.tool_permissions) == {"shell": "deny", "write_file": "allow"}
    assert s.limits.max_concurrent_tools == 2 and s.limits.max_concurrent_inferences == 8


@pytest.mark.parametrize("kwargs, message", [
    ({"max_concurent_inferences": 2},
     ("lev_nb.configure(): unknown setting 'max_concurent_inferences' "
      "(did you mean 'limits.max_concurrent_inferences'?)")),
    ({"defualt_model": "x"}, "lev_nb.configure(): unknown setting 'defualt_model' (did you mean 'default_model'?)"),
    ({"limits": {"max_iterations": 2}},
     ("lev_nb.configure(): limits.max_iterations: unknown key 'max_iterations' "
      "(did you mean 'default_max_iterations'?)")),
    ({"limits": {"max_concurrent_inferences": "2"}},
     "lev_nb.configure(): limits.max_concurrent_inferences: expected a whole number, got a string ('2')"),
    ({"tool_permissions": {"shell": "maybe"}},
     "lev_nb.configure(): tool_permissions.shell: 'maybe' is not a policy (valid: allow, ask, deny)"),
])
def test_configure_typos_are_clear_errors_and_change_nothing(home: Path, kwargs: dict, message: str) -> None:
    configure(default_model="kept")
    before = current()
    with pytest.raises(ConfigError) as info:
        configure(**kwargs)
    assert str(info.value) == message
    assert current() == before and session_overrides() == {"default_model": "kept"}


def test_launch_options_parse_text_by_type(home: Path) -> None:
    data = parse_assignments(["max_concurrent_inferences=4", "security.allow_blueprint_read_paths=yes",
                              'security.read_paths=["/a", "/b"]', "safe_commands.shell=rg, cargo test",
                              "default_model=claude-x"])
    with launch_options(data):
        s = current()
    assert s.limits.max_concurrent_inferences == 4 and s.security.allow_blueprint_read_paths
    assert s.security.read_paths == ("/a", "/b") and s.safe_commands.shell == ("rg", "cargo test")
    assert s.default_model == "claude-x"


@pytest.mark.parametrize("item, words", [
    ("limits", "not KEY=VALUE"),
    ("limits.max_concurent_inferences=2", "unknown key 'max_concurent_inferences'"),
    ("security.allow_seed_commands=perhaps", "expected true or false, got 'perhaps'"),
])
def test_bad_launch_options(home: Path, item: str, words: str) -> None:
    with pytest.raises(ConfigError) as info, launch_options(parse_assignments([item])):
        pass  # pragma: no cover
    assert str(info.value).startswith("the -c option: ") and words in str(info.value)

"""Reading config.toml: defaults, typed values, provenance, and every malformed file named by file, line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support import ROOT

from lev_nb.settings import ConfigError, Settings, config_path, lev_home, load
from lev_nb.settings.loader import rows
from lev_nb.settings.schema import ENVIRONMENT


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def error_of(home: Path, text: str) -> ConfigError:
    write(home, text)
    with pytest.raises(ConfigError) as info:
        load()
    return info.value


# ------------------------------------------------------------------------------------------------
# Where the file is
# ------------------------------------------------------------------------------------------------
def test_the_file_is_config_toml_in_lev_home(home: Path) -> None:
    assert lev_home() == home and config_path() == home / "config.toml"


def test_lev_config_points_at_another_file(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("default_model = \"x\"\n")
    monkeypatch.setenv("LEV_CONFIG", str(other))
    settings = load()
    assert config_path() == other and settings.path == other and settings.default_model == "x"


def test_tests_never_see_the_users_home_config(home: Path) -> None:
    assert Path.home() / ".lev" not in config_path().parents


# ------------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------------
def test_no_file_means_every_built_in_default(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEV_TITLE_ENABLED")  # the suite's one setting (tests/conftest.py)
    settings = load()
    assert settings == Settings() and not settings.file_exists
    assert settings.limits.max_concurrent_inferences == 8
    assert settings.limits.default_max_iterations == 50 and settings.limits.interaction_timeout_secs == 3600
    assert settings.security.allow_seed_commands and not settings.security.allow_blueprint_read_paths
    assert not settings.security.allow_blueprint_safe_commands and not settings.security.allow_blueprint_permissions
    assert all(row.source.kind == "default" for row in rows(settings))


def test_typed_values_and_where_each_came_from(home: Path) -> None:
    path = write(home, """
        default_provider = "anthropic"
        default_model = "claude-opus-4-7"

        [limits]
        max_concurrent_inferences = 3
        default_max_iterations = 0

        [tool_permissions]
        shell = "Deny"
        write_file = "ask"

        [agent_tool_permissions.coder]
        shell = "allow"

        [security]
        read_paths = ["~/.lev/runs"]

        [agent_read_paths.cto]
        allow = ["~/design", "glob:~/docs/**"]

        [agent_safe_commands.coder]
        shell = ["cargo test", "rg"]
        allow_blueprint = true

        [nudge]
        max = 2

        [notebook]
        model = "mock"

        [model_providers.anthropic]
        base_url = "http://127.0.0.1:9"

        [model_providers.gateway]
        script = "gateway.rhai"
        options = { region = "eu" }
    """)
    s = load()
    assert s.file_exists and s.default_model == "claude-opus-4-7"
    assert s.limits.max_concurrent_inferences == 3 and s.limits.default_max_iterations == 0
    assert dict(s.tool_permissions) == {"shell": "deny", "write_file": "ask"}  # policies read case-insensitively
    assert s.tool_ceiling("coder") == {"shell": "allow", "write_file": "ask"}
    assert s.tool_ceiling("other") == {"shell": "deny", "write_file": "ask"}
    assert s.read_path_grants("cto") == ["~/.lev/runs", "~/design", "glob:~/docs/**"]
    assert s.read_path_grants("other") == ["~/.lev/runs"]
    assert s.safe_commands_honoured("coder") and not s.safe_commands_honoured("cto")
    assert s.agent_safe_commands["coder"].shell == ("cargo test", "rg")
    assert s.nudge.max == 2 and s.nudge.enabled is None and s.notebook.model == "mock"
    assert s.provider("anthropic").base_url == "http://127.0.0.1:9"
    assert s.provider("gateway").script == "gateway.rhai" and dict(s.provider("gateway").options) == {"region": "eu"}
    assert s.provider("nobody").base_url is None
    src = s.source("limits.max_concurrent_inferences")
    assert (src.kind, src.path, src.line) == ("file", path, 5) and str(src) == f"{path}:5"
    assert s.source("agent_read_paths.cto.allow").line == 19
    assert s.source("tool_permissions.shell").line == 9
    assert s.source("limits.max_concurrent_tools").kind == "default"
    assert s.to_dict()["agent_read_paths"] == {"cto": {"allow": ["~/design", "glob:~/docs/**"]}}


def test_an_entry_with_no_keys_still_exists(home: Path) -> None:
    write(home, "[agent_safe_commands.quiet]\n")
    assert load().agent_safe_commands["quiet"].allow_blueprint is False


def test_a_value_may_contain_dots_in_user_named_keys(home: Path) -> None:
    write(home, '[agent_read_paths."my.agent"]\nallow = ["/srv"]\n')
    s = load()
    assert s.read_path_grants("my.agent") == ["/srv"]
    assert s.source('agent_read_paths."my.agent".allow').line == 2


# ------------------------------------------------------------------------------------------------
# Malformed files: each names the file, the line and the key path
# ------------------------------------------------------------------------------------------------
def test_toml_syntax_error(home: Path) -> None:
    err = error_of(home, """
        default_model = "x"
        [limits
        max_concurrent_inferences = 4
    """)
    assert err.kind == "parse" and err.path == home / "config.toml" and (err.line, err.column) == (2, 8)
    assert str(err).startswith(f"{home / 'config.toml'}:2:8: not valid TOML")


def test_a_file_nested_too_deeply_is_one_clear_error(home: Path, lev) -> None:
    # Issue 26: tomllib parses nesting recursively; 100,000 levels raised RecursionError (a traceback).
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[limits]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load()
    assert info.value.kind == "parse" and "nested too deeply" in str(info.value)
    out = lev("config", "show")
    assert out.returncode != 0 and "nested too deeply" in out.stderr and "Traceback" not in out.stderr


def test_wrong_type(home: Path) -> None:
    err = error_of(home, """
        [limits]
        max_concurrent_inferences = "four"
    """)
    assert err.kind == "validation" and err.line == 2 and err.key_path == "limits.max_concurrent_inferences"
    assert "expected a whole number, got a string ('four')" in str(err)
    assert str(err).startswith(f"{home / 'config.toml'}:2:1: limits.max_concurrent_inferences: ")


@pytest.mark.parametrize("text, key, line, words", [
    ("[security]\nallow_seed_commands = 1\n", "security.allow_seed_commands", 2, "expected true or false"),
    ("[security]\nread_paths = \"/data\"\n", "security.read_paths", 2, "expected an array of strings"),
    ("[security]\nread_paths = [\"/a\", 3]\n", "security.read_paths", 2, "one item is an integer"),
    ("[limits]\nmax_concurrent_inferences = 0\n", "limits.max_concurrent_inferences", 2, "must be at least 1"),
    ("[limits]\nrequest_timeout_secs = 1.5\n", "limits.request_timeout_secs", 2, "got a float"),
    ("[tool_permissions]\nshell = \"sometimes\"\n", "tool_permissions.shell", 2, "is not a policy (valid: allow, ask, deny)"),
    ("limits = 3\n", "limits", 1, "[limits] must be a table, not an integer"),
    ("[model_providers.gateway]\noptions = 3\n", "model_providers.gateway.options", 2, "expected a table"),
    ("[agent_safe_commands.x]\nshell = [\"ls; curl evil\"]\n", "agent_safe_commands.x.shell", 2,
     "is not a bare command prefix"),
    ("[model_providers.anthropic]\nscript = \"a.rhai\"\n", "model_providers.anthropic.script", 2,
     "built-in provider"),
])
def test_bad_values_are_located(home: Path, text: str, key: str, line: int, words: str) -> None:
    err = error_of(home, text)
    assert err.key_path == key and err.line == line and words in str(err), str(err)


def warning_of(home: Path, text: str) -> str:
    """The one warning a file with a key nothing reads gives (the file still loads: issue 25)."""
    path = write(home, text)
    (message,) = load().warnings
    assert message.startswith(f"{path}:")
    return message.split(": ", 1)[1]


def test_unknown_key_with_did_you_mean(home: Path) -> None:
    message = warning_of(home, """
        [limits]
        max_concurrent_inference = 4
    """)
    assert message == "unknown key 'limits.max_concurrent_inference' is ignored (did you mean 'max_concurrent_inferences'?)"
    assert f"{home / 'config.toml'}:2:" in load().warnings[0]


def test_unknown_table_with_did_you_mean(home: Path) -> None:
    assert warning_of(home, "[limit]\nmax_concurrent_inferences = 4\n") == (
        "unknown key 'limit' is ignored (did you mean 'limits'?)")


def test_a_key_in_the_wrong_table_says_where_it_belongs(home: Path) -> None:
    assert warning_of(home, "interaction_timeout_secs = 30\n").endswith(
        "(it belongs under [limits]: limits.interaction_timeout_secs)")
    assert warning_of(home, "[security]\ndefault_model = \"x\"\n").endswith(
        "(it belongs under the top level: default_model)")


def test_unknown_key_inside_a_user_named_entry(home: Path) -> None:
    assert warning_of(home, "[agent_read_paths.cto]\nallowed = [\"/x\"]\n") == (
        "unknown key 'agent_read_paths.cto.allowed' is ignored (did you mean 'allow'?)")


def test_an_unreadable_file_is_a_read_error(home: Path) -> None:
    (home / "config.toml").mkdir(parents=True)
    with pytest.raises(ConfigError) as info:
        load()
    assert info.value.kind == "read" and info.value.path == home / "config.toml"


# ------------------------------------------------------------------------------------------------
# The README's example and list stay true
# ------------------------------------------------------------------------------------------------
def test_the_readme_example_loads(home: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1]
    write(home, section.split("```toml\n", 1)[1].split("```", 1)[0])
    s = load()
    assert s.limits.max_concurrent_inferences == 4 and s.tool_ceiling("code-fixer")["shell"] == "allow"
    for var, _ in ENVIRONMENT:
        assert f"`{var}`" in section, var


def test_a_home_that_is_a_file_is_named_with_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LEV_HOME set to a file: the system's "Not a directory" about config.toml said neither which
    file was in the way nor what to do."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("LEV_HOME", str(blocker))
    with pytest.raises(ConfigError) as info:
        load()
    error = info.value
    assert error.kind == "read" and Path(str(error.path)) == blocker / "config.toml"
    assert error.message == f"cannot be read: {blocker} is a file, where a folder is needed"
    assert error.hint == "point LEV_HOME or LEV_CONFIG at a folder, or move that file away"

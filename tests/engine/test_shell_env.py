"""Issue 25: ``[security] shell_env`` / ``shell_env_withhold`` decide what a command an agent runs
inherits (upstream configuration.md, "What a shell command inherits"); lev_nb's own provider keys
stay out under every mode, and ``allow_env_vars`` hands a name over under every mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SHELL_STAGE, call, say

from lev_nb.secrets import ShellEnv, child_environment
from lev_nb.settings import ConfigError, load

ENV = {"PATH": "/bin", "HOME": "/home/u", "LANG": "C", "GITHUB_TOKEN": "ghp_x", "SSH_AUTH_SOCK": "/s",
       "AWS_REGION": "eu", "KUBECONFIG": "/k", "MY_INTERNAL": "i", "ANTHROPIC_API_KEY": "sk-ant-x",
       "OPENAI_API_KEY": "sk-x"}


def _seen(mode: str, withhold: tuple[str, ...] = (), allow: tuple[str, ...] = ()) -> set[str]:
    return set(child_environment(ENV, ShellEnv(mode, withhold, allow)))


def test_filtered_is_the_default_and_lets_the_ssh_agent_through() -> None:
    assert set(child_environment(ENV)) == _seen("filtered") == {"PATH", "HOME", "LANG", "MY_INTERNAL", "SSH_AUTH_SOCK"}


def test_strict_also_withholds_the_ssh_agent() -> None:
    assert _seen("strict") == {"PATH", "HOME", "LANG", "MY_INTERNAL"}


def test_custom_withholds_exactly_the_listed_names_and_never_lev_nbs_own_keys() -> None:
    seen = _seen("custom", ("my_internal", "PATH"))
    assert "MY_INTERNAL" not in seen and {"GITHUB_TOKEN", "SSH_AUTH_SOCK", "AWS_REGION", "KUBECONFIG"} <= seen
    assert "PATH" in seen  # a toolchain variable passes under every mode
    assert "ANTHROPIC_API_KEY" not in seen and "OPENAI_API_KEY" not in seen


def test_inherit_passes_everything_but_lev_nbs_own_keys() -> None:
    assert _seen("inherit") == set(ENV) - {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}


@pytest.mark.parametrize("mode", ["filtered", "strict", "custom", "inherit"])
def test_allow_env_vars_hands_a_name_over_under_every_mode(mode: str) -> None:
    seen = _seen(mode, ("GITHUB_TOKEN",), ("github_token", "ANTHROPIC_API_KEY"))
    assert {"GITHUB_TOKEN", "ANTHROPIC_API_KEY"} <= seen and "OPENAI_API_KEY" not in seen


def test_an_unknown_mode_is_refused_with_the_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[security]\nshell_env = "filterd"\n')
    with pytest.raises(ConfigError, match=r"config.toml:2.*filtered"):
        load(config)


@pytest.mark.usefixtures("blueprint_permissions")
def test_the_shell_tool_sees_what_the_configured_mode_lets_through(
        engine, home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text() + 'shell_env = "custom"\nshell_env_withhold = ["MY_INTERNAL"]\n')
    for name in ("GITHUB_TOKEN", "MY_INTERNAL", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, f"value-of-{name.lower()}")
    run, _ = engine.run(SHELL_STAGE, [call("shell", command="env > env.txt"), say("ok")])
    assert run.status == "complete", run.error
    seen = (workdir / "env.txt").read_text()
    assert "GITHUB_TOKEN=value-of-github_token" in seen  # custom: nothing inferred
    assert "MY_INTERNAL" not in seen and "ANTHROPIC_API_KEY" not in seen and "PATH=" in seen

"""Issue 12 item 8: credentials stay out of what an agent's commands see, and out of every record.

One rule (lev_nb/secrets.py) says which variables are credentials: the script ``env_var`` refuses
them, and the shell tool, command seeds and a script's ``shell()`` run without them. Text echoing a
secret's value is redacted before it is stored or shown."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support import SHELL_STAGE, WORK_STAGE, call, events_of, say

import lev_nb
from lev_nb.providers import ScriptedModel
from lev_nb.providers.base import ProviderError
from lev_nb.secrets import child_environment, looks_like_credential, redact
from lev_nb.tools import scripts
from lev_nb.tools.scripts import RunToolHost
from lev_nb.workspace import Workspace

KEY = "sk-ant-test-0123456789abcdef"


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "DB_PASS", "MYSQL_PWD", "SLACK_WEBHOOK_URL",
                                  "GITHUB_TOKEN", "PGPASSWORD", "SENTRY_DSN", "DATABASE_URL"])
def test_credential_shaped_names(name: str) -> None:
    assert looks_like_credential(name)
    assert name not in child_environment({name: "x", "PATH": "/bin"})


@pytest.mark.parametrize("name", ["PATH", "HOME", "PWD", "OLDPWD", "LANG", "TERM"])
def test_ordinary_names_pass(name: str) -> None:
    assert not looks_like_credential(name)
    assert child_environment({name: "x"}) == {name: "x"}


def test_redact_replaces_a_configured_value_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert redact(f"401: x-api-key: {KEY}") == "401: x-api-key: [redacted]"
    assert redact("nothing secret") == "nothing secret"


def test_script_env_var_refuses_the_same_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_PASS", "hunter2hunter2")
    host = RunToolHost(Workspace(tmp_path), shell_allowed=True)
    with pytest.raises(PermissionError, match="looks like a credential"):
        host.env_var("DB_PASS")


def test_script_shell_runs_without_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MYSQL_PWD", "hunter2hunter2")
    out = RunToolHost(Workspace(tmp_path), shell_allowed=True).shell("env")
    assert KEY not in out and "hunter2" not in out and "PATH=" in out


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state


def test_script_shell_timeout_kills_the_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripts, "SHELL_TIMEOUT_S", 1)
    host = RunToolHost(Workspace(tmp_path), shell_allowed=True)
    with pytest.raises(TimeoutError, match="limit"):
        host.shell("sleep 300 & echo $! > child.pid; wait")
    pid = int((tmp_path / "child.pid").read_text())
    for _ in range(200):  # SIGKILL is delivered asynchronously; wait for it, not for a time
        if _gone(pid):
            break
        time.sleep(0.05)
    assert _gone(pid)


def test_script_shell_does_not_wait_for_a_background_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 26: the child kept the output pipes open, so shell() waited for the whole timeout.
    monkeypatch.setattr(scripts, "SHELL_TIMEOUT_S", 30)
    host = RunToolHost(Workspace(tmp_path), shell_allowed=True)
    out = host.shell("sleep 300 & echo $! > child.pid; echo started; echo oops >&2")
    assert out == "started\n\noops\n"
    pid = int((tmp_path / "child.pid").read_text())
    for _ in range(200):
        if _gone(pid):
            break
        time.sleep(0.05)
    assert _gone(pid)  # what it left running in the background is stopped with it


@pytest.mark.usefixtures("blueprint_permissions")
def test_shell_tool_runs_without_credentials(engine, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("SLACK_WEBHOOK_URL", "https://hooks.example/T000/B000/XXXX")
    run, model = engine.run(SHELL_STAGE, [call("shell", command="env > env.txt"), say("ok")])
    assert run.status == "complete", run.error
    seen = (workdir / "env.txt").read_text()
    assert "PATH=" in seen and KEY not in seen and "SLACK_WEBHOOK_URL" not in seen


def test_command_seed_runs_without_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    agent = """
[agent]
name = "seeds"
[context.regions]
system = { kind = "pinned", max_tokens = 4000 }
listing = { kind = "pinned", max_tokens = 4000, seed = { command = "env" } }
conversation = { kind = "sliding_window", max_items = 20, max_tokens = 8000 }
[stages.only]
max_iterations = 2
nudge = { enabled = false }
[stages.only.transitions]
"""
    model = ScriptedModel([{"text": "done"}])
    (tmp_path / "work").mkdir()
    (tmp_path / "home").mkdir()
    # `env` can run other programs, so it is on no default list: this user pre-approves it.
    (tmp_path / "home" / "config.toml").write_text('[safe_commands]\nshell = ["env"]\n')
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    run = lev_nb.load(agent).run("t", model=model, workdir=tmp_path / "work", home=tmp_path / "home")
    run.wait(30)
    system = "\n".join(model.requests[0].system)
    assert "PATH=" in system and KEY not in system


class Echoing(ScriptedModel):
    """A provider whose server quotes the request headers in its 401 body."""

    async def complete(self, request):  # type: ignore[override]
        raise ProviderError("auth", f"HTTP 401: invalid x-api-key {os.environ['ANTHROPIC_API_KEY']}")


# A key JSON writes as itself, and one it escapes (the record is then scanned field by field).
@pytest.mark.parametrize("key", [KEY, 'sk-ant-"quoted\\key-0123456789'])
def test_an_echoed_key_is_redacted_from_every_record(engine, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    KEY = key  # noqa: N806
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    run, _ = engine.run(WORK_STAGE, Echoing([]))
    assert run.status == "error"
    assert "[redacted]" in run.error and KEY not in run.error
    assert all(KEY not in str(e) for e in run.events.snapshot())
    assert any("[redacted]" in (e.error or "") for e in events_of(run, "completed"))
    folder = Path(run.run_dir)
    for name in ("meta.json", "events.jsonl", "transcript.jsonl"):
        text = (folder / name).read_text() if (folder / name).exists() else ""
        assert KEY not in text, name
    assert "[redacted]" in json.loads((folder / "meta.json").read_text())["error"]


class EchoingClaude(ScriptedModel):
    """A model whose server quotes a key kept in a variable with an ordinary name."""

    async def complete(self, request):  # type: ignore[override]
        if self.requests:  # the second call: the server quotes the key
            raise ProviderError("auth", f"HTTP 401: invalid x-api-key {os.environ['CLAUDE']}")
        return await super().complete(request)


@pytest.mark.usefixtures("blueprint_permissions")
def test_a_configured_key_variable_is_a_secret_whatever_its_name(
        engine, home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lev_nb.secrets as secrets

    monkeypatch.setattr(secrets, "_declared", frozenset())  # what this test declares stays here
    monkeypatch.setenv("CLAUDE", KEY)
    assert not looks_like_credential("CLAUDE") and "CLAUDE" in child_environment()
    with (home / "config.toml").open("a", encoding="utf-8") as config:
        config.write('[model_providers.anthropic]\napi_key_env = "CLAUDE"\n')
    run, _ = engine.run(SHELL_STAGE, EchoingClaude([call("shell", command="env > env.txt; env")]))
    assert run.status == "error" and "[redacted]" in run.error and KEY not in run.error
    seen = (workdir / "env.txt").read_text()
    assert "PATH=" in seen and "CLAUDE=" not in seen
    assert looks_like_credential("claude") and redact(f"key {KEY}") == "key [redacted]"
    for path in Path(run.run_dir).rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path.name

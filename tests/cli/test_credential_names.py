"""Issue 26: a key in a variable with an ordinary name is still a secret.

``[model_providers.anthropic] api_key_env = "CLAUDE"`` makes CLAUDE a credential: a shell tool does
not see it (on the host and in the sandbox) and its value is redacted from every record file of the
run and from what ``lev run`` prints. The run is a real ``lev run`` process against a stand-in
Messages API on 127.0.0.1 that echoes the key back in its 401 body."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from standin import Reply, StandIn, error_body, message, serve, tool_use

from lev_nb.sandbox import SandboxSpec, choose

LEV = str(Path(sys.executable).with_name("lev"))
KEY = "sk-ordinary-name-0123456789abcdef"


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve()


def _blueprint(folder: Path, sandbox: str) -> Path:
    folder.mkdir()
    (folder / "agent.leviath").write_text(f"""
[agent]
name = "oddly-named-key"
[context.regions]
system = {{ kind = "pinned", max_tokens = 2000 }}
conversation = {{ kind = "sliding_window", max_items = 20, max_tokens = 8000 }}
[tool_permissions]
shell = "allow"
write_file = "allow"  # its commands redirect into files (a write)
{sandbox}
[stages.work]
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
available_tools = ["shell"]
max_iterations = 4
[stages.work.transitions]
""", encoding="utf-8")
    return folder


@pytest.mark.parametrize("sandbox", ["", '[sandbox]\nkind = "namespace"'], ids=["host", "sandbox"])
def test_a_key_in_an_ordinary_variable_is_a_secret(tmp_path: Path, standin: StandIn, sandbox: str) -> None:
    if sandbox and not choose(SandboxSpec(kind="namespace")).program:
        pytest.skip("bubblewrap cannot create a sandbox on this machine")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[security]\nallow_blueprint_permissions = true\n'
        f'[model_providers.anthropic]\napi_key_env = "CLAUDE"\nbase_url = "{standin.url}"\n', encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    # The model runs `env` (its output goes back into the conversation), then the server answers
    # with a 401 that quotes the key (a proxy that echoes request headers).
    standin.queue(
        Reply(body=message(tool_use("toolu_1", "shell", {"command": "env > env.txt; env"}), stop="tool_use")),
        Reply(401, error_body("authentication_error", f"invalid x-api-key {KEY}")),
    )
    env = {**os.environ, "LEV_HOME": str(home), "CLAUDE": KEY}
    env.pop("ANTHROPIC_API_KEY", None)
    out = subprocess.run([LEV, "run", str(_blueprint(tmp_path / "agent", sandbox)), "--task", "t",
                          "--workdir", str(work)], env=env, capture_output=True, text=True, timeout=120)
    assert standin.requests and KEY in str(standin.requests[0].headers)  # the key was used
    seen = (work / "env.txt").read_text()
    assert "PATH=" in seen and KEY not in seen and "CLAUDE=" not in seen
    assert out.returncode == 1 and "[redacted]" in out.stderr and "check CLAUDE" in out.stderr
    assert KEY not in out.stderr and KEY not in out.stdout
    run_dir = home / "runs" / out.stdout.strip()
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    assert {"meta.json", "events.jsonl", "transcript.jsonl"} <= {path.name for path in files}
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path.relative_to(run_dir)
    assert "[redacted]" in json.loads((run_dir / "meta.json").read_text())["error"]

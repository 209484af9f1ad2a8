"""``lev mcp add | list | remove | test`` against a real config.toml and real MCP servers (stdio,
streamable HTTP and legacy SSE on 127.0.0.1), and ``[[mcp_servers]]`` errors located in the file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_probes import stdio_entry
from support import call, say


def test_add_list_remove_keep_the_rest_of_the_file(lev: Any, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text("# my settings\n[limits]\nmax_concurrent_tools = 4  # four at most\n", encoding="utf-8")
    done = lev("mcp", "add", "files", "--command", "npx", "--arg", "-y", "--arg", "@scope/server-files",
               "--env", "LOG=${LOG_LEVEL}")
    assert done.returncode == 0, done.stderr
    done = lev("mcp", "add", "remote", "--url", "https://mcp.example.com/mcp", "--header", "Authorization=Bearer ${TOK}")
    assert done.returncode == 0, done.stderr
    text = config.read_text()
    assert "# my settings" in text and "# four at most" in text
    listed = json.loads(lev("mcp", "list", "--json").stdout)
    assert listed[0] == {"name": "files", "transport": "stdio", "command": "npx", "args": ["-y", "@scope/server-files"],
                         "env": {"LOG": "${LOG_LEVEL}"}, "auth": "none"}
    assert listed[1]["headers"] == ["Authorization"] and listed[1]["transport"] == "http"  # values not shown
    assert 'headers = {Authorization = "Bearer ${TOK}"}' in text
    again = lev("mcp", "add", "files", "--command", "other")
    assert again.returncode == 1 and "already configured" in again.stderr
    assert lev("mcp", "remove", "files").returncode == 0
    assert [s["name"] for s in json.loads(lev("mcp", "list", "--json").stdout)] == ["remote"]
    assert "# four at most" in config.read_text()
    missing = lev("mcp", "remove", "files")
    assert missing.returncode == 1 and "no MCP server named 'files'" in missing.stderr


@pytest.mark.parametrize("args, message", [
    (["--url", "https://x", "--header", "Authorization: Bearer t"], "--header must be KEY=VALUE"),
    (["--command", "x", "--url", "https://x"], "either --command"),
    (["--url", "ftp://x"], "must start with http://"),
])
def test_add_refuses_what_cannot_work(lev: Any, args: list[str], message: str) -> None:
    done = lev("mcp", "add", "bad", *args)
    assert done.returncode == 2 and message in done.stderr


def test_a_bad_entry_in_the_file_is_located(lev: Any, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[[mcp_servers]]\nname = "a"\ncommand = "x"\n\n[[mcp_servers]]\nname = "b"\n'
                                      'comand = "y"\n', encoding="utf-8")
    done = lev("mcp", "list")
    assert done.returncode == 1
    assert "config.toml:7:1: mcp_servers.comand: entry 'b': unknown key 'comand' (did you mean 'command'?)" in done.stderr


def test_test_lists_the_tools_of_a_stdio_server(lev: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    done = lev("mcp", "test", "probe")
    assert done.returncode == 0, done.stderr
    assert "probe__add  - Add two whole numbers." in done.stdout and "probe__hang" in done.stdout


def test_test_of_a_server_that_does_not_start_says_why(lev: Any, mcp_config: Any) -> None:
    mcp_config("[[mcp_servers]]\nname = \"gone\"\ncommand = \"/nonexistent/server\"\n")
    done = lev("mcp", "test", "gone")
    assert done.returncode == 1 and "MCP server 'gone' could not be started: command not found" in done.stderr


def test_streamable_http_with_a_header_from_the_environment(lev: Any, mcp_config: Any, http_probe: str,
                                                             engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_TOKEN", "s3cret")
    mcp_config()
    assert lev("mcp", "add", "web", "--url", f"{http_probe}/mcp", "--header",
               "Authorization=Bearer ${PROBE_TOKEN}").returncode == 0
    done = lev("mcp", "test", "web")
    assert done.returncode == 0, done.stderr
    assert "web__whoami" in done.stdout
    bp = '[stages.work]\nmode = "autonomous"\navailable_connectors = ["web"]\nmax_iterations = 4\ntransitions = []\n'
    run, model = engine.run(bp, [call("web__whoami"), say("done")], allow=["web__whoami"])
    assert run.status == "complete", run.error
    from test_mcp_runs import last_result

    assert last_result(model) == "Bearer s3cret"  # ${PROBE_TOKEN} expanded when connecting
    assert "s3cret" not in (Path(run.run_dir) / "meta.json").read_text()


def test_a_legacy_sse_server_is_reached_by_the_fallback(lev: Any, mcp_config: Any, sse_probe: str) -> None:
    mcp_config(f'[[mcp_servers]]\nname = "old"\nurl = "{sse_probe}/sse"\n')
    done = lev("mcp", "test", "old", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["error"] is None and "old__add" in [t["name"] for t in data["tools"]]


def test_oauth_login_is_left_out_and_says_so(lev: Any) -> None:
    done = lev("mcp", "login", "github")
    assert done.returncode == 1 and "no OAuth login" in done.stderr


AGENT = """[agent]
name = "mcp-check"

[stages.work]
mode = "autonomous"
available_tools = ["read_file", "probe__add", "probe__subtract", "ghost__find"]
available_connectors = ["probe", "nowhere"]
max_iterations = 3
transitions = []
"""


def test_validate_checks_mcp_names_against_the_configured_servers(lev: Any, mcp_config: Any, tmp_path: Path) -> None:
    mcp_config(stdio_entry("probe"))
    agent = tmp_path / "agent.leviath"
    agent.write_text(AGENT, encoding="utf-8")
    findings = json.loads(lev("validate", str(agent), "--json").stdout)["findings"]
    mcp = [(f["code"], f["severity"], f["message"]) for f in findings if "MCP" in f["message"]]
    assert ("unknown-tool", "warning",
            "grants 'ghost__find', but no MCP server 'ghost' is configured here, so it is not offered") in mcp
    assert any("connector 'nowhere'" in m for _, _, m in mcp)
    assert not any("probe__subtract" in m for _, _, m in mcp)  # not asked without --remote
    remote = json.loads(lev("validate", str(agent), "--json", "--remote").stdout)["findings"]
    assert any(f["code"] == "unknown-tool" and "'probe__subtract', but MCP server 'probe' offers no such tool" in f["message"]
               for f in remote)
    assert not any("'probe__add'" in f["message"] for f in remote)


@pytest.mark.parametrize("config", ["[limits]\nnot_a_key = 1\n", "[limits]\nmax_concurrent_tools = 2\n"])
def test_validate_says_nothing_about_mcp_where_no_server_is_configured(lev: Any, tmp_path: Path, home: Path,
                                                                        config: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")  # unreadable, or no [[mcp_servers]]
    agent = tmp_path / "agent.leviath"
    agent.write_text(AGENT, encoding="utf-8")
    findings = json.loads(lev("validate", str(agent), "--json").stdout)["findings"]
    assert not any("MCP" in f["message"] for f in findings)


def test_a_stdio_server_stops_when_the_process_ends(mcp_config: Any, home: Path, tmp_path: Path) -> None:
    import os
    import re
    import subprocess
    import time

    from support import ROOT

    mcp_config(stdio_entry("probe"))
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "uses-probe"\n\n[stages.work]\nmode = "autonomous"\n'
                                         'available_tools = ["probe__add"]\nmax_iterations = 3\ntransitions = []\n',
                                         encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([call("probe__add", a=1, b=2), say("done")]), encoding="utf-8")
    env = {**os.environ, "LEV_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "lev_nb.cli", "run", str(agent), "--task", "add", "--quiet",
                           "--model", f"scripted:{script}", "--allow", "probe__add", "--workdir", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    log = (home / "runs" / run_id / "mcp" / "probe.stderr.log").read_text()
    pid = int(re.search(r"started \(pid (\d+)\)", log).group(1))  # type: ignore[union-attr]
    for _ in range(600):  # the server is reaped as the lev process ends; never a timed assertion
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the MCP server (pid {pid}) outlived the lev process")

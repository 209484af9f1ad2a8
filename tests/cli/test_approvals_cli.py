"""``lev approvals safe`` (issue 24; upstream cli.md): what runs without an approval prompt, each
entry with the layer and the config line that put it there, and the same list is what a run
nobody attends actually runs."""

from __future__ import annotations

import json
from pathlib import Path

from support import call, events_of, say

CONFIG = """\
[safe_commands]
defaults = false
tools = ["write_file", "shell:rm"]
shell = ["printf", "git status"]

[agent_safe_commands.coder]
shell = ["./gradlew"]
allow_blueprint = true
"""


def _config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_it_names_each_entry_and_the_line_that_put_it_there(lev, home: Path) -> None:
    path = _config(home, CONFIG)
    done = lev("approvals", "safe")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split() == ["shell", "printf", "[safe_commands]", f"({path}:4)"] for line in lines), lines
    assert any(line.split()[:3] == ["shell", "git", "status"] for line in lines)
    assert any(line.split() == ["tool", "write_file", "[safe_commands]", f"({path}:3)"] for line in lines)
    assert "rm" not in done.stdout  # a shell command spelled as a tool name grants nothing
    assert "gradlew" not in done.stdout  # a per-agent entry needs --agent
    assert "still asks" in done.stdout


def test_agent_entries_and_json(lev, home: Path) -> None:
    path = _config(home, CONFIG)
    done = lev("approvals", "safe", "--agent", "coder", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {"key": "shell:./gradlew", "source": "agent", "origin": f"{path}:7"} in rows
    assert [r["key"] for r in rows] == ["shell:./gradlew", "shell:git status", "shell:printf", "write_file"]
    text = lev("approvals", "safe", "--agent", "coder").stdout
    assert "[agent_safe_commands]" in text and "coder's own [safe_commands] block counts too" in text


def test_the_built_in_list_and_an_empty_one(lev, home: Path) -> None:
    listed = lev("approvals", "safe", "--json")
    rows = json.loads(listed.stdout)
    assert {"key": "shell:ls", "source": "default", "origin": "default"} in rows
    assert all(r["source"] == "default" for r in rows)
    _config(home, "[safe_commands]\ndefaults = false\n")
    empty = lev("approvals", "safe")
    assert empty.returncode == 0 and empty.stdout.startswith("nothing runs without a prompt")
    assert lev("approvals").returncode == 2  # the subcommand is required


def test_what_it_lists_is_what_an_unattended_run_runs(lev, engine, home: Path) -> None:
    _config(home, CONFIG)
    listed = {r["key"] for r in json.loads(lev("approvals", "safe", "--json").stdout)}
    assert "shell:printf" in listed and "shell:ls" not in listed
    toml = ('[stages.work]\navailable_tools = ["shell"]\nnudge = { enabled = false }\n'
            '[stages.work.transitions]\n')
    run, _ = engine.run(toml, [call("shell", command="printf listed"), call("shell", command="ls"), say("ok")],
                        interactive=False)
    assert run.status == "complete", run.error
    printed, ls = [e.summary for e in events_of(run, "tool_finished")]
    assert printed == "listed"
    assert ls.startswith("[denied]")

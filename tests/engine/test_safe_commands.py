"""[safe_commands] at run time and grants keyed on what a call runs (issue 24).

Safe commands pre-approve argument-scoped shell lines and tool names in a run nobody attends
(from the built-in list, config.toml, and the blueprint where the user honours it); an approval for
the stage or run grants the commands the line ran, not the shell.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import RUN_TIMEOUT_S, call, events_of, next_request, say

SHELL = '[stages.work]\navailable_tools = ["shell", "write_file"]\nnudge = { enabled = false }\n[stages.work.transitions]\n'


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def _results(run) -> list[str]:
    return [e.summary for e in events_of(run, "tool_finished")]


def _unattended(engine, commands: list[str], toml: str = SHELL) -> list[str]:
    turns = [call("shell", command=c) for c in commands] + [say("ok")]
    run, _ = engine.run(toml, turns, interactive=False)
    assert run.status == "complete", run.error
    return _results(run)


def test_the_default_list_runs_read_only_commands_unattended(engine, workdir: Path) -> None:
    (workdir / "notes.md").write_text("hello notes")
    ls, cat, mixed, curl, piped = _unattended(engine, [
        "ls", "cat notes.md", "cat notes.md && curl -s example.invalid", "curl -s example.invalid",
        "cat notes.md | wc -c",
    ])
    assert ls == "notes.md" and cat == "hello notes"
    assert mixed.startswith("[denied]") and curl.startswith("[denied]")  # curl is on no list
    assert piped == "11"


def test_defaults_off_and_config_entries(engine, home: Path, workdir: Path) -> None:
    _config(home, '[safe_commands]\ndefaults = false\nshell = ["cat", "git status", "env:GREETING"]\n')
    ls, cat, greet, unbound = _unattended(engine, [
        "ls", "cat /etc/hostname > /dev/null && echo read", "GREETING=hi cat /dev/null && echo bound",
        "OTHER=1 cat /dev/null",
    ])
    assert ls.startswith("[denied]")  # not on the list once the defaults are off
    assert cat.startswith("[denied]")  # echo is a default, and the defaults are off
    assert greet.startswith("[denied]")
    assert unbound.startswith("[denied]")  # env:OTHER is no entry; no program covers a variable
    _config(home, '[safe_commands]\nshell = ["env:GREETING"]\n')
    greet, unbound = _unattended(engine, ["GREETING=hi cat /dev/null && echo bound", "OTHER=1 cat /dev/null"])
    assert greet == "bound" and unbound.startswith("[denied]")


def test_a_subcommand_entry_covers_only_that_subcommand(engine, home: Path, workdir: Path) -> None:
    _config(home, '[safe_commands]\nshell = ["git status"]\ndefaults = false\n')
    (status, log) = _unattended(engine, ["git status --porcelain 2>/dev/null", "git log -1"])
    assert not status.startswith("[denied]") and log.startswith("[denied]")


def test_a_write_is_never_pre_approved(engine, home: Path, workdir: Path) -> None:
    _config(home, '[safe_commands]\nshell = ["echo"]\ntools = ["shell"]\n')
    (result,) = _unattended(engine, ["echo x > inside.txt"])
    assert result.startswith("[denied]") and not (workdir / "inside.txt").exists()


def test_safe_tools_run_unattended(engine, home: Path, workdir: Path) -> None:
    _config(home, '[safe_commands]\ntools = ["write_file"]\n')
    run, _ = engine.run(SHELL, [call("write_file", path="a.txt", content="hi"), say("ok")], interactive=False)
    assert (workdir / "a.txt").read_text() == "hi"


def test_a_configured_deny_is_never_lifted(engine, home: Path) -> None:
    _config(home, '[tool_permissions]\nshell = "deny"\n[safe_commands]\nshell = ["ls"]\n')
    (result,) = _unattended(engine, ["ls"])
    assert result.startswith("[denied] Tool 'shell' is not permitted")


BLUEPRINT_SAFE = '[agent]\nname = "lister"\n[safe_commands]\nshell = ["uname"]\ntools = ["write_file"]\n' + SHELL


def test_blueprint_safe_commands_count_only_when_honoured(engine, home: Path, workdir: Path) -> None:
    _config(home, "[safe_commands]\ndefaults = false\n")
    (result,) = _unattended(engine, ["uname"], BLUEPRINT_SAFE)
    assert result.startswith("[denied]")  # declaring is not granting
    _config(home, "[safe_commands]\ndefaults = false\n[agent_safe_commands.lister]\nallow_blueprint = true\n")
    (result,) = _unattended(engine, ["uname"], BLUEPRINT_SAFE)
    assert result == "Linux"
    _config(home, "[safe_commands]\ndefaults = false\n[security]\nallow_blueprint_safe_commands = true\n")
    run, _ = engine.run(BLUEPRINT_SAFE, [call("write_file", path="b.txt", content="x"), say("ok")], interactive=False)
    assert (workdir / "b.txt").read_text() == "x"


def test_agent_safe_commands_from_config(engine, home: Path) -> None:
    _config(home, '[safe_commands]\ndefaults = false\n[agent_safe_commands.lister]\nshell = ["uname"]\n')
    (mine,) = _unattended(engine, ["uname"], BLUEPRINT_SAFE)
    (theirs,) = _unattended(engine, ["uname"])  # another agent: not its entry
    assert mine == "Linux" and theirs.startswith("[denied]")


# -- grants keyed on what a call runs --------------------------------------------------------------
def _answering(run, scope: str, count: int) -> tuple[threading.Thread, list]:
    asked: list = []

    def person() -> None:
        seen: set[str] = set()
        for _ in range(count):
            request = next_request(run, seen)
            asked.append(request)
            run.respond(request.id, "allow", scope=scope)

    helper = threading.Thread(target=person)
    helper.start()
    return helper, asked


@pytest.mark.parametrize("scope", ["run", "stage"])
def test_a_grant_covers_what_the_line_ran_not_the_shell(engine, home: Path, workdir: Path, scope: str) -> None:
    _config(home, "[safe_commands]\ndefaults = false\n")
    turns = [call("shell", command="uname && whoami"), call("shell", command="whoami"),
             call("shell", command="uname && whoami"), call("shell", command="uname && id -u"), say("ok")]
    run, _ = engine.start(SHELL, turns, interactive=True)
    helper, asked = _answering(run, scope, 2)
    helper.join(RUN_TIMEOUT_S)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert [r.arguments["command"] for r in asked] == ["uname && whoami", "uname && id -u"]
    assert "grants: uname, whoami" in asked[0].prompt
    assert not any(r.startswith("[denied]") for r in _results(run))


def test_a_grant_names_the_file_a_redirect_writes(engine, home: Path, workdir: Path) -> None:
    turns = [call("shell", command="echo a > log.txt"), call("shell", command="echo b > log.txt"),
             call("shell", command="echo c > other.txt"), say("ok")]
    run, _ = engine.start(SHELL, turns, interactive=True)
    helper, asked = _answering(run, "run", 2)
    helper.join(RUN_TIMEOUT_S)
    run.wait(RUN_TIMEOUT_S)
    assert [r.arguments["command"] for r in asked] == ["echo a > log.txt", "echo c > other.txt"]
    assert ">log.txt" in asked[0].prompt
    assert (workdir / "other.txt").read_text() == "c\n"


def test_an_unreadable_line_grants_nothing(engine, home: Path) -> None:
    turns = [call("shell", command="eval uname"), call("shell", command="eval uname"), say("ok")]
    run, _ = engine.start(SHELL, turns, interactive=True)
    helper, asked = _answering(run, "run", 2)
    helper.join(RUN_TIMEOUT_S)
    run.wait(RUN_TIMEOUT_S)
    assert len(asked) == 2  # asked again: nothing reusable was granted
    assert "this one call only" in asked[0].prompt

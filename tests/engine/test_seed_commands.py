"""Command seeds run at spawn, before anybody could be asked (issue 24): only when
``[security] allow_seed_commands`` allows them, ``[safe_commands]`` covers every command they run
and they write no file; ``lev run --no-seed-commands`` refuses them for one run, and ``lev
validate``'s ``command-seed`` note says which of these will happen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import events_of, say

AGENT = """
[agent]
name = "seeder"
[context.regions]
system = {{ kind = "pinned", max_tokens = 4000 }}
listing = {{ kind = "pinned", max_tokens = 4000, seed = {{ command = "{command}" }} }}
conversation = {{ kind = "sliding_window", max_items = 20, max_tokens = 8000 }}
[stages.only]
max_iterations = 2
nudge = {{ enabled = false }}
[stages.only.transitions]
"""


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def _seeded(engine, command: str, **kw) -> tuple[str, object]:
    run, model = engine.run(AGENT.format(command=command), [say("done")], **kw)
    assert run.status == "complete", run.error
    return "\n".join(model.requests[0].system), run


def test_a_safe_listed_seed_runs(engine, workdir: Path) -> None:
    (workdir / "README.md").write_text("read me")
    system, run = _seeded(engine, "ls")
    assert "## listing\nREADME.md" in system
    assert not [e for e in events_of(run, "warning") if "seed" in e.message]


@pytest.mark.parametrize("command, why", [
    ("curl -s example.invalid", "[safe_commands] does not cover curl"),
    ("ls && touch made.txt", "[safe_commands] does not cover touch made.txt"),
    ("echo x > made.txt", "a write can never be pre-approved"),
    ("eval ls", "cannot be read as a plain list of commands"),
])
def test_a_seed_the_safe_list_does_not_cover_is_refused(engine, workdir: Path, command: str, why: str) -> None:
    system, run = _seeded(engine, command, yolo=True)  # --yolo does not reach seeds: nobody was asked
    assert "[seed command not run: " in system and why in system
    assert not (workdir / "made.txt").exists()
    warnings = [e.message for e in events_of(run, "warning")]
    assert any("the seed of region 'listing' did not run its command" in w for w in warnings)


def test_a_seed_the_user_safe_lists_runs(engine, home: Path, workdir: Path) -> None:
    _config(home, '[safe_commands]\nshell = ["touch"]\n')
    _seeded(engine, "ls && touch made.txt")
    assert (workdir / "made.txt").exists()


def test_allow_seed_commands_false_refuses_every_seed(engine, home: Path) -> None:
    _config(home, "[security]\nallow_seed_commands = false\n")
    system, _ = _seeded(engine, "ls")
    assert "[seed command not run: seed commands are turned off" in system


def test_a_denied_shell_refuses_seeds(engine, home: Path) -> None:
    _config(home, '[tool_permissions]\nshell = "deny"\n')
    system, _ = _seeded(engine, "ls")
    assert "[seed command not run: the shell is denied in config.toml" in system


def test_no_seed_commands_in_python_and_on_the_command_line(engine, lev, home: Path, tmp_path: Path) -> None:
    system, _ = _seeded(engine, "ls", seed_commands=False)
    assert "[seed command not run: seed commands are turned off" in system

    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text(AGENT.format(command="touch made.txt"))
    _config(home, '[safe_commands]\nshell = ["touch"]\n')
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([say("done")]))
    for flag, made in (("--no-seed-commands", False), (None, True)):
        work = tmp_path / f"work-{made}"
        args = ["run", str(agent), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work), "--quiet"]
        out = lev(*args, *([flag] if flag else []))
        assert out.returncode == 0, out.stderr
        assert (work / "made.txt").exists() is made


def _note(lev, folder: Path) -> str:
    out = lev("validate", "--json", str(folder))
    findings = json.loads(out.stdout)["findings"]
    (note,) = [f for f in findings if f["code"] == "command-seed"]
    return note["message"]


def test_validate_tells_what_will_happen_to_each_seed(lev, home: Path, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text(AGENT.format(command="touch made.txt"))
    assert "listing: touch made.txt (NOT pre-approved ([safe_commands] does not cover touch made.txt)" in _note(lev, agent)
    _config(home, '[safe_commands]\nshell = ["touch"]\n')
    assert "listing: touch made.txt (pre-approved)" in _note(lev, agent)
    _config(home, '[safe_commands]\nshell = ["touch"]\n[security]\nallow_seed_commands = false\n')
    assert "(refused: your config.toml sets [security] allow_seed_commands = false)" in _note(lev, agent)

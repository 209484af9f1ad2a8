"""``batch_tool_hint`` / ``shell_hint`` (issue 24; upstream configuration.md "System-prompt hints"):
the batch hint leads every stage request unless a stage, its agent or config.toml turns it off
(stage over agent over config); the shell hint says nothing on a POSIX shell."""

from __future__ import annotations

import json
from pathlib import Path

from support import call, say

from lev_nb.engine.context.hints import BATCH_TOOL_HINT

AGENT = """
[agent]
name = "hinted"
{agent}
[stages.plan]
available_tools = ["shell", "read_file"]
nudge = {{ enabled = false }}
{plan}
[stages.plan.transitions]
build = {{ condition = "always" }}

[stages.build]
available_tools = ["read_file"]
nudge = {{ enabled = false }}
{build}
[stages.build.transitions]
"""


def _blueprint(agent: str = "", plan: str = "", build: str = "") -> str:
    return AGENT.format(agent=agent, plan=plan, build=build)


def _hinted(model) -> dict[str, bool]:
    """Stage name -> whether its stage request led with the batch hint."""
    seen: dict[str, bool] = {}
    for request in model.requests:
        if request.purpose == "stage":
            seen[request.stage] = bool(request.system) and request.system[0] == BATCH_TOOL_HINT
    return seen


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_the_batch_hint_leads_every_stage_by_default(engine) -> None:
    run, model = engine.run(_blueprint(), [say("planned"), say("built")])
    assert run.status == "complete", run.error
    assert _hinted(model) == {"plan": True, "build": True}
    first = model.requests[0]
    # First in the longest-lived tier, ahead of the stage's own blocks; nothing else is added.
    assert first.system_blocks[0].cache_tier == 0 and first.system_blocks[0].region == ""
    assert first.system.count(BATCH_TOOL_HINT) == 1
    assert len([b for b in first.system_blocks if b.region == ""]) == 1  # no shell hint on a POSIX shell


def test_config_turns_it_off_and_the_agent_back_on_and_a_stage_off(engine, home: Path) -> None:
    _config(home, "batch_tool_hint = false\nshell_hint = false\n")
    run, model = engine.run(_blueprint(), [say("planned"), say("built")])
    assert run.status == "complete", run.error
    assert _hinted(model) == {"plan": False, "build": False}
    assert not run.warnings  # both keys are read now, not reported as ignored

    run, model = engine.run(_blueprint(agent="batch_tool_hint = true", build="batch_tool_hint = false"),
                            [say("planned"), say("built")])
    assert _hinted(model) == {"plan": True, "build": False}


def test_a_stage_opts_in_under_an_agent_that_opts_out(engine) -> None:
    run, model = engine.run(_blueprint(agent="batch_tool_hint = false", plan="batch_tool_hint = true"),
                            [call("read_file", path="missing.txt"), say("planned"), say("built")])
    assert run.status == "complete", run.error
    assert [r.system[0] == BATCH_TOOL_HINT for r in model.requests if r.purpose == "stage"] == [True, True, False]


def test_lev_run_records_the_hint_in_the_transcript(lev, home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text(_blueprint(build="batch_tool_hint = false"), encoding="utf-8")
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"text": "planned"}, {"text": "built"}]), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    done = lev("run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    shown = lev("context", run_id, "--full")
    assert "lev_nb runs the calls of one response side by side" not in shown.stdout  # the last request: build
    entries = [json.loads(line) for line in (home / "runs" / run_id / "transcript.jsonl").read_text().splitlines()]
    systems = [e["system"] for e in entries if e.get("system")]
    assert systems[0][0] == BATCH_TOOL_HINT
    assert all(BATCH_TOOL_HINT not in s for s in systems[1:])


def test_the_shell_hint_reads_the_offered_tools_only_where_it_has_guidance(monkeypatch) -> None:
    from types import SimpleNamespace

    from lev_nb.engine.context import hints

    stage = SimpleNamespace(batch_tool_hint=False, shell_hint=True)
    settings = SimpleNamespace(batch_tool_hint=True, shell_hint=True)

    def unread():  # type: ignore[no-untyped-def]
        raise AssertionError("the offered tools were read on a platform without shell guidance")
        yield "shell"

    assert hints.hint_blocks(stage, settings, unread()) == []
    monkeypatch.setattr(hints, "shell_guidance", lambda platform: "use cmd.exe quoting")
    assert [b.text for b in hints.hint_blocks(stage, settings, iter(["read_file", "shell"]))] == ["use cmd.exe quoting"]
    assert hints.hint_blocks(stage, settings, iter(["read_file"])) == []

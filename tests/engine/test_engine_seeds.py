"""Regions filled from their seeds when a run starts."""

from __future__ import annotations

from pathlib import Path

import pytest

import lev_nb
from lev_nb.engine.launch import LaunchError
from lev_nb.providers import ScriptedModel

AGENT = """
[agent]
name = "seeds"
[context.regions]
system = {{ kind = "pinned", max_tokens = 4000 }}
{regions}
conversation = {{ kind = "sliding_window", max_items = 20, max_tokens = 8000 }}
[stages.only]
mode = "autonomous"
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
max_iterations = 2
nudge = {{ enabled = false }}
[stages.only.transitions]
"""


def first_system(agent_regions: str, tmp_path: Path, **kwargs: str) -> tuple[str, object]:
    bp = lev_nb.load(AGENT.format(regions=agent_regions))
    model = ScriptedModel([{"text": "done"}])
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    run = bp.run(kwargs.pop("task", "the task"), model=model, workdir=work, home=tmp_path / "home", **kwargs)
    run.wait(30)
    return "\n".join(model.requests[0].system) if model.requests else "", run


def test_task_goes_to_the_region_whose_seed_asks_for_it(tmp_path: Path) -> None:
    system, run = first_system('question = { kind = "pinned", max_tokens = 1000, seed = "task_input" }', tmp_path,
                               task="why is the sky blue")
    assert "## question\nwhy is the sky blue" in system
    assert run.status == "complete"


def test_without_a_task_region_the_task_lands_in_the_first_pinned_region(tmp_path: Path) -> None:
    system, _ = first_system("", tmp_path, task="do the thing")
    assert "## system" in system and "do the thing" in system


def test_named_caller_input_fills_its_region(tmp_path: Path) -> None:
    system, _ = first_system('criteria = { kind = "pinned", max_tokens = 1000, seed = "input" }', tmp_path,
                             task="", criteria="be strict")
    assert "## criteria\nbe strict" in system


def test_missing_required_input_is_refused_before_the_run_exists(tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as info:
        first_system('diff = { kind = "pinned", max_tokens = 1000, seed = "input", required = true }', tmp_path,
                     task="")
    assert str(info.value) == ("blueprint 'seeds' needs the input 'diff': it fills the required region 'diff'; "
                               "pass diff=...")
    assert info.value.for_cli().endswith("pass --diff TEXT (or @FILE to read it from a file)")
    assert not (tmp_path / "home" / "runs").exists()


def test_an_input_the_blueprint_does_not_declare_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as info:
        first_system('criteria = { kind = "pinned", max_tokens = 1000, seed = "input" }', tmp_path,
                     task="", critera="blue")
    assert str(info.value) == ("blueprint 'seeds' has no input 'critera' (did you mean 'criteria'?): its inputs "
                               "are 'criteria'; pass criteria=...")
    assert not (tmp_path / "home" / "runs").exists()


def test_literal_files_glob_and_command_seeds(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "a.md").write_text("alpha", encoding="utf-8")
    (work / "docs" / "b.md").write_text("beta", encoding="utf-8")
    regions = "\n".join([
        'rules = { kind = "pinned", max_tokens = 500, seed = { literal = "never guess" } }',
        'one = { kind = "pinned", max_tokens = 500, seed = { files = ["docs/a.md"] } }',
        'many = { kind = "pinned", max_tokens = 500, seed = { glob = "docs/*.md" } }',
        'listing = { kind = "pinned", max_tokens = 500, seed = { command = "ls docs" } }',
    ])
    system, run = first_system(regions, tmp_path)
    assert "## rules\nnever guess" in system
    assert "## one\n### [docs/a.md]\nalpha" in system
    assert "### [docs/a.md]\nalpha\n\n### [docs/b.md]\nbeta" in system
    assert "## listing\na.md\nb.md" in system
    assert run.status == "complete"


def test_tool_seed_calls_the_tool(tmp_path: Path) -> None:
    system, _ = first_system('clock = { kind = "pinned", max_tokens = 500, seed = { tool = "current_time" } }', tmp_path)
    assert "## clock\n[current_time]:" in system


def test_rhai_seed_must_return_a_string(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "s.rhai").write_text('`task was: ${input.task}`', encoding="utf-8")
    system, run = first_system('hint = { kind = "pinned", max_tokens = 500, seed = { rhai = "s.rhai" } }', tmp_path)
    assert "## hint\ntask was: the task" in system
    (work / "s.rhai").write_text("42", encoding="utf-8")
    _, bad = first_system('hint = { kind = "pinned", max_tokens = 500, seed = { rhai = "s.rhai" } }', tmp_path)
    assert bad.status == "error" and "must return a string" in bad.error


def test_failing_command_seed_leaves_a_note_not_a_dead_run(tmp_path: Path) -> None:
    system, run = first_system('x = { kind = "pinned", max_tokens = 500, seed = { command = "ls no-such-file" } }', tmp_path)
    assert "exited with 2" in system and run.status == "complete"

"""Tool batches inside a run: offering, argument checks, policies, confinement, modification tracking."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import call, calls, events_of, say

from lev_nb.messages import ToolResultBlock


def results_of(model, index: int) -> list[ToolResultBlock]:
    """Tool results the model was shown in its ``index``-th request."""
    return [
        b for m in model.requests[index].messages if m.role == "user"
        for b in m.blocks() if isinstance(b, ToolResultBlock)
    ]


ONE = """
[stages.work]
available_tools = [{tools}]
{extra}
[stages.work.transitions]
"""


def one(tools: str, extra: str = "") -> str:
    return ONE.format(tools=tools, extra=extra)


def test_unknown_tool_gets_an_unavailable_result(engine):
    run, model = engine.run(one('"list_dir"'), [call("delete_everything"), say("ok")])
    assert run.status == "complete", run.error
    (result,) = results_of(model, 1)
    assert result.content.startswith("[unavailable] 'delete_everything'")
    assert "list_dir" in result.content
    assert result.is_error
    assert [e.ok for e in events_of(run, "tool_finished")] == [False]


def test_tool_not_offered_in_this_stage_is_unavailable(engine, workdir: Path):
    run, model = engine.run(one('"list_dir"'), [call("write_file", path="x", content="y"), say("ok")])
    assert results_of(model, 1)[0].content.startswith("[unavailable]")
    assert not (workdir / "x").exists()
    assert run.flags["modified_file_count"] == 0


def test_malformed_arguments_get_an_invalid_arguments_error(engine):
    run, model = engine.run(one('"read_file"'), [call("read_file", path=42), say("ok")])
    content = results_of(model, 1)[0].content
    assert content.startswith("[error] invalid arguments for 'read_file'")


def test_ask_policy_without_an_approver_is_denied(engine, workdir: Path):
    run, model = engine.run(one('"write_file"'), [call("write_file", path="a.txt", content="x"), say("ok")])
    content = results_of(model, 1)[0].content
    assert content.startswith("[denied]")
    assert not (workdir / "a.txt").exists()
    assert run.flags["modified_file_count"] == 0


def test_ask_policy_with_an_approver(engine, workdir: Path):
    asked = []

    def approver(name, arguments):
        asked.append((name, arguments["path"]))
        return arguments["path"] == "yes.txt"

    turns = [calls(("write_file", {"path": "yes.txt", "content": "1"}), ("write_file", {"path": "no.txt", "content": "2"})), say("ok")]
    run, model = engine.run(one('"write_file"'), turns, approver=approver)
    assert asked == [("write_file", "yes.txt"), ("write_file", "no.txt")]
    assert (workdir / "yes.txt").read_text() == "1"
    assert not (workdir / "no.txt").exists()
    assert run.flags["modified_files"] == ["yes.txt"]


def test_deny_policy(engine):
    toml = one('"list_dir"', 'tool_permissions = { list_dir = "deny" }')
    run, model = engine.run(toml, [call("list_dir"), say("ok")])
    assert results_of(model, 1)[0].content == "[denied] Tool 'list_dir' is not permitted."


def test_writes_are_confined_to_the_workdir(engine, write_allowed, workdir: Path, tmp_path: Path):
    run, model = engine.run(
        write_allowed(one('"write_file"')), [call("write_file", path="../escape.txt", content="x"), say("ok")]
    )
    assert results_of(model, 1)[0].content.startswith("[error]")
    assert not (tmp_path / "escape.txt").exists()
    assert run.flags["modified_file_count"] == 0


def test_successful_writes_are_recorded_as_modifications(engine, write_allowed, workdir: Path):
    turns = [
        calls(("write_file", {"path": "src/a.py", "content": "a = 1\n"}), ("write_file", {"path": "b.txt", "content": "b"})),
        call("edit_file", path="src/a.py", old_str="a = 1", new_str="a = 2"),
        call("edit_file", path="src/a.py", old_str="not there", new_str="x"),  # fails: not counted
        say("ok"),
    ]
    run, model = engine.run(write_allowed(one('"write_file", "edit_file"')), turns)
    assert run.status == "complete", run.error
    assert (workdir / "src" / "a.py").read_text() == "a = 2\n"
    assert run.flags["modified_files"] == ["src/a.py", "b.txt"]
    assert run.flags["modified_file_count"] == 3
    assert run.flags["empty_output"] is False
    assert run.meta["tool_calls"] == 4


@pytest.mark.usefixtures("blueprint_permissions")
def test_shell_writes_are_not_counted_as_modifications(engine, workdir: Path):
    toml = one('"shell", "write_file"', 'tool_permissions = { shell = "allow", write_file = "allow" }')
    run, model = engine.run(toml, [call("shell", command="echo hi > made.txt"), say("ok")])
    assert run.status == "complete", run.error
    assert (workdir / "made.txt").read_text().strip() == "hi"
    assert run.flags["modified_file_count"] == 0
    assert run.flags["modified_files"] == []
    assert run.flags["empty_output"] is True


def test_tool_events_pair_up_in_call_order(engine):
    turns = [calls(("list_dir", {}), ("current_time", {}), ("nope", {})), say("ok")]
    run, model = engine.run(one('"list_dir", "current_time"'), turns)
    started = [(e.call_id, e.tool) for e in events_of(run, "tool_started")]
    finished = [(e.call_id, e.tool) for e in events_of(run, "tool_finished")]
    assert sorted(started) == sorted(finished)
    assert [t for _, t in finished] == ["list_dir", "current_time", "nope"]
    assert [b.tool_use_id for b in results_of(model, 1)] == [c for c, _ in finished]


def test_runtime_info_is_answered_inline(engine):
    run, model = engine.run(one('"runtime_info"', "max_iterations = 7"), [call("runtime_info"), say("ok")])
    content = results_of(model, 1)[0].content
    assert run.run_id in content
    assert '"stage": "work"' in content and '"max_iterations": 7' in content


def test_rejected_submission_keeps_the_stage_going(engine):
    toml = """
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output"]
    output = { format = "json" }
    nudge = { enabled = false }
    [stages.answer.transitions]
    """
    turns = [call("submit_output", content="not json"), call("submit_output", content='{"a": 1}'), say("ok")]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert results_of(model, 1)[0].content.startswith("[error] the final output is not valid json")
    assert len(events_of(run, "output_rejected")) == 1
    assert run.result.content == '{"a": 1}'
    assert run.result.format == "json"

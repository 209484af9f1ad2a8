"""Stage hooks in runs: where each fires, what it sees, what `modify` means, and how it fails."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import blueprint, call, events_of, fail, request_text, say

from lev_nb.scripting import ScriptError

HEADER = """
[agent]
name = "hooks-test"
[context.regions.notes]
kind = "pinned"
max_tokens = 500
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 5000
"""

ONE_STAGE = """
[stages.work]
available_tools = ["list_dir", "read_file"]
nudge = {{ enabled = false }}
[stages.work.hooks]
{hooks}
[stages.work.transitions]
"""

TWO_STAGES = """
[stages.a]
available_tools = ["list_dir"]
nudge = {{ enabled = false }}
[stages.a.hooks]
{hooks}
[stages.a.transitions.b]
[stages.b]
available_tools = ["list_dir"]
nudge = {{ enabled = false }}
[stages.b.hooks]
{hooks}
[stages.b.transitions]
"""


def agent(tmp_path: Path, body: str, scripts: dict[str, str]) -> Any:
    """Write an agent folder (agent.leviath + scripts) under tmp_path and load it."""
    from lev_nb.blueprint import load

    folder = tmp_path / "agent"
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in scripts.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    (folder / "agent.leviath").write_text(textwrap.dedent(HEADER) + textwrap.dedent(body), encoding="utf-8")
    return load(folder)


def one_stage(tmp_path: Path, script: str, *hooks: str) -> Any:
    """A one-stage agent whose ``hooks`` all point at ``hooks/h.rhai`` holding ``script``."""
    lines = "\n".join(f'{h} = "hooks/h.rhai"' for h in hooks)
    return agent(tmp_path, ONE_STAGE.format(hooks=lines), {"hooks/h.rhai": script})


def system_of(request: Any) -> str:
    return "\n".join(request.system)


def modified(run: Any) -> list[tuple[str, str]]:
    return [(e.hook, e.target) for e in events_of(run, "hook_modified")]


# -- on_stage_enter -----------------------------------------------------------------------------


def test_on_stage_enter_sees_the_stage_and_replaces_regions_before_the_first_inference(engine, tmp_path):
    script = """
    fn on_stage_enter(ctx) {
        #{action: "modify", value: #{notes: `${ctx.stage}/${ctx.stage_index}/${ctx.regions.notes}`}}
    }
    """
    run, model = engine.run(one_stage(tmp_path, script, "on_stage_enter"), [say("done")])
    assert run.status == "complete", run.error
    assert "## notes\nwork/0/Task: do the task" in system_of(model.requests[0])
    assert modified(run) == [("on_stage_enter", "region:notes")]


def test_on_stage_enter_fires_on_every_stage_entry(engine, tmp_path):
    script = 'fn on_stage_enter(ctx) { #{action: "modify", value: #{notes: "entered " + ctx.stage}} }'
    lines = 'on_stage_enter = "hooks/h.rhai"'
    bp = agent(tmp_path, TWO_STAGES.format(hooks=lines), {"hooks/h.rhai": script})
    run, model = engine.run(bp, [say("a done"), say("b done")])
    assert run.status == "complete", run.error
    assert "entered a" in system_of(model.requests[0])
    assert "entered b" in system_of(model.requests[1])
    assert modified(run) == [("on_stage_enter", "region:notes")] * 2


def test_on_stage_enter_cancel_fails_the_run_before_any_model_call(engine, tmp_path):
    script = 'fn on_stage_enter(ctx) { #{action: "cancel", reason: "closed today"} }'
    run, model = engine.run(one_stage(tmp_path, script, "on_stage_enter"), [say("never")])
    assert run.status == "error"
    assert run.error == "on_stage_enter: refused to enter the stage: closed today"
    assert model.requests == []


# -- before_inference ---------------------------------------------------------------------------


def test_before_inference_runs_after_enter_on_every_request_and_rewrites_regions(engine, tmp_path):
    script = """
    fn on_stage_enter(ctx) { #{action: "modify", value: #{notes: "E"}} }
    fn before_inference(ctx) { #{action: "modify", value: #{notes: ctx.regions.notes + "+B"}} }
    """
    bp = one_stage(tmp_path, script, "on_stage_enter", "before_inference")
    run, model = engine.run(bp, [call("list_dir", path="."), say("done")])
    assert run.status == "complete", run.error
    assert "## notes\nE+B" in system_of(model.requests[0])
    assert "## notes\nE+B+B" in system_of(model.requests[1])  # fired again before the second request


def test_before_inference_allow_leaves_the_request_alone(engine, tmp_path):
    run, model = engine.run(one_stage(tmp_path, "fn before_inference(ctx) { true }", "before_inference"), [say("ok")])
    assert run.status == "complete", run.error
    assert "Task: do the task" in system_of(model.requests[0])
    assert modified(run) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('#{action: "cancel", reason: "over budget"}', "before_inference: refused the inference: over budget"),
        ('#{action: "cancel"}', "before_inference: refused the inference: no reason given"),
        ("false", "before_inference: refused the inference: no reason given"),
        ('#{action: "cancel", reason: 7}', "before_inference: refused the inference: no reason given"),
    ],
)
def test_before_inference_cancel_skips_the_inference_and_fails_the_run(engine, tmp_path, body, expected):
    bp = one_stage(tmp_path, f"fn before_inference(ctx) {{ {body} }}", "before_inference")
    run, model = engine.run(bp, [say("never sent")])
    assert run.status == "error"
    assert run.error == expected
    assert model.requests == []
    assert events_of(run, "model_call") == []


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ('throw "nope"', ["before_inference: Script execution failed: hooks/h.rhai: before_inference:", "nope"]),
        ("#{value: 1}", ["before_inference:", "no 'action'"]),
        ('#{action: "modfiy", value: 1}', ["before_inference:", "unknown action 'modfiy'"]),
        ('#{action: "modify"}', ["before_inference:", "needs a 'value'"]),
        ("42", ["before_inference:", "expected (), a bool, or a map"]),
        ('#{action: "retry"}', ["before_inference:", "retry"]),
        ("while true {}", ["before_inference: Script execution failed: hooks/h.rhai"]),
        ('#{action: "modify", value: "just text"}', ["before_inference:", "map of region name to text"]),
        ('#{action: "modify", value: #{nowhere: "x"}}', ["before_inference:", "region 'nowhere'", "no such region"]),
        ('#{action: "modify", value: #{notes: 5}}', ["before_inference:", "region 'notes'", "must be a string"]),
    ],
)
def test_a_failing_hook_ends_the_run_in_error_naming_the_hook(engine, tmp_path, body, fragments):
    bp = one_stage(tmp_path, f"fn before_inference(ctx) {{ {body} }}", "before_inference")
    run, model = engine.run(bp, [say("never sent")])
    assert run.status == "error"
    for fragment in fragments:
        assert fragment in run.error
    assert model.requests == []
    assert events_of(run, "completed")[-1].status == "error"


# -- after_inference ----------------------------------------------------------------------------


def test_after_inference_replaces_the_response_text_before_it_reaches_context(engine, tmp_path):
    script = """
    fn after_inference(ctx) {
        #{action: "modify", value: `REWRITTEN(${ctx.stage}:${ctx.response.len()}:${ctx.tool_calls})`}
    }
    """
    bp = one_stage(tmp_path, script, "after_inference")
    run, model = engine.run(bp, [call("list_dir", text="ORIGINAL", path="."), say("done")])
    assert run.status == "complete", run.error
    second = model.requests[1]
    assistant = next(m for m in second.messages if m.role == "assistant")
    assert assistant.text() == 'REWRITTEN(work:8:["list_dir"])'
    assert "ORIGINAL" not in request_text(second)
    # Tool calls are not the hook's to change: the call still ran.
    assert [e.tool for e in events_of(run, "tool_finished")] == ["list_dir"]
    assert modified(run).count(("after_inference", "response")) == 2


def test_after_inference_sees_the_tokens_used(engine, tmp_path):
    script = 'fn after_inference(ctx) { if ctx.tokens_used == 15 { () } else { #{action: "cancel", reason: `${ctx.tokens_used}`} } }'
    bp = one_stage(tmp_path, script, "after_inference")
    turn = {"text": "hi", "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    run, _ = engine.run(bp, [turn])
    assert run.status == "complete", run.error


def test_after_inference_modify_must_be_text(engine, tmp_path):
    bp = one_stage(tmp_path, 'fn after_inference(ctx) { #{action: "modify", value: #{a: 1}} }', "after_inference")
    run, model = engine.run(bp, [say("hi")])
    assert run.status == "error"
    assert run.error.startswith("after_inference: 'modify' needs the replacement response text")
    assert len(model.requests) == 1


# -- on_tool_call -------------------------------------------------------------------------------


def test_on_tool_call_replaces_the_calls_with_fresh_ids(engine, tmp_path, workdir):
    (workdir / "x.txt").write_text("hello", encoding="utf-8")
    script = """
    fn on_tool_call(ctx) {
        let c = ctx.tool_calls[0];
        if ctx.stage != "work" || c.name != "list_dir" || c.arguments.path != "sub" { return false; }
        #{action: "modify", value: [#{name: "read_file", arguments: #{path: "x.txt"}}, #{name: "list_dir"}]}
    }
    """
    bp = one_stage(tmp_path, script, "on_tool_call")
    run, model = engine.run(bp, [call("list_dir", path="sub"), say("done")])
    assert run.status == "complete", run.error
    started = events_of(run, "tool_started")
    assert [(e.call_id, e.tool) for e in started] == [("hook-read_file-0", "read_file"), ("hook-list_dir-1", "list_dir")]
    assert "hello" in request_text(model.requests[1])
    assert run.meta["tool_calls"] == 2
    assert ("on_tool_call", "tool_calls") in modified(run)


def test_on_tool_call_does_not_fire_without_calls(engine, tmp_path):
    bp = one_stage(tmp_path, 'fn on_tool_call(ctx) { #{action: "cancel", reason: "saw calls"} }', "on_tool_call")
    run, _ = engine.run(bp, [say("no tools needed")])
    assert run.status == "complete", run.error


def test_on_tool_call_fires_before_the_policy(engine, tmp_path):
    # write_file would wait for approval (there is no approver): the hook refuses first.
    bp = one_stage(tmp_path, 'fn on_tool_call(ctx) { #{action: "cancel", reason: ctx.tool_calls[0].name} }', "on_tool_call")
    run, _ = engine.run(bp, [call("write_file", path="a.txt", content="x"), say("done")])
    assert run.status == "error"
    assert run.error == "on_tool_call: refused the tool calls: write_file"
    assert events_of(run, "tool_started") == []


def test_on_tool_call_modify_to_no_calls_ends_the_turn_as_text(engine, tmp_path):
    bp = one_stage(tmp_path, 'fn on_tool_call(ctx) { #{action: "modify", value: []} }', "on_tool_call")
    run, model = engine.run(bp, [call("list_dir", text="thinking", path=".")])
    assert run.status == "complete", run.error
    assert len(model.requests) == 1
    assert events_of(run, "tool_started") == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ('"list_dir"', "needs an array"),
        ("[#{arguments: #{}}]", "item 0 of the new calls must be a map with a string 'name'"),
        ('[#{name: "list_dir", arguments: "x"}]', "'arguments' of item 0 ('list_dir') must be a map"),
    ],
)
def test_on_tool_call_malformed_replacement_is_an_error(engine, tmp_path, value, fragment):
    bp = one_stage(tmp_path, f'fn on_tool_call(ctx) {{ #{{action: "modify", value: {value}}} }}', "on_tool_call")
    run, _ = engine.run(bp, [call("list_dir", path="."), say("done")])
    assert run.status == "error"
    assert run.error.startswith("on_tool_call: ") and fragment in run.error
    assert events_of(run, "tool_started") == []


# -- on_stage_exit ------------------------------------------------------------------------------


def test_on_stage_exit_rewrites_regions_before_the_transition(engine, tmp_path):
    script = 'fn on_stage_exit(ctx) { #{action: "modify", value: #{notes: "handover from " + ctx.stage}} }'
    body = TWO_STAGES.format(hooks="").replace("[stages.a.hooks]\n", '[stages.a.hooks]\non_stage_exit = "hooks/h.rhai"\n')
    run, model = engine.run(agent(tmp_path, body, {"hooks/h.rhai": script}), [say("a done"), say("b done")])
    assert run.status == "complete", run.error
    assert "handover from a" not in system_of(model.requests[0])
    assert "## notes\nhandover from a" in system_of(model.requests[1])
    kinds_in_order = [e.kind for e in run.events.snapshot() if e.kind in ("hook_modified", "transition")]
    assert kinds_in_order == ["hook_modified", "transition"]


def test_on_stage_exit_cancel_stops_before_any_transition(engine, tmp_path):
    script = 'fn on_stage_exit(ctx) { #{action: "cancel", reason: "stay"} }'
    lines = 'on_stage_exit = "hooks/h.rhai"'
    run, _ = engine.run(agent(tmp_path, TWO_STAGES.format(hooks=lines), {"hooks/h.rhai": script}), [say("a done")])
    assert run.status == "error"
    assert run.error == "on_stage_exit: refused to leave the stage: stay"
    assert run.stage_history == ["a"]
    assert events_of(run, "transition") == []


# -- on_completion / on_error -------------------------------------------------------------------

OUTPUT_STAGE = """
[stages.work]
available_tools = ["submit_output"]
require_output = true
nudge = {{ enabled = false }}
[stages.work.hooks]
{hooks}
[stages.work.transitions]
"""


def test_on_completion_replaces_the_final_output_once(engine, tmp_path):
    script = """
    fn on_completion(ctx) {
        if ctx.status != "complete" || ctx.error != "" { return false; }
        #{action: "modify", value: "[signed] " + ctx.output}
    }
    """
    body = OUTPUT_STAGE.format(hooks='on_completion = "hooks/h.rhai"')
    bp = agent(tmp_path, body, {"hooks/h.rhai": script})
    run, _ = engine.run(bp, [call("submit_output", content="the answer"), say("done")])
    assert run.status == "complete", run.error
    assert run.result.content == "[signed] the answer"
    assert (Path(run.run_dir) / "final_output").read_text(encoding="utf-8") == "[signed] the answer"
    assert run.meta["final_output"]["bytes"] == len("[signed] the answer")
    assert modified(run) == [("on_completion", "final_output")]


def test_on_completion_modify_without_an_output_is_an_error(engine, tmp_path):
    bp = one_stage(tmp_path, 'fn on_completion(ctx) { #{action: "modify", value: "x"} }', "on_completion")
    run, _ = engine.run(bp, [say("done")])
    assert run.status == "error"
    assert "on_completion" in run.error and "submitted none" in run.error


def test_a_failing_on_completion_does_not_fire_on_error(engine, tmp_path):
    script = """
    fn on_completion(ctx) { throw "broken" }
    fn on_error(ctx) { #{action: "modify", value: "should not run"} }
    """
    bp = one_stage(tmp_path, script, "on_completion", "on_error")
    run, _ = engine.run(bp, [say("done")])
    assert run.status == "error"
    assert run.error.startswith("on_completion: Script execution failed: hooks/h.rhai: on_completion:")
    assert "broken" in run.error
    assert len(events_of(run, "completed")) == 1


def test_on_error_replaces_the_error_message(engine, tmp_path):
    script = 'fn on_error(ctx) { #{action: "modify", value: `[${ctx.status}/${ctx.output.len()}] ${ctx.error}`} }'
    bp = one_stage(tmp_path, script, "on_error")
    run, _ = engine.run(bp, [fail("api", "bad request")])
    assert run.status == "error"
    assert run.error.startswith("[error/0] the model call failed in stage 'work': ")
    assert "bad request" in run.error
    assert modified(run) == [("on_error", "error")]


def test_on_error_fires_after_a_failing_hook_but_not_on_success(engine, tmp_path):
    script = """
    fn before_inference(ctx) { #{action: "cancel", reason: "no"} }
    fn on_error(ctx) { #{action: "modify", value: "reported: " + ctx.error} }
    fn on_completion(ctx) { () }
    """
    run, _ = engine.run(one_stage(tmp_path, script, "before_inference", "on_error"), [say("x")])
    assert run.error == "reported: before_inference: refused the inference: no"

    ok = agent(tmp_path / "ok", ONE_STAGE.format(hooks='on_error = "hooks/h.rhai"'),
               {"hooks/h.rhai": 'fn on_error(ctx) { #{action: "cancel", reason: "fired"} }'})
    run, _ = engine.run(ok, [say("done")])
    assert run.status == "complete", run.error


def test_a_failing_on_error_keeps_the_original_error(engine, tmp_path):
    bp = one_stage(tmp_path, 'fn on_error(ctx) { throw "oops" }', "on_error")
    run, _ = engine.run(bp, [fail("api", "bad request")])
    assert run.status == "error"
    assert run.error.startswith("on_error: Script execution failed: hooks/h.rhai: on_error:")
    assert "(the run had already failed: the model call failed in stage 'work'" in run.error


def test_a_cancelled_run_fires_no_terminal_hook(engine, tmp_path):
    import asyncio
    import time

    from lev_nb.messages import ModelResponse

    class Slow:
        name = "slow"

        async def complete(self, request: Any) -> ModelResponse:
            await asyncio.sleep(30)
            return ModelResponse(text="late")

    script = 'fn on_error(ctx) { #{action: "modify", value: "fired"} }\nfn on_completion(ctx) { false }'
    run, _ = engine.start(one_stage(tmp_path, script, "on_error", "on_completion"), Slow())
    while not events_of(run, "stage_entered"):
        time.sleep(0.01)
    run.cancel()
    run.wait(30)
    assert run.status == "cancelled"
    assert run.error is None
    assert modified(run) == []


# -- compiling at start -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "hook", "fragment"),
    [
        ("fn before_inference(ctx) { let = }", "before_inference", "Script compilation failed: hooks/h.rhai"),
        ("fn on_stage_exit(ctx) { () }", "before_inference", "defines no fn before_inference(ctx)"),
        ("fn before_inference(a, b) { () }", "before_inference", "exactly one parameter (ctx), found 2"),
        ('fn before_inference(ctx) { eval("1") }', "before_inference", "eval"),
    ],
)
def test_a_broken_hook_script_stops_the_run_before_any_model_call(engine, tmp_path, script, hook, fragment):
    from lev_nb.providers.scripted import ScriptedModel

    model = ScriptedModel([say("never")])
    with pytest.raises(ScriptError) as info:
        engine.start(one_stage(tmp_path, script, hook), model)
    assert fragment in str(info.value)
    assert "stage 'work'" in str(info.value)
    assert model.requests == []


def test_one_file_backs_several_hooks_and_must_define_each(engine, tmp_path):
    script = "fn on_stage_enter(ctx) { () }"
    with pytest.raises(ScriptError, match="defines no fn on_stage_exit"):
        engine.start(one_stage(tmp_path, script, "on_stage_enter", "on_stage_exit"), [say("x")])


def test_hook_paths_outside_the_agent_folder_are_refused(engine, tmp_path):
    (tmp_path / "outside.rhai").write_text("fn before_inference(ctx) { () }", encoding="utf-8")
    bp = agent(tmp_path, ONE_STAGE.format(hooks='before_inference = "../outside.rhai"'), {})
    with pytest.raises(ScriptError, match="resolves outside the agent folder"):
        engine.start(bp, [say("x")])


def test_hook_symlinked_out_of_the_agent_folder_is_refused(engine, tmp_path):
    (tmp_path / "outside.rhai").write_text("fn before_inference(ctx) { () }", encoding="utf-8")
    bp = agent(tmp_path, ONE_STAGE.format(hooks='before_inference = "hooks/link.rhai"'), {})
    (tmp_path / "agent" / "hooks").mkdir()
    (tmp_path / "agent" / "hooks" / "link.rhai").symlink_to(tmp_path / "outside.rhai")
    with pytest.raises(ScriptError, match="resolves outside the agent folder"):
        engine.start(bp, [say("x")])


def test_a_missing_hook_file_is_a_script_error(engine, tmp_path):
    bp = agent(tmp_path, ONE_STAGE.format(hooks='before_inference = "hooks/missing.rhai"'), {})
    with pytest.raises(ScriptError, match="cannot read the script"):
        engine.start(bp, [say("x")])


def test_hooks_need_a_blueprint_folder(engine):
    bp = blueprint(ONE_STAGE.format(hooks='before_inference = "hooks/h.rhai"'))
    with pytest.raises(ScriptError, match="loaded from text"):
        engine.start(bp, [say("x")])


def test_a_stage_without_hooks_runs_as_before(engine, tmp_path):
    body = TWO_STAGES.format(hooks="").replace("[stages.b.hooks]\n", '[stages.b.hooks]\non_stage_enter = "hooks/h.rhai"\n')
    bp = agent(tmp_path, body, {"hooks/h.rhai": 'fn on_stage_enter(ctx) { #{action: "modify", value: #{notes: "in b"}} }'})
    run, model = engine.run(bp, [say("a done"), say("b done")])
    assert run.status == "complete", run.error
    assert "in b" not in system_of(model.requests[0])
    assert "in b" in system_of(model.requests[1])


def test_a_lone_surrogate_in_model_output_does_not_break_an_after_inference_hook(engine, tmp_path):
    # Issue 12 item 10: a model's text can hold a lone surrogate (JSON "\ud800"); a Rhai string
    # cannot, so the hook sees it replaced rather than the run dying as an "internal error".
    script = 'fn after_inference(ctx) { #{action: "modify", value: `seen ${ctx.response.len()}`} }'
    bp = one_stage(tmp_path, script, "after_inference")
    run, model = engine.run(bp, [call("list_dir", text="bad \ud800 text", path="."), say("done")])
    assert run.status == "complete", run.error
    assistant = next(m for m in model.requests[1].messages if m.role == "assistant")
    assert assistant.text() == "seen 10"

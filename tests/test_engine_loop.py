"""The run loop: tool batches, ending a stage with text, the text-only nudge and max_iterations."""

from __future__ import annotations

from conftest import call, events_of, kinds, purposes, request_text, say

from lev_nb.engine.plan import DEFAULT_NUDGE_TEXT

ONE_STAGE = """
[stages.work]
available_tools = ["list_dir"]
[stages.work.transitions]
"""


def test_tool_batch_then_text_ends_the_stage(engine):
    run, model = engine.run(ONE_STAGE, [call("list_dir", path="."), say("all done")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["work"]
    assert purposes(model) == ["stage", "stage"]
    assert [e.tool for e in events_of(run, "tool_finished")] == ["list_dir"]
    assert events_of(run, "nudge") == []
    assert run.meta["iteration"] == 2
    assert run.meta["tool_calls"] == 1


def test_text_only_turn_is_nudged_up_to_the_default_max(engine):
    run, model = engine.run(ONE_STAGE, [say("t1"), say("t2"), say("t3"), say("t4")])
    assert run.status == "complete", run.error
    nudges = events_of(run, "nudge")
    assert [n.reason for n in nudges] == ["text_only"] * 3
    assert all(n.text == DEFAULT_NUDGE_TEXT for n in nudges)
    assert len(model.requests) == 4
    # The nudge reaches the model as a [System] message after the text it answers.
    last = model.requests[-1]
    assert "[System] " + DEFAULT_NUDGE_TEXT in request_text(last)
    assert "t3" in request_text(last)


def test_nudge_stops_once_the_stage_has_used_a_tool(engine):
    run, model = engine.run(ONE_STAGE, [say("thinking"), call("list_dir"), say("done")])
    assert run.status == "complete", run.error
    assert len(events_of(run, "nudge")) == 1
    assert len(model.requests) == 3


def test_nudge_max_and_text_with_stage_and_regions_substituted(engine):
    toml = """
    [context.regions.system]
    kind = "pinned"
    max_tokens = 2000
    [context.regions.plan]
    kind = "pinned"
    max_tokens = 500
    required = true
    [context.regions.conversation]
    kind = "sliding_window"
    max_tokens = 5000
    [agent.nudge]
    max = 1
    text = "Stage {stage} must fill {regions}."
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions]
    """
    run, model = engine.run(toml, [say("a"), say("b")])
    assert run.status == "complete", run.error
    assert [n.text for n in events_of(run, "nudge")] == ["Stage work must fill plan."]
    assert len(model.requests) == 2


def test_stage_nudge_overrides_agent_nudge_field_by_field(engine):
    toml = """
    [agent.nudge]
    max = 1
    text = "agent-level text"
    [stages.work]
    available_tools = ["list_dir"]
    nudge = { max = 2 }
    [stages.work.transitions]
    """
    run, model = engine.run(toml, [say("a"), say("b"), say("c")])
    assert run.status == "complete", run.error
    assert [n.text for n in events_of(run, "nudge")] == ["agent-level text"] * 2


def test_nudge_disabled_accepts_the_first_text(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    nudge = { enabled = false }
    [stages.work.transitions]
    """
    run, model = engine.run(toml, [say("the plan is X")])
    assert run.status == "complete", run.error
    assert events_of(run, "nudge") == []
    assert len(model.requests) == 1


def test_accepted_final_text_is_not_appended_to_the_conversation(engine):
    toml = """
    [stages.a]
    available_tools = ["list_dir"]
    [stages.a.transitions.b]
    hint = "next"
    [stages.b]
    available_tools = ["list_dir"]
    [stages.b.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("FINAL-TEXT-OF-A"), call("list_dir"), say("end")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["a", "b"]
    assert "FINAL-TEXT-OF-A" not in request_text(model.requests[2])


def test_max_iterations_cap_takes_the_max_iterations_edge(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    max_iterations = 2
    [stages.work.transitions.rescue]
    condition = "max_iterations"
    [stages.work.transitions.done]
    hint = "finished"
    [stages.rescue]
    available_tools = ["list_dir"]
    [stages.rescue.transitions]
    [stages.done]
    [stages.done.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), call("list_dir"), call("list_dir"), say("ok")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "rescue"]
    assert run.flags["max_iterations_hit"] == 1
    assert [e.limit for e in events_of(run, "max_iterations")] == [2]
    transition = events_of(run, "transition")[0]
    assert (transition.target, transition.condition) == ("rescue", "max_iterations")
    # The stage got exactly two inferences; the rescue stage is told the work was cut off.
    assert [r.stage for r in model.requests] == ["work", "work", "rescue", "rescue"]
    assert "iteration cap (2)" in request_text(model.requests[2])


def test_max_iterations_note_goes_to_error_report_when_declared(engine):
    toml = """
    [context.regions.system]
    kind = "pinned"
    max_tokens = 2000
    [context.regions.error_report]
    kind = "pinned"
    max_tokens = 2000
    [context.regions.conversation]
    kind = "sliding_window"
    max_tokens = 5000
    [stages.work]
    available_tools = ["list_dir"]
    max_iterations = 1
    [stages.work.transitions.rescue]
    condition = "max_iterations"
    [stages.rescue]
    available_tools = ["list_dir"]
    [stages.rescue.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), call("list_dir"), say("ok")])
    assert run.status == "complete", run.error
    rescue_request = model.requests[1]
    report = [block for block in rescue_request.system if "iteration cap (1)" in block]
    assert report and "error_report" in report[0]
    assert all("iteration cap" not in m.text() for m in rescue_request.messages)


def test_max_iterations_without_its_edge_falls_back_to_normal_resolution(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    max_iterations = 1
    [stages.work.transitions.next]
    hint = "go on"
    [stages.next]
    available_tools = ["list_dir"]
    [stages.next.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), call("list_dir"), say("ok")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "next"]
    assert run.flags["max_iterations_hit"] == 1
    assert events_of(run, "transition")[0].condition == "always"
    assert "routing" not in purposes(model)
    assert "iteration cap (1)" in request_text(model.requests[1])


def test_max_iterations_on_a_terminal_stage_completes_the_run(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    max_iterations = 3
    [stages.work.transitions]
    """
    run, model = engine.run(toml, [call("list_dir")] * 3)
    assert run.status == "complete", run.error
    assert run.flags["max_iterations_hit"] == 1
    assert len(model.requests) == 3
    assert kinds(run)[-1] == "completed"

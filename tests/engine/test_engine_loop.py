"""The run loop: tool batches, ending a stage with text, the text-only nudge and max_iterations."""

from __future__ import annotations

import pytest
from support import WORK_STAGE, call, events_of, kinds, purposes, request_text, say

from lev_nb.engine.plan.types import DEFAULT_NUDGE_TEXT


def test_tool_batch_then_text_ends_the_stage(engine):
    run, model = engine.run(WORK_STAGE, [call("list_dir", path="."), say("all done")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["work"]
    assert purposes(model) == ["stage", "stage"]
    assert [e.tool for e in events_of(run, "tool_finished")] == ["list_dir"]
    assert events_of(run, "nudge") == []
    assert run.meta["iteration"] == 2
    assert run.meta["tool_calls"] == 1


def test_text_only_turn_is_nudged_up_to_the_default_max(engine):
    run, model = engine.run(WORK_STAGE, [say("t1"), say("t2"), say("t3"), say("t4")])
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
    run, model = engine.run(WORK_STAGE, [say("thinking"), call("list_dir"), say("done")])
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
    assert len([e for e in events_of(run, "tool_finished") if e.stage == "work"]) == 2
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


def test_entry_stage_from_the_agent_table(engine):
    toml = """
    [agent]
    name = "entry"
    entry_stage = "second"
    [stages.first]
    [stages.first.transitions]
    [stages.second]
    available_tools = ["list_dir"]
    [stages.second.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("ok")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["second"]


def test_stage_instructions_are_shown_and_replaced_on_the_next_stage(engine):
    toml = """
    [stages.a]
    system_prompt = "INSTRUCTIONS-A"
    available_tools = ["list_dir"]
    [stages.b]
    system_prompt = "INSTRUCTIONS-B"
    available_tools = ["list_dir"]
    """
    run, model = engine.run(toml, [call("list_dir"), say("a"), call("list_dir"), say("b")])
    first, later = "\n".join(model.requests[0].system), "\n".join(model.requests[2].system)
    assert "[Stage instructions: INSTRUCTIONS-A]" in first
    assert "INSTRUCTIONS-B" in later and "INSTRUCTIONS-A" not in later
    assert "Task: do the task" in first


def test_output_stage_prompt_says_an_answer_is_owed(engine):
    toml = """
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output"]
    output = { format = "csv" }
    [stages.answer.transitions]
    """
    run, model = engine.run(toml, [call("submit_output", content="a,b\n1,2\n"), say("ok")])
    assert run.status == "complete", run.error
    system = "\n".join(model.requests[0].system)
    assert "you must call `submit_output`" in system
    assert "Return it in this format: csv." in system
    assert model.requests[0].output_format == "csv"


def test_lost_workspace_is_noticed_every_fifth_turn(engine, workdir):
    import shutil

    from lev_nb.providers.scripted import ScriptedModel

    class Deleting(ScriptedModel):
        async def complete(self, request):
            if len(self.requests) == 2:
                shutil.rmtree(workdir)
            return await super().complete(request)

    model = Deleting([call("list_dir")] * 8)
    run, _ = engine.run(WORK_STAGE, model)
    assert run.status == "error"
    assert "no longer accessible" in run.error
    assert run.flags["workspace_lost"] is True
    assert len(model.requests) == 5


def test_condition_edges_are_looked_up_in_declaration_order(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions.zeta]
    condition = "error"
    [stages.work.transitions.alpha]
    condition = "error"
    [stages.zeta]
    nudge = { enabled = false }
    [stages.zeta.transitions]
    [stages.alpha]
    nudge = { enabled = false }
    [stages.alpha.transitions]
    """
    run, _ = engine.run(toml, [{"error": {"kind": "auth", "message": "x"}}, say("ok")])
    assert run.stage_history == ["work", "zeta"]


@pytest.mark.slow  # waits out the 1 s request timeout
def test_request_timeout_is_a_failed_model_call(engine):
    import asyncio

    class Sleepy:
        name = "sleepy"

        async def complete(self, request):
            await asyncio.sleep(3600)

    toml = """
    [stages.work]
    model = { models = [{ provider = "anthropic", model = "claude-sonnet-4-6" }], request_timeout_secs = 1 }
    available_tools = ["list_dir"]
    [stages.work.transitions]
    """
    run, _ = engine.run(toml, Sleepy())
    # A model that never answers, retries spent, is out of reach: the run pauses (resumable).
    assert run.status == "paused"
    assert "did not answer within 1 s" in run.pause_reason

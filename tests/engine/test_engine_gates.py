"""Edge gates (spec/runtime.md §6.4, seeds/transition-gate.md) and the stuck watchdog (§7.2)."""

from __future__ import annotations

import asyncio

from support import call, calls, events_of, request_text, say

from lev_nb.providers.scripted import ScriptedModel

REGIONS = """
[context.regions.system]
kind = "pinned"
max_tokens = 2000
[context.regions.plan]
kind = "pinned"
max_tokens = 1000
[context.regions.notes]
kind = "pinned"
max_tokens = 1000
[context.regions.todo]
kind = "checklist"
max_tokens = 1000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
"""

GATED = REGIONS + """
[stages.work]
available_tools = ["write_file", "context_write", "todo_add", "todo_done", "list_dir", "shell"]
[stages.work.transitions.review]
hint = "ready"
gate = {gate}
[stages.review]
nudge = {{ enabled = false }}
[stages.review.transitions]
"""


def gated(gate: str) -> str:
    return GATED.format(gate=gate)


def test_gate_checks_run_in_order_each_blocking_until_satisfied(engine, write_allowed):
    gate = (
        '{ require_region_updated = "plan", require_no_open_items = "todo", '
        'require_regions = ["notes"], require_modifications = true, max_attempts = 9 }'
    )
    turns = [
        call("todo_add", region="todo", item="check the edge case"),
        say("done"),  # blocked: plan unchanged
        call("context_write", region="plan", content="the plan"),
        say("done"),  # blocked: open item
        call("todo_done", region="todo", id=1),
        say("done"),  # blocked: notes empty
        call("context_write", region="notes", content="some notes"),
        say("done"),  # blocked: no file modified
        call("write_file", path="out.txt", content="x"),
        say("done"),  # passes
        say("reviewed"),
    ]
    run, model = engine.run(write_allowed(gated(gate)), turns)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "review"]
    blocked = [e.message for e in events_of(run, "gate_blocked")]
    assert len(blocked) == 4
    assert "`plan`" in blocked[0] and "not changed" in blocked[0]
    assert "1 item(s) are still open in `todo`" in blocked[1] and "check the edge case" in blocked[1]
    assert "`notes` region is still empty" in blocked[2]
    assert "No file changes were recorded" in blocked[3]
    assert [e.attempt for e in events_of(run, "gate_blocked")] == [1, 2, 3, 4]
    assert run.flags["gates_forced"] == 0
    # Each block reaches the model as a [System] nudge.
    assert "[System] " + blocked[0] in request_text(model.requests[2])


def test_gate_custom_message_replaces_the_generated_one(engine):
    gate = '{ require_regions = ["notes"], message = "Write the notes first." }'
    turns = [call("list_dir"), say("done"), call("context_write", region="notes", content="n"), say("done"), say("r")]
    run, model = engine.run(gated(gate), turns)
    assert run.status == "complete", run.error
    assert [e.message for e in events_of(run, "gate_blocked")] == ["Write the notes first."]
    assert "[System] Write the notes first." in request_text(model.requests[2])


def test_gate_region_is_an_alternative_to_file_modifications(engine):
    gate = '{ require_modifications = true, region = "plan" }'
    turns = [call("context_write", region="plan", content="p"), say("done"), say("r")]
    run, _ = engine.run(gated(gate), turns)
    assert run.status == "complete", run.error
    assert events_of(run, "gate_blocked") == []
    assert run.stage_history == ["work", "review"]


def test_gate_region_empty_still_requires_modifications(engine):
    gate = '{ require_modifications = true, region = "plan", max_attempts = 1 }'
    turns = [call("list_dir"), say("done"), say("done again"), say("r")]
    run, _ = engine.run(gated(gate), turns)
    assert len(events_of(run, "gate_blocked")) == 1
    assert run.flags["gates_forced"] == 1


def test_gate_tools_count_as_modifying(engine):
    toml = REGIONS + """
    [stages.work]
    available_tools = ["context_write"]
    [stages.work.transitions.review]
    gate = { require_modifications = true, tools = ["context_write"] }
    [stages.review]
    nudge = { enabled = false }
    [stages.review.transitions]
    """
    turns = [call("context_write", region="notes", content="n"), say("done"), say("r")]
    run, _ = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert events_of(run, "gate_blocked") == []
    assert run.flags["modified_file_count"] == 1


def test_gate_without_modifying_tools_offered_passes(engine):
    toml = REGIONS + """
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions.review]
    gate = { require_modifications = true }
    [stages.review]
    nudge = { enabled = false }
    [stages.review.transitions]
    """
    run, _ = engine.run(toml, [call("list_dir"), say("done"), say("r")])
    assert events_of(run, "gate_blocked") == []
    assert run.stage_history == ["work", "review"]


def test_gate_shares_max_attempts_then_is_forced(engine):
    gate = '{ require_regions = ["notes"], require_modifications = true, max_attempts = 2 }'
    turns = [call("list_dir"), say("d1"), say("d2"), say("d3"), say("r")]
    run, _ = engine.run(gated(gate), turns)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "review"]
    assert len(events_of(run, "gate_blocked")) == 2
    forced = events_of(run, "gate_forced")
    assert len(forced) == 1 and forced[0].target == "review"
    assert run.flags["gates_forced"] == 1
    assert run.flags["required_regions_abandoned"] == ["notes"]
    assert events_of(run, "transition")[0].target == "review"


def test_blocked_gate_does_not_re_enter_the_stage(engine):
    toml = REGIONS + """
    [stages.work]
    available_tools = ["context_write", "list_dir"]
    max_iterations = 3
    [stages.work.transitions.review]
    gate = { require_regions = ["notes"], max_attempts = 2 }
    [stages.review]
    nudge = { enabled = false }
    [stages.review.transitions]
    """
    turns = [call("list_dir"), say("d1"), say("d2"), say("r")]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "review"]
    assert len([e for e in events_of(run, "stage_entered") if e.stage == "work"]) == 1
    # Iterations kept counting through the blocks, so the cap ended the stage after 3 turns.
    assert [r.stage for r in model.requests] == ["work", "work", "work", "review"]
    assert run.flags["max_iterations_hit"] == 1
    assert run.flags["gates_forced"] == 1


# ---------------------------------------------------------------------------------------- stuck
STUCK = REGIONS + """
[context.regions.stuck_report]
kind = "pinned"
max_tokens = 1000
[stages.work]
available_tools = ["write_file", "list_dir"]
[stages.work.transitions.done]
hint = "finished"
[stages.work.transitions.reassess]
condition = "stuck"
{thresholds}
[stages.done]
nudge = {{ enabled = false }}
[stages.done.transitions]
[stages.reassess]
nudge = {{ enabled = false }}
[stages.reassess.transitions]
"""


def stuck(thresholds: str) -> str:
    return STUCK.format(thresholds=thresholds)


def assert_stuck_into_reassess(run, model, reason_part: str) -> None:
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "reassess"]
    reasons = [e.reason for e in events_of(run, "stuck")]
    assert len(reasons) == 1 and reason_part in reasons[0]
    transition = events_of(run, "transition")[0]
    assert (transition.target, transition.condition) == ("reassess", "stuck")
    report = [b for b in model.requests[-1].system if "[Stuck in stage 'work']" in b]
    assert report and "stuck_report" in report[0]


def test_stuck_after_iterations(engine):
    turns = [call("list_dir"), call("list_dir"), say("r")]
    run, model = engine.run(stuck("stuck_after_iterations = 2"), turns)
    assert_stuck_into_reassess(run, model, "2 model turns")
    assert [r.stage for r in model.requests] == ["work", "work", "reassess"]


def test_stuck_after_same_file_edits(engine, write_allowed):
    turns = [
        call("write_file", path="a.txt", content="1"),
        call("write_file", path="b.txt", content="1"),
        call("write_file", path="a.txt", content="2"),
        say("r"),
    ]
    run, model = engine.run(write_allowed(stuck("stuck_after_same_file_edits = 2")), turns)
    assert_stuck_into_reassess(run, model, "'a.txt' 2 times")


def test_stuck_after_tool_calls(engine):
    turns = [calls(("list_dir", {}), ("list_dir", {}), ("list_dir", {})), say("r")]
    run, model = engine.run(stuck("stuck_after_tool_calls = 3"), turns)
    assert_stuck_into_reassess(run, model, "3 tool calls")


class RewindingModel(ScriptedModel):
    """A scripted model that, on its first request, moves the stage's start an hour back."""

    run = None

    async def complete(self, request):
        while self.run is None:
            await asyncio.sleep(0.005)
        if not self.requests:
            self.run._runner.progress.started_at -= 3600
        return await super().complete(request)


def test_stuck_after_minutes(engine):
    model = RewindingModel([call("list_dir"), say("r")])
    run, _ = engine.start(stuck("stuck_after_minutes = 30"), model)
    model.run = run
    run.wait(60)
    assert_stuck_into_reassess(run, model, "60 minutes")


def test_stuck_note_goes_to_conversation_without_a_stuck_report_region(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions.reassess]
    condition = "stuck"
    stuck_after_iterations = 1
    [stages.reassess]
    nudge = { enabled = false }
    [stages.reassess.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("r")])
    assert run.stage_history == ["work", "reassess"]
    assert any("[Stuck in stage 'work']" in m.text() for m in model.requests[-1].messages)


def test_stuck_fires_once_per_stage_entry(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions.done]
    hint = "finished"
    [stages.work.transitions.reassess]
    condition = "stuck"
    stuck_after_iterations = 2
    [stages.reassess]
    available_tools = ["list_dir"]
    max_revisits = 1
    [stages.reassess.transitions.work]
    hint = "try again"
    [stages.done]
    nudge = { enabled = false }
    [stages.done.transitions]
    """
    turns = [
        call("list_dir"), call("list_dir"),  # work #1: stuck after 2 turns
        call("list_dir"), say("replanned"),  # reassess #1
        call("list_dir"), call("list_dir"),  # work #2: counters reset, stuck again
        call("list_dir"), say("replanned"),  # reassess #2 (its one revisit)
        call("list_dir"), call("list_dir"), say("finished"),  # work #3: stuck edge exhausted
        say("done"),
    ]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "reassess", "work", "reassess", "work", "done"]
    assert len(events_of(run, "stuck")) == 2


def test_each_stage_turn_tells_the_model_what_the_stage_still_owes(engine):
    # request.duties: what every gate would refuse the stage for right now (a hint for the mock).
    gate = '{ require_regions = ["plan"], require_modifications = true, require_no_open_items = "todo" }'
    turns = [call("todo_add", region="todo", item="check"), call("context_write", region="plan", content="p"),
             call("todo_done", region="todo", id=1), call("write_file", path="a.txt", content="x"), say("ready"),
             say("done")]
    run, model = engine.run(GATED.format(gate=gate), turns)
    assert run.status == "complete", run.error
    work = [r.duties for r in model.requests if r.stage == "work" and r.purpose == "stage"]
    assert (work[0].regions, work[0].modify_files, work[0].open_items) == (["plan"], True, [])
    assert work[1].open_items == [("todo", 1)] and work[1].use_a_tool is False
    assert (work[2].regions, work[2].open_items) == ([], [("todo", 1)])
    assert not work[4]  # everything met: the stage owes nothing
    assert work[0].use_a_tool is True  # no tool used yet: a text answer would be nudged


def test_a_gate_at_the_iteration_cap_is_forced_after_its_attempts_not_ended_as_stuck(engine):
    # Issue 26: with the stage at its max_iterations, each attempt re-asks the gate without a model
    # call; max_attempts = 100 (the most allowed) went past the idle guard (50) and ended the run.
    toml = gated('{ require_regions = ["notes"], max_attempts = 100 }').replace(
        "[stages.work.transitions.review]", "max_iterations = 1\nnudge = { enabled = false }\n"
        "[stages.work.transitions.review]")
    run, _ = engine.run(toml, [call("list_dir"), say("r")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "review"]
    assert len(events_of(run, "gate_blocked")) == 100 and len(events_of(run, "gate_forced")) == 1
    assert events_of(run, "stuck") == []

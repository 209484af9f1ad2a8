"""Normal resolution and routing calls (spec/runtime.md §6.2-§6.3), edges in declaration order."""

from __future__ import annotations

import pytest
from support import call, events_of, purposes, say

LINEAR = """
[stages.first]
available_tools = ["list_dir"]
[stages.second]
available_tools = ["list_dir"]
"""

TWO_WAY = """
[stages.hub]
available_tools = ["list_dir"]
{extra}
[stages.hub.transitions.left]
hint = "go left"
[stages.hub.transitions.right]
hint = "go right"
[stages.left]
available_tools = ["list_dir"]
[stages.left.transitions]
[stages.right]
available_tools = ["list_dir"]
[stages.right.transitions]
"""


def two_way(extra: str = "") -> str:
    return TWO_WAY.replace("{extra}", extra)


def test_absent_transitions_fall_through_to_the_next_stage_and_the_last_is_terminal(engine):
    run, model = engine.run(LINEAR, [call("list_dir"), say("a"), call("list_dir"), say("b")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["first", "second"]
    assert purposes(model) == ["stage"] * 4
    transition = events_of(run, "transition")[0]
    assert (transition.target, transition.condition, transition.transform) == ("second", "always", "direct")


def test_empty_transitions_table_is_terminal(engine):
    toml = """
    [stages.first]
    available_tools = ["list_dir"]
    [stages.first.transitions]
    [stages.second]
    """
    run, model = engine.run(toml, [call("list_dir"), say("a")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["first"]


def test_single_choosable_edge_is_followed_without_a_routing_call(engine):
    toml = """
    [stages.a]
    available_tools = ["list_dir"]
    [stages.a.transitions.b]
    hint = "only way"
    [stages.a.transitions.fix]
    condition = "error"
    [stages.b]
    available_tools = ["list_dir"]
    [stages.b.transitions]
    [stages.fix]
    [stages.fix.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("a done"), call("list_dir"), say("b done")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["a", "b"]
    assert "routing" not in purposes(model)


def test_several_edges_ask_the_model_with_targets_and_hints(engine):
    run, model = engine.run(two_way(), [call("list_dir"), say("done"), say("right"), call("list_dir"), say("end")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["hub", "right"]
    routing = model.requests[2]
    assert routing.purpose == "routing"
    assert routing.choices == ["left", "right"]
    assert routing.tools == []
    assert routing.temperature == 0.0
    assert routing.max_tokens == 256
    prompt = routing.messages[-1].text()
    assert "- left: go left\n- right: go right" in prompt
    assert "DONE" not in prompt
    # The answer is remembered in the conversation of the next stage.
    assert "Transitioning to: right" in "\n".join(m.text() for m in model.requests[3].messages)


def test_custom_transition_prompt_heads_the_routing_question(engine):
    toml = two_way('transition_prompt = "Pick where the review goes."')
    run, model = engine.run(toml, [call("list_dir"), say("done"), say("left"), call("list_dir"), say("end")])
    prompt = model.requests[2].messages[-1].text()
    assert prompt.startswith("Pick where the review goes.\n\nAvailable transitions:\n- left: go left")
    assert run.stage_history == ["hub", "left"]


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("RIGHT", ["hub", "right"]),
        ("right.", ["hub", "right"]),
        ("I think we should go to the\nright", ["hub", "right"]),  # last short line
        ("left\nbut maybe right", ["hub", "left"]),  # first line wins
        ("nowhere in particular", ["hub", "left"]),  # no match: first edge
        ("DONE", ["hub", "left"]),  # DONE is not an option without allow_complete
    ],
)
def test_routing_answer_matching(engine, answer, expected):
    turns = [call("list_dir"), say("done"), say(answer), call("list_dir"), say("end")]
    run, model = engine.run(two_way(), turns)
    assert run.status == "complete", run.error
    assert run.stage_history == expected


def test_unmatched_answer_warns_and_takes_the_first_edge(engine):
    run, _ = engine.run(two_way(), [call("list_dir"), say("done"), say("banana"), call("list_dir"), say("end")])
    assert run.stage_history == ["hub", "left"]
    assert any("banana" in w.message for w in events_of(run, "warning"))


def test_done_with_allow_complete_ends_the_run(engine):
    toml = two_way("allow_complete = true")
    run, model = engine.run(toml, [call("list_dir"), say("done"), say("done")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["hub"]
    assert "DONE" in model.requests[2].messages[-1].text()
    assert model.requests[2].allow_done is True


def test_unmatched_answer_with_allow_complete_completes(engine):
    toml = two_way("allow_complete = true")
    run, model = engine.run(toml, [call("list_dir"), say("done"), say("no idea")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["hub"]


def test_single_edge_with_allow_complete_still_asks(engine):
    toml = """
    [stages.a]
    available_tools = ["list_dir"]
    allow_complete = true
    [stages.a.transitions.b]
    hint = "more work"
    [stages.b]
    [stages.b.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("done"), say("DONE")])
    assert purposes(model) == ["stage", "stage", "routing"]
    assert run.status == "complete", run.error
    assert run.stage_history == ["a"]


LOOP = """
[stages.work]
available_tools = ["list_dir"]
max_revisits = 1
[stages.work.transitions.check]
hint = "check it"
[stages.check]
available_tools = ["list_dir"]
[stages.check.transitions.work]
hint = "redo"
{extra}
[stages.out]
nudge = { enabled = false }
[stages.out.transitions]
"""


def test_max_revisits_drops_an_exhausted_target_from_the_choices(engine):
    toml = LOOP.replace("{extra}", "[stages.check.transitions.out]\nhint = \"finish\"")
    turns = [
        call("list_dir"), say("w1"),  # work (visit 1)
        call("list_dir"), say("c1"), say("work"),  # check, routing -> work
        call("list_dir"), say("w2"),  # work (visit 2 = 1 revisit)
        call("list_dir"), say("c2"),  # check: work is exhausted -> only 'out' -> no routing call
        say("o"),
    ]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "check", "work", "check", "out"]
    assert [r.choices for r in model.requests if r.purpose == "routing"] == [["work", "out"]]


def test_dead_end_edge_taken_when_every_normal_target_is_exhausted(engine):
    toml = LOOP.replace("{extra}", "[stages.check.transitions.out]\ncondition = \"dead_end\"")
    turns = [
        call("list_dir"), say("w1"), call("list_dir"), say("c1"),
        call("list_dir"), say("w2"), call("list_dir"), say("c2"),
        say("o"),
    ]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "check", "work", "check", "out"]
    last = events_of(run, "transition")[-1]
    assert (last.target, last.condition) == ("out", "dead_end")
    assert "dead-ended" in "\n".join(m.text() for m in model.requests[-1].messages)


def test_error_edge_is_the_dead_end_fallback(engine):
    toml = LOOP.replace("{extra}", "[stages.check.transitions.out]\ncondition = \"error\"")
    turns = [
        call("list_dir"), say("w1"), call("list_dir"), say("c1"),
        call("list_dir"), say("w2"), call("list_dir"), say("c2"),
        say("o"),
    ]
    run, _ = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert run.stage_history[-1] == "out"
    assert events_of(run, "transition")[-1].condition == "error"


def test_dead_end_without_an_escape_ends_the_run_in_error(engine):
    toml = LOOP.replace("{extra}", "")
    turns = [
        call("list_dir"), say("w1"), call("list_dir"), say("c1"),
        call("list_dir"), say("w2"), call("list_dir"), say("c2"),
    ]
    run, _ = engine.run(toml, turns)
    assert run.status == "error"
    assert "dead-ended" in run.error
    assert run.stage_history == ["work", "check", "work", "check"]


def test_dead_end_edge_wins_over_error_edge(engine):
    toml = LOOP.replace(
        "{extra}",
        "[stages.check.transitions.fixer]\ncondition = \"error\"\n"
        "[stages.check.transitions.out]\ncondition = \"dead_end\"\n"
        "[stages.fixer]\n[stages.fixer.transitions]",
    )
    turns = [
        call("list_dir"), say("w1"), call("list_dir"), say("c1"),
        call("list_dir"), say("w2"), call("list_dir"), say("c2"),
        say("o"),
    ]
    run, _ = engine.run(toml, turns)
    assert run.stage_history[-1] == "out"

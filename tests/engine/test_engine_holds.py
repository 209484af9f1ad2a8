"""Exit holds (required regions, owed final outputs; spec/runtime.md §5.1) and edge transforms (§6.5)."""

from __future__ import annotations

from pathlib import Path

from support import OUTPUT_STAGE, call, events_of, fail, request_text, say

REGIONS = """
[context.regions.system]
kind = "pinned"
max_tokens = 2000
[context.regions.findings]
kind = "pinned"
max_tokens = 1000
required = true
{extra}
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
"""


def regions(extra: str = "") -> str:
    return REGIONS.replace("{extra}", extra)


# ------------------------------------------------------------------------------ required regions
def test_required_region_nudges_until_written(engine):
    toml = regions() + """
    [stages.work]
    available_tools = ["context_write"]
    [stages.work.transitions]
    """
    turns = [call("context_write", region="notes", content="x"), say("done"),
             call("context_write", region="findings", content="found it"), say("done")]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    nudges = events_of(run, "nudge")
    assert [n.reason for n in nudges] == ["required_region"]
    assert "'findings'" in nudges[0].text
    assert run.flags["required_regions_abandoned"] == []


def test_required_region_message_substitutes_the_region_name(engine):
    toml = regions().replace("required = true", 'required = true\nrequired_message = "Put your results in {region}."') + """
    [stages.work]
    available_tools = ["context_write"]
    [stages.work.transitions]
    """
    turns = [call("context_write", region="findings", content=""), say("done"),
             call("context_write", region="findings", content="ok"), say("done")]
    run, _ = engine.run(toml, turns)
    assert [n.text for n in events_of(run, "nudge")] == ["Put your results in findings."]


def test_required_region_cap_then_abandoned(engine):
    toml = regions() + """
    [stages.work]
    available_tools = ["context_write"]
    max_revisits = 2
    [stages.work.transitions]
    """
    turns = [call("context_write", region="notes", content="x"), say("d1"), say("d2"), say("d3")]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert len(events_of(run, "nudge")) == 2  # cap = max_revisits
    assert run.flags["required_regions_abandoned"] == ["findings"]
    assert len(model.requests) == 4


def test_required_region_not_enforced_without_context_write(engine):
    toml = regions() + """
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions]
    """
    run, _ = engine.run(toml, [call("list_dir"), say("done")])
    assert run.status == "complete", run.error
    assert events_of(run, "nudge") == []
    assert run.flags["required_regions_abandoned"] == []


# ------------------------------------------------------------------------------ owed outputs


def test_output_stage_submission_completes_the_run(engine):
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("submitted")])
    assert run.status == "complete", run.error
    assert run.result.content == "42"
    assert run.flags["produced_output"] is True
    assert run.flags["output_forced"] == 0


def test_owed_output_nudged_three_times_then_forced_and_the_run_completes(engine):
    run, model = engine.run(OUTPUT_STAGE, [say("a"), say("b"), say("c"), say("d")])
    nudges = events_of(run, "nudge")
    assert [n.reason for n in nudges] == ["required_output"] * 3
    assert "submit_output" in nudges[0].text
    assert len(model.requests) == 4
    assert run.flags["output_forced"] == 1
    assert run.status == "complete" and run.error is None
    assert run.result is None


def test_late_submission_after_an_output_nudge_is_accepted(engine):
    run, _ = engine.run(OUTPUT_STAGE, [say("a"), call("submit_output", content="late"), say("ok")])
    assert run.status == "complete", run.error
    assert run.flags["output_forced"] == 0
    assert run.result.content == "late"


def test_owed_output_on_max_iterations_is_forced_without_nudges(engine):
    toml = OUTPUT_STAGE.replace('mode = "output"', 'mode = "output"\nmax_iterations = 1')
    run, model = engine.run(toml, [say("a")])
    assert run.flags["max_iterations_hit"] == 1
    assert run.flags["output_forced"] == 1
    # One nudge was queued, but the next turn hit the cap first: the cap path wins.
    assert len(events_of(run, "nudge")) == 1
    assert len(model.requests) == 1
    assert run.status == "complete"


def test_done_answer_still_applies_the_owed_output_check(engine):
    toml = """
    [stages.hub]
    available_tools = ["list_dir"]
    allow_complete = true
    [stages.hub.transitions.answer]
    hint = "write the answer"
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output"]
    [stages.answer.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("done"), say("DONE")])
    assert run.stage_history == ["hub"]
    assert model.requests[-1].purpose == "routing"
    assert run.status == "complete" and run.flags["output_forced"] == 1
    assert any("final output" in e.message for e in events_of(run, "warning"))


def test_done_with_an_output_already_submitted_completes(engine):
    toml = """
    [stages.hub]
    available_tools = ["submit_output"]
    allow_complete = true
    [stages.hub.transitions.answer]
    hint = "more"
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output"]
    [stages.answer.transitions]
    """
    run, _ = engine.run(toml, [call("submit_output", content="early"), say("done"), say("DONE")])
    assert run.status == "complete", run.error
    assert run.result.content == "early"


# ------------------------------------------------------------------------------ transforms
TRANSFORM = """
[context.regions.system]
kind = "pinned"
max_tokens = 2000
[context.regions.keep]
kind = "pinned"
max_tokens = 1000
[context.regions.scratch]
kind = "clearable"
max_tokens = 1000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.a]
available_tools = ["context_write", "list_dir"]
[stages.a.transitions.b]
transform = "{transform}"
{config}
[stages.b]
nudge = {{ enabled = false }}
[stages.b.transitions]
"""

A_TURNS = [
    call("context_write", region="keep", content="PINNED-FACT"),
    call("context_write", region="scratch", content="SCRATCH-NOTE"),
    call("list_dir", text="A-CONVERSATION"),
    say("a done"),
    say("b done"),
]


def transform(kind: str, config: str = "") -> str:
    return TRANSFORM.format(transform=kind, config=config)


def test_direct_transform_carries_everything(engine):
    run, model = engine.run(transform("direct"), A_TURNS)
    seen = request_text(model.requests[-1])
    assert "PINNED-FACT" in seen and "SCRATCH-NOTE" in seen and "A-CONVERSATION" in seen


def test_clear_transform_empties_stage_specific_regions_and_keeps_pinned(engine):
    run, model = engine.run(transform("clear"), A_TURNS)
    assert run.status == "complete", run.error
    seen = request_text(model.requests[-1])
    assert "PINNED-FACT" in seen
    assert "SCRATCH-NOTE" not in seen
    assert "A-CONVERSATION" not in seen
    assert events_of(run, "transition")[0].transform == "clear"


def summaries(run):
    return [(e.trigger, e.regions, e.outcome) for e in events_of(run, "compaction")]


def test_compact_transform_summarises_the_stage_specific_regions(engine):
    # The scripted model also writes the summaries: one per region, before stage b starts.
    turns = A_TURNS[:4] + [say("SUM-SCRATCH"), say("SUM-CONVERSATION"), say("b done")]
    run, model = engine.run(transform("compact"), turns)
    assert run.status == "complete", run.error
    assert summaries(run) == [("transform", ["scratch", "conversation"], "summarised")]
    asked = [r for r in model.requests if r.purpose == "summary"]
    assert [r.stage for r in asked] == ["a", "a"]
    assert "SCRATCH-NOTE" in request_text(asked[0]) and "A-CONVERSATION" in request_text(asked[1])
    seen = request_text(model.requests[-1])
    assert "PINNED-FACT" in seen and "SUM-SCRATCH" in seen and "SUM-CONVERSATION" in seen
    assert "A-CONVERSATION" not in seen and "SCRATCH-NOTE" not in seen


def test_summarize_is_an_alias_of_compact(engine):
    turns = A_TURNS[:4] + [say("S1"), say("S2"), say("b done")]
    run, _ = engine.run(transform("summarize"), turns)
    assert events_of(run, "transition")[0].transform == "compact"
    assert summaries(run) == [("transform", ["scratch", "conversation"], "summarised")]


def test_with_no_summariser_the_regions_are_carried_with_an_event(engine):
    turns = A_TURNS[:4] + [fail("auth", "no key for the summariser"), fail("auth", "still none"), say("b done")]
    run, model = engine.run(transform("compact"), turns)
    assert run.status == "complete", run.error
    [carried] = events_of(run, "compaction")
    assert (carried.outcome, carried.regions) == ("carried", ["scratch", "conversation"])
    assert "no key for the summariser" in carried.reason and "carried unchanged" in carried.reason
    assert "A-CONVERSATION" in request_text(model.requests[-1])


def test_custom_transform_clears_carries_and_compacts(engine):
    config = '[stages.a.transitions.b.transform_config]\ncarry = ["keep"]\nclear = ["scratch"]\ncompact = ["conversation"]'
    config += '\ncompact_prompt = "List only the file names seen in {region}."'
    turns = A_TURNS[:4] + [say("SUM-CONVERSATION"), say("b done")]
    run, model = engine.run(transform("custom", config), turns)
    assert run.status == "complete", run.error
    system = "\n".join(model.requests[-1].system)
    assert "SCRATCH-NOTE" not in system
    assert "PINNED-FACT" in system
    [asked] = [r for r in model.requests if r.purpose == "summary"]
    assert "List only the file names seen in conversation." in request_text(asked)
    assert "A-CONVERSATION" not in request_text(model.requests[-1])
    assert summaries(run) == [("transform", ["conversation"], "summarised")]


def test_custom_carry_wins_over_clear(engine):
    config = '[stages.a.transitions.b.transform_config]\ncarry = ["scratch"]\nclear = ["scratch"]'
    run, model = engine.run(transform("custom", config), A_TURNS)
    assert "SCRATCH-NOTE" in "\n".join(model.requests[-1].system)
    assert events_of(run, "compaction") == []


def test_workdir_untouched_by_transforms(engine, workdir: Path):
    engine.run(transform("clear"), A_TURNS)
    assert list(workdir.iterdir()) == []

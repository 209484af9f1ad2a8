"""Context that compacts (spec/runtime.md §6.5, spec/blueprint.md §6.1): compacting regions past
their threshold, sliding windows with ``strategy = "compact"``, the whole context near the model's
window, budgets resolved against each stage's model, and the ``[compaction]`` model itself (a
scripted summariser, and the Messages API stand-in)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, message, serve, text
from support import blueprint, call, events_of, fail, request_text, say

LONG_NOTE = "observation " * 120  # ~360 tokens


def compactions(run: Any) -> list[tuple[str, list[str], str]]:
    return [(e.trigger, e.regions, e.outcome) for e in events_of(run, "compaction")]


# ------------------------------------------------------------------------------ compacting regions
COMPACTING = """
[context.regions.notes]
kind = "compacting"
max_tokens = 2000
threshold_tokens = 300
[context.regions.history]
kind = "compact_history"
source_region = "notes"
max_tokens = 1000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.work]
available_tools = ["context_append"]
nudge = { enabled = false }
[stages.work.transitions]
"""


def test_a_compacting_region_past_its_threshold_is_summarised_into_its_history(engine: Any) -> None:
    turns = [call("context_append", region="notes", content=LONG_NOTE), say("NOTES-SUMMARY"), say("done")]
    run, model = engine.run(COMPACTING, turns)
    assert run.status == "complete", run.error
    assert compactions(run) == [("threshold", ["notes"], "summarised")]
    [event] = events_of(run, "compaction")
    assert event.tokens_before > 300 and 0 < event.tokens_after < 20
    summary_request = model.requests[1]
    assert summary_request.purpose == "summary" and "observation observation" in request_text(summary_request)
    last = "\n".join(model.requests[-1].system)
    assert "## history\nNOTES-SUMMARY" in last and "observation" not in last


def test_under_its_threshold_a_compacting_region_is_left_alone(engine: Any) -> None:
    turns = [call("context_append", region="notes", content="short note"), say("done")]
    run, _ = engine.run(COMPACTING, turns)
    assert run.status == "complete", run.error
    assert compactions(run) == []


def test_compact_at_and_threshold_tokens_resolve_against_the_budget() -> None:
    from lev_nb.engine.plan.build import plan_from_blueprint

    bp = blueprint("""
[context.regions.a]
kind = "compacting"
max_tokens = 1000
compact_at = "50%"
[context.regions.b]
kind = "compacting"
max_tokens = 1000
[context.regions.c]
kind = "compacting"
max_tokens = 1000
compact_at = "90%"
threshold_tokens = 600
[context.regions.d]
kind = "compacting"
max_tokens = 1000
threshold_tokens = 950
[stages.s]
""")
    thresholds = {c.name: c.threshold for c in plan_from_blueprint(bp).layout if c.kind == "compacting"}
    assert thresholds == {"a": 500, "b": 800, "c": 600, "d": 950}


# ------------------------------------------------------------------------ sliding window, compact
WINDOW = """
[context.regions.system]
kind = "pinned"
max_tokens = 1000
[context.regions.conversation]
kind = "sliding_window"
max_items = 4
strategy = "compact"
compact_count = 2
max_tokens = 8000
{history}
[stages.work]
available_tools = ["list_dir"]
nudge = {{ enabled = false }}
[stages.work.transitions]
"""
PAIRED = '[context.regions.earlier]\nkind = "compact_history"\nsource_region = "conversation"\nmax_tokens = 1000'


def looks(n: int, first: int = 1) -> list[Any]:
    """Tool turns that differ from each other (the repetition watch stays quiet)."""
    return [call("list_dir", text=f"TURN-{i}", path="./" * i) for i in range(first, first + n)]


def test_a_compact_window_summarises_what_it_evicts_into_its_history(engine: Any) -> None:
    # Four items at most, two evicted at a time: the third tool turn pushes out the first one.
    turns = looks(3) + [say("WINDOW-SUMMARY"), say("done")]
    run, model = engine.run(WINDOW.format(history=PAIRED), turns)
    assert run.status == "complete", run.error
    assert compactions(run) == [("window", ["conversation"], "summarised")]
    summary_request = next(r for r in model.requests if r.purpose == "summary")
    assert "TURN-1" in request_text(summary_request) and "TURN-2" not in request_text(summary_request)
    last = model.requests[-1]
    assert "## earlier\nWINDOW-SUMMARY" in "\n".join(last.system)
    assert "TURN-1" not in request_text(last) and "TURN-3" in request_text(last)


def test_without_a_history_the_window_keeps_one_summary_as_its_first_entry(engine: Any) -> None:
    turns = looks(3) + [say("FIRST-SUMMARY")] + looks(1, first=4) + [say("SECOND-SUMMARY"), say("done")]
    run, model = engine.run(WINDOW.format(history=""), turns)
    assert run.status == "complete", run.error
    assert compactions(run) == [("window", ["conversation"], "summarised")] * 2
    second = [r for r in model.requests if r.purpose == "summary"][1]
    assert "FIRST-SUMMARY" in request_text(second)  # the new summary stands for everything evicted
    first = model.requests[-1].messages[0]
    assert first.role == "user" and first.text().startswith("[Summary of earlier context]\nSECOND-SUMMARY")
    assert "FIRST-SUMMARY" not in request_text(model.requests[-1])


def test_evicted_entries_without_a_summariser_are_dropped_with_an_event(engine: Any) -> None:
    turns = looks(3) + [fail("auth", "no summariser key"), say("done")]
    run, _ = engine.run(WINDOW.format(history=PAIRED), turns)
    assert run.status == "complete", run.error
    [event] = events_of(run, "compaction")
    assert event.outcome == "carried" and "dropped without a summary" in event.reason
    assert "no summariser key" in event.reason


# -------------------------------------------------------------------------- the model's window
PRESSURE = """
[context.regions.system]
kind = "pinned"
max_tokens = 500
[context.regions.scratch]
kind = "temporary"
max_tokens = 5000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.work]
model = { provider = "anthropic", model = "tiny-window-model" }
available_tools = ["context_append"]
nudge = { enabled = false }
[stages.work.transitions]
"""


def test_near_the_models_window_temporary_regions_lose_their_oldest_entries(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lev_nb.blueprint.constants import MODEL_WINDOWS

    monkeypatch.setitem(MODEL_WINDOWS, ("anthropic", "tiny-window-model"), 2000)
    turns = [call("context_append", region="scratch", content="A" * 2000),
             call("context_append", region="scratch", content="B" * 2000), say("done")]
    run, model = engine.run(PRESSURE, turns)
    assert run.status == "complete", run.error
    [evicted] = events_of(run, "context_evicted")
    assert evicted.region == "scratch" and evicted.entries == 1 and "2000-token window" in evicted.reason
    last = "\n".join(model.requests[-1].system)
    assert "BBBB" in last and "AAAA" not in last


def test_percentage_budgets_resolve_against_each_stages_model() -> None:
    from lev_nb.engine.plan.build import plan_from_blueprint

    bp = blueprint("""
[stages.small]
model = { provider = "anthropic", model = "claude-haiku-4-5-20251001" }
[stages.small.context.regions.notes]
kind = "temporary"
budget = "10%"
[stages.big]
model = { provider = "anthropic", model = "claude-opus-4-6" }
[stages.big.context.regions.notes]
kind = "temporary"
budget = "10%"
""")
    plan = plan_from_blueprint(bp)
    budgets = {s.name: s.layout[0].max_tokens for s in plan.stages}
    assert budgets == {"small": 20_000, "big": 100_000}
    assert [s.window_tokens for s in plan.stages] == [200_000, 1_000_000]


# -------------------------------------------------------------------- [compaction] on the wire
@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    yield from serve()


TRANSFORMING = """
[agent]
name = "compacts"
[compaction]
provider = "anthropic"
model = "claude-haiku-4-5"
system_prompt = "Summarise for a code reviewer."
max_summary_tokens = 300
[context.regions.findings]
kind = "temporary"
max_tokens = 2000
summarizable = false
seed = { literal = "FINDING-ONE" }
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.draft]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
nudge = { enabled = false }
[stages.draft.transitions.review]
transform = "compact"
[stages.review]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
nudge = { enabled = false }
[stages.review.transitions]
"""


def summariser(recorded: Recorded) -> Reply:
    if recorded.body["model"] == "claude-haiku-4-5":
        return Reply(body=message(text("DRAFT-SUMMARY"), model="claude-haiku-4-5",
                                  usage={"input_tokens": 100, "output_tokens": 20}))
    return Reply(body=message(text("DRAFT-TEXT" if len(recorded.body["messages"]) < 3 else "reviewed")))


def test_the_compaction_model_summarises_on_the_wire_and_is_billed(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lev_nb import load

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.responder = summariser
    run = load(TRANSFORMING).run("draft it", home=tmp_path / "home")
    run.wait(60)
    assert run.status == "complete", run.error
    bodies = [r.body for r in stand_in.requests]
    assert [b["model"] for b in bodies] == ["claude-sonnet-4-6", "claude-haiku-4-5", "claude-sonnet-4-6"]
    summary = bodies[1]
    assert summary["system"] == "Summarise for a code reviewer."
    assert summary["max_tokens"] == 300 and summary["temperature"] == 0.2
    assert "User: draft it" in summary["messages"][0]["content"]  # the draft stage's conversation
    review = str(bodies[2]["messages"])
    assert "DRAFT-SUMMARY" in review and "draft it" not in review
    assert "FINDING-ONE" in str(bodies[2]["system"])  # summarizable = false: carried as written
    assert compactions(run) == [("transform", ["conversation"], "summarised")]
    by_stage = run.usage["by_stage"]["draft"]
    assert by_stage["models"] == {"anthropic/claude-sonnet-4-6": 1, "anthropic/claude-haiku-4-5": 1}


def test_an_unreachable_compaction_model_carries_the_regions(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lev_nb import load

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.responder = summariser
    run = load(TRANSFORMING.replace('provider = "anthropic"\nmodel = "claude-haiku-4-5"',
                                    'provider = "nowhere"\nmodel = "m"')).run("draft it", home=tmp_path / "home")
    run.wait(60)
    assert run.status == "complete", run.error
    [event] = events_of(run, "compaction")
    assert event.outcome == "carried" and "no provider named 'nowhere'" in event.reason
    assert "draft it" in str(stand_in.requests[-1].body["messages"])

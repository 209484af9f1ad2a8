"""The context window: visibility per stage, instructions, notes, routing, gates, transforms."""

from __future__ import annotations

import pytest

from lev_nb.engine.context.regions import RegionConfig
from lev_nb.engine.context.window import (
    ContextWindow,
    StageInstructionsError,
    ToolRouting,
)
from lev_nb.text import estimate_tokens


def rc(name: str, kind: str = "temporary", **kw: object) -> RegionConfig:
    return RegionConfig(name=name, kind=kind, **kw)  # type: ignore[arg-type]


def texts(window: ContextWindow, region: str) -> list[str]:
    return [entry.content for entry in window.region(region).entries]


def visible(window: ContextWindow) -> list[str]:
    return [region.name for region in window.visible_regions()]


# -- layouts and visibility ------------------------------------------------------------------------
def test_no_layout_uses_default_plus_auto_regions() -> None:
    window = ContextWindow([])
    assert visible(window) == ["system", "conversation", "tool_results", "final_output"]


def test_stage_layout_hides_regions_without_deleting_them() -> None:
    window = ContextWindow([rc("system", "pinned"), rc("notes")])
    window.region("notes").add(window_entry("kept"))
    window.apply_stage_layout([rc("system", "pinned")])
    assert not window.is_visible("notes")
    assert window.has_region("notes")
    window.apply_stage_layout(None)
    assert window.is_visible("notes") and texts(window, "notes") == ["kept"]


def test_always_visible_regions_survive_any_stage_layout() -> None:
    window = ContextWindow([rc("system", "pinned"), rc("stage_instructions", "pinned")])
    window.apply_stage_layout([rc("plan", "pinned")])
    assert visible(window) == [
        "plan", "stage_instructions", "tool_results", "conversation", "final_output",
    ]


def test_stage_only_region_is_declared_on_first_use_and_kept() -> None:
    window = ContextWindow([])
    window.apply_stage_layout([rc("scratch", "clearable")])
    window.region("scratch").add(window_entry("s"))
    window.apply_stage_layout(None)
    assert window.has_region("scratch") and not window.is_visible("scratch")
    assert texts(window, "scratch") == ["s"]


def window_entry(text: str):
    from lev_nb.engine.context.regions import Entry

    return Entry.make(text)


# -- stage instructions ----------------------------------------------------------------------------
def test_instructions_go_to_stage_instructions_region_when_declared() -> None:
    window = ContextWindow([rc("stage_instructions", "pinned"), rc("system", "pinned")])
    assert window.set_stage_instructions("a", "first") == "stage_instructions"
    window.set_stage_instructions("b", "second")
    assert texts(window, "stage_instructions") == ["[Stage instructions: second]"]
    assert visible(window)[-1] == "stage_instructions"
    assert texts(window, "system") == []


def test_instructions_replace_earlier_ones_in_first_pinned_region() -> None:
    window = ContextWindow([rc("system", "pinned"), rc("other", "pinned")])
    window.region("system").add(window_entry("house rules"))
    window.set_stage_instructions("a", "plan it")
    window.set_stage_instructions("b", "build it")
    assert texts(window, "system") == ["house rules", "[Stage instructions: build it]"]
    assert texts(window, "other") == []


def test_instructions_fall_back_to_conversation_without_pinned_region() -> None:
    window = ContextWindow([rc("notes"), rc("conversation", "sliding_window", max_tokens=1000)])
    assert window.set_stage_instructions("a", "go") == "conversation"
    assert texts(window, "conversation") == ["[Stage instructions: go]"]


def test_instructions_that_do_not_fit_raise_a_clear_error() -> None:
    window = ContextWindow([rc("system", "pinned", max_tokens=5)])
    with pytest.raises(StageInstructionsError, match="stage 'big'.*'system'"):
        window.set_stage_instructions("big", "x" * 400)


# -- conversation helpers --------------------------------------------------------------------------
def test_nudge_is_a_system_prefixed_user_side_entry() -> None:
    window = ContextWindow([])
    window.nudge("Use your tools.")
    entry = window.conversation.entries[-1]
    assert (entry.kind, entry.content) == ("text", "[System] Use your tools.")


def test_note_prefers_the_named_region_when_visible() -> None:
    window = ContextWindow([rc("stuck_report", "pinned", max_tokens=2000)])
    assert window.note("stuck_report", "[Stuck] loop") == "stuck_report"
    assert texts(window, "stuck_report") == ["[Stuck] loop"]


def test_note_falls_back_to_conversation() -> None:
    window = ContextWindow([])
    assert window.note("error_report", "[Error] boom") == "conversation"
    assert texts(window, "conversation") == ["[Error] boom"]


def test_note_is_dropped_silently_when_the_region_is_full() -> None:
    window = ContextWindow([rc("error_report", "pinned", max_tokens=3)])
    assert window.note("error_report", "x" * 100) is None
    assert texts(window, "error_report") == [] and texts(window, "conversation") == []


def test_huge_user_message_is_cut_to_the_conversation_budget() -> None:
    window = ContextWindow([rc("conversation", "sliding_window", max_tokens=50)])
    window.add_user("z" * 1000)
    entry = window.conversation.entries[-1]
    assert entry.tokens <= 50 and "truncated" in entry.content


# -- tool result routing ---------------------------------------------------------------------------
def start_batch(window: ContextWindow, call_id: str = "c1", name: str = "read_file") -> None:
    window.add_assistant("", [{"id": call_id, "name": name, "arguments": {}}])


def test_without_routing_result_lands_in_conversation() -> None:
    window = ContextWindow([])
    start_batch(window)
    routed = window.route_tool_result("c1", "read_file", "file body")
    last = window.conversation.entries[-1]
    assert routed.region == "conversation"
    assert (last.kind, last.content, last.tool_call_id) == ("tool_result", "file body", "c1")


def test_routed_result_is_stored_whole_with_a_pointer_in_conversation() -> None:
    window = ContextWindow([])
    start_batch(window)
    routed = window.route_tool_result("c1", "read_file", "alpha beta", routing=ToolRouting())
    assert routed.region == "tool_results" and routed.outcome == "stored"
    assert texts(window, "tool_results") == ["alpha beta"]
    pointer = window.conversation.entries[-1].content
    assert "'tool_results'" in pointer and "no tool call is needed" in pointer
    assert "Preview: alpha beta" in pointer


def test_override_picks_region_and_per_tool_cap() -> None:
    window = ContextWindow([rc("files", "temporary", max_tokens=5000)])
    start_batch(window)
    routing = ToolRouting(overrides={"read_file": {"region": "files", "max_result_tokens": 10}})
    routed = window.route_tool_result("c1", "read_file", "q" * 400, routing=routing)
    assert routed.region == "files" and routed.outcome == "truncated"
    assert texts(window, "files") == ["q" * 40 + "\n[...truncated]"]


def test_stage_cap_cuts_with_truncated_marker() -> None:
    window = ContextWindow([])
    start_batch(window)
    routing = ToolRouting(default_region="conversation", max_result_tokens=5)
    window.route_tool_result("c1", "shell", "w" * 100, routing=routing)
    assert window.conversation.entries[-1].content == "w" * 20 + "\n[...truncated]"


def test_persist_false_sends_results_to_scratch() -> None:
    window = ContextWindow([rc("scratch", "clearable")])
    start_batch(window)
    routed = window.route_tool_result("c1", "ls", "a b", routing=ToolRouting(persist=False))
    assert routed.region == "scratch" and texts(window, "scratch") == ["a b"]


def test_error_results_stay_in_the_conversation() -> None:
    window = ContextWindow([])
    start_batch(window)
    routed = window.route_tool_result("c1", "x", "[error] nope", is_error=True, routing=ToolRouting())
    assert routed.region == "conversation" and texts(window, "tool_results") == []
    assert window.conversation.entries[-1].is_error


def test_result_too_big_for_region_is_cut_with_omitted_count() -> None:
    window = ContextWindow([rc("keep", "pinned", max_tokens=200)])
    start_batch(window)
    routed = window.route_tool_result("c1", "t", "k" * 4000, routing=ToolRouting(default_region="keep"))
    stored = texts(window, "keep")[0]
    assert routed.outcome == "truncated"
    assert stored.endswith(f"... [truncated, {4000 - stored.index('...')} chars omitted]")
    assert estimate_tokens(stored) <= 200


def test_result_into_nearly_full_region_says_window_full() -> None:
    window = ContextWindow([rc("keep", "pinned", max_tokens=120)])
    window.region("keep").add(window_entry("f" * 320))  # 80 of 120 used
    start_batch(window)
    routed = window.route_tool_result("c1", "t", "k" * 4000, routing=ToolRouting(default_region="keep"))
    assert routed.outcome == "dropped"
    assert "did not fit" in window.conversation.entries[-1].content
    assert len(window.region("keep").entries) == 1


def test_conversation_result_ladder_keeps_the_asking_turn() -> None:
    window = ContextWindow([rc("conversation", "sliding_window", max_tokens=60)])
    start_batch(window)
    window.route_tool_result("c1", "t", "k" * 4000)
    kinds = [entry.kind for entry in window.conversation.entries]
    assert kinds == ["assistant_turn", "tool_result"]
    assert window.conversation.entries[-1].content == "[tool result truncated - context window full]"


# -- gate support ----------------------------------------------------------------------------------
def test_digest_changes_only_when_content_changes() -> None:
    window = ContextWindow([rc("plan", "pinned")])
    empty = window.digest("plan")
    window.region("plan").add(window_entry("v1"))
    first = window.digest("plan")
    assert first != empty and window.digest("plan") == first
    window.region("plan").clear()
    window.region("plan").add(window_entry("v1"))
    assert window.digest("plan") == first
    window.region("plan").add(window_entry("v2"))
    assert window.digest("plan") != first
    assert window.digest("missing") == ""


def test_is_empty_and_has_region() -> None:
    window = ContextWindow([rc("plan", "pinned")])
    assert window.is_empty("plan") and window.has_region("plan")
    window.region("plan").add(window_entry("  "))
    assert window.is_empty("plan")  # whitespace is not content
    window.region("plan").add(window_entry("real"))
    assert not window.is_empty("plan")
    assert not window.has_region("ghost") and window.is_empty("ghost")


def test_open_items_lists_only_open_checklist_items() -> None:
    window = ContextWindow([rc("todo", "checklist")])
    todo = window.region("todo")
    todo.add_checklist_item("a")
    todo.add_checklist_item("b")
    todo.update_checklist_item(1, done=True)
    assert window.open_items("todo") == [(2, "b")]
    assert window.open_items("ghost") == []


# -- transforms ------------------------------------------------------------------------------------
def transform_window() -> ContextWindow:
    layout = [
        rc("system", "pinned"),
        rc("history", "compact_history"),
        rc("files", "hashmap"),
        rc("keep", "custom", persistent=True, script="k.rhai"),
        rc("todo", "checklist"),
        rc("scratch", "clearable"),
        rc("notes", "temporary"),
        rc("raw", "temporary", summarizable=False),
        rc("empty", "temporary"),
    ]
    window = ContextWindow(layout)
    for name in ("system", "history", "files", "keep", "scratch", "notes", "raw"):
        window.region(name).add(window_entry(f"{name} text"))
    window.region("todo").add_checklist_item("item")
    window.add_user("hello")
    return window


def test_direct_transform_changes_nothing() -> None:
    window = transform_window()
    before = window.snapshot()
    assert window.apply_transform("direct").cleared == []
    assert window.snapshot() == before


def test_clear_empties_stage_specific_regions_only() -> None:
    window = transform_window()
    result = window.apply_transform("clear")
    assert sorted(result.cleared) == ["conversation", "notes", "raw", "scratch", "todo"]
    for kept in ("system", "history", "files", "keep"):
        assert not window.is_empty(kept)


def test_clear_leaves_hidden_regions_alone() -> None:
    window = transform_window()
    window.apply_stage_layout([rc("system", "pinned")])
    window.apply_transform("clear")
    assert not window.is_empty("notes")


def test_compact_lists_summarizable_nonempty_stage_specific_regions() -> None:
    window = transform_window()
    result = window.apply_transform("compact")
    assert result.to_summarise == ["todo", "scratch", "notes", "conversation"]
    assert window.apply_transform("summarize").to_summarise == result.to_summarise
    assert not window.is_empty("notes")  # nothing is changed until the engine summarises


def test_custom_transform_clears_and_compacts_minus_carry() -> None:
    window = transform_window()
    config = {
        "carry": ["notes"],
        "clear": ["scratch", "notes", "system"],
        "compact": ["conversation", "raw", "notes"],
    }
    result = window.apply_transform("custom", config)
    assert result.cleared == ["scratch"]
    assert result.to_summarise == ["conversation"]
    assert "raw" in result.skipped and "system" in result.skipped
    assert not window.is_empty("notes") and not window.is_empty("system")


def test_unknown_transform_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown transform"):
        ContextWindow([]).apply_transform("shred")


def test_replace_with_summary_leaves_one_entry() -> None:
    window = transform_window()
    window.replace_with_summary("notes", "short summary")
    assert texts(window, "notes") == ["short summary"]


# -- mirror, seeds, snapshot -----------------------------------------------------------------------
def test_mirror_final_output_replaces_previous_answer() -> None:
    window = ContextWindow([])
    assert window.mirror_final_output("first") is False
    window.mirror_final_output("second")
    assert texts(window, "final_output") == ["second"]


def test_mirror_final_output_trims_to_2000_tokens_with_note() -> None:
    window = ContextWindow([])
    assert window.mirror_final_output("a" * 20_000) is True
    text = texts(window, "final_output")[0]
    assert estimate_tokens(text) <= 2000
    assert text.endswith("the complete answer is the run's final output]")


def test_seed_is_trimmed_to_the_region_budget_with_note() -> None:
    window = ContextWindow([rc("task", "pinned", max_tokens=100)])
    assert window.seed("task", "t" * 2000) is True
    text = texts(window, "task")[0]
    assert estimate_tokens(text) <= 100 and "seed was larger" in text
    small = ContextWindow([rc("task", "pinned", max_tokens=100)])
    assert small.seed("task", "fix the bug") is False
    assert texts(small, "task") == ["fix the bug"]


def test_snapshot_lists_every_region_with_kind_tokens_entries() -> None:
    window = ContextWindow([rc("system", "pinned"), rc("notes")])
    window.region("notes").add(window_entry("abcd"))
    window.apply_stage_layout([rc("system", "pinned")])
    snap = window.snapshot()
    notes = next(r for r in snap["regions"] if r["name"] == "notes")
    assert notes["kind"] == "temporary" and notes["current_tokens"] == 1
    assert notes["entries"] == [{"content": "abcd", "tokens": 1, "kind": "text"}]
    assert notes["visible"] is False
    assert snap["max_tokens"] == 200_000


def test_stage_redeclaration_takes_the_stage_budget_while_it_runs() -> None:
    window = ContextWindow([rc("notes", max_tokens=100)])
    window.apply_stage_layout([rc("notes", max_tokens=30)])
    assert window.region("notes").max_tokens == 30
    window.apply_stage_layout(None)
    assert window.region("notes").max_tokens == 100


def test_seed_into_a_region_that_already_holds_text_fits_the_free_room() -> None:
    window = ContextWindow([rc("task", "pinned", max_tokens=100)])
    window.seed("task", "a" * 200)  # 50 tokens
    assert window.seed("task", "b" * 1000) is True
    assert window.region("task").tokens <= 100


def test_pointer_for_a_capped_result_reports_original_and_kept_size() -> None:
    window = ContextWindow([rc("files", "temporary", max_tokens=5000)])
    start_batch(window)
    routing = ToolRouting(default_region="files", max_result_tokens=10)
    window.route_tool_result("c1", "read_file", "q" * 400, routing=routing)
    assert "Output (100 tokens, cut to 14 to fit)" in window.conversation.entries[-1].content


def test_pointer_says_when_the_region_is_hidden_in_this_stage() -> None:
    window = ContextWindow([rc("files", "temporary")])
    window.apply_stage_layout([rc("system", "pinned")])
    start_batch(window)
    window.route_tool_result("c1", "read_file", "body", routing=ToolRouting(default_region="files"))
    assert "does not show" in window.conversation.entries[-1].content
    assert texts(window, "files") == ["body"]

"""Regions on their own: token estimates, budget resolution, layouts, and eviction per kind."""

from __future__ import annotations

import pytest

from lev_nb.engine.context.regions import Entry, Region, RegionConfig, RegionFullError, default_layout, ensure_auto_regions, render_checklist, trim_with_note
from lev_nb.text import cut_text, estimate_tokens


def text_of(tokens: int, tag: str = "x") -> str:
    """A text whose estimate is exactly ``tokens`` (ascii, 4 bytes per token)."""
    return (tag * (tokens * 4))[: tokens * 4]


def contents(region: Region) -> list[str]:
    return [entry.content for entry in region.entries]


# -- estimates and cuts ----------------------------------------------------------------------------
def test_estimate_rounds_utf8_bytes_up_to_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é") == 1  # two bytes


def test_cut_never_splits_a_multibyte_character() -> None:
    assert cut_text("aé", 2) == "a"
    assert cut_text("aé", 3) == "aé"


def test_trim_with_note_keeps_result_inside_budget() -> None:
    text, cut = trim_with_note("y" * 1000, 50, "\n[cut]")
    assert cut and text.endswith("\n[cut]")
    assert estimate_tokens(text) <= 50
    same, cut_again = trim_with_note("short", 50, "\n[cut]")
    assert (same, cut_again) == ("short", False)


# -- declarations and layouts ----------------------------------------------------------------------
def test_unknown_kind_is_refused_and_hash_map_alias_accepted() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        RegionConfig(name="r", kind="bucket")
    assert RegionConfig(name="r", kind="hash_map").kind == "hashmap"


def test_default_layout_is_system_and_conversation() -> None:
    layout = default_layout()
    assert [(r.name, r.kind, r.max_tokens) for r in layout] == [
        ("system", "pinned", 8000),
        ("conversation", "sliding_window", 10000),
    ]
    assert layout[1].max_items == 10


def test_auto_regions_added_only_when_missing() -> None:
    layout = ensure_auto_regions(default_layout())
    by_name = {r.name: r for r in layout}
    assert [r.name for r in layout] == ["system", "conversation", "tool_results", "final_output"]
    assert by_name["conversation"].max_items == 10  # the declared one is kept
    assert (by_name["tool_results"].kind, by_name["tool_results"].max_tokens) == ("temporary", 5000)
    assert (by_name["final_output"].kind, by_name["final_output"].max_tokens) == ("pinned", 2000)
    fresh = {r.name: r for r in ensure_auto_regions([])}
    assert (fresh["conversation"].max_items, fresh["conversation"].max_tokens) == (50, 10000)


# -- eviction per kind -----------------------------------------------------------------------------
def test_temporary_evicts_oldest_first() -> None:
    region = Region(RegionConfig(name="t", kind="temporary", max_tokens=10))
    for tag in "abc":
        region.add(Entry.make(text_of(4, tag)))
    assert contents(region) == [text_of(4, "b"), text_of(4, "c")]


def test_sliding_window_keeps_last_max_items() -> None:
    region = Region(RegionConfig(name="c", kind="sliding_window", max_items=3, max_tokens=1000))
    for n in range(5):
        region.add(Entry.make(f"m{n}"))
    assert contents(region) == ["m2", "m3", "m4"]


def test_sliding_window_also_stays_within_budget() -> None:
    region = Region(RegionConfig(name="c", kind="sliding_window", max_items=10, max_tokens=10))
    for tag in "abc":
        region.add(Entry.make(text_of(4, tag)))
    assert len(region.entries) == 2 and region.tokens <= 10


def test_sliding_window_bulk_drops_overflow_at_once() -> None:
    config = RegionConfig(name="c", kind="sliding_window", max_items=4, strategy="bulk", overflow=3)
    region = Region(config)
    for n in range(5):
        region.add(Entry.make(f"m{n}"))
    assert contents(region) == ["m3", "m4"]


def test_clearable_wipes_everything_when_full() -> None:
    region = Region(RegionConfig(name="s", kind="clearable", max_tokens=10))
    region.add(Entry.make(text_of(3, "a")))
    region.add(Entry.make(text_of(3, "b")))
    region.add(Entry.make(text_of(5, "c")))
    assert contents(region) == [text_of(5, "c")]


@pytest.mark.parametrize("kind", ["pinned", "checklist", "compact_history"])
def test_never_evicting_kinds_refuse_a_write_that_does_not_fit(kind: str) -> None:
    region = Region(RegionConfig(name="p", kind=kind, max_tokens=10))
    region.add(Entry.make(text_of(8, "a")))
    with pytest.raises(RegionFullError, match="never drops entries"):
        region.add(Entry.make(text_of(4, "b")))
    assert contents(region) == [text_of(8, "a")]


def test_persistent_custom_behaves_like_pinned() -> None:
    region = Region(RegionConfig(name="p", kind="custom", persistent=True, max_tokens=5))
    region.add(Entry.make(text_of(4)))
    with pytest.raises(RegionFullError):
        region.add(Entry.make(text_of(2)))


def test_entry_larger_than_whole_budget_is_refused_even_when_evicting() -> None:
    region = Region(RegionConfig(name="t", kind="temporary", max_tokens=10))
    region.add(Entry.make("keep"))
    with pytest.raises(RegionFullError, match="whole budget"):
        region.add(Entry.make(text_of(11)))
    assert contents(region) == ["keep"]


def test_admission_reject_refuses_instead_of_evicting() -> None:
    region = Region(RegionConfig(name="t", kind="temporary", max_tokens=10, admission="reject"))
    region.add(Entry.make(text_of(6, "a")))
    with pytest.raises(RegionFullError, match="reject"):
        region.add(Entry.make(text_of(6, "b")))
    assert contents(region) == [text_of(6, "a")]


def test_hashmap_upserts_by_key() -> None:
    region = Region(RegionConfig(name="h", kind="hashmap", max_tokens=100))
    region.add(Entry.make("v1", key="a"))
    region.add(Entry.make("v2", key="a"))
    assert [(e.key, e.content) for e in region.entries] == [("a", "v2")]


def test_hashmap_evicts_least_recently_updated() -> None:
    region = Region(RegionConfig(name="h", kind="hashmap", max_tokens=100, max_entries=2))
    region.add(Entry.make("1", key="a"))
    region.add(Entry.make("1", key="b"))
    region.add(Entry.make("2", key="a"))  # a is now the most recently updated
    region.add(Entry.make("1", key="c"))
    assert [e.key for e in region.entries] == ["a", "c"]


def test_keyed_write_in_other_kinds_replaces_in_place() -> None:
    region = Region(RegionConfig(name="t", kind="temporary", max_tokens=100))
    region.add(Entry.make("first", key="k"))
    region.add(Entry.make("other"))
    region.add(Entry.make("second", key="k"))
    assert contents(region) == ["second", "other"]


# -- checklists ------------------------------------------------------------------------------------
def test_checklist_ids_count_up_and_are_not_reused() -> None:
    region = Region(RegionConfig(name="todo", kind="checklist", max_tokens=100))
    assert region.add_checklist_item("a") == 1
    assert region.add_checklist_item("b") == 2
    region.remove_key("2")
    assert region.add_checklist_item("c") == 3


def test_checklist_renders_open_items_before_done_ones_with_notes() -> None:
    region = Region(RegionConfig(name="todo", kind="checklist", max_tokens=100))
    region.add_checklist_item("write tests")
    region.add_checklist_item("ship")
    region.update_checklist_item(1, done=True)
    region.update_checklist_item(2, note="after review")
    assert render_checklist(region.entries) == (
        "Checklist (1 open, 1 done):\n[ ] 2 ship\n    note: after review\n[x] 1 write tests"
    )


def test_a_blueprint_without_a_conversation_region_still_sends_tool_results(engine, workdir):
    # Issue 26: the conversation region is added when not declared (as upstream), so the model gets
    # its tool calls and their results as messages; `lev validate` says so in a note.
    import lev_nb
    from lev_nb.messages import ToolResultBlock, ToolUseBlock
    from support import blueprint, call, say

    (workdir / "hello.txt").write_text("x")
    toml = ('[context.regions]\nsystem = { kind = "pinned", max_tokens = 2000 }\n'
            '[stages.work]\navailable_tools = ["list_dir"]\nnudge = { enabled = false }\n[stages.work.transitions]\n')
    run, model = engine.run(toml, [call("list_dir", path="."), say("done")])
    assert run.status == "complete", run.error
    blocks = [b for m in model.requests[1].messages for b in m.blocks()]
    assert any(isinstance(b, ToolUseBlock) for b in blocks)
    assert [b.content for b in blocks if isinstance(b, ToolResultBlock)] == ["hello.txt (1B)"]
    assert "conversation-region-added" in lev_nb.validate(blueprint(toml)).codes


def test_the_token_total_follows_every_way_entries_change() -> None:
    from lev_nb.engine.context.regions import Entry, Region, RegionConfig

    region = Region(RegionConfig(name="notes", kind="sliding_window", max_tokens=10_000))
    for text in ("alpha " * 10, "beta " * 20, "gamma " * 30):
        region.add(Entry.make(text))
    assert region.tokens == sum(e.tokens for e in region.entries)
    del region.entries[0]  # what context_delete does, in place
    assert region.tokens == sum(e.tokens for e in region.entries)
    region.entries.insert(0, Entry.make("summary " * 5))  # what a compaction summary does
    assert region.tokens == sum(e.tokens for e in region.entries)
    region.entries = [Entry.make("restored")]  # a hook's failed write puts the old list back
    assert region.tokens == region.entries[0].tokens
    region.clear()
    assert region.tokens == 0


def test_a_full_window_counts_what_it_evicted_out_of_its_total() -> None:
    from lev_nb.engine.context.regions import Entry, Region, RegionConfig

    region = Region(RegionConfig(name="talk", kind="sliding_window", max_tokens=60))
    for i in range(40):
        region.add(Entry.make(f"message number {i} " * 3))
        assert region.tokens == sum(e.tokens for e in region.entries) <= 60
    keyed = Region(RegionConfig(name="facts", kind="hashmap", max_tokens=1_000))
    keyed.add(Entry.make("short", key="k"))
    keyed.add(Entry.make("a much longer value " * 5, key="k"))  # an upsert replaces, not adds
    assert keyed.tokens == keyed.entries[0].tokens and len(keyed.entries) == 1

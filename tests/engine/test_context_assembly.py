"""Request assembly: region shapes, message building, ordering, and clean-up rules."""

from __future__ import annotations

from lev_nb.engine.context.regions import Entry, RegionConfig
from lev_nb.engine.context.window import ContextWindow
from lev_nb.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock


def rc(name: str, kind: str = "temporary", **kw: object) -> RegionConfig:
    return RegionConfig(name=name, kind=kind, **kw)  # type: ignore[arg-type]


def put(window: ContextWindow, region: str, text: str, key: str | None = None) -> None:
    window.region(region).add(Entry.make(text, key=key))


def call(call_id: str, name: str = "read_file") -> dict:
    return {"id": call_id, "name": name, "arguments": {"path": "a"}}


# -- system block shapes ---------------------------------------------------------------------------
def test_pinned_region_renders_as_labelled_block() -> None:
    window = ContextWindow([rc("rules", "pinned")])
    put(window, "rules", "one")
    put(window, "rules", "two")
    system, _ = window.assemble()
    assert system == ["## rules\none\n\ntwo"]


def test_description_shown_only_when_asked() -> None:
    window = ContextWindow([
        rc("a", "pinned", description="What a holds."),
        rc("b", "pinned", description="What b holds.", describe_in_prompt=True),
    ])
    put(window, "a", "x")
    put(window, "b", "y")
    system, _ = window.assemble()
    assert system == ["## a\nx", "## b\nWhat b holds.\n\ny"]


def test_compact_history_renders_like_pinned() -> None:
    window = ContextWindow([rc("history", "compact_history")])
    put(window, "history", "earlier: did X")
    assert window.assemble()[0] == ["## history\nearlier: did X"]


def test_checklist_renders_counts_and_items() -> None:
    window = ContextWindow([rc("todo", "checklist")])
    window.region("todo").add_checklist_item("read spec")
    window.region("todo").add_checklist_item("write code")
    window.region("todo").update_checklist_item(1, done=True)
    assert window.assemble()[0] == [
        "## todo\nChecklist (1 open, 1 done):\n[ ] 2 write code\n[x] 1 read spec"
    ]


def test_hashmap_renders_keyed_sections() -> None:
    window = ContextWindow([rc("files", "hashmap")])
    put(window, "files", "print(1)", key="a.py")
    put(window, "files", "print(2)", key="b.py")
    assert window.assemble()[0] == ["[files]:\n### [a.py]\nprint(1)\n\n### [b.py]\nprint(2)"]


def test_temporary_clearable_compacting_render_as_bracketed_blocks() -> None:
    window = ContextWindow([rc("t"), rc("c", "clearable"), rc("k", "compacting")])
    for name in ("t", "c", "k"):
        put(window, name, f"{name}1")
    # compacting changes only when written, so it sorts ahead of the two throwaway kinds
    assert window.assemble()[0] == ["[k]:\nk1", "[t]:\nt1", "[c]:\nc1"]


def test_custom_region_renders_fallback_even_when_empty() -> None:
    window = ContextWindow([rc("board", "custom", script="board.rhai")])
    assert window.assemble()[0] == ["[board]:\n"]
    put(window, "board", "a")
    put(window, "board", "b")
    assert window.assemble()[0] == ["[board]:\na\n\nb"]


def test_empty_and_hidden_regions_are_skipped() -> None:
    window = ContextWindow([rc("rules", "pinned"), rc("notes")])
    put(window, "notes", "hidden soon")
    window.apply_stage_layout([rc("rules", "pinned")])
    assert window.assemble()[0] == []


def test_system_blocks_sorted_by_volatility_then_stability_of_kind() -> None:
    window = ContextWindow([
        rc("scratch", "temporary"),
        rc("moving", "pinned", volatility="rewritten"),
        rc("growing", "temporary", volatility="grows"),
        rc("fixed", "pinned", volatility="stable"),
        rc("plain", "pinned"),
    ])
    for name in ("scratch", "moving", "growing", "fixed", "plain"):
        put(window, name, name)
    system, _ = window.assemble()
    assert [block.split("\n")[0] for block in system] == [
        "## fixed", "[growing]:", "## moving", "## plain", "[scratch]:",
    ]


# -- messages --------------------------------------------------------------------------------------
def test_conversation_turns_become_messages_with_tool_blocks() -> None:
    window = ContextWindow([])
    window.add_user("do it")
    window.add_assistant("looking", [call("c1")])
    window.add_tool_result("c1", "read_file", "contents")
    _, messages = window.assemble()
    assert messages == [
        Message(role="user", content="do it"),
        Message(role="assistant", content=[TextBlock("looking"),
                                           ToolUseBlock(id="c1", name="read_file", input={"path": "a"})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="c1", content="contents")]),
    ]


def test_consecutive_tool_results_merge_into_one_user_message() -> None:
    window = ContextWindow([])
    window.add_user("go")
    window.add_assistant("", [call("c1"), call("c2")])
    window.add_tool_result("c1", "read_file", "one")
    window.add_tool_result("c2", "read_file", "two", is_error=True)
    _, messages = window.assemble()
    assert messages[1].content == [
        ToolUseBlock(id="c1", name="read_file", input={"path": "a"}),
        ToolUseBlock(id="c2", name="read_file", input={"path": "a"}),
    ]
    assert messages[2] == Message(role="user", content=[
        ToolResultBlock("c1", "one"), ToolResultBlock("c2", "two", is_error=True),
    ])
    assert len(messages) == 3


def test_text_entries_with_speaker_prefix_switch_role() -> None:
    window = ContextWindow([])
    put(window, "conversation", "User: hi")
    put(window, "conversation", "Assistant: hello")
    put(window, "conversation", "[System] note")
    _, messages = window.assemble()
    assert [(m.role, m.content) for m in messages] == [
        ("user", "hi"), ("assistant", "hello"), ("user", "[System] note"),
    ]


def test_orphan_tool_use_and_result_are_stripped() -> None:
    window = ContextWindow([])
    window.add_user("go")
    window.add_tool_result("gone", "read_file", "result of an evicted call")
    window.add_assistant("trying", [call("c9")])  # never answered
    window.add_user("still there?")
    _, messages = window.assemble()
    assert messages == [
        Message(role="user", content="go"),
        Message(role="assistant", content=[TextBlock("trying")]),
        Message(role="user", content="still there?"),
    ]


def test_message_left_empty_after_stripping_is_dropped() -> None:
    window = ContextWindow([])
    window.add_user("go")
    window.add_assistant("", [call("c9")])
    window.add_user("next")
    _, messages = window.assemble()
    assert [m.role for m in messages] == ["user", "user"]


def test_begin_added_when_there_is_no_user_message() -> None:
    _, messages = ContextWindow([]).assemble()
    assert messages == [Message(role="user", content="Begin.")]


def test_continue_added_when_assistant_spoke_last() -> None:
    window = ContextWindow([])
    window.add_user("go")
    window.add_assistant("thinking aloud")
    _, messages = window.assemble()
    assert messages[-1] == Message(role="user", content="Continue.")
    assert messages[-2] == Message(role="assistant", content="thinking aloud")


def test_stage_instructions_appear_in_system_not_messages() -> None:
    window = ContextWindow([])
    window.set_stage_instructions("plan", "Write a plan.")
    system, messages = window.assemble()
    assert system == ["## system\n[Stage instructions: Write a plan.]"]
    assert messages == [Message(role="user", content="Begin.")]


def test_provider_tool_call_objects_are_accepted() -> None:
    from lev_nb.messages import ToolCall

    window = ContextWindow([])
    window.add_user("go")
    window.add_assistant("", [ToolCall(id="t1", name="list_dir", arguments={"path": "."})])
    window.add_tool_result("t1", "list_dir", "a.txt (3B)")
    _, messages = window.assemble()
    assert messages[1].content == [ToolUseBlock(id="t1", name="list_dir", input={"path": "."})]


# -- blocks made once per entry ----------------------------------------------------------------------
def test_a_long_conversation_hands_out_the_same_blocks_every_turn() -> None:
    from lev_nb.engine.context.assembly import flag_cache_breakpoint

    window = ContextWindow([])
    for i in range(4):  # within the conversation's default 10 items, so nothing slides out
        window.add_assistant("looking", [{"id": f"c{i}", "name": "read_file", "arguments": {"path": "a"}}])
        window.add_tool_result(f"c{i}", "read_file", f"result {i}")
    _, first = window.assemble()
    flag_cache_breakpoint(first, system_changed=False)
    window.add_assistant("done")
    _, second = window.assemble()
    old_blocks = [id(block) for message in first if isinstance(message.content, list) for block in message.content]
    new_blocks = [id(block) for message in second[:len(first)] if isinstance(message.content, list)
                  for block in message.content]
    assert old_blocks and new_blocks == old_blocks  # the conversation's blocks were not rebuilt
    # The breakpoint flagged on the first request stays there: it was put on a copy.
    assert any(m.cache_breakpoint for m in first) and not any(m.cache_breakpoint for m in second)
    # Every other message of the window is the same object in both requests ("Begin." is made per request).
    assert first[0].content == "Begin."
    apart = [i for i, (a, b) in enumerate(zip(first, second)) if a is not b]
    assert apart == [0, next(i for i, m in enumerate(first) if m.cache_breakpoint)]


def test_a_system_block_is_rendered_again_when_its_region_changes() -> None:
    window = ContextWindow([rc("rules", "pinned", description="The rules.")])
    put(window, "rules", "one")
    assert window.assemble()[0] == ["## rules\none"]
    assert window.assemble()[0] == ["## rules\none"]  # kept
    put(window, "rules", "two")
    assert window.assemble()[0] == ["## rules\none\n\ntwo"]
    window.region("rules").clear()
    assert window.assemble()[0] == []
    put(window, "rules", "three")
    window.apply_stage_layout([rc("rules", "pinned", description="The rules.", describe_in_prompt=True)])
    assert window.assemble()[0] == ["## rules\nThe rules.\n\nthree"]  # a new declaration renders again


def test_an_entry_whose_text_changed_renders_again() -> None:
    window = ContextWindow([])
    window.add_user("first words")
    entry = window.conversation.entries[0]
    assert window.assemble()[1][0].content == "first words"
    entry.content = "second words"
    assert window.assemble()[1][0].content == "second words"


def test_a_blank_entry_gives_no_message_and_still_parts_the_results_around_it() -> None:
    window = ContextWindow([])
    window.add_user("go")
    window.add_assistant("", [call("c1"), call("c2")])
    window.add_tool_result("c1", "read_file", "one")
    put(window, "conversation", "   ")  # blank: nothing to say
    window.add_tool_result("c2", "read_file", "two")
    window.add_assistant("   ")
    _, messages = window.assemble()
    assert [(m.role, m.content) for m in messages] == [
        ("user", "go"),
        ("assistant", [ToolUseBlock("c1", "read_file", {"path": "a"}), ToolUseBlock("c2", "read_file", {"path": "a"})]),
        ("user", [ToolResultBlock("c1", "one")]),
        ("user", [ToolResultBlock("c2", "two")]),
    ]
    assert window.assemble()[1] == messages  # and the same from the entries' kept parts

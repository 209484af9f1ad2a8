"""The context_* and todo_* tools' behaviour over a window."""

from __future__ import annotations

from lev_nb.engine.context.access import ContextTools
from lev_nb.engine.context.regions import RegionConfig
from lev_nb.engine.context.window import ContextWindow


def rc(name: str, kind: str = "temporary", **kw: object) -> RegionConfig:
    return RegionConfig(name=name, kind=kind, **kw)  # type: ignore[arg-type]


def tools(*extra: RegionConfig) -> tuple[ContextTools, ContextWindow]:
    layout = [rc("system", "pinned"), rc("notes"), rc("files", "hashmap"),
              rc("todo", "checklist"), rc("memo", "pinned", max_tokens=10), *extra]
    window = ContextWindow(layout)
    return ContextTools(window), window


def texts(window: ContextWindow, region: str) -> list[str]:
    return [entry.content for entry in window.region(region).entries]


def test_matches_the_tool_layers_context_access_protocol() -> None:
    from lev_nb.tools.context import ContextAccess

    assert isinstance(tools()[0], ContextAccess)


# -- write / append --------------------------------------------------------------------------------
def test_write_without_key_replaces_the_region() -> None:
    t, window = tools()
    t.append(region="notes", content="old")
    result = t.write(region="notes", content="new")
    assert result.startswith("Stored in region 'notes'")
    assert texts(window, "notes") == ["new"]


def test_write_with_key_upserts_that_entry_only() -> None:
    t, window = tools()
    t.append(region="notes", content="free text")
    t.write(region="notes", content="v1", key="plan")
    t.write(region="notes", content="v2", key="plan")
    assert texts(window, "notes") == ["free text", "v2"]


def test_hashmap_needs_a_key() -> None:
    t, window = tools()
    assert t.write(region="files", content="x").startswith("[error]")
    assert "under key 'a.py'" in t.write(region="files", content="x", key="a.py")
    assert texts(window, "files") == ["x"]


def test_append_adds_entries_and_extends_keyed_ones() -> None:
    t, window = tools()
    t.append(region="notes", content="a")
    t.append(region="notes", content="b")
    assert texts(window, "notes") == ["a", "b"]
    t.append(region="files", content="line1", key="log")
    assert t.append(region="files", content="line2", key="log").startswith("Extended")
    assert texts(window, "files") == ["line1\nline2"]


def test_write_refused_when_pinned_region_is_full_and_keeps_old_content() -> None:
    t, window = tools()
    t.write(region="memo", content="keep")
    result = t.write(region="memo", content="x" * 200)
    assert result.startswith("[error]") and "memo" in result
    assert texts(window, "memo") == ["keep"]


def test_missing_arguments_are_errors() -> None:
    t, _ = tools()
    assert t.write(region="notes") == "[error] missing 'content' argument"
    assert t.write(content="x") == "[error] missing 'region' argument"


def test_runtime_regions_cannot_be_written() -> None:
    t, window = tools()
    assert t.write(region="conversation", content="x").startswith("[error]")
    assert "submit_output" in t.append(region="final_output", content="x")
    assert texts(window, "final_output") == []


def test_checklist_is_not_written_with_context_write() -> None:
    t, _ = tools()
    assert "todo_add" in t.write(region="todo", content="x")


# -- unknown regions -------------------------------------------------------------------------------
def test_unknown_region_lists_the_visible_ones() -> None:
    t, window = tools()
    window.apply_stage_layout([rc("system", "pinned"), rc("notes")])
    result = t.write(region="files", content="x", key="k")
    assert result.startswith("[error] there is no context region 'files'")
    assert "system, notes" in result and "looks like a file path" not in result


def test_path_like_region_name_gets_a_hint() -> None:
    t, _ = tools()
    result = t.read(region="src/main.py")
    assert result.startswith("[error]") and "looks like a file path" in result
    assert "read_file" in result


# -- read / delete / list --------------------------------------------------------------------------
def test_read_whole_region_or_one_key() -> None:
    t, _ = tools()
    t.write(region="files", content="A", key="a")
    t.write(region="files", content="B", key="b")
    assert t.read(region="files") == "A\n\nB"
    assert t.read(region="files", key="b") == "B"
    missing = t.read(region="files", key="c")
    assert missing.startswith("[error]") and "Keys: a, b" in missing
    assert t.read(region="notes") == "Region 'notes' is empty."


def test_read_checklist_shows_rendered_list() -> None:
    t, _ = tools()
    t.todo_add(region="todo", item="one")
    assert t.read(region="todo") == "Checklist (1 open, 0 done):\n[ ] 1 one"


def test_delete_by_key_index_and_oldest() -> None:
    t, window = tools()
    for n in range(5):
        t.append(region="notes", content=f"n{n}", key=f"k{n}")
    assert t.delete(region="notes", key="k2").startswith("Removed 1 entry")
    assert t.delete(region="notes", index=0).startswith("Removed 1 entry")
    assert texts(window, "notes") == ["n1", "n3", "n4"]
    assert t.delete(region="notes", oldest=2).startswith("Removed 2 entries")
    assert texts(window, "notes") == ["n4"]


def test_delete_needs_exactly_one_selector_and_valid_values() -> None:
    t, window = tools()
    t.append(region="notes", content="x", key="k")
    assert t.delete(region="notes").startswith("[error] pass exactly one")
    assert t.delete(region="notes", key="k", index=0).startswith("[error] pass exactly one")
    assert t.delete(region="notes", index=5).startswith("[error] index 5 is out of range")
    assert t.delete(region="notes", key="nope").startswith("[error]")
    assert texts(window, "notes") == ["x"]


def test_list_shows_usage_per_region_and_entries_of_one() -> None:
    t, _ = tools()
    t.write(region="notes", content="abcd", key="k")
    overview = t.list()
    assert "  notes (temporary): 1 entries, 1/5000 tokens" in overview.splitlines()
    detail = t.list(region="notes")
    assert detail.splitlines()[1] == "  [0] key 'k', 1 tokens: abcd"


# -- todo_* ----------------------------------------------------------------------------------------
def test_todo_add_done_note_cycle() -> None:
    t, window = tools()
    assert t.todo_add(region="todo", item="read") == "Added item 1 to 'todo' (1 open)."
    t.todo_add(region="todo", item="write")
    assert t.todo_done(region="todo", id=1) == "Marked item 1 done in 'todo' (1 open)."
    assert "already done" in t.todo_done(region="todo", id=1)
    assert t.todo_note(region="todo", id="2", note="needs tests").startswith("Noted on item 2")
    assert window.open_items("todo") == [(2, "write")]
    assert "note: needs tests" in t.read(region="todo")


def test_todo_unknown_id_lists_open_items() -> None:
    t, _ = tools()
    t.todo_add(region="todo", item="a")
    result = t.todo_done(region="todo", id=7)
    assert result == "[error] checklist 'todo' has no item 7. Open items: 1."
    assert t.todo_done(region="todo", id="x") == "[error] 'id' must be an item number"


def test_todo_tools_refuse_non_checklist_regions() -> None:
    t, _ = tools()
    assert "not a checklist" in t.todo_add(region="notes", item="a")


def test_call_dispatches_by_tool_name() -> None:
    t, window = tools()
    assert t.call("context_append", {"region": "notes", "content": "via call"}).startswith("Appended")
    assert t.call("todo_add", {"region": "todo", "item": "x"}).startswith("Added item 1")
    assert t.call("context_explode", {}).startswith("[error] unknown context tool")
    assert t.call("context_read", {"region": "notes", "bogus": 1}).startswith("[error] unexpected")
    assert texts(window, "notes") == ["via call"]


def test_checklist_items_can_be_deleted_by_key() -> None:
    t, window = tools()
    t.todo_add(region="todo", item="a")
    t.todo_add(region="todo", item="b")
    assert t.delete(region="todo", key="1").startswith("Removed 1 entry")
    assert window.open_items("todo") == [(2, "b")]

"""Custom context regions: a Rhai script renders the region, filters its writes, picks evictions."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import blueprint, call, events_of, say

from lev_nb.engine.context.custom import (
    RegionHost,
    RenderShapeError,
    ScriptedRegion,
    parse_render,
)
from lev_nb.engine.context.regions import Entry, RegionConfig, RegionFullError
from lev_nb.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from lev_nb.scripting import ScriptError, compile_region_script

# -- unit level: one ScriptedRegion over a compiled script ---------------------------------------


def scripted(source: str, *, max_tokens: int = 1000, persistent: bool = False) -> tuple[ScriptedRegion, list[str]]:
    """A scripted custom region 'board' and the list its warnings land in."""
    script = compile_region_script(source=textwrap.dedent(source), label="board.rhai")
    host = RegionHost({"board.rhai": script}, {"board"})
    warnings: list[str] = []
    host.warn = lambda region, message: warnings.append(f"{region}: {message}")
    config = RegionConfig(name="board", kind="custom", script="board.rhai", max_tokens=max_tokens, persistent=persistent)
    return ScriptedRegion(config, host), warnings


RENDER_ENTRIES = 'fn render(ctx) { let out = ""; for e in ctx.entries { out += e.content + ";"; } out }'


def test_render_ctx_carries_region_entries_and_run_facts() -> None:
    region, _ = scripted(
        """
        fn render(ctx) {
            let e = ctx.entries[0];
            `${ctx.region.name}|${ctx.region.budget}|${ctx.region.current_tokens}|${ctx.region.entry_count}|` +
            `${e.content}|${e.tokens}|${e.kind}|${e.key}|${type_of(e.timestamp)}|` +
            `${ctx.stage_name}|${ctx.stage_iterations}|${ctx.model}|${ctx.window.max_tokens}`
        }
        """
    )
    region.host.facts = lambda: {
        "stage_name": "s", "stage_iterations": 2, "model": "p/m", "window": {"total_tokens": 5, "max_tokens": 99},
    }
    region.add(Entry.make("abcd", key="k1"))
    system, messages = region.render_parts()
    assert system == ["board|1000|1|1|abcd|1|text|k1|string|s|2|p/m|99"]
    assert messages == []


def test_render_sees_tool_calls_and_tool_results_of_entries() -> None:
    region, _ = scripted(
        """
        fn render(ctx) {
            let a = ctx.entries[0]; let r = ctx.entries[1];
            `${a.tool_calls[0].id}/${a.tool_calls[0].name}/${a.tool_calls[0].arguments.path}|${r.tool_call_id}/${r.tool_name}/${r.is_error}`
        }
        """
    )
    region.add(Entry.make("", kind="assistant_turn", tool_calls=[{"id": "c1", "name": "read_file", "input": {"path": "a"}}]))
    region.add(Entry.make("boom", kind="tool_result", tool_call_id="c1", tool_name="read_file", is_error=True))
    assert region.render_parts()[0] == ["c1/read_file/a|c1/read_file/true"]


def test_render_runs_even_when_empty_and_empty_string_shows_nothing() -> None:
    region, _ = scripted('fn render(ctx) { if ctx.entries.is_empty() { "" } else { "x" } }')
    assert region.render_parts() == ([], [])


@pytest.mark.parametrize(
    ("value", "system", "messages"),
    [
        ("text", ["text"], []),
        ("", [], []),
        ({"system": "one"}, ["one"], []),
        ({"system": ["a", "", "b"]}, ["a", "b"], []),
        ({"messages": [{"role": "user", "content": "hi"}]}, [], [Message("user", "hi")]),
        (
            {"system": [], "messages": [
                {"role": "assistant", "content": "let me look", "tool_calls": [{"id": "c1", "name": "list_dir"}]},
                {"role": "user", "tool_results": [{"tool_call_id": "c1", "content": "a.txt", "is_error": False}]},
            ]},
            [],
            [
                Message("assistant", [TextBlock("let me look"), ToolUseBlock("c1", "list_dir", {})]),
                Message("user", [ToolResultBlock("c1", "a.txt", False)]),
            ],
        ),
    ],
)
def test_parse_render_accepts_the_documented_shapes(value: Any, system: list[str], messages: list[Message]) -> None:
    assert parse_render(value) == (system, messages)


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        ["a"],
        {"other": 1},
        {"system": 3},
        {"system": ["a", 1]},
        {"messages": "hi"},
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": [{"role": "user"}]},
        {"messages": [{"role": "user", "content": 3}]},
        {"messages": [{"role": "user", "tool_calls": []}]},
        {"messages": [{"role": "assistant", "tool_results": []}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"name": "x"}]}]},
        {"messages": [{"role": "user", "tool_results": [{"tool_call_id": "c", "content": "x", "is_error": "no"}]}]},
    ],
)
def test_parse_render_refuses_other_shapes(value: Any) -> None:
    with pytest.raises(RenderShapeError):
        parse_render(value)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ('fn render(ctx) { throw "broken board" }', "broken board"),
        ("fn render(ctx) { 42 }", "render returned an unusable value"),
        ('fn render(ctx) { #{messages: [#{role: "system", content: "x"}]} }', "messages[0].role"),
        ("fn render(ctx) { loop {} }", "Script execution failed: board.rhai: render"),
    ],
)
def test_render_failures_fall_back_to_the_default_block_with_one_warning(source: str, fragment: str) -> None:
    region, warnings = scripted(source)
    assert region.render_parts() == ([], [])  # the fallback is omitted while the region is empty
    region.add(Entry.make("alpha"))
    region.add(Entry.make("beta"))
    assert region.render_parts() == (["[board]:\nalpha\n\nbeta"], [])
    assert region.render_parts() == (["[board]:\nalpha\n\nbeta"], [])
    assert len(warnings) == 1
    assert warnings[0].startswith("board: ") and fragment in warnings[0]
    assert "default block" in warnings[0]


def test_render_over_budget_only_warns() -> None:
    region, warnings = scripted(f'fn render(ctx) {{ "{"x" * 100}" }}', max_tokens=10)
    assert region.render_parts() == (["x" * 100], [])
    assert len(warnings) == 1 and "more than the region's budget of 10" in warnings[0]


def test_on_write_string_replaces_content_and_re_estimates_tokens() -> None:
    region, warnings = scripted(RENDER_ENTRIES + '\nfn on_write(ctx) { `${ctx.region.name}:${ctx.entry.kind}:${ctx.entry.tokens}:` + ctx.entry.content.to_upper() }')
    region.add(Entry.make("alpha"))
    assert region.entries[0].content == "board:text:2:ALPHA"
    assert region.entries[0].tokens == 5  # ceil(18 / 4)
    assert warnings == []


def test_on_write_false_drops_and_true_or_unit_accepts() -> None:
    source = RENDER_ENTRIES + """
    fn on_write(ctx) {
        if ctx.entry.content.contains("secret") { false } else if ctx.entry.content == "unit" { () } else { true }
    }
    """
    region, warnings = scripted(source)
    for text in ("public", "secret plan", "unit"):
        region.add(Entry.make(text))
    assert [e.content for e in region.entries] == ["public", "unit"]
    assert region.render_parts()[0] == ["public;unit;"]
    assert warnings == []


@pytest.mark.parametrize(("body", "fragment"), [("42", "on_write returned integer"), ('throw "bad write"', "bad write")])
def test_on_write_other_values_or_errors_accept_with_a_warning(body: str, fragment: str) -> None:
    region, warnings = scripted(RENDER_ENTRIES + f"\nfn on_write(ctx) {{ {body} }}")
    region.add(Entry.make("kept"))
    assert [e.content for e in region.entries] == ["kept"]
    assert len(warnings) == 1 and fragment in warnings[0]


OVERFLOW = RENDER_ENTRIES + """
fn on_overflow(ctx) {
    let out = [];
    for i in 0..ctx.entries.len() { if ctx.entries[i].content.starts_with("drop") { out.push(i); out.push(i); } }
    out
}
"""


def test_on_overflow_picks_the_entries_to_drop() -> None:
    region, warnings = scripted(OVERFLOW, max_tokens=10)
    for text in ("keep-aaaaaaaaaaaa", "drop-bbbbbbbbbbbb", "keep-cccccccccccc"):  # 5 tokens each
        region.add(Entry.make(text))
    assert [e.content for e in region.entries] == ["keep-aaaaaaaaaaaa", "keep-cccccccccccc"]
    assert warnings == []


def test_on_overflow_sees_the_shortfall_and_the_older_entries() -> None:
    region, _ = scripted(
        RENDER_ENTRIES + '\nfn on_overflow(ctx) { throw `${ctx.needed_tokens}/${ctx.entries.len()}/${ctx.region.entry_count}` }',
        max_tokens=10,
    )
    region.add(Entry.make("a" * 20))
    region.add(Entry.make("b" * 20))
    warnings: list[str] = []
    region.host.warn = lambda r, m: warnings.append(m)
    region.add(Entry.make("c" * 20))
    assert "5/2/2" in warnings[0]
    assert [e.content for e in region.entries] == ["b" * 20, "c" * 20]  # oldest-first instead


def test_on_overflow_shortfall_is_still_covered_oldest_first() -> None:
    region, _ = scripted(RENDER_ENTRIES + "\nfn on_overflow(ctx) { [] }", max_tokens=10)
    for text in ("a" * 20, "b" * 20, "c" * 20):
        region.add(Entry.make(text))
    assert [e.content for e in region.entries] == ["b" * 20, "c" * 20]


@pytest.mark.parametrize("answer", ["[5]", "[-1]", '"all"', "[0, true]"])
def test_on_overflow_unusable_answers_are_ignored(answer: str) -> None:
    region, warnings = scripted(RENDER_ENTRIES + f"\nfn on_overflow(ctx) {{ {answer} }}", max_tokens=10)
    for text in ("keep-aaaaaaaaaaaa", "drop-bbbbbbbbbbbb", "keep-cccccccccccc"):
        region.add(Entry.make(text))
    assert [e.content for e in region.entries] == ["drop-bbbbbbbbbbbb", "keep-cccccccccccc"]
    assert len(warnings) == 1 and "evicting the oldest entries instead" in warnings[0]


def test_a_persistent_custom_region_never_evicts_and_never_asks_on_overflow() -> None:
    region, warnings = scripted(RENDER_ENTRIES + "\nfn on_overflow(ctx) { throw \"asked\" }", max_tokens=10, persistent=True)
    region.add(Entry.make("a" * 20))
    region.add(Entry.make("b" * 20))
    with pytest.raises(RegionFullError):
        region.add(Entry.make("c" * 20))
    assert warnings == []


# -- in runs ------------------------------------------------------------------------------------

HEADER = """
[agent]
name = "regions-test"
[context.regions.board]
kind = "custom"
script = "context_hooks/board.rhai"
max_tokens = {budget}
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 5000
[stages.work]
available_tools = ["context_append", "context_write"]
nudge = {{ enabled = false }}
[stages.work.transitions]
"""


def agent(tmp_path: Path, script: str, budget: int = 1000, body: str | None = None) -> Any:
    from lev_nb.blueprint import load

    folder = tmp_path / "agent"
    (folder / "context_hooks").mkdir(parents=True, exist_ok=True)
    (folder / "context_hooks" / "board.rhai").write_text(textwrap.dedent(script), encoding="utf-8")
    (folder / "agent.leviath").write_text(textwrap.dedent(body or HEADER.format(budget=budget)), encoding="utf-8")
    return load(folder)


def system_of(request: Any) -> str:
    return "\n".join(request.system)


def test_render_as_a_string_in_every_request(engine, tmp_path):
    script = 'fn render(ctx) { `BOARD stage=${ctx.stage_name} it=${ctx.stage_iterations} n=${ctx.region.entry_count} model=${ctx.model}` }'
    run, model = engine.run(agent(tmp_path, script), [call("context_append", region="board", content="x"), say("done")])
    assert run.status == "complete", run.error
    assert "BOARD stage=work it=0 n=0 model=scripted" in model.requests[0].system
    assert "BOARD stage=work it=1 n=1 model=scripted" in model.requests[1].system


def test_render_as_a_map_adds_system_blocks_and_messages(engine, tmp_path):
    script = """
    fn render(ctx) {
        #{
            system: ["BOARD-A", "", "BOARD-B"],
            messages: [
                #{role: "user", content: "remember the codeword"},
                #{role: "assistant", content: "noted", tool_calls: [#{id: "k1", name: "list_dir", arguments: #{path: "."}}]},
                #{role: "user", tool_results: [#{tool_call_id: "k1", content: "a.txt"}]},
            ]
        }
    }
    """
    run, model = engine.run(agent(tmp_path, script), [say("done")])
    assert run.status == "complete", run.error
    request = model.requests[0]
    assert "BOARD-A" in request.system and "BOARD-B" in request.system
    assert request.messages[0] == Message("user", "remember the codeword")
    assert request.messages[1] == Message("assistant", [TextBlock("noted"), ToolUseBlock("k1", "list_dir", {"path": "."})])
    assert request.messages[2] == Message("user", [ToolResultBlock("k1", "a.txt", False)])
    assert events_of(run, "warning") == []


def test_a_throwing_render_falls_back_with_a_warning_event(engine, tmp_path):
    script = 'fn render(ctx) { if ctx.entries.len() > 0 { throw "cannot draw" } "EMPTY BOARD" }'
    run, model = engine.run(agent(tmp_path, script), [call("context_append", region="board", content="alpha"), say("done")])
    assert run.status == "complete", run.error
    assert "EMPTY BOARD" in model.requests[0].system
    assert "[board]:\nalpha" in model.requests[1].system
    warnings = [w.message for w in events_of(run, "warning")]
    assert len(warnings) == 1
    assert warnings[0].startswith("region 'board': Script execution failed: context_hooks/board.rhai: render")
    assert "cannot draw" in warnings[0]


def test_a_bad_render_shape_falls_back_with_a_warning_event(engine, tmp_path):
    run, model = engine.run(agent(tmp_path, "fn render(ctx) { [1, 2] }"), [call("context_append", region="board", content="alpha"), say("done")])
    assert run.status == "complete", run.error
    assert "[board]" not in system_of(model.requests[0])  # empty: the fallback shows nothing
    assert "[board]:\nalpha" in model.requests[1].system
    assert any("render returned an unusable value" in w.message for w in events_of(run, "warning"))


def test_on_write_shapes_what_the_model_writes(engine, tmp_path):
    script = RENDER_ENTRIES + """
    fn on_write(ctx) {
        if ctx.entry.content.contains("secret") { return false; }
        "+" + ctx.entry.content
    }
    """
    turns = [
        call("context_append", region="board", content="alpha"),
        call("context_append", region="board", content="secret"),
        say("done"),
    ]
    run, model = engine.run(agent(tmp_path, script), turns)
    assert run.status == "complete", run.error
    assert "+alpha;" in model.requests[2].system
    assert "secret" not in system_of(model.requests[2])


def test_on_overflow_in_a_run(engine, tmp_path):
    turns = [
        call("context_append", region="board", content="keep-aaaaaaaaaaaa"),
        call("context_append", region="board", content="drop-bbbbbbbbbbbb"),
        call("context_append", region="board", content="keep-cccccccccccc"),
        say("done"),
    ]
    run, model = engine.run(agent(tmp_path, OVERFLOW, budget=10), turns)
    assert run.status == "complete", run.error
    assert "keep-aaaaaaaaaaaa;keep-cccccccccccc;" in model.requests[3].system


def test_a_stage_layout_custom_region_uses_its_script(engine, tmp_path):
    body = """
    [agent]
    name = "stage-layout"
    [stages.work]
    nudge = { enabled = false }
    [stages.work.context.regions.board]
    kind = "custom"
    script = "context_hooks/board.rhai"
    [stages.work.context.regions.conversation]
    kind = "sliding_window"
    max_tokens = 5000
    [stages.work.transitions]
    """
    run, model = engine.run(agent(tmp_path, 'fn render(ctx) { "STAGE BOARD" }', body=body), [say("done")])
    assert run.status == "complete", run.error
    assert "STAGE BOARD" in model.requests[0].system


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ("fn on_write(ctx) { true }", "must define fn render(ctx)"),
        ("fn render(a, b) { () }", "exactly one parameter (ctx), found 2"),
        ("fn render(ctx) { let = }", "Script compilation failed: context_hooks/board.rhai"),
        ("fn render(ctx) { () }\nfn on_overflow() { [] }", "on_overflow"),
    ],
)
def test_a_broken_region_script_stops_the_run_before_any_model_call(engine, tmp_path, script, fragment):
    from lev_nb.providers.scripted import ScriptedModel

    model = ScriptedModel([say("never")])
    with pytest.raises(ScriptError) as info:
        engine.start(agent(tmp_path, script), model)
    assert fragment in str(info.value)
    assert str(info.value).startswith("region 'board': ")
    assert model.requests == []


def test_a_region_script_symlinked_out_of_the_agent_folder_is_refused(engine, tmp_path):
    bp = agent(tmp_path, 'fn render(ctx) { "in" }')
    outside = tmp_path / "outside.rhai"
    outside.write_text('fn render(ctx) { "out" }', encoding="utf-8")
    inside = tmp_path / "agent" / "context_hooks" / "board.rhai"
    inside.unlink()
    inside.symlink_to(outside)  # after loading: the run itself must refuse it
    with pytest.raises(ScriptError, match="resolves outside the agent folder"):
        engine.start(bp, [say("x")])


def test_region_scripts_need_a_blueprint_folder(engine):
    bp = blueprint(HEADER.format(budget=1000).replace('[agent]\nname = "regions-test"\n', ""))
    with pytest.raises(ScriptError, match="loaded from text"):
        engine.start(bp, [say("x")])


def test_a_lone_surrogate_in_an_entry_reaches_render_as_a_replacement_character() -> None:
    # Issue 12 item 10: a model's text may hold a lone surrogate; render used to fail on it.
    region, warnings = scripted(RENDER_ENTRIES)
    region.add(Entry.make("bad \ud800 text"))
    system, _ = region.render_parts()
    assert system == ["bad \ufffd text;"] and warnings == []

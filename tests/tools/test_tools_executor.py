"""execute_calls: the per-call gate order, ordering of results, concurrency and error capture."""

from __future__ import annotations

import asyncio
import time

import pytest

from lev_nb.messages import ToolCall
from lev_nb.tools import Policies, ToolContext, ToolDef, default_registry, execute_calls, is_inline
from lev_nb.workspace import Workspace
from lev_nb.tools.builtin import shell

ALLOW_ALL = Policies(ceiling={"write_file": "allow", "edit_file": "allow", "shell": "allow", "slow": "allow", "boom": "allow"})


@pytest.fixture
def ctx(tmp_path):
    return ToolContext(Workspace(tmp_path), run_id="r1")


def run(calls, offered, ctx, policies=ALLOW_ALL, registry=None, **kw):
    return asyncio.run(execute_calls(calls, offered, registry or default_registry(), ctx, policies, **kw))


def test_unoffered_tool_lists_what_may_be_called(ctx):
    (result,) = run([ToolCall("1", "shell", {"command": "true"})], ["read_file", "list_dir"], ctx)
    assert result.content == "[unavailable] 'shell' is not available in this stage. You may call: read_file, list_dir."
    assert result.is_error


def test_unoffered_tool_in_a_stage_without_tools(ctx):
    (result,) = run([ToolCall("1", "read_file", {"path": "a"})], [], ctx)
    assert result.content.startswith("[unavailable] 'read_file' is not available: this stage has no tools at all.")


def test_unknown_tool_even_if_offered_is_unavailable(ctx):
    (result,) = run([ToolCall("1", "ghost", {})], ["ghost"], ctx)
    assert result.content.startswith("[unavailable] 'ghost'")


def test_validation_comes_before_policy(ctx):
    policies = Policies(stage={"write_file": "deny"})
    (result,) = run([ToolCall("1", "write_file", {"path": "a"})], ["write_file"], ctx, policies)
    assert result.content == "[error] invalid arguments for 'write_file': 'content' is a required property"


def test_policy_denial_does_not_run_the_tool(ctx, tmp_path):
    (result,) = run([ToolCall("1", "write_file", {"path": "a", "content": "x"})], ["write_file"], ctx, Policies())
    assert result.content.startswith("[denied] Tool 'write_file' needs a person's approval")
    assert not (tmp_path / "a").exists()
    assert result.modified_path is None


def test_results_keep_call_order_and_mark_modifications(ctx, tmp_path):
    (tmp_path / "e.txt").write_text("one")
    calls = [
        ToolCall("a", "write_file", {"path": "./sub/n.txt", "content": "x"}),
        ToolCall("b", "read_file", {"path": "e.txt"}),
        ToolCall("c", "edit_file", {"path": "e.txt", "old_str": "one", "new_str": "two"}),
        ToolCall("d", "shell", {"command": "echo hi > s.txt"}),
        ToolCall("e", "edit_file", {"path": "e.txt", "old_str": "absent", "new_str": "y"}),
    ]
    results = run(calls, ["write_file", "read_file", "edit_file", "shell"], ctx)
    assert [r.call_id for r in results] == ["a", "b", "c", "d", "e"]
    # shell writes do not count as modifications; a failed edit does not either
    assert [r.modified_path for r in results] == ["sub/n.txt", None, "e.txt", None, None]
    assert [r.is_error for r in results] == [False, False, False, False, True]


def test_bash_alias_offered_and_called(ctx):
    (result,) = run([ToolCall("1", "bash", {"command": "echo ok"})], ["bash"], ctx, Policies(ceiling={"bash": "allow"}))
    assert result.content == "ok\n" and result.name == "bash"


def test_raising_handler_becomes_an_error_result(ctx):
    registry = default_registry()

    async def boom(ctx, args):
        raise RuntimeError("kaput")

    registry.register(ToolDef("boom", "explodes", {"type": "object"}, boom))
    results = run([ToolCall("1", "boom", {}), ToolCall("2", "list_dir", {})], ["boom", "list_dir"], ctx, registry=registry)
    assert results[0].content == "[error] boom: kaput" and results[0].is_error
    assert not results[1].is_error


def test_path_escape_becomes_an_error_result(ctx):
    (result,) = run([ToolCall("1", "write_file", {"path": "../out.txt", "content": "x"})], ["write_file"], ctx)
    assert result.content.startswith("[error] write_file: '../out.txt' is outside the working directory")
    assert result.modified_path is None


@pytest.mark.slow
def test_allowed_calls_run_concurrently(ctx):
    """Two slow shell calls overlap: each starts before the other ends."""
    registry = default_registry()
    spans: dict[str, list[float]] = {}

    async def slow(ctx, args):
        spans[args["label"]] = [time.monotonic()]
        result = await shell(ctx, {"command": "sleep 0.5"})
        spans[args["label"]].append(time.monotonic())
        return result

    registry.register(ToolDef("slow", "sleeps", {"type": "object"}, slow))
    calls = [ToolCall("1", "slow", {"label": "a"}), ToolCall("2", "slow", {"label": "b"})]
    results = run(calls, ["slow"], ctx, registry=registry)
    assert [r.call_id for r in results] == ["1", "2"]
    (a_start, a_end), (b_start, b_end) = spans["a"], spans["b"]
    assert a_start < b_end and b_start < a_end


def test_approvals_are_asked_in_call_order(ctx):
    asked = []

    def approver(call):
        asked.append(call.id)
        return call.id != "2"

    calls = [ToolCall(str(i), "write_file", {"path": f"f{i}", "content": "x"}) for i in range(1, 4)]
    results = run(calls, ["write_file"], ctx, Policies(approver=approver))
    assert asked == ["1", "2", "3"]
    assert [r.content.startswith("[denied]") for r in results] == [False, True, False]


def test_inline_tools_are_left_for_the_engine(ctx):
    results = run(
        [ToolCall("1", "submit_output", {"content": "answer"}), ToolCall("2", "list_dir", {})],
        ["submit_output", "list_dir"],
        ctx,
    )
    assert (results[0].inline, results[0].content) == (True, "")
    assert not results[1].inline
    assert is_inline("submit_output") and is_inline("fan_out") and not is_inline("read_file")


def test_inline_tools_are_still_validated(ctx):
    (result,) = run([ToolCall("1", "submit_output", {})], ["submit_output"], ctx)
    assert result.content == "[error] invalid arguments for 'submit_output': 'content' is a required property"
    assert not result.inline


def test_second_fan_out_in_a_batch_is_refused(ctx):
    item = {"items": [{"id": "a", "context": {}}]}
    results = run([ToolCall("1", "fan_out", item), ToolCall("2", "fan_out", item)], ["fan_out"], ctx)
    assert results[0].inline
    assert results[1].content.startswith("[error] only one fan_out call is allowed per turn")


def test_fan_out_with_other_lane_calls_is_refused(ctx):
    item = {"items": [{"id": "a", "context": {}}]}
    results = run([ToolCall("1", "list_dir", {}), ToolCall("2", "fan_out", item)], ["fan_out", "list_dir"], ctx)
    assert results[1].content.startswith("[error] fan_out has to be the only tool call in its turn")
    assert not results[0].is_error


def test_listeners_hear_each_run_call_and_cannot_break_the_batch(ctx):
    started, finished = [], []

    def bad_listener(result):
        finished.append(result.call_id)
        raise ValueError("listener bug")

    results = run(
        [ToolCall("1", "list_dir", {}), ToolCall("2", "shell", {"command": "true"})],
        ["list_dir"],
        ctx,
        on_start=lambda c: started.append(c.id),
        on_finish=bad_listener,
    )
    assert started == ["1"] and finished == ["1"]
    assert results[1].content.startswith("[unavailable]")


def test_tool_without_handler_is_an_error_not_a_crash(ctx):
    registry = default_registry()
    registry.register(ToolDef("hollow", "no handler", {"type": "object"}))
    (result,) = run([ToolCall("1", "hollow", {})], ["hollow"], ctx, Policies(ceiling={"hollow": "allow"}), registry=registry)
    assert result.content == "[error] hollow: this tool has no implementation in this run." and not result.inline

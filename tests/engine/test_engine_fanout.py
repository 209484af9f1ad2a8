"""Fan-out with worker_stage: child runs, the merged report, merge_stage, on_worker_failure."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from support import call, events_of, say

from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, ToolResultBlock
from lev_nb.providers.base import ProviderError
from lev_nb.messages import request_text as flatten


class StageModel:
    """A provider answering from a function of the request: fn(request) -> scripted-style turn."""

    name = "stage-model"

    def __init__(self, fn: Callable[[ModelRequest], dict[str, Any]]) -> None:
        self.fn = fn
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        turn = self.fn(request)
        if "error" in turn:
            raise ProviderError(turn["error"]["kind"], turn["error"]["message"])
        tool_calls = [
            ToolCall(f"c{len(self.requests)}-{i}", c["name"], c.get("arguments", {}))
            for i, c in enumerate(turn.get("tool_calls", []))
        ]
        return ModelResponse(text=turn.get("text", ""), tool_calls=tool_calls)


def has_tool_result(request: ModelRequest) -> bool:
    return any(isinstance(b, ToolResultBlock) for m in request.messages for b in m.blocks())


def item_id(request: ModelRequest) -> str:
    match = re.search(r"Work item id: (\S+)", flatten(request))
    assert match, "a worker's task names its item"
    return match.group(1)


FAN_OUT = """
[context.regions.system]
kind = "pinned"
max_tokens = 2000
[context.regions.results]
kind = "pinned"
max_tokens = 4000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.split]
mode = "fan_out"
worker_stage = "worker"
merge_stage = "merge"
results_region = "results"
{split_extra}
[stages.split.transitions.merge]
hint = "merge"
{split_edges}
[stages.worker]
allow_as_worker = true
available_tools = ["submit_output"]
require_output = true
nudge = {{ enabled = false }}
[stages.worker.transitions]
[stages.merge]
nudge = {{ enabled = false }}
[stages.merge.transitions]
[stages.recover]
nudge = {{ enabled = false }}
[stages.recover.transitions]
"""


def fan_out_bp(split_extra: str = "", split_edges: str = "") -> str:
    return FAN_OUT.format(split_extra=split_extra, split_edges=split_edges)


def scripted(worker: Callable[[ModelRequest], dict[str, Any]], items: list[str]) -> StageModel:
    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.stage == "split":
            return call("fan_out", items=[{"id": i, "context": {"n": n}} for n, i in enumerate(items)])
        if request.stage == "worker":
            return worker(request)
        return say(f"{request.stage} done")

    return StageModel(answer)


def good_worker(request: ModelRequest) -> dict[str, Any]:
    if has_tool_result(request):
        return say("submitted")
    return call("submit_output", content=f"answer for {item_id(request)}")


def test_workers_run_as_child_runs_and_report_into_the_results_region(engine, home: Path):
    model = scripted(good_worker, ["a", "b"])
    run, _ = engine.run(fan_out_bp(), model)
    assert run.status == "complete", run.error
    assert run.stage_history == ["split", "merge"]
    children = run.meta["children"]
    assert len(children) == 2
    for child_id in children:
        child = json.loads((home / "runs" / child_id / "meta.json").read_text())
        assert child["parent_run_id"] == run.run_id
        assert child["status"] == "complete"
        assert child["stage_history"] == ["worker"]
        assert child["final_output"] is not None
    merge_request = [r for r in model.requests if r.stage == "merge"][0]
    report = [b for b in merge_request.system if "[fan_out results: 2 succeeded, 0 failed]" in b]
    assert report and "results" in report[0]
    assert "## worker a\nanswer for a" in report[0]
    assert "## worker b\nanswer for b" in report[0]
    started, finished = events_of(run, "fan_out_started"), events_of(run, "fan_out_finished")
    assert started[0].workers == 2
    assert (finished[0].succeeded, finished[0].failed) == (2, 0)
    assert sorted(finished[0].children) == sorted(children)
    transition = events_of(run, "transition")[0]
    assert (transition.target, transition.condition) == ("merge", "fan_out")


def test_worker_tasks_carry_the_item_id_and_context(engine):
    model = scripted(good_worker, ["only"])
    engine.run(fan_out_bp(), model)
    worker_request = [r for r in model.requests if r.stage == "worker"][0]
    text = flatten(worker_request)
    assert 'Work item id: only\nContext: {"n": 0}' in text


def test_a_failing_worker_is_reported_and_the_merge_goes_on_by_default(engine):
    def worker(request):
        if item_id(request) == "bad":
            return {"error": {"kind": "auth", "message": "worker model refused"}}
        return good_worker(request)

    model = scripted(worker, ["good", "bad"])
    run, _ = engine.run(fan_out_bp(), model)
    assert run.status == "complete", run.error
    assert run.stage_history == ["split", "merge"]
    merge_request = [r for r in model.requests if r.stage == "merge"][0]
    system = "\n".join(merge_request.system)
    assert "[fan_out results: 1 succeeded, 1 failed]" in system
    assert "## worker bad FAILED" in system and "worker model refused" in system


def test_fail_all_takes_the_error_edge(engine):
    def worker(request):
        if item_id(request) == "bad":
            return {"error": {"kind": "auth", "message": "refused"}}
        return good_worker(request)

    toml = fan_out_bp('on_worker_failure = "fail_all"', '[stages.split.transitions.recover]\ncondition = "error"')
    run, _ = engine.run(toml, scripted(worker, ["good", "bad"]))
    assert run.status == "complete", run.error
    assert run.stage_history == ["split", "recover"]
    transition = events_of(run, "transition")[0]
    assert (transition.target, transition.condition) == ("recover", "error")


def test_fail_all_without_an_error_edge_ends_the_run_in_error(engine):
    def worker(request):
        return {"error": {"kind": "auth", "message": "refused"}}

    run, _ = engine.run(fan_out_bp('on_worker_failure = "fail_all"'), scripted(worker, ["x"]))
    assert run.status == "error"
    assert "fail_all" in run.error


def test_worker_without_its_required_output_counts_as_failed(engine):
    model = scripted(lambda request: say("I did the work but forgot to submit"), ["w"])
    run, _ = engine.run(fan_out_bp(), model)
    assert run.status == "complete", run.error
    merge_request = [r for r in model.requests if r.stage == "merge"][0]
    system = "\n".join(merge_request.system)
    assert "[fan_out results: 0 succeeded, 1 failed]" in system
    assert "## worker w FAILED" in system


def test_worker_without_require_output_falls_back_to_its_last_text(engine):
    toml = fan_out_bp().replace(
        'available_tools = ["submit_output"]\nrequire_output = true', 'available_tools = ["list_dir"]'
    ) + """
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output"]
    [stages.answer.transitions]
    """
    toml = toml.replace("[stages.merge.transitions]", '[stages.merge.transitions.answer]\nhint = "answer"')

    def answer(request):
        if request.stage == "split":
            return call("fan_out", items=[{"id": "w", "context": {}}])
        if request.stage == "worker":
            return say("the worker's plain answer")
        if request.stage == "answer" and not has_tool_result(request):
            return call("submit_output", content="merged")
        return say("ok")

    model = StageModel(answer)
    run, _ = engine.run(toml, model)
    assert run.status == "complete", run.error
    merge_request = [r for r in model.requests if r.stage == "merge"][0]
    assert "## worker w\nthe worker's plain answer" in "\n".join(merge_request.system)


def test_empty_items_count_as_a_degraded_split(engine):
    run, _ = engine.run(fan_out_bp(), scripted(good_worker, []))
    assert run.status == "complete", run.error
    assert run.stage_history == ["split", "merge"]
    assert run.meta["children"] == []
    assert run.flags["splits_degraded"] == 1


def test_fan_out_stage_that_never_fans_out_is_nudged_then_degraded(engine):
    model = StageModel(lambda request: say("no split today"))
    run, _ = engine.run(fan_out_bp("max_attempts = 2\nnudge = { enabled = false }"), model)
    assert run.status == "complete", run.error
    assert [n.reason for n in events_of(run, "nudge")] == ["fan_out", "fan_out"]
    assert run.flags["splits_degraded"] == 1
    assert run.stage_history == ["split", "merge"]


def test_mock_model_walks_a_fan_out_blueprint(engine, home: Path):
    run, _ = engine.run(fan_out_bp(), "mock")
    assert run.status == "complete", run.error
    assert run.stage_history == ["split", "merge"]
    assert len(run.meta["children"]) == 3
    for child_id in run.meta["children"]:
        child = json.loads((home / "runs" / child_id / "meta.json").read_text())
        assert child["status"] == "complete"


def test_cancelling_the_parent_cancels_its_workers(engine, home: Path):
    import asyncio
    import threading

    started = threading.Event()

    class Hanging(StageModel):
        async def complete(self, request):
            if request.stage == "worker":
                started.set()
                await asyncio.sleep(3600)
            return await super().complete(request)

    model = Hanging(lambda request: call("fan_out", items=[{"id": "a", "context": {}}, {"id": "b", "context": {}}]))
    run, _ = engine.start(fan_out_bp(), model)
    assert started.wait(30)
    run.cancel()
    run.wait(60)
    assert run.status == "cancelled"
    children = run.meta["children"]
    assert len(children) == 2
    for child_id in children:
        child = json.loads((home / "runs" / child_id / "meta.json").read_text())
        assert child["status"] == "cancelled"


def test_max_items_keeps_the_first_items(engine):
    model = scripted(good_worker, ["a", "b", "c"])
    run, _ = engine.run(fan_out_bp("max_items = 2"), model)
    assert run.status == "complete", run.error
    assert len(run.meta["children"]) == 2
    workers = sorted(item_id(r) for r in model.requests if r.stage == "worker" and not has_tool_result(r))
    assert workers == ["a", "b"]


HELPER_AGENT = """
[agent]
name = "helper"
[stages.help]
available_tools = ["submit_output"]
require_output = true
nudge = { enabled = false }
[stages.help.transitions]
"""


def test_fan_out_tool_outside_a_fan_out_stage_returns_the_report_as_its_result(engine, home: Path):
    (home / "agents" / "helper").mkdir(parents=True)
    (home / "agents" / "helper" / "agent.leviath").write_text(HELPER_AGENT)
    toml = """
    [stages.work]
    available_tools = ["fan_out"]
    [stages.work.transitions]
    """

    def answer(request):
        if request.stage == "help":
            if has_tool_result(request):
                return say("ok")
            return call("submit_output", content=f"helped with {item_id(request)}")
        results = [b for m in request.messages for b in m.blocks() if isinstance(b, ToolResultBlock)]
        if not results:
            return call("fan_out", agent="helper", items=[{"id": "x", "context": {}}])
        return say("merged it myself")

    model = StageModel(answer)
    run, _ = engine.run(toml, model)
    assert run.status == "complete", run.error
    assert run.stage_history == ["work"]
    work_requests = [r for r in model.requests if r.stage == "work"]
    result = [b for m in work_requests[-1].messages for b in m.blocks() if isinstance(b, ToolResultBlock)][0]
    assert result.content.startswith("[fan_out results: 1 succeeded, 0 failed]")
    assert "## worker x\nhelped with x" in result.content
    child = json.loads((home / "runs" / run.meta["children"][0] / "meta.json").read_text())
    assert child["agent_name"] == "helper" and child["parent_run_id"] == run.run_id


def test_fan_out_naming_no_worker_is_an_error_result(engine):
    toml = """
    [stages.work]
    available_tools = ["fan_out"]
    [stages.work.transitions]
    """
    turns = [call("fan_out", items=[{"id": "x", "context": {}}]), say("ok")]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    result = [b for m in model.requests[1].messages for b in m.blocks() if isinstance(b, ToolResultBlock)][0]
    assert result.content.startswith("[error] fan_out")
    assert run.meta["children"] == []


def test_broken_worker_agent_is_an_error_result_and_the_stage_is_nudged_again(engine, home: Path):
    (home / "agents" / "broken").mkdir(parents=True)
    (home / "agents" / "broken" / "agent.leviath").write_text("[agent\nname = ")
    model = StageModel(
        lambda request: call("fan_out", items=[{"id": "x", "context": {}}])
        if request.stage == "split" and not has_tool_result(request)
        else say("giving up")
    )
    run, _ = engine.run(fan_out_bp("max_attempts = 1\nnudge = { enabled = false }").replace(
        'worker_stage = "worker"', 'worker_agent = "broken"'), model)
    assert run.status == "complete", run.error
    split_requests = [r for r in model.requests if r.stage == "split"]
    result = [b for m in split_requests[1].messages for b in m.blocks() if isinstance(b, ToolResultBlock)][0]
    assert result.content.startswith("[error] fan_out")
    assert "broken" in result.content
    # The call failed, so the stage did not fan out: it is nudged, then recorded as degraded.
    assert [n.reason for n in events_of(run, "nudge")] == ["fan_out"]
    assert run.flags["splits_degraded"] == 1


def test_max_child_depth_zero_refuses_every_worker(tmp_path):
    import lev_nb

    bp = lev_nb.load(ROOT_FANOUT_DEPTH)
    run = bp.run("t", model="mock", home=tmp_path).wait(30)
    report = next(e for e in run.events if e.kind == "fan_out_finished")
    assert report.succeeded == 0 and report.failed == 3
    assert run.meta["children"] == []


ROOT_FANOUT_DEPTH = """
[agent]
name = "depth"
max_child_depth = 0
[stages.split]
mode = "fan_out"
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
worker_stage = "worker"
merge_stage = "merge"
[stages.split.transitions]
[stages.worker]
mode = "autonomous"
allow_as_worker = true
max_iterations = 2
[stages.worker.transitions]
[stages.merge]
mode = "autonomous"
max_iterations = 2
[stages.merge.transitions]
"""

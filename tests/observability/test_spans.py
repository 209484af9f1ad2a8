"""A run's events become nested spans with the GenAI attributes (lev_nb.observability.spans),
checked with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from support import QUIET_WORK_STAGE, WORK_STAGE, FnModel, call, events_of, fail, say

from lev_nb.messages import ToolResultBlock

TWO_STAGES = """
[stages.first]
available_tools = ["list_dir", "read_file"]
[stages.second]
available_tools = ["list_dir"]
"""


def ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def named(spans: Any, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def only(spans: Any, name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_two_stages_with_a_tool_call_make_nested_spans_with_genai_attributes(engine, workdir, spans):
    (workdir / "notes.txt").write_text("hello", encoding="utf-8")
    run, _ = engine.run(TWO_STAGES, [call("read_file", path="notes.txt"), say("read it"),
                                     call("list_dir", path="."), say("listed")])
    assert run.status == "complete", run.error

    root = only(spans, "agent.run")
    assert root.parent is None
    assert root.attributes["lev.run_id"] == run.run_id
    assert root.attributes["gen_ai.agent.name"] == "engine-test"
    assert root.attributes["lev.status"] == "complete"
    assert root.status.status_code is StatusCode.UNSET
    assert root.attributes["lev.model_calls"] == 4
    assert root.attributes["lev.tool_calls"] == 2
    assert root.attributes["gen_ai.usage.input_tokens"] == run.meta["prompt_tokens"]
    assert root.attributes["gen_ai.usage.output_tokens"] == run.meta["completion_tokens"]
    # One trace: every span shares the run's trace id.
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {root.context.trace_id}

    stages = named(spans, "agent.stage")
    assert [s.attributes["lev.stage"] for s in stages] == ["first", "second"]
    assert all(parent_of(s) == root.context.span_id for s in stages)
    first, second = stages
    assert first.attributes["lev.transition.target"] == "second"
    assert first.attributes["lev.stage.next"] == "second"
    assert second.attributes["lev.stage.from"] == "first"
    assert second.attributes["lev.stage.visit"] == 1

    inferences = named(spans, "agent.inference")
    assert len(inferences) == 4
    calls = events_of(run, "model_call")
    for span, event in zip(sorted(inferences, key=lambda s: s.end_time), calls):
        stage_span = first if event.stage == "first" else second
        assert parent_of(span) == stage_span.context.span_id
        assert span.kind is SpanKind.CLIENT
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.provider.name"] == event.provider == "scripted"
        assert span.attributes["gen_ai.system"] == "scripted"
        assert span.attributes["gen_ai.request.model"] == event.model
        assert span.attributes["gen_ai.usage.input_tokens"] == event.prompt_tokens > 0
        assert span.attributes["gen_ai.usage.output_tokens"] == event.completion_tokens
        assert span.attributes["lev.cost_usd"] == event.cost_usd
        assert span.attributes["lev.run_id"] == run.run_id
        # The span is timed by the run's own clock: sent at started_at, answered at the event.
        assert event.started_at is not None and event.started_at <= event.ts
        assert (span.start_time, span.end_time) == (ns(event.started_at), ns(event.ts))

    tools = named(spans, "agent.tool_call")
    assert [t.attributes["gen_ai.tool.name"] for t in tools] == ["read_file", "list_dir"]
    assert [parent_of(t) for t in tools] == [first.context.span_id, second.context.span_id]
    started = events_of(run, "tool_started")
    finished = events_of(run, "tool_finished")
    for span, begin, end in zip(tools, started, finished):
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.call.id"] == begin.call_id
        assert span.attributes["lev.tool.ok"] is True
        assert (span.start_time, span.end_time) == (ns(begin.ts), ns(end.ts))

    run_started, completed = events_of(run, "run_started")[0], events_of(run, "completed")[0]
    assert (root.start_time, root.end_time) == (ns(run_started.ts), ns(completed.ts))
    entered = events_of(run, "stage_entered")
    assert [s.start_time for s in stages] == [ns(e.ts) for e in entered]


def test_a_failed_run_marks_its_model_call_tool_call_and_run_as_errors(engine, spans):
    run, _ = engine.run(TWO_STAGES, [call("read_file", path="missing.txt"), fail("api", "the model broke")])
    assert run.status == "error"

    tool = only(spans, "agent.tool_call")
    assert tool.attributes["lev.tool.ok"] is False
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes["error.type"] == "tool_failed"

    broken = [s for s in named(spans, "agent.inference") if s.status.status_code is StatusCode.ERROR]
    assert len(broken) == 1
    assert "the model broke" in broken[0].status.description
    assert broken[0].attributes["error.type"] == "model_call_failed"

    root = only(spans, "agent.run")
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["lev.status"] == "error"
    assert "the model broke" in root.attributes["lev.error"]
    assert "the model broke" in root.status.description


FAN_OUT = """
[stages.split]
mode = "fan_out"
worker_stage = "worker"
merge_stage = "merge"
[stages.split.transitions.merge]
hint = "merge"
[stages.worker]
allow_as_worker = true
available_tools = ["submit_output"]
require_output = true
nudge = { enabled = false }
[stages.worker.transitions]
[stages.merge]
nudge = { enabled = false }
[stages.merge.transitions]
"""


def test_child_runs_nest_under_the_stage_that_started_them_and_name_their_parent(engine, spans):
    def answer(request: Any) -> dict[str, Any]:
        if request.stage == "split":
            return call("fan_out", items=[{"id": "a", "context": {"n": 1}}, {"id": "b", "context": {"n": 2}}])
        if request.stage == "worker":
            if any(isinstance(b, ToolResultBlock) for m in request.messages for b in m.blocks()):
                return say("submitted")
            return call("submit_output", content="an answer")
        return say("merged")

    run, _ = engine.run(FAN_OUT, FnModel(answer))
    assert run.status == "complete", run.error
    runs = named(spans, "agent.run")
    root = next(s for s in runs if s.attributes["lev.run_id"] == run.run_id)
    children = [s for s in runs if s is not root]
    assert sorted(s.attributes["lev.run_id"] for s in children) == sorted(run.meta["children"])
    split = next(s for s in named(spans, "agent.stage")
                 if s.attributes["lev.stage"] == "split" and s.attributes["lev.run_id"] == run.run_id)
    for child in children:
        assert child.attributes["lev.parent_run_id"] == run.run_id
        assert parent_of(child) == split.context.span_id
        assert child.context.trace_id == root.context.trace_id
        assert child.attributes["lev.status"] == "complete"
    worker_calls = [s for s in named(spans, "agent.inference") if s.attributes["lev.stage"] == "worker"]
    assert {s.attributes["lev.run_id"] for s in worker_calls} == set(run.meta["children"])


def test_nudges_and_warnings_become_events_on_the_span_they_happened_in(engine, spans):
    run, _ = engine.run(WORK_STAGE, [say("t1"), say("t2"), say("t3"), say("t4")], workdir=engine.workdir / "new")
    assert run.status == "complete", run.error
    stage = only(spans, "agent.stage")
    nudges = [e for e in stage.events if e.name == "nudge"]
    assert [e.attributes["reason"] for e in nudges] == [n.reason for n in events_of(run, "nudge")]
    assert [e.timestamp for e in nudges] == [ns(n.ts) for n in events_of(run, "nudge")]
    # The workdir warning comes before the first stage is entered: it is on the run's span.
    warned = [e for e in only(spans, "agent.run").events if e.name == "warning"]
    assert len(warned) == 1 and "did not exist" in warned[0].attributes["message"]


def test_a_paused_run_and_its_resumption_are_two_traces_of_one_run_id(engine, spans):
    import lev_nb
    from lev_nb.providers.scripted import ScriptedModel

    run, _ = engine.run(QUIET_WORK_STAGE, [call("list_dir", path="."), fail("credits", "the account is empty")])
    assert run.status == "paused", run.error
    (first,) = named(spans, "agent.run")
    assert first.attributes["lev.status"] == "paused"
    assert first.status.status_code is StatusCode.UNSET
    spans.clear()

    resumed = lev_nb.resume(run.run_id, model=ScriptedModel([call("list_dir", path="."), say("done")]))
    resumed.wait(60)
    assert resumed.status == "complete", resumed.error
    (second,) = named(spans, "agent.run")
    assert second.attributes["lev.run_id"] == run.run_id
    assert second.attributes["lev.status"] == "complete"
    assert "resumed" in [e.name for e in second.events]
    # Only what this life did is traced (the journal's replayed call is on the first trace), in
    # a stage span opened where the record went live, inside the run's.
    inferences = sorted(named(spans, "agent.inference"), key=lambda s: s.start_time)
    assert [s.attributes["lev.iteration"] for s in inferences] == [2, 3]
    (stage,) = named(spans, "agent.stage")
    assert stage.attributes["lev.stage"] == "work" and parent_of(stage) == second.context.span_id
    assert all(parent_of(s) == stage.context.span_id for s in inferences)
    assert second.start_time <= stage.start_time <= inferences[0].start_time


def test_a_run_started_inside_the_callers_span_nests_under_it(engine, provider, spans):
    with provider.get_tracer("caller").start_as_current_span("notebook cell") as cell:
        run, _ = engine.run(WORK_STAGE, [call("list_dir", path="."), say("done")])
    assert run.status == "complete", run.error
    root = only(spans, "agent.run")
    assert parent_of(root) == cell.get_span_context().span_id
    assert root.context.trace_id == cell.get_span_context().trace_id

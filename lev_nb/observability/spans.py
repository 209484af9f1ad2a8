"""A run's events as OpenTelemetry spans (upstream docs, observability page, "Traces").

One :class:`RunTracer` per run subscribes to the run's event log and turns what happened into
spans, timed by the events' own timestamps:

- ``agent.run`` — from ``run_started`` to ``completed`` (or ``paused``): the run id, agent, final
  status, the run's token and cost totals; a child run (a sub-agent or fan-out worker) nests under
  the stage of its parent that started it and names its parent run;
- ``agent.stage`` — one per stage visit, from ``stage_entered`` to the next one: the stage, its
  visit number, where the run came from and the transition that left it;
- ``agent.inference`` — one per model call, from when it was sent to its ``model_call`` event,
  with the GenAI semantic-convention attributes (operation, provider, model, token counts) and its
  cost as ``lev.cost_usd``;
- ``agent.tool_call`` — from ``tool_started`` to ``tool_finished``: ``gen_ai.tool.name``, the call
  id, and an error status when the tool failed or was denied.

Warnings, gates, rejected answers, retries and fallbacks become span events on the stage they
happened in. Events reach the tracer already redacted (see Recorder.emit), so no secret does.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from lev_nb.engine import events as ev

# Upstream span names (its observability page): a trace view shows the run's shape by them.
RUN_SPAN, STAGE_SPAN, INFERENCE_SPAN, TOOL_SPAN = "agent.run", "agent.stage", "agent.inference", "agent.tool_call"
# Text attributes are cut to this many characters (an error message, a warning).
TEXT_LIMIT = 500

# Events that become a span event on the stage they happened in: kind -> the fields it carries.
_NOTES: dict[str, tuple[str, ...]] = {
    "warning": ("message",),
    "gate_blocked": ("target", "message", "attempt"),
    "gate_forced": ("target", "message"),
    "output_rejected": ("reason",),
    "output_submitted": ("format", "bytes", "checked"),
    "nudge": ("reason",),
    "stuck": ("reason",),
    "max_iterations": ("limit",),
    "model_retry": ("model", "attempt", "reason"),
    "model_fallback": ("from_model", "to_model", "reason"),
    "compaction": ("trigger", "outcome", "tokens_before", "tokens_after"),
    "circuit_open": ("model", "failures"),
    "child_started": ("child_id", "child_kind", "agent"),
    "child_ended": ("child_id", "status"),
    "interaction_requested": ("request_kind",),
    "interaction_resolved": ("outcome",),
    "resumed": ("count", "from_status"),
}

# Runs being traced in this process, by run id: a child run finds its parent's open stage here.
_OPEN: dict[str, RunTracer] = {}
_OPEN_LOCK = threading.Lock()


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _cut(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "…"


class RunTracer:
    """The spans of one run: call it with each of the run's events (an EventLog subscriber)."""

    def __init__(self, tracer: trace.Tracer, run_id: str, parent_run_id: str | None,
                 caller: otel_context.Context | None = None) -> None:
        self.tracer = tracer
        self.run_id = run_id
        self.parent_run_id = parent_run_id
        self.caller = caller  # the span that was current where a root run was started, if any
        self.run_span: Span | None = None
        self.stage_span: Span | None = None
        self.stage_name: str | None = None
        self.tools: dict[str, Span] = {}
        self.retries = 0  # model_retry events since the last model call
        self.totals = {"model_calls": 0, "tool_calls": 0, "stage_visits": 0, "input": 0, "output": 0}
        self.cost: float | None = 0.0
        self._lock = threading.Lock()
        with _OPEN_LOCK:
            _OPEN[run_id] = self

    # -- the subscriber ----------------------------------------------------------------------
    def __call__(self, event: ev.Event) -> None:
        with self._lock:
            handler = _HANDLERS.get(event.kind)
            if handler is not None:
                handler(self, event)
            elif event.kind in _NOTES:
                self._note(event)

    def context(self) -> otel_context.Context | None:
        """The context a span started now nests in: the open stage, else the run."""
        span = self.stage_span or self.run_span
        return trace.set_span_in_context(span) if span is not None else None

    # -- the run ------------------------------------------------------------------------------
    def _run(self, ts: float, agent: str = "") -> Span:
        if self.run_span is None:
            parent_ctx = self.caller
            if self.parent_run_id is not None:
                with _OPEN_LOCK:
                    parent = _OPEN.get(self.parent_run_id)
                parent_ctx = parent.context() if parent is not None else None
            attributes: dict[str, Any] = {"lev.run_id": self.run_id, "gen_ai.operation.name": "invoke_agent"}
            if agent:
                attributes["gen_ai.agent.name"] = agent
            if self.parent_run_id:
                attributes["lev.parent_run_id"] = self.parent_run_id
            self.run_span = self.tracer.start_span(RUN_SPAN, context=parent_ctx, attributes=attributes,
                                                   start_time=_ns(ts))
        return self.run_span

    def _run_started(self, event: ev.RunStarted) -> None:
        span = self._run(event.ts, event.agent)
        span.set_attribute("gen_ai.agent.name", event.agent)

    def _ended(self, event: ev.Completed | ev.Paused) -> None:
        span = self._run(event.ts)
        for tool in self.tools.values():  # a run cancelled mid-batch
            tool.end(end_time=_ns(event.ts))
        self.tools.clear()
        self._end_stage(event.ts)
        if isinstance(event, ev.Completed):
            status, error = event.status, event.error
            span.set_attribute("lev.produced_output", event.produced_output)
        else:
            status, error = "paused", event.reason
        span.set_attribute("lev.status", status)
        if error:
            span.set_attribute("lev.error", _cut(error))
        if status == "error":
            span.set_status(Status(StatusCode.ERROR, _cut(error)))
        span.set_attribute("lev.model_calls", self.totals["model_calls"])
        span.set_attribute("lev.tool_calls", self.totals["tool_calls"])
        span.set_attribute("lev.stage_visits", self.totals["stage_visits"])
        span.set_attribute("gen_ai.usage.input_tokens", self.totals["input"])
        span.set_attribute("gen_ai.usage.output_tokens", self.totals["output"])
        if self.cost is not None:
            span.set_attribute("lev.cost_usd", self.cost)
        span.end(end_time=_ns(event.ts))
        self.run_span = None
        with _OPEN_LOCK:
            _OPEN.pop(self.run_id, None)

    # -- stage visits -------------------------------------------------------------------------
    def _start_stage(self, name: str, ts: float, visit: int | None = None, from_stage: str | None = None) -> Span:
        run = self._run(ts)
        attributes: dict[str, Any] = {"lev.run_id": self.run_id, "lev.stage": name}
        if visit is not None:
            attributes["lev.stage.visit"] = visit
        if from_stage:
            attributes["lev.stage.from"] = from_stage
        self.stage_span = self.tracer.start_span(STAGE_SPAN, context=trace.set_span_in_context(run),
                                                 attributes=attributes, start_time=_ns(ts))
        self.stage_name = name
        self.totals["stage_visits"] += 1
        return self.stage_span

    def _end_stage(self, ts: float, next_stage: str | None = None) -> None:
        if self.stage_span is not None:
            if next_stage:
                self.stage_span.set_attribute("lev.stage.next", next_stage)
            self.stage_span.end(end_time=_ns(ts))
        self.stage_span = self.stage_name = None

    def _stage(self, event: ev.Event, since: float | None = None) -> Span:
        """The span of the stage ``event`` happened in (opened here, from ``since``, when the run's
        record was muted at its entry: a resumed run replaying its journal)."""
        if self.stage_span is None or (event.stage is not None and event.stage != self.stage_name):
            self._end_stage(event.ts, event.stage)
            return self._start_stage(event.stage or "", since if since is not None else event.ts)
        return self.stage_span

    def _where(self, event: ev.Event) -> Span:
        """The span a note about ``event`` goes on: its stage's, when that visit is open, else the
        run's (a warning from before the first stage was entered)."""
        if self.stage_span is not None and event.stage == self.stage_name:
            return self.stage_span
        return self._run(event.ts)

    def _stage_entered(self, event: ev.StageEntered) -> None:
        self._end_stage(event.ts, event.stage)
        self._start_stage(event.stage or "", event.ts, event.visit, event.from_stage)

    def _transition(self, event: ev.Transition) -> None:
        span = self._where(event)
        span.set_attribute("lev.transition.target", event.target)
        span.set_attribute("lev.transition.condition", event.condition)
        if event.reason:
            span.set_attribute("lev.transition.reason", _cut(event.reason))

    def _stage_error(self, event: ev.StageError) -> None:
        span = self._where(event)
        span.add_event("error", {"message": _cut(event.message)}, timestamp=_ns(event.ts))
        span.set_status(Status(StatusCode.ERROR, _cut(event.message)))

    def _note(self, event: ev.Event) -> None:
        span = self._where(event)
        attributes = {}
        for name in _NOTES[event.kind]:
            value = getattr(event, name)
            if value is not None:
                attributes[name] = _cut(value) if isinstance(value, str) else value
        span.add_event(event.kind, attributes, timestamp=_ns(event.ts))
        if event.kind == "model_retry":
            self.retries += 1

    # -- model calls --------------------------------------------------------------------------
    def _model_call(self, event: ev.ModelCall) -> None:
        started = event.started_at if event.started_at is not None and event.started_at <= event.ts else event.ts
        stage = self._stage(event, started)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": event.provider,
            "gen_ai.system": event.provider,
            "gen_ai.request.model": event.model,
            "gen_ai.usage.input_tokens": event.prompt_tokens,
            "gen_ai.usage.output_tokens": event.completion_tokens,
            "lev.run_id": self.run_id,
            "lev.stage": event.stage or "",
            "lev.purpose": event.purpose,
            "lev.iteration": event.iteration,
            "lev.tool_calls": event.tool_calls,
        }
        if event.cached_tokens:
            attributes["gen_ai.usage.cache_read.input_tokens"] = event.cached_tokens
        if event.cache_write_tokens:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = event.cache_write_tokens
        if event.cost_usd is not None:
            attributes["lev.cost_usd"] = event.cost_usd
        if self.retries:
            attributes["lev.retries"] = self.retries
            self.retries = 0
        span = self.tracer.start_span(INFERENCE_SPAN, context=trace.set_span_in_context(stage), kind=SpanKind.CLIENT,
                                      attributes=attributes, start_time=_ns(started))
        if event.error:
            span.set_attribute("error.type", "model_call_failed")
            span.set_status(Status(StatusCode.ERROR, _cut(event.error)))
        span.end(end_time=_ns(event.ts))
        self.totals["model_calls"] += 1
        self.totals["input"] += event.prompt_tokens
        self.totals["output"] += event.completion_tokens
        if event.error is None:
            self.cost = None if self.cost is None or event.cost_usd is None else self.cost + event.cost_usd

    # -- tool calls ---------------------------------------------------------------------------
    def _tool_started(self, event: ev.ToolCallStarted) -> None:
        stage = self._stage(event)
        self.tools[event.call_id] = self.tracer.start_span(
            TOOL_SPAN, context=trace.set_span_in_context(stage), start_time=_ns(event.ts),
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool,
                        "gen_ai.tool.call.id": event.call_id, "lev.run_id": self.run_id,
                        "lev.stage": event.stage or ""},
        )

    def _tool_finished(self, event: ev.ToolCallFinished) -> None:
        span = self.tools.pop(event.call_id, None)
        if span is None:  # finished without a start on record: a span of no length
            self._tool_started(ev.ToolCallStarted(event.run_id, event.stage, call_id=event.call_id,
                                                  tool=event.tool, ts=event.ts))
            span = self.tools.pop(event.call_id)
        span.set_attribute("lev.tool.ok", event.ok)
        if not event.ok:
            span.set_attribute("error.type", "tool_failed")
            span.set_status(Status(StatusCode.ERROR, _cut(event.summary)))
        span.end(end_time=_ns(event.ts))
        self.totals["tool_calls"] += 1


_HANDLERS: dict[str, Any] = {
    "run_started": RunTracer._run_started,
    "stage_entered": RunTracer._stage_entered,
    "transition": RunTracer._transition,
    "error": RunTracer._stage_error,
    "model_call": RunTracer._model_call,
    "tool_started": RunTracer._tool_started,
    "tool_finished": RunTracer._tool_finished,
    "completed": RunTracer._ended,
    "paused": RunTracer._ended,
}

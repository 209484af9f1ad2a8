"""Typed run events (docs/runs.md#the-run-record, live events).

Every event a run emits is one of the dataclasses below. They are written to ``events.jsonl`` as
``{"type": <kind>, "ts": ..., "run_id": ..., ...fields}`` and delivered live to subscribers (the
CLI progress line, the notebook widget, ``run.events``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import field
from typing import Any, ClassVar

from lev_nb.records import record
from lev_nb.store.files import orjson_module


_FIELDS: dict[type, tuple[str, ...]] = {}
_TEXT_FIELDS: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """The field names of an event class, in declaration order (read once per class: every
    event is serialised, and ``dataclasses.fields`` is not free)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def text_field_names(cls: type) -> tuple[str, ...]:
    """The fields of an event class that may hold text (what secret redaction looks at)."""
    names = _TEXT_FIELDS.get(cls)
    if names is None:
        import typing

        hints = typing.get_type_hints(cls)
        names = _TEXT_FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(cls) if hints.get(f.name) not in (float, int, bool))
    return names


# eq=False: an event is one occurrence, never compared by value (nor hashed by it).
@record(eq=False)
class Event:
    """Base class: what happened, to which run, when, and in which stage."""

    kind: ClassVar[str] = "event"
    run_id: str
    stage: str | None
    ts: float = field(default_factory=time.time, kw_only=True)

    def describe(self) -> str:
        """One readable line: the kind, the stage, and the fields that say what happened."""
        skip = {"run_id", "stage", "ts"}
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in skip or value in (None, "", [], {}):
                continue
            text = " ".join(str(value).split())
            parts.append(f"{f.name}={text[:80] + ('…' if len(text) > 80 else '')}")
        where = f"[{self.stage}] " if self.stage else ""
        return f"{where}{self.kind}" + (": " + ", ".join(parts) if parts else "")

    def __str__(self) -> str:
        return self.describe()

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-ready dict with its ``type`` first."""
        data: dict[str, Any] = {"type": self.kind}
        for name in field_names(type(self)):
            data[name] = getattr(self, name)
        return data


_TYPE_PREFIX: dict[type, bytes] = {}


def event_line(event: Event) -> bytes:
    """``event`` as its line of events.jsonl: ``encode_line(event.to_dict())``, the same bytes.

    orjson writes a dataclass's fields itself, in declaration order, without the dict that
    ``to_dict`` builds field by field (every event of every run is written); the ``type`` is
    spliced in front. What orjson refuses goes the dict's way, to json's encoder.
    """
    orjson = orjson_module()
    try:
        body = orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        from lev_nb.store import encode_line

        return encode_line(event.to_dict())
    prefix = _TYPE_PREFIX.get(type(event))
    if prefix is None:
        prefix = _TYPE_PREFIX[type(event)] = b'{"type":' + orjson.dumps(event.kind) + b","
    return prefix + body[1:]  # an event always has fields (run_id): the body is never "{}"


@record(eq=False)
class RunStarted(Event):
    """The run began: which agent, on what task, in which working directory."""

    kind: ClassVar[str] = "run_started"
    agent: str
    task: str
    workdir: str


@record(eq=False)
class StageEntered(Event):
    """The run entered a stage (``visit`` counts its entries there; ``from_stage`` is the stage it left)."""

    kind: ClassVar[str] = "stage_entered"
    visit: int
    from_stage: str | None = None


@record(eq=False)
class ModelCall(Event):
    """A model request finished (or failed, with ``error`` set)."""

    kind: ClassVar[str] = "model_call"
    purpose: str
    provider: str
    model: str
    iteration: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    text: str = ""
    error: str | None = None
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None  # None: the model has no known price (or the call failed)
    started_at: float | None = None  # when the request was sent (its retries included); ts: when it ended


@record(eq=False)
class ModelText(Event):
    """Text of an answer as it forms: the deltas a streaming provider sent since the last such
    event (throttled, so a long answer makes a few events a second, not one per token).
    ``attempt`` is the call's try (a retried call streams again from the start)."""

    kind: ClassVar[str] = "model_text"
    text: str
    purpose: str = "stage"
    attempt: int = 1


@record(eq=False)
class ModelRetry(Event):
    """A model call failed with a transient error and is tried again after ``delay_s``."""

    kind: ClassVar[str] = "model_retry"
    provider: str
    model: str
    attempt: int
    max_attempts: int
    delay_s: float
    reason: str


@record(eq=False)
class ModelFallback(Event):
    """The stage's model is unusable (``reason``), so the next one in its list takes over."""

    kind: ClassVar[str] = "model_fallback"
    from_model: str
    to_model: str
    reason: str


@record(eq=False)
class Compaction(Event):
    """Regions were summarised by the compaction model, or carried unchanged because it could not
    be done (``outcome`` summarised | carried, ``reason`` says why). ``trigger`` is ``transform``
    (an edge's compact/summarize/custom transform), ``threshold`` (a compacting region grew past
    its threshold), ``window`` (a sliding window evicted entries to summarise) or ``pressure``
    (the whole context neared the model's window)."""

    kind: ClassVar[str] = "compaction"
    trigger: str
    regions: list[str]
    outcome: str
    model: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    reason: str = ""


@record(eq=False)
class ContextEvicted(Event):
    """Entries were dropped from a region to keep the context inside the model's window."""

    kind: ClassVar[str] = "context_evicted"
    region: str
    entries: int
    tokens: int
    reason: str = ""


@record(eq=False)
class ToolCallStarted(Event):
    """A tool call the model asked for began (``arguments`` as the model sent them)."""

    kind: ClassVar[str] = "tool_started"
    call_id: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@record(eq=False)
class ToolCallFinished(Event):
    """A tool call ended, well (``ok``) or not; ``summary`` says what it gave back."""

    kind: ClassVar[str] = "tool_finished"
    call_id: str
    tool: str
    ok: bool
    summary: str


@record(eq=False)
class Transition(Event):
    """The run moved along an edge (``condition`` says which kind fired it)."""

    kind: ClassVar[str] = "transition"
    target: str
    condition: str
    transform: str
    reason: str = ""


@record(eq=False)
class GateBlocked(Event):
    """A gate held the run in its stage (``attempt`` of ``max_attempts``); ``message`` says what it still wants."""

    kind: ClassVar[str] = "gate_blocked"
    target: str
    message: str
    attempt: int
    max_attempts: int


@record(eq=False)
class GateForced(Event):
    """A gate ran out of attempts and let the run move to ``target`` anyway; ``message`` is what it still wanted."""

    kind: ClassVar[str] = "gate_forced"
    target: str
    message: str


@record(eq=False)
class Nudge(Event):
    """The run told the model ``text`` to move it on (``reason``: text_only, required_region, ...)."""

    kind: ClassVar[str] = "nudge"
    reason: str
    text: str


@record(eq=False)
class Stuck(Event):
    """The stage is stuck (a stuck threshold was passed, or it went round without a model call): ``reason``."""

    kind: ClassVar[str] = "stuck"
    reason: str


@record(eq=False)
class MaxIterationsHit(Event):
    """The stage made its ``limit`` of model calls (its ``max_iterations``)."""

    kind: ClassVar[str] = "max_iterations"
    limit: int


@record(eq=False)
class StageError(Event):
    """The stage failed with ``message``; an ``error`` edge, if there is one, leads on."""

    kind: ClassVar[str] = "error"
    message: str


@record(eq=False)
class Warning_(Event):
    """Something the person must hear of: the run survived it, but it changed what the run
    produced or did (an answer accepted unchecked, a tool denied, a gate forced). ``code`` is one
    of :data:`lev_nb.engine.run_warnings.WARNING_CODES`; RunState.warn is the one emitter."""

    kind: ClassVar[str] = "warning"
    message: str
    code: str = "warning"


@record(eq=False)
class OutputSubmitted(Event):
    """A final output was accepted: its format, size in bytes, whether it was cut, and whether checks ran."""

    kind: ClassVar[str] = "output_submitted"
    format: str | None
    bytes: int
    truncated: bool
    checked: bool = True


@record(eq=False)
class OutputRejected(Event):
    """A submitted final output was refused (``reason``), and the model may try again."""

    kind: ClassVar[str] = "output_rejected"
    reason: str


@record(eq=False)
class FanOutStarted(Event):
    """A fan_out stage started ``workers`` worker runs."""

    kind: ClassVar[str] = "fan_out_started"
    workers: int


@record(eq=False)
class FanOutFinished(Event):
    """A fan_out stage's workers all ended: how many succeeded and failed, and their run ids."""

    kind: ClassVar[str] = "fan_out_finished"
    succeeded: int
    failed: int
    children: list[str] = field(default_factory=list)


@record(eq=False)
class ChildStarted(Event):
    """This run started a child run: a sub-agent (``child_kind`` "agent", by spawn_agent) or a
    fan-out worker ("worker")."""

    kind: ClassVar[str] = "child_started"
    child_id: str
    child_kind: str
    agent: str
    task: str = ""


@record(eq=False)
class ChildEnded(Event):
    """A child run of this run ended (complete, error or cancelled)."""

    kind: ClassVar[str] = "child_ended"
    child_id: str
    child_kind: str
    status: str
    error: str | None = None


@record(eq=False)
class ChildrenAwaited(Event):
    """The stage (``requires_children``) held still until its sub-agents ended: ``outstanding``
    were still running when it began to wait."""

    kind: ClassVar[str] = "children_awaited"
    outstanding: int


@record(eq=False)
class HookModified(Event):
    """A stage hook changed something: ``target`` is ``region:<name>``, ``response``,
    ``tool_calls``, ``final_output`` or ``error``; ``summary`` starts the new value."""

    kind: ClassVar[str] = "hook_modified"
    hook: str
    target: str
    summary: str = ""


@record(eq=False)
class InteractionRequested(Event):
    """The run waits for a person: an approval, a question, a document to review or edit, a
    checkpoint (docs/runs.md#a-person-in-the-loop). ``request`` is the request as ``run.pending`` shows it."""

    kind: ClassVar[str] = "interaction_requested"
    request_id: str
    request_kind: str
    prompt: str = ""
    request: dict[str, Any] = field(default_factory=dict)


@record(eq=False)
class InteractionResolved(Event):
    """A request was settled: ``outcome`` answered | declined | timed_out | cancelled."""

    kind: ClassVar[str] = "interaction_resolved"
    request_id: str
    outcome: str
    answer: str = ""  # a short form of the answer, for the record
    source: str = ""  # who answered: python, notebook, terminal, inbox, timeout


@record(eq=False)
class MessageSent(Event):
    """A message for the model: ``delivered`` into the conversation, or ``queued`` until a stage
    that accepts messages."""

    kind: ClassVar[str] = "message"
    text: str
    status: str  # delivered | queued
    source: str = ""


@record(eq=False)
class Completed(Event):
    """The run reached a terminal status: complete, error or cancelled."""

    kind: ClassVar[str] = "completed"
    status: str
    error: str | None = None
    produced_output: bool = False
    final_output: dict[str, Any] | None = None  # the meta.json descriptor, when there is one


@record(eq=False)
class Paused(Event):
    """The run stopped until a person sets something up (``blocker``: credits or providers);
    ``lev resume`` / ``lev_nb.resume`` continues it."""

    kind: ClassVar[str] = "paused"
    reason: str
    blocker: str = ""
    remedy: str = ""


@record(eq=False)
class Resumed(Event):
    """The run was continued from its record (``count``: how many times so far; ``from_status``:
    paused, or running for a run whose process died)."""

    kind: ClassVar[str] = "resumed"
    count: int
    from_status: str
    replayed_model_calls: int = 0
    replayed_tool_calls: int = 0


@record(eq=False)
class CircuitOpen(Event):
    """Calls to ``model`` fail fast for a while: it failed ``failures`` times in a row in this process."""

    kind: ClassVar[str] = "circuit_open"
    model: str
    failures: int
    cooldown_s: float
    reason: str = ""


@record(eq=False)
class Stalled(Event):
    """No model of the stage can be called now (every circuit is open): the run waits up to
    ``wait_s`` seconds for one to close before it pauses (docs/providers.md#fallback-and-circuit-breakers)."""

    kind: ClassVar[str] = "stalled"
    models: list[str]
    wait_s: float
    reason: str = ""


@record(eq=False)
class RunTitled(Event):
    """The run got its short title (``source``: "model" wrote it, or "task": taken from the task)."""

    kind: ClassVar[str] = "run_titled"
    title: str
    source: str = "model"


@record(eq=False)
class McpServers(Event):
    """The MCP servers the run uses, started (or not): each ``{name, transport, tools, error}``."""

    kind: ClassVar[str] = "mcp_servers"
    servers: list[dict[str, Any]]

    def describe(self) -> str:
        parts = [f"{s['name']} ({len(s['tools'])} tools)" if not s.get("error") else f"{s['name']} (not started)"
                 for s in self.servers]
        return "mcp_servers: " + ", ".join(parts)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted, StageEntered, ModelCall, ModelText, ModelRetry, ModelFallback, Compaction, ContextEvicted,
        ToolCallStarted,
        ToolCallFinished, Transition, GateBlocked, GateForced, Nudge, Stuck, MaxIterationsHit, StageError, Warning_,
        OutputSubmitted, OutputRejected, FanOutStarted, FanOutFinished, Completed,
        HookModified, InteractionRequested, InteractionResolved, MessageSent,
        ChildStarted, ChildEnded, ChildrenAwaited,
        HookModified, Paused, Resumed, CircuitOpen, Stalled, McpServers, RunTitled,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild a typed event from its ``to_dict()`` form (e.g. a line of events.jsonl)."""
    payload = dict(data)
    cls = EVENT_TYPES[payload.pop("type")]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in payload.items() if k in names})

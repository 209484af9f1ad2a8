"""A run's story folded from its events: the stage visits with their sentences, counts and times,
the children, the answer and the error (no drawing, no widget code, no threads).

:class:`RunState` follows a run event by event: the header facts (agent, run id, status, task,
elapsed time, model calls, tool calls, tokens), the stages of the blueprint with the visited ones
and the current one, an honest progress fraction, the warnings the run told, the events of each
stage visit as sentences
(:mod:`lev_nb.explain.story`) with the transcript apart, the final output and the error. The
notebook's run view draws it (:mod:`lev_nb.notebook.runview`); ``lev show`` tells it as text
(:mod:`lev_nb.explain.show`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from lev_nb.explain.story import ASKED, ASKING, Line, answer_line, gate_blocked_text, nudge_text, refusal_line, sentence
from lev_nb.records import record
from lev_nb.store import TERMINAL_STATUSES

__all__ = ["RunState", "Visit", "Child", "FinalOutput", "Told", "RUNNING_CAP"]

RUNNING_CAP = 0.95  # progress never reaches 1 while the run goes on
# Warnings whose event of their own already tells them in the stage's lines (only the call-out
# above the stages repeats them).
TOLD_BY_OWN_EVENT = frozenset({"gate-forced", "model-fallback"})


@record(frozen=False)
class Visit:
    """One stay in a stage: its sentences, its transcript and its counts."""

    stage: str
    number: int
    from_stage: str | None
    started: float
    ended: float | None = None
    turns: int = 0
    tool_calls: int = 0
    lines: list[tuple[Line, str | None]] = field(default_factory=list)  # (line, error message)
    transcript: list[Line] = field(default_factory=list)
    # True for a visit the fold opened itself, for events that came before the run entered any
    # stage (a warning at the start): the first stage_entered takes it over.
    implicit: bool = False
    # What the last line told, when the next event of the same kind can fold into it:
    # ("gate", target, message, first attempt, max attempts) or ("nudge", reason, times).
    repeat: tuple[Any, ...] | None = None


@record(frozen=False)
class Child:
    """A run this run started: a sub-agent (``kind`` agent) or a fan-out worker (``worker``)."""

    run_id: str
    kind: str
    agent: str
    task: str = ""
    status: str = "running"
    error: str | None = None


@record
class Told:
    """A warning the run told: its ``code``, ``message`` and ``stage`` (None: before any stage)."""

    code: str
    message: str
    stage: str | None


@record(frozen=False)
class FinalOutput:
    """The answer as the view shows it."""

    content: str
    format: str | None
    stage: str
    truncated: bool = False


class RunState:
    """Everything the run view shows, folded from the run's events in order."""

    def __init__(
        self,
        run_id: str,
        stages: Sequence[str] = (),
        to_end: dict[str, int] | None = None,
        workers: dict[str, str] | None = None,
    ) -> None:
        self.run_id = run_id
        self.stages = list(stages)
        self.to_end = dict(to_end) if to_end is not None else None
        self.workers = dict(workers or {})  # fan-out stage -> the stage its workers run
        self.worked: list[str] = []  # worker stages that ran (in child runs)
        self.agent = ""
        self.task = ""
        self.title = ""  # the run's short title, once it has one ([title])
        self.status = "starting"
        self.error: str | None = None
        self.error_stage: str | None = None
        self.started: float | None = None
        self.ended: float | None = None
        self.model_calls = 0
        self.tool_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.visits: list[Visit] = []
        self.output: FinalOutput | None = None
        self.output_expected = False
        self.seen = 0
        self.children: dict[str, Child] = {}  # run id -> the child run, in start order
        self.forming = ""  # the answer a streaming model is writing now (cleared when the call ends)
        self.warnings: list[Told] = []  # what the run told the person, in order
        self.mcp_servers: list[dict[str, Any]] = []  # {name, transport, tools, error} of each MCP server used
        self._calls: dict[str, Any] = {}  # call id -> tool_started event, for the result's line
        self._asks: dict[str, tuple[Visit, int]] = {}  # open request id -> its ASK line (visit, index)

    # -- folding events ----------------------------------------------------------------------
    def apply(self, event: Any) -> None:
        """Fold one event into the state."""
        self.seen += 1
        kind = event.kind
        if self.started is None:
            self.started = event.ts
        if kind == "run_started":
            self.agent, self.task, self.status = event.agent, event.task, "running"
            return
        if kind == "mcp_servers":
            self.mcp_servers = list(event.servers)
            return
        if kind == "run_titled":
            self.title = event.title
            return
        if kind == "stage_entered":
            last = self.visits[-1] if self.visits else None
            if last is not None and last.implicit and not last.turns and not last.tool_calls:
                last.stage, last.number, last.from_stage, last.implicit = event.stage or "?", event.visit, event.from_stage, False
                return
            if last is not None:
                last.ended = event.ts
            self.visits.append(Visit(event.stage or "?", event.visit, event.from_stage, event.ts))
            return
        if kind == "paused":
            self.status, self.ended = "paused", event.ts
            self.error, self.error_stage = event.reason, event.stage
            if self.visits:
                self.visits[-1].ended = event.ts
            return  # told once, under the stages (error_html)
        if kind == "resumed":
            self.status, self.ended, self.error, self.error_stage = "running", None, None, None
        if kind == "completed":
            self.status, self.ended = event.status, event.ts
            if self.visits:
                self.visits[-1].ended = event.ts
            if event.status != "complete" and event.error:
                self.error, self.error_stage = event.error, event.stage
            self.output_expected = bool(event.produced_output)
            return
        if kind == "interaction_requested" and self.status == "running":
            self.status = "waiting_input"
        elif kind == "interaction_resolved" and self.status == "waiting_input":
            self.status = "running"
        if kind == "interaction_resolved" and self._answer_ask(event):
            return
        if kind == "model_text":
            # A retried call streams again from the start: begin the text anew.
            self.forming = event.text if event.attempt > 1 and not self.forming else self.forming + event.text
            return
        if kind == "child_started":
            self.children[event.child_id] = Child(event.child_id, event.child_kind, event.agent, event.task)
            if event.child_kind == "worker":
                return  # the fan-out's own lines tell of its workers
        elif kind == "child_ended":
            child = self.children.get(event.child_id)
            if child is not None:
                child.status, child.error = event.status, event.error
            return  # the children list shows it
        if kind == "warning":
            code = getattr(event, "code", "warning")
            self.warnings.append(Told(code, event.message, event.stage))
            if code in TOLD_BY_OWN_EVENT or event.stage is None:
                return  # the call-out tells it (a run's own warning belongs to no stage visit)
        visit = self._visit_for(event)
        if kind == "model_call":
            self.forming = ""
            self.model_calls += 1
            self.tokens_in += event.prompt_tokens
            self.tokens_out += event.completion_tokens
            if visit is not None and event.purpose == "stage" and not event.error:
                visit.turns += 1
            if event.error:  # the error event that follows tells it once
                return
        elif kind == "tool_started":
            self._calls[event.call_id] = event
            return  # told with its result
        elif kind == "tool_finished":
            self.tool_calls += 1
            if visit is not None:
                visit.tool_calls += 1
                started = self._calls.pop(event.call_id, None)
                if started is not None:
                    visit.transcript.append(sentence(started))
                refused = refusal_line(event)
                if refused is not None:  # a denied or unavailable tool changes the run: a call-out
                    visit.lines.append((refused, None))
                    visit.repeat = None
        elif kind == "fan_out_started" and visit is not None and visit.stage in self.workers:
            if self.workers[visit.stage] not in self.worked:
                self.worked.append(self.workers[visit.stage])
        elif kind == "transition" and visit is not None and event.reason:
            # A reason that repeats an error already told in this visit is left out.
            if any(message and message in event.reason for _, message in visit.lines):
                event = dataclasses.replace(event, reason="")
        if visit is None:
            return
        if self._fold_repeat(visit, event):
            return
        line = sentence(event)
        if line.transcript:
            visit.transcript.append(line)
            return
        if kind == "interaction_requested":
            self._asks[event.request_id] = (visit, len(visit.lines))
        visit.lines.append((line, event.message if kind == "error" else None))
        if kind == "gate_blocked":
            visit.repeat = ("gate", event.target, event.message, event.attempt, event.max_attempts)
        elif kind == "nudge":
            visit.repeat = ("nudge", event.reason, 1)
        else:
            visit.repeat = None

    def _answer_ask(self, event: Any) -> bool:
        """Tell how a person's request ended under its ASK line, which turns to the past tense."""
        visit, index = self._asks.pop(event.request_id, (None, -1))
        if visit is None or index >= len(visit.lines):
            return False
        ask, message = visit.lines[index]
        visit.lines[index] = (dataclasses.replace(ask, text=ask.text.replace(ASKING, ASKED, 1)), message)
        visit.lines.insert(index + 1, (answer_line(event), None))
        visit.repeat = None
        return True

    def _fold_repeat(self, visit: Visit, event: Any) -> bool:
        """Fold a gate block or a nudge that repeats the visit's last line into that line, so
        three blocked attempts read as one sentence. Transcript events do not break a run."""
        rep = visit.repeat
        if rep is None or event.kind in ("model_call", "tool_finished"):
            return False
        if event.kind == "gate_blocked" and rep[0] == "gate" and (rep[1], rep[2]) == (event.target, event.message):
            text = gate_blocked_text(event.target, rep[3], event.attempt, event.max_attempts, event.message)
            visit.lines[-1] = (dataclasses.replace(visit.lines[-1][0], text=text), None)
            return True
        if event.kind == "nudge" and rep[0] == "nudge" and rep[1] == event.reason:
            times = rep[2] + 1
            visit.repeat = ("nudge", event.reason, times)
            visit.lines[-1] = (dataclasses.replace(visit.lines[-1][0], text=nudge_text(event.reason, times)), None)
            return True
        return False

    def _visit_for(self, event: Any) -> Visit | None:
        if not self.visits:
            self.visits.append(Visit(event.stage or "run", 1, None, event.ts, implicit=True))
        return self.visits[-1]

    def set_output(self, output: Any) -> None:
        """Keep the run's final output (an object with content, format, stage, truncated)."""
        if output is not None:
            self.output = FinalOutput(output.content, output.format, output.stage, bool(output.truncated))

    # -- derived facts -----------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        # A paused run does not move either until it is resumed (a new view follows that).
        return self.status in TERMINAL_STATUSES or self.status == "paused"

    @property
    def current(self) -> str | None:
        """The stage the run is in, or ended in."""
        return self.visits[-1].stage if self.visits else None

    @property
    def visited(self) -> list[str]:
        """Distinct stages entered, in first-entry order (a fan-out's worker stage, run by its
        workers, after the fan-out stage)."""
        names: list[str] = []
        for visit in self.visits:
            names.append(visit.stage)
            worker = self.workers.get(visit.stage)
            if worker is not None and worker in self.worked:
                names.append(worker)
        return list(dict.fromkeys(names))

    def elapsed(self, now: float | None = None) -> float:
        """Seconds from the first event to the end (or to ``now`` while running)."""
        if self.started is None:
            return 0.0
        end = self.ended if self.ended is not None else (time.time() if now is None else now)
        return max(0.0, end - self.started)

    def progress(self) -> float:
        """How far along the graph the run is, 0..1: stage entries so far against those plus the
        fewest stages still to go from the current one. Full only once the run is complete."""
        if self.status == "complete":
            return 1.0
        entries = len(self.visits)
        if not entries:
            return 0.0
        remaining = self.to_end.get(self.current or "") if self.to_end is not None else None
        if remaining is None:
            remaining = 1
        return min(RUNNING_CAP, entries / (entries + remaining + 1))


FAILED_HERE = "The run failed here (the error is below)."


def told(state: RunState, visit: Visit) -> list[Line]:
    """The sentences of ``visit`` as every view tells them: the error the run ended with is told
    once, after the stages, so its own line only points there."""
    lines = []
    for line, message in visit.lines:
        if message and state.error and message in state.error:
            line = dataclasses.replace(line, text=FAILED_HERE)
        lines.append(line)
    return lines

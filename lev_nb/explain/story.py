"""A run's events as readable sentences: what the run view, ``lev show`` and ``lev log`` say.

``sentence(event)`` turns one engine event into a :class:`Line`: one short sentence, the kind of
call-out it deserves (a gate that blocked, a nudge, a stuck detection, a forced transition, a
rejected output, a warning or an error), and whether it belongs in the transcript (model text,
tool calls and their results) rather than in the list of what happened. No field names, no
dataclass reprs, no paths of the machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lev_nb.records import record
from lev_nb.text import format_elapsed  # one home (lev_nb.text); the explain layer re-exports it

__all__ = ["Line", "sentence", "first_line", "clip", "format_count", "format_bytes", "format_elapsed", "format_cost", "plural",
           "table_lines"]

# Conditions other than these move the run without the model choosing to: a forced transition.
# (``fan_out`` is the move to the merge stage once the workers are done: the plan, not a force.)
MODEL_CONDITIONS = frozenset({"always", "llm_choice", "fan_out"})
NUDGE_REASONS = {
    "text_only": "it answered in text before using any tool",
    "required_region": "a region it must fill is still empty",
    "required_output": "it owes the final output",
    "repetition": "it kept repeating the same tool call",
}
CALLOUT_LABELS = {
    "gate": "gate", "nudge": "nudge", "stuck": "stuck", "forced": "forced", "rejected": "rejected",
    "warning": "warning", "error": "error", "limit": "limit", "ask": "ask",
}


@record
class Line:
    """One event told as a sentence.

    ``callout`` names the kind of notable event (a key of ``CALLOUT_LABELS``) or is None;
    ``transcript`` marks model text and tool traffic; ``detail`` is longer text (the model's words,
    a tool's arguments or result) shown under the sentence, cut with "show more".
    """

    text: str
    callout: str | None = None
    transcript: bool = False
    detail: str = ""


def first_line(text: str, limit: int = 120) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters with an ellipsis."""
    for line in (text or "").splitlines():
        if line.strip():
            return clip(line.strip(), limit)
    return ""


def clip(text: str, limit: int) -> str:
    """``text`` on one line (whitespace folded), cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def format_count(n: int) -> str:
    """1234567 -> '1,234,567'."""
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    """``n`` with ``word``, plural unless one: '1 tool call', '3 tool calls'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_bytes(n: int) -> str:
    """A byte count for people: 812 B, 4.2 kB, 1.3 MB."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.1f} MB"


def format_cost(cost: Any, tokens: int = 0) -> str:
    """What model calls cost: dollars when every call had a price, else the tokens spent and
    "no price" (``-`` when nothing was spent)."""
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"
    return f"{tokens} tok (no price)" if tokens else "-"


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``header`` and ``rows`` as aligned text columns (left-aligned, two spaces apart)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in [header, *rows]]


def _arguments(arguments: dict[str, Any]) -> str:
    parts = [f"{k}={clip(repr(v), 40)}" for k, v in arguments.items()]
    return ", ".join(parts)


def gate_blocked_text(target: str, first: int, last: int, of: int, message: str) -> str:
    """The sentence for one or several consecutive gate blocks on the same edge."""
    attempts = f"attempt {first} of {of}" if first == last else f"attempts {first}–{last} of {of}"
    return f"Gate kept the run from moving to {target} ({attempts}): {clip(message, 160)}"


def nudge_text(reason: str, times: int = 1) -> str:
    """The sentence for one or several consecutive nudges of the same kind."""
    why = NUDGE_REASONS.get(reason, reason.replace("_", " "))
    return f"Nudged the model{f' {times} times' if times > 1 else ''}: {why}."


ASKING = "Waiting for a person:"  # the ASK line while the run waits; ASKED once it was answered
ASKED = "Asked a person:"
APPROVALS = {"allow (once)": "Allowed once.", "allow (stage)": "Allowed for this stage.",
             "allow (run)": "Allowed for this run.", "deny": "Denied."}


def answer_line(event: Any) -> Line:
    """The call-out of how a person's request ended: the approval given, the option or text
    answered, a decline, or no answer."""
    answer = event.answer or ""
    if answer in APPROVALS:
        return Line(APPROVALS[answer], callout="answer")
    if event.outcome == "answered":
        return Line(f"Answered: {clip(answer, 160)}" if answer else "Acknowledged.", callout="answer")
    said = {"declined": "The person declined.", "timed_out": "Nobody answered in time.",
            "cancelled": "The question was withdrawn (the run stopped)."}
    return Line(said.get(event.outcome, event.outcome), callout="answer" if event.outcome == "declined" else "warning")


def refusal_line(event: Any) -> Line | None:
    """A call-out for a tool call that did not run (denied, or not available in the stage), else None."""
    summary = (event.summary or "").strip()
    if event.ok or not summary.startswith(("[denied]", "[unavailable]")):
        return None
    kind, _, why = summary.partition("]")
    verb = "was denied" if kind == "[denied" else "is not available"
    return Line(f"{event.tool} {verb}: {clip(why.strip(), 200)}", callout="denied")


def sentence(event: Any) -> Line:
    """The sentence for one run event (see the module docstring)."""
    kind = event.kind
    if kind == "run_started":
        return Line(f"Run started: {first_line(event.task) or '(no task)'}")
    if kind == "run_titled":
        return Line(f"Titled: {event.title}")
    if kind == "stage_entered":
        origin = f" from {event.from_stage}" if event.from_stage else ""
        again = f" (visit {event.visit})" if event.visit > 1 else ""
        return Line(f"Entered {event.stage}{again}{origin}.")
    if kind == "model_call":
        if event.error:
            return Line(f"The model call failed: {clip(event.error, 160)}", transcript=True)
        if event.purpose == "routing":
            return Line(f"Asked the model where to go next: {clip(event.text, 60) or '(no answer)'}", transcript=True)
        asked = f", asked for {event.tool_calls} tool call{'s' if event.tool_calls != 1 else ''}" if event.tool_calls else ""
        tokens = f"{format_count(event.prompt_tokens)} in / {format_count(event.completion_tokens)} out tokens"
        purpose = "Model turn" if event.purpose == "stage" else f"Model call ({event.purpose})"
        return Line(f"{purpose} {event.iteration}: {tokens}{asked}.", transcript=True, detail=event.text or "")
    if kind == "tool_started":
        return Line(f"Called {event.tool}({_arguments(event.arguments)})", transcript=True)
    if kind == "tool_finished":
        verdict = "returned" if event.ok else "failed"
        return Line(f"{event.tool} {verdict}.", transcript=True, detail=event.summary or "")
    if kind == "transition":
        reason = f": {clip(event.reason, 140)}" if event.reason else ""
        via = "" if event.transform == "direct" else f" ({event.transform} context)"
        if event.condition in MODEL_CONDITIONS:
            return Line(f"Moved on to {event.target}{via}{reason}.")
        condition = event.condition.replace("_", " ")
        return Line(f"Forced to {event.target} by {condition}{via}{reason}.", callout="forced")
    if kind == "gate_blocked":
        return Line(
            gate_blocked_text(event.target, event.attempt, event.attempt, event.max_attempts, event.message),
            callout="gate",
        )
    if kind == "gate_forced":
        return Line(f"Gate forced open to {event.target} after its attempts ran out: {clip(event.message, 160)}", callout="gate")
    if kind == "nudge":
        return Line(nudge_text(event.reason), callout="nudge", detail=event.text or "")
    if kind == "stuck":
        return Line(f"Stuck: {clip(event.reason, 160)}", callout="stuck")
    if kind == "max_iterations":
        return Line(f"Reached the stage's limit of {event.limit} turns.", callout="limit")
    if kind == "error":
        return Line(clip(event.message, 200), callout="error")
    if kind == "warning":
        return Line(clip(event.message, 200), callout="warning")
    if kind == "output_submitted":
        fmt = f" ({event.format})" if event.format else ""
        cut = ", truncated" if event.truncated else ""
        unchecked = ", not validated" if not event.checked else ""
        return Line(f"Submitted the final output{fmt}: {format_bytes(event.bytes)}{cut}{unchecked}.")
    if kind == "output_rejected":
        return Line(f"Output rejected: {clip(event.reason, 200)}", callout="rejected")
    if kind == "fan_out_started":
        return Line(f"Fanned out to {event.workers} worker{'s' if event.workers != 1 else ''}.")
    if kind == "fan_out_finished":
        failed = f", {event.failed} failed" if event.failed else ""
        return Line(f"Workers finished: {event.succeeded} succeeded{failed}.", callout="warning" if event.failed else None)
    if kind == "model_retry":
        return Line(
            f"The model call failed ({clip(event.reason, 120)}); try {event.attempt + 1} of {event.max_attempts} "
            f"in {event.delay_s:g} s.",
            callout="warning",
        )
    if kind == "model_fallback":
        return Line(f"Switched from {event.from_model} to {event.to_model}: {clip(event.reason, 140)}", callout="warning")
    if kind == "compaction":
        regions = ", ".join(event.regions) or "the context"
        if event.outcome == "summarised":
            return Line(f"Summarised {regions} to fit the context.")
        return Line(f"Kept {regions} unchanged (no summary): {clip(getattr(event, 'reason', ''), 140)}", callout="warning")
    if kind == "context_evicted":
        return Line(f"Dropped {event.entries} entr{'y' if event.entries == 1 else 'ies'} ({format_count(event.tokens)} tokens) from {event.region} to fit the context.")
    if kind == "hook_modified":
        summary = f": {clip(event.summary, 120)}" if event.summary else ""
        return Line(f"Hook {event.hook} changed {event.target}{summary}.")
    if kind == "interaction_requested":
        return Line(f"{ASKING} {clip(event.prompt, 160)}", callout="ask")
    if kind == "interaction_resolved":
        return answer_line(event)
    if kind == "message":
        if event.status == "queued":
            return Line(f"A message waits for a stage that accepts messages: {clip(event.text, 120)}")
        return Line(f"Message for the model: {clip(event.text, 160)}")
    if kind == "child_started":
        what = "a worker of" if event.child_kind == "worker" else "the sub-agent"
        return Line(f"Started {what} {event.agent} ({event.child_id}): {clip(first_line(event.task), 100)}")
    if kind == "child_ended":
        what = "The worker" if event.child_kind == "worker" else "The sub-agent"
        error = f": {clip(event.error, 160)}" if event.error else ""
        return Line(f"{what} {event.child_id} ended {event.status}{error}.",
                    callout=None if event.status == "complete" else "warning")
    if kind == "children_awaited":
        return Line(f"Waiting for {plural(event.outstanding, 'run')} it started to finish before leaving the stage.")
    if kind == "paused":
        return Line(f"Run paused: {clip(event.reason, 300)}", callout="warning")
    if kind == "resumed":
        again = f" (resume {event.count})" if event.count > 1 else ""
        replayed = (f": {plural(event.replayed_model_calls, 'model turn')} and "
                    f"{plural(event.replayed_tool_calls, 'tool result')} replayed from its record"
                    if event.replayed_model_calls or event.replayed_tool_calls else "")
        return Line(f"Run resumed{again}{replayed}.", callout="warning" if event.from_status == "running" else None)
    if kind == "circuit_open":
        return Line(f"{event.model} failed {event.failures} times in a row; calls to it fail fast for "
                    f"{event.cooldown_s:g} s.", callout="warning")
    if kind == "stalled":
        return Line(f"Waiting up to {event.wait_s:g} s for a model to be callable again: {clip(event.reason, 200)}",
                    callout="warning")
    if kind == "completed":
        if event.status == "complete":
            return Line("Run complete." if event.produced_output else "Run complete, without a final output.")
        if event.status == "cancelled":
            return Line(f"Run {clip(event.error, 200)}." if event.error else "Run cancelled.", callout="warning")
        return Line(f"Run failed: {clip(event.error or 'unknown error', 200)}", callout="error")
    return Line(clip(event.describe(), 200))

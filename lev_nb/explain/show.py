"""``lev show RUN`` (and ``%lev show``): a recorded run's story as plain text, as the notebook's
run view tells it, with what the record adds: tokens and cost per stage, the warnings, the tool
calls that were denied, the answers that were rejected, the answer (its start), and the runs it
started.

:func:`story_of` gathers it (:class:`RunStory`) from a :class:`~lev_nb.explain.record.RunRecord`;
:func:`story_text` tells it. The run may be live: it is told as it stands.
"""

from __future__ import annotations

import time
from dataclasses import field
from datetime import timezone
from typing import Any

from lev_nb.engine import events as ev
from lev_nb.explain.fields import as_cost, as_dict, as_int
from lev_nb.explain.fold import RunState, told
from lev_nb.explain.record import RunRecord
from lev_nb.explain.story import (
    clip, first_line, format_bytes, format_cost, format_count, format_elapsed, plural,
    table_lines,
)
from lev_nb.records import record
from lev_nb.store import parse_stamp

__all__ = ["RunStory", "StageRow", "story_of", "story_text", "ANSWER_LINES"]

ANSWER_LINES = 12  # lines of the answer `lev show` prints; `lev result` prints all of it
ANSWER_CHARS = 1500
CHILD_ROWS = 20
DENIED = "[denied]"


@record
class StageRow:
    """One stage in the story's table: visits, time spent there, model calls, tool calls, tokens
    and cost (None: a call had no price; workers' and sub-agents' usage is in the stage that
    started them)."""

    stage: str
    visits: int
    seconds: float
    calls: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None


@record
class RunStory:
    """Everything ``lev show`` tells about one run."""

    run_id: str
    meta: dict[str, Any]
    state: RunState
    stages: list[StageRow]
    warnings: list[dict[str, Any]]
    denials: list[tuple[str, str, str]]  # (stage, tool, why)
    rejections: list[tuple[str, str]]  # (stage, reason)
    answer: str | None
    children: list[dict[str, Any]] = field(default_factory=list)


def story_of(record: RunRecord) -> RunStory:
    """The story of ``record``'s run as it stands (see the module docstring)."""
    meta = record.meta
    events = record.events()
    state = record.story(events=events)
    answer = state.output.content if state.output is not None else None
    denials = [(e.stage or "", e.tool, e.summary) for e in events
               if isinstance(e, ev.ToolCallFinished) and e.summary.startswith(DENIED)]
    rejections = [(e.stage or "", e.reason) for e in events if isinstance(e, ev.OutputRejected)]
    children = [c for c in meta.get("child_runs") or [] if isinstance(c, dict)]
    return RunStory(record.run_id, meta, state, _stage_rows(meta, state), record.warnings, denials,
                    rejections, answer, children)


def _stage_rows(meta: dict[str, Any], state: RunState) -> list[StageRow]:
    """The stages in the order the run first entered them (then any that only have usage)."""
    by_stage = as_dict(as_dict(meta.get("usage")).get("by_stage"))
    order = list(dict.fromkeys([v.stage for v in state.visits] + list(by_stage)))
    rows = []
    for name in order:
        visits = [v for v in state.visits if v.stage == name]
        seconds = sum(max(0.0, (v.ended if v.ended is not None else time.time()) - v.started) for v in visits)
        spent = as_dict(by_stage.get(name))
        rows.append(StageRow(
            stage=name, visits=len(visits), seconds=seconds, calls=as_int(spent.get("calls")),
            tool_calls=sum(v.tool_calls for v in visits), prompt_tokens=as_int(spent.get("prompt_tokens")),
            completion_tokens=as_int(spent.get("completion_tokens")),
            cost_usd=as_cost(spent.get("cost_usd")),
        ))
    return rows


def _when(stamp: Any) -> str:
    if not isinstance(stamp, str):
        return "?"
    moment = parse_stamp(stamp)
    if moment is None:
        return stamp
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def story_text(story: RunStory, status: str | None = None) -> str:
    """``story`` told as plain text; ``status`` is the status as ``lev ps`` words it (default:
    the recorded one)."""
    meta, state = story.meta, story.state
    out = [f"{meta.get('agent_name') or state.agent or 'run'}  {story.run_id}  {status or meta.get('status', '?')}"]
    title = meta.get("title") or state.title
    if title:
        out.append(f"title: {title}")
    task = first_line(str(meta.get("task") or state.task), 160)
    if task:
        out.append(f"task: {task}")
    tokens_in = sum(r.prompt_tokens for r in story.stages)
    tokens_out = sum(r.completion_tokens for r in story.stages)
    facts = [f"started {_when(meta.get('started_at'))}", f"took {format_elapsed(state.elapsed())}",
             plural(state.model_calls, "model call"), plural(state.tool_calls, "tool call"),
             f"{format_count(tokens_in)} in / {format_count(tokens_out)} out tokens",
             format_cost(meta.get("cost_usd"), tokens_in + tokens_out)]
    if meta.get("parent_run_id"):
        facts.append(f"started by {meta['parent_run_id']}")
    out.append(" · ".join(facts))
    if state.visits:
        out.append("path: " + " → ".join(v.stage for v in state.visits))
    if story.stages:
        out.append("")
        rows = [(r.stage, str(r.visits), format_elapsed(r.seconds), str(r.calls), str(r.tool_calls),
                 format_count(r.prompt_tokens), format_count(r.completion_tokens),
                 format_cost(r.cost_usd, r.prompt_tokens + r.completion_tokens)) for r in story.stages]
        out += table_lines(("STAGE", "VISITS", "TIME", "CALLS", "TOOLS", "IN", "OUT", "COST"), rows)
    for visit in state.visits:
        number = f" (visit {visit.number})" if visit.number > 1 else ""
        out.append("")
        out.append(f"{visit.stage}{number}: {plural(visit.turns, 'turn')}, {plural(visit.tool_calls, 'tool call')}")
        for line in told(state, visit):
            out.append(f"  {line.callout.upper() + ': ' if line.callout else ''}{clip(line.text, 200)}")
    out += _warnings_text(story)
    out += _answer_text(story)
    out += _children_text(story)
    if state.error:
        where = f" in {state.error_stage}" if state.error_stage else ""
        verb = {"cancelled": "cancelled", "paused": "paused"}.get(state.status, "failed")
        out += ["", f"{verb}{where}: {state.error}"]
    elif meta.get("error") and meta.get("status") in ("error", "cancelled"):
        out += ["", f"{meta.get('status')}: {meta['error']}"]
    return "\n".join(out) + "\n"


def _warnings_text(story: RunStory) -> list[str]:
    out: list[str] = []
    if story.warnings:
        out += ["", f"{plural(len(story.warnings), 'warning')}:"]
        for w in story.warnings:
            where = f"{w.get('stage')}: " if w.get("stage") else ""
            code = f"[{w.get('code')}] " if w.get("code") else ""
            out.append(f"  {where}{code}{clip(str(w.get('message', '')), 300)}")
    if story.denials:
        out += ["", f"{plural(len(story.denials), 'tool call')} denied:"]
        for stage, tool, why in story.denials:
            out.append(f"  {stage + ': ' if stage else ''}{tool}: {clip(why[len(DENIED):].strip(), 240)}")
    if story.rejections:
        stage, reason = story.rejections[-1]
        out += ["", f"{plural(len(story.rejections), 'answer')} rejected; the last"
                    f"{' in ' + stage if stage else ''}: {clip(reason, 300)}"]
    return out


def _answer_text(story: RunStory) -> list[str]:
    descriptor = story.meta.get("final_output")
    if story.answer is None or not isinstance(descriptor, dict):
        return []
    size = descriptor.get("bytes")
    facts = [str(descriptor.get("format") or "text")]
    if isinstance(size, int):
        facts.append(format_bytes(size))
    if descriptor.get("truncated"):
        facts.append("truncated")
    out = ["", f"answer ({', '.join(facts)}) from {descriptor.get('stage') or '?'}:"]
    lines = story.answer[:ANSWER_CHARS].splitlines()
    out += [f"  {line}".rstrip() for line in lines[:ANSWER_LINES]]
    if len(lines) > ANSWER_LINES or len(story.answer) > ANSWER_CHARS:
        out.append(f"  … (all of it: lev result {story.run_id})")
    return out


def _children_text(story: RunStory) -> list[str]:
    if not story.children:
        return []
    counts: dict[str, int] = {}
    for child in story.children:
        counts[str(child.get("status"))] = counts.get(str(child.get("status")), 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    out = ["", f"started {plural(len(story.children), 'run')} ({summary}):"]
    for child in story.children[:CHILD_ROWS]:
        kind = "sub-agent" if child.get("kind") == "agent" else "worker"
        error = f"  {clip(str(child['error']), 120)}" if child.get("error") else ""
        out.append(f"  {str(child.get('status')):<9} {child.get('agent_name') or '?'} ({kind}) {child.get('run_id')}{error}")
    if len(story.children) > CHILD_ROWS:
        out.append(f"  … and {len(story.children) - CHILD_ROWS} more (lev ps --all lists them)")
    return out

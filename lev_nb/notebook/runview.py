"""What the run view shows, and how: the state folded from a run's events, drawn as HTML and text.

:class:`RunState` follows a run event by event (no widget code, no threads): the header facts
(agent, run id, status, task, elapsed time, model calls, tool calls, tokens), the stages of the
blueprint with the visited ones and the current one, an honest progress fraction, the events of
each stage visit as sentences (:mod:`lev_nb.notebook.story`) with the transcript apart, the final
output and the error. The ``*_html`` functions draw it with JupyterLab's CSS variables (so it reads
in light and dark themes, with plain fallbacks for viewers without them); the live widget shows
the same parts, and :func:`snapshot_html` / :func:`snapshot_text` are the static views a saved
notebook, nbconvert or GitHub show.
"""

from __future__ import annotations

import dataclasses
import html
import json
import time
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from lev_nb.records import record
from lev_nb.store import TERMINAL_STATUSES
from lev_nb.notebook.story import (
    Line, clip, first_line, format_count, gate_blocked_text, nudge_text, plural, sentence,
)

__all__ = ["RunState", "Visit", "Child", "snapshot_html", "snapshot_text", "STYLE"]

FORMING_CHARS = 600  # the end of the answer being streamed, shown while the run goes on
PREVIEW_CHARS = 160  # transcript entries longer than this get a "show more"
OUTPUT_PREVIEW_CHARS = 20_000
CHILD_ROWS = 20  # child runs listed by name; the rest are counted
RUNNING_CAP = 0.95  # progress never reaches 1 while the run goes on

# Status chips carry their own colours (white text at >= 4.5:1), so they read in any theme.
CHIP_COLOURS = {
    "starting": "#616161", "running": "#1565c0", "complete": "#2e7d32", "error": "#c62828",
    "cancelled": "#a34f00", "waiting_input": "#6a1b9a", "paused": "#8e24aa",
}

STYLE = """<style>
.lev-run{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:var(--jp-ui-font-size1,13px);
 line-height:1.45;color:var(--jp-ui-font-color1,#1b1b1b);text-align:left;max-width:64em}
.lev-run *{line-height:1.45}
.lev-run .lev-head{display:flex;flex-wrap:wrap;align-items:center;gap:.25em .6em}
.lev-run .lev-agent{font-weight:600;font-size:1.1em}
.lev-run .lev-id{font-family:var(--jp-code-font-family,monospace);font-size:.9em;color:var(--jp-ui-font-color2,#555)}
.lev-run .lev-chip{display:inline-block;border-radius:1em;padding:0 .65em;font-size:.85em;font-weight:600;color:#fff}
.lev-run .lev-task{margin:.2em 0}
.lev-run .lev-facts{display:flex;flex-wrap:wrap;gap:.1em 1.2em;color:var(--jp-ui-font-color2,#555);font-size:.92em}
.lev-run .lev-facts b{color:var(--jp-ui-font-color1,#1b1b1b);font-weight:600}
.lev-run .lev-bar{height:6px;border-radius:3px;margin:.45em 0;background:var(--jp-layout-color3,#ddd);overflow:hidden}
.lev-run .lev-bar>span{display:block;height:100%;background:var(--jp-brand-color1,#1976d2)}
.lev-run .lev-bar.complete>span{background:var(--jp-success-color1,#388e3c)}
.lev-run .lev-bar.error>span,.lev-run .lev-bar.cancelled>span{background:var(--jp-error-color1,#d32f2f)}
.lev-run .lev-stages{display:flex;flex-wrap:wrap;gap:.3em;margin:.2em 0 .3em}
.lev-run .lev-stage{border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:.3em;padding:0 .45em;
 color:var(--jp-ui-font-color2,#555);font-size:.92em}
.lev-run .lev-stage.visited{color:var(--jp-ui-font-color1,#1b1b1b);background:var(--jp-layout-color2,#eee)}
.lev-run .lev-stage.current{color:var(--jp-ui-font-color1,#1b1b1b);border-color:var(--jp-brand-color1,#1976d2);
 box-shadow:0 0 0 1px var(--jp-brand-color1,#1976d2);font-weight:600}
.lev-run .lev-stage.current.error,.lev-run .lev-stage.current.cancelled{border-color:var(--jp-error-color1,#d32f2f);
 box-shadow:0 0 0 1px var(--jp-error-color1,#d32f2f)}
.lev-run .lev-stage.current.complete{border-color:var(--jp-success-color1,#388e3c);box-shadow:0 0 0 1px var(--jp-success-color1,#388e3c)}
.lev-run .lev-visit{margin:.5em 0 0;padding-left:.6em;border-left:2px solid var(--jp-border-color2,#e0e0e0)}
.lev-run .lev-visit.current{border-left-color:var(--jp-brand-color1,#1976d2)}
.lev-run .lev-visit-head{font-weight:600}
.lev-run .lev-visit-head span{font-weight:normal;color:var(--jp-ui-font-color2,#555)}
.lev-run ul.lev-lines{list-style:none;margin:.15em 0;padding:0}
.lev-run ul.lev-lines li{margin:.1em 0}
.lev-run li.lev-callout{border-left:3px solid var(--jp-warn-color1,#f57c00);padding:0 .45em;background:var(--jp-layout-color2,#f3f3f3)}
.lev-run li.lev-callout.error,.lev-run li.lev-callout.rejected{border-left-color:var(--jp-error-color1,#d32f2f)}
.lev-run li.lev-callout.nudge{border-left-color:var(--jp-info-color1,#0097a7)}
.lev-run .lev-tag{font-size:.78em;font-weight:700;letter-spacing:.04em;text-transform:uppercase;margin-right:.45em;
 color:var(--jp-ui-font-color2,#555)}
.lev-run details{margin:.15em 0}
.lev-run details>summary{cursor:pointer;color:var(--jp-ui-font-color2,#555)}
.lev-run .lev-transcript ol{margin:.2em 0;padding-left:1.6em}
.lev-run .lev-transcript li{margin:.15em 0}
.lev-run .lev-said{font-family:var(--jp-code-font-family,monospace);font-size:.88em;white-space:pre-wrap;
 color:var(--jp-ui-font-color1,#1b1b1b);margin:.05em 0 0}
.lev-run .lev-output{margin-top:.7em;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:4px;padding:.4em .7em}
.lev-run .lev-output-head{font-weight:600;margin-bottom:.3em}
.lev-run .lev-output-head span{font-weight:normal;color:var(--jp-ui-font-color2,#555)}
.lev-run .lev-output pre{white-space:pre-wrap;margin:0;max-height:28em;overflow:auto;
 font-family:var(--jp-code-font-family,monospace);font-size:.9em;color:var(--jp-content-font-color1,#1b1b1b)}
.lev-run .lev-output table{border-collapse:collapse;font-size:.92em}
.lev-run .lev-output th,.lev-run .lev-output td{border:1px solid var(--jp-border-color2,#e0e0e0);padding:.15em .5em;text-align:left}
.lev-run .lev-error{margin-top:.7em;border-left:4px solid var(--jp-error-color1,#d32f2f);padding:.3em .7em;
 background:var(--jp-layout-color2,#f3f3f3)}
.lev-run .lev-error b{color:var(--jp-ui-font-color1,#1b1b1b)}
.lev-run .lev-forming{margin-top:.5em;padding:.3em .7em;white-space:pre-wrap;color:var(--jp-ui-font-color2,#555);
 border-left:4px solid var(--jp-brand-color1,#1976d2)}
.lev-run .lev-forming .lev-label{font-weight:600;text-transform:uppercase;font-size:.8em}
.lev-run .lev-children{margin-top:.6em}
.lev-run .lev-children-head{font-weight:600}
.lev-run .lev-children-head span{font-weight:normal;color:var(--jp-ui-font-color2,#555)}
.lev-run .lev-child{display:flex;flex-wrap:wrap;align-items:center;gap:.2em .6em;margin:.15em 0}
.lev-run .lev-child .lev-chip{font-size:.78em}
</style>"""


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
        self._calls: dict[str, Any] = {}  # call id -> tool_started event, for the result's line
        self.mcp_servers: list[dict[str, Any]] = []  # {name, transport, tools, error} of each MCP server used

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
        if kind == "stage_entered":
            if self.visits:
                self.visits[-1].ended = event.ts
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
        visit.lines.append((line, event.message if kind == "error" else None))
        if kind == "gate_blocked":
            visit.repeat = ("gate", event.target, event.message, event.attempt, event.max_attempts)
        elif kind == "nudge":
            visit.repeat = ("nudge", event.reason, 1)
        else:
            visit.repeat = None

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
            self.visits.append(Visit(event.stage or "run", 1, None, event.ts))
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


# -- drawing ----------------------------------------------------------------------------------
def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def format_elapsed(seconds: float) -> str:
    """12.3 s, 4 min 05 s, 1 h 02 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def header_html(state: RunState, now: float | None = None) -> str:
    """Agent, run id, status chip, the task's first line and the counters."""
    colour = CHIP_COLOURS.get(state.status, CHIP_COLOURS["running"])
    task = first_line(state.task, 160)
    facts = [
        ("elapsed", format_elapsed(state.elapsed(now))),
        ("model calls", format_count(state.model_calls)),
        ("tool calls", format_count(state.tool_calls)),
        ("tokens in / out", f"{format_count(state.tokens_in)} / {format_count(state.tokens_out)}"),
    ]
    return (
        f"<div class='lev-head'><span class='lev-agent'>{_e(state.agent or 'run')}</span>"
        f"<span class='lev-id'>{_e(state.run_id)}</span>"
        f"<span class='lev-chip lev-status' data-status='{_e(state.status)}' style='background:{colour}'>{_e(state.status)}</span></div>"
        + (f"<div class='lev-task'>{_e(task)}</div>" if task else "")
        + "<div class='lev-facts'>" + "".join(f"<span>{_e(k)} <b>{_e(v)}</b></span>" for k, v in facts) + "</div>"
    )


def progress_html(state: RunState) -> str:
    """The progress bar (honest: never full while the run goes on) and the stage strip."""
    percent = round(state.progress() * 100)
    bar = (
        f"<div class='lev-bar {_e(state.status)}' role='progressbar' aria-valuenow='{percent}' "
        f"aria-valuemin='0' aria-valuemax='100' title='{percent}%'><span style='width:{percent}%'></span></div>"
    )
    names = state.stages or state.visited
    visited = set(state.visited)
    chips = []
    for name in names:
        classes = ["lev-stage"]
        mark = ""
        if name == state.current:
            classes += ["current", state.status]
            mark = "▶ " if not state.finished else {"complete": "✓ ", "paused": "⏸ "}.get(state.status, "✗ ")
        elif name in visited:
            classes.append("visited")
            mark = "✓ "
        chips.append(f"<span class='{' '.join(classes)}'>{_e(mark + name)}</span>")
    return bar + f"<div class='lev-stages'>{''.join(chips)}</div>"


MCP_TOOLS_SHOWN = 12


def mcp_lines(state: RunState) -> list[str]:
    """One line per MCP server the run uses: its transport and tools, or why it did not start."""
    lines = []
    for server in state.mcp_servers:
        if server.get("error"):
            lines.append(f"{server['name']}: not started: {server['error']}")
            continue
        tools = list(server.get("tools") or [])
        shown = ", ".join(tools[:MCP_TOOLS_SHOWN]) + (f" and {len(tools) - MCP_TOOLS_SHOWN} more"
                                                       if len(tools) > MCP_TOOLS_SHOWN else "")
        lines.append(f"{server['name']} ({server.get('transport', '?')}): {plural(len(tools), 'tool')}"
                     + (f": {shown}" if tools else ""))
    return lines


def mcp_html(state: RunState) -> str:
    """The MCP servers of the run and their tools (nothing when it uses none)."""
    lines = mcp_lines(state)
    if not lines:
        return ""
    items = "".join(f"<div>{_e(line)}</div>" for line in lines)
    return f"<div class='lev-facts lev-mcp'><span class='lev-label'>MCP servers</span><div>{items}</div></div>"


def _said(text: str, collapsed: bool = False) -> str:
    """Longer text under a sentence, with "show more" past PREVIEW_CHARS (or all of it behind
    "show more" when ``collapsed``)."""
    text = text.strip()
    if not text:
        return ""
    if collapsed:
        return f"<details class='lev-more'><summary>show more</summary><div class='lev-said'>{_e(text)}</div></details>"
    if len(text) <= PREVIEW_CHARS:
        return f"<div class='lev-said'>{_e(text)}</div>"
    cut = text[:PREVIEW_CHARS].rsplit(" ", 1)[0] if " " in text[:PREVIEW_CHARS] else text[:PREVIEW_CHARS]
    return (
        f"<div class='lev-said'>{_e(cut)}…</div>"
        f"<details class='lev-more'><summary>show more</summary><div class='lev-said'>{_e(text)}</div></details>"
    )


def visit_html(state: RunState, index: int) -> str:
    """One stage visit: its heading, its sentences (call-outs marked), its transcript."""
    visit = state.visits[index]
    live = index == len(state.visits) - 1 and not state.finished
    took = (visit.ended if visit.ended is not None else None)
    meta = [plural(visit.turns, "turn")]
    if visit.tool_calls:
        meta.append(plural(visit.tool_calls, "tool call"))
    if took is not None:
        meta.append(format_elapsed(max(0.0, took - visit.started)))
    number = f" (visit {visit.number})" if visit.number > 1 else ""
    head = f"<div class='lev-visit-head'>{_e(visit.stage)}{_e(number)} <span>· {_e(', '.join(meta))}</span></div>"
    items = []
    for line, message in visit.lines:
        text = line.text
        if message and state.error and message in state.error:
            text = "The run failed here (the error is below)."
        if line.callout:
            tag = f"<span class='lev-tag'>{_e(line.callout)}</span>"
            items.append(f"<li class='lev-callout {_e(line.callout)}'>{tag}{_e(text)}{_said(line.detail, collapsed=True)}</li>")
        else:
            items.append(f"<li>{_e(text)}{_said(line.detail)}</li>")
    body = f"<ul class='lev-lines'>{''.join(items)}</ul>" if items else ""
    transcript = ""
    if visit.transcript:
        entries = "".join(f"<li>{_e(t.text)}{_said(t.detail)}</li>" for t in visit.transcript)
        opened = " open" if live else ""
        transcript = (
            f"<details class='lev-transcript'{opened}><summary>transcript · {len(visit.transcript)} "
            f"entr{'ies' if len(visit.transcript) != 1 else 'y'}</summary><ol>{entries}</ol></details>"
        )
    classes = "lev-visit current" if live else "lev-visit"
    return f"<div class='{classes}'>{head}{body}{transcript}</div>"


def output_html(state: RunState) -> str:
    """The final output, drawn by its format (a table for CSV, a tree-like listing for JSON, ...)."""
    out = state.output
    if out is None:
        if state.status == "complete" and not state.output_expected:
            return "<div class='lev-output lev-no-output'>The run ended without a final output.</div>"
        return ""
    fmt = (out.format or "").strip().lower()
    note = " · truncated" if out.truncated else ""
    head = (
        f"<div class='lev-output-head'>Final output <span>· {_e(out.format or 'text')} from {_e(out.stage)}{_e(note)}</span></div>"
    )
    return f"<div class='lev-output' data-format='{_e(fmt)}'>{head}{render_content(out.content, fmt)}</div>"


def render_content(content: str, fmt: str) -> str:
    """HTML for an answer by its format label; anything unknown is shown as preformatted text."""
    from lev_nb.notebook.display import csv_table_html, pretty_xml

    if fmt == "csv":
        table = csv_table_html(content)
        if table is not None:
            return table
    elif fmt == "json":
        try:
            return f"<pre>{_e(json.dumps(json.loads(content), indent=2, ensure_ascii=False))}</pre>"
        except (ValueError, RecursionError):
            pass
    elif fmt in ("markdown", "md"):
        rendered = markdown_html(content)
        if rendered is not None:
            return f"<div class='lev-markdown'>{rendered}</div>"
    elif fmt == "xml":
        pretty = pretty_xml(content)
        if pretty is not None:
            content = pretty
    shown = content if len(content) <= OUTPUT_PREVIEW_CHARS else content[:OUTPUT_PREVIEW_CHARS] + "\n…"
    return f"<pre>{_e(shown)}</pre>"


def markdown_html(text: str) -> str | None:
    """Markdown as HTML (raw HTML escaped) when a markdown library is installed, else None."""
    try:
        import mistune
    except ImportError:
        return None
    try:
        return str(mistune.create_markdown(escape=True)(text))
    except Exception:  # a renderer failure must not break the view: the text is shown instead
        return None


def error_html(state: RunState) -> str:
    """The error of a failed run, once, with the stage it failed in."""
    if not state.error:
        return ""
    where = f" in {_e(state.error_stage)}" if state.error_stage else ""
    verb = {"cancelled": "Cancelled", "paused": "Paused"}.get(state.status, "Failed")
    return f"<div class='lev-error'><b>{verb}{where}:</b> {_e(state.error)}</div>"


def child_counts(state: RunState) -> str:
    """``3 complete, 1 running`` over the child runs."""
    counts: dict[str, int] = {}
    for child in state.children.values():
        counts[child.status] = counts.get(child.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def child_row_html(child: Child) -> str:
    """One child run: its status chip, agent, kind and id (and its error)."""
    colour = CHIP_COLOURS.get(child.status, CHIP_COLOURS["running"])
    kind = "sub-agent" if child.kind == "agent" else "worker"
    error = f" <span class='lev-id'>{_e(clip(child.error, 120))}</span>" if child.error else ""
    return (
        f"<span class='lev-chip' data-status='{_e(child.status)}' style='background:{colour}'>{_e(child.status)}</span>"
        f"<span>{_e(child.agent)} <span class='lev-id'>({_e(kind)})</span></span>"
        f"<span class='lev-id'>{_e(child.run_id)}</span>{error}"
    )


def children_head_html(state: RunState) -> str:
    """The heading of the child runs' list, with their counts by status."""
    if not state.children:
        return ""
    n = len(state.children)
    return (
        f"<div class='lev-children-head'>Started {n} run{'s' if n != 1 else ''} "
        f"<span>· {_e(child_counts(state))}</span></div>"
    )


def children_html(state: RunState) -> str:
    """The runs this run started (sub-agents and workers) with their status; the first
    CHILD_ROWS by name, the rest counted."""
    if not state.children:
        return ""
    children = list(state.children.values())
    rows = "".join(f"<div class='lev-child' data-run-id='{_e(c.run_id)}'>{child_row_html(c)}</div>" for c in children[:CHILD_ROWS])
    more = len(children) - CHILD_ROWS
    tail = f"<div class='lev-id'>… and {more} more (run.children lists them all)</div>" if more > 0 else ""
    return f"<div class='lev-children'>{children_head_html(state)}{rows}{tail}</div>"


def forming_html(state: RunState) -> str:
    """The answer a streaming model is writing right now (its last lines), while the run goes on."""
    if not state.forming or state.finished:
        return ""
    tail = state.forming[-FORMING_CHARS:]
    return f"<div class='lev-forming'><span class='lev-label'>writing</span> {_e(tail)}</div>"


def snapshot_html(state: RunState, now: float | None = None) -> str:
    """The whole view as one static HTML block (what a saved notebook keeps)."""
    parts = [header_html(state, now), progress_html(state), mcp_html(state)]
    parts += [visit_html(state, i) for i in range(len(state.visits))]
    parts.append(forming_html(state))
    parts += [children_html(state), output_html(state), error_html(state)]
    return f"{STYLE}<div class='lev-run' data-status='{_e(state.status)}' data-run-id='{_e(state.run_id)}'>{''.join(parts)}</div>"


def snapshot_text(state: RunState, now: float | None = None) -> str:
    """The whole view as plain text (a console, an executor that keeps text only)."""
    lines = [f"{state.agent or 'run'} · {state.run_id} · {state.status}"]
    task = first_line(state.task, 160)
    if task:
        lines.append(f"task: {task}")
    lines.append(
        f"elapsed {format_elapsed(state.elapsed(now))} · {format_count(state.model_calls)} model calls · "
        f"{format_count(state.tool_calls)} tool calls · tokens {format_count(state.tokens_in)} in / "
        f"{format_count(state.tokens_out)} out"
    )
    lines.extend(f"MCP server {line}" for line in mcp_lines(state))
    if state.visits:
        lines.append("path: " + " → ".join(v.stage for v in state.visits))
    for visit in state.visits:
        number = f" (visit {visit.number})" if visit.number > 1 else ""
        lines.append(f"{visit.stage}{number}: {plural(visit.turns, 'turn')}, {plural(visit.tool_calls, 'tool call')}")
        for line, message in visit.lines:
            text = line.text
            if message and state.error and message in state.error:
                text = "The run failed here (the error is below)."
            lines.append(f"  {'! ' + line.callout + ': ' if line.callout else ''}{clip(text, 200)}")
    if state.children:
        lines.append(f"started {plural(len(state.children), 'run')}: {child_counts(state)}")
        for child in list(state.children.values())[:CHILD_ROWS]:
            kind = "sub-agent" if child.kind == "agent" else "worker"
            lines.append(f"  {child.status:<9} {child.agent} ({kind}) {child.run_id}")
        if len(state.children) > CHILD_ROWS:
            lines.append(f"  … and {len(state.children) - CHILD_ROWS} more")
    if state.output is not None:
        out = state.output
        lines.append(f"final output ({out.format or 'text'}) from {out.stage}:")
        body = out.content if len(out.content) <= 2000 else out.content[:2000] + "\n…"
        lines.extend("  " + line for line in body.splitlines())
    if state.error:
        where = f" in {state.error_stage}" if state.error_stage else ""
        verb = {"cancelled": "cancelled", "paused": "paused"}.get(state.status, "failed")
        lines.append(f"{verb}{where}: {state.error}")
    return "\n".join(lines)

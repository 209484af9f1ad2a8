"""What the run view shows, and how: a run's story (:class:`lev_nb.explain.fold.RunState`, folded
from its events) drawn as HTML and text. The warnings the run told are a call-out above the stages,
drawn with inline styles so it shows even where a notebook's ``<style>`` is dropped (an untrusted
saved notebook). The ``*_html`` functions draw it with JupyterLab's CSS
variables (see :mod:`lev_nb.notebook.viewstyle`: inline styles with theme-neutral colours, so it reads in
light and dark themes and where a notebook's ``<style>`` is stripped);
the live widget shows the same parts, and :func:`snapshot_html` / :func:`snapshot_text` are the static views a saved
notebook, nbconvert or GitHub show.
"""

from __future__ import annotations

import html
import json
from typing import Any

from lev_nb.explain.fold import Child, RunState, Told, Visit, told
from lev_nb.explain.story import clip, first_line, format_count, format_elapsed, plural
from lev_nb.notebook.viewstyle import inline

__all__ = ["RunState", "Visit", "Child", "Told", "snapshot_html", "snapshot_text", "warnings_html", "STYLE"]

WARNING_COLOUR = "#ef6c00"

FORMING_CHARS = 600  # the end of the answer being streamed, shown while the run goes on
PREVIEW_CHARS = 160  # transcript entries longer than this get a "show more"
OUTPUT_PREVIEW_CHARS = 20_000
CHILD_ROWS = 20  # child runs listed by name; the rest are counted
FIRST_ANSWER = "Waiting for the model's first answer."  # a live stage visit before its first turn

# Status chips carry their own colours (white text at >= 4.5:1), so they read in any theme.
CHIP_COLOURS = {
    "starting": "#616161", "running": "#1565c0", "complete": "#2e7d32", "error": "#c62828",
    "cancelled": "#a34f00", "waiting_input": "#6a1b9a", "paused": "#8e24aa",
}

# The view's look: inline styles only (lev_nb.notebook.viewstyle), so a saved notebook reads the
# same untrusted in JupyterLab, on GitHub and in nbviewer. STYLE stays for callers that prepend it.
STYLE = ""


# -- drawing ----------------------------------------------------------------------------------
def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


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
    more = task_more_lines(state.task)
    more_html = f" <span class='lev-more-lines'>(+{plural(more, 'line')})</span>" if more else ""
    # Spaces between the parts, so the header reads as words even where no style applies.
    return (
        f"<div class='lev-head'><span class='lev-agent'>{_e(state.agent or 'run')}</span> "
        f"<span class='lev-id'>{_e(state.run_id)}</span> "
        f"<span class='lev-chip lev-status' data-status='{_e(state.status)}' style='background-color:{colour}'>{_e(state.status)}</span></div>"
        + (f"<div class='lev-title'>{_e(state.title)}</div>" if state.title else "")
        + (f"<div class='lev-task'>{_e(task)}{more_html}</div>" if task else "")
        + "<div class='lev-facts'>" + " ".join(f"<span><span class='lev-fact'>{_e(k)}</span> <b>{_e(v)}</b></span>"
                                               for k, v in facts) + "</div>"
    )


def task_more_lines(task: str | None) -> int:
    """How many lines of a multi-line task the header's first line leaves out."""
    lines = [line for line in (task or "").strip().splitlines() if line.strip()]
    return max(0, len(lines) - 1)


def progress_html(state: RunState) -> str:
    """The progress bar (honest: never full while the run goes on) and the stage strip."""
    percent = round(state.progress() * 100)
    bar = (
        f"<div class='lev-bar {_e(state.status)}' role='progressbar' aria-valuenow='{percent}' "
        f"aria-valuemin='0' aria-valuemax='100' title='{percent}%'><span class='lev-fill {_e(state.status)}' "
        f"style='width:{percent}%'></span></div>"
    )
    names = state.stages or state.visited
    visited = set(state.visited)
    chips = []
    for name in names:
        classes = ["lev-stage"]
        mark = ""
        if name == state.current:
            classes += ["current", state.status]
            mark = "▶ " if not state.finished else {"complete": "✓ ", "paused": "‖ "}.get(state.status, "✗ ")
        elif name in visited:
            classes.append("visited")
            mark = "✓ "
        chips.append(f"<span class='{' '.join(classes)}'>{_e(mark + name)}</span>")
    return bar + f"<div class='lev-stages'>{' '.join(chips)}</div>"


def _said(text: str, collapsed: bool = False) -> str:
    """Longer text under a sentence, with "show more" past PREVIEW_CHARS (or all of it behind
    "show more" when ``collapsed``)."""
    text = text.strip()
    if not text:
        return ""
    if collapsed:
        return f"<details class='lev-more lev-details'><summary class='lev-summary'>show more</summary><div class='lev-said'>{_e(text)}</div></details>"
    if len(text) <= PREVIEW_CHARS:
        return f"<div class='lev-said'>{_e(text)}</div>"
    cut = text[:PREVIEW_CHARS].rsplit(" ", 1)[0] if " " in text[:PREVIEW_CHARS] else text[:PREVIEW_CHARS]
    return (
        f"<div class='lev-said'>{_e(cut)}…</div>"
        f"<details class='lev-more lev-details'><summary class='lev-summary'>show more</summary><div class='lev-said'>{_e(text)}</div></details>"
    )


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


def warnings_html(state: RunState) -> str:
    """The warnings the run told, as one call-out: each one line, with its stage and code. Inline
    styles only, so it shows where the view's ``<style>`` block does not (an untrusted notebook)."""
    if not state.warnings:
        return ""
    n = len(state.warnings)
    items = []
    for told_one in state.warnings:
        where = (f"<span style='font-weight:600;margin-right:.4em'>{_e(told_one.stage)}</span>"
                 if told_one.stage else "")
        items.append(
            f"<li data-code='{_e(told_one.code)}' style='margin:.1em 0'>{where}{_e(clip(told_one.message, 400))} "
            f"<span style='opacity:.7;font-size:.85em;font-family:monospace'>{_e(told_one.code)}</span></li>"
        )
    return (
        f"<div class='lev-warnings' role='note' style='margin:.5em 0;padding:.35em .7em;"
        f"border-left:4px solid {WARNING_COLOUR};background-color:rgba(239,108,0,.10);text-align:left'>"
        f"<div style='font-weight:700;color:{WARNING_COLOUR}'>⚠ {plural(n, 'warning')}</div>"
        f"<ul style='margin:.15em 0 0;padding-left:1.2em'>{''.join(items)}</ul></div>"
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
    head = f"<div class='lev-visit-head'>{_e(visit.stage)}{_e(number)} <span class='lev-dim'>· {_e(', '.join(meta))}</span></div>"
    items = []
    for line in told(state, visit):
        text = line.text
        if line.callout:
            tag = f"<span class='lev-tag'>{_e(line.callout)}</span>"
            items.append(f"<li class='lev-line lev-callout {_e(line.callout)}'>{tag}{_e(text)}{_said(line.detail, collapsed=True)}</li>")
        else:
            items.append(f"<li class='lev-line'>{_e(text)}{_said(line.detail)}</li>")
    if live and not visit.turns and not visit.tool_calls and state.status == "running":
        items.append(f"<li class='lev-line lev-waiting'>{_e(FIRST_ANSWER)}</li>")
    body = f"<ul class='lev-lines'>{''.join(items)}</ul>" if items else ""
    transcript = ""
    if visit.transcript:
        entries = "".join(f"<li class='lev-line'>{_e(t.text)}{_said(t.detail)}</li>" for t in visit.transcript)
        opened = " open" if live else ""
        transcript = (
            f"<details class='lev-transcript lev-details'{opened}><summary class='lev-summary'>transcript · {len(visit.transcript)} "
            f"entr{'ies' if len(visit.transcript) != 1 else 'y'}</summary><ol class='lev-entries'>{entries}</ol></details>"
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
        f"<div class='lev-output-head'>Final output <span class='lev-dim'>· {_e(out.format or 'text')} from {_e(out.stage)}{_e(note)}</span></div>"
    )
    return f"<div class='lev-output' data-format='{_e(fmt)}'>{head}{render_content(out.content, fmt)}</div>"


def render_content(content: str, fmt: str) -> str:
    """HTML for an answer by its format label; anything unknown is shown as preformatted text."""
    from lev_nb.notebook.display import csv_table_html, pretty_xml

    if fmt == "csv":
        table = csv_table_html(content)
        if table is not None:
            return table.replace("<table>", "<table class='lev-table'>").replace("<th>", "<th class='lev-cell'>").replace(
                "<td>", "<td class='lev-cell'>")
    elif fmt == "json":
        try:
            return f"<pre class='lev-pre'>{_e(json.dumps(json.loads(content), indent=2, ensure_ascii=False))}</pre>"
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
    return f"<pre class='lev-pre'>{_e(shown)}</pre>"


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
        f"<span class='lev-chip lev-child-chip' data-status='{_e(child.status)}' style='background-color:{colour}'>{_e(child.status)}</span> "
        f"<span>{_e(child.agent)} <span class='lev-id'>({_e(kind)})</span></span> "
        f"<span class='lev-id'>{_e(child.run_id)}</span>{error}"
    )


def children_head_html(state: RunState) -> str:
    """The heading of the child runs' list, with their counts by status."""
    if not state.children:
        return ""
    n = len(state.children)
    return (
        f"<div class='lev-children-head'>Started {n} run{'s' if n != 1 else ''} "
        f"<span class='lev-dim'>· {_e(child_counts(state))}</span></div>"
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
    parts = [header_html(state, now), progress_html(state), mcp_html(state), warnings_html(state)]
    parts += [visit_html(state, i) for i in range(len(state.visits))]
    parts.append(forming_html(state))
    parts += [children_html(state), output_html(state), error_html(state)]
    body = f"<div class='lev-run' data-status='{_e(state.status)}' data-run-id='{_e(state.run_id)}'>{''.join(parts)}</div>"
    return inline(body)


def snapshot_text(state: RunState, now: float | None = None) -> str:
    """The whole view as plain text (a console, an executor that keeps text only)."""
    lines = [f"{state.agent or 'run'} · {state.run_id} · {state.status}"]
    if state.title:
        lines.append(f"title: {state.title}")
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
    if state.warnings:
        lines.append(f"⚠ {plural(len(state.warnings), 'warning')}:")
        lines.extend(f"  {'[' + w.stage + '] ' if w.stage else ''}{clip(w.message, 300)} ({w.code})" for w in state.warnings)
    for visit in state.visits:
        number = f" (visit {visit.number})" if visit.number > 1 else ""
        lines.append(f"{visit.stage}{number}: {plural(visit.turns, 'turn')}, {plural(visit.tool_calls, 'tool call')}")
        for line in told(state, visit):
            lines.append(f"  {'! ' + line.callout + ': ' if line.callout else ''}{clip(line.text, 200)}")
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

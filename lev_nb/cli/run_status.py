"""How a recorded run is described on a terminal: its status text and the ``lev ps`` listing.

Shared by ``lev run`` / ``lev result`` (the status in their messages), ``lev ps`` and ``%lev ps``
(the listing), and the notebook's run display (the status line). The run record itself is read
through :mod:`lev_nb.store`.
"""

from __future__ import annotations

import json
from typing import Any

from lev_nb.explain.table import total_tokens
from lev_nb.records import record
from lev_nb.store import TERMINAL_STATUSES
from lev_nb.store.listing import ABANDONED_AFTER_S, RunEntry, abandoned, owner_gone, scan_runs

__all__ = ["status_text", "summary_line", "print_ps", "one_line", "cost_text", "ABANDONED_AFTER_S"]

RECENT_FINISHED = 20
CHILD_ROWS = 10  # children shown under one run (all of them with --all)
# The STATUS column of the table is cut here, so a long error never wraps a row.
STATUS_WIDTH = 60


# How meta.json's waiting_on.reason reads in the STATUS cell (docs/runs.md#looking-at-a-run-afterwards).
WAIT_LABELS = {"tool_approval": "tool approval", "user_prompt": "user prompt", "interaction_point": "checkpoint"}


def status_text(meta: dict[str, Any]) -> str:
    """The STATUS cell of ``lev ps``: the status, its error, and what the run left behind."""
    status = meta.get("status", "?")
    flags = meta.get("flags") or {}
    waiting = meta.get("waiting_on") or {}
    if status == "error":
        text = f"error: {meta.get('error') or 'unknown'}"
    elif status == "paused":
        setup = meta.get("needs_setup") or {}
        blocker = setup.get("blocker") if isinstance(setup, dict) else None
        remedy = setup.get("remedy") if isinstance(setup, dict) else None
        if blocker == "interrupted":  # Ctrl-C: nothing to set up
            text = "paused: interrupted (lev resume continues it)"
        else:
            text = f"paused: needs {blocker or 'setup'}" + (f" ({remedy}, then lev resume)" if remedy else " (then lev resume)")
    elif status in ("running", "starting") and abandoned(meta):
        text = f"{status} (abandoned)"  # killed before it started counts too: lev resume takes both
    elif status == "waiting_input" and owner_gone(meta):
        text = "waiting_input (abandoned)"  # a wait for a person may be long; only a gone owner counts
    elif status == "waiting_input":
        reason = waiting.get("reason", "")
        text = f"waiting: {WAIT_LABELS.get(reason, reason.replace('_', ' ') or 'a person')}"
    elif status == "running" and waiting.get("reason") == "children":
        text = f"waiting: children({waiting.get('outstanding', '?')})"
    elif status == "running" and waiting.get("reason") == "stalled":
        models = waiting.get("models") or []
        text = f"stalled: {', '.join(models) or 'its models'} fail fast; waiting before pausing"
    else:
        text = status
    if status in TERMINAL_STATUSES and flags.get("empty_output"):
        text += " (no output)"
    if flags.get("splits_degraded"):
        text += " (fan-out empty)"
    return text


def summary_line(meta: dict[str, Any]) -> str:
    """The line ``lev run`` ends with: status, stages, calls, cost, and the warnings to look at,
    e.g. ``complete · 3 stages (plan → fix → check) · 7 model calls, 12 tool calls · $0.0123 ·
    2 warnings — lev show RUN_ID``."""
    history = [s for s in meta.get("stage_history") or [] if isinstance(s, str)]
    path = " → ".join(history)  # every visit, in order; the count is of distinct stages
    distinct = len(set(history))
    stages = f"{distinct} stage{'s' if distinct != 1 else ''}" + (f" ({one_line(path)})" if path else "")
    usage = meta.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    calls = total.get("calls") if isinstance(total, dict) else None
    if not isinstance(calls, int):
        calls = meta.get("iteration") or 0
    tools = meta.get("tool_calls") or 0
    parts = [str(meta.get("status", "?")), stages,
             f"{calls} model call{'s' if calls != 1 else ''}, {tools} tool call{'s' if tools != 1 else ''}",
             cost_text({"cost_usd": meta.get("cost_usd"), "tokens": total_tokens(meta)})]
    warnings = meta.get("warnings")
    told = len(warnings) if isinstance(warnings, list) else 0
    line = " · ".join(parts)
    if told:
        line += f" · {told} warning{'s' if told != 1 else ''} — lev show {meta.get('run_id', '?')}"
    return line


FOLD_LINE = ("{count} abandoned {runs} (their process is gone): lev ps --all lists them; "
             "lev resume RUN_ID continues one")


def print_ps(*, all_runs: bool = False, as_json: bool = False, verbose: bool = False) -> None:
    """Print the recorded runs as ``lev ps`` does: live runs, then finished ones (the newest
    RECENT_FINISHED top-level runs and what they started, unless ``all_runs``), each followed by
    the runs it started; abandoned runs (see :func:`lev_nb.store.listing.abandoned`) are folded
    into one line unless ``all_runs``.

    With ``as_json``, one object: ``runs`` (live runs, every one), ``finished`` (the finished runs
    the table would show, every one with ``all_runs``), ``abandoned`` (abandoned runs: every one
    with ``all_runs``, else only those started by a listed run) and ``abandoned_not_listed`` (how
    many were left out; 0 with ``all_runs``). Each list holds rows as :func:`_row` builds them,
    newest first. ``verbose`` (``lev ps -v``) adds the MODEL, STARTED and WORKDIR columns.
    """
    view = _select(scan_runs(), all_runs)
    if as_json:
        listed = [e for e in view.entries if e.run_id in view.listed]
        print(json.dumps({
            "runs": [_row(e.meta) for e in listed if e.state == "live"],
            "finished": [_row(e.meta) for e in listed if e.state == "finished"],
            "abandoned": [_row(e.meta) for e in listed if e.state == "abandoned"],
            "abandoned_not_listed": view.folded,
        }, indent=2))
        return
    rows = _tree_rows(view, all_runs)
    fold = FOLD_LINE.format(count=view.folded, runs="run" if view.folded == 1 else "runs") if view.folded else ""
    if not rows:
        print(fold or "no runs yet; start one with `lev run PATH --task ...`")
        return
    # TITLE ([title]: lev_nb.engine.title) once any listed run has one.
    titled = any(r.get("title") for r in rows)
    header: tuple[str, ...] = ("RUN ID", "AGENT") + (("TITLE",) if titled else ()) + (
        "STATUS", "STAGE", "TURNS", "TOOLS", "COST", "WARN", "UPDATED")
    more: tuple[str, ...] = ("MODEL", "STARTED", "WORKDIR") if verbose else ()
    table = [header[:-1] + more + header[-1:]] + [
        (r["indent"] + r["run_id"], r["agent_name"]) + ((r["title"] or "-",) if titled else ())
        + (one_line(r["status_text"]), r["current_stage"], str(r["iteration"]), str(r["tool_calls"]), cost_text(r),
           str(r["warnings"]) if r["warnings"] else "-")
        + ((r["model"] or "-", r["started_at"], r["workdir"] or "-") if verbose else ()) + (r["updated_at"],)
        if "more" not in r else (r["indent"] + r["more"],) + ("",) * (len(header) + len(more) - 1)
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        print("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1])
    if fold:
        print(fold)


def one_line(text: str, width: int = STATUS_WIDTH) -> str:
    """``text`` on one line (whitespace folded), cut to ``width`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def cost_text(row: dict[str, Any]) -> str:
    """The COST cell of a :func:`_row` (see :func:`lev_nb.explain.story.format_cost`)."""
    from lev_nb.explain.story import format_cost

    return format_cost(row.get("cost_usd"), row.get("tokens") or 0)


@record(frozen=False)
class _View:
    """What ``lev ps`` lists: every entry (newest first), the top-level runs shown in order, each
    entry's children (oldest first), the ids listed and how many abandoned runs were folded."""

    entries: list[RunEntry]
    roots: list[RunEntry]
    children: dict[str, list[RunEntry]]
    listed: set[str]
    folded: int


def _select(entries: list[RunEntry], all_runs: bool) -> _View:
    """Choose the runs ``lev ps`` lists. A top-level run (one a person started) is listed when it
    is live, or among the newest RECENT_FINISHED finished ones, or (with ``all_runs``) always;
    everything it started is listed under it, so a large fan-out never pushes other runs out.
    Abandoned top-level runs are folded (``all_runs`` lists them after the live ones), and a live
    run under a folded one is listed on its own. Only ids and peeked fields are used here: the
    caller parses just the records it shows."""
    by_id = {e.run_id: e for e in entries}
    children: dict[str, list[RunEntry]] = {}
    for entry in reversed(entries):  # oldest first under each parent
        if entry.parent in by_id and entry.parent != entry.run_id:
            children.setdefault(entry.parent, []).append(entry)
    tops = [e for e in entries if e.parent not in by_id or e.parent == e.run_id]
    live = [e for e in tops if e.state == "live"]
    gone = [e for e in tops if e.state == "abandoned"]
    done = [e for e in tops if e.state == "finished"]
    roots = live + gone + done if all_runs else live + done[:RECENT_FINISHED]
    listed: set[str] = set()

    def walk(entry: RunEntry) -> None:
        stack = [entry]
        while stack:
            e = stack.pop()
            if e.run_id not in listed:
                listed.add(e.run_id)
                stack.extend(children.get(e.run_id, []))

    for root in roots:
        walk(root)
    for entry in entries:  # a live run whose top-level run was folded still shows
        if entry.state == "live" and entry.run_id not in listed:
            roots.append(entry)
            walk(entry)
    folded = sum(1 for e in entries if e.state == "abandoned" and e.run_id not in listed)
    return _View(entries, roots, children, listed, folded)


def _tree_rows(view: _View, all_runs: bool) -> list[dict[str, Any]]:
    """The table's rows: the view's top-level runs, each followed by the runs it started
    (sub-agents and fan-out workers), indented one step per level. Without ``all_runs`` a run
    shows at most CHILD_ROWS children, then one row saying how many more there are."""
    rows: list[dict[str, Any]] = []
    shown: set[str] = set()

    def add(entry: RunEntry, level: int) -> None:
        if entry.run_id in shown:  # a loop of parent ids in damaged records
            return
        shown.add(entry.run_id)
        row = _row(entry.meta)
        row["indent"] = "  " * level + "└ " if level else ""
        rows.append(row)
        kids = view.children.get(entry.run_id, [])
        kept = kids if all_runs else kids[:CHILD_ROWS]
        for kid in kept:
            add(kid, level + 1)
        if len(kids) > len(kept):
            rows.append({"indent": "  " * (level + 1) + "└ ",
                         "more": f"... and {len(kids) - len(kept)} more (lev ps --all shows them)"})

    for root in view.roots:
        add(root, 0)
    return rows


def _row(meta: dict[str, Any]) -> dict[str, Any]:
    """One run as a ``lev ps --json`` row."""
    flags = meta.get("flags") or {}
    return {
        "run_id": meta.get("run_id", "?"),
        "agent_name": meta.get("agent_name", "?"),
        "title": meta.get("title") if isinstance(meta.get("title"), str) else None,
        "status": meta.get("status", "?"),
        "status_text": status_text(meta) if not meta.get("broken") else f"broken: {meta.get('error')}",
        "current_stage": meta.get("current_stage") or "",
        "iteration": meta.get("iteration", 0),
        "tool_calls": meta.get("tool_calls", 0),
        "cost_usd": meta.get("cost_usd"),
        "tokens": total_tokens(meta),
        "started_at": meta.get("started_at", ""),
        "model": meta.get("model"),
        "workdir": meta.get("workdir"),
        "updated_at": meta.get("updated_at", ""),
        "empty_output": bool(flags.get("empty_output")),
        "has_final_output": bool(meta.get("final_output")),
        "parent_run_id": meta.get("parent_run_id"),
        "waiting_on": meta.get("waiting_on"),
        "warnings": len(told) if isinstance(told := meta.get("warnings"), list) else 0,
    }

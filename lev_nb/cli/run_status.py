"""How a recorded run is described on a terminal: its status text and the ``lev ps`` listing.

Shared by ``lev run`` / ``lev result`` (the status in their messages), ``lev ps`` and ``%lev ps``
(the listing), and the notebook's run display (the status line). The run record itself is read
through :mod:`lev_nb.store`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from lev_nb.store import TERMINAL_STATUSES
from lev_nb.store import list_runs
from lev_nb.store.listing import owner_gone

# A run still "running" whose record has not moved for this long was most likely killed.
ABANDONED_AFTER_S = 300
RECENT_FINISHED = 20
CHILD_ROWS = 10  # children shown under one run (all of them with --all)
# The STATUS column of the table is cut here, so a long error never wraps a row.
STATUS_WIDTH = 60


# How meta.json's waiting_on.reason reads in the STATUS cell (spec/runtime.md §15).
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
        text = f"paused: needs {blocker or 'setup'}" + (f" ({remedy}, then lev resume)" if remedy else " (then lev resume)")
    elif status in ("running", "starting") and _abandoned(meta):
        text = f"{status} (abandoned)"  # killed before it started counts too: lev resume takes both
    elif status == "waiting_input" and owner_gone(meta):
        text = "waiting_input (abandoned)"  # a wait for a person may be long; only a gone owner counts
    elif status == "waiting_input":
        reason = (meta.get("waiting_on") or {}).get("reason", "")
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


def _abandoned(meta: dict[str, Any]) -> bool:
    if owner_gone(meta):
        return True  # its owner process is gone: abandoned at once
    updated = meta.get("updated_at")
    if not isinstance(updated, str):
        return False
    try:
        when = datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (datetime.now(timezone.utc) - when).total_seconds() > ABANDONED_AFTER_S


def print_ps(*, all_runs: bool = False, as_json: bool = False) -> None:
    """Print the recorded runs as ``lev ps`` does: running runs, then finished ones (the newest
    20 unless ``all_runs``), as a table or, with ``as_json``, as one JSON object."""
    metas = list_runs()
    running = [m for m in metas if m.get("status") not in TERMINAL_STATUSES and not m.get("broken")]
    finished = [m for m in metas if m not in running]
    if as_json:
        if not all_runs:
            finished = _recent(finished, metas)
        print(json.dumps({"runs": [_row(m) for m in running], "finished": [_row(m) for m in finished]}, indent=2))
        return
    rows = _tree_rows(running + finished, all_runs)
    if not rows:
        print("no runs yet; start one with `lev run PATH --task ...`")
        return
    header = ("RUN ID", "AGENT", "STATUS", "STAGE", "TURNS", "TOOLS", "COST", "UPDATED")
    table = [header] + [
        (r["indent"] + r["run_id"], r["agent_name"], one_line(r["status_text"]),
         r["current_stage"], str(r["iteration"]), str(r["tool_calls"]), cost_text(r), r["updated_at"])
        if "more" not in r else (r["indent"] + r["more"], "", "", "", "", "", "", "")
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1])


def one_line(text: str, width: int = STATUS_WIDTH) -> str:
    """``text`` on one line (whitespace folded), cut to ``width`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def cost_text(row: dict[str, Any]) -> str:
    """The COST cell: dollars when every call had a price, else the tokens spent and "no price"."""
    cost = row.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"
    tokens = row.get("tokens") or 0
    return f"{tokens} tok (no price)" if tokens else "-"


def _recent(finished: list[dict[str, Any]], metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finished runs ``lev ps`` shows without --all: those whose top-level run (the one a
    person started) is running or among the newest RECENT_FINISHED finished ones, so a large
    fan-out's workers never push other runs out of the list."""
    by_id = {m.get("run_id"): m for m in metas}

    def root(meta: dict[str, Any]) -> Any:
        seen = set()
        while meta.get("parent_run_id") in by_id and meta.get("run_id") not in seen:
            seen.add(meta.get("run_id"))
            meta = by_id[meta["parent_run_id"]]
        return meta.get("run_id")

    top = [m for m in finished if root(m) == m.get("run_id")][:RECENT_FINISHED]
    kept = {m.get("run_id") for m in top} | {
        m.get("run_id") for m in metas if m.get("status") not in TERMINAL_STATUSES and not m.get("broken")}
    return [m for m in finished if root(m) in kept]


def _tree_rows(metas: list[dict[str, Any]], all_runs: bool) -> list[dict[str, Any]]:
    """The table's rows: runs started by a person (running ones first, then the newest
    RECENT_FINISHED finished ones unless ``all_runs``), each followed by the runs it started
    (sub-agents and fan-out workers), indented one step per level. Without ``all_runs`` a run
    shows at most CHILD_ROWS children, then one row saying how many more there are."""
    known = {m.get("run_id") for m in metas}
    children: dict[str, list[dict[str, Any]]] = {}
    roots: list[dict[str, Any]] = []
    for meta in metas:
        parent = meta.get("parent_run_id")
        if parent and parent in known:
            children.setdefault(parent, []).append(meta)
        else:
            roots.append(meta)
    if not all_runs:
        running = [m for m in roots if m.get("status") not in TERMINAL_STATUSES and not m.get("broken")]
        roots = running + [m for m in roots if m not in running][:RECENT_FINISHED]
    rows: list[dict[str, Any]] = []

    def add(meta: dict[str, Any], level: int) -> None:
        row = _row(meta)
        row["indent"] = "  " * level + "└ " if level else ""
        rows.append(row)
        kids = sorted(children.get(row["run_id"], []), key=lambda m: str(m.get("started_at", "")))
        shown = kids if all_runs else kids[:CHILD_ROWS]
        for kid in shown:
            add(kid, level + 1)
        if len(kids) > len(shown):
            rows.append({"indent": "  " * (level + 1) + "└ ",
                         "more": f"... and {len(kids) - len(shown)} more (lev ps --all shows them)"})

    for meta in roots:
        add(meta, 0)
    return rows


_TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")


def _tokens(meta: dict[str, Any]) -> int:
    """Every token the run spent, its workers' included (usage.total), else its own meta counts."""
    usage = meta.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    source = total if isinstance(total, dict) and total else meta
    return sum(v for k in _TOKEN_KEYS if isinstance(v := source.get(k), int) and not isinstance(v, bool))


def _row(meta: dict[str, Any]) -> dict[str, Any]:
    """One run as a ``lev ps --json`` row."""
    flags = meta.get("flags") or {}
    return {
        "run_id": meta.get("run_id", "?"),
        "agent_name": meta.get("agent_name", "?"),
        "status": meta.get("status", "?"),
        "status_text": status_text(meta) if not meta.get("broken") else f"broken: {meta.get('error')}",
        "current_stage": meta.get("current_stage") or "",
        "iteration": meta.get("iteration", 0),
        "tool_calls": meta.get("tool_calls", 0),
        "cost_usd": meta.get("cost_usd"),
        "tokens": _tokens(meta),
        "started_at": meta.get("started_at", ""),
        "updated_at": meta.get("updated_at", ""),
        "empty_output": bool(flags.get("empty_output")),
        "has_final_output": bool(meta.get("final_output")),
        "parent_run_id": meta.get("parent_run_id"),
        "waiting_on": meta.get("waiting_on"),
    }

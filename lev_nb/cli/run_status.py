"""How a recorded run is described on a terminal: its status text and the ``lev ps`` listing.

Shared by ``lev run`` / ``lev result`` (the status in their messages), ``lev ps`` and ``%lev ps``
(the listing), and the notebook's run display (the status line). The run record itself is read
through :mod:`lev_nb.store`.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any

from lev_nb.store import TERMINAL_STATUSES
from lev_nb.store import list_runs

# A run still "running" whose record has not moved for this long was most likely killed.
ABANDONED_AFTER_S = 300
RECENT_FINISHED = 20
# The STATUS column of the table is cut here, so a long error never wraps a row.
STATUS_WIDTH = 60


# How meta.json's waiting_on.reason reads in the STATUS cell (spec/runtime.md §15).
WAIT_LABELS = {"tool_approval": "tool approval", "user_prompt": "user prompt", "interaction_point": "checkpoint"}


def status_text(meta: dict[str, Any]) -> str:
    """The STATUS cell of ``lev ps``: the status, its error, and what the run left behind."""
    status = meta.get("status", "?")
    flags = meta.get("flags") or {}
    if status == "error":
        text = f"error: {meta.get('error') or 'unknown'}"
    elif status == "running" and _abandoned(meta):
        text = "running (abandoned)"
    elif status == "waiting_input" and not owner_alive(meta):
        text = "waiting_input (abandoned)"  # a wait for a person may be long; only a gone owner counts
    elif status == "waiting_input":
        reason = (meta.get("waiting_on") or {}).get("reason", "")
        text = f"waiting: {WAIT_LABELS.get(reason, reason.replace('_', ' ') or 'a person')}"
    else:
        text = status
    if status in TERMINAL_STATUSES and flags.get("empty_output"):
        text += " (no output)"
    if flags.get("splits_degraded"):
        text += " (fan-out empty)"
    return text


def owner_alive(meta: dict[str, Any]) -> bool:
    """Whether the process that owns the run (meta.json's ``pid``) is still there."""
    pid = meta.get("pid")
    return not (isinstance(pid, int) and pid > 0 and not _alive(pid))


def _abandoned(meta: dict[str, Any]) -> bool:
    pid = meta.get("pid")
    if isinstance(pid, int) and pid > 0 and not _alive(pid):
        return True  # its owner process is gone: abandoned at once
    updated = meta.get("updated_at")
    if not isinstance(updated, str):
        return False
    try:
        when = datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (datetime.now(timezone.utc) - when).total_seconds() > ABANDONED_AFTER_S


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True


def print_ps(*, all_runs: bool = False, as_json: bool = False) -> None:
    """Print the recorded runs as ``lev ps`` does: running runs, then finished ones (the newest
    20 unless ``all_runs``), as a table or, with ``as_json``, as one JSON object."""
    metas = list_runs()
    running = [m for m in metas if m.get("status") not in TERMINAL_STATUSES and not m.get("broken")]
    finished = [m for m in metas if m not in running]
    if not all_runs:
        finished = finished[:RECENT_FINISHED]
    if as_json:
        print(json.dumps({"runs": [_row(m) for m in running], "finished": [_row(m) for m in finished]}, indent=2))
        return
    rows = _with_children_under_parents([_row(m) for m in running + finished], metas)
    if not rows:
        print("no runs yet; start one with `lev run PATH --task ...`")
        return
    header = ("RUN ID", "AGENT", "STATUS", "STAGE", "TURNS", "TOOLS", "COST", "UPDATED")
    table = [header] + [
        (("  └ " if r.get("parent_run_id") else "") + r["run_id"], r["agent_name"], one_line(r["status_text"]),
         r["current_stage"], str(r["iteration"]), str(r["tool_calls"]), cost_text(r), r["updated_at"])
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


def _with_children_under_parents(rows: list[dict[str, Any]], metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worker runs listed right under the run that started them (or alone, when it is not shown)."""
    parents = {m.get("run_id"): m.get("parent_run_id") for m in metas}
    shown = {r["run_id"] for r in rows}
    for row in rows:
        parent = parents.get(row["run_id"])
        row["parent_run_id"] = parent if parent in shown else None
    top = [r for r in rows if not r["parent_run_id"]]
    ordered: list[dict[str, Any]] = []
    for row in top:
        ordered.append(row)
        ordered.extend(r for r in rows if r["parent_run_id"] == row["run_id"])
    return ordered


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
        "tokens": sum(int(meta.get(k) or 0) for k in
                      ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")),
        "started_at": meta.get("started_at", ""),
        "updated_at": meta.get("updated_at", ""),
        "empty_output": bool(flags.get("empty_output")),
        "has_final_output": bool(meta.get("final_output")),
        "parent_run_id": meta.get("parent_run_id"),
        "waiting_on": meta.get("waiting_on"),
    }

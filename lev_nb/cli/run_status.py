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
# The STATUS column of the table is cut here, so a long error never wraps a row.
STATUS_WIDTH = 60


def status_text(meta: dict[str, Any]) -> str:
    """The STATUS cell of ``lev ps``: the status, its error, and what the run left behind."""
    status = meta.get("status", "?")
    flags = meta.get("flags") or {}
    if status == "error":
        text = f"error: {meta.get('error') or 'unknown'}"
    elif status == "paused":
        setup = meta.get("needs_setup") or {}
        blocker = setup.get("blocker") if isinstance(setup, dict) else None
        remedy = setup.get("remedy") if isinstance(setup, dict) else None
        text = f"paused: needs {blocker or 'setup'}" + (f" ({remedy}, then lev resume)" if remedy else " (then lev resume)")
    elif status == "running" and _abandoned(meta):
        text = "running (abandoned)"
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
    }

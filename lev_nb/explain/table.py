"""``lev_nb.runs(...)``: the run store as a table, one :class:`RunRow` a recorded run, newest first.

The result is a :class:`RunTable`: a plain list of rows that shows itself as a table (text, and
HTML in a notebook) and becomes a pandas DataFrame with ``to_pandas()`` when pandas is installed.
Filters that need no record (``since``, ``limit``) are applied from the folder names alone, so
asking for the last hour or the newest 50 of 10,000 runs reads only those records.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from lev_nb.explain.fields import as_cost, as_dict, as_int
from lev_nb.explain.story import format_cost, format_elapsed, table_lines
from lev_nb.records import record
from lev_nb.store import TERMINAL_STATUSES
from lev_nb.store.listing import abandoned, read_meta, run_folders, run_seconds

__all__ = ["RunRow", "RunTable", "runs", "total_tokens", "COLUMNS"]

COLUMNS = ("run_id", "status", "agent", "stages", "calls", "tool_calls", "tokens", "cost_usd", "duration_s",
           "started", "parent", "warnings", "abandoned", "error")
SHOWN_ROWS = 30  # rows the text and HTML views show; the rest are counted
_TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")


@record
class RunRow:
    """One recorded run: its id, status (as recorded), agent, the stages it entered in order,
    model calls, tool calls, tokens and cost (its sub-agents' and workers' included; cost None
    when a call had no price), how long it ran (so far, for a live run), when it started, the run
    that started it, how many warnings it recorded, whether it was abandoned (its process gone
    while it ran) and its error."""

    run_id: str
    status: str
    agent: str
    stages: tuple[str, ...]
    calls: int
    tool_calls: int
    tokens: int
    cost_usd: float | None
    duration_s: float | None
    started: datetime | None
    parent: str | None
    warnings: int
    abandoned: bool
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """The row as a dict (``stages`` as its path, "read → check → table", for a table cell)."""
        data = {name: getattr(self, name) for name in COLUMNS}
        data["stages"] = " → ".join(self.stages)
        return data


def total_tokens(meta: dict[str, Any]) -> int:
    """Every token a run spent, its workers' and sub-agents' included (``usage.total``), else its
    own counts in meta.json."""
    usage = meta.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    source = total if isinstance(total, dict) and total else meta
    return sum(v for k in _TOKEN_KEYS if isinstance(v := source.get(k), int) and not isinstance(v, bool))


def _moment(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def row_of(meta: dict[str, Any]) -> RunRow:
    """The table's row for one record (a damaged one reads as status ``broken``)."""
    started = _moment(meta.get("started_at"))
    status = str(meta.get("status") or "?")
    end = _moment(meta.get("updated_at")) if status in TERMINAL_STATUSES or status == "paused" else None
    if started is not None and end is None and status not in TERMINAL_STATUSES:
        end = datetime.now(timezone.utc)
    total = as_dict(as_dict(meta.get("usage")).get("total"))
    warnings = meta.get("warnings")
    parent = meta.get("parent_run_id")
    return RunRow(
        run_id=str(meta.get("run_id") or "?"),
        status=status,
        agent=str(meta.get("agent_name") or "?"),
        stages=tuple(s for s in meta.get("stage_history") or [] if isinstance(s, str)),
        calls=as_int(total.get("calls")) or as_int(meta.get("iteration")),
        tool_calls=as_int(meta.get("tool_calls")),
        tokens=total_tokens(meta),
        cost_usd=as_cost(meta.get("cost_usd")),
        duration_s=max(0.0, (end - started).total_seconds()) if started is not None and end is not None else None,
        started=started,
        parent=parent if isinstance(parent, str) and parent else None,
        warnings=len(warnings) if isinstance(warnings, list) else 0,
        abandoned=abandoned(meta),
        error=str(meta["error"]) if meta.get("error") else None,
    )


class RunTable(list[RunRow]):
    """Recorded runs, newest first: a list of :class:`RunRow` that shows itself as a table."""

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (columns as :data:`COLUMNS`); needs pandas."""
        from lev_nb.frames import data_frame

        return data_frame((row.to_dict() for row in self), COLUMNS)

    def _cells(self, row: RunRow) -> tuple[str, ...]:
        return (row.run_id, row.agent, row.status + (" (abandoned)" if row.abandoned else ""),
                " → ".join(row.stages), str(row.calls), f"{row.tokens:,}", format_cost(row.cost_usd, row.tokens),
                format_elapsed(row.duration_s) if row.duration_s is not None else "-",
                row.started.strftime("%Y-%m-%d %H:%M:%S") if row.started else "-")

    HEADER = ("RUN ID", "AGENT", "STATUS", "STAGES", "CALLS", "TOKENS", "COST", "DURATION", "STARTED (UTC)")

    def __repr__(self) -> str:
        if not self:
            return "no runs match"
        lines = table_lines(self.HEADER, [self._cells(r) for r in self[:SHOWN_ROWS]])
        if len(self) > SHOWN_ROWS:
            lines.append(f"... and {len(self) - SHOWN_ROWS} more ({len(self)} runs; .to_pandas() or a slice shows them)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return repr(self)

    def _repr_html_(self) -> str:
        if not self:
            return "<p>no runs match</p>"
        head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in self.HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>" for c in self._cells(r)) + "</tr>"
            for r in self[:SHOWN_ROWS]
        )
        more = (f"<p>… and {len(self) - SHOWN_ROWS} more ({len(self)} runs; <code>.to_pandas()</code> shows them)</p>"
                if len(self) > SHOWN_ROWS else "")
        return f"<table class='lev-runs'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _since_seconds(since: datetime | timedelta | str | float | None) -> float | None:
    """``since`` as unix seconds: a datetime (naive means UTC), a timedelta back from now, an ISO
    time, or unix seconds."""
    if since is None:
        return None
    if isinstance(since, timedelta):
        return (datetime.now(timezone.utc) - since).timestamp()
    if isinstance(since, str):
        moment = _moment(since)
        if moment is None:
            raise ValueError(f"since={since!r} is not a time; give a datetime, a timedelta or an ISO time "
                             "such as '2026-12-01T09:00'")
        since = moment
    if isinstance(since, datetime):
        return (since if since.tzinfo else since.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        return float(since)
    raise TypeError(f"since must be a datetime, a timedelta, an ISO time or unix seconds, not {type(since).__name__}")


def runs(
    *,
    status: str | Iterable[str] | None = None,
    agent: str | Iterable[str] | None = None,
    since: datetime | timedelta | str | float | None = None,
    limit: int | None = None,
    parent: str | None = None,
    top_level: bool = False,
    home: str | os.PathLike[str] | None = None,
) -> RunTable:
    """The recorded runs under ``$LEV_HOME/runs`` as a :class:`RunTable`, newest first.

    ``status`` and ``agent`` keep the runs with that status / agent (a name or several);
    ``since`` the runs started since then (a datetime, a timedelta such as ``timedelta(hours=1)``,
    an ISO time); ``parent`` the runs that run started (sub-agents and workers); ``top_level``
    only runs a person started; ``limit`` the newest so many that match. ``home`` is another
    LEV_HOME.
    """
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a whole number of runs, 0 or more, got {limit!r}")
    statuses = {status} if isinstance(status, str) else set(status) if status is not None else None
    agents = {agent} if isinstance(agent, str) else set(agent) if agent is not None else None
    after = _since_seconds(since)
    folders: list[tuple[float, Path]] = []
    for folder in run_folders(home):
        seconds = run_seconds(folder)
        if after is None or seconds >= after:
            folders.append((seconds, folder))
    folders.sort(key=lambda pair: (pair[0], pair[1].name), reverse=True)
    table = RunTable()
    for _, folder in folders:
        if limit is not None and len(table) >= limit:
            break
        try:
            text = (folder / "meta.json").read_bytes()
        except OSError:
            text = b""
        # Cheap refusals before the record is parsed: a filtered listing of a large store parses
        # only what it may keep.
        if statuses is not None and not any(f'"status": "{s}"'.encode() in text for s in statuses) \
                and "broken" not in statuses:
            continue
        if agents is not None and not any(json.dumps(a).encode() in text for a in agents):
            continue
        meta = read_meta(folder, text.decode("utf-8", errors="replace") if text else None)
        if statuses is not None and meta.get("status") not in statuses:
            continue
        if agents is not None and meta.get("agent_name") not in agents:
            continue
        parent_id = meta.get("parent_run_id")
        if top_level and parent_id:
            continue
        if parent is not None and parent_id != parent:
            continue
        table.append(row_of(meta))
    return table

"""``lev_nb.runs(...)``: the run store as a table, one :class:`RunRow` a recorded run, newest first.

The result is a :class:`RunTable`: a plain list of rows that shows itself as a table (text, and
HTML in a notebook) and becomes a pandas DataFrame with ``to_pandas()`` when pandas is installed.
Filters that need no record (``since``, ``limit``) are applied from the folder names alone, so
asking for the last hour or the newest 50 of 10,000 runs reads only those records; a record read
once is not parsed again while its meta.json is unchanged (bench/bench_runs.py measures both).
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from lev_nb.explain.fields import as_cost, as_dict, as_int
from lev_nb.explain.story import format_cost, format_elapsed, table_lines
from lev_nb.records import record
from lev_nb.store import META, TERMINAL_STATUSES, parse_stamp
from lev_nb.store.listing import OWNED_STATUSES, abandoned, pid_alive, read_meta, run_folder_paths, run_seconds

__all__ = ["RunRow", "RunTable", "runs", "forget", "total_tokens", "COLUMNS"]

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


def _span(meta: dict[str, Any], gone: bool) -> tuple[datetime | None, datetime | None]:
    """When the run started, and when it stopped: its last record, for a finished or paused run
    or one whose process is ``gone``; now, for a run still going."""
    started = parse_stamp(meta.get("started_at"))
    status = meta.get("status")
    if gone or status in TERMINAL_STATUSES or status == "paused":
        return started, parse_stamp(meta.get("updated_at"))
    return started, datetime.now(timezone.utc)


def _owner_dead(meta: dict[str, Any], alive: dict[int, bool]) -> bool:
    """Whether a run that needs its process has lost it (``alive`` remembers pids already looked at)."""
    pid = meta.get("pid")
    return (meta.get("status") in OWNED_STATUSES and isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
            and not alive.setdefault(pid, pid_alive(pid)))


def _duration(started: datetime | None, end: datetime | None) -> float | None:
    return max(0.0, (end - started).total_seconds()) if started is not None and end is not None else None


def row_of(meta: dict[str, Any], alive: dict[int, bool] | None = None) -> RunRow:
    """The table's row for one record (a damaged one reads as status ``broken``); ``alive``
    remembers, across the rows of one listing, which owner pids were found alive."""
    gone = _owner_dead(meta, {} if alive is None else alive)
    started, end = _span(meta, gone)
    status = str(meta.get("status") or "?")
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
        duration_s=_duration(started, end),
        started=started,
        parent=parent if isinstance(parent, str) and parent else None,
        warnings=len(warnings) if isinstance(warnings, list) else 0,
        abandoned=gone or abandoned(meta),
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
        import html  # only for a notebook's view: a terminal's `lev run` need not import it

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
        moment = parse_stamp(since)
        if moment is None:
            raise ValueError(f"since={since!r} is not a time; give a datetime, a timedelta or an ISO time "
                             "such as '2026-12-01T09:00'")
        since = moment
    if isinstance(since, datetime):
        return (since if since.tzinfo else since.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        return float(since)
    raise TypeError(f"since must be a datetime, a timedelta, an ISO time or unix seconds, not {type(since).__name__}")


class _Cache:
    """The rows already built, by meta.json path, with the file's (inode, mtime, size) when read:
    a record that has not changed is not read or parsed again (a finished run's never changes).
    For a run not finished, the fields that time alone changes (abandoned, duration) are worked
    out again from the few kept in ``live``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[tuple[int, int, int], RunRow, dict[str, Any] | None]] = {}

    def forget(self) -> None:
        """Drop every row kept."""
        with self._lock:
            self._rows.clear()

    def row(self, folder: str, wanted: Callable[[bytes], bool], alive: dict[int, bool]) -> RunRow | None:
        """The row of the run in ``folder``; None when its record is new or changed and ``wanted``
        says, from its bytes, that it cannot match (it is then neither parsed nor kept).
        ``alive`` remembers, for one listing, which owner pids were found alive."""
        path = os.path.join(folder, META)
        try:
            st = os.stat(path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = (0, 0, 0)
        with self._lock:
            hit = self._rows.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1] if hit[2] is None else _refreshed(hit[1], hit[2], alive)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            data = b""
        if data and not wanted(data):
            return None
        meta = _parsed(folder, data)
        row = row_of(meta, alive)
        # A finished run's row, or one whose process is gone, changes only with its record.
        live = None if row.status in TERMINAL_STATUSES or meta.get("broken") or _owner_dead(meta, alive) else {
            k: meta.get(k) for k in ("status", "pid", "updated_at", "started_at")}
        with self._lock:
            self._rows[path] = (stamp, row, live)
        return row


def _parsed(folder: str, data: bytes) -> dict[str, Any]:
    """The record ``data`` (meta.json's bytes) as a dict; anything but a well-formed record goes
    through :func:`~lev_nb.store.listing.read_meta`, which says how it is broken."""
    try:
        meta = json.loads(data)
    except ValueError:
        meta = None
    if isinstance(meta, dict) and isinstance(meta.get("status", ""), str):
        meta.setdefault("run_id", os.path.basename(folder))
        return meta
    return read_meta(Path(folder), data.decode("utf-8", errors="replace") if data else None)


def _refreshed(row: RunRow, live: dict[str, Any], alive: dict[int, bool]) -> RunRow:
    """``row`` of a run not finished, with what time changes worked out again (see row_of)."""
    gone = _owner_dead(live, alive)
    return dataclasses.replace(row, abandoned=gone or abandoned(live), duration_s=_duration(*_span(live, gone)))


_CACHE = _Cache()


def forget() -> None:
    """Drop the rows :func:`runs` keeps between calls (the next call reads every record again)."""
    _CACHE.forget()


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
    folders: list[tuple[float, str]] = []
    for folder in run_folder_paths(home):
        seconds = run_seconds(folder)
        if after is None or seconds >= after:
            folders.append((seconds, folder))
    folders.sort(reverse=True)

    def wanted(data: bytes) -> bool:
        # Cheap refusals before a record is parsed: a filtered listing parses only what it may keep.
        if statuses is not None and "broken" not in statuses \
                and not any(f'"status": "{s}"'.encode() in data for s in statuses):
            return False
        return agents is None or any(json.dumps(a).encode() in data for a in agents)

    table = RunTable()
    alive: dict[int, bool] = {}
    for _, folder in folders:
        if limit is not None and len(table) >= limit:
            break
        row = _CACHE.row(folder, wanted, alive)
        if row is None:
            continue
        if statuses is not None and row.status not in statuses:
            continue
        if agents is not None and row.agent not in agents:
            continue
        if (top_level and row.parent) or (parent is not None and row.parent != parent):
            continue
        table.append(row)
    return table

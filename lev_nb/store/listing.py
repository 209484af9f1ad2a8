"""Reading every run's record for ``lev ps`` and ``lev result``: listing, and finding a run by id prefix.

Records are read as plain dicts: a folder may hold a record from another version, or one cut short
by a crash, and a listing must show it rather than stop.

A store may hold tens of thousands of runs, most of them long finished or abandoned. :func:`scan_runs`
orders folders by the time in their id (docs/runs.md#the-run-record: ``<agent>-<unix seconds>-<hex>``) and
classifies each from a peek at its meta.json (status, owner pid, parent), parsing a record in full
only when the peek cannot decide or a caller asks for the record (:attr:`RunEntry.meta`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lev_nb.records import record
from lev_nb.store.files import META, RunStore, runs_dir
from lev_nb.store.meta import TERMINAL_STATUSES, parse_stamp

__all__ = ["list_runs", "scan_runs", "run_folder_paths", "run_seconds", "read_meta", "RunEntry", "find_run", "RunNotFound", "pid_alive", "owner_gone",
           "abandoned", "ABANDONED_AFTER_S"]

# A run still "running" whose record has not moved for this long was most likely killed.
ABANDONED_AFTER_S = 300
# Statuses that need a live owner process; a record left in one of them by a dead one is abandoned.
# ("paused" has no owner by design: it waits for `lev resume`.)
OWNED_STATUSES = frozenset({"running", "starting", "waiting_input"})


class RunNotFound(LookupError):
    """No run (or more than one) matches an id prefix; the message says which."""



def pid_alive(pid: int) -> bool:
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


def owner_gone(meta: dict[str, Any]) -> bool:
    """True when the process meta.json names as the run's owner (``pid``) no longer exists: a run
    still ``running`` then was killed or crashed. False when the record names no pid."""
    pid = meta.get("pid")
    return isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and not pid_alive(pid)


def abandoned(meta: dict[str, Any]) -> bool:
    """Whether a run that is not finished was left behind: its owner process is gone (for
    ``running``, ``starting`` and ``waiting_input``), or a ``running``/``starting`` record has not
    moved for ABANDONED_AFTER_S seconds (a wait for a person may be long, so only a gone owner
    counts for ``waiting_input``)."""
    status = meta.get("status")
    if status not in OWNED_STATUSES:
        return False
    if owner_gone(meta):
        return True
    if status == "waiting_input":
        return False
    when = parse_stamp(meta.get("updated_at"))
    if when is None:
        return False
    return (datetime.now(timezone.utc) - when).total_seconds() > ABANDONED_AFTER_S


def _sort_key(entry: dict[str, Any], folder: Path) -> float:
    """When the run started, as unix seconds (the folder's mtime if meta.json does not say)."""
    started = parse_stamp(entry.get("started_at"))
    if started is not None:
        return started.timestamp()
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


def list_runs(home: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every run's meta, newest first.

    A run whose meta.json is missing or does not parse appears as ``{"run_id", "status": "broken",
    "broken": True, "error"}`` rather than stopping the listing.
    """
    found: list[tuple[float, dict[str, Any]]] = []
    for folder in _folders(home):
        meta = read_meta(folder)
        found.append((_sort_key(meta, folder), meta))
    found.sort(key=lambda pair: (pair[0], pair[1].get("run_id", "")), reverse=True)
    return [meta for _, meta in found]


def _folders(home: str | os.PathLike[str] | None) -> list[Path]:
    """The run folders under ``home`` (hidden ones left out)."""
    base = runs_dir(home)
    if not base.is_dir():
        return []
    with os.scandir(base) as it:
        return [Path(e.path) for e in it if not e.name.startswith(".") and e.is_dir()]


def read_meta(folder: Path, text: str | None = None) -> dict[str, Any]:
    """The record in ``folder`` as a dict (``text``: its meta.json, when already read); a missing
    or unreadable one as ``{"run_id", "status": "broken", "broken": True, "error"}``."""
    path = folder / META
    try:
        meta = json.loads(path.read_text(encoding="utf-8") if text is None else text)
        if not isinstance(meta, dict):
            raise ValueError("the top level is not an object")
        if not isinstance(meta.get("status", ""), str):
            raise ValueError("its status is not a string")
        meta.setdefault("run_id", folder.name)
    except FileNotFoundError:
        meta = {"run_id": folder.name, "status": "broken", "broken": True, "error": f"{path}: missing"}
    except (OSError, ValueError) as exc:
        meta = {"run_id": folder.name, "status": "broken", "broken": True, "error": f"{path}: {exc}"}
    return meta


# A run id ends in "-<unix seconds>-<12 hex>" (meta.new_run_id): the time it started.
_ID_SECONDS = re.compile(r"-(\d{1,12})-[0-9a-f]{12}$")
# The first occurrence of a key in meta.json is the top-level one: RunStore writes run_id, agent_name,
# agent_path, task, model, pid, status in that order, and a quote inside a string value is escaped.
_PEEK_STATUS = re.compile(r'"status": "([a-z_]+)"')
_PEEK_PID = re.compile(r'"pid": (\d+)[,\n}]')
_PEEK_PARENT = re.compile(r'"parent_run_id": (?:null|"([^"\\]*)")')


def run_seconds(folder: str | os.PathLike[str]) -> float:
    """When the run in ``folder`` started, as unix seconds: the time in its id, else the folder's
    mtime (0 when even that cannot be read)."""
    stamp = _ID_SECONDS.search(os.path.basename(folder))
    if stamp:
        return float(stamp.group(1))
    try:
        return os.stat(folder).st_mtime
    except OSError:
        return 0.0


def run_folder_paths(home: str | os.PathLike[str] | None = None) -> list[str]:
    """The path of every run folder under ``home`` (hidden ones left out), in no particular order;
    plain strings, since a listing of ten thousand runs should not build ten thousand Paths."""
    base = runs_dir(home)
    try:
        with os.scandir(base) as it:
            return [e.path for e in it if not e.name.startswith(".") and e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []


@record(frozen=False)
class RunEntry:
    """One run folder as a listing sees it, classified without (always) parsing its record.

    ``state`` is ``"live"`` (not finished, its owner alive or unknown; ``paused`` too), ``"abandoned"``
    (see :func:`abandoned`) or ``"finished"`` (a terminal status, or a broken record).
    """

    run_id: str
    folder: Path
    seconds: float
    status: str
    parent: str | None
    state: str
    _meta: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def meta(self) -> dict[str, Any]:
        """The whole record (read and parsed on first use)."""
        if self._meta is None:
            self._meta = read_meta(self.folder)
        return self._meta


def scan_runs(home: str | os.PathLike[str] | None = None) -> list[RunEntry]:
    """Every run folder as a :class:`RunEntry`, newest first by the time in its id (the folder's
    mtime for an id without one).

    Each meta.json is read once; a record is parsed only when a peek cannot classify it: a
    finished run needs only its status and parent, an abandoned one only a dead owner pid (checked
    once per pid). A live run, or one whose owner is alive, is parsed to apply :func:`abandoned`.
    """
    alive: dict[int, bool] = {}
    entries: list[RunEntry] = []
    for folder in _folders(home):
        name = folder.name
        seconds = run_seconds(folder)
        try:
            text: str | None = (folder / META).read_text(encoding="utf-8")
        except (OSError, ValueError):
            text = None
        peeked = _PEEK_STATUS.search(text) if text is not None else None
        meta: dict[str, Any] | None = None
        if peeked is None or (text or "").count('"parent_run_id"') > 1:  # also a key in nested data: parse
            meta = read_meta(folder, text)
            status = meta.get("status", "?")
            parent = meta.get("parent_run_id")
        else:
            status = peeked.group(1)
            found = _PEEK_PARENT.search(text or "")
            parent = found.group(1) if found else None
        if (meta is not None and meta.get("broken")) or status in TERMINAL_STATUSES:
            state = "finished"
        elif status not in OWNED_STATUSES:
            state = "live"
        else:
            pid_found = _PEEK_PID.search(text or "") if meta is None else None
            pid = int(pid_found.group(1)) if pid_found else 0
            if pid > 0 and not alive.setdefault(pid, pid_alive(pid)):
                state = "abandoned"
            else:
                if meta is None:
                    meta = read_meta(folder, text)
                state = "finished" if meta.get("broken") else "abandoned" if abandoned(meta) else "live"
        entries.append(RunEntry(str((meta or {}).get("run_id") or name), folder, seconds, str(status),
                                parent if isinstance(parent, str) and parent else None, state, meta))
    entries.sort(key=lambda e: (e.seconds, e.run_id), reverse=True)
    return entries


def find_run(prefix: str, home: str | os.PathLike[str] | None = None) -> RunStore:
    """The run whose id is ``prefix`` or starts with it; RunNotFound if none or several match."""
    base = runs_dir(home)
    if prefix and (base / prefix).is_dir():
        return RunStore(prefix, home)
    matches = sorted(p.name for p in base.iterdir() if p.is_dir() and p.name.startswith(prefix)) if base.is_dir() and prefix else []
    if not matches:
        raise RunNotFound(f"no run id starts with '{prefix}' in {base}; `lev ps --all` lists them")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (" ..." if len(matches) > 5 else "")
        raise RunNotFound(f"'{prefix}' matches {len(matches)} runs ({shown}); give more of the id")
    return RunStore(matches[0], home)

"""Reading every run's record for ``lev ps`` and ``lev result``: listing, and finding a run by id prefix.

Records are read as plain dicts: a folder may hold a record from another version, or one cut short
by a crash, and a listing must show it rather than stop.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from lev_nb.store.files import META, RunStore, runs_dir

__all__ = ["list_runs", "find_run", "RunNotFound", "pid_alive", "owner_gone"]


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


def _sort_key(entry: dict[str, Any], folder: Path) -> float:
    """When the run started, as unix seconds (the folder's mtime if meta.json does not say)."""
    started = entry.get("started_at")
    if isinstance(started, str):
        try:
            return datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


def list_runs(home: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every run's meta, newest first.

    A run whose meta.json is missing or does not parse appears as ``{"run_id", "status": "broken",
    "broken": True, "error"}`` rather than stopping the listing.
    """
    base = runs_dir(home)
    if not base.is_dir():
        return []
    found: list[tuple[float, dict[str, Any]]] = []
    for folder in base.iterdir():
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        path = folder / META
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("the top level is not an object")
            if not isinstance(meta.get("status", ""), str):
                raise ValueError("its status is not a string")
            meta.setdefault("run_id", folder.name)
        except FileNotFoundError:
            meta = {"run_id": folder.name, "status": "broken", "broken": True, "error": f"{path}: missing"}
        except (OSError, ValueError) as exc:
            meta = {"run_id": folder.name, "status": "broken", "broken": True, "error": f"{path}: {exc}"}
        found.append((_sort_key(meta, folder), meta))
    found.sort(key=lambda pair: (pair[0], pair[1].get("run_id", "")), reverse=True)
    return [meta for _, meta in found]


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

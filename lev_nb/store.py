"""The run record on disk: ``$LEV_HOME/runs/<run_id>/`` with meta.json, events.jsonl, final_output
and transcript.jsonl.

meta.json and final_output are replaced atomically (temporary file in the same folder, fsync,
rename), so a crash mid-write leaves the previous version readable. The JSONL files are append-only,
one object per line; a torn last line (a crash mid-append) is skipped when reading.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "RunStore",
    "lev_home",
    "runs_dir",
    "new_run_id",
    "new_meta",
    "new_flags",
    "utc_now",
    "list_runs",
    "find_run",
    "RunNotFound",
    "META",
    "EVENTS",
    "TRANSCRIPT",
    "FINAL_OUTPUT",
]

META = "meta.json"
EVENTS = "events.jsonl"
TRANSCRIPT = "transcript.jsonl"
FINAL_OUTPUT = "final_output"


class RunNotFound(LookupError):
    """No run (or more than one) matches an id prefix; the message says which."""


def lev_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The lev_nb home: ``home`` if given, else ``$LEV_HOME``, else ``~/.lev`` (read at call time)."""
    if home is not None:
        return Path(home)
    env = os.environ.get("LEV_HOME")
    return Path(env) if env else Path.home() / ".lev"


def runs_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding one subfolder per run."""
    return lev_home(home) / "runs"


def utc_now() -> str:
    """The current time as an RFC 3339 UTC timestamp with milliseconds (``...Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_run_id(agent_name: str, now: float | None = None) -> str:
    """``<agent name, other than [A-Za-z0-9-] -> '-'>-<unix seconds>-<12 hex>``."""
    safe = re.sub(r"[^A-Za-z0-9-]", "-", agent_name) or "agent"
    secs = int(time.time() if now is None else now)
    return f"{safe}-{secs}-{secrets.token_hex(6)}"


def new_flags() -> dict[str, Any]:
    """The run flags with their starting values."""
    return {
        "modified_files": [],
        "modified_file_count": 0,
        "empty_output": False,
        "no_output_tools": False,
        "searches_run": 0,
        "searches_empty": 0,
        "max_iterations_hit": 0,
        "gates_forced": 0,
        "required_regions_abandoned": [],
        "workspace_lost": False,
        "produced_output": False,
        "output_forced": 0,
        "splits_degraded": 0,
    }


def new_meta(
    run_id: str,
    agent_name: str,
    task: str,
    *,
    agent_path: str = "",
    model: str = "",
    workdir: str = "",
    num_stages: int = 0,
    current_stage: str = "",
    parent_run_id: str | None = None,
    depth: int = 0,
    metadata: dict[str, Any] | None = None,
    output_request: dict[str, Any] | None = None,
    status: str = "starting",
) -> dict[str, Any]:
    """A complete meta.json for a run that is about to start (every upstream field, plus stage_history)."""
    now = utc_now()
    return {
        "run_id": run_id,
        "agent_name": agent_name,
        "agent_path": agent_path,
        "task": task,
        "model": model,
        "pid": 0,
        "status": status,
        "current_stage": current_stage,
        "stage_index": 0,
        "num_stages": num_stages,
        "iteration": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "tool_calls": 0,
        "workdir": workdir,
        "started_at": now,
        "updated_at": now,
        "last_progress_at": now,
        "error": None,
        "metadata": dict(metadata or {}),
        "parent_run_id": parent_run_id,
        "children": [],
        "depth": depth,
        "flags": new_flags(),
        "final_output": None,
        "output_request": output_request,
        "stage_history": [],
    }


def _write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new content, never a mix.

    The rename alone protects against a crashed process; ``durable`` adds an fsync, which also
    protects against a crashed machine but costs about a millisecond, so frequent progress writes
    skip it and the final write of a run keeps it. Callers serialise writes to the same path.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of ``path``; a torn or corrupt line is skipped."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


class RunStore:
    """One run's folder. Methods are safe to call from several threads."""

    def __init__(self, run_id: str, home: str | os.PathLike[str] | None = None) -> None:
        if not run_id or "/" in run_id or run_id in (".", ".."):
            raise ValueError(f"'{run_id}' is not a run id")
        self.run_id = run_id
        self.run_dir = runs_dir(home) / run_id
        self._lock = threading.Lock()

    @property
    def dir(self) -> Path:
        """Short name for :attr:`run_dir`."""
        return self.run_dir

    def ensure(self) -> Path:
        """Create the run folder (owner-only) if needed and return it."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.dir

    def write_meta(self, meta: dict[str, Any], durable: bool = True) -> None:
        """Replace meta.json atomically (``durable=False`` skips the fsync; see _write_atomic)."""
        data = json.dumps(meta, indent=2, ensure_ascii=False, default=str).encode("utf-8")
        self.ensure()
        with self._lock:
            _write_atomic(self.dir / META, data, durable)

    def read_meta(self) -> dict[str, Any]:
        """The current meta.json (raises FileNotFoundError / ValueError if missing or unreadable)."""
        return json.loads((self.dir / META).read_text(encoding="utf-8"))

    def _append(self, name: str, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        self.ensure()
        with self._lock:
            fd = os.open(self.dir / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)  # one write per line, so lines never interleave
            finally:
                os.close(fd)

    def append_event(self, event: dict[str, Any]) -> None:
        """Append one event as a line of events.jsonl."""
        self._append(EVENTS, event)

    def append_transcript(self, entry: dict[str, Any]) -> None:
        """Append one transcript entry as a line of transcript.jsonl."""
        self._append(TRANSCRIPT, entry)

    def read_events(self) -> list[dict[str, Any]]:
        """Every event recorded so far, in order."""
        return _read_jsonl(self.dir / EVENTS)

    def read_transcript(self) -> list[dict[str, Any]]:
        """Every transcript entry recorded so far, in order."""
        return _read_jsonl(self.dir / TRANSCRIPT)

    def write_final_output(self, content: bytes | str) -> None:
        """Replace the final_output file atomically with the answer's raw bytes."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        self.ensure()
        with self._lock:
            _write_atomic(self.dir / FINAL_OUTPUT, data)

    def read_final_output(self) -> bytes | None:
        """The answer's raw bytes, or None if the run submitted none."""
        try:
            return (self.dir / FINAL_OUTPUT).read_bytes()
        except FileNotFoundError:
            return None


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

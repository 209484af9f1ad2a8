"""Keeping the run record (meta.json, events.jsonl, transcript.jsonl) in step with the run."""

from __future__ import annotations

import time
from typing import Any

from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.events import Event


class Recorder:
    """Writes every event to the log and to disk, and meta.json whenever the run moves."""

    def __init__(self, store: Any, meta: dict[str, Any], events: EventLog) -> None:
        self.store = store
        self.meta = meta
        self.events = events

    def emit(self, event: Event) -> None:
        """Record ``event`` on disk, then hand it to live readers."""
        try:
            self.store.append_event(event.to_dict())
        except OSError:
            pass  # a full disk must not kill the run; meta.json still says where it is
        self.events.append(event)

    def save(self, progressed: bool = True) -> None:
        """Write meta.json atomically with a fresh ``updated_at``."""
        now = _iso_now()
        self.meta["updated_at"] = now
        if progressed:
            self.meta["last_progress_at"] = now
        self.store.write_meta(self.meta)

    def transcript(self, entry: dict[str, Any]) -> None:
        """Append one model exchange to transcript.jsonl."""
        try:
            self.store.append_transcript(entry)
        except OSError:
            pass


def _iso_now() -> str:
    from lev_nb.engine.outputs import now_iso

    return now_iso()


def monotonic() -> float:
    """Seconds on a monotonic clock (patched in tests of time-based thresholds)."""
    return time.monotonic()

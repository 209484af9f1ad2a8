"""Keeping the run record (meta.json, events.jsonl, transcript.jsonl) in step with the run
(spec/runtime.md §9); the files themselves belong to :mod:`lev_nb.store`."""

from __future__ import annotations

import time
from typing import Any


from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.events import Event
from lev_nb.store import EVENTS, TRANSCRIPT, RunMeta, RunStore, encode_line, encode_meta
from lev_nb.store.writer import record_writer


# Progress writes closer together than this are coalesced; stage changes and the end of a run
# are always written at once.
SAVE_INTERVAL_S = 0.25


class Recorder:
    """Writes every event to the log and to disk, and meta.json whenever the run moves."""

    def __init__(self, store: RunStore, meta: RunMeta, events: EventLog) -> None:
        self.store = store
        self.meta = meta
        self.events = events
        self.writer = record_writer()
        self._last_save = float("-inf")
        self._dirty = False

    def emit(self, event: Event) -> None:
        """Queue ``event`` for events.jsonl, then hand it to live readers."""
        self.writer.append(self.store, EVENTS, encode_line(event.to_dict()))
        self.events.append(event)

    def save(self, force: bool = False, final: bool = False) -> None:
        """Write meta.json atomically with a fresh ``updated_at``.

        Without ``force`` a write that comes within SAVE_INTERVAL_S of the previous one is
        deferred to the next save; ``final`` also fsyncs, for the run's last word.
        """
        self._dirty = True
        clock = time.monotonic()
        if not (force or final) and clock - self._last_save < SAVE_INTERVAL_S:
            return
        self.meta.touch()
        self.writer.write_meta(self.store, encode_meta(self.meta.to_dict()), durable=final)
        self._last_save = clock
        self._dirty = False

    def transcript(self, entry: dict[str, Any]) -> None:
        """Queue one model exchange for transcript.jsonl."""
        self.writer.append(self.store, TRANSCRIPT, encode_line(entry))

    async def flushed(self) -> None:
        """Wait until everything recorded so far is on disk."""
        import asyncio

        await asyncio.wrap_future(self.writer.flush())

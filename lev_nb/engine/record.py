"""Keeping the run record (meta.json, events.jsonl, transcript.jsonl) in step with the run
(spec/runtime.md §9); the files themselves belong to :mod:`lev_nb.store`."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any


from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.events import Event, text_field_names
from lev_nb.secrets import REDACTED, configured_secrets, redact
from lev_nb.store import EVENTS, TRANSCRIPT, RunMeta, RunStore, encode_line, encode_meta
from lev_nb.store.writer import record_writer


# Progress writes closer together than this are coalesced; stage changes and the end of a run
# are always written at once.
SAVE_INTERVAL_S = 0.25


class Recorder:
    """Writes every event to the log and to disk, and meta.json whenever the run moves.

    Any text that echoes a configured secret (an API key's value in this process's environment
    when the run started: a server quoting the request headers in an error body) is redacted here,
    before it reaches meta.json, events.jsonl, transcript.jsonl or a live reader.
    """

    def __init__(self, store: RunStore, meta: RunMeta, events: EventLog) -> None:
        self.store = store
        self.meta = meta
        self.events = events
        self.writer = record_writer()
        self._last_save = float("-inf")
        self._dirty = False
        self.secrets = configured_secrets()
        self._secret_bytes = tuple((s.encode("utf-8"), REDACTED.encode("utf-8")) for s in self.secrets)
        # Whether every secret is written by JSON as itself (no quote, backslash or control character).
        self._json_plain = all(json.dumps(s, ensure_ascii=False)[1:-1] == s for s in self.secrets)

    def _scrub(self, data: bytes) -> bytes:
        for secret, mark in self._secret_bytes:
            if secret in data:
                data = data.replace(secret, mark)
        return data

    def _scrub_event(self, event: Event) -> Event:
        changed: dict[str, Any] = {
            name: redact(value, self.secrets)
            for name in text_field_names(type(event))
            if isinstance(value := getattr(event, name), str) and any(s in value for s in self.secrets)
        }
        return dataclasses.replace(event, **changed) if changed else event

    def emit(self, event: Event) -> None:
        """Queue ``event`` for events.jsonl, then hand it to live readers."""
        line = encode_line(event.to_dict())
        # A secret JSON writes as itself shows in the line iff it shows in a field: then only an
        # event whose line holds one is rebuilt (redaction was a per-field scan of every event).
        if self.secrets and (not self._json_plain or any(secret in line for secret, _ in self._secret_bytes)):
            event = self._scrub_event(event)
            line = self._scrub(encode_line(event.to_dict()))
        self.writer.append(self.store, EVENTS, line)
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
        if self.secrets and self.meta.error:
            self.meta.error = redact(self.meta.error, self.secrets)  # what run.error shows, too
        data = self._scrub(encode_meta(self.meta.to_dict(shared=True)))
        self.writer.write_meta(self.store, data, durable=final)
        self._last_save = clock
        self._dirty = False

    def transcript(self, entry: dict[str, Any]) -> None:
        """Queue one model exchange for transcript.jsonl."""
        self.writer.append(self.store, TRANSCRIPT, self._scrub(encode_line(entry)))

    async def flushed(self) -> None:
        """Wait until everything recorded so far is on disk."""
        import asyncio

        await asyncio.wrap_future(self.writer.flush())

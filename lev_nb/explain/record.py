"""Reading one recorded run from its folder, as it is now: its meta.json, its events (typed, for
the story), its transcript, its answer, and the events still to come (``lev log --follow``).

The run may be live in another process, which appends to events.jsonl as it goes: a last line
without its newline yet is left for the next read, never parsed half-written. A record from
another version may hold event kinds this one does not know: they are kept as raw lines and left
out of the typed list.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lev_nb.engine.events import Event, event_from_dict
from lev_nb.explain.fold import RunState
from lev_nb.store import EVENTS, TERMINAL_STATUSES, RunNotFound, RunStore, find_run
from lev_nb.store.listing import owner_gone

__all__ = ["RunRecord", "RecordUnreadable", "open_run", "typed_events", "follow_lines", "events_path", "FOLLOW_POLL_S"]

FOLLOW_POLL_S = 0.2  # how often `lev log --follow` looks for new lines


class RecordUnreadable(LookupError):
    """No run has that id (or a prefix matches several), or its meta.json cannot be read; the
    message says which and what to do."""


def open_run(run_id: str, home: str | os.PathLike[str] | None = None) -> RunRecord:
    """The recorded run whose id is ``run_id`` or starts with it (as ``lev result`` finds it).
    Raises :class:`RecordUnreadable` with one clear line."""
    try:
        store = find_run(run_id, home)
    except (RunNotFound, ValueError) as exc:  # ValueError: not a run id at all ("..")
        raise RecordUnreadable(str(exc)) from None
    record = RunRecord(store)
    record.meta  # noqa: B018  (read now, so a damaged record is refused here, once)
    return record


def typed_events(lines: list[dict[str, Any]]) -> list[Event]:
    """The events of ``lines`` (events.jsonl objects) this version knows, in order."""
    events: list[Event] = []
    for data in lines:
        try:
            events.append(event_from_dict(data))
        except (KeyError, TypeError, ValueError):
            continue  # a kind of another version, or a damaged line
    return events


class RunRecord:
    """One run's folder, read (see the module docstring). ``meta`` is read once; ``reload()``
    reads it again."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._meta: dict[str, Any] | None = None

    @property
    def run_id(self) -> str:
        """The run's id (its folder's name)."""
        return self.store.run_id

    @property
    def meta(self) -> dict[str, Any]:
        """meta.json as a dict; raises :class:`RecordUnreadable` when it cannot be read."""
        if self._meta is None:
            self._meta = self._read_meta()
        return self._meta

    def reload(self) -> dict[str, Any]:
        """Read meta.json again (the run may have moved) and return it."""
        self._meta = None
        return self.meta

    def _read_meta(self) -> dict[str, Any]:
        try:
            meta = self.store.read_meta()
        except (OSError, ValueError) as exc:
            raise RecordUnreadable(
                f"the record of run '{self.run_id}' cannot be read ({exc}); it may still be starting, "
                "or its meta.json is damaged"
            ) from None
        if not isinstance(meta, dict):
            raise RecordUnreadable(f"the record of run '{self.run_id}' is not a JSON object")
        return meta

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """meta.json's ``warnings`` (code, message, stage, at), oldest first; an older record
        without the key has none."""
        found = self.meta.get("warnings")
        return [w for w in found if isinstance(w, dict)] if isinstance(found, list) else []

    def raw_events(self) -> list[dict[str, Any]]:
        """Every complete line of events.jsonl, as written."""
        return self.store.read_events()

    def events(self) -> list[Event]:
        """The run's events as typed events (see :func:`typed_events`)."""
        return typed_events(self.raw_events())

    def transcript(self) -> list[dict[str, Any]]:
        """Every complete line of transcript.jsonl (one a model call)."""
        return self.store.read_transcript()

    def answer(self) -> str | None:
        """The final output's text, or None when the run submitted none."""
        if not self.meta.get("final_output"):
            return None
        raw = self.store.read_final_output()
        return raw.decode("utf-8", errors="replace") if raw is not None else None

    def story(self, stages: list[str] | None = None, events: list[Event] | None = None) -> RunState:
        """The run's story folded from its events (``events``, when already read), as the
        notebook's run view tells it, with its answer; ``stages`` names the blueprint's stages
        (default: the ones it entered)."""
        state = RunState(self.run_id, list(stages or []))
        for event in self.events() if events is None else events:
            state.apply(event)
        descriptor = self.meta.get("final_output")
        content = self.answer()
        if isinstance(descriptor, dict) and content is not None:
            state.set_output(_Answer(content, descriptor))
        if state.status == "starting" and self.meta.get("status"):
            state.status = str(self.meta["status"])
        return state

    def finished(self) -> bool:
        """Whether the run will write no more events: a terminal or paused status, or a live
        status whose owning process is gone (abandoned). Reads meta.json again."""
        meta = self.reload()
        status = meta.get("status")
        return status in TERMINAL_STATUSES or status == "paused" or owner_gone(meta)


class _Answer:
    """A final output as :meth:`RunState.set_output` takes it, from the record's descriptor."""

    def __init__(self, content: str, descriptor: dict[str, Any]) -> None:
        self.content = content
        self.format = descriptor.get("format")
        self.stage = str(descriptor.get("stage") or "")
        self.truncated = bool(descriptor.get("truncated"))


def follow_lines(path: Path, done: Callable[[], bool], poll_s: float = FOLLOW_POLL_S,
                 sleep: Callable[[float], None] = time.sleep) -> Iterator[dict[str, Any]]:
    """Every JSON object line of ``path`` (events.jsonl), then each new one as it is appended,
    until ``done()`` says no more will come (the file is read once more after that, so the last
    lines are never lost). A last line still being written (no newline yet) waits for the rest; a
    line that is not a JSON object is skipped. The file may not exist yet."""
    offset = 0
    pending = b""
    while True:
        finished = done()  # asked before reading: what was written before it said so is read
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        except FileNotFoundError:
            chunk = b""
        offset += len(chunk)
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value
        if finished:
            return
        sleep(poll_s)


def events_path(record: RunRecord) -> Path:
    """Where ``record``'s events.jsonl is."""
    return record.store.dir / EVENTS

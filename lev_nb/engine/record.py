"""Keeping the run record (meta.json, events.jsonl, transcript.jsonl) in step with the run
(docs/runs.md#the-run-record); the files themselves belong to :mod:`lev_nb.store`. Also the run's usage
book (tokens and cost per stage and in all, workers' rolled in: :class:`UsageBook`,
:func:`roll_up_usage`)."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any


from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.events import Event, event_line, text_field_names
from lev_nb.secrets import REDACTED, configured_secrets, redact
from lev_nb.store import EVENTS, TRANSCRIPT, RunMeta, RunStore, encode_line, encode_meta
from lev_nb.store.writer import record_writer
from lev_nb.providers.pricing import CostTotals

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState
    from lev_nb.messages import Usage


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
        # True while a resumed run replays its journal: what it re-does is already on record.
        self.muted = False
        self.store = store
        self.meta = meta
        # The run's usage book, whose totals go on meta.json with every write (UsageBook.settle).
        self.usage: UsageBook | None = None
        self.events = events
        self.writer = record_writer()
        self._last_save = float("-inf")
        self._dirty = False
        self.secrets = configured_secrets()
        self._secret_bytes = tuple((s.encode("utf-8"), REDACTED.encode("utf-8")) for s in self.secrets)
        # Whether every secret is written by JSON as itself (no quote, backslash or control character).
        self._json_plain = all(json.dumps(s, ensure_ascii=False)[1:-1] == s for s in self.secrets)

    def scrub(self, data: bytes) -> bytes:
        """``data`` (encoded JSON) with every configured secret's value redacted."""
        return self._scrub(data) if self._secret_bytes else data

    def _scrub(self, data: bytes) -> bytes:
        for secret, mark in self._secret_bytes:
            if secret in data:
                data = data.replace(secret, mark)
        return data

    def _holds_secret(self, data: bytes) -> bool:
        for secret, _ in self._secret_bytes:  # a loop, not any(): this asks about every event
            if secret in data:
                return True
        return False

    def _scrub_event(self, event: Event) -> Event:
        changed: dict[str, Any] = {
            name: redact(value, self.secrets)
            for name in text_field_names(type(event))
            if isinstance(value := getattr(event, name), str) and any(s in value for s in self.secrets)
        }
        return dataclasses.replace(event, **changed) if changed else event

    def emit(self, event: Event) -> None:
        """Queue ``event`` for events.jsonl, then hand it to live readers."""
        if self.muted:
            return
        line = event_line(event)
        # A secret JSON writes as itself shows in the line iff it shows in a field: then only an
        # event whose line holds one is rebuilt (redaction was a per-field scan of every event).
        if self.secrets and (not self._json_plain or self._holds_secret(line)):
            event = self._scrub_event(event)
            line = self._scrub(event_line(event))
        self.writer.append(self.store, EVENTS, line)
        self.events.append(event)

    def save(self, force: bool = False, final: bool = False) -> None:
        """Write meta.json atomically with a fresh ``updated_at``.

        Without ``force`` a write that comes within SAVE_INTERVAL_S of the previous one is
        deferred to the next save; ``final`` also fsyncs, for the run's last word.
        """
        self._dirty = True
        if self.muted:
            return
        clock = time.monotonic()
        if not (force or final) and clock - self._last_save < SAVE_INTERVAL_S:
            return
        self.meta.touch()
        if self.usage is not None:
            self.usage.settle(self.meta)
        if self.secrets and self.meta.error:
            self.meta.error = redact(self.meta.error, self.secrets)  # what run.error shows, too
        data = self._scrub(encode_meta(self.meta.to_dict(shared=True)))
        self.writer.write_meta(self.store, data, durable=final)
        self._last_save = clock
        self._dirty = False

    def transcript(self, entry: dict[str, Any]) -> None:
        """Queue one model exchange for transcript.jsonl."""
        if self.muted:
            return
        self.writer.append(self.store, TRANSCRIPT, self._scrub(encode_line(entry)))

    async def flushed(self) -> None:
        """Wait until everything recorded so far is on disk."""
        import asyncio

        await asyncio.wrap_future(self.writer.flush())


class UsageBook:
    """What a run's model calls cost: totals per stage and in all, with its finished child runs'
    totals (fan-out workers and sub-agents, each with its own children in) rolled in and also kept
    apart as ``children`` (with ``runs``); :meth:`write` puts them on meta.json (``usage``,
    ``cost_usd``), so ``cost_usd`` and ``lev ps`` COST are what the whole tree cost."""

    def __init__(self) -> None:
        self.total = CostTotals()
        self.by_stage: dict[str, CostTotals] = {}
        self.children = CostTotals()
        self.child_runs = 0
        # Calls folded in since the totals were last put on meta.json (see :meth:`settle`).
        self.stale = False

    def add_call(self, stage: str, usage: Usage, cost: float | None, label: str) -> None:
        """Fold in one model call of this run (``cost`` None: its model has no price)."""
        self.total.add(usage, cost, label)
        totals = self.by_stage.get(stage)
        if totals is None:
            totals = self.by_stage[stage] = CostTotals()
        totals.add(usage, cost, label)
        self.stale = True

    def add_child(self, stage: str, child_total: Mapping[str, Any] | None) -> None:
        """Fold in a finished child run's totals (its meta.json ``usage.total``, which holds its
        own children's), under the stage that started it."""
        child = CostTotals.from_dict(child_total)
        self.total.absorb(child)
        self.by_stage.setdefault(stage, CostTotals()).absorb(child)
        self.children.absorb(child)
        self.child_runs += 1
        self.stale = True

    def usage_map(self) -> dict[str, Any]:
        """The totals as meta.json's ``usage`` holds them (``total``, ``by_stage``, and
        ``children`` once a child run was rolled in)."""
        usage: dict[str, Any] = {
            "total": self.total.to_dict(),
            # A list first: run.usage reads this from the caller's thread while the engine adds.
            "by_stage": {name: totals.to_dict() for name, totals in list(self.by_stage.items())},
        }
        if self.child_runs:
            usage["children"] = {**self.children.to_dict(), "runs": self.child_runs}
        return usage

    def write(self, meta: RunMeta) -> None:
        """Put the totals on ``meta`` (``cost_usd``: None while any call has no price)."""
        meta.cost_usd = self.total.cost_usd
        meta.usage = self.usage_map()
        # Cleared last: run.usage, on the caller's thread, reads the book until the meta has it all.
        self.stale = False

    def read(self, meta: RunMeta) -> tuple[dict[str, Any], float | None]:
        """``meta``'s ``usage`` (a copy) and ``cost_usd`` as a reader on another thread should see
        them: the book's own totals while calls are unwritten (they are not settled here: the
        recorder does that on the engine's thread)."""
        if self.stale:
            return self.usage_map(), self.total.cost_usd
        return copy.deepcopy(meta.usage), meta.cost_usd

    def settle(self, meta: RunMeta) -> None:
        """Put the totals on ``meta`` if calls came in since they were last put there: the
        recorder does it as it writes meta.json (a run's model calls come faster than it writes),
        and so does whoever reads a finished run's ``usage``."""
        if self.stale:
            self.write(meta)


def roll_up_usage(parent: RunState, child_total: Mapping[str, Any] | None, stage: str | None = None) -> None:
    """Sum a child run's usage (its meta.json ``usage["total"]``) into its parent's: the parent's
    total, the stage that started the child (default: the parent's current stage) and
    ``usage.children``, so run.usage, meta.json and lev ps COST show what the whole tree cost."""
    parent.usage.add_child(stage or parent.stage.name, child_total)
    parent.usage.write(parent.meta)


#: Why a child run paused, by the ``blocker`` of its needs_setup.
PAUSE_REASONS = {"credits": "its model is out of credits", "providers": "its model could not be reached",
                 "interrupted": "it was interrupted"}


def close_paused_child(child: RunState, error: str) -> None:
    """A child run (a sub-agent or a fan-out worker) paused: it is never resumed on its own (its
    parent pauses, and the parent's resume starts it again), so its record ends here, ``cancelled``
    with ``error`` saying so."""
    child.meta.status = "cancelled"
    child.meta.error = error
    child.rec.save(final=True)

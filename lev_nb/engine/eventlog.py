"""An append-only, thread-safe event log that can be read while it grows (``run.events``;
docs/runs.md#the-run-record, live events).

The engine thread appends; any thread can iterate (blocking until the next event or the end), and
any asyncio loop can ``async for`` over it without blocking that loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from lev_nb.engine.events import Event
from lev_nb.errors import CALLEE_ERRORS


class _InOrder:
    """A subscriber being replayed the past: live events that arrive meanwhile are held and given
    to ``callback`` after the replay, so it sees every event once, in order."""

    def __init__(self, callback: Callable[[Event], None]) -> None:
        self.callback = callback
        self._lock = threading.Lock()
        self._held: list[Event] | None = []  # None once the replay has caught up

    def __call__(self, event: Event) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(event)
                return
        self.callback(event)

    def replay(self, past: list[Event]) -> None:
        """Give ``past`` to the callback, then whatever arrived meanwhile, then go live."""
        for event in past:
            _call(self.callback, event)
        while True:
            with self._lock:
                held = self._held or []
                if not held:
                    self._held = None  # caught up: live from now on
                    return
                self._held = []
            for event in held:
                _call(self.callback, event)


def _call(callback: Callable[[Event], None], event: Event) -> None:
    try:
        callback(event)
    except CALLEE_ERRORS:  # a broken view must never break the run
        pass


class EventLog:
    """Events of one run, in order; closed when the run ends."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._closed = False
        self._lock = threading.Lock()
        # Made by the first reader that has to wait: most runs are never read while they run,
        # and a condition (a deque and five bound methods) was a kilobyte of each run's memory.
        self._cond: threading.Condition | None = None
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._subscribers: list[Callable[[Event], None]] = []

    def append(self, event: Event) -> None:
        """Add an event and wake every reader; subscribers are called in the caller's thread."""
        with self._lock:
            self._events.append(event)
            self._wake()
            # A copy only when someone listens (subscribing replaces nothing in place, but a
            # callback may unsubscribe itself while the list is walked).
            subscribers = list(self._subscribers) if self._subscribers else ()
        for callback in subscribers:
            try:
                callback(event)
            except CALLEE_ERRORS:  # a broken view must never break the run
                pass

    def close(self) -> None:
        """Mark the log complete; readers finish once they have seen every event."""
        with self._lock:
            self._closed = True
            self._wake()

    def subscribe(self, callback: Callable[[Event], None], replay: bool = True) -> None:
        """Call ``callback(event)`` for every future event (and, with ``replay``, past ones first).

        Every event reaches ``callback`` once and in order, even while the run goes on during the
        replay (the past is replayed on this thread while the engine thread appends): an event
        appended meanwhile waits until the replay has caught up."""
        if not replay:
            with self._lock:
                self._subscribers.append(callback)
            return
        ordered = _InOrder(callback)
        with self._lock:
            past = list(self._events)
            self._subscribers.append(ordered)
        ordered.replay(past)

    def unsubscribe(self, callback: Callable[[Event], None]) -> None:
        """Stop calling ``callback``."""
        with self._lock:
            self._subscribers = [s for s in self._subscribers if s is not callback and getattr(s, "callback", None) is not callback]

    @property
    def closed(self) -> bool:
        """True once the run has ended and no more events will come."""
        return self._closed

    def snapshot(self) -> list[Event]:
        """The events so far, without waiting."""
        with self._lock:
            return list(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def to_pandas(self) -> Any:
        """The events so far as a pandas DataFrame, one row an event: ``type``, ``run_id``,
        ``stage``, ``ts`` (unix seconds), then each kind's own fields (empty where a kind has
        none). Needs pandas (a clear ImportError without it)."""
        from lev_nb.frames import data_frame

        return data_frame(event.to_dict() for event in self.snapshot())

    def _wake(self) -> None:
        if self._cond is not None:
            self._cond.notify_all()
        if not self._async_waiters:
            return
        waiters, self._async_waiters = self._async_waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)

    def __iter__(self) -> Iterator[Event]:
        index = 0
        while True:
            with self._lock:
                while index >= len(self._events) and not self._closed:
                    if self._cond is None:
                        self._cond = threading.Condition(self._lock)
                    self._cond.wait()
                if index >= len(self._events):
                    return
                event = self._events[index]
            index += 1
            yield event

    async def __aiter__(self) -> AsyncIterator[Event]:
        index = 0
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if index < len(self._events):
                    event = self._events[index]
                elif self._closed:
                    return
                else:
                    fut: asyncio.Future[None] = loop.create_future()
                    self._async_waiters.append((loop, fut))
                    event = None
            if event is None:
                await fut
                continue
            index += 1
            yield event


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

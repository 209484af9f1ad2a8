"""Model-call deadlines under one timer per event loop.

``async with call_deadline(seconds):`` behaves as ``asyncio.timeout(seconds)``: the body is
cancelled when the time is up and the cancellation comes out as ``TimeoutError``; a cancel from
anyone else stays a cancel. The difference is the cost of the usual case, a call that ends in time:
``asyncio.timeout`` schedules a timer per call and cancels it again, so the loop's timer heap fills
with cancelled handles it sorts and sweeps (about 3% of a turn, every model call of every run).
Here every call in flight on a loop shares one timer, armed for the soonest deadline; a call that
ends in time only leaves a table.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from types import TracebackType

__all__ = ["call_deadline"]

# A timer may fire this much before its time (asyncio runs what is due within the clock's resolution).
_EARLY = time.get_clock_info("monotonic").resolution


class _Table:
    """The deadlines in flight on one loop, and the loop's one timer for the soonest of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # the table is found by its loop, never keeps it alive
        self.due: dict[call_deadline, float] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.armed = math.inf  # when the timer fires (inf: not armed)

    def add(self, loop: asyncio.AbstractEventLoop, deadline: call_deadline, when: float) -> None:
        self.due[deadline] = when
        if when < self.armed:  # the usual case, same timeouts for every call, skips this
            self._arm(loop, when)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.armed = loop.call_at(when, self._fire, loop), when

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer, self.armed = None, math.inf
        now = loop.time() + _EARLY
        soonest = math.inf
        for deadline, when in list(self.due.items()):
            if when <= now:
                del self.due[deadline]
                deadline.expire()
            elif when < soonest:
                soonest = when
        if soonest < math.inf:
            self._arm(loop, soonest)


_TABLES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Table] = weakref.WeakKeyDictionary()
_last: _Table | None = None  # the table asked for last (nearly always the engine loop's)


def _table(loop: asyncio.AbstractEventLoop) -> _Table:
    global _last
    table = _last
    if table is None or table.loop() is not loop:
        table = _TABLES.get(loop)
        if table is None:
            table = _TABLES[loop] = _Table(loop)
        _last = table
    return table


class call_deadline:  # noqa: N801 - used as asyncio.timeout is
    """``async with call_deadline(seconds):`` cancels the body after ``seconds`` and raises
    ``TimeoutError`` for it (see the module docstring)."""

    __slots__ = ("seconds", "_task", "_table", "_cancelling", "_expired")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._expired = False

    async def __aenter__(self) -> call_deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("call_deadline must be used inside a task")
        loop = task.get_loop()
        self._task = task
        self._cancelling = task.cancelling()
        self._table = _table(loop)
        self._table.add(loop, self, loop.time() + self.seconds)
        return self

    def expire(self) -> None:
        """The time is up: cancel the body (the table has already let go of this deadline)."""
        self._expired = True
        self._task.cancel()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._table.due.pop(self, None)
        # As asyncio.timeout: the cancel this deadline made is taken back; it becomes TimeoutError
        # unless someone else asked for a cancel too.
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

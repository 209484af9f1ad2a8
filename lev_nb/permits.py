"""Permits: ``asyncio.Semaphore`` with an uncontended acquire and release that only count.

Every model call and every tool call takes two or three permits (the process's pools, the run's
share). ``asyncio.Semaphore.acquire`` asks ``locked()`` first, which walks its waiters through a
generator even when there are none; with nobody waiting, the answer is the count alone, and that is
all these do. With anyone waiting, the semaphore's own code runs, fairness and cancellation as is.
"""

from __future__ import annotations

import asyncio
from typing import Literal

__all__ = ["Permits"]


class Permits(asyncio.Semaphore):
    """An ``asyncio.Semaphore`` (same behaviour) whose uncontended acquire and release only count."""

    async def acquire(self) -> Literal[True]:
        """Take a permit, waiting in line when none is free."""
        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        return await super().acquire()

    def release(self) -> None:
        """Give a permit back, waking the first in line."""
        if not self._waiters:
            self._value += 1
            return
        super().release()

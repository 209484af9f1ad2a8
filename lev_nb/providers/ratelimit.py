"""Client-side rate limits, one per provider in this process: ``[rate_limits.<provider>]`` (and a
script or configured server's ``[model_providers.<name>.rate_limit]``), enforced before each call.

A limit bounds the calls started and the tokens sent in any sliding minute. A call that would go
over waits until the oldest call in the window is a minute old; it never fails for it. The tokens
of a call are its estimated prompt when it starts, corrected to the real usage when it answers.
This shapes *rate*; ``[limits] max_concurrent_inferences`` bounds *concurrency*, and both apply.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.settings import Settings
    from lev_nb.settings.model import RateLimit

__all__ = ["RATE_LIMITS", "Admission", "RateLimiters", "limit_for"]

WINDOW_S = 60.0


def limit_for(provider: str, settings: Settings) -> RateLimit | None:
    """The rate limit that applies to ``provider`` (``[rate_limits.<provider>]``, else its
    ``[model_providers.<name>.rate_limit]``), or None when it has none."""
    limit = settings.rate_limits.get(provider)
    if limit is None:
        own = settings.provider(provider).rate_limit
        limit = own if (own.requests_per_minute or own.tokens_per_minute) else None
    return limit


@record(frozen=False)
class Admission:
    """One call let through: when it started and the tokens counted for it (correctable)."""

    at: float
    tokens: int


class RateLimiters:
    """Every provider's sliding minute in this process; ``clock`` and ``sleep`` are for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._calls: dict[str, deque[Admission]] = {}

    def _delay(self, provider: str, limit: RateLimit, tokens: int) -> tuple[float, Admission | None]:
        """(seconds to wait, None) or (0, the admission just recorded)."""
        with self._lock:
            now = self._clock()
            calls = self._calls.setdefault(provider, deque())
            while calls and now - calls[0].at >= WINDOW_S:
                calls.popleft()
            over_requests = limit.requests_per_minute is not None and len(calls) >= limit.requests_per_minute
            used = sum(c.tokens for c in calls)
            # A call bigger than the whole budget goes alone, once the window is empty.
            over_tokens = limit.tokens_per_minute is not None and calls and used + tokens > limit.tokens_per_minute
            if not over_requests and not over_tokens:
                admission = Admission(now, tokens)
                calls.append(admission)
                return 0.0, admission
            return max(WINDOW_S - (now - calls[0].at), 0.01), None

    async def admit(self, provider: str, limit: RateLimit | None, tokens: int,
                    on_wait: Callable[[float], None] | None = None) -> Admission | None:
        """Wait until a call of ``tokens`` estimated tokens to ``provider`` fits its ``limit``
        (None: no limit, no wait); ``on_wait(seconds)`` hears of each wait before it starts."""
        if limit is None:
            return None
        while True:
            delay, admission = self._delay(provider, limit, tokens)
            if admission is not None:
                return admission
            if on_wait is not None:
                on_wait(delay)
            await self._sleep(delay)

    def settle(self, admission: Admission | None, tokens: int) -> None:
        """Correct an admitted call's tokens to what it really used."""
        if admission is not None:
            with self._lock:
                admission.tokens = tokens

    def reset(self) -> None:
        """Forget every call (tests; a fresh configuration)."""
        with self._lock:
            self._calls.clear()


#: The process's rate limiters, shared by every run.
RATE_LIMITS = RateLimiters()

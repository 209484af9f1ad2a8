"""One SDK client per (API key, base URL) per event loop, for every SDK-backed provider.

An SDK client's connection pool belongs to the loop it first ran on, and thousands of runs share the
engine loop, so a client per request would waste connections. The table for a loop disappears with
the loop. Clients are made with ``max_retries=0`` by their providers on purpose: the engine's
RetryPolicy (lev_nb/engine/pipeline/inference.py) retries transient ProviderErrors with its own
backoff and Retry-After handling; SDK retries as well would multiply the attempts and hide the
failures from the run's event log.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LoopClients"]

C = TypeVar("C")


class LoopClients(Generic[C]):
    """The clients ``make(api_key, base_url)`` builds, one per key and URL on each running loop."""

    def __init__(self, make: Callable[[str, str | None], C]) -> None:
        self._make = make
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str | None], C]] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()

    def get(self, api_key: str, base_url: str | None) -> C:
        """The client for this key and base URL on the running event loop (created on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            per_loop = self._by_loop.setdefault(loop, {})
            client = per_loop.get((api_key, base_url))
            if client is None:
                client = per_loop[(api_key, base_url)] = self._make(api_key, base_url)
            return client

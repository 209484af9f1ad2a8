"""The engine thread: one asyncio loop on a daemon thread, shared by every run (docs/runs.md#the-run-loop).

Running all runs on one private loop makes a run behave the same in a notebook (whose kernel
already owns a running loop), in a plain script and in the CLI: starting a run never needs the
caller's loop, and a cell that blocks on ``run.wait()`` does not stop the run from progressing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_instance: EngineLoop | None = None


class EngineLoop:
    """An asyncio loop running forever on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._main, args=(ready,), name="lev-engine", daemon=True
        )
        self.thread.start()
        ready.wait()

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        # Blocking tools and Rhai scripts go to worker threads; give them room for many runs.
        self.loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="lev-worker")
        )
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the engine loop; returns a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the engine thread as soon as possible."""
        self.loop.call_soon_threadsafe(fn, *args)

    def in_engine_thread(self) -> bool:
        """True when the caller is running on the engine thread itself."""
        return threading.current_thread() is self.thread


def engine_loop() -> EngineLoop:
    """Return the process-wide engine loop, starting it on first use."""
    global _instance
    with _lock:
        if _instance is None or not _instance.thread.is_alive():
            _instance = EngineLoop()
        return _instance

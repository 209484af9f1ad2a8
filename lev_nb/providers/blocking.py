"""Threads for model calls that block (a provider whose ``complete`` is a plain function; a provider
script being found and loaded from its file), with no fixed number of them. (A provider script's
calls need none: the loop serves them, see lev_nb.providers.rhai_provider.)

A shared pool of N threads would make N the most model calls in flight per process, whatever
``[limits] max_concurrent_inferences`` says (the engine loop's default executor held it at 32).
Here a call takes an idle thread when one is waiting and starts a new one otherwise, so the
inference pool's permit, taken before the call, is the only limit. A thread idle for
:data:`IDLE_EXIT_S` ends, so a burst does not leave its threads behind.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["IDLE_EXIT_S", "ElasticThreads", "THREADS", "run_blocking"]

T = TypeVar("T")
IDLE_EXIT_S = 30.0
_Job = Callable[[], None]  # runs the call and hands its outcome on; never raises


class _Worker:
    """One thread with its own inbox; it serves jobs until it has been idle too long."""

    def __init__(self, pool: ElasticThreads) -> None:
        self.pool = pool
        self.inbox: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="lev-call", daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                job = self.inbox.get(timeout=self.pool.idle_exit_s)
            except queue.Empty:
                if self.pool._retire(self):
                    return
                continue  # handed a job just as the wait ran out: it is in the inbox
            job()
            del job  # drop the job's references before idling
            self.pool._idle_again(self)


class ElasticThreads:
    """A thread pool that grows with demand and shrinks when idle (see the module docstring)."""

    def __init__(self, idle_exit_s: float = IDLE_EXIT_S) -> None:
        self.idle_exit_s = idle_exit_s
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self.threads = 0  # alive now
        self.busy = 0  # running a job now

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args)`` on an idle thread, or on a new one when none is idle."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - the caller's result() re-raises it
                    future.set_exception(exc)

        self.start(job)
        return future

    def start(self, job: _Job) -> None:
        """Run ``job`` (which must not raise) on an idle thread, or on a new one."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                worker = _Worker(self)
                self.threads += 1
                fresh = True
            else:
                fresh = False
            self.busy += 1
        worker.inbox.put(job)
        if fresh:
            worker.thread.start()

    def _idle_again(self, worker: _Worker) -> None:
        with self._lock:
            self.busy -= 1
            self._idle.append(worker)

    def _retire(self, worker: _Worker) -> bool:
        """True when ``worker`` was idle and may end; False when a job was just handed to it."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                self.threads -= 1
                return True
            return False


THREADS = ElasticThreads()


async def run_blocking(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a thread of :data:`THREADS` in a copy of the caller's context variables
    (as ``asyncio.to_thread`` runs it), awaited from the running loop.

    The thread settles a future of the loop directly through the loop's :class:`_Settler`: a
    concurrent.futures.Future chained to the loop by ``asyncio.wrap_future`` cost every model
    call a lock, a condition and two callbacks more on the engine thread."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()
    settler = _settler(loop)

    def job() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (context.run(fn, *args), None)
        except BaseException as exc:  # noqa: BLE001 - the awaiting task re-raises it
            outcome = (None, exc)
        settler.post(waiter, *outcome)

    THREADS.start(job)
    return await waiter


class _Settler:
    """Hands finished calls back to one loop, waking it once for all the calls that finish while
    it is busy: each wake-up is a write to the loop's socket, for which the calling thread lets go
    of the interpreter lock and takes it back, and with hundreds of calls in flight most calls
    finish while the loop is still working through the previous ones."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._done: collections.deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = collections.deque()
        self._lock = threading.Lock()
        self._woken = False  # a drain is scheduled and has not started yet

    def post(self, waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        """Queue ``waiter``'s outcome (from any thread); wake the loop unless a drain is due."""
        self._done.append((waiter, result, error))
        with self._lock:
            if self._woken:
                return  # the scheduled drain has not started: it will see this outcome
            self._woken = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop has closed: nobody is waiting any more
            pass

    def _drain(self) -> None:
        with self._lock:
            self._woken = False  # an outcome queued from here on schedules a drain of its own
        done = self._done
        while done:
            _settle(*done.popleft())


_settlers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Settler] = weakref.WeakKeyDictionary()
_settlers_lock = threading.Lock()


def _settler(loop: asyncio.AbstractEventLoop) -> _Settler:
    settler = _settlers.get(loop)
    if settler is None:
        with _settlers_lock:
            settler = _settlers.setdefault(loop, _Settler(loop))
    return settler


def _settle(waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if waiter.done():  # the awaiting task was cancelled meanwhile
        return
    if error is None:
        waiter.set_result(result)
    else:
        waiter.set_exception(error)

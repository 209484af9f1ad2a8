"""``lev_nb.run_many``: one blueprint over many tasks, across the processes of this machine or the
workers of a Dask cluster (issue 15 "every core, then a cluster").

The batch is cut into *shares* (lists of ``(index, task)``); each share runs in one worker process
on that process's own engine loop (:func:`lev_nb.batch.worker.run_share`), at most ``concurrency``
runs of the batch in flight at once. Where the shares go:

- no ``client``: a pool of ``processes`` local worker processes (started fresh, ``spawn``), with a
  multiprocessing queue carrying progress back;
- a Dask ``distributed.Client`` (or a scheduler address): Dask schedules the shares
  (``client.submit`` / ``as_completed``) and a Dask ``Queue`` carries progress back.

Every run is recorded in the caller's run store: each worker is pointed at the caller's
``LEV_HOME`` (and given the caller's ``lev_nb.configure`` overrides). On a remote cluster that
folder must be the same shared filesystem path on every worker machine, as must the blueprint's
folder. A share whose worker fails (a crashed process, a lost Dask worker) is sent again once
(``retries``) for the tasks it had not finished; after that those tasks are summarised as
``failed`` with the reason. A task that finished in a worker that then died before reporting may
run twice (at least once, not exactly once); each attempt leaves its own record.
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import queue
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from lev_nb.batch.worker import ShareSpec, failed, split_task
from lev_nb.records import record
from lev_nb.text import format_elapsed

__all__ = ["BatchProgress", "RunSummary", "run_many"]

# Runs in flight per worker process when the caller names no concurrency.
DEFAULT_PER_PROCESS = 64
PROGRESS_EVERY_S = 0.25
# How many stages a progress line names (the busiest first); the rest are summed as "elsewhere".
STAGES_SHOWN = 4
POLL_S = 0.1
# After a Ctrl-C, how long the workers get to cancel their runs and close their records.
STOP_WAIT_S = 30.0


@record
class RunSummary:
    """How one task of a batch ended: ``status`` is the run's (complete, error, cancelled) or
    ``failed`` when it never ran to an end (it could not start, or its worker was lost twice);
    ``output`` is the final answer's text; ``worker`` names the ``host:pid`` that ran it."""

    index: int
    task: str
    run_id: str | None
    status: str
    output: str | None = None
    error: str | None = None
    worker: str | None = None
    attempts: int = 1
    warnings: tuple[str, ...] = ()  # what the run warned the person of, a line each ("(stage) message")

    @property
    def ok(self) -> bool:
        """True when the run completed."""
        return self.status == "complete"


@record(frozen=False)
class BatchProgress:
    """The batch so far, as a progress view shows it."""

    total: int
    started: int = 0
    complete: int = 0
    failed: int = 0
    retried: int = 0
    workers: int = 0
    dashboard: str | None = None
    elapsed_s: float = 0.0
    done: bool = False
    by_status: dict[str, int] = field(default_factory=dict)
    stages: dict[str, int] = field(default_factory=dict)  # runs in flight per stage, every worker's

    @property
    def finished(self) -> int:
        """Tasks that have ended, however they ended."""
        return self.complete + self.failed

    @property
    def running(self) -> int:
        """Runs started and not yet ended."""
        return max(0, self.started - self.finished)

    @property
    def percent(self) -> int:
        """Finished tasks as a whole percentage of the batch."""
        return 100 if not self.total else int(100 * self.finished / self.total)

    @property
    def rate(self) -> float | None:
        """Tasks finished per second so far (None before the first one)."""
        return self.finished / self.elapsed_s if self.finished and self.elapsed_s > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds until the batch ends at the rate so far (None before the first task ends)."""
        rate = self.rate
        return None if rate is None or self.done else max(0.0, (self.total - self.finished) / rate)

    def pace(self) -> str:
        """``42% · 2.5 tasks/s · about 12 s left`` (the rate and time left once a task ended)."""
        parts = [f"{self.percent}%"]
        if self.rate is not None:
            parts.append(f"{self.rate:.2g} tasks/s" if self.rate < 10 else f"{self.rate:.0f} tasks/s")
        if self.eta_s is not None:
            parts.append(f"about {format_elapsed(self.eta_s, rough=True)} left")
        return " · ".join(parts)

    def line(self) -> str:
        """The counts as one line, ``12/40 finished: 3 running, 11 complete, 1 failed, ...``, then
        where the running ones are (``2 in plan, 1 in review``): the notebook view and ``lev run
        --count`` both show it."""
        parts = [f"{self.running} running", f"{self.complete} complete", f"{self.failed} failed"]
        if self.retried:
            parts.append(f"{self.retried} retried")
        parts.append(f"{self.workers} worker{'s' if self.workers != 1 else ''}")
        parts.append(f"{self.elapsed_s:.1f} s")
        line = f"{self.finished}/{self.total} finished: " + ", ".join(parts)
        stages = list(self.stages.items())
        if stages:
            where = [f"{runs} in {stage}" for stage, runs in stages[:STAGES_SHOWN]]
            rest = sum(runs for _, runs in stages[STAGES_SHOWN:])
            if rest:
                where.append(f"{rest} elsewhere")
            line += " · " + ", ".join(where)
        return line


class RunSummaries(list[RunSummary]):
    """``run_many``'s answer: the list of :class:`RunSummary`, one per task in task order; in a
    notebook it displays as a table (``views.BATCH_TABLE``)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from lev_nb.engine import views

        text = {"text/plain": repr(list(self))}
        if not views.has_view(views.BATCH_TABLE):
            return text
        return {**text, **views.view(views.BATCH_TABLE, list(self))}


class _Backend:
    """Where shares run: submit a share, learn which submissions ended, read progress messages."""

    workers = 1
    dashboard: str | None = None

    def submit(self, spec: ShareSpec, items: list[tuple[int, Any]]) -> Any:
        raise NotImplementedError

    def finished(self, pending: Iterable[Any]) -> list[Any]:
        raise NotImplementedError

    def messages(self) -> list[Any]:
        """The progress messages that arrived since the last call (workers send them in lists)."""
        raise NotImplementedError

    def recover(self, future: Any) -> None:
        """After ``future`` failed: make sure later submissions go to a working pool."""

    def stop(self) -> None:
        """The batch was interrupted: its workers cancel their runs and start no more."""

    def close(self) -> None:
        raise NotImplementedError


class _LocalBackend(_Backend):
    """A pool of fresh local worker processes; progress comes back on a multiprocessing queue."""

    def __init__(self, processes: int, pin_cpus: bool | None = None) -> None:
        from lev_nb.batch import worker

        self.workers = processes
        self._context = multiprocessing.get_context("spawn")  # never fork the engine's threads
        self._cpus = _cpus_to_pin(processes, pin_cpus)
        self._channels: list[Any] = []
        self._stop = self._context.Event()  # set on Ctrl-C: the workers cancel their runs
        self._init = worker.init_local
        self._share = worker.local_share
        self._pool = self._new_pool()
        self._generation: dict[Any, concurrent.futures.ProcessPoolExecutor] = {}

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        # Each pool gets a queue of its own: a worker killed while writing to a queue can leave
        # that queue's lock held for good, so a replacement pool never shares it.
        channel = self._context.Queue()
        self._channels.append(channel)
        cpus = None
        if self._cpus:
            cpus = self._context.Queue()
            for cpu in self._cpus:
                cpus.put(cpu)
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=self._context, initializer=self._init,
            initargs=(channel, cpus, self._stop))

    def submit(self, spec: ShareSpec, items: list[tuple[int, Any]]) -> Any:
        future = self._pool.submit(self._share, spec, items)
        self._generation[future] = self._pool
        return future

    def finished(self, pending: Iterable[Any]) -> list[Any]:
        done, _ = concurrent.futures.wait(list(pending), timeout=POLL_S, return_when=concurrent.futures.FIRST_COMPLETED)
        return list(done)

    def messages(self) -> list[Any]:
        out = []
        for channel in self._channels:
            while True:
                try:
                    out.extend(channel.get_nowait())
                except (queue.Empty, OSError, ValueError):
                    break
        return out

    def recover(self, future: Any) -> None:
        # A worker that died breaks its whole pool; the first failure of that pool replaces it.
        if self._generation.pop(future, None) is self._pool and isinstance(future.exception(), BrokenProcessPool):
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self._stop.is_set():  # interrupted: whatever is left is not waited for
            processes = list(getattr(self._pool, "_processes", {}).values())
            self._pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.join(STOP_WAIT_S)
                if process.is_alive():
                    process.kill()
        else:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for channel in self._channels:
            channel.close()
            channel.cancel_join_thread()  # never wait at exit on a queue a dead worker left locked


class _DaskBackend(_Backend):
    """Shares scheduled by Dask distributed; progress comes back on a distributed Queue."""

    def __init__(self, client: Any) -> None:
        from distributed import Client, Queue, as_completed

        self._own = isinstance(client, str)
        self.client = Client(client) if isinstance(client, str) else client
        info = self.client.scheduler_info()
        self.workers = max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))
        # Only a scheduler that serves its dashboard gets a link.
        self.dashboard = self.client.dashboard_link if "dashboard" in info.get("services", {}) else None
        self._queue_name = f"lev-batch-{uuid.uuid4().hex}"
        self._queue = Queue(self._queue_name, client=self.client)
        self._completed = as_completed()

    def submit(self, spec: ShareSpec, items: list[tuple[int, Any]]) -> Any:
        from lev_nb.batch.worker import dask_share

        future = self.client.submit(dask_share, spec, items, self._queue_name, pure=False)
        self._completed.add(future)
        return future

    def finished(self, pending: Iterable[Any]) -> list[Any]:
        if self._completed.has_ready():
            return list(self._completed.next_batch(block=False))
        time.sleep(POLL_S)
        return []

    def messages(self) -> list[Any]:
        return [message for batch in self._queue.get(batch=True) for message in batch]

    def close(self) -> None:
        if self._own:
            self.client.close()


def _check_option_names(blueprint: Any, options: dict[str, Any]) -> None:
    """Raise LaunchError for a keyword that is neither an option of ``run_many`` or of a run nor
    one of the blueprint's inputs (``pin_cpu=``: did you mean ``pin_cpus``?)."""
    import inspect

    from lev_nb.engine.api import start_options
    from lev_nb.engine.launch import check_input_names
    from lev_nb.engine.prepare import cached_plan

    ours = [name for name in inspect.signature(run_many).parameters if name != "options"]
    inputs = [name for name in options if name not in start_options()]
    check_input_names(cached_plan(blueprint), inputs, [*ours, *start_options()])


def _cpus_to_pin(processes: int, pin_cpus: bool | None) -> list[int]:
    """The CPUs to keep the local workers on, one each (empty: do not pin).

    One worker process runs its engine loop, record writer and tool threads under one interpreter
    lock; left free to move, those threads trade the lock across cores. On 2 cores, 900 mock runs
    of code-fixer took 4.9 s on one free worker against 4.4 s on a pinned one, and 2.5-3.7 s on
    two free workers against 2.2-2.7 s on two pinned ones. By default workers are pinned when
    there is a CPU for each of them."""
    try:
        available = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: the system places the processes
        return []
    if pin_cpus is False or (pin_cpus is None and processes > len(available)):
        return []
    return [available[i % len(available)] for i in range(processes)]


def share_size(tasks: int, per_worker: int, workers: int) -> int:
    """How many tasks go in one share: at most ``per_worker``, and the shares a whole number of
    rounds of the workers, all of (nearly) one size. Cut into full shares plus a small last one,
    a batch left one worker running the last share while the others idled (a tenth of a
    CPU-bound batch's time on 2 workers)."""
    rounds = max(1, math.ceil(math.ceil(tasks / max(1, per_worker)) / max(1, workers)))
    return max(1, math.ceil(tasks / (rounds * max(1, workers))))


def _shares(tasks: list[Any], size: int) -> list[list[tuple[int, Any]]]:
    items = list(enumerate(tasks))
    return [items[i:i + size] for i in range(0, len(items), size)]


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (where a progress view can be shown)."""
    import sys

    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def run_many(
    blueprint: Any,
    tasks: Iterable[str | Mapping[str, Any]],
    model: Any = None,
    *,
    concurrency: int | None = None,
    processes: int | None = None,
    client: Any = None,
    home: str | os.PathLike[str] | None = None,
    settings: dict[str, Any] | None = None,
    retries: int = 1,
    pin_cpus: bool | None = None,
    on_progress: Callable[[BatchProgress], None] | None = None,
    show: bool | None = None,
    **options: Any,
) -> list[RunSummary]:
    """Run ``blueprint`` once per task across worker processes and return one summary per task, in
    task order (see the module docstring for where the runs go and what a failure does).

    ``blueprint`` is a Blueprint or a path; ``model`` a model spec as for ``bp.run`` (a string, or a
    picklable Provider such as ``MockModel``). ``concurrency`` bounds the batch's runs in flight
    (default 64 per worker process); ``processes`` is the size of the local pool (default: this
    machine's CPU count); ``client`` a Dask ``distributed.Client`` or its scheduler address, used
    instead of a local pool; ``pin_cpus`` keeps each local worker on a CPU of its own (default:
    when this process may use at least ``processes`` CPUs; a Dask cluster places its own
    workers). ``home`` is the run store (default: the caller's ``LEV_HOME``);
    ``settings`` are ``lev_nb.configure`` overrides for the workers, on top of the caller's own
    (``{"max_concurrent_inferences": 4}`` bounds each worker process's model calls). ``on_progress``
    is called with a :class:`BatchProgress` as the batch advances; ``show`` draws the notebook's
    progress view (default: inside a Jupyter kernel). Other keyword arguments go to every run
    (``workdir``, ``output_format``, caller inputs...). A task may also be a dict: its ``"task"``
    is the task and its other keys are that run's own inputs (``lev_nb.evaluate``'s dataset rows).
    """
    from lev_nb.catalog import load
    from lev_nb.settings.loader import session_overrides
    from lev_nb.settings.paths import lev_home

    tasks = [dict(t) if isinstance(t, Mapping) else str(t) for t in tasks]
    blueprint = load(blueprint)  # a blueprint that cannot be read fails here, once
    _check_option_names(blueprint, options)  # a misspelt option fails here, once, not in every worker
    overrides = session_overrides()
    overrides.update(settings or {})
    store = str(lev_home() if home is None else os.path.abspath(os.fspath(home)))
    backend: _Backend = _DaskBackend(client) if client is not None else _LocalBackend(
        max(1, processes or os.cpu_count() or 1), pin_cpus)
    try:
        total_concurrency = concurrency or DEFAULT_PER_PROCESS * backend.workers
        per_worker = max(1, math.ceil(total_concurrency / backend.workers))
        spec = ShareSpec(blueprint=blueprint, model=model, home=store, settings=overrides,
                         concurrency=per_worker, options=options)
        size = share_size(len(tasks), per_worker, backend.workers)
        progress = BatchProgress(total=len(tasks), workers=backend.workers, dashboard=backend.dashboard)
        if show if show is not None else _in_kernel():
            from lev_nb.engine import views

            if views.has_view(views.BATCH_VIEW):
                view = views.view(views.BATCH_VIEW, progress)
                on_progress = _both(view.update, on_progress)
        try:
            return RunSummaries(_drive(backend, spec, _shares(tasks, size), tasks, retries, progress, on_progress))
        except KeyboardInterrupt:
            _stop(backend)
            raise
    finally:
        backend.close()


def _stop(backend: _Backend) -> None:
    """Ctrl-C: the workers cancel their runs (each record ends ``cancelled``); they are waited for
    up to STOP_WAIT_S, and a second Ctrl-C stops the wait."""
    backend.stop()
    pending = list(getattr(backend, "_generation", {}))
    deadline = time.monotonic() + STOP_WAIT_S
    try:
        while pending and time.monotonic() < deadline:
            done = backend.finished(pending)
            pending = [future for future in pending if future not in done]
    except KeyboardInterrupt:
        pass


def _both(first: Callable[[BatchProgress], None],
          second: Callable[[BatchProgress], None] | None) -> Callable[[BatchProgress], None]:
    if second is None:
        return first

    def both(progress: BatchProgress) -> None:
        first(progress)
        second(progress)

    return both


def _drive(backend: _Backend, spec: ShareSpec, shares: list[list[tuple[int, Any]]], tasks: list[Any],
           retries: int, progress: BatchProgress, on_progress: Callable[[BatchProgress], None] | None) -> list[RunSummary]:
    """Submit every share, follow progress, resend the unfinished part of a failed share."""
    start = time.monotonic()
    summaries: dict[int, dict[str, Any]] = {}
    attempts: dict[int, int] = dict.fromkeys(range(len(tasks)), 1)
    pending: dict[Any, tuple[list[tuple[int, str]], int]] = {}
    for share in shares:
        pending[backend.submit(spec, share)] = (share, 0)
    last_report = 0.0
    # Tasks counted as started, once each: a retried task starts twice, and a worker's result can
    # arrive before the list that said its runs started (that queue flushes in the background).
    begun: set[int] = set()

    def begin(index: int) -> None:
        if index not in begun:
            begun.add(index)
            progress.started += 1

    def take(summary: dict[str, Any]) -> None:
        index = summary["index"]
        if index in summaries:
            return
        begin(index)
        summaries[index] = summary
        status = summary["status"]
        progress.by_status[status] = progress.by_status.get(status, 0) + 1
        if status == "complete":
            progress.complete += 1
        else:
            progress.failed += 1

    by_worker: dict[str, dict[str, int]] = {}  # each worker's last word on where its runs are

    def read_messages() -> None:
        stages_seen = False
        for message in backend.messages():
            if message[0] == "started":
                begin(message[1])
            elif message[0] == "finished":
                take(message[1])
            elif message[0] == "stages":
                by_worker[message[1]] = message[2]
                stages_seen = True
        if stages_seen:
            totals: dict[str, int] = {}
            for counts in by_worker.values():
                for stage, runs in counts.items():
                    totals[stage] = totals.get(stage, 0) + runs
            progress.stages = dict(sorted(totals.items(), key=lambda item: -item[1]))

    def report(force: bool = False) -> None:
        nonlocal last_report
        now = time.monotonic()
        if on_progress is not None and (force or now - last_report >= PROGRESS_EVERY_S):
            last_report = now
            progress.elapsed_s = now - start
            on_progress(progress)

    report(force=True)
    while pending:
        for future in backend.finished(pending):
            share, retried = pending.pop(future)
            error = future.exception()
            read_messages()
            if error is None:
                for summary in future.result():
                    take(summary)
                continue
            backend.recover(future)
            left = [(i, t) for i, t in share if i not in summaries]
            reason = f"its worker failed: {type(error).__name__}: {error}".rstrip(": ")
            if left and retried < retries:
                progress.retried += len(left)
                for i, _ in left:
                    attempts[i] += 1
                pending[backend.submit(spec, left)] = (left, retried + 1)
            else:
                for i, task in left:
                    take(failed(i, split_task(task)[0], reason))
        read_messages()
        report()
    read_messages()
    progress.done = True
    progress.stages = {}  # every run has ended (a lost worker's last word included)
    report(force=True)
    out = []
    for index, item in enumerate(tasks):
        task = split_task(item)[0]
        s = summaries.get(index) or failed(index, task, "no worker reported this task")
        out.append(RunSummary(index=index, task=task, run_id=s["run_id"], status=s["status"], output=s["output"],
                              error=s["error"], worker=s["worker"], attempts=attempts[index],
                              warnings=tuple(s.get("warnings") or ())))
    return out

"""The worker side of a batch: one *share* of a batch's tasks run on this process's engine loop
(issue 15 "every core, then a cluster"; docs/runs.md#the-run-loop: every run of a process is a task on its
one engine loop).

:func:`run_share` is what a worker process executes, under a local process pool or as a Dask task.
It points the process at the caller's run store (``LEV_HOME``) and the caller's session settings,
starts the share's runs (at most ``concurrency`` at once), reports each start and end on the
batch's progress channel, and returns one summary per task. A run that cannot start (a launch
check, a script that does not compile) is a summary with status ``failed`` and the reason; only a
broken process makes the share itself fail, which the caller retries.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import field
from typing import Any, Protocol

from lev_nb.records import record

__all__ = ["Channel", "ShareSpec", "dask_share", "init_local", "local_share", "run_share", "summary_of"]

# How often the share's thread wakes to pass on progress while runs are in flight.
FORWARD_EVERY_S = 0.2


class Channel(Protocol):
    """Where a worker reports progress: a multiprocessing queue or a Dask distributed Queue."""

    def put(self, value: Any, /) -> Any:
        """Send one message."""
        ...


@record
class ShareSpec:
    """What every share of one batch needs: the blueprint (a Blueprint object or a path), the model
    spec, the caller's run store, its settings overrides, the per-process concurrency and the
    keyword options handed to ``start_run`` for each task."""

    blueprint: Any
    model: Any
    home: str
    settings: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 64
    options: dict[str, Any] = field(default_factory=dict)


def where() -> str:
    """This process, as a summary names it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def summary_of(index: int, task: str, run: Any) -> dict[str, Any]:
    """The summary of a finished run: its id, status, final output (text), error and what it
    warned the person of (one line each, with its stage)."""
    result = run.result
    return {
        "index": index, "task": task, "run_id": run.run_id, "status": run.status,
        "output": None if result is None else result.content, "error": run.error, "worker": where(),
        "warnings": [f"({w.stage}) {w.message}" if w.stage else w.message for w in run.warnings],
    }


def failed(index: int, task: str, reason: str, run_id: str | None = None) -> dict[str, Any]:
    """The summary of a task that never ran to an end: status ``failed`` and why."""
    return {"index": index, "task": task, "run_id": run_id, "status": "failed", "output": None,
            "error": reason, "worker": where()}


def _prepare(spec: ShareSpec) -> None:
    """Point this process at the caller's run store and configuration (once per process)."""
    from lev_nb.schemas import set_warm_up
    from lev_nb.store.writer import record_writer

    os.environ["LEV_HOME"] = spec.home
    set_warm_up(False)  # jsonschema is imported by the first check that needs it, not beside the runs
    record_writer().defer_durability()  # one sync per share (see run_share's end), not one per run
    if spec.settings:
        from lev_nb.settings.loader import configure

        configure(**spec.settings)


def run_share(spec: ShareSpec, items: list[tuple[int, Any]], channel: Channel | None = None,
              stop: Any = None) -> list[dict[str, Any]]:
    """Run ``items`` (``(index, task)`` pairs) on this process's engine loop and return their summaries.

    Progress goes to ``channel`` as lists of messages, at most one list every ``FORWARD_EVERY_S``:
    ``("started", index, run_id)``, ``("finished", summary)`` and, closing each list,
    ``("stages", worker, {stage: runs})``: where this worker's runs in flight are (an empty dict
    once the share is done). A put per message woke this thread and the queue's feeder thread for
    every run's start and end, each taking the interpreter lock from the engine thread, and a Dask
    Queue put is a round trip to the scheduler. Lists are sent from this thread only (a Dask Queue
    must be used from the task's own thread).

    ``stop`` (an event the caller sets when the batch is interrupted) stops the share: no run
    starts after it is set (those tasks come back ``cancelled``), and the runs in flight are
    cancelled, so each record ends saying so.
    """
    from lev_nb.catalog import load
    from lev_nb.engine.api import start_run
    from lev_nb.store.writer import record_writer

    _prepare(spec)
    blueprint = load(spec.blueprint)
    slots = threading.Semaphore(max(1, spec.concurrency))
    lock = threading.Lock()
    outbox: list[tuple[Any, ...]] = []
    summaries: dict[int, dict[str, Any]] = {}
    in_flight: dict[int, Any] = {}  # index -> its Run, until it finishes
    all_finished = threading.Event()
    sent_at = float("-inf")  # the first list goes at once: the caller learns the share has begun
    me = where()

    def finish(summary: dict[str, Any]) -> None:
        with lock:
            outbox.append(("finished", summary))
            summaries[summary["index"]] = summary
            in_flight.pop(summary["index"], None)
            if len(summaries) == len(items):
                all_finished.set()
        slots.release()

    def send(force: bool = False) -> None:
        nonlocal sent_at
        if not force and time.monotonic() - sent_at < FORWARD_EVERY_S:
            return
        with lock:
            batch = outbox[:]
            outbox.clear()
            runs = list(in_flight.values())
        sent_at = time.monotonic()
        if channel is not None:
            channel.put(batch + [("stages", me, _stage_counts(runs))])

    def stopping() -> bool:
        return stop is not None and stop.is_set()

    if not items:
        all_finished.set()
    for index, item in items:
        task, inputs = split_task(item)
        while not slots.acquire(timeout=FORWARD_EVERY_S):
            send()
        if stopping():
            finish({**failed(index, task, "the batch was interrupted before this task started"), "status": "cancelled"})
            continue

        def done(run: Any, index: int = index, task: str = task) -> None:
            finish(summary_of(index, task, run))

        try:
            # A batch shows no forms: its runs ask nobody unless run_many is told interactive=True.
            run = start_run(blueprint, task=task, model=spec.model, home=spec.home, on_complete=done,
                            **{"interactive": False, **spec.options, **inputs})
        except Exception as exc:  # this task cannot start (a launch check, a script): report, go on
            finish(failed(index, task, str(exc) or type(exc).__name__))
            continue
        with lock:
            outbox.append(("started", index, run.run_id))
            if index not in summaries:
                in_flight[index] = run
        send()
    cancelled = False
    while not all_finished.wait(FORWARD_EVERY_S):
        if stopping() and not cancelled:
            cancelled = True
            with lock:
                runs = list(in_flight.values())
            for run in runs:
                run.cancel()
        send(force=True)
    record_writer().sync()  # the records are on disk, and durable, before the caller reads them
    # The runs' spans leave too: a pool's worker process exits without the interpreter's exit handlers.
    from lev_nb.observability import flush as flush_traces

    flush_traces()
    send(force=True)
    return [summaries[index] for index, _ in items]


def split_task(item: Any) -> tuple[str, dict[str, Any]]:
    """A batch task as (task text, inputs): a string is the task alone; a dict holds the task
    under ``"task"`` (may be absent) and this run's own inputs under its other keys."""
    if isinstance(item, dict):
        inputs = dict(item)
        return str(inputs.pop("task", "") or ""), inputs
    return str(item), {}


def _stage_counts(runs: list[Any]) -> dict[str, int]:
    """How many of ``runs`` are in each stage (a run not in a stage yet counts as ``starting``)."""
    counts: dict[str, int] = {}
    for run in runs:
        stage = run.stage or "starting"
        counts[stage] = counts.get(stage, 0) + 1
    return counts


# The progress queue of a local pool's worker process and the batch's stop event (set once by the
# pool's initializer).
_LOCAL_CHANNEL: Channel | None = None
_LOCAL_STOP: Any = None


def init_local(channel: Channel, cpus: Any = None, stop: Any = None) -> None:
    """Initializer of a local pool's worker process: remember the batch's progress queue and stop
    event and, given a queue of CPU numbers, keep this process on the next one (see ``pin_cpus``).

    A Ctrl-C at the terminal reaches every process of its group, the workers too: they ignore it,
    and the caller stops them through ``stop`` (so each run ends with a record that says so)."""
    import signal

    from lev_nb.own_process import tune_collector

    global _LOCAL_CHANNEL, _LOCAL_STOP
    _LOCAL_CHANNEL = channel
    _LOCAL_STOP = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tune_collector()  # the pool's processes are lev_nb's own, as the lev command's is
    if cpus is not None:
        try:
            os.sched_setaffinity(0, {cpus.get_nowait()})
        except Exception:  # no CPU left for this worker, or no affinity on this system: run anywhere
            pass


def local_share(spec: ShareSpec, items: list[tuple[int, Any]]) -> list[dict[str, Any]]:
    """:func:`run_share` in a local pool's worker process."""
    return run_share(spec, items, _LOCAL_CHANNEL, _LOCAL_STOP)


def dask_share(spec: ShareSpec, items: list[tuple[int, Any]], queue_name: str) -> list[dict[str, Any]]:
    """:func:`run_share` as a Dask task, reporting on the batch's distributed Queue."""
    from distributed import Queue

    return run_share(spec, items, Queue(queue_name))

"""The engine thread: runs behave the same from a notebook-like running loop, a plain script, and
by the thousand."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from pathlib import Path

import pytest
from support import RUN_TIMEOUT_S, WORK_STAGE, blueprint, call, say

from lev_nb.engine.api import start_run
from lev_nb.engine.loop import engine_loop
from lev_nb.providers.scripted import ScriptedModel


def script() -> ScriptedModel:
    return ScriptedModel([call("list_dir"), say("done")])


def test_run_started_inside_a_running_loop_can_be_awaited(home: Path, workdir: Path):
    bp = blueprint(WORK_STAGE)

    async def cell():
        # As in a notebook: the caller's loop is running when the run starts.
        run = start_run(bp, task="t", model=script(), workdir=workdir, home=home)
        assert not engine_loop().in_engine_thread()
        finished = await asyncio.wait_for(run, RUN_TIMEOUT_S)
        return run, finished, threading.current_thread()

    run, finished, thread = asyncio.run(cell())
    assert finished is run
    assert run.status == "complete", run.error
    assert thread is threading.main_thread()


def test_blocking_wait_inside_a_running_loop_does_not_stall_the_run(home: Path, workdir: Path):
    bp = blueprint(WORK_STAGE)

    async def cell():
        run = start_run(bp, task="t", model=script(), workdir=workdir, home=home)
        run.wait(RUN_TIMEOUT_S)  # blocks the caller's loop; the engine loop is elsewhere
        return run

    run = asyncio.run(cell())
    assert run.status == "complete", run.error


def test_run_from_a_plain_script_with_wait(home: Path, workdir: Path):
    run = start_run(blueprint(WORK_STAGE), task="t", model=script(), workdir=workdir, home=home)
    assert run.wait(RUN_TIMEOUT_S) is run
    assert run.done()
    assert run.status == "complete", run.error
    assert run.stage_history == ["work"]


def test_wait_with_a_timeout_raises_while_the_run_is_still_going(home: Path, workdir: Path):
    class Slow:
        name = "slow"

        async def complete(self, request):
            await asyncio.sleep(3600)

    run = start_run(blueprint(WORK_STAGE), task="t", model=Slow(), workdir=workdir, home=home)
    with pytest.raises((TimeoutError, concurrent.futures.TimeoutError)):
        run.wait(0.05)
    run.cancel()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "cancelled"


def test_async_for_over_events_sees_every_event_then_ends(home: Path, workdir: Path):
    bp = blueprint(WORK_STAGE)

    async def follow():
        run = start_run(bp, task="t", model=script(), workdir=workdir, home=home)
        seen = []

        async def consume():
            async for event in run.events:
                seen.append(event.kind)

        await asyncio.wait_for(consume(), RUN_TIMEOUT_S)
        return run, seen

    run, seen = asyncio.run(follow())
    assert seen == [e.kind for e in run.events.snapshot()]
    assert seen[0] == "run_started" and seen[-1] == "completed"


def test_sync_iteration_over_events_ends_with_the_run(home: Path, workdir: Path):
    run = start_run(blueprint(WORK_STAGE), task="t", model=script(), workdir=workdir, home=home)
    kinds = [e.kind for e in run.events]
    assert kinds[-1] == "completed"
    assert run.done() or run.wait(RUN_TIMEOUT_S)


@pytest.mark.slow
def test_a_thousand_concurrent_mock_runs_all_complete(home: Path, workdir: Path):
    bp = blueprint(WORK_STAGE)
    runs = [start_run(bp, task=f"t{i}", model="mock", workdir=workdir, home=home) for i in range(1000)]
    for run in runs:
        run.wait(RUN_TIMEOUT_S * 4)
    statuses = {run.status for run in runs}
    assert statuses == {"complete"}
    assert len({run.run_id for run in runs}) == 1000
    folders = list((home / "runs").iterdir())
    assert len(folders) == 1000
    sample = json.loads((Path(runs[-1].run_dir) / "meta.json").read_text())
    assert sample["status"] == "complete" and sample["task"] == "t999"


def test_a_subscriber_sees_every_event_once_in_order_while_the_run_goes_on() -> None:
    """Replaying the past on one thread while the engine thread appends must not put a live event
    before the replayed ones (`lev run -v` printed a late event first when the run was quick)."""
    import threading

    from lev_nb.engine.events import Warning_
    from lev_nb.engine.eventlog import EventLog

    log = EventLog()
    for i in range(2000):
        log.append(Warning_("r", None, message=str(i)))
    seen: list[str] = []
    slow_start = threading.Event()

    def callback(event) -> None:
        if len(seen) == 10:
            slow_start.set()  # the writer appends while the replay is still going
        seen.append(event.message)

    def writer() -> None:
        slow_start.wait(5)
        for i in range(2000, 3000):
            log.append(Warning_("r", None, message=str(i)))

    thread = threading.Thread(target=writer)
    thread.start()
    log.subscribe(callback)
    thread.join()
    assert seen == [str(i) for i in range(3000)]


def test_readers_waiting_for_events_are_woken_and_end_with_the_log() -> None:
    """A thread blocked in ``for event in log`` and a task in ``async for`` both see every event,
    whichever arrives first, and both finish when the log closes (the log makes its condition only
    when a reader has to wait)."""
    import asyncio
    import threading

    from lev_nb.engine.events import Warning_
    from lev_nb.engine.eventlog import EventLog

    log = EventLog()
    log.append(Warning_("r", None, message="0"))
    by_thread: list[str] = []
    by_task: list[str] = []
    reader = threading.Thread(target=lambda: by_thread.extend(e.message for e in log))
    reader.start()

    async def read() -> None:
        async for event in log:
            by_task.append(event.message)

    def write() -> None:
        for i in range(1, 50):
            log.append(Warning_("r", None, message=str(i)))
            if i % 10 == 0:
                threading.Event().wait(0.01)  # let the readers catch up and wait again
        log.close()

    async def both() -> None:
        task = asyncio.ensure_future(read())
        await asyncio.sleep(0.05)  # the reader waits for the first new event
        writer = threading.Thread(target=write)
        writer.start()
        await asyncio.wait_for(task, 10)
        writer.join()

    asyncio.run(both())
    reader.join(10)
    assert not reader.is_alive()
    assert by_thread == by_task == [str(i) for i in range(50)]

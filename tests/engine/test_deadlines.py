"""Model-call deadlines sharing one timer per loop behave as asyncio.timeout does."""

from __future__ import annotations

import asyncio

import pytest

from lev_nb.engine.pipeline import deadlines
from lev_nb.engine.pipeline.deadlines import call_deadline


def test_a_call_past_its_deadline_raises_timeout_error() -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with call_deadline(0.01):
                await asyncio.sleep(5)
        assert asyncio.current_task().cancelling() == 0  # the deadline's cancel was taken back

    asyncio.run(main())


def test_a_call_in_time_leaves_nothing_behind() -> None:
    async def main() -> None:
        async with call_deadline(5):
            await asyncio.sleep(0)
        table = deadlines._table(asyncio.get_running_loop())
        assert table.due == {}
        await asyncio.sleep(0.02)  # no late cancel arrives
        assert not asyncio.current_task().cancelled()

    asyncio.run(main())


def test_calls_with_different_deadlines_each_end_at_their_own() -> None:
    ended: dict[str, str] = {}

    async def call(name: str, limit: float, takes: float) -> None:
        try:
            async with call_deadline(limit):
                await asyncio.sleep(takes)
            ended[name] = "done"
        except TimeoutError:
            ended[name] = "timed out"

    async def main() -> None:
        # The long deadline arms the timer first; the short one must re-arm it sooner.
        await asyncio.gather(call("slow-limit", 5, 0.05), call("short-limit", 0.01, 5),
                             call("in-time", 5, 0.0), call("second-short", 0.03, 5))

    asyncio.run(main())
    assert ended == {"slow-limit": "done", "short-limit": "timed out", "in-time": "done", "second-short": "timed out"}


def test_a_cancel_from_outside_stays_a_cancel() -> None:
    async def body() -> None:
        async with call_deadline(5):
            await asyncio.sleep(5)

    async def main() -> None:
        task = asyncio.create_task(body())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancel_that_comes_with_the_deadline_stays_a_cancel() -> None:
    entered: list[call_deadline] = []

    async def body() -> None:
        async with call_deadline(5) as deadline:
            entered.append(deadline)
            await asyncio.sleep(5)

    async def main() -> None:
        task = asyncio.create_task(body())
        await asyncio.sleep(0.01)
        entered[0].expire()  # the time is up, and in the same moment someone cancels the call
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_each_loop_has_its_own_timer() -> None:
    async def main() -> str:
        try:
            async with call_deadline(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "done"

    # A second loop after the first has gone: the first loop's table must not be reused.
    assert asyncio.run(main()) == "timed out"
    assert asyncio.run(main()) == "timed out"


def test_outside_a_task_it_says_so() -> None:
    async def enter() -> None:
        await call_deadline(1).__aenter__()

    coroutine = enter()
    with pytest.raises(RuntimeError):  # no running loop, so no task
        coroutine.send(None)
    coroutine.close()

"""Permits behave as asyncio.Semaphore does: the same order, counts and cancellations."""

from __future__ import annotations

import asyncio

import pytest

from lev_nb.permits import Permits


@pytest.mark.parametrize("kind", [asyncio.Semaphore, Permits])
def test_waiters_are_served_in_order_and_no_permit_is_lost(kind: type[asyncio.Semaphore]) -> None:
    async def main() -> list[str]:
        permits = kind(2)
        order: list[str] = []

        async def worker(name: str, hold: float) -> None:
            async with permits:
                order.append(name)
                await asyncio.sleep(hold)

        await asyncio.gather(*(worker(f"w{i}", 0.01) for i in range(6)))
        assert not permits.locked() and permits._value == 2
        return order

    assert asyncio.run(main()) == [f"w{i}" for i in range(6)]


@pytest.mark.parametrize("kind", [asyncio.Semaphore, Permits])
def test_a_cancelled_waiter_gives_its_turn_on(kind: type[asyncio.Semaphore]) -> None:
    async def main() -> None:
        permits = kind(1)
        await permits.acquire()
        assert permits.locked()
        waiting = asyncio.create_task(permits.acquire())
        after = asyncio.create_task(permits.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        permits.release()  # the cancelled waiter must not swallow it
        assert await asyncio.wait_for(after, 1) is True
        with pytest.raises(asyncio.CancelledError):
            await waiting
        permits.release()
        assert not permits.locked() and permits._value == 1

    asyncio.run(main())


def test_an_uncontended_permit_only_counts() -> None:
    async def main() -> None:
        permits = Permits(3)
        for _ in range(3):
            assert await permits.acquire() is True
        assert permits.locked()
        for _ in range(3):
            permits.release()
        assert permits._value == 3 and not permits._waiters

    asyncio.run(main())

"""Issue 29: ``Engine.call_async`` serves a script from an event loop, and a host function may
answer later (``Later``), so a script waiting on its host holds no Python thread.

Hundreds of evaluations wait at once on one loop; every callback runs on the loop's thread; a
failure, a dropped or never-answered ``Later`` and a cancelled caller each end the script with a
clear error instead of a stuck thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from lev_nb.rhai import Engine, Later, RhaiLimitError, RhaiRuntimeError


def test_many_scripts_wait_on_their_host_at_once_and_callbacks_run_on_the_loop() -> None:
    engine = Engine(timeout_ms=10_000)
    pending: list[tuple[Later, int]] = []
    threads: set[str] = set()

    def ask(x: int) -> Later:
        threads.add(threading.current_thread().name)
        later = Later()
        pending.append((later, x))
        return later

    engine.register_fn("ask", ask, arity=1)
    engine.register_fn("plus_one", lambda x: x + 1, arity=1)
    ast = engine.compile("fn f(x) { plus_one(ask(x)) }")

    async def main() -> list[Any]:
        calls = [asyncio.ensure_future(engine.call_async(ast, "f", i)) for i in range(300)]
        while len(pending) < 300:  # every script is waiting on its answer at the same time
            await asyncio.sleep(0.01)
        assert not any(call.done() for call in calls)
        for later, x in pending:
            assert later.resolve(x * 10)
            assert later.answered and not later.resolve(0)  # one answer only
        return await asyncio.gather(*calls)

    assert asyncio.run(main()) == [i * 10 + 1 for i in range(300)]
    assert threads == {threading.current_thread().name}


def run(engine: Engine, source: str, fn: str = "f", *args: Any) -> Any:
    async def main() -> Any:
        return await engine.call_async(engine.compile(source), fn, *args)

    return asyncio.run(main())


def test_what_a_script_throws_or_fails_on_is_raised_as_from_call() -> None:
    engine = Engine()
    with pytest.raises(RhaiRuntimeError) as info:
        run(engine, 'fn f() { throw #{kind: "api", message: "no"} }')
    assert info.value.value == {"kind": "api", "message": "no"}
    with pytest.raises(RhaiLimitError):
        run(Engine(max_operations=1000), "fn f() { loop { } }")


def test_a_later_failed_or_dropped_is_an_error_the_script_can_catch() -> None:
    engine = Engine()

    def refuse() -> Later:
        later = Later()
        later.fail("no answer for you")
        return later

    engine.register_fn("refuse", refuse, arity=0)
    engine.register_fn("forget", Later, arity=0)  # nobody keeps it: dropped at once
    source = 'fn f() { let r = ""; try { NAME(); r = "answered" } catch (err) { r = `caught: ${err}` } r }'
    assert run(engine, source.replace("NAME", "refuse")).startswith("caught: no answer for you")
    assert run(engine, source.replace("NAME", "forget")).startswith("caught: the host function never answered")


def test_a_later_never_answered_ends_at_the_scripts_deadline() -> None:
    engine = Engine(timeout_ms=300)
    kept: list[Later] = []
    engine.register_fn("wait_forever", lambda: kept.append(Later()) or kept[-1], arity=0)
    with pytest.raises(RhaiLimitError) as info:
        run(engine, "fn f() { wait_forever() }")
    assert "timed out" in str(info.value) and "wait_forever was still waiting" in str(info.value)


def test_an_answer_that_is_not_data_fails_the_call_and_tells_the_answerer() -> None:
    engine = Engine()
    answerer_saw: list[BaseException] = []

    def ask() -> Later:
        later = Later()

        def answer() -> None:
            try:
                later.resolve(object())
            except TypeError as exc:
                answerer_saw.append(exc)

        asyncio.get_running_loop().call_soon(answer)
        return later

    engine.register_fn("ask", ask, arity=0)
    with pytest.raises(RhaiRuntimeError) as info:
        run(engine, "fn f() { ask() }")
    assert "unusable value" in str(info.value)
    assert len(answerer_saw) == 1


def test_a_cancelled_caller_stops_the_script_at_its_next_host_call() -> None:
    engine = Engine(timeout_ms=20_000, max_operations=0)
    calls = [0]

    def tick() -> int:
        calls[0] += 1
        return 1

    engine.register_fn("tick", tick, arity=0)
    ast = engine.compile("fn f() { let n = 0; loop { n += tick(); } }")

    async def main() -> None:
        task = asyncio.ensure_future(engine.call_async(ast, "f"))
        while calls[0] < 50:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        seen = calls[0]
        await asyncio.sleep(0.2)  # the script has stopped: no callback ran since
        assert calls[0] <= seen + 1

    asyncio.run(main())


def test_a_synchronous_call_may_wait_on_a_later_answered_from_another_thread() -> None:
    engine = Engine(timeout_ms=5_000)

    def ask(x: int) -> Later:
        later = Later()
        threading.Timer(0.05, later.resolve, args=(x * 2,)).start()
        return later

    engine.register_fn("ask", ask, arity=1)
    assert engine.call(engine.compile("fn f(x) { ask(x) + 1 }"), "f", 20) == 41


def test_no_wake_up_is_lost_when_hundreds_of_scripts_call_back_at_once() -> None:
    """Workers post to the loop's ready list while the loop is taking it: every post must be
    served (a lost wake-up leaves its script waiting for ever, and this test at its time limit)."""
    engine = Engine(timeout_ms=60_000)
    engine.register_fn("bump", lambda x: x + 1, arity=1)
    ast = engine.compile("fn f(n) { let x = 0; for i in 0..n { x = bump(x); } x }")

    async def main() -> list[Any]:
        calls = [engine.call_async(ast, "f", 20 + i % 7) for i in range(500)]
        return await asyncio.wait_for(asyncio.gather(*calls), 120)

    for _ in range(3):
        assert asyncio.run(main()) == [20 + i % 7 for i in range(500)]

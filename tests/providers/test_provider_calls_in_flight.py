"""Model calls hold no thread of a fixed set (issue 29): a provider script waiting on its HTTP
answer holds no Python thread at all (its HTTP runs on the engine's loop, the script waits on its
evaluation thread), and a plain-function provider runs on a thread of the elastic pool
(lev_nb.providers.blocking), so more calls than any old pool width (32) are in flight at once and
``[limits] max_concurrent_inferences`` is the only limit.

The server answers no call until 40 are waiting together (a barrier), so with a ceiling under 40
the calls would never all arrive and the barrier would break: the test needs no clock."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support import reply_json

from lev_nb.engine.loop import engine_loop
from lev_nb.messages import Message, ModelRequest, ModelResponse
from lev_nb.providers.base import call_complete
from lev_nb.providers.blocking import THREADS, ElasticThreads
from lev_nb.providers.rhai_provider import RhaiProvider

CALLS = 40  # more than the 32 threads the engine loop's default executor has

SCRIPT = r'''
fn initialize(config) { #{ url: config.base_url } }
fn inference(state, request) {
    let reply = parse_json(http_post(state.url, to_json(#{ model: request.model }), #{}));
    #{ content: reply.text }
}
'''


BUSY_THREADS: list[int] = []  # the elastic pool's busy threads when all the calls were waiting


@pytest.fixture
def together() -> Iterator[str]:
    """A server on 127.0.0.1 that answers once CALLS requests are waiting at the same time."""
    barrier = threading.Barrier(CALLS, timeout=30, action=lambda: BUSY_THREADS.append(THREADS.busy))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                barrier.wait()
                reply_json(self, {"text": "together"})
            except threading.BrokenBarrierError:
                reply_json(self, {"text": "alone"})

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        barrier.abort()
        server.shutdown()
        server.server_close()


def test_more_provider_script_calls_are_in_flight_than_any_fixed_pool(home: Path, together: str) -> None:
    from lev_nb.settings import current

    (home / "providers").mkdir(parents=True)
    (home / "providers" / "wide.rhai").write_text(SCRIPT, encoding="utf-8")
    (home / "config.toml").write_text(f'[security]\nallow_local_network = true\n[model_providers.wide]\n'
                                      f'base_url = "{together}"\n', encoding="utf-8")
    provider = RhaiProvider("wide", "m", current())

    async def all_at_once() -> list[ModelResponse]:
        request = ModelRequest(provider="wide", model="m", messages=[Message("user", "hi")])
        return await asyncio.gather(*(provider.complete(request) for _ in range(CALLS)))

    BUSY_THREADS.clear()
    answers = engine_loop().submit(all_at_once()).result(120)
    assert [a.text for a in answers] == ["together"] * CALLS
    assert BUSY_THREADS == [0]  # forty calls waiting on the network, no thread waiting with them


def test_a_cancelled_provider_script_call_drops_its_connection_and_ends_its_script(home: Path) -> None:
    """Cancelling the model call (a run stopped, Ctrl-C) stops its HTTP at once: the server sees
    the connection close, and the script, whose next host call is refused, ends."""
    from lev_nb.settings import current

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    arrived, closed = threading.Event(), threading.Event()
    connections: list[socket.socket] = []

    def never_answer() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(conn)
            conn.recv(65536)
            arrived.set()
            if conn.recv(1) == b"":  # blocks until the client drops the connection
                closed.set()

    threading.Thread(target=never_answer, daemon=True).start()
    retry = r'''
fn initialize(config) { #{ url: config.base_url } }
fn inference(state, request) {
    loop { try { return #{ content: http_post(state.url, "{}", #{}) }; } catch (err) { } }
}
'''
    (home / "providers").mkdir(parents=True)
    (home / "providers" / "stuck.rhai").write_text(retry, encoding="utf-8")
    (home / "config.toml").write_text(f'[security]\nallow_local_network = true\n[model_providers.stuck]\n'
                                      f'base_url = "http://127.0.0.1:{listener.getsockname()[1]}/v1"\n',
                                      encoding="utf-8")
    provider = RhaiProvider("stuck", "m", current())

    async def cancelled() -> bool:
        request = ModelRequest(provider="stuck", model="m", messages=[Message("user", "hi")], timeout_s=60)
        call = asyncio.ensure_future(provider.complete(request))
        while not arrived.is_set():
            await asyncio.sleep(0.01)
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            return True
        return False

    try:
        assert engine_loop().submit(cancelled()).result(30)
        assert closed.wait(10)
        time.sleep(0.3)
        assert len(connections) == 1  # the script's retry after the failed call was refused
    finally:
        listener.close()


def test_a_plain_function_provider_is_not_held_to_a_fixed_pool_either() -> None:
    barrier = threading.Barrier(CALLS, timeout=30)

    class Blocking:
        name = "blocking"

        def complete(self, request: ModelRequest) -> ModelResponse:
            barrier.wait()
            return ModelResponse(text="together")

    async def all_at_once() -> list[ModelResponse]:
        request = ModelRequest(provider="blocking", model="m")
        return await asyncio.gather(*(call_complete(Blocking(), request) for _ in range(CALLS)))

    answers = engine_loop().submit(all_at_once()).result(120)
    assert {a.text for a in answers} == {"together"}


def test_the_pool_reuses_idle_threads_and_lets_them_go() -> None:
    pool = ElasticThreads(idle_exit_s=0.05)
    assert pool.submit(lambda: 1).result(10) == 1
    gate = threading.Event()
    first = pool.submit(gate.wait, 10)
    second = pool.submit(gate.wait, 10)  # the first thread is busy: a second one starts
    assert pool.threads == 2
    gate.set()
    assert first.result(10) and second.result(10)
    failed = pool.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result(10)
    done = threading.Event()
    while pool.threads:  # idle threads end on their own
        done.wait(0.01)
    assert pool.submit(lambda: "again").result(10) == "again"


def test_run_blocking_answers_fails_and_survives_a_cancelled_waiter() -> None:
    """The calling thread settles the loop's future itself: a value, an exception, and an await
    cancelled meanwhile (the call runs on, its outcome goes nowhere) all come out right."""
    import asyncio
    import contextvars

    from lev_nb.providers.blocking import THREADS, run_blocking

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    gate = threading.Event()

    async def scenario() -> tuple[str, str, int]:
        marker.set("the caller's")
        seen = await run_blocking(marker.get)  # the caller's context variables go along
        try:
            await run_blocking(lambda: 1 / 0)
        except ZeroDivisionError as exc:
            failed = type(exc).__name__
        slow = asyncio.ensure_future(run_blocking(gate.wait, 10))
        await asyncio.sleep(0.01)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        gate.set()
        return seen, failed, await run_blocking(lambda: 7)

    assert asyncio.run(scenario()) == ("the caller's", "ZeroDivisionError", 7)
    while THREADS.busy:  # the cancelled call finished on its thread, which went back to idle
        gate.wait(0.01)


def test_calls_that_finish_while_the_loop_is_busy_wake_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call finished while the loop was busy is settled by one wake-up of the loop, not one
    each (each is a write to the loop's socket and a hand-off of the interpreter lock)."""
    import asyncio
    import time

    from lev_nb.providers import blocking

    drains: list[int] = []
    drain = blocking._Settler._drain

    def counted(self: blocking._Settler) -> None:
        drains.append(len(self._done))
        drain(self)

    monkeypatch.setattr(blocking._Settler, "_drain", counted)
    calls = 30
    gate = threading.Event()

    async def scenario() -> list[int]:
        waiters = [asyncio.ensure_future(blocking.run_blocking(lambda i=i: gate.wait(10) and i)) for i in range(calls)]
        await asyncio.sleep(0)  # every call is on its thread, waiting at the gate
        gate.set()
        settler = blocking._settler(asyncio.get_running_loop())
        while len(settler._done) < calls:  # the loop stays busy until every call has finished
            time.sleep(0.005)
        return await asyncio.gather(*waiters)

    assert asyncio.run(scenario()) == list(range(calls))
    assert drains == [calls]  # one wake-up settled all of them

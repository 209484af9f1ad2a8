"""A run's usage totals go on its record as the record is written (UsageBook.settle), not on every
model call; what reads them (run.usage, run.meta, a parent rolling a child in) never sees them late."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from support import QUIET_WORK_STAGE, RUN_TIMEOUT_S, FnModel, call, say

from lev_nb.engine.record import UsageBook
from lev_nb.messages import Usage
from lev_nb.store import RunMeta


def test_calls_reach_the_meta_when_settled_and_only_then() -> None:
    book, meta = UsageBook(), RunMeta(run_id="r", agent_name="a", task="t")
    book.add_call("work", Usage(prompt_tokens=10, completion_tokens=2), 0.5, "p/m")
    assert book.stale and meta.usage == {}
    book.settle(meta)
    assert not book.stale and meta.usage == book.usage_map() and meta.cost_usd == 0.5
    settled = meta.usage
    book.settle(meta)  # nothing new: the record keeps what it has
    assert meta.usage is settled
    book.add_call("work", Usage(prompt_tokens=1, completion_tokens=1), None, "p/other")
    book.settle(meta)
    assert meta.usage["total"]["calls"] == 2 and meta.cost_usd is None  # one call without a price


def test_a_running_run_shows_every_call_so_far_and_its_record_ends_with_all(engine) -> None:
    release = threading.Event()

    async def answer(request):
        if len(model.requests) == 1:
            return call("list_dir", path=".")
        if len(model.requests) == 2:
            await asyncio.to_thread(release.wait, RUN_TIMEOUT_S)
        return say("done")

    model = FnModel(answer)
    run, _ = engine.start(QUIET_WORK_STAGE, model)
    try:
        deadline = asyncio.run(_wait_for(lambda: len(model.requests) == 2))
        assert deadline, "the run never made its second call"
        # The first call's totals, whether or not the recorder has written them yet.
        assert run.usage["total"]["calls"] == 1 and run.usage["by_stage"]["work"]["prompt_tokens"] == 10
        assert run.meta["usage"]["total"]["calls"] == 1
    finally:
        release.set()
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    on_disk = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert on_disk["usage"]["total"]["calls"] == 2 and on_disk["usage"]["total"]["completion_tokens"] == 4
    assert run.usage["total"] == on_disk["usage"]["total"]


async def _wait_for(condition, timeout: float = RUN_TIMEOUT_S) -> bool:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return False

"""Issue 25: ``[limits] max_concurrent_inferences_by_model`` gives a model its own pool in place of
the overall one, and ``max_concurrent_inferences_by_provider`` adds a pool in front shared by every
model of that provider (upstream configuration.md); a 0 is read as 1, a negative width is refused."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from support import say

import lev_nb
from lev_nb.engine.pipeline.pools import inference_slots
from lev_nb.providers import ScriptedModel
from lev_nb.settings import ConfigError, load


def _settings(tmp_path: Path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load(path)


def _inside(settings, calls: list[tuple[str, str]]) -> list[int]:
    """How many of ``calls`` (provider, model) hold their slots at once, step by step: every call
    enters, then they are let go one at a time (no clock involved: the loop is stepped)."""

    async def main() -> list[int]:
        inside: set[int] = set()
        gates = [asyncio.Event() for _ in calls]

        async def one(i: int, provider: str, model: str) -> None:
            async with inference_slots(settings, provider, model):
                inside.add(i)
                await gates[i].wait()
                inside.discard(i)

        tasks = [asyncio.create_task(one(i, p, m)) for i, (p, m) in enumerate(calls)]
        seen = []
        for _ in calls:
            for _ in range(20):
                await asyncio.sleep(0)
            seen.append(len(inside))
            gates[min(inside)].set()
        await asyncio.gather(*tasks)
        return seen

    return asyncio.run(main())


def test_without_a_pool_of_their_own_the_overall_cap_applies(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "[limits]\nmax_concurrent_inferences = 8\n")
    assert _inside(settings, [("cerebras", "a"), ("cerebras", "b"), ("openai", "c")])[0] == 3


def test_a_provider_pool_bounds_every_model_it_serves_together(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "[limits.max_concurrent_inferences_by_provider]\ncerebras = 1\n")
    seen = _inside(settings, [("cerebras", "a"), ("cerebras", "b"), ("openai", "c")])
    assert seen[0] == 2  # one cerebras call and the openai one
    assert seen == [2, 1, 1] or seen == [2, 2, 1]


def test_a_model_pool_replaces_the_overall_cap_for_that_model(tmp_path: Path) -> None:
    settings = _settings(tmp_path, '[limits]\nmax_concurrent_inferences = 1\n'
                                   '[limits.max_concurrent_inferences_by_model]\n"gpt-oss-120b" = 3\n"openai/gpt-x" = 1\n')
    # the named model runs three at once although the overall pool is one wide
    assert _inside(settings, [("cerebras", "gpt-oss-120b")] * 3)[0] == 3
    # keyed by provider/model too; a model named nowhere shares the overall pool of one
    assert _inside(settings, [("openai", "gpt-x"), ("openai", "gpt-x"), ("openai", "other")])[0] == 2


def test_zero_is_read_as_one_and_negative_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = _settings(tmp_path, "[limits.max_concurrent_inferences_by_provider]\nzeroed = 0\n")
    assert _inside(settings, [("zeroed", "a"), ("zeroed", "b")])[0] == 1
    assert "zeroed = 0 is read as 1" in caplog.text
    with pytest.raises(ConfigError, match=r"config.toml:2.*cannot be -2 calls wide"):
        _settings(tmp_path, "[limits.max_concurrent_inferences_by_provider]\nx = -2\n")


class Counting(ScriptedModel):
    """A scripted model that counts the calls in flight at once, across instances."""

    lock = threading.Lock()
    now = 0
    most = 0
    providers: set[str] = set()

    async def complete(self, request):  # type: ignore[override]
        cls = type(self)
        with cls.lock:
            cls.now += 1
            cls.most = max(cls.most, cls.now)
            cls.providers.add(request.provider)
        try:
            for _ in range(5):  # stay in flight over a few loop turns, so the others could overlap
                await asyncio.sleep(0.01)
            return await super().complete(request)
        finally:
            with cls.lock:
                cls.now -= 1


AGENT = """
[agent]
name = "pooled"
[context.regions]
system = { kind = "pinned", max_tokens = 1000 }
conversation = { kind = "sliding_window", max_items = 10, max_tokens = 4000 }
[stages.only]
max_iterations = 2
nudge = { enabled = false }
[stages.only.transitions]
"""


def test_runs_sharing_a_provider_pool_of_one_never_overlap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[limits.max_concurrent_inferences_by_provider]\nscripted = 1\n")
    monkeypatch.setenv("LEV_HOME", str(home))
    agent = lev_nb.load(AGENT)
    runs = []
    for i in range(4):
        (tmp_path / f"w{i}").mkdir()
        runs.append(agent.run("t", model=Counting([say("done")]), workdir=tmp_path / f"w{i}", home=home))
    for run in runs:
        run.wait(60)
        assert run.status == "complete", run.error
    assert Counting.providers == {"scripted"} and Counting.most == 1

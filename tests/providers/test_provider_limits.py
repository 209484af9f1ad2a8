"""``[rate_limits.<provider>]`` and ``[model_capabilities.<model>]`` as the upstream reads them, and a
provider whose ``complete`` is a plain function: the rate limit holds calls back to its minute
(and says so once), a capability correction changes the window a run budgets with, a stage with
tools on a model that cannot call them is refused at launch, and a sync provider runs a whole run."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import lev_nb
from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, Usage
from lev_nb.providers import register_provider
from lev_nb.providers.ratelimit import RATE_LIMITS, RateLimiters
from lev_nb.settings import ConfigError, load
from lev_nb.settings.model import RateLimit


@pytest.fixture(autouse=True)
def _registry_restored() -> object:
    """register_provider is process-wide: each test leaves the registry as it found it."""
    from lev_nb.providers import resolve

    before = dict(resolve._FACTORIES)
    yield
    resolve._FACTORIES.clear()
    resolve._FACTORIES.update(before)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_rate_limit_holds_calls_back_to_their_minute() -> None:
    time = FakeTime()
    limits = RateLimiters(clock=time.clock, sleep=time.sleep)
    per_minute = RateLimit(requests_per_minute=2)

    async def three() -> None:
        for _ in range(2):
            await limits.admit("openai", per_minute, 10)
            time.now += 5
        await limits.admit("openai", per_minute, 10)  # the third waits for the first to age out

    asyncio.run(three())
    assert time.slept == [50.0] and time.now == 60.0
    # Tokens: a call that would pass the budget waits; one alone may exceed it.
    time.slept.clear()
    tokens = RateLimit(tokens_per_minute=1000)

    async def heavy() -> None:
        first = await limits.admit("anthropic", tokens, 600)
        limits.settle(first, 900)  # it really used 900
        await limits.admit("anthropic", tokens, 200)

    asyncio.run(heavy())
    assert time.slept == [60.0]
    assert asyncio.run(limits.admit("other", None, 10**9)) is None  # no limit, no wait


class Plain:
    """A provider with a plain (blocking) complete: it runs on a worker thread."""

    def __init__(self, name: str = "plain") -> None:
        self.name = name
        self.threads: set[int] = set()
        self.calls = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.threads.add(threading.get_ident())
        self.calls += 1
        if request.on_text is not None:
            request.on_text("thinking ")
        if self.calls == 1 and request.tools:
            return ModelResponse(tool_calls=[ToolCall("c1", "list_dir", {"path": "."})], finish_reason="tool_use",
                                 usage=Usage(prompt_tokens=50, completion_tokens=5))
        return ModelResponse(text="done", usage=Usage(prompt_tokens=60, completion_tokens=5))


TOOLED = """
[agent]
name = "tooled"
[stages.only]
model = { provider = "plain", model = "p-1" }
available_tools = ["list_dir"]
nudge = { enabled = false }
[stages.only.transitions]
"""


def test_a_provider_with_a_plain_complete_runs_a_whole_run(home: Path, workdir: Path) -> None:
    provider = Plain()
    run = lev_nb.load(TOOLED).run("go", model=provider, home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    assert provider.calls == 2 and threading.get_ident() not in provider.threads  # off the engine loop
    texts = [e.text for e in run.events.snapshot() if e.kind == "model_text"]
    assert texts and "thinking" in "".join(texts)


def test_a_registered_provider_obeys_its_rate_limit_and_says_so(home: Path, workdir: Path, monkeypatch) -> None:
    time = FakeTime()
    monkeypatch.setattr(RATE_LIMITS, "_clock", time.clock)
    monkeypatch.setattr(RATE_LIMITS, "_sleep", time.sleep)
    RATE_LIMITS.reset()
    provider = Plain()
    register_provider("plain", lambda model, options: provider)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[rate_limits.plain]\nrequests_per_minute = 1\n")
    run = lev_nb.load(TOOLED).run("go", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error
    assert time.slept == [60.0]  # the second call waited for the first one's minute
    warnings = [e.message for e in run.events.snapshot() if e.kind == "warning"]
    assert sum("[rate_limits.plain]" in w for w in warnings) == 1
    RATE_LIMITS.reset()


def test_a_model_without_tool_support_is_refused_for_a_stage_with_tools(home: Path, workdir: Path) -> None:
    register_provider("plain", lambda model, options: Plain())
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[model_capabilities."p-1"]\nsupports_tools = false\n')
    with pytest.raises(lev_nb.LaunchError) as info:
        lev_nb.load(TOOLED).run("go", home=home, workdir=workdir)
    assert str(info.value).startswith("stage 'only' of blueprint 'tooled' offers tools, and plain/p-1 cannot call tools")
    # The same model on a stage without tools runs.
    bare = TOOLED.replace('available_tools = ["list_dir"]\n', "")
    run = lev_nb.load(bare).run("go", home=home, workdir=workdir).wait(60)
    assert run.status == "complete", run.error


def test_a_capability_correction_sets_the_window_a_run_budgets_with(home: Path) -> None:
    from lev_nb.engine.plan.build import plan_from_blueprint as build_plan

    toml = """
[agent]
name = "windowed"
[context.regions]
notes = { kind = "pinned", budget = "50%" }
[stages.only]
model = { provider = "ollama", model = "my-llama" }
[stages.only.transitions]
"""
    home.mkdir(parents=True, exist_ok=True)
    before = build_plan(lev_nb.load(toml)).window_tokens
    (home / "config.toml").write_text('[model_capabilities.my-llama]\nmax_context_tokens = 32768\n')
    assert before != 32768 and build_plan(lev_nb.load(toml)).window_tokens == 32768


def test_misspelt_capability_and_rate_limit_keys_are_told(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[model_capabilities.my-llama]\nmax_context_token = 32768\n')
    (warning,) = load(path, environ={}).warnings  # a warning, as the upstream gives: the file still loads
    assert "max_context_token" in warning and "did you mean 'max_context_tokens'?" in warning
    path.write_text('[rate_limits.openai]\nrequests_per_minut = 5\n')
    (warning,) = load(path, environ={}).warnings
    assert "requests_per_minut" in warning
    path.write_text('[rate_limits.openai]\nrequests_per_minute = "five"\n')
    with pytest.raises(ConfigError):  # a wrong type is still an error
        load(path, environ={})

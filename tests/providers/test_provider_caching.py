"""Caching pays in the simplest blueprint: a stage's own system prompt holds still while the stage
runs, so a long one is sent with a cache marker to the Messages API (read back at the cached rate
from the second call on), and sent byte-identical to an OpenAI-style server, whose prefix-cached
tokens are counted as cached input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_standin import ChatStandIn, Reply, completion, serve_chat, tool_call
from standin import API_KEY, StandIn, message, serve, text, tool_use

import lev_nb
from lev_nb.engine.pipeline.inference import RetryPolicy

RULES = "Follow the house rules for every answer, and say which rule applied. " * 150


def simplest(provider: str, model: str) -> str:
    return f"""
[agent]
name = "simplest"
[stages.only]
model = {{ provider = "{provider}", model = "{model}" }}
system_prompt = \"\"\"{RULES}\"\"\"
available_tools = ["list_dir"]
nudge = {{ enabled = false }}
[stages.only.transitions]
"""


@pytest.fixture
def messages_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    for server in serve():
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatStandIn]:
    for server in serve_chat():
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


def test_a_long_stage_prompt_carries_a_cache_marker_on_every_call(messages_api: StandIn, home: Path,
                                                                  workdir: Path) -> None:
    messages_api.queue(
        Reply(body=message(tool_use("toolu_1", "list_dir", {"path": "."}), stop="tool_use",
                           usage={"input_tokens": 30, "output_tokens": 5, "cache_creation_input_tokens": 2400})),
        Reply(body=message(text("done"), usage={"input_tokens": 60, "output_tokens": 5,
                                                "cache_read_input_tokens": 2400})),
    )
    run = lev_nb.load(simplest("anthropic", "claude-sonnet-4-6")).run(
        "answer", home=home, workdir=workdir, retry=RetryPolicy(max_attempts=1)).wait(60)
    assert run.status == "complete", run.error
    systems = [r.body["system"] for r in messages_api.requests]
    assert len(systems) == 2 and systems[0] == systems[1]
    for system in systems:
        marked = [block for block in system if block.get("cache_control") == {"type": "ephemeral"}]
        assert marked and RULES.strip()[:40] in marked[0]["text"]
    usage = run.meta["usage"]["total"]
    assert usage["cache_write_tokens"] == 2400 and usage["cached_tokens"] == 2400


def test_an_openai_stage_resends_its_prompt_unchanged_and_counts_the_cached_prefix(chat: ChatStandIn, home: Path,
                                                                                   workdir: Path) -> None:
    chat.queue(
        Reply(body=completion("", tool_call("call_1", "list_dir", {"path": "."}),
                              usage={"prompt_tokens": 2430, "completion_tokens": 5, "total_tokens": 2435})),
        Reply(body=completion("done", usage={"prompt_tokens": 2470, "completion_tokens": 5, "total_tokens": 2475,
                                             "prompt_tokens_details": {"cached_tokens": 2304}})),
    )
    run = lev_nb.load(simplest("openai", "gpt-4.1")).run(
        "answer", home=home, workdir=workdir, retry=RetryPolicy(max_attempts=1)).wait(60)
    assert run.status == "complete", run.error
    first, second = (r.body for r in chat.requests)
    assert first["messages"][0] == second["messages"][0] and RULES.strip()[:40] in first["messages"][0]["content"]
    assert first["prompt_cache_key"] == second["prompt_cache_key"]
    usage = run.meta["usage"]["total"]
    assert usage["cached_tokens"] == 2304 and usage["prompt_tokens"] == 2430 + 2470 - 2304
    # Billed at the cached rate: 2304 cached tokens at $0.50/M rather than $2/M.
    expected = ((2430 + 2470 - 2304) * 2.0 + 2304 * 0.50 + 10 * 8.0) / 1_000_000
    assert usage["cost_usd"] == pytest.approx(expected)

"""OpenAIProvider against a Chat Completions stand-in on 127.0.0.1: the real ``openai`` SDK on the wire.

The stand-in (tests/chat_standin.py) records every request and streams canned answers as
``chat.completion.chunk`` events, so the tests check the request body, the assembly of streamed
text and tool-call deltas, usage with prefix-cached tokens, each error classification (a 429 with
Retry-After, a 500, an exhausted quota, an unknown model), that the SDK never retries by itself,
and whole runs through ``lev run``: on ``openai/...``, across two providers, on an Ollama-style
server with no key, and on a configured ``[model_providers.<name>]`` server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_standin import ChatStandIn, Recorded, Reply, chat_error, completion, serve_chat, tool_call
from standin import API_KEY, StandIn, message, serve, text

import lev_nb
from lev_nb.engine.pipeline.inference import RetryPolicy
from lev_nb.messages import Message, ModelRequest, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from lev_nb.providers import ProviderError, provider_for
from lev_nb.providers.openai import OpenAIProvider

RETRY = RetryPolicy(max_attempts=3, base_delay_s=0)


@pytest.fixture
def chat() -> Iterator[ChatStandIn]:
    yield from serve_chat()


@pytest.fixture
def provider(chat: ChatStandIn) -> OpenAIProvider:
    return OpenAIProvider("gpt-default", api_key=API_KEY, base_url=f"{chat.url}/v1")


def ask(provider: OpenAIProvider, request: ModelRequest | None = None) -> Any:
    return asyncio.run(provider.complete(request or ModelRequest(provider="openai", model="gpt-4o",
                                                                 messages=[Message("user", "hi")])))


def failure(provider: OpenAIProvider) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        ask(provider)
    return info.value


# ------------------------------------------------------------------------------------- request
def test_the_request_has_the_chat_completions_shape(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    chat.queue(Reply(body=completion("ok")))
    request = ModelRequest(
        provider="openai", model="gpt-4o", system=["You are careful.", "", "Stage: work"],
        messages=[
            Message("user", "write a file"),
            Message("assistant", [TextBlock("sure"), ToolUseBlock("call_1", "write_file", {"path": "a.txt"})]),
            Message("user", [ToolResultBlock("call_1", "disk full", is_error=True), TextBlock("go on")]),
        ],
        tools=[ToolSpec("write_file", "Write a file.", {"type": "object", "properties": {"path": {"type": "string"}}})],
        max_tokens=321, temperature=0.2, extra={"top_p": 0.9, "think": False},
    )
    assert ask(provider, request).text == "ok"
    sent = chat.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    body = sent.body
    assert body["model"] == "gpt-4o" and body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 321 and body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert body["think"] is False  # a server's own field (Ollama's) reaches it as written
    assert body["messages"] == [
        {"role": "system", "content": "You are careful.\n\nStage: work"},  # one system message
        {"role": "user", "content": "write a file"},
        {"role": "assistant", "content": "sure", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": '{"path": "a.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: disk full"},
        {"role": "user", "content": "go on"},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "write_file", "description": "Write a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def test_openai_itself_gets_max_completion_tokens_and_a_stable_cache_key(chat: ChatStandIn, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    chat.responder = lambda r: Reply(body=completion("ok"))
    built = provider_for("openai", "gpt-5-mini")
    for _ in range(2):
        asyncio.run(built.complete(ModelRequest(provider="openai", model="gpt-5-mini", system=["long rules"],
                                                messages=[Message("user", "hi")], max_tokens=99, stage="work",
                                                temperature=0.7)))
    first, second = (r.body for r in chat.requests)
    assert first["max_completion_tokens"] == 99 and "max_tokens" not in first
    assert "temperature" not in first  # a reasoning model refuses one (the catalogue says so)
    assert first["prompt_cache_key"] == second["prompt_cache_key"] and first["prompt_cache_key"].startswith("lev-work-")


# ------------------------------------------------------------------------------------ streaming
def test_streamed_text_and_tool_call_deltas_are_assembled(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    body = completion("Let me look.", tool_call("call_a", "read_file", {"path": "notes/a.txt"}),
                      tool_call("call_b", "list_dir", {"path": "."}),
                      usage={"prompt_tokens": 2000, "completion_tokens": 40, "total_tokens": 2040,
                             "prompt_tokens_details": {"cached_tokens": 1536}})
    chat.queue(Reply(body=body, chunk_chars=3))
    seen: list[str] = []
    request = ModelRequest(provider="openai", model="gpt-4o", messages=[Message("user", "hi")], on_text=seen.append)
    response = ask(provider, request)
    assert response.text == "Let me look." and len(seen) > 1 and "".join(seen) == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "read_file", {"path": "notes/a.txt"}), ("call_b", "list_dir", {"path": "."})]
    assert response.finish_reason == "tool_use"
    # prompt_tokens counts fresh input only; the prefix read from the cache is counted apart.
    usage = response.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (464, 1536, 40)


def test_a_stream_cut_before_the_answer_finished_is_a_transport_error(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    chat.queue(Reply(body=completion("a long answer that never ends"), cut_after=3))
    error = failure(provider)
    assert error.kind == "transport" and error.transient


def test_a_non_streaming_provider_maps_the_whole_completion(chat: ChatStandIn) -> None:
    chat.queue(Reply(body=completion(None, tool_call("c1", "list_dir", {"path": "."}))))
    quiet = OpenAIProvider("gpt-4o", api_key=API_KEY, base_url=f"{chat.url}/v1", streaming=False)
    response = ask(quiet)
    assert response.tool_calls[0].arguments == {"path": "."} and response.usage.prompt_tokens == 12
    assert "stream" not in chat.requests[0].body


# --------------------------------------------------------------------------------------- errors
def test_a_429_carries_retry_after_and_the_sdk_does_not_retry(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    chat.queue(Reply(429, chat_error("Rate limit reached for gpt-4o", "rate_limit_exceeded"), headers={"retry-after": "7"}))
    error = failure(provider)
    assert error.kind == "rate_limited" and error.retry_after == 7.0 and error.transient
    assert "Rate limit reached" in error.message and "\n" not in error.message
    assert len(chat.requests) == 1  # max_retries=0: the engine's retry policy is the only one


def test_a_500_is_a_transient_server_error(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    chat.queue(Reply(500, chat_error("The server had an error", kind="server_error")))
    error = failure(provider)
    assert error.kind == "server" and error.transient and len(chat.requests) == 1


def test_an_exhausted_quota_is_credits_not_a_rate_limit(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    chat.queue(Reply(429, chat_error("You exceeded your current quota", "insufficient_quota")))
    error = failure(provider)
    assert error.kind == "credits" and not error.transient and error.unusable_reason == "credits"


def test_an_unknown_model_is_one_clear_line(chat: ChatStandIn, provider: OpenAIProvider) -> None:
    chat.queue(Reply(404, chat_error("The model `gpt-9` does not exist or you do not have access to it.",
                                     "model_not_found")))
    error = failure(provider)
    assert error.kind == "unknown_model" and error.unusable_reason == "unknown model"
    assert error.message == ("HTTP 404: the OpenAI server has no such model: The model `gpt-9` does not exist "
                             "or you do not have access to it. (model_not_found)")


def test_a_missing_key_and_an_unreachable_server_are_named(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    error = failure(provider_for("openai", "gpt-4o"))  # type: ignore[arg-type]
    assert error.kind == "auth" and "OPENAI_API_KEY" in error.message
    closed = OpenAIProvider("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    error = failure(closed)
    assert error.kind == "transport" and "127.0.0.1:9" in error.message


# ------------------------------------------------------------------------------------ whole runs
AGENT = """
[agent]
name = "two-step"
[stages.look]
model = { provider = "openai", model = "gpt-4o" }
available_tools = ["list_dir"]
nudge = { enabled = false }
[stages.look.transitions.write]
[stages.write]
model = { provider = "openai", model = "gpt-4o-mini" }
nudge = { enabled = false }
[stages.write.transitions]
"""


def agent_dir(tmp_path: Path, toml: str) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "agent.leviath").write_text(toml)
    return folder


def by_turn(answers: list[dict[str, Any]]) -> Any:
    """Answer stage turns in order; any routing question with the only target there is."""
    queue = list(answers)

    def answer(recorded: Recorded) -> Reply:
        return Reply(body=queue.pop(0) if queue else completion("done"))
    return answer


def test_a_multi_stage_run_on_openai_through_lev_run(chat: ChatStandIn, lev, tmp_path: Path, workdir: Path,
                                                      monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    (workdir / "notes.txt").write_text("x")
    chat.responder = by_turn([
        completion("", tool_call("call_1", "list_dir", {"path": "."}),
                   usage={"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010,
                          "prompt_tokens_details": {"cached_tokens": 0}}),
        completion("looked", usage={"prompt_tokens": 1100, "completion_tokens": 10, "total_tokens": 1110,
                                    "prompt_tokens_details": {"cached_tokens": 1024}}),
    ])
    result = lev("run", str(agent_dir(tmp_path, AGENT)), "--task", "look around", "--workdir", str(workdir),
                 "--json")
    assert result.returncode == 0, result.stderr
    meta = json.loads(result.stdout)
    assert meta["status"] == "complete", meta.get("error")
    assert meta["stage_history"] == ["look", "write"]
    models = [r.body["model"] for r in chat.requests]
    assert models[0] == "gpt-4o" and models[-1] == "gpt-4o-mini"
    # The tool result went back as a tool message answering the call.
    second = chat.requests[1].body["messages"]
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_1" and "notes.txt" in m["content"] for m in second)
    usage = meta["usage"]["total"]
    assert usage["cached_tokens"] >= 1024 and usage["calls"] == len(chat.requests)
    assert usage["cost_usd"] is not None and usage["cost_usd"] > 0  # priced from the dated table


def test_retries_honour_retry_after_and_a_500_then_the_run_completes(chat: ChatStandIn, home: Path, workdir: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    chat.queue(Reply(429, chat_error("slow down", "rate_limit_exceeded"), headers={"retry-after": "0"}),
               Reply(500, chat_error("oops", kind="server_error")))
    chat.responder = lambda r: Reply(body=completion("fine"))
    toml = AGENT.replace('available_tools = ["list_dir"]\n', "")
    run = lev_nb.load(toml).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "complete", run.error
    retries = [e for e in run.events.snapshot() if e.kind == "model_retry"]
    assert [r.attempt for r in retries] == [1, 2] and "slow down" in retries[0].reason


def test_an_exhausted_quota_pauses_the_run_with_what_to_do(chat: ChatStandIn, home: Path, workdir: Path,
                                                          monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    chat.responder = lambda r: Reply(429, chat_error("You exceeded your current quota", "insufficient_quota"))
    toml = AGENT.replace('{ provider = "openai", model = "gpt-4o" }',
                         '{ provider = "openai", model = "gpt-4o", allow_user_default = false }')
    run = lev_nb.load(toml).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "paused", run.error
    assert "out of credits" in run.pause_reason and "exceeded your current quota" in run.pause_reason
    assert len(chat.requests) == 1  # credits are not retried


CROSSING = """
[agent]
name = "crossing"
[stages.draft]
model = { models = [{ provider = "anthropic", model = "claude-opus-4-6" }, { provider = "openai", model = "gpt-4o" }] }
nudge = { enabled = false }
[stages.draft.transitions.review]
[stages.review]
model = { provider = "anthropic", model = "claude-haiku-4-5" }
nudge = { enabled = false }
[stages.review.transitions]
"""


@pytest.fixture
def messages_api(monkeypatch) -> Iterator[StandIn]:
    for server in serve():
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def test_a_run_whose_stages_use_two_providers(chat: ChatStandIn, messages_api: StandIn, home: Path,
                                              workdir: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    toml = CROSSING.replace('{ provider = "anthropic", model = "claude-opus-4-6" }, ', "")
    toml = toml.replace('models = [{ provider = "openai", model = "gpt-4o" }]', 'provider = "openai", model = "gpt-4o"')
    chat.responder = lambda r: Reply(body=completion("drafted on openai"))
    messages_api.responder = lambda r: Reply(body=message(text("reviewed on anthropic")))
    run = lev_nb.load(toml).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "complete", run.error
    assert chat.requests and messages_api.requests
    assert set(run.meta["usage"]["total"]["models"]) == {"openai/gpt-4o", "anthropic/claude-haiku-4-5"}


def test_a_fallback_list_crosses_from_anthropic_to_openai(chat: ChatStandIn, messages_api: StandIn, home: Path,
                                                          workdir: Path, monkeypatch) -> None:
    from standin import error_body

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    chat.responder = lambda r: Reply(body=completion("drafted on openai"))

    def anthropic(recorded: Recorded) -> Reply:
        if recorded.body["model"] == "claude-opus-4-6":
            return Reply(402, error_body("billing_error", "Your credit balance is too low"))
        return Reply(body=message(text("reviewed")))
    messages_api.responder = anthropic
    run = lev_nb.load(CROSSING).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "complete", run.error
    fallbacks = [e for e in run.events.snapshot() if e.kind == "model_fallback"]
    assert fallbacks and "openai/gpt-4o" in str(fallbacks[0].__dict__)
    assert [r.body["model"] for r in chat.requests] == ["gpt-4o"]


LOCAL = """
[agent]
name = "local"
[stages.only]
model = { provider = "ollama", model = "qwen3:8b" }
nudge = { enabled = false }
[stages.only.transitions]
"""


def test_an_ollama_style_server_needs_no_key(chat: ChatStandIn, home: Path, workdir: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", chat.url.removeprefix("http://"))  # host:port, as Ollama spells it
    chat.responder = lambda r: Reply(body=completion("local answer", model="qwen3:8b"))
    run = lev_nb.load(LOCAL).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "complete", run.error
    sent = chat.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.body["model"] == "qwen3:8b"
    assert run.meta["usage"]["total"]["cost_usd"] == 0.0  # a local model bills nothing


def test_an_unknown_ollama_model_fails_the_stage_in_one_line(chat: ChatStandIn, home: Path, workdir: Path,
                                                           monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", chat.url)
    chat.responder = lambda r: Reply(404, {"error": {"message": 'model "qwen3:8b" not found, try pulling it first',
                                                     "type": "api_error", "param": None, "code": None}})
    toml = LOCAL.replace('model = "qwen3:8b" }', 'model = "qwen3:8b", allow_user_default = false }')
    run = lev_nb.load(toml).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "error"
    assert 'no such model: model "qwen3:8b" not found, try pulling it first' in run.error
    assert "\n" not in run.error


def test_a_typo_in_a_model_name_is_named_with_the_model_meant(chat: ChatStandIn, lev, tmp_path: Path,
                                                              workdir: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{chat.url}/v1")
    chat.responder = lambda r: Reply(404, chat_error("The model `gpt-4o-mnii` does not exist or you do not have "
                                                     "access to it.", "model_not_found"))
    result = lev("run", str(agent_dir(tmp_path, AGENT)), "--task", "go", "--workdir", str(workdir),
                 "--model", "openai/gpt-4o-mnii")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "no such model: The model `gpt-4o-mnii` does not exist" in last
    assert last.endswith("(did you mean openai/gpt-4o-mini?)")


def test_a_configured_openai_compatible_server(chat: ChatStandIn, home: Path, workdir: Path, monkeypatch) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[model_providers.lab]\nbase_url = "{chat.url}/v1"\napi_key_env = "LAB_KEY"\n')
    monkeypatch.setenv("LAB_KEY", "lab-secret")
    chat.responder = lambda r: Reply(body=completion("served by the lab"))
    toml = LOCAL.replace('provider = "ollama", model = "qwen3:8b"', 'provider = "lab", model = "llama-3-70b"')
    run = lev_nb.load(toml).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "complete", run.error
    assert chat.requests[0].headers["authorization"] == "Bearer lab-secret"
    # Without its key the launch names the variable to set.
    monkeypatch.delenv("LAB_KEY")
    with pytest.raises(lev_nb.LaunchError) as info:
        lev_nb.load(toml).run("go", home=home, workdir=workdir)
    assert "LAB_KEY is not set" in str(info.value)


def test_keys_and_gateways_from_the_providers_table(chat: ChatStandIn, home: Path, workdir: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers]\nopenai_api_key = "sk-from-file"\nopenai_base_url = "{chat.url}/v1"\n')
    chat.responder = lambda r: Reply(body=completion("ok"))
    toml = LOCAL.replace('provider = "ollama", model = "qwen3:8b"', 'provider = "openai", model = "gpt-4o"')
    run = lev_nb.load(toml).run("go", home=home, workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "complete", run.error
    assert chat.requests[0].headers["authorization"] == "Bearer sk-from-file"


def test_model_override_names_openai_and_ollama(chat: ChatStandIn, lev, tmp_path: Path, workdir: Path,
                                                monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", chat.url)
    chat.responder = lambda r: Reply(body=completion("ok"))
    folder = agent_dir(tmp_path, AGENT.replace('available_tools = ["list_dir"]\n', ""))
    result = lev("run", str(folder), "--task", "t", "--workdir", str(workdir), "--model", "ollama/llama3")
    assert result.returncode == 0, result.stderr
    assert {r.body["model"] for r in chat.requests} == {"llama3"}
    result = lev("run", str(folder), "--task", "t", "--workdir", str(workdir), "--model", "openai/gpt-4o")
    assert result.returncode != 0 and "OPENAI_API_KEY" in result.stderr and "cannot call" not in result.stderr

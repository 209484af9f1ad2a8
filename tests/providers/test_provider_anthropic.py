"""AnthropicProvider against a Messages API stand-in on 127.0.0.1: the real SDK on the wire.

The stand-in (tests/standin.py) records every request (path, headers, JSON body) and answers with
canned replies, so the tests check the exact request body, the headers the SDK sends, the response mapping, each error
classification (spec/runtime.md §13.1), that the SDK itself never retries, and a whole run.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, error_body, message, serve, text, tool_use

from lev_nb.messages import Message, ModelRequest, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from lev_nb.providers import AnthropicProvider, ProviderError, provider_for
from lev_nb.providers.anthropic import shared_client


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    yield from serve()


@pytest.fixture
def provider(stand_in: StandIn) -> AnthropicProvider:
    return AnthropicProvider("claude-default", api_key=API_KEY, base_url=stand_in.url)


def ask(provider: AnthropicProvider, request: ModelRequest | None = None) -> Any:
    return asyncio.run(provider.complete(request or ModelRequest(provider="anthropic", model="claude-sonnet-4-6",
                                                                 messages=[Message("user", "hi")])))


def failure(provider: AnthropicProvider, request: ModelRequest | None = None) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        ask(provider, request)
    return info.value


# ------------------------------------------------------------------------------------- request
def test_request_body_has_the_messages_api_shape(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(body=message(text("ok"))))
    request = ModelRequest(
        provider="anthropic",
        model="claude-sonnet-4-6",
        system=["You are careful.", "", "Stage: work"],
        messages=[
            Message("user", "write a file"),
            Message("assistant", [TextBlock("sure"), TextBlock(""), ToolUseBlock("tu_1", "write_file", {"path": "a.txt"})]),
            Message("user", [ToolResultBlock("tu_1", "[error] disk full", is_error=True), TextBlock("go on")]),
        ],
        tools=[ToolSpec("write_file", "Write a file.", {"type": "object", "properties": {"path": {"type": "string"}}})],
        max_tokens=321,
        temperature=None,
        extra={"top_p": 0.9, "stop_sequences": ["END"]},
    )
    ask(provider, request)
    [sent] = stand_in.requests
    assert sent.path == "/v1/messages"
    assert sent.body == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 321,
        "system": [{"type": "text", "text": "You are careful."}, {"type": "text", "text": "Stage: work"}],
        "messages": [
            {"role": "user", "content": "write a file"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "sure"},
                {"type": "tool_use", "id": "tu_1", "name": "write_file", "input": {"path": "a.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "[error] disk full", "is_error": True},
                {"type": "text", "text": "go on"},
            ]},
        ],
        "tools": [{"name": "write_file", "description": "Write a file.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "stream": True,
    }


def test_single_system_block_is_a_string_and_zero_temperature_is_sent(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(body=message(text("ok"))))
    ask(provider, ModelRequest(provider="anthropic", model="", system=["Be brief."],
                               messages=[Message("user", "hi")], temperature=0.0))
    body = stand_in.requests[0].body
    assert body["system"] == "Be brief."
    assert body["temperature"] == 0.0
    assert body["model"] == "claude-default"  # the provider's model fills an empty request model
    assert "tools" not in body


def test_sdk_headers_carry_the_key_and_a_dated_api_version(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(body=message(text("ok"))))
    ask(provider)
    headers = stand_in.requests[0].headers
    # The 2.x SDK sends the key as a bearer token (not x-api-key).
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["anthropic-version"][:4].isdigit() and headers["anthropic-version"].count("-") == 2
    assert headers["content-type"].startswith("application/json")


def test_key_and_base_url_come_from_the_environment(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.queue(Reply(body=message(text("from env"))))
    assert ask(AnthropicProvider("claude-x")).text == "from env"
    assert stand_in.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_missing_key_is_an_auth_error_at_the_first_call(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider("claude-x", base_url=stand_in.url)  # building it is fine
    error = failure(provider)
    assert error.kind == "auth" and "ANTHROPIC_API_KEY is not set" in error.message
    assert error.transient is False
    assert stand_in.requests == []


# ------------------------------------------------------------------------------------ response
def test_response_maps_text_tool_calls_and_usage(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(body=message(
        text("Let me "), text("write it."),
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        tool_use("toolu_1", "write_file", {"path": "a.txt", "content": "hi"}),
        tool_use("toolu_2", "list_dir", {}),
        stop="tool_use",
        usage={"input_tokens": 120, "output_tokens": 33, "cache_read_input_tokens": 900,
               "cache_creation_input_tokens": 64},
    )))
    response = ask(provider)
    assert response.text == "Let me write it."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_1", "write_file", {"path": "a.txt", "content": "hi"}),
        ("toolu_2", "list_dir", {}),
    ]
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens) == (120, 33, 900, 64)
    assert response.finish_reason == "tool_use"


@pytest.mark.parametrize(
    ("stop", "finish"),
    [("end_turn", "complete"), ("tool_use", "tool_use"), ("max_tokens", "token_limit"),
     ("stop_sequence", "stop"), ("refusal", "refusal")],
)
def test_stop_reasons_become_finish_reasons(stand_in: StandIn, provider: AnthropicProvider, stop: str, finish: str) -> None:
    stand_in.queue(Reply(body=message(text("x"), stop=stop)))
    assert ask(provider).finish_reason == finish


# -------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("reply", "kind", "fragment", "retry_after", "transient"),
    [
        (Reply(429, error_body("rate_limit_error", "slow down"), {"retry-after": "7"}), "rate_limited", "HTTP 429", 7.0, True),
        (Reply(402, error_body("billing_error", "pay up")), "credits", "HTTP 402", None, False),
        (Reply(400, error_body("invalid_request_error", "Your credit balance is too low")), "credits", "credit balance", None, False),
        (Reply(400, error_body("invalid_request_error", "insufficient_quota")), "credits", "insufficient_quota", None, False),
        (Reply(401, error_body("authentication_error", "invalid x-api-key")), "auth", "HTTP 401", None, False),
        (Reply(403, error_body("permission_error", "not allowed")), "auth", "forbidden", None, False),
        (Reply(500, error_body("api_error", "internal")), "server", "HTTP 500", None, True),
        (Reply(503, "upstream down", content_type="text/plain"), "server", "upstream down", None, True),
        (Reply(529, error_body("overloaded_error", "Overloaded"), {"retry-after": "3"}), "server", "overloaded", 3.0, True),
    ],
    ids=["429", "402", "400-credit-balance", "400-quota", "401", "403", "500", "503", "529"],
)
def test_error_statuses_are_classified(
    stand_in: StandIn, provider: AnthropicProvider, reply: Reply, kind: str, fragment: str,
    retry_after: float | None, transient: bool,
) -> None:
    stand_in.queue(reply)
    error = failure(provider)
    assert (error.kind, error.retry_after, error.transient) == (kind, retry_after, transient)
    assert fragment in error.message
    assert len(stand_in.requests) == 1  # max_retries=0: the SDK never retries behind the engine's back


def test_other_statuses_are_api_errors_with_code_and_body(stand_in: StandIn, provider: AnthropicProvider) -> None:
    body = error_body("invalid_request_error", "messages: at least one message is required")
    stand_in.queue(Reply(400, body))
    error = failure(provider)
    assert error.kind == "api" and error.transient is False
    assert error.message == f"HTTP 400: {json.dumps(body)}"
    assert len(stand_in.requests) == 1


def test_retry_after_as_an_http_date_is_accepted(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(429, error_body("rate_limit_error", "slow"), {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}))
    error = failure(provider)
    assert error.kind == "rate_limited" and error.retry_after == 0.0  # a date in the past: retry now


def test_refused_connection_is_a_transport_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = failure(AnthropicProvider("m", api_key=API_KEY, base_url=f"http://127.0.0.1:{port}"))
    assert error.kind == "transport" and error.transient is True
    assert "could not reach the Anthropic API" in error.message


def test_per_call_timeout_is_a_transport_error(stand_in: StandIn, provider: AnthropicProvider) -> None:
    release = threading.Event()
    stand_in.queue(Reply(body=message(text("too late")), hold=release))
    try:
        error = failure(provider, ModelRequest(provider="anthropic", model="m", messages=[Message("user", "hi")],
                                               timeout_s=0.2))
    finally:
        release.set()
    assert error.kind == "transport" and "timed out" in error.message
    assert len(stand_in.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [Reply(200, "{not json"), Reply(200, "plain words", content_type="text/plain")],
    ids=["malformed-json", "not-json"],
)
def test_unreadable_answers_are_invalid_responses(stand_in: StandIn, provider: AnthropicProvider, reply: Reply) -> None:
    stand_in.queue(reply)
    error = failure(provider)
    assert error.kind == "invalid_response" and error.transient is False


# ---------------------------------------------------------------------------- clients & registry
def test_one_client_per_key_and_base_url_per_event_loop() -> None:
    async def clients() -> list[Any]:
        return [shared_client("k1", "http://127.0.0.1:1"), shared_client("k1", "http://127.0.0.1:1"),
                shared_client("k2", "http://127.0.0.1:1"), shared_client("k1", "http://127.0.0.1:2")]

    first = asyncio.run(clients())
    assert first[0] is first[1]
    assert len({id(c) for c in first}) == 3
    assert first[0].max_retries == 0
    second = asyncio.run(clients())
    assert second[0] is not first[0]  # a new loop gets its own connection pool


def test_anthropic_is_a_registered_provider() -> None:
    provider = provider_for("anthropic", "claude-haiku-4-5")
    assert isinstance(provider, AnthropicProvider)
    assert (provider.name, provider.model) == ("anthropic", "claude-haiku-4-5")


# -------------------------------------------------------------------------------------- a run
BLUEPRINT = """
[agent]
name = "claude-two-stage"
[tool_permissions]
write_file = "allow"
[stages.draft]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["write_file"]
[stages.draft.transitions.review]
hint = "the draft is written"
[stages.draft.transitions.redo]
hint = "start again"
[stages.review]
model = { provider = "anthropic", model = "claude-haiku-4-5" }
available_tools = ["list_dir"]
[stages.review.transitions]
[stages.redo]
model = { provider = "anthropic", model = "claude-haiku-4-5" }
[stages.redo.transitions]
"""


def claude_like(recorded: Recorded) -> Reply:
    """Answer like Claude would for this blueprint: route to review, call each stage's tool once, then finish."""
    body = recorded.body
    tools = [t["name"] for t in body.get("tools", [])]
    if not tools:  # a routing call
        return Reply(body=message(text("review")))
    last = body["messages"][-1]
    answered = isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"])
    if answered:
        return Reply(body=message(text(f"{tools[0]} done")))
    arguments = {"path": "draft.txt", "content": "first draft"} if tools[0] == "write_file" else {"path": "."}
    return Reply(body=message(tool_use(f"toolu_{len(tools)}_{tools[0]}", tools[0], arguments), stop="tool_use"))


@pytest.mark.usefixtures("blueprint_permissions")
def test_two_stage_blueprint_runs_on_the_stand_in(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb import load

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.responder = claude_like
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = load(BLUEPRINT).run("write a draft", home=tmp_path / "home", workdir=workdir)
    run.wait(60)
    assert run.status == "complete", run.error
    assert run.stage_history == ["draft", "review"]
    assert (workdir / "draft.txt").read_text() == "first draft"
    models = [(r.body["model"], bool(r.body.get("tools"))) for r in stand_in.requests]
    assert models == [
        ("claude-sonnet-4-6", True), ("claude-sonnet-4-6", True),  # draft: tool call, then text
        ("claude-sonnet-4-6", False),  # the routing call: an ordinary request without tools
        ("claude-haiku-4-5", True), ("claude-haiku-4-5", True),  # review
    ]
    assert all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in stand_in.requests)


def test_engine_retries_an_overload_once_and_the_sdk_adds_nothing(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lev_nb import load
    from lev_nb.engine.pipeline.inference import RetryPolicy

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.responder = lambda recorded: Reply(529, error_body("overloaded_error", "Overloaded"))
    run = load(BLUEPRINT).run("write a draft", home=tmp_path / "home", retry=RetryPolicy(max_attempts=2, base_delay_s=0))
    run.wait(60)
    assert run.status == "error"
    assert "overloaded" in (run.error or "")
    assert len(stand_in.requests) == 2  # one attempt + exactly one engine retry, no SDK retries
    retries = [e.reason for e in run.events.snapshot() if e.kind == "model_retry"]
    assert len(retries) == 1 and "retry 1 of 1" in retries[0] and "overloaded" in retries[0]


def test_engine_retry_recovers_after_one_overload(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb import load
    from lev_nb.engine.pipeline.inference import RetryPolicy

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.queue(Reply(529, error_body("overloaded_error", "Overloaded")))
    stand_in.responder = claude_like
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = load(BLUEPRINT).run("write a draft", home=tmp_path / "home", workdir=workdir,
                              retry=RetryPolicy(max_attempts=2, base_delay_s=0))
    run.wait(60)
    assert run.status == "complete", run.error
    assert run.stage_history == ["draft", "review"]
    assert len(stand_in.requests) == 6  # the 529, its one retry, then the four other calls
    assert stand_in.requests[0].body == stand_in.requests[1].body


def test_the_configuration_names_the_endpoint_and_the_key_variable(
    stand_in: StandIn, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lev_nb.providers.resolve import provider_for

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[model_providers.anthropic]\nbase_url = "{stand_in.url}"\napi_key_env = "TEAM_CLAUDE_KEY"\n', encoding="utf-8"
    )
    monkeypatch.setenv("TEAM_CLAUDE_KEY", "sk-team")
    stand_in.queue(Reply(body=message(text("configured"))))
    assert ask(provider_for("anthropic", "claude-x")).text == "configured"
    assert stand_in.requests[0].headers["authorization"] == "Bearer sk-team"
    monkeypatch.delenv("TEAM_CLAUDE_KEY")
    error = failure(provider_for("anthropic", "claude-x"))
    assert error.kind == "auth" and "TEAM_CLAUDE_KEY" in error.message

"""Streaming answers from the Messages API stand-in (server-sent events): text deltas in order,
tool-use blocks assembled from their JSON deltas, usage from the stream, a stream cut mid-body or
broken by an error event (retried as spec/runtime.md §13.2 says), ``model_text`` events in a run,
and the progress line showing the answer as it forms."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, error_body, message, serve, sse_events, text, tool_use

from lev_nb.messages import Message, ModelRequest
from lev_nb.providers import AnthropicProvider, ProviderError
from lev_nb.providers.anthropic import StreamAssembler

ANSWER = "The quick brown fox jumps over the lazy dog."


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    yield from serve()


@pytest.fixture
def provider(stand_in: StandIn) -> AnthropicProvider:
    return AnthropicProvider("claude-sonnet-4-6", api_key=API_KEY, base_url=stand_in.url)


def ask(provider: AnthropicProvider, pieces: list[str] | None = None) -> Any:
    request = ModelRequest(provider="anthropic", model="claude-sonnet-4-6", messages=[Message("user", "hi")])
    if pieces is not None:
        request.on_text = pieces.append
    return asyncio.run(provider.complete(request))


# ------------------------------------------------------------------------------------ the wire
def test_text_arrives_delta_by_delta_in_order(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(body=message(text(ANSWER)), chunk_chars=3))
    pieces: list[str] = []
    response = ask(provider, pieces)
    assert stand_in.requests[0].body["stream"] is True
    assert len(pieces) == len(ANSWER) // 3 + 1
    assert "".join(pieces) == ANSWER == response.text
    assert response.finish_reason == "complete"


def test_tool_use_blocks_are_assembled_from_json_deltas(stand_in: StandIn, provider: AnthropicProvider) -> None:
    arguments = {"path": "notes/é.txt", "content": "line 1\nline 2", "n": [1, 2, {"deep": True}]}
    stand_in.queue(Reply(body=message(text("Writing. "), tool_use("toolu_9", "write_file", arguments),
                                      tool_use("toolu_10", "list_dir", {}), stop="tool_use",
                                      usage={"input_tokens": 50, "output_tokens": 30, "cache_read_input_tokens": 7,
                                             "cache_creation_input_tokens": 3}), chunk_chars=5))
    pieces: list[str] = []
    response = ask(provider, pieces)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_9", "write_file", arguments), ("toolu_10", "list_dir", {})]
    assert "".join(pieces) == "Writing. "  # tool input is never shown as answer text
    assert response.finish_reason == "tool_use"
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens) == (50, 30, 7, 3)


def test_a_stream_cut_mid_body_is_a_transient_transport_error(stand_in: StandIn, provider: AnthropicProvider) -> None:
    stand_in.queue(Reply(body=message(text(ANSWER)), cut_after=5))
    pieces: list[str] = []
    with pytest.raises(ProviderError) as info:
        ask(provider, pieces)
    assert info.value.kind == "transport" and info.value.transient
    assert "broke off" in info.value.message or "ended before" in info.value.message
    assert pieces and "".join(pieces) != ANSWER  # some text had arrived before the cut


def test_a_stream_that_ends_without_message_stop_is_cut(stand_in: StandIn, provider: AnthropicProvider) -> None:
    events = sse_events(message(text(ANSWER)))[:-2]  # no message_delta, no message_stop, closed cleanly
    stand_in.queue(Reply(sse=events))
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert info.value.kind == "transport" and "ended before the message was complete" in info.value.message


def test_an_error_event_in_the_stream_is_classified(stand_in: StandIn, provider: AnthropicProvider) -> None:
    events = sse_events(message(text(ANSWER)))[:3] + [("error", error_body("overloaded_error", "Overloaded"))]
    stand_in.queue(Reply(sse=events))
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert info.value.kind == "server" and info.value.transient and "overloaded" in info.value.message


def test_non_streaming_remains_available(stand_in: StandIn) -> None:
    stand_in.queue(Reply(body=message(text(ANSWER))))
    plain = AnthropicProvider("claude-sonnet-4-6", api_key=API_KEY, base_url=stand_in.url, streaming=False)
    pieces: list[str] = []
    assert ask(plain, pieces).text == ANSWER
    assert "stream" not in stand_in.requests[0].body
    assert pieces == []  # a provider that does not stream never calls on_text


def test_the_assembler_takes_plain_event_dicts() -> None:
    assembler = StreamAssembler()
    for _, data in sse_events(message(text("hi"), tool_use("t", "x", {"a": 1}), stop="tool_use")):
        assembler.feed(data)
    response = assembler.response()
    assert (response.text, response.tool_calls[0].arguments) == ("hi", {"a": 1})


# ------------------------------------------------------------------------------------- in a run
BLUEPRINT = """
[agent]
name = "streamer"
[stages.answer]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
nudge = { enabled = false }
[stages.answer.transitions]
"""


def start(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from lev_nb import load
    from lev_nb.engine.pipeline.inference import RetryPolicy

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    run = load(BLUEPRINT).run("say something", home=tmp_path / "home", retry=RetryPolicy(max_attempts=3, base_delay_s=0))
    run.wait(60)
    return run


def test_streamed_text_becomes_model_text_events_in_order(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_answer = " ".join(f"word{i}" for i in range(400))
    stand_in.queue(Reply(body=message(text(long_answer)), chunk_chars=7))
    run = start(stand_in, tmp_path, monkeypatch)
    assert run.status == "complete", run.error
    events = run.events.snapshot()
    texts = [e for e in events if e.kind == "model_text"]
    assert texts and all(e.stage == "answer" and e.attempt == 1 and e.purpose == "stage" for e in texts)
    assert "".join(e.text for e in texts) == long_answer
    kinds = [e.kind for e in events]
    assert kinds.index("model_call") > kinds.index("model_text")  # the text came before the call's record


def test_a_cut_stream_is_retried_and_the_retry_streams_again(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in.queue(Reply(body=message(text(ANSWER)), cut_after=6), Reply(body=message(text(ANSWER))))
    run = start(stand_in, tmp_path, monkeypatch)
    assert run.status == "complete", run.error
    assert len(stand_in.requests) == 2
    assert stand_in.requests[0].body == stand_in.requests[1].body
    events = run.events.snapshot()
    [retry] = [e for e in events if e.kind == "model_retry"]
    assert retry.attempt == 1 and "broke off" in retry.reason
    first = "".join(e.text for e in events if e.kind == "model_text" and e.attempt == 1)
    second = "".join(e.text for e in events if e.kind == "model_text" and e.attempt == 2)
    assert first and ANSWER.startswith(first) and first != ANSWER
    assert second == ANSWER
    assert run.result is None and [e.text for e in events if e.kind == "model_call"] == [ANSWER]


# ------------------------------------------------------------------------------- progress line
class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_shows_the_answer_forming_on_a_terminal() -> None:
    from lev_nb.cli.progress import ProgressLine
    from lev_nb.engine import events as ev

    screen = Terminal()
    line = ProgressLine(screen)
    line(ev.StageEntered("r", "draft", visit=1))
    for piece in ("Hello", " wor", "ld,\nhow are", " you"):
        line(ev.ModelText("r", "draft", text=piece))
    shown = screen.getvalue().split("\r")[-1]
    assert shown.startswith("stage draft · turn 1 · Hello world, how are you")
    line(ev.ModelCall("r", "draft", purpose="stage", provider="p", model="m", iteration=1))
    assert screen.getvalue().split("\r")[-1].rstrip() == "stage draft · turn 1"

    piped = io.StringIO()
    quiet = ProgressLine(piped)
    quiet(ev.ModelText("r", "draft", text="not on a pipe"))
    assert piped.getvalue() == ""


def test_recorded_answer_text_matches_what_was_streamed(stand_in: StandIn, provider: AnthropicProvider) -> None:
    def answer(recorded: Recorded) -> Reply:
        return Reply(body=message(text("é" * 9 + "😀" * 3)), chunk_chars=2)

    stand_in.responder = answer
    pieces: list[str] = []
    assert ask(provider, pieces).text == "".join(pieces) == "é" * 9 + "😀" * 3

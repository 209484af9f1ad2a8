"""A Chat Completions stand-in on 127.0.0.1 (``from chat_standin import ...``): the same real HTTP
server as standin.py, answering in OpenAI's wire format.

A reply body is a ``chat.completion`` object (build one with :func:`completion`). A request with
``"stream": true`` gets it as server-sent ``chat.completion.chunk`` events, the way OpenAI streams:
a role chunk, the text cut into content deltas, each tool call as a first delta (id, name) and
argument pieces, a finish chunk, then (when the request asked ``stream_options.include_usage``) a
usage chunk with no choices, then ``data: [DONE]``. ``GET /v1/models`` is answered like any request
(queue a :func:`model_list` reply, or set a responder).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from standin import Recorded, Reply, StandIn

__all__ = ["ChatStandIn", "completion", "tool_call", "chat_error", "model_list", "serve_chat", "Recorded", "Reply"]


def completion(content: str | None = "", *calls: dict[str, Any], finish: str | None = None,
               usage: dict[str, Any] | None = None, model: str = "gpt-test") -> dict[str, Any]:
    """A ``chat.completion`` body: ``content`` and optional tool calls (from :func:`tool_call`)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish or ("tool_calls" if calls else "stop")}],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def tool_call(id_: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call of an assistant message."""
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def chat_error(message: str, code: str | None = None, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def model_list(*ids: str) -> dict[str, Any]:
    """A ``GET /v1/models`` answer."""
    return {"object": "list", "data": [{"id": i, "object": "model", "created": 1, "owned_by": "stand-in"} for i in ids]}


def _pieces(value: str, size: int) -> list[str]:
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def chunks_for(body: dict[str, Any], chunk_chars: int = 4, include_usage: bool = True) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects OpenAI streams for the completion ``body``."""
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out += [chunk({"content": piece}) for piece in _pieces(message["content"], chunk_chars)]
    for index, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(call["function"]["arguments"], chunk_chars)]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": body.get("usage")})
    return out


class ChatStandIn(StandIn):
    """A Chat Completions stand-in: queued replies first, else ``responder(request)``, else a 500."""

    def stream_chunks(self, reply: Reply, request: Any = None) -> list[bytes]:
        if reply.sse is not None:
            events = [data for _, data in reply.sse]
        else:
            options = request.get("stream_options") if isinstance(request, dict) else None
            wants_usage = bool((options or {}).get("include_usage"))
            events = chunks_for(reply.body, reply.chunk_chars, wants_usage)
        lines = [f"data: {json.dumps(data)}\n\n".encode("utf-8") for data in events]
        return lines + [b"data: [DONE]\n\n"]

    def _answer(self, recorded: Recorded) -> Reply:
        reply = super()._answer(recorded)
        if reply.status == 500 and reply.body == {"type": "error", "error": {
                "type": "api_error", "message": "stand-in: no reply queued"}}:
            return Reply(500, chat_error("stand-in: no reply queued", kind="server_error"))
        return reply


def serve_chat() -> Iterator[ChatStandIn]:
    """A Chat Completions stand-in for one test (use as a fixture body)."""
    server = ChatStandIn()
    try:
        yield server
    finally:
        server.close()

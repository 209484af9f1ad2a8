"""Claude through the official ``anthropic`` SDK (Messages API), behind the Provider protocol.

The provider turns a :class:`ModelRequest` into one streamed ``messages.create`` call and the answer
back into a :class:`ModelResponse` (text deltas reach the engine as they arrive); every SDK failure becomes a :class:`ProviderError` whose ``kind`` follows
docs/providers.md#errors-and-retries, so the engine's retry policy can tell transient faults from permanent
ones.

Requests carry prompt-caching markers (``cache_control``) where docs/providers.md#anthropic says,
so a long run re-reads its stable prefix from the cache instead of paying for it again.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.messages import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from lev_nb.providers.base import ProviderError
from lev_nb.providers.endpoints import API_KEY_ENV, BASE_URL_ENV, DEFAULT_TIMEOUT_S
from lev_nb.providers.clients import LoopClients
from lev_nb.providers.structured import (
    SUBMIT_TOOL,
    SchemaRefused,
    ask_structured,
    constrained_submit_tool,
    is_schema_refusal,
)
from lev_nb.text import estimate_tokens

if TYPE_CHECKING:  # the SDK is imported on first use, so `import lev_nb` stays cheap
    from anthropic import AsyncAnthropic

__all__ = [
    "DEFAULT_TIMEOUT_S", "AnthropicProvider", "StreamAssembler", "build_request_body", "cache_marker_positions", "classify_error",
    "map_response",
]

_ERROR_BODY_LIMIT = 2000

_STOP_REASONS = {
    "end_turn": "complete",
    "tool_use": "tool_use",
    "max_tokens": "token_limit",
    "stop_sequence": "stop",
}
_CREDIT_MARKERS = ("credit balance", "insufficient credits", "insufficient_quota", "quota", "billing")


class AnthropicProvider:
    """Calls Claude through the Messages API.

    ``model`` is the default model id (a request's own ``model`` wins). The API key comes from
    ``api_key``, else the environment variable ``api_key_env`` (``ANTHROPIC_API_KEY``); the base URL from ``base_url``, else
    ``ANTHROPIC_BASE_URL``, else the SDK's default. Both are read at the first call, never at
    construction, so a missing key fails the stage that actually asks the model. ``streaming``
    (default on) streams every answer; ``cache`` (default on) writes prompt-caching markers.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        api_key_env: str = API_KEY_ENV,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        streaming: bool = True,
        cache: bool = True,
    ) -> None:
        self.model = model
        self.streaming = streaming
        self.cache = cache
        self._api_key = api_key
        self._api_key_env = api_key_env
        self._base_url = base_url
        self.timeout_s = timeout_s

    def _credentials(self) -> tuple[str, str | None]:
        key = self._api_key or os.environ.get(self._api_key_env, "").strip()
        if not key:
            raise ProviderError(
                "auth",
                f"no Anthropic API key: the environment variable {self._api_key_env} is not set",
            )
        base_url = self._base_url or os.environ.get(BASE_URL_ENV, "").strip() or None
        return key, base_url

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` as one Messages API call; raise ProviderError on any failure.

        The answer is streamed (unless the provider was built with ``streaming=False``): each text
        delta goes to ``request.on_text`` as it arrives, tool-use blocks are assembled from their
        JSON deltas, and a stream cut before ``message_stop`` is a transient ``transport`` error.
        A stage that owes an answer with a JSON Schema strict tools can hold gets ``submit_output``
        as a strict tool (:func:`~lev_nb.providers.structured.ask_structured`: a model that refuses
        one is asked again without, and the person is told).
        """
        api_key, base_url = self._credentials()
        server = ("anthropic", base_url or "", request.model or self.model)
        return await ask_structured(request, server, "anthropic", "Anthropic",
                                    lambda constrain: self._send(request, api_key, base_url, constrain))

    async def _send(self, request: ModelRequest, api_key: str, base_url: str | None, constrain: bool) -> ModelResponse:
        """One Messages API call; ``constrain``: with the strict ``submit_output`` tool (a refusal
        of it raises :class:`~lev_nb.providers.structured.SchemaRefused`)."""
        import anthropic

        client = shared_client(api_key, base_url)
        body = build_request_body(request, default_model=self.model, cache=self.cache, constrain=constrain)
        required = {key: body.pop(key) for key in ("model", "max_tokens", "messages")}
        optional = {key: body.pop(key) for key in ("system", "tools") if key in body}
        timeout = request.timeout_s or self.timeout_s
        streaming = False  # the answer had begun to arrive: a connection error now is a cut stream
        try:
            # Everything the SDK has no keyword for (temperature, top_p, ...) travels as extra_body.
            if not self.streaming:
                message = await client.messages.create(
                    **required, **optional, extra_body=body or None, timeout=timeout,
                )
                return map_response(message)
            stream = await client.messages.create(
                **required, **optional, extra_body=body or None, timeout=timeout, stream=True,
            )
            content_type = str(getattr(stream, "response", None) and stream.response.headers.get("content-type") or "")
            if content_type and not content_type.startswith("text/event-stream"):
                raw = (await stream.response.aread()).decode("utf-8", "replace")
                raise ProviderError(
                    "invalid_response",
                    f"the Anthropic API answered a streaming request with {content_type}, not an event stream: "
                    f"{raw.strip()[:200]}",
                )
            assembler = StreamAssembler(request.on_text)
            streaming = True
            async for event in stream:
                assembler.feed(event)
            return assembler.response()
        except anthropic.APIStatusError as exc:
            error = classify_error(exc.status_code, _error_body(exc), exc.response.headers, self._api_key_env)
            if constrain and is_schema_refusal(exc.status_code, _error_body(exc)):
                raise SchemaRefused(error) from None
            raise error from None
        except anthropic.APITimeoutError:
            raise ProviderError("transport", "the request to the Anthropic API timed out") from None
        except anthropic.APIConnectionError as exc:
            # Newer SDKs wrap a body cut short mid-stream in this error too: it was reached, then broke off.
            if streaming:
                raise ProviderError(
                    "transport", f"the answer stream from the Anthropic API broke off: {_cause(exc)}") from None
            raise ProviderError("transport", f"could not reach the Anthropic API: {_cause(exc)}") from None
        except anthropic.APIResponseValidationError as exc:
            raise ProviderError("invalid_response", f"the Anthropic API answered with unexpected data: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ProviderError("invalid_response", f"the Anthropic API answered with malformed JSON: {exc}") from None
        except ProviderError:
            raise
        except Exception as exc:
            if _is_transport_failure(exc):  # the body was cut or timed out while it streamed
                raise ProviderError(
                    "transport", f"the answer stream from the Anthropic API broke off: {type(exc).__name__}: {exc}"
                ) from None
            raise


def _is_transport_failure(exc: BaseException) -> bool:
    """True for the HTTP library's own transport errors (read cut short, read timeout, ...)."""
    for cls in type(exc).__mro__:
        module = cls.__module__.split(".")[0]
        if (module.startswith("httpx") or module == "httpcore") and cls.__name__ in (
            "TransportError", "TimeoutException", "NetworkError", "ProtocolError"
        ):
            return True
    return isinstance(exc, (ConnectionError, TimeoutError))


# -------------------------------------------------------------------------------------- streaming
class StreamAssembler:
    """Builds a ModelResponse from the Messages API's stream events.

    Text deltas are joined per block (and passed to ``on_text`` as they come); a tool-use block's
    ``input`` is the JSON its ``input_json_delta`` pieces spell once joined. Usage comes from
    ``message_start`` (input and cache counts) and ``message_delta`` (output, and any later input
    counts). :meth:`response` refuses a stream that never reached ``message_stop``.
    """

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self.on_text = on_text
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.events = 0
        self.finished = False

    def feed(self, event: Any) -> None:
        """Take one stream event (an SDK event object or a plain dict)."""
        self.events += 1
        kind = _field(event, "type")
        if kind == "message_start":
            self._take_usage(_field(_field(event, "message"), "usage"))
        elif kind == "content_block_start":
            block = _field(event, "content_block")
            self.blocks[int(_field(event, "index") or 0)] = {
                "type": _field(block, "type"), "text": [], "json": [],
                "id": _field(block, "id"), "name": _field(block, "name"),
            }
        elif kind == "content_block_delta":
            index = int(_field(event, "index") or 0)
            slot = self.blocks.setdefault(index, {"type": None, "text": [], "json": [], "id": None, "name": None})
            delta = _field(event, "delta")
            delta_kind = _field(delta, "type")
            if delta_kind == "text_delta":
                piece = _field(delta, "text") or ""
                slot["text"].append(piece)
                if self.on_text is not None and piece and slot["type"] in (None, "text"):
                    self.on_text(piece)
            elif delta_kind == "input_json_delta":
                slot["json"].append(_field(delta, "partial_json") or "")
            # thinking and signature deltas carry nothing the engine uses
        elif kind == "message_delta":
            self.stop_reason = _field(_field(event, "delta"), "stop_reason") or self.stop_reason
            self._take_usage(_field(event, "usage"))
        elif kind == "message_stop":
            self.finished = True

    def _take_usage(self, usage: Any) -> None:
        for field_name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = _field(usage, field_name)
            if isinstance(value, int):
                self.usage[field_name] = value

    def response(self) -> ModelResponse:
        """The assembled answer; a ``transport`` ProviderError when the stream was cut short."""
        if not self.finished:
            raise ProviderError(
                "transport",
                f"the answer stream from the Anthropic API ended before the message was complete "
                f"(after {self.events} events)",
            )
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block["type"] == "text":
                texts.append("".join(block["text"]))
            elif block["type"] == "tool_use":
                raw = "".join(block["json"]).strip()
                try:
                    arguments = json.loads(raw) if raw else {}
                except json.JSONDecodeError as exc:
                    raise ProviderError(
                        "invalid_response", f"tool_use block '{block['name']}' streamed input that is not JSON: {exc}"
                    ) from None
                calls.append(ToolCall(id=str(block["id"] or ""), name=str(block["name"] or ""),
                                      arguments=arguments if isinstance(arguments, dict) else {}))
        if self.stop_reason is None:
            finish = "tool_use" if calls else "complete"
        else:
            finish = _STOP_REASONS.get(self.stop_reason, str(self.stop_reason))
        return ModelResponse(
            text="".join(texts),
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=self.usage.get("input_tokens", 0),
                completion_tokens=self.usage.get("output_tokens", 0),
                cached_tokens=self.usage.get("cache_read_input_tokens", 0),
                cache_write_tokens=self.usage.get("cache_creation_input_tokens", 0),
            ),
            finish_reason=finish,
        )


def _field(value: Any, name: str) -> Any:
    """``value.name`` or ``value[name]`` (an SDK object or its dict form; the OpenAI provider reads
    its answers through this too); None when absent."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


# ---------------------------------------------------------------------------------------- clients
def _make_client(api_key: str, base_url: str | None) -> AsyncAnthropic:
    from anthropic import AsyncAnthropic

    # max_retries=0: the engine's RetryPolicy retries (see lev_nb/providers/clients.py).
    return AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=DEFAULT_TIMEOUT_S)


_clients: LoopClients[AsyncAnthropic] = LoopClients(_make_client)


def shared_client(api_key: str, base_url: str | None) -> AsyncAnthropic:
    """The SDK client for this key and base URL on the running event loop (:mod:`.clients`)."""
    return _clients.get(api_key, base_url)


# ---------------------------------------------------------------------------------------- request
#: At most this many ``cache_control`` markers per request (the API's own limit).
MAX_CACHE_MARKERS = 4
#: A prefix shorter than this (estimated tokens) is not worth a marker: the API ignores it.
MIN_CACHE_PREFIX_TOKENS = 1024
#: Message markers sit where the running count of content blocks crosses a multiple of this,
#: so they stay put from one turn to the next and the cache written by one turn is read by the next.
CACHE_BLOCK_STRIDE = 16
_EPHEMERAL = {"type": "ephemeral"}


def build_request_body(request: ModelRequest, *, default_model: str = "", cache: bool = True,
                       constrain: bool = False) -> dict[str, Any]:
    """The Messages API body for ``request``: model, max_tokens, messages, and system / tools /
    temperature when present, with ``request.extra`` merged over the top. With ``constrain``,
    ``submit_output`` is a strict tool holding ``content`` to ``request.output_schema``
    (:mod:`lev_nb.providers.structured`).

    With ``cache`` (the default) the body carries up to four prompt-caching markers, placed as
    docs/providers.md#anthropic says (see :func:`cache_marker_positions`).
    """
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "max_tokens": request.max_tokens,
        "messages": [_message_param(m) for m in request.messages],
    }
    system = [block for block in request.described_system() if block.text]
    system_marks, message_marks = cache_marker_positions(system, request.messages) if cache else ([], [])
    if len(system) == 1 and not system_marks:
        body["system"] = system[0].text
    elif system:
        # Separate blocks keep the boundaries where cache markers go.
        body["system"] = [{"type": "text", "text": block.text} for block in system]
        for index in system_marks:
            body["system"][index]["cache_control"] = dict(_EPHEMERAL)
    for index in message_marks:
        _mark_message(body["messages"][index])
    if request.tools:
        body["tools"] = [_tool_param(t, request.output_schema if constrain else None) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    body.update(request.extra)
    return body


def cache_marker_positions(system: list[SystemBlock], messages: list[Message]) -> tuple[list[int], list[int]]:
    """Where the cache markers go: (system block indexes, message indexes), at most four in all.

    The system gets up to two: the deepest block whose whole prefix is ``stable`` (and long enough
    to be cached), and the deepest block that is not ``rewritten`` and not of a never-cached kind
    (also with a long enough prefix). The messages get the rest, and only when the assembler
    flagged one (its system prefix did not change since the last request): one marker at each
    message where the running count of content blocks crosses a multiple of 16, keeping the last
    ones; with no such crossing, the last message.
    """
    marks: list[int] = []
    prefix = 0
    stable_run = True
    deepest_stable: int | None = None
    deepest_candidate: int | None = None
    for index, block in enumerate(system):
        prefix += estimate_tokens(block.text)
        stable_run = stable_run and block.volatility == "stable" and not block.never_cache
        long_enough = prefix >= MIN_CACHE_PREFIX_TOKENS
        if stable_run and long_enough:
            deepest_stable = index
        if block.volatility != "rewritten" and not block.never_cache and long_enough:
            deepest_candidate = index
    for found in (deepest_stable, deepest_candidate):
        if found is not None and found not in marks:
            marks.append(found)
    budget = MAX_CACHE_MARKERS - len(marks)
    if budget <= 0 or not messages or not any(m.cache_breakpoint for m in messages):
        return sorted(marks), []
    crossings: list[int] = []
    count = 0
    next_stride = CACHE_BLOCK_STRIDE
    for index, message in enumerate(messages):
        count += _block_count(message)
        if count >= next_stride:
            crossings.append(index)
            while next_stride <= count:
                next_stride += CACHE_BLOCK_STRIDE
    chosen = crossings[-budget:] if crossings else [len(messages) - 1]
    return sorted(marks), chosen


def _block_count(message: Message) -> int:
    if isinstance(message.content, str):
        return 1
    return sum(1 for b in message.content if not (isinstance(b, TextBlock) and not b.text))


def _mark_message(param: dict[str, Any]) -> None:
    """Put a cache marker on a message: on its last block (a string becomes one text block)."""
    content = param["content"]
    if isinstance(content, str):
        param["content"] = [{"type": "text", "text": content, "cache_control": dict(_EPHEMERAL)}]
    elif content:
        content[-1]["cache_control"] = dict(_EPHEMERAL)


def _message_param(message: Message) -> dict[str, Any]:
    if isinstance(message.content, str):
        return {"role": message.role, "content": message.content}
    # The API rejects empty text blocks, so they are dropped.
    blocks = [_block_param(b) for b in message.content if not (isinstance(b, TextBlock) and not b.text)]
    return {"role": message.role, "content": blocks}


def _block_param(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": block.content,
            "is_error": block.is_error,
        }
    raise TypeError(f"cannot send a {type(block).__name__} to the Anthropic API")


def _tool_param(tool: ToolSpec, output_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    held = None
    if output_schema and tool.name == SUBMIT_TOOL:
        held = constrained_submit_tool(tool, output_schema, "anthropic")
    if held is not None:
        return {"name": held.name, "description": held.description, "input_schema": held.parameters, "strict": True}
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


# --------------------------------------------------------------------------------------- response
def map_response(message: Any) -> ModelResponse:
    """Turn the SDK's ``Message`` into a ModelResponse (text joined, tool_use blocks as calls)."""
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        raise ProviderError("invalid_response", f"the Anthropic API answer has no content list: {str(message)[:200]}")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(getattr(block, "text", "") or "")
        elif kind == "tool_use":
            arguments = getattr(block, "input", None)
            calls.append(
                ToolCall(
                    id=str(getattr(block, "id", "")),
                    name=str(getattr(block, "name", "")),
                    arguments=dict(arguments) if isinstance(arguments, dict) else {},
                )
            )
        # thinking and server-tool blocks carry nothing the engine uses
    usage = getattr(message, "usage", None)
    stop = getattr(message, "stop_reason", None)
    if stop is None:
        finish = "tool_use" if calls else "complete"
    else:
        finish = _STOP_REASONS.get(stop, str(stop))
    return ModelResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=_count(usage, "input_tokens"),
            completion_tokens=_count(usage, "output_tokens"),
            cached_tokens=_count(usage, "cache_read_input_tokens"),
            cache_write_tokens=_count(usage, "cache_creation_input_tokens"),
        ),
        finish_reason=finish,
    )


def _count(usage: Any, field: str) -> int:
    value = getattr(usage, field, None) if usage is not None else None
    return value if isinstance(value, int) else 0


# ----------------------------------------------------------------------------------------- errors
def classify_error(status: int, body: str, headers: Any = None, key_env: str = API_KEY_ENV) -> ProviderError:
    """The ProviderError for a non-2xx answer, following docs/providers.md#errors-and-retries.

    429 is rate_limited (with Retry-After); 402 or a body about credits, quota or billing is
    credits; 401 and 403 are auth; a 404 about the model is unknown_model; 5xx (529 overloaded
    included) is server; anything else is api with the message ``HTTP <code>: <body>``. A 401
    names ``key_env``, the variable the key came from.
    """
    retry_after = parse_retry_after(headers)
    shown = body.strip()[:_ERROR_BODY_LIMIT]
    lowered = shown.lower()
    if status == 429:
        return ProviderError("rate_limited", f"HTTP 429: {shown}", retry_after)
    if status == 402 or any(marker in lowered for marker in _CREDIT_MARKERS):
        return ProviderError("credits", f"HTTP {status}: the account is out of credits or quota: {shown}")
    if status == 401:
        return ProviderError("auth", f"HTTP 401: the API key was rejected; check {key_env}: {shown}")
    if status == 403:
        return ProviderError("auth", f"HTTP 403: forbidden; the API key may not use this model or resource: {shown}")
    if status == 404 and "model" in lowered:
        return ProviderError("unknown_model", f"HTTP 404: the API does not know this model: {shown}")
    if status >= 500 or "overloaded_error" in lowered:
        label = "overloaded" if status == 529 or "overloaded_error" in lowered else "server error"
        return ProviderError("server", f"HTTP {status} {label}: {shown}", retry_after)
    return ProviderError("api", f"HTTP {status}: {shown}")


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        import email.utils  # a Retry-After date is rare; the module is not free to import

        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)


def _error_body(exc: Any) -> str:
    try:
        return exc.response.text
    except (AttributeError, RuntimeError):  # body never read (closed stream): use the SDK's copy
        return str(exc.body if exc.body is not None else exc.message)


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)

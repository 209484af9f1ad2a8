"""Claude through the official ``anthropic`` SDK (Messages API), behind the Provider protocol.

The provider turns a :class:`ModelRequest` into one ``messages.create`` call and the answer back into
a :class:`ModelResponse`; every SDK failure becomes a :class:`ProviderError` whose ``kind`` follows
spec/runtime.md §13.1, so the engine's retry policy can tell transient faults from permanent ones.

Prompt-caching markers (``cache_control``) are not written yet.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from lev_nb.messages import Block, Message, ModelRequest, ModelResponse, TextBlock, ToolCall, ToolResultBlock, ToolSpec, ToolUseBlock, Usage
from lev_nb.providers.base import ProviderError

if TYPE_CHECKING:  # the SDK is imported on first use, so `import lev_nb` stays cheap
    from anthropic import AsyncAnthropic

__all__ = ["DEFAULT_TIMEOUT_S", "AnthropicProvider", "build_request_body", "classify_error", "map_response"]

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
# The upstream runtime's per-call timeout; a stage's request_timeout_secs overrides it.
DEFAULT_TIMEOUT_S = 900.0
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
    construction, so a missing key fails the stage that actually asks the model.
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
    ) -> None:
        self.model = model
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
        """Send ``request`` as one Messages API call; raise ProviderError on any failure."""
        import anthropic

        api_key, base_url = self._credentials()
        client = shared_client(api_key, base_url)
        body = build_request_body(request, default_model=self.model)
        required = {key: body.pop(key) for key in ("model", "max_tokens", "messages")}
        optional = {key: body.pop(key) for key in ("system", "tools") if key in body}
        try:
            # Everything the SDK has no keyword for (temperature, top_p, ...) travels as extra_body.
            message = await client.messages.create(
                **required,
                **optional,
                extra_body=body or None,
                timeout=request.timeout_s or self.timeout_s,
            )
        except anthropic.APIStatusError as exc:
            raise classify_error(exc.status_code, _error_body(exc), exc.response.headers) from None
        except anthropic.APITimeoutError:
            raise ProviderError("transport", "the request to the Anthropic API timed out") from None
        except anthropic.APIConnectionError as exc:
            raise ProviderError("transport", f"could not reach the Anthropic API: {_cause(exc)}") from None
        except anthropic.APIResponseValidationError as exc:
            raise ProviderError("invalid_response", f"the Anthropic API answered with unexpected data: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ProviderError("invalid_response", f"the Anthropic API answered with malformed JSON: {exc}") from None
        return map_response(message)


# ---------------------------------------------------------------------------------------- clients
# One SDK client per (api key, base url) per event loop: its connection pool belongs to the loop it
# first ran on, and thousands of runs share the engine loop, so a client per request would waste
# connections. The table for a loop disappears with the loop.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str | None], AsyncAnthropic]] = (
    weakref.WeakKeyDictionary()
)
_clients_lock = threading.Lock()


def shared_client(api_key: str, base_url: str | None) -> AsyncAnthropic:
    """The SDK client for this key and base URL on the running event loop (created on first use)."""
    from anthropic import AsyncAnthropic

    loop = asyncio.get_running_loop()
    with _clients_lock:
        per_loop = _clients.setdefault(loop, {})
        client = per_loop.get((api_key, base_url))
        if client is None:
            # max_retries=0 on purpose: the engine's RetryPolicy (lev_nb/engine/pipeline/inference.py) already
            # retries transient ProviderErrors with its own backoff and Retry-After handling; letting
            # the SDK retry 429/5xx as well would multiply the attempts (4 x 3 = 12 calls) and hide
            # the failures from the run's event log.
            client = AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=DEFAULT_TIMEOUT_S)
            per_loop[(api_key, base_url)] = client
        return client


# ---------------------------------------------------------------------------------------- request
def build_request_body(request: ModelRequest, *, default_model: str = "") -> dict[str, Any]:
    """The Messages API body for ``request``: model, max_tokens, messages, and system / tools /
    temperature when present, with ``request.extra`` merged over the top."""
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "max_tokens": request.max_tokens,
        "messages": [_message_param(m) for m in request.messages],
    }
    system = [text for text in request.system if text]
    if len(system) == 1:
        body["system"] = system[0]
    elif system:
        # Separate blocks keep the boundaries where cache markers will go later.
        body["system"] = [{"type": "text", "text": text} for text in system]
    if request.tools:
        body["tools"] = [_tool_param(t) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    body.update(request.extra)
    return body


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


def _tool_param(tool: ToolSpec) -> dict[str, Any]:
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
def classify_error(status: int, body: str, headers: Any = None) -> ProviderError:
    """The ProviderError for a non-2xx answer, following spec/runtime.md §13.1.

    429 is rate_limited (with Retry-After); 402 or a body about credits, quota or billing is
    credits; 401 and 403 are auth; 5xx (529 overloaded included) is server; anything else is api
    with the message ``HTTP <code>: <body>``.
    """
    retry_after = parse_retry_after(headers)
    shown = body.strip()[:_ERROR_BODY_LIMIT]
    lowered = shown.lower()
    if status == 429:
        return ProviderError("rate_limited", f"HTTP 429: {shown}", retry_after)
    if status == 402 or any(marker in lowered for marker in _CREDIT_MARKERS):
        return ProviderError("credits", f"HTTP {status}: the account is out of credits or quota: {shown}")
    if status == 401:
        return ProviderError("auth", f"HTTP 401: the API key was rejected; check {API_KEY_ENV}: {shown}")
    if status == 403:
        return ProviderError("auth", f"HTTP 403: forbidden; the API key may not use this model or resource: {shown}")
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

"""OpenAI and every server that speaks its Chat Completions API, through the official ``openai`` SDK.

One class, :class:`OpenAIProvider`, serves the built-in providers ``openai``, ``openrouter`` and
``ollama`` and any OpenAI-compatible server configured as ``[model_providers.<name>]`` with a
``base_url`` (vLLM, LM Studio, llama.cpp's server, a gateway). :data:`FLAVOURS` holds what differs
between them: where the key and the base URL come from, whether a key is needed at all, and how
the answer's length is capped.

A request becomes one streamed ``chat.completions.create`` call: the system blocks are merged into
one system message (Ollama and several compatible servers take only one), tool calls are assembled
from their streamed deltas, text deltas reach ``request.on_text`` as they arrive, and the usage
chunk (``stream_options.include_usage``) gives the token counts. OpenAI caches a long prompt
prefix by itself; the cached part comes back as ``usage.prompt_tokens_details.cached_tokens`` and
is counted as cached input (billed at the cached rate), the rest as fresh input. Every SDK failure
becomes a :class:`ProviderError` of the kind docs/providers.md#errors-and-retries names, so the engine's retry
policy, circuit breakers and fallbacks treat OpenAI exactly like Anthropic. The SDK's own retries
are off (``max_retries=0``) so that attempts do not multiply with the engine's.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Callable

from lev_nb.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from lev_nb.providers.anthropic import DEFAULT_TIMEOUT_S, _field, _is_transport_failure, parse_retry_after
from lev_nb.providers.base import ProviderError
from lev_nb.providers.endpoints import FLAVOURS, Flavour, ollama_base_url
from lev_nb.providers.clients import LoopClients
from lev_nb.text import squeezed
from lev_nb.providers.structured import (
    SUBMIT_TOOL,
    SchemaRefused,
    ask_structured,
    constrained_submit_tool,
    is_schema_refusal,
)
from lev_nb.records import record

if TYPE_CHECKING:  # the SDK is imported on first use, so `import lev_nb` stays cheap
    from openai import AsyncOpenAI

__all__ = [
    "FLAVOURS",
    "Flavour",
    "OpenAIProvider",
    "ChatStreamAssembler",
    "build_chat_body",
    "classify_openai_error",
    "ollama_base_url",
]

_ERROR_BODY_LIMIT = 2000
_FINISH = {"stop": "complete", "tool_calls": "tool_use", "function_call": "tool_use", "length": "token_limit",
           "content_filter": "stop"}
# The SDK insists on a key; a server that needs none (Ollama, a local vLLM) gets this placeholder.
_NO_KEY = "no-key"
class OpenAIProvider:
    """Calls a Chat Completions API (OpenAI's, or any compatible server's).

    ``name`` is the provider's name (``openai``, ``openrouter``, ``ollama`` or a configured one);
    ``model`` the default model id (a request's own ``model`` wins). The key is ``api_key``, else
    the environment variable ``api_key_env``; ``key_required`` False lets a local server go without
    one. The base URL is ``base_url``, else the SDK's default (OpenAI). ``streaming`` (default on)
    streams every answer; ``send_temperature`` off leaves the temperature out (OpenAI's reasoning
    models refuse one). Keys are read at the first call, never at construction, so a missing key
    fails the stage that actually asks the model.
    """

    def __init__(
        self,
        model: str = "",
        *,
        name: str = "openai",
        label: str = "OpenAI",
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        key_required: bool = True,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        streaming: bool = True,
        completion_tokens_key: str = "max_tokens",
        prompt_cache_key: bool = False,
        send_temperature: bool = True,
    ) -> None:
        self.name = name
        self.label = label
        self.model = model
        self.streaming = streaming
        self.timeout_s = timeout_s
        self.base_url = base_url
        self.completion_tokens_key = completion_tokens_key
        self.prompt_cache_key = prompt_cache_key
        self.send_temperature = send_temperature
        self._api_key = api_key
        self._api_key_env = api_key_env
        self._key_required = key_required

    def _key(self) -> str:
        key = self._api_key or (os.environ.get(self._api_key_env, "").strip() if self._api_key_env else "")
        if key:
            return key
        if self._key_required:
            where = f"the environment variable {self._api_key_env} is not set" if self._api_key_env else "none is configured"
            raise ProviderError("auth", f"no {self.label} API key: {where}")
        return _NO_KEY

    def client(self) -> AsyncOpenAI:
        """The SDK client for this provider's key and base URL on the running event loop."""
        return shared_client(self._key(), self.base_url)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` as one Chat Completions call; raise ProviderError on any failure.

        The answer is streamed (unless built with ``streaming=False``): each text delta goes to
        ``request.on_text`` as it arrives, tool calls are assembled from their argument deltas,
        and a stream that ends before any choice finished is a transient ``transport`` error.

        A stage that owes an answer with a JSON Schema strict mode can hold gets ``submit_output``
        as a strict tool whose ``content`` is that schema (:mod:`.structured`), so the server
        itself keeps the answer to it. A server that refuses the schema or the flag (a 400 or 422
        naming them) is asked once more without, is not asked with it again in this process, and
        the answer carries an ``output-unconstrained`` warning for the person
        (:func:`~lev_nb.providers.structured.ask_structured`).
        """
        server = (self.name, self.base_url or "", request.model or self.model)
        return await ask_structured(request, server, "openai", self.label,
                                    lambda constrain: self._send(request, constrain))

    async def _send(self, request: ModelRequest, constrain: bool) -> ModelResponse:
        """One Chat Completions call; ``constrain``: with the strict ``submit_output`` tool (a
        refusal of it raises :class:`~.structured.SchemaRefused`)."""
        import openai

        client = self.client()
        body = build_chat_body(request, default_model=self.model, tokens_key=self.completion_tokens_key,
                               cache_key=self.prompt_cache_key, constrain=constrain)
        if not self.send_temperature:
            body.pop("temperature", None)
        known = {key: body.pop(key) for key in list(body) if key in _SDK_KEYWORDS}
        timeout = request.timeout_s or self.timeout_s
        try:
            return await self._answer(client, known, body, timeout, request)
        except openai.APIStatusError as exc:
            error = classify_openai_error(exc.status_code, _error_body(exc), exc.response.headers, self.label,
                                          self._api_key_env)
            if constrain and is_schema_refusal(exc.status_code, _error_body(exc)):
                raise SchemaRefused(error) from None
            raise error from None
        except openai.APITimeoutError:
            raise ProviderError("transport", f"the request to the {self.label} API timed out") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
            where = f" at {self.base_url}" if self.base_url else ""
            raise ProviderError("transport", f"could not reach the {self.label} API{where}: {detail}") from None
        except openai.APIResponseValidationError as exc:
            raise ProviderError("invalid_response", f"the {self.label} API answered with unexpected data: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ProviderError("invalid_response", f"the {self.label} API answered with malformed JSON: {exc}") from None
        except openai.APIError as exc:  # an error event inside the stream
            raise _stream_error(exc, self.label) from None
        except ProviderError:
            raise
        except Exception as exc:
            if _is_transport_failure(exc):
                raise ProviderError(
                    "transport", f"the answer stream from the {self.label} API broke off: {type(exc).__name__}: {exc}"
                ) from None
            raise

    async def _answer(self, client: AsyncOpenAI, known: dict[str, Any], body: dict[str, Any], timeout: float,
                      request: ModelRequest) -> ModelResponse:
        """Send the call and read the answer (streamed or whole); SDK errors pass through."""
        if not self.streaming:
            completion = await client.chat.completions.create(**known, extra_body=body or None, timeout=timeout)
            return map_completion(completion, self.label)
        stream = await client.chat.completions.create(
            **known, stream=True, stream_options={"include_usage": True}, extra_body=body or None, timeout=timeout,
        )
        assembler = ChatStreamAssembler(request.on_text, self.label)
        async for chunk in stream:
            assembler.feed(chunk)
        return assembler.response()

    async def list_models(self) -> list[dict[str, Any]]:
        """The server's ``/v1/models`` list: ``[{id, owned_by}]``; raises ProviderError."""
        import openai

        try:
            page = await self.client().models.list(timeout=30)
            return [{"id": m.id, "owned_by": getattr(m, "owned_by", None)} async for m in page]
        except openai.APIStatusError as exc:
            raise classify_openai_error(exc.status_code, _error_body(exc), exc.response.headers, self.label,
                                        self._api_key_env) from None
        except openai.APIConnectionError:
            where = f" at {self.base_url}" if self.base_url else ""
            raise ProviderError("transport", f"could not reach the {self.label} API{where}") from None


# The create() keywords lev_nb sends by name; everything else (a stage's own parameters) travels in
# extra_body, so a server-specific field (Ollama's ``think``) reaches the server as written.
_SDK_KEYWORDS = frozenset({
    "model", "messages", "tools", "temperature", "max_tokens", "max_completion_tokens", "response_format",
    "top_p", "stop", "seed", "parallel_tool_calls", "tool_choice",
})


# ---------------------------------------------------------------------------------------- clients
def _make_client(api_key: str, base_url: str | None) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=DEFAULT_TIMEOUT_S)


_clients: LoopClients[AsyncOpenAI] = LoopClients(_make_client)


def shared_client(api_key: str, base_url: str | None) -> AsyncOpenAI:
    """The SDK client for this key and base URL on the running event loop (:mod:`.clients`)."""
    return _clients.get(api_key, base_url)


# ---------------------------------------------------------------------------------------- request
def build_chat_body(request: ModelRequest, *, default_model: str = "", tokens_key: str = "max_tokens",
                    cache_key: bool = False, constrain: bool = False) -> dict[str, Any]:
    """The Chat Completions body for ``request``: model, messages (the system blocks merged into one
    system message), tools, the answer's cap under ``tokens_key``, temperature, then
    ``request.extra`` over the top. With ``cache_key`` the body names a ``prompt_cache_key`` derived
    from the stage and its system prompt, so calls that share the prefix land where it is cached.
    With ``constrain``, ``submit_output`` is a strict tool holding ``content`` to
    ``request.output_schema`` when strict mode can hold that schema (:mod:`.structured`)."""
    system = "\n\n".join(text for text in request.system if text)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in request.messages:
        messages.extend(_message_params(message))
    body: dict[str, Any] = {"model": request.model or default_model, "messages": messages,
                            tokens_key: request.max_tokens}
    if request.tools:
        body["tools"] = [_tool_param(t, request.output_schema if constrain else None) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if cache_key and system:
        digest = hashlib.sha256(system.encode("utf-8")).hexdigest()[:16]
        body["prompt_cache_key"] = f"lev-{request.stage or 'run'}-{digest}"
    body.update(request.extra)
    if "max_output_tokens" in body:  # the upstream's spelling of the cap, as a stage parameter
        body[tokens_key] = body.pop("max_output_tokens")
    return body


def _message_params(message: Message) -> list[dict[str, Any]]:
    """One lev_nb message as Chat Completions messages: tool results become ``tool`` messages
    (one per call, in order), an assistant's tool calls its ``tool_calls``."""
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text]
    if message.role == "assistant":
        calls = [
            {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input)}}
            for b in message.content if isinstance(b, ToolUseBlock)
        ]
        # With tool calls an assistant's content may be null; without, the API wants a string.
        param: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or (None if calls else "")}
        if calls:
            param["tool_calls"] = calls
        return [param]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b.tool_use_id,
         "content": f"Error: {b.content}" if b.is_error and not b.content.startswith("Error") else b.content}
        for b in message.content if isinstance(b, ToolResultBlock)
    ]
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _tool_param(tool: ToolSpec, output_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    held = constrained_submit_tool(tool, output_schema) if output_schema and tool.name == SUBMIT_TOOL else None
    if held is not None:
        return {"type": "function", "function": {"name": held.name, "description": held.description,
                                                 "parameters": held.parameters, "strict": True}}
    return {"type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}


# -------------------------------------------------------------------------------------- streaming
class ChatStreamAssembler:
    """Builds a ModelResponse from streamed ``chat.completion.chunk`` objects (SDK objects or dicts).

    Text deltas are joined (and passed to ``on_text`` as they come); a tool call's id and name come
    with its first delta and its arguments are the JSON its pieces spell once joined, per
    ``index``. The usage arrives in a last chunk with no choices. :meth:`response` refuses a stream
    in which no choice ever finished.
    """

    def __init__(self, on_text: Callable[[str], None] | None = None, label: str = "OpenAI") -> None:
        self.on_text = on_text
        self.label = label
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.chunks = 0

    def feed(self, chunk: Any) -> None:
        """Take one chunk."""
        self.chunks += 1
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = usage
        for choice in _field(chunk, "choices") or []:
            if (_field(choice, "index") or 0) != 0:
                continue
            delta = _field(choice, "delta")
            piece = _field(delta, "content")
            if piece:
                self.text.append(piece)
                if self.on_text is not None:
                    self.on_text(piece)
            for call in _field(delta, "tool_calls") or []:
                index = _field(call, "index")
                slot = self.calls.setdefault(int(index or 0), {"id": "", "name": "", "arguments": []})
                if _field(call, "id"):
                    slot["id"] = _field(call, "id")
                function = _field(call, "function")
                if _field(function, "name"):
                    slot["name"] += _field(function, "name")
                if _field(function, "arguments"):
                    slot["arguments"].append(_field(function, "arguments"))
            reason = _field(choice, "finish_reason")
            if reason:
                self.finish = reason

    def response(self) -> ModelResponse:
        """The assembled answer; a ``transport`` ProviderError when the stream was cut short."""
        if self.finish is None:
            raise ProviderError(
                "transport",
                f"the answer stream from the {self.label} API ended before the answer was complete "
                f"(after {self.chunks} chunks)",
            )
        calls = [_tool_call(slot["id"], slot["name"], "".join(slot["arguments"]), self.label)
                 for _, slot in sorted(self.calls.items())]
        return ModelResponse(text="".join(self.text), tool_calls=calls, usage=usage_from(self.usage),
                             finish_reason=_finish(self.finish, calls))


def _tool_call(id_: str, name: str, raw: str, label: str) -> ToolCall:
    raw = raw.strip()
    try:
        arguments = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise ProviderError("invalid_response",
                            f"the {label} API sent arguments for tool '{name}' that are not JSON: {exc}") from None
    return ToolCall(id=str(id_ or f"call_{name}"), name=str(name),
                    arguments=arguments if isinstance(arguments, dict) else {})


def _finish(reason: str | None, calls: list[ToolCall]) -> str:
    if reason is None:
        return "tool_use" if calls else "complete"
    finish = _FINISH.get(reason, str(reason))
    # Some compatible servers say "stop" even when the answer is tool calls.
    return "tool_use" if calls and finish == "complete" else finish


def usage_from(usage: Any) -> Usage:
    """A Chat Completions ``usage`` as lev_nb counts it: ``prompt_tokens`` is the fresh input only,
    the prefix the server read from its cache (``prompt_tokens_details.cached_tokens``) is
    ``cached_tokens``, as pricing.py bills the two at their own rates."""
    prompt = _int(_field(usage, "prompt_tokens"))
    cached = _int(_field(_field(usage, "prompt_tokens_details"), "cached_tokens"))
    cached = min(cached, prompt)
    return Usage(prompt_tokens=prompt - cached, completion_tokens=_int(_field(usage, "completion_tokens")),
                 cached_tokens=cached)


def map_completion(completion: Any, label: str = "OpenAI") -> ModelResponse:
    """A non-streamed ``ChatCompletion`` as a ModelResponse."""
    choices = _field(completion, "choices") or []
    if not choices:
        raise ProviderError("invalid_response", f"the {label} API answer has no choices: {str(completion)[:200]}")
    message = _field(choices[0], "message")
    calls = [
        _tool_call(_field(c, "id") or "", _field(_field(c, "function"), "name") or "",
                   _field(_field(c, "function"), "arguments") or "", label)
        for c in _field(message, "tool_calls") or []
    ]
    return ModelResponse(text=_field(message, "content") or "", tool_calls=calls,
                         usage=usage_from(_field(completion, "usage")),
                         finish_reason=_finish(_field(choices[0], "finish_reason"), calls))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# ----------------------------------------------------------------------------------------- errors
def classify_openai_error(status: int, body: str, headers: Any = None, label: str = "OpenAI",
                          key_env: str | None = None) -> ProviderError:
    """The ProviderError for a non-2xx answer of a Chat Completions server
    (docs/providers.md#errors-and-retries).

    An exhausted quota (``insufficient_quota``, HTTP 402, or a body about credits or billing) is
    ``credits`` even on a 429: waiting does not help, topping up does. Any other 429 is
    ``rate_limited`` with the Retry-After hint; 401 and 403 are ``auth``; a 404 that names the
    model (``model_not_found``, Ollama's "model ... not found") is ``unknown_model``; 5xx is
    ``server``; anything else is ``api``.
    """
    retry_after = parse_retry_after(headers)
    detail = _error_message(body)
    lowered = body.lower()
    if status == 402 or "insufficient_quota" in lowered or "credit" in lowered or "billing" in lowered:
        return ProviderError("credits", f"HTTP {status}: the {label} account is out of credits or quota: {detail}")
    if status == 429:
        return ProviderError("rate_limited", f"HTTP 429: rate limited by the {label} API: {detail}", retry_after)
    if status == 401:
        check = f"; check {key_env}" if key_env else ""
        return ProviderError("auth", f"HTTP 401: the {label} API rejected the key{check}: {detail}")
    if status == 403:
        return ProviderError("auth", f"HTTP 403: forbidden; the {label} key may not use this model: {detail}")
    if status == 404 and ("model" in lowered or "not found" in lowered):
        return ProviderError("unknown_model", f"HTTP 404: the {label} server has no such model: {detail}")
    if status >= 500:
        return ProviderError("server", f"HTTP {status} server error from the {label} API: {detail}", retry_after)
    return ProviderError("api", f"HTTP {status}: {detail}")


def _error_message(body: str) -> str:
    """The ``error.message`` of a JSON error body (with its code), else the body itself, on one line."""
    text = body.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        code = error.get("code") or error.get("type")
        text = f"{error['message']}{f' ({code})' if code else ''}"
    elif isinstance(error, str):
        text = error
    return squeezed(text, _ERROR_BODY_LIMIT)


def _error_body(exc: Any) -> str:
    try:
        return str(exc.response.text)
    except (AttributeError, RuntimeError):
        return str(exc.body if exc.body is not None else exc.message)


def _stream_error(exc: Any, label: str) -> ProviderError:
    """An error event inside an answer stream (the server failed after it began answering)."""
    body = json.dumps({"error": exc.body}) if isinstance(getattr(exc, "body", None), dict) else str(exc)
    lowered = body.lower()
    if "insufficient_quota" in lowered:
        return ProviderError("credits", f"the {label} account is out of credits or quota: {_error_message(body)}")
    if "rate" in lowered and "limit" in lowered:
        return ProviderError("rate_limited", f"rate limited by the {label} API: {_error_message(body)}")
    return ProviderError("server", f"the {label} API failed while answering: {_error_message(body)}")

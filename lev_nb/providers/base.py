"""What every model backend shares: the Provider protocol and the one error type of a failed call.

The values a provider receives and returns (requests, messages, responses) live in
:mod:`lev_nb.messages`.
docs/providers.md#errors-and-retries lists the error kinds and which of them are worth a retry.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

from lev_nb.messages import ModelRequest, ModelResponse
from lev_nb.providers.blocking import run_blocking

__all__ = ["ProviderError", "ERROR_KINDS", "UNUSABLE_REASONS", "Provider", "Replayable", "call_complete"]


ERROR_KINDS: tuple[str, ...] = (
    "rate_limited",
    "server",
    "transport",
    "api",
    "auth",
    "credits",
    "invalid_response",
    "exhausted",
    "unknown_model",
)
#: Why a model cannot be used at all (so a stage falls back to the next one in its list), by the
#: kind of the error that said so; a ``transport`` error counts once its retries are spent.
UNUSABLE_REASONS: dict[str, str] = {
    "credits": "credits",
    "auth": "auth",
    "unknown_model": "unknown model",
    "transport": "unreachable",
}

# Kinds that are always worth retrying; "api" is transient only when its message says so.
_TRANSIENT_KINDS = frozenset({"rate_limited", "server", "transport"})
# An "api" error is transient when its HTTP status says so, or, without a status, when its text
# names an overload or a rate limit. Bare numbers are only read as the status: a 400 whose body
# mentions "500 tokens" is not a server error.
_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
_TRANSIENT_API_WORDS = (
    "too many requests",
    "rate limit",
    "overloaded",
    "internal server error",
    "bad gateway",
    "service unavailable",
    "gateway timeout",
)
_STATUS = re.compile(r"^\s*(?:http\s*)?(\d{3})\b", re.IGNORECASE)


class ProviderError(Exception):
    """A model call failed.

    ``kind`` is one of :data:`ERROR_KINDS`; ``retry_after`` is the server's hint in seconds, if any;
    ``transient`` says whether the engine should retry (rate limits, server and transport faults,
    and API errors whose message names an overload or a 5xx status).
    """

    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown provider error kind {kind!r} (valid: {', '.join(ERROR_KINDS)})")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """True when retrying the same request may succeed."""
        if self.kind in _TRANSIENT_KINDS:
            return True
        if self.kind == "api":
            status = _STATUS.match(self.message)
            if status:
                return int(status.group(1)) in _TRANSIENT_STATUSES
            lowered = self.message.lower()
            return any(word in lowered for word in _TRANSIENT_API_WORDS)
        return False

    @property
    def unusable_reason(self) -> str | None:
        """Why the model cannot be used at all (credits, auth, unknown model, unreachable), or None
        for an error that is about this request only (docs/providers.md#fallback-and-circuit-breakers)."""
        return UNUSABLE_REASONS.get(self.kind)


@runtime_checkable
class Provider(Protocol):
    """A model backend: anything with a ``name`` and a ``complete(request)`` method.

    ``complete`` may be a coroutine function (``async def``, called on the engine's event loop,
    which it must not block) or a plain function (``def``, called on a worker thread, so it may
    block on a network call). It receives a :class:`~lev_nb.messages.ModelRequest` and returns a
    :class:`~lev_nb.messages.ModelResponse`: the answer's ``text``, its ``tool_calls`` (each with
    an ``id`` the next request's tool result refers back to, a tool ``name`` from
    ``request.tools`` and a dict of ``arguments``), ``usage`` (token counts; zeros when unknown)
    and ``finish_reason`` (``complete``, ``tool_use``, ``token_limit`` or ``stop``). A provider
    that streams may pass text to ``request.on_text`` as it forms. A failure is a
    :class:`ProviderError` whose ``kind`` tells the engine whether to retry (``rate_limited``,
    ``server``, ``transport``), fall back to the stage's next model (``credits``, ``auth``,
    ``unknown_model``) or give up; any other exception is a failed call of kind ``api``.
    """

    # Read-only: a plain attribute, a property or a frozen dataclass field all satisfy it.
    @property
    def name(self) -> str:
        """The provider's display name (``provider/model`` for an override)."""
        ...

    def complete(self, request: ModelRequest) -> ModelResponse | Awaitable[ModelResponse]:
        """Answer one request or raise :class:`ProviderError` (sync or async)."""
        ...


async def call_complete(provider: Provider, request: ModelRequest) -> ModelResponse:
    """``provider.complete(request)``, whichever kind it is: awaited when it is a coroutine
    function, run on a worker thread when it is a plain one (a blocking call must not hold up
    every other run on the engine loop). A returned value that is not a ModelResponse is an
    ``invalid_response`` ProviderError naming what came back."""
    complete: Any = provider.complete
    if inspect.iscoroutinefunction(complete) or inspect.iscoroutinefunction(getattr(complete, "__call__", None)):
        result: Any = await complete(request)
    else:
        result = await run_blocking(complete, request)
        if inspect.isawaitable(result):  # a plain function that hands back an awaitable
            result = await result
    if not isinstance(result, ModelResponse):
        name = getattr(provider, "name", type(provider).__name__)
        raise ProviderError("invalid_response", f"the '{name}' provider's complete() returned "
                            f"{type(result).__name__}, not a ModelResponse")
    return result


@runtime_checkable
class Replayable(Protocol):
    """A provider whose answers depend on how many calls it has answered (a script). A resumed run
    takes its earlier calls from its journal, without asking the provider; it tells such a provider
    of each, so that the provider goes on from where the run stopped, not from its first answer."""

    def replayed(self, request: ModelRequest) -> None:
        """``request`` was answered from the run's journal: count it as answered."""
        ...

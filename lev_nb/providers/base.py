"""Engine-neutral types for talking to a model: requests, responses, errors, the Provider protocol.

Everything here is a plain dataclass so that the engine, the providers and the tests can build and
compare these values without importing one another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, runtime_checkable

__all__ = [
    "ToolCall",
    "ToolSpec",
    "TextBlock",
    "ToolUseBlock",
    "ToolResultBlock",
    "Block",
    "Message",
    "ModelRequest",
    "Usage",
    "ModelResponse",
    "ProviderError",
    "ERROR_KINDS",
    "Provider",
    "estimate_tokens",
    "request_text",
]


@dataclass
class ToolCall:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolSpec:
    """A tool as advertised to the model: its name, what it does, and a JSON Schema for its input."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass
class TextBlock:
    """Plain text inside a message."""

    text: str


@dataclass
class ToolUseBlock:
    """An assistant's request to call a tool (mirrors a ToolCall inside the transcript)."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolResultBlock:
    """The answer to one ToolUseBlock, sent back in a user message."""

    tool_use_id: str
    content: str
    is_error: bool = False


Block = Union[TextBlock, ToolUseBlock, ToolResultBlock]


@dataclass
class Message:
    """One conversation message: a plain string or a list of blocks."""

    role: Literal["user", "assistant"]
    content: str | list[Block]

    def blocks(self) -> list[Block]:
        """The content as a list of blocks (a plain string becomes one TextBlock)."""
        if isinstance(self.content, str):
            return [TextBlock(self.content)] if self.content else []
        return list(self.content)

    def text(self) -> str:
        """All text of the message joined together (tool blocks are left out)."""
        return "".join(b.text for b in self.blocks() if isinstance(b, TextBlock))


Purpose = Literal["stage", "routing", "summary"]


@dataclass
class ModelRequest:
    """Everything a provider needs for one completion.

    ``purpose`` says why the engine is asking: a stage turn, a routing choice (``choices`` then
    holds the candidate target names in order, and ``allow_done`` says whether DONE is allowed), or
    a summary for an edge transform. ``output_format`` is the stage's resolved final-output format,
    a hint the mock model uses to shape its answer.
    """

    provider: str
    model: str
    system: list[str] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None
    purpose: Purpose = "stage"
    stage: str = ""
    choices: list[str] = field(default_factory=list)
    allow_done: bool = False
    output_format: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None

    def tool_names(self) -> list[str]:
        """Names of the tools offered in this request, in order."""
        return [t.name for t in self.tools]


@dataclass
class Usage:
    """Token counts for one completion."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass
class ModelResponse:
    """What a provider returns: text, tool calls, usage and why it stopped."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "complete"


ERROR_KINDS: tuple[str, ...] = (
    "rate_limited",
    "server",
    "transport",
    "api",
    "auth",
    "credits",
    "invalid_response",
    "exhausted",
)

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


@runtime_checkable
class Provider(Protocol):
    """A model backend. The engine only ever calls :meth:`complete`."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request or raise :class:`ProviderError`."""
        ...


def estimate_tokens(text: str) -> int:
    """A rough token count: one token per four UTF-8 bytes, rounded up."""
    n = len(text.encode("utf-8"))
    return (n + 3) // 4


def request_text(request: ModelRequest) -> str:
    """All the prose in a request, for rough prompt-token estimates."""
    parts: list[str] = list(request.system)
    for message in request.messages:
        for block in message.blocks():
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolUseBlock):
                parts.append(block.name)
                parts.append(repr(block.input))
            else:
                parts.append(block.content)
    return "\n".join(parts)

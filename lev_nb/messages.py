"""The neutral value types of a conversation with a model, shared by providers, tools and the engine.

Plain dataclasses, so every layer can build and compare them without importing another: a request
(system prompt, messages, advertised tools), a response (text, tool calls, usage), and the blocks
that make up a message (docs/reference/api.md#providers describes what a provider sends and gets back).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, Literal, Union

from lev_nb.records import record

__all__ = [
    "ToolCall",
    "ToolSpec",
    "TextBlock",
    "ToolUseBlock",
    "ToolResultBlock",
    "Block",
    "Message",
    "SystemBlock",
    "Purpose",
    "ModelRequest",
    "StageDuties",
    "Usage",
    "ModelResponse",
    "request_text",
]


@record(frozen=False)
class ToolCall:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@record(frozen=False)
class ToolSpec:
    """A tool as advertised to the model: its name, what it does, and a JSON Schema for its input."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@record
class TextBlock:
    """Plain text inside a message."""

    text: str


@record
class ToolUseBlock:
    """An assistant's request to call a tool (mirrors a ToolCall inside the transcript)."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@record
class ToolResultBlock:
    """The answer to one ToolUseBlock, sent back in a user message."""

    tool_use_id: str
    content: str
    is_error: bool = False


# Blocks never change once made (frozen), so a provider may keep what it converted a block into
# for as long as the block lives (lev_nb.providers.rhai_provider does): the context assembler
# hands out the same blocks turn after turn.
Block = Union[TextBlock, ToolUseBlock, ToolResultBlock]


@record(frozen=False)
class Message:
    """One conversation message: a plain string or a list of blocks.

    ``cache_breakpoint`` is the context assembler's hint that the conversation up to here is worth
    caching (the system prefix did not change since the last request); a provider that caches
    prompts decides where its markers go from it (docs/concepts.md#context-regions).
    """

    role: Literal["user", "assistant"]
    content: str | list[Block]
    cache_breakpoint: bool = False

    def blocks(self) -> list[Block]:
        """The content as a list of blocks (a plain string becomes one TextBlock)."""
        if isinstance(self.content, str):
            return [TextBlock(self.content)] if self.content else []
        return list(self.content)

    def text(self) -> str:
        """All text of the message joined together (tool blocks are left out)."""
        return "".join(b.text for b in self.blocks() if isinstance(b, TextBlock))


@record
class SystemBlock:
    """What the assembler knows about one system block: the region it renders, how often it
    changes (``volatility``: stable, grows, rewritten) and its cache tier (0: stays until the
    run ends, 1: until its region is written, 2: changes all the time, never worth caching)."""

    text: str
    region: str = ""
    volatility: str = "rewritten"
    cache_tier: int = 1

    @property
    def never_cache(self) -> bool:
        """True for blocks a provider should never put a cache marker on."""
        return self.cache_tier >= 2


Purpose = Literal["stage", "routing", "summary"]


@record(frozen=False)
class StageDuties:
    """What the stage still owes before it may leave, as the engine sees it at this turn: regions
    to write (required and empty, or named by a gate that would refuse the stage now), whether a
    gate wants a file change, open checklist items ``(region, id)`` a gate wants closed, and
    whether an answer in text alone would be nudged (``use_a_tool``: no tool used yet this visit).

    A hint for a stand-in model (the mock's dry run satisfies what it can); real providers ignore
    it, as a real model learns the same from the prompt and the gate's message.
    """

    regions: list[str] = field(default_factory=list)
    modify_files: bool = False
    open_items: list[tuple[str, int]] = field(default_factory=list)
    use_a_tool: bool = False

    def __bool__(self) -> bool:
        return bool(self.regions or self.modify_files or self.open_items or self.use_a_tool)


@record(frozen=False)
class ModelRequest:
    """Everything a provider needs for one completion.

    ``purpose`` says why the engine is asking: a stage turn, a routing choice (``choices`` then
    holds the candidate target names in order, and ``allow_done`` says whether DONE is allowed), or
    a summary for an edge transform. ``output_format`` is the stage's resolved final-output format,
    a hint the mock model uses to shape its answer.

    ``system_blocks`` describes ``system`` block by block (same order and length) for providers
    that place prompt-caching markers; it is empty when the caller did not say. ``on_text``, when
    set, receives the answer's text as it forms (a provider that streams calls it with each delta;
    one that does not never calls it).

    ``duties`` (stage turns only) says what the stage still owes: hints the mock model uses to
    shape its answer and to pass the stage's gates.

    ``output_schema`` (stage turns only) is the JSON Schema the ``content`` of the stage's
    ``submit_output`` call must meet, when the stage owes an answer with one: a provider whose
    server can constrain a tool's arguments may hold the answer to it
    (:mod:`lev_nb.providers.structured`); the engine checks the answer either way.
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
    output_schema: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    system_blocks: list[SystemBlock] = field(default_factory=list)
    on_text: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def described_system(self) -> list[SystemBlock]:
        """``system`` with what is known about each block (all "rewritten" when nothing is)."""
        if len(self.system_blocks) == len(self.system) and all(
            b.text == t for b, t in zip(self.system_blocks, self.system)
        ):
            return list(self.system_blocks)
        return [SystemBlock(text) for text in self.system]
    duties: StageDuties | None = None

    def tool_names(self) -> list[str]:
        """Names of the tools offered in this request, in order."""
        return [t.name for t in self.tools]


@record(frozen=False)
class Usage:
    """Token counts for one completion."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@record(frozen=False)
class ModelResponse:
    """What a provider returns: text, tool calls, usage and why it stopped.

    ``warnings`` holds ``(code, message)`` pairs the provider wants the person told about this
    call (it answered, but not the way it was asked): the run tells each through
    ``RunState.warn`` (a code of :data:`lev_nb.engine.run_warnings.WARNING_CODES`, else ``warning``).
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "complete"
    warnings: list[tuple[str, str]] = field(default_factory=list)


def request_text(request: ModelRequest) -> str:
    """All the prose in a request, for rough prompt-token estimates."""
    parts: list[str] = list(request.system)
    for message in request.messages:
        if isinstance(message.content, str):  # the usual message: no blocks to build for it
            if message.content:
                parts.append(message.content)
            continue
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolUseBlock):
                parts.append(block.name)
                parts.append(repr(block.input))
            else:
                parts.append(block.content)
    return "\n".join(parts)

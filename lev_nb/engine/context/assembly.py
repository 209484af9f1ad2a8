"""Turning the regions a stage sees into a model request: system blocks and messages
(docs/concepts.md#context-regions).

Sliding-window regions become the conversation's messages; every other kind becomes one system
block. The result is engine-neutral (:mod:`lev_nb.messages` types), so any provider can
send it.
"""

from __future__ import annotations

from typing import Any

from lev_nb.engine.context.regions import Entry, Region, render_checklist
from lev_nb.messages import Block, Message, SystemBlock, TextBlock, ToolResultBlock, ToolUseBlock
from lev_nb.text import is_blank

__all__ = ["assemble", "assemble_blocks", "flag_cache_breakpoint", "render_system_block", "entries_to_messages"]

_VOLATILITY_RANK = {"stable": 0, "grows": 1, "rewritten": 2}


def _cache_tier(region: Region) -> int:
    """How long a region's block tends to stay the same: 0 always, 1 until written, 2 never."""
    if region.kind in ("pinned", "compact_history") or (
        region.kind == "custom" and region.config.persistent
    ):
        return 0
    if region.kind in ("temporary", "clearable"):
        return 2
    return 1


def _labelled(region: Region, body: str) -> str:
    """``## name`` above the body, with the description under it when it is shown."""
    if region.config.describe_in_prompt and region.config.description:
        return f"## {region.name}\n{region.config.description}\n\n{body}"
    return f"## {region.name}\n{body}"


def _joined(entries: list[Entry]) -> str:
    return "\n\n".join(entry.content for entry in entries)


def render_system_block(region: Region) -> str | None:
    """The system block for a non-conversation region, or None when it renders nothing. Kept on
    the region until its entries or its declaration change: every request renders every region."""
    kept = region.block
    if kept is not None and region.unchanged_since(kept[0], kept[1]) and kept[2] is region.config:
        return kept[3]
    text = _render_system_block(region)
    region.block = (region.entries, len(region.entries), region.config, text)
    return text


def _render_system_block(region: Region) -> str | None:
    if region.kind == "custom":
        # Script rendering belongs to the scripting layer; this is the fallback shape.
        return f"[{region.name}]:\n" + _joined(region.entries)
    if region.is_empty():
        return None
    if region.kind in ("pinned", "compact_history"):
        return _labelled(region, _joined(region.entries))
    if region.kind == "checklist":
        body = render_checklist(region.entries)
        return _labelled(region, body) if body else None
    if region.kind == "hashmap":
        parts = [
            f"### [{entry.key}]\n{entry.content}" if entry.key is not None else entry.content
            for entry in region.entries
        ]
        return f"[{region.name}]:\n" + "\n\n".join(parts)
    # temporary, clearable, compacting
    return f"[{region.name}]:\n" + _joined(region.entries)


def _rendered(entry: Entry) -> tuple[str, Any, bool, tuple[str, ...]]:
    """How ``entry`` takes part in the conversation: ``("result", block, False, (id,))`` for a tool
    result (it joins the user message of the results next to it), else ``(role, message, blank,
    tool_use_ids)``, where a blank message is left out. Made once per entry and kept on it, so a
    long conversation's messages and blocks are the same objects every turn (what a provider
    converts once per block, see lev_nb.providers.rhai_provider); nothing changes them after."""
    made = entry.rendered
    if made is not None and made[0] is entry.content:
        return made[1]
    role: str
    content: Any
    uses: tuple[str, ...] = ()
    if entry.kind == "tool_result":
        role, content = "result", ToolResultBlock(tool_use_id=entry.tool_call_id or "", content=entry.content,
                                                  is_error=entry.is_error)
        uses = (content.tool_use_id,)
    elif entry.kind == "assistant_turn":
        role, content = "assistant", entry.content
        if entry.tool_calls:
            content = [TextBlock(entry.content)] if entry.content else []
            calls = [ToolUseBlock(id=call["id"], name=call["name"], input=dict(call.get("input") or {}))
                     for call in entry.tool_calls]
            content += calls
            uses = tuple(call.id for call in calls)
    elif entry.kind == "user_message":
        role, content = "user", entry.content
    else:
        # Plain text is user-side unless it names its speaker.
        stripped = entry.content.strip()
        if stripped.startswith("Assistant: "):
            role, content = "assistant", stripped[len("Assistant: "):]
        elif stripped.startswith("User: "):
            role, content = "user", stripped[len("User: "):]
        else:
            role, content = "user", entry.content
    if role == "result":
        part: tuple[str, Any, bool, tuple[str, ...]] = (role, content, False, uses)
    else:
        part = (role, Message(role=role, content=content), _blank(content), uses)  # type: ignore[arg-type]
    entry.rendered = (entry.content, part)
    return part


def _results_message(first: Entry, blocks: list[Block]) -> Message:
    """The user message of consecutive tool results, kept on the first one's entry while the run
    of results stays the same."""
    key = tuple(blocks)
    kept = first.grouped
    if kept is not None and kept[0] == key:
        return kept[1]
    message = Message(role="user", content=blocks)
    first.grouped = (key, message)
    return message


def _conversation(entries: list[Entry]) -> tuple[list[Message], set[str], set[str]]:
    """A sliding window's entries as messages (see :func:`entries_to_messages`), with the ids of
    its tool uses and of the tool results it holds."""
    messages: list[Message] = []
    pending: list[Block] = []
    first: Entry | None = None
    uses: set[str] = set()
    results: set[str] = set()
    for entry in entries:
        role, part, blank, ids = _rendered(entry)
        if role == "result":
            if not pending:
                first = entry
            pending.append(part)
            results.update(ids)
            continue
        if ids:
            uses.update(ids)
        if pending:
            messages.append(_results_message(first, pending))  # type: ignore[arg-type]
            pending = []
        if not blank:
            messages.append(part)
    if pending:
        messages.append(_results_message(first, pending))  # type: ignore[arg-type]
    return messages, uses, results


def entries_to_messages(entries: list[Entry]) -> list[Message]:
    """A sliding window's entries as messages; consecutive tool results share one user message.

    The list is new each time; its messages and blocks are made once per entry (see
    :func:`_rendered`) and never changed afterwards: the assembler flags a message for caching by
    putting a flagged copy in its place. A blank entry gives no message (it still ends the run of
    tool results before it)."""
    return _conversation(entries)[0]


def _strip_orphans(messages: list[Message], uses: set[str] | None = None,
                   results: set[str] | None = None) -> list[Message]:
    """Drop tool_use blocks without a result and results without a tool_use. The messages come
    back as they are when nothing is dropped (the usual case), and only a message that loses a
    block is rebuilt. ``uses`` and ``results``, when the caller knows them, are the ids the
    messages hold (the windows' entries know theirs, so the usual call scans nothing)."""
    if uses is None or results is None:
        uses, results = set(), set()
        for message in messages:
            if isinstance(message.content, list):
                for block in message.content:
                    if isinstance(block, ToolUseBlock):
                        uses.add(block.id)
                    elif isinstance(block, ToolResultBlock):
                        results.add(block.tool_use_id)
    orphans = uses ^ results
    if not orphans:
        return messages

    def orphan(block: Any) -> bool:
        return (isinstance(block, ToolUseBlock) and block.id in orphans) or (
            isinstance(block, ToolResultBlock) and block.tool_use_id in orphans)

    cleaned: list[Message] = []
    for message in messages:
        if isinstance(message.content, list) and any(orphan(block) for block in message.content):
            message = Message(role=message.role, content=[block for block in message.content if not orphan(block)])
        cleaned.append(message)
    return cleaned


def _blank(content: str | list[Block]) -> bool:
    """Whether a message's content says nothing (blank text, or only blank text blocks)."""
    if isinstance(content, str):
        return is_blank(content)
    return all(isinstance(block, TextBlock) and is_blank(block.text) for block in content)


def _is_empty(message: Message) -> bool:
    return _blank(message.content)


def assemble(regions: list[Region]) -> tuple[list[str], list[Message]]:
    """Build (system blocks, messages) from ``regions`` in prompt order; see :func:`assemble_blocks`."""
    blocks, messages = assemble_blocks(regions)
    return [block.text for block in blocks], messages


def assemble_blocks(regions: list[Region]) -> tuple[list[SystemBlock], list[Message]]:
    """Build (described system blocks, messages) from ``regions`` in prompt order.

    System blocks are stable-sorted by declared volatility (stable, grows, rewritten), then by
    how long their kind stays unchanged, so the prefix a provider caches changes least. The
    messages lose orphaned tool blocks and empty messages, start with a ``Begin.`` user message when they would
    otherwise start with the assistant (or be empty), and end with ``Continue.`` when the
    assistant spoke last.
    """
    ranked: list[tuple[int, int, SystemBlock]] = []
    messages: list[Message] = []
    uses: set[str] = set()
    results: set[str] = set()
    scripted_messages = False  # a custom region's script gave messages (checked for emptiness here)
    for region in regions:
        if region.kind == "sliding_window":
            window, window_uses, window_results = _conversation(region.entries)
            messages.extend(window)
            uses |= window_uses
            results |= window_results
            continue
        rank = _VOLATILITY_RANK.get(region.config.volatility, 2)
        tier = _cache_tier(region)
        # A custom region with a script renders itself (see context/custom.py).
        scripted = getattr(region, "render_parts", None)
        parts = scripted() if scripted is not None else None
        if parts is not None:
            ranked.extend(
                (rank, tier, SystemBlock(text, region.name, region.config.volatility, tier)) for text in parts[0]
            )
            messages.extend(parts[1])
            scripted_messages = scripted_messages or bool(parts[1])
            continue
        block = render_system_block(region)
        if block is not None:
            ranked.append((rank, tier, SystemBlock(block, region.name, region.config.volatility, tier)))
    ranked.sort(key=lambda item: (item[0], item[1]))
    system = [block for _, _, block in ranked]
    # A script's messages are looked through for their ids; the windows' are known already.
    stripped = _strip_orphans(messages) if scripted_messages else _strip_orphans(messages, uses, results)
    if stripped is not messages or scripted_messages:
        # A message that lost its orphaned blocks may be empty now (the windows' blank entries
        # gave no message in the first place).
        stripped = [m for m in stripped if not _is_empty(m)]
    messages = stripped
    # The Messages API wants a user turn first; once the window has slid past the opening
    # user message (or there never was one), the conversation would start with the assistant.
    if not messages or messages[0].role == "assistant":
        messages.insert(0, Message(role="user", content="Begin."))
    if messages[-1].role == "assistant":
        messages.append(Message(role="user", content="Continue."))
    return system, messages


def flag_cache_breakpoint(messages: list[Message], system_changed: bool) -> None:
    """Mark the message worth caching up to, unless the system prefix changed since the last
    request (then nothing in the conversation can be read back from the cache): the fourth from
    the end when there are at least five messages, else the first when there are at least two
    (docs/concepts.md#context-regions)."""
    if system_changed:
        return
    if len(messages) >= 5:
        index = len(messages) - 4
    elif len(messages) >= 2:
        index = 0
    else:
        return
    # A flagged copy takes its place: the messages are shared with earlier requests (see _rendered).
    flagged = messages[index]
    messages[index] = Message(role=flagged.role, content=flagged.content, cache_breakpoint=True)

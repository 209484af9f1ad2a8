"""``lev context RUN``: what the model saw at a run's last request, region by region with sizes;
with ``full``, what each region held.

Read from transcript.jsonl, where each model call records the regions its request was built from
(name, kind, entries, tokens, budget), the system blocks whenever they changed (with the region
each one renders) and the messages that were new since the model's previous turn. The system
blocks of the last request are its last recorded ones; its conversation is rebuilt from the new
messages and answers of every turn before it, keeping the last ``message_count`` (what the
window had not evicted). A compaction call's own request (the summary prompt) is not what a stage
saw, so the last stage or routing request is the one shown.
"""

from __future__ import annotations

import json
from typing import Any

from lev_nb.explain.fields import as_dict
from lev_nb.explain.story import format_count, plural, table_lines
from lev_nb.records import record

__all__ = ["LastRequest", "last_request", "context_text", "context_json"]

STAGE_PURPOSES = ("stage", "routing")


@record
class LastRequest:
    """A run's last stage or routing request as its transcript records it."""

    number: int  # its place among the run's model calls, from 1
    entry: dict[str, Any]  # its transcript entry
    system: list[str]  # its system blocks
    system_regions: list[str]  # the region of each block ("" when not recorded)
    messages: list[dict[str, Any]]  # its conversation (rebuilt; see the module docstring)

    @property
    def regions(self) -> list[dict[str, Any]]:
        """The regions it was built from, with their sizes (empty for an older record)."""
        found = self.entry.get("regions")
        return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def last_request(transcript: list[dict[str, Any]]) -> LastRequest | None:
    """The last stage or routing request of ``transcript``, or None when there is none."""
    system: list[str] = []
    system_regions: list[str] = []
    conversation: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    found: LastRequest | None = None
    for number, entry in enumerate(transcript, 1):
        if entry.get("purpose") not in STAGE_PURPOSES:
            continue
        if isinstance(entry.get("system"), list):
            system = [str(block) for block in entry["system"]]
            named = entry.get("system_regions")
            system_regions = ([str(n) for n in named] if isinstance(named, list) and len(named) == len(system)
                              else [""] * len(system))
        if previous is not None:
            conversation.append(_answer_message(previous))
        conversation.extend(m for m in entry.get("messages") or [] if isinstance(m, dict))
        count = entry.get("message_count")
        if isinstance(count, int) and 0 < count < len(conversation):
            conversation = conversation[-count:]
        previous = entry.get("response") if isinstance(entry.get("response"), dict) else None
        found = LastRequest(number, entry, list(system), list(system_regions), list(conversation))
    return found


def _answer_message(response: dict[str, Any]) -> dict[str, Any]:
    """The model's answer to one request, as the message the next request carries."""
    blocks: list[dict[str, Any]] = []
    if response.get("text"):
        blocks.append({"type": "TextBlock", "text": response["text"]})
    for call in response.get("tool_calls") or []:
        if isinstance(call, dict):
            blocks.append({"type": "ToolUseBlock", "name": call.get("name"), "input": call.get("arguments")})
    return {"role": "assistant", "content": blocks}


def _message_text(message: dict[str, Any]) -> str:
    """A recorded message as text: its words, its tool calls and tool results."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type", "")
        if "ToolUse" in kind:
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            parts.append(f"[calls {block.get('name')}({arguments})]")
        elif "ToolResult" in kind:
            body = block.get("content")
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            parts.append(f"[result of {block.get('tool_use_id') or block.get('id') or 'a tool call'}] {text}")
        elif block.get("text") is not None:
            parts.append(str(block["text"]))
    return "\n".join(parts)


def context_json(run_id: str, request: LastRequest) -> dict[str, Any]:
    """The last request as ``lev context --json`` prints it."""
    entry = request.entry
    usage = as_dict(as_dict(entry.get("response")).get("usage"))
    return {
        "run_id": run_id, "call": request.number, "stage": entry.get("stage"), "purpose": entry.get("purpose"),
        "provider": entry.get("provider"), "model": entry.get("model"), "iteration": entry.get("iteration"),
        "prompt_tokens": usage.get("prompt_tokens"), "regions": request.regions,
        "system": [{"region": r, "text": t} for r, t in zip(request.system_regions, request.system)],
        "messages": request.messages, "tools": entry.get("tools") or [],
    }


def context_text(run_id: str, request: LastRequest, full: bool = False) -> str:
    """The last request as ``lev context`` prints it: a table of the regions with their sizes
    (the system blocks' sizes for an older record), then with ``full`` what each one held."""
    entry = request.entry
    what = "a routing question" if entry.get("purpose") == "routing" else f"model turn {entry.get('iteration')}"
    out = [f"run {run_id}: its last request ({what} in stage {entry.get('stage')}, "
           f"{entry.get('provider')}/{entry.get('model')}, call {request.number})"]
    regions = request.regions
    if regions:
        rows = [(str(r.get("name")), str(r.get("kind")), str(r.get("entries", "")), format_count(int(r.get("tokens") or 0)),
                 format_count(int(r.get("max_tokens") or 0)) if r.get("max_tokens") else "") for r in regions]
        rows.append(("TOTAL", "", str(sum(int(r.get("entries") or 0) for r in regions)),
                     format_count(sum(int(r.get("tokens") or 0) for r in regions)), ""))
        out += table_lines(("REGION", "KIND", "ENTRIES", "TOKENS", "BUDGET"), rows)
    else:
        out.append("(recorded by an older lev_nb: no region sizes; the system blocks and messages follow)")
        parts = [(f"system block {i + 1}", format_count(len(t))) for i, t in enumerate(request.system)]
        parts.append(("messages", plural(len(request.messages), "message")))
        out += table_lines(("PART", "SIZE (characters)"), parts)
    usage = as_dict(as_dict(entry.get("response")).get("usage"))
    if isinstance(usage.get("prompt_tokens"), int):
        out.append(f"the model counted {format_count(usage['prompt_tokens'])} prompt tokens for it "
                   "(the sizes above are estimates)")
    tools = entry.get("tools") or []
    out.append(f"tools offered: {', '.join(map(str, tools)) if tools else 'none'}")
    if full:
        out += _full(request)
    else:
        out.append(f"lev context {run_id} --full shows what each region held")
    return "\n".join(out) + "\n"


def _full(request: LastRequest) -> list[str]:
    out: list[str] = []
    for region, text in zip(request.system_regions, request.system):
        out += ["", f"── system: {region or 'block'} ({format_count(len(text))} characters)", text]
    out += ["", f"── conversation: {plural(len(request.messages), 'message')} (rebuilt from transcript.jsonl)"]
    for message in request.messages:
        out.append(f"[{message.get('role')}] {_message_text(message)}")
    return out

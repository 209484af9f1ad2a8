"""An MCP ``CallToolResult`` as the text of a tool result.

Text blocks are kept as they are; structured content is added as JSON when the text does not
already say it; an image or audio block becomes a note (the model gets no pixels through a tool
result here); embedded resources give their text, links their URI. An ``isError`` result starts
with ``[error] <tool>:`` like any failed tool. The text is cut to the shell tool's cap, with a note.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from lev_nb.text import cut_text_marked
from lev_nb.tools.builtin import SHELL_STREAM_CAP

__all__ = ["RESULT_CAP", "result_text"]

RESULT_CAP = SHELL_STREAM_CAP


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _block_text(block: Any) -> str | None:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return (f"[{kind} returned: {getattr(block, 'mime_type', '?')}, {_size(str(block.data))} bytes; "
                f"{kind}s from MCP tools are not shown to the model]")
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        return f"[resource {resource.uri}: {getattr(resource, 'mime_type', None) or 'binary'} data, not shown]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}" + (f" - {block.description}" if block.description else "") + "]"
    return None


def result_text(tool: str, result: Any) -> str:
    """The tool-result text for ``result`` (a ``mcp.types.CallToolResult``) of the call to ``tool``."""
    parts = [t for t in (_block_text(b) for b in result.content or []) if t is not None]
    structured = result.structured_content
    if structured is not None:
        dumped = json.dumps(structured, ensure_ascii=False, indent=2)
        compact = json.dumps(structured, ensure_ascii=False)
        said = any(compact in p or dumped in p for p in parts)
        # FastMCP wraps a plain return value as {"result": value}, whose text is already there.
        wrapped = isinstance(structured, dict) and list(structured) == ["result"] and any(
            p == str(structured["result"]) or p == json.dumps(structured["result"], ensure_ascii=False)
            for p in parts)
        if not said and not wrapped:
            parts.append(dumped if not parts else f"structured content:\n{dumped}")
    text = "\n".join(parts) if parts else "(the tool returned nothing)"
    if result.is_error:
        text = f"[error] {tool}: {text}"
    shown, cut = cut_text_marked(text, RESULT_CAP)
    if cut:
        shown += f"\n[truncated] the result was {len(text.encode('utf-8'))} bytes; only the first {RESULT_CAP} are shown."
    return shown

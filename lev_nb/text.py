"""Text helpers every layer shares: cutting on UTF-8 character boundaries, the one token estimate,
and the one way a span of time is written for people.

Budgets in lev_nb are counted in UTF-8 bytes (files, tool results, final outputs) or in estimated
tokens (context regions); lev_nb estimates a token as four bytes, rounded up. A cut never
splits a character, so whatever is kept can be written as UTF-8 and read back.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "is_blank",
    "estimate_tokens", "sorted_json", "squeezed", "cut_bytes", "cut_text", "cut_text_marked", "cut_to_tokens", "clip_shown",
    "format_elapsed", "without_surrogates",
]

# A surrogate code point in a Python str is always a lone one (a JSON pair decodes to one character).
_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (also inside lists and dicts) replaced by
    U+FFFD: a model's text may hold one, and a Rhai string (UTF-8) cannot."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_surrogates(v) for v in value]
    return value


def is_blank(text: str) -> bool:
    """Whether ``text`` is empty or only whitespace, the same answer as ``not text.strip()``
    without copying it: this runs over every entry of the context on every model call."""
    return not text or text.isspace()


# Built once: json.dumps with options builds an encoder on every call, and this runs every turn.
_SORTED_JSON = json.JSONEncoder(sort_keys=True, default=str)


def sorted_json(value: Any) -> str:
    """``value`` as JSON with its keys sorted (anything JSON cannot hold as its ``str``): one text
    for equal values, for comparing them, hashing them and estimating their tokens."""
    return _SORTED_JSON.encode(value)


def estimate_tokens(text: str) -> int:
    """The runtime's one token estimate: ceil(UTF-8 bytes / 4)."""
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


def cut_bytes(data: bytes, limit: int) -> bytes:
    """``data`` cut to at most ``limit`` bytes, backing off so no UTF-8 character is split."""
    if limit <= 0:
        return b""
    if len(data) <= limit:
        return data
    end = limit
    # A continuation byte (10xxxxxx) at the cut means a character straddles it: drop its start.
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


def cut_text(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that fits in ``limit`` UTF-8 bytes."""
    return cut_text_marked(text, limit)[0]


def cut_text_marked(text: str, limit: int) -> tuple[str, bool]:
    """Like :func:`cut_text`, and whether anything was cut."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text, False
    return cut_bytes(raw, limit).decode("utf-8", "surrogatepass"), True


def cut_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` within ``tokens`` estimated tokens (``tokens * 4`` bytes)."""
    return cut_text(text, tokens * 4)


_WORD = re.compile(r"\S+")  # what str.split() splits on is what \s matches (Python's isspace)


def squeezed(text: str, limit: int) -> str:
    """``" ".join(text.split())[:limit]``: ``text`` on one line, runs of whitespace as one space,
    at most ``limit`` characters, without splitting all of a long text to keep its start."""
    if len(text) <= 4 * limit + 64:  # short: one split is the quickest
        return " ".join(text.split())[:limit]
    words: list[str] = []
    size = -1
    for match in _WORD.finditer(text):
        words.append(match.group())
        size += len(words[-1]) + 1
        if size >= limit:
            break
    return " ".join(words)[:limit]


def clip_shown(text: str, limit: int) -> str:
    """``text`` as shown to a person: its first ``limit`` characters, and a note of its length
    when it was longer."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def format_elapsed(seconds: float, *, rough: bool = False) -> str:
    """A span of time for people: 12.3 s, 4 min 05 s, 1 h 02 min.

    ``rough`` rounds to one unit, for an estimate that should not look precise (a batch's time
    left): 45 s, 3 min, 1.5 h."""
    if rough:
        if seconds < 90:
            return f"{seconds:.0f} s"
        if seconds < 5400:
            return f"{seconds / 60:.0f} min"
        return f"{seconds / 3600:.1f} h"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"

"""Reading a run's files in windows that never split a UTF-8 character (``Run.read_artifact``;
docs/concepts.md#final-outputs, large artifacts)."""

from __future__ import annotations

import os
from typing import Any

from lev_nb.workspace import PathEscape, confine


def _char_start(data: bytes, index: int) -> int:
    """Move ``index`` back to the first byte of the character it falls in."""
    while 0 < index < len(data) and (data[index] & 0xC0) == 0x80:
        index -= 1
    return index


def read_window(workdir: str | os.PathLike[str], path: str, offset: int = 0, window: int = 1 << 20) -> dict[str, Any]:
    """One window of ``path`` (relative to ``workdir``) starting at byte ``offset``."""
    if window < 4:
        raise ValueError("window must be at least 4 bytes (one UTF-8 character)")
    if offset < 0:
        raise ValueError("offset must not be negative")
    try:
        target = confine(workdir, path)
    except PathEscape:
        raise ValueError(f"'{path}' is outside the run's working directory") from None
    if not target.is_file():
        raise FileNotFoundError(f"'{path}' is not a file in the run's working directory")
    size = target.stat().st_size
    with open(target, "rb") as handle:
        # Read one byte before and up to three after the window to find character boundaries.
        start = max(0, offset - 3)
        handle.seek(start)
        data = handle.read(offset - start + window + 3)
    begin = _char_start(data, offset - start)
    end = min(len(data), begin + window)
    if start + end < size:
        end = _char_start(data, end)
        if end <= begin:  # a window smaller than one character: take the whole character
            end = begin + 1
            while end < len(data) and (data[end] & 0xC0) == 0x80:
                end += 1
    chunk = data[begin:end]
    next_offset = start + end if start + end < size else None
    return {
        "path": path,
        "size": size,
        "offset": start + begin,
        "next_offset": next_offset,
        "content": chunk.decode("utf-8", errors="replace"),
    }

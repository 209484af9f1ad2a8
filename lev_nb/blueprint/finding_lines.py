"""Where in the TOML text a validation finding points: the line a person should look at.

A :class:`~lev_nb.blueprint.report.Finding` names a stage and says what is wrong in words; it carries
no position, because the lints judge the model, not the text. :func:`finding_line` reads the
position back from the source the blueprint was loaded from, in this order:

1. a dotted key path the message writes (``stages.write.output.format``, ``[stages.a.model]``),
   when it points below the stage's own header;
2. for a stage finding, a key of that stage the message or its fix names and the text writes
   (``allow_complete``), then a quoted name (``'reed_file'``) on a line of the stage's tables;
3. a ``[table]`` the message or fix names (``[safe_commands]``), then a quoted name anywhere;
4. the stage's header; otherwise None (the finding is about the blueprint as a whole).
"""

from __future__ import annotations

import re

from .errors import locate_key
from .report import Finding

_DOTTED = re.compile(r"\[?\b([A-Za-z_][\w-]*(?:\.[\w-]+)+)\]?")
_TABLE = re.compile(r"\[([A-Za-z_][\w-]*)\]")
_QUOTED = re.compile(r"'([^'\s]+)'|\"([^\"\s]+)\"")
_WORD = re.compile(r"\b[a-z_][a-z0-9_]*\b")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_TOP_TABLES = frozenset({
    "agent", "stages", "context", "tool_permissions", "security", "sandbox", "read_paths", "safe_commands",
    "compaction", "repetition_detection", "transforms", "model",
})


def finding_line(finding: Finding, source: str, raw: dict[str, object] | None = None) -> int | None:
    """The 1-based line of ``source`` that ``finding`` is about, or None when it is about the whole
    blueprint. ``raw`` is the parsed TOML (``Blueprint.raw``): it says which keys a stage writes."""
    said = f"{finding.message} {finding.fix or ''}"
    stage = finding.stage
    header = _position(source, ["stages", stage]) if stage else None
    for path in _dotted_paths(said):
        if stage and path[:2] != ["stages", stage]:
            continue
        found = _position(source, path)
        if found is not None and found != header:
            return found
    if stage:
        written = _stage_table(raw, stage)
        for word in _WORD.findall(said):
            if word in written:
                found = _position(source, ["stages", stage, word])
                if found is not None:
                    return found
        for name in _quoted(said):
            found = _line_with(source, name, within=["stages", stage])
            if found is not None:
                return found
        return header
    for table in _TABLE.findall(said):
        if table in _TOP_TABLES:
            found = _position(source, [table])
            if found is not None:
                return found
    for name in _quoted(said):
        found = _line_with(source, name)
        if found is not None:
            return found
    return None


def _position(source: str, key_path: list[str]) -> int | None:
    loc = locate_key(source, key_path)
    return loc[0] if loc else None


def _dotted_paths(text: str) -> list[list[str]]:
    paths = [m.group(1).split(".") for m in _DOTTED.finditer(text)]
    return [p for p in paths if p[0] in _TOP_TABLES]


def _quoted(text: str) -> list[str]:
    return [a or b for a, b in _QUOTED.findall(text)]


def _stage_table(raw: dict[str, object] | None, stage: str) -> set[str]:
    stages = raw.get("stages") if isinstance(raw, dict) else None
    table = stages.get(stage) if isinstance(stages, dict) else None
    return set(table) if isinstance(table, dict) else set()


def _line_with(source: str, name: str, within: list[str] | None = None) -> int | None:
    """The first line that mentions ``name`` as a word (inside the tables under ``within``, when given)."""
    word = re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])")
    inside = within is None
    for number, line in enumerate(source.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None and within is not None:
            parts = [p.strip().strip("\"'") for p in header.group(1).split(".")]
            inside = parts[: len(within)] == within
        if inside and word.search(line.split("#", 1)[0]):
            return number
    return None

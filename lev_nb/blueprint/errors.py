"""The one exception a bad blueprint raises, and how it finds where in the file the problem is."""

from __future__ import annotations

import re
from collections.abc import Iterable

from lev_nb.errors import CleanError, ErrorKind, LocatedError, Problem


class BlueprintError(CleanError, LocatedError):
    """A blueprint that cannot be used: unreadable, not TOML, or breaking a rule of the format.

    In a notebook it shows as one block: the message, the file:line:col and key path, the hint.

    Attributes: ``path`` (file or None), ``key_path`` (e.g. ``stages.plan.transitions.review.gate``),
    ``line`` / ``column`` (1-based, where known), ``hint`` (a "did you mean" or what to do),
    ``kind`` ("read", "parse" or "validation", as ``lev validate`` reports them) and ``message``
    (the bare message without the location prefix).
    """

    unnamed = "<blueprint>"
    default_kind: ErrorKind = "parse"

    def _where(self) -> str | None:
        """``file[:line[:col]]`` (``<blueprint>`` for text); None when the message already names the
        file and no line is known, so a missing file is named once."""
        if self.path is not None and self.line is None and self._message_names_path():
            return None
        return super()._where()

    def _message_names_path(self) -> bool:
        assert self.path is not None
        names = {str(self.path)}
        if self.path.name == "agent.leviath":
            names.add(str(self.path.parent))
        return any(name in self.message for name in names)

    def problem(self) -> Problem:
        """The notebook's clean block: the message, where (file:line:col, key path), the hint."""
        location = self._where()
        if location == "<blueprint>":  # text without a line: nothing to point at
            location = None
        places = [p for p in (location, f"key {self.key_path}" if self.key_path else None) if p]
        return Problem(self.message, ", ".join(places) or None, self.hint)


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice closest in spelling to ``word``, or None when none is close enough."""
    import difflib  # only when there is a misspelling to name: a first run need not import it

    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return matches[0] if matches else None


_PARTS = re.compile(r"[_\-.]")  # what joins the words of a name: max_iterations, tool-routing


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A "did you mean 'x'?" hint for a misspelt key or value, or None when nothing is close.

    A word that is one whole part of up to three longer names (``tools`` for a stage's
    ``allow_blocking_tools``, ``available_tools`` and ``required_tools``) names those: spelling
    alone offered ``hooks``."""
    options = list(choices)
    within = [f"'{c}'" for c in options if c != word and word.lower() in _PARTS.split(c.lower())]
    if 0 < len(within) <= 3:
        names = " or ".join(within) if len(within) < 3 else f"{within[0]}, {within[1]} or {within[2]}"
        return f"did you mean {names}?"
    match = closest(word, options)
    return f"did you mean '{match}'?" if match else None


def unrecognized_arguments(unknown: list[str], options: Iterable[str]) -> str:
    """argparse's "unrecognized arguments: ..." message, with a "did you mean" when the first
    unknown ``--option`` is close to one of ``options`` (the command line and the magics say it alike)."""
    message = f"unrecognized arguments: {' '.join(unknown)}"
    first = next((u.partition("=")[0] for u in unknown if u.startswith("--")), None)
    hint = did_you_mean(first, [o for o in options if o.startswith("--")]) if first else None
    return message + (f" ({hint.replace(chr(39), '')})" if hint else "")


# ------------------------------------------------------------------------------------------------
# Locating a key path in TOML source text
# ------------------------------------------------------------------------------------------------
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _split_key(text: str) -> tuple[list[str], int] | None:
    """Split a dotted TOML key at the start of ``text``; returns (parts, chars consumed)."""
    parts: list[str] = []
    i = 0
    n = len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return None
        ch = text[i]
        if ch in "\"'":
            end = text.find(ch, i + 1)
            if end < 0:
                return None
            parts.append(text[i + 1:end])
            i = end + 1
        else:
            m = _BARE.match(text, i)
            if not m:
                return None
            parts.append(m.group(0))
            i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == ".":
            i += 1
            continue
        return parts, i


def locate_key(source: str, key_path: list[str]) -> tuple[int, int] | None:
    """Find the (line, column) where the deepest written prefix of ``key_path`` is declared.

    A light scanner, not a TOML parser: it follows table headers and ``key = value`` lines (and
    keys inside one-line inline tables), skipping multi-line strings.
    """
    if not key_path:
        return None
    best: tuple[int, tuple[int, int]] | None = None  # (matched depth, position)
    current: list[str] = []
    in_multiline: str | None = None
    for lineno, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if in_multiline is not None:
            if stripped.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("["):
            inner = stripped[2:] if stripped.startswith("[[") else stripped[1:]
            split = _split_key(inner)
            if split is None:
                continue
            current = split[0]
            path = current
            col = indent + 1
        else:
            split = _split_key(line)
            if split is None or split[1] >= len(line) or line[split[1]] != "=":
                continue
            path = current + split[0]
            col = indent + 1
            value = line[split[1] + 1:]
            for quote in ('"""', "'''"):
                if value.count(quote) % 2 == 1:
                    in_multiline = quote
            # Keys of a one-line inline table (`gate = { region = "x" }`).
            depth = _match_depth(path, key_path)
            if depth == len(path) and depth < len(key_path):
                sub = key_path[depth]
                m = re.search(r"[{,]\s*" + re.escape(sub) + r"\s*=", value)
                if m:
                    sub_col = split[1] + 1 + m.start() + len(m.group(0)) - len(m.group(0).lstrip("{, \t")) + 1
                    cand = (depth + 1, (lineno, sub_col))
                    if best is None or cand[0] > best[0]:
                        best = cand
                    continue
        depth = _match_depth(path, key_path)
        if depth and depth == min(len(path), len(key_path)) and (best is None or depth > best[0]):
            best = (depth, (lineno, col))
    return best[1] if best else None


def _match_depth(path: list[str], key_path: list[str]) -> int:
    depth = 0
    for a, b in zip(path, key_path):
        if a != b:
            break
        depth += 1
    return depth

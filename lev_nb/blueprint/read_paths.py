"""The ``[read_paths]`` entry forms, compiled and matched (docs/security.md#reads-outside-the-workdir).

A blueprint's ``[read_paths] allow`` *declares* reads outside the run's workdir; the user's config
*grants* them (``[security] read_paths``, ``[agent_read_paths.<agent>] allow``, or
``[security] allow_blueprint_read_paths = true``). Both lists use the same three forms, owned here:

- an exact path: grants the subtree under it (``~/`` is the user's home; a relative path hangs
  off the workdir);
- ``glob:PATTERN``: ``*`` and ``?`` stay inside one path component, ``**`` (a whole component)
  crosses them, ``[...]`` / ``[!...]`` are character classes; ``~/`` and relative patterns are
  anchored at the (escaped) home or workdir, and leading ``./`` / ``../`` fold into the workdir;
- ``regex:PATTERN``: matched against the whole path; it must start with ``/`` or ``~/``.

Matching is on text with ``/`` separators (POSIX path semantics, case-sensitive).
:meth:`ReadPathSet.matches_lexically` never touches the disk, so a grant naming a folder that does
not exist yet still reads as a grant; that is what reports use. (Enforcing a grant at run time means
matching the *real* path a read resolves to, after :func:`lev_nb.workspace.confine` has followed
every symlink, with exact roots resolved the same way; that belongs with the one confinement rule.)
:meth:`ReadPathEntry.sample_path` gives one concrete path an entry lets through, which is how a
report decides whether a grant covers a declaration; an entry whose pattern admits no sample is
"cannot be checked from the pattern alone".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from lev_nb.records import record

__all__ = [
    "SAMPLE_COMPONENT",
    "GlobPattern",
    "ReadPathEntry",
    "ReadPathError",
    "ReadPathSet",
    "compile_entry",
    "grant_stanza",
    "home_dir",
    "toml_key",
]

# Stands in for a wildcard when a sample path is built from a pattern; unlikely as a real name.
SAMPLE_COMPONENT = "_lev_probe"


class ReadPathError(ValueError):
    """A read_paths entry that cannot be compiled; the message names the entry."""


def home_dir() -> Path | None:
    """The user's home folder (what ``~/`` expands to), or None when it cannot be found."""
    home = os.path.expanduser("~")
    return None if home == "~" else Path(home)


# ------------------------------------------------------------------------------------------------
# Globs (the semantics of the pattern language the upstream uses, with a literal separator)
# ------------------------------------------------------------------------------------------------
_CHAR, _ANY_CHAR, _ANY_SEQ, _ANY_REC, _WITHIN, _EXCEPT = range(6)
_MATCH, _SUB_MISS, _MISS = range(3)
_Spec = tuple[str, str]  # (start, end): a single character has start == end


class GlobPattern:
    """A compiled glob. ``*``/``?``/classes never match ``/``; ``**`` must be a whole component."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self._tokens = _parse_glob(pattern)

    @staticmethod
    def escape(text: str) -> str:
        """``text`` with its metacharacters bracketed, so the pattern matches exactly ``text``."""
        return "".join(f"[{c}]" if c in "?*[]" else c for c in text)

    def matches(self, path: str) -> bool:
        """Whether the whole of ``path`` matches."""
        return self._match(True, path, 0, 0) == _MATCH

    def _match(self, follows_sep: bool, s: str, pos: int, ti: int) -> int:
        tokens = self._tokens
        while ti < len(tokens):
            kind, arg = tokens[ti]
            if kind in (_ANY_SEQ, _ANY_REC):
                found = self._match(follows_sep, s, pos, ti + 1)  # the empty match first
                if found != _SUB_MISS:
                    return found
                while pos < len(s):
                    c = s[pos]
                    pos += 1
                    follows_sep = c == "/"
                    if kind == _ANY_REC and not follows_sep:
                        continue  # ** resumes only at the start of a component
                    if kind == _ANY_SEQ and follows_sep:
                        return _SUB_MISS  # * never crosses a separator
                    found = self._match(follows_sep, s, pos, ti + 1)
                    if found != _SUB_MISS:
                        return found
            else:
                if pos >= len(s):
                    return _MISS
                c = s[pos]
                pos += 1
                is_sep = c == "/"
                if kind == _CHAR:
                    ok = c == arg
                elif is_sep:
                    ok = False
                elif kind == _ANY_CHAR:
                    ok = True
                elif kind == _WITHIN:
                    ok = _in_specs(arg, c)
                else:
                    ok = not _in_specs(arg, c)
                if not ok:
                    return _SUB_MISS
                follows_sep = is_sep
            ti += 1
        return _MATCH if pos == len(s) else _SUB_MISS


def _parse_glob(pattern: str) -> list[tuple[int, object]]:
    chars = pattern
    n = len(chars)
    tokens: list[tuple[int, object]] = []
    i = 0
    while i < n:
        c = chars[i]
        if c == "?":
            tokens.append((_ANY_CHAR, None))
            i += 1
        elif c == "*":
            start = i
            while i < n and chars[i] == "*":
                i += 1
            count = i - start
            if count > 2:
                raise ValueError(_glob_error(start + 2, "a wildcard is either * or **"))
            if count == 1:
                tokens.append((_ANY_SEQ, None))
                continue
            if i == 2 or chars[start - 1] == "/":
                if i < n and chars[i] == "/":
                    i += 1
                elif i != n:
                    raise ValueError(_glob_error(i, "** must be a whole path component"))
            else:
                raise ValueError(_glob_error(start - 1, "** must be a whole path component"))
            if not (len(tokens) > 1 and tokens[-1][0] == _ANY_REC):
                tokens.append((_ANY_REC, None))
        elif c == "[":
            if i + 4 <= n and chars[i + 1] == "!":
                j = chars.find("]", i + 3)
                if j >= 0:
                    tokens.append((_EXCEPT, _char_specs(chars[i + 2:j])))
                    i = j + 1
                    continue
            elif i + 3 <= n and chars[i + 1] != "!":
                j = chars.find("]", i + 2)
                if j >= 0:
                    tokens.append((_WITHIN, _char_specs(chars[i + 1:j])))
                    i = j + 1
                    continue
            raise ValueError(_glob_error(i, "unclosed or empty character class"))
        else:
            tokens.append((_CHAR, c))
            i += 1
    return tokens


def _glob_error(pos: int, what: str) -> str:
    return f"{what} (near position {pos})"


def _char_specs(body: str) -> list[_Spec]:
    specs: list[_Spec] = []
    i = 0
    while i < len(body):
        if i + 3 <= len(body) and body[i + 1] == "-":
            specs.append((body[i], body[i + 2]))
            i += 3
        else:
            specs.append((body[i], body[i]))
            i += 1
    return specs


def _in_specs(specs: object, c: str) -> bool:
    return any(start <= c <= end for start, end in specs)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------
# Entries
# ------------------------------------------------------------------------------------------------
_REGEX_META = set(".[](){}*+?|^$\\")


@record
class ReadPathEntry:
    """One compiled entry: ``kind`` is "exact" (``root``), "glob" (``glob``) or "regex" (``regex``)."""

    raw: str
    kind: str
    root: str | None = None
    glob: GlobPattern | None = None
    regex: re.Pattern[str] | None = None
    regex_body: str | None = None

    def matches_text(self, path: str) -> bool:
        """Glob and regex entries: whether ``path`` (``/``-separated) matches the whole pattern."""
        if self.glob is not None:
            return self.glob.matches(path)
        if self.regex is not None:
            return self.regex.fullmatch(path) is not None
        raise TypeError("an exact entry is matched with covers()")

    def sample_path(self) -> str | None:
        """One path this entry lets through, or None when the pattern alone cannot give one.

        Every sample is checked against its own entry, so an untrustworthy one comes back as None.
        """
        if self.kind == "exact":
            return self.root
        if self.glob is not None:
            sample = _fill_wildcards(self.glob.text)
            return sample if sample is not None and self.glob.matches(sample) else None
        assert self.regex is not None and self.regex_body is not None
        literal = "".join(_take_literal(self.regex_body))
        candidates = []
        if "/" in literal:
            candidates.append(literal.rsplit("/", 1)[0] + "/" + SAMPLE_COMPONENT)  # a file in its folder
        if literal:
            candidates.append(literal)
        for candidate in candidates:
            if self.regex.fullmatch(candidate) is not None:
                return candidate
        return None


def _take_literal(body: str) -> Iterable[str]:
    for c in body:
        if c in _REGEX_META:
            return
        yield c


def _fill_wildcards(pattern: str) -> str | None:
    out: list[str] = []
    previous_star = False
    for c in pattern:
        if c == "[":
            return None  # a class would have to be guessed at
        if c == "*":
            if not previous_star:
                out.append(SAMPLE_COMPONENT)
            previous_star = True
            continue
        out.append("x" if c == "?" else c)
        previous_star = False
    return "".join(out)


def compile_entry(raw: str, workdir: str | os.PathLike[str], home: str | os.PathLike[str] | None) -> ReadPathEntry:
    """Compile one entry against a workdir and a home folder; raises :class:`ReadPathError`."""
    if not raw.strip():
        raise ReadPathError("read_paths entry is empty")
    home_text = str(home) if home is not None else None
    if raw.startswith("regex:"):
        return _compile_regex(raw, raw[len("regex:"):], home_text)
    if raw.startswith("glob:"):
        return _compile_glob(raw, raw[len("glob:"):], str(workdir), home_text)
    return _compile_exact(raw, str(workdir), home_text)


def _absolute_shaped(text: str) -> bool:
    """Starts like an absolute path: ``/...`` or a drive letter ``C:...`` (taken literally)."""
    return text.startswith("/") or (len(text) >= 2 and text[0].isascii() and text[0].isalpha() and text[1] == ":")


def _need_home(raw: str, home: str | None) -> str:
    if home is None:
        raise ReadPathError(f"read_paths entry '{raw}': '~' cannot be expanded, no home folder is known")
    return home


def _compile_regex(raw: str, rest: str, home: str | None) -> ReadPathEntry:
    if not rest:
        raise ReadPathError(f"read_paths entry '{raw}': the regex is empty")
    if rest.startswith("~"):
        after = rest[1:]
        if after and not after.startswith("/"):
            raise ReadPathError(f"read_paths entry '{raw}': only '~/' (your own home) can be expanded")
        body = re.escape(_need_home(raw, home)) + after
    elif _absolute_shaped(rest):
        body = rest
    else:
        raise ReadPathError(
            f"read_paths entry '{raw}': a regex must start with '/', a drive letter or '~/'; "
            "write a workdir-relative pattern as 'glob:' instead"
        )
    try:
        compiled = re.compile(f"(?:{body})")
    except re.error as exc:
        raise ReadPathError(f"read_paths entry '{raw}': not a valid regex: {exc}") from None
    return ReadPathEntry(raw=raw, kind="regex", regex=compiled, regex_body=body)


def _compile_glob(raw: str, rest: str, workdir: str, home: str | None) -> ReadPathEntry:
    if not rest:
        raise ReadPathError(f"read_paths entry '{raw}': the glob is empty")
    text = rest.replace("\\", "/")  # a glob has no escapes, so this only makes Windows-style text portable
    if text.startswith("~"):
        after = text[1:]
        if after and not after.startswith("/"):
            raise ReadPathError(f"read_paths entry '{raw}': only '~/' (your own home) can be expanded")
        text = GlobPattern.escape(_need_home(raw, home)) + after
    elif not _absolute_shaped(text):
        text = _anchor_relative_glob(raw, text, workdir)
    if any(part in (".", "..") for part in text.split("/")):
        raise ReadPathError(
            f"read_paths entry '{raw}': a glob cannot contain '.' or '..' components "
            "(a relative glob may only start with them)"
        )
    try:
        pattern = GlobPattern(text)
    except ValueError as exc:
        raise ReadPathError(f"read_paths entry '{raw}': not a valid glob: {exc}") from None
    return ReadPathEntry(raw=raw, kind="glob", glob=pattern)


def _anchor_relative_glob(raw: str, text: str, workdir: str) -> str:
    """Prefix a relative glob with the (escaped) workdir, folding its leading ./ and ../ into it."""
    base = workdir.split("/")
    while len(base) > 1 and base[-1] == "":
        base.pop()
    rest = text
    while True:
        if rest.startswith("./"):
            rest = rest[2:]
        elif rest.startswith("../"):
            if len(base) <= 1:
                raise ReadPathError(f"read_paths entry '{raw}': the relative pattern climbs above the root")
            base.pop()
            rest = rest[3:]
        else:
            break
    prefix = GlobPattern.escape("/".join(base))
    return f"{prefix}/{rest}" if rest else prefix


def _compile_exact(raw: str, workdir: str, home: str | None) -> ReadPathEntry:
    if raw.startswith("~"):
        after = raw[1:]
        if after and after[0] not in "/\\":
            raise ReadPathError(f"read_paths entry '{raw}': only '~/' (your own home) can be expanded")
        sub = after[1:]
        root = _need_home(raw, home)
        path = os.path.join(root, sub) if sub else root
    elif raw.startswith("/"):
        path = raw
    else:
        path = os.path.join(workdir, raw)
    return ReadPathEntry(raw=raw, kind="exact", root=path)


def _covers(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it, on component boundaries (``/a/bc`` is not under ``/a/b``)."""
    trimmed = root.rstrip("/")
    return path == trimmed or path.startswith(trimmed + "/")


class ReadPathSet:
    """A compiled list of entries, bound to the workdir and home they were compiled against."""

    def __init__(self, entries: Sequence[ReadPathEntry]) -> None:
        self.entries = tuple(entries)

    @classmethod
    def compile(cls, raw: Iterable[str], workdir: str | os.PathLike[str],
                home: str | os.PathLike[str] | None) -> ReadPathSet:
        """Compile every entry; the first that does not compile raises :class:`ReadPathError`."""
        return cls([compile_entry(entry, workdir, home) for entry in raw])

    def is_empty(self) -> bool:
        """Whether the set has no entries."""
        return not self.entries

    def matches_lexically(self, path: str | os.PathLike[str]) -> bool:
        """Reporting: whether ``path`` is covered, comparing text only (no filesystem access)."""
        text = str(path)
        for entry in self.entries:
            if entry.kind == "exact":
                assert entry.root is not None
                if _covers(text, entry.root):
                    return True
            elif entry.matches_text(text):
                return True
        return False


def toml_key(name: str) -> str:
    """``name`` as a TOML key: bare when it can be, else quoted."""
    return name if name and all(c.isascii() and (c.isalnum() or c in "_-") for c in name) else _toml_string(name)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def grant_stanza(agent: str, entries: Iterable[str]) -> str:
    """The config.toml lines that grant ``entries`` to ``agent``, ready to paste."""
    listed = ", ".join(_toml_string(e) for e in entries)
    return f"[agent_read_paths.{toml_key(agent)}]\nallow = [{listed}]"

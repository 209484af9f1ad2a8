"""The keys a shell command line is approved under (Appendix A; same rules as upstream).

A line is split into commands; each command yields its program (plus a second word that narrows
it, like ``git diff``), an ``env:NAME`` key per variable it binds, and a ``>path`` key per file it
redirects into. Anything this cannot read confidently makes the whole line yield no keys.
Used by the ``command-seed`` and ``unparseable-safe-command`` lints.
"""

from __future__ import annotations

from dataclasses import field

from lev_nb.records import record

KEY_PREFIX = "shell:"
_PREFIX_WORDS = {"if", "elif", "then", "else", "do", "while", "until", "!", "{", "}"}
_INERT_WORDS = {"for", "in", "case", "esac", "fi", "done", "select", "break", "continue", "return",
                "shift", "exit", "jobs", "disown", "wait", "set", "umask"}
_ENV_BINDING = {"export", "unset", "local", "readonly", "declare", "typeset"}
_CODE_INSTALLING = {"function", "trap", "alias", "unalias"}
_UNREADABLE_PROGRAMS = {"eval", "source", "."}
_NEVER_FOLD = {"cd", "echo", "printf"}
_ESCAPE_FLAGS = {"git": ("--output",)}
_DISCARDED = {"/dev/null", "/dev/stdout", "/dev/stderr"}


class _Unreadable(Exception):
    """The line holds a construct whose meaning decides what runs and cannot be read here."""


@record(frozen=False)
class _Word:
    """One word of a command line, and whether quoting or expansion made it other than its text."""

    text: str
    literal: bool
    quoted: bool


@record(frozen=False)
class _Segment:
    """One simple command of a line: its words, and the words it redirects output to."""

    words: list[_Word] = field(default_factory=list)
    writes: list[_Word] = field(default_factory=list)


class _Lexer:
    def __init__(self) -> None:
        self.segments: list[_Segment] = []
        self.current: list[_Word] = []
        self.writes: list[_Word] = []
        self.word: list[str] = []
        self.in_word = False
        self.literal = True
        self.quoted = False
        self.swallow: str | None = None  # "write" | "other"

    def begin(self) -> None:
        if not self.in_word:
            self.in_word, self.literal, self.quoted = True, True, False

    def end_word(self) -> None:
        if self.in_word:
            w = _Word("".join(self.word), self.literal, self.quoted)
            target, self.swallow = self.swallow, None
            if target == "write":
                self.writes.append(w)
            elif target is None:
                self.current.append(w)
        self.discard()

    def discard(self) -> None:
        self.word.clear()
        self.in_word, self.literal, self.quoted = False, True, False

    def end_segment(self) -> None:
        self.swallow = None
        self.segments.append(_Segment(self.current, self.writes))
        self.current, self.writes = [], []


def _take_substitution(text: str, i: int) -> tuple[str, int]:
    depth = 0
    start = i
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return text[start:i], i + 1
            depth -= 1
        i += 1
    raise _Unreadable


def _take_dollar(lex: _Lexer, text: str, i: int) -> int:
    lex.literal = False
    if i >= len(text) or text[i] != "(":
        return i
    i += 1
    if i < len(text) and text[i] == "(":
        _, i = _take_substitution(text, i + 1)
        if i < len(text) and text[i] == ")":
            return i + 1
        raise _Unreadable
    inner, i = _take_substitution(text, i)
    lex.segments.extend(_tokenize(inner))
    return i


def _tokenize(text: str) -> list[_Segment]:
    lex = _Lexer()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        nxt = text[i] if i < n else None
        if c == "'":
            lex.begin()
            lex.quoted = True
            end = text.find("'", i)
            if end < 0:
                raise _Unreadable
            lex.word.append(text[i:end])
            i = end + 1
        elif c == '"':
            lex.begin()
            lex.quoted = True
            while True:
                if i >= n:
                    raise _Unreadable
                q = text[i]
                i += 1
                if q == '"':
                    break
                if q == "\\":
                    if i >= n:
                        raise _Unreadable
                    e = text[i]
                    i += 1
                    if e not in '$"\\`':
                        lex.word.append("\\")
                    lex.word.append(e)
                elif q == "`":
                    raise _Unreadable
                elif q == "$":
                    i = _take_dollar(lex, text, i)
                else:
                    lex.word.append(q)
        elif c == "`":
            raise _Unreadable
        elif c == "\\":
            lex.begin()
            if i >= n:
                raise _Unreadable
            lex.word.append(text[i])
            i += 1
        elif c == "$":
            lex.begin()
            i = _take_dollar(lex, text, i)
        elif c == "<" and nxt == "<":
            raise _Unreadable
        elif c in "><":
            if not all(ch.isdigit() for ch in lex.word):
                lex.end_word()
            lex.discard()
            if i < n and text[i] == c:
                i += 1
            if c == ">" and i < n and text[i] == "|":
                i += 1
            dup = i < n and text[i] == "&"
            if dup:
                i += 1
            read_write = c == "<" and i < n and text[i] == ">"
            if read_write:
                i += 1
            lex.swallow = "other" if dup else ("write" if c == ">" or read_write else "other")
        elif c == "&" and nxt == ">":
            i += 1
            lex.end_word()
            lex.swallow = "write"
        elif c in ";&|\n()":
            if c in "&|" and nxt == c:
                i += 1
            lex.end_word()
            lex.end_segment()
        elif c.isspace():
            lex.end_word()
        else:
            lex.begin()
            lex.word.append(c)
    lex.end_word()
    lex.end_segment()
    return lex.segments


def _is_var_name(name: str) -> bool:
    return bool(name) and (name[0].isascii() and (name[0].isalpha() or name[0] == "_")) and all(
        ch.isascii() and (ch.isalnum() or ch == "_") for ch in name)


def _segment_keys(words: list[_Word]) -> list[str]:
    """Keys of one command; raises _Unreadable for a command that must not be granted."""
    keys: list[str] = []
    rest = words
    while True:
        if not rest:
            return keys
        text = rest[0].text
        if text in _INERT_WORDS:
            return keys
        if text in _CODE_INSTALLING:
            raise _Unreadable
        if text in _ENV_BINDING:
            for arg in rest[1:]:
                if arg.text.startswith(("-", "+")):
                    continue
                if not arg.literal:
                    raise _Unreadable
                name = arg.text.split("=", 1)[0]
                if not _is_var_name(name):
                    raise _Unreadable
                keys.append(f"env:{name}")
            return keys
        if text in _PREFIX_WORDS:
            rest = rest[1:]
            continue
        if "=" in text and _is_var_name(text.split("=", 1)[0]):
            keys.append(f"env:{text.split('=', 1)[0]}")
            rest = rest[1:]
            continue
        break
    program = rest[0]
    if not program.literal or program.text in _UNREADABLE_PROGRAMS:
        raise _Unreadable
    flags = _ESCAPE_FLAGS.get(program.text, ())
    if any(w.text.startswith(f) for w in rest[1:] for f in flags):
        raise _Unreadable
    first = rest[1] if len(rest) > 1 else None
    if (first is not None and first.literal and not first.quoted and program.text not in _NEVER_FOLD
            and first.text and not first.text.startswith("-") and not first.text[0].isdigit()):
        keys.append(f"{program.text} {first.text}")
    else:
        keys.append(program.text)
    return keys


def command_keys(command: str) -> list[str]:
    """The sorted, de-duplicated ``shell:`` keys covering ``command``; [] when it cannot be granted."""
    try:
        segments = _tokenize(command)
        keys: set[str] = set()
        for seg in segments:
            keys.update(KEY_PREFIX + k for k in _segment_keys(seg.words))
            for target in seg.writes:
                if not target.literal or target.text.startswith(("/dev/tcp/", "/dev/udp/")):
                    raise _Unreadable
                if (target.text in _DISCARDED or target.text.startswith("/dev/fd/")
                        or target.text.upper() == "NUL"):
                    continue
                keys.add(f"{KEY_PREFIX}>{target.text}")
    except _Unreadable:
        return []
    return sorted(keys)


def program_of(key: str) -> str:
    """The key without its folded second word (``shell:git diff`` -> ``shell:git``)."""
    return key.split(" ", 1)[0]


def is_valid_prefix(entry: str) -> bool:
    """Whether a ``[safe_commands] shell`` entry can ever match a call (it keys back to itself)."""
    return not entry.startswith(">") and command_keys(entry) == [KEY_PREFIX + entry]

"""What a shell command line runs and writes, read with a real bash parser (tree-sitter-bash).

:func:`analyse` turns one command line into a :class:`ShellLine`: the keys it is approved under
(its programs, each with the second word that narrows it like ``git diff``, and an ``env:NAME``
key per variable it binds) and the files it writes (every output redirect: ``>``, ``>>``, ``>|``,
``&>``, ``&>>``, ``N>``, ``>&file``, and the operands of ``tee``). A write to a throwaway device
(``/dev/null``, ``/dev/fd/*``, ``NUL``...) or a descriptor duplication (``2>&1``) writes nothing.

A line holding a construct that decides what runs in a way the words do not show (``eval``,
``source``, a backtick, a heredoc, a function, ``trap``/``alias``, a program named by an
expansion) is *unreadable*: it has no keys, so nothing can approve it in advance. A write whose
target only exists after expansion (``> $OUT``, ``> *.txt``), a socket (``/dev/tcp/...``), a write
on a line that changes directory first (``cd ..; echo x > f``) and any write form on a line the
parser cannot read cleanly have no nameable target: such a write can be neither confined nor granted.

This module is the one reading of a command line: the approval keys of the run (safe commands,
grants), the confinement of redirects and the ``command-seed`` / ``unparseable-safe-command`` lints
all use it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from lev_nb.records import record

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = [
    "KEY_PREFIX", "ShellLine", "Write", "analyse", "command_keys", "is_valid_prefix", "program_of",
    "safe_listed", "seed_refusal",
]

KEY_PREFIX = "shell:"
_INERT_PROGRAMS = {"break", "continue", "return", "shift", "exit", "jobs", "disown", "wait", "set", "umask", ":"}
_CODE_INSTALLING = {"trap", "alias", "unalias", "function"}
_UNREADABLE_PROGRAMS = {"eval", "source", ".", "exec", "command", "builtin"}
_DIR_CHANGING = {"cd", "pushd", "popd"}
_NEVER_FOLD = {"cd", "echo", "printf", "tee"}
_ESCAPE_FLAGS = {"git": ("--output",)}
_WRITE_OPERATORS = {">", ">>", ">|", "&>", "&>>"}
_DISCARDED = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_NOT_LITERAL = re.compile(r"[$`*?\[\]{}~]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@record
class Write:
    """One file a line writes: ``target`` as written (None when no path can be named) and how."""

    target: str | None
    form: str

    @property
    def key(self) -> str | None:
        """The approval key of the write (``shell:>path``), None when it has no nameable target."""
        return None if self.target is None else f"{KEY_PREFIX}>{self.target}"


@record
class ShellLine:
    """What one command line runs and writes (see the module docstring)."""

    command: str
    readable: bool
    keys: tuple[str, ...] = ()  # program and env keys, ``shell:``-prefixed; () when unreadable
    writes: tuple[Write, ...] = ()  # the files written, throwaway devices left out

    @property
    def writes_files(self) -> bool:
        """True when the line writes at least one file."""
        return bool(self.writes)

    @property
    def grant_keys(self) -> list[str]:
        """Every key approving the line would grant, its writes included; [] when nothing can be
        granted (an unreadable line, or a write with no nameable target)."""
        if not self.readable or any(w.target is None for w in self.writes):
            return []
        return sorted({*self.keys, *(w.key for w in self.writes if w.key is not None)})


class _Unreadable(Exception):
    """The line holds a construct whose meaning decides what runs and cannot be read here."""


@functools.lru_cache(maxsize=1)
def _parser() -> Parser:
    # Loaded on first use: `lev validate` and every run import this module, few parse a line.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _literal(node: Node) -> str | None:
    """The text a word stands for when no expansion can change it, else None."""
    kind = node.type
    if kind in ("word", "number"):
        raw = _text(node)
        if _NOT_LITERAL.search(raw):
            return None
        return re.sub(r"\\(.)", r"\1", raw)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        if any(child.is_named and child.type != "string_content" for child in node.children):
            return None
        inner = _text(node)[1:-1]
        return None if "`" in inner or "$" in inner else re.sub(r'\\([$`"\\])', r"\1", inner)
    if kind == "concatenation":
        parts = [_literal(child) for child in node.children]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    return None


def _discarded(target: str) -> bool:
    return target in _DISCARDED or target.startswith("/dev/fd/") or target.upper() == "NUL"


class _Reader:
    """One walk over a parsed line, collecting keys and writes."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.writes: list[Write] = []
        self.unreadable = False
        self.changes_dir = False

    def visit(self, node: Node) -> None:
        kind = node.type
        if kind == "command":
            self.command(node)
        elif kind == "file_redirect":
            self.redirect(node)
        elif kind == "heredoc_redirect":
            self.unreadable = True  # its body is not something a program name describes
            self.children(node)
        elif kind == "function_definition":
            self.unreadable = True
            self.children(node)
        elif kind == "command_substitution":
            if _text(node).startswith("`"):
                self.unreadable = True
            self.children(node)
        elif kind == "declaration_command" or kind == "unset_command":
            self.declaration(node)
        elif kind == "variable_assignment":
            self.assignment(node)
        else:
            self.children(node)

    def children(self, node: Node) -> None:
        for child in node.children:
            if child.is_named:
                self.visit(child)

    def assignment(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        if name is not None:
            self.keys.add(f"{KEY_PREFIX}env:{_text(name)}")
        self.children(node)

    def declaration(self, node: Node) -> None:
        for child in node.children:
            if child.type == "variable_assignment":
                self.assignment(child)
            elif child.type in ("variable_name", "word"):
                text = _literal(child) if child.type == "word" else _text(child)
                if text is None:
                    self.unreadable = True
                elif not text.startswith(("-", "+")):
                    if not _ENV_NAME.fullmatch(text):
                        self.unreadable = True
                    else:
                        self.keys.add(f"{KEY_PREFIX}env:{text}")
            elif child.is_named:
                self.unreadable = True  # a name given by an expansion

    def command(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        words: list[Node] = []
        for child in node.children:
            if child.type == "variable_assignment":
                self.assignment(child)
            elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.visit(child)
            elif child.is_named and child.type != "command_name":
                words.append(child)
                self.children_of_word(child)
        if name_node is None:
            return
        program_word = name_node.children[0] if name_node.children else name_node
        self.children_of_word(program_word)
        program = _literal(program_word)
        if program is None or program in _UNREADABLE_PROGRAMS or program in _CODE_INSTALLING:
            self.unreadable = True
            return
        if program in _DIR_CHANGING:
            self.changes_dir = True
        if program == "tee":
            self.tee(words)
        if program in _INERT_PROGRAMS:
            return
        texts = [_text(w) for w in words]
        if any(t.startswith(flag) for t in texts for flag in _ESCAPE_FLAGS.get(program, ())):
            self.unreadable = True
            return
        first = words[0] if words else None
        second = _literal(first) if first is not None and first.type == "word" else None
        if second and program not in _NEVER_FOLD and not second.startswith("-") and not second[0].isdigit():
            self.keys.add(f"{KEY_PREFIX}{program} {second}")
        else:
            self.keys.add(KEY_PREFIX + program)

    def children_of_word(self, word: Node) -> None:
        """Commands inside a word (``$(...)``, ``<(...)``) run too."""
        if word.type in ("command_substitution", "process_substitution"):
            self.visit(word)
        else:
            self.children(word)

    def tee(self, words: list[Node]) -> None:
        operands = False
        for word in words:
            text = _literal(word)
            if text == "--" and not operands:
                operands = True
                continue
            if text is not None and text.startswith("-") and not operands:
                continue
            self.write(text, "tee")

    def redirect(self, node: Node) -> None:
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if destination is None:
            return  # `>&-`: closing a descriptor
        if destination.type in ("process_substitution", "command_substitution"):
            self.visit(destination)
            if destination.type == "process_substitution":
                return  # a pipe to a command, not a file
        if operator in _WRITE_OPERATORS or (operator == ">&" and destination.type != "number"):
            target = _literal(destination)
            if operator == ">&" and target == "-":
                return
            self.write(target, operator)
        else:
            self.children(destination)

    def write(self, target: str | None, form: str) -> None:
        if target is not None and _discarded(target):
            return
        if target is not None and target.startswith(("/dev/tcp/", "/dev/udp/")):
            target = None  # a socket, not a file
        self.writes.append(Write(target, form))


def _has_write_form(command: str) -> bool:
    """Whether a line the parser could not read may hold a write (conservatively)."""
    return ">" in command or re.search(r"(^|[^A-Za-z0-9_-])tee([^A-Za-z0-9_-]|$)", command) is not None


@functools.lru_cache(maxsize=512)
def analyse(command: str) -> ShellLine:
    """What ``command`` runs and writes (see the module docstring)."""
    tree = _parser().parse(command.encode("utf-8", errors="surrogatepass"))
    root = tree.root_node
    if root.has_error:
        unparsed = (Write(None, "unparsed"),) if _has_write_form(command) else ()
        return ShellLine(command, readable=False, writes=unparsed)
    reader = _Reader()
    reader.visit(root)
    writes = reader.writes
    if reader.changes_dir:
        # A relative target names a file in whatever folder the line moved to first.
        writes = [Write(None, w.form) for w in writes]
    readable = not reader.unreadable
    return ShellLine(command, readable=readable, keys=tuple(sorted(reader.keys)) if readable else (),
                     writes=tuple(writes))


def command_keys(command: str) -> list[str]:
    """The sorted, de-duplicated ``shell:`` keys covering ``command``, its writes' ``>path`` keys
    included; [] when the line cannot be granted."""
    return analyse(command).grant_keys


def safe_listed(key: str, safe_shell: Collection[str]) -> bool:
    """Whether ``[safe_commands] shell`` entries pre-approve one ``shell:`` key: an entry covers its
    program with any arguments (``git status`` covers ``git status -s``, ``cat`` covers ``cat f``),
    an ``env:NAME`` entry exactly that variable, and no entry ever covers a write."""
    entry = key[len(KEY_PREFIX):]
    if entry.startswith(">"):
        return False
    if entry in safe_shell:
        return True
    return not entry.startswith("env:") and program_of(key)[len(KEY_PREFIX):] in safe_shell


def seed_refusal(command: str, safe_shell: Collection[str]) -> str | None:
    """Why a command seed may not run under these safe commands (None: it may). Nobody can be
    asked at spawn, so every command it runs must be safe-listed, and it may write no file."""
    line = analyse(command)
    if line.writes:
        return "it writes a file, and a write can never be pre-approved"
    keys = line.grant_keys
    if not keys:
        return "it cannot be read as a plain list of commands, so nothing can pre-approve it"
    missing = [key[len(KEY_PREFIX):] for key in keys if not safe_listed(key, safe_shell)]
    if missing:
        return f"[safe_commands] does not cover {', '.join(missing)}"
    return None


def program_of(key: str) -> str:
    """The key without its folded second word (``shell:git diff`` -> ``shell:git``)."""
    return key.split(" ", 1)[0]


def is_valid_prefix(entry: str) -> bool:
    """Whether a ``[safe_commands] shell`` entry can ever match a call (it keys back to itself)."""
    if entry.startswith("env:"):
        return _ENV_NAME.fullmatch(entry[4:]) is not None
    return not entry.startswith(">") and command_keys(entry) == [KEY_PREFIX + entry]

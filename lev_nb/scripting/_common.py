"""What every script kind shares: :class:`ScriptError`, the message prefixes, the shared engines,
and loading, compiling and entry-point checks (docs/rhai.md#the-sandbox).

Every kind compiles with the same hardened engine it runs on; the kinds without host functions
share one engine per operation budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from lev_nb.errors import CleanError, Problem
from lev_nb.rhai import AST, Engine, NotPlainDataError, RhaiError

COMPILE_PREFIX = "Script compilation failed: "
EXECUTE_PREFIX = "Script execution failed: "
VALIDATE_PREFIX = "Script validation failed: "


class ScriptError(CleanError, Exception):
    """A script that cannot be used: it does not compile, lacks a required function, or failed.

    ``message`` is the full text (starting with ``Script compilation failed: `` and the like),
    ``path`` the script file or label, ``line`` the 1-based line when known. In a notebook it
    shows as one block (the message, and the file and line when the message does not name them).
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.path, self.line))

    def problem(self) -> Problem:
        """The message, and where (file:line) when the message does not already say it."""
        where = None
        if self.path is not None and self.path not in self.message:
            where = self.path + (f":{self.line}" if self.line is not None else "")
        return Problem(" ".join(self.message.split()), where)


@cache
def shared_engine(max_operations: int) -> Engine:
    """One shared engine per budget for the kinds without host functions (thread-safe)."""
    return Engine(max_operations=max_operations)


def load_script(path: str | Path | None, source: str | None, label: str | None) -> tuple[str, str, Path | None]:
    """Return (source text, label for messages, path) for a script given by path or by text."""
    if source is None:
        if path is None:
            raise ValueError("give the script as path= or as source=")
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScriptError(f"{COMPILE_PREFIX}{label or file}: cannot read the script: {exc}", file) from exc
        return text, label or str(file), file
    given = Path(path) if path is not None else None
    return source, label or (str(given) if given else "<script>"), given


def compile_script(engine: Engine, source: str, label: str) -> AST:
    """Compile ``source`` with ``engine``; a Rhai error becomes a ScriptError naming the line."""
    try:
        return engine.compile(source)
    except RhaiError as exc:
        raise ScriptError(f"{COMPILE_PREFIX}{label}: {exc}", label, exc.line) from exc


def call_entry(max_operations: int, ast: AST, fn: str, ctx: Mapping[str, Any], label: str) -> Any:
    """Call ``fn(ctx)`` on the shared engine of that budget and return its plain-data value.

    A Rhai error raises ScriptError (``Script execution failed``), a value that is not plain data
    ScriptError (``Script validation failed``); both name ``label`` and ``fn``.
    """
    try:
        return shared_engine(max_operations).call(ast, fn, dict(ctx))
    except RhaiError as exc:
        raise ScriptError(f"{EXECUTE_PREFIX}{label}: {fn}: {exc}", label, exc.line) from exc
    except NotPlainDataError as exc:
        raise ScriptError(
            f"{VALIDATE_PREFIX}{label}: {fn} returned a value that is not plain data: {exc}", label
        ) from exc


def _definition_line(source: str, fn_name: str) -> int | None:
    """Line where `fn <name>(` is defined, for pointing at a wrong signature."""
    match = re.search(rf"(?m)^[^\n]*?\bfn\s+{re.escape(fn_name)}\s*\(", source)
    return source.count("\n", 0, match.start()) + 1 if match else None


def require_unary(ast: AST, source: str, label: str, name: str, param: str, *, required: bool) -> bool:
    """Check `fn <name>(<param>)`; return whether it is defined. Raises ScriptError otherwise."""
    arities = [arity for fn_name, arity in ast.functions if fn_name == name]
    if not arities:
        if required:
            raise ScriptError(f"{COMPILE_PREFIX}{label}: script must define fn {name}({param})", label)
        return False
    wrong = [a for a in arities if a != 1]
    if wrong:
        raise ScriptError(
            f"{COMPILE_PREFIX}{label}: fn {name} must take exactly one parameter ({param}), found {wrong[0]}",
            label,
            _definition_line(source, name),
        )
    return True


def rhai_type_name(value: object) -> str:
    """Name a returned value the way Rhai's type_of would."""
    names = {bool: "bool", int: "i64", float: "f64", str: "string", list: "array", dict: "map", bytes: "blob"}
    return names.get(type(value), type(value).__name__)

"""Custom context regions (docs/rhai.md#custom-context-regions): :func:`compile_region_script` ->
:class:`RegionScript`.

The script defines ``fn render(ctx)`` and optionally ``on_write(ctx)`` / ``on_overflow(ctx)``;
failures raise :class:`ScriptError`, and reading the returned values (and falling back) is the
region's job in the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.records import record
from lev_nb.rhai import AST

from ._common import (
    EXECUTE_PREFIX,
    ScriptError,
    call_entry,
    compile_script,
    load_script,
    require_unary,
    shared_engine,
)
from .budgets import REGION_MAX_OPERATIONS


@record
class RegionScript:
    """A compiled custom-region script: ``render`` required, ``on_write``/``on_overflow`` optional.

    Each method returns the script's raw value as plain Python data; reading it (strings, maps,
    index lists) and falling back on failure is the region's job.
    """

    label: str
    path: Path | None
    has_on_write: bool
    has_on_overflow: bool
    ast: AST = field(repr=False, compare=False)

    def _call(self, fn: str, ctx: Mapping[str, Any]) -> Any:
        return call_entry(REGION_MAX_OPERATIONS, self.ast, fn, ctx, self.label)

    def render(self, ctx: Mapping[str, Any]) -> Any:
        """Call ``render(ctx)``."""
        return self._call("render", ctx)

    def on_write(self, ctx: Mapping[str, Any]) -> Any:
        """Call ``on_write(ctx)``; raises ScriptError if the script does not define it."""
        if not self.has_on_write:
            raise ScriptError(
                f"{EXECUTE_PREFIX}{self.label}: on_write: the script defines no fn on_write(ctx)", self.label
            )
        return self._call("on_write", ctx)

    def on_overflow(self, ctx: Mapping[str, Any]) -> Any:
        """Call ``on_overflow(ctx)``; raises ScriptError if the script does not define it."""
        if not self.has_on_overflow:
            raise ScriptError(
                f"{EXECUTE_PREFIX}{self.label}: on_overflow: the script defines no fn on_overflow(ctx)", self.label
            )
        return self._call("on_overflow", ctx)


def compile_region_script(
    path: str | Path | None = None, *, source: str | None = None, label: str | None = None
) -> RegionScript:
    """Compile a custom-region script (``fn render(ctx)`` required). Raises ScriptError."""
    text, label, file = load_script(path, source, label)
    ast = compile_script(shared_engine(REGION_MAX_OPERATIONS), text, label)
    require_unary(ast, text, label, "render", "ctx", required=True)
    has_write = require_unary(ast, text, label, "on_write", "ctx", required=False)
    has_overflow = require_unary(ast, text, label, "on_overflow", "ctx", required=False)
    return RegionScript(label, file, has_write, has_overflow, ast)

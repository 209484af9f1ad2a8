"""Stage hooks (docs/rhai.md#stage-hooks): :func:`compile_hooks` -> :class:`HookScript`, whose ``run``
gives :class:`Allow`, :class:`Modify`, :class:`Cancel` or :class:`Retry`.

Any failure while running a hook, or a return value outside the outcome contract, raises
:class:`ScriptError`; what a failed hook means for the run is the engine's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.records import record
from lev_nb.rhai import AST

from ._common import (
    COMPILE_PREFIX,
    EXECUTE_PREFIX,
    VALIDATE_PREFIX,
    ScriptError,
    call_entry,
    compile_script,
    load_script,
    require_unary,
    shared_engine,
)
from .budgets import HOOK_MAX_OPERATIONS

HOOK_NAMES: tuple[str, ...] = (
    "on_stage_enter",
    "on_stage_exit",
    "before_inference",
    "after_inference",
    "on_tool_call",
    "on_completion",
    "on_error",
)


@record
class Allow:
    """Go ahead unchanged."""


@record
class Modify:
    """Go ahead with ``value`` in place of what the hook was shown."""

    value: Any


@record
class Cancel:
    """Stop; ``reason`` is None when the script gave none."""

    reason: str | None = None


@record
class Retry:
    """Ask for a retry (no hook honours it yet; the runtime treats it as a failure)."""


HookOutcome = Allow | Modify | Cancel | Retry


def _outcome(value: object, fail: Callable[[str], ScriptError]) -> HookOutcome:
    """Read a hook's return value per the outcome contract; `fail(detail)` builds the error."""
    if value is None or value is True:
        return Allow()
    if value is False:
        return Cancel(None)
    if isinstance(value, dict):
        if "action" not in value:
            raise fail(f"the returned map has no 'action' key (expected #{{action: \"allow\"|...}}), got: {value!r}")
        action = value["action"]
        if action == "allow":
            return Allow()
        if action == "modify":
            if "value" not in value:
                raise fail("action 'modify' needs a 'value' key holding the replacement")
            return Modify(value["value"])
        if action == "cancel":
            reason = value.get("reason")
            return Cancel(reason if isinstance(reason, str) else None)
        if action == "retry":
            return Retry()
        raise fail(f"unknown action '{action}' (expected allow, modify, cancel, or retry)")
    raise fail(f"expected (), a bool, or a map with an 'action', got: {value!r}")


@record
class HookScript:
    """A compiled stage-hook file; ``defined`` lists its hooks in HOOK_NAMES order."""

    label: str
    path: Path | None
    defined: tuple[str, ...]
    ast: AST = field(repr=False, compare=False)

    def run(self, hook: str, ctx: Mapping[str, Any]) -> HookOutcome:
        """Call ``hook(ctx)`` and read its outcome. Raises ScriptError on any failure."""
        if hook not in self.defined:
            raise ScriptError(f"{EXECUTE_PREFIX}{self.label}: {hook}: the script defines no fn {hook}(ctx)", self.label)
        value = call_entry(HOOK_MAX_OPERATIONS, self.ast, hook, ctx, self.label)

        def fail(detail: str) -> ScriptError:
            return ScriptError(f"{VALIDATE_PREFIX}{self.label}: {hook}: {detail}", self.label)

        return _outcome(value, fail)


def compile_hooks(
    path: str | Path | None = None,
    wanted: Sequence[str] = (),
    *,
    source: str | None = None,
    label: str | None = None,
) -> HookScript:
    """Compile a stage-hook file. Every hook it defines must take one parameter (ctx), and every
    hook in ``wanted`` (the ones the blueprint names this file for) must be defined."""
    text, label, file = load_script(path, source, label)
    unknown = [h for h in wanted if h not in HOOK_NAMES]
    if unknown:
        raise ScriptError(
            f"{COMPILE_PREFIX}{label}: unknown hook '{unknown[0]}' (expected one of {', '.join(HOOK_NAMES)})", label
        )
    ast = compile_script(shared_engine(HOOK_MAX_OPERATIONS), text, label)
    defined = tuple(h for h in HOOK_NAMES if require_unary(ast, text, label, h, "ctx", required=False))
    for hook in wanted:
        if hook not in defined:
            raise ScriptError(
                f"{COMPILE_PREFIX}{label}: the blueprint names this file for '{hook}', "
                f"but it defines no fn {hook}(ctx)",
                label,
            )
    return HookScript(label, file, defined, ast)

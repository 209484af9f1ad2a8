"""Running one batch of tool calls: offered? -> arguments valid? -> permitted? -> run, in call order.

Allowed calls run concurrently; results come back in the order the model made the calls. Nothing a
handler raises escapes: it becomes an ``[error] <tool>: <message>`` result.

Inline tools (submit_output, fan_out, runtime_info and the sub-agent tools) are checked (offered,
arguments; the sub-agent tools also against the tool policy) but not run: their result has
``inline=True`` and empty content, for the engine to fill in. The fan-out batch
rules are applied here too: only one fan_out per turn, and it must be the only call of its turn.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, Callable, Protocol

from lev_nb.blueprint.constants import SUBAGENT_TOOLS
from lev_nb.errors import CALLEE_ERRORS
from lev_nb.messages import ToolCall
from lev_nb.records import record
from lev_nb.tools.context import ToolContext
from lev_nb.tools.policy import Policies, authorise
from lev_nb.tools.registry import MODIFYING_TOOLS, ToolRegistry
from lev_nb.tools.validation import validate_arguments
from lev_nb.workspace import WorkspaceError

__all__ = ["ToolResult", "ToolJournal", "execute_calls", "is_inline", "is_failure", "FAILURE_PREFIXES"]

log = logging.getLogger(__name__)

# Results starting with these had no effect (for accounting and for is_error).
FAILURE_PREFIXES = ("[error]", "[denied]", "[unavailable]", "[blocked]", "[timed out]")
_ERROR_PREFIXES = FAILURE_PREFIXES + ("[exit code",)
INLINE_TOOLS = frozenset({"submit_output", "fan_out", "runtime_info", *SUBAGENT_TOOLS})


@record(frozen=False)
class ToolResult:
    """The outcome of one call.

    ``modified_path`` is the workspace-relative path a successful write_file/edit_file changed
    (None otherwise). ``inline`` marks a call that passed the checks and awaits the engine's answer.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    modified_path: str | None = None
    inline: bool = False


class ToolJournal(Protocol):
    """Where a batch's results are journaled as each one is known, and found again when a resumed
    run replays the batch (the engine's run journal)."""

    def replayed(self, call: ToolCall) -> ToolResult | None:
        """The recorded result of ``call`` (it is not run or asked about again), or None."""
        ...

    def done(self, result: ToolResult) -> None:
        """Record a result (a run call's, or a denial) before the engine uses it."""
        ...

    def starting(self, call: ToolCall) -> None:
        """Record that ``call`` (of a tool that may change something) is about to run."""
        ...

    def interrupted(self, call: ToolCall) -> ToolResult | None:
        """When a previous life of the run started ``call`` and stopped before its result was
        recorded: the result that says so (the call is not run again), else None."""
        ...


def is_failure(content: str) -> bool:
    """True when a result string reports that the call had no effect."""
    return content.startswith(FAILURE_PREFIXES)


def is_inline(name: str, registry: ToolRegistry | None = None) -> bool:
    """True for tools the engine answers itself rather than a handler."""
    if registry is not None and name in registry:
        return registry.is_inline(name)
    return name.lower() in INLINE_TOOLS


def _unavailable(name: str, offered: list[str]) -> str:
    """The result for a call to a tool the stage does not offer."""
    if not offered:
        return f"[unavailable] '{name}' is not available: this stage has no tools at all. Answer directly instead."
    return f"[unavailable] '{name}' is not available in this stage. You may call: {', '.join(offered)}."


def _result(call: ToolCall, content: str, **kw: Any) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=content, is_error=content.startswith(_ERROR_PREFIXES), **kw)


def _notify(listener: Callable[[Any], None] | None, value: Any) -> None:
    """Tell a listener about a call; a listener that fails is logged, not allowed to break the batch."""
    if listener is None:
        return
    try:
        listener(value)
    except CALLEE_ERRORS:
        log.warning("tool event listener failed", exc_info=True)


async def _run_one(call: ToolCall, args: dict[str, Any], registry: ToolRegistry, ctx: ToolContext) -> ToolResult:
    """Run one permitted call; every failure becomes a result, never an exception."""
    tool = registry.get(call.name)
    assert tool is not None and tool.handler is not None
    try:
        content = await tool.handler(ctx, args)
    except asyncio.CancelledError:
        raise
    except WorkspaceError as exc:
        content = f"[error] {call.name}: {exc}"
    except CALLEE_ERRORS as exc:  # a broken handler must not break the batch (nor sys.exit the engine)
        log.debug("tool %s raised", call.name, exc_info=True)
        content = f"[error] {call.name}: {exc or type(exc).__name__}"
    if not isinstance(content, str):
        content = str(content)
    modified: str | None = None
    if tool.name in MODIFYING_TOOLS or tool.modifying:
        path = args.get("path")
        if isinstance(path, str) and not content.startswith(_ERROR_PREFIXES):
            try:
                modified = ctx.workspace.relative(ctx.workspace.resolve(path, for_write=True))
            except WorkspaceError:
                modified = path
    return _result(call, content, modified_path=modified)


async def execute_calls(
    calls: list[ToolCall],
    offered: list[str],
    registry: ToolRegistry,
    ctx: ToolContext,
    policies: Policies | None = None,
    *,
    on_start: Callable[[ToolCall], None] | None = None,
    on_finish: Callable[[ToolResult], None] | None = None,
    journal: ToolJournal | None = None,
    slot: AbstractAsyncContextManager[Any] | None = None,
) -> list[ToolResult]:
    """Check and run one batch of calls; results are in call order (see the module docstring).

    ``offered`` is the stage's tool names as advertised; ``on_start``/``on_finish`` are told about
    each call that actually runs (for live events). ``journal`` records each permitted call's
    result (or its denial) as soon as it is known, and gives back the results a previous life of
    the run recorded, so a completed call is never run twice. ``slot``, when given, is held around each
    handler call (the process's tool pool, ``[limits] max_concurrent_tools``).
    """
    policies = policies or Policies()
    offered_keys = registry.canonical_names(offered)
    results: list[ToolResult | None] = [None] * len(calls)
    pending: list[tuple[int, ToolCall, dict[str, Any], ToolJournal | None]] = []
    fan_outs = [i for i, c in enumerate(calls) if registry.canonical(c.name) == "fan_out"]

    for i, call in enumerate(calls):
        canon = registry.canonical(call.name)
        tool = registry.get(call.name)
        if canon not in offered_keys or tool is None:
            # Named to the model: only what it was offered and can call (a listed tool that did not
            # load is neither).
            results[i] = _result(call, _unavailable(call.name, [n for n in offered if n in registry]))
            continue
        args = {} if call.arguments is None else call.arguments
        problem = validate_arguments(call.name, tool.parameters, args)
        if problem is not None:
            results[i] = _result(call, problem)
            continue
        if tool.handler is None and not tool.inline:
            results[i] = _result(call, f"[error] {call.name}: this tool has no implementation in this run.")
            continue
        if tool.inline:
            if canon == "fan_out" and i != fan_outs[0]:
                results[i] = _result(call, "[error] only one fan_out call is allowed per turn; this one was not run.")
            elif canon == "fan_out" and len(calls) > 1 and any(
                not is_inline(c.name, registry) for c in calls
            ):
                results[i] = _result(call, "[error] fan_out has to be the only tool call in its turn; call it again on its own.")
            elif canon in SUBAGENT_TOOLS and (denial := await authorise(call, registry, policies)) is not None:
                results[i] = _result(call, denial)  # starting agents is allowed by default, and may be denied
            else:
                results[i] = ToolResult(call_id=call.id, name=call.name, content="", inline=True)
            continue
        # A tool on the run's own state is run again (its effect is on the state being rebuilt).
        journaled = journal if journal is not None and not tool.run_state else None
        recorded = journaled.replayed(call) if journaled is not None else None
        if recorded is not None:
            results[i] = recorded
            continue
        # In flight when the run's process stopped: it may have taken effect, so a tool that can
        # change something is not run again (a read-only one simply is).
        lost = journaled.interrupted(call) if journaled is not None and not tool.readonly else None
        if lost is not None:
            results[i] = lost
            journaled.done(lost)  # type: ignore[union-attr]
            continue
        # Authorisation is sequential, in call order, so approvals are asked one at a time.
        denial = await authorise(call, registry, policies)
        if denial is None and policies.flow_gate is not None:
            denial = await policies.flow_gate(call)  # the taint gate, after the permission
        if denial is not None:
            refused = results[i] = _result(call, denial)
            if journaled is not None:
                journaled.done(refused)
            continue
        pending.append((i, call, args, journaled))

    async def run(i: int, call: ToolCall, args: dict[str, Any], journaled: ToolJournal | None) -> None:
        if journaled is not None and not registry.get(call.name).readonly:  # type: ignore[union-attr]
            journaled.starting(call)
        if slot is None:
            _notify(on_start, call)
            result = await _run_one(call, args, registry, ctx)
        else:
            async with ctx.pool_share(), slot:  # the run's share first: fairness between runs
                _notify(on_start, call)
                result = await _run_one(call, args, registry, ctx)
        if journaled is not None:
            journaled.done(result)
        results[i] = result
        _notify(on_finish, result)

    if len(pending) == 1:
        # One call (the common turn): awaited in place, without a task and gather's round trips.
        try:
            await run(*pending[0])
        except asyncio.CancelledError:
            raise
        except Exception:  # as gather(return_exceptions=True) below: the call leaves no result
            log.debug("tool call failed outside its handler", exc_info=True)
    elif pending:
        # Each call stores its own result; return_exceptions keeps a call that fails while the batch
        # is being cancelled from leaving an unretrieved exception behind.
        await asyncio.gather(*(run(i, c, a, j) for i, c, a, j in pending), return_exceptions=True)
    return [r for r in results if r is not None]

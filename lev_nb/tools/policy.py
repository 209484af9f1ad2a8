"""Who may run a tool: allow / ask / deny (spec/runtime.md §4.1).

The one resolver, in the spec's precedence order: the launch's ``--allow TOOL`` (``allow=[...]`` in
Python) first; then the blueprint's word (stage table, then agent table) weighed against a
ceiling: the user's configuration (``[tool_permissions]``, ``[agent_tool_permissions.<agent>]``),
else the tool's built-in default. A blueprint may only tighten that ceiling — declaring is not
granting — unless the user's ``[security] allow_blueprint_permissions`` lets blueprints loosen it
too. Last, ``--yolo`` (``yolo=True``) turns a remaining ``ask`` into ``allow``, never a ``deny``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import field
from typing import Any, Awaitable, Callable, Mapping, Union

from lev_nb.errors import CALLEE_ERRORS, CalleeExit
from lev_nb.messages import ToolCall
from lev_nb.records import record
from lev_nb.tools.registry import PolicyName, ToolRegistry

__all__ = ["Policies", "Approver", "resolve_policy", "authorise", "denied_text", "needs_approval_text", "declined_text",
           "denied_unattended"]

# Called as approver(call) or approver(tool_name, arguments); may be sync (run in a thread) or async.
# It answers True (run it), False (the person declined) or a ``[denied] ...`` text to return instead.
Approver = Callable[..., Union[bool, str, Awaitable[Union[bool, str]]]]
VALID_POLICIES = ("allow", "ask", "deny")  # from loosest to strictest


@record(frozen=False)
class Policies:
    """The permission tables in force for one stage, plus who answers ``ask`` (None: nobody)."""

    stage: Mapping[str, str] = field(default_factory=dict)
    agent: Mapping[str, str] = field(default_factory=dict)
    ceiling: Mapping[str, str] = field(default_factory=dict)
    blueprint_may_loosen: bool = False
    approver: Approver | None = None
    launch_allow: frozenset[str] = frozenset()  # --allow TOOL: lower-case names the launch allowed
    yolo: bool = False  # --yolo: ask becomes allow (deny stays deny)


def _lookup(table: Mapping[str, str], spellings: set[str]) -> PolicyName | None:
    """The policy a table sets for any spelling of the tool (names compared case-insensitively)."""
    for key, value in table.items():
        if key.lower() in spellings and isinstance(value, str) and value.lower() in VALID_POLICIES:
            return value.lower()  # type: ignore[return-value]
    return None


def resolve_policy(name: str, registry: ToolRegistry, policies: Policies) -> PolicyName:
    """The policy for ``name``, in the spec's order: a tool the launch allowed (``--allow``) is
    ``allow``; otherwise the blueprint's policy (stage table, then agent table) within the ceiling,
    and under ``yolo`` an ``ask`` that is left becomes ``allow``.

    The ceiling is the configuration's entry for the tool, else the tool's built-in default (``ask``
    for an unknown tool). A blueprint policy stricter than the ceiling wins; a looser one is held to
    the ceiling unless ``blueprint_may_loosen``. Names match case-insensitively and through aliases
    (a rule for ``bash`` governs ``shell``).
    """
    spellings = registry.spellings(name)
    if spellings & {n.lower() for n in policies.launch_allow}:
        return "allow"
    tool = registry.get(name)
    ceiling = _lookup(policies.ceiling, spellings) or (tool.default_policy if tool is not None else "ask")
    declared = _lookup(policies.stage, spellings) or _lookup(policies.agent, spellings)
    if declared is None:
        policy = ceiling
    elif policies.blueprint_may_loosen:
        policy = declared
    else:
        policy = max(declared, ceiling, key=VALID_POLICIES.index)
    if policy == "ask" and policies.yolo:
        return "allow"
    return policy


def denied_text(name: str) -> str:
    """Result for a tool the blueprint forbids."""
    return f"[denied] Tool '{name}' is not permitted."


NOBODY_TO_ASK = "needs a person's approval and this run has nobody to ask"


def needs_approval_text(name: str) -> str:
    """Result for an ``ask`` tool when nobody is there to approve it."""
    return (
        f"[denied] Tool '{name}' {NOBODY_TO_ASK}; to let it "
        f"run unattended, start the run with --allow {name} (allow=[\"{name}\"] in Python) or --yolo, "
        f"or allow it in your config.toml: [tool_permissions] {name} = \"allow\"."
    )


def denied_unattended(result: str) -> bool:
    """Whether a tool result is the denial of an ``ask`` tool that nobody could approve."""
    return result.startswith("[denied] Tool '") and NOBODY_TO_ASK in result


def declined_text(name: str) -> str:
    """Result for an ``ask`` tool the person turned down."""
    return f"[denied] The user declined the call to '{name}'."


def _takes_name_and_args(approver: Approver) -> bool:
    """True for an approver written as ``approver(tool_name, arguments)`` rather than ``approver(call)``."""
    try:
        params = inspect.signature(approver).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _on_own_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` on a thread of its own, as a future of the running loop.

    A plain approver may wait minutes for a person: on the engine's shared worker threads, a few
    dozen runs waiting for approvals would leave none for anybody's file tools.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return  # the waiting run was cancelled meanwhile
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            result: tuple[bool, Any] = (True, fn(*args))
        except Exception as exc:  # handed to the waiting run, which denies the call
            result = (False, exc)
        except (SystemExit, KeyboardInterrupt) as exc:  # never re-raised on the engine loop
            result = (False, CalleeExit(exc))
        try:
            loop.call_soon_threadsafe(settle, *result)
        except RuntimeError:  # the engine loop is gone (the process is ending)
            pass

    threading.Thread(target=work, name="lev-approver", daemon=True).start()
    return future


async def _ask(approver: Approver, call: ToolCall) -> bool | str:
    """Run the approver: an async one on the loop, a plain one on a thread of its own (it may wait
    for a person, and must not hold one of the threads every run shares)."""
    args: tuple[Any, ...] = (call.name, call.arguments) if _takes_name_and_args(approver) else (call,)
    if inspect.iscoroutinefunction(approver):
        answer: Any = await approver(*args)
    else:
        answer = await _on_own_thread(approver, *args)
        if inspect.isawaitable(answer):
            answer = await answer
    if isinstance(answer, str) and answer.startswith("[denied]"):
        return answer
    return bool(answer)


async def authorise(call: ToolCall, registry: ToolRegistry, policies: Policies) -> str | None:
    """None when ``call`` may run; otherwise the ``[denied]`` result text to return instead."""
    policy = resolve_policy(call.name, registry, policies)
    if policy == "allow":
        return None
    if policy == "deny":
        return denied_text(call.name)
    if policies.approver is None:
        return needs_approval_text(call.name)
    try:
        approved = await _ask(policies.approver, call)
    except CALLEE_ERRORS as exc:  # an approver that breaks must not take the run down with it
        return f"[denied] Approval for '{call.name}' failed: {exc}"
    if isinstance(approved, str):
        return approved
    return None if approved else declined_text(call.name)

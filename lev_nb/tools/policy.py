"""Who may run a tool: allow / ask / deny (docs/security.md#permissions).

The one resolver, in the spec's precedence order: the launch's ``--allow TOOL`` (``allow=[...]`` in
Python) first; then the blueprint's word (stage table, then agent table) weighed against a
ceiling: the user's configuration (``[tool_permissions]``, ``[agent_tool_permissions.<agent>]``),
else the tool's built-in default. A blueprint may only tighten that ceiling — declaring is not
granting — unless the user's ``[security] allow_blueprint_permissions`` lets blueprints loosen it
too. Last, ``--yolo`` (``yolo=True``) turns a remaining ``ask`` into ``allow``, never a ``deny``.

:func:`authorise` decides one call. A shell call is judged by what it runs and writes
(:func:`lev_nb.blueprint.shellkeys.analyse`): a line that writes a file answers to ``write_file``'s
policy too and is never quieter than it; a write with no nameable target asks a person every time
(nobody to ask: refused). An ``ask`` call is allowed without asking when every key it runs under
is pre-approved: by ``[safe_commands]`` (``safe_tools`` / ``safe_shell``; never a write) or by a
grant an earlier approval gave for the stage or run (``grants``). :func:`approval_keys` names
those keys, so the approver records exactly what a person approved.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import field
from typing import Any, Awaitable, Callable, Mapping, Protocol, Union

from lev_nb.blueprint.constants import canon_tool
from lev_nb.blueprint.shellkeys import KEY_PREFIX, ShellLine, analyse, safe_listed
from lev_nb.errors import CALLEE_ERRORS, CalleeExit
from lev_nb.messages import ToolCall
from lev_nb.records import record
from lev_nb.tools.registry import KEPT_ANSWERS, PolicyName, ToolRegistry

__all__ = [
    "Policies", "Approver", "GrantBook", "resolve_policy", "authorise", "approval_keys", "shell_line",
    "denied_text", "needs_approval_text", "unattended_names", "allow_remedy", "declined_text", "denied_unattended",
]

# Called as approver(call) or approver(tool_name, arguments); may be sync (run in a thread) or async.
# It answers True (run it), False (the person declined) or a ``[denied] ...`` text to return instead.
Approver = Callable[..., Union[bool, str, Awaitable[Union[bool, str]]]]
VALID_POLICIES = ("allow", "ask", "deny")  # from loosest to strictest
SHELL_TOOLS = frozenset({"shell"})


class GrantBook(Protocol):
    """The approvals a person gave for the stage or the run, by key (the run's interaction hub)."""

    def covers(self, key: str) -> bool:
        """Whether an earlier approval granted ``key``."""
        ...


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
    safe_tools: frozenset[str] = frozenset()  # [safe_commands] tools: lower-case names never asked about
    safe_shell: frozenset[str] = frozenset()  # [safe_commands] shell entries ('git status', 'rg', 'env:X')
    grants: GrantBook | None = None
    # Taint tracking: asked after the permission allowed a call; a string refuses it (the result).
    flow_gate: Callable[[ToolCall], Awaitable[str | None]] | None = None
    # resolve_policy's answers, by (tool name, registry, its generation): the tables above are
    # fixed once made, and every tool call asked for its tool's policy again.
    resolved: dict[tuple[str, Any, int], PolicyName] = field(default_factory=dict, compare=False, repr=False)


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
    key = (name, registry, registry.generation)
    policy = policies.resolved.get(key)
    if policy is None:
        if len(policies.resolved) >= KEPT_ANSWERS:
            policies.resolved.clear()
        policy = policies.resolved[key] = _resolve_policy(name, registry, policies)
    return policy


def _resolve_policy(name: str, registry: ToolRegistry, policies: Policies) -> PolicyName:
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


def shell_line(name: str, arguments: Mapping[str, Any] | None) -> ShellLine | None:
    """What a call of the shell tool (any spelling) runs and writes; None for any other call."""
    if canon_tool(name.lower()) not in SHELL_TOOLS:
        return None
    command = (arguments or {}).get("command")
    return analyse(command) if isinstance(command, str) else None


def approval_keys(name: str, arguments: Mapping[str, Any] | None) -> list[str]:
    """The keys approving this call for the stage or run grants: a shell line's programs, variables
    and written files (``shell:ls``, ``shell:git status``, ``shell:env:X``, ``shell:>out.md``), the
    tool's canonical name for any other tool; [] when the call cannot be granted (a line that
    cannot be read as a list of commands, or one writing a target with no fixed path)."""
    line = shell_line(name, arguments)
    if line is None:
        return [canon_tool(name.lower())]
    return line.grant_keys


def _pre_approved(name: str, line: ShellLine | None, keys: list[str], policies: Policies) -> bool:
    """Whether an ``ask`` call runs without asking: each key it runs under is safe or granted."""
    if not keys:
        return False
    grants = policies.grants
    granted = (lambda key: grants.covers(key)) if grants is not None else (lambda key: False)
    if line is None:
        return keys[0] in policies.safe_tools or granted(keys[0])
    tool_safe = "shell" in policies.safe_tools or "bash" in policies.safe_tools
    return all(
        granted(key) or (not key.startswith(KEY_PREFIX + ">") and (tool_safe or safe_listed(key, policies.safe_shell)))
        for key in keys
    )


def _stricter(a: PolicyName, b: PolicyName) -> PolicyName:
    return max(a, b, key=VALID_POLICIES.index)


def write_denied_text(name: str) -> str:
    """Result for a shell line that writes a file where write_file is denied."""
    return (f"[denied] '{name}': the command writes a file (a redirect or tee), and write_file is not "
            "permitted here, so neither is a write through the shell.")


def nameless_write_text(name: str) -> str:
    """Result for a shell line whose write has no fixed path when nobody can approve it."""
    return (f"[denied] '{name}': the command writes to a target with no fixed path (an expansion such "
            "as > $OUT, a socket, a line that changes folder first, or a line the shell parser cannot "
            "read), so it can be neither kept inside the working directory nor pre-approved; only a "
            "person can allow it, one call at a time, and this run has nobody to ask. Write to a named "
            "file inside the working directory instead.")


SCRIPT_FUNCTIONS = ("http_get", "http_post", "shell", "read_file", "write_file", "env_var")
# write_file is left out on purpose: a script's writes stay confined to the workdir, and the bundled
# agents' tools write their results (data-extractor's write_csv) in runs nobody attends.
_BUILTIN_EQUIVALENT = frozenset({"shell", "read_file"})


def script_host_permissions(configured: Mapping[str, str], registry: ToolRegistry,
                            policies: Policies) -> dict[str, str | None]:
    """For each host function of a tool script: None when it may run, else why not
    (``[tool_script_permissions]``): ``allow`` / ``deny`` decide outright; ``inherit`` permits
    ``shell`` and ``read_file`` only where the built-in of that name resolves to ``allow`` for this
    stage, and permits the others (``write_file`` stays confined to the workdir)."""
    out: dict[str, str | None] = {}
    for function in SCRIPT_FUNCTIONS:
        setting = str(configured.get(function, "inherit")).lower()
        if setting == "deny":
            out[function] = f"[tool_script_permissions] {function} = \"deny\" in config.toml"
        elif setting == "inherit" and function in _BUILTIN_EQUIVALENT and \
                resolve_policy(function, registry, policies) != "allow":
            out[function] = f"the stage's policy for the {function} tool is not 'allow'"
        else:
            out[function] = None
    return out


def denied_text(name: str) -> str:
    """Result for a tool the blueprint forbids."""
    return f"[denied] Tool '{name}' is not permitted."


NOBODY_TO_ASK = "needs a person's approval and this run has nobody to ask"


def unattended_names(name: str, arguments: Mapping[str, Any] | None) -> list[str]:
    """The tools a run must allow for this call to run with nobody to ask: the tool, and
    ``write_file`` as well for a shell line that writes a file (its redirect answers to
    write_file's permission too, so allowing the shell alone was not enough)."""
    line = shell_line(name, arguments)
    return [name, "write_file"] if line is not None and line.writes else [name]


def allow_remedy(names: list[str]) -> str:
    """How to start a run that lets ``names`` run unattended, on the command line and in Python."""
    flags = " ".join(f"--allow {n}" for n in names)
    listed = ", ".join(f'"{n}"' for n in names)
    return f"start the run with {flags} (allow=[{listed}] in Python)"


def needs_approval_text(name: str, arguments: Mapping[str, Any] | None = None) -> str:
    """Result for an ``ask`` tool when nobody is there to approve it."""
    names = unattended_names(name, arguments)
    settings = ", ".join(f'{n} = "allow"' for n in names)
    text = (
        f"[denied] Tool '{name}' {NOBODY_TO_ASK}"
        f"{' (the command writes a file, which needs write_file too)' if len(names) > 1 else ''}; to let it "
        f"run unattended, {allow_remedy(names)} or --yolo, "
        f"or allow it in your config.toml: [tool_permissions] {settings}"
    )
    if canon_tool(name.lower()) in SHELL_TOOLS and len(names) == 1:
        text += ", or pre-approve the commands it runs: [safe_commands] shell = [\"<program>\"]"
    return text + "."


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
    """None when ``call`` may run; otherwise the ``[denied]`` result text to return instead
    (see the module docstring)."""
    policy = resolve_policy(call.name, registry, policies)
    line = shell_line(call.name, call.arguments)
    nameless = False
    if line is not None and line.writes and policy != "deny":
        write_policy = resolve_policy("write_file", registry, policies)
        if write_policy == "deny":
            return write_denied_text(call.name)
        policy = _stricter(policy, write_policy)
        nameless = any(write.target is None for write in line.writes)
    if nameless:
        if policies.approver is None:
            return nameless_write_text(call.name)
    elif policy == "allow":
        return None
    elif policy == "deny":
        return denied_text(call.name)
    elif _pre_approved(call.name, line, approval_keys(call.name, call.arguments), policies):
        return None
    elif policies.approver is None:
        return needs_approval_text(call.name, call.arguments)
    assert policies.approver is not None
    try:
        approved = await _ask(policies.approver, call)
    except CALLEE_ERRORS as exc:  # an approver that breaks must not take the run down with it
        return f"[denied] Approval for '{call.name}' failed: {exc}"
    if isinstance(approved, str):
        return approved
    return None if approved else declined_text(call.name)

"""Filling regions when a run starts, from their ``seed`` (docs/blueprint.md#seeds).

Caller seeds take a launch input; ``literal`` is text in the blueprint; ``files`` and ``glob`` read
files of the workdir; ``command`` runs a shell command in the workdir (inside the agent's
``[sandbox]``, :mod:`lev_nb.sandbox`); ``tools`` calls built-in or
script tools; ``rhai`` runs a workdir script with ``input = #{task, workdir}`` in scope. A seed that
fails leaves a bracketed note in its region instead of stopping the run, and a ``seed-failed``
warning tells the person; a ``rhai`` seed that fails fails the run as upstream does (its script
is part of the blueprint's contract).

The run loop calls :func:`seed_context` once, before it enters the first stage.
"""

from __future__ import annotations

import asyncio
import glob as globlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from lev_nb.engine.state import RunFailure
from lev_nb.errors import CALLEE_ERRORS
from lev_nb.workspace import PathEscape, confine

if TYPE_CHECKING:
    from lev_nb.engine.plan.types import SeedPlan
    from lev_nb.engine.state import RunState
    from lev_nb.sandbox import Sandbox
    from lev_nb.secrets import ShellEnv
    from lev_nb.tools.context import ToolContext
    from lev_nb.tools.registry import ToolRegistry

COMMAND_TIMEOUT_S = 60
MAX_SEED_FILES = 200


class SeedFailure(Exception):
    """A seed that must not fail did (its message ends the run)."""


async def seed_context(state: RunState, registry: ToolRegistry, tool_context: ToolContext) -> None:
    """Fill regions from their seeds; the task goes where no caller seed takes it.

    ``registry`` and ``tool_context`` run the tools of a ``tools`` seed. Raises RunFailure for a
    required caller input that is missing and for a ``rhai`` seed that fails.
    """
    inputs = dict(state.inputs)
    inputs.setdefault("task", state.task)
    used: set[str] = set()
    journal = state.journal
    for index, seed in enumerate(state.plan.seeds):
        if seed.kind == "caller":
            used.add(seed.key or seed.region)
        # A resumed run reads what its seeds gave the first time (a command seed is not run again).
        text = journal.replay_seed(index) if journal is not None else None
        if text is None:
            problems: list[str] = []
            try:
                refusal = command_refusal(state, seed.value or "") if seed.kind == "command" else None
                if refusal is not None:
                    problems.append(f"did not run its command: {refusal}")
                    text = f"[seed command not run: {refusal}: {seed.value}]"
                else:
                    text = await seed_text(seed, inputs, state.workdir, state.task, registry, tool_context,
                                           problems=problems)
            except SeedFailure as exc:
                raise RunFailure(str(exc)) from None
            for problem in problems:
                state.warn(f"the seed of region '{seed.region}' {problem}", "seed-failed", in_stage=False)
            if journal is not None:
                journal.record_seed(index, text or "")
        if text and state.ctx.has_region(seed.region):
            await state.in_context(state.ctx.seed, seed.region, text)
        elif seed.required and seed.kind == "caller":
            raise RunFailure(
                f"the input '{seed.key}' is required (it fills region '{seed.region}'); pass it "
                f"as --{seed.key} on the command line or {seed.key}=... in Python"
            )
    if "task" not in used and state.task:
        await state.in_context(state.ctx.seed_input, "task", state.task)
    for name in sorted(set(state.inputs) - used):
        state.warn(f"input '{name}' fills no region of this blueprint, so it was ignored", "input-ignored", in_stage=False)


def command_refusal(state: RunState, command: str) -> str | None:
    """Why a command seed may not run in this run (None: it may). It runs at spawn, before anybody
    could be asked, so ``[security] allow_seed_commands`` (or the launch's ``--no-seed-commands``)
    must allow seed commands at all, a configured ``shell = "deny"`` refuses it, and
    ``[safe_commands]`` must cover every command it runs (it may write no file)."""
    from lev_nb.blueprint.shellkeys import seed_refusal

    settings, plan = state.settings, state.plan
    if not settings.security.allow_seed_commands:
        return "seed commands are turned off ([security] allow_seed_commands = false, or --no-seed-commands)"
    ceiling = settings.tool_ceiling(plan.agent_name)
    if any(ceiling.get(name) == "deny" for name in ("shell", "bash")):
        return "the shell is denied in config.toml ([tool_permissions])"
    _, safe_shell = settings.safe_command_entries(plan.agent_name, plan.safe_tools, plan.safe_shell)
    return seed_refusal(command, safe_shell)


async def seed_text(
    seed: SeedPlan,
    inputs: dict[str, str],
    workdir: Path,
    task: str,
    registry: ToolRegistry,
    tool_context: ToolContext,
    *,
    problems: list[str] | None = None,
) -> str:
    """The text a seed puts into its region ("" when there is nothing); a ``command`` seed runs
    (:func:`command_refusal` has allowed it). What went wrong (a command that failed, a file not
    read, a tool that failed) is added to ``problems``, each a phrase that follows "the seed of
    region 'X'"."""
    problems = problems if problems is not None else []
    if seed.kind == "caller":
        return inputs.get(seed.key or seed.region, "")
    if seed.kind == "literal":
        return seed.value or ""
    if seed.kind == "files":
        return _read_files(workdir, list(seed.files), problems)
    if seed.kind == "glob":
        matches = sorted(globlib.glob(seed.value or "", root_dir=workdir, recursive=True))
        return _read_files(workdir, matches[:MAX_SEED_FILES], problems)
    if seed.kind == "command":
        return await _command(workdir, seed.value or "", tool_context.sandbox, problems,
                              tool_context.extra.get("shell_env"))
    if seed.kind == "tools":
        return await _tools(seed, registry, tool_context, problems)
    if seed.kind == "rhai":
        return await asyncio.to_thread(_rhai, workdir, seed.value or "", task)
    return ""


def _read_files(workdir: Path, paths: list[str], problems: list[str]) -> str:
    parts = []
    for rel in paths:
        try:
            target = confine(workdir, rel)
        except PathEscape:
            parts.append(f"### [{rel}]\n[not read: outside the working directory]")
            problems.append(f"did not read '{rel}': it is outside the working directory")
            continue
        if not target.is_file():
            continue
        try:
            parts.append(f"### [{rel}]\n{target.read_text(encoding='utf-8', errors='replace')}")
        except OSError as exc:
            parts.append(f"### [{rel}]\n[not read: {exc.strerror or exc}]")
            problems.append(f"could not read '{rel}': {exc.strerror or exc}")
    return "\n\n".join(parts)


async def _command(workdir: Path, command: str, sandbox: Sandbox | None, problems: list[str],
                   shell_env: ShellEnv | None = None) -> str:
    from lev_nb.secrets import child_environment
    from lev_nb.tools import reaper
    from lev_nb.tools.builtin import command_line, kill_group, start_in_group

    # In the agent's sandbox; no credential-shaped variable; its own process group, so stopping it
    # stops what it spawned.
    proc = await start_in_group(
        command_line(sandbox, command), cwd=workdir, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=child_environment(policy=shell_env),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), COMMAND_TIMEOUT_S)
    except asyncio.TimeoutError:
        kill_group(proc.pid)
        await proc.wait()
        problems.append(f"timed out after {COMMAND_TIMEOUT_S} s: {command}")
        return f"[seed command timed out after {COMMAND_TIMEOUT_S} s: {command}]"
    except asyncio.CancelledError:  # the run was cancelled while it started: leave nothing running
        kill_group(proc.pid)
        raise
    finally:
        reaper.release(proc.pid)
    text = out.decode("utf-8", errors="replace")
    if proc.returncode:
        said = err.decode("utf-8", errors="replace").strip()
        text += f"\n[seed command exited with {proc.returncode}: {said}]"
        problems.append(f"ran a command that exited with {proc.returncode}: {command}" + (f": {said.splitlines()[-1]}" if said else ""))
    return text.strip()


async def _tools(seed: SeedPlan, registry: ToolRegistry, tool_context: ToolContext, problems: list[str]) -> str:
    from lev_nb.tools.executor import is_failure
    from lev_nb.tools.validation import validate_arguments

    parts = []
    for name, raw_args in seed.tools:
        args = json.loads(raw_args)
        tool = registry.get(name)
        if tool is None or tool.handler is None:
            parts.append(f"[{name}]: [unavailable] no tool named '{name}' can seed a region")
            problems.append(f"names the tool '{name}', which cannot seed a region")
            continue
        problem = validate_arguments(name, tool.parameters, args)
        if problem:
            parts.append(f"[{name}]: {problem}")
            problems.append(f"calls '{name}' with arguments it refuses: {problem}")
            continue
        try:
            result = await tool.handler(tool_context, args)
        except CALLEE_ERRORS as exc:  # a seed never stops the run
            result = f"[error] {name}: {exc}"
        if is_failure(str(result)):
            problems.append(f"called '{name}', which failed: {' '.join(str(result).split())[:200]}")
        parts.append(f"[{name}]:\n{result}")
    return "\n\n".join(parts)


def _rhai(workdir: Path, script: str, task: str) -> str:
    from lev_nb.rhai import Engine, RhaiError
    from lev_nb.scripting.budgets import SEED_MAX_OPERATIONS

    try:
        target = confine(workdir, script)
    except PathEscape:
        target = None
    if target is None or not target.is_file():
        raise SeedFailure(f"rhai seed '{script}' is not a file inside the working directory")
    try:
        value = Engine(max_operations=SEED_MAX_OPERATIONS).eval(
            target.read_text(encoding="utf-8"), input={"task": task, "workdir": str(workdir)}
        )
    except RhaiError as exc:
        raise SeedFailure(f"rhai seed '{script}' failed: {exc}") from None
    if not isinstance(value, str):
        raise SeedFailure(f"rhai seed '{script}' must return a string, got {type(value).__name__}")
    return value

"""A stage's tools inside a run: what is advertised, how a batch of calls runs, and the
bookkeeping that follows (modification tracking, events, context routing, repetition nudges), plus
the tools the engine answers itself: ``submit_output``, ``runtime_info``, ``fan_out`` and the
sub-agent tools (docs/concepts.md#tools).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from lev_nb.engine import events as ev
from lev_nb.engine.context.access import ContextTools
from lev_nb.engine.context.window import ToolRouting
from lev_nb.blueprint.constants import BLOCKING_TOOLS, MODIFYING_TOOLS
from lev_nb.engine.pipeline.dynamic_tools import DynamicTools
from lev_nb.engine.pipeline.file_tracking import FileTracker
from lev_nb.engine.pipeline.gates import modifying_tools
from lev_nb.engine.pipeline.pools import TOOL_POOL
from lev_nb.engine.pipeline.repetition import RepetitionWatch
from lev_nb.engine.pipeline.watchdogs import iteration_cap
from lev_nb.engine.pipeline.outputs import resolve_output_spec, submit_output_description
from lev_nb.engine.plan.types import OutputSpec, StagePlan
from lev_nb.engine.pipeline.submission import evaluate_submission
from lev_nb.engine.pipeline.taint_flow import TaintFlow
from lev_nb.engine.pipeline.subagents import SUBAGENT_TOOL_NAMES
from lev_nb.messages import ModelResponse, ToolCall, ToolSpec
from lev_nb.tools.builtin import default_registry
from lev_nb.tools.context import ToolContext
from lev_nb.tools.executor import ToolResult, execute_calls, is_failure
from lev_nb.tools.policy import (Policies, allow_remedy, denied_unattended, resolve_policy, script_host_permissions,
                                 unattended_names)
from lev_nb.tools.registry import ToolDef
from lev_nb.settings.capabilities import capability_missing
from lev_nb.tools.scripts import global_tool_defs
from lev_nb.text import squeezed
from lev_nb.tools.write_budget import WriteBudget
from lev_nb.sandbox import Sandboxes, SandboxSpec, describe
from lev_nb.settings.grants import mount_grant, read_grant
from lev_nb.settings.paths import config_path
from lev_nb.workspace import Workspace

if TYPE_CHECKING:
    from lev_nb.engine.journal import Journal
    from lev_nb.engine.state import RunState

T = TypeVar("T")
MAX_MODIFIED_FILES = 200
RUNTIME_INFO_DESCRIPTION = (
    "This run reporting on itself: agent, stage, iteration and its limit, model and provider, context "
    "tokens in use, and whether anybody is there to answer a question (attended) (JSON)."
)
SUMMARY_CHARS = 200


def search_found_nothing(result: str) -> bool:
    """Whether a ``web_search`` result holds no hit: empty, ``[]``, or a bracketed note (no
    engine, a failure, nothing found) rather than a list of results (which opens ``[{``)."""
    text = result.strip()
    return not text or text == "[]" or (text.startswith("[") and not text.startswith("[{"))


class StageTools:
    """Everything about tools for one run; the current stage is read from the run state.

    Receives the run state, the launch's ``approver`` (asked for tools whose policy is ``ask``),
    the compiled output ``validators`` (keyed as the output specs name them), the launch's
    ``output_request``, ``fan_out`` (answers a ``fan_out`` call), ``subagents`` (answers the
    sub-agent tools, given the call and its canonical name) and ``recall_child`` (a resumed run
    replayed a ``spawn_agent`` call: the child it started then). Public: ``registry`` (every
    tool of the run, built-in and script) and ``tool_context`` (what a tool handler receives).
    """

    def __init__(
        self,
        state: RunState,
        *,
        approver: Callable[[str, dict[str, Any]], bool] | None,
        validators: dict[str, Any],
        output_request: OutputSpec | None,
        fan_out: Callable[[ToolCall], Awaitable[str]],
        subagents: Callable[[ToolCall, str], Awaitable[str]] | None = None,
        recall_child: Callable[[str, ToolCall], object] | None = None,
    ) -> None:
        self.state = state
        self.approver = approver
        self.validators = validators
        self.output_request = output_request
        self.fan_out = fan_out
        self.subagents = subagents
        self.recall_child = recall_child  # a resumed run: a child its previous life started
        self.registry = default_registry()
        # Script tools whose @requires this machine cannot meet (no search key...): name -> why.
        self.unavailable: dict[str, str] = {}
        for tool in state.plan.script_tools.values():
            self._register_script(tool)
        # $LEV_HOME/tools/*.rhai, compiled at spawn; an agent's own tool shadows a global one.
        lev_home = state.store.run_dir.parent.parent
        global_tools, skipped = global_tool_defs(lev_home, lambda: set(self.registry.names()) | set(self.unavailable))
        for tool in global_tools:
            self._register_script(tool)
        # A tool file that did not load (the agent's own, then a global one): a stage that lists
        # it is told why when it starts (specs), not left to find the tool missing.
        for item, whose in [*((i, "the agent's tool") for i in state.plan.skipped_scripts),
                            *((i, "the global tool") for i in skipped)]:
            name = item.path.stem
            if name not in self.registry and name not in self.unavailable:
                where = "" if str(item.path) in item.reason else f" ({item.path})"
                self.unavailable[name] = f"{whose} did not load{where}: {item.reason}"
        # runtime_info answers from the run's state, so a seed may call it like any tool.
        self.registry.register(ToolDef(
            "runtime_info", RUNTIME_INFO_DESCRIPTION, {"type": "object", "properties": {}},
            handler=self._runtime_info_tool, readonly=True, default_policy="allow", run_state=True,
        ))
        self.context_tools = ContextTools(state.ctx, scripts_off_loop=getattr(state.ctx, "scripted", False))
        self.tool_context = ToolContext(
            workspace=Workspace(
                state.workdir,
                read_grant=read_grant(state.plan.agent_name, state.plan.read_paths, state.settings, state.workdir),
            ),
            run_id=state.run_id,
            context=self.context_tools,
            writes=WriteBudget(state.settings.limits.max_tool_call_write_bytes,
                               state.settings.limits.max_run_write_bytes, tell=self._write_refused),
            extra={
                "allow_env_vars": tuple(state.settings.security.allow_env_vars),
                "shell_env": state.settings.shell_env(),
                "allow_local_network": state.settings.security.allow_local_network,
                "http_timeout_s": float(state.settings.limits.script_http_timeout_secs) or None,
            },
        )
        self._specs: dict[tuple[str, int, int], list[ToolSpec]] = {}
        self._outputs: dict[str, OutputSpec | None] = {}  # stage -> its final-output spec (output_spec)
        # stage -> its permission tables and approver: fixed for the run (the launch's allow list and
        # --yolo, the settings, the blueprint), so built at the stage's first batch, not every batch
        self._policies: dict[str, Policies] = {}
        self._offered: tuple[tuple[str, bool, int, int], list[str]] | None = None  # (what it hung on, offered)
        self.file_tracker = FileTracker(state, self.context_tools, self.tool_context.workspace)
        self.dynamic = DynamicTools(state, self.registry)  # after every other tool is registered
        self.taint = TaintFlow(state, self.registry, reads_outside=self.tool_context.workspace.read_grant is not None)
        plan = state.plan
        self.safe_tools, self.safe_shell = state.settings.safe_command_entries(
            plan.agent_name, plan.safe_tools, plan.safe_shell)
        # MCP: tools of each connector (server -> advertised names), and names not to advertise
        self._connector_tools: dict[str, list[str]] = {}
        self._connectors_known = 0  # how many times the connectors' tools were learnt (offered's cache)
        self._mcp_hidden: set[str] = set()
        self._mcp_attached = False
        # Commands never see the run record, $LEV_HOME nor the configuration, even when they lie in
        # the workdir or a mount; a mount outside the workdir shows only what the user granted.
        self.sandboxes = Sandboxes(
            state.workdir, hidden=(state.store.run_dir, lev_home, config_path()),
            granted=mount_grant(state.plan.agent_name, state.settings),
            floor=SandboxSpec.of(state.settings.sandbox),
        )
        self._sandbox_warned: set[SandboxSpec] = set()

    async def prepare_sandboxes(self) -> None:
        """Find the backend of every sandbox the run may use, off the engine thread (looking for
        one may start a probe process), so switching stages never waits on it."""
        plan = self.state.plan
        specs = [plan.sandbox, *(s.sandbox for s in plan.stages)]
        if self.sandboxes.floor.isolated or any(spec.isolated for spec in specs):
            await asyncio.to_thread(lambda: [self.sandboxes.get(spec) for spec in specs])

    async def prepare_mcp(self) -> None:
        """Start the MCP servers the blueprint names (through the process's broker, off the engine
        loop) and register their tools; a server that is missing or does not start is a warning,
        and its tools are not offered (spec: a connector that resolves to nothing grants nothing)."""
        plan, state = self.state.plan, self.state
        names = [t for s in plan.stages for t in s.tools]
        connectors = [c for s in plan.stages for c in s.connectors]
        if not connectors and not any("__" in n for n in names):
            return
        from lev_nb.mcp.client import mcp_names, resolve_for_run

        if not connectors and not mcp_names(names):
            return
        limits = state.settings.limits
        got = await resolve_for_run(
            names, connectors, state.settings.mcp_servers, run_id=state.run_id, run_dir=state.store.run_dir,
            call_timeout=limits.mcp_call_timeout_secs, connect_timeout=limits.mcp_connect_timeout_secs,
            max_restarts=limits.mcp_max_restarts)
        self._mcp_attached = bool(got.statuses)
        for tool in got.tools:
            if tool.name not in self.registry:  # a built-in or the agent's own script keeps its name
                self.registry.register(tool)
        self._connector_tools = got.connectors
        self._connectors_known += 1
        self._mcp_hidden = got.hidden
        for warning in got.warnings:
            state.warn(warning)
        if got.statuses:
            servers = [{**s.to_dict(), "tools": list(got.connectors.get(s.name, ()))} for s in got.statuses]
            state.rec.emit(ev.McpServers(state.run_id, None, servers=servers))

    def _write_refused(self, message: str) -> None:
        """A write the caps or the free-disk guard refused, told to the person (a script's host
        functions write from a worker thread: the warning is then told on the engine thread)."""
        from lev_nb.engine.loop import engine_loop

        loop = engine_loop()
        if loop.in_engine_thread():
            self.state.warn(message, "write-refused")
        else:
            loop.call_soon(self.state.warn, message, "write-refused")

    def close_mcp(self) -> None:
        """The run has ended: its folder stops receiving its MCP servers' stderr (the servers stay
        up for the process's other runs)."""
        if self._mcp_attached:
            from lev_nb.mcp.client import broker

            broker().detach(self.state.run_id)

    def use_sandbox(self, spec: SandboxSpec, who: str) -> None:
        """Run the next commands in the sandbox of ``spec`` (``who``: whose it is, for the warning a
        sandbox weaker than asked for gives once per run)."""
        sandbox, _ = self.sandboxes.get(spec)
        if sandbox.choice.degraded and spec not in self._sandbox_warned:
            self._sandbox_warned.add(spec)
            self.state.warn(f"{who} asks for a sandbox (kind = \"{sandbox.spec.kind}\") this machine cannot give: "
                            f"{sandbox.choice.reason}; its commands run {describe(sandbox.choice)}", "sandbox-fallback")
        self.tool_context.sandbox = sandbox

    # -- what the model sees ----------------------------------------------------------------
    def output_spec(self, stage: StagePlan) -> OutputSpec | None:
        """The final-output spec in force for ``stage`` (agent < stage < launch request; the three
        are fixed for the run, so it is worked out once per stage)."""
        if stage.name not in self._outputs:
            self._outputs[stage.name] = resolve_output_spec(self.state.plan.agent_output, stage.output,
                                                            self.output_request)
        return self._outputs[stage.name]

    def offered(self, stage: StagePlan) -> list[str]:
        """The stage's tools as advertised: the blocking tools that wait for a person are left out
        under ``--yolo`` and when nobody can answer, unless the stage requires them
        (docs/security.md#permissions). Asked twice a turn, so the last answer is kept until what
        it depends on changes; callers read it and never change it."""
        hub = self.state.interaction
        unattended = self.state.meta.yolo or hub is None or not hub.interactive
        journal = self.state.journal
        # A resumed run replays the turns its previous life offered them in: nothing left out.
        leave_out = unattended and not (journal is not None and journal.replaying)
        key = (stage.name, leave_out, self.dynamic.version, self._connectors_known)
        if self._offered is not None and self._offered[0] == key:
            return self._offered[1]
        tools = self._stage_tools(stage) + [n for n in self.dynamic.names if n not in stage.tools]
        if leave_out:
            required = {self.registry.canonical(t) for t in stage.required_tools}
            tools = [
                t for t in tools
                if self.registry.canonical(t) not in BLOCKING_TOOLS or self.registry.canonical(t) in required
            ]
        self._offered = (key, tools)
        return tools

    def _register_script(self, tool: ToolDef) -> None:
        """Offer a script tool, unless it needs a capability this machine lacks."""
        why = capability_missing(tool.requires, self.state.settings)
        if why is None:
            self.registry.register(tool)
        else:
            self.unavailable[tool.name] = why

    def _stage_tools(self, stage: StagePlan) -> list[str]:
        """The stage's ``available_tools`` with the tools of its connectors merged in (each once)."""
        if not stage.connectors:
            return list(stage.tools)
        tools = list(stage.tools)
        seen = {t.lower() for t in tools}
        for connector in stage.connectors:
            for name in self._connector_tools.get(connector, ()):
                if name.lower() not in seen:
                    seen.add(name.lower())
                    tools.append(name)
        return tools

    def specs(self, stage: StagePlan) -> list[ToolSpec]:
        """The tool specs advertised in ``stage`` (cached per stage)."""
        self.dynamic.refresh()  # dynamic_tools: what the agent wrote into <workdir>/tools
        offered = self.offered(stage)  # who can answer may change: a notebook view may open
        key = (stage.name, len(offered), self.dynamic.version)
        cached = self._specs.get(key)
        if cached is None:
            for name in offered:
                if name in self.unavailable:
                    self.state.warn(f"'{name}' is not offered in stage '{stage.name}': {self.unavailable[name]}",
                                    "tool-unavailable")
            cached = self.registry.specs([t for t in offered if t not in self._mcp_hidden], skip_unknown=True)
            for i, spec in enumerate(cached):
                if spec.name == "submit_output":
                    cached[i] = ToolSpec(
                        spec.name, submit_output_description(self.output_spec(stage)), spec.parameters
                    )
            self._specs[key] = cached
        return cached

    # -- running a batch --------------------------------------------------------------------
    async def run_batch(self, response: ModelResponse) -> None:
        """Run the calls of one model turn and put the turn and its results into context."""
        state = self.state
        stage, progress, meta = state.stage, state.progress, state.meta
        calls = response.tool_calls
        progress.total_tool_calls += len(calls)
        meta.tool_calls += len(calls)
        for call in calls:
            path = (call.arguments or {}).get("path")
            if self.registry.canonical(call.name) in MODIFYING_TOOLS and isinstance(path, str):
                progress.edits_by_path[path] += 1
        started: set[str] = set()

        def on_start(call: ToolCall) -> None:
            started.add(call.id)
            state.rec.emit(
                ev.ToolCallStarted(state.run_id, stage.name, call_id=call.id, tool=call.name, arguments=call.arguments)
            )

        settings = state.settings
        policies = self._stage_policies(stage)
        self.use_sandbox(stage.sandbox, f"stage '{stage.name}'")
        # What a tool script may do inside: the shell only where the built-in shell tool would run
        # unasked, and [tool_script_permissions] over the stage's policies. Worked out when a script
        # tool of this batch asks (most batches call built-in tools alone).
        self.tool_context.extra["script_permissions"] = _once(
            lambda: (resolve_policy("shell", self.registry, policies) == "allow",
                     script_host_permissions(settings.tool_script_permissions.__dict__, self.registry, policies)))
        journal = _BatchJournal(state.journal, state.warn) if state.journal is not None else None
        results = await execute_calls(
            calls, self.offered(stage), self.registry, self.tool_context, policies, on_start=on_start,
            journal=journal, slot=TOOL_POOL.permit(settings.limits.max_concurrent_tools),
        )
        replayed = journal.replayed_ids if journal is not None else set()
        by_id = {c.id: c for c in calls}
        for i, result in enumerate(results):
            if result.inline:
                on_start(by_id[result.call_id])
                results[i] = await self._run_inline(by_id[result.call_id], result)
        # No tool runs after this: a finished run keeps no hold on this batch's policies.
        self.tool_context.extra.pop("script_permissions", None)
        routing = _routing(stage)

        def merge() -> None:
            state.ctx.add_assistant(response.text, calls)
            for result in results:
                state.ctx.route_tool_result(
                    result.call_id,
                    self.registry.canonical(result.name),
                    result.content,
                    is_error=result.is_error,
                    routing=routing,
                    label=self.taint.label(result.name),
                )

        if getattr(state.ctx, "scripted", False):
            await asyncio.to_thread(merge)  # custom-region scripts (on_write, on_overflow) run off the engine thread
        else:
            merge()
        await self.file_tracker.track(calls, results, self.registry.canonical)
        nudges = self._repetition_nudges(calls)
        counted = modifying_tools(stage)
        for result in results:
            self._account(result, counted)
            if result.call_id in replayed:
                continue  # its events are in the record from the run's previous life
            if denied_unattended(result.content):
                denied = by_id[result.call_id]
                state.warn(f"'{result.name}' was denied: it needs a person's approval and nobody could be asked; "
                           f"{allow_remedy(unattended_names(denied.name, denied.arguments))} to let it run",
                           "tool-denied-unattended")
            if result.call_id not in started:
                call = by_id[result.call_id]
                state.rec.emit(
                    ev.ToolCallStarted(state.run_id, stage.name, call_id=call.id, tool=call.name, arguments=call.arguments)
                )
            state.rec.emit(
                ev.ToolCallFinished(
                    state.run_id,
                    stage.name,
                    call_id=result.call_id,
                    tool=result.name,
                    ok=not result.is_error,
                    summary=squeezed(result.content, SUMMARY_CHARS),
                )
            )
        for text in nudges:
            await state.nudge("repetition", text)
        state.rec.save()

    def _stage_policies(self, stage: StagePlan) -> Policies:
        """The permission tables in force for ``stage`` and who answers an ``ask``."""
        policies = self._policies.get(stage.name)
        if policies is None:
            state, settings, hub = self.state, self.state.settings, self.state.interaction
            policies = self._policies[stage.name] = Policies(
                stage=stage.tool_permissions,
                agent=state.plan.tool_permissions,
                ceiling=settings.tool_ceiling(state.plan.agent_name),
                blueprint_may_loosen=settings.security.allow_blueprint_permissions,
                # The launch's own approver first; else the run's hub: whoever the run can ask, or
                # the answer a resumed run's journal holds (nobody: denied with how to allow it).
                approver=self.approver or (hub.approve if hub is not None else None),
                launch_allow=frozenset(state.meta.allowed_tools),
                yolo=state.meta.yolo,
                safe_tools=self.safe_tools,
                safe_shell=self.safe_shell,
                grants=hub,
                flow_gate=self.taint.gate_for(stage),
            )
        return policies

    def _repetition_nudges(self, calls: list[ToolCall]) -> list[str]:
        progress = self.state.progress
        if progress.repetition is None:
            progress.repetition = RepetitionWatch(self.state.plan.repetition)
        nudges: list[str] = []
        for call in calls:
            for text in progress.repetition.observe(self.registry.canonical(call.name), call.arguments or {}):
                if text not in nudges:
                    nudges.append(text)
        return nudges

    def _account(self, result: ToolResult, counted: set[str]) -> None:
        """Modification tracking as the seeds define it: only successful modifying calls count."""
        canon = self.registry.canonical(result.name)
        if canon == "web_search":  # meta.json flags: equal counts mean the run never saw the web
            self.state.meta.flags.searches_run += 1
            self.state.meta.flags.searches_empty += search_found_nothing(result.content)
        if canon not in counted:
            return
        progress, flags = self.state.progress, self.state.meta.flags
        if result.content.startswith("[denied]"):
            progress.blocked_modification_calls += 1
            return
        if is_failure(result.content) or result.is_error:
            return
        progress.modifying_tool_calls += 1
        flags.modified_file_count += 1
        path = result.modified_path
        if path and path not in flags.modified_files and len(flags.modified_files) < MAX_MODIFIED_FILES:
            flags.modified_files.append(path)

    # -- tools the engine answers itself -----------------------------------------------------
    async def _run_inline(self, call: ToolCall, result: ToolResult) -> ToolResult:
        canon = self.registry.canonical(call.name)
        if canon == "submit_output":
            content = await self._submit_output(call)
        elif canon == "runtime_info":
            content = self._runtime_info()
        elif canon == "fan_out":
            content = await self.fan_out(call)
        elif canon in BLOCKING_TOOLS and self.state.interaction is not None:
            content = await self.state.interaction.blocking_tool(call)
        elif canon in SUBAGENT_TOOL_NAMES and self.subagents is not None:
            content = await self._subagent_tool(call, canon)
        else:
            content = f"[error] {call.name}: this tool is not implemented in lev_nb yet."
        return ToolResult(
            call_id=call.id, name=call.name, content=content, is_error=is_failure(content)
        )

    async def _subagent_tool(self, call: ToolCall, canon: str) -> str:
        """A sub-agent tool's answer, journaled before the model sees it; a resumed run takes it
        from its journal (a child it started is not started again)."""
        assert self.subagents is not None
        journal = self.state.journal
        if journal is None:
            return await self.subagents(call, canon)
        entry = journal.peek_tool(call) if journal.replaying else None
        if entry is not None:
            content = str(entry.get("content") or "")
            child = journal.spawned(call) if canon == "spawn_agent" else None
            if child is not None and self.recall_child is not None:
                self.recall_child(child, call)
            return content
        journal.go_live()
        content = await self.subagents(call, canon)
        journal.record_tool(call.id, call.name, content, is_failure(content), None, changed=True)  # agents ran
        return content

    async def _submit_output(self, call: ToolCall) -> str:
        state = self.state
        stage = state.stage
        spec = self.output_spec(stage)
        validator = self.validators.get(spec.validator) if spec and spec.validator else None
        # Off the engine thread: a validator (or a large answer's format and schema checks) may
        # take seconds, and every other run shares that thread.
        outcome = await asyncio.to_thread(
            evaluate_submission,
            call.arguments or {},
            spec=spec,
            stage=stage.name,
            stage_names=[s.name for s in state.plan.stages],
            workdir=state.workdir,
            validator=validator,
        )
        for warning in outcome.warnings:
            state.warn(warning, "unchecked-answer")
        if outcome.output is None:
            state.rejections += 1
            state.last_rejection = (outcome.rejected_by, outcome.reason or outcome.text.removeprefix("[error] "))
            state.rec.emit(ev.OutputRejected(state.run_id, stage.name, reason=outcome.text))
            return outcome.text
        output = outcome.output
        state.keep_final_output(output)
        state.meta.flags.produced_output = True
        state.rec.save(force=True)
        state.rec.emit(
            ev.OutputSubmitted(
                state.run_id,
                stage.name,
                format=output.format,
                bytes=len(output.content.encode("utf-8")),
                truncated=output.truncated,
                checked=output.checked,
            )
        )
        return outcome.text

    async def _runtime_info_tool(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        return self._runtime_info()

    def _runtime_info(self) -> str:
        state = self.state
        stage = state.stage
        hub = state.interaction
        label = state.meta.model or ""
        provider, _, model = label.partition("/")
        info = {
            "run_id": state.run_id,
            "agent": state.plan.agent_name,
            "stage": stage.name,
            "stage_visit": state.visits.get(stage.name, 0),
            "stage_iterations": state.progress.iterations,
            "max_iterations": iteration_cap(stage, state.settings.limits.default_max_iterations) or None,
            "run_iterations": state.meta.iteration,
            "tool_calls": state.meta.tool_calls,
            "workdir": str(state.workdir),
            "has_final_output": state.final_output is not None,
            "provider": provider or None,
            "model": model or (label or None),
            "context_tokens": state.ctx.total_tokens(),
            # Whether anybody can answer ask_user_* now: an unattended run decides for itself.
            "attended": bool(hub is not None and hub.interactive and not state.meta.yolo),
        }
        return json.dumps(info, indent=2)


class _BatchJournal:
    """The run journal as the tool executor sees it (lev_nb.tools.executor.ToolJournal)."""

    def __init__(self, journal: Journal, on_interrupted: Callable[[str], None]) -> None:
        self.journal = journal
        self.on_interrupted = on_interrupted
        self.replayed_ids: set[str] = set()
        self.started: set[str] = set()  # calls of tools that may change something (see starting)

    def replayed(self, call: ToolCall) -> ToolResult | None:
        entry = self.journal.replay_tool(call)
        if entry is None:
            return None
        self.replayed_ids.add(call.id)
        return ToolResult(call_id=call.id, name=str(entry.get("name") or call.name), content=str(entry.get("content") or ""),
                          is_error=bool(entry.get("is_error")), modified_path=entry.get("modified_path"))

    def done(self, result: ToolResult) -> None:
        self.journal.record_tool(result.call_id, result.name, result.content, result.is_error, result.modified_path,
                                 changed=result.call_id in self.started)

    def starting(self, call: ToolCall) -> None:
        self.started.add(call.id)
        self.journal.record_call(call)

    def interrupted(self, call: ToolCall) -> ToolResult | None:
        entry = self.journal.interrupted(call)
        if entry is None:
            return None
        self.journal.go_live()
        shown = json.dumps(entry.get("arguments") or {}, ensure_ascii=False)
        shown = shown if len(shown) <= 300 else shown[:299] + "…"
        started = entry.get("at")
        when = (time.strftime(" at %H:%M:%S UTC", time.gmtime(started)) if isinstance(started, (int, float)) else "")
        self.on_interrupted(f"tool call {call.name} {shown} was running when the run's process stopped; "
                            "it was not run again (it may or may not have taken effect)")
        content = (f"[interrupted] This call started{when} but the run's process stopped before it finished "
                   f"({call.name} {shown}). It may or may not have taken effect. Check its effects (files, "
                   "processes, anything it changes) before running anything with side effects again.")
        return ToolResult(call_id=call.id, name=call.name, content=content, is_error=True)


def _routing(stage: StagePlan) -> ToolRouting | None:
    raw: dict[str, Any] | None = stage.tool_routing
    if not raw:
        return None
    overrides = {
        tool: {k: v for k, v in (value or {}).items() if v is not None} if isinstance(value, dict) else value
        for tool, value in (raw.get("overrides") or {}).items()
    }
    return ToolRouting(
        default_region=raw.get("default_region") or "tool_results",
        overrides=overrides,
        persist=raw.get("persist", True),
        max_result_tokens=raw.get("max_result_tokens"),
        max_result_tokens_per_tool=dict(raw.get("max_result_tokens_per_tool") or {}),
    )


def _once(compute: Callable[[], T]) -> Callable[[], T]:
    """``compute``, run at the first call and its answer kept. Made for every tool batch:
    ``functools.cache`` copies a function's name and docs into its wrapper, which cost more than
    the batch's other bookkeeping."""
    kept: list[T] = []

    def answer() -> T:
        if not kept:
            kept.append(compute())
        return kept[0]

    return answer

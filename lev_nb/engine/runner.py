"""The run loop: one blueprint run as an asyncio task on the engine thread.

The loop follows spec/runtime.md §2-§7: infer, run tools, nudge a stage that answers without
using them, hold the exit while something is owed, then resolve the transition (condition edges,
normal resolution, routing calls, gates, transforms) until the run is terminal. Every step is
written to the run record so a run killed half-way leaves a readable meta.json.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lev_nb.engine import events as ev
from lev_nb.engine.context.run_context import StageInstructionsError
from lev_nb.engine.eventlog import EventLog
from lev_nb.engine.pipeline.gates import modifying_tools
from lev_nb.engine.pipeline.hooks import HookFailure, RunHooks
from lev_nb.engine.pipeline.outputs import OWED_OUTPUT_PROMPT, FinalOutput, describe_spec
from lev_nb.engine.plan.types import OutputSpec, RunPlan, StagePlan
from lev_nb.engine.pipeline.holds import ExitHolds
from lev_nb.engine.state import Outcome, RunFailure, StageProgress
from lev_nb.engine.pipeline.transitions import Transitions
from lev_nb.engine.record import Recorder
from lev_nb.engine.pipeline.routing import (
    find_conditioned,
)
from lev_nb.engine.pipeline.watchdogs import (
    iteration_cap_hit,
    iteration_cap_note,
    stuck_note,
    stuck_reason,
)
from lev_nb.messages import ModelRequest, ModelResponse, ToolCall
from lev_nb.providers.base import Provider, ProviderError

WORKSPACE_CHECK_INTERVAL = 5


@dataclass(frozen=True)
class RetryPolicy:
    """How often a transient model error is retried, and how long to wait in between."""

    max_attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0


class Runner(ExitHolds, Transitions):
    """State and logic of one run. Create it, then schedule :meth:`main` on the engine loop."""

    def __init__(
        self,
        plan: RunPlan,
        *,
        task: str,
        provider: Provider | None,
        workdir: str | os.PathLike[str] | None,
        inputs: dict[str, str] | None = None,
        output_request: OutputSpec | None = None,
        on_complete: Callable[[Any], None] | None = None,
        home: str | os.PathLike[str] | None = None,
        retry: RetryPolicy | None = None,
        approver: Callable[[str, dict[str, Any]], bool] | None = None,
        validators: dict[str, Any] | None = None,
        entry: str | None = None,
        parent: Runner | None = None,
        webhook: str | None = None,
        hook_scripts: dict[str, Any] | None = None,
        region_scripts: dict[str, Any] | None = None,
    ) -> None:
        from lev_nb import store
        from lev_nb.engine.context.run_context import build_context
        from lev_nb.engine.pipeline.tools import StageTools

        self.plan = plan
        self.task = task
        self.provider = provider
        self.inputs = dict(inputs or {})
        self.output_request = output_request
        self.on_complete = on_complete
        self.retry = retry or RetryPolicy()
        self.approver = approver
        self.validators = dict(validators or {})
        self.webhook = webhook
        self.run_id = store.new_run_id(plan.agent_name)
        self.store = store.RunStore(self.run_id, home=home)
        self.workdir = Path(workdir) if workdir is not None else self.store.dir / "workdir"
        self._workdir_given = workdir is not None
        self.events = EventLog()
        self.meta = store.RunMeta(
            run_id=self.run_id,
            agent_name=plan.agent_name,
            agent_path=plan.source_path or "",
            task=task,
            workdir=str(self.workdir),
            num_stages=len(plan.stages),
        )
        if output_request is not None and not output_request.is_empty():
            self.meta.output_request = {
                k: v for k, v in output_request.__dict__.items() if v is not None
            }
        self.rec = Recorder(self.store, self.meta, self.events)
        # Stage hooks and custom-region scripts: start_run compiles them before the run exists
        # (so a broken one raises there); a worker run of another blueprint compiles its own and
        # fails at its start when one is broken.
        self._script_error: str | None = None
        if hook_scripts is None or region_scripts is None:
            hook_scripts, region_scripts = self._compile_scripts(hook_scripts, region_scripts)
        self.hook_scripts, self.region_scripts = hook_scripts, region_scripts
        self.ctx = build_context(plan, region_scripts)
        if self.ctx.region_host is not None:
            self.ctx.region_host.bind(self)
        self.hooks = RunHooks(self, hook_scripts)
        self._enter_hook_pending = False
        self._ending: tuple[str, str | None] | None = None
        self.tools = StageTools(self)
        self.parent = parent
        self.depth = parent.depth + 1 if parent is not None else 0
        # The root run's limit governs the whole tree of workers.
        self.max_child_depth: int = parent.max_child_depth if parent is not None else plan.max_child_depth
        if parent is not None:
            self.meta.parent_run_id = parent.run_id
            self.meta.depth = self.depth
        self.entry = entry or plan.entry
        self.meta.model = self._entry_model_label()
        self.visits: dict[str, int] = {}
        self.stage: StagePlan = plan.stage(self.entry)
        self._pending_merge: str | None = None
        self._last_system_key: int | None = None
        self._pending_failure: str | None = None
        self.progress = StageProgress()
        self.final_output: FinalOutput | None = None
        self._task: asyncio.Task[None] | None = None
        self._cancel_requested = False

    # ------------------------------------------------------------------ lifecycle
    def request_cancel(self) -> None:
        """Ask the run to stop; safe to call from any thread."""
        from lev_nb.engine.loop import engine_loop

        self._cancel_requested = True
        loop = engine_loop()
        loop.call_soon(self._cancel_task)

    def _cancel_task(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def main(self) -> None:
        """Run to a terminal status. Never raises: every failure ends in a written record."""
        self._task = asyncio.current_task()
        try:
            try:
                if self._cancel_requested:
                    raise asyncio.CancelledError
                await self._start()
                await self._loop()
            except asyncio.CancelledError:
                self._finish("cancelled")
            except (RunFailure, HookFailure) as exc:
                self._finish("error", str(exc))
            except Exception as exc:  # a bug in lev_nb must still leave a readable record
                self.rec.emit(ev.Warning_(self.run_id, self.stage.name, message=traceback.format_exc()))
                self._finish("error", f"internal error: {type(exc).__name__}: {exc}")
            await self._end()
        finally:
            if self.webhook:
                await self._post_webhook()
            await self.rec.flushed()
            self.events.close()
            self._notify_complete()

    async def _post_webhook(self) -> None:
        from lev_nb.engine.webhook import completion_payload, post_json

        payload = completion_payload(self.meta.to_dict(), self.final_output)
        try:
            await asyncio.to_thread(post_json, self.webhook, payload)
        except OSError as exc:
            self.rec.emit(ev.Warning_(self.run_id, self.stage.name, message=f"the completion webhook failed: {exc}"))

    async def _start(self) -> None:
        self.meta.status = "running"
        self.meta.flags.no_output_tools = not any(
            set(s.tools) & modifying_tools(s) for s in self.plan.stages
        )
        self.rec.save(force=True)
        self.rec.emit(
            ev.RunStarted(
                self.run_id, None, agent=self.plan.agent_name, task=self.task, workdir=str(self.workdir)
            )
        )
        if self._workdir_given and not self.workdir.is_dir():
            raise RunFailure(
                f"the working directory '{self.workdir}' does not exist; create it or pass another --workdir"
            )
        if self._script_error is not None:
            raise RunFailure(self._script_error)
        self.workdir.mkdir(parents=True, exist_ok=True)
        await self._seed_context()
        self._enter_stage(self.entry, None)

    async def _seed_context(self) -> None:
        """Fill regions from their seeds; the task goes where no caller seed takes it."""
        from lev_nb.engine.context.seeds import SeedFailure, seed_text

        inputs = dict(self.inputs)
        inputs.setdefault("task", self.task)
        used: set[str] = set()
        for seed in self.plan.seeds:
            if seed.kind == "caller":
                used.add(seed.key or seed.region)
            try:
                text = await seed_text(self, seed, inputs)
            except SeedFailure as exc:
                raise RunFailure(str(exc)) from None
            if text and self.ctx.has_region(seed.region):
                self.ctx.seed(seed.region, text)
            elif seed.required and seed.kind == "caller":
                raise RunFailure(
                    f"the input '{seed.key}' is required (it fills region '{seed.region}'); pass it "
                    f"as --{seed.key} on the command line or {seed.key}=... in Python"
                )
        if "task" not in used and self.task:
            self.ctx.seed_input("task", self.task)
        for name in sorted(set(self.inputs) - used):
            self.rec.emit(
                ev.Warning_(self.run_id, None, message=f"input '{name}' fills no region of this blueprint, so it was ignored")
            )

    def _compile_scripts(
        self, hook_scripts: dict[str, Any] | None, region_scripts: dict[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        from lev_nb.engine.api import compile_run_scripts
        from lev_nb.scripting import ScriptError

        try:
            hooks, regions = compile_run_scripts(self.plan)
        except ScriptError as exc:
            self._script_error = exc.message
            return hook_scripts or {}, region_scripts or {}
        return (hooks if hook_scripts is None else hook_scripts), (regions if region_scripts is None else region_scripts)

    def _finish(self, status: str, error: str | None = None) -> None:
        """Note how the run ends; :meth:`_end` fires the terminal hook, then records it."""
        self._ending = (status, error)

    async def _end(self) -> None:
        status, error = self._ending or ("error", "internal error: the run stopped without a status")
        if status != "cancelled":
            try:
                status, error = await self.hooks.terminal(status, error)
            except asyncio.CancelledError:
                status, error = "cancelled", None
            except Exception as exc:  # a bug in lev_nb must still leave a readable record
                self.rec.emit(ev.Warning_(self.run_id, self.stage.name, message=traceback.format_exc()))
                status, error = "error", f"internal error: {type(exc).__name__}: {exc}"
        self._record_end(status, error)

    def _record_end(self, status: str, error: str | None = None) -> None:
        flags = self.meta.flags
        self.meta.status = status
        if error is not None:
            self.meta.error = error
        flags.produced_output = self.final_output is not None
        flags.empty_output = (
            flags.modified_file_count == 0
            and not flags.produced_output
            and not flags.no_output_tools
        )
        try:
            self.rec.save(final=True)
        except OSError:
            pass
        self.rec.emit(
            ev.Completed(
                self.run_id,
                self.stage.name,
                status=status,
                error=error,
                produced_output=flags.produced_output,
                final_output=self.final_output.descriptor() if self.final_output else None,
            )
        )

    def _notify_complete(self) -> None:
        if self.on_complete is None:
            return
        try:
            self.on_complete(self.handle)
        except Exception as exc:
            self.rec.emit(
                ev.Warning_(self.run_id, self.stage.name, message=f"on_complete callback failed: {exc!r}")
            )

    handle: Any = None  # set by start_run to the public Run handle

    # ------------------------------------------------------------------ the loop
    async def _loop(self) -> None:
        while True:
            if self._enter_hook_pending:
                self._enter_hook_pending = False
                await self.hooks.stage_enter()
            outcome = self._watchdogs()
            if outcome is None:
                response = await self._infer_stage()
                if isinstance(response, Outcome):
                    outcome = response
                elif response.tool_calls:
                    await self.tools.run_batch(response)
                    if self._pending_failure is not None:
                        outcome, self._pending_failure = Outcome("error", self._pending_failure), None
                    elif self._pending_merge is not None:
                        target, self._pending_merge = self._pending_merge, None
                        if target:
                            await self.hooks.stage_exit()
                            self._move(target, "fan_out", "direct", "the workers finished")
                            continue
                        outcome = None  # no merge stage: resolve the fan-out stage's own edges
                    else:
                        continue
                    await self.hooks.stage_exit()
                    if await self._resolve(outcome):
                        return
                    continue
                elif self._nudge_text_only(response):
                    continue
            if self._exit_hold(outcome):
                continue
            await self.hooks.stage_exit()
            if await self._resolve(outcome):
                return

    def _watchdogs(self) -> Outcome | None:
        stage, progress = self.stage, self.progress
        if iteration_cap_hit(stage, progress):
            cap = stage.max_iterations or 0
            self.meta.flags.max_iterations_hit += 1
            self.rec.emit(ev.MaxIterationsHit(self.run_id, stage.name, limit=cap))
            self.ctx.note("error_report", iteration_cap_note(stage.name, cap))
            return Outcome("max_iterations")
        if not progress.stuck_fired:
            edge = find_conditioned(self.plan, stage, self.visits, "stuck")
            if edge is not None:
                reason = stuck_reason(edge, progress)
                if reason is not None:
                    progress.stuck_fired = True
                    self.rec.emit(ev.Stuck(self.run_id, stage.name, reason=reason))
                    self.ctx.note("stuck_report", stuck_note(stage.name, reason))
                    return Outcome("stuck", reason)
        if progress.iterations and progress.iterations % WORKSPACE_CHECK_INTERVAL == 0:
            if not self.workdir.is_dir():
                self.meta.flags.workspace_lost = True
                return Outcome("error", f"the working directory '{self.workdir}' is no longer accessible")
        return None

    # ------------------------------------------------------------------ model calls
    def _provider_for(self, stage: StagePlan) -> tuple[Provider, str, str]:
        from lev_nb.providers.resolve import ModelOverride, provider_for

        choice = stage.models[0] if stage.models else None
        provider_name = choice.provider if choice else "anthropic"
        model_name = choice.model if choice else "claude-sonnet-4-6"
        if isinstance(self.provider, ModelOverride):
            return self.provider, self.provider.provider, self.provider.model
        if self.provider is not None:
            return self.provider, getattr(self.provider, "name", "custom"), model_name
        return provider_for(provider_name, model_name), provider_name, model_name

    def _entry_model_label(self) -> str:
        stage = self.plan.stage(self.entry)
        if self.provider is not None:
            return getattr(self.provider, "name", "custom")
        if stage.models:
            return f"{stage.models[0].provider}/{stage.models[0].model}"
        return "anthropic/claude-sonnet-4-6"

    async def _complete(self, request: ModelRequest, provider: Provider) -> ModelResponse:
        """One model call with the run's retry policy for transient errors."""
        attempt = 0
        while True:
            attempt += 1
            try:
                if request.timeout_s:
                    return await asyncio.wait_for(provider.complete(request), request.timeout_s)
                return await provider.complete(request)
            except asyncio.TimeoutError:
                waited = f" within {request.timeout_s:g} s" if request.timeout_s else " in time"
                error = ProviderError("transport", f"the model did not answer{waited}")
            except ProviderError as exc:
                error = exc
            except Exception as exc:  # a broken provider is a failed model call, not a crash of lev_nb
                name = getattr(provider, "name", type(provider).__name__)
                error = ProviderError("api", f"the '{name}' provider failed: {type(exc).__name__}: {exc}")
            if not error.transient or attempt >= self.retry.max_attempts:
                raise error
            delay = min(self.retry.base_delay_s * 2 ** (attempt - 1), self.retry.max_delay_s)
            if error.retry_after is not None:
                delay = min(max(delay, error.retry_after), self.retry.max_delay_s)
            self.rec.emit(
                ev.Warning_(
                    self.run_id,
                    self.stage.name,
                    message=f"model call failed ({error.message}); retry {attempt} of "
                    f"{self.retry.max_attempts - 1} in {delay:g} s",
                )
            )
            await asyncio.sleep(delay)

    def _request(self, purpose: str, **overrides: Any) -> tuple[ModelRequest, Provider]:
        stage = self.stage
        provider, provider_name, model_name = self._provider_for(stage)
        system, messages = self.ctx.assemble()
        params = dict(stage.parameters)
        max_tokens = int(params.pop("max_tokens", params.pop("max_output_tokens", 4096)) or 4096)
        temperature = params.pop("temperature", 0.7)
        spec = self.tools.output_spec(stage)
        request = ModelRequest(
            provider=provider_name,
            model=model_name,
            system=system,
            messages=messages,
            tools=self.tools.specs(stage) if purpose == "stage" else [],
            max_tokens=max_tokens,
            temperature=temperature,
            purpose=purpose,  # type: ignore[arg-type]
            stage=stage.name,
            output_format=spec.format if spec else None,
            extra=params,
            timeout_s=stage.request_timeout_secs,
        )
        for key, value in overrides.items():
            setattr(request, key, value)
        return request, provider

    async def _infer_stage(self) -> ModelResponse | Outcome:
        try:
            request, provider = self._request("stage")
            if await self.hooks.before_inference():  # it rewrote regions: assemble again
                request, provider = self._request("stage")
        except ProviderError as exc:
            return self._inference_failed(exc.message)
        try:
            response = await self._complete(request, provider)
        except ProviderError as exc:
            self._record_call(request, None, error=exc.message)
            return self._inference_failed(exc.message)
        self.meta.iteration += 1
        self.progress.iterations += 1
        self._record_call(request, response)
        await self.hooks.after_inference(response)
        await self.hooks.tool_calls(response)
        return response

    def _inference_failed(self, message: str) -> Outcome:
        self.rec.emit(ev.StageError(self.run_id, self.stage.name, message=message))
        return Outcome("error", f"the model call failed in stage '{self.stage.name}': {message}")

    def _record_call(
        self, request: ModelRequest, response: ModelResponse | None, error: str | None = None
    ) -> None:
        usage = response.usage if response else None
        if usage is not None:
            self.meta.prompt_tokens += usage.prompt_tokens
            self.meta.completion_tokens += usage.completion_tokens
            self.meta.cached_tokens += usage.cached_tokens
            self.meta.cache_write_tokens += usage.cache_write_tokens
        self.rec.emit(
            ev.ModelCall(
                self.run_id,
                self.stage.name,
                purpose=request.purpose,
                provider=request.provider,
                model=request.model,
                iteration=self.meta.iteration,
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                tool_calls=len(response.tool_calls) if response else 0,
                text=(response.text[:500] if response else ""),
                error=error,
            )
        )
        # The transcript keeps what is new in each request (the system prompt when it changed,
        # the messages after the model's last turn) so it grows with the run, not quadratically.
        system_key = hash(tuple(request.system))
        new_system = system_key != self._last_system_key
        self._last_system_key = system_key
        tail = _new_messages(request.messages)
        self.rec.transcript(
            {
                "stage": self.stage.name,
                "purpose": request.purpose,
                "provider": request.provider,
                "model": request.model,
                "iteration": self.meta.iteration,
                "system": request.system if new_system else None,
                "messages": [_message_json(m) for m in tail],
                "message_count": len(request.messages),
                "tools": [t.name for t in request.tools],
                "response": None
                if response is None
                else {
                    "text": response.text,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments}
                        for c in response.tool_calls
                    ],
                    "finish_reason": response.finish_reason,
                    "usage": dict(response.usage.__dict__),
                },
                "error": error,
            }
        )
        self.rec.save()

    # ------------------------------------------------------------------ stages
    def _enter_stage(self, name: str, from_stage: str | None) -> None:
        stage = self.plan.stage(name)
        self.stage = stage
        self.visits[name] = self.visits.get(name, 0) + 1
        self.progress = StageProgress()
        self.ctx.enter_stage(stage)
        prompt = stage.system_prompt or ""
        spec = self.tools.output_spec(stage)
        if stage.require_output and spec is not None and not spec.is_empty():
            prompt = (prompt + "\n\n" if prompt else "") + OWED_OUTPUT_PROMPT + "\n\n" + describe_spec(spec)
        elif stage.require_output:
            prompt = (prompt + "\n\n" if prompt else "") + OWED_OUTPUT_PROMPT
        try:
            self.ctx.set_stage_instructions(stage.name, prompt or None)
        except StageInstructionsError as err:
            raise RunFailure(str(err)) from err
        for edge in stage.transitions or ():
            region = edge.gate.require_region_updated if edge.gate else None
            if region and self.ctx.has_region(region):
                self.progress.digests[region] = self.ctx.digest(region)
        self.meta.current_stage = name
        self.meta.stage_index = stage.index
        self.meta.stage_history.append(name)
        self.rec.emit(ev.StageEntered(self.run_id, name, visit=self.visits[name], from_stage=from_stage))
        self.rec.save(force=True)
        self._enter_hook_pending = True  # on_stage_enter fires before the stage's first inference

    # ------------------------------------------------------------------ fan-out
    async def fan_out(self, call: ToolCall) -> str:
        """Answer a fan_out call by running its workers (see :mod:`lev_nb.engine.pipeline.fanout`)."""
        from lev_nb.engine.pipeline.fanout import run_fan_out

        return await run_fan_out(self, call)

    def spawn_child(self, plan: RunPlan, entry: str, task: str) -> Runner:
        """A worker run of ``plan`` entered at ``entry``, sharing this run's model and workdir."""
        child = Runner(
            plan,
            task=task,
            provider=self.provider,
            workdir=self.workdir,
            output_request=self.output_request,
            home=self.store.run_dir.parent.parent,
            retry=self.retry,
            approver=self.approver,
            validators=self.validators,
            entry=entry,
            parent=self,
            hook_scripts=self.hook_scripts if plan is self.plan else None,
            region_scripts=self.region_scripts if plan is self.plan else None,
        )
        self.meta.children.append(child.run_id)
        return child

    def after_fan_out(self, merge_stage: str | None) -> None:
        """After this batch, move to ``merge_stage`` (or resolve the stage's edges when None)."""
        self._pending_merge = merge_stage or ""

    def fail_after_batch(self, message: str) -> None:
        """After this batch, fail the stage with ``message`` (its error edge may catch it)."""
        self._pending_failure = message


def _new_messages(messages: list[Any]) -> list[Any]:
    """The messages after the last assistant message (everything when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            return messages[index + 1 :]
    return list(messages)


def _message_json(message: Any) -> dict[str, Any]:
    content = message.content
    if isinstance(content, str):
        return {"role": message.role, "content": content}
    blocks = []
    for block in content:
        data = dict(block.__dict__)
        data["type"] = type(block).__name__
        blocks.append(data)
    return {"role": message.role, "content": blocks}


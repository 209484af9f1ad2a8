"""Model calls of one run: which provider and model a stage uses, the request built from the
context, the retry loop for transient errors, and the record of every call (the ``model_call``
event, token usage on meta.json, the transcript entry) (spec/runtime.md §2.2, §3.2, §13.2-13.3).

The run loop holds one :class:`Inference` and asks it for a stage turn (:meth:`Inference.stage_turn`)
or, from the transitions, for a routing answer (:meth:`Inference.routing_turn`). A failed call is
returned as an error :class:`~lev_nb.engine.state.Outcome`, never raised.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lev_nb.blueprint.constants import DEFAULT_MODEL, DEFAULT_PROVIDER
from lev_nb.engine import events as ev
from lev_nb.engine.state import Outcome
from lev_nb.messages import ModelRequest, ModelResponse, StageDuties
from lev_nb.providers.base import Provider, ProviderError

if TYPE_CHECKING:
    from lev_nb.engine.pipeline.hooks import RunHooks
    from lev_nb.engine.pipeline.tools import StageTools
    from lev_nb.engine.plan.types import StagePlan
    from lev_nb.engine.state import RunState
    from lev_nb.settings import Settings

DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = 0.7
ROUTING_MAX_TOKENS = 256
RESPONSE_TEXT_IN_EVENT = 500


@dataclass(frozen=True)
class RetryPolicy:
    """How often a transient model error is retried, and how long to wait in between."""

    max_attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0


def default_model(settings: Settings) -> tuple[str, str]:
    """The ``(provider, model)`` of a stage that names none: the configuration's, else the runtime's."""
    return settings.default_provider or DEFAULT_PROVIDER, settings.default_model or DEFAULT_MODEL


def retry_policy(settings: Settings) -> RetryPolicy:
    """The retry policy ``[limits]`` asks for (inference_retry_attempts, inference_retry_base_ms)."""
    limits = settings.limits
    return RetryPolicy(max_attempts=limits.inference_retry_attempts, base_delay_s=limits.inference_retry_base_ms / 1000)


@dataclass(frozen=True)
class ModelPick:
    """The model a stage talks to: ``provider``/``model``, and why it is not the stage's first choice
    (``note``), or why none is allowed (``refusal``)."""

    provider: str
    model: str
    note: str | None = None
    refusal: str | None = None


def pick_model(stage: StagePlan, settings: Settings) -> ModelPick:
    """The stage's model as spec/blueprint.md §4.1 orders the choice.

    The stage's list is tried in order, the configured ``default_provider``'s entries first; the
    first whose provider lev_nb can reach wins. A stage that names no model, or none reachable, runs
    on the configured default, unless it sets ``allow_user_default = false``.
    """
    from lev_nb.providers.resolve import is_registered

    preferred = settings.default_provider
    candidates = sorted(stage.models, key=lambda c: c.provider != preferred)
    for choice in candidates:
        if is_registered(choice.provider):
            note = None if choice == stage.models[0] else f"using {choice.provider}/{choice.model} from the stage's model list"
            return ModelPick(choice.provider, choice.model, note)
    provider, model = default_model(settings)
    if not stage.models:
        return ModelPick(provider, model)
    named = ", ".join(f"{c.provider}/{c.model}" for c in stage.models)
    if not stage.allow_user_default:
        return ModelPick(provider, model, refusal=(
            f"stage '{stage.name}' allows only {named}, and lev_nb cannot reach that provider "
            "(allow_user_default = false)"))
    return ModelPick(provider, model, note=(
        f"lev_nb cannot reach the provider of {named}, so stage '{stage.name}' runs on the default "
        f"{provider}/{model} (set allow_user_default = false to fail instead)"))


def model_label(provider: Provider | None, stage: StagePlan, settings: Settings) -> str:
    """``provider/model`` that ``stage`` talks to, without building a provider.

    A provider given at launch wins (its ``name``; a ``provider/model`` override names both);
    otherwise the stage's pick (:func:`pick_model`).
    """
    if provider is not None:
        return getattr(provider, "name", "custom")
    pick = pick_model(stage, settings)
    return f"{pick.provider}/{pick.model}"


class Inference:
    """Makes the model calls of one run.

    Receives the run state, the provider given at launch (None: each stage's own model block), the
    retry policy, the stage's tools (for the advertised specs and the output format) and the
    stage hooks (``before_inference``, ``after_inference``, ``on_tool_call``).
    """

    def __init__(
        self,
        state: RunState,
        *,
        provider: Provider | None,
        retry: RetryPolicy,
        tools: StageTools,
        hooks: RunHooks,
    ) -> None:
        self.state = state
        self.provider = provider
        self.retry = retry
        self.tools = tools
        self.hooks = hooks
        self._last_system_key: int | None = None
        self._noted: set[str] = set()  # stages whose model pick was explained already

    # -- the two kinds of call ----------------------------------------------------------------
    async def stage_turn(self) -> ModelResponse | Outcome:
        """One inference of the current stage, with its hooks; counts an iteration on success."""
        state = self.state
        try:
            request, provider = self._request("stage")
            if await self.hooks.before_inference():  # it rewrote regions: assemble again
                request, provider = self._request("stage")
        except ProviderError as exc:
            return self.failed(exc.message)
        try:
            response = await self._complete(request, provider)
        except ProviderError as exc:
            self._record(request, None, error=exc.message)
            return self.failed(exc.message)
        state.meta.iteration += 1
        state.progress.iterations += 1
        self._record(request, response)
        await self.hooks.after_inference(response)
        await self.hooks.tool_calls(response)
        return response

    async def routing_turn(self, targets: list[str], allow_done: bool) -> ModelResponse | Outcome:
        """Ask the model which of ``targets`` comes next (the routing prompt is already in context)."""
        try:
            request, provider = self._request(
                "routing",
                choices=targets,
                allow_done=allow_done,
                temperature=0.0,
                max_tokens=ROUTING_MAX_TOKENS,
            )
        except ProviderError as exc:
            return self.failed(exc.message)
        try:
            response = await self._complete(request, provider)
        except ProviderError as exc:
            self._record(request, None, error=exc.message)
            return self.failed(exc.message)
        self._record(request, response)
        return response

    def failed(self, message: str) -> Outcome:
        """Record a failed model call of the current stage; the Outcome its error edge may catch."""
        stage = self.state.stage.name
        self.state.rec.emit(ev.StageError(self.state.run_id, stage, message=message))
        return Outcome("error", f"the model call failed in stage '{stage}': {message}")

    # -- building and sending -----------------------------------------------------------------
    def _provider_for(self, stage: StagePlan) -> tuple[Provider, str, str]:
        from lev_nb.providers.resolve import ModelOverride, provider_for

        if isinstance(self.provider, ModelOverride):
            return self.provider, self.provider.provider, self.provider.model
        pick = pick_model(stage, self.state.settings)
        if self.provider is not None:
            return self.provider, getattr(self.provider, "name", "custom"), pick.model
        if pick.refusal is not None:
            raise ProviderError("api", pick.refusal)
        if pick.note is not None and stage.name not in self._noted:
            self._noted.add(stage.name)
            self.state.warn(pick.note)
        return provider_for(pick.provider, pick.model, self.state.settings), pick.provider, pick.model

    def _request(self, purpose: str, **overrides: Any) -> tuple[ModelRequest, Provider]:
        stage = self.state.stage
        provider, provider_name, model_name = self._provider_for(stage)
        system, messages = self.state.ctx.assemble()
        params = dict(stage.parameters)
        max_tokens = int(
            params.pop("max_tokens", params.pop("max_output_tokens", DEFAULT_MAX_TOKENS)) or DEFAULT_MAX_TOKENS
        )
        temperature = params.pop("temperature", DEFAULT_TEMPERATURE)
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
            timeout_s=stage.request_timeout_secs or self.state.settings.limits.request_timeout_secs,
        )
        if purpose == "stage":
            request.duties = self._duties(stage)
        for key, value in overrides.items():
            setattr(request, key, value)
        return request, provider

    def _duties(self, stage: StagePlan) -> StageDuties:
        """What the stage owes at this turn (a hint for stand-in models such as the mock)."""
        from lev_nb.engine.pipeline.gates import stage_duties
        from lev_nb.engine.pipeline.holds import CONTEXT_WRITERS, unmet_required_regions

        state = self.state
        required = unmet_required_regions(state) if set(stage.tools) & CONTEXT_WRITERS else []
        duties = stage_duties(stage, state.progress, state.ctx, required)
        enabled, maximum, _ = stage.nudge.resolve(state.settings.nudge)
        progress = state.progress
        duties.use_a_tool = enabled and progress.total_tool_calls == 0 and progress.text_only_nudges < maximum
        return duties

    async def _complete(self, request: ModelRequest, provider: Provider) -> ModelResponse:
        """One model call with the run's retry policy for transient errors."""
        retry = self.retry
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
            if not error.transient or attempt >= retry.max_attempts:
                raise error
            delay = min(retry.base_delay_s * 2 ** (attempt - 1), retry.max_delay_s)
            if error.retry_after is not None:
                delay = min(max(delay, error.retry_after), retry.max_delay_s)
            self.state.warn(
                f"model call failed ({error.message}); retry {attempt} of "
                f"{retry.max_attempts - 1} in {delay:g} s"
            )
            await asyncio.sleep(delay)

    # -- the record of a call -----------------------------------------------------------------
    def _record(self, request: ModelRequest, response: ModelResponse | None, error: str | None = None) -> None:
        """The call's event, its token usage on meta.json, and its transcript entry."""
        state = self.state
        meta = state.meta
        usage = response.usage if response else None
        if usage is not None:
            meta.prompt_tokens += usage.prompt_tokens
            meta.completion_tokens += usage.completion_tokens
            meta.cached_tokens += usage.cached_tokens
            meta.cache_write_tokens += usage.cache_write_tokens
        state.rec.emit(
            ev.ModelCall(
                state.run_id,
                state.stage.name,
                purpose=request.purpose,
                provider=request.provider,
                model=request.model,
                iteration=meta.iteration,
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                tool_calls=len(response.tool_calls) if response else 0,
                text=(response.text[:RESPONSE_TEXT_IN_EVENT] if response else ""),
                error=error,
            )
        )
        state.rec.transcript(self._transcript_entry(request, response, error))
        state.rec.save()

    def _transcript_entry(
        self, request: ModelRequest, response: ModelResponse | None, error: str | None
    ) -> dict[str, Any]:
        # The transcript keeps what is new in each request (the system prompt when it changed,
        # the messages after the model's last turn) so it grows with the run, not quadratically.
        system_key = hash(tuple(request.system))
        new_system = system_key != self._last_system_key
        self._last_system_key = system_key
        tail = _new_messages(request.messages)
        return {
            "stage": self.state.stage.name,
            "purpose": request.purpose,
            "provider": request.provider,
            "model": request.model,
            "iteration": self.state.meta.iteration,
            "system": request.system if new_system else None,
            "messages": [_message_json(m) for m in tail],
            "message_count": len(request.messages),
            "tools": [t.name for t in request.tools],
            "response": None
            if response is None
            else {
                "text": response.text,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
                ],
                "finish_reason": response.finish_reason,
                "usage": dict(response.usage.__dict__),
            },
            "error": error,
        }


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

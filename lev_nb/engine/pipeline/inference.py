"""Model calls of one run: which provider and model a stage uses (its list, the default, then
``[providers] fallback_order``), the request built from the context, each model's circuit breaker,
the retry loop for transient errors, the journal entry of every call's outcome (replayed instead
of asked when a run is resumed), the pause when no model is left for credits or the network, and
the record of every call (the ``model_call`` event, token usage on meta.json, the transcript
entry) (docs/runs.md#the-run-loop).

The run loop holds one :class:`Inference` and asks it for a stage turn (:meth:`Inference.stage_turn`)
or, from the transitions, for a routing answer (:meth:`Inference.routing_turn`). A failed call is
returned as an error :class:`~lev_nb.engine.state.Outcome`, never raised.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lev_nb.engine import events as ev
from lev_nb.engine.context.assembly import flag_cache_breakpoint
from lev_nb.engine.context.hints import hint_blocks
# The choice of a stage's model has its own module (lev validate reads it without this one).
from lev_nb.engine.model_choice import ModelPick, default_model, model_candidates, pick_model, starting_pick  # noqa: F401
from lev_nb.engine.pipeline.deadlines import call_deadline
from lev_nb.engine.pipeline.gates import stage_duties
from lev_nb.engine.pipeline.holds import CONTEXT_WRITERS, unmet_required_regions
from lev_nb.engine.pipeline.pools import inference_slots
from lev_nb.engine.run_warnings import DEFAULT_CODE, WARNING_CODES
from lev_nb.engine.state import Outcome, RunPaused
from lev_nb.errors import CALLEE_ERRORS
from lev_nb.messages import ModelRequest, ModelResponse, StageDuties, request_text
from lev_nb.providers.base import Provider, ProviderError, Replayable, call_complete
from lev_nb.providers.circuit import CIRCUITS
from lev_nb.providers.pricing import call_cost, price_for
from lev_nb.providers.ratelimit import RATE_LIMITS, limit_for
from lev_nb.providers.resolve import ModelOverride, provider_for
from lev_nb.records import record
from lev_nb.text import estimate_tokens

if TYPE_CHECKING:
    from lev_nb.engine.journal import Journal
    from lev_nb.engine.pipeline.hooks import RunHooks
    from lev_nb.engine.pipeline.tools import StageTools
    from lev_nb.engine.plan.types import StagePlan
    from lev_nb.engine.state import RunState
    from lev_nb.settings import Settings
    from lev_nb.settings.model import RateLimit

DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = 0.7
ROUTING_MAX_TOKENS = 256
RESPONSE_TEXT_IN_EVENT = 500
# Streamed text is gathered into one model_text event at most this often (and at the call's end).
TEXT_EVENT_INTERVAL_S = 0.1
TEXT_EVENT_MAX_CHARS = 4000
# How often a stalled run looks whether a model's circuit closed (another run's probe may close it).
STALL_POLL_S = 1.0


def _tell_replayed(journal: Journal, provider: Provider, request: ModelRequest) -> None:
    """A provider that counts its answers (a script) counts one taken from the journal too, when
    it is the model the run started with (see Resumption.same_model)."""
    if journal.tells_provider and isinstance(provider, Replayable):
        provider.replayed(request)


class TextStream:
    """Turns a provider's text deltas into throttled ``model_text`` events for one call attempt.

    A provider may call :meth:`push` from the engine loop (the Anthropic SDK) or from a worker
    thread (a Rhai provider script); from another thread the delta is handed to the loop, so
    events are always emitted on the engine loop and in order.
    """

    def __init__(self, state: RunState, purpose: str, attempt: int) -> None:
        self.state = state
        self.purpose = purpose
        self.attempt = attempt
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._buffer: list[str] = []
        self._size = 0
        self._last = time.monotonic()
        self.handed_over = False  # a delta came from another thread (it lands on the loop later)

    def push(self, text: str) -> None:
        """Take one delta (any thread)."""
        if threading.get_ident() != self._thread:
            self.handed_over = True
            self._loop.call_soon_threadsafe(self._take, text)
        else:
            self._take(text)

    def _take(self, text: str) -> None:
        if not text:
            return
        self._buffer.append(text)
        self._size += len(text)
        if self._size >= TEXT_EVENT_MAX_CHARS or time.monotonic() - self._last >= TEXT_EVENT_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Emit what is buffered as one event (on the engine loop)."""
        if not self._buffer:
            return
        text, self._buffer, self._size = "".join(self._buffer), [], 0
        self._last = time.monotonic()
        state = self.state
        state.rec.emit(ev.ModelText(state.run_id, state.stage.name, text=text, purpose=self.purpose,
                                    attempt=self.attempt))


@record
class RetryPolicy:
    """How often a transient model error is retried, and how long to wait in between."""

    max_attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0



# An unusable model with no fallback left pauses the run: the account or the network needs a
# person, and `lev resume` continues it from its record afterwards
# (docs/providers.md#fallback-and-circuit-breakers).
NEEDS_SETUP: dict[str, tuple[str, str, str]] = {
    "credits": ("credits", "is out of credits or quota", "top up the account or name another model in the stage's list"),
    "unreachable": ("providers", "could not be reached after its retries",
                    "check the network and the provider's base_url, or name another model in the stage's list"),
}


class CircuitRefused(ProviderError):
    """A call refused by its model's open circuit, before any request was sent."""


class _CallFailed(Exception):
    """No model could answer a call; ``error`` is the last ProviderError."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(error.message)
        self.error = error


def _with_suggestion(error: ProviderError, label: str) -> ProviderError:
    """An unknown-model error that names the catalogued model it is likely a typo of."""
    from lev_nb.providers.catalogue import closest_model

    provider, _, model = label.partition("/")
    near = closest_model(provider, model)
    if near is None:
        return error
    return ProviderError(error.kind, f"{error.message} (did you mean {provider}/{near}?)", error.retry_after)


def retry_policy(settings: Settings) -> RetryPolicy:
    """The retry policy ``[limits]`` asks for (inference_retry_attempts, inference_retry_base_ms)."""
    limits = settings.limits
    return RetryPolicy(max_attempts=limits.inference_retry_attempts, base_delay_s=limits.inference_retry_base_ms / 1000)


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
        self._last_request_system: int | None = None  # for the assembler's cache flag
        self._noted: set[str] = set()  # stages whose model pick was explained already
        # The stage and the run's settings never change, so a stage's starting model and candidates
        # (one model_candidates answer) and the provider of each model are worked out once per run
        # (each took file lookups on every call).
        self._models: dict[str, tuple[ModelPick, list[ModelPick]]] = {}  # stage -> (pick_model, candidates)
        self._providers: dict[tuple[str, str], Provider] = {}  # provider/model -> the provider
        self._rate_limits: dict[str, RateLimit | None] = {}  # provider -> its rate limit (fixed for the run)
        self._owes: dict[str, tuple[bool, bool]] = {}  # stage -> (it writes context, it has gates)
        self._unusable: dict[tuple[str, str], str] = {}  # provider/model -> why it cannot be used
        # stage -> the answer of _provider_for while _unusable stays as it was (cleared when it changes)
        self._resolved: dict[str, tuple[Provider, str, str]] = {}
        self._circuits_told: set[str] = set()  # models whose open circuit this run reported
        self._last_model = ""  # provider/model of the last call (named when the run pauses)
        self._circuit_refused: set[str] = set()  # models whose open circuit refused this run's call
        self._sent_at: float | None = None  # when the current model call was sent (time.time())
        # The last stage or routing request and the sizes of the regions it was built from, for
        # its transcript entry (what `lev context` shows); a compaction request has its own text.
        # (the request, its regions' sizes, the hash of its system prompt)
        self._layout: tuple[ModelRequest, list[tuple[str, str, int, int, int | None]], int] | None = None
        self._rate_told: set[str] = set()  # providers whose rate-limit wait this run reported

    # -- the two kinds of call ----------------------------------------------------------------
    async def stage_turn(self) -> ModelResponse | Outcome:
        """One inference of the current stage, with its hooks; counts an iteration on success."""
        state = self.state
        try:
            self._provider_for(state.stage)  # a stage no model may serve fails before its hooks run
        except ProviderError as exc:
            return self._failure(exc)
        try:
            await self.hooks.before_inference()
            request, response = await self._call("stage")
        except _CallFailed as failure:
            return self._failure(failure.error)
        state.meta.iteration += 1
        state.progress.iterations += 1
        self._record(request, response)
        await self.hooks.after_inference(response)
        await self.hooks.tool_calls(response)
        return response

    async def routing_turn(self, targets: list[str], allow_done: bool) -> ModelResponse | Outcome:
        """Ask the model which of ``targets`` comes next (the routing prompt is already in context)."""
        try:
            request, response = await self._call(
                "routing", choices=targets, allow_done=allow_done, temperature=0.0, max_tokens=ROUTING_MAX_TOKENS,
            )
        except _CallFailed as failure:
            return self._failure(failure.error)
        self._record(request, response)
        return response

    async def _call(self, purpose: str, **overrides: Any) -> tuple[ModelRequest, ModelResponse]:
        """Build the request and send it; on an unusable model, fall back to the stage's next one
        (a ``model_fallback`` event says why) and send again. Raises _CallFailed."""
        while True:
            try:
                request, provider = self._request(purpose, await self._assemble(), **overrides)
            except ProviderError as exc:
                raise _CallFailed(exc) from None
            try:
                response = await self._complete(request, provider)
            except ProviderError as exc:
                self._record(request, None, error=exc.message)
                if self._fall_back(request, exc):
                    continue
                if not await self._stall(request, exc):
                    raise _CallFailed(exc) from None
                continue
            self._tell(response)
            return request, response

    def _tell(self, response: ModelResponse) -> None:
        """Tell the person what the provider said of this call (it answered, not as asked)."""
        for code, message in response.warnings:
            self.state.warn(message, code if code in WARNING_CODES else DEFAULT_CODE)

    async def _stall(self, request: ModelRequest, error: ProviderError) -> bool:
        """Every model the stage may use was refused by its open circuit: wait up to ``[limits]
        stall_timeout_secs`` for one to close (another run's probe, or the cool-down ending), so a
        short outage does not pause the run (docs/providers.md#fallback-and-circuit-breakers). A
        ``stalled`` event says the run
        waits and why; a cancel ends the wait. True when a model may be called again (the call is
        made again), False when the wait is over or not for this error (the run then pauses or
        takes its error edge)."""
        key = f"{request.provider}/{request.model}"
        budget = float(self.state.settings.limits.stall_timeout_secs)
        if not isinstance(error, CircuitRefused) or budget <= 0:
            return False
        if self.provider is not None:
            models = [key]
        else:
            picks, _ = model_candidates(self.state.stage, self.state.settings)
            models = [f"{p.provider}/{p.model}" for p in picks]
        if any(m not in self._circuit_refused for m in models):
            return False  # a model is unusable for another reason than its circuit
        threshold = self.state.settings.providers.provider_failures_before_open
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        state = self.state
        # meta.json says what the run waits on meanwhile (lev ps shows it), on disk before the event.
        state.meta.waiting_on = {"reason": "stalled", "models": models, "wait_s": budget}
        state.rec.save(force=True)
        await state.rec.flushed()
        state.rec.emit(ev.Stalled(
            state.run_id, state.stage.name, models=models, wait_s=budget,
            reason=f"every model this stage may use fails fast for now ({error.message}); waiting up to "
                   f"{budget:g} s for one to be callable again before pausing",
        ))
        try:
            while True:
                ready = [m for m in models if CIRCUITS.closed_in(m, threshold) <= 0]
                if ready:
                    for model in models:
                        self._circuit_refused.discard(model)
                        provider, _, name = model.partition("/")
                        self._unusable.pop((provider, name), None)
                    self._resolved.clear()
                    return True
                left = deadline - loop.time()
                if left <= 0:
                    return False
                soonest = min(CIRCUITS.closed_in(m, threshold) for m in models)
                await asyncio.sleep(min(left, soonest, STALL_POLL_S))  # a cancel ends the wait here
        finally:
            state.meta.waiting_on = None
            state.rec.save(force=True)

    def _fall_back(self, request: ModelRequest, error: ProviderError) -> bool:
        """Mark the request's model unusable and switch to the next candidate; False when the
        error is not about the model, the model was fixed at launch, or no candidate is left."""
        reason = error.unusable_reason
        if reason is None or self.provider is not None:
            return False
        self._unusable[(request.provider, request.model)] = reason
        self._resolved.clear()
        nxt = self._usable_pick(self.state.stage)
        if nxt is None:
            return False
        state = self.state
        old, new = f"{request.provider}/{request.model}", f"{nxt.provider}/{nxt.model}"
        state.rec.emit(ev.ModelFallback(state.run_id, state.stage.name, from_model=old, to_model=new,
                                        reason=f"{reason}: {error.message}"))
        state.warn(f"stage '{state.stage.name}' switched from {old} to {new}: {reason}: {error.message}", "model-fallback")
        return True

    def _failure(self, error: ProviderError) -> Outcome:
        """The Outcome of a call no model could serve: the error edge may catch it, except when
        the account or the network needs setting up, which pauses the run (RunPaused)."""
        reason = error.unusable_reason
        if error.kind == "unknown_model" and self._last_model:
            error = _with_suggestion(error, self._last_model)
        if reason in NEEDS_SETUP:
            state = self.state
            stage = state.stage.name
            blocker, what, remedy = NEEDS_SETUP[reason]
            state.rec.emit(ev.StageError(state.run_id, stage, message=error.message))
            model = f" {self._last_model}" if self._last_model else ""
            raise RunPaused(
                f"paused in stage '{stage}': the model{model} {what} ({error.message}) and no other model in the "
                f"stage's list can take over. To continue: {remedy}, then `lev resume {state.run_id}` "
                f"(or lev_nb.resume(\"{state.run_id}\")).",
                blocker, remedy,
            )
        return self.failed(error.message)

    def failed(self, message: str) -> Outcome:
        """Record a failed model call of the current stage; the Outcome its error edge may catch."""
        stage = self.state.stage.name
        self.state.rec.emit(ev.StageError(self.state.run_id, stage, message=message))
        return Outcome("error", f"the model call failed in stage '{stage}': {message}")

    # -- building and sending -----------------------------------------------------------------
    def _stage_models(self, stage: StagePlan) -> tuple[ModelPick, list[ModelPick]]:
        """The stage's starting model (:func:`pick_model`) and its candidates, asked once."""
        known = self._models.get(stage.name)
        if known is None:
            settings = self.state.settings
            picks, refusal = model_candidates(stage, settings)
            known = self._models[stage.name] = (starting_pick(stage, settings, picks, refusal), picks)
        return known

    def _usable_pick(self, stage: StagePlan) -> ModelPick | None:
        """The stage's first candidate not found unusable in this run."""
        return next((p for p in self._stage_models(stage)[1] if (p.provider, p.model) not in self._unusable), None)

    def _provider_for(self, stage: StagePlan) -> tuple[Provider, str, str]:
        """The provider for ``stage``'s next call, its name and the model: asked twice a call,
        worked out once per stage while no model has been found unusable or usable again."""
        if isinstance(self.provider, ModelOverride):
            return self.provider, self.provider.provider, self.provider.model
        kept = self._resolved.get(stage.name)
        if kept is not None:
            return kept
        pick = self._stage_models(stage)[0]
        if self.provider is not None:
            return self.provider, getattr(self.provider, "name", "custom"), pick.model
        if pick.refusal is not None:
            raise ProviderError("api", pick.refusal)
        usable = self._usable_pick(stage)
        if usable is None:
            reasons = ", ".join(f"{p}/{m}: {r}" for (p, m), r in self._unusable.items())
            raise ProviderError("api", f"no model of stage '{stage.name}' is usable ({reasons})")
        if usable != pick:
            pick = usable
        elif pick.note is not None and stage.name not in self._noted:
            self._noted.add(stage.name)
            self.state.warn(pick.note, "model-fallback")
        key = (pick.provider, pick.model)
        provider = self._providers.get(key)
        if provider is None:
            provider = self._providers[key] = provider_for(pick.provider, pick.model, self.state.settings)
        resolved = self._resolved[stage.name] = (provider, pick.provider, pick.model)
        return resolved

    def _offered_names(self, stage: StagePlan) -> Iterator[str]:
        """The canonical names of the tools ``stage`` offers, worked out as they are read (the
        shell hint reads them only on a platform it has guidance for)."""
        registry = self.tools.registry
        for name in self.tools.offered(stage):
            yield registry.canonical(name)

    async def _assemble(self) -> tuple[list[Any], list[Any]]:
        """The request's system blocks and messages. A run with custom-region scripts renders them
        off the engine thread (a slow render must not stall every other run); others assemble here."""
        ctx = self.state.ctx
        if getattr(ctx, "scripted", False):
            return await asyncio.to_thread(ctx.assemble_blocks)
        return ctx.assemble_blocks()

    def _request(self, purpose: str, assembled: tuple[list[Any], list[Any]], **overrides: Any) -> tuple[ModelRequest, Provider]:
        stage = self.state.stage
        provider, provider_name, model_name = self._provider_for(stage)
        blocks, messages = assembled
        # The batch and shell hints lead stage and routing requests alike, so both share one
        # cached prefix (a compaction summary builds its own request without them).
        blocks = [*hint_blocks(stage, self.state.settings, self._offered_names(stage)), *blocks]
        system = [block.text for block in blocks]
        system_key = hash(tuple(system))
        flag_cache_breakpoint(messages, system_key != self._last_request_system)
        self._last_request_system = system_key
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
            output_schema=spec.schema if spec and spec.schema and purpose == "stage" else None,
            extra=params,
            timeout_s=stage.request_timeout_secs or self.state.settings.limits.request_timeout_secs,
            system_blocks=blocks,
        )
        if purpose == "stage":
            request.duties = self._duties(stage)
        for key, value in overrides.items():
            setattr(request, key, value)
        self._layout = (request, region_sizes(self.state.ctx.visible_regions()), system_key)
        return request, provider

    def _duties(self, stage: StagePlan) -> StageDuties:
        """What the stage owes at this turn (a hint for stand-in models such as the mock)."""
        state = self.state
        owes = self._owes.get(stage.name)
        if owes is None:  # whether anything can be owed besides a tool call: fixed for a stage
            owes = self._owes[stage.name] = (bool(set(stage.tools) & CONTEXT_WRITERS),
                                             any(edge.gate is not None for edge in stage.transitions or ()))
        required = unmet_required_regions(state) if owes[0] else []
        duties = stage_duties(stage, state.progress, state.ctx, required) if any(owes) else StageDuties()
        enabled, maximum, _ = stage.nudge.resolve(state.settings.nudge)
        progress = state.progress
        duties.use_a_tool = enabled and progress.total_tool_calls == 0 and progress.text_only_nudges < maximum
        return duties

    async def _complete(self, request: ModelRequest, provider: Provider) -> ModelResponse:
        """One model call, journaled before anyone uses its outcome; a resumed run replaying its
        journal gets the recorded outcome instead (the provider is not asked)."""
        self._last_model = f"{request.provider}/{request.model}"
        self._sent_at = time.time()  # the call's start, on its model_call event (a trace's span)
        journal = self.state.journal
        if journal is not None:
            try:
                replayed = journal.replay_model(request)  # raises a journaled failure
            except ProviderError:
                _tell_replayed(journal, provider, request)
                raise
            if replayed is not None:
                _tell_replayed(journal, provider, request)
                return replayed
        try:
            response = await self._ask(request, provider)
        except ProviderError as exc:
            # A circuit's refusal asked nobody: it is not an outcome a resume should replay.
            if journal is not None and not isinstance(exc, CircuitRefused):
                journal.record_model(request, error=exc)
            raise
        if journal is not None:
            journal.record_model(request, response)
        return response

    async def _ask(self, request: ModelRequest, provider: Provider) -> ModelResponse:
        """One model call through the model's circuit breaker, with the run's retry policy for
        transient errors; streamed text becomes ``model_text`` events and every retry a
        ``model_retry`` event."""
        key = f"{request.provider}/{request.model}"
        config = self.state.settings.providers
        refusal = CIRCUITS.before_call(key, config.provider_failures_before_open)
        if refusal is not None:
            self._circuit_event(key, refusal.failures, refusal.cooldown_s, refusal.error.message)
            self._circuit_refused.add(key)
            raise CircuitRefused(refusal.error.kind, refusal.error.message)
        try:
            response = await self._attempts(request, provider)
        except ProviderError as exc:
            if CIRCUITS.failure(key, exc, config.provider_failures_before_open, config.provider_circuit_cooldown_secs):
                self._circuit_event(key, config.provider_failures_before_open,
                                    float(config.provider_circuit_cooldown_secs), exc.message, opened=True)
            raise
        CIRCUITS.success(key)
        return response

    def _circuit_event(self, key: str, failures: int, cooldown_s: float, reason: str, opened: bool = False) -> None:
        """Say once per run and model that its calls fail fast (and again whenever this run opens it)."""
        if not opened and key in self._circuits_told:
            return
        self._circuits_told.add(key)
        state = self.state
        state.rec.emit(ev.CircuitOpen(state.run_id, state.stage.name, model=key, failures=failures,
                                      cooldown_s=cooldown_s, reason=reason))

    async def _attempts(self, request: ModelRequest, provider: Provider) -> ModelResponse:
        """The call's attempts under the run's retry policy (see :meth:`_ask`)."""
        retry = self.retry
        attempt = 0
        if request.provider in self._rate_limits:
            limit = self._rate_limits[request.provider]
        else:
            limit = self._rate_limits[request.provider] = limit_for(request.provider, self.state.settings)
        while True:
            attempt += 1
            stream = TextStream(self.state, request.purpose, attempt)
            request.on_text = stream.push
            try:
                admission = None
                if limit is not None:  # [rate_limits.<provider>]: wait for room in its minute
                    admission = await RATE_LIMITS.admit(
                        request.provider, limit, estimate_tokens(request_text(request)),
                        on_wait=lambda delay: self._rate_wait(request.provider, delay))
                async with inference_slots(self.state.settings, request.provider, request.model):
                    # Awaited in this task (a deadline as asyncio.timeout's, not wait_for: no task of its
                    # own), so a SystemExit or KeyboardInterrupt the provider raises is caught below like any error.
                    if request.timeout_s:
                        async with call_deadline(request.timeout_s):
                            response = await call_complete(provider, request)
                    else:
                        response = await call_complete(provider, request)
                    if admission is not None:
                        usage = response.usage
                        RATE_LIMITS.settle(admission, usage.prompt_tokens + usage.cached_tokens
                                           + usage.cache_write_tokens + usage.completion_tokens)
                    return response
            except asyncio.TimeoutError:
                waited = f" within {request.timeout_s:g} s" if request.timeout_s else " in time"
                error = ProviderError("transport", f"the model did not answer{waited}")
            except ProviderError as exc:
                error = exc
            except CALLEE_ERRORS as exc:  # a broken provider is a failed model call, not a crash of lev_nb
                name = getattr(provider, "name", type(provider).__name__)
                what = f"{type(exc).__name__}: {exc}"
                error = ProviderError("api", f"the '{name}' provider failed: {what}")
            finally:
                if stream.handed_over:
                    await asyncio.sleep(0)  # let deltas handed over from a worker thread land first
                stream.flush()
                request.on_text = None
            if not error.transient or attempt >= retry.max_attempts:
                raise error
            delay = min(retry.base_delay_s * 2 ** (attempt - 1), retry.max_delay_s)
            if error.retry_after is not None:
                delay = min(max(delay, error.retry_after), retry.max_delay_s)
            self.state.rec.emit(
                ev.ModelRetry(
                    self.state.run_id, self.state.stage.name, provider=request.provider, model=request.model,
                    attempt=attempt, max_attempts=retry.max_attempts, delay_s=delay,
                    reason=f"{error.message}; retry {attempt} of {retry.max_attempts - 1} in {delay:g} s",
                )
            )
            await asyncio.sleep(delay)

    def _rate_wait(self, provider: str, delay: float) -> None:
        """Say (once per run and provider) that calls wait for the provider's rate limit."""
        if provider in self._rate_told:
            return
        self._rate_told.add(provider)
        self.state.warn(f"calls to {provider} wait for its [rate_limits.{provider}] limit "
                        f"(the next in {delay:.0f} s); raise or remove the limit to go faster")

    # -- the record of a call -----------------------------------------------------------------
    def _record(self, request: ModelRequest, response: ModelResponse | None, error: str | None = None) -> None:
        """The call's event, its token usage on meta.json, and its transcript entry."""
        state = self.state
        state.model_calls += 1
        meta = state.meta
        usage = response.usage if response else None
        cost: float | None = None
        if usage is not None:
            meta.prompt_tokens += usage.prompt_tokens
            meta.completion_tokens += usage.completion_tokens
            meta.cached_tokens += usage.cached_tokens
            meta.cache_write_tokens += usage.cache_write_tokens
            cost = self._count_usage(request, usage)
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
                cached_tokens=usage.cached_tokens if usage else 0,
                cache_write_tokens=usage.cache_write_tokens if usage else 0,
                cost_usd=cost,
                started_at=self._sent_at,
            )
        )
        state.rec.transcript(self._transcript_entry(request, response, error, cost))
        state.rec.save()

    def _count_usage(self, request: ModelRequest, usage: Any) -> float | None:
        """Add one call's tokens and cost to the run's and the stage's totals (meta.json's
        ``usage`` and ``cost_usd``); returns the call's cost, None when its model has no price."""
        settings = self.state.settings
        pricing = price_for(request.provider, request.model, settings.provider(request.provider).prices)
        cost = call_cost(usage, pricing)
        self.state.usage.add_call(self.state.stage.name, usage, cost, f"{request.provider}/{request.model}")
        return cost

    def _transcript_entry(
        self, request: ModelRequest, response: ModelResponse | None, error: str | None, cost: float | None = None
    ) -> dict[str, Any]:
        # The transcript keeps what is new in each request (the system prompt when it changed,
        # the messages after the model's last turn) so it grows with the run, not quadratically.
        built = self._layout if self._layout is not None and self._layout[0] is request else None
        system_key = built[2] if built is not None else hash(tuple(request.system))
        new_system = system_key != self._last_system_key
        self._last_system_key = system_key
        tail = _new_messages(request.messages)
        layout = region_size_maps(built[1]) if built is not None else None
        return {
            "stage": self.state.stage.name,
            "purpose": request.purpose,
            "provider": request.provider,
            "model": request.model,
            "iteration": self.state.meta.iteration,
            "system": request.system if new_system else None,
            # The region each system block renders (with the system, when it changed), and every
            # region the request was built from with its size: `lev context` reads them.
            "system_regions": [b.region for b in request.system_blocks]
            if new_system and len(request.system_blocks) == len(request.system) else None,
            "regions": layout,
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
                "cost_usd": cost,
            },
            "error": error,
        }


_REGION_SIZE_KEYS = ("name", "kind", "entries", "tokens", "max_tokens")


def region_sizes(regions: list[Any]) -> list[tuple[str, str, int, int, int | None]]:
    """Each region a request is built from: name, kind, entries, tokens (estimated) and its
    budget (``max_tokens``). Tuples, held while the call is in flight (a third of the memory of
    dicts, for every live run); :func:`region_size_maps` makes them what the transcript records."""
    return [(r.name, r.kind, len(r.entries), r.tokens, r.max_tokens) for r in regions]


def region_size_maps(sizes: list[tuple[str, str, int, int, int | None]]) -> list[dict[str, Any]]:
    """:func:`region_sizes` as the transcript records them, one map per region."""
    return [dict(zip(_REGION_SIZE_KEYS, size)) for size in sizes]


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

"""A short title for each run (``[title]``, upstream configuration.md): made once the run has
started, beside it, never in its way; shown by ``lev ps``, ``lev show`` and the run view.

The title comes from one model call (``[title] provider``/``model``, else the run's first stage's
model) asked for a few words naming the task. A run on the mock model, on a scripted one or on any
provider object handed in at launch gets a title taken from its task instead: no call is made, so
a script's turns all stay its stages' and the title is the same every time. Only a run a person
started is titled (not sub-agents and fan-out workers, which ``lev ps`` lists under it), and a
resumed run keeps the title it had.

A run whose work ends before its title is written waits a few seconds at most for it, once its
outcome is on record. A title that cannot be made leaves the run without one. That is told (``title-failed``) only when
``[title]`` is in the configuration: someone asked for that model, so its failure is news.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lev_nb.engine import events as ev
from lev_nb.errors import CALLEE_ERRORS
from lev_nb.messages import Message, ModelRequest
from lev_nb.providers.base import Provider, ProviderError, call_complete

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState
    from lev_nb.engine.plan.types import RunPlan
    from lev_nb.settings import Settings

__all__ = ["MAX_TITLE_CHARS", "title_from_task", "start_title", "stop_title"]

MAX_TITLE_CHARS = 60
MAX_TITLE_WORDS = 8
# One title call may take this long at most, whatever the stage's request timeout.
TITLE_TIMEOUT_S = 30.0
# A run that ends before its title is written waits this long at most for it, after its outcome
# is on record (a short run on a real model would otherwise never have a title).
END_GRACE_S = 10.0
# Providers whose answers are canned: their runs are titled from the task.
_CANNED = frozenset({"mock", "scripted"})
_PROMPT = ("Write a title of at most six words for the task below, naming what it is about. "
           "Answer with the title alone: no quotes, no full stop, no preamble.")


def title_from_task(task: str) -> str:
    """The deterministic title: the task's first non-empty line, at most eight words and
    :data:`MAX_TITLE_CHARS` characters ("" for an empty task)."""
    line = next((ln for ln in task.splitlines() if ln.strip()), "")
    return _clean(" ".join(line.split()[:MAX_TITLE_WORDS]))


def _clean(text: str) -> str:
    """A title as shown: one line, outer quotes and a final full stop dropped, clipped."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = " ".join(line.split()).strip("\"'`*# ").rstrip(".")
    if line.lower().startswith("title:"):
        line = line[len("title:"):].strip()
    return line if len(line) <= MAX_TITLE_CHARS else line[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def _configured(settings: Settings) -> bool:
    """Whether ``[title]`` is in the configuration (a key of it set anywhere but by default)."""
    return any(settings.source(f"title.{key}").kind != "default" for key in ("enabled", "provider", "model"))


def _writer(settings: Settings, plan: RunPlan, launched: Any) -> tuple[Provider, str, str] | None:
    """The provider and model that write the title, or None to take it from the task."""
    from lev_nb.engine.pipeline.inference import pick_model
    from lev_nb.providers.resolve import ModelOverride, provider_for

    conf = settings.title
    if launched is not None and not isinstance(launched, ModelOverride) and not (conf.provider or conf.model):
        return None  # a provider object handed in at launch (mock, a script): never asked for a title
    if isinstance(launched, ModelOverride):
        provider, model = launched.provider, launched.model
    else:
        pick = pick_model(plan.stages[0], settings) if plan.stages else None
        provider, model = (pick.provider, pick.model) if pick is not None else ("", "")
    provider, model = conf.provider or provider, conf.model or model
    if provider in _CANNED or not provider or not model:
        return None
    return provider_for(provider, model, settings), provider, model


async def _title(state: RunState, writer: tuple[Provider, str, str]) -> None:
    try:
        title = await _ask(state, *writer)
    except asyncio.CancelledError:
        raise
    except CALLEE_ERRORS as exc:  # a title is never worth a failed run (ProviderError, TimeoutError, a bug)
        if _configured(state.settings):
            why = exc.message if isinstance(exc, ProviderError) else (
                f"no answer within {TITLE_TIMEOUT_S:g} s" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}")
            state.warn(f"the run has no title: the [title] model could not write one ({why})", "title-failed",
                       in_stage=False)
        return
    _keep(state, title, "model")


def _keep(state: RunState, title: str, source: str) -> None:
    if not title:
        return
    state.meta.title = title
    state.rec.emit(ev.RunTitled(state.run_id, None, title=title, source=source))
    state.rec.save(force=True)


async def _ask(state: RunState, provider: Provider, provider_name: str, model: str) -> str:
    """One model call for the title; its usage counts towards the run's first stage."""
    from lev_nb.providers.pricing import call_cost, price_for

    settings = state.settings
    request = ModelRequest(
        provider=provider_name, model=model, system=[_PROMPT],
        messages=[Message("user", state.task[:4000] or "(no task)")],
        max_tokens=40, temperature=0.0, purpose="summary", stage=state.stage.name,
        timeout_s=min(TITLE_TIMEOUT_S, float(settings.limits.request_timeout_secs)),
    )
    async with asyncio.timeout(request.timeout_s):
        response = await call_complete(provider, request)
    cost = call_cost(response.usage, price_for(provider_name, model, settings.provider(provider_name).prices))
    state.usage.add_call(state.stage.name, response.usage, cost, f"{provider_name}/{model}")
    state.usage.write(state.meta)
    title = _clean(response.text)
    if not title:
        raise ProviderError("api", "the model answered with no title")
    return title


def start_title(state: RunState, plan: RunPlan, launched: Any, *, top_level: bool, resumed: bool) -> asyncio.Task[None] | None:
    """Title the run: at once from its task, or by a model call beside the run (the task doing
    it is returned; call on the engine loop once the run has started). No title for ``[title]
    enabled = false``, a sub-run or a resumed run."""
    if not state.settings.title.enabled or not top_level or resumed or state.meta.title:
        return None
    writer = _writer(state.settings, plan, launched)
    if writer is None:  # from the task, at once: nothing to wait for
        _keep(state, title_from_task(state.task), "task")
        return None
    return asyncio.get_running_loop().create_task(_title(state, writer), name=f"title {state.run_id}")


async def stop_title(task: asyncio.Task[None] | None) -> None:
    """The run has ended (its outcome is recorded): a title still being written gets at most
    :data:`END_GRACE_S` more to land in the record, then is given up."""
    if task is None or task.done():
        return
    await asyncio.wait({task}, timeout=END_GRACE_S)
    if task.done():
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass

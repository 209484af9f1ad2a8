"""Which model a stage starts on, and its fallbacks, under the user's configuration
(docs/providers.md#choosing-a-model): :func:`pick_model` and :func:`model_candidates`.

The engine's model calls (lev_nb.engine.pipeline.inference), the launch check, the run's title and
``lev validate``'s "Models this install would use" all read the choice from here; it imports
neither asyncio nor the providers, so that ``lev validate`` needs no more of the engine than this
and the run plan.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from lev_nb.blueprint.constants import DEFAULT_MODEL, DEFAULT_PROVIDER
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.engine.plan.types import StagePlan
    from lev_nb.settings import Settings

__all__ = ["ModelPick", "default_model", "model_candidates", "pick_model"]


def default_model(settings: Settings) -> tuple[str, str]:
    """The ``(provider, model)`` of a stage that names none: the configuration's, else the runtime's."""
    return settings.default_provider or DEFAULT_PROVIDER, settings.default_model or DEFAULT_MODEL


@record
class ModelPick:
    """The model a stage talks to: ``provider``/``model``, and why it is not the stage's first choice
    (``note``), or why none is allowed (``refusal``)."""

    provider: str
    model: str
    note: str | None = None
    refusal: str | None = None


# How long an answer of model_candidates is kept for the same stage, settings and environment: as
# long as the provider script lookup keeps its answer (lev_nb.providers.rhai_provider.RECHECK_S),
# so a script added or removed is seen within a second or two, as before.
CANDIDATES_KEPT_S = 1.0
_KEPT_MAX = 512  # answers kept per settings object (a long session loads many blueprints)


def model_candidates(stage: StagePlan, settings: Settings) -> tuple[list[ModelPick], str | None]:
    """The models a stage may run on, best first, and why none is allowed
    (docs/providers.md#fallback-and-circuit-breakers).

    The stage's list in order, the configured ``default_provider``'s entries first, keeping those
    whose provider is configured here (lev_nb can call it and its key is there); then the
    configured default and then the ``[providers] fallback_order`` entries, unless the stage sets
    ``allow_user_default = false``. Entries whose provider lev_nb can call but has no key for come
    last, so that a stage nothing configured can serve starts on the model its author named and
    the launch check names the missing key. The head is the starting model, the rest its fallbacks.

    The launch check, the run's label and each stage's first call all ask, for every run: the
    answer is kept with the settings while the stage, the environment's keys and the registered
    providers stay the same (:func:`~lev_nb.providers.resolve.availability_print`), for
    :data:`CANDIDATES_KEPT_S`.
    """
    from lev_nb.providers.resolve import availability_print

    kept_answers: dict[int, Any] = settings.memo().setdefault("model_candidates", {})
    stamp = availability_print(settings)
    now = time.monotonic()
    kept = kept_answers.get(id(stage))
    if kept is not None and kept[0] is stage and kept[1] == stamp and now - kept[2] < CANDIDATES_KEPT_S:
        picks, refusal = kept[3]
        return list(picks), refusal
    picks, refusal = _candidates(stage, settings)
    if len(kept_answers) >= _KEPT_MAX:
        kept_answers.clear()
    kept_answers[id(stage)] = (stage, stamp, now, (tuple(picks), refusal))
    return picks, refusal


def _candidates(stage: StagePlan, settings: Settings) -> tuple[list[ModelPick], str | None]:
    from lev_nb.providers.resolve import is_configured, is_registered

    preferred = settings.default_provider
    provider, model = default_model(settings)
    picks: list[ModelPick] = []
    unkeyed: list[ModelPick] = []
    seen: set[tuple[str, str]] = set()
    for choice in sorted(stage.models, key=lambda c: c.provider != preferred):
        if (choice.provider, choice.model) in seen or not is_registered(choice.provider, settings):
            continue
        seen.add((choice.provider, choice.model))
        note = None if choice == stage.models[0] else f"using {choice.provider}/{choice.model} from the stage's model list"
        if not is_configured(choice.provider, settings):
            unkeyed.append(ModelPick(choice.provider, choice.model, note if not unkeyed else None))
            continue
        picks.append(ModelPick(choice.provider, choice.model, note if not picks else None))
    named = ", ".join(f"{c.provider}/{c.model}" for c in stage.models)
    if stage.models and not stage.allow_user_default:
        if picks or unkeyed:
            return picks + [ModelPick(p.provider, p.model, None if picks else p.note) for p in unkeyed], None
        from lev_nb.providers.resolve import missing_script

        scripts = [why for why in dict.fromkeys(missing_script(c.provider, settings) for c in stage.models) if why]
        return [], (
            f"stage '{stage.name}' allows only {named}, and lev_nb cannot reach that provider "
            f"(allow_user_default = false){''.join(f'; {why}' for why in scripts)}")
    if (provider, model) not in seen and (is_configured(provider, settings) or not unkeyed):
        note = None if picks or not stage.models else (
            f"lev_nb cannot reach the provider of {named}, so stage '{stage.name}' runs on the default "
            f"{provider}/{model} (set allow_user_default = false to fail instead)")
        seen.add((provider, model))
        picks.append(ModelPick(provider, model, note))
    for entry in settings.providers.fallback_order:
        extra, sep, extra_model = entry.partition("/")
        if sep and extra_model and (extra, extra_model) not in seen and is_configured(extra, settings):
            seen.add((extra, extra_model))
            picks.append(ModelPick(extra, extra_model))
    if picks:  # a note explains the head of the list only
        unkeyed = [ModelPick(p.provider, p.model) for p in unkeyed]
    return picks + unkeyed, None


def pick_model(stage: StagePlan, settings: Settings) -> ModelPick:
    """The stage's starting model as docs/providers.md#choosing-a-model orders the choice (the head of
    :func:`model_candidates`; a ModelPick with ``refusal`` set when none is allowed)."""
    return starting_pick(stage, settings, *model_candidates(stage, settings))


def starting_pick(stage: StagePlan, settings: Settings, picks: list[ModelPick], refusal: str | None) -> ModelPick:
    """:func:`pick_model` from the stage's :func:`model_candidates` answer, for a caller that has it."""
    if refusal is not None or not picks:
        provider, model = default_model(settings)
        return ModelPick(provider, model, refusal=refusal or f"stage '{stage.name}' has no usable model")
    return picks[0]

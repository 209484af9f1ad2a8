"""What lev_nb knows about models without asking anyone: a static catalogue per provider (context
window, longest answer, tool support), with the user's ``[model_capabilities.<model>]`` corrections
applied over it (configuration.md: "name only what you are changing").

The catalogue is a convenience, not a gate: a model it does not list is still sent to its provider
exactly as written; it just gets the package's conservative assumptions (the window of
:data:`~lev_nb.blueprint.constants.DEFAULT_WINDOW_TOKENS`, tools supported), and ``lev validate``
warns about it only for the closed catalogues (``unknown-model``). The context windows of the
upstream's table (docs/providers.md#choosing-a-model) are the same numbers here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lev_nb.blueprint.constants import DEFAULT_WINDOW_TOKENS, MODEL_WINDOWS
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.settings import Settings

__all__ = ["CATALOGUE", "ModelInfo", "capabilities", "catalogue_models", "context_window", "closest_model"]


@record
class ModelInfo:
    """What one model can do. ``known`` says whether the built-in catalogue lists it; ``corrected``
    names the ``[model_capabilities]`` keys that changed it."""

    provider: str
    model: str
    max_context_tokens: int = DEFAULT_WINDOW_TOKENS
    max_output_tokens: int | None = None
    supports_tools: bool = True
    supports_streaming: bool = True
    supports_temperature: bool = True
    supports_system_prompt: bool = True
    known: bool = False
    corrected: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The JSON form ``lev models show --json`` prints."""
        return {
            "provider": self.provider, "model": self.model, "max_context_tokens": self.max_context_tokens,
            "max_output_tokens": self.max_output_tokens, "supports_tools": self.supports_tools,
            "supports_streaming": self.supports_streaming, "supports_temperature": self.supports_temperature,
            "supports_system_prompt": self.supports_system_prompt, "known": self.known,
            "corrected": list(self.corrected),
        }


def _entry(provider: str, model: str, window: int, output: int | None = None, *,
           temperature: bool = True) -> ModelInfo:
    return ModelInfo(provider, model, window, output, supports_temperature=temperature, known=True)


def _build() -> dict[str, dict[str, ModelInfo]]:
    table: dict[str, dict[str, ModelInfo]] = {}
    for (provider, model), window in MODEL_WINDOWS.items():
        table.setdefault(provider, {})[model] = _entry(provider, model, window)
    extra = [
        # Anthropic models the dated price table bills (lev_nb.providers.pricing).
        _entry("anthropic", "claude-sonnet-4-5", 200_000, 64_000),
        _entry("anthropic", "claude-haiku-4-5", 200_000, 64_000),
        _entry("anthropic", "claude-opus-4-5", 200_000, 64_000),
        # OpenAI models the dated price table bills. The reasoning models take no temperature.
        _entry("openai", "gpt-5", 400_000, 128_000, temperature=False),
        _entry("openai", "gpt-5-mini", 400_000, 128_000, temperature=False),
        _entry("openai", "gpt-5-nano", 400_000, 128_000, temperature=False),
        _entry("openai", "gpt-4.1", 1_047_576, 32_768),
        _entry("openai", "gpt-4.1-mini", 1_047_576, 32_768),
        _entry("openai", "gpt-4.1-nano", 1_047_576, 32_768),
        _entry("openai", "gpt-4o", 128_000, 16_384),
        _entry("openai", "gpt-4o-mini", 128_000, 16_384),
        _entry("openai", "o3", 200_000, 100_000, temperature=False),
        _entry("openai", "o4-mini", 200_000, 100_000, temperature=False),
    ]
    for info in extra:
        table.setdefault(info.provider, {}).setdefault(info.model, info)
    return table


#: provider -> model id -> what it can do (ollama and configured servers have no rows).
CATALOGUE: dict[str, dict[str, ModelInfo]] = _build()

_CORRECTABLE = ("max_context_tokens", "max_output_tokens", "supports_tools", "supports_streaming",
                "supports_temperature", "supports_system_prompt")


def catalogue_models(provider: str | None = None) -> list[ModelInfo]:
    """The catalogue's rows, for one provider or all of them, sorted by provider then model."""
    names = [provider] if provider is not None else sorted(CATALOGUE)
    return [info for name in names for _, info in sorted(CATALOGUE.get(name, {}).items())]


def capabilities(provider: str, model: str, settings: Settings | None = None) -> ModelInfo:
    """What ``provider/model`` can do on this install: the catalogue's row (or the conservative
    assumptions for a model it does not list) with ``[model_capabilities.<model>]`` over it (the
    entry is looked up by the bare model id, then by ``provider/model``)."""
    import dataclasses

    base = CATALOGUE.get(provider, {}).get(model) or ModelInfo(provider, model)
    window = MODEL_WINDOWS.get((provider, model))  # the one window table, read as it is now
    if window is not None and (not base.known or base.max_context_tokens != window):
        base = dataclasses.replace(base, max_context_tokens=window, known=True)
    if settings is None:
        return base
    entry = settings.model_capabilities.get(model) or settings.model_capabilities.get(f"{provider}/{model}")
    if entry is None:
        return base
    changes = {key: getattr(entry, key) for key in _CORRECTABLE if getattr(entry, key) is not None}
    if not changes:
        return base
    return dataclasses.replace(base, **changes, corrected=tuple(changes))


def context_window(provider: str, model: str, settings: Settings | None = None) -> int | None:
    """The context window of ``provider/model`` when something says what it is (a correction or
    the catalogue), else None (the caller falls back: a provider script's own, then the default)."""
    info = capabilities(provider, model, settings)
    if info.known or "max_context_tokens" in info.corrected:
        return info.max_context_tokens
    return None


def closest_model(provider: str, model: str) -> str | None:
    """The catalogued model of ``provider`` whose id is nearest to ``model`` (a likely typo's
    intended id), or None when none is close or the provider has no catalogue."""
    import difflib

    known = CATALOGUE.get(provider, {})
    if not known or model in known:
        return None
    found = difflib.get_close_matches(model, list(known), n=1, cutoff=0.8)
    return found[0] if found else None

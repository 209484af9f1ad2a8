"""Turning a model spec (``mock``, ``scripted:FILE``, ``provider/model`` or an object) into a Provider:
a built-in one, or a Rhai provider script found by its name (lev_nb.providers.rhai_provider)."""

from __future__ import annotations

import os
from typing import Callable

from lev_nb.errors import UsageError
from lev_nb.providers.anthropic import API_KEY_ENV, DEFAULT_TIMEOUT_S, AnthropicProvider
from lev_nb.messages import ModelRequest, ModelResponse
from lev_nb.providers.base import Provider, ProviderError
from lev_nb.providers.mock import MockModel
from lev_nb.providers.scripted import ScriptedModel
from lev_nb.records import record
from lev_nb.settings.loader import current as current_settings
from lev_nb.settings.model import ProviderSettings, Settings

__all__ = [
    "ModelOverride", "UnavailableProvider", "resolve_model", "provider_for", "register_provider", "is_registered",
    "known_providers", "missing_key", "ACCEPTED_FORMS",
]

ACCEPTED_FORMS = "'mock', 'scripted:FILE' (a JSON script), or 'provider/model' (e.g. 'anthropic/claude-sonnet-4-6')"

# ``factory(model, options)`` builds a provider for one model; ``options`` is the provider's
# ``[model_providers.<name>]`` table of the user's configuration.
ProviderFactory = Callable[[str, ProviderSettings], Provider]


def _anthropic(model: str, options: ProviderSettings) -> Provider:
    return AnthropicProvider(
        model,
        base_url=options.base_url,
        api_key_env=options.api_key_env or API_KEY_ENV,
        timeout_s=options.request_timeout_secs or DEFAULT_TIMEOUT_S,
    )


# Built-in providers; Rhai provider scripts are found by name when no factory matches. An
# AnthropicProvider is cheap to build: it shares one SDK client per key, base URL and event loop.
_FACTORIES: dict[str, ProviderFactory] = {
    "mock": lambda model, options: MockModel(),
    "anthropic": _anthropic,
}
# Providers lev_nb knows by name but cannot call yet.
_PLANNED: set[str] = set()


# The environment variable that holds each provider's API key, given its configured options; a
# provider not listed needs no key.
_KEY_VARIABLES: dict[str, Callable[[ProviderSettings], str]] = {
    "anthropic": lambda options: options.api_key_env or API_KEY_ENV,
}


def is_registered(name: str, settings: Settings | None = None) -> bool:
    """True when lev_nb can build a provider called ``name``: a built-in one, or a Rhai provider
    script (``$LEV_HOME/providers/<name>.rhai`` or ``[model_providers.<name>] script``)."""
    if name in _FACTORIES:
        return True
    from lev_nb.providers.rhai_provider import find_script

    return find_script(name, settings or current_settings()) is not None


def known_providers() -> list[str]:
    """The names lev_nb can build a provider for, sorted."""
    return sorted(_FACTORIES)


def missing_key(provider: str, settings: Settings | None = None) -> str | None:
    """The environment variable that should hold ``provider``'s API key when it is unset or blank,
    else None (the key is there, or the provider needs none). The variable is the configured
    ``[model_providers.<provider>] api_key_env``, else the provider's own (``ANTHROPIC_API_KEY``)."""
    variable_for = _KEY_VARIABLES.get(provider)
    if variable_for is None:
        return None
    variable = variable_for((settings or current_settings()).provider(provider))
    return None if os.environ.get(variable, "").strip() else variable


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``name/<model>`` resolvable: ``factory(model, options)`` builds the provider, where
    ``options`` is the ``[model_providers.<name>]`` table of the user's configuration."""
    _FACTORIES[name] = factory


class UnavailableProvider:
    """Stands in for a provider lev_nb cannot call; every request fails with a permanent error."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Always raise ProviderError(kind="unknown_model") with the explanation."""
        raise ProviderError("unknown_model", self.message)


def provider_for(provider: str, model: str, settings: Settings | None = None) -> Provider:
    """The provider behind a stage's ``{provider, model}`` pair, configured by ``settings`` (default:
    the current configuration).

    Never raises: a provider that is named but not available comes back as an
    :class:`UnavailableProvider`, so the failure surfaces as a normal, permanent model error of the
    stage that actually makes a request.
    """
    factory = _FACTORIES.get(provider)
    if factory is not None:
        return factory(model, (settings or current_settings()).provider(provider))
    from lev_nb.providers.rhai_provider import RhaiProvider, find_script

    settings = settings or current_settings()
    if find_script(provider, settings) is not None:
        return RhaiProvider(provider, model, settings)
    if provider in _PLANNED:
        return UnavailableProvider(
            provider, f"the '{provider}' provider is not available yet in lev_nb; run with --model mock or scripted:FILE"
        )
    known = ", ".join(sorted(set(_FACTORIES) | _PLANNED))
    return UnavailableProvider(provider, f"no provider named '{provider}' (known: {known})")


@record
class ModelOverride:
    """A ``provider/model`` spec that replaces every stage's own model choice.

    It is also a Provider: calling it builds the named provider lazily, so an unavailable one fails
    when a request is actually made, not when the spec is parsed.
    """

    provider: str
    model: str

    @property
    def name(self) -> str:
        """``provider/model``."""
        return f"{self.provider}/{self.model}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Forward the request to the named provider."""
        return await provider_for(self.provider, self.model).complete(request)


def resolve_model(spec: str | Provider | None) -> Provider | None:
    """Resolve a ``--model`` value. ``None`` means "each stage uses its own model block".

    Raises UsageError (a ValueError) for a string in none of the accepted forms, and ScriptFileError
    (a ValueError) for a scripted file that is missing or malformed.
    """
    if spec is None:
        return None
    if not isinstance(spec, str):
        if isinstance(spec, Provider):
            return spec
        raise UsageError(
            f"model must be a string or a Provider object, got {type(spec).__name__}",
            f"accepted strings: {ACCEPTED_FORMS}",
        )
    text = spec.strip()
    if text == "mock":
        return MockModel()
    if text.startswith("scripted:"):
        path = text[len("scripted:"):]
        if not path:
            raise UsageError(f"model '{spec}' names no script file", "write scripted:FILE")
        return ScriptedModel.from_file(path)
    provider, sep, model = text.partition("/")
    if sep and provider and model and " " not in text:
        return ModelOverride(provider, model)
    raise UsageError(f"model '{spec}' is not a model spec", f"use {ACCEPTED_FORMS}")

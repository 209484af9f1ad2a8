"""Turning a model spec (``mock``, ``scripted:FILE``, ``provider/model`` or an object) into a Provider:
a built-in one (anthropic, openai, openrouter, ollama, mock), one registered with
:func:`register_provider`, an OpenAI-compatible server configured as ``[model_providers.<name>]``
with a ``base_url``, or a Rhai provider script found by its name (lev_nb.providers.rhai_provider).

It is also the one place that says whether a provider is *configured* on this machine (its key is
there, or it needs none): :func:`missing_key`. Keys and gateways are read as the upstream reads
them: ``[model_providers.<name>]`` ``api_key`` / ``api_key_env`` / ``base_url`` first, then
``[providers] <name>_api_key`` / ``<name>_base_url`` (top-level ``openrouter_api_key`` and
``ollama_base_url``), then the provider's environment variable."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

from lev_nb.environ import env_value
from lev_nb.errors import UsageError
from lev_nb.providers.catalogue import capabilities
from lev_nb.providers.endpoints import API_KEY_ENV, DEFAULT_TIMEOUT_S, FLAVOURS, ollama_base_url
from lev_nb.records import record
from lev_nb.settings.loader import current as current_settings
from lev_nb.settings.model import ProviderSettings, Settings

# The provider classes (and with them asyncio and the HTTP clients) load when a provider is built:
# asking whether one is configured here (lev validate, the launch check) needs none of them.
if TYPE_CHECKING:
    from lev_nb.messages import ModelRequest, ModelResponse
    from lev_nb.providers.base import Provider

__all__ = [
    "ModelOverride", "UnavailableProvider", "resolve_model", "provider_for", "register_provider", "is_registered",
    "known_providers", "missing_key", "missing_script", "is_configured", "configured_key", "key_variable", "base_url",
    "is_compatible_server", "ACCEPTED_FORMS",
]

ACCEPTED_FORMS = "'mock', 'scripted:FILE' (a JSON script), or 'provider/model' (e.g. 'anthropic/claude-sonnet-4-6')"

# ``factory(model, options)`` builds a provider for one model; ``options`` is the provider's
# ``[model_providers.<name>]`` table of the user's configuration.
ProviderFactory = Callable[[str, ProviderSettings], "Provider"]


# The key variables of the built-in providers that need one (Ollama needs none).
_KEY_ENV: dict[str, str] = {"anthropic": API_KEY_ENV, "openai": "OPENAI_API_KEY", "openrouter": "OPENROUTER_API_KEY"}


def configured_key(provider: str, settings: Settings) -> str | None:
    """The API key written in the configuration for ``provider`` (``[model_providers.<name>]
    api_key``, ``[providers] <name>_api_key``, top-level ``openrouter_api_key``), or None."""
    own = settings.provider(provider).api_key
    if own:
        return own
    if provider == "openrouter":
        return settings.openrouter_api_key
    value = getattr(settings.providers, f"{provider}_api_key", None)
    return value if isinstance(value, str) and value else None


def key_variable(provider: str, settings: Settings) -> str | None:
    """The environment variable that holds ``provider``'s key (None: it needs none): the configured
    ``api_key_env``, else the built-in provider's own (``OPENAI_API_KEY``)."""
    return settings.provider(provider).api_key_env or _KEY_ENV.get(provider)


def base_url(provider: str, settings: Settings) -> str | None:
    """Where ``provider`` is reached: ``[model_providers.<name>] base_url``, else ``[providers]
    <name>_base_url`` (top-level ``ollama_base_url``), else its environment variable, else its
    default (None: the SDK's own)."""
    own = settings.provider(provider).base_url
    if own:
        return ollama_base_url(own) if provider == "ollama" else own
    if provider == "ollama":
        return ollama_base_url(settings.ollama_base_url or os.environ.get("OLLAMA_HOST"))
    value = getattr(settings.providers, f"{provider}_base_url", None)
    if isinstance(value, str) and value:
        return value
    flavour = FLAVOURS.get(provider)
    env = flavour.base_url_env if flavour else ("ANTHROPIC_BASE_URL" if provider == "anthropic" else None)
    if env and os.environ.get(env, "").strip():
        return os.environ[env].strip()
    return flavour.default_base_url if flavour else None


def _anthropic(model: str, options: ProviderSettings, settings: Settings) -> Provider:
    from lev_nb.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        model,
        api_key=configured_key("anthropic", settings),
        base_url=base_url("anthropic", settings),
        api_key_env=options.api_key_env or API_KEY_ENV,
        timeout_s=options.request_timeout_secs or DEFAULT_TIMEOUT_S,
    )


def _mock() -> Provider:
    from lev_nb.providers.mock import MockModel

    return MockModel()


def _compatible(name: str) -> Callable[[str, ProviderSettings, Settings], Provider]:
    """The factory of an OpenAI-compatible provider called ``name`` (built-in or configured)."""
    def build(model: str, options: ProviderSettings, settings: Settings) -> Provider:
        from lev_nb.providers.openai import OpenAIProvider

        flavour = FLAVOURS.get(name)
        env = key_variable(name, settings)
        return OpenAIProvider(
            model,
            name=name,
            label=flavour.label if flavour else f"'{name}'",
            api_key=configured_key(name, settings),
            api_key_env=env,
            key_required=env is not None and (flavour is None or flavour.key_env is not None),
            base_url=base_url(name, settings),
            timeout_s=options.request_timeout_secs or DEFAULT_TIMEOUT_S,
            completion_tokens_key=flavour.completion_tokens_key if flavour else "max_tokens",
            prompt_cache_key=flavour.prompt_cache_key if flavour else False,
            send_temperature=capabilities(name, model, settings).supports_temperature,
        )
    return build


# Built-in providers; Rhai provider scripts are found by name when no factory matches. Providers
# are cheap to build: each shares one SDK client per key, base URL and event loop.
_BUILTIN: dict[str, Callable[[str, ProviderSettings, Settings], Provider]] = {
    "mock": lambda model, options, settings: _mock(),
    "anthropic": _anthropic,
    **{name: _compatible(name) for name in FLAVOURS},
}
# Providers registered from Python (register_provider).
_FACTORIES: dict[str, ProviderFactory] = {}
# Providers lev_nb knows by name but cannot call yet.
_PLANNED: set[str] = {"google", "claude-code"}


def is_compatible_server(name: str, settings: Settings) -> bool:
    """True when ``[model_providers.<name>]`` configures an OpenAI-compatible server (a
    ``base_url`` and no Rhai script)."""
    from lev_nb.providers.rhai_provider import find_script

    options = settings.model_providers.get(name)
    return options is not None and bool(options.base_url) and not options.script and find_script(name, settings) is None


def is_registered(name: str, settings: Settings | None = None) -> bool:
    """True when lev_nb can build a provider called ``name``: a built-in one, one registered from
    Python, an OpenAI-compatible server configured with a ``base_url``, or a Rhai provider script
    (``$LEV_HOME/providers/<name>.rhai`` or ``[model_providers.<name>] script``)."""
    if name in _BUILTIN or name in _FACTORIES:
        return True
    from lev_nb.providers.rhai_provider import find_script

    settings = settings or current_settings()
    options = settings.model_providers.get(name)
    if options is not None and options.base_url:
        return True
    return find_script(name, settings) is not None


def known_providers(settings: Settings | None = None) -> list[str]:
    """The names lev_nb can build a provider for, sorted (with ``settings``, the configured
    OpenAI-compatible servers too)."""
    names = set(_BUILTIN) | set(_FACTORIES)
    if settings is not None:
        names |= {n for n, o in settings.model_providers.items() if o.base_url}
    return sorted(names)


def missing_key(provider: str, settings: Settings | None = None) -> str | None:
    """The environment variable that should hold ``provider``'s API key when no key is configured
    and the variable is unset or blank, else None (the key is there, or the provider needs none).
    The variable is the configured ``[model_providers.<provider>] api_key_env``, else the provider's
    own (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``OPENROUTER_API_KEY``)."""
    if provider in _FACTORIES:
        return None  # a provider registered from Python manages its own credentials
    settings = settings or current_settings()
    variable = key_variable(provider, settings)
    if variable is None or configured_key(provider, settings):
        return None
    if provider not in _BUILTIN and not is_compatible_server(provider, settings):
        return None  # a Rhai script reads its own key
    return None if os.environ.get(variable, "").strip() else variable


def is_configured(provider: str, settings: Settings | None = None) -> bool:
    """True when lev_nb can build ``provider`` and its key is there (or it needs none): what the
    upstream calls a configured provider, the ones a stage's model list is picked from."""
    settings = settings or current_settings()
    return is_registered(provider, settings) and missing_key(provider, settings) is None


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``name/<model>`` resolvable: ``factory(model, options)`` builds the provider, where
    ``options`` is the ``[model_providers.<name>]`` table of the user's configuration. A
    registered name wins over a built-in one of the same name."""
    global _registrations
    _FACTORIES[name] = factory
    _registrations += 1


_registrations = 0  # how many times register_provider was called: part of availability_print


def availability_print(settings: Settings) -> tuple[object, ...]:
    """What, besides ``settings`` and the provider scripts on disk, decides whether a provider is
    configured (:func:`is_configured`): the providers registered from Python, the run store (where
    scripts are looked for) and every API key variable the configuration may read. Two equal
    prints mean the same answers, so callers may keep an answer while the print stays the same.
    A key's value is in it only as its (per-process, salted) hash: a print holds no secret."""
    memo = settings.memo()
    variables = memo.get("key_variables")
    if variables is None:
        names = set(_KEY_ENV.values()) | {o.api_key_env for o in settings.model_providers.values() if o.api_key_env}
        variables = memo["key_variables"] = tuple(sorted(names))
    return (_registrations, env_value("LEV_HOME"), *(hash(env_value(v)) for v in variables))


def missing_script(name: str, settings: Settings) -> str | None:
    """Why provider ``name`` cannot be called when the script its configuration names is not
    there (``[model_providers.<name>] script``, and where it was looked for); None otherwise."""
    script = settings.provider(name).script
    if not script:
        return None
    from lev_nb.providers.rhai_provider import find_script, script_location

    if find_script(name, settings) is not None:
        return None
    return f"[model_providers.{name}] script = \"{script}\" names no file (looked for {script_location(script, name)})"


class UnavailableProvider:
    """Stands in for a provider lev_nb cannot call; every request fails with a permanent error."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Always raise ProviderError(kind="unknown_model") with the explanation."""
        from lev_nb.providers.base import ProviderError

        raise ProviderError("unknown_model", self.message)


def provider_for(provider: str, model: str, settings: Settings | None = None) -> Provider:
    """The provider behind a stage's ``{provider, model}`` pair, configured by ``settings`` (default:
    the current configuration).

    Never raises: a provider that is named but not available comes back as an
    :class:`UnavailableProvider`, so the failure surfaces as a normal, permanent model error of the
    stage that actually makes a request.
    """
    settings = settings or current_settings()
    factory = _FACTORIES.get(provider)
    if factory is not None:
        return factory(model, settings.provider(provider))
    builtin = _BUILTIN.get(provider)
    if builtin is not None:
        return builtin(model, settings.provider(provider), settings)
    from lev_nb.providers.rhai_provider import RhaiProvider, find_script

    if find_script(provider, settings) is not None:
        return RhaiProvider(provider, model, settings)
    if settings.provider(provider).base_url:
        return _compatible(provider)(model, settings.provider(provider), settings)
    if provider in _PLANNED:
        return UnavailableProvider(
            provider, f"the '{provider}' provider is not available yet in lev_nb; run with --model mock or scripted:FILE"
        )
    known = ", ".join(known_providers(settings))
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
        from lev_nb.providers.base import call_complete

        return await call_complete(provider_for(self.provider, self.model), request)


def resolve_model(spec: str | Provider | None) -> Provider | None:
    """Resolve a ``--model`` value. ``None`` means "each stage uses its own model block".

    Raises UsageError (a ValueError) for a string in none of the accepted forms, and ScriptFileError
    (a ValueError) for a scripted file that is missing or malformed.
    """
    from lev_nb.providers.base import Provider

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
        return _mock()
    if text.startswith("scripted:"):
        path = text[len("scripted:"):]
        if not path:
            raise UsageError(f"model '{spec}' names no script file", "write scripted:FILE")
        from lev_nb.providers.scripted import ScriptedModel

        return ScriptedModel.from_file(path)
    provider, sep, model = text.partition("/")
    if sep and provider and model and " " not in text:
        return ModelOverride(provider, model)
    raise UsageError(f"model '{spec}' is not a model spec", f"use {ACCEPTED_FORMS}")

"""What ``lev models`` reports: the models each provider offers on this install.

Without ``remote`` a provider's rows come from the static catalogue (lev_nb.providers.catalogue),
with ``[model_capabilities]`` corrections applied; a Rhai provider script is always asked (its
``list_models``), since it names its own catalogue. With ``remote``, an OpenAI-compatible provider
(openai, openrouter, ollama, a configured server) is asked for ``/v1/models`` and Anthropic for its
model list. Which providers are listed: the configured ones (their key is there, or they need
none), every built-in one with ``all``, or the one named.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lev_nb.providers.base import ProviderError
from lev_nb.providers.catalogue import CATALOGUE, ModelInfo, capabilities, catalogue_models
from lev_nb.providers.pricing import price_for
from lev_nb.records import record
from lev_nb.settings import Settings

__all__ = ["ModelRow", "ProviderListing", "UnknownProvider", "list_models", "show_model"]


class UnknownProvider(ValueError):
    """``-p NAME`` names nothing: no built-in provider, no configured server, no script."""


@record
class ModelRow:
    """One model as ``lev models`` prints it."""

    provider: str
    model: str
    info: ModelInfo
    source: str  # "catalogue", "remote" or "script"
    price: tuple[float, float] | None = None  # input, output USD per million tokens

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        data = self.info.to_dict()
        data["source"] = self.source
        data["price_per_mtok"] = None if self.price is None else {"input": self.price[0], "output": self.price[1]}
        return data


@record
class ProviderListing:
    """One provider's rows, whether it is configured here, and the error that stopped a listing."""

    provider: str
    configured: bool
    rows: list[ModelRow]
    error: str | None = None


def _row(provider: str, model: str, settings: Settings, source: str, **known: Any) -> ModelRow:
    info = capabilities(provider, model, settings)
    if known and not info.known:
        import dataclasses

        info = dataclasses.replace(info, **{k: v for k, v in known.items() if v is not None})
    pricing = price_for(provider, model, settings.provider(provider).prices)
    price = None if pricing is None else (pricing.input_per_mtok, pricing.output_per_mtok)
    return ModelRow(provider, model, info, source, price)


def _providers(settings: Settings, provider: str | None, every: bool) -> list[str]:
    from lev_nb.providers.resolve import is_configured, is_registered, known_providers

    if provider is not None:
        if not is_registered(provider, settings):
            raise UnknownProvider(provider)
        return [provider]
    names = [n for n in known_providers(settings) if n != "mock"]
    return names if every else [n for n in names if is_configured(n, settings)]


def _script_provider(name: str, settings: Settings) -> bool:
    from lev_nb.providers.rhai_provider import find_script
    from lev_nb.providers.resolve import _BUILTIN, _FACTORIES

    return name not in _BUILTIN and name not in _FACTORIES and find_script(name, settings) is not None


async def _remote(name: str, settings: Settings) -> list[dict[str, Any]]:
    from lev_nb.providers.anthropic import AnthropicProvider
    from lev_nb.providers.openai import OpenAIProvider
    from lev_nb.providers.resolve import provider_for

    provider = provider_for(name, "", settings)
    if isinstance(provider, OpenAIProvider):
        return await provider.list_models()
    if isinstance(provider, AnthropicProvider):
        return await _anthropic_models(provider)
    lister = getattr(provider, "list_models", None)
    if lister is None:
        raise ProviderError("api", f"the '{name}' provider cannot list its models")
    result = lister()
    return list(await result if asyncio.iscoroutine(result) else result)


async def _anthropic_models(provider: Any) -> list[dict[str, Any]]:
    import anthropic

    from lev_nb.providers.anthropic import classify_error, shared_client

    key, base_url = provider._credentials()
    try:
        page = await shared_client(key, base_url).models.list(timeout=30)
        return [{"id": m.id, "display_name": getattr(m, "display_name", m.id)} async for m in page]
    except anthropic.APIStatusError as exc:
        raise classify_error(exc.status_code, exc.response.text, exc.response.headers) from None
    except anthropic.APIConnectionError:
        raise ProviderError("transport", "could not reach the Anthropic API") from None


def _run_apart(function: Any, *args: Any) -> Any:
    """``asyncio.run(function(*args))`` on a thread of its own: the caller may be inside a running
    event loop (a notebook cell), where asyncio.run cannot start another."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(function(*args))).result()


def _listing(name: str, settings: Settings, remote: bool, every: bool = True) -> ProviderListing:
    from lev_nb.providers.resolve import is_configured

    configured = is_configured(name, settings)
    script = _script_provider(name, settings)
    if not configured and not script and not every:
        return ProviderListing(name, configured, [])  # known, but no key here: an empty table
    if not remote and not script:
        rows = [_row(i.provider, i.model, settings, "catalogue") for i in catalogue_models(name)]
        return ProviderListing(name, configured, rows)
    if not configured and not script:
        return ProviderListing(name, configured, [], "no key for it on this install")
    try:
        found = _run_apart(_remote, name, settings)
    except ProviderError as exc:
        return ProviderListing(name, configured, [], exc.message)
    source = "script" if script else "remote"
    rows = [
        _row(name, str(m["id"]), settings, source, max_context_tokens=m.get("max_context_tokens"),
             max_output_tokens=m.get("max_output_tokens"))
        for m in found if isinstance(m, dict) and m.get("id")
    ]
    return ProviderListing(name, configured, sorted(rows, key=lambda r: r.model))


def list_models(settings: Settings, provider: str | None = None, *, remote: bool = False,
                every: bool = False) -> list[ProviderListing]:
    """The listing of each provider ``lev models list`` shows (see the module docstring); raises
    UnknownProvider when ``provider`` names nothing lev_nb can call."""
    return [_listing(name, settings, remote, every) for name in _providers(settings, provider, every)]


def show_model(settings: Settings, spec: str, provider: str | None = None,
               remote: bool = False) -> tuple[ModelRow, bool | None]:
    """The row of one model (``provider/model``, or a bare id with ``provider`` or found in the
    catalogue) and, with ``remote``, whether the provider's own list has it (None: not asked)."""
    if provider is None:
        head, sep, rest = spec.partition("/")
        from lev_nb.providers.resolve import is_registered

        if sep and is_registered(head, settings):
            provider, spec = head, rest
        else:
            provider = next((p for p, models in sorted(CATALOGUE.items()) if spec in models), None)
            if provider is None:
                raise UnknownProvider(spec)
    elif not _providers(settings, provider, True):
        raise UnknownProvider(provider)
    row = _row(provider, spec, settings, "catalogue")
    if not remote:
        return row, None
    listing = _listing(provider, settings, True)
    if listing.error is not None:
        raise ProviderError("api", f"{provider}: {listing.error}")
    return row, any(r.model == spec for r in listing.rows)

"""Model backends behind one Provider protocol: anthropic (Claude), openai (OpenAI, OpenRouter,
Ollama and any OpenAI-compatible server), scripted (canned turns), mock (dry run), Rhai provider
scripts, and any object with ``name`` and ``complete`` (see :class:`Provider`).

A provider of your own is registered by name with :func:`register_provider`; a stage then names it
as ``provider = "<name>"``. What a request carries and what a response must hold are the value
types :class:`ModelRequest` and :class:`ModelResponse` (re-exported here from lev_nb.messages).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, Usage
    from lev_nb.providers.anthropic import AnthropicProvider
    from lev_nb.providers.base import ERROR_KINDS, Provider, ProviderError, call_complete
    from lev_nb.providers.mock import MockModel
    from lev_nb.providers.openai import OpenAIProvider
    from lev_nb.providers.resolve import ModelOverride, provider_for, register_provider, resolve_model
    from lev_nb.providers.scripted import ScriptedModel, ScriptFileError

# Each name loads its module on first use (PEP 562), so that a module that needs one part of this
# package (lev validate asks lev_nb.providers.resolve whether a provider is configured) does not
# import every provider, their HTTP clients and asyncio.
_EXPORTS: dict[str, str] = {
    "ModelRequest": "lev_nb.messages", "ModelResponse": "lev_nb.messages", "ToolCall": "lev_nb.messages",
    "Usage": "lev_nb.messages",
    "AnthropicProvider": "lev_nb.providers.anthropic",
    "ERROR_KINDS": "lev_nb.providers.base", "Provider": "lev_nb.providers.base",
    "ProviderError": "lev_nb.providers.base", "call_complete": "lev_nb.providers.base",
    "MockModel": "lev_nb.providers.mock",
    "OpenAIProvider": "lev_nb.providers.openai",
    "ModelOverride": "lev_nb.providers.resolve", "provider_for": "lev_nb.providers.resolve",
    "register_provider": "lev_nb.providers.resolve", "resolve_model": "lev_nb.providers.resolve",
    "ScriptedModel": "lev_nb.providers.scripted", "ScriptFileError": "lev_nb.providers.scripted",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lev_nb.providers' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ERROR_KINDS",
    "AnthropicProvider",
    "MockModel",
    "ModelOverride",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "ScriptFileError",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "call_complete",
    "provider_for",
    "register_provider",
    "resolve_model",
]
